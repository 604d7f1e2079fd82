// Package loadgen drives a shuffled daemon the way a fleet of executors
// does, and measures it: map tasks of synthetic, hash-partitioned batches
// (package partition/synth) go through the Go client over the daemon's Unix
// socket, or, for the compare mode, straight into an in-process writer
// engine in each of its modes. The daemon is embedded, external (Socket)
// or a child process (DaemonBin); with GPU (a cuda build) the batches are
// partitioned on the device and handed over by CUDA IPC handle.
//
// The main invariant: what a run sends is a pure function of its
// configuration. Batches come from a small pool generated once from the
// seed, and task i sends pool batch (i+b) mod len(pool) as its batch b, so
// generation is not what is measured, and Verify knows, for every map output
// and partition, exactly which rows it must find on disk.
package loadgen
