//go:build cuda

package gpu

// scratch is a set of named device buffers that grow to the largest size a
// caller has asked for (a quarter more, so that slowly growing batches do
// not reallocate every time). Its owner serializes the calls.
type scratch struct {
	d    *Device
	bufs map[string]*Buffer
}

func newScratch(d *Device) scratch { return scratch{d: d, bufs: make(map[string]*Buffer)} }

// get returns buffer name of at least n bytes.
func (s *scratch) get(name string, n int64) (*Buffer, error) {
	n = max(n, 256)
	if b := s.bufs[name]; b != nil && b.size >= n {
		return b, nil
	} else if b != nil {
		b.Free()
		delete(s.bufs, name)
	}
	b, err := s.d.Alloc(n + n/4)
	if err != nil {
		return nil, err
	}
	s.bufs[name] = b
	return b, nil
}

// free frees every buffer.
func (s *scratch) free() {
	for k, b := range s.bufs {
		b.Free()
		delete(s.bufs, k)
	}
}
