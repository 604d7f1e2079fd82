#!/bin/sh
# Runs on the GPU machine over binaries that build.sh made elsewhere: the
# tests and the benchmark of GPU compression (the daemon's default; off
# with --no-cuda-compress).
#  1. the lz4 kernels' device tests (output == gpu/lz4ref's, byte for
#     byte, for the load generator's schemas and random data) and their
#     benchmark (raw GB/s of the kernels alone); at the end, the cuda
#     tests of server (TestCUDACompress, TestCUDAIPCRoundTrip) and loadgen
#     (TestRunGPU*). TESTS=0 skips them.
#  2. two daemons side by side, one compressing on its CPU pool, one on
#     the GPU (CPU_DAEMON and GPU_DAEMON are their flags); a verified --gpu
#     run against each (the GPU one with --keep: one kept map output is
#     read back with `shuffled cat` and packed into kept.tar) and a
#     verified --payload kudo run against the GPU one, then REPS
#     unverified runs each, alternating; then both at --concurrency 8,
#     the GPU daemon at 16 and with --checksum none (what the checksums
#     cost), and the ceiling: the CPU pool daemon with --codec none (the
#     writer and disk, nothing compressed) at concurrency 4, 8 and 16.
#     Each run: end-to-end MB/s,
#     compression ratio, the daemon's CPU seconds (utime+stime from /proc)
#     per GB serialized, and the bytes it copied device to host (from its
#     "device batches" log); at the end, the GPU daemon's totals (its
#     steps' summed times).
# Results go to $OUT (default ./compress-out): summary.txt, logs.tar.gz,
# kept.tar.
#
# Usage: scripts/cuda/compress.sh [BINDIR]   (default bin/cuda; TASKS=300, REPS=2)
# Each step has a timeout; T_TESTS (default 90) and T_RUN (default 60)
# are the tests' and each load generator run's.
# LOADGEN_FLAGS (default --gpu) is what every run adds to the load
# generator's flags, CPU_COMPRESS (default --cpu-compress) what the runs
# against the CPU pool daemon add.
set -u
cd "$(dirname "$0")/../.."
bin=$(cd "${1:-bin/cuda}" && pwd)
out=${OUT:-compress-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
tasks=${TASKS:-300}
reps=${REPS:-2}
lgflags=${LOADGEN_FLAGS---gpu}
cc=${CPU_COMPRESS---cpu-compress}
cpud=${CPU_DAEMON---no-cuda-compress}
gpud=${GPU_DAEMON-}
tt=${T_TESTS:-90}
tr=${T_RUN:-60}
work=$(mktemp -d)
logs=$work/logs
mkdir -p "$logs" "$work/keep"
sum=$out/summary.txt
pids=
trap 'for p in $pids; do kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT

{
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
	echo "cpus: $(nproc)"
	"$bin/shuffled" version
} >"$sum" 2>&1

if [ "${TESTS:-1}" != 0 ]; then
	(cd gpu && SHUFFLED_LZ4_KEEP="$work/keep" timeout "$tt" "$bin/gpu.test" -test.run LZ4 -test.v -test.count=1) >"$logs/gpu-test.log" 2>&1
	echo "gpu lz4 tests: exit $?" >>"$sum"
	(cd gpu && timeout "$tt" "$bin/gpu.test" -test.run '^$' -test.bench LZ4 -test.benchtime 10x) >"$logs/bench.log" 2>&1
	echo "gpu lz4 benchmark: exit $?" >>"$sum"
	grep '^Benchmark' "$logs/bench.log" >>"$sum"
fi

# daemon NAME FLAGS...: starts a daemon and waits for its ready line.
daemon() {
	name=$1
	shift
	"$bin/shuffled" serve --socket "$work/$name.sock" --root "$work/$name-root" "$@" 2>"$logs/$name.log" &
	eval "pid_$name=$!"
	pids="$pids $!"
	i=0
	until grep -q 'shuffled ready' "$logs/$name.log" 2>/dev/null; do
		i=$((i + 1))
		if [ $i -gt 300 ]; then
			echo "daemon $name not ready" >>"$sum"
			return 1
		fi
		sleep 0.1
	done
}
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
d2h() { grep 'device batches' "$logs/$1.log" | tail -n 1 | sed -n 's/.*d2h_bytes=\([0-9]*\).*/\1/p'; }
field() { sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p" "$work/r.json" | head -n 1; }

# run LABEL NAME FLAGS...: one load generator run against daemon NAME.
run() {
	label=$1
	name=$2
	shift 2
	eval "pid=\$pid_$name"
	c0=$(ticks "$pid")
	b0=$(d2h "$name")
	echo "== $label: shuffled-loadgen --socket $name.sock --tasks $tasks $lgflags $*" >>"$logs/loadgen.log"
	# shellcheck disable=SC2086
	timeout "$tr" "$bin/shuffled-loadgen" --socket "$work/$name.sock" --tasks "$tasks" --json $lgflags "$@" >"$work/r.json" 2>>"$logs/loadgen.log"
	rc=$?
	sleep 1 # the daemon logs its totals as the sessions end
	c1=$(ticks "$pid")
	b1=$(d2h "$name")
	cat "$work/r.json" >>"$logs/runs.json"
	awk -v l="$label" -v rc="$rc" -v mbs="$(field throughput_mb_s)" -v ratio="$(field compression_ratio)" \
		-v ser="$(field serialized_bytes)" -v outb="$(field output_bytes)" -v el="$(field elapsed_s)" \
		-v c="$((c1 - c0))" -v hz="$(getconf CLK_TCK)" -v d="$((${b1:-0} - ${b0:-0}))" 'BEGIN {
		cpu = c / hz
		printf "%-12s exit %s  %8.1f MB/s  %6.2f s  ratio %.3f  serialized %.3f GB  output %.3f GB  daemon CPU %.2f s = %.3f s/GB  d2h %.3f GB\n",
			l, rc, mbs, el, ratio, ser / 1e9, outb / 1e9, cpu, (ser > 0 ? cpu / (ser / 1e9) : 0), d / 1e9
	}' >>"$sum"
}

# shellcheck disable=SC2086
daemon cpu $cpud && daemon gpu $gpud
run cpu-verify cpu $cc --verify
run gpu-verify gpu --verify --keep
run gpu-kudo gpu --payload kudo --verify
kept=$(find "$work/gpu-root" -name '*.data' | sort | head -n 1)
if [ -n "$kept" ]; then
	timeout 60 "$bin/shuffled" cat "$kept" >"$logs/cat.txt" 2>&1
	echo "shuffled cat $(basename "$kept"): exit $? ($(tail -n 1 "$logs/cat.txt"))" >>"$sum"
	base=${kept%.data}
	tar -cf "$out/kept.tar" -C "$(dirname "$kept")" $(cd "$(dirname "$kept")" && ls "$(basename "$base")".*)
fi
for r in $(seq "$reps"); do
	run "cpu-$r" cpu $cc
	run "gpu-$r" gpu
done
run cpu-c8 cpu $cc --concurrency 8
run gpu-c8 gpu --concurrency 8
run gpu-c16 gpu --concurrency 16
run gpu-nosum gpu --checksum none
run ceiling cpu --codec none
run ceiling-c8 cpu --codec none --concurrency 8
run ceiling-c16 cpu --codec none --concurrency 16
grep 'device batches' "$logs/gpu.log" | tail -n 1 >>"$sum"
for p in $pids; do kill -TERM "$p"; done
wait
pids=
if [ "${TESTS:-1}" != 0 ]; then
	(cd server && SHUFFLED_LZ4_KEEP="$work/keep" timeout "$tt" "$bin/server.test" -test.run 'CUDACompress|CUDAIPCRoundTrip' -test.v -test.count=1) >"$logs/server-test.log" 2>&1
	echo "server tests: exit $?" >>"$sum"
	(cd loadgen && timeout "$tt" "$bin/loadgen.test" -test.run 'RunGPU' -test.v -test.count=1) >"$logs/loadgen-test.log" 2>&1
	echo "loadgen tests: exit $?" >>"$sum"
fi
tar -czf "$out/logs.tar.gz" -C "$work" logs keep
cat "$sum"
