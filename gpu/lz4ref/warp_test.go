package lz4ref

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"testing"
)

// warpCompress is kernels/lz4.cu's compress_block transcribed lane by
// lane: 32 positions examined at a time, candidates from the lower lanes
// of the same hash (__match_any_sync) or the table, the first valid lane
// (__ballot_sync) starts the match, the examined lanes inserted per hash
// by the highest, the match extended forward and then backward 32 bytes
// at a time. It must make the same block as CompressBlock.
func warpCompress(dst, src []byte) int {
	n := len(src)
	if n < MFLimit+1 {
		return 0
	}
	dst = dst[:n-1]
	var table [1 << HashLog]uint16
	for i := range table {
		table[i] = empty
	}
	lastStart, matchLimit := n-MFLimit-1, n-LastLiterals
	out, anchor, p := 0, 0, 0
	var h, v [32]uint32
	var cand [32]int
	var active [32]bool
	for p <= lastStart {
		for k := range 32 {
			i := p + k
			active[k] = i <= lastStart
			v[k], h[k] = 0, uint32(1<<HashLog+k)
			if active[k] {
				v[k] = binary.LittleEndian.Uint32(src[i:])
				h[k] = hash(v[k])
			}
		}
		peers := func(k int) uint32 {
			var m uint32
			for j := range 32 {
				if h[j] == h[k] {
					m |= 1 << j
				}
			}
			return m
		}
		var ball uint32
		for k := range 32 {
			lower := peers(k) & (1<<k - 1)
			switch {
			case lower != 0:
				cand[k] = p + 31 - bits.LeadingZeros32(lower)
			case active[k]:
				cand[k] = int(table[h[k]])
			default:
				cand[k] = empty
			}
			if active[k] && cand[k] != empty && binary.LittleEndian.Uint32(src[cand[k]:]) == v[k] {
				ball |= 1 << k
			}
		}
		last := 31
		if ball != 0 {
			last = bits.TrailingZeros32(ball)
		}
		upto := uint32(1<<(last+1) - 1)
		for k := range 32 {
			if active[k] && k <= last && (peers(k)&upto)>>k == 1 {
				table[h[k]] = uint16(p + k)
			}
		}
		if ball == 0 {
			p += 32
			continue
		}
		m, c := p+last, cand[last]
		l := MinMatch
		for {
			var ne uint32
			for k := range 32 {
				pos := m + l + k
				if !(pos < matchLimit && src[pos] == src[c+l+k]) {
					ne |= 1 << k
				}
			}
			if ne != 0 {
				l += bits.TrailingZeros32(ne)
				break
			}
			l += 32
		}
		back := 0
		for {
			var ne uint32
			for k := range 32 {
				d := back + 1 + k
				if !(d <= m-anchor && d <= c && src[m-d] == src[c-d]) {
					ne |= 1 << k
				}
			}
			if ne != 0 {
				back += bits.TrailingZeros32(ne)
				break
			}
			back += 32
		}
		m, c, l = m-back, c-back, l+back
		var ok bool
		if out, ok = putSequence(dst, out, src[anchor:m], m-c, l); !ok {
			return 0
		}
		p = m + l
		anchor = p
	}
	out, ok := putSequence(dst, out, src[anchor:], 0, 0)
	if !ok {
		return 0
	}
	return out
}

func TestWarpOrderMatchesSequential(t *testing.T) {
	check := func(name string, data []byte) {
		t.Helper()
		for len(data) > 0 {
			blk := data[:min(len(data), MaxBlockSize)]
			data = data[len(blk):]
			a, b := make([]byte, len(blk)), make([]byte, len(blk))
			na, nb := CompressBlock(a, blk), warpCompress(b, blk)
			if na != nb || !bytes.Equal(a[:na], b[:nb]) {
				t.Fatalf("%s: sequential %d bytes, warp order %d bytes", name, na, nb)
			}
		}
	}
	for _, in := range allInputs(t) {
		check(in.name, in.data)
	}
	// Short periods and hash collisions inside one window.
	for period := 1; period <= 40; period++ {
		b := make([]byte, 3000)
		for i := range b {
			b[i] = byte(i%period) * 37
		}
		check("period", b)
	}
}
