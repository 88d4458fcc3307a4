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
