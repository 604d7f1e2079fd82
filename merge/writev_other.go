//go:build !linux

package merge

import "github.com/shuffled/shuffled/vfs"

// WriteBuffers writes bufs in order.
func WriteBuffers(dst vfs.File, bufs [][]byte) error {
	for _, b := range bufs {
		if _, err := dst.Write(b); err != nil {
			return err
		}
	}
	return nil
}
