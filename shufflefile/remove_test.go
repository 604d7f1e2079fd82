package shufflefile_test

import (
	"errors"
	"fmt"
	"github.com/shuffled/shuffled/testkit/shuffletest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/vfs/errorfs"
)

// removeOrder records the Remove operations of an FS.
func removeOrder(fsys vfs.FS, fail func(path string) bool) (*errorfs.FS, *[]string) {
	var removed []string
	return errorfs.New(fsys, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind != errorfs.OpRemove {
			return nil
		}
		if fail != nil && fail(op.Path) {
			return errorfs.ErrInjected
		}
		removed = append(removed, filepath.Base(op.Path))
		return nil
	})), &removed
}

func TestRemoveShuffleSparkHashed(t *testing.T) {
	l := shufflefile.SparkHashed{LocalDirs: []string{t.TempDir(), t.TempDir()}, SubDirs: 8}
	var want int64
	for m := range int64(12) {
		want += shuffletest.CommitOutput(t, l, shufflefile.ID{Shuffle: 3, Map: m}, fmt.Sprint("map ", m), "p1")
	}
	temp := shufflefile.TempName(shufflefile.Path(l, shufflefile.DataName(shufflefile.ID{Shuffle: 3, Map: 99})))
	want += shuffletest.WriteFile(t, temp, 5)
	shuffletest.CommitOutput(t, l, shufflefile.ID{Shuffle: 30, Map: 0}, "stays")

	fsys, removed := removeOrder(vfs.Default, nil)
	outputs, freed, err := shufflefile.RemoveShuffle(fsys, new(shufflefile.Locks), l, 3)
	if err != nil || outputs != 12 || freed != want {
		t.Fatalf("shufflefile.RemoveShuffle(shuffle 3) = %d, %d, %v; want 12, %d, nil", outputs, freed, err, want)
	}
	// Across the hashed directories, every index goes before any data.
	seenOther := false
	for _, name := range *removed {
		isIndex := strings.HasSuffix(name, ".index")
		if isIndex && seenOther {
			t.Fatalf("an index was removed after other files: %q", *removed)
		}
		seenOther = seenOther || !isIndex
	}
	for _, d := range l.LocalDirs {
		for _, p := range shuffletest.ListFiles(t, d) {
			if strings.Contains(p, "shuffle_3_") {
				t.Errorf("file %s of removed shuffle 3 remains", p)
			}
		}
	}
	if _, err := shufflefile.Open(vfs.Default, l, shufflefile.ID{Shuffle: 30}, checksum.Adler32); err != nil {
		t.Errorf("shuffle 30 after removing shuffle 3: %v", err)
	}
	if outputs, freed, err := shufflefile.RemoveShuffle(vfs.Default, new(shufflefile.Locks), l, 3); err != nil || outputs != 0 || freed != 0 {
		t.Errorf("RemoveShuffleIn again = %d, %d, %v; want 0, 0, nil", outputs, freed, err)
	}
}

type otherLayout struct{}

func (otherLayout) Dir(string) string      { return "/" }
func (otherLayout) Dirs() ([]string, bool) { return nil, false }

func TestRemoveShuffleArguments(t *testing.T) {
	tests := []struct {
		name    string
		l       shufflefile.Layout
		shuffle int32
		want    error
	}{
		{"negative shuffle", shufflefile.Flat(t.TempDir()), -1, shufflefile.ErrInvalidID},
		{"layout without dirs", otherLayout{}, 1, shufflefile.ErrInvalidLayout},
		{"empty hashed layout", shufflefile.SparkHashed{}, 1, shufflefile.ErrInvalidLayout},
		{"nil hashed layout", (*shufflefile.SparkHashed)(nil), 1, shufflefile.ErrInvalidLayout},
	}
	for _, tt := range tests {
		if _, _, err := shufflefile.RemoveShuffle(vfs.Default, new(shufflefile.Locks), tt.l, tt.shuffle); !errors.Is(err, tt.want) {
			t.Errorf("RemoveShuffle(%s) = %v, want %v", tt.name, err, tt.want)
		}
	}
	n, b, err := shufflefile.RemoveShuffle(vfs.Default, new(shufflefile.Locks), shufflefile.Flat(filepath.Join(t.TempDir(), "missing")), 1)
	if err != nil || n != 0 || b != 0 {
		t.Errorf("shufflefile.RemoveShuffle(missing dir) = %d, %d, %v; want 0, 0, nil", n, b, err)
	}
}

func TestParseNameShuffle(t *testing.T) {
	tests := []struct {
		name   string
		want   int32
		wantOK bool
	}{
		{"shuffle_1_0_0.data", 1, true},
		{"shuffle_12_3_0.index", 12, true},
		{"shuffle_0_0_0.checksum.ADLER32", 0, true},
		{"shuffle_7_1_0.data.0123456789abcdef.shuffled-tmp", 7, true},
		{"shuffle_2147483647_0_0.data", 2147483647, true},
		{"shuffle_2147483648_0_0.data", 0, false},
		{"shuffle_-1_0_0.data", 0, false},
		{"shuffle_+1_0_0.data", 0, false},
		{"shuffle__0_0.data", 0, false},
		{"shuffle_1", 0, false},
		{"shuffleMerged_1_0_0.data", 0, false},
		{"notes.txt", 0, false},
	}
	for _, tt := range tests {
		n, ok := shufflefile.ParseName(tt.name)
		got := n.ID.Shuffle
		if !ok {
			got = 0
		}
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ParseName(%q).ID.Shuffle = %d, %v, want %d, %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}
