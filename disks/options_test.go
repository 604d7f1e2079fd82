package disks

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/testkit"
)

func TestParseWatermark(t *testing.T) {
	tests := []struct {
		in      string
		want    Watermark
		wantErr bool
	}{
		{in: "0", want: Bytes(0)},
		{in: "1073741824", want: Bytes(1 << 30)},
		{in: "10B", want: Bytes(10)},
		{in: "4K", want: Bytes(4 << 10)},
		{in: "512MiB", want: Bytes(512 << 20)},
		{in: "1G", want: Bytes(1 << 30)},
		{in: " 2 GiB ", want: Bytes(2 << 30)},
		{in: "3TiB", want: Bytes(3 << 40)},
		{in: "5%", want: Fraction(0.05)},
		{in: "100%", want: Fraction(1)},
		{in: "0%", want: Fraction(0)},
		{in: "", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "1.5G", wantErr: true},
		{in: "1GB", wantErr: true},
		{in: "1Pi", wantErr: true},
		{in: "101%", wantErr: true},
		{in: "-5%", wantErr: true},
		{in: "NaN%", wantErr: true},
		{in: "16777216TiB", wantErr: true}, // 2^64
	}
	for _, tt := range tests {
		got, err := ParseWatermark(tt.in)
		if tt.wantErr {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("ParseWatermark(%q) = %v, %v, want ErrInvalidConfig", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseWatermark(%q) = %v, %v, want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestWatermarkString(t *testing.T) {
	for _, w := range []Watermark{Bytes(0), Bytes(1000), Bytes(1 << 30), Bytes(3 << 20), Bytes(1536), Fraction(0.05), Fraction(0.125)} {
		s := w.String()
		got, err := ParseWatermark(s)
		if err != nil || got != w {
			t.Errorf("ParseWatermark(%v.String() = %q) = %v, %v; want %v", w, s, got, err, w)
		}
	}
	var w Watermark
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.Var(&w, "low", "")
	if err := fs.Parse([]string{"-low=2GiB"}); err != nil || w != Bytes(2<<30) {
		t.Errorf("flag -low=2GiB = %v, %v; want 2GiB", w, err)
	}
}

func TestWatermarkOf(t *testing.T) {
	if got := Fraction(0.25).Of(1000); got != 250 {
		t.Errorf("Fraction(0.25).Of(1000) = %d, want 250", got)
	}
	if got := Bytes(7).Of(1000); got != 7 {
		t.Errorf("Bytes(7).Of(1000) = %d, want 7", got)
	}
}

func TestOptionsValidate(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		opts []Option
		want string // in the error
	}{
		{"fraction above 1", []Option{WithLowWatermark(Fraction(1.5))}, "low watermark fraction 1.5"},
		{"negative fraction", []Option{WithHighWatermark(Fraction(-0.1))}, "high watermark fraction -0.1"},
		{"high below low", []Option{WithLowWatermark(Bytes(2000)), WithHighWatermark(Bytes(1000))}, "high watermark 1000 is below low watermark 2000"},
		{"high fraction below low", []Option{WithLowWatermark(Fraction(0.2)), WithHighWatermark(Fraction(0.1))}, "below low watermark"},
		{"nil statfs", []Option{WithStatfs(nil)}, "statfs function is nil"},
		{"nil clock", []Option{WithClock(nil)}, "clock is nil"},
		{"zero max errors", []Option{WithMaxErrors(0)}, "max errors 0"},
		{"negative refresh", []Option{WithRefresh(-1)}, "refresh -1ns"},
		{"nil logger", []Option{WithLogger(nil)}, "logger is nil"},
		{"nil fs", []Option{WithFS(nil)}, "file system is nil"},
	}
	for _, tt := range tests {
		_, err := New([]string{dir}, tt.opts...)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%s) = %v, want ErrInvalidConfig with %q", tt.name, err, tt.want)
		}
	}
}

func TestDefaultHighWatermark(t *testing.T) {
	tests := []struct {
		low, want Watermark
	}{
		{Bytes(1000), Bytes(2000)},
		{Fraction(0.1), Fraction(0.2)},
		{Fraction(0.7), Fraction(1)},
	}
	for _, tt := range tests {
		o := options{low: &tt.low, refresh: -1}
		if err := o.ensureDefaults(); err != nil || *o.high != tt.want {
			t.Errorf("default high watermark for low %v = %v, %v; want %v", tt.low, o.high, err, tt.want)
		}
	}
}

func TestNewDirs(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	a := filepath.Join(base, "a")
	link := filepath.Join(base, "link-to-a")
	if err := os.Mkdir(a, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	statfs := func(string) (uint64, uint64, error) { return 1 << 40, 1 << 40, nil }
	tests := []struct {
		name string
		dirs []string
		want string // in the error
	}{
		{"none", nil, "no directories"},
		{"relative", []string{"rel/dir"}, `"rel/dir" is not an absolute path`},
		{"file", []string{file}, "not a directory"},
		{"same twice", []string{a, a}, "overlaps"},
		{"same through a symbolic link", []string{a, link}, "overlaps"},
		{"nested", []string{base, a}, "overlaps"},
		{"nested the other way", []string{a, base}, "overlaps"},
	}
	for _, tt := range tests {
		_, err := New(tt.dirs, WithStatfs(statfs))
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%s %q) = %v, want ErrInvalidConfig with %q", tt.name, tt.dirs, err, tt.want)
		}
	}

	// A missing directory is created; a symbolic link is resolved; a
	// sibling whose name extends another's is no overlap.
	created := filepath.Join(base, "new", "disk")
	sibling := a + "b"
	s, err := New([]string{created, link, sibling}, WithStatfs(statfs))
	if err != nil {
		t.Fatalf("New(%q, %q, %q) = %v", created, link, sibling, err)
	}
	if fi, err := os.Stat(created); err != nil || !fi.IsDir() {
		t.Errorf("New did not create %s: %v", created, err)
	}
	resolvedA, _ := filepath.EvalSymlinks(a)
	if got := s.Disks()[1].Dir(); got != resolvedA {
		t.Errorf("Dir() of %s = %q, want %q", link, got, resolvedA)
	}
	if s.Disk(link) != s.Disks()[1] || s.Disk(resolvedA) != s.Disks()[1] || s.Disk(base) != nil {
		t.Errorf("Disk() does not find disks by given or resolved path")
	}

	failing := func(string) (uint64, uint64, error) { return 0, 0, errors.New("boom") }
	if _, err := New([]string{a}, WithStatfs(failing)); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("New with statfs failing = %v, want its error", err)
	}
}

func TestSharedDeviceWarning(t *testing.T) {
	// Two directories of one file system, with the real statfs: admission
	// works, and the log says the space is counted twice.
	buf := &testkit.SyncBuffer{}
	dirs := []string{t.TempDir(), t.TempDir()}
	if _, err := New(dirs, WithLogger(newTextLogger(buf)), WithLowWatermark(Bytes(0))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "share its free space") {
		t.Errorf("log %q does not warn of two directories on one file system", buf.String())
	}
}
