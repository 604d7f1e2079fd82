#!/bin/sh
# Runs on the GPU machine: the JVM device path (jvm/client's DeviceProof,
# CUDA IPC from Java through the FFM driver binding) against one cuda
# daemon with GPU compression on (its default), beside shuffled-loadgen
# --gpu on the same workload and concurrency. Needs what jvm-device-carry.sh
# put in CARRY: cuda/shuffled, cuda/shuffled-loadgen, jre.tar.xz and
# lib/*.jar; no Go and no JDK.
#  1. verify: VTASKS map tasks in SHFC and in kudo, each output read back
#     with `shuffled cat --rows json` and compared with the same batches
#     written from host memory; then as many of nested batches (array,
#     struct, map, nulls at every level) from device memory, compared the
#     same way (nested_verified_outputs);
#  2. REPS rounds, alternating, each of loadgen --gpu and DeviceProof in
#     SHFC and kudo (TASKS tasks, CONC at a time, 200 partitions, 2
#     batches of 100000 lineitem rows a task, the last marked), the
#     daemon's CPU time (utime+stime of /proc/PID/stat) taken around each
#     run. As loadgen, DeviceProof connects and registers its CONC
#     executors before its clock starts; each also writes one warm-up
#     task there first (WARMUP=N a worker; 0 for none).
# Output: lines "RESULT label json cpu_s" on stdout, logs under $OUT.
#
# Usage: scripts/cuda/jvm-device.sh [CARRY]   (default bin/carry)
set -u
cd "$(dirname "$0")/../.."
carry=$(cd "${1:-bin/carry}" && pwd)
out=${OUT:-jvm-device-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
tasks=${TASKS:-300}
vtasks=${VTASKS:-8}
conc=${CONC:-4}
reps=${REPS:-3}
warmup=${WARMUP:-1}
work=$(mktemp -d)
daemon=
trap '[ -n "$daemon" ] && kill "$daemon" 2>/dev/null; rm -rf "$work"' EXIT

mkdir -p "$work/jre"
xz -dc "$carry/jre.tar.xz" | tar -x -C "$work/jre"
java=$(find "$work/jre" -path '*/bin/java' | head -1)
cp=$(printf ':%s' "$carry"/lib/*.jar)
cp=${cp#:}
{
	nvidia-smi --query-gpu=name,driver_version --format=csv
	echo "cpus: $(nproc)"
	"$carry/cuda/shuffled" version
	"$java" -version
} >"$out/env.log" 2>&1

"$carry/cuda/shuffled" serve --socket "$work/s.sock" --root "$work/root" 2>"$out/daemon.log" &
daemon=$!
i=0
until grep -q 'shuffled ready' "$out/daemon.log" 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 300 ] || ! kill -0 "$daemon" 2>/dev/null; then
		echo "daemon not ready" >&2
		exit 1
	fi
	sleep 0.1
done
n=0
tck=$(getconf CLK_TCK)
cpu() { awk -v t="$tck" '{printf "%.3f", ($14 + $15) / t}' "/proc/$daemon/stat"; }
jvm() { # format tasks verify|run
	n=$((n + 1))
	"$java" --enable-native-access=ALL-UNNAMED -Dproof.app="jvm-device-$n" -Dproof.warmup="$warmup" -cp "$cp" dev.shuffled.client.DeviceProof \
		"$work/s.sock" "$work/root" "$carry/cuda/shuffled" "$1" "$2" "$conc" 200 100000 2 8 "$3"
}
measure() { # label command...
	label=$1
	shift
	c0=$(cpu)
	"$@" >"$out/$label.json" 2>>"$out/run.log"
	rc=$?
	c1=$(cpu)
	echo "RESULT $label exit=$rc daemon_cpu_s=$(awk -v a="$c0" -v b="$c1" 'BEGIN{printf "%.3f", b - a}')"
	tr -d ' \n' <"$out/$label.json" | head -c 1500
	echo
	rm -rf "$work/root/jvm-device-"* 2>/dev/null
}
measure verify-shfc jvm shfc "$vtasks" verify
measure verify-kudo jvm kudo "$vtasks" verify
for r in $(seq "$reps"); do
	measure "go-shfc-$r" "$carry/cuda/shuffled-loadgen" --socket "$work/s.sock" --gpu --tasks "$tasks" --concurrency "$conc" --json
	measure "jvm-shfc-$r" jvm shfc "$tasks" run
	measure "go-kudo-$r" "$carry/cuda/shuffled-loadgen" --socket "$work/s.sock" --gpu --payload kudo --tasks "$tasks" --concurrency "$conc" --json
	measure "jvm-kudo-$r" jvm kudo "$tasks" run
done
kill -TERM "$daemon"
wait "$daemon"
daemon=
