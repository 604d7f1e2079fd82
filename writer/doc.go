// Package writer turns a map task's records into Spark's on-disk shuffle
// layout.
//
// A record is one partition's slice of one batch: opaque bytes the client
// serialized, or a row range of a columnar batch that the writer serializes.
// Records are admitted by the daemon-wide bytes-in-flight limiter, encoded
// (serialize + compress into one complete codec stream) on a shared pool of
// workers, and written to their run in arrival order, by the worker that
// finishes the oldest record not yet written (one at a time per run). A run
// is a maximal stretch of records with non-decreasing partition ids, so
// writing a run's records in arrival order writes its partitions in order
// and the bytes of each partition in arrival order, whatever order the
// workers finish in. The workers take the map output queued longest, so
// that map outputs finish one after another, and give another a turn once
// it has waited a millisecond, so that none waits behind another's whole
// queue; a map output's records go by partition, then run, so its runs
// are encoded side by side.
//
// A record whose partition id is lower than the previous one starts a new
// run; nothing ever looks ahead. Every run keeps its encoded bytes in
// memory, taking over their records' quota, within a budget of a quarter
// of the limit (an eighth per map output); a run that the budget refuses
// spills to a partial file and streams there from then on. The first run
// is kept in memory as well, so that a map output of several runs writes
// each byte once, to its data file, unless it is known to be the only
// run: when the client has marked the batch that starts it as its last
// (MarkLast), it streams to a partial file, which becomes the data file
// by rename; when the marked batch continues it, it goes to that file at
// the batch's first record; and a single run still in memory at Commit is
// written to its file then. At Commit, runs in memory are merged into the
// data file partition by partition while they are still written: each
// partition as soon as every run has passed it. A client that marks its
// last batch lets that merge start at the batch's first record instead,
// since no run can follow. A first run that streamed to its file when a
// second run started all the same (the mark was wrong, or the run had
// spilled) keeps what it wrote there (its prefix), which the merge reads
// back, and the rest in memory. Runs in files are merged after they end
// (package merge, by reading them a window at a time, large segments
// copied in the kernel).
// Both merges preallocate the data file (vfs.Preallocate) for bytes their
// runs hold before they write them, and only for those.
//
// With Spec.Encryption (Spark's spark.io.encryption.enabled), the first
// run encrypts each record as it puts it, where its offset in its
// partition is known: a partition's first bytes get a fresh random IV
// ahead of them, later ones continue its AES-CTR keystream (package
// iocrypt), and the checksums are of those bytes. So a single run's file
// is the encrypted data file as it is. The later runs stay plain until a
// merge encrypts each of their segments at the offset where it lands in
// its partition (merge.Sealer), through memory, never copied in the
// kernel.
//
// Producers hand records to the workers through the job queue's inbox,
// under a lock of their own; workers take the inbox into the map outputs'
// queues when they pop. The index and checksum files are
// then committed atomically (package shufflefile).
//
// A Spec.Sink replaces the runs for measurements (the baselines in
// writer/baseline).
//
// Invariants: quota acquired for a record is released exactly once, on every
// path (written, kept by a run in memory until the map output ends, encoding
// failed, I/O failed, aborted, cancelled); a map output holds O(runs) open
// files; Commit and Abort each leave no temp file behind, and exactly one of
// them takes effect.
package writer
