#!/usr/bin/env bash
# scripts/bench-jvm-model.sh: shuffled against a model of spark-rapids'
# multithreaded shuffle writer V2 (jvm/bench, lz4-java's native compressor),
# on the same bytes, side by side, per CPU second (docs/benchmarks.md,
# "JVM writer model").
#
# For each workload (opaque payload, lineitem, PARTITIONS x BATCHES):
#   1. shuffled-loadgen with a child daemon (shuffled serve, SHUFFLED_LIMIT,
#      SHUFFLED_POOL) dumps its input (--dump-input), keeps its map outputs
#      and reports the daemon's peak RSS;
#   2. the model replays the dump in memory and file-only mode; every data,
#      index and checksum file must be byte-identical to shuffled's, or the
#      script fails;
#   3. REPS interleaved repetitions of: shuffled-loadgen with the embedded
#      daemon (its CPU covers the load generator's client, the socket and
#      memfd data plane and the daemon), the model in memory mode, the model
#      in file-only mode (each after WARMUP passes that let the JIT compile).
# It prints medians: MB of input per CPU second, the ratios (medians of the
# ratios within each repetition), and peak RSS (the model's less its input
# pool, which stands for the executor's batches).
#
# REPS=0 checks the byte identity only (a quick test: e.g. REPS=0 TASKS=2
# ROWS=2000 PARTITIONS=16 BATCHES="1 3").
#
# Environment: REPS (5), TASKS (8), ROWS (100000), CONCURRENCY (2), THREADS
# (2, the daemon's pool and the model's writer threads), LIMIT_MIB (128),
# WARMUP (1), PARTITIONS ("200 2000"), BATCHES ("1 4"), CPUS (taskset list,
# default all), JAVA (java).
set -euo pipefail
cd "$(dirname "$0")/.."

REPS=${REPS:-5} TASKS=${TASKS:-8} ROWS=${ROWS:-100000} CONCURRENCY=${CONCURRENCY:-2}
THREADS=${THREADS:-2} LIMIT_MIB=${LIMIT_MIB:-128} WARMUP=${WARMUP:-1}
PARTITIONS=${PARTITIONS:-"200 2000"} BATCHES=${BATCHES:-"1 4"} JAVA=${JAVA:-java}
CPUS=${CPUS:-0-$(($(nproc) - 1))}

work=$(mktemp -d "${TMPDIR:-/tmp}/shuffled-jvm-model-XXXXXX")
trap 'rm -rf "$work"' EXIT
say() { printf 'bench-jvm-model: %s\n' "$*" >&2; }

say "building shuffled, shuffled-loadgen and jvm/bench"
go build -o "$work/bin/shuffled" ./cmd/shuffled
go build -o "$work/bin/shuffled-loadgen" ./cmd/shuffled-loadgen
mvn -f jvm/bench/pom.xml -B -q package -DskipTests >&2
cp="jvm/bench/target/classes:$(ls jvm/bench/target/lib/*.jar | tr '\n' ':')"

export SHUFFLED_LIMIT="${LIMIT_MIB}MiB" SHUFFLED_POOL="$THREADS"
pin() { taskset -c "$CPUS" "$@"; }
loadgen() {
	pin "$work/bin/shuffled-loadgen" --payload opaque --data-plane memfd --tasks "$TASKS" \
		--concurrency "$CONCURRENCY" --rows "$ROWS" --json "$@" 2>/dev/null
}
model() {
	pin "$JAVA" -cp "$cp" dev.shuffled.bench.WriterModel --threads "$THREADS" \
		--limit-mib "$LIMIT_MIB" --concurrency "$CONCURRENCY" "$@"
}

results="$work/results.jsonl"
: >"$results"
for p in $PARTITIONS; do
	for b in $BATCHES; do
		w="$work/p$p-b$b"
		mkdir -p "$w"
		say "partitions $p, batches per task $b: dump, identity"
		loadgen --partitions "$p" --batches-per-task "$b" --daemon-bin "$work/bin/shuffled" \
			--keep --root "$w/root" --dump-input "$w/in" >"$w/child.json"
		for mode in memory file; do
			model --input "$w/in" --output "$w/jvm-$mode" --mode "$mode" --warmup 0 >/dev/null
			same=0
			for f in "$w"/root/*/*/shuffle_*; do
				name=$(basename "$f")
				if ! cmp -s "$f" "$w/jvm-$mode/$name"; then
					say "FAIL: $name differs between shuffled and the $mode model"
					exit 1
				fi
				same=$((same + 1))
			done
			if [ "$same" -ne $((3 * TASKS)) ] || [ "$(ls "$w/jvm-$mode" | wc -l)" -ne "$same" ]; then
				say "FAIL: $same identical files, want $((3 * TASKS)) on both sides"
				exit 1
			fi
			rm -rf "$w/jvm-$mode"
		done
		rm -rf "$w/root"
		say "partitions $p, batches per task $b: $same files byte-identical; $REPS repetitions"
		for r in $(seq 1 "$REPS"); do
			loadgen --partitions "$p" --batches-per-task "$b" --seed 1 |
				python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps({"side":"shuffled","rep":'"$r"',"p":'"$p"',"b":'"$b"',"mb_per_cpu_s":d["mb_per_cpu_s"],"serialized":d["serialized_bytes"]}))' >>"$results"
			for mode in memory file; do
				model --input "$w/in" --output "$w/jvm-rep" --mode "$mode" --warmup "$WARMUP" |
					python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps({"side":"jvm-"+d["mode"],"rep":'"$r"',"p":'"$p"',"b":'"$b"',"mb_per_cpu_s":d["mb_per_cpu_s"],"rss":d["peak_rss_bytes"]-d["pool_bytes"],"compressor":d["compressor"],"serialized":d["serialized_bytes"]}))' >>"$results"
				rm -rf "$w/jvm-rep"
			done
		done
		python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps({"side":"shuffled-daemon","p":'"$p"',"b":'"$b"',"rss":d["peak_rss_bytes"],"source":d.get("peak_rss_source","")}))' "$w/child.json" >>"$results"
		rm -rf "$w/in"
	done
done

if [ "$REPS" -eq 0 ]; then
	say "all outputs byte-identical (REPS=0: nothing measured)"
	exit 0
fi
python3 - "$results" "$REPS" "$TASKS" "$ROWS" "$THREADS" "$LIMIT_MIB" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
reps, tasks, nrows, threads, limit = sys.argv[2:]
def med(side, p, b, key):
    v = [r[key] for r in rows if r["side"] == side and r["p"] == p and r["b"] == b]
    return statistics.median(v) if v else float("nan")
comp = {r["compressor"] for r in rows if "compressor" in r}
print(f"shuffled vs the spark-rapids V2 writer model: opaque lineitem, {tasks} tasks x {nrows} rows per batch, "
      f"{threads} writer threads, {limit} MiB limit; medians of {reps} interleaved runs; JVM lz4: {', '.join(sorted(comp))}")
print(f"{'partitions':>10} {'batches':>7} | {'MB per CPU second':^35} | {'shuffled /':^17} | {'peak RSS MiB':^24}")
print(f"{'':>10} {'':>7} | {'shuffled':>11} {'V2 memory':>11} {'V2 file':>11} | {'memory':>8} {'best':>8} | {'shuffled':>8} {'V2':>7} {'ratio':>7}")
def rep(side, p, b, r):
    return [x for x in rows if x["side"] == side and x["p"] == p and x["b"] == b and x["rep"] == r][0]["mb_per_cpu_s"]
keys = sorted({(r["p"], r["b"]) for r in rows})
for p, b in keys:
    s, m, f = (med(x, p, b, "mb_per_cpu_s") for x in ("shuffled", "jvm-memory", "jvm-file"))
    # The ratios are medians of the ratios within each repetition, whose
    # runs were back to back.
    rs_ = sorted({x["rep"] for x in rows if x["side"] == "shuffled" and x["p"] == p and x["b"] == b})
    over_m = statistics.median([rep("shuffled", p, b, r) / rep("jvm-memory", p, b, r) for r in rs_])
    over_best = statistics.median([rep("shuffled", p, b, r) / max(rep("jvm-memory", p, b, r), rep("jvm-file", p, b, r)) for r in rs_])
    rs = med("shuffled-daemon", p, b, "rss") / 2**20
    rj = statistics.median([r["rss"] for r in rows if r["side"].startswith("jvm-") and r["p"] == p and r["b"] == b]) / 2**20
    print(f"{p:>10} {b:>7} | {s:>11.1f} {m:>11.1f} {f:>11.1f} | {over_m:>8.2f} {over_best:>8.2f} | {rs:>8.1f} {rj:>7.1f} {rs/rj:>7.2f}")
EOF
