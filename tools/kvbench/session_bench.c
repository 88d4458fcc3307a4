/* kvbench sessions: what idle remote sessions cost a node. It opens many sessions on node 0 over
 * one connection (as many clients behind one proxy would), reads the node's resident memory
 * before and after, times one-shot reads (rdkv_get, kvctl get's call) of a client that connects
 * meanwhile, and shows the session past the node's --max-sessions refused as busy. */
#include "tools/kvbench/bench.h"

#include "client/embed.h"
#include "server/proto.h"

#include "common/clock.h"
#include "common/parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: kvbench sessions [--nodes N | --endpoints H:P[,...]] [options]\n"
    "\n"
    "Opens idle remote sessions on node 0 over one connection, reports the node's resident\n"
    "memory per session (launched nodes only: it reads /proc), times one-shot reads by a\n"
    "client that connects meanwhile, and opens sessions past the limit until one is refused.\n"
    "Launched nodes get --max-sessions SESSIONS + 16.\n"
    "\n"
    "  --sessions N      idle sessions to open (default 10000)\n"
    "  --reads N         one-shot reads to time meanwhile (default 2000)\n"
    "  --nodes N         launch N local nodes (default 1)\n"
    "  --endpoints LIST  use a running cluster instead (node 0 first)\n"
    "  --transport T     soft or verbs, for launched nodes (default soft)\n"
    "  -h, --help        this text\n";

/* Node 0's resident set in KiB, or 0 when it cannot be read. */
static uint64_t rss_kib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    uint64_t kib = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kib = strtoull(line + 6, NULL, 10);
    fclose(f);
    return kib;
}

int cmd_sessions(int argc, char **argv)
{
    struct bench_common co;
    bench_common_init(&co);
    co.nodes = 1;
    uint64_t nsess = 10000, nreads = 2000;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        if (bench_common_opt(&co, "sessions", argc, argv, &i)) continue;
        if (!v) bench_value_missing("sessions", usage, o);
        if (!strcmp(o, "--sessions")) {
            if (parse_uint_range(v, 1, 900000, &nsess))
                bench_usage_error("sessions", "--sessions must be 1..900000 (got '%s')", v);
        } else if (!strcmp(o, "--reads")) {
            if (parse_uint_range(v, 1, 10000000, &nreads))
                bench_usage_error("sessions", "--reads must be 1..10000000 (got '%s')", v);
        } else {
            bench_usage_error("sessions", "unknown option '%s'", o);
        }
        i++;
    }
    char maxs[24];
    snprintf(maxs, sizeof maxs, "%llu", (unsigned long long)nsess + 16);
    co.node_args[0] = "--max-sessions";
    co.node_args[1] = maxs;
    co.node_args[2] = "--sessions-per-conn"; /* they all go over one connection */
    co.node_args[3] = maxs;
    bench_install_signals();
    char err[512];
    struct bench_cluster bc;
    if (bench_cluster_open(&bc, &co, 60 * NS_PER_S, err, sizeof err)) {
        fprintf(stderr, "kvbench sessions: error: %s\n", err);
        return 1;
    }
    int ret = 1;
    struct fab_ctx *c = NULL;
    struct ses_id *sids = calloc(nsess, sizeof *sids);
    struct fab_buf resp = {0};
    rdkv_session *s = NULL;
    if (!sids || fab_ctx_create(bc.f, &c)) {
        fprintf(stderr, "kvbench sessions: error: out of memory\n");
        goto out;
    }
    pid_t pid = bc.launched ? bc.L.pids[0] : 0;
    uint64_t rss0 = pid ? rss_kib(pid) : 0;
    uint64_t opened = 0;
    int rc = 0;
    int64_t t0 = clock_now_ns();
    while (opened < nsess && !bench_stop && !(rc = ses_raw_open(c, 0, &resp, &sids[opened]))) opened++;
    double open_s = (double)(clock_now_ns() - t0) / 1e9;
    if (opened < nsess) {
        fprintf(stderr, "kvbench sessions: error: session %llu was refused: %s\n",
                (unsigned long long)opened + 1, rdkv_strerror(rc));
        goto out;
    }
    uint64_t rss1 = pid ? rss_kib(pid) : 0;
    /* a client connecting meanwhile: one-shot reads of one key */
    char eps[4096];
    size_t at = 0;
    for (unsigned k = 0; k < bc.cfg->n && at < sizeof eps; k++)
        at += (size_t)snprintf(eps + at, sizeof eps - at, "%s%s:%u", k ? "," : "",
                               bc.cfg->nodes[k].host, bc.cfg->nodes[k].port);
    if ((rc = rdkv_connect(eps, NULL, &s)) || (rc = rdkv_put(s, "kvbench:sessions", 16, "v", 1))) {
        fprintf(stderr, "kvbench sessions: error: a client connecting meanwhile: %s\n",
                rdkv_strerror(rc));
        goto out;
    }
    struct bench_stats st = {0};
    snprintf(st.name, sizeof st.name, "READ");
    hist_init(&st.h);
    int64_t r0 = clock_now_ns();
    for (uint64_t i = 0; i < nreads && !bench_stop; i++) {
        const void *v;
        size_t vl;
        int64_t a = clock_now_ns();
        rc = rdkv_get(s, "kvbench:sessions", 16, &v, &vl);
        if (rc) st.errors++;
        else st.ok++;
        hist_record(&st.h, (uint64_t)(clock_now_ns() - a));
    }
    st.seconds = (double)(clock_now_ns() - r0) / 1e9;
    /* the limit: open until refused */
    uint64_t more = 0;
    struct ses_id extra[32];
    int refused = 0;
    while (more < 32 && !(refused = ses_raw_open(c, 0, &resp, &extra[more]))) more++;
    printf("# sessions: %llu idle sessions on node 0 of %u (%s), one connection\n",
           (unsigned long long)opened, bc.cfg->n, fab_transport_name(bc.transport));
    printf("[SESSIONS], Opened, %llu\n", (unsigned long long)opened);
    printf("[SESSIONS], OpenTime(s), %.2f\n", open_s);
    if (pid) {
        printf("[SESSIONS], NodeRSSBefore(KiB), %llu\n", (unsigned long long)rss0);
        printf("[SESSIONS], NodeRSSAfter(KiB), %llu\n", (unsigned long long)rss1);
        printf("[SESSIONS], NodeRSSPerSession(bytes), %.0f\n",
               rss1 > rss0 ? (double)(rss1 - rss0) * 1024.0 / (double)opened : 0.0);
    }
    printf("[SESSIONS], OpenedPastTheIdleOnes, %llu\n", (unsigned long long)more);
    printf("[SESSIONS], NextRefusedWith, %s\n", refused ? rdkv_status_name(refused) : "(none)");
    bench_print_ycsb(stdout, &st);
    for (uint64_t i = 0; i < more; i++) (void)ses_raw_close(c, 0, &resp, &extra[i]);
    ret = st.errors || refused != RDKV_EBUSY ? 1 : 0;
    for (uint64_t i = 0; i < opened; i++) (void)ses_raw_close(c, 0, &resp, &sids[i]);
out:
    if (s) rdkv_session_close(s);
    fab_buf_free(&resp);
    free(sids);
    if (c) fab_ctx_destroy(c);
    if (bench_cluster_close(&bc) && !ret) ret = 1;
    return ret;
}
