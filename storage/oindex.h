/* The ordered index of a store: a skiplist of (key, row) in key order (bytewise, shorter first on
 * a common prefix) for scans. Keys are not copied: a node points at its row's key bytes, which
 * must stay unchanged while the node is indexed. Not thread-safe: the store locks around it. */
#ifndef RDKV_STORAGE_OINDEX_H
#define RDKV_STORAGE_OINDEX_H

#include "rdma/fabric.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OINDEX_MAX_HEIGHT 24 /* levels of 1/4 each: ample for 2^40 keys */

struct onode {
    rptr row;
    const uint8_t *key; /* the row's key bytes, in the arena */
    uint32_t klen;
    uint32_t height;
    struct onode *next[]; /* height entries */
};

struct oindex {
    struct onode *head; /* a sentinel of OINDEX_MAX_HEIGHT levels, with no key */
    unsigned height;    /* levels in use */
    uint64_t count;
    uint64_t rng;       /* for node heights */
};


int oindex_init(struct oindex *oi, uint64_t seed); /* 0 or RDKV_ENOMEM */
void oindex_free(struct oindex *oi);
/* 0, RDKV_EEXIST (the key is there: nothing changed) or RDKV_ENOMEM (nothing changed). */
int oindex_insert(struct oindex *oi, const void *key, uint32_t klen, rptr row);
/* Removes the key; returns its row, or RPTR_NULL when it was absent. */
rptr oindex_remove(struct oindex *oi, const void *key, uint32_t klen);
/* The first node whose key is >= key (> key when strict), or NULL. */
const struct onode *oindex_seek(const struct oindex *oi, const void *key, uint32_t klen,
                                bool strict);
static inline const struct onode *oindex_next(const struct onode *n) { return n->next[0]; }

#endif
