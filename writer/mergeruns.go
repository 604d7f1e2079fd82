package writer

import (
	"context"

	"github.com/shuffled/shuffled/iocrypt"
	"github.com/shuffled/shuffled/merge"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// mergeRuns merges finished runs, in files or in memory (package merge).
func (w *MapWriter) mergeRuns(ctx context.Context, res *Result) (path string, seg segments, err error) {
	fsys := w.fs
	runs := make([]merge.Run, 0, len(w.streams))
	var files []vfs.File
	defer func() {
		for _, f := range files {
			if cerr := f.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
		if err != nil && path != "" {
			_ = fsys.Remove(path)
			path = ""
		}
	}()
	var total int64
	for _, s := range w.streams {
		ru := s.sink.(*run)
		mr := merge.Run{Lengths: ru.lengths, Checksums: ru.checksums}
		if ru.mem {
			mr.Data, mr.Prefix = ru.chunks, ru.prefix
		}
		if ru.fromMemory() {
			res.MemoryRuns++
		}
		if !ru.mem || ru.prefix > 0 {
			f, err := ru.file.reopen()
			if err != nil {
				return "", segments{}, err
			}
			files = append(files, f)
			mr.File = f
		}
		runs = append(runs, mr)
		total += sum(ru.lengths)
	}
	total += w.addedIVs()
	if err := ctx.Err(); err != nil {
		return "", segments{}, err
	}
	// The merged copy holds the runs' bytes a second time until the runs
	// are removed.
	if err := w.grow(total); err != nil {
		return "", segments{}, err
	}
	path = shufflefile.TempName(w.dataPath)
	dst, err := fsys.Create(path, 0o600)
	if err != nil {
		return "", segments{}, err
	}
	vfs.Preallocate(dst, 0, total) // its size is known: the writes skip block allocation
	var mres merge.Result
	if w.spec.Encryption != nil {
		mres, err = merge.MergeEncrypted(dst, runs, w.spec.NumPartitions, w.spec.Checksum, w.encryption())
	} else {
		mres, err = merge.Merge(dst, runs, w.spec.NumPartitions, w.spec.Checksum)
	}
	if cerr := dst.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return path, segments{}, err
	}
	res.MergeBytes = mres.Bytes
	return path, segments{alg: w.spec.Checksum, lengths: mres.Lengths, checksums: mres.Checksums}, nil
}

// encryption is what a merge needs to encrypt the runs after the first.
func (w *MapWriter) encryption() merge.Encryption {
	return merge.Encryption{Key: w.spec.Encryption, IVs: w.ivs}
}

// addedIVs is how many bytes of IVs a merge of the finished runs adds
// to what they hold: one for each partition that the first run has no
// bytes of and a later run has.
func (w *MapWriter) addedIVs() int64 {
	if w.spec.Encryption == nil || len(w.streams) < 2 {
		return 0
	}
	first := w.streams[0].sink.(*run).lengths
	var n int64
	for p, l := range first {
		if l > 0 {
			continue
		}
		for _, s := range w.streams[1:] {
			if s.sink.(*run).lengths[p] > 0 {
				n += iocrypt.IVSize
				break
			}
		}
	}
	return n
}

// grow admits n more bytes on disk with the map output's Space, if any.
func (w *MapWriter) grow(n int64) error {
	if w.spec.Space == nil {
		return nil
	}
	if c := min(n, w.spaceCredit); c > 0 {
		w.spaceCredit -= c
		n -= c
	}
	if n == 0 {
		return nil
	}
	return w.spec.Space.Grow(n)
}
