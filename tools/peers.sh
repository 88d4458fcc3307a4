#!/usr/bin/env bash
# rdkv beside Redis and PostgreSQL: starts a private redis-server, a private PostgreSQL and a
# 3-node rdkv cluster on 127.0.0.1 (free ports, one temporary directory), runs the same kvbench
# ycsb workloads against each with the same number of client connections, writes docs/reports/peers.md
# (a table, the command, the machine, what differs) and a gnuplot bar chart, and stops
# everything it started, also on failure or Ctrl-C.
#
# Sourced (tests/integration/peers.sh), it only defines the functions that start and stop the
# servers: peers_init DIR, peers_start_redis, peers_start_pg, peers_start_rdkv N, peers_stop.
set -u

peers_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
peers_bin=${RDKV_BIN:-$peers_root/build/bin}

peers_log() { echo "peers.sh: $*" >&2; }

# A TCP port on 127.0.0.1 that nothing listens on (and that no earlier call handed out).
peers_used_ports=" "
peers_free_port() {
    local p tries=0
    while [ $tries -lt 200 ]; do
        tries=$((tries + 1))
        # below the kernel's ephemeral range (32768-60999 by default), where the outgoing
        # connections of tests running beside us take their ports
        p=$((20000 + RANDOM % 12000))
        case $peers_used_ports in *" $p "*) continue ;; esac
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            peers_used_ports="$peers_used_ports$p "
            echo "$p"
            return 0
        fi
    done
    return 1
}

# The PostgreSQL server binaries (initdb, pg_ctl), newest version first.
peers_pg_bindir() {
    local d
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n -r); do
        [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && { echo "$d"; return 0; }
    done
    command -v initdb >/dev/null 2>&1 && [ -x "$(dirname "$(command -v initdb)")/pg_ctl" ] &&
        { dirname "$(command -v initdb)"; return 0; }
    return 1
}

# peers_init DIR: where everything lives (DIR is created; peers_stop stops what is in it).
peers_init() {
    peers_dir=$1
    mkdir -p "$peers_dir" || return 1
    # as root, postgres runs as nobody, who must reach its directory (mktemp makes them 700)
    [ "$(id -u)" != 0 ] || chmod o+x "$peers_dir" "$(dirname "$peers_dir")"
    peers_redis_pid="" peers_pg_data="" peers_rdkv_dir=""
}

# Starts redis-server without persistence; sets REDIS_ADDR (HOST:PORT). A port taken between
# peers_free_port and redis-server's bind (tests run beside each other) costs one more try on
# another port; after the last, the log's tail says why.
peers_start_redis() {
    command -v redis-server >/dev/null 2>&1 || { peers_log "no redis-server (Debian: redis-server)"; return 1; }
    local port try i
    mkdir -p "$peers_dir/redis"
    for try in 1 2 3 4 5; do
        port=$(peers_free_port) || return 1
        rm -f "$peers_dir/redis/redis.pid"
        redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
            --pidfile "$peers_dir/redis/redis.pid" --logfile "$peers_dir/redis/redis.log" \
            --dir "$peers_dir/redis" >/dev/null || continue
        for i in $(seq 100); do
            [ -s "$peers_dir/redis/redis.pid" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
            sleep 0.1
        done
        peers_redis_pid=$(cat "$peers_dir/redis/redis.pid" 2>/dev/null)
        if [ -n "$peers_redis_pid" ] && kill -0 "$peers_redis_pid" 2>/dev/null; then
            REDIS_ADDR=127.0.0.1:$port
            peers_log "redis-server $(redis-server --version | grep -o 'v=[0-9.]*' | cut -c3-) on $REDIS_ADDR (pid $peers_redis_pid, no persistence)"
            return 0
        fi
        peers_redis_pid=""
        peers_log "redis-server did not come up on port $port (try $try of 5)"
    done
    peers_log "redis-server did not start; the end of $peers_dir/redis/redis.log:"
    tail -n 20 "$peers_dir/redis/redis.log" >&2 2>/dev/null
    return 1
}

# Runs a command as the user that owns the PostgreSQL directory (postgres refuses root).
peers_as_pg() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u "$peers_pg_user" -- "$@"
    else
        "$@"
    fi
}

# Starts PostgreSQL with fsync, synchronous_commit and full_page_writes off; sets PG_CONNINFO.
peers_start_pg() {
    local bindir port
    bindir=$(peers_pg_bindir) || { peers_log "no PostgreSQL server binaries (Debian: postgresql)"; return 1; }
    port=$(peers_free_port) || return 1
    peers_pg_user=$(id -un)
    if [ "$(id -u)" = 0 ]; then
        # as root: an unprivileged user owns the cluster (nobody has no home, which is fine)
        peers_pg_user=nobody
    fi
    mkdir -p "$peers_dir/pg"
    [ "$(id -u)" = 0 ] && chown "$peers_pg_user" "$peers_dir/pg"
    peers_as_pg "$bindir/initdb" -D "$peers_dir/pg/data" -U postgres --auth=trust -E UTF8 \
        --no-sync >"$peers_dir/pg/initdb.log" 2>&1 ||
        { peers_log "initdb failed (see $peers_dir/pg/initdb.log)"; return 1; }
    peers_pg_data=$peers_dir/pg/data peers_pg_bindir=$bindir # (set before: peers_stop needs both)
    local try
    for try in 1 2 3; do
        [ "$try" = 1 ] || port=$(peers_free_port) || return 1
        peers_as_pg "$bindir/pg_ctl" -D "$peers_pg_data" -l "$peers_dir/pg/postgres.log" -w -t 60 \
            -o "-p $port -k $peers_dir/pg -c listen_addresses=127.0.0.1 -c fsync=off \
-c synchronous_commit=off -c full_page_writes=off -c shared_buffers=256MB -c max_connections=200" \
            start >/dev/null 2>&1 && break
        peers_log "postgres did not come up on port $port (try $try of 3)"
        if [ "$try" = 3 ]; then
            peers_log "postgres did not start; the end of $peers_dir/pg/postgres.log:"
            tail -n 20 "$peers_dir/pg/postgres.log" >&2 2>/dev/null
            return 1
        fi
    done
    PG_CONNINFO="host=127.0.0.1 port=$port dbname=postgres user=postgres"
    peers_log "postgres $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (fsync, synchronous_commit, full_page_writes off; run as $peers_pg_user)"
}

# Starts an rdkv cluster of N nodes (tools/cluster.sh); sets RDKV_ENDPOINTS.
peers_start_rdkv() {
    local line
    line=$(RDKV_BIN=$peers_bin "$peers_root/tools/cluster.sh" start "$1" "$peers_dir/rdkv" --bench 2>"$peers_dir/rdkv-start.log") ||
        { peers_log "the rdkv cluster did not start (see $peers_dir/rdkv-start.log)"; cat "$peers_dir/rdkv-start.log" >&2; return 1; }
    peers_rdkv_dir=$peers_dir/rdkv
    line=${line##*$'\n'} # the last line: the endpoints
    RDKV_ENDPOINTS=${line#export KVCTL_ENDPOINTS=}
    # kvbench drives the nodes' workload services: it proves the node secret
    export RDKV_SECRET_FILE=$peers_rdkv_dir/cluster.secret
    peers_log "rdkv: $1 nodes on $RDKV_ENDPOINTS"
}

# Stops everything peers_start_* started.
peers_stop() {
    if [ -n "${peers_rdkv_dir:-}" ]; then
        RDKV_BIN=$peers_bin "$peers_root/tools/cluster.sh" stop "$peers_rdkv_dir" >/dev/null 2>&1
        peers_rdkv_dir=""
    fi
    if [ -n "${peers_redis_pid:-}" ]; then
        kill "$peers_redis_pid" 2>/dev/null
        local i
        for i in $(seq 50); do kill -0 "$peers_redis_pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$peers_redis_pid" 2>/dev/null
        peers_redis_pid=""
    fi
    if [ -n "${peers_pg_data:-}" ]; then
        peers_as_pg "$peers_pg_bindir/pg_ctl" -D "$peers_pg_data" -m immediate -w stop >/dev/null 2>&1
        peers_pg_data=""
    fi
}

# peers_kvbench_args SYSTEM CONNECTIONS NODES [TASKS]: kvbench ycsb's options for one of
# rdkv-remote, rdkv-embedded, redis, postgres with CONNECTIONS clients (rdkv embedded:
# ceil(CONNECTIONS / NODES) threads per node, each running TASKS workers as tasks, default 1),
# into the array peers_args.
peers_kvbench_args() {
    case $1 in
    rdkv-remote) peers_args=(--endpoints "$RDKV_ENDPOINTS" --mode remote --threads "$2") ;;
    rdkv-embedded) peers_args=(--endpoints "$RDKV_ENDPOINTS" --mode embedded --threads $((($2 + $3 - 1) / $3)) --tasks "${4:-1}") ;;
    redis) peers_args=(--db redis --redis "$REDIS_ADDR" --threads "$2") ;;
    postgres) peers_args=(--db postgres --pg "$PG_CONNINFO" --threads "$2") ;;
    esac
}

# The --db values kvbench was built with.
peers_kvbench_dbs() { "$peers_bin/kvbench" --help 2>/dev/null | sed -n 's/^kvbench ycsb --db takes: \(.*\) (the.*/\1/p'; }

[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

# ---------------------------------------------------------------------------------------------
# The comparison

usage() {
    cat <<'EOF'
usage: tools/peers.sh [--quick] [options]

Starts a private Redis, a private PostgreSQL (fsync, synchronous_commit and full_page_writes
off) and a 3-node rdkv cluster on 127.0.0.1, runs the same kvbench ycsb workloads against
rdkv (remote clients and embedded workers), Redis and PostgreSQL with the same number of
client connections, and writes a report with a table and a bar chart. Everything it starts
is stopped when it ends.

  --quick           a smoke run: 10,000 records, 2 s per workload, 1,000 accounts
  --threads N       client connections per system (default 6); rdkv embedded runs
                    ceil(N / nodes) workers per node
  --records N       YCSB recordcount (default 100000)
  --fieldlength N   bytes per field, 10 fields a record (default 100: 1 KB records)
  --distribution D  YCSB requestdistribution for every system: uniform (default, the
                    setting of rdkv's targets), zipfian (YCSB's own A-F default) or latest
  --seconds S       measured seconds per workload (default 10)
  --warmup S        unmeasured seconds first (default 1)
  --ops N           run N operations per workload instead of --seconds
  --repeat N        run each workload N times and report the run of median throughput
                    (default 1)
  --accounts N      the transfer workload's accounts (default 10000)
  --workloads LIST  space- or comma-separated, of a b c d e f transfer (default "a b c f
                    transfer")
  --systems LIST    of rdkv-remote rdkv-embedded redis postgres (default: all four)
  --nodes N         rdkv nodes (default 3)
  --embedded-tasks K  rdkv embedded: workers per thread, each a task (default 16): the way
                    an application inside a node keeps many operations in flight
  --out FILE        the report (default docs/reports/peers.md)
  --plot FILE       the chart (default docs/reports/plots/peers.png; none: no chart)
  --results DIR     keep every run's kvbench output there (default: a temporary directory)
Exit status: 0 when every run finished without errors and every transfer check held, 1 if
not, 2 on bad usage.
EOF
}

repeat=1 threads=6 records=100000 fieldlength=100 distribution=uniform seconds=10 warmup=1 ops="" accounts=10000 nodes=3 etasks=16
workloads="a b c f transfer" systems="rdkv-remote rdkv-embedded redis postgres"
out=$peers_root/docs/reports/peers.md plot=$peers_root/docs/reports/plots/peers.png results="" quick=0
cmdline="tools/peers.sh${*:+ $*}"
while [ $# -gt 0 ]; do
    case $1 in
    -h | --help) usage; exit 0 ;;
    --quick) quick=1 records=10000 seconds=2 warmup=0.5 accounts=1000; shift; continue ;;
    esac
    [ $# -ge 2 ] || { echo "peers.sh: $1 needs a value (or is unknown; see --help)" >&2; exit 2; }
    case $1 in
    --threads) threads=$2 ;;
    --records) records=$2 ;;
    --fieldlength) fieldlength=$2 ;;
    --distribution) distribution=$2 ;;
    --seconds) seconds=$2 ;;
    --warmup) warmup=$2 ;;
    --ops) ops=$2 ;;
    --repeat) repeat=$2 ;;
    --accounts) accounts=$2 ;;
    --workloads) workloads=${2//,/ } ;;
    --systems) systems=${2//,/ } ;;
    --nodes) nodes=$2 ;;
    --embedded-tasks) etasks=$2 ;;
    --out) out=$2 ;;
    --plot) plot=$2 ;;
    --results) results=$2 ;;
    *) echo "peers.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift 2
done
for v in repeat threads records fieldlength accounts nodes etasks ${ops:+ops}; do
    case ${!v} in '' | *[!0-9]* | 0) echo "peers.sh: --${v/etasks/embedded-tasks} needs a positive number (got '${!v}')" >&2; exit 2 ;; esac
done
case $distribution in uniform | zipfian | latest) ;; *) echo "peers.sh: --distribution must be uniform, zipfian or latest (got '$distribution')" >&2; exit 2 ;; esac
for w in $workloads; do
    case $w in a | b | c | d | e | f | transfer) ;; *) echo "peers.sh: unknown workload '$w'" >&2; exit 2 ;; esac
done
for s in $systems; do
    case $s in rdkv-remote | rdkv-embedded | redis | postgres) ;; *) echo "peers.sh: unknown system '$s'" >&2; exit 2 ;; esac
done
for b in kvbench kvserver kvcluster; do
    [ -x "$peers_bin/$b" ] || { echo "peers.sh: no $peers_bin/$b; build first: cmake -S . -B build && cmake --build build -j" >&2; exit 1; }
done

loadavg=$(cut -d' ' -f1-3 /proc/loadavg)
tmp=$(mktemp -d /tmp/rdkv-peers.XXXXXX)
[ -n "$results" ] || results=$tmp/results
mkdir -p "$results"
cleanup() {
    peers_stop
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
peers_init "$tmp/srv"

dbs=$(peers_kvbench_dbs)
skipped=""
want() { case " $systems " in *" $1 "*) return 0 ;; esac; return 1; }
if want redis; then
    case ", $dbs," in *", redis,"*) peers_start_redis || skipped="$skipped redis(server did not start)" ;;
    *) skipped="$skipped redis(kvbench built without hiredis)" ;; esac
fi
if want postgres; then
    case ", $dbs," in *", postgres,"*) peers_start_pg || skipped="$skipped postgres(server did not start)" ;;
    *) skipped="$skipped postgres(kvbench built without libpq)" ;; esac
fi
if want rdkv-remote || want rdkv-embedded; then
    peers_start_rdkv "$nodes" || exit 1
fi
[ -z "$skipped" ] || peers_log "skipping:$skipped"

props=(-p recordcount="$records" -p fieldcount=10 -p fieldlength="$fieldlength"
       -p requestdistribution="$distribution")
if [ -n "$ops" ]; then
    runlen=(-p operationcount="$ops")
else
    runlen=(--seconds "$seconds" --warmup "$warmup")
fi
per_node=$(((threads + nodes - 1) / nodes))
failed=0

kb() { # kb SYSTEM ARGS...: kvbench ycsb against SYSTEM
    local s=$1
    shift
    peers_kvbench_args "$s" "$threads" "$nodes" "$etasks"
    timeout 900 "$peers_bin/kvbench" ycsb "$@" "${peers_args[@]}"
}

# field FILE OP METRIC: one number of a YCSB text report ("" if absent).
field() { awk -F', ' -v op="[$2]" -v m="$3" '$1 == op && $2 == m { print $3; exit }' "$1" 2>/dev/null; }
# The ops of a report, in order ([OVERALL], [TXN], [COST] are not ops).
ops_of() { awk -F', ' '$2 == "Operations" { gsub(/[][]/, "", $1); print $1 }' "$1" 2>/dev/null; }
fmt_int() { if [ -n "$1" ]; then printf "%.0f" "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'; else echo "–"; fi; }
fmt_us() { [ -n "$1" ] && printf "%.0f" "$1" || echo "–"; }

# runs SYSTEM W ARGS...: kvbench ycsb run ARGS --repeat times; the run of median throughput
# becomes SYSTEM-W.txt (every run's report stays as SYSTEM-W.rK.txt). A failed run fails all.
runs() {
    local s=$1 w=$2 k
    shift 2
    for k in $(seq "$repeat"); do
        kb "$s" run "$@" --status-interval 0 >"$results/$s-$w.r$k.txt" 2>"$results/$s-$w.r$k.err" || failed=1
        grep -q 'Return=ERROR\|check.*FAILED' "$results/$s-$w.r$k.txt" 2>/dev/null && failed=1
    done
    k=$(for k in $(seq "$repeat"); do
        echo "$(field "$results/$s-$w.r$k.txt" OVERALL 'Throughput(ops/sec)') $k"
    done | sort -g | awk '{ k[NR] = $2 } END { print k[int((NR + 1) / 2)] }')
    cp "$results/$s-$w.r$k.txt" "$results/$s-$w.txt"
    cp "$results/$s-$w.r$k.err" "$results/$s-$w.err"
}

ran_systems=""
for s in $systems; do
    case " $skipped" in *" $s("*) continue ;; esac
    ran_systems="$ran_systems $s"
    loaded=0
    for w in $workloads; do
        if [ "$w" = transfer ]; then
            peers_log "$s: transfer on $accounts accounts"
            kb "$s" load --workload transfer -p accounts="$accounts" >/dev/null 2>"$results/$s-$w.load.err" ||
                { peers_log "$s: loading the accounts failed: $(tail -1 "$results/$s-$w.load.err")"; failed=1; continue; }
            runs "$s" "$w" --workload transfer -p accounts="$accounts" "${runlen[@]}"
        else
            if [ $loaded = 0 ]; then
                peers_log "$s: loading $records records"
                kb "$s" load "${props[@]}" >"$results/$s-load.txt" 2>"$results/$s-load.err" ||
                    { peers_log "$s: loading failed: $(tail -1 "$results/$s-load.err")"; failed=1; break; }
                loaded=1
            fi
            peers_log "$s: workload $w"
            runs "$s" "$w" --workload "$w" "${props[@]}" "${runlen[@]}"
        fi
        [ -s "$results/$s-$w.txt" ] || { peers_log "$s: workload $w: no report ($(tail -1 "$results/$s-$w.err"))"; failed=1; }
    done
done
peers_stop

# ---------------------------------------------------------------------------------------------
# The report


cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
redis_v=$(redis-server --version 2>/dev/null | grep -o 'v=[0-9.]*' | cut -c3-)
pg_v=$("$(peers_pg_bindir 2>/dev/null)/postgres" --version 2>/dev/null | awk '{print $3}')
if [ -n "$ops" ]; then runtext="$ops operations per workload"; else runtext="${seconds} s measured per workload after a ${warmup} s warm-up"; fi
# table_head FIRST ALIGN: a table's header, FIRST ("| workload |") then a column per system
# whose separator is ALIGN ("---:" or "---").
table_head() {
    local s
    printf "%s" "$1"
    for s in $ran_systems; do printf " %s |" "$(label "$s")"; done
    printf "\n|%s" "$(echo "$1" | sed 's/[^|]*|/---|/g; s/^---|//')"
    for s in $ran_systems; do printf -- "%s|" "$2"; done
    echo
}
# table_rows CELL: a row per workload, a cell per system: CELL FILE prints the cell of a run's
# report (a run without a report says so).
table_rows() {
    local w s f
    for w in $workloads; do
        printf "| %s |" "$w"
        for s in $ran_systems; do
            f=$results/$s-$w.txt
            if [ ! -s "$f" ]; then
                printf " **no report** |"
            else
                printf " %s |" "$("$1" "$f")"
            fi
        done
        echo
    done
}
throughput_cell() { fmt_int "$(field "$1" OVERALL 'Throughput(ops/sec)')"; }
outcome_cell() {
    local ab er ck rt
    ab=$(field "$1" TXN Aborts)
    er=$(awk -F', ' '$2 ~ /^Return=ERROR/ { split($3, a, " "); s += a[1] } END { print s + 0 }' "$1")
    ck=$(grep -o 'transfer check: .*: [a-zA-Z]*$' "$1" | sed 's/.*: //')
    rt=$(field "$1" COST RoundTripsPerOp)
    case $rt in '' | 0.00) rt="" ;; esac
    printf "%s aborts, %s errors%s%s" "$(fmt_int "${ab:-0}")" "$er" "${ck:+, total $ck}" \
        "${rt:+, $rt fabric round trips/op}"
}
label() {
    case $1 in
    rdkv-remote) echo "rdkv remote" ;;
    rdkv-embedded) echo "rdkv embedded" ;;
    redis) echo "Redis ${redis_v}" ;;
    postgres) echo "PostgreSQL ${pg_v}" ;;
    esac
}

mkdir -p "$(dirname "$out")"
{
    cat <<EOF
# rdkv beside Redis and PostgreSQL

Generated by \`tools/peers.sh\` (do not edit by hand; the text is in the script). The same
\`kvbench ycsb\` generators (YCSB's scrambled Zipfian key chooser, the core workloads' op mixes,
the same records), the same runner and the same histograms drive every system; only the
operation's implementation differs (\`tools/kvbench/peer_redis.c\`, \`peer_pg.c\`). These are
numbers for this machine, with client and servers sharing its cores, not a verdict on the
systems.

**Command:** \`$cmdline\`$([ $quick = 1 ] && echo " (a smoke run: short and small, noisy)")

**Machine:** $(nproc) CPUs ($cpu), $mem, kernel $(uname -r); everything on 127.0.0.1; load
average $loadavg when the run began (other work on the machine shows up in the figures).

**Run:** $(fmt_int "$records") records of 10 x $fieldlength bytes, keys drawn $distribution; $runtext; $threads client connections per
system (rdkv embedded: $per_node threads in each of $nodes nodes, each running $etasks workers as
tasks); closed loop; transfer on
$(fmt_int "$accounts") accounts; $([ "$repeat" = 1 ] && echo "one run of each" || echo "each workload run $repeat times, the run of median throughput shown").
Runs on a loaded machine vary, by several times at worst: compare systems within one report.

## What differs

- **Durability.** rdkv keeps its data in memory only. Redis runs with no persistence (no RDB,
  no AOF). PostgreSQL runs with \`fsync=off\`, \`synchronous_commit=off\`,
  \`full_page_writes=off\`: it still writes WAL and data files to the page cache, but never
  waits for the disk. None of the three survives a power loss here.
- **Isolation.** Every rdkv operation is one serializable transaction (strict two-phase
  locking), a read included. Redis runs each command atomically on one thread; its INSERT
  is MULTI/EXEC (the hash and its index entry), its SCAN one Lua script (atomic), its
  READ-MODIFY-WRITE (F) and TRANSFER are optimistic WATCH/MULTI/EXEC transactions, retried
  when EXEC answers nil. PostgreSQL runs READ, UPDATE, INSERT and SCAN as single statements in
  autocommit (READ COMMITTED, which for one statement on one row is as strong as it needs,
  and gives a scan one snapshot),
  F as \`SELECT ... FOR UPDATE\` + \`UPDATE\` in one transaction (the row lock makes it
  serializable), and TRANSFER at SERIALIZABLE (both rows in one \`SELECT ... FOR UPDATE\`,
  locked in id order, then two \`UPDATE\`s), retrying serialization failures. Retries are
  counted as aborts, not errors.
- **Data model.** A YCSB record is one 1 KB value in rdkv (an update writes one field's bytes
  in place with \`rdkv_patch\`), a hash of 10 fields in Redis (an update is \`HSET\` of one
  field), a row of 10 text columns in PostgreSQL (\`UPDATE\` of one column): YCSB's own bindings
  store them that way. A scan reads the next records in key order: rdkv's range scan under a
  shared range lock, PostgreSQL's \`ORDER BY ycsb_key LIMIT n\` on the primary key, and in
  Redis a sorted set of every key kept beside the hashes (\`ZRANGEBYLEX\`, then \`HGETALL\`
  of each; YCSB's binding keeps such an index too).
- **Transport.** rdkv remote: each client connection is an \`rdkv_connect\` session over the
  soft (TCP loopback) fabric to the $nodes nodes. A read, an insert, an update and F's
  read-modify-write are one-shot operations (\`rdkv_get\`, \`rdkv_put\`, \`rdkv_patch\`, the
  last one a read-modify-write run by the key's owner, as a Redis Lua script would be; the
  Redis runs here use WATCH/MULTI/EXEC instead): one request, sent straight to the key's
  owner. TRANSFER is an interactive transaction coordinated by one node (two-phase commit
  across nodes when it spans them): both accounts read for update in one request
  (\`rdkv_txn_get_many\`, as Redis's \`MGET\`), and the two writes, of rows the transaction
  then holds, go with the commit's request.
  rdkv embedded: the workers run inside the nodes as tasks ($etasks per thread: one thread
  keeps that many operations in flight, as an application linked into a node would) and
  reach other nodes' data with one-sided fabric operations; there is no client hop at all,
  so it is not a client/server figure. Redis: RESP over loopback TCP to
  one single-threaded server. PostgreSQL: its protocol over loopback TCP, one backend process
  per connection, prepared statements.
- **Server CPUs.** rdkv runs $nodes processes, Redis one thread, PostgreSQL one process per
  connection; all share the machine's $(nproc) CPUs with the client.
- **Round trips per operation.** A Redis or PostgreSQL READ, UPDATE or INSERT is one request
  and one reply. Redis's F and TRANSFER take three (\`WATCH\`; the read; \`MULTI\` ... \`EXEC\`
  pipelined), PostgreSQL's F four (\`BEGIN\`, \`SELECT\`, \`UPDATE\`, \`COMMIT\`) and its
  TRANSFER five, each once more per retry; an rdkv remote TRANSFER takes two requests from
  the client, and its coordinator then one-sided locks and a two-phase commit with the other
  node when the accounts live on two. An rdkv operation is a transaction whose begin,
  reads, writes and commit cross the fabric; each rdkv report counts its fabric round trips
  per operation (\`[COST], RoundTripsPerOp\`, in the last table), every one a loopback TCP
  exchange with thread wake-ups on the soft transport.
EOF
    [ -z "$skipped" ] || echo "- **Not run:**$skipped."
    echo
    echo "## Throughput (operations per second, all operation types)"
    echo
    table_head "| workload |" "---:"
    table_rows throughput_cell
    echo
    echo "## Latency: p50 / p99 (µs) per operation type"
    echo
    table_head "| workload | operation |" "---:"
    for w in $workloads; do
        opsl=""
        for s in $ran_systems; do opsl="$opsl $(ops_of "$results/$s-$w.txt")"; done
        for op in $(echo $opsl | tr ' ' '\n' | awk '!seen[$0]++'); do
            printf "| %s | %s |" "$w" "$op"
            for s in $ran_systems; do
                f=$results/$s-$w.txt
                p50=$(field "$f" "$op" '50thPercentileLatency(us)')
                p99=$(field "$f" "$op" '99thPercentileLatency(us)')
                if [ -n "$p50" ]; then printf " %s / %s |" "$(fmt_us "$p50")" "$(fmt_us "$p99")"; else printf " – |"; fi
            done
            echo
        done
    done
    echo
    echo "## Retries, errors and checks"
    echo
    echo "Aborts are conflicts retried inside an operation (rdkv: a lock wait past --lock-timeout; Redis: a"
    echo "nil EXEC; PostgreSQL: a serialization failure or a deadlock). An error is an operation that"
    echo "did not complete. rdkv's fabric round trips per operation are those its workers issued (remote:"
    echo "the client sessions'; embedded: the workers' inside the nodes)."
    echo
    table_head "| workload |" "---"
    table_rows outcome_cell
    if [ "$plot" != none ] && command -v gnuplot >/dev/null 2>&1; then
        echo
        echo "![throughput per workload and system](plots/$(basename "$plot"))"
    fi
    echo
    echo "Each run's full kvbench report (YCSB text: every percentile, aborts, the run's settings)"
    echo "is what \`--results DIR\` keeps."
} >"$out"

if [ "$plot" != none ]; then
    if ! command -v gnuplot >/dev/null 2>&1; then
        peers_log "gnuplot not found (Debian: gnuplot-nox): no chart"
    else
        mkdir -p "$(dirname "$plot")"
        dat=${plot%.*}.dat
        {
            printf "workload"
            for s in $ran_systems; do printf "\t\"%s\"" "$(label "$s")"; done
            echo
            for w in $workloads; do
                printf "%s" "$w"
                for s in $ran_systems; do
                    v=$(field "$results/$s-$w.txt" OVERALL 'Throughput(ops/sec)')
                    printf "\t%s" "${v:-0}"
                done
                echo
            done
        } >"$dat"
        ncol=$(($(echo $ran_systems | wc -w) + 1))
        case $plot in *.svg) term="svg size 900,500" ;; *) term="png size 900,500" ;; esac
        gnuplot <<EOF || peers_log "gnuplot failed: no chart"
set terminal $term
set output "$plot"
set title "kvbench ycsb: throughput, $threads client connections, $records records"
set ylabel "operations per second"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set key top right autotitle columnheader
set grid ytics
set yrange [0:*]
plot for [i=2:$ncol] "$dat" using i:xtic(1)
EOF
    fi
fi
case $results in "$tmp"/*) kept="kvbench's outputs are removed (--results DIR keeps them)" ;; *) kept="kvbench's outputs in $results" ;; esac
peers_log "wrote $out$([ "$plot" = none ] || echo " and $plot"); $kept"
[ $failed = 0 ] || peers_log "some runs failed or a check did not hold (see the table)"
exit $failed
