package shufflefile

import (
	"errors"
	"path/filepath"
	"testing"
)

// Values printed by a JVM (String.hashCode, and Spark's
// nonNegativeHash/ExecutorDiskUtils.getFilePath arithmetic with local dirs
// /a, /b, /c and 64 sub-directories).
var javaHashes = []struct {
	s       string
	hash    int32
	nonNeg  int32
	dirOfAB string // directory under SparkHashed{/a,/b,/c}, 64 sub-dirs
}{
	{"", 0, 0, "/a/00"},
	{"hello", 99162322, 99162322, "/b/1b"},
	{"polygenelubricants", -2147483648, 0, "/a/00"}, // Integer.MIN_VALUE
	{"shuffle_0_0_0.data", 581811660, 581811660, "/a/04"},
	{"shuffle_0_0_0.index", 861282032, 861282032, "/c/3a"},
	{"shuffle_0_0_0.checksum.ADLER32", -103986100, 103986100, "/b/11"},
	{"shuffle_1_2_0.data", -424048471, 424048471, "/b/32"},
	{"shuffle_1_2_0.index", -255610957, 255610957, "/b/04"},
	{"shuffle_7_123456789012_0.data", -1860800131, 1860800131, "/b/16"},
	{"shuffle_2147483647_9223372036854775807_0.index", 1208470762, 1208470762, "/b/23"},
	{"Aa", 2112, 2112, "/a/00"},
	{"BB", 2112, 2112, "/a/00"},
	{"é€𝄞x", 519296651, 519296651, "/c/03"}, // a supplementary character: two UTF-16 units
}

func TestJavaStringHash(t *testing.T) {
	for _, c := range javaHashes {
		if got := javaStringHash(c.s); got != c.hash {
			t.Errorf("javaStringHash(%q) = %d, want %d", c.s, got, c.hash)
		}
		if got := nonNegativeHash(c.s); got != c.nonNeg {
			t.Errorf("nonNegativeHash(%q) = %d, want %d", c.s, got, c.nonNeg)
		}
	}
}

func TestSparkHashedDir(t *testing.T) {
	for _, sub := range []int{0, DefaultSubDirs} {
		l := SparkHashed{LocalDirs: []string{"/a", "/b", "/c"}, SubDirs: sub}
		for _, c := range javaHashes {
			want := filepath.FromSlash(c.dirOfAB)
			if got := l.Dir(c.s); got != want {
				t.Errorf("SparkHashed{SubDirs: %d}.Dir(%q) = %q, want %q", sub, c.s, got, want)
			}
		}
	}
	// One local dir and few sub-dirs: h % 1 == 0, (h / 1) % 5.
	l := SparkHashed{LocalDirs: []string{"/d"}, SubDirs: 5}
	if got, want := l.Dir("hello"), filepath.FromSlash("/d/02"); got != want { // 99162322 % 5 == 2
		t.Errorf("SparkHashed{/d, 5}.Dir(%q) = %q, want %q", "hello", got, want)
	}
	// More than 256 sub-dirs print more than two hex digits, as %02x does.
	l = SparkHashed{LocalDirs: []string{"/d"}, SubDirs: 1000}
	if got, want := l.Dir("hello"), filepath.FromSlash("/d/142"); got != want { // 99162322 % 1000 == 322 == 0x142
		t.Errorf("SparkHashed{/d, 1000}.Dir(%q) = %q, want %q", "hello", got, want)
	}
	if got, want := Path(l, "hello"), filepath.FromSlash("/d/142/hello"); got != want {
		t.Errorf("Path(SparkHashed{/d, 1000}, %q) = %q, want %q", "hello", got, want)
	}
}

func TestSparkHashedValidate(t *testing.T) {
	cases := []struct {
		l     SparkHashed
		valid bool
	}{
		{SparkHashed{LocalDirs: []string{"/a"}}, true},
		{SparkHashed{LocalDirs: []string{"/a", "/b"}, SubDirs: 64}, true},
		{SparkHashed{}, false},
		{SparkHashed{LocalDirs: []string{"/a", ""}}, false},
		{SparkHashed{LocalDirs: []string{"/a"}, SubDirs: -1}, false},
	}
	for _, c := range cases {
		err := c.l.Validate()
		if c.valid != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidLayout)) {
			t.Errorf("%+v.Validate() = %v, want valid=%v", c.l, err, c.valid)
		}
	}
}

func TestFlat(t *testing.T) {
	l := Flat("/root/app/exec")
	if got, want := Path(l, "shuffle_1_2_0.data"), filepath.FromSlash("/root/app/exec/shuffle_1_2_0.data"); got != want {
		t.Errorf("Path(Flat, ...) = %q, want %q", got, want)
	}
}
