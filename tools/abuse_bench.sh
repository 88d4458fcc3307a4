#!/bin/sh
# A well-behaved client's latency with and without abuse (docs/benchmarks.md, "Under abuse";
# issue 17's target: p99 during abuse rows 6-8 within 3x of p99 without). On one 3-node soft
# cluster started here (nodes with an fd limit of FD_LIMIT, default 192, so that row 8 reaches
# it), it loads YCSB records, then runs `kvbench ycsb run --mode remote` twice for SECONDS each:
# once alone, once while abuse_load keeps rows 6-8 going against node 0 (4 connections that
# never read 1,000 pipelined 1 MiB READs, 16 MiB frames announced before HELLO, 200 connections
# held without HELLO). Prints both runs' p50/p99 per operation and their ratio.
#
#   tools/abuse_bench.sh [BUILD_DIR]      environment: SECONDS_PER_RUN (10), THREADS (4),
#                                         FD_LIMIT (192), RECORDS (10000)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
bin=$build/bin
for b in kvbench kvcluster kvserver abuse_load; do
    [ -x "$bin/$b" ] || { echo "abuse_bench: no $bin/$b (build first)" >&2; exit 2; }
done
secs=${SECONDS_PER_RUN:-10}
threads=${THREADS:-4}
fdl=${FD_LIMIT:-192}
records=${RECORDS:-10000}
[ "$secs" -ge 3 ] || { echo "abuse_bench: SECONDS_PER_RUN must be at least 3" >&2; exit 2; }
out=$(mktemp -d "${TMPDIR:-/tmp}/abuse-bench.XXXXXX")
trap 'RDKV_BIN=$bin "$root/tools/cluster.sh" stop "$out/c" >/dev/null 2>&1 || true; rm -rf "$out"' EXIT
line=$( (ulimit -n "$fdl" && RDKV_BIN=$bin "$root/tools/cluster.sh" start 3 "$out/c" --bench 2>"$out/start.err") ) ||
    { cat "$out/start.err" >&2; exit 1; }
ep=$(echo "$line" | tail -1)
ep=${ep#export KVCTL_ENDPOINTS=}
# kvbench drives the nodes' benchmark services with the node secret; the attacker proves it
# too (what a node's credential can still do is what rows 6-8 are about)
export RDKV_SECRET_FILE=$out/c/cluster.secret
port0=$(echo "$ep" | cut -d, -f1 | cut -d: -f2)
"$bin/kvbench" ycsb load --endpoints "$ep" -p recordcount="$records" >"$out/load" 2>&1 ||
    { tail -5 "$out/load" >&2; exit 1; }
run() {
    "$bin/kvbench" ycsb run --endpoints "$ep" --mode remote --threads "$threads" --workload b \
        -p recordcount="$records" --seconds "$secs" --status-interval 0
}
echo "# kvbench ycsb run --mode remote --threads $threads --workload b -p recordcount=$records --seconds $secs"
echo "# 3 soft nodes on 127.0.0.1 (fd limit $fdl); $(uname -sr), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
run >"$out/base" 2>"$out/base.err" || { tail -5 "$out/base.err" >&2; exit 1; }
run >"$out/abuse" 2>"$out/abuse.err" &
kb=$!
# The abuse starts once the client's sessions are open (they connect at the run's start) and
# covers the rest of the run.
sleep 1
"$bin/abuse_load" 127.0.0.1 "$port0" 0 "$((secs - 1))" "$RDKV_SECRET_FILE" >"$out/load.txt" 2>&1 </dev/null || true
wait "$kb" || { tail -5 "$out/abuse.err" >&2; exit 1; }
# A second quiet run after the abuse: the first one also carries the cluster's warm-up.
run >"$out/after" 2>"$out/after.err" || { tail -5 "$out/after.err" >&2; exit 1; }
cat "$out/load.txt"
pct() { awk -F', ' -v o="[$1]" -v p="$2thPercentileLatency(us)" '$1 == o && $2 == p {print $3}' "$3"; }
echo "op      run          p50 (us)   p99 (us)   p99 / quiet p99 (the worse of the two quiet runs)"
for op in READ UPDATE; do
    q1=$(pct "$op" 99 "$out/base")
    q2=$(pct "$op" 99 "$out/after")
    a99=$(pct "$op" 99 "$out/abuse")
    [ -n "$q1" ] && [ -n "$q2" ] && [ -n "$a99" ] || continue
    for r in base abuse after; do
        printf '%-7s %-10s %10s %10s\n' "$op" "$r" "$(pct "$op" 50 "$out/$r")" "$(pct "$op" 99 "$out/$r")"
    done
    printf '%-7s abuse p99 / quiet p99: %.2fx (against the better quiet run: %.2fx)\n' "$op" \
        "$(awk -v a="$a99" -v b="$q1" -v c="$q2" 'BEGIN {m = b > c ? b : c; print a / m}')" \
        "$(awk -v a="$a99" -v b="$q1" -v c="$q2" 'BEGIN {m = b < c ? b : c; print a / m}')"
done
grep -h "accept:" "$out"/c/node-0.log | head -3 || true
