package errdefs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestSentinelsClassed holds the project's rule that every exported
// sentinel error belongs to a class: no package-level Err* variable
// outside errdefs is made by errors.New (errdefs.New, or a fmt.Errorf
// that wraps another sentinel, gives it one).
func TestSentinelsClassed(t *testing.T) {
	fset := token.NewFileSet()
	seen := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != ".." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "jvm" || name == "errdefs") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		seen++
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !strings.HasPrefix(id.Name, "Err") || !id.IsExported() || i >= len(vs.Values) {
						continue
					}
					if isCall(vs.Values[i], "errors", "New") {
						t.Errorf("%s: %s = errors.New(...): a sentinel belongs to a class, make it with errdefs.New", fset.Position(id.Pos()), id.Name)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 50 {
		t.Fatalf("parsed %d Go files above errdefs, want the project's (at least 50)", seen)
	}
}

// isCall reports whether e calls pkg.fn.
func isCall(e ast.Expr, pkg, fn string) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != fn {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Name == pkg
}
