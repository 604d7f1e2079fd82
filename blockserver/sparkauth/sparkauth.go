package sparkauth

import (
	"crypto/rand"
	"fmt"
	"io"

	"github.com/shuffled/shuffled/errdefs"
)

// Errors. Their texts name fields and values a client sent, never a secret.
var (
	// ErrMalformed: a handshake message that does not parse.
	ErrMalformed = errdefs.New(errdefs.ErrInvalidArgument, "sparkauth: malformed handshake message")
	// ErrAuthFailed: the client did not prove it holds the application's
	// secret (wrong secret, another application's secret, a tampered
	// message), or asked for something this server does not offer.
	ErrAuthFailed = errdefs.New(errdefs.ErrPermissionDenied, "sparkauth: authentication failed")
	// ErrUnknownApp: the SecretFunc has no secret for the application.
	ErrUnknownApp = errdefs.New(errdefs.ErrPermissionDenied, "sparkauth: no secret for application")
	// ErrState: Step called after the handshake finished or failed.
	ErrState = errdefs.New(errdefs.ErrFailedPrecondition, "sparkauth: handshake is over")
	// ErrCorrupt: bytes after the handshake that do not decrypt or
	// authenticate (a wrong key, tampering, a broken frame).
	ErrCorrupt = errdefs.New(errdefs.ErrDataLoss, "sparkauth: encrypted stream is corrupt")
)

// SecretFunc returns the application's secret (the bytes of the string
// Spark's SecurityManager.getSecretKey returns, UTF-8), or ok=false when the
// application has none or is unknown. The Server neither keeps nor modifies
// the slice.
type SecretFunc func(appID string) (secret []byte, ok bool)

// Options configure a Server. The zero value accepts both protocols and
// finds the AuthEngine settings from the client's first encrypted bytes.
type Options struct {
	// DisableSASL refuses SASL DIGEST-MD5 (Spark clients without
	// spark.network.crypto.enabled).
	DisableSASL bool
	// DisableAuthEngine refuses AuthEngine (spark.network.crypto.enabled).
	DisableAuthEngine bool
	// SASLRequireEncryption offers only the auth-conf QOP, as Spark's
	// spark.network.sasl.serverAlwaysEncrypt does: a client without
	// spark.authenticate.enableSaslEncryption then fails.
	SASLRequireEncryption bool
	// MaxSASLBlock bounds the plaintext of one SASL-encrypted block the
	// client sends (Spark's spark.network.sasl.maxEncryptedBlockSize, 64 KiB
	// by default); 0 means DefaultMaxSASLBlock. A connection holds about
	// twice this much while it reads.
	MaxSASLBlock int
	// AuthEngineVersion, if 1 or 2, accepts only clients with that
	// spark.network.crypto.authEngineVersion; 0 finds it from the stream.
	AuthEngineVersion int
	// AuthEngineCipher, if "AES/CTR/NoPadding" or "AES/GCM/NoPadding",
	// accepts only clients with that spark.network.crypto.cipher; "" finds
	// it from the stream.
	AuthEngineCipher string
	// Rand is the source of nonces, salts and ephemeral keys; nil means
	// crypto/rand. Tests only.
	Rand io.Reader

	// saslCiphers overrides the ciphers the SASL challenge offers (tests:
	// the JDK's client picks 3des whenever it is offered).
	saslCiphers []string
}

// DefaultMaxSASLBlock is MaxSASLBlock's default: 1 MiB, sixteen times Spark's
// default block.
const DefaultMaxSASLBlock = 1 << 20

// The AuthEngine ciphers, as spark.network.crypto.cipher names them.
const (
	CipherCTR = "AES/CTR/NoPadding"
	CipherGCM = "AES/GCM/NoPadding"
)

func (o *Options) validate() error {
	if o.MaxSASLBlock == 0 {
		o.MaxSASLBlock = DefaultMaxSASLBlock
	}
	if o.MaxSASLBlock < 1024 || o.MaxSASLBlock > 1<<30 {
		return fmt.Errorf("%w: Options.MaxSASLBlock %d out of range [1024,%d]", errdefs.ErrInvalidArgument, o.MaxSASLBlock, 1<<30)
	}
	if o.AuthEngineVersion < 0 || o.AuthEngineVersion > 2 {
		return fmt.Errorf("%w: Options.AuthEngineVersion %d: want 0, 1 or 2", errdefs.ErrInvalidArgument, o.AuthEngineVersion)
	}
	switch o.AuthEngineCipher {
	case "", CipherCTR, CipherGCM:
	default:
		return fmt.Errorf("%w: Options.AuthEngineCipher %q: want %q, %q or empty", errdefs.ErrInvalidArgument, o.AuthEngineCipher, CipherCTR, CipherGCM)
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	return nil
}

// Cipher is the transport encryption a handshake negotiated. WrapReader and
// WrapWriter are each called at most once per connection, after the last
// handshake reply was written; the reader and the writer may then be used
// from two goroutines (one each).
type Cipher interface {
	// WrapReader returns the decrypted byte stream of network-common frames
	// read from r, the raw connection. Its errors wrap ErrCorrupt when the
	// bytes do not decrypt or authenticate.
	WrapReader(r io.Reader) io.Reader
	// WrapWriter returns a writer that encrypts what is written to it onto
	// w, the raw connection (see FrameWriter). With AuthEngine the writer
	// learns the client's settings from the reader: write only after the
	// first request was read (the protocol's order anyway).
	WrapWriter(w io.Writer) FrameWriter
}

// The Ciphers a Server returns are also fmt.Stringers naming the protocol
// and cipher, e.g. "sasl auth-conf 3des" or "authengine v2
// AES/CTR/NoPadding" (never key material); fmt.Sprint(c) gives it.

// FrameWriter encrypts the outbound frame stream.
//
// BeginFrame(n) announces that the next n bytes written are one frame (n is
// its length field's value); they may follow in any number of Writes, and
// the frame is encrypted as Spark encrypts one message: one GCM message,
// SASL blocks of at most 64 KiB that do not span frames. Within such a
// frame the writer holds back at most one GCM segment (32 KiB) or one SASL
// block (64 KiB) until the frame's last byte is written; a Write past the
// announced end, or a BeginFrame before it, fails (ErrFrame).
//
// Writes outside an announced frame are encrypted and written through
// before Write returns, each as its own GCM message or SASL blocks; the
// receiver reads one stream either way, so message boundaries need not
// match frames, but each costs a header.
type FrameWriter interface {
	io.Writer
	BeginFrame(n int64) error
}

// ErrFrame: a FrameWriter used against the frame it was announced.
var ErrFrame = errdefs.New(errdefs.ErrInternal, "sparkauth: write does not match the announced frame")

// frameState checks Writes against BeginFrame.
type frameState struct {
	left int64 // bytes of the announced frame not yet written
	in   bool  // a frame is announced and not complete
}

func (f *frameState) begin(n int64) error {
	if n < 0 {
		return fmt.Errorf("%w: BeginFrame(%d)", ErrFrame, n)
	}
	if f.in {
		return fmt.Errorf("%w: BeginFrame(%d) with %d bytes of the previous frame unwritten", ErrFrame, n, f.left)
	}
	f.left, f.in = n, n > 0
	return nil
}

// take accounts for a Write of k bytes.
func (f *frameState) take(k int) error {
	if !f.in {
		return nil
	}
	if int64(k) > f.left {
		return fmt.Errorf("%w: Write of %d bytes with %d left in the frame", ErrFrame, k, f.left)
	}
	f.left -= int64(k)
	f.in = f.left > 0
	return nil
}

// Mechanism names the protocol a handshake used.
type Mechanism int

const (
	// MechanismNone: no handshake message yet.
	MechanismNone Mechanism = iota
	// MechanismSASL: SASL DIGEST-MD5 (SaslMessage).
	MechanismSASL
	// MechanismAuthEngine: Spark's AuthEngine (AuthMessage).
	MechanismAuthEngine
)

func (m Mechanism) String() string {
	switch m {
	case MechanismSASL:
		return "sasl"
	case MechanismAuthEngine:
		return "authengine"
	}
	return "none"
}

// The first byte of each protocol's messages.
const (
	saslTag       = 0xEA // SaslMessage.TAG_BYTE
	authEngineTag = 0xFB // AuthMessage.TAG_BYTE
)

type state int

const (
	stateNew state = iota
	stateSASLChallenged
	stateDone
	stateFailed
)

// Server runs the server side of one connection's handshake. It is not safe
// for concurrent use; the Cipher it returns is (see Cipher).
type Server struct {
	secrets SecretFunc
	opts    Options
	optsErr error

	state  state
	mech   Mechanism
	appID  string
	sasl   *saslServer
	cipher Cipher
}

// NewServer returns a Server that looks secrets up with secrets. Invalid
// options make every Step fail with an error naming the field.
func NewServer(secrets SecretFunc, opts Options) *Server {
	s := &Server{secrets: secrets, opts: opts}
	s.optsErr = s.opts.validate()
	return s
}

// Step handles the body of one RpcRequest the client sent before the
// handshake completed and returns the body of the RpcResponse to send back.
// On error, answer RpcFailure with a generic message and close the
// connection: the Server is failed for good.
func (s *Server) Step(body []byte) (reply []byte, err error) {
	if s.optsErr != nil {
		s.state = stateFailed
		return nil, s.optsErr
	}
	switch s.state {
	case stateDone, stateFailed:
		return nil, ErrState
	}
	reply, err = s.step(body)
	if err != nil {
		s.state = stateFailed
		s.appID = ""
		if s.sasl != nil {
			s.sasl.wipe()
			s.sasl = nil
		}
		return nil, err
	}
	return reply, nil
}

func (s *Server) step(body []byte) ([]byte, error) {
	if len(body) == 0 {
		return nil, fmt.Errorf("%w: empty body", ErrMalformed)
	}
	if s.state == stateNew {
		switch body[0] {
		case saslTag:
			if s.opts.DisableSASL {
				return nil, fmt.Errorf("%w: SASL is disabled", ErrAuthFailed)
			}
			s.mech = MechanismSASL
		case authEngineTag:
			if s.opts.DisableAuthEngine {
				return nil, fmt.Errorf("%w: AuthEngine is disabled", ErrAuthFailed)
			}
			s.mech = MechanismAuthEngine
		default:
			return nil, fmt.Errorf("%w: first byte %#x is neither a SaslMessage (0xea) nor an AuthMessage (0xfb): the client runs no handshake", ErrMalformed, body[0])
		}
	}
	if s.mech == MechanismAuthEngine {
		appID, reply, c, err := authEngineRespond(body, s.secrets, &s.opts)
		if err != nil {
			return nil, err
		}
		s.appID, s.cipher, s.state = appID, c, stateDone
		return reply, nil
	}
	return s.saslStep(body)
}

// Done reports whether the client authenticated.
func (s *Server) Done() bool { return s.state == stateDone }

// Failed reports whether a Step failed.
func (s *Server) Failed() bool { return s.state == stateFailed }

// AppID returns the application the client authenticated for, "" before.
func (s *Server) AppID() string {
	if s.state != stateDone {
		return ""
	}
	return s.appID
}

// Mechanism returns the protocol the client chose.
func (s *Server) Mechanism() Mechanism { return s.mech }

// Cipher returns the transport cipher negotiated, or nil when the connection
// stays plaintext after the handshake (SASL with the auth QOP) or the
// handshake is not done.
func (s *Server) Cipher() Cipher {
	if s.state != stateDone {
		return nil
	}
	return s.cipher
}

// String describes the server's state without key material.
func (s *Server) String() string {
	st := [...]string{"new", "challenged", "done", "failed"}[s.state]
	if s.cipher != nil {
		return fmt.Sprintf("sparkauth.Server{%s, app %q, %v}", st, s.appID, s.cipher)
	}
	return fmt.Sprintf("sparkauth.Server{%s, %s, app %q}", st, s.mech, s.appID)
}
