/* kvbench lock --sweep-rma's plots (lock_bench.h): one data file per panel and one gnuplot
 * script for Figures 3, 4 and 5 under OUT/plots. */
#include "tools/kvbench/lock_rma.h"

#include <string.h>
#include <sys/stat.h>

/* One data file: the first column x, then one column per series ('?' = missing). */
static int write_dat(const char *path, const char *head, unsigned nx, const double *xs,
                     unsigned ns, const double *v /* ns x nx */)
{
    FILE *f = fopen(path, "w");
    if (!f) return RDKV_EIO;
    fprintf(f, "# %s\n", head);
    for (unsigned x = 0; x < nx; x++) {
        fprintf(f, "%g", xs[x]);
        for (unsigned s = 0; s < ns; s++) {
            double y = v[s * nx + x];
            if (isnan(y)) fprintf(f, " ?");
            else fprintf(f, " %.6g", y);
        }
        fprintf(f, "\n");
    }
    return fclose(f) ? RDKV_EIO : 0;
}

/* A gnuplot "plot" line over a data file's series columns 2.. */
static void gp_plot(FILE *g, const char *title, const char *ylabel, const char *dat,
                    unsigned ns, const char *const *names, unsigned dashed_from)
{
    fprintf(g, "set title \"%s\"\nset ylabel \"%s\"\nplot ", title, ylabel);
    for (unsigned s = 0; s < ns; s++)
        fprintf(g, "%s'%s' using 1:%u with linespoints %stitle \"%s\"", s ? ", " : "", s ? "" : dat,
                s + 2, s >= dashed_from ? "dashtype 2 " : "", names[s]);
    fprintf(g, "\n");
}


/* The x values of every panel: the sweep's lock-client counts. */
static void plot_xs(const struct rma_sweep *sw, double *xs)
{
    for (unsigned i = 0; i < sw->nP; i++) xs[i] = sw->Ps[i];
}

/* A figure's terminal, output file and multiplot layout. */
static void plot_begin(FILE *g, const char *dir, const char *name, const char *size,
                       const char *layout, const char *title)
{
    fprintf(g, "set terminal pngcairo size %s font ',10'\nset output '%s/%s.png'\n"
               "set multiplot layout %s title '%s'\n",
            size, dir, name, layout, title);
}

static int plots_fig3(FILE *g, const struct rma_sweep *sw, const char *dir, const double *xs,
                      double *v)
{
    char path[4300];
    unsigned nP = sw->nP;
    int rc = 0;
    /* LB: the ECSB runs' mean latency */
    for (unsigned panel = 0; panel <= F3_BENCH; panel++) {
        unsigned b = panel == 0 ? BENCH_LOCK_ECSB : f3_bench[panel - 1];
        for (unsigned a = 0; a < F3_ALGOS; a++)
            for (unsigned i = 0; i < nP; i++) {
                struct rma_key k = rma_key_default(f3_algos[a], b, sw->Ps[i], 1000000);
                const struct lock_point *p = rma_point_of(sw, &k);
                v[a * nP + i] = panel == 0 ? m_mean(p) : m_ops(p);
            }
        const char *nm = panel == 0 ? "lb" : bench_lock_kind_name(b);
        snprintf(path, sizeof path, "%s/rma-fig3-%s.dat", dir, nm);
        if ((rc = write_dat(path, "P rma-mcs spin dmcs", nP, xs, F3_ALGOS, v))) break;
        char title[64];
        snprintf(title, sizeof title, "%s", panel == 0   ? "LB (mean latency of ECSB's runs)"
                                          : b == BENCH_LOCK_ECSB ? "ECSB"
                                          : b == BENCH_LOCK_SOB  ? "SOB"
                                          : b == BENCH_LOCK_WCSB ? "WCSB"
                                                                 : "WARB");
        gp_plot(g, title, panel == 0 ? "mean latency (us)" : "acquires/s", path, F3_ALGOS,
                f3_algos, 99);
    }
    fprintf(g, "unset multiplot\n");
    return rc;
}

static int plots_fig4(FILE *g, const struct rma_sweep *sw, const char *dir, const double *xs,
                      double *v)
{
    char path[4300];
    unsigned nP = sw->nP;
    int rc = 0;
    /* (a) T_DC */
    const char *dcn[F4_DC];
    for (unsigned d = 0; d < F4_DC; d++) {
        dcn[d] = f4_dc[d].name;
        for (unsigned i = 0; i < nP; i++) {
            struct rma_key k = rma_key_default("rma-rw", BENCH_LOCK_ECSB, sw->Ps[i], 2000);
            k.dcn = f4_dc[d].k;
            k.dcc = f4_dc[d].c;
            v[d * nP + i] = m_ops(rma_point_of(sw, &k));
        }
    }
    snprintf(path, sizeof path, "%s/rma-fig4a-tdc.dat", dir);
    if (!(rc = write_dat(path, "P counters: every-4th-node every-2nd-node every-node "
                               "2-per-node 4-per-node", nP, xs, F4_DC, v)))
        gp_plot(g, "(a) T_DC, F_W = 0.2%", "acquires/s", path, F4_DC, dcn, 99);
    /* (b) product, (c) split throughput, (d) split mean latency */
    char names[F4_PROD + F4_SPLIT][32];
    const char *np[F4_PROD + F4_SPLIT];
    for (unsigned panel = 0; !rc && panel < 3; panel++) {
        unsigned n = panel == 0 ? F4_PROD : F4_SPLIT;
        for (unsigned t = 0; t < n; t++) {
            const unsigned *tl = panel == 0 ? f4_prod[t] : f4_split[t];
            snprintf(names[t], sizeof names[t], "T_L %u-%u (T_W %u)", tl[0], tl[1],
                     tl[0] * tl[1]);
            np[t] = names[t];
            for (unsigned i = 0; i < nP; i++) {
                struct rma_key k = rma_key_default("rma-rw", BENCH_LOCK_ECSB, sw->Ps[i], 250000);
                k.tl2 = tl[0];
                k.tl1 = tl[1];
                const struct lock_point *p = rma_point_of(sw, &k);
                v[t * nP + i] = panel == 2 ? m_mean(p) : m_ops(p);
            }
        }
        snprintf(path, sizeof path, "%s/rma-fig4%c-tl.dat", dir, "bcd"[panel]);
        if ((rc = write_dat(path, "P, one column per (T_L,2 T_L,1)", nP, xs, n, v))) break;
        gp_plot(g,
                panel == 0   ? "(b) T_W = T_{L,2} x T_{L,1}, F_W = 25%"
                : panel == 1 ? "(c) T_W = 1000 split, F_W = 25%"
                             : "(d) T_W = 1000 split: mean latency",
                panel == 2 ? "mean latency (us)" : "acquires/s", path, n, np, 99);
    }
    /* (e) T_R at 0.2%, (f) T_R at 2% and 5% */
    if (!rc) {
        for (unsigned t = 0; t < F4_TR; t++) {
            snprintf(names[t], sizeof names[t], "T_R %u", f4_tr[t]);
            np[t] = names[t];
            for (unsigned i = 0; i < nP; i++) {
                struct rma_key k = rma_key_default("rma-rw", BENCH_LOCK_ECSB, sw->Ps[i], 2000);
                k.tr = f4_tr[t];
                v[t * nP + i] = m_ops(rma_point_of(sw, &k));
            }
        }
        snprintf(path, sizeof path, "%s/rma-fig4e-tr.dat", dir);
        if (!(rc = write_dat(path, "P, one column per T_R", nP, xs, F4_TR, v)))
            gp_plot(g, "(e) T_R, F_W = 0.2%", "acquires/s", path, F4_TR, np, 99);
    }
    if (!rc) {
        unsigned s = 0;
        for (unsigned w = 0; w < F4F_FW; w++)
            for (unsigned t = 0; t < F4F_TR; t++, s++) {
                snprintf(names[s], sizeof names[s], "F_W %g%%, T_R %u", f4f_fw[w] / 1e4,
                         f4f_tr[t]);
                np[s] = names[s];
                for (unsigned i = 0; i < nP; i++) {
                    struct rma_key k =
                        rma_key_default("rma-rw", BENCH_LOCK_ECSB, sw->Ps[i], f4f_fw[w]);
                    k.tr = f4f_tr[t];
                    v[s * nP + i] = m_ops(rma_point_of(sw, &k));
                }
            }
        snprintf(path, sizeof path, "%s/rma-fig4f-tr-fw.dat", dir);
        if (!(rc = write_dat(path, "P, one column per (F_W, T_R)", nP, xs, s, v)))
            gp_plot(g, "(f) T_R x F_W", "acquires/s", path, s, np, F4F_TR);
    }
    fprintf(g, "unset multiplot\n");
    return rc;
}

static int plots_fig5(FILE *g, const struct rma_sweep *sw, const char *dir, const double *xs,
                      double *v)
{
    char path[4300];
    unsigned nP = sw->nP;
    int rc = 0;
    char names[F5_FW + F5_REFS][32];
    const char *np[F5_FW + F5_REFS];
    for (unsigned panel = 0; !rc && panel < 3; panel++) {
        unsigned s = 0;
        for (unsigned w = 0; w < F5_FW; w++, s++) {
            snprintf(names[s], sizeof names[s], "F_W %g%%", f5_fw[w] / 1e4);
            np[s] = names[s];
            for (unsigned i = 0; i < nP; i++) {
                struct rma_key k = rma_key_default("rma-rw", BENCH_LOCK_ECSB, sw->Ps[i], f5_fw[w]);
                double a = m_ops(rma_point_of(sw, &k));
                k.algo = "fompi-rw";
                double b = m_ops(rma_point_of(sw, &k));
                v[s * nP + i] = panel == 0 ? a : panel == 1 ? b : ratio(a, b);
            }
        }
        if (panel < 2)
            for (unsigned a = 0; a < F5_REFS; a++, s++) {
                np[s] = f5_refs[a];
                for (unsigned i = 0; i < nP; i++) {
                    struct rma_key k =
                        rma_key_default(f5_refs[a], BENCH_LOCK_ECSB, sw->Ps[i], 1000000);
                    v[s * nP + i] = m_ops(rma_point_of(sw, &k));
                }
            }
        snprintf(path, sizeof path, "%s/rma-fig5%c.dat", dir, "abc"[panel]);
        if ((rc = write_dat(path, "P, one column per F_W (then spin dmcs rma-mcs)", nP, xs, s,
                            v)))
            break;
        gp_plot(g,
                panel == 0   ? "(a) RMA-RW (dashed: writer-only locks)"
                : panel == 1 ? "(b) foMPI-RW (dashed: writer-only locks)"
                             : "(c) RMA-RW / foMPI-RW throughput",
                panel == 2 ? "ratio" : "acquires/s", path, s, np, F5_FW);
    }
    /* (d) throughput vs F_W, one series per P and lock */
    if (!rc) {
        double fx[F5_FW];
        char pn[2 * RMA_MAXP][32];
        const char *pp[2 * RMA_MAXP];
        for (unsigned w = 0; w < F5_FW; w++) fx[w] = f5_fw[w] / 1e4;
        for (unsigned l = 0; l < 2; l++)
            for (unsigned i = 0; i < nP; i++) {
                unsigned s = l * nP + i;
                snprintf(pn[s], sizeof pn[s], "%s P=%u", l ? "fompi-rw" : "rma-rw",
                         sw->Ps[i]);
                pp[s] = pn[s];
                for (unsigned w = 0; w < F5_FW; w++) {
                    struct rma_key k = rma_key_default(l ? "fompi-rw" : "rma-rw",
                                                   BENCH_LOCK_ECSB, sw->Ps[i], f5_fw[w]);
                    v[s * F5_FW + w] = m_ops(rma_point_of(sw, &k));
                }
            }
        snprintf(path, sizeof path, "%s/rma-fig5d.dat", dir);
        if (!(rc = write_dat(path, "F_W (%), one column per (lock, P)", F5_FW, fx, 2 * nP, v))) {
            fprintf(g, "set xlabel 'F_W (%% writers)'\nset logscale x 10\n");
            gp_plot(g, "(d) throughput vs writer fraction (dashed: foMPI-RW)", "acquires/s",
                    path, 2 * nP, pp, nP);
            fprintf(g, "set logscale x 2\nset xlabel 'P (lock clients, 4 nodes)'\n");
        }
    }
    fprintf(g, "unset multiplot\n");
    return rc;
}

int lock_rma_plots(const struct rma_sweep *sw, const char *out)
{
    char dir[4096], gp[4300];
    snprintf(dir, sizeof dir, "%s/plots", out);
    mkdir(out, 0755);
    mkdir(dir, 0755);
    snprintf(gp, sizeof gp, "%s/rma-sweep.gp", dir);
    FILE *g = fopen(gp, "w");
    if (!g) return RDKV_EIO;
    fprintf(g, "# kvbench lock --sweep-rma: the HPDC'16 paper's Figures 3-5, scaled\n"
               "set datafile missing '?'\nset grid\nset key below font ',8'\n"
               "set logscale x 2\nset logscale y\nset xlabel 'P (lock clients, 4 nodes)'\n");
    double xs[RMA_MAXP], v[16 * RMA_MAXP];
    plot_xs(sw, xs);
    int rc = 0;
    if (sw->figs[3]) {
        plot_begin(g, dir, "rma-fig3", "2000,480", "1,5",
                   "Fig. 3 scaled: RMA-MCS vs spin (foMPI-Spin) and D-MCS, writers only, "
                   "one lock");
        rc = plots_fig3(g, sw, dir, xs, v);
    }
    if (!rc && sw->figs[4]) {
        plot_begin(g, dir, "rma-fig4", "1800,1000", "2,3",
                   "Fig. 4 scaled: RMA-RW thresholds (ECSB, one lock)");
        rc = plots_fig4(g, sw, dir, xs, v);
    }
    if (!rc && sw->figs[5]) {
        plot_begin(g, dir, "rma-fig5", "1600,1000", "2,2",
                   "Fig. 5 scaled: RMA-RW vs foMPI-RW (ECSB, one lock)");
        rc = plots_fig5(g, sw, dir, xs, v);
    }
    if (fclose(g) || rc) return RDKV_EIO;
    int st = bench_gnuplot(gp);
    if (st == 1) fprintf(stderr, "kvbench lock: gnuplot is not installed (Debian: gnuplot-nox); "
                                 "the script and data are in %s\n", dir);
    return st ? RDKV_EIO : 0;
}
