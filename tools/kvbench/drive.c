/* kvbench's side of the drivers (drive.h). */
#include "tools/kvbench/drive.h"

#include "common/clock.h"
#include "common/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LONG_RPC (6 * 3600 * NS_PER_S) /* loads and checks of big data sets */

int drive_open(struct drive *d, struct bench_cluster *bc, char *err, size_t errcap)
{
    memset(d, 0, sizeof *d);
    d->bc = bc;
    if (fab_ctx_create(bc->f, &d->c)) {
        snprintf(err, errcap, "cannot create a fabric context");
        return RDKV_ENOMEM;
    }
    size_t at = 0;
    for (unsigned i = 0; i < bc->cfg->n; i++)
        at += (size_t)snprintf(d->endpoints + at, at < sizeof d->endpoints ? sizeof d->endpoints - at : 0,
                               "%s%s:%u", i ? "," : "", bc->cfg->nodes[i].host,
                               bc->cfg->nodes[i].port);
    return 0;
}

void drive_close(struct drive *d)
{
    if (d->c) fab_ctx_destroy(d->c);
    d->c = NULL;
}

/* An answer of the node-side service: u32 status, then the body at r. */
static int answer(const struct fab_buf *b, struct pack_r *r)
{
    pack_r_init(r, b->data, b->len);
    int st = (int)unpack_u32(r);
    return r->err ? RDKV_EPROTO : st;
}

static void cls_cfg(struct pack_w *w, const struct drive_opts *o)
{
    pack_str(w, o->cls->name);
    pack_u32(w, o->cfg_len);
    uint8_t *p = pack_w_room(w, o->cfg_len);
    if (p) memcpy(p, o->cfg, o->cfg_len);
}

/* Sends one request per node (body built per node) and waits for every answer. */
static int fan_out(struct drive *d, uint16_t type, void (*build)(struct pack_w *, unsigned, void *),
                   void *arg, struct fab_buf *resp, int64_t timeout, char *err, size_t errcap)
{
    unsigned n = d->bc->cfg->n;
    int rc = 0;
    unsigned posted = 0;
    for (unsigned i = 0; i < n && !rc; i++) {
        struct pack_w w;
        pack_w_init(&w);
        build(&w, i, arg);
        rc = w.err ? RDKV_ENOMEM
                   : fab_rpc_post(d->c, (uint16_t)i, type, w.p, w.len, &resp[i], timeout, i);
        pack_w_free(&w);
        if (!rc) posted++;
    }
    int first = rc;
    while (posted) {
        struct fab_cqe e[16];
        int k = fab_wait(d->c, e, 16, -1);
        for (int j = 0; j < k; j++, posted--) {
            if (e[j].status && !first) {
                first = e[j].status;
                snprintf(err, errcap, "node %llu: %s", (unsigned long long)e[j].tag,
                         bench_strerror(e[j].status));
            }
        }
    }
    if (rc && !err[0]) snprintf(err, errcap, "%s", bench_strerror(rc));
    return first;
}

/* The first node whose answer is a failure: its status, and "<what> node N: <its reason>" in
 * err. 0 when every node said yes. */
static int first_refusal(const struct fab_buf *resp, unsigned n, const char *what, char *err,
                         size_t errcap)
{
    for (unsigned i = 0; i < n; i++) {
        struct pack_r r;
        int st = answer(&resp[i], &r);
        if (st) {
            char why[256];
            unpack_str(&r, why, sizeof why);
            snprintf(err, errcap, "%snode %u: %s", what, i, why[0] ? why : rdkv_strerror(st));
            return st;
        }
    }
    return 0;
}

struct load_arg {
    const struct drive_opts *o;
    unsigned n;
};
static void build_load(struct pack_w *w, unsigned i, void *arg)
{
    struct load_arg *a = arg;
    cls_cfg(w, a->o);
    pack_u32(w, i);
    pack_u32(w, a->n);
}

int drive_load(struct drive *d, const struct drive_opts *o, char *err, size_t errcap)
{
    unsigned n = d->bc->cfg->n;
    struct fab_buf *resp = calloc(n, sizeof *resp);
    if (!resp) return RDKV_ENOMEM;
    err[0] = 0;
    struct load_arg a = {o, n};
    int rc = fan_out(d, KV_RPC_WL_LOAD, build_load, &a, resp, LONG_RPC, err, errcap);
    if (!rc) rc = first_refusal(resp, n, "", err, errcap);
    for (unsigned i = 0; i < n; i++) fab_buf_free(&resp[i]);
    free(resp);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Status lines (YCSB's StatusThread format) */

static void status_line(const struct drive_opts *o, const struct wl_stats *iv, double since_start,
                        double interval_s, uint64_t total_ops)
{
    char ts[64];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    localtime_r(&now.tv_sec, &tm);
    size_t n = strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(ts + n, sizeof ts - n, ":%03ld", now.tv_nsec / 1000000);
    uint64_t ops = wl_stats_ops(iv);
    fprintf(stderr, "%s %.0f sec: %llu operations; %.1f current ops/sec;", ts, since_start,
            (unsigned long long)total_ops, interval_s > 0 ? (double)ops / interval_s : 0.0);
    if (since_start * 1e9 < (double)o->warmup_ns) fprintf(stderr, " (warm-up)");
    for (unsigned i = 0; i < iv->nops; i++) {
        const struct wl_opstat *s = &iv->op[i];
        if (!s->h.count && !s->errors) continue;
        const struct hist *h = &s->h;
        fprintf(stderr,
                " [%s: Count=%llu, Max=%.0f, Min=%.0f, Avg=%.2f, 90=%.0f, 99=%.0f, 99.9=%.0f, "
                "99.99=%.0f]",
                o->cls->op_names[i], (unsigned long long)h->count, h->max / 1e3,
                h->count ? h->min / 1e3 : 0.0, hist_mean(h) / 1e3,
                hist_percentile(h, 90) / 1e3, hist_percentile(h, 99) / 1e3,
                hist_percentile(h, 99.9) / 1e3, hist_percentile(h, 99.99) / 1e3);
        if (s->errors) fprintf(stderr, " [%s-FAILED: Count=%llu]", o->cls->op_names[i],
                               (unsigned long long)s->errors);
    }
    fputc('\n', stderr);
}

/* ------------------------------------------------------------------------------------------ */
/* Running */

struct start_arg {
    const struct drive_opts *o;
    unsigned n;
};
static void build_start(struct pack_w *w, unsigned i, void *arg)
{
    struct start_arg *a = arg;
    const struct drive_opts *o = a->o;
    struct wl_run_req q = {.threads = o->threads, .tasks = o->tasks, .nodes = a->n, .proc = i,
                           .nprocs = a->n,
                           .node = (int32_t)i, .warmup_ns = o->warmup_ns, .run_ns = o->run_ns,
                           .ops = o->ops ? o->ops / a->n + (i < o->ops % a->n) : 0,
                           .target = o->target / a->n, .seed = o->seed,
                           .lock_timeout_ns = o->lock_timeout_ns, .cfg_len = o->cfg_len,
                           .cfg = (uint8_t *)o->cfg};
    if (o->ops && !q.ops) q.ops = 1; /* fewer operations than nodes: one each */
    snprintf(q.cls, sizeof q.cls, "%s", o->cls->name);
    wl_run_req_pack(&q, w);
}
static void build_empty(struct pack_w *w, unsigned i, void *arg)
{
    (void)w, (void)i, (void)arg;
}

struct remote_arg {
    struct drive *d;
};
static int remote_session(void *arg, const struct wl_place *pl, const rdkv_options *o,
                          rdkv_session **out)
{
    struct drive *d = arg;
    const struct cluster_config *cc = d->bc->cfg;
    /* every node, starting with the coordinator (sessions take turns): one-shot operations go
     * straight to their key's owner */
    char ep[sizeof d->endpoints];
    size_t at = 0;
    for (unsigned k = 0; k < cc->n && at < sizeof ep; k++) {
        const struct cluster_node *nd = &cc->nodes[(pl->worker + k) % cc->n];
        at += (size_t)snprintf(ep + at, sizeof ep - at, "%s%s:%u", k ? "," : "", nd->host,
                               nd->port);
    }
    return rdkv_connect(ep, o, out);
}

/* How often kvbench looks at a running workload's workers (their results, and whether they
 * are done); status lines come every --status-interval. */
#define POLL_STEP_NS (100 * NS_PER_MS)

/* One KV_RPC_WL_POLL to every node still running: each one's interval is merged into iv, the
 * whole run of each that finished into total (and it is marked done). scratch: room for one
 * wl_stats. 0, or the first failure with its reason in err. */
static int poll_nodes(struct drive *d, struct fab_buf *resp, unsigned n, struct wl_stats *iv,
                      struct wl_stats *total, bool *done, unsigned *ndone,
                      struct wl_stats *scratch, char *err, size_t errcap)
{
    int rc = fan_out(d, KV_RPC_WL_POLL, build_empty, NULL, resp, 30 * NS_PER_S, err, errcap);
    for (unsigned i = 0; i < n && !rc; i++) {
        struct pack_r r;
        int st = answer(&resp[i], &r);
        if (st == RDKV_ENOTFOUND && done[i]) continue; /* finished earlier */
        if (st) {
            snprintf(err, errcap, "polling node %u: %s", i, rdkv_strerror(st));
            return st;
        }
        bool fin = unpack_u8(&r);
        if (!wl_stats_unpack(scratch, &r)) goto malformed;
        wl_stats_merge(iv, scratch);
        if (!fin) continue;
        if (!wl_stats_unpack(scratch, &r)) goto malformed;
        int st2 = (int)unpack_u32(&r);
        char why[160];
        unpack_str(&r, why, sizeof why);
        wl_stats_merge(total, scratch);
        done[i] = true;
        (*ndone)++;
        if (st2) {
            snprintf(err, errcap, "node %u: %s", i, why);
            rc = st2;
        }
        continue;
    malformed:
        snprintf(err, errcap, "node %u sent malformed statistics", i);
        return RDKV_EPROTO;
    }
    return rc;
}

int drive_run(struct drive *d, const struct drive_opts *o, struct wl_stats *total, char *err,
              size_t errcap)
{
    unsigned n = d->bc ? d->bc->cfg->n : 1;
    err[0] = 0;
    struct wl_stats *iv = malloc(3 * sizeof *iv);
    struct fab_buf *resp = calloc(n, sizeof *resp);
    if (!iv || !resp) {
        free(iv);
        free(resp);
        return RDKV_ENOMEM;
    }
    struct wl_run *run = NULL;
    int rc = 0;
    if (o->remote) {
        struct wl_run_req q = {.threads = o->threads, .tasks = o->tasks, .nodes = n, .proc = 0,
                               .nprocs = 1,
                               .node = -1, .warmup_ns = o->warmup_ns, .run_ns = o->run_ns,
                               .ops = o->ops, .target = o->target, .seed = o->seed,
                               .lock_timeout_ns = o->lock_timeout_ns, .cfg_len = o->cfg_len,
                               .cfg = (uint8_t *)o->cfg};
        snprintf(q.cls, sizeof q.cls, "%s", o->cls->name);
        rc = wl_run_start(&q, o->open ? o->open : remote_session, o->open ? o->open_arg : d, &run,
                          err, errcap);
    } else {
        struct start_arg a = {o, n};
        rc = fan_out(d, KV_RPC_WL_START, build_start, &a, resp, 60 * NS_PER_S, err, errcap);
        if (!rc) rc = first_refusal(resp, n, "starting ", err, errcap);
        if (rc) { /* stop the nodes that did start */
            char e2[64];
            fan_out(d, KV_RPC_WL_STOP, build_empty, NULL, resp, 10 * NS_PER_S, e2, sizeof e2);
        }
    }
    wl_stats_init(total, o->cls->nops);
    wl_stats_init(&iv[0], o->cls->nops);
    int64_t t0 = clock_now_ns(), last = t0;
    uint64_t ops_so_far = 0;
    bool *done = calloc(n, sizeof *done);
    unsigned ndone = 0;
    bool stopped = false, all = false;
    int64_t period = o->status_interval > 0 ? (int64_t)(o->status_interval * 1e9) : 0;
    /* Poll the workers every POLL_STEP (their results since the last poll accumulate in
     * iv[0]): the run ends when they do, not at the next status tick, and a status line goes
     * out every period and once more at the end, each over the time it covers. */
    while (!rc && done && !all) {
        if (bench_stop && !stopped) { /* Ctrl-C: end the run; its results are still reported */
            stopped = true;
            if (o->remote) wl_run_stop(run);
            else {
                char e2[64];
                fan_out(d, KV_RPC_WL_STOP, build_empty, NULL, resp, 10 * NS_PER_S, e2, sizeof e2);
            }
        }
        if (o->remote) {
            wl_run_poll(run, &iv[2], &all);
            wl_stats_merge(&iv[0], &iv[2]);
        } else {
            rc = poll_nodes(d, resp, n, &iv[0], total, done, &ndone, &iv[2], err, errcap);
            all = ndone == n;
        }
        int64_t now = clock_now_ns();
        if (period && (all || now - last >= period)) {
            ops_so_far += wl_stats_ops(&iv[0]);
            if (!all || wl_stats_ops(&iv[0])) /* (no empty line after the end) */
                status_line(o, &iv[0], (double)(now - t0) / 1e9, (double)(now - last) / 1e9,
                            ops_so_far);
            wl_stats_init(&iv[0], o->cls->nops);
            last = now;
        }
        if (!all && !rc) {
            int64_t wait = period ? last + period - now : POLL_STEP_NS;
            clock_sleep_ns(wait > 0 && wait < POLL_STEP_NS ? wait : POLL_STEP_NS);
        }
    }
    if (run) {
        char e2[256] = "";
        int r2 = wl_run_finish(run, total, e2, sizeof e2);
        if (r2 && !rc) {
            rc = r2;
            snprintf(err, errcap, "%s", e2);
        }
    }
    free(done);
    for (unsigned i = 0; i < n; i++) fab_buf_free(&resp[i]);
    free(resp);
    free(iv);
    return rc;
}

struct check_arg {
    const struct drive_opts *o;
    uint32_t part;
};
static void build_check(struct pack_w *w, const struct check_arg *a)
{
    cls_cfg(w, a->o);
    pack_u32(w, a->part);
}

int drive_check(struct drive *d, const struct drive_opts *o, const char *who, int *failed,
                char **report, char *err, size_t errcap)
{
    unsigned n = d->bc->cfg->n, parts = o->cls->check_parts(o->cfg, o->cfg_len);
    const char *what = o->cls->check_part_name;
    struct fab_buf *resp = calloc(n, sizeof *resp);
    struct wl_check *all = malloc(2 * sizeof *all);
    *report = NULL;
    err[0] = 0;
    if (!resp || !all) {
        free(resp);
        free(all);
        snprintf(err, errcap, "checking: out of memory");
        return RDKV_ENOMEM;
    }
    wl_check_init(&all[0]);
    fprintf(stderr, "%s: checking %u %s%s on %u node%s\n", who, parts, what, parts == 1 ? "" : "s",
            n < parts ? n : parts, (n < parts ? n : parts) == 1 ? "" : "s");
    /* part p is checked on node p mod n (where its data is), one part per node at a time */
    int rc = 0;
    unsigned posted = 0, done = 0;
    int64_t t0 = clock_now_ns(), shown = t0;
    for (unsigned p = 0; p < n && p < parts && !rc; p++) {
        struct pack_w w;
        pack_w_init(&w);
        build_check(&w, &(struct check_arg){o, p});
        rc = w.err ? RDKV_ENOMEM
                   : fab_rpc_post(d->c, (uint16_t)p, KV_RPC_WL_CHECK, w.p, w.len, &resp[p],
                                  LONG_RPC, p);
        pack_w_free(&w);
        if (rc) snprintf(err, errcap, "checking: %s", bench_strerror(rc));
        else posted++;
    }
    while (posted) {
        struct fab_cqe e;
        if (fab_wait(d->c, &e, 1, -1) != 1) continue;
        posted--;
        unsigned p = (unsigned)e.tag, node = p % n;
        struct pack_r r;
        int st = e.status ? e.status : answer(&resp[node], &r);
        if (st && !rc) {
            char why[256] = "";
            if (!e.status) unpack_str(&r, why, sizeof why);
            snprintf(err, errcap, "checking %s %u on node %u: %s", what, p, node,
                     why[0] ? why : bench_strerror(st));
            rc = st;
        } else if (!st && !rc) {
            if (!wl_check_unpack(&all[1], &r)) {
                snprintf(err, errcap, "checking: node %u sent a malformed result", node);
                rc = RDKV_EPROTO;
            } else {
                wl_check_merge(&all[0], &all[1]);
                done++;
            }
        }
        int64_t now = clock_now_ns();
        if (!rc && done < parts && now - shown >= NS_PER_S) {
            fprintf(stderr, "%s: checked %u of %u %ss (%.1f s)\n", who, done, parts, what,
                    (double)(now - t0) / 1e9);
            shown = now;
        }
        if (!rc && p + n < parts) { /* this node's next part */
            struct pack_w w;
            pack_w_init(&w);
            build_check(&w, &(struct check_arg){o, p + n});
            rc = w.err ? RDKV_ENOMEM
                       : fab_rpc_post(d->c, (uint16_t)node, KV_RPC_WL_CHECK, w.p, w.len,
                                      &resp[node], LONG_RPC, p + n);
            pack_w_free(&w);
            if (rc) snprintf(err, errcap, "checking: %s", bench_strerror(rc));
            else posted++;
        }
    }
    if (!rc) {
        fprintf(stderr, "%s: checked %u %s%s in %.1f s\n", who, parts, what, parts == 1 ? "" : "s",
                (double)(clock_now_ns() - t0) / 1e9);
        size_t cap = 64 * 1024;
        *report = calloc(1, cap);
        if (*report) *failed = o->cls->check_report(o->cfg, o->cfg_len, &all[0], *report, cap);
        else rc = RDKV_ENOMEM;
    }
    for (unsigned i = 0; i < n; i++) fab_buf_free(&resp[i]);
    free(resp);
    free(all);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Reports */

uint64_t drive_errors(const struct wl_stats *s)
{
    uint64_t e = 0;
    for (unsigned i = 0; i < s->nops; i++) e += s->op[i].errors;
    return e;
}

uint64_t drive_not_found(const struct wl_stats *s)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < s->nops; i++) n += s->op[i].not_found;
    return n;
}

/* What one operation cost: fabric round trips, RPCs, and context switches of the processes that
 * ran the workers (runner.h, struct wl_cost). */
static double per_step(const struct wl_stats *t, uint64_t n)
{
    return t->cost.steps ? (double)n / (double)t->cost.steps : 0;
}
static double csw_per_op(const struct wl_stats *t)
{
    return per_step(t, t->cost.csw_voluntary + t->cost.csw_involuntary);
}

static const double pcts[] = {50, 90, 95, 99, 99.9, 99.99};
static const char *const pct_names[] = {"50th", "90th", "95th", "99th", "99.9th", "99.99th"};
static const char *const pct_keys[] = {"p50_us", "p90_us", "p95_us", "p99_us", "p999_us", "p9999_us"};

void drive_report(FILE *out, const struct drive_opts *o, const struct wl_stats *t,
                  const char *const *kv, const char *check)
{
    double secs = (double)t->elapsed_ns / 1e9;
    uint64_t ops = 0, aborts = 0, commits = 0;
    for (unsigned i = 0; i < t->nops; i++) {
        ops += t->op[i].h.count;
        aborts += t->op[i].aborts;
        commits += t->op[i].ok;
    }
    if (o->fmt == DRIVE_JSON) {
        struct json j;
        json_init(&j, out, true);
        json_obj_begin(&j);
        json_key(&j, "run");
        json_obj_begin(&j);
        for (unsigned i = 0; kv && kv[i] && kv[i + 1]; i += 2) json_kv_str(&j, kv[i], kv[i + 1]);
        json_obj_end(&j);
        json_key(&j, "overall");
        json_obj_begin(&j);
        json_kv_double(&j, "runtime_ms", secs * 1e3);
        json_kv_double(&j, "ops_per_sec", secs > 0 ? (double)ops / secs : 0);
        json_kv_u64(&j, "commits", commits);
        json_kv_u64(&j, "aborts", aborts);
        json_kv_u64(&j, "errors", drive_errors(t));
        json_kv_u64(&j, "threads", o->threads);
        json_kv_u64(&j, "tasks_per_thread", o->tasks ? o->tasks : 1);
        json_kv_double(&j, "round_trips_per_op", per_step(t, t->cost.round_trips));
        json_kv_double(&j, "rpcs_per_op", per_step(t, t->cost.rpcs));
        json_kv_double(&j, "context_switches_per_op", csw_per_op(t));
        json_kv_u64(&j, "context_switches_voluntary", t->cost.csw_voluntary);
        json_kv_u64(&j, "context_switches_involuntary", t->cost.csw_involuntary);
        json_obj_end(&j);
        json_key(&j, "ops");
        json_obj_begin(&j);
        for (unsigned i = 0; i < t->nops; i++) {
            const struct wl_opstat *s = &t->op[i];
            if (!s->h.count && !s->errors) continue;
            json_key(&j, o->cls->op_names[i]);
            json_obj_begin(&j);
            json_kv_u64(&j, "count", s->h.count + s->errors);
            json_kv_double(&j, "ops_per_sec", secs > 0 ? (double)s->h.count / secs : 0);
            json_kv_double(&j, "mean_us", hist_mean(&s->h) / 1e3);
            json_kv_double(&j, "min_us", s->h.count ? s->h.min / 1e3 : 0.0);
            for (unsigned p = 0; p < 6; p++)
                json_kv_double(&j, pct_keys[p], hist_percentile(&s->h, pcts[p]) / 1e3);
            json_kv_double(&j, "max_us", s->h.max / 1e3);
            json_kv_u64(&j, "ok", s->ok);
            json_kv_u64(&j, "not_found", s->not_found);
            json_kv_u64(&j, "failed", s->errors);
            json_kv_u64(&j, "aborts", s->aborts);
            json_kv_u64(&j, "rolled_back", s->rolled_back);
            if (s->first_error) json_kv_str(&j, "first_error", rdkv_status_name(s->first_error));
            json_obj_end(&j);
        }
        json_obj_end(&j);
        if (check) json_kv_str(&j, "check", check);
        json_obj_end(&j);
        fputc('\n', out);
        return;
    }
    for (unsigned i = 0; kv && kv[i] && kv[i + 1]; i += 2) fprintf(out, "# %s: %s\n", kv[i], kv[i + 1]);
    const char *who = o->remote ? "kvbench (the client)" : "the nodes";
    if (o->fmt == DRIVE_CSV) {
        fprintf(out, "# tasks per thread: %u; round trips per op: %.2f; RPCs per op: %.2f; "
                     "context switches per op (%s): %.3f\n",
                o->tasks ? o->tasks : 1, per_step(t, t->cost.round_trips),
                per_step(t, t->cost.rpcs), who, csw_per_op(t));
        fprintf(out, "op,count,ops_per_sec,mean_us,min_us,p50_us,p90_us,p95_us,p99_us,p999_us,"
                     "p9999_us,max_us,ok,not_found,failed,aborts,rolled_back\n");
        for (unsigned i = 0; i < t->nops; i++) {
            const struct wl_opstat *s = &t->op[i];
            if (!s->h.count && !s->errors) continue;
            fprintf(out, "%s,%llu,%.1f,%.2f,%.2f", o->cls->op_names[i],
                    (unsigned long long)(s->h.count + s->errors),
                    secs > 0 ? (double)s->h.count / secs : 0, hist_mean(&s->h) / 1e3,
                    s->h.count ? s->h.min / 1e3 : 0.0);
            for (unsigned p = 0; p < 6; p++) fprintf(out, ",%.2f", hist_percentile(&s->h, pcts[p]) / 1e3);
            fprintf(out, ",%.2f,%llu,%llu,%llu,%llu,%llu\n", s->h.max / 1e3,
                    (unsigned long long)s->ok, (unsigned long long)s->not_found,
                    (unsigned long long)s->errors, (unsigned long long)s->aborts,
                    (unsigned long long)s->rolled_back);
        }
        for (const char *l = check; l && *l;) { /* the checks as comment lines */
            const char *e = strchr(l, '\n');
            int n = e ? (int)(e - l) : (int)strlen(l);
            fprintf(out, "# %.*s\n", n, l);
            l += n + (e ? 1 : 0);
        }
        return;
    }
    fprintf(out, "[OVERALL], RunTime(ms), %.0f\n", secs * 1e3);
    fprintf(out, "[OVERALL], Throughput(ops/sec), %.2f\n", secs > 0 ? (double)ops / secs : 0);
    fprintf(out, "[TXN], Commits, %llu\n", (unsigned long long)commits);
    fprintf(out, "[TXN], Aborts, %llu\n", (unsigned long long)aborts);
    fprintf(out, "[TXN], RetriesPerCommit, %.4f\n", commits ? (double)aborts / (double)commits : 0);
    fprintf(out, "[COST], TasksPerThread, %u\n", o->tasks ? o->tasks : 1);
    fprintf(out, "[COST], RoundTripsPerOp, %.2f\n", per_step(t, t->cost.round_trips));
    fprintf(out, "[COST], RPCsPerOp, %.2f\n", per_step(t, t->cost.rpcs));
    fprintf(out, "[COST], ContextSwitchesPerOp, %.3f (%s: %llu voluntary, %llu involuntary)\n",
            csw_per_op(t), who, (unsigned long long)t->cost.csw_voluntary,
            (unsigned long long)t->cost.csw_involuntary);
    for (unsigned i = 0; i < t->nops; i++) {
        const struct wl_opstat *s = &t->op[i];
        const char *nm = o->cls->op_names[i];
        if (!s->h.count && !s->errors) continue;
        const struct hist *h = &s->h;
        fprintf(out, "[%s], Operations, %llu\n", nm, (unsigned long long)(h->count + s->errors));
        fprintf(out, "[%s], Throughput(ops/sec), %.2f\n", nm, secs > 0 ? (double)h->count / secs : 0);
        fprintf(out, "[%s], AverageLatency(us), %.2f\n", nm, hist_mean(h) / 1e3);
        fprintf(out, "[%s], MinLatency(us), %.2f\n", nm, h->count ? h->min / 1e3 : 0.0);
        fprintf(out, "[%s], MaxLatency(us), %.2f\n", nm, h->max / 1e3);
        for (unsigned p = 0; p < 6; p++)
            fprintf(out, "[%s], %sPercentileLatency(us), %.2f\n", nm, pct_names[p],
                    hist_percentile(h, pcts[p]) / 1e3);
        fprintf(out, "[%s], Return=OK, %llu\n", nm, (unsigned long long)(s->ok - s->rolled_back));
        if (s->rolled_back)
            fprintf(out, "[%s], Return=ROLLED_BACK, %llu\n", nm, (unsigned long long)s->rolled_back);
        if (s->not_found)
            fprintf(out, "[%s], Return=NOT_FOUND, %llu\n", nm, (unsigned long long)s->not_found);
        if (s->errors)
            fprintf(out, "[%s], Return=ERROR, %llu (first: %s)\n", nm, (unsigned long long)s->errors,
                    rdkv_status_name(s->first_error));
        fprintf(out, "[%s], Aborts, %llu\n", nm, (unsigned long long)s->aborts);
    }
    if (check) fputs(check, out);
}

/* ------------------------------------------------------------------------------------------ */
/* --tasks sweeps */

void drive_sweep_add(struct drive_sweep *sw, const struct drive_opts *o, const struct wl_stats *t)
{
    if (sw->n == DRIVE_MAX_SWEEP) return;
    double secs = (double)t->elapsed_ns / 1e9;
    uint64_t ops = 0;
    for (unsigned i = 0; i < t->nops; i++) ops += t->op[i].h.count;
    struct drive_sweep_row *r = &sw->row[sw->n++];
    r->tasks = o->tasks ? o->tasks : 1;
    r->ops_s = secs > 0 ? (double)ops / secs : 0;
    r->csw = csw_per_op(t);
    r->rt = per_step(t, t->cost.round_trips);
    for (unsigned i = 0; i < t->nops && i < WL_MAX_OPS; i++) {
        r->count[i] = t->op[i].h.count;
        r->p50[i] = hist_percentile(&t->op[i].h, 50) / 1e3;
        r->p99[i] = hist_percentile(&t->op[i].h, 99) / 1e3;
    }
}

void drive_sweep_print(FILE *out, const struct drive_sweep *sw, const struct drive_opts *o)
{
    if (sw->n < 2) return;
    fprintf(out, "\n# --tasks sweep, one run each on the same nodes and data (ratios to K=%u)\n",
            sw->row[0].tasks);
    fprintf(out, "%6s %12s %7s %11s %7s", "tasks", "ops/s", "x", "switch/op", "RT/op");
    for (unsigned i = 0; i < o->cls->nops; i++)
        if (sw->row[0].count[i]) fprintf(out, "  %s p50/p99 us (p99 x)", o->cls->op_names[i]);
    fputc('\n', out);
    for (unsigned k = 0; k < sw->n; k++) {
        const struct drive_sweep_row *r = &sw->row[k];
        fprintf(out, "%6u %12.0f %7.2f %11.3f %7.2f", r->tasks, r->ops_s,
                sw->row[0].ops_s > 0 ? r->ops_s / sw->row[0].ops_s : 0, r->csw, r->rt);
        for (unsigned i = 0; i < o->cls->nops; i++)
            if (sw->row[0].count[i])
                fprintf(out, "  %.0f/%.0f (%.2f)", r->p50[i], r->p99[i],
                        sw->row[0].p99[i] > 0 ? r->p99[i] / sw->row[0].p99[i] : 0);
        fputc('\n', out);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Shared command-line options */

#include "common/parse.h"
#include "txn/txn.h" /* txn_conflict_parse */

const char drive_cli_help[] =
    "Cluster (one of):\n"
    "  --nodes N             start N local nodes for this run (default 3), load, run, stop them\n"
    "  --endpoints H:P[,...] a running cluster (tools/cluster.sh prints KVCTL_ENDPOINTS)\n"
    "  --config FILE         a running cluster's config file\n"
    "  --transport T         soft or verbs, for started nodes (default soft)\n"
    "  --arena SIZE          each started node's arena (default 1G)\n"
    "  --row-lock NAME       started nodes' row lock: rwlock (default), dslr, drtm, rof, trad,\n"
    "                        alock\n"
    "  --range-lock NAME     started nodes' range lock: combiner-rpc (default), combiner-rdma,\n"
    "                        itree\n"
    "  --lock-timeout DUR    started nodes: longest lock wait before an abort (default 100ms)\n"
    "  --drtm-lease DUR      started nodes, --row-lock drtm: a reader's lease (default 10ms)\n"
    "  --conflict P          started nodes' conflict policy: timeout (default), wait-die or\n"
    "                        no-wait\n"
    "Run:\n"
    "  --mode M              embedded (workers inside the nodes, default) or remote (workers\n"
    "                        here, each on its own rdkv_connect session)\n"
    "  --threads N           worker threads per node (embedded) or in all (remote) (default 2)\n"
    "  --tasks K[,K...]      workers per thread, each a task with its own session: a thread\n"
    "                        keeps up to K transactions in flight (default 1: the thread is\n"
    "                        the worker; remote sessions in tasks still wait one at a time);\n"
    "                        a list runs once per value on the same nodes and data, then\n"
    "                        prints a table of the runs side by side\n"
    "  --seconds S           measured time (default: until the operation count is done)\n"
    "  --warmup S            unmeasured time first (default 0)\n"
    "  --target OPS          open loop: this many operations per second in all, latency counted\n"
    "                        from each operation's intended start (default: closed loop)\n"
    "  --status-interval S   a YCSB status line on stderr every S seconds (default 10; 0: none)\n"
    "  --format F            text (YCSB's, default), json or csv\n"
    "  --seed N              random seed (default 1)\n";

void drive_cli_init(struct drive_cli *c)
{
    memset(c, 0, sizeof *c);
    bench_common_init(&c->co);
    c->co.nodes = 3;
    c->co.arena = 1ull << 30;
    c->o.threads = 2;
    c->o.tasks = 1;
    c->tasks_list[0] = 1;
    c->ntasks = 1;
    c->o.status_interval = 10;
    c->o.seed = 1;
}

int drive_cli_opt(struct drive_cli *c, const char *cmd, int argc, char **argv, int *i)
{
    const char *o = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (!strcmp(o, "--seconds")) c->seconds_given = true;
    if (bench_common_opt(&c->co, cmd, argc, argv, i)) return 1;
    uint64_t u;
    double dv;
    if (!strcmp(o, "--mode")) {
        if (!v || (strcmp(v, "embedded") && strcmp(v, "remote")))
            bench_usage_error(cmd, "--mode must be embedded or remote (got '%s')", v ? v : "");
        c->o.remote = !strcmp(v, "remote");
    } else if (!strcmp(o, "--threads")) {
        if (!v || parse_uint_range(v, 1, WL_MAX_THREADS, &u))
            bench_usage_error(cmd, "--threads must be 1..256 (got '%s')", v ? v : "");
        c->o.threads = (unsigned)u;
    } else if (!strcmp(o, "--tasks")) {
        c->ntasks = 0;
        char buf[128];
        snprintf(buf, sizeof buf, "%s", v ? v : "");
        char *save = NULL;
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (c->ntasks == DRIVE_MAX_SWEEP || parse_uint_range(t, 1, WL_MAX_TASKS, &u))
                bench_usage_error(cmd, "--tasks must be K or a list K,K,... of up to 8 values "
                                       "1..256 (got '%s')", v ? v : "");
            c->tasks_list[c->ntasks++] = (unsigned)u;
        }
        if (!c->ntasks) bench_usage_error(cmd, "--tasks needs a value (got '%s')", v ? v : "");
        c->o.tasks = c->tasks_list[0];
    } else if (!strcmp(o, "--warmup")) {
        if (!v || parse_double(v, &dv) || dv < 0 || dv > 86400)
            bench_usage_error(cmd, "--warmup needs seconds (got '%s')", v ? v : "");
        c->o.warmup_ns = (int64_t)(dv * 1e9);
    } else if (!strcmp(o, "--target")) {
        if (!v || parse_double(v, &dv) || !(dv > 0 && dv < 1e9))
            bench_usage_error(cmd, "--target needs operations per second (got '%s')", v ? v : "");
        c->o.target = dv;
    } else if (!strcmp(o, "--status-interval")) {
        if (!v || parse_double(v, &dv) || dv < 0 || dv > 86400)
            bench_usage_error(cmd, "--status-interval needs seconds (got '%s')", v ? v : "");
        c->o.status_interval = dv;
    } else if (!strcmp(o, "--format")) {
        if (!v || (strcmp(v, "text") && strcmp(v, "json") && strcmp(v, "csv")))
            bench_usage_error(cmd, "--format must be text, json or csv (got '%s')", v ? v : "");
        c->o.fmt = !strcmp(v, "json") ? DRIVE_JSON : !strcmp(v, "csv") ? DRIVE_CSV : DRIVE_TEXT;
    } else if (!strcmp(o, "--seed")) {
        if (!v || parse_u64(v, &u)) bench_usage_error(cmd, "--seed needs a number (got '%s')", v ? v : "");
        c->o.seed = u ? u : 1;
    } else if (!strcmp(o, "--row-lock")) {
        if (!v) bench_usage_error(cmd, "%s needs a name", o);
        c->row_lock = v;
    } else if (!strcmp(o, "--range-lock")) {
        if (!v) bench_usage_error(cmd, "%s needs a name", o);
        c->range_lock = v;
    } else if (!strcmp(o, "--lock-timeout")) {
        int64_t d;
        if (!v || parse_duration_ns(v, &d) || d <= 0)
            bench_usage_error(cmd, "--lock-timeout needs a duration such as 100ms (got '%s')", v ? v : "");
        c->node_lock_timeout = v;
    } else if (!strcmp(o, "--drtm-lease")) {
        int64_t d;
        if (!v || parse_duration_ns(v, &d) || d < NS_PER_US || d > 60 * NS_PER_S)
            bench_usage_error(cmd, "--drtm-lease needs a duration from 1us to 60s (got '%s')", v ? v : "");
        c->drtm_lease = v;
    } else if (!strcmp(o, "--conflict")) {
        if (!v || txn_conflict_parse(v) < 0)
            bench_usage_error(cmd, "--conflict must be wait-die, no-wait or timeout (got '%s')", v ? v : "");
        c->conflict = v;
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

void drive_cli_finish(struct drive_cli *c, const char *cmd)
{
    for (unsigned i = 0; i < c->ntasks; i++)
        if (c->o.threads * c->tasks_list[i] > WL_MAX_WORKERS)
            bench_usage_error(cmd, "--threads x --tasks must be at most %s", "4096");
    bool running = c->co.config || c->co.endpoints;
    if (c->co.config && c->co.endpoints) bench_usage_error(cmd, "give --config or --endpoints, not both%s", "");
    if (running && (c->row_lock || c->range_lock || c->node_lock_timeout || c->drtm_lease ||
                    c->conflict))
        bench_usage_error(cmd, "--row-lock, --range-lock, --lock-timeout and --conflict are set when nodes start; "
                               "a running cluster has its own (%s)", c->co.config ? c->co.config : c->co.endpoints);
    unsigned a = 0;
    if (c->row_lock) c->co.node_args[a++] = "--row-lock", c->co.node_args[a++] = c->row_lock;
    if (c->range_lock) c->co.node_args[a++] = "--range-lock", c->co.node_args[a++] = c->range_lock;
    if (c->node_lock_timeout)
        c->co.node_args[a++] = "--lock-timeout", c->co.node_args[a++] = c->node_lock_timeout;
    if (c->drtm_lease)
        c->co.node_args[a++] = "--drtm-lease", c->co.node_args[a++] = c->drtm_lease;
    if (c->conflict) c->co.node_args[a++] = "--conflict", c->co.node_args[a++] = c->conflict;
    c->co.node_args[a] = NULL;
    if (c->seconds_given) c->o.run_ns = (int64_t)(c->co.seconds * 1e9);
}
