package server

import (
	"errors"
	"time"

	"github.com/shuffled/shuffled/protocol"
)

// writeTimeout bounds how long a response may wait for a client that does
// not read; past it the connection is closed.
const writeTimeout = time.Minute

// reply sends err as an Error response, or nothing when err is nil (the
// handler sent its own response).
func (sess *session) reply(id uint32, err error) {
	if err == nil {
		return
	}
	code := codeOf(err)
	sess.s.metrics.Errors.WithLabelValues(code.String()).Inc()
	msg := err.Error()
	var pe *protocol.Error
	if errors.As(err, &pe) {
		msg = pe.Message
	}
	if code == protocol.CodeInternal {
		sess.log.Error("request failed", "id", id, "err", err)
	} else {
		sess.log.Debug("request refused", "id", id, "code", code, "err", err)
	}
	sess.send(id, protocol.Errorf(code, "%s", msg)) // Errorf cuts an overlong message on a character boundary
}

// send writes one response frame; a client that does not read within
// writeTimeout loses its connection.
func (sess *session) send(id uint32, m protocol.Message) {
	sess.wmu.Lock()
	defer sess.wmu.Unlock()
	if sess.ended {
		return // a connection-level error went out: it is the last frame
	}
	sess.ended = id == 0
	var err error
	sess.wbuf, err = protocol.AppendFrame(sess.wbuf[:0], id, m)
	if err != nil {
		sess.log.Error("encoding response", "type", m.Type(), "err", err)
		sess.wbuf, _ = protocol.AppendFrame(sess.wbuf[:0], id, protocol.Errorf(protocol.CodeInternal, "response %v does not encode: %v", m.Type(), err))
	} else if n := len(sess.wbuf) - protocol.HeaderSize; n > sess.s.cfg.MaxFrame {
		// No response is larger than max_frame: a client that accepts
		// max_frame reads every one.
		sess.wbuf, _ = protocol.AppendFrame(sess.wbuf[:0], id, protocol.Errorf(protocol.CodeResourceExhausted,
			"response %v of %d bytes exceeds max_frame %d", m.Type(), n, sess.s.cfg.MaxFrame))
	}
	timeout := writeTimeout
	if sess.stopping.Load() {
		timeout = stopWriteTimeout
	}
	sess.conn.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := sess.conn.Write(sess.wbuf); err != nil {
		sess.close()
	}
	if cap(sess.wbuf) > 1<<20 {
		sess.wbuf = nil
	}
}
