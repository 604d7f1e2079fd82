package archtest

import (
	"bufio"
	"fmt"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// mapDoc is the map the check reads, relative to the module's root.
const mapDoc = "docs/architecture.md"

// pkg is one package of the module: the project packages its files
// import, production files (prod) and _test.go files (test) apart.
type pkg struct {
	prod, test map[string][]string // imported package -> the files importing it
}

// rule is one row of the map: the packages it names, and the project
// packages they may import ("—" or "nothing": none).
type rule struct {
	line  int
	names []string
	may   []string
}

// TestImportDirection checks every package's imports against the map,
// then the rules every package keeps whatever its row says:
//   - production code never imports testkit or a package below it;
//   - a package under internal/ imports no project package outside
//     internal/ (internal/ holds production leaves);
//   - testkit itself, testkit/leakcheck and testkit/tmpfs import nothing of
//     the project, tests included, so the in-package tests of the lowest
//     packages (vfs, shufflefile) can use them without a cycle.
func TestImportDirection(t *testing.T) {
	root, module := moduleRoot(t)
	pkgs := scan(t, root, module)
	rules := readMap(t, root)
	for _, err := range check(pkgs, rules) {
		t.Error(err)
	}
}

// check returns every way pkgs break rules or the fixed rules above.
func check(pkgs map[string]*pkg, rules map[string]rule) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, name := range sortedKeys(pkgs) {
		p := pkgs[name]
		r, ok := rules[name]
		if !ok {
			fail("package %s has no row in %s's package table (what it owns, what it may import)", name, mapDoc)
		}
		for _, imp := range sortedKeys(p.prod) {
			where := strings.Join(p.prod[imp], ", ")
			switch {
			case isTestkit(imp):
				fail("%s (%s) imports %s: production code never imports testkit, which only tests use", name, where, imp)
			case isInternal(name) && !isInternal(imp) && imp != "errdefs":
				fail("%s (%s) imports %s: internal/ holds production leaves, which import no project package outside internal/ but errdefs", name, where, imp)
			case ok && !slices.Contains(r.may, imp):
				fail("%s (%s) imports %s, which its row in %s (line %d) does not list: the import points the wrong way, or the map needs the change",
					name, where, imp, mapDoc, r.line)
			}
		}
		if name == "testkit" || name == "testkit/leakcheck" || name == "testkit/tmpfs" {
			all := merged(p)
			for _, imp := range sortedKeys(all) {
				fail("%s (%s) imports %s: it must import nothing of the project, so that the tests of every package may use it", name, strings.Join(all[imp], ", "), imp)
			}
		}
	}
	return errs
}

// moduleRoot returns the directory of the module's go.mod and its path.
func moduleRoot(t *testing.T) (string, string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			for line := range strings.SplitSeq(string(b), "\n") {
				if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
					return dir, strings.Trim(strings.TrimSpace(m), `"`)
				}
			}
			t.Fatalf("%s: no module line", filepath.Join(dir, "go.mod"))
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// scan parses the imports of every .go file of the module below root,
// whatever its build constraints (cuda, clib, each OS), except the
// programs marked "ignore"; directories the go command skips (testdata,
// names starting with . or _, other modules) are skipped.
func scan(t *testing.T, root, module string) map[string]*pkg {
	t.Helper()
	pkgs := map[string]*pkg{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			n := d.Name()
			if path != root && (n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); path != root && err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		for _, g := range f.Comments {
			if g.Pos() >= f.Package {
				break
			}
			for _, c := range g.List {
				if x, err := constraint.Parse(c.Text); err == nil && x.String() == "ignore" {
					return nil
				}
			}
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		p := pkgs[name]
		if p == nil {
			p = &pkg{prod: map[string][]string{}, test: map[string][]string{}}
			pkgs[name] = p
		}
		into := p.prod
		if strings.HasSuffix(path, "_test.go") {
			into = p.test
		}
		for _, s := range f.Imports {
			ip, err := strconv.Unquote(s.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: import %s: %w", path, s.Path.Value, err)
			}
			if ip != module && !strings.HasPrefix(ip, module+"/") {
				continue
			}
			imp := strings.TrimPrefix(strings.TrimPrefix(ip, module), "/")
			if imp == "" {
				imp = "."
			}
			if imp == name {
				continue // an external test package of its own package
			}
			into[imp] = append(into[imp], filepath.Base(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) == 0 {
		t.Fatalf("no Go package below %s", root)
	}
	return pkgs
}

var ticked = regexp.MustCompile("`([^`]+)`")

// readMap reads the package table of the map: the table whose header
// names the columns "package" and "may import". The first cell's
// backquoted names are the packages of the row (a name that is a
// directory without Go files, such as jvm/client, is allowed); the last
// cell's are the project packages they may import.
func readMap(t *testing.T, root string) map[string]rule {
	t.Helper()
	f, err := os.Open(filepath.Join(root, mapDoc))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rules := map[string]rule{}
	in := false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "|") {
			in = false
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if !in {
			in = strings.TrimSpace(cells[0]) == "package" && strings.TrimSpace(cells[len(cells)-1]) == "may import"
			continue
		}
		if strings.HasPrefix(cells[0], " ---") || strings.HasPrefix(cells[0], "---") {
			continue
		}
		r := rule{line: n}
		for _, m := range ticked.FindAllStringSubmatch(cells[0], -1) {
			r.names = append(r.names, m[1])
		}
		last := cells[len(cells)-1]
		for _, m := range ticked.FindAllStringSubmatch(last, -1) {
			r.may = append(r.may, m[1])
		}
		if len(r.names) == 0 || len(cells) < 3 {
			t.Fatalf("%s:%d: a row of the package table names no package or has no may-import cell: %q", mapDoc, n, line)
		}
		if len(r.may) == 0 && !strings.Contains(last, "—") && !strings.Contains(last, "nothing") {
			t.Fatalf("%s:%d: may-import cell %q lists no package and is not \"—\" or \"nothing\"", mapDoc, n, strings.TrimSpace(last))
		}
		for _, name := range r.names {
			if prev, dup := rules[name]; dup {
				t.Fatalf("%s:%d: package %s has a row already (line %d)", mapDoc, n, name, prev.line)
			}
			if st, err := os.Stat(filepath.Join(root, filepath.FromSlash(name))); err != nil || !st.IsDir() {
				t.Fatalf("%s:%d: package %s: no such directory", mapDoc, n, name)
			}
			rules[name] = r
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rules) == 0 {
		t.Fatalf("%s: no package table (a table whose columns start with \"package\" and end with \"may import\")", mapDoc)
	}
	for _, r := range rules {
		for _, m := range r.may {
			if _, ok := rules[m]; !ok {
				t.Fatalf("%s:%d: may import %s, which has no row", mapDoc, r.line, m)
			}
		}
	}
	return rules
}

func isTestkit(p string) bool  { return p == "testkit" || strings.HasPrefix(p, "testkit/") }
func isInternal(p string) bool { return p == "internal" || strings.HasPrefix(p, "internal/") }

func merged(p *pkg) map[string][]string {
	m := map[string][]string{}
	for k, v := range p.prod {
		m[k] = append(m[k], v...)
	}
	for k, v := range p.test {
		m[k] = append(m[k], v...)
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
