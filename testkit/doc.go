// Package testkit is the root of the code that only tests use: helpers
// that tests of several packages share, and a benchmark of the machine.
// Nothing in production imports it or anything below it
// (testkit/archtest, the import-direction check, fails if something does).
//
// Like production code, it is layered so that no test needs an import
// cycle:
//
//   - testkit itself, testkit/leakcheck and testkit/tmpfs import nothing
//     of the project, so the in-package tests of the lowest packages (vfs,
//     shufflefile) may use them: testkit.Promptly, for opens that must
//     never block on a FIFO, is here for that reason, and
//     testkit.SyncBuffer, a log buffer the daemon's goroutines share.
//   - testkit/shuffletest lays out committed map outputs with shufflefile
//     and vfs, so only tests of packages above those, or external tests
//     (package shufflefile_test), import it.
//   - testkit/archtest is the import-direction check of docs/architecture.md.
//   - testkit/wakeup is a benchmark of the machine, not of shuffled
//     (docs/benchmarks.md, "Preallocation and wake-ups"); nothing imports it.
package testkit
