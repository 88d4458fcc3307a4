#!/bin/busybox sh
# shellcheck shell=dash
# /init of the Soft-RoCE test guest (see run.sh): loads the RDMA modules, mounts the host's root
# file system read-only over 9p, creates rxe0 on the loopback device and runs the command from
# /params inside the host root, then prints a marker with its exit status and powers off.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
# shellcheck disable=SC1091
. /params # MODS, SCRATCH, GUEST_CMD, GUEST_ENV

for m in $MODS; do
    insmod "/mods/$m.ko" || echo "rdkv-vm: insmod $m failed"
done
if ! mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000 hostroot /host; then
    echo "=== RDKV-VM ERROR: cannot mount the host's root file system over 9p"
    poweroff -f
fi
mkdir -p /dev/shm
for d in proc sys dev; do mount --bind "/$d" "/host/$d"; done
# a writable scratch directory (run.sh picked one that does not hide the build tree)
mount -t tmpfs -o mode=1777 scratch "/host$SCRATCH"
mount -t tmpfs -o mode=1777 shm /host/dev/shm
ip link set lo up
if ! chroot /host /usr/bin/rdma link add rxe0 type rxe netdev lo; then
    echo "=== RDKV-VM ERROR: rdma link add rxe0 failed"
fi
echo "rdkv-vm: $(uname -r), $(nproc) CPUs, $(ls /sys/class/infiniband 2>/dev/null) up"
echo "=== RDKV-VM SUITE START"
# shellcheck disable=SC2086 # GUEST_ENV is a list of VAR=value words
chroot /host /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME="$SCRATCH" \
    TMPDIR="$SCRATCH" \
    $GUEST_ENV /bin/sh -c "$GUEST_CMD"
echo "=== RDKV-VM SUITE rc=$?"
for d in /sys/class/infiniband/*/ports/*/hw_counters; do
    [ -d "$d" ] || continue
    c=""
    for f in "$d"/*; do v=$(cat "$f" 2>/dev/null); [ "$v" != 0 ] && c="$c ${f##*/}=$v"; done
    echo "rdkv-vm: rxe counters:$c"
done
poweroff -f
