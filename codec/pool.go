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

// A Cache keeps idle encoders of a few pools for one goroutine, so that a
// goroutine encoding stream after stream (a writer's worker) takes its
// encoder without meeting the other goroutines at the pool: at 16 cores,
// taking every encoder from the shared pool made the workers contend for
// it. The zero value is ready to use; a Cache is not safe for concurrent
// use. Close gives its encoders back to their pools.
type Cache struct {
	slots [cacheSlots]struct {
		pool *Pool
		enc  encoder // nil while lent
	}
}

// cacheSlots is how many pools a Cache keeps an encoder of: a goroutine
// usually encodes with one, sometimes a second.
const cacheSlots = 2

// Get returns an encoder of p: the cache's, else one from p.
func (c *Cache) Get(p *Pool) Encoder {
	for i := range c.slots {
		if s := &c.slots[i]; s.pool == p && s.enc != nil {
			e := s.enc
			s.enc = nil
			return e
		}
	}
	return p.Get()
}

// Put keeps an encoder that Get gave for p, ending any stream in
// progress; the encoder of the pool used least recently goes back to its
// pool when every slot holds another pool's. It panics on an encoder of
// other options than p's, as Pool.Put does.
func (c *Cache) Put(p *Pool, e Encoder) {
	pe, ok := e.(encoder)
	if !ok || pe.config() != p.o {
		panic(fmt.Sprintf("codec: Cache.Put of a foreign %v encoder for a %v pool", e.Kind(), p.o.kind))
	}
	pe.release()
	i := 0
	for i < len(c.slots)-1 && c.slots[i].pool != p && c.slots[i].pool != nil {
		i++
	}
	if s := c.slots[i]; s.enc != nil {
		s.pool.Put(s.enc) // p's other idle one, or the least recent pool's
	}
	// Slot 0 holds the pool used last.
	copy(c.slots[1:i+1], c.slots[:i])
	c.slots[0].pool, c.slots[0].enc = p, pe
}

// Close gives the cache's encoders back to their pools; the cache stays
// usable.
func (c *Cache) Close() {
	for i := range c.slots {
		if s := &c.slots[i]; s.enc != nil {
			s.pool.Put(s.enc)
		}
		c.slots[i].pool, c.slots[i].enc = nil, nil
	}
}
