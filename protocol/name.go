package protocol

import (
	"fmt"
	"strings"

	"github.com/shuffled/shuffled/shufflefile"
)

// MaxNameLen bounds application and executor ids in bytes; names are
// shufflefile's (shufflefile.MaxNameLen).
const MaxNameLen = shufflefile.MaxNameLen

// ValidateName checks that s may serve as one path component named by a
// client (an application or executor id): shufflefile.ValidateName, whose
// error it wraps in ErrMalformed. field names the id in the error.
func ValidateName(field, s string) error {
	if err := shufflefile.ValidateName(field, s); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
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
