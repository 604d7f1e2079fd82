package sparkauth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/shuffled/shuffled/testkit/sparkjars"
)

// The interop test runs Spark's own client classes (testdata/java,
// compiled here with javac) against a server built on this package. It
// needs a JDK and Spark's jars, which testkit/sparkjars finds
// (SHUFFLED_SPARK_JARS, else pyspark under bin/spark, where scripts/test
// installs it).

// compileHarness compiles the Java client against one Spark's jars.
func compileHarness(t *testing.T, jars string) string {
	t.Helper()
	javac, err := exec.LookPath("javac")
	if err != nil {
		t.Fatalf("javac: %v", err)
	}
	var cp []string
	for _, pat := range []string{"spark-network-common_*.jar", "netty-buffer-*.jar", "netty-common-*.jar", "netty-transport-4*.jar"} {
		m, _ := filepath.Glob(filepath.Join(jars, pat))
		cp = append(cp, m...)
	}
	out := t.TempDir()
	args := []string{"--release", "17", "-Xlint:all,-path", "-Werror", "-d", out, "-cp", strings.Join(cp, string(os.PathListSeparator))}
	for _, f := range interopJVMFlags() {
		args = append(args, "-J"+f)
	}
	cmd := exec.Command(javac, append(args, filepath.Join("testdata", "java", "SparkAuthClient.java"))...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, b)
	}
	return out
}

// connResult is what the test server saw on one connection.
type connResult struct {
	appID  string
	done   bool
	cipher string
	echoes int
	err    error
	// The raw bytes the client sent and the server wrote, when recording.
	in, out []byte
}

type recordConn struct {
	net.Conn
	in, out *bytes.Buffer
}

func (r recordConn) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	r.in.Write(p[:n])
	return n, err
}

func (r recordConn) Write(p []byte) (int, error) {
	r.out.Write(p)
	return r.Conn.Write(p)
}

// testServer answers the handshake with a Server, then echoes every
// RpcRequest's body, through the negotiated cipher.
type testServer struct {
	ln      net.Listener
	secrets SecretFunc
	opts    func() Options
	record  bool // keep each connection's raw bytes
	wg      sync.WaitGroup
	mu      sync.Mutex
	results []*connResult
}

func startServer(t *testing.T, secrets map[string]string, opts func() Options) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{ln: ln, opts: opts, secrets: func(app string) ([]byte, bool) {
		v, ok := secrets[app]
		return []byte(v), ok
	}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(c)
			}()
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *testServer) close() {
	s.ln.Close()
	s.wg.Wait()
}

func (s *testServer) serve(raw net.Conn) {
	defer raw.Close()
	res := &connResult{}
	var in, out bytes.Buffer
	var c io.ReadWriter = raw
	if s.record {
		c = recordConn{raw, &in, &out}
	}
	defer func() {
		res.in, res.out = in.Bytes(), out.Bytes()
		s.mu.Lock()
		s.results = append(s.results, res)
		s.mu.Unlock()
	}()
	srv := NewServer(s.secrets, s.opts())
	br := bufio.NewReader(c)
	for !srv.Done() {
		f, err := readFrame(br)
		if err != nil {
			res.err = err
			return
		}
		reply, err := srv.Step(f.body)
		if err != nil {
			res.err = err
			writeFailure(c, f.id, "Authentication failed.")
			return
		}
		if err := writeResponse(c, f.id, reply); err != nil {
			res.err = err
			return
		}
	}
	res.appID, res.done = srv.AppID(), true
	var r io.Reader = br
	var w io.Writer = c
	if ci := srv.Cipher(); ci != nil {
		r, w = ci.WrapReader(br), ci.WrapWriter(c)
		defer func() { res.cipher = fmt.Sprint(ci) }()
	}
	for {
		f, err := readFrame(r)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				res.err = err
			}
			return
		}
		if err := writeResponse(w, f.id, f.body); err != nil {
			res.err = err
			return
		}
		res.echoes++
	}
}

func (s *testServer) port() int { return s.ln.Addr().(*net.TCPAddr).Port }

type interopCase struct {
	name, app, secret, handshake, crypto, saslEnc, version, cipher string
	wantCipher                                                     string // "" = plaintext; "fail" = must fail
	sizes                                                          string // "" = the harness's default
}

func (c interopCase) line() string {
	l := strings.Join([]string{c.name, c.app, c.secret, c.handshake, c.crypto, c.saslEnc, c.version, c.cipher}, " ")
	if c.sizes != "" {
		l += " " + c.sizes
	}
	return l
}

func secretFor(app string) string {
	h := sha256.Sum256([]byte("secret of " + app))
	return hex.EncodeToString(h[:])
}

const ctr, gcm = CipherCTR, CipherGCM

// goodCases authenticate and echo; each has its own application.
func goodCases() []interopCase {
	cs := []interopCase{
		{name: "sasl", crypto: "false", saslEnc: "false", version: "1", cipher: ctr, wantCipher: ""},
		{name: "sasl-conf", crypto: "false", saslEnc: "true", version: "1", cipher: ctr, wantCipher: "sasl auth-conf 3des"},
		{name: "ae-v1-ctr", crypto: "true", saslEnc: "false", version: "1", cipher: ctr, wantCipher: "authengine v1 AES/CTR/NoPadding"},
		{name: "ae-v2-ctr", crypto: "true", saslEnc: "false", version: "2", cipher: ctr, wantCipher: "authengine v2 AES/CTR/NoPadding"},
		{name: "ae-v1-gcm", crypto: "true", saslEnc: "false", version: "1", cipher: gcm, wantCipher: "authengine v1 AES/GCM/NoPadding"},
		{name: "ae-v2-gcm", crypto: "true", saslEnc: "false", version: "2", cipher: gcm, wantCipher: "authengine v2 AES/GCM/NoPadding"},
	}
	for i := range cs {
		cs[i].app = "app-" + cs[i].name
		cs[i].secret = secretFor(cs[i].app)
		cs[i].handshake = "auth"
	}
	return cs
}

// badCases must fail: app-a and app-b are known, app-unknown is not.
func badCases() []interopCase {
	wrong := "0123456789abcdef"
	return []interopCase{
		{"wrong-secret-sasl", "app-a", wrong, "auth", "false", "false", "1", ctr, "fail", ""},
		{"wrong-secret-sasl-conf", "app-a", wrong, "auth", "false", "true", "1", ctr, "fail", ""},
		{"wrong-secret-ae-ctr", "app-a", wrong, "auth", "true", "false", "2", ctr, "fail", ""},
		{"wrong-secret-ae-gcm", "app-a", wrong, "auth", "true", "false", "1", gcm, "fail", ""},
		{"other-app-secret-sasl", "app-a", secretFor("app-b"), "auth", "false", "false", "1", ctr, "fail", ""},
		{"other-app-secret-ae", "app-a", secretFor("app-b"), "auth", "true", "false", "1", ctr, "fail", ""},
		{"unknown-app-sasl", "app-unknown", secretFor("app-unknown"), "auth", "false", "false", "1", ctr, "fail", ""},
		{"unknown-app-ae", "app-unknown", secretFor("app-unknown"), "auth", "true", "false", "2", ctr, "fail", ""},
		{"no-handshake", "app-a", secretFor("app-a"), "none", "false", "false", "1", ctr, "fail", ""},
	}
}

func secretsOf(cases []interopCase) map[string]string {
	m := map[string]string{"app-a": secretFor("app-a"), "app-b": secretFor("app-b")}
	for _, c := range cases {
		if c.wantCipher != "fail" {
			m[c.app] = c.secret
		}
	}
	return m
}

// checkRun checks the Java client's results and what the server saw.
func checkRun(t *testing.T, srv *testServer, cases []interopCase, got map[string]string) {
	t.Helper()
	byApp := map[string][]*connResult{}
	for _, r := range srv.results {
		byApp[r.appID] = append(byApp[r.appID], r)
	}
	failed := false
	for _, c := range cases {
		res, ok := got[c.name]
		switch {
		case !ok:
			t.Errorf("%s: no result from the Java client", c.name)
		case c.wantCipher == "fail":
			if !strings.HasPrefix(res, "FAIL") {
				t.Errorf("%s: Spark's client got %q, want a failure", c.name, res)
			}
		case res != "OK":
			t.Errorf("%s: Spark's client: %s", c.name, res)
			failed = true
		default:
			rs := byApp[c.app]
			if len(rs) != 1 {
				t.Errorf("%s: server saw %d authenticated connections for %s, want 1", c.name, len(rs), c.app)
				continue
			}
			want := 3
			if c.sizes != "" {
				want = len(strings.Split(c.sizes, ","))
			}
			if r := rs[0]; r.cipher != c.wantCipher || r.echoes != want || r.err != nil {
				t.Errorf("%s: server: cipher %q, %d echoes, err %v; want cipher %q, %d echoes, no error", c.name, r.cipher, r.echoes, r.err, c.wantCipher, want)
			}
		}
	}
	// The failed cases: no connection authenticated for app-a, app-b or an
	// unknown app, and none was answered past its handshake.
	for _, r := range srv.results {
		if r.done && (r.appID == "app-a" || r.appID == "app-b" || r.appID == "app-unknown") {
			t.Errorf("a connection authenticated for %s", r.appID)
		}
		if !r.done && r.echoes != 0 {
			t.Errorf("an unauthenticated connection got %d echoes", r.echoes)
		}
		if failed && r.err != nil {
			t.Logf("server: app %q: %v", r.appID, r.err)
		}
	}
}

func TestSparkInterop(t *testing.T) {
	versions := sparkjars.Find(t, "spark-network-common")
	for version, jars := range versions {
		t.Run("spark="+version, func(t *testing.T) {
			t.Parallel()
			classes := compileHarness(t, jars)

			// The default server: every protocol and cipher, and the
			// failures.
			cases := append(goodCases(), badCases()...)
			srv := startServer(t, secretsOf(cases), func() Options { return Options{} })
			// A server that requires SASL encryption and offers only rc4
			// (the JDK takes 3des when offered): a plain SASL client fails.
			rc4Cases := []interopCase{
				{"sasl-rc4", "app-rc4", secretFor("app-rc4"), "auth", "false", "true", "1", ctr, "sasl auth-conf rc4", ""},
				{"sasl-plain-refused", "app-a", secretFor("app-a"), "auth", "false", "false", "1", ctr, "fail", ""},
			}
			rc4 := startServer(t, secretsOf(rc4Cases), func() Options {
				return Options{SASLRequireEncryption: true, saslCiphers: []string{"rc4"}}
			})
			// One JVM runs the cases of both servers.
			got := runHarness(t, classes, jars, harnessRun{srv.port(), cases}, harnessRun{rc4.port(), rc4Cases})
			srv.close()
			rc4.close()
			checkRun(t, srv, cases, got)
			checkRun(t, rc4, rc4Cases, got)

			if dir := os.Getenv("SPARKAUTH_RECORD"); dir != "" {
				recordKATs(t, classes, jars, version, dir)
			}
		})
	}
}

// A kat is one connection of Spark's client with a server whose randomness
// is fixed (katRand): the bytes each side sent. Replaying the client's bytes
// into a Server with the same randomness must give the same server bytes,
// so a kat checks every derivation and cipher against what Spark's client
// accepted, without a JVM.
type kat struct {
	Spark  string `json:"spark"`
	Case   string `json:"case"`
	App    string `json:"app"`
	Secret string `json:"secret"`
	Cipher string `json:"cipher"`
	In     string `json:"client_to_server"`
	Out    string `json:"server_to_client"`
}

func katRand() io.Reader {
	var seed [32]byte
	copy(seed[:], "sparkauth known-answer tests")
	return mrand.NewChaCha8(seed)
}

func katOptions(name string) Options {
	o := Options{Rand: katRand()}
	if name == "sasl-rc4" {
		o.saslCiphers = []string{"rc4"}
	}
	return o
}

func recordKATs(t *testing.T, classes, jars, version, dir string) {
	cases := goodCases()
	cases = append(cases, interopCase{"sasl-rc4", "app-sasl-rc4", secretFor("app-sasl-rc4"), "auth", "false", "true", "1", ctr, "sasl auth-conf rc4", ""})
	for _, c := range cases {
		c.sizes = "5"
		srv := startServer(t, secretsOf([]interopCase{c}), func() Options { return katOptions(c.name) })
		srv.record = true
		got := runHarness(t, classes, jars, harnessRun{srv.port(), []interopCase{c}})
		srv.close()
		checkRun(t, srv, []interopCase{c}, got)
		if len(srv.results) != 1 {
			t.Fatalf("%s: %d connections", c.name, len(srv.results))
		}
		r := srv.results[0]
		k := kat{Spark: version, Case: c.name, App: c.app, Secret: c.secret, Cipher: c.wantCipher,
			In: hex.EncodeToString(r.in), Out: hex.EncodeToString(r.out)}
		b, err := json.MarshalIndent(k, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "spark-"+version+"-"+c.name+".json"), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// harnessRun is cases to run against the server on port.
type harnessRun struct {
	port  int
	cases []interopCase
}

// interopJVMFlags start a short-lived JVM fast: the client compiler only,
// the serial collector, the JDK's class data archive and a small heap.
func interopJVMFlags() []string {
	return []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-Xss1m", "-Xmx256m"}
}

// runHarness runs the Java client over the runs' cases, in one JVM, and
// returns its result lines by case name.
func runHarness(t *testing.T, classes, jars string, runs ...harnessRun) map[string]string {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		t.Fatalf("java: %v", err)
	}
	var stdin strings.Builder
	for _, r := range runs {
		for _, c := range r.cases {
			fmt.Fprintf(&stdin, "%d %s\n", r.port, c.line())
		}
	}
	args := append(interopJVMFlags(), "-Dlog4j2.level=OFF", "-cp", classes+string(os.PathListSeparator)+filepath.Join(jars, "*"),
		"SparkAuthClient", "127.0.0.1")
	cmd := exec.Command(java, args...)
	cmd.Stdin = strings.NewReader(stdin.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("java: %v\nstdout:\n%s\nstderr:\n%s", err, outb, stderr.String())
	}
	got := make(map[string]string)
	for _, l := range strings.Split(string(outb), "\n") {
		if rest, ok := strings.CutPrefix(l, "RESULT "); ok {
			name, res, _ := strings.Cut(rest, " ")
			got[name] = res
		}
	}
	return got
}
