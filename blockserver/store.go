package blockserver

import (
	"io"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/shufflefile"
)

// Errors a Store and the server return; their text goes to the client in
// an RpcFailure or ChunkFetchFailure.
var (
	// ErrUnsupported: a message or a block id this server does not serve.
	ErrUnsupported = errdefs.New(errdefs.ErrUnsupported, "blockserver: unsupported")
	// ErrNotAuthorized: the connection may not read or remove what the
	// request names.
	ErrNotAuthorized = errdefs.New(errdefs.ErrPermissionDenied, "blockserver: not authorized")
	// ErrUnknownExecutor: the daemon knows no registration of the
	// executor a request names.
	ErrUnknownExecutor = errdefs.New(errdefs.ErrNotFound, "blockserver: unknown executor")
)

// Store is what the block server reads from the daemon: where an
// executor's committed map outputs are, the applications' secrets, and
// removal. The daemon (package server) implements it; every name in a
// request reaches it only after the server has checked it as a plain name
// (shufflefile.ValidateName) and the connection's right to the
// application. Its methods are safe for concurrent use.
type Store interface {
	// Secret returns a copy of app's authentication secret (the caller
	// may clear it), ok false when app has none.
	Secret(app string) (secret []byte, ok bool)
	// Executor returns where the committed map outputs of exec of app
	// are, or an error wrapping ErrUnknownExecutor.
	Executor(app, exec string) (Executor, error)
	// LocalDirs returns the Spark local dirs exec of app registered
	// (the hashed layout a reducer on the node reads directly), or an
	// error wrapping ErrUnknownExecutor when it registered none.
	LocalDirs(app, exec string) (dirs []string, err error)
	// Remove removes app's map outputs of shuffle (every shuffle when
	// shuffle is -1) through the daemon's removal path.
	Remove(app string, shuffle int32) (outputs, bytes int64, err error)
}

// Executor is one executor's committed map outputs, found from its
// registration. Close releases what Executor opened.
type Executor interface {
	// Open opens the committed map output id with its checksums of alg
	// (checksum.None: no checksum file read). A map output not committed
	// is an error that wraps fs.ErrNotExist.
	Open(id shufflefile.ID, alg checksum.Algorithm) (*shufflefile.MapOutput, error)
	// Remove removes the committed map output id, reporting whether
	// there was one.
	Remove(id shufflefile.ID) (bool, error)
	io.Closer
}

// ErrAuthFailed is returned by a Handshake step that refuses the client.
var ErrAuthFailed = errdefs.New(errdefs.ErrPermissionDenied, "blockserver: authentication failed")

// SecretFunc returns an application's secret, ok false when it has none
// (Store.Secret).
type SecretFunc func(app string) (secret []byte, ok bool)

// NewHandshake starts the server side of one connection's authentication
// bootstrap (Spark's SASL DIGEST-MD5 or AuthEngine), looking secrets up
// through secret. The daemon wires package sparkauth here; nil serves no
// authentication: a connection that starts one is refused, and an
// application with a secret is never served.
type NewHandshake func(secret SecretFunc) Handshake

// Handshake is one connection's authentication in progress.
type Handshake interface {
	// Step takes the body of an RpcRequest the client sent while
	// authenticating and returns the body of the RpcResponse to send;
	// an error refuses the client (the server answers RpcFailure and
	// closes the connection).
	Step(rpcBody []byte) (reply []byte, err error)
	// Done reports that the client authenticated.
	Done() bool
	// AppID is the application the client authenticated for (after
	// Done).
	AppID() string
	// Cipher is the transport encryption negotiated (after Done); nil
	// for none.
	Cipher() Cipher
}

// Cipher turns the connection's bytes into frames and back, as Spark's
// TransportCipher (AuthEngine) or SaslEncryption put them on the wire.
type Cipher interface {
	// WrapReader returns the decrypted stream of frames read from r.
	WrapReader(r io.Reader) io.Reader
	// WrapWriter returns the writer of frames to w.
	WrapWriter(w io.Writer) FrameWriter
}

// FrameWriter encrypts outbound frames. BeginFrame announces the whole
// length of the next frame (its length field's value); the frame's bytes
// follow in any number of Writes, so that a block is sent through a
// bounded buffer rather than whole.
type FrameWriter interface {
	io.Writer
	BeginFrame(n int64) error
}
