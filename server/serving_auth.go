package server

import (
	"io"

	"github.com/shuffled/shuffled/blockserver"
	"github.com/shuffled/shuffled/blockserver/sparkauth"
)

// sparkHandshake is the block server's authentication unless a test sets
// another (WithHandshake): Spark's own bootstraps, SASL DIGEST-MD5 and
// AuthEngine, through package sparkauth, with the application's secret
// from the executors' registrations (serving.md, "Authentication").
func sparkHandshake(secret blockserver.SecretFunc) blockserver.Handshake {
	return &authHandshake{s: sparkauth.NewServer(sparkauth.SecretFunc(secret), sparkauth.Options{})}
}

// authHandshake adapts a sparkauth.Server to blockserver.Handshake.
type authHandshake struct{ s *sparkauth.Server }

func (h *authHandshake) Step(body []byte) ([]byte, error) { return h.s.Step(body) }
func (h *authHandshake) Done() bool                       { return h.s.Done() }
func (h *authHandshake) AppID() string                    { return h.s.AppID() }

func (h *authHandshake) Cipher() blockserver.Cipher {
	c := h.s.Cipher()
	if c == nil {
		return nil
	}
	return authCipher{c}
}

// authCipher adapts a sparkauth.Cipher (whose FrameWriter is
// blockserver's).
type authCipher struct{ c sparkauth.Cipher }

func (a authCipher) WrapReader(r io.Reader) io.Reader { return a.c.WrapReader(r) }
func (a authCipher) WrapWriter(w io.Writer) blockserver.FrameWriter {
	return a.c.WrapWriter(w)
}
