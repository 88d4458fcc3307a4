/* Driving a workload (workload.h) on a cluster from kvbench: loading it through the nodes,
 * running it embedded (workers inside the nodes, started and polled by RPC) or remote (workers
 * here, on rdkv_connect sessions spread over the nodes), status lines while it runs, the final
 * report in YCSB's text format, JSON or CSV, and the workload's checks. */
#ifndef RDKV_KVBENCH_DRIVE_H
#define RDKV_KVBENCH_DRIVE_H

#include "tools/kvbench/bench.h"
#include "tools/kvbench/runner.h"

enum drive_fmt { DRIVE_TEXT, DRIVE_JSON, DRIVE_CSV };

struct drive_opts {
    const struct wl_class *cls;
    const uint8_t *cfg;
    uint32_t cfg_len;
    bool remote;            /* workers here (else in the nodes) */
    unsigned threads;       /* embedded: per node; remote: in all */
    unsigned tasks;         /* workers per thread, each a task (1: the thread itself) */
    int64_t warmup_ns, run_ns;
    uint64_t ops;           /* measured operations in all (0: time only) */
    double target;          /* operations per second in all (0: closed loop) */
    double status_interval; /* seconds; 0: no status lines */
    uint64_t seed;
    int64_t lock_timeout_ns;
    enum drive_fmt fmt;
    /* remote only: where workers get their sessions (NULL: rdkv_connect to the cluster's nodes;
     * a peer's workers (peer.h) get none and open their own connections) */
    wl_session_fn open;
    void *open_arg;
};

struct drive {
    struct bench_cluster *bc;
    struct fab_ctx *c;
    char endpoints[4096]; /* every node's host:port */
};

int drive_open(struct drive *d, struct bench_cluster *bc, char *err, size_t errcap);
void drive_close(struct drive *d);
/* Loads every node's part, all nodes at once. */
int drive_load(struct drive *d, const struct drive_opts *o, char *err, size_t errcap);
/* Runs and fills total (measured window in total->elapsed_ns). Status lines go to stderr. */
int drive_run(struct drive *d, const struct drive_opts *o, struct wl_stats *total, char *err,
              size_t errcap);
/* Runs the workload's check, each part on the node that holds its data (the nodes at once),
 * with progress lines on stderr ("<who>: checked 2 of 3 warehouses"): *failed checks and the
 * report (malloc'd). */
int drive_check(struct drive *d, const struct drive_opts *o, const char *who, int *failed,
                char **report, char *err, size_t errcap);

/* The final report, with the run's configuration as key/value strings (kv: k0, v0, k1, v1, ...,
 * NULL): "# key: value" comment lines in text and CSV, a "run" object in JSON. check_report, when
 * not NULL, ends the text (and the CSV, as comment lines; it goes into JSON as "check"). */
void drive_report(FILE *out, const struct drive_opts *o, const struct wl_stats *total,
                  const char *const *kv, const char *check_report);
/* Operations that ended in an error; that found no record (Return=NOT_FOUND). */
uint64_t drive_errors(const struct wl_stats *s);
uint64_t drive_not_found(const struct wl_stats *s);

#endif

/* A --tasks sweep: each run's figures, and a table comparing them with the first. */
#define DRIVE_MAX_SWEEP 8
struct drive_sweep_row {
    unsigned tasks;
    double ops_s, csw, rt;
    double p50[WL_MAX_OPS], p99[WL_MAX_OPS];
    uint64_t count[WL_MAX_OPS];
};
struct drive_sweep {
    unsigned n;
    struct drive_sweep_row row[DRIVE_MAX_SWEEP];
};
void drive_sweep_add(struct drive_sweep *sw, const struct drive_opts *o, const struct wl_stats *t);
/* The table (nothing for a single run). */
void drive_sweep_print(FILE *out, const struct drive_sweep *sw, const struct drive_opts *o);

/* Options both drivers take (besides bench_common's): parsed into cli. */
struct drive_cli {
    struct bench_common co;
    struct drive_opts o;
    unsigned tasks_list[DRIVE_MAX_SWEEP]; /* --tasks K[,K...]: one run per value, same nodes */
    unsigned ntasks;
    const char *row_lock, *range_lock;
    const char *node_lock_timeout; /* --lock-timeout, passed to launched nodes */
    const char *drtm_lease;        /* --drtm-lease, passed to launched nodes */
    const char *conflict;          /* --conflict, passed to launched nodes */
    bool seconds_given;
    char node_arg_store[4][32];
};
void drive_cli_init(struct drive_cli *c);
/* 1 if argv[*i] was a driver option (its value consumed), 0 if not; exits on bad usage. */
int drive_cli_opt(struct drive_cli *c, const char *cmd, int argc, char **argv, int *i);
/* The shared options' help text. */
extern const char drive_cli_help[];
/* Checks combinations and sets the launched nodes' arguments. Exits on bad usage. */
void drive_cli_finish(struct drive_cli *c, const char *cmd);
