/* All of kvbench's services on one node (bench.h: bench_node_start, bench_node_stop). */
#include "tools/kvbench/node/bench.h"

#include "common/clock.h"
#include "server/node.h"

#include <stdio.h>

int bench_node_start(struct node *n, char *err, size_t errcap)
{
    bench_register(node_fabric(n), node_range_server(n));
    bench_txn_register(node_fabric(n), node_txn(n));
    int rc = wl_serve(n);
    if (rc) snprintf(err, errcap, "the workload service: %s", rdkv_strerror(rc));
    return rc;
}

bool bench_node_stop(int64_t wait_ns)
{
    wl_serve_stop();
    int64_t deadline = clock_now_ns() + wait_ns;
    if (!bench_shutdown(wait_ns)) return false;
    int64_t left = deadline - clock_now_ns();
    return bench_txn_shutdown(left > 0 ? left : 0);
}
