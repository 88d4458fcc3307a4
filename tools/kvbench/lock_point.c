/* kvbench lock's measured points (lock_bench.h): one run of a request on every node at once,
 * the WCSB read-back, and the point's YCSB text, JSON and spread of acquires. */
#include "tools/kvbench/lock_point.h"

#include "common/clock.h"
#include "locks/lock.h"

#include <stdlib.h>
#include <string.h>

double lock_ops_per_s(const struct lock_point *p)
{
    return p->seconds > 0 ? (double)p->r.ops / p->seconds : 0;
}

static double run_ops(const void *p) { return lock_ops_per_s(p); }
double lock_rt_per_op(const struct lock_point *p)
{
    return p->r.ops ? (double)p->r.round_trips / (double)p->r.ops : 0;
}
double lock_mean_us(const struct lock_point *p) { return hist_mean(&p->r.h) / 1e3; }
double lock_wmean_us(const struct lock_point *p) { return hist_mean(&p->r.wh) / 1e3; }
double lock_writers_pct(const struct lock_point *p)
{
    return 100.0 - (double)p->q.read_ppm / 1e4;
}

/* The point's request from base and the point's own fields. */
void lock_point_req(struct lock_point *pt, const struct bench_lock_req *base)
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
int lock_run_point(struct fabric *f, struct lock_point *pt, char *err, size_t errcap)
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
void lock_fmt_pct(char *out, size_t cap, double v) { snprintf(out, cap, "%g", v); }

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
        lock_fmt_pct(r, sizeof r, p->read_ratio);
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

/* The point as bench.h's statistics (for the YCSB text and JSON metrics every bench prints). */
static void point_stats(const struct lock_point *p, struct bench_stats *s)
{
    memset(s, 0, sizeof *s);
    s->ok = p->r.ops;
    s->errors = p->r.errors;
    s->seconds = p->seconds;
    s->round_trips_per_op = lock_rt_per_op(p);
    s->h = p->r.h;
}

void lock_print_point(const struct lock_point *p)
{
    struct bench_stats s;
    point_stats(p, &s);
    series_name(p, s.name, sizeof s.name);
    bench_print_ycsb(stdout, &s);
    printf("[%s], FabricOpsPerOp, %.3f\n", s.name,
           p->r.ops ? (double)p->r.fabric_ops / (double)p->r.ops : 0.0);
    printf("[%s], LocalOps(%%), %.1f\n", s.name,
           p->r.ops ? 100.0 * (double)p->r.local_ops / (double)p->r.ops : 0.0);
    bf_print_ycsb(stdout, s.name, bench_lock_res_fields, bench_lock_res_nfields, &p->r);
    if (p->r.write_ops && p->r.write_ops < p->r.ops)
        printf("[%s], WriteOperations, %llu\n[%s], WriteAverageLatency(us), %.2f\n"
               "[%s], Write99thPercentileLatency(us), %.2f\n",
               s.name, (unsigned long long)p->r.write_ops, s.name, lock_wmean_us(p), s.name,
               hist_percentile(&p->r.wh, 99) / 1e3);
    printf("[%s], AcquireSpreadCV, %.3f\n", s.name, bench_lock_fair_cv(&p->r.fair));
    if (p->checked)
        printf("[%s], Increments, %llu\n[%s], LostUpdates, %lld\n", s.name,
               (unsigned long long)p->r.increments, s.name, (long long)p->lost);
    fflush(stdout);
}

bool lock_cdf_csv(void *arg, uint64_t v, double cum)
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

void lock_json_point(struct json *j, const struct lock_point *p, unsigned nodes, bool cdf)
{
    json_obj_begin(j);
    json_kv_str(j, "algo", p->algo);
    json_kv_u64(j, "nodes", nodes);
    json_kv_u64(j, "threads", p->threads);
    json_kv_u64(j, "tasks", p->q.tasks);
    json_kv_u64(j, "locks", p->locks);
    json_kv_u64(j, "locality", p->locality);
    json_kv_double(j, "read_ratio", p->read_ratio);
    json_kv_double(j, "writers_pct", lock_writers_pct(p));
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
    point_stats(p, &s);
    bench_json_metrics(j, &s);
    json_kv_double(j, "round_trips_per_op", lock_rt_per_op(p));
    json_kv_double(j, "fabric_ops_per_op",
                   p->r.ops ? (double)p->r.fabric_ops / (double)p->r.ops : 0.0);
    bf_json(j, bench_lock_res_fields, bench_lock_res_nfields, &p->r);
    json_kv_double(j, "write_mean_us", lock_wmean_us(p));
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
void lock_print_spread(FILE *f, const struct lock_point *p)
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


int lock_run_median(struct fabric *f, struct lock_point *p, unsigned repeat, const char *what)
{
    char err[512];
    struct lock_point *runs = calloc(repeat, sizeof *runs); /* ~60 KB each */
    if (!runs) return 1;
    int r = 0;
    for (unsigned k = 0; k < repeat && !r && !bench_stop; k++) {
        runs[k] = *p;
        r = lock_run_point(f, &runs[k], err, sizeof err);
    }
    if (r || bench_stop) {
        if (r && what)
            fprintf(stderr, "kvbench lock: %s %s P=%u: %s\n", p->algo,
                    bench_lock_kind_name(p->q.bench), p->P, err);
        else if (r)
            fprintf(stderr, "kvbench lock: %s\n", err);
        free(runs);
        return 1;
    }
    /* the run with the median throughput stands for the point */
    *p = *(struct lock_point *)bench_median_run(runs, repeat, sizeof *runs, run_ops);
    free(runs);
    return 0;
}
