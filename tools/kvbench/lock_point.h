/* kvbench lock's pieces (internal to kvbench): a measured point of the lock-table benchmark and
 * how it runs on every node, prints and goes into JSON (lock_point.c); the ALock paper's grid
 * (--sweep, lock_sweep.c). The HPDC'16 RMA paper's Figures 3-5 are in lock_rma.h. cmd_lock
 * (lock_bench.c) parses the options and picks one of them. */
#ifndef RDKV_KVBENCH_LOCK_POINT_H
#define RDKV_KVBENCH_LOCK_POINT_H

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

#endif
