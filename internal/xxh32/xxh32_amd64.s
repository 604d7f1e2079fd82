//go:build amd64 && !purego

#include "textflag.h"

// ROUND adds a lane's product from the frame at off to its accumulator r,
// rotates it left by 13 and multiplies it by xxPrime1 (2654435761, as a
// signed 32-bit immediate).
#define ROUND(off, r) \
	ADDL   off(SP), r \
	ROLL   $13, r \
	IMUL3L $-1640531535, r, r

// func xxStripesAVX(v *[4]uint32, b []byte)
//
// The four lanes v over the 16-byte stripes of b (len(b) rounded down to a
// multiple of 16): per stripe, VPMULLD takes the four 32-bit inputs times
// xxPrime2 and stores them in the frame; each lane then finishes its round
// in a general register.
TEXT ·xxStripesAVX(SB), NOSPLIT, $16-32
	MOVQ v+0(FP), DI
	MOVQ b_base+8(FP), SI
	MOVQ b_len+16(FP), CX
	ANDQ $-16, CX
	JZ   done
	ADDQ SI, CX
	MOVL 0(DI), R8
	MOVL 4(DI), R9
	MOVL 8(DI), R10
	MOVL 12(DI), R11
	MOVL $2246822519, AX     // xxPrime2
	MOVQ AX, X1
	VPSHUFD $0, X1, X1       // in all four lanes

loop:
	VPMULLD (SI), X1, X0
	VMOVDQU X0, 0(SP)
	ROUND(0, R8)
	ROUND(4, R9)
	ROUND(8, R10)
	ROUND(12, R11)
	ADDQ    $16, SI
	CMPQ    SI, CX
	JB      loop

	MOVL R8, 0(DI)
	MOVL R9, 4(DI)
	MOVL R10, 8(DI)
	MOVL R11, 12(DI)

done:
	RET
