// Package writer turns a map task's records into Spark's on-disk shuffle
// layout.
//
// A record is one partition's slice of one batch: opaque bytes the client
// serialized, or a row range of a columnar batch that the writer serializes.
// Records are admitted by the daemon-wide bytes-in-flight limiter, encoded
// (serialize + compress into one complete codec stream) on a shared pool of
// workers, and written by one goroutine per run. A run is a maximal stretch of
// records with non-decreasing partition ids, so writing a run's records in
// arrival order writes its partitions in order and the bytes of each
// partition in arrival order, whatever order the workers finish in.
//
// A record whose partition id is lower than the previous one starts a new run
// in its own partial file; nothing ever looks ahead. At Commit, a single run
// file becomes the data file by rename; several runs are merged partition by
// partition (package merge) by copying compressed segments. The index and
// checksum files are then committed atomically (package shufflefile).
//
// Invariants: quota acquired for a record is released exactly once, on every
// path (written, encoding failed, I/O failed, aborted, cancelled); a map
// output holds O(runs) open files; Commit and Abort each leave no temp file
// behind, and exactly one of them takes effect.
package writer
