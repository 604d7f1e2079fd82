// Package integration tests the shuffled daemon as operators run it: each
// test builds the real binary once (TestMain), starts it on a temp socket and
// root, and drives it over its socket with the Go client and with raw,
// hostile frames; then it reads every committed map output back from disk.
//
// The invariants it holds the daemon to are those of docs/reliability.md:
// a committed map output is complete and decodes to exactly the bytes its
// client sent; a crash leaves committed outputs whole and temp files that the
// next start removes; bad input aborts only its own map output and the daemon
// keeps serving everyone else.
//
// Run the long variants with
//
//	go test ./integration -long
//
// and the data-plane comparison with
//
//	go test ./integration -run '^$' -bench DataPlane -count 5
package integration
