package protocol

import (
	"encoding/hex"
	"strings"
	"testing"
)

// TestDocExamples pins the byte examples of docs/protocol.md section 9.
func TestDocExamples(t *testing.T) {
	tests := []struct {
		id   uint32
		m    Message
		want string
	}{
		{1, &Hello{MinVersion: 1, MaxVersion: 1, Client: "jvm"},
			"53480100 00000000 01000000 09000000 01000100 03006a76 6d"},
		{2, &OpenMapOutput{ShuffleID: 3, MapID: 7, NumPartitions: 2, Kind: KindOpaque},
			"53480300 00000000 02000000 20000000 03000000 07000000 00000000 02000000 01000000 0000 0000 00000000 00000000"},
		{3, &Batch{Handle: 1, Kind: KindOpaque, Plane: PlaneInline, Opaque: OpaqueLayout{PartitionOffsets: []int64{0, 2, 3}}, Inline: []byte("abc")},
			"53480400 00000000 03000000 2f000000 01000000 00000000 01010000 03000000" +
				"0000000000000000 0200000000000000 0300000000000000 03000000 616263"},
	}
	for _, tt := range tests {
		got, err := AppendFrame(nil, tt.id, tt.m)
		if err != nil {
			t.Fatal(err)
		}
		want, err := hex.DecodeString(strings.ReplaceAll(tt.want, " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("AppendFrame(%d, %v) =\n%x\nwant\n%x", tt.id, tt.m.Type(), got, want)
		}
	}
}
