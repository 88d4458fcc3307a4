#!/usr/bin/env bash
# kvbench failover: one round on a fresh 3-node cluster with 3 replicas (2 s leases, so that a
# loaded runner makes no false suspicion): a primary killed, its keys served again, every
# acknowledged move there (exit status 0), and the summary lines; bad options are refused.
# usage: cli_failover.sh BIN_DIR
set -u
bin=${1:?usage: cli_failover.sh BIN_DIR}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
expect_timeout=120
. "$root/tests/integration/clilib.sh"
trap 'rm -rf "$work"' EXIT

kb="$bin/kvbench"
expect "replicas above nodes" 2 "needs --nodes" -- "$kb" failover --nodes 2 --replicas 3
expect "no kills" 2 "take 1..64" -- "$kb" failover --kills 0
expect "unknown option" 2 "unknown option" -- "$kb" failover --bogus 1
if expect "one kill, nothing lost" 0 "RoundsLosingCommits, 0" -- "$kb" failover --kills 1 \
    --replica-lease 2s --warm 1s; then
    if grep -q '^\[FAILOVER\], RoundsWithoutCommit, 0$' "$work/out" &&
        grep -q '^round 1: node [0-9] killed; first commit on its keys [0-9]* ms' "$work/out"; then
        ok "the round found a commit after the kill"
    else
        bad "no commit after the kill: $(head -1 "$work/out")"
    fi
fi
cli_summary
