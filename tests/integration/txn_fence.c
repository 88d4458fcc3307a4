/* Late commit messages: a participant's request is delivered after its coordinator gave up
 * waiting (the commit timed out: RDKV_EUNKNOWN) and another transaction has taken the row. The
 * install must not land under that transaction's lock. A 3-node cluster in this process
 * (--commit-timeout 1s); a gate on node 1's RPC threads (fab_set_rpc_hook) holds one request
 * of the chosen type until the test has driven everyone else where the scenario needs them;
 * every wait is for an event, bounded in time.
 *   late_apply    T1 (coordinated by node 0) writes K on node 1: one APPLY, held. T1 reports
 *                 RDKV_EUNKNOWN. T2 (node 2) then locks K exclusively and reads it. The APPLY is
 *                 delivered: K's bytes must not change while T2 holds K.
 *   late_commit   the same with two-phase commit: T1 writes K on node 1 and a key on node 2;
 *                 node 1's COMMIT is held.
 *   late_prepare  node 1's PREPARE is held: T1 fails (nothing happened) and aborts; the late
 *                 PREPARE must be refused, not kept prepared.
 * Afterwards T2 commits its own write and every key reads what the last committed writer wrote
 * (T1's writes, where they landed, before T2's). The fencing counters (node status "fence") say
 * how it went: node 0 kept T1's locks on node 1 and let them go on node 1's answer; a late
 * request that arrived after it was refused. */
#include "tests/harness.h"
#include "tests/testenv.h"
#include "tests/txncluster.h"

#include "client/embed.h"
#include "common/clock.h"
#include "server/node.h"
#include "storage/store.h"
#include "txn/txn.h"

#include <pthread.h>

#define WAIT_NS (20 * NS_PER_S)

static struct tcluster C;

/* A key with the given prefix owned by node `part`. */
static void key_on(char *buf, size_t cap, const char *prefix, unsigned part)
{
    for (unsigned i = 0;; i++) {
        snprintf(buf, cap, "%s%u", prefix, i);
        if (tc_partition(&C, buf, strlen(buf)) == part) return;
    }
}

/* K's bytes on its owner, read from the store directly (no lock: the test only looks). */
static bool raw_value(unsigned node, const char *key, char *out, size_t cap, size_t *len)
{
    struct store *st = txn_env_store(node_txn(rdkv_node_server(C.node[node])));
    rptr row;
    struct row_view v;
    if (store_lookup(st, key, (uint32_t)strlen(key), &row) || store_row_view(st, row, &v))
        return false;
    if (v.vext || v.vlen > cap) return false;
    memcpy(out, v.val, v.vlen);
    *len = v.vlen;
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* The gate on a node's RPC threads: holds the first request of `type` once armed. */

struct rgate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint16_t type;
    bool armed, held, open, done;
};
static __thread bool rgate_mine; /* this RPC thread runs the held request */

static void rgate_hook(void *arg, uint16_t type, uint16_t src, bool after)
{
    (void)src;
    struct rgate *g = arg;
    pthread_mutex_lock(&g->mu);
    if (!after && g->armed && type == g->type) {
        g->armed = false;
        g->held = rgate_mine = true;
        pthread_cond_broadcast(&g->cv);
        while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
    } else if (after && rgate_mine) {
        rgate_mine = false;
        g->done = true; /* the held request's handler has returned */
        pthread_cond_broadcast(&g->cv);
    }
    pthread_mutex_unlock(&g->mu);
}

static bool rgate_wait(struct rgate *g, const bool *flag)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += WAIT_NS / NS_PER_S;
    pthread_mutex_lock(&g->mu);
    int rc = 0;
    while (!*flag && rc == 0) rc = pthread_cond_timedwait(&g->cv, &g->mu, &until);
    bool set = *flag;
    pthread_mutex_unlock(&g->mu);
    return set;
}

static void rgate_open(struct rgate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* ------------------------------------------------------------------------------------------ */

/* T2: K exclusively from node 2 (retried while the lock is not free: T1's coordinator may hold
 * it until node 1 answers), its value into seen. Returns the open transaction, or NULL. */
static rdkv_txn *lock_k(rdkv_session *s, const char *k, char *seen, size_t *seen_len)
{
    int64_t until = clock_now_ns() + WAIT_NS;
    while (clock_now_ns() < until) {
        rdkv_txn *t;
        if (rdkv_txn_begin(s, &t)) return NULL;
        const void *v;
        size_t vl;
        int rc = rdkv_txn_get_for_update(t, k, strlen(k), &v, &vl);
        if (rc == 0 && vl < 32) {
            memcpy(seen, v, vl);
            *seen_len = vl;
            return t;
        }
        rdkv_txn_free(t);
        if (rc != RDKV_EABORTED) {
            fprintf(stderr, "  T2's get_for_update: %s\n", rdkv_strerror(rc));
            return NULL;
        }
    }
    return NULL;
}

static void fence_stats(unsigned node, struct txn_fence_stats *out)
{
    txn_env_fence_stats(node_txn(rdkv_node_server(C.node[node])), out);
}

static void late(uint16_t type)
{
    /* (5 s on verbs: the guest is an emulated machine, where an ordinary commit may take a
     * second) */
    const char *const extra[] = {"--commit-timeout", tenv_transport == FAB_VERBS ? "5s" : "1s",
                                 NULL};
    REQUIRE(tc_start(&C, 3, extra) == 0);
    char k[32], k2[32];
    key_on(k, sizeof k, "late/", 1);
    key_on(k2, sizeof k2, "late2/", 2);
    rdkv_session *a, *b;
    REQUIRE(rdkv_session_open(C.node[0], NULL, &a) == 0);
    REQUIRE(rdkv_session_open(C.node[2], NULL, &b) == 0);
    CHECK_EQ(tc_put1(a, k, "v0", 2), 0);
    CHECK_EQ(tc_put1(a, k2, "w0", 2), 0);

    struct rgate g = {.type = type, .armed = true};
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    struct fabric *f1 = node_fabric(rdkv_node_server(C.node[1]));
    fab_set_rpc_hook(f1, rgate_hook, &g);

    /* T1: K := v1 (and K2 := w1 for two-phase commit); its request to node 1 is held */
    bool two_pc = type != TXN_RPC_APPLY;
    rdkv_txn *t1;
    REQUIRE(rdkv_txn_begin(a, &t1) == 0);
    CHECK_EQ(rdkv_txn_put(t1, k, strlen(k), "v1", 2), 0);
    if (two_pc) CHECK_EQ(rdkv_txn_put(t1, k2, strlen(k2), "w1", 2), 0);
    int rc1 = rdkv_txn_commit(t1);
    rdkv_txn_free(t1);
    /* no answer after the decision: unknown; no answer to a PREPARE: failed, nothing done */
    CHECK_EQ(rc1, type == TXN_RPC_PREPARE ? RDKV_EUNAVAILABLE : RDKV_EUNKNOWN);
    CHECK(rgate_wait(&g, &g.held));

    /* T2 takes K and reads it; then the held request is delivered */
    char seen[32], after[32];
    size_t seen_len = 0, after_len = 0;
    rdkv_txn *t2 = lock_k(b, k, seen, &seen_len);
    CHECK(t2 != NULL);
    rgate_open(&g);
    CHECK(rgate_wait(&g, &g.done));
    CHECK(raw_value(1, k, after, sizeof after, &after_len));
    fprintf(stderr, "  T1: %s; T2 read K = %.*s; after the late request K holds %.*s\n",
            rdkv_strerror(rc1), (int)seen_len, seen, (int)after_len, after);
    /* nothing changed under T2's lock */
    CHECK(t2 && after_len == seen_len && !memcmp(after, seen, seen_len));
    if (t2) {
        CHECK_EQ(rdkv_txn_put(t2, k, strlen(k), "v2", 2), 0);
        CHECK_EQ(rdkv_txn_commit(t2), 0);
        rdkv_txn_free(t2);
    }
    fab_set_rpc_hook(f1, NULL, NULL);
    char buf[8];
    size_t bl;
    CHECK_EQ(tc_get1(a, k, buf, sizeof buf, &bl), 0);
    CHECK(bl == 2 && !memcmp(buf, "v2", 2));
    if (two_pc) { /* K2: committed on node 2, which answered; or aborted there */
        CHECK_EQ(tc_get1(a, k2, buf, sizeof buf, &bl), 0);
        CHECK(bl == 2 && !memcmp(buf, type == TXN_RPC_COMMIT ? "w1" : "w0", 2));
    }
    struct txn_fence_stats s0, s1;
    fence_stats(0, &s0);
    fence_stats(1, &s1);
    fprintf(stderr, "  node 0 kept %" PRIu64 ", resolved %" PRIu64 "; node 1 refused %" PRIu64
            " late\n", s0.kept, s0.resolved, s1.late);
    CHECK_EQ(s0.kept, 1);
    CHECK_EQ(s0.resolved, 1);
    CHECK_EQ(s0.pending, 0);
    /* the late APPLY or PREPARE met the tombstone (a late COMMIT finds nothing prepared) */
    CHECK_EQ(s1.late, type == TXN_RPC_COMMIT ? 0 : 1);
    rdkv_session_close(a);
    rdkv_session_close(b);
    tc_stop(&C);
    pthread_mutex_destroy(&g.mu);
    pthread_cond_destroy(&g.cv);
}

static void t_late_apply(void) { late(TXN_RPC_APPLY); }
static void t_late_commit(void) { late(TXN_RPC_COMMIT); }
static void t_late_prepare(void) { late(TXN_RPC_PREPARE); }

static const struct test_case cases[] = {
    {"late_apply", t_late_apply},
    {"late_commit", t_late_commit},
    {"late_prepare", t_late_prepare},
};

int main(int argc, char **argv)
{
    return tenv_main(argc, argv, "late commit messages", cases, sizeof cases / sizeof cases[0]);
}
