// Package iocrypt writes Spark's IO encryption (spark.io.encryption.enabled)
// of shuffle blocks, so that Spark's own readers decrypt what the daemon
// writes.
//
// Spark wraps a block's output stream as compression around encryption
// (SerializerManager.wrapStream): the codec streams are encrypted, not the
// records. CryptoStreamUtils.createCryptoOutputStream writes a fresh random
// 16-byte IV ahead of the stream, then AES/CTR/NoPadding (commons-crypto,
// spark.io.crypto.cipher.transformation) of every byte after it, with the
// application's key of 128, 192 or 256 bits
// (spark.io.encryption.keySizeBits). A reducer decrypts one fetched block,
// which is one partition of one map output, as one stream: so on disk a
// non-empty partition is
//
//	+----------------+-----------------------------------------------+
//	| IV (16 bytes)  | AES-CTR(key, IV)(codec stream || codec stream …) |
//	+----------------+-----------------------------------------------+
//
// with one IV, whatever number of codec streams the partition holds, and
// an empty partition is 0 bytes (Spark's writers open a partition's stream
// at its first record). The counter block of byte o of the stream is the
// IV plus o/16, a 128-bit big-endian addition (JCE's and OpenSSL's CTR
// mode, which commons-crypto uses): the keystream at any offset is known
// without the bytes before it, which lets a merge encrypt a segment that
// lands in the middle of a partition (Key.StreamAt).
//
// A Key never appears in text: it formats as "[redacted]".
package iocrypt
