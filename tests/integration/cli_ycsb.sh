#!/usr/bin/env bash
# kvbench ycsb end to end: help and usage errors (exit 2 before any node starts); a short run of
# each core workload A-F on 3 nodes it starts itself, embedded and remote, that must finish with
# no error and exactly the asked number of operations; YCSB property files; JSON and CSV output;
# an open-loop run; and load + run against a running cluster from tools/cluster.sh through
# --endpoints. Every command runs under `timeout`, so a hang fails the test.
# usage: cli_ycsb.sh BIN_DIR
set -u
bin=${1:?usage: cli_ycsb.sh BIN_DIR}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
expect_timeout=120
. "$root/tests/integration/clilib.sh"
cleanup() {
    RDKV_BIN="$bin" "$root/tools/cluster.sh" stop "$work/c" >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

# ops_total: the sum of every [OP], Operations line of the last run's report.
ops_total() { awk -F', ' '$2 == "Operations" { s += $3 } END { print s + 0 }' "$work/out"; }

# clean_run NAME OPS: the last run reported no error and exactly OPS operations.
clean_run() {
    local name=$1 want=$2
    if grep -q 'Return=ERROR' "$work/out"; then bad "$name (errors: $(grep 'Return=ERROR' "$work/out" | head -2 | tr '\n' ' '))"; return; fi
    if ! grep -q '^\[OVERALL\], Throughput(ops/sec), ' "$work/out"; then bad "$name (no throughput line)"; return; fi
    local got
    got=$(ops_total)
    if [ "$got" != "$want" ]; then bad "$name ($got operations, wanted $want)"; return; fi
    ok "$name"
}

# reports_its_time NAME SECONDS: the last run (--seconds SECONDS, status lines every 10 s) ended
# when its time was up, not at the next status tick: its last status line says so (at most one
# second late) over the same rate as its report (within a factor of 2: the line's interval
# also holds the start), and no status line reports an idle interval.
reports_its_time() {
    local name=$1 secs=$2
    local last sec cur thr
    last=$(grep 'current ops/sec' "$work/err" | tail -1)
    sec=$(sed -E 's/.* ([0-9]+) sec: .*/\1/' <<<"$last")
    cur=$(sed -E 's/.*; ([0-9.]+) current ops\/sec.*/\1/' <<<"$last")
    thr=$(awk -F', ' '$1 == "[OVERALL]" && $2 == "Throughput(ops/sec)" { print $3 }' "$work/out")
    if [ -z "$last" ] || [ -z "$thr" ]; then bad "$name (no status line or no throughput)"; return; fi
    if grep -q ' 0\.0 current ops/sec' "$work/err"; then bad "$name (an idle status line)"; return; fi
    if awk -v s="$sec" -v want="$secs" -v c="$cur" -v t="$thr" \
        'BEGIN { exit !(s <= want + 1 && c >= t / 2 && c <= t * 2) }'; then
        ok "$name ($sec sec: $cur current ops/sec; throughput $thr)"
    else
        bad "$name (last status line: $sec sec, $cur current ops/sec; throughput $thr)"
    fi
}

kb="$bin/kvbench"

# --- help and usage errors ---------------------------------------------------------------
expect "help" 0 "readmodifywriteproportion" -- "$kb" ycsb --help
expect "no phase" 2 "say load or run" -- "$kb" ycsb --workload a
expect "bad workload" 2 "must be one of a-f" -- "$kb" ycsb run --workload g
expect "bad property value" 2 "readproportion=2" -- "$kb" ycsb run -p readproportion=2
expect "bad -p" 2 "NAME=VALUE" -- "$kb" ycsb run -p recordcount
expect "bad distribution" 2 "uniform, zipfian, latest and hotspot" -- "$kb" ycsb run -p requestdistribution=exponential
expect "missing property file" 2 "cannot read" -- "$kb" ycsb run -P "$work/nope"
expect "bad format" 2 "text, json or csv" -- "$kb" ycsb run --format xml
expect "row lock on a running cluster" 2 "set when nodes start" -- "$kb" ycsb run --endpoints 127.0.0.1:1 --row-lock dslr

# --- each workload, embedded and remote, on nodes kvbench starts -----------------------------
for w in a b c d e f; do
    ops=1200
    [ "$w" = e ] && ops=200 # scans of up to 100 records
    if expect "workload $w embedded" 0 "" -- "$kb" ycsb run --workload "$w" --nodes 3 --threads 2 \
        -p recordcount=2000 -p operationcount=$ops --status-interval 0; then
        clean_run "workload $w embedded: no errors, $ops operations" $ops
    fi
    if expect "workload $w remote" 0 "" -- "$kb" ycsb run --workload "$w" --nodes 3 --mode remote \
        --threads 3 -p recordcount=2000 -p operationcount=$ops --status-interval 0; then
        clean_run "workload $w remote: no errors, $ops operations" $ops
    fi
done
# F reports its read-modify-writes as their own operation, and says they are transactions
expect "workload f names READ-MODIFY-WRITE" 0 "\[READ-MODIFY-WRITE\], Return=OK" -- "$kb" ycsb run \
    --workload f -p recordcount=500 -p operationcount=300 --status-interval 0
grep -q 'READ-MODIFY-WRITE is one transaction' "$work/out" && ok "F says RMW is one transaction" ||
    bad "F says RMW is one transaction"

# --- property files, formats, status lines, open loop ----------------------------------------
cat >"$work/wl" <<'EOF'
# a custom mix, as a YCSB workload file
recordcount=1500
operationcount=900
workload=site.ycsb.workloads.CoreWorkload
readproportion=0.6
updateproportion=0.2
insertproportion=0.2
requestdistribution=uniform
someclient.property=ignored
EOF
if expect "property file" 0 "ignoring property 'someclient.property'" -- "$kb" ycsb run -P "$work/wl" --status-interval 0; then
    clean_run "property file: no errors, 900 operations" 900
    grep -q '^\[INSERT\], Return=OK' "$work/out" && ok "property file: inserts ran" || bad "property file: inserts ran"
fi
expect "-p after -P wins" 0 "" -- "$kb" ycsb run -P "$work/wl" -p operationcount=300 --status-interval 0 &&
    clean_run "-p after -P: 300 operations" 300
if expect "json" 0 "" -- "$kb" ycsb run --workload b -p recordcount=500 -p operationcount=400 --format json --status-interval 0; then
    if command -v python3 >/dev/null; then
        python3 - "$work/out" <<'EOF' && ok "json parses, 400 operations" || bad "json parses, 400 operations"
import json, sys
d = json.load(open(sys.argv[1]))
n = sum(v["count"] for v in d["ops"].values())
assert n == 400, n
assert d["overall"]["errors"] == 0
assert d["run"]["workload"] == "b"
EOF
    else
        grep -q '"ops_per_sec"' "$work/out" && ok "json has ops_per_sec" || bad "json has ops_per_sec"
    fi
fi
expect "csv" 0 "^op,count,ops_per_sec" -- "$kb" ycsb run --workload c -p recordcount=500 -p operationcount=300 --format csv --status-interval 0
expect "status lines" 0 "sec: [0-9]* operations; .* current ops/sec" -- "$kb" ycsb run --workload c \
    -p recordcount=500 --seconds 1.5 --status-interval 0.5
expect "open loop" 0 "Throughput" -- "$kb" ycsb run --workload a -p recordcount=500 --seconds 1 --target 500 --status-interval 0
grep -q 'Return=ERROR' "$work/out" && bad "open loop: no errors" || ok "open loop: no errors"

# --- a running cluster, by its endpoints ---------------------------------------------------
if RDKV_BIN="$bin" timeout 60 "$root/tools/cluster.sh" start 3 "$work/c" --bench >"$work/out" 2>"$work/err"; then
    ep=$(tail -1 "$work/out" | sed 's/^export KVCTL_ENDPOINTS=//')
    # kvbench drives the nodes' workload services: it proves the node secret
    export RDKV_SECRET_FILE=$work/c/cluster.secret
    # a run on a cluster never loaded measures nothing and says what to do (it used to report
    # the NOT_FOUND reads as throughput and exit 0)
    expect "run before any load fails" 1 "holds none of this run's 3000 records" -- "$kb" ycsb run --endpoints "$ep" --workload c -p recordcount=3000 --seconds 1
    grep -q "Load it first: kvbench ycsb load --endpoints $ep -p recordcount=3000" "$work/err" &&
        ok "run before any load: names the load to run" || bad "run before any load: names the load to run"
    grep -q 'Throughput' "$work/out" && bad "run before any load: reports no figures" ||
        ok "run before any load: reports no figures"
    expect "load a running cluster" 0 "\[INSERT\], Return=OK, 3000" -- "$kb" ycsb load --endpoints "$ep" -p recordcount=3000
    # a run that expects more records than were loaded: warned before, flagged in the report,
    # exit 1
    expect "run past the loaded records fails" 1 "only [0-9]* of 16 records looked for are on the cluster" -- \
        "$kb" ycsb run --endpoints "$ep" --workload c -p recordcount=6000 -p operationcount=600 --status-interval 0
    grep -q '^# warning: [0-9]* of 600 operations found no record' "$work/out" &&
        grep -q '^\[READ\], Return=NOT_FOUND, [1-9]' "$work/out" &&
        ok "run past the loaded records: the report says how many found nothing" ||
        bad "run past the loaded records: the report says how many found nothing"
    expect "run embedded on it" 0 "" -- "$kb" ycsb run --endpoints "$ep" --workload a -p recordcount=3000 -p operationcount=600 --status-interval 0 &&
        clean_run "running cluster, embedded: no errors" 600
    grep -q 'Return=NOT_FOUND' "$work/out" && bad "running cluster: every read found its record" || ok "running cluster: every read found its record"
    expect "run remote on it" 0 "" -- "$kb" ycsb run --endpoints "$ep" --mode remote --workload b -p recordcount=3000 -p operationcount=600 --status-interval 0 &&
        clean_run "running cluster, remote: no errors" 600
    # a timed run is over when its time is (it used to wait for the 10 s status tick)
    expect "timed run embedded" 0 "" -- "$kb" ycsb run --endpoints "$ep" --workload a -p recordcount=3000 --seconds 1 &&
        reports_its_time "timed run embedded: reports 1 s, not 10" 1
    expect "timed run remote" 0 "" -- "$kb" ycsb run --endpoints "$ep" --mode remote --workload a -p recordcount=3000 --seconds 1 &&
        reports_its_time "timed run remote: reports 1 s, not 10" 1
    unset RDKV_SECRET_FILE
else
    bad "cluster.sh start 3"
fi

cli_summary
