package blockserver

import (
	"encoding/hex"
	"errors"
	"io"
	"net"
	"reflect"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/shufflefile"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFrameGolden pins frames byte for byte, as docs/serving.md lays them
// out (its examples included).
func TestFrameGolden(t *testing.T) {
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"ChunkFetchRequest (serving.md)", AppendChunkFetchRequest(nil, 5, 2), "00000000 00000015 00 00000000 00000005 00000002"},
		{"ChunkFetchSuccess header (serving.md)", append(AppendChunkFetchSuccessHeader(nil, 5, 2, 3), "abc"...), "00000000 00000018 01 00000000 00000005 00000002 616263"},
		{"ChunkFetchFailure", AppendChunkFetchFailure(nil, 1, 0, "no"), "00000000 0000001b 02 00000000 00000001 00000000 00000002 6e6f"},
		{"RpcRequest", AppendRpcRequest(nil, 7, []byte{9, 8}), "00000000 00000017 03 00000000 00000007 00000002 0908"},
		{"RpcResponse", AppendRpcResponse(nil, 7, []byte{1}), "00000000 00000016 04 00000000 00000007 00000001 01"},
		{"RpcFailure", AppendRpcFailure(nil, 7, "bad"), "00000000 00000018 05 00000000 00000007 00000003 626164"},
		{"StreamFailure", AppendStreamFailure(nil, "s", "x"), "00000000 00000013 08 00000001 73 00000001 78"},
	}
	for _, tt := range tests {
		if want := unhex(t, tt.want); string(tt.got) != string(want) {
			t.Errorf("%s =\n%x\nwant\n%x", tt.name, tt.got, want)
		}
	}
}

// TestMessageGolden pins the block-transfer messages and decodes them
// back.
func TestMessageGolden(t *testing.T) {
	tests := []struct {
		name string
		m    interface{ Append([]byte) []byte }
		want string
	}{
		{"OpenBlocks", &OpenBlocks{AppID: "a", ExecID: "1", BlockIDs: []string{"shuffle_0_1_2"}},
			"00 00000001 61 00000001 31 00000001 0000000d 73687566666c655f305f315f32"},
		{"FetchShuffleBlocks", &FetchShuffleBlocks{AppID: "a", ExecID: "1", ShuffleID: 3, MapIDs: []int64{7}, ReduceIDs: [][]int32{{0, 4}}, Batch: true},
			"09 00000001 61 00000001 31 00000003 00000001 0000000000000007 00000001 00000002 00000000 00000004 01"},
		{"RemoveBlocks", &RemoveBlocks{AppID: "a", ExecID: "1", BlockIDs: []string{}},
			"07 00000001 61 00000001 31 00000000"},
		{"GetLocalDirsForExecutors", &GetLocalDirsForExecutors{AppID: "a", ExecIDs: []string{"1", "2"}},
			"0a 00000001 61 00000002 00000001 31 00000001 32"},
		{"DiagnoseCorruption", &DiagnoseCorruption{AppID: "a", ExecID: "1", ShuffleID: 1, MapID: 2, ReduceID: 3, Checksum: 0xfedcba98, Algorithm: "CRC32"},
			"10 00000001 61 00000001 31 00000001 0000000000000002 00000003 00000000fedcba98 00000005 4352433332"},
		{"RemoveOutputs", &RemoveOutputs{AppID: "a", ShuffleID: -1}, "64 00000001 61 ffffffff"},
	}
	for _, tt := range tests {
		want := unhex(t, tt.want)
		got := tt.m.Append(nil)
		if string(got) != string(want) {
			t.Errorf("%s =\n%x\nwant\n%x", tt.name, got, want)
		}
		back, err := DecodeMessage(want)
		if err != nil {
			t.Errorf("%s: DecodeMessage: %v", tt.name, err)
			continue
		}
		if !reflect.DeepEqual(back, tt.m) {
			t.Errorf("%s: DecodeMessage = %#v, want %#v", tt.name, back, tt.m)
		}
	}
	answers := []struct {
		name string
		got  []byte
		want string
	}{
		{"StreamHandle", AppendStreamHandle(nil, 0x0102030405, 3), "03 0000000102030405 00000003"},
		{"BlocksRemoved", AppendBlocksRemoved(nil, 2), "08 00000002"},
		{"CorruptionCause", AppendCorruptionCause(nil, CauseNetworkIssue), "11 01"},
		{"LocalDirsForExecutors", (&LocalDirsForExecutors{ExecIDs: []string{"1", "2"}, Dirs: [][]string{{"/a", "/b"}, {}}}).Append(nil),
			"0b 00000002 00000001 31 00000001 32 00000002 00000002 00000000 00000002 00000002 2f61 00000002 2f62"},
		{"RemoveOutputs' answer", AppendRemoved(nil, 3, 300), "0000000000000003 000000000000012c"},
	}
	for _, tt := range answers {
		if want := unhex(t, tt.want); string(tt.got) != string(want) {
			t.Errorf("%s =\n%x\nwant\n%x", tt.name, tt.got, want)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	frames := []struct {
		name, hex, want string
	}{
		{"empty", "", "empty frame"},
		{"response type", "04 0000000000000001 00000000", "response"},
		{"unknown type", "63", "unknown frame type 99"},
		{"short ChunkFetchRequest", "00 00000000", "truncated"},
		{"trailing", "00 0000000000000001 00000002 ff", "trailing"},
		{"body size too big", "03 0000000000000001 00000005 01", "body_size"},
		{"negative body size", "03 0000000000000001 ffffffff", "body_size"},
		{"negative meta size", "0a 0000000000000001 ffffffff 0000000000000000", "meta_size"},
		{"bad utf-8", "06 00000001 ff", "UTF-8"},
	}
	for _, tt := range frames {
		_, err := DecodeRequest(unhex(t, tt.hex))
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("DecodeRequest(%s) = %v, want ErrMalformed containing %q", tt.name, err, tt.want)
		}
	}
	msgs := []struct {
		name, hex, want string
		unsupported     bool
	}{
		{"huge count", "00 00000001 61 00000001 31 7fffffff", "count", false},
		{"negative count", "09 00000001 61 00000001 31 00000000 ffffffff", "count", false},
		{"bool 2", "09 00000001 61 00000001 31 00000000 00000000 00000000 02", "batch_fetch_enabled", false},
		{"string past the end", "00 00000009 61", "truncated", false},
		{"unsupported", "01", "UploadBlock", true},
		{"unknown", "50", "unknown block-transfer message type 80", false},
	}
	for _, tt := range msgs {
		_, err := DecodeMessage(unhex(t, tt.hex))
		want := ErrMalformed
		if tt.unsupported {
			want = ErrUnsupported
		}
		if !errors.Is(err, want) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("DecodeMessage(%s) = %v, want %v containing %q", tt.name, err, want, tt.want)
		}
	}
}

func TestParseBlockID(t *testing.T) {
	for _, tt := range []struct {
		id      string
		shuffle int32
		ch      chunk
		ok      bool
	}{
		{"shuffle_1_2_3", 1, chunk{2, 3, 4}, true},
		{"shuffle_1_9000000000_0_7", 1, chunk{9000000000, 0, 7}, true},
		{"shuffle_1_2_3_3", 0, chunk{}, false},
		{"shuffle_1_2_-3", 0, chunk{}, false},
		{"shuffle_1_2", 0, chunk{}, false},
		{"shuffle_x_2_3", 0, chunk{}, false},
		{"shuffle_1_2_2147483647", 0, chunk{}, false},
		{"rdd_1_2", 0, chunk{}, false},
	} {
		s, ch, err := parseBlockID(tt.id)
		if (err == nil) != tt.ok || tt.ok && (s != tt.shuffle || ch != tt.ch) {
			t.Errorf("parseBlockID(%q) = %d, %+v, %v; want %d, %+v, ok %v", tt.id, s, ch, err, tt.shuffle, tt.ch, tt.ok)
		}
	}
}

// Fuzz targets: every decoder, on any bytes, returns a value or an error
// and never panics; what decodes encodes back to the same bytes.

func FuzzDecodeRequest(f *testing.F) {
	f.Add(AppendChunkFetchRequest(nil, 1, 2)[FrameLenSize:])
	f.Add(AppendRpcRequest(nil, 1, (&OpenBlocks{AppID: "a", ExecID: "1", BlockIDs: []string{"shuffle_0_1_2"}}).Append(nil))[FrameLenSize:])
	f.Add([]byte{TypeStreamRequest, 0, 0, 0, 1, 'x'})
	f.Add([]byte{TypeUploadStream, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5})
	f.Add([]byte{TypeMergedBlockMetaRequest, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 'a', 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := DecodeRequest(b)
		if err != nil {
			return
		}
		switch m := req.(type) {
		case *ChunkFetchRequest:
			if got := AppendChunkFetchRequest(nil, m.StreamID, m.ChunkIndex)[FrameLenSize:]; string(got) != string(b) {
				t.Fatalf("ChunkFetchRequest re-encodes to %x, read from %x", got, b)
			}
		case *RpcRequest:
			if got := AppendRpcRequest(nil, m.RequestID, m.Body)[FrameLenSize:]; string(got) != string(b) {
				t.Fatalf("RpcRequest re-encodes to %x, read from %x", got, b)
			}
		}
	})
}

func FuzzDecodeMessage(f *testing.F) {
	for _, m := range []interface{ Append([]byte) []byte }{
		&OpenBlocks{AppID: "a", ExecID: "1", BlockIDs: []string{"shuffle_0_1_2", "shuffle_0_1_2_5"}},
		&FetchShuffleBlocks{AppID: "a", ExecID: "1", ShuffleID: 3, MapIDs: []int64{7, 8}, ReduceIDs: [][]int32{{0}, {1, 2}}},
		&FetchShuffleBlocks{AppID: "a", ExecID: "1", MapIDs: []int64{7}, ReduceIDs: [][]int32{{0, 4}}, Batch: true},
		&RemoveBlocks{AppID: "a", ExecID: "1", BlockIDs: []string{"shuffle_0_1_0.data"}},
		&GetLocalDirsForExecutors{AppID: "a", ExecIDs: []string{"1"}},
		&DiagnoseCorruption{AppID: "a", ExecID: "1", Algorithm: "ADLER32"},
		&RemoveOutputs{AppID: "a", ShuffleID: 2},
	} {
		f.Add(m.Append(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b)
		if err != nil {
			return
		}
		if got := m.(interface{ Append([]byte) []byte }).Append(nil); string(got) != string(b) {
			t.Fatalf("%T re-encodes to %x, read from %x", m, got, b)
		}
	})
}

func FuzzDecodeResponse(f *testing.F) {
	f.Add(AppendChunkFetchFailure(nil, 1, 2, "x")[FrameLenSize:])
	f.Add(AppendRpcResponse(nil, 1, []byte{3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2})[FrameLenSize:])
	f.Add(AppendRpcFailure(nil, 1, "y")[FrameLenSize:])
	f.Add(AppendStreamFailure(nil, "s", "z")[FrameLenSize:])
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := DecodeResponse(b); err == nil && r.Type == TypeRpcResponse {
			DecodeStreamHandle(r.Body)
			DecodeLocalDirs(r.Body)
		}
		DecodeLocalDirs(b)
		DecodeStreamHandle(b)
		parseBlockID(string(b))
	})
}

// FuzzServeConn feeds any bytes to a connection of a server: it answers,
// closes, or waits for more, and never panics or leaks its goroutine.
func FuzzServeConn(f *testing.F) {
	st := newFakeStore(f)
	st.commit(f, "a", "1", shufflefile.ID{Shuffle: 0, Map: 1}, "x", "yz")
	s, err := New(Config{Store: st, Limits: Limits{MaxFrame: 1 << 16}})
	if err != nil {
		f.Fatal(err)
	}
	open := AppendRpcRequest(nil, 1, (&OpenBlocks{AppID: "a", ExecID: "1", BlockIDs: []string{"shuffle_0_1_1"}}).Append(nil))
	f.Add(open)
	f.Add(append(open, AppendChunkFetchRequest(nil, s.nextID.Load()+1, 0)...))
	f.Add(AppendRpcRequest(nil, 2, (&DiagnoseCorruption{AppID: "a", ExecID: "1", MapID: 1, Algorithm: "ADLER32"}).Append(nil)))
	f.Add([]byte("GET / HTTP/1.0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cli, srv := net.Pipe()
		c := s.admit(srv)
		done := make(chan struct{})
		go func() { c.serve(); close(done) }()
		go io.Copy(io.Discard, cli)
		cli.Write(b)
		cli.Close()
		<-done
	})
}
