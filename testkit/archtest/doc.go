// Package archtest holds the import-direction check: its test reads the
// package table of docs/architecture.md (each package, what it owns, what
// it may import) and fails when a package's production files import a
// project package its row does not list, when a package has no row, or
// when an import breaks one of the rules every package keeps (see
// TestImportDirection). TestPackageState fails on a package-level
// variable of the daemon's packages that is mutable state (Package state
// in docs/architecture.md). It imports nothing and nothing imports it; `go
// test ./...` runs it.
package archtest
