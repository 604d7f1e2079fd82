package server

import (
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// funcValue is a flag.Value built from closures over a Config field.
type funcValue struct {
	set    func(string) error
	get    func() string
	isBool bool
}

func (v *funcValue) Set(s string) error { return v.set(s) }
func (v *funcValue) IsBoolFlag() bool   { return v.isBool }

func (v *funcValue) String() string {
	if v == nil || v.get == nil { // the flag package probes a zero Value
		return ""
	}
	return v.get()
}

func stringValue(p *string, canonical func(string) string) *funcValue {
	return &funcValue{
		set: func(s string) error {
			if canonical != nil {
				s = canonical(s)
			}
			*p = s
			return nil
		},
		get: func() string { return *p },
	}
}

func boolValue(p *bool) *funcValue {
	return &funcValue{
		set: func(s string) error {
			b, err := strconv.ParseBool(s)
			if err != nil {
				return fmt.Errorf("invalid boolean %q", s)
			}
			*p = b
			return nil
		},
		get:    func() string { return strconv.FormatBool(*p) },
		isBool: true,
	}
}

func intValue(p *int) *funcValue {
	return &funcValue{
		set: func(s string) error {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf("invalid integer %q", s)
			}
			*p = n
			return nil
		},
		get: func() string { return strconv.Itoa(*p) },
	}
}

func sizeValue(p *int64) *funcValue {
	return &funcValue{
		set: func(s string) error {
			n, err := ParseSize(s)
			if err != nil {
				return err
			}
			*p = n
			return nil
		},
		get: func() string { return FormatSize(*p) },
	}
}

func intSizeValue(p *int) *funcValue {
	return &funcValue{
		set: func(s string) error {
			n, err := ParseSize(s)
			if err != nil {
				return err
			}
			if n > math.MaxInt {
				return fmt.Errorf("invalid size %q: more than %d bytes", s, math.MaxInt)
			}
			*p = int(n)
			return nil
		},
		get: func() string { return FormatSize(int64(*p)) },
	}
}

func durationValue(p *time.Duration) *funcValue {
	return &funcValue{
		set: func(s string) error {
			d, err := time.ParseDuration(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf("invalid duration %q (e.g. 30s, 2m, 1h30m)", s)
			}
			*p = d
			return nil
		},
		get: func() string { return p.String() },
	}
}

func modeValue(p *fs.FileMode) *funcValue {
	return &funcValue{
		set: func(s string) error {
			t := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "0o"), "0O")
			n, err := strconv.ParseUint(t, 8, 32)
			if err != nil {
				return fmt.Errorf("invalid octal mode %q (e.g. 0640)", s)
			}
			*p = fs.FileMode(n)
			return nil
		},
		get: func() string { return fmt.Sprintf("%#o", uint32(*p)) },
	}
}

func levelValue(p *slog.Level) *funcValue {
	return &funcValue{
		set: func(s string) error {
			if err := p.UnmarshalText([]byte(strings.TrimSpace(s))); err != nil {
				return fmt.Errorf("invalid log level %q (want debug, info, warn or error)", s)
			}
			return nil
		},
		get: func() string { return strings.ToLower(p.String()) },
	}
}

// pathListValue parses comma-separated paths. The first Set replaces the
// list (so a flag replaces what the environment set) and later ones append
// (so the flag can be repeated).
func pathListValue(p *[]string) *funcValue {
	replaced := false
	return &funcValue{
		set: func(s string) error {
			if !replaced {
				*p, replaced = nil, true
			}
			for item := range strings.SplitSeq(s, ",") {
				if item = strings.TrimSpace(item); item != "" {
					*p = append(*p, filepath.Clean(item))
				}
			}
			return nil
		},
		get: func() string { return strings.Join(*p, ",") },
	}
}

// idListValue parses comma-separated ids or names that lookup resolves,
// replacing then appending like pathListValue.
func idListValue(p *[]uint32, lookup func(name string) (string, error)) *funcValue {
	replaced := false
	return &funcValue{
		set: func(s string) error {
			var ids []uint32
			for item := range strings.SplitSeq(s, ",") {
				if item = strings.TrimSpace(item); item == "" {
					continue
				}
				id, err := parseID(item, lookup)
				if err != nil {
					return err
				}
				ids = append(ids, id)
			}
			if !replaced {
				*p, replaced = nil, true
			}
			*p = append(*p, ids...)
			return nil
		},
		get: func() string {
			parts := make([]string, len(*p))
			for i, id := range *p {
				parts[i] = strconv.FormatUint(uint64(id), 10)
			}
			return strings.Join(parts, ",")
		},
	}
}

func parseID(item string, lookup func(string) (string, error)) (uint32, error) {
	text := item
	if item[0] < '0' || item[0] > '9' {
		resolved, err := lookup(item)
		if err != nil {
			return 0, err
		}
		text = resolved
	}
	n, err := strconv.ParseUint(text, 10, 32)
	if err != nil || n == math.MaxUint32 { // (uid_t)-1 is "no id"
		return 0, fmt.Errorf("invalid id %q", item)
	}
	return uint32(n), nil
}

func lookupUser(name string) (string, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return "", fmt.Errorf("unknown user %q", name)
	}
	return u.Uid, nil
}

func lookupGroup(name string) (string, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return "", fmt.Errorf("unknown group %q", name)
	}
	return g.Gid, nil
}
