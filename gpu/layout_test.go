package gpu

import (
	"errors"
	"testing"

	"github.com/shuffled/shuffled/partition"
)

func TestLayoutValidate(t *testing.T) {
	const size = 1024
	i32 := func(data Range) Column { return Column{Type: partition.Int32, Data: data} }
	for _, tc := range []struct {
		name string
		l    Layout
		ok   bool
	}{
		{"int32", Layout{Rows: 10, Columns: []Column{i32(Range{0, 40})}}, true},
		{"string", Layout{Rows: 2, Columns: []Column{{Type: partition.String, Offsets: Range{64, 12}, Data: Range{128, 5}}}}, true},
		{"no rows", Layout{Rows: 0, Columns: []Column{i32(Range{})}}, true},
		{"negative rows", Layout{Rows: -1}, false},
		{"short data", Layout{Rows: 11, Columns: []Column{i32(Range{0, 40})}}, false},
		{"past the end", Layout{Rows: 1, Columns: []Column{i32(Range{1020, 8})}}, false},
		{"negative offset", Layout{Rows: 1, Columns: []Column{i32(Range{-4, 4})}}, false},
		{"misaligned data", Layout{Rows: 1, Columns: []Column{i32(Range{2, 4})}}, false},
		{"short validity", Layout{Rows: 17, Columns: []Column{{Type: partition.Int8, Validity: Range{0, 2}, Data: Range{64, 17}}}}, false},
		{"short offsets", Layout{Rows: 2, Columns: []Column{{Type: partition.String, Offsets: Range{64, 8}, Data: Range{128, 5}}}}, false},
		{"offsets of a fixed type", Layout{Rows: 1, Columns: []Column{{Type: partition.Int32, Offsets: Range{64, 8}, Data: Range{0, 4}}}}, false},
		{"unknown type", Layout{Rows: 1, Columns: []Column{{Type: 99, Data: Range{0, 4}}}}, false},
	} {
		err := tc.l.Validate(size)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("%s: Validate(%d) = %v, want ok %v (or ErrInvalid)", tc.name, size, err, tc.ok)
		}
	}
}

func TestPoolOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []PoolOption
		ok   bool
	}{
		{"defaults", nil, true},
		{"all set", []PoolOption{WithChunkSize(1 << 20), WithMaxChunks(8), WithPrime(8)}, true},
		{"tiny chunk", []PoolOption{WithChunkSize(100)}, false},
		{"one chunk", []PoolOption{WithMaxChunks(1)}, false},
		{"negative prime", []PoolOption{WithPrime(-1)}, false},
		{"prime past max", []PoolOption{WithMaxChunks(2), WithPrime(3)}, false},
	} {
		o, err := parsePoolOptions(tc.opts)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("%s: parsePoolOptions = %+v, %v; want ok %v (or ErrInvalid)", tc.name, o, err, tc.ok)
		}
	}
}
