#!/usr/bin/env bash
# Re-replication under load (docs/replication.md, section 8; docs/benchmarks.md,
# "Re-replication"): a 3-node cluster with 3 copies of every partition, loaded with
# RECORDS YCSB records of 1 KB; YCSB A runs throughout from remote sessions that name every
# node; node 2 is killed with kill -9, removed, and started again empty; the primaries fill its
# copies while YCSB runs. Prints the time from the restart to every copy filled, the primaries'
# own lines ("new copies filled: N rows ... in T s") and YCSB's throughput per second before,
# during and after.
# usage: tools/refill_bench.sh [RECORDS (default 3000000: 1M per partition)] [ARENA (default 8G)]
# Environment: RDKV_BIN (the binaries, default build/bin), RDKV_REFILL_SECONDS (YCSB's run, 120),
# RDKV_KEEP=1 (keep the cluster's directory and logs).
set -euo pipefail
usage() { sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
case "${1:-}" in -h | --help) usage; exit 0 ;; esac
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${RDKV_BIN:-$root/build/bin}
records=${1:-3000000}
arena=${2:-8G}
[[ $records =~ ^[1-9][0-9]*$ ]] || { echo "refill_bench: RECORDS must be a positive number" >&2; usage >&2; exit 2; }
[ -x "$bin/kvserver" ] || { echo "refill_bench: no $bin/kvserver: build first, or set RDKV_BIN" >&2; exit 2; }
# seconds since the nanosecond timestamp $1
since() { awk -v a="$1" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }'; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/rdkv-refill-XXXXXX")
trap '"$root/tools/cluster.sh" stop "$dir" >/dev/null 2>&1 || true; [ -n "${RDKV_KEEP:-}" ] && echo "kept $dir" || rm -rf "$dir"' EXIT
export RDKV_BIN=$bin
eval "$("$root/tools/cluster.sh" start 3 "$dir" --replicas 3 --arena "$arena" --bench)" >/dev/null
ns=$dir/cluster.secret
echo "loading $records records of 1 KB (3 copies each)"
t0=$(date +%s%N)
"$bin/kvbench" ycsb load --endpoints "$KVCTL_ENDPOINTS" --secret-file "$ns" -p recordcount="$records" \
    --status-interval 0 | grep -E 'RunTime|Throughput|Return'
echo "load took $(since "$t0") s"
"$bin/kvctl" status | sed -n '1,5p'
# YCSB A from remote sessions naming every node (they follow the failover), one line a second
"$bin/kvbench" ycsb run --endpoints "$KVCTL_ENDPOINTS" --secret-file "$ns" --mode remote --threads 4 \
    --workload a -p recordcount="$records" --seconds "${RDKV_REFILL_SECONDS:-120}" --status-interval 1 \
    >"$dir/ycsb.out" 2>"$dir/ycsb.status" &
ycsb=$!
sleep 10
pid=$(cat "$dir/node-2.pid")
mgr=$("$bin/kvctl" status 2>/dev/null | grep -o 'manager node [0-9]*' || echo "manager unknown")
echo "kill -9 node 2 (pid $pid; $mgr) at $(date +%T.%N | cut -c1-12)"
kill -9 "$pid"
# (its removal: the epoch moves on; bounded)
for _ in $(seq 100); do "$bin/kvctl" status 2>/dev/null | grep -q 'epoch [2-9]' && break; sleep 0.1; done
sleep 5
echo "restart node 2 (empty) at $(date +%T.%N | cut -c1-12)"
t0=$(date +%s%N)
"$root/tools/cluster.sh" restart "$dir" 2 >/dev/null
echo "node 2 up after $(since "$t0") s"
filled=""
for _ in $(seq 1800); do
    out=$("$bin/kvctl" status 2>/dev/null || true)
    if echo "$out" | grep -q 'filling \['; then echo "$out" | grep 'filling \[' | head -1; fi
    if echo "$out" | grep -q 'PARTITION' && ! echo "$out" | grep -q '^[0-9].*+'; then
        filled=$(since "$t0")
        break
    fi
    sleep 1
done
echo "every copy filled ${filled:-(not within 30 min)} s after the restart began, at $(date +%T.%N | cut -c1-12)"
grep -h "new copies filled\|filling partition" "$dir"/node-*.log | sed 's/^/  /'
wait "$ycsb" || true
echo "YCSB A, ops/s each second (kill at ~10 s):"
grep -oE '^[0-9-]+ [0-9:]+ [0-9]+ sec: [0-9]+ operations; [0-9.]+ current ops/sec' "$dir/ycsb.status" |
    awk '{print $3 "s:" $7}' | tr '\n' ' '
echo
grep -E 'OVERALL|Return' "$dir/ycsb.out"
