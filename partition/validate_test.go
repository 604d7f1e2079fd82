package partition

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// validBatch returns a small valid batch of 3 rows in 2 partitions with one
// column of each kind of layout.
func validBatch() *Batch {
	return &Batch{
		Rows:             3,
		PartitionOffsets: []int32{0, 1, 3},
		Columns: []Column{
			{Name: "i", Type: Int32, Data: make([]byte, 12)},
			{Name: "d", Type: Decimal64, Precision: 15, Scale: 2, Data: make([]byte, 24), Validity: []byte{0b101}},
			{Name: "s", Type: String, Offsets: []int32{0, 1, 1, 4}, Data: []byte("abcd")},
		},
	}
}

// tooManyRows is MaxRows+1 as a variable, which converts to int on 32-bit
// platforms too (wrapping to a negative count, also invalid).
var tooManyRows int64 = MaxRows + 1

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(b *Batch)
		want   string // substring of the error; "" for a valid batch
	}{
		{"valid", func(b *Batch) {}, ""},
		{"unpartitioned", func(b *Batch) { b.PartitionOffsets = nil }, ""},
		{"no columns", func(b *Batch) { b.Columns = nil }, ""},
		{"zero rows", func(b *Batch) {
			*b = Batch{PartitionOffsets: []int32{0, 0}, Columns: []Column{{Type: String}, {Type: Int64}}}
		}, ""},
		{"longer buffers", func(b *Batch) {
			b.Columns[0].Data = make([]byte, 100)
			b.Columns[1].Validity = []byte{1, 2, 3}
			b.Columns[2].Offsets = append(b.Columns[2].Offsets, 2)
		}, ""},
		{"negative rows", func(b *Batch) { b.Rows = -1 }, "rows = -1"},
		{"too many rows", func(b *Batch) { b.Rows = int(tooManyRows) }, "want 0 to 2147483647"},
		{"one partition offset", func(b *Batch) { b.PartitionOffsets = []int32{0} }, "partition offsets: length 1"},
		{"first partition offset", func(b *Batch) { b.PartitionOffsets = []int32{1, 1, 3} }, "partition offsets[0] = 1, want 0"},
		{"partition offsets decrease", func(b *Batch) { b.PartitionOffsets = []int32{0, 2, 1, 3} }, "partition offsets[2] = 1, less than offsets[1] = 2"},
		{"last partition offset short", func(b *Batch) { b.PartitionOffsets = []int32{0, 1, 2} }, "partition offsets[2] = 2, want rows = 3"},
		{"last partition offset past rows", func(b *Batch) { b.PartitionOffsets = []int32{0, 1, 4} }, "partition offsets[2] = 4, want rows = 3"},
		{"zero type", func(b *Batch) { b.Columns[0].Type = 0 }, `column 0 "i": type = 0, not a known type`},
		{"unknown type", func(b *Batch) { b.Columns[0].Type = 21 }, `column 0 "i": type = 21`},
		{"long name", func(b *Batch) { b.Columns[0].Name = strings.Repeat("x", MaxNameLen+1) }, "name length = 65536"},
		{"precision 0", func(b *Batch) { b.Columns[1].Precision = 0 }, `column 1 "d": decimal precision = 0, want 1 to 18`},
		{"precision 19", func(b *Batch) { b.Columns[1].Precision = 19 }, "decimal precision = 19"},
		{"negative scale", func(b *Batch) { b.Columns[1].Scale = -1 }, "decimal scale = -1"},
		{"scale above precision", func(b *Batch) { b.Columns[1].Scale = 16 }, "decimal scale = 16, want 0 to precision 15"},
		{"precision on int", func(b *Batch) { b.Columns[0].Precision = 3 }, "precision, scale = 3, 0 on a int32 column"},
		{"short data", func(b *Batch) { b.Columns[0].Data = make([]byte, 11) }, `column 0 "i": data length = 11 bytes, want at least 12`},
		{"short validity", func(b *Batch) {
			b.Rows = 9
			b.PartitionOffsets = []int32{0, 9}
			b.Columns = []Column{{Name: "b", Type: Bool, Data: make([]byte, 9), Validity: []byte{0xff}}}
		}, `column 0 "b": validity length = 1 bytes, want at least 2 for 9 rows`},
		{"empty validity", func(b *Batch) { b.Columns[1].Validity = []byte{} }, "validity length = 0 bytes, want at least 1"},
		{"offsets on fixed width", func(b *Batch) { b.Columns[0].Offsets = []int32{0} }, "offsets length = 1 on a fixed-width int32 column"},
		{"short offsets", func(b *Batch) { b.Columns[2].Offsets = []int32{0, 1, 1} }, `column 2 "s": offsets length = 3, want at least rows+1 = 4`},
		{"missing offsets", func(b *Batch) { b.Columns[2].Offsets = nil }, "offsets length = 0, want at least rows+1 = 4"},
		{"first offset", func(b *Batch) { b.Columns[2].Offsets = []int32{1, 1, 1, 4} }, "offsets[0] = 1, want 0"},
		{"offsets decrease", func(b *Batch) { b.Columns[2].Offsets = []int32{0, 2, 1, 4} }, "offsets[2] = 1, less than offsets[1] = 2"},
		{"negative offset", func(b *Batch) { b.Columns[2].Offsets = []int32{0, -2, 1, 4} }, "offsets[1] = -2, less than offsets[0] = 0"},
		{"offset wraps", func(b *Batch) { b.Columns[2].Offsets = []int32{0, 2147483647, -2, 4} }, "offsets[2] = -2, less than offsets[1] = 2147483647"},
		{"offsets past data", func(b *Batch) { b.Columns[2].Offsets = []int32{0, 1, 1, 5} }, "offsets[3] = 5, past the end of data (length 4)"},
	}
	for _, tt := range tests {
		b := validBatch()
		tt.modify(b)
		err := b.Validate()
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: Validate() = %v, want nil", tt.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Validate() = %v, want an error containing %q", tt.name, err, tt.want)
			continue
		}
		if !errors.Is(err, ErrInvalidBatch) {
			t.Errorf("%s: Validate() = %v, does not wrap ErrInvalidBatch", tt.name, err)
		}
	}
}

func TestParseType(t *testing.T) {
	for typ := Bool; typ <= maxType; typ++ {
		got, err := ParseType(typ.String())
		if err != nil || got != typ {
			t.Errorf("ParseType(%q) = %v, %v, want %v, nil", typ.String(), got, err, typ)
		}
	}
	if got, err := ParseType("int128"); err == nil {
		t.Errorf("ParseType(%q) = %v, nil, want an error", "int128", got)
	}
	if s := Type(0).String(); s != "Type(0)" {
		t.Errorf("Type(0).String() = %q, want %q", s, "Type(0)")
	}
}

func TestNumPartitions(t *testing.T) {
	b := validBatch()
	if n := b.NumPartitions(); n != 2 {
		t.Errorf("NumPartitions() = %d, want 2", n)
	}
	if s, e := b.PartitionRows(1); s != 1 || e != 3 {
		t.Errorf("PartitionRows(1) = %d, %d, want 1, 3", s, e)
	}
	b.PartitionOffsets = nil
	if n := b.NumPartitions(); n != 0 {
		t.Errorf("NumPartitions() of an unpartitioned batch = %d, want 0", n)
	}
}

// TestValidateOffsetsEveryPosition puts one bad offset at each position of
// offsets of every length up to a few steps of the unrolled loop: a
// decrease, a negative value, and a negative value after a large one
// (whose difference wraps around to a positive one); each is found, with
// the first bad index named, and the good offsets pass.
func TestValidateOffsetsEveryPosition(t *testing.T) {
	for rows := 0; rows <= 40; rows++ {
		good := make([]int32, rows+1)
		for i := range good {
			good[i] = int32(3 * i)
		}
		if err := ValidateOffsets(good, rows, 3*rows); err != nil {
			t.Fatalf("rows %d: good offsets: %v", rows, err)
		}
		if rows > 0 {
			if err := ValidateOffsets(good, rows, 3*rows-1); err == nil || !strings.Contains(err.Error(), "past the end of data") {
				t.Errorf("rows %d: data one byte short: %v, want past the end of data", rows, err)
			}
		}
		for bad := 1; bad <= rows; bad++ {
			for _, tc := range []struct {
				name string
				set  func(off []int32)
			}{
				{"decrease", func(off []int32) { off[bad] = off[bad-1] - 1 }},
				{"negative", func(off []int32) { off[bad] = -1 }},
				{"wraps", func(off []int32) { off[bad-1], off[bad] = math.MaxInt32, math.MinInt32 }},
			} {
				if tc.name == "wraps" && bad == 1 {
					continue // offsets[0] must be 0: another error
				}
				off := slices.Clone(good)
				tc.set(off)
				// The first index whose value is below its predecessor's.
				first := 0
				for i := 1; i < len(off); i++ {
					if off[i] < off[i-1] {
						first = i
						break
					}
				}
				err := ValidateOffsets(off, rows, math.MaxInt32)
				want := fmt.Sprintf("offsets[%d] = %d, less than offsets[%d]", first, off[first], first-1)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("rows %d, %s at %d: %v, want %q", rows, tc.name, bad, err, want)
				}
			}
		}
	}
}

// CheckDecimal, which the GPU path runs on a layout's precision and scale
// before planning, accepts exactly what Batch.Validate accepts, for every
// type; and it refuses what would pass only once narrowed to a Column's
// int8.
func TestCheckDecimalAsValidate(t *testing.T) {
	for typ := Bool; typ <= Decimal128; typ++ {
		for _, ps := range [][2]int{{0, 0}, {1, 0}, {1, 1}, {1, 2}, {9, 0}, {9, 9}, {10, 2}, {18, 4}, {19, 0}, {38, 38}, {39, 0}, {5, -1}, {-1, 0}} {
			b := &Batch{Columns: []Column{{Type: typ, Precision: int8(ps[0]), Scale: int8(ps[1])}}}
			if typ.VarWidth() {
				b.Columns[0].Offsets = []int32{0}
			}
			verr := b.Validate()
			cerr := CheckDecimal(typ, ps[0], ps[1])
			if (verr == nil) != (cerr == nil) {
				t.Errorf("%v precision %d scale %d: CheckDecimal %v, Validate %v", typ, ps[0], ps[1], cerr, verr)
			}
		}
	}
	for _, ps := range [][2]int{{256 + 10, 2}, {10, 256 + 2}} {
		if err := CheckDecimal(Decimal128, ps[0], ps[1]); err == nil {
			t.Errorf("decimal128 precision %d scale %d: CheckDecimal accepts it", ps[0], ps[1])
		}
	}
}
