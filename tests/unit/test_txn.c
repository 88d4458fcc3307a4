/* Transactions through the public API (include/rdkv.h) on an in-process 3-node cluster, with
 * embedded sessions (the calling thread inside a node) and remote ones (TCP to a coordinating
 * node): reads of missing keys, a transaction seeing its own buffered writes and deletes, abort
 * discarding and commit publishing, empty keys and values, the size limits (ETOOBIG, nothing
 * stored, the session still usable), large values on local and remote partitions, scans (limit,
 * open end, bytewise order across partitions, pages, own writes, several threads at once), lock
 * conflicts ending in RDKV_EABORTED within the session's lock timeout, absent keys and scanned
 * ranges locked against inserts, nothing left locked by an aborted transaction whose session
 * then idles nor by an idle writer, re-inserting a deleted key whose old row was recycled, the
 * retry helpers, the state machine (EBUSY, EINVAL after the end) and the cluster status.
 * Conflicting operations run on their own threads; every wait is bounded. */
#include "tests/harness.h"
#include "tests/testenv.h"
#include "tests/txncluster.h"

#include "common/clock.h"
#include "storage/store.h"
#include "common/rng.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

/* Every case runs on its own fresh cluster. */
static struct tcluster C;

static bool up(void)
{
    return tc_start(&C, 3, NULL) == 0;
}

/* A session of each kind: embedded in node 0, or remote coordinated by node 1. */
enum { EMB, REM, NKIND };
static const char *const kind_name[NKIND] = {"embedded", "remote"};

static int open_kind(int kind, const rdkv_options *o, rdkv_session **s)
{
    if (kind == EMB) return rdkv_session_open(C.node[0], o, s);
    return tc_connect(&C, 1, o, s);
}

/* A key with the given prefix owned by node `part` (found by trying suffixes). */
static void key_on(char *buf, size_t cap, const char *prefix, unsigned part)
{
    for (unsigned i = 0;; i++) {
        snprintf(buf, cap, "%s%u", prefix, i);
        if (tc_partition(&C, buf, strlen(buf)) == part) return;
    }
}

static bool val_is(const void *v, size_t vl, const char *want)
{
    return vl == strlen(want) && !memcmp(v, want, vl);
}

/* Deletes keys that a round left behind (each present), in one transaction. */
static void delete_keys(rdkv_session *s, const char *const *keys, size_t n)
{
    rdkv_txn *t;
    REQUIRE(rdkv_txn_begin(s, &t) == 0);
    for (size_t i = 0; i < n; i++) CHECK_EQ(rdkv_txn_delete(t, keys[i], strlen(keys[i])), 0);
    CHECK_EQ(rdkv_txn_commit(t), 0);
    rdkv_txn_free(t);
}
#define DELETE_KEYS(s, ...)                                                                        \
    delete_keys(s, (const char *const[]){__VA_ARGS__},                                           \
                sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

/* ------------------------------------------------------------------------------------------ */

/* get missing; a transaction sees its own put and delete; abort discards; commit publishes (to
 * the other kind of session too); delete of a missing key; empty key and value. */
static void basics(void)
{
    REQUIRE(up());
    rdkv_session *s[NKIND];
    REQUIRE(open_kind(EMB, NULL, &s[EMB]) == 0);
    REQUIRE(open_kind(REM, NULL, &s[REM]) == 0);
    for (int k = 0; k < NKIND; k++) {
        rdkv_session *a = s[k], *b = s[1 - k];
        char key[32];
        const void *v;
        size_t vl;
        rdkv_txn *t;
        for (unsigned part = 0; part < 3; part++) {
            char prefix[16];
            snprintf(prefix, sizeof prefix, "b%d:", k);
            key_on(key, sizeof key, prefix, part);
            REQUIRE(rdkv_txn_begin(a, &t) == 0);
            CHECK_EQ(rdkv_txn_get(t, key, strlen(key), &v, &vl), RDKV_ENOTFOUND);
            CHECK_EQ(rdkv_txn_get_for_update(t, key, strlen(key), &v, &vl), RDKV_ENOTFOUND);
            CHECK_EQ(rdkv_txn_delete(t, key, strlen(key)), RDKV_ENOTFOUND);
            CHECK_EQ(rdkv_txn_put(t, key, strlen(key), "one", 3), 0);
            CHECK_EQ(rdkv_txn_get(t, key, strlen(key), &v, &vl), 0);
            CHECK(val_is(v, vl, "one"));
            CHECK_EQ(rdkv_txn_put(t, key, strlen(key), "two", 3), 0);
            CHECK_EQ(rdkv_txn_get_for_update(t, key, strlen(key), &v, &vl), 0);
            CHECK(val_is(v, vl, "two"));
            CHECK_EQ(rdkv_txn_delete(t, key, strlen(key)), 0);
            CHECK_EQ(rdkv_txn_get(t, key, strlen(key), &v, &vl), RDKV_ENOTFOUND);
            CHECK_EQ(rdkv_txn_delete(t, key, strlen(key)), RDKV_ENOTFOUND);
            CHECK_EQ(rdkv_txn_put(t, key, strlen(key), "three", 5), 0);
            CHECK_EQ(rdkv_txn_get(t, key, strlen(key), &v, &vl), 0);
            CHECK(val_is(v, vl, "three"));
            rdkv_txn_abort(t); /* discards everything */
            rdkv_txn_abort(t); /* safe on an ended transaction */
            rdkv_txn_free(t);
            char buf[64];
            size_t bl;
            CHECK_EQ(tc_get1(a, key, buf, sizeof buf, &bl), RDKV_ENOTFOUND);
            CHECK_EQ(tc_get1(b, key, buf, sizeof buf, &bl), RDKV_ENOTFOUND);

            /* commit publishes, to both kinds of session */
            REQUIRE(rdkv_txn_begin(a, &t) == 0);
            CHECK_EQ(rdkv_txn_put(t, key, strlen(key), "kept", 4), 0);
            CHECK_EQ(rdkv_txn_commit(t), 0);
            rdkv_txn_free(t);
            CHECK_EQ(tc_get1(a, key, buf, sizeof buf, &bl), 0);
            CHECK(val_is(buf, bl, "kept"));
            CHECK_EQ(tc_get1(b, key, buf, sizeof buf, &bl), 0);
            CHECK(val_is(buf, bl, "kept"));

            /* an existing key: overwrite then delete in one transaction deletes it */
            REQUIRE(rdkv_txn_begin(a, &t) == 0);
            CHECK_EQ(rdkv_txn_get(t, key, strlen(key), &v, &vl), 0);
            CHECK(val_is(v, vl, "kept"));
            CHECK_EQ(rdkv_txn_put(t, key, strlen(key), "over", 4), 0); /* upgrade: unchanged */
            CHECK_EQ(rdkv_txn_delete(t, key, strlen(key)), 0);
            CHECK_EQ(rdkv_txn_get(t, key, strlen(key), &v, &vl), RDKV_ENOTFOUND);
            CHECK_EQ(rdkv_txn_commit(t), 0);
            rdkv_txn_free(t);
            CHECK_EQ(tc_get1(b, key, buf, sizeof buf, &bl), RDKV_ENOTFOUND);
        }
        /* the empty key and the empty value */
        REQUIRE(rdkv_txn_begin(a, &t) == 0);
        CHECK_EQ(rdkv_txn_put(t, "", 0, k ? "remote-empty" : "embedded-empty", k ? 12 : 14), 0);
        CHECK_EQ(rdkv_txn_put(t, "ev", 2, "", 0), 0);
        CHECK_EQ(rdkv_txn_get(t, "ev", 2, &v, &vl), 0);
        CHECK_EQ(vl, 0);
        CHECK_EQ(rdkv_txn_commit(t), 0);
        rdkv_txn_free(t);
        REQUIRE(rdkv_txn_begin(b, &t) == 0);
        CHECK_EQ(rdkv_txn_get(t, "", 0, &v, &vl), 0);
        CHECK(val_is(v, vl, k ? "remote-empty" : "embedded-empty"));
        CHECK_EQ(rdkv_txn_get(t, "ev", 2, &v, &vl), 0);
        CHECK_EQ(vl, 0);
        CHECK(v != NULL);
        CHECK_EQ(rdkv_txn_delete(t, "", 0), 0);
        CHECK_EQ(rdkv_txn_delete(t, "ev", 2), 0);
        CHECK_EQ(rdkv_txn_commit(t), 0);
        rdkv_txn_free(t);
        fprintf(stderr, "  %s: get/put/delete/abort/commit ok on all 3 partitions\n", kind_name[k]);
    }
    rdkv_session_close(s[EMB]);
    rdkv_session_close(s[REM]);
    tc_stop(&C);
}

/* Keys of 4097 bytes and values of 1 MiB + 1 are refused with ETOOBIG, store nothing and leave
 * the transaction and session usable; the limits themselves (4096, 1 MiB) work. */
static void limits(void)
{
    REQUIRE(up());
    size_t big = (1u << 20) + 1;
    uint8_t *val = malloc(big);
    char *key = malloc(4097);
    REQUIRE(val && key);
    for (size_t i = 0; i < big; i++) val[i] = (uint8_t)(i * 7 + 1);
    memset(key, 'K', 4097);
    for (int k = 0; k < NKIND; k++) {
        rdkv_session *s;
        REQUIRE(open_kind(k, NULL, &s) == 0);
        rdkv_txn *t;
        const void *v;
        size_t vl;
        key[0] = (char)('0' + k);
        REQUIRE(rdkv_txn_begin(s, &t) == 0);
        CHECK_EQ(rdkv_txn_put(t, key, 4097, "x", 1), RDKV_ETOOBIG);
        CHECK_EQ(rdkv_txn_get(t, key, 4097, &v, &vl), RDKV_ETOOBIG);
        CHECK_EQ(rdkv_txn_get_for_update(t, key, 4097, &v, &vl), RDKV_ETOOBIG);
        CHECK_EQ(rdkv_txn_delete(t, key, 4097), RDKV_ETOOBIG);
        CHECK_EQ(rdkv_txn_put(t, "bigval", 6, val, big), RDKV_ETOOBIG);
        /* the transaction goes on */
        CHECK_EQ(rdkv_txn_put(t, "after", 5, "ok", 2), 0);
        CHECK_EQ(rdkv_txn_get(t, "bigval", 6, &v, &vl), RDKV_ENOTFOUND);
        CHECK_EQ(rdkv_txn_commit(t), 0);
        rdkv_txn_free(t);
        /* the limits themselves */
        REQUIRE(rdkv_txn_begin(s, &t) == 0);
        CHECK_EQ(rdkv_txn_put(t, key, 4096, "max key", 7), 0);
        CHECK_EQ(rdkv_txn_put(t, "maxval", 6, val, big - 1), 0);
        CHECK_EQ(rdkv_txn_commit(t), 0);
        rdkv_txn_free(t);
        REQUIRE(rdkv_txn_begin(s, &t) == 0);
        CHECK_EQ(rdkv_txn_get(t, "bigval", 6, &v, &vl), RDKV_ENOTFOUND);
        CHECK_EQ(rdkv_txn_get(t, "after", 5, &v, &vl), 0);
        CHECK(val_is(v, vl, "ok"));
        CHECK_EQ(rdkv_txn_get(t, key, 4096, &v, &vl), 0);
        CHECK(val_is(v, vl, "max key"));
        CHECK_EQ(rdkv_txn_get(t, "maxval", 6, &v, &vl), 0);
        CHECK_EQ(vl, big - 1);
        CHECK(vl == big - 1 && !memcmp(v, val, big - 1));
        CHECK_EQ(rdkv_txn_delete(t, key, 4096), 0);
        CHECK_EQ(rdkv_txn_delete(t, "maxval", 6), 0);
        CHECK_EQ(rdkv_txn_delete(t, "after", 5), 0);
        CHECK_EQ(rdkv_txn_commit(t), 0);
        rdkv_txn_free(t);
        rdkv_session_close(s);
        fprintf(stderr, "  %s: limits ok\n", kind_name[k]);
    }
    free(val);
    free(key);
    tc_stop(&C);
}

/* 300 KB values round-trip on keys of every partition, by get and by scan, written by one kind
 * of session and read by both. */
static void large_values(void)
{
    REQUIRE(up());
    rdkv_session *s[NKIND];
    REQUIRE(open_kind(EMB, NULL, &s[EMB]) == 0);
    REQUIRE(open_kind(REM, NULL, &s[REM]) == 0);
    size_t len = 300u << 10;
    uint8_t *val = malloc(len);
    REQUIRE(val);
    for (int k = 0; k < NKIND; k++) {
        char keys[3][32];
        for (unsigned p = 0; p < 3; p++) {
            char prefix[16];
            snprintf(prefix, sizeof prefix, "lv%d:", k);
            key_on(keys[p], sizeof keys[p], prefix, p);
            for (size_t i = 0; i < len; i++) val[i] = (uint8_t)(i * 131 + p * 17 + (size_t)k);
            CHECK_EQ(tc_put1(s[k], keys[p], val, len), 0);
        }
        for (int r = 0; r < NKIND; r++) {
            rdkv_txn *t;
            REQUIRE(rdkv_txn_begin(s[r], &t) == 0);
            for (unsigned p = 0; p < 3; p++) {
                for (size_t i = 0; i < len; i++) val[i] = (uint8_t)(i * 131 + p * 17 + (size_t)k);
                const void *v;
                size_t vl;
                CHECK_EQ(rdkv_txn_get(t, keys[p], strlen(keys[p]), &v, &vl), 0);
                CHECK_EQ(vl, len);
                CHECK(vl == len && !memcmp(v, val, len));
            }
            char b[8], e[8];
            snprintf(b, sizeof b, "lv%d:", k);
            snprintf(e, sizeof e, "lv%d;", k);
            rdkv_iter *it;
            REQUIRE(rdkv_txn_scan(t, b, strlen(b), e, strlen(e), 0, &it) == 0);
            const void *kk, *v;
            size_t kl, vl;
            unsigned rows = 0;
            int rc;
            while ((rc = rdkv_iter_next(it, &kk, &kl, &v, &vl)) == 1) {
                rows++;
                CHECK_EQ(vl, len);
            }
            CHECK_EQ(rc, 0);
            CHECK_EQ(rows, 3);
            rdkv_iter_close(it);
            CHECK_EQ(rdkv_txn_commit(t), 0);
            rdkv_txn_free(t);
        }
        /* overwrite a large value with a small one and back */
        CHECK_EQ(tc_put1(s[k], keys[1], "small", 5), 0);
        char buf[16];
        size_t bl;
        CHECK_EQ(tc_get1(s[1 - k], keys[1], buf, sizeof buf, &bl), 0);
        CHECK(val_is(buf, bl, "small"));
        fprintf(stderr, "  %s writer: 300 KB values ok on all 3 partitions\n", kind_name[k]);
    }
    free(val);
    rdkv_session_close(s[EMB]);
    rdkv_session_close(s[REM]);
    tc_stop(&C);
}

/* ------------------------------------------------------------------------------------------ */
/* Scans. */

static int cmp_bytes(const void *a, size_t al, const void *b, size_t bl)
{
    size_t m = al < bl ? al : bl;
    int c = m ? memcmp(a, b, m) : 0;
    if (c) return c;
    return al < bl ? -1 : al > bl;
}

struct kv {
    char k[40];
    size_t kl;
};

static int kv_cmp(const void *a, const void *b)
{
    const struct kv *x = a, *y = b;
    return cmp_bytes(x->k, x->kl, y->k, y->kl);
}

/* Scans [b, e) (e NULL: open) with limit and compares it with want[0..nwant) (sorted). */
static void scan_expect(rdkv_txn *t, const char *b, size_t bl, const char *e, size_t el,
                        size_t limit, const struct kv *want, size_t nwant, const char *what)
{
    rdkv_iter *it;
    int rc = rdkv_txn_scan(t, b, bl, e, el, limit, &it);
    CHECK_EQ(rc, 0);
    if (rc) return;
    size_t n = 0, bad = 0;
    const void *k, *v;
    size_t kl, vl;
    while ((rc = rdkv_iter_next(it, &k, &kl, &v, &vl)) == 1) {
        if (n >= nwant || cmp_bytes(k, kl, want[n].k, want[n].kl) ||
            !((vl == kl && !memcmp(v, k, kl)) /* every value is its key */ ||
              (vl == 4 && !memcmp(v, "mine", 4)))) {
            if (bad++ < 3)
                fprintf(stderr, "  %s: row %zu: got '%.*s' (value %zu bytes), want '%.*s'\n", what,
                        n, (int)kl, (const char *)k, vl, n < nwant ? (int)want[n].kl : 0,
                        n < nwant ? want[n].k : "");
        }
        n++;
    }
    CHECK_EQ(rc, 0);
    rdkv_iter_close(it);
    if (n != nwant) fprintf(stderr, "  %s: %zu rows, want %zu\n", what, n, nwant);
    CHECK_EQ(n, nwant);
    CHECK_EQ(bad, 0);
}

#define NSCAN 1200 /* more than a scan page (256) per partition and a remote batch (256) */

static void scans(void)
{
    REQUIRE(up());
    static struct kv keys[NSCAN + 16];
    size_t n = 0;
    /* keys sharing their first 8 bytes (one range-lock coordinate), bytes above 0x7f, a NUL,
     * prefixes of each other */
    static const char *const odd[] = {"sc:",           "sc:\x01", "sc:A",         "sc:a",
                                      "sc:aa",         "sc:ab",   "sc:abcdefgh1", "sc:abcdefgh2",
                                      "sc:abcdefgh10", "sc:\x7f", "sc:\x80",      "sc:\xff",
                                      "sc:\xff\xff"};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        keys[n].kl = strlen(odd[i]);
        memcpy(keys[n].k, odd[i], keys[n].kl);
        n++;
    }
    keys[n].kl = 5;
    memcpy(keys[n].k, "sc:\0z", 5);
    n++;
    for (int i = 0; i < NSCAN; i++) {
        keys[n].kl = (size_t)snprintf(keys[n].k, sizeof keys[n].k, "sc:n%05d", (i * 7919) % NSCAN);
        n++;
    }
    unsigned per_part[3] = {0, 0, 0};
    rdkv_session *s[NKIND];
    REQUIRE(open_kind(EMB, NULL, &s[EMB]) == 0);
    REQUIRE(open_kind(REM, NULL, &s[REM]) == 0);
    /* load in a few transactions (value = key) */
    for (size_t i = 0; i < n;) {
        rdkv_txn *t;
        REQUIRE(rdkv_txn_begin(s[EMB], &t) == 0);
        size_t end = i + 200 < n ? i + 200 : n;
        for (size_t j = i; j < end; j++) {
            CHECK_EQ(rdkv_txn_put(t, keys[j].k, keys[j].kl, keys[j].k, keys[j].kl), 0);
            per_part[tc_partition(&C, keys[j].k, keys[j].kl)]++;
        }
        int rc = rdkv_txn_commit(t);
        rdkv_txn_free(t);
        REQUIRE(rc == 0);
        i = end;
    }
    /* neighbours outside the range */
    CHECK_EQ(tc_put1(s[EMB], "sb~", "sb~", 3), 0);
    CHECK_EQ(tc_put1(s[EMB], "sc;", "sc;", 3), 0);
    qsort(keys, n, sizeof keys[0], kv_cmp);
    for (int k = 0; k < NKIND; k++) {
        rdkv_txn *t;
        REQUIRE(rdkv_txn_begin(s[k], &t) == 0);
        scan_expect(t, "sc:", 3, "sc;", 3, 0, keys, n, "all");
        scan_expect(t, "sc:", 3, "sc;", 3, 5, keys, 5, "limit 5");
        scan_expect(t, "sc:", 3, "sc;", 3, 700, keys, 700, "limit 700");
        /* open end: everything from sc: on, then sc; */
        static struct kv open[NSCAN + 17];
        memcpy(open, keys, n * sizeof keys[0]);
        open[n].kl = 3;
        memcpy(open[n].k, "sc;", 3);
        scan_expect(t, "sc:", 3, NULL, 0, 0, open, n + 1, "open end");
        scan_expect(t, "sc:", 3, NULL, 7, 0, open, n + 1, "open end (elen ignored)");
        /* a middle range starting and ending inside a shared coordinate */
        size_t lo = 0, hi = 0;
        while (cmp_bytes(keys[lo].k, keys[lo].kl, "sc:abcdefgh10", 13) < 0) lo++;
        while (cmp_bytes(keys[hi].k, keys[hi].kl, "sc:abcdefgh2", 12) < 0) hi++;
        scan_expect(t, "sc:abcdefgh10", 13, "sc:abcdefgh2", 12, 0, keys + lo, hi - lo, "mid");
        /* empty and inverted ranges */
        scan_expect(t, "sc:zzz", 6, "sc:zzz", 6, 0, NULL, 0, "empty");
        scan_expect(t, "sc;", 3, "sc:", 3, 0, NULL, 0, "inverted");
        /* a scan sees this transaction's own writes and not its deletes */
        CHECK_EQ(rdkv_txn_put(t, "sc:aa", 5, "mine", 4), 0);
        CHECK_EQ(rdkv_txn_put(t, "sc:new", 6, "mine", 4), 0);
        CHECK_EQ(rdkv_txn_delete(t, "sc:ab", 5), 0);
        static struct kv mod[NSCAN + 17];
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            if (keys[i].kl == 5 && !memcmp(keys[i].k, "sc:ab", 5)) continue;
            mod[m++] = keys[i];
        }
        mod[m].kl = 6;
        memcpy(mod[m].k, "sc:new", 6);
        m++;
        qsort(mod, m, sizeof mod[0], kv_cmp);
        scan_expect(t, "sc:", 3, "sc;", 3, 0, mod, m, "own writes");
        rdkv_txn_abort(t);
        rdkv_txn_free(t);
        /* a scan read by a read-only transaction commits */
        REQUIRE(rdkv_txn_begin(s[k], &t) == 0);
        scan_expect(t, "sc:", 3, "sc;", 3, 0, keys, n, "after abort");
        CHECK_EQ(rdkv_txn_commit(t), 0);
        rdkv_txn_free(t);
        fprintf(stderr, "  %s: scans ok (%zu rows: %u/%u/%u by partition)\n", kind_name[k], n,
                per_part[0], per_part[1], per_part[2]);
    }
    CHECK(per_part[0] > 300 && per_part[1] > 300 && per_part[2] > 300);
    rdkv_session_close(s[EMB]);
    rdkv_session_close(s[REM]);
    tc_stop(&C);
}

/* ------------------------------------------------------------------------------------------ */
/* Conflicts: an op run on another thread by a session with a 50 ms lock timeout. The thread
 * reports, ends its transaction, and then stays idle with its session open until it is
 * released (others_release): like an application thread doing something else after an abort.
 * It closes its session once released; others_join waits for that, boundedly. */

enum op { OP_PUT, OP_GET, OP_GET_UPD, OP_DEL, OP_SCAN };

struct other {
    struct other *next;
    pthread_t th;
    int kind;
    enum op op;
    const char *key, *end;
    int rc;       /* of the op */
    int rc_after; /* of a later get of another key in the same transaction */
    int rc_commit;
    int64_t took_ns;
    _Atomic bool done, release, closed;
};
static struct other *pending;

static void *other_main(void *arg)
{
    struct other *o = arg;
    rdkv_options opt;
    rdkv_options_init(&opt);
    opt.lock_timeout_ms = 50;
    rdkv_session *s = NULL;
    o->rc = open_kind(o->kind, &opt, &s);
    rdkv_txn *t;
    if (!o->rc && (o->rc = rdkv_txn_begin(s, &t)) == 0) {
        int64_t t0 = clock_now_ns();
        const void *v, *k;
        size_t vl, kl;
        switch (o->op) {
        case OP_PUT:
            o->rc = rdkv_txn_put(t, o->key, strlen(o->key), "B", 1);
            break;
        case OP_GET:
            o->rc = rdkv_txn_get(t, o->key, strlen(o->key), &v, &vl);
            break;
        case OP_GET_UPD:
            o->rc = rdkv_txn_get_for_update(t, o->key, strlen(o->key), &v, &vl);
            break;
        case OP_DEL:
            o->rc = rdkv_txn_delete(t, o->key, strlen(o->key));
            break;
        case OP_SCAN: {
            rdkv_iter *it;
            o->rc = rdkv_txn_scan(t, o->key, strlen(o->key), o->end, strlen(o->end), 0, &it);
            if (!o->rc) {
                int r;
                while ((r = rdkv_iter_next(it, &k, &kl, &v, &vl)) == 1) {
                }
                o->rc = r;
                rdkv_iter_close(it);
            }
            break;
        }
        }
        o->took_ns = clock_now_ns() - t0;
        o->rc_after = rdkv_txn_get(t, "unrelated", 9, &v, &vl);
        o->rc_commit = rdkv_txn_commit(t);
        rdkv_txn_free(t);
    }
    atomic_store(&o->done, true);
    int64_t give_up = clock_now_ns() + 120 * NS_PER_S;
    while (!atomic_load(&o->release) && clock_now_ns() < give_up) clock_sleep_ns(NS_PER_MS);
    if (s) rdkv_session_close(s);
    atomic_store(&o->closed, true);
    return NULL;
}

/* Fails the whole binary at once: a thread that does not come back cannot be cleaned up. */
static void stuck(const char *what, const struct other *o)
{
    fprintf(stderr, "  FATAL: a %s session's %s of '%s' %s (bounded wait ran out)\n",
            kind_name[o->kind],
            o->op == OP_PUT    ? "put"
            : o->op == OP_SCAN ? "scan"
                               : "op",
            o->key, what);
    fflush(stderr);
    _exit(1);
}

static struct other run_other(int kind, enum op op, const char *key, const char *end)
{
    struct other *o = calloc(1, sizeof *o);
    if (!o) abort();
    o->kind = kind;
    o->op = op;
    o->key = key;
    o->end = end;
    o->rc = o->rc_after = o->rc_commit = 1;
    if (pthread_create(&o->th, NULL, other_main, o)) abort();
    o->next = pending;
    pending = o;
    int64_t give_up = clock_now_ns() + 30 * NS_PER_S;
    while (!atomic_load(&o->done) && clock_now_ns() < give_up) clock_sleep_ns(NS_PER_MS);
    if (!atomic_load(&o->done)) stuck("did not return", o);
    return *o;
}

static void others_release(void)
{
    for (struct other *o = pending; o; o = o->next) atomic_store(&o->release, true);
}

static void others_join(void)
{
    others_release();
    int64_t give_up = clock_now_ns() + 60 * NS_PER_S;
    while (pending) {
        struct other *o = pending;
        while (!atomic_load(&o->closed) && clock_now_ns() < give_up) clock_sleep_ns(NS_PER_MS);
        if (!atomic_load(&o->closed)) stuck("was released but its session did not close", o);
        pthread_join(o->th, NULL);
        pending = o->next;
        free(o);
    }
}

/* A blocked op ends the other transaction: EABORTED, sticky for its later ops and its commit. */
static void expect_blocked(struct other o, const char *what)
{
    if (o.rc != RDKV_EABORTED)
        fprintf(stderr, "  %s: %s (want RDKV_EABORTED)\n", what, rdkv_status_name(o.rc));
    CHECK_EQ(o.rc, RDKV_EABORTED);
    CHECK_EQ(o.rc_after, RDKV_EABORTED);
    CHECK_EQ(o.rc_commit, RDKV_EABORTED);
}

static void expect_free(struct other o, int want, const char *what)
{
    if (o.rc != want)
        fprintf(stderr, "  %s: %s (want %s)\n", what, rdkv_status_name(o.rc),
                rdkv_status_name(want));
    CHECK_EQ(o.rc, want);
    CHECK(o.rc_after == 0 || o.rc_after == RDKV_ENOTFOUND);
    CHECK_EQ(o.rc_commit, 0);
}

/* The holder A ends its transaction with `end` while the others it blocked close their
 * sessions (a closing session passes on the lock tickets it gave up when their turn comes). */
#define HOLDER_ENDS(end)                                                                           \
    do {                                                                                           \
        others_release();                                                                          \
        end;                                                                                       \
        others_join();                                                                             \
    } while (0)

static void conflicts(void)
{
    REQUIRE(up());
    for (int ka = 0; ka < NKIND; ka++)
        for (unsigned part = 0; part < 3; part++) {
            rdkv_session *a;
            REQUIRE(open_kind(ka, NULL, &a) == 0);
            char key[32], key2[32];
            key_on(key, sizeof key, ka ? "cr:" : "ce:", part);
            key_on(key2, sizeof key2, ka ? "cR:" : "cE:", part);
            CHECK_EQ(tc_put1(a, key, "A0", 2), 0);
            int kb = (int)(part % 2); /* the other session: embedded or remote */
            /* A holds key exclusively: B's put, get and delete abort; after A commits, B's
             * op goes through */
            rdkv_txn *t;
            const void *v;
            size_t vl;
            REQUIRE(rdkv_txn_begin(a, &t) == 0);
            CHECK_EQ(rdkv_txn_get_for_update(t, key, strlen(key), &v, &vl), 0);
            struct other o = run_other(kb, OP_PUT, key, NULL);
            expect_blocked(o, "put vs X");
            CHECK(o.took_ns < 10 * NS_PER_S); /* bounded (50 ms asked; generous) */
            int64_t took = o.took_ns;
            expect_blocked(run_other(kb, OP_GET, key, NULL), "get vs X");
            expect_blocked(run_other(kb, OP_DEL, key, NULL), "del vs X");
            CHECK_EQ(rdkv_txn_put(t, key, strlen(key), "A1", 2), 0);
            HOLDER_ENDS(CHECK_EQ(rdkv_txn_commit(t), 0));
            rdkv_txn_free(t);
            expect_free(run_other(kb, OP_GET_UPD, key, NULL), 0, "get after A's commit");
            expect_free(run_other(kb, OP_PUT, key, NULL), 0, "put after A's commit");
            others_join();
            char buf[8];
            size_t bl;
            CHECK_EQ(tc_get1(a, key, buf, sizeof buf, &bl), 0);
            CHECK(val_is(buf, bl, "B"));

            /* a shared hold: other readers share it, writers abort */
            REQUIRE(rdkv_txn_begin(a, &t) == 0);
            CHECK_EQ(rdkv_txn_get(t, key, strlen(key), &v, &vl), 0);
            expect_free(run_other(kb, OP_GET, key, NULL), 0, "get vs S");
            expect_blocked(run_other(kb, OP_PUT, key, NULL), "put vs S");
            expect_blocked(run_other(kb, OP_GET_UPD, key, NULL), "get_for_update vs S");
            /* after A's abort, B gets the key exclusively */
            HOLDER_ENDS(rdkv_txn_abort(t));
            rdkv_txn_free(t);
            expect_free(run_other(kb, OP_GET_UPD, key, NULL), 0, "get_for_update after abort");
            others_join();

            /* an absent key read by A cannot be inserted by B until A ends */
            REQUIRE(rdkv_txn_begin(a, &t) == 0);
            CHECK_EQ(rdkv_txn_get(t, key2, strlen(key2), &v, &vl), RDKV_ENOTFOUND);
            expect_blocked(run_other(kb, OP_PUT, key2, NULL), "insert vs absent read");
            expect_free(run_other(kb, OP_GET, key2, NULL), RDKV_ENOTFOUND, "get vs absent read");
            HOLDER_ENDS(CHECK_EQ(rdkv_txn_commit(t), 0));
            rdkv_txn_free(t);
            expect_free(run_other(kb, OP_PUT, key2, NULL), 0, "insert after absent read");
            others_join();

            /* a key deleted (uncommitted) by A: B can neither read it nor re-insert it */
            REQUIRE(rdkv_txn_begin(a, &t) == 0);
            CHECK_EQ(rdkv_txn_delete(t, key2, strlen(key2)), 0);
            expect_blocked(run_other(kb, OP_GET, key2, NULL), "get vs delete");
            expect_blocked(run_other(kb, OP_PUT, key2, NULL), "put vs delete");
            HOLDER_ENDS(CHECK_EQ(rdkv_txn_commit(t), 0));
            rdkv_txn_free(t);
            expect_free(run_other(kb, OP_GET, key2, NULL), RDKV_ENOTFOUND, "get after delete");
            others_join();
            rdkv_session_close(a);
            fprintf(stderr,
                    "  A %s, B %s, key on node %u: conflicts ok (B aborted after %.1f ms)\n",
                    kind_name[ka], kind_name[kb], part, (double)took / 1e6);
        }
    tc_stop(&C);
}

/* An aborted transaction leaves no lock behind: B's lock wait runs out while A holds the key,
 * B's transaction ends, and B's thread then goes on with something else (its session idle,
 * open). Once A commits, a third transaction C must lock the key at once (within its 50 ms).
 * Every combination of the key's node and B's and C's kinds of session (A is embedded in node
 * 0; remote sessions are coordinated by node 1), so that B and C are in A's cohort of the row
 * lock (the same side of the key's node) or in the other. */
static void abort_leaves_no_lock(void)
{
    REQUIRE(up());
    unsigned bad = 0, runs = 0;
    for (unsigned part = 0; part < 3; part++)
        for (int kb = 0; kb < NKIND; kb++)
            for (int kc = 0; kc < NKIND; kc++) {
                rdkv_session *a;
                REQUIRE(open_kind(EMB, NULL, &a) == 0);
                char key[32];
                char prefix[16];
                snprintf(prefix, sizeof prefix, "nl%d%d:", kb, kc);
                key_on(key, sizeof key, prefix, part);
                CHECK_EQ(tc_put1(a, key, "A0", 2), 0);
                rdkv_txn *t;
                const void *v;
                size_t vl;
                REQUIRE(rdkv_txn_begin(a, &t) == 0);
                CHECK_EQ(rdkv_txn_get_for_update(t, key, strlen(key), &v, &vl), 0);
                expect_blocked(run_other(kb, OP_PUT, key, NULL), "B's put vs X");
                CHECK_EQ(rdkv_txn_commit(t), 0); /* B stays idle, its session open */
                rdkv_txn_free(t);
                struct other c = run_other(kc, OP_GET_UPD, key, NULL);
                runs++;
                if (c.rc) {
                    bad++;
                    fprintf(stderr,
                            "  key on node %u (A embedded on node 0), B %s aborted and idle: "
                            "C %s: get_for_update %s\n",
                            part, kind_name[kb], kind_name[kc], rdkv_status_name(c.rc));
                }
                expect_free(c, 0, "C after A's commit");
                others_join();
                rdkv_session_close(a);
            }
    fprintf(stderr, "  %u of %u combinations found the key still locked\n", bad, runs);
    tc_stop(&C);
}

/* A transaction that inserts (or deletes) two keys of one partition takes two [k, k] range
 * locks there; once it has committed, they must be free even if its session then stays idle:
 * a scan by another session over them must not wait. For both kinds of writer and every
 * partition. */
static void idle_writer_releases_ranges(void)
{
    REQUIRE(up());
    unsigned bad = 0, runs = 0;
    rdkv_options so;
    rdkv_options_init(&so);
    so.lock_timeout_ms = 200;
    rdkv_session *scanner;
    REQUIRE(rdkv_session_open(C.node[2], &so, &scanner) == 0);
    for (int kw = 0; kw < NKIND; kw++)
        for (unsigned part = 0; part < 3; part++)
            for (int del = 0; del < 2; del++) {
                rdkv_session *w;
                REQUIRE(open_kind(kw, NULL, &w) == 0);
                char prefix[16], k1[32], k2[32], b[16], e[16];
                snprintf(prefix, sizeof prefix, "iw%d%u:", kw, part);
                snprintf(b, sizeof b, "iw%d%u:", kw, part);
                snprintf(e, sizeof e, "iw%d%u;", kw, part);
                key_on(k1, sizeof k1, prefix, part);
                for (unsigned i = 0;; i++) { /* a second key of the same partition */
                    snprintf(k2, sizeof k2, "%sx%u", prefix, i);
                    if (tc_partition(&C, k2, strlen(k2)) == part) break;
                }
                rdkv_txn *t;
                REQUIRE(rdkv_txn_begin(w, &t) == 0);
                if (!del) {
                    CHECK_EQ(rdkv_txn_put(t, k1, strlen(k1), "1", 1), 0);
                    CHECK_EQ(rdkv_txn_put(t, k2, strlen(k2), "2", 1), 0);
                } else {
                    CHECK_EQ(tc_put1(scanner, k1, "1", 1), 0);
                    CHECK_EQ(tc_put1(scanner, k2, "2", 1), 0);
                    CHECK_EQ(rdkv_txn_delete(t, k1, strlen(k1)), 0);
                    CHECK_EQ(rdkv_txn_delete(t, k2, strlen(k2)), 0);
                }
                CHECK_EQ(rdkv_txn_commit(t), 0);
                rdkv_txn_free(t);
                /* w stays open and idle */
                REQUIRE(rdkv_txn_begin(scanner, &t) == 0);
                rdkv_iter *it;
                int rc = rdkv_txn_scan(t, b, strlen(b), e, strlen(e), 0, &it);
                unsigned rows = 0;
                if (!rc) {
                    const void *k, *v;
                    size_t kl, vl;
                    while ((rc = rdkv_iter_next(it, &k, &kl, &v, &vl)) == 1) rows++;
                    rdkv_iter_close(it);
                }
                if (!rc) rc = rdkv_txn_commit(t);
                rdkv_txn_free(t);
                runs++;
                if (rc) {
                    bad++;
                    fprintf(stderr,
                            "  %s writer idle after %s 2 keys on node %u: a scan over them: %s\n",
                            kind_name[kw], del ? "deleting" : "inserting", part,
                            rdkv_status_name(rc));
                }
                CHECK_EQ(rc, 0);
                CHECK_EQ(rows, del ? 0 : 2);
                rdkv_session_close(w); /* (closing flushes whatever it still owed) */
                if (!del) {            /* the deleting round starts from the keys present */
                    REQUIRE(rdkv_txn_begin(scanner, &t) == 0);
                    CHECK_EQ(rdkv_txn_delete(t, k1, strlen(k1)), 0);
                    CHECK_EQ(rdkv_txn_delete(t, k2, strlen(k2)), 0);
                    CHECK_EQ(rdkv_txn_commit(t), 0);
                    rdkv_txn_free(t);
                }
            }
    fprintf(stderr, "  %u of %u idle writers left their range locks held\n", bad, runs);
    rdkv_session_close(scanner);
    tc_stop(&C);
}

/* A remote key the session has read (so its worker remembers where the row was) is deleted;
 * new rows of other keys may then reuse that memory. Re-inserting the key in a transaction
 * that holds those other rows (here by reading them) must not wait for its own locks: the
 * remembered location is not the key's any more. Several rounds, so that some reuse happens. */
static void stale_location(void)
{
    REQUIRE(up());
    rdkv_options o;
    rdkv_options_init(&o);
    o.lock_timeout_ms = 200;
    rdkv_session *s;
    REQUIRE(rdkv_session_open(C.node[0], &o, &s) == 0);
    unsigned bad = 0, rounds = 12;
    for (unsigned round = 0; round < rounds; round++) {
        char k[32], others[8][32], prefix[16];
        snprintf(prefix, sizeof prefix, "sl%02u:", round);
        /* all on node 1, all of one length (rows of one size) */
        for (unsigned i = 0;; i++) {
            snprintf(k, sizeof k, "%sk%03u", prefix, i % 1000);
            if (tc_partition(&C, k, strlen(k)) == 1) break;
        }
        for (unsigned i = 0, j = 0; j < 8 && i < 1000; i++) {
            snprintf(others[j], sizeof others[j], "%so%03u", prefix, i);
            if (tc_partition(&C, others[j], strlen(others[j])) == 1) j++;
        }
        CHECK_EQ(tc_put1(s, k, "v", 1), 0);
        char buf[8];
        size_t bl;
        CHECK_EQ(tc_get1(s, k, buf, sizeof buf, &bl), 0); /* its location is remembered */
        rdkv_txn *t;
        REQUIRE(rdkv_txn_begin(s, &t) == 0);
        CHECK_EQ(rdkv_txn_delete(t, k, strlen(k)), 0);
        CHECK_EQ(rdkv_txn_commit(t), 0);
        rdkv_txn_free(t);
        for (int j = 0; j < 8; j++) CHECK_EQ(tc_put1(s, others[j], "v", 1), 0);
        REQUIRE(rdkv_txn_begin(s, &t) == 0);
        const void *v;
        size_t vl;
        for (int j = 0; j < 8; j++)
            CHECK_EQ(rdkv_txn_get(t, others[j], strlen(others[j]), &v, &vl), 0);
        int rc = rdkv_txn_put(t, k, strlen(k), "again", 5);
        if (!rc) rc = rdkv_txn_commit(t);
        rdkv_txn_free(t);
        if (rc) {
            bad++;
            fprintf(stderr, "  round %u: re-inserting %s while holding 8 new rows: %s\n", round, k,
                    rdkv_status_name(rc));
        }
        CHECK_EQ(rc, 0);
    }
    fprintf(stderr, "  %u of %u re-inserts waited for their own transaction\n", bad, rounds);
    rdkv_session_close(s);
    tc_stop(&C);
}

/* Scans that merge the transaction's own writes, run by several threads at once (embedded
 * sessions of different nodes in one process, and remote ones, whose transactions run on their
 * nodes' session threads; each in a range of its own): each must see exactly its own buffered
 * rows, in key order. */
struct ows {
    unsigned node, id;
    int kind;
    unsigned scans, bad;
    int rc;
};

static void *ows_main(void *arg)
{
    struct ows *o = arg;
    rdkv_session *s;
    o->rc = o->kind == EMB ? rdkv_session_open(C.node[o->node], NULL, &s)
                           : tc_connect(&C, o->node, NULL, &s);
    if (o->rc) return NULL;
    char b[16], e[16];
    snprintf(b, sizeof b, "ow%u:", o->id);
    snprintf(e, sizeof e, "ow%u;", o->id);
    int64_t until = clock_now_ns() + (tenv_quick ? 300 : 1000) * NS_PER_MS;
    uint64_t seed = 77 + o->id;
    while (clock_now_ns() < until && !o->rc) {
        rdkv_txn *t;
        if ((o->rc = rdkv_txn_begin(s, &t))) break;
        /* 16 keys in a random order: the scan must sort them */
        unsigned perm[16];
        for (unsigned i = 0; i < 16; i++) perm[i] = i;
        for (unsigned i = 15; i > 0; i--) {
            unsigned j = (unsigned)(rng_next(&seed) % (i + 1)), x = perm[i];
            perm[i] = perm[j];
            perm[j] = x;
        }
        for (unsigned i = 0; i < 16 && !o->rc; i++) {
            char k[24];
            snprintf(k, sizeof k, "ow%u:%02u", o->id, perm[i]);
            o->rc = rdkv_txn_put(t, k, strlen(k), k, strlen(k));
        }
        rdkv_iter *it;
        if (!o->rc && !(o->rc = rdkv_txn_scan(t, b, strlen(b), e, strlen(e), 0, &it))) {
            const void *k, *v;
            size_t kl, vl;
            unsigned n = 0;
            int r;
            while ((r = rdkv_iter_next(it, &k, &kl, &v, &vl)) == 1) {
                char want[24];
                snprintf(want, sizeof want, "ow%u:%02u", o->id, n);
                if (kl != strlen(want) || memcmp(k, want, kl)) o->bad++;
                n++;
            }
            if (r < 0) o->rc = r;
            if (n != 16) o->bad++;
            rdkv_iter_close(it);
            o->scans++;
        }
        rdkv_txn_abort(t);
        rdkv_txn_free(t);
    }
    rdkv_session_close(s);
    return NULL;
}

static void concurrent_own_write_scans(void)
{
    REQUIRE(up());
    struct ows o[4];
    pthread_t th[4];
    for (unsigned i = 0; i < 4; i++) {
        o[i] = (struct ows){.node = i % 3, .id = i, .kind = i < 2 ? EMB : REM};
        REQUIRE(pthread_create(&th[i], NULL, ows_main, &o[i]) == 0);
    }
    unsigned scans = 0, bad = 0;
    for (unsigned i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ(o[i].rc, 0);
        scans += o[i].scans;
        bad += o[i].bad;
    }
    fprintf(stderr,
            "  %u scans over their own 16 writes by 4 sessions (2 embedded, 2 remote), %u "
            "wrong\n",
            scans, bad);
    CHECK_EQ(bad, 0);
    CHECK(scans > 0);
    tc_stop(&C);
}

/* Scans lock their range: inserts and deletes inside abort, outside go through; a scanner's
 * rows cannot be written; and a transaction inserting into the range blocks a scan. */
static void scan_conflicts(void)
{
    REQUIRE(up());
    for (int ka = 0; ka < NKIND; ka++) {
        rdkv_session *a;
        REQUIRE(open_kind(ka, NULL, &a) == 0);
        CHECK_EQ(tc_put1(a, "rg:m", "m", 1), 0);
        int kb = 1 - ka;
        rdkv_txn *t;
        REQUIRE(rdkv_txn_begin(a, &t) == 0);
        rdkv_iter *it;
        REQUIRE(rdkv_txn_scan(t, "rg:", 3, "rg;", 3, 0, &it) == 0);
        const void *k, *v;
        size_t kl, vl;
        unsigned rows = 0;
        while (rdkv_iter_next(it, &k, &kl, &v, &vl) == 1) rows++;
        rdkv_iter_close(it);
        CHECK_EQ(rows, 1);
        /* (reads first: a writer that gave up waiting for rg:m leaves its ticket in the row
         * lock's queue until its turn comes, and a reader arriving after it queues behind it --
         * the row lock lets no reader overtake a writer; locks.md) */
        expect_free(run_other(kb, OP_GET, "rg:m", NULL), 0, "read of a scanned row");
        expect_free(run_other(kb, OP_SCAN, "rg:", "rg;"), 0, "scan vs scan");
        expect_blocked(run_other(kb, OP_PUT, "rg:new", NULL), "insert into a scanned range");
        expect_blocked(run_other(kb, OP_PUT, "rg:m", NULL), "update of a scanned row");
        expect_blocked(run_other(kb, OP_DEL, "rg:m", NULL), "delete in a scanned range");
        expect_free(run_other(kb, OP_PUT, "rh:new", NULL), 0, "insert outside the range");
        HOLDER_ENDS(CHECK_EQ(rdkv_txn_commit(t), 0));
        rdkv_txn_free(t);
        expect_free(run_other(kb, OP_PUT, "rg:new", NULL), 0, "insert after the scan");
        others_join();
        /* the other way: an uncommitted insert blocks a scan over it */
        REQUIRE(rdkv_txn_begin(a, &t) == 0);
        CHECK_EQ(rdkv_txn_put(t, "rg:ins", 6, "i", 1), 0);
        expect_blocked(run_other(kb, OP_SCAN, "rg:", "rg;"), "scan vs insert");
        HOLDER_ENDS(CHECK_EQ(rdkv_txn_commit(t), 0));
        rdkv_txn_free(t);
        expect_free(run_other(kb, OP_SCAN, "rg:", "rg;"), 0, "scan after insert");
        others_join();
        DELETE_KEYS(a, "rg:ins", "rg:new", "rh:new"); /* for the next round */
        rdkv_session_close(a);
        fprintf(stderr, "  A %s, B %s: range locks ok\n", kind_name[ka], kind_name[kb]);
    }
    tc_stop(&C);
}

/* Keys that share their first 8 bytes do not share a lock (the key space is locked on whole
 * keys). Two transactions, in one thread, each insert a different "session:" key of one node
 * and hold it at once, read the same absent neighbour, and one deletes a third such key: all of
 * it goes through and both commit. Their lock timeout is 20 s, so a wrongful wait could only
 * end in RDKV_EABORTED (the holder it would wait for is this same thread). Scans still lock
 * whole keys: with a scan of [session:m, session:n) held, an insert inside it waits (and
 * aborts), an insert of the end key or below the begin does not, though every one of these
 * keys has the same 8-byte coordinate; and a held insert blocks a scan over it, not a scan
 * beside it. */
static void same_prefix_keys(void)
{
    REQUIRE(up());
    rdkv_options lo;
    rdkv_options_init(&lo);
    lo.lock_timeout_ms = 20000;
    unsigned ok = 0;
    for (int ka = 0; ka < NKIND; ka++)
        for (unsigned part = 0; part < 3; part++) {
            int kb = (int)((part + (unsigned)ka) % 2);
            rdkv_session *a, *b;
            REQUIRE(open_kind(ka, &lo, &a) == 0);
            REQUIRE(open_kind(kb, &lo, &b) == 0);
            char k1[32], k2[32], k3[32], kd[32], pa[16], pb[16], pc[16], pd[16];
            snprintf(pa, sizeof pa, "session:a%d", ka);
            snprintf(pb, sizeof pb, "session:b%d", ka);
            snprintf(pc, sizeof pc, "session:c%d", ka);
            snprintf(pd, sizeof pd, "session:d%d", ka);
            key_on(k1, sizeof k1, pa, part);
            key_on(k2, sizeof k2, pb, part);
            key_on(k3, sizeof k3, pc, part);
            key_on(kd, sizeof kd, pd, part);
            CHECK_EQ(tc_put1(a, kd, "D", 1), 0);
            rdkv_txn *ta, *tb;
            const void *v;
            size_t vl;
            REQUIRE(rdkv_txn_begin(a, &ta) == 0);
            REQUIRE(rdkv_txn_begin(b, &tb) == 0);
            CHECK_EQ(rdkv_txn_put(ta, k1, strlen(k1), "A", 1), 0);   /* A holds {k1} X */
            CHECK_EQ(rdkv_txn_get(ta, k3, strlen(k3), &v, &vl), RDKV_ENOTFOUND); /* {k3} S */
            int rc2 = rdkv_txn_put(tb, k2, strlen(k2), "B", 1);       /* {k2} X: no wait */
            int rc3 = rdkv_txn_get(tb, k3, strlen(k3), &v, &vl);      /* {k3} S, shared */
            int rcd = rdkv_txn_delete(tb, kd, strlen(kd));            /* {kd} X */
            CHECK_EQ(rc2, 0);
            CHECK_EQ(rc3, RDKV_ENOTFOUND);
            CHECK_EQ(rcd, 0);
            int ca = rdkv_txn_commit(ta), cb = rdkv_txn_commit(tb);
            CHECK_EQ(ca, 0);
            CHECK_EQ(cb, 0);
            rdkv_txn_free(ta);
            rdkv_txn_free(tb);
            char buf[8];
            size_t bl;
            CHECK_EQ(tc_get1(a, k1, buf, sizeof buf, &bl), 0);
            CHECK(val_is(buf, bl, "A"));
            CHECK_EQ(tc_get1(a, k2, buf, sizeof buf, &bl), 0);
            CHECK(val_is(buf, bl, "B"));
            CHECK_EQ(tc_get1(a, kd, buf, sizeof buf, &bl), RDKV_ENOTFOUND);
            if (!rc2 && rc3 == RDKV_ENOTFOUND && !rcd && !ca && !cb) ok++;
            else
                fprintf(stderr, "  A %s, B %s, node %u: put %s, get %s, delete %s, commits %s %s\n",
                        kind_name[ka], kind_name[kb], part, rdkv_status_name(rc2),
                        rdkv_status_name(rc3), rdkv_status_name(rcd), rdkv_status_name(ca),
                        rdkv_status_name(cb));
            rdkv_session_close(a);
            rdkv_session_close(b);
        }
    fprintf(stderr, "  %u of 6 pairs of same-prefix transactions held their keys at once\n", ok);
    /* scans over same-prefix keys lock whole keys */
    for (int ka = 0; ka < NKIND; ka++) {
        rdkv_session *a;
        REQUIRE(open_kind(ka, NULL, &a) == 0);
        int kb = 1 - ka;
        rdkv_txn *t;
        REQUIRE(rdkv_txn_begin(a, &t) == 0);
        rdkv_iter *it;
        REQUIRE(rdkv_txn_scan(t, "session:m", 9, "session:n", 9, 0, &it) == 0);
        const void *k, *v;
        size_t kl, vl;
        while (rdkv_iter_next(it, &k, &kl, &v, &vl) == 1) {
        }
        rdkv_iter_close(it);
        expect_blocked(run_other(kb, OP_PUT, "session:m5", NULL), "insert inside a scan");
        expect_blocked(run_other(kb, OP_PUT, "session:m", NULL), "insert of a scan's begin");
        expect_free(run_other(kb, OP_PUT, "session:n", NULL), 0, "insert of a scan's end");
        expect_free(run_other(kb, OP_PUT, "session:l9", NULL), 0, "insert below a scan");
        expect_free(run_other(kb, OP_GET, "session:m6", NULL), RDKV_ENOTFOUND,
                    "absent read inside a scan");
        HOLDER_ENDS(CHECK_EQ(rdkv_txn_commit(t), 0));
        rdkv_txn_free(t);
        /* a held insert blocks a scan over it, not one beside it */
        REQUIRE(rdkv_txn_begin(a, &t) == 0);
        CHECK_EQ(rdkv_txn_put(t, "session:m7", 10, "i", 1), 0);
        expect_blocked(run_other(kb, OP_SCAN, "session:m", "session:n"), "scan over an insert");
        expect_free(run_other(kb, OP_SCAN, "session:n", "session:o"), 0, "scan beside an insert");
        expect_free(run_other(kb, OP_SCAN, "session:", "session:m7"), 0,
                    "scan ending at an insert");
        HOLDER_ENDS(CHECK_EQ(rdkv_txn_commit(t), 0));
        rdkv_txn_free(t);
        DELETE_KEYS(a, "session:m7", "session:n", "session:l9"); /* for the next round */
        rdkv_session_close(a);
        fprintf(stderr, "  A %s, B %s: scans over same-prefix keys lock whole keys\n",
                kind_name[ka], kind_name[kb]);
    }
    tc_stop(&C);
}

/* ------------------------------------------------------------------------------------------ */
/* Retrying. */

struct counted {
    unsigned calls, fail_first;
    int status;
};

static int counted_fn(rdkv_txn *t, void *arg)
{
    struct counted *c = arg;
    c->calls++;
    int rc = rdkv_txn_put(t, "rt:k", 4, &c->calls, sizeof c->calls);
    if (rc) return rc;
    return c->calls <= c->fail_first ? c->status : 0;
}

/* run_txn holding on while another thread's transaction holds the key. */
struct waiter {
    int kind;
    _Atomic unsigned attempts;
    int rc;
};

static int waiter_fn(rdkv_txn *t, void *arg)
{
    struct waiter *w = arg;
    atomic_fetch_add(&w->attempts, 1);
    const void *v;
    size_t vl;
    int rc = rdkv_txn_get_for_update(t, "rt:held", 7, &v, &vl);
    if (rc) return rc;
    return rdkv_txn_put(t, "rt:held", 7, "waiter", 6);
}

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    rdkv_options o;
    rdkv_options_init(&o);
    o.lock_timeout_ms = 20;
    o.max_retries = 100000; /* bounded by the holder, which the main thread ends */
    rdkv_session *s;
    w->rc = open_kind(w->kind, &o, &s);
    if (w->rc) return NULL;
    w->rc = rdkv_run_txn(s, waiter_fn, w);
    rdkv_session_close(s);
    return NULL;
}

static void retries(void)
{
    CHECK(rdkv_status_retryable(RDKV_EABORTED));
    CHECK(rdkv_status_retryable(RDKV_EBUSY));
    CHECK(!rdkv_status_retryable(0));
    CHECK(!rdkv_status_retryable(RDKV_EUNKNOWN));
    CHECK(!rdkv_status_retryable(RDKV_ENOTFOUND));
    CHECK(!rdkv_status_retryable(RDKV_EINVAL));
    CHECK(!rdkv_status_retryable(RDKV_ETOOBIG));
    CHECK(!rdkv_status_retryable(RDKV_EUNAVAILABLE));
    REQUIRE(up());
    for (int k = 0; k < NKIND; k++) {
        rdkv_options o;
        rdkv_options_init(&o);
        o.max_retries = 3;
        rdkv_session *s;
        REQUIRE(open_kind(k, &o, &s) == 0);
        /* on_error: 0 (and a fresh transaction) for retryable statuses, the status otherwise */
        rdkv_txn *t;
        REQUIRE(rdkv_txn_begin(s, &t) == 0);
        CHECK_EQ(rdkv_txn_put(t, "rt:x", 4, "1", 1), 0);
        CHECK_EQ(rdkv_txn_on_error(t, RDKV_ENOTFOUND), RDKV_ENOTFOUND);
        CHECK_EQ(rdkv_txn_on_error(t, RDKV_EUNKNOWN), RDKV_EUNKNOWN);
        CHECK_EQ(rdkv_txn_on_error(t, RDKV_EINVAL), RDKV_EINVAL);
        CHECK_EQ(rdkv_txn_on_error(t, RDKV_EABORTED), 0);
        const void *v;
        size_t vl;
        CHECK_EQ(rdkv_txn_get(t, "rt:x", 4, &v, &vl), RDKV_ENOTFOUND); /* the put is gone */
        CHECK_EQ(rdkv_txn_put(t, "rt:x", 4, "2", 1), 0);
        CHECK_EQ(rdkv_txn_commit(t), 0);
        CHECK_EQ(rdkv_txn_on_error(t, RDKV_EBUSY), 0); /* begins again after a commit, too */
        CHECK_EQ(rdkv_txn_get(t, "rt:x", 4, &v, &vl), 0);
        CHECK(val_is(v, vl, "2"));
        /* max_retries (3) used up: the status comes back */
        CHECK_EQ(rdkv_txn_on_error(t, RDKV_EABORTED), 0);
        CHECK_EQ(rdkv_txn_on_error(t, RDKV_EABORTED), RDKV_EABORTED);
        rdkv_txn_free(t);

        /* run_txn: retried while retryable, up to max_retries */
        struct counted c = {0, 2, RDKV_EABORTED};
        CHECK_EQ(rdkv_run_txn(s, counted_fn, &c), 0);
        CHECK_EQ(c.calls, 3);
        char buf[8];
        size_t bl;
        CHECK_EQ(tc_get1(s, "rt:k", buf, sizeof buf, &bl), 0);
        unsigned got = 0;
        if (bl == sizeof got) memcpy(&got, buf, sizeof got);
        CHECK_EQ(got, 3);
        c = (struct counted){0, 1000, RDKV_EABORTED};
        CHECK_EQ(rdkv_run_txn(s, counted_fn, &c), RDKV_EABORTED);
        CHECK_EQ(c.calls, 4); /* the first try and 3 retries */
        c = (struct counted){0, 1000, RDKV_ENOTFOUND};
        CHECK_EQ(rdkv_run_txn(s, counted_fn, &c), RDKV_ENOTFOUND);
        CHECK_EQ(c.calls, 1);
        CHECK_EQ(tc_get1(s, "rt:k", buf, sizeof buf, &bl), 0);
        got = 0;
        if (bl == sizeof got) memcpy(&got, buf, sizeof got);
        CHECK_EQ(got, 3); /* none of the failed runs wrote */

        /* a real conflict: run_txn keeps trying until the holder commits */
        CHECK_EQ(tc_put1(s, "rt:held", "init", 4), 0);
        REQUIRE(rdkv_txn_begin(s, &t) == 0);
        CHECK_EQ(rdkv_txn_get_for_update(t, "rt:held", 7, &v, &vl), 0);
        struct waiter w = {.kind = 1 - k, .rc = 1};
        pthread_t th;
        REQUIRE(pthread_create(&th, NULL, waiter_main, &w) == 0);
        int64_t give_up = clock_now_ns() + 30 * NS_PER_S;
        while (atomic_load(&w.attempts) < 3 && clock_now_ns() < give_up) clock_sleep_ns(NS_PER_MS);
        unsigned before = atomic_load(&w.attempts);
        CHECK(before >= 3);
        CHECK_EQ(rdkv_txn_put(t, "rt:held", 7, "holder", 6), 0);
        CHECK_EQ(rdkv_txn_commit(t), 0);
        rdkv_txn_free(t);
        pthread_join(th, NULL);
        CHECK_EQ(w.rc, 0);
        CHECK_EQ(tc_get1(s, "rt:held", buf, sizeof buf, &bl), 0);
        CHECK(val_is(buf, bl, "waiter"));
        DELETE_KEYS(s, "rt:x", "rt:k", "rt:held"); /* the next round starts from nothing */
        rdkv_session_close(s);
        fprintf(stderr, "  %s: on_error and run_txn ok (the waiter tried %u times while held)\n",
                kind_name[k], before);
    }
    tc_stop(&C);
}

/* ------------------------------------------------------------------------------------------ */
/* The state machine. */

static void states(void)
{
    REQUIRE(up());
    for (int k = 0; k < NKIND; k++) {
        rdkv_session *s;
        REQUIRE(open_kind(k, NULL, &s) == 0);
        rdkv_txn *t, *t2;
        const void *v, *kk;
        size_t vl, kl;
        rdkv_iter *it;
        REQUIRE(rdkv_txn_begin(s, &t) == 0);
        CHECK_EQ(rdkv_txn_begin(s, &t2), RDKV_EBUSY);
        CHECK_EQ(rdkv_txn_put(t, "st:a", 4, "1", 1), 0); /* the first is untouched */
        CHECK_EQ(rdkv_txn_commit(t), 0);
        /* ended: every operation is EINVAL, abort is harmless, begin is still EBUSY until free */
        CHECK_EQ(rdkv_txn_get(t, "st:a", 4, &v, &vl), RDKV_EINVAL);
        CHECK_EQ(rdkv_txn_get_for_update(t, "st:a", 4, &v, &vl), RDKV_EINVAL);
        CHECK_EQ(rdkv_txn_put(t, "st:a", 4, "2", 1), RDKV_EINVAL);
        CHECK_EQ(rdkv_txn_delete(t, "st:a", 4), RDKV_EINVAL);
        CHECK_EQ(rdkv_txn_scan(t, "st:", 3, "st;", 3, 0, &it), RDKV_EINVAL);
        CHECK_EQ(rdkv_txn_commit(t), RDKV_EINVAL);
        rdkv_txn_abort(t);
        CHECK_EQ(rdkv_txn_begin(s, &t2), RDKV_EBUSY);
        rdkv_txn_free(t);
        /* after an abort: the same */
        REQUIRE(rdkv_txn_begin(s, &t) == 0);
        CHECK_EQ(rdkv_txn_get(t, "st:a", 4, &v, &vl), 0);
        CHECK(val_is(v, vl, "1"));
        rdkv_txn_abort(t);
        CHECK_EQ(rdkv_txn_get(t, "st:a", 4, &v, &vl), RDKV_EINVAL);
        CHECK_EQ(rdkv_txn_commit(t), RDKV_EINVAL);
        rdkv_txn_free(t);
        /* an iterator after its transaction ended */
        REQUIRE(rdkv_txn_begin(s, &t) == 0);
        REQUIRE(rdkv_txn_scan(t, "st:", 3, "st;", 3, 0, &it) == 0);
        CHECK_EQ(rdkv_txn_commit(t), 0);
        CHECK(rdkv_iter_next(it, &kk, &kl, &v, &vl) < 0);
        rdkv_iter_close(it);
        rdkv_txn_free(t);
        /* bad arguments */
        CHECK_EQ(rdkv_txn_begin(s, NULL), RDKV_EINVAL);
        CHECK_EQ(rdkv_txn_begin(NULL, &t), RDKV_EINVAL);
        REQUIRE(rdkv_txn_begin(s, &t) == 0);
        CHECK_EQ(rdkv_txn_get(t, NULL, 3, &v, &vl), RDKV_EINVAL);
        CHECK_EQ(rdkv_txn_put(t, "st:b", 4, NULL, 3), RDKV_EINVAL);
        CHECK_EQ(rdkv_txn_get(t, "st:a", 4, &v, &vl), 0); /* still fine */
        rdkv_txn_free(t);                                 /* frees an open transaction: aborts it */
        REQUIRE(rdkv_txn_begin(s, &t) == 0);
        CHECK_EQ(rdkv_txn_delete(t, "st:a", 4), 0);
        CHECK_EQ(rdkv_txn_commit(t), 0);
        rdkv_txn_free(t);
        /* closing a session with an open transaction aborts it and releases its locks */
        REQUIRE(rdkv_txn_begin(s, &t) == 0);
        CHECK_EQ(rdkv_txn_put(t, "st:c", 4, "open", 4), 0);
        rdkv_session_close(s);
        expect_free(run_other(1 - k, OP_GET, "st:c", NULL), RDKV_ENOTFOUND,
                    "a closed session's write");
        others_join();
        /* a read-only session cannot write */
        rdkv_options o;
        rdkv_options_init(&o);
        o.read_only = true;
        REQUIRE(open_kind(k, &o, &s) == 0);
        REQUIRE(rdkv_txn_begin(s, &t) == 0);
        CHECK(rdkv_txn_put(t, "st:d", 4, "x", 1) != 0);
        CHECK(rdkv_txn_delete(t, "st:d", 4) != 0);
        CHECK_EQ(rdkv_txn_get(t, "st:d", 4, &v, &vl), RDKV_ENOTFOUND);
        CHECK_EQ(rdkv_txn_commit(t), 0);
        rdkv_txn_free(t);
        rdkv_session_close(s);
        fprintf(stderr, "  %s: state machine ok\n", kind_name[k]);
    }
    tc_stop(&C);
}

static unsigned count_of(const char *hay, const char *needle)
{
    unsigned n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

static void cluster_status(void)
{
    REQUIRE(up());
    for (int k = 0; k < NKIND; k++) {
        rdkv_session *s;
        REQUIRE(open_kind(k, NULL, &s) == 0);
        char *js = NULL;
        CHECK_EQ(rdkv_cluster_status(s, &js), 0);
        REQUIRE(js);
        CHECK(js[0] == '{' && js[strlen(js) - 1] == '}');
        CHECK(strstr(js, "\"nodes\":[") != NULL);
        for (unsigned i = 0; i < 3; i++) {
            char want[64];
            snprintf(want, sizeof want, "{\"node\":%u,\"address\":\"127.0.0.1:%u\"", i, C.ports[i]);
            CHECK(strstr(js, want) != NULL);
        }
        CHECK(!strstr(js, "{\"node\":3,"));
        for (unsigned i = 0; i < 3; i++) {
            char want[96];
            snprintf(want, sizeof want,
                     "{\"node\":%u,\"address\":\"127.0.0.1:%u\",\"state\":\"up\",\"rows\":", i,
                     C.ports[i]);
            CHECK(strstr(js, want) != NULL);
        }
        CHECK(count_of(js, "\"state\":\"up\"") >= 3);
        CHECK(!strstr(js, "\"state\":\"down\""));
        char coord[32];
        snprintf(coord, sizeof coord, "{\"coordinator\":%u,", k == EMB ? 0 : 1);
        CHECK(strncmp(js, coord, strlen(coord)) == 0);
        fprintf(stderr, "  %s: %.160s...\n", kind_name[k], js);
        free(js);
        rdkv_session_close(s);
    }
    tc_stop(&C);
}

/* Placement tags: a key that ends in "{tag}" is placed by the tag alone; anything else by the
 * whole key; and tagged keys work as keys (the tag is part of the key). */
static void placement_tags(void)
{
    const unsigned n = 7;
    char a[64], b[64];
    unsigned spread[7] = {0};
    for (unsigned i = 0; i < 200; i++) {
        snprintf(a, sizeof a, "order:%u{w42}", i);
        snprintf(b, sizeof b, "line:%u:%u{w42}", i, i * 7);
        CHECK_EQ(rdkv_key_partition(a, strlen(a), n), rdkv_key_partition("w42", 3, n));
        CHECK_EQ(rdkv_key_partition(b, strlen(b), n), rdkv_key_partition("w42", 3, n));
        snprintf(a, sizeof a, "order:%u", i);
        spread[rdkv_key_partition(a, strlen(a), n)]++;
    }
    for (unsigned p = 0; p < n; p++) CHECK(spread[p] > 0); /* untagged keys spread out */
    /* the tag is after the LAST '{'; "{}" (empty), no closing '}' at the end, or no '{' at all:
     * the whole key */
    CHECK_EQ(rdkv_key_partition("x{a}{bc}", 8, 1000), rdkv_key_partition("bc", 2, 1000));
    CHECK_EQ(rdkv_key_partition("x{}", 3, 1000), (unsigned)(store_place_hash("x{}", 3) % 1000));
    CHECK_EQ(store_place_hash("x{}", 3), store_hash("x{}", 3));
    CHECK_EQ(store_place_hash("x{a}y", 5), store_hash("x{a}y", 5));
    CHECK_EQ(store_place_hash("xa}", 3), store_hash("xa}", 3));
    CHECK_EQ(store_place_hash("{a}", 3), store_hash("a", 1));
    /* tagged keys in a transaction: written, read back, scanned in key order */
    REQUIRE(up());
    rdkv_session *s;
    REQUIRE(open_kind(EMB, NULL, &s) == 0);
    rdkv_txn *t;
    REQUIRE(rdkv_txn_begin(s, &t) == 0);
    for (unsigned i = 0; i < 20; i++) {
        snprintf(a, sizeof a, "tag:%02u{grp}", i);
        CHECK_EQ(rdkv_txn_put(t, a, strlen(a), a, strlen(a)), 0);
    }
    CHECK_EQ(rdkv_txn_commit(t), 0);
    rdkv_txn_free(t);
    REQUIRE(rdkv_txn_begin(s, &t) == 0);
    rdkv_iter *it;
    REQUIRE(rdkv_txn_scan(t, "tag:", 4, "tag;", 4, 0, &it) == 0);
    const void *k, *v;
    size_t kl, vl;
    unsigned seen = 0;
    while (rdkv_iter_next(it, &k, &kl, &v, &vl) == 1) {
        snprintf(a, sizeof a, "tag:%02u{grp}", seen);
        CHECK(kl == strlen(a) && !memcmp(k, a, kl) && vl == kl && !memcmp(v, a, vl));
        seen++;
    }
    rdkv_iter_close(it);
    CHECK_EQ(seen, 20u);
    CHECK_EQ(rdkv_txn_commit(t), 0);
    rdkv_txn_free(t);
    rdkv_session_close(s);
    tc_stop(&C);
}

/* kvbench's services are kvserver's (tools/kvserver.c): an embedded node refuses --bench rather
 * than start a node whose benchmark RPCs nothing serves. */
static void embedded_no_bench(void)
{
    static const char *const bench[] = {"--bench", NULL};
    CHECK_EQ(tc_start(&C, 1, bench), RDKV_EINVAL);
    tc_stop(&C);
    REQUIRE(tc_start(&C, 1, NULL) == 0); /* the same node without it starts */
    tc_stop(&C);
}

static const struct test_case cases[] = {
    {"embedded_no_bench", embedded_no_bench},
    {"placement_tags", placement_tags},
    {"basics", basics},
    {"limits", limits},
    {"large_values", large_values},
    {"scans", scans},
    {"conflicts", conflicts},
    {"abort_leaves_no_lock", abort_leaves_no_lock},
    {"idle_writer_releases_ranges", idle_writer_releases_ranges},
    {"stale_location", stale_location},
    {"concurrent_own_write_scans", concurrent_own_write_scans},
    {"scan_conflicts", scan_conflicts},
    {"same_prefix_keys", same_prefix_keys},
    {"retries", retries},
    {"states", states},
    {"cluster_status", cluster_status},
};

int main(int argc, char **argv)
{
    return tenv_main(argc, argv, "transactions", cases, sizeof cases / sizeof cases[0]);
}
