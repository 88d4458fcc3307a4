# Shared by the command-line test scripts (sourced): a temporary $work directory, PASS/FAIL
# counting, and expect(), which runs a command under `timeout` so that a hang fails the test.
# The script sets $expect_timeout (seconds) before calling expect, and ends with cli_summary.
work=$(mktemp -d)
pass=0 fail=0
expect_timeout=${expect_timeout:-60}

ok() { pass=$((pass + 1)); echo "PASS $1"; }
bad() {
    fail=$((fail + 1))
    echo "FAIL $1"
    [ -s "$work/err" ] && sed 's/^/    stderr: /' "$work/err" | head -20
}

# expect NAME STATUS GREP -- CMD...: runs CMD, checks its exit status and that its stdout or
# stderr (kept in $work/out and $work/err) matches GREP, when GREP is not empty.
expect() {
    local name=$1 want=$2 pat=$3
    shift 4
    timeout "$expect_timeout" "$@" >"$work/out" 2>"$work/err" </dev/null
    local got=$?
    if [ "$got" != "$want" ]; then bad "$name (exit $got, wanted $want)"; return 1; fi
    if [ -n "$pat" ] && ! grep -q -- "$pat" "$work/err" "$work/out"; then bad "$name (no '$pat')"; return 1; fi
    ok "$name"
}

# The closing line the runner reads; the exit status.
cli_summary() {
    echo "$pass passed, $fail failed"
    [ "$fail" = 0 ]
}
