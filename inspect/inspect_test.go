package inspect

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/writer"
)

// TestSummary writes two lineitem batches (two runs, merged) with every
// codec and checks every figure against what the writer committed.
func TestSummary(t *testing.T) {
	tests := []struct {
		k   codec.Kind
		alg checksum.Algorithm
	}{
		{codec.LZ4, checksum.Adler32},
		{codec.Zstd, checksum.CRC32},
		{codec.Snappy, checksum.CRC32C},
		{codec.None, checksum.Adler32},
	}
	for _, tt := range tests {
		t.Run(tt.k.String(), func(t *testing.T) {
			o := writeLineitem(t, shufflefile.Flat(t.TempDir()), tt.k, tt.alg)
			s, err := Inspect(context.Background(), o.src)
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if err := s.Err(); err != nil {
				t.Errorf("Err() = %v, want nil", err)
			}
			if s.Codec != tt.k || !s.CodecDetected {
				t.Errorf("Codec = %v (detected %v), want %v detected", s.Codec, s.CodecDetected, tt.k)
			}
			if s.Checksum != tt.alg || !s.ChecksumDetected {
				t.Errorf("Checksum = %v (detected %v), want %v detected", s.Checksum, s.ChecksumDetected, tt.alg)
			}
			if s.Payload != Columnar || !s.PayloadDetected {
				t.Errorf("Payload = %v (detected %v), want columnar detected", s.Payload, s.PayloadDetected)
			}
			n := len(o.res.Lengths)
			if s.NumPartitions != n || len(s.Partitions) != n {
				t.Fatalf("NumPartitions = %d with %d inspected, want %d", s.NumPartitions, len(s.Partitions), n)
			}
			out, err := shufflefile.Open(vfs.Default, o.src.Layout, testID, tt.alg)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			var bytesTotal, rawTotal int64
			nonEmpty := 0
			for p := range n {
				got := s.Partitions[p]
				if got.Partition != p || got.Offset != out.Offsets[p] {
					t.Errorf("partition %d: Partition %d at offset %d, want %d at %d", p, got.Partition, got.Offset, p, out.Offsets[p])
				}
				if got.Bytes != o.res.Lengths[p] {
					t.Errorf("partition %d: Bytes = %d, want committed length %d", p, got.Bytes, o.res.Lengths[p])
				}
				if got.Rows != o.counts[p] {
					t.Errorf("partition %d: Rows = %d, want %d", p, got.Rows, o.counts[p])
				}
				if got.Stored != o.res.Checksums[p] || got.Computed != o.res.Checksums[p] {
					t.Errorf("partition %d: checksums stored %#x computed %#x, want %#x", p, got.Stored, got.Computed, o.res.Checksums[p])
				}
				data, err := out.ReadPartition(p)
				if err != nil {
					t.Fatal(err)
				}
				raw, err := codec.Decode(tt.k, nil, data)
				if err != nil {
					t.Fatal(err)
				}
				if got.RawBytes != int64(len(raw)) {
					t.Errorf("partition %d: RawBytes = %d, want %d", p, got.RawBytes, len(raw))
				}
				if (got.Blocks > 0) != (got.Rows > 0) || !got.OK() || got.Status() != "ok" {
					t.Errorf("partition %d: %d blocks, %d rows, status %s, err %v", p, got.Blocks, got.Rows, got.Status(), got.Err)
				}
				bytesTotal += got.Bytes
				rawTotal += got.RawBytes
				if got.Bytes > 0 {
					nonEmpty++
				}
			}
			if s.Rows != o.total || s.Bytes != bytesTotal || s.Bytes != out.Size() || s.RawBytes != rawTotal || s.NonEmpty != nonEmpty {
				t.Errorf("totals: rows %d bytes %d raw %d non-empty %d, want %d %d %d %d",
					s.Rows, s.Bytes, s.RawBytes, s.NonEmpty, o.total, out.Size(), rawTotal, nonEmpty)
			}
			var text bytes.Buffer
			if err := s.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{
				fmt.Sprintf("%d partitions (%d non-empty), %d bytes", n, nonEmpty, s.Bytes),
				fmt.Sprintf("%d rows in", o.total),
				fmt.Sprintf("codec %v (detected), checksum %v (detected), payload columnar (detected): verified OK", tt.k, tt.alg),
			} {
				if !strings.Contains(text.String(), want) {
					t.Errorf("WriteText lacks %q:\n%s", want, text.String())
				}
			}
			if lines := strings.Count(text.String(), "\n"); lines != n+3 {
				t.Errorf("WriteText wrote %d lines, want %d (header, partitions, 2 summary lines)", lines, n+3)
			}
		})
	}
}

// TestOnePartition inspects one partition alone, and refuses one out of
// range.
func TestOnePartition(t *testing.T) {
	o := writeLineitem(t, shufflefile.Flat(t.TempDir()), codec.LZ4, checksum.Adler32)
	p := largestPartition(o.res.Lengths)
	s, err := Inspect(context.Background(), o.src, WithPartition(p))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Partitions) != 1 || s.Partitions[0].Partition != p || s.Rows != o.counts[p] || s.Bytes != o.res.Lengths[p] {
		t.Errorf("WithPartition(%d): %d partitions, rows %d, bytes %d; want 1, %d, %d",
			p, len(s.Partitions), s.Rows, s.Bytes, o.counts[p], o.res.Lengths[p])
	}
	n := len(o.res.Lengths)
	if _, err := Inspect(context.Background(), o.src, WithPartition(n)); !errors.Is(err, ErrInvalid) {
		t.Errorf("WithPartition(%d) of %d partitions: err = %v, want ErrInvalid", n, n, err)
	}
}

// TestCorruptByte flips one byte of the largest partition: the checksum
// flags it and the error names it; without a checksum the codec's own
// check does.
func TestCorruptByte(t *testing.T) {
	o := writeLineitem(t, shufflefile.Flat(t.TempDir()), codec.LZ4, checksum.Adler32)
	bad := largestPartition(o.res.Lengths)
	var off int64
	for _, n := range o.res.Lengths[:bad] {
		off += n
	}
	flipByte(t, shufflefile.Path(o.src.Layout, shufflefile.DataName(testID)), off+o.res.Lengths[bad]/2)

	s, err := Inspect(context.Background(), o.src)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	verr := s.Err()
	if !errors.Is(verr, ErrChecksumMismatch) || !strings.Contains(verr.Error(), fmt.Sprintf("partition %d ", bad)) {
		t.Errorf("Err() = %v, want ErrChecksumMismatch naming partition %d", verr, bad)
	}
	if s.Mismatches != 1 {
		t.Errorf("Mismatches = %d, want 1", s.Mismatches)
	}
	for _, p := range s.Partitions {
		if wantOK := p.Partition != bad; p.OK() != wantOK {
			t.Errorf("partition %d: OK() = %v (status %s), want %v", p.Partition, p.OK(), p.Status(), wantOK)
		}
	}
	if got := s.Partitions[bad]; got.Computed == got.Stored || got.Stored != o.res.Checksums[bad] {
		t.Errorf("partition %d: stored %#x computed %#x, want stored %#x and a different computed one", bad, got.Stored, got.Computed, o.res.Checksums[bad])
	}
	var text bytes.Buffer
	if err := s.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if want := "1 checksum mismatch"; !strings.Contains(text.String(), want) {
		t.Errorf("WriteText lacks %q:\n%s", want, text.String())
	}

	s, err = Inspect(context.Background(), o.src, WithChecksum(checksum.None))
	if err != nil {
		t.Fatalf("Inspect without checksum: %v", err)
	}
	verr = s.Err()
	if !errors.Is(verr, ErrCorrupt) || errors.Is(verr, ErrChecksumMismatch) || !strings.Contains(verr.Error(), fmt.Sprintf("partition %d ", bad)) {
		t.Errorf("without checksum: Err() = %v, want ErrCorrupt alone naming partition %d", verr, bad)
	}
	if s.Corrupt != 1 || !errors.Is(s.Partitions[bad].Err, codec.ErrCorrupt) {
		t.Errorf("without checksum: Corrupt = %d, partition %d Err = %v; want 1 and a codec.ErrCorrupt", s.Corrupt, bad, s.Partitions[bad].Err)
	}
}

// TestWrongOptions reads partitions with a codec or payload they were not
// written with: each non-empty partition is corrupt, none goes unnoticed.
func TestWrongOptions(t *testing.T) {
	o := writeLineitem(t, shufflefile.Flat(t.TempDir()), codec.LZ4, checksum.CRC32)
	nonEmpty := 0
	for _, n := range o.res.Lengths {
		if n > 0 {
			nonEmpty++
		}
	}
	tests := []struct {
		name string
		opts []Option
	}{
		{"zstd", []Option{WithCodec(codec.Zstd)}},
		{"none", []Option{WithCodec(codec.None), WithPayload(Columnar)}}, // lz4 bytes are no blocks
	}
	for _, tt := range tests {
		s, err := Inspect(context.Background(), o.src, tt.opts...)
		if err != nil {
			t.Fatalf("%s: Inspect: %v", tt.name, err)
		}
		if s.Corrupt != nonEmpty || s.Mismatches != 0 || !errors.Is(s.Err(), ErrCorrupt) {
			t.Errorf("%s: Corrupt = %d, Mismatches = %d, Err() = %v; want %d, 0, ErrCorrupt", tt.name, s.Corrupt, s.Mismatches, s.Err(), nonEmpty)
		}
	}
}

// TestBrokenFiles checks the errors for an index that is cut short,
// missing or inconsistent, and for missing data.
func TestBrokenFiles(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(t *testing.T, index, data string)
		want   error
		names  string // the file the message must name
	}{
		{"index cut mid-offset", func(t *testing.T, index, _ string) { truncate(t, index, -3) }, shufflefile.ErrCorrupt, ".index"},
		{"index lacks the last offset", func(t *testing.T, index, _ string) { truncate(t, index, -8) }, shufflefile.ErrCorrupt, ".index"},
		{"index empty", func(t *testing.T, index, _ string) { truncate(t, index, -1<<20) }, shufflefile.ErrCorrupt, ".index"},
		{"index missing", func(t *testing.T, index, _ string) { remove(t, index) }, fs.ErrNotExist, ".index"},
		{"data cut", func(t *testing.T, _, data string) { truncate(t, data, -1) }, shufflefile.ErrCorrupt, ".data"},
		{"data missing", func(t *testing.T, _, data string) { remove(t, data) }, shufflefile.ErrCorrupt, ".data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := writeBatches(t, shufflefile.Flat(t.TempDir()), codec.LZ4, checksum.Adler32, 3, everyType())
			index := shufflefile.Path(o.src.Layout, shufflefile.IndexName(testID))
			data := shufflefile.Path(o.src.Layout, shufflefile.DataName(testID))
			tt.break_(t, index, data)
			s, err := Inspect(context.Background(), o.src)
			if !errors.Is(err, tt.want) || !strings.Contains(fmt.Sprint(err), tt.names) {
				t.Errorf("Inspect = %v, %v; want an error wrapping %v that names the %s file", s, err, tt.want, tt.names)
			}
		})
	}
}

// truncate shortens the file at path by -delta bytes (to 0 at least).
func truncate(t *testing.T, path string, delta int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, max(0, fi.Size()+delta)); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// TestHashedLayout reads an output that Spark's hashed layout spreads over
// two local dirs, then one found from a path in a single local dir.
func TestHashedLayout(t *testing.T) {
	root := t.TempDir()
	h := shufflefile.SparkHashed{LocalDirs: []string{filepath.Join(root, "a"), filepath.Join(root, "b")}, SubDirs: 4}
	o := writeLineitem(t, h, codec.Zstd, checksum.CRC32C)
	s, err := Inspect(context.Background(), o.src)
	if err != nil {
		t.Fatal(err)
	}
	if s.Err() != nil || s.Rows != o.total || s.Checksum != checksum.CRC32C || s.IndexPath != shufflefile.Path(h, shufflefile.IndexName(testID)) {
		t.Errorf("hashed: Err() %v, rows %d, checksum %v, index %s; want nil, %d, CRC32C, %s",
			s.Err(), s.Rows, s.Checksum, s.IndexPath, o.total, shufflefile.Path(h, shufflefile.IndexName(testID)))
	}

	one := shufflefile.SparkHashed{LocalDirs: []string{filepath.Join(root, "c")}, SubDirs: shufflefile.DefaultSubDirs}
	o = writeLineitem(t, one, codec.LZ4, checksum.Adler32)
	for _, name := range []string{shufflefile.IndexName(testID), shufflefile.DataName(testID), shufflefile.ChecksumName(testID, checksum.Adler32)} {
		path := shufflefile.Path(one, name)
		src, err := SourceFromPath(vfs.Default, path)
		if err != nil {
			t.Fatalf("SourceFromPath(%q): %v", path, err)
		}
		if got, ok := src.Layout.(shufflefile.SparkHashed); !ok || src.ID != testID || got.LocalDirs[0] != one.LocalDirs[0] || got.SubDirs != one.SubDirs {
			t.Errorf("SourceFromPath(%q) = %+v, want %+v in %+v", path, src, testID, one)
		}
		s, err := Inspect(context.Background(), src)
		if err != nil || s.Err() != nil || s.Checksum != checksum.Adler32 || s.Rows != o.total {
			t.Errorf("Inspect(SourceFromPath(%q)): err %v, Err() %v, checksum %v, rows %d", path, err, s.Err(), s.Checksum, s.Rows)
		}
	}
}

// TestSourceFromPath finds a flat output from each of its files, and
// refuses paths that name no map output.
func TestSourceFromPath(t *testing.T) {
	dir := t.TempDir()
	writeBatches(t, shufflefile.Flat(dir), codec.LZ4, checksum.CRC32, 3, everyType())
	for _, name := range []string{shufflefile.IndexName(testID), shufflefile.DataName(testID), shufflefile.ChecksumName(testID, checksum.CRC32)} {
		path := filepath.Join(dir, name)
		src, err := SourceFromPath(vfs.Default, path)
		if err != nil || src.Layout != shufflefile.Flat(dir) || src.ID != testID {
			t.Errorf("SourceFromPath(%q) = %+v, %v; want %v in %s", path, src, err, testID, dir)
		}
	}
	tests := []struct {
		path string
		want error
	}{
		{filepath.Join(dir, "shuffle_3_18_0.index"), fs.ErrNotExist},
		{filepath.Join(dir, "notes.txt"), ErrInvalid},
	}
	for _, tt := range tests {
		if _, err := SourceFromPath(vfs.Default, tt.path); !errors.Is(err, tt.want) {
			t.Errorf("SourceFromPath(%q) = %v, want %v", tt.path, err, tt.want)
		}
	}
	// Data without its index: not committed.
	other := shufflefile.ID{Shuffle: 3, Map: 99}
	if err := os.WriteFile(filepath.Join(dir, shufflefile.DataName(other)), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := SourceFromPath(vfs.Default, filepath.Join(dir, shufflefile.DataName(other))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("SourceFromPath of data without index = %v, want fs.ErrNotExist", err)
	}
}

func TestParseName(t *testing.T) {
	tests := []struct {
		name string
		want shufflefile.ID
		ok   bool
	}{
		{"shuffle_3_17_0.index", shufflefile.ID{Shuffle: 3, Map: 17}, true},
		{"/x/y/shuffle_0_0_0.data", shufflefile.ID{}, true},
		{"shuffle_2147483647_9223372036854775807_0.checksum.ADLER32", shufflefile.ID{Shuffle: 1<<31 - 1, Map: 1<<63 - 1}, true},
		{"shuffle_2147483648_1_0.data", shufflefile.ID{}, false},
		{"shuffle_1_2_0.data.1234abcd.shuffled-tmp", shufflefile.ID{}, false},
		{"shuffle_1_2_1.data", shufflefile.ID{}, false},
		{"shuffle_01_2_0.data", shufflefile.ID{}, false},
		{"shuffle_+1_2_0.data", shufflefile.ID{}, false},
		{"shuffle_-1_2_0.data", shufflefile.ID{}, false},
		{"shuffle_1_2_0", shufflefile.ID{}, false},
		{"shuffle_1__0.index", shufflefile.ID{}, false},
		{"shuffle_1_2_0.idx", shufflefile.ID{}, false},
		{"rdd_1_2.data", shufflefile.ID{}, false},
	}
	for _, tt := range tests {
		got, err := ParseName(tt.name)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("ParseName(%q) = %v, %v; want %v, ok %v", tt.name, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseName(%q) error %v does not wrap ErrInvalid", tt.name, err)
		}
	}
}

// TestChecksumDetection checks which checksum file Inspect picks: the only
// one, ADLER32 among several, none at all.
func TestChecksumDetection(t *testing.T) {
	dir := t.TempDir()
	o := writeLineitem(t, shufflefile.Flat(dir), codec.LZ4, checksum.CRC32C)
	check := func(want checksum.Algorithm, verdict string) {
		t.Helper()
		s, err := Inspect(context.Background(), o.src)
		if err != nil {
			t.Fatal(err)
		}
		if s.Checksum != want || s.Err() != nil || s.Verdict() != verdict {
			t.Errorf("Checksum = %v, Err() = %v, Verdict() = %q; want %v, nil, %q", s.Checksum, s.Err(), s.Verdict(), want, verdict)
		}
	}
	check(checksum.CRC32C, "verified OK")

	// Add an ADLER32 file: Adler32 wins, and must be right.
	out, err := shufflefile.Open(vfs.Default, o.src.Layout, testID, checksum.None)
	if err != nil {
		t.Fatal(err)
	}
	sums := make([]uint32, out.NumPartitions())
	for p := range sums {
		b, err := out.ReadPartition(p)
		if err != nil {
			t.Fatal(err)
		}
		sums[p] = checksum.Adler32.Update(checksum.Adler32.Empty(), b)
	}
	out.Close()
	adler := filepath.Join(dir, shufflefile.ChecksumName(testID, checksum.Adler32))
	if err := os.WriteFile(adler, shufflefile.AppendChecksums(nil, sums), 0o644); err != nil {
		t.Fatal(err)
	}
	check(checksum.Adler32, "verified OK")

	remove(t, adler)
	remove(t, filepath.Join(dir, shufflefile.ChecksumName(testID, checksum.CRC32C)))
	check(checksum.None, "decoded OK (no checksum file)")
}

// TestOpaque reads opaque partitions: payload detected, raw lengths, and
// a preview row per non-empty partition.
func TestOpaque(t *testing.T) {
	parts := [][]byte{
		[]byte("hello, opaque world\n"),
		nil,
		bytes.Repeat([]byte{0, 1, 2, 0xff}, 20000),
		[]byte("SH"), // shorter than a block magic
		[]byte("\"quoted\"\ttab"),
	}
	var data []byte
	offsets := []int64{0}
	for _, p := range parts {
		data = append(data, p...)
		offsets = append(offsets, int64(len(data)))
	}
	for _, k := range []codec.Kind{codec.Snappy, codec.None} {
		t.Run(k.String(), func(t *testing.T) {
			ctx := context.Background()
			l := shufflefile.Flat(t.TempDir())
			w, err := newEngine(t).Open(ctx, writer.Spec{ID: testID, NumPartitions: len(parts), Codec: k, Checksum: checksum.CRC32, Layout: l})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.WriteOpaque(ctx, data, offsets, nil); err != nil {
				t.Fatal(err)
			}
			res, err := w.Commit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			const preview = 8
			var rows bytes.Buffer
			s, err := Inspect(ctx, Source{Layout: l, ID: testID}, WithRows(JSON, &rows), WithPreviewBytes(preview))
			if err != nil {
				t.Fatal(err)
			}
			if s.Payload != Opaque || s.Codec != k || s.Err() != nil {
				t.Errorf("payload %v codec %v Err() %v, want opaque %v nil", s.Payload, s.Codec, s.Err(), k)
			}
			for p, want := range parts {
				if got := s.Partitions[p]; got.RawBytes != int64(len(want)) || got.Bytes != res.Lengths[p] || got.Rows != 0 {
					t.Errorf("partition %d: raw %d bytes %d rows %d, want %d %d 0", p, got.RawBytes, got.Bytes, got.Rows, len(want), res.Lengths[p])
				}
			}
			type row struct {
				Partition int    `json:"_partition"`
				RawBytes  int64  `json:"raw_bytes"`
				Hex       string `json:"hex"`
				Text      string `json:"text"`
			}
			dec := json.NewDecoder(&rows)
			for p, want := range parts {
				if len(want) == 0 {
					continue
				}
				var r row
				if err := dec.Decode(&r); err != nil {
					t.Fatalf("row of partition %d: %v", p, err)
				}
				head := want[:min(len(want), preview)]
				wantRow := row{p, int64(len(want)), hex.EncodeToString(head), escapedText(head)}
				if r != wantRow {
					t.Errorf("row = %+v, want %+v", r, wantRow)
				}
			}
			if dec.More() {
				t.Errorf("more rows than non-empty partitions")
			}

			// Read as columnar, the partitions are no blocks.
			s, err = Inspect(ctx, Source{Layout: l, ID: testID}, WithPayload(Columnar))
			if err != nil {
				t.Fatal(err)
			}
			if s.Corrupt != 4 || !errors.Is(s.Partitions[0].Err, partition.ErrCorruptBlock) {
				t.Errorf("as columnar: Corrupt = %d, partition 0 Err %v; want 4 corrupt block errors", s.Corrupt, s.Partitions[0].Err)
			}
		})
	}
}

// TestEmptyOutput inspects an output whose partitions are all empty.
func TestEmptyOutput(t *testing.T) {
	ctx := context.Background()
	l := shufflefile.Flat(t.TempDir())
	w, err := newEngine(t).Open(ctx, writer.Spec{ID: testID, NumPartitions: 4, Codec: codec.Zstd, Checksum: checksum.Adler32, Layout: l})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := Inspect(ctx, Source{Layout: l, ID: testID})
	if err != nil {
		t.Fatal(err)
	}
	if s.NumPartitions != 4 || s.NonEmpty != 0 || s.Bytes != 0 || s.Err() != nil || s.Partitions[0].Stored != 1 {
		t.Errorf("empty output: %d partitions, %d non-empty, %d bytes, Err() %v, stored checksum %d; want 4, 0, 0, nil, 1",
			s.NumPartitions, s.NonEmpty, s.Bytes, s.Err(), s.Partitions[0].Stored)
	}
}

// TestCancel stops at a cancelled context.
func TestCancel(t *testing.T) {
	o := writeLineitem(t, shufflefile.Flat(t.TempDir()), codec.LZ4, checksum.Adler32)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Inspect(ctx, o.src); !errors.Is(err, context.Canceled) {
		t.Errorf("Inspect(cancelled) = %v, want context.Canceled", err)
	}
}

func TestOptionsInvalid(t *testing.T) {
	tests := []struct {
		name string
		opt  Option
	}{
		{"codec", WithCodec(codec.Kind(9))},
		{"checksum", WithChecksum(checksum.Algorithm(9))},
		{"payload", WithPayload(Payload(9))},
		{"partition", WithPartition(-1)},
		{"rows", WithRows(CSV, nil)},
		{"format", WithRows(RowFormat(9), &bytes.Buffer{})},
		{"preview", WithPreviewBytes(0)},
		{"fs", WithFS(nil)},
	}
	src := Source{Layout: shufflefile.Flat(t.TempDir()), ID: testID}
	for _, tt := range tests {
		if _, err := Inspect(context.Background(), src, tt.opt); !errors.Is(err, ErrInvalid) {
			t.Errorf("Inspect with a bad %s option = %v, want ErrInvalid", tt.name, err)
		}
	}
	if _, err := Inspect(context.Background(), Source{ID: testID}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Inspect without a layout = %v, want ErrInvalid", err)
	}
}

func TestParse(t *testing.T) {
	for _, s := range []string{"auto", "columnar", "opaque"} {
		if p, err := ParsePayload(s); err != nil || p.String() != s {
			t.Errorf("ParsePayload(%q) = %v, %v; want %s", s, p, err, s)
		}
	}
	for _, s := range []string{"none", "csv", "json"} {
		if f, err := ParseRowFormat(s); err != nil || f.String() != s {
			t.Errorf("ParseRowFormat(%q) = %v, %v; want %s", s, f, err, s)
		}
	}
	if _, err := ParsePayload("rows"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParsePayload(%q) = %v, want ErrInvalid", "rows", err)
	}
	if _, err := ParseRowFormat("xml"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseRowFormat(%q) = %v, want ErrInvalid", "xml", err)
	}
}
