package inspect

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/shufflefile"
)

// PartitionInfo is what Inspect found in one partition.
type PartitionInfo struct {
	Partition int
	// Offset and Bytes place the partition's on-disk (compressed) bytes in
	// the data file, as the index says.
	Offset, Bytes int64
	// RawBytes counts the decompressed bytes read (all of them, unless Err
	// is set).
	RawBytes int64
	// Blocks and Rows count the columnar blocks (or kudo tables) and their
	// rows; zero for an opaque payload.
	Blocks, Rows int64
	// Stored is the checksum in the checksum file, Computed the one of the
	// bytes on disk; both zero when the algorithm is none.
	Stored, Computed uint32
	// Mismatch is set when Computed differs from Stored.
	Mismatch bool
	// Err is why the partition does not decode, or nil.
	Err error
}

// OK reports whether the partition matches its checksum and decodes.
func (p *PartitionInfo) OK() bool { return !p.Mismatch && p.Err == nil }

// Status is "ok", "MISMATCH", "CORRUPT" or "MISMATCH,CORRUPT".
func (p *PartitionInfo) Status() string {
	switch {
	case p.Mismatch && p.Err != nil:
		return "MISMATCH,CORRUPT"
	case p.Mismatch:
		return "MISMATCH"
	case p.Err != nil:
		return "CORRUPT"
	}
	return "ok"
}

func (p *PartitionInfo) finish(alg checksum.Algorithm) {
	p.Mismatch = alg != checksum.None && p.Stored != p.Computed
}

// problems returns one line per thing wrong with the partition.
func (p *PartitionInfo) problems(alg checksum.Algorithm) []string {
	var lines []string
	if p.Mismatch {
		lines = append(lines, fmt.Sprintf("partition %d (%d bytes at offset %d): %v of the data is %#08x, checksum file says %#08x",
			p.Partition, p.Bytes, p.Offset, alg, p.Computed, p.Stored))
	}
	if p.Err != nil {
		lines = append(lines, fmt.Sprintf("partition %d (%d bytes at offset %d): %v", p.Partition, p.Bytes, p.Offset, p.Err))
	}
	return lines
}

// Summary is what Inspect found in a map output.
type Summary struct {
	ID                                shufflefile.ID
	DataPath, IndexPath, ChecksumPath string
	// NumPartitions is the map output's number of partitions; Partitions
	// holds the inspected ones, in order.
	NumPartitions int
	Partitions    []PartitionInfo

	// Codec, Checksum and Payload are what the partitions were read as;
	// the Detected fields say which were found out rather than given.
	Codec                                            codec.Kind
	Checksum                                         checksum.Algorithm
	Payload                                          Payload
	CodecDetected, ChecksumDetected, PayloadDetected bool

	// Totals over Partitions.
	NonEmpty                      int
	Bytes, RawBytes, Blocks, Rows int64
	Mismatches, Corrupt           int
}

func (s *Summary) add(p PartitionInfo) {
	s.Partitions = append(s.Partitions, p)
	if p.Bytes > 0 {
		s.NonEmpty++
	}
	s.Bytes += p.Bytes
	s.RawBytes += p.RawBytes
	s.Blocks += p.Blocks
	s.Rows += p.Rows
	if p.Mismatch {
		s.Mismatches++
	}
	if p.Err != nil {
		s.Corrupt++
	}
}

// maxErrPartitions bounds the partitions an Err message details.
const maxErrPartitions = 3

// Err returns nil when every inspected partition matches its checksum and
// decodes, and otherwise an error that names the failing partitions and
// wraps ErrChecksumMismatch, ErrCorrupt or both.
func (s *Summary) Err() error {
	if s.Mismatches == 0 && s.Corrupt == 0 {
		return nil
	}
	var lines []string
	bad := 0
	for i := range s.Partitions {
		p := &s.Partitions[i]
		if p.OK() {
			continue
		}
		bad++
		if bad <= maxErrPartitions {
			lines = append(lines, p.problems(s.Checksum)...)
		}
	}
	if bad > maxErrPartitions {
		lines = append(lines, fmt.Sprintf("and %d more partitions", bad-maxErrPartitions))
	}
	var kinds []error
	if s.Mismatches > 0 {
		kinds = append(kinds, ErrChecksumMismatch)
	}
	if s.Corrupt > 0 {
		kinds = append(kinds, ErrCorrupt)
	}
	return fmt.Errorf("%w: %v: %s", errors.Join(kinds...), s.ID, strings.Join(lines, "; "))
}

// Verdict is the summary's last words: "verified OK", or the count of
// mismatches and corrupt partitions.
func (s *Summary) Verdict() string {
	if s.Mismatches == 0 && s.Corrupt == 0 {
		if s.Checksum == checksum.None {
			return "decoded OK (no checksum file)"
		}
		return "verified OK"
	}
	var parts []string
	if s.Mismatches > 0 {
		parts = append(parts, plural(s.Mismatches, "checksum mismatch", "checksum mismatches"))
	}
	if s.Corrupt > 0 {
		parts = append(parts, plural(s.Corrupt, "corrupt partition", "corrupt partitions"))
	}
	return strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// WriteText writes the partition table, one line per inspected partition
// (partition, bytes, raw bytes, rows, checksum, status), then two summary
// lines (totals; codec, checksum, payload and the verdict), then one line per
// problem found.
func (s *Summary) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "partition\tbytes\traw\trows\tchecksum\tstatus\t")
	var line []byte
	for i := range s.Partitions {
		p := &s.Partitions[i]
		line = strconv.AppendInt(line[:0], int64(p.Partition), 10)
		line = append(line, '\t')
		line = strconv.AppendInt(line, p.Bytes, 10)
		line = append(line, '\t')
		line = strconv.AppendInt(line, p.RawBytes, 10)
		line = append(line, '\t')
		if s.Payload == Columnar || s.Payload == Kudo {
			line = strconv.AppendInt(line, p.Rows, 10)
		} else {
			line = append(line, '-')
		}
		line = append(line, '\t')
		if s.Checksum == checksum.None {
			line = append(line, '-')
		} else {
			line = fmt.Appendf(line, "%#08x", p.Stored)
		}
		line = append(line, '\t')
		line = append(line, p.Status()...)
		line = append(line, "\t\n"...)
		if _, err := tw.Write(line); err != nil {
			return err
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var b strings.Builder
	if len(s.Partitions) == s.NumPartitions {
		fmt.Fprintf(&b, "%s (%d non-empty)", plural(s.NumPartitions, "partition", "partitions"), s.NonEmpty)
	} else {
		fmt.Fprintf(&b, "%d of %s (%d non-empty)", len(s.Partitions), plural(s.NumPartitions, "partition", "partitions"), s.NonEmpty)
	}
	fmt.Fprintf(&b, ", %d bytes (%d raw)", s.Bytes, s.RawBytes)
	switch s.Payload {
	case Columnar:
		fmt.Fprintf(&b, ", %d rows in %d blocks", s.Rows, s.Blocks)
	case Kudo:
		fmt.Fprintf(&b, ", %d rows in %d kudo tables", s.Rows, s.Blocks)
	}
	fmt.Fprintf(&b, "\ncodec %v%s, checksum %v%s, payload %v%s: %s\n",
		s.Codec, detected(s.CodecDetected), s.Checksum, detected(s.ChecksumDetected),
		s.Payload, detected(s.PayloadDetected), s.Verdict())
	for i := range s.Partitions {
		for _, l := range s.Partitions[i].problems(s.Checksum) {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func detected(d bool) string {
	if d {
		return " (detected)"
	}
	return ""
}

type jsonPartition struct {
	Partition int    `json:"partition"`
	Offset    int64  `json:"offset"`
	Bytes     int64  `json:"bytes"`
	RawBytes  int64  `json:"raw_bytes"`
	Blocks    int64  `json:"blocks"`
	Rows      int64  `json:"rows"`
	Stored    uint32 `json:"stored_checksum"`
	Computed  uint32 `json:"computed_checksum"`
	Status    string `json:"status"`
	Error     string `json:"error,omitempty"`
}

type jsonSummary struct {
	Shuffle          int32           `json:"shuffle"`
	Map              int64           `json:"map"`
	Data             string          `json:"data"`
	Index            string          `json:"index"`
	ChecksumFile     string          `json:"checksum_file,omitempty"`
	Codec            string          `json:"codec"`
	CodecDetected    bool            `json:"codec_detected"`
	Checksum         string          `json:"checksum"`
	ChecksumDetected bool            `json:"checksum_detected"`
	Payload          string          `json:"payload"`
	PayloadDetected  bool            `json:"payload_detected"`
	NumPartitions    int             `json:"num_partitions"`
	Inspected        int             `json:"inspected"`
	NonEmpty         int             `json:"non_empty"`
	Bytes            int64           `json:"bytes"`
	RawBytes         int64           `json:"raw_bytes"`
	Blocks           int64           `json:"blocks"`
	Rows             int64           `json:"rows"`
	Mismatches       int             `json:"checksum_mismatches"`
	Corrupt          int             `json:"corrupt"`
	OK               bool            `json:"ok"`
	Partitions       []jsonPartition `json:"partitions"`
}

// MarshalJSON writes the summary as one JSON object: the map output's
// files, codec, checksum and payload, the totals, "ok", and the
// partitions, each with its figures, status and error.
func (s *Summary) MarshalJSON() ([]byte, error) {
	js := jsonSummary{
		Shuffle: s.ID.Shuffle, Map: s.ID.Map,
		Data: s.DataPath, Index: s.IndexPath, ChecksumFile: s.ChecksumPath,
		Codec: s.Codec.String(), CodecDetected: s.CodecDetected,
		Checksum: s.Checksum.String(), ChecksumDetected: s.ChecksumDetected,
		Payload: s.Payload.String(), PayloadDetected: s.PayloadDetected,
		NumPartitions: s.NumPartitions, Inspected: len(s.Partitions), NonEmpty: s.NonEmpty,
		Bytes: s.Bytes, RawBytes: s.RawBytes, Blocks: s.Blocks, Rows: s.Rows,
		Mismatches: s.Mismatches, Corrupt: s.Corrupt, OK: s.Mismatches == 0 && s.Corrupt == 0,
		Partitions: make([]jsonPartition, len(s.Partitions)),
	}
	for i := range s.Partitions {
		p := &s.Partitions[i]
		jp := jsonPartition{
			Partition: p.Partition, Offset: p.Offset, Bytes: p.Bytes, RawBytes: p.RawBytes,
			Blocks: p.Blocks, Rows: p.Rows, Stored: p.Stored, Computed: p.Computed, Status: p.Status(),
		}
		if p.Err != nil {
			jp.Error = p.Err.Error()
		}
		js.Partitions[i] = jp
	}
	return json.Marshal(js)
}
