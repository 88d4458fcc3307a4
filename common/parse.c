/* Strict parsers. */
#include "parse.h"

#include "rdkv_status.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int parse_u64(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)s[0])) return RDKV_EINVAL;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return RDKV_EINVAL;
    *out = v;
    return 0;
}

int parse_i64(const char *s, int64_t *out)
{
    if (!s) return RDKV_EINVAL;
    const char *d = (s[0] == '-' || s[0] == '+') ? s + 1 : s;
    if (!isdigit((unsigned char)d[0])) return RDKV_EINVAL;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return RDKV_EINVAL;
    *out = v;
    return 0;
}

int parse_uint_range(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    uint64_t v;
    if (parse_u64(s, &v) || v < lo || v > hi) return RDKV_EINVAL;
    *out = v;
    return 0;
}

int parse_double(const char *s, double *out)
{
    if (!s || !*s || isspace((unsigned char)s[0])) return RDKV_EINVAL;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v)) return RDKV_EINVAL;
    *out = v;
    return 0;
}

int parse_size(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)s[0])) return RDKV_EINVAL;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno) return RDKV_EINVAL;
    unsigned shift = 0;
    if (*end) {
        switch (toupper((unsigned char)*end)) {
        case 'K': shift = 10; break;
        case 'M': shift = 20; break;
        case 'G': shift = 30; break;
        case 'T': shift = 40; break;
        case 'B': shift = 0; break;
        default: return RDKV_EINVAL;
        }
        const char *rest = end + 1;
        if (toupper((unsigned char)*end) != 'B' && *rest) {
            if (!strcasecmp(rest, "iB") || !strcasecmp(rest, "B")) rest += strlen(rest);
        }
        if (*rest) return RDKV_EINVAL;
    }
    if (shift && v > (UINT64_MAX >> shift)) return RDKV_EINVAL;
    *out = (uint64_t)v << shift;
    return 0;
}

int parse_duration_ns(const char *s, int64_t *out)
{
    if (!s || !(isdigit((unsigned char)s[0]) || s[0] == '.')) return RDKV_EINVAL;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || !isfinite(v) || v < 0) return RDKV_EINVAL;
    double mult;
    if (!*end || !strcmp(end, "s")) mult = 1e9;
    else if (!strcmp(end, "ms")) mult = 1e6;
    else if (!strcmp(end, "us")) mult = 1e3;
    else if (!strcmp(end, "ns")) mult = 1;
    else if (!strcmp(end, "m")) mult = 60e9;
    else return RDKV_EINVAL;
    double ns = v * mult;
    if (ns > 9.2e18) return RDKV_EINVAL;
    *out = (int64_t)ns;
    return 0;
}

int parse_hostport(const char *s, char *host, size_t hostcap, uint16_t *port, int allow_zero)
{
    if (!s || !*s) return RDKV_EINVAL;
    const char *colon, *hstart = s;
    size_t hlen;
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (!rb || rb[1] != ':') return RDKV_EINVAL;
        hstart = s + 1;
        hlen = (size_t)(rb - hstart);
        colon = rb + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon || strchr(s, ':') != colon) return RDKV_EINVAL;
        hlen = (size_t)(colon - s);
    }
    if (hlen == 0 || hlen >= hostcap) return RDKV_EINVAL;
    for (size_t i = 0; i < hlen; i++) {
        unsigned char c = (unsigned char)hstart[i];
        if (!(isalnum(c) || c == '.' || c == '-' || c == ':' || c == '_' || c == '%'))
            return RDKV_EINVAL;
    }
    uint64_t p;
    if (parse_uint_range(colon + 1, allow_zero ? 0 : 1, 65535, &p)) return RDKV_EINVAL;
    memcpy(host, hstart, hlen);
    host[hlen] = 0;
    *port = (uint16_t)p;
    return 0;
}
