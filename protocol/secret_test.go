package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestRegisterExecutorKey(t *testing.T) {
	for _, n := range []int{16, 24, 32} {
		key := bytes.Repeat([]byte{0xa5}, n)
		m := &RegisterExecutor{AppID: "app", ExecutorID: "1", IOEncryptionKey: Secret(bytes.Clone(key))}
		p, err := Marshal(m)
		if err != nil {
			t.Fatalf("Marshal(%d-byte key): %v", n, err)
		}
		var got RegisterExecutor
		if err := got.Unmarshal(p); err != nil {
			t.Fatalf("Unmarshal(%d-byte key): %v", n, err)
		}
		if !bytes.Equal(got.IOEncryptionKey, key) {
			t.Errorf("Unmarshal(%d-byte key) = %d bytes, want the key", n, len(got.IOEncryptionKey))
		}
		if bytes.Contains(p, key) {
			t.Errorf("Unmarshal left the key's bytes in the payload it decoded")
		}
	}
	// No key: the payload ends after the local dirs.
	p, err := Marshal(&RegisterExecutor{AppID: "app", ExecutorID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	var got RegisterExecutor
	if err := got.Unmarshal(p); err != nil || got.IOEncryptionKey != nil {
		t.Fatalf("Unmarshal without a key = %v, key of %d bytes", err, len(got.IOEncryptionKey))
	}
	base := p
	for _, tc := range []struct {
		name string
		tail []byte
	}{
		{"length 0", []byte{0, 0}},
		{"length 33", append([]byte{33, 0}, make([]byte, 33)...)},
		{"length 15", append([]byte{15, 0}, make([]byte, 15)...)},
		{"length 17", append([]byte{17, 0}, make([]byte, 17)...)},
		{"truncated", append([]byte{16, 0}, make([]byte, 15)...)},
		{"one byte", []byte{16}},
		{"trailing byte", append([]byte{16, 0}, make([]byte, 17)...)},
	} {
		var m RegisterExecutor
		err := m.Unmarshal(append(bytes.Clone(base), tc.tail...))
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Unmarshal = %v, want a malformed or invalid key", tc.name, err)
			continue
		}
		if !strings.Contains(err.Error(), "IOEncryptionKey") && tc.name != "trailing byte" {
			t.Errorf("%s: error %q does not name IOEncryptionKey", tc.name, err)
		}
	}
	if err := (&RegisterExecutor{AppID: "a", ExecutorID: "b", IOEncryptionKey: make(Secret, 20)}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "length 20") {
		t.Errorf("Validate(20-byte key) = %v, want an error naming the length", err)
	}
}

// The key never appears in text: not in fmt's verbs on the message, not
// in slog, not in a validation error.
func TestSecretRedacted(t *testing.T) {
	key := []byte("SECRETKEY-16byte")
	m := &RegisterExecutor{AppID: "app", ExecutorID: "1", IOEncryptionKey: Secret(key)}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("register", "m", m, "key", m.IOEncryptionKey)
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("register", "m", m, "key", m.IOEncryptionKey)
	bad := &RegisterExecutor{AppID: "app", ExecutorID: "1", IOEncryptionKey: Secret("SECRETKEY-17bytes")}
	texts := []string{
		fmt.Sprintf("%v %+v %#v %s %x %q", m, m, m, m.IOEncryptionKey, m.IOEncryptionKey, m.IOEncryptionKey),
		fmt.Sprint(*m), logged.String(), bad.Validate().Error(),
	}
	for _, s := range texts {
		if strings.Contains(s, "SECRETKEY") || strings.Contains(strings.ToLower(s), fmt.Sprintf("%x", "SECRETKEY")) {
			t.Errorf("key in text: %s", s)
		}
	}
	if s := fmt.Sprint(Secret(nil)); s != "[none]" {
		t.Errorf("Secret(nil) = %q, want [none]", s)
	}
}

func TestOpenFlags(t *testing.T) {
	m := &OpenMapOutput{ShuffleID: 1, MapID: 2, NumPartitions: 3, Kind: KindOpaque, Flags: OpenEncrypt}
	p, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var got OpenMapOutput
	if err := got.Unmarshal(p); err != nil || got.Flags != OpenEncrypt {
		t.Fatalf("Unmarshal = %v, flags %#x, want OpenEncrypt", err, got.Flags)
	}
	p[18] = 0x03 // flags: an unknown bit
	if err := got.Unmarshal(p); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "Flags") {
		t.Errorf("Unmarshal(flags 0x03) = %v, want InvalidArgument naming Flags", err)
	}
	p[18], p[19] = 0x01, 0x01 // the reserved byte
	if err := got.Unmarshal(p); !errors.Is(err, ErrMalformed) {
		t.Errorf("Unmarshal(reserved 0x01) = %v, want malformed", err)
	}
}
