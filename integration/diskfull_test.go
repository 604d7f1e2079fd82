package integration

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shuffled/shuffled/disks"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/leakcheck"
	"github.com/shuffled/shuffled/testkit/tmpfs"
)

// relRefused checks that err is the clear refusal of a full disk: a
// protocol error with code ResourceExhausted whose message names the disk
// (the disk's directory, or a file under it). A refusal of the disk
// ledger (disks.ErrDiskFull) and a real ENOSPC must both arrive so.
func relRefused(err error, disk string) error {
	var pe *protocol.Error
	switch {
	case err == nil:
		return errors.New("no error")
	case !errors.As(err, &pe):
		return err
	case pe.Code != protocol.CodeResourceExhausted:
		return err
	case !strings.Contains(pe.Message, disk):
		return err
	}
	return nil
}

// TestDiskFullTmpfs runs the daemon with its root on a real 8 MiB tmpfs
// (low watermark 1 MiB, high 2 MiB) and fills it for real:
//
//   - map outputs commit until the disk reaches its low watermark; then a
//     new one is refused with ResourceExhausted naming the disk, and
//     nothing of it is committed;
//   - a map output in flight when something else fills the disk to ENOSPC
//     fails with the same clear error, and nothing of it is committed;
//   - with space back (the ballast removed, the application's outputs
//     removed over the socket), the daemon commits again, and every temp
//     file is gone.
func TestDiskFullTmpfs(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	mnt := tmpfs.Mount(t, "8m")
	root := filepath.Join(mnt, "root")
	d := startDaemon(t, config{root: root, args: []string{
		"--disk-low-watermark", "1MiB", "--disk-high-watermark", "2MiB", "--limit", "4MiB", "--log-level", "info",
	}})
	c, layout, err := relDial(ctx, d.socket, "full-app", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// Fill to the low watermark with map outputs.
	var committed []*mapOutput
	var res []protocol.CommitResult
	var refusal error
	for i := 0; refusal == nil; i++ {
		if i > 2000 {
			t.Fatalf("%d map outputs committed on an 8 MiB disk, none refused", i)
		}
		o := plan(i, "full-app", layout, shufflefile.ID{Shuffle: 1, Map: int64(i)})
		r, err := o.write(ctx, c)
		if err != nil {
			refusal = err
			if err := relRefused(err, root); err != nil {
				t.Fatalf("%v on a full disk: %v, want ResourceExhausted naming %s", o, err, root)
			}
			if o.committed() {
				t.Fatalf("%v was refused, but its index exists", o)
			}
			break
		}
		committed = append(committed, o)
		res = append(res, r)
	}
	for i, o := range committed {
		if err := o.verify(&res[i]); err != nil {
			t.Errorf("committed before the disk filled: %v", err)
		}
	}
	t.Logf("%d map outputs committed, then: %v", len(committed), refusal)

	// Space back: remove the application's outputs over the socket.
	if _, err := c.RemoveApplication(ctx, "full-app"); err != nil {
		t.Fatalf("RemoveApplication: %v", err)
	}
	// The daemon holds a disk full until its free-space figure is older
	// than the refresh bound; it is read afresh after that.
	time.Sleep(2 * disks.DefaultRefresh)
	c2, layout, err := relDial(ctx, d.socket, "full-app", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()

	// A map output in flight when the disk fills to ENOSPC.
	o := plan(2, "full-app", layout, shufflefile.ID{Shuffle: 2, Map: 0}) // three batches
	m, err := o.open(ctx, c2)
	if err != nil {
		t.Fatalf("Open with space back: %v", err)
	}
	if err := o.writeBatch(ctx, m, o.batches[0]); err != nil {
		t.Fatalf("first batch with space back: %v", err)
	}
	ballast := filepath.Join(mnt, "ballast")
	f, err := os.Create(ballast)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for err == nil {
		_, err = f.Write(chunk)
	}
	f.Close()
	if !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("filling %s: %v, want ENOSPC", mnt, err)
	}
	err = nil
	for _, b := range o.batches[1:] {
		if err = o.writeBatch(ctx, m, b); err != nil {
			break
		}
	}
	if err == nil {
		_, err = m.Commit(ctx)
	}
	if err := relRefused(err, root); err != nil {
		t.Errorf("map output in flight when the disk filled: %v, want ResourceExhausted naming %s", err, root)
	}
	if o.committed() {
		t.Errorf("%v failed on a full disk, but its index exists", o)
	}
	t.Logf("map output in flight when the disk filled: %v", err)

	// Space back again: the next map outputs commit.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * disks.DefaultRefresh)
	for i := range 3 {
		o := plan(10+i, "full-app", layout, shufflefile.ID{Shuffle: 3, Map: int64(i)})
		r, err := o.write(ctx, c2)
		if err != nil {
			t.Fatalf("%v after space came back: %v", o, err)
		}
		if err := o.verify(&r); err != nil {
			t.Error(err)
		}
	}
	c.Close()
	c2.Close()
	d.stop()
	if tmp := tempFiles(t, mnt); len(tmp) > 0 {
		t.Errorf("temp files after the daemon stopped: %q", tmp)
	}
}
