/* Conflict policies (docs/transactions.md, "Conflict policies") on a 3-node cluster in this
 * process whose lock timeout is 60 s, so that a deadlock that had to wait for it would run into
 * the test's own deadline (ctest TIMEOUT) instead of passing. Transactions run on "actors":
 * threads that each own a transaction worker of one node and run the operations the test posts
 * to them, so that the test drives two transactions in lockstep and waits for events only.
 *   deadlock_wait_die  T1 locks A, T2 locks B, then T1 asks for B while T2 asks for A, for keys
 *                      on several nodes (local and remote cohorts of the row lock): the younger
 *                      aborts, the older commits -- with T1 the older, then with T2.
 *   deadlock_no_wait   the same: the request not granted at once aborts its transaction, and
 *                      the other commits; both asking at once ends too (at least one aborts).
 *   retry_keeps_ts     a transaction that died for an older one and retries with its first
 *                      timestamp (txn_keep_ts) is older than a newer holder: it waits for it and
 *                      commits, where a fresh timestamp dies.
 * Nothing asserts timing: a wait for the lock timeout shows up as the test's deadline. */
#include "tests/harness.h"
#include "tests/testenv.h"
#include "tests/txncluster.h"

#include "client/embed.h"
#include "common/clock.h"
#include "server/node.h"
#include "txn/txn.h"

#include <pthread.h>
#include <unistd.h>

#define WAIT_NS (20 * NS_PER_S) /* far under the lock timeout (60 s) */

static struct tcluster C;

static bool up(void)
{
    static const char *const extra[] = {"--lock-timeout", "60s", NULL};
    return tc_start(&C, 3, extra) == 0;
}

static void key_on(char *buf, size_t cap, const char *prefix, unsigned part)
{
    for (unsigned i = 0;; i++) {
        snprintf(buf, cap, "%s%u", prefix, i);
        if (tc_partition(&C, buf, strlen(buf)) == part) return;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Actors. */

enum act_op { A_NONE, A_BEGIN, A_PUT, A_COMMIT, A_ABORT, A_POLICY, A_QUIT };

struct actor {
    pthread_t th;
    unsigned node;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    enum act_op op; /* posted, not yet done (A_NONE: idle) */
    char key[64];
    uint64_t arg;
    int rc;
    struct txn_worker *w;
    struct txn *t;
    uint64_t ts; /* txn_start_ts after the last A_BEGIN */
};

static int act_run(struct actor *a, enum act_op op)
{
    switch (op) {
    case A_BEGIN: {
        int rc = txn_begin(a->w, &a->t);
        if (!rc && a->arg) txn_keep_ts(a->t, a->arg);
        if (!rc) a->ts = txn_start_ts(a->t);
        return rc;
    }
    case A_PUT: return txn_put(a->t, a->key, (uint32_t)strlen(a->key), "v", 1);
    case A_COMMIT: return txn_commit(a->t);
    case A_ABORT: txn_abort(a->t); return 0;
    case A_POLICY: txn_worker_set_conflict(a->w, (int)a->arg); return 0;
    default: return 0;
    }
}

static void *act_main(void *arg)
{
    struct actor *a = arg;
    int rc = txn_worker_create(node_txn(rdkv_node_server(C.node[a->node])), &a->w);
    pthread_mutex_lock(&a->mu);
    a->rc = rc;
    a->op = A_NONE;
    pthread_cond_broadcast(&a->cv);
    while (!rc) {
        while (a->op == A_NONE) pthread_cond_wait(&a->cv, &a->mu);
        enum act_op op = a->op;
        if (op == A_QUIT) break;
        pthread_mutex_unlock(&a->mu);
        int r = act_run(a, op);
        pthread_mutex_lock(&a->mu);
        a->rc = r;
        a->op = A_NONE;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    txn_worker_destroy(a->w);
    return NULL;
}

/* Waits (bounded) until the actor is idle; its last result. */
static int act_wait(struct actor *a)
{
    struct timespec until = clock_ts(clock_now_ns() + WAIT_NS);
    pthread_mutex_lock(&a->mu);
    int e = 0;
    while (a->op != A_NONE && e == 0) e = pthread_cond_timedwait(&a->cv, &a->mu, &until);
    bool idle = a->op == A_NONE;
    int rc = a->rc;
    pthread_mutex_unlock(&a->mu);
    if (!idle) {
        fprintf(stderr, "  actor on node %u still busy after %d s: a lock wait that no policy "
                        "ended\n", a->node, (int)(WAIT_NS / NS_PER_S));
        fflush(stderr);
        _exit(1); /* its thread is stuck in a wait: no clean way out */
    }
    return rc;
}

static void act_post(struct actor *a, enum act_op op, const char *key, uint64_t arg)
{
    act_wait(a);
    pthread_mutex_lock(&a->mu);
    if (key) snprintf(a->key, sizeof a->key, "%s", key);
    a->arg = arg;
    a->op = op;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

static int act_do(struct actor *a, enum act_op op, const char *key, uint64_t arg)
{
    act_post(a, op, key, arg);
    return act_wait(a);
}

static bool act_start(struct actor *a, unsigned node, int policy)
{
    memset(a, 0, sizeof *a);
    a->node = node;
    a->op = A_BEGIN; /* (busy until the worker exists) */
    pthread_mutex_init(&a->mu, NULL);
    clock_cond_init(&a->cv);
    if (pthread_create(&a->th, NULL, act_main, a)) return false;
    if (act_wait(a)) return false;
    act_do(a, A_POLICY, NULL, (uint64_t)policy);
    return true;
}

static void act_stop(struct actor *a)
{
    act_post(a, A_QUIT, NULL, 0);
    pthread_join(a->th, NULL);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
}

/* A fresh cluster and three actors with the given policies: on nodes 0, 1 and 2, or all on
 * node 0 (one_node: then the order they begin in is the order of their ages; across nodes,
 * transactions begun within a few microseconds of each other may be ordered either way). */
static bool cast(struct actor a[3], bool one_node, int p0, int p1, int p2)
{
    if (!up()) return false;
    const int pol[3] = {p0, p1, p2};
    for (unsigned i = 0; i < 3; i++)
        if (!act_start(&a[i], one_node ? 0 : i, pol[i])) return false;
    return true;
}

/* Makes o the older of two transactions that have begun and done nothing yet: swaps their
 * timestamps if need be (txn_keep_ts; both actors are idle, their transactions ours to touch). */
static void make_older(struct actor *o, struct actor *y)
{
    if (o->ts < y->ts) return;
    uint64_t a = o->ts, b = y->ts;
    txn_keep_ts(o->t, b);
    txn_keep_ts(y->t, a);
    o->ts = txn_start_ts(o->t);
    y->ts = txn_start_ts(y->t);
}

static void uncast(struct actor a[3])
{
    for (unsigned i = 0; i < 3; i++) act_stop(&a[i]);
    tc_stop(&C);
}

/* ------------------------------------------------------------------------------------------ */

/* Placements of the two keys (A, B): with T1 on node 0 and T2 on node 1, each of them is in the
 * local cohort of some rows and the remote cohort of others. */
static const unsigned place[][2] = {{0, 1}, {2, 2}, {1, 0}, {0, 0}};
#define NPLACE (sizeof place / sizeof place[0])

/* Writes both keys (so that the scenarios conflict on row locks, not on inserts' points, which
 * wait-die bounds by time: docs/transactions.md). After a scenario: nothing is left locked -- a
 * third transaction takes both keys under the timeout policy, 60 s, so that a lock or ticket
 * left behind would hang it into the test's deadline. */
static void both_free(struct actor *x, const char *ka, const char *kb)
{
    CHECK_EQ(act_do(x, A_POLICY, NULL, TXN_CONFLICT_TIMEOUT), 0);
    CHECK_EQ(act_do(x, A_BEGIN, NULL, 0), 0);
    CHECK_EQ(act_do(x, A_PUT, ka, 0), 0);
    CHECK_EQ(act_do(x, A_PUT, kb, 0), 0);
    CHECK_EQ(act_do(x, A_COMMIT, NULL, 0), 0);
}

static void deadlock_wait_die(void)
{
    struct actor a[3], *t1 = &a[0], *t2 = &a[1], *x = &a[2];
    REQUIRE(cast(a, false, TXN_CONFLICT_WAIT_DIE, TXN_CONFLICT_WAIT_DIE, TXN_CONFLICT_TIMEOUT));
    for (unsigned p = 0; p < NPLACE; p++)
        for (int older = 1; older <= 2; older++) {
            char ka[32], kb[32];
            key_on(ka, sizeof ka, older == 1 ? "wdA" : "wdC", place[p][0]);
            key_on(kb, sizeof kb, older == 1 ? "wdB" : "wdD", place[p][1]);
            struct actor *o = older == 1 ? t1 : t2, *y = older == 1 ? t2 : t1;
            both_free(x, ka, kb); /* (the keys exist: row locks, not inserts' points) */
            CHECK_EQ(act_do(o, A_BEGIN, NULL, 0), 0);
            CHECK_EQ(act_do(y, A_BEGIN, NULL, 0), 0);
            make_older(o, y);
            CHECK(o->ts < y->ts);
            CHECK_EQ(act_do(t1, A_PUT, ka, 0), 0); /* T1 holds A */
            CHECK_EQ(act_do(t2, A_PUT, kb, 0), 0); /* T2 holds B */
            act_post(t1, A_PUT, kb, 0);            /* both at once: a deadlock under timeout */
            act_post(t2, A_PUT, ka, 0);
            int ry = act_wait(y), ro = act_wait(o);
            if (ry != RDKV_EABORTED || ro != 0)
                fprintf(stderr, "  keys on %u,%u, T%d older: younger %s, older %s\n", place[p][0],
                        place[p][1], older, rdkv_status_name(ry), rdkv_status_name(ro));
            CHECK_EQ(ry, RDKV_EABORTED); /* the younger died */
            CHECK_EQ(ro, 0);             /* the older waited for it, and got the lock */
            CHECK_EQ(act_do(y, A_ABORT, NULL, 0), 0);
            CHECK_EQ(act_do(o, A_COMMIT, NULL, 0), 0);
            both_free(x, ka, kb);
        }
    uncast(a);
}

/* Under no-wait: a transaction that begins and takes `key`, retried when the request is not
 * granted at once -- a ticket given up by an earlier request may still wait for the janitor to
 * pass it on (docs/transactions.md: no-wait leaves nothing behind for good, not at once). */
static bool begin_hold(struct actor *a, const char *key)
{
    for (int tries = 0; tries < 1000; tries++) {
        if (act_do(a, A_BEGIN, NULL, 0)) return false;
        int rc = act_do(a, A_PUT, key, 0);
        if (rc != RDKV_EABORTED) return rc == 0;
        act_do(a, A_ABORT, NULL, 0);
        clock_sleep_ns(100 * NS_PER_US);
    }
    return false;
}

static void deadlock_no_wait(void)
{
    struct actor a[3], *t1 = &a[0], *t2 = &a[1], *x = &a[2];
    REQUIRE(cast(a, false, TXN_CONFLICT_NO_WAIT, TXN_CONFLICT_NO_WAIT, TXN_CONFLICT_TIMEOUT));
    for (unsigned p = 0; p < NPLACE; p++) {
        char ka[32], kb[32];
        key_on(ka, sizeof ka, "nwA", place[p][0]);
        key_on(kb, sizeof kb, "nwB", place[p][1]);
        both_free(x, ka, kb);
        /* in turn: T2's request is not granted at once and aborts T2, which lets B go */
        CHECK(begin_hold(t1, ka));
        CHECK(begin_hold(t2, kb));
        CHECK_EQ(act_do(t2, A_PUT, ka, 0), RDKV_EABORTED);
        CHECK_EQ(act_do(t2, A_ABORT, NULL, 0), 0);
        CHECK_EQ(act_do(t1, A_PUT, kb, 0), 0);
        CHECK_EQ(act_do(t1, A_COMMIT, NULL, 0), 0);
        both_free(x, ka, kb);
        /* at once: both end, at least one aborted, whoever got both keys commits */
        CHECK(begin_hold(t1, ka));
        CHECK(begin_hold(t2, kb));
        act_post(t1, A_PUT, kb, 0);
        act_post(t2, A_PUT, ka, 0);
        int r1 = act_wait(t1), r2 = act_wait(t2);
        CHECK(r1 == 0 || r1 == RDKV_EABORTED);
        CHECK(r2 == 0 || r2 == RDKV_EABORTED);
        CHECK(r1 == RDKV_EABORTED || r2 == RDKV_EABORTED);
        CHECK_EQ(act_do(t1, r1 ? A_ABORT : A_COMMIT, NULL, 0), 0);
        CHECK_EQ(act_do(t2, r2 ? A_ABORT : A_COMMIT, NULL, 0), 0);
        both_free(x, ka, kb);
    }
    uncast(a);
}

static void retry_keeps_ts(void)
{
    struct actor a[3], *y = &a[0], *o = &a[1], *z = &a[2];
    /* (on one node: the test relies on begin order being age order) */
    REQUIRE(cast(a, true, TXN_CONFLICT_WAIT_DIE, TXN_CONFLICT_WAIT_DIE, TXN_CONFLICT_WAIT_DIE));
    for (unsigned part = 0; part < 3; part++) {
        char k[32];
        key_on(k, sizeof k, "rtK", part);
        CHECK_EQ(act_do(y, A_BEGIN, NULL, 0), 0);
        CHECK_EQ(act_do(y, A_PUT, k, 0), 0);
        /* O, younger than Y, dies */
        CHECK_EQ(act_do(o, A_BEGIN, NULL, 0), 0);
        uint64_t first = o->ts;
        CHECK(first > y->ts);
        CHECK_EQ(act_do(o, A_PUT, k, 0), RDKV_EABORTED);
        CHECK_EQ(act_do(o, A_ABORT, NULL, 0), 0);
        CHECK_EQ(act_do(y, A_COMMIT, NULL, 0), 0);
        /* Z, newer than O's first attempt, holds the key */
        CHECK_EQ(act_do(z, A_BEGIN, NULL, 0), 0);
        CHECK(z->ts > first);
        CHECK_EQ(act_do(z, A_PUT, k, 0), 0);
        /* a retry with a fresh timestamp is younger than Z: it dies again */
        CHECK_EQ(act_do(o, A_BEGIN, NULL, 0), 0);
        CHECK(o->ts > z->ts);
        CHECK_EQ(act_do(o, A_PUT, k, 0), RDKV_EABORTED);
        CHECK_EQ(act_do(o, A_ABORT, NULL, 0), 0);
        /* the retry that keeps its first timestamp is older than Z: it waits for Z, and once
         * Z commits it has the key */
        CHECK_EQ(act_do(o, A_BEGIN, NULL, first), 0);
        CHECK_EQ(o->ts, first);
        act_post(o, A_PUT, k, 0);
        CHECK_EQ(act_do(z, A_COMMIT, NULL, 0), 0);
        CHECK_EQ(act_wait(o), 0);
        CHECK_EQ(act_do(o, A_COMMIT, NULL, 0), 0);
    }
    /* txn_keep_ts is ignored once the transaction holds a lock */
    CHECK_EQ(act_do(o, A_BEGIN, NULL, 0), 0);
    uint64_t ts = o->ts;
    CHECK_EQ(act_do(o, A_PUT, "rtL", 0), 0);
    txn_keep_ts(o->t, 1); /* (the actor is idle: its transaction is ours to touch) */
    CHECK_EQ(txn_start_ts(o->t), ts);
    CHECK_EQ(act_do(o, A_ABORT, NULL, 0), 0);
    uncast(a);
}

static const struct test_case cases[] = {
    {"deadlock_wait_die", deadlock_wait_die},
    {"deadlock_no_wait", deadlock_no_wait},
    {"retry_keeps_ts", retry_keeps_ts},
};

int main(int argc, char **argv)
{
    return tenv_main(argc, argv, "conflict policies", cases, sizeof cases / sizeof cases[0]);
}
