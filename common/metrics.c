/* Counters and histograms: per-thread shards, summed by readers (metrics.h). */
#include "common/metrics.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* 10 us .. 10 s in 1-2.5-5 steps, then +Inf */
const int64_t metrics_bounds_ns[METRICS_BUCKETS] = {
    10000,      25000,      50000,       100000,      250000,      500000,     1000000,
    2500000,    5000000,    10000000,    25000000,    50000000,    100000000,  250000000,
    500000000,  1000000000, 2500000000LL, 5000000000LL, 10000000000LL, INT64_MAX};

bool metrics_on = true;
__thread struct metrics_shard *metrics_tls __attribute__((tls_model("initial-exec")));

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct metrics_shard *live;   /* the threads' shards (under mu) */
static struct metrics_totals *gone;  /* what exited threads counted (under mu) */
static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;

void metrics_enable(bool on) { __atomic_store_n(&metrics_on, on, __ATOMIC_RELAXED); }

static uint64_t ld(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }

static void hist_add(struct metrics_hist *d, const struct metrics_hist *s)
{
    for (unsigned i = 0; i < METRICS_BUCKETS; i++) d->b[i] += ld(&s->b[i]);
    d->count += ld(&s->count);
    d->sum_ns += ld(&s->sum_ns);
}

/* d += one shard's or the exited threads' counts (under mu) */
static void sum_into(struct metrics_totals *d, const uint64_t *c, const struct metrics_hist *h,
                     const uint64_t (*algo)[MA__COUNT], const uint64_t (*peer)[MP__COUNT])
{
    for (unsigned i = 0; i < MC__COUNT; i++) d->c[i] += ld(&c[i]);
    for (unsigned i = 0; i < MH__COUNT; i++) hist_add(&d->h[i], &h[i]);
    for (unsigned a = 0; a < METRICS_ALGOS; a++)
        for (unsigned k = 0; k < MA__COUNT; k++) d->algo[a][k] += ld(&algo[a][k]);
    if (peer)
        for (unsigned p = 0; p < METRICS_PEERS; p++)
            for (unsigned k = 0; k < MP__COUNT; k++) d->peer[p][k] += ld(&peer[p][k]);
}

static void add_shard(struct metrics_totals *d, const struct metrics_shard *s)
{
    sum_into(d, s->c, s->h, (const uint64_t(*)[MA__COUNT])s->algo,
             (const uint64_t(*)[MP__COUNT])__atomic_load_n(&s->peer, __ATOMIC_ACQUIRE));
}

/* A thread exits: its counts go into `gone`, its shard away. */
static void shard_gone(void *v)
{
    struct metrics_shard *s = v;
    pthread_mutex_lock(&mu);
    if (!gone) gone = calloc(1, sizeof *gone);
    if (gone) add_shard(gone, s); /* (no memory: this thread's counts are lost, not the rest) */
    if (s->prev) s->prev->next = s->next;
    else live = s->next;
    if (s->next) s->next->prev = s->prev;
    pthread_mutex_unlock(&mu);
    metrics_tls = NULL;
    free(s->peer);
    free(s);
}

static void key_init(void) { (void)pthread_key_create(&key, shard_gone); }

struct metrics_shard *metrics_shard_new(void)
{
    pthread_once(&once, key_init);
    struct metrics_shard *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    if (pthread_setspecific(key, s)) {
        free(s);
        return NULL;
    }
    pthread_mutex_lock(&mu);
    s->next = live;
    if (live) live->prev = s;
    live = s;
    pthread_mutex_unlock(&mu);
    metrics_tls = s;
    return s;
}

void metrics_peer_alloc(struct metrics_shard *s)
{
    uint64_t(*p)[MP__COUNT] = calloc(METRICS_PEERS, sizeof *p);
    if (p) __atomic_store_n(&s->peer, p, __ATOMIC_RELEASE);
}

void metrics_read(struct metrics_totals *t)
{
    memset(t, 0, sizeof *t);
    pthread_mutex_lock(&mu);
    for (struct metrics_shard *s = live; s; s = s->next) add_shard(t, s);
    if (gone)
        sum_into(t, gone->c, gone->h, (const uint64_t(*)[MA__COUNT])gone->algo,
                 (const uint64_t(*)[MP__COUNT])gone->peer);
    pthread_mutex_unlock(&mu);
}

int64_t metrics_hist_quantile(const struct metrics_hist *h, double q)
{
    if (!h->count) return 0;
    uint64_t rank = (uint64_t)(q * (double)h->count + 0.999999);
    if (rank < 1) rank = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < METRICS_BUCKETS; i++) {
        seen += h->b[i];
        if (seen >= rank) return metrics_bounds_ns[i];
    }
    return INT64_MAX;
}
