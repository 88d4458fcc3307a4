/* rwlock, rdkv's row lock: shared and exclusive modes, DSLR-style FCFS tickets, ALock's locality
 * (threads on the lock's node use only CPU atomics, others only one-sided operations), fairness
 * between the two cohorts bounded by budgets, and leases so a dead remote holder cannot wedge the
 * row. Every read-modify-written word belongs to one class of writer: RT and RC only see NIC
 * atomics, LT and LC only CPU atomics; TURN is only ever stored.
 *
 *   RT   @0   remote cohort's tickets {nX, nS, mX, mS}          (NIC FAA/CAS)
 *   RC   @8   remote cohort's cross word {act, eW, eX, eS}       (NIC FAA/CAS)
 *   LT   @16  local cohort's tickets                             (CPU atomics)
 *   LC   @24  local cohort's cross word                          (CPU atomics)
 *   TURN @32  the cohort with priority: 0 local, 1 remote        (stores)
 *   LSLEEP @40 local waiters asleep on LT (a futex count)        (CPU atomics)
 *   RAGE @48 wait-die: remote cohort's age floor                  (NIC CAS)
 *   LAGE @56 wait-die: local cohort's age floor                   (CPU CAS)
 *
 * A request takes a ticket in its cohort's word and waits for its turn there (DSLR's rules: S
 * after the earlier X, X after everyone earlier). Then it "raises" its mode in its cohort's
 * cross word and looks at the other cohort's: a conflicting member there (X against anyone, S
 * against X) means it waits -- keeping its mark raised if its cohort has priority, else lowering
 * it until its cohort gets priority or the other side empties. This is Dekker's algorithm between
 * two *groups*: counters are the flags (so any number of members of a cohort can hold at once,
 * and none of them ever writes a victim variable -- the trap of Peterson's handshake with several
 * writers per side), and TURN only breaks ties. A member whose ticket index ends a budget (5
 * local, 20 remote) hands priority to the other cohort when it leaves, unless a member of its own
 * cohort that backed off still waits (eW counts them): spin found that without that rule a
 * backed-off member can starve while its peers use and close every priority window. The
 * argument is in docs/locks.md; tests/models/rwlock.pml checks it with spin. */
#include "ticket.h"

#include "common/clock.h"

#include <string.h>

#define RW_RT 0
#define RW_RC 8
#define RW_LT 16
#define RW_LC 24
#define RW_TURN 32
#define RW_LSLEEP 40 /* local waiters asleep on LT's "now serving" half (CPU atomics only) */
#define RW_RAGE 48   /* wait-die: no wait-die member of the remote cohort is older (NIC CAS) */
#define RW_LAGE 56   /* the same for the local cohort (CPU CAS) */
#define TURN_LOCAL 0
#define TURN_REMOTE 1

/* Cross word, from the top: three 8-bit activity counters -- actO, bumped by every raise and
 * lower; actR, bumped by a raised member's refresh while it waits for the other cohort; actW, by
 * a backed-off member's refresh -- then the counts of members backed off and still waiting (eW,
 * 13 bits), raised exclusive (eX, 13 bits) and raised shared (eS, 14 bits). A cohort may have
 * at most 8191 requests raised or waiting at once on one row. A counter's carry only bumps the
 * activity counter above it. The local cohort's word has the same layout; only its counts are
 * used. */
#define CW_ACTO (1ull << 56)
#define CW_ACTR (1ull << 48)
#define CW_ACTW (1ull << 40)
#define CW_W (1ull << 27)
#define CW_X (1ull << 14)
#define CW_S 1ull
#define CW_XS ((1ull << 27) - 1)
static inline uint64_t cw_w(uint64_t v) { return (v >> 27) & 0x1FFF; }
static inline uint64_t cw_x(uint64_t v) { return (v >> 14) & 0x1FFF; }
static inline uint64_t cw_s(uint64_t v) { return v & 0x3FFF; }
static inline uint64_t cw_mode(enum lock_mode m) { return m == LOCK_EXCLUSIVE ? CW_X : CW_S; }
#define CW_ACTR_BITS (0xFFull << 48)
#define CW_ACTW_BITS (0xFFull << 40)
#define CW_W_BITS (0x1FFFull << 27)
/* what a raised member that lives changes within half a lease: all but actW and eW */
#define CW_RAISED_LIVE (~(CW_ACTW_BITS | CW_W_BITS))
/* the refreshes: the remote ticket waiters' sign that members granted before them live */
#define CW_REFRESHES (CW_ACTR_BITS | CW_ACTW_BITS)

/* Rule 4's key in the stuck table (at the cross word's address): the remote cohort's raised
 * marks and liveness as the cross word RC shows them, with its tickets RT. */
static uint64_t rule4_key(uint64_t rc, uint64_t rt)
{
    return (rc & CW_RAISED_LIVE) ^ (rt * 0x9E3779B97F4A7C15ull);
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

/* A request's standing in its cohort's cross word. A remote member's two clocks are the times,
 * taken before posting, of its last sign of life each kind of judge can see: `touched`, its last
 * FAA on the cross word (every one bumps actO, which local waiters watch before they clear raised
 * marks, rule 4), and `alive_at`, the evidence of its ticket's grant or its last refresh (actR or
 * actW, which remote ticket waiters watch before they reset the tickets, rule 3). Neither judge
 * can act on the member before two leases past the clock it watches. */
struct member {
    struct side s;
    enum lock_mode mode;
    bool raised;        /* counted in eX or eS */
    bool marked;        /* counted in eW: it backed off, and has not released since */
    int64_t touched;    /* remote: when it last changed the cross word */
    int64_t alive_at;   /* remote: when its ticket's grant or its last refresh was shown */
    uint64_t age;       /* wait-die: our timestamp (0: not wait-die) */
    uint64_t published; /* wait-die: our cohort's age word as our publication left it */
    bool died;          /* wait-die: gave up because an older request was there */
    int64_t grace_end;  /* wait-die: an exclusive request behind older shared holders only
                           waits until then (0: not such a wait) */
};

/* ---------------------------------------------------------------------------------------------
 * Wait-die (docs/locks.md, "Wait-die: the age floors"). Each cohort has an age word: a floor
 * (no wait-die member admitted to the cohort -- granted, or waiting -- since the floor was last
 * reset is older) and a version. A request publishes its age there with a CAS of its cohort's
 * class (NIC for the remote word, CPU for the local one) and waits only while no floor of what
 * it waits for is older: its own cohort's while tickets are ahead of it, the other cohort's
 * while that one has members. Otherwise it gives up as at a deadline. Stale floors (members
 * gone) are lower, never higher: they cost needless deaths, never a wait for someone older. */
#define AGE_VER 8 /* the low bits of an age word: a version, bumped by every change */
static uint64_t age_floor(uint64_t word) { return word >> AGE_VER; }
static bool age_older(uint64_t word, uint64_t age)
{
    return age_floor(word) && age_floor(word) < age;
}

/* An exclusive request that would wait only for shared members older than it does not die at
 * once: it waits up to this long, then dies (docs/locks.md: a floor is a lower bound, often
 * stale under a stream of readers, and dying at once starved writers of readers' rows). */
#define AGE_GRACE_NS NS_PER_MS

/* What wait-die makes of an older floor in front of a request: die at once, or, for an
 * exclusive request with no exclusive member ahead (x_ahead false), wait out the grace. */
static void age_meet(struct member *m, bool x_ahead, int64_t now)
{
    if (m->mode == LOCK_EXCLUSIVE && !x_ahead) {
        if (!m->grace_end) m->grace_end = now + AGE_GRACE_NS;
    } else {
        m->died = true;
    }
}

/* The deadline of a wait-die request's wait: now when it died, the grace's end if sooner. */
static int64_t age_deadline(const struct member *m, int64_t deadline)
{
    if (m->died) return clock_now_ns();
    if (m->grace_end && (!deadline || m->grace_end < deadline)) return m->grace_end;
    return deadline;
}

/* Whether a ticket word shows exclusive tickets outstanding. */
static bool x_out(uint64_t v)
{
    return tk_get(&tk_dslr4, v, tk_dslr4.n_sh[TK_X]) != tk_get(&tk_dslr4, v, tk_dslr4.m_sh[TK_X]);
}

/* Publishes m->age in our cohort's word: the min with the floor there, or, for a request that
 * found its cohort idle (everyone admitted since is behind it), ours alone. Every publication
 * bumps the word's version, even when the floor stays, so that a CAS from an older value (a
 * reset, a clear) fails once anyone published since. *now: the word after our update (a floor
 * older than us: someone older came in between). */
static int age_publish(struct lock_thread *t, struct member *m, uint64_t seen, bool reset,
                       uint64_t *now)
{
    rptr w = rptr_add(m->s.line, m->s.remote ? RW_RAGE : RW_LAGE);
    for (;;) { /* (a lost race means another publisher's CAS landed: lock-free) */
        uint64_t f = age_floor(seen);
        uint64_t want = (reset || !f || m->age < f ? m->age : f) << AGE_VER |
                        ((seen + 1) & ((1u << AGE_VER) - 1));
        uint64_t got = seen;
        if (m->s.remote) {
            int rc = fab_cas(t->c, w, seen, want, &got);
            if (rc) return rc;
        } else {
            __atomic_compare_exchange_n(&m->s.lp[RW_LAGE / 8], &got, want, false,
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        }
        if (got == seen) {
            *now = want;
            return 0;
        }
        seen = got;
        reset = false; /* someone behind us published: keep their floor */
    }
}

static int64_t fresh_since(const struct member *m)
{
    return m->touched < m->alive_at ? m->touched : m->alive_at;
}

/* A remote member that went more than a lease without a sign of life (its process stalled, a
 * reply came late) may have had its marks or its ticket recovered by the judges, and must not
 * touch them again -- its FAA would take someone else's mark or serve someone else's ticket.
 * It abandons the request, leaving everything to the recovery. */
static bool stalled(struct lock_thread *t, const struct member *m)
{
    return m->s.remote && clock_now_ns() - fresh_since(m) > t->cfg.lease_ns;
}

/* One FAA on our cross word. `alive`: it carries a refresh (actR or actW), which remote ticket
 * waiters see as our sign of life; a granted member's FAAs all do, so that no sign of life it
 * gives is invisible to a rule that may judge it dead. */
static int cross_add(struct lock_thread *t, struct member *m, uint64_t add, bool alive)
{
    if (stalled(t, m)) return RDKV_EABORTED;
    int64_t t0 = clock_now_ns();
    int rc = m->s.ops->faa(t, m->s.C, add, NULL);
    if (!rc) {
        m->touched = t0;
        if (alive) m->alive_at = t0;
    }
    return rc;
}

/* The other cohort's cross word and TURN, read after our own raise (store->load order: a CPU
 * atomic is a full fence; a NIC READ chained after the NIC FAA executes after it). A local
 * member also gets the remote ticket word, for the lease check. */
static int look(struct lock_thread *t, struct member *m, uint64_t *other, uint64_t *turn,
                uint64_t *rt, uint64_t *oage)
{
    if (!m->s.remote) {
        uint64_t *lp = m->s.lp;
        *other = __atomic_load_n(&lp[RW_RC / 8], __ATOMIC_SEQ_CST);
        *turn = __atomic_load_n(&lp[RW_TURN / 8], __ATOMIC_SEQ_CST);
        *rt = __atomic_load_n(&lp[RW_RT / 8], __ATOMIC_SEQ_CST);
        *oage = __atomic_load_n(&lp[RW_RAGE / 8], __ATOMIC_SEQ_CST);
        return 0;
    }
    uint64_t snap[LOCK_LINE / 8];
    int rc = fab_read(t->c, m->s.line, snap, m->age ? sizeof snap : 40);
    *other = snap[RW_LC / 8];
    *turn = snap[RW_TURN / 8];
    *rt = 0;
    *oage = m->age ? snap[RW_LAGE / 8] : 0;
    return rc;
}

/* After a remote waiter's stuck reset of RT (no member granted before it showed life for the
 * whole patience), every waiter mark in RC is a dead or stalled member's: clear them, if RC is
 * still exactly as read with the reset value. */
static void clear_waiter_marks(struct lock_thread *t, const struct tk_req *r, uint64_t rc_seen)
{
    uint64_t got;
    if (!cw_w(rc_seen)) return;
    uint64_t fresh = rc_seen - cw_w(rc_seen) * CW_W + CW_ACTO;
    fab_cas(t->c, rptr_add(r->word, RW_RC - RW_RT), rc_seen, fresh, &got);
}

/* Wait-die, before any ticket is taken: whether the request would wait for someone older, from
 * the line as it is now (w: its 8 words). Its own cohort: a ticket of its class would not be
 * granted at once and the cohort's floor is older. The other cohort: a conflicting member is
 * raised or a ticket that would conflict is out, and that floor is older. Dying here leaves no
 * trace; a request admitted here checks again once it has its ticket (the line may have moved
 * in between). */
static bool age_dies_early(struct member *m, const struct tk_req *r, const uint64_t *w)
{
    bool rem = m->s.remote;
    uint64_t own_t = w[(rem ? RW_RT : RW_LT) / 8], oth_t = w[(rem ? RW_LT : RW_RT) / 8];
    uint64_t oth_c = w[(rem ? RW_LC : RW_RC) / 8];
    uint64_t own_a = w[(rem ? RW_RAGE : RW_LAGE) / 8], oth_a = w[(rem ? RW_LAGE : RW_RAGE) / 8];
    int64_t now = clock_now_ns();
    struct tk_req q = *r;
    q.prev = own_t;
    if (!tk_granted(&q, own_t) && age_older(own_a, m->age)) age_meet(m, x_out(own_t), now);
    q.prev = oth_t;
    if ((!tk_granted(&q, oth_t) || conflict(m->mode, oth_c)) && age_older(oth_a, m->age))
        age_meet(m, x_out(oth_t) || cw_x(oth_c), now);
    return m->died;
}

/* Wait-die and a dead holder. A dead member's lock is freed by lease recovery, which only a
 * waiter performs, once what it watches has not moved for two leases: the remote tickets and
 * their liveness bits (a remote request, ticket.c's wait_loop), or the remote cohort's raised
 * marks and tickets (a local request, rule 4 in cross). Those waiters leave what they watched in
 * the process's stuck table when they give up at their deadline, and the next waiter on the
 * same values resumes the patience clock from there. A request younger than a dead member dies
 * before it waits, and every later request is younger still: without this, nobody would ever
 * wait, and the row would stay locked for good. So a request that dies early keeps the same
 * entry, as if it had waited and given up at once; one that finds the entry more than two leases
 * old does not die, but waits as a timeout request, which resumes the entry and recovers the
 * lock at its first look. The recovery is the waiters' own: a CAS from the values seen, so a
 * member that moved in between is never reset. (Only what the other side can hold matters: a
 * local member lives in the lock's own process and always releases.) */
static bool dead_line(struct lock_thread *t, const struct member *m, const struct tk_req *r,
                      const uint64_t *w)
{
    int64_t now = clock_now_ns(), lease = t->cfg.lease_ns;
    struct lock_stuck st, seen;
    if (m->s.remote) { /* the tickets' patience */
        st.word = r->word;
        st.n = tk_motion(r, w[RW_RT / 8], w[RW_RC / 8]);
    } else { /* rule 4's */
        st.word = rptr_add(m->s.line, RW_RC);
        st.n = rule4_key(w[RW_RC / 8], w[RW_RT / 8]);
    }
    st.since = now;
    if (tk_stuck_get(t, st.word, &seen) && seen.n == st.n && now - seen.left < lease)
        st.since = seen.since;
    st.left = now;
    tk_stuck_put(t, &st);
    return now - st.since > 2 * lease;
}

static void tk_req_of(struct lock_handle *h, struct side *s, enum tk_class cls, struct tk_req *r)
{
    r->lay = &tk_dslr4;
    r->ops = s->ops;
    r->word = s->T;
    r->cls = (uint8_t)cls;
    r->waits = (uint8_t)tk_waits_for(&tk_dslr4, cls);
    r->k = 1;
    r->max_k = 1; /* nobody takes several tickets of an rwlock */
    /* Lease recovery is for the remote cohort's words: a local holder lives in the lock's own
     * process and always releases. */
    r->allow_reset = s->remote;
    r->prev = h->aux;
    r->since = h->granted_at;
    r->reset_from = h->aux2;
    /* local waiters sleep on LT until a local releaser wakes them */
    r->sleepers = s->remote ? NULL : (uint32_t *)(void *)&s->lp[RW_LSLEEP / 8];
    /* remote ticket waiters count RC's refreshes as signs of life of the members before them */
    r->alive_mask = s->remote ? CW_REFRESHES : 0;
    r->on_reset = s->remote ? clear_waiter_marks : NULL;
}

/* Lease recovery of the remote cohort's raised marks by a local waiter. `seen` has been RC's
 * value (but for backed-off members' refreshes and waiter marks) for two leases, and RT has not
 * changed either: no remote request arrived, no remote member raised or lowered, no raised
 * member refreshed. So every raised mark is a holder past its lease (which will not release),
 * a dead member, or a stalled one (which will not touch RC again): clear eX and eS, keeping the
 * waiter marks of members that live. This is the one place a local thread uses the NIC (a
 * loopback CAS): RC is a NIC word, and only a NIC atomic may change it. */
static bool recover_rc(struct lock_thread *t, struct member *m, uint64_t seen)
{
    uint64_t got;
    uint64_t fresh = (seen & ~CW_XS) + CW_ACTO;
    if (fab_cas(t->c, rptr_add(m->s.line, RW_RC), seen, fresh, &got) || got != seen) return false;
    t->stats.resets++;
    return true;
}

/* Rule 6: orphaned marks, per class. A remote member holds a ticket of its class in RT for as
 * long as it has a mark in RC -- it takes the ticket before it raises (the fast path's chain runs
 * in order), lowers and unmarks before it serves or gives back the ticket, and a member that
 * abandons leaves both for recovery -- and an X member's raised mark is in eX, an S member's in
 * eS. So when RT shows no X ticket outstanding (n_X = max_X, no COUNT_MAX reset pending) both
 * before and after RC is read, every eX mark RC counts belongs to a member whose ticket a reset
 * or a pass-on took, which will never touch RC again (docs/locks.md): clear them with a CAS from
 * the value read; the same for S and eS; and eW, whose marks are of either class, when neither
 * class has a ticket out. Unlike rule 4 this needs no quiet period: it holds at the first moment
 * the class is idle in the remote cohort, which comes between transactions even when RC is never
 * still for two leases -- and for eX under a stream of remote readers, which take S tickets only
 * (a dead writer's mark was held up for tens of seconds when this needed the whole cohort idle).
 * Local threads only (plain loads of the row's own words). */
#define RT_X_FIELDS (0xFFFFull << 48 | 0xFFFFull << 16) /* n_X, max_X (tk_dslr4) */
#define RT_S_FIELDS (0xFFFFull << 32 | 0xFFFFull)       /* n_S, max_S */
#define CW_X_BITS (0x1FFFull << 14)
#define CW_S_BITS 0x3FFFull

static uint64_t idle_classes(uint64_t rt)
{
    if (tk_pending_reset(&tk_dslr4, rt)) return 0;
    uint64_t f = 0;
    if (tk_get(&tk_dslr4, rt, tk_dslr4.n_sh[TK_X]) == tk_get(&tk_dslr4, rt, tk_dslr4.m_sh[TK_X]))
        f |= RT_X_FIELDS;
    if (tk_get(&tk_dslr4, rt, tk_dslr4.n_sh[TK_S]) == tk_get(&tk_dslr4, rt, tk_dslr4.m_sh[TK_S]))
        f |= RT_S_FIELDS;
    return f;
}

/* The marks of RC that the idle classes (RT fields f) leave no live owner for. */
static uint64_t orphan_bits(uint64_t f)
{
    uint64_t b = 0;
    if (f & RT_X_FIELDS) b |= CW_X_BITS;
    if (f & RT_S_FIELDS) b |= CW_S_BITS;
    if ((f & RT_X_FIELDS) && (f & RT_S_FIELDS)) b |= CW_W_BITS;
    return b;
}

static bool clear_orphans(struct lock_thread *t, struct member *m)
{
    uint64_t *lp = m->s.lp;
    uint64_t rt = __atomic_load_n(&lp[RW_RT / 8], __ATOMIC_SEQ_CST);
    uint64_t f = idle_classes(rt), clear = orphan_bits(f);
    if (!clear) return false;
    uint64_t rc = __atomic_load_n(&lp[RW_RC / 8], __ATOMIC_SEQ_CST);
    if (!(rc & clear)) return false;
    /* the classes cleared must not have moved meanwhile (a ticket taken, one served) */
    uint64_t rt2 = __atomic_load_n(&lp[RW_RT / 8], __ATOMIC_SEQ_CST);
    if (tk_pending_reset(&tk_dslr4, rt2) || ((rt ^ rt2) & f)) return false;
    uint64_t got, fresh = (rc & ~clear) + CW_ACTO;
    if (fab_cas(t->c, rptr_add(m->s.line, RW_RC), rc, fresh, &got) || got != rc) return false;
    t->stats.resets++;
    return true;
}

/* Lowers our mark (if raised) and unmarks us (if marked, and `unmark`), with one FA; a granted
 * member's carries a refresh. */
static int lower(struct lock_thread *t, struct member *m, bool unmark, bool granted)
{
    uint64_t add = CW_ACTO + (granted ? CW_ACTW : 0);
    if (m->raised) add -= cw_mode(m->mode);
    if (unmark && m->marked) add -= CW_W;
    int rc = cross_add(t, m, add, granted);
    if (rc) return rc;
    m->raised = false;
    if (unmark) m->marked = false;
    return 0;
}

/* A4: the cross-cohort handshake; we are raised. Returns 0 (enter: raised), RDKV_ETIMEDOUT
 * (lowered and unmarked again), RDKV_EABORTED (stalled: marks abandoned) or a fabric error
 * (standing as in *m). *at_once: entered on the look it was given, with no other step. */
static int cross(struct lock_thread *t, struct member *m, uint64_t other, uint64_t turn,
                 uint64_t rt, uint64_t oage, int64_t deadline, bool *at_once)
{
    *at_once = false;
    struct side *s = &m->s;
    int64_t lease = t->cfg.lease_ns, now = clock_now_ns();
    int64_t since = now, refreshed = now, backed = now;
    uint64_t watched = 0, watched_rt = 0;
    bool watching = false;
    rptr rcw = rptr_add(s->line, RW_RC); /* the stuck table's key for rule 4's observations */
    for (unsigned round = 0;; round++) {
        now = clock_now_ns();
        if (m->raised && !conflict(m->mode, other)) {
            /* Enter only on fresh evidence: our mark and ticket are ours until two leases past
             * fresh_since, and what the READ showed is no older than that. A reply that came
             * late gets a refresh and a new look instead (cross_add abandons past a lease). */
            if (!s->remote || now - fresh_since(m) < tk_entry_bound(t)) {
                *at_once = round == 0; /* (every later round follows a step of ours) */
                return 0;
            }
            int rc = cross_add(t, m, CW_ACTR, true);
            if (rc) return rc;
            refreshed = now;
            if ((rc = look(t, m, &other, &turn, &rt, &oage))) return rc;
            continue;
        }
        if (!m->died && age_older(oage, m->age) && (other & (CW_XS | CW_W_BITS))) {
            /* wait-die: the other cohort, which we would wait for, has an older member */
            age_meet(m, cw_x(other) != 0, now);
            deadline = age_deadline(m, deadline);
        }
        if (!s->remote) {
            if (!watching || (other & CW_RAISED_LIVE) != watched || rt != watched_rt) {
                watched = other & CW_RAISED_LIVE;
                watched_rt = rt;
                since = now;
                /* resume the quiet another local waiter saw on these very values (less than a
                 * lease ago): transactions wait far less than the two leases rule 4 needs */
                struct lock_stuck st;
                uint64_t key = rule4_key(watched, watched_rt);
                if (tk_stuck_get(t, rcw, &st) && st.n == key && now - st.left < lease)
                    since = st.since;
                watching = true;
            }
            /* (at the first look too: a resumed quiet may be due already -- a wait-die request
             * that dies at this look would otherwise never recover a dead member's marks) */
            if (now - since > 2 * lease && (other & CW_XS) && recover_rc(t, m, other))
                since = now; /* (a failed CAS -- a refresh came in between -- retries next look) */
            if ((other & (CW_XS | CW_W_BITS)) && clear_orphans(t, m)) since = now;
        }
        if (!m->raised) {
            /* backed off: come back when we have priority or the other side is empty */
            if (turn == s->prio || (cw_x(other) + cw_s(other)) == 0) {
                int rc = cross_add(t, m, CW_ACTO + CW_ACTR + cw_mode(m->mode), true);
                if (rc) return rc;
                m->raised = true;
                if ((rc = look(t, m, &other, &turn, &rt, &oage))) return rc;
                continue;
            }
            if (!s->remote && now - backed > 2 * lease) {
                /* Two leases without priority: the remote cohort may be keeping it for a dead
                 * member's stale waiter mark. TURN only breaks ties (safety rests on the
                 * marks), so a local waiter may take it back; the budgets resume after. */
                __atomic_store_n(&s->lp[RW_TURN / 8], s->prio, __ATOMIC_SEQ_CST);
                backed = now;
            } else if (s->remote && now - refreshed > lease / 2) {
                int rc = cross_add(t, m, CW_ACTW, true); /* alive, backed off */
                if (rc) return rc;
                refreshed = now;
            }
        } else if (turn != s->prio) {
            /* the other side has priority: lower our mark, stay marked as a waiter, and wait
             * (the FAA refreshes too: a member that keeps backing off and raising again is
             * alive, and must look so to the remote ticket waiters) */
            uint64_t add = CW_ACTO + CW_ACTW - cw_mode(m->mode) + (m->marked ? 0 : CW_W);
            int rc = cross_add(t, m, add, true);
            if (rc) return rc;
            m->raised = false;
            m->marked = true;
            backed = refreshed = now;
        } else if (s->remote && now - refreshed > lease / 2) {
            int rc = cross_add(t, m, CW_ACTR, true); /* alive, raised */
            if (rc) return rc;
            refreshed = now;
        }
        if (deadline && now >= deadline) {
            if (!s->remote && watching) {
                struct lock_stuck st = {.word = rcw,
                                        .n = rule4_key(watched, watched_rt),
                                        .since = since,
                                        .left = now};
                tk_stuck_put(t, &st);
            }
            int rc = lower(t, m, true, true);
            return rc ? rc : RDKV_ETIMEDOUT;
        }
        if (!s->remote) lock_backoff(round < 12 ? round : 12);
        else if (round > 2) lock_backoff(round < 10 ? round : 10);
        int rc = look(t, m, &other, &turn, &rt, &oage);
        if (rc) return rc;
    }
}

#define DESC_MARKED 0x80 /* h->desc: the ticket class, and this bit while marked */

/* A request whose deadline is this close when it starts only tries (no-wait's one try). */
#define TRY_ONLY_NS (10 * NS_PER_US)

static int rw_acquire(struct lock_handle *h, enum lock_mode mode, int64_t deadline)
{
    struct lock_thread *t = h->t;
    if (mode != LOCK_SHARED && mode != LOCK_EXCLUSIVE) return RDKV_ENOTSUP;
    lock_thread_poll(t);
    struct member m = {.mode = mode, .age = h->age};
    side_of(h, &m.s);
    struct side *s = &m.s;
    enum tk_class cls = mode == LOCK_EXCLUSIVE ? TK_X : TK_S;
    struct tk_req r;
    h->aux = h->aux2 = 0;
    h->rd_ok = false;
    tk_req_of(h, s, cls, &r);
    uint64_t add_t = 1ull << tk_dslr4.m_sh[cls], raise = CW_ACTO + cw_mode(mode);
    uint64_t other = 0, turn = 0, rt = 0, oage = 0, mage = 0; /* mage: our cohort's age word */
    int rc = 0;
    if (m.age) {
        uint64_t w[LOCK_LINE / 8];
        if (s->remote) {
            if ((rc = fab_read(t->c, s->line, w, sizeof w))) return rc;
        } else {
            for (unsigned i = 0; i < LOCK_LINE / 8; i++)
                w[i] = __atomic_load_n(&s->lp[i], __ATOMIC_SEQ_CST);
        }
        if (age_dies_early(&m, &r, w) && !dead_line(t, &m, &r, w)) {
            t->stats.dies++;
            return RDKV_EABORTED;
        }
        if (m.died) { /* the line is a dead member's: wait as a timeout request (dead_line) */
            m.age = 0;
            m.died = false;
            m.grace_end = 0;
        }
    }
    if (!s->remote && deadline && deadline - clock_now_ns() <= TRY_ONLY_NS) {
        /* One try (no-wait): a local ticket that would not be granted at once is not taken. A
         * taken one would be given up and stay in the queue until its turn (tk_abandon), and
         * every later request of the cohort -- each also trying once -- would queue behind it
         * and give up too. (A ticket taken in between is still given up the usual way.) */
        struct tk_req q = r; /* the ticket we would take: the word as it is now */
        if ((rc = q.ops->read(t, q.word, &q.prev))) return rc;
        if (!tk_granted(&q, q.prev)) {
            t->stats.timeouts++;
            return RDKV_ETIMEDOUT;
        }
    }
    bool ticketed = false, granted = false; /* we hold an outstanding ticket; it is our turn */
    bool chain_granted = false, rd = false; /* ... as the fast path's chain showed; its READ */
    if (tk_reclaim(t, &r)) {
        /* a ticket this thread gave up here earlier, still waiting for its turn: wait on it
         * again (no chain: not raised, nothing read) instead of queueing another behind it */
        ticketed = true;
        if (m.age) {
            if (!s->remote) mage = __atomic_load_n(&s->lp[RW_LAGE / 8], __ATOMIC_SEQ_CST);
            else if ((rc = fab_read(t->c, rptr_add(s->line, RW_RAGE), &mage, 8))) {
                tk_abandon(t, &r); /* (still given up: the poll passes it on) */
                return rc;
            }
        }
    } else if (s->remote) {
        /* The fast path: ticket, optimistic raise and a look at the line, as one chain -- and
         * the caller's READ (h->rd_len), which executes after the look: when the look shows the
         * lock ours, no conflicting member was inside then or can enter before our release, so
         * those bytes are what the lock protects (docs/locks.md, "Reading with the lock"). */
        uint64_t snap[LOCK_LINE / 8], asz = 0;
        /* (a READ past the arena would fail the chain after its atomics: not in the chain) */
        rd = h->rd_len && !fab_peer_arena_size(t->c, rptr_node(h->rd_at), &asz) &&
                  rptr_off(h->rd_at) <= asz && h->rd_len <= asz - rptr_off(h->rd_at);
        struct fab_op ops[4] = {fab_op_faa(s->T, add_t), fab_op_faa(s->C, raise),
                                fab_op_read(s->line, snap, m.age ? sizeof snap : 40),
                                fab_op_read(h->rd_at, h->rd_buf, h->rd_len)};
        int64_t t0 = clock_now_ns();
        if ((rc = fab_exec(t->c, ops, rd ? 4 : 3))) return rc;
        uint64_t prev = ops[0].result;
        m.raised = true;
        m.touched = m.alive_at = t0;
        if (tk_pending_reset(&tk_dslr4, prev)) {
            /* a COUNT_MAX reset is pending: give both back, then the slow way */
            if (stalled(t, &m)) return RDKV_EABORTED;
            /* (mark first, ticket after: a mark never outlives its ticket -- rule 6) */
            struct fab_op undo[2] = {fab_op_faa(s->C, CW_ACTO - cw_mode(mode)),
                                     fab_op_faa(s->T, (uint64_t)0 - add_t)};
            if ((rc = fab_exec(t->c, undo, 2))) return rc;
            m.raised = false;
            rc = tk_take(t, &r, deadline);
            ticketed = rc == 0;
        } else {
            tk_took(t, &r, prev, t0);
            ticketed = true;
            if (m.age) {
                mage = snap[RW_RAGE / 8];
                oage = snap[RW_LAGE / 8];
            }
            if ((granted = chain_granted = tk_granted(&r, prev))) {
                other = snap[RW_LC / 8];
                turn = snap[RW_TURN / 8];
            } else {
                rc = lower(t, &m, false, false); /* not our turn yet (no refresh: not granted) */
            }
        }
    } else {
        rc = tk_take(t, &r, deadline);
        ticketed = rc == 0;
        if (m.age) mage = __atomic_load_n(&s->lp[RW_LAGE / 8], __ATOMIC_SEQ_CST);
    }
    if (!rc && ticketed && m.age) {
        /* Wait-die, in our cohort: with tickets ahead, wait only if older than all of them.
         * Admitted (granted, or waiting), publish our age for those who come after us. */
        bool ahead = !tk_granted(&r, r.prev), x_ahead = x_out(r.prev);
        if (ahead && age_older(mage, m.age)) age_meet(&m, x_ahead, clock_now_ns());
        if (!m.died) {
            rc = age_publish(t, &m, mage, tk_x_current(&tk_dslr4, r.prev, r.prev), &mage);
            m.published = rc ? 0 : mage;
            /* an older one published in between (ahead of us, or behind: we cannot tell) */
            if (!rc && ahead && age_older(mage, m.age)) age_meet(&m, x_ahead, clock_now_ns());
        }
    }
    if (!rc && !m.raised) {
        /* (a wait-die request that must die gives its ticket up as at its deadline) */
        if (!tk_granted(&r, r.prev)) rc = tk_wait(t, &r, age_deadline(&m, deadline));
        if (rc == RDKV_ETIMEDOUT) tk_abandon(t, &r);
        if (rc) ticketed = false; /* given up (handed to the poll), or taken by a reset */
        if (!rc) {
            granted = true;
            /* granted in our cohort, shown no earlier than r.since: raise, with a refresh --
             * unless that was more than a lease ago (cross_add abandons then: the ticket may have
             * been reset past already, and is left to the waiters) */
            m.touched = m.alive_at = r.since;
            rc = cross_add(t, &m, raise + (s->remote ? CW_ACTR : 0), true);
            if (!rc) {
                m.raised = true;
                rc = look(t, &m, &other, &turn, &rt, &oage);
            }
        }
    }
    if (!rc) {
        bool at_once;
        rc = cross(t, &m, other, turn, rt, oage, age_deadline(&m, deadline), &at_once);
        /* the chain's READ counts only if the chain's own look let us in (granted in our cohort
         * by its ticket, the other cohort clear, the evidence fresh) */
        h->rd_ok = !rc && chain_granted && at_once && rd;
        /* Granted in our cohort, given up at the deadline: pass the ticket on. With a FA only
         * while our clocks are good -- the lowering's reply may have come late, and a ticket
         * waiter may have reset the word past our ticket meanwhile -- else with a CAS (rule 7). */
        if (rc == RDKV_ETIMEDOUT) {
            if (stalled(t, &m)) tk_pass_on(t, &r);
            else tk_release(t, &r);
        }
    }
    if (rc == RDKV_ETIMEDOUT) t->stats.timeouts++;
    if (rc == RDKV_EABORTED) {
        t->stats.aborts++;
        if (s->remote && ticketed && stalled(t, &m)) {
            /* abandoned on stale evidence: a ticket of ours that is still current is passed on
             * with a CAS (a reset that took it is left alone) -- now if it is our turn, else
             * by the poll when it comes; our marks, if any are left, are orphans for rule 6 */
            t->stats.stale_grants++;
            if (granted) tk_pass_on(t, &r);
            else tk_abandon(t, &r);
        }
    }
    if (rc == RDKV_ETIMEDOUT && m.grace_end && (!deadline || m.grace_end < deadline))
        m.died = true; /* (the grace ran out, not the deadline) */
    if (rc == RDKV_ETIMEDOUT && m.died) {
        /* wait-die: gave up for an older request, not at the deadline */
        t->stats.timeouts--;
        t->stats.dies++;
        rc = RDKV_EABORTED;
    }
    if (rc) return rc;
    h->mode = (uint8_t)mode;
    h->desc = (uint8_t)(cls | (m.marked ? DESC_MARKED : 0));
    h->aux = r.prev;
    h->aux2 = r.reset_from;
    h->age_word = m.published;
    /* the lease runs from the older of our two clocks: before the evidence, never after it */
    h->granted_at = s->remote ? fresh_since(&m) : clock_now_ns();
    h->lease_ns = s->remote ? t->cfg.lease_ns : 0;
    return 0;
}

/* TURN's values, as the sources of a chain's WRITE (they must outlive the post). */
static const uint64_t turn_value[2] = {TURN_LOCAL, TURN_REMOTE};

/* lock_algo.release_post: a local holder's whole release, or a remote one's up to its chain. */
static int rw_release_post(struct lock_handle *h, struct fab_op *ops, unsigned *nops)
{
    *nops = 0;
    if (!h->mode) return RDKV_EINVAL;
    struct lock_thread *t = h->t;
    enum lock_mode mode = (enum lock_mode)h->mode;
    enum tk_class cls = (enum tk_class)(h->desc & ~DESC_MARKED);
    bool marked = h->desc & DESC_MARKED;
    h->mode = 0;
    struct side s;
    side_of(h, &s);
    struct tk_req r;
    tk_req_of(h, &s, cls, &r);
    /* The ticket index that ends a budget hands priority to the other cohort -- unless another
     * member of ours backed off and still waits for its turn (it would starve if we kept closing
     * the windows it waits for); then the priority stays, and a later release hands it over. */
    int64_t budget = s.remote ? t->cfg.rwlock_remote_budget : t->cfg.rwlock_local_budget;
    uint64_t index = tk_get(&tk_dslr4, r.prev, tk_dslr4.m_sh[TK_X]) +
                     tk_get(&tk_dslr4, r.prev, tk_dslr4.m_sh[TK_S]);
    bool boundary = budget <= 1 || index % (uint64_t)budget == (uint64_t)budget - 1;
    uint64_t other_prio = s.remote ? TURN_LOCAL : TURN_REMOTE;
    uint64_t lower_add = CW_ACTO - cw_mode(mode) - (marked ? CW_W : 0);
    uint64_t served = 1ull << tk_dslr4.n_sh[cls];
    /* Wait-die: an exclusive holder whose publication is still its cohort's age word, with its
     * own age the floor, clears it: nobody is ahead of it, and whoever was admitted behind it
     * published since (docs/locks.md, "Wait-die"). A shared holder cannot: shared holders
     * granted before it may stay. */
    bool clear_age = h->age && mode == LOCK_EXCLUSIVE && h->age_word &&
                     age_floor(h->age_word) == h->age;
    uint64_t cleared = (h->age_word + 1) & ((1u << AGE_VER) - 1);
    if (s.remote) {
        bool yield = false;
        if (boundary) {
            uint64_t c;
            int rc = fab_read(t->c, s.C, &c, 8);
            if (rc) return rc;
            yield = cw_w(c) == (marked ? 1u : 0u);
        }
        if (clock_now_ns() - h->granted_at >= h->lease_ns) {
            /* Past the lease: waiters may have reset our marks and tickets already, and our FAAs
             * would take someone else's (also when our ticket crossed COUNT_MAX). The ticket is
             * passed on with a CAS, which serves it only if it is still ours; the marks stay,
             * orphaned, for rule 6 to clear once the cohort has no ticket out. */
            t->stats.lease_expired++;
            tk_pass_on(t, &r);
            return RDKV_ETIMEDOUT;
        }
        unsigned n = 0;
        if (yield) ops[n++] = fab_op_write(rptr_add(s.line, RW_TURN), &turn_value[other_prio], 8);
        ops[n++] = fab_op_faa(s.C, lower_add);
        if (clear_age) ops[n++] = fab_op_cas(rptr_add(s.line, RW_RAGE), h->age_word, cleared);
        ops[n++] = fab_op_faa(s.T, served);
        *nops = n; /* rw_release_done finishes */
        return 0;
    } else {
        if (boundary &&
            cw_w(__atomic_load_n(&s.lp[RW_LC / 8], __ATOMIC_SEQ_CST)) == (marked ? 1u : 0u))
            __atomic_store_n(&s.lp[RW_TURN / 8], other_prio, __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&s.lp[RW_LC / 8], lower_add, __ATOMIC_SEQ_CST);
        uint64_t mine = h->age_word;
        if (clear_age)
            __atomic_compare_exchange_n(&s.lp[RW_LAGE / 8], &mine, cleared, false,
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&s.lp[RW_LT / 8], served, __ATOMIC_SEQ_CST);
        tk_wake(t, &r);
    }
    return tk_overflow_reset(t, &r);
}

/* lock_algo.release_done: a remote holder's release after its chain completed with status st. */
static int rw_release_done(struct lock_handle *h, int st)
{
    if (st) return st;
    struct side s;
    side_of(h, &s);
    struct tk_req r;
    tk_req_of(h, &s, (enum tk_class)(h->desc & ~DESC_MARKED), &r);
    return tk_overflow_reset(h->t, &r);
}

static int rw_release(struct lock_handle *h)
{
    struct fab_op ops[LOCK_RELEASE_OPS];
    unsigned n;
    int rc = rw_release_post(h, ops, &n);
    if (rc || !n) return rc;
    return rw_release_done(h, fab_exec(h->t->c, ops, n));
}

/* A remote holder shows it lives with one refresh of its cross word (actR): the judges of both
 * rules restart their clocks on it, so the lease runs from its posting. */
static int rw_refresh(struct lock_handle *h)
{
    struct lock_thread *t = h->t;
    int64_t t0 = clock_now_ns();
    if (t0 - h->granted_at >= h->lease_ns) return RDKV_ETIMEDOUT; /* recovered, maybe */
    int rc = fab_faa(t->c, rptr_add(h->line, RW_RC), CW_ACTR, NULL);
    if (!rc) h->granted_at = t0;
    return rc;
}

/* The owner's check: the holder's cohort's ticket word still serves its X ticket (a rule-3
 * reset moves it on), and its cross word counts a raised X mark (a rule-4 clearing empties it,
 * with every older mark). The marks carry no names: during a newcomer's optimistic raise -- one
 * round trip, and newcomers are only X tickets after ours -- the count would pass for ours even
 * if ours had been cleared; docs/transactions.md says what that window is worth. */
static int rw_holds_x(struct fabric *f, rptr line, uint16_t holder, uint64_t token)
{
    uint64_t *lp = fab_local(f, line);
    bool remote = holder != fab_node_id(f);
    uint64_t T = __atomic_load_n(&lp[(remote ? RW_RT : RW_LT) / 8], __ATOMIC_SEQ_CST);
    uint64_t C = __atomic_load_n(&lp[(remote ? RW_RC : RW_LC) / 8], __ATOMIC_SEQ_CST);
    return tk_x_current(&tk_dslr4, T, token) && cw_x(C) >= 1;
}

/* Reading without the lock: RT, RC, LT and LC the same in both READs, and no exclusive member
 * raised in either cohort. A writer raises X in its cohort's cross word before it writes and
 * lowers it after, and every raise or lower bumps that word's actO (and every request the ticket
 * word's counts), so equal words mean none of that happened in between; an ABA would need
 * 65,536 requests on the row between two READs of one chain. */
static bool rw_quiet(const void *before, const void *after)
{
    uint64_t a[4];
    memcpy(a, before, sizeof a);
    return !memcmp(before, after, sizeof a) && cw_x(a[RW_RC / 8]) == 0 &&
           cw_x(a[RW_LC / 8]) == 0;
}

/* The owner keeping a remote holder's X hold alive: one refresh of RC (actR), as the holder's
 * rw_refresh would post, through this node's NIC (RC is a NIC word: a loopback FAA, like rules
 * 4's and 6's CAS). A local holder lives in this process and has no lease. */
static int rw_keep_x(struct lock_thread *t, rptr line, uint16_t holder, uint64_t token)
{
    if (!rw_holds_x(t->f, line, holder, token)) return RDKV_ETIMEDOUT;
    if (holder == t->node) return 0;
    return fab_faa(t->c, rptr_add(line, RW_RC), CW_ACTR, NULL);
}

/* ... and releasing it as the holder's rw_release would (R2, R3: lower the X mark, serve the X
 * ticket with a CAS, through this node's NIC; then the COUNT_MAX reset if the ticket crossed).
 * Safe only while the hold is ours to release: it is still there (no judge took it -- the keeps
 * keep rules 3 and 4 off it, and rule 6 leaves an X mark alone while its X ticket is out) and
 * its holder will never touch it again (the caller's word). R1's hand-over of TURN and wait-die's
 * age floor are left as they are: TURN only breaks ties, and a stale floor only costs deaths. */
static int rw_release_x(struct lock_thread *t, rptr line, uint16_t holder, uint64_t token)
{
    if (holder == t->node) return RDKV_EINVAL; /* (a local holder releases its own) */
    if (!rw_holds_x(t->f, line, holder, token)) return RDKV_ETIMEDOUT;
    struct tk_req r = {.lay = &tk_dslr4,
                       .ops = &tk_nic,
                       .word = rptr_add(line, RW_RT),
                       .cls = TK_X,
                       .waits = (uint8_t)tk_waits_for(&tk_dslr4, TK_X),
                       .k = 1,
                       .max_k = 1,
                       .allow_reset = true,
                       .alive_mask = CW_REFRESHES};
    tk_took(t, &r, token, clock_now_ns());
    int rc = fab_faa(t->c, rptr_add(line, RW_RC), CW_ACTO - CW_X, NULL);
    /* The ticket is served with a CAS from a value that shows it still ours (tk_pass_on), never
     * with a blind FAA: a keeper that the machine stalled past two leases between its check and
     * here may find a rule-3 reset has served it already, and a second serve would count a
     * ticket nobody holds -- served past next, and the row wedged for good. */
    return rc ? rc : tk_pass_on(t, &r);
}

const struct lock_algo lock_rwlock = {
    .id = LOCK_ID_RWLOCK,
    .name = "rwlock",
    .recovers = true,
    .modes = 1u << LOCK_SHARED | 1u << LOCK_EXCLUSIVE,
    .acquire = rw_acquire,
    .release = rw_release,
    .release_post = rw_release_post,
    .release_done = rw_release_done,
    .refresh = rw_refresh,
    .holds_x = rw_holds_x,
    .keep_x = rw_keep_x,
    .release_x = rw_release_x,
    .movable = true,
    .wait_die = true,
    .read_in_chain = true,
    .peek = 32,
    .quiet = rw_quiet,
};
