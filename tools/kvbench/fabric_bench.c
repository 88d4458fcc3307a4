/* kvbench fabric: round-trip latency and throughput of every fabric operation at queue depth 1
 * and 16, against a raw TCP ping-pong on the same hosts as the baseline, plus the CPU an idle
 * node burns. */
#include "bench.h"
#include "tools/kvbench/opts.h"

#include "common/clock.h"
#include "common/parse.h"
#include "rdma/wire.h"

#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char fabric_head[] =
    "usage: kvbench fabric [--nodes N | --config FILE] [options]\n"
    "\n"
    "Measures the fabric: p50/p99/p99.9 round-trip latency and ops/s of READ 8 B, 64 B and 4 KiB,\n"
    "WRITE 8 B, CAS, FAA and an RPC echo, each at queue depth 1 and 16, and as the baseline a\n"
    "raw TCP ping-pong of 8-byte messages to the same node (no fabric). It also reports the CPU\n"
    "an idle node uses.\n"
    "\n";

enum bop { B_READ8, B_READ64, B_READ4K, B_WRITE8, B_CAS, B_FAA, B_RPC, B_NOPS };
static const char *const bop_key[B_NOPS] = {"read8", "read64", "read4k", "write8", "cas", "faa", "rpc"};
static const char *const bop_op[B_NOPS] = {"READ", "READ", "READ", "WRITE", "CAS", "FAA", "RPC_ECHO"};
static const unsigned bop_size[B_NOPS] = {8, 64, 4096, 8, 8, 8, 8};

#define MAX_DEPTH 256
#define MAX_THREADS 64
#define TARGET_OFF (1u << 20) /* far from the arena header */

struct worker {
    struct fabric *f;
    uint16_t node;
    enum bop op;
    unsigned depth;
    int64_t warmup_ns, run_ns;
    struct bench_stats st;
    uint64_t rt_before, rt_after;
    int rc;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct fab_ctx *c;
    w->rc = fab_ctx_create(w->f, &c);
    if (w->rc) return NULL;
    hist_init(&w->st.h);
    static __thread uint8_t bufs[MAX_DEPTH][4096];
    static __thread struct fab_buf resp[MAX_DEPTH];
    struct fab_op ops[MAX_DEPTH];
    int64_t posted_at[MAX_DEPTH];
    uint64_t ctr = 0;
    rptr base = rptr_make(w->node, TARGET_OFF);
    int64_t start = clock_now_ns(), measure_from = start + w->warmup_ns;
    int64_t end = measure_from + w->run_ns;
    bool measuring = false, stopping = false;
    unsigned freelist[MAX_DEPTH], nfree = w->depth;
    for (unsigned i = 0; i < w->depth; i++) freelist[i] = i;
    for (;;) {
        int64_t now = clock_now_ns();
        if (!measuring && now >= measure_from) {
            measuring = true;
            hist_init(&w->st.h);
            w->st.ok = w->st.errors = 0;
            w->rt_before = fab_counters(c)->round_trips + fab_counters(c)->rpcs;
        }
        if (now >= end || bench_stop) stopping = true;
        while (!stopping && nfree > 0) {
            unsigned slot = freelist[--nfree];
            rptr p = rptr_add(base, (uint64_t)slot * 4096);
            int rc;
            switch (w->op) {
            case B_READ8:
            case B_READ64:
            case B_READ4K: ops[slot] = fab_op_read(p, bufs[slot], bop_size[w->op]); break;
            case B_WRITE8:
                ctr++;
                memcpy(bufs[slot], &ctr, 8);
                ops[slot] = fab_op_write(p, bufs[slot], 8);
                break;
            case B_CAS: ops[slot] = fab_op_cas(p, ctr, ctr + 1); ctr++; break;
            case B_FAA: ops[slot] = fab_op_faa(p, 1); break;
            default: break;
            }
            posted_at[slot] = clock_now_ns();
            if (w->op == B_RPC)
                rc = fab_rpc_post(c, w->node, FAB_RPC_ECHO, "12345678", 8, &resp[slot], 0, slot);
            else
                rc = fab_post(c, &ops[slot], 1, slot);
            if (rc) {
                freelist[nfree++] = slot;
                w->rc = rc;
                stopping = true;
            }
        }
        if (nfree == w->depth) break;
        struct fab_cqe cq[MAX_DEPTH];
        int n = fab_wait(c, cq, (int)w->depth, 100 * NS_PER_MS);
        int64_t done = clock_now_ns();
        for (int k = 0; k < n; k++) {
            unsigned slot = (unsigned)cq[k].tag;
            if (measuring) {
                if (cq[k].status == 0) {
                    w->st.ok++;
                    hist_record(&w->st.h, (uint64_t)(done - posted_at[slot]));
                } else {
                    w->st.errors++;
                }
            }
            freelist[nfree++] = slot;
        }
    }
    w->st.seconds = (double)(clock_now_ns() - measure_from) / 1e9;
    if (w->st.seconds < 0) w->st.seconds = 0;
    w->rt_after = fab_counters(c)->round_trips + fab_counters(c)->rpcs;
    for (unsigned i = 0; i < MAX_DEPTH; i++) fab_buf_free(&resp[i]);
    fab_ctx_destroy(c);
    return NULL;
}

/* Runs one (op, depth) measurement on `threads` threads and merges their results. */
static int measure(struct fabric *f, unsigned threads, unsigned target, enum bop op, unsigned depth,
                   double seconds, struct bench_stats *out)
{
    struct worker w[MAX_THREADS];
    pthread_t thr[MAX_THREADS];
    unsigned n = fab_num_nodes(f);
    for (unsigned t = 0; t < threads; t++) {
        memset(&w[t], 0, sizeof w[t]);
        w[t].f = f;
        w[t].node = (uint16_t)((target + t) % n);
        w[t].op = op;
        w[t].depth = depth;
        w[t].warmup_ns = (int64_t)(seconds * 0.1 * 1e9);
        if (w[t].warmup_ns > 2 * NS_PER_S) w[t].warmup_ns = 2 * NS_PER_S;
        if (w[t].warmup_ns < 100 * NS_PER_MS) w[t].warmup_ns = 100 * NS_PER_MS;
        w[t].run_ns = (int64_t)(seconds * 1e9);
        pthread_create(&thr[t], NULL, worker_main, &w[t]);
    }
    memset(out, 0, sizeof *out);
    hist_init(&out->h);
    int rc = 0;
    uint64_t rts = 0;
    for (unsigned t = 0; t < threads; t++) {
        pthread_join(thr[t], NULL);
        if (w[t].rc && !rc) rc = w[t].rc;
        hist_merge(&out->h, &w[t].st.h);
        out->ok += w[t].st.ok;
        out->errors += w[t].st.errors;
        if (w[t].st.seconds > out->seconds) out->seconds = w[t].st.seconds;
        rts += w[t].rt_after - w[t].rt_before;
    }
    /* ops/s across threads: each thread's count over the common wall-clock window */
    out->depth = depth;
    out->round_trips_per_op = out->ok ? (double)rts / (double)(out->ok + out->errors) : 0;
    snprintf(out->name, sizeof out->name, "%s-%uB-QD%u", bop_op[op], bop_size[op], depth);
    return rc;
}

/* The baseline: 8-byte ping-pong over a plain TCP connection answered by a plain blocking thread
 * on the node (no io_uring, no fabric framing). */

/* recv of exactly len bytes with MSG_WAITALL, going on after EINTR (a thread that tore down an
 * io_uring ring gets a blocking recv interrupted with no signal), keeping what it had. 0 or -1. */
static int recv_full(int fd, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = recv(fd, (uint8_t *)buf + got, len - got, MSG_WAITALL);
        if (r > 0) got += (size_t)r;
        else if (r < 0 && errno == EINTR && !bench_stop) continue;
        else return -1;
    }
    return 0;
}

static int tcp_pingpong(struct fabric *f, uint16_t node, double seconds,
                        struct bench_stats *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    hist_init(&out->h);
    snprintf(out->name, sizeof out->name, "TCP-PINGPONG-8B");
    out->depth = 1;
    int fd = -1;
    int hrc = fab_echo_connect(f, node, 10 * NS_PER_S, &fd, err, errcap);
    if (hrc) return hrc;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int64_t warm_end = clock_now_ns() + (int64_t)(seconds * 0.1e9) + 100 * NS_PER_MS;
    int64_t start = 0, end = 0;
    uint64_t m = 0;
    int rc = 0;
    for (bool measuring = false;;) {
        int64_t t0 = clock_now_ns();
        if (!measuring && t0 >= warm_end) {
            measuring = true;
            start = t0;
            end = start + (int64_t)(seconds * 1e9);
        }
        if ((measuring && t0 >= end) || bench_stop) break;
        m++;
        uint64_t back;
        if (send(fd, &m, 8, MSG_NOSIGNAL) != 8 || recv_full(fd, &back, 8) != 0 || back != m) {
            snprintf(err, errcap, "ping-pong with node %u broke", node);
            rc = RDKV_EIO;
            break;
        }
        if (measuring) {
            hist_record(&out->h, (uint64_t)(clock_now_ns() - t0));
            out->ok++;
        }
    }
    out->seconds = (double)(clock_now_ns() - start) / 1e9;
    close(fd);
    return rc;
}

/* CPU used by each node over an idle window, from the nodes' own status RPC. */
static int idle_cpu(struct fabric *f, double seconds, double *pct, char *err, size_t errcap)
{
    struct fab_ctx *c;
    if (fab_ctx_create(f, &c)) return RDKV_ENOMEM;
    unsigned n = fab_num_nodes(f);
    int64_t cpu0[LAUNCH_MAX], t0[LAUNCH_MAX];
    struct fab_buf resp = {0};
    int rc = 0;
    for (unsigned pass = 0; pass < 2 && rc == 0; pass++) {
        if (pass == 1) {
            int64_t until = clock_now_ns() + (int64_t)(seconds * 1e9);
            while (clock_now_ns() < until && !bench_stop) clock_sleep_ns(50 * NS_PER_MS);
        }
        for (unsigned i = 0; i < n && i < LAUNCH_MAX; i++) {
            rc = fab_rpc_call(c, (uint16_t)i, KV_RPC_STATUS, NULL, 0, &resp, 5 * NS_PER_S);
            if (rc) {
                snprintf(err, errcap, "status of node %u: %s", i, rdkv_strerror(rc));
                break;
            }
            char *js = strndup(resp.data, resp.len);
            const char *k = js ? strstr(js, "\"cpu_ns\":") : NULL;
            int64_t cpu = k ? strtoll(k + 9, NULL, 10) : -1;
            free(js);
            int64_t now = clock_now_ns();
            if (pass == 0) {
                cpu0[i] = cpu;
                t0[i] = now;
            } else {
                pct[i] = 100.0 * (double)(cpu - cpu0[i]) / (double)(now - t0[i]);
            }
        }
    }
    fab_buf_free(&resp);
    fab_ctx_destroy(c);
    return rc;
}

static unsigned parse_list(const char *s, const char *const *keys, unsigned nkeys, bool *sel)
{
    unsigned count = 0;
    char *dup = strdup(s), *save = NULL;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        unsigned k;
        for (k = 0; k < nkeys; k++)
            if (!strcmp(t, keys[k])) break;
        if (k == nkeys) bench_usage_error("fabric", "unknown op '%s' in --ops", t);
        if (!sel[k]) count++;
        sel[k] = true;
    }
    free(dup);
    return count;
}

/* kvbench fabric's options (fabric_opts). */
struct fabric_cli {
    struct bench_common co;
    unsigned threads, target, ndepths;
    unsigned depths[8];
    double idle_s;
    bool sel[B_NOPS];
    bool transport_given;
};

static int opt_ops(void *o, const char *v)
{
    struct fabric_cli *c = o;
    for (unsigned k = 0; k < B_NOPS; k++) c->sel[k] = false;
    parse_list(v, bop_key, B_NOPS, c->sel);
    return 0;
}

static int opt_depths(void *o, const char *v)
{
    struct fabric_cli *c = o;
    uint64_t u;
    c->ndepths = 0;
    char *dup = strdup(v), *save = NULL;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (c->ndepths == 8 || parse_uint_range(t, 1, MAX_DEPTH, &u))
            bench_usage_error("fabric", "bad --depths '%s' (up to 8 values in 1..256)", v);
        c->depths[c->ndepths++] = (unsigned)u;
    }
    free(dup);
    return !c->ndepths;
}

#define T struct fabric_cli
static const struct bench_opt fabric_opts[] = {
    {"--nodes", BOPT_COMMON,
     "  --nodes N          start N local kvserver nodes for the run (default 3)\n", 0, 0, 0, 0,
     NULL, NULL, NULL},
    {"--config", BOPT_COMMON, "  --config FILE      use the running cluster in FILE instead\n",
     0, 0, 0, 0, NULL, NULL, NULL},
    {"--transport", BOPT_COMMON,
     "  --transport T      soft, verbs or auto (default soft with --nodes, else the config's)\n",
     0, BOPT_GIVEN(T, transport_given), 0, 0, NULL, NULL, NULL},
    {"--seconds", BOPT_COMMON, "  --seconds S        length of each measurement (default 2)\n",
     0, 0, 0, 0, NULL, NULL, NULL},
    {"--threads", BOPT_UINT,
     "  --threads T        client threads; thread i targets node (target + i) mod N (default 1)\n",
     offsetof(T, threads), 0, 1, MAX_THREADS, "--threads needs 1..64 (got '%s')", NULL,
     "--threads needs 1..64 (got '')"},
    {"--target-node", BOPT_UINT,
     "  --target-node N    the node the first thread measures (default 0)\n",
     offsetof(T, target), 0, 0, 65534, "bad --target-node '%s'", NULL, "bad --target-node ''"},
    {"--ops", BOPT_FN,
     "  --ops LIST         comma-separated subset of read8,read64,read4k,write8,cas,faa,rpc\n", 0,
     0, 0, 0, NULL, opt_ops, "%s needs a list"},
    {"--depths", BOPT_FN, "  --depths LIST      comma-separated queue depths (default 1,16)\n",
     0, 0, 0, 0, "bad --depths '%s'", opt_depths, "%s needs a list"},
    {"--idle-seconds", BOPT_DOUBLE,
     "  --idle-seconds S   how long to watch idle nodes (default 2; 0 skips it)\n",
     offsetof(T, idle_s), 0, 0, HUGE_VAL, "bad --idle-seconds '%s'", NULL,
     "bad --idle-seconds ''"},
    {"--spin-us", BOPT_COMMON,
     "  --spin-us U        a waiting client thread polls U us before it blocks (default 20;\n"
     "                     the ping-pong baseline always blocks)\n",
     0, 0, 0, 0, NULL, NULL, NULL},
    {"--json", BOPT_COMMON, "  --json FILE        also write the results as JSON\n", 0, 0, 0, 0,
     NULL, NULL, NULL},
    BOPT_ROW_HELP("  -h, --help         this text\n"),
};
#undef T
static const struct bench_cmd fabric_cmd =
    BENCH_CMD("fabric", fabric_head, fabric_opts, NULL, struct fabric_cli);

/* What a run measured. */
struct fabric_run {
    struct bench_stats res[B_NOPS * 8];
    unsigned nres;
    struct bench_stats base; /* the TCP ping-pong */
    bool have_base, have_idle;
    double idle[LAUNCH_MAX];
    double ratio; /* READ 8 B QD1 p50 over the ping-pong's (0: not measured) */
};

/* Every selected op at every depth, then the baseline: 0, or 1 when one failed. */
static int measure_all(const struct fabric_cli *c, struct fabric *f, struct fabric_run *m)
{
    int rc = 0;
    char err[512];
    for (unsigned k = 0; k < B_NOPS && !bench_stop; k++) {
        if (!c->sel[k]) continue;
        for (unsigned d = 0; d < c->ndepths && !bench_stop; d++) {
            struct bench_stats *s = &m->res[m->nres++];
            int r = measure(f, c->threads, c->target, (enum bop)k, c->depths[d], c->co.seconds, s);
            if (r) {
                fprintf(stderr, "kvbench fabric: %s: %s\n", s->name, rdkv_strerror(r));
                rc = 1;
            }
            if (s->errors) rc = 1;
            bench_print_ycsb(stdout, s);
            fflush(stdout);
        }
    }
    if (!bench_stop) {
        if (tcp_pingpong(f, (uint16_t)c->target, c->co.seconds, &m->base, err, sizeof err)) {
            fprintf(stderr, "kvbench fabric: baseline: %s\n", err);
            rc = 1;
        } else {
            m->have_base = true;
            bench_print_ycsb(stdout, &m->base);
        }
    }
    return rc;
}

static void print_row(const struct bench_stats *s, unsigned depth, const char *rt)
{
    printf("%-18s %5u %12.0f %10.1f %10.1f %10.1f %8s\n", s->name, depth, bench_ops_per_s(s),
           hist_percentile(&s->h, 50) / 1e3, hist_percentile(&s->h, 99) / 1e3,
           hist_percentile(&s->h, 99.9) / 1e3, rt);
}

/* A readable summary, with the targets of docs/benchmarks.md. */
static void print_summary(const struct fabric_cli *c, struct fabric_run *m, unsigned nn)
{
    if (m->have_idle)
        for (unsigned i = 0; i < nn && i < LAUNCH_MAX; i++)
            printf("[IDLE], Node%uCPU(%%), %.2f\n", i, m->idle[i]);
    printf("\n%-18s %5s %12s %10s %10s %10s %8s\n", "op", "depth", "ops/s", "p50(us)", "p99(us)",
           "p99.9(us)", "RT/op");
    const struct bench_stats *r8q1 = NULL, *r8q16 = NULL;
    for (unsigned i = 0; i < m->nres; i++) {
        const struct bench_stats *s = &m->res[i];
        char rt[32];
        snprintf(rt, sizeof rt, "%.2f", s->round_trips_per_op);
        print_row(s, s->depth, rt);
        if (!strcmp(s->name, "READ-8B-QD1")) r8q1 = s;
        if (!strcmp(s->name, "READ-8B-QD16")) r8q16 = s;
    }
    if (m->have_base) print_row(&m->base, 1u, "-");
    if (r8q1 && m->have_base && hist_percentile(&m->base.h, 50)) {
        m->ratio = (double)hist_percentile(&r8q1->h, 50) / (double)hist_percentile(&m->base.h, 50);
        printf("\nREAD 8B QD1 p50 / TCP ping-pong p50 = %.2f (target <= 1.5)\n", m->ratio);
    }
    if (r8q16 && c->threads == 1) printf("READ 8B QD16 throughput = %.0f ops/s (target >= 100000)\n", bench_ops_per_s(r8q16));
    if (m->have_idle) {
        double mx = 0;
        for (unsigned i = 0; i < nn && i < LAUNCH_MAX; i++) if (m->idle[i] > mx) mx = m->idle[i];
        printf("idle node CPU, worst node = %.2f%% of a core (target < 2%%)\n", mx);
    }
}

/* One measurement's JSON object: its op and size found back from its name. */
static void json_result(struct json *j, const struct bench_stats *s)
{
    unsigned k;
    for (k = 0; k < B_NOPS; k++) {
        char nm[48];
        snprintf(nm, sizeof nm, "%s-%uB-QD%u", bop_op[k], bop_size[k], s->depth);
        if (!strcmp(nm, s->name)) break;
    }
    json_obj_begin(j);
    json_kv_str(j, "op", k < B_NOPS ? bop_op[k] : s->name);
    json_kv_u64(j, "size", k < B_NOPS ? bop_size[k] : 0);
    json_kv_u64(j, "depth", s->depth);
    bench_json_metrics(j, s);
    json_obj_end(j);
}

static int write_json(const struct fabric_cli *c, const struct bench_cluster *bc,
                      const struct fabric_run *m, unsigned nn)
{
    struct json j;
    FILE *jf = bench_json_begin(&j, c->co.json, "fabric", bc, fab_transport_name(bc->transport), nn);
    if (!jf) return 1;
    json_kv_u64(&j, "threads", c->threads);
    json_kv_u64(&j, "target_node", c->target);
    json_kv_double(&j, "seconds", c->co.seconds);
    json_kv_double(&j, "client_spin_us", c->co.spin_ns < 0 ? 20.0 : (double)c->co.spin_ns / 1e3);
    json_obj_end(&j);
    json_key(&j, "results");
    json_arr_begin(&j);
    for (unsigned i = 0; i < m->nres; i++) json_result(&j, &m->res[i]);
    json_arr_end(&j);
    if (m->have_base) {
        json_key(&j, "baseline");
        json_obj_begin(&j);
        json_kv_str(&j, "op", "TCP_PINGPONG");
        json_kv_u64(&j, "size", 8);
        json_kv_u64(&j, "depth", 1);
        bench_json_metrics(&j, &m->base);
        json_obj_end(&j);
    }
    if (m->have_idle) {
        json_key(&j, "idle_cpu_percent");
        json_arr_begin(&j);
        for (unsigned i = 0; i < nn && i < LAUNCH_MAX; i++) json_double(&j, m->idle[i]);
        json_arr_end(&j);
    }
    if (m->ratio > 0) json_kv_double(&j, "read8_qd1_p50_over_tcp_p50", m->ratio);
    json_obj_end(&j);
    return fclose(jf) ? 1 : 0;
}

int cmd_fabric(int argc, char **argv)
{
    struct fabric_cli c = {.threads = 1, .ndepths = 2, .depths = {1, 16}, .idle_s = 2};
    bench_common_init(&c.co);
    for (unsigned k = 0; k < B_NOPS; k++) c.sel[k] = true;
    if (bench_opts_parse(&fabric_cmd, &c, argc, argv)) return 0;
    if (c.co.config && !c.transport_given) c.co.transport = FAB_AUTO;
    struct bench_cluster bc;
    if (bench_start(&bc, &c.co, "fabric", 30 * NS_PER_S)) return 1;
    unsigned nn = fab_num_nodes(bc.f);
    if (c.target >= nn) {
        fprintf(stderr, "kvbench fabric: error: --target-node %u, but the cluster has %u nodes\n", c.target, nn);
        bench_cluster_close(&bc);
        return 2;
    }
    printf("# kvbench fabric: transport %s, %u node%s%s, %u client thread%s (first -> node %u), "
           "%.1f s per measurement\n",
           fab_transport_name(bc.transport), nn, nn == 1 ? "" : "s",
           bc.launched ? " (local processes)" : "", c.threads, c.threads == 1 ? "" : "s", c.target,
           c.co.seconds);
    fflush(stdout);
    struct fabric_run *m = calloc(1, sizeof *m);
    if (!m) return bench_finish(&bc, "fabric", 1);
    char err[512];
    if (c.idle_s > 0) {
        if (idle_cpu(bc.f, c.idle_s, m->idle, err, sizeof err))
            fprintf(stderr, "kvbench fabric: idle measurement failed: %s\n", err);
        else
            m->have_idle = true;
    }
    int rc = measure_all(&c, bc.f, m);
    print_summary(&c, m, nn);
    if (c.co.json && write_json(&c, &bc, m, nn)) rc = 1;
    free(m);
    return bench_finish(&bc, "fabric", rc);
}
