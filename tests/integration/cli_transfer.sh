#!/usr/bin/env bash
# kvbench ycsb --workload transfer on rdkv alone (no Redis or PostgreSQL needed; the peers test
# runs it beside them): on 3 nodes kvbench starts, embedded and remote, every transfer commits,
# the run does exactly the asked operations, and the check after it finds the total unchanged;
# the CSV report carries the check too; -p accounts needs the transfer workload.
# usage: cli_transfer.sh BIN_DIR
set -u
bin=${1:?usage: cli_transfer.sh BIN_DIR}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
expect_timeout=120
. "$root/tests/integration/clilib.sh"
trap 'rm -rf "$work"' EXIT

kb="$bin/kvbench"
total_ok="transfer check: 40 of 40 accounts, total 40000, expected 40000: ok"
expect "accounts without transfer" 2 "transfer workload" -- "$kb" ycsb run -p accounts=40
expect "too few accounts" 2 "transfer workload" -- "$kb" ycsb run --workload transfer -p accounts=1
for mode in embedded remote; do
    if expect "transfer $mode: total unchanged" 0 "$total_ok" -- "$kb" ycsb run --workload transfer \
        -p accounts=40 -p operationcount=1500 --nodes 3 --mode $mode --threads 3 --status-interval 0; then
        if grep -q '^\[TRANSFER\], Return=OK, 1500$' "$work/out" && ! grep -q 'Return=ERROR' "$work/out"; then
            ok "transfer $mode: 1500 transfers committed"
        else
            bad "transfer $mode: $(grep '^\[TRANSFER\], Return' "$work/out" | tr '\n' ' ')"
        fi
    fi
done
expect "transfer csv carries the check" 0 "^# $total_ok" -- "$kb" ycsb run --workload transfer \
    -p accounts=40 -p operationcount=300 --nodes 3 --format csv --status-interval 0
cli_summary
