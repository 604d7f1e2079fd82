package codec

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Kind
		ok   bool
	}{
		{"none", None, true},
		{"NONE", None, true},
		{"lz4", LZ4, true},
		{"LZ4", LZ4, true},
		{"zstd", Zstd, true},
		{"ZStd", Zstd, true},
		{"snappy", Snappy, true},
		{"Snappy", Snappy, true},
		{"", None, false},
		{"gzip", None, false},
		{"lz4 ", None, false},
		{"lzf", None, false},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if tt.ok {
			if err != nil || got != tt.want {
				t.Errorf("Parse(%q) = %v, %v, want %v, nil", tt.in, got, err, tt.want)
			}
			continue
		}
		if !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.in)) {
			t.Errorf("Parse(%q) = %v, %v, want an ErrUnknown naming %q", tt.in, got, err, tt.in)
		}
	}
	for _, k := range allKinds {
		if got, err := Parse(k.String()); err != nil || got != k {
			t.Errorf("Parse(%q) = %v, %v, want %v, nil", k.String(), got, err, k)
		}
	}
	if got, want := Kind(9).String(), "Kind(9)"; got != want {
		t.Errorf("Kind(9).String() = %q, want %q", got, want)
	}
}

func TestOptions(t *testing.T) {
	tests := []struct {
		kind Kind
		opt  Option
		name string
		ok   bool
	}{
		{LZ4, WithBlockSize(MinLZ4BlockSize), "WithBlockSize(64)", true},
		{LZ4, WithBlockSize(MaxBlockSize), "WithBlockSize(32MiB)", true},
		{LZ4, WithBlockSize(MinLZ4BlockSize - 1), "WithBlockSize(63)", false},
		{LZ4, WithBlockSize(MaxBlockSize + 1), "WithBlockSize(32MiB+1)", false},
		{Snappy, WithBlockSize(1), "WithBlockSize(1)", true},
		{Snappy, WithBlockSize(0), "WithBlockSize(0)", false},
		{Snappy, WithBlockSize(MaxBlockSize + 1), "WithBlockSize(32MiB+1)", false},
		{Zstd, WithBlockSize(0), "WithBlockSize(0)", true}, // ignored
		{None, WithBlockSize(-1), "WithBlockSize(-1)", true},
		{Zstd, WithLevel(1), "WithLevel(1)", true},
		{Zstd, WithLevel(22), "WithLevel(22)", true},
		{Zstd, WithLevel(0), "WithLevel(0)", false},
		{Zstd, WithLevel(23), "WithLevel(23)", false},
		{LZ4, WithLevel(99), "WithLevel(99)", true}, // ignored
	}
	for _, tt := range tests {
		_, err := NewEncoder(tt.kind, tt.opt)
		if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidOption)) {
			t.Errorf("NewEncoder(%v, %s) = %v, want ok=%v or ErrInvalidOption", tt.kind, tt.name, err, tt.ok)
		}
		if _, perr := NewPool(tt.kind, tt.opt); (perr == nil) != (err == nil) {
			t.Errorf("NewPool(%v, %s) = %v, NewEncoder gave %v", tt.kind, tt.name, perr, err)
		}
		if n := MaxEncodedLen(tt.kind, 10, tt.opt); (n >= 0) != tt.ok {
			t.Errorf("MaxEncodedLen(%v, 10, %s) = %d, want ok=%v", tt.kind, tt.name, n, tt.ok)
		}
	}
	if _, err := NewEncoder(Kind(7)); !errors.Is(err, ErrUnknown) {
		t.Errorf("NewEncoder(Kind(7)) = %v, want ErrUnknown", err)
	}
	if _, err := Decode(Kind(7), nil, nil); !errors.Is(err, ErrUnknown) {
		t.Errorf("Decode(Kind(7)) = %v, want ErrUnknown", err)
	}
	if _, err := NewReader(Kind(7), nil); !errors.Is(err, ErrUnknown) {
		t.Errorf("NewReader(Kind(7)) = %v, want ErrUnknown", err)
	}
	if n := MaxEncodedLen(LZ4, -1); n != -1 {
		t.Errorf("MaxEncodedLen(LZ4, -1) = %d, want -1", n)
	}
}

func TestLZ4Level(t *testing.T) {
	tests := []struct {
		blockSize int
		want      byte
	}{
		{64, 0}, {1024, 0}, {1025, 1}, {2048, 1}, {32 << 10, 5}, {64 << 10, 6}, {(32 << 10) + 1, 6}, {32 << 20, 15},
	}
	for _, tt := range tests {
		if got := lz4Level(tt.blockSize); got != tt.want {
			t.Errorf("lz4Level(%d) = %d, want %d", tt.blockSize, got, tt.want)
		}
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGolden(t *testing.T) {
	hello := []byte("hello world")
	tests := []struct {
		kind Kind
		in   []byte
		want string
	}{
		{LZ4, hello, "4c5a34426c6f636b 15 0b000000 0b000000 95039202 68656c6c6f20776f726c64" +
			"4c5a34426c6f636b 15 000000000000000000000000"},
		{LZ4, nil, "4c5a34426c6f636b 15 000000000000000000000000"},
		{Snappy, nil, "82534e4150505900 00000001 00000001"},
		// A literal-only block, the same bytes that snappy-java writes.
		{Snappy, hello, "82534e4150505900 00000001 00000001 0000000d 0b28 68656c6c6f20776f726c64"},
		{None, hello, "68656c6c6f20776f726c64"},
	}
	for _, tt := range tests {
		want := mustHex(t, tt.want)
		e := mustEncoder(t, tt.kind)
		if got := e.Encode(nil, tt.in); !bytes.Equal(got, want) {
			t.Errorf("%v Encode(%q) = %x, want %x", tt.kind, tt.in, got, want)
		}
		e.Reset(nil)
		e.Write(tt.in)
		if got := e.Finish(); !bytes.Equal(got, want) {
			t.Errorf("%v Write(%q)+Finish = %x, want %x", tt.kind, tt.in, got, want)
		}
		if got, err := Decode(tt.kind, nil, want); err != nil || !bytes.Equal(got, tt.in) {
			t.Errorf("Decode(%v, %x) = %q, %v, want %q", tt.kind, want, got, err, tt.in)
		}
	}
	// Frames written by zstd-jni: streaming (no content size, no checksum)
	// and the empty frame.
	for _, s := range []string{
		"28b52ffd004858000068656c6c6f20776f726c64010000",
		"28b52ffd004859000068656c6c6f20776f726c64",
	} {
		if got, err := Decode(Zstd, nil, mustHex(t, s)); err != nil || string(got) != "hello world" {
			t.Errorf("Decode(Zstd, %s) = %q, %v, want %q", s, got, err, "hello world")
		}
	}
	if got, err := Decode(Zstd, nil, mustHex(t, "28b52ffd2000010000")); err != nil || len(got) != 0 {
		t.Errorf("Decode(Zstd, empty frame) = %q, %v, want empty", got, err)
	}
}

// roundTrip checks that stream decodes to want with Decode and NewReader.
func roundTrip(t *testing.T, k Kind, stream, want []byte) {
	t.Helper()
	got, err := Decode(k, []byte("prefix"), stream)
	if err != nil || !bytes.Equal(got[:6], []byte("prefix")) || !bytes.Equal(got[6:], want) {
		t.Fatalf("Decode(%v, %d bytes) = %d bytes, %v, want the prefix and %d bytes", k, len(stream), len(got), err, len(want))
	}
	r, err := NewReader(k, iotest.HalfReader(bytes.NewReader(stream)))
	if err != nil {
		t.Fatalf("NewReader(%v) = %v", k, err)
	}
	got, err = readAll(t, r)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("NewReader(%v) read %d bytes, %v, want %d bytes", k, len(got), err, len(want))
	}
}

func TestRoundTrip(t *testing.T) {
	for _, k := range allKinds {
		bs := blockSizeOf(k)
		sizes := []int{0, 1, 11, bs - 1, bs, bs + 1, 3*bs + 17, 1<<20 + 3}
		for _, n := range sizes {
			for _, gen := range []struct {
				name string
				data []byte
			}{
				{"text", textData(n, uint64(n))},
				{"random", randomData(n, uint64(n))},
				{"zeros", make([]byte, n)},
			} {
				t.Run(fmt.Sprintf("codec=%v/size=%d/data=%s", k, n, gen.name), func(t *testing.T) {
					e := mustEncoder(t, k)
					stream := e.Encode([]byte("head"), gen.data)
					if !bytes.Equal(stream[:4], []byte("head")) {
						t.Fatalf("Encode overwrote the prefix of dst: %q", stream[:4])
					}
					stream = stream[4:]
					if max := MaxEncodedLen(k, n); len(stream) > max {
						t.Errorf("Encode(%d bytes) = %d bytes, more than MaxEncodedLen %d", n, len(stream), max)
					}
					roundTrip(t, k, stream, gen.data)
				})
			}
		}
	}
}

func TestRoundTripLarge(t *testing.T) {
	data := textData(4<<20, 1)
	for _, k := range allKinds {
		roundTrip(t, k, mustEncoder(t, k).Encode(nil, data), data)
	}
}

func TestRoundTripBlockSizes(t *testing.T) {
	data := textData(5000, 1)
	for _, tt := range []struct {
		kind Kind
		opts []Option
	}{
		{LZ4, []Option{WithBlockSize(64)}},
		{LZ4, []Option{WithBlockSize(1000)}},
		{LZ4, []Option{WithBlockSize(1 << 20)}},
		{Snappy, []Option{WithBlockSize(1)}},
		{Snappy, []Option{WithBlockSize(777)}},
		{Zstd, []Option{WithLevel(3)}},
		{Zstd, []Option{WithLevel(7)}},
		{Zstd, []Option{WithLevel(19)}},
	} {
		e := mustEncoder(t, tt.kind, tt.opts...)
		stream := e.Encode(nil, data)
		if max := MaxEncodedLen(tt.kind, len(data), tt.opts...); len(stream) > max {
			t.Errorf("%v Encode(%d bytes) = %d bytes, more than MaxEncodedLen %d", tt.kind, len(data), len(stream), max)
		}
		roundTrip(t, tt.kind, stream, data)
	}
}

func TestStreamingMatchesEncode(t *testing.T) {
	for _, k := range allKinds {
		bs := blockSizeOf(k)
		for _, n := range []int{0, 1, bs - 1, bs, bs + 1, 5*bs + 3} {
			data := textData(n, 7)
			e := mustEncoder(t, k)
			want := e.Encode([]byte("x"), data)
			for _, chunk := range []int{1, 7, 1000, bs - 1, bs, bs + 1, 1 << 20} {
				if chunk == 1 && n > 4*bs {
					continue
				}
				e.Reset([]byte("x"))
				for p := data; len(p) > 0; {
					c := min(chunk, len(p))
					if m, err := e.Write(p[:c]); m != c || err != nil {
						t.Fatalf("%v Write(%d bytes) = %d, %v", k, c, m, err)
					}
					p = p[c:]
				}
				if got := e.Finish(); !bytes.Equal(got, want) {
					t.Errorf("%v: %d bytes written in chunks of %d = %d-byte stream, Encode gives %d bytes", k, n, chunk, len(got), len(want))
				}
			}
		}
	}
}

func TestStreamingWithoutReset(t *testing.T) {
	for _, k := range allKinds {
		e := mustEncoder(t, k)
		want := e.Encode(nil, []byte("hello world"))
		e.Write([]byte("hello "))
		e.Write([]byte("world"))
		if got := e.Finish(); !bytes.Equal(got, want) {
			t.Errorf("%v Write without Reset, Finish = %x, want %x", k, got, want)
		}
		if got := e.Finish(); !bytes.Equal(got, e.Encode(nil, nil)) {
			t.Errorf("%v Finish of an unstarted stream = %x, want the empty stream", k, got)
		}
	}
}

func TestEncodeDuringStream(t *testing.T) {
	for _, k := range allKinds {
		e := mustEncoder(t, k)
		data := textData(100000, 3)
		want := e.Encode(nil, data)
		e.Reset(nil)
		e.Write(data[:50000])
		if got := e.Encode(nil, data); !bytes.Equal(got, want) {
			t.Errorf("%v Encode during a stream differs from Encode", k)
		}
		e.Write(data[50000:])
		if got := e.Finish(); !bytes.Equal(got, want) {
			t.Errorf("%v stream interrupted by Encode differs from Encode", k)
		}
	}
}

func TestConcatenated(t *testing.T) {
	pieces := [][]byte{
		textData(1000, 1), nil, randomData(40000, 2), []byte("x"), textData(100000, 3), nil,
	}
	want := bytes.Join(pieces, nil)
	for _, tt := range []struct {
		kind Kind
		opts [][]Option // per piece, cycled
	}{
		{None, [][]Option{nil}},
		{LZ4, [][]Option{nil, {WithBlockSize(64)}, {WithBlockSize(1 << 20)}}},
		{Zstd, [][]Option{nil, {WithLevel(19)}}},
		{Snappy, [][]Option{nil, {WithBlockSize(100)}}},
	} {
		var stream []byte
		for i, p := range pieces {
			e := mustEncoder(t, tt.kind, tt.opts[i%len(tt.opts)]...)
			stream = e.Encode(stream, p)
		}
		t.Run(tt.kind.String(), func(t *testing.T) { roundTrip(t, tt.kind, stream, want) })
	}
}

func TestEncodeWithinMaxEncodedLen(t *testing.T) {
	for _, k := range allKinds {
		for _, data := range [][]byte{textData(300000, 1), randomData(300000, 2), nil} {
			e := mustEncoder(t, k)
			dst := make([]byte, 3, 3+MaxEncodedLen(k, len(data)))
			if got := e.Encode(dst, data); &got[0] != &dst[0] {
				t.Errorf("%v Encode(%d bytes) reallocated a dst of MaxEncodedLen spare capacity", k, len(data))
			}
			e.Reset(dst)
			e.Write(data)
			if got := e.Finish(); &got[0] != &dst[0] {
				t.Errorf("%v Write(%d bytes)+Finish reallocated a dst of MaxEncodedLen spare capacity", k, len(data))
			}
		}
	}
}

func TestPool(t *testing.T) {
	for _, k := range allKinds {
		p, err := NewPool(k)
		if err != nil {
			t.Fatalf("NewPool(%v) = %v", k, err)
		}
		if p.Kind() != k {
			t.Errorf("NewPool(%v).Kind() = %v", k, p.Kind())
		}
		data := textData(200000, 1)
		want := mustEncoder(t, k).Encode(nil, data)
		var es []Encoder
		for range 3 {
			es = append(es, p.Get())
		}
		for _, e := range es {
			e.Reset(nil)
			e.Write(data[:10]) // a stream in progress that Put must end
			p.Put(e)
		}
		for range 3 {
			e := p.Get()
			if got := e.Finish(); !bytes.Equal(got, e.Encode(nil, nil)) {
				t.Errorf("%v pooled encoder kept a stream across Put", k)
			}
			p.Put(e)
		}
		if got := p.Encode(nil, data); !bytes.Equal(got, want) {
			t.Errorf("%v Pool.Encode differs from Encoder.Encode", k)
		}
		if got, want := p.MaxEncodedLen(1000), MaxEncodedLen(k, 1000); got != want {
			t.Errorf("%v Pool.MaxEncodedLen(1000) = %d, want %d", k, got, want)
		}
	}
}

func TestPoolPutForeign(t *testing.T) {
	p, err := NewPool(LZ4)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []Encoder{
		mustEncoder(t, Snappy),
		mustEncoder(t, LZ4, WithBlockSize(64)),
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Put of a %v encoder with other options into an lz4 pool did not panic", e.Kind())
				}
			}()
			p.Put(e)
		}()
	}
}

func TestPoolEncodeAllocs(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("coverage and the race detector change allocations")
	}
	data := textData(1<<20, 1)
	for _, k := range allKinds {
		p, err := NewPool(k)
		if err != nil {
			t.Fatal(err)
		}
		dst := make([]byte, 0, p.MaxEncodedLen(len(data)))
		encode := func() {
			e := p.Get()
			e.Encode(dst[:0], data)
			e.Reset(dst[:0])
			e.Write(data[:1000])
			e.Write(data[1000:])
			e.Finish()
			p.Put(e)
		}
		encode()
		if n := testing.AllocsPerRun(5, encode); n != 0 {
			t.Errorf("%v: %.1f allocs per pooled Encode+stream of 1 MiB, want 0", k, n)
		}
	}
}

func TestReaderClose(t *testing.T) {
	for _, k := range allKinds {
		stream := mustEncoder(t, k).Encode(nil, textData(100000, 1))
		r, err := NewReader(k, bytes.NewReader(stream))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Read(make([]byte, 10)); err != nil {
			t.Fatalf("%v Read = %v", k, err)
		}
		if err := r.Close(); err != nil {
			t.Errorf("%v Close = %v", k, err)
		}
		if _, err := r.Read(make([]byte, 10)); !errors.Is(err, ErrClosed) {
			t.Errorf("%v Read after Close = %v, want ErrClosed", k, err)
		}
		if err := r.Close(); err != nil {
			t.Errorf("%v second Close = %v", k, err)
		}
	}
}

func TestReaderPassesSourceErrors(t *testing.T) {
	errSource := errors.New("disk on fire")
	for _, k := range allKinds {
		stream := mustEncoder(t, k).Encode(nil, textData(100000, 1))
		src := io.MultiReader(bytes.NewReader(stream[:len(stream)/2]), iotest.ErrReader(errSource))
		r, err := NewReader(k, src)
		if err != nil {
			t.Fatal(err)
		}
		_, err = readAll(t, r)
		if !errors.Is(err, errSource) || errors.Is(err, ErrCorrupt) {
			t.Errorf("%v read of a failing source = %v, want %v and not ErrCorrupt", k, err, errSource)
		}
	}
}

func TestMaxEncodedLenBound(t *testing.T) {
	// Incompressible input, and input that alternates between text and
	// noise, near block boundaries.
	for _, k := range allKinds {
		e := mustEncoder(t, k)
		bs := blockSizeOf(k)
		for _, n := range []int{0, 1, 15, 16, 17, 100, bs - 1, bs, bs + 1, 2*bs - 1, 2 * bs, 2*bs + 1, 7*bs + 5} {
			for i, data := range [][]byte{
				randomData(n, uint64(n)),
				mixedData(n),
			} {
				if got, max := len(e.Encode(nil, data)), MaxEncodedLen(k, n); got > max {
					t.Errorf("%v Encode(%d bytes of kind %d) = %d bytes, more than MaxEncodedLen %d", k, n, i, got, max)
				}
			}
		}
	}
}

// mixedData alternates 1000-byte runs of text and noise.
func mixedData(n int) []byte {
	text, noise := textData(n, 1), randomData(n, 2)
	b := make([]byte, n)
	for i := 0; i < n; i += 1000 {
		src := text
		if i/1000%2 == 1 {
			src = noise
		}
		copy(b[i:min(n, i+1000)], src[i:])
	}
	return b
}

func TestCache(t *testing.T) {
	pools := make([]*Pool, 3)
	for i := range pools {
		p, err := NewPool(LZ4, WithBlockSize(1<<(10+i)))
		if err != nil {
			t.Fatal(err)
		}
		pools[i] = p
	}
	data := textData(100000, 1)
	var c Cache
	e0 := c.Get(pools[0])
	e0.Reset(nil)
	e0.Write(data[:10]) // a stream in progress that Put must end
	c.Put(pools[0], e0)
	if e := c.Get(pools[0]); e != e0 {
		t.Fatalf("Get after Put gave another encoder")
	} else if got := e.Finish(); !bytes.Equal(got, e.Encode(nil, nil)) {
		t.Errorf("cached encoder kept a stream across Put")
	}
	c.Put(pools[0], e0)
	e1 := c.Get(pools[1])
	c.Put(pools[1], e1)
	// A third pool's encoder pushes out the least recent one, pools[0]'s,
	// back to its pool.
	e2 := c.Get(pools[2])
	c.Put(pools[2], e2)
	if e := c.Get(pools[1]); e != e1 {
		t.Errorf("pools[1]'s encoder was not kept")
	} else {
		c.Put(pools[1], e)
	}
	if e := c.Get(pools[2]); e != e2 {
		t.Errorf("pools[2]'s encoder was not kept")
	} else {
		c.Put(pools[2], e)
	}
	if !poolHolds(pools[0], e0) {
		t.Errorf("the least recent pool's encoder did not go back to its pool")
	}
	// Two of one pool lent at once: the second Put gives the first back.
	a, b := c.Get(pools[1]), c.Get(pools[1])
	if a == b {
		t.Fatalf("two Gets gave one encoder")
	}
	c.Put(pools[1], a)
	c.Put(pools[1], b)
	if !poolHolds(pools[1], a) {
		t.Errorf("an encoder displaced by one of its own pool was dropped")
	}
	c.Close()
	if !poolHolds(pools[1], b) || !poolHolds(pools[2], e2) {
		t.Errorf("Close did not give the encoders back")
	}
	if got, want := c.Get(pools[0]).Encode(nil, data), mustEncoder(t, LZ4, WithBlockSize(1<<10)).Encode(nil, data); !bytes.Equal(got, want) {
		t.Errorf("an encoder from a closed cache differs from a new one")
	}
	defer func() {
		if recover() == nil {
			t.Errorf("Cache.Put of another pool's encoder did not panic")
		}
	}()
	c.Put(pools[0], e2)
}

// poolHolds reports whether e is among p's idle encoders, putting back
// what it takes.
func poolHolds(p *Pool, e Encoder) bool {
	var idle []encoder
	found := false
	for len(p.idle) > 0 {
		x := <-p.idle
		found = found || Encoder(x) == e
		idle = append(idle, x)
	}
	for _, x := range idle {
		p.idle <- x
	}
	return found
}
