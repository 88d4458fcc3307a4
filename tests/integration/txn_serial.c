/* Serializability of the register workload (tests/txn/histcheck.h) on a 3-node cluster.
 *
 * TW_NREG registers "reg:%02u" (spread over the partitions by hash) start at 0. Worker threads --
 * embedded sessions on every node and remote sessions coordinated by every node -- run
 * transactions of 1 to 4 random operations: a read (rdkv_txn_get), a read-modify-write
 * (rdkv_txn_get_for_update, then a put of a value unique in the whole run: thread << 40 |
 * counter), or now and then a scan of every register (a read of each). Every attempt is recorded
 * with the values it observed and its outcome: committed, aborted (any failed attempt, also one
 * that failed midway: its buffered writes never happened, and it is recorded with them), or
 * unknown (RDKV_EUNKNOWN from commit; none is expected here, so any fails the test). A final
 * committed read of every register closes the history, which histcheck_run must find free of
 * anomalies, with enough committed transactions that the check means something. The attempts and
 * the history's bookkeeping are tests/txnwork.h's (tw_reg_attempt, tw_hist_add).
 *
 * Negative controls, on copies of the recorded history, prove that the pipeline can fail: a
 * committed read-modify-write made to read the value before the one it saw (a lost update), and
 * a committed read made to see an aborted attempt's write (G1a); the checker must flag both. */
#include "tests/harness.h"
#include "tests/testenv.h"
#include "tests/txn/histcheck.h"
#include "tests/txncluster.h"
#include "tests/txnwork.h"

#include "common/clock.h"
#include "common/rng.h"

#include <pthread.h>
#include <stdatomic.h>

#define MAXTH 32

struct serial {
    struct tcluster c;
    _Atomic bool stop;
    _Atomic uint64_t commits, aborts, unknown, errors, scans, oneshots;
};

struct worker {
    struct serial *s;
    int id;
    bool remote;
    unsigned node;
    uint64_t seed;
    struct tw_hist h;
    _Atomic uint64_t commits;
    struct hist_op ops[TW_MAXOPS]; /* the current attempt's (per worker: tasks share a thread) */
};

static void error(struct serial *s, const char *what, int rc)
{
    if (atomic_fetch_add(&s->errors, 1) < 5)
        fprintf(stderr, "  %s: %s\n", what, rdkv_status_name(rc));
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
    /* One-shot reads and scans mixed in -- but not under wait-die, where they slow the run
     * thirty-fold (a one-shot reader retrying behind older writers backs off for up to 128 ms a
     * time; an open question, issue 16's note) and the run would not finish in its bound. */
    const char *policy = getenv("RDKV_TEST_CONFLICT");
    bool oneshots = !policy || strcmp(policy, "wait-die");
    struct hist_op *ops = w->ops;
    uint64_t counter = 0, attempts = 0;
    while (!atomic_load(&s->stop)) {
        uint32_t nops = 0;
        struct tw_reg_did did = {0};
        if (oneshots && rng_below(&w->seed, 6) == 0) {
            /* a one-shot read or scan between the interactive transactions (its retries are the
             * library's: only its last attempt is recorded, the earlier ones did nothing) */
            rdkv_txn_free(t);
            rc = tw_reg_oneshot(ses, &w->seed, ops, &nops);
            /* (recorded, checked, but not counted towards the run's commits: those stay the
             * interactive ones, half of them writes) */
            if (rc == 0) atomic_fetch_add(&s->oneshots, 1);
            if (rdkv_status_retryable(rc)) { /* nothing happened */
                rc = 0;
                nops = 0;
            }
            if (!rc && nops && !tw_hist_add(&w->h, tw_uid(w->id, ++attempts), HIST_COMMITTED, ops,
                                            nops)) {
                error(s, "history", RDKV_ENOMEM);
                break;
            }
            int brc = rdkv_txn_begin(ses, &t);
            if (rc || brc) {
                error(s, rc ? "one-shot" : "begin", rc ? rc : brc);
                if (brc) {
                    rdkv_session_close(ses);
                    return NULL;
                }
                break;
            }
            continue;
        }
        rc = tw_reg_attempt(t, w->id, &w->seed, &counter, ops, &nops, &did);
        atomic_fetch_add(&s->scans, did.scans);
        /* whatever failed, nothing of this attempt happened */
        uint8_t status = rc == 0               ? HIST_COMMITTED
                         : rc == RDKV_EUNKNOWN ? HIST_UNKNOWN
                                               : HIST_ABORTED;
        if (!tw_hist_add(&w->h, tw_uid(w->id, ++attempts), status, ops, nops)) {
            error(s, "history", RDKV_ENOMEM);
            break;
        }
        if (rc == 0 || rc == RDKV_EUNKNOWN) {
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

/* Embedded workers of one node as tasks of one thread (registers_tasks). */
struct group {
    struct worker *w;
    unsigned n;
};

static void group_task(unsigned i, void *arg)
{
    struct group *g = arg;
    worker_main(&g->w[i]);
}

static void *group_main(void *arg)
{
    struct group *g = arg;
    int rc = rdkv_run_tasks(g->n, group_task, g, 0);
    if (rc) error(g->w[0].s, "run tasks", rc);
    return NULL;
}

/* tasks: 0, every worker a thread; K, each node's embedded workers are K tasks of one thread. */
static void registers_run(unsigned tasks)
{
    static struct serial s;
    memset(&s, 0, sizeof s);
    REQUIRE(tc_start(&s.c, 3, NULL) == 0);
    /* every register starts at 0 (the checker's initial value) */
    rdkv_session *ses;
    REQUIRE(rdkv_session_open(s.c.node[0], NULL, &ses) == 0);
    unsigned per_part[3] = {0};
    rdkv_txn *t;
    /* (an abort is retried, bounded: under no-wait an insert's point lock gets 50 us, which a
     * busy machine's first round trip to a peer's range server can take) */
    int lrc = RDKV_EABORTED;
    for (int attempt = 0; attempt < 100 && lrc == RDKV_EABORTED; attempt++) {
        if (attempt) rdkv_sleep_us(10000);
        REQUIRE(rdkv_txn_begin(ses, &t) == 0);
        lrc = 0;
        for (unsigned r = 0; r < TW_NREG && !lrc; r++) lrc = tw_reg_write(t, r, 0);
        if (!lrc) lrc = rdkv_txn_commit(t);
        else rdkv_txn_abort(t);
        rdkv_txn_free(t);
    }
    CHECK_EQ(lrc, 0);
    for (unsigned r = 0; r < TW_NREG; r++) {
        char k[16];
        tw_reg_key(k, r);
        per_part[tc_partition(&s.c, k, strlen(k))]++;
    }
    rdkv_session_close(ses);
    CHECK(per_part[0] && per_part[1] && per_part[2]);

    static struct worker w[MAXTH];
    memset(w, 0, sizeof w);
    unsigned nw = 0, emb = tasks ? tasks : tenv_quick ? 1 : 2, rem = tenv_quick ? 2 : 3;
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
    static struct group grp[3];
    unsigned nth = 0, first_thread = tasks ? 3 * emb : 0; /* workers before it are tasks */
    for (unsigned i = 0; i < nw; i++) {
        w[i].s = &s;
        w[i].id = (int)i;
        w[i].seed = 0x9E3779B97F4A7C15ull * (i + 1) ^ (uint64_t)clock_now_ns();
        if (i >= first_thread) REQUIRE(pthread_create(&th[nth++], NULL, worker_main, &w[i]) == 0);
    }
    for (unsigned n = 0; tasks && n < 3; n++) {
        grp[n] = (struct group){&w[n * emb], emb};
        REQUIRE(pthread_create(&th[nth++], NULL, group_main, &grp[n]) == 0);
    }
    uint64_t want = tenv_quick ? 800 : 6000;
    /* (the run ends once enough happened; the bound is for slow machines: sanitizer builds on a
     * busy CI box, the emulated verbs guest) */
    int64_t t0 = clock_now_ns(), give_up = t0 + (tenv_quick ? 60 : 90) * NS_PER_S;
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
    for (unsigned i = 0; i < nth; i++) pthread_join(th[i], NULL);
    double secs = (double)(clock_now_ns() - t0) / 1e9;

    /* the history: every thread's attempts, then a final committed read of every register */
    size_t n = 1, nops = TW_NREG;
    for (unsigned i = 0; i < nw; i++) {
        n += w[i].h.n;
        nops += w[i].h.nops;
    }
    struct hist_txn *all = calloc(n, sizeof *all);
    struct hist_op *fin = calloc(TW_NREG, sizeof *fin);
    REQUIRE(all && fin);
    size_t k = 0;
    for (unsigned i = 0; i < nw; i++) k += tw_hist_append(all + k, &w[i].h);
    uint64_t committed_writes = 0;
    tw_hist_count(all, k, HIST_COMMITTED, &committed_writes);
    REQUIRE(tc_connect(&s.c, 2, NULL, &ses) == 0);
    /* (an abort is retried, bounded: under wait-die and no-wait the final read can meet a
     * ticket given up at the end of the run and not passed on yet; its zeros would otherwise
     * go into the history as a committed read -- a G2 in 3 of 50 runs) */
    int frc = RDKV_EABORTED;
    for (int attempt = 0; attempt < 100 && frc == RDKV_EABORTED; attempt++) {
        if (attempt) rdkv_sleep_us(10000);
        REQUIRE(rdkv_txn_begin(ses, &t) == 0);
        frc = tw_reg_read_all(t, fin);
        if (!frc) frc = rdkv_txn_commit(t);
        else rdkv_txn_abort(t);
        rdkv_txn_free(t);
    }
    CHECK_EQ(frc, 0);
    rdkv_session_close(ses);
    all[k++] = (struct hist_txn){UINT64_MAX, HIST_COMMITTED, TW_NREG, fin};

    struct histcheck_report rep;
    memset(&rep, 0, sizeof rep);
    int64_t c0 = clock_now_ns();
    int rc = histcheck_run(all, n, TW_NREG, &rep);
    double csecs = (double)(clock_now_ns() - c0) / 1e9;
    fprintf(stderr,
            "  %.1f s: %zu attempts (%llu committed, %llu aborted, %llu unknown), %zu ops, %llu "
            "committed writes, %llu scans, %llu one-shot reads or scans; %u threads (%u "
            "embedded, %u remote)\n",
            secs, n, (unsigned long long)s.commits, (unsigned long long)s.aborts,
            (unsigned long long)s.unknown, nops, (unsigned long long)committed_writes,
            (unsigned long long)s.scans, (unsigned long long)s.oneshots, nw, nw - rem, rem);
    tw_report_print("history", rc, &rep);
    fprintf(stderr, "  (checked in %.2f s)\n", csecs);
    CHECK_EQ(rc, 0);
    CHECK_EQ(tw_report_anomalies(&rep), 0);
    CHECK_EQ(s.errors, 0);
    CHECK_EQ(s.unknown, 0);
    CHECK(s.commits >= want);
    CHECK(committed_writes >= want / 2);
    CHECK(s.scans > 0);
    const char *policy = getenv("RDKV_TEST_CONFLICT");
    if (!policy || strcmp(policy, "wait-die")) CHECK(s.oneshots > 0);
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
    tw_hist_copy(all2, copy, all, n);
    bool planted = tw_hist_plant_lost_update(all2, n, "control 1");
    CHECK(planted);
    memset(&rep, 0, sizeof rep);
    rc = histcheck_run(all2, n, TW_NREG, &rep);
    tw_report_print("control 1 (lost update)", rc, &rep);
    CHECK_EQ(rc, 1);
    CHECK(tw_report_anomalies(&rep) > 0);

    /* Negative control 2: a committed read sees an aborted attempt's write to its register. */
    tw_hist_copy(all2, copy, all, n); /* a fresh copy */
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
    rc = histcheck_run(all2, n, TW_NREG, &rep);
    tw_report_print("control 2 (G1a)", rc, &rep);
    CHECK_EQ(rc, 1);
    CHECK(rep.g1a > 0);

    free(copy);
    free(all2);
    free(all);
    free(fin);
    for (unsigned i = 0; i < nw; i++) tw_hist_free(&w[i].h);
    tc_stop(&s.c);
}

static void registers(void) { registers_run(0); }
static void registers_tasks(void) { registers_run(tenv_quick ? 2 : 3); }

static const struct test_case cases[] = {
    {"registers", registers},
    {"registers_tasks", registers_tasks},
};

int main(int argc, char **argv)
{
    return tenv_main(argc, argv, "register histories", cases, sizeof cases / sizeof cases[0]);
}
