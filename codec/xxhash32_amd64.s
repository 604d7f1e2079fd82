//go:build amd64 && !purego

#include "textflag.h"

// func xxStripesSSE41(v *[4]uint32, b []byte)
//
// The four lanes v over the 16-byte stripes of b (len(b) rounded down to a
// multiple of 16): per stripe, PMULLD takes the four 32-bit inputs times
// xxPrime2 and stores them in the frame; each lane then adds its product,
// rotates left by 13 and multiplies by xxPrime1 in a general register.
TEXT ·xxStripesSSE41(SB), NOSPLIT, $16-32
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
	MOVL $2246822519, AX // xxPrime2
	MOVQ AX, X1
	PSHUFD $0, X1, X1

loop:
	MOVOU  (SI), X0
	PMULLD X1, X0
	MOVOU  X0, 0(SP)
	ADDL   0(SP), R8
	ADDL   4(SP), R9
	ADDL   8(SP), R10
	ADDL   12(SP), R11
	ROLL   $13, R8
	ROLL   $13, R9
	ROLL   $13, R10
	ROLL   $13, R11
	IMUL3L $-1640531535, R8, R8 // xxPrime1 = 2654435761
	IMUL3L $-1640531535, R9, R9
	IMUL3L $-1640531535, R10, R10
	IMUL3L $-1640531535, R11, R11
	ADDQ   $16, SI
	CMPQ   SI, CX
	JB     loop

	MOVL R8, 0(DI)
	MOVL R9, 4(DI)
	MOVL R10, 8(DI)
	MOVL R11, 12(DI)

done:
	RET
