// Package buildinfo names the build of a binary: its version, the commit it
// was built from and the Go toolchain that built it.
//
// A release build (make dist) sets the version and commit with
//
//	-ldflags "-X github.com/shuffled/shuffled/internal/buildinfo.version=0.1.0
//	          -X github.com/shuffled/shuffled/internal/buildinfo.commit=<hash>"
//
// Any other build reports Base with a "-dev" suffix, and the commit the Go
// toolchain stamped into the binary (go build in a git checkout) or
// "unknown" (go run, a build outside a checkout).
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Base is the version the source tree is on its way to. jvm/pom.xml's
// version is Base-dev, as an unstamped Go build's (a test checks it).
const Base = "0.1.0"

// Set by the linker in release builds; see the package comment.
var (
	version string
	commit  string
)

// Info describes one build.
type Info struct {
	Version string `json:"version"`
	// Commit is the full git hash, with "-dirty" when the tree had
	// uncommitted changes, or "unknown".
	Commit    string `json:"commit"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"` // GOOS/GOARCH
}

// Get returns this binary's build.
func Get() Info {
	info := Info{
		Version:   version,
		Commit:    commit,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	if info.Version == "" {
		info.Version = Base + "-dev"
	}
	if info.Commit == "" {
		info.Commit = stampedCommit()
	}
	return info
}

// stampedCommit returns the commit the Go toolchain recorded (vcs.revision,
// with -dirty for vcs.modified), or "unknown".
func stampedCommit() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// ShortCommit is Commit with its hash cut to 12 digits.
func (i Info) ShortCommit() string {
	hash, dirty, _ := strings.Cut(i.Commit, "-")
	if len(hash) > 12 {
		hash = hash[:12]
	}
	if dirty != "" {
		return hash + "-" + dirty
	}
	return hash
}

// String is the one-line form `shuffled version` prints after the name:
// "0.1.0 (commit 0123456789ab, go1.26.0, linux/amd64)".
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, %s, %s)", i.Version, i.ShortCommit(), i.GoVersion, i.Platform)
}
