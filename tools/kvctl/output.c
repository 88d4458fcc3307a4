/* kvctl's output: keys and values as text (fdbcli-style escapes), hex or JSON strings; the
 * results of operations in each context (one-shot, txn, shell); and the status table. */
#include "tools/kvctl/kvctl.h"
#include "tools/kvctl/status.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * Printing bytes: text escapes (fdbcli style), hex and JSON strings. */

/* Length of the valid UTF-8 sequence (2..4 bytes, no overlongs or surrogates) at p, or 0. */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    size_t len;
    unsigned min;
    if (c >= 0xc2 && c <= 0xdf) len = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef) len = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4) len = 4, min = 0x10000;
    else return 0;
    if (n < len) return 0;
    unsigned cp = c & (0xff >> (len + 1));
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

bool utf8_valid(struct bytes b)
{
    const unsigned char *p = (const unsigned char *)b.p;
    for (size_t i = 0; i < b.n;) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t l = utf8_seq(p + i, b.n - i);
        if (!l) return false;
        i += l;
    }
    return true;
}

/* Printable as is: valid UTF-8 without control bytes other than tab and newline. */
static bool printable(struct bytes b)
{
    const unsigned char *p = (const unsigned char *)b.p;
    for (size_t i = 0; i < b.n; i++)
        if ((p[i] < 0x20 && p[i] != '\t' && p[i] != '\n') || p[i] == 0x7f) return false;
    return utf8_valid(b);
}

void put_hex(struct buf *o, struct bytes b)
{
    static const char hx[] = "0123456789abcdef";
    buf_reserve(o, 2 * b.n);
    for (size_t i = 0; i < b.n; i++) {
        unsigned char c = (unsigned char)b.p[i];
        o->p[o->len++] = hx[c >> 4];
        o->p[o->len++] = hx[c & 15];
    }
    o->p[o->len] = 0;
}

/* fdbcli-style escaping: printable ASCII and valid UTF-8 stay, a backslash doubles, every other
 * byte becomes \xNN; with no_space also the space (so a key is one word on a line). */
void put_escaped(struct buf *o, struct bytes b, bool no_space)
{
    const unsigned char *p = (const unsigned char *)b.p;
    for (size_t i = 0; i < b.n;) {
        unsigned c = p[i];
        if (c == '\\') {
            buf_puts(o, "\\\\");
            i++;
        } else if (c >= 0x21 && c < 0x7f) {
            buf_putc(o, (char)c);
            i++;
        } else if (c == ' ' && !no_space) {
            buf_putc(o, ' ');
            i++;
        } else if (c >= 0x80 && utf8_seq(p + i, b.n - i)) {
            size_t l = utf8_seq(p + i, b.n - i);
            buf_put(o, p + i, l);
            i += l;
        } else {
            buf_printf(o, "\\x%02x", c);
            i++;
        }
    }
}

/* A key in text output: hex with --hex, else escaped with no spaces. */
void put_key_text(struct buf *o, struct bytes k)
{
    if (G.hex) put_hex(o, k);
    else put_escaped(o, k, true);
}

void put_value_text(struct buf *o, struct bytes v)
{
    if (G.hex) put_hex(o, v);
    else put_escaped(o, v, false);
}

void put_json_string(struct buf *o, struct bytes b)
{
    buf_putc(o, '"');
    const unsigned char *p = (const unsigned char *)b.p;
    for (size_t i = 0; i < b.n; i++) {
        unsigned c = p[i];
        switch (c) {
        case '"': buf_puts(o, "\\\""); break;
        case '\\': buf_puts(o, "\\\\"); break;
        case '\n': buf_puts(o, "\\n"); break;
        case '\t': buf_puts(o, "\\t"); break;
        case '\r': buf_puts(o, "\\r"); break;
        default:
            if (c < 0x20 || c == 0x7f) buf_printf(o, "\\u%04x", c);
            else buf_putc(o, (char)c);
        }
    }
    buf_putc(o, '"');
}

/* "name":"..." for bytes that are UTF-8 (and no --hex), else "name_hex":"6869". */
void put_json_bytes(struct buf *o, const char *name, struct bytes b)
{
    if (!G.hex && utf8_valid(b)) {
        buf_printf(o, "\"%s\":", name);
        put_json_string(o, b);
    } else {
        buf_printf(o, "\"%s_hex\":\"", name);
        put_hex(o, b);
        buf_putc(o, '"');
    }
}

void out_sep(struct out *o)
{
    if (!o->first) buf_putc(&o->b, ',');
    o->first = false;
}

void print_get_found(struct out *o, const struct op *op, struct bytes v)
{
    struct buf *b = &o->b;
    if (G.out == OUT_JSON) {
        if (o->ctx == CTX_TXN) {
            out_sep(o);
            buf_puts(b, "{\"op\":\"get\",");
        } else {
            buf_putc(b, '{');
        }
        put_json_bytes(b, "key", op->key);
        buf_putc(b, ',');
        put_json_bytes(b, "value", v);
        buf_puts(b, o->ctx == CTX_TXN ? "}" : "}\n");
    } else if (o->ctx == CTX_TXN) {
        put_key_text(b, op->key);
        buf_putc(b, ' ');
        put_value_text(b, v);
        buf_putc(b, '\n');
    } else if (op->raw) {
        buf_put(b, v.p, v.n);
    } else {
        if (G.hex) put_hex(b, v);
        else if (printable(v)) buf_put(b, v.p, v.n);
        else put_escaped(b, v, false);
        buf_putc(b, '\n');
    }
}

/* Not found inside txn or shell (not an error there); one-shot commands say it on stderr. */
void print_not_found(struct out *o, const char *opname, const struct op *op)
{
    struct buf *b = &o->b;
    if (o->ctx == CTX_ONESHOT) return;
    if (G.out == OUT_JSON) {
        if (o->ctx == CTX_TXN) {
            out_sep(o);
            buf_printf(b, "{\"op\":\"%s\",", opname);
        } else {
            buf_putc(b, '{');
        }
        put_json_bytes(b, "key", op->key);
        buf_puts(b, ",\"found\":false}");
        if (o->ctx != CTX_TXN) buf_putc(b, '\n');
    } else {
        put_key_text(b, op->key);
        buf_puts(b, ": not found\n");
    }
}

void print_ok(struct out *o)
{
    if (o->ctx == CTX_TXN) return;
    buf_puts(&o->b, G.out == OUT_JSON ? "{\"ok\":true}\n" : "OK\n");
}

void print_more_hint(const struct out *o)
{
    if (o->more)
        fprintf(stderr,
                "kvctl: more rows in the range than the limit of %zu: use --limit N for more "
                "(--limit 0: no limit)\n",
                o->more_limit);
}

int flush_stdout(void)
{
    if (fflush(stdout) || ferror(stdout)) {
        if (errno != EPIPE) fprintf(stderr, "kvctl: error: writing the output: %s\n",
                                    strerror(errno));
        return EXIT_ERROR;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The status table (kvctl status): one line per node, then a replicated cluster's partitions. */

void fmt_bytes(char *out, size_t cap, double v)
{
    static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (v >= 1024 && i < 4) v /= 1024, i++;
    if (i == 0) snprintf(out, cap, "%.0f B", v);
    else snprintf(out, cap, "%.1f %s", v, u[i]);
}

void fmt_ns(char *out, size_t cap, int64_t ns)
{
    if (ns == INT64_MAX) snprintf(out, cap, ">10s"); /* (the histograms' last bucket) */
    else if (ns >= 1000000000) snprintf(out, cap, "%gs", (double)ns / 1e9);
    else if (ns >= 1000000) snprintf(out, cap, "%gms", (double)ns / 1e6);
    else snprintf(out, cap, "%gus", (double)ns / 1e3);
}

static bool has_u64(const uint64_t *v, size_t n, uint64_t x)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == x) return true;
    return false;
}

/* Node `node`'s stream of partition `part` to its new copies, from its own status (NULL when
 * it fills none). */
static const struct st_part *fill_progress(const struct st_cluster *c, uint64_t node,
                                           uint64_t part)
{
    for (size_t i = 0; i < c->n; i++) {
        const struct st_repl *rp = &c->nodes[i].repl;
        if (c->nodes[i].node != node) continue;
        for (size_t k = 0; k < rp->nparts; k++)
            if (rp->parts[k].partition == part && rp->parts[k].has_fill) return &rp->parts[k];
    }
    return NULL;
}

/* One partition's line: its primary, its backups ("+": still being filled), how far the fill
 * has got, and whether copies are missing. */
static void print_partition(const struct st_cluster *c, const struct st_part *p, uint64_t r,
                            struct buf *o)
{
    char prim[24] = "-", backs[128] = "";
    size_t bl = 0;
    for (size_t k = 0; k < p->nreplicas; k++) {
        bool being = has_u64(p->filling, p->nfilling, p->replicas[k]);
        if (k == 0) snprintf(prim, sizeof prim, "%" PRIu64, p->replicas[k]);
        else if (bl < sizeof backs)
            bl += (size_t)snprintf(backs + bl, sizeof backs - bl, "%s%" PRIu64 "%s",
                                   bl ? " " : "", p->replicas[k], being ? "+" : "");
    }
    buf_printf(o, "%-10" PRIu64 " %-8s %s", p->partition, prim, backs[0] ? backs : "-");
    /* the primary's own status says how far its stream to the new copies has got */
    const struct st_part *prog = p->nreplicas ? fill_progress(c, p->replicas[0], p->partition)
                                              : NULL;
    if (prog) {
        double rows = (double)prog->fill_rows, of = (double)prog->fill_of;
        double frac = of > 0 ? rows / of : 1;
        if (frac > 1) frac = 1;
        char bar[21];
        for (int b = 0; b < 20; b++) bar[b] = b < (int)(frac * 20 + 0.5) ? '#' : '.';
        bar[20] = 0;
        buf_printf(o, "   filling [%s] %3.0f%%, %.0f of %.0f rows", bar, frac * 100, rows, of);
    } else if (p->nfilling) {
        buf_printf(o, "   (+: being filled)");
    }
    /* fewer copies than R: a failure not yet made good, or a copy dropped for want of room
     * (docs/replication.md, section 7) -- until a node joins */
    if (p->nreplicas < r) buf_printf(o, "   only %zu of %" PRIu64 " copies", p->nreplicas, r);
    buf_printf(o, "\n");
}

/* A replicated cluster's configuration as the answering node holds it (docs/replication.md):
 * its replica count, epoch and manager, and each partition's primary and backups. Nothing for a
 * cluster without ZooKeeper. */
static void print_replication(const struct st_cluster *c, struct buf *o)
{
    const struct st_repl *mine = NULL;
    int64_t manager = -1;
    for (size_t i = 0; i < c->n; i++) {
        const struct st_repl *rp = &c->nodes[i].repl;
        if (!rp->present) continue;
        if (rp->manager) manager = (int64_t)c->nodes[i].node;
        if (!mine || c->nodes[i].node == c->coordinator) mine = rp;
    }
    if (!mine || !mine->zookeeper) return;
    char mgr[32] = "none known";
    if (manager >= 0) snprintf(mgr, sizeof mgr, "node %" PRId64, manager);
    buf_printf(o, "\nreplicas %" PRIu64 ", configuration epoch %" PRIu64 " in ZooKeeper %s, "
                  "manager %s\n",
               mine->replicas, mine->epoch, mine->zookeeper, mgr);
    buf_printf(o, "%-10s %-8s %s\n", "PARTITION", "PRIMARY", "BACKUPS");
    for (size_t i = 0; i < mine->nparts; i++) print_partition(c, &mine->parts[i], mine->replicas, o);
}

int print_status_table(const struct st_cluster *c, struct buf *o, struct buf *errs)
{
    int down = 0;
    buf_printf(o, "%-6s %-22s %-6s %10s  %s\n", "NODE", "ADDRESS", "STATE", "ROWS",
               "MEMORY (used / heap)");
    for (size_t i = 0; i < c->n; i++) {
        const struct st_node *n = &c->nodes[i];
        char idc[32], rows[32] = "-", mem[96] = "-";
        snprintf(idc, sizeof idc, "%" PRIu64 "%s", n->node, n->node == c->coordinator ? "*" : "");
        if (n->has_rows) snprintf(rows, sizeof rows, "%" PRIu64, n->rows);
        if (n->has_heap) {
            char a[32], b[32];
            fmt_bytes(a, sizeof a, (double)n->heap_used);
            fmt_bytes(b, sizeof b, (double)n->heap_bytes);
            snprintf(mem, sizeof mem, "%s / %s", a, b);
        }
        buf_printf(o, "%-6s %-22s %-6s %10s  %s\n", idc, n->address, n->up ? "up" : "down", rows,
                   mem);
        if (!n->up) {
            down++;
            buf_printf(errs, "kvctl: node %" PRIu64 " (%s) is down%s%s\n", n->node, n->address,
                       n->error ? ": " : "", n->error ? n->error : "");
        }
    }
    buf_puts(o, "(* the node that answered)\n");
    print_replication(c, o);
    return down;
}
