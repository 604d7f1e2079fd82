package server

import (
	"net"
	"strconv"
)

// ServeConfig configures the block server (docs/serving.md,
// docs/operations.md "Serving map outputs").
type ServeConfig struct {
	// Addr is the TCP host:port the daemon serves map outputs on
	// (--serve-addr). Empty, the default: it serves none.
	Addr string
	// AdvertiseHost is the host executors publish in their MapStatus
	// (--serve-advertise-host). Default: Addr's host unless it is
	// unspecified (":7337", "0.0.0.0:7337", "[::]:7337"), then the
	// node's host name.
	AdvertiseHost string
	// RequireAuth serves only connections that authenticate first
	// (--serve-require-auth): an application without a secret is then not
	// served at all.
	RequireAuth bool
}

// settings lists the serving flags (Config.settings takes them in this
// order).
func (c *ServeConfig) settings() []setting {
	return []setting{
		{"serve-addr", "serve map outputs to Spark's reducers on this TCP `host:port` (off when empty)", stringValue(&c.Addr, nil)},
		{"serve-advertise-host", "`host` executors publish as their map outputs' location (default: --serve-addr's host, or the host name when it is unspecified)", stringValue(&c.AdvertiseHost, nil)},
		{"serve-require-auth", "serve map outputs only over connections that authenticate (spark.authenticate) first", boolValue(&c.RequireAuth)},
	}
}

// validate reports bad serving flags through bad.
func (c *ServeConfig) validate(bad func(flagName, format string, args ...any)) {
	if c.Addr != "" {
		if _, port, err := net.SplitHostPort(c.Addr); err != nil {
			bad("serve-addr", "must be a host:port or :port, got %q: %v", c.Addr, err)
		} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			bad("serve-addr", "port %q of %q is not a number in [0, 65535]", port, c.Addr)
		}
	}
	if h := c.AdvertiseHost; h != "" && (len(h) > 255 || net.ParseIP(h) == nil && !validHostName(h)) {
		bad("serve-advertise-host", "must be a host name or an IP address of at most 255 bytes, got %q", h)
	}
	if c.Addr == "" && (c.AdvertiseHost != "" || c.RequireAuth) {
		bad("serve-addr", "is empty, but --serve-advertise-host or --serve-require-auth is set: they apply to the block server only")
	}
}

// validHostName reports a DNS host name: dot-separated labels of letters,
// digits and '-', none empty or longer than 63 bytes.
func validHostName(h string) bool {
	if h == "" {
		return false
	}
	label := 0
	for i := 0; i < len(h); i++ {
		switch b := h[i]; {
		case b == '.':
			if label == 0 {
				return false
			}
			label = 0
		case b == '-' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z':
			if label++; label > 63 {
				return false
			}
		default:
			return false
		}
	}
	return label > 0
}
