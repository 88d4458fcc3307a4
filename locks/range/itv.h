/* An interval tree: a balanced binary search tree of closed 64-bit intervals [lo, hi], ordered by
 * (lo, seq), each node augmented with the largest hi in its subtree, so that the intervals
 * overlapping a query are found in O((k + 1) log n) for k hits. Nodes are embedded in the caller's
 * structures (intrusive; no allocation). Several nodes may carry the same interval; seq (unique
 * per tree, chosen by the caller) tells them apart. Not thread-safe: one owner. */
#ifndef RDKV_RANGE_ITV_H
#define RDKV_RANGE_ITV_H

#include <stddef.h>
#include <stdint.h>

struct itv_node {
    uint64_t lo, hi;  /* set by the caller before insert; lo <= hi */
    uint64_t seq;     /* set by the caller before insert; unique within the tree */
    /* private */
    uint64_t max_hi;
    struct itv_node *left, *right, *parent;
    int height;
};

struct itv_tree {
    struct itv_node *root;
    size_t count;
};

void itv_init(struct itv_tree *t);
/* O(log n). n must not be in any tree; its lo, hi and seq must not change while it is in t. */
void itv_insert(struct itv_tree *t, struct itv_node *n);
/* O(log n). n must be in t; afterwards it may be reused or inserted again. */
void itv_remove(struct itv_tree *t, struct itv_node *n);
/* Calls fn for every node whose interval overlaps [lo, hi] (both closed: touching ends overlap),
 * in ascending (lo, seq) order, in O((k + 1) log n) for k hits; stops early when fn returns
 * nonzero (and returns that value), else returns 0. A query with lo > hi is empty. fn must not
 * change the tree. */
int itv_overlaps(const struct itv_tree *t, uint64_t lo, uint64_t hi,
                 int (*fn)(struct itv_node *n, void *arg), void *arg);
/* Checks the tree's invariants (order, balance, max_hi, parent links, count): 0 or -1. Tests. */
int itv_check(const struct itv_tree *t);

#endif
