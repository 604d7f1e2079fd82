package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/disks"
	"github.com/shuffled/shuffled/iocrypt"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/testkit"
	"github.com/shuffled/shuffled/testkit/leakcheck"
	"github.com/shuffled/shuffled/vfs"
)

var testIOKey = []byte("KEY-0123456789ab") // 16 bytes: AES-128

// keyInText reports whether s shows the test key, as bytes or in hex.
func keyInText(s string) bool {
	return strings.Contains(s, string(testIOKey)) || strings.Contains(strings.ToLower(s), hex.EncodeToString(testIOKey))
}

func dialKey(t *testing.T, d *daemon, app, executor string, key []byte) (*client.Client, error) {
	t.Helper()
	c, err := client.Dial(context.Background(), d.socket)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	_, err = c.Register(context.Background(), protocol.RegisterExecutor{AppID: app, ExecutorID: executor, IOEncryptionKey: bytes.Clone(key)})
	return c, err
}

// TestEncryptedRoundTrip registers a key, writes encrypted map outputs of
// one and several runs, and reads them back as Spark does: each
// non-empty partition is an IV and one AES-CTR stream of codec streams.
// The daemon's debug log never shows the key.
func TestEncryptedRoundTrip(t *testing.T) {
	leakcheck.Check(t)
	var logged testkit.SyncBuffer
	dir := t.TempDir()
	cfg := Config{SocketPath: filepath.Join(dir, "s.sock"), Root: filepath.Join(dir, "root"), LimitBytes: 4 << 20, PoolSize: 2}
	d := startDaemonWith(t, cfg, WithLogger(slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	c, err := dialKey(t, d, "app-enc", "1", testIOKey)
	if err != nil {
		t.Fatalf("Register with a key: %v", err)
	}
	key, _ := iocrypt.NewKey(testIOKey)
	ctx := context.Background()
	for i, k := range []codec.Kind{codec.None, codec.LZ4, codec.Zstd, codec.Snappy} {
		mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: int64(i), NumPartitions: 3, Kind: protocol.KindOpaque,
			Codec: k.String(), Flags: protocol.OpenEncrypt})
		if err != nil {
			t.Fatalf("Open encrypted: %v", err)
		}
		want := make([][]byte, 3)
		for b := range 2 { // two batches over partitions 0 and 2: two runs
			parts := [][]byte{bytes.Repeat([]byte("p0-"), 100*(b+1)), nil, bytes.Repeat([]byte{byte(b)}, 5000)}
			var data []byte
			offsets := []int64{0}
			for p, part := range parts {
				data = append(data, part...)
				offsets = append(offsets, int64(len(data)))
				want[p] = append(want[p], part...)
			}
			if err := mo.WriteOpaque(ctx, data, offsets); err != nil {
				t.Fatal(err)
			}
		}
		res, err := mo.Commit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Runs != 2 || res.Lengths[1] != 0 {
			t.Errorf("%v: %d runs, partition 1 of %d bytes; want 2 runs, an empty partition of 0 bytes", k, res.Runs, res.Lengths[1])
		}
		mout, err := shufflefile.Open(vfs.Default, shufflefile.Flat(filepath.Join(d.root, "app-enc", "1")), shufflefile.ID{Shuffle: 1, Map: int64(i)}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := mout.Verify(); err != nil { // the checksums are of the encrypted bytes
			t.Fatal(err)
		}
		for p := range want {
			raw, err := mout.ReadPartition(p)
			if err != nil {
				t.Fatal(err)
			}
			if len(want[p]) == 0 {
				continue
			}
			plain := make([]byte, len(raw)-iocrypt.IVSize)
			key.StreamAt((*[iocrypt.IVSize]byte)(raw), 0).XORKeyStream(plain, raw[iocrypt.IVSize:])
			got, err := codec.Decode(k, nil, plain)
			if err != nil || !bytes.Equal(got, want[p]) {
				t.Errorf("%v partition %d: decrypted and decoded %d bytes (%v), want %d", k, p, len(got), err, len(want[p]))
			}
		}
		mout.Close()
	}
	d.stop(t)
	if keyInText(logged.String()) {
		t.Errorf("the daemon's log shows the key")
	}
	if !strings.Contains(logged.String(), "io_encryption=true") {
		t.Errorf("the registration's log line does not say that it carries a key")
	}
}

// An encrypted Open needs a key: without one, or once RemoveApplication
// forgot it, it is FailedPrecondition; a registration that ends releases
// the key; refused keys never show in errors.
func TestIOKeyLifecycle(t *testing.T) {
	leakcheck.Check(t)
	d := startDaemon(t, nil)
	ctx := context.Background()
	open := func(c *client.Client, m int64) error {
		mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: m, NumPartitions: 2, Kind: protocol.KindOpaque, Flags: protocol.OpenEncrypt})
		if err == nil {
			_ = mo.Abort(ctx)
		}
		return err
	}
	plain := dial(t, d, "app-nokey")
	if err := open(plain, 1); protocol.CodeOf(err) != protocol.CodeFailedPrecondition || !strings.Contains(err.Error(), "io_encryption_key") {
		t.Errorf("encrypted Open without a key = %v, want FailedPrecondition naming io_encryption_key", err)
	}

	// Keys of other lengths, sent as a client that does not check them
	// would: refused, the error naming the length only.
	raw := dialRaw(t, d)
	if _, m := raw.call(1, &protocol.Hello{MinVersion: 1, MaxVersion: 1, Client: "raw"}); m.(*protocol.ServerHello).Features&protocol.FeatureIOEncryption == 0 {
		t.Errorf("ServerHello does not announce io-encryption")
	}
	for i, n := range []int{1, 15, 17, 31, 33} {
		payload := (&protocol.RegisterExecutor{AppID: "app-k", ExecutorID: "1"}).Append(nil)
		payload = append(payload, byte(n), 0)
		payload = append(payload, bytes.Repeat(testIOKey, 3)[:n]...)
		frame := protocol.Header{Type: protocol.TypeRegister, ID: uint32(2 + i), Length: uint32(len(payload))}.Append(nil)
		if _, err := raw.uc.Write(append(frame, payload...)); err != nil {
			t.Fatal(err)
		}
		_, m := raw.read()
		e, ok := m.(*protocol.Error)
		if !ok || e.Code != protocol.CodeInvalidArgument || keyInText(e.Message) || !strings.Contains(e.Message, "IOEncryptionKey") {
			t.Errorf("Register with a %d-byte key answered %+v, want InvalidArgument naming the field, without the key", n, m)
		}
	}

	c1, err := dialKey(t, d, "app-k", "1", testIOKey)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := dialKey(t, d, "app-k", "2", testIOKey)
	if err != nil {
		t.Fatalf("a second executor with the same key: %v", err)
	}
	other := bytes.Clone(testIOKey)
	other[0] ^= 1
	if _, err := dialKey(t, d, "app-k", "3", other); protocol.CodeOf(err) != protocol.CodeInvalidArgument || keyInText(err.Error()) ||
		!strings.Contains(err.Error(), "one key per application") {
		t.Errorf("an executor with another key = %v, want InvalidArgument", err)
	}
	if err := open(c1, 2); err != nil {
		t.Errorf("encrypted Open: %v", err)
	}
	// A refused registration released nothing of the others' hold.
	c2.Close()
	if err := open(c1, 3); err != nil {
		t.Errorf("encrypted Open after another executor left: %v", err)
	}

	if _, err := c1.RemoveApplication(ctx, "app-k"); err != nil {
		t.Fatal(err)
	}
	if err := open(c1, 4); protocol.CodeOf(err) != protocol.CodeFailedPrecondition || !strings.Contains(err.Error(), "removed") {
		t.Errorf("encrypted Open after RemoveApplication = %v, want FailedPrecondition: the registration ended", err)
	}
	d.s.keys.mu.Lock()
	if n := len(d.s.keys.apps); n != 0 {
		t.Errorf("%d keys held after RemoveApplication, want 0", n)
	}
	d.s.keys.mu.Unlock()
	// After the removal, the application may come back with another key.
	c3, err := dialKey(t, d, "app-k", "4", other)
	if err != nil {
		t.Fatalf("registering again after the removal with a new key: %v", err)
	}
	c3.Close()
	c1.Close()
	s := d.s
	d.stop(t) // every session ended
	if n := len(s.keys.apps); n != 0 {
		t.Errorf("%d keys held after every session ended, want 0", n)
	}
}

// A key belongs to the uid that owns the application: another uid's
// registration is refused by the registry before any key is bound, so it
// neither places a key nor changes the owner's.
func TestIOKeyOtherUID(t *testing.T) {
	d := startDaemon(t, nil)
	reg, err := d.s.registerExecutor(peerA, &protocol.RegisterExecutor{AppID: "app-a", ExecutorID: "1", IOEncryptionKey: bytes.Clone(testIOKey)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.s.unregister(reg)
	other := bytes.Repeat([]byte{9}, 32)
	if _, err := d.s.registerExecutor(peerB, &protocol.RegisterExecutor{AppID: "app-a", ExecutorID: "2", IOEncryptionKey: other}); codeOfErr(err) != protocol.CodePermissionDenied {
		t.Errorf("uid %d registering uid %d's application with a key = %v, want PermissionDenied", peerB, peerA, err)
	}
	if !bytes.Equal(other, make([]byte, 32)) {
		t.Errorf("a refused registration's key bytes were not cleared")
	}
	d.s.keys.mu.Lock()
	ak := d.s.keys.apps["app-a"]
	d.s.keys.mu.Unlock()
	want, _ := iocrypt.NewKey(testIOKey)
	if ak == nil || ak.uid != peerA || ak.refs != 1 || !ak.key.Equal(want) {
		t.Errorf("the owner's key after another uid's attempt: %+v, want uid %d's key held once", ak, peerA)
	}
	// The store itself refuses another uid's key for an application.
	k2, _ := iocrypt.NewKey(testIOKey)
	if _, err := d.s.keys.bind("app-a", peerB, k2); err == nil {
		t.Errorf("bind of uid %d's key to uid %d's application: accepted", peerB, peerA)
	}
	k, err := d.s.keys.usable(reg.key)
	if err != nil || !k.Equal(want) {
		t.Errorf("usable(owner's key) = %v, %v", k, err)
	}
}

// The key is never written down: not in the registry file the daemon
// persists, nor in any file under its root. A restarted daemon knows no
// key: an encrypted Open needs the executor to register it again.
func TestIOKeyNeverPersisted(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	cfg := Config{SocketPath: filepath.Join(dir, "s.sock"), Root: filepath.Join(dir, "root"), LimitBytes: 4 << 20, PoolSize: 2}
	d := startDaemonWith(t, cfg)
	c, err := dialKey(t, d, "app-p", "1", testIOKey)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mo, err := c.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: 1, NumPartitions: 2, Kind: protocol.KindOpaque, Flags: protocol.OpenEncrypt})
	if err != nil {
		t.Fatal(err)
	}
	if err := mo.WriteOpaque(ctx, []byte("abcdef"), []int64{0, 3, 6}); err != nil {
		t.Fatal(err)
	}
	if _, err := mo.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()
	d.stop(t)
	err = filepath.WalkDir(dir, func(path string, de os.DirEntry, err error) error {
		if err != nil || de.IsDir() || de.Type()&os.ModeSocket != 0 {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, testIOKey) || keyInText(string(b)) || strings.Contains(string(b), base64.StdEncoding.EncodeToString(testIOKey)) {
			t.Errorf("%s holds the key", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cfg.Root, disks.RegistryName)); err != nil {
		t.Errorf("no registry file was written to look into: %v", err)
	}

	d = startDaemonWith(t, cfg)
	plain := dial(t, d, "app-p")
	if _, err := plain.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: 2, NumPartitions: 2, Kind: protocol.KindOpaque, Flags: protocol.OpenEncrypt}); protocol.CodeOf(err) != protocol.CodeFailedPrecondition {
		t.Errorf("encrypted Open after a restart, registered without the key = %v, want FailedPrecondition", err)
	}
	again, err := dialKey(t, d, "app-p", "2", testIOKey)
	if err != nil {
		t.Fatalf("registering the key again after a restart: %v", err)
	}
	mo, err = again.Open(ctx, protocol.OpenMapOutput{ShuffleID: 1, MapID: 2, NumPartitions: 2, Kind: protocol.KindOpaque, Flags: protocol.OpenEncrypt})
	if err != nil {
		t.Fatalf("encrypted Open after registering again: %v", err)
	}
	_ = mo.Abort(ctx)
}

// TestKeylessJoinRefused: while executors of an application hold its IO
// encryption key, a registration of it without a key is refused at once
// (FailedPrecondition naming the field) instead of failing each encrypted
// Open later; once no connection holds the key, a keyless one registers.
func TestKeylessJoinRefused(t *testing.T) {
	d := startDaemon(t, nil)
	keyed, err := dialKey(t, d, "app-k", "1", testIOKey)
	if err != nil {
		t.Fatal(err)
	}
	_, err = dialKey(t, d, "app-k", "2", nil)
	if protocol.CodeOf(err) != protocol.CodeFailedPrecondition || !strings.Contains(err.Error(), "RegisterExecutor.io_encryption_key") {
		t.Errorf("a keyless executor joining executors with a key = %v, want FailedPrecondition naming RegisterExecutor.io_encryption_key", err)
	}
	if n := d.s.apps.sessionsOf("app-k"); n != 1 {
		t.Errorf("%d registrations of app-k after the refusal, want 1 (the refused one counts none)", n)
	}
	keyed.Close()
	deadline := time.Now().Add(10 * time.Second)
	for d.s.keys.held("app-k") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := dialKey(t, d, "app-k", "3", nil); err != nil {
		t.Errorf("a keyless executor once no connection holds the key: %v", err)
	}
}
