package codec

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

var benchSizes = []struct {
	name string
	n    int
}{
	{"64KiB", 64 << 10},
	{"1MiB", 1 << 20},
}

// BenchmarkEncode measures one-shot encoding of text-like data with a pooled
// encoder into a reused buffer, as the writer does per record.
func BenchmarkEncode(b *testing.B) {
	for _, k := range allKinds {
		for _, s := range benchSizes {
			b.Run(fmt.Sprintf("codec=%v/size=%s", k, s.name), func(b *testing.B) {
				data := textData(s.n, 1)
				p, err := NewPool(k)
				if err != nil {
					b.Fatal(err)
				}
				dst := make([]byte, 0, p.MaxEncodedLen(len(data)))
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				for b.Loop() {
					e := p.Get()
					dst = e.Encode(dst[:0], data)
					p.Put(e)
				}
				b.ReportMetric(float64(len(data))/float64(len(dst)), "ratio")
			})
		}
	}
}

// BenchmarkEncodeStream measures streaming encoding in 4 KiB writes, as a
// serializer that writes a record piece by piece does.
func BenchmarkEncodeStream(b *testing.B) {
	for _, k := range allKinds {
		b.Run(fmt.Sprintf("codec=%v/size=1MiB", k), func(b *testing.B) {
			data := textData(1<<20, 1)
			p, err := NewPool(k)
			if err != nil {
				b.Fatal(err)
			}
			dst := make([]byte, 0, p.MaxEncodedLen(len(data)))
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				e := p.Get()
				e.Reset(dst[:0])
				for q := data; len(q) > 0; q = q[min(4096, len(q)):] {
					e.Write(q[:min(4096, len(q))])
				}
				dst = e.Finish()
				p.Put(e)
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, k := range allKinds {
		data := textData(1<<20, 1)
		stream := mustEncoder(b, k).Encode(nil, data)
		b.Run(fmt.Sprintf("codec=%v/size=1MiB", k), func(b *testing.B) {
			dst := make([]byte, 0, len(data))
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if dst, err = Decode(k, dst[:0], stream); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("codec=%v/size=1MiB/reader", k), func(b *testing.B) {
			buf := make([]byte, 64<<10)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				r, err := NewReader(k, bytes.NewReader(stream))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, buf); err != nil {
					b.Fatal(err)
				}
				r.Close()
			}
		})
	}
}
