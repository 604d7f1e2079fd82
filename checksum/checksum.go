// Package checksum names the per-partition checksum algorithms of Spark's
// shuffle checksum file (spark.shuffle.checksum.algorithm) and computes them
// over a partition's on-disk (compressed) bytes.
//
// Each algorithm is a 32-bit checksum that Spark stores widened to a
// big-endian int64. Checksums of consecutive byte ranges combine without
// re-reading the bytes (Combine), which lets a merge of run files produce the
// checksum of a merged partition from the checksums of its segments.
package checksum

import (
	"fmt"
	"hash"
	"hash/crc32"
	"strings"
)

// Algorithm is a Spark shuffle checksum algorithm.
type Algorithm uint8

const (
	// None writes no checksum file.
	None Algorithm = iota
	// Adler32 is Spark's default (java.util.zip.Adler32).
	Adler32
	// CRC32 is java.util.zip.CRC32 (IEEE polynomial).
	CRC32
	// CRC32C is java.util.zip.CRC32C (Castagnoli polynomial).
	CRC32C
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Parse returns the algorithm named s, as Spark spells it in the checksum
// file suffix (ADLER32, CRC32, CRC32C), case-insensitively, or "none"/"".
func Parse(s string) (Algorithm, error) {
	switch strings.ToUpper(s) {
	case "", "NONE":
		return None, nil
	case "ADLER32":
		return Adler32, nil
	case "CRC32":
		return CRC32, nil
	case "CRC32C":
		return CRC32C, nil
	}
	return None, fmt.Errorf("checksum: unknown algorithm %q (want ADLER32, CRC32, CRC32C or none)", s)
}

// String returns the name Spark uses in the checksum file suffix.
func (a Algorithm) String() string {
	switch a {
	case None:
		return "none"
	case Adler32:
		return "ADLER32"
	case CRC32:
		return "CRC32"
	case CRC32C:
		return "CRC32C"
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// New returns a fresh hash for the algorithm; it panics for None or an
// unknown value, which Parse never returns.
func (a Algorithm) New() hash.Hash32 {
	switch a {
	case Adler32, CRC32, CRC32C:
		return &digest{alg: a, sum: a.Empty()}
	}
	panic(fmt.Sprintf("checksum: New on %v", a))
}

// Empty is the checksum of zero bytes: 1 for Adler32, 0 for the CRCs.
func (a Algorithm) Empty() uint32 {
	if a == Adler32 {
		return 1
	}
	return 0
}

// Update returns the checksum of the bytes summed in sum followed by p.
func (a Algorithm) Update(sum uint32, p []byte) uint32 {
	switch a {
	case Adler32:
		return adler32Update(sum, p)
	case CRC32:
		return crc32.Update(sum, crc32.IEEETable, p)
	case CRC32C:
		return crc32.Update(sum, castagnoli, p)
	}
	return 0
}
