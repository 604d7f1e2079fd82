package command

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shuffled/shuffled/testkit"
)

// --cpu-profile writes a profile of the run that ends at the drain, and
// refuses a file that exists (it never overwrites one).
func TestServeCPUProfile(t *testing.T) {
	dir, err := os.MkdirTemp("", "serve")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	prof := filepath.Join(dir, "cpu.prof")
	args := []string{"--socket", filepath.Join(dir, "s.sock"), "--root", filepath.Join(dir, "root"), "--cpu-profile", prof}
	ctx, cancel := context.WithCancel(context.Background())
	var logs testkit.SyncBuffer
	done := make(chan error, 1)
	go func() { done <- serve(ctx, args, io.Discard, &logs) }()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "shuffled ready") {
		if time.Now().After(deadline) {
			t.Fatalf("no ready line: %s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	b, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile of %d bytes does not start as gzip (pprof's format): % x", len(b), b[:min(len(b), 4)])
	}

	err = serve(context.Background(), args, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--cpu-profile") || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("serve with an existing profile file: %v, want an error naming --cpu-profile and that the file exists", err)
	}
}
