/* kvbench lock: the lock-table benchmark of the ALock, DSLR and HPDC'16 RMA-lock papers. Worker
 * threads (and their tasks) inside every node run ops -- take K locks (on their own node's part
 * of the table with probability --locality, else on other nodes'; shared with probability
 * --read-ratio, or exclusive with probability --writers), release them -- and the nodes are
 * separate processes that share nothing but the fabric. Ops that time out or are aborted by a
 * lease reset are retried, as transactions would be. --bench picks one of the RMA paper's five
 * microbenchmarks. --sweep runs the ALock paper's grid for alock, spin and mcs; --sweep-rma the
 * RMA paper's Figures 3-5 scaled to the machine; both write a table and gnuplot plots. This file
 * is the command line and the choice between them (lock_bench.h has the pieces). */
#include "tools/kvbench/lock_point.h"
#include "tools/kvbench/lock_rma.h"

#include "tools/kvbench/opts.h"

#include "common/clock.h"
#include "common/parse.h"
#include "locks/lock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* kvbench lock's options, as parsed (lock_opts) and then checked (lock_cli_finish). */
struct lock_cli {
    struct bench_common co;
    const char *algos[8], *cdf, *out;
    unsigned nalgos;
    unsigned threads, locks, locality, repeat;
    unsigned read_ratio, cs_ns, think_us, tdc;
    double warmup, writers, lease_ms, timeout_ms, fail_pct;
    unsigned sweep_ps[RMA_MAXP], nsweep_ps;
    bool figs[6];
    bool sweep, sweep_rma, transport_given, nodes_given, seconds_given, warmup_given;
    bool timeout_given, read_given, writers_given, cs_given, think_given, tl_given;
    bool repeat_given, figs_given, alpha_given;
    struct bench_lock_req base;
};

static bool exclusive_only(const char *algo)
{
    const struct lock_algo *a = lock_algo_find(algo);
    return a && !(a->modes & (1u << LOCK_SHARED));
}

/* --tdc N for clients_per_node clients per node over `nodes` nodes: a counter every k-th node
 * (N >= C) or c counters per node (N < C). NULL, or what is wrong. */
static const char *tdc_layout(unsigned tdc, unsigned cpn, unsigned nodes, uint32_t *k, uint32_t *c,
                              char *why, size_t cap)
{
    *k = *c = 1;
    if (tdc >= cpn) {
        if (tdc % cpn) {
            snprintf(why, cap, "--tdc %u is not a multiple of the %u lock clients per node "
                               "(threads x tasks)", tdc, cpn);
            return why;
        }
        *k = tdc / cpn;
        if (*k > nodes || nodes % *k) {
            snprintf(why, cap, "--tdc %u means one counter per %u nodes (%u / %u clients per "
                               "node), which does not divide the %u nodes evenly",
                     tdc, *k, tdc, cpn, nodes);
            return why;
        }
    } else {
        if (cpn % tdc) {
            snprintf(why, cap, "--tdc %u does not divide the %u lock clients per node (threads "
                               "x tasks)", tdc, cpn);
            return why;
        }
        *c = cpn / tdc;
        if (*c > 4) {
            snprintf(why, cap, "--tdc %u needs %u counters per node; at most 4 (--tdc %u or more)",
                     tdc, *c, (cpn + 3) / 4);
            return why;
        }
    }
    return NULL;
}

static int parse_list(const char *v, unsigned *out, unsigned max, uint64_t lo, uint64_t hi)
{
    char *dup = strdup(v), *save = NULL;
    unsigned n = 0;
    int bad = !dup;
    for (char *t = dup ? strtok_r(dup, ",", &save) : NULL; t && !bad; t = strtok_r(NULL, ",", &save)) {
        uint64_t u;
        if (n == max || parse_uint_range(t, lo, hi, &u)) bad = 1;
        else out[n++] = (unsigned)u;
    }
    free(dup);
    return bad || !n ? -1 : (int)n;
}


static int opt_algo(void *o, const char *v)
{
    struct lock_cli *c = o;
    char algo_err[512];
    snprintf(algo_err, sizeof algo_err, "--algo must be one of %s, or a list of up to 8 (got '%%s')",
             lock_algo_names());
    c->nalgos = 0;
    char *dup = strdup(v), *save = NULL;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!lock_algo_find(t) || c->nalgos == 8) bench_usage_error("lock", algo_err, v);
        c->algos[c->nalgos++] = lock_algo_find(t)->name;
    }
    free(dup);
    if (!c->nalgos) bench_usage_error("lock", algo_err, v);
    return 0;
}

static int opt_writers(void *o, const char *v)
{
    struct lock_cli *c = o;
    return parse_double(v, &c->writers) || !(c->writers >= 0) || c->writers > 100 ||
           (c->writers > 0 && c->writers < 0.0001);
}

static int opt_bench(void *o, const char *v)
{
    int b = bench_lock_kind_find(v);
    if (b < 0) return 1;
    ((struct lock_cli *)o)->base.bench = (uint32_t)b;
    return 0;
}

/* "A,B" with both in [lo, hi]. */
static int parse_pair(const char *v, unsigned long lo, unsigned long hi, int64_t *a, int64_t *b)
{
    unsigned long x, y;
    char extra;
    if (sscanf(v, "%lu,%lu%c", &x, &y, &extra) != 2 || x < lo || y < lo || x > hi || y > hi)
        return 1;
    *a = (int64_t)x;
    *b = (int64_t)y;
    return 0;
}

static int opt_tl(void *o, const char *v)
{
    struct lock_cli *c = o;
    return parse_pair(v, 1, 1000000, &c->base.rma_tl2, &c->base.rma_tl1);
}

static int opt_budgets(void *o, const char *v)
{
    struct lock_cli *c = o;
    return parse_pair(v, 1, 1000000, &c->base.local_budget, &c->base.remote_budget);
}

static int opt_tr(void *o, const char *v)
{
    uint64_t u;
    if (parse_uint_range(v, 1, 1000000, &u)) return 1;
    ((struct lock_cli *)o)->base.rma_tr = (int64_t)u;
    return 0;
}

static int opt_sweep_p(void *o, const char *v)
{
    struct lock_cli *c = o;
    int n = parse_list(v, c->sweep_ps, RMA_MAXP, 1, 65536);
    if (n < 0) return 1;
    c->nsweep_ps = (unsigned)n;
    return 0;
}

static int opt_figs(void *o, const char *v)
{
    struct lock_cli *c = o;
    unsigned fl[3];
    int n = parse_list(v, fl, 3, 3, 5);
    if (n < 0) return 1;
    memset(c->figs, 0, sizeof c->figs);
    for (int k = 0; k < n; k++) c->figs[fl[k]] = true;
    return 0;
}

static int opt_dist(void *o, const char *v)
{
    struct lock_cli *c = o;
    if (!strcmp(v, "uniform")) c->base.dist = BENCH_DIST_UNIFORM;
    else if (!strcmp(v, "powerlaw")) c->base.dist = BENCH_DIST_POWERLAW;
    else return 1;
    return 0;
}

static int opt_alpha(void *o, const char *v)
{
    struct lock_cli *c = o;
    double a;
    if (parse_double(v, &a) || !(a > 1.0) || a > 10.0) return 1;
    c->base.alpha_milli = (uint32_t)(a * 1000.0 + 0.5);
    if (c->base.alpha_milli <= 1000) c->base.alpha_milli = 1001;
    return 0;
}

static int opt_omega(void *o, const char *v)
{
    struct lock_cli *c = o;
    double m;
    if (parse_double(v, &m) || !(m > 0) || m > 100000) return 1;
    c->base.omega_ns = (int64_t)(m * 1e3);
    if (c->base.omega_ns < 1) c->base.omega_ns = 1;
    return 0;
}

static const char lock_head[] =
    "usage: kvbench lock [--algo A[,A...]] [--nodes N | --config FILE] [options]\n"
    "       kvbench lock --sweep | --sweep-rma [options]\n"
    "\n"
    "Each op takes --locks-per-op distinct locks of a table partitioned equally across the\n"
    "nodes, in ascending order, runs its critical section, then releases them all. Each lock is\n"
    "on the worker's own node with probability --locality, else on another node; within a\n"
    "node's part its index is uniform or power-law distributed; it is taken shared with\n"
    "probability --read-ratio (or exclusive with probability --writers). Workers run inside the\n"
    "nodes (kvserver), so local locks are in the worker's own arena. An op whose attempt times\n"
    "out (--timeout-ms), is aborted by a lease reset, or outlives a lease is released and\n"
    "retried until it succeeds; its latency covers every attempt. Reports ops/s, mean and\n"
    "p50/p99/p99.9 latency (also of the ops that took a lock exclusive), fabric round trips per\n"
    "op, the counts of timeouts, aborts and lease resets, the latency CDF, and per node the\n"
    "spread of acquires across its lock clients (min, max, coefficient of variation).\n"
    "\n";

static const char lock_tail[] =
    "\n"
    "examples:\n"
    "  kvbench lock --algo dslr,drtm,rof --locks 4 --read-ratio 50 --locality 50\n"
    "  kvbench lock --algo rwlock,dslr --locks 1000 --read-ratio 50 --locality 95\n"
    "  kvbench lock --algo dslr --dist powerlaw --alpha 2 --locks 10000 --fail-pct 0.1\n"
    "  kvbench lock --nodes 4 --threads 2 --tasks 8 --algo rma-rw,fompi-rw --writers 0.2 \\\n"
    "      --bench ecsb --locks 1 --seconds 1\n"
    "  kvbench lock --nodes 4 --threads 2 --tasks 8 --algo rma-mcs,spin,dmcs --bench lb --locks 1\n"
    "  kvbench lock --sweep-rma --seconds 1 --warmup 0.3\n";

#define T struct lock_cli
static const struct bench_opt lock_opts[] = {
    {"--algo", BOPT_FN,
     "  --algo A[,A...]   alock, spin, mcs, dslr, dslr-u, drtm, rof, trad, rwlock, dmcs,\n"
     "                    fompi-rw, rma-mcs or rma-rw, or a list (up to 8) to compare them in\n"
     "                    one run; ratios to the first are printed (default alock). alock, spin,\n"
     "                    mcs, dmcs and rma-mcs have only the exclusive mode\n",
     0, 0, 0, 0, NULL, opt_algo, NULL},
    {"--nodes", BOPT_COMMON,
     "  --nodes N         start N local nodes for the run (default 2; 4 with --sweep-rma)\n",
     0, BOPT_GIVEN(T, nodes_given), 0, 0, NULL, NULL, NULL},
    {"--config", BOPT_COMMON,
     "  --config FILE     use the running cluster in FILE instead\n",
     0, 0, 0, 0, NULL, NULL, NULL},
    {"--transport", BOPT_COMMON,
     "  --transport T     soft, verbs or auto (default soft with --nodes)\n",
     0, BOPT_GIVEN(T, transport_given), 0, 0, NULL, NULL, NULL},
    {"--threads", BOPT_UINT,
     "  --threads T       worker threads per node (default 2)\n",
     offsetof(T, threads), 0, 1, BENCH_MAX_THREADS, "--threads must be 1..64 (got '%s')", NULL, NULL},
    {"--tasks", BOPT_UINT,
     "  --tasks K         lock clients per thread, each a task with its own lock state, sharing\n"
     "                    the thread's fabric context (default 1: the thread is the client)\n",
     offsetof(T, base.tasks), 0, 1, BENCH_MAX_TASKS, "--tasks must be 1..256 (got '%s')", NULL, NULL},
    {"--locks", BOPT_UINT,
     "  --locks L         locks in the table (default 20; rma-mcs and rma-rw: at most 4096)\n",
     offsetof(T, locks), 0, 1, 1000000, "--locks must be 1..1000000 (got '%s')", NULL, NULL},
    {"--locality", BOPT_UINT,
     "  --locality P      percent of locks on the worker's own node (default 95)\n",
     offsetof(T, locality), 0, 0, 100, "--locality must be 0..100 (got '%s')", NULL, NULL},
    {"--read-ratio", BOPT_UINT,
     "  --read-ratio R    percent of locks taken shared, 0..100 (default 0)\n",
     offsetof(T, read_ratio), BOPT_GIVEN(T, read_given), 0, 100, "--read-ratio must be 0..100 (got '%s')", NULL, NULL},
    {"--writers", BOPT_FN,
     "  --writers F       percent of locks taken exclusive, the rest shared; may be fractional\n"
     "                    (the RMA paper's F_W, whose default is 0.2); instead of --read-ratio.\n"
     "                    The exclusive-only algorithms need 100\n",
     0, BOPT_GIVEN(T, writers_given), 0, 0, "--writers must be a percentage from 0 to 100, at least 0.0001 when not 0 (got '%s')", opt_writers, NULL},
    {"--bench", BOPT_FN,
     "  --bench B         one of the RMA paper's microbenchmarks instead of --cs-ns/--think-us:\n"
     "                      lb    acquire + release, empty critical section; headline: mean\n"
     "                            latency\n"
     "                      ecsb  the same loop; headline: throughput\n"
     "                      sob   the critical section is one fabric access to the lock's data\n"
     "                            line: a READ when shared, a WRITE when exclusive\n"
     "                      wcsb  a writer increments a counter in the data line (fabric READ,\n"
     "                            then WRITE; lost updates are counted and are an error), a\n"
     "                            reader READs it; then a busy spin of a random 1..4 us\n"
     "                      warb  empty critical section; after the release the client waits a\n"
     "                            random 1..4 us (its thread's other tasks run) before the next\n"
     "                    Attempts have no deadline with --bench unless --timeout-ms is given\n",
     0, 0, 0, 0, "--bench must be lb, ecsb, sob, wcsb or warb (got '%s')", opt_bench, NULL},
    {"--tdc", BOPT_UINT,
     "  --tdc N           rma-rw: lock clients per physical reader counter (the paper's T_DC).\n"
     "                    With C = threads x tasks clients per node: N >= C puts a counter on\n"
     "                    every (N/C)-th node, N < C puts C/N counters (at most 4) on each node;\n"
     "                    N must divide evenly (default C: one counter per node)\n",
     offsetof(T, tdc), 0, 1, 1000000, "--tdc must be a number of lock clients per counter, 1..1000000 (got '%s')", NULL, NULL},
    {"--tl", BOPT_FN,
     "  --tl L2,L1        rma-mcs, rma-rw: T_L,2 (writer entries in a row within a node) and\n"
     "                    T_L,1 (rma-rw: level-1 passes between nodes before the readers' turn;\n"
     "                    T_W = L2 x L1) (default 50,20)\n",
     0, BOPT_GIVEN(T, tl_given), 0, 0, "--tl needs T_L2,T_L1, both 1..1000000 (got '%s')", opt_tl, NULL},
    {"--tr", BOPT_FN,
     "  --tr N            rma-rw: T_R, readers per counter per read phase (default 1000)\n",
     0, BOPT_GIVEN(T, tl_given), 0, 0, "--tr must be 1..1000000 (got '%s')", opt_tr, NULL},
    {"--locks-per-op", BOPT_UINT,
     "  --locks-per-op K  distinct locks per op, 1..16 (default 1)\n",
     offsetof(T, base.locks_per_op), 0, 1, BENCH_MAX_LOCKS_PER_OP, "--locks-per-op must be 1..16 (got '%s')", NULL, NULL},
    {"--dist", BOPT_FN,
     "  --dist D          uniform or powerlaw: how the index within a node's part is chosen\n"
     "                    (default uniform); powerlaw: P(i) ~ (i+1)^-alpha\n",
     0, 0, 0, 0, "--dist must be uniform or powerlaw (got '%s')", opt_dist, NULL},
    {"--alpha", BOPT_FN,
     "  --alpha A         the power-law exponent, > 1 (default 2, as in DSLR's Figure 15)\n",
     0, BOPT_GIVEN(T, alpha_given), 0, 0, "--alpha must be in (1, 10] (got '%s')", opt_alpha, NULL},
    {"--cs-ns", BOPT_UINT,
     "  --cs-ns N         busy nanoseconds inside each critical section (default 0)\n",
     offsetof(T, cs_ns), BOPT_GIVEN(T, cs_given), 0, 1000000000, "bad --cs-ns '%s'", NULL, NULL},
    {"--think-us", BOPT_UINT,
     "  --think-us U      microseconds a worker sleeps between ops, holding nothing (default 0)\n",
     offsetof(T, think_us), BOPT_GIVEN(T, think_given), 0, 1000000, "--think-us must be 0..1000000 (got '%s')", NULL, NULL},
    {"--lease-ms", BOPT_DOUBLE,
     "  --lease-ms M      lease of dslr, dslr-u, trad and rwlock holders (default 10)\n",
     offsetof(T, lease_ms), 0, 0.01, 60000, "--lease-ms must be 0.01..60000 (got '%s')", NULL, NULL},
    {"--timeout-ms", BOPT_DOUBLE,
     "  --timeout-ms M    deadline of one attempt of an op, 0 = none (default 100, 0 with\n"
     "                    --bench); mcs, dmcs, rma-mcs and rma-rw have no abort path and\n"
     "                    ignore it\n",
     offsetof(T, timeout_ms), BOPT_GIVEN(T, timeout_given), 0, 600000, "--timeout-ms must be 0..600000 (got '%s')", NULL, NULL},
    {"--omega-us", BOPT_FN,
     "  --omega-us W      DSLR's poll unit (a waiter sleeps W x the tickets ahead before it\n"
     "                    looks again); default: the transport's round trip, measured\n",
     0, 0, 0, 0, "--omega-us must be in (0, 100000] (got '%s')", opt_omega, NULL},
    {"--fail-pct", BOPT_DOUBLE,
     "  --fail-pct P      percent (may be fractional) of holdings of other nodes' locks that are\n"
     "                    never released, as if their holder died (default 0); only for the\n"
     "                    algorithms that recover from dead holders: dslr, dslr-u, trad, rwlock\n",
     offsetof(T, fail_pct), 0, 0, 100, "--fail-pct must be 0..100 (got '%s')", NULL, NULL},
    {"--seconds", BOPT_COMMON,
     "  --seconds S       measured seconds per run (default 2; 1 with --sweep-rma), after\n"
     "                    --warmup S (default 0.5; 0.3 with --sweep-rma)\n",
     0, BOPT_GIVEN(T, seconds_given), 0, 0, NULL, NULL, NULL},
    {"--warmup", BOPT_DOUBLE, "", offsetof(T, warmup), BOPT_GIVEN(T, warmup_given), 0, 600,
     "bad --warmup '%s'", NULL, NULL},
    {"--budgets", BOPT_FN,
     "  --budgets L,R     ALock's and rwlock's local and remote budgets (default 5,20)\n",
     0, 0, 0, 0, "--budgets needs LOCAL,REMOTE, both >= 1 (got '%s')", opt_budgets, NULL},
    {"--spin-us", BOPT_COMMON,
     "  --spin-us U       a thread waiting for a fabric completion polls U us before it blocks\n"
     "                    (default 0 here: workers and NIC threads outnumber the cores on small\n"
     "                    machines, and polling takes the CPU from the thread being waited for)\n",
     0, 0, 0, 0, NULL, NULL, NULL},
    {"--json", BOPT_COMMON,
     "  --json FILE       write the results as JSON\n",
     0, 0, 0, 0, NULL, NULL, NULL},
    {"--cdf", BOPT_STR,
     "  --cdf FILE        write the (first algorithm's) latency CDF as CSV (latency_us,fraction)\n",
     offsetof(T, cdf), 0, 0, 0, NULL, NULL, NULL},
    {"--repeat", BOPT_UINT,
     "  --repeat N        run each point N times and report the run with the median ops/s\n"
     "                    (default 1; 3 with --sweep-rma)\n",
     offsetof(T, repeat), BOPT_GIVEN(T, repeat_given), 1, 99, "--repeat must be 1..99 (got '%s')", NULL, NULL},
    {"--sweep", BOPT_FLAG,
     "  --sweep           run the ALock paper's grid -- locks 20/100/1000 x locality\n"
     "                    85/90/95/100 x threads 1..T -- for alock, spin and mcs; write a table\n"
     "                    and gnuplot plots (needs gnuplot) into --out\n",
     offsetof(T, sweep), 0, 0, 0, NULL, NULL, NULL},
    {"--sweep-rma", BOPT_FLAG,
     "  --sweep-rma       run the RMA paper's Figures 3-5 scaled to this cluster, one lock, P\n"
     "                    lock clients in all (P/nodes per node: min(T, P/nodes) threads, the\n"
     "                    rest as tasks): Fig. 3 rma-mcs vs spin and dmcs, writers only, ecsb\n"
     "                    (lb is its mean latency), sob, wcsb, warb; Fig. 4 rma-rw's T_DC\n"
     "                    (0.2% writers), T_L product and split (25%), T_R (0.2%, 2%, 5%);\n"
     "                    Fig. 5 rma-rw vs fompi-rw for 0.2..100% writers, with spin, dmcs and\n"
     "                    rma-mcs; writes rma-sweep.md and plots/rma-*.png into --out\n",
     offsetof(T, sweep_rma), 0, 0, 0, NULL, NULL, NULL},
    {"--sweep-p", BOPT_FN,
     "  --sweep-p P,...   the sweep's lock-client counts (default 4,16,64,256,512; each a\n"
     "                    multiple of the node count; a node runs at most 255 clients)\n",
     0, 0, 0, 0, "--sweep-p needs up to 8 lock-client counts, e.g. 4,16,64,256 (got '%s')", opt_sweep_p, NULL},
    {"--figs", BOPT_FN,
     "  --figs F,...      the figures --sweep-rma runs, of 3, 4, 5 (default all)\n",
     0, BOPT_GIVEN(T, figs_given), 0, 0, "--figs needs a list of 3, 4 and 5 (got '%s')", opt_figs, NULL},
    {"--out", BOPT_STR,
     "  --out DIR         where the sweeps write their report and plots/ (default kvbench-report,\n"
     BOPT_OUT_DEFAULT,
     offsetof(T, out), 0, 0, 0, NULL, NULL, NULL},
    BOPT_ROW_HELP("  -h, --help        this text\n"),
};
#undef T

static const struct bench_cmd lock_cmd =
    BENCH_CMD("lock", lock_head, lock_opts, lock_tail, struct lock_cli);

static void lock_cli_init(struct lock_cli *c)
{
    memset(c, 0, sizeof *c);
    bench_common_init(&c->co);
    c->co.nodes = 2;
    c->co.spin_ns = 0; /* workers block at once: see --help */
    c->algos[0] = "alock";
    c->nalgos = 1;
    c->out = "kvbench-report";
    c->threads = 2;
    c->locks = 20;
    c->locality = 95;
    c->repeat = 1;
    c->warmup = 0.5;
    c->writers = 100;
    c->lease_ms = 10;
    c->timeout_ms = 100;
    const unsigned ps[] = {4, 16, 64, 256, 512};
    memcpy(c->sweep_ps, ps, sizeof ps);
    c->nsweep_ps = 5;
    c->figs[3] = c->figs[4] = c->figs[5] = true;
    struct bench_lock_req *b = &c->base;
    b->local_budget = 5;
    b->remote_budget = 20;
    b->locks_per_op = 1;
    b->tasks = 1;
    b->alpha_milli = 2000;
    struct lock_cfg lc;
    lock_cfg_init(&lc);
    b->rma_tl2 = lc.rma_tl2;
    b->rma_tl1 = lc.rma_tl1;
    b->rma_tr = lc.rma_tr;
    b->rma_dc_nodes = b->rma_dc_per_node = 1;
}

/* The combinations of options, and the defaults that depend on others. Exits on bad usage. */
static void lock_cli_combine(struct lock_cli *c)
{
    struct bench_lock_req *b = &c->base;
    if (c->read_given) b->read_ppm = (uint32_t)c->read_ratio * 10000;
    b->cs_ns = (int64_t)c->cs_ns;
    b->think_ns = (int64_t)c->think_us * NS_PER_US;
    b->lease_ns = (int64_t)(c->lease_ms * 1e6);
    b->timeout_ns = (int64_t)(c->timeout_ms * 1e6);
    b->fail_ppm = (uint32_t)(c->fail_pct * 1e4 + 0.5);
    if (c->co.config && !c->transport_given) c->co.transport = FAB_AUTO;
    if (c->sweep && c->sweep_rma) bench_usage_error("lock", "%s: choose one of --sweep and --sweep-rma", "--sweep");
    if (c->read_given && c->writers_given)
        bench_usage_error("lock", "%s: give one of them (both say how many acquires are shared)", "--read-ratio and --writers");
    if (c->writers_given) b->read_ppm = 1000000 - (uint32_t)(c->writers * 1e4 + 0.5);
    if (b->bench && (c->cs_given || c->think_given))
        bench_usage_error("lock", "--bench %s defines its own critical section and wait: drop --cs-ns and --think-us", bench_lock_kind_name(b->bench));
    if ((b->bench || c->sweep_rma) && !c->timeout_given) b->timeout_ns = 0; /* the paper's locks never give up */
    if (c->figs_given && !c->sweep_rma) bench_usage_error("lock", "%s goes with --sweep-rma", "--figs");
    if (c->sweep_rma) {
        if (!c->nodes_given && !c->co.config && !c->co.endpoints) c->co.nodes = 4;
        if (!c->seconds_given) c->co.seconds = 1;
        if (!c->warmup_given) c->warmup = 0.3;
        if (!c->repeat_given) c->repeat = 3;
        if (b->bench || c->writers_given || c->read_given || c->tdc || c->tl_given || c->cs_given ||
            c->think_given)
            bench_usage_error("lock", "--sweep-rma sets the benchmark, writer fraction and thresholds of each point itself (drop %s)", "--bench, --writers, --read-ratio, --tdc, --tl, --tr, --cs-ns, --think-us");
    }
    b->warmup_ns = (int64_t)(c->warmup * 1e9);
    b->run_ns = (int64_t)(c->co.seconds * 1e9);
    b->seed = (uint64_t)clock_now_ns();
    if (c->alpha_given && b->dist != BENCH_DIST_POWERLAW)
        bench_usage_error("lock", "--alpha goes with --dist powerlaw (got '%s')", "--dist uniform");
}

/* --sweep-rma: the shape of every P, checked before any node starts (with --nodes known). */
static int check_sweep_ps(const struct lock_cli *c)
{
    unsigned nodes = c->co.config || c->co.endpoints ? 0 : c->co.nodes;
    for (unsigned i = 0; nodes && i < c->nsweep_ps; i++) {
        unsigned P = c->sweep_ps[i], cpn = P / nodes;
        unsigned th = cpn < c->threads ? cpn : c->threads;
        if (P % nodes || !cpn || cpn % th || cpn / th > BENCH_MAX_TASKS) {
            fprintf(stderr, "kvbench lock: error: --sweep-p %u: P must be a multiple of the "
                            "%u nodes, and P/nodes a multiple of min(--threads, P/nodes) with "
                            "at most %u tasks per thread\n", P, nodes, BENCH_MAX_TASKS);
            return 2;
        }
        if (cpn > LOCK_MAX_THREADS - 1) {
            fprintf(stderr, "kvbench lock: error: --sweep-p %u: %u lock clients per node; a "
                            "node runs at most %u\n", P, cpn, LOCK_MAX_THREADS - 1);
            return 2;
        }
    }
    return 0;
}

/* Every request is checked here, before any node starts, with the nodes' own rules: 0 or 2. */
static int lock_cli_check(const struct lock_cli *c)
{
    const struct bench_lock_req *b = &c->base;
    /* writer fractions the exclusive-only algorithms cannot run */
    for (unsigned i = 0; !c->sweep && !c->sweep_rma && i < c->nalgos; i++)
        if (c->writers_given && c->writers < 100 && exclusive_only(c->algos[i])) {
            char w[32];
            lock_fmt_pct(w, sizeof w, c->writers);
            fprintf(stderr, "kvbench lock: error: %s has only the exclusive mode: --writers must "
                            "be 100 (got %s)\n", c->algos[i], w);
            return 2;
        }
    for (unsigned i = 0; !c->sweep_rma && i < (c->sweep ? (unsigned)NALG : c->nalgos); i++) {
        struct bench_lock_req q = *b;
        snprintf(q.algo, sizeof q.algo, "%s", c->sweep ? sweep_algos[i] : c->algos[i]);
        q.threads = c->threads;
        q.locks = c->sweep ? sweep_locks[0] : c->locks;
        q.locality = c->locality;
        const char *why = bench_lock_req_check(&q);
        if (why) {
            fprintf(stderr, "kvbench lock: error: %s: %s\n", q.algo, why);
            return 2;
        }
    }
    if (c->threads * b->tasks > BENCH_MAX_CLIENTS) {
        fprintf(stderr, "kvbench lock: error: threads x tasks must be at most %u\n", BENCH_MAX_CLIENTS);
        return 2;
    }
    if (c->tdc && !c->co.config && !c->co.endpoints) { /* the node count is known: say it now */
        char why[256];
        uint32_t k, n;
        if (tdc_layout(c->tdc, c->threads * b->tasks, c->co.nodes, &k, &n, why, sizeof why)) {
            fprintf(stderr, "kvbench lock: error: %s\n", why);
            return 2;
        }
    }
    return c->sweep_rma ? check_sweep_ps(c) : 0;
}

/* What only the running cluster tells (its node count): 0 or 2. */
static int lock_cluster_check(struct lock_cli *c, unsigned nn)
{
    if (c->locks / nn + 1 > LOCKTABLE_MAX_PER_NODE) {
        fprintf(stderr, "kvbench lock: error: at most %u locks per node\n", LOCKTABLE_MAX_PER_NODE - 1);
        return 2;
    }
    if (c->tdc) {
        char why[256];
        if (tdc_layout(c->tdc, c->threads * c->base.tasks, nn, &c->base.rma_dc_nodes,
                       &c->base.rma_dc_per_node, why, sizeof why)) {
            fprintf(stderr, "kvbench lock: error: %s\n", why);
            return 2;
        }
    }
    return 0;
}

static void print_head(const struct lock_cli *c, const struct bench_cluster *bc, unsigned nn,
                       const char *tname)
{
    const struct bench_lock_req *b = &c->base;
    char wr[32];
    lock_fmt_pct(wr, sizeof wr, 100.0 - (double)b->read_ppm / 1e4);
    if (c->sweep_rma) {
        printf("# kvbench lock --sweep-rma: transport %s, %u node%s%s, %.1f s per run after %.1f s "
               "warm-up, up to %u threads per node\n",
               tname, nn, nn == 1 ? "" : "s", bc->launched ? " (local processes)" : "",
               c->co.seconds, c->warmup, c->threads);
        fflush(stdout);
        return;
    }
    printf("# kvbench lock: transport %s, %u node%s%s, %.1f s per run after %.1f s warm-up, "
           "budgets %lld/%lld, critical section %lld ns, think %lld us, %s%% writers, %u "
           "lock%s per op, %s, lease %.1f ms, attempt timeout %.1f ms, %.4f%% injected "
           "failures\n",
           tname, nn, nn == 1 ? "" : "s", bc->launched ? " (local processes)" : "", c->co.seconds,
           c->warmup, (long long)b->local_budget, (long long)b->remote_budget,
           (long long)b->cs_ns, (long long)(b->think_ns / NS_PER_US), wr, b->locks_per_op,
           b->locks_per_op == 1 ? "" : "s", b->dist == BENCH_DIST_POWERLAW ? "power-law" : "uniform",
           (double)b->lease_ns / 1e6, (double)b->timeout_ns / 1e6, (double)b->fail_ppm / 1e4);
    if (b->bench)
        printf("# benchmark %s (the RMA paper's), %u lock client%s per node (%u threads x %u "
               "tasks); rma: T_L,2 %lld, T_L,1 %lld, T_R %lld, a reader counter every %u "
               "node%s, %u per node (T_DC %g)\n",
               bench_lock_kind_name(b->bench), c->threads * b->tasks,
               c->threads * b->tasks == 1 ? "" : "s", c->threads, b->tasks, (long long)b->rma_tl2,
               (long long)b->rma_tl1, (long long)b->rma_tr, b->rma_dc_nodes,
               b->rma_dc_nodes == 1 ? "" : "s", b->rma_dc_per_node,
               (double)c->threads * b->tasks * b->rma_dc_nodes / b->rma_dc_per_node);
    if (b->dist == BENCH_DIST_POWERLAW)
        printf("# power-law exponent %.3f\n", (double)b->alpha_milli / 1000.0);
    fflush(stdout);
}

/* --json for --sweep-rma: every point that ran, without CDFs. */
static int rma_json(const struct lock_cli *c, const struct bench_cluster *bc,
                    const struct rma_sweep *sw, unsigned nn, const char *tname)
{
    struct json j;
    FILE *jf = bench_json_begin(&j, c->co.json, "lock", bc, tname, nn);
    if (!jf) return 1;
    json_kv_double(&j, "seconds", c->co.seconds);
    json_kv_double(&j, "warmup_seconds", c->warmup);
    json_kv_bool(&j, "sweep_rma", true);
    json_obj_end(&j);
    json_key(&j, "results");
    json_arr_begin(&j);
    for (size_t i = 0; i < sw->n; i++)
        if (sw->pts[i].r.ops + sw->pts[i].r.errors) lock_json_point(&j, &sw->pts[i], nn, false);
    json_arr_end(&j);
    json_obj_end(&j);
    return fclose(jf) ? 1 : 0;
}

/* rma-sweep.md and the plots under --out. */
static int rma_write(const struct lock_cli *c, const struct rma_sweep *sw, const char *tname,
                     double elapsed, int argc, char **argv)
{
    int rc = 0;
    char cmdline[2048], path[4200];
    size_t n = (size_t)snprintf(cmdline, sizeof cmdline, "kvbench lock");
    for (int i = 1; i < argc && n < sizeof cmdline; i++)
        n += (size_t)snprintf(cmdline + n, sizeof cmdline - n, " %s", argv[i]);
    struct rma_env env = {cmdline, tname, c->co.seconds, c->warmup, elapsed, c->repeat};
    mkdir(c->out, 0755);
    snprintf(path, sizeof path, "%s/rma-sweep.md", c->out);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "kvbench lock: cannot write %s: %s\n", path, strerror(errno));
        rc = 1;
    } else {
        lock_rma_report(f, sw, &env);
        if (fclose(f)) rc = 1;
        else printf("wrote %s\n", path);
    }
    if (lock_rma_plots(sw, c->out)) {
        fprintf(stderr, "kvbench lock: plotting failed; the data files and the script "
                        "are in %s/plots\n", c->out);
        rc = 1;
    } else {
        printf("wrote %s/plots/rma-fig{3,4,5}.png\n", c->out);
    }
    return rc;
}

/* --sweep-rma on the open cluster. */
static int run_rma(const struct lock_cli *c, const struct bench_cluster *bc, unsigned nn,
                   const char *tname, int argc, char **argv)
{
    struct rma_sweep sw;
    memset(&sw, 0, sizeof sw);
    sw.nodes = nn;
    sw.maxthreads = c->threads;
    sw.nP = c->nsweep_ps;
    memcpy(sw.Ps, c->sweep_ps, sizeof sw.Ps);
    memcpy(sw.figs, c->figs, sizeof sw.figs);
    sw.base = c->base;
    for (unsigned i = 0; i < sw.nP; i++) {
        unsigned P = sw.Ps[i], cpn = P / nn;
        unsigned th = cpn && cpn < c->threads ? cpn : c->threads;
        if (P % nn || !cpn || cpn % th || cpn / th > BENCH_MAX_TASKS) {
            fprintf(stderr, "kvbench lock: error: --sweep-p %u does not fit %u nodes\n", P, nn);
            return 2;
        }
    }
    if (lock_rma_plan(&sw)) return 1;
    for (size_t i = 0; i < sw.n; i++) {
        const char *why = bench_lock_req_check(&sw.pts[i].q);
        if (why) {
            fprintf(stderr, "kvbench lock: error: %s: %s\n", sw.pts[i].algo, why);
            free(sw.pts);
            return 2;
        }
    }
    printf("# %zu points\n", sw.n);
    int64_t t0 = clock_now_ns();
    int rc = lock_rma_run(&sw, bc->f, c->repeat);
    double elapsed = (double)(clock_now_ns() - t0) / 1e9;
    printf("# the sweep took %.1f minutes\n", elapsed / 60.0);
    if (c->co.json && rma_json(c, bc, &sw, nn, tname)) rc = 1;
    if (!rc) rc = rma_write(c, &sw, tname, elapsed, argc, argv);
    for (size_t i = 0; i < sw.n; i++)
        if (sw.pts[i].r.errors || sw.pts[i].lost) rc = 1;
    free(sw.pts);
    return rc;
}

/* The table of the algorithms' points (no sweep), their CDFs, spreads and ratios. */
static void print_summary(const struct lock_cli *c, const struct lock_point *pts, unsigned nn)
{
    unsigned na = c->nalgos;
    printf("\n%u nodes x %u threads x %u tasks = %u lock clients\n", nn, c->threads,
           c->base.tasks, nn * c->threads * c->base.tasks);
    printf("%-8s %4s %6s %4s %6s %2s %11s %9s %9s %9s %10s %7s %8s %7s %7s\n", "algo", "thr",
           "locks", "loc%", "wr%", "K", "ops/s", "mean(us)", "p50(us)", "p99(us)", "p99.9(us)",
           "RT/op", "timeouts", "aborts", "resets");
    for (unsigned i = 0; i < na; i++) {
        const struct lock_point *p = &pts[i];
        const struct hist *h = &p->r.h;
        char w[16];
        lock_fmt_pct(w, sizeof w, lock_writers_pct(p));
        printf("%-8s %4u %6u %4u %6s %2u %11.0f %9.2f %9.2f %9.2f %10.2f %7.3f %8llu %7llu "
               "%7llu\n",
               p->algo, p->threads, p->locks, p->locality, w, p->k, lock_ops_per_s(p),
               lock_mean_us(p), hist_percentile(h, 50) / 1e3, hist_percentile(h, 99) / 1e3,
               hist_percentile(h, 99.9) / 1e3, lock_rt_per_op(p),
               (unsigned long long)p->r.timeouts, (unsigned long long)p->r.aborts,
               (unsigned long long)p->r.resets);
    }
    for (unsigned i = 0; i < na; i++) {
        const struct hist *h = &pts[i].r.h;
        printf("%s latency CDF (us): p1 %.2f  p10 %.2f  p25 %.2f  p50 %.2f  p75 %.2f  p90 %.2f"
               "  p99 %.2f  p99.9 %.2f  max %.2f\n",
               pts[i].algo, hist_percentile(h, 1) / 1e3, hist_percentile(h, 10) / 1e3,
               hist_percentile(h, 25) / 1e3, hist_percentile(h, 50) / 1e3,
               hist_percentile(h, 75) / 1e3, hist_percentile(h, 90) / 1e3,
               hist_percentile(h, 99) / 1e3, hist_percentile(h, 99.9) / 1e3, h->max / 1e3);
    }
    for (unsigned i = 0; i < na; i++) {
        const struct lock_point *p = &pts[i];
        if (p->r.write_ops && p->r.write_ops < p->r.ops)
            printf("%s writes: %llu ops, mean %.2f us, p99 %.2f us\n", p->algo,
                   (unsigned long long)p->r.write_ops, lock_wmean_us(p),
                   hist_percentile(&p->r.wh, 99) / 1e3);
    }
    for (unsigned i = 0; i < na; i++) lock_print_spread(stdout, &pts[i]);
    for (unsigned i = 0; i < na; i++)
        if (pts[i].checked)
            printf("%s wcsb: %llu increments, %lld lost\n", pts[i].algo,
                   (unsigned long long)pts[i].r.increments, (long long)pts[i].lost);
    if (c->base.bench == BENCH_LOCK_LB)
        for (unsigned i = 0; i < na; i++)
            printf("LB %s: mean latency (acquire + release) %.2f us\n", pts[i].algo,
                   lock_mean_us(&pts[i]));
    for (unsigned i = 1; i < na; i++) {
        double p0 = (double)hist_percentile(&pts[0].r.h, 99.9),
               pi = (double)hist_percentile(&pts[i].r.h, 99.9);
        if (lock_ops_per_s(&pts[i]) > 0 && pi > 0)
            printf("%s / %s: throughput %.2fx, mean latency %.3fx, p99.9 latency %.3fx\n",
                   pts[0].algo, pts[i].algo, lock_ops_per_s(&pts[0]) / lock_ops_per_s(&pts[i]),
                   lock_mean_us(&pts[0]) / lock_mean_us(&pts[i]), p0 / pi);
    }
}

/* --cdf: the first algorithm's latency CDF as CSV. */
static int write_cdf(const char *path, const struct lock_point *p)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "kvbench lock: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    fprintf(f, "latency_us,fraction\n");
    struct cdf_out c2 = {.f = f};
    hist_cdf(&p->r.h, lock_cdf_csv, &c2);
    fclose(f);
    return 0;
}

/* --json for plain runs and --sweep: the configuration and the points that ran. */
static int points_json(const struct lock_cli *c, const struct bench_cluster *bc,
                       const struct lock_point *pts, size_t done, unsigned nn, const char *tname)
{
    const struct bench_lock_req *b = &c->base;
    struct json j;
    FILE *jf = bench_json_begin(&j, c->co.json, "lock", bc, tname, nn);
    if (!jf) return 1;
    json_kv_double(&j, "seconds", c->co.seconds);
    json_kv_double(&j, "warmup_seconds", c->warmup);
    json_kv_i64(&j, "alock_local_budget", b->local_budget);
    json_kv_i64(&j, "alock_remote_budget", b->remote_budget);
    json_kv_i64(&j, "cs_ns", b->cs_ns);
    json_kv_i64(&j, "think_ns", b->think_ns);
    json_kv_str(&j, "dist", b->dist == BENCH_DIST_POWERLAW ? "powerlaw" : "uniform");
    if (b->dist == BENCH_DIST_POWERLAW) json_kv_double(&j, "alpha", (double)b->alpha_milli / 1000.0);
    json_kv_i64(&j, "lease_ns", b->lease_ns);
    json_kv_i64(&j, "timeout_ns", b->timeout_ns);
    json_kv_double(&j, "fail_pct", (double)b->fail_ppm / 1e4);
    json_kv_i64(&j, "omega_ns", b->omega_ns);
    json_kv_str(&j, "bench", bench_lock_kind_name(b->bench));
    json_kv_double(&j, "writers_pct", 100.0 - (double)b->read_ppm / 1e4);
    json_kv_u64(&j, "tasks", b->tasks);
    json_kv_i64(&j, "rma_tl2", b->rma_tl2);
    json_kv_i64(&j, "rma_tl1", b->rma_tl1);
    json_kv_i64(&j, "rma_tr", b->rma_tr);
    json_kv_u64(&j, "rma_dc_every_nodes", b->rma_dc_nodes);
    json_kv_u64(&j, "rma_dc_per_node", b->rma_dc_per_node);
    json_kv_bool(&j, "sweep", c->sweep);
    json_obj_end(&j);
    json_key(&j, "results");
    json_arr_begin(&j);
    for (size_t i = 0; i < done; i++) lock_json_point(&j, &pts[i], nn, true);
    json_arr_end(&j);
    json_obj_end(&j);
    return fclose(jf) ? 1 : 0;
}

/* Measures every point (the --algo list, or the --sweep grid), printing each: 0, or 1. */
static int measure(const struct lock_cli *c, const struct bench_cluster *bc, struct lock_point *pts,
                   size_t npts, unsigned nn)
{
    int rc = 0;
    for (size_t i = 0; i < npts && !bench_stop; i++) {
        struct lock_point *p = &pts[i];
        if (c->sweep) {
            lock_sweep_point(p, i, c->threads);
        } else {
            snprintf(p->algo, sizeof p->algo, "%s", c->algos[i]);
            p->threads = c->threads;
            p->locality = c->locality;
            p->locks = c->locks;
        }
        p->read_ratio = (double)c->base.read_ppm / 1e4;
        p->k = c->base.locks_per_op;
        lock_point_req(p, &c->base);
        p->P = nn * p->threads * c->base.tasks;
        if (lock_run_median(bc->f, p, c->repeat, NULL)) return 1;
        if (p->r.errors || p->lost) rc = 1;
        lock_print_point(p);
    }
    return rc;
}

/* The --algo list or the --sweep grid on the open cluster. */
static int run_points(const struct lock_cli *c, const struct bench_cluster *bc, unsigned nn,
                      const char *tname)
{
    size_t npts = c->sweep ? (size_t)NLOCKS * NLOC * c->threads * NALG : c->nalgos;
    struct lock_point *pts = calloc(npts, sizeof *pts);
    if (!pts) return 1;
    int rc = measure(c, bc, pts, npts, nn);
    if (!c->sweep && !rc && !bench_stop) print_summary(c, pts, nn);
    for (unsigned i = 0; !c->sweep && i < c->nalgos; i++)
        if (pts[i].lost)
            fprintf(stderr, "kvbench lock: %s: %lld increments of the data lines were lost: "
                            "writers overlapped\n", pts[i].algo, (long long)pts[i].lost);
    if (c->cdf && !c->sweep && write_cdf(c->cdf, &pts[0])) rc = 1;
    size_t done = 0;
    while (done < npts && pts[done].r.ops + pts[done].r.errors > 0) done++;
    if (c->co.json && points_json(c, bc, pts, done, nn, tname)) rc = 1;
    if (c->sweep && done == npts &&
        lock_sweep_write(c->out, pts, c->threads, nn, tname, c->co.seconds, c->warmup, c->repeat,
                         &c->base))
        rc = 1;
    free(pts);
    return rc;
}

int cmd_lock(int argc, char **argv)
{
    struct lock_cli c;
    lock_cli_init(&c);
    if (bench_opts_parse(&lock_cmd, &c, argc, argv)) return 0;
    lock_cli_combine(&c);
    int rc = lock_cli_check(&c);
    if (rc) return rc;
    struct bench_cluster bc;
    if (bench_start(&bc, &c.co, "lock", 30 * NS_PER_S)) return 1;
    unsigned nn = fab_num_nodes(bc.f);
    rc = lock_cluster_check(&c, nn);
    if (rc) {
        bench_cluster_close(&bc);
        return rc;
    }
    const char *tname = fab_transport_name(bc.transport);
    print_head(&c, &bc, nn, tname);
    if (c.sweep_rma) rc = run_rma(&c, &bc, nn, tname, argc, argv);
    else rc = run_points(&c, &bc, nn, tname);
    return bench_finish(&bc, "lock", rc);
}
