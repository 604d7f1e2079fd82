package server

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/shuffled/shuffled/protocol"
)

// refusalLogEvery is how often one peer uid's refusals of one code are
// logged: the first at once, the rest at most once per interval, each
// line saying how many went unlogged since the last.
const refusalLogEvery = 10 * time.Second

// maxRefusalKeys bounds the rate limiter's memory: past it, keys idle for
// a whole interval are dropped.
const maxRefusalKeys = 4096

// refusalKey is what refusals are rate-limited by: the peer's uid (every
// executor of one user shares it; a hostile peer cannot multiply its
// lines by opening connections) and the code.
type refusalKey struct {
	uid  uint32
	code protocol.Code
}

// refusalLog rate-limits the WARN lines of refused connections,
// registrations and Opens. The zero value is ready.
type refusalLog struct {
	mu struct {
		sync.Mutex
		last map[refusalKey]*refusalEntry
	}
}

type refusalEntry struct {
	logged     time.Time // when the last line was written
	suppressed int       // refusals since, not logged
}

// allow reports whether a refusal of k at now is logged, and how many of
// k's refusals were not logged since the last line.
func (l *refusalLog) allow(k refusalKey, now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.last == nil {
		l.mu.last = make(map[refusalKey]*refusalEntry)
	}
	e := l.mu.last[k]
	if e == nil {
		if len(l.mu.last) >= maxRefusalKeys {
			for key, old := range l.mu.last {
				if now.Sub(old.logged) >= refusalLogEvery {
					delete(l.mu.last, key)
				}
			}
		}
		l.mu.last[k] = &refusalEntry{logged: now}
		return true, 0
	}
	if now.Sub(e.logged) < refusalLogEvery {
		e.suppressed++
		return false, 0
	}
	suppressed = e.suppressed
	e.logged, e.suppressed = now, 0
	return true, suppressed
}

// refused counts a refused request (metrics.Request*) and logs it at WARN
// with the reason, rate-limited per peer uid and code. Internal errors are
// counted but logged by reply, at ERROR. A nil err is not a refusal.
func (s *Server) refused(log *slog.Logger, uid uint32, request string, err error, attrs ...any) {
	if err == nil {
		return
	}
	code := codeOf(err)
	s.metrics.RequestsRefused.WithLabelValues(request, code.String()).Inc()
	if code == protocol.CodeInternal {
		return
	}
	ok, suppressed := s.refusalLog.allow(refusalKey{uid, code}, time.Now())
	if !ok {
		return
	}
	if suppressed > 0 {
		attrs = append(attrs, "unlogged_since_last", suppressed)
	}
	log.Warn("refused "+request+" (a Spark executor or task then writes with Spark's own writer)", append(attrs, "code", code.String(), "reason", reasonOf(err))...)
}

// reasonOf is the message a refusal sends the client.
func reasonOf(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Message
	}
	return err.Error()
}
