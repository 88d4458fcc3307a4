/* kvbench lock --sweep (lock_bench.h): the ALock paper's grid -- locks 20/100/1000 x locality
 * 85/90/95/100 x threads 1..T for alock, spin and mcs -- its table (lock-sweep.md) and plots. */
#include "tools/kvbench/lock_point.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

const unsigned sweep_locks[NLOCKS] = {20, 100, 1000};
static const unsigned sweep_loc[] = {85, 90, 95, 100};
const char *const sweep_algos[NALG] = {"alock", "spin", "mcs"};

static int lock_sweep_plots(const char *out, struct lock_point *pts, unsigned maxt, unsigned nodes,
                       const char *transport)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/plots", out);
    mkdir(out, 0755);
    mkdir(dir, 0755);
    /* data: one file per lock count; rows = locality, threads; columns = algos */
    for (unsigned l = 0; l < NLOCKS; l++) {
        snprintf(path, sizeof path, "%s/lock-sweep-L%u.dat", dir, sweep_locks[l]);
        FILE *f = fopen(path, "w");
        if (!f) return RDKV_EIO;
        fprintf(f, "# locality threads alock_ops_s spin_ops_s mcs_ops_s\n");
        for (unsigned p = 0; p < NLOC; p++) {
            fprintf(f, "# locality %u\n", sweep_loc[p]);
            for (unsigned t = 1; t <= maxt; t++) {
                fprintf(f, "%u %u", sweep_loc[p], t);
                for (unsigned a = 0; a < NALG; a++) {
                    size_t i = (((size_t)l * NLOC + p) * maxt + (t - 1)) * NALG + a;
                    fprintf(f, " %.1f", lock_ops_per_s(&pts[i]));
                }
                fprintf(f, "\n");
            }
            fprintf(f, "\n\n");
        }
        fclose(f);
        for (unsigned p = 0; p < NLOC; p += 2) {
            /* CDFs at the most threads, 100% and 95% locality */
            unsigned loc = p == 0 ? 3 : 2;
            snprintf(path, sizeof path, "%s/lock-cdf-L%u-P%u.dat", dir, sweep_locks[l],
                     sweep_loc[loc]);
            f = fopen(path, "w");
            if (!f) return RDKV_EIO;
            for (unsigned a = 0; a < NALG; a++) {
                size_t i = (((size_t)l * NLOC + loc) * maxt + (maxt - 1)) * NALG + a;
                fprintf(f, "# %s\n", sweep_algos[a]);
                struct cdf_out co = {.f = f};
                hist_cdf(&pts[i].r.h, lock_cdf_csv, &co);
                fprintf(f, "\n\n");
            }
            fclose(f);
        }
    }
    snprintf(path, sizeof path, "%s/lock-sweep.gp", dir);
    FILE *g = fopen(path, "w");
    if (!g) return RDKV_EIO;
    fprintf(g, "set terminal png size 1600,420 font ',10'\nset datafile separator whitespace\n"
               "set key top left\nset logscale y\nset grid\nset xlabel 'threads per node'\n"
               "set ylabel 'ops/s (lock+unlock)'\nset xtics 1\n");
    for (unsigned l = 0; l < NLOCKS; l++) {
        fprintf(g, "set output '%s/lock-sweep-L%u.png'\n", dir, sweep_locks[l]);
        fprintf(g, "set multiplot layout 1,4 title '%u locks, %u nodes, %s transport'\n",
                sweep_locks[l], nodes, transport);
        for (unsigned p = 0; p < NLOC; p++)
            fprintf(g, "set title '%u%% local'\nplot [0.5:%u.5] '%s/lock-sweep-L%u.dat' index %u "
                       "using 2:3 with linespoints title 'alock', '' index %u using 2:4 with "
                       "linespoints title 'spin', '' index %u using 2:5 with linespoints title "
                       "'mcs'\n",
                    sweep_loc[p], maxt, dir, sweep_locks[l], p, p, p);
        fprintf(g, "unset multiplot\n");
    }
    fprintf(g, "set terminal png size 1400,800 font ',10'\nset output '%s/lock-cdf.png'\n"
               "set logscale x\nset xtics autofreq\nset format x '%%g'\nunset logscale y\n"
               "set xlabel 'latency (us), log scale'\nset ylabel 'CDF'\n"
               "set datafile separator ','\nset key bottom right\n"
               "set multiplot layout 2,3 title 'latency CDF, %u threads per node, %u nodes'\n",
            dir, maxt, nodes);
    for (unsigned r = 0; r < 2; r++)
        for (unsigned l = 0; l < NLOCKS; l++) {
            unsigned loc = r == 0 ? 100 : 95;
            fprintf(g, "set title '%u locks, %u%% local'\nplot [:] [0:1] '%s/lock-cdf-L%u-P%u.dat' "
                       "index 0 using 1:2 with lines title 'alock', '' index 1 using 1:2 with "
                       "lines title 'spin', '' index 2 using 1:2 with lines title 'mcs'\n",
                    sweep_locks[l], loc, dir, sweep_locks[l], loc);
        }
    fprintf(g, "unset multiplot\n");
    fclose(g);
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "gnuplot '%s' 2>&1", path);
    FILE *pp = popen(cmd, "r");
    if (!pp) return RDKV_EIO;
    char line[512];
    while (fgets(line, sizeof line, pp)) fprintf(stderr, "gnuplot: %s", line);
    int st = pclose(pp);
    return st == 0 ? 0 : RDKV_EIO;
}

static void lock_sweep_table(FILE *f, struct lock_point *pts, unsigned maxt)
{
    fprintf(f, "| locks | local %% | threads/node | alock ops/s | spin ops/s | mcs ops/s | "
               "alock / spin | alock / mcs | alock p50 (us) | spin p50 (us) | mcs p50 (us) | "
               "alock RT/op |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (unsigned l = 0; l < NLOCKS; l++)
        for (unsigned p = 0; p < NLOC; p++)
            for (unsigned t = 1; t <= maxt; t++) {
                size_t i = (((size_t)l * NLOC + p) * maxt + (t - 1)) * NALG;
                struct lock_point *a = &pts[i], *s = &pts[i + 1], *m = &pts[i + 2];
                fprintf(f, "| %u | %u | %u | %.0f | %.0f | %.0f | %.1f | %.1f | %.2f | %.2f | %.2f "
                           "| %.2f |\n",
                        sweep_locks[l], sweep_loc[p], t, lock_ops_per_s(a), lock_ops_per_s(s), lock_ops_per_s(m),
                        lock_ops_per_s(s) > 0 ? lock_ops_per_s(a) / lock_ops_per_s(s) : 0,
                        lock_ops_per_s(m) > 0 ? lock_ops_per_s(a) / lock_ops_per_s(m) : 0,
                        hist_percentile(&a->r.h, 50) / 1e3, hist_percentile(&s->r.h, 50) / 1e3,
                        hist_percentile(&m->r.h, 50) / 1e3, lock_rt_per_op(a));
            }
}


void lock_sweep_point(struct lock_point *p, size_t i, unsigned maxt)
{
    size_t a = i % NALG, t = (i / NALG) % maxt, loc = (i / NALG / maxt) % NLOC,
           l = i / NALG / maxt / NLOC;
    snprintf(p->algo, sizeof p->algo, "%s", sweep_algos[a]);
    p->threads = (unsigned)t + 1;
    p->locality = sweep_loc[loc];
    p->locks = sweep_locks[l];
}

int lock_sweep_write(const char *out, struct lock_point *pts, unsigned maxt, unsigned nodes,
                     const char *transport, double seconds, double warmup, unsigned repeat,
                     const struct bench_lock_req *base)
{
    int rc = 0;
    char path[4200];
    mkdir(out, 0755);
    snprintf(path, sizeof path, "%s/lock-sweep.md", out);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "kvbench lock: cannot write %s: %s\n", path, strerror(errno));
        rc = 1;
    } else {
        fprintf(f, "# kvbench lock --sweep\n\nGenerated by `kvbench lock --sweep --nodes %u "
                   "--threads %u --seconds %g --warmup %g --repeat %u` (transport %s, %u nodes "
                   "as separate processes, budgets %lld/%lld, empty critical sections; each "
                   "point is the median-throughput run of %u). Plots: `plots/lock-sweep-L*.png`"
                   " (throughput) and `plots/lock-cdf.png` (latency CDFs).\n\n",
                nodes, maxt, seconds, warmup, repeat, transport, nodes,
                (long long)base->local_budget, (long long)base->remote_budget, repeat);
        lock_sweep_table(f, pts, maxt);
        fclose(f);
        printf("\nwrote %s\n", path);
    }
    if (lock_sweep_plots(out, pts, maxt, nodes, transport)) {
        fprintf(stderr, "kvbench lock: plotting failed (is gnuplot installed? Debian: "
                        "gnuplot-nox); the data files are in %s/plots\n", out);
        rc = 1;
    } else {
        printf("wrote %s/plots/lock-sweep-L{20,100,1000}.png and lock-cdf.png\n", out);
    }
    return rc;
}
