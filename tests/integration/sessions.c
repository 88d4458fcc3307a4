/* Remote sessions (server/session.c) and what they cost, on a 3-node cluster:
 *
 * round_trips: the requests a remote session sends, counted on its client context -- one per
 *   one-shot operation (rdkv_get, rdkv_put, rdkv_delete, rdkv_patch, a one-batch rdkv_scan),
 *   n + 1 for an interactive transaction of n operations (its BEGIN rides on the first), none
 *   for an empty one -- and the fabric round trips an embedded one-shot read costs its thread:
 *   none for a key of its own node (CPU atomics and loads), and a fixed number for a key of
 *   another node.
 * batched: rdkv_txn_get_many reads keys of every node in one request (its BEGIN with it), and
 *   a put of a row the transaction holds for update goes with the next request: a transfer of
 *   read-for-update, two puts and a commit costs two requests; a read after a deferred put sees
 *   it, a scan too, an abort drops it, a put of a key not held goes at once, and a deferred put
 *   that crosses --txn-max-ops fails the next call with RDKV_ETOOBIG; embedded sessions give the
 *   same answers.
 * snapshot: one-shot reads of another node's row taken without its lock never see a row torn by
 *   a writer on the row's node (values of one repeated byte, rewritten in a loop while they are
 *   read), some of them do take that path (one round trip), and a read meets a writer that
 *   holds the row: it then waits for the lock (and gives up with RDKV_EABORTED at the lock
 *   timeout) rather than read past it.
 * patch: rdkv_patch on remote and embedded sessions, keys of every node.
 * many_sessions: a node with --max-sessions N serves N sessions opened over one connection,
 *   refuses the next with RDKV_EBUSY (and says so), answers a kvctl-style one-shot read on a
 *   session opened meanwhile, and serves again once sessions are closed. */
#include "tests/harness.h"
#include "tests/testenv.h"
#include "tests/txncluster.h"

#include "client/embed.h"
#include "server/proto.h"

#include "common/clock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An embedded one-shot read of another node's key, location cached and nobody writing it: one
 * chain READs the lock line's words, the row and the words again, and no lock is taken
 * (docs/transactions.md, "Reads without the lock"). */
#define EMBEDDED_REMOTE_READ_RTS 1

static void key_on(struct tcluster *c, unsigned node, const char *p, char *out, size_t cap);

static uint64_t rpcs(rdkv_session *s) { return rdkv_session_fab_counters(s)->rpcs; }
static uint64_t rts(rdkv_session *s) { return rdkv_session_fab_counters(s)->round_trips; }

/* A key of node `node`'s partition, with the prefix p. */
static void key_on(struct tcluster *c, unsigned node, const char *p, char *out, size_t cap)
{
    for (unsigned i = 0;; i++) {
        snprintf(out, cap, "%s%u", p, i);
        if (tc_partition(c, out, strlen(out)) == node) return;
    }
}

static void round_trips(void)
{
    static struct tcluster c;
    REQUIRE(tc_start(&c, 3, NULL) == 0);
    rdkv_session *s;
    REQUIRE(tc_connect(&c, 0, NULL, &s) == 0);
    const void *v;
    size_t vl;
    /* a one-shot operation goes to its key's owner: the first one to each node opens the
     * session there (one request more, once) */
    for (unsigned node = 0; node < 3; node++) {
        char key[32];
        key_on(&c, node, "rt:warm", key, sizeof key);
        uint64_t w0 = rpcs(s);
        CHECK_EQ(rdkv_get(s, key, strlen(key), &v, &vl), RDKV_ENOTFOUND);
        CHECK_EQ(rpcs(s) - w0, node == 0 ? 1u : 2u);
    }
    uint64_t r0 = rpcs(s);
    /* one-shot operations: one request each */
    CHECK_EQ(rdkv_put(s, "rt:a", 4, "1", 1), 0);
    CHECK_EQ(rpcs(s) - r0, 1);
    r0 = rpcs(s);
    CHECK_EQ(rdkv_get(s, "rt:a", 4, &v, &vl), 0);
    CHECK(vl == 1 && !memcmp(v, "1", 1));
    CHECK_EQ(rpcs(s) - r0, 1);
    r0 = rpcs(s);
    CHECK_EQ(rdkv_get(s, "rt:absent", 9, &v, &vl), RDKV_ENOTFOUND);
    CHECK_EQ(rpcs(s) - r0, 1);
    r0 = rpcs(s);
    CHECK_EQ(rdkv_put(s, "rt:b", 4, "2", 1), 0);
    CHECK_EQ(rdkv_delete(s, "rt:b", 4), 0);
    CHECK_EQ(rdkv_delete(s, "rt:b", 4), RDKV_ENOTFOUND);
    CHECK_EQ(rpcs(s) - r0, 3);
    r0 = rpcs(s);
    CHECK_EQ(rdkv_put(s, "rt:p", 4, "abcdef", 6), 0);
    CHECK_EQ(rdkv_patch(s, "rt:p", 4, 2, "XY", 2, &v, &vl), 0); /* a read-modify-write */
    CHECK(vl == 6 && !memcmp(v, "abcdef", 6));
    CHECK_EQ(rpcs(s) - r0, 2);
    CHECK_EQ(rdkv_delete(s, "rt:p", 4), 0);
    r0 = rpcs(s);
    rdkv_iter *it;
    CHECK_EQ(rdkv_scan(s, "rt:", 3, "rt;", 3, 0, &it), 0);
    const void *k;
    size_t kl;
    unsigned rows = 0;
    int rc;
    while ((rc = rdkv_iter_next(it, &k, &kl, &v, &vl)) == 1) rows++;
    CHECK_EQ(rc, 0);
    rdkv_iter_close(it);
    CHECK_EQ(rows, 1);
    CHECK_EQ(rpcs(s) - r0, 1); /* the one batch, and the commit with it */
    /* interactive transactions: n operations and the commit, n + 1 requests */
    for (unsigned n = 0; n <= 4; n++) {
        r0 = rpcs(s);
        rdkv_txn *t;
        REQUIRE(rdkv_txn_begin(s, &t) == 0);
        for (unsigned i = 0; i < n; i++) {
            char key[16];
            snprintf(key, sizeof key, "rt:%u", i);
            if (i % 2) CHECK_EQ(rdkv_txn_put(t, key, strlen(key), "x", 1), 0);
            else CHECK((rc = rdkv_txn_get(t, key, strlen(key), &v, &vl)) == 0 || rc == RDKV_ENOTFOUND);
        }
        CHECK_EQ(rdkv_txn_commit(t), 0);
        rdkv_txn_free(t);
        CHECK_EQ(rpcs(s) - r0, n ? n + 1 : 0);
    }
    /* a retried transaction: its abort rides on the next BEGIN when the node failed it */
    rdkv_session_close(s);

    /* embedded one-shot reads: the fabric round trips of the thread */
    rdkv_session *e;
    REQUIRE(rdkv_session_open(c.node[0], NULL, &e) == 0);
    char local[32], remote[32];
    key_on(&c, 0, "rt:l", local, sizeof local);
    key_on(&c, 1, "rt:r", remote, sizeof remote);
    CHECK_EQ(rdkv_put(e, local, strlen(local), "L", 1), 0);
    CHECK_EQ(rdkv_put(e, remote, strlen(remote), "R", 1), 0);
    CHECK_EQ(rdkv_get(e, remote, strlen(remote), &v, &vl), 0); /* warms the location cache */
    uint64_t t0 = rts(e);
    CHECK_EQ(rdkv_get(e, local, strlen(local), &v, &vl), 0);
    CHECK(vl == 1 && !memcmp(v, "L", 1));
    CHECK_EQ(rts(e) - t0, 0);
    t0 = rts(e);
    CHECK_EQ(rdkv_get(e, remote, strlen(remote), &v, &vl), 0);
    CHECK(vl == 1 && !memcmp(v, "R", 1));
    uint64_t remote_rts = rts(e) - t0;
    fprintf(stderr, "  embedded one-shot read of another node's key: %llu round trips\n",
            (unsigned long long)remote_rts);
    CHECK_EQ(remote_rts, EMBEDDED_REMOTE_READ_RTS);
    rdkv_session_close(e);
    tc_stop(&c);
}

/* The value of key by a one-shot read, as a string ("" when absent). */
static const char *val_of(rdkv_session *s, const char *key)
{
    static char buf[64];
    const void *v;
    size_t vl;
    int rc = rdkv_get(s, key, strlen(key), &v, &vl);
    if (rc || vl >= sizeof buf) return "";
    memcpy(buf, v, vl);
    buf[vl] = 0;
    return buf;
}

/* get_many of keys k[0..n) on t: 0 and the values as strings in out ("-" when absent). */
static int get_many_str(rdkv_txn *t, unsigned n, char (*k)[32], bool upd, char (*out)[32])
{
    const void *keys[8], *vals[8];
    size_t kl[8], vl[8];
    int st[8];
    for (unsigned i = 0; i < n; i++) {
        keys[i] = k[i];
        kl[i] = strlen(k[i]);
    }
    int rc = rdkv_txn_get_many(t, n, keys, kl, upd, vals, vl, st);
    for (unsigned i = 0; i < n && !rc; i++) {
        if (st[i] == RDKV_ENOTFOUND) snprintf(out[i], 32, "-");
        else snprintf(out[i], 32, "%.*s", (int)vl[i], (const char *)vals[i]);
    }
    return rc;
}

/* The batched calls on session s (remote: counted in requests). */
static void batched_on(rdkv_session *s, struct tcluster *c, bool remote, const char *tag)
{
    char k[4][32], got[4][32];
    for (unsigned i = 0; i < 3; i++) {
        char p[16];
        snprintf(p, sizeof p, "%s%u:", tag, i);
        key_on(c, i, p, k[i], sizeof k[i]);
        CHECK_EQ(rdkv_put(s, k[i], strlen(k[i]), "100", 3), 0);
    }
    snprintf(k[3], sizeof k[3], "%s:absent", tag);
    /* a transfer: both rows read for update in one request, the writes with the commit */
    uint64_t r0 = rpcs(s);
    rdkv_txn *t;
    REQUIRE(rdkv_txn_begin(s, &t) == 0);
    CHECK_EQ(get_many_str(t, 4, k, true, got), 0);
    CHECK(!strcmp(got[0], "100") && !strcmp(got[1], "100") && !strcmp(got[2], "100") &&
          !strcmp(got[3], "-"));
    if (remote) CHECK_EQ(rpcs(s) - r0, 1);
    CHECK_EQ(rdkv_txn_put(t, k[0], strlen(k[0]), "90", 2), 0);
    CHECK_EQ(rdkv_txn_put(t, k[1], strlen(k[1]), "110", 3), 0);
    if (remote) CHECK_EQ(rpcs(s) - r0, 1); /* deferred: rows held for update */
    CHECK_EQ(rdkv_txn_commit(t), 0);
    rdkv_txn_free(t);
    if (remote) CHECK_EQ(rpcs(s) - r0, 2);
    CHECK(!strcmp(val_of(s, k[0]), "90") && !strcmp(val_of(s, k[1]), "110"));

    /* a read after a deferred put sees it (both go in one request); so does a scan */
    REQUIRE(rdkv_txn_begin(s, &t) == 0);
    const void *v;
    size_t vl;
    CHECK_EQ(rdkv_txn_get_for_update(t, k[2], strlen(k[2]), &v, &vl), 0);
    CHECK_EQ(rdkv_txn_put(t, k[2], strlen(k[2]), "7", 1), 0);
    r0 = rpcs(s);
    CHECK_EQ(rdkv_txn_get(t, k[2], strlen(k[2]), &v, &vl), 0);
    CHECK(vl == 1 && !memcmp(v, "7", 1));
    if (remote) CHECK_EQ(rpcs(s) - r0, 1);
    CHECK_EQ(rdkv_txn_put(t, k[2], strlen(k[2]), "8", 1), 0);
    rdkv_iter *it;
    CHECK_EQ(rdkv_txn_scan(t, k[2], strlen(k[2]), NULL, 0, 1, &it), 0);
    const void *sk;
    size_t skl;
    CHECK_EQ(rdkv_iter_next(it, &sk, &skl, &v, &vl), 1);
    CHECK(skl == strlen(k[2]) && vl == 1 && !memcmp(v, "8", 1));
    rdkv_iter_close(it);
    /* a put of a key not held is sent at once */
    r0 = rpcs(s);
    CHECK_EQ(rdkv_txn_put(t, k[3], strlen(k[3]), "new", 3), 0);
    if (remote) CHECK_EQ(rpcs(s) - r0, 1);
    CHECK_EQ(rdkv_txn_commit(t), 0);
    rdkv_txn_free(t);
    CHECK(!strcmp(val_of(s, k[2]), "8") && !strcmp(val_of(s, k[3]), "new"));

    /* an abort drops a deferred put */
    REQUIRE(rdkv_txn_begin(s, &t) == 0);
    CHECK_EQ(get_many_str(t, 2, k, true, got), 0);
    CHECK_EQ(rdkv_txn_put(t, k[0], strlen(k[0]), "0", 1), 0);
    rdkv_txn_abort(t);
    rdkv_txn_free(t);
    CHECK(!strcmp(val_of(s, k[0]), "90"));
    /* a shared get_many locks shared: another session reads the rows meanwhile */
    REQUIRE(rdkv_txn_begin(s, &t) == 0);
    CHECK_EQ(get_many_str(t, 3, k, false, got), 0);
    CHECK(!strcmp(got[0], "90") && !strcmp(got[1], "110") && !strcmp(got[2], "8"));
    CHECK_EQ(rdkv_txn_commit(t), 0);
    rdkv_txn_free(t);
    for (unsigned i = 0; i < 4; i++) CHECK_EQ(rdkv_delete(s, k[i], strlen(k[i])), 0);
}

static void batched(void)
{
    static struct tcluster c;
    const char *extra[] = {"--txn-max-ops", "6", NULL};
    REQUIRE(tc_start(&c, 3, extra) == 0);
    rdkv_session *s;
    REQUIRE(tc_connect(&c, 0, NULL, &s) == 0);
    batched_on(s, &c, true, "bm");
    /* a deferred put past the node's --txn-max-ops: the next call answers RDKV_ETOOBIG, and
     * nothing of the transaction happened */
    char k[32];
    key_on(&c, 0, "cap:", k, sizeof k);
    CHECK_EQ(rdkv_put(s, k, strlen(k), "1", 1), 0);
    rdkv_txn *t;
    REQUIRE(rdkv_txn_begin(s, &t) == 0);
    const void *v;
    size_t vl;
    CHECK_EQ(rdkv_txn_get_for_update(t, k, strlen(k), &v, &vl), 0);
    int rc = 0;
    for (unsigned i = 0; i < 8 && !rc; i++) rc = rdkv_txn_put(t, k, strlen(k), "2", 1);
    CHECK_EQ(rc, 0); /* every one deferred */
    CHECK_EQ(rdkv_txn_commit(t), RDKV_ETOOBIG);
    rdkv_txn_free(t);
    CHECK(!strcmp(val_of(s, k), "1"));
    CHECK_EQ(rdkv_delete(s, k, strlen(k)), 0);
    rdkv_session_close(s);
    rdkv_session *e;
    REQUIRE(rdkv_session_open(c.node[1], NULL, &e) == 0);
    batched_on(e, &c, false, "be");
    rdkv_session_close(e);
    tc_stop(&c);
}

#define SNAP_VLEN 2000u
#define SNAP_READS 4000u

struct snap_writer {
    rdkv_node *n;
    const char *key;
    _Atomic bool stop;
    unsigned writes;
    int rc;
};

/* Rewrites the key with values of one repeated byte until told to stop (bounded: 200,000). */
static void *snap_write(void *arg)
{
    struct snap_writer *sw = arg;
    rdkv_session *s;
    if ((sw->rc = rdkv_session_open(sw->n, NULL, &s))) return NULL;
    static uint8_t v[SNAP_VLEN];
    for (unsigned i = 0; !atomic_load(&sw->stop) && i < 200000 && !sw->rc; i++) {
        memset(v, 'a' + (int)(i % 26), sizeof v);
        sw->rc = rdkv_put(s, sw->key, strlen(sw->key), v, sizeof v);
        sw->writes++;
    }
    rdkv_session_close(s);
    return NULL;
}

static void snapshot(void)
{
    static struct tcluster c;
    REQUIRE(tc_start(&c, 2, NULL) == 0);
    char key[32];
    key_on(&c, 1, "snap:", key, sizeof key);
    rdkv_session *r;
    rdkv_options o;
    rdkv_options_init(&o);
    o.lock_timeout_ms = 2;
    o.max_retries = 1;
    REQUIRE(rdkv_session_open(c.node[0], &o, &r) == 0);
    static uint8_t v0[SNAP_VLEN];
    memset(v0, 'a', sizeof v0);
    CHECK_EQ(rdkv_put(r, key, strlen(key), v0, sizeof v0), 0);
    const void *v;
    size_t vl;
    CHECK_EQ(rdkv_get(r, key, strlen(key), &v, &vl), 0); /* its location, cached */
    struct snap_writer sw = {.n = c.node[1], .key = key};
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, snap_write, &sw) == 0);
    unsigned torn = 0, one_rt = 0, reads = 0, other = 0;
    for (unsigned i = 0; i < SNAP_READS; i++) {
        uint64_t t0 = rts(r);
        int rc = rdkv_get(r, key, strlen(key), &v, &vl);
        if (rc) {
            other++; /* (a read that met the writer's lock at every try) */
            continue;
        }
        reads++;
        if (rts(r) - t0 == 1) one_rt++;
        const uint8_t *b = v;
        bool ok = vl == SNAP_VLEN;
        for (size_t j = 1; ok && j < vl; j++) ok = b[j] == b[0];
        if (!ok) torn++;
    }
    atomic_store(&sw.stop, true);
    pthread_join(th, NULL);
    fprintf(stderr, "  %u reads during %u writes: %u in one round trip, %u torn; %u gave up\n",
            reads, sw.writes, one_rt, torn, other);
    CHECK_EQ(sw.rc, 0);
    CHECK_EQ(torn, 0);
    CHECK(one_rt > 0);
    CHECK(reads > 0);

    /* a writer holds the row: the read waits for the lock instead of reading past it */
    rdkv_session *w;
    REQUIRE(rdkv_session_open(c.node[1], NULL, &w) == 0);
    rdkv_txn *t;
    REQUIRE(rdkv_txn_begin(w, &t) == 0);
    CHECK_EQ(rdkv_txn_get_for_update(t, key, strlen(key), &v, &vl), 0);
    CHECK_EQ(rdkv_get(r, key, strlen(key), &v, &vl), RDKV_EABORTED);
    rdkv_txn_abort(t);
    rdkv_txn_free(t);
    CHECK_EQ(rdkv_get(r, key, strlen(key), &v, &vl), 0);
    rdkv_session_close(w);
    rdkv_session_close(r);
    tc_stop(&c);
}

/* rdkv_patch on embedded and remote sessions, on keys of every node: the bytes land at the
 * offset (the value growing past its end), the old value comes back when asked, an absent key
 * or an offset past the end changes nothing. */
static void patch_session(rdkv_session *s, struct tcluster *c, const char *tag)
{
    for (unsigned node = 0; node < 3; node++) {
        char key[32];
        key_on(c, node, tag, key, sizeof key);
        size_t kl = strlen(key), vl;
        const void *v;
        CHECK_EQ(rdkv_patch(s, key, kl, 0, "x", 1, NULL, NULL), RDKV_ENOTFOUND);
        CHECK_EQ(rdkv_get(s, key, kl, &v, &vl), RDKV_ENOTFOUND);
        CHECK_EQ(rdkv_put(s, key, kl, "hello world", 11), 0);
        CHECK_EQ(rdkv_patch(s, key, kl, 6, "there", 5, NULL, NULL), 0);
        REQUIRE(rdkv_get(s, key, kl, &v, &vl) == 0);
        CHECK(vl == 11 && !memcmp(v, "hello there", 11));
        CHECK_EQ(rdkv_patch(s, key, kl, 11, "!!", 2, &v, &vl), 0); /* grows; the old comes back */
        CHECK(vl == 11 && !memcmp(v, "hello there", 11));
        CHECK_EQ(rdkv_patch(s, key, kl, 14, "?", 1, NULL, NULL), RDKV_EINVAL); /* past the end */
        CHECK_EQ(rdkv_patch(s, key, kl, 0, "", 0, &v, &vl), 0); /* an empty patch: a locked read */
        CHECK(vl == 13 && !memcmp(v, "hello there!!", 13));
        REQUIRE(rdkv_get(s, key, kl, &v, &vl) == 0);
        CHECK(vl == 13 && !memcmp(v, "hello there!!", 13));
        /* inside an interactive transaction, the one-shot operation is refused */
        rdkv_txn *t;
        REQUIRE(rdkv_txn_begin(s, &t) == 0);
        CHECK_EQ(rdkv_patch(s, key, kl, 0, "H", 1, NULL, NULL), RDKV_EBUSY);
        rdkv_txn_free(t);
    }
}

static void patch(void)
{
    static struct tcluster c;
    REQUIRE(tc_start(&c, 3, NULL) == 0);
    rdkv_session *s;
    REQUIRE(tc_connect(&c, 0, NULL, &s) == 0);
    patch_session(s, &c, "pr:");
    rdkv_session_close(s);
    REQUIRE(rdkv_session_open(c.node[1], NULL, &s) == 0);
    patch_session(s, &c, "pe:");
    rdkv_session_close(s);
    tc_stop(&c);
}

/* ------------------------------------------------------------------------------------------ */

#define NSESS 10000u

static void many_sessions(void)
{
    static struct tcluster c;
    char max[16];
    snprintf(max, sizeof max, "%u", NSESS + 1);
    const char *extra[] = {"--max-sessions", max, "--sessions-per-conn", max, NULL};
    REQUIRE(tc_start(&c, 1, extra) == 0);
    /* a raw client: sessions are opened over its one connection */
    struct fab_opts fo;
    fab_opts_init(&fo);
    struct cluster_config cc;
    const char *hosts[1] = {"127.0.0.1"};
    REQUIRE(cluster_config_make(&cc, 1, hosts, c.ports) == 0);
    fo.cluster = &cc;
    fo.node = FAB_NODE_CLIENT;
    fo.transport = FAB_SOFT;
    fo.endpoints_only = true;
    fo.rpc_threads = 1;
    char err[256];
    struct fabric *f;
    REQUIRE(fab_open(&fo, &f, err, sizeof err) == 0);
    struct fab_ctx *fc;
    REQUIRE(fab_ctx_create(f, &fc) == 0);
    struct fab_buf resp = {0};
    struct ses_id *sids = calloc(NSESS, sizeof *sids);
    REQUIRE(sids != NULL);
    unsigned opened = 0;
    int64_t t0 = clock_now_ns();
    for (; opened < NSESS; opened++)
        if (ses_raw_open(fc, 0, &resp, &sids[opened])) break;
    CHECK_EQ(opened, NSESS);
    fprintf(stderr, "  %u sessions opened in %.2f s\n", opened,
            (double)(clock_now_ns() - t0) / 1e9);
    /* one more session, as kvctl would open it: it still answers */
    rdkv_session *s;
    REQUIRE(tc_connect(&c, 0, NULL, &s) == 0);
    CHECK_EQ(rdkv_put(s, "ms:k", 4, "v", 1), 0);
    const void *v;
    size_t vl;
    CHECK_EQ(rdkv_get(s, "ms:k", 4, &v, &vl), 0);
    CHECK(vl == 1 && !memcmp(v, "v", 1));
    /* the limit: refused, with "busy" */
    struct ses_id extra_sid;
    CHECK_EQ(ses_raw_open(fc, 0, &resp, &extra_sid), RDKV_EBUSY);
    rdkv_session *s2;
    CHECK_EQ(tc_connect(&c, 0, NULL, &s2), RDKV_EBUSY);
    /* a closed session is gone, and its place serves another */
    CHECK_EQ(ses_raw_close(fc, 0, &resp, &sids[0]), 0);
    CHECK_EQ(ses_raw_close(fc, 0, &resp, &sids[0]), RDKV_ESESSION);
    REQUIRE(tc_connect(&c, 0, NULL, &s2) == 0);
    CHECK_EQ(rdkv_get(s2, "ms:k", 4, &v, &vl), 0);
    rdkv_session_close(s2);
    rdkv_session_close(s);
    unsigned closed = 1;
    for (unsigned i = 1; i < opened; i++)
        if (ses_raw_close(fc, 0, &resp, &sids[i]) == 0) closed++;
    CHECK_EQ(closed, opened);
    free(sids);
    fab_buf_free(&resp);
    fab_ctx_destroy(fc);
    fab_close(f);
    cluster_config_free(&cc);
    tc_stop(&c);
}

static const struct test_case cases[] = {
    {"round_trips", round_trips},
    {"batched", batched},
    {"snapshot", snapshot},
    {"patch", patch},
    {"many_sessions", many_sessions},
};

int main(int argc, char **argv)
{
    return tenv_main(argc, argv, "remote sessions", cases, sizeof cases / sizeof cases[0]);
}
