//go:build cuda

package gpu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
)

// uploadRegion uploads region, freed when the test ends.
func uploadRegion(tb testing.TB, d *Device, region []byte) *Buffer {
	tb.Helper()
	b, err := d.Upload(region)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { b.Free() })
	return b
}

// readHostSync is l.ReadHost of the allocation at src with synchronous
// copies (Device.CopyToHost): what a HostReader must give.
func readHostSync(d *Device, l *Layout, src uintptr) (HostBuffers, int64, error) {
	return l.ReadHost(func(dst []byte, off int64) error {
		return d.CopyToHost(unsafe.Pointer(&dst[0]), src+uintptr(off), int64(len(dst)))
	})
}

// sameHostBuffers reports how got differs from want, column by column
// (nil and empty differ: PlanColumnar tells them apart).
func sameHostBuffers(got, want HostBuffers) error {
	if len(got.Offsets) != len(want.Offsets) || len(got.Validity) != len(want.Validity) {
		return fmt.Errorf("%d offsets and %d bitmaps, want %d and %d", len(got.Offsets), len(got.Validity), len(want.Offsets), len(want.Validity))
	}
	for i := range want.Offsets {
		if (got.Offsets[i] == nil) != (want.Offsets[i] == nil) || !slices.Equal(got.Offsets[i], want.Offsets[i]) {
			return fmt.Errorf("column %d offsets: %d read, want %d (%s)", i, len(got.Offsets[i]), len(want.Offsets[i]), firstDiff32(got.Offsets[i], want.Offsets[i]))
		}
		if (got.Validity[i] == nil) != (want.Validity[i] == nil) || !bytes.Equal(got.Validity[i], want.Validity[i]) {
			return fmt.Errorf("column %d validity: %x, want %x", i, got.Validity[i], want.Validity[i])
		}
	}
	return nil
}

func firstDiff32(a, b []int32) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("[%d] = %d, want %d", i, a[i], b[i])
		}
	}
	return "nil or lengths differ"
}

// checkRead reads tb's layout from its region on the device with r and
// checks the copies, the byte count and the error against ReadHost with
// synchronous copies and against the host's own copies of the region.
func checkRead(t *testing.T, name string, d *Device, r *HostReader, tb *testBatch) {
	t.Helper()
	buf := uploadRegion(t, d, tb.region)
	want, wantN, wantErr := readHostSync(d, &tb.l, buf.Ptr())
	if wantErr != nil {
		t.Fatalf("%s: ReadHost: %v", name, wantErr)
	}
	if err := sameHostBuffers(want, tb.host); err != nil {
		t.Fatalf("%s: ReadHost of the device's copy against the region's: %v", name, err)
	}
	got, n, err := r.Read(&tb.l, buf.Ptr())
	if err != nil || n != wantN {
		t.Fatalf("%s: Read = %d bytes, %v; want %d", name, n, err, wantN)
	}
	if err := sameHostBuffers(got, want); err != nil {
		t.Errorf("%s: Read: %v", name, err)
	}
}

// A HostReader gives exactly what ReadHost gives with synchronous copies,
// for flat string columns, lists of strings and lists three deep, void
// columns, zero rows; again when reused for a batch larger than its
// pinned memory, and for a smaller one after.
func TestHostReaderMatchesReadHost(t *testing.T) {
	d := device(t)
	r, err := d.NewHostReader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	voids := func(rows int) *testBatch {
		fields, err := partition.ParseSchema("k bigint, n void, e array<string>, s struct<v:void,l:array<string>>")
		if err != nil {
			t.Fatal(err)
		}
		raw := &partition.Batch{Rows: rows}
		for i, f := range fields {
			raw.Columns = append(raw.Columns, synth.Column(f, int64(i), rows, 0.3))
		}
		return partitionedTestBatch(t, raw, 5)
	}
	for _, tc := range []struct {
		name string
		tb   func() *testBatch
	}{
		{"strings", func() *testBatch { return newTestBatch(t, "strings", 3000, 9, 0.2) }},
		{"lineitem", func() *testBatch { return newTestBatch(t, "lineitem", 2000, 9, 0) }},
		{"nested", func() *testBatch { return newNestedTestBatch(t, 1500, 7, 0.3, 4) }},
		{"voids and lists of strings", func() *testBatch { return voids(700) }},
		{"strings, no rows", func() *testBatch { return newTestBatch(t, "strings", 0, 3, 0) }},
		{"nested, no rows", func() *testBatch { return newNestedTestBatch(t, 0, 3, 0, 1) }},
		// 100,000 rows: megabytes of offsets, past the reader's first
		// pinned memory; the batches after reuse what it grew to.
		{"strings, large", func() *testBatch { return newTestBatch(t, "strings", 100_000, 16, 0.1) }},
		{"nested, large", func() *testBatch { return newNestedTestBatch(t, 20_000, 16, 0.2, 8) }},
		{"strings again", func() *testBatch { return newTestBatch(t, "strings", 3000, 9, 0.2) }},
		{"nested again", func() *testBatch { return newNestedTestBatch(t, 1500, 7, 0.3, 4) }},
	} {
		checkRead(t, tc.name, d, r, tc.tb())
	}
}

// A batch whose last offset is negative is refused by Read as by
// ReadHost, with ErrInvalid, at the top and below a list; the reader
// still reads the next batch right.
func TestHostReaderRefuses(t *testing.T) {
	d := device(t)
	r, err := d.NewHostReader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, depth := range []string{"top", "below a list"} {
		tb := newNestedTestBatch(t, 400, 3, 0.2, 6)
		col := -1
		for i, c := range tb.l.Columns {
			// The top-level list of strings (e), or the strings of it.
			if depth == "top" && c.Type == partition.List && i+1 < len(tb.l.Columns) && tb.l.Columns[i+1].Type == partition.String ||
				depth != "top" && c.Type == partition.String && i > 0 && tb.l.Columns[i-1].Type == partition.List {
				col = i
				break
			}
		}
		if col < 0 {
			t.Fatalf("%s: no column to break", depth)
		}
		c := tb.l.Columns[col]
		rows := len(tb.host.Offsets[col]) - 1
		region := append([]byte(nil), tb.region...)
		minus1 := int32(-1)
		binary.LittleEndian.PutUint32(region[c.Offsets.Offset+4*int64(rows):], uint32(minus1))
		buf := uploadRegion(t, d, region)
		if _, _, err := readHostSync(d, &tb.l, buf.Ptr()); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%s: ReadHost of column %d's offsets ending at -1: %v, want ErrInvalid", depth, col, err)
		}
		if h, n, err := r.Read(&tb.l, buf.Ptr()); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Read of column %d's offsets ending at -1 = %d bytes, %v; want ErrInvalid", depth, col, n, err)
		} else if h.Offsets != nil || n != 0 {
			t.Errorf("%s: Read refused with %d bytes and copies", depth, n)
		}
		checkRead(t, depth+", then a good batch", d, r, newNestedTestBatch(t, 400, 3, 0.2, 6))
	}
}

// Readers of one device read at once from several goroutines, each its
// own batch, right.
func TestHostReaderConcurrent(t *testing.T) {
	d := device(t)
	const readers = 8
	batches := make([]*testBatch, readers)
	bufs := make([]*Buffer, readers)
	for i := range batches {
		if i%2 == 0 {
			batches[i] = newTestBatch(t, "strings", 20_000+1000*i, 9, 0.1)
		} else {
			batches[i] = newNestedTestBatch(t, 3000+100*i, 7, 0.2, int64(i))
		}
		bufs[i] = uploadRegion(t, d, batches[i].region)
	}
	var wg sync.WaitGroup
	errs := make([]error, readers)
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := d.NewHostReader()
			if err != nil {
				errs[i] = err
				return
			}
			defer r.Close()
			for range 20 {
				got, _, err := r.Read(&batches[i].l, bufs[i].Ptr())
				if err != nil {
					errs[i] = err
					return
				}
				if err := sameHostBuffers(got, batches[i].host); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("reader %d: %v", i, err)
		}
	}
}
