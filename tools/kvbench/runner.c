/* The workload runner (runner.h). Each worker owns its statistics;
 * a mutex per worker, taken once per recorded operation (uncontended but for the status poll),
 * lets the poller take interval snapshots without tearing a histogram. */
#include "tools/kvbench/runner.h"
#include "tools/kvbench/fields.h"

#include "client/embed.h"

#include "common/clock.h"
#include "common/rng.h"
#include "common/task.h"
#include "rdma/fabric.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static const struct wl_class *registered[8];

void wl_class_register(const struct wl_class *c)
{
    for (unsigned i = 0; i < 8; i++)
        if (!registered[i] || registered[i] == c) {
            registered[i] = c;
            return;
        }
}

const struct wl_class *wl_class_find(const char *name)
{
    const struct wl_class *all[] = {&wl_ycsb, &wl_tpcc, &wl_transfer};
    for (unsigned i = 0; i < sizeof all / sizeof *all; i++)
        if (!strcmp(all[i]->name, name) && all[i]->step) return all[i];
    for (unsigned i = 0; i < 8 && registered[i]; i++)
        if (!strcmp(registered[i]->name, name)) return registered[i];
    return NULL;
}

int wl_load_rows(rdkv_session *s, uint64_t n, unsigned part, unsigned nparts, unsigned nodes,
                 int (*key)(void *arg, uint64_t i, char *buf, size_t cap),
                 void (*value)(void *arg, uint64_t i, const void **v, size_t *vlen), void *arg)
{
    rdkv_txn *t = NULL;
    unsigned in_batch = 0;
    int rc = 0;
    for (uint64_t i = 0; i < n && !rc; i++) {
        char k[64];
        int kl = key(arg, i, k, sizeof k);
        if (kl < 0) {
            rc = kl;
            break;
        }
        if (nparts == nodes ? rdkv_key_partition(k, (size_t)kl, nodes) != part : i % nparts != part)
            continue;
        if (!t && (rc = rdkv_txn_begin(s, &t))) break;
        const void *v;
        size_t vl;
        value(arg, i, &v, &vl);
        if ((rc = rdkv_txn_put(t, k, (size_t)kl, v, vl))) break;
        if (++in_batch == 200) {
            rc = rdkv_txn_commit(t);
            rdkv_txn_free(t);
            t = NULL;
            in_batch = 0;
        }
    }
    if (t) {
        if (!rc) rc = rdkv_txn_commit(t);
        else rdkv_txn_abort(t);
        rdkv_txn_free(t);
    }
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Statistics */

void wl_stats_init(struct wl_stats *s, unsigned nops)
{
    memset(s, 0, sizeof *s);
    s->nops = nops > WL_MAX_OPS ? WL_MAX_OPS : nops;
    for (unsigned i = 0; i < WL_MAX_OPS; i++) hist_init(&s->op[i].h);
}

/* A whole run's head and each operation's figures, as fields (fields.h): the encoding of
 * KV_RPC_WL_POLL's statistics and the merge across workers and nodes. */
#define S struct wl_stats
static const struct bench_field stats_head[] = {
    BFIELD(S, nops, BF_U32, BF_MAX),
    BFIELD(S, elapsed_ns, BF_I64, BF_MAX),
    BFIELD(S, cost.steps, BF_U64, BF_SUM),
    BFIELD(S, cost.round_trips, BF_U64, BF_SUM),
    BFIELD(S, cost.rpcs, BF_U64, BF_SUM),
    BFIELD(S, cost.csw_voluntary, BF_U64, BF_SUM),
    BFIELD(S, cost.csw_involuntary, BF_U64, BF_SUM),
};
#undef S
#define O struct wl_opstat
static const struct bench_field opstat_fields[] = {
    BFIELD(O, ok, BF_U64, BF_SUM),
    BFIELD(O, not_found, BF_U64, BF_SUM),
    BFIELD(O, errors, BF_U64, BF_SUM),
    BFIELD(O, aborts, BF_U64, BF_SUM),
    BFIELD(O, rolled_back, BF_U64, BF_SUM),
    BFIELD(O, first_error, BF_I32, BF_FIRST),
    BFIELD(O, h, BF_HIST, BF_SUM),
};
#undef O

void wl_stats_merge(struct wl_stats *dst, const struct wl_stats *src)
{
    bf_merge(BFIELDS(stats_head), dst, src);
    for (unsigned i = 0; i < src->nops; i++) bf_merge(BFIELDS(opstat_fields), &dst->op[i], &src->op[i]);
}

uint64_t wl_stats_ops(const struct wl_stats *s)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < s->nops; i++) n += s->op[i].ok + s->op[i].not_found + s->op[i].errors;
    return n;
}

void wl_stats_pack(const struct wl_stats *s, struct pack_w *w)
{
    bf_pack(BFIELDS(stats_head), s, w);
    for (unsigned i = 0; i < s->nops; i++) bf_pack(BFIELDS(opstat_fields), &s->op[i], w);
}

bool wl_stats_unpack(struct wl_stats *s, struct pack_r *r)
{
    struct wl_stats head;
    if (!bf_unpack(BFIELDS(stats_head), &head, r) || head.nops > WL_MAX_OPS) return false;
    wl_stats_init(s, head.nops);
    s->elapsed_ns = head.elapsed_ns;
    s->cost = head.cost;
    for (unsigned i = 0; i < s->nops; i++)
        if (!bf_unpack(BFIELDS(opstat_fields), &s->op[i], r)) return false;
    return r->err == 0;
}

int wl_probe_rows(rdkv_session *s, uint64_t n, unsigned want, unsigned *found,
                  int (*key)(void *arg, uint64_t i, char *buf, size_t cap), void *arg)
{
    *found = 0;
    if (want > n) want = (unsigned)n;
    for (unsigned k = 0; k < want; k++) {
        uint64_t i = want > 1 ? (n - 1) * k / (want - 1) : 0;
        char kb[256];
        int kl = key(arg, i, kb, sizeof kb);
        if (kl < 0) return kl;
        const void *v;
        size_t vl;
        int rc = rdkv_get(s, kb, (size_t)kl, &v, &vl);
        if (rc == 0) (*found)++;
        else if (rc != RDKV_ENOTFOUND) return rc;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Checks */

void wl_check_init(struct wl_check *c) { memset(c, 0, sizeof *c); }

void wl_check_merge(struct wl_check *dst, const struct wl_check *src)
{
    for (unsigned i = 0; i < WL_MAX_CHECKS; i++) {
        if (!dst->failed[i] && src->failed[i]) memcpy(dst->first[i], src->first[i], WL_CHECK_TEXT);
        dst->checked[i] += src->checked[i];
        dst->failed[i] += src->failed[i];
        dst->count[i] += src->count[i];
        dst->sum[i] += src->sum[i];
    }
}

void wl_check_note(struct wl_check *c, unsigned i, const char *fail_fmt, ...)
{
    c->checked[i]++;
    if (!fail_fmt) return;
    if (!c->failed[i]++) {
        va_list ap;
        va_start(ap, fail_fmt);
        vsnprintf(c->first[i], WL_CHECK_TEXT, fail_fmt, ap);
        va_end(ap);
    }
}

void wl_check_pack(const struct wl_check *c, struct pack_w *w)
{
    pack_u32(w, WL_MAX_CHECKS);
    for (unsigned i = 0; i < WL_MAX_CHECKS; i++) {
        pack_u64(w, c->checked[i]);
        pack_u64(w, c->failed[i]);
        pack_u64(w, c->count[i]);
        pack_u64(w, (uint64_t)c->sum[i]);
        pack_str(w, c->first[i]);
    }
}

bool wl_check_unpack(struct wl_check *c, struct pack_r *r)
{
    wl_check_init(c);
    if (unpack_u32(r) != WL_MAX_CHECKS) return false;
    for (unsigned i = 0; i < WL_MAX_CHECKS; i++) {
        c->checked[i] = unpack_u64(r);
        c->failed[i] = unpack_u64(r);
        c->count[i] = unpack_u64(r);
        c->sum[i] = (int64_t)unpack_u64(r);
        unpack_str(r, c->first[i], WL_CHECK_TEXT);
    }
    return !r->err;
}

int wl_check_all(const struct wl_class *c, rdkv_session *s, const void *cfg, size_t len,
                 char *out, size_t outcap)
{
    struct wl_check all;
    wl_check_init(&all);
    unsigned n = c->check_parts(cfg, len);
    for (unsigned p = 0; p < n; p++) {
        int rc = c->check(s, cfg, len, p, &all);
        if (rc < 0) {
            snprintf(out, outcap, "%s check: %s %u: %s\n", c->name, c->check_part_name, p,
                     rdkv_strerror(rc));
            return rc;
        }
    }
    return c->check_report(cfg, len, &all, out, outcap);
}

/* ------------------------------------------------------------------------------------------ */
/* Requests */

#define Q struct wl_run_req
static const struct bench_field req_fields[] = {
    BFIELD_STR(Q, cls),
    BFIELD(Q, threads, BF_U32, BF_KEEP),
    BFIELD(Q, tasks, BF_U32, BF_KEEP),
    BFIELD(Q, nodes, BF_U32, BF_KEEP),
    BFIELD(Q, proc, BF_U32, BF_KEEP),
    BFIELD(Q, nprocs, BF_U32, BF_KEEP),
    BFIELD(Q, node, BF_I32, BF_KEEP),
    BFIELD(Q, warmup_ns, BF_I64, BF_KEEP),
    BFIELD(Q, run_ns, BF_I64, BF_KEEP),
    BFIELD(Q, ops, BF_U64, BF_KEEP),
    BFIELD(Q, target, BF_F64, BF_KEEP),
    BFIELD(Q, seed, BF_U64, BF_KEEP),
    BFIELD(Q, lock_timeout_ns, BF_I64, BF_KEEP),
    BFIELD(Q, cfg_len, BF_U32, BF_KEEP),
};
#undef Q

/* The fields, then cfg_len bytes of config. */
void wl_run_req_pack(const struct wl_run_req *q, struct pack_w *w)
{
    bf_pack(BFIELDS(req_fields), q, w);
    uint8_t *p = pack_w_room(w, q->cfg_len);
    if (p && q->cfg_len) memcpy(p, q->cfg, q->cfg_len);
}

int wl_run_req_unpack(struct wl_run_req *q, const void *p, size_t len)
{
    struct pack_r r;
    pack_r_init(&r, p, len);
    memset(q, 0, sizeof *q);
    bf_unpack(BFIELDS(req_fields), q, &r);
    const uint8_t *c = q->cfg_len <= WL_MAX_CFG ? pack_r_take(&r, q->cfg_len) : NULL;
    if (!c || !unpack_done(&r) || !q->threads || q->threads > WL_MAX_THREADS || !q->tasks ||
        q->tasks > WL_MAX_TASKS || q->threads * q->tasks > WL_MAX_WORKERS || !q->nodes ||
        q->nodes > 1024 || !q->nprocs || q->proc >= q->nprocs || q->node >= (int32_t)q->nodes ||
        q->node < -1 || q->warmup_ns < 0 || q->run_ns < 0 || (!q->run_ns && !q->ops) ||
        !(q->target >= 0 && q->target < 1e12) || q->lock_timeout_ns < 0)
        return RDKV_EINVAL;
    q->cfg = malloc(q->cfg_len ? q->cfg_len : 1);
    if (!q->cfg) return RDKV_ENOMEM;
    memcpy(q->cfg, c, q->cfg_len);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* The run */

struct group;

struct worker {
    struct wl_run *run;
    struct group *g;   /* its thread's tasks, or NULL: the worker is the thread */
    unsigned idx;
    uint64_t ops; /* this worker's share of the measured operations (0: time only) */
    bool idle;    /* more workers than operations: this one has none */
    pthread_mutex_t mu;
    struct wl_stats interval, total;
    struct fab_counters k; /* a task's own fabric operations */
    struct task *parked;   /* a task waiting at its group's gate */
    int rc; /* a session-level failure */
    char err[160];
};

/* A worker thread: one worker, or `n` of them as its tasks. */
struct group {
    struct wl_run *run;
    struct worker *w; /* n workers from here */
    unsigned n;
    unsigned arrived; /* its tasks at the start gate (only its own thread touches it) */
    bool open;
    pthread_t thr;
    bool started;
};

struct wl_run {
    struct wl_run_req q;
    const struct wl_class *cls;
    wl_session_fn open;
    void *open_arg;
    unsigned nworkers;
    struct worker *w;
    struct group *g;
    /* the start gate: threads open their workers' sessions, then wait for each other */
    pthread_mutex_t gmu;
    pthread_cond_t gcv;
    unsigned arrived, expected; /* expected: set once every thread was created */
    atomic_bool stop;
    atomic_uint running;
    int64_t t0, measure_start, end; /* set by the first thread through the gate */
    struct rusage ru0;              /* ... and the process's usage then */
    atomic_llong last_end;
};

static void record(struct worker *w, const struct wl_step *st, int64_t lat)
{
    const struct wl_class *c = w->run->cls;
    if (st->op >= c->nops) return;
    pthread_mutex_lock(&w->mu);
    for (int k = 0; k < 2; k++) {
        struct wl_opstat *o = k ? &w->total.op[st->op] : &w->interval.op[st->op];
        o->aborts += st->aborts;
        if (st->status == 0 || st->status == RDKV_ENOTFOUND) {
            if (st->status == 0) o->ok++;
            else o->not_found++;
            if (st->rolled_back) o->rolled_back++;
            hist_record(&o->h, lat > 0 ? (uint64_t)lat : 0);
        } else {
            o->errors++;
            if (!o->first_error) o->first_error = st->status;
        }
    }
    pthread_mutex_unlock(&w->mu);
}

/* The threads' start gate (blocking: a thread waits here only when none of its tasks can do
 * anything else). */
static void thread_gate(struct wl_run *r)
{
    const struct wl_run_req *q = &r->q;
    pthread_mutex_lock(&r->gmu);
    r->arrived++;
    while (!r->expected || r->arrived < r->expected) pthread_cond_wait(&r->gcv, &r->gmu);
    if (!r->t0) {
        int64_t now = clock_now_ns();
        r->t0 = now;
        r->measure_start = now + q->warmup_ns;
        r->end = q->run_ns ? r->measure_start + q->run_ns : 0;
        getrusage(RUSAGE_SELF, &r->ru0);
    }
    pthread_cond_broadcast(&r->gcv);
    pthread_mutex_unlock(&r->gmu);
}

/* A worker's arrival: a thread's own worker goes through the threads' gate; a thread's tasks
 * meet first, and the last of them takes the thread through the gate and wakes the others. */
static void gate(struct worker *w)
{
    struct group *g = w->g;
    if (!g) {
        thread_gate(w->run);
        return;
    }
    if (++g->arrived < g->n) {
        w->parked = task_self();
        while (!g->open) task_park(0);
        w->parked = NULL;
        return;
    }
    thread_gate(w->run);
    g->open = true;
    for (unsigned i = 0; i < g->n; i++)
        if (g->w[i].parked) task_wake(g->w[i].parked);
}

static void worker_main(struct worker *w)
{
    struct wl_run *r = w->run;
    const struct wl_run_req *q = &r->q;
    struct wl_place pl = {.nodes = q->nodes, .node = q->node, .proc = q->proc,
                          .nprocs = q->nprocs, .worker = w->idx, .nworkers = r->nworkers,
                          .run = q->seed};
    if (w->g) fab_task_counters(&w->k);
    rdkv_options o;
    rdkv_options_init(&o);
    o.max_retries = 1000000; /* a benchmark retries conflicts until done; they are counted */
    if (q->lock_timeout_ns > 0) o.lock_timeout_ms = (q->lock_timeout_ns + NS_PER_MS - 1) / NS_PER_MS;
    rdkv_session *s = NULL;
    void *ws = NULL;
    w->rc = r->open(r->open_arg, &pl, &o, &s);
    if (w->rc) snprintf(w->err, sizeof w->err, "opening a session: %s", rdkv_strerror(w->rc));
    else if ((w->rc = r->cls->worker_new(q->cfg, q->cfg_len, &pl,
                                         q->seed * 1000003 + q->proc * 7919 + w->idx + 1, &ws)))
        snprintf(w->err, sizeof w->err, "starting a worker: %s", rdkv_strerror(w->rc));
    gate(w);
    if (w->rc) atomic_store(&r->stop, true);
    /* open loop: this worker's share of the rate, evenly spaced */
    int64_t gap = q->target > 0 ? (int64_t)(1e9 * r->nworkers / q->target) : 0;
    int64_t next = r->t0 + (gap ? (int64_t)(gap * (double)w->idx / r->nworkers) : 0);
    uint64_t done = 0;
    while (!w->rc && !w->idle && !atomic_load_explicit(&r->stop, memory_order_relaxed)) {
        int64_t now = clock_now_ns();
        if (r->end && now >= r->end) break;
        if (w->ops && done >= w->ops) break;
        int64_t start = now;
        if (gap) {
            if (next > now) {
                task_sleep_until(next); /* (a thread's own worker: nanosleep) */
                if (atomic_load_explicit(&r->stop, memory_order_relaxed)) break;
            }
            start = next; /* latency counts from the intended start (coordinated omission) */
            next += gap;
        }
        /* an operation that cannot commit (a livelock, a lease it always outlives) must not
         * keep the run from ending: retries stop a second after the run, or after a minute */
        struct wl_step st = {.give_up_at = now + 60 * NS_PER_S};
        if (r->end && r->end + NS_PER_S < st.give_up_at) st.give_up_at = r->end + NS_PER_S;
        int rc = r->cls->step(ws, s, &st);
        w->total.cost.steps++;
        if (w->g) task_yield(); /* a step that never waited (all local): the others' turn */
        if (rc) {
            w->rc = rc;
            snprintf(w->err, sizeof w->err, "worker %u: the session failed: %s", w->idx,
                     rdkv_strerror(rc));
            break;
        }
        int64_t end = clock_now_ns();
        /* Measured: what completes in the window (an operation that began in the warm-up
         * counts, latency and all), and every failure -- also one that gave up after the
         * window, so that an operation that never commits shows as an error. */
        if (end >= r->measure_start && (!r->end || end <= r->end || st.status != 0)) {
            record(w, &st, end - start);
            done++;
            int64_t le = atomic_load_explicit(&r->last_end, memory_order_relaxed);
            while (end > le && !atomic_compare_exchange_weak(&r->last_end, &le, end)) {}
        }
    }
    /* what its operations cost the fabric: its own counts as a task, its session's context's
     * (its alone) as a thread */
    const struct fab_counters *k = w->g ? &w->k : (s ? rdkv_session_fab_counters(s) : NULL);
    if (k) {
        w->total.cost.round_trips = k->round_trips;
        w->total.cost.rpcs = k->rpcs;
    }
    if (w->g) fab_task_counters(NULL);
    if (ws) r->cls->worker_free(ws);
    if (s) rdkv_session_close(s);
    atomic_fetch_sub(&r->running, 1);
}

static void group_task(unsigned i, void *arg)
{
    struct group *g = arg;
    worker_main(&g->w[i]);
}

static void *thread_main(void *arg)
{
    struct group *g = arg;
    if (!g->w[0].g) {
        worker_main(&g->w[0]);
        return NULL;
    }
    int rc = rdkv_run_tasks(g->n, group_task, g, 0);
    if (rc) { /* no task ran: the workers end here */
        for (unsigned i = 0; i < g->n; i++) {
            g->w[i].rc = rc;
            snprintf(g->w[i].err, sizeof g->w[i].err, "starting tasks: %s", rdkv_strerror(rc));
            atomic_fetch_sub(&g->run->running, 1);
        }
        atomic_store(&g->run->stop, true);
        thread_gate(g->run);
    }
    return NULL;
}

int wl_run_start(const struct wl_run_req *q, wl_session_fn open, void *arg, struct wl_run **out,
                 char *err, size_t errcap)
{
    const struct wl_class *cls = wl_class_find(q->cls);
    if (!cls) {
        snprintf(err, errcap, "no workload named '%s'", q->cls);
        return RDKV_EINVAL;
    }
    int rc = cls->cfg_check(q->cfg, q->cfg_len, err, errcap);
    if (rc) return rc;
    unsigned tasks = q->tasks ? q->tasks : 1, nw = q->threads * tasks;
    struct wl_run *r = calloc(1, sizeof *r);
    if (!r || !(r->w = calloc(nw, sizeof *r->w)) || !(r->g = calloc(q->threads, sizeof *r->g))) {
        if (r) free(r->w);
        free(r);
        snprintf(err, errcap, "out of memory");
        return RDKV_ENOMEM;
    }
    r->q = *q;
    r->q.tasks = tasks;
    r->nworkers = nw;
    r->q.cfg = malloc(q->cfg_len ? q->cfg_len : 1);
    if (!r->q.cfg) {
        free(r->g);
        free(r->w);
        free(r);
        snprintf(err, errcap, "out of memory");
        return RDKV_ENOMEM;
    }
    memcpy(r->q.cfg, q->cfg, q->cfg_len);
    r->cls = cls;
    r->open = open;
    r->open_arg = arg;
    pthread_mutex_init(&r->gmu, NULL);
    pthread_cond_init(&r->gcv, NULL);
    for (unsigned i = 0; i < nw; i++) {
        struct worker *w = &r->w[i];
        w->run = r;
        w->g = tasks > 1 ? &r->g[i / tasks] : NULL;
        w->idx = i;
        w->ops = q->ops ? q->ops / nw + (i < q->ops % nw) : 0;
        w->idle = q->ops && !w->ops;
        pthread_mutex_init(&w->mu, NULL);
        wl_stats_init(&w->interval, cls->nops);
        wl_stats_init(&w->total, cls->nops);
    }
    unsigned started = 0;
    for (unsigned i = 0; i < q->threads; i++, started++) {
        struct group *g = &r->g[i];
        *g = (struct group){.run = r, .w = &r->w[i * tasks], .n = tasks};
        atomic_fetch_add(&r->running, tasks);
        if (pthread_create(&g->thr, NULL, thread_main, g)) {
            atomic_fetch_sub(&r->running, tasks);
            break;
        }
        g->started = true;
    }
    /* open the gate for the threads that exist (a failure stops them at once) */
    pthread_mutex_lock(&r->gmu);
    r->expected = started ? started : 1;
    if (started < q->threads) atomic_store(&r->stop, true);
    pthread_cond_broadcast(&r->gcv);
    pthread_mutex_unlock(&r->gmu);
    if (started < q->threads) {
        snprintf(err, errcap, "cannot start %u worker threads", q->threads);
        struct wl_stats *tmp = malloc(sizeof *tmp);
        char e2[8];
        if (tmp) wl_run_finish(r, tmp, e2, sizeof e2);
        free(tmp);
        return RDKV_ENOMEM;
    }
    *out = r;
    return 0;
}

void wl_run_poll(struct wl_run *r, struct wl_stats *iv, bool *done)
{
    wl_stats_init(iv, r->cls->nops);
    for (unsigned i = 0; i < r->nworkers; i++) {
        struct worker *w = &r->w[i];
        pthread_mutex_lock(&w->mu);
        wl_stats_merge(iv, &w->interval);
        wl_stats_init(&w->interval, r->cls->nops);
        pthread_mutex_unlock(&w->mu);
    }
    *done = atomic_load(&r->running) == 0;
}

void wl_run_stop(struct wl_run *r) { atomic_store(&r->stop, true); }

int wl_run_finish(struct wl_run *r, struct wl_stats *total, char *err, size_t errcap)
{
    int rc = 0;
    wl_stats_init(total, r->cls->nops);
    for (unsigned i = 0; i < r->q.threads; i++)
        if (r->g[i].started) pthread_join(r->g[i].thr, NULL);
    struct rusage ru1;
    getrusage(RUSAGE_SELF, &ru1);
    for (unsigned i = 0; i < r->nworkers; i++) {
        struct worker *w = &r->w[i];
        wl_stats_merge(total, &w->total);
        if (w->rc && !rc) {
            rc = w->rc;
            snprintf(err, errcap, "%s", w->err);
        }
        pthread_mutex_destroy(&w->mu);
    }
    if (r->t0) {
        total->cost.csw_voluntary = (uint64_t)(ru1.ru_nvcsw - r->ru0.ru_nvcsw);
        total->cost.csw_involuntary = (uint64_t)(ru1.ru_nivcsw - r->ru0.ru_nivcsw);
    }
    int64_t le = atomic_load(&r->last_end);
    total->elapsed_ns = le > r->measure_start ? le - r->measure_start : 0;
    if (r->end && !atomic_load(&r->stop) && r->q.run_ns && !r->q.ops)
        total->elapsed_ns = r->q.run_ns; /* a timed run measures its whole window */
    pthread_mutex_destroy(&r->gmu);
    pthread_cond_destroy(&r->gcv);
    free(r->q.cfg);
    free(r->g);
    free(r->w);
    free(r);
    return rc;
}
