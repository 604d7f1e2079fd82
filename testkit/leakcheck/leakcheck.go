// Package leakcheck fails a test that leaves goroutines behind.
//
// It compares the stacks of live goroutines when the test ends with those
// when it started, giving goroutines that are finishing up a bounded grace
// period to exit.
package leakcheck

import (
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// Check records the goroutines running now and, when t ends, fails t if new
// ones are still running after a grace period of up to five seconds.
func Check(t testing.TB) {
	t.Helper()
	before := ids(stacks())
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
			var leaked []string
			for _, g := range stacks() {
				if !slices.Contains(before, id(g)) && !ignored(g) {
					leaked = append(leaked, g)
				}
			}
			if len(leaked) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("leakcheck: %d goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
				return
			}
			time.Sleep(wait)
		}
	})
}

func stacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// id returns "goroutine N" from a stack.
func id(g string) string {
	head, _, _ := strings.Cut(g, " [")
	return head
}

func ids(gs []string) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = id(g)
	}
	return out
}

// ignored reports goroutines of the runtime and the testing package.
func ignored(g string) bool {
	for _, s := range []string{
		"testing.(*T).Run(",
		"testing.tRunner(",
		"testing.(*M).",
		"runtime.goexit",
		"created by runtime.gc",
		"runtime.MHeap_Scavenger",
		"signal.signal_recv",
		"os/signal.loop",
		"leakcheck.stacks(",
	} {
		if strings.Contains(g, s) && !strings.Contains(g, "shuffled/") {
			return true
		}
	}
	return false
}
