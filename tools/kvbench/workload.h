/* kvbench's drivers (YCSB, TPC-C) as workloads: what one worker does on one rdkv session, apart
 * from how it is run. The runner (runner.c) runs workers either embedded (threads inside each
 * node process, sessions from rdkv_session_open, so a key's locality follows from where it is
 * partitioned) or remote (threads in kvbench, sessions from rdkv_connect), and does the timing,
 * the statistics, the status lines and the output. A workload never times itself.
 *
 * Everything a workload needs to know is in its config bytes (packed by the workload, shipped to
 * every node by RPC in embedded mode) and in its place (which process and worker it is). */
#ifndef RDKV_KVBENCH_WORKLOAD_H
#define RDKV_KVBENCH_WORKLOAD_H

#include "rdkv.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WL_MAX_OPS 8

/* What a workload's check found: the parts checked so far, summed (wl_check_merge). Each check
 * (a consistency condition) counts how often it was checked and failed, with its first failure;
 * count and sum are the class's own tallies (rows seen, accounts found, balances). */
#define WL_MAX_CHECKS 6
#define WL_CHECK_TEXT 160
struct wl_check {
    uint64_t checked[WL_MAX_CHECKS], failed[WL_MAX_CHECKS];
    uint64_t count[WL_MAX_CHECKS];
    int64_t sum[WL_MAX_CHECKS];
    char first[WL_MAX_CHECKS][WL_CHECK_TEXT]; /* "" while that check has not failed */
};

/* Where a worker runs. */
struct wl_place {
    unsigned nodes;    /* nodes in the cluster */
    int node;          /* embedded: the node this worker runs in; remote: -1 */
    unsigned proc;     /* this process's index among the processes running workers */
    unsigned nprocs;   /* embedded: = nodes (proc = node); remote: 1 */
    unsigned worker;   /* index of this worker within its process */
    unsigned nworkers; /* workers in this process */
    uint64_t run;      /* the same for every worker of one run, different between runs */
};

/* One operation: what the runner asks (give_up_at) and what it records (the rest). */
struct wl_step {
    int64_t give_up_at; /* in: retry conflicts only until this clock_now_ns() time; then the
                           outcome is the last status (RDKV_EABORTED: counted as an error) */
    unsigned op;      /* index into the class's op_names */
    int status;       /* 0: ok; RDKV_ENOTFOUND: counted as NOT_FOUND; other < 0: an error */
    uint32_t aborts;  /* conflict aborts retried inside this operation before its outcome */
    bool rolled_back; /* an intended rollback (TPC-C New-Order's 1%): counted as ok */
};

struct wl_class {
    const char *name;                   /* "ycsb", "tpcc" */
    unsigned nops;
    const char *op_names[WL_MAX_OPS];   /* "READ", "NEW_ORDER", ... as printed */
    /* Validates packed config bytes (they come from the network in embedded mode): 0 or
     * RDKV_EINVAL with the reason in err. */
    int (*cfg_check)(const void *cfg, size_t len, char *err, size_t errcap);
    /* Loads part `part` of `nparts` of the initial data through session s (embedded: part =
     * the node id, and the part is chosen so that it is that node's own data). */
    int (*load)(rdkv_session *s, const void *cfg, size_t len, unsigned part, unsigned nparts,
                char *err, size_t errcap);
    /* Before a run on data loaded earlier (may be NULL): reads `want` of the rows the run
     * expects (the first, the last and others spread between), through s, and counts in
     * *found those that are there. 0, or a status when it could not look. */
    int (*probe)(rdkv_session *s, const void *cfg, size_t len, unsigned want, unsigned *found);
    /* A worker's private state. seed differs per worker and run. */
    int (*worker_new)(const void *cfg, size_t len, const struct wl_place *pl, uint64_t seed,
                      void **out);
    /* Runs one operation to its outcome (retrying conflict aborts itself, counting them) and
     * fills *st, which comes zeroed but for give_up_at. Returns 0, or a negative status when the session itself is broken and the
     * worker must stop (then st is not recorded). */
    int (*step)(void *w, rdkv_session *s, struct wl_step *st);
    void (*worker_free)(void *w);
    /* After a run (check may be NULL: nothing to check), the data's invariants are checked in
     * check_parts(cfg) parts, each through a session of its own, and the parts' findings
     * summed. Part p's data lives on node p mod nodes, so kvbench checks it there, every node
     * its own parts at once, each with local reads. check adds part `part`'s findings to *acc
     * and returns 0, or a negative status when it could not check. */
    int (*check)(rdkv_session *s, const void *cfg, size_t len, unsigned part,
                 struct wl_check *acc);
    unsigned (*check_parts)(const void *cfg, size_t len);
    const char *check_part_name; /* what a part is, for progress lines ("warehouse") */
    /* The report of the whole check (lines ending in '\n', the verdict last, kept whole
     * however small out is); returns how many checks failed. */
    int (*check_report)(const void *cfg, size_t len, const struct wl_check *all, char *out,
                        size_t outcap);
};

/* wl_check's zero, the sum of two (counts add up, first failures stay the earliest part's),
 * and the RPC form of it. */
void wl_check_init(struct wl_check *c);
void wl_check_merge(struct wl_check *dst, const struct wl_check *src);
/* Records one outcome of check i: a failure when fail_fmt is not NULL (printf-style). */
void wl_check_note(struct wl_check *c, unsigned i, const char *fail_fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Every part of c's check through s, one after another, then its report: what check_report
 * returns, or the first negative status of a part (its reason in out). */
int wl_check_all(const struct wl_class *c, rdkv_session *s, const void *cfg, size_t len,
                 char *out, size_t outcap);

extern const struct wl_class wl_ycsb;
extern const struct wl_class wl_tpcc;
extern const struct wl_class wl_transfer;

/* For a class's load: puts rows 0..n-1 of part `part` of `nparts`. With nparts = nodes a part is
 * the rows whose key rdkv_key_partition places on node `part` (so each node inserts its own
 * rows locally), otherwise every nparts-th row. key(arg, i, buf, cap) names row i (its length,
 * or < 0); value(arg, i, &v, &vlen) gives its value, asked only for this part's rows. 200 puts
 * per transaction. */
int wl_load_rows(rdkv_session *s, uint64_t n, unsigned part, unsigned nparts, unsigned nodes,
                 int (*key)(void *arg, uint64_t i, char *buf, size_t cap),
                 void (*value)(void *arg, uint64_t i, const void **v, size_t *vlen), void *arg);
/* For a class's probe: reads rows i of 0..n-1 spread evenly (the first and the last among them;
 * key(arg, i, buf, cap) names row i), want of them at most, one rdkv_get each, and counts those
 * found. */
int wl_probe_rows(rdkv_session *s, uint64_t n, unsigned want, unsigned *found,
                  int (*key)(void *arg, uint64_t i, char *buf, size_t cap), void *arg);

/* The class with that name, or NULL. */
const struct wl_class *wl_class_find(const char *name);
/* Makes a class of this process findable by name (kvbench's peers, which the nodes do not
 * have). At most 8; call before any run starts. */
void wl_class_register(const struct wl_class *c);

#endif
