/* kvbench range: the range-lock benchmark of the range-lock thesis (server-side combining vs
 * client-side range locks). Node 0 owns a space of 2^16 units; client threads inside the other
 * nodes (separate kvserver processes that share nothing but the fabric) acquire a range, hold it
 * for --cs-us, release it, and record the latency. Workloads: the thesis's micro-benchmark
 * (E-R1: random ranges, shared or exclusive) and its Filebench-OLTP-like mix (E-R2: readers,
 * paced writers, a log writer). Several designs run one after the other on the same nodes;
 * --sweep runs the thesis's grids and writes a table and gnuplot plots. */
#include "bench.h"
#include "tools/kvbench/opts.h"

#include "common/clock.h"
#include "common/parse.h"
#include "locks/range/range.h"
#include "tools/kvbench/node/bench.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The space (the thesis's: 2^16 memory units; static segmentation's 2^8-unit segments; Citron's
 * 4-ary tree of depth 5, 1024 leaves of 64 units). */
#define SPACE_ID 1
#define SPACE_BITS 16
#define SPACE_SEG_BITS 8
#define SPACE_DEPTH 5
#define MICRO_MAX_UNITS 2048u /* 2^11 = 8 segments of 2^8: the thesis's cap for segmentation */

static const char range_head[] =
    "usage: kvbench range [--algo A[,A...]] [--workload micro|oltp] [--clients C] [options]\n"
    "\n"
    "The range-lock benchmark of the range-lock thesis. kvbench starts --nodes local nodes; node 0\n"
    "owns one range space of 2^16 units (created for the run: 256 segments of 2^8 units for\n"
    "segment, a 4-ary tree of depth 5 -- 1024 leaves of 64 units -- for citron). The C clients\n"
    "are threads inside nodes 1..N-1, round-robin (with --nodes 1, inside node 0), each with its\n"
    "own fabric context. Each op acquires a range, holds it for --cs-us, and releases it; its\n"
    "latency is acquire + hold + release. An attempt that times out (--timeout-ms) or is aborted\n"
    "by a lease reset is retried until it succeeds (its latency covers every attempt; the\n"
    "retries are counted); any other error ends the run with a message. Reports ops/s, mean and\n"
    "p50/p99/p99.9 latency, fabric round trips per op (the client nodes' fabric counters: one\n"
    "RPC or one chain of one-sided ops each), retries, the owner's grants and waits, and ratios\n"
    "to the first design.\n"
    "\n"
    "Designs (--algo, comma-separated to compare them in one run; ratios to the first):\n"
    "  combiner-rpc   server-side: RPC handlers enqueue, one combiner thread owns the interval\n"
    "                 tree and grants FIFO; a blocked request's RPC is answered at its grant\n"
    "  combiner-rdma  the same, but a blocked client polls its ready flag with one-sided READs\n"
    "  itree          server-side baseline: the RPC handler updates the interval tree under a\n"
    "                 mutex\n"
    "  segment        client-side: one DSLR word per 2^8-unit segment, taken in ascending order\n"
    "  citron         client-side: a 4-ary segment tree of DSLR words (exclusive only: it takes\n"
    "                 shared requests as exclusive, so its results do not depend on --writes)\n"
    "The client-side designs lock every segment or tree node covering a range (a superset).\n"
    "\n"
    "Workloads (--workload):\n"
    "  micro   (thesis E-R1) each op locks a range of a size uniform in [1, 2^11] units (2^11 =\n"
    "          8 segments: the thesis's cap for static segmentation; the same distribution for\n"
    "          every design) at a uniformly random position fully inside [0, 2^16); exclusive\n"
    "          with probability --writes percent, else shared\n"
    "  oltp    (thesis E-R2, Filebench-OLTP-like) the 2^16 units are 8 data files and 1 log\n"
    "          file, 9 equal parts of floor(65536/9) = 7281 units (the last 7 units unused).\n"
    "          The clients are readers, writers and one log writer in the thesis's proportion\n"
    "          39:9:1, scaled to --clients (at least one of each; needs --clients >= 3; the\n"
    "          split is printed). Readers lock shared 2^6-unit ranges at random positions in a\n"
    "          random data file; writers lock exclusive 2^6-unit ranges, data files round-robin,\n"
    "          random position; whenever the readers (together) complete 1000 reads, each\n"
    "          writer does 100 writes; the log writer locks one exclusive 2^11-unit range of\n"
    "          the log per 3200 reads. Writers that are ahead nap (30 us steps). Each role is\n"
    "          placed round-robin over the client nodes, and a node's writers are paced by its\n"
    "          own readers' count scaled to all readers. --writes is ignored.\n"
    "\n";

static const char range_tail[] =
    "\n"
    "examples:\n"
    "  kvbench range --algo combiner-rpc,itree,segment --workload micro --clients 8 --writes 1\n"
    "  kvbench range --algo combiner-rpc,combiner-rdma,itree,segment,citron --workload oltp\n"
    "  kvbench range --sweep --seconds 1 --warmup 0.3\n";

static const char *const all_algos[] = {"combiner-rpc", "combiner-rdma", "itree", "segment",
                                        "citron"};
#define NALL 5
#define MAX_ALGOS 8
static const unsigned sweep_writes[] = {0, 1, 20, 100};
static const unsigned sweep_clients[] = {1, 2, 4, 8, 16};
#define NSW 4
#define NSC 5

struct range_point {
    char algo[16];
    unsigned workload, clients, write_pct;
    unsigned readers, writers, loggers; /* oltp */
    bool done, failed;                  /* failed: the design reported an error */
    bool skipped;                       /* --sweep: not run, the design failed earlier */
    char error[200];
    double seconds;
    struct range_server_stats owner;    /* the owner's counters over the run */
    struct bench_range_res r;           /* merged over the client nodes */
};

static double ops_per_s(const struct range_point *p)
{
    return p->seconds > 0 ? (double)p->r.ops / p->seconds : 0;
}
static double per_op(const struct range_point *p, uint64_t v)
{
    return p->r.ops ? (double)v / (double)p->r.ops : 0;
}
static const char *workload_name(unsigned w) { return w == BENCH_RANGE_OLTP ? "oltp" : "micro"; }
static const char *const class_names[BENCH_RANGE_CLASSES] = {"READ", "WRITE", "LOG"};
static const char *const class_json[BENCH_RANGE_CLASSES] = {"read", "write", "log"};

/* The thesis's 39 readers : 9 writers : 1 log writer, scaled to c >= 3 clients. */
static void oltp_split(unsigned c, unsigned *r, unsigned *w, unsigned *l)
{
    *l = (unsigned)lround(c / 49.0);
    if (*l < 1) *l = 1;
    *w = (unsigned)lround(c * 9.0 / 49.0);
    if (*w < 1) *w = 1;
    *r = c - *w - *l;
}

/* Where the clients run: per client node, its share. Client nodes are 1..n-1 (0 alone). */
struct placement {
    unsigned nodes;      /* client nodes */
    uint16_t node[LAUNCH_MAX];
    unsigned threads[LAUNCH_MAX], readers[LAUNCH_MAX], writers[LAUNCH_MAX], loggers[LAUNCH_MAX];
    unsigned first[LAUNCH_MAX];
};

static void share(unsigned total, unsigned m, unsigned *out)
{
    for (unsigned j = 0; j < m; j++) out[j] = total / m + (j < total % m);
}

/* Returns false if a node would get more than BENCH_MAX_THREADS clients. */
static bool place(const struct range_point *p, unsigned nn, struct placement *pl)
{
    memset(pl, 0, sizeof *pl);
    unsigned m = nn > 1 ? nn - 1 : 1;
    pl->nodes = m;
    for (unsigned j = 0; j < m; j++) pl->node[j] = (uint16_t)(nn > 1 ? j + 1 : 0);
    if (p->workload == BENCH_RANGE_OLTP) {
        /* each role round-robin from the first client node: since readers >= writers >=
         * log writers, every node with writers has readers to pace them */
        share(p->readers, m, pl->readers);
        share(p->writers, m, pl->writers);
        share(p->loggers, m, pl->loggers);
        for (unsigned j = 0; j < m; j++)
            pl->threads[j] = pl->readers[j] + pl->writers[j] + pl->loggers[j];
    } else {
        share(p->clients, m, pl->threads);
    }
    unsigned first = 0;
    for (unsigned j = 0; j < m; j++) {
        pl->first[j] = first;
        first += pl->threads[j];
        if (pl->threads[j] > BENCH_MAX_THREADS) return false;
    }
    return true;
}

static int64_t lease_ns = 50 * NS_PER_MS; /* --lease-ms */
static unsigned tasks_per_thread = 1;      /* --tasks */

static void base_req(struct bench_range_req *q, const struct range_point *p, int64_t warmup_ns,
                     int64_t run_ns, int64_t cs_ns, int64_t timeout_ns, uint64_t seed)
{
    memset(q, 0, sizeof *q);
    snprintf(q->algo, sizeof q->algo, "%s", p->algo);
    q->workload = p->workload;
    q->owner = 0;
    q->space = SPACE_ID;
    q->bits = SPACE_BITS;
    q->threads = 1;
    q->tasks = tasks_per_thread;
    if (p->workload == BENCH_RANGE_MICRO) {
        q->write_pct = p->write_pct;
        q->max_units = MICRO_MAX_UNITS;
    } else {
        q->total_readers = p->readers;
        q->total_writers = p->writers;
        q->total_loggers = p->loggers;
        q->readers = 1;
        q->threads = 1;
    }
    q->warmup_ns = warmup_ns;
    q->run_ns = run_ns;
    q->cs_ns = cs_ns;
    q->timeout_ns = timeout_ns;
    q->lease_ns = lease_ns;
    q->seed = seed;
}

static int owner_stats(struct fab_ctx *c, struct range_server_stats *st, char *err, size_t cap)
{
    struct fab_buf resp = {0};
    int rc = fab_rpc_call(c, 0, KV_RPC_BENCH_RANGE_STATS, NULL, 0, &resp, 0);
    if (rc) {
        snprintf(err, cap, "node 0: reading the range-lock service's counters: %s",
                 bench_strerror(rc));
    } else {
        struct pack_r r;
        pack_r_init(&r, resp.data, resp.len);
        st->grants = unpack_u64(&r);
        st->waits = unpack_u64(&r);
        st->releases = unpack_u64(&r);
        st->cancels = unpack_u64(&r);
        st->batches = unpack_u64(&r);
        if (!unpack_done(&r)) {
            rc = RDKV_EPROTO;
            snprintf(err, cap, "node 0: malformed range-lock counters");
        }
    }
    fab_buf_free(&resp);
    return rc;
}

/* One measurement: the space on node 0, the clients on every client node at once. Returns an
 * infrastructure error (message in err); a design's error comes back in p->failed/p->error. */
static int run_point(struct fabric *f, struct range_point *pt, const struct bench_range_req *base,
                     char *err, size_t errcap)
{
    struct fab_ctx *c;
    if (fab_ctx_create(f, &c)) {
        snprintf(err, errcap, "cannot create a fabric context");
        return RDKV_ENOMEM;
    }
    unsigned nn = fab_num_nodes(f);
    struct placement pl;
    place(pt, nn, &pl); /* checked by the caller */
    struct fab_buf *resp = calloc(pl.nodes, sizeof *resp);
    struct fab_buf pr = {0};
    int rc = resp ? 0 : RDKV_ENOMEM;
    if (rc) snprintf(err, errcap, "out of memory");
    struct pack_w w;
    pack_w_init(&w);
    struct bench_range_space sp = {.space = SPACE_ID, .bits = SPACE_BITS,
                                   .seg_bits = SPACE_SEG_BITS, .tree_depth = SPACE_DEPTH};
    bench_range_space_pack(&sp, &w);
    if (!rc) {
        rc = fab_rpc_call(c, 0, KV_RPC_BENCH_RANGE_PREPARE, w.p, w.len, &pr, 0);
        if (rc == RDKV_EEXIST)
            snprintf(err, errcap, "node 0: range space %u exists with another layout", SPACE_ID);
        else if (rc)
            snprintf(err, errcap, "node 0: creating range space %u: %s", SPACE_ID,
                     bench_strerror(rc));
    }
    pack_w_free(&w);
    struct range_server_stats s0 = {0}, s1 = {0};
    if (!rc) rc = owner_stats(c, &s0, err, errcap);
    memset(&pt->r, 0, sizeof pt->r);
    hist_init(&pt->r.h);
    for (int k = 0; k < BENCH_RANGE_CLASSES; k++) hist_init(&pt->r.class_h[k]);
    pt->seconds = 0;
    pt->failed = false;
    pt->error[0] = 0;
    int64_t timeout = base->warmup_ns + base->run_ns + 60 * NS_PER_S;
    unsigned posted = 0;
    for (unsigned j = 0; j < pl.nodes && !rc; j++) {
        if (!pl.threads[j]) continue;
        struct bench_range_req q = *base;
        q.threads = pl.threads[j];
        q.first_client = pl.first[j];
        if (pt->workload == BENCH_RANGE_OLTP) {
            q.readers = pl.readers[j];
            q.writers = pl.writers[j];
            q.loggers = pl.loggers[j];
        }
        pack_w_init(&w);
        bench_range_req_pack(&q, &w);
        rc = fab_rpc_post(c, pl.node[j], KV_RPC_BENCH_RANGE_RUN, w.p, w.len, &resp[j], timeout, j);
        pack_w_free(&w);
        if (rc) snprintf(err, errcap, "node %u: %s", pl.node[j], bench_strerror(rc));
        else posted++;
    }
    unsigned got = 0;
    struct bench_range_res *r = calloc(1, sizeof *r);
    if (!r && !rc) {
        rc = RDKV_ENOMEM;
        snprintf(err, errcap, "out of memory");
    }
    while (!rc && got < posted) {
        struct fab_cqe cq[LAUNCH_MAX];
        int k = fab_wait(c, cq, LAUNCH_MAX, -1);
        for (int j = 0; j < k; j++) {
            unsigned i = (unsigned)cq[j].tag;
            got++;
            if (rc) continue;
            if (cq[j].status == RDKV_EINVAL) {
                rc = cq[j].status;
                snprintf(err, errcap, "node %u refused the run request (a node from another "
                         "build?)", pl.node[i]);
            } else if (cq[j].status == RDKV_EBUSY) {
                rc = cq[j].status;
                snprintf(err, errcap, "node %u is busy with another range benchmark", pl.node[i]);
            } else if (cq[j].status) {
                rc = cq[j].status;
                snprintf(err, errcap, "node %u: the run failed: %s", pl.node[i],
                         bench_strerror(rc));
            } else if (bench_range_res_unpack(r, resp[i].data, resp[i].len)) {
                rc = RDKV_EPROTO;
                snprintf(err, errcap, "node %u: malformed result", pl.node[i]);
            } else {
                if (r->error && !pt->failed) {
                    pt->failed = true;
                    snprintf(pt->error, sizeof pt->error, "%s failed on node %u: %s",
                             bench_range_error_op(r->error_op), pl.node[i],
                             rdkv_strerror(r->error));
                }
                bench_range_res_add(&pt->r, r);
                double s = (double)r->elapsed_ns / 1e9;
                if (s > pt->seconds) pt->seconds = s;
            }
        }
    }
    free(r);
    /* whatever is still in flight completes (or times out) before the context goes away */
    while (fab_inflight(c)) {
        struct fab_cqe cq[LAUNCH_MAX];
        fab_wait(c, cq, LAUNCH_MAX, -1);
    }
    if (!rc && !owner_stats(c, &s1, err, errcap)) {
        pt->owner.grants = s1.grants - s0.grants;
        pt->owner.waits = s1.waits - s0.waits;
        pt->owner.releases = s1.releases - s0.releases;
        pt->owner.cancels = s1.cancels - s0.cancels;
        pt->owner.batches = s1.batches - s0.batches;
    } else if (!rc) {
        rc = RDKV_EIO;
    }
    if (resp)
        for (unsigned j = 0; j < pl.nodes; j++) fab_buf_free(&resp[j]);
    free(resp);
    fab_buf_free(&pr);
    fab_ctx_destroy(c);
    if (!rc) pt->done = true;
    return rc;
}

static void series_name(const struct range_point *p, char *out, size_t cap)
{
    char up[16];
    size_t i;
    for (i = 0; p->algo[i] && i < sizeof up - 1; i++)
        up[i] = (char)(p->algo[i] >= 'a' && p->algo[i] <= 'z' ? p->algo[i] - 32 : p->algo[i]);
    up[i] = 0;
    if (p->workload == BENCH_RANGE_OLTP)
        snprintf(out, cap, "%s-OLTP-C%u", up, p->clients);
    else
        snprintf(out, cap, "%s-MICRO-W%u-C%u", up, p->write_pct, p->clients);
}

static void print_point(const struct range_point *p)
{
    struct bench_stats s;
    memset(&s, 0, sizeof s);
    series_name(p, s.name, sizeof s.name);
    if (p->failed) {
        printf("[%s], Error, %s\n", s.name, p->error);
        fflush(stdout);
        return;
    }
    s.ok = p->r.ops;
    s.errors = p->r.errors;
    s.seconds = p->seconds;
    s.round_trips_per_op = per_op(p, p->r.round_trips);
    s.h = p->r.h;
    bench_print_ycsb(stdout, &s);
    printf("[%s], FabricOpsPerOp, %.3f\n[%s], RPCsPerOp, %.3f\n[%s], Retries, %llu\n",
           s.name, per_op(p, p->r.fabric_ops), s.name, per_op(p, p->r.rpcs), s.name,
           (unsigned long long)p->r.retries);
    printf("[%s], OwnerGrants, %llu\n[%s], OwnerWaits, %llu\n[%s], OwnerCancels, %llu\n"
           "[%s], OwnerBatches, %llu\n",
           s.name, (unsigned long long)p->owner.grants, s.name, (unsigned long long)p->owner.waits,
           s.name, (unsigned long long)p->owner.cancels, s.name,
           (unsigned long long)p->owner.batches);
    if (p->workload == BENCH_RANGE_OLTP)
        printf("[%s], WriterPacingWait(ms), %.1f\n", s.name, (double)p->r.pacing_ns / 1e6);
    char base[48];
    snprintf(base, sizeof base, "%s", s.name);
    for (int k = 0; k < BENCH_RANGE_CLASSES; k++) {
        if (p->workload == BENCH_RANGE_MICRO && k == BENCH_RANGE_LOG) continue;
        struct bench_stats c;
        memset(&c, 0, sizeof c);
        snprintf(c.name, sizeof c.name, "%.40s-%s", base, class_names[k]);
        c.ok = p->r.class_ops[k];
        c.seconds = p->seconds;
        c.h = p->r.class_h[k];
        bench_print_ycsb(stdout, &c);
    }
    fflush(stdout);
}

static void json_class(struct json *j, const struct range_point *p, int k)
{
    const struct hist *h = &p->r.class_h[k];
    json_key(j, class_json[k]);
    json_obj_begin(j);
    json_kv_u64(j, "ops", p->r.class_ops[k]);
    json_kv_double(j, "ops_per_s", p->seconds > 0 ? (double)p->r.class_ops[k] / p->seconds : 0);
    json_kv_double(j, "mean_us", hist_mean(h) / 1e3);
    json_kv_double(j, "p50_us", (double)hist_percentile(h, 50) / 1e3);
    json_kv_double(j, "p99_us", (double)hist_percentile(h, 99) / 1e3);
    json_kv_double(j, "p999_us", (double)hist_percentile(h, 99.9) / 1e3);
    json_kv_double(j, "max_us", (double)h->max / 1e3);
    json_obj_end(j);
}

static void json_point(struct json *j, const struct range_point *p, unsigned nodes)
{
    json_obj_begin(j);
    json_kv_str(j, "algo", p->algo);
    json_kv_str(j, "workload", workload_name(p->workload));
    json_kv_u64(j, "nodes", nodes);
    json_kv_u64(j, "clients", p->clients);
    if (p->workload == BENCH_RANGE_MICRO) {
        json_kv_u64(j, "write_pct", p->write_pct);
    } else {
        json_kv_u64(j, "readers", p->readers);
        json_kv_u64(j, "writers", p->writers);
        json_kv_u64(j, "log_writers", p->loggers);
    }
    if (p->failed) {
        json_kv_str(j, "error", p->error);
        json_obj_end(j);
        return;
    }
    struct bench_stats s;
    memset(&s, 0, sizeof s);
    s.ok = p->r.ops;
    s.errors = p->r.errors;
    s.seconds = p->seconds;
    s.h = p->r.h;
    bench_json_metrics(j, &s);
    json_kv_double(j, "round_trips_per_op", per_op(p, p->r.round_trips));
    json_kv_double(j, "fabric_ops_per_op", per_op(p, p->r.fabric_ops));
    json_kv_double(j, "rpcs_per_op", per_op(p, p->r.rpcs));
    json_kv_u64(j, "retries", p->r.retries);
    if (p->workload == BENCH_RANGE_OLTP)
        json_kv_double(j, "writer_pacing_wait_ms", (double)p->r.pacing_ns / 1e6);
    json_key(j, "owner");
    json_obj_begin(j);
    json_kv_u64(j, "grants", p->owner.grants);
    json_kv_u64(j, "waits", p->owner.waits);
    json_kv_u64(j, "releases", p->owner.releases);
    json_kv_u64(j, "cancels", p->owner.cancels);
    json_kv_u64(j, "batches", p->owner.batches);
    json_obj_end(j);
    json_key(j, "classes");
    json_obj_begin(j);
    for (int k = 0; k < BENCH_RANGE_CLASSES; k++)
        if (p->workload == BENCH_RANGE_OLTP || k != BENCH_RANGE_LOG) json_class(j, p, k);
    json_obj_end(j);
    json_obj_end(j);
}

/* ------------------------------------------------------------------------------------------ */
/* The closing tables */

static void print_table(const struct range_point *pts, unsigned n)
{
    printf("\n%-13s %-8s %7s %4s %11s %9s %9s %9s %10s %7s %8s %8s\n", "algo", "workload",
           "clients", "wr%", "ops/s", "mean(us)", "p50(us)", "p99(us)", "p99.9(us)", "RT/op",
           "retries", "waits/op");
    for (unsigned i = 0; i < n; i++) {
        const struct range_point *p = &pts[i];
        char wr[8];
        snprintf(wr, sizeof wr, "%u", p->write_pct);
        if (p->failed) {
            printf("%-13s %-8s %7u %4s  failed: %s\n", p->algo, workload_name(p->workload),
                   p->clients, p->workload == BENCH_RANGE_OLTP ? "-" : wr, p->error);
            continue;
        }
        printf("%-13s %-8s %7u %4s %11.0f %9.2f %9.2f %9.2f %10.2f %7.3f %8llu %8.3f\n",
               p->algo, workload_name(p->workload), p->clients,
               p->workload == BENCH_RANGE_OLTP ? "-" : wr, ops_per_s(p), hist_mean(&p->r.h) / 1e3,
               (double)hist_percentile(&p->r.h, 50) / 1e3,
               (double)hist_percentile(&p->r.h, 99) / 1e3,
               (double)hist_percentile(&p->r.h, 99.9) / 1e3, per_op(p, p->r.round_trips),
               (unsigned long long)p->r.retries, per_op(p, p->owner.waits));
    }
    bool oltp = false;
    for (unsigned i = 0; i < n; i++) oltp |= pts[i].workload == BENCH_RANGE_OLTP && !pts[i].failed;
    if (oltp) {
        printf("\n%-13s %10s %10s %8s %11s %11s %11s %11s %11s\n", "oltp roles", "reads",
               "writes", "logs", "reads/s", "writes/s", "rd p50(us)", "wr p50(us)",
               "log p50(us)");
        for (unsigned i = 0; i < n; i++) {
            const struct range_point *p = &pts[i];
            if (p->workload != BENCH_RANGE_OLTP || p->failed) continue;
            double s = p->seconds > 0 ? p->seconds : 1;
            printf("%-13s %10llu %10llu %8llu %11.0f %11.0f %11.2f %11.2f %11.2f\n", p->algo,
                   (unsigned long long)p->r.class_ops[0], (unsigned long long)p->r.class_ops[1],
                   (unsigned long long)p->r.class_ops[2], (double)p->r.class_ops[0] / s,
                   (double)p->r.class_ops[1] / s,
                   (double)hist_percentile(&p->r.class_h[0], 50) / 1e3,
                   (double)hist_percentile(&p->r.class_h[1], 50) / 1e3,
                   (double)hist_percentile(&p->r.class_h[2], 50) / 1e3);
        }
    }
    for (unsigned i = 0; i < n; i++) {
        const struct range_point *p = &pts[i];
        if (p->failed) continue;
        printf("%s latency CDF (us): p1 %.2f  p10 %.2f  p25 %.2f  p50 %.2f  p75 %.2f  p90 %.2f"
               "  p99 %.2f  p99.9 %.2f  max %.2f\n",
               p->algo, (double)hist_percentile(&p->r.h, 1) / 1e3,
               (double)hist_percentile(&p->r.h, 10) / 1e3,
               (double)hist_percentile(&p->r.h, 25) / 1e3,
               (double)hist_percentile(&p->r.h, 50) / 1e3,
               (double)hist_percentile(&p->r.h, 75) / 1e3,
               (double)hist_percentile(&p->r.h, 90) / 1e3,
               (double)hist_percentile(&p->r.h, 99) / 1e3,
               (double)hist_percentile(&p->r.h, 99.9) / 1e3, (double)p->r.h.max / 1e3);
    }
    if (pts[0].failed) return;
    for (unsigned i = 1; i < n; i++) {
        const struct range_point *p = &pts[i];
        double a50 = (double)hist_percentile(&pts[0].r.h, 50),
               b50 = (double)hist_percentile(&p->r.h, 50),
               a999 = (double)hist_percentile(&pts[0].r.h, 99.9),
               b999 = (double)hist_percentile(&p->r.h, 99.9);
        if (p->failed || ops_per_s(p) <= 0 || b50 <= 0 || b999 <= 0) continue;
        printf("%s / %s: throughput %.2fx, p50 latency %.3fx, p99.9 latency %.3fx\n",
               pts[0].algo, p->algo, ops_per_s(&pts[0]) / ops_per_s(p), a50 / b50, a999 / b999);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The sweep: the micro grid (algo innermost, so drift hits every design alike), then oltp */

static size_t micro_idx(unsigned w, unsigned c, unsigned a, unsigned na)
{
    return ((size_t)w * NSC + c) * na + a;
}

/* A markdown table header: "| clients | algo... |" and its alignment row. */
static void md_header(FILE *f, const char *const *algos, unsigned na)
{
    fprintf(f, "| clients |");
    for (unsigned a = 0; a < na; a++) fprintf(f, " %s |", algos[a]);
    fprintf(f, "\n|---:|");
    for (unsigned a = 0; a < na; a++) fprintf(f, "---:|");
    fprintf(f, "\n");
}

static void write_sweep_md(FILE *f, const struct range_point *pts, const char *const *algos,
                           unsigned na, unsigned oltp_clients)
{
    for (unsigned w = 0; w < NSW; w++) {
        fprintf(f, "## micro, %u %% writes\n\nThroughput (ops/s; each op = acquire + release):\n\n",
                sweep_writes[w]);
        for (int latency = 0; latency < 2; latency++) {
            if (latency)
                fprintf(f, "\nLatency p50 / p99 (us) and fabric round trips per op:\n\n");
            md_header(f, algos, na);
            for (unsigned c = 0; c < NSC; c++) {
                fprintf(f, "| %u |", sweep_clients[c]);
                for (unsigned a = 0; a < na; a++) {
                    const struct range_point *p = &pts[micro_idx(w, c, a, na)];
                    if (!p->done || p->failed)
                        fprintf(f, " %s |", p->failed ? "failed" : "-");
                    else if (!latency)
                        fprintf(f, " %.0f |", ops_per_s(p));
                    else
                        fprintf(f, " %.1f / %.1f, %.2f RT |",
                                (double)hist_percentile(&p->r.h, 50) / 1e3,
                                (double)hist_percentile(&p->r.h, 99) / 1e3,
                                per_op(p, p->r.round_trips));
                }
                fprintf(f, "\n");
            }
        }
        fprintf(f, "\n![micro, %u %% writes](plots/range-micro-w%u.png)\n\n", sweep_writes[w],
                sweep_writes[w]);
    }
    const struct range_point *o = &pts[(size_t)NSW * NSC * na];
    fprintf(f, "## oltp (Filebench-OLTP-like), %u clients: %u readers, %u writers, %u log "
               "writer%s\n\n(the thesis's Table 6)\n\n| design | ops/s | p50 (us) | p99 (us) | "
               "reads | writes | logs | RT/op | retries | ops/s of %s / this |\n"
               "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
            oltp_clients, o->readers, o->writers, o->loggers, o->loggers == 1 ? "" : "s", algos[0]);
    for (unsigned a = 0; a < na; a++) {
        const struct range_point *p = &o[a];
        if (!p->done || p->failed) {
            fprintf(f, "| %s | %s | | | | | | | | |\n", algos[a],
                    p->failed ? p->error : "not run");
            continue;
        }
        double ratio = o[0].done && !o[0].failed && ops_per_s(p) > 0
                           ? ops_per_s(&o[0]) / ops_per_s(p) : 0;
        fprintf(f, "| %s | %.0f | %.1f | %.1f | %llu | %llu | %llu | %.2f | %llu | %.2f |\n",
                algos[a], ops_per_s(p), (double)hist_percentile(&p->r.h, 50) / 1e3,
                (double)hist_percentile(&p->r.h, 99) / 1e3, (unsigned long long)p->r.class_ops[0],
                (unsigned long long)p->r.class_ops[1], (unsigned long long)p->r.class_ops[2],
                per_op(p, p->r.round_trips), (unsigned long long)p->r.retries, ratio);
    }
    fprintf(f, "\n");
}

/* 0: plotted; 1: gnuplot is missing (the data files are written); -1: plotting failed. */
static int write_plots(const char *out, const struct range_point *pts, const char *const *algos,
                       unsigned na, unsigned nodes, const char *transport)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/plots", out);
    mkdir(out, 0755);
    mkdir(dir, 0755);
    bool ok_algo[MAX_ALGOS] = {false};
    bool any = false;
    for (unsigned w = 0; w < NSW; w++) {
        snprintf(path, sizeof path, "%s/range-micro-w%u.dat", dir, sweep_writes[w]);
        FILE *f = fopen(path, "w");
        if (!f) return -1;
        fprintf(f, "# clients");
        for (unsigned a = 0; a < na; a++) fprintf(f, " %s_ops_s", algos[a]);
        fprintf(f, "\n");
        for (unsigned c = 0; c < NSC; c++) {
            fprintf(f, "%u", sweep_clients[c]);
            for (unsigned a = 0; a < na; a++) {
                const struct range_point *p = &pts[micro_idx(w, c, a, na)];
                if (p->done && !p->failed && ops_per_s(p) > 0) {
                    fprintf(f, " %.1f", ops_per_s(p));
                    ok_algo[a] = any = true;
                } else {
                    fprintf(f, " NaN");
                }
            }
            fprintf(f, "\n");
        }
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/range-sweep.gp", dir);
    FILE *g = fopen(path, "w");
    if (!g) return -1;
    fprintf(g, "set terminal png size 900,600 font ',10'\nset datafile missing 'NaN'\n"
               "set key outside right\nset grid\nset logscale x 2\nset logscale y\n"
               "set xlabel 'clients'\nset ylabel 'ops/s (acquire + release), log scale'\n");
    for (unsigned w = 0; w < NSW; w++) {
        fprintf(g, "set output '%s/range-micro-w%u.png'\nset title 'range locks, micro, %u%% "
                   "writes (%u nodes, %s transport)'\nplot [0.8:20]",
                dir, sweep_writes[w], sweep_writes[w], nodes, transport);
        bool first = true;
        for (unsigned a = 0; a < na; a++) {
            if (!ok_algo[a]) continue;
            fprintf(g, "%s '%s/range-micro-w%u.dat' using 1:%u with linespoints title '%s'",
                    first ? "" : ",", dir, sweep_writes[w], a + 2, algos[a]);
            first = false;
        }
        fprintf(g, "\n");
    }
    fclose(g);
    if (!any) return -1;
    return bench_gnuplot(path);
}

/* ------------------------------------------------------------------------------------------ */

/* kvbench range's options (range_opts), then what follows from them (range_cli_finish). */
struct range_cli {
    struct bench_common co;
    const char *algos[MAX_ALGOS], *out, *clients_arg;
    unsigned nalgos, workload, write_pct, repeat, clients, tasks;
    double warmup, cs_us, timeout_ms, lease_ms;
    bool sweep, transport_given, algo_given, writes_given;
    unsigned oltp_clients; /* the oltp points' clients (--clients, else 16) */
    int64_t cs_ns, timeout_ns;
};

static int opt_algo(void *o, const char *v)
{
    static const char algo_err[] = "--algo must be combiner-rpc, combiner-rdma, itree, segment, "
                                   "citron or a comma-separated list of up to 8 (got '%s')";
    struct range_cli *c = o;
    c->nalgos = 0;
    char *dup = strdup(v), *save = NULL;
    if (!dup) bench_usage_error("range", "out of memory reading '%s'", v);
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!range_algo_find(t) || c->nalgos == MAX_ALGOS) {
            free(dup);
            bench_usage_error("range", algo_err, v);
        }
        c->algos[c->nalgos++] = range_algo_find(t)->name;
    }
    free(dup);
    if (!c->nalgos) bench_usage_error("range", algo_err, v);
    return 0;
}

static int opt_workload(void *o, const char *v)
{
    struct range_cli *c = o;
    if (!strcmp(v, "micro")) c->workload = BENCH_RANGE_MICRO;
    else if (!strcmp(v, "oltp")) c->workload = BENCH_RANGE_OLTP;
    else return 1;
    return 0;
}

static int opt_clients(void *o, const char *v)
{
    struct range_cli *c = o;
    uint64_t u;
    if (parse_uint_range(v, 1, (uint64_t)BENCH_MAX_THREADS * (LAUNCH_MAX - 1), &u)) return 1;
    c->clients = (unsigned)u;
    c->clients_arg = v;
    return 0;
}

#define T struct range_cli
static const struct bench_opt range_opts[] = {
    {"--algo", BOPT_FN,
     "  --algo A[,A...]   combiner-rpc, combiner-rdma, itree, segment, citron, or a list\n"
     "                    (default combiner-rpc; with --sweep, default all five)\n",
     0, BOPT_GIVEN(T, algo_given), 0, 0, NULL, opt_algo, NULL},
    {"--workload", BOPT_FN,
     "  --workload W      micro or oltp (default micro)\n",
     0, 0, 0, 0, "--workload must be micro or oltp (got '%s')", opt_workload, NULL},
    {"--clients", BOPT_FN,
     "  --clients C       clients in all, at most 64 per node (default 4; oltp 16)\n",
     0, 0, 0, 0, "--clients must be 1..4032 (at most 64 per node; got '%s')", opt_clients, NULL},
    {"--tasks", BOPT_UINT,
     "  --tasks K         a node's clients run K per thread, as tasks sharing its fabric\n"
     "                    context (default 1: every client a thread)\n",
     offsetof(T, tasks), 0, 1, BENCH_MAX_TASKS, "--tasks must be 1..256 (got '%s')", NULL, NULL},
    {"--writes", BOPT_UINT,
     "  --writes W        micro: percent of ops exclusive, 0..100 (default 20)\n",
     offsetof(T, write_pct), BOPT_GIVEN(T, writes_given), 0, 100, "--writes must be a percentage 0..100 (got '%s')", NULL, NULL},
    {"--cs-us", BOPT_DOUBLE,
     "  --cs-us U         microseconds a range is held (busy) before release (default 0)\n",
     offsetof(T, cs_us), 0, 0, 1e6, "--cs-us must be 0..1000000 microseconds (got '%s')", NULL, NULL},
    {"--timeout-ms", BOPT_DOUBLE,
     "  --timeout-ms M    deadline of one attempt of an op, 0 = none (default 100)\n",
     offsetof(T, timeout_ms), 0, 0, 600000, "--timeout-ms must be 0..600000 (got '%s')", NULL, NULL},
    {"--lease-ms", BOPT_DOUBLE,
     "  --lease-ms M      the DSLR lease of segment's and citron's words (default 50): a range\n"
     "                    holds its first words while it waits for the others, so the lease\n"
     "                    must cover the whole acquisition (DSLR's row default, 10 ms, is\n"
     "                    outlived under 8+ clients on 2 cores, and expired holders leave\n"
     "                    their words to the waiters' resets)\n",
     offsetof(T, lease_ms), 0, 1, 60000, "--lease-ms must be 1..60000 (got '%s')", NULL, NULL},
    {"--seconds", BOPT_COMMON,
     "  --seconds S       measured seconds per run (default 2), after --warmup S (default 0.5)\n",
     0, 0, 0, 0, NULL, NULL, NULL},
    {"--warmup", BOPT_DOUBLE, "", offsetof(T, warmup), 0, 0, 600,
     "--warmup must be 0..600 seconds (got '%s')", NULL, NULL},
    {"--repeat", BOPT_UINT,
     "  --repeat N        run each point N times and report the run with the median ops/s\n"
     "                    (default 1)\n",
     offsetof(T, repeat), 0, 1, 99, "--repeat must be 1..99 (got '%s')", NULL, NULL},
    {"--nodes", BOPT_COMMON,
     "  --nodes N         start N local nodes (default 2: node 0 owns the space, node 1 runs the\n"
     "                    clients)\n",
     0, 0, 0, 0, NULL, NULL, NULL},
    {"--config", BOPT_COMMON,
     "  --config FILE     use the running cluster in FILE instead (node 0 owns the space)\n",
     0, 0, 0, 0, NULL, NULL, NULL},
    {"--transport", BOPT_COMMON,
     "  --transport T     soft, verbs or auto (default soft with --nodes)\n",
     0, BOPT_GIVEN(T, transport_given), 0, 0, NULL, NULL, NULL},
    {"--spin-us", BOPT_COMMON,
     "  --spin-us U       a thread waiting for a fabric completion polls U us before it blocks\n"
     "                    (default 0, as kvbench lock: clients outnumber the cores)\n",
     0, 0, 0, 0, NULL, NULL, NULL},
    {"--json", BOPT_COMMON,
     "  --json FILE       write the results as JSON\n",
     0, 0, 0, 0, NULL, NULL, NULL},
    {"--sweep", BOPT_FLAG,
     "  --sweep           run the thesis's grids: micro with writes 0, 1, 20, 100 % x clients\n"
     "                    1, 2, 4, 8, 16 for every design given, then oltp at --clients (default\n"
     "                    16) for every design; write range-sweep.md and, with gnuplot,\n"
     "                    plots/range-micro-w{0,1,20,100}.png into --out\n",
     offsetof(T, sweep), 0, 0, 0, NULL, NULL, NULL},
    {"--out", BOPT_STR,
     "  --out DIR         where --sweep writes (default kvbench-report,\n"
     BOPT_OUT_DEFAULT,
     offsetof(T, out), 0, 0, 0, NULL, NULL, NULL},
    BOPT_ROW_HELP("  -h, --help        this text\n"),
};
#undef T
static const struct bench_cmd range_cmd =
    BENCH_CMD("range", range_head, range_opts, range_tail, struct range_cli);

/* Defaults that depend on other options, and the checks that need no node: 0, or 2 after a
 * message (exits on bad usage). */
static int range_cli_finish(struct range_cli *c)
{
    tasks_per_thread = c->tasks;
    lease_ns = (int64_t)(c->lease_ms * 1e6);
    c->cs_ns = (int64_t)(c->cs_us * 1e3);
    c->timeout_ns = (int64_t)(c->timeout_ms * 1e6);
    if (c->co.config && !c->transport_given) c->co.transport = FAB_AUTO;
    if (c->sweep && !c->algo_given) {
        c->nalgos = NALL;
        for (unsigned a = 0; a < NALL; a++) c->algos[a] = all_algos[a];
    }
    c->oltp_clients = c->clients ? c->clients : 16;
    if (!c->clients) c->clients = c->workload == BENCH_RANGE_OLTP ? 16 : 4;
    if ((c->workload == BENCH_RANGE_OLTP || c->sweep) && c->oltp_clients < 3)
        bench_usage_error("range", "the oltp workload (also run by --sweep) needs --clients >= 3: "
                                   "a reader, a writer and a log writer (got '%s')", c->clients_arg);
    if (c->sweep && c->writes_given)
        fprintf(stderr, "kvbench range: note: --sweep runs writes 0, 1, 20 and 100 %%; --writes is "
                        "ignored\n");
    else if (c->workload == BENCH_RANGE_OLTP && c->writes_given)
        fprintf(stderr, "kvbench range: note: --writes is ignored for the oltp workload (its mix "
                        "is fixed)\n");
    /* every request is checked here, before any node starts, with the nodes' own rules */
    for (unsigned x = 0; x < 2 * c->nalgos; x++) {
        if (!c->sweep && (x % 2) != c->workload) continue;
        struct range_point p;
        memset(&p, 0, sizeof p);
        snprintf(p.algo, sizeof p.algo, "%s", c->algos[x / 2]);
        p.workload = x % 2;
        p.write_pct = c->write_pct;
        oltp_split(c->oltp_clients, &p.readers, &p.writers, &p.loggers);
        struct bench_range_req q;
        base_req(&q, &p, (int64_t)(c->warmup * 1e9), (int64_t)(c->co.seconds * 1e9), c->cs_ns,
                 c->timeout_ns, 1);
        const char *why = bench_range_req_check(&q);
        if (why) {
            fprintf(stderr, "kvbench range: error: %s: %s\n", q.algo, why);
            return 2;
        }
    }
    if (!c->co.config) {
        unsigned cn = c->co.nodes > 1 ? c->co.nodes - 1 : 1;
        unsigned cmax0 = c->sweep ? (c->oltp_clients > 16 ? c->oltp_clients : 16) : c->clients;
        if ((cmax0 + cn - 1) / cn > BENCH_MAX_THREADS)
            bench_usage_error("range", "too many clients for the client nodes: at most 64 per node "
                                       "(%s)", "add --nodes");
    }
    return 0;
}

static void print_head(const struct range_cli *c, const struct bench_cluster *bc, unsigned nn,
                       const char *tname, const char *where)
{
    printf("# kvbench range: transport %s, %u node%s%s; node 0 owns range space %u: 2^%u units, "
           "%u segments of 2^%u, citron depth %u (%u leaves of %u units); clients on %s; %.1f s "
           "per run after %.1f s warm-up; hold %.1f us; attempt timeout %.1f ms; DSLR lease "
           "%.1f ms\n",
           tname, nn, nn == 1 ? "" : "s", bc->launched ? " (local processes)" : "", SPACE_ID,
           SPACE_BITS, 1u << SPACE_SEG_BITS, SPACE_SEG_BITS, SPACE_DEPTH, 1u << (2 * SPACE_DEPTH),
           1u << (SPACE_BITS - 2 * SPACE_DEPTH), where, c->co.seconds, c->warmup,
           (double)c->cs_ns / 1e3, (double)c->timeout_ns / 1e6, (double)lease_ns / 1e6);
    if (c->sweep || c->workload == BENCH_RANGE_MICRO)
        printf("# micro: range sizes uniform in [1, %u] units at uniform positions inside [0, "
               "2^%u)%s\n", MICRO_MAX_UNITS, SPACE_BITS,
               c->sweep ? "" : "; exclusive with the --writes probability");
    if (c->sweep || c->workload == BENCH_RANGE_OLTP) {
        unsigned r, w, l;
        oltp_split(c->oltp_clients, &r, &w, &l);
        printf("# oltp: %u clients = %u reader%s + %u writer%s + %u log writer%s (39:9:1 scaled); "
               "8 data files + 1 log of %u units; 2^6-unit reads and writes, 100 writes per "
               "writer per 1000 reads, one 2^11-unit log write per 3200 reads\n",
               c->oltp_clients, r, r == 1 ? "" : "s", w, w == 1 ? "" : "s", l, l == 1 ? "" : "s",
               (1u << SPACE_BITS) / 9);
    }
    fflush(stdout);
}

/* Point i: the --sweep grid (micro by writes and clients, then oltp) or one per design.
 * Returns its design's index. */
static unsigned point_of(const struct range_cli *c, size_t i, struct range_point *p)
{
    unsigned a, na = c->nalgos;
    if (c->sweep && i < (size_t)NSW * NSC * na) {
        a = (unsigned)(i % na);
        p->workload = BENCH_RANGE_MICRO;
        p->clients = sweep_clients[(i / na) % NSC];
        p->write_pct = sweep_writes[i / na / NSC];
    } else {
        a = c->sweep ? (unsigned)(i - (size_t)NSW * NSC * na) : (unsigned)i;
        p->workload = c->sweep ? BENCH_RANGE_OLTP : c->workload;
        p->clients = p->workload == BENCH_RANGE_OLTP ? c->oltp_clients : c->clients;
        p->write_pct = p->workload == BENCH_RANGE_OLTP ? 0 : c->write_pct;
    }
    snprintf(p->algo, sizeof p->algo, "%s", c->algos[a]);
    if (p->workload == BENCH_RANGE_OLTP) oltp_split(p->clients, &p->readers, &p->writers, &p->loggers);
    return a;
}

static double run_ops(const void *p) { return ops_per_s(p); }

/* Runs p --repeat times and keeps the median-throughput run (or the failed one): 0, 1 when a
 * run could not be made (after a message), or -1 when interrupted before any run. */
static int run_median(const struct range_cli *c, struct fabric *f, struct range_point *p,
                      struct range_point *runs)
{
    char err[512];
    struct bench_range_req base;
    base_req(&base, p, (int64_t)(c->warmup * 1e9), (int64_t)(c->co.seconds * 1e9), c->cs_ns,
             c->timeout_ns, (uint64_t)clock_now_ns());
    unsigned nrun = 0;
    for (unsigned k = 0; k < c->repeat && !bench_stop; k++) {
        runs[k] = *p;
        if (run_point(f, &runs[k], &base, err, sizeof err)) {
            fprintf(stderr, "kvbench range: %s: %s\n", p->algo, err);
            return 1;
        }
        nrun++;
        if (runs[k].failed) break;
    }
    if (!nrun) return -1;
    if (runs[nrun - 1].failed) {
        *p = runs[nrun - 1];
        return 0;
    }
    *p = *(struct range_point *)bench_median_run(runs, nrun, sizeof *runs, run_ops);
    return 0;
}

/* Every point, printed as it ends; a design that fails skips its later points. 0, or 1. */
static int measure(const struct range_cli *c, struct fabric *f, struct range_point *pts,
                   size_t npts)
{
    struct range_point *runs = calloc(c->repeat, sizeof *runs);
    if (!runs) return -1;
    int rc = 0;
    bool algo_failed[MAX_ALGOS] = {false};
    for (size_t i = 0; i < npts && !bench_stop; i++) {
        struct range_point *p = &pts[i];
        unsigned a = point_of(c, i, p);
        if (algo_failed[a]) {
            /* the design already failed in this sweep: its later points are skipped */
            p->failed = p->skipped = true;
            snprintf(p->error, sizeof p->error, "skipped (the design failed earlier)");
            continue;
        }
        int r = run_median(c, f, p, runs);
        if (r > 0) rc = 1;
        if (r) break;
        if (p->failed) {
            algo_failed[a] = true;
            fprintf(stderr, "kvbench range: %s: %s\n", p->algo, p->error);
            rc = 1;
        }
        print_point(p);
    }
    free(runs);
    return rc;
}

static int write_json(const struct range_cli *c, const struct bench_cluster *bc,
                      const struct range_point *pts, size_t npts, unsigned nn, const char *tname)
{
    struct json j;
    FILE *jf = bench_json_begin(&j, c->co.json, "range", bc, tname, nn);
    if (!jf) return 1;
    json_kv_double(&j, "seconds", c->co.seconds);
    json_kv_double(&j, "warmup_seconds", c->warmup);
    json_kv_u64(&j, "repeat", c->repeat);
    json_kv_i64(&j, "cs_ns", c->cs_ns);
    json_kv_i64(&j, "timeout_ns", c->timeout_ns);
    json_kv_i64(&j, "lease_ns", lease_ns);
    json_kv_u64(&j, "space_bits", SPACE_BITS);
    json_kv_u64(&j, "segment_bits", SPACE_SEG_BITS);
    json_kv_u64(&j, "tree_depth", SPACE_DEPTH);
    json_kv_u64(&j, "micro_max_units", MICRO_MAX_UNITS);
    json_kv_bool(&j, "sweep", c->sweep);
    json_obj_end(&j);
    json_key(&j, "results");
    json_arr_begin(&j);
    for (size_t i = 0; i < npts; i++)
        if (pts[i].done || (pts[i].failed && !pts[i].skipped)) json_point(&j, &pts[i], nn);
    json_arr_end(&j);
    json_obj_end(&j);
    return fclose(jf) ? 1 : 0;
}

/* --sweep's range-sweep.md and plots under --out: 0, or 1. */
static int write_sweep(const struct range_cli *c, const struct range_point *pts, unsigned nn,
                       const char *tname, const char *where)
{
    int rc = 0;
    char path[4200];
    mkdir(c->out, 0755);
    snprintf(path, sizeof path, "%s/range-sweep.md", c->out);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "kvbench range: cannot write %s: %s\n", path, strerror(errno));
        rc = 1;
    } else {
        fprintf(f, "# kvbench range --sweep\n\nGenerated by `kvbench range --sweep --nodes %u "
                   "--clients %u --seconds %g --warmup %g --repeat %u --cs-us %g "
                   "--timeout-ms %g --lease-ms %g` (transport "
                   "%s, %u nodes as separate processes; node 0 owns a space of 2^%u units, "
                   "the clients run in %s; each point is the median-throughput run of %u). "
                   "micro: range sizes uniform in [1, %u] units at uniform positions (the "
                   "same for every design), exclusive with the given probability; citron "
                   "takes shared ranges as exclusive. Plots: `plots/range-micro-w*.png`.\n\n",
                nn, c->oltp_clients, c->co.seconds, c->warmup, c->repeat, (double)c->cs_ns / 1e3,
                (double)c->timeout_ns / 1e6, (double)lease_ns / 1e6, tname, nn,
                SPACE_BITS, where, c->repeat, MICRO_MAX_UNITS);
        write_sweep_md(f, pts, c->algos, c->nalgos, c->oltp_clients);
        if (fclose(f)) rc = 1;
        else printf("\nwrote %s\n", path);
    }
    int pr = write_plots(c->out, pts, c->algos, c->nalgos, nn, tname);
    if (pr == 0)
        printf("wrote %s/plots/range-micro-w{0,1,20,100}.png\n", c->out);
    else if (pr == 1)
        fprintf(stderr, "kvbench range: gnuplot is not installed (Debian: apt-get install "
                        "gnuplot-nox): no plots; the data files and script are in %s/plots\n",
                c->out);
    else {
        fprintf(stderr, "kvbench range: plotting failed (no design succeeded, or gnuplot "
                        "reported an error); the data files are in %s/plots\n", c->out);
        rc = 1;
    }
    return rc;
}

/* The points, their tables and files, on the open cluster. */
static int run_all(const struct range_cli *c, const struct bench_cluster *bc, unsigned nn,
                   const char *tname, const char *where)
{
    unsigned na = c->nalgos;
    size_t npts = c->sweep ? (size_t)NSW * NSC * na + na : na;
    struct range_point *pts = calloc(npts, sizeof *pts);
    int rc = pts ? measure(c, bc->f, pts, npts) : -1;
    if (rc < 0) {
        free(pts);
        fprintf(stderr, "kvbench range: out of memory\n");
        return 1;
    }
    bool complete = true;
    for (size_t i = 0; i < npts; i++) complete &= pts[i].done || pts[i].failed;
    if (!c->sweep && complete && !bench_stop) print_table(pts, na);
    /* the oltp rows compare like the thesis's Table 6 */
    if (c->sweep && complete && !bench_stop) print_table(&pts[(size_t)NSW * NSC * na], na);
    if (c->co.json && write_json(c, bc, pts, npts, nn, tname)) rc = 1;
    if (c->sweep && complete && !bench_stop && write_sweep(c, pts, nn, tname, where)) rc = 1;
    free(pts);
    return rc;
}

int cmd_range(int argc, char **argv)
{
    struct range_cli c = {.algos = {"combiner-rpc"}, .out = "kvbench-report", .clients_arg = "",
                          .nalgos = 1, .workload = BENCH_RANGE_MICRO, .write_pct = 20,
                          .repeat = 1, .tasks = 1, .warmup = 0.5, .timeout_ms = 100,
                          .lease_ms = 50};
    bench_common_init(&c.co);
    c.co.nodes = 2;
    c.co.spin_ns = 0; /* clients block at once, as kvbench lock's workers: see --help */
    if (bench_opts_parse(&range_cmd, &c, argc, argv)) return 0;
    int rc = range_cli_finish(&c);
    if (rc) return rc;
    struct bench_cluster bc;
    if (bench_start(&bc, &c.co, "range", 30 * NS_PER_S)) return 1;
    unsigned nn = fab_num_nodes(bc.f);
    unsigned cmax = c.sweep ? (c.oltp_clients > 16 ? c.oltp_clients : 16) : c.clients;
    if ((cmax + (nn > 1 ? nn - 2 : 0)) / (nn > 1 ? nn - 1 : 1) > BENCH_MAX_THREADS) {
        fprintf(stderr, "kvbench range: error: %u clients on %u client node%s: at most %u per "
                        "node\n", cmax, nn > 1 ? nn - 1 : 1, nn > 2 ? "s" : "", BENCH_MAX_THREADS);
        bench_cluster_close(&bc);
        return 2;
    }
    const char *tname = fab_transport_name(bc.transport);
    char where[32];
    if (nn <= 2) snprintf(where, sizeof where, "node %u", nn - 1);
    else snprintf(where, sizeof where, "nodes 1..%u", nn - 1);
    print_head(&c, &bc, nn, tname, where);
    rc = run_all(&c, &bc, nn, tname, where);
    return bench_finish(&bc, "range", rc);
}
