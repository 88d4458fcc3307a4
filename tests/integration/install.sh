#!/usr/bin/env bash
# rdkv as a user gets it: `cmake --install` of a build tree (the Release tree) into a fresh
# prefix puts rdkv.h, librdkv.so (with its soname) and librdkv.a, rdkv.pc, the programs and the
# man pages there; both libraries export exactly the functions of the public headers; then,
# out of the source tree, examples/bank.c is built with `pkg-config --cflags --libs rdkv` (and
# once more statically, `pkg-config --static`) and run against a cluster that the installed
# kvcluster starts with the installed kvserver, with the cluster's client secret.
# usage: install.sh SOURCE_DIR BUILD_DIR
set -u
src=$(cd "${1:?usage: install.sh SOURCE_DIR BUILD_DIR}" && pwd)
tree=$(cd "${2:?usage: install.sh SOURCE_DIR BUILD_DIR}" && pwd)
expect_timeout=60
. "$src/tests/integration/clilib.sh"
prefix=$work/prefix
cleanup() {
    [ -x "$prefix/bin/kvcluster" ] && timeout 30 "$prefix/bin/kvcluster" stop --dir "$work/c" >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

expect "cmake --install --prefix" 0 "" -- cmake --install "$tree" --prefix "$prefix"
pc=$(find "$prefix" -name rdkv.pc | head -1)
lib=$(dirname "$(dirname "$pc")")
for f in include/rdkv.h include/rdkv_status.h bin/kvserver bin/kvctl bin/kvbench bin/kvcluster \
         share/man/man1/kvserver.1 share/man/man1/kvctl.1 share/man/man1/kvbench.1 \
         share/man/man1/kvcluster.1 share/man/man3/rdkv.3 share/doc/rdkv/examples/bank.c; do
    [ -e "$prefix/$f" ] || bad "installed: $f is missing"
done
[ -n "$pc" ] && ok "installed: rdkv.pc ($pc)" || bad "installed: no rdkv.pc"
[ "$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --modversion rdkv)" = \
  "$("$prefix/bin/kvctl" --version | sed -n 's/.*(rdkv \(.*\))/\1/p')" ] &&
    ok "rdkv.pc's version is the programs'" || bad "rdkv.pc's version is not the programs'"
for f in librdkv.so librdkv.so.0 librdkv.a; do
    [ -e "$lib/$f" ] && ok "installed: $f" || bad "installed: $f is missing from $lib"
done
soname=$(readelf -d "$lib/librdkv.so" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = librdkv.so.0 ] && ok "soname librdkv.so.0" || bad "soname is '$soname'"

# exports: exactly the functions the public headers declare
grep -ohE '\brdkv_[a-z_]+\(' "$src/include/rdkv.h" "$src/include/rdkv_status.h" | tr -d '(' |
    sort -u >"$work/api"
nm -D --defined-only "$lib/librdkv.so" | awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }' |
    sort -u >"$work/so.syms"
nm -g --defined-only "$lib/librdkv.a" | awk 'NF == 3 && $2 != "U" { print $3 }' |
    sort -u >"$work/a.syms"
if diff "$work/api" "$work/so.syms" >"$work/err"; then ok "librdkv.so exports the API and nothing else"
else bad "librdkv.so's exports differ from the headers' functions"; fi
if diff "$work/api" "$work/a.syms" >"$work/err"; then ok "librdkv.a's only global symbols are the API"
else bad "librdkv.a's global symbols differ from the headers' functions"; fi
nm -D --defined-only "$lib/librdkv.so" | grep -qiE ' (bench|wl)_' &&
    bad "librdkv.so carries benchmark code"

# the example, built out of tree as a user would
export PKG_CONFIG_PATH="$lib/pkgconfig"
mkdir -p "$work/app"
cp "$prefix/share/doc/rdkv/examples/bank.c" "$work/app/"
flags=$(pkg-config --cflags --libs rdkv) && ok "pkg-config --cflags --libs rdkv: $flags" ||
    bad "pkg-config --cflags --libs rdkv failed"
expect "bank.c built with pkg-config" 0 "" -- \
    sh -c "cd '$work/app' && cc -std=c11 -Wall -Wextra -Werror -o bank bank.c $flags"
# (README's line for librdkv.a)
expect "bank.c built statically (pkg-config --static)" 0 "" -- \
    sh -c "cd '$work/app' && cc -std=c11 -o bank-static bank.c \$(pkg-config --cflags rdkv) '$lib/librdkv.a' \$(pkg-config --static --libs-only-l rdkv | sed 's/-lrdkv //')"
if ldd "$work/app/bank-static" 2>/dev/null | grep -q librdkv; then
    bad "bank-static loads librdkv.so"
fi

# a cluster from the installed programs; bank runs against it with the client secret
expect "installed kvcluster starts 3 nodes" 0 "" -- \
    "$prefix/bin/kvcluster" start --nodes 3 --dir "$work/c"
eps=$(awk '$1 == "node" { printf "%s%s", sep, $3; sep = "," }' "$work/c/cluster.conf")
export RDKV_SECRET_FILE=$work/c/cluster.client.secret
expect "bank (librdkv.so) against the cluster" 0 "moved 30 from example:alice to example:bob" -- \
    env LD_LIBRARY_PATH="$lib" "$work/app/bank" "$eps"
expect "bank-static against the cluster" 0 "moved 30 from example:alice to example:bob" -- \
    "$work/app/bank-static" "$eps"
expect "installed kvctl reads the bank's rows" 0 "example:bob" -- \
    "$prefix/bin/kvctl" --endpoints "$eps" scan example: 'example;'
if command -v man >/dev/null 2>&1; then
    expect "man kvctl from the prefix" 0 "kvctl - the command-line client" -- \
        env MANPATH="$prefix/share/man" man -P cat kvctl
    expect "man 3 rdkv from the prefix" 0 "rdkv_connect" -- \
        env MANPATH="$prefix/share/man" man -P cat 3 rdkv
else
    echo "SKIP man pages: man-db is not installed"
fi
expect "installed kvbench runs its own nodes" 0 "\[READ\], Operations, 300" -- \
    "$prefix/bin/kvbench" ycsb run --nodes 1 --workload c -p recordcount=100 \
    -p operationcount=300 --status-interval 0
expect "installed kvcluster stops the cluster" 0 "" -- "$prefix/bin/kvcluster" stop --dir "$work/c"
cli_summary
