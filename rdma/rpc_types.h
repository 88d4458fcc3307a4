/* Every RPC message type of rdkv, in one place: the fabric's own and each module's block. A
 * type is a uint16_t below FAB_RPC_MAX_TYPES (rdma/fabric.h); a node registers one handler per
 * type (fab_rpc_register) and answers a type nobody registered with RDKV_ENOHANDLER. The numbers
 * are wire format between nodes of one version: take new ones from a block's free numbers, and
 * never give a number a second meaning. Payloads are described where each block's handlers are
 * declared (the header named with the block). */
#ifndef RDKV_RDMA_RPC_TYPES_H
#define RDKV_RDMA_RPC_TYPES_H

/* 0 .. 63: the fabric's own (rdma/fabric.h, rdma/verbs/). 0 is never a type. */
enum fab_rpc_builtin {
    FAB_RPC_ECHO = 1,          /* replies with the request's bytes (liveness, peer waits) */
    FAB_RPC_VERBS_CONNECT = 2, /* verbs: out-of-band queue-pair exchange */
    FAB_RPC_VERBS_TICKET = 3,  /* verbs: a one-time ticket for one rdma_cm connect */
};
#define FAB_RPC_USER_BASE 64 /* message types below this are the fabric's own */

/* FAB_RPC_USER_BASE + 0 .. + 31: the node and its transactions. The node's own types are
 * server/node.h's (KV_RPC_STATUS) and server/session.h's (KV_RPC_SESSION, the one type clients
 * may call; payloads in server/proto.h); the transaction layer has + 8 .. + 15 (txn/txn.h;
 * coordinator in txn/txn.c, participant in txn/part.c). Free: + 15, + 20 .. + 31. */
enum kv_rpc {
    KV_RPC_STATUS = FAB_RPC_USER_BASE + 0,   /* empty -> this node's status, JSON
                                                (node_status_json) */
    KV_RPC_REPL = FAB_RPC_USER_BASE + 1,     /* a primary's commit to a backup
                                                (server/replica.c) -> status */
    KV_RPC_REPL_DIGEST = FAB_RPC_USER_BASE + 2, /* u16 partition -> u64 rows, u64 checksum of
                                                   the copy held, u64 records, u64 their
                                                   checksum (tests compare replicas) */
    KV_RPC_LEASE = FAB_RPC_USER_BASE + 3,    /* a member's lease renewal at the configuration
                                                manager (server/lease.c) -> u8 answer */
    KV_RPC_REPL_TAIL = FAB_RPC_USER_BASE + 4, /* a promoted primary asks a backup for the
                                                 commits it holds that may not be on every
                                                 copy (server/replica.c) */
    KV_RPC_REPL_EPOCH = FAB_RPC_USER_BASE + 5, /* empty -> u64: the epoch whose routes the
                                                  node has taken (server/replica.c) */
    KV_RPC_REPL_JOIN = FAB_RPC_USER_BASE + 6, /* empty: a node back with an empty memory asks
                                                 the manager for copies to fill -> status */
    KV_RPC_REPL_COPY = FAB_RPC_USER_BASE + 7, /* a primary's rows to a copy being filled
                                                 (server/replica.c) -> status */
    KV_RPC_SESSION = FAB_RPC_USER_BASE + 16, /* remote sessions of rdkv.h (server/proto.h) */
    KV_RPC_REPL_FILLED = FAB_RPC_USER_BASE + 17, /* a primary tells the manager that copies of
                                                    its partition are filled -> status */
    KV_RPC_REPL_DROP = FAB_RPC_USER_BASE + 18, /* a primary asks the manager to drop a copy of
                                                  its partition that keeps refusing its
                                                  commits -> status */
    KV_RPC_REPL_HANDBACK = FAB_RPC_USER_BASE + 19, /* a primary that serves a partition in its
                                                      home node's stead, drained, asks the
                                                      manager to hand it back -> status */
};
enum txn_rpc {
    TXN_RPC_PREPARE = FAB_RPC_USER_BASE + 8,  /* u64 txid, ops -> status */
    TXN_RPC_COMMIT = FAB_RPC_USER_BASE + 9,   /* u64 txid -> status */
    TXN_RPC_ABORT = FAB_RPC_USER_BASE + 10,   /* u64 txid -> status */
    TXN_RPC_APPLY = FAB_RPC_USER_BASE + 11,   /* one partition: ops, applied at once */
    TXN_RPC_SCAN = FAB_RPC_USER_BASE + 12,    /* a page of keys and rows in key order */
    TXN_RPC_RESOLVE = FAB_RPC_USER_BASE + 13, /* u64 txid, u8 enum txn_resolve -> status */
    TXN_RPC_QUERY = FAB_RPC_USER_BASE + 14,   /* u64 txid -> u8 enum txn_state (in-doubt) */
};

/* FAB_RPC_USER_BASE + 32 .. + 63: the lock layer (locks/lock.h; the trad lock manager in
 * locks/trad.c, the range locks' server-side designs in locks/range/server.c). Free: + 34 .. + 39
 * and + 44 .. + 63. */
enum lock_rpc {
    LOCK_RPC_TRAD_LOCK = FAB_RPC_USER_BASE + 32,
    LOCK_RPC_TRAD_UNLOCK = FAB_RPC_USER_BASE + 33,
    RANGE_RPC_LOCK = FAB_RPC_USER_BASE + 40,    /* combiner: lock */
    RANGE_RPC_UNLOCK = FAB_RPC_USER_BASE + 41,  /* combiner: release or cancel */
    RANGE_RPC_ILOCK = FAB_RPC_USER_BASE + 42,   /* itree: lock */
    RANGE_RPC_IUNLOCK = FAB_RPC_USER_BASE + 43, /* itree: release */
};

/* KV_RPC_BENCH_FIRST .. KV_RPC_BENCH_LAST (FAB_RPC_USER_BASE + 64 .. + 95): kvbench's services
 * inside the nodes (tools/kvbench/node/). Only kvserver started with --bench serves them; every
 * other node answers the whole block with RDKV_ENOTSUP and NODE_BENCH_OFF (server/node.h).
 * kvbench and the nodes it drives are always of one build, so this block may be renumbered; the
 * types a client library calls (KV_RPC_SESSION) keep their numbers. Free: + 78 .. + 95. */
#define KV_RPC_BENCH_FIRST (FAB_RPC_USER_BASE + 64)
#define KV_RPC_BENCH_LAST (FAB_RPC_USER_BASE + 95)
enum kv_rpc_bench {
    /* kvbench lock (tools/kvbench/node/bench.h, bench_lock.c) */
    KV_RPC_BENCH_LOCK_PREPARE = KV_RPC_BENCH_FIRST + 0,
    KV_RPC_BENCH_LOCK_RUN = KV_RPC_BENCH_FIRST + 1,
    KV_RPC_BENCH_LOCK_HOLD = KV_RPC_BENCH_FIRST + 2,
    KV_RPC_BENCH_LOCK_TRY = KV_RPC_BENCH_FIRST + 3,
    /* kvbench range (tools/kvbench/node/bench.h, bench_range.c) */
    KV_RPC_BENCH_RANGE_PREPARE = KV_RPC_BENCH_FIRST + 4,
    KV_RPC_BENCH_RANGE_RUN = KV_RPC_BENCH_FIRST + 5,
    KV_RPC_BENCH_RANGE_STATS = KV_RPC_BENCH_FIRST + 6,
    /* kvbench txn (tools/kvbench/node/bench.h, bench_txn.c) */
    KV_RPC_BENCH_TXN_LOAD = KV_RPC_BENCH_FIRST + 7,
    KV_RPC_BENCH_TXN_RUN = KV_RPC_BENCH_FIRST + 8,
    /* kvbench ycsb and tpcc, embedded workers: the workload service (tools/kvbench/runner.h) */
    KV_RPC_WL_LOAD = KV_RPC_BENCH_FIRST + 9,
    KV_RPC_WL_START = KV_RPC_BENCH_FIRST + 10,
    KV_RPC_WL_POLL = KV_RPC_BENCH_FIRST + 11,
    KV_RPC_WL_STOP = KV_RPC_BENCH_FIRST + 12,
    KV_RPC_WL_CHECK = KV_RPC_BENCH_FIRST + 13,
};

#endif
