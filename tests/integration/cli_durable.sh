#!/usr/bin/env bash
# The durable cluster as an operator runs it (tools/cluster.sh, kvcluster, kvctl): a --durable
# node killed with kill -9 and started again with 'cluster.sh restart' serves every write it
# acknowledged; without its data directory it refuses to start (never "not found"), until it
# is given back or the operator restarts it with --init; a node of a cluster started without
# --durable comes back empty and says so; restarting a node that runs is refused; bad usage
# exits 2.
# usage: cli_durable.sh BIN_DIR
set -u
bin=${1:?usage: cli_durable.sh BIN_DIR}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
expect_timeout=60
. "$root/tests/integration/clilib.sh"
cs="$root/tools/cluster.sh"
kv="$bin/kvctl"
export RDKV_BIN=$bin
trap 'RDKV_BIN=$bin "$cs" stop "$work/d" >/dev/null 2>&1; RDKV_BIN=$bin "$cs" stop "$work/m" >/dev/null 2>&1; rm -rf "$work"' EXIT

# kill -9 node I of the cluster in DIR, and wait (bounded) until its process is gone
kill9() {
    local pid i
    pid=$(cat "$1/node-$2.pid")
    kill -9 "$pid"
    for i in $(seq 200); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.05; done
    return 1
}

expect "restart needs DIR and I" 2 "restart needs DIR and I" -- "$cs" restart "$work/none"
expect "kvcluster restart needs --node" 2 "restart needs --node" -- "$bin/kvcluster" restart --dir "$work/none"
expect "--durability needs --durable" 2 "needs --durable" -- "$bin/kvcluster" start --nodes 1 --dir "$work/x" --durability sync

# A durable one-node cluster: writes survive kill -9 and restart.
if expect "durable start" 0 "KVCTL_ENDPOINTS" -- "$cs" start 1 "$work/d" --durable; then
    eval "$(cat "$work/out")"
    export RDKV_SECRET_FILE KVCTL_ENDPOINTS
    n=40
    okw=0
    for i in $(seq $n); do "$kv" put "key:$i" "value $i" >/dev/null 2>&1 && okw=$((okw + 1)); done
    "$kv" del "key:7" >/dev/null 2>&1
    [ $okw = $n ] && ok "$n acknowledged puts" || bad "only $okw of $n puts acknowledged"
    expect "restart of a running node is refused" 1 "still running" -- "$cs" restart "$work/d" 0
    if kill9 "$work/d" 0; then ok "node 0 killed"; else bad "node 0 did not die"; fi
    expect "restart after kill -9" 0 "replayed from its redo log" -- "$cs" restart "$work/d" 0
    grep -q "replayed 41 commits" "$work/d/node-0.log" && ok "the log says 41 commits replayed" ||
        bad "the log does not say 41 commits replayed: $(grep replayed "$work/d/node-0.log" | tail -1)"
    good=0
    for i in $(seq $n); do
        [ "$i" = 7 ] && continue
        [ "$("$kv" get "key:$i" 2>/dev/null)" = "value $i" ] && good=$((good + 1))
    done
    [ $good = $((n - 1)) ] && ok "every acknowledged put reads back" || bad "$good of $((n - 1)) read back"
    expect "the acknowledged delete stays deleted" 3 "not found" -- "$kv" get "key:7"
    # its data gone (a new disk, a wrong directory): refused, never "not found"
    kill9 "$work/d" 0
    mv "$work/d/node-0.data" "$work/d/node-0.data.away"
    expect "restart without its data is refused" 1 "holds no redo log or checkpoint" -- "$cs" restart "$work/d" 0
    mv "$work/d/node-0.data.away" "$work/d/node-0.data"
    expect "restart with its data back" 0 "replayed from its redo log" -- "$cs" restart "$work/d" 0
    expect "the data is back" 0 "value 1" -- "$kv" get "key:1"
    kill9 "$work/d" 0
    rm -rf "$work/d/node-0.data"
    expect "restart --init starts it empty" 0 "restarted node 0" -- "$bin/kvcluster" restart --dir "$work/d" --node 0 --init
    expect "a new empty partition" 3 "not found" -- "$kv" get "key:1"
    expect "durable stop" 0 "stopped 1 node" -- "$cs" stop "$work/d"
fi

# In memory: a restarted node is empty, and kvcluster says so.
if expect "in-memory start" 0 "KVCTL_ENDPOINTS" -- "$cs" start 1 "$work/m"; then
    eval "$(cat "$work/out")"
    export RDKV_SECRET_FILE KVCTL_ENDPOINTS
    "$kv" put gone soon >/dev/null 2>&1
    kill9 "$work/m" 0
    expect "in-memory restart says it is empty" 0 "in memory: empty" -- "$cs" restart "$work/m" 0
    expect "in-memory data is gone" 3 "not found" -- "$kv" get gone
fi
cli_summary
