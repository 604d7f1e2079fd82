package shufflefile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/vfs"
)

// Commit commits one attempt's map output: a finished data temp file plus
// the partition lengths (and checksums) that describe it. Fill the fields
// and call Do once. See the package documentation for the recipe and the
// crash argument.
type Commit struct {
	FS     vfs.FS
	Layout Layout
	ID     ID
	// DataTemp is the path of the finished, closed data temp file, on the
	// same file system as the data file's directory; best a
	// TempName(Path(Layout, DataName(ID))). Do renames it into place or
	// removes it, on every path that returns (except when FS, Layout or
	// Locks is nil, or DataTemp names a committed file).
	DataTemp string
	// Lengths are the partitions' on-disk lengths; they sum to the data
	// temp file's length.
	Lengths []int64
	// Checksums are the partitions' checksums under Algorithm, one per
	// partition; nil when Algorithm is checksum.None.
	Checksums []uint32
	Algorithm checksum.Algorithm
	// Sync fsyncs the data, checksum and index temp files before they are
	// renamed, and the directories after the renames.
	Sync bool
	// FileMode, when non-zero, is the exact mode of the committed files
	// (chmod, so the umask does not narrow it; e.g. 0640 to let the
	// shuffle service's group read them). Zero creates files 0644 less
	// the umask. A directory Do creates (Spark's hashed sub-directories)
	// gets DirMode(FileMode) and its parent's setgid bit, exactly when
	// FileMode is set (EnsureDir).
	FileMode fs.FileMode
	// Locks is the table of the output's lock, the one its removals take
	// (Remove, RemoveShuffle, RemoveAll): one per process, or per owner of
	// the directories (the daemon's Server). Required.
	Locks *Locks
}

// Do commits the map output, atomically, and returns the partition lengths
// and checksums now committed.
//
// If a committed output of the same ID already exists (its index agrees
// with its data file), the first commit wins, as in Spark: Do removes this
// attempt's data temp file and returns the committed lengths and, unless
// Algorithm is checksum.None, the committed checksums, with existing true.
// When the committed output has no usable checksum file for Algorithm, Do
// computes the checksums from the committed data and writes that file. A
// committed output with another number of partitions does not count as
// committed (as in Spark): this attempt replaces it.
//
// Otherwise Do checks that the data temp file's length is the sum of
// Lengths (else ErrInvalidCommit, nothing committed), writes the checksum
// and index temp files, renames checksum, then data, then index, and
// syncs the directories.
//
// On error nothing of this attempt is left: its temp files are removed,
// and so are the files it renamed into place, index first; an output
// committed before is never touched. Commits of the same output under
// one Locks run one at a time.
//
// The directories may belong to a hostile peer (Root), so Do never blocks
// on what it finds there and never changes a file it did not make: a name
// it reads that is not a regular file (a FIFO), a data temp file with
// more than one link, and a temp file whose name no longer names the file
// Do made (or checked) when it comes to rename it fail the commit with a
// *vfs.RefusedError that names the file (it matches fs.ErrPermission);
// the mode and group of the files are set through their descriptors.
func (c *Commit) Do() (lengths []int64, checksums []uint32, existing bool, err error) {
	if c.FS == nil || c.Layout == nil || c.Locks == nil {
		return nil, nil, false, fmt.Errorf("commit %v: %w: FS, Layout and Locks must be set", c.ID, ErrInvalidCommit)
	}
	a := &attempt{c: c}
	defer func() {
		if err != nil {
			err = fmt.Errorf("commit %v: %w", c.ID, err)
			if uerr := a.undo(); uerr != nil {
				err = errors.Join(err, fmt.Errorf("commit %v: clean up: %w", c.ID, uerr))
			}
		}
	}()
	alg := c.Algorithm
	dataPath := Path(c.Layout, DataName(c.ID))
	indexPath := Path(c.Layout, IndexName(c.ID))
	var ckPath string
	if alg != checksum.None {
		ckPath = Path(c.Layout, ChecksumName(c.ID, alg))
	}
	switch filepath.Clean(c.DataTemp) {
	case ".":
		return nil, nil, false, fmt.Errorf("%w: DataTemp is empty", ErrInvalidCommit)
	case dataPath, indexPath, ckPath:
		return nil, nil, false, fmt.Errorf("%w: DataTemp %s is a committed file's path", ErrInvalidCommit, c.DataTemp)
	}
	a.temps = append(a.temps, c.DataTemp)
	if err := c.ID.Validate(); err != nil {
		return nil, nil, false, err
	}
	index, err := c.validate()
	if err != nil {
		return nil, nil, false, err
	}

	unlock := c.Locks.lock(indexPath)
	defer unlock()

	// The data temp file must be whole before anything else happens. It
	// lies in a directory a peer may write, so it is opened (a regular
	// file, without blocking: FS.Open), checked and given its mode and
	// group through one descriptor, and renamed only while its name still
	// names that file.
	df, err := c.FS.Open(c.DataTemp)
	if err != nil {
		return nil, nil, false, err
	}
	fi, err := df.Stat()
	if err != nil {
		df.Close()
		return nil, nil, false, err
	}
	if err := checkOneLink(c.DataTemp, fi); err != nil {
		df.Close()
		return nil, nil, false, err
	}
	dataTemp := tempFile{path: c.DataTemp, fi: fi}
	if total := offsetAt(index, len(c.Lengths)); fi.Size() != total {
		df.Close()
		return nil, nil, false, fmt.Errorf("%w: data temp %s holds %d bytes, partition lengths sum to %d",
			ErrInvalidCommit, c.DataTemp, fi.Size(), total)
	}

	// The first commit wins.
	offsets, staleIndex, err := committedOffsets(c.FS, dataPath, indexPath, len(c.Lengths))
	if err != nil {
		df.Close()
		return nil, nil, false, err
	}
	if offsets != nil {
		if err := df.Close(); err != nil {
			return nil, nil, false, err
		}
		lengths, checksums, err := a.useCommitted(offsets, dataPath, ckPath)
		if err != nil {
			return nil, nil, false, err
		}
		return lengths, checksums, true, nil
	}

	if c.FileMode != 0 {
		if err := c.setMode(df, c.DataTemp); err != nil {
			df.Close()
			return nil, nil, false, err
		}
	}
	if c.Sync {
		if err := df.Sync(); err != nil {
			df.Close()
			return nil, nil, false, err
		}
	}
	if err := df.Close(); err != nil {
		return nil, nil, false, err
	}
	if staleIndex {
		// An index that marks nothing committed could come to agree with
		// the new data file once it is renamed, and mark the wrong
		// partitions committed: it goes first, durably.
		if err := c.FS.Remove(indexPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, false, err
		}
		if c.Sync {
			if err := a.syncDirs(indexPath); err != nil {
				return nil, nil, false, err
			}
		}
	}
	if err := a.makeDirs(dataPath, indexPath, ckPath); err != nil {
		return nil, nil, false, err
	}
	var ckTemp tempFile
	if alg != checksum.None {
		if ckTemp, err = a.writeTemp(ckPath, AppendChecksums(nil, c.Checksums)); err != nil {
			return nil, nil, false, err
		}
	}
	indexTemp, err := a.writeTemp(indexPath, index)
	if err != nil {
		return nil, nil, false, err
	}

	// Checksum, then data, then the index: the index is the commit mark.
	if alg != checksum.None {
		if err := a.rename(ckTemp, ckPath); err != nil {
			return nil, nil, false, err
		}
	}
	if err := a.rename(dataTemp, dataPath); err != nil {
		return nil, nil, false, err
	}
	if c.Sync {
		// The data and checksum names must be durable before the index
		// name is, or a crash could keep an index whose data is gone.
		if err := a.syncDirs(dataPath, ckPath); err != nil {
			return nil, nil, false, err
		}
	}
	if err := a.rename(indexTemp, indexPath); err != nil {
		return nil, nil, false, err
	}
	if c.Sync {
		// A failure here undoes the commit: its durability is unknown.
		if err := a.syncDirs(indexPath); err != nil {
			return nil, nil, false, err
		}
	}
	return slices.Clone(c.Lengths), slices.Clone(c.Checksums), false, nil
}

// validate checks the fields against each other and returns the index
// file's bytes.
func (c *Commit) validate() ([]byte, error) {
	n := len(c.Lengths)
	switch {
	case c.Algorithm > checksum.CRC32C:
		return nil, fmt.Errorf("%w: unknown checksum algorithm %v", ErrInvalidCommit, c.Algorithm)
	case c.Algorithm == checksum.None && len(c.Checksums) != 0:
		return nil, fmt.Errorf("%w: %d checksums with algorithm none", ErrInvalidCommit, len(c.Checksums))
	case c.Algorithm != checksum.None && len(c.Checksums) != n:
		return nil, fmt.Errorf("%w: %d checksums for %d partitions", ErrInvalidCommit, len(c.Checksums), n)
	}
	return AppendIndex(make([]byte, 0, 8*(n+1)), c.Lengths)
}

// offsetAt returns offset i of an encoded index.
func offsetAt(index []byte, i int) int64 {
	return int64(binary.BigEndian.Uint64(index[8*i:]))
}

// committedOffsets returns the offsets of the committed output of n
// partitions whose index and data files are at the given paths, or nil
// when none is committed: no index, no data file, a malformed index, an
// index of another partition count, or one whose last offset is not the
// data file's length (Spark's checkIndexAndDataFile, except that a missing
// data file never passes for an empty one). staleIndex reports an index file that
// exists but marks nothing committed. Other errors (I/O) are returned:
// they say nothing about what is committed.
func committedOffsets(fsys vfs.FS, dataPath, indexPath string, n int) (offsets []int64, staleIndex bool, err error) {
	offsets, err = readIndex(fsys, indexPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, nil
	case errors.Is(err, ErrCorrupt), err == nil && len(offsets)-1 != n:
		return nil, true, nil
	case err != nil:
		return nil, false, err
	}
	fi, err := fsys.Stat(dataPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, true, nil
	case err != nil:
		return nil, false, err
	case !fi.Mode().IsRegular():
		// A FIFO (or a device) has no length to agree with; whoever put
		// it there may write the directory, and reading it could block.
		return nil, false, vfs.CheckRegular(dataPath, fi.Mode().Type())
	case fi.Size() != offsets[len(offsets)-1]:
		return nil, true, nil
	}
	return offsets, false, nil
}

// attempt is the state of one Do: what to remove if it fails.
type attempt struct {
	c *Commit
	// temps are temp files this attempt owns (some may be renamed away).
	temps []string
	// placed are the final paths this attempt renamed into place, in order.
	placed []string
}

// useCommitted gives up this attempt for the committed output with the
// given offsets: it returns the committed lengths and checksums and
// removes the data temp file.
func (a *attempt) useCommitted(offsets []int64, dataPath, ckPath string) ([]int64, []uint32, error) {
	c := a.c
	if n := len(offsets) - 1; n != len(c.Lengths) {
		return nil, nil, fmt.Errorf("%w: committed with %d partitions, this attempt has %d",
			ErrInvalidCommit, n, len(c.Lengths))
	}
	var sums []uint32
	if c.Algorithm != checksum.None {
		var err error
		if sums, err = a.committedChecksums(offsets, dataPath, ckPath); err != nil {
			return nil, nil, err
		}
	}
	if err := c.FS.Remove(c.DataTemp); err != nil {
		return nil, nil, err
	}
	return lengthsOf(offsets), sums, nil
}

// committedChecksums reads the committed checksum file or, when it is
// missing or unusable, computes the checksums from the committed data
// and writes the file.
func (a *attempt) committedChecksums(offsets []int64, dataPath, ckPath string) ([]uint32, error) {
	c := a.c
	n := len(offsets) - 1
	b, err := readSmallFile(c.FS, ckPath, 8*int64(n))
	switch {
	case err == nil && len(b) == 8*n:
		if sums, err := ParseChecksums(b); err == nil {
			return sums, nil
		}
	case err == nil, errors.Is(err, fs.ErrNotExist), errors.Is(err, ErrCorrupt):
	default:
		return nil, err
	}
	df, err := c.FS.Open(dataPath)
	if err != nil {
		return nil, err
	}
	sums, err := checksumData(df, dataPath, offsets, c.Algorithm)
	if cerr := df.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if err := a.makeDirs(ckPath); err != nil {
		return nil, err
	}
	tmp, err := a.writeTemp(ckPath, AppendChecksums(nil, sums))
	if err != nil {
		return nil, err
	}
	// Not recorded in placed: the file agrees with the committed data,
	// so a later failure keeps it.
	if err := stillNames(c.FS, tmp); err != nil {
		return nil, err
	}
	if err := c.FS.Rename(tmp.path, ckPath); err != nil {
		return nil, err
	}
	if c.Sync {
		if err := c.FS.SyncDir(filepath.Dir(ckPath)); err != nil {
			return nil, err
		}
	}
	return sums, nil
}

// perm returns the mode to create files with.
func (c *Commit) perm() fs.FileMode {
	if c.FileMode != 0 {
		return c.FileMode
	}
	return 0o644
}

// tempFile is a temp file of an attempt: its path and what its descriptor
// said it was, to tell later whether the path still names it.
type tempFile struct {
	path string
	fi   fs.FileInfo
}

// writeTemp writes b to a new temp file beside final (created with O_EXCL:
// FS.Create), gives it c.FileMode and its directory's group through the
// descriptor it created (setMode; when FileMode is set), syncs it when
// c.Sync, and returns it.
func (a *attempt) writeTemp(final string, b []byte) (tempFile, error) {
	c := a.c
	t := tempFile{path: TempName(final)}
	f, err := c.FS.Create(t.path, c.perm())
	if err != nil {
		return t, err
	}
	a.temps = append(a.temps, t.path)
	_, err = f.Write(b)
	if err == nil && c.FileMode != 0 {
		err = c.setMode(f, t.path)
	}
	if err == nil && c.Sync {
		err = f.Sync()
	}
	if err == nil {
		t.fi, err = f.Stat()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return t, err
}

// setMode gives the open file f, at path, exactly c.FileMode and its
// directory's group, through its descriptor (File.Chmod, File.Chown): in a
// directory a peer may write, the name could already name another file (a
// hard link to another client's output), whose mode and group must not
// change.
func (c *Commit) setMode(f vfs.File, path string) error {
	if err := f.Chmod(c.FileMode); err != nil {
		return err
	}
	return takeDirGroup(c.FS, f, path)
}

// takeDirGroup gives the open file (or directory) f, at path, its
// directory's group when it has another, so that the node's shuffle
// service, which reads Spark's local dirs through their group, can read
// what the daemon wrote there (SPARK-37618). The group is set through f's
// descriptor (File.Chown), never by name. A daemon that may not take the
// group (not root and not a member) fails the commit rather than commit
// files the shuffle service cannot serve.
func takeDirGroup(fsys vfs.FS, f vfs.File, path string) error {
	dfi, err := fsys.Stat(filepath.Dir(path))
	if err != nil {
		return err
	}
	ffi, err := f.Stat()
	if err != nil {
		return err
	}
	dst, ok1 := dfi.Sys().(*syscall.Stat_t)
	fst, ok2 := ffi.Sys().(*syscall.Stat_t)
	if !ok1 || !ok2 || dst.Gid == fst.Gid {
		return nil
	}
	if err := f.Chown(-1, int(dst.Gid)); err != nil {
		return fmt.Errorf("give %s its directory's group %d, so the shuffle service can read it: %w", path, dst.Gid, err)
	}
	return nil
}

// checkOneLink refuses a data temp file (described by fi) that has other
// names: the writer creates it with one (FS.Create, O_EXCL), so more mean
// that a peer who may write the directory swapped in a hard link to some
// other file (another client's output, where fs.protected_hardlinks is
// off), whose mode and group Do must not set.
func checkOneLink(path string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || uint64(st.Nlink) <= 1 {
		return nil
	}
	return &vfs.RefusedError{Path: path, Reason: fmt.Sprintf("has %d links, not the one of a temp file the daemon made", st.Nlink)}
}

// stillNames checks that t's path still names the file t describes (the
// same device and inode; the name not followed): a peer who may write the
// directory can swap a temp file for another between its creation and its
// rename, and the rename would put that file in place under the output's
// name. It does not close the window before the rename itself; what the
// daemon changes (mode, group, contents) it changed through its own
// descriptor, so a file swapped in later gets nothing from it.
func stillNames(fsys vfs.FS, t tempFile) error {
	fi, err := fsys.Lstat(t.path)
	if err != nil {
		return err
	}
	if t.fi != nil && os.SameFile(t.fi, fi) {
		return nil
	}
	return &vfs.RefusedError{Path: t.path, Reason: fmt.Sprintf(
		"is no longer the temp file this commit made (it names inode %s, the temp file was inode %s): it was replaced", inode(fi), inode(t.fi))}
}

// inode returns fi's inode number, or "?".
func inode(fi fs.FileInfo) string {
	if fi != nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			return fmt.Sprint(st.Ino)
		}
	}
	return "?"
}

// rename renames an owned temp file into place, if its name still names it
// (stillNames), and records it.
func (a *attempt) rename(t tempFile, final string) error {
	if err := stillNames(a.c.FS, t); err != nil {
		return err
	}
	if err := a.c.FS.Rename(t.path, final); err != nil {
		return err
	}
	a.placed = append(a.placed, final)
	return nil
}

// makeDirs creates the missing directories of the given paths ("" skipped)
// with EnsureDir.
func (a *attempt) makeDirs(paths ...string) error {
	var done []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		d := filepath.Dir(p)
		if slices.Contains(done, d) {
			continue
		}
		done = append(done, d)
		if err := EnsureDir(a.c.FS, d, a.c.FileMode); err != nil {
			return err
		}
	}
	return nil
}

// syncDirs syncs the directories of the given paths ("" skipped), each once.
func (a *attempt) syncDirs(paths ...string) error {
	var done []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		d := filepath.Dir(p)
		if slices.Contains(done, d) {
			continue
		}
		if err := a.c.FS.SyncDir(d); err != nil {
			return err
		}
		done = append(done, d)
	}
	return nil
}

// undo removes what the attempt placed, index first (placed in reverse),
// then its temp files. Files already gone are fine.
func (a *attempt) undo() error {
	var errs []error
	remove := func(name string) {
		if err := a.c.FS.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for i := len(a.placed) - 1; i >= 0; i-- {
		remove(a.placed[i])
	}
	for _, t := range a.temps {
		remove(t)
	}
	return errors.Join(errs...)
}

// Locks is a table of map-output locks: the commits (Commit.Do) and
// removals (Remove, RemoveShuffle, RemoveAll) of one output, keyed by its
// index path, that share a Locks run one at a time. Whoever owns the
// directories (the daemon's Server) makes one and hands it to every
// committer and remover of them. The zero value is ready to use; a Locks
// must not be copied after first use.
type Locks struct {
	mu sync.Mutex
	m  map[string]*outputLock // entries live while in use
}

type outputLock struct {
	mu   sync.Mutex
	refs int
}

// Output locks the map output id of layout l against its commit and
// removal under t and returns the unlock function. Hold it briefly: a
// commit of the output waits for it.
func (t *Locks) Output(l Layout, id ID) (unlock func()) { return t.lock(Path(l, IndexName(id))) }

// lock locks the output whose index is at indexPath and returns the
// unlock function.
func (t *Locks) lock(indexPath string) (unlock func()) {
	t.mu.Lock()
	if t.m == nil {
		t.m = make(map[string]*outputLock)
	}
	l := t.m[indexPath]
	if l == nil {
		l = &outputLock{}
		t.m[indexPath] = l
	}
	l.refs++
	t.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		t.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(t.m, indexPath)
		}
		t.mu.Unlock()
	}
}

// ReplaceFile writes data to path atomically, with the steps of Do: a temp
// file beside path (TempName) written, synced when sync, given mode
// exactly (when non-zero) and its directory's group, renamed over path,
// and the directory synced when sync. On error the temp file is gone and
// path is as it was. Writers of one path must not run concurrently.
func ReplaceFile(fsys vfs.FS, path string, data []byte, mode fs.FileMode, sync bool) (err error) {
	a := &attempt{c: &Commit{FS: fsys, Sync: sync, FileMode: mode}}
	defer func() {
		if err != nil {
			err = fmt.Errorf("shufflefile: replace %s: %w", path, err)
			if uerr := a.undo(); uerr != nil {
				err = errors.Join(err, fmt.Errorf("clean up: %w", uerr))
			}
		}
	}()
	tmp, err := a.writeTemp(path, data)
	if err != nil {
		return err
	}
	if err := stillNames(fsys, tmp); err != nil {
		return err
	}
	if err := fsys.Rename(tmp.path, path); err != nil {
		return err
	}
	if sync {
		return fsys.SyncDir(filepath.Dir(path))
	}
	return nil
}
