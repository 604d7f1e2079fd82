// Package shufflefile reads and writes Spark's on-disk shuffle layout: the
// data, index and checksum files of a map output, their names and
// directories, and the atomic commit that makes a map output visible.
//
// Main invariant: a map output is committed exactly when its index file
// exists and agrees with its data file (a whole number of offsets, the
// first 0, never decreasing, the last equal to the data file's length). A
// committed output is complete and consistent (index ↔ data ↔ checksum);
// a crash at any point leaves either no committed output or a complete
// one, plus at most temp files that Sweep removes.
//
// # Names and directories
//
// A map output (shuffle s, map m) has the files
//
//	shuffle_{s}_{m}_0.data              the partitions' bytes, back to back
//	shuffle_{s}_{m}_0.index             where each partition starts and ends
//	shuffle_{s}_{m}_0.checksum.{ALG}    one checksum per partition (optional)
//
// A Layout places each file: Flat keeps them in one directory; SparkHashed
// spreads them over the executor's local directories and their hex-named
// sub-directories exactly as Spark's DiskBlockManager does, so that Spark's
// external shuffle service finds them. Temp files are named
// "<final name>.<16 hex digits>.shuffled-tmp", in the final file's
// directory.
//
// ParseName is the one parser of these names: it accepts exactly the names
// DataName, IndexName, ChecksumName and TempName give (canonical decimal
// ids), and ListShuffles, RemoveShuffle, RemoveAll and Sweep act on what it
// accepts.
//
// # Roots: directories opened once
//
// An executor owns its Spark local dirs and can swap a dir or a hashed
// sub-dir for a symbolic link at any time, so a path checked once proves
// nothing later. OpenRoot opens a layout's directories once (resolved
// paths, no symlink on them) and its FS makes every file relative to those
// descriptors (vfs.Confine: openat2 with RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS, or O_NOFOLLOW per component): nothing below a root
// is reached through a symbolic link, nothing outside it is reached at
// all, and a sub-dir that belongs to a uid other than the owners given is
// refused. The refusals name the directory and match fs.ErrPermission.
//
// The executor can also put anything under a file's name. Every file is
// opened as a regular file only and without blocking (vfs.FS.Open): a FIFO
// planted where a commit or Open reads (the index, the data temp file, and
// the data and checksum files of an output whose index is there, which a
// commit reads to tell whether it is committed) fails it at once, naming
// it ("... is a FIFO, not a regular file"), instead of blocking it in
// open(2) forever. What lies at the final data or checksum name of an
// output with no index is never opened: the commit renames its own file
// over it, so a FIFO there is replaced. The mode and group of what
// the daemon makes there (temp files, sub-dirs) are set through the
// descriptor it made or checked (File.Chmod, File.Chown), never by name, a
// data temp file with more than one link is refused, and a temp file is
// renamed into place only while its name still names the file the commit
// made (device and inode); else the commit fails, naming it, and leaves
// nothing. So a name swapped for a hard link to another client's file
// never gets that file a mode or group changed.
//
// An executor that hard-links another client's committed output (its
// index, data and checksum files) at its own final names makes that output
// its own as far as a commit can tell: the commit finds it committed and
// returns its lengths and checksums (existing), as if the executor had
// written those bytes itself, and discards its attempt. The other client's
// files are never written, truncated, chmod-ed or chown-ed through those
// names, and a removal unlinks the executor's names only. Linking needs
// rights on the files (on Linux, fs.protected_hardlinks=1, most
// distributions' default, lets a user link only files it owns or may read
// and write).
//
// Directories made for files (EnsureDir, by Commit and the writer) take
// their parent's group and setgid bit and get DirMode, group-writable, as
// Spark makes its sub-dirs for the shuffle service (SPARK-37618); committed
// files get the configured mode (DefaultFileMode, 0644, as Spark) and their
// directory's group.
//
// # Index file
//
// numPartitions+1 big-endian int64 offsets into the data file; partition p
// is bytes [offset[p], offset[p+1]). The first offset is 0, the last is the
// data file's length; an empty partition repeats the offset.
//
//	byte 0          8          16               8(n-1)     8n         8n+8
//	     +----------+----------+------ ... -----+----------+----------+
//	     |    0     |  off 1   |                | off n-1  |  off n   |
//	     +----------+----------+------ ... -----+----------+----------+
//	     each an int64, big-endian; n = numPartitions; off n = data length
//
// Example: partitions of 3, 0 and 5 bytes give the 32-byte index
//
//	00000000 00000000  00000000 00000003  00000000 00000003  00000000 00000008
//
// # Checksum file
//
// numPartitions big-endian int64 values, each the 32-bit checksum (ADLER32,
// CRC32 or CRC32C, as the name's suffix says) of that partition's on-disk
// (compressed) bytes, in the low half; the high half is zero. An empty
// partition's checksum is that of no bytes: 1 for ADLER32, 0 for the CRCs.
//
//	byte 0     4       8     12      16               8(n-1)  8n-4    8n
//	     +-----+-------+-----+-------+------ ... -----+-------+-------+
//	     |  0  | sum 0 |  0  | sum 1 |                |   0   |sum n-1|
//	     +-----+-------+-----+-------+------ ... -----+-------+-------+
//	     each an int64, big-endian: high 32 bits 0, low 32 bits the sum
//
// # Commit
//
// Commit.Do, with Sync set:
//
//  1. check the data temp file holds sum(lengths) bytes; fsync it;
//  2. if an output of the same id is committed, keep it, remove the data
//     temp file, return its lengths (the first commit wins);
//  3. remove an index file that marks nothing committed (it could come to
//     agree with the new data file), and fsync its directory; write and
//     fsync the checksum temp and index temp files;
//  4. rename the checksum temp, then the data temp, into place;
//  5. fsync the data and checksum directories;
//  6. rename the index temp into place: the commit point;
//  7. fsync the index directory.
//
// Renames are the only atomic steps, and each file's contents are durable
// before its name is (steps 1 and 3), so a name never points at a torn
// file. Step 5 orders the directories: the index name cannot become durable
// before the data name it describes, even when SparkHashed puts them in
// different directories.
//
// A crash before step 6 leaves no index: nothing is committed, and the
// renamed data and checksum files are leftovers that the next attempt of
// the same output replaces (or Remove removes); temp files are left for
// Sweep. A crash
// after step 6 leaves a complete output. A failure of step 7 is returned,
// and Do removes the index (first), data and checksum files: the caller is
// told "not committed" and nothing of the attempt remains; should the
// machine then crash before those removals reach the disk, what reappears
// is the complete output, whose files were all synced. On any error Do
// removes every temp file and every file it renamed into place; it never
// removes an output committed before it began.
//
// Without Sync the order of the steps still holds against a crash of the
// process (the kernel keeps every rename it acknowledged), but not against
// a crash of the machine.
//
// # Concurrency
//
// Do, Remove and the removals of RemoveShuffle and RemoveAll of one
// output that share a Locks (keyed by its index path; the daemon's Server
// holds one for every directory it writes) run one at a time, so the check
// of step 2 and the renames act as one step, and a second attempt finds
// the first one's output. Across Locks, and so across processes, nothing
// serializes them: two processes committing one output
// at once could interleave their data and index renames, and a reader
// could pair one attempt's index with the other's data. That is outside
// the contract: one daemon owns a node's shuffle directories, and Spark
// gives every task attempt its own map id, so two processes never commit
// the same output. The crash argument above holds regardless.
package shufflefile
