package partition

import (
	"errors"
	"math/rand/v2"
	"testing"
)

func TestPartition(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, tt := range []struct {
		rows, parts int
		keys        []int
	}{
		{0, 5, []int{4}},
		{1, 1, []int{4}},
		{500, 7, []int{4}},
		{500, 200, []int{10, 3}},
		{300, 3, []int{0, 2, 5, 6, 7, 8, 9, 11}},
		{100, 4, nil},
	} {
		in := randomBatch(r, tt.rows, true, 12)
		in.PartitionOffsets = []int32{0, int32(tt.rows)} // ignored
		out, err := Partition(in, tt.keys, tt.parts)
		if err != nil {
			t.Fatalf("Partition(%d rows, keys %v, %d) = %v", tt.rows, tt.keys, tt.parts, err)
		}
		if err := out.Validate(); err != nil {
			t.Fatalf("Partition(%d rows, keys %v, %d).Validate() = %v", tt.rows, tt.keys, tt.parts, err)
		}
		if out.NumPartitions() != tt.parts {
			t.Fatalf("Partition(...).NumPartitions() = %d, want %d", out.NumPartitions(), tt.parts)
		}
		// Expected: input rows grouped by partition, in input order.
		hashes := make([]int32, tt.rows)
		HashRows(in, tt.keys, hashes)
		var want []string
		for p := range tt.parts {
			for i := range tt.rows {
				if Pmod(hashes[i], tt.parts) == p {
					want = append(want, rowText(in, i))
				}
			}
			start, end := out.PartitionRows(p)
			if got := len(want) - start; got != end-start {
				t.Fatalf("keys %v: partition %d holds %d rows, want %d", tt.keys, p, end-start, got)
			}
		}
		for j := range tt.rows {
			if got := rowText(out, j); got != want[j] {
				t.Fatalf("keys %v: output row %d = %s, want %s", tt.keys, j, got, want[j])
			}
		}
		if tt.keys == nil && tt.rows > 0 {
			if s, e := out.PartitionRows(Pmod(SparkSeed, tt.parts)); e-s != tt.rows {
				t.Errorf("with no keys, partition %d holds %d rows, want all %d", Pmod(SparkSeed, tt.parts), e-s, tt.rows)
			}
		}
	}
}

func TestPartitionErrors(t *testing.T) {
	b := validBatch()
	tests := []struct {
		keys  []int
		parts int
		want  error
	}{
		{[]int{0}, 0, ErrInvalidArgument},
		{[]int{0}, -1, ErrInvalidArgument},
		{[]int{3}, 2, ErrInvalidArgument},
		{[]int{-1}, 2, ErrInvalidArgument},
	}
	for _, tt := range tests {
		if _, err := Partition(b, tt.keys, tt.parts); !errors.Is(err, tt.want) {
			t.Errorf("Partition(keys %v, %d) = %v, want %v", tt.keys, tt.parts, err, tt.want)
		}
	}
	b.Columns[0].Data = nil
	if _, err := Partition(b, []int{0}, 2); !errors.Is(err, ErrInvalidBatch) {
		t.Errorf("Partition(invalid batch) = %v, want ErrInvalidBatch", err)
	}
}

// TestPartitionZeroRowsNoOffsets covers a 0-row String column whose offsets
// are empty, which Validate accepts (cuDF's empty strings column).
func TestPartitionZeroRowsNoOffsets(t *testing.T) {
	b := &Batch{Columns: []Column{{Type: String}, {Type: Int64}}}
	HashRows(b, []int{0, 1}, nil)
	out, err := Partition(b, []int{0}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Validate(); err != nil || out.Rows != 0 || out.NumPartitions() != 3 {
		t.Errorf("Partition(0 rows) = %d rows, %d partitions, Validate %v; want 0, 3, nil", out.Rows, out.NumPartitions(), err)
	}
	if got := SliceSize(out, 1); got != len(AppendSlice(nil, out, 1)) {
		t.Errorf("SliceSize = %d, AppendSlice wrote another length", got)
	}
}
