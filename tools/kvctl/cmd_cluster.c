/* kvctl's cluster commands: status, the cluster's nodes as the coordinating node sees them
 * (its reply's format: docs/architecture.md, "Status"; read by status.c), and stats, the
 * nodes' counters from the same reply (docs/metrics.md). */
#include "tools/kvctl/kvctl.h"
#include "tools/kvctl/status.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* Fetches and reads the cluster's status: 0, or the exit status after saying why. *js is the
 * reply (malloc'd) either way, NULL when none came. */
static int fetch_status(char **js, struct st_cluster *c, bool *parsed)
{
    *js = NULL;
    *parsed = false;
    int rc = rdkv_cluster_status(S, js);
    if (rc) {
        status_err(rc, "status");
        return exit_code(rc);
    }
    char why[512];
    *parsed = status_parse(*js, c, why, sizeof why) == 0;
    if (!*parsed) {
        fprintf(stderr,
                "kvctl: error: status: the node's reply is not the status kvctl reads "
                "(docs/architecture.md, \"Status\"): %s\n",
                why);
        return EXIT_ERROR;
    }
    return 0;
}

int do_status(void)
{
    char *js;
    struct st_cluster c;
    bool parsed;
    int bad = fetch_status(&js, &c, &parsed);
    if (!js) return bad;
    struct buf o = {0}, errs = {0};
    int down = 0;
    if (parsed) {
        down = print_status_table(&c, &o, &errs);
        status_free(&c);
    }
    if (G.out == OUT_JSON || !parsed) {
        fputs(js, stdout);
        if (!*js || js[strlen(js) - 1] != '\n') putchar('\n');
    } else {
        fwrite(o.p, 1, o.len, stdout);
    }
    int ex = flush_stdout();
    if (bad) ex = bad;
    if (errs.len) fputs(errs.p, stderr);
    if (!ex && down) {
        fprintf(stderr, "kvctl: %d node%s down\n", down, down == 1 ? " is" : "s are");
        ex = EXIT_UNAVAILABLE;
    }
    free(js);
    buf_free(&o);
    buf_free(&errs);
    return ex;
}

int cmd_status(struct inv *iv)
{
    int rc = want_args(iv, 0, 0, "no arguments");
    if (rc) return rc;
    if ((rc = connect_session())) return rc;
    return do_status();
}

/* ---------------------------------------------------------------------------------------------
 * stats: one row per counter, one column per node, and the cluster's total (the largest, for a
 * percentile). The rows are the node's `metrics` object (docs/architecture.md, "Status"). */

enum stat_kind { SK_COUNT, SK_BYTES, SK_NS };
static const struct stat_row {
    const char *label, *key, *sub; /* metrics[key] or metrics[key][sub] */
    enum stat_kind kind;
} stat_rows[] = {
    {"commits", "commits", NULL, SK_COUNT},
    {"commits unknown", "commits_unknown", NULL, SK_COUNT},
    {"aborts: conflict", "aborts", "conflict", SK_COUNT},
    {"aborts: unavailable", "aborts", "unavailable", SK_COUNT},
    {"aborts: client", "aborts", "client", SK_COUNT},
    {"aborts: other", "aborts", "other", SK_COUNT},
    {"txn p50", "txn", "p50_ns", SK_NS},
    {"txn p99", "txn", "p99_ns", SK_NS},
    {"commit p99", "commit", "p99_ns", SK_NS},
    {"lock acquires", "lock_acquires", NULL, SK_COUNT},
    {"lock waits", "lock_waits", NULL, SK_COUNT},
    {"lock wait p99", "lock_wait", "p99_ns", SK_NS},
    {"lock conflicts", "lock_conflicts", NULL, SK_COUNT},
    {"lock resets", "lock_resets", NULL, SK_COUNT},
    {"fabric ops", "fabric_ops", NULL, SK_COUNT},
    {"fabric rpcs", "fabric_rpcs", NULL, SK_COUNT},
    {"fabric errors", "fabric_errors", NULL, SK_COUNT},
    {"log bytes", "log_bytes", NULL, SK_BYTES},
    {"log syncs", "log_syncs", NULL, SK_COUNT},
    {"log sync p99", "log_sync", "p99_ns", SK_NS},
    {"malloc", "malloc_allocated", NULL, SK_BYTES},
};
#define NSTAT_ROWS (sizeof stat_rows / sizeof stat_rows[0])

/* The row's value at node n: 1 (in *v), 0 when the node has none, -1 with a message when the
 * field is there but not a non-negative integer. */
static int stat_value(const struct st_node *n, const struct stat_row *r, uint64_t *v)
{
    if (!n->metrics) return 0;
    json_t *x = json_object_get(n->metrics, r->key);
    if (x && r->kind == SK_NS && json_is_object(x)) { /* an empty histogram has no percentile */
        json_t *count = json_object_get(x, "count");
        if (json_is_integer(count) && json_integer_value(count) == 0) return 0;
    }
    if (x && r->sub) x = json_is_object(x) ? json_object_get(x, r->sub) : x;
    if (!x) return 0;
    if (!json_is_integer(x) || json_integer_value(x) < 0) {
        fprintf(stderr, "kvctl: error: stats: node %" PRIu64 "'s metrics.%s%s%s is not a count\n",
                n->node, r->key, r->sub ? "." : "", r->sub ? r->sub : "");
        return -1;
    }
    *v = (uint64_t)json_integer_value(x);
    return 1;
}

static void stat_cell(char *out, size_t cap, enum stat_kind k, uint64_t v)
{
    if (k == SK_BYTES) fmt_bytes(out, cap, (double)v);
    else if (k == SK_NS) fmt_ns(out, cap, v > INT64_MAX ? INT64_MAX : (int64_t)v);
    else snprintf(out, cap, "%" PRIu64, v);
}

/* The table into o; 0, or -1 after a bad field. */
static int print_stats(const struct st_cluster *c, struct buf *o)
{
    buf_printf(o, "%-20s", "");
    for (size_t i = 0; i < c->n; i++) {
        char h[32];
        snprintf(h, sizeof h, "node %" PRIu64 "%s", c->nodes[i].node,
                 c->nodes[i].node == c->coordinator ? "*" : "");
        buf_printf(o, " %12s", h);
    }
    buf_printf(o, " %12s\n", "total");
    for (size_t r = 0; r < NSTAT_ROWS; r++) {
        const struct stat_row *row = &stat_rows[r];
        uint64_t sum = 0;
        bool any = false;
        buf_printf(o, "%-20s", row->label);
        for (size_t i = 0; i < c->n; i++) {
            uint64_t v = 0;
            char cell[32] = "-";
            int got = stat_value(&c->nodes[i], row, &v);
            if (got < 0) return -1;
            if (got) {
                stat_cell(cell, sizeof cell, row->kind, v);
                sum = row->kind == SK_NS ? (v > sum ? v : sum) : sum + v;
                any = true;
            }
            buf_printf(o, " %12s", cell);
        }
        char tot[32] = "-";
        if (any) stat_cell(tot, sizeof tot, row->kind, sum);
        buf_printf(o, " %12s\n", tot);
    }
    buf_puts(o, "(* the node that answered; counts since each node started; a percentile is the upper\n"
                " bound of its histogram bucket, and its total the largest node's)\n");
    return 0;
}

/* -w json: {"coordinator": N, "nodes": [{"node", "address", "state", "metrics"}...]} */
static int print_stats_json(const struct st_cluster *c)
{
    json_t *doc = json_object(), *arr = json_array();
    if (!doc || !arr) return EXIT_ERROR;
    json_object_set_new(doc, "coordinator", json_integer((json_int_t)c->coordinator));
    for (size_t i = 0; i < c->n; i++) {
        const struct st_node *n = &c->nodes[i];
        json_t *e = json_object();
        json_object_set_new(e, "node", json_integer((json_int_t)n->node));
        json_object_set_new(e, "address", json_string(n->address));
        json_object_set_new(e, "state", json_string(n->up ? "up" : "down"));
        json_object_set(e, "metrics", n->metrics ? n->metrics : json_null());
        json_array_append_new(arr, e);
    }
    json_object_set_new(doc, "nodes", arr);
    char *txt = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    if (!txt) return EXIT_ERROR;
    puts(txt);
    free(txt);
    return 0;
}

int cmd_stats(struct inv *iv)
{
    int rc = want_args(iv, 0, 0, "no arguments");
    if (rc) return rc;
    if ((rc = connect_session())) return rc;
    return do_stats();
}

int do_stats(void)
{
    char *js;
    struct st_cluster c;
    bool parsed;
    int ex = fetch_status(&js, &c, &parsed);
    free(js);
    if (!parsed) return ex;
    struct buf o = {0};
    if (G.out == OUT_JSON) ex = print_stats_json(&c);
    else if (print_stats(&c, &o)) ex = EXIT_ERROR;
    else fwrite(o.p, 1, o.len, stdout);
    int down = 0;
    for (size_t i = 0; i < c.n; i++)
        if (!c.nodes[i].up) {
            down++;
            fprintf(stderr, "kvctl: node %" PRIu64 " (%s) is down: no counters from it\n",
                    c.nodes[i].node, c.nodes[i].address);
        }
    status_free(&c);
    buf_free(&o);
    int fl = flush_stdout();
    if (!ex) ex = fl;
    if (!ex && down) ex = EXIT_UNAVAILABLE;
    return ex;
}
