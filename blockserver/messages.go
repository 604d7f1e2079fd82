package blockserver

import "fmt"

// Block-transfer message types: network-shuffle's BlockTransferMessage.Type
// ids (the same from Spark 3.5 to 4.3), the first byte of an RpcRequest's
// or RpcResponse's body, and TypeRemoveOutputs, this daemon's own.
const (
	MsgOpenBlocks               byte = 0
	MsgUploadBlock              byte = 1
	MsgRegisterExecutor         byte = 2
	MsgStreamHandle             byte = 3
	MsgRegisterDriver           byte = 4
	MsgHeartbeat                byte = 5
	MsgUploadBlockStream        byte = 6
	MsgRemoveBlocks             byte = 7
	MsgBlocksRemoved            byte = 8
	MsgFetchShuffleBlocks       byte = 9
	MsgGetLocalDirsForExecutors byte = 10
	MsgLocalDirsForExecutors    byte = 11
	MsgPushBlockStream          byte = 12
	MsgFinalizeShuffleMerge     byte = 13
	MsgMergeStatuses            byte = 14
	MsgFetchShuffleBlockChunks  byte = 15
	MsgDiagnoseCorruption       byte = 16
	MsgCorruptionCause          byte = 17
	MsgPushBlockReturnCode      byte = 18
	MsgRemoveShuffleMerge       byte = 19
	// MsgRemoveOutputs is this daemon's own message (Spark uses no type
	// above 19): a driver removes a shuffle's or an application's map
	// outputs.
	MsgRemoveOutputs byte = 100
)

// MsgName returns the name of block-transfer message type t.
func MsgName(t byte) string {
	switch t {
	case MsgOpenBlocks:
		return "OpenBlocks"
	case MsgUploadBlock:
		return "UploadBlock"
	case MsgRegisterExecutor:
		return "RegisterExecutor"
	case MsgStreamHandle:
		return "StreamHandle"
	case MsgRegisterDriver:
		return "RegisterDriver"
	case MsgHeartbeat:
		return "Heartbeat"
	case MsgUploadBlockStream:
		return "UploadBlockStream"
	case MsgRemoveBlocks:
		return "RemoveBlocks"
	case MsgBlocksRemoved:
		return "BlocksRemoved"
	case MsgFetchShuffleBlocks:
		return "FetchShuffleBlocks"
	case MsgGetLocalDirsForExecutors:
		return "GetLocalDirsForExecutors"
	case MsgLocalDirsForExecutors:
		return "LocalDirsForExecutors"
	case MsgPushBlockStream:
		return "PushBlockStream"
	case MsgFinalizeShuffleMerge:
		return "FinalizeShuffleMerge"
	case MsgMergeStatuses:
		return "MergeStatuses"
	case MsgFetchShuffleBlockChunks:
		return "FetchShuffleBlockChunks"
	case MsgDiagnoseCorruption:
		return "DiagnoseCorruption"
	case MsgCorruptionCause:
		return "CorruptionCause"
	case MsgPushBlockReturnCode:
		return "PushBlockReturnCode"
	case MsgRemoveShuffleMerge:
		return "RemoveShuffleMerge"
	case MsgRemoveOutputs:
		return "RemoveOutputs"
	}
	return fmt.Sprintf("type %d", t)
}

// knownMsg reports a type Spark (or this daemon) defines.
func knownMsg(t byte) bool { return t <= MsgRemoveShuffleMerge || t == MsgRemoveOutputs }

// OpenBlocks asks for blocks by id: string app_id, string exec_id,
// string[] block_ids.
type OpenBlocks struct {
	AppID, ExecID string
	BlockIDs      []string
}

// FetchShuffleBlocks asks for blocks of one shuffle: string app_id, string
// exec_id, i32 shuffle_id, i64[] map_ids, i32 count, count × i32[]
// reduce_ids, bool batch_fetch_enabled. With batch fetch, each map's
// reduce ids are [start, end): one block of the contiguous range.
type FetchShuffleBlocks struct {
	AppID, ExecID string
	ShuffleID     int32
	MapIDs        []int64
	ReduceIDs     [][]int32
	Batch         bool
}

// RemoveBlocks asks to remove blocks by id: string app_id, string exec_id,
// string[] block_ids. Answered by BlocksRemoved: i32 removed.
type RemoveBlocks struct {
	AppID, ExecID string
	BlockIDs      []string
}

// GetLocalDirsForExecutors asks for executors' local dirs: string app_id,
// string[] exec_ids. Answered by LocalDirsForExecutors.
type GetLocalDirsForExecutors struct {
	AppID   string
	ExecIDs []string
}

// LocalDirsForExecutors answers GetLocalDirsForExecutors: string[]
// exec_ids, i32[] dirs_per_exec, string[] all_dirs (each executor's dirs
// in turn).
type LocalDirsForExecutors struct {
	ExecIDs []string
	Dirs    [][]string
}

// DiagnoseCorruption asks why a block's checksum did not match: string
// app_id, string exec_id, i32 shuffle_id, i64 map_id, i32 reduce_id, i64
// checksum, string algorithm. Answered by CorruptionCause: u8 cause.
type DiagnoseCorruption struct {
	AppID, ExecID string
	ShuffleID     int32
	MapID         int64
	ReduceID      int32
	Checksum      int64
	Algorithm     string
}

// RemoveOutputs (type 100, this daemon's) removes map outputs: string
// app_id, i32 shuffle_id (-1: every shuffle of the application). Answered
// by an RpcResponse whose body is i64 map_outputs, i64 bytes (no type
// byte).
type RemoveOutputs struct {
	AppID     string
	ShuffleID int32
}

// Cause is network-shuffle's checksum.Cause, by ordinal.
type Cause uint8

const (
	CauseDiskIssue                    Cause = 0
	CauseNetworkIssue                 Cause = 1
	CauseUnknownIssue                 Cause = 2
	CauseChecksumVerifyPass           Cause = 3
	CauseUnsupportedChecksumAlgorithm Cause = 4
)

func (c Cause) String() string {
	switch c {
	case CauseDiskIssue:
		return "DISK_ISSUE"
	case CauseNetworkIssue:
		return "NETWORK_ISSUE"
	case CauseUnknownIssue:
		return "UNKNOWN_ISSUE"
	case CauseChecksumVerifyPass:
		return "CHECKSUM_VERIFY_PASS"
	case CauseUnsupportedChecksumAlgorithm:
		return "UNSUPPORTED_CHECKSUM_ALGORITHM"
	}
	return fmt.Sprintf("Cause(%d)", uint8(c))
}

// Append appends the message with its type byte, as a client sends it.
func (m *OpenBlocks) Append(dst []byte) []byte {
	dst = append(dst, MsgOpenBlocks)
	dst = appendString(dst, m.AppID)
	dst = appendString(dst, m.ExecID)
	return appendStrings(dst, m.BlockIDs)
}

func (m *FetchShuffleBlocks) Append(dst []byte) []byte {
	dst = append(dst, MsgFetchShuffleBlocks)
	dst = appendString(dst, m.AppID)
	dst = appendString(dst, m.ExecID)
	dst = appendI32(dst, m.ShuffleID)
	dst = appendLongs(dst, m.MapIDs)
	dst = appendI32(dst, int32(len(m.ReduceIDs)))
	for _, r := range m.ReduceIDs {
		dst = appendInts(dst, r)
	}
	if m.Batch {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func (m *RemoveBlocks) Append(dst []byte) []byte {
	dst = append(dst, MsgRemoveBlocks)
	dst = appendString(dst, m.AppID)
	dst = appendString(dst, m.ExecID)
	return appendStrings(dst, m.BlockIDs)
}

func (m *GetLocalDirsForExecutors) Append(dst []byte) []byte {
	dst = append(dst, MsgGetLocalDirsForExecutors)
	dst = appendString(dst, m.AppID)
	return appendStrings(dst, m.ExecIDs)
}

func (m *DiagnoseCorruption) Append(dst []byte) []byte {
	dst = append(dst, MsgDiagnoseCorruption)
	dst = appendString(dst, m.AppID)
	dst = appendString(dst, m.ExecID)
	dst = appendI32(dst, m.ShuffleID)
	dst = appendI64(dst, m.MapID)
	dst = appendI32(dst, m.ReduceID)
	dst = appendI64(dst, m.Checksum)
	return appendString(dst, m.Algorithm)
}

func (m *RemoveOutputs) Append(dst []byte) []byte {
	dst = append(dst, MsgRemoveOutputs)
	dst = appendString(dst, m.AppID)
	return appendI32(dst, m.ShuffleID)
}

func (m *LocalDirsForExecutors) Append(dst []byte) []byte {
	dst = append(dst, MsgLocalDirsForExecutors)
	dst = appendStrings(dst, m.ExecIDs)
	counts := make([]int32, len(m.Dirs))
	var all []string
	for i, d := range m.Dirs {
		counts[i] = int32(len(d))
		all = append(all, d...)
	}
	dst = appendInts(dst, counts)
	return appendStrings(dst, all)
}

// AppendStreamHandle appends a StreamHandle: u8 3, i64 stream_id, i32
// num_chunks.
func AppendStreamHandle(dst []byte, streamID int64, chunks int32) []byte {
	dst = append(dst, MsgStreamHandle)
	dst = appendI64(dst, streamID)
	return appendI32(dst, chunks)
}

// AppendBlocksRemoved appends a BlocksRemoved: u8 8, i32 removed.
func AppendBlocksRemoved(dst []byte, n int32) []byte {
	return appendI32(append(dst, MsgBlocksRemoved), n)
}

// AppendCorruptionCause appends a CorruptionCause: u8 17, u8 cause.
func AppendCorruptionCause(dst []byte, c Cause) []byte {
	return append(dst, MsgCorruptionCause, byte(c))
}

// AppendRemoved appends RemoveOutputs' answer: i64 map_outputs, i64 bytes.
func AppendRemoved(dst []byte, outputs, bytes int64) []byte {
	return appendI64(appendI64(dst, outputs), bytes)
}

// DecodeMessage decodes an RpcRequest body that is a block-transfer
// message the server serves: *OpenBlocks, *FetchShuffleBlocks,
// *RemoveBlocks, *GetLocalDirsForExecutors, *DiagnoseCorruption or
// *RemoveOutputs. A known type the server does not serve returns an error
// wrapping ErrUnsupported with the type's name; bytes that do not decode,
// ErrMalformed.
func DecodeMessage(body []byte) (any, error) {
	if len(body) == 0 {
		return nil, fmt.Errorf("%w: empty RpcRequest body", ErrMalformed)
	}
	t := body[0]
	d := decoder{msg: MsgName(t), p: body[1:]}
	var m any
	switch t {
	case MsgOpenBlocks:
		m = &OpenBlocks{AppID: d.str("app_id", maxStringLen), ExecID: d.str("exec_id", maxStringLen),
			BlockIDs: d.strs("block_ids", maxArray, maxStringLen)}
	case MsgFetchShuffleBlocks:
		f := &FetchShuffleBlocks{AppID: d.str("app_id", maxStringLen), ExecID: d.str("exec_id", maxStringLen),
			ShuffleID: d.i32("shuffle_id"), MapIDs: d.longs("map_ids", maxArray)}
		n := d.count("reduce_ids", maxArray, 4)
		if d.err == nil {
			f.ReduceIDs = make([][]int32, n)
			for i := range f.ReduceIDs {
				f.ReduceIDs[i] = d.ints(fmt.Sprintf("reduce_ids[%d]", i), maxArray)
			}
		}
		f.Batch = d.boolean("batch_fetch_enabled")
		m = f
	case MsgRemoveBlocks:
		m = &RemoveBlocks{AppID: d.str("app_id", maxStringLen), ExecID: d.str("exec_id", maxStringLen),
			BlockIDs: d.strs("block_ids", maxArray, maxStringLen)}
	case MsgGetLocalDirsForExecutors:
		m = &GetLocalDirsForExecutors{AppID: d.str("app_id", maxStringLen), ExecIDs: d.strs("exec_ids", maxArray, maxStringLen)}
	case MsgDiagnoseCorruption:
		m = &DiagnoseCorruption{AppID: d.str("app_id", maxStringLen), ExecID: d.str("exec_id", maxStringLen),
			ShuffleID: d.i32("shuffle_id"), MapID: d.i64("map_id"), ReduceID: d.i32("reduce_id"),
			Checksum: d.i64("checksum"), Algorithm: d.str("algorithm", maxStringLen)}
	case MsgRemoveOutputs:
		m = &RemoveOutputs{AppID: d.str("app_id", maxStringLen), ShuffleID: d.i32("shuffle_id")}
	default:
		if knownMsg(t) {
			return nil, fmt.Errorf("%w: %s", ErrUnsupported, MsgName(t))
		}
		return nil, fmt.Errorf("%w: unknown block-transfer message type %d", ErrMalformed, t)
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeStreamHandle decodes an RpcResponse body that is a StreamHandle
// (a client's).
func DecodeStreamHandle(body []byte) (streamID int64, chunks int32, err error) {
	d := decoder{msg: "StreamHandle", p: body}
	if t := d.u8("type"); d.err == nil && t != MsgStreamHandle {
		return 0, 0, fmt.Errorf("%w: StreamHandle: type %d, want %d", ErrMalformed, t, MsgStreamHandle)
	}
	streamID, chunks = d.i64("stream_id"), d.i32("num_chunks")
	return streamID, chunks, d.finish()
}

// DecodeLocalDirs decodes an RpcResponse body that is a
// LocalDirsForExecutors (a client's).
func DecodeLocalDirs(body []byte) (*LocalDirsForExecutors, error) {
	d := decoder{msg: "LocalDirsForExecutors", p: body}
	if t := d.u8("type"); d.err == nil && t != MsgLocalDirsForExecutors {
		return nil, fmt.Errorf("%w: LocalDirsForExecutors: type %d", ErrMalformed, t)
	}
	m := &LocalDirsForExecutors{ExecIDs: d.strs("exec_ids", maxArray, len(body))}
	counts := d.ints("dirs_per_exec", maxArray)
	all := d.strs("all_dirs", maxArray, len(body))
	if err := d.finish(); err != nil {
		return nil, err
	}
	if len(counts) != len(m.ExecIDs) {
		return nil, fmt.Errorf("%w: LocalDirsForExecutors: %d executors, %d counts", ErrMalformed, len(m.ExecIDs), len(counts))
	}
	for _, c := range counts {
		if c < 0 || int(c) > len(all) {
			return nil, fmt.Errorf("%w: LocalDirsForExecutors: count %d with %d dirs left", ErrMalformed, c, len(all))
		}
		m.Dirs = append(m.Dirs, all[:c])
		all = all[c:]
	}
	if len(all) != 0 {
		return nil, fmt.Errorf("%w: LocalDirsForExecutors: %d dirs left over", ErrMalformed, len(all))
	}
	return m, nil
}
