/* Abuse, rows 5 and 10 of issue 17: sessions belong to their connection, and transactions have
 * a size cap. A 3-node cluster on 127.0.0.1 (in this process); attackers use raw connections.
 *   sessions_bound: another connection naming a session's id gets RDKV_ESESSION for every op
 *     (GET, PUT, COMMIT, ABORT, CLOSE), and the owner's transaction goes on and commits its own
 *     value; session ids are 128 random bits (no two share their first 8 bytes, consecutive ones
 *     are far apart); a connection holds at most --sessions-per-conn sessions (RDKV_EBUSY beyond,
 *     another connection still opens one); a session ends when its connection closes: the
 *     exclusive lock its open transaction held is free again (the idle-transaction abort, half of
 *     a 60 s lease, is far beyond the test's bound), and its id is unknown.
 *   txn_caps: a transaction past --txn-max-ops or --txn-max-bytes fails with RDKV_ETOOBIG at the
 *     operation that crosses the cap (not retryable), remote and embedded alike, and its locks
 *     are free at once: a no-wait transaction writes its first key right after. Control:
 *     transactions under the caps commit.
 * Every loop is bounded in count and time; nothing asserts on timing. */
#include "tests/harness.h"
#include "tests/integration/abuse/raw.h"
#include "tests/testenv.h"
#include "tests/txncluster.h"

#include "common/clock.h"
#include "common/pack.h"
#include "server/proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct tcluster C;
static uint64_t rpc_id;

static int raw_client(struct raw *r, unsigned node)
{
    struct raw_opts o = {.src_node = FAB_NODE_CLIENT, .dst_node = FAB_NODE_ANY,
                         .timeout_ms = 10000, .secret_file = tenv_client_secret_file()};
    return raw_dial(r, "127.0.0.1", C.ports[node], &o);
}

/* One session request over a raw connection: the session's answer status (u32 first), or the
 * RPC's / the link's. The answer's bytes after the status into out (up to cap). */
static int ses(struct raw *r, const void *req, size_t len, uint8_t *out, size_t cap)
{
    uint64_t id = ++rpc_id;
    if (raw_send_rpc(r, id, KV_RPC_SESSION, req, (uint32_t)len)) return RDKV_EUNAVAILABLE;
    int32_t st;
    size_t n;
    uint8_t buf[256];
    int rc = raw_rpc_reply(r, id, &st, buf, sizeof buf, &n);
    if (rc) return rc;
    if (st) return st;
    if (n < 4) return RDKV_EPROTO;
    if (out && n > 4) memcpy(out, buf + 4, n - 4 < cap ? n - 4 : cap);
    return (int32_t)pack_get_u32le(buf);
}

static int ses_open(struct raw *r, struct ses_id *sid)
{
    uint8_t req[SES_OPEN_LEN], out[SES_ID_LEN];
    int rc = ses(r, req, ses_open_request(req), out, sizeof out);
    if (!rc) memcpy(sid->b, out, SES_ID_LEN);
    return rc;
}

/* A request of session sid: op, then the key and value when given. */
static int ses_op(struct raw *r, const struct ses_id *sid, uint8_t op, const char *k,
                  const char *v, uint8_t *out, size_t cap)
{
    struct pack_w w;
    pack_w_init(&w);
    uint8_t *d = pack_w_room(&w, SES_ID_LEN);
    if (d) memcpy(d, sid->b, SES_ID_LEN);
    pack_u8(&w, op);
    if ((op & SES_OP_MASK) == SES_GET) pack_u8(&w, 0);
    if (k) {
        pack_u32(&w, (uint32_t)strlen(k));
        uint8_t *p = pack_w_room(&w, strlen(k));
        if (p) memcpy(p, k, strlen(k));
    }
    if (v) {
        pack_u32(&w, (uint32_t)strlen(v));
        uint8_t *p = pack_w_room(&w, strlen(v));
        if (p) memcpy(p, v, strlen(v));
    }
    int rc = w.err ? RDKV_ENOMEM : ses(r, w.p, w.len, out, cap);
    pack_w_free(&w);
    return rc;
}

static uint64_t head8(const struct ses_id *sid)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | sid->b[i];
    return v;
}

static void value_is(rdkv_session *s, const char *key, const char *want)
{
    char buf[64];
    size_t n = 0;
    CHECK_EQ(tc_get1(s, key, buf, sizeof buf, &n), 0);
    CHECK(n == strlen(want) && !memcmp(buf, want, n));
}

/* A no-wait remote session: a lock not free at once aborts (no waiting, no retry here). */
static rdkv_session *nowait_session(unsigned coord)
{
    rdkv_options o;
    rdkv_options_init(&o);
    o.conflict = RDKV_CONFLICT_NO_WAIT;
    o.lock_timeout_ms = 1;
    rdkv_session *s;
    return tc_connect(&C, coord, &o, &s) == 0 ? s : NULL;
}

/* One attempt at key = val in one transaction: its status. */
static int put_once(rdkv_session *s, const char *key, const char *val)
{
    rdkv_txn *t;
    int rc = rdkv_txn_begin(s, &t);
    if (rc) return rc;
    rc = rdkv_txn_put(t, key, strlen(key), val, strlen(val));
    if (!rc) rc = rdkv_txn_commit(t);
    rdkv_txn_free(t);
    return rc;
}

#define PER_CONN 8

static void sessions_bound(void)
{
    const char *extra[] = {"--sessions-per-conn", "8", "--lease", "60s", NULL};
    REQUIRE(tc_start(&C, 3, extra) == 0);
    rdkv_session *s;
    REQUIRE(tc_connect(&C, 0, NULL, &s) == 0);
    uint8_t out[64];

    /* the owner A opens a transaction writing K */
    struct raw a, b;
    REQUIRE(raw_client(&a, 0) == 0);
    REQUIRE(raw_client(&b, 0) == 0);
    struct ses_id sa;
    REQUIRE(ses_open(&a, &sa) == 0);
    CHECK_EQ(ses_op(&a, &sa, SES_PUT | SES_F_BEGIN, "abses:k", "a1", NULL, 0), 0);
    /* B names A's session: no such session, whatever it asks */
    CHECK_EQ(ses_op(&b, &sa, SES_GET, "abses:k", NULL, out, sizeof out), RDKV_ESESSION);
    CHECK_EQ(ses_op(&b, &sa, SES_PUT, "abses:k", "b1", NULL, 0), RDKV_ESESSION);
    CHECK_EQ(ses_op(&b, &sa, SES_ABORT, NULL, NULL, NULL, 0), RDKV_ESESSION);
    CHECK_EQ(ses_op(&b, &sa, SES_COMMIT, NULL, NULL, NULL, 0), RDKV_ESESSION);
    CHECK_EQ(ses_op(&b, &sa, SES_CLOSE, NULL, NULL, NULL, 0), RDKV_ESESSION);
    CHECK_EQ(ses_op(&b, &sa, SES_GET | SES_F_BEGIN | SES_F_COMMIT, "abses:k", NULL, out,
                    sizeof out), RDKV_ESESSION);
    /* ... and A's transaction is untouched: it reads its own write and commits it */
    CHECK_EQ(ses_op(&a, &sa, SES_GET, "abses:k", NULL, out, sizeof out), 0);
    CHECK(pack_get_u32le(out) == 2 && !memcmp(out + 4, "a1", 2));
    CHECK_EQ(ses_op(&a, &sa, SES_COMMIT, NULL, NULL, NULL, 0), 0);
    value_is(s, "abses:k", "a1");
    CHECK_EQ(ses_op(&a, &sa, SES_CLOSE, NULL, NULL, NULL, 0), 0);
    CHECK_EQ(ses_op(&a, &sa, SES_CLOSE, NULL, NULL, NULL, 0), RDKV_ESESSION);

    /* ids: 128 random bits; and at most PER_CONN sessions per connection */
    struct raw c[4];
    struct ses_id ids[4 * PER_CONN];
    unsigned nids = 0;
    for (unsigned i = 0; i < 4; i++) {
        REQUIRE(raw_client(&c[i], 1) == 0);
        for (unsigned j = 0; j < PER_CONN; j++) CHECK_EQ(ses_open(&c[i], &ids[nids++]), 0);
        struct ses_id extra_id;
        CHECK_EQ(ses_open(&c[i], &extra_id), RDKV_EBUSY); /* this connection's quota */
    }
    unsigned near = 0, same_head = 0, top_differs = 0;
    for (unsigned i = 0; i < nids; i++) {
        if (i && ids[i].b[7] != ids[0].b[7]) top_differs++;
        if (i) {
            uint64_t x = head8(&ids[i]), y = head8(&ids[i - 1]);
            if ((x > y ? x - y : y - x) < (1ull << 40)) near++;
        }
        for (unsigned j = 0; j < i; j++)
            if (head8(&ids[i]) == head8(&ids[j])) same_head++;
    }
    CHECK_EQ(same_head, 0);
    CHECK_EQ(near, 0);
    CHECK(top_differs > 0);
    fprintf(stderr, "  %u session ids: no two share their first 8 bytes, none near the last; "
            "the %u-th on one connection is refused as busy\n", nids, PER_CONN + 1);
    /* another connection still opens one; a closed connection's sessions are gone */
    struct raw d;
    REQUIRE(raw_client(&d, 1) == 0);
    struct ses_id sd;
    CHECK_EQ(ses_open(&d, &sd), 0);
    CHECK_EQ(ses_op(&d, &ids[0], SES_ABORT, NULL, NULL, NULL, 0), RDKV_ESESSION);
    for (unsigned i = 0; i < 4; i++) raw_close(&c[i]);

    /* a session ends with its connection: F's open transaction holds K2's exclusive lock */
    struct raw f;
    REQUIRE(raw_client(&f, 0) == 0);
    struct ses_id sf;
    REQUIRE(ses_open(&f, &sf) == 0);
    CHECK_EQ(ses_op(&f, &sf, SES_PUT | SES_F_BEGIN, "abses:k2", "f1", NULL, 0), 0);
    rdkv_session *nw = nowait_session(0);
    REQUIRE(nw != NULL);
    CHECK(put_once(nw, "abses:k2", "n0") != 0); /* control: the lock is held */
    raw_close(&f);
    /* the node sees the close and aborts the transaction (poll, bounded) */
    int rc = -1;
    int64_t until = clock_now_ns() + 15 * NS_PER_S;
    for (unsigned tries = 0; tries < 1000 && clock_now_ns() < until; tries++) {
        if ((rc = put_once(nw, "abses:k2", "n1")) == 0) break;
        clock_sleep_ns(10 * NS_PER_MS);
    }
    CHECK_EQ(rc, 0);
    value_is(s, "abses:k2", "n1");
    CHECK_EQ(ses_op(&d, &sf, SES_COMMIT, NULL, NULL, NULL, 0), RDKV_ESESSION);
    raw_close(&d);
    raw_close(&a);
    raw_close(&b);
    rdkv_session_close(nw);
    rdkv_session_close(s);
    tc_stop(&C);
}

#define MAX_OPS 100

static void txn_caps(void)
{
    const char *extra[] = {"--txn-max-ops", "100", "--txn-max-bytes", "64K", NULL};
    REQUIRE(tc_start(&C, 3, extra) == 0);
    CHECK(!rdkv_status_retryable(RDKV_ETOOBIG));
    rdkv_session *rem, *emb;
    REQUIRE(tc_connect(&C, 0, NULL, &rem) == 0);
    REQUIRE(rdkv_session_open(C.node[1], NULL, &emb) == 0);
    rdkv_session *both[2] = {rem, emb};
    for (unsigned k = 0; k < 2; k++) {
        const char *what = k ? "embedded" : "remote";
        rdkv_txn *t;
        /* control: a transaction at the cap commits */
        REQUIRE(rdkv_txn_begin(both[k], &t) == 0);
        int rc = 0;
        for (unsigned i = 0; i < MAX_OPS && !rc; i++) {
            char key[32];
            snprintf(key, sizeof key, "abcap:%u:ok%u", k, i);
            rc = rdkv_txn_put(t, key, strlen(key), "v", 1);
        }
        CHECK_EQ(rc, 0);
        CHECK_EQ(rdkv_txn_commit(t), 0);
        rdkv_txn_free(t);
        /* one operation more: refused at that operation */
        REQUIRE(rdkv_txn_begin(both[k], &t) == 0);
        unsigned i = 0;
        for (; i < 10 * MAX_OPS; i++) {
            char key[32];
            snprintf(key, sizeof key, "abcap:%u:big%u", k, i);
            if ((rc = rdkv_txn_put(t, key, strlen(key), "v", 1))) break;
        }
        CHECK_EQ(rc, RDKV_ETOOBIG);
        CHECK_EQ(i, MAX_OPS);
        fprintf(stderr, "  %s: operation %u of a transaction refused: %s\n", what, i + 1,
                rdkv_status_name(rc));
        /* its locks are free now, before the client ends it: a no-wait write of its first
         * key succeeds at once */
        rdkv_session *nw = nowait_session(2);
        REQUIRE(nw != NULL);
        CHECK_EQ(put_once(nw, k ? "abcap:1:big0" : "abcap:0:big0", "free"), 0);
        CHECK(rdkv_txn_commit(t) != 0);
        rdkv_txn_free(t);
        value_is(nw, k ? "abcap:1:big0" : "abcap:0:big0", "free");
        /* bytes: two values of 40 KiB pass the 64 KiB cap at the second */
        static char v40[40 << 10];
        memset(v40, 'b', sizeof v40);
        REQUIRE(rdkv_txn_begin(both[k], &t) == 0);
        CHECK_EQ(rdkv_txn_put(t, "abcap:b1", 8, v40, sizeof v40), 0);
        CHECK_EQ(rdkv_txn_put(t, "abcap:b2", 8, v40, sizeof v40), RDKV_ETOOBIG);
        CHECK_EQ(put_once(nw, "abcap:b1", "free"), 0);
        rdkv_txn_abort(t);
        rdkv_txn_free(t);
        rdkv_session_close(nw);
    }
    rdkv_session_close(emb);
    rdkv_session_close(rem);
    tc_stop(&C);
}

static const struct test_case cases[] = {
    {"sessions_bound", sessions_bound},
    {"txn_caps", txn_caps},
};

int main(int argc, char **argv)
{
    return tenv_main(argc, argv, "session abuse (issue 17 rows 5, 10)", cases,
                     sizeof cases / sizeof cases[0]);
}
