//go:build !linux

package server

import "errors"

var (
	errEscapes   = errors.New("leads out of its allowed root")
	errNoBeneath = errors.New("resolving beneath a directory is not supported here")
)

// resolveBeneath is not available outside Linux: allowedDir resolves the
// path whole.
func resolveBeneath(root, rel string) (string, error) { return "", errNoBeneath }
