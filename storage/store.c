/* A node's partition (storage/store.h): rows in a jemalloc heap inside the arena, the one-sided
 * hash index, and the ordered index. docs/storage.md has the argument for each rule below.
 *
 * Locking. `mu` serializes every change to the allocator's free lists, the hash index and the
 * ordered index. `rw` is taken for reading by lookups and scans and for writing (inside `mu`) by
 * the two changes they can observe: publish and delete. So while a reader holds `rw`, every
 * row it reaches through either index is LIVE and keeps its key; a row that is being written
 * (allocated, recycled) is reachable from neither. A row's header and value are changed by the
 * owner only under the row's exclusive lock, which the caller holds.
 *
 * Peers read the index and rows with one-sided READs at any time. The soft NIC moves every
 * aligned 8-byte word with one atomic access, so the owner writes every byte a peer may READ
 * (slots, headers, keys, values, lock lines) with atomic stores of the same kind: a READ sees
 * each word old or new, and ThreadSanitizer sees no race between the two. */
#include "storage/store.h"

#include "storage/heap.h"
#include "storage/oindex.h"

#include "common/key.h"

#include <xxhash.h>

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Row sizing: a value goes inline when it is short or when the whole row stays within a page;
 * a row whose value lives out of line keeps a little inline room beyond its key, so that the
 * value can later shrink back inline. */
#define ROW_INLINE_VALUE_MAX 1024u
#define ROW_INLINE_ROW_MAX 4096u
#define ROW_VEXT_SLACK 64u
/* No row's cap exceeds this (inline rows: klen + vlen under either rule above; out-of-line
 * rows: the key plus the slack). */
#define ROW_CAP_MAX(key_max) (((uint64_t)(key_max) + ROW_INLINE_ROW_MAX + 63) & ~63ull)

/* The hash index refuses a new slot past this share of its slots (used or tombstones). */
#define INDEX_FILL_PCT 85u
#define INDEX_MIN_BUCKETS 8ull
#define INDEX_MAX_BUCKETS (1ull << 40)
#define SLOT_OFF_MASK RPTR_OFF_MASK

/* Region "store.meta": 64 bytes that tell whether a store was opened over these regions before
 * (so they hold old bytes), and whose offset tells how much of the arena was still free. */
#define STORE_META_MAGIC 0x4154454d5644524bull

struct store {
    struct fabric *f;
    uint8_t *arena;
    uint16_t node;
    uint32_t key_max, value_max;
    uint64_t cap_max;

    /* the row heap: region "store.heap" */
    uint64_t heap_off, heap_size;
    struct heap *heap;

    /* the hash index: region "store.index" */
    rptr index;
    struct store_index_hdr *ihdr;
    uint64_t *buckets; /* nbuckets * STORE_SLOTS_PER_BUCKET slots */
    uint64_t nbuckets;
    uint64_t slot_limit; /* used + tombs may not pass this */
    uint64_t used, tombs; /* under mu */

    uint64_t *meta;

    /* Dead rows waiting to be recycled, by class (allocation size / 64): a list threaded
     * through the rows' header word reserved[0] (the next row's offset, 0 at the end). */
    uint64_t *free_heads;
    uint32_t nclasses;
    uint64_t free_rows;

    struct oindex oi;
    pthread_mutex_t mu;
    pthread_rwlock_t rw;

    uint64_t rows;           /* atomic: live rows */
    uint64_t alloc_failures; /* atomic */
};

/* ---------------------------------------------------------------------------------------------
 * Bytes a peer may READ: written with atomic stores (see the top of the file). */

static void arena_put(uint8_t *dst, const uint8_t *src, size_t n)
{
    size_t i = 0;
    while (i < n && ((uintptr_t)(dst + i) & 7)) {
        __atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
        i++;
    }
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, src + i, 8);
        __atomic_store_n((uint64_t *)(void *)(dst + i), v, __ATOMIC_RELAXED);
    }
    for (; i < n; i++) __atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
}

/* A row's header is stored with release and loaded with acquire (plain moves on x86): a thread
 * that reads a header sees the key and value bytes written before it -- also one that reached
 * the row through its lock line rather than the index, e.g. a lock holder waiting on a row that
 * was recycled and published again for the same key meanwhile. */
static void hdr_load(const uint8_t *row, struct row_hdr *h)
{
    uint64_t w[8];
    const uint64_t *src = (const uint64_t *)(const void *)(row + ROW_HDR_OFF);
    for (int i = 0; i < 8; i++) w[i] = __atomic_load_n(&src[i], __ATOMIC_ACQUIRE);
    memcpy(h, w, sizeof *h);
}

static void hdr_store(uint8_t *row, const struct row_hdr *h)
{
    uint64_t w[8];
    memcpy(w, h, sizeof w);
    uint64_t *dst = (uint64_t *)(void *)(row + ROW_HDR_OFF);
    for (int i = 0; i < 8; i++) __atomic_store_n(&dst[i], w[i], __ATOMIC_RELEASE);
}

static uint64_t next_version(uint64_t v) { return v + 1 ? v + 1 : 1; }
static uint64_t round64(uint64_t x) { return (x + 63) & ~63ull; }

/* ---------------------------------------------------------------------------------------------
 * Rows */

/* The local address of a row of this store's heap (64-byte aligned, its lock line and header
 * inside the heap), or NULL. */
static uint8_t *row_at(const struct store *s, rptr row)
{
    if (rptr_node(row) != s->node) return NULL;
    uint64_t off = rptr_off(row);
    if ((off & 63) || off < s->heap_off || off - s->heap_off > s->heap_size - ROW_DATA_OFF)
        return NULL;
    return s->arena + off;
}

/* The local address of n bytes at a value allocation of this heap, or NULL. */
static uint8_t *vext_at(const struct store *s, rptr vext, uint64_t n)
{
    if (rptr_node(vext) != s->node) return NULL;
    uint64_t off = rptr_off(vext);
    if (off < s->heap_off || off - s->heap_off > s->heap_size ||
        n > s->heap_off + s->heap_size - off)
        return NULL;
    return s->arena + off;
}

static rptr local_rptr(const struct store *s, const void *p)
{
    return rptr_make(s->node, (uint64_t)((const uint8_t *)p - s->arena));
}

/* Checks a header against the limits; fills out's scalar fields. avail: inline bytes present
 * after the header. 0, RDKV_EPROTO or RDKV_ETOOBIG (out filled, key and val NULL). */
static int hdr_decode(const struct row_hdr *h, uint32_t key_max, uint32_t value_max,
                      uint64_t avail, struct row_view *out)
{
    if (h->magic != ROW_MAGIC) return RDKV_EPROTO;
    if ((h->flags & ~(ROW_LIVE | ROW_DEAD)) || h->flags == (ROW_LIVE | ROW_DEAD))
        return RDKV_EPROTO;
    if (h->klen > key_max || h->vlen > value_max) return RDKV_EPROTO;
    if ((h->cap & 63) || h->cap > ROW_CAP_MAX(key_max)) return RDKV_EPROTO;
    bool inl = h->vext == RPTR_NULL;
    uint64_t need = (uint64_t)h->klen + (inl ? h->vlen : 0);
    if (need > h->cap) return RDKV_EPROTO;
    if (h->flags == ROW_LIVE && h->version == 0) return RDKV_EPROTO;
    out->version = h->version;
    out->flags = h->flags;
    out->klen = h->klen;
    out->vlen = h->vlen;
    out->vext = h->vext;
    out->cap = h->cap;
    out->key = NULL;
    out->val = NULL;
    return avail < need ? RDKV_ETOOBIG : 0;
}

int row_decode(const void *buf, size_t len, uint32_t key_max, uint32_t value_max,
               struct row_view *out)
{
    if (!out) return RDKV_EINVAL;
    memset(out, 0, sizeof *out);
    if (!buf) return RDKV_EINVAL;
    /* Too short for even the header: READ row_read_len(0, 0, true) = the header first. */
    if (len < sizeof(struct row_hdr)) return RDKV_ETOOBIG;
    struct row_hdr h;
    memcpy(&h, buf, sizeof h);
    int rc = hdr_decode(&h, key_max, value_max, len - sizeof h, out);
    if (rc) return rc;
    const uint8_t *data = (const uint8_t *)buf + sizeof h;
    out->key = data;
    out->val = out->vext == RPTR_NULL ? data + out->klen : NULL;
    return 0;
}

/* A view of a local row straight into the arena; local values out of line are resolved. */
static int row_view_local(const struct store *s, const uint8_t *r, struct row_view *out)
{
    struct row_hdr h;
    hdr_load(r, &h);
    uint64_t avail = (uint64_t)(s->arena + s->heap_off + s->heap_size - (r + ROW_DATA_OFF));
    if (h.cap > avail) return RDKV_EPROTO;
    int rc = hdr_decode(&h, s->key_max, s->value_max, h.cap, out);
    if (rc) return rc == RDKV_ETOOBIG ? RDKV_EPROTO : rc;
    out->key = r + ROW_DATA_OFF;
    if (h.vext == RPTR_NULL) out->val = r + ROW_DATA_OFF + h.klen;
    else out->val = vext_at(s, h.vext, h.vlen);
    return 0;
}

uint64_t store_hash(const void *key, uint32_t klen) { return XXH3_64bits(key, klen); }

void store_key_tag(const void *key, uint32_t klen, const void **tag, uint32_t *tlen)
{
    const uint8_t *k = key;
    *tag = key;
    *tlen = klen;
    if (klen < 3 || k[klen - 1] != '}') return;
    const uint8_t *open = memrchr(k, '{', klen - 1);
    if (!open || open + 1 == k + klen - 1) return; /* no '{', or an empty tag */
    *tag = open + 1;
    *tlen = (uint32_t)(k + klen - 1 - (open + 1));
}

uint64_t store_place_hash(const void *key, uint32_t klen)
{
    const void *tag;
    uint32_t tl;
    store_key_tag(key, klen, &tag, &tl);
    return XXH3_64bits(tag, tl);
}

/* Inline room and placement of a new row for these sizes. */
static uint32_t row_plan(uint32_t klen, uint32_t vlen, bool *inl)
{
    *inl = vlen <= ROW_INLINE_VALUE_MAX ||
           (uint64_t)ROW_DATA_OFF + klen + vlen <= ROW_INLINE_ROW_MAX;
    return (uint32_t)(*inl ? round64((uint64_t)klen + vlen) : round64(klen) + ROW_VEXT_SLACK);
}

static uint32_t class_of(uint64_t cap) { return (uint32_t)((ROW_DATA_OFF + cap) / 64); }

/* Pushes a dead row on its class's free list (mu held). */
static void free_push(struct store *s, uint8_t *r)
{
    struct row_hdr h;
    hdr_load(r, &h);
    uint32_t c = class_of(h.cap);
    assert(c < s->nclasses && h.flags == ROW_DEAD);
    h.reserved[0] = s->free_heads[c];
    hdr_store(r, &h);
    s->free_heads[c] = (uint64_t)(r - s->arena);
    s->free_rows++;
}

static uint8_t *free_pop(struct store *s, uint32_t c)
{
    uint64_t off = s->free_heads[c];
    if (!off) return NULL;
    uint8_t *r = s->arena + off;
    struct row_hdr h;
    hdr_load(r, &h);
    s->free_heads[c] = h.reserved[0];
    s->free_rows--;
    return r;
}

/* A row with at least cap inline bytes (mu held): a dead row of that class, else a new one from
 * jemalloc, else a dead row of a larger class. *fresh tells a new row. */
static uint8_t *row_take(struct store *s, uint32_t cap, bool *fresh)
{
    uint32_t c = class_of(cap);
    *fresh = false;
    uint8_t *r = free_pop(s, c);
    if (r) return r;
    r = heap_alloc(s->heap, ROW_DATA_OFF + cap, 64);
    if (r) {
        assert(row_at(s, local_rptr(s, r)) == r);
        *fresh = true;
        return r;
    }
    for (uint32_t k = c + 1; k < s->nclasses; k++)
        if ((r = free_pop(s, k))) return r;
    return NULL;
}

int store_row_alloc(struct store *s, const void *key, uint32_t klen, const void *val,
                    uint32_t vlen, rptr *row)
{
    if (!s || !row || (klen && !key) || (vlen && !val)) return RDKV_EINVAL;
    *row = RPTR_NULL;
    if (klen > s->key_max || vlen > s->value_max) return RDKV_ETOOBIG;
    bool inl;
    uint32_t cap = row_plan(klen, vlen, &inl);

    pthread_mutex_lock(&s->mu);
    bool fresh;
    uint8_t *r = row_take(s, cap, &fresh);
    uint8_t *vx = NULL;
    struct row_hdr old = {0};
    if (r) {
        if (!fresh) {
            hdr_load(r, &old);
            cap = old.cap;
            inl = (uint64_t)klen + vlen <= cap; /* a larger recycled row may hold it inline */
        }
        if (!inl) {
            vx = heap_alloc(s->heap, vlen, 0);
            if (!vx) {
                if (fresh) heap_free(s->heap, r); /* never a row: no peer can know it */
                else free_push(s, r);
                r = NULL;
            }
        }
    }
    if (!r) {
        __atomic_add_fetch(&s->alloc_failures, 1, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&s->mu);
        return RDKV_ENOSPC;
    }
    pthread_mutex_unlock(&s->mu);

    /* The row is ours alone now: reachable from no index. A recycled row keeps its lock line
     * (a peer may still hold or queue on it); a new one gets a zero line (free, for every lock
     * algorithm). Its version continues from the old one, so versions never repeat at a place. */
    if (fresh) {
        static const uint8_t zero[64];
        arena_put(r, zero, sizeof zero);
    }
    arena_put(r + ROW_DATA_OFF, key, klen);
    if (inl) arena_put(r + ROW_DATA_OFF + klen, val, vlen);
    else arena_put(vx, val, vlen);
    struct row_hdr h = {
        .version = next_version(old.version),
        .klen = klen,
        .vlen = vlen,
        .cap = cap,
        .flags = 0,
        .magic = ROW_MAGIC,
        .vext = vx ? local_rptr(s, vx) : RPTR_NULL,
        .khash = store_hash(key, klen),
    };
    hdr_store(r, &h);
    *row = local_rptr(s, r);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The hash index (owner side; callers hold mu or rw) */

static uint64_t *bucket_at(const struct store *s, uint64_t b)
{
    return s->buckets + b * STORE_SLOTS_PER_BUCKET;
}

static uint64_t slot_load(const uint64_t *slot) { return __atomic_load_n(slot, __ATOMIC_ACQUIRE); }
static void slot_store(uint64_t *slot, uint64_t v) { __atomic_store_n(slot, v, __ATOMIC_RELEASE); }
static uint64_t slot_make(uint16_t tag, uint64_t off) { return (uint64_t)tag << 48 | off; }

/* Whether the indexed row at off holds key. Indexed rows are LIVE and keep their key while the
 * caller holds mu or rw. */
static bool row_has_key(const struct store *s, uint64_t off, uint64_t hash, const void *key,
                        uint32_t klen)
{
    const uint8_t *r = s->arena + off;
    struct row_hdr h;
    hdr_load(r, &h);
    return h.khash == hash && h.klen == klen &&
           (klen == 0 || memcmp(r + ROW_DATA_OFF, key, klen) == 0);
}

/* Follows key's probe sequence: the slot holding it (*found), and the first empty or
 * tombstone slot on the way (*hole). The sequence ends at the first bucket with an empty slot. */
static void index_probe(const struct store *s, uint64_t hash, const void *key, uint32_t klen,
                        uint64_t **found, uint64_t **hole)
{
    uint64_t mask = s->nbuckets - 1, b = hash & mask;
    uint16_t tag = store_slot_tag(hash);
    *found = NULL;
    if (hole) *hole = NULL;
    for (uint64_t i = 0; i < s->nbuckets; i++, b = (b + 1) & mask) {
        uint64_t *bk = bucket_at(s, b);
        bool empty = false;
        for (unsigned j = 0; j < STORE_SLOTS_PER_BUCKET; j++) {
            uint64_t v = slot_load(&bk[j]);
            if (v == 0 || v == STORE_SLOT_TOMB) {
                empty |= v == 0;
                if (hole && !*hole) *hole = &bk[j];
                continue;
            }
            if ((uint16_t)(v >> 48) == tag && row_has_key(s, v & SLOT_OFF_MASK, hash, key, klen)) {
                *found = &bk[j];
                return;
            }
        }
        if (empty) return;
    }
}

/* Whether the bucket holding slot has an empty slot. */
static bool bucket_has_empty(const struct store *s, const uint64_t *slot)
{
    uint64_t idx = (uint64_t)(slot - s->buckets);
    const uint64_t *bk = s->buckets + (idx - idx % STORE_SLOTS_PER_BUCKET);
    for (unsigned j = 0; j < STORE_SLOTS_PER_BUCKET; j++)
        if (slot_load(&bk[j]) == 0) return true;
    return false;
}

/* ---------------------------------------------------------------------------------------------
 * The owner's operations */

int store_lookup(struct store *s, const void *key, uint32_t klen, rptr *row)
{
    if (!s || !row || (klen && !key)) return RDKV_EINVAL;
    *row = RPTR_NULL;
    if (klen > s->key_max) return RDKV_ENOTFOUND;
    uint64_t hash = store_hash(key, klen);
    pthread_rwlock_rdlock(&s->rw);
    uint64_t *found;
    index_probe(s, hash, key, klen, &found, NULL);
    if (found) *row = rptr_make(s->node, slot_load(found) & SLOT_OFF_MASK);
    pthread_rwlock_unlock(&s->rw);
    return found ? 0 : RDKV_ENOTFOUND;
}

int store_row_publish(struct store *s, rptr row)
{
    if (!s) return RDKV_EINVAL;
    uint8_t *r = row_at(s, row);
    if (!r) return RDKV_EINVAL;
    pthread_mutex_lock(&s->mu);
    struct row_hdr h;
    hdr_load(r, &h);
    struct row_view v;
    int rc = row_view_local(s, r, &v);
    if (rc == 0 && h.flags != 0) rc = RDKV_EINVAL;
    if (rc) {
        pthread_mutex_unlock(&s->mu);
        return RDKV_EINVAL;
    }
    pthread_rwlock_wrlock(&s->rw);
    uint64_t *found, *hole;
    index_probe(s, h.khash, v.key, h.klen, &found, &hole);
    if (found) rc = RDKV_EEXIST;
    else if (!hole) rc = RDKV_ENOSPC; /* every slot taken: not reached below the fill limit */
    else if (slot_load(hole) == 0 && s->used + s->tombs + 1 > s->slot_limit) rc = RDKV_ENOSPC;
    else rc = oindex_insert(&s->oi, v.key, h.klen, row);
    if (rc == 0) {
        h.flags = ROW_LIVE;
        hdr_store(r, &h); /* LIVE before a peer can find it */
        if (slot_load(hole) == STORE_SLOT_TOMB) s->tombs--;
        s->used++;
        slot_store(hole, slot_make(store_slot_tag(h.khash), rptr_off(row)));
        __atomic_add_fetch(&s->rows, 1, __ATOMIC_RELAXED);
    }
    pthread_rwlock_unlock(&s->rw);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* Marks an unindexed row dead and queues it for recycling (mu held); returns its value
 * allocation, which the caller frees. */
static uint8_t *row_retire(struct store *s, uint8_t *r, struct row_hdr *h)
{
    uint8_t *vx = h->vext ? vext_at(s, h->vext, h->vlen) : NULL;
    h->flags = ROW_DEAD;
    h->version = next_version(h->version);
    h->vext = RPTR_NULL; /* nobody may follow it any more */
    h->vlen = 0;
    hdr_store(r, h);
    free_push(s, r);
    return vx;
}

void store_row_discard(struct store *s, rptr row)
{
    if (!s) return;
    uint8_t *r = row_at(s, row);
    if (!r) return;
    pthread_mutex_lock(&s->mu);
    struct row_hdr h;
    hdr_load(r, &h);
    struct row_view v;
    uint8_t *vx = NULL;
    if (row_view_local(s, r, &v) == 0 && h.flags == 0) vx = row_retire(s, r, &h);
    pthread_mutex_unlock(&s->mu);
    heap_free(s->heap, vx);
}

int store_row_delete(struct store *s, rptr row)
{
    if (!s) return RDKV_EINVAL;
    uint8_t *r = row_at(s, row);
    if (!r) return RDKV_EINVAL;
    pthread_mutex_lock(&s->mu);
    struct row_hdr h;
    hdr_load(r, &h);
    struct row_view v;
    if (row_view_local(s, r, &v) != 0 || h.flags != ROW_LIVE) {
        pthread_mutex_unlock(&s->mu);
        return RDKV_EINVAL;
    }
    pthread_rwlock_wrlock(&s->rw);
    uint64_t *found;
    index_probe(s, h.khash, v.key, h.klen, &found, NULL);
    if (!found || (slot_load(found) & SLOT_OFF_MASK) != rptr_off(row)) {
        /* LIVE but not indexed (or another row indexed under its key): not ours to delete */
        pthread_rwlock_unlock(&s->rw);
        pthread_mutex_unlock(&s->mu);
        return RDKV_EINVAL;
    }
    /* A bucket that has an empty slot has had one all its life (slots never return to empty
     * in a full bucket), so no probe ever went past it: its slot can be emptied outright.
     * Elsewhere a tombstone keeps later keys reachable. */
    if (bucket_has_empty(s, found)) {
        slot_store(found, 0);
    } else {
        slot_store(found, STORE_SLOT_TOMB);
        s->tombs++;
    }
    s->used--;
    rptr gone = oindex_remove(&s->oi, v.key, h.klen);
    assert(gone == row);
    (void)gone;
    __atomic_sub_fetch(&s->rows, 1, __ATOMIC_RELAXED);
    pthread_rwlock_unlock(&s->rw);
    uint8_t *vx = row_retire(s, r, &h);
    pthread_mutex_unlock(&s->mu);
    heap_free(s->heap, vx);
    return 0;
}

int store_value_stage(struct store *s, rptr row, const void *val, uint32_t vlen,
                      struct store_staged *out)
{
    if (!s || !out || (vlen && !val)) return RDKV_EINVAL;
    memset(out, 0, sizeof *out);
    uint8_t *r = row_at(s, row);
    if (!r) return RDKV_EINVAL;
    if (vlen > s->value_max) return RDKV_ETOOBIG;
    struct row_view v;
    if (row_view_local(s, r, &v) != 0 || v.flags == ROW_DEAD) return RDKV_EINVAL;
    out->row = row;
    out->val = val;
    out->vlen = vlen;
    if ((uint64_t)v.klen + vlen <= v.cap) return 0; /* inline */
    uint8_t *vx = heap_alloc(s->heap, vlen, 0);
    if (!vx) {
        __atomic_add_fetch(&s->alloc_failures, 1, __ATOMIC_RELAXED);
        memset(out, 0, sizeof *out);
        return RDKV_ENOSPC;
    }
    out->vext = local_rptr(s, vx);
    return 0;
}

void store_value_install(struct store *s, const struct store_staged *st)
{
    uint8_t *r = row_at(s, st->row);
    assert(r);
    if (!r) return;
    struct row_hdr h;
    hdr_load(r, &h);
    uint8_t *old = h.vext ? vext_at(s, h.vext, h.vlen) : NULL;
    if (st->vext) {
        uint8_t *vx = vext_at(s, st->vext, st->vlen);
        assert(vx);
        if (!vx) return;
        arena_put(vx, st->val, st->vlen);
    } else {
        assert((uint64_t)h.klen + st->vlen <= h.cap);
        arena_put(r + ROW_DATA_OFF + h.klen, st->val, st->vlen);
    }
    h.vext = st->vext;
    h.vlen = st->vlen;
    h.version = next_version(h.version);
    hdr_store(r, &h);
    if (old) heap_free(s->heap, old); /* a staged allocation is always a new one */
}

void store_value_unstage(struct store *s, struct store_staged *st)
{
    if (!s || !st) return;
    if (st->vext) heap_free(s->heap, vext_at(s, st->vext, st->vlen));
    memset(st, 0, sizeof *st);
}

int store_row_view(struct store *s, rptr row, struct row_view *out)
{
    if (!s || !out) return RDKV_EINVAL;
    memset(out, 0, sizeof *out);
    const uint8_t *r = row_at(s, row);
    return r ? row_view_local(s, r, out) : RDKV_EPROTO;
}

long store_scan(struct store *s, const void *lo, uint32_t lolen, const void *hi, uint32_t hilen,
                const void *after, uint32_t afterlen, uint64_t limit, store_scan_fn fn,
                void *arg)
{
    if (!s || !fn || (lolen && !lo) || (afterlen && !after))
        return RDKV_EINVAL;
    long visited = 0;
    pthread_rwlock_rdlock(&s->rw);
    const struct onode *n;
    /* start at lo, or strictly after `after` when that is not before lo */
    if (after && key_cmp(after, afterlen, lo, lolen) >= 0)
        n = oindex_seek(&s->oi, after, afterlen, true);
    else
        n = oindex_seek(&s->oi, lo, lolen, false);
    for (; n; n = oindex_next(n)) {
        if (hi && key_cmp(n->key, n->klen, hi, hilen) >= 0) break;
        struct row_view v;
        int rc = row_view_local(s, s->arena + rptr_off(n->row), &v);
        assert(rc == 0);
        if (rc) continue;
        visited++;
        if (!fn(arg, n->row, &v) || (limit && (uint64_t)visited >= limit)) break;
    }
    pthread_rwlock_unlock(&s->rw);
    return visited;
}

void store_stats(struct store *s, struct store_stats *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->mu);
    out->index_used_slots = s->used;
    out->index_tombs = s->tombs;
    pthread_mutex_unlock(&s->mu);
    out->rows = __atomic_load_n(&s->rows, __ATOMIC_RELAXED);
    out->heap_bytes = s->heap_size;
    out->heap_used = heap_used(s->heap);
    out->index_buckets = s->nbuckets;
    out->alloc_failures = __atomic_load_n(&s->alloc_failures, __ATOMIC_RELAXED);
}

/* ---------------------------------------------------------------------------------------------
 * Opening and closing */

void store_opts_init(struct store_opts *o) { memset(o, 0, sizeof *o); }

uint32_t store_key_max(const struct store *s) { return s->key_max; }
uint32_t store_value_max(const struct store *s) { return s->value_max; }

static uint64_t pow2_ceil(uint64_t x)
{
    uint64_t p = 1;
    while (p < x) p <<= 1;
    return p;
}

static int region_or_say(struct fabric *f, const char *name, uint64_t size, rptr *out, char *err,
                         size_t errcap)
{
    int rc = fab_region(f, name, size, 4096, out);
    if (rc == RDKV_ENOSPC)
        snprintf(err, errcap, "the arena (%llu bytes) has no room for %s (%llu bytes)",
                 (unsigned long long)fab_arena_size(f), name, (unsigned long long)size);
    else if (rc == RDKV_EEXIST)
        snprintf(err, errcap, "region %s exists with another size (a store opened with other "
                              "options)", name);
    else if (rc)
        snprintf(err, errcap, "cannot reserve %s: %s", name, rdkv_strerror(rc));
    return rc;
}

int store_open(struct fabric *f, const struct store_opts *o, struct store **out, char *err,
               size_t errcap)
{
    if (err && errcap) err[0] = 0;
    char dummy[8];
    if (!err || !errcap) err = dummy, errcap = sizeof dummy;
    if (!out) return RDKV_EINVAL;
    *out = NULL;
    struct store_opts defaults;
    if (!o) {
        store_opts_init(&defaults);
        o = &defaults;
    }
    if (!f || !fab_arena_base(f)) {
        snprintf(err, errcap, "a store needs a node with an arena");
        return RDKV_EINVAL;
    }
    uint32_t key_max = o->key_max ? o->key_max : STORE_KEY_MAX_DEFAULT;
    uint32_t value_max = o->value_max ? o->value_max : STORE_VALUE_MAX_DEFAULT;
    if (key_max > STORE_KEY_MAX_LIMIT || value_max > STORE_VALUE_MAX_LIMIT) {
        snprintf(err, errcap, "key_max %u / value_max %u over the limits %u / %u", key_max,
                 value_max, STORE_KEY_MAX_LIMIT, STORE_VALUE_MAX_LIMIT);
        return RDKV_EINVAL;
    }

    const char *name = o->name ? o->name : "store";
    if (strlen(name) > STORE_NAME_MAX) {
        snprintf(err, errcap, "store name '%s' over %u bytes", name, STORE_NAME_MAX);
        return RDKV_EINVAL;
    }
    char rmeta[FAB_REGION_NAME_MAX + 1], rindex[FAB_REGION_NAME_MAX + 1], rheap[FAB_REGION_NAME_MAX + 1];
    _Static_assert(STORE_NAME_MAX + 6 <= FAB_REGION_NAME_MAX, "region names fit");
    snprintf(rmeta, sizeof rmeta, "%s.meta", name);
    snprintf(rindex, sizeof rindex, "%s.index", name);
    snprintf(rheap, sizeof rheap, "%s.heap", name);
    /* The meta region's end marks how much of the arena is still free. */
    rptr meta;
    int rc = region_or_say(f, rmeta, 64, &meta, err, errcap);
    if (rc) return rc;
    uint64_t arena = fab_arena_size(f), left = arena - (rptr_off(meta) + 64);
    uint64_t heap_bytes = (o->heap_bytes ? o->heap_bytes : left / 2) & ~4095ull;
    if (heap_bytes < HEAP_MIN_BYTES) {
        snprintf(err, errcap, "the row heap needs at least %llu bytes; %s %llu",
                 (unsigned long long)HEAP_MIN_BYTES,
                 o->heap_bytes ? "asked for" : "half the arena's free space is",
                 (unsigned long long)heap_bytes);
        return o->heap_bytes ? RDKV_EINVAL : RDKV_ENOSPC;
    }
    uint64_t nb = o->index_buckets ? o->index_buckets : heap_bytes / 1024;
    if (nb > INDEX_MAX_BUCKETS) {
        snprintf(err, errcap, "index_buckets %llu over the limit %llu", (unsigned long long)nb,
                 (unsigned long long)INDEX_MAX_BUCKETS);
        return RDKV_EINVAL;
    }
    nb = pow2_ceil(nb < INDEX_MIN_BUCKETS ? INDEX_MIN_BUCKETS : nb);

    struct store *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errcap, "out of memory");
        return RDKV_ENOMEM;
    }
    s->f = f;
    s->arena = fab_arena_base(f);
    s->node = fab_node_id(f);
    s->key_max = key_max;
    s->value_max = value_max;
    s->cap_max = ROW_CAP_MAX(key_max);
    s->nbuckets = nb;
    s->slot_limit = nb * STORE_SLOTS_PER_BUCKET * INDEX_FILL_PCT / 100;
    s->meta = (uint64_t *)(void *)(s->arena + rptr_off(meta));
    s->nclasses = class_of(s->cap_max) + 1;
    s->free_heads = calloc(s->nclasses, sizeof *s->free_heads);
    pthread_mutex_init(&s->mu, NULL);
    /* Writers first: a steady stream of lookups must not starve publish and delete. */
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&s->rw, &ra);
    pthread_rwlockattr_destroy(&ra);
    if (!s->free_heads || oindex_init(&s->oi, 0x243F6A8885A308D3ull ^ nb) != 0) {
        snprintf(err, errcap, "out of memory");
        rc = RDKV_ENOMEM;
        goto fail;
    }

    rptr heap;
    if ((rc = region_or_say(f, rindex, 64 + nb * 64, &s->index, err, errcap)) ||
        (rc = region_or_say(f, rheap, heap_bytes, &heap, err, errcap)))
        goto fail;
    s->heap_off = rptr_off(heap);
    s->heap_size = heap_bytes;
    s->ihdr = (struct store_index_hdr *)(void *)(s->arena + rptr_off(s->index));
    s->buckets = (uint64_t *)(void *)(s->arena + rptr_off(s->index) + 64);

    bool reopened = __atomic_load_n(&s->meta[0], __ATOMIC_ACQUIRE) == STORE_META_MAGIC;
    if (reopened) {
        /* Old bytes: unpublish the index before clearing it. */
        __atomic_store_n(&s->ihdr->magic, 0, __ATOMIC_RELEASE);
        for (uint64_t i = 0; i < nb * STORE_SLOTS_PER_BUCKET; i++) slot_store(&s->buckets[i], 0);
    }
    rc = heap_open(s->arena + s->heap_off, heap_bytes, &s->heap, err, errcap);
    if (rc) goto fail;

    struct store_index_hdr ih = {
        .magic = 0, .nbuckets = nb, .key_max = key_max, .value_max = value_max};
    arena_put((uint8_t *)s->ihdr, (const uint8_t *)&ih, sizeof ih);
    __atomic_store_n(&s->ihdr->magic, o->hidden ? STORE_INDEX_MAGIC_HIDDEN : STORE_INDEX_MAGIC,
                     __ATOMIC_RELEASE);
    __atomic_store_n(&s->meta[0], STORE_META_MAGIC, __ATOMIC_RELEASE);
    *out = s;
    return 0;
fail:
    oindex_free(&s->oi);
    free(s->free_heads);
    pthread_rwlock_destroy(&s->rw);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return rc;
}

void store_publish(struct store *s)
{
    uint64_t hidden = STORE_INDEX_MAGIC_HIDDEN;
    __atomic_compare_exchange_n(&s->ihdr->magic, &hidden, STORE_INDEX_MAGIC, false,
                                __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

void store_hide(struct store *s)
{
    uint64_t shown = STORE_INDEX_MAGIC;
    __atomic_compare_exchange_n(&s->ihdr->magic, &shown, STORE_INDEX_MAGIC_HIDDEN, false,
                                __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

void store_close(struct store *s)
{
    if (!s) return;
    /* Peers that open the index from now on are refused; rows stay readable memory (the
     * regions stay reserved), so a peer's late operation still lands harmlessly. */
    __atomic_store_n(&s->ihdr->magic, 0, __ATOMIC_RELEASE);
    heap_close(s->heap);
    oindex_free(&s->oi);
    free(s->free_heads);
    pthread_rwlock_destroy(&s->rw);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* ---------------------------------------------------------------------------------------------
 * A peer's side */

int store_remote_open(struct fab_ctx *c, uint16_t node, const char *name,
                      struct store_remote *out)
{
    if (!c || !out || (name && strlen(name) > STORE_NAME_MAX)) return RDKV_EINVAL;
    memset(out, 0, sizeof *out);
    char rindex[FAB_REGION_NAME_MAX + 1];
    snprintf(rindex, sizeof rindex, "%s.index", name ? name : "store");
    rptr index;
    uint64_t size;
    int rc = fab_region_lookup(c, node, rindex, &index, &size);
    if (rc) return rc;
    struct store_index_hdr h;
    rc = fab_read(c, index, &h, sizeof h);
    if (rc) return rc;
    if (h.magic == STORE_INDEX_MAGIC_HIDDEN) return RDKV_EUNAVAILABLE;
    if (h.magic != STORE_INDEX_MAGIC || h.nbuckets == 0 || (h.nbuckets & (h.nbuckets - 1)) ||
        size < sizeof h || h.nbuckets > (size - sizeof h) / 64 || h.key_max == 0 ||
        h.key_max > STORE_KEY_MAX_LIMIT || h.value_max == 0 ||
        h.value_max > STORE_VALUE_MAX_LIMIT)
        return RDKV_EPROTO;
    out->node = node;
    out->index = index;
    out->nbuckets = h.nbuckets;
    out->key_max = h.key_max;
    out->value_max = h.value_max;
    return 0;
}

#define ROW_READ_GUESS 192u /* inline value bytes read with the header on a first visit */

struct row_read store_row_first_read(rptr row, uint32_t klen, uint32_t hint, bool want_val)
{
    uint64_t len = hint ? hint : row_read_len(klen, ROW_READ_GUESS, true);
    if (!want_val && len > 64u + klen) len = 64u + klen;
    return (struct row_read){rptr_add(row, ROW_HDR_OFF), len};
}

int store_remote_read_row(struct fab_ctx *c, const struct store_remote *r, const void *key,
                          uint32_t klen, bool want_val, struct row_read first, const uint8_t *pre,
                          void *(*alloc)(void *arg, size_t n), void *arg, struct row_view *v,
                          uint32_t *readlen)
{
    uint32_t kmax = r->key_max, vmax = r->value_max;
    uint64_t len = first.len;
    *readlen = 0;
    for (int pass = 0; pass < 2; pass++) {
        const uint8_t *buf = pass == 0 ? pre : NULL;
        int rc;
        if (!buf) {
            uint8_t *b = alloc(arg, len);
            if (!b) return RDKV_ENOMEM;
            if ((rc = fab_read(c, first.at, b, len))) return rc;
            buf = b;
        }
        rc = row_decode(buf, len, kmax, vmax, v);
        if (rc == RDKV_EPROTO) return 0; /* not a row (any more) */
        /* without the value, a header and key that fit are enough */
        bool key_fits = len >= 64u + klen && v->klen == klen;
        if (rc == 0 || (rc == RDKV_ETOOBIG && !want_val && key_fits)) {
            if (!(v->flags & ROW_LIVE) || v->klen != klen ||
                (len >= 64u + klen && memcmp(buf + 64, key, klen)))
                return 0;
            if (!want_val) return 1;
            if (v->vext) {
                uint8_t *vb = alloc(arg, v->vlen ? v->vlen : 1);
                if (!vb) return RDKV_ENOMEM;
                if (v->vlen && (rc = fab_read(c, v->vext, vb, v->vlen))) return rc;
                v->val = vb;
            }
            *readlen = (uint32_t)row_read_len(v->klen, v->vlen, !v->vext);
            return 1;
        }
        if (rc != RDKV_ETOOBIG) return rc;
        /* the header says how much there is: read it all */
        if (v->klen != klen) return 0;
        len = row_read_len(v->klen, v->vlen, !v->vext);
    }
    return 0;
}

int store_remote_read_quiet(struct fab_ctx *c, const struct store_remote *r, const void *key,
                            uint32_t klen, rptr row, uint32_t hint, uint32_t peek,
                            bool (*quiet)(const void *before, const void *after),
                            void *(*alloc)(void *arg, size_t n), void *arg, struct row_view *v)
{
    if (peek > ROW_HDR_OFF) return RDKV_EINVAL;
    struct row_read first = store_row_first_read(row, klen, hint, true);
    uint8_t *buf = first.len <= UINT32_MAX ? alloc(arg, first.len) : NULL;
    uint8_t before[ROW_HDR_OFF], after[ROW_HDR_OFF];
    if (!buf) return RDKV_ENOMEM;
    struct fab_op ops[3] = {fab_op_read(row, before, peek), fab_op_read(first.at, buf, first.len),
                            fab_op_read(row, after, peek)};
    int rc = fab_exec(c, ops, 3);
    if (rc) return rc;
    if (!quiet(before, after) || row_decode(buf, first.len, r->key_max, r->value_max, v))
        return 0;
    if (!(v->flags & ROW_LIVE) || v->klen != klen || v->vext || !v->val) return 0;
    return first.len >= 64u + klen && !memcmp(buf + 64, key, klen);
}

int store_remote_probe(struct fab_ctx *c, const struct store_remote *r, uint64_t hash,
                       rptr *cands, unsigned max)
{
    if (!c || !r || (max && !cands)) return RDKV_EINVAL;
    uint64_t nb = r->nbuckets;
    if (nb == 0 || (nb & (nb - 1))) return RDKV_EINVAL;
    if (max > 1u << 20) max = 1u << 20;
    uint64_t mask = nb - 1, b = hash & mask;
    uint16_t tag = store_slot_tag(hash);
    unsigned n = 0;
    for (uint64_t i = 0; i < nb; i++, b = (b + 1) & mask) {
        uint64_t bk[STORE_SLOTS_PER_BUCKET];
        int rc = fab_read(c, rptr_add(r->index, sizeof(struct store_index_hdr) + b * 64), bk,
                          sizeof bk);
        if (rc) return rc;
        bool empty = false;
        for (unsigned j = 0; j < STORE_SLOTS_PER_BUCKET; j++) {
            uint64_t v = bk[j];
            if (v == 0) empty = true;
            if (v == 0 || v == STORE_SLOT_TOMB || (uint16_t)(v >> 48) != tag) continue;
            uint64_t off = v & SLOT_OFF_MASK;
            if (off == 0 || (off & 63)) return RDKV_EPROTO;
            if (n == max) return RDKV_ETOOBIG; /* more candidates than room: ask with more */
            cands[n++] = rptr_make(r->node, off);
        }
        if (empty) break;
    }
    return (int)n;
}

int store_apply(struct store *s, bool del, const void *key, uint32_t klen, const void *val,
                uint32_t vlen)
{
    rptr row;
    int rc = store_lookup(s, key, klen, &row);
    if (del) return rc == RDKV_ENOTFOUND ? 0 : rc ? rc : store_row_delete(s, row);
    if (rc == 0) {
        struct store_staged st;
        rc = store_value_stage(s, row, val, vlen, &st);
        if (!rc) store_value_install(s, &st);
        return rc;
    }
    if (rc != RDKV_ENOTFOUND) return rc;
    rc = store_row_alloc(s, key, klen, val, vlen, &row);
    if (rc) return rc;
    rc = store_row_publish(s, row);
    if (rc) store_row_discard(s, row);
    return rc;
}
