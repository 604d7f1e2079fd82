//go:build !(386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm)

package codec

import (
	"encoding/binary"
	"unsafe"
)

// Little-endian loads and stores at byte offset i of p, without bounds
// checks: callers say why i is in bounds. Other platforms go through
// encoding/binary on slices of the bytes.

func bytesAt(p unsafe.Pointer, i, n int) []byte { return unsafe.Slice((*byte)(unsafe.Add(p, i)), n) }

func load16(p unsafe.Pointer, i int) uint16 { return binary.LittleEndian.Uint16(bytesAt(p, i, 2)) }
func load32(p unsafe.Pointer, i int) uint32 { return binary.LittleEndian.Uint32(bytesAt(p, i, 4)) }
func load64(p unsafe.Pointer, i int) uint64 { return binary.LittleEndian.Uint64(bytesAt(p, i, 8)) }
func store64(p unsafe.Pointer, i int, v uint64) {
	binary.LittleEndian.PutUint64(bytesAt(p, i, 8), v)
}
