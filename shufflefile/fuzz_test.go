package shufflefile

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/vfs"
)

// FuzzOpenIndex opens a map output whose index file is an arbitrary blob
// over a data file of dataLen bytes. Open must either reject it with
// ErrCorrupt or accept it with offsets that start at 0, never decrease and
// end at dataLen, and whose partitions read back whole; and an accepted
// index must re-encode to the same bytes.
func FuzzOpenIndex(f *testing.F) {
	// One directory per fuzzing process; each input overwrites the files.
	l := Flat(f.TempDir())
	f.Fuzz(func(t *testing.T, index []byte, dataLen uint16) {
		id := ID{1, 2}
		if err := os.WriteFile(Path(l, IndexName(id)), index, 0o644); err != nil {
			t.Fatal(err)
		}
		data := bytes.Repeat([]byte{0xa5}, int(dataLen))
		if err := os.WriteFile(Path(l, DataName(id)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := Open(vfs.Default, l, id, checksum.None)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open(index %x, data %d bytes) = %v, want nil or ErrCorrupt", index, dataLen, err)
			}
			return
		}
		defer m.Close()
		if len(m.Offsets) != len(index)/8 || m.NumPartitions() != len(index)/8-1 {
			t.Fatalf("Open(index of %d bytes): %d offsets, %d partitions", len(index), len(m.Offsets), m.NumPartitions())
		}
		if m.Offsets[0] != 0 || m.Size() != int64(dataLen) {
			t.Fatalf("Open(index %x) accepted offsets %v over %d data bytes", index, m.Offsets, dataLen)
		}
		var total int64
		for p := range m.NumPartitions() {
			if m.Lengths[p] < 0 || m.Offsets[p]+m.Lengths[p] != m.Offsets[p+1] {
				t.Fatalf("Open(index %x): partition %d length %d between offsets %d and %d", index, p, m.Lengths[p], m.Offsets[p], m.Offsets[p+1])
			}
			b, err := m.ReadPartition(p)
			if err != nil || int64(len(b)) != m.Lengths[p] {
				t.Fatalf("ReadPartition(%d) = %d bytes, %v, want %d", p, len(b), err, m.Lengths[p])
			}
			total += int64(len(b))
		}
		if total != int64(dataLen) {
			t.Fatalf("partitions hold %d bytes, data file %d", total, dataLen)
		}
		if err := m.Verify(); err != nil {
			t.Fatalf("Verify() = %v", err)
		}
		again, err := AppendIndex(nil, m.Lengths)
		if err != nil || !bytes.Equal(again, index) {
			t.Fatalf("AppendIndex(%v) = %x, %v, want the index read %x", m.Lengths, again, err, index)
		}
	})
}
