/* kvbench lock: the lock-table benchmark of the ALock, DSLR and HPDC'16 RMA-lock papers. Worker
 * threads (and their tasks) inside every node run ops -- take K locks (on their own node's part
 * of the table with probability --locality, else on other nodes'; shared with probability
 * --read-ratio, or exclusive with probability --writers), release them -- and the nodes are
 * separate processes that share nothing but the fabric. Ops that time out or are aborted by a
 * lease reset are retried, as transactions would be. --bench picks one of the RMA paper's five
 * microbenchmarks. --sweep runs the ALock paper's grid for alock, spin and mcs; --sweep-rma the
 * RMA paper's Figures 3-5 scaled to the machine; both write a table and gnuplot plots. */
#include "bench.h"

#include "common/clock.h"
#include "common/parse.h"
#include "locks/lock.h"
#include "tools/kvbench/node/bench.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char usage[] =
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
    "\n"
    "  --algo A[,A...]   alock, spin, mcs, dslr, dslr-u, drtm, rof, trad, rwlock, dmcs,\n"
    "                    fompi-rw, rma-mcs or rma-rw, or a list (up to 8) to compare them in\n"
    "                    one run; ratios to the first are printed (default alock). alock, spin,\n"
    "                    mcs, dmcs and rma-mcs have only the exclusive mode\n"
    "  --nodes N         start N local nodes for the run (default 2; 4 with --sweep-rma)\n"
    "  --config FILE     use the running cluster in FILE instead\n"
    "  --transport T     soft, verbs or auto (default soft with --nodes)\n"
    "  --threads T       worker threads per node (default 2)\n"
    "  --tasks K         lock clients per thread, each a task with its own lock state, sharing\n"
    "                    the thread's fabric context (default 1: the thread is the client)\n"
    "  --locks L         locks in the table (default 20; rma-mcs and rma-rw: at most 4096)\n"
    "  --locality P      percent of locks on the worker's own node (default 95)\n"
    "  --read-ratio R    percent of locks taken shared, 0..100 (default 0)\n"
    "  --writers F       percent of locks taken exclusive, the rest shared; may be fractional\n"
    "                    (the RMA paper's F_W, whose default is 0.2); instead of --read-ratio.\n"
    "                    The exclusive-only algorithms need 100\n"
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
    "                    Attempts have no deadline with --bench unless --timeout-ms is given\n"
    "  --tdc N           rma-rw: lock clients per physical reader counter (the paper's T_DC).\n"
    "                    With C = threads x tasks clients per node: N >= C puts a counter on\n"
    "                    every (N/C)-th node, N < C puts C/N counters (at most 4) on each node;\n"
    "                    N must divide evenly (default C: one counter per node)\n"
    "  --tl L2,L1        rma-mcs, rma-rw: T_L,2 (writer entries in a row within a node) and\n"
    "                    T_L,1 (rma-rw: level-1 passes between nodes before the readers' turn;\n"
    "                    T_W = L2 x L1) (default 50,20)\n"
    "  --tr N            rma-rw: T_R, readers per counter per read phase (default 1000)\n"
    "  --locks-per-op K  distinct locks per op, 1..16 (default 1)\n"
    "  --dist D          uniform or powerlaw: how the index within a node's part is chosen\n"
    "                    (default uniform); powerlaw: P(i) ~ (i+1)^-alpha\n"
    "  --alpha A         the power-law exponent, > 1 (default 2, as in DSLR's Figure 15)\n"
    "  --cs-ns N         busy nanoseconds inside each critical section (default 0)\n"
    "  --think-us U      microseconds a worker sleeps between ops, holding nothing (default 0)\n"
    "  --lease-ms M      lease of dslr, dslr-u, trad and rwlock holders (default 10)\n"
    "  --timeout-ms M    deadline of one attempt of an op, 0 = none (default 100, 0 with\n"
    "                    --bench); mcs, dmcs, rma-mcs and rma-rw have no abort path and\n"
    "                    ignore it\n"
    "  --omega-us W      DSLR's poll unit (a waiter sleeps W x the tickets ahead before it\n"
    "                    looks again); default: the transport's round trip, measured\n"
    "  --fail-pct P      percent (may be fractional) of holdings of other nodes' locks that are\n"
    "                    never released, as if their holder died (default 0); only for the\n"
    "                    algorithms that recover from dead holders: dslr, dslr-u, trad, rwlock\n"
    "  --seconds S       measured seconds per run (default 2; 1 with --sweep-rma), after\n"
    "                    --warmup S (default 0.5; 0.3 with --sweep-rma)\n"
    "  --budgets L,R     ALock's and rwlock's local and remote budgets (default 5,20)\n"
    "  --spin-us U       a thread waiting for a fabric completion polls U us before it blocks\n"
    "                    (default 0 here: workers and NIC threads outnumber the cores on small\n"
    "                    machines, and polling takes the CPU from the thread being waited for)\n"
    "  --json FILE       write the results as JSON\n"
    "  --cdf FILE        write the (first algorithm's) latency CDF as CSV (latency_us,fraction)\n"
    "  --repeat N        run each point N times and report the run with the median ops/s\n"
    "                    (default 1; 3 with --sweep-rma)\n"
    "  --sweep           run the ALock paper's grid -- locks 20/100/1000 x locality\n"
    "                    85/90/95/100 x threads 1..T -- for alock, spin and mcs; write a table\n"
    "                    and gnuplot plots (needs gnuplot) into --out\n"
    "  --sweep-rma       run the RMA paper's Figures 3-5 scaled to this cluster, one lock, P\n"
    "                    lock clients in all (P/nodes per node: min(T, P/nodes) threads, the\n"
    "                    rest as tasks): Fig. 3 rma-mcs vs spin and dmcs, writers only, ecsb\n"
    "                    (lb is its mean latency), sob, wcsb, warb; Fig. 4 rma-rw's T_DC\n"
    "                    (0.2% writers), T_L product and split (25%), T_R (0.2%, 2%, 5%);\n"
    "                    Fig. 5 rma-rw vs fompi-rw for 0.2..100% writers, with spin, dmcs and\n"
    "                    rma-mcs; writes rma-sweep.md and plots/rma-*.png into --out\n"
    "  --sweep-p P,...   the sweep's lock-client counts (default 4,16,64,256,512; each a\n"
    "                    multiple of the node count; a node runs at most 255 clients)\n"
    "  --figs F,...      the figures --sweep-rma runs, of 3, 4, 5 (default all)\n"
    "  --out DIR         where the sweeps write their report and plots/ (default kvbench-report,\n"
    "                    made in the current directory; docs/reports holds the\n"
    "                    published ones)\n"
    "  -h, --help        this text\n"
    "\n"
    "examples:\n"
    "  kvbench lock --algo dslr,drtm,rof --locks 4 --read-ratio 50 --locality 50\n"
    "  kvbench lock --algo rwlock,dslr --locks 1000 --read-ratio 50 --locality 95\n"
    "  kvbench lock --algo dslr --dist powerlaw --alpha 2 --locks 10000 --fail-pct 0.1\n"
    "  kvbench lock --nodes 4 --threads 2 --tasks 8 --algo rma-rw,fompi-rw --writers 0.2 \\\n"
    "      --bench ecsb --locks 1 --seconds 1\n"
    "  kvbench lock --nodes 4 --threads 2 --tasks 8 --algo rma-mcs,spin,dmcs --bench lb --locks 1\n"
    "  kvbench lock --sweep-rma --seconds 1 --warmup 0.3\n";

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

static double ops_per_s(const struct lock_point *p)
{
    return p->seconds > 0 ? (double)p->r.ops / p->seconds : 0;
}

/* The run of a point with the median throughput (sorts runs). */
static struct lock_point median_run(struct lock_point *runs, unsigned repeat)
{
    for (unsigned a = 0; a < repeat; a++)
        for (unsigned b = a + 1; b < repeat; b++)
            if (ops_per_s(&runs[b]) < ops_per_s(&runs[a])) {
                struct lock_point tmp = runs[a];
                runs[a] = runs[b];
                runs[b] = tmp;
            }
    return runs[repeat / 2];
}
static double rt_per_op(const struct lock_point *p)
{
    return p->r.ops ? (double)p->r.round_trips / (double)p->r.ops : 0;
}
static double mean_us(const struct lock_point *p) { return hist_mean(&p->r.h) / 1e3; }
static double wmean_us(const struct lock_point *p) { return hist_mean(&p->r.wh) / 1e3; }
static double writers_pct(const struct lock_point *p)
{
    return 100.0 - (double)p->q.read_ppm / 1e4;
}

/* The point's request from base and the point's own fields. */
static void point_req(struct lock_point *pt, const struct bench_lock_req *base)
{
    struct bench_lock_req q = *base;
    snprintf(q.algo, sizeof q.algo, "%s", pt->algo);
    q.threads = pt->threads;
    q.locks = pt->locks;
    q.locality = pt->locality;
    pt->q = q;
}

/* WCSB: the counters of every lock's data line, read back, against the increments the clients
 * made (all of them, warm-up included). Locks beyond 4096 are not checked. */
static int check_increments(struct fab_ctx *c, struct lock_point *pt, char *err, size_t errcap)
{
    if (pt->q.bench != BENCH_LOCK_WCSB || pt->q.locks > LOCK_RMA_MAX) return 0;
    struct locktable lt;
    int rc = locktable_open(&lt, c, pt->q.locks);
    if (rc) {
        snprintf(err, errcap, "reading back the data lines: %s", rdkv_strerror(rc));
        return rc;
    }
    uint64_t sum = 0;
    for (unsigned n = 0; n < lt.nodes; n++)
        for (uint32_t i = 0; i < locktable_count(&lt, (uint16_t)n); i++) {
            uint64_t v;
            rptr d = rptr_add(locktable_data(&lt, (uint16_t)n, i), 8 * BENCH_LOCK_WCSB_WORD);
            if ((rc = fab_read(c, d, &v, 8))) {
                snprintf(err, errcap, "reading back the data lines: %s", rdkv_strerror(rc));
                return rc;
            }
            sum += v;
        }
    pt->lost = (int64_t)(pt->r.increments - sum);
    pt->checked = true;
    return 0;
}

/* One measurement on every node at once, of pt->q. */
static int run_point(struct fabric *f, struct lock_point *pt, char *err, size_t errcap)
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
    pack_u32(&w, pt->q.locks);
    for (unsigned i = 0; i < n && !rc; i++) {
        rc = fab_rpc_call(c, (uint16_t)i, KV_RPC_BENCH_LOCK_PREPARE, w.p, w.len, &resp[i], 0);
        if (rc) snprintf(err, errcap, "node %u: preparing the lock table: %s", i, bench_strerror(rc));
    }
    pack_w_free(&w);
    const struct bench_lock_req *q = &pt->q;
    pack_w_init(&w);
    bench_lock_req_pack(q, &w);
    int64_t timeout = q->warmup_ns + q->run_ns + 60 * NS_PER_S;
    for (unsigned i = 0; i < n && !rc; i++) {
        rc = fab_rpc_post(c, (uint16_t)i, KV_RPC_BENCH_LOCK_RUN, w.p, w.len, &resp[i], timeout, i);
        if (rc) snprintf(err, errcap, "node %u: %s", i, bench_strerror(rc));
    }
    pack_w_free(&w);
    bench_lock_res_init(&pt->r);
    memset(pt->node_fair, 0, sizeof pt->node_fair);
    pt->seconds = 0;
    pt->nodes = n;
    pt->lost = 0;
    pt->checked = false;
    unsigned got = 0;
    while (!rc && got < n) {
        struct fab_cqe cq[LAUNCH_MAX];
        int k = fab_wait(c, cq, LAUNCH_MAX, -1);
        for (int j = 0; j < k; j++) {
            unsigned i = (unsigned)cq[j].tag;
            struct bench_lock_res r;
            if (cq[j].status) {
                rc = cq[j].status;
                snprintf(err, errcap, "node %u: the run failed: %s", i, bench_strerror(rc));
            } else if (bench_lock_res_unpack(&r, resp[i].data, resp[i].len)) {
                rc = RDKV_EPROTO;
                snprintf(err, errcap, "node %u: malformed result", i);
            } else {
                if (i < FAIR_NODES) pt->node_fair[i] = r.fair;
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
    if (!rc) rc = check_increments(c, pt, err, errcap);
    for (unsigned i = 0; i < n; i++) fab_buf_free(&resp[i]);
    free(resp);
    fab_ctx_destroy(c);
    return rc;
}

/* Percent with no trailing zeros: 0.2, 25, 99.8 */
static void fmt_pct(char *out, size_t cap, double v) { snprintf(out, cap, "%g", v); }

static void series_name(const struct lock_point *p, char *out, size_t cap)
{
    char up[16];
    size_t i;
    for (i = 0; p->algo[i] && i < sizeof up - 1; i++)
        up[i] = (char)(p->algo[i] >= 'a' && p->algo[i] <= 'z' ? p->algo[i] - 32 : p->algo[i]);
    up[i] = 0;
    int n = snprintf(out, cap, "%s-L%u-P%u-T%u", up, p->locks, p->locality, p->threads);
    if (n > 0 && (size_t)n < cap && (p->read_ratio > 0 || p->k > 1)) {
        char r[24];
        fmt_pct(r, sizeof r, p->read_ratio);
        n += snprintf(out + n, cap - (size_t)n, "-R%s-K%u", r, p->k);
    }
    if (n > 0 && (size_t)n < cap && p->q.bench) {
        char b[8];
        const char *nm = bench_lock_kind_name(p->q.bench);
        for (i = 0; nm[i] && i < sizeof b - 1; i++) b[i] = (char)(nm[i] - 32);
        b[i] = 0;
        snprintf(out + n, cap - (size_t)n, "-X%u-%s", p->q.tasks, b);
    }
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
    if (p->r.write_ops && p->r.write_ops < p->r.ops)
        printf("[%s], WriteOperations, %llu\n[%s], WriteAverageLatency(us), %.2f\n"
               "[%s], Write99thPercentileLatency(us), %.2f\n",
               s.name, (unsigned long long)p->r.write_ops, s.name, wmean_us(p), s.name,
               hist_percentile(&p->r.wh, 99) / 1e3);
    printf("[%s], AcquireSpreadCV, %.3f\n", s.name, bench_lock_fair_cv(&p->r.fair));
    if (p->checked)
        printf("[%s], Increments, %llu\n[%s], LostUpdates, %lld\n", s.name,
               (unsigned long long)p->r.increments, s.name, (long long)p->lost);
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

static void json_fair(struct json *j, const struct bench_lock_fair *f)
{
    json_kv_u64(j, "clients", f->clients);
    json_kv_u64(j, "min", f->min);
    json_kv_u64(j, "max", f->max);
    json_kv_double(j, "mean", f->clients ? (double)f->sum / (double)f->clients : 0.0);
    json_kv_double(j, "cv", bench_lock_fair_cv(f));
}

static void json_point(struct json *j, const struct lock_point *p, unsigned nodes, bool cdf)
{
    json_obj_begin(j);
    json_kv_str(j, "algo", p->algo);
    json_kv_u64(j, "nodes", nodes);
    json_kv_u64(j, "threads", p->threads);
    json_kv_u64(j, "tasks", p->q.tasks);
    json_kv_u64(j, "locks", p->locks);
    json_kv_u64(j, "locality", p->locality);
    json_kv_double(j, "read_ratio", p->read_ratio);
    json_kv_double(j, "writers_pct", writers_pct(p));
    json_kv_u64(j, "locks_per_op", p->k);
    json_kv_str(j, "bench", bench_lock_kind_name(p->q.bench));
    if (p->fig) json_kv_u64(j, "figure", p->fig);
    if (!strncmp(p->algo, "rma-", 4)) {
        json_kv_i64(j, "tl2", p->q.rma_tl2);
        json_kv_i64(j, "tl1", p->q.rma_tl1);
        json_kv_i64(j, "tr", p->q.rma_tr);
        json_kv_u64(j, "dc_every_nodes", p->q.rma_dc_nodes);
        json_kv_u64(j, "dc_per_node", p->q.rma_dc_per_node);
        json_kv_double(j, "tdc", (double)p->q.threads * p->q.tasks * p->q.rma_dc_nodes /
                                     (p->q.rma_dc_per_node ? p->q.rma_dc_per_node : 1));
    }
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
    json_kv_u64(j, "write_ops", p->r.write_ops);
    json_kv_double(j, "write_mean_us", wmean_us(p));
    json_kv_double(j, "write_p99_us", hist_percentile(&p->r.wh, 99) / 1e3);
    if (p->checked) {
        json_kv_u64(j, "increments", p->r.increments);
        json_kv_i64(j, "lost_updates", p->lost);
    }
    /* the spread of measured acquires across lock clients, per node and over all */
    json_key(j, "acquires_per_client");
    json_obj_begin(j);
    json_fair(j, &p->r.fair);
    json_key(j, "nodes");
    json_arr_begin(j);
    for (unsigned n = 0; n < p->nodes && n < FAIR_NODES; n++) {
        json_obj_begin(j);
        json_kv_u64(j, "node", n);
        json_fair(j, &p->node_fair[n]);
        json_obj_end(j);
    }
    json_arr_end(j);
    json_obj_end(j);
    if (cdf) {
        json_key(j, "cdf");
        json_arr_begin(j);
        struct cdf_out co = {.j = j};
        hist_cdf(&p->r.h, cdf_json, &co);
        json_arr_end(j);
    }
    json_obj_end(j);
}

/* "node 0: 16 clients, 1200..1900 acquires, CV 0.081; node 1: ..." */
static void print_spread(FILE *f, const struct lock_point *p)
{
    fprintf(f, "%s acquires per client:", p->algo);
    for (unsigned n = 0; n < p->nodes && n < FAIR_NODES; n++) {
        const struct bench_lock_fair *fr = &p->node_fair[n];
        fprintf(f, "%s node %u: %llu client%s, %llu..%llu, CV %.3f", n ? ";" : "", n,
                (unsigned long long)fr->clients, fr->clients == 1 ? "" : "s",
                (unsigned long long)fr->min, (unsigned long long)fr->max,
                bench_lock_fair_cv(fr));
    }
    fprintf(f, "; all: CV %.3f\n", bench_lock_fair_cv(&p->r.fair));
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

static struct rma_key key_default(const char *algo, unsigned bench, unsigned P, unsigned wppm)
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

static unsigned clients_per_node(const struct rma_sweep *sw, unsigned P) { return P / sw->nodes; }

/* Threads and tasks per node for P clients in all: min(T, P/nodes) threads, the rest tasks. */
static void p_shape(const struct rma_sweep *sw, unsigned P, unsigned *threads, unsigned *tasks)
{
    unsigned cpn = clients_per_node(sw, P);
    *threads = cpn < sw->maxthreads ? cpn : sw->maxthreads;
    *tasks = cpn / *threads;
}

/* Whether the counter layout (every k-th node, c per node) fits P clients. */
static bool dc_fits(const struct rma_sweep *sw, unsigned P, unsigned k, unsigned c)
{
    unsigned cpn = clients_per_node(sw, P);
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
    p_shape(sw, k->P, &th, &ta);
    p->threads = th;
    p->locks = 1;
    p->locality = 100;
    p->k = 1;
    p->fig = fig;
    p->P = k->P;
    point_req(p, &sw->base);
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
static int rma_plan(struct rma_sweep *sw)
{
    for (unsigned pi = 0; pi < sw->nP; pi++) {
        unsigned P = sw->Ps[pi];
        if (sw->figs[3])
            for (unsigned b = 0; b < F3_BENCH; b++)
                for (unsigned a = 0; a < F3_ALGOS; a++) {
                    struct rma_key k = key_default(f3_algos[a], f3_bench[b], P, 1000000);
                    if (rma_add(sw, 3, &k) < 0) return -1;
                }
        if (sw->figs[4]) {
            for (unsigned d = 0; d < F4_DC; d++) {
                if (!dc_fits(sw, P, f4_dc[d].k, f4_dc[d].c)) continue;
                struct rma_key k = key_default("rma-rw", BENCH_LOCK_ECSB, P, 2000);
                k.dcn = f4_dc[d].k;
                k.dcc = f4_dc[d].c;
                if (rma_add(sw, 4, &k) < 0) return -1;
            }
            for (unsigned t = 0; t < F4_PROD + F4_SPLIT; t++) {
                const unsigned *tl = t < F4_PROD ? f4_prod[t] : f4_split[t - F4_PROD];
                struct rma_key k = key_default("rma-rw", BENCH_LOCK_ECSB, P, 250000);
                k.tl2 = tl[0];
                k.tl1 = tl[1];
                if (rma_add(sw, 4, &k) < 0) return -1;
            }
            for (unsigned t = 0; t < F4_TR; t++) {
                struct rma_key k = key_default("rma-rw", BENCH_LOCK_ECSB, P, 2000);
                k.tr = f4_tr[t];
                if (rma_add(sw, 4, &k) < 0) return -1;
            }
            for (unsigned w = 0; w < F4F_FW; w++)
                for (unsigned t = 0; t < F4F_TR; t++) {
                    struct rma_key k = key_default("rma-rw", BENCH_LOCK_ECSB, P, f4f_fw[w]);
                    k.tr = f4f_tr[t];
                    if (rma_add(sw, 4, &k) < 0) return -1;
                }
        }
        if (sw->figs[5]) {
            for (unsigned w = 0; w < F5_FW; w++) {
                struct rma_key k = key_default("rma-rw", BENCH_LOCK_ECSB, P, f5_fw[w]);
                if (rma_add(sw, 5, &k) < 0) return -1;
                k.algo = "fompi-rw";
                if (rma_add(sw, 5, &k) < 0) return -1;
            }
            for (unsigned a = 0; a < F5_REFS; a++) {
                struct rma_key k = key_default(f5_refs[a], BENCH_LOCK_ECSB, P, 1000000);
                if (rma_add(sw, 5, &k) < 0) return -1;
            }
        }
    }
    return 0;
}

/* Metrics of a point found by key (NAN when it did not run). */
static const struct lock_point *rma_pt(const struct rma_sweep *sw, const struct rma_key *k)
{
    int i = rma_find(sw, k);
    return i < 0 || !sw->pts[i].r.ops ? NULL : &sw->pts[i];
}
static double m_ops(const struct lock_point *p) { return p ? ops_per_s(p) : NAN; }
static double m_mean(const struct lock_point *p) { return p ? mean_us(p) : NAN; }
static double m_wmean(const struct lock_point *p) { return p && p->r.write_ops ? wmean_us(p) : NAN; }
static double m_wp99(const struct lock_point *p)
{
    return p && p->r.write_ops ? hist_percentile(&p->r.wh, 99) / 1e3 : NAN;
}
static double ratio(double a, double b) { return isnan(a) || isnan(b) || b <= 0 ? NAN : a / b; }

/* Table cells, "–" for a point that did not run: each call formats into the next of 16
 * buffers, so one printf may take up to 16 cells. */
static const char *cell(const char *fmt, double v)
{
    static char buf[16][32];
    static unsigned next;
    char *b = buf[next++ % 16];
    if (isnan(v)) snprintf(b, 32, "–");
    else snprintf(b, 32, fmt, v);
    return b;
}
#define C0(v) cell("%.0f", (v))
#define C1(v) cell("%.1f", (v))
#define CX(v) cell("%.2f×", (v))

static void spread_cell(char *out, size_t cap, const struct lock_point *p)
{
    if (!p) {
        snprintf(out, cap, "–");
        return;
    }
    size_t n = 0;
    for (unsigned i = 0; i < p->nodes && i < FAIR_NODES && n < cap; i++) {
        const struct bench_lock_fair *f = &p->node_fair[i];
        n += (size_t)snprintf(out + n, cap - n, "%s%llu–%llu (%.2f)", i ? ", " : "",
                              (unsigned long long)f->min, (unsigned long long)f->max,
                              bench_lock_fair_cv(f));
    }
}

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

struct rma_env {
    const char *cmdline, *transport;
    double seconds, warmup, elapsed_s;
    unsigned repeat;
};

static void machine(char *model, size_t cap, long *cpus)
{
    *cpus = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(model, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ' || *c == '\t') c++;
                c[strcspn(c, "\n")] = 0;
                snprintf(model, cap, "%s", c);
            }
            break;
        }
    fclose(f);
}

/* The plots: data files and one gnuplot script for the three figures. */
static int rma_plots(const struct rma_sweep *sw, const char *out)
{
    char dir[4096], path[4300], gp[4300];
    snprintf(dir, sizeof dir, "%s/plots", out);
    mkdir(out, 0755);
    mkdir(dir, 0755);
    unsigned nP = sw->nP;
    double xs[RMA_MAXP];
    for (unsigned i = 0; i < nP; i++) xs[i] = sw->Ps[i];
    double v[16 * RMA_MAXP];
    snprintf(gp, sizeof gp, "%s/rma-sweep.gp", dir);
    FILE *g = fopen(gp, "w");
    if (!g) return RDKV_EIO;
    fprintf(g, "# kvbench lock --sweep-rma: the HPDC'16 paper's Figures 3-5, scaled\n"
               "set datafile missing '?'\nset grid\nset key below font ',8'\n"
               "set logscale x 2\nset logscale y\nset xlabel 'P (lock clients, 4 nodes)'\n");
    int rc = 0;
    if (sw->figs[3]) {
        fprintf(g, "set terminal pngcairo size 2000,480 font ',10'\nset output '%s/rma-fig3.png'\n"
                   "set multiplot layout 1,5 title 'Fig. 3 scaled: RMA-MCS vs spin (foMPI-Spin) "
                   "and D-MCS, writers only, one lock'\n",
                dir);
        /* LB: the ECSB runs' mean latency */
        for (unsigned panel = 0; panel <= F3_BENCH; panel++) {
            unsigned b = panel == 0 ? BENCH_LOCK_ECSB : f3_bench[panel - 1];
            for (unsigned a = 0; a < F3_ALGOS; a++)
                for (unsigned i = 0; i < nP; i++) {
                    struct rma_key k = key_default(f3_algos[a], b, sw->Ps[i], 1000000);
                    const struct lock_point *p = rma_pt(sw, &k);
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
    }
    if (!rc && sw->figs[4]) {
        fprintf(g, "set terminal pngcairo size 1800,1000 font ',10'\nset output '%s/rma-fig4.png'\n"
                   "set multiplot layout 2,3 title 'Fig. 4 scaled: RMA-RW thresholds (ECSB, one "
                   "lock)'\n",
                dir);
        /* (a) T_DC */
        const char *dcn[F4_DC];
        for (unsigned d = 0; d < F4_DC; d++) {
            dcn[d] = f4_dc[d].name;
            for (unsigned i = 0; i < nP; i++) {
                struct rma_key k = key_default("rma-rw", BENCH_LOCK_ECSB, sw->Ps[i], 2000);
                k.dcn = f4_dc[d].k;
                k.dcc = f4_dc[d].c;
                v[d * nP + i] = m_ops(rma_pt(sw, &k));
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
                    struct rma_key k = key_default("rma-rw", BENCH_LOCK_ECSB, sw->Ps[i], 250000);
                    k.tl2 = tl[0];
                    k.tl1 = tl[1];
                    const struct lock_point *p = rma_pt(sw, &k);
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
                    struct rma_key k = key_default("rma-rw", BENCH_LOCK_ECSB, sw->Ps[i], 2000);
                    k.tr = f4_tr[t];
                    v[t * nP + i] = m_ops(rma_pt(sw, &k));
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
                            key_default("rma-rw", BENCH_LOCK_ECSB, sw->Ps[i], f4f_fw[w]);
                        k.tr = f4f_tr[t];
                        v[s * nP + i] = m_ops(rma_pt(sw, &k));
                    }
                }
            snprintf(path, sizeof path, "%s/rma-fig4f-tr-fw.dat", dir);
            if (!(rc = write_dat(path, "P, one column per (F_W, T_R)", nP, xs, s, v)))
                gp_plot(g, "(f) T_R x F_W", "acquires/s", path, s, np, F4F_TR);
        }
        fprintf(g, "unset multiplot\n");
    }
    if (!rc && sw->figs[5]) {
        fprintf(g, "set terminal pngcairo size 1600,1000 font ',10'\nset output '%s/rma-fig5.png'\n"
                   "set multiplot layout 2,2 title 'Fig. 5 scaled: RMA-RW vs foMPI-RW (ECSB, "
                   "one lock)'\n",
                dir);
        char names[F5_FW + F5_REFS][32];
        const char *np[F5_FW + F5_REFS];
        for (unsigned panel = 0; !rc && panel < 3; panel++) {
            unsigned s = 0;
            for (unsigned w = 0; w < F5_FW; w++, s++) {
                snprintf(names[s], sizeof names[s], "F_W %g%%", f5_fw[w] / 1e4);
                np[s] = names[s];
                for (unsigned i = 0; i < nP; i++) {
                    struct rma_key k = key_default("rma-rw", BENCH_LOCK_ECSB, sw->Ps[i], f5_fw[w]);
                    double a = m_ops(rma_pt(sw, &k));
                    k.algo = "fompi-rw";
                    double b = m_ops(rma_pt(sw, &k));
                    v[s * nP + i] = panel == 0 ? a : panel == 1 ? b : ratio(a, b);
                }
            }
            if (panel < 2)
                for (unsigned a = 0; a < F5_REFS; a++, s++) {
                    np[s] = f5_refs[a];
                    for (unsigned i = 0; i < nP; i++) {
                        struct rma_key k =
                            key_default(f5_refs[a], BENCH_LOCK_ECSB, sw->Ps[i], 1000000);
                        v[s * nP + i] = m_ops(rma_pt(sw, &k));
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
                        struct rma_key k = key_default(l ? "fompi-rw" : "rma-rw",
                                                       BENCH_LOCK_ECSB, sw->Ps[i], f5_fw[w]);
                        v[s * F5_FW + w] = m_ops(rma_pt(sw, &k));
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
    }
    if (fclose(g) || rc) return RDKV_EIO;
    int st = bench_gnuplot(gp);
    if (st == 1) fprintf(stderr, "kvbench lock: gnuplot is not installed (Debian: gnuplot-nox); "
                                 "the script and data are in %s\n", dir);
    return st ? RDKV_EIO : 0;
}

static void rma_report(FILE *f, const struct rma_sweep *sw, const struct rma_env *env)
{
    char model[256];
    long cpus;
    machine(model, sizeof model, &cpus);
    time_t now = time(NULL);
    char when[64];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    fprintf(f, "# kvbench lock --sweep-rma: the HPDC'16 RMA locks' Figures 3–5, scaled\n\n");
    char rep[64] = ", one run";
    if (env->repeat > 1) snprintf(rep, sizeof rep, ", the median-throughput run of %u", env->repeat);
    fprintf(f, "Generated by `%s` on %s (the whole sweep took %.1f minutes; %zu points, each "
               "%g s measured after %g s of warm-up%s).\n\n",
            env->cmdline, when, env->elapsed_s / 60.0, sw->n, env->seconds, env->warmup, rep);
    fprintf(f, "Machine: %ld CPU%s (`nproc`), %s; transport %s; %u nodes as separate kvserver "
               "processes started by kvbench. One lock (lock 0, homed on node 0); every client "
               "takes it in every op. P lock clients in all, P/%u per node: min(%u, P/%u) worker "
               "threads per node, the rest as tasks of those threads (each task a lock client "
               "with its own queue nodes). Attempts have no deadline; fompi-rw and spin back off "
               "between tries.\n\n",
            cpus, cpus == 1 ? "" : "s", model, env->transport, sw->nodes, sw->nodes,
            sw->maxthreads, sw->nodes);
    fprintf(f, "P | clients per node | threads × tasks per node\n---:|---:|---\n");
    for (unsigned i = 0; i < sw->nP; i++) {
        unsigned th, ta;
        p_shape(sw, sw->Ps[i], &th, &ta);
        fprintf(f, "%u | %u | %u × %u\n", sw->Ps[i], clients_per_node(sw, sw->Ps[i]), th, ta);
    }
    fprintf(f, "\n## How this setting differs from the paper's\n\n"
               "The paper ran on Piz Daint (Cray XC30, Aries Dragonfly network): 16 MPI processes "
               "per compute node, one per hardware thread, all on their own cores, P up to 1024 "
               "(64 nodes), every lock structure in MPI-3 RMA windows reached with DMAPP, latency "
               "the mean of 100,000 operations per process, the first 10%% discarded. Here the "
               "cluster is %u soft-transport nodes (an emulated RNIC over TCP on loopback, one "
               "NIC thread per node) on a %ld-core machine, and lock clients are tasks "
               "(coroutines) of at most %u threads per node, so P = %u means %u clients per "
               "node multiplexed on %u threads, and all of them, the NIC threads included, "
               "share %ld cores. Consequences: a \"remote\" access costs a loopback TCP round "
               "trip through two NIC threads (tens of µs) rather than ~1 µs on Aries, and a "
               "\"local\" one (which the paper's RMA also sends through the NIC) a round trip "
               "through the node's own NIC thread; clients never run in parallel beyond the %ld "
               "cores, so throughput is bounded by CPU, not by the network, and adding clients "
               "adds queueing, not parallelism; a waiting task yields to its thread's other "
               "tasks instead of spinning on its own core; the machine model is still N = 2 "
               "(cluster, nodes) but a \"node\" holds %u..%u clients instead of 16, and the "
               "largest P is %u instead of 1024. WCSB's 1–4 µs spin is a busy wait on the "
               "client's thread (computation: it occupies one of the %ld cores); WARB's 1–4 µs "
               "wait lets the thread's other tasks run. Runs are %g s, not 100,000 operations "
               "per process, after a %g s warm-up. LB is not a separate run: its loop is "
               "ECSB's, so LB is ECSB's mean latency (acquire + release).\n\n",
            sw->nodes, cpus, sw->maxthreads, sw->Ps[sw->nP - 1],
            clients_per_node(sw, sw->Ps[sw->nP - 1]), sw->maxthreads, cpus, cpus,
            clients_per_node(sw, sw->Ps[0]), clients_per_node(sw, sw->Ps[sw->nP - 1]),
            sw->Ps[sw->nP - 1], cpus, env->seconds, env->warmup);

    /* The targets */
    fprintf(f, "## The targets (issue 15)\n\n");
    fprintf(f, "| target | measured | met? |\n|---|---|---|\n");
    for (unsigned t = 0; t < 2; t++) {
        unsigned P = t ? 256 : 64;
        struct rma_key k = key_default("rma-rw", BENCH_LOCK_ECSB, P, 2000);
        const struct lock_point *a = rma_pt(sw, &k);
        k.algo = "fompi-rw";
        const struct lock_point *b = rma_pt(sw, &k);
        double r = ratio(m_ops(a), m_ops(b)), goal = t ? 6.0 : 1.8;
        fprintf(f, "| ECSB, 0.2%% writers, P = %u: RMA-RW ≥ %.1f× fompi-rw | ", P, goal);
        if (isnan(r)) fprintf(f, "not run | – |\n");
        else
            fprintf(f, "**%.2f×** (%.0f vs %.0f acquires/s; mean %.1f vs %.1f µs) | %s |\n", r,
                    m_ops(a), m_ops(b), m_mean(a), m_mean(b), r >= goal ? "yes" : "no");
    }
    {
        struct rma_key k = key_default("rma-mcs", BENCH_LOCK_ECSB, 64, 1000000);
        const struct lock_point *m = rma_pt(sw, &k);
        k.algo = "spin";
        const struct lock_point *s = rma_pt(sw, &k);
        k.algo = "dmcs";
        const struct lock_point *d = rma_pt(sw, &k);
        double rs = ratio(m_ops(m), m_ops(s)), rd = ratio(m_ops(m), m_ops(d));
        fprintf(f, "| ECSB, writers only, P = 64: RMA-MCS ≥ 1.73× spin | ");
        if (isnan(rs)) fprintf(f, "not run | – |\n");
        else
            fprintf(f, "**%.2f×** (%.0f vs %.0f acquires/s) | %s |\n", rs, m_ops(m), m_ops(s),
                    rs >= 1.73 ? "yes" : "no");
        fprintf(f, "| ECSB, writers only, P = 64: RMA-MCS ≥ 1× D-MCS | ");
        if (isnan(rd)) fprintf(f, "not run | – |\n");
        else
            fprintf(f, "**%.2f×** (%.0f vs %.0f acquires/s) | %s |\n", rd, m_ops(m), m_ops(d),
                    rd >= 1.0 ? "yes" : "no");
        fprintf(f, "| … with lower mean latency than both (LB = ECSB's mean) | ");
        if (isnan(rs) || isnan(rd)) fprintf(f, "not run | – |\n");
        else
            fprintf(f, "RMA-MCS **%.1f µs**, spin %.1f µs, D-MCS %.1f µs | %s |\n", m_mean(m),
                    m_mean(s), m_mean(d),
                    m_mean(m) < m_mean(s) && m_mean(m) < m_mean(d) ? "yes" : "no");
    }
    fprintf(f, "| RMA-RW flat for writer fractions above 30%% (ECSB, 25/50/100%%) | ");
    {
        bool any = false;
        for (unsigned i = 0; i < sw->nP; i++) {
            double y[3];
            const unsigned fw[3] = {250000, 500000, 1000000};
            for (unsigned w = 0; w < 3; w++) {
                struct rma_key k = key_default("rma-rw", BENCH_LOCK_ECSB, sw->Ps[i], fw[w]);
                y[w] = m_ops(rma_pt(sw, &k));
            }
            if (isnan(y[1]) || isnan(y[2])) continue;
            fprintf(f, "%sP=%u: %s / %.0f / %.0f (100%%/50%% = %.2f)", any ? "; " : "", sw->Ps[i],
                    C0(y[0]), y[1], y[2], y[2] / y[1]);
            any = true;
        }
        fprintf(f, "%s | see Fig. 5 (d) and the reading |\n", any ? "" : "not run");
    }
    fprintf(f, "| T_L sweep: the throughput and fairness trade-off of Fig. 4b–d | the T_L tables "
               "below (per-node spread of acquires across clients) | see the reading |\n\n");

    if (sw->figs[3]) {
        fprintf(f, "## Figure 3: RMA-MCS vs spin (foMPI-Spin) and D-MCS, writers only\n\n"
                   "![Figure 3](plots/rma-fig3.png)\n\n");
        for (unsigned b = 0; b < F3_BENCH; b++) {
            fprintf(f, "### %s%s\n\n", b == 0 ? "ECSB and LB" : bench_lock_kind_name(f3_bench[b]),
                    b == 0 ? " (one run each: throughput and mean latency)" : "");
            fprintf(f, "| P | rma-mcs acq/s | spin acq/s | dmcs acq/s | rma-mcs / spin | "
                       "rma-mcs / dmcs | rma-mcs mean (µs) | spin mean (µs) | dmcs mean (µs) "
                       "|\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
            for (unsigned i = 0; i < sw->nP; i++) {
                const struct lock_point *p[F3_ALGOS];
                for (unsigned a = 0; a < F3_ALGOS; a++) {
                    struct rma_key k = key_default(f3_algos[a], f3_bench[b], sw->Ps[i], 1000000);
                    p[a] = rma_pt(sw, &k);
                }
                fprintf(f, "| %u | %s | %s | %s | %s | %s | %s | %s | %s |\n", sw->Ps[i],
                        C0(m_ops(p[0])), C0(m_ops(p[1])), C0(m_ops(p[2])),
                        CX(ratio(m_ops(p[0]), m_ops(p[1]))), CX(ratio(m_ops(p[0]), m_ops(p[2]))),
                        C1(m_mean(p[0])), C1(m_mean(p[1])), C1(m_mean(p[2])));
            }
            fprintf(f, "\n");
        }
    }
    if (sw->figs[4]) {
        fprintf(f, "## Figure 4: RMA-RW's thresholds (ECSB)\n\n![Figure 4](plots/rma-fig4.png)\n\n");
        fprintf(f, "### (a) T_DC: where the readers' counters are, F_W = 0.2%%\n\n"
                   "T_DC = clients per physical counter. \"every 2nd node\": the counters of "
                   "nodes 0 and 2 serve two nodes' clients each.\n\n"
                   "| P | counters | T_DC | acq/s | mean (µs) | writer mean (µs) |\n"
                   "|---:|---|---:|---:|---:|---:|\n");
        for (unsigned i = 0; i < sw->nP; i++)
            for (unsigned d = 0; d < F4_DC; d++) {
                struct rma_key k = key_default("rma-rw", BENCH_LOCK_ECSB, sw->Ps[i], 2000);
                k.dcn = f4_dc[d].k;
                k.dcc = f4_dc[d].c;
                const struct lock_point *p = rma_pt(sw, &k);
                if (!p) continue;
                fprintf(f, "| %u | %s | %g | %s | %s | %s |\n", sw->Ps[i], f4_dc[d].name,
                        (double)clients_per_node(sw, sw->Ps[i]) * f4_dc[d].k / f4_dc[d].c,
                        C0(m_ops(p)), C1(m_mean(p)), C1(m_wmean(p)));
            }
        for (unsigned part = 0; part < 2; part++) {
            fprintf(f, "\n### (%s) %s, F_W = 25%%\n\n", part ? "c, d" : "b",
                    part ? "the split of T_W = 1000 between T_L,2 and T_L,1"
                         : "the product T_W = T_L,2 × T_L,1");
            fprintf(f, "Acquires per client: per node, the fewest–most measured acquires of its "
                       "clients and (in brackets) their coefficient of variation; \"all CV\" is "
                       "over every client of the cluster.\n\n"
                       "| P | T_L,2 | T_L,1 | T_W | acq/s | mean (µs) | writer mean (µs) | "
                       "writer p99 (µs) | acquires per client, node 0, 1, … | all CV |\n"
                       "|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|\n");
            unsigned n = part ? F4_SPLIT : F4_PROD;
            for (unsigned i = 0; i < sw->nP; i++)
                for (unsigned t = 0; t < n; t++) {
                    const unsigned *tl = part ? f4_split[t] : f4_prod[t];
                    struct rma_key k = key_default("rma-rw", BENCH_LOCK_ECSB, sw->Ps[i], 250000);
                    k.tl2 = tl[0];
                    k.tl1 = tl[1];
                    const struct lock_point *p = rma_pt(sw, &k);
                    if (!p) continue;
                    char sp[512];
                    spread_cell(sp, sizeof sp, p);
                    fprintf(f, "| %u | %u | %u | %u | %s | %s | %s | %s | %s | %.3f |\n",
                            sw->Ps[i], tl[0], tl[1], tl[0] * tl[1], C0(m_ops(p)), C1(m_mean(p)),
                            C1(m_wmean(p)), C1(m_wp99(p)), sp, bench_lock_fair_cv(&p->r.fair));
                }
        }
        fprintf(f, "\n### (e, f) T_R at F_W = 0.2%%, 2%% and 5%%\n\n"
                   "| P | F_W | T_R | acq/s | mean (µs) | writer mean (µs) |\n"
                   "|---:|---:|---:|---:|---:|---:|\n");
        for (unsigned i = 0; i < sw->nP; i++) {
            for (unsigned t = 0; t < F4_TR; t++) {
                struct rma_key k = key_default("rma-rw", BENCH_LOCK_ECSB, sw->Ps[i], 2000);
                k.tr = f4_tr[t];
                const struct lock_point *p = rma_pt(sw, &k);
                if (p)
                    fprintf(f, "| %u | 0.2%% | %u | %s | %s | %s |\n", sw->Ps[i], f4_tr[t],
                            C0(m_ops(p)), C1(m_mean(p)), C1(m_wmean(p)));
            }
            for (unsigned w = 0; w < F4F_FW; w++)
                for (unsigned t = 0; t < F4F_TR; t++) {
                    struct rma_key k = key_default("rma-rw", BENCH_LOCK_ECSB, sw->Ps[i], f4f_fw[w]);
                    k.tr = f4f_tr[t];
                    const struct lock_point *p = rma_pt(sw, &k);
                    if (p)
                        fprintf(f, "| %u | %g%% | %u | %s | %s | %s |\n", sw->Ps[i],
                                f4f_fw[w] / 1e4, f4f_tr[t], C0(m_ops(p)), C1(m_mean(p)),
                                C1(m_wmean(p)));
                }
        }
        fprintf(f, "\n");
    }
    if (sw->figs[5]) {
        fprintf(f, "## Figure 5: RMA-RW vs fompi-rw (foMPI-RW), ECSB\n\n"
                   "![Figure 5](plots/rma-fig5.png)\n\n"
                   "| P | F_W | rma-rw acq/s | fompi-rw acq/s | rma-rw / fompi-rw | rma-rw mean "
                   "(µs) | fompi-rw mean (µs) | rma-rw writer mean (µs) | fompi-rw writer mean "
                   "(µs) |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (unsigned i = 0; i < sw->nP; i++)
            for (unsigned w = 0; w < F5_FW; w++) {
                struct rma_key k = key_default("rma-rw", BENCH_LOCK_ECSB, sw->Ps[i], f5_fw[w]);
                const struct lock_point *a = rma_pt(sw, &k);
                k.algo = "fompi-rw";
                const struct lock_point *b = rma_pt(sw, &k);
                fprintf(f, "| %u | %g%% | %s | %s | %s | %s | %s | %s | %s |\n", sw->Ps[i],
                        f5_fw[w] / 1e4, C0(m_ops(a)), C0(m_ops(b)),
                        CX(ratio(m_ops(a), m_ops(b))), C1(m_mean(a)), C1(m_mean(b)),
                        C1(m_wmean(a)), C1(m_wmean(b)));
            }
        fprintf(f, "\nWriter-only references (the same runs as Figure 3's ECSB):\n\n"
                   "| P | spin acq/s | dmcs acq/s | rma-mcs acq/s |\n|---:|---:|---:|---:|\n");
        for (unsigned i = 0; i < sw->nP; i++) {
            double y[F5_REFS];
            for (unsigned a = 0; a < F5_REFS; a++) {
                struct rma_key k = key_default(f5_refs[a], BENCH_LOCK_ECSB, sw->Ps[i], 1000000);
                y[a] = m_ops(rma_pt(sw, &k));
            }
            fprintf(f, "| %u | %s | %s | %s |\n", sw->Ps[i], C0(y[0]), C0(y[1]), C0(y[2]));
        }
        fprintf(f, "\n");
    }
    /* anything odd */
    unsigned odd = 0;
    for (size_t i = 0; i < sw->n; i++) {
        const struct lock_point *p = &sw->pts[i];
        if (!p->r.errors && !p->lost && p->r.ops) continue;
        if (!odd++) fprintf(f, "## Points with errors\n\n");
        fprintf(f, "- %s %s P=%u F_W=%g%%: %llu ops, %llu errors%s", p->algo,
                bench_lock_kind_name(p->q.bench), p->P, writers_pct(p),
                (unsigned long long)p->r.ops, (unsigned long long)p->r.errors,
                p->lost ? ", lost updates: " : "");
        if (p->lost) fprintf(f, "%lld", (long long)p->lost);
        fprintf(f, "\n");
    }
    if (odd) fprintf(f, "\n");
    fprintf(f, "## Reading\n\n(Not generated: add a reading of this run by hand -- where and why "
               "these figures differ from the paper's Figures 3–5, as docs/reports/rma-sweep.md does.)\n");
}

/* Runs the planned points; prints one line per point. 0, or 1 on a failed run. */
static int rma_run(struct rma_sweep *sw, struct fabric *f, unsigned repeat)
{
    char err[512];
    for (size_t i = 0; i < sw->n && !bench_stop; i++) {
        struct lock_point *p = &sw->pts[i];
        struct lock_point *runs = calloc(repeat, sizeof *runs);
        if (!runs) return 1;
        int r = 0;
        for (unsigned k = 0; k < repeat && !r && !bench_stop; k++) {
            runs[k] = *p;
            r = run_point(f, &runs[k], err, sizeof err);
        }
        if (r || bench_stop) {
            if (r)
                fprintf(stderr, "kvbench lock: %s %s P=%u: %s\n", p->algo,
                        bench_lock_kind_name(p->q.bench), p->P, err);
            free(runs);
            return 1;
        }
        *p = median_run(runs, repeat);
        free(runs);
        printf("[%zu/%zu] fig%u %-8s %-4s P=%-4u %ux%u/node W=%g%% TL=%lld,%lld TR=%lld "
               "DC=%u/%u: %.0f acq/s, mean %.1f us, p99 %.1f us, CV %.3f%s%s\n",
               i + 1, sw->n, p->fig, p->algo, bench_lock_kind_name(p->q.bench), p->P, p->threads,
               p->q.tasks, writers_pct(p), (long long)p->q.rma_tl2, (long long)p->q.rma_tl1,
               (long long)p->q.rma_tr, p->q.rma_dc_nodes, p->q.rma_dc_per_node, ops_per_s(p),
               mean_us(p), hist_percentile(&p->r.h, 99) / 1e3, bench_lock_fair_cv(&p->r.fair),
               p->r.errors ? "  ERRORS" : "", p->lost ? "  LOST UPDATES" : "");
        fflush(stdout);
    }
    return bench_stop ? 1 : 0;
}

/* ------------------------------------------------------------------------------------------ */

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

int cmd_lock(int argc, char **argv)
{
    struct bench_common co;
    bench_common_init(&co);
    co.nodes = 2;
    co.spin_ns = 0; /* workers block at once: see --help */
    const char *algos[8] = {"alock"}, *cdf = NULL, *out = "kvbench-report";
    unsigned nalgos = 1;
    unsigned threads = 2, locks = 20, locality = 95, repeat = 1;
    bool sweep = false, sweep_rma = false, transport_given = false, nodes_given = false;
    bool seconds_given = false, warmup_given = false, timeout_given = false;
    bool read_given = false, writers_given = false, cs_given = false, think_given = false;
    bool tl_given = false;
    double warmup = 0.5, writers = 100;
    unsigned tdc = 0, sweep_ps[RMA_MAXP] = {4, 16, 64, 256, 512}, nsweep_ps = 5;
    bool repeat_given = false;
    bool figs[6] = {false, false, false, true, true, true}, figs_given = false;
    struct bench_lock_req base;
    memset(&base, 0, sizeof base);
    base.local_budget = 5;
    base.remote_budget = 20;
    base.locks_per_op = 1;
    base.tasks = 1;
    base.alpha_milli = 2000;
    base.timeout_ns = 100 * NS_PER_MS;
    base.lease_ns = 10 * NS_PER_MS;
    {
        struct lock_cfg lc;
        lock_cfg_init(&lc);
        base.rma_tl2 = lc.rma_tl2;
        base.rma_tl1 = lc.rma_tl1;
        base.rma_tr = lc.rma_tr;
    }
    base.rma_dc_nodes = base.rma_dc_per_node = 1;
    bool alpha_given = false;
    char algo_err[512];
    snprintf(algo_err, sizeof algo_err, "--algo must be one of %s, or a list of up to 8 (got '%%s')",
             lock_algo_names());
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t u;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        if (!strcmp(o, "--transport")) transport_given = true;
        if (!strcmp(o, "--nodes")) nodes_given = true;
        if (!strcmp(o, "--seconds")) seconds_given = true;
        if (!strcmp(o, "--sweep")) {
            sweep = true;
            continue;
        }
        if (!strcmp(o, "--sweep-rma")) {
            sweep_rma = true;
            continue;
        }
        if (bench_common_opt(&co, "lock", argc, argv, &i)) continue;
        if (!v) bench_value_missing("lock", usage, o);
        if (!strcmp(o, "--algo")) {
            nalgos = 0;
            char *dup = strdup(v), *save = NULL;
            for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (!lock_algo_find(t) || nalgos == 8) bench_usage_error("lock", algo_err, v);
                algos[nalgos++] = lock_algo_find(t)->name;
            }
            free(dup);
            if (!nalgos) bench_usage_error("lock", algo_err, v);
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
            base.read_ppm = (uint32_t)u * 10000;
            read_given = true;
        } else if (!strcmp(o, "--writers")) {
            if (parse_double(v, &writers) || !(writers >= 0) || writers > 100 ||
                (writers > 0 && writers < 0.0001))
                bench_usage_error("lock", "--writers must be a percentage from 0 to 100, at least 0.0001 when not 0 (got '%s')", v);
            writers_given = true;
        } else if (!strcmp(o, "--bench")) {
            int b = bench_lock_kind_find(v);
            if (b < 0) bench_usage_error("lock", "--bench must be lb, ecsb, sob, wcsb or warb (got '%s')", v);
            base.bench = (uint32_t)b;
        } else if (!strcmp(o, "--tdc")) {
            if (parse_uint_range(v, 1, 1000000, &u)) bench_usage_error("lock", "--tdc must be a number of lock clients per counter, 1..1000000 (got '%s')", v);
            tdc = (unsigned)u;
        } else if (!strcmp(o, "--tl")) {
            unsigned long l2, l1;
            char extra;
            if (sscanf(v, "%lu,%lu%c", &l2, &l1, &extra) != 2 || l2 < 1 || l1 < 1 || l2 > 1000000 || l1 > 1000000)
                bench_usage_error("lock", "--tl needs T_L2,T_L1, both 1..1000000 (got '%s')", v);
            base.rma_tl2 = (int64_t)l2;
            base.rma_tl1 = (int64_t)l1;
            tl_given = true;
        } else if (!strcmp(o, "--tr")) {
            if (parse_uint_range(v, 1, 1000000, &u)) bench_usage_error("lock", "--tr must be 1..1000000 (got '%s')", v);
            base.rma_tr = (int64_t)u;
            tl_given = true;
        } else if (!strcmp(o, "--sweep-p")) {
            int n = parse_list(v, sweep_ps, RMA_MAXP, 1, 65536);
            if (n < 0) bench_usage_error("lock", "--sweep-p needs up to 8 lock-client counts, e.g. 4,16,64,256 (got '%s')", v);
            nsweep_ps = (unsigned)n;
        } else if (!strcmp(o, "--figs")) {
            unsigned fl[3];
            int n = parse_list(v, fl, 3, 3, 5);
            if (n < 0) bench_usage_error("lock", "--figs needs a list of 3, 4 and 5 (got '%s')", v);
            memset(figs, 0, sizeof figs);
            for (int k = 0; k < n; k++) figs[fl[k]] = true;
            figs_given = true;
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
            think_given = true;
        } else if (!strcmp(o, "--lease-ms")) {
            double m;
            if (parse_double(v, &m) || !(m >= 0.01) || m > 60000) bench_usage_error("lock", "--lease-ms must be 0.01..60000 (got '%s')", v);
            base.lease_ns = (int64_t)(m * 1e6);
        } else if (!strcmp(o, "--timeout-ms")) {
            double m;
            if (parse_double(v, &m) || !(m >= 0) || m > 600000) bench_usage_error("lock", "--timeout-ms must be 0..600000 (got '%s')", v);
            base.timeout_ns = (int64_t)(m * 1e6);
            timeout_given = true;
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
            warmup_given = true;
        } else if (!strcmp(o, "--cs-ns")) {
            if (parse_uint_range(v, 0, 1000000000, &u)) bench_usage_error("lock", "bad --cs-ns '%s'", v);
            base.cs_ns = (int64_t)u;
            cs_given = true;
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
            repeat_given = true;
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
    if (sweep && sweep_rma) bench_usage_error("lock", "%s: choose one of --sweep and --sweep-rma", "--sweep");
    if (read_given && writers_given)
        bench_usage_error("lock", "%s: give one of them (both say how many acquires are shared)", "--read-ratio and --writers");
    if (writers_given) base.read_ppm = 1000000 - (uint32_t)(writers * 1e4 + 0.5);
    if (base.bench && (cs_given || think_given))
        bench_usage_error("lock", "--bench %s defines its own critical section and wait: drop --cs-ns and --think-us", bench_lock_kind_name(base.bench));
    if ((base.bench || sweep_rma) && !timeout_given) base.timeout_ns = 0; /* the paper's locks never give up */
    if (figs_given && !sweep_rma) bench_usage_error("lock", "%s goes with --sweep-rma", "--figs");
    if (sweep_rma) {
        if (!nodes_given && !co.config && !co.endpoints) co.nodes = 4;
        if (!seconds_given) co.seconds = 1;
        if (!warmup_given) warmup = 0.3;
        if (!repeat_given) repeat = 3;
        if (base.bench || writers_given || read_given || tdc || tl_given || cs_given || think_given)
            bench_usage_error("lock", "--sweep-rma sets the benchmark, writer fraction and thresholds of each point itself (drop %s)", "--bench, --writers, --read-ratio, --tdc, --tl, --tr, --cs-ns, --think-us");
    }
    base.warmup_ns = (int64_t)(warmup * 1e9);
    base.run_ns = (int64_t)(co.seconds * 1e9);
    base.seed = (uint64_t)clock_now_ns();
    if (alpha_given && base.dist != BENCH_DIST_POWERLAW)
        bench_usage_error("lock", "--alpha goes with --dist powerlaw (got '%s')", "--dist uniform");
    /* writer fractions the exclusive-only algorithms cannot run */
    for (unsigned i = 0; !sweep && !sweep_rma && i < nalgos; i++)
        if (writers_given && writers < 100 && exclusive_only(algos[i])) {
            char w[32];
            fmt_pct(w, sizeof w, writers);
            fprintf(stderr, "kvbench lock: error: %s has only the exclusive mode: --writers must "
                            "be 100 (got %s)\n", algos[i], w);
            return 2;
        }
    /* every request is checked here, before any node starts, with the nodes' own rules */
    for (unsigned i = 0; !sweep_rma && i < (sweep ? (unsigned)NALG : nalgos); i++) {
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
    if (threads * base.tasks > BENCH_MAX_CLIENTS) {
        fprintf(stderr, "kvbench lock: error: threads x tasks must be at most %u\n", BENCH_MAX_CLIENTS);
        return 2;
    }
    if (tdc && !co.config && !co.endpoints) { /* the node count is known: say it before starting */
        char why[256];
        uint32_t k, c;
        if (tdc_layout(tdc, threads * base.tasks, co.nodes, &k, &c, why, sizeof why)) {
            fprintf(stderr, "kvbench lock: error: %s\n", why);
            return 2;
        }
    }
    struct rma_sweep sw;
    memset(&sw, 0, sizeof sw);
    if (sweep_rma) {
        /* the shape of every P, checked before any node starts (with --nodes known) */
        unsigned nodes = co.config || co.endpoints ? 0 : co.nodes;
        for (unsigned i = 0; nodes && i < nsweep_ps; i++) {
            unsigned P = sweep_ps[i], cpn = P / nodes;
            unsigned th = cpn < threads ? cpn : threads;
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
    if (tdc) {
        char why[256];
        if (tdc_layout(tdc, threads * base.tasks, nn, &base.rma_dc_nodes, &base.rma_dc_per_node,
                       why, sizeof why)) {
            fprintf(stderr, "kvbench lock: error: %s\n", why);
            bench_cluster_close(&bc);
            return 2;
        }
    }
    const char *tname = fab_transport_name(bc.transport);
    char wr[32];
    fmt_pct(wr, sizeof wr, 100.0 - (double)base.read_ppm / 1e4);
    if (sweep_rma) {
        printf("# kvbench lock --sweep-rma: transport %s, %u node%s%s, %.1f s per run after %.1f s "
               "warm-up, up to %u threads per node\n",
               tname, nn, nn == 1 ? "" : "s", bc.launched ? " (local processes)" : "", co.seconds,
               warmup, threads);
    } else {
        printf("# kvbench lock: transport %s, %u node%s%s, %.1f s per run after %.1f s warm-up, "
               "budgets %lld/%lld, critical section %lld ns, think %lld us, %s%% writers, %u "
               "lock%s per op, %s, lease %.1f ms, attempt timeout %.1f ms, %.4f%% injected "
               "failures\n",
               tname, nn, nn == 1 ? "" : "s", bc.launched ? " (local processes)" : "", co.seconds,
               warmup, (long long)base.local_budget, (long long)base.remote_budget,
               (long long)base.cs_ns, (long long)(base.think_ns / NS_PER_US), wr,
               base.locks_per_op, base.locks_per_op == 1 ? "" : "s",
               base.dist == BENCH_DIST_POWERLAW ? "power-law" : "uniform",
               (double)base.lease_ns / 1e6, (double)base.timeout_ns / 1e6,
               (double)base.fail_ppm / 1e4);
        if (base.bench)
            printf("# benchmark %s (the RMA paper's), %u lock client%s per node (%u threads x %u "
                   "tasks); rma: T_L,2 %lld, T_L,1 %lld, T_R %lld, a reader counter every %u "
                   "node%s, %u per node (T_DC %g)\n",
                   bench_lock_kind_name(base.bench), threads * base.tasks,
                   threads * base.tasks == 1 ? "" : "s", threads, base.tasks,
                   (long long)base.rma_tl2, (long long)base.rma_tl1, (long long)base.rma_tr,
                   base.rma_dc_nodes, base.rma_dc_nodes == 1 ? "" : "s", base.rma_dc_per_node,
                   (double)threads * base.tasks * base.rma_dc_nodes / base.rma_dc_per_node);
        if (base.dist == BENCH_DIST_POWERLAW)
            printf("# power-law exponent %.3f\n", (double)base.alpha_milli / 1000.0);
    }
    fflush(stdout);

    int rc = 0;
    if (sweep_rma) {
        sw.nodes = nn;
        sw.maxthreads = threads;
        sw.nP = nsweep_ps;
        memcpy(sw.Ps, sweep_ps, sizeof sw.Ps);
        memcpy(sw.figs, figs, sizeof sw.figs);
        sw.base = base;
        for (unsigned i = 0; i < sw.nP; i++) {
            unsigned P = sw.Ps[i], cpn = P / nn;
            unsigned th = cpn && cpn < threads ? cpn : threads;
            if (P % nn || !cpn || cpn % th || cpn / th > BENCH_MAX_TASKS) {
                fprintf(stderr, "kvbench lock: error: --sweep-p %u does not fit %u nodes\n", P, nn);
                bench_cluster_close(&bc);
                return 2;
            }
        }
        if (rma_plan(&sw)) {
            bench_cluster_close(&bc);
            return 1;
        }
        for (size_t i = 0; i < sw.n; i++) {
            const char *why = bench_lock_req_check(&sw.pts[i].q);
            if (why) {
                fprintf(stderr, "kvbench lock: error: %s: %s\n", sw.pts[i].algo, why);
                free(sw.pts);
                bench_cluster_close(&bc);
                return 2;
            }
        }
        printf("# %zu points\n", sw.n);
        int64_t t0 = clock_now_ns();
        rc = rma_run(&sw, bc.f, repeat);
        double elapsed = (double)(clock_now_ns() - t0) / 1e9;
        printf("# the sweep took %.1f minutes\n", elapsed / 60.0);
        if (co.json) {
            struct json j;
            FILE *jf = bench_json_begin(&j, co.json, "lock", &bc, tname, nn);
            if (!jf) {
                rc = 1;
            } else {
                json_kv_double(&j, "seconds", co.seconds);
                json_kv_double(&j, "warmup_seconds", warmup);
                json_kv_bool(&j, "sweep_rma", true);
                json_obj_end(&j);
                json_key(&j, "results");
                json_arr_begin(&j);
                for (size_t i = 0; i < sw.n; i++)
                    if (sw.pts[i].r.ops + sw.pts[i].r.errors) json_point(&j, &sw.pts[i], nn, false);
                json_arr_end(&j);
                json_obj_end(&j);
                if (fclose(jf)) rc = 1;
            }
        }
        if (!rc) {
            char cmdline[2048], path[4200];
            size_t n = (size_t)snprintf(cmdline, sizeof cmdline, "kvbench lock");
            for (int i = 1; i < argc && n < sizeof cmdline; i++)
                n += (size_t)snprintf(cmdline + n, sizeof cmdline - n, " %s", argv[i]);
            struct rma_env env = {cmdline, tname, co.seconds, warmup, elapsed, repeat};
            mkdir(out, 0755);
            snprintf(path, sizeof path, "%s/rma-sweep.md", out);
            FILE *f = fopen(path, "w");
            if (!f) {
                fprintf(stderr, "kvbench lock: cannot write %s: %s\n", path, strerror(errno));
                rc = 1;
            } else {
                rma_report(f, &sw, &env);
                if (fclose(f)) rc = 1;
                else printf("wrote %s\n", path);
            }
            if (rma_plots(&sw, out)) {
                fprintf(stderr, "kvbench lock: plotting failed; the data files and the script "
                                "are in %s/plots\n", out);
                rc = 1;
            } else {
                printf("wrote %s/plots/rma-fig{3,4,5}.png\n", out);
            }
        }
        for (size_t i = 0; i < sw.n; i++)
            if (sw.pts[i].r.errors || sw.pts[i].lost) rc = 1;
        free(sw.pts);
        goto close;
    }

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
        } else {
            snprintf(p->algo, sizeof p->algo, "%s", algos[i]);
            p->threads = threads;
            p->locality = locality;
            p->locks = locks;
        }
        p->read_ratio = (double)base.read_ppm / 1e4;
        p->k = base.locks_per_op;
        point_req(p, &base);
        p->P = nn * p->threads * base.tasks;
        int r = 0;
        struct lock_point *runs = calloc(repeat, sizeof *runs); /* ~60 KB each */
        if (!runs) {
            rc = 1;
            break;
        }
        for (unsigned k = 0; k < repeat && !r && !bench_stop; k++) {
            runs[k] = *p;
            r = run_point(bc.f, &runs[k], err, sizeof err);
        }
        if (r || bench_stop) {
            if (r) fprintf(stderr, "kvbench lock: %s\n", err);
            free(runs);
            rc = 1;
            break;
        }
        /* the run with the median throughput stands for the point */
        *p = median_run(runs, repeat);
        free(runs);
        if (p->r.errors || p->lost) rc = 1;
        print_point(p);
    }

    if (!sweep && !rc && !bench_stop) {
        printf("\n%u nodes x %u threads x %u tasks = %u lock clients\n", nn, threads, base.tasks,
               nn * threads * base.tasks);
        printf("%-8s %4s %6s %4s %6s %2s %11s %9s %9s %9s %10s %7s %8s %7s %7s\n", "algo",
               "thr", "locks", "loc%", "wr%", "K", "ops/s", "mean(us)", "p50(us)", "p99(us)",
               "p99.9(us)", "RT/op", "timeouts", "aborts", "resets");
        for (unsigned i = 0; i < nalgos; i++) {
            const struct lock_point *p = &pts[i];
            char w[16];
            fmt_pct(w, sizeof w, writers_pct(p));
            printf("%-8s %4u %6u %4u %6s %2u %11.0f %9.2f %9.2f %9.2f %10.2f %7.3f %8llu %7llu "
                   "%7llu\n",
                   p->algo, p->threads, p->locks, p->locality, w, p->k, ops_per_s(p), mean_us(p),
                   hist_percentile(&p->r.h, 50) / 1e3, hist_percentile(&p->r.h, 99) / 1e3,
                   hist_percentile(&p->r.h, 99.9) / 1e3, rt_per_op(p),
                   (unsigned long long)p->r.timeouts, (unsigned long long)p->r.aborts,
                   (unsigned long long)p->r.resets);
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
        for (unsigned i = 0; i < nalgos; i++) {
            const struct lock_point *p = &pts[i];
            if (p->r.write_ops && p->r.write_ops < p->r.ops)
                printf("%s writes: %llu ops, mean %.2f us, p99 %.2f us\n", p->algo,
                       (unsigned long long)p->r.write_ops, wmean_us(p),
                       hist_percentile(&p->r.wh, 99) / 1e3);
        }
        for (unsigned i = 0; i < nalgos; i++) print_spread(stdout, &pts[i]);
        for (unsigned i = 0; i < nalgos; i++)
            if (pts[i].checked)
                printf("%s wcsb: %llu increments, %lld lost\n", pts[i].algo,
                       (unsigned long long)pts[i].r.increments, (long long)pts[i].lost);
        if (base.bench == BENCH_LOCK_LB)
            for (unsigned i = 0; i < nalgos; i++)
                printf("LB %s: mean latency (acquire + release) %.2f us\n", pts[i].algo,
                       mean_us(&pts[i]));
        for (unsigned i = 1; i < nalgos; i++) {
            double p0 = (double)hist_percentile(&pts[0].r.h, 99.9),
                   pi = (double)hist_percentile(&pts[i].r.h, 99.9);
            if (ops_per_s(&pts[i]) > 0 && pi > 0)
                printf("%s / %s: throughput %.2fx, mean latency %.3fx, p99.9 latency %.3fx\n",
                       pts[0].algo, pts[i].algo, ops_per_s(&pts[0]) / ops_per_s(&pts[i]),
                       mean_us(&pts[0]) / mean_us(&pts[i]), p0 / pi);
        }
    }
    for (unsigned i = 0; !sweep && i < nalgos; i++)
        if (pts[i].lost)
            fprintf(stderr, "kvbench lock: %s: %lld increments of the data lines were lost: "
                            "writers overlapped\n", pts[i].algo, (long long)pts[i].lost);
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
            json_kv_str(&j, "bench", bench_lock_kind_name(base.bench));
            json_kv_double(&j, "writers_pct", 100.0 - (double)base.read_ppm / 1e4);
            json_kv_u64(&j, "tasks", base.tasks);
            json_kv_i64(&j, "rma_tl2", base.rma_tl2);
            json_kv_i64(&j, "rma_tl1", base.rma_tl1);
            json_kv_i64(&j, "rma_tr", base.rma_tr);
            json_kv_u64(&j, "rma_dc_every_nodes", base.rma_dc_nodes);
            json_kv_u64(&j, "rma_dc_per_node", base.rma_dc_per_node);
            json_kv_bool(&j, "sweep", sweep);
            json_obj_end(&j);
            json_key(&j, "results");
            json_arr_begin(&j);
            for (size_t i = 0; i < done; i++) json_point(&j, &pts[i], nn, true);
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
close:
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
