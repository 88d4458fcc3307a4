#!/usr/bin/env bash
# A standalone local ZooKeeper (Debian's `zookeeper` package) for replicated local clusters and
# tests: its config, data and log live in DIR.
#
#   tools/zk.sh start DIR PORT   starts it (unless DIR's is running) and waits until it answers;
#                                prints "127.0.0.1:PORT"
#   tools/zk.sh stop DIR         stops it (SIGTERM, then SIGKILL after 10 s)
#   tools/zk.sh status DIR       exit 0 when it answers
#
# ZK_TICK_MS (default 500) sets tickTime: sessions may last 2 to 20 ticks.
set -u
usage() { echo "usage: zk.sh start DIR PORT | stop DIR | status DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1 dir=$2
jar=/usr/share/java/zookeeper.jar

ruok() { # PORT: 0 when the server says imok
    local r
    r=$(timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1 && printf ruok >&3 && cat <&3" 2>/dev/null)
    [ "$r" = imok ]
}
port_of() { sed -n 's/^clientPort=//p' "$dir/zk/zoo.cfg" 2>/dev/null; }
running() { [ -f "$dir/zk/zk.pid" ] && kill -0 "$(cat "$dir/zk/zk.pid")" 2>/dev/null; }

case "$cmd" in
start)
    [ $# -eq 3 ] || usage
    port=$3
    [ -r "$jar" ] && command -v java >/dev/null ||
        { echo "zk.sh: ZooKeeper is not installed (apt-get install zookeeper)" >&2; exit 1; }
    mkdir -p "$dir/zk/data" || exit 1
    if running; then
        ruok "$(port_of)" && { echo "127.0.0.1:$(port_of)"; exit 0; }
    fi
    cat >"$dir/zk/zoo.cfg" <<EOF
tickTime=${ZK_TICK_MS:-500}
dataDir=$dir/zk/data
clientPort=$port
clientPortAddress=127.0.0.1
maxClientCnxns=200
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr
EOF
    # Java's own classpath: the configuration directory (log4j.properties) and the jar.
    setsid java -Xmx256m -cp "/etc/zookeeper/conf:$jar" -Dzookeeper.log.dir="$dir/zk" \
        -Dzookeeper.root.logger=WARN,CONSOLE \
        org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zk/zoo.cfg" \
        >"$dir/zk/zk.log" 2>&1 </dev/null &
    echo $! >"$dir/zk/zk.pid"
    for _ in $(seq 300); do # up to 30 s: a JVM's start on a loaded 2-core machine
        ruok "$port" && { echo "127.0.0.1:$port"; exit 0; }
        kill -0 "$(cat "$dir/zk/zk.pid")" 2>/dev/null ||
            { echo "zk.sh: ZooKeeper exited; its log:" >&2; tail -20 "$dir/zk/zk.log" >&2; exit 1; }
        sleep 0.1
    done
    echo "zk.sh: ZooKeeper did not answer on port $port within 30 s; $dir/zk/zk.log has its log" >&2
    exit 1 ;;
stop)
    running || exit 0
    pid=$(cat "$dir/zk/zk.pid")
    kill "$pid" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
    exit 0 ;;
status)
    running && ruok "$(port_of)" ;;
*) usage ;;
esac
