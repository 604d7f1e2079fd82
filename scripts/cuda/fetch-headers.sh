#!/bin/sh
# Fetches the two files a cuda build links against, CUDA 11.8's cuda.h and
# the libcuda.so link stub, from Debian bookworm's nvidia-cuda-dev package
# (component non-free), without installing the toolkit: the package is
# downloaded with a private apt configuration and unpacked into a scratch
# directory. The binary built against them binds the driver's libcuda.so.1
# at run time.
#
# Usage: scripts/cuda/fetch-headers.sh DIR
# Leaves DIR/include/cuda.h and DIR/lib/libcuda.so; does nothing when both
# are already there.
set -eu

dir=${1:?usage: fetch-headers.sh DIR}
if [ -f "$dir/include/cuda.h" ] && [ -f "$dir/lib/libcuda.so" ]; then
	exit 0
fi
mkdir -p "$dir/include" "$dir/lib"
dir=$(cd "$dir" && pwd)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/etc/sources.list.d" "$work/etc/preferences.d" "$work/lists/partial" \
	"$work/cache/archives/partial" "$work/deb" "$work/root"
cat >"$work/etc/sources.list" <<SOURCES
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm non-free
SOURCES
apt_opts="-o Dir::Etc=$work/etc -o Dir::Etc::sourcelist=$work/etc/sources.list \
	-o Dir::Etc::sourceparts=$work/etc/sources.list.d -o Dir::Etc::preferencesparts=$work/etc/preferences.d \
	-o Dir::State::Lists=$work/lists -o Dir::Cache=$work/cache \
	-o APT::Architecture=amd64 -o APT::Architectures=amd64 -o Debug::NoLocking=1"

# shellcheck disable=SC2086
apt-get $apt_opts -qq update
# shellcheck disable=SC2086
(cd "$work/deb" && apt-get $apt_opts -qq download nvidia-cuda-dev)
dpkg-deb -x "$work"/deb/nvidia-cuda-dev_*.deb "$work/root"

hdr=$(find "$work/root" -name cuda.h -path '*include*' | head -n 1)
stub=$(find "$work/root" -name libcuda.so -path '*stubs*' | head -n 1)
if [ -z "$hdr" ] || [ -z "$stub" ]; then
	echo "fetch-headers: cuda.h or the libcuda.so stub is missing from nvidia-cuda-dev" >&2
	exit 1
fi
cp "$hdr" "$dir/include/cuda.h"
cp "$stub" "$dir/lib/libcuda.so"
echo "fetch-headers: $dir/include/cuda.h, $dir/lib/libcuda.so"
