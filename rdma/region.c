/* The arena's region directory: named regions carved out of a node's arena (fab_region), found
 * locally or, on another node, by READing its directory (fab_region_lookup). Entries are sealed,
 * so a READ that races a new entry never sees a torn one. */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static uint64_t region_seal(const struct arena_region *r)
{
    struct {
        char name[FAB_REGION_NAME_MAX + 1];
        uint64_t off, size;
    } k;
    memcpy(k.name, r->name, sizeof k.name);
    k.off = r->off;
    k.size = r->size;
    uint64_t s = XXH3_64bits(&k, sizeof k);
    return s ? s : 1;
}

static bool name_ok(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    return n > 0 && n <= FAB_REGION_NAME_MAX;
}

static int find_region(const struct arena_hdr *h, uint32_t nregions, const char *name, rptr *out,
                       uint64_t *size, uint16_t node)
{
    if (nregions > ARENA_MAX_REGIONS) nregions = ARENA_MAX_REGIONS;
    for (uint32_t i = 0; i < nregions; i++) {
        const struct arena_region *r = &h->regions[i];
        if (r->seal != region_seal(r)) continue; /* torn or not yet published */
        if (strncmp(r->name, name, sizeof r->name)) continue;
        if (out) *out = rptr_make(node, r->off);
        if (size) *size = r->size;
        return 0;
    }
    return RDKV_ENOTFOUND;
}

int fab_region(struct fabric *f, const char *name, uint64_t size, uint64_t align, rptr *out)
{
    if (!f->arena || !name_ok(name) || size == 0 || align == 0 || (align & (align - 1)) ||
        align > 4096)
        return RDKV_EINVAL;
    pthread_mutex_lock(&f->region_lock);
    struct arena_hdr *h = (struct arena_hdr *)f->arena;
    uint64_t have;
    int rc = find_region(h, h->nregions, name, out, &have, f->node);
    if (rc == 0) {
        rc = have == size ? 0 : RDKV_EEXIST;
        goto out;
    }
    if (h->nregions >= ARENA_MAX_REGIONS) {
        rc = RDKV_ENOSPC;
        goto out;
    }
    uint64_t off = (h->next_free + align - 1) & ~(align - 1);
    if (off > f->arena_size || size > f->arena_size - off) {
        rc = RDKV_ENOSPC;
        goto out;
    }
    /* Peers may READ the directory while it changes: fill the entry word by word (atomic
     * stores), then publish it with its seal. */
    struct arena_region e;
    memset(&e, 0, sizeof e);
    memcpy(e.name, name, strlen(name));
    e.off = off;
    e.size = size;
    e.seal = region_seal(&e);
    struct arena_region *r = &h->regions[h->nregions];
    uint64_t words[sizeof e / 8];
    memcpy(words, &e, sizeof e);
    for (size_t i = 0; i + 1 < sizeof e / 8; i++)
        __atomic_store_n((uint64_t *)(void *)r + i, words[i], __ATOMIC_RELAXED);
    __atomic_store_n(&r->seal, e.seal, __ATOMIC_RELEASE);
    __atomic_store_n(&h->nregions, h->nregions + 1, __ATOMIC_RELEASE);
    __atomic_store_n(&h->next_free, off + size, __ATOMIC_RELAXED);
    *out = rptr_make(f->node, off);
    rc = 0;
out:
    pthread_mutex_unlock(&f->region_lock);
    return rc;
}

int fab_region_lookup(struct fab_ctx *c, uint16_t node, const char *name, rptr *out, uint64_t *size)
{
    struct fabric *f = c->f;
    if (!name_ok(name) || node >= f->nnodes) return RDKV_EINVAL;
    if (node == f->node && f->arena) {
        pthread_mutex_lock(&f->region_lock);
        const struct arena_hdr *h = (const struct arena_hdr *)f->arena;
        int rc = find_region(h, h->nregions, name, out, size, node);
        pthread_mutex_unlock(&f->region_lock);
        return rc;
    }
    struct arena_hdr *h = malloc(sizeof *h);
    if (!h) return RDKV_ENOMEM;
    int rc = fab_read(c, rptr_make(node, 0), h, sizeof *h);
    if (rc == 0) {
        if (h->magic != ARENA_MAGIC) rc = RDKV_EPROTO;
        else rc = find_region(h, h->nregions, name, out, size, node);
    }
    free(h);
    return rc;
}
