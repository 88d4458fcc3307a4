/* kvserver: the rdkv node daemon (server/daemon.h) with kvbench's services inside (the lock,
 * range and txn benchmarks, the embedded YCSB and TPC-C workers: tools/kvbench/node/bench.h),
 * which a node serves only when started with --bench. This is the one place the two meet: the
 * server library and librdkv carry no benchmark code. */
#include "server/daemon.h"
#include "tools/kvbench/node/bench.h"

static const struct daemon_services kvbench_services = {
    .name = "kvbench's services",
    .start = bench_node_start,
    .stop = bench_node_stop,
};

int main(int argc, char **argv) { return daemon_run(argc, argv, &kvbench_services); }
