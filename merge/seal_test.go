package merge

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/iocrypt"
	"github.com/shuffled/shuffled/vfs"
)

// encryptedRuns makes k runs of n partitions: run 0 encrypted as the
// writer's first run is (IV || ciphertext per non-empty partition, the
// checksum over both), the others plain. It returns them, the IV table
// and each partition's plaintext.
func encryptedRuns(t *testing.T, dir, where string, key *iocrypt.Key, k, n, maxSeg int, alg checksum.Algorithm, seed uint64) ([]Run, []byte, [][]byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 2))
	ivs := make([]byte, iocrypt.IVSize*n)
	plain := make([][]byte, n)
	runs := make([]Run, k)
	for r := range runs {
		var buf bytes.Buffer
		run := Run{Lengths: make([]int64, n)}
		if alg != checksum.None {
			run.Checksums = make([]uint32, n)
		}
		for p := range n {
			size := rng.IntN(maxSeg + 1)
			if rng.IntN(3) == 0 {
				size = 0
			}
			seg := make([]byte, size)
			for i := range seg {
				seg[i] = byte(rng.Uint32())
			}
			plain[p] = append(plain[p], seg...)
			if r == 0 && size > 0 {
				iv := (*[iocrypt.IVSize]byte)(ivs[p*iocrypt.IVSize:])
				iocrypt.NewIV(iv)
				ct := make([]byte, size)
				key.StreamAt(iv, 0).XORKeyStream(ct, seg)
				seg = append(append([]byte(nil), iv[:]...), ct...)
			}
			buf.Write(seg)
			run.Lengths[p] = int64(len(seg))
			if alg != checksum.None {
				run.Checksums[p] = alg.Update(alg.Empty(), seg)
			}
		}
		b := buf.Bytes()
		switch mode := where; {
		case mode == inMemory || mode == mixed && r%2 == 1:
			for rest := b; len(rest) > 0; {
				c := min(len(rest), 1+rng.IntN(3*maxSeg+1))
				run.Data = append(run.Data, rest[:c])
				rest = rest[c:]
			}
			if run.Data == nil {
				run.Data = [][]byte{}
			}
		case mode == prefixed && len(b) > 0:
			run.Prefix = 1 + rng.Int64N(int64(len(b)))
			run.File = writeRunFile(t, dir, r, b[:run.Prefix])
			if rest := b[run.Prefix:]; len(rest) > 0 {
				run.Data = [][]byte{rest}
			} else {
				run.Data = [][]byte{}
			}
		default:
			run.File = writeRunFile(t, dir, r, b)
		}
		runs[r] = run
	}
	return runs, ivs, plain
}

// MergeEncrypted writes what Spark's reader decrypts: per non-empty
// partition one IV and the AES-CTR stream of every run's bytes, its
// length and checksum those of the bytes on disk; an empty partition
// stays empty.
func TestMergeEncrypted(t *testing.T) {
	key, err := iocrypt.NewKey([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	for _, where := range []string{inFiles, inMemory, mixed, prefixed} {
		for _, tc := range []struct{ runs, partitions, maxSeg int }{
			{2, 1, 100}, {3, 17, 50}, {2, 5, 3 * CopyBytes}, {5, 40, 2000},
		} {
			for _, alg := range []checksum.Algorithm{checksum.None, checksum.Adler32, checksum.CRC32C} {
				name := fmt.Sprintf("in=%s/runs=%d/partitions=%d/maxseg=%d/%v", where, tc.runs, tc.partitions, tc.maxSeg, alg)
				t.Run(name, func(t *testing.T) {
					dir := t.TempDir()
					runs, ivs, plain := encryptedRuns(t, dir, where, key, tc.runs, tc.partitions, tc.maxSeg, alg, uint64(tc.runs*tc.partitions+tc.maxSeg))
					path := filepath.Join(dir, "data")
					dst, err := vfs.Default.Create(path, 0o600)
					if err != nil {
						t.Fatal(err)
					}
					res, err := MergeEncrypted(dst, runs, tc.partitions, alg, Encryption{Key: key, IVs: ivs})
					dst.Close()
					if err != nil {
						t.Fatalf("MergeEncrypted: %v", err)
					}
					data, err := os.ReadFile(path)
					if err != nil {
						t.Fatal(err)
					}
					if int64(len(data)) != res.Bytes {
						t.Fatalf("data file has %d bytes, Result.Bytes = %d", len(data), res.Bytes)
					}
					off := int64(0)
					for p := range tc.partitions {
						n := res.Lengths[p]
						part := data[off : off+n]
						off += n
						if len(plain[p]) == 0 {
							if n != 0 {
								t.Fatalf("partition %d: empty, merged into %d bytes", p, n)
							}
						} else {
							if n != int64(iocrypt.IVSize+len(plain[p])) {
								t.Fatalf("partition %d: %d bytes, want IV + %d", p, n, len(plain[p]))
							}
							got := make([]byte, n-iocrypt.IVSize)
							key.StreamAt((*[iocrypt.IVSize]byte)(part), 0).XORKeyStream(got, part[iocrypt.IVSize:])
							if !bytes.Equal(got, plain[p]) {
								t.Fatalf("partition %d does not decrypt to its runs' bytes", p)
							}
						}
						if alg != checksum.None {
							if want := alg.Update(alg.Empty(), part); res.Checksums[p] != want {
								t.Fatalf("partition %d: checksum %#x, want %#x (of the bytes on disk)", p, res.Checksums[p], want)
							}
						}
					}
					if off != int64(len(data)) {
						t.Fatalf("lengths sum to %d, data file has %d", off, len(data))
					}
				})
			}
		}
	}
}

func TestMergeEncryptedRefuses(t *testing.T) {
	key, _ := iocrypt.NewKey(make([]byte, 16))
	if _, err := MergeEncrypted(nil, nil, 3, checksum.None, Encryption{Key: key, IVs: make([]byte, 47)}); err == nil {
		t.Error("MergeEncrypted with 47 IV bytes for 3 partitions: no error")
	}
	if _, err := MergeEncrypted(nil, nil, 3, checksum.None, Encryption{IVs: make([]byte, 48)}); err == nil {
		t.Error("MergeEncrypted without a key: no error")
	}
}
