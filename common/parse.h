/* Strict parsers for numbers, sizes, durations and host:port strings from command lines and files.
 * Each returns 0 or RDKV_EINVAL; none accepts trailing garbage, signs where none make sense, or
 * values that overflow. */
#ifndef RDKV_PARSE_H
#define RDKV_PARSE_H

#include <stddef.h>
#include <stdint.h>

int parse_u64(const char *s, uint64_t *out);
int parse_i64(const char *s, int64_t *out);
/* Unsigned integer within [lo, hi]. */
int parse_uint_range(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
int parse_double(const char *s, double *out);
/* Byte sizes: "4096", "64K", "64KiB", "256M", "1G" (binary multiples, case-insensitive). */
int parse_size(const char *s, uint64_t *out);
/* Durations: "1.5" (seconds), "250ms", "20us", "100ns", "2s", "1m". */
int parse_duration_ns(const char *s, int64_t *out);
/* "host:port", "[ipv6]:port". host is copied into host[hostcap]; port must be 1..65535
 * (or 0 when allow_zero). */
int parse_hostport(const char *s, char *host, size_t hostcap, uint16_t *port, int allow_zero);

#endif
