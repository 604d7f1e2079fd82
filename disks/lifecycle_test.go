package disks

import (
	"errors"
	"github.com/shuffled/shuffled/testkit/shuffletest"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/shufflefile"
	"github.com/shuffled/shuffled/vfs"
	"github.com/shuffled/shuffled/vfs/errorfs"
)

// tree is the test's picture of two disks:
//
//	disk0/app-1/e1: shuffle 1 maps 0 and 1, shuffle 12 map 0, a temp file
//	                of shuffle 1 map 2 in flight, notes.txt
//	disk1/app-1/e2: shuffle 1 map 3, shuffle 2 map 0
//	disk1/app-2/e1: shuffle 1 map 0
type tree struct {
	*fakeSet
	bytes map[string]int64 // by "app/shuffle"
	other int64            // notes.txt
}

func newTree(t *testing.T, opts ...Option) *tree {
	f := newFakeSet(t, 2, 1<<40, 0, opts...)
	tr := &tree{fakeSet: f, bytes: map[string]int64{}}
	flat := func(disk int, app, exec string) shufflefile.Flat {
		dir, err := f.Disks()[disk].ExecutorDir(app, exec)
		if err != nil {
			t.Fatal(err)
		}
		return shufflefile.Flat(dir)
	}
	d0a1, d1a1, d1a2 := flat(0, "app-1", "e1"), flat(1, "app-1", "e2"), flat(1, "app-2", "e1")
	tr.bytes["app-1/1"] += shuffletest.CommitOutput(t, d0a1, shufflefile.ID{Shuffle: 1, Map: 0}, "abc", "", "defg")
	tr.bytes["app-1/1"] += shuffletest.CommitOutput(t, d0a1, shufflefile.ID{Shuffle: 1, Map: 1}, "hello")
	tr.bytes["app-1/12"] += shuffletest.CommitOutput(t, d0a1, shufflefile.ID{Shuffle: 12, Map: 0}, "twelve", "x")
	tr.bytes["app-1/1"] += shuffletest.WriteFile(t,
		shufflefile.TempName(shufflefile.Path(d0a1, shufflefile.DataName(shufflefile.ID{Shuffle: 1, Map: 2}))), 77)
	tr.other = shuffletest.WriteFile(t, filepath.Join(string(d0a1), "notes.txt"), 9)
	tr.bytes["app-1/1"] += shuffletest.CommitOutput(t, d1a1, shufflefile.ID{Shuffle: 1, Map: 3}, "on the other disk")
	tr.bytes["app-1/2"] += shuffletest.CommitOutput(t, d1a1, shufflefile.ID{Shuffle: 2, Map: 0}, "two", "two")
	tr.bytes["app-2/1"] += shuffletest.CommitOutput(t, d1a2, shufflefile.ID{Shuffle: 1, Map: 0}, "other app")
	return tr
}

func TestListShuffles(t *testing.T) {
	tr := newTree(t)
	got, err := tr.ListShuffles("app-1")
	if err != nil {
		t.Fatal(err)
	}
	want := []ShuffleUsage{
		{Shuffle: 1, Outputs: 3, Bytes: tr.bytes["app-1/1"]},
		{Shuffle: 2, Outputs: 1, Bytes: tr.bytes["app-1/2"]},
		{Shuffle: 12, Outputs: 1, Bytes: tr.bytes["app-1/12"]},
	}
	if !slices.Equal(got, want) {
		t.Errorf("ListShuffles(app-1) = %+v, want %+v", got, want)
	}
	got, err = tr.ListShuffles("no-such-app")
	if err != nil || len(got) != 0 {
		t.Errorf("ListShuffles(no-such-app) = %+v, %v, want none", got, err)
	}
}

func TestRemoveShuffle(t *testing.T) {
	tr := newTree(t)
	outputs, freed, err := tr.RemoveShuffle("app-1", 1)
	if err != nil || outputs != 3 || freed != tr.bytes["app-1/1"] {
		t.Fatalf("RemoveShuffle(app-1, 1) = %d, %d, %v; want 3, %d, nil", outputs, freed, err, tr.bytes["app-1/1"])
	}
	for _, d := range tr.dirs {
		for _, p := range shuffletest.ListFiles(t, filepath.Join(d, "app-1")) {
			if strings.Contains(p, "shuffle_1_") {
				t.Errorf("file %s of removed shuffle 1 remains", p)
			}
		}
	}
	got, _ := tr.ListShuffles("app-1")
	want := []ShuffleUsage{
		{Shuffle: 2, Outputs: 1, Bytes: tr.bytes["app-1/2"]},
		{Shuffle: 12, Outputs: 1, Bytes: tr.bytes["app-1/12"]},
	}
	if !slices.Equal(got, want) {
		t.Errorf("after removal: ListShuffles(app-1) = %+v, want %+v", got, want)
	}
	if got, _ := tr.ListShuffles("app-2"); len(got) != 1 || got[0].Outputs != 1 {
		t.Errorf("ListShuffles(app-2) after removing app-1's shuffle 1 = %+v, want it untouched", got)
	}
	if _, err := os.Stat(filepath.Join(tr.dirs[0], "app-1", "e1", "notes.txt")); err != nil {
		t.Errorf("a file of no shuffle was removed: %v", err)
	}

	outputs, freed, err = tr.RemoveShuffle("app-1", 1)
	if err != nil || outputs != 0 || freed != 0 {
		t.Errorf("RemoveShuffle again = %d, %d, %v; want 0, 0, nil", outputs, freed, err)
	}
	outputs, freed, err = tr.RemoveShuffle("no-such-app", 1)
	if err != nil || outputs != 0 || freed != 0 {
		t.Errorf("RemoveShuffle of an unknown application = %d, %d, %v; want 0, 0, nil", outputs, freed, err)
	}
}

func TestApplications(t *testing.T) {
	tr := newTree(t)
	// The newest modification anywhere in an application's trees, on any
	// disk, is its ModTime.
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	newest := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, d := range tr.dirs {
		filepath.WalkDir(d, func(p string, _ fs.DirEntry, err error) error {
			if err == nil {
				os.Chtimes(p, old, old)
			}
			return err
		})
	}
	idx := filepath.Join(tr.dirs[1], "app-1", "e2", shufflefile.IndexName(shufflefile.ID{Shuffle: 2}))
	if err := os.Chtimes(idx, newest, newest); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tr.dirs[0], "stray-file"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := tr.Applications()
	if err != nil {
		t.Fatal(err)
	}
	app1 := tr.bytes["app-1/1"] + tr.bytes["app-1/2"] + tr.bytes["app-1/12"] + tr.other
	want := []AppUsage{
		{App: "app-1", Bytes: app1, ModTime: newest},
		{App: "app-2", Bytes: tr.bytes["app-2/1"], ModTime: old},
	}
	if len(got) != len(want) {
		t.Fatalf("Applications() = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].App != want[i].App || got[i].Bytes != want[i].Bytes || !got[i].ModTime.Equal(want[i].ModTime) {
			t.Errorf("Applications()[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestRemoveApplication(t *testing.T) {
	tr := newTree(t)
	outputs, freed, err := tr.RemoveApplication("app-1")
	want := tr.bytes["app-1/1"] + tr.bytes["app-1/2"] + tr.bytes["app-1/12"] + tr.other
	if err != nil || outputs != 5 || freed != want {
		t.Fatalf("RemoveApplication(app-1) = %d, %d, %v; want 5, %d, nil", outputs, freed, err, want)
	}
	for _, d := range tr.dirs {
		if _, err := os.Lstat(filepath.Join(d, "app-1")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s/app-1 after RemoveApplication: %v, want it gone", d, err)
		}
	}
	apps, err := tr.Applications()
	if err != nil || len(apps) != 1 || apps[0].App != "app-2" || apps[0].Bytes != tr.bytes["app-2/1"] {
		t.Errorf("Applications() after removing app-1 = %+v, %v; want app-2 untouched", apps, err)
	}
	outputs, freed, err = tr.RemoveApplication("app-1")
	if err != nil || outputs != 0 || freed != 0 {
		t.Errorf("RemoveApplication again = %d, %d, %v; want 0, 0, nil", outputs, freed, err)
	}
}

func TestLifecycleDoesNotFollowSymlinks(t *testing.T) {
	tr := newTree(t)
	outside := t.TempDir()
	victim := filepath.Join(outside, "shuffle_1_0_0.index")
	shuffletest.WriteFile(t, victim, 8)
	victim2 := filepath.Join(outside, "e1", "shuffle_1_0_0.index")
	shuffletest.WriteFile(t, victim2, 8)
	if err := os.Symlink(outside, filepath.Join(tr.dirs[0], "app-1", "e1", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(tr.dirs[1], "app-3")); err != nil {
		t.Fatal(err)
	}
	if got, err := tr.ListShuffles("app-3"); err != nil || len(got) != 0 {
		t.Errorf("ListShuffles of an application that is a symbolic link = %+v, %v; want nothing", got, err)
	}
	if n, _, err := tr.RemoveShuffle("app-3", 1); err != nil || n != 0 {
		t.Errorf("RemoveShuffle of an application that is a symbolic link = %d, %v; want 0, nil", n, err)
	}
	for _, app := range []string{"app-1", "app-3"} {
		if _, _, err := tr.RemoveApplication(app); err != nil {
			t.Fatalf("RemoveApplication(%s) = %v", app, err)
		}
		for _, v := range []string{victim, victim2} {
			if _, err := os.Stat(v); err != nil {
				t.Fatalf("after RemoveApplication(%s), a file behind a symbolic link is gone: %v", app, err)
			}
		}
	}
	if _, err := os.Lstat(filepath.Join(tr.dirs[1], "app-3")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the symbolic link app-3 after RemoveApplication: %v, want it gone", err)
	}
}

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

func TestRemoveIndexFirst(t *testing.T) {
	for _, name := range []string{"RemoveShuffle", "RemoveApplication"} {
		t.Run(name, func(t *testing.T) {
			fsys, removed := removeOrder(vfs.Default, nil)
			tr := newTree(t, WithFS(fsys))
			if name == "RemoveShuffle" {
				_, _, err := tr.RemoveShuffle("app-1", 1)
				if err != nil {
					t.Fatal(err)
				}
			} else if _, _, err := tr.RemoveApplication("app-1"); err != nil {
				t.Fatal(err)
			}
			checkIndexFirst(t, *removed)
		})
	}
}

// checkIndexFirst checks that each output's index went before its other
// files.
func checkIndexFirst(t *testing.T, removed []string) {
	t.Helper()
	at := map[string]int{}
	for i, name := range removed {
		if strings.HasSuffix(name, ".index") {
			at[outputBase(name)] = i
		}
	}
	if len(at) == 0 {
		t.Fatalf("removed %q: no index file", removed)
	}
	for i, name := range removed {
		if strings.HasSuffix(name, ".index") || shufflefile.IsTempName(name) {
			continue
		}
		if j, ok := at[outputBase(name)]; ok && j > i {
			t.Errorf("removed %s (op %d) before its index (op %d): %q", name, i, j, removed)
		}
	}
}

func TestRemoveKeepsOutputWhoseIndexStays(t *testing.T) {
	stuck := shufflefile.IndexName(shufflefile.ID{Shuffle: 1, Map: 1})
	fsys, _ := removeOrder(vfs.Default, func(p string) bool { return filepath.Base(p) == stuck })
	tr := newTree(t, WithFS(fsys))
	outputs, _, err := tr.RemoveShuffle("app-1", 1)
	if !errors.Is(err, errorfs.ErrInjected) || outputs != 2 {
		t.Fatalf("RemoveShuffle with one index failing = %d, %v; want 2 outputs, the injected error", outputs, err)
	}
	dir := shufflefile.Flat(filepath.Join(tr.dirs[0], "app-1", "e1"))
	m, err := shufflefile.Open(vfs.Default, dir, shufflefile.ID{Shuffle: 1, Map: 1}, checksum.Adler32)
	if err != nil {
		t.Fatalf("the output whose index could not be removed is not whole: %v", err)
	}
	defer m.Close()
	if err := m.Verify(); err != nil {
		t.Errorf("Verify() of the output that stayed = %v", err)
	}
}

func TestNameValidation(t *testing.T) {
	f := newFakeSet(t, 1, 1<<40, 0)
	d := f.Disks()[0]
	for _, app := range []string{"", ".", "..", "a/b", "../etc", "a\x00b", "a\nb", strings.Repeat("x", shufflefile.MaxNameLen+1)} {
		calls := map[string]error{}
		_, calls["Reserve"] = f.Reserve(app, 0)
		_, _, calls["RemoveShuffle"] = f.RemoveShuffle(app, 1)
		_, _, calls["RemoveApplication"] = f.RemoveApplication(app)
		_, calls["ListShuffles"] = f.ListShuffles(app)
		_, calls["ExecutorDir"] = d.ExecutorDir(app, "e1")
		_, calls["ExecutorDir executor"] = d.ExecutorDir("app", app)
		_, calls["Locate"] = f.Locate(app, "e1", shufflefile.ID{})
		for call, err := range calls {
			if !errors.Is(err, shufflefile.ErrInvalidID) {
				t.Errorf("%s(%q) = %v, want shufflefile.ErrInvalidID", call, app, err)
			}
		}
	}
	if _, _, err := f.RemoveShuffle("app", -1); !errors.Is(err, shufflefile.ErrInvalidID) {
		t.Errorf("RemoveShuffle(app, -1) = %v, want shufflefile.ErrInvalidID", err)
	}
	if _, err := f.Reserve("app", -1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Reserve(app, -1) = %v, want ErrInvalidArgument", err)
	}
}

func TestSweepTempsAndLocate(t *testing.T) {
	tr := newTree(t)
	removed, err := tr.SweepTemps()
	if err != nil || removed != 1 {
		t.Fatalf("SweepTemps() = %d, %v; want 1, nil", removed, err)
	}
	if got, _ := tr.ListShuffles("app-1"); got[0].Bytes != tr.bytes["app-1/1"]-77 {
		t.Errorf("shuffle 1 after SweepTemps holds %d bytes, want %d", got[0].Bytes, tr.bytes["app-1/1"]-77)
	}
	tests := []struct {
		app, exec string
		id        shufflefile.ID
		want      *Disk
	}{
		{"app-1", "e1", shufflefile.ID{Shuffle: 1, Map: 1}, tr.Disks()[0]},
		{"app-1", "e2", shufflefile.ID{Shuffle: 1, Map: 3}, tr.Disks()[1]},
		{"app-1", "e1", shufflefile.ID{Shuffle: 1, Map: 2}, nil}, // only a temp file: not committed
		{"app-1", "e2", shufflefile.ID{Shuffle: 1, Map: 0}, nil},
	}
	for _, tt := range tests {
		got, err := tr.Locate(tt.app, tt.exec, tt.id)
		if err != nil || got != tt.want {
			t.Errorf("Locate(%s, %s, %v) = %v, %v; want %v", tt.app, tt.exec, tt.id, got, err, tt.want)
		}
	}
}

// outputBase returns the part of a map output file's name before the
// first dot, "shuffle_{s}_{m}_0", which all its files share.
func outputBase(name string) string {
	base, _, _ := strings.Cut(name, ".")
	return base
}
