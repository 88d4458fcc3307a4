/* Unit tests of checkpoints (storage/ckpt.h): a round trip of many keys of every shape into a
 * fresh store, compared key by key and by scan; a checkpoint written while writers keep changing
 * rows under their locks, checked per key against the writers' history; torn files and bit flips
 * refused whole; the older checkpoint used when the newest is damaged; another node's or
 * cluster's file refused; keeping the last two.
 * By hand: test_ckpt --bench N [DIR] writes and loads a checkpoint of N rows of 1 KB and prints
 * the times and the file's size (docs/benchmarks.md, "Checkpoints"). */
#include "tests/harness.h"
#include "tests/testenv.h"

#include "common/clock.h"
#include "common/pack.h"
#include "common/rng.h"
#include "locks/lock.h"
#include "storage/ckpt.h"
#include "storage/store.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ARENA (64ull << 20)
#define NODE 0
#define FP 0x1234abcd5678ef00ull

static uint64_t rng_state = 1;
static uint64_t below(uint64_t n) { return rng_below(&rng_state, n); }

/* ---- helpers ---- */

/* One node with a store and a lock thread for the checkpoint writer. */
struct env {
    struct tenv e;
    struct store *s[2]; /* node 0's, and node 1's when two were started */
    struct fab_ctx *c;
    struct lock_thread lt;
    const struct lock_algo *algo;
    char dir[256];
};

static int env_start(struct env *v, unsigned nodes, uint64_t arena, uint64_t heap)
{
    memset(v, 0, sizeof *v);
    if (tenv_start(&v->e, nodes, arena, NULL)) return -1;
    char err[256];
    struct store_opts o;
    store_opts_init(&o);
    o.heap_bytes = heap;
    for (unsigned i = 0; i < nodes; i++)
        if (store_open(v->e.f[i], &o, &v->s[i], err, sizeof err)) {
            fprintf(stderr, "  store_open: %s\n", err);
            return -1;
        }
    if (fab_ctx_create(v->e.f[0], &v->c) || lock_thread_init(&v->lt, v->c, NULL)) return -1;
    v->algo = lock_algo_find(LOCK_ROW_DEFAULT);
    if (!v->algo || tenv_mkdtemp(v->dir, sizeof v->dir, "rdkv-ckpt")) return -1;
    return 0;
}

static void rm_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.') (void)unlinkat(dirfd(d), de->d_name, 0);
    closedir(d);
    rmdir(dir);
}

static void env_stop(struct env *v)
{
    if (v->c) {
        lock_thread_fini(&v->lt);
        fab_ctx_destroy(v->c);
    }
    for (unsigned i = 0; i < 2; i++)
        if (v->s[i]) store_close(v->s[i]);
    tenv_stop(&v->e);
    if (v->dir[0]) rm_dir(v->dir);
}

static int put(struct store *s, const void *k, uint32_t kl, const void *val, uint32_t vl)
{
    rptr row;
    int rc = store_lookup(s, k, kl, &row);
    if (rc == 0) {
        struct store_staged st;
        if ((rc = store_value_stage(s, row, val, vl, &st))) return rc;
        store_value_install(s, &st);
        return 0;
    }
    if ((rc = store_row_alloc(s, k, kl, val, vl, &row))) return rc;
    if ((rc = store_row_publish(s, row))) store_row_discard(s, row);
    return rc;
}

static int write_ckpt(struct env *v, uint64_t lsn, struct ckpt_info *info)
{
    struct ckpt_write_opts o;
    ckpt_write_opts_init(&o);
    o.row_lock = v->algo;
    o.lt = &v->lt;
    char err[256] = "";
    int rc = ckpt_write(v->s[0], v->dir, NODE, FP, lsn, &o, info, err, sizeof err);
    if (rc) fprintf(stderr, "  ckpt_write: %d %s\n", rc, err);
    return rc;
}

static void fill(uint8_t *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(rng_next(&seed) >> 56);
}

/* Key by key: every row of `from` is in `to` with the same value, and counts agree; then the
 * order of the two scans agrees. */
struct scan_rows {
    uint64_t n, cap;
    uint8_t **keys;
    uint32_t *klen;
};
static bool keep_fn(void *arg, rptr row, const struct row_view *v)
{
    (void)row;
    struct scan_rows *r = arg;
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 1024;
        r->keys = realloc(r->keys, r->cap * sizeof *r->keys);
        r->klen = realloc(r->klen, r->cap * sizeof *r->klen);
        if (!r->keys || !r->klen) abort();
    }
    r->keys[r->n] = malloc(v->klen + 1);
    if (!r->keys[r->n]) abort();
    memcpy(r->keys[r->n], v->key, v->klen);
    r->klen[r->n++] = v->klen;
    return true;
}
static void free_rows(struct scan_rows *r)
{
    for (uint64_t i = 0; i < r->n; i++) free(r->keys[i]);
    free(r->keys);
    free(r->klen);
}

static void same_stores(struct store *a, struct store *b)
{
    struct scan_rows ra = {0}, rb = {0};
    CHECK(store_scan(a, NULL, 0, NULL, 0, NULL, 0, 0, keep_fn, &ra) >= 0);
    CHECK(store_scan(b, NULL, 0, NULL, 0, NULL, 0, 0, keep_fn, &rb) >= 0);
    CHECK_EQ(ra.n, rb.n);
    uint64_t bad = 0;
    for (uint64_t i = 0; i < ra.n && i < rb.n; i++) {
        if (ra.klen[i] != rb.klen[i] || memcmp(ra.keys[i], rb.keys[i], ra.klen[i])) bad++;
        rptr x, y;
        struct row_view vx, vy;
        if (store_lookup(a, ra.keys[i], ra.klen[i], &x) ||
            store_lookup(b, ra.keys[i], ra.klen[i], &y) || store_row_view(a, x, &vx) ||
            store_row_view(b, y, &vy) || vx.vlen != vy.vlen ||
            (vx.vlen && memcmp(vx.val, vy.val, vx.vlen)))
            bad++;
    }
    CHECK_EQ(bad, 0);
    free_rows(&ra);
    free_rows(&rb);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    *len = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return NULL;
    struct stat st;
    uint8_t *b = NULL;
    if (!fstat(fd, &st) && (b = malloc((size_t)st.st_size + 1)) &&
        read(fd, b, (size_t)st.st_size) != st.st_size) {
        free(b);
        b = NULL;
    }
    *len = b ? (size_t)st.st_size : 0;
    close(fd);
    return b;
}
static int spit(const char *path, const uint8_t *b, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return -1;
    ssize_t w = len ? write(fd, b, len) : 0;
    close(fd);
    return w == (ssize_t)len ? 0 : -1;
}

/* A store with many keys: lengths 0..200 (one empty key), values empty, short, up to 1 KiB
 * inline, and 5-20 KB out of line; some keys deleted and some updated again afterwards. */
static unsigned populate(struct store *s, unsigned n, uint64_t seed)
{
    rng_state = seed;
    uint8_t key[256], *val = malloc(20000);
    unsigned live = 0;
    if (!val) return 0;
    for (unsigned i = 0; i < n; i++) {
        uint32_t kl = i == 0 ? 0 : (uint32_t)(4 + below(i % 10 == 0 ? 200 : 16));
        fill(key, kl, i * 7919 + 1);
        if (kl >= 4) memcpy(key, &i, 4); /* distinct */
        uint32_t vl;
        switch (below(5)) {
        case 0: vl = 0; break;
        case 1: vl = (uint32_t)below(64); break;
        case 2: vl = (uint32_t)below(1024); break;
        case 3: vl = 5000 + (uint32_t)below(15000); break;
        default: vl = (uint32_t)below(4000); break;
        }
        fill(val, vl, seed ^ i);
        if (put(s, key, kl, val, vl) == 0) live++;
        if (i % 13 == 5) { /* deleted again */
            rptr row;
            if (!store_lookup(s, key, kl, &row) && !store_row_delete(s, row)) live--;
        } else if (i % 17 == 3) { /* updated: in and out of line */
            vl = vl > 4000 ? 10 : 9000;
            fill(val, vl, seed ^ i ^ 99);
            (void)put(s, key, kl, val, vl);
        }
    }
    free(val);
    return live;
}

/* ---- tests ---- */

static void t_roundtrip(void)
{
    struct env v;
    REQUIRE(env_start(&v, 2, 128ull << 20, 48ull << 20) == 0);
    unsigned live = populate(v.s[0], 3000, 42);
    CHECK(live > 2000);
    struct ckpt_info wi, li;
    REQUIRE(write_ckpt(&v, 77, &wi) == 0);
    CHECK_EQ(wi.rows, live);
    CHECK_EQ(wi.replay_lsn, 77);
    CHECK(wi.blocks >= 2); /* more than a block's worth of values */
    char err[512];
    CHECK_EQ(ckpt_load(v.s[1], v.dir, NODE, FP, &li, err, sizeof err), 0);
    CHECK_EQ(li.rows, live);
    CHECK_EQ(li.replay_lsn, 77);
    CHECK_EQ(li.skipped, 0);
    CHECK_EQ(li.bytes, wi.bytes);
    same_stores(v.s[0], v.s[1]);
    same_stores(v.s[1], v.s[0]);
    struct store_stats st;
    store_stats(v.s[1], &st);
    CHECK_EQ(st.rows, live);
    /* a store that holds rows is refused */
    CHECK_EQ(ckpt_load(v.s[1], v.dir, NODE, FP, &li, err, sizeof err), RDKV_EINVAL);
    env_stop(&v);

    /* no checkpoint yet; then an empty store checkpoints to an empty but valid file */
    REQUIRE(env_start(&v, 2, 64ull << 20, 16ull << 20) == 0);
    CHECK_EQ(ckpt_load(v.s[1], v.dir, NODE, FP, &li, err, sizeof err), RDKV_ENOTFOUND);
    REQUIRE(write_ckpt(&v, 1, &wi) == 0);
    CHECK_EQ(wi.rows, 0);
    CHECK_EQ(ckpt_load(v.s[1], v.dir, NODE, FP, &li, err, sizeof err), 0);
    CHECK_EQ(li.rows, 0);
    /* a store holding only the empty key, with an empty value */
    REQUIRE(put(v.s[0], "", 0, "", 0) == 0);
    REQUIRE(write_ckpt(&v, 2, &wi) == 0);
    CHECK_EQ(wi.rows, 1);
    CHECK_EQ(ckpt_load(v.s[1], v.dir, NODE, FP, &li, err, sizeof err), 0);
    CHECK_EQ(li.rows, 1);
    same_stores(v.s[0], v.s[1]);
    env_stop(&v);
}

/* Writers change rows under their exclusive locks while the checkpoint runs; each key's value
 * says (key, sequence number), and each writer publishes the key's last sequence number before
 * it releases the lock. The checkpoint's value of a key must be one the key held during the
 * checkpoint: sequence in [last at start, last at end], and exactly that sequence's bytes. */
#define CC_KEYS 2000
#define CC_WRITERS 2
#define CC_ROUNDS 12
/* every fifth change of a key deletes it, and the next one inserts it again: after change
 * number seq the key is absent exactly when CC_ABSENT(seq) */
#define CC_ABSENT(seq) ((seq) % 5 == 4)
struct cc {
    struct env *v;
    atomic_uint_fast64_t last[CC_KEYS];
    atomic_bool stop;
    atomic_uint_fast64_t changes, deletes;
    atomic_int fails;
    unsigned id;
};

#define CC_HOT 32 /* keys that writers change half of the time, with large values */
#define CC_VMAX 40000
static uint32_t cc_vlen(unsigned k, uint64_t seq)
{
    if (k < CC_HOT) return 32768 + (uint32_t)(seq % 3) * 1000;
    /* sizes move between short, inline and out of line */
    switch ((k + seq) % 4) {
    case 0: return 16;
    case 1: return 300;
    case 2: return 6000;
    default: return 16 + (uint32_t)(seq % 700);
    }
}
static void cc_val(uint8_t *b, unsigned k, uint64_t seq, uint32_t vl)
{
    fill(b, vl, (uint64_t)k << 32 ^ seq);
    memcpy(b, &k, 4);
    memcpy(b + 4, &seq, 8);
}

struct cc_arg {
    struct cc *cc;
    unsigned w;
};

static void *cc_writer(void *arg)
{
    struct cc_arg *a = arg;
    struct cc *cc = a->cc;
    struct fab_ctx *c;
    struct lock_thread lt;
    if (fab_ctx_create(cc->v->e.f[0], &c) || lock_thread_init(&lt, c, NULL)) {
        atomic_fetch_add(&cc->fails, 1);
        return NULL;
    }
    uint8_t *val = malloc(CC_VMAX);
    uint64_t seed = a->w + 1;
    /* bounded: stops when told, or after 10 million changes */
    for (uint64_t n = 0; n < 10000000 && !atomic_load(&cc->stop) && val; n++) {
        unsigned k = (unsigned)(rng_below(&seed, (rng_next(&seed) & 1) ? CC_HOT / CC_WRITERS
                                                                        : CC_KEYS / CC_WRITERS)) *
                         CC_WRITERS +
                     a->w;
        char key[16];
        snprintf(key, sizeof key, "cc%06u", k);
        uint64_t seq = atomic_load(&cc->last[k]) + 1;
        uint32_t vl = cc_vlen(k, seq);
        cc_val(val, k, seq, vl);
        rptr row;
        struct lock_handle h;
        if (CC_ABSENT(seq - 1)) {
            /* re-insert: a new row, locked before it is published, so that the key's sequence
             * number is up to date before anyone can read the row */
            if (store_row_alloc(cc->v->s[0], key, 8, val, vl, &row)) {
                atomic_fetch_add(&cc->fails, 1);
                break;
            }
            lock_handle_init(&h, &lt, cc->v->algo, row);
            if (lock_acquire(&h, LOCK_EXCLUSIVE, clock_now_ns() + 2000000000ll) ||
                store_row_publish(cc->v->s[0], row)) {
                atomic_fetch_add(&cc->fails, 1);
                break;
            }
            atomic_store(&cc->last[k], seq);
            atomic_fetch_add(&cc->changes, 1);
            lock_release(&h);
            continue;
        }
        if (store_lookup(cc->v->s[0], key, 8, &row)) {
            atomic_fetch_add(&cc->fails, 1);
            break;
        }
        lock_handle_init(&h, &lt, cc->v->algo, row);
        if (lock_acquire(&h, LOCK_EXCLUSIVE, clock_now_ns() + 2000000000ll)) continue;
        if (CC_ABSENT(seq)) {
            if (store_row_delete(cc->v->s[0], row) == 0) {
                atomic_store(&cc->last[k], seq);
                atomic_fetch_add(&cc->changes, 1);
                atomic_fetch_add(&cc->deletes, 1);
            } else {
                atomic_fetch_add(&cc->fails, 1);
            }
            lock_release(&h);
            continue;
        }
        struct store_staged st;
        if (store_value_stage(cc->v->s[0], row, val, vl, &st) == 0) {
            store_value_install(cc->v->s[0], &st);
            atomic_store(&cc->last[k], seq);
            atomic_fetch_add(&cc->changes, 1);
        } else {
            atomic_fetch_add(&cc->fails, 1);
        }
        lock_release(&h);
    }
    free(val);
    lock_thread_fini(&lt);
    fab_ctx_destroy(c);
    return NULL;
}

struct cc_check {
    struct cc *cc;
    uint64_t *lo, *hi;
    uint64_t rows, bad;
    uint8_t *tmp;
    bool present[CC_KEYS];
};
static int cc_check_row(void *arg, const void *key, uint32_t klen, const void *val, uint32_t vl)
{
    struct cc_check *x = arg;
    x->rows++;
    unsigned k;
    uint64_t seq;
    if (klen != 8 || sscanf((const char *)key + 2, "%6u", &k) != 1 || k >= CC_KEYS || vl < 12) {
        x->bad++;
        return 0;
    }
    memcpy(&seq, (const uint8_t *)val + 4, 8);
    x->present[k] = true;
    if (seq < x->lo[k] || seq > x->hi[k] || vl != cc_vlen(k, seq) || CC_ABSENT(seq)) {
        fprintf(stderr, "  key %u: seq %" PRIu64 " not in [%" PRIu64 ", %" PRIu64 "]\n", k, seq,
                x->lo[k], x->hi[k]);
        x->bad++;
        return 0;
    }
    cc_val(x->tmp, k, seq, vl);
    if (memcmp(x->tmp, val, vl)) x->bad++;
    return 0;
}

static void t_concurrent(void)
{
    struct env v;
    REQUIRE(env_start(&v, 1, 128ull << 20, 64ull << 20) == 0);
    struct cc *cc = calloc(1, sizeof *cc);
    REQUIRE(cc);
    cc->v = &v;
    uint8_t *val = malloc(CC_VMAX);
    REQUIRE(val);
    for (unsigned k = 0; k < CC_KEYS; k++) {
        char key[16];
        snprintf(key, sizeof key, "cc%06u", k);
        cc_val(val, k, 0, cc_vlen(k, 0));
        REQUIRE(put(v.s[0], key, 8, val, cc_vlen(k, 0)) == 0);
    }
    pthread_t th[CC_WRITERS];
    struct cc_arg args[CC_WRITERS];
    for (unsigned w = 0; w < CC_WRITERS; w++) {
        args[w] = (struct cc_arg){cc, w};
        REQUIRE(pthread_create(&th[w], NULL, cc_writer, &args[w]) == 0);
    }
    /* wait (bounded) until the writers are going */
    int64_t until = clock_now_ns() + 10000000000ll;
    while (atomic_load(&cc->changes) < 1000 && clock_now_ns() < until) usleep(1000);
    uint64_t *lo = malloc(CC_KEYS * 8), *hi = malloc(CC_KEYS * 8);
    REQUIRE(lo && hi);
    uint64_t rounds_changed = 0;
    for (unsigned round = 0; round < CC_ROUNDS; round++) {
        for (unsigned k = 0; k < CC_KEYS; k++) lo[k] = atomic_load(&cc->last[k]);
        uint64_t before = atomic_load(&cc->changes);
        struct ckpt_info wi;
        CHECK_EQ(write_ckpt(&v, 100 + round, &wi), 0);
        uint64_t after = atomic_load(&cc->changes);
        for (unsigned k = 0; k < CC_KEYS; k++) hi[k] = atomic_load(&cc->last[k]);
        if (after > before) rounds_changed++;
        char path[512];
        snprintf(path, sizeof path, "%s/ckpt-%016llx.ckpt", v.dir, 100ull + round);
        size_t len;
        uint8_t *buf = slurp(path, &len);
        REQUIRE(buf);
        struct cc_check *x = calloc(1, sizeof *x);
        REQUIRE(x);
        *x = (struct cc_check){.cc = cc, .lo = lo, .hi = hi, .tmp = val};
        char err[256];
        CHECK_EQ(ckpt_decode(buf, len, NODE, FP, 4096, 1u << 20, cc_check_row, x, NULL, err,
                             sizeof err),
                 0);
        CHECK_EQ(x->rows, wi.rows);
        CHECK_EQ(x->bad, 0);
        /* a key left out was absent at some moment of the checkpoint: some change number in
         * [lo, hi] left it deleted */
        uint64_t absent_bad = 0, absent = 0;
        for (unsigned k = 0; k < CC_KEYS; k++) {
            if (x->present[k]) continue;
            absent++;
            uint64_t first = lo[k] + (4 + 5 - lo[k] % 5) % 5;
            if (first > hi[k]) absent_bad++;
        }
        CHECK_EQ(absent_bad, 0);
        CHECK_EQ(x->rows + absent, CC_KEYS);
        free(x);
        free(buf);
    }
    atomic_store(&cc->stop, true);
    for (unsigned w = 0; w < CC_WRITERS; w++) pthread_join(th[w], NULL);
    CHECK_EQ(atomic_load(&cc->fails), 0);
    /* the writers did change rows while checkpoints ran (else this test proves nothing) */
    CHECK(rounds_changed > 0);
    CHECK(atomic_load(&cc->deletes) > 0);
    /* the two newest are kept */
    uint64_t lsns[4];
    CHECK_EQ(ckpt_list(v.dir, lsns, 4), 2);
    CHECK_EQ(lsns[0], 100 + CC_ROUNDS - 1);
    CHECK_EQ(lsns[1], 100 + CC_ROUNDS - 2);
    free(lo);
    free(hi);
    free(val);
    free(cc);
    env_stop(&v);
}

static int count_row(void *arg, const void *k, uint32_t kl, const void *val, uint32_t vl)
{
    (void)k, (void)kl, (void)val, (void)vl;
    (*(uint64_t *)arg)++;
    return 0;
}

/* Every cut and many bit flips are refused whole: the row callback is never called. */
static void t_damage(void)
{
    struct env v;
    REQUIRE(env_start(&v, 1, 64ull << 20, 32ull << 20) == 0);
    populate(v.s[0], 800, 7);
    struct ckpt_info wi;
    REQUIRE(write_ckpt(&v, 5, &wi) == 0);
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/ckpt-%016llx.ckpt", v.dir, 5ull);
    size_t len;
    uint8_t *buf = slurp(path, &len);
    REQUIRE(buf && len == wi.bytes);
    uint64_t calls = 0;
    CHECK_EQ(ckpt_decode(buf, len, NODE, FP, 4096, 1u << 20, count_row, &calls, NULL, err,
                         sizeof err),
             0);
    CHECK_EQ(calls, wi.rows);
    rng_state = 99;
    uint64_t refused = 0;
    /* every cut in the first and last 300 bytes, and 500 random ones */
    for (unsigned i = 0; i < 1100; i++) {
        size_t cut = i < 300 ? i : (i < 600 ? len - 1 - (i - 300) : (size_t)below(len));
        calls = 0;
        int rc = ckpt_decode(buf, cut, NODE, FP, 4096, 1u << 20, count_row, &calls, NULL, err,
                             sizeof err);
        if (rc == RDKV_EPROTO && calls == 0) refused++;
    }
    CHECK_EQ(refused, 1100);
    refused = 0;
    for (unsigned i = 0; i < 2000; i++) {
        size_t at = i < 64 * 8 ? i / 8 : (i < 1024 ? len - 1 - (i - 512) / 8 : (size_t)below(len));
        uint8_t bit = (uint8_t)(1u << (i % 8));
        buf[at] ^= bit;
        calls = 0;
        int rc = ckpt_decode(buf, len, NODE, FP, 4096, 1u << 20, count_row, &calls, NULL, err,
                             sizeof err);
        buf[at] ^= bit;
        if (rc != 0 && calls == 0) refused++;
    }
    CHECK_EQ(refused, 2000);
    /* bytes after the trailer */
    uint8_t *longer = malloc(len + 1);
    REQUIRE(longer);
    memcpy(longer, buf, len);
    longer[len] = 0;
    CHECK_EQ(ckpt_decode(longer, len + 1, NODE, FP, 4096, 1u << 20, NULL, NULL, NULL, err,
                         sizeof err),
             RDKV_EPROTO);
    free(longer);
    /* another node's or cluster's file */
    CHECK_EQ(ckpt_decode(buf, len, NODE + 1, FP, 4096, 1u << 20, NULL, NULL, NULL, err,
                         sizeof err),
             RDKV_ECONFIG);
    CHECK(strstr(err, "node") != NULL);
    CHECK_EQ(ckpt_decode(buf, len, NODE, FP ^ 1, 4096, 1u << 20, NULL, NULL, NULL, err,
                         sizeof err),
             RDKV_ECONFIG);
    /* a store whose limits are lower than the rows' */
    CHECK_EQ(ckpt_decode(buf, len, NODE, FP, 4096, 100, NULL, NULL, NULL, err, sizeof err),
             RDKV_ETOOBIG);
    free(buf);
    env_stop(&v);
}

/* The newest checkpoint damaged on disk: the older one is loaded, and says so; both damaged: a
 * clear refusal and an empty store; another node's or cluster's files refused. */
static void t_fallback(void)
{
    struct env v;
    REQUIRE(env_start(&v, 2, 96ull << 20, 32ull << 20) == 0);
    unsigned live1 = populate(v.s[0], 500, 3);
    struct ckpt_info wi;
    REQUIRE(write_ckpt(&v, 10, &wi) == 0);
    CHECK_EQ(wi.rows, live1);
    uint8_t more[100] = {0};
    REQUIRE(put(v.s[0], "zz-later", 8, more, sizeof more) == 0);
    REQUIRE(write_ckpt(&v, 20, &wi) == 0);
    CHECK_EQ(wi.rows, live1 + 1);
    char newest[512], older[512], err[1024];
    snprintf(newest, sizeof newest, "%s/ckpt-%016llx.ckpt", v.dir, 20ull);
    snprintf(older, sizeof older, "%s/ckpt-%016llx.ckpt", v.dir, 10ull);
    size_t nlen, olen;
    uint8_t *nb = slurp(newest, &nlen), *ob = slurp(older, &olen);
    REQUIRE(nb && ob);

    /* other node, other cluster: refused, nothing loaded */
    struct ckpt_info li;
    CHECK_EQ(ckpt_load(v.s[1], v.dir, NODE + 1, FP, &li, err, sizeof err), RDKV_ECONFIG);
    CHECK_EQ(ckpt_load(v.s[1], v.dir, NODE, FP + 1, &li, err, sizeof err), RDKV_ECONFIG);
    struct store_stats st;
    store_stats(v.s[1], &st);
    CHECK_EQ(st.rows, 0);

    /* the newest torn in the middle */
    REQUIRE(spit(newest, nb, nlen / 2) == 0);
    CHECK_EQ(ckpt_load(v.s[1], v.dir, NODE, FP, &li, err, sizeof err), 0);
    CHECK_EQ(li.replay_lsn, 10);
    CHECK_EQ(li.skipped, 1);
    CHECK_EQ(li.rows, live1);
    CHECK(strstr(err, "ckpt-0000000000000014.ckpt") != NULL);
    rptr row;
    CHECK_EQ(store_lookup(v.s[1], "zz-later", 8, &row), RDKV_ENOTFOUND);
    store_close(v.s[1]);
    v.s[1] = NULL;

    /* the newest with a bit flipped, the older torn too: refused, with both reasons */
    struct store_opts o;
    store_opts_init(&o);
    o.heap_bytes = 32ull << 20;
    REQUIRE(store_open(v.e.f[1], &o, &v.s[1], err, sizeof err) == 0);
    nb[nlen / 3] ^= 4;
    REQUIRE(spit(newest, nb, nlen) == 0);
    REQUIRE(spit(older, ob, olen - 1) == 0);
    CHECK_EQ(ckpt_load(v.s[1], v.dir, NODE, FP, &li, err, sizeof err), RDKV_EPROTO);
    CHECK(strstr(err, "ckpt-0000000000000014.ckpt") && strstr(err, "ckpt-000000000000000a.ckpt"));
    store_stats(v.s[1], &st);
    CHECK_EQ(st.rows, 0);
    /* a file whose name disagrees with its header's replay LSN */
    REQUIRE(unlink(newest) == 0);
    char renamed[512];
    snprintf(renamed, sizeof renamed, "%s/ckpt-%016llx.ckpt", v.dir, 11ull);
    REQUIRE(spit(renamed, ob, olen) == 0);
    CHECK_EQ(ckpt_load(v.s[1], v.dir, NODE, FP, &li, err, sizeof err), RDKV_EPROTO);
    store_stats(v.s[1], &st);
    CHECK_EQ(st.rows, 0);
    free(nb);
    free(ob);
    env_stop(&v);
}

/* A row whose exclusive lock is held: the checkpoint waits for it in short tries and copies
 * it once it is released; held past row_give_up_ns, the checkpoint fails with RDKV_ETIMEDOUT and
 * leaves nothing behind. */
struct holder {
    struct env *v;
    rptr row;
    atomic_int state; /* 1: holding, 2: done */
    int64_t hold_ns;
};
static void *hold_thread(void *arg)
{
    struct holder *h = arg;
    struct fab_ctx *c;
    struct lock_thread lt;
    if (fab_ctx_create(h->v->e.f[0], &c) || lock_thread_init(&lt, c, NULL)) {
        atomic_store(&h->state, 2);
        return NULL;
    }
    struct lock_handle lk;
    lock_handle_init(&lk, &lt, h->v->algo, h->row);
    if (lock_acquire(&lk, LOCK_EXCLUSIVE, clock_now_ns() + 5000000000ll) == 0) {
        atomic_store(&h->state, 1);
        struct timespec ts = {0, h->hold_ns};
        nanosleep(&ts, NULL); /* the hold itself, not a synchronization */
        lock_release(&lk);
    }
    atomic_store(&h->state, 2);
    lock_thread_fini(&lt);
    fab_ctx_destroy(c);
    return NULL;
}

static void t_locked(void)
{
    struct env v;
    REQUIRE(env_start(&v, 1, 64ull << 20, 16ull << 20) == 0);
    char key[16];
    uint8_t val[64] = {1};
    for (unsigned i = 0; i < 300; i++) {
        snprintf(key, sizeof key, "k%04u", i);
        REQUIRE(put(v.s[0], key, 5, val, sizeof val) == 0);
    }
    struct holder h = {.v = &v, .hold_ns = 100000000};
    REQUIRE(store_lookup(v.s[0], "k0150", 5, &h.row) == 0);
    for (int round = 0; round < 2; round++) {
        atomic_store(&h.state, 0);
        pthread_t th;
        REQUIRE(pthread_create(&th, NULL, hold_thread, &h) == 0);
        int64_t until = clock_now_ns() + 10000000000ll;
        while (atomic_load(&h.state) == 0 && clock_now_ns() < until) usleep(100);
        REQUIRE(atomic_load(&h.state) == 1);
        struct ckpt_write_opts o;
        ckpt_write_opts_init(&o);
        o.row_lock = v.algo;
        o.lt = &v.lt;
        struct ckpt_info wi;
        char err[256] = "";
        if (round == 0) {
            /* give up long before the holder lets go */
            o.row_give_up_ns = 5000000;
            CHECK_EQ(ckpt_write(v.s[0], v.dir, NODE, FP, 9, &o, &wi, err, sizeof err),
                     RDKV_ETIMEDOUT);
            CHECK(strstr(err, "locked") != NULL);
            uint64_t l[2];
            CHECK_EQ(ckpt_list(v.dir, l, 2), 0);
            DIR *d = opendir(v.dir);
            unsigned files = 0;
            struct dirent *de;
            while (d && (de = readdir(d)))
                if (de->d_name[0] != '.') files++;
            if (d) closedir(d);
            CHECK_EQ(files, 0); /* no temporary file left */
        } else {
            /* wait it out */
            CHECK_EQ(ckpt_write(v.s[0], v.dir, NODE, FP, 9, &o, &wi, err, sizeof err), 0);
            CHECK_EQ(wi.rows, 300);
        }
        pthread_join(th, NULL);
        CHECK(!lock_thread_owes(&v.lt));
    }
    env_stop(&v);
}

/* ckpt_stream: the rows of a checkpoint handed to a sink (re-replication's copy) -- each batch
 * decodes with ckpt_rows_decode into another store that then equals the first; a batch cut
 * short, or with keys out of order, is refused whole before any row reaches the callback. */
struct sink {
    struct store *to;
    uint64_t rows, batches, maxlen;
    uint8_t *first; /* the first batch, kept */
    size_t flen;
    uint32_t fn;
};

static int apply_row(void *arg, const void *k, uint32_t kl, const void *v, uint32_t vl)
{
    return store_apply(arg, false, k, kl, v, vl);
}

static int to_store(void *arg, const uint8_t *rows, size_t len, uint32_t n)
{
    struct sink *x = arg;
    x->batches++;
    x->rows += n;
    if (len > x->maxlen) x->maxlen = len;
    if (!x->first && (x->first = malloc(len))) {
        memcpy(x->first, rows, len);
        x->flen = len;
        x->fn = n;
    }
    char err[160];
    return ckpt_rows_decode(rows, len, n, 1024, 1u << 20, apply_row, x->to, err, sizeof err);
}

static int count_only(void *arg, const void *k, uint32_t kl, const void *v, uint32_t vl)
{
    (void)k, (void)kl, (void)v, (void)vl;
    ++*(unsigned *)arg;
    return 0;
}

static void t_stream(void)
{
    struct env v;
    REQUIRE(env_start(&v, 2, 128ull << 20, 48ull << 20) == 0);
    unsigned live = populate(v.s[0], 3000, 7);
    struct ckpt_write_opts o;
    ckpt_write_opts_init(&o);
    o.row_lock = v.algo;
    o.lt = &v.lt;
    struct sink x = {.to = v.s[1]};
    struct ckpt_info info;
    REQUIRE(ckpt_stream(v.s[0], &o, 64u << 10, to_store, &x, &info) == 0);
    CHECK_EQ(x.rows, live);
    CHECK_EQ(info.rows, live);
    CHECK(x.batches >= 2);
    CHECK(x.maxlen < (64u << 10) + (1u << 20) + 16); /* (a batch ends after the row past 64K) */
    same_stores(v.s[0], v.s[1]);
    same_stores(v.s[1], v.s[0]);
    /* damaged batches: nothing of them is handed on */
    REQUIRE(x.first && x.fn > 1);
    char err[160];
    unsigned seen = 0;
    CHECK_EQ(ckpt_rows_decode(x.first, x.flen - 1, x.fn, 1024, 1u << 20, NULL, NULL, err,
                              sizeof err), RDKV_EPROTO);
    CHECK_EQ(ckpt_rows_decode(x.first, x.flen, x.fn + 1, 1024, 1u << 20, NULL, NULL, err,
                              sizeof err), RDKV_EPROTO);
    CHECK_EQ(ckpt_rows_decode(x.first, x.flen, x.fn, 1024, 1u << 20, count_only, &seen, err,
                              sizeof err), 0);
    CHECK_EQ(seen, x.fn);
    /* the first two rows swapped: out of order */
    uint32_t k0 = pack_get_u32le(x.first), v0 = pack_get_u32le(x.first + 4);
    size_t r0 = 8 + (size_t)k0 + v0;
    uint32_t k1 = pack_get_u32le(x.first + r0), v1 = pack_get_u32le(x.first + r0 + 4);
    size_t r1 = 8 + (size_t)k1 + v1;
    uint8_t *sw = malloc(x.flen);
    REQUIRE(sw != NULL);
    memcpy(sw, x.first + r0, r1);
    memcpy(sw + r1, x.first, r0);
    memcpy(sw + r0 + r1, x.first + r0 + r1, x.flen - r0 - r1);
    CHECK_EQ(ckpt_rows_decode(sw, x.flen, x.fn, 1024, 1u << 20, NULL, NULL, err, sizeof err),
             RDKV_EPROTO);
    CHECK(strstr(err, "order") != NULL);
    free(sw);
    free(x.first);
    env_stop(&v);
}

static const struct test_case cases[] = {
    {"roundtrip", t_roundtrip},
    {"stream", t_stream},
    {"concurrent", t_concurrent},
    {"damage", t_damage},
    {"fallback", t_fallback},
    {"locked", t_locked},
};

/* ---- by hand: --bench N [DIR] ---- */

static int bench(uint64_t n, const char *dir)
{
    struct env v;
    /* a row of 1 KB: 16-byte key, 1008-byte value, 1152 bytes of heap with its header */
    uint64_t heap = n * 1280 + (64ull << 20);
    if (env_start(&v, 2, heap + heap / 4 + (64ull << 20), heap)) {
        fprintf(stderr, "cannot start the nodes\n");
        return 1;
    }
    if (dir) snprintf(v.dir, sizeof v.dir, "%s", dir), mkdir(dir, 0700);
    uint8_t val[1008];
    char key[32];
    int64_t t0 = clock_now_ns();
    for (uint64_t i = 0; i < n; i++) {
        snprintf(key, sizeof key, "user%012" PRIu64, i);
        fill(val, sizeof val, i);
        if (put(v.s[0], key, 16, val, sizeof val)) {
            fprintf(stderr, "populate failed at %" PRIu64 "\n", i);
            return 1;
        }
    }
    int64_t t1 = clock_now_ns();
    struct ckpt_info wi, li;
    if (write_ckpt(&v, 1, &wi)) return 1;
    int64_t t2 = clock_now_ns();
    char err[512];
    /* the parts of a load: reading the file, checking it whole */
    size_t len;
    uint8_t *img = slurp(wi.path, &len);
    int64_t tr = clock_now_ns();
    int vrc = img ? ckpt_decode(img, len, NODE, FP, 4096, 1u << 20, NULL, NULL, NULL, err,
                                sizeof err)
                  : -1;
    int64_t tv = clock_now_ns();
    free(img);
    if (vrc) {
        fprintf(stderr, "verify: %d %s\n", vrc, err);
        return 1;
    }
    int64_t t2b = clock_now_ns();
    int rc = ckpt_load(v.s[1], v.dir, NODE, FP, &li, err, sizeof err);
    int64_t t3 = clock_now_ns();
    if (rc) {
        fprintf(stderr, "load: %d %s\n", rc, err);
        return 1;
    }
    printf("rows %" PRIu64 " populate_s %.3f write_s %.3f row_hold_us mean %.2f max %.1f "
           "file_bytes %" PRIu64 " (load: read_s %.3f verify_s %.3f) load_s %.3f\n",
           n, (t1 - t0) / 1e9, (t2 - t1) / 1e9,
           wi.holds ? (double)wi.hold_ns / (double)wi.holds / 1e3 : 0.0, wi.max_hold_ns / 1e3,
           wi.bytes, (tr - t2) / 1e9, (tv - tr) / 1e9, (t3 - t2b) / 1e9);
    int ok = li.rows == n && wi.rows == n;
    if (!dir) env_stop(&v);
    else {
        v.dir[0] = 0;
        env_stop(&v);
    }
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "--bench"))
        return bench(strtoull(argv[2], NULL, 10), argc >= 4 ? argv[3] : NULL);
    return tenv_main(argc, argv, "checkpoints", cases, sizeof cases / sizeof cases[0]);
}
