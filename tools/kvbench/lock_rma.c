/* kvbench lock --sweep-rma (lock_bench.h): the points of the HPDC'16 paper's Figures 3-5
 * scaled to this cluster, found by key, and their runs. */
#include "tools/kvbench/lock_rma.h"

#include <stdlib.h>
#include <string.h>

struct rma_key rma_key_default(const char *algo, unsigned bench, unsigned P, unsigned wppm)
{
    return (struct rma_key){algo, bench, P, wppm, RMA_TL2, RMA_TL1, RMA_TR, 1, 1};
}

static bool key_match(const struct lock_point *p, const struct rma_key *k)
{
    return !strcmp(p->algo, k->algo) && p->q.bench == k->bench && p->P == k->P &&
           p->q.read_ppm == 1000000 - k->writers_ppm && p->q.rma_tl2 == (int64_t)k->tl2 &&
           p->q.rma_tl1 == (int64_t)k->tl1 && p->q.rma_tr == (int64_t)k->tr &&
           p->q.rma_dc_nodes == k->dcn && p->q.rma_dc_per_node == k->dcc;
}

static int rma_find(const struct rma_sweep *sw, const struct rma_key *k)
{
    for (size_t i = 0; i < sw->n; i++)
        if (key_match(&sw->pts[i], k)) return (int)i;
    return -1;
}

unsigned rma_clients_per_node(const struct rma_sweep *sw, unsigned P) { return P / sw->nodes; }

/* Threads and tasks per node for P clients in all: min(T, P/nodes) threads, the rest tasks. */
void rma_shape(const struct rma_sweep *sw, unsigned P, unsigned *threads, unsigned *tasks)
{
    unsigned cpn = rma_clients_per_node(sw, P);
    *threads = cpn < sw->maxthreads ? cpn : sw->maxthreads;
    *tasks = cpn / *threads;
}

/* Whether the counter layout (every k-th node, c per node) fits P clients. */
static bool dc_fits(const struct rma_sweep *sw, unsigned P, unsigned k, unsigned c)
{
    unsigned cpn = rma_clients_per_node(sw, P);
    return k <= sw->nodes && sw->nodes % k == 0 && c <= cpn && cpn % c == 0;
}

static int rma_add(struct rma_sweep *sw, unsigned fig, const struct rma_key *k)
{
    int i = rma_find(sw, k);
    if (i >= 0) return i;
    if (sw->n == sw->cap) {
        size_t cap = sw->cap ? sw->cap * 2 : 64;
        struct lock_point *p = realloc(sw->pts, cap * sizeof *p);
        if (!p) return -1;
        sw->pts = p;
        sw->cap = cap;
    }
    struct lock_point *p = &sw->pts[sw->n];
    memset(p, 0, sizeof *p);
    snprintf(p->algo, sizeof p->algo, "%s", k->algo);
    unsigned th, ta;
    rma_shape(sw, k->P, &th, &ta);
    p->threads = th;
    p->locks = 1;
    p->locality = 100;
    p->k = 1;
    p->fig = fig;
    p->P = k->P;
    lock_point_req(p, &sw->base);
    p->q.tasks = ta;
    p->q.bench = k->bench;
    p->q.read_ppm = 1000000 - k->writers_ppm;
    p->q.rma_tl2 = k->tl2;
    p->q.rma_tl1 = k->tl1;
    p->q.rma_tr = k->tr;
    p->q.rma_dc_nodes = k->dcn;
    p->q.rma_dc_per_node = k->dcc;
    p->read_ratio = (double)p->q.read_ppm / 1e4;
    return (int)sw->n++;
}

/* Every point the chosen figures need (points two figures share run once). */
int lock_rma_plan(struct rma_sweep *sw)
{
    for (unsigned pi = 0; pi < sw->nP; pi++) {
        unsigned P = sw->Ps[pi];
        if (sw->figs[3])
            for (unsigned b = 0; b < F3_BENCH; b++)
                for (unsigned a = 0; a < F3_ALGOS; a++) {
                    struct rma_key k = rma_key_default(f3_algos[a], f3_bench[b], P, 1000000);
                    if (rma_add(sw, 3, &k) < 0) return -1;
                }
        if (sw->figs[4]) {
            for (unsigned d = 0; d < F4_DC; d++) {
                if (!dc_fits(sw, P, f4_dc[d].k, f4_dc[d].c)) continue;
                struct rma_key k = rma_key_default("rma-rw", BENCH_LOCK_ECSB, P, 2000);
                k.dcn = f4_dc[d].k;
                k.dcc = f4_dc[d].c;
                if (rma_add(sw, 4, &k) < 0) return -1;
            }
            for (unsigned t = 0; t < F4_PROD + F4_SPLIT; t++) {
                const unsigned *tl = t < F4_PROD ? f4_prod[t] : f4_split[t - F4_PROD];
                struct rma_key k = rma_key_default("rma-rw", BENCH_LOCK_ECSB, P, 250000);
                k.tl2 = tl[0];
                k.tl1 = tl[1];
                if (rma_add(sw, 4, &k) < 0) return -1;
            }
            for (unsigned t = 0; t < F4_TR; t++) {
                struct rma_key k = rma_key_default("rma-rw", BENCH_LOCK_ECSB, P, 2000);
                k.tr = f4_tr[t];
                if (rma_add(sw, 4, &k) < 0) return -1;
            }
            for (unsigned w = 0; w < F4F_FW; w++)
                for (unsigned t = 0; t < F4F_TR; t++) {
                    struct rma_key k = rma_key_default("rma-rw", BENCH_LOCK_ECSB, P, f4f_fw[w]);
                    k.tr = f4f_tr[t];
                    if (rma_add(sw, 4, &k) < 0) return -1;
                }
        }
        if (sw->figs[5]) {
            for (unsigned w = 0; w < F5_FW; w++) {
                struct rma_key k = rma_key_default("rma-rw", BENCH_LOCK_ECSB, P, f5_fw[w]);
                if (rma_add(sw, 5, &k) < 0) return -1;
                k.algo = "fompi-rw";
                if (rma_add(sw, 5, &k) < 0) return -1;
            }
            for (unsigned a = 0; a < F5_REFS; a++) {
                struct rma_key k = rma_key_default(f5_refs[a], BENCH_LOCK_ECSB, P, 1000000);
                if (rma_add(sw, 5, &k) < 0) return -1;
            }
        }
    }
    return 0;
}

const struct lock_point *rma_point_of(const struct rma_sweep *sw, const struct rma_key *k)
{
    int i = rma_find(sw, k);
    return i < 0 || !sw->pts[i].r.ops ? NULL : &sw->pts[i];
}
/* Runs the planned points; prints one line per point. 0, or 1 on a failed run. */
int lock_rma_run(struct rma_sweep *sw, struct fabric *f, unsigned repeat)
{
    for (size_t i = 0; i < sw->n && !bench_stop; i++) {
        struct lock_point *p = &sw->pts[i];
        if (lock_run_median(f, p, repeat, "rma")) return 1;
        printf("[%zu/%zu] fig%u %-8s %-4s P=%-4u %ux%u/node W=%g%% TL=%lld,%lld TR=%lld "
               "DC=%u/%u: %.0f acq/s, mean %.1f us, p99 %.1f us, CV %.3f%s%s\n",
               i + 1, sw->n, p->fig, p->algo, bench_lock_kind_name(p->q.bench), p->P, p->threads,
               p->q.tasks, lock_writers_pct(p), (long long)p->q.rma_tl2, (long long)p->q.rma_tl1,
               (long long)p->q.rma_tr, p->q.rma_dc_nodes, p->q.rma_dc_per_node, lock_ops_per_s(p),
               lock_mean_us(p), hist_percentile(&p->r.h, 99) / 1e3, bench_lock_fair_cv(&p->r.fair),
               p->r.errors ? "  ERRORS" : "", p->lost ? "  LOST UPDATES" : "");
        fflush(stdout);
    }
    return bench_stop ? 1 : 0;
}

