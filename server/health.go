package server

import "errors"

// Errors of the health probes (metrics.WatchHealth): /healthz and /readyz
// answer 503 with their text.
var (
	errNotServing = errors.New("server: not serving: no listener accepts connections")
	errDraining   = errors.New("server: draining: no new connections or map outputs")
)

// Live reports whether the daemon is up: nil from Serve's first listener
// on, draining included (a draining daemon still finishes the map outputs
// open on its connections).
func (s *Server) Live() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.draining && s.mu.listeners.Len() == 0 {
		return errNotServing
	}
	return nil
}

// Ready reports whether the daemon takes new work: nil while a listener
// accepts connections and it is not draining.
func (s *Server) Ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.mu.draining:
		return errDraining
	case s.mu.listeners.Len() == 0:
		return errNotServing
	}
	return nil
}
