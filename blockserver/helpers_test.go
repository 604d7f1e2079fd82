package blockserver

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/metrics"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit/shuffletest"
	"github.com/shuffled/shuffled/vfs"
)

// fakeStore keeps each executor's outputs flat in <dir>/<app>/<exec>.
type fakeStore struct {
	dir     string
	mu      sync.Mutex
	secrets map[string][]byte
	removed []string
	open    int // executors open now
}

func newFakeStore(t testing.TB) *fakeStore {
	return &fakeStore{dir: t.TempDir(), secrets: map[string][]byte{}}
}

func (f *fakeStore) execDir(app, exec string) string { return filepath.Join(f.dir, app, exec) }

func (f *fakeStore) Secret(app string) ([]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.secrets[app]
	return bytes.Clone(s), ok
}

func (f *fakeStore) Executor(app, exec string) (Executor, error) {
	dir := f.execDir(app, exec)
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("%w: %s/%s", ErrUnknownExecutor, app, exec)
	}
	root, err := shufflefile.OpenRoot(vfs.Default, shufflefile.Flat(dir), []uint32{uint32(os.Getuid())})
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.open++
	f.mu.Unlock()
	return &fakeExec{f: f, root: root}, nil
}

func (f *fakeStore) LocalDirs(app, exec string) ([]string, error) {
	if _, err := os.Stat(f.execDir(app, exec)); err != nil {
		return nil, fmt.Errorf("%w: %s/%s", ErrUnknownExecutor, app, exec)
	}
	return []string{f.execDir(app, exec)}, nil
}

func (f *fakeStore) Remove(app string, shuffle int32) (int64, int64, error) {
	f.mu.Lock()
	f.removed = append(f.removed, fmt.Sprintf("%s/%d", app, shuffle))
	f.mu.Unlock()
	return 3, 300, nil
}

type fakeExec struct {
	f    *fakeStore
	root *shufflefile.Root
}

func (e *fakeExec) Open(id shufflefile.ID, alg checksum.Algorithm) (*shufflefile.MapOutput, error) {
	return shufflefile.Open(e.root.FS(), e.root, id, alg)
}

func (e *fakeExec) Remove(id shufflefile.ID) (bool, error) {
	if _, err := e.root.FS().Stat(shufflefile.Path(e.root, shufflefile.IndexName(id))); err != nil {
		return false, nil
	}
	return true, shufflefile.Remove(e.root.FS(), new(shufflefile.Locks), e.root, id, checksum.Adler32)
}

func (e *fakeExec) Close() error {
	e.f.mu.Lock()
	e.f.open--
	e.f.mu.Unlock()
	return e.root.Close()
}

// commit writes a map output of parts for app/exec and returns the parts.
func (f *fakeStore) commit(t testing.TB, app, exec string, id shufflefile.ID, parts ...string) []string {
	t.Helper()
	shuffletest.CommitOutput(t, shufflefile.Flat(f.execDir(app, exec)), id, parts...)
	return parts
}

// fakeAuth is a handshake for tests: the client sends 0xFB, the app id
// (string), then sha256(secret); with cipher, the connection then XORs
// every byte with a keystream from the secret.
type fakeAuth struct {
	secret SecretFunc
	cipher bool
	done   bool
	app    string
	key    []byte
}

func newFakeAuth(cipher bool) NewHandshake {
	return func(secret SecretFunc) Handshake { return &fakeAuth{secret: secret, cipher: cipher} }
}

func (a *fakeAuth) Step(body []byte) ([]byte, error) {
	d := decoder{msg: "fakeAuth", p: body[1:]}
	app := d.str("app", 255)
	if d.err != nil || len(d.p)-d.off != sha256.Size {
		return nil, ErrAuthFailed
	}
	secret, ok := a.secret(app)
	if !ok {
		return nil, ErrAuthFailed
	}
	sum := sha256.Sum256(secret)
	if !bytes.Equal(sum[:], d.p[d.off:]) {
		return nil, ErrAuthFailed
	}
	a.done, a.app, a.key = true, app, secret
	return []byte("ok"), nil
}

func (a *fakeAuth) Done() bool    { return a.done }
func (a *fakeAuth) AppID() string { return a.app }
func (a *fakeAuth) Cipher() Cipher {
	if !a.cipher {
		return nil
	}
	return xorCipher{a.key}
}

func fakeAuthMessage(app string, secret []byte) []byte {
	sum := sha256.Sum256(secret)
	return append(appendString([]byte{tagAuthEngine}, app), sum[:]...)
}

// xorCipher XORs the stream with a repeating key: a stand-in for a
// transport cipher that shows the server sends through it.
type xorCipher struct{ key []byte }

type xorStream struct {
	key []byte
	pos int
}

func (x *xorStream) apply(dst, src []byte) {
	for i := range src {
		dst[i] = src[i] ^ x.key[x.pos%len(x.key)] ^ 0x5a
		x.pos++
	}
}

type xorReader struct {
	r io.Reader
	xorStream
}

func (x *xorReader) Read(p []byte) (int, error) {
	n, err := x.r.Read(p)
	x.apply(p[:n], p[:n])
	return n, err
}

type xorWriter struct {
	w io.Writer
	xorStream
	frameLeft int64
}

func (x *xorWriter) BeginFrame(n int64) error {
	if x.frameLeft != 0 {
		return fmt.Errorf("xorWriter: frame begun with %d bytes of the last left", x.frameLeft)
	}
	x.frameLeft = n
	return nil
}

func (x *xorWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > x.frameLeft {
		return 0, fmt.Errorf("xorWriter: %d bytes written, frame has %d left", len(p), x.frameLeft)
	}
	b := make([]byte, len(p))
	x.apply(b, p)
	x.frameLeft -= int64(len(p))
	return x.w.Write(b)
}

func (c xorCipher) WrapReader(r io.Reader) io.Reader {
	return &xorReader{r: r, xorStream: xorStream{key: c.key}}
}
func (c xorCipher) WrapWriter(w io.Writer) FrameWriter {
	return &xorWriter{w: w, xorStream: xorStream{key: c.key}}
}

// clientXOR is the client's side of xorCipher: it writes any bytes.
type clientXORWriter struct {
	w io.Writer
	xorStream
}

func (x *clientXORWriter) Write(p []byte) (int, error) {
	b := make([]byte, len(p))
	x.apply(b, p)
	return x.w.Write(b)
}

// startServer runs a Server of cfg on a loopback port.
func startServer(t testing.TB, cfg Config) (*Server, string) {
	t.Helper()
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewServing()
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, ln.Addr().String()
}

func dial(t testing.TB, addr string) *Client {
	t.Helper()
	c, err := Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// fetchAll opens msg and fetches every chunk.
func fetchAll(t testing.TB, c *Client, msg []byte) ([][]byte, error) {
	t.Helper()
	return c.FetchAll(msg)
}
