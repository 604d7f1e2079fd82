package inspect

import (
	"bytes"
	"errors"
	"io"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
)

// The magics that start a stream of each codec (docs of package codec).
var (
	lz4Magic    = []byte("LZ4Block")
	snappyMagic = []byte("\x82SNAPPY\x00")
	zstdMagic   = []byte{0x28, 0xb5, 0x2f, 0xfd}
	blockMagic  = []byte("SHFC")
	kudoMagic   = []byte("KUD0")
)

// maxProbes bounds the non-empty partitions detectCodec and detectPayload
// look at before they settle on "none" and "opaque".
const maxProbes = 16

// detectChecksum returns the algorithm of the checksum file present for
// src, Adler32 (Spark's default) when there are several, and checksum.None
// when there is none.
func detectChecksum(fsys vfs.FS, src Source) checksum.Algorithm {
	for _, alg := range []checksum.Algorithm{checksum.Adler32, checksum.CRC32, checksum.CRC32C} {
		if _, err := fsys.Stat(shufflefile.Path(src.Layout, shufflefile.ChecksumName(src.ID, alg))); err == nil {
			return alg
		}
	}
	return checksum.None
}

// codecOf returns the codec whose magic starts b.
func codecOf(b []byte) (codec.Kind, bool) {
	switch {
	case bytes.HasPrefix(b, lz4Magic):
		return codec.LZ4, true
	case bytes.HasPrefix(b, snappyMagic):
		return codec.Snappy, true
	case bytes.HasPrefix(b, zstdMagic):
		return codec.Zstd, true
	}
	return codec.None, false
}

// detectCodec returns the codec whose magic starts the first of parts'
// non-empty partitions that has one (looking at up to maxProbes of them):
// codec.None if none has, and codec.LZ4, Spark's default, when every
// partition is empty.
func detectCodec(out *shufflefile.MapOutput, parts []int) (codec.Kind, error) {
	var head [8]byte
	probes := 0
	for _, p := range parts {
		if out.Lengths[p] == 0 {
			continue
		}
		if probes++; probes > maxProbes {
			break
		}
		sec, err := out.Partition(p)
		if err != nil {
			return codec.None, err
		}
		n, err := sec.ReadAt(head[:min(out.Lengths[p], int64(len(head)))], 0)
		if err != nil && !errors.Is(err, io.EOF) {
			return codec.None, err
		}
		if k, ok := codecOf(head[:n]); ok {
			return k, nil
		}
	}
	if probes == 0 {
		return codec.LZ4, nil
	}
	return codec.None, nil
}

// detectPayload returns Columnar or Kudo when the first of parts'
// non-empty partitions that decodes far enough starts with the block or
// the kudo magic, and Opaque otherwise.
func detectPayload(out *shufflefile.MapOutput, parts []int, k codec.Kind) (Payload, error) {
	var head [4]byte
	probes := 0
	for _, p := range parts {
		if out.Lengths[p] == 0 {
			continue
		}
		if probes++; probes > maxProbes {
			break
		}
		sec, err := out.Partition(p)
		if err != nil {
			return Opaque, err
		}
		file := &fileReader{r: sec}
		dec, err := codec.NewReader(k, file)
		if err != nil {
			return Opaque, err
		}
		n, err := io.ReadFull(dec, head[:])
		dec.Close()
		switch {
		case file.err != nil:
			return Opaque, file.err
		case n == len(head):
			if bytes.Equal(head[:], blockMagic) {
				return Columnar, nil
			}
			if bytes.Equal(head[:], kudoMagic) {
				return Kudo, nil
			}
			return Opaque, nil
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			// Fewer bytes than a block header: not columnar.
			return Opaque, nil
		}
		// The partition does not decode; try the next one.
	}
	return Opaque, nil
}
