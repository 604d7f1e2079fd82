//go:build clib

package writer_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/writer"
	"github.com/shuffled/shuffled/writer/baseline"
)

// ceiling-c is the compression ceiling with liblz4's LZ4_compress_default
// as the lz4 encoder's block compressor (codec.UseCLZ4): the C ceiling,
// beside ceiling, the pure-Go one, in the same program. zstd is libzstd in
// both in this build.
func init() {
	modes = append(modes, benchMode{name: "ceiling-c", sink: baseline.Ceiling, setup: func(b *testing.B) {
		codec.UseCLZ4(true)
		b.Cleanup(func() { codec.UseCLZ4(false) })
	}})
}

// TestCLZ4SameMapOutput writes the same map outputs with the pure-Go lz4
// block compressor and with liblz4's and checks that the data, index and
// checksum files are byte for byte the same.
func TestCLZ4SameMapOutput(t *testing.T) {
	t.Cleanup(func() { codec.UseCLZ4(false) })
	const n = 200
	batch := writer.LineitemBatch(t, n)
	e, err := writer.New()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	for _, runs := range []int{1, 3} {
		t.Run(fmt.Sprintf("runs=%d", runs), func(t *testing.T) {
			var files [2][3][]byte
			for i, on := range []bool{false, true} {
				codec.UseCLZ4(on)
				spec := writer.Spec{ID: shufflefile.ID{Shuffle: 1, Map: int64(2*runs + i)}, NumPartitions: n, Codec: codec.LZ4,
					Checksum: checksum.Adler32, Layout: shufflefile.Flat(t.TempDir())}
				w, err := e.Open(ctx, spec)
				if err != nil {
					t.Fatal(err)
				}
				for range runs {
					if err := w.WriteBatch(ctx, batch, nil); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := w.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				for j, name := range []string{shufflefile.DataName(spec.ID), shufflefile.IndexName(spec.ID), shufflefile.ChecksumName(spec.ID, spec.Checksum)} {
					if files[i][j], err = os.ReadFile(shufflefile.Path(spec.Layout, name)); err != nil {
						t.Fatal(err)
					}
				}
			}
			// The data file is compressed: lz4 of the lineitem bytes is
			// about half their size.
			if in := int64(runs) * writer.SerializedSize(batch); int64(len(files[0][0])) >= in*3/4 {
				t.Errorf("data file of %d bytes for %d bytes of input: not compressed", len(files[0][0]), in)
			}
			for j, what := range []string{"data", "index", "checksum"} {
				if !bytes.Equal(files[0][j], files[1][j]) {
					t.Errorf("%s file with liblz4 (%d bytes) differs from the pure-Go one (%d bytes)", what, len(files[1][j]), len(files[0][j]))
				}
			}
		})
	}
}
