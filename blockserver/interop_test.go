package blockserver

import (
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/blockserver/sparkauth"
	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/sparkjars"
)

// The interop test runs Spark's own reducer-side classes
// (OneForOneBlockFetcher, ExternalBlockStoreClient; testdata/java,
// compiled here with javac) against a Server. It needs a JDK and Spark's
// jars, which testkit/sparkjars finds (SHUFFLED_SPARK_JARS, else pyspark
// under bin/spark, where scripts/test installs it).

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

// TestSparkFetchInterop runs Spark's own client against two servers: one
// without authentication (single and batch fetches over both fetch
// protocols, a missing block, corruption diagnosis, local dirs), and one
// with spark.authenticate (SASL, SASL with encryption, AuthEngine with
// AES/CTR and AES/GCM), where Spark's client fetches the very bytes, a block
// larger than the send buffer included, through the connection's cipher and
// a wrong secret gets nothing. One JVM per Spark version runs every case.
func TestSparkFetchInterop(t *testing.T) {
	versions := sparkjars.Find(t, "spark-network-shuffle")
	for _, tool := range []string{"javac", "java"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("Spark's jars are here but %s is not: %v", tool, err)
		}
	}
	block := func(id, data string) string { return "block " + id + " " + hex.EncodeToString([]byte(data)) }

	// Without authentication.
	st := newFakeStore(t)
	p1 := st.commit(t, "app", "1", shufflefile.ID{Shuffle: 0, Map: 1}, "alpha-", "beta--", "gamma-", "delta-")
	p2 := st.commit(t, "app", "1", shufflefile.ID{Shuffle: 0, Map: 2}, "one", "two", "three", "four")
	_, addr := startServer(t, Config{Store: st})
	sum := int64(checksum.Adler32.Update(checksum.Adler32.Empty(), []byte(p1[2])))
	dirs := "dirs " + st.execDir("app", "1")
	cases := []fetchCase{
		{"FetchShuffleBlocks", addr, "false", "shuffle_0_1_0,shuffle_0_1_2,shuffle_0_2_3,shuffle_0_9_0", sum, "none", "", []string{
			block("shuffle_0_1_0", p1[0]), block("shuffle_0_1_2", p1[2]), block("shuffle_0_2_3", p2[3]),
			"fail shuffle_0_9_0 ChunkFetchFailureException", "diagnose CHECKSUM_VERIFY_PASS", dirs}},
		{"FetchShuffleBlocks-batch", addr, "false", "shuffle_0_1_0_2,shuffle_0_2_1_4", sum + 1, "none", "", []string{
			block("shuffle_0_1_0_2", p1[0]+p1[1]), block("shuffle_0_2_1_4", p2[1]+p2[2]+p2[3]),
			"diagnose NETWORK_ISSUE", dirs}},
		{"OpenBlocks", addr, "true", "shuffle_0_2_0,shuffle_0_1_1_3", sum, "none", "", []string{
			block("shuffle_0_2_0", p2[0]), block("shuffle_0_1_1_3", p1[1]+p1[2]),
			"diagnose CHECKSUM_VERIFY_PASS", dirs}},
	}

	// With authentication.
	ast := newFakeStore(t)
	const secret = "the-secret-of-app"
	ast.secrets["app"] = []byte(secret)
	big := strings.Repeat("0123456789abcdef", 40_000) // 640 KB: several send buffers
	a1 := ast.commit(t, "app", "1", shufflefile.ID{Shuffle: 0, Map: 1}, "alpha-", big, "gamma-")
	_, aaddr := startServer(t, Config{Store: ast, Handshake: sparkAuth})
	asum := int64(checksum.Adler32.Update(checksum.Adler32.Empty(), []byte(a1[2])))
	for _, auth := range []string{"sasl", "sasl-enc", "ae-ctr", "ae-gcm"} {
		cases = append(cases, fetchCase{"auth-" + auth, aaddr, "true", "shuffle_0_1_0,shuffle_0_1_1,shuffle_0_1_0_3", asum, auth, secret, []string{
			block("shuffle_0_1_0", a1[0]), block("shuffle_0_1_1", a1[1]), block("shuffle_0_1_0_3", a1[0]+a1[1]+a1[2]),
			"diagnose CHECKSUM_VERIFY_PASS", "dirs " + ast.execDir("app", "1")}})
	}
	// A wrong secret: the connection fails, and nothing else is tried.
	cases = append(cases, fetchCase{"auth-wrong-secret", aaddr, "true", "shuffle_0_1_0", asum, "ae-ctr", "not-the-secret", nil})

	for version, jars := range versions {
		t.Run("spark="+version, func(t *testing.T) {
			t.Parallel()
			got, stderr := runFetchHarness(t, jars, cases)
			for _, c := range cases {
				lines, ok := got[c.name]
				switch {
				case !ok:
					t.Errorf("%s: Spark %s's client did not finish the case", c.name, version)
				case c.want == nil:
					if len(lines) != 1 || !strings.HasPrefix(lines[0], "connect-fail ") {
						t.Errorf("%s: Spark %s's client printed (%d lines)\n%s\nwant connect-fail", c.name, version, len(lines), clip(lines))
					}
				case fmt.Sprint(lines) != fmt.Sprint(c.want):
					t.Errorf("%s: Spark %s's client printed (%d lines)\n%s\nwant\n%s", c.name, version, len(lines), clip(lines), clip(c.want))
				}
			}
			if t.Failed() {
				t.Logf("the JVM's stderr:\n%.4000s", stderr)
			}
		})
	}
}

// fetchCase is one case of the Java harness: a connection with these
// settings fetches ids, then asks the server to diagnose a corruption of
// shuffle 0 map 1 reduce 2 with the given Adler32 checksum and for
// executor 1's local dirs.
type fetchCase struct {
	name, addr, oldProtocol, ids string
	checksum                     int64
	auth, secret                 string
	want                         []string // nil: the connection must fail
}

func (c fetchCase) line() string {
	host, port, _ := strings.Cut(c.addr, ":")
	secret := c.secret
	if secret == "" {
		secret = "-"
	}
	return strings.Join([]string{c.name, host, port, c.oldProtocol, c.ids, "1", "ADLER32",
		strconv.FormatInt(c.checksum, 10), "0", "1", "2", c.auth, secret}, " ")
}

// interopJVMFlags start a short-lived JVM fast: the client compiler only,
// the serial collector, the JDK's class data archive and a small heap.
func interopJVMFlags() []string {
	return []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-Xss1m", "-Xmx256m"}
}

// runFetchHarness compiles testdata/java/SparkFetchClient.java against one
// Spark's jars, runs every case in one JVM and returns each case's result
// lines by case name, a case the JVM did not finish absent, and what the
// JVM wrote to stderr.
func runFetchHarness(t *testing.T, jars string, cases []fetchCase) (map[string][]string, string) {
	t.Helper()
	var cp []string
	for _, pat := range []string{"spark-network-common_*.jar", "spark-network-shuffle_*.jar", "netty-buffer-4*.jar", "netty-common-4*.jar", "netty-transport-4*.jar"} {
		m, _ := filepath.Glob(filepath.Join(jars, pat))
		if len(m) == 0 {
			t.Fatalf("no %s in %s", pat, jars)
		}
		cp = append(cp, m...)
	}
	classes := t.TempDir()
	args := []string{"--release", "17", "-Xlint:all,-path", "-Werror", "-cp", strings.Join(cp, string(os.PathListSeparator)), "-d", classes}
	for _, f := range interopJVMFlags() {
		args = append(args, "-J"+f)
	}
	args = append(args, filepath.Join("testdata", "java", "SparkFetchClient.java"))
	if out, err := exec.Command("javac", args...).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	var stdin strings.Builder
	for _, c := range cases {
		stdin.WriteString(c.line() + "\n")
	}
	args = append(interopJVMFlags(), "-cp", classes+string(os.PathListSeparator)+filepath.Join(jars, "*"), "SparkFetchClient")
	cmd := exec.Command("java", args...)
	cmd.Stdin = strings.NewReader(stdin.String())
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("java: %v\nstderr:\n%s", err, stderr.String())
	}
	// Only the harness's lines: Spark's logging may print to stdout too.
	lines, got := map[string][]string{}, map[string][]string{}
	for l := range strings.SplitSeq(stdout.String(), "\n") {
		if rest, ok := strings.CutPrefix(l, "RESULT "); ok {
			name, res, _ := strings.Cut(rest, " ")
			lines[name] = append(lines[name], res)
		} else if name, ok := strings.CutPrefix(l, "END "); ok {
			got[name] = lines[name]
		}
	}
	return got, stderr.String()
}

// clip shortens lines for a message: the blocks of the big part are long.
func clip(lines []string) string {
	s := strings.Join(lines, "\n")
	if len(s) > 600 {
		s = s[:600] + "..."
	}
	return s
}
