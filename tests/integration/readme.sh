#!/usr/bin/env bash
# The README's "Using the store" block, run as written (what a newcomer types first), with only
# the build directory, the cluster's directory and the sizes changed: build/bin -> BIN_DIR,
# /tmp/rdkv -> a temporary directory, recordcount=100000 -> 5000, --seconds 10 -> 1. The lines
# run in one shell, in order (the eval's exports carry over); every one must succeed, and a
# failure names its line. The whole block is bounded in time; the cluster is stopped on exit.
# usage: readme.sh SOURCE_DIR BIN_DIR
set -u
shopt -s extglob
src=$(cd "${1:?usage: readme.sh SOURCE_DIR BIN_DIR}" && pwd)
bin=$(cd "${2:?usage: readme.sh SOURCE_DIR BIN_DIR}" && pwd)
work=$(mktemp -d)
export RDKV_BIN=$bin
cleanup() {
    "$src/tools/cluster.sh" stop "$work/rdkv" >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

awk '/^## Using the store/ { f = 1; next } /^## / { f = 0 } f && /^    / { sub(/^    /, ""); print }' \
    "$src/README.md" >"$work/block"
grep -q 'kvbench ycsb run' "$work/block" || { echo "readme: no 'Using the store' block with kvbench in README.md"; exit 1; }
# (/tmp/rdkv first: the paths put in after it may contain it -- a checkout in /tmp/rdkv-check)
sed -e "s,/tmp/rdkv,$work/rdkv,g" -e "s,build/bin/,$bin/,g" \
    -e "s,tools/cluster.sh,$src/tools/cluster.sh,g" -e 's,recordcount=100000,recordcount=5000,g' \
    -e 's,--seconds 10,--seconds 1,g' "$work/block" >"$work/lines"
{
    echo 'pass=0 fail=0'
    echo 'ok() { pass=$((pass + 1)); echo "PASS line $1: $2"; }'
    echo 'bad() { fail=$((fail + 1)); echo "FAIL line $1: $2"; sed "s/^/    /" "$W/err" | tail -5; }'
    n=0
    while IFS= read -r line; do
        n=$((n + 1))
        case $line in '' | *([[:space:]])'#'*) continue ;; esac
        shown=$(printf '%q' "$line")
        printf '{\n%s\n} >"$W/out" 2>"$W/err" </dev/null && ok %d %s || bad %d %s\n' \
            "$line" "$n" "$shown" "$n" "$shown"
    done <"$work/lines"
    echo 'echo "$pass passed, $fail failed"; [ "$fail" = 0 ]'
} >"$work/script"
W=$work timeout 600 bash -o pipefail "$work/script"
