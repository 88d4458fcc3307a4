/* kvbench lock: the lock-table benchmark of the ALock and DSLR papers. Worker threads inside every
 * node run ops -- take K locks (on their own node's part of the table with probability
 * --locality, else on other nodes'; shared with probability --read-ratio), release them -- and
 * the nodes are separate processes that share nothing but the fabric. Ops that time out or are
 * aborted by a lease reset are retried, as transactions would be. --sweep runs the ALock paper's
 * grid for alock, spin and mcs and writes a table and gnuplot plots. */
#include "bench.h"

#include "common/clock.h"
#include "common/parse.h"
#include "locks/lock.h"
#include "server/bench.h"
#include "server/proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage[] =
    "usage: kvbench lock [--algo A[,A...]] [--nodes N | --config FILE] [options]\n"
    "\n"
    "Each op takes --locks-per-op distinct locks of a table partitioned equally across the\n"
    "nodes, in ascending order, holds them for --cs-ns, then releases them all. Each lock is on\n"
    "the worker's own node with probability --locality, else on another node; within a node's\n"
    "part its index is uniform or power-law distributed; it is taken shared with probability\n"
    "--read-ratio. Workers run inside the nodes (kvserver), so local locks are in the worker's\n"
    "own arena. An op whose attempt times out (--timeout-ms), is aborted by a lease reset, or\n"
    "outlives a lease is released and retried until it succeeds; its latency covers every\n"
    "attempt. Reports ops/s, mean and p50/p99/p99.9 latency, fabric round trips per op, the\n"
    "counts of timeouts, aborts and lease resets, and the latency CDF.\n"
    "\n"
    "  --algo A[,A...]   alock, spin, mcs, dslr, dslr-u, drtm, rof, trad or rwlock, or a list\n"
    "                    to compare them in one run; ratios to the first are printed\n"
    "                    (default alock)\n"
    "  --nodes N         start N local nodes for the run (default 2)\n"
    "  --config FILE     use the running cluster in FILE instead\n"
    "  --transport T     soft, verbs or auto (default soft with --nodes)\n"
    "  --threads T       worker threads per node (default 2)\n"
    "  --tasks K         lock clients per thread, each a task with its own lock state, sharing\n"
    "                    the thread's fabric context (default 1: the thread is the client)\n"
    "  --locks L         locks in the table (default 20)\n"
    "  --locality P      percent of locks on the worker's own node (default 95)\n"
    "  --read-ratio R    percent of locks taken shared (default 0; alock, spin and mcs have\n"
    "                    only the exclusive mode)\n"
    "  --locks-per-op K  distinct locks per op, 1..16 (default 1)\n"
    "  --dist D          uniform or powerlaw: how the index within a node's part is chosen\n"
    "                    (default uniform); powerlaw: P(i) ~ (i+1)^-alpha\n"
    "  --alpha A         the power-law exponent, > 1 (default 2, as in DSLR's Figure 15)\n"
    "  --cs-ns N         busy nanoseconds inside each critical section (default 0)\n"
    "  --think-us U      microseconds a worker sleeps between ops, holding nothing (default 0)\n"
    "  --lease-ms M      lease of dslr, dslr-u, trad and rwlock holders (default 10)\n"
    "  --timeout-ms M    deadline of one attempt of an op, 0 = none (default 100)\n"
    "  --omega-us W      DSLR's poll unit (a waiter sleeps W x the tickets ahead before it\n"
    "                    looks again); default: the transport's round trip, measured\n"
    "  --fail-pct P      percent (may be fractional) of holdings of other nodes' locks that are\n"
    "                    never released, as if their holder died (default 0); only for the\n"
    "                    algorithms that recover from dead holders: dslr, dslr-u, trad, rwlock\n"
    "  --seconds S       measured seconds per run (default 2), after --warmup S (default 0.5)\n"
    "  --budgets L,R     ALock's and rwlock's local and remote budgets (default 5,20)\n"
    "  --spin-us U       a thread waiting for a fabric completion polls U us before it blocks\n"
    "                    (default 0 here: workers and NIC threads outnumber the cores on small\n"
    "                    machines, and polling takes the CPU from the thread being waited for)\n"
    "  --json FILE       write the results as JSON\n"
    "  --cdf FILE        write the (first algorithm's) latency CDF as CSV (latency_us,fraction)\n"
    "  --repeat N        run each point N times and report the run with the median ops/s\n"
    "                    (default 1)\n"
    "  --sweep           run the ALock paper's grid -- locks 20/100/1000 x locality\n"
    "                    85/90/95/100 x threads 1..T -- for alock, spin and mcs; write a table\n"
    "                    and gnuplot plots (needs gnuplot) into --out\n"
    "  --out DIR         where --sweep writes lock-sweep.md and plots/ (default docs)\n"
    "  -h, --help        this text\n"
    "\n"
    "examples:\n"
    "  kvbench lock --algo dslr,drtm,rof --locks 4 --read-ratio 50 --locality 50\n"
    "  kvbench lock --algo rwlock,dslr --locks 1000 --read-ratio 50 --locality 95\n"
    "  kvbench lock --algo dslr --dist powerlaw --alpha 2 --locks 10000 --fail-pct 0.1\n";

struct lock_point {
    char algo[16];
    unsigned threads, locks, locality;
    unsigned read_ratio, k; /* percent shared, locks per op */
    struct bench_lock_res r; /* merged over nodes */
    double seconds;
};

static double ops_per_s(const struct lock_point *p)
{
    return p->seconds > 0 ? (double)p->r.ops / p->seconds : 0;
}
static double rt_per_op(const struct lock_point *p)
{
    return p->r.ops ? (double)p->r.round_trips / (double)p->r.ops : 0;
}

/* One measurement on every node at once. */
static int run_point(struct fabric *f, struct lock_point *pt, const struct bench_lock_req *base,
                     char *err, size_t errcap)
{
    struct fab_ctx *c;
    if (fab_ctx_create(f, &c)) {
        snprintf(err, errcap, "cannot create a fabric context");
        return RDKV_ENOMEM;
    }
    unsigned n = fab_num_nodes(f);
    struct fab_buf *resp = calloc(n, sizeof *resp);
    int rc = 0;
    struct pack_w w;
    pack_w_init(&w);
    pack_u32(&w, pt->locks);
    for (unsigned i = 0; i < n && !rc; i++) {
        rc = fab_rpc_call(c, (uint16_t)i, KV_RPC_BENCH_LOCK_PREPARE, w.p, w.len, &resp[i], 0);
        if (rc) snprintf(err, errcap, "node %u: preparing the lock table: %s", i, rdkv_strerror(rc));
    }
    pack_w_free(&w);
    struct bench_lock_req q = *base;
    snprintf(q.algo, sizeof q.algo, "%s", pt->algo);
    q.threads = pt->threads;
    q.locks = pt->locks;
    q.locality = pt->locality;
    pack_w_init(&w);
    bench_lock_req_pack(&q, &w);
    int64_t timeout = q.warmup_ns + q.run_ns + 60 * NS_PER_S;
    for (unsigned i = 0; i < n && !rc; i++) {
        rc = fab_rpc_post(c, (uint16_t)i, KV_RPC_BENCH_LOCK_RUN, w.p, w.len, &resp[i], timeout, i);
        if (rc) snprintf(err, errcap, "node %u: %s", i, rdkv_strerror(rc));
    }
    pack_w_free(&w);
    memset(&pt->r, 0, sizeof pt->r);
    hist_init(&pt->r.h);
    pt->seconds = 0;
    unsigned got = 0;
    while (!rc && got < n) {
        struct fab_cqe cq[LAUNCH_MAX];
        int k = fab_wait(c, cq, LAUNCH_MAX, -1);
        for (int j = 0; j < k; j++) {
            unsigned i = (unsigned)cq[j].tag;
            struct bench_lock_res r;
            if (cq[j].status) {
                rc = cq[j].status;
                snprintf(err, errcap, "node %u: the run failed: %s", i, rdkv_strerror(rc));
            } else if (bench_lock_res_unpack(&r, resp[i].data, resp[i].len)) {
                rc = RDKV_EPROTO;
                snprintf(err, errcap, "node %u: malformed result", i);
            } else {
                bench_lock_res_add(&pt->r, &r);
                double s = (double)r.elapsed_ns / 1e9;
                if (s > pt->seconds) pt->seconds = s;
            }
            got++;
        }
    }
    /* whatever is still in flight completes (or times out) before the context goes away */
    while (fab_inflight(c)) {
        struct fab_cqe cq[LAUNCH_MAX];
        fab_wait(c, cq, LAUNCH_MAX, -1);
    }
    for (unsigned i = 0; i < n; i++) fab_buf_free(&resp[i]);
    free(resp);
    fab_ctx_destroy(c);
    return rc;
}

static void series_name(const struct lock_point *p, char *out, size_t cap)
{
    char up[16];
    size_t i;
    for (i = 0; p->algo[i] && i < sizeof up - 1; i++)
        up[i] = (char)(p->algo[i] >= 'a' && p->algo[i] <= 'z' ? p->algo[i] - 32 : p->algo[i]);
    up[i] = 0;
    int n = snprintf(out, cap, "%s-L%u-P%u-T%u", up, p->locks, p->locality, p->threads);
    if (n > 0 && (size_t)n < cap && (p->read_ratio || p->k > 1))
        snprintf(out + n, cap - (size_t)n, "-R%u-K%u", p->read_ratio, p->k);
}

static void print_point(const struct lock_point *p)
{
    struct bench_stats s;
    memset(&s, 0, sizeof s);
    series_name(p, s.name, sizeof s.name);
    s.ok = p->r.ops;
    s.errors = p->r.errors;
    s.seconds = p->seconds;
    s.round_trips_per_op = rt_per_op(p);
    s.h = p->r.h;
    bench_print_ycsb(stdout, &s);
    printf("[%s], FabricOpsPerOp, %.3f\n", s.name,
           p->r.ops ? (double)p->r.fabric_ops / (double)p->r.ops : 0.0);
    printf("[%s], LocalOps(%%), %.1f\n", s.name,
           p->r.ops ? 100.0 * (double)p->r.local_ops / (double)p->r.ops : 0.0);
    printf("[%s], Timeouts, %llu\n[%s], Aborts, %llu\n[%s], LeaseResets, %llu\n"
           "[%s], LeaseExpiredReleases, %llu\n[%s], OverflowResets, %llu\n[%s], Retries, %llu\n"
           "[%s], InjectedFailures, %llu\n",
           s.name, (unsigned long long)p->r.timeouts, s.name, (unsigned long long)p->r.aborts,
           s.name, (unsigned long long)p->r.resets, s.name,
           (unsigned long long)p->r.lease_expired, s.name,
           (unsigned long long)p->r.overflow_resets, s.name, (unsigned long long)p->r.retries,
           s.name, (unsigned long long)p->r.injected);
    fflush(stdout);
}

struct cdf_out {
    FILE *f;
    struct json *j;
};

static bool cdf_csv(void *arg, uint64_t v, double cum)
{
    fprintf(((struct cdf_out *)arg)->f, "%.3f,%.6f\n", (double)v / 1e3, cum);
    return true;
}

static bool cdf_json(void *arg, uint64_t v, double cum)
{
    struct json *j = ((struct cdf_out *)arg)->j;
    json_arr_begin(j);
    json_double(j, (double)v / 1e3);
    json_double(j, cum);
    json_arr_end(j);
    return true;
}

static void json_point(struct json *j, const struct lock_point *p, unsigned nodes)
{
    json_obj_begin(j);
    json_kv_str(j, "algo", p->algo);
    json_kv_u64(j, "nodes", nodes);
    json_kv_u64(j, "threads", p->threads);
    json_kv_u64(j, "locks", p->locks);
    json_kv_u64(j, "locality", p->locality);
    json_kv_u64(j, "read_ratio", p->read_ratio);
    json_kv_u64(j, "locks_per_op", p->k);
    struct bench_stats s;
    memset(&s, 0, sizeof s);
    s.ok = p->r.ops;
    s.errors = p->r.errors;
    s.seconds = p->seconds;
    s.round_trips_per_op = rt_per_op(p);
    s.h = p->r.h;
    bench_json_metrics(j, &s);
    json_kv_double(j, "round_trips_per_op", rt_per_op(p));
    json_kv_double(j, "fabric_ops_per_op",
                   p->r.ops ? (double)p->r.fabric_ops / (double)p->r.ops : 0.0);
    json_kv_u64(j, "timeouts", p->r.timeouts);
    json_kv_u64(j, "aborts", p->r.aborts);
    json_kv_u64(j, "lease_resets", p->r.resets);
    json_kv_u64(j, "lease_expired_releases", p->r.lease_expired);
    json_kv_u64(j, "overflow_resets", p->r.overflow_resets);
    json_kv_u64(j, "retries", p->r.retries);
    json_kv_u64(j, "injected_failures", p->r.injected);
    json_key(j, "cdf");
    json_arr_begin(j);
    struct cdf_out co = {.j = j};
    hist_cdf(&p->r.h, cdf_json, &co);
    json_arr_end(j);
    json_obj_end(j);
}

/* ------------------------------------------------------------------------------------------ */
/* The sweep: tables and plots */

static const unsigned sweep_locks[] = {20, 100, 1000};
static const unsigned sweep_loc[] = {85, 90, 95, 100};
static const char *const sweep_algos[] = {"alock", "spin", "mcs"};
#define NLOCKS 3
#define NLOC 4
#define NALG 3

static int write_plots(const char *out, struct lock_point *pts, unsigned maxt, unsigned nodes,
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
                    fprintf(f, " %.1f", ops_per_s(&pts[i]));
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
                hist_cdf(&pts[i].r.h, cdf_csv, &co);
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

static void write_table(FILE *f, struct lock_point *pts, unsigned maxt)
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
                        sweep_locks[l], sweep_loc[p], t, ops_per_s(a), ops_per_s(s), ops_per_s(m),
                        ops_per_s(s) > 0 ? ops_per_s(a) / ops_per_s(s) : 0,
                        ops_per_s(m) > 0 ? ops_per_s(a) / ops_per_s(m) : 0,
                        hist_percentile(&a->r.h, 50) / 1e3, hist_percentile(&s->r.h, 50) / 1e3,
                        hist_percentile(&m->r.h, 50) / 1e3, rt_per_op(a));
            }
}

/* ------------------------------------------------------------------------------------------ */

int cmd_lock(int argc, char **argv)
{
    struct bench_common co;
    bench_common_init(&co);
    co.nodes = 2;
    co.spin_ns = 0; /* workers block at once: see --help */
    const char *algos[8] = {"alock"}, *cdf = NULL, *out = "docs";
    unsigned nalgos = 1;
    unsigned threads = 2, locks = 20, locality = 95, repeat = 1;
    bool sweep = false, transport_given = false;
    double warmup = 0.5;
    struct bench_lock_req base;
    memset(&base, 0, sizeof base);
    base.local_budget = 5;
    base.remote_budget = 20;
    base.locks_per_op = 1;
    base.tasks = 1;
    base.alpha_milli = 2000;
    base.timeout_ns = 100 * NS_PER_MS;
    base.lease_ns = 10 * NS_PER_MS;
    bool alpha_given = false;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t u;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        if (!strcmp(o, "--transport")) transport_given = true;
        if (!strcmp(o, "--sweep")) {
            sweep = true;
            continue;
        }
        if (bench_common_opt(&co, argc, argv, &i)) continue;
        if (!v) bench_usage_error("lock", "option '%s' needs a value (or is unknown)", o);
        if (!strcmp(o, "--algo")) {
            nalgos = 0;
            char *dup = strdup(v), *save = NULL;
            for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (!lock_algo_find(t) || nalgos == 8)
                    bench_usage_error("lock", "--algo must be one of alock, spin, mcs, dslr, dslr-u, drtm, rof, trad, rwlock or a list of up to 8 (got '%s')", v);
                algos[nalgos++] = lock_algo_find(t)->name;
            }
            free(dup);
            if (!nalgos) bench_usage_error("lock", "--algo must be one of alock, spin, mcs, dslr, dslr-u, drtm, rof, trad, rwlock or a list of up to 8 (got '%s')", v);
        } else if (!strcmp(o, "--threads")) {
            if (parse_uint_range(v, 1, BENCH_MAX_THREADS, &u)) bench_usage_error("lock", "--threads must be 1..64 (got '%s')", v);
            threads = (unsigned)u;
        } else if (!strcmp(o, "--tasks")) {
            if (parse_uint_range(v, 1, BENCH_MAX_TASKS, &u)) bench_usage_error("lock", "--tasks must be 1..256 (got '%s')", v);
            base.tasks = (unsigned)u;
        } else if (!strcmp(o, "--locks")) {
            if (parse_uint_range(v, 1, 1000000, &u)) bench_usage_error("lock", "--locks must be 1..1000000 (got '%s')", v);
            locks = (unsigned)u;
        } else if (!strcmp(o, "--locality")) {
            if (parse_uint_range(v, 0, 100, &u)) bench_usage_error("lock", "--locality must be 0..100 (got '%s')", v);
            locality = (unsigned)u;
        } else if (!strcmp(o, "--read-ratio")) {
            if (parse_uint_range(v, 0, 100, &u)) bench_usage_error("lock", "--read-ratio must be 0..100 (got '%s')", v);
            base.read_ratio = (uint32_t)u;
        } else if (!strcmp(o, "--locks-per-op")) {
            if (parse_uint_range(v, 1, BENCH_MAX_LOCKS_PER_OP, &u)) bench_usage_error("lock", "--locks-per-op must be 1..16 (got '%s')", v);
            base.locks_per_op = (uint32_t)u;
        } else if (!strcmp(o, "--dist")) {
            if (!strcmp(v, "uniform")) base.dist = BENCH_DIST_UNIFORM;
            else if (!strcmp(v, "powerlaw")) base.dist = BENCH_DIST_POWERLAW;
            else bench_usage_error("lock", "--dist must be uniform or powerlaw (got '%s')", v);
        } else if (!strcmp(o, "--alpha")) {
            double a;
            if (parse_double(v, &a) || !(a > 1.0) || a > 10.0) bench_usage_error("lock", "--alpha must be in (1, 10] (got '%s')", v);
            base.alpha_milli = (uint32_t)(a * 1000.0 + 0.5);
            if (base.alpha_milli <= 1000) base.alpha_milli = 1001;
            alpha_given = true;
        } else if (!strcmp(o, "--think-us")) {
            if (parse_uint_range(v, 0, 1000000, &u)) bench_usage_error("lock", "--think-us must be 0..1000000 (got '%s')", v);
            base.think_ns = (int64_t)u * NS_PER_US;
        } else if (!strcmp(o, "--lease-ms")) {
            double m;
            if (parse_double(v, &m) || !(m >= 0.01) || m > 60000) bench_usage_error("lock", "--lease-ms must be 0.01..60000 (got '%s')", v);
            base.lease_ns = (int64_t)(m * 1e6);
        } else if (!strcmp(o, "--timeout-ms")) {
            double m;
            if (parse_double(v, &m) || !(m >= 0) || m > 600000) bench_usage_error("lock", "--timeout-ms must be 0..600000 (got '%s')", v);
            base.timeout_ns = (int64_t)(m * 1e6);
        } else if (!strcmp(o, "--omega-us")) {
            double m;
            if (parse_double(v, &m) || !(m > 0) || m > 100000) bench_usage_error("lock", "--omega-us must be in (0, 100000] (got '%s')", v);
            base.omega_ns = (int64_t)(m * 1e3);
            if (base.omega_ns < 1) base.omega_ns = 1;
        } else if (!strcmp(o, "--fail-pct")) {
            double pc;
            if (parse_double(v, &pc) || !(pc >= 0) || pc > 100) bench_usage_error("lock", "--fail-pct must be 0..100 (got '%s')", v);
            base.fail_ppm = (uint32_t)(pc * 1e4 + 0.5);
        } else if (!strcmp(o, "--warmup")) {
            if (parse_double(v, &warmup) || warmup < 0 || warmup > 600) bench_usage_error("lock", "bad --warmup '%s'", v);
        } else if (!strcmp(o, "--cs-ns")) {
            if (parse_uint_range(v, 0, 1000000000, &u)) bench_usage_error("lock", "bad --cs-ns '%s'", v);
            base.cs_ns = (int64_t)u;
        } else if (!strcmp(o, "--budgets")) {
            unsigned long lb, rb;
            char extra;
            if (sscanf(v, "%lu,%lu%c", &lb, &rb, &extra) != 2 || lb < 1 || rb < 1 || lb > 1000000 || rb > 1000000)
                bench_usage_error("lock", "--budgets needs LOCAL,REMOTE, both >= 1 (got '%s')", v);
            base.local_budget = (int64_t)lb;
            base.remote_budget = (int64_t)rb;
        } else if (!strcmp(o, "--repeat")) {
            if (parse_uint_range(v, 1, 99, &u)) bench_usage_error("lock", "--repeat must be 1..99 (got '%s')", v);
            repeat = (unsigned)u;
        } else if (!strcmp(o, "--cdf")) {
            cdf = v;
        } else if (!strcmp(o, "--out")) {
            out = v;
        } else {
            bench_usage_error("lock", "unknown option '%s'", o);
        }
        i++;
    }
    if (co.config && !transport_given) co.transport = FAB_AUTO;
    base.warmup_ns = (int64_t)(warmup * 1e9);
    base.run_ns = (int64_t)(co.seconds * 1e9);
    base.seed = (uint64_t)clock_now_ns();
    if (alpha_given && base.dist != BENCH_DIST_POWERLAW)
        bench_usage_error("lock", "--alpha goes with --dist powerlaw (got '%s')", "--dist uniform");
    /* every request is checked here, before any node starts, with the nodes' own rules */
    for (unsigned i = 0; i < (sweep ? (unsigned)NALG : nalgos); i++) {
        struct bench_lock_req q = base;
        snprintf(q.algo, sizeof q.algo, "%s", sweep ? sweep_algos[i] : algos[i]);
        q.threads = threads;
        q.locks = sweep ? sweep_locks[0] : locks;
        q.locality = locality;
        const char *why = bench_lock_req_check(&q);
        if (why) {
            fprintf(stderr, "kvbench lock: error: %s: %s\n", q.algo, why);
            return 2;
        }
    }
    bench_install_signals();

    struct bench_cluster bc;
    char err[512];
    if (bench_cluster_open(&bc, &co, 30 * NS_PER_S, err, sizeof err)) {
        fprintf(stderr, "kvbench lock: error: %s\n", err);
        return 1;
    }
    unsigned nn = fab_num_nodes(bc.f);
    if (locks / nn + 1 > LOCKTABLE_MAX_PER_NODE) {
        fprintf(stderr, "kvbench lock: error: at most %u locks per node\n", LOCKTABLE_MAX_PER_NODE - 1);
        bench_cluster_close(&bc);
        return 2;
    }
    const char *tname = fab_transport_name(bc.transport);
    printf("# kvbench lock: transport %s, %u node%s%s, %.1f s per run after %.1f s warm-up, "
           "budgets %lld/%lld, critical section %lld ns, think %lld us, %u%% shared, %u lock%s "
           "per op, %s, lease %.1f ms, attempt timeout %.1f ms, %.4f%% injected failures\n",
           tname, nn, nn == 1 ? "" : "s", bc.launched ? " (local processes)" : "", co.seconds,
           warmup, (long long)base.local_budget, (long long)base.remote_budget,
           (long long)base.cs_ns, (long long)(base.think_ns / NS_PER_US), base.read_ratio,
           base.locks_per_op, base.locks_per_op == 1 ? "" : "s",
           base.dist == BENCH_DIST_POWERLAW ? "power-law" : "uniform", (double)base.lease_ns / 1e6,
           (double)base.timeout_ns / 1e6, (double)base.fail_ppm / 1e4);
    if (base.dist == BENCH_DIST_POWERLAW)
        printf("# power-law exponent %.3f\n", (double)base.alpha_milli / 1000.0);
    fflush(stdout);

    int rc = 0;
    size_t npts = sweep ? (size_t)NLOCKS * NLOC * threads * NALG : nalgos;
    struct lock_point *pts = calloc(npts, sizeof *pts);
    if (!pts) {
        bench_cluster_close(&bc);
        return 1;
    }
    for (size_t i = 0; i < npts && !bench_stop; i++) {
        struct lock_point *p = &pts[i];
        if (sweep) {
            size_t a = i % NALG, t = (i / NALG) % threads, loc = (i / NALG / threads) % NLOC,
                   l = i / NALG / threads / NLOC;
            snprintf(p->algo, sizeof p->algo, "%s", sweep_algos[a]);
            p->threads = (unsigned)t + 1;
            p->locality = sweep_loc[loc];
            p->locks = sweep_locks[l];
            p->read_ratio = base.read_ratio;
            p->k = base.locks_per_op;
        } else {
            snprintf(p->algo, sizeof p->algo, "%s", algos[i]);
            p->threads = threads;
            p->locality = locality;
            p->locks = locks;
            p->read_ratio = base.read_ratio;
            p->k = base.locks_per_op;
        }
        int r = 0;
        struct lock_point *runs = calloc(repeat, sizeof *runs); /* ~30 KB each */
        if (!runs) {
            rc = 1;
            break;
        }
        for (unsigned k = 0; k < repeat && !r && !bench_stop; k++) {
            runs[k] = *p;
            r = run_point(bc.f, &runs[k], &base, err, sizeof err);
        }
        if (r || bench_stop) {
            if (r) fprintf(stderr, "kvbench lock: %s\n", err);
            free(runs);
            rc = 1;
            break;
        }
        /* the run with the median throughput stands for the point */
        for (unsigned a = 0; a < repeat; a++)
            for (unsigned b = a + 1; b < repeat; b++)
                if (ops_per_s(&runs[b]) < ops_per_s(&runs[a])) {
                    struct lock_point tmp = runs[a];
                    runs[a] = runs[b];
                    runs[b] = tmp;
                }
        *p = runs[repeat / 2];
        free(runs);
        if (p->r.errors) rc = 1;
        print_point(p);
    }

    if (!sweep && !rc && !bench_stop) {
        printf("\n%u nodes x %u threads x %u tasks = %u lock clients\n", nn, threads, base.tasks,
               nn * threads * base.tasks);
        printf("%-7s %4s %6s %4s %4s %2s %11s %9s %9s %9s %10s %7s %8s %7s %7s\n", "algo",
               "thr", "locks", "loc%", "rd%", "K", "ops/s", "mean(us)", "p50(us)", "p99(us)",
               "p99.9(us)", "RT/op", "timeouts", "aborts", "resets");
        for (unsigned i = 0; i < nalgos; i++) {
            const struct lock_point *p = &pts[i];
            printf("%-7s %4u %6u %4u %4u %2u %11.0f %9.2f %9.2f %9.2f %10.2f %7.3f %8llu %7llu "
                   "%7llu\n",
                   p->algo, p->threads, p->locks, p->locality, p->read_ratio, p->k, ops_per_s(p),
                   hist_mean(&p->r.h) / 1e3, hist_percentile(&p->r.h, 50) / 1e3,
                   hist_percentile(&p->r.h, 99) / 1e3, hist_percentile(&p->r.h, 99.9) / 1e3,
                   rt_per_op(p), (unsigned long long)p->r.timeouts,
                   (unsigned long long)p->r.aborts, (unsigned long long)p->r.resets);
        }
        for (unsigned i = 0; i < nalgos; i++) {
            const struct lock_point *p = &pts[i];
            printf("%s latency CDF (us): p1 %.2f  p10 %.2f  p25 %.2f  p50 %.2f  p75 %.2f  p90 %.2f"
                   "  p99 %.2f  p99.9 %.2f  max %.2f\n",
                   p->algo, hist_percentile(&p->r.h, 1) / 1e3, hist_percentile(&p->r.h, 10) / 1e3,
                   hist_percentile(&p->r.h, 25) / 1e3, hist_percentile(&p->r.h, 50) / 1e3,
                   hist_percentile(&p->r.h, 75) / 1e3, hist_percentile(&p->r.h, 90) / 1e3,
                   hist_percentile(&p->r.h, 99) / 1e3, hist_percentile(&p->r.h, 99.9) / 1e3,
                   p->r.h.max / 1e3);
        }
        for (unsigned i = 1; i < nalgos; i++) {
            double p0 = (double)hist_percentile(&pts[0].r.h, 99.9),
                   pi = (double)hist_percentile(&pts[i].r.h, 99.9);
            if (ops_per_s(&pts[i]) > 0 && pi > 0)
                printf("%s / %s: throughput %.2fx, p99.9 latency %.3fx\n", pts[0].algo,
                       pts[i].algo, ops_per_s(&pts[0]) / ops_per_s(&pts[i]), p0 / pi);
        }
    }
    if (cdf && !sweep) {
        FILE *f = fopen(cdf, "w");
        if (!f) {
            fprintf(stderr, "kvbench lock: cannot write %s: %s\n", cdf, strerror(errno));
            rc = 1;
        } else {
            fprintf(f, "latency_us,fraction\n");
            struct cdf_out c2 = {.f = f};
            hist_cdf(&pts[0].r.h, cdf_csv, &c2); /* the first algorithm's */
            fclose(f);
        }
    }
    size_t done = 0;
    while (done < npts && pts[done].r.ops + pts[done].r.errors > 0) done++;
    if (co.json) {
        struct json j;
        FILE *jf = bench_json_begin(&j, co.json, "lock", &bc, tname, nn);
        if (!jf) {
            rc = 1;
        } else {
            json_kv_double(&j, "seconds", co.seconds);
            json_kv_double(&j, "warmup_seconds", warmup);
            json_kv_i64(&j, "alock_local_budget", base.local_budget);
            json_kv_i64(&j, "alock_remote_budget", base.remote_budget);
            json_kv_i64(&j, "cs_ns", base.cs_ns);
            json_kv_i64(&j, "think_ns", base.think_ns);
            json_kv_str(&j, "dist", base.dist == BENCH_DIST_POWERLAW ? "powerlaw" : "uniform");
            if (base.dist == BENCH_DIST_POWERLAW)
                json_kv_double(&j, "alpha", (double)base.alpha_milli / 1000.0);
            json_kv_i64(&j, "lease_ns", base.lease_ns);
            json_kv_i64(&j, "timeout_ns", base.timeout_ns);
            json_kv_double(&j, "fail_pct", (double)base.fail_ppm / 1e4);
            json_kv_i64(&j, "omega_ns", base.omega_ns);
            json_kv_bool(&j, "sweep", sweep);
            json_obj_end(&j);
            json_key(&j, "results");
            json_arr_begin(&j);
            for (size_t i = 0; i < done; i++) json_point(&j, &pts[i], nn);
            json_arr_end(&j);
            json_obj_end(&j);
            if (fclose(jf)) rc = 1;
        }
    }
    if (sweep && done == npts) {
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
                    nn, threads, co.seconds, warmup, repeat, tname, nn,
                    (long long)base.local_budget, (long long)base.remote_budget, repeat);
            write_table(f, pts, threads);
            fclose(f);
            printf("\nwrote %s\n", path);
        }
        if (write_plots(out, pts, threads, nn, tname)) {
            fprintf(stderr, "kvbench lock: plotting failed (is gnuplot installed? Debian: "
                            "gnuplot-nox); the data files are in %s/plots\n", out);
            rc = 1;
        } else {
            printf("wrote %s/plots/lock-sweep-L{20,100,1000}.png and lock-cdf.png\n", out);
        }
    }
    free(pts);
    if (bench_cluster_close(&bc)) {
        fprintf(stderr, "kvbench lock: a node did not stop cleanly\n");
        rc = 1;
    }
    if (bench_stop) {
        fprintf(stderr, "kvbench lock: interrupted\n");
        return 130;
    }
    return rc;
}
