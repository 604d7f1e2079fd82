package partition

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

// roundTrip encodes rows [start, end) of b with AppendBlock and WriteSlice,
// checks that both give BlockSize bytes, identical ones, and that they
// decode to the same rows and re-encode to the same bytes.
func roundTrip(t *testing.T, b *Batch, start, end int) []byte {
	t.Helper()
	size := BlockSize(b, start, end)
	prefix := []byte("prefix")
	blk := AppendBlock(bytes.Clone(prefix), b, start, end)
	if !bytes.Equal(blk[:len(prefix)], prefix) {
		t.Fatalf("AppendBlock overwrote dst")
	}
	blk = blk[len(prefix):]
	if len(blk) != size || size%8 != 0 {
		t.Fatalf("rows [%d,%d): AppendBlock wrote %d bytes, BlockSize = %d, want equal multiples of 8", start, end, len(blk), size)
	}
	var w bytes.Buffer
	n, err := WriteSlice(&w, b, start, end)
	if err != nil || n != int64(size) {
		t.Fatalf("rows [%d,%d): WriteSlice = %d, %v, want %d, nil", start, end, n, err, size)
	}
	if !bytes.Equal(w.Bytes(), blk) {
		t.Fatalf("rows [%d,%d): WriteSlice and AppendBlock differ", start, end)
	}
	got, m, err := DecodeBlock(blk)
	if err != nil || m != size {
		t.Fatalf("rows [%d,%d): DecodeBlock = %d, %v, want %d, nil", start, end, m, err, size)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("rows [%d,%d): decoded batch: %v", start, end, err)
	}
	if err := sameRows(b, start, end, got); err != nil {
		t.Fatalf("rows [%d,%d): decoded batch: %v", start, end, err)
	}
	if again := AppendBlock(nil, got, 0, got.Rows); !bytes.Equal(again, blk) {
		t.Fatalf("rows [%d,%d): decoded batch re-encodes to other bytes", start, end)
	}
	return blk
}

func TestBlockRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, nulls := range []bool{false, true} {
		for _, rows := range []int{0, 1, 7, 8, 9, 64, 65, 333} {
			b := randomBatch(r, rows, nulls, 9)
			roundTrip(t, b, 0, rows) // one partition holding all rows
			for range 20 {
				start := r.IntN(rows + 1)
				end := start + r.IntN(rows-start+1)
				roundTrip(t, b, start, end) // includes starts not multiples of 8
			}
			for start := 0; start <= min(rows, 17); start++ {
				roundTrip(t, b, start, start) // 0-row slices
				roundTrip(t, b, start, min(rows, start+3))
			}
		}
	}
}

// TestBlockLongRanges covers the chunked paths of WriteSlice: validity and
// offsets longer than one scratch chunk, at odd starts.
func TestBlockLongRanges(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	b := randomBatch(r, 8*validityChunkSize+100, true, 3)
	for _, start := range []int{3, 4099} {
		roundTrip(t, b, start, b.Rows-5)
	}
}

func TestBlockEdgeCases(t *testing.T) {
	tests := []struct {
		name string
		b    *Batch
	}{
		{"no columns", &Batch{Rows: 5}},
		{"no names", &Batch{Rows: 2, Columns: []Column{{Type: Int16, Data: le32(7)}, {Type: String, Offsets: []int32{0, 0, 0}}}}},
		{"some names", &Batch{Rows: 2, Columns: []Column{{Type: Int16, Data: le32(7)}, {Name: "s", Type: String, Offsets: []int32{0, 0, 0}}}}},
		{"empty strings only", &Batch{Rows: 3, Columns: []Column{{Name: "e", Type: Binary, Offsets: []int32{0, 0, 0, 0}}}}},
		{"all null", &Batch{Rows: 10, Columns: []Column{{Name: "n", Type: Float64, Data: make([]byte, 80), Validity: []byte{0, 0}}}}},
		{"long name", &Batch{Rows: 1, Columns: []Column{{Name: strings.Repeat("n", MaxNameLen), Type: Int8, Data: []byte{1}}}}},
		{"unvalidated rows past the end", &Batch{Rows: 1, Columns: []Column{{Type: String, Offsets: []int32{0, 2, 9}, Data: []byte("abcdefghi")}}}},
	}
	for _, tt := range tests {
		if err := tt.b.Validate(); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		t.Run(tt.name, func(t *testing.T) {
			roundTrip(t, tt.b, 0, tt.b.Rows)
			if tt.b.Rows > 0 {
				roundTrip(t, tt.b, 1, tt.b.Rows)
			}
		})
	}
}

func TestAppendSliceAndDecodeBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	in, err := Partition(randomBatch(r, 1000, true, 20), []int{4}, 13)
	if err != nil {
		t.Fatal(err)
	}
	// Every partition's slice, some split into several blocks, concatenated
	// as the reader of one partition across several runs sees them.
	var all []byte
	var want []string
	for p := range in.NumPartitions() {
		start, end := in.PartitionRows(p)
		n := len(all)
		all = AppendSlice(all, in, p)
		if len(all)-n != SliceSize(in, p) {
			t.Fatalf("partition %d: AppendSlice wrote %d bytes, SliceSize = %d", p, len(all)-n, SliceSize(in, p))
		}
		bounds := SplitRows(in, start, end, 1024)
		for k := 1; k < len(bounds); k++ {
			all = AppendBlock(all, in, bounds[k-1], bounds[k])
		}
		for i := start; i < end; i++ {
			want = append(want, rowText(in, i))
		}
		for i := start; i < end; i++ {
			want = append(want, rowText(in, i))
		}
	}
	batches, err := DecodeBlocks(all)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range batches {
		for i := range b.Rows {
			got = append(got, rowText(b, i))
		}
	}
	if len(got) != len(want) {
		t.Fatalf("DecodeBlocks gave %d rows in %d blocks, want %d", len(got), len(batches), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("row %d = %s, want %s", i, got[i], want[i])
		}
	}
	// The same through a stream, one byte at a time.
	d := NewDecoder(iotest.OneByteReader(bytes.NewReader(all)), 0)
	for i := 0; ; i++ {
		b, err := d.Next()
		if err == io.EOF {
			if i != len(batches) {
				t.Fatalf("Decoder returned %d blocks, want %d", i, len(batches))
			}
			break
		}
		if err != nil {
			t.Fatalf("Decoder.Next() = %v", err)
		}
		if err := sameRows(batches[i], 0, batches[i].Rows, b); err != nil {
			t.Fatalf("Decoder block %d: %v", i, err)
		}
	}
}

func TestSplitRows(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	b := randomBatch(r, 500, true, 50)
	for _, max := range []int{1, 200, 1000, 5000, 1 << 30} {
		for _, rg := range [][2]int{{0, 500}, {3, 3}, {17, 401}} {
			bounds := SplitRows(b, rg[0], rg[1], max)
			if bounds[0] != rg[0] || bounds[len(bounds)-1] != rg[1] || len(bounds) < 2 {
				t.Fatalf("SplitRows(%v, %d) = %v, want bounds from %d to %d", rg, max, bounds, rg[0], rg[1])
			}
			for k := 1; k < len(bounds); k++ {
				s, e := bounds[k-1], bounds[k]
				if rg[0] == rg[1] {
					continue
				}
				if e <= s {
					t.Fatalf("SplitRows(%v, %d) = %v: empty range", rg, max, bounds)
				}
				if size := BlockSize(b, s, e); size > max && e-s > 1 {
					t.Fatalf("SplitRows(%v, %d): rows [%d,%d) make %d bytes", rg, max, s, e, size)
				}
				if e < rg[1] && BlockSize(b, s, e+1) <= max {
					t.Fatalf("SplitRows(%v, %d): rows [%d,%d) could take one more row", rg, max, s, e)
				}
			}
		}
	}
}

func TestWriteSliceErrors(t *testing.T) {
	b := validBatch()
	for _, rg := range [][2]int{{-1, 2}, {2, 1}, {0, 4}} {
		if n, err := WriteSlice(io.Discard, b, rg[0], rg[1]); n != 0 || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("WriteSlice(rows %v) = %d, %v, want 0, ErrInvalidArgument", rg, n, err)
		}
	}
	// A writer failing at each byte count: the error surfaces.
	size := BlockSize(b, 0, 3)
	for limit := 0; limit < size; limit += 5 {
		w := &failingWriter{left: limit}
		if _, err := WriteSlice(w, b, 0, 3); !errors.Is(err, errWrite) {
			t.Errorf("WriteSlice to a writer failing after %d bytes = %v, want errWrite", limit, err)
		}
	}
}

var errWrite = errors.New("write failed")

type failingWriter struct{ left int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		n := w.left
		w.left = 0
		return n, errWrite
	}
	w.left -= len(p)
	return len(p), nil
}

// TestDecodeBlockCorrupt damages a valid block field by field.
func TestDecodeBlockCorrupt(t *testing.T) {
	b := &Batch{Rows: 3, Columns: []Column{
		{Name: "i", Type: Int32, Data: le32(1, 2, 3), Validity: []byte{0b101}},
		{Name: "s", Type: String, Offsets: []int32{0, 1, 1, 4}, Data: []byte("abcd")},
		{Name: "d", Type: Decimal64, Precision: 10, Scale: 2, Data: le64(1, 2, 3)},
	}}
	good := AppendBlock(nil, b, 0, 3)
	// Layout: header 0..16, descriptors 16..40, names 40..56 (6 + 3 bytes),
	// i: validity 56..64, data 64..80 (12 + 4); s: offsets 80..96, data
	// 96..104 (4 + 4);
	// d: data 104..128.
	if len(good) != 128 {
		t.Fatalf("test block is %d bytes, the offsets below assume 128", len(good))
	}
	set32 := func(off int, v uint32) func([]byte) {
		return func(p []byte) { binary.LittleEndian.PutUint32(p[off:], v) }
	}
	setByte := func(off int, v byte) func([]byte) { return func(p []byte) { p[off] = v } }
	tests := []struct {
		name   string
		damage func([]byte)
		trunc  int // cut the input to this length when > 0
		want   string
		err    error
	}{
		{"short input", nil, 10, "shorter than the 16-byte header", ErrCorruptBlock},
		{"magic", setByte(0, 'X'), 0, "magic", ErrCorruptBlock},
		{"version", setByte(4, 2), 0, "version 2", ErrBlockVersion},
		{"block flags", setByte(5, 0x81), 0, "block flags", ErrCorruptBlock},
		{"rows too many", set32(8, 1<<31), 0, "rows = 2147483648", ErrCorruptBlock},
		{"rows mismatch", set32(8, 4), 0, "data length 12, want 4 rows", ErrCorruptBlock},
		{"length unaligned", set32(12, 124), 0, "not a multiple of 8", ErrCorruptBlock},
		{"length past input", nil, 120, "past the end of the input", ErrCorruptBlock},
		{"length short", set32(12, 120), 0, "", ErrCorruptBlock},
		{"length long", func(p []byte) { binary.LittleEndian.PutUint32(p[12:], 136) }, 0, "", ErrCorruptBlock},
		{"columns too many", func(p []byte) { binary.LittleEndian.PutUint16(p[6:], 60000) }, 0, "descriptors do not fit", ErrCorruptBlock},
		{"type", setByte(16, 0), 0, "column 0: type = 0", ErrCorruptBlock},
		{"type unknown", setByte(16, 99), 0, "type = 99", ErrCorruptBlock},
		{"column flags", setByte(17, 2), 0, "column 0: flags", ErrCorruptBlock},
		{"precision on int", setByte(18, 3), 0, "precision, scale = 3, 0", ErrCorruptBlock},
		{"decimal precision", setByte(34, 19), 0, "column 2: decimal precision", ErrCorruptBlock},
		{"decimal scale", setByte(35, 11), 0, "column 2: decimal precision", ErrCorruptBlock},
		{"fixed data length", set32(20, 16), 0, "data length 16, want 3 rows", ErrCorruptBlock},
		{"string data length", set32(28, 5), 0, "offsets[3] = 4, want data length 5", ErrCorruptBlock},
		{"string data length short", set32(28, 3), 0, "past the end of data", ErrCorruptBlock},
		{"name length", func(p []byte) { binary.LittleEndian.PutUint16(p[40:], 200) }, 0, "names", ErrCorruptBlock},
		{"names padding", setByte(55, 1), 0, "names: nonzero padding", ErrCorruptBlock},
		{"names all empty", func(p []byte) { clear(p[40:56]) }, 0, "every name empty", ErrCorruptBlock},
		{"validity tail bits", setByte(56, 0b1101), 0, "validity bits past row 3", ErrCorruptBlock},
		{"validity padding", setByte(60, 1), 0, "validity: nonzero padding", ErrCorruptBlock},
		{"data padding", setByte(78, 1), 0, `column 0 "i": data: nonzero padding`, ErrCorruptBlock},
		{"first offset", set32(80, 1), 0, "offsets[0] = 1", ErrCorruptBlock},
		{"offsets decrease", set32(84, 3), 0, "offsets[2] = 1, less than offsets[1] = 3", ErrCorruptBlock},
		{"string data padding", setByte(101, 1), 0, `column 1 "s": data: nonzero padding`, ErrCorruptBlock},
		{"added validity flag", setByte(33, 1), 0, "", ErrCorruptBlock},
		{"dropped validity flag", setByte(17, 0), 0, "", ErrCorruptBlock},
	}
	for _, tt := range tests {
		p := bytes.Clone(good)
		if tt.damage != nil {
			tt.damage(p)
		}
		if tt.trunc > 0 {
			p = p[:tt.trunc]
		}
		_, _, err := DecodeBlock(p)
		if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: DecodeBlock = %v, want %v containing %q", tt.name, err, tt.err, tt.want)
		}
		if _, err := DecodeBlocks(p); err == nil || !strings.Contains(err.Error(), "block 0 at byte 0") {
			t.Errorf("%s: DecodeBlocks = %v, want an error naming block 0 at byte 0", tt.name, err)
		}
	}
	// A good block followed by garbage: the error names the second block.
	p := append(bytes.Clone(good), "garbage!"...)
	if bs, err := DecodeBlocks(p); len(bs) != 1 || err == nil || !strings.Contains(err.Error(), "block 1 at byte 128") {
		t.Errorf("DecodeBlocks(block + garbage) = %d blocks, %v, want 1 and an error at block 1, byte 128", len(bs), err)
	}
}

func TestDecoderLimits(t *testing.T) {
	b := validBatch()
	blk := AppendBlock(nil, b, 0, 3)
	if _, err := NewDecoder(bytes.NewReader(blk), len(blk)-8).Next(); !errors.Is(err, ErrBlockTooLarge) {
		t.Errorf("Decoder with a limit below the block: Next() = %v, want ErrBlockTooLarge", err)
	}
	for _, cut := range []int{1, 15, 16, 17, len(blk) - 1} {
		_, err := NewDecoder(bytes.NewReader(blk[:cut]), 0).Next()
		if !errors.Is(err, ErrCorruptBlock) || !strings.Contains(err.Error(), "stream ends") {
			t.Errorf("Decoder over %d of %d bytes: Next() = %v, want a truncation error", cut, len(blk), err)
		}
	}
	// A header claiming a 4 GiB block over a short stream allocates only
	// what arrives.
	huge := bytes.Clone(blk[:headerSize])
	binary.LittleEndian.PutUint32(huge[12:], MaxBlockSize)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := NewDecoder(bytes.NewReader(huge), 0).Next(); !errors.Is(err, ErrCorruptBlock) {
		t.Errorf("Decoder over a truncated huge block: %v, want ErrCorruptBlock", err)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("Decoder over a truncated huge block allocated %d bytes", n)
	}
}

// TestBlockGolden pins the example of docs/format.md byte for byte.
func TestBlockGolden(t *testing.T) {
	b := &Batch{Rows: 4, Columns: []Column{
		{Name: "id", Type: Int32, Data: le32(7, 8, 9, 10), Validity: []byte{0b1101}},
		{Name: "s", Type: String, Offsets: []int32{0, 2, 2, 5, 6}, Data: []byte("abcdef")},
	}}
	want := "5348464301010200" + "0300000058000000" +
		"040100000c000000" + "0b00000004000000" +
		"0200010069647300" + "0600000000000000" +
		"0800000009000000" + "0a00000000000000" +
		"0000000000000000" + "0300000004000000" +
		"6364656600000000"
	if got := hex.EncodeToString(AppendBlock(nil, b, 1, 4)); got != want {
		t.Errorf("AppendBlock(rows 1-3) =\n%s, want\n%s", got, want)
	}
}
