package sparkjars

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func touch(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFindFromEnv(t *testing.T) {
	a, b, none := t.TempDir(), t.TempDir(), t.TempDir()
	touch(t, a, "spark-network-common_2.12-3.5.9.jar", "spark-network-shuffle_2.12-3.5.9.jar")
	touch(t, b, "spark-network-common_2.13-4.3.0-preview1.jar", "spark-network-commonX_2.13-9.9.9.jar")
	touch(t, none, "netty-common-4.1.jar")
	t.Setenv(Env, strings.Join([]string{a, b, none}, string(os.PathListSeparator)))
	got := Find(t, "spark-network-common")
	want := map[string]string{"3.5.9": a, "4.3.0-preview1": b}
	if len(got) != len(want) {
		t.Fatalf("Find = %v, want %v", got, want)
	}
	for v, d := range want {
		if got[v] != d {
			t.Errorf("Find[%q] = %q, want %q", v, got[v], d)
		}
	}
	if got := Find(t, "spark-network-shuffle"); len(got) != 1 || got["3.5.9"] != a {
		t.Errorf("Find shuffle = %v, want only 3.5.9 in %s", got, a)
	}
}

func TestFindSkipsWithoutJars(t *testing.T) {
	t.Setenv(Env, t.TempDir())
	var skipped bool
	t.Run("inner", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		Find(t, "spark-network-common")
	})
	if !skipped {
		t.Error("Find with no jars did not skip the test")
	}
}

func TestRepoRoot(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "testkit", "sparkjars", "sparkjars.go")); err != nil {
		t.Errorf("repoRoot = %s, which does not hold this package: %v", root, err)
	}
}
