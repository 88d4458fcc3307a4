/* kvbench tpcc: TPC-C's five transactions on rdkv (tools/kvbench/tpcc.h), its consistency
 * conditions after the run, and --compare: the DSLR paper's Figure 8 setting (low contention, 10
 * warehouses per node; high, 1 per node) for every row lock, as a table and plots in docs/. */
#include "tools/kvbench/drive.h"
#include "tools/kvbench/tpcc.h"

#include "common/clock.h"
#include "common/parse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char usage[] =
    "usage: kvbench tpcc [options]\n"
    "       kvbench tpcc --compare [--locks L,L...] [--out DIR] [options]\n"
    "\n"
    "TPC-C's New-Order, Payment, Order-Status, Delivery and Stock-Level in the 45/43/4/4/4 mix,\n"
    "closed loop without think time, each worker a terminal with a fixed home warehouse.\n"
    "Warehouse w lives on node (w-1) mod N; ITEM is copied to every node. With --nodes (the\n"
    "default) kvbench starts the nodes, loads the tables, runs, and checks TPC-C's consistency\n"
    "conditions 1-4; the last line says whether they hold (exit 1 when one does not).\n"
    "\n"
    "  --warehouses-per-node W  (default 1)\n"
    "  --items N             ITEM rows and STOCK rows per warehouse (spec: 100000, default)\n"
    "  --customers N         customers (and initial orders) per district (spec: 3000, default)\n"
    "  --mix A,B,C,D,E       percent of New-Order, Payment, Order-Status, Delivery, Stock-Level\n"
    "                        (default 45,43,4,4,4)\n"
    "  --load-only           load and check, do not run\n"
    "  --no-load             the running cluster holds the tables already (--endpoints/--config)\n"
    "  --compare             for each row lock (--locks, default rwlock,dslr,drtm,rof,trad,\n"
    "                        alock) and each contention level (low: 10 warehouses per node,\n"
    "                        high: 1), start\n"
    "                        nodes, load, run --seconds, check; write tpcc-compare.md and, with\n"
    "                        gnuplot, plots/tpcc-{throughput,mean,p999}.png into --out\n"
    "  --out DIR             where --compare writes (default kvbench-report, made in the\n"
    "                        current directory; docs/reports holds the published ones)\n"
    "\n";
static const char usage_tail[] =
    "  -h, --help            this text\n"
    "\n"
    "Defaults here: --seconds 10, --threads 2 per node. tpmC below means New-Orders completed\n"
    "per minute in this run (not an audited TPC result).\n";

struct tpcc_cli {
    struct drive_cli c;
    struct tpcc_opts t;
    bool load_only, no_load, compare;
    const char *locks, *out;
};

struct result {
    char lock[16];
    unsigned wpn;
    int rc;
    bool ran; /* the run itself happened (it may still have errors) */
    char why[600];
    double tpm, tps, mean_us, p999_us, retries;
    uint64_t errors;
    int failed_checks;
};

static void kv_add(const char **kv, unsigned *n, const char *k, const char *v)
{
    kv[(*n)++] = k;
    kv[(*n)++] = v;
    kv[*n] = NULL;
}

/* One whole run: nodes (started or running), load, run, check. Prints the report unless quiet. */
static int one_run(struct tpcc_cli *x, struct result *res, bool quiet)
{
    struct drive_cli *c = &x->c;
    char err[512];
    struct bench_cluster bc;
    memset(res->why, 0, sizeof res->why);
    if (bench_cluster_open(&bc, &c->co, 60 * NS_PER_S, err, sizeof err)) {
        snprintf(res->why, sizeof res->why, "%s", err);
        fprintf(stderr, "kvbench tpcc: error: %s\n", err);
        return res->rc = 1;
    }
    x->t.nodes = bc.cfg->n;
    uint8_t cfg[TPCC_CFG_LEN];
    size_t len;
    int rc = tpcc_cfg_pack(&x->t, cfg, sizeof cfg, &len, err, sizeof err);
    if (rc) {
        fprintf(stderr, "kvbench tpcc: error: %s\n", err);
        bench_cluster_close(&bc);
        return res->rc = 2;
    }
    c->o.cls = &wl_tpcc;
    c->o.cfg = cfg;
    c->o.cfg_len = (uint32_t)len;
    struct drive d;
    rc = drive_open(&d, &bc, err, sizeof err);
    unsigned W = x->t.nodes * x->t.warehouses_per_node;
    char head[300];
    snprintf(head, sizeof head,
             "%s, %u nodes%s, %u warehouses (%u per node), row lock %s, %s mode, %u %s x %u tasks",
             fab_transport_name(bc.transport), x->t.nodes, bc.launched ? " (started here)" : "", W,
             x->t.warehouses_per_node, c->row_lock ? c->row_lock : (bc.launched ? "rwlock" : "the cluster's"),
             c->o.remote ? "remote" : "embedded", c->o.threads,
             c->o.remote ? "client threads" : "threads per node", c->o.tasks);
    fprintf(stderr, "kvbench tpcc: %s\n", head);
    if (x->t.items != 100000 || x->t.customers_per_district != 3000)
        fprintf(stderr, "kvbench tpcc: scaled down: %u items (spec 100000), %u customers per district "
                        "(spec 3000)\n", x->t.items, x->t.customers_per_district);
    if (!rc && !x->no_load) {
        int64_t t0 = clock_now_ns();
        rc = drive_load(&d, &c->o, err, sizeof err);
        if (rc) fprintf(stderr, "kvbench tpcc: error: loading: %s\n", err);
        else
            fprintf(stderr, "kvbench tpcc: loaded %u warehouses (~%llu rows each) in %.1f s\n", W,
                    (unsigned long long)tpcc_rows_per_warehouse(&x->t),
                    (double)(clock_now_ns() - t0) / 1e9);
    }
    struct wl_stats *total = calloc(1, sizeof *total);
    struct drive_sweep sweep = {0};
    if (!rc && !total) rc = RDKV_ENOMEM;
    /* a --tasks list: one run per value on the same tables; every run but the last is
     * reported here, the last below with the checks that follow all of them */
    for (unsigned ki = 0; !rc && !x->load_only && ki < c->ntasks && !bench_stop; ki++) {
        c->o.tasks = c->tasks_list[ki];
        if (c->ntasks > 1) fprintf(stderr, "kvbench tpcc: run %u of %u: %u tasks per thread\n",
                                   ki + 1, c->ntasks, c->o.tasks);
        rc = drive_run(&d, &c->o, total, err, sizeof err);
        if (rc) fprintf(stderr, "kvbench tpcc: error: %s\n", err);
        else res->ran = true;
        if (!rc) drive_sweep_add(&sweep, &c->o, total);
        if (!rc && ki + 1 < c->ntasks && !quiet) {
            double s = (double)total->elapsed_ns / 1e9;
            printf("# tasks %u: tpmC %.0f\n", c->o.tasks,
                   s > 0 ? (double)total->op[TPCC_NEW_ORDER].ok * 60.0 / s : 0);
            drive_report(stdout, &c->o, total, NULL, NULL);
            printf("\n");
        }
    }
    char *report = NULL;
    int failed = -1;
    if (!rc || (total && wl_stats_ops(total))) {
        int r2 = drive_check(&d, &c->o, "kvbench tpcc", &failed, &report, err, sizeof err);
        if (r2) {
            fprintf(stderr, "kvbench tpcc: error: %s\n", err);
            if (!rc) rc = r2;
        }
    }
    /* the figures */
    double secs = total ? (double)total->elapsed_ns / 1e9 : 0;
    struct hist all;
    hist_init(&all);
    uint64_t commits = 0, aborts = 0;
    for (unsigned i = 0; total && i < total->nops; i++) {
        hist_merge(&all, &total->op[i].h);
        commits += total->op[i].ok;
        aborts += total->op[i].aborts;
    }
    uint64_t no = total ? total->op[TPCC_NEW_ORDER].ok : 0;
    res->tpm = secs > 0 ? (double)no * 60.0 / secs : 0;
    res->tps = secs > 0 ? (double)all.count / secs : 0;
    res->mean_us = hist_mean(&all) / 1e3;
    res->p999_us = (double)hist_percentile(&all, 99.9) / 1e3;
    res->retries = commits ? (double)aborts / (double)commits : 0;
    res->errors = total ? drive_errors(total) : 0;
    res->failed_checks = failed;
    if (!quiet && !x->load_only && total) {
        char wh[32], items[32], cust[32], mix[64], tpm[32], thr[16];
        snprintf(wh, sizeof wh, "%u", W);
        snprintf(items, sizeof items, "%u%s", x->t.items, x->t.items == 100000 ? "" : " (scaled down)");
        snprintf(cust, sizeof cust, "%u%s", x->t.customers_per_district,
                 x->t.customers_per_district == 3000 ? "" : " (scaled down)");
        snprintf(mix, sizeof mix, "%u/%u/%u/%u/%u", x->t.mix[0], x->t.mix[1], x->t.mix[2],
                 x->t.mix[3], x->t.mix[4]);
        snprintf(tpm, sizeof tpm, "%.0f", res->tpm);
        snprintf(thr, sizeof thr, "%u", c->o.threads);
        const char *kv[24];
        unsigned n = 0;
        kv[0] = NULL;
        kv_add(kv, &n, "benchmark", "tpcc");
        kv_add(kv, &n, "cluster", head);
        kv_add(kv, &n, "warehouses", wh);
        kv_add(kv, &n, "items", items);
        kv_add(kv, &n, "customers_per_district", cust);
        kv_add(kv, &n, "mix", mix);
        kv_add(kv, &n, "think_time", "none (closed loop)");
        kv_add(kv, &n, "tpmC", tpm);
        drive_report(stdout, &c->o, total, kv, NULL);
        if (c->o.fmt == DRIVE_TEXT) {
            printf("[TPCC], NewOrdersPerMinute(tpmC), %.0f\n", res->tpm);
            printf("[TPCC], TransactionsPerSecond, %.1f\n", res->tps);
        }
    }
    if (!quiet && c->o.fmt == DRIVE_TEXT) drive_sweep_print(stdout, &sweep, &c->o);
    if (!quiet && report) {
        FILE *o = c->o.fmt == DRIVE_TEXT ? stdout : stderr;
        fputs(report, o);
    } else if (!quiet && failed < 0 && !rc) {
        printf("consistency: not checked\n");
    }
    if (!rc && failed > 0) rc = RDKV_EIO;
    if (!rc && res->errors) rc = RDKV_EIO;
    free(report);
    free(total);
    drive_close(&d);
    if (bench_cluster_close(&bc) && !rc) rc = 1;
    if (rc && !res->why[0]) snprintf(res->why, sizeof res->why, "%s", err);
    return res->rc = rc ? 1 : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* --compare */

static int plot(const char *out, const char *dat)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/plots/tpcc-compare.gp", out);
    FILE *g = fopen(path, "w");
    if (!g) return -1;
    static const struct {
        const char *file, *title, *ylabel;
        int col;
    } p[] = {{"tpcc-throughput", "TPC-C New-Orders per minute (higher is better)", "tpmC", 2},
             {"tpcc-mean", "TPC-C mean transaction latency (lower is better)", "microseconds", 4},
             {"tpcc-p999", "TPC-C 99.9th percentile latency (lower is better)", "microseconds", 5}};
    fprintf(g, "set terminal png size 900,550 font ',10'\nset style data histogram\n"
               "set style histogram cluster gap 1\nset style fill solid 0.8 border -1\n"
               "set boxwidth 0.9\nset grid ytics\nset key top right\nset yrange [0:*]\n"
               "set datafile missing 'NaN'\n");
    for (int i = 0; i < 3; i++)
        fprintf(g,
                "set output '%s/plots/%s.png'\nset title '%s'\nset ylabel '%s'\n"
                "plot '%s' index 0 using %d:xtic(1) title 'low contention (10 warehouses/node)', "
                "'' index 1 using %d title 'high contention (1 warehouse/node)'\n",
                out, p[i].file, p[i].title, p[i].ylabel, dat, p[i].col, p[i].col);
    fclose(g);
    return bench_gnuplot(path);
}

static int compare(struct tpcc_cli *x)
{
    const char *locks = x->locks ? x->locks : "rwlock,dslr,drtm,rof,trad,alock";
    char *dup = strdup(locks), *save = NULL;
    const char *names[16];
    unsigned nl = 0;
    for (char *t = strtok_r(dup, ",", &save); t && nl < 16; t = strtok_r(NULL, ",", &save)) names[nl++] = t;
    const unsigned wpns[2] = {10, 1};
    struct result res[2][16];
    memset(res, 0, sizeof res);
    int64_t t0 = clock_now_ns();
    for (unsigned s = 0; s < 2; s++)
        for (unsigned l = 0; l < nl && !bench_stop; l++) {
            struct tpcc_cli y = *x;
            y.t.warehouses_per_node = wpns[s];
            y.c.row_lock = names[l];
            y.c.co.node_args[0] = NULL;
            drive_cli_finish(&y.c, "tpcc");
            struct result *r = &res[s][l];
            snprintf(r->lock, sizeof r->lock, "%s", names[l]);
            r->wpn = wpns[s];
            fprintf(stderr, "kvbench tpcc --compare: %s contention, %s\n", s ? "high" : "low", names[l]);
            one_run(&y, r, true);
            fprintf(stderr, "kvbench tpcc --compare:   %s: tpmC %.0f, mean %.0f us, p99.9 %.0f us, "
                            "retries/commit %.3f, errors %llu, consistency %s\n",
                    names[l], r->tpm, r->mean_us, r->p999_us, r->retries,
                    (unsigned long long)r->errors,
                    r->failed_checks == 0 ? "4/4" : (r->failed_checks < 0 ? "not checked" : "FAILED"));
        }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/plots", x->out);
    mkdir(x->out, 0755);
    mkdir(dir, 0755);
    char dat[4200], md[4200];
    snprintf(dat, sizeof dat, "%s/plots/tpcc-compare.dat", x->out);
    snprintf(md, sizeof md, "%s/tpcc-compare.md", x->out);
    FILE *f = fopen(dat, "w"), *m = fopen(md, "w");
    if (!f || !m) {
        fprintf(stderr, "kvbench tpcc: cannot write into %s: %s\n", x->out, strerror(errno));
        if (f) fclose(f);
        if (m) fclose(m);
        free(dup);
        return 1;
    }
    unsigned nodes = x->c.co.nodes;
    fprintf(m, "# TPC-C lock-manager comparison (the DSLR paper's Figure 8 setting)\n\n"
               "Written by `kvbench tpcc --compare` (%u nodes started per run, %u threads per node, "
               "%s mode, %.0f s per run after %.0f s warm-up, mix %u/%u/%u/%u/%u, %u items, "
               "%u customers per district, closed loop, no think time; %.0f s in all). tpmC = New-Orders completed per minute; "
               "latencies over all five transaction types, from first attempt to commit (retries "
               "included).\n\n"
               "| contention | row lock | tpmC | txn/s | mean (us) | p99.9 (us) | retries/commit | errors | consistency |\n"
               "|---|---|---:|---:|---:|---:|---:|---:|---|\n",
            nodes, x->c.o.threads, x->c.o.remote ? "remote" : "embedded", x->c.co.seconds,
            (double)x->c.o.warmup_ns / 1e9, x->t.mix[0], x->t.mix[1], x->t.mix[2], x->t.mix[3],
            x->t.mix[4], x->t.items,
            x->t.customers_per_district, (double)(clock_now_ns() - t0) / 1e9);
    for (unsigned s = 0; s < 2; s++) {
        fprintf(f, "# %s contention: lock tpmC tps mean_us p999_us retries\n", s ? "high" : "low");
        for (unsigned l = 0; l < nl; l++) {
            struct result *r = &res[s][l];
            const char *lvl = s ? "high (1 wh/node)" : "low (10 wh/node)";
            if (!r->ran) {
                fprintf(m, "| %s | %s | not run: %s | | | | | | |\n", lvl, r->lock, r->why);
                fprintf(f, "%s NaN NaN NaN NaN NaN\n", r->lock);
                continue;
            }
            char mean[32], p999[32];
            /* nothing committed: no latency to speak of (the table says how many failed) */
            snprintf(mean, sizeof mean, r->tps > 0 ? "%.0f" : "none completed", r->mean_us);
            snprintf(p999, sizeof p999, r->tps > 0 ? "%.0f" : "none completed", r->p999_us);
            fprintf(m, "| %s | %s | %.0f | %.1f | %s | %s | %.3f | %llu | %s |\n", lvl, r->lock,
                    r->tpm, r->tps, mean, p999, r->retries, (unsigned long long)r->errors,
                    r->failed_checks == 0 ? "4/4 hold" : (r->failed_checks < 0 ? "not checked" : "FAILED"));
            if (r->tps > 0)
                fprintf(f, "%s %.1f %.1f %.1f %.1f %.4f\n", r->lock, r->tpm, r->tps, r->mean_us,
                        r->p999_us, r->retries);
            else
                fprintf(f, "%s 0 0 NaN NaN NaN\n", r->lock);
        }
        fprintf(f, "\n\n");
    }
    fclose(f);
    int pr = plot(x->out, dat);
    if (pr == 0)
        fprintf(m, "\n![throughput](plots/tpcc-throughput.png)\n![mean latency](plots/tpcc-mean.png)\n"
                   "![p99.9 latency](plots/tpcc-p999.png)\n");
    fclose(m);
    printf("wrote %s%s\n", md, pr == 0 ? " and plots/tpcc-{throughput,mean,p999}.png" : "");
    if (pr == 1) fprintf(stderr, "kvbench tpcc: gnuplot is not installed (apt-get install gnuplot-nox): no plots\n");
    int rc = 0;
    for (unsigned s = 0; s < 2; s++)
        for (unsigned l = 0; l < nl; l++)
            if (!res[s][l].ran || res[s][l].failed_checks != 0) rc = 1;
    free(dup);
    return rc;
}

int cmd_tpcc(int argc, char **argv)
{
    struct tpcc_cli x;
    memset(&x, 0, sizeof x);
    drive_cli_init(&x.c);
    tpcc_opts_init(&x.t);
    x.out = "kvbench-report";
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t u;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            fputs(usage, stdout);
            fputs(drive_cli_help, stdout);
            fputs(usage_tail, stdout);
            return 0;
        }
        if (!strcmp(o, "--compare")) {
            x.compare = true;
            continue;
        }
        if (!strcmp(o, "--load-only")) {
            x.load_only = true;
            continue;
        }
        if (!strcmp(o, "--no-load")) {
            x.no_load = true;
            continue;
        }
        if (drive_cli_opt(&x.c, "tpcc", argc, argv, &i)) continue;
        if (!v) bench_value_missing("tpcc", usage, o);
        if (!strcmp(o, "--warehouses-per-node")) {
            if (parse_uint_range(v, 1, 1000, &u)) bench_usage_error("tpcc", "--warehouses-per-node must be 1..1000 (got '%s')", v);
            x.t.warehouses_per_node = (unsigned)u;
        } else if (!strcmp(o, "--items")) {
            if (parse_uint_range(v, 100, TPCC_MAX_ITEMS, &u)) bench_usage_error("tpcc", "--items must be 100..1000000 (got '%s')", v);
            x.t.items = (unsigned)u;
        } else if (!strcmp(o, "--customers")) {
            if (parse_uint_range(v, 10, TPCC_MAX_CUSTOMERS, &u)) bench_usage_error("tpcc", "--customers must be 10..65535 (got '%s')", v);
            x.t.customers_per_district = (unsigned)u;
        } else if (!strcmp(o, "--mix")) {
            unsigned m[5], sum = 0;
            if (sscanf(v, "%u,%u,%u,%u,%u", &m[0], &m[1], &m[2], &m[3], &m[4]) != 5)
                bench_usage_error("tpcc", "--mix needs five percentages (got '%s')", v);
            for (int k = 0; k < 5; k++) sum += m[k], x.t.mix[k] = m[k];
            if (sum != 100) bench_usage_error("tpcc", "--mix must add up to 100 (got '%s')", v);
        } else if (!strcmp(o, "--locks")) {
            x.locks = v;
        } else if (!strcmp(o, "--out")) {
            x.out = v;
        } else {
            bench_usage_error("tpcc", "unknown option '%s'", o);
        }
        i++;
    }
    if (!x.c.seconds_given) x.c.co.seconds = 10;
    x.c.seconds_given = true;
    if (x.compare && (x.c.co.config || x.c.co.endpoints))
        bench_usage_error("tpcc", "--compare starts its own nodes for every row lock; drop %s",
                          x.c.co.config ? "--config" : "--endpoints");
    if (x.no_load && !(x.c.co.config || x.c.co.endpoints))
        bench_usage_error("tpcc", "--no-load needs a running cluster (--endpoints or --config)%s", "");
    char err[256];
    uint8_t tmp[TPCC_CFG_LEN];
    size_t len;
    x.t.nodes = x.c.co.nodes;
    if (tpcc_cfg_pack(&x.t, tmp, sizeof tmp, &len, err, sizeof err)) bench_usage_error("tpcc", "%s", err);
    bench_install_signals();
    if (x.compare) return compare(&x);
    drive_cli_finish(&x.c, "tpcc");
    struct result r;
    memset(&r, 0, sizeof r);
    return one_run(&x, &r, false);
}
