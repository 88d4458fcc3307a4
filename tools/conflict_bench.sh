#!/bin/sh
# The conflict policies side by side (docs/benchmarks.md, "Conflict policies"): runs one kvbench
# workload once per policy on freshly started nodes, ROUNDS times over, back to back, and prints
# for each run its commits per second, aborts per commit and p99 latency, then each policy's
# medians.
#
#   tools/conflict_bench.sh [BUILD_DIR] [-- [ycsb|tpcc] kvbench options...]
#
# Without options it runs the hot-key setting: 3 nodes, remote mode, 8 client threads, YCSB
# workload A's 50/50 read/update mix over 1,000 records, plain (not scrambled) Zipfian 0.99, 4
# keys per transaction in random order. With `tpcc` first, the options go to kvbench tpcc.
# The p99 is of the slowest operation kind: ycsb's worst 99th percentile over its READ, UPDATE
# (and other) operations, tpcc's NEW_ORDER. Environment: SECONDS_PER_RUN (default 15), ROUNDS
# (default 3), POLICIES (default "timeout wait-die no-wait").
set -eu
build=build
if [ $# -gt 0 ] && [ "$1" != "--" ]; then build=$1; shift; fi
[ $# -gt 0 ] && [ "$1" = "--" ] && shift
kvbench="$build/bin/kvbench"
[ -x "$kvbench" ] || { echo "conflict_bench: no $kvbench (build first)" >&2; exit 2; }
secs=${SECONDS_PER_RUN:-15}
rounds=${ROUNDS:-3}
policies=${POLICIES:-"timeout wait-die no-wait"}
driver=ycsb
if [ $# -gt 0 ] && { [ "$1" = ycsb ] || [ "$1" = tpcc ]; }; then
    driver=$1
    shift
fi
if [ $# -eq 0 ] && [ "$driver" = ycsb ]; then
    set -- --nodes 3 --mode remote --threads 8 --workload a -p recordcount=1000 \
        -p keyspertxn=4 -p zipfianscrambled=false
fi
[ "$driver" = ycsb ] && set -- run "$@" --status-interval 0
out=$(mktemp -d "${TMPDIR:-/tmp}/conflict-bench.XXXXXX")
trap 'rm -rf "$out"' EXIT
echo "# kvbench $driver $* --seconds $secs --conflict P"
echo "# $(uname -sr), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
r=1
while [ $r -le "$rounds" ]; do
    for p in $policies; do
        if ! "$kvbench" "$driver" "$@" --seconds "$secs" --conflict "$p" \
            >"$out/run" 2>"$out/err"; then
            echo "conflict_bench: $p, round $r failed:" >&2
            tail -5 "$out/err" >&2
            exit 1
        fi
        # commits/s, aborts per commit, p99 in ms
        awk -F', ' -v d="$driver" -v p="$p" '
            /^\[OVERALL\], RunTime/ {t = $3}
            /^\[TXN\], Commits/ {c = $3}
            /^\[TXN\], Aborts/ {a = $3}
            /^\[TPCC\], TransactionsPerSecond/ {tps = $3}
            /99thPercentileLatency/ && !/99\.9/ {
                k = $1
                if ((d == "tpcc" && k == "[NEW_ORDER]") || (d == "ycsb" && k != "[TXN]"))
                    if ($3 > p99) p99 = $3
            }
            END {
                if (d == "tpcc") c = tps * t / 1000
                printf "%s %.1f %.3f %.1f\n", p, c * 1000 / t, c ? a / c : 0, p99 / 1000
            }' "$out/run" >>"$out/all"
        tail -1 "$out/all" | awk -v r="$r" \
            '{printf "%-9s round %d: %8s commits/s, %s aborts per commit, p99 %s ms\n", $1, r, $2, $3, $4}'
    done
    r=$((r + 1))
done
echo "# medians"
base=
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for p in $policies; do
    med=$(awk -v p="$p" '$1 == p {print $2}' "$out/all" | median)
    apc=$(awk -v p="$p" '$1 == p {print $3}' "$out/all" | median)
    p99=$(awk -v p="$p" '$1 == p {print $4}' "$out/all" | median)
    [ -z "$base" ] && base=$med
    printf '%-9s %8s commits/s  (%.2fx %s), %s aborts per commit, p99 %s ms\n' "$p" "$med" \
        "$(awk -v a="$med" -v b="$base" 'BEGIN {print (b > 0 ? a / b : 0)}')" \
        "$(echo "$policies" | awk '{print $1}')" "$apc" "$p99"
done
