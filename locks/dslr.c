/* DSLR (Yoon, Chowdhury, Mozafari, SIGMOD'18): one 64-bit word {n_X, n_S, max_X, max_S} per lock,
 * an acquire is one fetch-and-add that takes a ticket, conflicts are waited out by READ polling
 * in proportion to the tickets ahead, leases (judged by local clocks only) let waiters reset a
 * lock whose holder died, counters are reset before they overflow, long transactions can take
 * several tickets (multi-slot leasing), and the six-counter variant `dslr-u` adds update locks.
 * Like the paper, DSLR uses the fabric for every access, local locks included. The ticket logic
 * lives in ticket.c; this file is the lock interface around it. */
#include "ticket.h"

#include "common/clock.h"

#include <stdlib.h>

/* The poll unit: the transport's measured round trip (median of a few loopback READs), unless
 * configured; after that it follows the round trips the thread sees (ticket.c). */
static void calibrate(struct lock_thread *t)
{
    if (t->omega_ns) return;
    if (t->cfg.dslr_omega_ns > 0) {
        t->omega_ns = t->cfg.dslr_omega_ns;
        return;
    }
    int64_t rt[5];
    uint64_t v;
    for (int i = 0; i < 5; i++) {
        int64_t t0 = clock_now_ns();
        if (fab_read(t->c, t->descs, &v, 8)) {
            t->omega_ns = 5 * NS_PER_US;
            return;
        }
        rt[i] = clock_now_ns() - t0;
    }
    for (int i = 0; i < 5; i++)
        for (int k = i + 1; k < 5; k++)
            if (rt[k] < rt[i]) {
                int64_t x = rt[i];
                rt[i] = rt[k];
                rt[k] = x;
            }
    t->omega_ns = rt[2] > 0 ? rt[2] : 1;
}

static void req_of(struct lock_handle *h, const struct tk_layout *l, enum tk_class cls,
                   struct tk_req *r)
{
    r->lay = l;
    r->ops = &tk_nic;
    r->word = h->line;
    r->cls = (uint8_t)cls;
    r->waits = (uint8_t)tk_waits_for(l, cls);
    r->k = h->slots ? h->slots : 1;
    r->max_k = (uint16_t)h->t->cfg.dslr_max_slots;
    r->allow_reset = true;
    r->prev = h->aux;
    r->since = h->granted_at;
    r->reset_from = h->aux2;
    r->sleepers = NULL;
    r->alive_mask = 0;
    r->on_reset = NULL;
}

static int dslr_acquire_l(struct lock_handle *h, enum lock_mode mode, int64_t deadline,
                          const struct tk_layout *l)
{
    struct lock_thread *t = h->t;
    enum tk_class cls;
    switch (mode) {
    case LOCK_SHARED: cls = TK_S; break;
    case LOCK_EXCLUSIVE: cls = TK_X; break;
    case LOCK_UPDATE:
        if (l->nclass < 3) return RDKV_ENOTSUP;
        cls = TK_U;
        break;
    default: return RDKV_EINVAL;
    }
    if (h->slots == 0 || h->slots > t->cfg.dslr_max_slots) return RDKV_EINVAL;
    lock_thread_poll(t);
    calibrate(t);
    struct tk_req r;
    req_of(h, l, cls, &r);
    int rc;
    if (tk_reclaim(t, &r)) {
        /* a ticket this thread gave up here earlier still waits for its turn: wait on it again
         * rather than queue another behind it (docs/locks.md, "Deadlines") */
        rc = tk_wait(t, &r, deadline);
        if (rc == RDKV_ETIMEDOUT) tk_abandon(t, &r);
    } else if ((rc = tk_take(t, &r, deadline)) == 0) {
        /* The word before our FA often grants us already: then no READ at all. */
        rc = tk_granted(&r, r.prev) ? 0 : tk_wait(t, &r, deadline);
        if (rc == RDKV_ETIMEDOUT) tk_abandon(t, &r);
    }
    if (rc == RDKV_ETIMEDOUT) t->stats.timeouts++;
    if (rc == RDKV_EABORTED) t->stats.aborts++;
    if (rc) return rc;
    /* Enter only on fresh evidence: waiters behind us judge our silence from r.since on (the FA
     * or the last READ that still showed us waiting); a reply that reached us too late to leave
     * a useful lease -- a slow network, a preempted thread -- may be one they already acted on. */
    if (clock_now_ns() - r.since >= tk_entry_bound(t)) return tk_give_up(t, &r);
    h->mode = (uint8_t)mode;
    h->desc = (uint8_t)cls;
    h->aux = r.prev;
    h->aux2 = r.reset_from;
    h->granted_at = r.since; /* the lease runs from before the evidence, never from after it */
    h->lease_ns = t->cfg.lease_ns * r.k;
    return 0;
}

static int dslr_release_l(struct lock_handle *h, const struct tk_layout *l)
{
    if (!h->mode) return RDKV_EINVAL;
    struct lock_thread *t = h->t;
    struct tk_req r;
    req_of(h, l, (enum tk_class)h->desc, &r);
    h->mode = 0;
    /* A holder whose lease ran out must not FA: waiters may have reset the lock since, and the
     * FA would count twice (also for the holder whose ticket crossed COUNT_MAX). It passes its
     * ticket on with a CAS instead, which serves it only if no reset took it, and is told its
     * hold was unprotected. */
    if (clock_now_ns() - h->granted_at >= h->lease_ns) {
        t->stats.lease_expired++;
        tk_pass_on(t, &r);
        return RDKV_ETIMEDOUT;
    }
    return tk_release(t, &r);
}

/* Releases n held dslr locks (lock_dslr handles) at once: the plain releases -- one FAA each --
 * go out as one chain per node, one round trip for all of them, in the order given; the ones
 * that need more (a lease that ran out, a COUNT_MAX reset to finish) are released one by one.
 * Returns 0, RDKV_ETIMEDOUT if some lease had run out (that lock was not released: waiters reset
 * it), or the first fabric error. Every handle is left not held. */
int lock_dslr_release_all(struct lock_handle *hs, unsigned n)
{
    int ret = 0;
    struct fab_op ops[FAB_MAX_CHAIN];
    unsigned nops = 0;
    struct lock_thread *t = n ? hs[0].t : NULL;
    for (unsigned i = 0; i <= n; i++) {
        struct lock_handle *h = i < n ? &hs[i] : NULL;
        struct tk_req r;
        bool batch = false;
        if (h) {
            if (!h->mode || h->algo != &lock_dslr || h->t != t) {
                int rc = h->mode ? lock_release(h) : RDKV_EINVAL;
                if (rc == RDKV_ETIMEDOUT || (rc && !ret)) ret = rc;
                continue;
            }
            req_of(h, &tk_dslr4, (enum tk_class)h->desc, &r);
            batch = !r.reset_from && clock_now_ns() - h->granted_at < h->lease_ns;
        }
        /* a chain goes to one node and holds at most FAB_MAX_CHAIN ops: send what we have */
        if (nops && (!h || (batch && (nops == FAB_MAX_CHAIN ||
                                      rptr_node(ops[0].remote) != rptr_node(h->line))))) {
            int rc = fab_exec(t->c, ops, nops);
            if (rc && !ret) ret = rc;
            nops = 0;
        }
        if (!h) break;
        if (batch) {
            h->mode = 0;
            ops[nops++] = fab_op_faa(r.word, (uint64_t)r.k << tk_dslr4.n_sh[r.cls]);
        } else {
            int rc = dslr_release_l(h, &tk_dslr4);
            if (rc == RDKV_ETIMEDOUT || (rc && !ret)) ret = rc;
        }
    }
    return ret;
}

static int dslr_upgrade_l(struct lock_handle *h, int64_t deadline, const struct tk_layout *l)
{
    if (h->mode != LOCK_UPDATE) return RDKV_EINVAL;
    struct lock_thread *t = h->t;
    struct tk_req r;
    req_of(h, l, TK_U, &r);
    r.waits |= 1u << TK_S; /* the shared holders that came before us must leave */
    int rc = tk_wait(t, &r, deadline);
    if (rc == RDKV_ETIMEDOUT) t->stats.timeouts++; /* still held in update mode */
    if (rc == RDKV_EABORTED) {
        t->stats.aborts++;
        h->mode = 0; /* a reset took our ticket with it: nothing is held, nothing to release */
    }
    if (rc) return rc;
    h->mode = LOCK_EXCLUSIVE;
    return 0;
}

/* Our X ticket is the one the word serves. (Counters that went round to the same values after
 * a reset to 0 would fool it: 32767 tickets -- 511 for dslr-u -- within one hold.) */
static int holds_x_l(struct fabric *f, rptr line, uint64_t token, const struct tk_layout *l)
{
    return tk_x_current(l, __atomic_load_n((uint64_t *)fab_local(f, line), __ATOMIC_SEQ_CST),
                        token);
}
static int dslr_holds_x(struct fabric *f, rptr line, uint16_t holder, uint64_t token)
{
    (void)holder;
    return holds_x_l(f, line, token, &tk_dslr4);
}
static int dslru_holds_x(struct fabric *f, rptr line, uint16_t holder, uint64_t token)
{
    (void)holder;
    return holds_x_l(f, line, token, &tk_dslr6);
}

static int dslr_acquire(struct lock_handle *h, enum lock_mode m, int64_t d) { return dslr_acquire_l(h, m, d, &tk_dslr4); }
static int dslr_release(struct lock_handle *h) { return dslr_release_l(h, &tk_dslr4); }
static int dslru_acquire(struct lock_handle *h, enum lock_mode m, int64_t d) { return dslr_acquire_l(h, m, d, &tk_dslr6); }
static int dslru_release(struct lock_handle *h) { return dslr_release_l(h, &tk_dslr6); }
static int dslru_upgrade(struct lock_handle *h, int64_t d) { return dslr_upgrade_l(h, d, &tk_dslr6); }

const struct lock_algo lock_dslr = {
    .id = LOCK_ID_DSLR,
    .name = "dslr",
    .recovers = true,
    .modes = 1u << LOCK_SHARED | 1u << LOCK_EXCLUSIVE,
    .acquire = dslr_acquire,
    .release = dslr_release,
    .holds_x = dslr_holds_x,
    .movable = true,
};

const struct lock_algo lock_dslr_u = {
    .id = LOCK_ID_DSLR_U,
    .name = "dslr-u",
    .recovers = true,
    .modes = 1u << LOCK_SHARED | 1u << LOCK_EXCLUSIVE | 1u << LOCK_UPDATE,
    .acquire = dslru_acquire,
    .release = dslru_release,
    .upgrade = dslru_upgrade,
    .holds_x = dslru_holds_x,
    .movable = true,
};
