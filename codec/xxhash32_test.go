package codec

import (
	"bytes"
	"testing"
)

func TestXXH32(t *testing.T) {
	fox := bytes.Repeat([]byte("The quick brown fox jumps over the lazy dog. "), 100)
	tests := []struct {
		in   []byte
		seed uint32
		want uint32
	}{
		{nil, 0, 0x02CC5D05},
		{[]byte("a"), 0, 0x550D7456},
		{[]byte("abc"), 0, 0x32D153FF},
		{[]byte("Nobody inspects the spammish repetition"), 0, 0xE2293B2F},
		// Content checksums of lz4 frames of these bytes, each length
		// crossing a lane or stripe boundary.
		{fox[:4], 0, 0x04be4380},
		{fox[:15], 0, 0x6d1332f9},
		{fox[:16], 0, 0xd4faafb1},
		{fox[:17], 0, 0xf5e047e8},
		{fox[:31], 0, 0xbabf72e1},
		{fox[:32], 0, 0x88c3b301},
		{fox[:100], 0, 0x9047f933},
		{fox[:1000], 0, 0x834a4a28},
		// lz4-java's checksum of "hello world", before its 28-bit mask.
		{[]byte("hello world"), lz4Seed, 0x02920395},
	}
	for _, tt := range tests {
		if got := xxh32(tt.in, tt.seed); got&0x0FFFFFFF != tt.want&0x0FFFFFFF || (tt.seed == 0 && got != tt.want) {
			t.Errorf("xxh32(%q, %#x) = %#08x, want %#08x", tt.in, tt.seed, got, tt.want)
		}
	}
}

func BenchmarkXXH32(b *testing.B) {
	data := textData(DefaultBlockSize, 1)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		xxh32(data, lz4Seed)
	}
}
