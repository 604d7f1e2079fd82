#!/usr/bin/env bash
# scripts/bench-jvm-node.sh DIR: shuffled against the spark-rapids V2
# writer model (scripts/bench-jvm-model.sh, found beside this script) on 2
# cores and on all of a node's cores, from what scripts/bench-carry-jvm.sh
# built into DIR, on a machine with no Go, no JDK and no Maven: it needs
# bash, coreutils, python3 (with lzma, to unpack DIR/jre.tar.xz) and taskset.
#
# The runtime: DIR/jre if it is there, else DIR/jre.tar.xz unpacked into a
# new directory under TMPDIR (/tmp), removed at the end; lz4-java extracts
# its native library into a directory beside it (java.io.tmpdir), and the
# model must report the JNI compressor (JVM_COMPRESSOR), or the run fails.
#
# For each entry N of CORES ("2 all"; all: every CPU this script may use)
# the model script runs on the first N of those CPUs (taskset) with
#   THREADS=N      the daemon's pool (SHUFFLED_POOL) and V2's writer threads
#                  alike. spark-rapids' default is a pool of 20 writer threads
#                  per executor (spark.rapids.shuffle.multiThreaded.writer.threads),
#                  and tuned setups often match it to the executor's cores; one
#                  compression thread per core is the most either side can
#                  use, so both get N;
#   CONCURRENCY=N  map tasks writing at once: an executor with N cores runs N
#                  tasks (spark.executor.cores=N, spark.task.cpus=1), each of
#                  which writes its shuffle output on the CPU once its batch
#                  has left the GPU;
#   TASKS=TASKS_PER_CORE x N (4 x N): every configuration runs the same
#                  number of waves, so 16 cores do 8 times the work of 2, and
#                  the 2-core run is the model script's default (8 tasks,
#                  concurrency 2);
#   LIMIT_MIB (128): the bytes in flight, one limit shared by all tasks on
#                  both sides, whatever the cores. spark-rapids' default
#                  (spark.rapids.shuffle.multiThreaded.maxBytesInFlight) is
#                  128 MiB per writer, that is per map task:
#                  LIMIT_PER_TASK_MIB=128 sets LIMIT_MIB to 128 x N instead,
#                  what an executor of N tasks may hold.
# The first N CPUs of a machine may be hyperthreads of fewer cores: the log
# says which CPUs share a core where /sys tells.
#
# Environment: CORES ("2 all"), REPS (3), TASKS_PER_CORE (4), ROWS (100000),
# LIMIT_MIB (128), LIMIT_PER_TASK_MIB (unset), WARMUP (1), PARTITIONS
# ("200 2000"), BATCHES ("1 4"),
# BUDGET_S (450: no repetition starts that would end later than that many
# seconds after the start, each configuration getting an equal share; each
# runs its byte-identity checks and at least one repetition, and is stopped
# GRACE_S (60) seconds past its share, its finished repetitions summarised),
# QUICK=1 (the byte-identity checks only, on a small workload: REPS=0
# TASKS_PER_CORE=1 ROWS=2000 PARTITIONS=16 BATCHES="1 3"), OUT (a directory:
# the tables go to OUT/bench-jvm-node.txt, the summary's JSON lines, one
# per configuration and workload, to OUT/bench-jvm-node.jsonl, and every
# run's JSON to OUT/runs-N-cores/).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
say() { printf 'bench-jvm-node: %s\n' "$*" >&2; }
die() {
	say "FAIL: $*"
	exit 1
}
[ $# -eq 1 ] || die "usage: bench-jvm-node.sh DIR (what scripts/bench-carry-jvm.sh built)"
dir=$(cd "$1" && pwd)
model=$here/bench-jvm-model.sh
[ -f "$model" ] || die "no bench-jvm-model.sh beside $0"

CORES=${CORES:-"2 all"} REPS=${REPS:-3} TASKS_PER_CORE=${TASKS_PER_CORE:-4} BUDGET_S=${BUDGET_S:-450}
GRACE_S=${GRACE_S:-60}
if [ "${QUICK:-0}" = 1 ]; then
	REPS=0 TASKS_PER_CORE=1 ROWS=2000 PARTITIONS=16 BATCHES="1 3"
fi
for v in REPS TASKS_PER_CORE BUDGET_S GRACE_S; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, got '${!v}'"
done
[ "$TASKS_PER_CORE" -ge 1 ] || die "TASKS_PER_CORE must be >= 1, got $TASKS_PER_CORE"
if [ -n "${LIMIT_PER_TASK_MIB:-}" ]; then
	[[ $LIMIT_PER_TASK_MIB =~ ^[1-9][0-9]*$ ]] || die "LIMIT_PER_TASK_MIB must be a positive integer, got '$LIMIT_PER_TASK_MIB'"
fi
export ROWS PARTITIONS BATCHES LIMIT_MIB WARMUP REPS

# The CPUs this script may use, in order.
read -r -a cpus <<<"$(python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)))')"
[ "${#cpus[@]}" -ge 1 ] || die "no CPUs in this process's affinity mask"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/shuffled-jvm-node-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if [ -x "$dir/jre/bin/java" ]; then
	java=$dir/jre/bin/java
elif [ -f "$dir/jre.tar.xz" ]; then
	say "unpacking $dir/jre.tar.xz into $tmp"
	python3 - "$dir/jre.tar.xz" "$tmp" <<'EOF'
import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as t:
    if hasattr(tarfile, "tar_filter"):
        t.extractall(sys.argv[2], filter="tar")
    else:
        t.extractall(sys.argv[2])
EOF
	java=$tmp/jre/bin/java
else
	die "$dir holds neither jre/ nor jre.tar.xz"
fi
"$java" -version 2>&1 | head -n 1 >&2 || die "$java does not start (its libraries: glibc, libstdc++, zlib?)"
mkdir -p "$tmp/java-tmp"
classpath=$(printf ':%s' "$dir"/lib/*.jar)
# The binaries travel as plain files: should a copy have lost their mode,
# run copies that have it.
bin=$dir/bin
if [ ! -x "$bin/shuffled" ] || [ ! -x "$bin/shuffled-loadgen" ]; then
	mkdir -p "$tmp/bin"
	cp "$bin/shuffled" "$bin/shuffled-loadgen" "$tmp/bin/"
	chmod +x "$tmp/bin/shuffled" "$tmp/bin/shuffled-loadgen"
	bin=$tmp/bin
fi
export BIN=$bin JAVA=$java JVM_CP=${classpath#:} JAVA_OPTS="-Djava.io.tmpdir=$tmp/java-tmp"
export JVM_COMPRESSOR=LZ4JNICompressor

txt=/dev/null
unset OUT_JSON
if [ -n "${OUT:-}" ]; then
	mkdir -p "$OUT"
	txt=$OUT/bench-jvm-node.txt
	export OUT_JSON=$OUT/bench-jvm-node.jsonl
	: >"$txt"
	: >"$OUT_JSON"
fi

for c in 0 1; do
	f=/sys/devices/system/cpu/cpu${cpus[$c]:-0}/topology/thread_siblings_list
	if [ -r "$f" ]; then
		say "CPU ${cpus[$c]:-0} shares a core with CPUs $(cat "$f")"
	fi
done
say "${#cpus[@]} CPUs: ${cpus[*]}; CORES=$CORES REPS=$REPS TASKS_PER_CORE=$TASKS_PER_CORE BUDGET_S=$BUDGET_S"

read -r -a configs <<<"$CORES"
start=$(date +%s)
i=0
for n in "${configs[@]}"; do
	[ "$n" = all ] && n=${#cpus[@]}
	[[ $n =~ ^[0-9]+$ && $n -ge 1 ]] || die "CORES holds '$n', want a positive integer or all"
	[ "$n" -le "${#cpus[@]}" ] || die "CORES holds $n, but this machine lets this script use ${#cpus[@]} CPUs"
	i=$((i + 1))
	# Each configuration may run until its equal share of the budget has
	# passed, the last one until the end of the budget.
	deadline=$((start + BUDGET_S * i / ${#configs[@]}))
	list=$(
		IFS=,
		echo "${cpus[*]:0:n}"
	)
	if [ -n "${LIMIT_PER_TASK_MIB:-}" ]; then
		LIMIT_MIB=$((LIMIT_PER_TASK_MIB * n))
	fi
	say "$n cores (CPUS=$list): THREADS=$n CONCURRENCY=$n TASKS=$((TASKS_PER_CORE * n)) LIMIT_MIB=${LIMIT_MIB:-128}, repetitions until $(date -u -d "@$deadline" +%T) UTC"
	# Every run's JSON is kept as it ends (RUNS_DIR): should the
	# configuration overrun its share by GRACE_S it is stopped, and what
	# finished is summarised.
	runs=${OUT:-$tmp}/runs-$n-cores
	rm -rf "$runs"
	limit=$((deadline + GRACE_S - $(date +%s)))
	[ "$limit" -ge 10 ] || limit=10
	set +e
	CPUS=$list THREADS=$n CONCURRENCY=$n TASKS=$((TASKS_PER_CORE * n)) DEADLINE=$deadline \
		RUNS_DIR=$runs TMPDIR=$tmp timeout -k 10 "$limit" bash "$model" | tee -a "$txt"
	rc=${PIPESTATUS[0]}
	set -e
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		say "$n cores: stopped ${GRACE_S} s past its share of BUDGET_S; the repetitions that finished:"
		bash "$model" --summarize "$runs" | tee -a "$txt"
	elif [ "$rc" -ne 0 ]; then
		die "$n cores: bench-jvm-model.sh failed (exit status $rc)"
	fi
	echo | tee -a "$txt"
done
say "done in $(($(date +%s) - start)) s"
