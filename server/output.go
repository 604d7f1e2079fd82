package server

import (
	"errors"
	"fmt"
	"sync"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/disks"
	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/iocrypt"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/writer"
)

// MaxOutputsPerConnection bounds the map outputs one connection holds open.
const MaxOutputsPerConnection = 4096

// PartitionStateBytes is what an open map output is charged per partition
// against Config.PartitionStateLimit at Open: the writer's per-run lengths
// and checksums (12 bytes), the index it encodes (8) and the CommitResult
// (16), rounded up for a second run and the tables' slack. Every run after
// the second is charged writer.RunTableBytes per partition when it starts.
const PartitionStateBytes = 48

// commitResultSize is the payload size of a CommitResult of n partitions
// with checksums: the largest response a map output of n partitions gets.
func commitResultSize(n int) int { return 4 + 4 + 4 + 8*n + 4 + 8*n }

// output is one open map output of a session.
type output struct {
	w      *writer.MapWriter
	kind   protocol.PayloadKind
	app    string
	reg    *registration // the registration it opened under
	uid    uint32        // the peer uid of its connection
	sess   *session      // its connection
	id     shufflefile.ID
	res    *disks.Reservation // nil outside the daemon's root
	state  int64              // partition-state bytes charged (PartitionStateBytes each)
	failed error              // a batch failed: the map output is aborted
	last   bool               // a Batch with LAST came: no other may follow
	ended  sync.Once          // counts the output as ended, once
	schema []partition.Field  // kudo: the columns declared at Open; nil otherwise
}

// end counts the map output as no longer open, committed or aborted, and
// releases its disk space reservation; only the first call counts.
func (o *output) end(s *Server, aborted bool) {
	o.ended.Do(func() {
		if aborted {
			s.metrics.Aborts.Inc()
			s.aborts.Add(1)
		}
		if o.res != nil {
			o.res.Release()
		}
		s.outputEnded(o)
		s.releaseOutput(o)
		if o.sess != nil && o.sess.opened.Add(-1) == 0 {
			o.sess.data.Idle() // nothing of the connection references its mappings
		}
	})
}

func (sess *session) open(id uint32, m *protocol.OpenMapOutput) error {
	s := sess.s
	if reg := sess.reg; reg != nil && reg.ended.Load() {
		sess.dropEnded()
		return endedError(reg)
	}
	if sess.reg == nil {
		return fmt.Errorf("%w: OpenMapOutput before RegisterExecutor", errdefs.ErrFailedPrecondition)
	}
	if len(sess.outputs) >= MaxOutputsPerConnection {
		return fmt.Errorf("%w: %d map outputs already open on this connection", errdefs.ErrResourceExhausted, len(sess.outputs))
	}
	if n := commitResultSize(int(m.NumPartitions)); n > s.cfg.MaxFrame {
		return fmt.Errorf("%w: OpenMapOutput.num_partitions %d: its CommitResult (%d bytes) would not fit in max_frame %d",
			errdefs.ErrInvalidArgument, m.NumPartitions, n, s.cfg.MaxFrame)
	}
	k := s.codec
	if m.Codec != "" {
		var err error
		if k, err = codec.Parse(m.Codec); err != nil {
			return fmt.Errorf("%w: OpenMapOutput.codec: %v", errdefs.ErrUnsupported, err)
		}
	}
	alg := s.checksum
	if m.Checksum != "" {
		var err error
		if alg, err = checksum.Parse(m.Checksum); err != nil {
			return fmt.Errorf("%w: OpenMapOutput.checksum: %v", errdefs.ErrUnsupported, err)
		}
	}
	blockSize, level, err := codecOptions(k, m)
	if err != nil {
		return err
	}
	format, schema, err := openFormat(m)
	if err != nil {
		return err
	}
	oid := shufflefile.ID{Shuffle: m.ShuffleID, Map: m.MapID}
	if err := oid.Validate(); err != nil {
		return err
	}
	var key *iocrypt.Key
	state := int64(m.NumPartitions) * PartitionStateBytes
	if m.Flags&protocol.OpenEncrypt != 0 {
		if key, err = s.keys.usable(sess.reg.key); err != nil {
			return err
		}
		state += int64(m.NumPartitions) * iocrypt.IVSize // the IV table
	}
	o := &output{kind: m.Kind, app: sess.reg.app, reg: sess.reg, uid: sess.cred.UID, id: oid, state: state, schema: schema}
	if err := s.admitOutput(o); errors.Is(err, errRemoving) {
		// A removal of its shuffle runs: the map output opens aborted,
		// as the removal's own victims are, with nothing made of it; its
		// Batch and Commit get Aborted.
		o.failed = err
		sess.handle++
		sess.outputs[sess.handle] = o
		sess.send(id, &protocol.Opened{Handle: sess.handle})
		return nil
	} else if err != nil {
		return err
	}
	defer s.openEnded(o.app)
	opened := false
	defer func() {
		if !opened {
			s.releaseOutput(o)
		}
	}()
	layout := sess.reg.layout
	if layout == nil {
		dir, res, err := s.place(sess.reg, oid)
		if err != nil {
			return err
		}
		layout, o.res = shufflefile.Flat(dir), res
	}
	spec := writer.Spec{
		ID:            oid,
		NumPartitions: int(m.NumPartitions),
		Codec:         k,
		BlockSize:     blockSize,
		Level:         level,
		Checksum:      alg,
		Layout:        layout,
		Format:        format,
		Encryption:    key,
	}
	if o.res != nil {
		spec.Space = o.res
	}
	spec.RunState = func(n int64) error { return s.chargeRun(o, n) }
	w, err := s.eng.Open(sess.ctx, spec)
	if err != nil {
		if o.res != nil {
			s.disks.ReportError(o.res.Disk(), err)
			o.res.Release()
		}
		return err
	}
	o.w = w
	if err := s.outputOpened(o); err != nil {
		_ = w.Abort()
		if o.res != nil {
			o.res.Release()
		}
		return err
	}
	opened = true // o.end releases the admission from now on
	o.sess = sess
	sess.opened.Add(1)
	sess.handle++
	sess.outputs[sess.handle] = o
	sess.send(id, &protocol.Opened{Handle: sess.handle})
	return nil
}

// take removes a handle from the session, for Commit and Abort.
func (sess *session) take(handle uint64) (*output, error) {
	o, ok := sess.outputs[handle]
	if !ok {
		return nil, fmt.Errorf("%w: handle %d is not an open map output of this connection", errdefs.ErrNotFound, handle)
	}
	delete(sess.outputs, handle)
	return o, nil
}

func (sess *session) abort(o *output, why string) {
	if o.w == nil {
		return // opened aborted (a removal ran): nothing was admitted
	}
	_ = o.w.Abort() // only a committed output refuses, and it is not in sess.outputs
	sess.log.Debug("map output aborted", "shuffle", o.id.Shuffle, "map", o.id.Map, "why", why)
	o.end(sess.s, true)
}
