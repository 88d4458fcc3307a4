/* The replica configuration: building, checking, encoding (server/rcfg.h). */
#include "server/rcfg.h"

#include "common/config.h"
#include "common/log.h"
#include "common/parse.h"
#include "rdkv_status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

_Static_assert(CLUSTER_MAX_REPLICAS == RCFG_MAX_REPLICAS, "the config file's limit is rcfg's");
_Static_assert(CLUSTER_MAX_REPLICATED == RCFG_MAX_NODES, "the config file's limit is rcfg's");

/* false, with the reason in err */
#define REFUSE(...) (log_reason(err, errcap, 0, __VA_ARGS__) != 0)

static bool member(const struct rcfg *c, unsigned node)
{
    return node < c->nodes && (c->members >> node & 1);
}

int rcfg_initial(struct rcfg *c, unsigned nodes, unsigned replicas)
{
    if (!nodes || nodes > RCFG_MAX_NODES || !replicas || replicas > RCFG_MAX_REPLICAS ||
        replicas > nodes)
        return RDKV_EINVAL;
    memset(c, 0, sizeof *c);
    c->epoch = 1;
    c->nodes = c->partitions = nodes;
    c->replicas = replicas;
    c->members = nodes == 64 ? ~0ull : (1ull << nodes) - 1;
    for (unsigned p = 0; p < nodes; p++) {
        c->nrep[p] = (uint8_t)replicas;
        for (unsigned r = 0; r < replicas; r++) c->rep[p][r] = (uint16_t)((p + r) % nodes);
    }
    return 0;
}

bool rcfg_check(const struct rcfg *c, char *err, size_t errcap)
{
    if (!c->epoch) return REFUSE("epoch 0");
    if (!c->nodes || c->nodes > RCFG_MAX_NODES)
        return REFUSE("%u nodes (1..%u)", c->nodes, RCFG_MAX_NODES);
    if (c->partitions != c->nodes)
        return REFUSE("%u partitions for %u nodes (this build keeps one per node)",
                   c->partitions, c->nodes);
    if (!c->replicas || c->replicas > RCFG_MAX_REPLICAS || c->replicas > c->nodes)
        return REFUSE("replicas %u (1..%u, at most the nodes)", c->replicas,
                   RCFG_MAX_REPLICAS);
    if (c->nodes < 64 && c->members >> c->nodes)
        return REFUSE("a member past node %u", c->nodes - 1);
    for (unsigned i = c->nodes; i < RCFG_MAX_NODES; i++)
        if (c->fenced[i]) return REFUSE("node %u fenced, past node %u", i, c->nodes - 1);
    for (unsigned i = 0; i < c->nodes; i++)
        if (member(c, i) && c->fenced[i] == UINT64_MAX)
            return REFUSE("node %u is a member with every process of it fenced", i);
    for (unsigned p = 0; p < c->partitions; p++) {
        if (!c->nrep[p] || c->nrep[p] > c->replicas)
            return REFUSE("partition %u has %u replicas (1..%u)", p, c->nrep[p],
                       c->replicas);
        if (c->nlearn[p] >= c->nrep[p])
            return REFUSE("partition %u has no full replica (%u being filled)", p, c->nlearn[p]);
        for (unsigned r = 0; r < c->nrep[p]; r++) {
            unsigned n = c->rep[p][r];
            if (!member(c, n))
                return REFUSE("partition %u: node %u is no member", p, n);
            for (unsigned q = 0; q < r; q++)
                if (c->rep[p][q] == n)
                    return REFUSE("partition %u: node %u twice", p, n);
        }
    }
    return true;
}

bool rcfg_holds(const struct rcfg *c, unsigned p, uint16_t node)
{
    for (unsigned r = 0; r < c->nrep[p]; r++)
        if (c->rep[p][r] == node) return true;
    return false;
}

bool rcfg_learning(const struct rcfg *c, unsigned p, uint16_t node)
{
    for (unsigned r = rcfg_full(c, p); r < c->nrep[p]; r++)
        if (c->rep[p][r] == node) return true;
    return false;
}

int rcfg_without(const struct rcfg *c, uint16_t node, struct rcfg *out)
{
    if (!member(c, node)) return RDKV_EINVAL;
    for (unsigned p = 0; p < c->partitions; p++)
        if (rcfg_full(c, p) == 1 && c->rep[p][0] == node) return RDKV_EUNAVAILABLE;
    struct rcfg n = *c;
    n.epoch = c->epoch + 1;
    n.members &= ~(1ull << node);
    n.fenced[node] = UINT64_MAX;
    for (unsigned p = 0; p < n.partitions; p++) {
        unsigned k = 0;
        for (unsigned r = 0; r < c->nrep[p]; r++)
            if (c->rep[p][r] != node) n.rep[p][k++] = c->rep[p][r];
        for (unsigned r = k; r < RCFG_MAX_REPLICAS; r++) n.rep[p][r] = 0;
        n.nrep[p] = (uint8_t)k;
        if (rcfg_learning(c, p, node)) n.nlearn[p]--;
    }
    *out = n;
    return 0;
}

int rcfg_join(const struct rcfg *c, uint16_t node, uint64_t inc, struct rcfg *out)
{
    if (node >= c->nodes || !inc) return RDKV_EINVAL;
    if (member(c, node)) return RDKV_EEXIST;
    struct rcfg n = *c;
    n.epoch = c->epoch + 1;
    n.members |= 1ull << node;
    n.fenced[node] = inc - 1;
    unsigned added = 0;
    for (unsigned p = 0; p < n.partitions; p++) {
        if (n.nrep[p] >= n.replicas) continue;
        n.rep[p][n.nrep[p]++] = node; /* (last: with the others being filled) */
        n.nlearn[p]++;
        added++;
    }
    if (!added) return RDKV_ENOTFOUND;
    *out = n;
    return 0;
}

int rcfg_filled(const struct rcfg *c, unsigned p, uint16_t node, struct rcfg *out)
{
    if (p >= c->partitions || !rcfg_learning(c, p, node)) return RDKV_EINVAL;
    struct rcfg n = *c;
    n.epoch = c->epoch + 1;
    /* it moves to the end of the full ones: swapped with the first being filled */
    unsigned first = rcfg_full(c, p), at = first;
    while (n.rep[p][at] != node) at++;
    n.rep[p][at] = n.rep[p][first];
    n.rep[p][first] = node;
    n.nlearn[p]--;
    *out = n;
    return 0;
}

int rcfg_drop(const struct rcfg *c, unsigned p, uint16_t node, struct rcfg *out)
{
    if (p >= c->partitions || !rcfg_holds(c, p, node) || rcfg_primary(c, p) == node)
        return RDKV_EINVAL;
    struct rcfg n = *c;
    n.epoch = c->epoch + 1;
    unsigned k = 0;
    for (unsigned r = 0; r < c->nrep[p]; r++)
        if (c->rep[p][r] != node) n.rep[p][k++] = c->rep[p][r];
    n.rep[p][k] = 0;
    n.nrep[p] = (uint8_t)k;
    if (rcfg_learning(c, p, node)) n.nlearn[p]--;
    *out = n;
    return 0;
}

int rcfg_handback(const struct rcfg *c, unsigned p, uint16_t node, struct rcfg *out)
{
    if (p >= c->partitions || !member(c, node) || !rcfg_holds(c, p, node) ||
        rcfg_learning(c, p, node) || rcfg_primary(c, p) == node)
        return RDKV_EINVAL;
    struct rcfg n = *c;
    n.epoch = c->epoch + 1;
    n.rep[p][0] = node;
    unsigned k = 1;
    for (unsigned r = 0; r < c->nrep[p]; r++)
        if (c->rep[p][r] != node) n.rep[p][k++] = c->rep[p][r];
    *out = n;
    return 0;
}

int rcfg_encode(const struct rcfg *c, char *buf, size_t cap)
{
    size_t off = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        int w_ = snprintf(buf + off, cap - off, __VA_ARGS__);                                     \
        if (w_ < 0 || (size_t)w_ >= cap - off) return RDKV_ETOOBIG;                                \
        off += (size_t)w_;                                                                         \
    } while (0)
    if (!cap) return RDKV_ETOOBIG;
    PUT("rdkv-config 1\nepoch %llu\nnodes %u\npartitions %u\nreplicas %u\nmembers",
        (unsigned long long)c->epoch, c->nodes, c->partitions, c->replicas);
    for (unsigned i = 0; i < c->nodes; i++)
        if (member(c, i)) PUT(" %u", i);
    PUT("\n");
    for (unsigned p = 0; p < c->partitions; p++) {
        PUT("part %u", p);
        for (unsigned r = 0; r < c->nrep[p]; r++)
            PUT(" %u%s", c->rep[p][r], r >= rcfg_full(c, p) ? "+" : "");
        PUT("\n");
    }
    for (unsigned i = 0; i < c->nodes; i++)
        if (c->fenced[i]) PUT("fenced %u %llu\n", i, (unsigned long long)c->fenced[i]);
#undef PUT
    return (int)off;
}

/* The next word of *s before end (spaces, tabs and a '\r' separate words), NUL-terminated in
 * w[wcap]: 1; 0 when the line has no more words; -1 for a word too long. */
static int word(const char **s, const char *end, char *w, size_t wcap)
{
    const char *p = *s;
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
    const char *b = p;
    while (p < end && *p != ' ' && *p != '\t' && *p != '\r') p++;
    *s = p;
    if (p == b) return 0;
    if ((size_t)(p - b) >= wcap) return -1;
    memcpy(w, b, (size_t)(p - b));
    w[p - b] = 0;
    return 1;
}

int rcfg_decode(const char *text, size_t len, struct rcfg *out, char *err, size_t errcap)
{
    struct rcfg c;
    memset(&c, 0, sizeof c);
    if (len > RCFG_TEXT_MAX) {
        return log_reason(err, errcap, RDKV_EPROTO, "configuration of %zu bytes (limit %u)", len, RCFG_TEXT_MAX);
    }
    const char *s = text, *end = text + len;
    unsigned line = 0, seen = 0;
    bool partseen[RCFG_MAX_NODES] = {false};
    enum { S_MAGIC = 1, S_EPOCH = 2, S_NODES = 4, S_PARTS = 8, S_REPL = 16, S_MEMBERS = 32 };
    while (s < end) {
        line++;
        const char *eol = memchr(s, '\n', (size_t)(end - s));
        if (!eol) eol = end;
        char kw[16], w[24];
        uint64_t v;
        int k = word(&s, eol, kw, sizeof kw);
        if (k == 0) goto next; /* a blank line */
        if (k < 0) {
            return log_reason(err, errcap, RDKV_EPROTO, "line %u: bad keyword", line);
        }
#define NUM(lo, hi)                                                                                \
    (word(&s, eol, w, sizeof w) == 1 && !parse_uint_range(w, (lo), (hi), &v))
#define BAD(...)                                                                                   \
    do {                                                                                           \
        return log_reason(err, errcap, RDKV_EPROTO, __VA_ARGS__);                                  \
    } while (0)
        if (!strcmp(kw, "rdkv-config")) {
            if (!NUM(1, 1)) BAD("line %u: unknown format (expected 'rdkv-config 1')", line);
            seen |= S_MAGIC;
        } else if (!(seen & S_MAGIC)) {
            BAD("line %u: not an rdkv configuration (no 'rdkv-config 1' first)", line);
        } else if (!strcmp(kw, "epoch")) {
            if (seen & S_EPOCH) BAD("line %u: epoch twice", line);
            if (!NUM(1, UINT64_MAX)) BAD("line %u: bad epoch", line);
            c.epoch = v;
            seen |= S_EPOCH;
        } else if (!strcmp(kw, "nodes")) {
            if (seen & S_NODES) BAD("line %u: nodes twice", line);
            if (!NUM(1, RCFG_MAX_NODES)) BAD("line %u: bad node count", line);
            c.nodes = (unsigned)v;
            seen |= S_NODES;
        } else if (!strcmp(kw, "partitions")) {
            if (seen & S_PARTS) BAD("line %u: partitions twice", line);
            if (!NUM(1, RCFG_MAX_NODES)) BAD("line %u: bad partition count", line);
            c.partitions = (unsigned)v;
            seen |= S_PARTS;
        } else if (!strcmp(kw, "replicas")) {
            if (seen & S_REPL) BAD("line %u: replicas twice", line);
            if (!NUM(1, RCFG_MAX_REPLICAS)) BAD("line %u: bad replica count", line);
            c.replicas = (unsigned)v;
            seen |= S_REPL;
        } else if (!strcmp(kw, "members")) {
            if (seen & S_MEMBERS) BAD("line %u: members twice", line);
            if (!(seen & S_NODES)) BAD("line %u: members before nodes", line);
            for (const char *t = s; word(&t, eol, w, sizeof w) != 0; t = s) {
                if (!NUM(0, c.nodes - 1)) BAD("line %u: bad member", line);
                c.members |= 1ull << v;
            }
            seen |= S_MEMBERS;
        } else if (!strcmp(kw, "part")) {
            if (!(seen & S_PARTS) || !(seen & S_NODES) || !(seen & S_REPL))
                BAD("line %u: part before nodes, partitions and replicas", line);
            if (!NUM(0, c.partitions - 1)) BAD("line %u: bad partition", line);
            unsigned p = (unsigned)v;
            if (partseen[p]) BAD("line %u: partition %u twice", line, p);
            partseen[p] = true;
            /* a replica being filled is written "<node>+", after the full ones */
            for (int k2; (k2 = word(&s, eol, w, sizeof w)) != 0;) {
                if (k2 < 0) BAD("line %u: bad replica of partition %u", line, p);
                size_t wl = strlen(w);
                bool learn = wl > 1 && w[wl - 1] == '+';
                if (learn) w[wl - 1] = 0;
                if (parse_uint_range(w, 0, c.nodes - 1, &v))
                    BAD("line %u: bad replica of partition %u", line, p);
                if (c.nrep[p] == RCFG_MAX_REPLICAS) BAD("line %u: too many replicas", line);
                if (!learn && c.nlearn[p])
                    BAD("line %u: partition %u: a full replica after one being filled", line, p);
                c.rep[p][c.nrep[p]++] = (uint16_t)v;
                if (learn) c.nlearn[p]++;
            }
        } else if (!strcmp(kw, "fenced")) {
            if (!(seen & S_NODES)) BAD("line %u: fenced before nodes", line);
            if (!NUM(0, c.nodes - 1)) BAD("line %u: bad fenced node", line);
            unsigned n = (unsigned)v;
            if (c.fenced[n]) BAD("line %u: node %u fenced twice", line, n);
            if (!NUM(1, UINT64_MAX)) BAD("line %u: bad fenced incarnation", line);
            c.fenced[n] = v;
        } else {
            BAD("line %u: unknown keyword '%s'", line, kw);
        }
        if (word(&s, eol, w, sizeof w) != 0) BAD("line %u: trailing words", line);
#undef NUM
#undef BAD
    next:
        s = eol < end ? eol + 1 : end;
    }
    if (seen != (S_MAGIC | S_EPOCH | S_NODES | S_PARTS | S_REPL | S_MEMBERS)) {
        return log_reason(err, errcap, RDKV_EPROTO, "incomplete configuration (needs rdkv-config, epoch, nodes, partitions, "
                         "replicas and members)");
    }
    for (unsigned p = 0; p < c.partitions; p++)
        if (!partseen[p]) {
            return log_reason(err, errcap, RDKV_EPROTO, "no line for partition %u", p);
        }
    if (!rcfg_check(&c, err, errcap)) return RDKV_EPROTO;
    *out = c;
    return 0;
}
