package shufflefile

import (
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestAppendIndexGolden(t *testing.T) {
	cases := []struct {
		lengths []int64
		hex     string
	}{
		{nil, "0000000000000000"},
		{[]int64{0}, "0000000000000000" + "0000000000000000"},
		{[]int64{3, 0, 5}, "0000000000000000" + "0000000000000003" + "0000000000000003" + "0000000000000008"},
		{[]int64{1 << 40, 0x0102030405}, "0000000000000000" + "0000010000000000" + "0000010102030405"},
	}
	for _, c := range cases {
		got, err := AppendIndex(nil, c.lengths)
		if err != nil || hex.EncodeToString(got) != c.hex {
			t.Errorf("AppendIndex(%v) = %x, %v, want %s", c.lengths, got, err, c.hex)
			continue
		}
		offsets, err := ParseIndex(got)
		if err != nil {
			t.Errorf("ParseIndex(AppendIndex(%v)) = %v", c.lengths, err)
			continue
		}
		if l := lengthsOf(offsets); !slices.Equal(l, c.lengths) && len(c.lengths) > 0 {
			t.Errorf("lengths of ParseIndex(AppendIndex(%v)) = %v", c.lengths, l)
		}
	}
}

func TestAppendIndexErrors(t *testing.T) {
	cases := []struct {
		lengths []int64
		want    string
	}{
		{[]int64{1, -2}, "partition 1 length -2"},
		{[]int64{1 << 62, 1 << 62, 1 << 62}, "partition 1 length 4611686018427387904 overflows offset 4611686018427387904"},
		{[]int64{1<<63 - 1, 0, 1}, "partition 2 length 1 overflows"},
	}
	for _, c := range cases {
		if _, err := AppendIndex(nil, c.lengths); !errors.Is(err, ErrInvalidCommit) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("AppendIndex(%v) = %v, want ErrInvalidCommit mentioning %q", c.lengths, err, c.want)
		}
	}
}

func TestParseIndexErrors(t *testing.T) {
	cases := []struct {
		hex, want string
	}{
		{"", "empty"},
		{"00000000000000", "whole number"},
		{"000000000000000000", "whole number"},
		{"0000000000000001", "offset 0 is 1"},
		{"0000000000000000" + "0000000000000005" + "0000000000000004", "offset 2 is 4"},
		{"0000000000000000" + "8000000000000000", "offset 1 is -9223372036854775808"},
	}
	for _, c := range cases {
		b, _ := hex.DecodeString(c.hex)
		if _, err := ParseIndex(b); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseIndex(%s) = %v, want ErrCorrupt mentioning %q", c.hex, err, c.want)
		}
	}
}

func TestChecksumsGolden(t *testing.T) {
	sums := []uint32{1, 0, 0xdeadbeef, 0x1a0b045d}
	want := "0000000000000001" + "0000000000000000" + "00000000deadbeef" + "000000001a0b045d"
	got := AppendChecksums(nil, sums)
	if hex.EncodeToString(got) != want {
		t.Errorf("AppendChecksums(%v) = %x, want %s", sums, got, want)
	}
	back, err := ParseChecksums(got)
	if err != nil || !slices.Equal(back, sums) {
		t.Errorf("ParseChecksums(%x) = %v, %v, want %v", got, back, err, sums)
	}
	for _, bad := range []string{"00", "0000000100000000"} {
		b, _ := hex.DecodeString(bad)
		if _, err := ParseChecksums(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("ParseChecksums(%s) = %v, want ErrCorrupt", bad, err)
		}
	}
}
