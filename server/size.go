package server

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseSize parses a byte size: a non-negative integer with an optional
// unit, case-insensitive: B; K, KB, KiB; M, MB, MiB; G, GB, GiB; T, TB,
// TiB. Every unit is a power of 1024, as in Spark's and the JVM's size
// settings, so "1g" is 1073741824 bytes. Space between number and unit is
// allowed ("512 MiB").
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	end := 0
	for end < len(t) && t[end] >= '0' && t[end] <= '9' {
		end++
	}
	if end == 0 {
		return 0, fmt.Errorf("invalid size %q: want a non-negative integer with an optional unit (B, KiB, MiB, GiB, TiB, or k, m, g, t)", s)
	}
	var shift uint
	switch strings.ToLower(strings.TrimSpace(t[end:])) {
	case "", "b":
		shift = 0
	case "k", "kb", "kib":
		shift = 10
	case "m", "mb", "mib":
		shift = 20
	case "g", "gb", "gib":
		shift = 30
	case "t", "tb", "tib":
		shift = 40
	default:
		return 0, fmt.Errorf("invalid size %q: unknown unit %q (want B, KiB, MiB, GiB, TiB, or k, m, g, t)", s, strings.TrimSpace(t[end:]))
	}
	n, err := strconv.ParseInt(t[:end], 10, 64)
	if err != nil || n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("invalid size %q: more than %d bytes", s, int64(math.MaxInt64))
	}
	return n << shift, nil
}

// FormatSize writes n with the largest binary unit that divides it exactly
// ("512MiB", "32KiB", "1000"), in a form ParseSize reads back.
func FormatSize(n int64) string {
	if n == 0 {
		return "0"
	}
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}
