package shufflefile

import (
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/checksum"
)

func TestNames(t *testing.T) {
	cases := []struct {
		id                  ID
		data, index, adler  string
		crc32, crc32c, none string
	}{
		{ID{0, 0}, "shuffle_0_0_0.data", "shuffle_0_0_0.index", "shuffle_0_0_0.checksum.ADLER32",
			"shuffle_0_0_0.checksum.CRC32", "shuffle_0_0_0.checksum.CRC32C", "shuffle_0_0_0.checksum.none"},
		{ID{7, 123456789012}, "shuffle_7_123456789012_0.data", "shuffle_7_123456789012_0.index",
			"shuffle_7_123456789012_0.checksum.ADLER32", "shuffle_7_123456789012_0.checksum.CRC32",
			"shuffle_7_123456789012_0.checksum.CRC32C", "shuffle_7_123456789012_0.checksum.none"},
		{ID{2147483647, 9223372036854775807}, "shuffle_2147483647_9223372036854775807_0.data",
			"shuffle_2147483647_9223372036854775807_0.index",
			"shuffle_2147483647_9223372036854775807_0.checksum.ADLER32",
			"shuffle_2147483647_9223372036854775807_0.checksum.CRC32",
			"shuffle_2147483647_9223372036854775807_0.checksum.CRC32C",
			"shuffle_2147483647_9223372036854775807_0.checksum.none"},
	}
	for _, c := range cases {
		check := func(fn, got, want string) {
			if got != want {
				t.Errorf("%s(%+v) = %q, want %q", fn, c.id, got, want)
			}
		}
		check("DataName", DataName(c.id), c.data)
		check("IndexName", IndexName(c.id), c.index)
		check("ChecksumName/ADLER32", ChecksumName(c.id, checksum.Adler32), c.adler)
		check("ChecksumName/CRC32", ChecksumName(c.id, checksum.CRC32), c.crc32)
		check("ChecksumName/CRC32C", ChecksumName(c.id, checksum.CRC32C), c.crc32c)
		check("ChecksumName/none", ChecksumName(c.id, checksum.None), c.none)
	}
}

func TestIDValidate(t *testing.T) {
	cases := []struct {
		id   ID
		want string // "" for valid, else a part of the message
	}{
		{ID{0, 0}, ""},
		{ID{1<<31 - 1, 1<<63 - 1}, ""},
		{ID{-1, 0}, "shuffle id -1"},
		{ID{0, -5}, "map id -5"},
		{ID{-2, -5}, "shuffle id -2"},
	}
	for _, c := range cases {
		err := c.id.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v.Validate() = %v, want nil", c.id, err)
		case c.want != "" && (!errors.Is(err, ErrInvalidID) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v.Validate() = %v, want ErrInvalidID mentioning %q", c.id, err, c.want)
		}
	}
}

func TestTempName(t *testing.T) {
	final := filepath.Join("/x", "00", "shuffle_1_2_0.data")
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(final) + `\.[0-9a-f]{16}` + regexp.QuoteMeta(TempSuffix) + `$`)
	seen := map[string]bool{}
	for range 100 {
		n := TempName(final)
		if !re.MatchString(n) {
			t.Fatalf("TempName(%q) = %q, want final name + 16 hex digits + %q", final, n, TempSuffix)
		}
		if filepath.Dir(n) != filepath.Dir(final) {
			t.Errorf("TempName(%q) = %q, not in the same directory", final, n)
		}
		if !IsTempName(n) || !IsTempName(filepath.Base(n)) {
			t.Errorf("IsTempName(%q) = false, want true", n)
		}
		if seen[n] {
			t.Errorf("TempName(%q) repeated %q", final, n)
		}
		seen[n] = true
	}
	for _, n := range []string{final, "shuffle_1_2_0.index", "x.shuffled-tmp.data"} {
		if IsTempName(n) {
			t.Errorf("IsTempName(%q) = true, want false", n)
		}
	}
}

func TestParseName(t *testing.T) {
	id := ID{Shuffle: 12, Map: 345}
	for _, tc := range []struct {
		name string
		want Name
		ok   bool
	}{
		{DataName(id), Name{ID: id, Kind: KindData}, true},
		{IndexName(id), Name{ID: id, Kind: KindIndex}, true},
		{ChecksumName(id, checksum.CRC32C), Name{ID: id, Kind: KindChecksum, Algorithm: checksum.CRC32C}, true},
		{TempName(IndexName(id)), Name{ID: id, Kind: KindTemp}, true},
		{DataName(id) + ".p7.0123456789abcdef" + TempSuffix, Name{ID: id, Kind: KindTemp}, true},
		{DataName(ID{Shuffle: 2147483647, Map: 9223372036854775807}), Name{ID: ID{Shuffle: 2147483647, Map: 9223372036854775807}, Kind: KindData}, true},
		{"shuffle_012_345_0.data", Name{}, false},      // leading zero
		{"shuffle_12_+345_0.data", Name{}, false},      // sign
		{"shuffle_2147483648_1_0.data", Name{}, false}, // past int32
		{"shuffle_12_345_1.data", Name{}, false},       // reduce id not 0
		{"shuffle_12_345_0.checksum.none", Name{}, false},
		{"shuffle_12_345_0.checksum.crc32", Name{}, false}, // not Spark's spelling
		{"shuffle_12_345_0.index.xyz" + TempSuffix, Name{}, false},
		{"shuffle_12_345_0.datax", Name{}, false},
		{"temp_shuffle_5", Name{}, false},
		{"", Name{}, false},
	} {
		got, ok := ParseName(tc.name)
		if ok != tc.ok || got != tc.want {
			t.Errorf("ParseName(%q) = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestValidateName(t *testing.T) {
	tests := []struct {
		in   string
		want string // the error's text; "" for a plain name
	}{
		{"app-20240101120000-0001", ""},
		{"driver", ""},
		{"7", ""},
		{"a..b", ""},
		{"ünïcode", ""},
		{strings.Repeat("x", MaxNameLen), ""},
		{"", "application id is empty"},
		{".", `application id "." is not a plain name`},
		{"..", `application id ".." is not a plain name`},
		{".shuffled.lock", `application id ".shuffled.lock" starts with ".", which only the daemon's own files may`},
		{".x", `application id ".x" starts with ".", which only the daemon's own files may`},
		{"...", `application id "..." starts with ".", which only the daemon's own files may`},
		{"x.", ""},
		{"a/b", `application id "a/b" contains '/'`},
		{"/", `application id "/" contains '/'`},
		{"a\x00", `application id "a\x00" contains control character U+0000`},
		{"a\nb", `application id "a\nb" contains control character U+000A`},
		{"a\x7fb", `application id "a\x7fb" contains control character U+007F`},
		{"a\u0085b", `application id "a\u0085b" contains control character U+0085`},
		{"\xff", `application id "\xff" is not valid UTF-8`},
		{strings.Repeat("x", MaxNameLen+1), `application id "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"...: length 256 exceeds 255`},
	}
	for _, tt := range tests {
		err := ValidateName("application id", tt.in)
		if tt.want == "" {
			if err != nil {
				t.Errorf("ValidateName(%q) = %v, want nil", tt.in, err)
			}
			continue
		}
		if err == nil || err.Error() != tt.want || !errors.Is(err, ErrInvalidID) {
			t.Errorf("ValidateName(%q) = %v, want %q wrapping ErrInvalidID", tt.in, err, tt.want)
		}
	}
}
