/* kvctl's input language, shared by txn and shell: the tokenizer (fdbcli style) and the parser
 * of one operation (get, put, del, scan, expect). Bad input gets a message, never a crash. */
#include "tools/kvctl/kvctl.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * The tokenizer of txn input and shell commands (fdbcli style): tokens split on whitespace;
 * "double quotes" group and allow escapes, 'single quotes' group literally; escapes \xNN, \\,
 * \", \', \ (space), \; \n \t. With semi, an unquoted ';' ends a command. A '#' where a command
 * starts comments out the rest of the line. */

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Reads one command from src[*pos..len): its tokens (decoded into dst, which must have room for
 * len bytes, at *dpos) go to t. Returns 0, or -1 with a message in err. */
int tokenize(const char *src, size_t len, size_t *pos, bool semi, char *dst, size_t *dpos,
                    struct toks *t, char *err, size_t errcap)
{
    size_t i = *pos, d = *dpos;
    t->n = 0;
    t->glued_semi = false;
    for (;;) {
        while (i < len && (src[i] == ' ' || src[i] == '\t' || src[i] == '\r' || src[i] == '\n'))
            i++;
        if (i >= len) break;
        if (semi && src[i] == ';') {
            i++;
            break;
        }
        if (t->n == 0 && src[i] == '#') {
            i = len;
            break;
        }
        char *start = dst + d;
        bool dq = false;
        while (i < len) {
            char c = src[i];
            if (!dq && (c == ' ' || c == '\t' || c == '\r' || c == '\n' || (semi && c == ';'))) {
                t->glued_semi = c == ';';
                break;
            }
            if (c == '"') {
                dq = !dq;
                i++;
            } else if (c == '\'' && !dq) {
                size_t j = i + 1;
                while (j < len && src[j] != '\'') dst[d++] = src[j++];
                if (j >= len) {
                    snprintf(err, errcap, "unterminated single quote");
                    return -1;
                }
                i = j + 1;
            } else if (c == '\\') {
                if (i + 1 >= len) {
                    snprintf(err, errcap, "a backslash ends the line (write \\\\ for one)");
                    return -1;
                }
                char e = src[i + 1];
                i += 2;
                switch (e) {
                case '\\':
                case '"':
                case '\'':
                case ' ':
                case ';': dst[d++] = e; break;
                case 'n': dst[d++] = '\n'; break;
                case 't': dst[d++] = '\t'; break;
                case 'x': {
                    int h = i < len ? hexval(src[i]) : -1;
                    int l = i + 1 < len ? hexval(src[i + 1]) : -1;
                    if (h < 0 || l < 0) {
                        snprintf(err, errcap, "\\x needs two hex digits");
                        return -1;
                    }
                    dst[d++] = (char)(h * 16 + l);
                    i += 2;
                    break;
                }
                default:
                    snprintf(err, errcap, "unknown escape '\\%c' (see 'kvctl help escaping')",
                             isprint((unsigned char)e) ? e : '?');
                    return -1;
                }
            } else {
                dst[d++] = c;
                i++;
            }
        }
        if (dq) {
            snprintf(err, errcap, "unterminated double quote");
            return -1;
        }
        if (t->n == t->cap) {
            t->cap = t->cap ? 2 * t->cap : 8;
            t->v = xrealloc(t->v, t->cap * sizeof *t->v);
        }
        t->v[t->n++] = (struct tok){start, (size_t)(dst + d - start)};
    }
    *pos = i;
    *dpos = d;
    return 0;
}

/* Whether the range [b, e) holds no key: e is not after b (keys sort as bytes, unsigned). */
bool range_empty(struct bytes b, struct bytes e)
{
    int c = memcmp(b.p, e.p, b.n < e.n ? b.n : e.n);
    return c > 0 || (c == 0 && b.n >= e.n);
}

/* Why a scan of [b, e) prints nothing, into err. */
void range_empty_msg(struct bytes b, struct bytes e, char *err, size_t errcap)
{
    struct buf kb = {0}, ke = {0};
    put_escaped(&kb, b, false);
    put_escaped(&ke, e, false);
    snprintf(err, errcap,
             "scan: END '%s' is not after BEGIN '%s', so [BEGIN, END) holds no key (keys sort "
             "as bytes; END '' scans to the end)",
             ke.p ? ke.p : "", kb.p ? kb.p : "");
    buf_free(&kb);
    buf_free(&ke);
}

bool tok_is(const struct tok *t, const char *s)
{
    return t->n == strlen(s) && !memcmp(t->p, s, t->n);
}

bool is_expect(enum op_kind k)
{
    return k == OP_EXPECT_EQ || k == OP_EXPECT_ABSENT || k == OP_EXPECT_EXISTS;
}

/* ---------------------------------------------------------------------------------------------
 * Parsing one operation (txn and shell). Returns 0, or -1 with a message in err. */

static int parse_limit_tok(const struct tok *t, size_t *out, char *err, size_t errcap)
{
    char s[32];
    uint64_t v;
    if (t->n == 0 || t->n >= sizeof s) goto bad;
    memcpy(s, t->p, t->n);
    s[t->n] = 0;
    if (!parse_uint(s, SIZE_MAX / 2, &v)) goto bad;
    *out = (size_t)v;
    return 0;
bad:
    snprintf(err, errcap, "LIMIT must be a number of rows (0: no limit)");
    return -1;
}

int parse_op(const struct tok *v, size_t n, bool allow_expect, struct op *op, char *err,
                    size_t errcap)
{
    memset(op, 0, sizeof *op);
    const struct tok *c = &v[0];
#define ARGS(lo, hi, form)                                                                         \
    do {                                                                                           \
        if (n < (lo) || n > (hi)) {                                                                \
            snprintf(err, errcap, "%s (%zu argument%s given)", form, n - 1, n == 2 ? "" : "s");    \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)
    if (tok_is(c, "get")) {
        ARGS(2, 2, "usage: get KEY");
        op->kind = OP_GET;
    } else if (tok_is(c, "put") || tok_is(c, "set")) {
        ARGS(3, 3, "usage: put KEY VALUE");
        op->kind = OP_PUT;
        op->val = (struct bytes){v[2].p, v[2].n};
    } else if (tok_is(c, "del") || tok_is(c, "delete") || tok_is(c, "clear")) {
        ARGS(2, 2, "usage: del KEY");
        op->kind = OP_DEL;
    } else if (tok_is(c, "scan")) {
        ARGS(3, 4, "usage: scan BEGIN END [LIMIT] (END \"\": to the end)");
        op->kind = OP_SCAN;
        op->end = (struct bytes){v[2].p, v[2].n};
        op->end_open = v[2].n == 0;
        op->limit = DEFAULT_LIMIT;
        if (n == 4 && parse_limit_tok(&v[3], &op->limit, err, errcap)) return -1;
        struct bytes b = {v[1].p, v[1].n};
        if (!op->end_open && range_empty(b, op->end)) {
            range_empty_msg(b, op->end, err, errcap);
            return -1;
        }
    } else if (tok_is(c, "expect")) {
        if (!allow_expect) {
            snprintf(err, errcap, "'expect' lines come before the '---' line and the operations");
            return -1;
        }
        if (n == 3 && tok_is(&v[2], "absent")) op->kind = OP_EXPECT_ABSENT;
        else if (n == 3 && tok_is(&v[2], "exists")) op->kind = OP_EXPECT_EXISTS;
        else if (n == 4 && (tok_is(&v[2], "=") || tok_is(&v[2], "=="))) {
            op->kind = OP_EXPECT_EQ;
            op->val = (struct bytes){v[3].p, v[3].n};
        } else {
            snprintf(err, errcap,
                     "usage: expect KEY = VALUE | expect KEY absent | expect KEY exists");
            return -1;
        }
    } else {
        snprintf(err, errcap, "unknown operation '%.*s' (get, put, del, scan%s)",
                 (int)(c->n < 40 ? c->n : 40), c->p, allow_expect ? ", expect" : "");
        return -1;
    }
#undef ARGS
    op->key = (struct bytes){v[1].p, v[1].n};
    return 0;
}
