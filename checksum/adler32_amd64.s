//go:build amd64 && !purego

#include "textflag.h"

// adlerWeights: byte i of a 32-byte block has weight 32−i in s2.
DATA adlerWeights<>+0x00(SB)/8, $0x191a1b1c1d1e1f20
DATA adlerWeights<>+0x08(SB)/8, $0x1112131415161718
DATA adlerWeights<>+0x10(SB)/8, $0x090a0b0c0d0e0f10
DATA adlerWeights<>+0x18(SB)/8, $0x0102030405060708
GLOBL adlerWeights<>(SB), RODATA|NOPTR, $32

// adlerOnes: sixteen 16-bit ones.
DATA adlerOnes<>+0x00(SB)/8, $0x0001000100010001
DATA adlerOnes<>+0x08(SB)/8, $0x0001000100010001
DATA adlerOnes<>+0x10(SB)/8, $0x0001000100010001
DATA adlerOnes<>+0x18(SB)/8, $0x0001000100010001
GLOBL adlerOnes<>(SB), RODATA|NOPTR, $32

// HSUMQ sets r to the sum of the four 64-bit lanes of Y register y (whose
// X register is x), with X6 as scratch.
#define HSUMQ(y, x, r) \
	VEXTRACTI128 $1, y, X6 \
	VPADDQ       X6, x, x \
	VPSHUFD      $0x4e, x, X6 \
	VPADDQ       X6, x, x \
	VMOVQ        x, r

// func adlerSumsAVX2(p []byte) (s, u, w uint64)
//
// Per 32-byte block k of p (len(p) rounded down to a multiple of 32):
// Y1 += VPSADBW(block, 0), the byte sums of its four 8-byte quarters;
// Y3 += Y1 before that, so that it ends as Σ_k Σ_{j<k} S_j lane-wise;
// Y2 += VPMADDWD(VPMADDUBSW(block, weights), ones), the weighted byte sums
// in eight 32-bit lanes. Each VPMADDUBSW pair is at most 255·(32+31), below
// its int16 saturation; each Y2 lane grows by at most 255·(32+31+30+29) a
// block, below 2^32 for up to 2^17 blocks (4 MiB).
TEXT ·adlerSumsAVX2(SB), NOSPLIT, $0-48
	MOVQ p_base+0(FP), SI
	MOVQ p_len+8(FP), CX
	ANDQ $-32, CX
	ADDQ SI, CX
	VPXOR   Y0, Y0, Y0
	VPXOR   Y1, Y1, Y1
	VPXOR   Y2, Y2, Y2
	VPXOR   Y3, Y3, Y3
	VMOVDQU adlerWeights<>(SB), Y4
	VMOVDQU adlerOnes<>(SB), Y5
	CMPQ    SI, CX
	JAE     fold

loop:
	VMOVDQU    (SI), Y6
	VPADDQ     Y1, Y3, Y3
	VPSADBW    Y0, Y6, Y7
	VPADDQ     Y7, Y1, Y1
	VPMADDUBSW Y4, Y6, Y6
	VPMADDWD   Y5, Y6, Y6
	VPADDD     Y6, Y2, Y2
	ADDQ       $32, SI
	CMPQ       SI, CX
	JB         loop

fold:
	HSUMQ(Y1, X1, AX)
	MOVQ AX, s+24(FP)
	HSUMQ(Y3, X3, AX)
	MOVQ AX, u+32(FP)
	// Y2's 32-bit lanes widened: the odd ones shifted down, the even ones
	// with the odd ones cleared.
	VPSRLQ   $32, Y2, Y7
	VPBLENDD $0xaa, Y0, Y2, Y2
	VPADDQ   Y7, Y2, Y2
	HSUMQ(Y2, X2, AX)
	MOVQ AX, w+40(FP)
	VZEROUPPER
	RET
