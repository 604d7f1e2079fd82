package metrics

import "github.com/prometheus/client_golang/prometheus"

// Reasons of a failed fetch, the values of the "reason" label of
// Serving.FetchFailures.
const (
	FetchNotFound      = "not_found"      // no such executor, map output or partition
	FetchNotAuthorized = "not_authorized" // another application's blocks, or authentication needed
	FetchBadRequest    = "bad_request"    // a request that does not decode or breaks a bound
	FetchLimit         = "limit"          // a stream, chunk or memory bound of the server
	FetchIO            = "io"             // reading the files failed, or they disagree
	FetchUnsupported   = "unsupported"    // a message the server does not serve
)

// FetchReasons lists every reason of Serving.FetchFailures.
func FetchReasons() []string {
	return []string{FetchNotFound, FetchNotAuthorized, FetchBadRequest, FetchLimit, FetchIO, FetchUnsupported}
}

// Serving holds the metrics of the block server (--serve-addr). Its fields
// are safe for concurrent use.
type Serving struct {
	Connections        prometheus.Gauge       // open connections
	ConnectionsTotal   prometheus.Counter     // connections accepted
	ConnectionsRefused prometheus.Counter     // connections closed at accept: past the connection bound
	ConnectionsClosed  *prometheus.CounterVec // connections the server closed, label "reason"
	Bytes              prometheus.Counter     // block bytes sent in ChunkFetchSuccess bodies
	Chunks             prometheus.Counter     // chunks (blocks) sent
	FetchFailures      *prometheus.CounterVec // RpcFailure and ChunkFetchFailure answers, label "reason"
	AuthFailures       prometheus.Counter     // handshakes refused
}

// Reasons the server closes a connection, the values of the "reason"
// label of Serving.ConnectionsClosed.
const (
	CloseMalformed = "malformed" // a frame that does not decode, a response type, an oversized length
	CloseIdle      = "idle"      // no request within the idle timeout, or a frame or handshake too slow
	CloseSlow      = "slow"      // a reader that did not take a response within the write timeout
	CloseAuth      = "auth"      // authentication refused or required
	CloseShutdown  = "shutdown"  // the daemon stopping
)

// CloseReasons lists every reason of Serving.ConnectionsClosed.
func CloseReasons() []string {
	return []string{CloseMalformed, CloseIdle, CloseSlow, CloseAuth, CloseShutdown}
}

// NewServing returns the block server's metrics, registered nowhere.
func NewServing() *Serving {
	s := &Serving{
		Connections:        gauge("serve_connections", "Open connections of the block server."),
		ConnectionsTotal:   counter("serve_connections_total", "Connections the block server accepted."),
		ConnectionsRefused: counter("serve_connections_refused_total", "Connections the block server closed at once: past its connection bound."),
		ConnectionsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "serve_connections_closed_total",
			Help: "Connections the block server closed, by reason (malformed, idle, slow, auth, shutdown); a client's own close is not counted.",
		}, []string{"reason"}),
		Bytes:  counter("serve_bytes_total", "Block bytes the block server sent (ChunkFetchSuccess bodies)."),
		Chunks: counter("serve_chunks_total", "Blocks the block server sent (ChunkFetchSuccess)."),
		FetchFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "serve_fetch_failures_total",
			Help: "Requests the block server answered with RpcFailure, ChunkFetchFailure or StreamFailure, by reason (not_found, not_authorized, bad_request, limit, io, unsupported).",
		}, []string{"reason"}),
		AuthFailures: counter("serve_auth_failures_total", "Authentication handshakes the block server refused."),
	}
	for _, r := range FetchReasons() {
		s.FetchFailures.WithLabelValues(r)
	}
	for _, r := range CloseReasons() {
		s.ConnectionsClosed.WithLabelValues(r)
	}
	return s
}

func (s *Serving) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.Connections, s.ConnectionsTotal, s.ConnectionsRefused, s.ConnectionsClosed,
		s.Bytes, s.Chunks, s.FetchFailures, s.AuthFailures}
}
