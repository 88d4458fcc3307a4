#!/usr/bin/env bash
# The Release build as someone without git gets it (README, "Getting the code"): a source
# tarball made by tools/dist.sh, unpacked, configured with -DCMAKE_BUILD_TYPE=Release (-O3,
# NDEBUG: the build people make to use rdkv) and built with -Werror, so that warnings only the
# optimiser finds (maybe-uninitialized, format-truncation) fail here rather than on a user's
# machine, and so that nothing the tarball lacks (.git, a build tree) is needed. The install
# test installs from this tree.
# usage: release.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=${1:?source dir} out=${2:?build dir}
mkdir -p "$out.src"
tarball=$("$src/tools/dist.sh" "$out.src")
rm -rf "$out.src/tree"
mkdir "$out.src/tree"
tar -xzf "$tarball" -C "$out.src/tree" --strip-components=1 # (mtimes kept: builds stay incremental)
rm -f "$tarball"
echo "release build: from $(basename "$tarball"), unpacked in $out.src/tree"
# (a tree configured from another source -- an older layout of this test -- starts again)
if [ -f "$out/CMakeCache.txt" ] &&
    ! grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$out.src/tree" "$out/CMakeCache.txt"; then
    rm -rf "$out"
fi
# The libFuzzer targets are built by clang with flags of their own whatever the build type: the
# main tree has them; this one leaves them out (RDKV_CLANG unset) to keep its cost down.
cmake -S "$out.src/tree" -B "$out" -DCMAKE_BUILD_TYPE=Release -DRDKV_WERROR=ON \
    -DRDKV_CLANG=RDKV_CLANG-NOTFOUND >"$out.configure.log" 2>&1 ||
    { cat "$out.configure.log"; echo "release build: configure FAILED"; exit 1; }
if ! cmake --build "$out" -j "$(nproc 2>/dev/null || echo 2)" >"$out.build.log" 2>&1; then
    grep -E -B2 -A12 'error|warning' "$out.build.log" | head -200
    echo "release build: FAILED (the whole log: $out.build.log)"
    exit 1
fi
echo "release build: ok ($out)"
