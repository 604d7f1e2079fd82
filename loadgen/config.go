package loadgen

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/shuffled/shuffled/checksum"
	"github.com/shuffled/shuffled/codec"
	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/gpu"
	"github.com/shuffled/shuffled/partition"
	"github.com/shuffled/shuffled/partition/synth"
	"github.com/shuffled/shuffled/protocol"
)

// ErrUsage is wrapped by every error about a flag's value: the message
// names the flag, the value, and what to give instead.
var ErrUsage = errdefs.New(errdefs.ErrInvalidArgument, "loadgen: invalid flag")

// usageError is a one-line message about a flag.
type usageError struct{ msg string }

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == ErrUsage }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// Payload kinds and data planes, as the flags spell them.
const (
	PayloadColumnar = "columnar"
	PayloadOpaque   = "opaque"
	// PayloadKudo is a columnar payload that the daemon writes as
	// spark-rapids' kudo tables.
	PayloadKudo = "kudo"
	PlaneInline = "inline"
	PlaneMemfd  = "memfd"
	// PlaneCUDAIPC is the data plane of --gpu: batches stay in device
	// memory and the daemon gets their IPC handle.
	PlaneCUDAIPC = "cuda-ipc"
)

// Defaults of the workload: about 20 seconds of a 2-core machine through
// the embedded daemon (see docs/benchmarks.md).
const (
	DefaultTasks          = 300
	DefaultCompareTasks   = 32
	DefaultConcurrency    = 4
	DefaultPartitions     = 200
	DefaultRows           = 100_000
	DefaultBatchesPerTask = 2
	DefaultPoolBatches    = 8
	DefaultReps           = 3
)

// Config describes one load generator run. The zero value is not valid;
// start from DefaultConfig.
type Config struct {
	// Tasks is the number of map tasks (map outputs). Zero means as many as
	// Duration allows.
	Tasks int
	// Duration, if positive, stops starting tasks once it has passed; tasks
	// already started finish.
	Duration time.Duration
	// Concurrency is the number of tasks in flight, each executor on its own
	// connection.
	Concurrency int
	// Partitions is the number of reducer partitions of every map output.
	Partitions int
	// Rows is the number of rows of every batch.
	Rows int
	// BatchesPerTask is the number of batches each task writes; more than
	// one makes the daemon write several runs and merge them.
	BatchesPerTask int
	// NoLastBatch sends every batch unmarked: by default a task's final
	// batch is marked as its last (client.MapOutput.MarkLast), as a
	// client that knows it does.
	NoLastBatch bool
	// Schema is one of synth.Schemas.
	Schema string
	// Skew is the key column's Zipf exponent; 0 is the schema's uniform
	// keys.
	Skew float64
	// Nulls is the fraction of null values in every column but the key
	// (validity bitmaps); 0, the default, sends no bitmaps.
	Nulls float64
	// Codec and Checksum name the map outputs' codec and checksum algorithm
	// as the protocol spells them (lz4, ADLER32).
	Codec    string
	Checksum string
	// Payload is PayloadColumnar (the daemon serializes blocks),
	// PayloadKudo (the daemon serializes kudo tables) or PayloadOpaque
	// (the load generator serializes each partition, the daemon compresses).
	Payload string
	// DataPlane is PlaneInline, PlaneMemfd, or PlaneCUDAIPC with GPU.
	DataPlane string
	// Seed seeds the batch generator: the same seed gives the same bytes.
	Seed int64
	// PoolBatches is the number of distinct batches generated up front.
	PoolBatches int

	// GPU partitions the pool's batches on CUDA device 0 and hands them to
	// the daemon by IPC handle (PlaneCUDAIPC); it needs a cuda build, and a
	// daemon in another process (Socket or DaemonBin): CUDA does not open
	// an IPC handle in the process that exported it.
	GPU bool
	// CPUCompress asks for the daemon's CPU pool to compress the device
	// batches (--cpu-compress, with GPU), not the GPU, its default: a
	// DaemonBin child is started with --no-cuda-compress; a daemon at
	// Socket must have been started with it.
	CPUCompress bool

	// Socket is a running daemon's socket; empty starts an embedded daemon.
	Socket string
	// Processes, if above 1, runs the workload from that many load
	// generator processes against the daemon at Socket at once (this
	// program re-executed, see processes.go): Tasks is shared out among
	// them, Concurrency and Duration are each one's, and the report is
	// the aggregate with each process's own.
	Processes int
	// DaemonBin, if set, is a shuffled binary that the run starts as a
	// child process (shuffled serve on a temporary socket, under Root or a
	// temporary root), times from exec to its READY notification, and
	// stops at the end. The child inherits the environment, so SHUFFLED_*
	// variables configure it.
	DaemonBin string
	// Root is the embedded daemon's root; empty uses a temporary directory.
	Root string
	// Keep leaves the committed map outputs in place (under Root, or in
	// the external daemon) instead of removing them at the end.
	Keep bool

	// Verify reads every committed map output back and checks it.
	Verify bool
	// Encrypt writes IO-encrypted map outputs (Spark's
	// spark.io.encryption.enabled): the executors register a random
	// AES-128 key, ioKey, made once per run, and every Open asks for
	// encryption.
	Encrypt bool
	ioKey   *[16]byte
	// JSON prints the report as JSON instead of a table.
	JSON bool
	// Compare runs the workload in process through the writer's stream,
	// legacy and ceiling modes, Reps times each, interleaved.
	Compare bool
	Reps    int

	// DumpInput, if set, is a directory where the run writes its opaque
	// input before it starts (see dump.go), for another writer to replay.
	DumpInput string

	// CPUProfile, if set, is a file where the run writes a Go CPU profile
	// (runtime/pprof) of this process while its tasks run: the load
	// generator's client and, when embedded, the daemon.
	CPUProfile string
	// Trace, if set, is a file where the run writes an execution trace
	// (runtime/trace, go tool trace) of this process while its tasks run.
	Trace string

	// member, if set, makes this run one process of a --processes run:
	// it waits at its barriers and writes its application under its own id.
	member *member
}

// DefaultConfig returns the default workload.
func DefaultConfig() Config {
	return Config{
		Tasks:          DefaultTasks,
		Concurrency:    DefaultConcurrency,
		Partitions:     DefaultPartitions,
		Rows:           DefaultRows,
		BatchesPerTask: DefaultBatchesPerTask,
		Schema:         "lineitem",
		Codec:          "lz4",
		Checksum:       "ADLER32",
		Payload:        PayloadColumnar,
		DataPlane:      PlaneMemfd,
		Seed:           1,
		PoolBatches:    DefaultPoolBatches,
		Reps:           DefaultReps,
		Processes:      1,
	}
}

// ParseSkew parses the --skew flag: "uniform" (0) or "zipf:S" (S).
func ParseSkew(s string) (float64, error) {
	if s == "uniform" {
		return 0, nil
	}
	if exp, ok := strings.CutPrefix(s, "zipf:"); ok {
		if f, err := strconv.ParseFloat(exp, 64); err == nil && f > 1 && f <= 10 {
			return f, nil
		}
	}
	return 0, usagef("--skew must be uniform or zipf:S with 1 < S <= 10 (e.g. zipf:1.1), got %q", s)
}

// SkewString spells c.Skew as the --skew flag does.
func (c *Config) SkewString() string {
	if c.Skew == 0 {
		return "uniform"
	}
	return "zipf:" + strconv.FormatFloat(c.Skew, 'g', -1, 64)
}

// ParseArgs parses the command line into a Config. -h prints the flags to
// help and returns flag.ErrHelp; any other problem is one line wrapping
// ErrUsage.
func ParseArgs(args []string, help io.Writer) (Config, error) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("shuffled-loadgen", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&c.Tasks, "tasks", c.Tasks, "map tasks to run (default with --compare: "+strconv.Itoa(DefaultCompareTasks)+"; with --duration and no --tasks: unbounded)")
	fs.DurationVar(&c.Duration, "duration", 0, "stop starting tasks after this long (e.g. 30s); 0: run --tasks tasks")
	fs.IntVar(&c.Concurrency, "concurrency", c.Concurrency, "map tasks in flight, each on its own connection")
	fs.IntVar(&c.Partitions, "partitions", c.Partitions, "reducer partitions per map output")
	fs.IntVar(&c.Rows, "rows", c.Rows, "rows per batch")
	fs.IntVar(&c.BatchesPerTask, "batches-per-task", c.BatchesPerTask, "batches per map task (more than 1: runs and a merge)")
	fs.BoolVar(&c.NoLastBatch, "no-last-batch", false, "send a task's final batch unmarked; by default it is marked as the last (LAST), so the daemon merges the task's runs while that batch is compressed, not at commit")
	fs.StringVar(&c.Schema, "schema", c.Schema, "batch schema: "+strings.Join(synth.Schemas, ", "))
	skew := fs.String("skew", "uniform", "key skew: uniform or zipf:S (1 < S <= 10)")
	fs.Float64Var(&c.Nulls, "nulls", 0, "fraction of null values in every column but the key, in [0, 1); 0: no validity bitmaps")
	fs.StringVar(&c.Codec, "codec", c.Codec, "codec: none, lz4, zstd or snappy")
	fs.StringVar(&c.Checksum, "checksum", c.Checksum, "checksum: none, ADLER32, CRC32 or CRC32C")
	fs.StringVar(&c.Payload, "payload", c.Payload, "payload: columnar (the daemon serializes blocks), kudo (the daemon serializes spark-rapids kudo tables) or opaque (pre-serialized)")
	fs.StringVar(&c.DataPlane, "data-plane", c.DataPlane, "data plane: inline (through the socket), memfd, or cuda-ipc (with --gpu, its default)")
	fs.BoolVar(&c.GPU, "gpu", false, "partition batches on CUDA device 0 and hand them over by IPC handle (a cuda build; needs --socket or --daemon-bin)")
	fs.BoolVar(&c.CPUCompress, "cpu-compress", false, "with --gpu: the daemon compresses the device batches on its CPU pool, not on the GPU (a --daemon-bin child is started with --no-cuda-compress; a --socket daemon must run with it)")
	fs.Int64Var(&c.Seed, "seed", c.Seed, "generator seed: the same seed sends the same bytes")
	fs.IntVar(&c.PoolBatches, "pool-batches", c.PoolBatches, "distinct batches generated up front and reused")
	fs.StringVar(&c.Socket, "socket", "", "a running daemon's socket; empty: start an embedded daemon")
	fs.IntVar(&c.Processes, "processes", c.Processes, "load generator processes driving the --socket daemon at once (--tasks shared out; --concurrency and --duration each one's); the report is their aggregate")
	fs.StringVar(&c.DaemonBin, "daemon-bin", "", "start this shuffled binary as the daemon, a child process (it inherits SHUFFLED_* variables); empty: embedded")
	fs.StringVar(&c.Root, "root", "", "the embedded or child daemon's root; empty: a temporary directory, removed at the end")
	fs.BoolVar(&c.Keep, "keep", false, "keep the committed map outputs (needs --root, or --socket)")
	fs.BoolVar(&c.Verify, "verify", false, "read every committed map output back and check rows and contents")
	fs.BoolVar(&c.Encrypt, "encrypt", false, "write IO-encrypted map outputs, as with Spark's spark.io.encryption.enabled (a random AES-128 key per run)")
	fs.BoolVar(&c.JSON, "json", false, "print the report as JSON")
	fs.BoolVar(&c.Compare, "compare", false, "run in process through the stream, legacy and ceiling writers and compare")
	fs.StringVar(&c.DumpInput, "dump-input", "", "write the run's opaque input batches and their task order into this new or empty directory (needs --payload opaque)")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile (go tool pprof) of this process over the tasks into this file; with the embedded daemon it covers the daemon too")
	fs.StringVar(&c.Trace, "trace", "", "write an execution trace (go tool trace) of this process over the tasks into this file")
	fs.IntVar(&c.Reps, "reps", c.Reps, "repetitions of each mode with --compare (medians are reported)")
	version := fs.Bool("version", false, "print the version, commit, Go version and platform, and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(help)
			fmt.Fprintln(help, "Usage: shuffled-loadgen [flags]")
			fs.PrintDefaults()
			return c, err
		}
		return c, usagef("%v (run shuffled-loadgen -h for the flags)", err)
	}
	if fs.NArg() > 0 {
		return c, usagef("unexpected argument %q: every setting is a flag (run shuffled-loadgen -h)", fs.Arg(0))
	}
	if *version {
		return c, errVersion
	}
	var err error
	if c.Skew, err = ParseSkew(*skew); err != nil {
		return c, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.GPU && !set["data-plane"] {
		c.DataPlane = PlaneCUDAIPC
	}
	if !set["tasks"] {
		switch {
		case c.Duration > 0:
			c.Tasks = 0
		case c.Compare:
			c.Tasks = DefaultCompareTasks
		}
	}
	if c.Root != "" {
		abs, err := filepath.Abs(c.Root)
		if err != nil {
			return c, usagef("--root %q: %v", c.Root, err)
		}
		c.Root = abs
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
}

// Validate checks every field and returns the first problem as a one-line
// error wrapping ErrUsage, naming the flag and what to give instead. It
// also spells Codec and Checksum the canonical way.
func (c *Config) Validate() error {
	switch {
	case c.Tasks < 0 || c.Tasks == 0 && c.Duration <= 0:
		return usagef("--tasks must be >= 1 (or give --duration), got %d", c.Tasks)
	case c.Duration < 0:
		return usagef("--duration must be >= 0, got %v", c.Duration)
	case c.Concurrency < 1:
		return usagef("--concurrency must be >= 1, got %d", c.Concurrency)
	case c.Partitions < 1:
		return usagef("--partitions must be >= 1, got %d", c.Partitions)
	case c.Partitions > protocol.MaxPartitions:
		return usagef("--partitions must be <= %d, got %d", protocol.MaxPartitions, c.Partitions)
	case c.Rows < 1:
		return usagef("--rows must be >= 1, got %d", c.Rows)
	case c.Rows > partition.MaxRows:
		return usagef("--rows must be <= %d, got %d", partition.MaxRows, c.Rows)
	case c.BatchesPerTask < 1:
		return usagef("--batches-per-task must be >= 1, got %d", c.BatchesPerTask)
	case c.PoolBatches < 1:
		return usagef("--pool-batches must be >= 1, got %d", c.PoolBatches)
	case c.Reps < 1:
		return usagef("--reps must be >= 1, got %d", c.Reps)
	case c.Processes < 1:
		return usagef("--processes must be >= 1, got %d", c.Processes)
	}
	if !(c.Nulls >= 0 && c.Nulls < 1) {
		return usagef("--nulls must be in [0, 1), got %v", c.Nulls)
	}
	if !knownSchema(c.Schema) {
		return usagef("--schema must be one of %s, got %q", strings.Join(synth.Schemas, ", "), c.Schema)
	}
	if c.Skew != 0 && !(c.Skew > 1 && c.Skew <= 10) {
		return usagef("--skew must be uniform or zipf:S with 1 < S <= 10, got zipf:%v", c.Skew)
	}
	k, err := codec.Parse(c.Codec)
	if err != nil {
		return usagef("--codec must be one of none, lz4, zstd, snappy, got %q", c.Codec)
	}
	c.Codec = k.String()
	a, err := checksum.Parse(c.Checksum)
	if err != nil || c.Checksum == "" {
		return usagef("--checksum must be one of none, ADLER32, CRC32, CRC32C, got %q", c.Checksum)
	}
	c.Checksum = a.String()
	if c.Payload != PayloadColumnar && c.Payload != PayloadOpaque && c.Payload != PayloadKudo {
		return usagef("--payload must be columnar, kudo or opaque, got %q", c.Payload)
	}
	if c.DataPlane != PlaneInline && c.DataPlane != PlaneMemfd && c.DataPlane != PlaneCUDAIPC {
		return usagef("--data-plane must be inline, memfd or cuda-ipc, got %q", c.DataPlane)
	}
	if err := c.validateGPU(); err != nil {
		return err
	}
	if c.Root != "" && !filepath.IsAbs(c.Root) {
		return usagef("--root must be an absolute path, got %q", c.Root)
	}
	switch {
	case c.Socket != "" && c.DaemonBin != "":
		return usagef("--daemon-bin starts a daemon of its own; drop --socket %s or --daemon-bin", c.Socket)
	case c.Socket != "" && c.Root != "":
		return usagef("--root applies to the embedded daemon; with --socket %s the daemon decides where outputs go: drop one of them", c.Socket)
	case c.Keep && c.Socket == "" && c.Root == "":
		return usagef("--keep needs --root DIR: the temporary root of an embedded or --daemon-bin daemon is always removed")
	case c.Compare && c.Socket != "":
		return usagef("--compare runs the writer in process; drop --socket %s", c.Socket)
	case c.Compare && c.DaemonBin != "":
		return usagef("--compare runs the writer in process; drop --daemon-bin %s", c.DaemonBin)
	case c.Compare && c.Verify:
		return usagef("--verify checks a daemon run; drop it or --compare")
	case c.Compare && c.Encrypt:
		return usagef("--encrypt applies to a daemon run; drop it or --compare")
	case c.Compare && c.Keep:
		return usagef("--keep keeps a daemon run's outputs; drop it or --compare")
	case c.DumpInput != "" && c.Payload != PayloadOpaque:
		return usagef("--dump-input writes opaque batches; add --payload opaque or drop --dump-input %s", c.DumpInput)
	case c.DumpInput != "" && c.Compare:
		return usagef("--dump-input dumps a daemon run's input; drop it or --compare")
	case c.CPUProfile != "" && c.Compare:
		return usagef("--cpuprofile profiles a daemon run's tasks; drop it or --compare")
	case c.Trace != "" && c.Compare:
		return usagef("--trace traces a daemon run's tasks; drop it or --compare")
	case c.DumpInput != "" && c.Tasks == 0:
		return usagef("--dump-input needs --tasks N (a --duration run has no fixed task order)")
	}
	return c.validateProcesses()
}

// validateProcesses checks --processes against the other flags.
func (c *Config) validateProcesses() error {
	if c.Processes == 1 {
		return nil
	}
	switch {
	case c.Compare:
		return usagef("--processes %d drives a daemon; drop it or --compare", c.Processes)
	case c.DaemonBin != "":
		return usagef("--processes %d drives one daemon that is already running: give --socket PATH (shuffled serve) instead of --daemon-bin %s", c.Processes, c.DaemonBin)
	case c.Socket == "":
		return usagef("--processes %d drives one daemon that is already running: give --socket PATH (shuffled serve); the embedded daemon lives in one process", c.Processes)
	case c.Tasks > 0 && c.Tasks < c.Processes:
		return usagef("--processes %d shares out --tasks %d: give at least one task per process", c.Processes, c.Tasks)
	case c.DumpInput != "":
		return usagef("--dump-input writes one process's input; drop it or --processes %d", c.Processes)
	}
	return nil
}

// validateGPU checks --gpu against the build and the other flags.
func (c *Config) validateGPU() error {
	switch {
	case c.GPU && !gpu.Supported:
		return usagef("--gpu needs a cuda build (make cuda): this shuffled-loadgen was built without the cuda tag")
	case c.GPU && c.DataPlane != PlaneCUDAIPC:
		return usagef("--gpu hands batches over by CUDA IPC; drop --data-plane %s", c.DataPlane)
	case !c.GPU && c.DataPlane == PlaneCUDAIPC:
		return usagef("--data-plane cuda-ipc needs --gpu (the batches must be in GPU memory)")
	case c.GPU && c.Payload == PayloadOpaque:
		return usagef("--gpu sends columnar batches that the GPU partitions; drop --payload %s", c.Payload)
	case c.GPU && c.Partitions > gpu.MaxGPUPartitions:
		return usagef("--partitions must be <= %d with --gpu (the kernel's per-warp counters), got %d", gpu.MaxGPUPartitions, c.Partitions)
	case c.CPUCompress && !c.GPU:
		return usagef("--cpu-compress compresses device batches: it needs --gpu")
	case c.GPU && c.Compare:
		return usagef("--compare runs the writer in process; drop --gpu")
	case c.GPU && c.Socket == "" && c.DaemonBin == "":
		return usagef("--gpu needs a daemon in another process (CUDA does not open an IPC handle in the process that exported it): give --socket PATH of a cuda daemon, or --daemon-bin PATH of a cuda shuffled binary to start")
	}
	return nil
}

func knownSchema(s string) bool {
	for _, name := range synth.Schemas {
		if s == name {
			return true
		}
	}
	return false
}

// codecKind and checksumAlg return the parsed forms of a validated Config.
// columnar reports whether the daemon serializes the batches (columnar
// or kudo payload).
func (c *Config) columnar() bool { return c.Payload != PayloadOpaque }

// format is the serialization of a columnar payload's records.
func (c *Config) format() partition.Format {
	if c.Payload == PayloadKudo {
		return partition.Kudo
	}
	return partition.SHFC
}

func (c *Config) codecKind() codec.Kind {
	k, _ := codec.Parse(c.Codec)
	return k
}

func (c *Config) checksumAlg() checksum.Algorithm {
	a, _ := checksum.Parse(c.Checksum)
	return a
}
