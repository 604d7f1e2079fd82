package writer

// sink receives encoded records of non-decreasing partition ids (a run) or
// in any order (a Spec.Sink).
type sink interface {
	// put takes an encoded record and says how much of the record's quota
	// it keeps (for bytes it holds in memory); the stream releases the
	// rest.
	put(r *record) (kept int64, err error)
	// close flushes and closes files; it runs once, after the last put or
	// after a failure.
	close(failed bool) error
	// remove deletes whatever files the sink made and gives back the
	// memory it holds; it runs after close.
	remove()
}

// custom adapts a Spec.Sink.
type custom struct{ s Sink }

func (c custom) put(r *record) (int64, error) { return 0, c.s.Write(r.partition, r.out, r.sum) }
func (c custom) close(failed bool) error      { return c.s.Close(failed) }
func (c custom) remove()                      { c.s.Remove() }
