/* Leases under delays: each test drives one scenario in which a lock's lease recovery meets a
 * reply delivered late, deterministically, and checks that the lock never has two conflicting
 * holders. A *gate* on a thread's fabric context holds one chosen reply (fab_ctx_set_reply_hook:
 * the operations have taken effect at the target, the thread just does not learn of it) until
 * the test has driven everyone else to the state the scenario needs; every wait is for an event,
 * bounded in time. The scenarios are the ones a review found with spin (docs/locks.md, "Leases
 * under delays"):
 *   rwlock_rule4      a remote writer's fast-path READ saw the local cohort empty and is then
 *                     delayed; a local writer clears its stale mark (rule 4) and enters
 *   rwlock_rule3      a remote writer's READ showed its ticket granted and is then delayed; a
 *                     remote reader behind it resets the ticket word (rule 3) and enters
 *   dslr_read_grant   the same for DSLR: the delayed READ showed the grant
 *   dslr_faa_grant    DSLR: the ticket FA's own result granted it, and its reply is delayed
 *   *_late_release    a holder past its lease whose ticket crossed COUNT_MAX still released
 *                     (the old `reset_from` exception), after the word had been reset
 * In each, the delayed thread must not enter (or release) on what it saw before the delay.
 *   rwlock_deadline_release  a remote reader waiting for the local cohort gives up at its
 *                     deadline; the reply to its lowering is delayed, a writer behind it resets
 *                     its ticket; the reader's pass-on must not serve a ticket twice (found by
 *                     the lease model, tests/models/rwlock.pml -DUNCHECKED_PASS_ON)
 *   rwlock_orphan_mark  and the other way round, liveness: a remote holder past its lease leaves
 *                     its ticket (reset by a remote waiter) and its raised mark; a local writer
 *                     whose wait is shorter than rule 4's two quiet leases must still get in,
 *                     by rule 6 (the remote cohort holds no ticket: every mark is an orphan). */
#include "tests/harness.h"
#include "tests/testenv.h"

#include "common/clock.h"
#include "locks/lock.h"

#include <pthread.h>
#include <stdatomic.h>

/* The lease: short, so the scenarios run fast; ten times that where the run is slow (tenv_slow:
 * the emulated verbs guest, a sanitizer build), where the test's own holds would outlast 20 ms
 * (a TSan run beside other tests failed rule 3's scenario so: the test's hold was recovered by
 * its waiter before the reply it meant to delay). (Nothing here depends on how long anything
 * takes -- every wait is for an event -- but a hold that outlives its lease is recovered by the
 * waiters, which is not the scenario.) */
#define LEASE (tenv_slow() ? 200 * NS_PER_MS : 20 * NS_PER_MS)
#define WAIT_NS (20 * NS_PER_S) /* the most any event of a scenario may take */

/* ------------------------------------------------------------------------------------------ */
/* The gate: holds the first reply that `match` accepts, once armed, until opened. */

struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool armed, held, open;
    /* which reply to hold */
    uint8_t opcode;   /* of the chain's last op */
    unsigned nops;    /* chain length */
    rptr target;      /* of the chain's last op */
    bool check_nx;    /* READ: hold it only if the word's n_X (bits 63..48) equals nx */
    uint64_t nx;
    bool check_add;   /* FAA: hold it only if its addend is `add` */
    uint64_t add;
};

static void gate_init(struct gate *g, uint8_t opcode, unsigned nops, rptr target)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->opcode = opcode;
    g->nops = nops;
    g->target = target;
}

static void gate_fini(struct gate *g)
{
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
}

static void gate_hook(void *arg, const struct fab_op *ops, unsigned n, int status)
{
    struct gate *g = arg;
    const struct fab_op *o = &ops[n - 1];
    pthread_mutex_lock(&g->mu);
    bool match = g->armed && status == 0 && n == g->nops && o->opcode == g->opcode &&
                 o->remote == g->target;
    if (match && g->check_nx) match = (*(const uint64_t *)o->local >> 48) == g->nx;
    if (match && g->check_add) match = o->arg == g->add;
    if (match) {
        g->armed = false;
        g->held = true;
        pthread_cond_broadcast(&g->cv);
        while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
    }
    pthread_mutex_unlock(&g->mu);
}

static void gate_arm(struct gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->armed = true;
    pthread_mutex_unlock(&g->mu);
}

/* Waits (at most WAIT_NS) until *flag, which mu guards and cv signals, is set. */
static bool wait_flag(pthread_mutex_t *mu, pthread_cond_t *cv, const bool *flag)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += WAIT_NS / NS_PER_S;
    pthread_mutex_lock(mu);
    int rc = 0;
    while (!*flag && rc == 0) rc = pthread_cond_timedwait(cv, mu, &until);
    bool set = *flag;
    pthread_mutex_unlock(mu);
    return set;
}

/* Waits (bounded) until the gate holds a reply. */
static bool gate_wait_held(struct gate *g) { return wait_flag(&g->mu, &g->cv, &g->held); }

static void gate_open(struct gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* ------------------------------------------------------------------------------------------ */
/* A lock client on its own thread: acquires when told, reports, releases when told. */

struct client {
    struct tenv *e;
    unsigned node;
    const struct lock_algo *algo;
    rptr line;
    enum lock_mode mode;
    struct gate *gate; /* NULL: none */
    int64_t deadline_ns; /* how long its acquire may wait (0: WAIT_NS) */
    pthread_t thr;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;         /* its acquire returned */
    int rc;            /* what it returned */
    bool release;      /* told to release */
    int release_rc;
    bool finished;
    struct lock_stats stats;
};

static void *client_main(void *arg)
{
    struct client *k = arg;
    struct fab_ctx *c = NULL;
    struct lock_thread t;
    struct lock_cfg cfg;
    lock_cfg_init(&cfg);
    cfg.lease_ns = LEASE;
    int rc = fab_ctx_create(k->e->f[k->node], &c);
    if (!rc && (rc = lock_thread_init(&t, c, &cfg))) {
        fab_ctx_destroy(c);
        c = NULL;
    }
    struct lock_handle h;
    if (!rc) {
        if (k->gate) fab_ctx_set_reply_hook(c, gate_hook, k->gate);
        lock_handle_init(&h, &t, k->algo, k->line);
        rc = lock_acquire(&h, k->mode, clock_now_ns() + (k->deadline_ns ? k->deadline_ns : WAIT_NS));
        if (k->gate) fab_ctx_set_reply_hook(c, NULL, NULL);
    }
    pthread_mutex_lock(&k->mu);
    k->rc = rc;
    k->done = true;
    pthread_cond_broadcast(&k->cv);
    while (!k->release) pthread_cond_wait(&k->cv, &k->mu);
    pthread_mutex_unlock(&k->mu);
    int rrc = rc == 0 ? lock_release(&h) : 0;
    if (c) {
        k->stats = t.stats;
        lock_thread_fini(&t);
        fab_ctx_destroy(c);
    }
    pthread_mutex_lock(&k->mu);
    k->release_rc = rrc;
    k->finished = true;
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
    return NULL;
}

/* wait_ns: how long its acquire may wait (0: WAIT_NS) */
static void client_start(struct client *k, struct tenv *e, unsigned node,
                         const struct lock_algo *algo, rptr line, enum lock_mode mode,
                         struct gate *g, int64_t wait_ns)
{
    memset(k, 0, sizeof *k);
    k->deadline_ns = wait_ns;
    k->e = e;
    k->node = node;
    k->algo = algo;
    k->line = line;
    k->mode = mode;
    k->gate = g;
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->cv, NULL);
    pthread_create(&k->thr, NULL, client_main, k);
}

/* Waits (bounded) until the client's acquire returned; false if it did not in time. */
static bool client_wait(struct client *k) { return wait_flag(&k->mu, &k->cv, &k->done); }

/* Tells the client to release (if it holds), joins it. */
static void client_end(struct client *k)
{
    pthread_mutex_lock(&k->mu);
    k->release = true;
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
    pthread_join(k->thr, NULL);
    pthread_mutex_destroy(&k->mu);
    pthread_cond_destroy(&k->cv);
}

/* ------------------------------------------------------------------------------------------ */

struct scene {
    struct tenv e;
    struct fab_ctx *c; /* the test thread's own, on node 1 */
    struct lock_thread t;
    struct locktable lt;
};

static int scene_start(struct scene *s)
{
    if (tenv_start(&s->e, 2, 16u << 20, NULL)) return -1;
    locktable_reset(s->e.f[0], 2);
    locktable_reset(s->e.f[1], 2);
    struct lock_cfg cfg;
    lock_cfg_init(&cfg);
    cfg.lease_ns = LEASE;
    if (fab_ctx_create(s->e.f[1], &s->c)) return -1;
    if (lock_thread_init(&s->t, s->c, &cfg)) return -1;
    return locktable_open(&s->lt, s->c, 2);
}

static void scene_stop(struct scene *s)
{
    lock_thread_fini(&s->t);
    fab_ctx_destroy(s->c);
    tenv_stop(&s->e);
}

/* The word at `w` of node 0's arena, as a CPU load (the test shares the process). */
static uint64_t word(struct scene *s, rptr w)
{
    return __atomic_load_n((uint64_t *)fab_local(s->e.f[0], w), __ATOMIC_SEQ_CST);
}

/* Waits (bounded) until the word at w satisfies pred. */
static bool wait_word(struct scene *s, rptr w, bool (*pred)(uint64_t))
{
    int64_t until = clock_now_ns() + WAIT_NS;
    for (unsigned round = 0; clock_now_ns() < until; round++) {
        if (pred(word(s, w))) return true;
        lock_backoff(round < 12 ? round : 12);
    }
    return false;
}

static uint64_t nx_of(uint64_t v) { return v >> 48; }
static uint64_t mx_of(uint64_t v) { return (v >> 16) & 0xFFFF; }
/* two exclusive tickets outstanding: a holder and a waiter behind it */
static bool two_x_tickets(uint64_t v) { return mx_of(v) == nx_of(v) + 2; }
/* rwlock RC: exactly one member raised exclusively (the holder; the waiter lowered again) */
static bool one_x_raised(uint64_t v) { return ((v >> 14) & 0x1FFF) == 1 && (v & 0x3FFF) == 0; }

/* The end every delay scenario shares: `other` was started while `delayed`'s reply was held
 * by g, and must have got in (by a lease recovery of what `delayed` left); then the held reply
 * is delivered, and `delayed` must not enter beside `other`. */
static void deliver_late(struct gate *g, struct client *delayed, struct client *other,
                         const char *what)
{
    CHECK(client_wait(other));
    CHECK_EQ(other->rc, 0); /* it got in ... */
    gate_open(g);
    CHECK(client_wait(delayed));
    CHECK(!(other->rc == 0 && delayed->rc == 0)); /* ... so the delayed one must not */
    CHECK_EQ(delayed->rc, RDKV_EABORTED);
    client_end(delayed);
    client_end(other);
    fprintf(stderr, "  %s: %s (%" PRIu64 " resets); the delayed one: %s\n", what,
            rdkv_strerror(other->rc), other->stats.resets, rdkv_strerror(delayed->rc));
    gate_fini(g);
}

/* Rule 4: remote writer R's fast-path chain {FAA RT; FAA RC raise; READ line} executes and shows
 * the local cohort empty; its reply is held. A local writer L raises, sees R's mark, and after
 * two quiet leases clears it (rule 4) and enters. R's reply is then delivered: R must not enter
 * on its old snapshot. */
static void t_rwlock_rule4(void)
{
    static struct scene s;
    REQUIRE(scene_start(&s) == 0);
    rptr line = locktable_line(&s.lt, 0, 0);
    struct gate g;
    gate_init(&g, FAB_OP_READ, 3, line);
    gate_arm(&g);
    struct client r, l;
    client_start(&r, &s.e, 1, &lock_rwlock, line, LOCK_EXCLUSIVE, &g, 0);
    CHECK(gate_wait_held(&g));
    client_start(&l, &s.e, 0, &lock_rwlock, line, LOCK_EXCLUSIVE, NULL, 0);
    deliver_late(&g, &r, &l, "local writer");
    scene_stop(&s);
}

/* Rule 3 (rwlock) and DSLR's reset: the test thread holds X from node 1; writer W queues behind
 * it and polls; the test releases, and W's READ that shows its turn is held. A reader queues
 * behind W (remote to the row: rwlock's rule 3 is the remote ticket waiters'); W's ticket stands
 * still for two leases, so the reader resets the word past it and enters. W's reply is then
 * delivered: W must not enter. */
static void stale_read_grant(const struct lock_algo *algo)
{
    static struct scene s;
    REQUIRE(scene_start(&s) == 0);
    rptr line = locktable_line(&s.lt, 0, 0);
    struct lock_handle h;
    lock_handle_init(&h, &s.t, algo, line);
    REQUIRE(lock_acquire(&h, LOCK_EXCLUSIVE, 0) == 0);
    struct gate g;
    gate_init(&g, FAB_OP_READ, 1, line);
    struct client w, rd;
    client_start(&w, &s.e, 1, algo, line, LOCK_EXCLUSIVE, &g, 0);
    CHECK(wait_word(&s, line, two_x_tickets));
    if (algo == &lock_rwlock) CHECK(wait_word(&s, rptr_add(line, 8), one_x_raised));
    g.check_nx = true;
    g.nx = nx_of(word(&s, line)) + 1; /* the READ that shows our release */
    gate_arm(&g);
    int rrc = lock_release(&h); /* (past its lease it passes the ticket on all the same) */
    CHECK(rrc == 0 || rrc == RDKV_ETIMEDOUT);
    CHECK(gate_wait_held(&g));
    client_start(&rd, &s.e, 1, algo, line, LOCK_SHARED, NULL, 0);
    deliver_late(&g, &w, &rd, "reader");
    scene_stop(&s);
}

static void t_rwlock_rule3(void) { stale_read_grant(&lock_rwlock); }
static void t_dslr_read_grant(void) { stale_read_grant(&lock_dslr); }

/* DSLR: writer W's ticket FA finds the word free (granted by its own result); the reply is held.
 * A reader queues behind W, resets the word after two still leases and enters. W must not. */
static void t_dslr_faa_grant(void)
{
    static struct scene s;
    REQUIRE(scene_start(&s) == 0);
    rptr line = locktable_line(&s.lt, 0, 0);
    struct gate g;
    gate_init(&g, FAB_OP_FAA, 1, line);
    gate_arm(&g);
    struct client w, rd;
    client_start(&w, &s.e, 1, &lock_dslr, line, LOCK_EXCLUSIVE, &g, 0);
    CHECK(gate_wait_held(&g));
    client_start(&rd, &s.e, 0, &lock_dslr, line, LOCK_SHARED, NULL, 0);
    deliver_late(&g, &w, &rd, "reader");
    scene_stop(&s);
}

/* A holder past its lease must never run its release on counts someone may have reset -- not
 * even the holder whose ticket crossed COUNT_MAX and owes the reset to 0. The ticket word starts
 * one ticket below COUNT_MAX; H (the test thread, remote) takes it and holds. A newcomer finds
 * the reset pending, waits two still leases, resets the word to 0 and gives up. A writer A then
 * gets the lock from the fresh word and holds it. H, far past its lease, releases: its FAs must
 * not happen, or they count A's ticket as served and a second writer B gets in beside A. */
static void late_release(const struct lock_algo *algo)
{
    static struct scene s;
    REQUIRE(scene_start(&s) == 0);
    rptr line = locktable_line(&s.lt, 0, 0);
    uint64_t below = 32767ull << 48 | 32767ull << 16; /* n_X = m_X = COUNT_MAX - 1 */
    __atomic_store_n((uint64_t *)fab_local(s.e.f[0], line), below, __ATOMIC_SEQ_CST);
    struct lock_handle h;
    lock_handle_init(&h, &s.t, algo, line);
    REQUIRE(lock_acquire(&h, LOCK_EXCLUSIVE, 0) == 0);
    struct client n, a;
    client_start(&n, &s.e, 1, algo, line, LOCK_EXCLUSIVE, NULL, 0);
    CHECK(client_wait(&n));
    CHECK_EQ(n.rc, RDKV_EABORTED); /* the newcomer's stuck reset: the word is 0 again */
    client_end(&n);
    client_start(&a, &s.e, 1, algo, line, LOCK_EXCLUSIVE, NULL, 0);
    CHECK(client_wait(&a));
    CHECK_EQ(a.rc, 0);
    int hrc = lock_release(&h); /* H, long past its lease */
    /* B may wait for A only briefly: A holds (and may be reset only two leases from now) */
    struct lock_thread *t = &s.t;
    struct lock_handle hb;
    lock_handle_init(&hb, t, algo, line);
    int brc = lock_acquire(&hb, LOCK_EXCLUSIVE, clock_now_ns() + LEASE / 2);
    fprintf(stderr, "  late holder's release: %s; A: %s; B beside A: %s\n", rdkv_strerror(hrc),
            rdkv_strerror(a.rc), rdkv_strerror(brc));
    CHECK_EQ(hrc, RDKV_ETIMEDOUT);
    CHECK(!(a.rc == 0 && brc == 0));
    if (brc == 0) lock_release(&hb);
    client_end(&a);
    scene_stop(&s);
}

/* See the header. L (local) holds X. Reader W (remote) is granted in the remote cohort, sees L,
 * backs off and waits; at its deadline it lowers and unmarks, and the reply to that FAA is held.
 * Writer RD queues behind W's ticket; W is silent, so after two leases RD resets the ticket word
 * past W's ticket and its own (an exclusive reset: RD fails). W's reply is then delivered: it
 * must not serve its S ticket with a FA (the word would count one reader too many served). L
 * leaves; reader R4 takes the next S ticket and enters; a writer X5 must then wait for R4 -- a
 * miscounted word would grant it at once, beside R4. */
static void t_rwlock_deadline_release(void)
{
    static struct scene s;
    REQUIRE(scene_start(&s) == 0);
    rptr line = locktable_line(&s.lt, 0, 0);
    struct client l, w, rd, r4;
    client_start(&l, &s.e, 0, &lock_rwlock, line, LOCK_EXCLUSIVE, NULL, 0);
    CHECK(client_wait(&l));
    CHECK_EQ(l.rc, 0);
    struct gate g;
    gate_init(&g, FAB_OP_FAA, 1, rptr_add(line, 8));
    /* W's lowering at its deadline, backed off and marked: +actO +actW -eW (rwlock.c's layout) */
    g.check_add = true;
    g.add = (1ull << 56) + (1ull << 40) - (1ull << 27);
    gate_arm(&g);
    client_start(&w, &s.e, 1, &lock_rwlock, line, LOCK_SHARED, &g, 2 * LEASE);
    CHECK(gate_wait_held(&g));
    client_start(&rd, &s.e, 1, &lock_rwlock, line, LOCK_EXCLUSIVE, NULL, 0);
    CHECK(client_wait(&rd));
    CHECK_EQ(rd.rc, RDKV_EABORTED); /* its exclusive reset consumed its own ticket */
    client_end(&rd);
    gate_open(&g);
    CHECK(client_wait(&w));
    CHECK_EQ(w.rc, RDKV_ETIMEDOUT);
    client_end(&w);
    gate_fini(&g);
    client_end(&l); /* L leaves */
    client_start(&r4, &s.e, 1, &lock_rwlock, line, LOCK_SHARED, NULL, 0);
    CHECK(client_wait(&r4));
    CHECK_EQ(r4.rc, 0);
    /* X5 may wait for R4 only briefly: R4 holds (and may be reset only two leases from now) */
    struct lock_handle hx;
    lock_handle_init(&hx, &s.t, &lock_rwlock, line);
    int xrc = lock_acquire(&hx, LOCK_EXCLUSIVE, clock_now_ns() + LEASE / 2);
    fprintf(stderr, "  delayed reader: %s; R4: %s; X5 beside R4: %s\n", rdkv_strerror(w.rc),
            rdkv_strerror(r4.rc), rdkv_strerror(xrc));
    CHECK(!(r4.rc == 0 && xrc == 0));
    if (xrc == 0) lock_release(&hx);
    client_end(&r4);
    scene_stop(&s);
}

/* See the header. The test thread (node 1) holds X and never releases; a remote reader W queues,
 * resets the ticket word after two still leases and gets the lock, then releases: RT is idle,
 * RC still counts the old holder's X mark. A local writer then gets in within one and a half
 * leases, which rule 4 alone (two quiet leases in one wait) could not give it. */
static void t_rwlock_orphan_mark(void)
{
    static struct scene s;
    REQUIRE(scene_start(&s) == 0);
    rptr line = locktable_line(&s.lt, 0, 0);
    struct lock_handle h;
    lock_handle_init(&h, &s.t, &lock_rwlock, line);
    REQUIRE(lock_acquire(&h, LOCK_EXCLUSIVE, 0) == 0); /* held, never released */
    struct client w, l;
    client_start(&w, &s.e, 1, &lock_rwlock, line, LOCK_SHARED, NULL, 0);
    CHECK(client_wait(&w));
    CHECK_EQ(w.rc, 0); /* by rule 3's reset (a reader's: granted by it) */
    client_end(&w);    /* released: no remote ticket outstanding now */
    CHECK(((word(&s, rptr_add(line, 8)) >> 14) & 0x1FFF) == 1); /* the orphaned X mark */
    client_start(&l, &s.e, 0, &lock_rwlock, line, LOCK_EXCLUSIVE, NULL, 3 * LEASE / 2);
    CHECK(client_wait(&l));
    client_end(&l);
    fprintf(stderr, "  remote waiter: %s (%" PRIu64 " resets); local writer: %s (%" PRIu64
            " resets)\n", rdkv_strerror(w.rc), w.stats.resets, rdkv_strerror(l.rc),
            l.stats.resets);
    CHECK_EQ(l.rc, 0);
    CHECK(((word(&s, rptr_add(line, 8)) >> 14) & 0x1FFF) == 0);
    h.mode = 0; /* (its lease long over: nothing to release) */
    scene_stop(&s);
}

static void t_dslr_late_release(void) { late_release(&lock_dslr); }
static void t_rwlock_late_release(void) { late_release(&lock_rwlock); }

static const struct test_case cases[] = {
    {"rwlock_rule4", t_rwlock_rule4},
    {"rwlock_rule3", t_rwlock_rule3},
    {"dslr_read_grant", t_dslr_read_grant},
    {"dslr_faa_grant", t_dslr_faa_grant},
    {"dslr_late_release", t_dslr_late_release},
    {"rwlock_late_release", t_rwlock_late_release},
    {"rwlock_deadline_release", t_rwlock_deadline_release},
    {"rwlock_orphan_mark", t_rwlock_orphan_mark},
};

int main(int argc, char **argv)
{
    return tenv_main(argc, argv, "leases under delays", cases, sizeof cases / sizeof cases[0]);
}
