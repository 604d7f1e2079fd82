package shufflefile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/vfs"
)

// FuzzParseChecksums feeds ParseChecksums an arbitrary checksum file. It
// must either reject the bytes with ErrCorrupt or accept them with one
// 32-bit value per 8 bytes that re-encode to the same file; and Open of a
// map output whose checksum file those bytes are (over a data file and an
// index of as many partitions as the file claims, when that is whole) must
// agree with the parser, and Verify must then pass exactly when the file
// holds the data's real checksums and report ErrChecksumMismatch otherwise.
func FuzzParseChecksums(f *testing.F) {
	// Seeds: empty, one valid value, a high half set, a torn value, and the
	// real file of the two partitions seed 3 makes (bytes 0 1 2, and none).
	f.Add([]byte{}, uint8(0))
	f.Add(binary.BigEndian.AppendUint64(nil, 0xdeadbeef), uint8(1))
	f.Add(binary.BigEndian.AppendUint64(nil, 1<<32), uint8(2))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 1}, uint8(0))
	c := checksum.CRC32C
	f.Add(AppendChecksums(nil, []uint32{c.Update(c.Empty(), []byte{0, 1, 2}), c.Empty()}), uint8(3))

	// One directory for every input: the fuzz function runs them one at a
	// time and rewrites all three files each time.
	l := Flat(f.TempDir())
	f.Fuzz(func(t *testing.T, b []byte, seed uint8) {
		sums, perr := ParseChecksums(b)
		if perr != nil {
			if !errors.Is(perr, ErrCorrupt) {
				t.Fatalf("ParseChecksums(%x) = %v, want nil or ErrCorrupt", b, perr)
			}
			if len(b)%8 == 0 && len(b)/8 <= MaxPartitions && !hasHighHalf(b) {
				t.Fatalf("ParseChecksums(%x) = %v, want a whole file of 32-bit values accepted", b, perr)
			}
		} else {
			if len(sums) != len(b)/8 || len(b)%8 != 0 {
				t.Fatalf("ParseChecksums(%d bytes) = %d values, want %d", len(b), len(sums), len(b)/8)
			}
			if again := AppendChecksums(nil, sums); !bytes.Equal(again, b) {
				t.Fatalf("AppendChecksums(ParseChecksums(%x)) = %x, want the input", b, again)
			}
		}
		if len(b)%8 != 0 || len(b)/8 > 64 {
			return // Open rejects it by size before it parses
		}

		// A map output of len(b)/8 partitions of 0..3 bytes each (from
		// seed), with b as its CRC32C checksum file.
		n := len(b) / 8
		lengths := make([]int64, n)
		var data []byte
		for p := range lengths {
			lengths[p] = int64((int(seed) + p) % 4)
			for i := range lengths[p] {
				data = append(data, byte(int64(p)*7+i))
			}
		}
		index, err := AppendIndex(nil, lengths)
		if err != nil {
			t.Fatal(err)
		}
		id := ID{3, 4}
		for name, content := range map[string][]byte{
			IndexName(id):                     index,
			DataName(id):                      data,
			ChecksumName(id, checksum.CRC32C): b,
		} {
			if err := os.WriteFile(Path(l, name), content, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		m, oerr := Open(vfs.Default, l, id, checksum.CRC32C)
		switch {
		case perr != nil && oerr == nil:
			m.Close()
			t.Fatalf("Open accepted checksum file %x that ParseChecksums rejects: %v", b, perr)
		case perr == nil && oerr != nil:
			t.Fatalf("Open(checksum file %x) = %v, but ParseChecksums accepts it", b, oerr)
		case oerr != nil:
			if !errors.Is(oerr, ErrCorrupt) {
				t.Fatalf("Open(checksum file %x) = %v, want ErrCorrupt", b, oerr)
			}
			return
		}
		defer m.Close()
		// Verify passes exactly when the file holds the real checksums.
		var real []uint32
		var off int64
		for _, n := range lengths {
			real = append(real, checksum.CRC32C.Update(checksum.CRC32C.Empty(), data[off:off+n]))
			off += n
		}
		match := slices.Equal(real, sums)
		switch err := m.Verify(); {
		case match && err != nil:
			t.Fatalf("Verify(checksum file %x, the real checksums) = %v, want nil", b, err)
		case !match && !errors.Is(err, ErrChecksumMismatch):
			t.Fatalf("Verify(checksum file %x, real checksums %x) = %v, want ErrChecksumMismatch", b, real, err)
		}
	})
}

// hasHighHalf reports whether any 8-byte value of b has a bit set in its
// high 32 bits.
func hasHighHalf(b []byte) bool {
	for i := 0; i+8 <= len(b); i += 8 {
		if binary.BigEndian.Uint64(b[i:])>>32 != 0 {
			return true
		}
	}
	return false
}
