/* A node's counters for operators (docs/metrics.md): the process's metrics (common/metrics.h)
 * and the node's gauges, written in Prometheus's text exposition format (version 0.0.4) and
 * served over HTTP at /metrics (kvserver --metrics HOST:PORT), or as a JSON object in the node's
 * status (what `kvctl stats` shows).
 *
 * The server is libmicrohttpd's, on one thread of its own; it reads the counters without
 * touching the data path. What an outsider can make it hold is bounded: METRICS_HTTP_CONNS
 * connections (METRICS_HTTP_PER_IP from one address), each with a small buffer and an idle
 * timeout; requests other than GET or HEAD of /metrics get 405 or 404 and no work. */
#ifndef RDKV_SERVER_METRICS_H
#define RDKV_SERVER_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define METRICS_HTTP_CONNS 16
#define METRICS_HTTP_PER_IP 4
#define METRICS_HTTP_IDLE_S 10

/* What the node adds to the process's counters at the moment of a scrape. */
struct metrics_gauges {
    uint16_t node;
    const char *version, *row_lock, *range_lock, *conflict, *transport;
    int64_t uptime_ns;
    uint64_t rows;
    uint64_t sessions;
    uint64_t arena_bytes;     /* the registered arena */
    uint64_t heap_bytes, heap_used; /* the record heap inside it */
};
typedef void (*metrics_gauges_fn)(void *arg, struct metrics_gauges *g);

/* Writes every metric in the text format to out. 0, or RDKV_ENOMEM. */
int metrics_write_text(FILE *out, const struct metrics_gauges *g);
/* Writes the counters as the members of an open JSON object (common/json.h). */
struct json;
void metrics_write_json(struct json *j);

/* "HOST:PORT", "[V6]:PORT" or ":PORT" (127.0.0.1); port 0 allowed. 0 or RDKV_EINVAL. */
int metrics_addr_parse(const char *s, char *host, size_t hostcap, uint16_t *port);

struct metrics_http;
/* Serves /metrics on host:port ("HOST:PORT", "[V6]:PORT" or ":PORT" for 127.0.0.1; port 0: any
 * free one). 0, or a status with the reason in err. */
int metrics_http_start(const char *hostport, metrics_gauges_fn fn, void *arg,
                       struct metrics_http **out, char *err, size_t errcap);
/* The address it listens on, as "HOST:PORT". */
const char *metrics_http_address(const struct metrics_http *h);
void metrics_http_stop(struct metrics_http *h);

#endif
