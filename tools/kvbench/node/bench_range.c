/* The node side of kvbench range: client threads of a range-lock space (on the owner node, made
 * by a prepare RPC) that acquire, hold and release ranges -- the thesis's micro-benchmark (random
 * ranges, shared or exclusive) or its Filebench-OLTP-like mix (readers, paced writers, a log
 * writer) -- on the node's own fabric, and report their latency histograms and fabric counts.
 * One run at a time per node; a run answers its RPC when it ends. Every field that comes over
 * the network is checked before it is used: a bad request gets RDKV_EINVAL or RDKV_EPROTO. */
#include "tools/kvbench/node/bench.h"

#include "common/clock.h"
#include "common/rng.h"
#include "common/log.h"
#include "common/task.h"
#include "locks/lock.h"
#include "locks/range/range.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define S struct bench_range_space
static const struct bench_field space_fields[] = {
    BFIELD(S, space, BF_U16, BF_KEEP),
    BFIELD(S, bits, BF_U32, BF_KEEP),
    BFIELD(S, seg_bits, BF_U32, BF_KEEP),
    BFIELD(S, tree_depth, BF_U32, BF_KEEP),
};
#undef S
#define Q struct bench_range_req
static const struct bench_field req_fields[] = {
    BFIELD_STR(Q, algo),
    BFIELD(Q, workload, BF_U32, BF_KEEP),
    BFIELD(Q, owner, BF_U16, BF_KEEP),
    BFIELD(Q, space, BF_U16, BF_KEEP),
    BFIELD(Q, bits, BF_U32, BF_KEEP),
    BFIELD(Q, threads, BF_U32, BF_KEEP),
    BFIELD(Q, tasks, BF_U32, BF_KEEP),
    BFIELD(Q, first_client, BF_U32, BF_KEEP),
    BFIELD(Q, write_pct, BF_U32, BF_KEEP),
    BFIELD(Q, max_units, BF_U32, BF_KEEP),
    BFIELD(Q, readers, BF_U32, BF_KEEP),
    BFIELD(Q, writers, BF_U32, BF_KEEP),
    BFIELD(Q, loggers, BF_U32, BF_KEEP),
    BFIELD(Q, total_readers, BF_U32, BF_KEEP),
    BFIELD(Q, total_writers, BF_U32, BF_KEEP),
    BFIELD(Q, total_loggers, BF_U32, BF_KEEP),
    BFIELD(Q, warmup_ns, BF_I64, BF_KEEP),
    BFIELD(Q, run_ns, BF_I64, BF_KEEP),
    BFIELD(Q, cs_ns, BF_I64, BF_KEEP),
    BFIELD(Q, timeout_ns, BF_I64, BF_KEEP),
    BFIELD(Q, lease_ns, BF_I64, BF_KEEP),
    BFIELD(Q, seed, BF_U64, BF_KEEP),
};
#undef Q
/* The result: counters add up, the window is the longest; the first error (with its op) is
 * merged by bench_range_res_add. */
#define R struct bench_range_res
static const struct bench_field res_fields[] = {
    BFIELD(R, ops, BF_U64, BF_SUM),
    BFIELD(R, retries, BF_U64, BF_SUM),
    BFIELD(R, errors, BF_U64, BF_SUM),
    BFIELD(R, error, BF_I32, BF_KEEP),
    BFIELD(R, error_op, BF_U32, BF_KEEP),
    BFIELD(R, round_trips, BF_U64, BF_SUM),
    BFIELD(R, fabric_ops, BF_U64, BF_SUM),
    BFIELD(R, rpcs, BF_U64, BF_SUM),
    BFIELD(R, elapsed_ns, BF_I64, BF_MAX),
    BFIELD(R, pacing_ns, BF_I64, BF_SUM),
    BFIELD_N(R, class_ops, BF_U64, BF_SUM, BENCH_RANGE_CLASSES),
    BFIELD(R, h, BF_HIST, BF_SUM),
    BFIELD_N(R, class_h, BF_HIST, BF_SUM, BENCH_RANGE_CLASSES),
};
#undef R

void bench_range_space_pack(const struct bench_range_space *s, struct pack_w *w)
{
    bf_pack(BFIELDS(space_fields), s, w);
}

const char *bench_range_space_check(const struct bench_range_space *s)
{
    if (s->space < 1 || s->space > RANGE_MAX_SPACES) return "space id must be 1..64";
    if (s->bits < 1 || s->bits > 64) return "space bits must be 1..64";
    if (s->seg_bits > 14 || s->seg_bits > s->bits) return "segment bits must be 0..14 and <= bits";
    if (s->tree_depth < 1 || s->tree_depth > 7 || 2 * s->tree_depth > s->bits)
        return "tree depth must be 1..7 and 2 x depth <= bits";
    return NULL;
}

int bench_range_space_unpack(struct bench_range_space *s, const void *p, size_t len)
{
    memset(s, 0, sizeof *s);
    if (bf_unpack_all(BFIELDS(space_fields), s, p, len)) return RDKV_EPROTO;
    return bench_range_space_check(s) ? RDKV_EINVAL : 0;
}

void bench_range_req_pack(const struct bench_range_req *q, struct pack_w *w)
{
    bf_pack(BFIELDS(req_fields), q, w);
}

/* Checks a request (from kvbench's command line or the network): NULL or a message. */
const char *bench_range_req_check(const struct bench_range_req *q)
{
    if (!memchr(q->algo, 0, sizeof q->algo) || !range_algo_find(q->algo))
        return "unknown range-lock design";
    if (q->workload > BENCH_RANGE_OLTP) return "unknown workload";
    if (q->space < 1 || q->space > RANGE_MAX_SPACES) return "space id must be 1..64";
    if (q->owner == FAB_NODE_CLIENT) return "bad owner node";
    if (q->threads < 1 || q->threads > BENCH_MAX_THREADS) return "threads must be 1..64";
    if (q->tasks < 1 || q->tasks > BENCH_MAX_TASKS) return "tasks must be 1..256";
    if (q->first_client > 1u << 20) return "client index out of range";
    if (q->bits < 12 || q->bits > 32) return "space bits must be 12..32";
    if (q->warmup_ns < 0 || q->warmup_ns > 600 * NS_PER_S || q->run_ns <= 0 ||
        q->run_ns > 3600 * NS_PER_S)
        return "run or warm-up time out of range";
    if (q->cs_ns < 0 || q->cs_ns > NS_PER_S) return "critical section out of range (0..1 s)";
    if (q->timeout_ns < 0 || q->timeout_ns > 600 * NS_PER_S) return "timeout out of range";
    if (q->lease_ns < 0 || q->lease_ns > 60 * NS_PER_S) return "lease out of range (0..60 s)";
    uint64_t units = (uint64_t)1 << q->bits;
    if (q->workload == BENCH_RANGE_MICRO) {
        if (q->write_pct > 100) return "write percentage above 100";
        if (q->max_units < 1 || q->max_units > units) return "range size cap must be 1..2^bits";
        if (q->readers || q->writers || q->loggers || q->total_readers || q->total_writers ||
            q->total_loggers)
            return "roles are for the oltp workload only";
    } else {
        if (units / 9 < BENCH_RANGE_OLTP_LOG_UNITS) return "oltp needs space bits >= 15";
        if ((uint64_t)q->readers + q->writers + q->loggers != q->threads)
            return "oltp roles do not add up to the threads";
        if (q->readers > q->total_readers || q->writers > q->total_writers ||
            q->loggers > q->total_loggers || q->total_readers > 1u << 20 ||
            q->total_writers > 1u << 20 || q->total_loggers > 1u << 20)
            return "oltp roles above their totals";
        if ((q->writers || q->loggers) && !q->readers)
            return "oltp: a node with writers needs readers to pace them";
    }
    return NULL;
}

int bench_range_req_unpack(struct bench_range_req *q, const void *p, size_t len)
{
    memset(q, 0, sizeof *q);
    if (bf_unpack_all(BFIELDS(req_fields), q, p, len)) return RDKV_EPROTO;
    q->algo[sizeof q->algo - 1] = 0;
    return bench_range_req_check(q) ? RDKV_EINVAL : 0;
}

void bench_range_res_pack(const struct bench_range_res *r, struct pack_w *w)
{
    bf_pack(BFIELDS(res_fields), r, w);
}

int bench_range_res_unpack(struct bench_range_res *r, const void *p, size_t len)
{
    if (bf_unpack_all(BFIELDS(res_fields), r, p, len) || r->error > 0 || r->error_op > 2 ||
        r->elapsed_ns < 0)
        return RDKV_EPROTO;
    return 0;
}

void bench_range_res_add(struct bench_range_res *dst, const struct bench_range_res *r)
{
    if (!dst->error && r->error) {
        dst->error = r->error;
        dst->error_op = r->error_op;
    }
    bf_merge(BFIELDS(res_fields), dst, r);
}

const char *bench_range_error_op(uint32_t op)
{
    return op == 0 ? "acquire" : op == 1 ? "release" : "client set-up";
}

/* ------------------------------------------------------------------------------------------ */

struct range_run;

/* A client: a thread, or one of a thread's tasks (bench_range_req.tasks). */
struct range_worker {
    struct range_run *run;
    unsigned idx;      /* on this node */
    unsigned role;     /* enum bench_range_class (oltp); micro: unused */
    unsigned role_idx; /* global index among the clients of its role (writers' files) */
    pthread_t thr;     /* the thread of its group (set in its group's first client) */
    unsigned ngroup;   /* the first client of a group: the group's size (else 0) */
    struct lock_thread t;
    bool attached;     /* t is initialised */
    struct fab_ctx *c; /* its context: its own, or its thread's */
    struct fab_counters k; /* a task's own fabric operations */
    struct bench_range_res res;
    /* the one handle the client locks every range through, re-targeted op after op: the
     * client-side designs read the space's layout once, as a long-running client would */
    struct range_handle h;
};

struct range_run {
    struct fabric *f;
    struct fab_rpc_req *req;
    struct bench_range_req q;
    pthread_barrier_t ready;
    int64_t t_measure, t_end;
    _Atomic int failed;       /* a client could not start */
    _Atomic int stop;         /* a client hit a design error: everyone stops */
    _Atomic uint64_t reads;   /* oltp: reads done on this node since the start (pacing) */
    struct range_worker w[BENCH_MAX_THREADS];
};

static struct range_server *bench_rs;
static _Atomic int range_run_busy;    /* a run is set up or running: refuse another */
static _Atomic int range_run_threads; /* run threads that may still touch the fabric */
static _Atomic bool range_stopping;



struct range_op {
    uint64_t lo, hi;
    enum lock_mode mode;
    unsigned cls;
};

/* The oltp files: 9 equal parts of floor(2^bits / 9) units; file 8 is the log. */
static uint64_t file_units(const struct bench_range_req *q) { return ((uint64_t)1 << q->bits) / 9; }

static void pick_micro(const struct bench_range_req *q, uint64_t *seed, struct range_op *op)
{
    uint64_t units = (uint64_t)1 << q->bits;
    uint64_t len = 1 + rng_below(seed, q->max_units);
    op->lo = rng_below(seed, units - len + 1);
    op->hi = op->lo + len - 1;
    bool excl = rng_below(seed, 100) < q->write_pct;
    op->mode = excl ? LOCK_EXCLUSIVE : LOCK_SHARED;
    op->cls = excl ? BENCH_RANGE_WRITE : BENCH_RANGE_READ;
}

static void pick_oltp(const struct bench_range_req *q, const struct range_worker *w, uint64_t n,
                      uint64_t *seed, struct range_op *op)
{
    uint64_t fu = file_units(q), file, len;
    switch (w->role) {
    case BENCH_RANGE_READ:
        file = rng_below(seed, BENCH_RANGE_OLTP_FILES);
        len = BENCH_RANGE_OLTP_UNITS;
        op->mode = LOCK_SHARED;
        break;
    case BENCH_RANGE_WRITE:
        file = (w->role_idx + n) % BENCH_RANGE_OLTP_FILES; /* round-robin over the data files */
        len = BENCH_RANGE_OLTP_UNITS;
        op->mode = LOCK_EXCLUSIVE;
        break;
    default:
        file = BENCH_RANGE_OLTP_FILES; /* the log */
        len = BENCH_RANGE_OLTP_LOG_UNITS;
        op->mode = LOCK_EXCLUSIVE;
        break;
    }
    op->lo = file * fu + rng_below(seed, fu - len + 1);
    op->hi = op->lo + len - 1;
    op->cls = w->role;
}

/* The reads done by all readers, estimated from this node's (its readers are a share of all). */
static uint64_t reads_all(const struct range_run *run)
{
    const struct bench_range_req *q = &run->q;
    uint64_t mine = atomic_load_explicit(&run->reads, memory_order_relaxed);
    if (!q->readers) return 0;
    return (uint64_t)((long double)mine * q->total_readers / q->readers);
}

/* oltp pacing: may a writer that has done n writes do another? */
static bool paced_ok(const struct range_run *run, const struct range_worker *w, uint64_t n)
{
    uint64_t r = reads_all(run);
    if (w->role == BENCH_RANGE_WRITE)
        return n < r / BENCH_RANGE_OLTP_READS_PER_BATCH * BENCH_RANGE_OLTP_WRITES_PER_BATCH;
    return n < r / BENCH_RANGE_OLTP_READS_PER_LOG;
}

/* One attempt: acquire, hold cs_ns, release. 0, a retryable RDKV_ETIMEDOUT / RDKV_EABORTED (a
 * release that reports RDKV_ETIMEDOUT lost its lease while held: the hold was unprotected), or
 * a design error with *where set. */
static int attempt(const struct bench_range_req *q, struct range_handle *h,
                   const struct range_op *op, unsigned *where)
{
    range_handle_retarget(h, op->lo, op->hi);
    int64_t deadline = q->timeout_ns ? clock_now_ns() + q->timeout_ns : 0;
    int rc = range_acquire(h, op->mode, deadline);
    if (rc) {
        *where = 0;
        return rc;
    }
    if (q->cs_ns) {
        int64_t until = clock_now_ns() + q->cs_ns;
        while (clock_now_ns() < until) __builtin_ia32_pause();
    }
    rc = range_release(h);
    *where = 1;
    return rc;
}

static void worker_fail(struct range_worker *w, int rc, unsigned where)
{
    struct bench_range_res *res = &w->res;
    res->errors++;
    if (!res->error) {
        res->error = rc;
        res->error_op = where;
    }
    atomic_store(&w->run->stop, 1);
}

static bool should_stop(struct range_run *run, int64_t now)
{
    return now >= run->t_end || atomic_load_explicit(&run->stop, memory_order_relaxed) ||
           atomic_load_explicit(&range_stopping, memory_order_relaxed);
}

/* A client's ops until the run stops (its lock state is set up). */
static void client_run(struct range_worker *w)
{
    struct range_run *run = w->run;
    const struct bench_range_req *q = &run->q;
    struct bench_range_res *res = &w->res;
    bool task = q->tasks > 1;
    if (task) fab_task_counters(&w->k);
    const struct fab_counters *k = task ? &w->k : fab_counters(w->c);
    int rc;
    range_handle_init(&w->h, &w->t, range_algo_find(q->algo), q->owner, q->space, 0, 0);
    uint64_t gidx = (uint64_t)q->first_client + w->idx;
    uint64_t seed = q->seed ^ (gidx * 0x9E3779B97F4A7C15ull) ^ 0x5DEECE66Dull;
    if (!seed) seed = 1;
    bool measuring = false;
    uint64_t rt0 = 0, ops0 = 0, rpc0 = 0, n = 0; /* n: ops done since the start (pacing) */
    int64_t t_start = 0, now = clock_now_ns();
    while (!should_stop(run, now)) {
        struct range_op op;
        if (q->workload == BENCH_RANGE_MICRO) {
            pick_micro(q, &seed, &op);
        } else {
            if (w->role != BENCH_RANGE_READ && !paced_ok(run, w, n)) {
                /* ahead of the readers: nap in small steps, never spin */
                int64_t p0 = clock_now_ns();
                while (!paced_ok(run, w, n) && !should_stop(run, clock_now_ns()))
                    clock_sleep_ns(30 * NS_PER_US);
                now = clock_now_ns();
                if (measuring) res->pacing_ns += now - p0;
                if (should_stop(run, now)) break;
            }
            pick_oltp(q, w, n, &seed, &op);
        }
        int64_t t0 = clock_now_ns();
        if (!measuring && t0 >= run->t_measure) {
            measuring = true;
            t_start = t0;
            rt0 = k->round_trips;
            ops0 = fab_counters_ops(k);
            rpc0 = k->rpcs;
        }
        unsigned where = 0;
        /* An attempt that times out, is aborted by a lease reset, or outlives its lease is
         * retried (after a short random back-off) until it succeeds or the run ends; the op's
         * latency covers every attempt. */
        for (unsigned tries = 0;; tries++) {
            rc = attempt(q, &w->h, &op, &where);
            if (rc != RDKV_ETIMEDOUT && rc != RDKV_EABORTED) break;
            if (measuring) res->retries++;
            if (should_stop(run, clock_now_ns())) break;
            lock_backoff(tries < 10 ? tries : 10);
        }
        int64_t t1 = clock_now_ns();
        if (rc == 0) {
            n++;
            if (op.cls == BENCH_RANGE_READ && q->workload == BENCH_RANGE_OLTP)
                atomic_fetch_add_explicit(&run->reads, 1, memory_order_relaxed);
            if (measuring) {
                res->ops++;
                res->class_ops[op.cls]++;
                hist_record(&res->h, (uint64_t)(t1 - t0));
                hist_record(&res->class_h[op.cls], (uint64_t)(t1 - t0));
            }
        } else if (rc != RDKV_ETIMEDOUT && rc != RDKV_EABORTED) {
            log_warn("bench range: %s: %s [%llu, %llu]: %s", q->algo, bench_range_error_op(where),
                     (unsigned long long)op.lo, (unsigned long long)op.hi, rdkv_strerror(rc));
            worker_fail(w, rc, where);
            break;
        }
        now = clock_now_ns();
    }
    now = clock_now_ns();
    if (measuring) {
        res->elapsed_ns = now - t_start;
        /* round_trips counts chains and RPCs; rpcs the RPCs among them */
        res->rpcs = k->rpcs - rpc0;
        res->round_trips = k->round_trips - rt0;
        res->fabric_ops = fab_counters_ops(k) - ops0;
    }
    if (task) fab_task_counters(NULL);
}

static void client_task(void *arg) { client_run(arg); }

/* A client thread: its clients (w[0 .. w->ngroup)), one of them the thread itself or all of
 * them tasks sharing its context. */
static void *range_worker_main(void *arg)
{
    struct range_worker *w = arg;
    struct range_run *run = w->run;
    unsigned n = w->ngroup;
    struct fab_ctx *c = NULL;
    int rc = fab_ctx_create(run->f, &c);
    struct lock_cfg lcfg;
    lock_cfg_init(&lcfg);
    if (run->q.lease_ns) lcfg.lease_ns = run->q.lease_ns;
    for (unsigned i = 0; i < n; i++) {
        struct range_worker *x = &w[i];
        hist_init(&x->res.h);
        for (int k = 0; k < BENCH_RANGE_CLASSES; k++) hist_init(&x->res.class_h[k]);
        x->c = c;
        if (!rc) rc = lock_thread_init(&x->t, c, &lcfg);
        x->attached = c && rc == 0;
        if (rc) {
            log_error("bench range: client %u could not start: %s", x->idx, rdkv_strerror(rc));
            worker_fail(x, rc, 2);
            run->failed = 1;
        }
    }
    pthread_barrier_wait(&run->ready);
    if (!rc && !run->failed) {
        if (run->q.tasks <= 1) {
            client_run(w);
        } else {
            struct sched *s = NULL;
            if (sched_create(&s) == 0) {
                fab_ctx_attach(c, s);
                for (unsigned i = 0; i < n; i++)
                    if (task_spawn(s, client_task, &w[i], 0)) worker_fail(&w[i], RDKV_ENOMEM, 2);
                sched_run(s);
                fab_ctx_attach(c, NULL);
                sched_destroy(s);
            } else {
                worker_fail(w, RDKV_ENOMEM, 2);
            }
        }
    }
    for (unsigned i = 0; i < n; i++)
        if (w[i].attached) lock_thread_fini(&w[i].t);
    if (c) fab_ctx_destroy(c);
    return NULL;
}

static void *range_run_main(void *arg)
{
    struct range_run *run = arg;
    const struct bench_range_req *q = &run->q;
    int64_t start = clock_now_ns();
    run->t_measure = start + q->warmup_ns;
    run->t_end = run->t_measure + q->run_ns;
    unsigned groups = (q->threads + q->tasks - 1) / q->tasks; /* client threads */
    pthread_barrier_init(&run->ready, NULL, groups);
    /* roles, in order: readers, writers, log writers (oltp) */
    for (unsigned i = 0; i < q->threads; i++) {
        struct range_worker *w = &run->w[i];
        w->run = run;
        w->idx = i;
        w->role = BENCH_RANGE_READ;
        w->role_idx = q->first_client + i;
        if (q->workload == BENCH_RANGE_OLTP) {
            if (i < q->readers) {
                w->role = BENCH_RANGE_READ;
            } else if (i < q->readers + q->writers) {
                w->role = BENCH_RANGE_WRITE;
                w->role_idx = q->first_client + (i - q->readers);
            } else {
                w->role = BENCH_RANGE_LOG;
            }
        }
    }
    unsigned started = 0;
    for (unsigned g = 0; g < groups; g++) {
        struct range_worker *w0 = &run->w[g * q->tasks];
        w0->ngroup = q->threads - g * q->tasks < q->tasks ? q->threads - g * q->tasks : q->tasks;
        if (pthread_create(&w0->thr, NULL, range_worker_main, w0)) break;
        started++;
    }
    if (started < groups) {
        /* the barrier can never fill: give up before anyone waits on it forever */
        log_error("bench range: could not start %u threads", groups);
        run->failed = 1;
        for (unsigned g = started; g < groups; g++) pthread_barrier_wait(&run->ready);
    }
    struct bench_range_res *total = calloc(1, sizeof *total);
    if (total) {
        hist_init(&total->h);
        for (int k = 0; k < BENCH_RANGE_CLASSES; k++) hist_init(&total->class_h[k]);
    }
    for (unsigned g = 0; g < started; g++) pthread_join(run->w[g * q->tasks].thr, NULL);
    for (unsigned i = 0; total && i < started * q->tasks && i < q->threads; i++)
        bench_range_res_add(total, &run->w[i].res);
    pthread_barrier_destroy(&run->ready);
    struct pack_w w;
    pack_w_init(&w);
    int st;
    if (!total) {
        st = RDKV_ENOMEM;
    } else {
        if (started < groups && !total->error) {
            total->error = RDKV_ENOMEM;
            total->error_op = 2;
        }
        bench_range_res_pack(total, &w);
        st = w.err ? RDKV_ENOMEM : 0;
    }
    free(total);
    struct fab_rpc_req *req = run->req;
    free(run);
    /* idle again before the answer leaves: the caller may start the next run at once */
    atomic_store(&range_run_busy, 0);
    fab_rpc_reply(req, st, st ? NULL : w.p, st ? 0 : w.len);
    pack_w_free(&w);
    atomic_fetch_sub_explicit(&range_run_threads, 1, memory_order_release); /* last fabric use */
    return NULL;
}

static void on_range_prepare(struct fab_rpc_req *req, void *arg)
{
    (void)arg;
    struct bench_range_space s;
    int rc = bench_range_space_unpack(&s, fab_rpc_data(req), fab_rpc_len(req));
    if (rc) {
        fab_rpc_reply(req, rc, NULL, 0);
        return;
    }
    if (!bench_rs) {
        fab_rpc_reply(req, RDKV_ENOTSUP, NULL, 0);
        return;
    }
    struct range_space_cfg cfg = {.bits = s.bits, .seg_bits = s.seg_bits,
                                  .tree_depth = s.tree_depth};
    /* Each run starts from free words: what one run's clients left behind (tickets of holders
     * whose lease ran out, waiting for a reset) must not slow the next. kvbench runs one point
     * at a time, so nobody uses the space now. */
    rc = range_space_create(bench_rs, s.space, &cfg);
    if (rc == 0) rc = range_space_reset(bench_rs, s.space);
    fab_rpc_reply(req, rc, NULL, 0);
}

static void on_range_stats(struct fab_rpc_req *req, void *arg)
{
    (void)arg;
    if (fab_rpc_len(req) != 0) {
        fab_rpc_reply(req, RDKV_EPROTO, NULL, 0);
        return;
    }
    if (!bench_rs) {
        fab_rpc_reply(req, RDKV_ENOTSUP, NULL, 0);
        return;
    }
    struct range_server_stats st;
    range_server_stats(bench_rs, &st);
    struct pack_w w;
    pack_w_init(&w);
    pack_u64(&w, st.grants);
    pack_u64(&w, st.waits);
    pack_u64(&w, st.releases);
    pack_u64(&w, st.cancels);
    pack_u64(&w, st.batches);
    fab_rpc_reply(req, w.err ? RDKV_ENOMEM : 0, w.p, w.err ? 0 : w.len);
    pack_w_free(&w);
}

static void on_range_run(struct fab_rpc_req *req, void *arg)
{
    struct fabric *f = arg;
    struct range_run *run = calloc(1, sizeof *run);
    if (!run) {
        fab_rpc_reply(req, RDKV_ENOMEM, NULL, 0);
        return;
    }
    int rc = bench_range_req_unpack(&run->q, fab_rpc_data(req), fab_rpc_len(req));
    if (!rc && run->q.owner >= fab_num_nodes(f)) rc = RDKV_EINVAL; /* no such node */
    if (rc) {
        free(run);
        fab_rpc_reply(req, rc, NULL, 0);
        return;
    }
    int idle = 0;
    if (atomic_load(&range_stopping) ||
        !atomic_compare_exchange_strong(&range_run_busy, &idle, 1)) {
        free(run);
        fab_rpc_reply(req, RDKV_EBUSY, NULL, 0);
        return;
    }
    run->f = f;
    run->req = req;
    pthread_t thr;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    atomic_fetch_add(&range_run_threads, 1);
    rc = pthread_create(&thr, &at, range_run_main, run);
    pthread_attr_destroy(&at);
    if (rc) {
        atomic_fetch_sub(&range_run_threads, 1);
        free(run);
        atomic_store(&range_run_busy, 0);
        fab_rpc_reply(req, RDKV_ENOMEM, NULL, 0);
    }
}

void bench_range_register(struct fabric *f, struct range_server *rs)
{
    bench_rs = rs;
    fab_rpc_register(f, KV_RPC_BENCH_RANGE_PREPARE, on_range_prepare, f, 0);
    fab_rpc_register(f, KV_RPC_BENCH_RANGE_STATS, on_range_stats, f, 0);
    fab_rpc_register(f, KV_RPC_BENCH_RANGE_RUN, on_range_run, f, 0);
}

bool bench_range_shutdown(int64_t wait_ns)
{
    atomic_store(&range_stopping, true);
    int64_t deadline = clock_now_ns() + wait_ns;
    while (atomic_load_explicit(&range_run_threads, memory_order_acquire)) {
        if (clock_now_ns() >= deadline) return false;
        clock_sleep_ns(10 * NS_PER_MS);
    }
    return true;
}
