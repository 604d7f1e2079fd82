package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
	"golang.org/x/sys/unix"
)

// raceCommit is one map output a committer of TestCommitsRaceRemovals
// wrote, with when each of its steps went out and came back.
type raceCommit struct {
	o                 *mapOutput
	openSent, opened  time.Time
	commitSent, acked time.Time // acked: zero unless a CommitResult came
	res               protocol.CommitResult
	err               error
}

// raceRemoval is one removal: of shuffle, or of the whole application when
// shuffle is -1.
type raceRemoval struct {
	app            string
	shuffle        int32
	sent, answered time.Time
}

// covers reports whether r removes c's map output.
func (r *raceRemoval) covers(c *raceCommit) bool {
	return r.app == c.o.app && (r.shuffle < 0 || r.shuffle == c.o.id.Shuffle)
}

// TestCommitsRaceRemovals commits map outputs of three shuffles of two
// applications (one in the daemon's root, one in Spark local dirs) from
// several connections while others remove two of those shuffles, and now
// and then the applications, at random moments. Every Commit must end in a CommitResult or Aborted,
// never another error; at the end no temp file is left, every output
// committed before a removal was sent is gone, every output a removal
// aborted (opened before it was sent, committed after it was answered) was
// answered Aborted, every committed output no removal overlapped is
// intact and decodes, and whatever else is there is whole.
func TestCommitsRaceRemovals(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	dir := t.TempDir()
	allowed := filepath.Join(dir, "spark")
	apps := []struct {
		name  string
		local []string
	}{{"race-root", nil}, {"race-local", makeLocalDirs(t, allowed, "race-local", 2)}}
	d := startDaemon(t, config{args: []string{"--allowed-roots", allowed, "--log-level", "info"}})

	run := 3 * time.Second
	if *long {
		run = 30 * time.Second
	}
	stop := time.Now().Add(run)
	var (
		mu       sync.Mutex
		commits  []*raceCommit
		removals []*raceRemoval
		mapID    atomic.Int64
		wg       sync.WaitGroup
	)
	for _, app := range apps {
		for w := range 3 {
			c, reg := d.dial(t, app.name, app.local)
			layout := layoutOf(reg, app.local)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; time.Now().Before(stop); i += 3 {
					id := shufflefile.ID{Shuffle: int32(1 + i%3), Map: mapID.Add(1)}
					rc := &raceCommit{o: plan(i, app.name, layout, id)}
					rc.openSent = time.Now()
					m, err := rc.o.open(ctx, c)
					if protocol.CodeOf(err) == protocol.CodeFailedPrecondition {
						// A removal of the application ended this
						// connection's registration: register again,
						// as an executor of a live application would.
						req := protocol.RegisterExecutor{AppID: app.name, ExecutorID: "1", LocalDirs: app.local}
						if len(app.local) > 0 {
							req.SubDirs = subDirs
						}
						if _, err := c.Register(ctx, req); err != nil {
							t.Errorf("registering %s again after its removal: %v", app.name, err)
							return
						}
						rc.openSent = time.Now()
						m, err = rc.o.open(ctx, c)
					}
					rc.opened = time.Now()
					for b := 0; err == nil && b < len(rc.o.batches); b++ {
						err = rc.o.writeBatch(ctx, m, rc.o.batches[b])
					}
					rc.commitSent = time.Now()
					if err == nil {
						if rc.res, err = m.Commit(ctx); err == nil {
							rc.acked = time.Now()
						}
					} else if m != nil {
						_ = m.Abort(ctx)
					}
					rc.err = err
					mu.Lock()
					commits = append(commits, rc)
					mu.Unlock()
				}
			}()
		}
		c, _ := d.dial(t, app.name, app.local)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(len(app.name)), 27))
			// The last third of the run has no removals: what commits
			// then must all be there at the end.
			for time.Now().Before(stop.Add(-run / 3)) {
				time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
				r := &raceRemoval{app: app.name, shuffle: int32(1 + rng.IntN(2))}
				if rng.IntN(10) == 0 {
					r.shuffle = -1
				}
				var err error
				r.sent = time.Now()
				if r.shuffle < 0 {
					_, err = c.RemoveApplication(ctx, app.name)
				} else {
					_, err = c.RemoveShuffle(ctx, app.name, r.shuffle)
				}
				r.answered = time.Now()
				mu.Lock()
				removals = append(removals, r) // a failed one may have removed files too
				mu.Unlock()
				if err != nil {
					t.Errorf("%v: %v", r, err)
					return
				}
			}
		}()
	}
	wg.Wait()

	dirs := []string{filepath.Join(d.root, "race-root"), allowed}
	if left := tempFiles(t, dirs...); len(left) > 0 {
		t.Errorf("temp files left: %q", left)
	}
	var acked, aborted, gone, intact int
	for _, c := range commits {
		if c.err != nil {
			if code := protocol.CodeOf(c.err); code != protocol.CodeAborted {
				t.Errorf("%v: %v (code %v), want a CommitResult or Aborted", c.o, c.err, code)
			}
			aborted++
			if files := c.o.files(t, dirs...); len(files) > 0 {
				t.Errorf("%v: aborted, but its files %q are left", c.o, files)
			}
			continue
		}
		acked++
		var after, overlaps, aborts bool
		for _, r := range removals {
			if !r.covers(c) {
				continue
			}
			after = after || r.sent.After(c.acked)
			overlaps = overlaps || r.answered.After(c.openSent)
			aborts = aborts || r.sent.After(c.opened) && r.answered.Before(c.commitSent)
		}
		switch files := c.o.files(t, dirs...); {
		case aborts:
			t.Errorf("%v: opened before a removal that was answered before its Commit, yet committed", c.o)
		case after:
			if len(files) > 0 {
				t.Errorf("%v: committed before a removal was sent, yet its files %q are left", c.o, files)
			}
			gone++
		case !overlaps || c.o.committed():
			if err := c.o.verify(&c.res); err != nil {
				t.Error(err)
			}
			intact++
		case len(files) > 0:
			t.Errorf("%v: no index, yet its files %q are left", c.o, files)
		}
	}
	t.Logf("%d commits (%d acknowledged, %d aborted) raced %d removals: %d outputs removed after their commit, %d intact",
		len(commits), acked, aborted, len(removals), gone, intact)
	if acked == 0 || len(removals) == 0 {
		t.Errorf("nothing raced: %d commits acknowledged, %d removals", acked, len(removals))
	}
	d.stop()
	if d.log.contains("panic") {
		t.Errorf("the daemon logged a panic:\n%s", d.log.tail(40))
	}
}

// String names a removal in failures.
func (r *raceRemoval) String() string {
	return fmt.Sprintf("removal of %s shuffle %d", r.app, r.shuffle)
}

// TestListMatchesRemoval registers one application's local dirs twice,
// with different sub_dirs (so the same dirs hold files of both sets), and
// commits map outputs through both: ListShuffles must count exactly what
// RemoveShuffle then removes, and nothing is left.
func TestListMatchesRemoval(t *testing.T) {
	ctx := context.Background()
	allowed := filepath.Join(t.TempDir(), "spark")
	local := makeLocalDirs(t, allowed, "dup", 2)
	d := startDaemon(t, config{args: []string{"--allowed-roots", allowed}})
	var clients []*client.Client
	var layouts []shufflefile.Layout
	for i, sub := range []int32{subDirs, 3} {
		c, err := client.Dial(ctx, d.socket)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		reg, err := c.Register(ctx, protocol.RegisterExecutor{AppID: "dup", ExecutorID: fmt.Sprint(i), LocalDirs: local, SubDirs: sub})
		if err != nil {
			t.Fatalf("Register with sub_dirs %d: %v", sub, err)
		}
		clients = append(clients, c)
		layouts = append(layouts, shufflefile.SparkHashed{LocalDirs: reg.Dirs, SubDirs: int(sub)})
	}
	for m := range 8 {
		o := plan(m, "dup", layouts[m%2], shufflefile.ID{Shuffle: 5, Map: int64(m)})
		if _, err := o.write(ctx, clients[m%2]); err != nil {
			t.Fatal(err)
		}
	}
	list, err := clients[0].ListShuffles(ctx, "dup")
	if err != nil || len(list) != 1 {
		t.Fatalf("ListShuffles = %v, %v, want shuffle 5", list, err)
	}
	removed, err := clients[0].RemoveShuffle(ctx, "dup", 5)
	if err != nil {
		t.Fatal(err)
	}
	if removed.MapOutputs != 8 || removed.MapOutputs != list[0].MapOutputs || removed.Bytes != list[0].Bytes {
		t.Errorf("ListShuffles counted %d map outputs, %d bytes; RemoveShuffle removed %d, %d; want 8 outputs both, the same bytes",
			list[0].MapOutputs, list[0].Bytes, removed.MapOutputs, removed.Bytes)
	}
	if left, err := clients[1].ListShuffles(ctx, "dup"); err != nil || len(left) != 0 {
		t.Errorf("ListShuffles after the removal = %v, %v, want none", left, err)
	}
}

// hogHelper is the helper mode "hog": args socket, app, partitions. It
// opens map outputs of that many partitions on one connection until the
// daemon refuses one, prints "opened N: <the refusal>", and holds them
// open until its stdin closes.
func hogHelper(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("hog: want socket, app, partitions; got %q", args)
	}
	parts, err := strconv.Atoi(args[2])
	if err != nil {
		return err
	}
	ctx := context.Background()
	c, err := client.Dial(ctx, args[0])
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Register(ctx, protocol.RegisterExecutor{AppID: args[1], ExecutorID: "1"}); err != nil {
		return err
	}
	n := 0
	for ; n < 1000; n++ {
		if _, err = c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: int64(n), NumPartitions: int32(parts), Kind: protocol.KindOpaque}); err != nil {
			break
		}
	}
	fmt.Printf("opened %d: %v\n", n, err)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

func init() { userHelpers["hog"] = hogHelper }

// TestUIDShares has a uid other than the test's open map outputs until the
// daemon refuses one, by partition state (outputs of 2^20 partitions,
// 48 MiB each) and by count: the refusal names the per-uid bound, and the
// test's own uid (root) can still open one of each.
func TestUIDShares(t *testing.T) {
	requireRoot(t)
	dir, err := os.MkdirTemp("", "shuffled-shares-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	helper := helperBinary(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		parts int32
		bound string
	}{
		{"partition-state", 1 << 20, "--partition-state-limit-per-uid"},
		{"open-outputs", 4, "--max-open-outputs-per-uid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			socket := filepath.Join(dir, tc.name+".sock")
			d := startDaemon(t, config{socket: socket, args: []string{"--socket-mode", "0666", "--allowed-uids", fmt.Sprint(execUID), "--max-open-outputs", "8"}})
			cmd := exec.Command(helper, socket, "hog-"+tc.name, fmt.Sprint(tc.parts))
			cmd.Env = append(os.Environ(), helperEnv+"=hog")
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: execUID, Gid: execUID}}
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			defer stdin.Close()
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil {
				t.Fatalf("hog as uid %d: %v (%q)", execUID, err, line)
			}
			if !strings.Contains(line, "ResourceExhausted") || !strings.Contains(line, tc.bound) {
				t.Errorf("hog as uid %d: %s; want its last Open refused ResourceExhausted naming %s", execUID, strings.TrimSpace(line), tc.bound)
			}
			c, _ := d.dial(t, "other", nil)
			if _, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: 1, NumPartitions: tc.parts, Kind: protocol.KindOpaque}); err != nil {
				t.Errorf("Open of %d partitions as root while uid %d holds its share: %v", tc.parts, execUID, err)
			}
		})
	}
}

// TestHelloTimeout opens connections that never speak: each is closed
// --hello-timeout after it connected, with an id-0 InvalidArgument naming
// the deadline, while one that said Hello stays.
func TestHelloTimeout(t *testing.T) {
	d := startDaemon(t, config{args: []string{"--hello-timeout", "1s"}})
	e := &hostileEnv{socket: d.socket}
	var silent []*hostile
	for range 2 {
		h, err := e.dial()
		if err != nil {
			t.Fatal(err)
		}
		defer h.close()
		silent = append(silent, h)
	}
	start := time.Now()
	for i, h := range silent {
		f, err := h.rd.ReadFrame(nil)
		if err != nil {
			t.Fatalf("silent connection %d: %v, want an id-0 Error", i, err)
		}
		m, err := protocol.DecodeFrame(&f)
		if e, ok := m.(*protocol.Error); err != nil || !ok || f.ID != 0 || e.Code != protocol.CodeInvalidArgument || !strings.Contains(e.Message, "--hello-timeout") {
			t.Errorf("silent connection %d got %v id %d (%v, %v), want an id-0 InvalidArgument naming --hello-timeout", i, f.Type, f.ID, m, err)
		}
		if err := h.closed(protocol.CodeInvalidArgument); err != nil {
			t.Errorf("silent connection %d: %v", i, err)
		}
	}
	if waited := time.Since(start); waited < 500*time.Millisecond {
		t.Errorf("silent connections closed after %v, before --hello-timeout 1s", waited)
	}
	h, err := e.dial()
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	if err := h.hello(); err != nil {
		t.Errorf("Hello after the silent connections closed: %v", err)
	}
	time.Sleep(1500 * time.Millisecond) // past --hello-timeout: a connection that said Hello stays
	if err := h.alive(); err != nil {
		t.Error(err)
	}
}

// procWchar returns the bytes process pid has written (write(2) and the
// like, files and sockets alike: /proc/pid/io wchar).
func procWchar(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/io has no wchar", pid)
}

// TestRegistryWriteCost registers applications one after another, each on
// its own connection, and counts what the daemon wrote meanwhile: a
// registration costs about what it adds to the registry's files (and its
// connection's few responses), not the whole file again.
func TestRegistryWriteCost(t *testing.T) {
	d := startDaemon(t, config{args: []string{"--log-level", "info"}})
	ctx := context.Background()
	const apps = 400
	logged := func() int64 { // the daemon's log lines are writes too
		d.log.mu.Lock()
		defer d.log.mu.Unlock()
		return int64(d.log.buf.Len())
	}
	log0 := logged()
	before, err := procWchar(d.pid())
	if err != nil {
		t.Fatal(err)
	}
	for i := range apps {
		c, err := client.Dial(ctx, d.socket)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Register(ctx, protocol.RegisterExecutor{AppID: fmt.Sprintf("registry-cost-application-%04d", i), ExecutorID: "1"})
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // the last log lines reach the buffer
	after, err := procWchar(d.pid())
	if err != nil {
		t.Fatal(err)
	}
	after -= logged() - log0
	var files int64
	for _, name := range []string{".shuffled-registry", ".shuffled-registry.log"} {
		fi, err := os.Stat(filepath.Join(d.root, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		if err == nil {
			files += fi.Size()
		}
	}
	// Per registration: ServerHello and Registered (well under 512
	// bytes) and its share of the files, which compaction writes about
	// twice over.
	written, bound := after-before, 3*files+apps*512
	t.Logf("%d registrations wrote %d bytes; the registry's files hold %d", apps, written, files)
	if written > bound {
		t.Errorf("%d registrations wrote %d bytes, want at most %d (3 × the registry's %d bytes + 512 per connection)", apps, written, bound, files)
	}
}

// mapsMemfd reports whether process pid maps a memfd named name.
func mapsMemfd(pid int, name string) (bool, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return false, err
	}
	return strings.Contains(string(b), "/memfd:"+name+" "), nil
}

// TestMemfdReleasedWhenIdle sends one sealed memfd with two batches of a
// map output (so the connection caches its mapping), commits, and closes
// its own descriptor: once the connection has had no map output open for
// --memfd-idle-grace, the daemon no longer maps it, though the connection
// stays open.
func TestMemfdReleasedWhenIdle(t *testing.T) {
	d := startDaemon(t, config{args: []string{"--memfd-idle-grace", "100ms"}})
	h := memfdCommitted(t, d, "idle-cache")
	defer h.close()
	if err := h.alive(); err != nil {
		t.Fatal(err)
	}
	if err := memfdUnmapped(d, "idle-cache"); err != nil {
		t.Errorf("the daemon still maps the memfd after its connection's last map output committed, the grace period passed and the client closed it: %v", err)
	}
	if err := h.alive(); err != nil {
		t.Fatal(err)
	}
}

// TestMemfdKeptUntilClose is TestMemfdReleasedWhenIdle with a grace period
// of a minute: the committed map output's memfd stays mapped for the
// connection's next map output, and goes when the connection ends.
func TestMemfdKeptUntilClose(t *testing.T) {
	d := startDaemon(t, config{args: []string{"--memfd-idle-grace", "1m"}})
	h := memfdCommitted(t, d, "kept-cache")
	if err := h.alive(); err != nil {
		t.Fatal(err)
	}
	if mapped, err := mapsMemfd(d.pid(), "kept-cache"); err != nil || !mapped {
		t.Errorf("the daemon maps the memfd sent twice: %v, %v; want it kept in the grace period", mapped, err)
	}
	h.close()
	if err := memfdUnmapped(d, "kept-cache"); err != nil {
		t.Errorf("the daemon still maps the memfd after its connection ended: %v", err)
	}
}

// memfdCommitted connects, sends a sealed memfd named name with two
// batches of one map output (so the connection caches its mapping),
// checks that the daemon maps it, commits the output and closes its own
// descriptor of the memfd.
func memfdCommitted(t *testing.T, d *daemon, name string) *hostile {
	t.Helper()
	e := &hostileEnv{socket: d.socket}
	h, err := e.ready(false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.close)
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(fd, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
		t.Fatal(err)
	}
	handle, err := h.open(1, 4, protocol.KindOpaque)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		b := memfdBatch(40)
		b.Handle = handle
		id, err := h.sendFD(b, fd)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.expect(id, protocol.TypeBatchAccepted); err != nil {
			t.Fatal(err)
		}
	}
	if mapped, err := mapsMemfd(d.pid(), name); err != nil || !mapped {
		t.Fatalf("the daemon maps the memfd sent twice: %v, %v; want it cached while the map output is open", mapped, err)
	}
	if _, err := h.call(&protocol.Commit{Handle: handle}, protocol.TypeCommitResult); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	return h
}

// memfdUnmapped waits until the daemon no longer maps the memfd named
// name, and says so if it still does after waitTimeout.
func memfdUnmapped(d *daemon, name string) error {
	deadline := time.Now().Add(waitTimeout)
	for {
		mapped, err := mapsMemfd(d.pid(), name)
		if err != nil {
			return err
		}
		if !mapped {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still mapped %v later", waitTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
