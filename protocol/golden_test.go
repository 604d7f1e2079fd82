package protocol

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The golden vector shared with the JVM client's tests
// (jvm/client/src/test/.../GoldenTest.java): the byte-by-byte session of
// docs/protocol.md section 9, then one frame of every other message type.
// Both sides encode each message and compare with the file byte for byte,
// and decode the file's bytes back.
var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/protocol/session.hex from goldenFrames")

const goldenPath = "../testdata/protocol/session.hex"

type goldenFrame struct {
	name    string
	comment string
	id      uint32
	m       Message
}

var goldenFrames = []goldenFrame{
	{"hello", "docs/protocol.md section 9: Hello, versions 1..1, client \"jvm\", id 1", 1,
		&Hello{MinVersion: 1, MaxVersion: 1, Client: "jvm"}},
	{"open", "docs/protocol.md section 9: OpenMapOutput shuffle 3, map 7, 2 partitions, opaque, default codec and checksum, id 2", 2,
		&OpenMapOutput{ShuffleID: 3, MapID: 7, NumPartitions: 2, Kind: KindOpaque}},
	{"batch-inline", "docs/protocol.md section 9: inline Batch on handle 1, partition 0 = \"ab\", partition 1 = \"c\", id 3", 3,
		&Batch{Handle: 1, Kind: KindOpaque, Plane: PlaneInline, Opaque: OpaqueLayout{PartitionOffsets: []int64{0, 2, 3}}, Inline: []byte("abc")}},
	{"server-hello", "ServerHello: version 1, max_frame 64 MiB, max_inline 63 MiB, features memfd|columnar|lifecycle", 1,
		&ServerHello{Version: 1, MaxFrame: 64 << 20, MaxInline: 63 << 20, Features: FeatureMemfd | FeatureColumnar | FeatureLifecycle, Server: "shuffled/1.0"}},
	{"opened", "Opened: handle 1, answering id 2", 2, &Opened{Handle: 1}},
	{"batch-accepted", "BatchAccepted, answering id 3", 3, &BatchAccepted{}},
	{"register-root", "RegisterExecutor into the daemon's root: no local dirs, sub_dirs 0", 4,
		&RegisterExecutor{AppID: "app-1", ExecutorID: "exec-1"}},
	{"registered", "Registered: the dir the daemon resolved", 4,
		&Registered{Dirs: []string{"/var/lib/shuffled/app-1/exec-1"}}},
	{"register-local", "RegisterExecutor with two Spark local dirs, 64 sub-dirs", 5,
		&RegisterExecutor{AppID: "app-1", ExecutorID: "exec-2", SubDirs: 64, LocalDirs: []string{"/data/a/blockmgr-1", "/data/b/blockmgr-2"}}},
	{"open-codec", "OpenMapOutput shuffle 0, map 12345678901, 200 partitions, codec zstd, checksum CRC32C", 6,
		&OpenMapOutput{ShuffleID: 0, MapID: 12345678901, NumPartitions: 200, Kind: KindOpaque, Codec: "zstd", Checksum: "CRC32C"}},
	{"open-lz4-block", "OpenMapOutput shuffle 1, map 2, 4 partitions, codec lz4 with 64 KiB blocks, checksum ADLER32", 17,
		&OpenMapOutput{ShuffleID: 1, MapID: 2, NumPartitions: 4, Kind: KindOpaque, Codec: "lz4", Checksum: "ADLER32", BlockSize: 64 << 10}},
	{"open-zstd-level", "OpenMapOutput shuffle 1, map 3, 4 partitions, codec zstd level 3, default checksum", 18,
		&OpenMapOutput{ShuffleID: 1, MapID: 3, NumPartitions: 4, Kind: KindOpaque, Codec: "zstd", Level: 3}},
	{"register-key", "RegisterExecutor into the daemon's root with a 128-bit IO encryption key (bytes 00..0f)", 21,
		&RegisterExecutor{AppID: "app-1", ExecutorID: "exec-3", IOEncryptionKey: Secret{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}}},
	{"open-encrypted", "OpenMapOutput shuffle 1, map 5, 3 partitions, opaque, IO encryption (flags 0x01), codec lz4, default checksum", 22,
		&OpenMapOutput{ShuffleID: 1, MapID: 5, NumPartitions: 3, Kind: KindOpaque, Flags: OpenEncrypt, Codec: "lz4"}},
	{"open-kudo", "OpenMapOutput shuffle 1, map 4, 2 partitions, columnar kudo, codec none, schema (id bigint, name string)", 19,
		&OpenMapOutput{ShuffleID: 1, MapID: 4, NumPartitions: 2, Kind: KindColumnar, Format: FormatKudo, Codec: "none", Checksum: "none",
			Schema: []SchemaField{{Name: "id", SparkType: "bigint"}, {Name: "name", SparkType: "string"}}}},
	{"batch-memfd", "memfd Batch on handle 1 (FD flag; the descriptor travels as SCM_RIGHTS): 3 partitions, region 0..9", 7,
		&Batch{Handle: 1, Kind: KindOpaque, Plane: PlaneMemfd, Opaque: OpaqueLayout{PartitionOffsets: []int64{0, 5, 5, 9}}, Region: Region{Offset: 0, Length: 9}}},
	{"batch-last", "inline Batch on handle 1 with the LAST flag (flags 0x01): partition 0 = \"d\", partition 1 empty", 20,
		&Batch{Handle: 1, Kind: KindOpaque, Plane: PlaneInline, Flags: BatchLast, Opaque: OpaqueLayout{PartitionOffsets: []int64{0, 1, 1}}, Inline: []byte("d")}},
	{"commit", "Commit handle 1", 8, &Commit{Handle: 1}},
	{"commit-result", "CommitResult: 2 runs merged, lengths 2 and 1, two checksums", 8,
		&CommitResult{Runs: 2, Lengths: []int64{2, 1}, Checksums: []int64{0x12345678, 0xfedcba98}}},
	{"commit-result-existing", "CommitResult: an earlier attempt won (existing), no checksum", 9,
		&CommitResult{Existing: true, Lengths: []int64{5, 0, 4}}},
	{"abort", "Abort handle 2", 10, &Abort{Handle: 2}},
	{"aborted", "Aborted", 10, &Aborted{}},
	{"ping", "Ping", 11, &Ping{}},
	{"pong", "Pong", 11, &Pong{}},
	{"stats", "Stats", 12, &Stats{}},
	{"stats-result", "StatsResult: two figures", 12,
		&StatsResult{Stats: []Stat{{Name: "bytes_in_flight", Value: 4096}, {Name: "connections", Value: 1}}}},
	{"remove-shuffle", "RemoveShuffle app-1 shuffle 3", 13, &RemoveShuffle{AppID: "app-1", ShuffleID: 3}},
	{"shuffle-removed", "ShuffleRemoved: 2 map outputs, 4096 bytes", 13, &ShuffleRemoved{Removed{MapOutputs: 2, Bytes: 4096}}},
	{"remove-application", "RemoveApplication app-1", 14, &RemoveApplication{AppID: "app-1"}},
	{"application-removed", "ApplicationRemoved: 5 map outputs, 10000 bytes", 14, &ApplicationRemoved{Removed{MapOutputs: 5, Bytes: 10000}}},
	{"list-shuffles", "ListShuffles app-1", 15, &ListShuffles{AppID: "app-1"}},
	{"shuffle-list", "ShuffleList: shuffles 0 and 3", 15,
		&ShuffleList{Shuffles: []ShuffleInfo{{ShuffleID: 0, MapOutputs: 10, Bytes: 1000}, {ShuffleID: 3, MapOutputs: 2, Bytes: 64}}}},
	{"list-applications", "ListApplications (the admin commands)", 21, &ListApplications{}},
	{"application-list", "ApplicationList: app-1 of uid 1000 (1 connection, 2 shuffles, 12 map outputs, 1064 bytes), app-2 with no recorded owner", 21,
		&ApplicationList{Applications: []ApplicationInfo{
			{AppID: "app-1", OwnerUID: 1000, Connections: 1, Shuffles: 2, MapOutputs: 12, Bytes: 1064},
			{AppID: "app-2", OwnerUID: -1},
		}}},
	{"error", "Error NotFound answering id 16", 16, &Error{Code: CodeNotFound, Message: "Commit.Handle: 9 is not open"}},
	{"connection-error", "connection-level Error (request id 0): Unavailable, then the daemon closes", 0,
		&Error{Code: CodeUnavailable, Message: "draining"}},
}

// parseGolden reads frames of the golden file: "frame NAME" lines, each
// followed by hex lines; '#' starts a comment.
func parseGolden(t *testing.T, path string) (names []string, frames map[string][]byte) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	frames = make(map[string][]byte)
	var cur string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
		case fields[0] == "frame":
			if len(fields) != 2 {
				t.Fatalf("%s:%d: want \"frame NAME\"", path, n)
			}
			cur = fields[1]
			if _, dup := frames[cur]; dup {
				t.Fatalf("%s:%d: frame %q twice", path, n, cur)
			}
			frames[cur] = []byte{}
			names = append(names, cur)
		default:
			if cur == "" {
				t.Fatalf("%s:%d: hex before the first frame line", path, n)
			}
			b, err := hex.DecodeString(strings.Join(fields, ""))
			if err != nil {
				t.Fatalf("%s:%d: %v", path, n, err)
			}
			frames[cur] = append(frames[cur], b...)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return names, frames
}

func writeGolden(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(`# Golden frames of the shuffled wire protocol, version 1 (docs/protocol.md).
# The first three are the byte-by-byte session of section 9; then one frame of
# every other message type. The Go tests (protocol/golden_test.go) and the JVM
# client's tests (GoldenTest) encode each message and compare byte for byte,
# then decode these bytes back.
#
# Format: "frame NAME", then the frame as hex: the 16-byte header on the first
# line, the payload 16 bytes a line. '#' starts a comment.
`)
	for _, g := range goldenFrames {
		f, err := AppendFrame(nil, g.id, g.m)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "\n# %s\nframe %s\n", g.comment, g.name)
		for i := 0; i < len(f); {
			n := 16
			if i+n > len(f) {
				n = len(f) - i
			}
			for j := 0; j < n; j++ {
				if j == 8 {
					b.WriteByte(' ')
				}
				fmt.Fprintf(&b, "%02x", f[i+j])
				if j < n-1 {
					b.WriteByte(' ')
				}
			}
			b.WriteByte('\n')
			i += n
		}
	}
	if err := os.WriteFile(filepath.FromSlash(goldenPath), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestGoldenFrames(t *testing.T) {
	if *updateGolden {
		writeGolden(t)
	}
	names, frames := parseGolden(t, filepath.FromSlash(goldenPath))
	if len(names) != len(goldenFrames) {
		t.Errorf("golden file has %d frames, the table %d", len(names), len(goldenFrames))
	}
	seen := make(map[Type]bool)
	for i, g := range goldenFrames {
		if i < len(names) && names[i] != g.name {
			t.Errorf("frame %d is %q in the file, %q in the table", i, names[i], g.name)
		}
		want, ok := frames[g.name]
		if !ok {
			t.Errorf("frame %q missing from the golden file", g.name)
			continue
		}
		got, err := AppendFrame(nil, g.id, g.m)
		if err != nil {
			t.Errorf("%s: AppendFrame: %v", g.name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: AppendFrame =\n%x\nwant (golden)\n%x", g.name, got, want)
		}
		h, err := ParseHeader(want, DefaultMaxFrame)
		if err != nil {
			t.Errorf("%s: ParseHeader: %v", g.name, err)
			continue
		}
		if h.ID != g.id || int(h.Length) != len(want)-HeaderSize {
			t.Errorf("%s: header id %d length %d, want id %d length %d", g.name, h.ID, h.Length, g.id, len(want)-HeaderSize)
		}
		back, err := Decode(h.Type, want[HeaderSize:])
		if err != nil {
			t.Errorf("%s: Decode: %v", g.name, err)
			continue
		}
		if !reflect.DeepEqual(back, g.m) {
			t.Errorf("%s: decoded %+v, want %+v", g.name, back, g.m)
		}
		seen[h.Type] = true
	}
	for typ := range typeNames {
		if !seen[typ] {
			t.Errorf("no golden frame of type %v", typ)
		}
	}
}
