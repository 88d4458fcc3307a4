/* DSLR-style ticket words, shared by dslr and rwlock: a 64-bit word of "now serving" and "next
 * ticket" counters per class (exclusive, shared, update), taken with one fetch-and-add, waited on
 * by polling in proportion to the tickets ahead, with leases (a waiter resets counters that did
 * not move for two leases), the COUNT_MAX overflow reset, and the fixes to the printed
 * pseudocode listed in docs/locks.md. The word is touched through an ops table, so one code path
 * serves NIC atomics (dslr, rwlock's remote cohort) and CPU atomics (rwlock's local cohort).
 * Internal to locks/. */
#ifndef RDKV_LOCK_TICKET_H
#define RDKV_LOCK_TICKET_H

#include "lock.h"

enum tk_class { TK_X = 0, TK_S = 1, TK_U = 2 };

struct tk_layout {
    uint8_t nclass;      /* 2 (X, S) or 3 (X, S, U) */
    uint8_t width;       /* bits per counter */
    uint8_t n_sh[3];     /* "now serving" counter of each class */
    uint8_t m_sh[3];     /* "next ticket" counter of each class */
    uint32_t count_max;  /* counters may reach this; the bit above is the canary */
};

extern const struct tk_layout tk_dslr4; /* {nX, nS, mX, mS}, 16 bits each, COUNT_MAX 32768 */
extern const struct tk_layout tk_dslr6; /* {nU, nX, nS, mU, mX, mS}, 10 bits, COUNT_MAX 512 */

/* How the word is touched: NIC atomics through the fabric, or CPU atomics on this node. */
struct tk_ops {
    int (*faa)(struct lock_thread *t, rptr w, uint64_t add, uint64_t *old);
    int (*cas)(struct lock_thread *t, rptr w, uint64_t expect, uint64_t desired, uint64_t *old);
    int (*read)(struct lock_thread *t, rptr w, uint64_t *v);
};
extern const struct tk_ops tk_nic, tk_cpu;

/* One request's ticket. */
struct tk_req {
    const struct tk_layout *lay;
    const struct tk_ops *ops;
    rptr word;
    uint8_t cls;          /* the class of the ticket taken */
    uint8_t waits;        /* classes whose earlier tickets it waits for (bitmask) */
    uint16_t k;           /* tickets taken (multi-slot leasing) */
    uint16_t max_k;       /* the most tickets any request on this word takes (patience) */
    bool allow_reset;     /* lease-expiry recovery allowed (not for rwlock's local cohort) */
    uint64_t prev;        /* the word before our fetch-and-add */
    /* The grant cannot have happened before this clock_now_ns() value: taken before posting the
     * ticket's FA, then before each READ (or CAS) that showed the ticket not yet granted, or
     * before the reset CAS that granted it. Waiters behind start judging the holder's silence
     * no earlier, so the hold is safe only within a lease of it (docs/locks.md). */
    int64_t since;
    uint64_t reset_from;  /* non-zero: after releasing, CAS the word from this to 0 */
    uint32_t *sleepers;   /* CPU words only (else NULL): waiters sleep on the word's "now
                             serving" half, counted here, and whoever moves it wakes them */
    /* NIC words only (else 0): the 8-byte word right after the ticket word carries liveness
     * signals in these bits (rwlock: refreshes by members granted here but still waiting for
     * the other cohort); a change there counts as movement, so nobody resets tickets whose
     * holders are alive. Read with the ticket word in one 16-byte READ. */
    uint64_t alive_mask;
    /* Called after this request's stuck reset succeeded, with the word after the ticket word
     * as read with the value the reset replaced (NULL: nothing to do). */
    void (*on_reset)(struct lock_thread *t, const struct tk_req *r, uint64_t next_seen);
};

static inline uint64_t tk_get(const struct tk_layout *l, uint64_t v, unsigned sh)
{
    return (v >> sh) & ((1ull << l->width) - 1);
}

/* Which classes a mode waits on: S waits for X (and U), X for everything, U for X and U; an
 * upgrade additionally for S. */
unsigned tk_waits_for(const struct tk_layout *l, enum tk_class cls);

/* Takes a ticket (one FA; if a COUNT_MAX reset is pending, undoes it, backs off and retries;
 * after two leases of no movement it resets the stuck word and fails). r->prev is set on
 * success. Returns 0, RDKV_EABORTED, RDKV_ETIMEDOUT or a fabric error. */
int tk_take(struct lock_thread *t, struct tk_req *r, int64_t deadline);
/* Interprets a ticket taken elsewhere (rwlock's chained fast path), whose FA was posted at
 * `since`: sets prev, since and reset_from. */
void tk_took(struct lock_thread *t, struct tk_req *r, uint64_t prev, int64_t since);
/* True if the word value v grants the ticket. */
bool tk_granted(const struct tk_req *r, uint64_t v);
/* Waits until the ticket is granted (r->since tells from when). Returns 0 (granted),
 * RDKV_EABORTED (skipped by a reset, or it reset the word and consumed its own ticket: release
 * nothing), RDKV_ETIMEDOUT (deadline: the ticket is still outstanding; hand it to tk_abandon) or
 * a fabric error. */
int tk_wait(struct lock_thread *t, struct tk_req *r, int64_t deadline);
/* How old the evidence of a grant may be when a waiter acts on it: three quarters of a lease,
 * past which the hold would have no lease left to use (lock_lease_ok's margin). Older, it gives
 * the grant up (tk_give_up) instead of entering on it. Not less: an uncontended acquire's
 * evidence is one round trip old, and a lease need not be many round trips long. */
static inline int64_t tk_entry_bound(const struct lock_thread *t)
{
    return t->cfg.lease_ns - t->cfg.lease_ns / 4;
}
/* Passes on a granted ticket its taker no longer wants -- a hold past its lease, a grant too old
 * to enter on, a ticket given up at a deadline whose turn came: reads the word and serves the
 * ticket with a CAS from a value that shows it granted and still ours, so a reset that took it
 * is never counted twice, however late anything arrives. 0 or a fabric error. */
int tk_pass_on(struct lock_thread *t, struct tk_req *r);
/* Gives up a granted ticket whose evidence is too old to enter on (tk_pass_on). Counts a stale
 * grant; returns RDKV_EABORTED. */
int tk_give_up(struct lock_thread *t, struct tk_req *r);
/* Releases the ticket (FA on its "now serving" counter), then completes a COUNT_MAX reset if it
 * was the one to cross. Returns 0 or a fabric error. */
int tk_release(struct lock_thread *t, struct tk_req *r);
/* After the ticket's "now serving" FA was issued elsewhere (rwlock's release chain): completes a
 * COUNT_MAX reset if this ticket crossed it. */
int tk_overflow_reset(struct lock_thread *t, const struct tk_req *r);
/* A COUNT_MAX reset is pending in word value v (newcomers must give their ticket back). */
bool tk_pending_reset(const struct tk_layout *l, uint64_t v);
/* A ticket given up at its deadline: the thread releases it when its turn comes (polled). */
void tk_abandon(struct lock_thread *t, const struct tk_req *r);
/* A new request of the thread on a word where it gave up a ticket of the same class (r: the
 * request, word, class and k set) takes that ticket back instead of taking another, if it still
 * waits for its turn: sets prev, since and reset_from, and true. A given-up ticket whose turn has
 * come is passed on (a reset that took one is left alone); false: take a fresh ticket. Retries
 * that each took a new ticket behind their given-up ones queued faster than the poll passed
 * those on, and nobody reached the head within a deadline (docs/locks.md, "Deadlines"). Returns
 * false on any doubt (fabric error, another incarnation). */
bool tk_reclaim(struct lock_thread *t, struct tk_req *r);
/* Frees the abandoned tickets without releasing them (thread exit: leases recover them). */
void lock_thread_drop_abandoned(struct lock_thread *t);
/* Sleeps for a truncated binary exponential back-off after `failures` consecutive failures. */
void tk_backoff(struct lock_thread *t, unsigned failures);
/* Wakes the sleepers of a CPU word after its "now serving" half moved (no-op for NIC words). */
void tk_wake(struct lock_thread *t, const struct tk_req *r);
/* The process's table of "this word has stood still since": what one waiter observed, for the
 * next one on the same word to resume (lock.h, struct lock_stuck). rwlock's local waiters keep
 * their rule-4 observations of the remote cross word there too. */
bool tk_stuck_get(const struct lock_thread *t, rptr word, struct lock_stuck *out);
void tk_stuck_put(const struct lock_thread *t, const struct lock_stuck *st);
/* What a waiter on r's word counts as movement, with the word at v and the word after it at
 * next: the key (lock_stuck.n) its patience is kept under. */
uint64_t tk_motion(const struct tk_req *r, uint64_t v, uint64_t next);
/* Word value v still serves the exclusive ticket taken when the word was `prev` (every earlier
 * ticket served, ours not yet): the hold is current. With prev == v: no ticket outstanding. */
bool tk_x_current(const struct tk_layout *l, uint64_t v, uint64_t prev);


#endif
