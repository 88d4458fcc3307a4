#!/usr/bin/env bash
# Configures and builds a Release tree (-O3, NDEBUG: the build people make to use rdkv) with
# -Werror, so that warnings only the optimiser finds (maybe-uninitialized, format-truncation)
# fail here rather than on a user's machine. The install test installs from this tree.
# usage: release.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=${1:?source dir} out=${2:?build dir}
# The libFuzzer targets are built by clang with flags of their own whatever the build type: the
# main tree has them; this one leaves them out (RDKV_CLANG unset) to keep its cost down.
cmake -S "$src" -B "$out" -DCMAKE_BUILD_TYPE=Release -DRDKV_WERROR=ON \
    -DRDKV_CLANG=RDKV_CLANG-NOTFOUND >"$out.configure.log" 2>&1 ||
    { cat "$out.configure.log"; echo "release build: configure FAILED"; exit 1; }
if ! cmake --build "$out" -j "$(nproc 2>/dev/null || echo 2)" >"$out.build.log" 2>&1; then
    grep -E -B2 -A12 'error|warning' "$out.build.log" | head -200
    echo "release build: FAILED (the whole log: $out.build.log)"
    exit 1
fi
echo "release build: ok ($out)"
