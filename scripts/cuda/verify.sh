#!/bin/sh
# Runs on the GPU machine over binaries that build.sh made elsewhere:
# regenerates the partition and lz4 kernels' PTX with nvcc when the
# toolkit is there, runs the cuda tests of gpu and server, then the benchmarks
# (staged vs plain device-to-host copies, GPU vs CPU partitioning, pool
# priming, CUDA IPC vs memfd data planes). Logs go to $OUT (default
# ./verify-out).
#
# Usage: scripts/cuda/verify.sh [BINDIR]   (default bin/cuda)
set -u
cd "$(dirname "$0")/../.."
bin=$(cd "${1:-bin/cuda}" && pwd)
out=${OUT:-verify-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)

{
	nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv
	nproc
	command -v nvcc && nvcc --version | tail -n 2
	"$bin/shuffled" version
} >"$out/env.log" 2>&1

# The binaries carry gpu/kernels/partition.ptx and lz4.ptx; a PTX
# regenerated here that differs from its committed one is what the tests
# load instead (and comes back in $OUT to be committed).
if command -v nvcc >/dev/null 2>&1; then
	for k in partition lz4; do
		if (cd gpu/kernels && nvcc -ptx -arch=compute_75 -O3 -o "$out/$k.ptx" "$k.cu") >>"$out/env.log" 2>&1; then
			if cmp -s "$out/$k.ptx" "gpu/kernels/$k.ptx"; then
				echo "$k.ptx is up to date" >>"$out/env.log"
				rm "$out/$k.ptx"
			else
				echo "$k.ptx is stale: testing the regenerated one" >>"$out/env.log"
				if [ $k = partition ]; then
					export SHUFFLED_PARTITION_PTX="$out/$k.ptx"
				else
					export SHUFFLED_LZ4_PTX="$out/$k.ptx"
				fi
			fi
		fi
	done
fi

(cd gpu && "$bin/gpu.test" -test.v -test.count=1 -test.timeout=5m) >"$out/gpu-test.log" 2>&1
echo "gpu tests: exit $?" >>"$out/env.log"
(cd server && "$bin/server.test" -test.v -test.count=1 -test.timeout=5m) >"$out/server-test.log" 2>&1
echo "server tests: exit $?" >>"$out/env.log"

(cd gpu && "$bin/gpu.test" -test.run='^$' -test.bench=. -test.benchtime=1s -test.timeout=8m) >"$out/bench.log" 2>&1
echo "gpu benchmarks: exit $?" >>"$out/env.log"
(cd server && "$bin/server.test" -test.run='^$' -test.bench=DataPlane -test.benchtime=10x -test.timeout=8m) >>"$out/bench.log" 2>&1
echo "server benchmarks: exit $?" >>"$out/env.log"
cat "$out/env.log"
