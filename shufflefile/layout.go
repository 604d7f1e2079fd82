package shufflefile

import (
	"fmt"
	"path/filepath"
	"strconv"
	"unicode/utf16"
)

// Layout decides the directory of each file of a map output.
type Layout interface {
	// Dir returns the directory that holds the file named fileName.
	Dir(fileName string) string
	// Dirs returns the layout's top directories and whether files lie in
	// hashed sub-directories of them (ListDirs finds those).
	Dirs() (dirs []string, hashed bool)
}

// Path returns the path of the file named name under l.
func Path(l Layout, name string) string { return filepath.Join(l.Dir(name), name) }

// Flat keeps every file in one directory.
type Flat string

// Dir returns the directory itself, whatever the name.
func (f Flat) Dir(string) string { return string(f) }

// Dirs returns the directory itself, not hashed.
func (f Flat) Dirs() ([]string, bool) { return []string{string(f)}, false }

// DefaultSubDirs is Spark's default number of sub-directories per local
// directory (spark.diskStore.subDirectories).
const DefaultSubDirs = 64

// SparkHashed is the layout of Spark's DiskBlockManager, which Spark's
// external shuffle service expects: a file named name lives in
//
//	LocalDirs[h % len(LocalDirs)] / %02x of ((h / len(LocalDirs)) % SubDirs)
//
// where h is Java's String.hashCode of name made non-negative the way
// Spark's nonNegativeHash does (Integer.MIN_VALUE becomes 0). The files of
// one map output usually land in different directories.
type SparkHashed struct {
	// LocalDirs are the executor's local directories (its blockmgr-*
	// directories), in the executor's order.
	LocalDirs []string
	// SubDirs is the number of sub-directories per local directory; zero
	// means DefaultSubDirs.
	SubDirs int
}

// Validate reports an unusable layout, naming the field and the value.
func (l SparkHashed) Validate() error {
	if len(l.LocalDirs) == 0 {
		return fmt.Errorf("%w: SparkHashed.LocalDirs is empty", ErrInvalidLayout)
	}
	for i, d := range l.LocalDirs {
		if d == "" {
			return fmt.Errorf("%w: SparkHashed.LocalDirs[%d] is empty", ErrInvalidLayout, i)
		}
	}
	if l.SubDirs < 0 {
		return fmt.Errorf("%w: SparkHashed.SubDirs %d is negative", ErrInvalidLayout, l.SubDirs)
	}
	return nil
}

// Dirs returns the local dirs, hashed.
func (l SparkHashed) Dirs() ([]string, bool) { return append([]string(nil), l.LocalDirs...), true }

// Dir returns the hashed directory of fileName. l must be valid
// (Validate); Dir panics when LocalDirs is empty.
func (l SparkHashed) Dir(fileName string) string {
	sub := l.SubDirs
	if sub == 0 {
		sub = DefaultSubDirs
	}
	h := int(nonNegativeHash(fileName))
	n := len(l.LocalDirs)
	return filepath.Join(l.LocalDirs[h%n], subDirName((h/n)%sub))
}

// subDirName formats a sub-directory number as Java's "%02x" does.
func subDirName(i int) string {
	s := strconv.FormatInt(int64(i), 16)
	if len(s) < 2 {
		s = "0" + s
	}
	return s
}

// javaStringHash is Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1]
// over the UTF-16 code units of s, in wrapping int32 arithmetic. Invalid
// UTF-8 counts as U+FFFD per bad byte.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + hi
			h = 31*h + lo
			continue
		}
		h = 31*h + r
	}
	return h
}

// nonNegativeHash is Spark's Utils.nonNegativeHash of a string: the
// absolute value of its hash, except that Integer.MIN_VALUE (which has no
// positive counterpart) becomes 0.
func nonNegativeHash(s string) int32 {
	h := javaStringHash(s)
	switch {
	case h == -1<<31:
		return 0
	case h < 0:
		return -h
	}
	return h
}
