package server

import (
	"fmt"
	"time"
)

// helloMaxFrame is the frame limit before the handshake: a Hello's
// payload is at most 6 + 255 bytes.
const helloMaxFrame = 4 << 10

// frameAdmitMin: a payload longer than this waits for its share of
// Config.FrameMemory (admitFrame); shorter ones are read at once.
const frameAdmitMin = 64 << 10

// defaultFrameReadTimeout bounds how long the payload of an admitted frame
// may take to arrive (the Server's frameReadTimeout); past it the
// connection is closed (a framing error).
const defaultFrameReadTimeout = time.Minute

// uidFrameShare is what the frames of one peer uid may hold of
// Config.FrameMemory: half of it, or one frame if that is more.
func uidFrameShare(c Config) int64 { return max(c.FrameMemory/2, int64(c.MaxFrame)) }

// admitFrame takes n bytes of the daemon's frame memory for the payload
// about to be read, within the peer uid's share, waiting while other
// connections hold them; the frame then has the Server's frameReadTimeout to arrive.
// releaseFrame gives the bytes back once the request is applied.
func (sess *session) admitFrame(n int) error {
	if err := sess.uidFrames.Acquire(sess.ctx, int64(n)); err != nil {
		return fmt.Errorf("waiting for uid %d's share of --frame-memory for a frame of %d bytes: %w", sess.cred.UID, n, err)
	}
	if err := sess.s.frames.Acquire(sess.ctx, int64(n)); err != nil {
		sess.uidFrames.Release(int64(n))
		return fmt.Errorf("waiting for --frame-memory for a frame of %d bytes: %w", n, err)
	}
	sess.frame = int64(n)
	sess.conn.SetReadDeadline(time.Now().Add(sess.s.frameReadTimeout))
	return nil
}

func (sess *session) releaseFrame() {
	if sess.frame > 0 {
		sess.s.frames.Release(sess.frame)
		sess.uidFrames.Release(sess.frame)
		sess.frame = 0
		sess.conn.SetReadDeadline(time.Time{})
	}
}
