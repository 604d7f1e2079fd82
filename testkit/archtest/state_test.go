package archtest

import (
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// daemonMain is the daemon binary's package: the packages it links, but
// those under cmd/, keep no mutable package-level state (TestPackageState).
const daemonMain = "cmd/shuffled"

// stateAllowed lists the package-level variables of the daemon's packages
// that are neither error sentinels nor pools, each group with why it is not
// mutable state. An entry that names no such variable fails the test, so
// the list never outlives its reasons.
var stateAllowed = []allowed{
	{"checksum", []string{"castagnoli", "ieeeGF", "castagnoliGF"}, "CRC tables, computed at init, only read"},
	{"checksum", []string{"adlerLanes"}, "a constant kept in a variable so it stays in a register, never written"},
	{"checksum", []string{"adlerUseAVX2"}, "CPU feature probe, set at init, only read"},
	{"internal/xxh32", []string{"xxUseAVX"}, "CPU feature probe, set at init, only read"},
	{"internal/buildinfo", []string{"version", "commit"}, "set by the linker (-X), only read"},
	{"codec", []string{"lz4Magic", "snappyMagic", "snappyHeader", "snappyMaxChunk", "zstdDecoderOptions"}, "stream magics, bounds and the decoders' options, only read"},
	{"codec", []string{"newLibZstd"}, "set by init in the clib build (libzstd's encoder), then only read"},
	{"codec", []string{"useCLZ4"}, "clib build only: benchmarks and tests switch the lz4 block compressor to liblz4 (the same bytes); the daemon never sets it"},
	{"partition", []string{"typeNames", "typeWidths", "blockMagic", "kudoMagic", "zeroPadding", "intervalUnits", "sparkTypes"}, "type tables, format magics and zero padding, only read"},
	{"partition", []string{"nativeLittleEndian"}, "byte-order probe, set at init, only read"},
	{"protocol", []string{"columnTypes", "codeNames", "Magic", "typeNames", "le"}, "wire tables and magic, only read"},
	{"disks", []string{"ioErrnos", "byteUnits", "unitSizes"}, "errno and size unit tables, only read"},
	{"vfs", []string{"noOpenat2"}, "capability probe: set once when the kernel refuses openat2, never cleared"},
	{"vfs", []string{"Default"}, "the OS file system, a stateless value"},
	{"gpu", []string{"covered", "coveredFormats", "lz4KernelNames", "kernelNames"}, "the compression plans' coverage and the kernels' names, only read"},
	{"gpu", []string{"present"}, "the placeholder validity bitmap: a non-nil empty slice, never written"},
	{"gpu", []string{"lz4PTX", "partitionPTX"}, "kernel sources (//go:embed)"},
	{"metrics", []string{"CommitBuckets", "PhaseBuckets", "RunBuckets"}, "histogram buckets, only read"},
	{"server", []string{"defaultConfig", "codecNames"}, "the defaults Config.EnsureDefaults copies and flag help, only read"},
	{"writer", []string{"clockBase"}, "the monotonic clock's origin, set at init, only read"},
	{"inspect", []string{"lz4Magic", "snappyMagic", "zstdMagic", "blockMagic", "kudoMagic", "opaqueColumns"}, "stream magics and column names, only read"},
}

// allowed is one group of stateAllowed: variables of one package and why
// they are not mutable state.
type allowed struct {
	pkg   string
	names []string
	why   string
}

// varDecl is one package-level variable of a production file.
type varDecl struct {
	pkg, file string
	line      int
	name      string
	typ       ast.Expr // nil when inferred
	value     ast.Expr // nil when none
}

// TestPackageState checks that the packages the daemon links (all but
// cmd/) declare no mutable package-level variable: each package-level var
// of their production files (every build) is an error sentinel, a
// sync.Pool (or an array of them), the blank identifier, or listed in
// stateAllowed with its reason. State belongs to a value the Server owns.
func TestPackageState(t *testing.T) {
	root, module := moduleRoot(t)
	pkgs := scan(t, root, module)
	var linked []string
	for _, p := range deps(pkgs, daemonMain) {
		if p != "cmd" && !strings.HasPrefix(p, "cmd/") {
			linked = append(linked, p)
		}
	}
	if !slices.Contains(linked, "server") || !slices.Contains(linked, "writer") {
		t.Fatalf("the packages %s links, %v, lack server or writer", daemonMain, linked)
	}
	for _, err := range checkState(scanVars(t, root, linked), stateAllowed) {
		t.Error(err)
	}
}

// deps returns from and every package its production files reach,
// sorted.
func deps(pkgs map[string]*pkg, from string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		if seen[p] {
			return
		}
		seen[p] = true
		if q := pkgs[p]; q != nil {
			for imp := range q.prod {
				walk(imp)
			}
		}
	}
	walk(from)
	return sortedKeys(seen)
}

// scanVars parses the production files (every build, not those marked
// "ignore") of the packages names and returns their package-level
// variables.
func scanVars(t *testing.T, root string, names []string) []varDecl {
	t.Helper()
	fset := token.NewFileSet()
	var out []varDecl
	for _, name := range names {
		dir := filepath.Join(root, filepath.FromSlash(name))
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			n := e.Name()
			if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			if ignored(f) {
				continue
			}
			out = append(out, fileVars(fset, f, name, n)...)
		}
	}
	return out
}

// fileVars returns the package-level variables of f, file n of package
// pkg.
func fileVars(fset *token.FileSet, f *ast.File, pkg, n string) []varDecl {
	var out []varDecl
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, id := range vs.Names {
				v := varDecl{pkg: pkg, file: n, line: fset.Position(id.Pos()).Line, name: id.Name, typ: vs.Type}
				if i < len(vs.Values) {
					v.value = vs.Values[i]
				}
				out = append(out, v)
			}
		}
	}
	return out
}

// ignored reports whether f is a program marked "ignore" (go run only).
func ignored(f *ast.File) bool {
	for _, g := range f.Comments {
		if g.Pos() >= f.Package {
			break
		}
		for _, c := range g.List {
			if x, err := constraint.Parse(c.Text); err == nil && x.String() == "ignore" {
				return true
			}
		}
	}
	return false
}

// checkState returns an error for each of vars that is not allowed, and
// for each entry of allowed that names no variable.
func checkState(vars []varDecl, allow []allowed) []error {
	var errs []error
	listed, used := map[string]bool{}, map[string]bool{}
	for _, a := range allow {
		if a.why == "" {
			errs = append(errs, fmt.Errorf("stateAllowed's entry for %s %v gives no reason", a.pkg, a.names))
		}
		for _, n := range a.names {
			listed[a.pkg+"."+n] = true
		}
	}
	for _, v := range vars {
		key := v.pkg + "." + v.name
		switch {
		case v.name == "_": // a compile-time assertion: nothing can read or write it
		case isSentinel(v):
		case isPool(v.typ) || isPoolLit(v.value):
		default:
			if listed[key] {
				used[key] = true
				continue
			}
			errs = append(errs, fmt.Errorf("%s/%s:%d: package-level var %s: the daemon's packages keep no mutable package-level state; "+
				"make it a field of a value the Server owns (or a const), or, if it is never written after init, list it in stateAllowed with why",
				v.pkg, v.file, v.line, v.name))
		}
	}
	for _, key := range sortedKeys(listed) {
		if !used[key] {
			errs = append(errs, fmt.Errorf("stateAllowed lists %s, which names no package-level var of the daemon's packages (or one needing no entry): drop the entry", key))
		}
	}
	return errs
}

// isSentinel reports whether v is an error sentinel: named Err* or err*,
// its value errors.New, errdefs.New or fmt.Errorf (or, in errdefs, New).
func isSentinel(v varDecl) bool {
	if !strings.HasPrefix(v.name, "Err") && !strings.HasPrefix(v.name, "err") {
		return false
	}
	c, ok := v.value.(*ast.CallExpr)
	if !ok {
		return false
	}
	switch fn := c.Fun.(type) {
	case *ast.SelectorExpr:
		x, ok := fn.X.(*ast.Ident)
		return ok && (x.Name == "errors" && fn.Sel.Name == "New" || x.Name == "errdefs" && fn.Sel.Name == "New" || x.Name == "fmt" && fn.Sel.Name == "Errorf")
	case *ast.Ident:
		return v.pkg == "errdefs" && fn.Name == "New"
	}
	return false
}

// isPool reports whether t is sync.Pool or an array of them.
func isPool(t ast.Expr) bool {
	if a, ok := t.(*ast.ArrayType); ok && a.Len != nil {
		return isPool(a.Elt)
	}
	s, ok := t.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := s.X.(*ast.Ident)
	return ok && x.Name == "sync" && s.Sel.Name == "Pool"
}

// isPoolLit reports whether e is a sync.Pool composite literal.
func isPoolLit(e ast.Expr) bool {
	c, ok := e.(*ast.CompositeLit)
	return ok && isPool(c.Type)
}

// TestCheckStateRefuses feeds checkState a package whose variables are all
// allowed, then adds one kind of state at a time and wants it named.
func TestCheckStateRefuses(t *testing.T) {
	const fine = `package p
var ErrA = errors.New("a")
var (
	errB = errdefs.New(errdefs.ErrInternal, "b")
	ErrC = fmt.Errorf("c: %w", ErrA)
)
var pool = sync.Pool{New: func() any { return new(int) }}
var pools [4]sync.Pool
var _ io.Reader = (*r)(nil)
var table = [...]string{"x", "y"}
`
	allow := []allowed{{"p", []string{"table"}, "lookup table, only read"}}
	vars := func(t *testing.T, src string) []varDecl {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "p.go", src, 0)
		if err != nil {
			t.Fatal(err)
		}
		return fileVars(fset, f, "p", "p.go")
	}
	if errs := checkState(vars(t, fine), allow); len(errs) != 0 {
		t.Fatalf("checkState of allowed variables = %v, want none", errs)
	}
	for _, c := range []struct {
		name, add string
		allow     []allowed
		want      string
	}{
		{"counter", "var x int", allow, "p/p.go:11: package-level var x"},
		{"settable", "var Timeout = time.Minute", allow, "package-level var Timeout"},
		{"not a sentinel's value", "var ErrD = wrap(ErrA)", allow, "package-level var ErrD"},
		{"not a sentinel's name", `var d = errors.New("d")`, allow, "package-level var d"},
		{"a slice of pools", "var ps []sync.Pool", allow, "package-level var ps"},
		{"a map", "var m = map[string]int{}", allow, "package-level var m"},
		{"stale entry", "", append(slices.Clone(allow), allowed{"p", []string{"gone"}, "was a table"}), "stateAllowed lists p.gone"},
		{"no reason", "var y int", append(slices.Clone(allow), allowed{"p", []string{"y"}, ""}), "gives no reason"},
	} {
		errs := checkState(vars(t, fine+c.add+"\n"), c.allow)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), c.want) {
			t.Errorf("%s: checkState = %v, want one error containing %q", c.name, errs, c.want)
		}
	}
}
