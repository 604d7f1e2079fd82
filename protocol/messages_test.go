package protocol

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// validMessages returns one valid, non-trivial value of every message.
func validMessages() []Message {
	var ipc CUDAIPC
	for i := range ipc.Handle {
		ipc.Handle[i] = byte(i)
	}
	ipc.Device = 3
	return []Message{
		&Hello{MinVersion: 1, MaxVersion: 2, Client: "spark-3.5 executor"},
		&ServerHello{Version: 1, MaxFrame: DefaultMaxFrame, MaxInline: 16 << 20, Features: FeatureMemfd | FeatureColumnar, Server: "shuffled 0.1"},
		&RegisterExecutor{AppID: "app-20240101-0001", ExecutorID: "7", LocalDirs: []string{"/data1/blockmgr-1", "/data2/blockmgr-2"}, SubDirs: 64},
		&RegisterExecutor{AppID: "job", ExecutorID: "driver"},
		&Registered{Dirs: []string{"/var/lib/shuffled/job/driver"}},
		&Registered{},
		&OpenMapOutput{ShuffleID: 3, MapID: 1 << 40, NumPartitions: 200, Kind: KindOpaque, Codec: "lz4", Checksum: "ADLER32"},
		&OpenMapOutput{ShuffleID: 0, MapID: 0, NumPartitions: 1, Kind: KindColumnar},
		&Opened{Handle: 42},
		&Batch{Handle: 42, Kind: KindOpaque, Plane: PlaneInline, Opaque: OpaqueLayout{PartitionOffsets: []int64{0, 3, 3, 5}}, Inline: []byte("abcde")},
		&Batch{Handle: 42, Kind: KindOpaque, Plane: PlaneInline, Flags: BatchLast, Opaque: OpaqueLayout{PartitionOffsets: []int64{0, 1}}, Inline: []byte("z")},
		&Batch{Handle: 42, Kind: KindOpaque, Plane: PlaneMemfd, Opaque: OpaqueLayout{PartitionOffsets: []int64{0, 4096}}, Region: Region{Offset: 8192, Length: 4096}},
		&Batch{Handle: 9, Kind: KindColumnar, Plane: PlaneInline, Inline: make([]byte, 64), Columnar: ColumnarLayout{
			Rows: 4,
			Columns: []Column{
				{Type: TypeInt32, Name: "k", Validity: Buffer{0, 1}, Data: Buffer{8, 16}},
				{Type: TypeString, Name: "s", Offsets: Buffer{24, 20}, Data: Buffer{44, 10}},
				{Type: TypeDecimal64, Precision: 12, Scale: 2, Data: Buffer{32, 32}},
			},
			PartitionRows: []int64{0, 1, 1, 4},
		}},
		&Batch{Handle: 9, Kind: KindColumnar, Plane: PlaneInline, Inline: make([]byte, 128), Columnar: ColumnarLayout{
			Rows: 4,
			Columns: []Column{
				{Type: TypeList, Name: "a", Children: 1, Validity: Buffer{0, 1}, Offsets: Buffer{8, 20}},
				{Type: TypeStruct, Name: "element", Children: 2},
				{Type: TypeIntervalYM, Name: "ym", Data: Buffer{32, 40}},
				{Type: TypeMap, Name: "m", Children: 1, Offsets: Buffer{72, 40}},
				{Type: TypeStruct, Children: 2},
				{Type: TypeString, Name: "key", Offsets: Buffer{72, 4}},
				{Type: TypeVoid, Name: "value", Validity: Buffer{0, 1}, Data: Buffer{0, 8}},
				{Type: TypeIntervalDT, Name: "dt", Data: Buffer{32, 32}},
			},
			PartitionRows: []int64{0, 4},
		}},
		&Batch{Handle: 9, Kind: KindColumnar, Plane: PlaneCUDAIPC, IPC: ipc, Region: Region{Offset: 256, Length: 1 << 20}, Columnar: ColumnarLayout{
			Rows:          0,
			Columns:       []Column{{Type: TypeBinary}},
			PartitionRows: []int64{0, 0},
		}},
		&BatchAccepted{},
		&Commit{Handle: 42},
		&CommitResult{Lengths: []int64{10, 0, 7}, Checksums: []int64{1, 1, 0xffffffff}, Runs: 2},
		&CommitResult{Lengths: []int64{0}, Existing: true},
		&Abort{Handle: 42},
		&Aborted{},
		&Ping{},
		&Pong{},
		&Stats{},
		&StatsResult{Stats: []Stat{{"bytes_in_flight", 1 << 20}, {"open_map_outputs", 3}, {"delta", -1}}},
		&RemoveShuffle{AppID: "app-1", ShuffleID: 5},
		&ShuffleRemoved{Removed{MapOutputs: 12, Bytes: 4096}},
		&RemoveApplication{AppID: "app-1"},
		&ApplicationRemoved{Removed{MapOutputs: 0, Bytes: 0}},
		&ListShuffles{AppID: "app-1"},
		&ShuffleList{Shuffles: []ShuffleInfo{{0, 1, 10}, {5, 2, 20}, {9, 3, 0}}},
		&ListApplications{},
		&ApplicationList{Applications: []ApplicationInfo{{"app-1", 1000, 2, 3, 40, 4096}, {"app-2", -1, 0, 0, 0, 0}}},
		&Error{Code: CodeNotFound, Message: "Commit.Handle 77: no such map output"},
		&OpenMapOutput{ShuffleID: 1, MapID: 2, NumPartitions: 8, Kind: KindColumnar, Format: FormatKudo, Codec: "zstd",
			Schema: []SchemaField{{"id", "int"}, {"price", "decimal(38,10)"}, {"", "binary"}}},
		&OpenMapOutput{ShuffleID: 1, MapID: 3, NumPartitions: 8, Kind: KindColumnar, Format: FormatKudo, Schema: []SchemaField{}},
		// A wide nested type: Spark's simpleString of it is over 1 KiB.
		&OpenMapOutput{ShuffleID: 1, MapID: 4, NumPartitions: 8, Kind: KindColumnar, Format: FormatKudo, Schema: []SchemaField{
			{"w", "struct<" + strings.Repeat("field_with_a_long_name:array<map<string,int>>,", 60) + "last:int>"}}},
		&OpenMapOutput{ShuffleID: 3, MapID: 9, NumPartitions: 4, Kind: KindOpaque, Codec: "zstd", Level: 3},
		&OpenMapOutput{ShuffleID: 3, MapID: 10, NumPartitions: 4, Kind: KindColumnar, Format: FormatKudo, Codec: "lz4", BlockSize: 64 << 10, Level: -7,
			Schema: []SchemaField{{"id", "bigint"}}},
		&RegisterExecutor{AppID: "job", ExecutorID: "2", LocalDirs: []string{"/data1/blockmgr-3"}, SubDirs: 64, IOEncryptionKey: Secret(bytes.Repeat([]byte{7}, 32))},
		&OpenMapOutput{ShuffleID: 3, MapID: 11, NumPartitions: 4, Kind: KindOpaque, Flags: OpenEncrypt},
	}
}

func TestRoundTrip(t *testing.T) {
	seen := map[Type]bool{}
	for _, m := range validMessages() {
		seen[m.Type()] = true
		frame, err := AppendFrame(nil, 7, m)
		if err != nil {
			t.Fatalf("AppendFrame(%v) error: %v", m.Type(), err)
		}
		h, payload, err := ReadFrame(bytes.NewReader(frame), DefaultMaxFrame, nil)
		if err != nil {
			t.Fatalf("ReadFrame(%v) error: %v", m.Type(), err)
		}
		if h.Type != m.Type() || h.ID != 7 || int(h.Length) != len(frame)-HeaderSize {
			t.Errorf("ReadFrame(%v) header = %+v, want type %v id 7 length %d", m.Type(), h, m.Type(), len(frame)-HeaderSize)
		}
		if got, want := h.Flags&FlagFD != 0, WantsFD(m); got != want {
			t.Errorf("%v: FlagFD = %v, want %v", m.Type(), got, want)
		}
		got, err := Decode(h.Type, payload)
		if err != nil {
			t.Fatalf("Decode(%v) error: %v", m.Type(), err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("Decode(Append(%#v)) = %#v", m, got)
		}
		// Every strict prefix of a payload must fail to decode, never panic;
		// but a RegisterExecutor cut before its key is one without a key.
		keyless := -1
		if r, ok := m.(*RegisterExecutor); ok && len(r.IOEncryptionKey) > 0 {
			keyless = len((&RegisterExecutor{AppID: r.AppID, ExecutorID: r.ExecutorID, LocalDirs: r.LocalDirs, SubDirs: r.SubDirs}).Append(nil))
		}
		for i := 0; i < len(payload); i++ {
			if i == keyless {
				continue
			}
			if _, err := Decode(h.Type, bytes.Clone(payload[:i])); err == nil {
				t.Errorf("Decode(%v payload[:%d] of %d) succeeded, want error", m.Type(), i, len(payload))
				break
			}
		}
		if _, err := Decode(h.Type, append(payload[:len(payload):len(payload)], 0)); err == nil {
			t.Errorf("Decode(%v payload + 1 byte) succeeded, want error", m.Type())
		}
	}
	for typ := range typeNames {
		if !seen[typ] {
			t.Errorf("no round-trip case for %v", typ)
		}
	}
}

func TestBatchAppendHead(t *testing.T) {
	b := validMessages()[9].(*Batch)
	full := b.Append(nil)
	head := b.AppendHead(nil)
	if got := append(head, b.Inline...); !bytes.Equal(got, full) {
		t.Errorf("AppendHead + Inline = %x, want %x", got, full)
	}
}

func TestValidateRefuses(t *testing.T) {
	opaque := func(offs []int64, data string) *Batch {
		return &Batch{Handle: 1, Kind: KindOpaque, Plane: PlaneInline, Opaque: OpaqueLayout{PartitionOffsets: offs}, Inline: []byte(data)}
	}
	columnar := func(rows int64, c Column, payload int) *Batch {
		return &Batch{Handle: 1, Kind: KindColumnar, Plane: PlaneInline, Inline: make([]byte, payload),
			Columnar: ColumnarLayout{Rows: rows, Columns: []Column{c}, PartitionRows: []int64{0, rows}}}
	}
	tests := []struct {
		m     Message
		field string // must appear in the error
		unsup bool   // ErrUnsupported rather than ErrMalformed
	}{
		{&Hello{MinVersion: 0, MaxVersion: 1}, "MinVersion", false},
		{&Hello{MinVersion: 2, MaxVersion: 1}, "MaxVersion", false},
		{&Hello{MinVersion: 1, MaxVersion: 1, Client: "a\x00b"}, "Client", false},
		{&ServerHello{Version: 1, MaxFrame: 100}, "MaxFrame", false},
		{&ServerHello{Version: 1, MaxFrame: 1 << 20, MaxInline: 2 << 20}, "MaxInline", false},
		{&RegisterExecutor{AppID: "../etc", ExecutorID: "1"}, "AppID", false},
		{&RegisterExecutor{AppID: "a", ExecutorID: ".."}, "ExecutorID", false},
		{&RegisterExecutor{AppID: "a", ExecutorID: "1", LocalDirs: []string{"relative/dir"}, SubDirs: 64}, "LocalDirs[0]", false},
		{&RegisterExecutor{AppID: "a", ExecutorID: "1", LocalDirs: []string{"/a/../b"}, SubDirs: 64}, "LocalDirs[0]", false},
		{&RegisterExecutor{AppID: "a", ExecutorID: "1", LocalDirs: []string{"/a"}, SubDirs: 0}, "SubDirs", false},
		{&RegisterExecutor{AppID: "a", ExecutorID: "1", SubDirs: 64}, "SubDirs", false},
		{&OpenMapOutput{ShuffleID: -1, NumPartitions: 1, Kind: KindOpaque}, "ShuffleID", false},
		{&OpenMapOutput{MapID: -1, NumPartitions: 1, Kind: KindOpaque}, "MapID", false},
		{&OpenMapOutput{NumPartitions: 0, Kind: KindOpaque}, "NumPartitions", false},
		{&OpenMapOutput{NumPartitions: MaxPartitions + 1, Kind: KindOpaque}, "NumPartitions", false},
		{&OpenMapOutput{NumPartitions: 1, Kind: 7}, "Kind", true},
		{&OpenMapOutput{NumPartitions: 1, Kind: KindOpaque, Codec: "lz4/../x"}, "Codec", false},
		{&OpenMapOutput{NumPartitions: 1, Kind: KindOpaque, Checksum: strings.Repeat("a", 33)}, "Checksum", false},
		{&OpenMapOutput{NumPartitions: 1, Kind: KindOpaque, Codec: "lz4", BlockSize: MaxBlockSize + 1}, "BlockSize", false},
		{&Opened{}, "Handle", false},
		{&Commit{}, "Handle", false},
		{&Abort{}, "Handle", false},
		{opaque([]int64{0, 3, 2, 5}, "abcde"), "PartitionOffsets[2]", false},
		{opaque([]int64{1, 5}, "abcde"), "PartitionOffsets[0]", false},
		{opaque([]int64{0, 4}, "abcde"), "PartitionOffsets[1]", false},
		{opaque([]int64{0}, ""), "PartitionOffsets", false},
		{&Batch{Handle: 1, Kind: KindOpaque, Plane: PlaneInline, Flags: 0x02, Opaque: OpaqueLayout{PartitionOffsets: []int64{0, 0}}}, "Flags", false},
		{&Batch{Handle: 1, Kind: KindOpaque, Plane: 9, Opaque: OpaqueLayout{PartitionOffsets: []int64{0, 0}}}, "Plane", true},
		{&Batch{Handle: 1, Kind: KindOpaque, Plane: PlaneMemfd, Opaque: OpaqueLayout{PartitionOffsets: []int64{0, 0}}, Region: Region{Offset: -1}}, "Region", false},
		{&Batch{Handle: 1, Kind: KindOpaque, Plane: PlaneMemfd, Opaque: OpaqueLayout{PartitionOffsets: []int64{0, 1 << 62}}, Region: Region{Offset: 1 << 62, Length: 1 << 62}}, "Region", false},
		{columnar(4, Column{Type: 99, Data: Buffer{0, 16}}, 16), "Columns[0].Type", true},
		{columnar(4, Column{Type: TypeInt32, Data: Buffer{0, 15}}, 16), "Columns[0].Data", false},
		{columnar(4, Column{Type: TypeInt32, Data: Buffer{8, 16}}, 16), "Columns[0].Data", false},
		{columnar(4, Column{Type: TypeInt32, Offsets: Buffer{0, 4}, Data: Buffer{0, 16}}, 16), "Columns[0].Offsets", false},
		{columnar(9, Column{Type: TypeInt8, Validity: Buffer{0, 1}, Data: Buffer{0, 9}}, 16), "Columns[0].Validity", false},
		{columnar(4, Column{Type: TypeString, Offsets: Buffer{0, 16}}, 16), "Columns[0].Offsets", false},
		{columnar(4, Column{Type: TypeInt32, Precision: 3, Data: Buffer{0, 16}}, 16), "Columns[0].Precision", false},
		{columnar(4, Column{Type: TypeList, Children: 2, Offsets: Buffer{0, 20}}, 32), "Columns[0].Children", false},
		{columnar(4, Column{Type: TypeInt32, Children: 1, Data: Buffer{0, 16}}, 16), "Columns[0].Children", false},
		{columnar(4, Column{Type: TypeStruct, Children: 1}, 16), "the columns end with 1 children", false},
		{columnar(4, Column{Type: TypeStruct, Data: Buffer{0, 4}}, 16), "Columns[0].Offsets", false},
		{columnar(4, Column{Type: TypeList, Children: 1, Offsets: Buffer{0, 16}}, 16), "Columns[0].Offsets", false},
		{columnar(4, Column{Type: TypeMap, Children: 1, Offsets: Buffer{0, 20}, Data: Buffer{0, 1}}, 32), "Columns[0].Data", false},
		{columnar(4, Column{Type: TypeDecimal32, Precision: 10, Data: Buffer{0, 16}}, 16), "Columns[0].Precision", false},
		{columnar(4, Column{Type: TypeDecimal32, Precision: 5, Scale: 6, Data: Buffer{0, 16}}, 16), "Columns[0].Scale", false},
		{columnar(4, Column{Type: TypeDecimal64, Precision: 5, Scale: -1, Data: Buffer{0, 32}}, 32), "Columns[0].Scale", false},
		{columnar(1<<62, Column{Type: TypeInt64, Data: Buffer{0, 16}}, 16), "Columns[0].Data", false},
		{&OpenMapOutput{NumPartitions: 1, Kind: KindColumnar, Format: 2}, "Format", true},
		{&OpenMapOutput{NumPartitions: 1, Kind: KindOpaque, Format: FormatKudo}, "Format", false},
		{&OpenMapOutput{NumPartitions: 1, Kind: KindColumnar, Format: FormatKudo, Schema: []SchemaField{{"a", ""}}}, "Schema[0].SparkType", false},
		{&OpenMapOutput{NumPartitions: 1, Kind: KindColumnar, Format: FormatKudo, Schema: []SchemaField{{"a", "int"}, {"b\x00", "int"}}}, "Schema[1].Name", false},
		{&Batch{Handle: 1, Kind: KindColumnar, Plane: PlaneInline, Inline: make([]byte, 16), Columnar: ColumnarLayout{Rows: 4,
			Columns: []Column{{Type: TypeInt32, Data: Buffer{0, 16}}}, PartitionRows: []int64{0, 3}}}, "PartitionRows[1]", false},
		{&CommitResult{}, "Lengths", false},
		{&CommitResult{Lengths: []int64{-1}}, "Lengths[0]", false},
		{&CommitResult{Lengths: []int64{1, 2}, Checksums: []int64{1}}, "Checksums", false},
		{&CommitResult{Lengths: []int64{1}, Checksums: []int64{1 << 32}}, "Checksums[0]", false},
		{&CommitResult{Lengths: []int64{1}, Runs: -1}, "Runs", false},
		{&StatsResult{Stats: []Stat{{"", 1}}}, "Stats[0].Name", false},
		{&StatsResult{Stats: []Stat{{"a b", 1}}}, "Stats[0].Name", false},
		{&RemoveShuffle{AppID: "a", ShuffleID: -2}, "ShuffleID", false},
		{&RemoveApplication{AppID: ""}, "AppID", false},
		{&ListShuffles{AppID: "a/b"}, "AppID", false},
		{&ShuffleList{Shuffles: []ShuffleInfo{{3, 1, 1}, {3, 1, 1}}}, "Shuffles[1].ShuffleID", false},
		{&ShuffleList{Shuffles: []ShuffleInfo{{3, 1, -1}}}, "Shuffles[0].Bytes", false},
		{&ApplicationRemoved{Removed{MapOutputs: 1, Bytes: -1}}, "Bytes", false},
		{&ShuffleRemoved{Removed{MapOutputs: -1}}, "MapOutputs", false},
		{&Error{Code: CodeOK}, "Code", false},
	}
	for _, tt := range tests {
		err := tt.m.Validate()
		want := ErrMalformed
		if tt.unsup {
			want = ErrUnsupported
		}
		if !errors.Is(err, want) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%v.Validate(%+v) = %v, want %v naming %s", tt.m.Type(), tt.m, err, want, tt.field)
			continue
		}
		// The decoder refuses what Validate refuses: encode anyway and decode.
		if _, err := Decode(tt.m.Type(), tt.m.Append(nil)); err == nil {
			t.Errorf("Decode(Append(%v %+v)) succeeded, want error", tt.m.Type(), tt.m)
		}
		if _, err := AppendFrame(nil, 1, tt.m); err == nil {
			t.Errorf("AppendFrame(%v %+v) succeeded, want error", tt.m.Type(), tt.m)
		}
	}
}

// TestOpenSchemaWithoutKudo: a schema is kudo's; with format shfc it is
// refused (the encoding has no place for it).
func TestOpenSchemaWithoutKudo(t *testing.T) {
	m := &OpenMapOutput{NumPartitions: 1, Kind: KindColumnar, Schema: []SchemaField{{"a", "int"}}}
	if err := m.Validate(); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "Schema") {
		t.Fatalf("Validate = %v, want ErrMalformed naming Schema", err)
	}
}

func TestValidateName(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"app-20240101120000-0001", true},
		{"driver", true},
		{"7", true},
		{"a..b", true},
		{"ünïcode", true},
		{strings.Repeat("x", MaxNameLen), true},
		{"", false},
		{".", false},
		{"..", false},
		{"a/b", false},
		{"/", false},
		{"a\x00", false},
		{"a\nb", false},
		{"a\x7fb", false},
		{"a\u0085b", false},
		{"\xff", false},
		{strings.Repeat("x", MaxNameLen+1), false},
	}
	for _, tt := range tests {
		err := ValidateName("AppID", tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", tt.in, err, tt.ok)
		}
		if err != nil && (!errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "AppID")) {
			t.Errorf("ValidateName(%q) = %v, want ErrMalformed naming AppID", tt.in, err)
		}
	}
	// The wire's text: ErrMalformed's, then the field and the name.
	for in, want := range map[string]string{
		"":    "protocol: malformed message: AppID is empty",
		"a/b": `protocol: malformed message: AppID "a/b" contains '/'`,
	} {
		if err := ValidateName("AppID", in); err == nil || err.Error() != want {
			t.Errorf("ValidateName(%q) = %v, want %q", in, err, want)
		}
	}
}

func TestNegotiate(t *testing.T) {
	tests := []struct {
		cmin, cmax, smin, smax uint16
		want                   uint16
		ok                     bool
	}{
		{1, 1, 1, 1, 1, true},
		{1, 3, 1, 2, 2, true},
		{2, 5, 1, 3, 3, true},
		{1, 1, 2, 3, 0, false},
		{4, 5, 1, 3, 0, false},
	}
	for _, tt := range tests {
		got, err := Negotiate(&Hello{MinVersion: tt.cmin, MaxVersion: tt.cmax}, tt.smin, tt.smax)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("Negotiate(%d..%d, %d..%d) = %d, %v; want %d, ok=%v", tt.cmin, tt.cmax, tt.smin, tt.smax, got, err, tt.want, tt.ok)
		}
		if err != nil && CodeOf(err) != CodeVersionMismatch {
			t.Errorf("Negotiate(%d..%d, %d..%d) code = %v, want %v", tt.cmin, tt.cmax, tt.smin, tt.smax, CodeOf(err), CodeVersionMismatch)
		}
	}
}

func TestErrorCodes(t *testing.T) {
	for c := CodeOK; c <= CodeInternal; c++ {
		if s := c.String(); strings.HasPrefix(s, "Code(") {
			t.Errorf("Code(%d).String() = %q, want a name", uint32(c), s)
		}
	}
	if s := Code(99).String(); s != "Code(99)" {
		t.Errorf("Code(99).String() = %q, want %q", s, "Code(99)")
	}
	err := error(Errorf(CodeNotFound, "Commit.Handle %d: unknown", 5))
	if got := err.Error(); got != "NotFound: Commit.Handle 5: unknown" {
		t.Errorf("Error() = %q", got)
	}
	if !errors.Is(err, &Error{Code: CodeNotFound}) || errors.Is(err, &Error{Code: CodeAborted}) {
		t.Errorf("errors.Is by code wrong for %v", err)
	}
	if CodeOf(nil) != CodeOK || CodeOf(errors.New("x")) != CodeInternal || CodeOf(err) != CodeNotFound {
		t.Errorf("CodeOf wrong")
	}
	long := Errorf(CodeInternal, "%s", strings.Repeat("é", MaxErrorMessage))
	if len(long.Message) > MaxErrorMessage || long.Validate() != nil || !strings.HasSuffix(long.Message, "é") {
		t.Errorf("Errorf of a long message: %d bytes, valid=%v", len(long.Message), long.Validate())
	}
}

func TestDecodeUnknownType(t *testing.T) {
	for _, typ := range []Type{0, 0x00FF, 0x7fff, 0x8000, 0x8fff} {
		if _, err := Decode(typ, nil); !errors.Is(err, ErrUnsupported) {
			t.Errorf("Decode(%v) = %v, want ErrUnsupported", typ, err)
		}
	}
}
