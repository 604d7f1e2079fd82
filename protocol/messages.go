package protocol

import (
	"bytes"
	"fmt"
	"log/slog"
	"math"
)

// Message is one message payload. Every message validates on both ends:
// AppendFrame and Marshal call Validate before encoding, and Unmarshal
// validates what it decoded, so a message that decodes is one the sender
// could have sent.
type Message interface {
	// Type returns the frame type that carries the message.
	Type() Type
	// Validate checks every field against its bounds; the error names the
	// message, the field and the value, and wraps ErrMalformed or
	// ErrUnsupported.
	Validate() error
	// Append appends the payload encoding; the message must be valid.
	Append(dst []byte) []byte
	// Unmarshal decodes a whole payload and validates it. It never panics,
	// whatever the bytes.
	Unmarshal(payload []byte) error
}

// Protocol versions this package speaks.
const (
	MinVersion uint16 = 1
	MaxVersion uint16 = 1
)

// Bounds of message fields.
const (
	MaxClientNameLen = 255      // Hello.Client, ServerHello.Server
	MinMaxFrame      = 1 << 16  // smallest ServerHello.MaxFrame a server may announce
	MaxLocalDirs     = 256      // RegisterExecutor.LocalDirs
	MaxSubDirs       = 1 << 16  // RegisterExecutor.SubDirs
	MaxTokenLen      = 32       // OpenMapOutput.Codec, OpenMapOutput.Checksum
	MaxStatNameLen   = 64       // Stat.Name
	MaxBlockSize     = 32 << 20 // OpenMapOutput.BlockSize (lz4-java's bound)
	MaxPartitions    = 1 << 20  // OpenMapOutput.NumPartitions: its CommitResult is at most 16 MiB + 16 bytes
	MaxStats         = 4096     // StatsResult.Stats
	MaxShuffles      = 1 << 20  // ShuffleList.Shuffles
)

// Features are the optional abilities a server announces in ServerHello.
// A client ignores bits it does not know.
type Features uint64

const (
	// FeatureMemfd: Batch may use PlaneMemfd.
	FeatureMemfd Features = 1 << 0
	// FeatureCUDAIPC: Batch may use PlaneCUDAIPC.
	FeatureCUDAIPC Features = 1 << 1
	// FeatureColumnar: OpenMapOutput may use KindColumnar.
	FeatureColumnar Features = 1 << 2
	// FeatureLifecycle: RemoveShuffle, RemoveApplication, ListShuffles.
	FeatureLifecycle Features = 1 << 3
	// FeatureLastBatch: Batch may carry BatchLast.
	FeatureLastBatch Features = 1 << 5
	// FeatureIOEncryption: RegisterExecutor may carry the application's
	// IO encryption key and OpenMapOutput may set OpenEncrypt.
	FeatureIOEncryption Features = 1 << 6
	// FeatureServing: the daemon runs a block server (--serve-addr or
	// not: the bit says it knows the tails); RegisterExecutor may carry
	// the auth tail (RegisterExecutor.WithAuth) and Registered then
	// carries the serve tail (Registered.Serve).
	FeatureServing Features = 1 << 7
)

// Negotiate returns the highest version in both [h.MinVersion,
// h.MaxVersion] and [min, max], or an *Error with CodeVersionMismatch.
func Negotiate(h *Hello, min, max uint16) (uint16, error) {
	v := h.MaxVersion
	if v > max {
		v = max
	}
	if v < h.MinVersion || v < min {
		return 0, Errorf(CodeVersionMismatch, "client speaks versions %d..%d, server %d..%d", h.MinVersion, h.MaxVersion, min, max)
	}
	return v, nil
}

// Hello opens a connection: the versions the client speaks and its name.
//
//	u16 min_version | u16 max_version | string client
type Hello struct {
	MinVersion, MaxVersion uint16
	Client                 string
}

func (*Hello) Type() Type { return TypeHello }

func (m *Hello) Validate() error {
	if m.MinVersion == 0 {
		return invalid("Hello", "MinVersion", "0, want >= 1")
	}
	if m.MaxVersion < m.MinVersion {
		return invalid("Hello", "MaxVersion", "%d below MinVersion %d", m.MaxVersion, m.MinVersion)
	}
	return checkText("Hello", "Client", m.Client, MaxClientNameLen)
}

func (m *Hello) Append(dst []byte) []byte {
	dst = appendU16(dst, m.MinVersion)
	dst = appendU16(dst, m.MaxVersion)
	return appendString(dst, m.Client)
}

func (m *Hello) Unmarshal(p []byte) error {
	d := decoder{msg: "Hello", p: p}
	*m = Hello{MinVersion: d.u16("MinVersion"), MaxVersion: d.u16("MaxVersion"), Client: d.str("Client", MaxClientNameLen)}
	if err := d.finish(); err != nil {
		return err
	}
	return m.Validate()
}

// ServerHello answers Hello: the chosen version, the server's limits and
// features, and its name and version string.
//
//	u16 version | u16 reserved | u32 max_frame | u32 max_inline |
//	u64 features | string server
type ServerHello struct {
	Version uint16
	// MaxFrame is the largest payload the server reads; larger frames
	// close the connection.
	MaxFrame uint32
	// MaxInline is the largest Batch.Inline the server accepts.
	MaxInline uint32
	Features  Features
	Server    string
}

func (*ServerHello) Type() Type { return TypeServerHello }

func (m *ServerHello) Validate() error {
	if m.Version == 0 {
		return invalid("ServerHello", "Version", "0, want >= 1")
	}
	if m.MaxFrame < MinMaxFrame {
		return invalid("ServerHello", "MaxFrame", "%d below %d", m.MaxFrame, MinMaxFrame)
	}
	if m.MaxInline > m.MaxFrame {
		return invalid("ServerHello", "MaxInline", "%d exceeds MaxFrame %d", m.MaxInline, m.MaxFrame)
	}
	return checkText("ServerHello", "Server", m.Server, MaxClientNameLen)
}

func (m *ServerHello) Append(dst []byte) []byte {
	dst = appendU16(dst, m.Version)
	dst = appendU16(dst, 0)
	dst = appendU32(dst, m.MaxFrame)
	dst = appendU32(dst, m.MaxInline)
	dst = appendU64(dst, uint64(m.Features))
	return appendString(dst, m.Server)
}

func (m *ServerHello) Unmarshal(p []byte) error {
	d := decoder{msg: "ServerHello", p: p}
	*m = ServerHello{Version: d.u16("Version")}
	d.zero("reserved", 2)
	m.MaxFrame = d.u32("MaxFrame")
	m.MaxInline = d.u32("MaxInline")
	m.Features = Features(d.u64("Features"))
	m.Server = d.str("Server", MaxClientNameLen)
	if err := d.finish(); err != nil {
		return err
	}
	return m.Validate()
}

// RegisterExecutor names the executor a connection writes for and where
// its map outputs go. With LocalDirs, outputs go into Spark's hashed
// layout under those dirs (SubDirs sub-directories each); without, into
// the daemon's own root, <root>/<AppID>/<ExecutorID>/, and SubDirs is 0.
//
//	string app_id | string executor_id | i32 sub_dirs |
//	u32 count | count × string local_dir |
//	(only with a key) u16 length | length × u8 io_encryption_key
//	(only with WithAuth) u16 key_length (0: none) | io_encryption_key |
//	                     u16 secret_length | secret_length × u8 auth_secret
//
// IOEncryptionKey is the application's IO encryption key (Spark's
// SecurityManager.getIOEncryptionKey, 16, 24 or 32 bytes), absent (the
// payload ends after the local dirs) when the executor encrypts nothing.
// It is a secret: it never appears in text (Secret), and Unmarshal
// clears its bytes in the payload it decodes once it has copied them.
//
// WithAuth (feature bit 7, FeatureServing) sends both tails: the key's,
// with length 0 when there is no key, then the auth secret's, with length
// 0 when there is none; only then does Registered carry the serve tail.
// AuthSecret is the application's authentication secret (Spark's
// SecurityManager.getSecretKey with spark.authenticate=true), at most
// MaxAuthSecret bytes, a Secret like the key.
type RegisterExecutor struct {
	AppID           string
	ExecutorID      string
	LocalDirs       []string
	SubDirs         int32
	IOEncryptionKey Secret
	WithAuth        bool
	AuthSecret      Secret
}

// MaxAuthSecret bounds RegisterExecutor.AuthSecret.
const MaxAuthSecret = 1024

// Secret is bytes that never appear in text: it formats and logs as
// [redacted] (or [none] when empty), whatever the verb.
type Secret []byte

func (s Secret) String() string {
	if len(s) == 0 {
		return "[none]"
	}
	return "[redacted]"
}
func (s Secret) GoString() string           { return s.String() }
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(s.String())) }
func (s Secret) LogValue() slog.Value       { return slog.StringValue(s.String()) }

// Clear zeroes the secret's bytes.
func (s Secret) Clear() { clear(s) }

func (*RegisterExecutor) Type() Type { return TypeRegister }

func (m *RegisterExecutor) Validate() error {
	if err := ValidateName("RegisterExecutor.AppID", m.AppID); err != nil {
		return err
	}
	if err := ValidateName("RegisterExecutor.ExecutorID", m.ExecutorID); err != nil {
		return err
	}
	if len(m.LocalDirs) > MaxLocalDirs {
		return invalid("RegisterExecutor", "LocalDirs", "%d dirs exceed %d", len(m.LocalDirs), MaxLocalDirs)
	}
	for i, dir := range m.LocalDirs {
		if err := validatePath("RegisterExecutor", fmt.Sprintf("LocalDirs[%d]", i), dir); err != nil {
			return err
		}
	}
	if len(m.LocalDirs) == 0 {
		if m.SubDirs != 0 {
			return invalid("RegisterExecutor", "SubDirs", "%d without LocalDirs, want 0", m.SubDirs)
		}
	} else if m.SubDirs < 1 || m.SubDirs > MaxSubDirs {
		return invalid("RegisterExecutor", "SubDirs", "%d out of range [1, %d]", m.SubDirs, MaxSubDirs)
	}
	if n := len(m.IOEncryptionKey); n != 0 && n != 16 && n != 24 && n != 32 {
		return invalid("RegisterExecutor", "IOEncryptionKey", "length %d, want 16, 24 or 32 bytes (spark.io.encryption.keySizeBits 128, 192, 256)", n)
	}
	if len(m.AuthSecret) > 0 && !m.WithAuth {
		return invalid("RegisterExecutor", "AuthSecret", "set without WithAuth")
	}
	if n := len(m.AuthSecret); n > MaxAuthSecret {
		return invalid("RegisterExecutor", "AuthSecret", "length %d exceeds %d bytes", n, MaxAuthSecret)
	}
	return nil
}

func (m *RegisterExecutor) Append(dst []byte) []byte {
	dst = appendString(dst, m.AppID)
	dst = appendString(dst, m.ExecutorID)
	dst = appendI32(dst, m.SubDirs)
	dst = appendU32(dst, uint32(len(m.LocalDirs)))
	for _, dir := range m.LocalDirs {
		dst = appendString(dst, dir)
	}
	if len(m.IOEncryptionKey) > 0 || m.WithAuth {
		dst = appendU16(dst, uint16(len(m.IOEncryptionKey)))
		dst = append(dst, m.IOEncryptionKey...)
	}
	if m.WithAuth {
		dst = appendU16(dst, uint16(len(m.AuthSecret)))
		dst = append(dst, m.AuthSecret...)
	}
	return dst
}

// maxKeyLen bounds RegisterExecutor.IOEncryptionKey on the wire.
const maxKeyLen = 32

func (m *RegisterExecutor) Unmarshal(p []byte) error {
	d := decoder{msg: "RegisterExecutor", p: p}
	*m = RegisterExecutor{AppID: d.str("AppID", MaxNameLen), ExecutorID: d.str("ExecutorID", MaxNameLen), SubDirs: d.i32("SubDirs")}
	if n := d.count("LocalDirs", MaxLocalDirs, 2); n > 0 {
		m.LocalDirs = make([]string, n)
		for i := range m.LocalDirs {
			m.LocalDirs[i] = d.str("LocalDirs", MaxPathLen)
		}
	}
	if d.err == nil && d.off < len(d.p) { // a key follows
		n := int(d.u16("IOEncryptionKey.length"))
		// Length 0 says "no key" only before an auth tail.
		if d.err == nil && (n == 0 && len(d.p)-d.off < 2 || n > maxKeyLen) {
			d.err = fmt.Errorf("%w: RegisterExecutor.IOEncryptionKey: length %d, want 16, 24 or 32 bytes (0 only when the auth tail follows)", ErrMalformed, n)
		}
		if src := d.bytes("IOEncryptionKey", n); src != nil && n > 0 {
			m.IOEncryptionKey = bytes.Clone(src)
			clear(src) // a reused frame buffer does not keep the key
		}
	}
	if d.err == nil && d.off < len(d.p) { // the auth tail
		m.WithAuth = true
		n := int(d.u16("AuthSecret.length"))
		if d.err == nil && n > MaxAuthSecret {
			d.err = fmt.Errorf("%w: RegisterExecutor.AuthSecret: length %d exceeds %d bytes", ErrMalformed, n, MaxAuthSecret)
		}
		if src := d.bytes("AuthSecret", n); src != nil && n > 0 {
			m.AuthSecret = bytes.Clone(src)
			clear(src)
		}
	}
	err := d.finish()
	if err == nil {
		err = m.Validate()
	}
	if err != nil {
		m.IOEncryptionKey.Clear() // a message refused keeps no copy of the key either
		m.AuthSecret.Clear()      // nor of the secret
	}
	return err
}

// Registered answers RegisterExecutor with the directories the daemon
// resolved and will write into, and, when the RegisterExecutor carried the
// auth tail (WithAuth), where the daemon serves map outputs.
//
//	u32 count | count × string dir |
//	(only after WithAuth) string serve_host | i32 serve_port | u8 serve_flags
type Registered struct {
	Dirs  []string
	Serve *ServeInfo
}

// ServeInfo is Registered's serve tail: the host and port executors
// publish as their map outputs' location (Host "" and Port 0 when the
// daemon does not serve), and its flags.
type ServeInfo struct {
	Host  string
	Port  int32
	Flags ServeFlags
}

// ServeFlags are ServeInfo's flags.
type ServeFlags uint8

// ServeRequireAuth: the daemon serves only authenticated connections
// (--serve-require-auth).
const ServeRequireAuth ServeFlags = 1 << 0

func (*Registered) Type() Type { return TypeRegistered }

func (m *Registered) Validate() error {
	if len(m.Dirs) > MaxLocalDirs {
		return invalid("Registered", "Dirs", "%d dirs exceed %d", len(m.Dirs), MaxLocalDirs)
	}
	for i, dir := range m.Dirs {
		if err := validatePath("Registered", fmt.Sprintf("Dirs[%d]", i), dir); err != nil {
			return err
		}
	}
	if v := m.Serve; v != nil {
		if err := checkText("Registered", "Serve.Host", v.Host, MaxClientNameLen); err != nil {
			return err
		}
		switch {
		case v.Port < 0 || v.Port > 65535:
			return invalid("Registered", "Serve.Port", "%d out of range [0, 65535]", v.Port)
		case (v.Host == "") != (v.Port == 0):
			return invalid("Registered", "Serve.Port", "%d with host %q: both are set when serving, both empty when not", v.Port, v.Host)
		case v.Flags&^ServeRequireAuth != 0:
			return invalid("Registered", "Serve.Flags", "%#x has unknown bits", uint8(v.Flags))
		}
	}
	return nil
}

func (m *Registered) Append(dst []byte) []byte {
	dst = appendU32(dst, uint32(len(m.Dirs)))
	for _, dir := range m.Dirs {
		dst = appendString(dst, dir)
	}
	if v := m.Serve; v != nil {
		dst = appendString(dst, v.Host)
		dst = appendI32(dst, v.Port)
		dst = appendU8(dst, uint8(v.Flags))
	}
	return dst
}

func (m *Registered) Unmarshal(p []byte) error {
	d := decoder{msg: "Registered", p: p}
	*m = Registered{}
	if n := d.count("Dirs", MaxLocalDirs, 2); n > 0 {
		m.Dirs = make([]string, n)
		for i := range m.Dirs {
			m.Dirs[i] = d.str("Dirs", MaxPathLen)
		}
	}
	if d.err == nil && d.off < len(d.p) { // the serve tail
		m.Serve = &ServeInfo{Host: d.str("Serve.Host", MaxClientNameLen), Port: d.i32("Serve.Port"), Flags: ServeFlags(d.u8("Serve.Flags"))}
	}
	if err := d.finish(); err != nil {
		return err
	}
	return m.Validate()
}

// PayloadKind says how a map output's batches are laid out.
type PayloadKind uint8

const (
	// KindOpaque: bytes the client already serialized per partition,
	// with per-partition byte offsets. The daemon only compresses.
	KindOpaque PayloadKind = 1
	// KindColumnar: a table of typed columns with partition row offsets.
	// The daemon serializes each partition's slice, then compresses.
	KindColumnar PayloadKind = 2
)

func (k PayloadKind) String() string {
	switch k {
	case KindOpaque:
		return "opaque"
	case KindColumnar:
		return "columnar"
	}
	return fmt.Sprintf("PayloadKind(%d)", uint8(k))
}

func checkKind(msg string, k PayloadKind) error {
	if k != KindOpaque && k != KindColumnar {
		return fmt.Errorf("%w: %s.Kind: %d, want %d (opaque) or %d (columnar)", ErrUnsupported, msg, k, KindOpaque, KindColumnar)
	}
	return nil
}

// OpenFlags are OpenMapOutput's flag bits.
type OpenFlags uint8

// OpenEncrypt: write the map output with Spark's IO encryption.
const OpenEncrypt OpenFlags = 1 << 0

// OpenMapOutput starts a map task's output. Codec and Checksum name the
// compression codec ("lz4", "zstd", "snappy", "none") and the checksum
// algorithm ("ADLER32", "CRC32", "CRC32C", "none"); empty means the
// daemon's default. Which names are accepted is the server's business.
// BlockSize (lz4 and snappy) and Level (zstd) are the codec's parameters,
// Spark's spark.io.compression.{lz4,snappy}.blockSize and
// spark.io.compression.zstd.level; 0 means the daemon's default. Which
// values a codec takes is the server's business too.
//
// Flags: OpenEncrypt writes the map output with Spark's IO encryption,
// with the key of the connection's RegisterExecutor.
//
//	i32 shuffle_id | i64 map_id | i32 num_partitions | u8 kind |
//	u8 format | u8 flags | u8 reserved | string codec | string checksum |
//	u32 block_size | i32 level |
//	(format kudo only) list<string name, string spark_type> schema
type OpenMapOutput struct {
	ShuffleID     int32
	MapID         int64
	NumPartitions int32
	Kind          PayloadKind
	// Format serializes a columnar map output's records: FormatSHFC (0)
	// or FormatKudo, which takes Schema, one field per column.
	Format   PayloadFormat
	Flags    OpenFlags
	Codec    string
	Checksum string
	// BlockSize is the codec's block size in bytes; 0 = daemon default.
	BlockSize uint32
	// Level is the codec's compression level; 0 = daemon default.
	Level  int32
	Schema []SchemaField
}

func (*OpenMapOutput) Type() Type { return TypeOpen }

func (m *OpenMapOutput) Validate() error {
	if m.ShuffleID < 0 {
		return invalid("OpenMapOutput", "ShuffleID", "%d is negative", m.ShuffleID)
	}
	if m.MapID < 0 {
		return invalid("OpenMapOutput", "MapID", "%d is negative", m.MapID)
	}
	if m.NumPartitions < 1 || m.NumPartitions > MaxPartitions {
		return invalid("OpenMapOutput", "NumPartitions", "%d out of range [1, %d]", m.NumPartitions, MaxPartitions)
	}
	if err := checkKind("OpenMapOutput", m.Kind); err != nil {
		return err
	}
	if err := m.validateFormat(); err != nil {
		return err
	}
	if m.Flags&^OpenEncrypt != 0 {
		return invalid("OpenMapOutput", "Flags", "%#x: unknown bits %#x", uint8(m.Flags), uint8(m.Flags&^OpenEncrypt))
	}
	if err := checkToken("OpenMapOutput", "Codec", m.Codec, MaxTokenLen); err != nil {
		return err
	}
	if m.BlockSize > MaxBlockSize {
		return invalid("OpenMapOutput", "BlockSize", "%d exceeds %d", m.BlockSize, MaxBlockSize)
	}
	return checkToken("OpenMapOutput", "Checksum", m.Checksum, MaxTokenLen)
}

// checkToken checks a short name: letters, digits, '-', '_', '.'.
func checkToken(msg, field, s string, max int) error {
	if len(s) > max {
		return invalid(msg, field, "%.40q: length %d exceeds %d", s, len(s), max)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return invalid(msg, field, "%q: byte %d is %q, want [A-Za-z0-9._-]", s, i, c)
		}
	}
	return nil
}

func (m *OpenMapOutput) Append(dst []byte) []byte {
	dst = appendI32(dst, m.ShuffleID)
	dst = appendI64(dst, m.MapID)
	dst = appendI32(dst, m.NumPartitions)
	dst = append(dst, uint8(m.Kind), uint8(m.Format), uint8(m.Flags), 0)
	dst = appendString(dst, m.Codec)
	dst = appendString(dst, m.Checksum)
	dst = appendU32(dst, m.BlockSize)
	dst = appendI32(dst, m.Level)
	return m.appendSchema(dst)
}

func (m *OpenMapOutput) Unmarshal(p []byte) error {
	d := decoder{msg: "OpenMapOutput", p: p}
	*m = OpenMapOutput{ShuffleID: d.i32("ShuffleID"), MapID: d.i64("MapID"), NumPartitions: d.i32("NumPartitions"), Kind: PayloadKind(d.u8("Kind"))}
	m.Format = PayloadFormat(d.u8("Format"))
	m.Flags = OpenFlags(d.u8("Flags"))
	d.zero("reserved", 1)
	m.Codec = d.str("Codec", MaxTokenLen)
	m.Checksum = d.str("Checksum", MaxTokenLen)
	m.BlockSize = d.u32("BlockSize")
	m.Level = d.i32("Level")
	m.Schema = d.schema(m.Format)
	if err := d.finish(); err != nil {
		return err
	}
	return m.Validate()
}

// Opened answers OpenMapOutput with the handle that names the map output
// in later requests on this connection. Handles are never 0.
//
//	u64 handle
type Opened struct {
	Handle uint64
}

func (*Opened) Type() Type { return TypeOpened }

func (m *Opened) Validate() error { return checkHandle("Opened", m.Handle) }

func (m *Opened) Append(dst []byte) []byte { return appendU64(dst, m.Handle) }

func (m *Opened) Unmarshal(p []byte) error { return unmarshalHandle("Opened", p, &m.Handle) }

func checkHandle(msg string, h uint64) error {
	if h == 0 {
		return invalid(msg, "Handle", "0 is not a handle")
	}
	return nil
}

func unmarshalHandle(msg string, p []byte, h *uint64) error {
	d := decoder{msg: msg, p: p}
	*h = d.u64("Handle")
	if err := d.finish(); err != nil {
		return err
	}
	return checkHandle(msg, *h)
}

// BatchAccepted answers Batch once the daemon no longer needs the
// client's buffer (for inline and memfd batches: once the batch is
// validated and queued). Errors found later, while compressing or
// writing, abort the map output and answer its Commit.
type BatchAccepted struct{}

func (*BatchAccepted) Type() Type               { return TypeBatchAccepted }
func (*BatchAccepted) Validate() error          { return nil }
func (*BatchAccepted) Append(dst []byte) []byte { return dst }
func (*BatchAccepted) Unmarshal(p []byte) error { return unmarshalEmpty("BatchAccepted", p) }

func unmarshalEmpty(msg string, p []byte) error {
	d := decoder{msg: msg, p: p}
	return d.finish()
}

// Commit asks the daemon to finish a map output: wait for its batches,
// merge its runs and commit Spark's files.
//
//	u64 handle
type Commit struct {
	Handle uint64
}

func (*Commit) Type() Type                 { return TypeCommit }
func (m *Commit) Validate() error          { return checkHandle("Commit", m.Handle) }
func (m *Commit) Append(dst []byte) []byte { return appendU64(dst, m.Handle) }
func (m *Commit) Unmarshal(p []byte) error { return unmarshalHandle("Commit", p, &m.Handle) }

// CommitResult answers Commit: the committed partition lengths and
// checksums. Existing is set when an earlier attempt had already
// committed the same (shuffle, map) output: its lengths and checksums
// won and this attempt was discarded. Checksums is empty when the map
// output has no checksum algorithm; each value is a 32-bit checksum
// widened to int64, as in Spark's checksum file.
//
//	u8 existing | 3 × u8 reserved | i32 runs |
//	u32 n | n × i64 length | u32 m (0 or n) | m × i64 checksum
type CommitResult struct {
	Lengths   []int64
	Checksums []int64
	Existing  bool
	Runs      int32
}

func (*CommitResult) Type() Type { return TypeCommitResult }

func (m *CommitResult) Validate() error {
	if n := len(m.Lengths); n < 1 || n > MaxPartitions {
		return invalid("CommitResult", "Lengths", "%d partitions out of range [1, %d]", n, MaxPartitions)
	}
	for i, l := range m.Lengths {
		if l < 0 {
			return invalid("CommitResult", fmt.Sprintf("Lengths[%d]", i), "%d is negative", l)
		}
	}
	if len(m.Checksums) != 0 && len(m.Checksums) != len(m.Lengths) {
		return invalid("CommitResult", "Checksums", "%d checksums for %d partitions", len(m.Checksums), len(m.Lengths))
	}
	for i, c := range m.Checksums {
		if c < 0 || c > math.MaxUint32 {
			return invalid("CommitResult", fmt.Sprintf("Checksums[%d]", i), "%d is not a 32-bit checksum", c)
		}
	}
	if m.Runs < 0 {
		return invalid("CommitResult", "Runs", "%d is negative", m.Runs)
	}
	return nil
}

func (m *CommitResult) Append(dst []byte) []byte {
	var existing uint8
	if m.Existing {
		existing = 1
	}
	dst = append(dst, existing, 0, 0, 0)
	dst = appendI32(dst, m.Runs)
	dst = appendI64s(dst, m.Lengths)
	return appendI64s(dst, m.Checksums)
}

func appendI64s(dst []byte, v []int64) []byte {
	dst = appendU32(dst, uint32(len(v)))
	for _, x := range v {
		dst = appendI64(dst, x)
	}
	return dst
}

func (d *decoder) i64s(field string, max int) []int64 {
	n := d.count(field, max, 8)
	if d.err != nil {
		return nil
	}
	v := make([]int64, n)
	for i := range v {
		v[i] = int64(le.Uint64(d.p[d.off:]))
		d.off += 8
	}
	return v
}

func (m *CommitResult) Unmarshal(p []byte) error {
	d := decoder{msg: "CommitResult", p: p}
	*m = CommitResult{}
	switch e := d.u8("Existing"); e {
	case 0:
	case 1:
		m.Existing = true
	default:
		if d.err == nil {
			d.err = invalid("CommitResult", "Existing", "%d, want 0 or 1", e)
		}
	}
	d.zero("reserved", 3)
	m.Runs = d.i32("Runs")
	m.Lengths = d.i64s("Lengths", MaxPartitions)
	m.Checksums = d.i64s("Checksums", MaxPartitions)
	if len(m.Checksums) == 0 {
		m.Checksums = nil
	}
	if err := d.finish(); err != nil {
		return err
	}
	return m.Validate()
}

// Abort discards a map output: nothing of it is committed.
//
//	u64 handle
type Abort struct {
	Handle uint64
}

func (*Abort) Type() Type                 { return TypeAbort }
func (m *Abort) Validate() error          { return checkHandle("Abort", m.Handle) }
func (m *Abort) Append(dst []byte) []byte { return appendU64(dst, m.Handle) }
func (m *Abort) Unmarshal(p []byte) error { return unmarshalHandle("Abort", p, &m.Handle) }

// Aborted answers Abort. Empty payload.
type Aborted struct{}

func (*Aborted) Type() Type               { return TypeAborted }
func (*Aborted) Validate() error          { return nil }
func (*Aborted) Append(dst []byte) []byte { return dst }
func (*Aborted) Unmarshal(p []byte) error { return unmarshalEmpty("Aborted", p) }

// Ping checks that the daemon answers. Empty payload.
type Ping struct{}

func (*Ping) Type() Type               { return TypePing }
func (*Ping) Validate() error          { return nil }
func (*Ping) Append(dst []byte) []byte { return dst }
func (*Ping) Unmarshal(p []byte) error { return unmarshalEmpty("Ping", p) }

// Pong answers Ping. Empty payload.
type Pong struct{}

func (*Pong) Type() Type               { return TypePong }
func (*Pong) Validate() error          { return nil }
func (*Pong) Append(dst []byte) []byte { return dst }
func (*Pong) Unmarshal(p []byte) error { return unmarshalEmpty("Pong", p) }

// Stats asks for the daemon's figures. Empty payload.
type Stats struct{}

func (*Stats) Type() Type               { return TypeStats }
func (*Stats) Validate() error          { return nil }
func (*Stats) Append(dst []byte) []byte { return dst }
func (*Stats) Unmarshal(p []byte) error { return unmarshalEmpty("Stats", p) }

// Stat is one named daemon figure, such as "bytes_in_flight".
type Stat struct {
	Name  string
	Value int64
}

// StatsResult answers Stats with named figures; the server chooses
// which, and a client ignores names it does not know.
//
//	u32 count | count × (string name | i64 value)
type StatsResult struct {
	Stats []Stat
}

func (*StatsResult) Type() Type { return TypeStatsResult }

func (m *StatsResult) Validate() error {
	if len(m.Stats) > MaxStats {
		return invalid("StatsResult", "Stats", "%d figures exceed %d", len(m.Stats), MaxStats)
	}
	for i, s := range m.Stats {
		if s.Name == "" {
			return invalid("StatsResult", fmt.Sprintf("Stats[%d].Name", i), "empty")
		}
		if err := checkToken("StatsResult", fmt.Sprintf("Stats[%d].Name", i), s.Name, MaxStatNameLen); err != nil {
			return err
		}
	}
	return nil
}

func (m *StatsResult) Append(dst []byte) []byte {
	dst = appendU32(dst, uint32(len(m.Stats)))
	for _, s := range m.Stats {
		dst = appendString(dst, s.Name)
		dst = appendI64(dst, s.Value)
	}
	return dst
}

func (m *StatsResult) Unmarshal(p []byte) error {
	d := decoder{msg: "StatsResult", p: p}
	*m = StatsResult{}
	if n := d.count("Stats", MaxStats, 10); n > 0 {
		m.Stats = make([]Stat, n)
		for i := range m.Stats {
			m.Stats[i] = Stat{Name: d.str("Stats.Name", MaxStatNameLen), Value: d.i64("Stats.Value")}
		}
	}
	if err := d.finish(); err != nil {
		return err
	}
	return m.Validate()
}

// RemoveShuffle deletes every committed map output of one shuffle of an
// application.
//
//	string app_id | i32 shuffle_id
type RemoveShuffle struct {
	AppID     string
	ShuffleID int32
}

func (*RemoveShuffle) Type() Type { return TypeRemoveShuffle }

func (m *RemoveShuffle) Validate() error {
	if err := ValidateName("RemoveShuffle.AppID", m.AppID); err != nil {
		return err
	}
	if m.ShuffleID < 0 {
		return invalid("RemoveShuffle", "ShuffleID", "%d is negative", m.ShuffleID)
	}
	return nil
}

func (m *RemoveShuffle) Append(dst []byte) []byte {
	dst = appendString(dst, m.AppID)
	return appendI32(dst, m.ShuffleID)
}

func (m *RemoveShuffle) Unmarshal(p []byte) error {
	d := decoder{msg: "RemoveShuffle", p: p}
	*m = RemoveShuffle{AppID: d.str("AppID", MaxNameLen), ShuffleID: d.i32("ShuffleID")}
	if err := d.finish(); err != nil {
		return err
	}
	return m.Validate()
}

// Removed is what a removal freed: map outputs (counted by their index
// files) and bytes.
//
//	i64 map_outputs | i64 bytes
type Removed struct {
	MapOutputs int64
	Bytes      int64
}

func (m *Removed) validate(msg string) error {
	if m.MapOutputs < 0 {
		return invalid(msg, "MapOutputs", "%d is negative", m.MapOutputs)
	}
	if m.Bytes < 0 {
		return invalid(msg, "Bytes", "%d is negative", m.Bytes)
	}
	return nil
}

func (m *Removed) append(dst []byte) []byte {
	return appendI64(appendI64(dst, m.MapOutputs), m.Bytes)
}

func (m *Removed) unmarshal(msg string, p []byte) error {
	d := decoder{msg: msg, p: p}
	*m = Removed{MapOutputs: d.i64("MapOutputs"), Bytes: d.i64("Bytes")}
	if err := d.finish(); err != nil {
		return err
	}
	return m.validate(msg)
}

// ShuffleRemoved answers RemoveShuffle with what it freed.
type ShuffleRemoved struct{ Removed }

func (*ShuffleRemoved) Type() Type                 { return TypeShuffleRemoved }
func (m *ShuffleRemoved) Validate() error          { return m.validate("ShuffleRemoved") }
func (m *ShuffleRemoved) Append(dst []byte) []byte { return m.append(dst) }
func (m *ShuffleRemoved) Unmarshal(p []byte) error { return m.unmarshal("ShuffleRemoved", p) }

// RemoveApplication deletes every map output of an application.
//
//	string app_id
type RemoveApplication struct {
	AppID string
}

func (*RemoveApplication) Type() Type { return TypeRemoveApplication }

func (m *RemoveApplication) Validate() error {
	return ValidateName("RemoveApplication.AppID", m.AppID)
}

func (m *RemoveApplication) Append(dst []byte) []byte { return appendString(dst, m.AppID) }

func (m *RemoveApplication) Unmarshal(p []byte) error {
	return unmarshalAppID("RemoveApplication", p, &m.AppID)
}

func unmarshalAppID(msg string, p []byte, app *string) error {
	d := decoder{msg: msg, p: p}
	*app = d.str("AppID", MaxNameLen)
	if err := d.finish(); err != nil {
		return err
	}
	return ValidateName(msg+".AppID", *app)
}

// ApplicationRemoved answers RemoveApplication with what it freed.
type ApplicationRemoved struct{ Removed }

func (*ApplicationRemoved) Type() Type                 { return TypeApplicationRemoved }
func (m *ApplicationRemoved) Validate() error          { return m.validate("ApplicationRemoved") }
func (m *ApplicationRemoved) Append(dst []byte) []byte { return m.append(dst) }
func (m *ApplicationRemoved) Unmarshal(p []byte) error { return m.unmarshal("ApplicationRemoved", p) }

// ListShuffles asks for the shuffle ids of an application that have
// committed map outputs.
//
//	string app_id
type ListShuffles struct {
	AppID string
}

func (*ListShuffles) Type() Type { return TypeListShuffles }

func (m *ListShuffles) Validate() error { return ValidateName("ListShuffles.AppID", m.AppID) }

func (m *ListShuffles) Append(dst []byte) []byte { return appendString(dst, m.AppID) }

func (m *ListShuffles) Unmarshal(p []byte) error {
	return unmarshalAppID("ListShuffles", p, &m.AppID)
}

// ShuffleInfo is one shuffle of an application on disk.
//
//	i32 shuffle_id | i64 map_outputs | i64 bytes
type ShuffleInfo struct {
	ShuffleID  int32
	MapOutputs int64
	Bytes      int64
}

// ShuffleList answers ListShuffles: the application's shuffles with
// committed map outputs, ascending by id, with their bytes on disk.
//
//	u32 count | count × shuffle_info
type ShuffleList struct {
	Shuffles []ShuffleInfo
}

func (*ShuffleList) Type() Type { return TypeShuffleList }

func (m *ShuffleList) Validate() error {
	if len(m.Shuffles) > MaxShuffles {
		return invalid("ShuffleList", "Shuffles", "%d shuffles exceed %d", len(m.Shuffles), MaxShuffles)
	}
	for i, sh := range m.Shuffles {
		switch {
		case sh.ShuffleID < 0:
			return invalid("ShuffleList", fmt.Sprintf("Shuffles[%d].ShuffleID", i), "%d is negative", sh.ShuffleID)
		case i > 0 && sh.ShuffleID <= m.Shuffles[i-1].ShuffleID:
			return invalid("ShuffleList", fmt.Sprintf("Shuffles[%d].ShuffleID", i), "%d not above %d", sh.ShuffleID, m.Shuffles[i-1].ShuffleID)
		case sh.MapOutputs < 0:
			return invalid("ShuffleList", fmt.Sprintf("Shuffles[%d].MapOutputs", i), "%d is negative", sh.MapOutputs)
		case sh.Bytes < 0:
			return invalid("ShuffleList", fmt.Sprintf("Shuffles[%d].Bytes", i), "%d is negative", sh.Bytes)
		}
	}
	return nil
}

func (m *ShuffleList) Append(dst []byte) []byte {
	dst = appendU32(dst, uint32(len(m.Shuffles)))
	for _, sh := range m.Shuffles {
		dst = appendI32(dst, sh.ShuffleID)
		dst = appendI64(dst, sh.MapOutputs)
		dst = appendI64(dst, sh.Bytes)
	}
	return dst
}

func (m *ShuffleList) Unmarshal(p []byte) error {
	d := decoder{msg: "ShuffleList", p: p}
	*m = ShuffleList{}
	if n := d.count("Shuffles", MaxShuffles, 20); n > 0 {
		m.Shuffles = make([]ShuffleInfo, n)
		for i := range m.Shuffles {
			m.Shuffles[i] = ShuffleInfo{ShuffleID: d.i32("ShuffleID"), MapOutputs: d.i64("MapOutputs"), Bytes: d.i64("Bytes")}
		}
	}
	if err := d.finish(); err != nil {
		return err
	}
	return m.Validate()
}

var (
	_ Message = (*Hello)(nil)
	_ Message = (*ServerHello)(nil)
	_ Message = (*RegisterExecutor)(nil)
	_ Message = (*Registered)(nil)
	_ Message = (*OpenMapOutput)(nil)
	_ Message = (*Opened)(nil)
	_ Message = (*Batch)(nil)
	_ Message = (*BatchAccepted)(nil)
	_ Message = (*Commit)(nil)
	_ Message = (*CommitResult)(nil)
	_ Message = (*Abort)(nil)
	_ Message = (*Aborted)(nil)
	_ Message = (*Ping)(nil)
	_ Message = (*Pong)(nil)
	_ Message = (*Stats)(nil)
	_ Message = (*StatsResult)(nil)
	_ Message = (*RemoveShuffle)(nil)
	_ Message = (*ShuffleRemoved)(nil)
	_ Message = (*RemoveApplication)(nil)
	_ Message = (*ApplicationRemoved)(nil)
	_ Message = (*ListShuffles)(nil)
	_ Message = (*ShuffleList)(nil)
	_ Message = (*Error)(nil)
)
