package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
)

// Helpers of the reliability tests (crash loop and load). Their names
// start with rel so that they stay clear of the package's other helpers.

var relLoadgen struct {
	once sync.Once
	path string
	err  error
}

// relLoadgenBinary builds cmd/shuffled-loadgen once, next to the daemon
// binary, and returns its path.
func relLoadgenBinary(t testing.TB) string {
	t.Helper()
	relLoadgen.once.Do(func() {
		relLoadgen.path = filepath.Join(binDir, "shuffled-loadgen")
		cmd := exec.Command("go", "build", "-o", relLoadgen.path, "github.com/shuffled/shuffled/cmd/shuffled-loadgen")
		out, err := cmd.CombinedOutput()
		if err != nil {
			relLoadgen.err = fmt.Errorf("go build ./cmd/shuffled-loadgen: %w\n%s", err, out)
		}
	})
	if relLoadgen.err != nil {
		t.Fatal(relLoadgen.err)
	}
	return relLoadgen.path
}

// relDial connects a client to socket and registers it for app (executor
// "1"), into the daemon's root or, with localDirs, into Spark's layout
// under them. Unlike daemon.dial it returns its errors, so goroutines may
// call it, and leaves closing the client to the caller.
func relDial(ctx context.Context, socket, app string, localDirs []string, opts ...client.Option) (*client.Client, shufflefile.Layout, error) {
	c, err := client.Dial(ctx, socket, append([]client.Option{client.WithName("integration")}, opts...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("dial %s: %w", socket, err)
	}
	req := protocol.RegisterExecutor{AppID: app, ExecutorID: "1", LocalDirs: localDirs}
	if len(localDirs) > 0 {
		req.SubDirs = subDirs
	}
	reg, err := c.Register(ctx, req)
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("register %s: %w", app, err)
	}
	return c, layoutOf(reg, localDirs), nil
}

// relIndexes returns the committed index files under dir, by path.
func relIndexes(t testing.TB, dir string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), "shuffle_") && strings.HasSuffix(d.Name(), ".index") {
			found = append(found, path)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return found
}

// relSameFiles compares the files of a committed map output, named by its
// index path, with those of the same name in dir: the data, index and
// checksum files must hold the same bytes. It names the first that
// differs or is missing.
func relSameFiles(index, dir string, alg string) error {
	base := strings.TrimSuffix(filepath.Base(index), ".index")
	for _, name := range []string{base + ".index", base + ".data", base + ".checksum." + alg} {
		got, err := os.ReadFile(filepath.Join(filepath.Dir(index), name))
		if err != nil {
			return err
		}
		want, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("no reference for %s: %w", name, err)
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("%s: %d bytes differ from the reference's %d at byte %d", name, len(got), len(want), firstDiff(got, want))
		}
	}
	return nil
}

// relSameOutput checks that map output o, which Commit answered with res,
// is byte for byte the same as ref, committed with refRes: the same
// answer, and the same data, index and checksum files.
func relSameOutput(o *mapOutput, res *protocol.CommitResult, ref *mapOutput, refRes *protocol.CommitResult) error {
	if !slices.Equal(res.Lengths, refRes.Lengths) || !slices.Equal(res.Checksums, refRes.Checksums) {
		return fmt.Errorf("%v: Commit returned lengths %v checksums %v, the same output sent as %v returned %v %v",
			o, res.Lengths, res.Checksums, ref.id, refRes.Lengths, refRes.Checksums)
	}
	names := func(id shufflefile.ID) []string {
		return []string{shufflefile.IndexName(id), shufflefile.DataName(id), shufflefile.ChecksumName(id, o.alg)}
	}
	want := names(ref.id)
	for i, name := range names(o.id) {
		if o.alg == checksum.None && i == 2 {
			break
		}
		got, err := os.ReadFile(shufflefile.Path(o.layout, name))
		if err != nil {
			return fmt.Errorf("%v: %w", o, err)
		}
		other, err := os.ReadFile(shufflefile.Path(ref.layout, want[i]))
		if err != nil {
			return fmt.Errorf("%v: reference: %w", o, err)
		}
		if !bytes.Equal(got, other) {
			return fmt.Errorf("%v: %s: %d bytes differ from the %d of the same output sent as %v, at byte %d", o, name, len(got), len(other), want[i], firstDiff(got, other))
		}
	}
	return nil
}

// relProcStatus returns a size field (VmHWM, VmRSS, ...) of
// /proc/PID/status in bytes.
func relProcStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// relStats returns the daemon's Stats figures by name.
func relStats(ctx context.Context, socket string) (map[string]int64, error) {
	c, err := client.Dial(ctx, socket, client.WithName("integration-stats"))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stats, err := c.Stats(ctx)
	if err != nil {
		return nil, err
	}
	m := make(map[string]int64, len(stats))
	for _, s := range stats {
		m[s.Name] = s.Value
	}
	return m, nil
}
