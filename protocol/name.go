package protocol

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxNameLen bounds application and executor ids in bytes.
const MaxNameLen = 255

// ValidateName checks that s may serve as one path component named by a
// client (an application or executor id): 1 to MaxNameLen bytes of valid
// UTF-8, no '/', no NUL or other control character, and neither "." nor
// "..". field names the id in the error.
func ValidateName(field, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s is empty", ErrMalformed, field)
	case len(s) > MaxNameLen:
		return fmt.Errorf("%w: %s %.32q...: length %d exceeds %d", ErrMalformed, field, s, len(s), MaxNameLen)
	case s == "." || s == "..":
		return fmt.Errorf("%w: %s %q is not a plain name", ErrMalformed, field, s)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrMalformed, field, s)
	case strings.ContainsRune(s, '/'):
		return fmt.Errorf("%w: %s %q contains '/'", ErrMalformed, field, s)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("%w: %s %q contains control character %U", ErrMalformed, field, s, r)
		}
	}
	return nil
}

// MaxPathLen bounds a local dir path in bytes (Linux PATH_MAX less the NUL).
const MaxPathLen = 4095

// validatePath checks a client-named directory: absolute, at most
// MaxPathLen bytes, no NUL, no "." or ".." component. Whether it lies
// under an allowed root is the server's business.
func validatePath(msg, field, p string) error {
	switch {
	case p == "":
		return invalid(msg, field, "empty path")
	case len(p) > MaxPathLen:
		return invalid(msg, field, "path %.32q...: length %d exceeds %d", p, len(p), MaxPathLen)
	case p[0] != '/':
		return invalid(msg, field, "path %q is not absolute", p)
	case strings.IndexByte(p, 0) >= 0:
		return invalid(msg, field, "path %q contains NUL", p)
	}
	for c := range strings.SplitSeq(p, "/") {
		if c == "." || c == ".." {
			return invalid(msg, field, "path %q has a %q component", p, c)
		}
	}
	return nil
}
