/* kvctl's reader of the cluster's status reply, with jansson (status.h). Every field read here is
 * one the node writes (server/node.c: node_cluster_status_json and node_status_json;
 * server/replica.c: replica_status_json), under the names docs/architecture.md, "Status", gives. */
#include "tools/kvctl/status.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where in the document a reader is ("nodes[1].status.replication"), and where errors go. */
struct rd {
    const char *where;
    char *err;
    size_t errcap;
};

static int fail(const struct rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(const struct rd *r, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (*r->where) snprintf(r->err, r->errcap, "%s: %s", r->where, why);
    else snprintf(r->err, r->errcap, "%s", why);
    return -1;
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* n zeroed items of size, or NULL after saying so in r's message. */
static void *zalloc(const struct rd *r, size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) fail(r, "out of memory for %zu items", n);
    return p;
}

/* A field that must be there and be of type t (JSON_OBJECT, JSON_ARRAY, JSON_STRING). */
static json_t *need(const struct rd *r, const json_t *obj, const char *key, json_type t)
{
    static const char *const want[] = {[JSON_OBJECT] = "an object", [JSON_ARRAY] = "an array",
                                       [JSON_STRING] = "a string"};
    json_t *v = json_object_get(obj, key);
    if (!v) fail(r, "no \"%s\"", key);
    else if (json_typeof(v) != t) fail(r, "\"%s\" is %s, not %s", key, type_name(v), want[t]);
    else return v;
    return NULL;
}

/* A whole number >= 0, v itself (what names it in messages). */
static int as_u64(const struct rd *r, const json_t *v, const char *what, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return fail(r, "%s is %s, not a whole number", what, type_name(v));
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* A field holding a whole number >= 0; has NULL: it must be there. */
static int get_u64(const struct rd *r, const json_t *obj, const char *key, uint64_t *out,
                   bool *has)
{
    json_t *v = json_object_get(obj, key);
    if (has) *has = v != NULL;
    if (!v) return has ? 0 : fail(r, "no \"%s\"", key);
    char what[64];
    snprintf(what, sizeof what, "\"%s\"", key);
    return as_u64(r, v, what, out);
}

/* An array of whole numbers into a new array. */
static int get_u64s(const struct rd *r, const json_t *obj, const char *key, uint64_t **out,
                    size_t *n)
{
    json_t *a = need(r, obj, key, JSON_ARRAY);
    if (!a) return -1;
    *n = json_array_size(a);
    if (!(*out = zalloc(r, *n, sizeof **out))) return -1;
    for (size_t i = 0; i < *n; i++) {
        char what[64];
        snprintf(what, sizeof what, "\"%s\"[%zu]", key, i);
        if (as_u64(r, json_array_get(a, i), what, &(*out)[i])) return -1;
    }
    return 0;
}

static int read_part(const struct rd *r, const json_t *p, struct st_part *out)
{
    if (!json_is_object(p)) return fail(r, "is %s, not an object", type_name(p));
    if (get_u64(r, p, "partition", &out->partition, NULL) ||
        get_u64s(r, p, "replicas", &out->replicas, &out->nreplicas) ||
        get_u64s(r, p, "filling", &out->filling, &out->nfilling))
        return -1;
    json_t *fill = json_object_get(p, "fill");
    if (!fill) return 0;
    if (!json_is_object(fill)) return fail(r, "\"fill\" is %s, not an object", type_name(fill));
    out->has_fill = true;
    char where[192];
    snprintf(where, sizeof where, "%s.fill", r->where);
    struct rd rf = {where, r->err, r->errcap};
    return get_u64(&rf, fill, "rows", &out->fill_rows, NULL) ||
                   get_u64(&rf, fill, "of", &out->fill_of, NULL)
               ? -1
               : 0;
}

/* A node's `replication`: `replicas`, `epoch`, `zookeeper` (null with one copy), `manager`
 * (null with one copy), and with ZooKeeper its `partitions`. */
static int read_repl(const struct rd *r, const json_t *rp, struct st_repl *out)
{
    out->present = true;
    if (get_u64(r, rp, "replicas", &out->replicas, NULL) ||
        get_u64(r, rp, "epoch", &out->epoch, NULL))
        return -1;
    json_t *zk = json_object_get(rp, "zookeeper"), *mgr = json_object_get(rp, "manager");
    if (!zk || !(json_is_null(zk) || json_is_string(zk)))
        return zk ? fail(r, "\"zookeeper\" is %s, not a string or null", type_name(zk))
                  : fail(r, "no \"zookeeper\"");
    if (!mgr || !(json_is_null(mgr) || json_is_boolean(mgr)))
        return mgr ? fail(r, "\"manager\" is %s, not a boolean or null", type_name(mgr))
                   : fail(r, "no \"manager\"");
    out->manager = json_is_true(mgr);
    if (json_is_null(zk)) return 0;
    out->zookeeper = json_string_value(zk);
    json_t *parts = need(r, rp, "partitions", JSON_ARRAY);
    if (!parts) return -1;
    out->nparts = json_array_size(parts);
    out->parts = zalloc(r, out->nparts, sizeof *out->parts);
    if (!out->parts) {
        out->nparts = 0;
        return -1;
    }
    for (size_t i = 0; i < out->nparts; i++) {
        char where[160];
        snprintf(where, sizeof where, "%s.partitions[%zu]", r->where, i);
        struct rd rpart = {where, r->err, r->errcap};
        if (read_part(&rpart, json_array_get(parts, i), &out->parts[i])) return -1;
    }
    return 0;
}

/* One entry of `nodes`: `node`, `address`, `state`, then `rows`, `heap_bytes`, `heap_used` and
 * `status` (its `replication`, and `metrics` when there) when it answered, or `error` when it
 * did not. */
static int read_node(const struct rd *r, const json_t *n, struct st_node *out)
{
    if (!json_is_object(n)) return fail(r, "is %s, not an object", type_name(n));
    json_t *addr = need(r, n, "address", JSON_STRING), *state;
    if (get_u64(r, n, "node", &out->node, NULL) || !addr ||
        !(state = need(r, n, "state", JSON_STRING)))
        return -1;
    out->address = json_string_value(addr);
    const char *s = json_string_value(state);
    if (strcmp(s, "up") && strcmp(s, "down"))
        return fail(r, "\"state\" is \"%.40s\", not \"up\" or \"down\"", s);
    out->up = !strcmp(s, "up");
    bool has_used;
    if (get_u64(r, n, "rows", &out->rows, &out->has_rows) ||
        get_u64(r, n, "heap_bytes", &out->heap_bytes, &out->has_heap) ||
        get_u64(r, n, "heap_used", &out->heap_used, &has_used))
        return -1;
    out->has_heap = out->has_heap && has_used;
    json_t *e = json_object_get(n, "error"), *st = json_object_get(n, "status");
    if (e && !json_is_string(e)) return fail(r, "\"error\" is %s, not a string", type_name(e));
    out->error = e ? json_string_value(e) : NULL;
    if (!st) return 0;
    if (!json_is_object(st)) return fail(r, "\"status\" is %s, not an object", type_name(st));
    char where[96];
    snprintf(where, sizeof where, "%s.status", r->where);
    struct rd rs = {where, r->err, r->errcap};
    json_t *rp = need(&rs, st, "replication", JSON_OBJECT);
    if (!rp) return -1;
    json_t *mx = json_object_get(st, "metrics"); /* (a node of an older version has none) */
    if (mx && !json_is_object(mx)) return fail(&rs, "\"metrics\" is %s, not an object", type_name(mx));
    out->metrics = mx;
    char wrepl[112];
    snprintf(wrepl, sizeof wrepl, "%s.replication", where);
    struct rd rr = {wrepl, r->err, r->errcap};
    return read_repl(&rr, rp, &out->repl);
}

static int read_nodes(const struct rd *r, const json_t *nodes, struct st_cluster *c)
{
    c->nodes = zalloc(r, json_array_size(nodes), sizeof *c->nodes);
    if (!c->nodes) return -1;
    c->n = json_array_size(nodes);
    for (size_t i = 0; i < c->n; i++) {
        char where[32];
        snprintf(where, sizeof where, "nodes[%zu]", i);
        struct rd rn = {where, r->err, r->errcap};
        if (read_node(&rn, json_array_get(nodes, i), &c->nodes[i])) return -1;
    }
    return 0;
}

int status_parse(const char *js, struct st_cluster *c, char *err, size_t errcap)
{
    memset(c, 0, sizeof *c);
    json_error_t je;
    c->doc = json_loads(js, JSON_REJECT_DUPLICATES, &je);
    if (!c->doc) {
        snprintf(err, errcap, "not JSON: %s (line %d, column %d)", je.text, je.line, je.column);
        return -1;
    }
    struct rd r = {"", err, errcap};
    json_t *nodes;
    if (!json_is_object(c->doc)) fail(&r, "the reply is %s, not an object", type_name(c->doc));
    else if (!get_u64(&r, c->doc, "coordinator", &c->coordinator, NULL) &&
             (nodes = need(&r, c->doc, "nodes", JSON_ARRAY)) && !read_nodes(&r, nodes, c))
        return 0;
    status_free(c);
    return -1;
}

void status_free(struct st_cluster *c)
{
    for (size_t i = 0; i < c->n; i++) {
        struct st_repl *rp = &c->nodes[i].repl;
        for (size_t k = 0; k < rp->nparts; k++) {
            free(rp->parts[k].replicas);
            free(rp->parts[k].filling);
        }
        free(rp->parts);
    }
    free(c->nodes);
    if (c->doc) json_decref(c->doc);
    memset(c, 0, sizeof *c);
}
