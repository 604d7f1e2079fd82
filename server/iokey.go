package server

import (
	"fmt"
	"sync"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/iocrypt"
)

// ioKeys holds the IO encryption keys executors registered
// (RegisterExecutor.io_encryption_key), in memory only: never in the
// registry file, a log, a metric or an error. A key belongs to its
// application and to the uid that registered it (the application's
// owner, whom the registry checked first); every executor of an
// application registers the same key (Spark makes one per application),
// so another is refused. A key lives while a session registered with it
// lives; RemoveApplication forgets it at once, and a restart forgets
// every key (executors register again, key included).
type ioKeys struct {
	mu   sync.Mutex
	apps map[string]*appKey
}

// appKey is the key of one application, shared by its sessions.
type appKey struct {
	app  string
	uid  uint32
	key  *iocrypt.Key
	refs int  // sessions registered with it
	gone bool // forgotten (RemoveApplication): no map output opens with it
}

// bind records that a session of app, registered by uid, holds key; a key
// of app that another session holds must be the same.
func (k *ioKeys) bind(app string, uid uint32, key *iocrypt.Key) (*appKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.apps == nil {
		k.apps = map[string]*appKey{}
	}
	ak := k.apps[app]
	if ak == nil {
		ak = &appKey{app: app, uid: uid, key: key}
		k.apps[app] = ak
	} else if ak.uid != uid || !ak.key.Equal(key) {
		return nil, fmt.Errorf("%w: RegisterExecutor.io_encryption_key: not the key other executors of application %q registered (one key per application)", errdefs.ErrInvalidArgument, app)
	}
	ak.refs++
	return ak, nil
}

// held reports whether a session of app holds a key now.
func (k *ioKeys) held(app string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.apps[app] != nil
}

// release drops a session's hold on its key; the last one forgets it.
func (k *ioKeys) release(ak *appKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if ak.refs--; ak.refs == 0 && k.apps[ak.app] == ak {
		delete(k.apps, ak.app)
	}
}

// forget drops app's key: the sessions that registered it can open no
// encrypted map output any more.
func (k *ioKeys) forget(app string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	ak := k.apps[app]
	if ak == nil {
		return false
	}
	ak.gone = true
	delete(k.apps, app)
	return true
}

// usable returns the key for a map output of the session's registration:
// nil with an error when it registered none or the key was forgotten.
func (k *ioKeys) usable(ak *appKey) (*iocrypt.Key, error) {
	if ak == nil {
		return nil, fmt.Errorf("%w: OpenMapOutput.flags: encryption asked, but RegisterExecutor carried no io_encryption_key", errdefs.ErrFailedPrecondition)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if ak.gone {
		return nil, fmt.Errorf("%w: OpenMapOutput.flags: encryption asked, but application %q was removed and its key forgotten; register again", errdefs.ErrFailedPrecondition, ak.app)
	}
	return ak.key, nil
}
