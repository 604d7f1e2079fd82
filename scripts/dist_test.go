// Package scripts_test checks the release artifacts that scripts/dist (make
// dist) builds: every file a shipped document links is in the tarball, every
// Go module linked into its binaries has its license texts beside them
// (licenses/, kept in this tree and compared with the module cache), and the
// jars carry this project's LICENSE and NOTICE and no other project's classes.
//
// TestTarball builds a tarball for this machine's architecture with
// scripts/dist, without the jars; with SHUFFLED_DIST_DIR set (scripts/test
// sets it after its make dist) it checks every tarball and jar in that
// directory instead.
package scripts_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"flag"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite licenses/ from the module cache (TestLicenseTexts)")

// The tree's root, from this package's directory.
const root = ".."

// What scripts/dist ships: these commands, built for linux on these
// architectures with cgo off.
var (
	commands = []string{"./cmd/shuffled", "./cmd/shuffled-loadgen"}
	arches   = []string{"amd64", "arm64"}
)

// licenseName matches the files of a module that carry its terms.
var licenseName = regexp.MustCompile(`(?i)^(licen[cs]e|copying|notice|patents)(\.(txt|md))?$`)

// goCmd runs the go command in the tree's root, offline: a module missing
// from the module cache fails rather than being fetched.
func goCmd(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly"), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// wantLicenses returns the license texts the shipped binaries need, by
// their path under licenses/: every license-named file in the directory of
// each package they link from another module, and in its parents up to the
// module's root (a module may carry other terms for some of its packages),
// and Go's own for the standard library (licenses/go/). The value is the
// file's path on this machine. modules gets every module linked, by arch.
func wantLicenses(t *testing.T) (want map[string]string, modules map[string][]string) {
	t.Helper()
	want = map[string]string{}
	modules = map[string][]string{}
	format := `{{if and .Module (not .Module.Main)}}{{.Module.Path}}{{"\t"}}{{with .Module.Replace}}{{.Dir}}{{else}}{{.Module.Dir}}{{end}}{{"\t"}}{{.Dir}}{{end}}`
	for _, arch := range arches {
		env := []string{"GOOS=linux", "GOARCH=" + arch, "CGO_ENABLED=0"}
		out := goCmd(t, env, append([]string{"list", "-deps", "-f", format}, commands...)...)
		seen := map[string]bool{}
		for line := range strings.Lines(out) {
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			f := strings.Split(line, "\t")
			if len(f) != 3 || f[1] == "" {
				t.Fatalf("go list: unexpected line %q (a module outside the module cache?)", line)
			}
			mod, modDir, dir := f[0], f[1], f[2]
			if !seen[mod] {
				seen[mod] = true
				modules[arch] = append(modules[arch], mod)
			}
			for d := dir; ; d = filepath.Dir(d) {
				rel, err := filepath.Rel(modDir, d)
				if err != nil || strings.HasPrefix(rel, "..") {
					t.Fatalf("package dir %s is not under its module's %s", dir, modDir)
				}
				entries, err := os.ReadDir(d)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range entries {
					if e.Type().IsRegular() && licenseName.MatchString(e.Name()) {
						want[path.Join(mod, filepath.ToSlash(rel), e.Name())] = filepath.Join(d, e.Name())
					}
				}
				if rel == "." {
					break
				}
			}
		}
		sort.Strings(modules[arch])
	}
	goroot := strings.TrimSpace(goCmd(t, nil, "env", "GOROOT"))
	for _, name := range []string{"LICENSE", "PATENTS"} {
		want[path.Join("go", name)] = filepath.Join(goroot, name)
	}
	return want, modules
}

// haveLicenses returns the files under licenses/ but its README.md.
func haveLicenses(t *testing.T) map[string][]byte {
	t.Helper()
	have := map[string][]byte{}
	dir := filepath.Join(root, "licenses")
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "README.md" {
			return nil
		}
		b, err := os.ReadFile(p)
		have[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return have
}

// TestLicenseTexts fails when a module the release binaries link (a new
// dependency, a new package of one, a new version whose terms changed) has
// a license text that licenses/ lacks or holds otherwise, and when
// licenses/ holds a text no linked module needs. -update rewrites it.
func TestLicenseTexts(t *testing.T) {
	want, _ := wantLicenses(t)
	if *update {
		for rel := range haveLicenses(t) {
			if err := os.Remove(filepath.Join(root, "licenses", rel)); err != nil {
				t.Fatal(err)
			}
		}
		for rel, src := range want {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(root, "licenses", filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// Directories the removals emptied.
		_ = filepath.WalkDir(filepath.Join(root, "licenses"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Remove(p) // fails unless empty
			}
			return nil
		})
	}
	have := haveLicenses(t)
	const fix = "go test ./scripts -run TestLicenseTexts -update"
	for _, rel := range sortedKeys(want) {
		b, err := os.ReadFile(want[rel])
		if err != nil {
			t.Fatal(err)
		}
		got, ok := have[rel]
		switch {
		case !ok:
			t.Errorf("licenses/%s is missing: the release binaries link a package under %s, which carries it (%s)", rel, path.Dir(rel), fix)
		case !bytes.Equal(got, b):
			t.Errorf("licenses/%s differs from %s (%s)", rel, want[rel], fix)
		}
	}
	for _, rel := range sortedKeys(have) {
		if _, ok := want[rel]; !ok {
			t.Errorf("licenses/%s: no package the release binaries link carries it (%s)", rel, fix)
		}
	}
}

// TestJarBundles checks, without building, that the Spark plugin's shaded
// jar bundles only this project's client: a third-party artifact added to
// its artifactSet must bring its license text and NOTICE entry (and this
// test's list) with it.
func TestJarBundles(t *testing.T) {
	pom, err := os.ReadFile(filepath.Join(root, "jvm/spark/pom.xml"))
	if err != nil {
		t.Fatal(err)
	}
	set := regexp.MustCompile(`(?s)<artifactSet>(.*?)</artifactSet>`).FindSubmatch(pom)
	if set == nil {
		t.Fatal("jvm/spark/pom.xml: no <artifactSet> in the shade plugin's configuration: what does the jar bundle?")
	}
	includes := regexp.MustCompile(`<include>\s*([^<\s]+)\s*</include>`).FindAllSubmatch(set[1], -1)
	if len(includes) == 0 {
		t.Fatal("jvm/spark/pom.xml: the shade plugin's artifactSet includes nothing: every dependency would be bundled")
	}
	for _, inc := range includes {
		if !strings.HasPrefix(string(inc[1]), "dev.shuffled:") {
			t.Errorf("jvm/spark/pom.xml bundles %s: add its license text and NOTICE to the jar and to NOTICE, and teach this test and checkJar", inc[1])
		}
	}
}

// TestTarball checks the release tarballs (and jars) that scripts/dist
// built: each document's relative links and contrib/ paths name a file in
// the tarball, licenses/ is there whole, and every module the binaries
// link (go version -m) has its texts in it.
func TestTarball(t *testing.T) {
	dir := os.Getenv("SHUFFLED_DIST_DIR")
	if dir == "" {
		arch := runtime.GOARCH
		if !slices.Contains(arches, arch) {
			arch = "amd64"
		}
		dir = t.TempDir()
		cmd := exec.Command("scripts/dist")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "DIST_DIR="+dir, "SHUFFLED_DIST_SKIP_JARS=1", "SHUFFLED_DIST_ARCHES="+arch)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("scripts/dist: %v\n%s", err, out)
		}
	}
	tarballs, _ := filepath.Glob(filepath.Join(dir, "shuffled-*-linux-*.tar.gz"))
	if len(tarballs) == 0 {
		t.Fatalf("no shuffled-*-linux-*.tar.gz in %s", dir)
	}
	_, modules := wantLicenses(t)
	licenses := haveLicenses(t)
	for _, tb := range tarballs {
		t.Run(filepath.Base(tb), func(t *testing.T) {
			files := readTarball(t, tb)
			checkLinks(t, files)
			for rel, b := range licenses {
				if got, ok := files["licenses/"+rel]; !ok || !bytes.Equal(got, b) {
					t.Errorf("licenses/%s: in the tarball %v, the same bytes as the tree's %v", rel, ok, bytes.Equal(got, b))
				}
			}
			arch := strings.TrimSuffix(tb[strings.LastIndex(tb, "-")+1:], ".tar.gz")
			var linked []string
			for _, bin := range []string{"shuffled", "shuffled-loadgen"} {
				mods := binaryModules(t, files, bin)
				for _, m := range mods {
					if !hasPrefixKey(files, "licenses/"+m+"/") {
						t.Errorf("%s links module %s, and the tarball has no licenses/%s/", bin, m, m)
					}
				}
				linked = append(linked, mods...)
			}
			slices.Sort(linked)
			linked = slices.Compact(linked)
			if !slices.Equal(linked, modules[arch]) {
				t.Errorf("the binaries link modules %v; go list -deps (which licenses/ follows) says %v", linked, modules[arch])
			}
			if _, ok := files["licenses/go/LICENSE"]; !ok {
				t.Error("the tarball lacks licenses/go/LICENSE (the Go standard library in every binary)")
			}
		})
	}
	jars, _ := filepath.Glob(filepath.Join(dir, "*.jar"))
	for _, jar := range jars {
		t.Run(filepath.Base(jar), func(t *testing.T) { checkJar(t, jar) })
	}
}

// readTarball returns the tarball's regular files by their path under its
// one top directory.
func readTarball(t *testing.T, name string) map[string][]byte {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(zr)
	top := strings.TrimSuffix(filepath.Base(name), ".tar.gz") + "/"
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rel, ok := strings.CutPrefix(h.Name, top)
		if !ok {
			t.Fatalf("%s: %s is outside the top directory %s", name, h.Name, top)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[rel] = b
	}
	return files
}

var (
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codePath = regexp.MustCompile("`((?:contrib|docs|licenses)/[^`\\s]*)`")
)

// checkLinks checks that the tarball holds every file its documents link,
// and the files the issue of a new operator named.
func checkLinks(t *testing.T, files map[string][]byte) {
	t.Helper()
	for _, must := range []string{"shuffled", "shuffled-loadgen", "LICENSE", "NOTICE", "README.md",
		"docs/operations.md", "docs/protocol.md", "docs/format.md", "docs/reliability.md",
		"contrib/grafana/shuffled.json", "contrib/systemd/shuffled.service", "contrib/systemd/shuffled.socket"} {
		if _, ok := files[must]; !ok {
			t.Errorf("the tarball lacks %s", must)
		}
	}
	for _, doc := range sortedKeys(files) {
		if !strings.HasSuffix(doc, ".md") {
			continue
		}
		text := string(files[doc])
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if regexp.MustCompile(`^([a-z]+:|#)`).MatchString(target) {
				continue
			}
			p := path.Clean(path.Join(path.Dir(doc), strings.Split(target, "#")[0]))
			if _, ok := files[p]; !ok {
				t.Errorf("%s links %s (%s), which the tarball lacks", doc, target, p)
			}
		}
		// Paths an operator is told to open, in code spans: from the
		// tarball's top, a file or a directory.
		for _, m := range codePath.FindAllStringSubmatch(text, -1) {
			p := strings.TrimSuffix(m[1], "/")
			if _, ok := files[p]; !ok && !hasPrefixKey(files, p+"/") {
				t.Errorf("%s names %s, which the tarball lacks", doc, m[1])
			}
		}
	}
}

// binaryModules returns the modules go version -m lists for a binary of the
// tarball (a replacement's path where one is replaced).
func binaryModules(t *testing.T, files map[string][]byte, bin string) []string {
	t.Helper()
	b, ok := files[bin]
	if !ok {
		t.Fatalf("the tarball lacks %s", bin)
	}
	p := filepath.Join(t.TempDir(), bin)
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	out := goCmd(t, nil, "version", "-m", p)
	var mods []string
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "dep":
			mods = append(mods, f[1])
		case len(f) >= 2 && f[0] == "=>":
			mods[len(mods)-1] = f[1]
		}
	}
	if len(mods) == 0 {
		t.Fatalf("go version -m %s lists no modules:\n%s", bin, out)
	}
	slices.Sort(mods)
	return mods
}

// checkJar checks that a jar carries this project's LICENSE and NOTICE as
// META-INF/LICENSE and META-INF/NOTICE, and no other project's files.
func checkJar(t *testing.T, name string) {
	t.Helper()
	zr, err := zip.OpenReader(name)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	got := map[string][]byte{}
	for _, f := range zr.File {
		switch {
		case strings.HasSuffix(f.Name, "/"):
		case f.Name == "META-INF/LICENSE" || f.Name == "META-INF/NOTICE" || f.Name == buildProperties:
			r, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			got[f.Name], err = io.ReadAll(r)
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
		case ownJarEntry(f.Name):
		default:
			t.Errorf("%s holds %s, not this project's: a bundled dependency needs its license text and NOTICE entry in the jar", filepath.Base(name), f.Name)
		}
	}
	// The plugin names its own jar in its refusals: the file's name.
	if b, ok := got[buildProperties]; ok {
		m := regexp.MustCompile(`(?m)^jar=(.*?)\r?$`).FindSubmatch(b)
		if m == nil || string(m[1]) != filepath.Base(name) {
			t.Errorf("%s: %s names the jar %q, not its file name", filepath.Base(name), buildProperties, m)
		}
	}
	for _, n := range []string{"LICENSE", "NOTICE"} {
		want, err := os.ReadFile(filepath.Join(root, n))
		if err != nil {
			t.Fatal(err)
		}
		if b, ok := got["META-INF/"+n]; !ok || !bytes.Equal(b, want) {
			t.Errorf("%s: META-INF/%s present %v, equal to the tree's %s %v", filepath.Base(name), n, ok, n, bytes.Equal(b, want))
		}
	}
}

// buildProperties is what the Spark plugin records of its build; its jar=
// is the jar's file name.
const buildProperties = "org/apache/spark/shuffle/shuffled/build.properties"

// ownJarEntry reports whether a jar entry is this project's: its classes
// (also under META-INF/versions/N/ in the multi-release client), their
// resources, Maven's metadata of dev.shuffled artifacts, the manifest.
func ownJarEntry(name string) bool {
	if rest, ok := strings.CutPrefix(name, "META-INF/versions/"); ok {
		_, name, _ = strings.Cut(rest, "/")
	}
	for _, p := range []string{"dev/shuffled/", "org/apache/spark/shuffle/shuffled/", "META-INF/maven/dev.shuffled/"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return name == "META-INF/MANIFEST.MF"
}

func hasPrefixKey[V any](m map[string]V, prefix string) bool {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
