package shufflefile

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/vfs"
)

var algs = []checksum.Algorithm{checksum.None, checksum.Adler32, checksum.CRC32, checksum.CRC32C}

func TestCommitOpenVerify(t *testing.T) {
	// Checksums printed by java.util.zip: "hello world", then empty.
	helloWorld := map[checksum.Algorithm]uint32{checksum.Adler32: 0x1a0b045d, checksum.CRC32: 0x0d4a1185, checksum.CRC32C: 0xc99465aa}
	empty := map[checksum.Algorithm]uint32{checksum.Adler32: 1, checksum.CRC32: 0, checksum.CRC32C: 0}
	a := parts("hello world", "", "abc", "")
	for name, l := range layouts(t.TempDir()) {
		for i, alg := range algs {
			id := ID{Shuffle: 3, Map: int64(i)}
			c := newCommit(t, vfs.Default, l, id, alg, a)
			c.Sync = true
			lengths, sums, existing, err := c.Do()
			if err != nil || existing {
				t.Fatalf("%s/%v: Do() = existing %v, %v, want a fresh commit", name, alg, existing, err)
			}
			if !slices.Equal(lengths, a.lengths()) || !slices.Equal(sums, a.sums(alg)) {
				t.Errorf("%s/%v: Do() = %v, %x, want %v, %x", name, alg, lengths, sums, a.lengths(), a.sums(alg))
			}
			checkOutput(t, l, id, alg, a)
			if alg != checksum.None {
				if sums[0] != helloWorld[alg] || sums[1] != empty[alg] || sums[3] != empty[alg] {
					t.Errorf("%s/%v: checksums %x, want hello world %#x and empty %#x", name, alg, sums, helloWorld[alg], empty[alg])
				}
				b, err := os.ReadFile(Path(l, ChecksumName(id, alg)))
				want := hex.EncodeToString(AppendChecksums(nil, sums))
				if err != nil || hex.EncodeToString(b) != want || len(b) != 32 {
					t.Errorf("%s/%v: checksum file = %x, %v, want %s", name, alg, b, err, want)
				}
			}
			idx, err := os.ReadFile(Path(l, IndexName(id)))
			wantIdx := "0000000000000000" + "000000000000000b" + "000000000000000b" + "000000000000000e" + "000000000000000e"
			if err != nil || hex.EncodeToString(idx) != wantIdx {
				t.Errorf("%s/%v: index file = %x, %v, want %s", name, alg, idx, err, wantIdx)
			}
			data, err := os.ReadFile(Path(l, DataName(id)))
			if err != nil || string(data) != "hello worldabc" {
				t.Errorf("%s/%v: data file = %q, %v, want %q", name, alg, data, err, "hello worldabc")
			}
		}
		if ts := temps(t, string(layoutRoot(l))); len(ts) != 0 {
			t.Errorf("%s: temp files left after commits: %v", name, ts)
		}
	}
}

// layoutRoot returns a directory that holds all of l's files.
func layoutRoot(l Layout) string {
	switch l := l.(type) {
	case Flat:
		return string(l)
	case SparkHashed:
		return filepath.Dir(l.LocalDirs[0])
	}
	panic("unknown layout")
}

func TestMapOutputPartitionRange(t *testing.T) {
	l := Flat(t.TempDir())
	id := ID{1, 1}
	mustCommit(t, l, id, checksum.None, parts("ab", "c"))
	m, err := Open(vfs.Default, l, id, checksum.None)
	if err != nil {
		t.Fatal(err)
	}
	if m.NumPartitions() != 2 || m.Size() != 3 {
		t.Errorf("NumPartitions, Size = %d, %d, want 2, 3", m.NumPartitions(), m.Size())
	}
	for _, p := range []int{-1, 2} {
		if _, err := m.ReadPartition(p); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("ReadPartition(%d) = %v, want out of range", p, err)
		}
	}
	if err := m.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close() = %v, want nil", err)
	}
	if _, err := m.ReadPartition(0); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("ReadPartition after Close = %v, want fs.ErrClosed", err)
	}
}

func TestCommitFirstWins(t *testing.T) {
	for name, l := range layouts(t.TempDir()) {
		for _, alg := range []checksum.Algorithm{checksum.None, checksum.Adler32} {
			id := ID{Shuffle: 1, Map: 9}
			first := parts("first", "", "attempt")
			mustCommit(t, l, id, alg, first)
			before := snapshot(t, l, id, alg)

			second := parts("the second attempt", "x", "")
			c := newCommit(t, vfs.Default, l, id, alg, second)
			lengths, sums, existing, err := c.Do()
			if err != nil || !existing {
				t.Fatalf("%s/%v: second Do() = existing %v, %v, want existing", name, alg, existing, err)
			}
			if !slices.Equal(lengths, first.lengths()) || !slices.Equal(sums, first.sums(alg)) {
				t.Errorf("%s/%v: second Do() = %v, %x, want the first's %v, %x", name, alg, lengths, sums, first.lengths(), first.sums(alg))
			}
			if _, err := os.Stat(c.DataTemp); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s/%v: second attempt's data temp: Stat = %v, want removed", name, alg, err)
			}
			if after := snapshot(t, l, id, alg); !maps2Equal(before, after) {
				t.Errorf("%s/%v: second attempt changed the committed files", name, alg)
			}
			checkOutput(t, l, id, alg, first)
			if err := Remove(vfs.Default, &testLocks, l, id, alg); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// snapshot returns the contents of id's committed files.
func snapshot(t testing.TB, l Layout, id ID, alg checksum.Algorithm) map[string]string {
	out := map[string]string{}
	names := []string{DataName(id), IndexName(id)}
	if alg != checksum.None {
		names = append(names, ChecksumName(id, alg))
	}
	for _, n := range names {
		b, err := os.ReadFile(Path(l, n))
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		out[n] = string(b)
	}
	return out
}

func maps2Equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestCommitLengthMismatch(t *testing.T) {
	root := t.TempDir()
	l := Flat(root)
	id := ID{2, 2}
	c := newCommit(t, vfs.Default, l, id, checksum.Adler32, parts("0123456789"))
	c.Lengths = []int64{12}
	_, _, _, err := c.Do()
	if !errors.Is(err, ErrInvalidCommit) || !strings.Contains(err.Error(), "holds 10 bytes") || !strings.Contains(err.Error(), "sum to 12") {
		t.Errorf("Do() with lengths summing past the data = %v, want ErrInvalidCommit naming 10 and 12", err)
	}
	if f := files(t, root); len(f) != 0 {
		t.Errorf("files after a failed commit: %v, want none", f)
	}
}

func TestCommitInvalid(t *testing.T) {
	cases := []struct {
		name   string
		modify func(c *Commit)
		want   error
	}{
		{"negative shuffle", func(c *Commit) { c.ID.Shuffle = -1 }, ErrInvalidID},
		{"negative map", func(c *Commit) { c.ID.Map = -1 }, ErrInvalidID},
		{"negative length", func(c *Commit) { c.Lengths = []int64{4, -1} }, ErrInvalidCommit},
		{"too few checksums", func(c *Commit) { c.Checksums = c.Checksums[:1] }, ErrInvalidCommit},
		{"checksums with none", func(c *Commit) { c.Algorithm = checksum.None }, ErrInvalidCommit},
		{"unknown algorithm", func(c *Commit) { c.Algorithm = 99 }, ErrInvalidCommit},
	}
	for _, tc := range cases {
		root := t.TempDir()
		l := Flat(root)
		c := newCommit(t, vfs.Default, l, ID{1, 2}, checksum.CRC32, parts("abc", "d"))
		tc.modify(c)
		if _, _, _, err := c.Do(); !errors.Is(err, tc.want) {
			t.Errorf("%s: Do() = %v, want %v", tc.name, err, tc.want)
		}
		if f := files(t, root); len(f) != 0 {
			t.Errorf("%s: files after a rejected commit: %v, want none (data temp removed)", tc.name, f)
		}
	}
	if _, _, _, err := (&Commit{}).Do(); !errors.Is(err, ErrInvalidCommit) {
		t.Errorf("Do() of a zero Commit = %v, want ErrInvalidCommit", err)
	}
	if _, _, _, err := (&Commit{FS: vfs.Default, Layout: Flat(t.TempDir()), ID: ID{1, 1}, DataTemp: "x"}).Do(); !errors.Is(err, ErrInvalidCommit) {
		t.Errorf("Do() of a Commit without Locks = %v, want ErrInvalidCommit", err)
	}
}

func TestCommitDataTempIsFinalName(t *testing.T) {
	root := t.TempDir()
	l := Flat(root)
	id := ID{1, 2}
	mustCommit(t, l, id, checksum.None, parts("abc"))
	c := &Commit{FS: vfs.Default, Locks: &testLocks, Layout: l, ID: id, DataTemp: Path(l, DataName(id)), Lengths: []int64{3}}
	if _, _, _, err := c.Do(); !errors.Is(err, ErrInvalidCommit) {
		t.Errorf("Do() with DataTemp = the data file = %v, want ErrInvalidCommit", err)
	}
	checkOutput(t, l, id, checksum.None, parts("abc"))
}

// TestCommitPartitionCountDiffers: an index of another partition count
// does not mark the output committed, as in Spark's
// IndexShuffleBlockResolver.checkIndexAndDataFile: the new attempt
// overwrites it.
func TestCommitPartitionCountDiffers(t *testing.T) {
	root := t.TempDir()
	l := Flat(root)
	id := ID{4, 4}
	mustCommit(t, l, id, checksum.CRC32, parts("ab", "cd"))
	second := parts("a", "b", "cd")
	c := newCommit(t, vfs.Default, l, id, checksum.CRC32, second)
	lengths, _, existing, err := c.Do()
	if err != nil || existing || len(lengths) != 3 {
		t.Fatalf("Do() with another partition count = %v, existing %v, %v; want a fresh commit of 3 partitions", lengths, existing, err)
	}
	checkOutput(t, l, id, checksum.CRC32, second)
	if ts := temps(t, root); len(ts) != 0 {
		t.Errorf("temp files left: %v", ts)
	}
}

// TestCommitIndexWithoutData: an index whose data file is missing marks
// nothing committed (Spark overwrites it), even when its offsets are all 0.
func TestCommitIndexWithoutData(t *testing.T) {
	for _, first := range []attemptData{parts("ab", "cd"), parts("", "")} {
		root := t.TempDir()
		l := Flat(root)
		id := ID{5, 5}
		mustCommit(t, l, id, checksum.CRC32, first)
		if err := os.Remove(Path(l, DataName(id))); err != nil {
			t.Fatal(err)
		}
		second := parts("xyz", "w")
		c := newCommit(t, vfs.Default, l, id, checksum.CRC32, second)
		if _, _, existing, err := c.Do(); err != nil || existing {
			t.Fatalf("Do() over an index without data (first %q) = existing %v, %v; want a fresh commit", first, existing, err)
		}
		checkOutput(t, l, id, checksum.CRC32, second)
	}
}

// TestCommitExistingChecksumRebuilt: a committed output without a usable
// checksum file for the attempt's algorithm gets one computed from the
// committed data, not from the losing attempt's checksums.
func TestCommitExistingChecksumRebuilt(t *testing.T) {
	damage := map[string]func(path string) error{
		"missing":   func(string) error { return nil },
		"truncated": func(p string) error { return os.WriteFile(p, []byte{0, 0, 0}, 0o644) },
		"too long":  func(p string) error { return os.WriteFile(p, make([]byte, 8*5), 0o644) },
		"high bits": func(p string) error { return os.WriteFile(p, bytes.Repeat([]byte{0xff}, 16), 0o644) },
	}
	for name, fn := range damage {
		root := t.TempDir()
		l := Flat(root)
		id := ID{5, 5}
		first := parts("committed", "")
		mustCommit(t, l, id, checksum.None, first)
		ck := Path(l, ChecksumName(id, checksum.Adler32))
		if err := fn(ck); err != nil {
			t.Fatal(err)
		}
		c := newCommit(t, vfs.Default, l, id, checksum.Adler32, parts("loser", "xyz"))
		lengths, sums, existing, err := c.Do()
		if err != nil || !existing {
			t.Fatalf("%s: Do() = existing %v, %v, want existing", name, existing, err)
		}
		if !slices.Equal(lengths, first.lengths()) || !slices.Equal(sums, first.sums(checksum.Adler32)) {
			t.Errorf("%s: Do() = %v, %x, want %v, %x", name, lengths, sums, first.lengths(), first.sums(checksum.Adler32))
		}
		checkOutput(t, l, id, checksum.Adler32, first)
		if ts := temps(t, root); len(ts) != 0 {
			t.Errorf("%s: temp files left: %v", name, ts)
		}
	}
}

// TestCommitReplacesLeftovers: a data file without an index, or an index
// that disagrees with its data, is not committed and the next attempt
// replaces it.
func TestCommitReplacesLeftovers(t *testing.T) {
	id := ID{6, 6}
	cases := map[string]func(l Layout) error{
		"orphan data": func(l Layout) error {
			return os.WriteFile(Path(l, DataName(id)), []byte("old leftover"), 0o644)
		},
		"index longer than data": func(l Layout) error {
			idx, _ := AppendIndex(nil, []int64{4, 4})
			if err := os.WriteFile(Path(l, IndexName(id)), idx, 0o644); err != nil {
				return err
			}
			return os.WriteFile(Path(l, DataName(id)), []byte("old"), 0o644)
		},
		"corrupt index": func(l Layout) error {
			return os.WriteFile(Path(l, IndexName(id)), []byte("garbage"), 0o644)
		},
		"index without data": func(l Layout) error {
			idx, _ := AppendIndex(nil, []int64{8})
			return os.WriteFile(Path(l, IndexName(id)), idx, 0o644)
		},
	}
	for name, setup := range cases {
		root := t.TempDir()
		l := Flat(root)
		if err := setup(l); err != nil {
			t.Fatal(err)
		}
		a := parts("ab", "cdefgh")
		c := newCommit(t, vfs.Default, l, id, checksum.CRC32C, a)
		c.Sync = true
		if _, _, existing, err := c.Do(); err != nil || existing {
			t.Fatalf("%s: Do() = existing %v, %v, want a fresh commit", name, existing, err)
		}
		checkOutput(t, l, id, checksum.CRC32C, a)
	}
}

func TestCommitConcurrent(t *testing.T) {
	for name, l := range layouts(t.TempDir()) {
		id := ID{7, 7}
		const n = 8
		attempts := make([]attemptData, n)
		commits := make([]*Commit, n)
		for i := range attempts {
			attempts[i] = parts(strings.Repeat("x", i+1), "", strings.Repeat("y", 2*i))
			commits[i] = newCommit(t, vfs.Default, l, id, checksum.Adler32, attempts[i])
		}
		type result struct {
			lengths  []int64
			sums     []uint32
			existing bool
			err      error
		}
		results := make([]result, n)
		var wg sync.WaitGroup
		for i := range commits {
			wg.Go(func() {
				r := &results[i]
				r.lengths, r.sums, r.existing, r.err = commits[i].Do()
			})
		}
		wg.Wait()
		winner := -1
		for i, r := range results {
			if r.err != nil {
				t.Fatalf("%s: attempt %d: Do() = %v", name, i, r.err)
			}
			if !r.existing {
				if winner >= 0 {
					t.Fatalf("%s: attempts %d and %d both committed", name, winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("%s: no attempt committed", name)
		}
		w := attempts[winner]
		for i, r := range results {
			if !slices.Equal(r.lengths, w.lengths()) || !slices.Equal(r.sums, w.sums(checksum.Adler32)) {
				t.Errorf("%s: attempt %d got %v, %x, want the winner's %v, %x", name, i, r.lengths, r.sums, w.lengths(), w.sums(checksum.Adler32))
			}
		}
		checkOutput(t, l, id, checksum.Adler32, w)
		if ts := temps(t, layoutRoot(l)); len(ts) != 0 {
			t.Errorf("%s: temp files left: %v", name, ts)
		}
	}
}

func TestRemove(t *testing.T) {
	for name, l := range layouts(t.TempDir()) {
		id := ID{8, 8}
		mustCommit(t, l, id, checksum.CRC32, parts("abc", "def"))
		if err := Remove(vfs.Default, &testLocks, l, id, checksum.CRC32); err != nil {
			t.Fatalf("%s: Remove() = %v", name, err)
		}
		if f := files(t, layoutRoot(l)); len(f) != 0 {
			t.Errorf("%s: files after Remove: %v, want none", name, f)
		}
		if _, err := Open(vfs.Default, l, id, checksum.CRC32); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: Open after Remove = %v, want fs.ErrNotExist", name, err)
		}
		if err := Remove(vfs.Default, &testLocks, l, id, checksum.CRC32); err != nil {
			t.Errorf("%s: second Remove() = %v, want nil", name, err)
		}
	}
	if err := Remove(vfs.Default, &testLocks, Flat(t.TempDir()), ID{-1, 0}, checksum.None); !errors.Is(err, ErrInvalidID) {
		t.Errorf("Remove(negative id) = %v, want ErrInvalidID", err)
	}
}

func TestSweep(t *testing.T) {
	root := t.TempDir()
	l := SparkHashed{LocalDirs: []string{root}, SubDirs: 4}
	id := ID{9, 9}
	mustCommit(t, l, id, checksum.Adler32, parts("keep", "me"))
	write := func(rel string) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	removed := []string{
		write("a" + TempSuffix),
		write(filepath.Join("00", "shuffle_1_1_0.data.0123456789abcdef"+TempSuffix)),
		write(filepath.Join("03", "shuffle_1_1_0.index.0123456789abcdef"+TempSuffix)),
	}
	kept := []string{
		write("notes.txt"),
		write(filepath.Join("00", "shuffle_1_1_0.data")),
		write(filepath.Join("01", "deeper", "x"+TempSuffix)), // two levels down
		write(filepath.Join("02", TempSuffix+".other")),
	}
	n, err := Sweep(vfs.Default, root)
	if err != nil || n != len(removed) {
		t.Errorf("Sweep() = %d, %v, want %d, nil", n, err, len(removed))
	}
	for _, p := range removed {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Sweep left temp file %s", p)
		}
	}
	for _, p := range kept {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("Sweep removed %s: %v", p, err)
		}
	}
	checkOutput(t, l, id, checksum.Adler32, parts("keep", "me"))
	if _, err := Sweep(vfs.Default, filepath.Join(root, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Sweep(missing dir) = %v, want fs.ErrNotExist", err)
	}
}

// TestCommitTakesDirGroup checks that committed files take their
// directory's group, which the shuffle service reads them through. It
// needs root (to give the directory another group) and fails otherwise
// only if the files end up in another group.
func TestCommitTakesDirGroup(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to give a directory a group the test user is not in")
	}
	const gid = 54321
	dir := t.TempDir()
	if err := os.Chown(dir, -1, gid); err != nil {
		t.Fatal(err)
	}
	l := Flat(dir)
	id := ID{Shuffle: 3, Map: 4}
	c := newCommit(t, vfs.Default, l, id, checksum.Adler32, parts("ab", "c"))
	c.FileMode = 0o640
	if _, _, _, err := c.Do(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{DataName(id), IndexName(id), ChecksumName(id, checksum.Adler32)} {
		fi, err := os.Stat(Path(l, name))
		if err != nil {
			t.Fatal(err)
		}
		if g := fi.Sys().(*syscall.Stat_t).Gid; g != gid {
			t.Errorf("%s: group %d, want the directory's %d", name, g, gid)
		}
	}
}
