#!/usr/bin/env bash
# kvctl against a real 3-node cluster started with tools/cluster.sh: get/put/del round trips and
# their exit codes, binary values, scans with limits, guarded txn batches, the shell's
# autocommit and begin/commit/rollback, JSON output, status, endpoints from the flag and the
# environment, usage errors (exit 2 before connecting), oversized keys, --help everywhere, and a
# killed node (exit 5, status says it is down). Every command runs under `timeout`, so a hang
# fails the test; the cluster is stopped on every exit. Takes well under a minute.
# usage: cli_kv.sh BIN_DIR
set -u
bin=${1:?usage: cli_kv.sh BIN_DIR}
bin=$(cd "$bin" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d)
pass=0 fail=0
cleanup() {
    RDKV_BIN="$bin" "$root/tools/cluster.sh" stop "$work/c" >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

ok() { pass=$((pass + 1)); echo "PASS $1"; }
bad() {
    fail=$((fail + 1))
    echo "FAIL $1"
    [ -s "$work/out" ] && sed 's/^/    stdout: /' "$work/out" | head -10
    [ -s "$work/err" ] && sed 's/^/    stderr: /' "$work/err" | head -10
}

# expect NAME STATUS [GREP] -- CMD...: runs CMD (stdin from $stdin, else /dev/null) with a 30 s
# limit, checks the exit status and that stdout or stderr matches GREP.
stdin=/dev/null
expect() {
    local name=$1 want=$2 pat=$3
    shift 4
    timeout 30 "$@" >"$work/out" 2>"$work/err" <"$stdin"
    local got=$?
    stdin=/dev/null
    if [ "$got" != "$want" ]; then bad "$name (exit $got, wanted $want)"; return 1; fi
    if [ -n "$pat" ] && ! grep -q -- "$pat" "$work/err" "$work/out"; then bad "$name (no '$pat')"; return 1; fi
    ok "$name"
}

# same NAME WANT: stdout of the last command is exactly WANT (plus its final newline).
same() {
    if [ "$(cat "$work/out")" = "$2" ]; then ok "$1"; else bad "$1 (stdout is not '$2')"; fi
}

# json_ok NAME: every line of the last stdout is a JSON document.
json_ok() {
    if command -v python3 >/dev/null 2>&1; then
        if python3 -c 'import json,sys
for l in sys.stdin:
    json.loads(l)' <"$work/out" 2>"$work/err"; then ok "$1"; else bad "$1 (not JSON)"; fi
    elif grep -q '^{.*}$' "$work/out"; then
        ok "$1"
    else
        bad "$1 (not JSON)"
    fi
}

kv="$bin/kvctl"
[ -x "$kv" ] || { echo "FAIL no kvctl in $bin"; echo "0 passed, 1 failed"; exit 1; }

# Help and usage errors need no cluster.
expect "kvctl --help" 0 "Commands:" -- "$kv" --help
for c in get put del scan txn shell status; do
    expect "kvctl $c --help" 0 "kvctl $c" -- "$kv" "$c" --help
    expect "kvctl help $c" 0 "kvctl $c" -- "$kv" help "$c"
done
expect "kvctl help exit-codes" 0 "commit result unknown" -- "$kv" help exit-codes
expect "kvctl help escaping" 0 'xNN' -- "$kv" help escaping
expect "kvctl --version" 0 "kvctl" -- "$kv" --version
expect "no command" 2 "Usage" -- "$kv"
expect "unknown command" 2 "unknown command 'frob'" -- "$kv" frob
expect "unknown flag" 2 "unknown flag '--bogus'" -- "$kv" get k --bogus
expect "flag of another command" 2 "does not take" -- "$kv" get k --limit 3
expect "get without KEY" 2 "needs" -- "$kv" get
expect "get with two keys" 2 "got 2 arguments" -- "$kv" get a b
expect "put with three arguments" 2 "got 3 arguments" -- "$kv" put a b c
expect "scan without END" 2 "BEGIN and END" -- "$kv" scan a
expect "scan bad --limit" 2 "--limit needs a number" -- "$kv" scan a b --limit ten
expect "bad --timeout" 2 "duration" -- "$kv" --timeout 5parsecs get k
expect "bad --retries" 2 "--retries" -- "$kv" --retries -1 get k
expect "bad -w" 2 "text or json" -- "$kv" -w yaml get k
expect "bad --endpoints" 2 "bad endpoint" -- "$kv" --endpoints nohostport get k
expect "bad KVCTL_TIMEOUT" 2 "KVCTL_TIMEOUT" -- env KVCTL_TIMEOUT=soon "$kv" get k
expect "missing flag value" 2 "needs a value" -- "$kv" get k --endpoints
expect "unreachable endpoint exits 5" 5 "RDKV_EUNAVAILABLE" -- timeout 10 "$kv" --endpoints 127.0.0.1:1 get k
# a host name that exists nowhere is said to be one (it used to read "peer unavailable")
expect "unresolvable host name" 5 "nosuchhost.invalid:7400 (endpoints from --endpoints): host name does not resolve (RDKV_ENOHOST)" -- \
    "$kv" --endpoints nosuchhost.invalid:7400 get k

# A 3-node cluster.
if ! RDKV_BIN="$bin" timeout 60 "$root/tools/cluster.sh" start 3 "$work/c" >"$work/out" 2>"$work/err"; then
    bad "cluster.sh start 3"
    echo "$pass passed, $fail failed"
    exit 1
fi
last=$(tail -n 1 "$work/out")
case $last in
export\ KVCTL_ENDPOINTS=*,*,*) ok "cluster.sh prints the endpoints" ;;
*) bad "cluster.sh prints the endpoints (last line '$last')" ;;
esac
eval "$(cat "$work/out")"
case ${RDKV_SECRET_FILE:-} in
*/cluster.client.secret) ok "cluster.sh prints the client secret file" ;;
*) bad "cluster.sh prints the client secret file (got '${RDKV_SECRET_FILE:-}')" ;;
esac
export RDKV_SECRET_FILE
eps=$KVCTL_ENDPOINTS
export KVCTL_ENDPOINTS
expect "cluster.sh status" 0 "running" -- env RDKV_BIN="$bin" "$root/tools/cluster.sh" status "$work/c"
# Not started with --bench: kvbench's workloads are refused, and kvbench says why.
expect "kvbench on a production node" 1 "not enabled on this node (start it with --bench)" -- env RDKV_SECRET_FILE="$work/c/cluster.secret" "$bin/kvbench" ycsb load --endpoints "$eps" -p recordcount=10
# kvbench with a client's credential: refused at once, and told which secret it needs
expect "kvbench with a client secret" 1 "needs the cluster's node secret" -- "$bin/kvbench" ycsb load --endpoints "$eps" -p recordcount=10

# examples/bank.c out of the box, with the client secret cluster.sh exported
expect "the bank example" 0 "moved 30 from example:alice to example:bob" -- "$bin/example_bank" "$eps"

# Point operations.
expect "put" 0 "OK" -- "$kv" put greeting "hello world" && same "put prints OK" "OK"
expect "get" 0 "" -- "$kv" get greeting && same "get round trip" "hello world"
expect "get missing exits 3" 3 "nosuchkey: not found" -- "$kv" get nosuchkey
expect "put overwrite" 0 "" -- "$kv" put greeting bye
expect "get after overwrite" 0 "" -- "$kv" get greeting && same "get sees overwrite" "bye"
expect "del" 0 "OK" -- "$kv" del greeting
expect "get after del exits 3" 3 "not found" -- "$kv" get greeting
expect "del missing exits 3" 3 "not found" -- "$kv" del greeting
expect "put a value that starts with -" 0 "" -- "$kv" put dash -- -x-
expect "get it" 0 "" -- "$kv" get dash && same "dash value" "-x-"

# Binary values through stdin.
printf 'a\000b\377c\n' >"$work/bin.in"
stdin="$work/bin.in"
expect "put binary from stdin" 0 "OK" -- "$kv" put binkey
expect "get --hex" 0 "" -- "$kv" get --hex binkey && same "binary round trip (hex)" "610062ff630a"
expect "get escapes binary" 0 "" -- "$kv" get binkey && same "binary value escaped" 'a\x00b\xffc\x0a'
if timeout 30 "$kv" get --raw binkey >"$work/raw" 2>"$work/err" && cmp -s "$work/raw" "$work/bin.in"; then
    ok "get --raw gives the exact bytes"
else
    bad "get --raw gives the exact bytes"
fi
stdin="$work/bin.in"
expect "put binary with -" 0 "" -- "$kv" put binkey2 -
expect "get -w json of binary" 0 "value_hex" -- "$kv" -w json get binkey2 && json_ok "get json parses"

# Scans.
for k in e c a d b; do timeout 30 "$kv" put "s/$k" "v$k" >/dev/null 2>&1; done
expect "scan" 0 "" -- "$kv" scan s/ s0 && same "scan in key order" "$(printf 's/a va\ns/b vb\ns/c vc\ns/d vd\ns/e ve')"
expect "scan is half-open" 0 "" -- "$kv" scan s/b s/d && same "scan [s/b, s/d)" "$(printf 's/b vb\ns/c vc')"
expect "scan --limit" 0 "more rows" -- "$kv" scan s/ s0 --limit 2 && same "scan --limit 2 rows" "$(printf 's/a va\ns/b vb')"
expect "scan --limit without more" 0 "" -- "$kv" scan s/ s0 --limit 5
if grep -q "more rows" "$work/err"; then bad "no hint when all rows fit"; else ok "no hint when all rows fit"; fi
expect "scan --keys-only" 0 "" -- "$kv" scan --keys-only s/ s/c && same "keys only" "$(printf 's/a\ns/b')"
expect "scan --count" 0 "" -- "$kv" scan --prefix s/ --count && same "count by prefix" "5"
expect "scan --to-end" 0 "s/e ve" -- "$kv" scan s/d --to-end
expect "scan -w json" 0 '"more":true' -- "$kv" scan s/ s0 --limit 1 -w json && json_ok "scan json parses"
# an empty range is said to be one (it used to print nothing and exit 0), in every form
expect "scan z a: END before BEGIN" 2 "END 'a' is not after BEGIN 'z'" -- "$kv" scan z a
expect "scan a a: an empty range" 2 "holds no key" -- "$kv" scan s/a s/a
expect "shell scan z a" 1 "END 'a' is not after BEGIN 'z'" -- "$kv" shell --exec "scan z a"
stdin=$work/tz
printf 'scan z a\n' >"$stdin"
expect "txn scan z a" 2 "stdin:1: scan: END 'a' is not after BEGIN 'z'" -- "$kv" txn
# the README's scan in the shell: ';' ends the command, so END is cut; kvctl says so and how
expect "shell 'scan s/ s;': the ';' ends the command" 1 "a ';' ends a shell command: write" -- \
    "$kv" shell --exec "scan s/a s;"
expect "shell scan with \\;" 0 "s/e ve" -- "$kv" shell --exec 'scan s/ s\;'
expect "shell scan with a quoted ;" 0 "s/e ve" -- "$kv" shell --exec 'scan s/ "s;"'

# txn: guards, then operations, as one transaction.
timeout 30 "$kv" put acct/a 100 >/dev/null 2>&1
timeout 30 "$kv" put acct/b 0 >/dev/null 2>&1
printf 'expect acct/a = 100\nexpect acct/c absent\nexpect acct/b exists\n---\nput acct/a 90\nput acct/b 10\nget acct/a\nscan acct/ acct0\n' >"$work/t1"
stdin="$work/t1"
expect "txn with guards that hold" 0 "SUCCESS" -- "$kv" txn
if [ "$(head -n 1 "$work/out")" = SUCCESS ] && grep -qx "acct/a 90" "$work/out" && grep -qx "acct/b 10" "$work/out"; then
    ok "txn prints SUCCESS and its reads"
else
    bad "txn prints SUCCESS and its reads"
fi
expect "txn wrote both" 0 "" -- "$kv" get acct/b && same "acct/b after txn" "10"
printf 'expect acct/a = 100\n---\nput acct/a 0\nput acct/new 1\n' >"$work/t2"
stdin="$work/t2"
expect "txn with a failed guard exits 4" 4 "FAILED: expect acct/a = 100" -- "$kv" txn
expect "failed txn wrote nothing (new key)" 3 "not found" -- "$kv" get acct/new
expect "failed txn wrote nothing (old key)" 0 "" -- "$kv" get acct/a && same "acct/a unchanged" "90"
printf 'expect acct/a = 90\n---\nput "acct/q x" "two\\x00words"\n' >"$work/t3"
expect "txn -f with quotes and escapes" 0 "SUCCESS" -- "$kv" txn -f "$work/t3"
expect "quoted key" 0 "" -- "$kv" get --hex "acct/q x" && same "escaped value" "74776f00776f726473"
printf 'expect acct/a = 90\nput acct/a\n' >"$work/t4"
stdin="$work/t4"
expect "malformed txn exits 2 with the line" 2 "stdin:2" -- "$kv" txn
printf 'put k "open\n' >"$work/t5"
stdin="$work/t5"
expect "unterminated quote exits 2" 2 "unterminated" -- "$kv" txn
printf -- '---\nget acct/a\nexpect acct/a exists\n' >"$work/t6"
stdin="$work/t6"
expect "expect after operations exits 2" 2 "stdin:3" -- "$kv" txn
printf 'expect acct/a = 90\n---\nget acct/a\nget acct/none\nscan acct/ acct0 1\n' >"$work/t8"
stdin="$work/t8"
expect "txn -w json" 0 '"SUCCESS"' -- "$kv" -w json txn && json_ok "txn json parses"
stdin="$work/t2"
expect "failed txn -w json" 4 '"FAILED"' -- "$kv" txn -w json && json_ok "failed txn json parses"

# shell.
expect "shell begin/put/put/commit" 0 "Committed" -- "$kv" shell --exec "begin; put sh/x 1; put sh/y 2; commit"
expect "shell txn wrote x" 0 "" -- "$kv" get sh/x && same "sh/x" "1"
expect "shell txn wrote y" 0 "" -- "$kv" get sh/y && same "sh/y" "2"
expect "shell autocommit" 0 "" -- "$kv" shell --exec "put sh/auto 7; get sh/auto"
expect "shell autocommit is durable" 0 "" -- "$kv" get sh/auto && same "sh/auto" "7"
expect "shell rollback" 0 "rolled back" -- "$kv" shell --exec "begin; put sh/rb 1; get sh/rb; rollback"
expect "rollback discards" 3 "not found" -- "$kv" get sh/rb
expect "shell reads its own writes" 0 "" -- "$kv" shell --exec "begin; put sh/own 5; get sh/own; commit"
if grep -qx 5 "$work/out"; then ok "shell read its own write"; else bad "shell read its own write"; fi
expect "shell error exits 1" 1 "unknown operation" -- "$kv" shell --exec "get sh/x; frobnicate"
expect "shell bad args exits 1" 1 "usage: put" -- "$kv" shell --exec "put onlykey"
expect "shell error refuses the rest of the transaction" 1 "" -- "$kv" shell --exec "begin; put sh/half 1; put; put sh/half2 1; commit"
expect "nothing of the failed transaction" 3 "not found" -- "$kv" get sh/half2
printf 'put sh/stdin 3\n# a comment\nget sh/stdin\n' >"$work/sh1"
stdin="$work/sh1"
expect "shell from stdin" 0 "" -- "$kv" shell && same "shell script output" "$(printf 'OK\n3')"
expect "shell -w json" 0 "" -- "$kv" -w json shell --exec "get sh/x; scan sh/ sh0; begin; put sh/j 1; commit" && json_ok "shell json parses"

# Status.
expect "status" 0 "" -- "$kv" status
if [ "$(grep -cw up "$work/out")" = 3 ]; then ok "status lists 3 nodes up"; else bad "status lists 3 nodes up"; fi
expect "status -w json" 0 "" -- "$kv" status -w json && json_ok "status json parses"

# Endpoints: from the flag (before or after the command) and the environment.
expect "--endpoints without the env" 0 "" -- env -u KVCTL_ENDPOINTS "$kv" --endpoints "$eps" get sh/x
expect "--endpoints after the command" 0 "" -- env -u KVCTL_ENDPOINTS "$kv" get sh/x --endpoints="$eps"
expect "--endpoints wins over KVCTL_ENDPOINTS" 0 "" -- env KVCTL_ENDPOINTS=127.0.0.1:1 "$kv" -e "$eps" get sh/x
expect "KVCTL_ENDPOINTS unreachable exits 5" 5 "KVCTL_ENDPOINTS" -- env KVCTL_ENDPOINTS=127.0.0.1:1 "$kv" get sh/x
expect "an unreachable endpoint is skipped" 0 "" -- "$kv" --endpoints "127.0.0.1:1,$eps" get sh/x

# Limits.
bigkey=$(head -c 5000 /dev/zero | tr '\0' k)
expect "5000-byte key exits 1" 1 "limit" -- "$kv" put "$bigkey" v
expect "5000-byte key get exits 1" 1 "limit" -- "$kv" get "$bigkey"
head -c $((2 << 20)) /dev/zero >"$work/big"
stdin="$work/big"
expect "2 MiB value exits 1" 1 "limit" -- "$kv" put bigvalue

# A killed node: operations that need it fail with exit 5, status says it is down, and a
# transaction that failed that way leaves no lock behind on the live nodes.
pid=$(cat "$work/c/node-1.pid" 2>/dev/null)
if [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; then
    timeout 10 tail --pid="$pid" -f /dev/null
    ok "killed node 1"
    # Which keys live on the dead node: single puts exit 0 (live) or 5 (dead), nothing else.
    live=() dead=() other=
    for i in $(seq 1 16); do
        timeout 30 "$kv" --retries 0 put "probe/$i" x >/dev/null 2>"$work/err"
        case $? in 0) live+=("probe/$i") ;; 5) dead+=("probe/$i") ;; *) other="$other probe/$i:$?" ;; esac
    done
    if [ -z "$other" ] && [ ${#dead[@]} -gt 0 ] && [ ${#live[@]} -gt 2 ]; then
        ok "a put to a dead node's key exits 5 (${#dead[@]} of 16 keys)"
        printf -- '---\nput %s y\nput %s y\n' "${live[0]}" "${dead[0]}" >"$work/t7"
        stdin="$work/t7"
        expect "a txn that needs the dead node exits 5" 5 "RDKV_EUNAVAILABLE" -- "$kv" --retries 0 txn
        expect "its live key is not left locked" 0 "" -- "$kv" --retries 0 put "${live[0]}" z
        expect "scan over a dead node exits 5" 5 "RDKV_EUNAVAILABLE" -- "$kv" --retries 0 scan '' --to-end
        expect "the scan left no range lock behind (delete)" 0 "" -- "$kv" --retries 0 del "${live[1]}"
        expect "the scan left no range lock behind (insert)" 0 "" -- "$kv" --retries 0 put "${live[1]}" again
        expect "reads of live keys still work" 0 "" -- "$kv" get "${live[2]}" && same "live value" "x"
    else
        bad "puts with node 1 dead exit 0 or 5 (live ${#live[@]}, dead ${#dead[@]}, other:$other)"
    fi
    expect "status reports the dead node" 5 "node 1 .*down" -- "$kv" status
    if grep -qw down "$work/out" && [ "$(grep -cw up "$work/out")" = 2 ]; then
        ok "status table: 2 up, 1 down"
    else
        bad "status table: 2 up, 1 down"
    fi
else
    bad "kill node 1 (no pid in $work/c/node-1.pid)"
fi

# cluster.sh stop with node 1 dead: the live nodes stop, and no pid file is left behind (the
# dead node's used to stay)
expect "cluster.sh stop with a dead node" 0 "stopped 2 nodes" -- env RDKV_BIN="$bin" "$root/tools/cluster.sh" stop "$work/c"
left=$(ls "$work/c"/node-*.pid 2>/dev/null | tr '\n' ' ')
[ -z "$left" ] && ok "stop leaves no pid file behind" || bad "stop leaves no pid file behind (left: $left)"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
