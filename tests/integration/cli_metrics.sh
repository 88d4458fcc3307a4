#!/usr/bin/env bash
# kvserver --metrics: a 2-node cluster serves Prometheus's text format on ports the kernel
# picks; Prometheus's own `promtool check metrics` accepts what each node serves; the counters
# move with the work done (commits, an abort, lock acquires, fabric operations, sessions), and a
# durable node's log counters with its syncs; the endpoint refuses other methods and paths, and
# bounds the connections one address may hold. Bad --metrics values are refused before anything
# starts. Every command runs under `timeout`. Takes about 20 s.
# usage: cli_metrics.sh BIN_DIR
set -u
bin=${1:?usage: cli_metrics.sh BIN_DIR}
bin=$(cd "$bin" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
expect_timeout=60
. "$root/tests/integration/clilib.sh"
cleanup() {
    for c in c d; do "$bin/kvcluster" stop --dir "$work/$c" >/dev/null 2>&1; done
    rm -rf "$work"
}
trap cleanup EXIT

cl="$bin/kvcluster"
expect "bad --metrics value" 2 "bad --metrics 'nohost'" -- "$cl" start --nodes 1 --dir "$work/x" --metrics nohost
expect "bad --metrics port" 2 "bad --metrics" -- "$cl" start --nodes 1 --dir "$work/x" --metrics 127.0.0.1:70000
expect "--metrics in --help" 0 "metrics HOST:PORT" -- "$bin/kvserver" --help

expect "start 2 nodes with --metrics" 0 "started 2 nodes" -- "$cl" start --nodes 2 --dir "$work/c" --metrics 127.0.0.1:0
url() { grep -ho "http://[^ ]*/metrics" "$work/$1/node-$2.log" | tail -1; }
u0=$(url c 0) u1=$(url c 1)
if [ -n "$u0" ] && [ -n "$u1" ]; then ok "each node names its endpoint"; else bad "no endpoint in the logs"; fi

# scrape NAME URL OUT: GET with curl (exit 0, HTTP 200).
scrape() {
    if timeout 10 curl -sf -o "$3" "$2"; then ok "$1"; else bad "$1 (curl failed)"; fi
}
# total FILE METRIC: the sum of a metric's samples (all label sets).
total() {
    awk -v m="$2" '$1 == m || index($1, m "{") == 1 { s += $NF } END { printf "%.0f\n", s }' "$1"
}
# both METRIC: the metric summed over both nodes' scrapes $work/N0 $work/N1 (suffix $1 of files).
both() { echo $(($(total "$work/$1.0" "$2") + $(total "$work/$1.1" "$2"))); }

scrape "scrape node 0" "$u0" "$work/a.0"
scrape "scrape node 1" "$u1" "$work/a.1"
if command -v promtool >/dev/null 2>&1; then
    for i in 0 1; do
        if timeout 20 promtool check metrics <"$work/a.$i" >"$work/out" 2>"$work/err"; then
            ok "promtool check metrics (node $i)"
        else
            bad "promtool check metrics (node $i)"
        fi
    done
else
    bad "promtool is not installed (tools/deps.sh installs prometheus for the tests)"
fi
grep -q '^rdkv_node_info{node="0",.*row_lock="rwlock".*} 1$' "$work/a.0" && ok "node info" || bad "node info"
grep -q '^# TYPE rdkv_txn_commit_duration_seconds histogram$' "$work/a.0" && ok "a histogram" || bad "no histogram"

ep=$(awk '$1 == "node" && $2 == "0" { print $3 }' "$work/c/cluster.conf")
kv=("$bin/kvctl" -e "$ep" --secret-file "$work/c/cluster.client.secret")
n=20
okput=0
for i in $(seq 1 $n); do timeout 10 "${kv[@]}" put "key$i" "v$i" >/dev/null 2>&1 && okput=$((okput + 1)); done
[ "$okput" = $n ] && ok "$n inserts" || bad "only $okput of $n inserts"
okput=0 # updates: an existing row is locked (an insert takes no row lock)
for i in $(seq 1 $n); do timeout 10 "${kv[@]}" put "key$i" "w$i" >/dev/null 2>&1 && okput=$((okput + 1)); done
[ "$okput" = $n ] && ok "$n updates" || bad "only $okput of $n updates"
# a guard that fails: the batch is aborted by the client
printf 'expect key1 = nope\n---\nput key2 x\n' >"$work/guard.txt"
expect "failed guard" 4 "" -- "${kv[@]}" txn -f "$work/guard.txt"
scrape "scrape node 0 again" "$u0" "$work/b.0"
scrape "scrape node 1 again" "$u1" "$work/b.1"

# grew NAME METRIC MIN: the metric summed over both nodes grew by at least MIN.
grew() {
    local a b
    a=$(both a "$2") b=$(both b "$2")
    if [ $((b - a)) -ge "$3" ]; then ok "$1 ($a -> $b)"; else bad "$1 ($a -> $b, wanted +$3)"; fi
}
grew "commits counted" rdkv_txn_commits_total $((2 * n))
grew "the aborted batch counted" rdkv_txn_aborts_total 1
grew "lock acquires counted" rdkv_lock_acquires_total $n
grew "sessions counted" rdkv_sessions_opened_total $n
grew "fabric operations counted" rdkv_fabric_rpcs_total 1
grew "transaction latencies counted" rdkv_txn_duration_seconds_count $n
# kvctl stats: the same counters, from the nodes' status
expect "kvctl stats" 0 "^commits " -- "${kv[@]}" stats
st=$(awk '$1 == "commits" && $2 ~ /^[0-9]/ { print $NF }' "$work/out")
[ "${st:-0}" -ge $((2 * n)) ] && ok "kvctl stats counts the commits ($st)" || bad "kvctl stats: commits total '$st'"
expect "kvctl -w json stats" 0 '"metrics":{"commits":' -- "${kv[@]}" -w json stats
expect "kvctl stats --help" 0 "kvctl stats" -- "${kv[@]}" stats --help
expect "kvctl stats takes no argument" 2 "" -- "${kv[@]}" stats x
expect "stats in the shell" 0 "^lock acquires " -- "${kv[@]}" shell --exec "stats"
expect "stats in the shell takes no argument" 1 "stats takes no arguments" -- "${kv[@]}" shell --exec "stats x"
rows=$(both b rdkv_rows)
[ "$rows" = $n ] && ok "rows gauge ($rows)" || bad "rows gauge ($rows, wanted $n)"

# HTTP: only GET/HEAD of /metrics; a HEAD has no body
code=$(timeout 10 curl -s -o /dev/null -w '%{http_code}' -X POST -d x=1 "$u0")
[ "$code" = 405 ] && ok "POST is refused (405)" || bad "POST answered $code"
code=$(timeout 10 curl -s -o /dev/null -w '%{http_code}' "${u0%/metrics}/other")
[ "$code" = 404 ] && ok "another path is 404" || bad "another path answered $code"
code=$(timeout 10 curl -s -I -o /dev/null -w '%{http_code}' "$u0")
[ "$code" = 200 ] && ok "HEAD" || bad "HEAD answered $code"

# The bound: an address holds at most 4 connections; a fifth gets none until one closes.
hp=${u0#http://}
hp=${hp%/metrics}
host=${hp%:*} port=${hp##*:}
exec 5<>"/dev/tcp/$host/$port" 6<>"/dev/tcp/$host/$port" 7<>"/dev/tcp/$host/$port" 8<>"/dev/tcp/$host/$port"
if timeout 5 curl -sf -o /dev/null "$u0"; then bad "a fifth connection from one address was served"; else ok "a fifth connection from one address is refused"; fi
exec 5>&- 6>&- 7>&- 8>&-
served=0
for _ in $(seq 1 50); do # the server sees the four close as it polls: ask until it has
    timeout 5 curl -sf -o /dev/null "$u0" && { served=1; break; }
done
[ "$served" = 1 ] && ok "served again once they closed" || bad "not served after the four closed"

# A node down: stats says so and exits 5; the others' columns are there.
kill -9 "$(cat "$work/c/node-1.pid")"
down=0
for _ in $(seq 1 50); do # the coordinator's watcher declares it down within a second or so
    timeout 30 "${kv[@]}" stats >"$work/out" 2>"$work/err"
    [ $? = 5 ] && { down=1; break; }
    sleep 0.2
done
[ "$down" = 1 ] && grep -q "node 1 .* is down" "$work/err" && ok "kvctl stats with a node down exits 5" || bad "kvctl stats with a node down"

# A durable node counts its log's records and syncs.
expect "start a durable node with --metrics" 0 "started 1 node" -- "$cl" start --nodes 1 --dir "$work/d" --durable --metrics 127.0.0.1:0
ud=$(url d 0)
epd=$(awk '$1 == "node" && $2 == "0" { print $3 }' "$work/d/cluster.conf")
for i in 1 2 3; do timeout 10 "$bin/kvctl" -e "$epd" --secret-file "$work/d/cluster.client.secret" put "d$i" x >/dev/null 2>&1; done
scrape "scrape the durable node" "$ud" "$work/d.txt"
recs=$(total "$work/d.txt" rdkv_log_records_total) syncs=$(total "$work/d.txt" rdkv_log_syncs_total)
[ "$recs" -ge 3 ] && ok "log records counted ($recs)" || bad "log records $recs"
[ "$syncs" -ge 1 ] && ok "log syncs counted ($syncs)" || bad "log syncs $syncs"
[ "$(total "$work/d.txt" rdkv_log_sync_duration_seconds_count)" -ge 1 ] && ok "sync latencies" || bad "no sync latency"

cli_summary
