//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package codec

import "unsafe"

// Little-endian loads and stores at byte offset i of p, without bounds
// checks: callers say why i is in bounds. On little-endian platforms they
// are plain (unaligned) memory accesses.

func load16(p unsafe.Pointer, i int) uint16 { return *(*uint16)(unsafe.Add(p, i)) }
func load32(p unsafe.Pointer, i int) uint32 { return *(*uint32)(unsafe.Add(p, i)) }
func load64(p unsafe.Pointer, i int) uint64 { return *(*uint64)(unsafe.Add(p, i)) }
func store64(p unsafe.Pointer, i int, v uint64) {
	*(*uint64)(unsafe.Add(p, i)) = v
}
