//go:build !linux

package vfs

import "errors"

// oLargefile is O_LARGEFILE, which only Linux has.
const oLargefile = 0

func confineOS([]string, ConfineOptions) (Confined, error) {
	return nil, errors.New("vfs: confine: needs Linux (openat2 or O_NOFOLLOW walks relative to a directory descriptor)")
}
