package shufflefile

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxNameLen bounds application and executor ids in bytes.
const MaxNameLen = 255

// DaemonPrefix starts the name of every file and directory the daemon
// keeps for itself beside the directories of client-named ids (its root's
// lock file, registry files and their temp files, and whatever it keeps
// there later: DaemonPrefix + its name). ValidateName refuses every id
// that starts with it, so no id a client chooses can name one of them: a
// rule of construction, not a list of names to extend.
const DaemonPrefix = "."

// ValidateName checks that s may serve as one path component named by a
// client (an application or executor id, each a directory of the daemon's
// trees): 1 to MaxNameLen bytes of valid UTF-8, no '/', no NUL or other
// control character, and not starting with DaemonPrefix ('.', which also
// rules out "." and ".."). field names the id in the error.
//
// The error wraps ErrInvalidID, but its text is field's and s's alone
// ("executor id is empty"): a caller puts its own prefix or class before
// it (protocol.ValidateName wraps it in protocol.ErrMalformed).
func ValidateName(field, s string) error {
	switch {
	case s == "":
		return nameError(fmt.Sprintf("%s is empty", field))
	case len(s) > MaxNameLen:
		return nameError(fmt.Sprintf("%s %.32q...: length %d exceeds %d", field, s, len(s), MaxNameLen))
	case s == "." || s == "..":
		return nameError(fmt.Sprintf("%s %q is not a plain name", field, s))
	case strings.HasPrefix(s, DaemonPrefix):
		return nameError(fmt.Sprintf("%s %q starts with %q, which only the daemon's own files may", field, s, DaemonPrefix))
	case !utf8.ValidString(s):
		return nameError(fmt.Sprintf("%s %q is not valid UTF-8", field, s))
	case strings.ContainsRune(s, '/'):
		return nameError(fmt.Sprintf("%s %q contains '/'", field, s))
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return nameError(fmt.Sprintf("%s %q contains control character %U", field, s, r))
		}
	}
	return nil
}

// nameError is ValidateName's error: an invalid id (ErrInvalidID) whose
// text leaves the class out.
type nameError string

func (e nameError) Error() string { return string(e) }

func (e nameError) Unwrap() error { return ErrInvalidID }
