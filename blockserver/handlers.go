package blockserver

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/shufflefile"
)

// errBadRequest is a request that decodes but asks what cannot be: a
// negative id, a block id of another shuffle, an empty fetch.
var errBadRequest = errors.New("blockserver: bad request")

// chunk is one block of a stream: partitions [start, end) of one map
// output.
type chunk struct {
	mapID      int64
	start, end int32
}

// Stream state costs: what an open stream is charged against
// StreamMemory and TotalStreamMemory.
const (
	chunkCost  = 16
	streamCost = 256
)

// maxChunks bounds one stream's chunks (StreamHandle.num_chunks is an
// i32).
const maxChunks = 1 << 24

// stream is one StreamHandle's blocks, fetched in order.
type stream struct {
	ref     *execRef
	shuffle int32
	chunks  []chunk
	next    int
	cost    int64
	cur     *shufflefile.MapOutput // the map output of the last chunk sent
	used    time.Time              // opened, or its last chunk asked
}

// message answers a block-transfer message: the RpcResponse body, or an
// error for an RpcFailure.
func (c *conn) message(body []byte) ([]byte, error) {
	msg, err := DecodeMessage(body)
	if err != nil {
		if errors.Is(err, ErrUnsupported) {
			return nil, fmt.Errorf("%w; this shuffle daemon serves OpenBlocks, FetchShuffleBlocks, GetLocalDirsForExecutors, DiagnoseCorruption, RemoveBlocks and RemoveOutputs", err)
		}
		return nil, err
	}
	switch m := msg.(type) {
	case *OpenBlocks:
		return c.openBlocks(m)
	case *FetchShuffleBlocks:
		return c.fetchShuffleBlocks(m)
	case *GetLocalDirsForExecutors:
		return c.localDirs(m)
	case *DiagnoseCorruption:
		return c.diagnose(m)
	case *RemoveBlocks:
		return c.removeBlocks(m)
	case *RemoveOutputs:
		return c.removeOutputs(m)
	}
	return nil, fmt.Errorf("%w: %T", ErrUnsupported, msg)
}

// allow checks that the connection may read or remove app's outputs and
// that exec (when given) is a plain name.
func (c *conn) allow(app string, execs ...string) error {
	if err := shufflefile.ValidateName("app_id", app); err != nil {
		return fmt.Errorf("%w: %v", errBadRequest, err)
	}
	for _, e := range execs {
		if err := shufflefile.ValidateName("exec_id", e); err != nil {
			return fmt.Errorf("%w: %v", errBadRequest, err)
		}
	}
	if c.app != "" {
		if c.app != app {
			return fmt.Errorf("%w: this connection authenticated for application %q, not %q", ErrNotAuthorized, c.app, app)
		}
		return nil
	}
	if c.s.cfg.RequireAuth {
		return fmt.Errorf("%w: authentication required for application %q", ErrNotAuthorized, app)
	}
	if secret, ok := c.s.cfg.Store.Secret(app); ok {
		clear(secret)
		return fmt.Errorf("%w: application %q requires authentication (spark.authenticate=true): this connection did not authenticate", ErrNotAuthorized, app)
	}
	return nil
}

func (c *conn) openBlocks(m *OpenBlocks) ([]byte, error) {
	if err := c.allow(m.AppID, m.ExecID); err != nil {
		return nil, err
	}
	if len(m.BlockIDs) == 0 {
		return nil, fmt.Errorf("%w: OpenBlocks.block_ids is empty", errBadRequest)
	}
	if err := c.fits(len(m.BlockIDs)); err != nil {
		return nil, err
	}
	chunks := make([]chunk, len(m.BlockIDs))
	var shuffle int32
	for i, id := range m.BlockIDs {
		s, ch, err := parseBlockID(id)
		if err != nil {
			return nil, fmt.Errorf("OpenBlocks.block_ids[%d]: %w", i, err)
		}
		if i == 0 {
			shuffle = s
		} else if s != shuffle {
			return nil, fmt.Errorf("%w: OpenBlocks.block_ids[%d] %q is of shuffle %d, block_ids[0] of shuffle %d: one stream reads one shuffle", errBadRequest, i, id, s, shuffle)
		}
		chunks[i] = ch
	}
	return c.openStream(m.AppID, m.ExecID, shuffle, chunks)
}

// parseBlockID parses a shuffle block id, shuffle_S_M_R (one partition)
// or shuffle_S_M_R1_R2 (a batch: partitions [R1, R2)).
func parseBlockID(id string) (int32, chunk, error) {
	parts := strings.Split(id, "_")
	bad := func(why string) (int32, chunk, error) {
		return 0, chunk{}, fmt.Errorf("%w: block id %q: %s (want shuffle_<shuffle>_<map>_<reduce> or shuffle_<shuffle>_<map>_<start>_<end>)", errBadRequest, id, why)
	}
	if len(parts) != 4 && len(parts) != 5 || parts[0] != "shuffle" {
		if len(parts) > 0 && parts[0] != "shuffle" {
			return 0, chunk{}, fmt.Errorf("%w: block id %q: only shuffle blocks are served", ErrUnsupported, id)
		}
		return bad("not a shuffle block id")
	}
	s, err1 := strconv.ParseInt(parts[1], 10, 32)
	m, err2 := strconv.ParseInt(parts[2], 10, 64)
	r, err3 := strconv.ParseInt(parts[3], 10, 32)
	if err := errors.Join(err1, err2, err3); err != nil || s < 0 || m < 0 || r < 0 {
		return bad("ids must be non-negative decimal numbers")
	}
	ch := chunk{mapID: m, start: int32(r), end: int32(r) + 1}
	if len(parts) == 5 {
		e, err := strconv.ParseInt(parts[4], 10, 32)
		if err != nil || e <= r {
			return bad("a batch's end must be a number above its start")
		}
		ch.end = int32(e)
	} else if r == 1<<31-1 {
		return bad("reduce id out of range")
	}
	return int32(s), ch, nil
}

func (c *conn) fetchShuffleBlocks(m *FetchShuffleBlocks) ([]byte, error) {
	if err := c.allow(m.AppID, m.ExecID); err != nil {
		return nil, err
	}
	switch {
	case m.ShuffleID < 0:
		return nil, fmt.Errorf("%w: FetchShuffleBlocks.shuffle_id %d is negative", errBadRequest, m.ShuffleID)
	case len(m.MapIDs) == 0:
		return nil, fmt.Errorf("%w: FetchShuffleBlocks.map_ids is empty", errBadRequest)
	case len(m.MapIDs) != len(m.ReduceIDs):
		return nil, fmt.Errorf("%w: FetchShuffleBlocks has %d map_ids and %d reduce_ids arrays", errBadRequest, len(m.MapIDs), len(m.ReduceIDs))
	}
	n := 0
	for i, r := range m.ReduceIDs {
		if m.Batch && len(r) != 2 {
			return nil, fmt.Errorf("%w: FetchShuffleBlocks.reduce_ids[%d] has %d ids; a batch fetch names [start, end)", errBadRequest, i, len(r))
		}
		if len(r) == 0 {
			return nil, fmt.Errorf("%w: FetchShuffleBlocks.reduce_ids[%d] is empty", errBadRequest, i)
		}
		n += len(r)
	}
	if m.Batch {
		n = len(m.MapIDs)
	}
	if err := c.fits(n); err != nil {
		return nil, err
	}
	chunks := make([]chunk, 0, n)
	for i, mapID := range m.MapIDs {
		if mapID < 0 {
			return nil, fmt.Errorf("%w: FetchShuffleBlocks.map_ids[%d] %d is negative", errBadRequest, i, mapID)
		}
		r := m.ReduceIDs[i]
		if m.Batch {
			if r[0] < 0 || r[1] <= r[0] {
				return nil, fmt.Errorf("%w: FetchShuffleBlocks.reduce_ids[%d] [%d, %d) is not a range of partitions", errBadRequest, i, r[0], r[1])
			}
			chunks = append(chunks, chunk{mapID: mapID, start: r[0], end: r[1]})
			continue
		}
		for _, p := range r {
			if p < 0 || p == 1<<31-1 {
				return nil, fmt.Errorf("%w: FetchShuffleBlocks.reduce_ids[%d] has reduce id %d", errBadRequest, i, p)
			}
			chunks = append(chunks, chunk{mapID: mapID, start: p, end: p + 1})
		}
	}
	return c.openStream(m.AppID, m.ExecID, m.ShuffleID, chunks)
}

// fits checks, before a stream of n blocks is built, that this
// connection may open it: its stream count and state stay within their
// bounds. (The server-wide bound is taken in openStream.)
func (c *conn) fits(n int) error {
	lim := c.s.lim
	cost := int64(streamCost) + int64(chunkCost)*int64(n)
	if len(c.streams) >= lim.MaxStreams || c.streamMem+cost > lim.StreamMemory {
		c.dropStale()
	}
	switch {
	case n > maxChunks:
		return fmt.Errorf("%w: %d blocks in one stream, more than %d", errLimit, n, maxChunks)
	case len(c.streams) >= lim.MaxStreams:
		return fmt.Errorf("%w: this connection has %d streams open, the most one may have; fetch their chunks first", errLimit, len(c.streams))
	case c.streamMem+cost > lim.StreamMemory:
		return fmt.Errorf("%w: this connection's open streams hold %d bytes; %d more blocks would pass its bound of %d bytes", errLimit, c.streamMem, n, lim.StreamMemory)
	}
	return nil
}

// openStream registers a stream of chunks and returns its StreamHandle.
func (c *conn) openStream(app, exec string, shuffle int32, chunks []chunk) ([]byte, error) {
	lim := c.s.lim
	cost := int64(streamCost + chunkCost*len(chunks))
	if err := c.fits(len(chunks)); err != nil {
		return nil, err
	}
	if c.s.streams.Add(cost) > lim.TotalStreamMemory {
		c.s.streams.Add(-cost)
		return nil, fmt.Errorf("%w: the server's open streams hold their bound of %d bytes; try again later", errLimit, lim.TotalStreamMemory)
	}
	ref, err := c.executor(app, exec)
	if err != nil {
		c.s.streams.Add(-cost)
		return nil, err
	}
	id := c.s.newStreamID()
	c.streams[id] = &stream{ref: ref, shuffle: shuffle, chunks: chunks, cost: cost, used: time.Now()}
	c.streamMem += cost
	return AppendStreamHandle(nil, id, int32(len(chunks))), nil
}

// dropStale closes the streams of this connection whose chunks nobody
// asked for within IdleTimeout: a reducer whose task was killed leaves
// its streams unfetched on a connection its executor keeps, and Spark's
// client gives up a request after spark.network.timeout anyway.
func (c *conn) dropStale() {
	cut := time.Now().Add(-c.s.lim.IdleTimeout)
	for id, st := range c.streams {
		if st.used.Before(cut) {
			c.endStream(id)
		}
	}
}

// endStream closes a stream and gives back what it held.
func (c *conn) endStream(id int64) {
	st := c.streams[id]
	if st == nil {
		return
	}
	delete(c.streams, id)
	if st.cur != nil {
		st.cur.Close()
	}
	c.release(st.ref)
	c.streamMem -= st.cost
	c.s.streams.Add(-st.cost)
}

// executor returns the connection's handle of (app, exec), resolving it
// through the Store on first use.
func (c *conn) executor(app, exec string) (*execRef, error) {
	k := execKey{app, exec}
	if ref := c.execs[k]; ref != nil {
		ref.refs++
		return ref, nil
	}
	ex, err := c.s.cfg.Store.Executor(app, exec)
	if err != nil {
		if errors.Is(err, ErrUnknownExecutor) {
			return nil, err
		}
		return nil, c.hidden(err, fmt.Sprintf("executor %q of application %q", exec, app))
	}
	ref := &execRef{key: k, ex: ex, refs: 1}
	c.execs[k] = ref
	return ref, nil
}

func (c *conn) release(ref *execRef) {
	if ref.refs--; ref.refs == 0 {
		delete(c.execs, ref.key)
		ref.ex.Close()
	}
}

// fetchChunk answers a ChunkFetchRequest with the block's bytes.
func (c *conn) fetchChunk(m *ChunkFetchRequest) error {
	st := c.streams[m.StreamID]
	fail := func(err error) error {
		c.s.m.FetchFailures.WithLabelValues(failureReason(err)).Inc()
		return c.writeFrame(AppendChunkFetchFailure(c.out[:0], m.StreamID, m.ChunkIndex, err.Error()))
	}
	switch {
	case st == nil:
		return fail(fmt.Errorf("%w: stream %d is not open on this connection (unknown, or all its chunks were fetched)", errBadRequest, m.StreamID))
	case int(m.ChunkIndex) != st.next:
		return fail(fmt.Errorf("%w: chunk index %d of stream %d out of order (expected %d of %d)", errBadRequest, m.ChunkIndex, m.StreamID, st.next, len(st.chunks)))
	}
	ch := st.chunks[st.next]
	st.next++
	st.used = time.Now()
	last := st.next == len(st.chunks)
	mo, err := c.mapOutput(st, ch.mapID)
	if err == nil && int(ch.end) > mo.NumPartitions() {
		err = fmt.Errorf("%w: map output %d/%d has %d partitions, partitions [%d, %d) asked", errBadRequest, st.shuffle, ch.mapID, mo.NumPartitions(), ch.start, ch.end)
	}
	if err != nil {
		if last {
			c.endStream(m.StreamID)
		}
		return fail(err)
	}
	off, n := mo.Offsets[ch.start], mo.Offsets[ch.end]-mo.Offsets[ch.start]
	hdr := AppendChunkFetchSuccessHeader(c.out[:0], m.StreamID, m.ChunkIndex, n)
	c.out = hdr
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.s.lim.WriteTimeout)); err != nil {
		return err
	}
	if c.enc {
		if err := c.fw.BeginFrame(int64(len(hdr)) + n); err != nil {
			return err
		}
		if _, err := c.fw.Write(hdr); err != nil {
			return err
		}
	} else if _, err := c.nc.Write(hdr); err != nil {
		return err
	}
	if err := c.sendBody(mo.File(), off, n); err != nil {
		return err
	}
	c.s.m.Bytes.Add(float64(n))
	c.s.m.Chunks.Inc()
	if last {
		c.endStream(m.StreamID)
	}
	return nil
}

// mapOutput opens (or keeps) the stream's map output mapID.
func (c *conn) mapOutput(st *stream, mapID int64) (*shufflefile.MapOutput, error) {
	if st.cur != nil && st.cur.ID.Map == mapID {
		return st.cur, nil
	}
	if st.cur != nil {
		st.cur.Close()
		st.cur = nil
	}
	mo, err := st.ref.ex.Open(shufflefile.ID{Shuffle: st.shuffle, Map: mapID}, checksum.None)
	if err != nil {
		what := fmt.Sprintf("map output %d/%d of executor %q of application %q", st.shuffle, mapID, st.ref.key.exec, st.ref.key.app)
		if isNotExist(err) {
			return nil, fmt.Errorf("%w: %s is not committed on this node", fs.ErrNotExist, what)
		}
		return nil, c.hidden(err, what)
	}
	st.cur = mo
	return mo, nil
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

func (c *conn) localDirs(m *GetLocalDirsForExecutors) ([]byte, error) {
	if err := c.allow(m.AppID, m.ExecIDs...); err != nil {
		return nil, err
	}
	out := &LocalDirsForExecutors{ExecIDs: m.ExecIDs, Dirs: make([][]string, len(m.ExecIDs))}
	for i, e := range m.ExecIDs {
		dirs, err := c.s.cfg.Store.LocalDirs(m.AppID, e)
		if err != nil {
			return nil, err
		}
		out.Dirs[i] = dirs
	}
	return out.Append(nil), nil
}

// diagnose answers DiagnoseCorruption as Spark's shuffle service does
// (ShuffleChecksumHelper.diagnoseCorruption): the partition's checksum
// computed again against the checksum file's and the reader's. Every
// failure to look is UNKNOWN_ISSUE; it is always answered.
func (c *conn) diagnose(m *DiagnoseCorruption) ([]byte, error) {
	if err := c.allow(m.AppID, m.ExecID); err != nil {
		return nil, err
	}
	return AppendCorruptionCause(nil, c.diagnoseCause(m)), nil
}

func (c *conn) diagnoseCause(m *DiagnoseCorruption) Cause {
	var alg checksum.Algorithm
	switch m.Algorithm {
	case "ADLER32":
		alg = checksum.Adler32
	case "CRC32":
		alg = checksum.CRC32
	case "CRC32C":
		alg = checksum.CRC32C
	default:
		return CauseUnsupportedChecksumAlgorithm
	}
	if m.ShuffleID < 0 || m.MapID < 0 || m.ReduceID < 0 {
		return CauseUnknownIssue
	}
	ref, err := c.executor(m.AppID, m.ExecID)
	if err != nil {
		return CauseUnknownIssue
	}
	defer c.release(ref)
	mo, err := ref.ex.Open(shufflefile.ID{Shuffle: m.ShuffleID, Map: m.MapID}, alg)
	if err != nil {
		return CauseUnknownIssue
	}
	defer mo.Close()
	p := int(m.ReduceID)
	if p >= mo.NumPartitions() {
		return CauseUnknownIssue
	}
	buf, err := c.s.getBuf(time.Now().Add(c.s.lim.WriteTimeout))
	if err != nil {
		return CauseUnknownIssue
	}
	defer c.s.putBuf(buf)
	h := alg.New()
	b := *buf
	for off, end := mo.Offsets[p], mo.Offsets[p+1]; off < end; {
		k := min(int64(len(b)), end-off)
		if _, err := mo.File().ReadAt(b[:k], off); err != nil {
			return CauseUnknownIssue
		}
		h.Write(b[:k])
		off += k
	}
	writer, again := int64(mo.Checksums[p]), int64(h.Sum32())
	switch {
	case writer != again:
		return CauseDiskIssue
	case writer != m.Checksum:
		return CauseNetworkIssue
	}
	return CauseChecksumVerifyPass
}

// removeBlocks removes the map outputs whose files RemoveBlocks names
// (shuffle_S_M_0.data, .index, .checksum.ALGO, as Spark's driver names
// them to a shuffle service); each named file of an output that was
// removed counts one. Other block ids are not this daemon's and count
// none.
func (c *conn) removeBlocks(m *RemoveBlocks) ([]byte, error) {
	if err := c.allow(m.AppID, m.ExecID); err != nil {
		return nil, err
	}
	named := map[shufflefile.ID]int32{}
	var order []shufflefile.ID
	for _, id := range m.BlockIDs {
		n, ok := shufflefile.ParseName(id)
		if !ok || n.Kind == shufflefile.KindTemp {
			continue
		}
		if _, seen := named[n.ID]; !seen {
			order = append(order, n.ID)
		}
		named[n.ID]++
	}
	if len(order) == 0 {
		return AppendBlocksRemoved(nil, 0), nil
	}
	ref, err := c.executor(m.AppID, m.ExecID)
	if err != nil {
		return nil, err
	}
	defer c.release(ref)
	var removed int32
	var errs []error
	for _, id := range order {
		ok, err := ref.ex.Remove(id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			removed += named[id]
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, c.hidden(err, fmt.Sprintf("removing blocks of executor %q of application %q", m.ExecID, m.AppID))
	}
	return AppendBlocksRemoved(nil, removed), nil
}

func (c *conn) removeOutputs(m *RemoveOutputs) ([]byte, error) {
	if err := c.allow(m.AppID); err != nil {
		return nil, err
	}
	if m.ShuffleID < -1 {
		return nil, fmt.Errorf("%w: RemoveOutputs.shuffle_id %d: want a shuffle id, or -1 for the whole application", errBadRequest, m.ShuffleID)
	}
	outputs, bytes, err := c.s.cfg.Store.Remove(m.AppID, m.ShuffleID)
	if err != nil {
		if errors.Is(err, ErrUnknownExecutor) {
			return nil, err
		}
		return nil, c.hidden(err, fmt.Sprintf("removing shuffle %d of application %q", m.ShuffleID, m.AppID))
	}
	c.s.log.Info("block server: outputs removed", "app", m.AppID, "shuffle", m.ShuffleID, "outputs", outputs, "bytes", bytes, "remote", c.nc.RemoteAddr())
	return AppendRemoved(nil, outputs, bytes), nil
}

// errIO is a failure of the daemon's files, whose detail (paths, errnos)
// stays in its log.
var errIO = errors.New("blockserver: I/O error")

// hidden logs err and returns an error for the client that names what
// failed but not the daemon's paths.
func (c *conn) hidden(err error, what string) error {
	c.s.log.Warn("block server: request failed", "what", what, "remote", c.nc.RemoteAddr(), "err", err)
	return fmt.Errorf("%w: %s failed on this node (the daemon's log has why)", errIO, what)
}
