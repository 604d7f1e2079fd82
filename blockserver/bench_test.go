package blockserver

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/shuffled/shuffled/shufflefile"
)

// benchServeEnv names the directory a re-executed test binary serves
// (serveForBench) for BenchmarkFetch: the server runs in its own process
// so that its CPU time is measured apart from the client's.
const benchServeEnv = "SHUFFLED_BLOCKSERVER_BENCH_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(benchServeEnv); dir != "" {
		if err := serveForBench(dir, os.Getenv(benchServeEnv+"_MODE")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

// passCipher is a cipher that changes nothing: a connection that
// authenticates with it sends blocks through the send buffer, as an
// encrypted one does, without the cost of encryption.
type passCipher struct{}

type passWriter struct{ io.Writer }

func (passWriter) BeginFrame(int64) error             { return nil }
func (passCipher) WrapReader(r io.Reader) io.Reader   { return r }
func (passCipher) WrapWriter(w io.Writer) FrameWriter { return passWriter{w} }
func (a *passAuth) Step([]byte) ([]byte, error)       { a.done = true; return nil, nil }
func (a *passAuth) Done() bool                        { return a.done }
func (a *passAuth) AppID() string                     { return "app" }
func (a *passAuth) Cipher() Cipher                    { return passCipher{} }
func newPassAuth(SecretFunc) Handshake                { return &passAuth{} }

type passAuth struct{ done bool }

// serveForBench serves dir's map outputs (fakeStore's layout) on a
// loopback port, prints the address, and stops when stdin closes.
func serveForBench(dir, mode string) error {
	cfg := Config{Store: &fakeStore{dir: dir, secrets: map[string][]byte{}}}
	if mode == "buffered" {
		cfg.Handshake = newPassAuth
	}
	s, err := New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go s.Serve(ln)
	fmt.Println(ln.Addr().String())
	io.Copy(io.Discard, os.Stdin)
	return s.Close()
}

// BenchmarkFetch fetches a 256 MiB map output from a server in another
// process over loopback, in blocks of the given size, and reports the
// rate and the server process's CPU seconds per GB sent (user + system,
// from its rusage; its start, a few milliseconds, included).
// mode=sendfile is a plain connection (zero copy); mode=buffered sends
// through the 256 KiB send buffer, as an encrypted connection does, with a
// cipher that changes nothing.
func BenchmarkFetch(b *testing.B) {
	const total = 256 << 20
	dir := b.TempDir()
	st := &fakeStore{dir: dir, secrets: map[string][]byte{}}
	for _, block := range []int{64 << 10, 1 << 20, 16 << 20} {
		parts := make([]string, total/block)
		payload := strings.Repeat("0123456789abcdef", block/16)
		for i := range parts {
			parts[i] = payload
		}
		st.commit(b, "app", "1", shufflefile.ID{Shuffle: int32(block), Map: 1}, parts...)
		for _, mode := range []string{"sendfile", "buffered"} {
			b.Run(fmt.Sprintf("mode=%s/block=%dKiB", mode, block>>10), func(b *testing.B) {
				benchFetch(b, dir, mode, int32(block), len(parts))
			})
		}
	}
}

func benchFetch(b *testing.B, dir, mode string, shuffle int32, nparts int) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchServeEnv+"="+dir, benchServeEnv+"_MODE="+mode)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	c, err := Dial(strings.TrimSpace(addr))
	if err != nil {
		b.Fatal(err)
	}
	if mode == "buffered" {
		if _, err := c.RPC([]byte{tagAuthEngine}); err != nil {
			b.Fatal(err)
		}
	}
	reduce := make([]int32, nparts)
	for i := range reduce {
		reduce[i] = int32(i)
	}
	msg := (&FetchShuffleBlocks{AppID: "app", ExecID: "1", ShuffleID: shuffle, MapIDs: []int64{1}, ReduceIDs: [][]int32{reduce}}).Append(nil)
	b.SetBytes(256 << 20)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var sent int64
	for range b.N {
		sid, n, err := c.Open(msg)
		if err != nil {
			b.Fatal(err)
		}
		for i := range n {
			k, err := c.FetchChunk(sid, i, io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			sent += k
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	c.Close()
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	gb := float64(sent) / 1e9
	b.ReportMetric(cpu.Seconds()/gb, "server-cpu-s/GB")
	b.ReportMetric(float64(sent)/1e6/elapsed.Seconds(), "MB/s")
}
