package buildinfo

import (
	"os"
	"regexp"
	"runtime"
	"testing"
)

func TestGetDefaults(t *testing.T) {
	i := Get()
	if version == "" && i.Version != Base+"-dev" {
		t.Errorf("Get().Version = %q, want %q without -ldflags", i.Version, Base+"-dev")
	}
	if i.Commit == "" {
		t.Error("Get().Commit is empty, want a hash or \"unknown\"")
	}
	if i.GoVersion != runtime.Version() {
		t.Errorf("Get().GoVersion = %q, want %q", i.GoVersion, runtime.Version())
	}
	if want := runtime.GOOS + "/" + runtime.GOARCH; i.Platform != want {
		t.Errorf("Get().Platform = %q, want %q", i.Platform, want)
	}
}

func TestString(t *testing.T) {
	for _, tc := range []struct {
		info Info
		want string
	}{
		{Info{"0.1.0", "0123456789abcdef0123", "go1.26.0", "linux/arm64"}, "0.1.0 (commit 0123456789ab, go1.26.0, linux/arm64)"},
		{Info{"0.1.0-dev", "0123456789abcdef0123-dirty", "go1.26.0", "linux/amd64"}, "0.1.0-dev (commit 0123456789ab-dirty, go1.26.0, linux/amd64)"},
		{Info{"0.1.0-dev", "unknown", "go1.26.0", "linux/amd64"}, "0.1.0-dev (commit unknown, go1.26.0, linux/amd64)"},
	} {
		if got := tc.info.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.info, got, tc.want)
		}
	}
}

// TestBaseMatchesPom keeps the Go and Maven versions one version.
func TestBaseMatchesPom(t *testing.T) {
	pom, err := os.ReadFile("../../jvm/pom.xml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)<artifactId>shuffled-jvm</artifactId>\s*<version>([^<]+)</version>`).FindSubmatch(pom)
	if m == nil {
		t.Fatal("jvm/pom.xml: no <version> after <artifactId>shuffled-jvm</artifactId>")
	}
	if got, want := string(m[1]), Base+"-dev"; got != want {
		t.Errorf("jvm/pom.xml version = %q, want %q (buildinfo.Base)", got, want)
	}
}
