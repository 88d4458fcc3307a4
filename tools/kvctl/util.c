/* kvctl's small pieces: memory, a growable byte buffer, numbers, durations and endpoints from
 * the command line, and the error messages with their exit statuses. */
#include "tools/kvctl/kvctl.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * Small pieces: a growable byte buffer, byte strings. */

_Noreturn void die_oom(void)
{
    fputs("kvctl: error: out of memory (RDKV_ENOMEM)\n", stderr);
    exit(EXIT_ERROR);
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) die_oom();
    return p;
}

void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) die_oom();
    return p;
}

void buf_reserve(struct buf *b, size_t more)
{
    if (b->len + more + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1) cap *= 2;
    b->p = xrealloc(b->p, cap);
    b->cap = cap;
}

void buf_put(struct buf *b, const void *d, size_t n)
{
    buf_reserve(b, n);
    if (n) memcpy(b->p + b->len, d, n);
    b->len += n;
    b->p[b->len] = 0;
}

void buf_putc(struct buf *b, char c)
{
    buf_put(b, &c, 1);
}
void buf_puts(struct buf *b, const char *s)
{
    buf_put(b, s, strlen(s));
}

void buf_printf(struct buf *b, const char *fmt, ...)
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

void buf_free(struct buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

struct bytes bytes_str(const char *s)
{
    return (struct bytes){s, strlen(s)};
}

/* ---------------------------------------------------------------------------------------------
 * Errors and exit codes. */

int exit_code(int st)
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
int usage_err(const char *fmt, ...)
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
void status_err(int st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("kvctl: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, ": %s%s (%s)\n", rdkv_strerror(st), status_advice(st), rdkv_status_name(st));
}

/* The message for RDKV_ETOOBIG on a key of klen and a value of vlen bytes. */
void toobig_err(const char *what, size_t klen, size_t vlen, bool has_value)
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
 * Parsing numbers, durations and endpoints. */

/* A decimal integer in [0, max]. */
bool parse_uint(const char *s, uint64_t max, uint64_t *out)
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
bool parse_duration_ms(const char *s, int64_t *ms)
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
bool endpoints_valid(const char *eps, char *bad, size_t badcap)
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

int want_args(const struct inv *iv, int min, int max, const char *names)
{
    if (iv->nargs < min)
        return usage_err("%s needs %s", iv->cmd->name, names);
    if (iv->nargs > max)
        return usage_err("%s takes %s, got %d arguments (put '--' before arguments that start "
                         "with '-', quote ones with spaces)",
                         iv->cmd->name, names, iv->nargs);
    return 0;
}

/* Reads all of f (binary-safe), at most STDIN_VALUE_MAX bytes. */
int read_all(FILE *f, const char *name, struct buf *b)
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
