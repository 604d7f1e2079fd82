#!/bin/sh
# Builds the cuda flavour of shuffled and its GPU test binaries with cgo
# against CUDA 11.8's cuda.h and libcuda.so link stub (fetched once by
# fetch-headers.sh into bin/cuda-sdk). The programs bind the driver's
# libcuda.so.1 at run time, so they run on any machine with an NVIDIA
# driver of CUDA 11.8 or later, and only there: gorgonia.org/cu exits the
# process at start when no driver is present.
#
# Usage: scripts/cuda/build.sh [OUTDIR]   (default bin/cuda)
# CUDA_TESTS names the packages whose cuda test binaries it builds
# (default: gpu server loadgen).
set -eu

cd "$(dirname "$0")/../.."
out=${1:-bin/cuda}
CUDA_SDK=${CUDA_SDK:-$(pwd)/bin/cuda-sdk}
scripts/cuda/fetch-headers.sh "$CUDA_SDK"
. scripts/cuda/env.sh

mkdir -p "$out"
# -s -w: no symbol table or DWARF (stack traces keep their function
# names), so that the binaries travel to the GPU machine in less room.
ldflags="-s -w"
go build -tags cuda -ldflags="$ldflags" -o "$out/shuffled" ./cmd/shuffled
go build -tags cuda -ldflags="$ldflags" -o "$out/shuffled-loadgen" ./cmd/shuffled-loadgen
for pkg in ${CUDA_TESTS:-gpu server loadgen}; do
	go test -c -tags cuda -ldflags="$ldflags" -o "$out/$pkg.test" "./$pkg/"
done
echo "built: $(ls "$out" | tr '\n' ' ')"
