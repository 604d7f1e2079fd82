//go:build !linux

package vfs

import "errors"

func confineOS([]string, ConfineOptions) (Confined, error) {
	return nil, errors.New("vfs: confine: needs Linux (openat2 or O_NOFOLLOW walks relative to a directory descriptor)")
}
