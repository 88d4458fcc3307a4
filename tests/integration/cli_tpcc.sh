#!/usr/bin/env bash
# kvbench tpcc end to end: help and usage errors (exit 2 before any node starts); a short run on
# 3 nodes it starts itself, embedded and remote, whose output ends with TPC-C's consistency
# conditions 1-4 holding (checked with progress lines) and reports every transaction type with
# no error; and a run against a
# running cluster from tools/cluster.sh through --endpoints. Every command runs under `timeout`.
# usage: cli_tpcc.sh BIN_DIR
set -u
bin=${1:?usage: cli_tpcc.sh BIN_DIR}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
expect_timeout=180
. "$root/tests/integration/clilib.sh"
cleanup() {
    RDKV_BIN="$bin" "$root/tools/cluster.sh" stop "$work/c" >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

# a finished run: the last line is the verdict, every type committed, nothing failed
full_run() {
    local name=$1
    [ "$(tail -1 "$work/out")" = "consistency: 4/4 conditions hold" ] && ok "$name: ends with 4/4 conditions hold" ||
        bad "$name: ends with 4/4 conditions hold (last line: $(tail -1 "$work/out"))"
    grep -q 'Return=ERROR' "$work/out" && bad "$name: no errors" || ok "$name: no errors"
    local t missing=""
    for t in NEW_ORDER PAYMENT ORDER_STATUS DELIVERY STOCK_LEVEL; do
        grep -q "^\[$t\], Return=OK, [1-9]" "$work/out" || missing="$missing $t"
    done
    [ -z "$missing" ] && ok "$name: every transaction type committed" || bad "$name: types that never committed:$missing"
    grep -q '^\[TPCC\], NewOrdersPerMinute(tpmC), [1-9]' "$work/out" && ok "$name: reports tpmC" || bad "$name: reports tpmC"
}

kb="$bin/kvbench"
small=(--items 2000 --customers 100)

expect "help" 0 "conditions 1-4" -- "$kb" tpcc --help
expect "bad mix" 2 "add up to 100" -- "$kb" tpcc --mix 50,50,50,0,0
expect "bad warehouses" 2 "warehouses-per-node" -- "$kb" tpcc --warehouses-per-node 0
expect "bad items" 2 "--items" -- "$kb" tpcc --items 5
expect "no-load needs a cluster" 2 "running cluster" -- "$kb" tpcc --no-load
expect "compare needs its own nodes" 2 "starts its own nodes" -- "$kb" tpcc --compare --endpoints 127.0.0.1:1

if expect "3 nodes, embedded" 0 "scaled down" -- "$kb" tpcc --nodes 3 "${small[@]}" --seconds 2 --status-interval 0; then
    full_run "3 nodes, embedded"
fi
if expect "3 nodes, remote, 2 warehouses per node" 0 "" -- "$kb" tpcc --nodes 3 --mode remote --threads 4 \
    --warehouses-per-node 2 "${small[@]}" --seconds 2 --status-interval 0; then
    full_run "3 nodes, remote"
    # the check says what it does while it does it (it used to run in silence for a minute),
    # one warehouse per part on the 3 nodes that hold them
    grep -q '^kvbench tpcc: checking 6 warehouses on 3 nodes$' "$work/err" &&
        grep -qE '^kvbench tpcc: checked 6 warehouses in [0-9.]+ s$' "$work/err" &&
        ok "3 nodes, remote: the check shows its progress" ||
        bad "3 nodes, remote: the check shows its progress"
fi
expect "json" 0 '"NEW_ORDER"' -- "$kb" tpcc --nodes 2 "${small[@]}" --seconds 1 --format json --status-interval 0

if RDKV_BIN="$bin" timeout 60 "$root/tools/cluster.sh" start 3 "$work/c" --bench >"$work/out" 2>"$work/err"; then
    ep=$(tail -1 "$work/out" | sed 's/^export KVCTL_ENDPOINTS=//')
    expect "running cluster: load + run + check" 0 "" -- "$kb" tpcc --endpoints "$ep" --secret-file "$work/c/cluster.secret" "${small[@]}" --seconds 2 --status-interval 0 &&
        full_run "running cluster"
    expect "running cluster: --no-load runs on the loaded tables" 0 "" -- "$kb" tpcc --endpoints "$ep" --secret-file "$work/c/cluster.secret" --no-load "${small[@]}" --seconds 1 --status-interval 0 &&
        full_run "running cluster, --no-load"
else
    bad "cluster.sh start 3"
fi

cli_summary
