/* Shared kvbench pieces. */
#include "bench.h"

#include "rdkv.h"

#include "common/clock.h"
#include "server/node.h"
#include "common/parse.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

volatile int bench_stop;

static void on_signal(int sig)
{
    (void)sig;
    bench_stop = 1;
}

void bench_install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

_Noreturn void bench_usage_error(const char *cmd, const char *fmt, const char *arg)
{
    fprintf(stderr, "kvbench %s: ", cmd);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'kvbench %s --help'.\n", cmd);
    exit(2);
}

void bench_common_init(struct bench_common *c)
{
    memset(c, 0, sizeof *c);
    c->nodes = 3;
    c->transport = FAB_SOFT;
    c->seconds = 2;
    c->spin_ns = -1;
}

/* Exits with a usage error unless every comma-separated element of eps is a host:port. */
static void check_endpoints(const char *cmd, const char *eps)
{
    char one[CLUSTER_HOST_MAX + 16], host[CLUSTER_HOST_MAX];
    for (const char *p = eps;;) {
        size_t n = strcspn(p, ",");
        uint16_t port;
        if (n >= sizeof one) n = sizeof one - 1;
        memcpy(one, p, n);
        one[n] = 0;
        if (parse_hostport(one, host, sizeof host, &port, 0))
            bench_usage_error(cmd, "bad endpoint '%s' in --endpoints (want host:port[,host:port...])",
                              one);
        if (!p[n]) break;
        p += n + 1;
    }
}

bool bench_help_lists(const char *help, const char *o)
{
    size_t ol = strlen(o);
    for (const char *line = help; line && *line;) {
        const char *p = line + strspn(line, " ");
        /* "  -e, --endpoints H:P": the options that open an indented line */
        while (*p == '-') {
            size_t n = strcspn(p, " ,=\n");
            if (n == ol && !strncmp(p, o, ol)) return true;
            p += n;
            if (strncmp(p, ", ", 2)) break;
            p += 2;
        }
        line = strchr(line, '\n');
        if (line) line++;
    }
    return false;
}

_Noreturn void bench_value_missing(const char *cmd, const char *help, const char *o)
{
    if (bench_help_lists(help, o)) bench_usage_error(cmd, "option '%s' needs a value", o);
    bench_usage_error(cmd, "unknown option '%s'", o);
}

int bench_common_opt(struct bench_common *c, const char *cmd, int argc, char **argv, int *i)
{
    const char *o = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    uint64_t u;
    if (!strcmp(o, "--nodes")) {
        if (!v || parse_uint_range(v, 1, LAUNCH_MAX, &u))
            bench_usage_error(cmd, "--nodes needs a count from 1 to 64 (got '%s')", v ? v : "");
        c->nodes = (unsigned)u;
    } else if (!strcmp(o, "--config")) {
        if (!v) bench_usage_error(cmd, "%s needs a file", o);
        c->config = v;
    } else if (!strcmp(o, "--endpoints")) {
        if (!v || !*v) bench_usage_error(cmd, "%s needs host:port[,host:port...]", o);
        check_endpoints(cmd, v);
        c->endpoints = v;
    } else if (!strcmp(o, "--transport")) {
        if (!v || fab_transport_parse(v, &c->transport))
            bench_usage_error(cmd, "--transport must be soft, verbs or auto (got '%s')", v ? v : "");
    } else if (!strcmp(o, "--arena")) {
        if (!v || parse_size(v, &c->arena) || !c->arena)
            bench_usage_error(cmd, "--arena needs a size such as 256M (got '%s')", v ? v : "");
    } else if (!strcmp(o, "--seconds")) {
        if (!v || parse_double(v, &c->seconds) || c->seconds <= 0 || c->seconds > 86400)
            bench_usage_error(cmd, "--seconds needs a positive number (got '%s')", v ? v : "");
    } else if (!strcmp(o, "--spin-us")) {
        double d;
        if (!v || parse_double(v, &d) || d < 0 || d > 1e6)
            bench_usage_error(cmd, "--spin-us needs a number of microseconds (got '%s')", v ? v : "");
        c->spin_ns = (int64_t)(d * 1000);
    } else if (!strcmp(o, "--json")) {
        if (!v) bench_usage_error(cmd, "%s needs a file name", o);
        c->json = v;
    } else if (!strcmp(o, "--secret-file")) {
        if (!v || !*v) bench_usage_error(cmd, "%s needs a file", o);
        c->secret_file = v;
        setenv("RDKV_SECRET_FILE", v, 1); /* for the sessions kvbench opens (rdkv_connect) */
    } else if (!strcmp(o, "--insecure")) {
        c->insecure = true;
        unsetenv("RDKV_SECRET_FILE"); /* an --insecure node proves nothing: offer nothing */
        return 1;
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

/* A running cluster's config from the addresses of its nodes: any one of them tells the whole
 * list (its cluster status names every node and its address, in node order). */
static int config_from_endpoints(const char *endpoints, struct cluster_config *cc, char *err,
                                 size_t errcap)
{
    rdkv_session *s;
    int rc = rdkv_connect(endpoints, NULL, &s);
    if (rc) {
        snprintf(err, errcap, "cannot reach the cluster at %s: %s", endpoints, rdkv_strerror(rc));
        return rc;
    }
    char *js = NULL;
    rc = rdkv_cluster_status(s, &js);
    rdkv_session_close(s);
    if (rc) {
        snprintf(err, errcap, "cannot read the cluster's status from %s: %s", endpoints,
                 rdkv_strerror(rc));
        return rc;
    }
    char hosts[LAUNCH_MAX][64];
    const char *hp[LAUNCH_MAX];
    uint16_t ports[LAUNCH_MAX];
    unsigned n = 0;
    for (const char *p = js; (p = strstr(p, "{\"node\":")) && n < LAUNCH_MAX;) {
        unsigned id;
        char addr[96];
        if (sscanf(p, "{\"node\":%u,\"address\":\"%95[^\"]\"", &id, addr) != 2 || id != n ||
            parse_hostport(addr, hosts[n], sizeof hosts[n], &ports[n], 0)) {
            p++;
            continue;
        }
        hp[n] = hosts[n];
        n++;
        p++;
    }
    free(js);
    if (!n || cluster_config_make(cc, n, hp, ports)) {
        snprintf(err, errcap, "the cluster at %s did not describe its nodes", endpoints);
        return RDKV_EPROTO;
    }
    return 0;
}

const char *bench_strerror(int status)
{
    return status == RDKV_ENOTSUP ? NODE_BENCH_OFF : rdkv_strerror(status);
}

int bench_cluster_open(struct bench_cluster *b, const struct bench_common *co, int64_t wait_ns,
                       char *err, size_t errcap)
{
    memset(b, 0, sizeof *b);
    char spin_arg[32];
    const char *config = co->config;
    enum fab_transport t = co->transport;
    int rc;
    if (co->endpoints) {
        rc = config_from_endpoints(co->endpoints, &b->cc, err, errcap);
        if (rc) return rc;
        b->cfg = &b->cc;
        if (t == FAB_AUTO && b->cc.transport[0]) fab_transport_parse(b->cc.transport, &t);
    } else if (config) {
        rc = cluster_config_load(config, &b->cc, err, errcap);
        if (rc) return rc;
        b->cfg = &b->cc;
        if (t == FAB_AUTO && b->cc.transport[0]) fab_transport_parse(b->cc.transport, &t);
    } else {
        struct launch_opts lo;
        launch_opts_init(&lo);
        lo.nodes = co->nodes;
        lo.transport = t == FAB_AUTO ? (fab_verbs_available() ? FAB_VERBS : FAB_SOFT) : t;
        lo.arena_size = co->arena;
        lo.bench = true; /* kvbench's own nodes serve its workloads */
        if (co->spin_ns >= 0) {
            /* the nodes' own waiting threads (embedded workers) spin the same */
            snprintf(spin_arg, sizeof spin_arg, "%lld", (long long)(co->spin_ns / NS_PER_US));
            lo.extra[0] = "--spin-us";
            lo.extra[1] = spin_arg;
        }
        for (unsigned i = 0, at = lo.extra[0] ? 2 : 0; i < 12 && co->node_args[i] && at < 13; i++)
            lo.extra[at++] = co->node_args[i];
        lo.insecure = co->insecure;
        rc = launch_start(&b->L, &lo, err, errcap);
        if (rc) return rc;
        b->launched = true;
        b->cfg = &b->L.cc;
        /* the sessions kvbench opens prove the new cluster's secret (its client role) */
        if (!co->insecure && !co->secret_file && b->L.cc.secret_file[0])
            setenv("RDKV_SECRET_FILE", b->L.cc.secret_file, 1);
        t = lo.transport;
    }
    struct fab_opts o;
    fab_opts_init(&o);
    o.cluster = b->cfg;
    o.node = FAB_NODE_CLIENT;
    o.transport = t;
    o.secret_file = co->secret_file;
    o.insecure = co->insecure;
    if (co->spin_ns >= 0) o.spin_ns = co->spin_ns;
    rc = fab_open(&o, &b->f, err, errcap);
    if (rc) {
        bench_cluster_close(b);
        return rc;
    }
    b->transport = fab_transport_of(b->f);
    /* Every node must answer before the measurement starts. */
    struct fab_ctx *c;
    rc = fab_ctx_create(b->f, &c);
    if (rc) {
        snprintf(err, errcap, "cannot create a fabric context");
        bench_cluster_close(b);
        return rc;
    }
    int64_t deadline = clock_now_ns() + wait_ns;
    struct fab_buf resp = {0};
    for (unsigned n = 0; n < b->cfg->n && rc == 0; n++) {
        for (;;) {
            int r = fab_rpc_call(c, (uint16_t)n, FAB_RPC_ECHO, "ping", 4, &resp, NS_PER_S);
            if (r == 0) break;
            char why[CLUSTER_HOST_MAX + 80];
            if (fab_host_check(b->cfg->nodes[n].host, why, sizeof why) == RDKV_ENOHOST) {
                snprintf(err, errcap, "node %u: %s", n, why);
                rc = RDKV_ENOHOST;
                break;
            }
            if (r == RDKV_EPERM) { /* refused for good: no use waiting */
                snprintf(err, errcap,
                         "node %u at %s:%u refuses this credential: kvbench drives the nodes' "
                         "benchmark services and needs the cluster's node secret "
                         "(--secret-file DIR/cluster.secret), not a client's", n,
                         b->cfg->nodes[n].host, b->cfg->nodes[n].port);
                rc = r;
                break;
            }
            if (clock_now_ns() >= deadline || bench_stop) {
                snprintf(err, errcap, "node %u at %s:%u does not answer: %s", n,
                         b->cfg->nodes[n].host, b->cfg->nodes[n].port, rdkv_strerror(r));
                rc = r;
                break;
            }
            clock_sleep_ns(100 * NS_PER_MS); /* bounded wait for a node that is still starting */
        }
    }
    fab_buf_free(&resp);
    fab_ctx_destroy(c);
    if (rc) bench_cluster_close(b);
    return rc;
}

int bench_start(struct bench_cluster *b, const struct bench_common *co, const char *cmd,
                int64_t wait_ns)
{
    bench_install_signals();
    char err[512];
    if (bench_cluster_open(b, co, wait_ns, err, sizeof err)) {
        fprintf(stderr, "kvbench %s: error: %s\n", cmd, err);
        return 1;
    }
    return 0;
}

int bench_finish(struct bench_cluster *b, const char *cmd, int rc)
{
    if (bench_cluster_close(b)) {
        fprintf(stderr, "kvbench %s: a node did not stop cleanly\n", cmd);
        rc = 1;
    }
    if (bench_stop) {
        fprintf(stderr, "kvbench %s: interrupted\n", cmd);
        return 130;
    }
    return rc;
}

int bench_cluster_close(struct bench_cluster *b)
{
    int rc = 0;
    if (b->f) fab_close(b->f);
    b->f = NULL;
    if (b->launched) rc = launch_stop(&b->L, 10 * NS_PER_S);
    b->launched = false;
    if (b->cfg == &b->cc) cluster_config_free(&b->cc);
    b->cfg = NULL;
    return rc;
}

double bench_ops_per_s(const struct bench_stats *s)
{
    return s->seconds > 0 ? (double)s->ok / s->seconds : 0;
}

static double us(uint64_t ns) { return (double)ns / 1000.0; }

void bench_print_ycsb(FILE *out, const struct bench_stats *s)
{
    const struct hist *h = &s->h;
    fprintf(out, "[%s], Operations, %llu\n", s->name, (unsigned long long)s->ok);
    fprintf(out, "[%s], Throughput(ops/sec), %.1f\n", s->name, bench_ops_per_s(s));
    fprintf(out, "[%s], AverageLatency(us), %.2f\n", s->name, hist_mean(h) / 1000.0);
    fprintf(out, "[%s], MinLatency(us), %.2f\n", s->name, h->count ? us(h->min) : 0.0);
    fprintf(out, "[%s], MaxLatency(us), %.2f\n", s->name, us(h->max));
    fprintf(out, "[%s], 50thPercentileLatency(us), %.2f\n", s->name, us(hist_percentile(h, 50)));
    fprintf(out, "[%s], 99thPercentileLatency(us), %.2f\n", s->name, us(hist_percentile(h, 99)));
    fprintf(out, "[%s], 99.9thPercentileLatency(us), %.2f\n", s->name, us(hist_percentile(h, 99.9)));
    if (s->round_trips_per_op > 0)
        fprintf(out, "[%s], RoundTripsPerOp, %.2f\n", s->name, s->round_trips_per_op);
    fprintf(out, "[%s], Return=OK, %llu\n", s->name, (unsigned long long)s->ok);
    if (s->errors) fprintf(out, "[%s], Return=ERROR, %llu\n", s->name, (unsigned long long)s->errors);
}

void bench_json_metrics(struct json *j, const struct bench_stats *s)
{
    const struct hist *h = &s->h;
    json_kv_u64(j, "ops", s->ok);
    json_kv_u64(j, "errors", s->errors);
    json_kv_double(j, "seconds", s->seconds);
    json_kv_double(j, "ops_per_s", bench_ops_per_s(s));
    json_kv_double(j, "mean_us", hist_mean(h) / 1000.0);
    json_kv_double(j, "p50_us", us(hist_percentile(h, 50)));
    json_kv_double(j, "p99_us", us(hist_percentile(h, 99)));
    json_kv_double(j, "p999_us", us(hist_percentile(h, 99.9)));
    json_kv_double(j, "max_us", us(h->max));
    if (s->round_trips_per_op > 0) json_kv_double(j, "round_trips_per_op", s->round_trips_per_op);
}

FILE *bench_json_begin(struct json *j, const char *path, const char *cmd,
                       const struct bench_cluster *bc, const char *transport, unsigned nodes)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "kvbench %s: cannot write %s: %s\n", cmd, path, strerror(errno));
        return NULL;
    }
    json_init(j, f, true);
    json_obj_begin(j);
    json_kv_str(j, "benchmark", cmd);
    json_key(j, "config");
    json_obj_begin(j);
    json_kv_str(j, "transport", transport);
    json_kv_u64(j, "nodes", nodes);
    json_kv_bool(j, "local_nodes", bc->launched);
    return f;
}

static void swap_bytes(unsigned char *a, unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char t = a[i];
        a[i] = b[i];
        b[i] = t;
    }
}

void *bench_median_run(void *runs, unsigned n, size_t size, double (*ops)(const void *run))
{
    unsigned char *r = runs;
    for (unsigned a = 0; a < n; a++)
        for (unsigned b = a + 1; b < n; b++)
            if (ops(r + b * size) < ops(r + a * size)) swap_bytes(r + a * size, r + b * size, size);
    return r + (size_t)(n / 2) * size;
}

int bench_gnuplot(const char *script)
{
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) return 1;
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "gnuplot '%s' 2>&1", script);
    FILE *pp = popen(cmd, "r");
    if (!pp) return -1;
    char line[512];
    while (fgets(line, sizeof line, pp)) fprintf(stderr, "gnuplot: %s", line);
    return pclose(pp) == 0 ? 0 : -1;
}
