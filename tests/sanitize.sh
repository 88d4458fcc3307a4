#!/usr/bin/env bash
# Builds rdkv with a sanitizer and runs the core suites with it: ASan+UBSan (with leak checks)
# or TSan. Any sanitizer report fails the run.
# usage: sanitize.sh address|thread SOURCE_DIR BUILD_DIR
set -euo pipefail
kind=${1:?address or thread} src=${2:?source dir} out=${3:?build dir}
cmake -S "$src" -B "$out" -DRDKV_SANITIZE="$kind" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DRDKV_WERROR=ON >/dev/null
cmake --build "$out" -j "$(nproc 2>/dev/null || echo 2)" --target fabric_conformance kvserver \
    kvcluster kvbench kvctl test_common test_task test_range lock_stress lock_delay lock_failure range_stress \
    fuzz_wire_smoke fuzz_config_smoke fuzz_txn_smoke test_storage test_histcheck test_txn \
    txn_bank txn_serial txn_phantom txn_badinput txn_fence tpcc_soft abuse_bounds test_wal \
    test_ckpt fuzz_auth_smoke fuzz_wal_smoke fuzz_ckpt_smoke example_bank sessions >/dev/null
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:exitcode=66
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:exitcode=66:second_deadlock_stack=1
status=0
run() {
    echo "== [$kind] $*"
    if ! "$@"; then
        echo "== [$kind] FAILED: $*"
        status=1
    fi
}
run "$out/bin/test_common"
run "$out/bin/test_task"
run "$out/bin/fabric_conformance" --transport soft --bindir "$out/bin"
run "$out/bin/lock_stress" --transport soft
run "$out/bin/lock_delay" --transport soft
run "$out/bin/lock_failure" --transport soft --bindir "$out/bin"
run "$out/bin/test_range"
run "$out/bin/range_stress" --transport soft --quick
run "$src/tests/integration/cli.sh" "$out/bin"
run "$out/bin/test_storage"
run "$out/bin/test_wal"
run "$out/bin/test_ckpt"
run "$out/bin/test_histcheck"
run "$out/bin/test_txn" --transport soft --quick
run "$out/bin/txn_bank" --transport soft --quick
run "$out/bin/txn_serial" --transport soft --quick
run "$out/bin/txn_phantom" --transport soft --quick
run "$out/bin/sessions" --transport soft round_trips batched snapshot patch
run "$out/bin/txn_badinput" --transport soft --quick
run "$out/bin/abuse_bounds" --transport soft --bindir "$out/bin"
run "$out/bin/txn_fence" --transport soft --quick
run "$out/bin/tpcc_soft" --transport soft --quick
run "$src/tests/integration/cli_kv.sh" "$out/bin"
if [ "$kind" = address ]; then
    run "$out/bin/fuzz_wire_smoke" 50000
    run "$out/bin/fuzz_config_smoke" 50000
    run "$out/bin/fuzz_txn_smoke" 50000
    run "$out/bin/fuzz_auth_smoke" 50000
    run "$out/bin/fuzz_wal_smoke" 50000
    run "$out/bin/fuzz_ckpt_smoke" 50000
fi
[ $status = 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $status
