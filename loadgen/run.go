package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/internal/procmem"
	"github.com/shuffled/shuffled/internal/unixsock"
	"github.com/shuffled/shuffled/protocol"
)

// Peak RSS sources of a Report.
const (
	rssSelf   = "loadgen-process"
	rssDaemon = "daemon"
)

// Run runs cfg's workload against the daemon at cfg.Socket, a child
// daemon started from cfg.DaemonBin, or else an embedded daemon, and
// returns its report.
// progress, if not nil, receives progress reports (a live bar when it is a
// terminal). With cfg.Verify, a run whose committed outputs differ from what
// was sent returns its report and an error wrapping ErrMismatch.
//
// Outputs are written for a fresh application id and removed at the end,
// unless cfg.Keep.
func Run(ctx context.Context, cfg Config, progress io.Writer) (_ *Report, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	appID := "loadgen-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if cfg.member != nil {
		// Processes of one run start within the same nanoseconds at times.
		appID += "-p" + strconv.Itoa(cfg.member.index)
	}
	socket, root := cfg.Socket, ""
	var (
		d  *embedded
		ch *child
	)
	switch {
	case cfg.DaemonBin != "":
		if ch, err = startChild(ctx, &cfg); err != nil {
			return nil, err
		}
		socket, root = ch.socket, ch.root
		defer func() {
			if !cfg.Keep {
				err = errors.Join(err, ch.removeApp(appID))
			}
			err = errors.Join(err, ch.stop())
		}()
	case socket == "":
		if d, err = startEmbedded(&cfg); err != nil {
			return nil, err
		}
		socket, root = d.socket, d.root
		defer func() {
			if !cfg.Keep {
				err = errors.Join(err, d.removeApp(appID))
			}
			err = errors.Join(err, d.stop())
		}()
	}

	t, err := dialDaemon(ctx, &cfg, socket, appID)
	if err != nil {
		return nil, err
	}
	// The connections close before the pool's memory goes: a daemon may
	// hold device batches mapped until its sessions end.
	var p *pool
	defer func() {
		t.close()
		if p != nil {
			p.close()
		}
	}()
	if root != "" {
		for slot := range t.slots {
			t.slots[slot].dir = t.dirFor(slot, root)
		}
	}
	form := poolForm{payload: cfg.Payload, memfd: cfg.DataPlane == PlaneMemfd, device: cfg.GPU}
	setup0 := selfCPU()
	if p, err = newPool(ctx, &cfg, form); err != nil {
		return nil, err
	}
	setupCPU := selfCPU() - setup0
	if err := t.checkPool(p); err != nil {
		return nil, err
	}
	if cfg.DumpInput != "" {
		if err := dumpInput(cfg.DumpInput, &cfg, p); err != nil {
			return nil, err
		}
	}
	debug.FreeOSMemory() // generation garbage is not the daemon's

	before, err := daemonFigures(ctx, t.slots[0].c)
	if err != nil {
		return nil, err
	}
	// A daemon in a process of its own: its CPU from /proc, if this
	// process may read it.
	var (
		dcpu *daemonCPU
		dmem *procmem.Sampler
	)
	switch {
	case ch != nil:
		dcpu = newDaemonCPU(ch.cmd.Process.Pid)
		dmem = sampleDaemonMemory(ch.cmd.Process.Pid)
	case d == nil:
		if pid, err := peerPID(socket); err == nil {
			dcpu = newDaemonCPU(pid)
			dmem = sampleDaemonMemory(pid)
		}
	}
	if cfg.member != nil {
		// Every process of the run is ready: all start at once.
		if err := cfg.member.await(lineReady); err != nil {
			return nil, err
		}
	}
	prog := startProgress(progress, "run", cfg.Tasks, cfg.Duration)
	res, err := runTasks(ctx, &cfg, p, t, prog)
	prog.finish()
	dpeak, dpeakOK := daemonPeak(dmem)
	if err != nil {
		return nil, err
	}
	res.setupCPU = setupCPU
	res.daemonCPU = -1
	if dcpu != nil {
		res.daemonCPU = dcpu.since()
	}
	if cfg.member != nil {
		// What follows the tasks (the daemon's figures, verification,
		// removal) waits until every process's tasks are done.
		if err := cfg.member.await(lineDone); err != nil {
			return nil, err
		}
	}

	after, err := daemonFigures(ctx, t.slots[0].c)
	if err != nil {
		return nil, err
	}
	var ds daemonStats
	if d != nil {
		ds = embeddedStats(d)
	} else {
		ds = externalStats(after)
	}
	ds.marks(before, after)
	if d == nil {
		// The load generator's alone, which its own fields report: not
		// the daemon's cost.
		res.apart, res.selfOnly, res.cpu = true, res.cpu, 0
	}
	rep := newReport(&cfg, p, res, ds)
	if dpeakOK {
		rep.DaemonPeakVmRSSBytes, rep.DaemonPeakRssShmemBytes, rep.DaemonPeakRssAnonBytes = dpeak.RSS, dpeak.Shmem, dpeak.Anon
	}
	switch {
	case d != nil:
		rep.Daemon = "embedded"
	case ch != nil:
		rep.Daemon = "child"
		rep.DaemonReadyMs = ms(ch.ready)
	default:
		rep.Daemon = "external"
	}
	if cfg.Keep {
		if root != "" {
			rep.Kept = filepath.Join(root, appID)
		} else {
			rep.Kept = "application " + appID + " of the daemon at " + socket
		}
	}
	if cfg.Verify {
		st, err := verify(ctx, &cfg, p, res)
		if err != nil {
			return rep, err
		}
		rep.Verified, rep.VerifiedMapOutputs, rep.VerifiedPartitions = true, st.outputs, st.partitions
	}
	if d == nil && ch == nil && !cfg.Keep {
		removed, err := removeExternal(ctx, t, appID)
		if err != nil {
			return rep, err
		}
		if !removed {
			rep.Kept = "application " + appID + " of the daemon at " + socket + " (it offers no removal)"
		}
	}
	return rep, nil
}

func embeddedStats(d *embedded) daemonStats {
	ls := d.limiterStats()
	ds := daemonStats{
		peak: ls.Peak, limit: ls.Limit, wait: ls.WaitTime, waits: ls.Waits, acquires: ls.Acquires,
		hasLimiter: true, hasWaits: true,
	}
	if rss, ok := selfPeakRSS(); ok {
		ds.peakRSS, ds.rssSource = rss, rssSelf
	}
	return ds
}

// daemonCPU reads a daemon process's CPU time from /proc.
type daemonCPU struct {
	pid int
	t0  time.Duration
}

// newDaemonCPU starts reading process pid's CPU time; nil if /proc does
// not show it to this process.
func newDaemonCPU(pid int) *daemonCPU {
	t0, err := processCPU(pid)
	if err != nil {
		return nil
	}
	return &daemonCPU{pid: pid, t0: t0}
}

// since returns the CPU time the daemon used since newDaemonCPU, or -1 if
// it can no longer be read.
func (c *daemonCPU) since() time.Duration {
	t, err := processCPU(c.pid)
	if err != nil {
		return -1
	}
	return t - c.t0
}

// peerPID returns the process id of the daemon listening at socket, as
// the kernel reports it for a connection (SO_PEERCRED).
func peerPID(socket string) (int, error) {
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	cred, err := unixsock.PeerCred(conn)
	if err != nil {
		return 0, err
	}
	if cred.PID <= 0 {
		return 0, fmt.Errorf("loadgen: daemon at %s: peer pid %d", socket, cred.PID)
	}
	return int(cred.PID), nil
}

// daemonFigures reads the daemon's Stats figures, by name.
func daemonFigures(ctx context.Context, c *client.Client) (map[string]int64, error) {
	stats, err := c.Stats(ctx)
	if err != nil {
		return nil, fmt.Errorf("loadgen: daemon stats: %w", err)
	}
	seen := make(map[string]int64, len(stats))
	for _, s := range stats {
		seen[s.Name] = s.Value
	}
	return seen, nil
}

// externalStats takes the figures an external daemon reports.
func externalStats(seen map[string]int64) daemonStats {
	var ds daemonStats
	peak, okPeak := seen["peak_bytes_in_flight"]
	limit, okLimit := seen["bytes_in_flight_limit"]
	if okPeak && okLimit {
		ds.peak, ds.limit, ds.hasLimiter = peak, limit, true
	}
	waits, okWaits := seen["limiter_waits"]
	wait, okWait := seen["limiter_wait_ns"]
	if okWaits && okWait {
		ds.waits, ds.wait, ds.hasWaits = waits, time.Duration(wait), true
		ds.acquires = -1
		if n, ok := seen["limiter_acquires"]; ok {
			ds.acquires = n
		}
	}
	if rss, ok := seen["peak_rss_bytes"]; ok && rss > 0 {
		ds.peakRSS, ds.rssSource = rss, rssDaemon
	}
	return ds
}

// marks sets the commits marked LAST and the early merges between two
// readings of the daemon's figures, if it reports them (a daemon others
// use at the same time counts their commits too).
func (ds *daemonStats) marks(before, after map[string]int64) {
	m1, ok1 := after["marked_commits_total"]
	e1, ok2 := after["early_merges_total"]
	if ok1 && ok2 {
		ds.marked, ds.early, ds.hasMarks = m1-before["marked_commits_total"], e1-before["early_merges_total"], true
	}
}

// removeExternal removes the run's application from an external daemon,
// if the daemon offers that; it reports whether it did.
func removeExternal(ctx context.Context, t *daemonTarget, appID string) (bool, error) {
	c := t.slots[0].c
	if c.ServerHello().Features&protocol.FeatureLifecycle == 0 {
		return false, nil
	}
	if _, err := c.RemoveApplication(ctx, appID); err != nil {
		return false, fmt.Errorf("loadgen: remove application %s: %w", appID, err)
	}
	return true, nil
}
