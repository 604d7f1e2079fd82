#!/usr/bin/env bash
# scripts/bench-jvm-model.sh: shuffled against a model of spark-rapids'
# multithreaded shuffle writer V2 (jvm/bench, lz4-java's native compressor),
# on the same bytes, side by side, per CPU second (docs/benchmarks.md,
# "JVM writer model").
#
# For each workload (opaque payload, lineitem, PARTITIONS x BATCHES):
#   1. shuffled-loadgen with a child daemon (shuffled serve, SHUFFLED_LIMIT,
#      SHUFFLED_POOL) dumps its input (--dump-input), keeps its map outputs
#      and reports the daemon's peak RSS;
#   2. the model replays the dump in memory and file-only mode; every data,
#      index and checksum file must be byte-identical to shuffled's, or the
#      script fails.
# Then REPS interleaved repetitions, each over every workload, of:
# shuffled-loadgen with the embedded daemon (its CPU covers the load
# generator's client, the socket and memfd data plane and the daemon), the
# model in memory mode, the model in file-only mode (each after WARMUP
# passes that let the JIT compile).
# It prints the environment, then medians: MB of input per CPU second, the
# ratios (medians of the ratios within each repetition), and peak RSS (the
# model's less its input pool, which stands for the executor's batches).
#
# REPS=0 checks the byte identity only (a quick test: e.g. REPS=0 TASKS=2
# ROWS=2000 PARTITIONS=16 BATCHES="1 3").
#
# Environment: REPS (5), TASKS (8), ROWS (100000), CONCURRENCY (2), THREADS
# (2, the daemon's pool and the model's writer threads), LIMIT_MIB (128),
# WARMUP (1), PARTITIONS ("200 2000"), BATCHES ("1 4"), CPUS (taskset list,
# default all), JAVA (java), JAVA_OPTS (extra JVM options, split at spaces).
# Prebuilt mode, for a machine without Go or Maven: BIN (a directory holding
# shuffled and shuffled-loadgen) skips the Go builds, JVM_CP (the model's
# class path: its jar or classes and lz4-java's jar) skips the Maven build.
# OUT_JSON (a file) has the summary appended as JSON lines, one per workload,
# each with the environment's fields. DEADLINE (seconds since the epoch):
# no repetition after the first starts that the last one's duration says
# would end after it; the table says how many ran. JVM_COMPRESSOR (e.g. LZ4JNICompressor): fail
# unless the model's lz4 compressor is that class. RUNS_DIR (a new or empty
# directory) keeps every run's JSON as it ends, so that a run stopped early
# can still be summarised: scripts/bench-jvm-model.sh --summarize RUNS_DIR
# prints the table (and appends to OUT_JSON) from the repetitions that
# finished.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

REPS=${REPS:-5} TASKS=${TASKS:-8} ROWS=${ROWS:-100000} CONCURRENCY=${CONCURRENCY:-2}
THREADS=${THREADS:-2} LIMIT_MIB=${LIMIT_MIB:-128} WARMUP=${WARMUP:-1}
PARTITIONS=${PARTITIONS:-"200 2000"} BATCHES=${BATCHES:-"1 4"} JAVA=${JAVA:-java}
CPUS=${CPUS:-0-$(($(nproc) - 1))} DEADLINE=${DEADLINE:-} JVM_COMPRESSOR=${JVM_COMPRESSOR:-}
read -r -a java_opts <<<"${JAVA_OPTS:-}"

say() { printf 'bench-jvm-model: %s\n' "$*" >&2; }
die() {
	say "FAIL: $*"
	exit 1
}
# summarize RUNS: the environment line and the tables from the runs in
# RUNS; the summary's JSON lines are appended to OUT_JSON if set.
summarize() {
	python3 - "$1" "${OUT_JSON:-}" <<'EOF'
import json, os, statistics, sys
runs, out_json = sys.argv[1], sys.argv[2]
def load(name):
    with open(f"{runs}/{name}") as f:
        return json.load(f)
def tag(pb):
    return "p{}-b{}".format(*pb.split(":"))
env = load("env.json")
# The workloads whose byte identity was checked, and each one's
# repetitions: those whose three runs all ended.
workloads = [pb for pb in env.pop("workloads") if os.path.exists(f"{runs}/identical-{tag(pb)}")]
if not workloads:
    sys.exit(f"bench-jvm-model: {runs}: no workload got through its byte-identity check")
def reps_of(pb):
    n = 0
    while all(os.path.exists(f"{runs}/{side}-{tag(pb)}-r{n + 1}.json") for side in ("shuffled", "jvm-memory", "jvm-file")):
        n += 1
    return n
counts = {pb: reps_of(pb) for pb in workloads}
ran = max(counts.values())
lo = min(counts.values())
first = load(f"id-memory-{tag(workloads[0])}.json")
env.update(java=first["java"], compressor=first["compressor"])
reps_said = str(ran) if lo == ran else f"{lo}-{ran}"
print(f"environment: {env['cores']} of {env['machine_cores']} cores (CPUS={env['cpus']}; {env['cpu_model'] or 'CPU model unknown'}), "
      f"THREADS={env['threads']} (the daemon's pool and V2's writer threads), CONCURRENCY={env['concurrency']}, "
      f"TASKS={env['tasks']}, ROWS={env['rows']}, LIMIT_MIB={env['limit_mib']}, "
      f"REPS={reps_said}{'' if lo == env['reps_wanted'] else ' of ' + str(env['reps_wanted'])}, "
      f"WARMUP={env['warmup']}; java {env['java']}, lz4 {env['compressor']}; {env['shuffled'] or 'shuffled version unknown'}")
summary = []
for pb in workloads:
    p, b = (int(x) for x in pb.split(":"))
    t = tag(pb)
    row = dict(env, partitions=p, batches_per_task=b, reps=counts[pb],
               identical_files=int(open(f"{runs}/identical-{t}").read()))
    child = load(f"child-{t}.json")
    row["shuffled_peak_rss_mib"] = child["peak_rss_bytes"] / 2**20 if "peak_rss_bytes" in child else float("nan")
    row["serialized_bytes"] = child["serialized_bytes"]
    if counts[pb]:
        reps = [{side: load(f"{side}-{t}-r{r}.json") for side in ("shuffled", "jvm-memory", "jvm-file")}
                for r in range(1, counts[pb] + 1)]
        med = lambda f: statistics.median(f(x) for x in reps)
        for side, name in (("shuffled", "shuffled"), ("jvm-memory", "v2_memory"), ("jvm-file", "v2_file")):
            row[f"{name}_mb_per_cpu_s"] = med(lambda x: x[side]["mb_per_cpu_s"])
            row[f"{name}_throughput_mb_s"] = med(lambda x: x[side]["throughput_mb_s"])
        # The ratios are medians of the ratios within each repetition, whose
        # runs were back to back.
        cpu = lambda x, s: x[s]["mb_per_cpu_s"]
        row["shuffled_over_v2_memory"] = med(lambda x: cpu(x, "shuffled") / cpu(x, "jvm-memory"))
        row["shuffled_over_v2_best"] = med(lambda x: cpu(x, "shuffled") / max(cpu(x, "jvm-memory"), cpu(x, "jvm-file")))
        tput = lambda x, s: x[s]["throughput_mb_s"]
        row["shuffled_over_v2_memory_throughput"] = med(lambda x: tput(x, "shuffled") / tput(x, "jvm-memory"))
        rss = [x[s]["peak_rss_bytes"] - x[s]["pool_bytes"] for x in reps for s in ("jvm-memory", "jvm-file")]
        row["v2_peak_rss_mib"] = statistics.median(rss) / 2**20
        row["rss_ratio"] = row["shuffled_peak_rss_mib"] / row["v2_peak_rss_mib"]
    summary.append(row)
measured = [r for r in summary if r["reps"]]
for r in summary:
    if not r["reps"]:
        print(f"partitions {r['partitions']}, batches per task {r['batches_per_task']}: "
              f"{r['identical_files']} files byte-identical (no repetition: nothing measured)")
if measured:
    m = sorted({r["reps"] for r in measured})
    reps_said = str(m[0]) if len(m) == 1 else f"{m[0]}-{m[-1]}"
    print(f"shuffled vs the spark-rapids V2 writer model: opaque lineitem, {env['tasks']} tasks x {env['rows']} rows per batch, "
          f"{env['threads']} writer threads, {env['limit_mib']} MiB limit; medians of {reps_said} interleaved runs")
    print(f"{'partitions':>10} {'batches':>7} | {'MB per CPU second':^35} | {'shuffled /':^17} | {'peak RSS MiB':^24}")
    print(f"{'':>10} {'':>7} | {'shuffled':>11} {'V2 memory':>11} {'V2 file':>11} | {'memory':>8} {'best':>8} | {'shuffled':>8} {'V2':>7} {'ratio':>7}")
    for r in measured:
        print(f"{r['partitions']:>10} {r['batches_per_task']:>7} | {r['shuffled_mb_per_cpu_s']:>11.1f} {r['v2_memory_mb_per_cpu_s']:>11.1f} "
              f"{r['v2_file_mb_per_cpu_s']:>11.1f} | {r['shuffled_over_v2_memory']:>8.2f} {r['shuffled_over_v2_best']:>8.2f} | "
              f"{r['shuffled_peak_rss_mib']:>8.1f} {r['v2_peak_rss_mib']:>7.1f} {r['rss_ratio']:>7.2f}")
    print(f"{'partitions':>10} {'batches':>7} | {'throughput MB/s (wall)':^35} | {'shuffled / V2 memory':>20}")
    for r in measured:
        print(f"{r['partitions']:>10} {r['batches_per_task']:>7} | {r['shuffled_throughput_mb_s']:>11.1f} {r['v2_memory_throughput_mb_s']:>11.1f} "
              f"{r['v2_file_throughput_mb_s']:>11.1f} | {r['shuffled_over_v2_memory_throughput']:>20.2f}")
if out_json:
    with open(out_json, "a") as f:
        for r in summary:
            # NaN (an unknown RSS) is no JSON: null.
            f.write(json.dumps({k: None if isinstance(v, float) and v != v else v for k, v in r.items()}) + "\n")
EOF
}

if [ "${1:-}" = --summarize ]; then
	if [ $# -ne 2 ] || [ ! -f "$2/env.json" ]; then
		die "usage: bench-jvm-model.sh --summarize RUNS_DIR (a RUNS_DIR of an earlier run)"
	fi
	summarize "$2"
	exit
fi
[ $# -eq 0 ] || die "no arguments but --summarize RUNS_DIR; the environment sets the rest"

for v in REPS TASKS ROWS CONCURRENCY THREADS LIMIT_MIB WARMUP; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, got '${!v}'"
done
[[ -z $DEADLINE || $DEADLINE =~ ^[0-9]+$ ]] || die "DEADLINE must be seconds since the epoch, got '$DEADLINE'"
cores=$(taskset -c "$CPUS" nproc) || die "CPUS='$CPUS' is not a CPU list taskset accepts"
workloads=()
for p in $PARTITIONS; do
	for b in $BATCHES; do
		[[ $p =~ ^[0-9]+$ && $b =~ ^[0-9]+$ ]] || die "PARTITIONS and BATCHES must hold integers, got '$p' and '$b'"
		workloads+=("$p:$b")
	done
done

work=$(mktemp -d "${TMPDIR:-/tmp}/shuffled-jvm-model-XXXXXX")
trap 'rm -rf "$work"' EXIT

if [ -n "${BIN:-}" ]; then
	bin=$(cd "$BIN" && pwd)
	for b in shuffled shuffled-loadgen; do
		[ -x "$bin/$b" ] || die "BIN=$BIN holds no executable $b"
	done
else
	say "building shuffled and shuffled-loadgen"
	bin=$work/bin
	(cd "$root" && go build -o "$bin/shuffled" ./cmd/shuffled && go build -o "$bin/shuffled-loadgen" ./cmd/shuffled-loadgen)
fi
if [ -n "${JVM_CP:-}" ]; then
	classpath=$JVM_CP
else
	say "building jvm/bench"
	mvn -f "$root/jvm/bench/pom.xml" -B -q package -DskipTests >&2
	classpath="$root/jvm/bench/target/classes$(printf ':%s' "$root"/jvm/bench/target/lib/*.jar)"
fi

export SHUFFLED_LIMIT="${LIMIT_MIB}MiB" SHUFFLED_POOL="$THREADS"
pin() { taskset -c "$CPUS" "$@"; }
loadgen() {
	pin "$bin/shuffled-loadgen" --payload opaque --data-plane memfd --tasks "$TASKS" \
		--concurrency "$CONCURRENCY" --rows "$ROWS" --json "$@" 2>/dev/null
}
model() {
	pin "$JAVA" "${java_opts[@]}" -cp "$classpath" dev.shuffled.bench.WriterModel --threads "$THREADS" \
		--limit-mib "$LIMIT_MIB" --concurrency "$CONCURRENCY" "$@"
}
# field FILE KEY: a top-level field of the JSON object in FILE.
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

# The environment, for the table's first line and the JSON lines.
runs=${RUNS_DIR:-$work/runs}
mkdir -p "$runs"
[ -z "$(ls -A "$runs")" ] || die "RUNS_DIR=$runs is not empty"
version=$("$bin/shuffled" version 2>/dev/null | head -n 1) || version=""
python3 - "$runs/env.json" "$cores" "$CPUS" "$THREADS" "$CONCURRENCY" "$TASKS" "$ROWS" "$LIMIT_MIB" "$WARMUP" "$REPS" "$version" "${workloads[@]}" <<'EOF'
import json, os, sys
out, cores, cpus, threads, concurrency, tasks, rows, limit, warmup, reps, version = sys.argv[1:12]
model = ""
try:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
except OSError:
    pass
json.dump({"cores": int(cores), "machine_cores": os.cpu_count(), "cpus": cpus, "cpu_model": model,
           "threads": int(threads), "concurrency": int(concurrency), "tasks": int(tasks), "rows": int(rows),
           "limit_mib": int(limit), "warmup": int(warmup), "reps_wanted": int(reps), "shuffled": version, "java_cmd": os.environ.get("JAVA", "java"),
           "workloads": sys.argv[12:]},
          open(out, "w"))
EOF

# into FILE COMMAND...: COMMAND's output into FILE once it has succeeded
# (a run stopped midway leaves no partial JSON in RUNS_DIR).
into() {
	"${@:2}" >"$1.part"
	mv "$1.part" "$1"
}

for pb in "${workloads[@]}"; do
	p=${pb%:*} b=${pb#*:}
	w="$work/p$p-b$b"
	mkdir -p "$w"
	say "partitions $p, batches per task $b: dump, identity"
	into "$runs/child-p$p-b$b.json" loadgen --partitions "$p" --batches-per-task "$b" \
		--daemon-bin "$bin/shuffled" --keep --root "$w/root" --dump-input "$w/in"
	for mode in memory file; do
		into "$runs/id-$mode-p$p-b$b.json" model --input "$w/in" --output "$w/jvm-$mode" --mode "$mode" --warmup 0
		compressor=$(field "$runs/id-$mode-p$p-b$b.json" compressor)
		if [ -n "$JVM_COMPRESSOR" ] && [ "$compressor" != "$JVM_COMPRESSOR" ]; then
			die "the model's lz4 compressor is $compressor, JVM_COMPRESSOR wants $JVM_COMPRESSOR"
		fi
		same=0
		for f in "$w"/root/*/*/shuffle_*; do
			name=$(basename "$f")
			cmp -s "$f" "$w/jvm-$mode/$name" || die "$name differs between shuffled and the $mode model"
			same=$((same + 1))
		done
		theirs=$(find "$w/jvm-$mode" -type f | wc -l)
		if [ "$same" -ne $((3 * TASKS)) ] || [ "$theirs" -ne "$same" ]; then
			die "$same identical files, want $((3 * TASKS)) on both sides ($theirs from the $mode model)"
		fi
		rm -rf "$w/jvm-$mode"
	done
	rm -rf "$w/root"
	echo "$same" >"$runs/identical-p$p-b$b"
	say "partitions $p, batches per task $b: $same files byte-identical (lz4: $compressor)"
done

ran=0
last=0
for r in $(seq 1 "$REPS"); do
	start=$(date +%s)
	if [ -n "$DEADLINE" ] && [ "$r" -gt 1 ] && [ $((start + last)) -gt "$DEADLINE" ]; then
		say "DEADLINE: repetition $r would end after it (the last took ${last} s); stopping after $ran"
		break
	fi
	for pb in "${workloads[@]}"; do
		p=${pb%:*} b=${pb#*:}
		w="$work/p$p-b$b"
		say "repetition $r of $REPS: partitions $p, batches per task $b"
		into "$runs/shuffled-p$p-b$b-r$r.json" loadgen --partitions "$p" --batches-per-task "$b" --seed 1
		for mode in memory file; do
			into "$runs/jvm-$mode-p$p-b$b-r$r.json" model --input "$w/in" --output "$w/jvm-rep" --mode "$mode" --warmup "$WARMUP"
			rm -rf "$w/jvm-rep"
		done
	done
	ran=$r
	last=$(($(date +%s) - start))
done
summarize "$runs"
