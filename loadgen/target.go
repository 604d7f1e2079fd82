package loadgen

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"

	"github.com/shuffled/shuffled/client"
	"github.com/shuffled/shuffled/partition/synth"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/protocol/columnar"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/writer"
)

// shuffleID is the shuffle every map output of a run belongs to; task i is
// map id i.
const shuffleID = 0

// A target is where map tasks go: a daemon over its socket, or an
// in-process writer engine.
type target interface {
	// open starts task's map output for executor slot (0 to
	// Concurrency-1; one slot runs one task at a time).
	open(ctx context.Context, slot, task int) (output, error)
}

// An output is one open map output.
type output interface {
	// markLast says that the next write is the map output's last batch.
	markLast()
	write(ctx context.Context, pb *poolBatch) error
	commit(ctx context.Context) (committed, error)
	abort()
}

// committed is what a commit reports.
type committed struct {
	lengths  []int64
	runs     int
	existing bool
	// dir holds the committed files (flat layout); empty when nothing was
	// written (the ceiling mode).
	dir string
}

// daemonTarget sends map tasks to a daemon, one connection per slot.
type daemonTarget struct {
	cfg   *Config
	kind  protocol.PayloadKind
	appID string
	slots []daemonSlot
	// schema declares the batches' columns to a kudo map output (set
	// once the pool is generated).
	schema []protocol.SchemaField
}

type daemonSlot struct {
	c   *client.Client
	dir string // where the daemon puts this executor's outputs
}

// dialDaemon connects cfg.Concurrency executors of application appID to
// the daemon at socket and registers them with no local dirs, so their
// outputs go to the daemon's root, flat.
func dialDaemon(ctx context.Context, cfg *Config, socket, appID string) (*daemonTarget, error) {
	t := &daemonTarget{cfg: cfg, appID: appID, kind: protocol.KindColumnar}
	var key []byte
	if cfg.Encrypt {
		if cfg.ioKey == nil {
			cfg.ioKey = new([16]byte)
			_, _ = rand.Read(cfg.ioKey[:]) // crypto/rand.Read never fails
		}
		key = cfg.ioKey[:]
	}
	if cfg.Payload == PayloadOpaque {
		t.kind = protocol.KindOpaque
	}
	if cfg.Payload == PayloadKudo {
		// The schema's columns; 0 rows are enough to know them.
		b, err := synth.Generate(cfg.Schema, cfg.Seed, 0)
		if err != nil {
			return nil, err
		}
		t.schema = columnar.SparkSchema(b)
	}
	plane := client.PlaneInline
	if cfg.DataPlane == PlaneMemfd {
		plane = client.PlaneMemfd
	}
	for slot := range cfg.Concurrency {
		c, err := client.Dial(ctx, socket, client.WithName("shuffled-loadgen"), client.WithDataPlane(plane))
		if err != nil {
			t.close()
			if slot == 0 && cfg.Socket != "" && (errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)) {
				return nil, usagef("--socket %s: no daemon listens there (%v); start one (shuffled serve --socket %s) or drop --socket to run an embedded daemon", socket, errors.Unwrap(err), socket)
			}
			return nil, fmt.Errorf("executor %d: %w", slot, err)
		}
		t.slots = append(t.slots, daemonSlot{c: c})
		if slot == 0 {
			if err := t.checkFeatures(c.ServerHello()); err != nil {
				t.close()
				return nil, err
			}
		}
		reg, err := c.Register(ctx, protocol.RegisterExecutor{AppID: appID, ExecutorID: executorID(slot), IOEncryptionKey: bytes.Clone(key)})
		if err != nil {
			t.close()
			return nil, fmt.Errorf("executor %d: register: %w", slot, err)
		}
		if len(reg.Dirs) == 1 {
			t.slots[slot].dir = reg.Dirs[0]
		}
	}
	return t, nil
}

func executorID(slot int) string { return fmt.Sprintf("loadgen-%d", slot) }

// checkFeatures refuses a workload the daemon cannot take, naming the flag
// to change.
func (t *daemonTarget) checkFeatures(h protocol.ServerHello) error {
	if t.kind == protocol.KindColumnar && h.Features&protocol.FeatureColumnar == 0 {
		return usagef("--payload %s: the daemon (%s) does not take columnar batches; use --payload opaque", t.cfg.Payload, h.Server)
	}
	if t.cfg.Payload == PayloadKudo && h.Features&protocol.FeatureKudo == 0 {
		return usagef("--payload kudo: the daemon (%s) does not write kudo tables; use --payload columnar", h.Server)
	}
	if t.cfg.DataPlane == PlaneMemfd && h.Features&protocol.FeatureMemfd == 0 {
		return usagef("--data-plane memfd: the daemon (%s) does not take memfd batches; use --data-plane inline", h.Server)
	}
	if t.cfg.DataPlane == PlaneCUDAIPC && h.Features&protocol.FeatureCUDAIPC == 0 {
		return usagef("--gpu: the daemon (%s) does not take batches in GPU memory; run a cuda build of shuffled (make cuda)", h.Server)
	}
	return nil
}

// checkPool refuses inline batches larger than the daemon takes.
func (t *daemonTarget) checkPool(p *pool) error {
	if t.cfg.DataPlane != PlaneInline {
		return nil
	}
	h := t.slots[0].c.ServerHello()
	for _, pb := range p.batches {
		if n := len(pb.payload); n > int(h.MaxInline) {
			return usagef("--rows %d: a batch of %d bytes exceeds the daemon's inline limit of %d bytes; lower --rows or use --data-plane memfd", t.cfg.Rows, n, h.MaxInline)
		}
	}
	return nil
}

// dirFor returns where slot's outputs go: what the daemon answered, or,
// for the embedded daemon, <root>/<app>/<executor>.
func (t *daemonTarget) dirFor(slot int, root string) string {
	if d := t.slots[slot].dir; d != "" || root == "" {
		return d
	}
	return filepath.Join(root, t.appID, executorID(slot))
}

func (t *daemonTarget) close() {
	for _, s := range t.slots {
		s.c.Close()
	}
}

func (t *daemonTarget) open(ctx context.Context, slot, task int) (output, error) {
	s := &t.slots[slot]
	req := protocol.OpenMapOutput{
		ShuffleID:     shuffleID,
		MapID:         int64(task),
		NumPartitions: int32(t.cfg.Partitions),
		Kind:          t.kind,
		Codec:         t.cfg.Codec,
		Checksum:      t.cfg.Checksum,
	}
	if t.cfg.Payload == PayloadKudo {
		req.Format, req.Schema = protocol.FormatKudo, t.schema
	}
	if t.cfg.Encrypt {
		req.Flags |= protocol.OpenEncrypt
	}
	m, err := s.c.Open(ctx, req)
	if err != nil {
		return nil, err
	}
	return &daemonOutput{m: m, kind: t.kind, dir: s.dir}, nil
}

type daemonOutput struct {
	m    *client.MapOutput
	kind protocol.PayloadKind
	dir  string
}

func (o *daemonOutput) markLast() { o.m.MarkLast() }

func (o *daemonOutput) write(ctx context.Context, pb *poolBatch) error {
	switch {
	case pb.dev != nil:
		return o.m.WriteColumnarDevice(ctx, pb.dev.ipc, pb.dev.region, pb.layout)
	case o.kind == protocol.KindOpaque && pb.memfd != nil:
		return o.m.WriteOpaqueMemfd(ctx, pb.memfd, pb.offsets)
	case o.kind == protocol.KindOpaque:
		return o.m.WriteOpaque(ctx, pb.payload, pb.offsets)
	case pb.memfd != nil:
		return o.m.WriteColumnarMemfd(ctx, pb.memfd, pb.layout)
	default:
		return o.m.WriteColumnar(ctx, pb.payload, pb.layout)
	}
}

func (o *daemonOutput) commit(ctx context.Context) (committed, error) {
	r, err := o.m.Commit(ctx)
	if err != nil {
		return committed{}, err
	}
	return committed{lengths: r.Lengths, runs: int(r.Runs), existing: r.Existing, dir: o.dir}, nil
}

func (o *daemonOutput) abort() { o.m.Abort(context.Background()) }

// engineTarget writes map tasks straight into an in-process writer engine.
type engineTarget struct {
	cfg  *Config
	e    *writer.Engine
	mode compareMode
	dir  string
}

func (t *engineTarget) open(ctx context.Context, slot, task int) (output, error) {
	w, err := t.e.Open(ctx, writer.Spec{
		ID:            shufflefile.ID{Shuffle: shuffleID, Map: int64(task)},
		NumPartitions: t.cfg.Partitions,
		Codec:         t.cfg.codecKind(),
		Checksum:      t.cfg.checksumAlg(),
		Layout:        shufflefile.Flat(t.dir),
		Sink:          t.mode.sink,
		Format:        t.cfg.format(),
	})
	if err != nil {
		return nil, err
	}
	o := &engineOutput{w: w}
	if t.mode.writes {
		o.dir = t.dir
	}
	return o, nil
}

type engineOutput struct {
	w   *writer.MapWriter
	dir string
}

func (o *engineOutput) markLast() { o.w.MarkLast() }

func (o *engineOutput) write(ctx context.Context, pb *poolBatch) error {
	if pb.batch != nil {
		return o.w.WriteBatch(ctx, pb.batch, nil)
	}
	return o.w.WriteOpaque(ctx, pb.payload, pb.offsets, nil)
}

func (o *engineOutput) commit(ctx context.Context) (committed, error) {
	r, err := o.w.Commit(ctx)
	if err != nil {
		return committed{}, err
	}
	return committed{lengths: r.Lengths, runs: r.Runs, existing: r.Existing, dir: o.dir}, nil
}

func (o *engineOutput) abort() { o.w.Abort() }
