/* The order of keys everywhere in rdkv (the ordered index, scans, range locks, checkpoints):
 * bytewise, and on a common prefix the shorter key first. */
#ifndef RDKV_KEY_H
#define RDKV_KEY_H

#include <stdint.h>
#include <string.h>

/* <0, 0 or >0 as a comes before, equals or comes after b. */
static inline int key_cmp(const void *a, uint32_t al, const void *b, uint32_t bl)
{
    uint32_t m = al < bl ? al : bl;
    int c = m ? memcmp(a, b, m) : 0;
    if (c) return c;
    return al < bl ? -1 : (al > bl ? 1 : 0);
}

#endif
