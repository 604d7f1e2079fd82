package shufflefile

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/vfs"
)

func TestOpenRejects(t *testing.T) {
	id := ID{21, 22}
	a := parts("abc", "", "defgh")
	// Each damage is applied to a freshly committed output (CRC32).
	cases := []struct {
		name   string
		damage func(l Layout) error
		want   error
		says   string
	}{
		{"no index", func(l Layout) error { return os.Remove(Path(l, IndexName(id))) }, fs.ErrNotExist, ""},
		{"no data", func(l Layout) error { return os.Remove(Path(l, DataName(id))) }, ErrCorrupt, "has no data file"},
		{"no checksum file", func(l Layout) error { return os.Remove(Path(l, ChecksumName(id, checksum.CRC32))) }, fs.ErrNotExist, ""},
		{"truncated index", func(l Layout) error { return os.Truncate(Path(l, IndexName(id)), 8*3) }, ErrCorrupt, "holds 8 bytes, index"},
		{"torn index", func(l Layout) error { return os.Truncate(Path(l, IndexName(id)), 8*4-1) }, ErrCorrupt, "whole number"},
		{"empty index", func(l Layout) error { return os.Truncate(Path(l, IndexName(id)), 0) }, ErrCorrupt, "empty"},
		{"index with an extra offset", func(l Layout) error {
			return appendFile(Path(l, IndexName(id)), binary.BigEndian.AppendUint64(nil, 8))
		}, ErrCorrupt, "holds 24 bytes, want 32"},
		{"first offset not 0", func(l Layout) error { return patchOffset(Path(l, IndexName(id)), 0, 1) }, ErrCorrupt, "offset 0 is 1"},
		{"decreasing offsets", func(l Layout) error { return patchOffset(Path(l, IndexName(id)), 2, 1) }, ErrCorrupt, "offset 2 is 1"},
		{"data longer than index", func(l Layout) error { return appendFile(Path(l, DataName(id)), []byte("x")) }, ErrCorrupt, "holds 9 bytes, index"},
		{"data shorter than index", func(l Layout) error { return os.Truncate(Path(l, DataName(id)), 7) }, ErrCorrupt, "holds 7 bytes"},
		{"short checksum file", func(l Layout) error { return os.Truncate(Path(l, ChecksumName(id, checksum.CRC32)), 16) }, ErrCorrupt, "holds 16 bytes, want 24"},
		{"long checksum file", func(l Layout) error {
			return appendFile(Path(l, ChecksumName(id, checksum.CRC32)), make([]byte, 8))
		}, ErrCorrupt, "more than 24"},
		{"checksum high bits", func(l Layout) error { return patchOffset(Path(l, ChecksumName(id, checksum.CRC32)), 1, 1<<40) }, ErrCorrupt, "partition 1 checksum"},
	}
	for _, c := range cases {
		l := Flat(t.TempDir())
		mustCommit(t, l, id, checksum.CRC32, a)
		if err := c.damage(l); err != nil {
			t.Fatal(err)
		}
		m, err := Open(vfs.Default, l, id, checksum.CRC32)
		if err == nil {
			m.Close()
		}
		if !errors.Is(err, c.want) || !strings.Contains(fmtErr(err), c.says) {
			t.Errorf("%s: Open() = %v, want %v saying %q", c.name, err, c.want, c.says)
		}
	}
	if _, err := Open(vfs.Default, Flat(t.TempDir()), ID{-1, 0}, checksum.None); !errors.Is(err, ErrInvalidID) {
		t.Errorf("Open(negative id) = %v, want ErrInvalidID", err)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func appendFile(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// patchOffset overwrites the i-th big-endian int64 of the file at p.
func patchOffset(p string, i int, v uint64) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(binary.BigEndian.AppendUint64(nil, v), int64(8*i)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func TestVerifyDetectsFlippedByte(t *testing.T) {
	for _, alg := range algs[1:] {
		l := Flat(t.TempDir())
		id := ID{23, 24}
		mustCommit(t, l, id, alg, parts("abc", "", "defgh"))
		data := Path(l, DataName(id))
		b, err := os.ReadFile(data)
		if err != nil {
			t.Fatal(err)
		}
		b[4] ^= 0x20 // partition 2's second byte
		if err := os.WriteFile(data, b, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := Open(vfs.Default, l, id, alg)
		if err != nil {
			t.Fatal(err)
		}
		err = m.Verify()
		m.Close()
		if !errors.Is(err, ErrChecksumMismatch) || !strings.Contains(fmtErr(err), "partition 2") {
			t.Errorf("%v: Verify() of a flipped byte = %v, want ErrChecksumMismatch naming partition 2", alg, err)
		}
	}
}

func TestOpenNoPartitions(t *testing.T) {
	l := Flat(t.TempDir())
	id := ID{25, 26}
	mustCommit(t, l, id, checksum.Adler32, parts())
	m, err := Open(vfs.Default, l, id, checksum.Adler32)
	if err != nil {
		t.Fatalf("Open of a 0-partition output = %v", err)
	}
	defer m.Close()
	if m.NumPartitions() != 0 || m.Size() != 0 || m.Verify() != nil {
		t.Errorf("0-partition output: NumPartitions %d, Size %d, Verify %v", m.NumPartitions(), m.Size(), m.Verify())
	}
}
