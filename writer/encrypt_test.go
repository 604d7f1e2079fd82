package writer

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/iocrypt"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

var testKey = func() *iocrypt.Key {
	k, err := iocrypt.NewKey([]byte("a test key, 32 bytes long, AES-2"))
	if err != nil {
		panic(err)
	}
	return k
}()

// decrypt reads an encrypted partition as Spark's
// CryptoStreamUtils.createCryptoInputStream does: the IV, then one
// AES-CTR stream to the end of the block.
func decrypt(t testing.TB, key *iocrypt.Key, p int, raw []byte) []byte {
	t.Helper()
	if len(raw) <= iocrypt.IVSize {
		t.Fatalf("partition %d: %d bytes, not an IV and a stream", p, len(raw))
	}
	out := make([]byte, len(raw)-iocrypt.IVSize)
	key.StreamAt((*[iocrypt.IVSize]byte)(raw), 0).XORKeyStream(out, raw[iocrypt.IVSize:])
	return out
}

// checkIVs checks that the committed partitions that hold bytes have
// distinct IVs and the others none: an empty partition is 0 bytes, as
// Spark writes it.
func checkIVs(t *testing.T, spec Spec, ops []op) {
	t.Helper()
	mo, err := shufflefile.Open(vfs.Default, spec.Layout, spec.ID, spec.Checksum)
	if err != nil {
		t.Fatal(err)
	}
	defer mo.Close()
	want := expect(ops, spec.NumPartitions)
	seen := map[string]int{}
	for p := range spec.NumPartitions {
		raw, err := mo.ReadPartition(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(want[p]) == 0 {
			if len(raw) != 0 {
				t.Errorf("partition %d is empty but holds %d bytes", p, len(raw))
			}
			continue
		}
		iv := string(raw[:iocrypt.IVSize])
		if q, ok := seen[iv]; ok {
			t.Errorf("partitions %d and %d have the same IV", q, p)
		}
		seen[iv] = p
	}
}

// TestEncryptedRoundTrip writes encrypted map outputs through every path
// of the writer (one run renamed into place; several runs merged while
// written, from memory, from run files, spilled, and merged early after
// MarkLast) with every codec and key size: each non-empty partition
// decrypts from its own IV as one stream into the codec streams written,
// and the checksum file holds the checksums of the encrypted bytes.
func TestEncryptedRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name   string
		limit  int64
		runs   int
		maxLen int
		marked bool
	}{
		{"one run", 8 << 20, 1, 3000, false},
		{"runs in memory", 8 << 20, 4, 3000, false},
		{"runs spill", 1 << 20, 4, 30000, false},
		{"runs in files", 48 << 10, 4, 3000, false},
		{"early merge", 8 << 20, 3, 3000, true},
	} {
		for i, k := range allCodecs {
			keyLen := []int{16, 24, 32}[i%3]
			t.Run(fmt.Sprintf("%s/codec=%v/key=%d", c.name, k, 8*keyLen), func(t *testing.T) {
				raw := make([]byte, keyLen)
				for j := range raw {
					raw[j] = byte(j * 7)
				}
				key, err := iocrypt.NewKey(raw)
				if err != nil {
					t.Fatal(err)
				}
				e := newEngine(t, WithLimit(c.limit), WithRecordSize(4<<10), WithWorkers(2))
				dir := t.TempDir()
				rng := rand.New(rand.NewPCG(uint64(c.runs), uint64(i)))
				const parts = 40
				ops := workload(rng, parts, c.runs, c.maxLen)
				alg := []checksum.Algorithm{checksum.Adler32, checksum.CRC32, checksum.CRC32C, checksum.None}[i]
				spec := Spec{ID: shufflefile.ID{Shuffle: 9, Map: int64(i)}, NumPartitions: parts, Codec: k, Checksum: alg,
					Layout: shufflefile.Flat(dir), Encryption: key}
				var res Result
				if c.marked {
					res, err = writeAllMarked(t, e, spec, ops)
				} else {
					res, err = writeAll(t, e, spec, ops)
				}
				if err != nil {
					t.Fatal(err)
				}
				if res.Runs != runsOf(ops) {
					t.Errorf("Runs = %d, want %d", res.Runs, runsOf(ops))
				}
				if c.marked && !res.EarlyMerge {
					t.Errorf("EarlyMerge = false after MarkLast")
				}
				checkMerged(t, e, spec, dir, ops) // readBack: Verify (checksums of the bytes on disk), decrypt, decode
				checkIVs(t, spec, ops)
				var plain int64
				for _, l := range res.Lengths {
					plain += l
				}
				if fi, err := os.Stat(shufflefile.Path(spec.Layout, shufflefile.DataName(spec.ID))); err != nil || fi.Size() != plain {
					t.Errorf("data file: %v, %v; lengths sum to %d", fi, err, plain)
				}
			})
		}
	}
}

// An unencrypted reader sees no codec stream: the bytes are encrypted.
func TestEncryptedIsNotPlain(t *testing.T) {
	key, _ := iocrypt.NewKey(make([]byte, 16))
	e := newEngine(t)
	dir := t.TempDir()
	spec := Spec{ID: shufflefile.ID{Shuffle: 1, Map: 1}, NumPartitions: 1, Codec: codec.LZ4, Layout: shufflefile.Flat(dir), Encryption: key}
	if _, err := writeAll(t, e, spec, []op{{0, []byte("hello hello hello hello")}}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(shufflefile.Path(spec.Layout, shufflefile.DataName(spec.ID)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := codec.Decode(codec.LZ4, nil, data); err == nil {
		t.Error("the encrypted partition decodes as lz4 without decryption")
	}
	if _, err := codec.Decode(codec.LZ4, nil, decrypt(t, key, 0, data)); err != nil {
		t.Errorf("decrypted partition: %v", err)
	}
}

func TestEncryptionWithSinkRefused(t *testing.T) {
	key, _ := iocrypt.NewKey(make([]byte, 16))
	e := newEngine(t)
	spec := Spec{ID: shufflefile.ID{Shuffle: 1, Map: 1}, NumPartitions: 1, Layout: shufflefile.Flat(t.TempDir()), Encryption: key,
		Sink: func(SinkSpec) (Sink, error) { return nil, nil }}
	if _, err := e.Open(t.Context(), spec); err == nil {
		t.Error("Open with Encryption and a Sink: no error")
	}
}

// An empty write leaves its partition empty: 0 bytes, no IV, whatever
// the codec makes of nothing.
func TestEncryptedEmptyWrites(t *testing.T) {
	for _, k := range allCodecs {
		e := newEngine(t)
		dir := t.TempDir()
		spec := Spec{ID: shufflefile.ID{Shuffle: 2, Map: int64(k)}, NumPartitions: 3, Codec: k, Checksum: checksum.Adler32,
			Layout: shufflefile.Flat(dir), Encryption: testKey}
		ops := []op{{0, []byte("first")}, {1, nil}, {1, []byte{}}, {2, []byte("third")}, {1, nil}}
		res, err := writeAll(t, e, spec, ops)
		if err != nil {
			t.Fatal(err)
		}
		if res.Lengths[1] != 0 || res.Checksums[1] != checksum.Adler32.Empty() {
			t.Errorf("%v: partition of empty writes: %d bytes, checksum %#x; want 0 bytes, %#x", k, res.Lengths[1], res.Checksums[1], checksum.Adler32.Empty())
		}
		checkPartitions(t, readBack(t, vfs.Default, spec), expect(ops, 3))
	}
}
