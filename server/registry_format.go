package server

import (
	"encoding/json"
	"math"

	"github.com/shuffled/shuffled/shufflefile"
)

// The registry's persistent part lives in two files in the daemon's root
// (disks.RegistryPath): a snapshot and a log of the changes since.
//
// The snapshot (registryFile, JSON) names every application the daemon
// registered, with its owner and the Spark local dirs it registered, so
// that after a restart removal, listing, retention and the start-up sweep
// cover every dir the daemon ever wrote into and no other uid takes an
// application over; and the tombstones of removed applications, so that
// their ids stay their owners' for tombstoneTTL. It is replaced atomically
// (shufflefile.ReplaceFile).
//
// The log (the snapshot's path + ".log") starts with a header line naming
// it (its random id, which the snapshot names too) and the last change the
// snapshot holds; each change after it appends one line (registryRecord),
// fsynced with --sync, before the request that made it is answered. So a
// change costs one line, not the whole file. When the log has grown past
// the snapshot's size (and past minCompactLog), the next change compacts:
// a new log (a temp file, then renamed), a snapshot naming it, and the new
// log renamed into place. A log whose id the snapshot does not name (a
// crash during a compaction, or a log without a snapshot) holds nothing
// the snapshot lacks, and is ignored. At start the records after the
// snapshot's last change are applied to it, in the order of their numbers;
// a last line without its newline (a crash mid-append; its request was
// never answered) is ignored.
type registryFile struct {
	Version int `json:"version"`
	// Seq is the number of the last change the snapshot holds; Log is the
	// id of the log that goes with it (version 2).
	Seq  uint64          `json:"seq,omitempty"`
	Log  string          `json:"log,omitempty"`
	Apps []registeredApp `json:"apps"`
}

type registeredApp struct {
	App   string          `json:"app"`
	UID   uint32          `json:"uid"`
	Local []registeredSet `json:"local,omitempty"`
	// Removed is when a tombstone's application was removed, in Unix
	// seconds; 0 for a registered application.
	Removed int64 `json:"removed,omitempty"`
}

// registeredSet is one registration's Spark local dirs, resolved.
type registeredSet struct {
	Dirs    []string `json:"dirs"`
	SubDirs int      `json:"sub_dirs"`
}

// registryLogHeader is the log's first line.
type registryLogHeader struct {
	Version int    `json:"version"`
	Log     string `json:"log"`  // the log's id, which its snapshot names
	Base    uint64 `json:"base"` // the snapshot's Seq when the log began
}

// registryRecord is one change, one line of the log.
type registryRecord struct {
	Seq uint64 `json:"seq"` // > the snapshot's Seq; the order changes apply in
	// Op: opRegister (App is UID's, registered; Local, when set, is one
	// more set of its local dirs), opRemove (App becomes UID's tombstone,
	// removed at Removed, Unix seconds), opDrop (App is forgotten).
	Op      string         `json:"op"`
	App     string         `json:"app"`
	UID     uint32         `json:"uid"` // 0 in a drop
	Local   *registeredSet `json:"local,omitempty"`
	Removed int64          `json:"removed,omitempty"`
}

// The log's operations.
const (
	opRegister = "register"
	opRemove   = "remove"
	opDrop     = "drop"
)

// recordSet is the set a register record adds: l when it is new.
func recordSet(l *shufflefile.SparkHashed, isNew bool) *registeredSet {
	if l == nil || !isNew {
		return nil
	}
	return &registeredSet{Dirs: l.LocalDirs, SubDirs: l.SubDirs}
}

// registryVersion is the format version of the snapshot and the log that
// this daemon writes. It reads version 1 too, a snapshot alone (from
// before the log; entries without local dirs and tombstones came later in
// version 1, and a daemon that predates them reads them as applications of
// their uid).
const registryVersion = 2

// maxRegistryFile bounds the snapshot, and the log, read at start.
const maxRegistryFile = 64 << 20

// minCompactLog: the log is compacted once it is past this many bytes and
// past the snapshot's size, so that what is written stays within about
// twice what the changes take.
const minCompactLog = 1 << 20

// appCost bounds what the entry of app takes in the registry file, its
// local dir sets aside (setCost): its longest form, a tombstone's, with
// the separators of its list and of an empty set list.
func appCost(app string) int {
	b, _ := json.Marshal(registeredApp{App: app, UID: math.MaxUint32, Removed: math.MaxInt64})
	return len(b) + len(`,"local":[]`) + 1
}

// setCost bounds what one set of local dirs takes in its application's
// entry in the registry file, with its separator.
func setCost(l shufflefile.SparkHashed) int {
	b, _ := json.Marshal(registeredSet{Dirs: l.LocalDirs, SubDirs: l.SubDirs})
	return len(b) + 1
}
