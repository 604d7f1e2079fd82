// Package baseline holds the designs the writer is measured against, as
// writer.Sinks: the benchmarks of package writer and the load generator's
// --compare run the same records through them and through the writer's
// own runs.
//
//   - Legacy is spark-rapids' writer before its V2: one temp file per
//     partition, opened on first use and kept open, then a sequential
//     concatenation into the data file at commit.
//   - Ceiling encodes every record on the writer's pool and throws the
//     result away: the compression ceiling, with no I/O at all; Commit
//     writes nothing and reports the lengths.
package baseline

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/writer"
)

// Legacy makes the legacy writer's sink (see the package comment).
func Legacy(s writer.SinkSpec) (writer.Sink, error) {
	return &partitionFiles{
		spec:     s,
		files:    make([]vfs.File, s.NumPartitions),
		bufs:     make([]*bufio.Writer, s.NumPartitions),
		paths:    make([]string, s.NumPartitions),
		segments: newSegments(s.NumPartitions, s.Checksum),
	}, nil
}

// Ceiling makes the compression ceiling's sink (see the package comment).
func Ceiling(s writer.SinkSpec) (writer.Sink, error) {
	return &discard{newSegments(s.NumPartitions, s.Checksum)}, nil
}

// segments counts, per partition, the bytes a sink took and their checksum.
type segments struct {
	alg       checksum.Algorithm
	lengths   []int64
	checksums []uint32
}

func newSegments(n int, alg checksum.Algorithm) segments {
	s := segments{alg: alg, lengths: make([]int64, n)}
	if alg != checksum.None {
		s.checksums = make([]uint32, n)
		for i := range s.checksums {
			s.checksums[i] = alg.Empty()
		}
	}
	return s
}

func (s *segments) add(p int, n int, sum uint32) {
	s.lengths[p] += int64(n)
	if s.alg != checksum.None {
		s.checksums[p] = s.alg.Combine(s.checksums[p], sum, int64(n))
	}
}

// partitionFiles is the Legacy sink: O(partitions) files and buffers, the
// cost the writer's runs remove.
type partitionFiles struct {
	spec  writer.SinkSpec
	files []vfs.File
	bufs  []*bufio.Writer
	paths []string
	segments
}

// bufferSize is Spark's spark.shuffle.file.buffer default.
const bufferSize = 32 << 10

func (pf *partitionFiles) Write(p int, b []byte, sum uint32) error {
	if pf.spec.Space != nil {
		if err := pf.spec.Space.Grow(int64(len(b))); err != nil {
			return err
		}
	}
	if pf.files[p] == nil {
		path := shufflefile.TempName(pf.spec.DataPath + ".p" + strconv.Itoa(p))
		f, err := pf.spec.FS.Create(path, 0o600)
		if err != nil {
			return err
		}
		pf.files[p], pf.paths[p] = f, path
		pf.bufs[p] = bufio.NewWriterSize(f, bufferSize)
	}
	if _, err := pf.bufs[p].Write(b); err != nil {
		return fmt.Errorf("write %s: %w", pf.paths[p], err)
	}
	pf.add(p, len(b), sum)
	return nil
}

func (pf *partitionFiles) Close(failed bool) error {
	var errs []error
	for p, f := range pf.files {
		if f == nil {
			continue
		}
		if !failed {
			if err := pf.bufs[p].Flush(); err != nil {
				errs = append(errs, fmt.Errorf("write %s: %w", pf.paths[p], err))
			}
		}
		if err := f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", pf.paths[p], err))
		}
		pf.files[p], pf.bufs[p] = nil, nil
	}
	return errors.Join(errs...)
}

// Assemble copies the partition files one after the other into the data
// temp file.
func (pf *partitionFiles) Assemble(ctx context.Context) (string, []int64, []uint32, error) {
	fsys := pf.spec.FS
	if pf.spec.Space != nil {
		var total int64
		for _, n := range pf.lengths {
			total += n
		}
		if err := pf.spec.Space.Grow(total); err != nil {
			return "", nil, nil, err
		}
	}
	path := shufflefile.TempName(pf.spec.DataPath)
	dst, err := fsys.Create(path, 0o600)
	if err != nil {
		return "", nil, nil, err
	}
	err = func() error {
		for p, src := range pf.paths {
			if src == "" {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			f, err := fsys.Open(src)
			if err != nil {
				return err
			}
			_, err = vfs.CopyRange(dst, f, 0, pf.lengths[p])
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
		return nil
	}()
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = fsys.Remove(path)
		return "", nil, nil, err
	}
	return path, pf.lengths, pf.checksums, nil
}

func (pf *partitionFiles) Remove() {
	for _, path := range pf.paths {
		if path != "" {
			_ = pf.spec.FS.Remove(path)
		}
	}
}

// discard is the Ceiling sink: it counts bytes and writes nothing.
type discard struct{ segments }

func (d *discard) Write(p int, b []byte, sum uint32) error {
	d.add(p, len(b), sum)
	return nil
}

func (d *discard) Close(bool) error { return nil }

func (d *discard) Assemble(context.Context) (string, []int64, []uint32, error) {
	return "", d.lengths, d.checksums, nil
}

func (d *discard) Remove() {}
