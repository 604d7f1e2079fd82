package codec

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
)

var words = []string{
	"AIR", "MAIL", "SHIP", "TRUCK", "RAIL", "REG AIR", "FOB", "DELIVER IN PERSON",
	"TAKE BACK RETURN", "NONE", "COLLECT COD", "furiously", "carefully", "quickly",
	"slyly", "blithely", "pending", "final", "regular", "express", "ironic", "special",
	"requests", "deposits", "accounts", "packages", "theodolites", "pinto beans", "foxes",
}

// textData returns n bytes of deterministic text that compresses like
// real rows: lineitem-like lines of numbers and words.
func textData(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	var b bytes.Buffer
	b.Grow(n + 128)
	for b.Len() < n {
		fmt.Fprintf(&b, "%d|%d|%d|%.2f|%s|%s|%s %s %s|\n",
			r.IntN(6000000), r.IntN(200000), r.IntN(7)+1, r.Float64()*100000,
			words[r.IntN(5)], words[r.IntN(len(words))],
			words[r.IntN(len(words))], words[r.IntN(len(words))], words[r.IntN(len(words))])
	}
	return b.Bytes()[:n]
}

// randomData returns n deterministic incompressible bytes.
func randomData(n int, seed uint64) []byte {
	var key [32]byte
	key[0] = byte(seed)
	key[1] = byte(seed >> 8)
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(key).Read(b)
	return b
}

// readAll reads r to the end and closes it.
func readAll(t testing.TB, r io.ReadCloser) ([]byte, error) {
	t.Helper()
	b, err := io.ReadAll(r)
	if cerr := r.Close(); cerr != nil {
		t.Errorf("Close() = %v, want nil", cerr)
	}
	return b, err
}

var allKinds = []Kind{None, LZ4, Zstd, Snappy}

// blockSizeOf returns the block size an encoder of k uses by default, or a
// size that is interesting as a boundary for kinds without blocks.
func blockSizeOf(k Kind) int {
	if k == Zstd {
		return zstdBlockSize
	}
	return DefaultBlockSize
}

func mustEncoder(t testing.TB, k Kind, opts ...Option) Encoder {
	t.Helper()
	e, err := NewEncoder(k, opts...)
	if err != nil {
		t.Fatalf("NewEncoder(%v) = %v", k, err)
	}
	return e
}
