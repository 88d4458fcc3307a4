#!/bin/sh
# The conflict policies side by side (docs/benchmarks.md, "Conflict policies on hot keys"): runs
# kvbench ycsb once per policy on freshly started nodes, ROUNDS times over, back to back, and
# prints commits per second (and aborts per commit) of each run and each policy's median.
#
#   tools/conflict_bench.sh [BUILD_DIR] [-- kvbench ycsb options...]
#
# Without options it runs the hot-key setting: 3 nodes, remote mode, 8 client threads, YCSB
# workload A's 50/50 read/update mix over 1,000 records, plain (not scrambled) Zipfian 0.99, 4
# keys per transaction in random order. Environment: SECONDS_PER_RUN (default 15), ROUNDS
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
if [ $# -eq 0 ]; then
    set -- --nodes 3 --mode remote --threads 8 --workload a -p recordcount=1000 \
        -p keyspertxn=4 -p zipfianscrambled=false
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/conflict-bench.XXXXXX")
trap 'rm -rf "$out"' EXIT
echo "# kvbench ycsb run $* --seconds $secs --conflict P"
echo "# $(uname -sr), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
r=1
while [ $r -le "$rounds" ]; do
    for p in $policies; do
        if ! "$kvbench" ycsb run "$@" --seconds "$secs" --status-interval 0 --conflict "$p" \
            >"$out/run" 2>"$out/err"; then
            echo "conflict_bench: $p, round $r failed:" >&2
            tail -5 "$out/err" >&2
            exit 1
        fi
        ops=$(awk -F', ' '/^\[TXN\], Commits/ {c=$3} /^\[OVERALL\], RunTime/ {t=$3}
                          END {printf "%.1f", c * 1000 / t}' "$out/run")
        rpc=$(awk -F', ' '/^\[TXN\], RetriesPerCommit/ {print $3}' "$out/run")
        echo "$p $ops $rpc" >>"$out/all"
        printf '%-9s round %d: %8s commits/s, %s aborts per commit\n' "$p" "$r" "$ops" "$rpc"
    done
    r=$((r + 1))
done
echo "# medians"
base=
for p in $policies; do
    med=$(awk -v p="$p" '$1 == p {print $2}' "$out/all" | sort -n |
        awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')
    [ -z "$base" ] && base=$med
    printf '%-9s %8s commits/s  (%.1fx %s)\n' "$p" "$med" \
        "$(awk -v a="$med" -v b="$base" 'BEGIN {print (b > 0 ? a / b : 0)}')" \
        "$(echo "$policies" | awk '{print $1}')"
done
