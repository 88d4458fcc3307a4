/* Unit tests of the interval tree (locks/range/itv.h): fixed shapes (removal of the root, a leaf,
 * a one-child and a two-children node), the full 64-bit range, query order, early stop, pruning,
 * the invariant checker's own ability to see corruption, and randomized operations against a
 * brute-force array model with fixed seeds. */
#include "tests/harness.h"

#include "common/rng.h"

#include "locks/range/itv.h"

#include <math.h>

static uint64_t rng_state;
static void rng_seed(uint64_t s) { rng_state = s ? s : 88172645463325252ull; }
static uint64_t rng(void) { return rng_next(&rng_state); }

/* ---- collecting callback ---- */

enum { MAX_HITS = 4096 };

struct hits {
    struct itv_node *v[MAX_HITS];
    size_t n;
    size_t stop_after; /* return stop_ret on the stop_after-th call; 0: never stop */
    int stop_ret;
    bool overflow;
};

static int collect(struct itv_node *n, void *arg)
{
    struct hits *h = arg;
    if (h->n < MAX_HITS) h->v[h->n] = n;
    else h->overflow = true;
    h->n++;
    if (h->stop_after && h->n == h->stop_after) return h->stop_ret;
    return 0;
}

static void hits_reset(struct hits *h)
{
    h->n = 0;
    h->stop_after = 0;
    h->stop_ret = 0;
    h->overflow = false;
}

static int never_called(struct itv_node *n, void *arg)
{
    (void)n;
    (*(int *)arg)++;
    return 0;
}

static bool key_before(const struct itv_node *a, const struct itv_node *b)
{
    return a->lo < b->lo || (a->lo == b->lo && a->seq < b->seq);
}

static void set_itv(struct itv_node *n, uint64_t lo, uint64_t hi, uint64_t seq)
{
    n->lo = lo;
    n->hi = hi;
    n->seq = seq;
}

/* Tree height, from the root's (checked) height field. */
static int tree_height(const struct itv_tree *t) { return t->root ? t->root->height : 0; }

/* ---- tests ---- */

static void t_empty(void)
{
    struct itv_tree t;
    itv_init(&t);
    CHECK(t.root == NULL);
    CHECK_EQ(t.count, 0);
    CHECK_EQ(itv_check(&t), 0);
    int calls = 0;
    CHECK_EQ(itv_overlaps(&t, 0, UINT64_MAX, never_called, &calls), 0);
    CHECK_EQ(itv_overlaps(&t, 0, 0, never_called, &calls), 0);
    CHECK_EQ(itv_overlaps(&t, UINT64_MAX, UINT64_MAX, never_called, &calls), 0);
    CHECK_EQ(calls, 0);

    /* emptied again after use */
    struct itv_node a;
    set_itv(&a, 5, 9, 1);
    itv_insert(&t, &a);
    CHECK_EQ(t.count, 1);
    CHECK(t.root == &a);
    CHECK_EQ(itv_check(&t), 0);
    CHECK_EQ(itv_overlaps(&t, 0, UINT64_MAX, never_called, &calls), 0);
    CHECK_EQ(calls, 1);
    itv_remove(&t, &a);
    CHECK(t.root == NULL);
    CHECK_EQ(t.count, 0);
    CHECK_EQ(itv_check(&t), 0);
    calls = 0;
    CHECK_EQ(itv_overlaps(&t, 0, UINT64_MAX, never_called, &calls), 0);
    CHECK_EQ(calls, 0);
}

static void t_basic_overlaps(void)
{
    /* closed intervals: touching endpoints overlap */
    static const uint64_t iv[][2] = {{10, 20}, {15, 15}, {21, 30}, {0, 5}, {5, 10}, {40, 50},
                                     {25, 45}, {100, 200}};
    enum { N = sizeof iv / sizeof iv[0] };
    struct itv_node n[N];
    struct itv_tree t;
    itv_init(&t);
    for (unsigned i = 0; i < N; i++) {
        set_itv(&n[i], iv[i][0], iv[i][1], i);
        itv_insert(&t, &n[i]);
        CHECK_EQ(itv_check(&t), 0);
    }
    CHECK_EQ(t.count, N);
    static struct hits h;
    struct {
        uint64_t lo, hi;
        int expect[N + 1]; /* indices in (lo, seq) order, -1 terminated */
    } q[] = {
        {10, 10, {4, 0, -1}},
        {20, 21, {0, 2, -1}},
        {16, 16, {0, -1}},
        {15, 15, {0, 1, -1}},
        {5, 5, {3, 4, -1}},
        {51, 99, {-1}},
        {201, UINT64_MAX, {-1}},
        {200, 200, {7, -1}},
        {31, 39, {6, -1}},
        {0, UINT64_MAX, {3, 4, 0, 1, 2, 6, 5, 7, -1}},
        {0, 0, {3, -1}},
    };
    for (unsigned k = 0; k < sizeof q / sizeof q[0]; k++) {
        hits_reset(&h);
        CHECK_EQ(itv_overlaps(&t, q[k].lo, q[k].hi, collect, &h), 0);
        size_t m = 0;
        while (q[k].expect[m] >= 0) m++;
        CHECK_EQ(h.n, m);
        for (size_t j = 0; j < m && j < h.n; j++) CHECK(h.v[j] == &n[q[k].expect[j]]);
    }
    /* an inverted query is empty */
    hits_reset(&h);
    CHECK_EQ(itv_overlaps(&t, 30, 10, collect, &h), 0);
    CHECK_EQ(h.n, 0);
}

static void t_full_range(void)
{
    struct itv_node n[6];
    struct itv_tree t;
    itv_init(&t);
    set_itv(&n[0], 0, UINT64_MAX, 3);
    set_itv(&n[1], UINT64_MAX, UINT64_MAX, 1);
    set_itv(&n[2], 0, 0, UINT64_MAX); /* seq at its extremes too */
    set_itv(&n[3], UINT64_MAX - 1, UINT64_MAX, 0);
    set_itv(&n[4], 1, UINT64_MAX - 1, 7);
    set_itv(&n[5], 0, UINT64_MAX, 2);
    for (unsigned i = 0; i < 6; i++) {
        itv_insert(&t, &n[i]);
        REQUIRE(itv_check(&t) == 0);
    }
    CHECK(t.root->max_hi == UINT64_MAX);
    static struct hits h;
    /* whole range: (0,2) (0,3) (0,MAX) (1,7) (MAX-1,0) (MAX,1) */
    static const int all[] = {5, 0, 2, 4, 3, 1};
    hits_reset(&h);
    CHECK_EQ(itv_overlaps(&t, 0, UINT64_MAX, collect, &h), 0);
    CHECK_EQ(h.n, 6);
    for (unsigned j = 0; j < 6 && j < h.n; j++) CHECK(h.v[j] == &n[all[j]]);

    hits_reset(&h);
    itv_overlaps(&t, UINT64_MAX, UINT64_MAX, collect, &h);
    CHECK_EQ(h.n, 4); /* n5 n0 n3 n1 */
    if (h.n == 4) {
        CHECK(h.v[0] == &n[5]);
        CHECK(h.v[1] == &n[0]);
        CHECK(h.v[2] == &n[3]);
        CHECK(h.v[3] == &n[1]);
    }
    hits_reset(&h);
    itv_overlaps(&t, 0, 0, collect, &h);
    CHECK_EQ(h.n, 3); /* n5 n0 n2 */
    if (h.n == 3) {
        CHECK(h.v[0] == &n[5]);
        CHECK(h.v[1] == &n[0]);
        CHECK(h.v[2] == &n[2]);
    }
    hits_reset(&h);
    itv_overlaps(&t, UINT64_MAX - 1, UINT64_MAX - 1, collect, &h);
    CHECK_EQ(h.n, 4); /* n5 n0 n4 n3 */

    /* removing the only UINT64_MAX ends lowers max_hi where they were */
    itv_remove(&t, &n[0]);
    itv_remove(&t, &n[5]);
    itv_remove(&t, &n[1]);
    itv_remove(&t, &n[3]);
    CHECK_EQ(itv_check(&t), 0);
    CHECK(t.root->max_hi == UINT64_MAX - 1);
    hits_reset(&h);
    itv_overlaps(&t, UINT64_MAX, UINT64_MAX, collect, &h);
    CHECK_EQ(h.n, 0);
    itv_remove(&t, &n[4]);
    CHECK(t.root == &n[2] && t.root->max_hi == 0);
    hits_reset(&h);
    itv_overlaps(&t, 1, UINT64_MAX, collect, &h);
    CHECK_EQ(h.n, 0);
    itv_remove(&t, &n[2]);
    CHECK_EQ(itv_check(&t), 0);
    CHECK_EQ(t.count, 0);
}

/* Builds the perfect 7-node tree 4 / 2 6 / 1 3 5 7 (no rotations for this insertion order);
 * node k is [10k, 10k+5] with seq k. n[0] is unused. */
static void build7(struct itv_tree *t, struct itv_node n[8])
{
    static const int order[] = {4, 2, 6, 1, 3, 5, 7};
    itv_init(t);
    for (unsigned i = 0; i < 7; i++) {
        int k = order[i];
        set_itv(&n[k], 10 * (uint64_t)k, 10 * (uint64_t)k + 5, (uint64_t)k);
        itv_insert(t, &n[k]);
    }
}

/* The tree holds exactly the nodes k with present[k], in key order. */
static void expect_set(const struct itv_tree *t, struct itv_node n[8], const bool present[8])
{
    static struct hits h;
    hits_reset(&h);
    CHECK_EQ(itv_overlaps(t, 0, UINT64_MAX, collect, &h), 0);
    size_t j = 0;
    for (int k = 1; k <= 7; k++) {
        if (!present[k]) continue;
        CHECK(j < h.n && h.v[j] == &n[k]);
        j++;
    }
    CHECK_EQ(h.n, j);
    CHECK_EQ(t->count, j);
}

static void t_remove_shapes(void)
{
    struct itv_tree t;
    struct itv_node n[8];

    build7(&t, n);
    REQUIRE(itv_check(&t) == 0);
    REQUIRE(t.root == &n[4]);
    REQUIRE(n[4].left == &n[2] && n[4].right == &n[6]);
    CHECK_EQ(tree_height(&t), 3);
    CHECK(t.root->max_hi == 75);

    bool present[8] = {false, true, true, true, true, true, true, true};

    /* root, two children, successor deep in the right subtree (5, left child of 6) */
    itv_remove(&t, &n[4]);
    present[4] = false;
    CHECK_EQ(itv_check(&t), 0);
    CHECK(t.root == &n[5]);
    CHECK(n[5].parent == NULL);
    CHECK(n[4].left == NULL && n[4].right == NULL && n[4].parent == NULL);
    expect_set(&t, n, present);

    /* two children, successor is the right child itself (2: left 1, right 3) */
    itv_remove(&t, &n[2]);
    present[2] = false;
    CHECK_EQ(itv_check(&t), 0);
    CHECK(n[5].left == &n[3] && n[3].left == &n[1]);
    expect_set(&t, n, present);

    /* a leaf; max_hi must shrink along its path */
    CHECK(t.root->max_hi == 75);
    itv_remove(&t, &n[7]);
    present[7] = false;
    CHECK_EQ(itv_check(&t), 0);
    CHECK(t.root->max_hi == 65);
    expect_set(&t, n, present);

    /* a node with one child (3, left child 1) */
    REQUIRE(n[3].left == &n[1] && n[3].right == NULL);
    itv_remove(&t, &n[3]);
    present[3] = false;
    CHECK_EQ(itv_check(&t), 0);
    CHECK(n[1].parent == &n[5]);
    expect_set(&t, n, present);

    /* the rest, root first */
    while (t.root) {
        struct itv_node *r = t.root;
        itv_remove(&t, r);
        present[r - n] = false;
        CHECK_EQ(itv_check(&t), 0);
        expect_set(&t, n, present);
    }
    CHECK_EQ(t.count, 0);

    /* removed nodes can go back in */
    build7(&t, n);
    CHECK_EQ(itv_check(&t), 0);
    for (int k = 1; k <= 7; k++) present[k] = true;
    expect_set(&t, n, present);

    /* emptying the root's left side leaves it right-heavy by 2: a single left rotation */
    itv_remove(&t, &n[1]);
    itv_remove(&t, &n[3]);
    CHECK_EQ(itv_check(&t), 0);
    itv_remove(&t, &n[2]); /* left side of the root is now empty: height 3 on the right */
    present[1] = present[2] = present[3] = false;
    CHECK_EQ(itv_check(&t), 0);
    CHECK(t.root == &n[6]); /* single left rotation at 4 */
    expect_set(&t, n, present);
}

/* Insertions in ascending and descending order force every rotation; the height stays
 * logarithmic and every intermediate tree is valid. */
static void t_sequential(void)
{
    enum { N = 4096 };
    static struct itv_node n[N];
    struct itv_tree t;
    for (int dir = 0; dir < 2; dir++) {
        itv_init(&t);
        for (unsigned i = 0; i < N; i++) {
            unsigned k = dir ? N - 1 - i : i;
            set_itv(&n[k], k, k + 3, k);
            itv_insert(&t, &n[k]);
            if (i < 300) REQUIRE(itv_check(&t) == 0);
        }
        REQUIRE(itv_check(&t) == 0);
        CHECK_EQ(t.count, N);
        /* AVL bound: h < 1.4405 log2(n + 2) */
        CHECK(tree_height(&t) <= (int)(1.4405 * log2(N + 2.0)));
        CHECK(t.root->max_hi == N - 1 + 3);
        /* point query hits [k-3, k] */
        static struct hits h;
        hits_reset(&h);
        itv_overlaps(&t, 1000, 1000, collect, &h);
        CHECK_EQ(h.n, 4);
        for (unsigned j = 0; j < 4 && j < h.n; j++) CHECK(h.v[j] == &n[997 + j]);
        /* remove every other node, then the rest, ascending or descending */
        for (unsigned i = 0; i < N; i += 2) {
            itv_remove(&t, &n[dir ? N - 1 - i : i]);
            if (i < 300) REQUIRE(itv_check(&t) == 0);
        }
        REQUIRE(itv_check(&t) == 0);
        CHECK_EQ(t.count, N / 2);
        CHECK(tree_height(&t) <= (int)(1.4405 * log2(N / 2 + 2.0)));
        for (unsigned i = 1; i < N; i += 2) {
            itv_remove(&t, &n[dir ? N - 1 - i : i]);
            if (i > N - 300) REQUIRE(itv_check(&t) == 0);
        }
        CHECK(t.root == NULL);
        CHECK_EQ(t.count, 0);
    }
}

/* Many nodes with the same interval: they come back in seq order, and removal of any of them
 * leaves the others. */
static void t_duplicates(void)
{
    enum { N = 1000 };
    static struct itv_node n[N];
    static unsigned perm[N];
    struct itv_tree t;
    itv_init(&t);
    rng_seed(7);
    for (unsigned i = 0; i < N; i++) perm[i] = i;
    for (unsigned i = N - 1; i > 0; i--) {
        unsigned j = (unsigned)(rng() % (i + 1)), tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    /* seq i for n[i]; inserted in shuffled order */
    for (unsigned i = 0; i < N; i++) {
        set_itv(&n[perm[i]], 100, 200, perm[i]);
        itv_insert(&t, &n[perm[i]]);
        if (i < 200) REQUIRE(itv_check(&t) == 0);
    }
    REQUIRE(itv_check(&t) == 0);
    static struct hits h;
    hits_reset(&h);
    itv_overlaps(&t, 200, 300, collect, &h);
    CHECK_EQ(h.n, N);
    for (unsigned j = 0; j < N && j < h.n; j++) CHECK(h.v[j] == &n[j]);
    hits_reset(&h);
    itv_overlaps(&t, 201, UINT64_MAX, collect, &h);
    CHECK_EQ(h.n, 0);
    hits_reset(&h);
    itv_overlaps(&t, 0, 99, collect, &h);
    CHECK_EQ(h.n, 0);
    /* remove the odd seqs in shuffled order */
    for (unsigned i = 0; i < N; i++) {
        if (perm[i] % 2 == 0) continue;
        itv_remove(&t, &n[perm[i]]);
        if (i < 200) REQUIRE(itv_check(&t) == 0);
    }
    REQUIRE(itv_check(&t) == 0);
    hits_reset(&h);
    itv_overlaps(&t, 150, 150, collect, &h);
    CHECK_EQ(h.n, N / 2);
    for (unsigned j = 0; j < N / 2 && j < h.n; j++) CHECK(h.v[j] == &n[2 * j]);
}

static void t_early_stop(void)
{
    enum { N = 100 };
    static struct itv_node n[N];
    struct itv_tree t;
    itv_init(&t);
    for (unsigned i = 0; i < N; i++) {
        /* distinct but overlapping, inserted in pseudo-random order via seq shuffling */
        unsigned k = (i * 37) % N;
        set_itv(&n[k], 5 * (uint64_t)k, 5 * (uint64_t)k + 50, k);
        itv_insert(&t, &n[k]);
    }
    REQUIRE(itv_check(&t) == 0);
    static struct hits h;
    for (size_t stop = 1; stop <= N; stop++) {
        hits_reset(&h);
        h.stop_after = stop;
        h.stop_ret = (int)stop * 3 - 1000; /* any nonzero value, negative included */
        int r = itv_overlaps(&t, 0, UINT64_MAX, collect, &h);
        CHECK_EQ(r, h.stop_ret);
        CHECK_EQ(h.n, stop);
        for (size_t j = 0; j < stop && j < h.n; j++) CHECK(h.v[j] == &n[j]);
    }
    /* a stop in the middle of a narrower query: hits are n[10..30], stop at the 5th */
    hits_reset(&h);
    h.stop_after = 5;
    h.stop_ret = 1;
    CHECK_EQ(itv_overlaps(&t, 100, 150, collect, &h), 1);
    CHECK_EQ(h.n, 5);
    for (size_t j = 0; j < 5 && j < h.n; j++) CHECK(h.v[j] == &n[10 + j]);
    /* never stopping returns 0 after all 21 */
    hits_reset(&h);
    CHECK_EQ(itv_overlaps(&t, 100, 150, collect, &h), 0);
    CHECK_EQ(h.n, 21);
    /* a stop on the very last hit still returns its value */
    hits_reset(&h);
    h.stop_after = 21;
    h.stop_ret = 9;
    CHECK_EQ(itv_overlaps(&t, 100, 150, collect, &h), 9);
    CHECK_EQ(h.n, 21);
}

/* Pruning, observed white-box: a node made inconsistent with its ancestors' summaries is not
 * reported when the query must skip its subtree, which a full walk would report. */
static void t_pruning(void)
{
    struct itv_tree t;
    struct itv_node n[8];
    static struct hits h;
    build7(&t, n);
    REQUIRE(t.root == &n[4] && n[4].left == &n[2] && n[2].left == &n[1]);
    REQUIRE(n[4].right == &n[6] && n[6].right == &n[7]);
    REQUIRE(n[2].max_hi == 35);

    /* max_hi: the left subtree of the root ends at 35 < 50, so it is not entered */
    n[1].hi = 1000; /* stale: max_hi on the path still says 35 */
    hits_reset(&h);
    itv_overlaps(&t, 50, 100, collect, &h);
    CHECK_EQ(h.n, 3);
    for (unsigned j = 0; j < 3 && j < h.n; j++) CHECK(h.v[j] == &n[5 + j]);
    n[1].hi = 15;

    /* lo order: the root starts at 40 > 25, so nothing right of it is visited */
    n[7].lo = 0; /* out of order on purpose */
    hits_reset(&h);
    itv_overlaps(&t, 0, 25, collect, &h);
    CHECK_EQ(h.n, 2);
    CHECK(h.n >= 1 && h.v[0] == &n[1]);
    CHECK(h.n >= 2 && h.v[1] == &n[2]);
    n[7].lo = 70;
    CHECK_EQ(itv_check(&t), 0);
}

/* itv_check itself must see every kind of damage, or the other tests prove little. */
static void t_check_detects(void)
{
    struct itv_tree t;
    struct itv_node n[8];
    build7(&t, n);
    REQUIRE(itv_check(&t) == 0);

    n[1].max_hi = 14;
    CHECK_EQ(itv_check(&t), -1);
    n[1].max_hi = 15;
    n[2].max_hi = 40; /* too large is wrong too */
    CHECK_EQ(itv_check(&t), -1);
    n[2].max_hi = 35;
    n[4].height = 4;
    CHECK_EQ(itv_check(&t), -1);
    n[4].height = 3;
    n[5].parent = &n[4];
    CHECK_EQ(itv_check(&t), -1);
    n[5].parent = &n[6];
    t.root->parent = &n[1];
    CHECK_EQ(itv_check(&t), -1);
    t.root->parent = NULL;
    t.count = 6;
    CHECK_EQ(itv_check(&t), -1);
    t.count = 8;
    CHECK_EQ(itv_check(&t), -1);
    t.count = 7;
    n[3].lo = 21; /* still inside (20, 40) on lo alone: fine */
    CHECK_EQ(itv_check(&t), 0);
    n[3].lo = 45; /* right of the root's left subtree is past the root */
    CHECK_EQ(itv_check(&t), -1);
    n[3].lo = 20; /* equal lo to its parent 2 (seq 2 < 3): order still holds */
    CHECK_EQ(itv_check(&t), 0);
    n[3].seq = 2; /* duplicate key */
    CHECK_EQ(itv_check(&t), -1);
    n[3].seq = 1; /* (20,1) sorts before (20,2) but sits right of it */
    CHECK_EQ(itv_check(&t), -1);
    n[3].seq = 3;
    n[3].lo = 30;
    CHECK_EQ(itv_check(&t), 0);
    n[7].lo = 76; /* lo > hi, though the order still holds */
    CHECK_EQ(itv_check(&t), -1);
    n[7].lo = 70;
    CHECK_EQ(itv_check(&t), 0);

    /* an unbalanced chain with otherwise consistent fields */
    struct itv_node c[3];
    struct itv_tree u = {&c[0], 3};
    for (int i = 0; i < 3; i++) {
        set_itv(&c[i], (uint64_t)i, (uint64_t)i, (uint64_t)i);
        c[i].left = NULL;
        c[i].right = i < 2 ? &c[i + 1] : NULL;
        c[i].parent = i ? &c[i - 1] : NULL;
        c[i].height = 3 - i;
        c[i].max_hi = 2;
    }
    CHECK_EQ(itv_check(&u), -1);
    /* the same three balanced are fine */
    c[0].right = NULL;
    c[0].height = 1;
    c[0].max_hi = 0;
    c[0].parent = &c[1];
    c[1].left = &c[0];
    c[1].parent = NULL;
    c[1].height = 2;
    u.root = &c[1];
    CHECK_EQ(itv_check(&u), 0);
    /* a cycle must not hang the checker */
    c[2].right = &c[1];
    CHECK_EQ(itv_check(&u), -1);
}

/* ---- randomized, against a brute-force model ---- */

struct model {
    struct itv_node *n;
    bool *in;
    unsigned cap;
    uint64_t next_seq;
    struct itv_tree t;
};

static uint64_t pick_point(uint64_t dom)
{
    switch (rng() % 16) {
    case 0: return 0;
    case 1: return UINT64_MAX;
    case 2: return UINT64_MAX - rng() % dom;
    case 3: return rng();
    default: return rng() % dom;
    }
}

/* Random intervals: mostly in a small domain (many duplicates), some touching 0 or UINT64_MAX,
 * some anywhere, a fixed popular one. */
static void pick_interval(uint64_t dom, uint64_t *lo, uint64_t *hi)
{
    switch (rng() % 10) {
    case 0: *lo = 0; *hi = rng() % 3 == 0 ? UINT64_MAX : rng() % dom; return;
    case 1: *lo = UINT64_MAX - rng() % 4; *hi = UINT64_MAX; return;
    case 2: *lo = dom / 3; *hi = dom / 2; return; /* the same interval, again and again */
    default: break;
    }
    uint64_t a = pick_point(dom), b = rng() % 4 == 0 ? pick_point(dom) : a + rng() % (dom / 8 + 1);
    if (b < a) { /* either an overflowed sum or an inverted pair */
        uint64_t tmp = a;
        a = b;
        b = tmp;
    }
    *lo = a;
    *hi = b;
}

static int cmp_node_ptr(const void *a, const void *b)
{
    const struct itv_node *x = *(struct itv_node *const *)a, *y = *(struct itv_node *const *)b;
    return key_before(x, y) ? -1 : key_before(y, x) ? 1 : 0;
}

/* Compares one query (with an optional stop) against the model. */
static void model_query(struct model *m, uint64_t lo, uint64_t hi, size_t stop)
{
    static struct itv_node *want[MAX_HITS];
    static struct hits h;
    size_t w = 0;
    for (unsigned i = 0; i < m->cap; i++)
        if (m->in[i] && m->n[i].lo <= hi && m->n[i].hi >= lo && lo <= hi) want[w++] = &m->n[i];
    qsort(want, w, sizeof want[0], cmp_node_ptr);
    hits_reset(&h);
    h.stop_after = stop;
    h.stop_ret = 77;
    int r = itv_overlaps(&m->t, lo, hi, collect, &h);
    size_t expect_n = stop && stop <= w ? stop : w;
    CHECK_EQ(r, stop && stop <= w ? 77 : 0);
    CHECK(!h.overflow);
    if (h.n != expect_n) {
        fprintf(stderr, "  query [%" PRIu64 ", %" PRIu64 "]: %zu hits, want %zu\n", lo, hi, h.n,
                expect_n);
        harness_failures++;
        return;
    }
    for (size_t j = 0; j < expect_n; j++)
        if (h.v[j] != want[j]) {
            fprintf(stderr, "  query [%" PRIu64 ", %" PRIu64 "]: hit %zu differs\n", lo, hi, j);
            harness_failures++;
            return;
        }
}

/* ops random operations on up to cap nodes over a domain of dom; itv_check every check_every. */
static void run_model(uint64_t seed, unsigned cap, unsigned ops, uint64_t dom, unsigned check_every)
{
    static struct itv_node nodes[4096];
    static bool in[4096];
    REQUIRE(cap <= 4096);
    struct model m = {nodes, in, cap, 0, {NULL, 0}};
    itv_init(&m.t);
    memset(in, 0, sizeof in);
    rng_seed(seed);
    size_t live = 0;
    int fails_before = harness_failures;
    for (unsigned op = 0; op < ops; op++) {
        unsigned i = (unsigned)(rng() % cap);
        unsigned what = (unsigned)(rng() % 8);
        /* 3/8 remove, 3/8 insert, 2/8 query; only removals and queries in the last stretch */
        if (op > ops - ops / 8) what = in[i] ? 0 : 6;
        if (what < 3) {
            if (in[i]) {
                itv_remove(&m.t, &nodes[i]);
                in[i] = false;
                live--;
            } else {
                what = 3;
            }
        }
        if (what >= 3 && what < 6) {
            if (!in[i]) {
                uint64_t lo, hi;
                pick_interval(dom, &lo, &hi);
                /* unique seq, scrambled so key order among duplicates is not insertion order */
                set_itv(&nodes[i], lo, hi, (m.next_seq++) * 0x9E3779B97F4A7C15ull);
                itv_insert(&m.t, &nodes[i]);
                in[i] = true;
                live++;
            }
        } else if (what >= 6) {
            uint64_t lo, hi;
            if (rng() % 2) {
                lo = pick_point(dom);
                hi = rng() % 3 ? lo : pick_point(dom);
            } else {
                pick_interval(dom, &lo, &hi);
            }
            if (rng() % 8 == 0) { /* sometimes inverted */
                uint64_t tmp = lo;
                lo = hi;
                hi = tmp;
            }
            model_query(&m, lo, hi, rng() % 4 == 0 ? 1 + rng() % 8 : 0);
        }
        CHECK_EQ(m.t.count, live);
        if (check_every && op % check_every == 0 && itv_check(&m.t) != 0) {
            fprintf(stderr, "  seed %" PRIu64 " op %u: itv_check failed\n", seed, op);
            harness_failures++;
        }
        if (harness_failures - fails_before > 20) return; /* enough said */
    }
    CHECK_EQ(itv_check(&m.t), 0);
    /* full sweep at the end, then empty the tree */
    model_query(&m, 0, UINT64_MAX, 0);
    for (unsigned i = 0; i < cap; i++)
        if (in[i]) {
            itv_remove(&m.t, &nodes[i]);
            in[i] = false;
        }
    CHECK(m.t.root == NULL);
    CHECK_EQ(m.t.count, 0);
}

static void t_random_small(void)
{
    /* small trees, tiny domains (lots of duplicates), itv_check after every operation */
    static const uint64_t seeds[] = {1, 2, 3, 0xdeadbeef, 42424242};
    for (unsigned s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        run_model(seeds[s], 8, 3000, 4, 1);
        run_model(seeds[s] + 100, 40, 5000, 16, 1);
        run_model(seeds[s] + 200, 150, 5000, 64, 1);
    }
}

static void t_random_large(void)
{
    /* larger trees, wider domains, itv_check now and then */
    run_model(7, 2000, 12000, 1000, 997);
    run_model(8, 4096, 12000, 1u << 20, 1999);
    run_model(9, 1000, 12000, 50, 499);
}

static const struct test_case cases[] = {
    {"empty", t_empty},
    {"basic_overlaps", t_basic_overlaps},
    {"full_range", t_full_range},
    {"remove_shapes", t_remove_shapes},
    {"sequential", t_sequential},
    {"duplicates", t_duplicates},
    {"early_stop", t_early_stop},
    {"pruning", t_pruning},
    {"check_detects", t_check_detects},
    {"random_small", t_random_small},
    {"random_large", t_random_large},
};

int main(int argc, char **argv)
{
    return test_main(argc - 1, argv + 1, cases, sizeof cases / sizeof cases[0]);
}
