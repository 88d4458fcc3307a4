/* Citron (FAST'23, as re-implemented in RangeThesis §3.2; seeds digest §1.6): a client-side range
 * lock over a 4-ary tree of DSLR lock lines in the space's region on the owner. The tree is stored
 * breadth-first: node 0 is the root, the children of i are 4i+1 .. 4i+4, its parent (i-1)/4;
 * level d has 4^d nodes, first index (4^d - 1)/3, and a node covers 4^(D-d) leaves (D =
 * tree_depth). A leaf covers 2^(bits - 2D) coordinates; leaves are the finest granularity, so a
 * range is locked as the superset of whole leaves that covers it, which is safe.
 *
 * Simplifications, as in the thesis. Every node is an internal node, locked whole: Citron's
 * leaves hold one bit per unit set with masked CAS, and masked atomics are not standard verbs (the
 * thesis considered all nodes internal for the same reason, which "effectively downgrades the
 * algorithm"). There is one mode, exclusive: the thesis's Citron ignores the read/write
 * distinction, so a LOCK_SHARED request is taken, and held, as exclusive (h->mode says so).
 * Citron's per-node T and D bakeries and occupied flag become one DSLR word per node: the
 * node's EXCLUSIVE hold is T's ticket plus the occupied flag, and a SHARED hold on every ancestor
 * is the D ticket by which a locker "announces activity to its ancestors" (with m = 1).
 *
 * Acquire [lo, hi]: map it to leaves [lo >> (bits-2D), hi >> (bits-2D)], split that interval into
 * its canonical cover (the maximal aligned blocks of 4^k leaves: at most 3 per side per level),
 * then lock in ascending BFS index every cover node EXCLUSIVE and every proper ancestor of a cover
 * node SHARED (once each), waiting for each grant before taking the next ticket.
 *
 * Why conflicting ranges cannot both be held. Tree nodes are nested or disjoint. If two ranges
 * share a leaf, the cover nodes p (of one) and q (of the other) containing that leaf lie on the
 * same root-to-leaf path; take the shallower (deepest node common to both lockers' sets, say p):
 * its owner holds p EXCLUSIVE, and the other holds p too -- EXCLUSIVE if p = q, SHARED if p is a
 * proper ancestor of q. DSLR never grants an exclusive hold alongside another hold. Conversely,
 * ranges with no common leaf have no cover node that is an ancestor of or equal to one of the
 * other's: their sets meet only on ancestors, both SHARED, so they proceed together.
 *
 * Why no deadlock. Every locker takes its nodes in one global order (ascending BFS index, which
 * puts each ancestor before its descendants) and holds a grant before taking the next ticket, so a
 * holder only ever waits on a node above every node it holds: no cycle of waits can form. (Taking
 * all tickets first would deadlock: FIFO tickets cannot be overtaken.)
 *
 * Failures, as for segment (segment.c): a failed node acquire (deadline, lease reset, fabric
 * error) gives back every node already held and returns its status; an acquire that finds a
 * node's lease already run out once it holds them all gives them back and returns RDKV_EABORTED;
 * release gives back every node, last taken first, and reports an expired lease RDKV_ETIMEDOUT. */
#include "locks/range/range.h"


/* Index of the node at level d, position pos within the level. */
static uint64_t node_index(unsigned d, uint64_t pos) { return (((uint64_t)1 << 2 * d) - 1) / 3 + pos; }

/* The nodes to lock: BFS index and mode, kept sorted by index, each index once. */
struct plan {
    unsigned n;
    uint64_t idx[RANGE_MAX_WORDS];
    uint8_t mode[RANGE_MAX_WORDS];
};

/* Adds (idx, mode) in order; a node already there keeps the stronger mode. -1 when full. */
static int plan_add(struct plan *p, uint64_t idx, enum lock_mode mode)
{
    unsigned i = p->n;
    while (i > 0 && p->idx[i - 1] > idx) i--;
    if (i > 0 && p->idx[i - 1] == idx) {
        if (mode == LOCK_EXCLUSIVE) p->mode[i - 1] = LOCK_EXCLUSIVE;
        return 0;
    }
    if (p->n == RANGE_MAX_WORDS) return -1;
    for (unsigned k = p->n; k > i; k--) {
        p->idx[k] = p->idx[k - 1];
        p->mode[k] = p->mode[k - 1];
    }
    p->idx[i] = idx;
    p->mode[i] = (uint8_t)mode;
    p->n++;
    return 0;
}

/* The cover of leaves [a, b] (a <= b < 4^D), EXCLUSIVE, and its nodes' ancestors, SHARED.
 * Left to right, each step takes the largest block of 4^k leaves that starts at a (aligned) and
 * ends within b: these are the maximal aligned blocks, the canonical segment-tree cover. At most
 * 6 cover nodes per level below the root and 2 ancestors per level above the leaves (the two
 * boundary paths), so at most 1 + 8(D-1) + 6 = 55 nodes for D = 7: within RANGE_MAX_WORDS. */
static int plan_range(struct plan *p, unsigned depth, uint64_t a, uint64_t b)
{
    p->n = 0;
    while (a <= b) {
        unsigned k = 0; /* block of 4^k leaves, level depth - k */
        while (k < depth) {
            uint64_t next = (uint64_t)1 << 2 * (k + 1);
            if ((a & (next - 1)) || a + next - 1 > b) break;
            k++;
        }
        uint64_t node = node_index(depth - k, a >> 2 * k);
        if (plan_add(p, node, LOCK_EXCLUSIVE)) return RDKV_EINVAL;
        for (uint64_t up = node; up > 0;) {
            up = (up - 1) / 4;
            if (plan_add(p, up, LOCK_SHARED)) return RDKV_EINVAL;
        }
        a += (uint64_t)1 << 2 * k;
    }
    return 0;
}

static int citron_acquire(struct range_handle *h, enum lock_mode mode, int64_t deadline)
{
    int rc = range_words_check(h, mode);
    if (rc) return rc;
    /* range_space_create guarantees 2D <= bits, and D >= 1 makes the shift < 64. */
    unsigned depth = h->cfg.tree_depth, shift = h->cfg.bits - 2 * depth;
    struct plan p;
    rc = plan_range(&p, depth, h->lo >> shift, h->hi >> shift);
    if (rc) return rc;
    rptr lines[sizeof p.idx / sizeof p.idx[0]];
    for (unsigned i = 0; i < p.n; i++) lines[i] = range_tree_line(h, p.idx[i]);
    rc = range_words_acquire(h, lines, p.mode, p.n, deadline);
    if (rc == 0) h->mode = LOCK_EXCLUSIVE; /* shared requests too: see above */
    return rc;
}

static int citron_release(struct range_handle *h)
{
    if (!h->mode) return RDKV_EINVAL;
    h->mode = 0;
    return range_words_release(h);
}

const struct range_algo range_citron = {
    .name = "citron",
    .server_side = false,
    .modes = 1u << LOCK_EXCLUSIVE, /* LOCK_SHARED accepted, taken as exclusive */
    .acquire = citron_acquire,
    .release = citron_release,
};
