/* The node side of kvbench lock: worker threads that acquire and release locks of the lock table
 * (chosen by locality) on the node's own fabric, and report their latency histogram and fabric
 * operation counts. One run at a time per node; a run answers its RPC when it ends. */
#include "server/bench.h"

#include "common/clock.h"
#include "common/log.h"
#include "locks/lock.h"
#include "server/proto.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

void bench_lock_req_pack(const struct bench_lock_req *q, struct pack_w *w)
{
    pack_str(w, q->algo);
    pack_u32(w, q->threads);
    pack_u32(w, q->locks);
    pack_u32(w, q->locality);
    pack_u64(w, (uint64_t)q->warmup_ns);
    pack_u64(w, (uint64_t)q->run_ns);
    pack_u64(w, (uint64_t)q->cs_ns);
    pack_u64(w, (uint64_t)q->local_budget);
    pack_u64(w, (uint64_t)q->remote_budget);
    pack_u64(w, q->seed);
}

int bench_lock_req_unpack(struct bench_lock_req *q, const void *p, size_t len)
{
    struct pack_r r;
    pack_r_init(&r, p, len);
    memset(q, 0, sizeof *q);
    unpack_str(&r, q->algo, sizeof q->algo);
    q->threads = unpack_u32(&r);
    q->locks = unpack_u32(&r);
    q->locality = unpack_u32(&r);
    q->warmup_ns = (int64_t)unpack_u64(&r);
    q->run_ns = (int64_t)unpack_u64(&r);
    q->cs_ns = (int64_t)unpack_u64(&r);
    q->local_budget = (int64_t)unpack_u64(&r);
    q->remote_budget = (int64_t)unpack_u64(&r);
    q->seed = unpack_u64(&r);
    if (!unpack_done(&r)) return RDKV_EPROTO;
    if (!lock_algo_find(q->algo) || q->threads < 1 || q->threads > BENCH_MAX_THREADS ||
        q->locks < 1 || q->locality > 100 || q->warmup_ns < 0 || q->run_ns <= 0 ||
        q->run_ns > 3600 * NS_PER_S || q->warmup_ns > 600 * NS_PER_S || q->cs_ns < 0 ||
        q->cs_ns > NS_PER_S || q->local_budget < 1 || q->remote_budget < 1 ||
        q->local_budget > 1000000 || q->remote_budget > 1000000)
        return RDKV_EINVAL;
    return 0;
}

void bench_lock_res_pack(const struct bench_lock_res *r, struct pack_w *w)
{
    pack_u64(w, r->ops);
    pack_u64(w, r->local_ops);
    pack_u64(w, r->errors);
    pack_u64(w, r->round_trips);
    pack_u64(w, r->fabric_ops);
    pack_u64(w, (uint64_t)r->elapsed_ns);
    hist_pack(&r->h, w);
}

int bench_lock_res_unpack(struct bench_lock_res *r, const void *p, size_t len)
{
    struct pack_r rd;
    pack_r_init(&rd, p, len);
    r->ops = unpack_u64(&rd);
    r->local_ops = unpack_u64(&rd);
    r->errors = unpack_u64(&rd);
    r->round_trips = unpack_u64(&rd);
    r->fabric_ops = unpack_u64(&rd);
    r->elapsed_ns = (int64_t)unpack_u64(&rd);
    if (!hist_unpack(&r->h, &rd) || !unpack_done(&rd)) return RDKV_EPROTO;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */

struct lock_run;

struct lock_worker {
    struct lock_run *run;
    unsigned idx;
    pthread_t thr;
    struct bench_lock_res res;
};

struct lock_run {
    struct fabric *f;
    struct fab_rpc_req *req;
    struct bench_lock_req q;
    pthread_barrier_t ready;
    int64_t t_measure, t_end;
    _Atomic int failed;
    struct lock_worker w[BENCH_MAX_THREADS];
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

static inline uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static void *lock_worker_main(void *arg)
{
    struct lock_worker *w = arg;
    struct lock_run *run = w->run;
    const struct bench_lock_req *q = &run->q;
    struct bench_lock_res *res = &w->res;
    hist_init(&res->h);
    struct fab_ctx *c = NULL;
    struct lock_thread t;
    struct locktable lt;
    struct lock_cfg cfg;
    lock_cfg_init(&cfg);
    cfg.alock_local_budget = q->local_budget;
    cfg.alock_remote_budget = q->remote_budget;
    bool ok = fab_ctx_create(run->f, &c) == 0 && lock_thread_init(&t, c, &cfg) == 0 &&
              locktable_open(&lt, c, q->locks) == 0;
    if (!ok) {
        log_error("bench lock: worker %u could not start", w->idx);
        run->failed = 1;
    }
    pthread_barrier_wait(&run->ready);
    if (!ok || run->failed) goto out;
    const struct lock_algo *algo = lock_algo_find(q->algo);
    uint16_t me = fab_node_id(run->f);
    unsigned nodes = fab_num_nodes(run->f);
    uint32_t mine = locktable_count(&lt, me);
    uint64_t seed = q->seed ^ ((uint64_t)me << 32) ^ (w->idx * 0x9E3779B97F4A7C15ull) ^ 1;
    bool measuring = false;
    uint64_t rt0 = 0, ops0 = 0;
    int64_t t_start = 0, now = clock_now_ns();
    while (now < run->t_end && !atomic_load_explicit(&bench_stopping, memory_order_relaxed)) {
        /* pick a lock: our own with probability locality%, else any other node's */
        uint16_t node = me;
        uint64_t x = xorshift(&seed);
        if (nodes > 1 && (x % 100 >= q->locality || mine == 0)) {
            node = (uint16_t)((me + 1 + (xorshift(&seed) % (nodes - 1))) % nodes);
            while (locktable_count(&lt, node) == 0) node = (uint16_t)((node + 1) % nodes);
        }
        uint32_t k = (uint32_t)(xorshift(&seed) % locktable_count(&lt, node));
        struct lock_handle h;
        lock_handle_init(&h, &t, algo, locktable_line(&lt, node, k));
        int64_t t0 = clock_now_ns();
        if (!measuring && t0 >= run->t_measure) {
            measuring = true;
            t_start = t0;
            rt0 = fab_counters(c)->round_trips;
            ops0 = fab_counters_ops(fab_counters(c));
        }
        int rc = lock_acquire(&h, LOCK_EXCLUSIVE, 0);
        if (rc == 0) {
            if (q->cs_ns) {
                int64_t until = clock_now_ns() + q->cs_ns;
                while (clock_now_ns() < until) __builtin_ia32_pause();
            }
            rc = lock_release(&h);
        }
        int64_t t1 = clock_now_ns();
        if (measuring) {
            if (rc == 0) {
                res->ops++;
                res->local_ops += node == me;
                hist_record(&res->h, (uint64_t)(t1 - t0));
            } else {
                res->errors++;
            }
        }
        if (rc) {
            log_warn("bench lock: %s on node %u: %s", q->algo, node, rdkv_strerror(rc));
            if (!measuring || res->errors > 100) break;
        }
        now = t1;
    }
    if (measuring) {
        res->elapsed_ns = now - t_start;
        res->round_trips = fab_counters(c)->round_trips - rt0;
        res->fabric_ops = fab_counters_ops(fab_counters(c)) - ops0;
    }
    lock_thread_fini(&t);
out:
    if (c) fab_ctx_destroy(c);
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
    memset(&total, 0, sizeof total);
    hist_init(&total.h);
    for (unsigned i = 0; i < started; i++) {
        pthread_join(run->w[i].thr, NULL);
        struct bench_lock_res *r = &run->w[i].res;
        total.ops += r->ops;
        total.local_ops += r->local_ops;
        total.errors += r->errors;
        total.round_trips += r->round_trips;
        total.fabric_ops += r->fabric_ops;
        if (r->elapsed_ns > total.elapsed_ns) total.elapsed_ns = r->elapsed_ns;
        hist_merge(&total.h, &r->h);
    }
    pthread_barrier_destroy(&run->ready);
    struct pack_w w;
    pack_w_init(&w);
    bench_lock_res_pack(&total, &w);
    int st = run->failed ? RDKV_EIO : (w.err ? RDKV_ENOMEM : 0);
    struct fab_rpc_req *req = run->req;
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
    if (rc) {
        free(run);
        fab_rpc_reply(req, rc, NULL, 0);
        return;
    }
    int idle = 0;
    if (atomic_load(&bench_stopping) ||
        !atomic_compare_exchange_strong(&lock_run_busy, &idle, 1)) {
        free(run);
        fab_rpc_reply(req, RDKV_EBUSY, NULL, 0);
        return;
    }
    run->f = f;
    run->req = req;
    if (spawn(lock_run_main, run)) {
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
    if (!unpack_done(&r) || hd->n > 16 || !lock_algo_find(hd->algo) || hd->lease <= 0 ||
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
    const struct lock_algo *a = lock_algo_find(algo);
    if (!unpack_done(&r) || !a || lease <= 0 || !locks || timeout <= 0 || timeout > 600 * NS_PER_S) {
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
        do rc = lock_acquire(&h, (enum lock_mode)mode, deadline);
        while (rc == RDKV_EABORTED); /* our request was consumed by a reset: take a new ticket */
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

void bench_register(struct fabric *f)
{
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
    return true;
}
