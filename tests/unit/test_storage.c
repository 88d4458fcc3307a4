/* Unit tests of the storage layer (storage/store.h): rows, values inline and out of line, the
 * hash index and the ordered index against a reference model over thousands of random operations
 * (fixed seeds), key and value limits, heap exhaustion and recovery, row recycling that keeps
 * lock lines, row_decode on truncated, garbled and random bytes, the one-sided path (a peer
 * opens the index and finds rows with READs, tombstones included), and one writer racing local
 * lookups, scans and remote probes. */
#include "tests/harness.h"
#include "tests/testenv.h"

#include "common/clock.h"
#include "common/rng.h"
#include "storage/store.h"

#include <pthread.h>
#include <stdatomic.h>

static uint64_t rng_state;
static void rng_seed(uint64_t s) { rng_state = s ? s : 88172645463325252ull; }
static uint64_t rng(void) { return rng_next(&rng_state); }
static uint64_t below(uint64_t n) { return rng_below(&rng_state, n); }

#define ARENA (64ull << 20)

/* ---- helpers: what a transaction would do on the owner, single-threaded ---- */

static int kv_put(struct store *s, const void *k, uint32_t kl, const void *v, uint32_t vl)
{
    rptr row;
    int rc = store_lookup(s, k, kl, &row);
    if (rc == 0) {
        struct store_staged st;
        rc = store_value_stage(s, row, v, vl, &st);
        if (rc) return rc;
        store_value_install(s, &st);
        return 0;
    }
    if (rc != RDKV_ENOTFOUND) return rc;
    rc = store_row_alloc(s, k, kl, v, vl, &row);
    if (rc) return rc;
    rc = store_row_publish(s, row);
    if (rc) store_row_discard(s, row);
    return rc;
}

static int kv_del(struct store *s, const void *k, uint32_t kl)
{
    rptr row;
    int rc = store_lookup(s, k, kl, &row);
    return rc ? rc : store_row_delete(s, row);
}

/* The heap region, found the way a test can: by name and size. */
struct heap_rg {
    uint64_t off, size;
};

static struct heap_rg heap_region(struct fabric *f, struct store *s)
{
    struct store_stats st;
    store_stats(s, &st);
    rptr p = RPTR_NULL;
    int rc = fab_region(f, "store.heap", st.heap_bytes, 4096, &p);
    CHECK_EQ(rc, 0);
    return (struct heap_rg){rptr_off(p), st.heap_bytes};
}

static bool in_heap(struct heap_rg h, rptr p, uint64_t len)
{
    uint64_t off = rptr_off(p);
    return off >= h.off && off <= h.off + h.size && len <= h.off + h.size - off;
}

static void fill(uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t x = seed | 1;
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(rng_next(&x) >> 24);
}

/* ---- the reference model ---- */

struct mkey {
    uint8_t *k;
    uint32_t kl;
    bool present;
    uint8_t *v;
    uint32_t vl;
};

static int keycmp(const void *a, uint32_t al, const void *b, uint32_t bl)
{
    uint32_t n = al < bl ? al : bl;
    int c = n ? memcmp(a, b, n) : 0;
    return c ? c : (al < bl ? -1 : al > bl);
}

static int mkey_order(const void *a, const void *b)
{
    const struct mkey *x = *(const struct mkey *const *)a, *y = *(const struct mkey *const *)b;
    return keycmp(x->k, x->kl, y->k, y->kl);
}

/* n distinct keys: key 0 is empty, key 1 is key_max long, the rest short strings over a small
 * alphabet (so that many share prefixes, embedded zeros and 0xFF included). */
static struct mkey *make_keys(unsigned n, uint32_t key_max)
{
    struct mkey *m = calloc(n, sizeof *m);
    static const uint8_t alpha[] = {'a', 'b', 'c', 0, 0xFF};
    for (unsigned i = 0; i < n; i++) {
        for (;;) {
            uint32_t kl = i == 0 ? 0 : i == 1 ? key_max : 1 + (uint32_t)below(12);
            uint8_t *k = malloc(kl ? kl : 1);
            for (uint32_t j = 0; j < kl; j++) k[j] = alpha[below(sizeof alpha)];
            bool dup = false;
            for (unsigned p = 0; p < i && !dup; p++) dup = keycmp(m[p].k, m[p].kl, k, kl) == 0;
            if (!dup) {
                m[i].k = k;
                m[i].kl = kl;
                break;
            }
            free(k);
        }
    }
    return m;
}

static void free_keys(struct mkey *m, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        free(m[i].k);
        free(m[i].v);
    }
    free(m);
}

static uint32_t random_vlen(void)
{
    uint64_t r = below(100);
    if (r < 70) return (uint32_t)below(101);
    if (r < 90) return 100 + (uint32_t)below(1900);
    return 2000 + (uint32_t)below(20000);
}

/* Checks one key against the model: lookup, view, value, placement inside the heap. */
static void check_key(struct store *s, struct heap_rg hr, const struct mkey *m)
{
    rptr row;
    int rc = store_lookup(s, m->k, m->kl, &row);
    if (!m->present) {
        CHECK_EQ(rc, RDKV_ENOTFOUND);
        return;
    }
    CHECK_EQ(rc, 0);
    if (rc) return;
    struct row_view v;
    CHECK_EQ(store_row_view(s, row, &v), 0);
    CHECK_EQ(v.flags, ROW_LIVE);
    CHECK(v.version != 0);
    CHECK_EQ(v.klen, m->kl);
    CHECK(keycmp(v.key, v.klen, m->k, m->kl) == 0);
    CHECK_EQ(v.vlen, m->vl);
    CHECK(v.val != NULL);
    if (v.val && v.vlen == m->vl) CHECK(m->vl == 0 || memcmp(v.val, m->v, m->vl) == 0);
    CHECK(in_heap(hr, row, ROW_DATA_OFF + (uint64_t)v.cap));
    CHECK((rptr_off(row) & 63) == 0);
    if (v.vext) CHECK(in_heap(hr, v.vext, v.vlen));
    else CHECK((uint64_t)v.klen + v.vlen <= v.cap);
}

struct collect {
    const uint8_t **keys;
    uint32_t *lens;
    size_t n, cap;
    size_t stop_after; /* fn returns false on this call (0: never) */
    bool bad;
};

static bool collect_fn(void *arg, rptr row, const struct row_view *v)
{
    struct collect *c = arg;
    if (row == RPTR_NULL || v->flags != ROW_LIVE) c->bad = true;
    if (c->n < c->cap) {
        c->keys[c->n] = v->key;
        c->lens[c->n] = v->klen;
    }
    c->n++;
    return !(c->stop_after && c->n == c->stop_after);
}

/* One scan against the model's sorted present keys. */
static void check_scan(struct store *s, struct mkey **sorted, size_t np, const uint8_t *lo,
                       uint32_t lol, const uint8_t *hi, uint32_t hil, const uint8_t *after,
                       uint32_t afl, uint64_t limit, size_t stop_after)
{
    const uint8_t *keys[4096];
    uint32_t lens[4096];
    struct collect c = {keys, lens, 0, 4096, stop_after, false};
    long got = store_scan(s, lo, lol, hi, hil, after, afl, limit, collect_fn, &c);
    /* expected: lo <= k (or after < k when after >= lo), k < hi, at most limit / stop_after */
    size_t want = 0, first = 0;
    bool use_after = after && keycmp(after, afl, lo, lol) >= 0;
    while (first < np &&
           (use_after ? keycmp(sorted[first]->k, sorted[first]->kl, after, afl) <= 0
                      : keycmp(sorted[first]->k, sorted[first]->kl, lo, lol) < 0))
        first++;
    for (size_t i = first; i < np; i++) {
        if (hi && keycmp(sorted[i]->k, sorted[i]->kl, hi, hil) >= 0) break;
        if (limit && want == limit) break;
        if (stop_after && want == stop_after) break;
        if (want < c.cap && (c.n <= want || keycmp(keys[want], lens[want], sorted[i]->k,
                                                   sorted[i]->kl) != 0)) {
            CHECK(!"scan returned another key than the model");
            return;
        }
        want++;
    }
    CHECK_EQ(got, (long)want);
    CHECK_EQ(c.n, want);
    CHECK(!c.bad);
}

static size_t model_sorted(struct mkey *m, unsigned n, struct mkey **out)
{
    size_t np = 0;
    for (unsigned i = 0; i < n; i++)
        if (m[i].present) out[np++] = &m[i];
    qsort(out, np, sizeof *out, mkey_order);
    return np;
}

static void random_scans(struct store *s, struct mkey *m, unsigned n, unsigned count)
{
    struct mkey **sorted = malloc(n * sizeof *sorted);
    size_t np = model_sorted(m, n, sorted);
    for (unsigned t = 0; t < count && harness_failures == 0; t++) {
        const struct mkey *a = &m[below(n)], *b = &m[below(n)], *c = &m[below(n)];
        bool has_hi = below(4) != 0, has_after = below(3) == 0;
        uint64_t limit = below(3) == 0 ? 1 + below(20) : 0;
        size_t stop = below(5) == 0 ? 1 + below(10) : 0;
        check_scan(s, sorted, np, a->k, a->kl, has_hi ? b->k : NULL, has_hi ? b->kl : 0,
                   has_after ? c->k : NULL, has_after ? c->kl : 0, limit, stop);
    }
    /* the whole store, and an empty range */
    check_scan(s, sorted, np, NULL, 0, NULL, 0, NULL, 0, 0, 0);
    check_scan(s, sorted, np, (const uint8_t *)"b", 1, (const uint8_t *)"a", 1, NULL, 0, 0, 0);
    free(sorted);
}

static void verify_all(struct store *s, struct heap_rg hr, struct mkey *m, unsigned n)
{
    uint64_t present = 0;
    for (unsigned i = 0; i < n; i++) {
        check_key(s, hr, &m[i]);
        present += m[i].present;
    }
    struct store_stats st;
    store_stats(s, &st);
    CHECK_EQ(st.rows, present);
    CHECK_EQ(st.index_used_slots, present);
    CHECK(st.heap_used <= st.heap_bytes);
}

static int open_one(struct tenv *e, unsigned nodes, const struct store_opts *o, struct store **s)
{
    if (tenv_start(e, nodes, ARENA, NULL)) return -1;
    char err[256];
    int rc = store_open(e->f[0], o, s, err, sizeof err);
    if (rc) {
        fprintf(stderr, "  store_open: %s\n", err);
        tenv_stop(e);
    }
    return rc;
}

/* ---- tests ---- */

static void t_open_errors(void)
{
    struct tenv e;
    REQUIRE(tenv_start(&e, 1, 4ull << 20, NULL) == 0);
    struct store *s = NULL;
    char err[256];
    CHECK_EQ(store_open(e.f[0], NULL, &s, err, sizeof err), RDKV_ENOSPC);
    CHECK(s == NULL && err[0] != 0);
    struct store_opts o;
    store_opts_init(&o);
    o.key_max = STORE_KEY_MAX_LIMIT + 1;
    CHECK_EQ(store_open(e.f[0], &o, &s, err, sizeof err), RDKV_EINVAL);
    tenv_stop(&e);

    /* a heap that does not fit the arena */
    REQUIRE(tenv_start(&e, 1, 16ull << 20, NULL) == 0);
    store_opts_init(&o);
    o.heap_bytes = 32ull << 20;
    CHECK_EQ(store_open(e.f[0], &o, &s, err, sizeof err), RDKV_ENOSPC);
    tenv_stop(&e);

    /* the smallest heap works; a smaller one is refused */
    REQUIRE(tenv_start(&e, 1, 16ull << 20, NULL) == 0);
    o.heap_bytes = 5ull << 20;
    CHECK_EQ(store_open(e.f[0], &o, &s, err, sizeof err), RDKV_EINVAL);
    o.heap_bytes = 6ull << 20;
    CHECK_EQ(store_open(e.f[0], &o, &s, err, sizeof err), 0);
    if (s) {
        static uint8_t v[3000];
        char k[16];
        unsigned n = 0;
        for (; n < 10000; n++) {
            int kl = snprintf(k, sizeof k, "%u", n);
            if (kv_put(s, k, (uint32_t)kl, v, sizeof v)) break;
        }
        CHECK(n > 100 && n < 10000);
        store_close(s);
    }
    tenv_stop(&e);
}

static void t_basic(void)
{
    struct tenv e;
    struct store *s;
    REQUIRE(open_one(&e, 1, NULL, &s) == 0);
    CHECK_EQ(store_key_max(s), STORE_KEY_MAX_DEFAULT);
    CHECK_EQ(store_value_max(s), STORE_VALUE_MAX_DEFAULT);
    rptr row;
    CHECK_EQ(store_lookup(s, "k", 1, &row), RDKV_ENOTFOUND);
    CHECK_EQ(kv_put(s, "k", 1, "v1", 2), 0);
    CHECK_EQ(store_lookup(s, "k", 1, &row), 0);
    struct row_view v;
    CHECK_EQ(store_row_view(s, row, &v), 0);
    CHECK(v.vlen == 2 && memcmp(v.val, "v1", 2) == 0);
    uint64_t v1 = v.version;
    CHECK_EQ(kv_put(s, "k", 1, "value2", 6), 0);
    CHECK_EQ(store_row_view(s, row, &v), 0);
    CHECK(v.vlen == 6 && memcmp(v.val, "value2", 6) == 0 && v.version > v1);

    /* publish of a second row with the same key, and of a row twice */
    rptr dup;
    CHECK_EQ(store_row_alloc(s, "k", 1, "x", 1, &dup), 0);
    CHECK_EQ(store_row_publish(s, dup), RDKV_EEXIST);
    CHECK_EQ(store_row_view(s, dup, &v), 0);
    CHECK_EQ(v.flags, 0); /* left as it was */
    store_row_discard(s, dup);
    CHECK_EQ(store_row_publish(s, row), RDKV_EINVAL);
    /* not rows */
    CHECK_EQ(store_row_publish(s, rptr_add(row, 8)), RDKV_EINVAL);
    CHECK_EQ(store_row_view(s, rptr_make(1, rptr_off(row)), &v), RDKV_EPROTO);
    CHECK_EQ(store_row_view(s, RPTR_NULL, &v), RDKV_EPROTO);
    CHECK_EQ(store_row_delete(s, RPTR_NULL), RDKV_EINVAL);

    /* staged then dropped */
    struct store_staged st;
    static uint8_t big[5000];
    CHECK_EQ(store_value_stage(s, row, big, sizeof big, &st), 0);
    CHECK(st.vext != RPTR_NULL);
    store_value_unstage(s, &st);
    CHECK_EQ(store_row_view(s, row, &v), 0);
    CHECK(v.vlen == 6 && memcmp(v.val, "value2", 6) == 0);

    CHECK_EQ(kv_del(s, "k", 1), 0);
    rptr none;
    CHECK_EQ(store_lookup(s, "k", 1, &none), RDKV_ENOTFOUND);
    CHECK(none == RPTR_NULL);
    CHECK_EQ(store_row_delete(s, row), RDKV_EINVAL); /* already dead */
    CHECK_EQ(store_row_view(s, row, &v), 0);
    CHECK_EQ(v.flags, ROW_DEAD);
    struct store_stats stt;
    store_stats(s, &stt);
    CHECK_EQ(stt.rows, 0);
    CHECK(stt.heap_used > 0 && stt.index_buckets >= 8);
    store_close(s);
    tenv_stop(&e);
}

static void t_limits(void)
{
    struct tenv e;
    struct store *s;
    struct store_opts o;
    store_opts_init(&o);
    o.value_max = 100000;
    REQUIRE(open_one(&e, 1, &o, &s) == 0);
    uint32_t km = store_key_max(s);
    uint8_t *key = malloc(km + 1), *val = malloc(o.value_max + 1);
    fill(key, km + 1, 1);
    fill(val, o.value_max + 1, 2);
    rptr row;
    CHECK_EQ(kv_put(s, NULL, 0, "empty", 5), 0);
    CHECK_EQ(kv_put(s, key, km, val, 10), 0);
    CHECK_EQ(store_row_alloc(s, key, km + 1, val, 1, &row), RDKV_ETOOBIG);
    CHECK_EQ(store_lookup(s, key, km + 1, &row), RDKV_ENOTFOUND);
    CHECK_EQ(store_row_alloc(s, "a", 1, val, o.value_max + 1, &row), RDKV_ETOOBIG);
    CHECK_EQ(kv_put(s, "a", 1, val, o.value_max), 0);
    CHECK_EQ(store_lookup(s, "a", 1, &row), 0);
    struct store_staged st;
    CHECK_EQ(store_value_stage(s, row, val, o.value_max + 1, &st), RDKV_ETOOBIG);
    CHECK_EQ(store_row_alloc(s, NULL, 3, val, 1, &row), RDKV_EINVAL);

    struct row_view v;
    CHECK_EQ(store_lookup(s, NULL, 0, &row), 0);
    CHECK_EQ(store_row_view(s, row, &v), 0);
    CHECK(v.klen == 0 && v.vlen == 5 && memcmp(v.val, "empty", 5) == 0);
    CHECK_EQ(store_lookup(s, key, km, &row), 0);
    CHECK_EQ(store_row_view(s, row, &v), 0);
    CHECK(v.klen == km && memcmp(v.key, key, km) == 0 && memcmp(v.val, val, 10) == 0);
    CHECK_EQ(store_lookup(s, "a", 1, &row), 0);
    CHECK_EQ(store_row_view(s, row, &v), 0);
    CHECK(v.vlen == o.value_max && v.vext != RPTR_NULL && memcmp(v.val, val, v.vlen) == 0);
    free(key);
    free(val);
    store_close(s);
    tenv_stop(&e);
}

static void t_grow_shrink(void)
{
    struct tenv e;
    struct store *s;
    REQUIRE(open_one(&e, 1, NULL, &s) == 0);
    struct heap_rg hr = heap_region(e.f[0], s);
    static uint8_t val[300000 + 64];
    fill(val, sizeof val, 3);
    static const uint32_t sizes[] = {10, 50000, 20, 3000, 0, 300000, 64, 1000, 5000, 12};
    rptr first = RPTR_NULL;
    uint64_t last_version = 0;
    for (unsigned round = 0; round < 3; round++) {
        for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            uint8_t *v = val + round * 7 + i;
            CHECK_EQ(kv_put(s, "grow", 4, v, sizes[i]), 0);
            rptr row;
            struct row_view w;
            CHECK_EQ(store_lookup(s, "grow", 4, &row), 0);
            if (first == RPTR_NULL) first = row;
            CHECK(row == first); /* a live row never moves */
            CHECK_EQ(store_row_view(s, row, &w), 0);
            CHECK_EQ(w.vlen, sizes[i]);
            CHECK(w.val && memcmp(w.val, v, sizes[i]) == 0);
            CHECK(w.version > last_version);
            last_version = w.version;
            /* inline exactly when it fits the row's room */
            CHECK_EQ(w.vext == RPTR_NULL, 4 + sizes[i] <= w.cap);
            if (w.vext) CHECK(in_heap(hr, w.vext, w.vlen));
        }
    }
    /* the out-of-line values were freed: the heap did not grow by a round's worth each round */
    struct store_stats st;
    store_stats(s, &st);
    CHECK(st.heap_used < (16ull << 20));
    store_close(s);
    tenv_stop(&e);
}

static void run_model(uint64_t seed, unsigned nkeys, unsigned nops)
{
    rng_seed(seed);
    struct tenv e;
    struct store *s;
    REQUIRE(open_one(&e, 1, NULL, &s) == 0);
    struct heap_rg hr = heap_region(e.f[0], s);
    struct mkey *m = make_keys(nkeys, store_key_max(s));
    uint8_t *buf = malloc(30000);
    for (unsigned op = 0; op < nops && harness_failures == 0; op++) {
        struct mkey *k = &m[below(nkeys)];
        uint64_t r = below(100);
        if (r < 45) {
            uint32_t vl = random_vlen();
            fill(buf, vl, rng());
            int rc = kv_put(s, k->k, k->kl, buf, vl);
            CHECK_EQ(rc, 0);
            if (rc == 0) {
                free(k->v);
                k->v = malloc(vl ? vl : 1);
                memcpy(k->v, buf, vl);
                k->vl = vl;
                k->present = true;
            }
        } else if (r < 65) {
            CHECK_EQ(kv_del(s, k->k, k->kl), k->present ? 0 : RDKV_ENOTFOUND);
            k->present = false;
        } else {
            check_key(s, hr, k);
        }
        if (op % 1000 == 999) {
            verify_all(s, hr, m, nkeys);
            random_scans(s, m, nkeys, 50);
        }
    }
    verify_all(s, hr, m, nkeys);
    random_scans(s, m, nkeys, 200);
    free(buf);
    free_keys(m, nkeys);
    store_close(s);
    tenv_stop(&e);
}

static void t_model(void)
{
    run_model(1, 300, 8000);
    run_model(2, 60, 6000); /* few keys: many updates and re-inserts of the same keys */
}

static void t_recycle(void)
{
    struct tenv e;
    struct store *s;
    REQUIRE(open_one(&e, 1, NULL, &s) == 0);
    rptr a, b, c;
    CHECK_EQ(kv_put(s, "key-A", 5, "0123456789", 10), 0);
    CHECK_EQ(store_lookup(s, "key-A", 5, &a), 0);
    uint8_t *line = fab_local(e.f[0], a);
    REQUIRE(line != NULL);
    for (int i = 0; i < 8; i++) CHECK(((uint64_t *)(void *)line)[i] == 0); /* new: all zero */
    /* as if a peer still held or queued on the lock */
    uint8_t pattern[64];
    fill(pattern, sizeof pattern, 9);
    memcpy(line, pattern, 64);
    struct row_view v;
    CHECK_EQ(store_row_view(s, a, &v), 0);
    uint64_t va = v.version;
    CHECK_EQ(kv_del(s, "key-A", 5), 0);
    CHECK(memcmp(line, pattern, 64) == 0);
    /* a row of the same class reuses it and leaves the line alone */
    CHECK_EQ(kv_put(s, "key-B", 5, "abcdefghij", 10), 0);
    CHECK_EQ(store_lookup(s, "key-B", 5, &b), 0);
    CHECK(b == a);
    CHECK(memcmp(line, pattern, 64) == 0);
    CHECK_EQ(store_row_view(s, b, &v), 0);
    CHECK(v.version > va && v.klen == 5 && memcmp(v.key, "key-B", 5) == 0);
    CHECK(memcmp(v.val, "abcdefghij", 10) == 0);
    /* a discarded (never published) row is recycled as well */
    CHECK_EQ(store_row_alloc(s, "key-C", 5, "x", 1, &c), 0);
    store_row_discard(s, c);
    rptr d;
    CHECK_EQ(store_row_alloc(s, "key-D", 5, "y", 1, &d), 0);
    CHECK(d == c);
    CHECK_EQ(store_row_publish(s, d), 0);
    CHECK_EQ(store_lookup(s, "key-D", 5, &d), 0);
    CHECK(d == c);
    store_close(s);
    tenv_stop(&e);
}

static void t_exhaust(void)
{
    struct tenv e;
    struct store *s;
    struct store_opts o;
    store_opts_init(&o);
    o.heap_bytes = 8ull << 20;
    REQUIRE(open_one(&e, 1, &o, &s) == 0);
    struct heap_rg hr = heap_region(e.f[0], s);
    static uint8_t val[65536];
    fill(val, sizeof val, 4);
    char key[32];
    int rc = 0;
    struct store_stats st;

    /* Out-of-line values until the heap is full; deleting them gives their room back to
     * jemalloc (their rows are recycled), so a second pass fits as many. */
    unsigned big[2] = {0, 0};
    for (int pass = 0; pass < 2; pass++) {
        for (;; big[pass]++) {
            int kl = snprintf(key, sizeof key, "big%06u", big[pass]);
            rc = kv_put(s, key, (uint32_t)kl, val, sizeof val);
            if (rc) break;
        }
        CHECK_EQ(rc, RDKV_ENOSPC);
        for (unsigned i = 0; i < big[pass]; i++) {
            int kl = snprintf(key, sizeof key, "big%06u", i);
            rptr row;
            struct row_view v;
            CHECK_EQ(store_lookup(s, key, (uint32_t)kl, &row), 0);
            CHECK_EQ(store_row_view(s, row, &v), 0);
            CHECK(v.vext != RPTR_NULL && in_heap(hr, v.vext, v.vlen));
            CHECK(v.vlen == sizeof val && memcmp(v.val, val, sizeof val) == 0);
            CHECK_EQ(kv_del(s, key, (uint32_t)kl), 0);
        }
    }
    CHECK(big[0] > 10);
    CHECK(big[1] >= big[0] - big[0] / 10);
    store_stats(s, &st);
    CHECK_EQ(st.rows, 0);

    /* rows with inline values until the heap is full */
    unsigned n = 0;
    for (; n < 100000; n++) {
        int kl = snprintf(key, sizeof key, "row%06u", n);
        rc = kv_put(s, key, (uint32_t)kl, val + n % 64, 2000);
        if (rc) break;
    }
    CHECK_EQ(rc, RDKV_ENOSPC);
    CHECK(n > 1000);
    store_stats(s, &st);
    CHECK(st.alloc_failures > 0);
    CHECK_EQ(st.rows, n);
    CHECK(st.heap_used <= st.heap_bytes);
    /* still ENOSPC, and a too-big value too, without harm */
    CHECK_EQ(kv_put(s, "more", 4, val, 2000), RDKV_ENOSPC);
    CHECK_EQ(kv_put(s, "more", 4, val, 60000), RDKV_ENOSPC);
    /* everything written is intact and inside the heap */
    for (unsigned i = 0; i < n; i += 7) {
        int kl = snprintf(key, sizeof key, "row%06u", i);
        rptr row;
        struct row_view v;
        CHECK_EQ(store_lookup(s, key, (uint32_t)kl, &row), 0);
        CHECK_EQ(store_row_view(s, row, &v), 0);
        CHECK(v.vlen == 2000 && memcmp(v.val, val + i % 64, 2000) == 0);
        CHECK(in_heap(hr, row, ROW_DATA_OFF + (uint64_t)v.cap));
    }
    /* deletes make room for rows of that size again */
    for (unsigned i = 0; i < n; i += 2) {
        int kl = snprintf(key, sizeof key, "row%06u", i);
        CHECK_EQ(kv_del(s, key, (uint32_t)kl), 0);
    }
    for (unsigned i = 0; i < n / 2; i++) {
        int kl = snprintf(key, sizeof key, "new%06u", i);
        CHECK_EQ(kv_put(s, key, (uint32_t)kl, val + i % 64, 2000), 0);
    }
    for (unsigned i = 0; i < n; i++) {
        int kl = snprintf(key, sizeof key, "row%06u", i);
        rptr row;
        CHECK_EQ(store_lookup(s, key, (uint32_t)kl, &row), i % 2 ? 0 : RDKV_ENOTFOUND);
    }
    /* empty it */
    for (unsigned i = 1; i < n; i += 2) {
        int kl = snprintf(key, sizeof key, "row%06u", i);
        CHECK_EQ(kv_del(s, key, (uint32_t)kl), 0);
    }
    for (unsigned i = 0; i < n / 2; i++) {
        int kl = snprintf(key, sizeof key, "new%06u", i);
        CHECK_EQ(kv_del(s, key, (uint32_t)kl), 0);
    }
    store_stats(s, &st);
    CHECK_EQ(st.rows, 0);
    fprintf(stderr, "  %u rows of 2000 B, %u values of 64 KiB (then %u) in an 8 MiB heap\n", n,
            big[0], big[1]);
    store_close(s);
    tenv_stop(&e);
}

/* A valid row image (from ROW_HDR_OFF) of key/value, inline. */
static size_t make_row(uint8_t *buf, const void *k, uint32_t kl, const void *v, uint32_t vl)
{
    struct row_hdr h = {.version = 7, .klen = kl, .vlen = vl,
                        .cap = (uint32_t)((kl + vl + 63) & ~63u), .flags = ROW_LIVE,
                        .magic = ROW_MAGIC, .vext = RPTR_NULL, .khash = store_hash(k, kl)};
    memcpy(buf, &h, sizeof h);
    memcpy(buf + 64, k, kl);
    memcpy(buf + 64 + kl, v, vl);
    return 64 + kl + vl;
}

static int decode_exact(const uint8_t *src, size_t len, struct row_view *v)
{
    /* a heap copy of exactly len bytes, so that ASan sees any read past it */
    uint8_t *b = malloc(len ? len : 1);
    memcpy(b, src, len);
    int rc = row_decode(b, len, 4096, 1u << 20, v);
    free(b);
    return rc;
}

static void t_decode(void)
{
    uint8_t buf[1024];
    size_t len = make_row(buf, "hello", 5, "world!", 6);
    struct row_view v;
    CHECK_EQ(row_decode(buf, len, 4096, 1 << 20, &v), 0);
    CHECK(v.klen == 5 && v.vlen == 6 && v.version == 7 && v.flags == ROW_LIVE);
    CHECK(memcmp(v.key, "hello", 5) == 0 && memcmp(v.val, "world!", 6) == 0);
    CHECK_EQ(row_read_len(v.klen, v.vlen, true), len);
    /* truncated: ETOOBIG, with what it takes to read it all */
    for (size_t l = 0; l < len; l++) {
        int rc = decode_exact(buf, l, &v);
        CHECK_EQ(rc, RDKV_ETOOBIG);
        if (l >= 64) CHECK_EQ(row_read_len(v.klen, v.vlen, v.vext == RPTR_NULL), len);
        else CHECK_EQ(row_read_len(v.klen, v.vlen, v.vext == RPTR_NULL), 64);
    }
    /* garbled headers */
    struct row_hdr h0;
    memcpy(&h0, buf, sizeof h0);
    struct row_hdr bad[10];
    for (int i = 0; i < 10; i++) bad[i] = h0;
    bad[0].magic ^= 1;
    bad[1].flags = ROW_LIVE | ROW_DEAD;
    bad[2].flags = 4;
    bad[3].klen = 4097;
    bad[4].vlen = (1u << 20) + 1;
    bad[5].cap = 65;
    bad[6].cap = 0; /* key and value do not fit */
    bad[7].version = 0;
    bad[8].cap = 1u << 30;
    bad[9].klen = 0xFFFFFFFFu;
    for (int i = 0; i < 10; i++) {
        memcpy(buf, &bad[i], sizeof bad[i]);
        CHECK_EQ(decode_exact(buf, len, &v), RDKV_EPROTO);
    }
    /* out of line: the inline part is the key alone */
    struct row_hdr x = h0;
    x.vext = rptr_make(0, 1 << 20);
    x.vlen = 100000;
    memcpy(buf, &x, sizeof x);
    CHECK_EQ(decode_exact(buf, 64 + 5, &v), 0);
    CHECK(v.val == NULL && v.vext == x.vext && v.vlen == 100000);
    CHECK_EQ(decode_exact(buf, 64 + 4, &v), RDKV_ETOOBIG);
    CHECK_EQ(row_decode(NULL, 64, 4096, 1 << 20, &v), RDKV_EINVAL);

    /* random bytes and random mutations of a valid image: never a crash or an overread */
    rng_seed(5);
    for (int i = 0; i < 100000; i++) {
        size_t l = below(200);
        if (i % 2) {
            fill(buf, l, rng());
        } else {
            make_row(buf, "hello", 5, "world!", 6);
            for (int f = 0; f < 3; f++) buf[below(80)] ^= (uint8_t)(1u << below(8));
            l = below(100);
        }
        int rc = decode_exact(buf, l, &v);
        CHECK(rc == 0 || rc == RDKV_EPROTO || rc == RDKV_ETOOBIG);
        if (rc == 0) {
            CHECK(v.klen <= 4096 && v.vlen <= (1u << 20));
            CHECK(64 + (uint64_t)v.klen + (v.vext ? 0 : v.vlen) <= l);
        }
    }
}

/* ---- the one-sided path ---- */

/* Memory for store_remote_read_row: a bump allocator over one buffer, reset per lookup. */
struct bump {
    uint8_t buf[3 * 32768];
    size_t used;
};
static void *bump_alloc(void *arg, size_t n)
{
    struct bump *b = arg;
    n = (n + 7) & ~(size_t)7;
    if (sizeof b->buf - b->used < n) return NULL;
    void *p = b->buf + b->used;
    b->used += n;
    return p;
}

/* Finds key on node r->node as the transaction layer does: probe, then store_remote_read_row on
 * each candidate (every third lookup hands it a first READ already made, as a lock's chain
 * does; every other one asks for the key only, then for the value with the length it learnt).
 * Fills val (up to cap) and returns its length, or RDKV_ENOTFOUND, or a status. Candidates that
 * are not this key (another key with the same tag, a row being recycled) are skipped; *skipped
 * counts them. */
static int remote_get(struct fab_ctx *c, const struct store_remote *r, const void *key,
                      uint32_t klen, uint8_t *val, uint32_t cap, unsigned *skipped)
{
    static _Thread_local unsigned calls;
    static _Thread_local struct bump b;
    rptr cands[16];
    int n = store_remote_probe(c, r, store_hash(key, klen), cands, 16);
    if (n < 0) return n;
    calls++;
    for (int i = 0; i < n; i++) {
        b.used = 0;
        struct row_view v;
        uint32_t readlen = 0;
        int rc;
        if (calls % 2) { /* the key alone first: no value, and nothing learnt */
            struct row_read f = store_row_first_read(cands[i], klen, 0, false);
            rc = store_remote_read_row(c, r, key, klen, false, f, NULL, bump_alloc, &b, &v,
                                       &readlen);
            CHECK(rc < 0 || (readlen == 0 && (rc == 0 || v.klen == klen)));
            if (rc != 1) goto next;
        }
        struct row_read f = store_row_first_read(cands[i], klen, readlen, true);
        const uint8_t *pre = NULL;
        if (calls % 3 == 0) { /* the first READ made already (a lock's chain) */
            uint8_t *p = bump_alloc(&b, f.len);
            if (!p) return RDKV_ENOMEM;
            if ((rc = fab_read(c, f.at, p, f.len))) return rc;
            pre = p;
        }
        rc = store_remote_read_row(c, r, key, klen, true, f, pre, bump_alloc, &b, &v, &readlen);
        if (rc < 0) return rc;
        if (rc == 1) {
            CHECK(v.flags == ROW_LIVE && v.klen == klen);
            CHECK_EQ(readlen, row_read_len(v.klen, v.vlen, v.vext == RPTR_NULL));
            if (v.vlen > cap) return RDKV_ETOOBIG;
            if (v.vlen) memcpy(val, v.val, v.vlen);
            return (int)v.vlen;
        }
    next:
        if (rc < 0) return rc;
        if (skipped) (*skipped)++;
    }
    return RDKV_ENOTFOUND;
}

static void remote_check(struct fab_ctx *c, const struct store_remote *r, struct mkey *m,
                         unsigned n)
{
    static uint8_t got[30000];
    for (unsigned i = 0; i < n; i++) {
        int rc = remote_get(c, r, m[i].k, m[i].kl, got, sizeof got, NULL);
        if (!m[i].present) {
            CHECK_EQ(rc, RDKV_ENOTFOUND);
        } else {
            CHECK_EQ(rc, (int)m[i].vl);
            if (rc == (int)m[i].vl) CHECK(m[i].vl == 0 || memcmp(got, m[i].v, m[i].vl) == 0);
        }
    }
}

static void run_remote(uint64_t index_buckets, unsigned nkeys)
{
    rng_seed(11 + index_buckets);
    struct tenv e;
    struct store *s;
    struct store_opts o;
    store_opts_init(&o);
    o.index_buckets = index_buckets;
    REQUIRE(open_one(&e, 2, &o, &s) == 0);
    struct fab_ctx *c1 = NULL, *c0 = NULL;
    REQUIRE(fab_ctx_create(e.f[1], &c1) == 0);
    REQUIRE(fab_ctx_create(e.f[0], &c0) == 0);
    struct store_remote r, rl, none;
    REQUIRE(store_remote_open(c1, 0, NULL, &r) == 0);
    CHECK_EQ(r.node, 0);
    CHECK_EQ(r.key_max, store_key_max(s));
    CHECK_EQ(r.value_max, store_value_max(s));
    struct store_stats st;
    store_stats(s, &st);
    CHECK_EQ(r.nbuckets, st.index_buckets);
    CHECK_EQ(store_remote_open(c1, 1, NULL, &none), RDKV_ENOTFOUND); /* node 1 has no store */
    REQUIRE(store_remote_open(c0, 0, NULL, &rl) == 0);                /* the local node, by the fabric */

    struct mkey *m = make_keys(nkeys * 2, store_key_max(s));
    static uint8_t val[30000];
    /* the first nkeys go in; the second half are never inserted */
    for (unsigned i = 0; i < nkeys; i++) {
        uint32_t vl = random_vlen();
        fill(val, vl, rng());
        int rc = kv_put(s, m[i].k, m[i].kl, val, vl);
        CHECK_EQ(rc, 0);
        if (rc) continue;
        m[i].v = malloc(vl ? vl : 1);
        memcpy(m[i].v, val, vl);
        m[i].vl = vl;
        m[i].present = true;
    }
    remote_check(c1, &r, m, nkeys * 2);
    remote_check(c0, &rl, m, nkeys * 2);
    /* delete a third (tombstones in full buckets), update a third, check; re-insert some */
    for (unsigned i = 0; i < nkeys; i++) {
        if (i % 3 == 0) {
            CHECK_EQ(kv_del(s, m[i].k, m[i].kl), 0);
            m[i].present = false;
        } else if (i % 3 == 1) {
            uint32_t vl = random_vlen();
            fill(val, vl, rng());
            CHECK_EQ(kv_put(s, m[i].k, m[i].kl, val, vl), 0);
            free(m[i].v);
            m[i].v = malloc(vl ? vl : 1);
            memcpy(m[i].v, val, vl);
            m[i].vl = vl;
        }
    }
    remote_check(c1, &r, m, nkeys * 2);
    for (unsigned i = 0; i < nkeys; i += 6) {
        CHECK_EQ(kv_put(s, m[i].k, m[i].kl, m[i].v, m[i].vl), 0);
        m[i].present = true;
    }
    remote_check(c1, &r, m, nkeys * 2);
    store_stats(s, &st);
    fprintf(stderr, "  %llu buckets: %llu used slots, %llu tombstones\n",
            (unsigned long long)st.index_buckets, (unsigned long long)st.index_used_slots,
            (unsigned long long)st.index_tombs);

    /* a garbled index header is refused */
    rptr idx;
    uint64_t isz;
    REQUIRE(fab_region_lookup(c1, 0, "store.index", &idx, &isz) == 0);
    uint64_t *ih = fab_local(e.f[0], idx);
    REQUIRE(ih != NULL);
    uint64_t saved = __atomic_load_n(&ih[1], __ATOMIC_RELAXED);
    __atomic_store_n(&ih[1], saved + 1, __ATOMIC_RELAXED); /* not a power of two */
    CHECK_EQ(store_remote_open(c1, 0, NULL, &none), RDKV_EPROTO);
    __atomic_store_n(&ih[1], saved * 2, __ATOMIC_RELAXED); /* more than the region holds */
    CHECK_EQ(store_remote_open(c1, 0, NULL, &none), RDKV_EPROTO);
    __atomic_store_n(&ih[1], saved, __ATOMIC_RELAXED);
    CHECK_EQ(store_remote_open(c1, 0, NULL, &none), 0);

    /* a hidden copy (a backup's) cannot be opened by a peer until it is published */
    struct store_opts ho = o;
    ho.name = "store.b1";
    ho.hidden = true;
    ho.heap_bytes = 8u << 20;
    struct store *hs = NULL;
    char herr[256];
    REQUIRE(store_open(e.f[0], &ho, &hs, herr, sizeof herr) == 0);
    CHECK_EQ(store_remote_open(c1, 0, "store.b1", &none), RDKV_EUNAVAILABLE);
    CHECK_EQ(store_remote_open(c1, 0, "store.b2", &none), RDKV_ENOTFOUND);
    store_publish(hs);
    CHECK_EQ(store_remote_open(c1, 0, "store.b1", &none), 0);
    CHECK(none.index != r.index);
    store_close(hs);

    fab_ctx_destroy(c0);
    fab_ctx_destroy(c1);
    free_keys(m, nkeys * 2);
    store_close(s);
    tenv_stop(&e);
}

static void t_remote(void) { run_remote(0, 1500); }

/* A small index: long probe sequences across full buckets, tombstones, and the fill limit. */
static void t_index_small(void)
{
    run_remote(64, 400); /* 512 slots, 435 allowed */
    struct tenv e;
    struct store *s;
    struct store_opts o;
    store_opts_init(&o);
    o.index_buckets = 16; /* 128 slots: at most 108 used or tombstones */
    REQUIRE(open_one(&e, 1, &o, &s) == 0);
    char key[16];
    unsigned n = 0;
    int rc;
    for (;; n++) {
        int kl = snprintf(key, sizeof key, "k%u", n);
        rc = kv_put(s, key, (uint32_t)kl, "v", 1);
        if (rc) break;
    }
    CHECK_EQ(rc, RDKV_ENOSPC);
    CHECK_EQ(n, 108);
    struct store_stats st;
    store_stats(s, &st);
    CHECK_EQ(st.rows, 108);
    CHECK_EQ(st.index_used_slots + st.index_tombs, 108);
    /* churn: deletes and inserts of other keys keep working (holes are reused) */
    rng_seed(3);
    bool in[400] = {0};
    for (unsigned i = 0; i < n; i++) in[i] = true;
    for (int op = 0; op < 20000; op++) {
        unsigned i = (unsigned)below(400);
        int kl = snprintf(key, sizeof key, "k%u", i);
        rptr row;
        if (in[i]) {
            CHECK_EQ(kv_del(s, key, (uint32_t)kl), 0);
            in[i] = false;
        } else {
            rc = kv_put(s, key, (uint32_t)kl, "v", 1);
            CHECK(rc == 0 || rc == RDKV_ENOSPC);
            if (rc == 0) in[i] = true;
        }
        if (op % 997 == 0)
            for (unsigned k = 0; k < 400; k++) {
                kl = snprintf(key, sizeof key, "k%u", k);
                CHECK_EQ(store_lookup(s, key, (uint32_t)kl, &row), in[k] ? 0 : RDKV_ENOTFOUND);
            }
    }
    store_stats(s, &st);
    CHECK(st.index_used_slots + st.index_tombs <= 108);
    store_close(s);
    tenv_stop(&e);
}

/* ---- one writer against local lookups and scans and remote probes ---- */

#define CC_STABLE 300
#define CC_CHURN 300

struct cc {
    struct tenv e;
    struct store *s;
    struct mkey *stable, *churn;
    rptr stable_rows[CC_STABLE];
    atomic_bool stop;
    atomic_ulong lookups, scans, probes, skipped;
    int failures;
};

static void cc_fail(struct cc *x, const char *what)
{
    if (__atomic_fetch_add(&x->failures, 1, __ATOMIC_RELAXED) < 5)
        fprintf(stderr, "  concurrent: %s\n", what);
}

static void *cc_writer(void *arg)
{
    struct cc *x = arg;
    uint64_t st = 77;
    static uint8_t val[20000];
    bool in[CC_CHURN] = {0};
    /* at least 20000 changes and 2000 remote probes, within 5 s */
    int64_t end = clock_now_ns() + 5 * NS_PER_S;
    for (int op = 0; (op < 20000 || atomic_load(&x->probes) < 2000) && clock_now_ns() < end;
         op++) {
        unsigned i = (unsigned)rng_below(&st, CC_CHURN);
        struct mkey *k = &x->churn[i];
        if (in[i] && rng_below(&st, 2) == 0) {
            if (kv_del(x->s, k->k, k->kl)) cc_fail(x, "delete");
            in[i] = false;
        } else {
            uint32_t vl = rng_below(&st, 10) == 0 ? 5000 : (uint32_t)rng_below(&st, 200);
            if (kv_put(x->s, k->k, k->kl, val, vl)) cc_fail(x, "put");
            in[i] = true;
        }
    }
    atomic_store(&x->stop, true);
    return NULL;
}

struct cc_scan {
    struct cc *x;
    const uint8_t *prev;
    uint32_t prevlen;
    const uint8_t *lo, *hi;
    uint32_t lolen, hilen;
    unsigned stable_seen;
    bool bad;
};

static bool cc_scan_fn(void *arg, rptr row, const struct row_view *v)
{
    struct cc_scan *c = arg;
    struct row_view w;
    if (v->flags != ROW_LIVE || store_row_view(c->x->s, row, &w) != 0 || w.key != v->key)
        c->bad = true;
    if (c->prev && keycmp(c->prev, c->prevlen, v->key, v->klen) >= 0) c->bad = true;
    if (keycmp(v->key, v->klen, c->lo, c->lolen) < 0 ||
        keycmp(v->key, v->klen, c->hi, c->hilen) >= 0)
        c->bad = true;
    if (v->klen == 4) c->stable_seen++; /* "s" + 3 digits; churn keys are longer */
    c->prev = v->key;
    c->prevlen = v->klen;
    return true;
}

static void *cc_local(void *arg)
{
    struct cc *x = arg;
    uint64_t st = 99;
    while (!atomic_load(&x->stop)) {
        unsigned i = (unsigned)rng_below(&st, CC_STABLE);
        rptr row;
        if (store_lookup(x->s, x->stable[i].k, x->stable[i].kl, &row) != 0 ||
            row != x->stable_rows[i])
            cc_fail(x, "stable key not found by lookup");
        const struct mkey *ch = &x->churn[rng_below(&st, CC_CHURN)];
        int rc = store_lookup(x->s, ch->k, ch->kl, &row);
        if (rc != 0 && rc != RDKV_ENOTFOUND) cc_fail(x, "lookup status");
        atomic_fetch_add(&x->lookups, 2);
        if (rng_below(&st, 8) == 0) {
            /* stable keys are "s" + 3 digits: scan a range of them and the churn around it */
            unsigned a = (unsigned)rng_below(&st, CC_STABLE), b = a + (unsigned)rng_below(&st, 50);
            char lo[8], hi[8];
            snprintf(lo, sizeof lo, "s%03u", a);
            snprintf(hi, sizeof hi, "s%03u", b);
            struct cc_scan c = {.x = x, .lo = (const uint8_t *)lo, .lolen = 4,
                                .hi = (const uint8_t *)hi, .hilen = 4};
            long n = store_scan(x->s, lo, 4, hi, 4, NULL, 0, 0, cc_scan_fn, &c);
            unsigned want = (b < CC_STABLE ? b : CC_STABLE) - a;
            if (n < 0 || c.bad || c.stable_seen != want) cc_fail(x, "scan");
            atomic_fetch_add(&x->scans, 1);
        }
    }
    return NULL;
}

static void *cc_remote(void *arg)
{
    struct cc *x = arg;
    struct fab_ctx *c;
    if (fab_ctx_create(x->e.f[1], &c)) {
        cc_fail(x, "ctx");
        return NULL;
    }
    struct store_remote r;
    if (store_remote_open(c, 0, NULL, &r)) cc_fail(x, "remote open");
    uint64_t st = 1234;
    uint8_t val[20000];
    unsigned skipped = 0;
    while (!atomic_load(&x->stop) && !__atomic_load_n(&x->failures, __ATOMIC_RELAXED)) {
        const struct mkey *k = &x->stable[rng_below(&st, CC_STABLE)];
        int rc = remote_get(c, &r, k->k, k->kl, val, sizeof val, &skipped);
        if (rc != (int)k->vl || memcmp(val, k->v, k->vl) != 0) cc_fail(x, "stable key, remote");
        const struct mkey *ch = &x->churn[rng_below(&st, CC_CHURN)];
        rc = remote_get(c, &r, ch->k, ch->kl, val, sizeof val, &skipped);
        if (rc < 0 && rc != RDKV_ENOTFOUND) cc_fail(x, "churn key, remote status");
        atomic_fetch_add(&x->probes, 2);
    }
    atomic_fetch_add(&x->skipped, skipped);
    fab_ctx_destroy(c);
    return NULL;
}

static void t_concurrent(void)
{
    static struct cc x;
    memset(&x, 0, sizeof x);
    REQUIRE(open_one(&x.e, 2, NULL, &x.s) == 0);
    x.stable = calloc(CC_STABLE, sizeof *x.stable);
    x.churn = calloc(CC_CHURN, sizeof *x.churn);
    for (unsigned i = 0; i < CC_STABLE; i++) {
        char k[8];
        int kl = snprintf(k, sizeof k, "s%03u", i);
        x.stable[i].k = (uint8_t *)strdup(k);
        x.stable[i].kl = (uint32_t)kl;
        x.stable[i].vl = i * 7 % 300;
        x.stable[i].v = malloc(x.stable[i].vl + 1);
        fill(x.stable[i].v, x.stable[i].vl, i);
        CHECK_EQ(kv_put(x.s, k, (uint32_t)kl, x.stable[i].v, x.stable[i].vl), 0);
        CHECK_EQ(store_lookup(x.s, k, (uint32_t)kl, &x.stable_rows[i]), 0);
    }
    for (unsigned i = 0; i < CC_CHURN; i++) {
        /* churn keys sort among the stable ones: "s" + digits + a suffix */
        char k[16];
        int kl = snprintf(k, sizeof k, "s%03u-%u", i % CC_STABLE, i);
        x.churn[i].k = (uint8_t *)strdup(k);
        x.churn[i].kl = (uint32_t)kl;
    }
    pthread_t w, l, r;
    pthread_create(&r, NULL, cc_remote, &x);
    pthread_create(&l, NULL, cc_local, &x);
    pthread_create(&w, NULL, cc_writer, &x);
    pthread_join(w, NULL);
    pthread_join(l, NULL);
    pthread_join(r, NULL);
    CHECK_EQ(x.failures, 0);
    CHECK(atomic_load(&x.lookups) > 0 && atomic_load(&x.probes) > 0);
    fprintf(stderr, "  %lu lookups, %lu scans, %lu remote probes (%lu candidates skipped)\n",
            (unsigned long)atomic_load(&x.lookups), (unsigned long)atomic_load(&x.scans),
            (unsigned long)atomic_load(&x.probes), (unsigned long)atomic_load(&x.skipped));
    for (unsigned i = 0; i < CC_STABLE; i++) {
        free(x.stable[i].k);
        free(x.stable[i].v);
    }
    for (unsigned i = 0; i < CC_CHURN; i++) free(x.churn[i].k);
    free(x.stable);
    free(x.churn);
    store_close(x.s);
    tenv_stop(&x.e);
}

/* A store closed and opened again on the same fabric starts empty. */
static void t_reopen(void)
{
    struct tenv e;
    struct store *s;
    REQUIRE(open_one(&e, 1, NULL, &s) == 0);
    CHECK_EQ(kv_put(s, "a", 1, "1", 1), 0);
    store_close(s);
    char err[256];
    REQUIRE(store_open(e.f[0], NULL, &s, err, sizeof err) == 0);
    rptr row;
    CHECK_EQ(store_lookup(s, "a", 1, &row), RDKV_ENOTFOUND);
    CHECK_EQ(kv_put(s, "a", 1, "2", 1), 0);
    CHECK_EQ(store_lookup(s, "a", 1, &row), 0);
    struct store_stats st;
    store_stats(s, &st);
    CHECK_EQ(st.rows, 1);
    store_close(s);
    tenv_stop(&e);
}

static const struct test_case cases[] = {
    {"open_errors", t_open_errors},
    {"basic", t_basic},
    {"limits", t_limits},
    {"grow_shrink", t_grow_shrink},
    {"model", t_model},
    {"recycle", t_recycle},
    {"exhaust", t_exhaust},
    {"decode", t_decode},
    {"remote", t_remote},
    {"index_small", t_index_small},
    {"concurrent", t_concurrent},
    {"reopen", t_reopen},
};

int main(int argc, char **argv)
{
    return tenv_main(argc, argv, "storage", cases, sizeof cases / sizeof cases[0]);
}
