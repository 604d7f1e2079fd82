//go:build !cuda

package gpu

// Compressor compresses device batches into lz4-java streams. This build
// has none.
type Compressor struct{ _ [0]func() }

// Compressed is the result of Compressor.Compress. This build has none.
type Compressed struct {
	Ptr     uintptr
	Size    int64
	Streams []Range
	Adler32 []uint32
}

func (d *Device) NewCompressor(slots int) (*Compressor, error) { return nil, ErrNotSupported }
func (d *Device) LoadCompressor(ptx []byte, slots int) (*Compressor, error) {
	return nil, ErrNotSupported
}
func (c *Compressor) Close() error            { return ErrNotSupported }
func (c *Compressor) Slots() int              { return 0 }
func (c *Compressor) UseSharedMemory(on bool) {}
func (c *Compressor) ResidentWarps() int      { return 0 }
func (c *Compressor) Compress(src uintptr, size int64, pl *CompressPlan, blockSize int) (*Compressed, error) {
	return nil, ErrNotSupported
}
func (r *Compressed) Release() {}
