#!/usr/bin/env bash
# Runs the fabric conformance suite on the verbs transport inside a QEMU guest (TCG) that boots
# Debian's own kernel with Soft-RoCE (rdma_rxe on the loopback device) and uses this machine's
# root file system read-only over 9p, so the guest runs the binaries of BUILD_DIR as they are.
#
# usage: tests/verbs-vm/run.sh BUILD_DIR [test names...]
# The suites (RDKV_VM_SUITES, default "fabric_conformance lock_stress lock_delay lock_failure
# range_stress txn_bank txn_serial txn_fence") run with
# --transport verbs --quick; test names, if given, are passed to each suite.
# Exit: 0 the suite passed; 1 it failed (or the guest never reported); 77 skipped, only when the
# guest cannot be prepared here (a tool missing, the kernel package not downloadable).
# Environment: RDKV_VM_TIMEOUT (seconds for the whole guest, default 780), RDKV_LOG (passed to
# the guest), RDKV_VM_ENV (more VAR=value words for the guest), RDKV_VM_CMD (run this command
# instead of the suite, for debugging), RDKV_VM_KEEP=1 keeps the raw console log.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ $# -lt 1 ]; then
    echo "usage: $0 BUILD_DIR [test names...]" >&2
    exit 2
fi
build=$(cd "$1" 2>/dev/null && pwd) || { echo "verbs-vm: no build directory $1" >&2; exit 1; }
shift
tests=("$@")
vm_timeout=${RDKV_VM_TIMEOUT:-780}
suite_timeout=$((vm_timeout - 60))

skip() {
    echo "verbs-vm: SKIPPED: $*"
    exit 77
}
fail() {
    echo "verbs-vm: FAILED: $*"
    exit 1
}

# --- tools --------------------------------------------------------------------------------------
PATH=$PATH:/usr/sbin:/sbin
for t in qemu-system-x86_64 modprobe depmod cpio gzip timeout dpkg-deb; do
    command -v "$t" >/dev/null 2>&1 || skip "$t not found (packages: qemu-system-x86 kmod cpio)"
done
for f in /usr/bin/rdma /usr/lib/x86_64-linux-gnu/libibverbs.so.1; do
    [ -e "$f" ] || skip "$f not found (packages: rdma-core iproute2 libibverbs1 ibverbs-providers)"
done
[ -x "$build/bin/fabric_conformance" ] || fail "$build/bin/fabric_conformance is not built"
[ -x "$build/bin/kvserver" ] || fail "$build/bin/kvserver is not built"

work=$build/verbs-vm
mkdir -p "$work" || fail "cannot create $work"
exec 9>"$work/.lock"
command -v flock >/dev/null 2>&1 && flock 9

# --- kernel and modules (cached in $work: vmlinuz and the module closure only) ----------------------
mods="crc32_generic rdma_rxe ib_uverbs rdma_ucm 9p 9pnet_virtio virtio_pci"
kver=""
[ -f "$work/kver" ] && kver=$(cat "$work/kver")
if [ -z "$kver" ] || [ ! -f "$work/vmlinuz-$kver" ] || [ ! -s "$work/mods/order" ]; then
    command -v apt-get >/dev/null 2>&1 || skip "apt-get not found: cannot fetch Debian's kernel"
    kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
        awk '/Depends: linux-image-[0-9]/{print $2; exit}')
    [ -n "$kpkg" ] || skip "apt-cache cannot resolve linux-image-amd64 (run apt-get update)"
    kver=${kpkg#linux-image-}
    echo "verbs-vm: preparing kernel $kver (once; cached in $work)"
    rm -rf "$work/dl" "$work/kroot" "$work/mods" "$work"/vmlinuz-* "$work/kver"
    mkdir -p "$work/dl" "$work/mods" || fail "cannot create $work/dl"
    cd "$work/dl" || fail "cannot use $work/dl"
    # apt drops to the _apt user for downloads; let it write here.
    chmod 777 "$work/dl" 2>/dev/null || true
    if ! apt-get download "$kpkg" </dev/null >"$work/dl/apt.log" 2>&1; then
        tail -n 3 "$work/dl/apt.log"
        skip "apt-get download $kpkg failed"
    fi
    kroot=$work/kroot
    dpkg-deb -x "$kpkg"_*.deb "$kroot" || skip "cannot unpack $kpkg"
    rm -f "$work/dl/"*.deb
    depmod -b "$kroot" "$kver" || skip "depmod failed for $kver"
    order=""
    for m in $mods; do
        deps=$(modprobe -d "$kroot" -S "$kver" --show-depends "$m" 2>/dev/null |
            awk '$1=="insmod"{print $2}') || true
        [ -n "$deps" ] || skip "module $m not found in kernel $kver"
        for f in $deps; do
            b=$(basename "$f")
            b=${b%.xz}
            b=${b%.zst}
            b=${b%.ko}
            case " $order " in *" $b "*) continue ;; esac
            case $f in
            *.xz) xz -dc "$f" >"$work/mods/$b.ko" || skip "cannot decompress $f" ;;
            *.zst) zstd -dcq "$f" >"$work/mods/$b.ko" || skip "cannot decompress $f" ;;
            *) cp "$f" "$work/mods/$b.ko" || fail "cannot copy $f" ;;
            esac
            order="$order $b"
        done
    done
    cp "$kroot/boot/vmlinuz-$kver" "$work/vmlinuz-$kver" || skip "no vmlinuz in $kpkg"
    echo "$order" >"$work/mods/order"
    rm -rf "$kroot" "$work/dl"
    echo "$kver" >"$work/kver"
fi
kernel=$work/vmlinuz-$kver
order=$(cat "$work/mods/order")

busybox=""
if [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; then
    busybox=/bin/busybox # busybox-static is installed
elif [ -x "$work/bb/bin/busybox" ]; then
    busybox=$work/bb/bin/busybox
else
    mkdir -p "$work/dl" || fail "cannot create $work/dl"
    cd "$work/dl" || fail "cannot use $work/dl"
    chmod 777 "$work/dl" 2>/dev/null || true
    apt-get download busybox-static </dev/null >"$work/dl/apt.log" 2>&1 ||
        skip "apt-get download busybox-static failed"
    dpkg-deb -x busybox-static_*.deb "$work/bb" || skip "cannot unpack busybox-static"
    rm -rf "$work/dl"
    busybox=$work/bb/bin/busybox
fi

# --- initramfs: busybox, the modules, /init and its parameters ------------------------------------
initrd=$work/initrd
rm -rf "$initrd"
mkdir -p "$initrd"/{bin,proc,sys,dev,host,mods} || fail "cannot build $initrd"
cp "$busybox" "$initrd/bin/busybox" || fail "cannot copy busybox"
for b in $order; do cp "$work/mods/$b.ko" "$initrd/mods/" || fail "cannot copy module $b"; done

# The guest's root is the host's, read-only; a tmpfs over one directory gives it scratch space.
# Pick one that does not hide the build tree (a clone in /tmp, say).
scratch=""
for d in /tmp /var/tmp /mnt /srv /opt; do
    [ -d "$d" ] || continue
    case "$build/" in "$d"/*) continue ;; esac
    scratch=$d
    break
done
[ -n "$scratch" ] || fail "no directory for the guest's scratch space outside $build"
# Each suite runs on verbs in its quick size; the guest's status is the first failure's.
suites=${RDKV_VM_SUITES:-fabric_conformance lock_stress lock_delay lock_failure range_stress txn_bank txn_serial txn_fence}
cmd="cd $scratch && st=0"
for suite in $suites; do
    [ -x "$build/bin/$suite" ] || fail "$build/bin/$suite is not built"
    one="timeout -k 10 $suite_timeout $build/bin/$suite --transport verbs --quick"
    case $suite in fabric_conformance | lock_failure) one="$one --bindir $build/bin" ;; esac
    for t in ${tests[@]+"${tests[@]}"}; do one="$one $t"; done
    cmd="$cmd; echo \"verbs-vm: suite $suite\"; $one || { r=\$?; [ \$st = 0 ] && st=\$r; }"
done
cmd="$cmd; exit \$st"
[ -n "${RDKV_VM_CMD:-}" ] && cmd="cd $scratch && $RDKV_VM_CMD" # debugging: any command instead
genv=""
[ -n "${RDKV_LOG:-}" ] && genv="RDKV_LOG=$RDKV_LOG"
{
    echo "MODS='$order'"
    echo "SCRATCH='$scratch'"
    echo "GUEST_CMD='$cmd'"
    echo "GUEST_ENV='$genv ${RDKV_VM_ENV:-}'"
} >"$initrd/params"
cp "$here/guest-init.sh" "$initrd/init" && chmod +x "$initrd/init"
(cd "$initrd" && find . | cpio -o -H newc 2>/dev/null | gzip -1 >"$work/initrd.gz") ||
    fail "cannot pack the initramfs"
rm -rf "$initrd"

# --- run -----------------------------------------------------------------------------------------
log=$work/console.log
echo "verbs-vm: booting kernel $kver under TCG (limit ${vm_timeout}s)"
t0=$(date +%s)
timeout -k 10 "$vm_timeout" qemu-system-x86_64 -accel tcg,thread=multi -cpu max -m 1536 -smp 2 \
    -nographic -no-reboot -nic none \
    -kernel "$kernel" -initrd "$work/initrd.gz" \
    -append "console=ttyS0 quiet loglevel=3 panic=-1 mitigations=off" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    </dev/null >"$log" 2>&1
qrc=$?
t1=$(date +%s)
tr -d '\r' <"$log" >"$log.txt"

if ! grep -q '^=== RDKV-VM SUITE START' "$log.txt"; then
    echo "verbs-vm: the guest never started the suite (qemu exit $qrc); console tail:"
    tail -n 40 "$log.txt"
    fail "no suite output"
fi
grep '^=== RDKV-VM ERROR' "$log.txt"
grep '^rdkv-vm:' "$log.txt"
sed -n '/^=== RDKV-VM SUITE START/,/^=== RDKV-VM SUITE rc=/p' "$log.txt" | sed '1d;$d'
rc=$(sed -n 's/^=== RDKV-VM SUITE rc=\([0-9]*\).*/\1/p' "$log.txt" | tail -n 1)
[ "${RDKV_VM_KEEP:-0}" = 1 ] || rm -f "$log"
echo "verbs-vm: guest ran $((t1 - t0)) s"
if [ -z "$rc" ]; then
    [ "$qrc" = 124 ] && fail "the guest ran past ${vm_timeout}s"
    fail "the guest stopped before the suite finished (qemu exit $qrc)"
fi
[ "$rc" = 0 ] || fail "the suite exited with status $rc"
echo "verbs-vm: PASSED"
exit 0
