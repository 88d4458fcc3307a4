#!/usr/bin/env bash
# The main job: build rdkv, start a 3-node durable local cluster (soft transport) with
# tools/cluster.sh, load some keys, show kvctl's get/put/del/scan/txn/shell/status against it, run
# a short transactional workload with kvbench and print its throughput and latency, kill a node
# with kill -9 and restart it with its data; then a replicated cluster (3 copies of every
# partition in memory, the configuration in a local ZooKeeper) that loses a node for good and
# carries on with its data, fills the node's replacement and hands its partition back; stop every
# node it started (also on Ctrl-C or an error). Installs missing Debian packages when run as root.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/tools/deps.sh"
rdkv_ensure_packages quickstart
build=${RDKV_BUILD_DIR:-$root/build}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)"
bin=$build/bin
export RDKV_BIN=$bin

dir=$(mktemp -d "${TMPDIR:-/tmp}/rdkv-quickstart-XXXXXX")
rdir=$dir/replicated
stop_cluster() {
    "$root/tools/cluster.sh" stop "$rdir" >/dev/null 2>&1 || true
    "$root/tools/cluster.sh" stop "$dir" >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap stop_cluster EXIT
trap 'exit 130' INT TERM

say() { printf '\n== %s\n' "$*"; }
run() {
    local a line="\$ ${1##*/}"
    shift
    for a in "$@"; do
        if [[ $a =~ ^[A-Za-z0-9_:./=,-]+$ ]]; then line+=" $a"; else line+=" '$a'"; fi
    done
    echo "$line"
    "$bin/kvctl" "$@"
}

say "starting a 3-node durable rdkv cluster (soft transport, a redo log per node) in $dir"
eval "$("$root/tools/cluster.sh" start 3 "$dir" --transport soft --bench --durable)"
echo "KVCTL_ENDPOINTS=$KVCTL_ENDPOINTS"
echo "RDKV_SECRET_FILE=$RDKV_SECRET_FILE (the client secret; the node secret is $dir/cluster.secret)"
kvctl=$bin/kvctl

say "loading 100 keys (user:000 .. user:099), 20 per transaction"
for b in 0 1 2 3 4; do
    script=""
    for i in $(seq $((b * 20)) $((b * 20 + 19))); do
        k=$(printf 'user:%03d' "$i")
        script+="put $k balance=$((100 + i)); "
    done
    "$kvctl" shell --exec "begin; ${script} commit" >/dev/null
done
run kvctl status

say "single keys"
run kvctl put greeting "hello, rdkv"
run kvctl get greeting
run kvctl del greeting
run kvctl get greeting || echo "(exit $? = not found)"

say "a scan: keys in [user:010, user:015)"
run kvctl scan user:010 user:015

say "a guarded transaction (kvctl txn): move 10 from user:001 to user:002 if user:001 still holds 101"
printf 'expect user:001 = balance=101\n---\nput user:001 balance=91\nput user:002 balance=112\nget user:001\nget user:002\n' |
    { echo '$ kvctl txn <<...'; "$kvctl" txn; }
echo "(the same guard again now fails, and nothing is written:)"
printf 'expect user:001 = balance=101\n---\nput user:001 balance=0\n' | "$kvctl" txn || echo "(exit $? = guard failed)"

say "an interactive-style session (kvctl shell --exec)"
run kvctl shell --exec "begin; get user:003; put user:003 balance=0; put user:004 balance=207; commit; get user:003"

say "a short transactional workload: kvbench txn against this cluster (workers inside node 0)"
"$bin/kvbench" txn --config "$dir/cluster.conf" --seconds "${RDKV_QUICKSTART_SECONDS:-1}" \
    --warmup 0.2 --keys 1000 |
    grep -E '^#|Throughput|50thPercentile|99thPercentile|RoundTripsPerTxn|Errors' |
    grep -v FabricRead

secs=${RDKV_QUICKSTART_SECONDS:-1}
say "YCSB workload A on this cluster: load 10,000 records, then run embedded (workers in the nodes)"
# kvbench drives the nodes' workload services: an operator tool, it proves the node secret.
ns=$dir/cluster.secret
"$bin/kvbench" ycsb load --endpoints "$KVCTL_ENDPOINTS" --secret-file "$ns" -p recordcount=10000 | grep -E 'RunTime|Return'
"$bin/kvbench" ycsb run --endpoints "$KVCTL_ENDPOINTS" --secret-file "$ns" --workload a -p recordcount=10000 \
    --seconds "$secs" --status-interval 0 |
    grep -E 'OVERALL|Operations|50thPercentile|99thPercentile|Return'

say "YCSB workload B, remote mode (kvbench's threads on rdkv_connect sessions)"
"$bin/kvbench" ycsb run --endpoints "$KVCTL_ENDPOINTS" --secret-file "$ns" --mode remote --threads 3 --workload b \
    -p recordcount=10000 --seconds "$secs" --status-interval 0 | grep -E 'OVERALL|Return'

say "TPC-C on this cluster (1 warehouse per node, tables scaled down for a demo), then its consistency check"
"$bin/kvbench" tpcc --endpoints "$KVCTL_ENDPOINTS" --secret-file "$ns" --items 2000 --customers 100 --seconds "$secs" \
    --status-interval 0 | grep -E 'tpmC|Return=|^condition|^consistency'

say "a node killed with kill -9 and restarted: it replays its redo log, and its keys are intact"
pid=$(cat "$dir/node-1.pid")
echo "\$ kill -9 $pid   # node 1"
kill -9 "$pid"
for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
run kvctl status || true
echo "\$ tools/cluster.sh restart $dir 1"
"$root/tools/cluster.sh" restart "$dir" 1 >/dev/null
grep -h "replayed" "$dir/node-1.log" | tail -1
run kvctl scan user:000 user:006

say "stopping the cluster"
"$root/tools/cluster.sh" stop "$dir"

say "replicas: 3 copies of every partition in memory, the configuration in ZooKeeper"
eval "$("$root/tools/cluster.sh" start 3 "$rdir" --transport soft --replicas 3)"
for i in 1 2 3 4 5 6; do "$kvctl" put "k$i" "v$i" >/dev/null; done
echo "(k1 .. k6 written)"
pid=$(cat "$rdir/node-1.pid")
say "node 1 killed for good: its lease (1 s) runs out, the manager removes it, a backup is promoted"
echo "\$ kill -9 $pid   # node 1, not restarted"
kill -9 "$pid"
# (a read of every key, until the promotion has happened: bounded)
for _ in $(seq 100); do
    ok=1
    for i in 1 2 3 4 5 6; do "$kvctl" get "k$i" >/dev/null 2>&1 || ok=0; done
    [ $ok = 1 ] && break
    sleep 0.1
done
for i in 1 2 3 4 5 6; do run kvctl get "k$i"; done
run kvctl put k2 after
run kvctl status || true
say "node 1's replacement: started empty, it joins, the primaries fill its copies, and its partition is handed back to it"
echo "\$ tools/cluster.sh restart $rdir 1"
"$root/tools/cluster.sh" restart "$rdir" 1 >/dev/null
# (until no copy is being filled and partition 1's primary is node 1 again: bounded)
for _ in $(seq 300); do
    st=$("$kvctl" status 2>/dev/null)
    if ! printf '%s\n' "$st" | grep -q '^[0-9].*+' && printf '%s\n' "$st" | grep -Eq '^1 +1 '; then
        break
    fi
    sleep 0.1
done
run kvctl status
run kvctl get k2
"$root/tools/cluster.sh" stop "$rdir"
