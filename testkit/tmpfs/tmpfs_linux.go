// Package tmpfs mounts small real file systems for tests that must see a
// disk fill up (ENOSPC from the kernel, not from an injector).
package tmpfs

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// Mount mounts a tmpfs of size (e.g. "2m") on a fresh directory and
// unmounts it when the test ends. It skips the test where mounting is not
// permitted: a real small file system needs CAP_SYS_ADMIN (root).
func Mount(t testing.TB, size string) string {
	t.Helper()
	dir := t.TempDir()
	err := unix.Mount("shuffled-test", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size="+size+",mode=0755")
	if errors.Is(err, unix.EPERM) {
		t.Skipf("mount -t tmpfs on %s: %v: a real small file system needs CAP_SYS_ADMIN (run as root)", dir, err)
	}
	if err != nil {
		t.Fatalf("mount -t tmpfs -o size=%s on %s: %v", size, dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}
