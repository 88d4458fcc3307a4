/* kvbench lock's pieces (internal to kvbench): a measured point of the lock-table benchmark and
 * how it runs on every node, prints and goes into JSON (lock_point.c); the ALock paper's grid
 * (--sweep, lock_sweep.c); the HPDC'16 RMA paper's Figures 3-5 (--sweep-rma: the plan and runs in
 * lock_rma.c, the report in lock_rma_report.c, the plots in lock_rma_plots.c). cmd_lock
 * (lock_bench.c) parses the options and picks one of them. */
#ifndef RDKV_KVBENCH_LOCK_BENCH_H
#define RDKV_KVBENCH_LOCK_BENCH_H

#include "tools/kvbench/bench.h"
#include "tools/kvbench/node/bench.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#define FAIR_NODES 64 /* nodes whose spread of acquires a point keeps */

struct lock_point {
    char algo[16];
    unsigned threads, locks, locality;
    double read_ratio;      /* percent shared */
    unsigned k;             /* locks per op */
    unsigned fig;           /* --sweep-rma: the figure that asked for it first (0: none) */
    unsigned P;             /* lock clients in all */
    struct bench_lock_req q; /* the request (all of it) */
    struct bench_lock_res r; /* merged over nodes */
    double seconds;
    unsigned nodes;          /* nodes that answered */
    struct bench_lock_fair node_fair[FAIR_NODES];
    int64_t lost;            /* wcsb: increments the data lines lack (0 when checked and fine) */
    bool checked;            /* wcsb: the data lines were read back */
};

double lock_ops_per_s(const struct lock_point *p);
double lock_rt_per_op(const struct lock_point *p);
double lock_mean_us(const struct lock_point *p);
double lock_wmean_us(const struct lock_point *p);
double lock_writers_pct(const struct lock_point *p);
/* The point's request from base and the point's own fields. */
void lock_point_req(struct lock_point *pt, const struct bench_lock_req *base);
/* One measurement on every node at once, of pt->q. */
int lock_run_point(struct fabric *f, struct lock_point *pt, char *err, size_t errcap);
/* Runs a point `repeat` times and keeps the median-throughput run: 0, or 1 after a message (or
 * an interrupt). */
int lock_run_median(struct fabric *f, struct lock_point *p, unsigned repeat, const char *what);
/* Percent with no trailing zeros: 0.2, 25, 99.8 */
void lock_fmt_pct(char *out, size_t cap, double v);
void lock_print_point(const struct lock_point *p);
void lock_json_point(struct json *j, const struct lock_point *p, unsigned nodes, bool cdf);
/* "node 0: 16 clients, 1200..1900 acquires, CV 0.081; node 1: ..." */
void lock_print_spread(FILE *f, const struct lock_point *p);
/* hist_cdf's callback that writes "latency_us,fraction" rows to ((struct cdf_out *)arg)->f. */
struct cdf_out {
    FILE *f;
    struct json *j;
};
bool lock_cdf_csv(void *arg, uint64_t v, double cum);

/* --sweep: the ALock paper's grid (locks x locality x threads x alock, spin, mcs). */
#define NLOCKS 3
#define NLOC 4
#define NALG 3
extern const unsigned sweep_locks[NLOCKS];
extern const char *const sweep_algos[NALG];
/* Point i of the grid (algo, threads, locality, locks). */
void lock_sweep_point(struct lock_point *p, size_t i, unsigned maxt);
/* lock-sweep.md and plots/ under out: 0, or 1 after a message. */
int lock_sweep_write(const char *out, struct lock_point *pts, unsigned maxt, unsigned nodes,
                     const char *transport, double seconds, double warmup, unsigned repeat,
                     const struct bench_lock_req *base);

/* --sweep-rma: the HPDC'16 paper's Figures 3-5, scaled to this cluster */

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
