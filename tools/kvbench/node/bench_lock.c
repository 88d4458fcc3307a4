/* The node side of kvbench lock: worker threads that acquire and release locks of the lock table
 * (chosen by locality) on the node's own fabric, and report their latency histogram and fabric
 * operation counts. One run at a time per node; a run answers its RPC when it ends. */
#include "tools/kvbench/node/bench.h"

#include "common/clock.h"
#include "common/rng.h"
#include "common/log.h"
#include "common/task.h"
#include "locks/lock.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define Q struct bench_lock_req
static const struct bench_field req_fields[] = {
    BFIELD_STR(Q, algo),
    BFIELD(Q, threads, BF_U32, BF_KEEP),
    BFIELD(Q, tasks, BF_U32, BF_KEEP),
    BFIELD(Q, locks, BF_U32, BF_KEEP),
    BFIELD(Q, locality, BF_U32, BF_KEEP),
    BFIELD(Q, warmup_ns, BF_I64, BF_KEEP),
    BFIELD(Q, run_ns, BF_I64, BF_KEEP),
    BFIELD(Q, cs_ns, BF_I64, BF_KEEP),
    BFIELD(Q, local_budget, BF_I64, BF_KEEP),
    BFIELD(Q, remote_budget, BF_I64, BF_KEEP),
    BFIELD(Q, seed, BF_U64, BF_KEEP),
    BFIELD(Q, read_ppm, BF_U32, BF_KEEP),
    BFIELD(Q, locks_per_op, BF_U32, BF_KEEP),
    BFIELD(Q, think_ns, BF_I64, BF_KEEP),
    BFIELD(Q, dist, BF_U32, BF_KEEP),
    BFIELD(Q, alpha_milli, BF_U32, BF_KEEP),
    BFIELD(Q, fail_ppm, BF_U32, BF_KEEP),
    BFIELD(Q, lease_ns, BF_I64, BF_KEEP),
    BFIELD(Q, timeout_ns, BF_I64, BF_KEEP),
    BFIELD(Q, omega_ns, BF_I64, BF_KEEP),
    BFIELD(Q, bench, BF_U32, BF_KEEP),
    BFIELD(Q, rma_tl2, BF_I64, BF_KEEP),
    BFIELD(Q, rma_tl1, BF_I64, BF_KEEP),
    BFIELD(Q, rma_tr, BF_I64, BF_KEEP),
    BFIELD(Q, rma_dc_nodes, BF_U32, BF_KEEP),
    BFIELD(Q, rma_dc_per_node, BF_U32, BF_KEEP),
};
#undef Q

/* The result: counters add up, the window is the longest; the spread of clients' ops (fair) is
 * merged by fair_add. The labelled counters are what kvbench lock reports. */
#define R struct bench_lock_res
const struct bench_field bench_lock_res_fields[] = {
    BFIELD(R, ops, BF_U64, BF_SUM),
    BFIELD(R, local_ops, BF_U64, BF_SUM),
    BFIELD(R, errors, BF_U64, BF_SUM),
    BFIELD(R, round_trips, BF_U64, BF_SUM),
    BFIELD(R, fabric_ops, BF_U64, BF_SUM),
    BFIELD(R, elapsed_ns, BF_I64, BF_MAX),
    BFIELD_R(R, timeouts, BF_U64, BF_SUM, "timeouts", "Timeouts"),
    BFIELD_R(R, aborts, BF_U64, BF_SUM, "aborts", "Aborts"),
    BFIELD_R(R, resets, BF_U64, BF_SUM, "lease_resets", "LeaseResets"),
    BFIELD_R(R, lease_expired, BF_U64, BF_SUM, "lease_expired_releases", "LeaseExpiredReleases"),
    BFIELD_R(R, overflow_resets, BF_U64, BF_SUM, "overflow_resets", "OverflowResets"),
    BFIELD_R(R, retries, BF_U64, BF_SUM, "retries", "Retries"),
    BFIELD_R(R, injected, BF_U64, BF_SUM, "injected_failures", "InjectedFailures"),
    BFIELD(R, increments, BF_U64, BF_SUM),
    BFIELD_R(R, write_ops, BF_U64, BF_SUM, "write_ops", NULL),
    BFIELD(R, fair.clients, BF_U64, BF_KEEP),
    BFIELD(R, fair.min, BF_U64, BF_KEEP),
    BFIELD(R, fair.max, BF_U64, BF_KEEP),
    BFIELD(R, fair.sum, BF_U64, BF_KEEP),
    BFIELD(R, fair.sumsq, BF_F64, BF_KEEP),
    BFIELD(R, h, BF_HIST, BF_SUM),
    BFIELD(R, wh, BF_HIST, BF_SUM),
};
#undef R
const size_t bench_lock_res_nfields = sizeof bench_lock_res_fields / sizeof *bench_lock_res_fields;

void bench_lock_req_pack(const struct bench_lock_req *q, struct pack_w *w)
{
    bf_pack(BFIELDS(req_fields), q, w);
}

static const char *const kind_names[BENCH_LOCK_KINDS] = {"none", "lb", "ecsb", "sob", "wcsb",
                                                         "warb"};

const char *bench_lock_kind_name(uint32_t kind)
{
    return kind < BENCH_LOCK_KINDS ? kind_names[kind] : "?";
}

int bench_lock_kind_find(const char *name)
{
    for (int i = 1; i < BENCH_LOCK_KINDS; i++)
        if (!strcmp(name, kind_names[i])) return i;
    return -1;
}

static bool is_rma(const struct lock_algo *a)
{
    return a == &lock_rma_mcs || a == &lock_rma_rw;
}

/* Checks a request (from kvbench's command line or the network): 0 or a message. */
const char *bench_lock_req_check(const struct bench_lock_req *q)
{
    const struct lock_algo *a = lock_algo_find(q->algo);
    if (!a) return "unknown lock algorithm";
    if (q->threads < 1 || q->threads > BENCH_MAX_THREADS) return "threads must be 1..64";
    if (q->tasks < 1 || q->tasks > BENCH_MAX_TASKS) return "tasks must be 1..256";
    if (q->threads * q->tasks > BENCH_MAX_CLIENTS) return "threads x tasks must be at most 1024";
    /* every lock client takes one of the node's LOCK_MAX_THREADS lock-state slabs, and the node's
     * own transaction layer holds one */
    if (q->threads * q->tasks > LOCK_MAX_THREADS - 1)
        return "a node runs at most 255 lock clients (threads x tasks): each takes one of its 256 "
               "lock-state slabs, and the node keeps one";
    if (q->locks < 1) return "no locks";
    if (q->locality > 100 || q->read_ppm > 1000000) return "a percentage above 100";
    if (q->warmup_ns < 0 || q->warmup_ns > 600 * NS_PER_S || q->run_ns <= 0 ||
        q->run_ns > 3600 * NS_PER_S)
        return "run or warm-up time out of range";
    if (q->cs_ns < 0 || q->cs_ns > NS_PER_S || q->think_ns < 0 || q->think_ns > NS_PER_S)
        return "critical section or think time out of range (0..1 s)";
    if (q->local_budget < 1 || q->remote_budget < 1 || q->local_budget > 1000000 ||
        q->remote_budget > 1000000)
        return "budgets must be 1..1000000";
    if (q->locks_per_op < 1 || q->locks_per_op > BENCH_MAX_LOCKS_PER_OP)
        return "locks per op must be 1..16";
    if (q->locks_per_op > q->locks) return "more locks per op than locks in the table";
    if (q->dist > BENCH_DIST_POWERLAW) return "unknown distribution";
    if (q->dist == BENCH_DIST_POWERLAW && (q->alpha_milli <= 1000 || q->alpha_milli > 10000))
        return "the power-law exponent must be in (1, 10]";
    if (q->fail_ppm > 1000000) return "failure rate above 100%";
    if (q->lease_ns < 0 || q->lease_ns > 60 * NS_PER_S) return "lease out of range (0..60 s)";
    if (q->timeout_ns < 0 || q->timeout_ns > 600 * NS_PER_S) return "timeout out of range";
    if (q->omega_ns < 0 || q->omega_ns > 100 * NS_PER_MS) return "omega out of range (0..100 ms)";
    if (q->fail_ppm && !a->recovers)
        return "this algorithm cannot recover from dead holders: failure injection would wedge "
               "its locks for good";
    if (q->read_ppm && !(a->modes & (1u << LOCK_SHARED)))
        return "this algorithm has no shared mode: every acquire must be exclusive (--read-ratio "
               "0, or --writers 100)";
    if (q->bench >= BENCH_LOCK_KINDS) return "unknown benchmark";
    if (q->bench != BENCH_LOCK_NONE && (q->cs_ns || q->think_ns))
        return "the --bench microbenchmarks define their own critical section and wait: no "
               "--cs-ns or --think-us with them";
    if (q->rma_tl2 < 0 || q->rma_tl2 > 1000000 || q->rma_tl1 < 0 || q->rma_tl1 > 1000000)
        return "T_L,2 and T_L,1 must be 1..1000000";
    if (q->rma_tr < 0 || q->rma_tr > 1000000) return "T_R must be 1..1000000";
    if (q->rma_dc_nodes > CLUSTER_MAX_NODES) return "a counter host every k nodes: k too large";
    if (q->rma_dc_per_node > 4) return "at most 4 counters per node";
    if (is_rma(a) && q->locks > LOCK_RMA_MAX)
        return "rma-mcs and rma-rw take only the first 4096 locks of the table (--locks 4096 at "
               "most)";
    return NULL;
}

int bench_lock_req_unpack(struct bench_lock_req *q, const void *p, size_t len)
{
    memset(q, 0, sizeof *q);
    if (bf_unpack_all(BFIELDS(req_fields), q, p, len)) return RDKV_EPROTO;
    return bench_lock_req_check(q) ? RDKV_EINVAL : 0;
}

void bench_lock_res_pack(const struct bench_lock_res *r, struct pack_w *w)
{
    bf_pack(bench_lock_res_fields, bench_lock_res_nfields, r, w);
}

int bench_lock_res_unpack(struct bench_lock_res *r, const void *p, size_t len)
{
    return bf_unpack_all(bench_lock_res_fields, bench_lock_res_nfields, r, p, len);
}

void bench_lock_res_init(struct bench_lock_res *r)
{
    bf_init(bench_lock_res_fields, bench_lock_res_nfields, r, sizeof *r);
}

double bench_lock_fair_cv(const struct bench_lock_fair *f)
{
    if (!f->clients || !f->sum) return 0;
    double n = (double)f->clients, mean = (double)f->sum / n;
    double var = f->sumsq / n - mean * mean;
    return var > 0 ? sqrt(var) / mean : 0;
}

static void fair_add(struct bench_lock_fair *dst, const struct bench_lock_fair *f)
{
    if (!f->clients) return;
    if (!dst->clients || f->min < dst->min) dst->min = f->min;
    if (!dst->clients || f->max > dst->max) dst->max = f->max;
    dst->clients += f->clients;
    dst->sum += f->sum;
    dst->sumsq += f->sumsq;
}

void bench_lock_res_add(struct bench_lock_res *dst, const struct bench_lock_res *r)
{
    bf_merge(bench_lock_res_fields, bench_lock_res_nfields, dst, r);
    fair_add(&dst->fair, &r->fair);
}

/* ------------------------------------------------------------------------------------------ */

struct lock_run;

/* One lock client: a worker thread, or one of its tasks (bench_lock_req.tasks). */
struct lock_client {
    struct lock_run *run;
    unsigned idx;
    struct lock_thread t;
    struct fab_counters k; /* a task's own fabric operations */
    bool ok;
    struct bench_lock_res res;
};

/* A worker thread and its clients: its fabric context, shared by its tasks. */
struct lock_worker {
    struct lock_run *run;
    unsigned idx;
    pthread_t thr;
    struct fab_ctx *c;
    struct locktable lt;
    struct lock_client *cl; /* run->q.tasks of them */
};

struct lock_run {
    struct fabric *f;
    struct fab_rpc_req *req;
    struct bench_lock_req q;
    pthread_barrier_t ready;
    int64_t t_measure, t_end;
    _Atomic int failed;
    struct lock_worker w[BENCH_MAX_THREADS];
    struct lock_client *clients; /* threads x tasks */
};

static _Atomic int lock_run_busy;    /* a run is set up or running: refuse another */
static _Atomic int lock_run_threads; /* run threads that may still touch the fabric */

/* Starts a detached thread counted in lock_run_threads (the thread uncounts itself last). */
static int spawn(void *(*fn)(void *), void *arg)
{
    pthread_t thr;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    atomic_fetch_add(&lock_run_threads, 1);
    int rc = pthread_create(&thr, &at, fn, arg);
    if (rc) atomic_fetch_sub(&lock_run_threads, 1);
    pthread_attr_destroy(&at);
    return rc;
}
static _Atomic bool bench_stopping;



/* An index in [0, n): uniform, or power-law P(i) ~ (i + 1)^-alpha (DSLR's skewed micro-benchmark)
 * by inverting the continuous distribution over [1, n + 1). */
static uint32_t pick_index(const struct bench_lock_req *q, uint32_t n, uint64_t *seed)
{
    if (q->dist != BENCH_DIST_POWERLAW) return (uint32_t)(rng_next(seed) % n);
    double a1 = 1.0 - (double)q->alpha_milli / 1000.0; /* < 0 */
    double tail = pow((double)n + 1.0, a1);
    double x = pow(1.0 - rng_unit(seed) * (1.0 - tail), 1.0 / a1);
    uint64_t i = (uint64_t)x - 1;
    return i < n ? (uint32_t)i : n - 1;
}

struct pick {
    uint16_t node;
    uint32_t idx;
    uint8_t mode;
};

static int pick_cmp(const void *a, const void *b)
{
    const struct pick *x = a, *y = b;
    if (x->node != y->node) return x->node < y->node ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Chooses an op's K distinct locks (each on this node with probability locality%, else on
 * another node, then an index there by the distribution) in ascending order, the global order
 * that makes K-lock ops deadlock-free. */
static void pick_op(const struct bench_lock_req *q, const struct locktable *lt, uint16_t me,
                    uint64_t *seed, struct pick *out)
{
    unsigned nodes = lt->nodes;
    uint32_t mine = locktable_count(lt, me);
    for (unsigned k = 0; k < q->locks_per_op; k++) {
        struct pick p;
        for (unsigned tries = 0;; tries++) {
            p.node = me;
            if (nodes > 1 && (rng_next(seed) % 100 >= q->locality || mine == 0)) {
                p.node = (uint16_t)((me + 1 + (rng_next(seed) % (nodes - 1))) % nodes);
                while (locktable_count(lt, p.node) == 0) p.node = (uint16_t)((p.node + 1) % nodes);
            }
            p.idx = pick_index(q, locktable_count(lt, p.node), seed);
            bool dup = false;
            for (unsigned j = 0; j < k && !dup; j++)
                dup = out[j].node == p.node && out[j].idx == p.idx;
            if (!dup) break;
            if (tries < 64) continue;
            /* a very skewed draw keeps hitting the same few locks: walk to a free one */
            for (;;) {
                if (++p.idx >= locktable_count(lt, p.node)) {
                    p.idx = 0;
                    do p.node = (uint16_t)((p.node + 1) % nodes);
                    while (locktable_count(lt, p.node) == 0);
                }
                dup = false;
                for (unsigned j = 0; j < k && !dup; j++)
                    dup = out[j].node == p.node && out[j].idx == p.idx;
                if (!dup) break;
            }
            break;
        }
        p.mode = rng_next(seed) % 1000000 < q->read_ppm ? LOCK_SHARED : LOCK_EXCLUSIVE;
        out[k] = p;
    }
    qsort(out, q->locks_per_op, sizeof *out, pick_cmp);
}

static void stats_delta(struct bench_lock_res *res, const struct lock_stats *now,
                        const struct lock_stats *then)
{
    res->timeouts = now->timeouts - then->timeouts;
    res->aborts = now->aborts - then->aborts;
    res->resets = now->resets - then->resets;
    res->lease_expired = now->lease_expired - then->lease_expired;
    res->overflow_resets = now->overflow_resets - then->overflow_resets;
}

/* A random 1..4 us (WCSB's work inside, WARB's wait after). */
static int64_t rand_1_4us(uint64_t *seed) { return 1000 + (int64_t)(rng_next(seed) % 3001); }

/* Busy until t: work done while holding the locks. */
static void busy_until(int64_t t)
{
    while (clock_now_ns() < t) __builtin_ia32_pause();
}

/* Waits until t outside every lock: a task lets its thread's other tasks run meanwhile (as the
 * paper's processes wait in parallel), a thread spins. */
static void wait_until(int64_t t)
{
    bool task = task_running();
    while (clock_now_ns() < t) {
        if (task) task_yield();
        else __builtin_ia32_pause();
    }
}

/* The critical section of the paper's SOB and WCSB on the held locks (the others have none
 * but cs_ns). 0 or a fabric error. */
static int critical_section(const struct bench_lock_req *q, struct lock_thread *t,
                            const struct locktable *lt, const struct pick *ps, uint64_t *seed,
                            uint64_t *increments)
{
    if (q->bench == BENCH_LOCK_SOB) {
        for (unsigned i = 0; i < q->locks_per_op; i++) {
            rptr d = rptr_add(locktable_data(lt, ps[i].node, ps[i].idx), 8 * BENCH_LOCK_SOB_WORD);
            uint64_t v = *seed;
            int rc = ps[i].mode == LOCK_SHARED ? fab_read(t->c, d, &v, 8) : fab_write(t->c, d, &v, 8);
            if (rc) return rc;
        }
    } else if (q->bench == BENCH_LOCK_WCSB) {
        for (unsigned i = 0; i < q->locks_per_op; i++) {
            rptr d = rptr_add(locktable_data(lt, ps[i].node, ps[i].idx), 8 * BENCH_LOCK_WCSB_WORD);
            uint64_t v;
            int rc = fab_read(t->c, d, &v, 8);
            if (rc) return rc;
            if (ps[i].mode == LOCK_SHARED) continue;
            v++; /* not atomic: only mutual exclusion keeps every increment */
            if ((rc = fab_write(t->c, d, &v, 8))) return rc;
            (*increments)++;
        }
        busy_until(clock_now_ns() + rand_1_4us(seed));
    } else if (q->cs_ns) {
        busy_until(clock_now_ns() + q->cs_ns);
    }
    return 0;
}

/* One attempt at an op: take the locks in order, run the critical section, release them all --
 * except remote holdings picked by failure injection, which are never released (their holder
 * "died"; the lock's lease recovery must take over). 0 when every lock was taken and released
 * within its lease; otherwise what went wrong, with nothing left held. */
static int attempt(const struct bench_lock_req *q, struct lock_thread *t,
                   const struct lock_algo *algo, const struct locktable *lt, uint16_t me,
                   const struct pick *ps, uint64_t *seed, uint64_t *injected,
                   uint64_t *increments)
{
    struct lock_handle h[BENCH_MAX_LOCKS_PER_OP];
    unsigned held = 0;
    int64_t deadline = q->timeout_ns ? clock_now_ns() + q->timeout_ns : 0;
    int rc = 0;
    for (; held < q->locks_per_op; held++) {
        lock_handle_init(&h[held], t, algo, locktable_line(lt, ps[held].node, ps[held].idx));
        if ((rc = lock_acquire(&h[held], (enum lock_mode)ps[held].mode, deadline))) break;
    }
    if (!rc) rc = critical_section(q, t, lt, ps, seed, increments);
    for (unsigned i = 0; i < held; i++) {
        if (!rc && q->fail_ppm && ps[i].node != me && rng_next(seed) % 1000000 < q->fail_ppm) {
            (*injected)++;
            continue;
        }
        int r = lock_release(&h[i]);
        if (!rc) rc = r; /* RDKV_ETIMEDOUT: the lease ran out while we held it */
    }
    return rc;
}

/* A client's loop: ops until the run ends. Its fabric operations are counted in its own
 * counters as a task, in its context's (its alone) as a thread. */
static void client_loop(struct lock_client *cl, struct lock_worker *w)
{
    struct lock_run *run = cl->run;
    const struct bench_lock_req *q = &run->q;
    struct bench_lock_res *res = &cl->res;
    bool task = q->tasks > 1;
    if (task) fab_task_counters(&cl->k);
    const struct fab_counters *k = task ? &cl->k : fab_counters(w->c);
    const struct lock_algo *algo = lock_algo_find(q->algo);
    uint16_t me = fab_node_id(run->f);
    uint64_t seed = q->seed ^ ((uint64_t)me << 32) ^ (cl->idx * 0x9E3779B97F4A7C15ull) ^ 1;
    bool measuring = false;
    uint64_t rt0 = 0, ops0 = 0, injected = 0;
    struct lock_stats st0 = {0};
    int64_t t_start = 0, now = clock_now_ns();
    unsigned hard = 0; /* consecutive fabric errors */
    while (now < run->t_end && !atomic_load_explicit(&bench_stopping, memory_order_relaxed)) {
        struct pick ps[BENCH_MAX_LOCKS_PER_OP];
        pick_op(q, &w->lt, me, &seed, ps);
        int64_t t0 = clock_now_ns();
        if (!measuring && t0 >= run->t_measure) {
            measuring = true;
            t_start = t0;
            rt0 = k->round_trips;
            ops0 = fab_counters_ops(k);
            st0 = cl->t.stats;
            injected = 0;
        }
        int rc;
        /* An op that times out, is aborted by a lease reset or outlives its lease is retried
         * (after a short random back-off) until it succeeds or the run ends: its latency
         * covers every attempt, as a transaction's would. */
        for (unsigned tries = 0;; tries++) {
            rc = attempt(q, &cl->t, algo, &w->lt, me, ps, &seed, &injected, &res->increments);
            if (rc != RDKV_ETIMEDOUT && rc != RDKV_EABORTED) break;
            if (measuring) res->retries++;
            if (clock_now_ns() >= run->t_end || atomic_load(&bench_stopping)) break;
            lock_backoff(tries < 10 ? tries : 10);
        }
        int64_t t1 = clock_now_ns();
        if (rc == 0) {
            hard = 0;
            if (measuring) {
                res->ops++;
                res->local_ops += ps[0].node == me && ps[q->locks_per_op - 1].node == me;
                hist_record(&res->h, (uint64_t)(t1 - t0));
                bool wr = false;
                for (unsigned i = 0; i < q->locks_per_op && !wr; i++)
                    wr = ps[i].mode != LOCK_SHARED;
                if (wr) {
                    res->write_ops++;
                    hist_record(&res->wh, (uint64_t)(t1 - t0));
                }
            }
        } else if (rc != RDKV_ETIMEDOUT && rc != RDKV_EABORTED) {
            if (measuring) res->errors++;
            log_warn("bench lock: %s: %s", q->algo, rdkv_strerror(rc));
            if (!measuring || ++hard > 100) break;
        }
        if (q->think_ns) clock_sleep_ns(q->think_ns);
        if (q->bench == BENCH_LOCK_WARB) wait_until(clock_now_ns() + rand_1_4us(&seed));
        now = clock_now_ns();
    }
    if (measuring) {
        res->elapsed_ns = now - t_start;
        res->round_trips = k->round_trips - rt0;
        res->fabric_ops = fab_counters_ops(k) - ops0;
        stats_delta(res, &cl->t.stats, &st0);
        res->injected = injected;
    }
    if (task) fab_task_counters(NULL);
}

struct client_arg {
    struct lock_client *cl;
    struct lock_worker *w;
};

static void client_task(void *p)
{
    struct client_arg *a = p;
    client_loop(a->cl, a->w);
}

static void *lock_worker_main(void *arg)
{
    struct lock_worker *w = arg;
    struct lock_run *run = w->run;
    const struct bench_lock_req *q = &run->q;
    struct lock_cfg cfg;
    lock_cfg_init(&cfg);
    cfg.alock_local_budget = cfg.rwlock_local_budget = q->local_budget;
    cfg.alock_remote_budget = cfg.rwlock_remote_budget = q->remote_budget;
    if (q->lease_ns) cfg.lease_ns = q->lease_ns;
    cfg.dslr_omega_ns = q->omega_ns;
    if (q->rma_tl2) cfg.rma_tl2 = q->rma_tl2;
    if (q->rma_tl1) cfg.rma_tl1 = q->rma_tl1;
    if (q->rma_tr) cfg.rma_tr = q->rma_tr;
    if (q->rma_dc_nodes) cfg.rma_dc_nodes = q->rma_dc_nodes;
    if (q->rma_dc_per_node) cfg.rma_dc_per_node = q->rma_dc_per_node;
    /* the thread sets up its clients (each its own lock state over the shared context) */
    bool ok = fab_ctx_create(run->f, &w->c) == 0 && locktable_open(&w->lt, w->c, q->locks) == 0;
    for (unsigned i = 0; ok && i < q->tasks; i++) {
        struct lock_client *cl = &w->cl[i];
        bench_lock_res_init(&cl->res);
        cl->ok = ok = lock_thread_init(&cl->t, w->c, &cfg) == 0;
        /* the RMA locks find their per-node sites through the table (it outlives the client) */
        if (ok) lock_thread_use_table(&cl->t, &w->lt);
    }
    if (!ok) {
        log_error("bench lock: worker %u could not start", w->idx);
        run->failed = 1;
    }
    pthread_barrier_wait(&run->ready);
    if (ok && !run->failed) {
        if (q->tasks == 1) {
            client_loop(&w->cl[0], w);
        } else {
            struct sched *sc = NULL;
            struct client_arg *a = calloc(q->tasks, sizeof *a);
            if (!a || sched_create(&sc)) {
                log_error("bench lock: worker %u: no memory for its tasks", w->idx);
                run->failed = 1;
            } else {
                fab_ctx_attach(w->c, sc);
                for (unsigned i = 0; i < q->tasks; i++) {
                    a[i] = (struct client_arg){&w->cl[i], w};
                    if (task_spawn(sc, client_task, &a[i], 0)) run->failed = 1;
                }
                sched_run(sc);
                fab_ctx_attach(w->c, NULL);
            }
            sched_destroy(sc);
            free(a);
        }
    }
    for (unsigned i = 0; i < q->tasks; i++)
        if (w->cl[i].ok) lock_thread_fini(&w->cl[i].t);
    if (w->c) fab_ctx_destroy(w->c);
    return NULL;
}

static void *lock_run_main(void *arg)
{
    struct lock_run *run = arg;
    const struct bench_lock_req *q = &run->q;
    int64_t start = clock_now_ns();
    run->t_measure = start + q->warmup_ns;
    run->t_end = run->t_measure + q->run_ns;
    pthread_barrier_init(&run->ready, NULL, q->threads);
    unsigned started = 0;
    for (unsigned i = 0; i < q->threads; i++) {
        run->w[i].run = run;
        run->w[i].idx = i;
        run->w[i].cl = &run->clients[i * q->tasks];
        for (unsigned k = 0; k < q->tasks; k++)
            run->w[i].cl[k] = (struct lock_client){.run = run, .idx = i * q->tasks + k};
        if (pthread_create(&run->w[i].thr, NULL, lock_worker_main, &run->w[i])) break;
        started++;
    }
    if (started < q->threads) {
        /* the barrier can never fill: give up before anyone waits on it forever */
        log_error("bench lock: could not start %u threads", q->threads);
        run->failed = 1;
        for (unsigned i = started; i < q->threads; i++) pthread_barrier_wait(&run->ready);
    }
    struct bench_lock_res total;
    bench_lock_res_init(&total);
    for (unsigned i = 0; i < started; i++) {
        pthread_join(run->w[i].thr, NULL);
        for (unsigned k = 0; k < q->tasks; k++) {
            struct lock_client *cl = &run->w[i].cl[k];
            /* each client's measured ops, for the spread across the node's clients */
            cl->res.fair = (struct bench_lock_fair){.clients = 1, .min = cl->res.ops,
                                                    .max = cl->res.ops, .sum = cl->res.ops,
                                                    .sumsq = (double)cl->res.ops * (double)cl->res.ops};
            bench_lock_res_add(&total, &cl->res);
        }
    }
    pthread_barrier_destroy(&run->ready);
    struct pack_w w;
    pack_w_init(&w);
    bench_lock_res_pack(&total, &w);
    int st = run->failed ? RDKV_EIO : (w.err ? RDKV_ENOMEM : 0);
    struct fab_rpc_req *req = run->req;
    free(run->clients);
    free(run);
    /* idle again before the answer leaves: the caller may prepare the next run at once */
    atomic_store(&lock_run_busy, 0);
    fab_rpc_reply(req, st, w.p, w.err ? 0 : w.len);
    pack_w_free(&w);
    atomic_fetch_sub_explicit(&lock_run_threads, 1, memory_order_release); /* last fabric use */
    return NULL;
}

static void on_lock_prepare(struct fab_rpc_req *req, void *arg)
{
    struct fabric *f = arg;
    struct pack_r r;
    pack_r_init(&r, fab_rpc_data(req), fab_rpc_len(req));
    uint32_t locks = unpack_u32(&r);
    if (!unpack_done(&r)) {
        fab_rpc_reply(req, RDKV_EPROTO, NULL, 0);
        return;
    }
    if (atomic_load(&lock_run_busy)) {
        fab_rpc_reply(req, RDKV_EBUSY, NULL, 0);
        return;
    }
    fab_rpc_reply(req, locktable_reset(f, locks), NULL, 0);
}

static void on_lock_run(struct fab_rpc_req *req, void *arg)
{
    struct fabric *f = arg;
    struct lock_run *run = calloc(1, sizeof *run);
    if (!run) {
        fab_rpc_reply(req, RDKV_ENOMEM, NULL, 0);
        return;
    }
    int rc = bench_lock_req_unpack(&run->q, fab_rpc_data(req), fab_rpc_len(req));
    if (!rc && !(run->clients = calloc((size_t)run->q.threads * run->q.tasks, sizeof *run->clients)))
        rc = RDKV_ENOMEM;
    if (rc) {
        free(run);
        fab_rpc_reply(req, rc, NULL, 0);
        return;
    }
    int idle = 0;
    if (atomic_load(&bench_stopping) ||
        !atomic_compare_exchange_strong(&lock_run_busy, &idle, 1)) {
        free(run->clients);
        free(run);
        fab_rpc_reply(req, RDKV_EBUSY, NULL, 0);
        return;
    }
    run->f = f;
    run->req = req;
    if (spawn(lock_run_main, run)) {
        free(run->clients);
        free(run);
        atomic_store(&lock_run_busy, 0);
        fab_rpc_reply(req, RDKV_ENOMEM, NULL, 0);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Failure-test hooks */

struct hold {
    struct fabric *f;
    struct fab_rpc_req *req;
    char algo[16];
    int64_t lease;
    uint32_t locks, n;
    struct { uint16_t node; uint32_t idx; uint8_t mode; } it[16];
    uint64_t age; /* wait-die's (0: none) */
};

static void *hold_main(void *arg)
{
    struct hold *hd = arg;
    struct fab_ctx *c = NULL;
    struct lock_thread t;
    struct locktable lt;
    struct lock_cfg cfg;
    lock_cfg_init(&cfg);
    cfg.lease_ns = hd->lease;
    struct lock_handle h[16];
    unsigned held = 0;
    int rc = fab_ctx_create(hd->f, &c);
    if (!rc) rc = lock_thread_init(&t, c, &cfg);
    if (!rc) rc = locktable_open(&lt, c, hd->locks);
    for (unsigned i = 0; !rc && i < hd->n; i++) {
        if (hd->it[i].node >= lt.nodes || hd->it[i].idx >= locktable_count(&lt, hd->it[i].node)) {
            rc = RDKV_EINVAL;
            break;
        }
        lock_handle_init(&h[i], &t, lock_algo_find(hd->algo),
                         locktable_line(&lt, hd->it[i].node, hd->it[i].idx));
        h[i].age = hd->age;
        rc = lock_acquire(&h[i], (enum lock_mode)hd->it[i].mode, clock_now_ns() + 10 * NS_PER_S);
        if (!rc) held++;
    }
    fab_rpc_reply(hd->req, rc, NULL, 0);
    /* Hold until the node dies; a clean stop gives everything back. */
    while (!rc && !atomic_load(&bench_stopping)) clock_sleep_ns(10 * NS_PER_MS);
    for (unsigned i = 0; i < held; i++) lock_release(&h[i]);
    if (c) {
        lock_thread_fini(&t);
        fab_ctx_destroy(c);
    }
    free(hd);
    atomic_fetch_sub_explicit(&lock_run_threads, 1, memory_order_release);
    return NULL;
}

static void on_lock_hold(struct fab_rpc_req *req, void *arg)
{
    struct hold *hd = calloc(1, sizeof *hd);
    if (!hd) {
        fab_rpc_reply(req, RDKV_ENOMEM, NULL, 0);
        return;
    }
    struct pack_r r;
    pack_r_init(&r, fab_rpc_data(req), fab_rpc_len(req));
    unpack_str(&r, hd->algo, sizeof hd->algo);
    hd->lease = (int64_t)unpack_u64(&r);
    hd->locks = unpack_u32(&r);
    hd->n = unpack_u32(&r);
    for (unsigned i = 0; i < hd->n && i < 16; i++) {
        hd->it[i].node = unpack_u16(&r);
        hd->it[i].idx = unpack_u32(&r);
        hd->it[i].mode = unpack_u8(&r);
    }
    if (!r.err && r.at < r.len) hd->age = unpack_u64(&r); /* (optional: wait-die's age) */
    if (!unpack_done(&r) || hd->n > 16 || hd->age > LOCK_AGE_MAX || !lock_algo_find(hd->algo) || hd->lease <= 0 ||
        hd->locks == 0) {
        free(hd);
        fab_rpc_reply(req, RDKV_EINVAL, NULL, 0);
        return;
    }
    hd->f = arg;
    hd->req = req;
    if (spawn(hold_main, hd)) {
        free(hd);
        fab_rpc_reply(req, RDKV_ENOMEM, NULL, 0);
    }
}

/* Runs on an RPC thread: it may wait up to its timeout. */
static void on_lock_try(struct fab_rpc_req *req, void *arg)
{
    struct fabric *f = arg;
    struct pack_r r;
    pack_r_init(&r, fab_rpc_data(req), fab_rpc_len(req));
    char algo[16];
    unpack_str(&r, algo, sizeof algo);
    int64_t lease = (int64_t)unpack_u64(&r);
    uint32_t locks = unpack_u32(&r);
    uint16_t node = unpack_u16(&r);
    uint32_t idx = unpack_u32(&r);
    uint8_t mode = unpack_u8(&r);
    int64_t timeout = (int64_t)unpack_u64(&r);
    /* optional: wait-die's age, and each attempt's own bound (a transaction's lock timeout:
     * the attempts repeat, as a transaction's retries do, until the timeout) */
    uint64_t age = 0;
    int64_t try_ns = 0;
    if (!r.err && r.at < r.len) {
        age = unpack_u64(&r);
        try_ns = (int64_t)unpack_u64(&r);
    }
    const struct lock_algo *a = lock_algo_find(algo);
    if (!unpack_done(&r) || !a || lease <= 0 || !locks || timeout <= 0 ||
        timeout > 600 * NS_PER_S || age > LOCK_AGE_MAX || try_ns < 0) {
        fab_rpc_reply(req, RDKV_EINVAL, NULL, 0);
        return;
    }
    struct fab_ctx *c = NULL;
    struct lock_thread t;
    struct locktable lt;
    struct lock_cfg cfg;
    lock_cfg_init(&cfg);
    cfg.lease_ns = lease;
    uint64_t line[8] = {0};
    int64_t t0 = clock_now_ns();
    int rc = fab_ctx_create(f, &c);
    bool attached = false;
    if (!rc) rc = lock_thread_init(&t, c, &cfg);
    attached = rc == 0;
    if (!rc) rc = locktable_open(&lt, c, locks);
    if (!rc && (node >= lt.nodes || idx >= locktable_count(&lt, node))) rc = RDKV_EINVAL;
    if (!rc) {
        struct lock_handle h;
        lock_handle_init(&h, &t, a, locktable_line(&lt, node, idx));
        int64_t deadline = t0 + timeout;
        for (;;) {
            int64_t now = clock_now_ns(), until = deadline;
            if (try_ns && now + try_ns < deadline) until = now + try_ns;
            h.age = age;
            rc = lock_acquire(&h, (enum lock_mode)mode, until);
            /* EABORTED: consumed by a reset, or wait-die died: take a new ticket */
            bool again = rc == RDKV_EABORTED || (rc == RDKV_ETIMEDOUT && until < deadline);
            if (!again) break;
            if (clock_now_ns() >= deadline) {
                rc = RDKV_ETIMEDOUT;
                break;
            }
            if (age) lock_backoff(8); /* (a transaction's retry back-off) */
        }
        if (!rc) rc = lock_release(&h);
        if (!rc) rc = fab_read(c, locktable_line(&lt, node, idx), line, sizeof line);
    }
    int64_t elapsed = clock_now_ns() - t0;
    if (attached) lock_thread_fini(&t);
    if (c) fab_ctx_destroy(c);
    struct pack_w w;
    pack_w_init(&w);
    pack_u64(&w, (uint64_t)elapsed);
    for (int i = 0; i < 8; i++) pack_u64(&w, line[i]);
    fab_rpc_reply(req, rc, w.p, w.err ? 0 : w.len);
    pack_w_free(&w);
}

void bench_register(struct fabric *f, struct range_server *rs)
{
    bench_range_register(f, rs); /* kvbench range: bench_range.c */
    fab_rpc_register(f, KV_RPC_BENCH_LOCK_PREPARE, on_lock_prepare, f, 0);
    fab_rpc_register(f, KV_RPC_BENCH_LOCK_RUN, on_lock_run, f, 0);
    fab_rpc_register(f, KV_RPC_BENCH_LOCK_HOLD, on_lock_hold, f, 0);
    fab_rpc_register(f, KV_RPC_BENCH_LOCK_TRY, on_lock_try, f, 0);
}

bool bench_shutdown(int64_t wait_ns)
{
    atomic_store(&bench_stopping, true);
    int64_t deadline = clock_now_ns() + wait_ns;
    while (atomic_load_explicit(&lock_run_threads, memory_order_acquire)) {
        if (clock_now_ns() >= deadline) return false;
        clock_sleep_ns(10 * NS_PER_MS);
    }
    int64_t left = deadline - clock_now_ns();
    return bench_range_shutdown(left > 0 ? left : 0);
}
