/* kvbench txn, the node side: transactions run by worker threads inside the node, as embedded
 * sessions would (their own fabric context and locks), so that a "local" key is in the node's
 * own arena. Keys are "bench:%08u" for i = 0, 1, 2, ...; every node computes the same list and
 * so knows which keys live where without asking. Protocol in tools/kvbench/node/bench.h. */
#include "tools/kvbench/node/bench.h"
#include "txn/txn.h"

#include "common/clock.h"
#include "common/rng.h"
#include "common/task.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct txn_env *bench_env;
static atomic_int txn_run_threads;
static atomic_bool txn_stopping;
static atomic_uint_fast64_t insert_next; /* the insert kinds: the run's next fresh key */
static atomic_uint insert_runs;

#define KEY_MAX 24

/* The first `per_node` keys of every node, in index order: keys[node * per_node + j]. */
static char *key_table(struct txn_env *e, unsigned nodes, uint32_t per_node)
{
    char *keys = calloc((size_t)nodes * per_node, KEY_MAX);
    uint32_t *have = calloc(nodes, sizeof *have);
    if (!keys || !have) {
        free(keys);
        free(have);
        return NULL;
    }
    unsigned full = 0;
    for (uint64_t i = 0; full < nodes && i < (uint64_t)per_node * nodes * 64; i++) {
        char k[KEY_MAX];
        int kl = snprintf(k, sizeof k, "bench:%08llu", (unsigned long long)i);
        uint16_t p = txn_partition(e, k, (uint32_t)kl);
        if (have[p] == per_node) continue;
        memcpy(keys + ((size_t)p * per_node + have[p]) * KEY_MAX, k, (size_t)kl + 1);
        if (++have[p] == per_node) full++;
    }
    free(have);
    if (full < nodes) {
        free(keys);
        return NULL;
    }
    return keys;
}

static const char *key_of(const char *keys, uint32_t per_node, unsigned node, uint32_t j)
{
    return keys + ((size_t)node * per_node + j) * KEY_MAX;
}

/* KV_RPC_BENCH_TXN_LOAD: inserts this node's keys (value_size bytes each). */
static void on_load(struct fab_rpc_req *req, void *arg)
{
    struct txn_env *e = arg;
    struct pack_r r;
    pack_r_init(&r, fab_rpc_data(req), fab_rpc_len(req));
    uint32_t per_node = unpack_u32(&r), vsize = unpack_u32(&r);
    if (!unpack_done(&r) || !per_node || per_node > 1000000 || vsize > 65536) {
        fab_rpc_reply(req, RDKV_EINVAL, NULL, 0);
        return;
    }
    struct fabric *f = txn_env_fabric(e);
    uint16_t me = fab_node_id(f);
    char *keys = key_table(e, fab_num_nodes(f), per_node);
    uint8_t *val = calloc(1, vsize + 1);
    struct txn_worker *w = NULL;
    int rc = keys && val ? txn_worker_create(e, &w) : RDKV_ENOMEM;
    memset(val, 'v', vsize);
    for (uint32_t j = 0; !rc && j < per_node; j += 100) {
        struct txn *t;
        if ((rc = txn_begin(w, &t))) break;
        for (uint32_t k = j; k < per_node && k < j + 100 && !rc; k++) {
            const char *key = key_of(keys, per_node, me, k);
            rc = txn_put(t, key, (uint32_t)strlen(key), val, vsize);
        }
        if (rc) txn_abort(t);
        else rc = txn_commit(t);
        if (rc == RDKV_EABORTED) { /* a concurrent run: try the batch again */
            rc = 0;
            j -= 100;
        }
    }
    if (w) txn_worker_destroy(w);
    free(keys);
    free(val);
    fab_rpc_reply(req, rc, NULL, 0);
}

struct txn_worker_arg {
    struct bench_txn_req q;
    const char *keys;
    uint32_t run;           /* the insert kinds: this run's name, in its keys */
    unsigned idx;
    struct fab_ctx *shared; /* a task's: its thread's context (NULL: the worker is a thread) */
    int64_t measure, end;   /* the run's window, the same for every worker */
    struct fab_counters k;  /* a task's own fabric operations */
    struct bench_txn_res res;
    int rc;
};

static void read_rt(struct txn_worker *w, struct txn_env *e, const struct bench_txn_req *q,
                    const char *keys, struct bench_txn_res *res)
{
    /* the fabric's READ round trip of the same run: one remote row's header, key and value */
    struct fabric *f = txn_env_fabric(e);
    unsigned n = fab_num_nodes(f);
    if (n < 2) return;
    uint16_t peer = (uint16_t)((fab_node_id(f) + 1) % n);
    struct store_remote sr;
    if (store_remote_open(txn_worker_ctx(w), peer, NULL, &sr)) return;
    const char *key = key_of(keys, q->keys_per_node, peer, 0);
    rptr cand[4];
    int nc = store_remote_probe(txn_worker_ctx(w), &sr, store_hash(key, (uint32_t)strlen(key)),
                                cand, 4);
    if (nc <= 0) return;
    uint64_t len = row_read_len((uint32_t)strlen(key), q->value_size, true);
    uint8_t buf[4096];
    if (len > sizeof buf) len = sizeof buf;
    for (unsigned i = 0; i < 2000 && !atomic_load(&txn_stopping); i++) {
        int64_t t0 = clock_now_ns();
        if (fab_read(txn_worker_ctx(w), rptr_add(cand[0], ROW_HDR_OFF), buf, len)) return;
        hist_record(&res->read_h, (uint64_t)(clock_now_ns() - t0));
    }
}

/* The insert kinds' key number i of run `run` into k (24 bytes and a NUL): "session:" then i
 * and run in hex (prefix), or i, "session:", run (spread: the first 8 bytes are i's). */
static uint32_t insert_key(char *k, uint8_t kind, uint64_t i, uint32_t run)
{
    if (kind == BENCH_TXN_INSERT_PREFIX)
        return (uint32_t)snprintf(k, KEY_MAX + 1, "session:%08llx%08x", (unsigned long long)i, run);
    return (uint32_t)snprintf(k, KEY_MAX + 1, "%08llxsession:%08x", (unsigned long long)i, run);
}

/* One insert transaction: inserts the run's next fresh key, number i, and reads a key of the
 * same round of keys_per_node keys (already inserted, being inserted, or not yet: an absent key
 * is read under its point lock). */
static int insert_txn(struct txn *t, const struct bench_txn_req *q, uint32_t run, uint64_t *seed,
                      const uint8_t *val)
{
    char k[KEY_MAX + 1];
    uint64_t i = atomic_fetch_add(&insert_next, 1);
    uint64_t round = i / q->keys_per_node * q->keys_per_node;
    uint32_t kl = insert_key(k, q->kind, i, run);
    int rc = txn_put(t, k, kl, val, q->value_size);
    if (rc) return rc;
    kl = insert_key(k, q->kind, round + rng_below(seed, q->keys_per_node), run);
    const void *v;
    uint32_t vl;
    rc = txn_get(t, k, kl, false, &v, &vl);
    return rc == RDKV_ENOTFOUND ? 0 : rc;
}

/* One worker: a thread, or a task of one (a->shared: its thread's context). Its round trips are
 * its context's (its own as a thread) or its own counters' (as a task). */
static void txn_worker_run(struct txn_worker_arg *a)
{
    struct txn_env *e = bench_env;
    struct bench_txn_req *q = &a->q;
    struct fabric *f = txn_env_fabric(e);
    uint16_t me = fab_node_id(f);
    unsigned n = fab_num_nodes(f);
    uint16_t peer = (uint16_t)((me + 1) % n);
    uint64_t seed = (q->seed + a->idx * 0x9E3779B97F4A7C15ull + me) | 1;
    hist_init(&a->res.h);
    hist_init(&a->res.read_h);
    struct txn_worker *w;
    if ((a->rc = a->shared ? txn_worker_create_on(e, a->shared, &w) : txn_worker_create(e, &w)))
        return;
    if (q->lock_timeout_ns) txn_worker_set_lock_timeout(w, q->lock_timeout_ns);
    struct fab_ctx *c = txn_worker_ctx(w);
    if (a->shared) fab_task_counters(&a->k);
    const struct fab_counters *k = a->shared ? &a->k : fab_counters(c);
    int64_t measure = a->measure, end = a->end;
    bool measuring = false;
    int64_t m0 = 0;
    uint8_t *val = calloc(1, q->value_size + 1);
    if (!val) {
        a->rc = RDKV_ENOMEM;
        if (a->shared) fab_task_counters(NULL);
        txn_worker_destroy(w);
        return;
    }
    memset(val, 'w', q->value_size);
    for (;;) {
        int64_t now = clock_now_ns();
        if (now >= end || atomic_load(&txn_stopping)) break;
        if (!measuring && now >= measure) {
            measuring = true;
            m0 = now;
            if (a->shared) memset(&a->k, 0, sizeof a->k);
            else fab_counters_reset(c);
            memset(&a->res, 0, offsetof(struct bench_txn_res, h));
        }
        uint32_t j1 = (uint32_t)rng_below(&seed, q->keys_per_node);
        uint32_t j2 = (uint32_t)rng_below(&seed, q->keys_per_node);
        const char *k1 = key_of(a->keys, q->keys_per_node, q->kind == BENCH_TXN_RO_REMOTE ? peer : me, j1);
        const char *k2 = key_of(a->keys, q->keys_per_node, peer, j2);
        int64_t t0 = clock_now_ns();
        struct fab_counters before = *k;
        struct txn *t;
        int rc = txn_begin(w, &t);
        const void *v;
        uint32_t vl;
        if (!rc) {
            if (q->kind >= BENCH_TXN_INSERT_PREFIX) {
                rc = insert_txn(t, q, a->run, &seed, val);
            } else if (q->kind == BENCH_TXN_RW_2PART) {
                rc = txn_get(t, k1, (uint32_t)strlen(k1), true, &v, &vl);
                if (!rc) rc = txn_get(t, k2, (uint32_t)strlen(k2), true, &v, &vl);
                if (!rc) rc = txn_put(t, k1, (uint32_t)strlen(k1), val, q->value_size);
                if (!rc) rc = txn_put(t, k2, (uint32_t)strlen(k2), val, q->value_size);
            } else {
                rc = txn_get(t, k1, (uint32_t)strlen(k1), false, &v, &vl);
            }
        }
        struct fab_counters mid = *k;
        if (!rc) rc = txn_commit(t);
        else txn_abort(t);
        const struct fab_counters *after = k;
        int64_t dt = clock_now_ns() - t0;
        if (a->shared) task_yield(); /* a transaction that never waited: the others' turn */
        if (!measuring) continue;
        if (rc == 0) {
            a->res.ops++;
            hist_record(&a->res.h, (uint64_t)dt);
            a->res.rt_before_commit += mid.round_trips - before.round_trips;
            a->res.rt_commit += after->round_trips - mid.round_trips;
            a->res.rpc_commit += after->rpcs - mid.rpcs;
        } else if (rc == RDKV_EABORTED) {
            a->res.aborts++;
        } else {
            a->res.errors++;
            if (!a->rc) a->rc = rc;
        }
    }
    a->res.elapsed_ns = measuring ? clock_now_ns() - m0 : 0;
    a->res.round_trips = k->round_trips;
    if (a->idx == 0) read_rt(w, e, q, a->keys, &a->res);
    if (a->shared) fab_task_counters(NULL);
    free(val);
    txn_worker_destroy(w);
}

static void worker_task(void *arg) { txn_worker_run(arg); }

/* A worker thread: its one worker, or q.tasks of them as tasks sharing its context. */
static void *txn_thread_main(void *arg)
{
    struct txn_worker_arg *a = arg; /* its workers: a[0 .. tasks) */
    unsigned tasks = a->q.tasks;
    if (tasks <= 1) {
        txn_worker_run(a);
    } else {
        struct fab_ctx *c = NULL;
        struct sched *s = NULL;
        int rc = fab_ctx_create(txn_env_fabric(bench_env), &c);
        if (!rc) rc = sched_create(&s);
        if (!rc) {
            fab_ctx_attach(c, s);
            for (unsigned i = 0; i < tasks; i++) {
                a[i].shared = c;
                if (task_spawn(s, worker_task, &a[i], 0)) a[i].rc = RDKV_ENOMEM;
            }
            sched_run(s);
            fab_ctx_attach(c, NULL);
        }
        for (unsigned i = 0; rc && i < tasks; i++) a[i].rc = rc;
        sched_destroy(s);
        if (c) fab_ctx_destroy(c);
    }
    atomic_fetch_sub(&txn_run_threads, 1);
    return NULL;
}

/* KV_RPC_BENCH_TXN_RUN: runs q.threads workers; answers with the merged result. */
static void on_run(struct fab_rpc_req *req, void *arg)
{
    struct txn_env *e = arg;
    struct bench_txn_req q;
    if (bench_txn_req_unpack(&q, fab_rpc_data(req), fab_rpc_len(req)) || !q.threads ||
        q.threads > BENCH_MAX_THREADS || !q.tasks || q.tasks > BENCH_MAX_TASKS ||
        q.threads * q.tasks > BENCH_MAX_CLIENTS || !q.keys_per_node || q.kind >= BENCH_TXN_KINDS) {
        fab_rpc_reply(req, RDKV_EINVAL, NULL, 0);
        return;
    }
    struct fabric *f = txn_env_fabric(e);
    char *keys = key_table(e, fab_num_nodes(f), q.keys_per_node);
    unsigned nw = q.threads * q.tasks;
    struct txn_worker_arg *args = calloc(nw, sizeof *args);
    pthread_t *th = calloc(q.threads, sizeof *th);
    if (!keys || !args || !th) {
        free(keys);
        free(args);
        free(th);
        fab_rpc_reply(req, RDKV_ENOMEM, NULL, 0);
        return;
    }
    int64_t start = clock_now_ns();
    /* fresh keys: a name of this run in every key (runs against a cluster that has the keys of
     * earlier runs insert new ones) */
    uint32_t run = (uint32_t)(start >> 10) ^ (atomic_fetch_add(&insert_runs, 1) << 24);
    atomic_store(&insert_next, 0);
    for (unsigned i = 0; i < nw; i++) {
        args[i].q = q;
        args[i].keys = keys;
        args[i].run = run;
        args[i].idx = i;
        args[i].measure = start + q.warmup_ns;
        args[i].end = args[i].measure + q.run_ns;
    }
    unsigned started = 0;
    for (unsigned i = 0; i < q.threads; i++) {
        atomic_fetch_add(&txn_run_threads, 1);
        if (pthread_create(&th[i], NULL, txn_thread_main, &args[i * q.tasks])) {
            atomic_fetch_sub(&txn_run_threads, 1);
            break;
        }
        started++;
    }
    struct bench_txn_res total;
    memset(&total, 0, sizeof total);
    hist_init(&total.h);
    hist_init(&total.read_h);
    int rc = started == q.threads ? 0 : RDKV_ENOMEM;
    for (unsigned i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        for (unsigned k = 0; k < q.tasks; k++) {
            struct txn_worker_arg *a = &args[i * q.tasks + k];
            if (!rc) rc = a->rc;
            bench_txn_res_add(&total, &a->res);
        }
    }
    struct pack_w w;
    pack_w_init(&w);
    bench_txn_res_pack(&total, &w);
    fab_rpc_reply(req, w.err ? RDKV_ENOMEM : rc, w.p, w.err ? 0 : w.len);
    pack_w_free(&w);
    free(keys);
    free(args);
    free(th);
}

#define Q struct bench_txn_req
static const struct bench_field req_fields[] = {
    BFIELD(Q, kind, BF_U8, BF_KEEP),
    BFIELD(Q, threads, BF_U32, BF_KEEP),
    BFIELD(Q, keys_per_node, BF_U32, BF_KEEP),
    BFIELD(Q, value_size, BF_U32, BF_KEEP),
    BFIELD(Q, tasks, BF_U32, BF_KEEP),
    BFIELD(Q, warmup_ns, BF_I64, BF_KEEP),
    BFIELD(Q, run_ns, BF_I64, BF_KEEP),
    BFIELD(Q, lock_timeout_ns, BF_I64, BF_KEEP),
    BFIELD(Q, seed, BF_U64, BF_KEEP),
};
#undef Q
/* The result: counters add up, the window is the longest, histograms merge. */
#define R struct bench_txn_res
static const struct bench_field res_fields[] = {
    BFIELD(R, ops, BF_U64, BF_SUM),
    BFIELD(R, aborts, BF_U64, BF_SUM),
    BFIELD(R, errors, BF_U64, BF_SUM),
    BFIELD(R, round_trips, BF_U64, BF_SUM),
    BFIELD(R, rt_before_commit, BF_U64, BF_SUM),
    BFIELD(R, rt_commit, BF_U64, BF_SUM),
    BFIELD(R, rpc_commit, BF_U64, BF_SUM),
    BFIELD(R, elapsed_ns, BF_I64, BF_MAX),
    BFIELD(R, h, BF_HIST, BF_SUM),
    BFIELD(R, read_h, BF_HIST, BF_SUM),
};
#undef R

void bench_txn_req_pack(const struct bench_txn_req *q, struct pack_w *w)
{
    bf_pack(BFIELDS(req_fields), q, w);
}

int bench_txn_req_unpack(struct bench_txn_req *q, const void *p, size_t len)
{
    if (bf_unpack_all(BFIELDS(req_fields), q, p, len) || q->keys_per_node > 1000000 ||
        q->value_size > 65536 || q->warmup_ns < 0 || q->run_ns <= 0 ||
        q->run_ns > 3600 * NS_PER_S || q->warmup_ns > 3600 * NS_PER_S || q->lock_timeout_ns < 0)
        return RDKV_EPROTO;
    return 0;
}

void bench_txn_res_pack(const struct bench_txn_res *r, struct pack_w *w)
{
    bf_pack(BFIELDS(res_fields), r, w);
}

int bench_txn_res_unpack(struct bench_txn_res *r, const void *p, size_t len)
{
    return bf_unpack_all(BFIELDS(res_fields), r, p, len);
}

void bench_txn_res_add(struct bench_txn_res *dst, const struct bench_txn_res *r)
{
    bf_merge(BFIELDS(res_fields), dst, r);
}

void bench_txn_register(struct fabric *f, struct txn_env *e)
{
    bench_env = e;
    fab_rpc_register(f, KV_RPC_BENCH_TXN_LOAD, on_load, e, 0);
    fab_rpc_register(f, KV_RPC_BENCH_TXN_RUN, on_run, e, 0);
}

bool bench_txn_shutdown(int64_t wait_ns)
{
    atomic_store(&txn_stopping, true);
    int64_t deadline = clock_now_ns() + wait_ns;
    while (atomic_load_explicit(&txn_run_threads, memory_order_acquire)) {
        if (clock_now_ns() >= deadline) return false;
        clock_sleep_ns(10 * NS_PER_MS);
    }
    return true;
}
