/* Finding, locking and reading rows (coord.h): a key's candidate row comes from the owner's hash
 * index (a plain lookup on this node, one-sided READs of the peer's index otherwise, or the
 * node's location cache). The row lock is taken first and the row read after, so what is read is
 * what the lock protects; a row whose key or state is not the one looked for (deleted, recycled
 * for another key) is let go and the key looked up again. A key with no row is locked by its
 * point {k} in the owner's key space (the whole key: the owner compares keys as bytes), in the
 * same mode, and looked up once more under that lock: inserts and deletes need {k} exclusively,
 * so the absence stays true until the transaction ends. */
#include "txn/coord.h"

#include <stdlib.h>
#include <string.h>

#define LOC_SETS 131072u       /* remote row locations per node: 2-way sets (6 MiB, touched */
#define LOC_WAYS 2u            /* only as used) */
#define LOCATE_TRIES 8

/* The location cache: where rows of other nodes were found, shared by every thread of the node
 * (with one per worker, 16 tasks per thread each missed most uniform reads and paid the index
 * probe; with one per thread, each workload run started cold). Entries are hints -- a row is
 * always checked (its key, under its lock or by a quiet read) before it is used -- and count only
 * for the incarnation of the node they were found in (a restarted node's rows sit elsewhere).
 * Threads read and write them without a lock, as a seqlock: a writer makes seq odd, writes the
 * fields, makes it even again (a writer finding it odd skips its store: it is a cache); a reader
 * keeps what it read only if seq was even and the same before and after, so it never mixes two
 * stores' fields (a row of one incarnation with another's number). */
struct loc {
    uint64_t seq;
    uint64_t hash;
    rptr row;
    uint64_t readlen;
    uint64_t inc;
};


struct loc *txn_locs_create(void)
{
    return calloc((size_t)LOC_SETS * LOC_WAYS, sizeof(struct loc));
}

int txn_remote_of(struct txn *t, uint16_t pid, uint16_t node, const struct store_remote **out)
{
    struct txn_worker *w = t->w;
    /* (one per partition: valid for the node and the incarnation it was opened at) */
    if (!w->rem_ok[pid] || w->rnode[pid] != node || w->cinc[pid] != t->pinc[node]) {
        w->rem_ok[pid] = 0;
        const char *name = w->e->route[pid].name;
        int rc = store_remote_open(w->c, node, name[0] ? name : NULL, &w->rem[pid]);
        if (rc == RDKV_EUNAVAILABLE) return txn_fail(t, rc); /* (not served there yet) */
        if (rc) return txn_classify(t, rc, node);
        w->rem_ok[pid] = 1;
        w->rnode[pid] = node;
        w->cinc[pid] = t->pinc[node];
    }
    *out = &w->rem[pid];
    return 0;
}

/* The transaction's first operation on another node: which incarnation of it the transaction
 * works with, from now on the only one its posts there reach (t->pinc). A worker's knowledge of
 * an earlier incarnation -- the index's layout -- is dropped, and cached row locations count only
 * for the incarnation they were found in (struct loc's inc): a restarted node replays its log
 * into a fresh arena, and a row's old address may be anything there now. */
int txn_touch(struct txn *t, uint16_t node)
{
    struct txn_worker *w = t->w;
    if (node == w->e->me || t->pinc[node]) return 0;
    uint64_t inc;
    int rc = fab_peer_incarnation(w->c, node, true, &inc);
    if (rc) return txn_classify(t, rc, node);
    t->pinc[node] = inc;
    return 0;
}

static struct loc *loc_set(const struct txn_env *e, uint64_t hash)
{
    return &e->loc[(hash & (LOC_SETS - 1)) * LOC_WAYS];
}

/* One entry as one store left it: true and *out, or false (being written, or changed while read). */
static bool loc_read(struct loc *l, struct loc *out)
{
    uint64_t seq = __atomic_load_n(&l->seq, __ATOMIC_ACQUIRE);
    if (seq & 1) return false;
    out->hash = __atomic_load_n(&l->hash, __ATOMIC_RELAXED);
    out->row = __atomic_load_n(&l->row, __ATOMIC_RELAXED);
    out->readlen = __atomic_load_n(&l->readlen, __ATOMIC_RELAXED);
    out->inc = __atomic_load_n(&l->inc, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&l->seq, __ATOMIC_RELAXED) == seq;
}

static void loc_store(struct loc *l, uint64_t hash, rptr row, uint64_t readlen, uint64_t inc)
{
    uint64_t seq = __atomic_load_n(&l->seq, __ATOMIC_RELAXED);
    if ((seq & 1) || !__atomic_compare_exchange_n(&l->seq, &seq, seq + 1, false,
                                                  __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return; /* another thread is writing it */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&l->hash, hash, __ATOMIC_RELAXED);
    __atomic_store_n(&l->row, row, __ATOMIC_RELAXED);
    __atomic_store_n(&l->readlen, readlen, __ATOMIC_RELAXED);
    __atomic_store_n(&l->inc, inc, __ATOMIC_RELAXED);
    __atomic_store_n(&l->seq, seq + 2, __ATOMIC_RELEASE);
}

/* The cached location of the key with this hash in incarnation inc of its node: true and *out
 * (a row, never RPTR_NULL). */
static bool cache_get(const struct txn_env *e, uint64_t hash, uint64_t inc, struct loc *out)
{
    struct loc *set = loc_set(e, hash);
    for (unsigned i = 0; i < LOC_WAYS; i++)
        if (loc_read(&set[i], out) && out->hash == hash)
            return out->row && out->inc == inc;
    return false;
}

bool txn_cache_get(const struct txn_env *e, uint64_t hash, uint64_t inc, rptr *row,
                   uint32_t *readlen)
{
    struct loc l;
    if (!cache_get(e, hash, inc, &l)) return false;
    *row = l.row;
    *readlen = (uint32_t)l.readlen;
    return true;
}

/* Candidate rows for en's key: at most max, or a status. from_cache tells the caller that the
 * one candidate came from the location cache (a miss there is not an absence). */
static int candidates(struct txn *t, struct tent *en, rptr *c, unsigned max, bool use_cache,
                      bool *from_cache)
{
    struct txn_worker *w = t->w;
    struct txn_env *e = w->e;
    *from_cache = false;
    if (en->part == e->me) {
        struct store *st = txn_pstore_as(e, en->pid, w->adopting);
        if (!st) return txn_fail(t, RDKV_EUNAVAILABLE); /* (served elsewhere now, or not yet) */
        int rc = store_lookup(st, en->key, en->klen, &c[0]);
        if (rc == RDKV_ENOTFOUND) return 0;
        return rc ? rc : 1;
    }
    if (txn_down(e, en->part)) return RDKV_EUNAVAILABLE;
    int rc = txn_touch(t, en->part);
    if (rc) return rc;
    struct loc l;
    if (use_cache && cache_get(e, en->hash, t->pinc[en->part], &l)) {
        w->stats.cache_hits++;
        c[0] = l.row;
        *from_cache = true;
        return 1;
    }
    w->stats.cache_misses++;
    const struct store_remote *r = NULL;
    rc = txn_remote_of(t, en->pid, en->part, &r);
    if (rc) return rc;
    rc = store_remote_probe(w->c, r, en->hash, c, max);
    return rc < 0 ? txn_classify(t, rc, en->part) : rc;
}

static void cache_put(struct txn *t, const struct tent *en, rptr row, uint32_t readlen)
{
    /* the newest location goes to way 0; the one it displaces moves to way 1 */
    struct loc *set = loc_set(t->w->e, en->hash);
    struct loc old;
    if (loc_read(&set[0], &old) && old.hash != en->hash && old.hash && old.row)
        loc_store(&set[1], old.hash, old.row, old.readlen, old.inc); /* (an older entry of the
                                                                          key there goes) */
    loc_store(&set[0], en->hash, row, readlen, t->pinc[en->part]);
}

static void cache_drop(struct txn_worker *w, uint64_t hash)
{
    struct loc *set = loc_set(w->e, hash);
    struct loc l;
    for (unsigned i = 0; i < LOC_WAYS; i++)
        if (loc_read(&set[i], &l) && l.hash == hash) loc_store(&set[i], hash, RPTR_NULL, 0, 0);
}

/* The first READ of en's (remote) row at `row`, with the length the cache last saw. */
static struct row_read first_read(struct txn *t, const struct tent *en, rptr row, bool want_val)
{
    struct loc l;
    bool hit = cache_get(t->w->e, en->hash, t->pinc[rptr_node(row)], &l) && l.row == row;
    return store_row_first_read(row, en->klen, hit ? (uint32_t)l.readlen : 0, want_val);
}

static void *tmem_of(void *t, size_t n) { return txn_mem(t, n); }

/* Reads the row en holds locked at `row`: 1 when it is en's key and live (en->val, vlen and
 * version filled when want_val), 0 when it is not, or a status. pre: the bytes of a remote
 * row's first read fr, already read under the lock (NULL: read them now, fr ignored). fr must
 * be the very read that filled pre: the location cache it came from is shared by the node's
 * threads, and a first_read now may say another length. */
static int read_row_from(struct txn *t, struct tent *en, rptr row, bool want_val,
                         const uint8_t *pre, const struct row_read *fr)
{
    struct txn_worker *w = t->w;
    struct txn_env *e = w->e;
    struct row_view v;
    if (rptr_node(row) == e->me) {
        int rc = store_row_view(txn_pstore_as(e, en->pid, w->adopting), row, &v);
        if (rc) return 0;
        if (!(v.flags & ROW_LIVE) || v.klen != en->klen || memcmp(v.key, en->key, en->klen))
            return 0;
        en->val = v.val;
        en->vlen = v.vlen;
        en->version = v.version;
        en->have_val = true;
        return 1;
    }
    const struct store_remote *r = NULL;
    int rc = txn_remote_of(t, en->pid, rptr_node(row), &r);
    if (rc) return rc;
    uint32_t readlen;
    rc = store_remote_read_row(w->c, r, en->key, en->klen, want_val,
                               pre ? *fr : first_read(t, en, row, want_val), pre, tmem_of, t,
                               &v, &readlen);
    if (rc != 1) return rc < 0 && rc != RDKV_ENOMEM ? txn_classify(t, rc, rptr_node(row)) : rc;
    en->version = v.version;
    if (want_val) {
        en->val = v.val;
        en->vlen = v.vlen;
        en->have_val = true;
        cache_put(t, en, row, readlen);
    }
    return 1;
}

int txn_read_row(struct txn *t, struct tent *en, rptr row, bool want_val)
{
    return read_row_from(t, en, row, want_val, NULL, NULL);
}

/* Locks en's row at `row` in `mode`. pre (NULL: none): a buffer of fr->len bytes that the lock
 * may fill from the row (the first read fr) in its own chain; en->lk.rd_ok then says whether it
 * did, under the lock. */
static int lock_row_reading(struct txn *t, struct tent *en, rptr row, enum lock_mode mode,
                            uint8_t *pre, const struct row_read *fr)
{
    /* an exclusive-only row lock (alock) takes reads exclusively too */
    if (!(t->w->e->row->modes & (1u << mode))) mode = LOCK_EXCLUSIVE;
    lock_handle_init(&en->lk, &t->w->lt, t->w->e->row, row);
    if (pre) {
        en->lk.rd_at = fr->at;
        en->lk.rd_buf = pre;
        en->lk.rd_len = (uint32_t)fr->len;
    }
    if (txn_row_wait_die(t)) en->lk.age = t->ts;
    int rc = lock_acquire(&en->lk, mode, txn_row_deadline(t));
    if (rc) {
        en->lk.mode = 0;
        return txn_fail(t, txn_classify(t, rc, rptr_node(row)));
    }
    return 0;
}

static int lock_row(struct txn *t, struct tent *en, rptr row, enum lock_mode mode)
{
    return lock_row_reading(t, en, row, mode, NULL, NULL);
}

/* lock_row, then read_row (*got: its answer) -- a remote row read in the lock's own chain where
 * the lock can: one round trip instead of two when the lock is granted at once. */
int txn_lock_read_row(struct txn *t, struct tent *en, rptr row, enum lock_mode mode,
                         bool want_val, int *got)
{
    uint8_t *pre = NULL;
    struct row_read fr = {0};
    if (rptr_node(row) != t->w->e->me && t->w->e->row->read_in_chain) {
        fr = first_read(t, en, row, want_val);
        pre = fr.len <= UINT32_MAX ? txn_mem(t, fr.len) : NULL;
    }
    int rc = lock_row_reading(t, en, row, mode, pre, &fr);
    if (rc) return rc;
    *got = read_row_from(t, en, row, want_val, en->lk.rd_ok ? pre : NULL, &fr);
    return 0;
}
/* Locks the keys [b, e) (kflags: enum range_key_flags; see range_handle_keys) in node's part of
 * the key space: whole keys, compared as bytes by the owner. */
int txn_range_take(struct txn *t, struct range_handle **hp, uint16_t node, const uint8_t *b,
                      uint32_t bl, const uint8_t *e, uint32_t el, unsigned kflags,
                      enum lock_mode mode)
{
    struct txn_worker *w = t->w;
    struct range_handle *h = *hp;
    int rc = txn_touch(t, node);
    if (rc) return txn_fail(t, rc);
    if (!h && !(h = *hp = txn_rh_get(w))) return txn_fail(t, RDKV_ENOMEM);
    range_handle_init(h, &w->lt, w->e->range, node, TXN_RANGE_SPACE, 0, 0);
    range_handle_keys(h, b, bl, e, el, kflags);
    h->owner = t->txid;
    rc = range_acquire(h, mode, txn_range_deadline(t));
    if (rc) {
        h->mode = 0;
        return txn_fail(t, txn_classify(t, rc, node));
    }
    return 0;
}

/* Locks en's key as a point {k} of the key space. */
int txn_point_take(struct txn *t, struct tent *en, enum lock_mode mode)
{
    return txn_range_take(t, &en->rh, en->part, en->key, en->klen, en->key, en->klen,
                      RANGE_K_END | RANGE_K_INCL, mode);
}


/* Whether another entry of the transaction holds the lock of `row`: then row is that entry's
 * key's row (a row changes key only when deleted, which needs its exclusive lock), so it is not
 * the row of en's key -- and locking it again would wait for ourselves. */
static bool row_held_by_other(const struct txn *t, const struct tent *en, rptr row)
{
    for (uint32_t i = 0; i < t->nents; i++) {
        const struct tent *o = &t->ents[i];
        if (o != en && o->lk.mode && o->row == row) return true;
    }
    return false;
}

/* Makes en's key locked in at least `mode`, its row (if any) read. */
int txn_locate(struct txn *t, struct tent *en, enum lock_mode mode, bool want_val)
{
    if (en->lk.mode) {
        if (en->lk.mode == LOCK_EXCLUSIVE || mode == LOCK_SHARED) {
            if (want_val && !en->have_val) {
                int r = txn_read_row(t, en, en->row, true);
                if (r != 1) return txn_fail(t, r < 0 ? r : RDKV_EABORTED);
            }
            return 0;
        }
        /* shared -> exclusive: no upgrade in the row lock, so let go and take it again; if the
         * row changed in between, what this transaction read is stale: abort */
        uint64_t ver = en->version;
        rptr row = en->row;
        txn_unlock_row(t, en);
        int r;
        int rc = txn_lock_read_row(t, en, row, LOCK_EXCLUSIVE, want_val || en->have_val, &r);
        if (rc) return rc;
        if (r != 1 || en->version != ver) {
            txn_count_conflict(t->w);
            return txn_fail(t, r < 0 ? r : RDKV_EABORTED);
        }
        return 0;
    }
    if (en->known && !en->exists && en->rh && en->rh->mode) {
        if (en->rh->mode == LOCK_EXCLUSIVE || mode == LOCK_SHARED) return 0;
        txn_range_drop(t, &en->rh);
        int rc = txn_point_take(t, en, LOCK_EXCLUSIVE);
        if (rc) return rc;
        rptr cand[4];
        bool fc;
        int n = candidates(t, en, cand, 4, false, &fc);
        if (n < 0) return txn_fail(t, n);
        if (n > 0) {
            /* maybe inserted while the point was not locked: is it really there? */
            for (int i = 0; i < n; i++) {
                if (row_held_by_other(t, en, cand[i])) continue;
                if ((rc = lock_row(t, en, cand[i], LOCK_EXCLUSIVE))) return rc;
                int r = txn_read_row(t, en, cand[i], false);
                txn_unlock_row(t, en);
                if (r < 0) return txn_fail(t, r);
                if (r == 1) {
                    txn_count_conflict(t->w);
                    return txn_fail(t, RDKV_EABORTED);
                }
            }
        }
        return 0;
    }
    bool use_cache = true;
    for (int attempt = 0; attempt < LOCATE_TRIES; attempt++) {
        rptr cand[4];
        bool from_cache;
        int n = candidates(t, en, cand, 4, use_cache, &from_cache);
        if (n < 0) return txn_fail(t, n);
        for (int i = 0; i < n; i++) {
            if (row_held_by_other(t, en, cand[i])) { /* a stale candidate: recycled for a key */
                if (from_cache) cache_drop(t->w, en->hash);
                continue;
            }
            int r;
            int rc = txn_lock_read_row(t, en, cand[i], mode, want_val, &r);
            if (rc) return rc;
            if (r < 0) return txn_fail(t, r);
            if (r == 1) {
                en->row = cand[i];
                en->exists = en->known = true;
                return 0;
            }
            txn_unlock_row(t, en);
            if (from_cache) cache_drop(t->w, en->hash);
        }
        if (from_cache) {
            use_cache = false;
            continue;
        }
        if (!en->rh || !en->rh->mode) {
            int rc = txn_point_take(t, en, mode);
            if (rc) return rc;
        }
        n = candidates(t, en, cand, 4, false, &from_cache);
        if (n < 0) return txn_fail(t, n);
        if (n == 0) {
            en->exists = false;
            en->known = true;
            en->have_val = false;
            return 0;
        }
        use_cache = false; /* present after all (inserted meanwhile): lock its row */
    }
    txn_count_conflict(t->w);
    return txn_fail(t, RDKV_EABORTED);
}
