// Package inspect reads a committed map output back from disk and reports,
// per partition, its on-disk length, its checksum as stored and as
// recomputed, its decompressed length and its row count, and can print the
// rows themselves (CSV or JSON lines): the logic behind `shuffled cat`.
//
// It finds out what the files do not say: the codec from the magic at the
// start of the partitions' streams (lz4-java's "LZ4Block", snappy-java's
// "\x82SNAPPY", zstd's frame magic), the checksum algorithm from the checksum
// file present, and the payload from the block magic of docs/format.md.
// Options override each guess.
//
// Main invariant: a partition is read in one streaming pass: the same bytes
// feed the checksum and the decompressor, which feeds the block decoder, so
// memory stays at one codec block and one columnar block whatever the
// partition's size; and every byte of every inspected partition is
// checksummed, even past a point where decoding failed, so a report of
// "ok" means both that the stored checksum matches and that the partition
// decodes to its end.
package inspect

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

var (
	// ErrInvalid reports an option or a file name this package cannot use.
	ErrInvalid = errdefs.New(errdefs.ErrInvalidArgument, "inspect: invalid argument")
	// ErrChecksumMismatch reports a partition whose bytes do not match the
	// checksum file.
	ErrChecksumMismatch = errdefs.New(errdefs.ErrDataLoss, "inspect: checksum mismatch")
	// ErrCorrupt reports a partition whose bytes do not decode: a codec
	// stream or a columnar block that is malformed or cut short.
	ErrCorrupt = errdefs.New(errdefs.ErrDataLoss, "inspect: corrupt partition")
)

// Payload is what a map output's partitions hold once decompressed.
type Payload uint8

const (
	// PayloadAuto detects the payload from the first decompressed bytes.
	PayloadAuto Payload = iota
	// Columnar partitions are concatenations of columnar blocks
	// (docs/format.md).
	Columnar
	// Opaque partitions are bytes the client serialized itself.
	Opaque
	// Kudo partitions are concatenations of spark-rapids' kudo tables
	// (docs/format.md section 7). They carry no types: rows need the
	// schema (WithSchema); without it the tables' headers are read and
	// counted.
	Kudo
)

// ParsePayload returns the payload named s: "auto" (or ""), "columnar",
// "opaque" or "kudo".
func ParsePayload(s string) (Payload, error) {
	switch s {
	case "", "auto":
		return PayloadAuto, nil
	case "columnar":
		return Columnar, nil
	case "opaque":
		return Opaque, nil
	case "kudo":
		return Kudo, nil
	}
	return PayloadAuto, fmt.Errorf("%w: payload %q (want auto, columnar, opaque or kudo)", ErrInvalid, s)
}

func (p Payload) String() string {
	switch p {
	case PayloadAuto:
		return "auto"
	case Columnar:
		return "columnar"
	case Opaque:
		return "opaque"
	case Kudo:
		return "kudo"
	}
	return fmt.Sprintf("Payload(%d)", uint8(p))
}

// RowFormat is how rows are printed.
type RowFormat uint8

const (
	// NoRows prints no rows.
	NoRows RowFormat = iota
	// CSV prints RFC 4180 lines: a header, then one line per row.
	CSV
	// JSON prints one JSON object per row.
	JSON
)

// ParseRowFormat returns the row format named s: "csv", "json", or "" /
// "none" for no rows.
func ParseRowFormat(s string) (RowFormat, error) {
	switch s {
	case "", "none":
		return NoRows, nil
	case "csv":
		return CSV, nil
	case "json":
		return JSON, nil
	}
	return NoRows, fmt.Errorf("%w: row format %q (want csv or json)", ErrInvalid, s)
}

func (f RowFormat) String() string {
	switch f {
	case NoRows:
		return "none"
	case CSV:
		return "csv"
	case JSON:
		return "json"
	}
	return fmt.Sprintf("RowFormat(%d)", uint8(f))
}

// DefaultPreviewBytes is how many decompressed bytes of each opaque
// partition a row shows.
const DefaultPreviewBytes = 64

// maxPreviewBytes bounds WithPreviewBytes.
const maxPreviewBytes = 1 << 20

type options struct {
	fs           vfs.FS
	codec        codec.Kind
	codecSet     bool
	alg          checksum.Algorithm
	algSet       bool
	payload      Payload
	partition    int // -1: all
	rows         RowFormat
	rowsOut      io.Writer
	previewBytes int
	schema       []partition.Field // kudo: the columns; nil: unknown
}

// Option configures Inspect; it fails on a value out of range.
type Option func(*options) error

// WithFS reads through fsys (default vfs.Default).
func WithFS(fsys vfs.FS) Option {
	return func(o *options) error {
		if fsys == nil {
			return fmt.Errorf("%w: nil file system", ErrInvalid)
		}
		o.fs = fsys
		return nil
	}
}

// WithCodec decodes the partitions as streams of codec k instead of
// detecting the codec.
func WithCodec(k codec.Kind) Option {
	return func(o *options) error {
		if k > codec.Snappy {
			return fmt.Errorf("%w: codec %v", ErrInvalid, k)
		}
		o.codec, o.codecSet = k, true
		return nil
	}
}

// WithChecksum checks the partitions against the checksum file of alg
// (none: no check) instead of the one found beside the index.
func WithChecksum(alg checksum.Algorithm) Option {
	return func(o *options) error {
		if alg > checksum.CRC32C {
			return fmt.Errorf("%w: checksum algorithm %v", ErrInvalid, alg)
		}
		o.alg, o.algSet = alg, true
		return nil
	}
}

// WithPayload decodes the partitions as p instead of detecting the
// payload (PayloadAuto detects).
func WithPayload(p Payload) Option {
	return func(o *options) error {
		if p > Kudo {
			return fmt.Errorf("%w: payload %v", ErrInvalid, p)
		}
		o.payload = p
		return nil
	}
}

// WithSchema reads kudo partitions with schema, the map output's columns
// (the schema its writer declared at Open): every table is then decoded
// and checked in full, and its rows can be printed. Without it, only the
// tables' headers are read.
func WithSchema(schema []partition.Field) Option {
	return func(o *options) error {
		if schema == nil {
			schema = []partition.Field{}
		}
		o.schema = schema
		return nil
	}
}

// WithPartition inspects partition p alone.
func WithPartition(p int) Option {
	return func(o *options) error {
		if p < 0 {
			return fmt.Errorf("%w: partition %d is negative", ErrInvalid, p)
		}
		o.partition = p
		return nil
	}
}

// WithRows prints the rows of the inspected partitions to w in format f,
// as they are decoded: for a columnar payload, every row with its column
// names (see WriteRows), and for an opaque one, a preview of each non-empty
// partition's first decompressed bytes. Rows of a partition that later
// turns out corrupt have been printed by then; its PartitionInfo says so.
func WithRows(f RowFormat, w io.Writer) Option {
	return func(o *options) error {
		if f > JSON {
			return fmt.Errorf("%w: row format %v", ErrInvalid, f)
		}
		if f != NoRows && w == nil {
			return fmt.Errorf("%w: row format %v with a nil writer", ErrInvalid, f)
		}
		o.rows, o.rowsOut = f, w
		return nil
	}
}

// WithPreviewBytes sets how many bytes of an opaque partition a row shows
// (default DefaultPreviewBytes, at most 1 MiB).
func WithPreviewBytes(n int) Option {
	return func(o *options) error {
		if n < 1 || n > maxPreviewBytes {
			return fmt.Errorf("%w: preview bytes %d out of range [1,%d]", ErrInvalid, n, maxPreviewBytes)
		}
		o.previewBytes = n
		return nil
	}
}

// Source locates a committed map output.
type Source struct {
	Layout shufflefile.Layout
	ID     shufflefile.ID
}

// Inspect reads the committed map output src, every partition or the one
// WithPartition names, and returns what it found. Its error reports what
// stopped the inspection: options, files that are missing or disagree
// (wrapping fs.ErrNotExist or shufflefile.ErrCorrupt), I/O errors,
// a row writer's error, ctx. Partitions that fail verification do not stop
// it: they are marked in the Summary, whose Err method reports them.
func Inspect(ctx context.Context, src Source, opts ...Option) (*Summary, error) {
	o := options{fs: vfs.Default, partition: -1, previewBytes: DefaultPreviewBytes}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if src.Layout == nil {
		return nil, fmt.Errorf("%w: %v: no layout", ErrInvalid, src.ID)
	}
	if h, ok := src.Layout.(shufflefile.SparkHashed); ok {
		if err := h.Validate(); err != nil {
			return nil, fmt.Errorf("inspect: %w", err)
		}
	}
	if err := src.ID.Validate(); err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}

	s := &Summary{ID: src.ID, Codec: o.codec, Checksum: o.alg, Payload: o.payload}
	if !o.algSet {
		s.Checksum, s.ChecksumDetected = detectChecksum(o.fs, src), true
	}
	out, err := shufflefile.Open(o.fs, src.Layout, src.ID, s.Checksum)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	defer out.Close()
	s.DataPath, s.IndexPath, s.ChecksumPath = out.DataPath, out.IndexPath, out.ChecksumPath
	s.NumPartitions = out.NumPartitions()

	parts := make([]int, 0, s.NumPartitions)
	if o.partition >= 0 {
		if o.partition >= s.NumPartitions {
			return nil, fmt.Errorf("%w: %v: partition %d out of range [0,%d)", ErrInvalid, src.ID, o.partition, s.NumPartitions)
		}
		parts = append(parts, o.partition)
	} else {
		for p := range s.NumPartitions {
			parts = append(parts, p)
		}
	}
	if !o.codecSet {
		if s.Codec, err = detectCodec(out, parts); err != nil {
			return nil, fmt.Errorf("inspect: %v: %w", src.ID, err)
		}
		s.CodecDetected = true
	}
	if s.Payload == PayloadAuto {
		if s.Payload, err = detectPayload(out, parts, s.Codec); err != nil {
			return nil, fmt.Errorf("inspect: %v: %w", src.ID, err)
		}
		s.PayloadDetected = true
	}
	if s.Payload == Kudo && o.rows != NoRows && o.schema == nil {
		return nil, fmt.Errorf("%w: %v: kudo tables carry no types: rows need the map output's schema", ErrInvalid, src.ID)
	}

	r := &reader{
		out:     out,
		alg:     s.Checksum,
		kind:    s.Codec,
		payload: s.Payload,
		schema:  o.schema,
		buf:     make([]byte, 64<<10),
		preview: make([]byte, o.previewBytes),
	}
	if o.rows != NoRows {
		bw := bufio.NewWriterSize(o.rowsOut, 64<<10)
		r.rows = newRowWriter(o.rows, bw)
		defer bw.Flush()
	}
	s.Partitions = make([]PartitionInfo, 0, len(parts))
	for _, p := range parts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		info, err := r.read(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("inspect: %v: partition %d: %w", src.ID, p, err)
		}
		s.add(info)
	}
	if r.rows != nil {
		if err := r.rows.flush(); err != nil {
			return nil, fmt.Errorf("inspect: write rows: %w", err)
		}
	}
	return s, nil
}

// reader reads partitions of one map output, one at a time.
type reader struct {
	out     *shufflefile.MapOutput
	alg     checksum.Algorithm
	kind    codec.Kind
	payload Payload
	schema  []partition.Field // kudo
	rows    rowWriter         // nil: no rows
	buf     []byte            // copy buffer
	preview []byte            // first bytes of an opaque partition
}

// read inspects partition p. A partition that does not decode or does not
// match its checksum is reported in the result; the error is for what
// stops the inspection (I/O, the row writer, ctx).
func (r *reader) read(ctx context.Context, p int) (PartitionInfo, error) {
	info := PartitionInfo{
		Partition: p,
		Offset:    r.out.Offsets[p],
		Bytes:     r.out.Lengths[p],
	}
	if r.alg != checksum.None {
		info.Stored = r.out.Checksums[p]
		info.Computed = r.alg.Empty()
	}
	if info.Bytes == 0 {
		info.finish(r.alg)
		return info, nil
	}
	sec, err := r.out.Partition(p)
	if err != nil {
		return info, err
	}
	// The file's own errors stop the inspection; the decoders' errors mark
	// the partition corrupt.
	file := &fileReader{r: sec}
	var h hash.Hash32
	var disk io.Reader = file
	if r.alg != checksum.None {
		h = r.alg.New()
		disk = io.TeeReader(file, h)
	}
	dec, err := codec.NewReader(r.kind, disk)
	if err != nil {
		return info, err
	}
	raw := &countingReader{r: dec}
	var decodeErr error
	switch r.payload {
	case Columnar:
		decodeErr = r.readColumnar(ctx, p, raw, &info)
	case Kudo:
		decodeErr = r.readKudo(ctx, p, raw, &info)
	default:
		decodeErr = r.readOpaque(ctx, p, raw)
	}
	dec.Close()
	info.RawBytes = raw.n
	switch {
	case file.err != nil:
		return info, file.err
	case r.rows != nil && r.rows.err() != nil:
		return info, fmt.Errorf("write rows: %w", r.rows.err())
	case errors.Is(decodeErr, context.Canceled) || errors.Is(decodeErr, context.DeadlineExceeded):
		return info, decodeErr
	}
	info.Err = decodeErr
	if decodeErr == nil && r.payload == Opaque && r.rows != nil {
		r.rows.opaque(p, raw.n, r.preview[:min(int64(len(r.preview)), raw.n)])
	}
	// Checksum what decoding left unread.
	w := io.Writer(struct{ io.Writer }{io.Discard})
	if h != nil {
		w = h
	}
	if _, err := io.CopyBuffer(w, file, r.buf); err != nil {
		return info, err
	}
	if h != nil {
		info.Computed = h.Sum32()
	}
	info.finish(r.alg)
	return info, nil
}

// readColumnar decodes the blocks of one partition, counting and printing
// their rows.
func (r *reader) readColumnar(ctx context.Context, p int, raw io.Reader, info *PartitionInfo) error {
	d := partition.NewDecoder(raw, 0)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		b, err := d.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		info.Blocks++
		info.Rows += int64(b.Rows)
		if r.rows != nil {
			r.rows.batch(p, b)
			if r.rows.err() != nil {
				return nil
			}
		}
	}
}

// readKudo decodes the kudo tables of one partition (their headers alone
// without a schema), counting and printing their rows.
func (r *reader) readKudo(ctx context.Context, p int, raw io.Reader, info *PartitionInfo) error {
	d := partition.NewKudoDecoder(raw, r.schema, 0)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		t, err := d.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		info.Blocks++
		info.Rows += int64(t.Rows)
		if r.rows != nil && t.Batch != nil {
			r.rows.batch(p, t.Batch)
			if r.rows.err() != nil {
				return nil
			}
		}
	}
}

// readOpaque reads one partition's decompressed bytes, keeping the first
// ones for a preview.
func (r *reader) readOpaque(ctx context.Context, p int, raw io.Reader) error {
	if r.rows != nil {
		if _, err := io.ReadFull(raw, r.preview); err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
			return err
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		_, err := raw.Read(r.buf)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// fileReader keeps the first error of the data file other than io.EOF.
type fileReader struct {
	r   io.Reader
	err error
}

func (f *fileReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err != nil && err != io.EOF && f.err == nil {
		f.err = err
	}
	return n, err
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
