/* The stores rdkv is compared with (kvbench ycsb --db redis|postgres): one connection per
 * worker, and per store the load, one operation of each kind, and the transfer check. The
 * operations come from the same YCSB worker as rdkv's (ycsb.h: ycsb_draw) and the same transfer
 * draw (transfer.h), and run on kvbench's runner, so the op mix, the key choosers, the
 * statistics and the report are rdkv's own. A peer reports outcomes as rdkv statuses: 0,
 * RDKV_ENOTFOUND, or an error; a retried conflict (nil EXEC, serialization failure) counts in
 * st->aborts. */
#ifndef RDKV_KVBENCH_PEER_H
#define RDKV_KVBENCH_PEER_H

#include "tools/kvbench/workload.h"
#include "tools/kvbench/ycsb.h"

#include <stdint.h>

#define PEER_MAX_FIELDS 1000 /* fieldcount a peer takes (kvbench checks it before it starts) */

struct peer_ops {
    const char *name;      /* --db NAME */
    const char *semantics; /* how the operations map onto the store, for the report */
    int (*connect)(const char *target, void **conn, char *err, size_t errcap);
    void (*close)(void *conn);
    /* Drops and creates the YCSB table, then loads records 0..recordcount-1 (keys and values
     * from the YCSB worker gen) through this connection. */
    int (*ycsb_load)(void *conn, const struct ycsb_props *p, void *gen, char *err, size_t errcap);
    /* Runs drawn operation d to its outcome in st. Returns 0, or a negative status when the
     * connection is broken and the worker must stop. */
    int (*ycsb_op)(void *conn, const struct ycsb_props *p, void *gen, const struct ycsb_draw *d,
                   struct wl_step *st);
    /* Creates accounts 0..n-1 with XFER_INITIAL each (replacing earlier ones). */
    int (*xfer_load)(void *conn, uint64_t n, char *err, size_t errcap);
    /* Moves min(amount, source balance) from one account to the other, atomically. */
    int (*xfer_op)(void *conn, uint64_t from, uint64_t to, int64_t amount, struct wl_step *st);
    /* The number of accounts and their total. */
    int (*xfer_sum)(void *conn, uint64_t n, uint64_t *found, int64_t *total, char *err,
                    size_t errcap);
};

#ifdef KVBENCH_HAVE_REDIS
extern const struct peer_ops peer_redis;
#endif
#ifdef KVBENCH_HAVE_PG
extern const struct peer_ops peer_pg;
#endif

/* After a conflict (nil EXEC, serialization failure): true to try again (counted in
 * st->aborts), false when the step must give up (st->status is then RDKV_EABORTED). */
bool peer_retry(struct wl_step *st);

/* "rdkv, redis, postgres": the --db values this kvbench was built with. */
const char *peer_dbs(void);

/* kvbench ycsb's peer options (--db, --redis, --pg). */
struct peer_cli {
    const char *db; /* NULL or "rdkv": rdkv */
    const char *redis, *pg;
};
/* 1 if argv[*i] was one of them (its value consumed), 0 if not; exits on bad usage. */
int peer_cli_opt(struct peer_cli *pc, int argc, char **argv, int *i);
extern const char peer_cli_help[];

struct drive_cli;
/* kvbench ycsb load|run on a peer: accounts > 0 runs the transfer workload on that many
 * accounts, otherwise the YCSB mix of p. Returns the exit status. */
int peer_ycsb_main(const struct peer_cli *pc, struct drive_cli *c, const struct ycsb_props *p,
                   bool load, bool run, uint64_t accounts);

#endif
