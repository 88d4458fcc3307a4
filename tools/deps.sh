# Debian packages rdkv needs, and a function that installs the missing ones (as root) or says
# what to run (otherwise). Sourced by quickstart.sh and test.sh.

RDKV_PKGS_BUILD="gcc make cmake pkg-config libibverbs-dev librdmacm-dev liburing-dev libxxhash-dev
libjemalloc-dev libboost-context-dev ibverbs-providers libsodium-dev libzookeeper-mt-dev
libmicrohttpd-dev libjansson-dev"
# kvbench ycsb --db redis|postgres builds when these client libraries are there (optional).
RDKV_PKGS_PEERS="libhiredis-dev libpq-dev"
# The verbs suite boots Debian's kernel under QEMU with Soft-RoCE; clang brings libFuzzer; spin
# checks the Promela lock models; the peers test (and tools/peers.sh) runs real Redis and
# PostgreSQL servers and draws its chart with gnuplot; replicated clusters keep their
# configuration in a ZooKeeper server (Debian's zookeeper, on Java), started per test;
# Prometheus's promtool checks what a node's --metrics endpoint serves.
RDKV_PKGS_TEST="$RDKV_PKGS_BUILD qemu-system-x86 kmod cpio busybox-static iproute2 clang
libclang-rt-14-dev spin $RDKV_PKGS_PEERS redis-server redis-tools postgresql gnuplot-nox
zookeeper prometheus curl"

# rdkv_ensure_packages build|quickstart|test
rdkv_ensure_packages() {
    local want missing=()
    case "$1" in
    build) want=$RDKV_PKGS_BUILD ;;
    quickstart) want="$RDKV_PKGS_BUILD zookeeper" ;; # (its replicated cluster's ZooKeeper)
    test) want=$RDKV_PKGS_TEST ;;
    *) echo "rdkv_ensure_packages: build, quickstart or test" >&2; return 2 ;;
    esac
    for p in $want; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" != 0 ]; then
        echo "rdkv: missing Debian packages: ${missing[*]}" >&2
        echo "rdkv: install them as root:  apt-get install -y --no-install-recommends ${missing[*]}" >&2
        return 1
    fi
    echo "rdkv: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq </dev/null >/dev/null || { echo "rdkv: apt-get update failed" >&2; return 1; }
    apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null ||
        { echo "rdkv: apt-get install ${missing[*]} failed" >&2; return 1; }
}
