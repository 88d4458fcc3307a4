/* kvbench: rdkv's benchmark driver. Each subcommand measures one layer and prints YCSB-style
 * text (and JSON on request). */
#include "tools/kvbench/peer.h"

#include <stdio.h>
#include <string.h>

int cmd_fabric(int argc, char **argv);
int cmd_lock(int argc, char **argv);
int cmd_range(int argc, char **argv);
int cmd_txn(int argc, char **argv);
int cmd_ycsb(int argc, char **argv);
int cmd_tpcc(int argc, char **argv);
int cmd_sessions(int argc, char **argv);
int cmd_wal(int argc, char **argv);
int cmd_failover(int argc, char **argv);

static const char usage[] =
    "usage: kvbench COMMAND [options]\n"
    "\n"
    "Commands:\n"
    "  fabric    latency and throughput of the fabric's operations (READ, WRITE, CAS, FAA, RPC)\n"
    "            against a raw TCP ping-pong baseline\n"
    "  lock      the lock-table benchmark: alock, spin and mcs, workers inside the nodes\n"
    "  range     the range-lock benchmark: combiner-rpc, combiner-rdma, itree, segment and\n"
    "            citron on the range-lock thesis's micro and OLTP workloads\n"
    "  txn       single transactions of the store: read-only on a local or a remote key, and\n"
    "            read-write on two partitions, with their fabric round trips\n"
    "  ycsb      YCSB's core workloads A-F and a transfer workload, on rdkv or (--db) a peer\n"
    "  tpcc      TPC-C on rdkv, with its consistency checks\n"
    "  sessions  what idle remote sessions cost a node, and a read meanwhile\n"
    "  wal       the redo log on this disk: fdatasync latency, commits/s and commit latency\n"
    "            under --durability off, group and sync (no cluster)\n"
    "  failover  kill -9 of a primary in fresh replicated local clusters: the time to the first\n"
    "            commit on its keys, false suspicions, and that nothing acknowledged is lost\n"
    "\n"
    "Run 'kvbench COMMAND --help' for a command's options. Results go to stdout as YCSB-style\n"
    "'[SERIES], Metric, value' lines followed by a summary table; --json FILE writes JSON too.\n"
    "\n"
    "Every command that starts or reaches a cluster also takes --secret-file FILE (the cluster's\n"
    "secret, else the --config's secret_file or $RDKV_SECRET_FILE; the nodes kvbench starts get a\n"
    "fresh one) and --insecure (start the nodes --insecure and prove nothing: only to measure the\n"
    "handshake's cost on a trusted host; docs/security.md).\n";

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        FILE *out = argc < 2 ? stderr : stdout;
        fputs(usage, out);
        fprintf(out, "kvbench ycsb --db takes: %s (the peers this kvbench was built with)\n",
                peer_dbs());
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "fabric")) return cmd_fabric(argc - 1, argv + 1);
    if (!strcmp(argv[1], "lock")) return cmd_lock(argc - 1, argv + 1);
    if (!strcmp(argv[1], "range")) return cmd_range(argc - 1, argv + 1);
    if (!strcmp(argv[1], "txn")) return cmd_txn(argc - 1, argv + 1);
    if (!strcmp(argv[1], "ycsb")) return cmd_ycsb(argc - 1, argv + 1);
    if (!strcmp(argv[1], "tpcc")) return cmd_tpcc(argc - 1, argv + 1);
    if (!strcmp(argv[1], "sessions")) return cmd_sessions(argc - 1, argv + 1);
    if (!strcmp(argv[1], "wal")) return cmd_wal(argc - 1, argv + 1);
    if (!strcmp(argv[1], "failover")) return cmd_failover(argc - 1, argv + 1);
    fprintf(stderr, "kvbench: unknown command '%s'\nTry 'kvbench --help'.\n", argv[1]);
    return 2;
}
