package loadgen

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/term"
)

// Progress refresh intervals: a terminal gets a live bar, anything else a
// line now and then.
const (
	ttyInterval   = 250 * time.Millisecond
	plainInterval = 2 * time.Second
	barWidth      = 24
)

// progress reports a run's advance on a writer, from its own goroutine. A
// nil *progress reports nothing.
type progress struct {
	w     io.Writer
	tty   bool
	label string
	total int           // tasks; 0 when the run is bounded by duration
	dur   time.Duration // the run's duration bound, if any
	start time.Time

	tasks atomic.Int64
	bytes atomic.Int64

	stop chan struct{}
	done chan struct{}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// startProgress starts reporting on w (nil: no reports) until finish.
func startProgress(w io.Writer, label string, total int, dur time.Duration) *progress {
	if w == nil {
		return nil
	}
	p := &progress{
		w: w, tty: isTerminal(w), label: label, total: total, dur: dur,
		start: time.Now(), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go p.loop()
	return p
}

func (p *progress) loop() {
	defer close(p.done)
	interval := plainInterval
	if p.tty {
		interval = ttyInterval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			p.print(time.Now(), true)
			return
		case now := <-tick.C:
			p.print(now, false)
		}
	}
}

func (p *progress) print(now time.Time, last bool) {
	line := p.line(now)
	switch {
	case p.tty && last:
		fmt.Fprintf(p.w, "\r%s\x1b[K\n", line)
	case p.tty:
		fmt.Fprintf(p.w, "\r%s\x1b[K", line)
	default:
		fmt.Fprintf(p.w, "shuffled-loadgen: %s\n", line)
	}
}

// line renders the state at now: a bar (terminal only), tasks done, input
// MB/s so far, and the time left.
func (p *progress) line(now time.Time) string {
	elapsed := now.Sub(p.start)
	done := p.tasks.Load()
	mbps := 0.0
	if s := elapsed.Seconds(); s > 0 {
		mbps = float64(p.bytes.Load()) / s / 1e6
	}
	var frac float64
	var left time.Duration
	var count string
	if p.total > 0 {
		frac = float64(done) / float64(p.total)
		count = fmt.Sprintf("%d/%d tasks", done, p.total)
		if done > 0 {
			left = time.Duration(float64(elapsed) * float64(int64(p.total)-done) / float64(done))
		}
	} else {
		frac = float64(elapsed) / float64(p.dur)
		count = fmt.Sprintf("%d tasks", done)
		left = p.dur - elapsed
	}
	frac = min(max(frac, 0), 1)
	left = max(left, 0)
	eta := "ETA " + left.Round(time.Second).String()
	if p.total > 0 && done == 0 {
		eta = "ETA ?"
	}
	s := fmt.Sprintf("%s: %s, %.1f MB/s, %s", p.label, count, mbps, eta)
	if p.tty {
		n := int(frac * barWidth)
		s = "[" + strings.Repeat("#", n) + strings.Repeat(".", barWidth-n) + "] " + s
	}
	return s
}

func (p *progress) taskDone() {
	if p != nil {
		p.tasks.Add(1)
	}
}

func (p *progress) addBytes(n int64) {
	if p != nil {
		p.bytes.Add(n)
	}
}

// finish prints the last line and stops the reporter.
func (p *progress) finish() {
	if p == nil {
		return
	}
	close(p.stop)
	<-p.done
}
