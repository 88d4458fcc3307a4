/* Lock correctness under stress, with an in-critical-section checker: the holder does a
 * non-atomic read-modify-write of a counter next to the lock (plain loads/stores when the lock is
 * local, fabric READ/WRITE when remote) and stamps an owner word it checks before leaving. Every
 * algorithm must end with counter == acquisitions and no owner violation -- also when every NIC
 * atomic pauses between its load and its store. A deliberately naive lock (CPU CAS locally, NIC
 * CAS remotely, on one word) must be caught by the same checker: that shows the test can see the
 * hazard ALock exists for. Plus exact operation counts for ALock's fast paths. */
#include "tests/harness.h"
#include "tests/testenv.h"

#include "common/clock.h"
#include "locks/lock.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

static bool quick;

/* ------------------------------------------------------------------------------------------ */
/* The naive lock: exactly what ALock must not be. */

static int naive_acquire(struct lock_handle *h, enum lock_mode mode, int64_t deadline)
{
    (void)mode;
    (void)deadline;
    struct lock_thread *t = h->t;
    uint64_t *w = fab_local(t->f, h->line);
    for (unsigned r = 0;; r++) {
        if (w) {
            uint64_t expect = 0;
            if (__atomic_compare_exchange_n(w, &expect, t->id, false, __ATOMIC_SEQ_CST,
                                            __ATOMIC_SEQ_CST))
                break;
        } else {
            uint64_t old;
            int rc = fab_cas(t->c, h->line, 0, t->id, &old);
            if (rc) return rc;
            if (old == 0) break;
        }
        lock_backoff(r < 6 ? r : 6);
    }
    h->mode = LOCK_EXCLUSIVE;
    return 0;
}

static int naive_release(struct lock_handle *h)
{
    struct lock_thread *t = h->t;
    uint64_t *w = fab_local(t->f, h->line), zero = 0;
    h->mode = 0;
    if (w) {
        __atomic_store_n(w, 0, __ATOMIC_SEQ_CST);
        return 0;
    }
    return fab_write(t->c, h->line, &zero, 8);
}

static const struct lock_algo lock_naive = {
    .name = "naive", .modes = 1u << LOCK_EXCLUSIVE, .acquire = naive_acquire, .release = naive_release};

/* ------------------------------------------------------------------------------------------ */
/* The stress harness */

struct stress {
    const struct lock_algo *algo;
    struct tenv e;
    unsigned nodes, threads_per_node, locks, iters, locality;
    uint32_t *acq;               /* acquisitions per lock (global index) */
    _Atomic uint64_t violations; /* owner word not as expected */
    _Atomic int errors;          /* fabric or lock errors */
};

struct worker {
    struct stress *s;
    unsigned node, idx;
};

/* The critical section: a non-atomic increment, bracketed by owner checks. */
static bool critical_section(struct lock_thread *t, rptr data)
{
    bool ok = true;
    uint64_t *p = fab_local(t->f, data);
    if (p) {
        if (__atomic_load_n(&p[1], __ATOMIC_RELAXED) != 0) ok = false;
        __atomic_store_n(&p[1], t->id, __ATOMIC_RELAXED);
        uint64_t v = __atomic_load_n(&p[0], __ATOMIC_RELAXED);
        for (int i = 0; i < 16; i++) __builtin_ia32_pause(); /* widen the window a little */
        __atomic_store_n(&p[0], v + 1, __ATOMIC_RELAXED);
        if (__atomic_load_n(&p[1], __ATOMIC_RELAXED) != t->id) ok = false;
        __atomic_store_n(&p[1], 0, __ATOMIC_RELAXED);
        return ok;
    }
    uint64_t owner = 0, v = 0, id = t->id, zero = 0;
    rptr ownerp = rptr_add(data, 8);
    if (fab_read(t->c, ownerp, &owner, 8) || owner != 0) ok = false;
    if (fab_write(t->c, ownerp, &id, 8)) ok = false;
    if (fab_read(t->c, data, &v, 8)) ok = false;
    v++;
    if (fab_write(t->c, data, &v, 8)) ok = false;
    if (fab_read(t->c, ownerp, &owner, 8) || owner != id) ok = false;
    if (fab_write(t->c, ownerp, &zero, 8)) ok = false;
    return ok;
}

static void *stress_thread(void *arg)
{
    struct worker *w = arg;
    struct stress *s = w->s;
    struct fab_ctx *c;
    struct lock_thread t;
    struct locktable lt;
    if (fab_ctx_create(s->e.f[w->node], &c)) {
        s->errors++;
        return NULL;
    }
    if (lock_thread_init(&t, c, NULL) || locktable_open(&lt, c, s->locks)) {
        s->errors++;
        fab_ctx_destroy(c);
        return NULL;
    }
    uint64_t seed = 0x243F6A8885A308D3ull * (w->idx + 1);
    for (unsigned i = 0; i < s->iters; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        unsigned node = w->node;
        if (seed % 100 >= s->locality) node = (w->node + 1 + (unsigned)(seed >> 32) % (s->nodes - 1)) % s->nodes;
        while (locktable_count(&lt, (uint16_t)node) == 0) node = (node + 1) % s->nodes;
        uint32_t n = locktable_count(&lt, (uint16_t)node);
        uint32_t k = (uint32_t)((seed >> 16) % n);
        struct lock_handle h;
        lock_handle_init(&h, &t, s->algo, locktable_line(&lt, (uint16_t)node, k));
        int rc = lock_acquire(&h, LOCK_EXCLUSIVE, 0);
        if (rc) {
            fprintf(stderr, "  acquire: %s\n", rdkv_strerror(rc));
            s->errors++;
            break;
        }
        if (!critical_section(&t, locktable_data(&lt, (uint16_t)node, k))) s->violations++;
        /* global lock index: locks are numbered node by node */
        uint32_t g = k;
        for (unsigned m = 0; m < node; m++) g += locktable_count(&lt, (uint16_t)m);
        __atomic_fetch_add(&s->acq[g], 1, __ATOMIC_RELAXED);
        rc = lock_release(&h);
        if (rc) {
            fprintf(stderr, "  release: %s\n", rdkv_strerror(rc));
            s->errors++;
            break;
        }
    }
    lock_thread_fini(&t);
    fab_ctx_destroy(c);
    return NULL;
}

static int64_t pause_ns;
static void with_pause(struct fab_opts *o, unsigned node)
{
    (void)node;
    o->soft_atomic_pause_ns = pause_ns;
}

/* Runs the stress and returns the number of mismatches found (violations + bad counters), or -1
 * if it could not run cleanly. */
static long run_stress(const struct lock_algo *algo, unsigned nodes, unsigned tpn, unsigned locks,
                       unsigned iters, unsigned locality, int64_t pause)
{
    struct stress s = {.algo = algo, .nodes = nodes, .threads_per_node = tpn, .locks = locks,
                       .iters = iters, .locality = locality};
    pause_ns = pause;
    if (tenv_start(&s.e, nodes, 16u << 20, pause ? with_pause : NULL)) return -1;
    s.acq = calloc(locks, sizeof *s.acq);
    for (unsigned n = 0; n < nodes; n++) locktable_reset(s.e.f[n], locks);
    unsigned nt = nodes * tpn;
    pthread_t thr[64];
    struct worker w[64];
    for (unsigned i = 0; i < nt; i++) {
        w[i] = (struct worker){.s = &s, .node = i % nodes, .idx = i};
        pthread_create(&thr[i], NULL, stress_thread, &w[i]);
    }
    for (unsigned i = 0; i < nt; i++) pthread_join(thr[i], NULL);
    long bad = (long)s.violations;
    uint64_t total = 0;
    struct fab_ctx *c;
    struct locktable lt;
    if (fab_ctx_create(s.e.f[0], &c) == 0 && locktable_open(&lt, c, locks) == 0) {
        uint32_t g = 0;
        for (unsigned n = 0; n < nodes; n++)
            for (uint32_t k = 0; k < locktable_count(&lt, (uint16_t)n); k++, g++) {
                uint64_t *d = fab_local(s.e.f[n], locktable_data(&lt, (uint16_t)n, k));
                if (d[0] != s.acq[g]) bad++;
                if (d[1] != 0) bad++;
                total += d[0];
            }
        fab_ctx_destroy(c);
    } else {
        s.errors++;
    }
    fprintf(stderr, "  %s: %u nodes x %u threads, %u locks, %u%% local%s: %" PRIu64
                    " acquisitions, %ld mismatches\n",
            algo->name, nodes, tpn, locks, locality, pause ? ", NIC atomics paused" : "", total, bad);
    int errors = s.errors;
    free(s.acq);
    tenv_stop(&s.e);
    return errors ? -1 : bad;
}

static unsigned iters(unsigned full) { return quick ? full / 5 : full; }

static void t_stress_alock(void) { CHECK_EQ(run_stress(&lock_alock, 2, 2, 3, iters(400), 50, 0), 0); }
static void t_stress_spin(void) { CHECK_EQ(run_stress(&lock_spin, 2, 2, 3, iters(400), 50, 0), 0); }
static void t_stress_mcs(void) { CHECK_EQ(run_stress(&lock_mcs, 2, 2, 3, iters(400), 50, 0), 0); }
static void t_stress_alock_3nodes(void)
{
    CHECK_EQ(run_stress(&lock_alock, 3, 2, 4, iters(300), 70, 0), 0);
}

/* Every NIC atomic pauses 30 us between its load and its store: ALock still excludes, because no
 * word it RMWs is RMW'd by both CPUs and NICs. */
static void t_alock_paused(void)
{
    if (tenv_transport != FAB_SOFT) SKIP("the pause is the soft NIC's");
    CHECK_EQ(run_stress(&lock_alock, 2, 2, 2, iters(300), 50, 30 * NS_PER_US), 0);
}

/* The naive lock is caught by the same checker, with the same pause. */
static void t_naive_caught(void)
{
    if (tenv_transport != FAB_SOFT) SKIP("the pause is the soft NIC's");
    long bad = 0;
    for (int round = 0; round < 10 && bad == 0; round++) {
        bad = run_stress(&lock_naive, 2, 2, 2, 200, 50, 30 * NS_PER_US);
        CHECK(bad >= 0);
        if (bad < 0) return;
    }
    CHECK(bad > 0);
}

/* ------------------------------------------------------------------------------------------ */
/* ALock's costs, counted (not timed) */

static void t_alock_costs(void)
{
    struct tenv e;
    REQUIRE(tenv_start(&e, 2, 16u << 20, NULL) == 0);
    locktable_reset(e.f[0], 4);
    locktable_reset(e.f[1], 4);
    struct fab_ctx *c;
    REQUIRE(fab_ctx_create(e.f[0], &c) == 0);
    struct lock_thread t;
    struct locktable lt;
    REQUIRE(lock_thread_init(&t, c, NULL) == 0);
    REQUIRE(locktable_open(&lt, c, 4) == 0);
    struct lock_handle h;
    /* local: no fabric operation at all */
    lock_handle_init(&h, &t, &lock_alock, locktable_line(&lt, 0, 0));
    fab_counters_reset(c);
    for (int i = 0; i < 100; i++) {
        CHECK_EQ(lock_acquire(&h, LOCK_EXCLUSIVE, 0), 0);
        CHECK_EQ(lock_release(&h), 0);
    }
    CHECK_EQ(fab_counters_ops(fab_counters(c)), 0);
    CHECK_EQ(fab_counters(c)->round_trips, 0);
    /* remote, uncontended: CAS tail_r, {WRITE victim, READ line}, CAS tail_r = 3 round trips */
    lock_handle_init(&h, &t, &lock_alock, locktable_line(&lt, 1, 0));
    fab_counters_reset(c);
    CHECK_EQ(lock_acquire(&h, LOCK_EXCLUSIVE, 0), 0);
    CHECK_EQ(lock_release(&h), 0);
    CHECK_EQ(fab_counters(c)->round_trips, 3);
    /* many held at once: descriptors come from the per-thread pool */
    struct lock_handle many[8];
    for (unsigned i = 0; i < 8; i++) {
        lock_handle_init(&many[i], &t, &lock_alock, locktable_line(&lt, (uint16_t)(i % 2), i / 2));
        CHECK_EQ(lock_acquire(&many[i], LOCK_EXCLUSIVE, 0), 0);
    }
    for (unsigned i = 8; i-- > 0;) CHECK_EQ(lock_release(&many[i]), 0);
    CHECK(t.free_mask == ~0ull);
    /* the exclusive-only algorithms refuse shared mode */
    CHECK_EQ(lock_acquire(&h, LOCK_SHARED, 0), RDKV_ENOTSUP);
    lock_thread_fini(&t);
    fab_ctx_destroy(c);
    tenv_stop(&e);
}

struct holder {
    struct fabric *f;
    rptr line;
    _Atomic int state; /* 1 holding, 2 release now, 3 released */
};

static void *hold_thread(void *arg)
{
    struct holder *hd = arg;
    struct fab_ctx *c;
    struct lock_thread t;
    if (fab_ctx_create(hd->f, &c) || lock_thread_init(&t, c, NULL)) return NULL;
    struct lock_handle h;
    lock_handle_init(&h, &t, &lock_spin, hd->line);
    if (lock_acquire(&h, LOCK_EXCLUSIVE, 0) == 0) {
        atomic_store(&hd->state, 1);
        while (atomic_load(&hd->state) != 2) lock_backoff(20);
        lock_release(&h);
    }
    atomic_store(&hd->state, 3);
    lock_thread_fini(&t);
    fab_ctx_destroy(c);
    return NULL;
}

/* The spinlock honours deadlines: a held lock gives RDKV_ETIMEDOUT, not a hang. */
static void t_spin_deadline(void)
{
    struct tenv e;
    REQUIRE(tenv_start(&e, 2, 16u << 20, NULL) == 0);
    locktable_reset(e.f[0], 2);
    locktable_reset(e.f[1], 2);
    struct fab_ctx *c;
    REQUIRE(fab_ctx_create(e.f[0], &c) == 0);
    struct lock_thread t;
    struct locktable lt;
    REQUIRE(lock_thread_init(&t, c, NULL) == 0);
    REQUIRE(locktable_open(&lt, c, 2) == 0);
    struct holder hd = {.f = e.f[1], .line = locktable_line(&lt, 1, 0)};
    pthread_t thr;
    pthread_create(&thr, NULL, hold_thread, &hd);
    while (atomic_load(&hd.state) == 0) lock_backoff(20);
    struct lock_handle h;
    lock_handle_init(&h, &t, &lock_spin, hd.line);
    CHECK_EQ(lock_acquire(&h, LOCK_EXCLUSIVE, clock_now_ns() + 50 * NS_PER_MS), RDKV_ETIMEDOUT);
    atomic_store(&hd.state, 2);
    pthread_join(thr, NULL);
    CHECK_EQ(lock_acquire(&h, LOCK_EXCLUSIVE, clock_now_ns() + 10 * NS_PER_S), 0);
    CHECK_EQ(lock_release(&h), 0);
    lock_thread_fini(&t);
    fab_ctx_destroy(c);
    tenv_stop(&e);
}

static const struct test_case cases[] = {
    {"alock_costs", t_alock_costs},
    {"stress_alock", t_stress_alock},
    {"stress_spin", t_stress_spin},
    {"stress_mcs", t_stress_mcs},
    {"stress_alock_3nodes", t_stress_alock_3nodes},
    {"alock_paused", t_alock_paused},
    {"naive_caught", t_naive_caught},
    {"spin_deadline", t_spin_deadline},
};

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    char **args = argv + 1;
    int n = tenv_args(argc - 1, args), out = 0;
    for (int i = 0; i < n; i++) {
        if (!strcmp(args[i], "--quick")) quick = true;
        else args[out++] = args[i];
    }
    fprintf(stderr, "lock stress on the %s transport%s\n", fab_transport_name(tenv_transport),
            quick ? " (quick)" : "");
    return test_main(out, args, cases, sizeof cases / sizeof cases[0]);
}
