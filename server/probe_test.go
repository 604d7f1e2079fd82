package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/protocol"
)

// TestRegisterDoesNotProbe: a local dir outside the allowed roots is
// refused the same way whether it exists or not, and so is one that leads
// out of its root through a symbolic link (to a directory, to a file or to
// nothing), so registration cannot tell a peer what lies in directories it
// may not list; a link from one allowed root into another is followed.
func TestRegisterDoesNotProbe(t *testing.T) {
	allowed, other, hidden := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(hidden, "app-secret-42"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hidden, "app-secret-44"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(hidden, filepath.Join(allowed, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(other, "blockmgr-x"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(other, "blockmgr-x"), filepath.Join(allowed, "into-other")); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, func(c *Config) { c.AllowedRoots = []string{allowed, other} })
	ctx := context.Background()
	register := func(dir string) error {
		c, err := client.Dial(ctx, d.socket)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = c.Register(ctx, protocol.RegisterExecutor{AppID: "probe", ExecutorID: "1", LocalDirs: []string{dir}, SubDirs: 64})
		return err
	}
	for _, base := range []string{hidden, filepath.Join(allowed, "out")} {
		var msgs []string
		for _, name := range []string{"app-secret-42", "app-secret-43", "app-secret-44"} { // a dir, nothing, a file
			dir := filepath.Join(base, name)
			err := register(dir)
			if protocol.CodeOf(err) != protocol.CodePermissionDenied {
				t.Fatalf("Register of %s = %v, want PermissionDenied", dir, err)
			}
			msgs = append(msgs, strings.ReplaceAll(err.Error(), name, "NAME"))
		}
		if msgs[0] != msgs[1] || msgs[1] != msgs[2] {
			t.Errorf("a dir, nothing and a file reached through %s are refused differently:\n%s", base, strings.Join(msgs, "\n"))
		}
	}
	if err := register(filepath.Join(allowed, "missing")); protocol.CodeOf(err) != protocol.CodeInvalidArgument {
		t.Errorf("Register of a missing dir under an allowed root = %v, want InvalidArgument", err)
	}
	if err := register(filepath.Join(allowed, "into-other")); err != nil {
		t.Errorf("Register through a link from one allowed root into another = %v, want it registered", err)
	}
}
