/* kvctl: the command-line client of rdkv. One-shot commands (get, put, del, scan, status), a
 * guarded batch transaction read from a file or stdin (txn), and an fdbcli-like shell with
 * autocommit and begin/commit/rollback. It uses only the public API (rdkv.h); each command runs
 * as one serializable transaction, retried on conflict. Exit codes tell apart not found (3),
 * aborted (4), unavailable (5) and commit result unknown (6): `kvctl help exit-codes`. */
#include "rdkv.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    EXIT_OK = 0,
    EXIT_ERROR = 1,
    EXIT_USAGE = 2,
    EXIT_NOTFOUND = 3,
    EXIT_ABORTED = 4,
    EXIT_UNAVAILABLE = 5,
    EXIT_UNKNOWN = 6,
};

/* A transaction body's own status (outside rdkv's range, never retryable): a txn guard failed. */
#define KVCTL_EXPECT_FAILED (-1001)

#define DEFAULT_ENDPOINTS "127.0.0.1:7400"
#define DEFAULT_LIMIT 1000
#define STDIN_VALUE_MAX ((size_t)64 << 20)
#define KEY_LIMIT_DEFAULT 4096
#define VALUE_LIMIT_DEFAULT (1 << 20)

/* ---------------------------------------------------------------------------------------------
 * Small pieces: a growable byte buffer, byte strings. */

static _Noreturn void die_oom(void)
{
    fputs("kvctl: error: out of memory (RDKV_ENOMEM)\n", stderr);
    exit(EXIT_ERROR);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) die_oom();
    return p;
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) die_oom();
    return p;
}

struct buf {
    char *p;
    size_t len, cap;
};

static void buf_reserve(struct buf *b, size_t more)
{
    if (b->len + more + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1) cap *= 2;
    b->p = xrealloc(b->p, cap);
    b->cap = cap;
}

static void buf_put(struct buf *b, const void *d, size_t n)
{
    buf_reserve(b, n);
    if (n) memcpy(b->p + b->len, d, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void buf_putc(struct buf *b, char c) { buf_put(b, &c, 1); }
static void buf_puts(struct buf *b, const char *s) { buf_put(b, s, strlen(s)); }

static void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    buf_reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static void buf_free(struct buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* Bytes: keys and values may hold any byte, NUL included. */
struct bytes {
    const char *p;
    size_t n;
};

static struct bytes bytes_str(const char *s) { return (struct bytes){s, strlen(s)}; }

/* ---------------------------------------------------------------------------------------------
 * Global settings (flags and environment). */

enum out_fmt { OUT_TEXT, OUT_JSON };

static struct {
    const char *endpoints;
    const char *endpoints_from; /* "--endpoints", "KVCTL_ENDPOINTS" or "the default" */
    enum out_fmt out;
    bool hex;
    int64_t connect_ms, timeout_ms, lock_ms;
    unsigned retries;
    const char *secret_file; /* NULL: rdkv_connect reads RDKV_SECRET_FILE */
} G = {
    .endpoints = DEFAULT_ENDPOINTS,
    .endpoints_from = "the default",
    .out = OUT_TEXT,
    .connect_ms = 2000,
    .timeout_ms = 10000,
    .lock_ms = 0,
    .retries = 10,
};

static const char *cur_cmd; /* for the "Run 'kvctl CMD --help'" hint; NULL: kvctl itself */
static rdkv_session *S;

/* ---------------------------------------------------------------------------------------------
 * Errors and exit codes. */

static int exit_code(int st)
{
    switch (st) {
    case 0: return EXIT_OK;
    case RDKV_ENOTFOUND: return EXIT_NOTFOUND;
    case RDKV_EABORTED:
    case RDKV_EBUSY:
    case RDKV_ESESSION:
    case KVCTL_EXPECT_FAILED: return EXIT_ABORTED;
    case RDKV_EUNAVAILABLE:
    case RDKV_ENOHOST:
    case RDKV_ETIMEDOUT:
    case RDKV_ESHUTDOWN: return EXIT_UNAVAILABLE;
    case RDKV_EUNKNOWN: return EXIT_UNKNOWN;
    default: return EXIT_ERROR;
    }
}

/* A usage error: message, the help hint, exit status 2. */
static int usage_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("kvctl: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (cur_cmd) fprintf(stderr, "\nRun 'kvctl %s --help' for usage.\n", cur_cmd);
    else fputs("\nRun 'kvctl --help' for usage.\n", stderr);
    return EXIT_USAGE;
}

/* What a status means for the user, beyond rdkv_strerror: one more sentence, or "". */
static const char *status_advice(int st)
{
    switch (st) {
    case RDKV_EABORTED:
        return "; it conflicted with another transaction or a lock wait ran out, and nothing "
               "was written: run it again (--retries and --lock-timeout tune the automatic "
               "retries)";
    case RDKV_EUNKNOWN:
        return "; the commit may or may not have taken effect: check before retrying";
    case RDKV_EUNAVAILABLE:
    case RDKV_ETIMEDOUT:
        return "; a node the operation needed did not answer (see 'kvctl status')";
    default: return "";
    }
}

/* Prints "kvctl: error: CONTEXT: <strerror><advice> (RDKV_E...)". */
static void status_err(int st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void status_err(int st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("kvctl: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, ": %s%s (%s)\n", rdkv_strerror(st), status_advice(st), rdkv_status_name(st));
}

/* The message for RDKV_ETOOBIG on a key of klen and a value of vlen bytes. */
static void toobig_err(const char *what, size_t klen, size_t vlen, bool has_value)
{
    char sz[96];
    if (has_value)
        snprintf(sz, sizeof sz, "the key is %zu bytes and the value %zu bytes", klen, vlen);
    else snprintf(sz, sizeof sz, "the key is %zu bytes", klen);
    fprintf(stderr,
            "kvctl: error: %s: %s, over the cluster's limit (by default keys may have at most "
            "%d bytes and values %d bytes (1 MiB); kvserver --key-max/--value-max change it) "
            "(%s)\n",
            what, sz, KEY_LIMIT_DEFAULT, VALUE_LIMIT_DEFAULT, rdkv_status_name(RDKV_ETOOBIG));
}

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

static bool utf8_valid(struct bytes b)
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

static void put_hex(struct buf *o, struct bytes b)
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
static void put_escaped(struct buf *o, struct bytes b, bool no_space)
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
static void put_key_text(struct buf *o, struct bytes k)
{
    if (G.hex) put_hex(o, k);
    else put_escaped(o, k, true);
}

static void put_value_text(struct buf *o, struct bytes v)
{
    if (G.hex) put_hex(o, v);
    else put_escaped(o, v, false);
}

static void put_json_string(struct buf *o, struct bytes b)
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
static void put_json_bytes(struct buf *o, const char *name, struct bytes b)
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

/* ---------------------------------------------------------------------------------------------
 * Parsing numbers, durations and endpoints. */

/* A decimal integer in [0, max]. */
static bool parse_uint(const char *s, uint64_t max, uint64_t *out)
{
    if (!*s) return false;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return false;
        unsigned d = (unsigned)(*p - '0');
        if (v > (max - d) / 10) return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* A duration: a number with a unit (us, ms, s, m, h; a bare number is seconds), to whole ms
 * (a non-zero value under 1 ms becomes 1 ms). At most one day. */
static bool parse_duration_ms(const char *s, int64_t *ms)
{
    char *end;
    errno = 0;
    if (!*s || !(isdigit((unsigned char)*s) || *s == '.')) return false;
    double v = strtod(s, &end);
    if (errno || end == s) return false;
    double scale;
    if (!*end || !strcmp(end, "s")) scale = 1000;
    else if (!strcmp(end, "ms")) scale = 1;
    else if (!strcmp(end, "us")) scale = 0.001;
    else if (!strcmp(end, "m")) scale = 60000;
    else if (!strcmp(end, "h")) scale = 3600000;
    else return false;
    double r = v * scale;
    if (!(r >= 0) || r > 86400000.0) return false;
    int64_t m = (int64_t)r;
    if (m == 0 && r > 0) m = 1;
    *ms = m;
    return true;
}

/* host:port[,host:port...] with ports 1..65535 ([v6]:port allowed). */
static bool endpoints_valid(const char *eps, char *bad, size_t badcap)
{
    const char *p = eps;
    if (!*p) {
        snprintf(bad, badcap, "(empty)");
        return false;
    }
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        snprintf(bad, badcap, "%.*s", (int)(n < 200 ? n : 200), p);
        const char *colon = NULL;
        for (size_t i = 0; i < n; i++)
            if (p[i] == ':') colon = p + i;
        if (!colon || colon == p) return false;
        if (p[0] == '[' && colon[-1] != ']') return false;
        size_t plen = n - (size_t)(colon + 1 - p);
        if (plen == 0 || plen > 5) return false;
        char port[8];
        memcpy(port, colon + 1, plen);
        port[plen] = 0;
        uint64_t v;
        if (!parse_uint(port, 65535, &v) || v == 0) return false;
        if (!comma) return true;
        p = comma + 1;
    }
}

/* ---------------------------------------------------------------------------------------------
 * The tokenizer of txn input and shell commands (fdbcli style): tokens split on whitespace;
 * "double quotes" group and allow escapes, 'single quotes' group literally; escapes \xNN, \\,
 * \", \', \ (space), \; \n \t. With semi, an unquoted ';' ends a command. A '#' where a command
 * starts comments out the rest of the line. */

struct tok {
    char *p;
    size_t n;
};

struct toks {
    struct tok *v;
    size_t n, cap;
    bool glued_semi; /* the command ended at a ';' right after its last token ("scan a b;") */
};

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Reads one command from src[*pos..len): its tokens (decoded into dst, which must have room for
 * len bytes, at *dpos) go to t. Returns 0, or -1 with a message in err. */
static int tokenize(const char *src, size_t len, size_t *pos, bool semi, char *dst, size_t *dpos,
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
static bool range_empty(struct bytes b, struct bytes e)
{
    int c = memcmp(b.p, e.p, b.n < e.n ? b.n : e.n);
    return c > 0 || (c == 0 && b.n >= e.n);
}

/* Why a scan of [b, e) prints nothing, into err. */
static void range_empty_msg(struct bytes b, struct bytes e, char *err, size_t errcap)
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

static bool tok_is(const struct tok *t, const char *s)
{
    return t->n == strlen(s) && !memcmp(t->p, s, t->n);
}

/* ---------------------------------------------------------------------------------------------
 * Operations: what one get/put/del/scan/expect does inside a transaction, and how its result is
 * printed in each context. */

enum op_kind { OP_GET, OP_PUT, OP_DEL, OP_SCAN, OP_EXPECT_EQ, OP_EXPECT_ABSENT, OP_EXPECT_EXISTS };

struct op {
    enum op_kind kind;
    struct bytes key, val; /* scan: key is the begin */
    struct bytes end;
    bool end_open;  /* scan: to the end of the key space */
    size_t limit;   /* scan: 0 = all */
    bool keys_only, count, raw;
    bool for_update; /* a get or expect of a key this transaction writes */
    unsigned line;
    char *text; /* txn: the line as written, for messages */
};

enum ctx { CTX_ONESHOT, CTX_TXN, CTX_SHELL };

struct out {
    enum ctx ctx;
    struct buf b;
    bool first;      /* JSON array: no comma yet */
    bool more;       /* a scan hit its limit */
    size_t more_limit;
};

static bool is_expect(enum op_kind k)
{
    return k == OP_EXPECT_EQ || k == OP_EXPECT_ABSENT || k == OP_EXPECT_EXISTS;
}

static int op_read(rdkv_txn *t, const struct op *op, const void **v, size_t *vl)
{
    return op->for_update ? rdkv_txn_get_for_update(t, op->key.p, op->key.n, v, vl)
                          : rdkv_txn_get(t, op->key.p, op->key.n, v, vl);
}

static void out_sep(struct out *o)
{
    if (!o->first) buf_putc(&o->b, ',');
    o->first = false;
}

static void print_get_found(struct out *o, const struct op *op, struct bytes v)
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
static void print_not_found(struct out *o, const char *opname, const struct op *op)
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

static void print_ok(struct out *o)
{
    if (o->ctx == CTX_TXN) return;
    buf_puts(&o->b, G.out == OUT_JSON ? "{\"ok\":true}\n" : "OK\n");
}

/* A scan in t, or (t NULL) a one-shot scan of the session. */
static int exec_scan(rdkv_txn *t, const struct op *op, struct out *o)
{
    struct buf *b = &o->b;
    size_t ask = op->limit ? op->limit + 1 : 0; /* one more row tells whether there are more */
    rdkv_iter *it;
    const void *end = op->end_open ? NULL : op->end.p;
    size_t elen = op->end_open ? 0 : op->end.n;
    int rc = t ? rdkv_txn_scan(t, op->key.p, op->key.n, end, elen, ask, &it)
               : rdkv_scan(S, op->key.p, op->key.n, end, elen, ask, &it);
    if (rc) return rc;
    bool json = G.out == OUT_JSON, more = false;
    size_t rows = 0;
    if (json && !op->count) {
        if (o->ctx == CTX_TXN) {
            out_sep(o);
            buf_puts(b, "{\"op\":\"scan\",\"rows\":[");
        } else {
            buf_puts(b, "{\"rows\":[");
        }
    }
    const void *k, *v;
    size_t kl, vl;
    int r;
    while ((r = rdkv_iter_next(it, &k, &kl, &v, &vl)) == 1) {
        if (op->limit && rows == op->limit) {
            more = true;
            break;
        }
        rows++;
        if (op->count) continue;
        struct bytes key = {k, kl}, val = {v, vl};
        if (json) {
            if (rows > 1) buf_putc(b, ',');
            buf_putc(b, '{');
            put_json_bytes(b, "key", key);
            if (!op->keys_only) {
                buf_putc(b, ',');
                put_json_bytes(b, "value", val);
            }
            buf_putc(b, '}');
        } else {
            put_key_text(b, key);
            if (!op->keys_only) {
                buf_putc(b, ' ');
                put_value_text(b, val);
            }
            buf_putc(b, '\n');
        }
    }
    rdkv_iter_close(it);
    if (r < 0) return r;
    if (op->count) {
        if (json) buf_printf(b, "{\"count\":%zu,\"more\":%s}\n", rows, more ? "true" : "false");
        else buf_printf(b, "%zu\n", rows);
    } else if (json) {
        buf_printf(b, "],\"more\":%s}%s", more ? "true" : "false", o->ctx == CTX_TXN ? "" : "\n");
    }
    if (more) {
        o->more = true;
        o->more_limit = op->limit;
    }
    return 0;
}

/* Runs one non-expect operation in t, printing into o. Not found: RDKV_ENOTFOUND (one-shot
 * commands fail with it; txn and shell print it and go on). */
static int exec_op(rdkv_txn *t, const struct op *op, struct out *o)
{
    const void *v;
    size_t vl;
    int rc;
    switch (op->kind) {
    case OP_GET:
        rc = op_read(t, op, &v, &vl);
        if (rc == RDKV_ENOTFOUND) print_not_found(o, "get", op);
        else if (rc == 0) print_get_found(o, op, (struct bytes){v, vl});
        return rc;
    case OP_PUT:
        rc = rdkv_txn_put(t, op->key.p, op->key.n, op->val.p, op->val.n);
        if (rc == 0) print_ok(o);
        return rc;
    case OP_DEL:
        rc = rdkv_txn_delete(t, op->key.p, op->key.n);
        if (rc == 0) print_ok(o);
        else if (rc == RDKV_ENOTFOUND && o->ctx == CTX_SHELL) print_not_found(o, "del", op);
        return rc;
    case OP_SCAN: return exec_scan(t, op, o);
    default: return RDKV_EINVAL;
    }
}

/* A batch of operations run as one transaction by rdkv_run_txn (retried on conflict): the
 * output of the last try is the one that counts. */
struct job {
    struct op *ops;
    size_t nops;
    struct out o;
    size_t failed;      /* the expect that failed */
    bool found_present; /* what it found */
    struct buf found;
    unsigned tries;
};

static int job_fn(rdkv_txn *t, void *arg)
{
    struct job *j = arg;
    j->tries++;
    j->o.b.len = 0;
    j->o.first = true;
    j->o.more = false;
    for (size_t i = 0; i < j->nops; i++) {
        const struct op *op = &j->ops[i];
        if (is_expect(op->kind)) {
            const void *v;
            size_t vl;
            int rc = op_read(t, op, &v, &vl);
            if (rc && rc != RDKV_ENOTFOUND) return rc;
            bool present = rc == 0;
            bool ok = op->kind == OP_EXPECT_ABSENT   ? !present
                      : op->kind == OP_EXPECT_EXISTS ? present
                                                     : present && vl == op->val.n &&
                                                           (!vl || !memcmp(v, op->val.p, vl));
            if (!ok) {
                j->failed = i;
                j->found_present = present;
                j->found.len = 0;
                if (present) buf_put(&j->found, v, vl);
                return KVCTL_EXPECT_FAILED;
            }
            continue;
        }
        int rc = exec_op(t, op, &j->o);
        if (rc == RDKV_ENOTFOUND && j->o.ctx != CTX_ONESHOT) continue;
        if (rc) return rc;
    }
    return 0;
}

/* Runs fn as one transaction: with retries through rdkv_run_txn, or exactly once. */
static int run_txn(rdkv_txn_fn fn, void *arg)
{
    if (G.retries > 0) return rdkv_run_txn(S, fn, arg);
    rdkv_txn *t;
    int rc = rdkv_txn_begin(S, &t);
    if (rc) return rc;
    rc = fn(t, arg);
    if (rc == 0) rc = rdkv_txn_commit(t);
    rdkv_txn_free(t);
    return rc;
}

static void print_more_hint(const struct out *o)
{
    if (o->more)
        fprintf(stderr,
                "kvctl: more rows in the range than the limit of %zu: use --limit N for more "
                "(--limit 0: no limit)\n",
                o->more_limit);
}

/* Marks the gets and expects of keys that a later or earlier put/del writes, so that they take
 * the exclusive lock at once instead of upgrading a shared one. */
static void mark_for_update(struct op *ops, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (ops[i].kind != OP_GET && !is_expect(ops[i].kind)) continue;
        for (size_t j = 0; j < n; j++)
            if ((ops[j].kind == OP_PUT || ops[j].kind == OP_DEL) &&
                ops[j].key.n == ops[i].key.n && !memcmp(ops[j].key.p, ops[i].key.p, ops[i].key.n))
                ops[i].for_update = true;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Connecting. */

static int connect_session(void)
{
    char bad[256];
    if (!endpoints_valid(G.endpoints, bad, sizeof bad))
        return usage_err("bad endpoint '%s' in %s (want host:port[,host:port...])", bad,
                         G.endpoints_from);
    rdkv_options o;
    rdkv_options_init(&o);
    o.connect_timeout_ms = G.connect_ms;
    o.op_timeout_ms = G.timeout_ms;
    o.lock_timeout_ms = G.lock_ms;
    o.max_retries = G.retries;
    o.secret_file = G.secret_file;
    char why[512];
    int rc = rdkv_secret_file_check(G.secret_file, why, sizeof why);
    if (rc) {
        fprintf(stderr, "kvctl: error: %s\n", why);
        return exit_code(rc);
    }
    rc = rdkv_connect(G.endpoints, &o, &S);
    if (rc) {
        S = NULL;
        fprintf(stderr, "kvctl: error: cannot connect to %s (endpoints from %s): %s (%s)\n",
                G.endpoints, G.endpoints_from, rdkv_strerror(rc), rdkv_status_name(rc));
        return exit_code(rc == RDKV_ETIMEDOUT ? RDKV_EUNAVAILABLE : rc);
    }
    return 0;
}

/* Reports the failure of a one-shot operation on key and returns the exit status. */
static int op_failure(int rc, const char *what, const struct op *op)
{
    if (rc == RDKV_ENOTFOUND) {
        struct buf k = {0};
        put_key_text(&k, op->key);
        fprintf(stderr, "kvctl: %s: not found\n", k.p ? k.p : "");
        buf_free(&k);
    } else if (rc == RDKV_ETOOBIG) {
        toobig_err(what, op->key.n, op->val.n, op->kind == OP_PUT);
    } else if (rc == RDKV_EINVAL) {
        status_err(rc, "%s: the server refused the key or value", what);
    } else {
        status_err(rc, "%s", what);
    }
    return exit_code(rc);
}

static int flush_stdout(void)
{
    if (fflush(stdout) || ferror(stdout)) {
        if (errno != EPIPE) fprintf(stderr, "kvctl: error: writing the output: %s\n",
                                    strerror(errno));
        return EXIT_ERROR;
    }
    return 0;
}

/* Runs one op as its own transaction and prints its result. */
/* One command as the session's one-shot operation: one transaction, one request to the node
 * (rdkv_get ...), retried by the library up to --retries times. A scan that fails after its
 * first request (its rows were coming) is run again here, as many times. */
static int exec_oneshot(const struct op *op, struct out *o)
{
    const void *v;
    size_t vl;
    int rc;
    switch (op->kind) {
    case OP_GET:
        rc = rdkv_get(S, op->key.p, op->key.n, &v, &vl);
        if (rc == 0) print_get_found(o, op, (struct bytes){v, vl});
        return rc;
    case OP_PUT:
        rc = rdkv_put(S, op->key.p, op->key.n, op->val.p, op->val.n);
        if (rc == 0) print_ok(o);
        return rc;
    case OP_DEL:
        rc = rdkv_delete(S, op->key.p, op->key.n);
        if (rc == 0) print_ok(o);
        return rc;
    case OP_SCAN:
        for (unsigned tries = 0;; tries++) {
            o->b.len = 0;
            o->more = false;
            rc = exec_scan(NULL, op, o);
            if (!rdkv_status_retryable(rc) || tries >= G.retries) return rc;
        }
    default: return RDKV_EINVAL;
    }
}

static int run_oneshot(struct op *op, const char *what)
{
    int rc = connect_session();
    if (rc) return rc;
    struct out o = {.ctx = CTX_ONESHOT, .first = true};
    rc = exec_oneshot(op, &o);
    int ex;
    if (rc) {
        ex = op_failure(rc, what, op);
    } else {
        fwrite(o.b.p ? o.b.p : "", 1, o.b.len, stdout);
        print_more_hint(&o);
        ex = flush_stdout();
    }
    buf_free(&o.b);
    return ex;
}

/* ---------------------------------------------------------------------------------------------
 * The command line: flags, commands, help. */

enum flag_id {
    F_ENDPOINTS, F_WRITE_OUT, F_HEX, F_CONNECT_TIMEOUT, F_TIMEOUT, F_LOCK_TIMEOUT, F_RETRIES,
    F_SECRET_FILE, F_HELP, F_VERSION, /* global */
    F_RAW, F_LIMIT, F_KEYS_ONLY, F_COUNT, F_TO_END, F_PREFIX, F_FILE, F_EXEC,
    F_NFLAGS
};

struct flag {
    enum flag_id id;
    const char *lng;
    char shrt, shrt2;
    bool value;
};

static const struct flag flags[] = {
    {F_ENDPOINTS, "endpoints", 'e', 0, true},
    {F_WRITE_OUT, "write-out", 'w', 'o', true},
    {F_WRITE_OUT, "output", 0, 0, true},
    {F_HEX, "hex", 0, 0, false},
    {F_CONNECT_TIMEOUT, "connect-timeout", 0, 0, true},
    {F_TIMEOUT, "timeout", 0, 0, true},
    {F_LOCK_TIMEOUT, "lock-timeout", 0, 0, true},
    {F_RETRIES, "retries", 0, 0, true},
    {F_SECRET_FILE, "secret-file", 0, 0, true},
    {F_HELP, "help", 'h', 0, false},
    {F_VERSION, "version", 0, 0, false},
    {F_RAW, "raw", 0, 0, false},
    {F_LIMIT, "limit", 'l', 0, true},
    {F_KEYS_ONLY, "keys-only", 0, 0, false},
    {F_COUNT, "count", 0, 0, false},
    {F_TO_END, "to-end", 0, 0, false},
    {F_PREFIX, "prefix", 0, 0, true},
    {F_FILE, "file", 'f', 0, true},
    {F_EXEC, "exec", 0, 0, true},
};

#define GLOBAL_FLAGS ((1u << F_RAW) - 1)
#define FL(x) (1u << (x))

struct inv {
    const struct command *cmd;
    char **args;
    int nargs;
    const char *val[F_NFLAGS]; /* command flags' values ("" for booleans), NULL when absent */
};

struct command {
    const char *name;
    unsigned flags; /* command flags it takes */
    const char *usage, *summary, *body;
    int (*run)(struct inv *);
};

static const char global_flags_help[] =
    "Global flags (before or after the command; environment variable in brackets):\n"
    "  -e, --endpoints H:P[,H:P...]  nodes to connect to; the first that answers coordinates\n"
    "                                the transactions [KVCTL_ENDPOINTS] (default " DEFAULT_ENDPOINTS
    ")\n"
    "  -w, -o, --write-out FORMAT    text or json [KVCTL_WRITE_OUT] (default text)\n"
    "      --hex                     print keys and values as hex (text and json)\n"
    "      --connect-timeout DUR     connecting to an endpoint [KVCTL_CONNECT_TIMEOUT]\n"
    "                                (default 2s)\n"
    "      --timeout DUR             one request to the coordinating node [KVCTL_TIMEOUT]\n"
    "                                (default 10s)\n"
    "      --lock-timeout DUR        the longest lock wait before the transaction aborts and\n"
    "                                is retried [KVCTL_LOCK_TIMEOUT] (default: the node's)\n"
    "      --retries N               retries of a transaction that conflicts; 0: none\n"
    "                                [KVCTL_RETRIES] (default 10)\n"
    "      --secret-file FILE        the cluster's client secret file, mode 600 (kvcluster\n"
    "                                writes DIR/cluster.client.secret) [RDKV_SECRET_FILE]\n"
    "  -h, --help                    help for kvctl or for the command\n"
    "      --version                 print kvctl's version\n"
    "DUR is a number with a unit: 500ms, 2s, 1m (a bare number is seconds).\n";

static int cmd_get(struct inv *);
static int cmd_put(struct inv *);
static int cmd_del(struct inv *);
static int cmd_scan(struct inv *);
static int cmd_txn(struct inv *);
static int cmd_shell(struct inv *);
static int cmd_status(struct inv *);
static int cmd_help(struct inv *);
static int cmd_version(struct inv *);

static const struct command commands[] = {
    {"get", FL(F_RAW), "kvctl get [flags] KEY", "print the value of a key",
     "Prints the value of KEY. A value that is printable text (UTF-8 without control bytes\n"
     "other than tab and newline) is printed as is, followed by a newline; any other value is\n"
     "printed with fdbcli-style escapes (\\xNN, \\\\; see 'kvctl help escaping'). --hex prints\n"
     "hex, --raw the exact bytes. With -w json: {\"key\":\"...\",\"value\":\"...\"}, where\n"
     "a key or value that is not UTF-8 comes as \"key_hex\"/\"value_hex\" instead.\n"
     "A missing key prints 'kvctl: KEY: not found' on stderr and exits 3.\n"
     "\n"
     "Examples:\n"
     "  kvctl get user/42\n"
     "  kvctl get --hex blob/1\n"
     "  kvctl get --raw photo/7 > photo.jpg\n"
     "  kvctl -w json get user/42\n"
     "\n"
     "Flags:\n"
     "      --raw   write the value's exact bytes: no escaping, no newline\n",
     cmd_get},
    {"put", 0, "kvctl put [flags] KEY [VALUE|-]", "write a key",
     "Writes VALUE under KEY (inserting or overwriting) and prints OK. Without VALUE, or with\n"
     "'-', the value is read from stdin up to end of file, byte for byte. Put '--' before a\n"
     "key or value that starts with '-'. Arguments are taken literally (no escapes).\n"
     "Keys may have up to 4096 bytes and values 1 MiB unless the nodes say otherwise; a\n"
     "larger one fails with RDKV_ETOOBIG (exit 1).\n"
     "\n"
     "Examples:\n"
     "  kvctl put user/42 alice\n"
     "  kvctl put photo/7 < photo.jpg\n"
     "  printf 'a\\0b' | kvctl put blob/1 -\n"
     "  kvctl put -- -dash- value\n",
     cmd_put},
    {"del", 0, "kvctl del [flags] KEY", "delete a key",
     "Deletes KEY and prints OK; a key that is not there exits 3 ('not found').\n"
     "\n"
     "Examples:\n"
     "  kvctl del user/42\n",
     cmd_del},
    {"scan", FL(F_LIMIT) | FL(F_KEYS_ONLY) | FL(F_COUNT) | FL(F_TO_END) | FL(F_PREFIX),
     "kvctl scan [flags] BEGIN END\n"
     "  kvctl scan [flags] BEGIN --to-end\n"
     "  kvctl scan [flags] --prefix PREFIX",
     "list the keys in a range",
     "Lists the rows with BEGIN <= key < END in key order (bytes compared unsigned), one\n"
     "'KEY VALUE' line each: the key escaped with no spaces (\\x20), then the value escaped\n"
     "(see 'kvctl help escaping'). END '' or --to-end reads to the end of the key space;\n"
     "BEGIN '' starts at the first key. An END that is not after BEGIN ('scan z a') is an\n"
     "empty range: kvctl says so and exits 2. At most --limit rows are printed; when there\n"
     "are more, a hint says so on stderr. The scan runs in one transaction under range locks.\n"
     "With -w json: {\"rows\":[{\"key\":...,\"value\":...}],\"more\":false}.\n"
     "\n"
     "Examples:\n"
     "  kvctl scan user/ user0\n"
     "  kvctl scan --prefix user/ --keys-only\n"
     "  kvctl scan '' --to-end --count\n"
     "\n"
     "Flags:\n"
     "  -l, --limit N       rows at most; 0: no limit (default 1000; with --count: none)\n"
     "      --keys-only     print only the keys\n"
     "      --count         print only the number of rows\n"
     "      --to-end        no END: scan to the end of the key space\n"
     "      --prefix P      the keys that start with P (instead of BEGIN and END)\n",
     cmd_scan},
    {"txn", FL(F_FILE), "kvctl txn [flags] [-f FILE]",
     "run a guarded batch as one transaction",
     "Reads a guarded batch from stdin (or FILE) and runs it as ONE serializable transaction,\n"
     "retried on conflict up to --retries times. First come the guards, then a line '---'\n"
     "(or an empty line), then the operations:\n"
     "\n"
     "  expect KEY = VALUE      the key holds exactly VALUE\n"
     "  expect KEY absent       the key is not there\n"
     "  expect KEY exists       the key is there\n"
     "  ---\n"
     "  get KEY\n"
     "  put KEY VALUE\n"
     "  del KEY                 (a missing key is no error)\n"
     "  scan BEGIN END [LIMIT]  (END \"\": to the end; LIMIT default 1000)\n"
     "\n"
     "Tokens split on whitespace; \"double quotes\" group and allow \\xNN, \\\\ and \\\" escapes,\n"
     "'single quotes' group literally, and lines that start with '#' are comments (see\n"
     "'kvctl help escaping'). If every guard holds, kvctl prints SUCCESS and then, in order,\n"
     "each get ('KEY VALUE', or 'KEY: not found') and each scan ('KEY VALUE' lines), and exits\n"
     "0. If a guard fails, nothing is written: kvctl prints 'FAILED: expect ...' with what it\n"
     "found and exits 4 (like a conflict: the guarded write did not happen). Malformed input\n"
     "exits 2 and names the line. With -w json: {\"result\":\"SUCCESS\",\"results\":[...]} or\n"
     "{\"result\":\"FAILED\",\"line\":N,\"expect\":\"...\"}.\n"
     "\n"
     "Examples:\n"
     "  printf 'expect acct/a exists\\n---\\nput acct/a 90\\nput acct/b 110\\n' | kvctl txn\n"
     "  kvctl txn -f transfer.txn\n"
     "\n"
     "Flags:\n"
     "  -f, --file FILE   read the batch from FILE instead of stdin\n",
     cmd_txn},
    {"shell", FL(F_EXEC), "kvctl shell [flags] [--exec \"CMD; CMD; ...\"]",
     "an interactive shell with transactions",
     "Reads commands from stdin (prompt 'kvctl> ' on a terminal) or from --exec, where ';'\n"
     "separates them (a ';' in a key is written \\; or quoted: scan user: \"user;\"), and a\n"
     "scan of an empty range (END not after BEGIN) is an error. Each command is its own\n"
     "transaction (autocommit, retried on conflict) until 'begin'; then every command runs in\n"
     "one transaction until 'commit' or 'rollback'. Any error inside a transaction (a typo\n"
     "too) prints 'Rolling back current transaction' and aborts it; the commands after it\n"
     "are then refused, so that they cannot commit half a transaction, until 'rollback' or\n"
     "'commit' ends it. Tokens are split as in txn ('kvctl help escaping'). 'get' and 'del'\n"
     "of a missing key print 'KEY: not found' and are no error in the shell.\n"
     "\n"
     "Commands:\n"
     "  get KEY                 print the value (or 'KEY: not found')\n"
     "  put KEY VALUE           write a key\n"
     "  del KEY                 delete a key\n"
     "  scan BEGIN END [LIMIT]  'KEY VALUE' lines; END \"\": to the end (LIMIT default 1000)\n"
     "  begin                   start a transaction\n"
     "  commit                  commit it\n"
     "  rollback                abort it (nothing it wrote happens)\n"
     "  status                  the cluster's nodes\n"
     "  help                    this list\n"
     "  exit, quit              leave (an open transaction is rolled back)\n"
     "\n"
     "A transaction must not pause long: its node aborts one idle for half the lock lease\n"
     "(5 s by default, kvserver --lease) and its next command gets RDKV_EABORTED; run it\n"
     "again.\n"
     "Exit status: 0 when every command succeeded, 1 when any failed (as fdbcli does; the\n"
     "messages name the status), 5 when no endpoint answers, 2 on bad flags.\n"
     "\n"
     "Examples:\n"
     "  kvctl shell\n"
     "  kvctl shell --exec \"begin; get acct/a; put acct/a 90; put acct/b 110; commit\"\n"
     "  kvctl shell < script.kv\n"
     "\n"
     "Flags:\n"
     "      --exec CMDS   run these ';'-separated commands instead of reading stdin\n",
     cmd_shell},
    {"status", 0, "kvctl status [flags]", "show the cluster's nodes",
     "Asks the coordinating node for the cluster's status and prints one line per node:\n"
     "id, address, state (up or down), rows and memory. -w json prints the status document\n"
     "as the node sends it. Exits 5 when a node is down (and says which on stderr).\n"
     "\n"
     "Examples:\n"
     "  kvctl status\n"
     "  kvctl --endpoints 10.0.0.1:7400 -w json status\n",
     cmd_status},
    {"help", 0, "kvctl help [COMMAND|exit-codes|escaping]", "help for a command or topic",
     "Prints help for kvctl, for a command, or for a topic: exit-codes, escaping.\n", cmd_help},
    {"version", 0, "kvctl version", "print the version", "Prints kvctl's version.\n",
     cmd_version},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static const char exit_codes_help[] =
    "Exit codes of kvctl:\n"
    "  0  success\n"
    "  1  error: the server refused the input (a key over 4 KiB or a value over 1 MiB:\n"
    "     RDKV_ETOOBIG; RDKV_EINVAL), a file could not be read, or anything unclassified\n"
    "  2  usage: unknown command or flag, missing or extra arguments, a bad duration, number\n"
    "     or endpoint, a scan of an empty range, malformed txn input (checked before\n"
    "     connecting)\n"
    "  3  not found: get or del of a key that is not there\n"
    "  4  aborted: the transaction conflicted (or a lock wait ran out) on every one of its\n"
    "     --retries retries (RDKV_EABORTED), or a txn guard ('expect') failed; nothing was\n"
    "     written\n"
    "  5  unavailable: no endpoint answered (or no endpoint's host name resolves:\n"
    "     RDKV_ENOHOST), a node the operation needed is down or did not answer in time\n"
    "     (RDKV_EUNAVAILABLE, RDKV_ETIMEDOUT); status: a node is down\n"
    "  6  commit result unknown (RDKV_EUNKNOWN): a participant did not answer after the\n"
    "     commit decision, so the transaction may or may not have taken effect; check before\n"
    "     retrying anything that is not idempotent\n"
    "shell (with --exec or a script) exits 1 when any command failed, else 0, as fdbcli\n"
    "does; its error messages name the status.\n"
    "Errors print on stderr as 'kvctl: error: <text> (RDKV_E...)'.\n";

static const char escaping_help[] =
    "Escaping in kvctl:\n"
    "Output (text): keys and values are printed as is when they are printable ASCII or valid\n"
    "UTF-8; a backslash prints as \\\\ and any other byte as \\xNN (fdbcli style). In scan and\n"
    "txn lines the key also escapes spaces (\\x20), so the first space ends the key. 'get'\n"
    "prints a printable value (tabs and newlines allowed) exactly as stored. --hex prints\n"
    "hex instead; 'get --raw' prints the exact bytes.\n"
    "Output (json): strings are JSON strings (control bytes as \\u00XX); a key or value that\n"
    "is not valid UTF-8, or any with --hex, comes as \"key_hex\"/\"value_hex\" with hex digits.\n"
    "Input: command-line arguments of get/put/del/scan are taken literally. In txn input and\n"
    "shell commands, tokens split on whitespace; \"double quotes\" group words and allow\n"
    "escapes; 'single quotes' group literally; escapes are \\xNN (any byte), \\\\, \\\", \\',\n"
    "\\ (space), \\; (a literal ';' in the shell), \\n and \\t. \"\" is the empty string.\n"
    "Example: put \"user 1\" \"caf\\xc3\\xa9\\x00\"\n";

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(commands[i].name, name)) return &commands[i];
    return NULL;
}

static void print_main_help(FILE *f)
{
    fprintf(f,
            "kvctl: the command-line client of rdkv, a transactional key-value store.\n"
            "\n"
            "Usage:\n"
            "  kvctl [flags] COMMAND [args]\n"
            "\n"
            "Commands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n%s\n", global_flags_help);
    fprintf(f, "Run 'kvctl COMMAND --help' (or 'kvctl help COMMAND') for a command's help,\n"
               "'kvctl help exit-codes' and 'kvctl help escaping' for those topics.\n");
}

static void print_command_help(const struct command *c)
{
    printf("Usage:\n  %s\n\n%s\n%s\nExit codes: see 'kvctl help exit-codes'.\n", c->usage, c->body,
           global_flags_help);
}

static int cmd_help(struct inv *iv)
{
    if (iv->nargs == 0) {
        print_main_help(stdout);
        return flush_stdout();
    }
    if (iv->nargs > 1) return usage_err("help takes one topic, got %d", iv->nargs);
    const char *t = iv->args[0];
    const struct command *c = find_command(t);
    if (c) print_command_help(c);
    else if (!strcmp(t, "exit-codes") || !strcmp(t, "exit-code") || !strcmp(t, "exitcodes"))
        fputs(exit_codes_help, stdout);
    else if (!strcmp(t, "escaping")) fputs(escaping_help, stdout);
    else return usage_err("no help topic '%s' (commands, exit-codes, escaping)", t);
    return flush_stdout();
}

static int cmd_version(struct inv *iv)
{
    (void)iv;
    printf("kvctl %s (rdkv %s)\n", RDKV_VERSION, RDKV_VERSION);
    return flush_stdout();
}

/* ---------------------------------------------------------------------------------------------
 * get, put, del, scan. */

static int want_args(const struct inv *iv, int min, int max, const char *names)
{
    if (iv->nargs < min)
        return usage_err("%s needs %s", iv->cmd->name, names);
    if (iv->nargs > max)
        return usage_err("%s takes %s, got %d arguments (put '--' before arguments that start "
                         "with '-', quote ones with spaces)",
                         iv->cmd->name, names, iv->nargs);
    return 0;
}

static int cmd_get(struct inv *iv)
{
    int rc = want_args(iv, 1, 1, "exactly one argument: KEY");
    if (rc) return rc;
    struct op op = {.kind = OP_GET, .key = bytes_str(iv->args[0]), .raw = iv->val[F_RAW] != NULL};
    return run_oneshot(&op, "get");
}

/* Reads all of stdin (binary-safe). */
static int read_all(FILE *f, const char *name, struct buf *b)
{
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (b->len + n > STDIN_VALUE_MAX) {
            fprintf(stderr, "kvctl: error: %s holds more than %zu MiB (RDKV_ETOOBIG)\n", name,
                    STDIN_VALUE_MAX >> 20);
            return EXIT_ERROR;
        }
        buf_put(b, chunk, n);
    }
    if (ferror(f)) {
        fprintf(stderr, "kvctl: error: reading %s: %s\n", name, strerror(errno));
        return EXIT_ERROR;
    }
    return 0;
}

static int cmd_put(struct inv *iv)
{
    int rc = want_args(iv, 1, 2, "KEY and VALUE (or '-' or nothing for stdin)");
    if (rc) return rc;
    struct buf in = {0};
    struct op op = {.kind = OP_PUT, .key = bytes_str(iv->args[0])};
    if (iv->nargs == 2 && strcmp(iv->args[1], "-")) {
        op.val = bytes_str(iv->args[1]);
    } else {
        if (isatty(STDIN_FILENO))
            fputs("kvctl: reading the value from stdin (end it with Ctrl-D)\n", stderr);
        rc = read_all(stdin, "stdin", &in);
        if (rc) {
            buf_free(&in);
            return rc;
        }
        op.val = (struct bytes){in.p ? in.p : "", in.len};
    }
    rc = run_oneshot(&op, "put");
    buf_free(&in);
    return rc;
}

static int cmd_del(struct inv *iv)
{
    int rc = want_args(iv, 1, 1, "exactly one argument: KEY");
    if (rc) return rc;
    struct op op = {.kind = OP_DEL, .key = bytes_str(iv->args[0])};
    return run_oneshot(&op, "del");
}

/* The smallest key above every key that starts with p: NULL length when there is none. */
static char *prefix_end(struct bytes p, size_t *n)
{
    size_t len = p.n;
    while (len && (unsigned char)p.p[len - 1] == 0xff) len--;
    *n = len;
    if (!len) return NULL;
    char *e = xmalloc(len);
    memcpy(e, p.p, len);
    e[len - 1] = (char)((unsigned char)e[len - 1] + 1);
    return e;
}

static int cmd_scan(struct inv *iv)
{
    struct op op = {.kind = OP_SCAN, .limit = DEFAULT_LIMIT};
    op.keys_only = iv->val[F_KEYS_ONLY] != NULL;
    op.count = iv->val[F_COUNT] != NULL;
    if (op.count && op.keys_only) return usage_err("--count and --keys-only do not go together");
    if (op.count) op.limit = 0;
    if (iv->val[F_LIMIT]) {
        uint64_t v;
        if (!parse_uint(iv->val[F_LIMIT], SIZE_MAX / 2, &v))
            return usage_err("--limit needs a number of rows (0: no limit), got '%s'",
                             iv->val[F_LIMIT]);
        op.limit = (size_t)v;
    }
    char *pend = NULL;
    int rc;
    if (iv->val[F_PREFIX]) {
        if (iv->val[F_TO_END]) return usage_err("--prefix and --to-end do not go together");
        if ((rc = want_args(iv, 0, 0, "no BEGIN or END with --prefix"))) return rc;
        op.key = bytes_str(iv->val[F_PREFIX]);
        size_t n;
        pend = prefix_end(op.key, &n);
        op.end = (struct bytes){pend, n};
        op.end_open = pend == NULL;
    } else if (iv->val[F_TO_END]) {
        if ((rc = want_args(iv, 1, 1, "exactly BEGIN with --to-end"))) return rc;
        op.key = bytes_str(iv->args[0]);
        op.end_open = true;
    } else {
        if (iv->nargs == 1)
            return usage_err("scan needs BEGIN and END (END '' or --to-end: to the end)");
        if ((rc = want_args(iv, 2, 2, "BEGIN and END"))) return rc;
        op.key = bytes_str(iv->args[0]);
        op.end = bytes_str(iv->args[1]);
        op.end_open = op.end.n == 0;
        if (!op.end_open && range_empty(op.key, op.end)) {
            char m[600];
            range_empty_msg(op.key, op.end, m, sizeof m);
            return usage_err("%s", m);
        }
    }
    rc = run_oneshot(&op, "scan");
    free(pend);
    return rc;
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

static int parse_op(const struct tok *v, size_t n, bool allow_expect, struct op *op, char *err,
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

/* ---------------------------------------------------------------------------------------------
 * txn. */

static void json_txn_failed(struct buf *b, const struct job *j)
{
    const struct op *op = &j->ops[j->failed];
    buf_printf(b, "{\"result\":\"FAILED\",\"line\":%u,\"expect\":", op->line);
    put_json_string(b, bytes_str(op->text));
    buf_puts(b, ",\"found\":");
    if (!j->found_present) {
        buf_puts(b, "null");
    } else {
        buf_putc(b, '{');
        put_json_bytes(b, "value", (struct bytes){j->found.p, j->found.len});
        buf_putc(b, '}');
    }
    buf_puts(b, "}\n");
}

static int cmd_txn(struct inv *iv)
{
    int rc = want_args(iv, 0, 0, "no arguments (the batch comes from stdin or -f FILE)");
    if (rc) return rc;
    const char *file = iv->val[F_FILE];
    struct buf in = {0};
    FILE *f = stdin;
    if (file && strcmp(file, "-")) {
        f = fopen(file, "rb");
        if (!f) {
            fprintf(stderr, "kvctl: error: cannot open %s: %s\n", file, strerror(errno));
            return EXIT_ERROR;
        }
    } else if (isatty(STDIN_FILENO)) {
        fputs("kvctl: reading the transaction from stdin (guards, '---', operations; end it "
              "with Ctrl-D)\n",
              stderr);
    }
    rc = read_all(f, file ? file : "stdin", &in);
    if (f != stdin) fclose(f);
    if (rc) {
        buf_free(&in);
        return rc;
    }
    const char *name = file ? file : "stdin";
    char *dec = xmalloc(in.len + 1);
    size_t dpos = 0;
    struct toks t = {0};
    struct op *ops = NULL;
    size_t nops = 0, cap = 0;
    bool in_ops = false;
    unsigned line = 0;
    int ex = 0;
    char err[256];
    for (size_t pos = 0; pos < in.len && !ex;) {
        const char *nl = memchr(in.p + pos, '\n', in.len - pos);
        size_t ll = nl ? (size_t)(nl - (in.p + pos)) : in.len - pos;
        const char *l = in.p + pos;
        pos += ll + (nl ? 1 : 0);
        line++;
        size_t a = 0, b = ll;
        while (a < b && isspace((unsigned char)l[a])) a++;
        while (b > a && isspace((unsigned char)l[b - 1])) b--;
        if (a == b) { /* an empty line after guards ends them */
            if (nops) in_ops = true;
            continue;
        }
        if (b - a == 3 && !memcmp(l + a, "---", 3)) {
            if (in_ops && nops && !is_expect(ops[nops - 1].kind)) {
                ex = usage_err("%s:%u: a second '---' line", name, line);
                break;
            }
            in_ops = true;
            continue;
        }
        size_t lp = 0;
        if (tokenize(l, ll, &lp, false, dec, &dpos, &t, err, sizeof err)) {
            ex = usage_err("%s:%u: %s", name, line, err);
            break;
        }
        if (t.n == 0) continue; /* a comment */
        if (nops == cap) {
            cap = cap ? 2 * cap : 16;
            ops = xrealloc(ops, cap * sizeof *ops);
        }
        struct op *op = &ops[nops];
        if (parse_op(t.v, t.n, !in_ops, op, err, sizeof err)) {
            ex = usage_err("%s:%u: %s", name, line, err);
            break;
        }
        if (!is_expect(op->kind)) in_ops = true; /* operations without guards need no '---' */
        op->line = line;
        op->text = strndup(l + a, b - a);
        if (!op->text) die_oom();
        nops++;
    }
    if (!ex && nops == 0) ex = usage_err("%s: no operations in the transaction", name);
    if (!ex) {
        mark_for_update(ops, nops);
        ex = connect_session();
    }
    if (!ex) {
        struct job j = {.ops = ops, .nops = nops, .o = {.ctx = CTX_TXN}};
        rc = run_txn(job_fn, &j);
        struct buf o = {0};
        if (rc == 0) {
            if (G.out == OUT_JSON) {
                buf_puts(&o, "{\"result\":\"SUCCESS\",\"results\":[");
                buf_put(&o, j.o.b.p, j.o.b.len);
                buf_puts(&o, "]}\n");
            } else {
                buf_puts(&o, "SUCCESS\n");
                buf_put(&o, j.o.b.p, j.o.b.len);
            }
            fwrite(o.p, 1, o.len, stdout);
            print_more_hint(&j.o);
            ex = flush_stdout();
        } else if (rc == KVCTL_EXPECT_FAILED) {
            const struct op *op = &j.ops[j.failed];
            if (G.out == OUT_JSON) {
                json_txn_failed(&o, &j);
            } else {
                buf_printf(&o, "FAILED: %s (line %u; found ", op->text, op->line);
                if (!j.found_present) {
                    buf_puts(&o, "absent");
                } else {
                    buf_puts(&o, "\"");
                    put_value_text(&o, (struct bytes){j.found.p, j.found.len});
                    buf_puts(&o, "\"");
                }
                buf_puts(&o, ")\n");
            }
            fwrite(o.p, 1, o.len, stdout);
            flush_stdout();
            fputs("kvctl: a guard failed: the transaction was aborted and wrote nothing\n",
                  stderr);
            ex = EXIT_ABORTED;
        } else if (rc == RDKV_ETOOBIG) {
            fprintf(stderr,
                    "kvctl: error: txn: a key or value is over the cluster's limit (by default "
                    "keys may have at most %d bytes and values %d bytes (1 MiB)) (%s)\n",
                    KEY_LIMIT_DEFAULT, VALUE_LIMIT_DEFAULT, rdkv_status_name(rc));
            ex = EXIT_ERROR;
        } else {
            status_err(rc, "txn");
            ex = exit_code(rc);
        }
        buf_free(&o);
        buf_free(&j.o.b);
        buf_free(&j.found);
    }
    for (size_t i = 0; i < nops; i++) free(ops[i].text);
    free(ops);
    free(t.v);
    free(dec);
    buf_free(&in);
    return ex;
}

/* ---------------------------------------------------------------------------------------------
 * status: a minimal JSON reader for the status document. */

enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jv {
    enum jtype t;
    bool b;
    double num;
    char *s;            /* J_STR */
    size_t n;           /* J_ARR, J_OBJ: items */
    struct jv *items;
    char **keys;        /* J_OBJ */
};

static void jv_free(struct jv *v)
{
    free(v->s);
    for (size_t i = 0; i < v->n; i++) {
        jv_free(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
}

static void js_ws(const char **p)
{
    while (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r') (*p)++;
}

static int js_value(const char **p, struct jv *v, int depth);

static int js_string(const char **p, char **out)
{
    struct buf b = {0};
    (*p)++;
    while (**p && **p != '"') {
        char c = *(*p)++;
        if (c != '\\') {
            buf_putc(&b, c);
            continue;
        }
        c = *(*p)++;
        switch (c) {
        case 'n': buf_putc(&b, '\n'); break;
        case 't': buf_putc(&b, '\t'); break;
        case 'r': buf_putc(&b, '\r'); break;
        case 'b': buf_putc(&b, '\b'); break;
        case 'f': buf_putc(&b, '\f'); break;
        case 'u': {
            unsigned cp = 0;
            for (int i = 0; i < 4; i++) {
                int h = hexval(**p);
                if (h < 0) goto bad;
                cp = cp * 16 + (unsigned)h;
                (*p)++;
            }
            if (cp < 0x80) buf_putc(&b, (char)cp);
            else buf_putc(&b, '?');
            break;
        }
        case 0: goto bad;
        default: buf_putc(&b, c);
        }
    }
    if (**p != '"') goto bad;
    (*p)++;
    *out = b.p ? b.p : strdup("");
    if (!*out) die_oom();
    return 0;
bad:
    buf_free(&b);
    return -1;
}

static int js_value(const char **p, struct jv *v, int depth)
{
    memset(v, 0, sizeof *v);
    if (depth > 32) return -1;
    js_ws(p);
    const char *s = *p;
    if (*s == '{' || *s == '[') {
        bool obj = *s == '{';
        v->t = obj ? J_OBJ : J_ARR;
        (*p)++;
        js_ws(p);
        if (**p == (obj ? '}' : ']')) {
            (*p)++;
            return 0;
        }
        size_t cap = 0;
        for (;;) {
            if (v->n == cap) {
                cap = cap ? 2 * cap : 8;
                v->items = xrealloc(v->items, cap * sizeof *v->items);
                if (obj) v->keys = xrealloc(v->keys, cap * sizeof *v->keys);
            }
            char *key = NULL;
            if (obj) {
                js_ws(p);
                if (**p != '"' || js_string(p, &key)) return -1;
                js_ws(p);
                if (**p != ':') {
                    free(key);
                    return -1;
                }
                (*p)++;
            }
            if (obj) v->keys[v->n] = key;
            int rc = js_value(p, &v->items[v->n], depth + 1);
            v->n++;
            if (rc) return -1;
            js_ws(p);
            if (**p == ',') {
                (*p)++;
                continue;
            }
            if (**p != (obj ? '}' : ']')) return -1;
            (*p)++;
            return 0;
        }
    }
    if (*s == '"') {
        v->t = J_STR;
        return js_string(p, &v->s);
    }
    if (!strncmp(s, "true", 4) || !strncmp(s, "false", 5)) {
        v->t = J_BOOL;
        v->b = *s == 't';
        *p += v->b ? 4 : 5;
        return 0;
    }
    if (!strncmp(s, "null", 4)) {
        *p += 4;
        return 0;
    }
    char *end;
    v->num = strtod(s, &end);
    if (end == s) return -1;
    v->t = J_NUM;
    *p = end;
    return 0;
}

static const struct jv *jv_get(const struct jv *o, const char *const *names)
{
    if (!o || o->t != J_OBJ) return NULL;
    for (const char *const *n = names; *n; n++)
        for (size_t i = 0; i < o->n; i++)
            if (!strcmp(o->keys[i], *n)) return &o->items[i];
    return NULL;
}

static void fmt_bytes(char *out, size_t cap, double v)
{
    static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (v >= 1024 && i < 4) v /= 1024, i++;
    if (i == 0) snprintf(out, cap, "%.0f B", v);
    else snprintf(out, cap, "%.1f %s", v, u[i]);
}

/* One cell of the table from a JSON value. */
static void fmt_cell(char *out, size_t cap, const struct jv *v, bool bytes)
{
    if (!v) snprintf(out, cap, "-");
    else if (v->t == J_STR) snprintf(out, cap, "%s", v->s);
    else if (v->t == J_NUM && bytes) fmt_bytes(out, cap, v->num);
    else if (v->t == J_NUM) snprintf(out, cap, "%.0f", v->num);
    else if (v->t == J_BOOL) snprintf(out, cap, "%s", v->b ? "true" : "false");
    else if (v->t == J_OBJ && bytes) {
        static const char *const used[] = {"used", "used_bytes", "allocated", NULL};
        static const char *const total[] = {"total", "total_bytes", "arena", "arena_bytes", NULL};
        const struct jv *a = jv_get(v, used), *b = jv_get(v, total);
        char x[32] = "-", y[32] = "-";
        if (a && a->t == J_NUM) fmt_bytes(x, sizeof x, a->num);
        if (b && b->t == J_NUM) fmt_bytes(y, sizeof y, b->num);
        snprintf(out, cap, "%s / %s", x, y);
    } else snprintf(out, cap, "-");
}

/* Whether a node's entry says it is up. */
static bool node_up(const struct jv *n)
{
    static const char *const st[] = {"state", "status", "health", NULL};
    static const char *const upk[] = {"up", "alive", "reachable", NULL};
    const struct jv *s = jv_get(n, st), *u = jv_get(n, upk);
    if (u && u->t == J_BOOL) return u->b;
    if (s && s->t == J_STR)
        return !strcmp(s->s, "up") || !strcmp(s->s, "ok") || !strcmp(s->s, "alive") ||
               !strcmp(s->s, "ready") || !strcmp(s->s, "running") || !strcmp(s->s, "healthy");
    if (s && s->t == J_BOOL) return s->b;
    return true;
}

static void print_replication(const struct jv *nodes, const struct jv *coord, struct buf *o);

static int print_status(const char *js, struct buf *o, struct buf *errs, int *down_out)
{
    struct jv root;
    const char *p = js;
    int down = 0;
    if (js_value(&p, &root, 0)) {
        jv_free(&root);
        return -1;
    }
    static const char *const nodes_k[] = {"nodes", "members", NULL};
    const struct jv *nodes = root.t == J_ARR ? &root : jv_get(&root, nodes_k);
    if (!nodes || nodes->t != J_ARR) {
        jv_free(&root);
        return -1;
    }
    static const char *const id_k[] = {"id", "node", "node_id", NULL};
    static const char *const addr_k[] = {"address", "addr", "endpoint", NULL};
    static const char *const rows_k[] = {"rows", "keys", "row_count", NULL};
    static const char *const mem_k[] = {"memory",     "memory_bytes", "mem_bytes", "arena_used",
                                        "used_bytes", "arena_bytes",  "arena",     NULL};
    static const char *const used_k[] = {"heap_used", NULL};
    static const char *const total_k[] = {"heap_bytes", NULL};
    static const char *const err_k[] = {"error", "reason", NULL};
    static const char *const coord_k[] = {"coordinator", NULL};
    const struct jv *coord = jv_get(&root, coord_k);
    buf_printf(o, "%-6s %-22s %-6s %10s  %s\n", "NODE", "ADDRESS", "STATE", "ROWS",
               "MEMORY (used / heap)");
    for (size_t i = 0; i < nodes->n; i++) {
        const struct jv *n = &nodes->items[i];
        char id[32], addr[256], rows[32], mem[96];
        fmt_cell(id, sizeof id, jv_get(n, id_k), false);
        if (!strcmp(id, "-")) snprintf(id, sizeof id, "%zu", i);
        fmt_cell(addr, sizeof addr, jv_get(n, addr_k), false);
        fmt_cell(rows, sizeof rows, jv_get(n, rows_k), false);
        const struct jv *used = jv_get(n, used_k), *total = jv_get(n, total_k);
        if (used && total && used->t == J_NUM && total->t == J_NUM) {
            char a[32], b[32];
            fmt_bytes(a, sizeof a, used->num);
            fmt_bytes(b, sizeof b, total->num);
            snprintf(mem, sizeof mem, "%s / %s", a, b);
        } else {
            fmt_cell(mem, sizeof mem, jv_get(n, mem_k), true);
        }
        bool up = node_up(n);
        char idc[40];
        bool is_coord = coord && coord->t == J_NUM && id[0] != '-' && atof(id) == coord->num;
        snprintf(idc, sizeof idc, "%s%s", id, is_coord ? "*" : "");
        buf_printf(o, "%-6s %-22s %-6s %10s  %s\n", idc, addr, up ? "up" : "down", rows, mem);
        if (!up) {
            down++;
            const struct jv *e = jv_get(n, err_k);
            buf_printf(errs, "kvctl: node %s (%s) is down%s%s\n", id, addr,
                       e && e->t == J_STR ? ": " : "", e && e->t == J_STR ? e->s : "");
        }
    }
    if (coord && coord->t == J_NUM) buf_puts(o, "(* the node that answered)\n");
    print_replication(nodes, coord, o);
    jv_free(&root);
    *down_out = down;
    return 0;
}

/* Node `node`'s stream of partition `part` to its new copies, from its own status (NULL when
 * it fills none). */
static const struct jv *fill_progress(const struct jv *nodes, double node, double part)
{
    static const char *const status_k[] = {"status", NULL}, *const repl_k[] = {"replication", NULL},
                             *const parts_k[] = {"partitions", NULL},
                             *const part_k[] = {"partition", NULL}, *const id_k[] = {"node", NULL},
                             *const fill_k[] = {"fill", NULL};
    for (size_t i = 0; i < nodes->n; i++) {
        const struct jv *id = jv_get(&nodes->items[i], id_k),
                        *st = jv_get(&nodes->items[i], status_k);
        const struct jv *rp = st ? jv_get(st, repl_k) : NULL;
        const struct jv *ps = rp ? jv_get(rp, parts_k) : NULL;
        if (!id || id->t != J_NUM || id->num != node || !ps || ps->t != J_ARR) continue;
        for (size_t k = 0; k < ps->n; k++) {
            const struct jv *p = jv_get(&ps->items[k], part_k);
            if (p && p->t == J_NUM && p->num == part) return jv_get(&ps->items[k], fill_k);
        }
    }
    return NULL;
}

/* A replicated cluster's configuration as the answering node holds it (docs/replication.md):
 * its replica count, epoch and manager, and each partition's primary and backups. Nothing for a
 * cluster without ZooKeeper. */
static void print_replication(const struct jv *nodes, const struct jv *coord, struct buf *o)
{
    static const char *const status_k[] = {"status", NULL}, *const repl_k[] = {"replication", NULL},
                             *const zk_k[] = {"zookeeper", NULL}, *const r_k[] = {"replicas", NULL},
                             *const ep_k[] = {"epoch", NULL}, *const mgr_k[] = {"manager", NULL},
                             *const parts_k[] = {"partitions", NULL},
                             *const part_k[] = {"partition", NULL}, *const id_k[] = {"node", NULL},
                             *const fill_k[] = {"filling", NULL}, *const rows_k[] = {"rows", NULL},
                             *const of_k[] = {"of", NULL};
    const struct jv *mine = NULL;
    int manager = -1;
    for (size_t i = 0; i < nodes->n; i++) {
        const struct jv *st = jv_get(&nodes->items[i], status_k);
        const struct jv *rp = st ? jv_get(st, repl_k) : NULL;
        const struct jv *id = jv_get(&nodes->items[i], id_k);
        if (!rp || rp->t != J_OBJ || !id || id->t != J_NUM) continue;
        const struct jv *m = jv_get(rp, mgr_k);
        if (m && m->t == J_BOOL && m->b) manager = (int)id->num;
        if (!mine || (coord && coord->t == J_NUM && id->num == coord->num)) mine = rp;
    }
    const struct jv *zk = mine ? jv_get(mine, zk_k) : NULL, *r = mine ? jv_get(mine, r_k) : NULL,
                    *ep = mine ? jv_get(mine, ep_k) : NULL,
                    *parts = mine ? jv_get(mine, parts_k) : NULL;
    if (!zk || zk->t != J_STR || !r || r->t != J_NUM || !ep || ep->t != J_NUM || !parts ||
        parts->t != J_ARR)
        return;
    char mgr[32] = "none known";
    if (manager >= 0) snprintf(mgr, sizeof mgr, "node %d", manager);
    buf_printf(o, "\nreplicas %.0f, configuration epoch %.0f in ZooKeeper %s, manager %s\n",
               r->num, ep->num, zk->s, mgr);
    buf_printf(o, "%-10s %-8s %s\n", "PARTITION", "PRIMARY", "BACKUPS");
    for (size_t i = 0; i < parts->n; i++) {
        const struct jv *p = jv_get(&parts->items[i], part_k),
                        *set = jv_get(&parts->items[i], r_k);
        if (!p || p->t != J_NUM || !set || set->t != J_ARR) continue;
        const struct jv *filling = jv_get(&parts->items[i], fill_k);
        char prim[16] = "-", backs[128] = "";
        size_t bl = 0;
        for (size_t k = 0; k < set->n; k++) {
            if (set->items[k].t != J_NUM) continue;
            bool being = false; /* a copy still being filled: "+" */
            for (size_t f = 0; filling && filling->t == J_ARR && f < filling->n; f++)
                being |= filling->items[f].t == J_NUM && filling->items[f].num == set->items[k].num;
            if (k == 0) snprintf(prim, sizeof prim, "%.0f", set->items[k].num);
            else if (bl < sizeof backs)
                bl += (size_t)snprintf(backs + bl, sizeof backs - bl, "%s%.0f%s", bl ? " " : "",
                                       set->items[k].num, being ? "+" : "");
        }
        buf_printf(o, "%-10.0f %-8s %s", p->num, prim, backs[0] ? backs : "-");
        /* the primary's own status says how far its stream to the new copies has got */
        const struct jv *prog = set->n && set->items[0].t == J_NUM
                                    ? fill_progress(nodes, set->items[0].num, p->num)
                                    : NULL;
        const struct jv *rows = prog ? jv_get(prog, rows_k) : NULL,
                        *of = prog ? jv_get(prog, of_k) : NULL;
        if (rows && rows->t == J_NUM && of && of->t == J_NUM) {
            double frac = of->num > 0 ? rows->num / of->num : 1;
            if (frac > 1) frac = 1;
            char bar[21];
            for (int b = 0; b < 20; b++) bar[b] = b < (int)(frac * 20 + 0.5) ? '#' : '.';
            bar[20] = 0;
            buf_printf(o, "   filling [%s] %3.0f%%, %.0f of %.0f rows", bar, frac * 100, rows->num,
                       of->num);
        } else if (filling && filling->t == J_ARR && filling->n) {
            buf_printf(o, "   (+: being filled)");
        }
        /* fewer copies than R: a failure not yet made good, or a copy dropped for want of
         * room (docs/replication.md, section 7) -- until a node joins */
        if ((double)set->n < r->num)
            buf_printf(o, "   only %zu of %.0f copies", set->n, r->num);
        buf_printf(o, "\n");
    }
}

/* Fetches the status and prints it; returns the exit status (and rdkv's status in *st). */
static int do_status(int *st)
{
    char *js = NULL;
    int rc = rdkv_cluster_status(S, &js);
    *st = rc;
    if (rc) {
        status_err(rc, "status");
        return exit_code(rc);
    }
    struct buf o = {0}, errs = {0};
    int down = 0;
    bool parsed = print_status(js, &o, &errs, &down) == 0;
    if (G.out == OUT_JSON || !parsed) {
        fputs(js, stdout);
        if (!*js || js[strlen(js) - 1] != '\n') putchar('\n');
        if (!parsed) fputs("kvctl: warning: the status document has no list of nodes\n", stderr);
    } else {
        fwrite(o.p, 1, o.len, stdout);
    }
    int ex = flush_stdout();
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

static int cmd_status(struct inv *iv)
{
    int rc = want_args(iv, 0, 0, "no arguments");
    if (rc) return rc;
    if ((rc = connect_session())) return rc;
    int st;
    return do_status(&st);
}

/* ---------------------------------------------------------------------------------------------
 * shell. */

struct shell {
    rdkv_txn *t;      /* the open transaction after begin */
    bool txn_failed;  /* an error rolled the transaction back: refuse commands until its end */
    bool interactive;
    unsigned failed;
    bool quit;
};

static const char shell_help[] =
    "Commands (';' separates several on one line; quoting as in 'kvctl help escaping'):\n"
    "  get KEY                 print the value (or 'KEY: not found')\n"
    "  put KEY VALUE           write a key\n"
    "  del KEY                 delete a key\n"
    "  scan BEGIN END [LIMIT]  'KEY VALUE' lines; END \"\": to the end (LIMIT default 1000)\n"
    "  begin                   start a transaction: the commands up to commit run in it\n"
    "  commit                  commit the transaction\n"
    "  rollback                abort it: nothing it wrote happens\n"
    "  status                  the cluster's nodes\n"
    "  help                    this list\n"
    "  exit, quit              leave (an open transaction is rolled back)\n"
    "Without begin, every command is its own transaction (autocommit, retried on conflict).\n"
    "After an error inside a transaction it is rolled back and further commands are refused\n"
    "until 'rollback' (or 'commit') ends it.\n"
    "A transaction must not pause long: its node aborts one idle for half the lock lease\n"
    "(5 s by default, kvserver --lease) and its next command gets RDKV_EABORTED; run it\n"
    "again.\n";

static void shell_print(const struct buf *b)
{
    if (b->len) fwrite(b->p, 1, b->len, stdout);
    fflush(stdout);
}

/* A command failed: count it, and roll back the open transaction (as fdbcli does). */
static void shell_fail(struct shell *sh)
{
    sh->failed++;
    if (!sh->t) return;
    fputs("Rolling back current transaction\n", stderr);
    rdkv_txn_abort(sh->t);
    rdkv_txn_free(sh->t);
    sh->t = NULL;
    sh->txn_failed = true;
}

static void shell_status_msg(int rc, const char *what, const struct op *op)
{
    if (rc == RDKV_ETOOBIG && op) toobig_err(what, op->key.n, op->val.n, op->kind == OP_PUT);
    else status_err(rc, "%s", what);
}

static void shell_ctl(struct shell *sh, const char *word)
{
    bool json = G.out == OUT_JSON;
    if (sh->txn_failed) {
        sh->txn_failed = false;
        if (!strcmp(word, "commit")) {
            fputs("kvctl: error: the transaction was rolled back after an error; nothing was "
                  "committed\n",
                  stderr);
            shell_fail(sh);
        } else if (!strcmp(word, "begin")) {
            fputs("kvctl: error: the transaction was rolled back after an error; end it with "
                  "rollback before a new begin\n",
                  stderr);
            sh->txn_failed = true;
            shell_fail(sh);
        } else {
            puts(json ? "{\"ok\":true,\"txn\":\"rollback\"}" : "Transaction rolled back");
            fflush(stdout);
        }
        return;
    }
    if (!strcmp(word, "begin")) {
        if (sh->t) {
            fputs("kvctl: error: a transaction is already open (commit or rollback first)\n",
                  stderr);
            shell_fail(sh);
            return;
        }
        int rc = rdkv_txn_begin(S, &sh->t);
        if (rc) {
            sh->t = NULL;
            status_err(rc, "begin");
            shell_fail(sh);
            return;
        }
        puts(json ? "{\"ok\":true,\"txn\":\"begin\"}" : "Transaction started");
    } else if (!strcmp(word, "commit")) {
        if (!sh->t) {
            fputs("kvctl: error: no transaction is open (begin starts one)\n", stderr);
            shell_fail(sh);
            return;
        }
        int rc = rdkv_txn_commit(sh->t);
        rdkv_txn_free(sh->t);
        sh->t = NULL;
        if (rc) {
            status_err(rc, "commit");
            if (rc != RDKV_EUNKNOWN) fputs("kvctl: the transaction wrote nothing\n", stderr);
            shell_fail(sh);
            return;
        }
        puts(json ? "{\"ok\":true,\"txn\":\"commit\"}" : "Committed");
    } else if (!strcmp(word, "rollback") || !strcmp(word, "abort") || !strcmp(word, "reset")) {
        if (!sh->t) {
            fputs("kvctl: error: no transaction is open\n", stderr);
            shell_fail(sh);
            return;
        }
        rdkv_txn_abort(sh->t);
        rdkv_txn_free(sh->t);
        sh->t = NULL;
        puts(json ? "{\"ok\":true,\"txn\":\"rollback\"}" : "Transaction rolled back");
    }
    fflush(stdout);
}

static void shell_command(struct shell *sh, struct tok *v, size_t n, bool glued_semi)
{
    char err[256];
    if (n == 1 && (tok_is(&v[0], "exit") || tok_is(&v[0], "quit"))) {
        sh->quit = true;
        return;
    }
    if (tok_is(&v[0], "help")) {
        fputs(shell_help, stdout);
        fflush(stdout);
        return;
    }
    static const char *const ctl[] = {"begin", "commit", "rollback", "abort", "reset", NULL};
    for (const char *const *c = ctl; *c; c++)
        if (tok_is(&v[0], *c)) {
            if (n != 1) {
                fprintf(stderr, "kvctl: error: %s takes no arguments\n", *c);
                shell_fail(sh);
                return;
            }
            shell_ctl(sh, *c);
            return;
        }
    if (tok_is(&v[0], "status")) {
        if (n != 1) {
            fputs("kvctl: error: status takes no arguments\n", stderr);
            shell_fail(sh);
            return;
        }
        int st;
        if (do_status(&st)) shell_fail(sh);
        return;
    }
    if (sh->txn_failed) {
        fputs("kvctl: error: the current transaction was rolled back after an error; commands "
              "are ignored until 'rollback' (or 'commit') ends it\n",
              stderr);
        shell_fail(sh);
        return;
    }
    struct op op;
    if (parse_op(v, n, false, &op, err, sizeof err)) {
        /* "scan user: user;": the ';' ended the command, and the END the user meant with it */
        if (glued_semi && tok_is(&v[0], "scan"))
            fprintf(stderr, "kvctl: error: %s; a ';' ends a shell command: write \\; or quote "
                            "the word (\"user;\") for a ';' in a key\n",
                    err);
        else
            fprintf(stderr, "kvctl: error: %s (type 'help' for the commands)\n", err);
        shell_fail(sh);
        return;
    }
    char what[16];
    snprintf(what, sizeof what, "%.*s", (int)(v[0].n < 8 ? v[0].n : 8), v[0].p);
    struct out o = {.ctx = CTX_SHELL, .first = true};
    if (sh->t) {
        int rc = exec_op(sh->t, &op, &o);
        shell_print(&o.b);
        print_more_hint(&o);
        if (rc && rc != RDKV_ENOTFOUND) {
            shell_status_msg(rc, what, &op);
            shell_fail(sh);
        }
    } else {
        struct job j = {.ops = &op, .nops = 1, .o = {.ctx = CTX_SHELL}};
        int rc = run_txn(job_fn, &j);
        if (rc == 0) {
            shell_print(&j.o.b);
            print_more_hint(&j.o);
        } else {
            shell_status_msg(rc, what, &op);
            shell_fail(sh);
        }
        buf_free(&j.o.b);
        buf_free(&j.found);
    }
    buf_free(&o.b);
}

/* Runs the ';'-separated commands of one line. */
static void shell_line(struct shell *sh, const char *line, size_t len, unsigned lineno)
{
    char *dec = xmalloc(len + 1);
    struct toks t = {0};
    char err[256];
    for (size_t pos = 0; pos < len && !sh->quit;) {
        size_t dpos = 0;
        if (tokenize(line, len, &pos, true, dec, &dpos, &t, err, sizeof err)) {
            if (sh->interactive || !lineno) fprintf(stderr, "kvctl: error: %s\n", err);
            else fprintf(stderr, "kvctl: error: line %u: %s\n", lineno, err);
            shell_fail(sh);
            break;
        }
        if (t.n) shell_command(sh, t.v, t.n, t.glued_semi);
    }
    free(t.v);
    free(dec);
}

static int cmd_shell(struct inv *iv)
{
    int rc = want_args(iv, 0, 0, "no arguments (commands come from stdin or --exec)");
    if (rc) return rc;
    if ((rc = connect_session())) return rc;
    struct shell sh = {.interactive = !iv->val[F_EXEC] && isatty(STDIN_FILENO)};
    if (iv->val[F_EXEC]) {
        shell_line(&sh, iv->val[F_EXEC], strlen(iv->val[F_EXEC]), 0);
    } else {
        if (sh.interactive)
            fprintf(stderr, "kvctl %s connected to %s. Type 'help' for the commands.\n",
                    RDKV_VERSION, G.endpoints);
        char *line = NULL;
        size_t cap = 0;
        unsigned lineno = 0;
        for (;;) {
            if (sh.interactive) {
                fputs(sh.txn_failed ? "kvctl(failed txn)> " : sh.t ? "kvctl(txn)> " : "kvctl> ",
                      stdout);
                fflush(stdout);
            }
            ssize_t n = getline(&line, &cap, stdin);
            if (n < 0) break;
            lineno++;
            shell_line(&sh, line, (size_t)n, lineno);
            if (sh.quit) break;
        }
        if (sh.interactive && !sh.quit) putchar('\n');
        free(line);
    }
    if (sh.t || sh.txn_failed) {
        if (sh.t)
            fputs("kvctl: the transaction left open was rolled back (commit it to keep it)\n",
              stderr);
        if (sh.t) {
            rdkv_txn_abort(sh.t);
            rdkv_txn_free(sh.t);
            if (!sh.interactive) sh.failed++;
        }
        sh.t = NULL;
    }
    fflush(stdout);
    return sh.failed ? EXIT_ERROR : 0;
}

/* ---------------------------------------------------------------------------------------------
 * Flags and main. */

static int set_global(enum flag_id id, const char *v, const char *src)
{
    uint64_t u;
    int64_t ms;
    switch (id) {
    case F_ENDPOINTS:
        G.endpoints = v;
        G.endpoints_from = src[0] == '-' ? "--endpoints" : src; /* src: a flag on the stack */
        return 0;
    case F_WRITE_OUT:
        if (!strcmp(v, "text") || !strcmp(v, "simple")) G.out = OUT_TEXT;
        else if (!strcmp(v, "json")) G.out = OUT_JSON;
        else return usage_err("%s must be text or json, got '%s'", src, v);
        return 0;
    case F_HEX: G.hex = true; return 0;
    case F_CONNECT_TIMEOUT:
    case F_TIMEOUT:
    case F_LOCK_TIMEOUT:
        if (!parse_duration_ms(v, &ms))
            return usage_err("%s needs a duration such as 500ms, 2s or 1m, got '%s'", src, v);
        if (id == F_CONNECT_TIMEOUT) G.connect_ms = ms;
        else if (id == F_TIMEOUT) G.timeout_ms = ms;
        else G.lock_ms = ms;
        return 0;
    case F_RETRIES:
        if (!parse_uint(v, 1000000, &u))
            return usage_err("%s needs a number of retries (0..1000000), got '%s'", src, v);
        G.retries = (unsigned)u;
        return 0;
    case F_SECRET_FILE: G.secret_file = v; return 0;
    default: return 0;
    }
}

static int read_env(void)
{
    static const struct {
        const char *env;
        enum flag_id id;
    } envs[] = {
        {"KVCTL_ENDPOINTS", F_ENDPOINTS},         {"KVCTL_WRITE_OUT", F_WRITE_OUT},
        {"KVCTL_CONNECT_TIMEOUT", F_CONNECT_TIMEOUT}, {"KVCTL_TIMEOUT", F_TIMEOUT},
        {"KVCTL_LOCK_TIMEOUT", F_LOCK_TIMEOUT},   {"KVCTL_RETRIES", F_RETRIES},
    };
    for (size_t i = 0; i < sizeof envs / sizeof envs[0]; i++) {
        const char *v = getenv(envs[i].env);
        if (v && *v) {
            int rc = set_global(envs[i].id, v, envs[i].env);
            if (rc) return rc;
        }
    }
    return 0;
}

static const struct flag *find_long(const char *name, size_t n)
{
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (strlen(flags[i].lng) == n && !strncmp(flags[i].lng, name, n)) return &flags[i];
    return NULL;
}

static const struct flag *find_short(char c)
{
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (flags[i].shrt == c || (flags[i].shrt2 && flags[i].shrt2 == c)) return &flags[i];
    return NULL;
}

/* Finds the command named in argv for --help (the first argument that names one). */
static const struct command *help_target(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--")) break;
        const struct command *c = find_command(argv[i]);
        if (c) return c;
    }
    return NULL;
}

/* Sorts argv into the command, its arguments and flags (iv->args has room for argc). Returns 0,
 * or the exit status after a usage error. */
static int parse_cmdline(int argc, char **argv, struct inv *iv)
{
    int rc;
    bool dashdash = false;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (dashdash || a[0] != '-' || !a[1]) {
            if (!iv->cmd) {
                iv->cmd = find_command(a);
                if (!iv->cmd) return usage_err("unknown command '%s'", a);
                cur_cmd = iv->cmd->name;
                continue;
            }
            iv->args[iv->nargs++] = a;
            continue;
        }
        if (!strcmp(a, "--")) {
            dashdash = true;
            continue;
        }
        const struct flag *fl;
        const char *val = NULL;
        char shown[64];
        if (a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            size_t n = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
            fl = find_long(a + 2, n);
            snprintf(shown, sizeof shown, "--%.*s", (int)(n < 40 ? n : 40), a + 2);
            if (eq) val = eq + 1;
        } else {
            fl = find_short(a[1]);
            snprintf(shown, sizeof shown, "-%c", a[1]);
            if (a[2]) val = a + 2;
        }
        if (!fl) return usage_err("unknown flag '%s'", a);
        unsigned bit = 1u << fl->id;
        if (!(bit & GLOBAL_FLAGS) && !(iv->cmd && (iv->cmd->flags & bit))) {
            if (iv->cmd) return usage_err("%s does not take the flag %s", iv->cmd->name, shown);
            return usage_err("the flag %s goes after its command", shown);
        }
        if (fl->value && !val) {
            if (i + 1 >= argc) return usage_err("flag %s needs a value", shown);
            val = argv[++i];
        } else if (!fl->value && val) {
            return usage_err("flag %s takes no value", shown);
        }
        if (fl->id == F_VERSION) {
            iv->cmd = find_command("version");
            continue;
        }
        if (bit & GLOBAL_FLAGS) {
            if ((rc = set_global(fl->id, val ? val : "", shown))) return rc;
        } else {
            iv->val[fl->id] = val ? val : "";
        }
    }
    if (!iv->cmd) {
        print_main_help(stderr);
        return EXIT_USAGE;
    }
    return 0;
}

int main(int argc, char **argv)
{
    /* --help wins over everything else on the line, as with cobra. */
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            const struct command *c = help_target(argc, argv);
            if (c && strcmp(c->name, "help")) print_command_help(c);
            else print_main_help(stdout);
            return flush_stdout();
        }
    int rc = read_env();
    if (rc) return rc;
    struct inv iv = {0};
    iv.args = xmalloc(sizeof(char *) * (size_t)argc);
    rc = parse_cmdline(argc, argv, &iv);
    if (!rc) rc = iv.cmd->run(&iv);
    if (S) rdkv_session_close(S);
    free(iv.args);
    return rc;
}
