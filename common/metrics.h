/* Process-wide counters and latency histograms for operators (docs/metrics.md): what a node's
 * Prometheus endpoint (kvserver --metrics) and `kvctl stats` show.
 *
 * The promise: counting costs the data path no locked instruction and no shared cache line.
 * Every thread counts into a shard of its own, created at its first count, with one writer and
 * relaxed stores; a reader (metrics_read) sums the shards, and a thread's shard is folded into
 * the process's totals when the thread exits, so nothing counted is lost. Tasks of one thread
 * share its shard (they never run at once). Totals only grow (counters), except where a reader
 * subtracts two of them.
 *
 * Labels are small fixed sets: an abort's reason (the counters' names), a lock algorithm (its
 * index, lock_algo.id, below METRICS_ALGOS) and a peer node (below METRICS_PEERS). */
#ifndef RDKV_COMMON_METRICS_H
#define RDKV_COMMON_METRICS_H

#include "common/config.h"

#include <stdbool.h>
#include <stdint.h>

enum metric_counter {
    MC_TXN_COMMITS,           /* transactions committed (RDKV_EUNKNOWN included: may have) */
    MC_TXN_COMMITS_UNKNOWN,   /* of them, those whose outcome the client was not told */
    MC_TXN_ABORT_CONFLICT,    /* aborted with RDKV_EABORTED: a lock not granted (the conflict
                                 policy) or a lease that ran out */
    MC_TXN_ABORT_UNAVAILABLE, /* RDKV_EUNAVAILABLE: a node down, a partition moving */
    MC_TXN_ABORT_CLIENT,      /* the client aborted (or closed its session) */
    MC_TXN_ABORT_OTHER,       /* any other error: too big, no space, I/O, bad input */
    MC_TXN_LOCK_CONFLICTS,    /* lock waits that ran out (txn_stats.conflicts) */
    MC_LOG_RECORDS,           /* redo-log records appended */
    MC_LOG_BYTES,             /* their bytes */
    MC_LOG_SYNCS,             /* fdatasync calls on the log */
    MC_LOG_ERRORS,            /* failed log writes or syncs */
    MC_SESSIONS_OPENED,       /* remote sessions opened */
    MC_SESSIONS_CLOSED,       /* remote sessions closed, expired or dropped */
    MC__COUNT
};

enum metric_hist {
    MH_TXN,      /* a transaction from begin to its end (commit or abort) */
    MH_COMMIT,   /* a commit call (locks held, 2PC, log) */
    MH_LOG_SYNC, /* one sync of the redo log */
    MH_LOCK_WAIT,/* an acquire that waited, from its call to its grant or failure */
    MH__COUNT
};

enum metric_algo {
    MA_ACQUIRES, /* acquires */
    MA_WAITS,    /* of them, those that waited (spun, slept, backed off or queued) */
    MA_TIMEOUTS, /* ended at their deadline (RDKV_ETIMEDOUT) */
    MA_ABORTS,   /* refused: a reset took the request, or wait-die died (RDKV_EABORTED) */
    MA_RESETS,   /* lease-expiry resets the acquires performed (a dead holder's lock freed) */
    MA__COUNT
};

enum metric_peer {
    MP_OPS,    /* one-sided operations posted to the peer */
    MP_BYTES,  /* their bytes read or written */
    MP_RPCS,   /* RPCs sent to the peer */
    MP_ERRORS, /* chains and RPCs to the peer that completed with an error */
    MP__COUNT
};

#define METRICS_ALGOS 16
#define METRICS_PEERS CLUSTER_MAX_NODES
/* Histogram buckets: upper bounds in ns, the last one +Inf (Prometheus's le="+Inf"). */
#define METRICS_BUCKETS 20
extern const int64_t metrics_bounds_ns[METRICS_BUCKETS];

struct metrics_hist {
    uint64_t b[METRICS_BUCKETS]; /* per bucket, not cumulative */
    uint64_t count;
    uint64_t sum_ns;
};

struct metrics_shard {
    uint64_t c[MC__COUNT];
    struct metrics_hist h[MH__COUNT];
    uint64_t algo[METRICS_ALGOS][MA__COUNT];
    uint64_t (*peer)[MP__COUNT]; /* [METRICS_PEERS], allocated at the thread's first peer count */
    struct metrics_shard *prev, *next;
};

/* Counting is on from the start; metrics_enable(false) turns it off for the process (the
 * "metrics off" side of docs/benchmarks.md's cost table). */
void metrics_enable(bool on);
extern bool metrics_on;
extern __thread struct metrics_shard *metrics_tls __attribute__((tls_model("initial-exec")));
/* The calling thread's shard, created now if need be; NULL when counting is off (or no memory). */
struct metrics_shard *metrics_shard_new(void);
static inline struct metrics_shard *metrics_me(void)
{
    if (!__atomic_load_n(&metrics_on, __ATOMIC_RELAXED)) return 0;
    struct metrics_shard *s = metrics_tls;
    return s ? s : metrics_shard_new();
}

/* One writer: a plain add published with a relaxed store, which metrics_read loads. */
static inline void metrics_bump(uint64_t *c, uint64_t n)
{
    __atomic_store_n(c, *c + n, __ATOMIC_RELAXED);
}
static inline void metrics_add(enum metric_counter k, uint64_t n)
{
    struct metrics_shard *s = metrics_me();
    if (s) metrics_bump(&s->c[k], n);
}
static inline unsigned metrics_bucket(int64_t ns)
{
    unsigned i = 0;
    while (i < METRICS_BUCKETS - 1 && ns > metrics_bounds_ns[i]) i++;
    return i;
}
static inline void metrics_time(enum metric_hist k, int64_t ns)
{
    struct metrics_shard *s = metrics_me();
    if (!s) return;
    if (ns < 0) ns = 0;
    struct metrics_hist *h = &s->h[k];
    metrics_bump(&h->b[metrics_bucket(ns)], 1);
    metrics_bump(&h->count, 1);
    metrics_bump(&h->sum_ns, (uint64_t)ns);
}
static inline void metrics_algo_add(unsigned algo, enum metric_algo k, uint64_t n)
{
    struct metrics_shard *s = metrics_me();
    if (s && algo < METRICS_ALGOS) metrics_bump(&s->algo[algo][k], n);
}
void metrics_peer_alloc(struct metrics_shard *s);
static inline void metrics_peer_add(uint16_t peer, enum metric_peer k, uint64_t n)
{
    struct metrics_shard *s = metrics_me();
    if (!s || peer >= METRICS_PEERS) return;
    if (!s->peer) metrics_peer_alloc(s);
    if (s->peer) metrics_bump(&s->peer[peer][k], n);
}

/* The process's totals: every live shard and every exited thread's, summed. */
struct metrics_totals {
    uint64_t c[MC__COUNT];
    struct metrics_hist h[MH__COUNT];
    uint64_t algo[METRICS_ALGOS][MA__COUNT];
    uint64_t peer[METRICS_PEERS][MP__COUNT];
};
/* Fills *t (a large struct: allocate it). */
void metrics_read(struct metrics_totals *t);
/* The value at quantile q (0 < q <= 1) of a histogram, as the upper bound of the bucket that
 * holds that rank (INT64_MAX for the +Inf bucket); 0 when empty. */
int64_t metrics_hist_quantile(const struct metrics_hist *h, double q);

#endif
