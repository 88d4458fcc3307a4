/* The register-history serializability checker: see histcheck.h for what it promises. */
#include "tests/txn/histcheck.h"

#include "rdkv_status.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

enum { E_WW = 1, E_WR = 2, E_RW = 4 };

/* A written value: who wrote it, to which key, whether it is the writer's final write of the key,
 * and the head of the list of committed transactions that installed a successor of it. */
struct slot {
    uint64_t value; /* 0: empty */
    uint32_t txn, key, succ;
    uint8_t final;
};

struct xread { /* a transaction's first read of a key before writing it */
    uint32_t key;
    uint64_t value;
};

struct install { /* a transaction's final write of a key, and the version it overwrote */
    uint32_t key;
    uint64_t value, pred;
};

struct edge {
    uint32_t from, to;
    uint8_t type;
};

struct graph {
    uint32_t n;
    size_t *off; /* n + 1 */
    uint32_t *to;
    uint8_t *type;
};

struct tarjan {
    uint32_t *index, *low, *stack, *callv;
    size_t *calle;
    uint8_t *onstack;
    uint32_t next_comp; /* component ids are never reused, so stale ids never collide */
};

struct checker {
    const struct hist_txn *txns;
    size_t n;
    uint32_t nkeys;
    struct histcheck_report *out;
    struct slot *slots;
    uint64_t mask; /* slot count - 1 */
    struct xread *xr;
    struct install *in;
    size_t *xr_off, *in_off, nxr, nin;
    uint32_t *bad_count, *bad_op; /* per txn: reads that disagree with the txn's own earlier ops */
    uint8_t *eff;                 /* per txn: checked as committed */
    uint32_t *node, *txn_of;      /* txn -> graph node, node -> txn */
    uint32_t *zero_succ, *succ_next, *succ_txn, nsucc;
    struct edge *edges;
    size_t nedges, cap_edges;
};

static void note(struct histcheck_report *out, const char *fmt, ...)
{
    if (out->first[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->first, sizeof out->first, fmt, ap);
    va_end(ap);
}

static uint64_t hash_u64(uint64_t v)
{
    v ^= v >> 33;
    v *= 0xff51afd7ed558ccdull;
    v ^= v >> 33;
    return v;
}

static struct slot *slot_find(const struct checker *c, uint64_t v)
{
    for (uint64_t i = hash_u64(v) & c->mask;; i = (i + 1) & c->mask) {
        if (c->slots[i].value == v) return &c->slots[i];
        if (c->slots[i].value == 0) return NULL;
    }
}

/* Returns the new slot, or NULL when the value is already there. */
static struct slot *slot_insert(struct checker *c, uint64_t v)
{
    uint64_t i = hash_u64(v) & c->mask;
    for (; c->slots[i].value != 0; i = (i + 1) & c->mask)
        if (c->slots[i].value == v) return NULL;
    c->slots[i].value = v;
    c->slots[i].succ = NONE;
    return &c->slots[i];
}

static const char *txn_name(const struct checker *c, uint32_t t, char *buf, size_t len)
{
    snprintf(buf, len, "T%" PRIu64, c->txns[t].id);
    return buf;
}

/* Pass 1: validates, indexes every written value, and extracts each transaction's external reads
 * and installed versions. */
static int scan(struct checker *c)
{
    size_t nops = 0, nwrites = 0;
    for (size_t i = 0; i < c->n; i++) {
        const struct hist_txn *t = &c->txns[i];
        if (t->status < HIST_COMMITTED || t->status > HIST_UNKNOWN) {
            note(c->out, "T%" PRIu64 ": bad status %u", t->id, t->status);
            return RDKV_EINVAL;
        }
        if (t->nops && !t->ops) {
            note(c->out, "T%" PRIu64 ": no ops array", t->id);
            return RDKV_EINVAL;
        }
        nops += t->nops;
        for (uint32_t j = 0; j < t->nops; j++) nwrites += t->ops[j].kind == HIST_WRITE;
    }
    size_t cap = 16;
    while (cap < 2 * nwrites + 1) cap *= 2;
    c->mask = cap - 1;
    c->slots = calloc(cap, sizeof *c->slots);
    c->xr = malloc((nops + 1) * sizeof *c->xr);
    c->in = malloc((nops + 1) * sizeof *c->in);
    c->xr_off = malloc((c->n + 1) * sizeof *c->xr_off);
    c->in_off = malloc((c->n + 1) * sizeof *c->in_off);
    c->bad_count = calloc(c->n + 1, sizeof *c->bad_count);
    c->bad_op = calloc(c->n + 1, sizeof *c->bad_op);
    uint32_t *stamp = calloc(c->nkeys ? c->nkeys : 1, sizeof *stamp);
    uint32_t *touched = malloc((nops + 1) * sizeof *touched);
    struct kstate {
        bool read, wrote;
        uint64_t read_val, write_val;
        struct slot *last;
    } *ks = malloc((c->nkeys ? c->nkeys : 1) * sizeof *ks);
    int rc = 0;
    if (!c->slots || !c->xr || !c->in || !c->xr_off || !c->in_off || !c->bad_count || !c->bad_op ||
        !stamp || !touched || !ks) {
        rc = RDKV_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < c->n && rc == 0; i++) {
        const struct hist_txn *t = &c->txns[i];
        size_t ntouched = 0;
        c->xr_off[i] = c->nxr;
        c->in_off[i] = c->nin;
        for (uint32_t j = 0; j < t->nops; j++) {
            const struct hist_op *op = &t->ops[j];
            uint32_t k = op->key;
            if (op->kind != HIST_READ && op->kind != HIST_WRITE) {
                note(c->out, "T%" PRIu64 " op %u: bad kind %u", t->id, j, op->kind);
                rc = RDKV_EINVAL;
                break;
            }
            if (k >= c->nkeys) {
                note(c->out, "T%" PRIu64 " op %u: key %u >= nkeys %u", t->id, j, k, c->nkeys);
                rc = RDKV_EINVAL;
                break;
            }
            struct kstate *s = &ks[k];
            if (stamp[k] != i + 1) {
                stamp[k] = (uint32_t)(i + 1);
                s->read = s->wrote = false;
                touched[ntouched++] = k;
            }
            if (op->kind == HIST_READ) {
                uint64_t want = s->wrote ? s->write_val : s->read_val;
                if ((s->wrote || s->read) && op->value != want) {
                    if (c->bad_count[i]++ == 0) c->bad_op[i] = j;
                } else if (!s->read && !s->wrote) {
                    s->read = true;
                    s->read_val = op->value;
                    c->xr[c->nxr++] = (struct xread){k, op->value};
                }
                continue;
            }
            if (op->value == 0) {
                note(c->out, "T%" PRIu64 " op %u: writes 0 to key %u", t->id, j, k);
                rc = RDKV_EINVAL;
                break;
            }
            if (!s->read && !s->wrote) {
                note(c->out, "T%" PRIu64 " op %u: writes key %u without reading it first", t->id, j,
                     k);
                rc = RDKV_EINVAL;
                break;
            }
            struct slot *sl = slot_insert(c, op->value);
            if (!sl) {
                note(c->out, "T%" PRIu64 " op %u: value %" PRIu64 " written twice", t->id, j,
                     op->value);
                rc = RDKV_EINVAL;
                break;
            }
            sl->txn = (uint32_t)i;
            sl->key = k;
            sl->final = 1;
            if (s->wrote) s->last->final = 0;
            s->wrote = true;
            s->write_val = op->value;
            s->last = sl;
        }
        for (size_t j = 0; j < ntouched; j++) {
            struct kstate *s = &ks[touched[j]];
            if (s->wrote) c->in[c->nin++] = (struct install){touched[j], s->write_val, s->read_val};
        }
    }
    c->xr_off[c->n] = c->nxr;
    c->in_off[c->n] = c->nin;
done:
    free(stamp);
    free(touched);
    free(ks);
    return rc;
}

/* Pass 2: committed txns, plus UNKNOWN ones whose writes a checked txn read (transitively). */
static int promote(struct checker *c)
{
    c->eff = calloc(c->n + 1, 1);
    uint32_t *work = malloc((c->n + 1) * sizeof *work);
    if (!c->eff || !work) {
        free(work);
        return RDKV_ENOMEM;
    }
    size_t top = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->txns[i].status == HIST_COMMITTED) c->eff[i] = 1, work[top++] = (uint32_t)i;
    while (top > 0) {
        uint32_t t = work[--top];
        for (size_t r = c->xr_off[t]; r < c->xr_off[t + 1]; r++) {
            struct slot *s = c->xr[r].value ? slot_find(c, c->xr[r].value) : NULL;
            if (s && !c->eff[s->txn] && c->txns[s->txn].status == HIST_UNKNOWN) {
                c->eff[s->txn] = 1;
                c->out->unknown_promoted++;
                work[top++] = s->txn;
            }
        }
    }
    free(work);
    for (size_t i = 0; i < c->n; i++) {
        if (c->txns[i].status == HIST_UNKNOWN && !c->eff[i]) c->out->unknown_dropped++;
        c->out->txns_checked += c->eff[i];
    }
    return 0;
}

static int edge_add(struct checker *c, uint32_t from_txn, uint32_t to_txn, uint8_t type)
{
    if (c->nedges == c->cap_edges) {
        size_t cap = c->cap_edges ? 2 * c->cap_edges : 1024;
        struct edge *e = realloc(c->edges, cap * sizeof *e);
        if (!e) return RDKV_ENOMEM;
        c->edges = e;
        c->cap_edges = cap;
    }
    c->edges[c->nedges++] = (struct edge){c->node[from_txn], c->node[to_txn], type};
    return 0;
}

/* Pass 3: successor lists (lost updates), G1a, G1b, incompatible reads, and the edges. */
static int edges_build(struct checker *c)
{
    char a[32], b[32];
    c->zero_succ = malloc((c->nkeys ? c->nkeys : 1) * sizeof *c->zero_succ);
    c->succ_next = malloc((c->nin + 1) * sizeof *c->succ_next);
    c->succ_txn = malloc((c->nin + 1) * sizeof *c->succ_txn);
    if (!c->zero_succ || !c->succ_next || !c->succ_txn) return RDKV_ENOMEM;
    for (uint32_t k = 0; k < c->nkeys; k++) c->zero_succ[k] = NONE;
    for (size_t t = 0; t < c->n; t++) {
        if (!c->eff[t]) continue;
        for (size_t w = c->in_off[t]; w < c->in_off[t + 1]; w++) {
            const struct install *in = &c->in[w];
            uint32_t *head = &c->zero_succ[in->key];
            if (in->pred) {
                struct slot *s = slot_find(c, in->pred);
                if (!s || s->key != in->key) continue; /* the read is reported below */
                head = &s->succ;
            }
            if (*head != NONE) {
                c->out->incompatible++;
                note(c->out, "lost update: %s and %s both overwrote key %u = %" PRIu64,
                     txn_name(c, c->succ_txn[*head], a, sizeof a),
                     txn_name(c, (uint32_t)t, b, sizeof b), in->key, in->pred);
            }
            c->succ_txn[c->nsucc] = (uint32_t)t;
            c->succ_next[c->nsucc] = *head;
            *head = c->nsucc++;
        }
    }
    for (size_t t32 = 0; t32 < c->n; t32++) {
        uint32_t t = (uint32_t)t32;
        if (!c->eff[t]) continue;
        if (c->bad_count[t]) {
            const struct hist_op *op = &c->txns[t].ops[c->bad_op[t]];
            c->out->incompatible += c->bad_count[t];
            note(c->out, "%s op %u reads key %u = %" PRIu64 ", not what it read or wrote before",
                 txn_name(c, t, a, sizeof a), c->bad_op[t], op->key, op->value);
        }
        for (size_t r = c->xr_off[t]; r < c->xr_off[t + 1]; r++) {
            uint32_t k = c->xr[r].key, head = c->zero_succ[k];
            uint64_t v = c->xr[r].value;
            if (v) {
                struct slot *s = slot_find(c, v);
                const char *why = !s            ? "which no transaction wrote"
                                  : s->key != k ? "a value written to another key"
                                  : s->txn == t ? "before writing it itself"
                                                : NULL;
                if (why) {
                    c->out->incompatible++;
                    note(c->out, "%s reads key %u = %" PRIu64 ", %s", txn_name(c, t, a, sizeof a),
                         k, v, why);
                    continue;
                }
                if (c->txns[s->txn].status == HIST_ABORTED) {
                    c->out->g1a++;
                    note(c->out, "G1a: %s reads key %u = %" PRIu64 ", written by aborted %s",
                         txn_name(c, t, a, sizeof a), k, v, txn_name(c, s->txn, b, sizeof b));
                } else if (!s->final) {
                    c->out->g1b++;
                    note(c->out, "G1b: %s reads key %u = %" PRIu64 ", an intermediate write of %s",
                         txn_name(c, t, a, sizeof a), k, v, txn_name(c, s->txn, b, sizeof b));
                }
                if (c->eff[s->txn] && edge_add(c, s->txn, t, E_WR)) return RDKV_ENOMEM;
                head = s->succ;
            }
            for (uint32_t x = head; x != NONE; x = c->succ_next[x])
                if (c->succ_txn[x] != t && edge_add(c, t, c->succ_txn[x], E_RW)) return RDKV_ENOMEM;
        }
        for (size_t w = c->in_off[t]; w < c->in_off[t + 1]; w++) {
            if (!c->in[w].pred) continue;
            struct slot *s = slot_find(c, c->in[w].pred);
            if (s && s->key == c->in[w].key && c->eff[s->txn] && s->txn != t &&
                edge_add(c, s->txn, t, E_WW))
                return RDKV_ENOMEM;
        }
    }
    return 0;
}

/* Iterative Tarjan over the nodes (all of 0..nn-1 when nodes is NULL) whose scope is sid (all
 * when scope is NULL), following edges whose type is in mask. Writes comp[] for those nodes and
 * returns a node of a component with two or more nodes, or NONE. */
static uint32_t tarjan_run(const struct graph *g, struct tarjan *tj, const uint32_t *nodes,
                           uint32_t nn, const uint32_t *scope, uint32_t sid, uint8_t mask,
                           uint32_t *comp)
{
    uint32_t found = NONE, counter = 0, sp = 0, csp = 0;
    for (uint32_t i = 0; i < nn; i++) tj->index[nodes ? nodes[i] : i] = NONE;
    for (uint32_t i = 0; i < nn; i++) {
        uint32_t root = nodes ? nodes[i] : i;
        if (tj->index[root] != NONE) continue;
        tj->index[root] = tj->low[root] = counter++;
        tj->stack[sp++] = root;
        tj->onstack[root] = 1;
        tj->callv[csp] = root;
        tj->calle[csp++] = g->off[root];
        while (csp > 0) {
            uint32_t v = tj->callv[csp - 1];
            size_t e = tj->calle[csp - 1];
            if (e < g->off[v + 1]) {
                tj->calle[csp - 1]++;
                uint32_t w = g->to[e];
                if (!(g->type[e] & mask) || (scope && scope[w] != sid)) continue;
                if (tj->index[w] == NONE) {
                    tj->index[w] = tj->low[w] = counter++;
                    tj->stack[sp++] = w;
                    tj->onstack[w] = 1;
                    tj->callv[csp] = w;
                    tj->calle[csp++] = g->off[w];
                } else if (tj->onstack[w] && tj->index[w] < tj->low[v]) {
                    tj->low[v] = tj->index[w];
                }
                continue;
            }
            csp--;
            if (csp > 0) {
                uint32_t u = tj->callv[csp - 1];
                if (tj->low[v] < tj->low[u]) tj->low[u] = tj->low[v];
            }
            if (tj->low[v] != tj->index[v]) continue;
            uint32_t id = tj->next_comp++, size = 0, w;
            do {
                w = tj->stack[--sp];
                tj->onstack[w] = 0;
                comp[w] = id;
                size++;
            } while (w != v);
            if (size > 1 && found == NONE) found = v;
        }
    }
    return found;
}

/* Describes a shortest cycle through rep among nodes whose scope is sid, along edges in mask. */
static int cycle_describe(const struct checker *c, const struct graph *g, const char *kind,
                          uint32_t rep, const uint32_t *scope, uint32_t sid, uint8_t mask)
{
    static const char *const names[] = {"", "ww", "wr", "", "rw"};
    uint32_t *parent = malloc(g->n * sizeof *parent), *queue = malloc(g->n * sizeof *queue);
    uint8_t *ptype = malloc(g->n), *seen = calloc(g->n, 1);
    if (!parent || !queue || !ptype || !seen) {
        free(parent), free(queue), free(ptype), free(seen);
        return RDKV_ENOMEM;
    }
    uint32_t head = 0, tail = 0, last = NONE;
    uint8_t last_type = 0;
    queue[tail++] = rep;
    seen[rep] = 1;
    while (head < tail && last == NONE) {
        uint32_t x = queue[head++];
        for (size_t e = g->off[x]; e < g->off[x + 1]; e++) {
            uint32_t y = g->to[e];
            if (!(g->type[e] & mask) || scope[y] != sid) continue;
            if (y == rep) {
                last = x, last_type = g->type[e];
                break;
            }
            if (!seen[y]) seen[y] = 1, parent[y] = x, ptype[y] = g->type[e], queue[tail++] = y;
        }
    }
    /* walk back from last to rep, then print forwards */
    uint32_t len = 0;
    for (uint32_t x = last; x != rep && x != NONE; x = parent[x]) queue[len++] = x;
    char *p = c->out->first, *end = p + sizeof c->out->first;
    p += snprintf(p, (size_t)(end - p), "%s: T%" PRIu64, kind, c->txns[c->txn_of[rep]].id);
    for (uint32_t i = len; i-- > 0 && p < end;) {
        uint32_t x = queue[i];
        p += snprintf(p, (size_t)(end - p), " -%s-> T%" PRIu64, names[ptype[x]],
                      c->txns[c->txn_of[x]].id);
    }
    if (p < end && last != NONE)
        snprintf(p, (size_t)(end - p), " -%s-> T%" PRIu64, names[last_type],
                 c->txns[c->txn_of[rep]].id);
    free(parent), free(queue), free(ptype), free(seen);
    return 0;
}

static int cycles_find(struct checker *c)
{
    uint32_t m = 0;
    c->node = malloc((c->n + 1) * sizeof *c->node);
    c->txn_of = malloc((c->n + 1) * sizeof *c->txn_of);
    if (!c->node || !c->txn_of) return RDKV_ENOMEM;
    for (size_t i = 0; i < c->n; i++) {
        c->node[i] = c->eff[i] ? m : NONE;
        if (c->eff[i]) c->txn_of[m++] = (uint32_t)i;
    }
    int rc = edges_build(c);
    if (rc) return rc;

    struct graph g = {m, calloc(m + 2, sizeof(size_t)), malloc((c->nedges + 1) * sizeof(uint32_t)),
                      malloc(c->nedges + 1)};
    struct tarjan tj = {malloc((m + 1) * 4),
                        malloc((m + 1) * 4),
                        malloc((m + 1) * 4),
                        malloc((m + 1) * 4),
                        malloc((m + 1) * sizeof(size_t)),
                        calloc(m + 1, 1),
                        0};
    uint32_t *comp = malloc((m + 1) * 4), *comp2 = malloc((m + 1) * 4);
    uint32_t *members = malloc((m + 1) * 4);
    size_t *cstart = NULL;
    if (!g.off || !g.to || !g.type || !tj.index || !tj.low || !tj.stack || !tj.callv || !tj.calle ||
        !tj.onstack || !comp || !comp2 || !members) {
        rc = RDKV_ENOMEM;
        goto done;
    }
    memset(comp2, 0xff, (m + 1) * sizeof *comp2); /* NONE: in no sub-component yet */
    for (size_t e = 0; e < c->nedges; e++) g.off[c->edges[e].from + 1]++;
    for (uint32_t v = 0; v < m; v++) g.off[v + 1] += g.off[v];
    for (size_t e = 0; e < c->nedges; e++) { /* fill, then shift the offsets back */
        size_t at = g.off[c->edges[e].from]++;
        g.to[at] = c->edges[e].to;
        g.type[at] = c->edges[e].type;
    }
    for (uint32_t v = m; v > 0; v--) g.off[v] = g.off[v - 1];
    g.off[0] = 0;

    if (tarjan_run(&g, &tj, NULL, m, NULL, 0, E_WW | E_WR | E_RW, comp) == NONE) goto done;
    /* group the nodes by component (counting sort) */
    uint32_t ncomp = tj.next_comp;
    cstart = calloc((size_t)ncomp + 2, sizeof *cstart);
    if (!cstart) {
        rc = RDKV_ENOMEM;
        goto done;
    }
    for (uint32_t v = 0; v < m; v++) cstart[comp[v] + 1]++;
    for (uint32_t k = 0; k < ncomp; k++) cstart[k + 1] += cstart[k];
    for (uint32_t v = 0; v < m; v++) members[cstart[comp[v]]++] = v;
    for (uint32_t k = ncomp; k > 0; k--) cstart[k] = cstart[k - 1];
    cstart[0] = 0;
    for (uint32_t k = 0; k < ncomp && rc == 0; k++) {
        uint32_t size = (uint32_t)(cstart[k + 1] - cstart[k]);
        const uint32_t *mem = members + cstart[k];
        if (size < 2) continue;
        const char *kind = "G0";
        uint8_t mask = E_WW;
        uint32_t rep = tarjan_run(&g, &tj, mem, size, comp, k, mask, comp2);
        if (rep == NONE) {
            kind = "G1c";
            mask = E_WW | E_WR;
            rep = tarjan_run(&g, &tj, mem, size, comp, k, mask, comp2);
        }
        if (rep == NONE) {
            kind = "G2";
            mask = E_WW | E_WR | E_RW;
            rep = mem[0];
        }
        uint64_t *count = mask == E_WW            ? &c->out->g0
                          : mask == (E_WW | E_WR) ? &c->out->g1c
                                                  : &c->out->g2;
        (*count)++;
        const uint32_t *scope = mask == (E_WW | E_WR | E_RW) ? comp : comp2;
        if (!c->out->first[0]) rc = cycle_describe(c, &g, kind, rep, scope, scope[rep], mask);
    }
done:
    free(g.off), free(g.to), free(g.type), free(comp), free(comp2), free(members), free(cstart);
    free(tj.index), free(tj.low), free(tj.stack), free(tj.callv), free(tj.calle), free(tj.onstack);
    return rc;
}

int histcheck_run(const struct hist_txn *txns, size_t n, uint32_t nkeys,
                  struct histcheck_report *out)
{
    if (!out) return RDKV_EINVAL;
    memset(out, 0, sizeof *out);
    if ((!txns && n) || n >= NONE - 1) {
        note(out, "bad history array");
        return RDKV_EINVAL;
    }
    struct checker c = {.txns = txns, .n = n, .nkeys = nkeys, .out = out};
    int rc = scan(&c);
    if (rc == 0) rc = promote(&c);
    if (rc == 0) rc = cycles_find(&c);
    free(c.slots), free(c.xr), free(c.in), free(c.xr_off), free(c.in_off), free(c.bad_count);
    free(c.bad_op), free(c.eff), free(c.node), free(c.txn_of), free(c.zero_succ);
    free(c.succ_next), free(c.succ_txn), free(c.edges);
    if (rc == RDKV_ENOMEM) note(out, "out of memory");
    if (rc) return rc;
    return (out->g0 | out->g1a | out->g1b | out->g1c | out->g2 | out->incompatible) != 0;
}

/* ---- text format ---- */

static bool parse_u64(const char **p, uint64_t *v)
{
    const char *s = *p;
    uint64_t x = 0;
    if (*s < '0' || *s > '9') return false;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (x > (UINT64_MAX - (uint64_t)(*s - '0')) / 10) return false;
        x = x * 10 + (uint64_t)(*s - '0');
    }
    *v = x;
    *p = s;
    return true;
}

static bool parse_space(const char **p) /* at least one blank, or the end of the line */
{
    const char *s = *p;
    while (*s == ' ' || *s == '\t') s++;
    bool ok = s != *p || *s == '\0' || *s == '\n' || *s == '\r';
    *p = s;
    return ok;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int histcheck_load(FILE *f, struct hist_log *log, char *err, size_t errlen)
{
    memset(log, 0, sizeof *log);
    if (err && errlen) err[0] = '\0';
    char *line = NULL, *why = NULL;
    size_t linecap = 0, lineno = 0, cap_t = 0, cap_o = 0;
    size_t *start = NULL;
    uint64_t *ids = NULL;
    int rc = 0;
    ssize_t len;
    errno = 0;
    while ((len = getline(&line, &linecap, f)) >= 0) {
        const char *p = line;
        uint64_t id, key = 0, value = 0;
        char kind = 0;
        lineno++;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '#' || *p == '\0' || *p == '\n' || *p == '\r') continue;
        why = "expected T<id>";
        if (*p++ != 'T' || !parse_u64(&p, &id) || !parse_space(&p)) goto bad;
        why = "expected a status C, A or U";
        char st = *p;
        if (st != 'C' && st != 'A' && st != 'U') goto bad;
        p++;
        if (!parse_space(&p)) goto bad;
        uint8_t status = st == 'C' ? HIST_COMMITTED : st == 'A' ? HIST_ABORTED : HIST_UNKNOWN;
        if (*p == 'r' || *p == 'w') {
            why = "expected r|w <key> <value>";
            kind = *p++;
            if (!parse_space(&p) || !parse_u64(&p, &key) || key > UINT32_MAX - 1 ||
                !parse_space(&p) || !parse_u64(&p, &value) || !parse_space(&p))
                goto bad;
        }
        why = "trailing characters";
        if (*p != '\0' && *p != '\n' && *p != '\r') goto bad;
        bool same = log->ntxns > 0 && log->txns[log->ntxns - 1].id == id;
        if (same && log->txns[log->ntxns - 1].status != status) {
            why = "status differs from the transaction's earlier lines";
            goto bad;
        }
        if (!same) {
            if (log->ntxns == cap_t) {
                cap_t = cap_t ? 2 * cap_t : 256;
                void *t = realloc(log->txns, cap_t * sizeof *log->txns);
                void *s = realloc(start, cap_t * sizeof *start);
                if (t) log->txns = t;
                if (s) start = s;
                if (!t || !s) goto nomem;
            }
            start[log->ntxns] = log->nops;
            log->txns[log->ntxns++] = (struct hist_txn){id, status, 0, NULL};
        }
        if (!kind) continue;
        if (log->nops == cap_o) {
            cap_o = cap_o ? 2 * cap_o : 1024;
            void *o = realloc(log->ops, cap_o * sizeof *log->ops);
            if (!o) goto nomem;
            log->ops = o;
        }
        log->ops[log->nops++] =
            (struct hist_op){kind == 'r' ? HIST_READ : HIST_WRITE, (uint32_t)key, value};
        log->txns[log->ntxns - 1].nops++;
        if (key + 1 > log->nkeys) log->nkeys = (uint32_t)(key + 1);
    }
    if (ferror(f)) {
        if (err && errlen) snprintf(err, errlen, "read error after line %zu", lineno);
        rc = RDKV_EIO;
        goto fail;
    }
    ids = malloc((log->ntxns + 1) * sizeof *ids);
    if (!ids) goto nomem;
    for (size_t i = 0; i < log->ntxns; i++) {
        ids[i] = log->txns[i].id;
        log->txns[i].ops = log->txns[i].nops ? log->ops + start[i] : NULL;
    }
    qsort(ids, log->ntxns, sizeof *ids, cmp_u64);
    for (size_t i = 1; i < log->ntxns; i++) {
        if (ids[i] == ids[i - 1]) {
            if (err && errlen)
                snprintf(err, errlen, "T%" PRIu64 " appears in two separate runs of lines", ids[i]);
            rc = RDKV_EINVAL;
            goto fail;
        }
    }
    goto out;
bad:
    if (err && errlen) snprintf(err, errlen, "line %zu: %s", lineno, why);
    rc = RDKV_EINVAL;
    goto fail;
nomem:
    if (err && errlen) snprintf(err, errlen, "out of memory");
    rc = RDKV_ENOMEM;
fail:
    histcheck_free(log);
out:
    free(line), free(start), free(ids);
    return rc;
}

int histcheck_save(FILE *f, const struct hist_txn *txns, size_t n)
{
    static const char st[] = {'?', 'C', 'A', 'U'};
    for (size_t i = 0; i < n; i++) {
        const struct hist_txn *t = &txns[i];
        char s = t->status <= HIST_UNKNOWN ? st[t->status] : '?';
        if (t->nops == 0 && fprintf(f, "T%" PRIu64 " %c\n", t->id, s) < 0) return RDKV_EIO;
        for (uint32_t j = 0; j < t->nops; j++)
            if (fprintf(f, "T%" PRIu64 " %c %c %" PRIu32 " %" PRIu64 "\n", t->id, s,
                        t->ops[j].kind == HIST_READ ? 'r' : 'w', t->ops[j].key,
                        t->ops[j].value) < 0)
                return RDKV_EIO;
    }
    return fflush(f) == 0 ? 0 : RDKV_EIO;
}

void histcheck_free(struct hist_log *log)
{
    free(log->txns);
    free(log->ops);
    memset(log, 0, sizeof *log);
}
