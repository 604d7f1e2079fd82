package codec

import (
	"math/bits"
	"unsafe"

	"github.com/pierrec/lz4/v4"
)

// The block compressor below is LZ4_compress_default of the reference lz4
// (lz4.c, LZ4_compress_generic with acceleration 1, no dictionary) for
// inputs below 64 KiB + 11 bytes, the byU16 table case that every block of
// the default 32 KiB block size takes: it finds the same matches and writes
// the same bytes, so a stream is the bytes lz4-java's native compressor
// writes. Larger inputs go to pierrec's port of the same function.
//
// It is written for speed: the hash and table sizes are constants, and loads
// and stores go through unsafe pointers, without bounds checks. Like
// lz4-java's call of LZ4_compress_default (its destination holds
// LZ4_compressBound bytes: lz4.c's notLimited mode), it writes into room for
// the bound and checks nothing as it writes; the caller stores a block raw
// when the result is not smaller than the input, as LZ4BlockOutputStream
// does.
const (
	lz4HashLog16     = 13 // LZ4_HASHLOG + 1: the byU16 table's bits
	lz4TableSize16   = 1 << lz4HashLog16
	lz4MinMatch      = 4
	lz4MFLimit       = 12 // MFLIMIT
	lz4LastLiterals  = 5  // LASTLITERALS
	lz4MinLength     = lz4MFLimit + 1
	lz4SkipTrigger   = 6
	lz4U16Limit      = 64<<10 + 11 // LZ4_64Klimit
	lz4Prime4        = 2654435761
	lz4SearchStart   = 1 << lz4SkipTrigger // acceleration 1
	lz4HashShift16   = 32 - lz4HashLog16
	lz4MaxLiteralRun = 0xF
)

// lz4Compressor holds the hash tables of the block compressor. The zero
// value is ready; it is not safe for concurrent use.
type lz4Compressor struct {
	table [lz4TableSize16]uint16
	large lz4.CompressorCCompat
}

// lz4Bound is LZ4_compressBound: the largest block of n bytes of input.
func lz4Bound(n int) int { return n + n/255 + 16 }

// compress writes the LZ4 block of src into dst and returns its length. It
// returns 0, writing nothing, unless dst holds lz4Bound(len(src)) bytes.
func (c *lz4Compressor) compress(dst, src []byte) int {
	if len(dst) < lz4Bound(len(src)) {
		return 0
	}
	if len(src) >= lz4U16Limit {
		n, err := c.large.CompressBlock(src, dst)
		if err != nil {
			return 0
		}
		return n
	}
	c.table = [lz4TableSize16]uint16{}
	return compress16(&c.table, unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(src)), len(src))
}

func storeByte(p unsafe.Pointer, i int, v byte) { *(*byte)(unsafe.Add(p, i)) = v }
func loadByte(p unsafe.Pointer, i int) byte     { return *(*byte)(unsafe.Add(p, i)) }

// hash16 is LZ4_hash4 for the byU16 table.
func hash16(v uint32) uint32 { return v * lz4Prime4 >> lz4HashShift16 }

// compress16 is the byU16 case of LZ4_compress_generic in notLimited mode.
// Every load is within src: positions searched stop lz4MFLimit bytes before
// its end (a load of 8 bytes from there ends 4 bytes before it), and matches
// lz4LastLiterals bytes before it. Every store is within dst, which holds
// lz4Bound(len(src)) bytes: the output is at most that long, and the wild
// copy of literals, which may write 7 bytes past them, is always followed by
// at least 8 bytes of output (an offset, a token, the last literals).
//
// It takes pointers, not slices: with no slice headers live across its
// loops, the compiler keeps the search loop's variables in registers.
func compress16(table *[lz4TableSize16]uint16, d, s unsafe.Pointer, n int) int {
	t := unsafe.Pointer(table)
	tget := func(h uint32) int { return int(*(*uint16)(unsafe.Add(t, uintptr(h)*2))) }
	tput := func(h uint32, pos int) { *(*uint16)(unsafe.Add(t, uintptr(h)*2)) = uint16(pos) }

	var (
		anchor, ip, op int
		mfLimitPlusOne = n - lz4MFLimit + 1
		matchLimit     = n - lz4LastLiterals
		match, token   int
		forwardH       uint32
	)
	if n < lz4MinLength {
		goto lastLiterals
	}

	tput(hash16(load32(s, 0)), 0)
	ip = 1
	forwardH = hash16(load32(s, 1))

	for {
		// Find a match: one position per step, the step growing by one
		// every 64 misses.
		{
			forwardIP := ip
			step := 1
			searchMatchNb := lz4SearchStart
			for {
				h := forwardH
				cur := forwardIP
				match = tget(h)
				ip = forwardIP
				forwardIP += step
				step = searchMatchNb >> lz4SkipTrigger
				searchMatchNb++
				if forwardIP > mfLimitPlusOne {
					goto lastLiterals
				}
				forwardH = hash16(load32(s, forwardIP))
				tput(h, cur)
				if load32(s, match) == load32(s, ip) {
					break
				}
			}
		}

		// Catch up: extend the match backwards.
		for ip > anchor && match > 0 && loadByte(s, ip-1) == loadByte(s, match-1) {
			ip--
			match--
		}

		// Literals.
		{
			litLength := ip - anchor
			token = op
			op++
			if litLength >= lz4MaxLiteralRun {
				storeByte(d, token, lz4MaxLiteralRun<<4)
				l := litLength - lz4MaxLiteralRun
				for ; l >= 255; l -= 255 {
					storeByte(d, op, 255)
					op++
				}
				storeByte(d, op, byte(l))
				op++
			} else {
				storeByte(d, token, byte(litLength<<4))
			}
			// Wild copy in 8-byte words: it may write up to 7 bytes past
			// the literals, which the offset and what follows overwrite.
			for i := 0; i < litLength; i += 8 {
				store64(d, op+i, load64(s, anchor+i))
			}
			op += litLength
		}

	nextMatch:
		// Offset.
		{
			offset := ip - match
			storeByte(d, op, byte(offset))
			storeByte(d, op+1, byte(offset>>8))
			op += 2
		}

		// Match length: count beyond the 4 bytes already equal.
		{
			in, m := ip+lz4MinMatch, match+lz4MinMatch
			start := in
			for in+8 <= matchLimit {
				if diff := load64(s, m) ^ load64(s, in); diff != 0 {
					in += bits.TrailingZeros64(diff) >> 3
					goto counted
				}
				in += 8
				m += 8
			}
			if in+4 <= matchLimit && load32(s, m) == load32(s, in) {
				in += 4
				m += 4
			}
			if in+2 <= matchLimit && load16(s, m) == load16(s, in) {
				in += 2
				m += 2
			}
			if in < matchLimit && loadByte(s, m) == loadByte(s, in) {
				in++
			}
		counted:
			matchCode := in - start
			ip = in
			if matchCode >= 0xF {
				storeByte(d, token, loadByte(d, token)+0xF)
				matchCode -= 0xF
				for ; matchCode >= 4*255; matchCode -= 4 * 255 {
					*(*uint32)(unsafe.Add(d, op)) = 0xFFFFFFFF
					op += 4
				}
				for ; matchCode >= 255; matchCode -= 255 {
					storeByte(d, op, 255)
					op++
				}
				storeByte(d, op, byte(matchCode))
				op++
			} else {
				storeByte(d, token, loadByte(d, token)+byte(matchCode))
			}
		}
		anchor = ip

		if ip >= mfLimitPlusOne {
			break
		}

		// Fill the table at ip-2.
		tput(hash16(load32(s, ip-2)), ip-2)

		// Test the next position: a match there needs no literals.
		{
			v := load32(s, ip)
			h := hash16(v)
			match = tget(h)
			tput(h, ip)
			if load32(s, match) == v {
				token = op
				storeByte(d, op, 0)
				op++
				goto nextMatch
			}
		}

		ip++
		forwardH = hash16(load32(s, ip))
	}

lastLiterals:
	lastRun := n - anchor
	if lastRun >= lz4MaxLiteralRun {
		storeByte(d, op, lz4MaxLiteralRun<<4)
		op++
		acc := lastRun - lz4MaxLiteralRun
		for ; acc >= 255; acc -= 255 {
			storeByte(d, op, 255)
			op++
		}
		storeByte(d, op, byte(acc))
		op++
	} else {
		storeByte(d, op, byte(lastRun<<4))
		op++
	}
	op += copy(unsafe.Slice((*byte)(unsafe.Add(d, op)), lastRun), unsafe.Slice((*byte)(unsafe.Add(s, anchor)), lastRun))
	return op
}
