/* Serializability of the register workload (tests/txn/histcheck.h) on a 3-node cluster.
 *
 * NREG registers "reg:%02u" (spread over the partitions by hash) start at 0. Worker threads --
 * embedded sessions on every node and remote sessions coordinated by every node -- run
 * transactions of 1 to 4 random operations: a read (rdkv_txn_get), a read-modify-write
 * (rdkv_txn_get_for_update, then a put of a value unique in the whole run: thread << 40 |
 * counter), or now and then a scan of every register (a read of each). Every attempt is recorded
 * with the values it observed and its outcome: committed, aborted (any failed attempt, also one
 * that failed midway: its buffered writes never happened, and it is recorded with them), or
 * unknown (RDKV_EUNKNOWN from commit; none is expected here, so any fails the test). A final
 * committed read of every register closes the history, which histcheck_run must find free of
 * anomalies, with enough committed transactions that the check means something.
 *
 * Negative controls, on copies of the recorded history, prove that the pipeline can fail: a
 * committed read-modify-write made to read the value before the one it saw (a lost update), and
 * a committed read made to see an aborted attempt's write (G1a); the checker must flag both. */
#include "tests/harness.h"
#include "tests/testenv.h"
#include "tests/txn/histcheck.h"
#include "tests/txncluster.h"

#include "common/clock.h"
#include "common/rng.h"

#include <pthread.h>
#include <stdatomic.h>

#define NREG 24
#define MAXTH 16
#define MAXOPS_TXN (4 * NREG) /* 4 ops, each at most a scan of every register */

struct serial {
    struct tcluster c;
    _Atomic bool stop;
    _Atomic uint64_t commits, aborts, unknown, errors, scans, rmw;
};

/* One thread's history: attempts and their ops, grown as needed. */
struct hist {
    struct hist_txn *txns;
    size_t n, cap;
    struct hist_op *ops;
    size_t nops, opcap;
};

struct worker {
    struct serial *s;
    int id;
    bool remote;
    unsigned node;
    uint64_t seed;
    struct hist h;
    _Atomic uint64_t commits;
};

static void reg_key(char *buf, unsigned r)
{
    snprintf(buf, 16, "reg:%02u", r);
}

static void error(struct serial *s, const char *what, int rc)
{
    if (atomic_fetch_add(&s->errors, 1) < 5)
        fprintf(stderr, "  %s: %s\n", what, rdkv_status_name(rc));
}

static bool hist_reserve(struct hist *h, size_t ops)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 1024;
        struct hist_txn *n = realloc(h->txns, cap * sizeof *n);
        if (!n) return false;
        h->txns = n;
        h->cap = cap;
    }
    if (h->nops + ops > h->opcap) {
        size_t cap = h->opcap ? h->opcap * 2 : 4096;
        while (cap < h->nops + ops) cap *= 2;
        struct hist_op *n = realloc(h->ops, cap * sizeof *n);
        if (!n) return false;
        h->ops = n;
        h->opcap = cap;
    }
    return true;
}

/* Attempts are recorded with op offsets (the op array moves as it grows); fixed up at the end. */
static void hist_add(struct hist *h, uint64_t id, uint8_t status, const struct hist_op *ops,
                     uint32_t n)
{
    if (n) memcpy(h->ops + h->nops, ops, n * sizeof *ops);
    h->txns[h->n++] = (struct hist_txn){id, status, n, (const struct hist_op *)(uintptr_t)h->nops};
    h->nops += n;
}

static int read_reg(rdkv_txn *t, unsigned r, bool upd, uint64_t *val)
{
    char k[16];
    reg_key(k, r);
    const void *v;
    size_t vl;
    int rc = upd ? rdkv_txn_get_for_update(t, k, strlen(k), &v, &vl)
                 : rdkv_txn_get(t, k, strlen(k), &v, &vl);
    if (rc) return rc;
    return tc_u64_get(v, vl, val) ? 0 : RDKV_EPROTO;
}

/* A scan of every register: NREG reads, in key order. */
static int scan_regs(rdkv_txn *t, struct hist_op *ops, uint32_t *nops)
{
    rdkv_iter *it;
    int rc = rdkv_txn_scan(t, "reg:", 4, "reg;", 4, 0, &it);
    if (rc) return rc;
    const void *k, *v;
    size_t kl, vl;
    unsigned next = 0;
    while ((rc = rdkv_iter_next(it, &k, &kl, &v, &vl)) == 1) {
        char want[16];
        reg_key(want, next);
        uint64_t val;
        if (next >= NREG || kl != strlen(want) || memcmp(k, want, kl) || !tc_u64_get(v, vl, &val)) {
            rc = RDKV_EPROTO; /* a row missing, extra, out of order or malformed */
            break;
        }
        ops[(*nops)++] = (struct hist_op){HIST_READ, next, val};
        next++;
    }
    rdkv_iter_close(it);
    if (rc == 0 && next != NREG) rc = RDKV_EPROTO;
    return rc;
}

/* One attempt: ops recorded as they happen; returns the first failure or the commit's status. */
static int attempt(struct worker *w, rdkv_txn *t, struct hist_op *ops, uint32_t *nops,
                   uint64_t *counter)
{
    unsigned n = 1 + (unsigned)rng_below(&w->seed, 4);
    bool read_only = rng_below(&w->seed, 4) == 0;
    for (unsigned i = 0; i < n; i++) {
        unsigned r = (unsigned)rng_below(&w->seed, NREG);
        unsigned what = (unsigned)rng_below(&w->seed, 20);
        int rc;
        if (what == 0) {
            rc = scan_regs(t, ops, nops);
            if (rc) return rc;
            atomic_fetch_add(&w->s->scans, 1);
        } else if (read_only || what < 8) {
            uint64_t v;
            if ((rc = read_reg(t, r, false, &v))) return rc;
            ops[(*nops)++] = (struct hist_op){HIST_READ, r, v};
        } else {
            uint64_t v;
            if ((rc = read_reg(t, r, true, &v))) return rc;
            ops[(*nops)++] = (struct hist_op){HIST_READ, r, v};
            uint64_t nv = (uint64_t)(w->id + 1) << 40 | ++*counter;
            uint8_t b[8];
            tc_u64_put(b, nv);
            char k[16];
            reg_key(k, r);
            if ((rc = rdkv_txn_put(t, k, strlen(k), b, 8))) return rc;
            ops[(*nops)++] = (struct hist_op){HIST_WRITE, r, nv};
            atomic_fetch_add(&w->s->rmw, 1);
        }
    }
    return rdkv_txn_commit(t);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct serial *s = w->s;
    rdkv_options o;
    rdkv_options_init(&o);
    o.max_retries = 1000000;
    /* 24 registers, read-modify-written in random order: deadlocks are common, and each one
     * lasts until a lock wait runs out; a short bound keeps the run brisk (and the history
     * rich in aborts) */
    o.lock_timeout_ms = 20;
    rdkv_session *ses;
    int rc = w->remote ? tc_connect(&s->c, w->node, &o, &ses)
                       : rdkv_session_open(s->c.node[w->node], &o, &ses);
    if (rc) {
        error(s, "open session", rc);
        return NULL;
    }
    rdkv_txn *t;
    if ((rc = rdkv_txn_begin(ses, &t))) {
        error(s, "begin", rc);
        rdkv_session_close(ses);
        return NULL;
    }
    static _Thread_local struct hist_op ops[MAXOPS_TXN];
    uint64_t counter = 0, attempts = 0;
    while (!atomic_load(&s->stop)) {
        uint32_t nops = 0;
        rc = attempt(w, t, ops, &nops, &counter);
        if (!hist_reserve(&w->h, nops)) {
            error(s, "history", RDKV_ENOMEM);
            break;
        }
        uint64_t id = (uint64_t)(w->id + 1) << 40 | ++attempts;
        if (rc == 0 || rc == RDKV_EUNKNOWN) {
            hist_add(&w->h, id, rc ? HIST_UNKNOWN : HIST_COMMITTED, ops, nops);
            if (rc) {
                atomic_fetch_add(&s->unknown, 1);
            } else {
                atomic_fetch_add(&w->commits, 1);
                atomic_fetch_add(&s->commits, 1);
            }
            /* the next attempt on a fresh handle (on_error's back-off is for failures) */
            rdkv_txn_free(t);
            rc = rdkv_txn_begin(ses, &t);
            if (rc) {
                error(s, "begin", rc);
                rdkv_session_close(ses);
                return NULL;
            }
            continue;
        }
        /* whatever failed, nothing of this attempt happened */
        hist_add(&w->h, id, HIST_ABORTED, ops, nops);
        if (!rdkv_status_retryable(rc)) {
            error(s, "transaction", rc);
            break;
        }
        atomic_fetch_add(&s->aborts, 1);
        if ((rc = rdkv_txn_on_error(t, rc))) { /* backs off, aborts and begins again */
            error(s, "on_error", rc);
            break;
        }
    }
    rdkv_txn_free(t);
    rdkv_session_close(ses);
    return NULL;
}

static uint64_t anomalies(const struct histcheck_report *r)
{
    return r->g0 + r->g1a + r->g1b + r->g1c + r->g2 + r->incompatible;
}

static void print_report(const char *what, int rc, const struct histcheck_report *r)
{
    fprintf(stderr,
            "  %s: rc %d, %llu txns checked (%llu unknown promoted, %llu dropped); G0 %llu G1a "
            "%llu G1b %llu G1c %llu G2 %llu incompatible %llu%s%s\n",
            what, rc, (unsigned long long)r->txns_checked, (unsigned long long)r->unknown_promoted,
            (unsigned long long)r->unknown_dropped, (unsigned long long)r->g0,
            (unsigned long long)r->g1a, (unsigned long long)r->g1b, (unsigned long long)r->g1c,
            (unsigned long long)r->g2, (unsigned long long)r->incompatible,
            r->first[0] ? "; first: " : "", r->first);
}

static void registers(void)
{
    static struct serial s;
    memset(&s, 0, sizeof s);
    REQUIRE(tc_start(&s.c, 3, NULL) == 0);
    /* every register starts at 0 (the checker's initial value) */
    rdkv_session *ses;
    REQUIRE(rdkv_session_open(s.c.node[0], NULL, &ses) == 0);
    unsigned per_part[3] = {0};
    rdkv_txn *t;
    REQUIRE(rdkv_txn_begin(ses, &t) == 0);
    for (unsigned r = 0; r < NREG; r++) {
        char k[16];
        reg_key(k, r);
        uint8_t z[8];
        tc_u64_put(z, 0);
        CHECK_EQ(rdkv_txn_put(t, k, strlen(k), z, 8), 0);
        per_part[tc_partition(&s.c, k, strlen(k))]++;
    }
    CHECK_EQ(rdkv_txn_commit(t), 0);
    rdkv_txn_free(t);
    rdkv_session_close(ses);
    CHECK(per_part[0] && per_part[1] && per_part[2]);

    static struct worker w[MAXTH];
    memset(w, 0, sizeof w);
    unsigned nw = 0, emb = tenv_quick ? 1 : 2, rem = tenv_quick ? 2 : 3;
    for (unsigned n = 0; n < 3; n++)
        for (unsigned k = 0; k < emb; k++) {
            w[nw].node = n;
            nw++;
        }
    for (unsigned k = 0; k < rem; k++) {
        w[nw].remote = true;
        w[nw].node = k % 3;
        nw++;
    }
    pthread_t th[MAXTH];
    for (unsigned i = 0; i < nw; i++) {
        w[i].s = &s;
        w[i].id = (int)i;
        w[i].seed = 0x9E3779B97F4A7C15ull * (i + 1) ^ (uint64_t)clock_now_ns();
        REQUIRE(pthread_create(&th[i], NULL, worker_main, &w[i]) == 0);
    }
    uint64_t want = tenv_quick ? 800 : 6000;
    int64_t t0 = clock_now_ns(), give_up = t0 + (tenv_quick ? 15 : 50) * NS_PER_S;
    for (;;) {
        bool all = true;
        for (unsigned i = 0; i < nw; i++)
            if (atomic_load(&w[i].commits) < 10) all = false;
        if ((all && atomic_load(&s.commits) >= want) || atomic_load(&s.errors) ||
            clock_now_ns() > give_up)
            break;
        clock_sleep_ns(5 * NS_PER_MS);
    }
    atomic_store(&s.stop, true);
    for (unsigned i = 0; i < nw; i++) pthread_join(th[i], NULL);
    double secs = (double)(clock_now_ns() - t0) / 1e9;

    /* the history: every thread's attempts, then a final committed read of every register */
    size_t n = 1, nops = NREG;
    for (unsigned i = 0; i < nw; i++) {
        n += w[i].h.n;
        nops += w[i].h.nops;
    }
    struct hist_txn *all = calloc(n, sizeof *all);
    struct hist_op *fin = calloc(NREG, sizeof *fin);
    REQUIRE(all && fin);
    size_t k = 0;
    uint64_t committed_writes = 0;
    for (unsigned i = 0; i < nw; i++)
        for (size_t j = 0; j < w[i].h.n; j++) {
            all[k] = w[i].h.txns[j];
            all[k].ops = w[i].h.ops + (uintptr_t)all[k].ops;
            if (all[k].status == HIST_COMMITTED)
                for (uint32_t o = 0; o < all[k].nops; o++)
                    committed_writes += all[k].ops[o].kind == HIST_WRITE;
            k++;
        }
    REQUIRE(tc_connect(&s.c, 2, NULL, &ses) == 0);
    REQUIRE(rdkv_txn_begin(ses, &t) == 0);
    for (unsigned r = 0; r < NREG; r++) {
        uint64_t v = 0;
        CHECK_EQ(read_reg(t, r, false, &v), 0);
        fin[r] = (struct hist_op){HIST_READ, r, v};
    }
    CHECK_EQ(rdkv_txn_commit(t), 0);
    rdkv_txn_free(t);
    rdkv_session_close(ses);
    all[k++] = (struct hist_txn){UINT64_MAX, HIST_COMMITTED, NREG, fin};

    struct histcheck_report rep;
    memset(&rep, 0, sizeof rep);
    int64_t c0 = clock_now_ns();
    int rc = histcheck_run(all, n, NREG, &rep);
    double csecs = (double)(clock_now_ns() - c0) / 1e9;
    fprintf(stderr,
            "  %.1f s: %zu attempts (%llu committed, %llu aborted, %llu unknown), %zu ops, %llu "
            "committed writes, %llu scans; %u threads (%u embedded, %u remote)\n",
            secs, n, (unsigned long long)s.commits, (unsigned long long)s.aborts,
            (unsigned long long)s.unknown, nops, (unsigned long long)committed_writes,
            (unsigned long long)s.scans, nw, nw - rem, rem);
    print_report("history", rc, &rep);
    fprintf(stderr, "  (checked in %.2f s)\n", csecs);
    CHECK_EQ(rc, 0);
    CHECK_EQ(anomalies(&rep), 0);
    CHECK_EQ(s.errors, 0);
    CHECK_EQ(s.unknown, 0);
    CHECK(s.commits >= want);
    CHECK(committed_writes >= want / 2);
    CHECK(s.scans > 0);
    CHECK(rep.txns_checked >= want);
    if (getenv("RDKV_HISTORY_OUT")) { /* for a look with other tools */
        FILE *f = fopen(getenv("RDKV_HISTORY_OUT"), "w");
        if (f) {
            histcheck_save(f, all, n);
            fclose(f);
        }
    }

    /* Negative control 1: a committed read-modify-write of a register that read v (written by
     * W, which had read p) now reads p instead: two committed versions claim p. */
    struct hist_op *copy = malloc(nops * sizeof *copy);
    struct hist_txn *all2 = malloc(n * sizeof *all2);
    REQUIRE(copy && all2);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(copy + at, all[i].ops, all[i].nops * sizeof *copy);
        all2[i] = all[i];
        all2[i].ops = copy + at;
        at += all[i].nops;
    }
    /* the read each committed write followed: value -> predecessor */
    bool planted = false;
    for (size_t i = 0; i < n && !planted; i++) {
        if (all2[i].status != HIST_COMMITTED) continue;
        struct hist_op *ops = (struct hist_op *)all2[i].ops;
        for (uint32_t o = 0; o + 1 < all2[i].nops && !planted; o++) {
            if (ops[o].kind != HIST_READ || ops[o + 1].kind != HIST_WRITE ||
                ops[o + 1].key != ops[o].key || ops[o].value == 0)
                continue;
            bool first = true; /* T's first access to the register */
            for (uint32_t p = 0; p < o; p++)
                if (ops[p].key == ops[o].key) first = false;
            if (!first) continue;
            /* find W, the committed writer of ops[o].value, and the value it read first */
            for (size_t j = 0; j < n && !planted; j++) {
                if (all2[j].status != HIST_COMMITTED || j == i) continue;
                const struct hist_op *wo = all2[j].ops;
                for (uint32_t q = 1; q < all2[j].nops; q++)
                    if (wo[q].kind == HIST_WRITE && wo[q].key == ops[o].key &&
                        wo[q].value == ops[o].value && wo[q - 1].kind == HIST_READ &&
                        wo[q - 1].key == ops[o].key) {
                        fprintf(stderr, "  control 1: T%llu's read of register %u: %llu -> %llu\n",
                                (unsigned long long)all2[i].id, ops[o].key,
                                (unsigned long long)ops[o].value,
                                (unsigned long long)wo[q - 1].value);
                        ops[o].value = wo[q - 1].value;
                        planted = true;
                        break;
                    }
            }
        }
    }
    CHECK(planted);
    memset(&rep, 0, sizeof rep);
    rc = histcheck_run(all2, n, NREG, &rep);
    print_report("control 1 (lost update)", rc, &rep);
    CHECK_EQ(rc, 1);
    CHECK(anomalies(&rep) > 0);

    /* Negative control 2: a committed read sees an aborted attempt's write to its register. */
    at = 0;
    for (size_t i = 0; i < n; i++) { /* a fresh copy */
        memcpy(copy + at, all[i].ops, all[i].nops * sizeof *copy);
        at += all[i].nops;
    }
    planted = false;
    for (size_t j = 0; j < n && !planted; j++) {
        if (all2[j].status != HIST_ABORTED) continue;
        for (uint32_t q = 0; q < all2[j].nops && !planted; q++) {
            const struct hist_op *wo = &all2[j].ops[q];
            if (wo->kind != HIST_WRITE) continue;
            for (size_t i = 0; i < n && !planted; i++) {
                if (all2[i].status != HIST_COMMITTED) continue;
                struct hist_op *ops = (struct hist_op *)all2[i].ops;
                /* a read-only reference to the register: its first op on that key */
                for (uint32_t o = 0; o < all2[i].nops; o++) {
                    if (ops[o].key != wo->key) continue;
                    if (ops[o].kind == HIST_READ) {
                        fprintf(stderr,
                                "  control 2: T%llu's read of register %u: %llu -> "
                                "%llu (T%llu aborted)\n",
                                (unsigned long long)all2[i].id, ops[o].key,
                                (unsigned long long)ops[o].value, (unsigned long long)wo->value,
                                (unsigned long long)all2[j].id);
                        ops[o].value = wo->value;
                        planted = true;
                    }
                    break;
                }
            }
        }
    }
    CHECK(planted);
    memset(&rep, 0, sizeof rep);
    rc = histcheck_run(all2, n, NREG, &rep);
    print_report("control 2 (G1a)", rc, &rep);
    CHECK_EQ(rc, 1);
    CHECK(rep.g1a > 0);

    free(copy);
    free(all2);
    free(all);
    free(fin);
    for (unsigned i = 0; i < nw; i++) {
        free(w[i].h.txns);
        free(w[i].h.ops);
    }
    tc_stop(&s.c);
}

static const struct test_case cases[] = {
    {"registers", registers},
};

int main(int argc, char **argv)
{
    return tenv_main(argc, argv, "register histories", cases, sizeof cases / sizeof cases[0]);
}
