package codec

import "io"

// noneEncoder writes bytes as they are.
type noneEncoder struct {
	o   options
	out []byte
}

func (e *noneEncoder) Encode(dst, src []byte) []byte { return append(dst, src...) }
func (e *noneEncoder) Reset(dst []byte)              { e.out = dst }
func (e *noneEncoder) Kind() Kind                    { return None }
func (e *noneEncoder) config() options               { return e.o }
func (e *noneEncoder) release()                      { e.out = nil }

func (e *noneEncoder) Write(p []byte) (int, error) {
	e.out = append(e.out, p...)
	return len(p), nil
}

func (e *noneEncoder) Finish() []byte {
	out := e.out
	e.out = nil
	return out
}

// noneReader passes r through until closed.
type noneReader struct {
	r      io.Reader
	closed bool
}

func (r *noneReader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, ErrClosed
	}
	return r.r.Read(p)
}

func (r *noneReader) Close() error {
	r.closed = true
	return nil
}
