/* RPC message types served by kvserver (above the fabric's own, which are below
 * FAB_RPC_USER_BASE), and their payloads. The server layer uses FAB_RPC_USER_BASE + 0 .. 31; the
 * lock layer + 32 .. 63 (locks/lock.h). */
#ifndef RDKV_SERVER_PROTO_H
#define RDKV_SERVER_PROTO_H

#include "rdma/fabric.h"

enum kv_rpc {
    /* status: empty request; the reply is a JSON object (see server/status.c) */
    KV_RPC_STATUS = FAB_RPC_USER_BASE + 0,
    /* embedded benchmarks (server/bench.h) */
    KV_RPC_BENCH_LOCK_PREPARE = FAB_RPC_USER_BASE + 1,
    KV_RPC_BENCH_LOCK_RUN = FAB_RPC_USER_BASE + 2,
    KV_RPC_BENCH_LOCK_HOLD = FAB_RPC_USER_BASE + 3,
    KV_RPC_BENCH_LOCK_TRY = FAB_RPC_USER_BASE + 4,
    /* kvbench range (server/bench.h, server/bench_range.c) */
    KV_RPC_BENCH_RANGE_PREPARE = FAB_RPC_USER_BASE + 5,
    KV_RPC_BENCH_RANGE_RUN = FAB_RPC_USER_BASE + 6,
    KV_RPC_BENCH_RANGE_STATS = FAB_RPC_USER_BASE + 7,
};

#endif
