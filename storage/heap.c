/* The row heap: a jemalloc arena over one range of the registered arena (storage/heap.h).
 *
 * jemalloc asks its extent hooks for memory in extents (page multiples, aligned to a page or
 * more; its first metadata block is 2 MiB aligned to 2 MiB). The hooks here hand out pieces of
 * the range from a short address-ordered list of free pieces, first fit with alignment, and
 * never ask the system for anything. jemalloc keeps ("retains") whatever it was given: dalloc
 * refuses, so extents come back only through destroy when the arena is destroyed. Memory stays
 * committed (it is registered for RDMA): commit succeeds, decommit and purges refuse, which also
 * tells jemalloc never to assume that a recycled extent reads as zeros. split and merge succeed:
 * the whole range is one mapping, so any two adjacent extents can be one. */
#include "storage/heap.h"

#include "rdkv_status.h"

#include <jemalloc/jemalloc.h>

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* Free pieces kept at most. Pieces appear only as alignment gaps in front of extents (a few)
 * and when the arena is destroyed, so this is never reached in practice; past it the smallest
 * piece is dropped (never handed out again), which wastes memory but stays correct. */
#define HEAP_MAX_PIECES 256

struct piece {
    uint64_t lo, hi; /* [lo, hi) as offsets from the range's base */
};

struct heap {
    extent_hooks_t hooks; /* first: jemalloc hands this pointer back to every hook */
    uint8_t *base;
    uint64_t size;
    unsigned arena;       /* jemalloc's arena index */
    int flags;            /* MALLOCX_ARENA(arena) | MALLOCX_TCACHE_NONE */
    pthread_mutex_t mu;   /* guards the pieces; hooks may run on any thread */
    struct piece free[HEAP_MAX_PIECES];
    unsigned nfree;
    uint64_t used;        /* bytes handed to jemalloc and not destroyed (atomic reads) */
    uint64_t dropped;     /* bytes lost because the piece list was full */
};

static struct heap *heap_of(extent_hooks_t *eh) { return (struct heap *)(void *)eh; }

/* ---- the free pieces (callers hold mu) ---- */

static void pieces_remove(struct heap *h, unsigned i)
{
    memmove(&h->free[i], &h->free[i + 1], (h->nfree - i - 1) * sizeof h->free[0]);
    h->nfree--;
}

/* Inserts [lo, hi) at index i (keeping address order); drops it when the list is full. */
static void pieces_insert_at(struct heap *h, unsigned i, uint64_t lo, uint64_t hi)
{
    if (h->nfree == HEAP_MAX_PIECES) {
        /* Drop the smallest of the list and the new piece. */
        unsigned small = 0;
        for (unsigned k = 1; k < h->nfree; k++)
            if (h->free[k].hi - h->free[k].lo < h->free[small].hi - h->free[small].lo) small = k;
        if (hi - lo <= h->free[small].hi - h->free[small].lo) {
            h->dropped += hi - lo;
            return;
        }
        h->dropped += h->free[small].hi - h->free[small].lo;
        pieces_remove(h, small);
        if (small < i) i--;
    }
    memmove(&h->free[i + 1], &h->free[i], (h->nfree - i) * sizeof h->free[0]);
    h->free[i] = (struct piece){lo, hi};
    h->nfree++;
}

/* Takes size bytes at want (an offset, or UINT64_MAX: anywhere) aligned to align; returns the
 * offset or UINT64_MAX. */
static uint64_t pieces_take(struct heap *h, uint64_t want, uint64_t size, uint64_t align)
{
    uintptr_t base = (uintptr_t)h->base;
    for (unsigned i = 0; i < h->nfree; i++) {
        uint64_t lo = h->free[i].lo, hi = h->free[i].hi, at;
        if (want != UINT64_MAX) {
            if (want < lo || want >= hi) continue;
            at = want;
        } else {
            /* Align the address, not the offset: jemalloc's alignment is absolute. */
            uintptr_t a = (base + lo + (align - 1)) & ~(uintptr_t)(align - 1);
            at = (uint64_t)(a - base);
            if (at < lo || at >= hi) continue;
        }
        if (size > hi - at) {
            if (want != UINT64_MAX) return UINT64_MAX;
            continue;
        }
        /* Replace the piece by what is left before and after the extent. */
        pieces_remove(h, i);
        if (at + size < hi) pieces_insert_at(h, i, at + size, hi);
        if (lo < at) pieces_insert_at(h, i, lo, at);
        return at;
    }
    return UINT64_MAX;
}

/* Gives [lo, hi) back, merging it with its neighbours. */
static void pieces_put(struct heap *h, uint64_t lo, uint64_t hi)
{
    unsigned i = 0;
    while (i < h->nfree && h->free[i].lo < lo) i++;
    bool prev = i > 0 && h->free[i - 1].hi == lo;
    bool next = i < h->nfree && h->free[i].lo == hi;
    if (prev && next) {
        h->free[i - 1].hi = h->free[i].hi;
        pieces_remove(h, i);
    } else if (prev) {
        h->free[i - 1].hi = hi;
    } else if (next) {
        h->free[i].lo = lo;
    } else {
        pieces_insert_at(h, i, lo, hi);
    }
}

/* ---- the extent hooks ---- */

static void *hook_alloc(extent_hooks_t *eh, void *new_addr, size_t size, size_t alignment,
                        bool *zero, bool *commit, unsigned arena_ind)
{
    (void)arena_ind;
    struct heap *h = heap_of(eh);
    if (size == 0 || alignment == 0 || (alignment & (alignment - 1))) return NULL;
    uint64_t want = UINT64_MAX;
    if (new_addr) {
        uint8_t *p = new_addr;
        if (p < h->base || p >= h->base + h->size) return NULL;
        want = (uint64_t)(p - h->base);
        if (((uintptr_t)p & (alignment - 1)) != 0) return NULL;
    }
    pthread_mutex_lock(&h->mu);
    uint64_t at = pieces_take(h, want, size, alignment);
    if (at != UINT64_MAX) __atomic_add_fetch(&h->used, size, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&h->mu);
    if (at == UINT64_MAX) return NULL;
    uint8_t *p = h->base + at;
    /* The range is not known to be zero (extents come back dirty after a destroy, and a store
     * reopened on the same region finds old bytes): zero only when asked. */
    if (*zero) memset(p, 0, size);
    *commit = true;
    return p;
}

/* Refused: jemalloc retains the extent and reuses it (nothing is ever given back to the system
 * or to another user of the range). */
static bool hook_dalloc(extent_hooks_t *eh, void *addr, size_t size, bool committed,
                        unsigned arena_ind)
{
    (void)eh, (void)addr, (void)size, (void)committed, (void)arena_ind;
    return true;
}

/* The arena is being destroyed (or jemalloc drops a retained extent): the extent is free again. */
static void hook_destroy(extent_hooks_t *eh, void *addr, size_t size, bool committed,
                         unsigned arena_ind)
{
    (void)committed, (void)arena_ind;
    struct heap *h = heap_of(eh);
    uint8_t *p = addr;
    if (p < h->base || size > h->size || (uint64_t)(p - h->base) > h->size - size) return;
    pthread_mutex_lock(&h->mu);
    uint64_t lo = (uint64_t)(p - h->base);
    pieces_put(h, lo, lo + size);
    __atomic_sub_fetch(&h->used, size, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&h->mu);
}

/* Registered memory is always committed: committing succeeds (false), and decommitting or
 * purging refuses (true), so jemalloc never thinks a page reads as zeros when it does not. */
static bool hook_commit(extent_hooks_t *eh, void *addr, size_t size, size_t offset, size_t length,
                        unsigned arena_ind)
{
    (void)eh, (void)addr, (void)size, (void)offset, (void)length, (void)arena_ind;
    return false;
}

static bool hook_refuse(extent_hooks_t *eh, void *addr, size_t size, size_t offset, size_t length,
                        unsigned arena_ind)
{
    (void)eh, (void)addr, (void)size, (void)offset, (void)length, (void)arena_ind;
    return true;
}

/* Extents are tracked by jemalloc alone; any split is fine, and so is any merge of two adjacent
 * extents, because the range is one mapping. Refusing would make jemalloc waste the rest of
 * every extent it grows by. */
static bool hook_split(extent_hooks_t *eh, void *addr, size_t size, size_t size_a, size_t size_b,
                       bool committed, unsigned arena_ind)
{
    (void)eh, (void)addr, (void)size, (void)size_a, (void)size_b, (void)committed,
        (void)arena_ind;
    return false;
}

static bool hook_merge(extent_hooks_t *eh, void *addr_a, size_t size_a, void *addr_b,
                       size_t size_b, bool committed, unsigned arena_ind)
{
    (void)eh, (void)addr_a, (void)size_a, (void)addr_b, (void)size_b, (void)committed,
        (void)arena_ind;
    return false;
}

/* ---- the heap ---- */

int heap_open(void *base, uint64_t size, struct heap **out, char *err, size_t errcap)
{
    *out = NULL;
    if (size < HEAP_MIN_BYTES) {
        snprintf(err, errcap, "the row heap needs at least %llu bytes, it has %llu",
                 (unsigned long long)HEAP_MIN_BYTES, (unsigned long long)size);
        return RDKV_ENOSPC;
    }
    struct heap *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errcap, "out of memory");
        return RDKV_ENOMEM;
    }
    h->hooks = (extent_hooks_t){
        .alloc = hook_alloc,
        .dalloc = hook_dalloc,
        .destroy = hook_destroy,
        .commit = hook_commit,
        .decommit = hook_refuse,
        .purge_lazy = hook_refuse,
        .purge_forced = hook_refuse,
        .split = hook_split,
        .merge = hook_merge,
    };
    h->base = base;
    h->size = size;
    pthread_mutex_init(&h->mu, NULL);
    h->free[0] = (struct piece){0, size};
    h->nfree = 1;

    extent_hooks_t *hooks = &h->hooks;
    unsigned ind;
    size_t sz = sizeof ind;
    int rc = mallctl("arenas.create", &ind, &sz, &hooks, sizeof hooks);
    if (rc) {
        snprintf(err, errcap, "jemalloc cannot create an arena over %llu bytes: %s",
                 (unsigned long long)size, strerror(rc));
        pthread_mutex_destroy(&h->mu);
        free(h);
        return rc == ENOMEM ? RDKV_ENOSPC : RDKV_ENOMEM;
    }
    h->arena = ind;
    h->flags = (int)MALLOCX_ARENA(ind) | MALLOCX_TCACHE_NONE;
    /* Never purge: purging cannot give registered memory back, and keeping dirty pages lets
     * jemalloc reuse them directly. Failure here costs only some needless hook calls. */
    char name[64];
    ssize_t never = -1;
    snprintf(name, sizeof name, "arena.%u.dirty_decay_ms", ind);
    (void)mallctl(name, NULL, NULL, &never, sizeof never);
    snprintf(name, sizeof name, "arena.%u.muzzy_decay_ms", ind);
    (void)mallctl(name, NULL, NULL, &never, sizeof never);
    *out = h;
    return 0;
}

void heap_close(struct heap *h)
{
    if (!h) return;
    char name[64];
    snprintf(name, sizeof name, "arena.%u.destroy", h->arena);
    if (mallctl(name, NULL, NULL, NULL, 0) != 0) {
        /* jemalloc still holds our hooks: keep them alive rather than let it call freed memory. */
        fprintf(stderr, "storage: cannot destroy jemalloc arena %u; leaking it\n", h->arena);
        return;
    }
    pthread_mutex_destroy(&h->mu);
    free(h);
}

void *heap_alloc(struct heap *h, size_t n, size_t align)
{
    if (n == 0) return NULL;
    int flags = h->flags;
    if (align > 1) flags |= MALLOCX_ALIGN(align);
    void *p = mallocx(n, flags);
    assert(!p || ((uint8_t *)p >= h->base && (uint8_t *)p + n <= h->base + h->size));
    return p;
}

void heap_free(struct heap *h, void *p)
{
    (void)h;
    if (p) dallocx(p, MALLOCX_TCACHE_NONE);
}

uint64_t heap_used(struct heap *h) { return __atomic_load_n(&h->used, __ATOMIC_RELAXED); }
