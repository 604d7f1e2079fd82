#!/bin/sh
# Builds into DIR (default bin/carry) what scripts/cuda/jvm-device.sh needs
# on a GPU machine that has no Go and no JDK:
#   DIR/cuda/shuffled, DIR/cuda/shuffled-loadgen  the cuda build (build.sh)
#   DIR/lib/shuffled-client-*.jar                 the multi-release client jar
#   DIR/lib/proof.jar                             its test class DeviceProof
#   DIR/jre.tar.xz                                a jlinked runtime (java.base,
#                                                 jdk.unsupported), xz-compressed
# JAVA_HOME must be a JDK 22 or later (it compiles the FFM classes and links
# the runtime); jlink links from the JDK's own image when it has no jmods.
# About 35 MB in all.
#
# Usage: scripts/cuda/jvm-device-carry.sh [DIR]
set -eu
cd "$(dirname "$0")/../.."
dir=${1:-bin/carry}
: "${JAVA_HOME:?set JAVA_HOME to a JDK 22 or later}"
mkdir -p "$dir/lib"
dir=$(cd "$dir" && pwd)
CUDA_TESTS=" " scripts/cuda/build.sh "$dir/cuda"
mvn -f jvm/pom.xml -B -q -pl client package -DskipTests
rm -f "$dir"/lib/*.jar
cp jvm/client/target/shuffled-client-*[0-9T].jar "$dir/lib/"
(cd jvm/client/target/test-classes && "$JAVA_HOME/bin/jar" cf "$dir/lib/proof.jar" dev/shuffled/client/DeviceProof*.class)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$JAVA_HOME/bin/jlink" --add-modules java.base,jdk.unsupported --strip-debug --no-man-pages \
	--no-header-files --output "$work/jre"
tar -C "$work" -cf - jre | xz -6 >"$dir/jre.tar.xz"
du -sh "$dir"
