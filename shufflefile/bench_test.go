package shufflefile

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/vfs"
)

// BenchmarkCommit measures one commit of a 200-partition output, with and
// without fsync; staging the data temp file is not timed.
func BenchmarkCommit(b *testing.B) {
	const numPartitions = 200
	a := make(attemptData, numPartitions)
	for p := range a {
		a[p] = bytes.Repeat([]byte{byte(p)}, 512)
	}
	data := bytes.Join(a, nil)
	for _, layout := range []string{"flat", "hashed"} {
		for _, sync := range []bool{false, true} {
			b.Run(fmt.Sprintf("layout=%s/partitions=%d/sync=%v", layout, numPartitions, sync), func(b *testing.B) {
				l := layouts(b.TempDir())[layout]
				c := Commit{FS: vfs.Default, Locks: &testLocks, Layout: l, Lengths: a.lengths(), Checksums: a.sums(checksum.Adler32),
					Algorithm: checksum.Adler32, Sync: sync}
				var mapID int64
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					mapID++
					c.ID = ID{Shuffle: 1, Map: mapID}
					c.DataTemp = TempName(Path(l, DataName(c.ID)))
					if err := os.MkdirAll(dirOf(c.DataTemp), 0o755); err != nil {
						b.Fatal(err)
					}
					if err := os.WriteFile(c.DataTemp, data, 0o644); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					if _, _, _, err := c.Do(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkVerify measures reading and checksumming a committed output.
func BenchmarkVerify(b *testing.B) {
	const numPartitions, partSize = 64, 64 << 10
	a := make(attemptData, numPartitions)
	for p := range a {
		a[p] = bytes.Repeat([]byte{byte(p), 1, 2, 3}, partSize/4)
	}
	for _, alg := range algs {
		b.Run("alg="+alg.String(), func(b *testing.B) {
			l := Flat(b.TempDir())
			id := ID{1, 1}
			mustCommit(b, l, id, alg, a)
			m, err := Open(vfs.Default, l, id, alg)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			b.SetBytes(numPartitions * partSize)
			b.ReportAllocs()
			for b.Loop() {
				if err := m.Verify(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
