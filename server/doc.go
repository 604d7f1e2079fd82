// Package server is the shuffled daemon: it accepts executors on a Unix
// socket, speaks the wire protocol (package protocol, docs/protocol.md),
// and turns each connection's map outputs into committed Spark shuffle files
// through one shared writer engine.
//
// Invariants: every request gets exactly one response; bad input aborts
// only the map output it names and never anything already committed; a
// connection that ends, for any reason, aborts every map output still open
// on it and releases its quota; a registration belongs to the peer uid that
// made it, and only registered, allowed directories are ever written.
package server
