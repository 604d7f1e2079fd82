//go:build !linux

package ingest

import (
	"fmt"
	"time"

	"github.com/shuffled/shuffled/errdefs"
)

func mapMemfd(fd int, off, length int64) ([]byte, func(), error) {
	return nil, nil, fmt.Errorf("%w: the memfd data plane needs Linux", errdefs.ErrUnsupported)
}

// memfdCache has nothing to cache where memfds do not exist.
type memfdCache struct {
	budget *MemfdBudget
	grace  time.Duration
	shared *sharedMaps
}

// sharedMaps has no mappings to share here.
type sharedMaps struct{ resident *residentPages }

// sharedMapping is never made here.
type sharedMapping struct{ kept *keptRegion }

func (c *memfdCache) mapShared(fd int, off, length int64) ([]byte, *sharedMapping, func(), error) {
	_, _, err := mapMemfd(fd, off, length)
	return nil, nil, nil, err
}

func (c *memfdCache) close() {}

func (c *memfdCache) idle() {}

// MemfdBudget is the peer uid's budget of cached mappings: none here.
type MemfdBudget struct{}

func (c *memfdCache) len() (int, int64) { return 0, 0 }

// dropPages has no mapped memfd pages to let go of here.
func dropPages([]byte) {}

// populatePages has no memfd pages to read in here.
func populatePages([]byte) bool { return false }
