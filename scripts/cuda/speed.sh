#!/bin/sh
# Runs on the GPU machine over binaries that build.sh made elsewhere: the
# figures of the GPU path's speed (docs/benchmarks.md, "GPU").
#  1. the lz4 kernels alone (BenchmarkLZ4Compress: 1, 4, 8, 16 and 32
#     batches in flight); BENCH=0 skips it.
#  2. for each count in SLOTS (default "4 8 16"): a daemon with
#     --cuda-compress-slots COUNT and a CPU profile, REPS runs of
#     `shuffled-loadgen --gpu --concurrency C` (C from CONC, default 16)
#     against it, then its own totals (the "device batches" log line).
#     With MULTI=1, each of these daemons also gets the same run from two
#     load generator processes at half the concurrency each
#     (--processes 2).
#  3. the ceiling: a daemon with a CPU profile whose device batches are
#     copied to the host and written uncompressed (--codec none).
#  4. with CPUSCALE=1, the CPU path's node scale (no GPU): the default
#     workload with the load generator's embedded daemon on 2 cores
#     (taskset -c 0,1) and on all cores, and on all cores with 8 times
#     the map tasks in flight (executors that do not wait on their own
#     commits alone).
# Each run prints end-to-end MB/s, the daemon's CPU seconds per GB
# serialized (utime+stime from /proc) and the load generator's own CPU
# and waits. Results go to $OUT (default ./speed-out); read the profiles
# with `go tool pprof -top BINDIR/shuffled FILE` on a machine with Go.
#
# Usage: scripts/cuda/speed.sh [BINDIR]   (default bin/cuda; TASKS=600,
# REPS=3, T_RUN=60 per load generator run; DAEMON_FLAGS are added to
# every daemon's; CEILING=0 skips step 3). The profiles, logs and runs'
# JSON end up in $OUT/speed.tar.gz beside summary.txt.
set -u
cd "$(dirname "$0")/../.."
bin=$(cd "${1:-bin/cuda}" && pwd)
out=${OUT:-speed-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
tasks=${TASKS:-600}
reps=${REPS:-3}
conc=${CONC:-16}
tr=${T_RUN:-60}
work=$(mktemp -d)
sum=$out/summary.txt
pids=
trap 'for p in $pids; do kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT

{
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
	echo "cpus: $(nproc)"
	"$bin/shuffled" version
} >"$sum" 2>&1

if [ "${BENCH:-1}" != 0 ]; then
	(cd gpu && timeout 300 "$bin/gpu.test" -test.run '^$' -test.bench 'LZ4Compress/.*/kernel=global' -test.benchtime 200x) >"$out/bench.log" 2>&1
	echo "kernel benchmark: exit $?" >>"$sum"
	grep '^Benchmark' "$out/bench.log" | awk '{printf "%-70s %10s %s\n", $1, $5, $6 " " $7 " " $8}' >>"$sum"
fi

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
field() { sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p" "$work/r.json" | head -n 1; }

# daemon NAME FLAGS...: starts a daemon with a CPU profile and waits for
# its ready line; stop NAME drains it, which writes the profile.
daemon() {
	name=$1
	shift
	# shellcheck disable=SC2086
	"$bin/shuffled" serve --socket "$work/$name.sock" --root "$work/$name-root" --cpu-profile "$out/$name.prof" ${DAEMON_FLAGS:-} "$@" 2>"$out/$name.log" &
	eval "pid_$name=$!"
	pids="$pids $!"
	i=0
	until grep -q 'shuffled ready' "$out/$name.log" 2>/dev/null; do
		i=$((i + 1))
		if [ $i -gt 300 ]; then
			echo "daemon $name not ready" >>"$sum"
			return 1
		fi
		sleep 0.1
	done
}
stop() {
	eval "pid=\$pid_$1"
	kill -TERM "$pid"
	wait "$pid"
	grep 'device batches' "$out/$1.log" | tail -n 1 | sed 's/^.*msg="device batches"/  totals:/' >>"$sum"
	rm -rf "$work/$1-root"
}

# run LABEL NAME FLAGS...: one load generator run against daemon NAME.
run() {
	label=$1
	name=$2
	shift 2
	eval "pid=\$pid_$name"
	c0=$(ticks "$pid")
	echo "== $label: shuffled-loadgen --socket $name.sock --tasks $tasks $*" >>"$out/loadgen.log"
	timeout "$tr" "$bin/shuffled-loadgen" --socket "$work/$name.sock" --tasks "$tasks" --json "$@" >"$work/r.json" 2>>"$out/loadgen.log"
	rc=$?
	c1=$(ticks "$pid")
	cat "$work/r.json" >>"$out/runs.json"
	awk -v l="$label" -v rc="$rc" -v mbs="$(field throughput_mb_s)" -v ratio="$(field compression_ratio)" \
		-v ser="$(field serialized_bytes)" -v el="$(field elapsed_s)" -v lc="$(field loadgen_cpu_s)" \
		-v ww="$(field wait_write_s)" -v wc="$(field wait_commit_s)" \
		-v c="$((c1 - c0))" -v hz="$(getconf CLK_TCK)" 'BEGIN {
		cpu = c / hz
		printf "%-14s exit %s  %8.1f MB/s  %5.2f s  ratio %.3f  %.3f GB  daemon CPU %.2f s = %.3f s/GB  loadgen CPU %.2f s  waits write %.1f commit %.1f s\n",
			l, rc, mbs, el, ratio, ser / 1e9, cpu, (ser > 0 ? cpu / (ser / 1e9) : 0), lc, ww, wc
	}' >>"$sum"
}

for s in ${SLOTS:-4 8 16}; do
	daemon "slots$s" --cuda-compress-slots "$s" || continue
	run "warm" "slots$s" --gpu --concurrency "$conc" --tasks 64
	for r in $(seq "$reps"); do
		run "slots$s-$r" "slots$s" --gpu --concurrency "$conc"
	done
	if [ "${MULTI:-0}" = 1 ]; then
		run "slots$s-2proc" "slots$s" --gpu --concurrency $((conc / 2)) --processes 2
	fi
	stop "slots$s"
done
if [ "${CEILING:-1}" != 0 ] && daemon ceiling; then
	run "warm" ceiling --gpu --concurrency "$conc" --codec none --tasks 64
	for r in $(seq "$reps"); do
		run "ceiling-$r" ceiling --gpu --concurrency "$conc" --codec none
	done
	stop ceiling
fi
if [ "${CPUSCALE:-0}" = 1 ]; then
	cpurun() {
		label=$1
		shift
		"$@" --json >"$work/r.json" 2>>"$out/loadgen.log"
		rc=$?
		cat "$work/r.json" >>"$out/runs.json"
		echo "$label exit $rc MB/s $(field throughput_mb_s) daemon_cpu_s $(field daemon_cpu_s) loadgen_cpu_s $(field loadgen_cpu_s) elapsed_s $(field elapsed_s) wait_commit_s $(field wait_commit_s)" >>"$sum"
	}
	for r in $(seq "$reps"); do
		cpurun "cpu-2cores-$r" taskset -c 0,1 "$bin/shuffled-loadgen"
		cpurun "cpu-allcores-$r" "$bin/shuffled-loadgen"
		cpurun "cpu-allcores-x8-$r" "$bin/shuffled-loadgen" --concurrency 32 # the default is 4
	done
fi
(cd "$out" && tar -czf speed.tar.gz --remove-files -- *.prof *.log runs.json 2>/dev/null)
cat "$sum"
