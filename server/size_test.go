package server_test

import (
	"math"
	"testing"

	"github.com/shuffled/shuffled/server"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"1073741824", 1 << 30, true},
		{"512MiB", 512 << 20, true},
		{"512mib", 512 << 20, true},
		{"512 MiB", 512 << 20, true},
		{"512M", 512 << 20, true},
		{"512mb", 512 << 20, true},
		{"1g", 1 << 30, true},
		{"1G", 1 << 30, true},
		{"1GB", 1 << 30, true},
		{"32k", 32 << 10, true},
		{"32KiB", 32 << 10, true},
		{" 7 ", 7, true},
		{"8b", 8, true},
		{"2t", 2 << 40, true},
		{"9223372036854775807", math.MaxInt64, true},
		{"8589934591g", 8589934591 << 30, true},
		{"", 0, false},
		{"MiB", 0, false},
		{"abc", 0, false},
		{"-5", 0, false},
		{"+5", 0, false},
		{"1.5g", 0, false},
		{"5x", 0, false},
		{"5 k b", 0, false},
		{"9223372036854775808", 0, false},
		{"8589934592g", 0, false},
		{"99999999999999999999", 0, false},
	}
	for _, tt := range tests {
		got, err := server.ParseSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v, want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestFormatSize(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0"},
		{1, "1"},
		{1000, "1000"},
		{1025, "1025"},
		{1024, "1KiB"},
		{32 << 10, "32KiB"},
		{512 << 20, "512MiB"},
		{1536 << 20, "1536MiB"},
		{1 << 30, "1GiB"},
		{3 << 40, "3TiB"},
		{math.MaxInt64, "9223372036854775807"},
	}
	for _, tt := range tests {
		got := server.FormatSize(tt.n)
		if got != tt.want {
			t.Errorf("FormatSize(%d) = %q, want %q", tt.n, got, tt.want)
		}
		if back, err := server.ParseSize(got); back != tt.n || err != nil {
			t.Errorf("ParseSize(FormatSize(%d) = %q) = %d, %v, want %d", tt.n, got, back, err, tt.n)
		}
	}
}
