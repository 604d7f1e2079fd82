package shufflefile

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/shuffled/shuffled/checksum"
)

// ID names one map output: a shuffle and a map task of one application.
// Spark's shuffle ids are Java ints and its map ids Java longs; both are
// non-negative.
type ID struct {
	Shuffle int32
	Map     int64
}

// Validate reports a negative id, naming the field and the value.
func (id ID) Validate() error {
	if id.Shuffle < 0 {
		return fmt.Errorf("%w: shuffle id %d is negative", ErrInvalidID, id.Shuffle)
	}
	if id.Map < 0 {
		return fmt.Errorf("%w: map id %d is negative", ErrInvalidID, id.Map)
	}
	return nil
}

func (id ID) String() string {
	return fmt.Sprintf("map output %d/%d", id.Shuffle, id.Map)
}

// appendBase appends "shuffle_{shuffle}_{map}_0", the name Spark gives every
// file of a map output (the trailing 0 is its no-op reduce id).
func (id ID) appendBase(b []byte) []byte {
	b = append(b, "shuffle_"...)
	b = strconv.AppendInt(b, int64(id.Shuffle), 10)
	b = append(b, '_')
	b = strconv.AppendInt(b, id.Map, 10)
	return append(b, "_0"...)
}

func (id ID) name(suffix string) string {
	b := make([]byte, 0, 48+len(suffix))
	b = id.appendBase(b)
	return string(append(b, suffix...))
}

// DataName returns the data file's name: shuffle_{s}_{m}_0.data.
func DataName(id ID) string { return id.name(".data") }

// IndexName returns the index file's name: shuffle_{s}_{m}_0.index.
func IndexName(id ID) string { return id.name(".index") }

// ChecksumName returns the checksum file's name:
// shuffle_{s}_{m}_0.checksum.{ADLER32|CRC32|CRC32C}. With checksum.None
// there is no checksum file; the name it returns then ("...checksum.none")
// is never created.
func ChecksumName(id ID, alg checksum.Algorithm) string {
	return id.name(".checksum." + alg.String())
}

// TempSuffix ends the name of every temp file this package creates, so
// that a restart can find and remove them (Sweep).
const TempSuffix = ".shuffled-tmp"

// TempName returns a fresh temp name for finalName, in the same directory:
// finalName + "." + 16 random hex digits + TempSuffix. Create it with
// vfs.FS.Create, which fails rather than clobber a name already taken.
func TempName(finalName string) string {
	return fmt.Sprintf("%s.%016x%s", finalName, rand.Uint64(), TempSuffix)
}

// IsTempName reports whether name (a base name or a path) is a temp file
// name.
func IsTempName(name string) bool { return strings.HasSuffix(name, TempSuffix) }
