/* Unit tests of the history checker (tests/txn/histcheck.h): serial histories from a simulated
 * serial execution pass (small ones with aborted and unknown transactions, and a 200k-transaction
 * one); hand-built G0, G1a, G1b, G1c, G2 (write skew), lost update and incompatible reads are
 * caught; UNKNOWN transactions are promoted or dropped; bad input is rejected; and the text
 * format round-trips and rejects malformed lines. */
#include "tests/harness.h"

#include "common/rng.h"
#include "rdkv_status.h"
#include "tests/txn/histcheck.h"

#include <time.h>

#define C HIST_COMMITTED
#define A HIST_ABORTED
#define U HIST_UNKNOWN
#define R(k, v)                                                                                    \
    {                                                                                              \
        HIST_READ, (k), (v)                                                                        \
    }
#define W(k, v)                                                                                    \
    {                                                                                              \
        HIST_WRITE, (k), (v)                                                                       \
    }
#define TXN(id, st, ...)                                                                           \
    {                                                                                              \
        (id), (st), sizeof((struct hist_op[]){__VA_ARGS__}) / sizeof(struct hist_op),              \
            (struct hist_op[])                                                                     \
        {                                                                                          \
            __VA_ARGS__                                                                            \
        }                                                                                          \
    }
#define NTX(h) (sizeof(h) / sizeof((h)[0]))

static int check(const struct hist_txn *h, size_t n, uint32_t nkeys, struct histcheck_report *r)
{
    int rc = histcheck_run(h, n, nkeys, r);
    if (r->first[0]) fprintf(stderr, "    -> %s\n", r->first);
    return rc;
}

static uint64_t anomalies(const struct histcheck_report *r)
{
    return r->g0 + r->g1a + r->g1b + r->g1c + r->g2 + r->incompatible;
}

/* ---- serial histories from a simulated serial execution ---- */

enum { MAXOPS = 8 };

struct gen {
    struct hist_txn *txns;
    struct hist_op *ops;
    size_t n, skew_op; /* the planted pair: ops[skew_op] is the second txn's read of key 0 */
    uint64_t skew_old; /* the value key 0 had before the first txn of the pair wrote it */
};

static void gen_free(struct gen *g)
{
    free(g->txns);
    free(g->ops);
}

/* n transactions of minops..MAXOPS ops run one at a time over nkeys registers; with mixed, about 5%
 * abort (their writes are discarded) and 5% end UNKNOWN (their writes applied or not, by a coin).
 * With plant, the txns n/2 and n/2+1 are a committed pair that becomes write skew when the second
 * one's read of key 0 is set back to skew_old. */
static void gen_serial(struct gen *g, uint64_t seed, size_t n, uint32_t nkeys, uint32_t minops,
                       bool mixed, bool plant)
{
    uint64_t s = seed, next = 1;
    uint64_t *cur = calloc(nkeys, sizeof *cur), *local = calloc(nkeys, sizeof *local);
    uint32_t *stamp = calloc(nkeys, sizeof *stamp);
    g->txns = calloc(n, sizeof *g->txns);
    g->ops = calloc(n * MAXOPS, sizeof *g->ops);
    g->n = n;
    g->skew_op = 0; /* set below only when a pair is planted */
    g->skew_old = 0;
    if (!cur || !local || !stamp || !g->txns || !g->ops) abort();
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        struct hist_txn *t = &g->txns[i];
        struct hist_op *ops = &g->ops[o];
        uint32_t touched[MAXOPS], ntouched = 0;
        t->id = i + 1;
        t->ops = ops;
        t->status = C;
        if (plant && i == n / 2) { /* read key 1, RMW key 0 */
            g->skew_old = cur[0];
            ops[t->nops++] = (struct hist_op)R(1, cur[1]);
            ops[t->nops++] = (struct hist_op)R(0, cur[0]);
            ops[t->nops++] = (struct hist_op)W(0, next);
            cur[0] = next++;
            o += t->nops;
            continue;
        }
        if (plant && i == n / 2 + 1) { /* read key 0 (what the skew changes), RMW key 1 */
            g->skew_op = o;
            ops[t->nops++] = (struct hist_op)R(0, cur[0]);
            ops[t->nops++] = (struct hist_op)R(1, cur[1]);
            ops[t->nops++] = (struct hist_op)W(1, next);
            cur[1] = next++;
            o += t->nops;
            continue;
        }
        uint64_t r = mixed ? rng_below(&s, 20) : 2;
        t->status = r == 0 ? A : r == 1 ? U : C;
        uint32_t target = minops + (uint32_t)rng_below(&s, MAXOPS - minops + 1);
        while (t->nops < target) {
            uint32_t k = (uint32_t)rng_below(&s, nkeys);
            if (stamp[k] != i + 1) { /* first touch: read it, then maybe write it */
                stamp[k] = (uint32_t)i + 1;
                local[k] = cur[k];
                touched[ntouched++] = k;
                ops[t->nops++] = (struct hist_op)R(k, local[k]);
                if (t->nops == target || rng_below(&s, 2)) continue;
            } else if (rng_below(&s, 3) == 0) {
                ops[t->nops++] = (struct hist_op)R(k, local[k]); /* re-read: own view */
                continue;
            }
            local[k] = next++;
            ops[t->nops++] = (struct hist_op)W(k, local[k]);
        }
        if (t->status == C || (t->status == U && rng_below(&s, 2)))
            for (uint32_t j = 0; j < ntouched; j++) cur[touched[j]] = local[touched[j]];
        o += t->nops;
    }
    free(cur);
    free(local);
    free(stamp);
}

static void t_empty(void)
{
    struct histcheck_report r;
    CHECK_EQ(check(NULL, 0, 4, &r), 0);
    CHECK_EQ(r.txns_checked, 0);
    CHECK_EQ(histcheck_run(NULL, 0, 4, NULL), RDKV_EINVAL);
}

static void t_serial_small(void)
{
    for (uint64_t seed = 1; seed <= 50; seed++) {
        struct gen g;
        struct histcheck_report r;
        gen_serial(&g, seed * 7919, 2000, 1 + (uint32_t)(seed % 16), 1, seed % 2 == 0, false);
        CHECK_EQ(check(g.txns, g.n, 1 + (uint32_t)(seed % 16), &r), 0);
        CHECK_EQ(anomalies(&r), 0);
        CHECK(r.txns_checked > 1500);
        gen_free(&g);
    }
}

static void t_g0(void)
{
    /* T1 writes x then y, T2 writes x then y, but x's order is T1, T2 and y's is T2, T1 */
    struct hist_txn h[] = {
        TXN(1, C, R(0, 0), W(0, 1), R(1, 4), W(1, 3)),
        TXN(2, C, R(0, 1), W(0, 2), R(1, 0), W(1, 4)),
    };
    struct histcheck_report r;
    CHECK_EQ(check(h, NTX(h), 2, &r), 1);
    CHECK_EQ(r.g0, 1);
    CHECK_EQ(r.g1c + r.g2 + r.g1a + r.g1b + r.incompatible, 0);
    CHECK(strncmp(r.first, "G0: ", 4) == 0 && strstr(r.first, "-ww->"));
}

static void t_g1a(void)
{
    struct hist_txn h[] = {
        TXN(1, A, R(0, 0), W(0, 1)), TXN(2, C, R(0, 1)),
        TXN(3, A, R(0, 1)), /* aborted readers are not checked */
    };
    struct histcheck_report r;
    CHECK_EQ(check(h, NTX(h), 1, &r), 1);
    CHECK_EQ(r.g1a, 1);
    CHECK_EQ(anomalies(&r), 1);
    CHECK(strstr(r.first, "G1a") != NULL);
}

static void t_g1b(void)
{
    struct hist_txn h[] = {
        TXN(1, C, R(0, 0), W(0, 1), R(0, 1), W(0, 2)), TXN(2, C, R(0, 1)), /* intermediate */
        TXN(3, C, R(0, 2)),                                                /* final: fine */
    };
    struct histcheck_report r;
    CHECK_EQ(check(h, NTX(h), 1, &r), 1);
    CHECK_EQ(r.g1b, 1);
    CHECK_EQ(anomalies(&r), 1);
    CHECK(strstr(r.first, "G1b") != NULL);
}

static void t_g1c(void)
{
    /* each reads the other's write: a wr cycle */
    struct hist_txn h[] = {
        TXN(1, C, R(0, 0), W(0, 1), R(1, 2)),
        TXN(2, C, R(1, 0), W(1, 2), R(0, 1)),
    };
    struct histcheck_report r;
    CHECK_EQ(check(h, NTX(h), 2, &r), 1);
    CHECK_EQ(r.g1c, 1);
    CHECK_EQ(anomalies(&r), 1);
    CHECK(strncmp(r.first, "G1c: ", 5) == 0 && strstr(r.first, "-wr->"));
}

static void t_g2_write_skew(void)
{
    struct hist_txn h[] = {
        TXN(1, C, R(0, 0), R(1, 0), W(0, 1)),
        TXN(2, C, R(0, 0), R(1, 0), W(1, 2)),
    };
    struct histcheck_report r;
    CHECK_EQ(check(h, NTX(h), 2, &r), 1);
    CHECK_EQ(r.g2, 1);
    CHECK_EQ(anomalies(&r), 1);
    CHECK(strcmp(r.first, "G2: T1 -rw-> T2 -rw-> T1") == 0);
}

static void t_lost_update(void)
{
    struct hist_txn h[] = {
        TXN(1, C, R(0, 0), W(0, 1)),
        TXN(2, C, R(0, 0), W(0, 2)),
        TXN(3, C, R(0, 1), W(0, 3)), /* a second lost update, on a nonzero version */
        TXN(4, C, R(0, 1), W(0, 4)),
    };
    struct histcheck_report r;
    CHECK_EQ(check(h, 2, 1, &r), 1);
    CHECK_EQ(r.incompatible, 1);
    CHECK(strstr(r.first, "lost update") != NULL);
    CHECK_EQ(check(h, NTX(h), 1, &r), 1);
    CHECK_EQ(r.incompatible, 2);
    CHECK(r.g2 >= 1);
}

static void t_unknown(void)
{
    struct hist_txn h[] = {
        TXN(1, C, R(0, 0), W(0, 1)),
        TXN(2, U, R(0, 1), W(0, 2)), /* read by T3: committed */
        TXN(3, C, R(0, 2), W(0, 3)),
        TXN(4, U, R(0, 3), W(0, 4)),  /* never read: dropped */
        TXN(5, U, R(1, 0), W(1, 11)), /* read by U6, which T7 read: committed */
        TXN(6, U, R(1, 11), W(1, 12)),
        TXN(7, C, R(1, 12)),
        TXN(8, U, R(0, 1), W(0, 9)), /* a lost update if it counted, but never read: dropped */
        TXN(9, A, R(1, 12)),
        TXN(10, U, R(2, 0), W(2, 5)), /* read only by an aborted txn: dropped */
        TXN(11, A, R(2, 5)),
    };
    struct histcheck_report r;
    CHECK_EQ(check(h, NTX(h), 3, &r), 0);
    CHECK_EQ(r.unknown_promoted, 3);
    CHECK_EQ(r.unknown_dropped, 3);
    CHECK_EQ(r.txns_checked, 6);

    /* a promoted UNKNOWN txn takes part in anomalies: here a lost update with T1 */
    struct hist_txn h2[] = {
        TXN(1, C, R(0, 0), W(0, 1)),
        TXN(2, U, R(0, 0), W(0, 2)),
        TXN(3, C, R(0, 2)),
    };
    CHECK_EQ(check(h2, NTX(h2), 1, &r), 1);
    CHECK_EQ(r.unknown_promoted, 1);
    CHECK_EQ(r.incompatible, 1);
}

static void t_incompatible(void)
{
    struct histcheck_report r;
    struct hist_txn never[] = {TXN(1, C, R(0, 42))};
    CHECK_EQ(check(never, 1, 1, &r), 1);
    CHECK_EQ(r.incompatible, 1);
    struct hist_txn own[] = {TXN(1, C, R(0, 0), W(0, 1), R(0, 0))};
    CHECK_EQ(check(own, 1, 1, &r), 1);
    CHECK_EQ(r.incompatible, 1);
    struct hist_txn twice[] = {TXN(1, C, R(0, 0), W(0, 1)), TXN(2, C, R(0, 1), R(0, 0))};
    CHECK_EQ(check(twice, 2, 1, &r), 1);
    CHECK_EQ(r.incompatible, 1);
    struct hist_txn other_key[] = {TXN(1, C, R(0, 0), W(0, 1)), TXN(2, C, R(1, 1))};
    CHECK_EQ(check(other_key, 2, 2, &r), 1);
    CHECK_EQ(r.incompatible, 1);
    struct hist_txn future[] = {TXN(1, C, R(0, 5), W(0, 5))};
    CHECK_EQ(check(future, 1, 1, &r), 1);
    CHECK_EQ(r.incompatible, 1);
}

static void t_bad_input(void)
{
    struct histcheck_report r;
    struct hist_txn key[] = {TXN(1, C, R(4, 0))};
    CHECK_EQ(check(key, 1, 4, &r), RDKV_EINVAL);
    CHECK(strstr(r.first, "nkeys") != NULL);
    struct hist_txn dup[] = {TXN(1, C, R(0, 0), W(0, 7)), TXN(2, A, R(1, 0), W(1, 7))};
    CHECK_EQ(check(dup, 2, 2, &r), RDKV_EINVAL);
    CHECK(strstr(r.first, "twice") != NULL);
    struct hist_txn dup_own[] = {TXN(1, C, R(0, 0), W(0, 7), W(0, 7))};
    CHECK_EQ(check(dup_own, 1, 1, &r), RDKV_EINVAL);
    struct hist_txn blind[] = {TXN(1, C, R(1, 0), W(0, 1))};
    CHECK_EQ(check(blind, 1, 2, &r), RDKV_EINVAL);
    CHECK(strstr(r.first, "without reading") != NULL);
    struct hist_txn zero[] = {TXN(1, C, R(0, 0), W(0, 0))};
    CHECK_EQ(check(zero, 1, 1, &r), RDKV_EINVAL);
    struct hist_txn status[] = {TXN(1, 4, R(0, 0))};
    CHECK_EQ(check(status, 1, 1, &r), RDKV_EINVAL);
    struct hist_txn kind[] = {TXN(1, C, {3, 0, 0})};
    CHECK_EQ(check(kind, 1, 1, &r), RDKV_EINVAL);
    struct hist_txn noops[] = {{1, C, 2, NULL}};
    CHECK_EQ(check(noops, 1, 1, &r), RDKV_EINVAL);
}

static void t_text_roundtrip(void)
{
    struct gen g;
    struct hist_log log;
    struct histcheck_report r;
    char err[128];
    gen_serial(&g, 99, 500, 6, 1, true, true);
    g.ops[g.skew_op].value = g.skew_old; /* write skew, so the reloaded history must fail */
    FILE *f = tmpfile();
    REQUIRE(f != NULL);
    CHECK_EQ(histcheck_save(f, g.txns, g.n), 0);
    rewind(f);
    REQUIRE(histcheck_load(f, &log, err, sizeof err) == 0);
    fclose(f);
    CHECK_EQ(log.ntxns, g.n);
    CHECK(log.nkeys >= 2 && log.nkeys <= 6);
    for (size_t i = 0; i < g.n && i < log.ntxns; i++) {
        CHECK(log.txns[i].id == g.txns[i].id && log.txns[i].status == g.txns[i].status);
        REQUIRE(log.txns[i].nops == g.txns[i].nops);
        for (uint32_t j = 0; j < g.txns[i].nops; j++) {
            const struct hist_op *a = &log.txns[i].ops[j], *b = &g.txns[i].ops[j];
            CHECK(a->kind == b->kind && a->key == b->key && a->value == b->value);
        }
    }
    CHECK_EQ(check(log.txns, log.ntxns, log.nkeys, &r), 1);
    CHECK_EQ(r.g2, 1);
    histcheck_free(&log);
    gen_free(&g);
}

static int load_str(const char *text, struct hist_log *log, char *err, size_t errlen)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    if (!f) return RDKV_EIO;
    int rc = histcheck_load(f, log, err, errlen);
    fclose(f);
    return rc;
}

static void t_text_errors(void)
{
    struct hist_log log;
    char err[128];
    REQUIRE(load_str("# comment\n\nT1 C\n  T2 A r 0 0\nT2 A w 3 4\r\nT7 U\tr 1 4\n", &log, err,
                     sizeof err) == 0);
    CHECK_EQ(log.ntxns, 3);
    CHECK_EQ(log.nops, 3);
    CHECK_EQ(log.nkeys, 4);
    CHECK(log.txns[0].nops == 0 && log.txns[1].nops == 2 && log.txns[2].status == U);
    CHECK(log.txns[1].ops[1].kind == HIST_WRITE && log.txns[1].ops[1].value == 4);
    histcheck_free(&log);
    static const char *const bad[] = {
        "T1 C r 0 0\nT1 X r 0 0\n",
        "T1 C r 0\n",
        "T1 C r 0 0 0\n",
        "T1 C q 0 0\n",
        "1 C r 0 0\n",
        "T1 C r 0 0\nT1 A r 1 0\n",
        "T1 C r 0 0\nT2 C\nT1 C r 1 0\n",
        "T1 C r 0 99999999999999999999\n",
        "T1 C r 4294967295 0\n",
        "T1C r 0 0\n",
        "T1 C r -1 0\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = load_str(bad[i], &log, err, sizeof err);
        CHECK_EQ(rc, RDKV_EINVAL);
        CHECK(err[0] != '\0' && log.txns == NULL && log.ntxns == 0);
    }
    CHECK_EQ(load_str("T1 C r 0 0\nT1 X r 0 0\n", &log, err, sizeof err), RDKV_EINVAL);
    CHECK(strstr(err, "line 2") != NULL);
    CHECK_EQ(load_str("T1 C", &log, err, sizeof err), 0); /* no final newline: fine */
    CHECK_EQ(log.ntxns, 1);
    histcheck_free(&log);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void t_large(void)
{
    enum { N = 200000 };
    struct gen g;
    struct histcheck_report r;
    gen_serial(&g, 12345, N, 1000, MAXOPS, true, true);
    size_t nops = 0;
    for (size_t i = 0; i < g.n; i++) nops += g.txns[i].nops;
    double t0 = now_s();
    CHECK_EQ(check(g.txns, g.n, 1000, &r), 0);
    double t1 = now_s();
    CHECK_EQ(anomalies(&r), 0);
    CHECK(r.txns_checked > N * 8 / 10 && r.unknown_promoted > 0 && r.unknown_dropped > 0);
    fprintf(stderr, "    %d txns, %zu ops, serial: checked in %.3f s\n", N, nops, t1 - t0);

    /* the second txn of the planted pair now reads key 0 as it was before the first one: skew */
    g.ops[g.skew_op].value = g.skew_old;
    t0 = now_s();
    CHECK_EQ(check(g.txns, g.n, 1000, &r), 1);
    t1 = now_s();
    CHECK_EQ(r.g2, 1);
    CHECK_EQ(anomalies(&r), 1);
    char want[64];
    snprintf(want, sizeof want, "T%zu -rw-> T%zu", (size_t)N / 2 + 1, (size_t)N / 2 + 2);
    CHECK(strstr(r.first, want) != NULL);
    fprintf(stderr, "    write skew planted: caught in %.3f s\n", t1 - t0);
    gen_free(&g);
}

static const struct test_case cases[] = {
    {"empty", t_empty},
    {"serial_small", t_serial_small},
    {"g0", t_g0},
    {"g1a", t_g1a},
    {"g1b", t_g1b},
    {"g1c", t_g1c},
    {"g2_write_skew", t_g2_write_skew},
    {"lost_update", t_lost_update},
    {"unknown", t_unknown},
    {"incompatible", t_incompatible},
    {"bad_input", t_bad_input},
    {"text_roundtrip", t_text_roundtrip},
    {"text_errors", t_text_errors},
    {"large", t_large},
};

int main(int argc, char **argv)
{
    return test_main(argc - 1, argv + 1, cases, sizeof cases / sizeof cases[0]);
}
