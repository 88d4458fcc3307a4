/* The topology-aware RMA locks of the HPDC'16 paper for a machine of two levels (the cluster,
 * its nodes): RMA-MCS (writers only) and RMA-RW (readers too). A writer queues in its node's MCS
 * queue (DQ2, tail in the node's site for the lock), and the node's holder queues for the
 * cluster (DQ1, tail in the lock line) with the node's own level-1 queue node; the lock passes
 * inside a node up to T_L,2 times before it leaves. RMA-RW's readers touch one counter near them
 * (the distributed counter, DC) and never queue. Protocol, layout, the digest's defects and how
 * each is resolved: docs/rma-locks.md. Every access to shared state goes through the fabric,
 * local ones included; a client reads and initialises only its own queue nodes with plain loads
 * and stores. No abort path: the deadline is ignored, as for mcs. */
#include "lock_internal.h"

#include "common/fence.h"

/* STATUS of a queue node (a descriptor's budget word for DQ2, the site's STATUS1 for DQ1) */
#define ST_WAIT (-1)
#define ST_PARENT (-2)      /* ACQUIRE_PARENT: the lock left the node; climb to DQ1 */
#define ST_MODE_CHANGE (-3) /* the lock went to the readers; set WRITE mode again */
#define ST_START 1          /* ACQUIRE_START: the first of up to T_L consecutive entries */

/* A lock's site on one node: 64 bytes at lockrma[node] + 64 * global index */
#define SITE_TAIL2 0
#define SITE_NEXT1 8
#define SITE_STATUS1 16
#define SITE_CTR 32
#define RMA_MAX_CTRS 4

/* A DC counter: one word, so that a reset is one CAS and every field is read at once.
 *   bit 63 MODE (WRITE when set), bit 62 EPOCH, bits 51..61 and 40..50 the readers registered
 *   in epoch 1 and epoch 0 (WAITERS), bits 20..39 ARRIVE, bits 0..19 DEPART */
#define C_MODE (1ull << 63)
#define C_EPOCH (1ull << 62)
#define C_WSH 40
#define C_WBITS 11
#define C_WAITERS_ALL (((1ull << (2 * C_WBITS)) - 1) << C_WSH)
#define C_ARRIVE (1ull << 20)
#define C_DEPART 1ull
#define RMA_TR_MAX (1 << 19)      /* ARRIVE <= T_R + the counter's clients < 2^20 */
#define RMA_DC_NODES_MAX 8        /* WAITERS <= 255 clients per node x 8 nodes < 2^11 */
static inline uint64_t c_waiter(unsigned e) { return 1ull << (C_WSH + C_WBITS * e); }
static inline unsigned c_epoch(uint64_t w) { return (unsigned)(w >> 62) & 1; }
static inline uint64_t c_waiters(uint64_t w, unsigned e)
{
    return (w >> (C_WSH + C_WBITS * e)) & ((1u << C_WBITS) - 1);
}
/* readers registered before the current epoch: entitled to enter at the next READ arrival */
static inline uint64_t c_oldw(uint64_t w) { return c_waiters(w, 1 - c_epoch(w)); }
static inline uint64_t c_arrive(uint64_t w) { return (w >> 20) & 0xFFFFF; }
static inline uint64_t c_depart(uint64_t w) { return w & 0xFFFFF; }
/* A reset: ARRIVE less DEPART, DEPART 0, WAITERS kept, READ mode (a reader resets only in READ
 * mode), and a new epoch unless readers of the old one are still registered. */
static inline uint64_t c_reset(uint64_t w)
{
    uint64_t n = (w & (C_WAITERS_ALL | C_EPOCH)) | (c_arrive(w) - c_depart(w)) * C_ARRIVE;
    return c_oldw(w) == 0 ? n ^ C_EPOCH : n;
}

struct rma {
    struct lock_thread *t;
    rptr tail1;                  /* the lock line: DQ1's tail */
    rptr site;                   /* this node's site */
    uint64_t *lsite;             /* ... and its local address */
    uint32_t g;                  /* the lock's global index */
};

static int rma_open(struct lock_handle *h, struct rma *r)
{
    struct lock_thread *t = h->t;
    const struct locktable *lt = t->table;
    if (!lt) return RDKV_EINVAL; /* lock_thread_use_table first */
    uint32_t g = locktable_index(lt, h->line);
    if (g == UINT32_MAX || g >= LOCK_RMA_MAX || t->node >= lt->nodes || !lt->rma[t->node])
        return RDKV_EINVAL;
    r->t = t;
    r->g = g;
    r->tail1 = h->line;
    r->site = rptr_add(lt->rma[t->node], (uint64_t)g * LOCK_LINE);
    r->lsite = fab_local(t->f, r->site);
    return r->lsite ? 0 : RDKV_EINVAL;
}

static rptr site_of(const struct rma *r, uint16_t node)
{
    return rptr_add(r->t->table->rma[node], (uint64_t)r->g * LOCK_LINE);
}

static int64_t ld_s64(const uint64_t *p) { return (int64_t)ld64(p); }

/* ---------------------------------------------------------------------------------------------
 * The distributed counter (rma-rw) */

static unsigned ctr_k(const struct lock_thread *t)
{
    int64_t k = t->cfg.rma_dc_nodes;
    return k < 1 ? 1 : k > RMA_DC_NODES_MAX ? RMA_DC_NODES_MAX : (unsigned)k;
}
static unsigned ctr_c(const struct lock_thread *t)
{
    int64_t c = t->cfg.rma_dc_per_node;
    return c < 1 ? 1 : c > RMA_MAX_CTRS ? RMA_MAX_CTRS : (unsigned)c;
}

/* The counter a reader of this client uses */
static rptr my_counter(const struct rma *r)
{
    const struct lock_thread *t = r->t;
    uint16_t host = (uint16_t)(t->node / ctr_k(t) * ctr_k(t));
    return rptr_add(site_of(r, host), SITE_CTR + 8u * (t->slab % ctr_c(t)));
}

/* Runs fn on every counter of the lock; stops at the first error. */
typedef int (*ctr_fn)(struct rma *r, rptr ctr);
static int each_counter(struct rma *r, ctr_fn fn)
{
    const struct lock_thread *t = r->t;
    for (unsigned host = 0; host < t->table->nodes; host += ctr_k(t))
        for (unsigned s = 0; s < ctr_c(t); s++) {
            int rc = fn(r, rptr_add(site_of(r, (uint16_t)host), SITE_CTR + 8u * s));
            if (rc) return rc;
        }
    return 0;
}

static int peek(struct rma *r, rptr ctr, uint64_t *w) { return fab_faa(r->t->c, ctr, 0, w); }

/* Before a writer sets WRITE: the readers entitled to this READ phase (registered before its
 * epoch) have entered and left. */
static int admit_one(struct rma *r, rptr ctr)
{
    for (unsigned round = 0;; round++) {
        uint64_t w;
        int rc = peek(r, ctr, &w);
        if (rc || c_oldw(w) == 0) return rc;
        lock_backoff(round < 12 ? round : 12);
    }
}

static int set_write_one(struct rma *r, rptr ctr) { return fab_faa(r->t->c, ctr, C_MODE, NULL); }

/* After setting WRITE: every reader that arrived before has left (transient arrivals of readers
 * that will back off are counted, and leave by themselves). */
static int drain_one(struct rma *r, rptr ctr)
{
    for (unsigned round = 0;; round++) {
        uint64_t w;
        int rc = peek(r, ctr, &w);
        if (rc || c_arrive(w) == c_depart(w)) return rc;
        lock_backoff(round < 12 ? round : 12);
    }
}

/* The writer's reset: READ mode, ARRIVE less DEPART (the readers still counted stay counted). */
static int reset_one(struct rma *r, rptr ctr)
{
    uint64_t w;
    int rc = peek(r, ctr, &w);
    while (!rc) {
        uint64_t old;
        if ((rc = fab_cas(r->t->c, ctr, w, c_reset(w), &old)) || old == w) return rc;
        w = old;
    }
    return rc;
}

/* A waiting reader's reset when T_R readers came since the last and no writer is near: never
 * while a writer has set WRITE (the CAS is on the exact word it read, so a writer's FAA in
 * between makes it fail), and not once the reader is entitled or below T_R again: a CAS that
 * keeps failing means others arrive, reset or leave, and one of those gets the reader in. */
static int reader_reset(struct rma *r, rptr ctr, unsigned re, uint64_t tr)
{
    uint64_t w;
    int rc = peek(r, ctr, &w);
    while (!rc && !(w & C_MODE) && c_epoch(w) == re && c_arrive(w) >= tr) {
        uint64_t old;
        if ((rc = fab_cas(r->t->c, ctr, w, c_reset(w), &old)) || old == w) return rc;
        w = old;
    }
    return rc;
}

/* Whether DQ1 is empty: no writer holds the lock or waits for it outside its node. */
static int dq1_empty(struct rma *r, bool *empty)
{
    uint64_t tail;
    int rc = fab_faa(r->t->c, r->tail1, 0, &tail);
    *empty = tail == 0; /* (a ticket out means a writer on its way in) */
    return rc;
}

/* A reader that cannot enter registers in the WAITERS field of the epoch it saw, and stays
 * registered until it leaves. Once the epoch has moved on (a reset flips it, unless readers of
 * the previous epoch are still registered) it is entitled: it enters at a READ arrival whatever
 * ARRIVE says, and a writer's admit() waits until every entitled reader has entered and left.
 * So a READ phase admits everyone who waited before it, and newcomers cannot crowd them out.
 * It registers before it resets anything: a reset CAS tried first could fail for ever while a
 * peer of the counter arrives, resets and enters. (The model's WAITER_GAP, TR_GAP and
 * BUG_STARVE variants are the simpler schemes this replaces: each starves a reader.) h->aux2: registered (bit 0), its epoch (bit 1). */
static int reader_acquire(struct rma *r, struct lock_handle *h)
{
    struct lock_thread *t = r->t;
    rptr c = my_counter(r);
    bool reg = false;
    unsigned re = 0;
    int64_t tr = t->cfg.rma_tr < 1 ? 1 : t->cfg.rma_tr > RMA_TR_MAX ? RMA_TR_MAX : t->cfg.rma_tr;
    for (;;) {
        uint64_t w;
        int rc = fab_faa(t->c, c, C_ARRIVE, &w);
        if (rc) return rc;
        bool entitled = reg && c_epoch(w) != re;
        if (!(w & C_MODE) && (entitled || c_arrive(w) < (uint64_t)tr)) {
            h->aux = c;
            h->aux2 = reg ? 1u | re << 1 : 0;
            return 0;
        }
        if (reg) { /* back off; still registered */
            rc = fab_faa(t->c, c, (uint64_t)0 - C_ARRIVE, NULL);
        } else { /* WRITE, or T_R readers came since the last reset: back off and register */
            re = c_epoch(w);
            rc = fab_faa(t->c, c, c_waiter(re) - C_ARRIVE, NULL);
            reg = true;
        }
        if (rc) return rc;
        for (unsigned round = 0;; round++) { /* wait for a turn */
            if ((rc = peek(r, c, &w))) return rc;
            if (w & C_MODE) {
                lock_backoff(round < 12 ? round : 12);
                continue;
            }
            if (c_epoch(w) != re || c_arrive(w) < (uint64_t)tr) break;
            bool empty; /* T_R reached and no writer on its way: nobody else may reset */
            if ((rc = dq1_empty(r, &empty))) return rc;
            if (empty && (rc = reader_reset(r, c, re, (uint64_t)tr))) return rc;
            lock_backoff(round < 12 ? round : 12);
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * The queues' tails. Verbs have no swap, and a CAS loop is not starvation-free: a writer's loop
 * can learn a tail that changes before every one of its CASes, for ever (the model finds it).
 * So a tail word carries a ticket line for enqueuers whose CASes missed:
 *   bits 48..63 tickets taken, 32..47 tickets served (both mod 2^16), 0..31 the tail (0 empty)
 * An enqueue first tries a CAS from the all-zero word, then one from the word it learned if that
 * showed no ticket out (tickets = served; only then, so neither try can change the tail under a
 * served ticket). Failing both, it takes a ticket (FAA on the top field, whose carry falls off
 * the word), waits until its ticket is served, and CASes
 * the tail it learned to itself with served + 1 (both fields back to 0 when it was the last
 * ticket out). Only the served enqueuer changes the tail, and a release empties a tail only
 * with no ticket out (its CAS expects {self, 0, 0}), so its CAS fails only when a ticket is
 * taken meanwhile: at most once per other client. */
#define TQ_TAIL 0xFFFFFFFFull
#define TQ_TK1 (1ull << 48)
#define TQ_TRIES 4
static inline uint64_t tq_tail(uint64_t w) { return w & TQ_TAIL; }
static inline uint64_t tq_served(uint64_t w) { return (w >> 32) & 0xFFFF; }
static inline uint64_t tq_tickets(uint64_t w) { return w >> 48; }

/* Puts self (nonzero, < 2^32) at the tail of the queue whose tail word is at `word`; *pred is
 * the tail before (0: the queue was empty). */
static int tq_enqueue(struct lock_thread *t, rptr word, uint64_t self, uint64_t *pred)
{
    uint64_t w = 0, old;
    int rc;
    /* TQ_TRIES tries without a ticket: from empty, then from what the last one learned while no
     * ticket is out (only then: so they never get in the way of a served ticket) */
    for (int try = 0; try < TQ_TRIES; try++) {
        if ((rc = fab_cas(t->c, word, w, self, &old))) return rc;
        if (old == w) {
            *pred = tq_tail(w);
            return 0;
        }
        w = old;
        if (tq_tickets(w) != tq_served(w)) break;
    }
    if ((rc = fab_faa(t->c, word, TQ_TK1, &old))) return rc;
    uint64_t my = tq_tickets(old);
    w = old + TQ_TK1;
    for (unsigned round = 0; tq_served(w) != my; round++) { /* one CAS per ticket ahead */
        lock_backoff(round < 9 ? round : 9);
        if ((rc = fab_faa(t->c, word, 0, &w))) return rc;
    }
    for (;;) {
        uint64_t sv = (tq_served(w) + 1) & 0xFFFF;
        uint64_t nw = sv == tq_tickets(w) ? self : (w & ~0xFFFFFFFFFFFFull) | sv << 32 | self;
        if ((rc = fab_cas(t->c, word, w, nw, &old))) return rc;
        if (old == w) {
            *pred = tq_tail(w);
            return 0;
        }
        w = old; /* another ticket was taken */
    }
}

/* DQ2's members are this node's descriptors, named by their line in the arena; DQ1's are the
 * nodes' sites, named by node. */
static uint64_t desc_name(rptr d) { return rptr_off(d) / LOCK_LINE + 1; }
static rptr desc_of(const struct lock_thread *t, uint64_t name)
{
    return rptr_make(t->node, (name - 1) * LOCK_LINE);
}

/* ---------------------------------------------------------------------------------------------
 * The queues */

/* DQ1, with this node's level-1 queue node (the site's NEXT1/STATUS1): the caller holds DQ2. */
static int acquire_1(struct rma *r, bool rw)
{
    struct lock_thread *t = r->t;
    uint64_t *next1 = &r->lsite[SITE_NEXT1 / 8], *status1 = &r->lsite[SITE_STATUS1 / 8];
    st64(next1, 0);
    st64(status1, (uint64_t)ST_WAIT);
    full_fence();
    uint64_t pred;
    int rc = tq_enqueue(t, r->tail1, (uint64_t)t->node + 1, &pred);
    if (rc) return rc;
    if (pred) {
        uint64_t me = r->site;
        if ((rc = fab_write(t->c, rptr_add(site_of(r, (uint16_t)(pred - 1)), SITE_NEXT1), &me, 8)))
            return rc;
        lock_wait_change(status1, (uint64_t)ST_WAIT, NULL, 0);
        if (ld_s64(status1) >= ST_START) return 0; /* passed among writers: WRITE mode */
    }
    if (rw) { /* the lock is the readers': take it back */
        if ((rc = each_counter(r, admit_one)) || (rc = each_counter(r, set_write_one)) ||
            (rc = each_counter(r, drain_one)))
            return rc;
    }
    st64(status1, ST_START);
    return 0;
}

static int release_1(struct rma *r, bool rw)
{
    struct lock_thread *t = r->t;
    uint64_t *next1 = &r->lsite[SITE_NEXT1 / 8], *status1 = &r->lsite[SITE_STATUS1 / 8];
    int64_t k = ld_s64(status1), next = k + 1;
    bool reset = false;
    int rc;
    if (rw && k >= t->cfg.rma_tl1) { /* T_W writer entries: the readers' turn */
        if ((rc = each_counter(r, reset_one))) return rc;
        next = ST_MODE_CHANGE;
        reset = true;
    }
    uint64_t succ = ld64(next1);
    if (!succ) {
        if (rw && !reset) { /* no writer waits outside the node: the readers get it */
            if ((rc = each_counter(r, reset_one))) return rc;
            next = ST_MODE_CHANGE;
        }
        uint64_t cur, self = (uint64_t)t->node + 1;
        if ((rc = fab_cas(t->c, r->tail1, self, 0, &cur))) return rc;
        if (cur == self) return 0; /* (with a ticket out, the enqueuer will link in) */
        lock_wait_change(next1, 0, NULL, 0);
        succ = ld64(next1);
    }
    return fab_write(t->c, rptr_add(succ, SITE_STATUS1), &next, 8);
}

static int writer_acquire(struct rma *r, struct lock_handle *h, bool rw)
{
    struct lock_thread *t = r->t;
    unsigned idx;
    rptr me;
    struct lock_desc *d;
    int rc = desc_get(t, &idx, &me, &d);
    if (rc) return rc;
    st64((uint64_t *)&d->budget, (uint64_t)ST_WAIT);
    st64(&d->next, 0);
    full_fence();
    uint64_t pred;
    if ((rc = tq_enqueue(t, rptr_add(r->site, SITE_TAIL2), desc_name(me), &pred))) goto fail;
    int64_t count = ST_START;
    if (pred) {
        uint64_t mine = me;
        pred = desc_of(t, pred);
        if ((rc = fab_write(t->c, rptr_add(pred, DESC_NEXT), &mine, 8))) goto fail;
        lock_desc_wake(t, rptr_add(pred, DESC_NEXT)); /* a releaser may wait for the link */
        lock_desc_wait(d, (uint64_t *)&d->budget, (uint64_t)ST_WAIT);
        count = __atomic_load_n(&d->budget, __ATOMIC_ACQUIRE);
    }
    if (count == ST_PARENT || !pred) {
        count = ST_START;
        if ((rc = acquire_1(r, rw))) goto fail;
    }
    h->desc = (uint16_t)idx;
    h->aux = (uint64_t)count;
    return 0;
fail:
    desc_put(t, idx); /* (a fabric error leaves the queue as it is: no abort path) */
    return rc;
}

static int writer_release(struct rma *r, struct lock_handle *h, bool rw)
{
    struct lock_thread *t = r->t;
    struct lock_desc *d = desc_at(t, h->desc);
    rptr me = desc_rptr(t, h->desc);
    int64_t count = (int64_t)h->aux, v;
    uint64_t succ = ld64(&d->next);
    int rc;
    if (succ && count < t->cfg.rma_tl2) { /* the node keeps the lock */
        v = count + 1;
        goto pass;
    }
    /* the parent first: the node's level-1 queue node is free before the next climber uses it */
    if ((rc = release_1(r, rw))) goto out;
    if (!succ) {
        uint64_t cur;
        rc = fab_cas(t->c, rptr_add(r->site, SITE_TAIL2), desc_name(me), 0, &cur);
        if (rc || cur == desc_name(me)) goto out;
        lock_desc_wait(d, &d->next, 0);
        succ = ld64(&d->next);
    }
    v = ST_PARENT;
pass: /* DQ2's members are all of this node: the successor is woken at once */
    if (!(rc = fab_write(t->c, rptr_add(succ, DESC_BUDGET), &v, 8)))
        lock_desc_wake(t, rptr_add(succ, DESC_BUDGET));
out:
    desc_put(t, h->desc);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * The two algorithms */

static int rma_acquire(struct lock_handle *h, enum lock_mode mode, int64_t deadline, bool rw)
{
    (void)deadline; /* no abort path: docs/rma-locks.md */
    if (mode != LOCK_EXCLUSIVE && !(rw && mode == LOCK_SHARED)) return RDKV_ENOTSUP;
    struct rma r;
    int rc = rma_open(h, &r);
    if (rc) return rc;
    rc = mode == LOCK_SHARED ? reader_acquire(&r, h) : writer_acquire(&r, h, rw);
    if (rc) return rc;
    h->mode = (uint8_t)mode;
    return 0;
}

static int rma_release(struct lock_handle *h, bool rw)
{
    if (!h->mode) return RDKV_EINVAL;
    struct rma r;
    int rc = rma_open(h, &r);
    if (rc) return rc;
    if (h->mode == LOCK_SHARED) /* a registered reader leaves WAITERS as it departs */
        rc = fab_faa(h->t->c, (rptr)h->aux,
                     C_DEPART - (h->aux2 & 1 ? c_waiter((unsigned)(h->aux2 >> 1)) : 0), NULL);
    else rc = writer_release(&r, h, rw);
    h->mode = 0;
    return rc;
}

static int mcs_acq(struct lock_handle *h, enum lock_mode m, int64_t dl)
{
    return rma_acquire(h, m, dl, false);
}
static int mcs_rel(struct lock_handle *h) { return rma_release(h, false); }
static int rw_acq(struct lock_handle *h, enum lock_mode m, int64_t dl)
{
    return rma_acquire(h, m, dl, true);
}
static int rw_rel(struct lock_handle *h) { return rma_release(h, true); }

const struct lock_algo lock_rma_mcs = {
    .id = LOCK_ID_RMA_MCS,
    .name = "rma-mcs",
    .modes = 1u << LOCK_EXCLUSIVE,
    .uses_descriptors = true,
    .queue_wait = true,
    .acquire = mcs_acq,
    .release = mcs_rel,
};

const struct lock_algo lock_rma_rw = {
    .id = LOCK_ID_RMA_RW,
    .name = "rma-rw",
    .modes = 1u << LOCK_SHARED | 1u << LOCK_EXCLUSIVE,
    .uses_descriptors = true,
    .queue_wait = true,
    .acquire = rw_acq,
    .release = rw_rel,
};
