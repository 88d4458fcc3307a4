/* Benchmarks that run inside the nodes. kvbench asks every node, by RPC, to run worker threads
 * on its own fabric, so a worker's "local" lock is in its own arena and nodes share nothing but
 * the fabric. This header is the protocol (shared with kvbench) and the node side. */
#ifndef RDKV_SERVER_BENCH_H
#define RDKV_SERVER_BENCH_H

#include "common/hist.h"
#include "common/pack.h"
#include "rdma/fabric.h"

#define BENCH_MAX_THREADS 64

/* KV_RPC_BENCH_LOCK_PREPARE: u32 total locks. Zeroes this node's part of the lock table. */
/* KV_RPC_BENCH_LOCK_RUN: a bench_lock_req; answered when the run ends with a bench_lock_res. */
struct bench_lock_req {
    char algo[16];
    uint32_t threads;       /* worker threads on this node */
    uint32_t locks;         /* total locks in the table */
    uint32_t locality;      /* percent of ops on this node's own locks */
    int64_t warmup_ns, run_ns;
    int64_t cs_ns;          /* time spent inside each critical section (busy) */
    int64_t local_budget, remote_budget;
    uint64_t seed;
};

struct bench_lock_res {
    uint64_t ops, local_ops, errors;
    uint64_t round_trips, fabric_ops; /* over the measured ops */
    int64_t elapsed_ns;               /* measured window */
    struct hist h;                    /* acquire + release latency, ns */
};

/* KV_RPC_BENCH_LOCK_HOLD (failure tests): take locks and never give them back: str algo,
 * u64 lease_ns, u32 table locks, u32 count, then count x {u16 node, u32 index, u8 mode}. Answered
 * once all are held; the holder thread then waits for the node to die (or to stop).
 * KV_RPC_BENCH_LOCK_TRY: take one lock and give it back: str algo, u64 lease_ns, u32 table locks,
 * u16 node, u32 index, u8 mode, u64 timeout_ns. Answers its status (a lease reset that aborts
 * the request is retried) with u64 elapsed_ns and the 64-byte lock line as read after the
 * release. */

void bench_lock_req_pack(const struct bench_lock_req *q, struct pack_w *w);
int bench_lock_req_unpack(struct bench_lock_req *q, const void *p, size_t len);
void bench_lock_res_pack(const struct bench_lock_res *r, struct pack_w *w);
int bench_lock_res_unpack(struct bench_lock_res *r, const void *p, size_t len);

/* Registers the node-side handlers (kvserver calls it once). */
void bench_register(struct fabric *f);
/* Asks a running benchmark to stop and waits up to wait_ns for it. Returns false if it is still
 * running (the caller must not close the fabric under it). */
bool bench_shutdown(int64_t wait_ns);

#endif
