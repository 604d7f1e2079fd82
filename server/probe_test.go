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
// refused the same way whether it exists or not, so registration cannot
// tell a peer what lies in directories it may not list; a symlink that
// lies under an allowed root but leads out of it is refused too.
func TestRegisterDoesNotProbe(t *testing.T) {
	allowed, hidden := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(hidden, "app-secret-42"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(hidden, filepath.Join(allowed, "out")); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, func(c *Config) { c.AllowedRoots = []string{allowed} })
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
	var msgs []string
	for _, name := range []string{"app-secret-42", "app-secret-43"} {
		dir := filepath.Join(hidden, name)
		err := register(dir)
		if protocol.CodeOf(err) != protocol.CodePermissionDenied {
			t.Fatalf("Register of %s outside the allowed roots = %v, want PermissionDenied", dir, err)
		}
		msgs = append(msgs, strings.ReplaceAll(err.Error(), name, "NAME"))
	}
	if msgs[0] != msgs[1] {
		t.Errorf("an existing and a missing dir outside the allowed roots are refused differently:\n%s\n%s", msgs[0], msgs[1])
	}
	if err := register(filepath.Join(allowed, "out", "app-secret-42")); protocol.CodeOf(err) != protocol.CodePermissionDenied {
		t.Errorf("Register through a symlink out of the allowed root = %v, want PermissionDenied", err)
	}
}
