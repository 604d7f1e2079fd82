//go:build !linux

package merge

import "github.com/shuffled/shuffled/vfs"

// writeBuffers writes bufs in order.
func writeBuffers(dst vfs.File, bufs [][]byte) error {
	for _, b := range bufs {
		if _, err := dst.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// mergeMapped is Linux only: elsewhere the merge is sequential.
func mergeMapped(vfs.File, []Run, int, int64, int) (bool, error) { return false, nil }
