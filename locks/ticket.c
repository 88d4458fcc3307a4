/* DSLR ticket words (see ticket.h). The digest's fixes to the printed pseudocode are marked
 * "fix N" with the numbering of docs/locks.md. */
#include "ticket.h"

#include "common/clock.h"
#include "common/rng.h"
#include "common/task.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

const struct tk_layout tk_dslr4 = {
    .nclass = 2, .width = 16, .n_sh = {48, 32, 0}, .m_sh = {16, 0, 0}, .count_max = 1u << 15};
const struct tk_layout tk_dslr6 = {
    .nclass = 3, .width = 10, .n_sh = {40, 30, 50}, .m_sh = {10, 0, 20}, .count_max = 1u << 9};

/* ------------------------------------------------------------------------------------------ */
/* The two ways to touch a word */

/* The poll unit ω follows the round trips this thread sees (an average over the last eight or
 * so), unless it was configured: a load that slows the fabric down slows the polling with it. */
static void omega_sample(struct lock_thread *t, int64_t t0)
{
    if (t->cfg.dslr_omega_ns > 0) return;
    int64_t rt = clock_now_ns() - t0;
    t->omega_ns = t->omega_ns > 0 ? t->omega_ns + (rt - t->omega_ns) / 8 : rt;
    if (t->omega_ns < 1) t->omega_ns = 1;
}

static int nic_faa(struct lock_thread *t, rptr w, uint64_t add, uint64_t *old)
{
    int64_t t0 = clock_now_ns();
    int rc = fab_faa(t->c, w, add, old);
    omega_sample(t, t0);
    return rc;
}
static int nic_cas(struct lock_thread *t, rptr w, uint64_t e, uint64_t d, uint64_t *old)
{
    return fab_cas(t->c, w, e, d, old);
}
static int nic_read(struct lock_thread *t, rptr w, uint64_t *v)
{
    int64_t t0 = clock_now_ns();
    int rc = fab_read(t->c, w, v, 8);
    omega_sample(t, t0);
    return rc;
}

static int cpu_faa(struct lock_thread *t, rptr w, uint64_t add, uint64_t *old)
{
    uint64_t *p = fab_local(t->f, w), o = __atomic_fetch_add(p, add, __ATOMIC_SEQ_CST);
    if (old) *old = o;
    return 0;
}
static int cpu_cas(struct lock_thread *t, rptr w, uint64_t e, uint64_t d, uint64_t *old)
{
    uint64_t *p = fab_local(t->f, w);
    __atomic_compare_exchange_n(p, &e, d, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    *old = e; /* the value found: equal to the expected one when the CAS succeeded */
    return 0;
}
static int cpu_read(struct lock_thread *t, rptr w, uint64_t *v)
{
    *v = __atomic_load_n((uint64_t *)fab_local(t->f, w), __ATOMIC_SEQ_CST);
    return 0;
}

const struct tk_ops tk_nic = {.faa = nic_faa, .cas = nic_cas, .read = nic_read};
const struct tk_ops tk_cpu = {.faa = cpu_faa, .cas = cpu_cas, .read = cpu_read};

/* ------------------------------------------------------------------------------------------ */

unsigned tk_waits_for(const struct tk_layout *l, enum tk_class cls)
{
    unsigned u = l->nclass > 2 ? 1u << TK_U : 0;
    switch (cls) {
    case TK_X: return 1u << TK_X | 1u << TK_S | u;
    case TK_S: return 1u << TK_X | u;
    case TK_U: return 1u << TK_X | u;
    }
    return 0;
}

static inline uint64_t n_of(const struct tk_layout *l, uint64_t v, unsigned c) { return tk_get(l, v, l->n_sh[c]); }
static inline uint64_t m_of(const struct tk_layout *l, uint64_t v, unsigned c) { return tk_get(l, v, l->m_sh[c]); }

static uint64_t n_fields(const struct tk_layout *l, uint64_t v)
{
    uint64_t mask = 0;
    for (unsigned c = 0; c < l->nclass; c++) mask |= ((1ull << l->width) - 1) << l->n_sh[c];
    return v & mask;
}

static uint64_t with_field(const struct tk_layout *l, uint64_t v, unsigned sh, uint64_t x)
{
    uint64_t mask = ((1ull << l->width) - 1) << sh;
    return (v & ~mask) | ((x << sh) & mask);
}

/* A COUNT_MAX reset is pending: some "next ticket" counter reached COUNT_MAX. */
static bool pending_reset(const struct tk_layout *l, uint64_t v)
{
    for (unsigned c = 0; c < l->nclass; c++)
        if (m_of(l, v, c) >= l->count_max) return true;
    return false;
}

static int64_t lease_of(const struct lock_thread *t) { return t->cfg.lease_ns; }

static uint64_t rnd(struct lock_thread *t)
{
    if (!t->rng) t->rng = 0x9E3779B97F4A7C15ull ^ t->id;
    return rng_next(&t->rng);
}

void tk_backoff(struct lock_thread *t, unsigned failures)
{
    /* W ~ U[0, min(R * 2^(c-1), L)] (DSLR appendix A.3) */
    int64_t cap = t->cfg.dslr_backoff_r_ns << (failures > 1 ? (failures - 1 < 20 ? failures - 1 : 20) : 0);
    if (cap > t->cfg.dslr_backoff_max_ns) cap = t->cfg.dslr_backoff_max_ns;
    if (cap < 1) cap = 1;
    clock_sleep_ns((int64_t)(rnd(t) % (uint64_t)cap));
}

/* The "now serving" counters live in the high half of the word (little-endian). */
static uint32_t *serving_half(struct lock_thread *t, const struct tk_req *r)
{
    return (uint32_t *)fab_local(t->f, r->word) + 1;
}

void tk_wake(struct lock_thread *t, const struct tk_req *r)
{
    if (r->sleepers) lock_wake_all(serving_half(t, r), r->sleepers);
}

void tk_took(struct lock_thread *t, struct tk_req *r, uint64_t prev, int64_t since)
{
    (void)t;
    const struct tk_layout *l = r->lay;
    r->prev = prev;
    r->since = since;
    r->reset_from = 0;
    /* fix 11 (multi-slot): the request whose k tickets cross COUNT_MAX resets the counters once
     * everyone up to and including it has left; newcomers back off until then. */
    uint64_t mine = m_of(l, prev, r->cls);
    if (mine < l->count_max && mine + r->k >= l->count_max) {
        uint64_t v = 0;
        for (unsigned c = 0; c < l->nclass; c++) {
            uint64_t m = m_of(l, prev, c) + (c == r->cls ? r->k : 0);
            v = with_field(l, v, l->n_sh[c], m);
            v = with_field(l, v, l->m_sh[c], m);
        }
        r->reset_from = v;
    }
}

/* Reads the ticket word (and, with alive_mask, the word after it, in the same READ). */
static int read_pair(struct lock_thread *t, const struct tk_req *r, uint64_t *v, uint64_t *next)
{
    if (!r->alive_mask) {
        *next = 0;
        return r->ops->read(t, r->word, v);
    }
    uint64_t pair[2];
    int64_t t0 = clock_now_ns();
    int rc = fab_read(t->c, r->word, pair, sizeof pair);
    omega_sample(t, t0);
    *v = pair[0];
    *next = pair[1];
    return rc;
}

/* What counts as movement: the serving counters, and the liveness bits of the next word. */
static uint64_t motion(const struct tk_req *r, uint64_t v, uint64_t next)
{
    return n_fields(r->lay, v) ^ ((next & r->alive_mask) * 0x9E3779B97F4A7C15ull);
}

int tk_take(struct lock_thread *t, struct tk_req *r, int64_t deadline)
{
    const struct tk_layout *l = r->lay;
    uint64_t add = (uint64_t)r->k << l->m_sh[r->cls];
    unsigned fails = 0;
    uint64_t stuck_n = ~0ull, next = 0;
    int64_t stuck_since = 0;
    bool first = true;
    for (;;) {
        uint64_t prev;
        int64_t t0 = clock_now_ns();
        int rc = r->ops->faa(t, r->word, add, &prev);
        if (rc) return rc;
        if (!pending_reset(l, prev)) {
            tk_took(t, r, prev, t0);
            return 0;
        }
        /* A reset is pending: give the ticket back, back off, and retry from the start
         * (fix 1: never fall through with a returned ticket). */
        rc = r->ops->faa(t, r->word, (uint64_t)0 - add, NULL);
        if (rc) return rc;
        fails++;
        int64_t now = clock_now_ns();
        if (r->alive_mask && (rc = read_pair(t, r, &prev, &next))) return rc;
        uint64_t n = motion(r, prev, next);
        if (first || n != stuck_n) {
            first = false;
            stuck_n = n;
            stuck_since = now;
        } else if (r->allow_reset && now - stuck_since > 2 * lease_of(t)) {
            /* fix 2: nobody released for two leases while the reset waits: whoever should
             * have finished is dead. Reset from a fresh read, only if still unmoved. */
            uint64_t v, got;
            if ((rc = read_pair(t, r, &v, &next))) return rc;
            if (motion(r, v, next) == stuck_n && pending_reset(l, v)) {
                if ((rc = r->ops->cas(t, r->word, v, 0, &got))) return rc;
                if (got == v) {
                    t->stats.resets++;
                    if (r->on_reset) r->on_reset(t, r, next);
                    return RDKV_EABORTED;
                }
            }
            stuck_since = now;
        }
        if (deadline && now >= deadline) return RDKV_ETIMEDOUT;
        /* A CPU word's reset completes within a critical section or two: back off briefly.
         * (DSLR's long random back-off is for NIC words, whose holders are round trips away.) */
        if (r->sleepers) lock_backoff(fails + 3 < 15 ? fails + 3 : 15);
        else tk_backoff(t, fails);
    }
}

bool tk_granted(const struct tk_req *r, uint64_t v)
{
    const struct tk_layout *l = r->lay;
    for (unsigned c = 0; c < l->nclass; c++)
        if ((r->waits & (1u << c)) && n_of(l, v, c) != m_of(l, r->prev, c)) return false;
    return true;
}

/* Our ticket no longer exists: a reset went past it, or the counters went backwards. */
static bool ticket_gone(const struct tk_req *r, uint64_t v)
{
    const struct tk_layout *l = r->lay;
    for (unsigned c = 0; c < l->nclass; c++) {
        uint64_t np = n_of(l, r->prev, c), nv = n_of(l, v, c);
        uint64_t mp = m_of(l, r->prev, c) + (c == r->cls ? r->k : 0), mv = m_of(l, v, c);
        if (nv < np || mv < mp) return true;                            /* fix 3 */
        if ((r->waits & (1u << c)) && nv > m_of(l, r->prev, c)) return true; /* skipped */
    }
    return false;
}

/* Tickets ahead of us in the classes we wait on (fix 4d: a shared waiter counts only the
 * exclusive tickets it actually waits for). */
static uint64_t tickets_ahead(const struct tk_req *r, uint64_t v)
{
    const struct tk_layout *l = r->lay;
    uint64_t a = 0;
    for (unsigned c = 0; c < l->nclass; c++)
        if (r->waits & (1u << c)) {
            uint64_t m = m_of(l, r->prev, c), n = n_of(l, v, c);
            if (m > n) a += m - n;
        }
    return a;
}

/* The word after a stuck waiter's reset. Shared-style waiters (S, U, an upgrade) mark every
 * earlier ticket of the classes they wait on as served and so are granted with their ticket
 * intact (fix 4a); an exclusive waiter marks its own ticket served too and fails, as in the
 * paper (fix 6: it must not release it). */
static uint64_t reset_value(const struct tk_req *r, uint64_t v, bool consume)
{
    const struct tk_layout *l = r->lay;
    uint64_t rv = v;
    for (unsigned c = 0; c < l->nclass; c++) {
        bool waited = r->waits & (1u << c);
        if (!waited) continue;
        uint64_t n = m_of(l, r->prev, c) + (consume && c == r->cls ? r->k : 0);
        rv = with_field(l, rv, l->n_sh[c], n);
    }
    return rv;
}

static bool overflowed(const struct tk_layout *l, uint64_t v)
{
    for (unsigned c = 0; c < l->nclass; c++)
        if (n_of(l, v, c) >= l->count_max || m_of(l, v, c) >= l->count_max) return true;
    return false;
}

/* Brings a word whose counters reached COUNT_MAX back to 0, bounded (fix 8): stops when the word
 * can no longer become `from` (it moved past it or went backwards) or after two leases. */
static int cas_to_zero(struct lock_thread *t, const struct tk_req *r, uint64_t from)
{
    const struct tk_layout *l = r->lay;
    int64_t give_up = clock_now_ns() + 2 * lease_of(t);
    for (unsigned round = 0;; round++) {
        uint64_t got;
        int rc = r->ops->cas(t, r->word, from, 0, &got);
        if (rc) return rc;
        if (got == from) {
            t->stats.overflow_resets++;
            tk_wake(t, r);
            return 0;
        }
        for (unsigned c = 0; c < l->nclass; c++)
            if (n_of(l, got, c) > n_of(l, from, c) || n_of(l, got, c) < n_of(l, r->prev, c))
                return 0; /* someone else reset it, or it can never match */
        if (clock_now_ns() > give_up) return 0; /* newcomers' stuck-reset takes over */
        lock_backoff(round);
    }
}

static unsigned own_abandoned(const struct lock_thread *t, rptr word);

/* Where waiters last gave up on a word that did not move, shared by every thread of the process
 * (keyed by fabric and word): an observation "this word has not moved since S" holds for any
 * thread that sees the same counters, so a waiter resumes the patience of an earlier one, even
 * of a thread that has gone (transactions' session threads come and go, and each waits only
 * briefly). A slot is overwritten by a later word that hashes to it; the cost is patience. */
#define STUCK_SLOTS 256
static pthread_mutex_t stuck_mu = PTHREAD_MUTEX_INITIALIZER;
static struct stuck_slot {
    const struct fabric *f;
    struct lock_stuck s;
} stuck_tab[STUCK_SLOTS];

static struct stuck_slot *stuck_slot(const struct lock_thread *t, rptr word)
{
    uint64_t h = ((word >> 6) ^ ((uint64_t)(uintptr_t)t->f >> 6)) * 0x9E3779B97F4A7C15ull;
    return &stuck_tab[h >> 56];
}

/* Which process of its node a word of another node is, as this thread reaches it now: the
 * incarnation its posts are pinned to, else the one its connection reaches; 0 for this node's
 * own words, or when not known. An observation or a ticket of one incarnation means nothing in
 * the next: its memory started afresh (docs/locks.md, "Restarted nodes"). */
static uint64_t word_inc(const struct lock_thread *t, rptr word)
{
    uint16_t node = rptr_node(word);
    if (node == t->node) return 0;
    uint64_t inc = fab_pinned(t->c, node);
    if (!inc && fab_peer_incarnation(t->c, node, false, &inc)) inc = 0;
    return inc;
}

static bool stuck_get(const struct lock_thread *t, rptr word, struct lock_stuck *out)
{
    struct stuck_slot *sl = stuck_slot(t, word);
    uint64_t inc = word_inc(t, word);
    pthread_mutex_lock(&stuck_mu);
    bool hit = sl->f == t->f && sl->s.word == word && sl->s.inc == inc;
    if (hit) *out = sl->s;
    pthread_mutex_unlock(&stuck_mu);
    return hit;
}

static void stuck_put(const struct lock_thread *t, const struct lock_stuck *st)
{
    struct stuck_slot *sl = stuck_slot(t, st->word);
    uint64_t inc = word_inc(t, st->word);
    pthread_mutex_lock(&stuck_mu);
    /* keep the longer observation of the same word and counters */
    if (!(sl->f == t->f && sl->s.word == st->word && sl->s.inc == inc && sl->s.n == st->n &&
          sl->s.since < st->since)) {
        sl->f = t->f;
        sl->s = *st;
        sl->s.inc = inc;
    } else {
        sl->s.left = st->left;
    }
    pthread_mutex_unlock(&stuck_mu);
}

/* v (and next) were read by a READ posted at seen_at. */
bool tk_stuck_get(const struct lock_thread *t, rptr word, struct lock_stuck *out)
{
    return stuck_get(t, word, out);
}
void tk_stuck_put(const struct lock_thread *t, const struct lock_stuck *st) { stuck_put(t, st); }
uint64_t tk_motion(const struct tk_req *r, uint64_t v, uint64_t next) { return motion(r, v, next); }

static int wait_loop(struct lock_thread *t, struct tk_req *r, uint64_t v, uint64_t next,
                     int64_t seen_at, bool consume, int64_t deadline)
{
    const struct tk_layout *l = r->lay;
    int64_t last = clock_now_ns();
    uint64_t last_n = motion(r, v, next);
    /* Resume the patience clock of an earlier wait that gave up on this word unmoved, if it
     * gave up less than a lease ago: too little time for the counters to have gone all the way
     * round to the same values. */
    struct lock_stuck st;
    if (stuck_get(t, r->word, &st) && st.n == last_n && last - st.left < lease_of(t))
        last = st.since;
    unsigned mine_ahead = own_abandoned(t, r->word);
    int64_t omega = t->omega_ns > 0 ? t->omega_ns : 5 * NS_PER_US;
    unsigned spins = 0;
    for (;;) {
        if (ticket_gone(r, v)) return RDKV_EABORTED;
        if (tk_granted(r, v)) return 0;
        r->since = seen_at; /* not granted when v was read: the grant comes later */
        int64_t now = clock_now_ns();
        uint64_t n = motion(r, v, next);
        if (n != last_n) { /* fix 5: any movement of the serving counters restarts the clock */
            last_n = n;
            last = now;
        }
        uint64_t ahead = tickets_ahead(r, v);
        /* Our own tickets given up earlier on this word are passed on as soon as their turn
         * comes (lock_thread_poll): they hold no lease, so they add no patience. */
        if (ahead > mine_ahead) ahead -= mine_ahead;
        else if (ahead) ahead = 1;
        /* Patience: the counters move at least once per lease while the holder lives, so two
         * still leases mean a dead holder (the paper's rule) -- unless the holder took k slots
         * (multi-slot leasing: k leases), so it grows with the tickets ahead, up to the most
         * slots one request on this word may take (max_k: 1 where nobody takes several, as in
         * rwlock and transactions). Not further: stale tickets ahead (a dead holder's, or
         * ones given up by other waiters) would otherwise put the reset beyond every waiter's
         * deadline. */
        uint64_t k = ahead < r->max_k ? ahead : r->max_k;
        int64_t patience = 2 * lease_of(t) * (int64_t)(k > 1 ? k : 1);
        /* Still from `last` to the READ posted at seen_at -- not to now: a waiter the machine
         * stalled after its READ has seen nothing since, and the holder's refreshes may have
         * come in meanwhile (the CAS below checks the ticket word, not the liveness bits). */
        if (r->allow_reset && seen_at - last > patience) {
            uint64_t rv = reset_value(r, v, consume), got;
            int rc = r->ops->cas(t, r->word, v, rv, &got);
            if (rc) return rc;
            if (got == v) {
                t->stats.resets++;
                tk_wake(t, r);
                if (r->on_reset) r->on_reset(t, r, next);
                if (consume) {
                    if (overflowed(l, rv)) cas_to_zero(t, r, rv);
                    return RDKV_EABORTED;
                }
                r->since = now; /* our CAS granted us: nobody saw that motion before it */
                return 0;
            }
            v = got;
            seen_at = now;
            continue;
        }
        if (deadline && now >= deadline) {
            st = (struct lock_stuck){.word = r->word, .n = last_n, .since = last, .left = now};
            stuck_put(t, &st);
            return RDKV_ETIMEDOUT;
        }
        if (r->sleepers) {
            /* A CPU word: spin briefly, then sleep until a releaser wakes us (bounded, so the
             * deadline is kept). */
            if (spins < (task_running() ? 16u : 256u)) {
                spins++;
                if (task_running()) task_yield(); /* the holder may be a task of this thread */
                else __builtin_ia32_pause();
            } else {
                int64_t nap = 128 * NS_PER_US;
                if (deadline && nap > deadline - now) nap = deadline - now;
                if (nap > 0) lock_nap(serving_half(t, r), (uint32_t)(v >> 32), r->sleepers, nap);
            }
        } else {
            /* Dynamic interval polling: wait in proportion to the tickets ahead, but well under
             * a lease (fix 7) and not past the deadline. */
            int64_t nap = (int64_t)(ahead ? ahead : 1) * omega;
            if (nap > lease_of(t) / 4) nap = lease_of(t) / 4;
            if (deadline && nap > deadline - now) nap = deadline - now;
            /* (A task next in line looks again next round: its thread's other tasks run
             * meanwhile, and its READ leaves with theirs.) */
            if (ahead <= 1 && task_running()) task_yield();
            else if (nap > 0) clock_sleep_ns(nap);
        }
        if (t->abandoned) {
            /* A ticket we gave up on any word may be the one being served there now, and others
             * wait for it while we wait here: pass it on. Otherwise an abandoned ticket is a
             * lock held out of order, and two waiters can each wait for the other's. */
            lock_thread_poll(t);
            mine_ahead = own_abandoned(t, r->word);
        }
        seen_at = clock_now_ns();
        int rc = read_pair(t, r, &v, &next);
        if (rc) return rc;
    }
}

int tk_wait(struct lock_thread *t, struct tk_req *r, int64_t deadline)
{
    uint64_t v, next;
    int64_t seen_at = clock_now_ns();
    int rc = read_pair(t, r, &v, &next);
    if (rc) return rc;
    return wait_loop(t, r, v, next, seen_at, r->cls == TK_X && (r->waits & (1u << TK_X)),
                     deadline);
}

int tk_give_up(struct lock_thread *t, struct tk_req *r)
{
    t->stats.stale_grants++;
    t->stats.aborts++;
    tk_pass_on(t, r);
    return RDKV_EABORTED;
}

int tk_overflow_reset(struct lock_thread *t, const struct tk_req *r)
{
    return r->reset_from ? cas_to_zero(t, r, r->reset_from) : 0;
}

bool tk_pending_reset(const struct tk_layout *l, uint64_t v) { return pending_reset(l, v); }

bool tk_x_current(const struct tk_layout *l, uint64_t v, uint64_t prev)
{
    for (unsigned c = 0; c < l->nclass; c++)
        if (n_of(l, v, c) != m_of(l, prev, c)) return false;
    return true;
}

int tk_release(struct lock_thread *t, struct tk_req *r)
{
    const struct tk_layout *l = r->lay;
    int rc = r->ops->faa(t, r->word, (uint64_t)r->k << l->n_sh[r->cls], NULL);
    if (!rc) tk_wake(t, r);
    if (rc || !r->reset_from) return rc;
    return cas_to_zero(t, r, r->reset_from);
}

/* Serves the ticket from a word value v that shows it granted and still ours, with a CAS from
 * exactly v, retried while other tickets come and go. A granted ticket that is not gone by the
 * skip rules is unserved (an S ticket a reset counted served shows a later X served; an X ticket
 * shows itself served), so the CAS serves it only if no reset took it -- before our read or
 * after: timing plays no part. Returns 0 or a fabric error. */
static int pass_on_from(struct lock_thread *t, struct tk_req *r, uint64_t v)
{
    const struct tk_layout *l = r->lay;
    for (unsigned i = 0; i < 64; i++) { /* (each failure is someone else's progress) */
        if (ticket_gone(r, v) || !tk_granted(r, v)) return 0;
        uint64_t got;
        int rc = r->ops->cas(t, r->word, v, v + ((uint64_t)r->k << l->n_sh[r->cls]), &got);
        if (rc) return rc;
        if (got == v) {
            tk_wake(t, r);
            return r->reset_from ? cas_to_zero(t, r, r->reset_from) : 0;
        }
        v = got;
    }
    return 0; /* left to the waiters' reset */
}

int tk_pass_on(struct lock_thread *t, struct tk_req *r)
{
    uint64_t v;
    int rc = r->ops->read(t, r->word, &v);
    return rc ? rc : pass_on_from(t, r, v);
}

/* ------------------------------------------------------------------------------------------ */
/* Tickets given up at a deadline */

/* How long a given-up ticket whose turn does not come is kept for passing on: by then a reset
 * has surely taken it. Long enough to outlast a paused or restarting node. */
#define ABANDON_KEEP_LEASES 64

struct lock_abandoned {
    struct lock_abandoned *next;
    struct tk_req r;
    uint64_t inc; /* the incarnation of the word's node it was taken in (0: own, or unknown) */
    int64_t since;
};

static unsigned own_abandoned(const struct lock_thread *t, rptr word)
{
    unsigned n = 0;
    for (const struct lock_abandoned *a = t->abandoned; a; a = a->next)
        if (a->r.word == word) n += a->r.k;
    return n;
}

void tk_abandon(struct lock_thread *t, const struct tk_req *r)
{
    struct lock_abandoned *a = malloc(sizeof *a);
    if (!a) return; /* the lease-expiry reset recovers the ticket */
    a->r = *r;
    a->inc = word_inc(t, r->word);
    a->since = clock_now_ns();
    a->next = t->abandoned;
    t->abandoned = a;
}

bool tk_reclaim(struct lock_thread *t, struct tk_req *r)
{
    for (struct lock_abandoned **pp = &t->abandoned; *pp; pp = &(*pp)->next) {
        struct lock_abandoned *a = *pp;
        if (a->r.word != r->word || a->r.lay != r->lay || a->r.ops != r->ops ||
            a->r.cls != r->cls || a->r.k != r->k)
            continue;
        if (a->inc != word_inc(t, r->word)) return false; /* (the poll sorts that one out) */
        uint64_t v;
        int64_t seen_at = clock_now_ns();
        if (a->r.ops->read(t, a->r.word, &v)) return false;
        if (ticket_gone(&a->r, v) || tk_granted(&a->r, v)) {
            /* taken by a reset, or its turn came: pass it on as the poll would, and take a
             * fresh ticket */
            if (!ticket_gone(&a->r, v)) pass_on_from(t, &a->r, v);
            *pp = a->next;
            free(a);
            return false;
        }
        /* still waiting for its turn: ours again, granted no earlier than that READ */
        r->prev = a->r.prev;
        r->reset_from = a->r.reset_from;
        r->since = seen_at;
        *pp = a->next;
        free(a);
        return true;
    }
    return false;
}

/* Pins t's posts to a's word's node to the incarnation a was taken in (*pinned, and the pin it
 * replaced in *was, to restore); false when that process is gone: its ticket went with it. */
static bool pin_abandoned(struct lock_thread *t, const struct lock_abandoned *a, uint64_t **was,
                          bool *pinned)
{
    *was = NULL;
    *pinned = false;
    if (!a->inc) return true;
    uint16_t node = rptr_node(a->r.word);
    uint64_t now;
    if (!fab_peer_incarnation(t->c, node, false, &now) && now > a->inc) return false;
    unsigned n = fab_num_nodes(t->f);
    if (!t->pin && !(t->pin = calloc(n, sizeof *t->pin))) return true; /* (unpinned, as before) */
    memset(t->pin, 0, n * sizeof *t->pin);
    t->pin[node] = a->inc;
    *was = fab_pin(t->c, t->pin);
    *pinned = true;
    return true;
}

void lock_thread_poll(struct lock_thread *t)
{
    for (struct lock_abandoned **pp = &t->abandoned; *pp;) {
        struct lock_abandoned *a = *pp;
        uint64_t v, *was;
        bool done = true, pinned;
        if (!pin_abandoned(t, a, &was, &pinned)) {
            *pp = a->next; /* its node restarted: the ticket is gone with the old process */
            free(a);
            continue;
        }
        int rc = a->r.ops->read(t, a->r.word, &v);
        uint64_t now_inc;
        if (rc && a->inc && !fab_peer_incarnation(t->c, rptr_node(a->r.word), false, &now_inc) &&
            now_inc > a->inc) {
            done = true; /* (the read found the node restarted: the ticket went with it) */
        } else if (rc) {
            /* the word's node does not answer now (paused, restarting, down): try again later
             * -- unless it has been long enough that a reset surely took the ticket */
            done = a->r.allow_reset && clock_now_ns() - a->since > ABANDON_KEEP_LEASES * lease_of(t);
        } else if (!ticket_gone(&a->r, v)) {
            if (tk_granted(&a->r, v)) {
                /* our turn: pass it on at once (with a CAS, so a reset that took it in the
                 * meantime, however late our read, is left alone) */
                pass_on_from(t, &a->r, v);
            } else {
                /* reset by now -- where waiters reset; a word without resets (rwlock's local
                 * cohort) waits for its turn however long: dropping the ticket would leave
                 * everyone behind it waiting for good */
                done = a->r.allow_reset && clock_now_ns() - a->since > ABANDON_KEEP_LEASES * lease_of(t);
            }
        }
        if (pinned) fab_pin(t->c, was);
        if (done) {
            *pp = a->next;
            free(a);
        } else {
            pp = &a->next;
        }
    }
}

void lock_thread_hand_over(struct lock_thread *from, struct lock_thread *to)
{
    struct lock_abandoned **tail = &to->abandoned;
    while (*tail) tail = &(*tail)->next;
    *tail = from->abandoned;
    from->abandoned = NULL;
}

void lock_thread_drop_abandoned(struct lock_thread *t)
{
    while (t->abandoned) {
        struct lock_abandoned *a = t->abandoned;
        t->abandoned = a->next;
        free(a);
    }
}
