#!/usr/bin/env bash
# Model-checks a Promela lock model with spin: safety (assertions, deadlocks), each LTL property
# under weak fairness, and that each bug variant named on the command line is caught. Exit 77
# (skipped) only if spin or a C compiler is missing.
# usage: check.sh MODEL.pml "LTL names..." [--defines "DEFINES"] [BUG_DEFINE...]
#   e.g. check.sh alock.pml "starve_local starve_remote" OR_BUG
#        check.sh rwlock.pml "" --defines "-DLEASES -DNLOCAL=1" NO_ENTRY_CHECK
#   --defines: passed to spin for every run of this invocation (a model's configuration; with
#   no LTL names, this is one more safety run of a model, in a ctest of its own).
# A run passes only if pan explored everything (no depth or memory limit hit); a variant counts
# as caught only by a real error (an assertion violation, an invalid end state or an acceptance
# cycle), never by a build failure or a search cut short.
set -uo pipefail
model=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
props=$2
shift 2
defines=""
if [ "${1:-}" = "--defines" ]; then
    defines=$2
    shift 2
fi
bugs=("$@")
command -v spin >/dev/null || { echo "SKIPPED: spin not found (Debian package spin)"; exit 77; }
command -v cc >/dev/null || { echo "SKIPPED: no C compiler"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
cp "$model" model.pml
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "PASS $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
[ -n "$defines" ] && echo "  defines: $defines"

# pan_run NAME DEFINES PAN_FLAGS...: builds and runs pan; prints its summary; sets $errors (the
# errors pan found, -1 if it did not run to the end) and $real (1 if an error is a real one).
pan_run() {
    local name=$1 defs="$defines $2"
    shift 2
    rm -f pan pan.* model.pml.trail
    real=0
    if ! spin $defs -a model.pml >spin.log 2>&1; then
        cat spin.log
        errors=-1
        return
    fi
    local cflags="$copt -w -DCOLLAPSE -DNFAIR=3"
    case " $* " in *" -a "*) ;; *) cflags="$cflags -DSAFETY" ;; esac
    cc $cflags -o pan pan.c || { errors=-1; return; }
    local t0=$(date +%s)
    ./pan -m20000000 "$@" >pan.log 2>&1
    errors=$(awk '/errors:/{print $NF; exit}' pan.log)
    [ -n "$errors" ] || errors=-1
    grep -qE "^pan:[0-9]+: (assertion violated|invalid end state|acceptance cycle)" pan.log &&
        real=1
    local cut="max search depth too small|out of memory|MEMLIM"
    if [ "$errors" = 0 ] && grep -qE "$cut" pan.log; then
        echo "    the search was cut short:"
        grep -E "$cut" pan.log | head -2 | sed 's/^/    /'
        errors=-1
    fi
    echo "  $name: $(grep -E 'states, stored' pan.log | sed 's/^ *//'), errors $errors, $(($(date +%s) - t0)) s"
    grep -E "^pan:[0-9]+: |assertion violated|pan: error" pan.log | head -3 | sed 's/^/    /'
}

copt=-O2
pan_run "safety" ""
[ "$errors" = 0 ] && ok "safety: mutual exclusion, no deadlock" || bad "safety"
for p in $props; do
    pan_run "$p" "-DLIVENESS" -a -f -N "$p"
    [ "$errors" = 0 ] && ok "liveness: $p under weak fairness" || bad "liveness: $p"
done
# A bug variant's run stops at its first error: compiling pan.c with -O2 takes longer than that.
copt=-O0
for b in ${bugs[@]+"${bugs[@]}"}; do
    caught=0
    for p in $props; do
        pan_run "$b/$p" "-DLIVENESS -D$b" -a -f -N "$p"
        if [ "$errors" != 0 ] && [ "$errors" != -1 ] && [ $real = 1 ]; then
            caught=1
            echo "    counterexample: the steps that repeat forever"
            spin $defines -DLIVENESS -D"$b" -t -p model.pml 2>/dev/null |
                sed -n '/START OF CYCLE/,$p' | grep -E "^ *[0-9]+:[[:space:]]+proc .*\[" |
                head -16 | sed 's/^ *[0-9]*:[[:space:]]*/      /'
            break
        fi
    done
    if [ $caught = 0 ]; then
        pan_run "$b/safety" "-D$b"
        [ "$errors" != 0 ] && [ "$errors" != -1 ] && [ $real = 1 ] && caught=1
    fi
    [ $caught = 1 ] && ok "variant $b is caught" || bad "variant $b was NOT caught"
done
echo "$pass passed, $fail failed"
[ $fail = 0 ]
