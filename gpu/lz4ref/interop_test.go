package lz4ref

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInteropJVM decodes the reference's streams with lz4-java, the
// library Spark's LZ4CompressionCodec reads them with: every payload type
// (opaque bytes, SHFC slices including 0-row ones, kudo tables, 1-byte
// slices),
// incompressible and all-zero blocks, block sizes 32 KiB and 64 KiB, each
// stream alone and all of them concatenated. A missing JDK or lz4-java
// fails the test, naming the Debian package to install.
func TestInteropJVM(t *testing.T) {
	if testing.Short() {
		t.Skip("JVM interop test skipped in -short mode")
	}
	javac, err := exec.LookPath("javac")
	if err != nil {
		t.Fatalf("javac not found (%v): apt-get install openjdk-17-jdk-headless", err)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		t.Fatalf("java not found (%v): apt-get install openjdk-17-jdk-headless", err)
	}
	const jar = "/usr/share/java/lz4-java.jar"
	if _, err := os.Stat(jar); err != nil {
		t.Fatalf("%s missing (%v): apt-get install liblz4-java", jar, err)
	}
	libs, _ := filepath.Glob("/usr/lib/*/jni/liblz4-java.so")
	if len(libs) == 0 {
		t.Fatal("no native library liblz4-java.so: apt-get install liblz4-jni")
	}
	dir := t.TempDir()
	var manifest strings.Builder
	want := map[string][]byte{}
	add := func(name string, stream, data []byte) {
		in, out := filepath.Join(dir, name+".lz4"), filepath.Join(dir, name+".out")
		if err := os.WriteFile(in, stream, 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&manifest, "%s %s\n", in, out)
		want[out] = data
	}
	for _, bs := range []int{32 << 10, 64 << 10} {
		var all, allData []byte
		for _, in := range allInputs(t) {
			s := AppendStream(nil, in.data, bs)
			add(fmt.Sprintf("%s.%d", in.name, bs), s, in.data)
			all = append(all, s...)
			allData = append(allData, in.data...)
		}
		add(fmt.Sprintf("concatenated.%d", bs), all, allData)
	}
	mpath := filepath.Join(dir, "manifest")
	if err := os.WriteFile(mpath, []byte(manifest.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := filepath.Abs(filepath.Join("testdata", "Decode.java"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(t.Context(), javac, "-Xlint:all", "-Werror", "-cp", jar, "-d", dir, src).CombinedOutput(); err != nil {
		t.Fatalf("javac Decode.java: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(t.Context(), java, "-cp", jar+string(os.PathListSeparator)+dir,
		"-Djava.library.path="+filepath.Dir(libs[0]), "Decode", mpath).CombinedOutput()
	if err != nil {
		t.Fatalf("java Decode: %v\n%s", err, out)
	}
	t.Logf("java Decode: %s", bytes.TrimSpace(out))
	for path, data := range want {
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("lz4-java decoded %s to %d bytes (%v), want %d", filepath.Base(path), len(got), err, len(data))
		}
	}
}
