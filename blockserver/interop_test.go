package blockserver

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/blockserver/sparkauth"
	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/shufflefile"
)

// The interop test runs Spark's own reducer-side classes
// (OneForOneBlockFetcher, ExternalBlockStoreClient; testdata/java,
// compiled here with javac) against a Server. It needs a JDK and Spark's
// jars: the directories in SHUFFLED_SPARK_JARS (separated by the OS's list
// separator), else bin/spark/pyspark-*/pyspark/jars under the repository
// root, where scripts/test installs pyspark.

// sparkJars returns the jar directories to test against, by Spark version.
func sparkJars(t *testing.T) map[string]string {
	t.Helper()
	var dirs []string
	if env := os.Getenv("SHUFFLED_SPARK_JARS"); env != "" {
		dirs = filepath.SplitList(env)
	} else {
		root, err := moduleRoot()
		if err != nil {
			t.Fatal(err)
		}
		dirs, _ = filepath.Glob(filepath.Join(root, "bin", "spark", "pyspark-*", "pyspark", "jars"))
	}
	re := regexp.MustCompile(`^spark-network-shuffle_[0-9.]+-([0-9][0-9A-Za-z.\-]*)\.jar$`)
	out := map[string]string{}
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			t.Fatalf("SHUFFLED_SPARK_JARS: %v", err)
		}
		for _, e := range ents {
			if m := re.FindStringSubmatch(e.Name()); m != nil {
				out[m[1]] = d
			}
		}
	}
	return out
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the test's directory")
		}
		dir = parent
	}
}

func TestSparkFetchInterop(t *testing.T) {
	versions := sparkJars(t)
	if len(versions) == 0 {
		t.Skip("no Spark jars: set SHUFFLED_SPARK_JARS or install pyspark under bin/spark (scripts/test does)")
	}
	for _, tool := range []string{"javac", "java"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("Spark's jars are here but %s is not: %v", tool, err)
		}
	}
	st := newFakeStore(t)
	p1 := st.commit(t, "app", "1", shufflefile.ID{Shuffle: 0, Map: 1}, "alpha-", "beta--", "gamma-", "delta-")
	p2 := st.commit(t, "app", "1", shufflefile.ID{Shuffle: 0, Map: 2}, "one", "two", "three", "four")
	_, addr := startServer(t, Config{Store: st})
	host, port, _ := strings.Cut(addr, ":")
	sum := int64(checksum.Adler32.Update(checksum.Adler32.Empty(), []byte(p1[2])))
	block := func(id, data string) string { return "block " + id + " " + hex.EncodeToString([]byte(data)) }
	cases := []struct {
		name, old, ids, checksum string
		want                     []string
	}{
		{"FetchShuffleBlocks", "false", "shuffle_0_1_0,shuffle_0_1_2,shuffle_0_2_3,shuffle_0_9_0", strconv.FormatInt(sum, 10), []string{
			block("shuffle_0_1_0", p1[0]), block("shuffle_0_1_2", p1[2]), block("shuffle_0_2_3", p2[3]),
			"fail shuffle_0_9_0 ChunkFetchFailureException", "diagnose CHECKSUM_VERIFY_PASS", "dirs " + st.execDir("app", "1")}},
		{"FetchShuffleBlocks batch", "false", "shuffle_0_1_0_2,shuffle_0_2_1_4", strconv.FormatInt(sum+1, 10), []string{
			block("shuffle_0_1_0_2", p1[0]+p1[1]), block("shuffle_0_2_1_4", p2[1]+p2[2]+p2[3]),
			"diagnose NETWORK_ISSUE", "dirs " + st.execDir("app", "1")}},
		{"OpenBlocks", "true", "shuffle_0_2_0,shuffle_0_1_1_3", strconv.FormatInt(sum, 10), []string{
			block("shuffle_0_2_0", p2[0]), block("shuffle_0_1_1_3", p1[1]+p1[2]),
			"diagnose CHECKSUM_VERIFY_PASS", "dirs " + st.execDir("app", "1")}},
	}
	for version, jars := range versions {
		t.Run("spark="+version, func(t *testing.T) {
			t.Parallel()
			classes := t.TempDir()
			cp := filepath.Join(jars, "*")
			out, err := exec.Command("javac", "-nowarn", "-cp", cp, "-d", classes, filepath.Join("testdata", "java", "SparkFetchClient.java")).CombinedOutput()
			if err != nil {
				t.Fatalf("javac: %v\n%s", err, out)
			}
			for _, tc := range cases {
				cmd := exec.Command("java", "-cp", classes+string(os.PathListSeparator)+cp, "SparkFetchClient",
					host, port, tc.old, tc.ids, "1", "ADLER32", tc.checksum, "0", "1", "2")
				var stdout strings.Builder
				cmd.Stdout = &stdout
				var stderr strings.Builder
				cmd.Stderr = &stderr
				if err := cmd.Run(); err != nil {
					t.Fatalf("%s: java: %v\n%s", tc.name, err, stderr.String())
				}
				got := harnessLines(stdout.String())
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("%s: Spark %s's client printed\n%s\nwant\n%s", tc.name, version, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
				}
			}
		})
	}
}

// sparkAuth is the daemon's authentication (server/serving_auth.go does
// the same): package sparkauth behind Handshake.
func sparkAuth(secret SecretFunc) Handshake {
	return &sparkHandshake{s: sparkauth.NewServer(sparkauth.SecretFunc(secret), sparkauth.Options{})}
}

type sparkHandshake struct{ s *sparkauth.Server }

func (h *sparkHandshake) Step(b []byte) ([]byte, error) { return h.s.Step(b) }
func (h *sparkHandshake) Done() bool                    { return h.s.Done() }
func (h *sparkHandshake) AppID() string                 { return h.s.AppID() }
func (h *sparkHandshake) Cipher() Cipher {
	if c := h.s.Cipher(); c != nil {
		return sparkCipher{c}
	}
	return nil
}

type sparkCipher struct{ c sparkauth.Cipher }

func (a sparkCipher) WrapReader(r io.Reader) io.Reader   { return a.c.WrapReader(r) }
func (a sparkCipher) WrapWriter(w io.Writer) FrameWriter { return a.c.WrapWriter(w) }

// TestSparkFetchInteropAuth: Spark's own client with spark.authenticate
// (SASL, SASL with encryption, AuthEngine with AES/CTR and AES/GCM) fetches
// the very bytes, a block larger than the send buffer included, through
// the connection's cipher; a wrong secret gets nothing.
func TestSparkFetchInteropAuth(t *testing.T) {
	versions := sparkJars(t)
	if len(versions) == 0 {
		t.Skip("no Spark jars: set SHUFFLED_SPARK_JARS or install pyspark under bin/spark (scripts/test does)")
	}
	st := newFakeStore(t)
	const secret = "the-secret-of-app"
	st.secrets["app"] = []byte(secret)
	big := strings.Repeat("0123456789abcdef", 40_000) // 640 KB: several send buffers
	p1 := st.commit(t, "app", "1", shufflefile.ID{Shuffle: 0, Map: 1}, "alpha-", big, "gamma-")
	_, addr := startServer(t, Config{Store: st, Handshake: sparkAuth})
	host, port, _ := strings.Cut(addr, ":")
	sum := int64(checksum.Adler32.Update(checksum.Adler32.Empty(), []byte(p1[2])))
	want := []string{
		"block shuffle_0_1_0 " + hex.EncodeToString([]byte(p1[0])),
		"block shuffle_0_1_1 " + hex.EncodeToString([]byte(p1[1])),
		"block shuffle_0_1_0_3 " + hex.EncodeToString([]byte(p1[0]+p1[1]+p1[2])),
		"diagnose CHECKSUM_VERIFY_PASS", "dirs " + st.execDir("app", "1"),
	}
	for version, jars := range versions {
		t.Run("spark="+version, func(t *testing.T) {
			t.Parallel()
			classes := t.TempDir()
			cp := filepath.Join(jars, "*")
			if out, err := exec.Command("javac", "-nowarn", "-cp", cp, "-d", classes, filepath.Join("testdata", "java", "SparkFetchClient.java")).CombinedOutput(); err != nil {
				t.Fatalf("javac: %v\n%s", err, out)
			}
			run := func(auth, secret, ids string) []string {
				cmd := exec.Command("java", "-cp", classes+string(os.PathListSeparator)+cp, "SparkFetchClient",
					host, port, "true", ids, "1", "ADLER32", strconv.FormatInt(sum, 10), "0", "1", "2", auth, secret)
				var stdout, stderr strings.Builder
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				if err := cmd.Run(); err != nil {
					t.Fatalf("%s: java: %v\n%s", auth, err, stderr.String())
				}
				return harnessLines(stdout.String())
			}
			for _, auth := range []string{"sasl", "sasl-enc", "ae-ctr", "ae-gcm"} {
				if got := run(auth, secret, "shuffle_0_1_0,shuffle_0_1_1,shuffle_0_1_0_3"); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s: Spark %s's client printed (%d lines)\n%.300s\nwant\n%.300s", auth, version, len(got), strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			}
			if got := run("ae-ctr", "not-the-secret", "shuffle_0_1_0"); len(got) != 1 || !strings.HasPrefix(got[0], "connect-fail") {
				t.Errorf("a wrong secret: Spark %s's client printed %.300s", version, strings.Join(got, "\n"))
			}
		})
	}
}

// harnessLines returns the harness's result lines, without the log lines
// Spark's logging may print to stdout.
func harnessLines(out string) []string {
	var lines []string
	for l := range strings.SplitSeq(out, "\n") {
		for _, p := range []string{"block ", "fail ", "diagnose", "dirs", "connect-fail"} {
			if strings.HasPrefix(l, p) {
				lines = append(lines, l)
				break
			}
		}
	}
	return lines
}
