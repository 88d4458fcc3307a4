/* The workload runner and its node-side service (runner.h). Each worker owns its statistics;
 * a mutex per worker, taken once per recorded operation (uncontended but for the status poll),
 * lets the poller take interval snapshots without tearing a histogram. */
#include "tools/kvbench/runner.h"

#include "client/embed.h"
#include "server/node.h"

#include "common/clock.h"
#include "common/rng.h"
#include "common/task.h"
#include "rdma/fabric.h"

#include <errno.h>
#include <pthread.h>
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

static void cost_add(struct wl_cost *d, const struct wl_cost *s)
{
    d->steps += s->steps;
    d->round_trips += s->round_trips;
    d->rpcs += s->rpcs;
    d->csw_voluntary += s->csw_voluntary;
    d->csw_involuntary += s->csw_involuntary;
}

void wl_stats_merge(struct wl_stats *dst, const struct wl_stats *src)
{
    if (src->nops > dst->nops) dst->nops = src->nops;
    if (src->elapsed_ns > dst->elapsed_ns) dst->elapsed_ns = src->elapsed_ns;
    cost_add(&dst->cost, &src->cost);
    for (unsigned i = 0; i < src->nops; i++) {
        struct wl_opstat *d = &dst->op[i];
        const struct wl_opstat *s = &src->op[i];
        d->ok += s->ok;
        d->not_found += s->not_found;
        d->errors += s->errors;
        d->aborts += s->aborts;
        d->rolled_back += s->rolled_back;
        if (!d->first_error) d->first_error = s->first_error;
        hist_merge(&d->h, &s->h);
    }
}

uint64_t wl_stats_ops(const struct wl_stats *s)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < s->nops; i++) n += s->op[i].ok + s->op[i].not_found + s->op[i].errors;
    return n;
}

void wl_stats_pack(const struct wl_stats *s, struct pack_w *w)
{
    pack_u32(w, s->nops);
    pack_u64(w, (uint64_t)s->elapsed_ns);
    pack_u64(w, s->cost.steps);
    pack_u64(w, s->cost.round_trips);
    pack_u64(w, s->cost.rpcs);
    pack_u64(w, s->cost.csw_voluntary);
    pack_u64(w, s->cost.csw_involuntary);
    for (unsigned i = 0; i < s->nops; i++) {
        const struct wl_opstat *o = &s->op[i];
        pack_u64(w, o->ok);
        pack_u64(w, o->not_found);
        pack_u64(w, o->errors);
        pack_u64(w, o->aborts);
        pack_u64(w, o->rolled_back);
        pack_u32(w, (uint32_t)o->first_error);
        hist_pack(&o->h, w);
    }
}

bool wl_stats_unpack(struct wl_stats *s, struct pack_r *r)
{
    uint32_t n = unpack_u32(r);
    if (n > WL_MAX_OPS) return false;
    wl_stats_init(s, n);
    s->elapsed_ns = (int64_t)unpack_u64(r);
    s->cost.steps = unpack_u64(r);
    s->cost.round_trips = unpack_u64(r);
    s->cost.rpcs = unpack_u64(r);
    s->cost.csw_voluntary = unpack_u64(r);
    s->cost.csw_involuntary = unpack_u64(r);
    for (unsigned i = 0; i < n; i++) {
        struct wl_opstat *o = &s->op[i];
        o->ok = unpack_u64(r);
        o->not_found = unpack_u64(r);
        o->errors = unpack_u64(r);
        o->aborts = unpack_u64(r);
        o->rolled_back = unpack_u64(r);
        o->first_error = (int32_t)unpack_u32(r);
        if (!hist_unpack(&o->h, r)) return false;
    }
    return r->err == 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Requests */

void wl_run_req_pack(const struct wl_run_req *q, struct pack_w *w)
{
    pack_str(w, q->cls);
    pack_u32(w, q->threads);
    pack_u32(w, q->tasks);
    pack_u32(w, q->nodes);
    pack_u32(w, q->proc);
    pack_u32(w, q->nprocs);
    pack_u32(w, (uint32_t)q->node);
    pack_u64(w, (uint64_t)q->warmup_ns);
    pack_u64(w, (uint64_t)q->run_ns);
    pack_u64(w, q->ops);
    uint64_t t;
    memcpy(&t, &q->target, 8);
    pack_u64(w, t);
    pack_u64(w, q->seed);
    pack_u64(w, (uint64_t)q->lock_timeout_ns);
    pack_u32(w, q->cfg_len);
    uint8_t *p = pack_w_room(w, q->cfg_len);
    if (p && q->cfg_len) memcpy(p, q->cfg, q->cfg_len);
}

int wl_run_req_unpack(struct wl_run_req *q, const void *p, size_t len)
{
    struct pack_r r;
    pack_r_init(&r, p, len);
    memset(q, 0, sizeof *q);
    unpack_str(&r, q->cls, sizeof q->cls);
    q->threads = unpack_u32(&r);
    q->tasks = unpack_u32(&r);
    q->nodes = unpack_u32(&r);
    q->proc = unpack_u32(&r);
    q->nprocs = unpack_u32(&r);
    q->node = (int32_t)unpack_u32(&r);
    q->warmup_ns = (int64_t)unpack_u64(&r);
    q->run_ns = (int64_t)unpack_u64(&r);
    q->ops = unpack_u64(&r);
    uint64_t t = unpack_u64(&r);
    memcpy(&q->target, &t, 8);
    q->seed = unpack_u64(&r);
    q->lock_timeout_ns = (int64_t)unpack_u64(&r);
    q->cfg_len = unpack_u32(&r);
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

/* ------------------------------------------------------------------------------------------ */
/* The node side */

struct wl_svc {
    struct node *n;
    rdkv_node *rn;
    pthread_mutex_t mu; /* one load, run or check at a time */
    struct wl_run *run;
    bool closed;        /* the node is stopping: no new runs */
};

static void reply_status(struct fab_rpc_req *req, int status, struct pack_w *body)
{
    struct pack_w w;
    pack_w_init(&w);
    pack_u32(&w, (uint32_t)status);
    if (body && body->len) {
        uint8_t *p = pack_w_room(&w, body->len);
        if (p) memcpy(p, body->p, body->len);
    }
    if (w.err) fab_rpc_reply(req, RDKV_ENOMEM, NULL, 0);
    else fab_rpc_reply(req, 0, w.p, w.len);
    pack_w_free(&w);
}

/* A session in this node for a load or a check, which retry their conflicts at length. */
static int service_session(struct wl_svc *v, rdkv_session **out)
{
    rdkv_options o;
    rdkv_options_init(&o);
    o.max_retries = 1000;
    return rdkv_session_open(v->rn, &o, out);
}

static int embedded_session(void *arg, const struct wl_place *pl, const rdkv_options *o,
                            rdkv_session **out)
{
    (void)pl;
    struct wl_svc *v = arg;
    return rdkv_session_open(v->rn, o, out);
}

/* str class, bytes cfg: shared head of LOAD and CHECK. */
static int cls_cfg(struct pack_r *r, const struct wl_class **cls, const uint8_t **cfg,
                   uint32_t *len, char *err, size_t errcap)
{
    char name[16];
    unpack_str(r, name, sizeof name);
    *len = unpack_u32(r);
    *cfg = *len <= WL_MAX_CFG ? pack_r_take(r, *len) : NULL;
    if (!*cfg) {
        snprintf(err, errcap, "malformed request");
        return RDKV_EINVAL;
    }
    if (!(*cls = wl_class_find(name))) {
        snprintf(err, errcap, "no workload named '%s'", name);
        return RDKV_EINVAL;
    }
    return (*cls)->cfg_check(*cfg, *len, err, errcap);
}

static void on_load(struct fab_rpc_req *req, void *arg)
{
    struct wl_svc *v = arg;
    struct pack_r r;
    pack_r_init(&r, fab_rpc_data(req), fab_rpc_len(req));
    char err[256] = "";
    const struct wl_class *cls;
    const uint8_t *cfg;
    uint32_t len;
    int rc = cls_cfg(&r, &cls, &cfg, &len, err, sizeof err);
    uint32_t part = unpack_u32(&r), nparts = unpack_u32(&r);
    if (!rc && (!unpack_done(&r) || !nparts || part >= nparts)) {
        rc = RDKV_EINVAL;
        snprintf(err, sizeof err, "malformed request");
    }
    if (!rc && pthread_mutex_trylock(&v->mu)) {
        rc = RDKV_EBUSY;
        snprintf(err, sizeof err, "this node is already running a workload");
    } else if (!rc) {
        rdkv_session *s;
        rc = v->run ? RDKV_EBUSY : service_session(v, &s);
        if (!rc) {
            rc = cls->load(s, cfg, len, part, nparts, err, sizeof err);
            rdkv_session_close(s);
        } else if (!err[0]) {
            snprintf(err, sizeof err, "%s", v->run ? "a run is in progress" : rdkv_strerror(rc));
        }
        pthread_mutex_unlock(&v->mu);
    }
    struct pack_w w;
    pack_w_init(&w);
    pack_str(&w, err);
    reply_status(req, rc, &w);
    pack_w_free(&w);
}

static void on_start(struct fab_rpc_req *req, void *arg)
{
    struct wl_svc *v = arg;
    struct wl_run_req q;
    char err[256] = "";
    int rc = wl_run_req_unpack(&q, fab_rpc_data(req), fab_rpc_len(req));
    if (rc) snprintf(err, sizeof err, "malformed run request");
    if (!rc && q.node != (int32_t)node_id(v->n)) {
        rc = RDKV_EINVAL;
        snprintf(err, sizeof err, "the run request is for node %d", q.node);
    }
    if (!rc) {
        pthread_mutex_lock(&v->mu);
        if (v->run || v->closed) {
            rc = v->closed ? RDKV_ESHUTDOWN : RDKV_EBUSY;
            snprintf(err, sizeof err, "%s", v->closed ? "the node is stopping"
                                                       : "a run is already in progress on this node");
        } else {
            rc = wl_run_start(&q, embedded_session, v, &v->run, err, sizeof err);
        }
        pthread_mutex_unlock(&v->mu);
    }
    free(q.cfg);
    struct pack_w w;
    pack_w_init(&w);
    pack_str(&w, err);
    reply_status(req, rc, &w);
    pack_w_free(&w);
}

static void on_poll(struct fab_rpc_req *req, void *arg)
{
    struct wl_svc *v = arg;
    pthread_mutex_lock(&v->mu);
    if (!v->run) {
        pthread_mutex_unlock(&v->mu);
        reply_status(req, RDKV_ENOTFOUND, NULL);
        return;
    }
    struct wl_stats *iv = malloc(2 * sizeof *iv);
    if (!iv) {
        pthread_mutex_unlock(&v->mu);
        reply_status(req, RDKV_ENOMEM, NULL);
        return;
    }
    bool done;
    wl_run_poll(v->run, &iv[0], &done);
    char err[160] = "";
    int rc = 0;
    if (done) {
        rc = wl_run_finish(v->run, &iv[1], err, sizeof err);
        v->run = NULL;
    }
    pthread_mutex_unlock(&v->mu);
    struct pack_w w;
    pack_w_init(&w);
    pack_u8(&w, done);
    wl_stats_pack(&iv[0], &w);
    if (done) {
        wl_stats_pack(&iv[1], &w);
        pack_u32(&w, (uint32_t)rc);
        pack_str(&w, err);
    }
    free(iv);
    reply_status(req, 0, &w);
    pack_w_free(&w);
}

static void on_stop(struct fab_rpc_req *req, void *arg)
{
    struct wl_svc *v = arg;
    pthread_mutex_lock(&v->mu);
    if (v->run) wl_run_stop(v->run);
    pthread_mutex_unlock(&v->mu);
    reply_status(req, 0, NULL);
}

static void on_check(struct fab_rpc_req *req, void *arg)
{
    struct wl_svc *v = arg;
    struct pack_r r;
    pack_r_init(&r, fab_rpc_data(req), fab_rpc_len(req));
    char err[256] = "";
    const struct wl_class *cls;
    const uint8_t *cfg;
    uint32_t len;
    int rc = cls_cfg(&r, &cls, &cfg, &len, err, sizeof err);
    if (!rc && !unpack_done(&r)) rc = RDKV_EINVAL;
    if (!rc && !cls->check) {
        rc = RDKV_ENOTSUP;
        snprintf(err, sizeof err, "workload %s has no checks", cls->name);
    }
    size_t cap = 64 * 1024;
    char *out = calloc(1, cap);
    int failed = 0;
    if (!rc && !out) rc = RDKV_ENOMEM;
    if (!rc) {
        rdkv_session *s;
        if (!(rc = service_session(v, &s))) {
            failed = cls->check(s, cfg, len, out, cap);
            rdkv_session_close(s);
            if (failed < 0) {
                rc = failed;
                snprintf(err, sizeof err, "the check could not run: %s", rdkv_strerror(rc));
            }
        }
    }
    struct pack_w w;
    pack_w_init(&w);
    pack_u32(&w, (uint32_t)failed);
    pack_str(&w, rc ? err : (out ? out : ""));
    reply_status(req, rc, &w);
    pack_w_free(&w);
    free(out);
}

static struct wl_svc *the_svc; /* the process's one service (kvserver runs one node) */

void wl_serve_stop(void)
{
    struct wl_svc *v = the_svc;
    if (!v) return;
    pthread_mutex_lock(&v->mu);
    if (v->run) { /* a run still going: its workers hold sessions of the node */
        wl_run_stop(v->run);
        struct wl_stats *st = malloc(sizeof *st);
        char err[64];
        if (st) wl_run_finish(v->run, st, err, sizeof err);
        free(st);
        v->run = NULL;
    }
    v->closed = true;
    pthread_mutex_unlock(&v->mu);
}

int wl_serve(struct node *n)
{
    struct wl_svc *v = calloc(1, sizeof *v);
    if (!v) return RDKV_ENOMEM;
    v->n = n;
    v->rn = rdkv_node_adopt(n);
    if (!v->rn) {
        free(v);
        return RDKV_ENOMEM;
    }
    pthread_mutex_init(&v->mu, NULL);
    the_svc = v; /* lives as long as the process */
    struct fabric *f = node_fabric(n);
    int rc;
    if ((rc = fab_rpc_register(f, KV_RPC_WL_LOAD, on_load, v, 0)) ||
        (rc = fab_rpc_register(f, KV_RPC_WL_START, on_start, v, 0)) ||
        (rc = fab_rpc_register(f, KV_RPC_WL_POLL, on_poll, v, 0)) ||
        (rc = fab_rpc_register(f, KV_RPC_WL_STOP, on_stop, v, 0)) ||
        (rc = fab_rpc_register(f, KV_RPC_WL_CHECK, on_check, v, 0)))
        return rc;
    return 0; /* lives as long as the process */
}
