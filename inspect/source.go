package inspect

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// ParseName returns the map output that a file name (a base name or a
// path) belongs to: shuffle_{s}_{m}_0.data, .index or .checksum.{ALG},
// with s and m in the decimal form Spark writes.
func ParseName(name string) (shufflefile.ID, error) {
	base := filepath.Base(name)
	stem, ok := strings.CutPrefix(base, "shuffle_")
	if !ok {
		return shufflefile.ID{}, fmt.Errorf("%w: file name %q does not start with shuffle_", ErrInvalid, base)
	}
	if i := strings.IndexByte(stem, '.'); i >= 0 {
		switch suffix := stem[i:]; {
		case suffix == ".data", suffix == ".index", strings.HasPrefix(suffix, ".checksum."):
			stem = stem[:i]
		default:
			return shufflefile.ID{}, fmt.Errorf("%w: file name %q: suffix %q is not .data, .index or .checksum.ALG", ErrInvalid, base, suffix)
		}
	} else {
		return shufflefile.ID{}, fmt.Errorf("%w: file name %q has no suffix (.data, .index or .checksum.ALG)", ErrInvalid, base)
	}
	fields := strings.Split(stem, "_")
	if len(fields) != 3 || fields[2] != "0" {
		return shufflefile.ID{}, fmt.Errorf("%w: file name %q is not shuffle_{shuffle}_{map}_0", ErrInvalid, base)
	}
	s, err := parseID(fields[0], 31)
	if err != nil {
		return shufflefile.ID{}, fmt.Errorf("%w: file name %q: shuffle id %q: %v", ErrInvalid, base, fields[0], err)
	}
	m, err := parseID(fields[1], 63)
	if err != nil {
		return shufflefile.ID{}, fmt.Errorf("%w: file name %q: map id %q: %v", ErrInvalid, base, fields[1], err)
	}
	return shufflefile.ID{Shuffle: int32(s), Map: m}, nil
}

// parseID parses a non-negative decimal of at most bits bits, without a
// sign or leading zeros.
func parseID(s string, bits int) (int64, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("not a canonical non-negative decimal")
	}
	return strconv.ParseInt(s, 10, bits+1)
}

// SourceFromPath returns the map output that the file at path belongs to
// (its data, index or checksum file), and where its other files are:
// Spark's hashed layout when path lies in a two-hex-digit sub-directory of
// a single local directory (with DefaultSubDirs sub-directories) that
// places the data and index files where they are, else the flat layout of
// path's directory. It checks that the data and index files exist; when
// they lie elsewhere (several local directories, another number of
// sub-directories), give the Source's layout explicitly.
func SourceFromPath(fsys vfs.FS, path string) (Source, error) {
	id, err := ParseName(path)
	if err != nil {
		return Source{}, err
	}
	if _, err := fsys.Stat(path); err != nil {
		return Source{}, fmt.Errorf("inspect: %w", err)
	}
	dir := filepath.Dir(path)
	hasFiles := func(l shufflefile.Layout) bool {
		for _, name := range []string{shufflefile.DataName(id), shufflefile.IndexName(id)} {
			if _, err := fsys.Stat(shufflefile.Path(l, name)); err != nil {
				return false
			}
		}
		return true
	}
	if sub := filepath.Base(dir); isHexByte(sub) {
		h := shufflefile.SparkHashed{LocalDirs: []string{filepath.Dir(dir)}, SubDirs: shufflefile.DefaultSubDirs}
		if h.Dir(filepath.Base(path)) == dir && hasFiles(h) {
			return Source{Layout: h, ID: id}, nil
		}
	}
	flat := shufflefile.Flat(dir)
	if !hasFiles(flat) {
		return Source{}, fmt.Errorf("inspect: %v: the data and index files are neither beside %s nor in a Spark hashed layout under %s with %d sub-directories; give the layout: %w",
			id, path, filepath.Dir(dir), shufflefile.DefaultSubDirs, fs.ErrNotExist)
	}
	return Source{Layout: flat, ID: id}, nil
}

// isHexByte reports whether s is a hashed sub-directory name: two
// lowercase hex digits, as Spark's "%02x".
func isHexByte(s string) bool {
	if len(s) != 2 {
		return false
	}
	for i := range 2 {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
