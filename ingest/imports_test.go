package ingest

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsPointDown: the data planes sit between the sessions and the
// writer; no file of the package, whatever its build tags, imports the
// server or the client above it, and only the gpu package reaches CUDA.
func TestImportsPointDown(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("the package's files: %v, %v", files, err)
	}
	const module = "github.com/shuffled/shuffled/"
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case path == module+"server", strings.HasPrefix(path, module+"server/"),
				path == module+"client", strings.HasPrefix(path, module+"client/"):
				t.Errorf("%s imports %s, a package above ingest", name, path)
			case path == "gorgonia.org/cu":
				t.Errorf("%s imports %s: only the gpu package reaches CUDA", name, path)
			}
		}
	}
}
