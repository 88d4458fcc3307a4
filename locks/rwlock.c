/* rwlock, rdkv's row lock: shared and exclusive modes, DSLR-style FCFS tickets, ALock's locality
 * (threads on the lock's node use only CPU atomics, others only one-sided operations), fairness
 * between the two cohorts bounded by budgets, and leases so a dead remote holder cannot wedge the
 * row. Every read-modify-written word belongs to one class of writer: RT and RC only see NIC
 * atomics, LT and LC only CPU atomics; TURN is only ever stored.
 *
 *   RT   @0   remote cohort's tickets {nX, nS, mX, mS}          (NIC FAA/CAS)
 *   RC   @8   remote cohort's cross word {act, eX, eS}           (NIC FAA/CAS)
 *   LT   @16  local cohort's tickets                             (CPU atomics)
 *   LC   @24  local cohort's cross word                          (CPU atomics)
 *   TURN @32  the cohort with priority: 0 local, 1 remote        (stores)
 *   LSLEEP @40 local waiters asleep on LT (a futex count)        (CPU atomics)
 *
 * A request takes a ticket in its cohort's word and waits for its turn there (DSLR's rules: S
 * after the earlier X, X after everyone earlier). Then it "raises" its mode in its cohort's
 * cross word and looks at the other cohort's: a conflicting member there (X against anyone, S
 * against X) means it waits -- keeping its mark raised if its cohort has priority, else lowering
 * it until its cohort gets priority or the other side empties. This is Dekker's algorithm between
 * two *groups*: counters are the flags (so any number of members of a cohort can hold at once,
 * and none of them ever writes a victim variable -- the trap of Peterson's handshake with several
 * writers per side), and TURN only breaks ties. A member whose ticket index ends a budget (5
 * local, 20 remote) hands priority to the other cohort when it leaves. The argument is in
 * docs/locks.md; tests/models/rwlock.pml checks it with spin. */
#include "ticket.h"

#include "common/clock.h"

#define RW_RT 0
#define RW_RC 8
#define RW_LT 16
#define RW_LC 24
#define RW_TURN 32
#define RW_LSLEEP 40 /* local waiters asleep on LT's "now serving" half (CPU atomics only) */
#define TURN_LOCAL 0
#define TURN_REMOTE 1

/* cross word: act (16 bits, bumped by every operation: an activity counter for lease checks),
 * eX and eS (24 bits each) */
#define CW_ACT_ONE (1ull << 48)
#define CW_X_SH 24
#define CW_MASK24 ((1ull << 24) - 1)
static inline uint64_t cw_x(uint64_t v) { return (v >> CW_X_SH) & CW_MASK24; }
static inline uint64_t cw_s(uint64_t v) { return v & CW_MASK24; }
static inline uint64_t cw_raise(enum lock_mode m)
{
    return CW_ACT_ONE + (m == LOCK_EXCLUSIVE ? 1ull << CW_X_SH : 1ull);
}

static bool conflict(enum lock_mode m, uint64_t other)
{
    return m == LOCK_EXCLUSIVE ? (cw_x(other) + cw_s(other)) != 0 : cw_x(other) != 0;
}

struct side {
    bool remote;
    rptr line;
    rptr T, C;             /* our cohort's words */
    const struct tk_ops *ops;
    uint64_t *lp;          /* local: the line */
    uint64_t prio;         /* TURN value that gives us priority */
};

static void side_of(struct lock_handle *h, struct side *s)
{
    s->line = h->line;
    s->lp = fab_local(h->t->f, h->line);
    s->remote = s->lp == NULL;
    s->T = rptr_add(h->line, s->remote ? RW_RT : RW_LT);
    s->C = rptr_add(h->line, s->remote ? RW_RC : RW_LC);
    s->ops = s->remote ? &tk_nic : &tk_cpu;
    s->prio = s->remote ? TURN_REMOTE : TURN_LOCAL;
}

/* The other cohort's cross word and TURN, read after our own raise (store->load order: a CPU
 * atomic is a full fence; a NIC READ chained after the NIC FAA executes after it). */
static int look(struct lock_thread *t, struct side *s, uint64_t *other, uint64_t *turn)
{
    if (!s->remote) {
        *other = __atomic_load_n(&s->lp[RW_RC / 8], __ATOMIC_SEQ_CST);
        *turn = __atomic_load_n(&s->lp[RW_TURN / 8], __ATOMIC_SEQ_CST);
        return 0;
    }
    uint64_t snap[5];
    int rc = fab_read(t->c, s->line, snap, sizeof snap);
    *other = snap[RW_LC / 8];
    *turn = snap[RW_TURN / 8];
    return rc;
}

static int cross_add(struct lock_thread *t, struct side *s, uint64_t add)
{
    return s->ops->faa(t, s->C, add, NULL);
}

static void tk_req_of(struct lock_handle *h, struct side *s, enum tk_class cls, struct tk_req *r)
{
    r->lay = &tk_dslr4;
    r->ops = s->ops;
    r->word = s->T;
    r->cls = (uint8_t)cls;
    r->waits = (uint8_t)tk_waits_for(&tk_dslr4, cls);
    r->k = 1;
    /* Lease recovery is for the remote cohort's words: a local holder lives in the lock's own
     * process and always releases. */
    r->allow_reset = s->remote;
    r->prev = h->aux;
    r->reset_from = h->aux2;
    /* local waiters sleep on LT until a local releaser wakes them */
    r->sleepers = s->remote ? NULL : (uint32_t *)(void *)&s->lp[RW_LSLEEP / 8];
}

/* Lease recovery of the remote cohort's cross word by a local waiter: if it has not moved for
 * two leases, every remote member counted there is dead or past its lease. This is the one place
 * a local thread uses the NIC (a loopback CAS): the word is a NIC word, and only a NIC atomic may
 * change it. */
static void recover_rc(struct lock_thread *t, struct side *s, uint64_t seen)
{
    uint64_t got;
    uint64_t fresh = (seen & ~(CW_MASK24 | CW_MASK24 << CW_X_SH)) + CW_ACT_ONE;
    if (fab_cas(t->c, rptr_add(s->line, RW_RC), seen, fresh, &got) == 0 && got == seen)
        t->stats.resets++;
}

/* A4: the cross-cohort handshake; we are raised in mode m. Returns 0 (enter), RDKV_ETIMEDOUT
 * (lowered again), or a fabric error (state as it was). */
static int cross(struct lock_thread *t, struct side *s, enum lock_mode m, uint64_t other,
                 uint64_t turn, int64_t deadline)
{
    int64_t lease = t->cfg.lease_ns, since = clock_now_ns(), refreshed = since;
    uint64_t watched = other;
    bool raised = true;
    for (unsigned round = 0;; round++) {
        int64_t now = clock_now_ns();
        if (raised && !conflict(m, other)) return 0;
        if (other != watched) {
            watched = other;
            since = now;
        } else if (!s->remote && now - since > 2 * lease && (cw_x(other) || cw_s(other))) {
            recover_rc(t, s, other);
            since = now;
        }
        if (!raised) {
            /* backed off: come back when we have priority or the other side is empty */
            if (turn == s->prio || (cw_x(other) + cw_s(other)) == 0) {
                int rc = cross_add(t, s, cw_raise(m));
                if (rc) return rc;
                raised = true;
                int r2 = look(t, s, &other, &turn);
                if (r2) return r2;
                continue;
            }
        } else if (turn != s->prio) {
            /* the other side has priority: lower our mark and wait */
            int rc = cross_add(t, s, CW_ACT_ONE - (cw_raise(m) - CW_ACT_ONE));
            if (rc) return rc;
            raised = false;
        } else if (s->remote && now - refreshed > lease / 2) {
            /* waiting with our mark raised: show we are alive (local waiters reset a cross word
             * that does not move for two leases) */
            int rc = cross_add(t, s, CW_ACT_ONE);
            if (rc) return rc;
            refreshed = now;
        }
        if (deadline && now >= deadline) {
            if (raised) {
                int rc = cross_add(t, s, CW_ACT_ONE - (cw_raise(m) - CW_ACT_ONE));
                if (rc) return rc;
            }
            return RDKV_ETIMEDOUT;
        }
        if (!s->remote) lock_backoff(round < 12 ? round : 12);
        else if (round > 2) lock_backoff(round < 10 ? round : 10);
        int rc = look(t, s, &other, &turn);
        if (rc) return rc;
    }
}

static int rw_acquire(struct lock_handle *h, enum lock_mode mode, int64_t deadline)
{
    struct lock_thread *t = h->t;
    if (mode != LOCK_SHARED && mode != LOCK_EXCLUSIVE) return RDKV_ENOTSUP;
    lock_thread_poll(t);
    struct side s;
    side_of(h, &s);
    enum tk_class cls = mode == LOCK_EXCLUSIVE ? TK_X : TK_S;
    struct tk_req r;
    h->aux = h->aux2 = 0;
    tk_req_of(h, &s, cls, &r);
    uint64_t add_t = 1ull << tk_dslr4.m_sh[cls], raise = cw_raise(mode);
    uint64_t other = 0, turn = 0;
    bool raised = false;
    int rc = 0;
    if (s.remote) {
        /* The fast path: ticket, optimistic raise and a look at the line, as one chain. */
        uint64_t snap[5];
        struct fab_op ops[3] = {fab_op_faa(s.T, add_t), fab_op_faa(s.C, raise),
                                fab_op_read(s.line, snap, sizeof snap)};
        if ((rc = fab_exec(t->c, ops, 3))) return rc;
        uint64_t prev = ops[0].result;
        if (tk_pending_reset(&tk_dslr4, prev)) {
            struct fab_op undo[2] = {fab_op_faa(s.T, (uint64_t)0 - add_t),
                                     fab_op_faa(s.C, CW_ACT_ONE - (raise - CW_ACT_ONE))};
            if ((rc = fab_exec(t->c, undo, 2))) return rc;
            rc = tk_take(t, &r, deadline); /* the slow way, with its back-off */
        } else {
            tk_took(t, &r, prev);
            if (tk_granted(&r, prev)) {
                raised = true;
                other = snap[RW_LC / 8];
                turn = snap[RW_TURN / 8];
            } else {
                rc = cross_add(t, &s, CW_ACT_ONE - (raise - CW_ACT_ONE)); /* not our turn */
            }
        }
    } else {
        rc = tk_take(t, &r, deadline);
    }
    if (!rc && !raised) {
        if (!tk_granted(&r, r.prev)) rc = tk_wait(t, &r, 0, deadline);
        if (rc == RDKV_ETIMEDOUT) tk_abandon(t, &r);
        if (!rc) {
            rc = cross_add(t, &s, raise);
            if (!rc) rc = look(t, &s, &other, &turn);
            raised = !rc;
        }
    }
    if (!rc) {
        rc = cross(t, &s, mode, other, turn, deadline);
        if (rc == RDKV_ETIMEDOUT) tk_release(t, &r); /* granted in our cohort: pass it on */
    }
    if (rc == RDKV_ETIMEDOUT) t->stats.timeouts++;
    if (rc == RDKV_EABORTED) t->stats.aborts++;
    if (rc) return rc;
    h->mode = (uint8_t)mode;
    h->desc = (uint8_t)cls;
    h->aux = r.prev;
    h->aux2 = r.reset_from;
    h->granted_at = clock_now_ns();
    h->lease_ns = s.remote ? t->cfg.lease_ns : 0;
    return 0;
}

static int rw_release(struct lock_handle *h)
{
    if (!h->mode) return RDKV_EINVAL;
    struct lock_thread *t = h->t;
    enum lock_mode mode = (enum lock_mode)h->mode;
    h->mode = 0;
    struct side s;
    side_of(h, &s);
    struct tk_req r;
    tk_req_of(h, &s, (enum tk_class)h->desc, &r);
    /* The ticket index ending a budget hands priority to the other cohort. */
    int64_t budget = s.remote ? t->cfg.rwlock_remote_budget : t->cfg.rwlock_local_budget;
    uint64_t index = tk_get(&tk_dslr4, r.prev, tk_dslr4.m_sh[TK_X]) +
                     tk_get(&tk_dslr4, r.prev, tk_dslr4.m_sh[TK_S]);
    bool yield = budget <= 1 || index % (uint64_t)budget == (uint64_t)budget - 1;
    uint64_t other_prio = s.remote ? TURN_LOCAL : TURN_REMOTE;
    uint64_t lower = CW_ACT_ONE - (cw_raise(mode) - CW_ACT_ONE);
    uint64_t served = 1ull << tk_dslr4.n_sh[h->desc];
    if (s.remote) {
        if (clock_now_ns() - h->granted_at >= h->lease_ns && !r.reset_from) {
            /* past the lease: waiters may have reset our marks already; leave them to it */
            t->stats.lease_expired++;
            return RDKV_ETIMEDOUT;
        }
        struct fab_op ops[3];
        unsigned n = 0;
        if (yield) ops[n++] = fab_op_write(rptr_add(s.line, RW_TURN), &other_prio, 8);
        ops[n++] = fab_op_faa(s.C, lower);
        ops[n++] = fab_op_faa(s.T, served);
        int rc = fab_exec(t->c, ops, n);
        if (rc) return rc;
    } else {
        if (yield) __atomic_store_n(&s.lp[RW_TURN / 8], other_prio, __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&s.lp[RW_LC / 8], lower, __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&s.lp[RW_LT / 8], served, __ATOMIC_SEQ_CST);
        tk_wake(t, &r);
    }
    return tk_overflow_reset(t, &r);
}

const struct lock_algo lock_rwlock = {
    .name = "rwlock",
    .recovers = true,
    .modes = 1u << LOCK_SHARED | 1u << LOCK_EXCLUSIVE,
    .acquire = rw_acquire,
    .release = rw_release,
};
