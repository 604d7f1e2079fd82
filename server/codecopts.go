package server

import (
	"fmt"

	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/protocol"
)

// codecOptions checks the block size and level an OpenMapOutput asks of
// codec k (0: the daemon's --block-size, zstd level 1) and returns them
// for writer.Spec. lz4 takes block sizes of 64 bytes to 32 MiB, as
// lz4-java's LZ4BlockOutputStream does; snappy 1 byte to 32 MiB (what
// snappy-java's SnappyOutputStream and our decoder read); zstd levels
// 1..22. A codec takes no option it has no use for: a nonzero one is
// InvalidArgument, naming the field.
func codecOptions(k codec.Kind, m *protocol.OpenMapOutput) (blockSize, level int, err error) {
	bs, lv := int64(m.BlockSize), int64(m.Level)
	switch k {
	case codec.LZ4, codec.Snappy:
		lo := int64(1)
		if k == codec.LZ4 {
			lo = codec.MinLZ4BlockSize
		}
		if bs != 0 && (bs < lo || bs > codec.MaxBlockSize) {
			return 0, 0, fmt.Errorf("%w: OpenMapOutput.block_size %d out of range [%d, %d] for codec %v (0 = the daemon's default)",
				errdefs.ErrInvalidArgument, bs, lo, codec.MaxBlockSize, k)
		}
		if lv != 0 {
			return 0, 0, fmt.Errorf("%w: OpenMapOutput.level %d: codec %v takes no level, want 0", errdefs.ErrInvalidArgument, lv, k)
		}
	case codec.Zstd:
		if bs != 0 {
			return 0, 0, fmt.Errorf("%w: OpenMapOutput.block_size %d: codec zstd takes no block size, want 0", errdefs.ErrInvalidArgument, bs)
		}
		if lv != 0 && (lv < codec.MinLevel || lv > codec.MaxLevel) {
			return 0, 0, fmt.Errorf("%w: OpenMapOutput.level %d out of range [%d, %d] for codec zstd (0 = the daemon's default)",
				errdefs.ErrInvalidArgument, lv, codec.MinLevel, codec.MaxLevel)
		}
	default:
		if bs != 0 {
			return 0, 0, fmt.Errorf("%w: OpenMapOutput.block_size %d: codec %v takes no block size, want 0", errdefs.ErrInvalidArgument, bs, k)
		}
		if lv != 0 {
			return 0, 0, fmt.Errorf("%w: OpenMapOutput.level %d: codec %v takes no level, want 0", errdefs.ErrInvalidArgument, lv, k)
		}
	}
	return int(bs), int(lv), nil
}
