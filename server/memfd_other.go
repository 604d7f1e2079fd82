//go:build !linux

package server

import "fmt"

func mapMemfd(fd int, off, length int64) ([]byte, func(), error) {
	return nil, nil, fmt.Errorf("%w: the memfd data plane needs Linux", errUnsupported)
}
