#!/usr/bin/env bash
# kvbench ycsb --db against real servers: starts a private redis-server, a private PostgreSQL
# and a 3-node rdkv cluster (tools/peers.sh's functions), loads each, runs YCSB C, A, F and the
# transfer workload on each (rdkv remote and embedded too) with a fixed operation count, and
# checks correctness only -- never timing: every run exits 0 with exactly the asked operations
# and no error, and every transfer check finds the total unchanged. It also checks that the
# transfer check catches a wrong total, and the peers' usage errors. Every command runs under
# `timeout`; whatever it started is stopped on exit.
# Exit 77 (skipped) when redis-server, PostgreSQL or kvbench's peers are missing and we are
# not root (as root, tools/test.sh installs them, so their absence is a failure).
# usage: peers.sh BIN_DIR
set -u
bin=${1:?usage: peers.sh BIN_DIR}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
expect_timeout=90
. "$root/tests/integration/clilib.sh"
RDKV_BIN=$bin . "$root/tools/peers.sh"
cleanup() {
    peers_stop
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

missing=""
command -v redis-server >/dev/null 2>&1 || missing="$missing redis-server(redis-server)"
peers_pg_bindir >/dev/null || missing="$missing postgres(postgresql)"
dbs=$(peers_kvbench_dbs)
case ", $dbs," in *", redis,"*) ;; *) missing="$missing kvbench-redis(libhiredis-dev)" ;; esac
case ", $dbs," in *", postgres,"*) ;; *) missing="$missing kvbench-postgres(libpq-dev)" ;; esac
if [ -n "$missing" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "SKIP: missing:$missing (the Debian packages in parentheses; tools/test.sh installs them as root, then rebuild)"
        exit 77
    fi
    bad "missing as root:$missing (tools/test.sh installs these Debian packages; rebuild after)"
    cli_summary
    exit 1
fi

peers_init "$work/srv"
peers_start_redis || { bad "start redis-server"; cli_summary; exit 1; }
peers_start_pg || { bad "start postgres"; cli_summary; exit 1; }
peers_start_rdkv 3 || { bad "start a 3-node rdkv cluster"; cli_summary; exit 1; }

kb="$bin/kvbench"
records=2000 ops=2400 ops_e=300 accounts=50 # 2400: a whole share for 6 client threads and for 3 nodes

# counted NAME WANT: the last report has WANT operations in all, none failed.
counted() {
    local got
    got=$(awk -F', ' '$2 == "Operations" { n += $3 } $2 ~ /^Return=ERROR/ { e = e $1 " " $3 "; " }
                     END { if (e != "") print "errors: " e; else print n + 0 }' "$work/out")
    if [ "$got" = "$2" ]; then ok "$1"; else bad "$1 (got: $got, wanted $2 operations and no error)"; fi
}

# --- usage -----------------------------------------------------------------------------------
expect "unknown --db" 2 "must be rdkv, redis or postgres" -- "$kb" ycsb run --db mysql
expect "accounts only for transfer" 2 "transfer workload" -- "$kb" ycsb run --db redis -p accounts=10
expect "postgres unreachable" 1 "cannot connect to postgres" -- "$kb" ycsb load --db postgres --pg "host=127.0.0.1 port=1 dbname=postgres connect_timeout=5"

# --- every system: C, A, F and transfer ------------------------------------------------------
for s in rdkv-remote rdkv-embedded redis postgres; do
    peers_kvbench_args "$s" 6 3 # 6 connections; rdkv embedded: 2 workers per node
    sys=("${peers_args[@]}")
    props=(-p recordcount=$records -p operationcount=$ops)
    expect "$s: load $records records" 0 "" -- "$kb" ycsb load "${props[@]}" "${sys[@]}" || continue
    for w in c a f; do
        expect "$s: workload $w" 0 "" -- "$kb" ycsb run --workload $w "${props[@]}" "${sys[@]}" \
            --status-interval 0 && counted "$s: workload $w: $ops operations, no errors" $ops
    done
    grep -q '^\[READ-MODIFY-WRITE\], Return=OK' "$work/out" && ok "$s: F ran READ-MODIFY-WRITEs" ||
        bad "$s: F ran no READ-MODIFY-WRITE"
    # E: scans and inserts
    expect "$s: workload e" 0 "" -- "$kb" ycsb run --workload e "${props[@]}" -p operationcount=$ops_e \
        "${sys[@]}" --status-interval 0 && counted "$s: workload e: $ops_e operations, no errors" $ops_e
    grep -q '^\[SCAN\], Return=OK' "$work/out" && ok "$s: E ran SCANs" || bad "$s: E ran no SCAN"
    if [ "$s" = redis ] && command -v redis-cli >/dev/null 2>&1; then
        # every record, loaded or inserted by E, is in the index that SCAN reads, and in order
        ins=$(awk -F', ' '$1 == "[INSERT]" && $2 == "Return=OK" { print $3 }' "$work/out")
        rcli=(redis-cli -h 127.0.0.1 -p "${REDIS_ADDR##*:}")
        got=$("${rcli[@]}" ZCARD _indices)
        [ "$got" = $((records + ${ins:-0})) ] && ok "redis: the scan index holds every record" ||
            bad "redis: the scan index holds $got keys, wanted $records + ${ins:-0}"
        first=$("${rcli[@]}" EVAL "return redis.call('ZRANGEBYLEX', KEYS[1], '[user', '+', 'LIMIT', 0, 1)" 1 _indices)
        [ "$first" = "$("${rcli[@]}" --raw KEYS 'user*' | LC_ALL=C sort | head -1)" ] &&
            ok "redis: a scan starts at the smallest key" || bad "redis: a scan starts at '$first'"
    fi
    xf=(--workload transfer -p accounts=$accounts)
    expect "$s: load $accounts accounts" 0 "" -- "$kb" ycsb load "${xf[@]}" "${sys[@]}" || continue
    want="transfer check: $accounts of $accounts accounts, total $((accounts * 1000)), expected $((accounts * 1000)): ok"
    if expect "$s: transfer, total unchanged" 0 "$want" -- "$kb" ycsb run "${xf[@]}" \
        -p operationcount=$ops "${sys[@]}" --status-interval 0; then
        counted "$s: transfer: $ops operations, no errors" $ops
    fi
done

# --- the check sees a wrong total --------------------------------------------------------------
if command -v redis-cli >/dev/null 2>&1; then
    redis-cli -h 127.0.0.1 -p "${REDIS_ADDR##*:}" SET acct0000000000 1 >/dev/null
    expect "redis: a changed balance fails the transfer check" 1 "check: .*FAILED" -- "$kb" ycsb run \
        --db redis --redis "$REDIS_ADDR" --workload transfer -p accounts=$accounts -p operationcount=10 \
        --status-interval 0
fi

cli_summary
