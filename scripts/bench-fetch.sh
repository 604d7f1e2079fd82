#!/usr/bin/env bash
# scripts/bench-fetch.sh: reduce-side fetch with Spark's own client
# (ExternalBlockStoreClient) from Spark's external shuffle service handler
# (ExternalBlockHandler in a TransportServer, its own JVM), from an executor's
# own block server (NettyBlockRpcServer in a TransportServer, its own JVM, over
# the same files; EXECUTOR=0 leaves it out) and, when DAEMON is set, from a
# shuffled daemon's block server (--serve-addr): MB/s and the server process's
# CPU seconds per GB, per round and the median of ROUNDS.
#
# The Spark side serves a layout this script writes (shuffle 0 of one
# executor: MAPS map outputs of REDUCES blocks of BLOCK_BYTES random bytes).
# DAEMON=auto builds shuffled and scripts/bench-fetch/populate, starts a
# daemon (--serve-addr on loopback, its root in a temporary directory) and
# has populate commit the same shape through the socket for APP, executor 0,
# with SECRET. Otherwise DAEMON=host:port names a running daemon that already
# holds shuffle 0 of APP, executor EXEC, MAPS map outputs (ids 0..MAPS-1) of
# REDUCES partitions, and DAEMON_PID is its process id, whose CPU is measured.
#
# Environment: SPARK_JARS (a pyspark jars directory; default
# bin/spark/pyspark-4.3.0/pyspark/jars under the repository root), MAPS (16),
# REDUCES (200), BLOCK_BYTES (65536), ROUNDS (5), BATCH (0; 1 asks one batch
# block per map, as Spark's batch fetch does), SECRET (spark.authenticate with
# this secret on both servers' sides; empty: off), CRYPTO (false;
# spark.network.crypto.enabled), VERSION (1), CIPHER (AES/CTR/NoPadding),
# SASL_ENCRYPTION (false), EXECUTOR (1), DAEMON (host:port), DAEMON_PID, APP (app-bench),
# EXEC (0), JAVA (java), JAVAC (javac), BIN (a directory with prebuilt
# shuffled and populate binaries for DAEMON=auto, on a machine without Go).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
SPARK_JARS=${SPARK_JARS:-$root/bin/spark/pyspark-4.3.0/pyspark/jars}
MAPS=${MAPS:-16} REDUCES=${REDUCES:-200} BLOCK_BYTES=${BLOCK_BYTES:-65536} ROUNDS=${ROUNDS:-5}
BATCH=${BATCH:-0} SECRET=${SECRET:-} CRYPTO=${CRYPTO:-false} VERSION=${VERSION:-1}
CIPHER=${CIPHER:-AES/CTR/NoPadding} SASL_ENCRYPTION=${SASL_ENCRYPTION:-false}
EXECUTOR=${EXECUTOR:-1} DAEMON=${DAEMON:-} DAEMON_PID=${DAEMON_PID:-} APP=${APP:-app-bench} EXEC=${EXEC:-0}
JAVA=${JAVA:-java} JAVAC=${JAVAC:-javac}

[ -d "$SPARK_JARS" ] || { echo "bench-fetch: SPARK_JARS $SPARK_JARS is not a directory" >&2; exit 1; }
if [ -n "$DAEMON" ] && [ "$DAEMON" != auto ] && [ -z "$DAEMON_PID" ]; then
	echo "bench-fetch: DAEMON needs DAEMON_PID (the daemon's process, whose CPU is measured)" >&2
	exit 1
fi

tmp=$(mktemp -d)
spid=
dpid=
cleanup() {
	exec 3>&- 2>/dev/null || true
	if [ -n "$spid" ]; then wait "$spid" 2>/dev/null || true; fi
	if [ -n "$dpid" ]; then
		kill -TERM "$dpid" 2>/dev/null || true
		wait "$dpid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

cp=""
for pat in spark-network-common_ spark-network-shuffle_ spark-core_ scala-library- slf4j-api- \
	netty-buffer- netty-common- netty-transport-4 jackson-annotations-; do
	for j in "$SPARK_JARS"/"$pat"*.jar; do cp="$cp:$j"; done
done
"$JAVAC" -Xlint:all -Werror -d "$tmp/classes" -cp "${cp#:}" "$root/scripts/bench-fetch/FetchBench.java"
run() { "$JAVA" -Dlog4j2.level=OFF -cp "$tmp/classes:$SPARK_JARS/*" FetchBench "$@"; }

echo "# $(date -u +%FT%TZ) $(uname -srm), $(nproc) CPUs, $("$JAVA" -version 2>&1 | head -1)"
echo "# Spark jars: $(basename "$(ls "$SPARK_JARS"/spark-network-common_*.jar)")"
echo "# MAPS=$MAPS REDUCES=$REDUCES BLOCK_BYTES=$BLOCK_BYTES ROUNDS=$ROUNDS BATCH=$BATCH auth=${SECRET:+on} CRYPTO=$CRYPTO VERSION=$VERSION CIPHER=$CIPHER SASL_ENCRYPTION=$SASL_ENCRYPTION"

run layout "$tmp/shuffle" "$MAPS" "$REDUCES" "$BLOCK_BYTES"

if [ "$DAEMON" = auto ]; then
	if [ -n "${BIN:-}" ]; then
		mkdir -p "$tmp/bin" && cp "$BIN/shuffled" "$BIN/populate" "$tmp/bin/"
	else
		(cd "$root" && go build -o "$tmp/bin/" ./cmd/shuffled ./scripts/bench-fetch/populate)
	fi
	mkdir -p "$tmp/root"
	"$tmp/bin/shuffled" serve -socket "$tmp/sock" -root "$tmp/root" -serve-addr 127.0.0.1:0 >"$tmp/daemon.log" 2>&1 &
	dpid=$!
	for _ in $(seq 300); do
		grep -q 'shuffled ready' "$tmp/daemon.log" && break
		kill -0 "$dpid" 2>/dev/null || { cat "$tmp/daemon.log" >&2; exit 1; }
		sleep 0.1
	done
	DAEMON=$(sed -n 's/.*msg="serving map outputs" addr=\([^ ]*\).*/\1/p' "$tmp/daemon.log" | head -1)
	[ -n "$DAEMON" ] || { echo "bench-fetch: the daemon did not start serving" >&2; cat "$tmp/daemon.log" >&2; exit 1; }
	DAEMON_PID=$dpid EXEC=0
	"$tmp/bin/populate" "$tmp/sock" "$APP" "$SECRET" "$MAPS" "$REDUCES" "$BLOCK_BYTES"
fi

auth=()
if [ -n "$SECRET" ]; then
	auth=(secret "$SECRET" crypto "$CRYPTO" version "$VERSION" cipher "$CIPHER" saslEncryption "$SASL_ENCRYPTION")
fi
opts=("${auth[@]}")
[ "$BATCH" = 1 ] && opts+=(batch)

# start_server MODE ARGS...: one of FetchBench's servers in its own JVM
# (started directly, so that $spid is the JVM whose CPU is measured); sets
# $spid and $port. stop_server (closing fd 3) stops it.
start_server() {
	rm -f "$tmp/ctl" && mkfifo "$tmp/ctl"
	"$JAVA" -Dlog4j2.level=OFF -cp "$tmp/classes:$SPARK_JARS/*" FetchBench "$@" \
		<"$tmp/ctl" >"$tmp/serve.out" 2>"$tmp/serve.err" &
	spid=$!
	exec 3>"$tmp/ctl"
	for _ in $(seq 600); do
		grep -q '^READY' "$tmp/serve.out" 2>/dev/null && break
		kill -0 "$spid" 2>/dev/null || { cat "$tmp/serve.err" >&2; exit 1; }
		sleep 0.1
	done
	port=$(awk '/^READY/ {print $2}' "$tmp/serve.out")
	[ -n "$port" ] || { echo "bench-fetch: Spark's server ($1) did not start" >&2; exit 1; }
}
stop_server() {
	exec 3>&-
	wait "$spid" 2>/dev/null || true
	spid=
}

start_server serve 0 "${auth[@]}"
echo "## Spark ExternalBlockHandler (pid $spid, port $port)"
run fetch 127.0.0.1 "$port" "$APP" "$EXEC" "$MAPS" "$REDUCES" "$ROUNDS" "$spid" register "$tmp/shuffle" "${opts[@]}"
stop_server

if [ "$EXECUTOR" = 1 ]; then
	start_server serve-executor 0 "$APP" "$tmp/shuffle" "${auth[@]}"
	echo "## Spark executor's NettyBlockRpcServer (pid $spid, port $port)"
	run fetch 127.0.0.1 "$port" "$APP" "$EXEC" "$MAPS" "$REDUCES" "$ROUNDS" "$spid" "${opts[@]}"
	stop_server
fi

if [ -n "$DAEMON" ]; then
	echo "## shuffled block server (pid $DAEMON_PID, $DAEMON)"
	run fetch "${DAEMON%:*}" "${DAEMON##*:}" "$APP" "$EXEC" "$MAPS" "$REDUCES" "$ROUNDS" "$DAEMON_PID" "${opts[@]}"
fi
