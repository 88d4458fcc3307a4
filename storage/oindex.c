/* The ordered index: a skiplist (storage/oindex.h). Node heights are geometric with p = 1/4, so a
 * search visits O(log n) nodes in expectation. */
#include "storage/oindex.h"

#include "common/key.h"
#include "common/rng.h"

#include <stdlib.h>
#include <string.h>

static struct onode *node_new(unsigned height)
{
    return calloc(1, sizeof(struct onode) + height * sizeof(struct onode *));
}

int oindex_init(struct oindex *oi, uint64_t seed)
{
    memset(oi, 0, sizeof *oi);
    oi->head = node_new(OINDEX_MAX_HEIGHT);
    if (!oi->head) return RDKV_ENOMEM;
    oi->head->height = OINDEX_MAX_HEIGHT;
    oi->height = 1;
    oi->rng = seed ? seed : 0x9E3779B97F4A7C15ull;
    return 0;
}

void oindex_free(struct oindex *oi)
{
    if (!oi->head) return;
    struct onode *n = oi->head->next[0];
    while (n) {
        struct onode *next = n->next[0];
        free(n);
        n = next;
    }
    free(oi->head);
    memset(oi, 0, sizeof *oi);
}

/* Fills prev[l] with the last node at level l whose key is < key. */
static void find_prev(const struct oindex *oi, const void *key, uint32_t klen, struct onode **prev)
{
    struct onode *x = oi->head;
    for (int l = OINDEX_MAX_HEIGHT - 1; l >= 0; l--) {
        if ((unsigned)l < oi->height) {
            for (struct onode *n = x->next[l]; n && key_cmp(n->key, n->klen, key, klen) < 0;
                 n = x->next[l])
                x = n;
        }
        prev[l] = x;
    }
}

int oindex_insert(struct oindex *oi, const void *key, uint32_t klen, rptr row)
{
    struct onode *prev[OINDEX_MAX_HEIGHT];
    find_prev(oi, key, klen, prev);
    struct onode *at = prev[0]->next[0];
    if (at && key_cmp(at->key, at->klen, key, klen) == 0) return RDKV_EEXIST;
    unsigned h = 1;
    while (h < OINDEX_MAX_HEIGHT && (rng_next(&oi->rng) & 3) == 0) h++;
    struct onode *n = node_new(h);
    if (!n) return RDKV_ENOMEM;
    n->row = row;
    n->key = key;
    n->klen = klen;
    n->height = h;
    if (h > oi->height) oi->height = h; /* prev[] above the old height is already the head */
    for (unsigned l = 0; l < h; l++) {
        n->next[l] = prev[l]->next[l];
        prev[l]->next[l] = n;
    }
    oi->count++;
    return 0;
}

rptr oindex_remove(struct oindex *oi, const void *key, uint32_t klen)
{
    struct onode *prev[OINDEX_MAX_HEIGHT];
    find_prev(oi, key, klen, prev);
    struct onode *n = prev[0]->next[0];
    if (!n || key_cmp(n->key, n->klen, key, klen) != 0) return RPTR_NULL;
    for (unsigned l = 0; l < n->height; l++)
        if (prev[l]->next[l] == n) prev[l]->next[l] = n->next[l];
    while (oi->height > 1 && !oi->head->next[oi->height - 1]) oi->height--;
    rptr row = n->row;
    free(n);
    oi->count--;
    return row;
}

const struct onode *oindex_seek(const struct oindex *oi, const void *key, uint32_t klen,
                                bool strict)
{
    struct onode *x = oi->head;
    for (int l = (int)oi->height - 1; l >= 0; l--) {
        for (;;) {
            struct onode *n = x->next[l];
            if (!n) break;
            int c = key_cmp(n->key, n->klen, key, klen);
            if (c < 0 || (strict && c == 0)) x = n;
            else break;
        }
    }
    return x->next[0];
}
