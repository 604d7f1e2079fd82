#!/bin/sh
# Runs on the GPU machine over binaries that build.sh made elsewhere:
#  1. the cuda tests of server and loadgen (TESTS=0 skips them);
#  2. the load generator end to end against one cuda daemon: batches
#     partitioned on the GPU and handed over by CUDA IPC (--gpu), then the
#     same workload over sealed memfds, each verified once, then each once
#     more unverified;
#  3. what priming the staging pool costs and buys: REPS fresh child
#     daemons with and without SHUFFLED_CUDA_STAGING_PRIME, alternating,
#     each timed from exec to READY and on its first batch.
# Reports (JSON, one after the other) and logs go to $OUT (default
# ./loadgen-out): env.log, server-test.log, loadgen-test.log, e2e.json,
# e2e.log, prime.json, prime.log.
#
# Usage: scripts/cuda/loadgen.sh [BINDIR]   (default bin/cuda; TASKS=300, REPS=5)
set -u
cd "$(dirname "$0")/../.."
bin=$(cd "${1:-bin/cuda}" && pwd)
out=${OUT:-loadgen-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
tasks=${TASKS:-300}
reps=${REPS:-5}
work=$(mktemp -d)
daemon=
trap '[ -n "$daemon" ] && kill "$daemon" 2>/dev/null; rm -rf "$work"' EXIT

{
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
	echo "cpus: $(nproc)"
	"$bin/shuffled" version
} >"$out/env.log" 2>&1

if [ "${TESTS:-1}" != 0 ]; then
	for pkg in server loadgen; do
		if [ -x "$bin/$pkg.test" ]; then
			(cd "$pkg" && timeout 240 "$bin/$pkg.test" -test.v -test.count=1 -test.timeout=4m) >"$out/$pkg-test.log" 2>&1
			echo "$pkg tests: exit $?" >>"$out/env.log"
		fi
	done
fi

# One daemon for both data planes; wait for its "shuffled ready" line.
"$bin/shuffled" serve --socket "$work/s.sock" --root "$work/root" 2>"$work/daemon.log" &
daemon=$!
i=0
until grep -q 'shuffled ready' "$work/daemon.log" 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 300 ] || ! kill -0 "$daemon" 2>/dev/null; then
		echo "daemon not ready" >>"$out/env.log"
		break
	fi
	sleep 0.1
done
run() { # label, loadgen flags...
	label=$1
	shift
	echo "== $label: shuffled-loadgen $*" >>"$out/e2e.log"
	"$bin/shuffled-loadgen" --socket "$work/s.sock" --tasks "$tasks" --json "$@" >>"$out/e2e.json" 2>>"$out/e2e.log"
	echo "$label: exit $?" >>"$out/env.log"
}
run gpu-verify --gpu --verify
run memfd-verify --data-plane memfd --verify
run gpu --gpu
run memfd --data-plane memfd
kill -TERM "$daemon"
wait "$daemon"
echo "daemon: exit $?" >>"$out/env.log"
daemon=
cat "$work/daemon.log" >>"$out/e2e.log"

# Priming: a fresh child daemon per run, one map task of one batch.
for r in $(seq "$reps"); do
	for prime in false true; do
		echo "== rep $r prime $prime" >>"$out/prime.log"
		SHUFFLED_CUDA_STAGING_PRIME=$prime "$bin/shuffled-loadgen" --gpu --daemon-bin "$bin/shuffled" \
			--tasks 1 --concurrency 1 --batches-per-task 1 --pool-batches 1 --json >>"$out/prime.json" 2>>"$out/prime.log"
		echo "prime $prime rep $r: exit $?" >>"$out/env.log"
	done
done
cat "$out/env.log"
