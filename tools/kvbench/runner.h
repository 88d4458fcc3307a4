/* The workload runner: workers -- threads, or tasks of threads (--tasks) -- each on its own rdkv
 * session, running a workload's steps
 * closed-loop or open-loop (--target), with a warm-up, per-operation statistics merged across
 * threads (histograms, never averaged percentiles), and interval snapshots for status lines.
 * kvbench uses it for remote mode; the workload service inside the nodes (wl_serve,
 * tools/kvbench/node/wl_serve.c) uses it for embedded mode, driven by RPC.
 *
 * The workload service's protocol (RPCs to every node, rdma/rpc_types.h; answered with u32
 * status first, as sessions are):
 *   KV_RPC_WL_LOAD   str class, bytes cfg, u32 part, u32 nparts          -> str error text
 *   KV_RPC_WL_START  a packed wl_run_req                                 -> str error text
 *   KV_RPC_WL_POLL   (empty) -> u8 done, packed wl_stats of the interval since the last poll,
 *                    then, when done, packed wl_stats of the whole measured run, u32 the run's
 *                    status, str its error text
 *   KV_RPC_WL_STOP   (empty) -> (empty): the run ends now (its results stay for a poll)
 *   KV_RPC_WL_CHECK  str class, bytes cfg, u32 part -> a packed wl_check of that part of the
 *                    check (workload.h); or, when the status is not 0, str error text */
#ifndef RDKV_KVBENCH_RUNNER_H
#define RDKV_KVBENCH_RUNNER_H

#include "tools/kvbench/workload.h"

#include "common/hist.h"
#include "common/pack.h"
#include "rdma/rpc_types.h" /* KV_RPC_WL_* */

#include <stdbool.h>
#include <stdint.h>

#define WL_MAX_THREADS 256
#define WL_MAX_TASKS 256    /* workers per thread */
#define WL_MAX_WORKERS 4096 /* threads x tasks */
#define WL_MAX_CFG (64 * 1024)

struct wl_opstat {
    uint64_t ok, not_found, errors, aborts, rolled_back;
    int32_t first_error; /* the first error status seen (0: none) */
    struct hist h;       /* latency of ok and not-found outcomes, ns */
};

/* What the operations cost (whole runs only: every step of every worker, warm-up included):
 * fabric round trips and RPCs the workers issued, and the context switches of the process that
 * ran them (the node in embedded mode, kvbench in remote mode; getrusage). */
struct wl_cost {
    uint64_t steps, round_trips, rpcs, csw_voluntary, csw_involuntary;
};

struct wl_stats {
    uint32_t nops;
    int64_t elapsed_ns; /* the measured window (0 for interval snapshots) */
    struct wl_cost cost;
    struct wl_opstat op[WL_MAX_OPS];
};

void wl_stats_init(struct wl_stats *s, unsigned nops);
void wl_stats_merge(struct wl_stats *dst, const struct wl_stats *src);
void wl_stats_pack(const struct wl_stats *s, struct pack_w *w);
bool wl_stats_unpack(struct wl_stats *s, struct pack_r *r);
uint64_t wl_stats_ops(const struct wl_stats *s); /* every recorded outcome */
void wl_check_pack(const struct wl_check *c, struct pack_w *w);
bool wl_check_unpack(struct wl_check *c, struct pack_r *r);

/* What a run does (the same in both modes; in embedded mode each node gets its share). */
struct wl_run_req {
    char cls[16];
    uint32_t threads;        /* worker threads in this process */
    uint32_t tasks;          /* workers per thread, each a task (1: the thread itself) */
    uint32_t nodes, proc, nprocs;
    int32_t node;            /* embedded: this node; remote: -1 */
    int64_t warmup_ns, run_ns; /* run_ns 0: until ops are done */
    uint64_t ops;            /* measured operations in this process (0: time only) */
    double target;           /* operations per second in this process (0: closed loop) */
    uint64_t seed;
    int64_t lock_timeout_ns; /* 0: the node's */
    uint32_t cfg_len;
    uint8_t *cfg;            /* owned by the request after unpack */
};
void wl_run_req_pack(const struct wl_run_req *q, struct pack_w *w);
int wl_run_req_unpack(struct wl_run_req *q, const void *p, size_t len); /* allocates q->cfg */

/* How a worker gets its session. */
typedef int (*wl_session_fn)(void *arg, const struct wl_place *pl, const rdkv_options *o,
                             rdkv_session **out);

struct wl_run;
/* Starts the workers (they open their sessions, meet, then run). */
int wl_run_start(const struct wl_run_req *q, wl_session_fn open, void *arg, struct wl_run **out,
                 char *err, size_t errcap);
/* The interval since the last call, merged across workers; *done once every worker ended. */
void wl_run_poll(struct wl_run *r, struct wl_stats *interval, bool *done);
/* Asks the workers to stop at their next step. */
void wl_run_stop(struct wl_run *r);
/* Waits for the workers, gives the measured totals (and the first session failure, if any, in
 * err), frees the run. Returns 0 or the first session-level failure. */
int wl_run_finish(struct wl_run *r, struct wl_stats *total, char *err, size_t errcap);

#endif
