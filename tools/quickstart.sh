#!/usr/bin/env bash
# The main job: build rdkv, start a 3-node local cluster of kvserver processes on the soft
# transport, measure its fabric with kvbench, and stop every node it started (also on Ctrl-C or
# an error). Installs missing Debian packages when run as root.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/tools/deps.sh"
rdkv_ensure_packages build
build=${RDKV_BUILD_DIR:-$root/build}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)"
bin=$build/bin

dir=$(mktemp -d "${TMPDIR:-/tmp}/rdkv-quickstart-XXXXXX")
stop_cluster() {
    "$bin/kvcluster" stop --dir "$dir" >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap stop_cluster EXIT
trap 'exit 130' INT TERM

echo
echo "== starting a 3-node rdkv cluster (soft transport)"
"$bin/kvcluster" start --nodes 3 --dir "$dir" --transport soft
"$bin/kvcluster" status --dir "$dir"
echo
echo "== kvbench fabric against it"
"$bin/kvbench" fabric --config "$dir/cluster.conf" --seconds "${RDKV_QUICKSTART_SECONDS:-1}"
echo
echo "== stopping the cluster"
"$bin/kvcluster" stop --dir "$dir"
