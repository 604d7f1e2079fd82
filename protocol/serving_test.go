package protocol

import (
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestServingTails pins the tails of feature bit 7 (docs/protocol.md,
// "Serving map outputs") byte for byte, both ways.
func TestServingTails(t *testing.T) {
	tests := []struct {
		name string
		m    Message
		hex  string
	}{
		{"register, secret, no key", &RegisterExecutor{AppID: "a", ExecutorID: "e", WithAuth: true, AuthSecret: Secret("xyz")},
			"0100 61 0100 65 00000000 00000000 0000 0300 78797a"},
		{"register, key and secret", &RegisterExecutor{AppID: "a", ExecutorID: "e", WithAuth: true,
			IOEncryptionKey: Secret(strings.Repeat("k", 16)), AuthSecret: Secret("s")},
			"0100 61 0100 65 00000000 00000000 1000 6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b 0100 73"},
		{"register, both tails empty", &RegisterExecutor{AppID: "a", ExecutorID: "e", WithAuth: true},
			"0100 61 0100 65 00000000 00000000 0000 0000"},
		{"registered, serving", &Registered{Dirs: []string{"/d"}, Serve: &ServeInfo{Host: "h", Port: 7337, Flags: ServeRequireAuth}},
			"01000000 0200 2f64 0100 68 a91c0000 01"},
		{"registered, not serving", &Registered{Dirs: []string{"/d"}, Serve: &ServeInfo{}},
			"01000000 0200 2f64 0000 00000000 00"},
	}
	for _, tt := range tests {
		want, err := hex.DecodeString(strings.ReplaceAll(tt.hex, " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		if err := tt.m.Validate(); err != nil {
			t.Fatalf("%s: Validate: %v", tt.name, err)
		}
		if got := tt.m.Append(nil); string(got) != string(want) {
			t.Errorf("%s: Append =\n%x\nwant\n%x", tt.name, got, want)
		}
		back := reflect.New(reflect.TypeOf(tt.m).Elem()).Interface().(Message)
		if err := back.Unmarshal(append([]byte(nil), want...)); err != nil {
			t.Fatalf("%s: Unmarshal: %v", tt.name, err)
		}
		if !reflect.DeepEqual(back, tt.m) {
			t.Errorf("%s: Unmarshal = %#v, want %#v", tt.name, back, tt.m)
		}
	}
}

func TestServingTailsRefused(t *testing.T) {
	head := (&RegisterExecutor{AppID: "a", ExecutorID: "e"}).Append(nil)
	for _, tt := range []struct {
		name string
		tail []byte
		want string
	}{
		{"key length 0 alone", []byte{0, 0}, "0 only when the auth tail follows"},
		{"secret too long", append([]byte{0, 0, 0x01, 0x04}, make([]byte, 1025)...), "exceeds 1024"},
		{"secret truncated", []byte{0, 0, 5, 0, 'a'}, "truncated"},
		{"trailing bytes", []byte{0, 0, 1, 0, 'a', 'b'}, "trailing"},
	} {
		var m RegisterExecutor
		err := m.Unmarshal(append(append([]byte(nil), head...), tt.tail...))
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Unmarshal error %v, want ErrMalformed containing %q", tt.name, err, tt.want)
		}
	}
	for _, tt := range []struct {
		name string
		s    ServeInfo
	}{
		{"port without host", ServeInfo{Port: 1}},
		{"host without port", ServeInfo{Host: "h"}},
		{"port out of range", ServeInfo{Host: "h", Port: 70000}},
		{"unknown flag", ServeInfo{Host: "h", Port: 1, Flags: 2}},
	} {
		if err := (&Registered{Serve: &tt.s}).Validate(); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Validate = %v, want ErrMalformed", tt.name, err)
		}
	}
	// The secret never appears in text.
	m := &RegisterExecutor{AppID: "a", ExecutorID: "e", WithAuth: true, AuthSecret: Secret("hunter2")}
	if s := strings.Join([]string{m.AuthSecret.String(), m.AuthSecret.GoString()}, " "); strings.Contains(s, "hunter2") {
		t.Errorf("secret in text: %s", s)
	}
}
