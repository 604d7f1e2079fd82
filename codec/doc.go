// Package codec writes and reads the compressed streams that Spark's
// shuffle readers decode: lz4 (lz4-java's LZ4BlockOutputStream framing),
// zstd (standard frames), snappy (snappy-java's SnappyOutputStream framing)
// and none.
//
// The main invariant: every stream an Encoder writes is complete and
// self-delimiting, and the decoders, ours and the JVM's that Spark builds,
// read a concatenation of streams as the concatenation of their contents.
// So a shuffle writer compresses each record as its own stream and a merge
// copies compressed bytes without decoding them. The decoders check every
// magic, length and checksum, refuse lengths beyond the format's block
// limits before allocating, and never panic on hostile input.
//
// # lz4
//
// A stream is a sequence of blocks of at most the block size (default
// 32 KiB), then an end mark. Integers are little-endian int32.
//
//	offset  size  field
//	0       8     magic "LZ4Block"             4c 5a 34 42 6c 6f 63 6b
//	8       1     token: method | level        method 0x10 raw, 0x20 lz4;
//	                                           level = max(0, ceil(log2(blockSize)) - 10)
//	9       4     compressed length            = original length when raw
//	13      4     original length              at most 1 << (10 + level)
//	17      4     checksum                     xxHash32(original, seed 0x9747b28c) & 0x0FFFFFFF
//	21      n     payload                      raw bytes or an LZ4 block (no frame)
//
// A block is stored raw unless the LZ4 block is smaller. The block
// compressor (lz4block.go) writes the blocks of LZ4_compress_default, the
// function lz4-java's native compressor calls, so a stream is byte for byte
// what Spark writes for the same input; the clib build tag (liblz4-dev,
// libzstd-dev) tests that against liblz4 itself, makes the zstd encoder
// write libzstd's frames, and has UseCLZ4, which switches the lz4 encoder to
// liblz4's compressor for benchmarks. The end mark is a
// header with a raw token and three zero ints, and no payload; an empty
// stream is the end mark alone. At the default block size:
//
//	"hello world" → 4c5a34426c6f636b 15 0b000000 0b000000 95039202 68656c6c6f20776f726c64
//	                4c5a34426c6f636b 15 00000000 00000000 00000000
//
// # snappy
//
// A stream is a 16-byte header, then one chunk per block of input (default
// 32 KiB). Integers are big-endian int32.
//
//	offset  size  field
//	0       8     magic                        82 53 4e 41 50 50 59 00  ("\x82SNAPPY\x00")
//	8       4     version                      00 00 00 01
//	12      4     compatible version           00 00 00 01
//	16      4     chunk length n               } repeated per chunk
//	20      n     snappy block (no framing)    }
//
// An empty stream is the header alone. A reader that meets the magic where
// a chunk length belongs (0x82534e41 is negative, so no length) skips the
// header and goes on: that is how streams concatenate.
//
// # zstd
//
// A stream is one standard zstd frame with a content checksum, and the
// content size in its header when the content is 256 bytes or more (a
// smaller frame omits it, as the format allows: a reader must not rely on
// it); an empty stream is a frame with no content. Concatenated frames
// decode to the concatenation of their contents.
//
// # none
//
// A stream is the bytes as they are.
package codec
