/* Abuse, rows 3 and 4 of issue 17: two-phase commit trusts only coordinators, and no PREPARE is
 * kept for ever. A 3-node cluster on 127.0.0.1 (in this process: the test reaches node 1's own
 * fabric, as a node that sends what it likes would, and the participant's counters).
 *   forged_2pc: APPLY, PREPARE, COMMIT and ABORT of a transaction that another node coordinates
 *     are refused, from a raw client connection and from a real node alike; an APPLY from the
 *     coordinator it claims to be, for a row whose exclusive lock it does not hold (held by a
 *     session's transaction, or by nobody), is refused whatever lock token it names; the session
 *     that holds the lock reads its own value, and the row keeps it. Control: transactions over
 *     all three partitions commit and read back.
 *   prepared_bounded: PREPAREs of a coordinator that never decides (a real node's, holding the
 *     point locks the fence asks for) are kept only up to --prepared-max (RDKV_EBUSY beyond),
 *     real puts meanwhile all succeed (no ENOSPC), and every kept one is dropped once its
 *     coordinator answers the participant's in-doubt query with "unknown"; after that PREPAREs
 *     are taken again.
 * Every loop is bounded in count and time; nothing asserts on timing. */
#include "tests/harness.h"
#include "tests/integration/abuse/raw.h"
#include "tests/testenv.h"
#include "tests/txncluster.h"

#include "client/embed.h"
#include "common/clock.h"
#include "common/pack.h"
#include "locks/range/range.h"
#include "server/node.h"
#include "txn/txn.h"
#include "txn/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RPC_NS (5 * NS_PER_S)
/* txids of a worker id that node 1's transaction layer never hands out */
#define FORGED_TXID(node, seq) ((uint64_t)(node) << 48 | 0xFFFFull << 32 | (seq))

static struct tcluster C;

static struct node *srv(unsigned i) { return rdkv_node_server(C.node[i]); }

static void key_on(unsigned node, const char *p, char *out, size_t cap)
{
    for (unsigned i = 0; i < 100000; i++) {
        int w = snprintf(out, cap, "%s%u", p, i);
        REQUIRE(w > 0 && (size_t)w < cap);
        if (tc_partition(&C, out, strlen(out)) == node) return;
    }
    REQUIRE(!"no key found");
}

static void stats(unsigned node, struct txn_fence_stats *out)
{
    txn_env_fence_stats(node_txn(srv(node)), out);
}

/* A one-op PREPARE / APPLY payload for node 2 (naming its incarnation: a coordinator's locks
 * taken there now). */
static void wops(struct pack_w *w, uint64_t txid, uint16_t coord, const struct wop *o)
{
    pack_w_init(w);
    txn_wops_pack(w, txid, coord, fab_incarnation(node_fabric(srv(2))), o, 1);
    REQUIRE(!w->err);
}

static void txid_bytes(uint8_t b[8], uint64_t txid)
{
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(txid >> (8 * i));
}

/* A raw client connection, with the client secret. */
static int raw_client(struct raw *r, unsigned node)
{
    struct raw_opts o = {.src_node = FAB_NODE_CLIENT, .dst_node = FAB_NODE_ANY,
                         .timeout_ms = 5000, .secret_file = tenv_client_secret_file()};
    return raw_dial(r, "127.0.0.1", C.ports[node], &o);
}

static int raw_call(struct raw *r, uint64_t id, uint16_t type, const void *p, size_t len)
{
    if (raw_send_rpc(r, id, type, p, (uint32_t)len)) return RDKV_EUNAVAILABLE;
    int32_t st;
    size_t n;
    uint8_t out[64];
    int rc = raw_rpc_reply(r, id, &st, out, sizeof out, &n);
    return rc ? rc : st;
}

static int node_call(struct fab_ctx *c, uint16_t to, uint16_t type, const void *p, size_t len)
{
    struct fab_buf resp = {0};
    int rc = fab_rpc_call(c, to, type, p, len, &resp, RPC_NS);
    fab_buf_free(&resp);
    return rc;
}

static void value_is(rdkv_session *s, const char *key, const char *want)
{
    char buf[64];
    size_t n = 0;
    CHECK_EQ(tc_get1(s, key, buf, sizeof buf, &n), 0);
    CHECK(n == strlen(want) && !memcmp(buf, want, n));
}

static void forged_2pc(void)
{
    REQUIRE(tc_start(&C, 3, NULL) == 0);
    rdkv_session *s;
    REQUIRE(tc_connect(&C, 0, NULL, &s) == 0);
    /* K lives on node 2 */
    char k[32];
    key_on(2, "ab2pc:k", k, sizeof k);
    REQUIRE(tc_put1(s, k, "orig", 4) == 0);
    rptr row;
    REQUIRE(store_lookup(txn_env_store(node_txn(srv(2))), k, (uint32_t)strlen(k), &row) == 0);

    /* Session A's transaction locks K exclusively (its first operation makes K's owner, node
     * 2, its coordinator: the lock is held by node 2's own cohort) */
    rdkv_session *a;
    REQUIRE(tc_connect(&C, 0, NULL, &a) == 0);
    rdkv_txn *t;
    REQUIRE(rdkv_txn_begin(a, &t) == 0);
    const void *v;
    size_t vl;
    REQUIRE(rdkv_txn_get_for_update(t, k, strlen(k), &v, &vl) == 0);
    CHECK(vl == 4 && !memcmp(v, "orig", 4));

    struct wop o = {.kind = WOP_UPDATE, .row = row, .key = (const uint8_t *)k,
                    .klen = (uint32_t)strlen(k), .val = (const uint8_t *)"forged", .vlen = 6};
    unsigned refused = 0, sent = 0;

    /* 1. a raw client connection: every 2PC frame naming coordinator 0 is refused */
    struct raw r;
    REQUIRE(raw_client(&r, 2) == 0);
    uint64_t id = 1;
    for (uint32_t tok = 0; tok < 16; tok++) {
        o.lock_tok = tok;
        struct pack_w w;
        wops(&w, FORGED_TXID(0, tok), 0, &o);
        CHECK(raw_call(&r, id++, TXN_RPC_APPLY, w.p, w.len) != 0);
        CHECK(raw_call(&r, id++, TXN_RPC_PREPARE, w.p, w.len) != 0);
        pack_w_free(&w);
        uint8_t b[8];
        txid_bytes(b, FORGED_TXID(0, tok));
        CHECK(raw_call(&r, id++, TXN_RPC_COMMIT, b, 8) != 0);
        CHECK(raw_call(&r, id++, TXN_RPC_ABORT, b, 8) != 0);
        sent += 4;
    }
    raw_close(&r);

    /* 2. a real node (node 1) sending frames of a transaction node 0 coordinates: refused */
    struct fab_ctx *n1;
    REQUIRE(fab_ctx_create(node_fabric(srv(1)), &n1) == 0);
    for (uint32_t tok = 0; tok < 16; tok++) {
        o.lock_tok = tok;
        struct pack_w w;
        wops(&w, FORGED_TXID(0, 100 + tok), 0, &o); /* claims coordinator 0 */
        CHECK_EQ(node_call(n1, 2, TXN_RPC_APPLY, w.p, w.len), RDKV_EPERM);
        CHECK_EQ(node_call(n1, 2, TXN_RPC_PREPARE, w.p, w.len), RDKV_EPERM);
        pack_w_free(&w);
        wops(&w, FORGED_TXID(0, 200 + tok), 1, &o); /* names itself, with node 0's txid */
        CHECK_EQ(node_call(n1, 2, TXN_RPC_APPLY, w.p, w.len), RDKV_EPERM);
        pack_w_free(&w);
        uint8_t b[8];
        txid_bytes(b, FORGED_TXID(0, tok));
        CHECK_EQ(node_call(n1, 2, TXN_RPC_COMMIT, b, 8), RDKV_EPERM);
        CHECK_EQ(node_call(n1, 2, TXN_RPC_ABORT, b, 8), RDKV_EPERM);
        uint8_t rb[9];
        memcpy(rb, b, 8);
        rb[8] = TXN_RESOLVE_ABORT;
        CHECK_EQ(node_call(n1, 2, TXN_RPC_RESOLVE, rb, 9), RDKV_EPERM);
        sent += 6;
        refused += 6;
    }

    /* 3. node 1 as the coordinator it names, for K, whose lock it does not hold: the lock
     * check refuses every token it may guess */
    struct txn_fence_stats f0, f1;
    stats(2, &f0);
    for (uint32_t tok = 0; tok < 64; tok++) {
        o.lock_tok = tok;
        struct pack_w w;
        wops(&w, FORGED_TXID(1, 300 + tok), 1, &o);
        CHECK_EQ(node_call(n1, 2, TXN_RPC_APPLY, w.p, w.len), RDKV_EABORTED);
        pack_w_free(&w);
    }
    stats(2, &f1);
    CHECK(f1.refused >= f0.refused + 64);
    CHECK_EQ(f1.prepared, 0);

    /* the session holding the lock still reads its own value; it commits its write */
    REQUIRE(rdkv_txn_get(t, k, strlen(k), &v, &vl) == 0);
    CHECK(vl == 4 && !memcmp(v, "orig", 4));
    CHECK_EQ(rdkv_txn_put(t, k, strlen(k), "mine", 4), 0);
    CHECK_EQ(rdkv_txn_commit(t), 0);
    rdkv_txn_free(t);
    value_is(s, k, "mine");

    /* 4. K unlocked: an APPLY from node 1 still needs node 1's hold, which it has not */
    for (uint32_t tok = 0; tok < 64; tok++) {
        o.lock_tok = tok;
        struct pack_w w;
        wops(&w, FORGED_TXID(1, 400 + tok), 1, &o);
        CHECK_EQ(node_call(n1, 2, TXN_RPC_APPLY, w.p, w.len), RDKV_EABORTED);
        pack_w_free(&w);
    }
    value_is(s, k, "mine");
    fprintf(stderr, "  %u forged 2PC frames sent, all refused; %s keeps its session's value\n",
            sent + 128, k);
    (void)refused;

    /* control: transactions over all three partitions commit and read back */
    for (unsigned i = 0; i < 20; i++) {
        char ks[3][32];
        for (unsigned p = 0; p < 3; p++) {
            char pre[32];
            snprintf(pre, sizeof pre, "ab2pc:c%u:", i);
            key_on(p, pre, ks[p], sizeof ks[p]);
        }
        int rc;
        unsigned tries = 0;
        do {
            rdkv_txn *x;
            REQUIRE(rdkv_txn_begin(s, &x) == 0);
            rc = 0;
            for (unsigned p = 0; p < 3 && !rc; p++) rc = rdkv_txn_put(x, ks[p], strlen(ks[p]), "v", 1);
            if (!rc) rc = rdkv_txn_commit(x);
            rdkv_txn_free(x);
        } while (rdkv_status_retryable(rc) && ++tries < 20);
        CHECK_EQ(rc, 0);
        for (unsigned p = 0; p < 3; p++) value_is(s, ks[p], "v");
    }
    fab_ctx_destroy(n1);
    rdkv_session_close(a);
    rdkv_session_close(s);
    tc_stop(&C);
}

/* ------------------------------------------------------------------------------------------ */

#define PREP_MAX (2u << 20) /* --prepared-max: 1 MiB from one coordinator */
#define BIG (200u << 10)

/* The key of forged PREPARE i: one of node 2's. */
static void prep_key(unsigned i, char *out, size_t cap)
{
    char pre[32];
    snprintf(pre, sizeof pre, "ab2pc:prep%u:", i);
    key_on(2, pre, out, cap);
}

static void prepared_bounded(void)
{
    /* (the in-doubt query comes 5 s after a PREPARE: long after the few sent here to fill the
     * cap, so that none is dropped before the cap is reached) */
    const char *extra[] = {"--prepared-max", "2M", "--indoubt-after", "5s", NULL};
    REQUIRE(tc_start(&C, 3, extra) == 0);
    rdkv_session *s;
    REQUIRE(tc_connect(&C, 0, NULL, &s) == 0);
    /* node 1, as a coordinator that prepares and never decides (it crashed, or lies): it takes
     * the point lock {key} at node 2 that an insert's fence asks for, sends the PREPARE, lets
     * the lock go and forgets the transaction */
    struct fabric *f1 = node_fabric(srv(1));
    struct fab_ctx *c1;
    REQUIRE(fab_ctx_create(f1, &c1) == 0);
    struct lock_cfg lc;
    lock_cfg_init(&lc);
    struct lock_thread lt;
    REQUIRE(lock_thread_init(&lt, c1, &lc) == 0);
    uint8_t *big = malloc(BIG);
    REQUIRE(big != NULL);
    memset(big, 'p', BIG);
    unsigned kept = 0, busy = 0, seq = 0;
    struct txn_fence_stats st;
    for (unsigned i = 0; i < 16 && !busy; i++) {
        char k[32];
        prep_key(i, k, sizeof k);
        struct range_handle h;
        range_handle_init(&h, &lt, range_algo_find(RANGE_LOCK_DEFAULT), 2, TXN_RANGE_SPACE, 0, 0);
        range_handle_keys(&h, k, (uint32_t)strlen(k), k, (uint32_t)strlen(k),
                          RANGE_K_END | RANGE_K_INCL);
        h.owner = FORGED_TXID(1, seq + 1);
        REQUIRE(range_acquire(&h, LOCK_EXCLUSIVE, clock_now_ns() + RPC_NS) == 0);
        struct wop o = {.kind = WOP_INSERT, .key = (const uint8_t *)k, .klen = (uint32_t)strlen(k),
                        .val = big, .vlen = BIG, .range_tok = h.token};
        struct pack_w w;
        wops(&w, FORGED_TXID(1, ++seq), 1, &o);
        int rc = node_call(c1, 2, TXN_RPC_PREPARE, w.p, w.len);
        pack_w_free(&w);
        range_release(&h);
        if (rc == 0) kept++;
        else {
            CHECK_EQ(rc, RDKV_EBUSY);
            busy++;
        }
    }
    /* real puts keep working meanwhile, big ones included, on every node */
    for (unsigned i = 0; i < 24; i++) {
        char rk[32];
        snprintf(rk, sizeof rk, "ab2pc:real%u", i);
        CHECK_EQ(tc_put1(s, rk, big, BIG), 0);
    }
    stats(2, &st);
    fprintf(stderr, "  %u PREPAREs of %u KiB kept (%llu bytes), then refused as busy\n", kept,
            BIG >> 10, (unsigned long long)st.prepared_bytes);
    CHECK_EQ(busy, 1);
    CHECK(kept >= 1);
    CHECK(st.prepared_bytes <= PREP_MAX / 2); /* one coordinator's share */
    CHECK(st.prepared_refused >= 1);
    /* an operator sees them in the node's status (exactly, unless the in-doubt thread moved
     * them in between) */
    struct txn_fence_stats s1, s2;
    stats(2, &s1);
    char *js = node_status_json(srv(2)), want[96];
    stats(2, &s2);
    REQUIRE(js != NULL);
    snprintf(want, sizeof want, "\"prepared\":{\"kept\":%llu,\"bytes\":%llu,",
             (unsigned long long)s1.prepared, (unsigned long long)s1.prepared_bytes);
    if (s1.prepared == s2.prepared && s1.prepared_bytes == s2.prepared_bytes)
        CHECK(strstr(js, want) != NULL);
    else
        CHECK(strstr(js, "\"prepared\":{\"kept\":") != NULL);
    free(js);
    /* the participant asks node 1, which knows none of them: all dropped (bounded poll) */
    int64_t until = clock_now_ns() + 30 * NS_PER_S;
    do {
        stats(2, &st);
        if (st.prepared == 0) break;
        clock_sleep_ns(20 * NS_PER_MS);
    } while (clock_now_ns() < until);
    CHECK_EQ(st.prepared, 0);
    CHECK_EQ(st.prepared_bytes, 0);
    CHECK(st.indoubt_dropped >= kept);
    CHECK_EQ(st.indoubt_committed, 0);
    /* none of them was installed; and a PREPARE is taken again now */
    for (unsigned i = 0; i < kept; i++) {
        char k[32];
        prep_key(i, k, sizeof k);
        char buf[8];
        size_t n;
        CHECK_EQ(tc_get1(s, k, buf, sizeof buf, &n), RDKV_ENOTFOUND);
    }
    {
        char k[32];
        key_on(2, "ab2pc:again", k, sizeof k);
        struct range_handle h;
        range_handle_init(&h, &lt, range_algo_find(RANGE_LOCK_DEFAULT), 2, TXN_RANGE_SPACE, 0, 0);
        range_handle_keys(&h, k, (uint32_t)strlen(k), k, (uint32_t)strlen(k),
                          RANGE_K_END | RANGE_K_INCL);
        h.owner = FORGED_TXID(1, seq + 1);
        REQUIRE(range_acquire(&h, LOCK_EXCLUSIVE, clock_now_ns() + RPC_NS) == 0);
        struct wop o = {.kind = WOP_INSERT, .key = (const uint8_t *)k, .klen = (uint32_t)strlen(k),
                        .val = big, .vlen = BIG, .range_tok = h.token};
        struct pack_w w;
        uint64_t txid = FORGED_TXID(1, ++seq);
        wops(&w, txid, 1, &o);
        CHECK_EQ(node_call(c1, 2, TXN_RPC_PREPARE, w.p, w.len), 0);
        pack_w_free(&w);
        /* its coordinator aborts it (node 0 may not) */
        uint8_t b[8];
        txid_bytes(b, txid);
        struct fab_ctx *c0;
        REQUIRE(fab_ctx_create(node_fabric(srv(0)), &c0) == 0);
        CHECK_EQ(node_call(c0, 2, TXN_RPC_ABORT, b, 8), RDKV_EPERM);
        stats(2, &st);
        CHECK_EQ(st.prepared, 1);
        CHECK_EQ(node_call(c1, 2, TXN_RPC_ABORT, b, 8), 0);
        stats(2, &st);
        CHECK_EQ(st.prepared, 0);
        fab_ctx_destroy(c0);
        range_release(&h);
    }
    /* real transactions still commit on node 2 */
    char k2[32];
    key_on(2, "ab2pc:after", k2, sizeof k2);
    CHECK_EQ(tc_put1(s, k2, "ok", 2), 0);
    value_is(s, k2, "ok");
    free(big);
    lock_thread_fini(&lt);
    fab_ctx_destroy(c1);
    rdkv_session_close(s);
    tc_stop(&C);
}

static const struct test_case cases[] = {
    {"forged_2pc", forged_2pc},
    {"prepared_bounded", prepared_bounded},
};

int main(int argc, char **argv)
{
    return tenv_main(argc, argv, "2PC abuse (issue 17 rows 3, 4)", cases,
                     sizeof cases / sizeof cases[0]);
}
