package command

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/internal/buildinfo"
)

func TestVersion(t *testing.T) {
	want := "shuffled " + buildinfo.Get().String() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		var out, errOut bytes.Buffer
		if err := Run(context.Background(), args, &out, &errOut); err != nil {
			t.Fatalf("Run(%q) = %v (stderr %q)", args, err, errOut.String())
		}
		if out.String() != want {
			t.Errorf("Run(%q) printed %q, want %q", args, out.String(), want)
		}
	}

	var out bytes.Buffer
	if err := Run(context.Background(), []string{"version", "--json"}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var got buildinfo.Info
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("version --json printed %q: %v", out.String(), err)
	}
	if got != buildinfo.Get() {
		t.Errorf("version --json = %+v, want %+v", got, buildinfo.Get())
	}
	for _, k := range []string{`"version"`, `"commit"`, `"go_version"`} {
		if !strings.Contains(out.String(), k) {
			t.Errorf("version --json printed %q, want a key %s", out.String(), k)
		}
	}

	if err := Run(context.Background(), []string{"version", "extra"}, &bytes.Buffer{}, &bytes.Buffer{}); ExitCode(err) != 2 {
		t.Errorf("version extra: err %v, exit %d, want a usage error (2)", err, ExitCode(err))
	}
}
