#!/usr/bin/env bash
# scripts/bench-carry-jvm.sh DIR: everything scripts/bench-jvm-node.sh needs
# to run the JVM writer model comparison (scripts/bench-jvm-model.sh) on a
# machine with no Go, no JDK and no Maven (bash, coreutils, python3 and
# taskset are enough there), built into DIR:
#
#   DIR/bin/shuffled, DIR/bin/shuffled-loadgen   static (CGO_ENABLED=0), stripped
#   DIR/lib/*.jar                                the model's jar and lz4-java's
#   DIR/jre.tar.xz                               a jlinked Java runtime holding only the
#                                                modules jdeps finds in those jars
#   DIR/scripts/bench-jvm-model.sh, bench-jvm-node.sh
#
# The runtime comes from the JDK at JAVA_HOME, else the one of `java` on
# PATH; it must have jmods (jlink) and be release 17 or later. Its modules
# are stored uncompressed (--compress=0): xz compresses them to about two
# thirds of what jlink's zip compression would leave (xz cannot compress a
# zipped image further). The JRE needs the C library (glibc 2.34 for a
# Debian 12 JDK), libstdc++ and zlib where it runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
say() { printf 'bench-carry-jvm: %s\n' "$*" >&2; }
die() {
	say "FAIL: $*"
	exit 1
}
[ $# -eq 1 ] || die "usage: scripts/bench-carry-jvm.sh DIR"
mkdir -p "$1"
dir=$(cd "$1" && pwd)

if [ -n "${JAVA_HOME:-}" ]; then
	jdk=$JAVA_HOME
else
	java=$(command -v java) || die "no JAVA_HOME and no java on PATH"
	jdk=$(dirname "$(dirname "$(readlink -f "$java")")")
fi
for t in jlink jdeps; do
	[ -x "$jdk/bin/$t" ] || die "$jdk (JAVA_HOME or java's JDK) has no bin/$t"
done
[ -d "$jdk/jmods" ] || die "$jdk has no jmods: jlink needs them"

say "building shuffled and shuffled-loadgen"
rm -rf "${dir:?}/bin" "${dir:?}/lib" "${dir:?}/scripts" "${dir:?}/jre.tar.xz"
mkdir -p "$dir/bin" "$dir/lib" "$dir/scripts"
(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$dir/bin/" ./cmd/shuffled ./cmd/shuffled-loadgen)

say "building jvm/bench"
mvn -f "$root/jvm/bench/pom.xml" -B -q package -DskipTests >&2
cp "$root"/jvm/bench/target/shuffled-jvm-bench-*.jar "$root"/jvm/bench/target/lib/*.jar "$dir/lib/"
cp "$root/scripts/bench-jvm-model.sh" "$root/scripts/bench-jvm-node.sh" "$dir/scripts/"

jars=$(printf ':%s' "$dir"/lib/*.jar)
jars=${jars#:}
modules=$("$jdk/bin/jdeps" --multi-release 17 --ignore-missing-deps --print-module-deps --class-path "$jars" "$dir"/lib/*.jar)
# jdk.management (com.sun.management's process CPU time) and
# jdk.unsupported (sun.misc.Unsafe, lz4-java's and xxHash's fast paths)
# are what jdeps finds; name them anyway, so that the runtime has them
# should jdeps stop seeing a reflective use.
modules=$(printf '%s\n' "$modules" jdk.management jdk.unsupported | tr ',' '\n' | sort -u | paste -sd, -)
say "jlink: modules $modules"
jre=$(mktemp -d "${TMPDIR:-/tmp}/shuffled-carry-jre-XXXXXX")
trap 'rm -rf "$jre"' EXIT
"$jdk/bin/jlink" --add-modules "$modules" --strip-debug --no-man-pages --no-header-files \
	--compress=0 --output "$jre/jre"
"$jre/jre/bin/java" --list-modules >&2 || die "the jlinked runtime does not start"
tar -C "$jre" -cf - jre | xz -9 -T0 >"$dir/jre.tar.xz"

say "contents of $dir:"
(cd "$dir" && find . -type f -printf '%s\t%p\n' | sort -k2 | awk -F'\t' '{printf "  %10d  %s\n", $1, $2}' >&2)
total=$(du -sb "$dir" | cut -f1)
say "total $total bytes ($(awk -v b="$total" 'BEGIN{printf "%.1f", b / 1048576}') MiB)"
