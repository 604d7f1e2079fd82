package codec

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// jvm locates the JDK, the codec jars Spark uses and their native
// libraries. It fails the test, naming the Debian package to install, when
// one is missing: a skip would hide a broken interop.
type jvm struct {
	javac, java string
	classpath   string
	libraryPath string
}

func findJVM(t *testing.T) jvm {
	t.Helper()
	if testing.Short() {
		t.Skip("JVM interop test skipped in -short mode")
	}
	var j jvm
	var err error
	if j.javac, err = exec.LookPath("javac"); err != nil {
		t.Fatalf("javac not found (%v): apt-get install openjdk-17-jdk-headless", err)
	}
	if j.java, err = exec.LookPath("java"); err != nil {
		t.Fatalf("java not found (%v): apt-get install openjdk-17-jdk-headless", err)
	}
	var jars []string
	for _, dep := range []struct{ jar, pkg string }{
		{"/usr/share/java/lz4-java.jar", "liblz4-java"},
		{"/usr/share/java/zstd-jni.jar", "libzstd-jni-java"},
		{"/usr/share/java/snappy-java.jar", "libsnappy-java"},
	} {
		if _, err := os.Stat(dep.jar); err != nil {
			t.Fatalf("%s missing (%v): apt-get install %s", dep.jar, err, dep.pkg)
		}
		jars = append(jars, dep.jar)
	}
	j.classpath = strings.Join(jars, string(os.PathListSeparator))
	dirs := map[string]bool{}
	var libDirs []string
	for _, dep := range []struct{ pattern, pkg string }{
		{"/usr/lib/*/jni/liblz4-java.so", "liblz4-jni"},
		{"/usr/lib/*/libzstd-jni.so*", "libzstd-jni1"},
		{"/usr/lib/*/jni/libsnappyjava.so", "libsnappy-jni"},
	} {
		libs, _ := filepath.Glob(dep.pattern)
		if len(libs) == 0 {
			t.Fatalf("no native library %s: apt-get install %s", dep.pattern, dep.pkg)
		}
		if d := filepath.Dir(libs[0]); !dirs[d] {
			dirs[d] = true
			libDirs = append(libDirs, d)
		}
	}
	j.libraryPath = strings.Join(libDirs, string(os.PathListSeparator))
	return j
}

// run compiles testdata/Decode.java into dir and runs the jobs of manifest
// in one JVM, failing the test with each failed job.
func (j jvm) run(t *testing.T, dir, manifest string) {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("testdata", "Decode.java"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(t.Context(), j.javac, "-cp", j.classpath, "-d", dir, src).CombinedOutput(); err != nil {
		t.Fatalf("javac Decode.java: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(t.Context(), j.java,
		"-cp", j.classpath+string(os.PathListSeparator)+dir,
		"-Djava.library.path="+j.libraryPath,
		"-Dorg.xerial.snappy.use.systemlib=true",
		"Decode", manifest)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("java Decode: %v\n%s", err, out)
	}
	t.Logf("java Decode: %s", bytes.TrimSpace(out))
}

type interopCodec struct {
	name  string // file name part
	kind  Kind
	opts  []Option
	param int // block size or level, for Decode.java
}

var interopCodecs = []interopCodec{
	{"lz4", LZ4, nil, DefaultBlockSize},
	{"lz4-64", LZ4, []Option{WithBlockSize(64)}, 64},
	{"lz4-1m", LZ4, []Option{WithBlockSize(1 << 20)}, 1 << 20},
	{"zstd", Zstd, nil, DefaultLevel},
	{"zstd-19", Zstd, []Option{WithLevel(19)}, 19},
	{"snappy", Snappy, nil, DefaultBlockSize},
	{"snappy-1k", Snappy, []Option{WithBlockSize(1024)}, 1024}, // snappy-java writes no smaller blocks
}

type interopInput struct {
	name string
	data []byte
}

func interopInputs() []interopInput {
	bs := DefaultBlockSize
	return []interopInput{
		{"empty", nil},
		{"one", []byte("x")},
		{"hello", []byte("hello world")},
		{"text-bs-1", textData(bs-1, 1)},
		{"text-bs", textData(bs, 2)},
		{"text-bs+1", textData(bs+1, 3)},
		{"text-200k", textData(200000, 4)},
		{"random-100k", randomData(100000, 5)},
		{"mixed-100k", mixedData(100000)},
	}
}

// TestInteropJVM runs both directions in one JVM, which is slow to start.
//
// "decodes": the JVM classes that Spark's readers use decode our streams,
// single and concatenated, to the same bytes.
//
// "encodes": the JVM classes that Spark's writers use encode data, single
// and concatenated, and we decode it. lz4-java's streams must equal ours
// byte for byte (same framing, same block compressor), and so must
// snappy-java's empty stream.
func TestInteropJVM(t *testing.T) {
	j := findJVM(t)
	dir := t.TempDir()
	inputs := interopInputs()
	var manifest strings.Builder

	// Our streams for the JVM to decode.
	decoded := map[string][]byte{} // output file → expected content
	addDecode := func(kind Kind, name string, stream, content []byte) {
		in := filepath.Join(dir, name+".in")
		out := filepath.Join(dir, name+".out")
		if err := os.WriteFile(in, stream, 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&manifest, "decode %v %s %s\n", kind, out, in)
		decoded[out] = content
	}
	mixed := map[Kind][]byte{} // streams of every option set of a kind
	mixedWant := map[Kind][]byte{}
	for _, c := range interopCodecs {
		e := mustEncoder(t, c.kind, c.opts...)
		var all, allWant []byte
		for _, in := range inputs {
			stream := e.Encode(nil, in.data)
			addDecode(c.kind, c.name+"."+in.name, stream, in.data)
			all = append(all, stream...)
			allWant = append(allWant, in.data...)
		}
		addDecode(c.kind, c.name+".concatenated", all, allWant)
		mixed[c.kind] = append(mixed[c.kind], all...)
		mixedWant[c.kind] = append(mixedWant[c.kind], allWant...)
	}
	for k, stream := range mixed {
		addDecode(k, k.String()+".mixed-options", stream, mixedWant[k])
	}

	// Inputs for the JVM to encode.
	var rawPaths []string
	var all []byte
	for _, in := range inputs {
		p := filepath.Join(dir, in.name+".raw")
		if err := os.WriteFile(p, in.data, 0o644); err != nil {
			t.Fatal(err)
		}
		rawPaths = append(rawPaths, p)
		all = append(all, in.data...)
	}
	encoded := func(c interopCodec, name string) string { return filepath.Join(dir, c.name+"."+name+".jvm") }
	for _, c := range interopCodecs {
		for i, in := range inputs {
			fmt.Fprintf(&manifest, "encode %v %d %s %s\n", c.kind, c.param, encoded(c, in.name), rawPaths[i])
		}
		fmt.Fprintf(&manifest, "encode %v %d %s %s\n", c.kind, c.param, encoded(c, "concatenated"), strings.Join(rawPaths, " "))
	}

	manifestPath := filepath.Join(dir, "manifest")
	if err := os.WriteFile(manifestPath, []byte(manifest.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	j.run(t, dir, manifestPath)

	t.Run("decodes", func(t *testing.T) {
		for out, content := range decoded {
			got, err := os.ReadFile(out)
			if err != nil {
				t.Errorf("JVM output: %v", err)
				continue
			}
			if !bytes.Equal(got, content) {
				t.Errorf("JVM decoded %s to %d bytes, want %d bytes", filepath.Base(out), len(got), len(content))
			}
		}
	})

	t.Run("encodes", func(t *testing.T) {
		check := func(c interopCodec, name string, want []byte) []byte {
			t.Helper()
			stream, err := os.ReadFile(encoded(c, name))
			if err != nil {
				t.Errorf("JVM output: %v", err)
				return nil
			}
			got, err := Decode(c.kind, nil, stream)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("Decode(%v) of the JVM's %s stream = %d bytes, %v, want %d bytes", c.kind, name, len(got), err, len(want))
			}
			r, err := NewReader(c.kind, bytes.NewReader(stream))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := readAll(t, r); err != nil || !bytes.Equal(got, want) {
				t.Errorf("NewReader(%v) of the JVM's %s stream read %d bytes, %v, want %d bytes", c.kind, name, len(got), err, len(want))
			}
			return stream
		}
		for _, c := range interopCodecs {
			e := mustEncoder(t, c.kind, c.opts...)
			for _, in := range inputs {
				stream := check(c, in.name, in.data)
				same := c.kind == LZ4 || (c.kind == Snappy && len(in.data) == 0)
				if ours := e.Encode(nil, in.data); same && stream != nil && !bytes.Equal(stream, ours) {
					t.Errorf("%s %s: the JVM wrote %x..., we write %x...", c.name, in.name, stream[:min(64, len(stream))], ours[:min(64, len(ours))])
				}
			}
			check(c, "concatenated", all)
		}
	})
}
