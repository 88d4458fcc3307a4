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
enum bench_dist { BENCH_DIST_UNIFORM = 0, BENCH_DIST_POWERLAW = 1 };
#define BENCH_MAX_LOCKS_PER_OP 16

struct bench_lock_req {
    char algo[16];
    uint32_t threads;       /* worker threads on this node */
    uint32_t locks;         /* total locks in the table */
    uint32_t locality;      /* percent of locks taken on this node's own part of the table */
    int64_t warmup_ns, run_ns;
    int64_t cs_ns;          /* time spent inside each critical section (busy) */
    int64_t local_budget, remote_budget;
    uint64_t seed;
    uint32_t read_ratio;    /* percent of locks taken shared */
    uint32_t locks_per_op;  /* K distinct locks per op, taken in ascending order */
    int64_t think_ns;       /* sleep between ops, outside every lock */
    uint32_t dist;          /* enum bench_dist: the index within a node's part */
    uint32_t alpha_milli;   /* power-law exponent x 1000 (> 1000) */
    uint32_t fail_ppm;      /* per million remote holdings: never released (a dead holder) */
    int64_t lease_ns;       /* 0: the lock layer's default */
    int64_t timeout_ns;     /* per attempt of an op; 0: none */
    int64_t omega_ns;       /* DSLR's poll unit; 0: the measured round trip */
};

struct bench_lock_res {
    uint64_t ops, local_ops, errors;
    uint64_t round_trips, fabric_ops; /* over the measured ops */
    int64_t elapsed_ns;               /* measured window */
    uint64_t timeouts, aborts, resets, lease_expired, overflow_resets; /* lock_stats deltas */
    uint64_t retries;                 /* failed attempts of ops (then retried) */
    uint64_t injected;                /* holdings abandoned by failure injection */
    struct hist h;                    /* op latency (all attempts until success), ns */
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
/* NULL if the request is valid, else what is wrong with it. */
const char *bench_lock_req_check(const struct bench_lock_req *q);
/* Merges r into dst (counts add up, the window is the longest, histograms merge). */
void bench_lock_res_add(struct bench_lock_res *dst, const struct bench_lock_res *r);

/* Registers the node-side handlers (kvserver calls it once). */
void bench_register(struct fabric *f);
/* Asks a running benchmark to stop and waits up to wait_ns for it. Returns false if it is still
 * running (the caller must not close the fabric under it). */
bool bench_shutdown(int64_t wait_ns);

#endif
