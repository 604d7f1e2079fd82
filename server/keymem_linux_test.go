package server

import (
	"bufio"
	"crypto/rand"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/shuffled/shuffled/protocol"
)

// keyScanner counts the copies of a key in this process's writable memory
// without ever holding the key itself: it searches for the bytes whose XOR
// with mask gives masked. Its read buffer is mapped apart and left out of
// the scan, so that reading memory does not count its own copies.
type keyScanner struct {
	masked []byte
	mask   byte
	buf    []byte // mmap'd
}

func newKeyScanner(t *testing.T, masked []byte, mask byte) *keyScanner {
	t.Helper()
	buf, err := syscall.Mmap(-1, 0, 1<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { clear(buf); syscall.Munmap(buf) })
	return &keyScanner{masked: masked, mask: mask, buf: buf}
}

// hits returns how many times the key appears in writable memory.
func (k *keyScanner) hits(t *testing.T) int {
	t.Helper()
	maps, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer maps.Close()
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	own := uint64(uintptr(unsafe.Pointer(&k.buf[0])))
	n := 0
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[1], "rw") {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || start == own {
			continue
		}
		overlap := uint64(len(k.masked) - 1)
		for at := start; at < end; {
			want := min(uint64(len(k.buf)), end-at)
			got, _ := mem.ReadAt(k.buf[:want], int64(at))
			if got <= 0 {
				break
			}
			n += k.count(k.buf[:got])
			if uint64(got) < want || at+uint64(got) >= end {
				at += uint64(got)
				continue
			}
			at += uint64(got) - overlap
		}
	}
	clear(k.buf)
	return n
}

func (k *keyScanner) count(b []byte) int {
	n := 0
	first := k.masked[0] ^ k.mask
	for i := 0; i+len(k.masked) <= len(b); i++ {
		if b[i] != first {
			continue
		}
		j := 1
		for j < len(k.masked) && b[i+j]^k.mask == k.masked[j] {
			j++
		}
		if j == len(k.masked) {
			n++
		}
	}
	return n
}

// TestKeyBytesNotKept registers an IO encryption key, sends it again on
// the same connection (AlreadyExists) and in a RegisterExecutor that does
// not decode, and then searches the process's memory for the key's bytes:
// the daemon keeps at most the one copy that the expanded AES key holds
// (its first round key is the key), none in its read buffer, frame
// buffers or decoded messages.
func TestKeyBytesNotKept(t *testing.T) {
	const mask = 0xa5
	key := make([]byte, 32)
	rand.Read(key)
	masked := make([]byte, len(key))
	for i, b := range key {
		masked[i] = b ^ mask
	}
	scan := newKeyScanner(t, masked, mask)
	d := startDaemon(t, nil)
	r := dialRaw(t, d)
	if _, m := r.call(1, &protocol.Hello{MinVersion: 1, MaxVersion: 1, Client: "raw"}); m.Type() != protocol.TypeServerHello {
		t.Fatalf("Hello answered %v", m)
	}
	send := func(id uint32, trailing bool) {
		frame, err := protocol.AppendFrame(nil, id, &protocol.RegisterExecutor{AppID: "app", ExecutorID: "1", IOEncryptionKey: key})
		if err != nil {
			t.Fatal(err)
		}
		if trailing { // one byte after the key: malformed
			frame = append(frame, 0)
			frame[12]++
		}
		_, err = r.uc.Write(frame)
		clear(frame)
		if err != nil {
			t.Fatal(err)
		}
	}
	send(2, false)
	if _, m := r.read(); m.Type() != protocol.TypeRegistered {
		t.Fatalf("RegisterExecutor answered %v", m)
	}
	send(3, false)
	if _, m := r.read(); codeOfMsg(m) != protocol.CodeAlreadyExists {
		t.Fatalf("a second RegisterExecutor answered %v, want AlreadyExists", m)
	}
	send(4, true)
	if _, m := r.read(); codeOfMsg(m) != protocol.CodeInvalidArgument {
		t.Fatalf("a RegisterExecutor with a byte after the key answered %v, want InvalidArgument", m)
	}
	clear(key)
	if _, m := r.call(5, &protocol.Ping{}); m.Type() != protocol.TypePong {
		t.Fatalf("Ping answered %v", m)
	}
	if n := scan.hits(t); n > 1 {
		t.Errorf("the key's bytes are in the process's memory %d times with the key bound, want at most once (the expanded key)", n)
	} else {
		t.Logf("the key's bytes are in memory %d times with the key bound", n)
	}
}
