/* A node's metrics in Prometheus's text format, over libmicrohttpd (metrics.h). */
#include "server/metrics.h"

#include "common/json.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/parse.h"
#include "locks/lock.h"
#include "rdkv_status.h"

#include <errno.h>
#include <jemalloc/jemalloc.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* What each metric is called and says */

struct counter_def {
    enum metric_counter k;
    const char *name, *label, *help;
};
/* Counters of one family are next to each other; label "" is a family without labels. */
static const struct counter_def counters[] = {
    {MC_TXN_COMMITS, "rdkv_txn_commits_total", "",
     "Transactions committed (those whose outcome the client was not told included)."},
    {MC_TXN_COMMITS_UNKNOWN, "rdkv_txn_commits_unknown_total", "",
     "Commits answered RDKV_EUNKNOWN: they may or may not have taken effect."},
    {MC_TXN_ABORT_CONFLICT, "rdkv_txn_aborts_total", "reason=\"conflict\"",
     "Transactions aborted, by reason: conflict (a lock not granted under the conflict policy, "
     "or a lease that ran out), unavailable (a node down or a partition moving), client (the "
     "client aborted), other (any other error)."},
    {MC_TXN_ABORT_UNAVAILABLE, "rdkv_txn_aborts_total", "reason=\"unavailable\"", NULL},
    {MC_TXN_ABORT_CLIENT, "rdkv_txn_aborts_total", "reason=\"client\"", NULL},
    {MC_TXN_ABORT_OTHER, "rdkv_txn_aborts_total", "reason=\"other\"", NULL},
    {MC_TXN_LOCK_CONFLICTS, "rdkv_txn_lock_conflicts_total", "",
     "Row or range lock waits of transactions that ran out (died, refused or timed out)."},
    {MC_LOG_RECORDS, "rdkv_log_records_total", "", "Records written to the redo log."},
    {MC_LOG_BYTES, "rdkv_log_bytes_total", "", "Bytes written to the redo log."},
    {MC_LOG_SYNCS, "rdkv_log_syncs_total", "", "fdatasync calls on the redo log."},
    {MC_LOG_ERRORS, "rdkv_log_errors_total", "", "Redo-log writes or syncs that failed."},
    {MC_SESSIONS_OPENED, "rdkv_sessions_opened_total", "", "Remote sessions opened."},
    {MC_SESSIONS_CLOSED, "rdkv_sessions_closed_total", "",
     "Remote sessions closed, expired or dropped with their connection."},
};

static const struct {
    enum metric_hist k;
    const char *name, *help;
} hists[] = {
    {MH_TXN, "rdkv_txn_duration_seconds", "Transactions from begin to commit or abort."},
    {MH_COMMIT, "rdkv_txn_commit_duration_seconds",
     "Commit calls: 2PC, the log and the releases."},
    {MH_LOCK_WAIT, "rdkv_lock_wait_duration_seconds",
     "Lock acquires that waited, from the call to the grant or the failure."},
    {MH_LOG_SYNC, "rdkv_log_sync_duration_seconds", "One fdatasync of the redo log."},
};

static const struct {
    enum metric_algo k;
    const char *name, *help;
} algo_defs[] = {
    {MA_ACQUIRES, "rdkv_lock_acquires_total", "Lock acquires, by algorithm."},
    {MA_WAITS, "rdkv_lock_waits_total",
     "Lock acquires that waited (spun, slept, backed off or queued), by algorithm."},
    {MA_TIMEOUTS, "rdkv_lock_timeouts_total", "Lock acquires that reached their deadline."},
    {MA_ABORTS, "rdkv_lock_aborts_total",
     "Lock acquires refused: wait-die died, or a lease-expiry reset took the request."},
    {MA_RESETS, "rdkv_lock_resets_total",
     "Lease-expiry resets: locks of holders that stopped showing they live, freed."},
};

static const struct {
    enum metric_peer k;
    const char *name, *help;
} peer_defs[] = {
    {MP_OPS, "rdkv_fabric_ops_total", "One-sided operations posted, by target node."},
    {MP_BYTES, "rdkv_fabric_bytes_total", "Bytes read or written one-sided, by target node."},
    {MP_RPCS, "rdkv_fabric_rpcs_total", "RPCs sent, by target node."},
    {MP_ERRORS, "rdkv_fabric_errors_total",
     "Chains and RPCs that completed with an error, by target node."},
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------------------------------ */
/* The text format */

static void head(FILE *o, const char *name, const char *help, const char *type)
{
    fprintf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void write_hist(FILE *o, const char *name, const char *help, const struct metrics_hist *h)
{
    head(o, name, help, "histogram");
    uint64_t cum = 0;
    for (unsigned b = 0; b < METRICS_BUCKETS; b++) {
        cum += h->b[b];
        if (b == METRICS_BUCKETS - 1)
            fprintf(o, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
        else
            fprintf(o, "%s_bucket{le=\"%g\"} %llu\n", name, (double)metrics_bounds_ns[b] / 1e9,
                    (unsigned long long)cum);
    }
    fprintf(o, "%s_sum %.9f\n%s_count %llu\n", name, (double)h->sum_ns / 1e9, name,
            (unsigned long long)h->count);
}

/* Lock algorithms with anything counted, and the node's row and range locks always. */
static bool algo_shown(const struct metrics_totals *t, unsigned a, const struct metrics_gauges *g)
{
    const struct lock_algo *al = lock_algo_by_id(a);
    if (!al) return false;
    if ((g->row_lock && !strcmp(al->name, g->row_lock)) ||
        (g->range_lock && !strcmp(al->name, g->range_lock)))
        return true;
    for (unsigned k = 0; k < MA__COUNT; k++)
        if (t->algo[a][k]) return true;
    return false;
}

static bool peer_shown(const struct metrics_totals *t, unsigned p)
{
    for (unsigned k = 0; k < MP__COUNT; k++)
        if (t->peer[p][k]) return true;
    return false;
}

/* Writes a label value: \, " and newline escaped. */
static void label_value(FILE *o, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '\\' || *s == '"') fputc('\\', o);
        if (*s == '\n') fputs("\\n", o);
        else fputc(*s, o);
    }
}

static void write_info(FILE *o, const struct metrics_gauges *g)
{
    head(o, "rdkv_node_info", "The node's id, version and settings (value 1).", "gauge");
    const char *keys[] = {"version", "transport", "row_lock", "range_lock", "conflict"};
    const char *vals[] = {g->version, g->transport, g->row_lock, g->range_lock, g->conflict};
    fprintf(o, "rdkv_node_info{node=\"%u\"", g->node);
    for (unsigned i = 0; i < N(keys); i++) {
        fprintf(o, ",%s=\"", keys[i]);
        label_value(o, vals[i]);
        fputc('"', o);
    }
    fputs("} 1\n", o);
    head(o, "rdkv_uptime_seconds", "Seconds since the node started.", "gauge");
    fprintf(o, "rdkv_uptime_seconds %.3f\n", (double)g->uptime_ns / 1e9);
    head(o, "rdkv_rows", "Rows in the node's partitions.", "gauge");
    fprintf(o, "rdkv_rows %llu\n", (unsigned long long)g->rows);
    head(o, "rdkv_sessions", "Remote sessions open.", "gauge");
    fprintf(o, "rdkv_sessions %llu\n", (unsigned long long)g->sessions);
}

/* jemalloc's view of the process's heap (malloc): allocated and resident bytes. */
static void heap_stats(uint64_t *allocated, uint64_t *resident)
{
    uint64_t epoch = 1;
    size_t sz = sizeof epoch;
    (void)mallctl("epoch", &epoch, &sz, &epoch, sz);
    size_t v = 0;
    sz = sizeof v;
    *allocated = mallctl("stats.allocated", &v, &sz, NULL, 0) ? 0 : v;
    sz = sizeof v;
    *resident = mallctl("stats.resident", &v, &sz, NULL, 0) ? 0 : v;
}

static void write_memory(FILE *o, const struct metrics_gauges *g)
{
    uint64_t alloc, res;
    heap_stats(&alloc, &res);
    head(o, "rdkv_memory_bytes",
         "Memory by kind: arena (the registered region), arena_heap (the record heap in it) and "
         "arena_heap_used, malloc_allocated and malloc_resident (jemalloc's stats).",
         "gauge");
    const char *kinds[] = {"arena", "arena_heap", "arena_heap_used", "malloc_allocated",
                           "malloc_resident"};
    uint64_t vals[] = {g->arena_bytes, g->heap_bytes, g->heap_used, alloc, res};
    for (unsigned i = 0; i < N(kinds); i++)
        fprintf(o, "rdkv_memory_bytes{kind=\"%s\"} %llu\n", kinds[i],
                (unsigned long long)vals[i]);
}

int metrics_write_text(FILE *o, const struct metrics_gauges *g)
{
    struct metrics_totals *t = malloc(sizeof *t);
    if (!t) return RDKV_ENOMEM;
    metrics_read(t);
    write_info(o, g);
    for (unsigned i = 0; i < N(counters); i++) {
        const struct counter_def *d = &counters[i];
        if (d->help) head(o, d->name, d->help, "counter");
        fprintf(o, "%s%s%s%s %llu\n", d->name, *d->label ? "{" : "", d->label,
                *d->label ? "}" : "", (unsigned long long)t->c[d->k]);
    }
    for (unsigned i = 0; i < N(hists); i++)
        write_hist(o, hists[i].name, hists[i].help, &t->h[hists[i].k]);
    for (unsigned i = 0; i < N(algo_defs); i++) {
        head(o, algo_defs[i].name, algo_defs[i].help, "counter");
        for (unsigned a = 0; a < METRICS_ALGOS; a++)
            if (algo_shown(t, a, g))
                fprintf(o, "%s{algo=\"%s\"} %llu\n", algo_defs[i].name, lock_algo_by_id(a)->name,
                        (unsigned long long)t->algo[a][algo_defs[i].k]);
    }
    for (unsigned i = 0; i < N(peer_defs); i++) {
        head(o, peer_defs[i].name, peer_defs[i].help, "counter");
        for (unsigned p = 0; p < METRICS_PEERS; p++)
            if (peer_shown(t, p))
                fprintf(o, "%s{peer=\"%u\"} %llu\n", peer_defs[i].name, p,
                        (unsigned long long)t->peer[p][peer_defs[i].k]);
    }
    write_memory(o, g);
    free(t);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* The status's JSON (kvctl stats) */

static void json_hist(struct json *j, const char *key, const struct metrics_hist *h)
{
    json_key(j, key);
    json_obj_begin(j);
    json_kv_u64(j, "count", h->count);
    json_kv_u64(j, "sum_ns", h->sum_ns);
    json_kv_i64(j, "p50_ns", metrics_hist_quantile(h, 0.50));
    json_kv_i64(j, "p99_ns", metrics_hist_quantile(h, 0.99));
    json_obj_end(j);
}

void metrics_write_json(struct json *j)
{
    struct metrics_totals *t = malloc(sizeof *t);
    if (!t) return;
    metrics_read(t);
    json_kv_u64(j, "commits", t->c[MC_TXN_COMMITS]);
    json_kv_u64(j, "commits_unknown", t->c[MC_TXN_COMMITS_UNKNOWN]);
    json_key(j, "aborts");
    json_obj_begin(j);
    json_kv_u64(j, "conflict", t->c[MC_TXN_ABORT_CONFLICT]);
    json_kv_u64(j, "unavailable", t->c[MC_TXN_ABORT_UNAVAILABLE]);
    json_kv_u64(j, "client", t->c[MC_TXN_ABORT_CLIENT]);
    json_kv_u64(j, "other", t->c[MC_TXN_ABORT_OTHER]);
    json_obj_end(j);
    json_kv_u64(j, "lock_conflicts", t->c[MC_TXN_LOCK_CONFLICTS]);
    json_hist(j, "txn", &t->h[MH_TXN]);
    json_hist(j, "commit", &t->h[MH_COMMIT]);
    json_hist(j, "lock_wait", &t->h[MH_LOCK_WAIT]);
    json_hist(j, "log_sync", &t->h[MH_LOG_SYNC]);
    uint64_t lk[MA__COUNT] = {0}, fb[MP__COUNT] = {0};
    for (unsigned a = 0; a < METRICS_ALGOS; a++)
        for (unsigned k = 0; k < MA__COUNT; k++) lk[k] += t->algo[a][k];
    for (unsigned p = 0; p < METRICS_PEERS; p++)
        for (unsigned k = 0; k < MP__COUNT; k++) fb[k] += t->peer[p][k];
    json_kv_u64(j, "lock_acquires", lk[MA_ACQUIRES]);
    json_kv_u64(j, "lock_waits", lk[MA_WAITS]);
    json_kv_u64(j, "lock_resets", lk[MA_RESETS]);
    json_kv_u64(j, "fabric_ops", fb[MP_OPS]);
    json_kv_u64(j, "fabric_rpcs", fb[MP_RPCS]);
    json_kv_u64(j, "fabric_errors", fb[MP_ERRORS]);
    json_kv_u64(j, "log_bytes", t->c[MC_LOG_BYTES]);
    json_kv_u64(j, "log_syncs", t->c[MC_LOG_SYNCS]);
    uint64_t alloc, res;
    heap_stats(&alloc, &res);
    json_kv_u64(j, "malloc_allocated", alloc);
    free(t);
}

/* ------------------------------------------------------------------------------------------ */
/* HTTP */

struct metrics_http {
    struct MHD_Daemon *d;
    int fd; /* the listening socket, MHD's once it started */
    metrics_gauges_fn fn;
    void *arg;
    char address[300];
};

static enum MHD_Result respond(struct MHD_Connection *c, unsigned code, const char *text,
                               const char *type)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    if (code == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(r, "Allow", "GET, HEAD");
    enum MHD_Result ok = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_len, void **state)
{
    (void)version;
    (void)upload;
    struct metrics_http *h = cls;
    if (!*state) { /* the headers: answer once the request is whole */
        *state = h;
        return MHD_YES;
    }
    if (*upload_len) { /* a body: not read, not kept */
        *upload_len = 0;
        return MHD_YES;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
        return respond(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n", "text/plain");
    if (strcmp(url, "/metrics"))
        return respond(c, MHD_HTTP_NOT_FOUND, "rdkv serves /metrics only\n", "text/plain");
    struct metrics_gauges g;
    memset(&g, 0, sizeof g);
    h->fn(h->arg, &g);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m || metrics_write_text(m, &g)) {
        if (m) fclose(m);
        free(buf);
        return respond(c, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n", "text/plain");
    }
    fclose(m);
    struct MHD_Response *r = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(buf);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

static void mhd_log(void *arg, const char *fmt, va_list ap)
{
    (void)arg;
    char line[300];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && line[n - 1] == '\n') line[--n] = 0;
    log_warn("metrics server: %s", line);
}

int metrics_addr_parse(const char *s, char *host, size_t hostcap, uint16_t *port)
{
    char spec[300];
    if (strlen(s) + 10 > sizeof spec) return RDKV_EINVAL;
    snprintf(spec, sizeof spec, "%s%s", s[0] == ':' ? "127.0.0.1" : "", s);
    return parse_hostport(spec, host, hostcap, port, 1);
}

/* A listening socket on hostport: its fd, or -1 with the reason in err. */
static int listen_on(const char *hostport, char *addr, size_t addrcap, int *family, char *err,
                     size_t errcap)
{
    char host[256];
    uint16_t port;
    if (metrics_addr_parse(hostport, host, sizeof host, &port)) {
        snprintf(err, errcap, "--metrics '%s': want HOST:PORT, [IPV6]:PORT or :PORT", hostport);
        return -1;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char ps[8];
    snprintf(ps, sizeof ps, "%u", port);
    int g = getaddrinfo(host, ps, &hints, &ai);
    if (g || !ai) {
        snprintf(err, errcap, "--metrics '%s': %s", hostport, gai_strerror(g));
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd >= 0) (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, METRICS_HTTP_CONNS)) {
        snprintf(err, errcap, "--metrics '%s': %s", hostport, strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    *family = ai->ai_family;
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char hbuf[NI_MAXHOST] = "?", pbuf[NI_MAXSERV] = "?";
    if (!getsockname(fd, (struct sockaddr *)&ss, &sl))
        (void)getnameinfo((struct sockaddr *)&ss, sl, hbuf, sizeof hbuf, pbuf, sizeof pbuf,
                          NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf(addr, addrcap, *family == AF_INET6 ? "[%s]:%s" : "%s:%s", hbuf, pbuf);
    return fd;
}

int metrics_http_start(const char *hostport, metrics_gauges_fn fn, void *arg,
                       struct metrics_http **out, char *err, size_t errcap)
{
    struct metrics_http *h = calloc(1, sizeof *h);
    if (!h) return RDKV_ENOMEM;
    int family = AF_INET;
    h->fd = listen_on(hostport, h->address, sizeof h->address, &family, err, errcap);
    if (h->fd < 0) {
        free(h);
        return RDKV_EINVAL;
    }
    h->fn = fn;
    h->arg = arg;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
    if (family == AF_INET6) flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER,
                            mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET, h->fd,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)METRICS_HTTP_CONNS,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)METRICS_HTTP_PER_IP,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)METRICS_HTTP_IDLE_S,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16384, MHD_OPTION_END);
    if (!h->d) {
        snprintf(err, errcap, "--metrics '%s': the HTTP server did not start", hostport);
        close(h->fd);
        free(h);
        return RDKV_EIO;
    }
    *out = h;
    return 0;
}

const char *metrics_http_address(const struct metrics_http *h) { return h->address; }

void metrics_http_stop(struct metrics_http *h)
{
    if (!h) return;
    MHD_stop_daemon(h->d); /* (it closes the listening socket it was given too) */
    free(h);
}
