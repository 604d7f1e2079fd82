package server

import (
	"fmt"
	"sync/atomic"

	"github.com/shuffled/shuffled/disks"
	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/iocrypt"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
)

// registration is where a session's map outputs go: the registered Spark
// local dirs (layout), or, when layout is nil, the executor's directory on
// whichever disk of the daemon's root each map output is placed.
type registration struct {
	app, executor string
	layout        shufflefile.Layout
	root          *shufflefile.Root // the opened local dirs; closed when the session ends
	dirs          []string
	key           *appKey // the IO encryption key registered, if any; released when the session ends
	secret        bool    // an auth secret was registered (its bytes are serving's alone)
	// ended is set when a removal of the application ended the
	// registration (registry.forget): its connection opens nothing more
	// under it, and may register again.
	ended atomic.Bool
}

func (sess *session) register(id uint32, m *protocol.RegisterExecutor) error {
	sess.dropEnded()
	if sess.reg != nil {
		return protocol.Errorf(protocol.CodeAlreadyExists, "connection already registered as %s/%s", sess.reg.app, sess.reg.executor)
	}
	reg, err := sess.s.registerExecutor(sess.cred.UID, m)
	if err != nil {
		return err
	}
	sess.reg = reg
	sess.log = sess.log.With("app", reg.app, "executor", reg.executor)
	sess.log.Info("executor registered", "dirs", reg.dirs, "io_encryption", reg.key != nil, "auth_secret", reg.secret)
	r := &protocol.Registered{Dirs: reg.dirs}
	if m.WithAuth {
		r.Serve = sess.s.serveInfo()
	}
	sess.send(id, r)
	return nil
}

// dropEnded lets go of the session's registration once a removal of its
// application ended it: the connection is then as one never registered.
// Its Commits still answering (the removal aborted them) read the
// session's logger: they end before it changes.
func (sess *session) dropEnded() {
	if sess.reg != nil && sess.reg.ended.Load() {
		sess.s.unregister(sess.reg)
		sess.log.Info("registration ended by the removal of its application")
		sess.reg = nil
		sess.commits.Wait()
		if sess.connLog != nil {
			sess.log = sess.connLog
		}
	}
}

// endedError is OpenMapOutput's answer on a connection whose registration
// a removal of its application ended.
func endedError(reg *registration) error {
	return fmt.Errorf("%w: OpenMapOutput: the registration of executor %q of application %q ended when the application was removed; RegisterExecutor again to go on",
		errdefs.ErrFailedPrecondition, reg.executor, reg.app)
}

// unregister undoes a registration: a session ended, or its key was
// refused, or a removal ended it.
func (s *Server) unregister(reg *registration) {
	s.apps.ended(reg)
	if reg.root != nil {
		reg.root.Close()
	}
	if reg.key != nil {
		s.keys.release(reg.key)
	}
}

// registerExecutor is register with the IO encryption key the executor
// may carry: it is bound to the application only once the registry has
// checked that uid owns the application, so that no other uid's
// registration ever places or changes a key.
func (s *Server) registerExecutor(uid uint32, m *protocol.RegisterExecutor) (*registration, error) {
	defer m.AuthSecret.Clear()
	key, err := ioKey(m)
	if err != nil {
		return nil, err
	}
	reg, err := s.register(uid, m)
	if err != nil {
		return nil, err
	}
	if key != nil {
		if reg.key, err = s.keys.bind(reg.app, uid, key); err != nil {
			s.unregister(reg)
			return nil, err
		}
	} else if s.keys.held(reg.app) {
		s.unregister(reg)
		return nil, fmt.Errorf("%w: RegisterExecutor.io_encryption_key: absent, but the executors of application %q connected now registered one: "+
			"its map outputs are encrypted (spark.io.encryption.enabled), and an executor without the key could write none of them", errdefs.ErrFailedPrecondition, reg.app)
	}
	if m.WithAuth {
		var hashed *shufflefile.SparkHashed
		if reg.root != nil {
			if h, ok := reg.root.Layout().(shufflefile.SparkHashed); ok {
				hashed = &h
			}
		}
		reg.secret = len(m.AuthSecret) > 0
		if err := s.bindServing(reg.app, reg.executor, uid, m.AuthSecret, hashed); err != nil {
			s.unregister(reg)
			return nil, err
		}
	}
	return reg, nil
}

// ioKey expands RegisterExecutor's IO encryption key, if it carries one,
// and clears the message's copy of it.
func ioKey(m *protocol.RegisterExecutor) (*iocrypt.Key, error) {
	if len(m.IOEncryptionKey) == 0 {
		return nil, nil
	}
	defer m.IOEncryptionKey.Clear()
	k, err := iocrypt.NewKey(m.IOEncryptionKey)
	if err != nil {
		return nil, fmt.Errorf("%w: RegisterExecutor.io_encryption_key: %v", errdefs.ErrInvalidArgument, err)
	}
	return k, nil
}

// register resolves where an executor's map outputs go and records the
// application's owner. Spark local dirs are opened once (a
// shufflefile.Root): every later file operation in them runs relative to
// those descriptors. The first registration of a local dir in this process
// sweeps the temp files a crash left there, outside every lock; a
// concurrent registration of the same dir waits for that sweep.
func (s *Server) register(uid uint32, m *protocol.RegisterExecutor) (*registration, error) {
	if err := protocol.ValidateName("RegisterExecutor.app_id", m.AppID); err != nil {
		return nil, err
	}
	if err := disks.ValidateApp(m.AppID); err != nil {
		return nil, fmt.Errorf("RegisterExecutor.app_id: %w", err)
	}
	if err := protocol.ValidateName("RegisterExecutor.executor_id", m.ExecutorID); err != nil {
		return nil, err
	}
	reg := &registration{app: m.AppID, executor: m.ExecutorID}
	var hashed *shufflefile.SparkHashed
	if len(m.LocalDirs) == 0 {
		for _, d := range s.disks.Disks() {
			dir, err := d.ExecutorDir(m.AppID, m.ExecutorID)
			if err != nil {
				return nil, err
			}
			reg.dirs = append(reg.dirs, dir)
		}
	} else {
		for i, d := range m.LocalDirs {
			resolved, err := s.allowedDir(d)
			if err != nil {
				return nil, fmt.Errorf("RegisterExecutor.local_dirs[%d]: %w", i, err)
			}
			reg.dirs = append(reg.dirs, resolved)
		}
		hashed = &shufflefile.SparkHashed{LocalDirs: reg.dirs, SubDirs: int(m.SubDirs)}
		if err := hashed.Validate(); err != nil {
			return nil, fmt.Errorf("%w: RegisterExecutor: %v", errdefs.ErrInvalidArgument, err)
		}
		root, err := shufflefile.OpenRoot(s.fs, *hashed, s.owners(uid))
		if err != nil {
			return nil, fmt.Errorf("%w: RegisterExecutor.local_dirs: %v", errdefs.ErrPermissionDenied, err)
		}
		if err := s.checkLocalDirs(root, uid); err != nil {
			root.Close()
			return nil, err
		}
		reg.layout, reg.root = root, root
	}

	s.apps.unowned(m.AppID, func() bool { return s.disks.HasApplication(m.AppID) })
	claim, err := s.apps.claim(uid, m.AppID, hashed, reg)
	if err != nil {
		if reg.root != nil {
			reg.root.Close()
		}
		return nil, err
	}
	s.metrics.Applications.Set(float64(claim.apps))
	if claim.changed {
		s.saveRegistry()
	}
	for d, done := range claim.mine {
		if n, err := shufflefile.Sweep(reg.root.FS(), d); err != nil {
			s.log.Warn("sweeping local dir", "dir", d, "err", err)
		} else if n > 0 {
			s.log.Info("removed temp files left by an earlier run", "dir", d, "files", n)
		}
		close(done)
	}
	for _, done := range claim.others {
		<-done
	}
	return reg, nil
}
