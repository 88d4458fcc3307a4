/* ALock (Baran et al., SPAA'24): Peterson's algorithm between a local and a remote cohort, each
 * cohort an MCS queue, with budgets for fairness. Threads on the lock's node use only CPU atomics
 * and loads/stores; threads elsewhere use only one-sided fabric operations; nobody uses loopback.
 *
 * The rule that makes it safe under RDMA's weak atomicity: every word that sees a read-modify-
 * write is RMW'd by one class only -- tail_l by local CPUs, tail_r by NICs -- and the other class
 * only reads it. victim is only ever written (8-byte stores and WRITEs are atomic with each
 * other) and read. The fixes to the printed pseudocode (seeds-digest 1.1.6) are applied:
 * the Peterson wait is "other cohort locked AND victim is us", the enqueue is a CAS loop (verbs
 * have no swap) made starvation-free by a pending count (below), node ids are 16 bits, and there
 * is a store->load fence between writing victim and reading the other tail (seq_cst locally;
 * remotely the WRITE and the READ travel in one chain, executed in order). docs/locks.md has the
 * argument; tests/models/alock.pml checks it. */
#include "lock_internal.h"

#include "common/clock.h"
#include "common/fence.h"

#define AL_TAIL_R 0
#define AL_TAIL_L 16
#define AL_VICTIM 32
#define VICTIM_LOCAL 1
#define VICTIM_REMOTE 2

/* tail_r packs the remote cohort's tail with a count of remote threads that are enqueueing:
 *   bits  0..41  the tail descriptor: node:16 | (arena offset / 64):26, 0 = empty
 *   bits 42..63  pending enqueuers
 * Verbs have no swap, so the enqueue is a CAS loop, and a CAS loop alone can starve: another
 * remote thread may change the tail between every two of our tries forever (spin found exactly
 * that). A thread whose first CAS fails registers in the count (FAA); while the count is
 * nonzero a holder may not release by emptying the tail, so the tail changes only when another
 * enqueuer succeeds, which each thread can do at most once per acquisition: our retries are
 * bounded. See docs/locks.md. */
#define TR_TAIL_BITS 42
#define TR_TAIL_MASK ((1ull << TR_TAIL_BITS) - 1)
#define TR_PENDING_ONE (1ull << TR_TAIL_BITS)
#define TR_OFF_BITS 26

static inline uint64_t tr_encode(rptr d)
{
    return ((uint64_t)rptr_node(d) << TR_OFF_BITS) | (rptr_off(d) >> 6);
}
static inline rptr tr_decode(uint64_t w)
{
    uint64_t t = w & TR_TAIL_MASK;
    return rptr_make((uint16_t)(t >> TR_OFF_BITS), (t & ((1ull << TR_OFF_BITS) - 1)) << 6);
}

struct alock_line {
    uint64_t tail_r;  /* @0: the remote cohort's tail and pending count (NIC atomics only) */
    uint64_t pad0;
    uint64_t tail_l;  /* @16: rptr of the local cohort's last descriptor (CPU atomics only) */
    uint64_t pad1;
    uint64_t victim;  /* @32: the cohort that yields: 0, VICTIM_LOCAL or VICTIM_REMOTE */
    uint64_t pad2[3];
};
_Static_assert(sizeof(struct alock_line) == LOCK_LINE, "an ALock is one line");

#define AUX_LOCAL 1

/* ---------------------------------------------------------------------------------------------
 * Local cohort: CPU atomics on this node's memory. */

/* Returns 0 once the local cohort may enter, or RDKV_ETIMEDOUT at the deadline (0: none). */
static int peterson_local(struct alock_line *L, int64_t deadline)
{
    /* seq_cst store (xchg on x86): the store->load fence Peterson needs before reading tail_r */
    __atomic_store_n(&L->victim, VICTIM_LOCAL, __ATOMIC_SEQ_CST);
    for (unsigned r = 0;; r++) {
        if ((__atomic_load_n(&L->tail_r, __ATOMIC_SEQ_CST) & TR_TAIL_MASK) == 0) return 0;
        if (__atomic_load_n(&L->victim, __ATOMIC_SEQ_CST) != VICTIM_LOCAL) return 0;
        if (deadline && clock_now_ns() >= deadline) return RDKV_ETIMEDOUT;
        lock_backoff(r); /* tail_r and victim are written by NICs: nobody can wake us */
    }
}

static int local_acquire(struct lock_thread *t, struct alock_line *L, rptr me, struct lock_desc *d)
{
    __atomic_store_n(&d->budget, -1, __ATOMIC_RELAXED);
    __atomic_store_n(&d->next, 0, __ATOMIC_RELAXED);
    uint64_t prev = __atomic_exchange_n(&L->tail_l, me, __ATOMIC_SEQ_CST);
    if (prev == 0) {
        d->budget = t->cfg.alock_local_budget;
        peterson_local(L, 0);
        return 0;
    }
    struct lock_desc *pd = fab_local(t->f, prev);
    __atomic_store_n(&pd->next, me, __ATOMIC_SEQ_CST);
    lock_wake(&pd->next, &pd->sleeping);
    lock_wait_change((uint64_t *)&d->budget, (uint64_t)-1, &d->sleeping, 0);
    if (__atomic_load_n(&d->budget, __ATOMIC_ACQUIRE) == 0) {
        peterson_local(L, 0);
        d->budget = t->cfg.alock_local_budget;
    }
    return 0;
}

static void local_release(struct lock_thread *t, struct alock_line *L, rptr me, struct lock_desc *d)
{
    uint64_t next = ld64(&d->next);
    if (!next) {
        uint64_t expect = me;
        if (__atomic_compare_exchange_n(&L->tail_l, &expect, 0, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST))
            return; /* queue empty: this also clears the local Peterson flag */
        lock_wait_change(&d->next, 0, &d->sleeping, 0); /* a successor is linking in */
        next = ld64(&d->next);
    }
    struct lock_desc *nd = fab_local(t->f, next);
    __atomic_store_n(&nd->budget, d->budget - 1, __ATOMIC_SEQ_CST);
    lock_wake((uint64_t *)&nd->budget, &nd->sleeping);
}

/* ---------------------------------------------------------------------------------------------
 * Remote cohort: one-sided operations only. */

static int peterson_remote(struct fab_ctx *c, rptr line, int64_t deadline)
{
    uint64_t victim = VICTIM_REMOTE, snap[LOCK_LINE / 8];
    /* The WRITE and the READ go as one chain: executed in order at the lock's node, so the READ
     * of tail_l happens after victim is written (the store->load order Peterson needs). */
    struct fab_op ops[2] = {fab_op_write(rptr_add(line, AL_VICTIM), &victim, 8),
                            fab_op_read(line, snap, LOCK_LINE)};
    int rc = fab_exec(c, ops, 2);
    while (rc == 0) {
        if (snap[AL_TAIL_L / 8] == 0 || snap[AL_VICTIM / 8] != VICTIM_REMOTE) return 0;
        if (deadline && clock_now_ns() >= deadline) return RDKV_ETIMEDOUT;
        rc = fab_read(c, line, snap, LOCK_LINE); /* remote spinning, one round trip each */
    }
    return rc;
}

static int remote_acquire(struct lock_thread *t, rptr line, rptr me, struct lock_desc *d)
{
    __atomic_store_n(&d->budget, -1, __ATOMIC_RELAXED);
    __atomic_store_n(&d->next, 0, __ATOMIC_RELAXED);
    full_fence();
    /* swap(tail_r, me): first optimistically from empty; if that fails, register as pending
     * and CAS with the value learned, dropping our pending mark in the same CAS. */
    rptr tr = rptr_add(line, AL_TAIL_R);
    uint64_t mine = tr_encode(me), cur = 0;
    int rc = fab_cas(t->c, tr, 0, mine, &cur);
    if (rc) return rc;
    if (cur != 0) {
        rc = fab_faa(t->c, tr, TR_PENDING_ONE, &cur);
        if (rc) return rc;
        cur += TR_PENDING_ONE; /* the word now, as far as we know */
        for (;;) {
            uint64_t want = (cur & ~TR_TAIL_MASK) - TR_PENDING_ONE + mine, got;
            rc = fab_cas(t->c, tr, cur, want, &got);
            if (rc) return rc;
            if (got == cur) break;
            cur = got;
        }
    }
    if ((cur & TR_TAIL_MASK) == 0) {
        d->budget = t->cfg.alock_remote_budget;
        return peterson_remote(t->c, line, 0);
    }
    uint64_t me_val = me;
    rc = fab_write(t->c, rptr_add(tr_decode(cur), DESC_NEXT), &me_val, 8);
    if (rc) return rc;
    lock_wait_change((uint64_t *)&d->budget, (uint64_t)-1, &d->sleeping, 0);
    if (__atomic_load_n(&d->budget, __ATOMIC_ACQUIRE) == 0) {
        rc = peterson_remote(t->c, line, 0);
        d->budget = t->cfg.alock_remote_budget;
    }
    return rc;
}

static int remote_release(struct lock_thread *t, rptr line, rptr me, struct lock_desc *d)
{
    uint64_t next = ld64(&d->next);
    if (!next) {
        /* Succeeds only if we are the tail and nobody is enqueueing. */
        uint64_t cur, mine = tr_encode(me);
        int rc = fab_cas(t->c, rptr_add(line, AL_TAIL_R), mine, 0, &cur);
        if (rc) return rc;
        if (cur == mine) return 0; /* queue empty: this also clears the remote Peterson flag */
        lock_wait_change(&d->next, 0, &d->sleeping, 0);
        next = ld64(&d->next);
    }
    int64_t budget = d->budget - 1;
    return fab_write(t->c, rptr_add(next, DESC_BUDGET), &budget, 8);
}

/* ---------------------------------------------------------------------------------------------
 * With a deadline: ALock for callers that must be able to give up (transactions). A waiter in
 * an MCS queue cannot leave it, so this never queues behind anyone: it joins its cohort only when
 * the cohort's queue is empty (CAS of the tail from 0), and otherwise backs off and tries again
 * until the deadline. As the cohort's head it runs Peterson's wait against the other cohort,
 * bounded by the deadline; giving up there is a release that never entered: the queue position
 * goes to a successor (a blocking acquirer may have queued behind) with budget 0, so that the
 * successor runs Peterson itself -- the same path as a budget that ran out. Mutual exclusion is
 * the protocol's own; what is lost is FIFO order inside a cohort (docs/locks.md). */

static int try_local(struct lock_thread *t, struct alock_line *L, rptr me, struct lock_desc *d,
                     int64_t deadline)
{
    __atomic_store_n(&d->budget, -1, __ATOMIC_RELAXED);
    __atomic_store_n(&d->next, 0, __ATOMIC_RELAXED);
    uint64_t zero = 0;
    if (!__atomic_compare_exchange_n(&L->tail_l, &zero, me, false, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST))
        return RDKV_EBUSY;
    d->budget = t->cfg.alock_local_budget;
    if (peterson_local(L, deadline) == 0) return 0;
    d->budget = 1; /* the successor, if any, gets 0: it must run Peterson itself */
    local_release(t, L, me, d);
    return RDKV_ETIMEDOUT;
}

static int try_remote(struct lock_thread *t, rptr line, rptr me, struct lock_desc *d,
                      int64_t deadline)
{
    __atomic_store_n(&d->budget, -1, __ATOMIC_RELAXED);
    __atomic_store_n(&d->next, 0, __ATOMIC_RELAXED);
    full_fence();
    uint64_t cur = 0;
    int rc = fab_cas(t->c, rptr_add(line, AL_TAIL_R), 0, tr_encode(me), &cur);
    if (rc) return rc;
    if (cur != 0) return RDKV_EBUSY; /* someone holds or queues (or is enqueueing) */
    d->budget = t->cfg.alock_remote_budget;
    rc = peterson_remote(t->c, line, deadline);
    if (rc != RDKV_ETIMEDOUT) return rc;
    d->budget = 1;
    int r2 = remote_release(t, line, me, d);
    return r2 ? r2 : RDKV_ETIMEDOUT;
}

static int try_acquire(struct lock_thread *t, struct alock_line *L, rptr line, rptr me,
                       struct lock_desc *d, int64_t deadline)
{
    int64_t b = t->cfg.spin_backoff_min_ns;
    uint64_t seed = (uint64_t)me ^ (uint64_t)clock_now_ns();
    for (;;) {
        int rc = L ? try_local(t, L, me, d, deadline) : try_remote(t, line, me, d, deadline);
        if (rc != RDKV_EBUSY) return rc;
        if (clock_now_ns() >= deadline) return RDKV_ETIMEDOUT;
        lock_retry_backoff(t, &b, &seed);
    }
}

static int alock_acquire(struct lock_handle *h, enum lock_mode mode, int64_t deadline)
{
    /* deadline 0: the queue lock as published (FIFO, no abort path); otherwise try_acquire */
    if (mode != LOCK_EXCLUSIVE) return RDKV_ENOTSUP;
    struct lock_thread *t = h->t;
    unsigned idx;
    rptr me;
    struct lock_desc *d;
    int rc = desc_get(t, &idx, &me, &d);
    if (rc) return rc;
    /* tail_r holds descriptors in 26 bits of (offset / 64): they must lie below 4 GiB */
    if (rptr_off(me) + LOCK_LINE > (1ull << (TR_OFF_BITS + 6))) {
        desc_put(t, idx);
        return RDKV_ENOSPC;
    }
    struct alock_line *L = fab_local(t->f, h->line);
    if (deadline) rc = try_acquire(t, L, h->line, me, d, deadline);
    else if (L) rc = local_acquire(t, L, me, d);
    else rc = remote_acquire(t, h->line, me, d);
    if (rc) {
        desc_put(t, idx);
        return rc;
    }
    h->desc = (uint16_t)idx;
    h->aux = L ? AUX_LOCAL : 0;
    h->mode = LOCK_EXCLUSIVE;
    return 0;
}

static int alock_release(struct lock_handle *h)
{
    if (h->mode != LOCK_EXCLUSIVE) return RDKV_EINVAL;
    struct lock_thread *t = h->t;
    struct lock_desc *d = desc_at(t, h->desc);
    rptr me = desc_rptr(t, h->desc);
    int rc = 0;
    if (h->aux & AUX_LOCAL) local_release(t, fab_local(t->f, h->line), me, d);
    else rc = remote_release(t, h->line, me, d);
    desc_put(t, h->desc);
    h->mode = 0;
    return rc;
}

/* The holder's cohort's queue is not empty (a holder stays queued until it releases); the words
 * do not say who holds. ALock has no leases: a hold is never taken away. */
static int alock_holds_x(struct fabric *f, rptr line, uint16_t holder, uint64_t token)
{
    (void)token;
    const struct alock_line *L = fab_local(f, line);
    if (holder == fab_node_id(f)) return __atomic_load_n(&L->tail_l, __ATOMIC_SEQ_CST) != 0;
    return (__atomic_load_n(&L->tail_r, __ATOMIC_SEQ_CST) & TR_TAIL_MASK) != 0;
}

const struct lock_algo lock_alock = {
    .id = LOCK_ID_ALOCK,
    .name = "alock",
    .modes = 1u << LOCK_EXCLUSIVE,
    .uses_descriptors = true,
    .holds_x = alock_holds_x,
    .acquire = alock_acquire,
    .release = alock_release,
};
