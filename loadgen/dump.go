package loadgen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/writer"
)

// dumpFormat is the version of the --dump-input layout.
const dumpFormat = 1

// dumpInput writes p's batches and the run's task order into dir, which
// must be new or empty, so that another writer (the JVM writer model of
// docs/benchmarks.md) replays the same bytes:
//
//	input.properties   format, partitions, tasks, batches_per_task,
//	                   pool_batches, codec, checksum, block_size,
//	                   record_size, serialized_bytes, and task.<i> = the
//	                   pool batches of task i, in order, comma-separated
//	batch-<j>.bin      pool batch j's payload: the partitions' bytes, in order
//	batch-<j>.offsets  its partitions+1 byte offsets, little-endian int64
func dumpInput(dir string, cfg *Config, p *pool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("loadgen: --dump-input %s: %w", dir, err)
	}
	if entries, err := os.ReadDir(dir); err != nil {
		return fmt.Errorf("loadgen: --dump-input %s: %w", dir, err)
	} else if len(entries) > 0 {
		return usagef("--dump-input %s: directory is not empty (%d entries)", dir, len(entries))
	}
	var serialized int64
	for j, pb := range p.batches {
		if pb.offsets == nil {
			return errors.New("loadgen: --dump-input: the pool holds no opaque payload")
		}
		// The payload is rebuilt from the batch (a sealed memfd is no
		// longer mapped here): the same bytes, as the generator is a pure
		// function of the configuration.
		b, err := p.source(j)
		if err != nil {
			return err
		}
		data := make([]byte, 0, pb.offsets[len(pb.offsets)-1])
		for q := range cfg.Partitions {
			data = partition.AppendSlice(data, b, q)
			if int64(len(data)) != pb.offsets[q+1] {
				return fmt.Errorf("loadgen: --dump-input: batch %d partition %d ends at %d, the pool's offsets say %d", j, q, len(data), pb.offsets[q+1])
			}
		}
		offs := make([]byte, 8*len(pb.offsets))
		for i, o := range pb.offsets {
			binary.LittleEndian.PutUint64(offs[8*i:], uint64(o))
		}
		name := filepath.Join(dir, "batch-"+strconv.Itoa(pb.index))
		if err := os.WriteFile(name+".bin", data, 0o644); err != nil {
			return fmt.Errorf("loadgen: --dump-input: %w", err)
		}
		if err := os.WriteFile(name+".offsets", offs, 0o644); err != nil {
			return fmt.Errorf("loadgen: --dump-input: %w", err)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "format=%d\npartitions=%d\ntasks=%d\nbatches_per_task=%d\npool_batches=%d\n",
		dumpFormat, cfg.Partitions, cfg.Tasks, cfg.BatchesPerTask, len(p.batches))
	fmt.Fprintf(&b, "codec=%s\nchecksum=%s\nblock_size=%d\nrecord_size=%d\n",
		cfg.Codec, cfg.Checksum, codec.DefaultBlockSize, writer.DefaultRecordSize)
	for i := range cfg.Tasks {
		s, _ := p.task(i)
		serialized += s
		fmt.Fprintf(&b, "task.%d=", i)
		for j := range cfg.BatchesPerTask {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(p.at(i, j).index))
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "serialized_bytes=%d\n", serialized)
	if err := os.WriteFile(filepath.Join(dir, "input.properties"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("loadgen: --dump-input: %w", err)
	}
	return nil
}
