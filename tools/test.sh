#!/usr/bin/env bash
# Builds rdkv and runs every test through ctest: unit tests, the fabric conformance suite on the
# soft transport and (inside a Soft-RoCE QEMU guest) on verbs, CLI tests, fuzzing, and the
# sanitizer builds. Installs missing Debian packages when run as root. Extra arguments go to
# ctest (for example -R conformance). The last lines are ctest's summary.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/tools/deps.sh"
rdkv_ensure_packages test
build=${RDKV_BUILD_DIR:-$root/build}
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRDKV_WERROR=ON >/dev/null
cmake --build "$build" -j "$jobs"
cd "$build"
exec ctest --output-on-failure -j "$jobs" "$@"
