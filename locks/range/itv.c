/* The intrusive interval tree of itv.h: an AVL tree ordered by (lo, seq) whose nodes also carry
 * max_hi, the largest hi in their subtree. Insert and remove walk from the changed spot back to
 * the root, recomputing height and max_hi and rotating where a node's subtrees differ in height
 * by 2; a rotation only changes the two (or three) nodes it moves, whose fields are recomputed
 * bottom-up. Queries prune with max_hi (nothing below reaches the query) and with the order on lo
 * (nothing to the right starts early enough). The tree never allocates; all comparisons are on
 * closed intervals with no arithmetic, so the full 64-bit range [0, UINT64_MAX] is safe. */
#include "locks/range/itv.h"

#include <stdbool.h>

/* ---- node helpers ---- */

static int height(const struct itv_node *n) { return n ? n->height : 0; }

/* Strict (lo, seq) order: does a come before b? */
static bool key_less(const struct itv_node *a, const struct itv_node *b)
{
    return a->lo < b->lo || (a->lo == b->lo && a->seq < b->seq);
}

/* Recomputes n's height and max_hi from its children (which must already be up to date). */
static void update(struct itv_node *n)
{
    int hl = height(n->left), hr = height(n->right);
    n->height = 1 + (hl > hr ? hl : hr);
    uint64_t m = n->hi;
    if (n->left && n->left->max_hi > m) m = n->left->max_hi;
    if (n->right && n->right->max_hi > m) m = n->right->max_hi;
    n->max_hi = m;
}

/* Makes `repl` take old's place under `parent` (or as the root when parent is NULL). Only the
 * parent's child pointer is changed; the caller sets repl->parent. */
static void replace_child(struct itv_tree *t, struct itv_node *parent, struct itv_node *old,
                          struct itv_node *repl)
{
    if (!parent)
        t->root = repl;
    else if (parent->left == old)
        parent->left = repl;
    else
        parent->right = repl;
}

/* Left rotation around x (x->right must exist); returns the subtree's new root.
 *
 *      x                y
 *     / \              / \
 *    a   y     ->     x   c
 *       / \          / \
 *      b   c        a   b
 */
static struct itv_node *rotate_left(struct itv_tree *t, struct itv_node *x)
{
    struct itv_node *y = x->right, *b = y->left;
    replace_child(t, x->parent, x, y);
    y->parent = x->parent;
    x->right = b;
    if (b) b->parent = x;
    y->left = x;
    x->parent = y;
    update(x); /* x is now below y: fix it first */
    update(y);
    return y;
}

/* Mirror image of rotate_left: y->left must exist. */
static struct itv_node *rotate_right(struct itv_tree *t, struct itv_node *y)
{
    struct itv_node *x = y->left, *b = x->right;
    replace_child(t, y->parent, y, x);
    x->parent = y->parent;
    y->left = b;
    if (b) b->parent = y;
    x->right = y;
    y->parent = x;
    update(y);
    update(x);
    return x;
}

/* Walks from n up to the root, recomputing every node's height and max_hi and restoring the AVL
 * balance with single or double rotations. The walk always reaches the root (rather than stopping
 * once heights settle) because max_hi may change all the way up: O(log n). */
static void rebalance_up(struct itv_tree *t, struct itv_node *n)
{
    while (n) {
        update(n);
        int bal = height(n->left) - height(n->right);
        if (bal > 1) {
            /* left-heavy; a left-right shape needs the child rotated first */
            if (height(n->left->left) < height(n->left->right)) rotate_left(t, n->left);
            n = rotate_right(t, n);
        } else if (bal < -1) {
            if (height(n->right->right) < height(n->right->left)) rotate_right(t, n->right);
            n = rotate_left(t, n);
        }
        /* n is now the root of the (possibly rotated) subtree, already updated */
        n = n->parent;
    }
}

/* ---- public operations ---- */

void itv_init(struct itv_tree *t)
{
    t->root = NULL;
    t->count = 0;
}

void itv_insert(struct itv_tree *t, struct itv_node *n)
{
    struct itv_node *parent = NULL, **link = &t->root;
    while (*link) {
        parent = *link;
        link = key_less(n, parent) ? &parent->left : &parent->right;
    }
    n->left = n->right = NULL;
    n->parent = parent;
    n->height = 1;
    n->max_hi = n->hi;
    *link = n;
    t->count++;
    rebalance_up(t, parent);
}

void itv_remove(struct itv_tree *t, struct itv_node *n)
{
    struct itv_node *parent = n->parent;
    struct itv_node *fix; /* lowest node whose subtree changed: rebalancing starts there */

    if (!n->left || !n->right) {
        /* at most one child: splice it into n's place */
        struct itv_node *child = n->left ? n->left : n->right;
        replace_child(t, parent, n, child);
        if (child) child->parent = parent;
        fix = parent;
    } else {
        /* Two children: n's in-order successor s (the leftmost node of the right subtree, which
         * has no left child) takes n's place. Nodes are the caller's, so s is relinked rather
         * than copied into n. */
        struct itv_node *s = n->right;
        while (s->left) s = s->left;
        if (s == n->right) {
            /* s keeps its right subtree; it only gains n's left one */
            fix = s;
        } else {
            /* detach s from deep in the right subtree, then give it n's right subtree */
            struct itv_node *sp = s->parent;
            sp->left = s->right;
            if (s->right) s->right->parent = sp;
            s->right = n->right;
            s->right->parent = s;
            fix = sp;
        }
        s->left = n->left;
        s->left->parent = s;
        s->parent = parent;
        replace_child(t, parent, n, s);
    }
    t->count--;
    n->left = n->right = n->parent = NULL;
    n->height = 0;
    rebalance_up(t, fix);
}

/* In-order walk of the overlapping nodes under n. Returns fn's first nonzero value, or 0. */
static int visit(struct itv_node *n, uint64_t lo, uint64_t hi,
                 int (*fn)(struct itv_node *n, void *arg), void *arg)
{
    while (n) {
        /* nothing in this subtree ends at or after lo */
        if (n->max_hi < lo) return 0;
        int r = visit(n->left, lo, hi, fn, arg);
        if (r) return r;
        /* n and everything to its right start after hi */
        if (n->lo > hi) return 0;
        if (n->hi >= lo) { /* n->lo <= hi holds here: [n->lo, n->hi] meets [lo, hi] */
            r = fn(n, arg);
            if (r) return r;
        }
        n = n->right; /* tail call as a loop: recursion depth is the left spine only */
    }
    return 0;
}

int itv_overlaps(const struct itv_tree *t, uint64_t lo, uint64_t hi,
                 int (*fn)(struct itv_node *n, void *arg), void *arg)
{
    if (lo > hi) return 0; /* an empty query meets nothing */
    return visit(t->root, lo, hi, fn, arg);
}

/* ---- invariant check ---- */

struct check_state {
    const struct itv_node *prev; /* previous node in order, for the (lo, seq) order check */
    size_t seen;                 /* nodes visited; bounded by count so a cycle cannot loop */
    size_t limit;
};

/* Checks the subtree under n, whose parent must be `parent`; returns its height or -1. */
static int check_node(const struct itv_node *n, const struct itv_node *parent,
                      struct check_state *st)
{
    if (!n) return 0;
    if (n->parent != parent) return -1;
    if (++st->seen > st->limit) return -1;
    if (n->lo > n->hi) return -1;
    int hl = check_node(n->left, n, st);
    if (hl < 0) return -1;
    /* in-order: every node strictly after its predecessor (seq is unique) */
    if (st->prev && !key_less(st->prev, n)) return -1;
    st->prev = n;
    int hr = check_node(n->right, n, st);
    if (hr < 0) return -1;
    if (hl - hr > 1 || hr - hl > 1) return -1;
    int h = 1 + (hl > hr ? hl : hr);
    if (n->height != h) return -1;
    uint64_t m = n->hi;
    if (n->left && n->left->max_hi > m) m = n->left->max_hi;
    if (n->right && n->right->max_hi > m) m = n->right->max_hi;
    if (n->max_hi != m) return -1;
    return h;
}

int itv_check(const struct itv_tree *t)
{
    struct check_state st = {NULL, 0, t->count};
    if (check_node(t->root, NULL, &st) < 0) return -1;
    return st.seen == t->count ? 0 : -1;
}
