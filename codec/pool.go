package codec

import (
	"fmt"
	"runtime"
)

// Pool keeps reusable encoders of one kind and one set of options. Get and
// Put are safe for concurrent use; with Put after use, encoding does not
// allocate in steady state. The pool keeps a bounded number of idle
// encoders: Put drops the rest.
type Pool struct {
	o    options
	idle chan encoder
}

// NewPool returns a pool of encoders of kind k with opts.
func NewPool(k Kind, opts ...Option) (*Pool, error) {
	o, err := newOptions(k, opts)
	if err != nil {
		return nil, err
	}
	e, err := newEncoder(o) // fails now, if ever, rather than in Get
	if err != nil {
		return nil, err
	}
	p := &Pool{o: o, idle: make(chan encoder, max(4, 2*runtime.GOMAXPROCS(0)))}
	p.idle <- e
	return p, nil
}

// Kind returns the codec of the pool's encoders.
func (p *Pool) Kind() Kind { return p.o.kind }

// MaxEncodedLen returns MaxEncodedLen for the pool's kind and options.
func (p *Pool) MaxEncodedLen(n int) int {
	if n < 0 {
		return -1
	}
	return p.o.maxEncodedLen(n)
}

// Get returns an idle encoder, or a new one.
func (p *Pool) Get() Encoder {
	select {
	case e := <-p.idle:
		return e
	default:
	}
	e, err := newEncoder(p.o)
	if err != nil {
		// NewPool built one with the same options.
		panic(fmt.Sprintf("codec: new %v encoder: %v", p.o.kind, err))
	}
	return e
}

// Put returns an encoder that Get gave, ending any stream in progress. It
// panics on an encoder of other options, which is a programming error.
func (p *Pool) Put(e Encoder) {
	pe, ok := e.(encoder)
	if !ok || pe.config() != p.o {
		panic(fmt.Sprintf("codec: Pool.Put of a foreign %v encoder into a %v pool", e.Kind(), p.o.kind))
	}
	pe.release()
	select {
	case p.idle <- pe:
	default:
	}
}

// Encode appends one complete stream holding src to dst with a pooled
// encoder.
func (p *Pool) Encode(dst, src []byte) []byte {
	e := p.Get()
	dst = e.Encode(dst, src)
	p.Put(e)
	return dst
}
