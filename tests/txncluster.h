/* In-process rdkv clusters for the transaction tests: n full nodes (rdkv_node_start: each its own
 * fabric, arena, store and threads) on ephemeral 127.0.0.1 ports, talking only through the
 * transport chosen by --transport (tests/testenv.h), plus small helpers over the public API
 * (include/rdkv.h): remote sessions coordinated by a chosen node, a key's partition, u64 values
 * and one-shot writes. Everything here is bounded in time; nothing sleeps to synchronise. */
#ifndef RDKV_TEST_TXNCLUSTER_H
#define RDKV_TEST_TXNCLUSTER_H

#include "rdkv.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TC_MAX 4

struct tcluster {
    unsigned n;
    char dir[256];  /* mkdtemp directory holding the config file ($TMPDIR or /tmp) */
    char conf[300]; /* the config file */
    uint16_t ports[TC_MAX];
    rdkv_node *node[TC_MAX];
};

/* Starts n nodes (arena 64M each, the transport of tenv_transport). extra (NULL-terminated, may
 * be NULL) is appended to every node's kvserver-style options, e.g. {"--lock-timeout", "50ms"};
 * so are "--row-lock $RDKV_TEST_ROW_LOCK", "--range-lock $RDKV_TEST_RANGE_LOCK" and
 * "--conflict $RDKV_TEST_CONFLICT" when set.
 * Returns 0, or a status with the reason printed. */
int tc_start(struct tcluster *c, unsigned n, const char *const *extra);
/* Stops every node (close all sessions first) and removes the config directory. */
void tc_stop(struct tcluster *c);

/* Opens a remote session (rdkv_connect) whose coordinator is node `coord`: the endpoint list
 * starts with it and goes on with the others. o may be NULL. */
int tc_connect(struct tcluster *c, unsigned coord, const rdkv_options *o, rdkv_session **out);
/* The endpoint list of every node, starting with node `first`. */
void tc_endpoints(const struct tcluster *c, unsigned first, char *buf, size_t cap);

/* The partition (node) owning key, as the transaction layer computes it: XXH3(key) mod n. */
unsigned tc_partition(const struct tcluster *c, const void *key, size_t klen);

/* A u64 as 8 little-endian bytes, and back (false when the value is not 8 bytes). */
void tc_u64_put(uint8_t out[8], uint64_t v);
bool tc_u64_get(const void *val, size_t vlen, uint64_t *out);

/* One transaction that writes key = val, retried while retryable (rdkv_run_txn). */
int tc_put1(rdkv_session *s, const char *key, const void *val, size_t vlen);
/* One transaction that reads key; the value is copied into buf (cap bytes; *vlen gets the
 * full length). RDKV_ENOTFOUND when absent. */
int tc_get1(rdkv_session *s, const char *key, void *buf, size_t cap, size_t *vlen);

#endif
