#!/usr/bin/env bash
# Starts, inspects and stops a local rdkv cluster for kvctl: a thin wrapper over kvcluster that
# prints on stdout the RDKV_SECRET_FILE (the cluster's client secret) and, as its last line, the
# KVCTL_ENDPOINTS for the nodes it started, so that
#   eval "$(tools/cluster.sh start 3 /tmp/rdkv)"
# points kvctl at the new cluster (everything else it says goes to stderr).
set -u

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${RDKV_BIN:-$root/build/bin}

usage() {
    cat <<EOF
Usage:
  tools/cluster.sh start N DIR [kvcluster options]   start N nodes with data, logs and config in DIR
  tools/cluster.sh stop DIR                          stop every node of the cluster in DIR
  tools/cluster.sh restart DIR I|all                 start node I (or every node that is not
                                                     running, together) again after it stopped or died
  tools/cluster.sh status DIR                        show each node (exit 1 if one is down)
  tools/cluster.sh endpoints DIR                     print the export line again
  tools/cluster.sh --help

start runs 'kvcluster start --nodes N --dir DIR' (extra options such as --transport soft or
--arena 256M go to kvcluster, and any kvserver option, such as --conflict no-wait or --row-lock
dslr, through it to every node; restart gives them again), waits until every node is ready,
and prints
  export RDKV_SECRET_FILE=DIR/cluster.client.secret
  export KVCTL_ENDPOINTS=127.0.0.1:PORT,127.0.0.1:PORT,...
on stdout, the endpoints last (the rest goes to stderr), with the ports from DIR/cluster.conf. So:
  eval "\$(tools/cluster.sh start 3 /tmp/rdkv)" && build/bin/kvctl status

The cluster's secret lives in DIR: DIR/cluster.secret is the node secret (nodes and operator
tools such as kvbench only), DIR/cluster.client.secret the client secret to give kvctl and
applications (copy it with mode 600; docs/security.md). A restart in DIR keeps them.

With --durable (a kvcluster option) node I keeps a redo log in DIR/node-I.data, and
'restart DIR I' brings it back with its data after a crash (kill -9) or a stop:
  eval "\$(tools/cluster.sh start 1 /tmp/rdkv --durable)" && build/bin/kvctl put k v
  kill -9 \$(cat /tmp/rdkv/node-0.pid); tools/cluster.sh restart /tmp/rdkv 0 && build/bin/kvctl get k

Node I keeps its log in DIR/node-I.log and its pid in DIR/node-I.pid.
Binaries come from \$RDKV_BIN when set, else $root/build/bin.
Exit status: 0 ok, 1 error, 2 bad usage.
EOF
}

die() {
    echo "cluster.sh: error: $*" >&2
    exit 1
}

usage_error() {
    echo "cluster.sh: error: $*" >&2
    echo "Run 'tools/cluster.sh --help' for usage." >&2
    exit 2
}

need_bins() {
    local b
    for b in kvcluster kvserver; do
        if [ ! -x "$bin/$b" ]; then
            die "no $b in $bin; build it with: cmake -S $root -B $root/build && cmake --build $root/build -j --target kvserver kvcluster kvctl (or set RDKV_BIN to the directory that holds the binaries)"
        fi
    done
}

# The endpoints of the cluster in DIR, from DIR/cluster.conf ("node I HOST:PORT" lines).
endpoints() {
    local conf=$1/cluster.conf
    [ -r "$conf" ] || die "cannot read $conf (no cluster was started in $1)"
    local eps
    eps=$(awk '$1 == "node" && NF >= 3 { printf "%s%s", sep, $3; sep = "," }' "$conf")
    [ -n "$eps" ] || die "$conf lists no nodes"
    local secret
    secret=$(cd "$1" && pwd)/cluster.client.secret
    [ -r "$secret" ] && printf 'export RDKV_SECRET_FILE=%q\n' "$secret"
    echo "export KVCTL_ENDPOINTS=$eps"
}

[ $# -ge 1 ] || { usage >&2; exit 2; }
cmd=$1
shift
case $cmd in
-h | --help | help)
    usage
    exit 0
    ;;
start)
    for a in "$@"; do case $a in -h | --help) usage; exit 0 ;; esac; done
    [ $# -ge 2 ] || usage_error "start needs N and DIR"
    n=$1 dir=$2
    shift 2
    case $n in '' | *[!0-9]*) usage_error "N must be a number of nodes (1..64), got '$n'" ;; esac
    [ "$n" -ge 1 ] && [ "$n" -le 64 ] || usage_error "N must be 1..64, got $n"
    need_bins
    "$bin/kvcluster" start --nodes "$n" --dir "$dir" "$@" >&2 || die "kvcluster could not start the cluster (see the message above and $dir/node-*.log)"
    endpoints "$dir"
    ;;
restart)
    for a in "$@"; do case $a in -h | --help) usage; exit 0 ;; esac; done
    [ $# -eq 2 ] || usage_error "restart needs DIR and I (or all)"
    dir=$1 i=$2
    case $i in all) ;; '' | *[!0-9]*) usage_error "I must be a node number or all, got '$i'" ;; esac
    need_bins
    [ -d "$dir" ] || die "no such directory: $dir"
    "$bin/kvcluster" restart --dir "$dir" --node "$i" >&2 || die "kvcluster could not restart node $i (see above and $dir/node-$i.log)"
    endpoints "$dir"
    ;;
stop | status | endpoints)
    for a in "$@"; do case $a in -h | --help) usage; exit 0 ;; esac; done
    [ $# -eq 1 ] || usage_error "$cmd needs exactly DIR"
    dir=$1
    if [ "$cmd" = endpoints ]; then
        endpoints "$dir"
        exit 0
    fi
    need_bins
    [ -d "$dir" ] || die "no such directory: $dir"
    "$bin/kvcluster" "$cmd" --dir "$dir"
    rc=$?
    [ $rc = 0 ] || exit 1
    ;;
*)
    usage_error "unknown command '$cmd' (start, stop, restart, status, endpoints)"
    ;;
esac
