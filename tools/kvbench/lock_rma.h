/* kvbench lock --sweep-rma (internal to kvbench): the HPDC'16 RMA paper's Figures 3-5, scaled
 * to this cluster -- the plan and runs in lock_rma.c, the report in lock_rma_report.c, the plots
 * in lock_rma_plots.c. */
#ifndef RDKV_KVBENCH_LOCK_RMA_H
#define RDKV_KVBENCH_LOCK_RMA_H

#include "tools/kvbench/lock_point.h"

#define RMA_MAXP 8
#define RMA_TL2 50 /* lock_cfg's defaults, spelled out so that points compare equal */
#define RMA_TL1 20
#define RMA_TR 1000

/* Fig. 3: writers only */
static const char *const f3_algos[] = {"rma-mcs", "spin", "dmcs"};
static const unsigned f3_bench[] = {BENCH_LOCK_ECSB, BENCH_LOCK_SOB, BENCH_LOCK_WCSB,
                                    BENCH_LOCK_WARB};
#define F3_ALGOS 3
#define F3_BENCH 4
/* Fig. 4a: where the readers' counters are (every k-th node, c per node) at F_W = 0.2% */
static const struct { unsigned k, c; const char *name; } f4_dc[] = {
    {4, 1, "every 4th node"}, {2, 1, "every 2nd node"}, {1, 1, "every node"},
    {1, 2, "2 per node"},     {1, 4, "4 per node"},
};
#define F4_DC 5
/* Fig. 4b: the product T_W = T_L,2 x T_L,1 at F_W = 25% */
static const unsigned f4_prod[][2] = {{10, 1}, {10, 10}, {50, 20}, {100, 100}};
#define F4_PROD 4
/* Fig. 4c/d: the split of T_W = 1000 */
static const unsigned f4_split[][2] = {{10, 100}, {25, 40}, {50, 20}};
#define F4_SPLIT 3
/* Fig. 4e: T_R at F_W = 0.2%; 4f: T_R at F_W = 2% and 5% */
static const unsigned f4_tr[] = {10, 100, 1000, 4000};
#define F4_TR 4
static const unsigned f4f_tr[] = {100, 1000, 4000};
#define F4F_TR 3
static const unsigned f4f_fw[] = {20000, 50000}; /* ppm */
#define F4F_FW 2
/* Fig. 5: writer fractions (ppm) */
static const unsigned f5_fw[] = {2000, 20000, 50000, 250000, 500000, 1000000};
#define F5_FW 6
static const char *const f5_refs[] = {"spin", "dmcs", "rma-mcs"};
#define F5_REFS 3

struct rma_sweep {
    struct lock_point *pts;
    size_t n, cap;
    unsigned nodes, maxthreads;
    unsigned Ps[RMA_MAXP], nP;
    bool figs[6];
    struct bench_lock_req base;
};

struct rma_key {
    const char *algo;
    unsigned bench, P, writers_ppm;
    unsigned tl2, tl1, tr, dcn, dcc;
};


struct rma_env {
    const char *cmdline, *transport;
    double seconds, warmup, elapsed_s;
    unsigned repeat;
};

struct rma_key rma_key_default(const char *algo, unsigned bench, unsigned P, unsigned wppm);
unsigned rma_clients_per_node(const struct rma_sweep *sw, unsigned P);
/* Threads and tasks per node for P clients in all: min(T, P/nodes) threads, the rest tasks. */
void rma_shape(const struct rma_sweep *sw, unsigned P, unsigned *threads, unsigned *tasks);
/* The point of a key that ran (NULL when it did not). */
const struct lock_point *rma_point_of(const struct rma_sweep *sw, const struct rma_key *k);
/* Its metrics, NAN when it did not run. */
static inline double m_ops(const struct lock_point *p) { return p ? lock_ops_per_s(p) : NAN; }
static inline double m_mean(const struct lock_point *p) { return p ? lock_mean_us(p) : NAN; }
static inline double m_wmean(const struct lock_point *p) { return p && p->r.write_ops ? lock_wmean_us(p) : NAN; }
static inline double m_wp99(const struct lock_point *p)
{
    return p && p->r.write_ops ? hist_percentile(&p->r.wh, 99) / 1e3 : NAN;
}
static inline double ratio(double a, double b) { return isnan(a) || isnan(b) || b <= 0 ? NAN : a / b; }

/* Every point the chosen figures need (points two figures share run once). */
int lock_rma_plan(struct rma_sweep *sw);
/* Runs the planned points; prints one line per point. 0, or 1 on a failed run. */
int lock_rma_run(struct rma_sweep *sw, struct fabric *f, unsigned repeat);
/* rma-sweep.md: the report of a sweep. */
void lock_rma_report(FILE *f, const struct rma_sweep *sw, const struct rma_env *env);
/* The plots: data files and one gnuplot script for the three figures. */
int lock_rma_plots(const struct rma_sweep *sw, const char *out);

#endif
