#!/usr/bin/env bash
# Command-line behaviour of `kvbench range`: help, usage errors (exit 2 with a message, before any
# node starts), and short real runs of every range-lock design on both workloads (nodes start,
# clients run inside them, results and JSON come back, nodes stop), one-node and three-node
# layouts, and a tiny --sweep that writes its table (and plots, when gnuplot is installed).
# Every command runs under `timeout`, so a hang fails the test. Takes well under a minute.
# usage: cli_range.sh BIN_DIR
set -u
bin=${1:?usage: cli_range.sh BIN_DIR}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
expect_timeout=30
. "$root/tests/integration/clilib.sh"
trap 'rm -rf "$work"' EXIT

# json_has NAME FILE PATTERN...: every pattern is in the JSON file.
json_has() {
    local name=$1 file=$2
    shift 2
    for p in "$@"; do
        if ! grep -q -- "$p" "$file" 2>/dev/null; then bad "$name (no $p)"; return 1; fi
    done
    ok "$name"
}

kb="$bin/kvbench"
expect "kvbench --help lists range" 0 "range-lock benchmark" -- "$kb" --help
expect "kvbench range --help" 0 "usage: kvbench range" -- "$kb" range --help
expect "kvbench range --help explains oltp" 0 "39:9:1" -- "$kb" range --help
expect "kvbench range --help explains micro sizes" 0 "uniform in \[1, 2^11\]" -- "$kb" range --help

# Usage errors: exit 2, a message naming the problem.
expect "bad --algo" 2 "--algo must be" -- "$kb" range --algo ticket
expect "bad --algo in a list" 2 "--algo must be" -- "$kb" range --algo itree,,nope
expect "bad --workload" 2 "--workload must be micro or oltp" -- "$kb" range --workload tpcc
expect "bad --writes" 2 "--writes must be" -- "$kb" range --writes 101
expect "bad --clients" 2 "--clients must be" -- "$kb" range --clients 0
expect "oltp needs 3 clients" 2 "needs --clients >= 3" -- "$kb" range --workload oltp --clients 2
expect "too many clients per node" 2 "at most 64 per node" -- "$kb" range --nodes 2 --clients 65
expect "bad --cs-us" 2 "--cs-us must be" -- "$kb" range --cs-us -3
expect "bad --timeout-ms" 2 "--timeout-ms must be" -- "$kb" range --timeout-ms x
expect "bad --repeat" 2 "--repeat must be" -- "$kb" range --repeat 0
expect "bad --warmup" 2 "--warmup must be" -- "$kb" range --warmup -1
expect "missing value" 2 "needs a value" -- "$kb" range --algo
expect "unknown option" 2 "unknown option" -- "$kb" range --frobnicate 1
expect "bad --nodes" 2 "--nodes" -- "$kb" range --nodes 0

# Every design, micro workload: a short run on 2 nodes (node 0 owns the space, node 1 runs the
# clients), shared and exclusive ranges, a held critical section.
for algo in combiner-rpc combiner-rdma itree segment citron; do
    if expect "micro $algo runs" 0 "Return=OK" -- "$kb" range --algo "$algo" --workload micro \
        --clients 2 --writes 20 --cs-us 2 --seconds 0.3 --warmup 0 --json "$work/micro-$algo.json"; then
        json_has "micro $algo json" "$work/micro-$algo.json" '"benchmark": "range"' \
            '"algo": "'"$algo"'"' '"p999_us"' '"round_trips_per_op"' '"retries"' '"write"'
    fi
done

# Every design in one oltp run, one after the other on the same nodes: roles, per-role ops,
# the closing table and the ratios to the first design.
if expect "oltp, all designs in one run" 0 "oltp roles" -- "$kb" range \
    --algo combiner-rpc,combiner-rdma,itree,segment,citron --workload oltp --clients 6 \
    --seconds 0.3 --warmup 0 --json "$work/oltp.json"; then
    if grep -q "6 clients = 4 readers + 1 writer + 1 log writer" "$work/out"; then ok "oltp split printed"; else bad "oltp split printed"; fi
    if grep -q "combiner-rpc / citron: throughput" "$work/out"; then ok "oltp ratios"; else bad "oltp ratios"; fi
    json_has "oltp json" "$work/oltp.json" '"workload": "oltp"' '"readers": 4' '"log_writers": 1' '"log"'
fi
expect "oltp ignores --writes, says so" 0 "ignored for the oltp workload" -- "$kb" range \
    --algo itree --workload oltp --clients 3 --writes 50 --seconds 0.2 --warmup 0

# Layouts: clients on the owner itself (--nodes 1), and round-robin over two client nodes.
expect "one node (clients on the owner)" 0 "Return=OK" -- "$kb" range --algo combiner-rpc,segment \
    --nodes 1 --clients 2 --seconds 0.2 --warmup 0
expect "three nodes, oltp" 0 "Return=OK" -- "$kb" range --algo combiner-rdma,citron --nodes 3 \
    --workload oltp --clients 5 --seconds 0.2 --warmup 0
expect "repeat" 0 "Return=OK" -- "$kb" range --algo itree --clients 2 --writes 100 --repeat 3 \
    --seconds 0.1 --warmup 0

# A tiny sweep: the grid's table (and plots when gnuplot is there).
if expect "sweep" 0 "wrote $work/sweep/range-sweep.md" -- "$kb" range --sweep --algo itree,segment \
    --clients 3 --seconds 0.03 --warmup 0 --out "$work/sweep"; then
    if grep -q "## micro, 100 % writes" "$work/sweep/range-sweep.md" && grep -q "## oltp" "$work/sweep/range-sweep.md"; then
        ok "sweep table"
    else
        bad "sweep table"
    fi
    if command -v gnuplot >/dev/null 2>&1; then
        if [ -s "$work/sweep/plots/range-micro-w0.png" ] && [ -s "$work/sweep/plots/range-micro-w100.png" ]; then ok "sweep plots"; else bad "sweep plots"; fi
    else
        echo "SKIP sweep plots (gnuplot is not installed)"
    fi
fi

cli_summary
