/* Pieces every kvbench subcommand shares: getting a cluster (launching local nodes or reading a
 * config), a client fabric on it, stop-on-signal, per-measurement statistics, and the output
 * formats (YCSB-style text, JSON). */
#ifndef RDKV_KVBENCH_H
#define RDKV_KVBENCH_H

#include "common/hist.h"
#include "common/json.h"
#include "rdma/fabric.h"
#include "tools/launcher.h"

#include <stdbool.h>
#include <stdio.h>

struct bench_cluster {
    struct launch L;
    bool launched;
    struct cluster_config cc; /* when read from --config */
    const struct cluster_config *cfg;
    struct fabric *f;         /* a client fabric (owns no arena) */
    enum fab_transport transport;
};

/* Common option parsing: returns 1 if argv[*i] was one of the shared options (and consumes its
 * value), 0 if not, or exits with a usage error. */
struct bench_common {
    unsigned nodes;
    const char *config;
    enum fab_transport transport;
    uint64_t arena;
    double seconds;
    const char *json;
    int64_t spin_ns; /* client contexts poll this long before blocking; < 0: the default */
    const char *endpoints;    /* a running cluster named by host:port list (any of its nodes) */
    const char *node_args[12]; /* more kvserver arguments for launched nodes, NULL-terminated */
    const char *secret_file;  /* --secret-file: the cluster's secret (also for its sessions) */
    bool insecure;            /* --insecure: launched nodes run --insecure, and no credential is
                                 offered (benchmarks of the handshake's cost only) */
};
/* rdkv_strerror for the answer to a node-side benchmark or workload RPC: RDKV_ENOTSUP there
 * means the node was not started for benchmarks (kvserver --bench), and says so. */
const char *bench_strerror(int status);

/* Either launches `nodes` local kvserver processes (config == NULL) or uses the cluster in
 * config; then opens a client fabric on it and waits (up to wait_ns) until every node answers. */
int bench_cluster_open(struct bench_cluster *b, const struct bench_common *co, int64_t wait_ns,
                       char *err, size_t errcap);
/* The start every cluster benchmark shares: stop-on-signal, then bench_cluster_open. 0, or 1
 * after "kvbench CMD: error: ..." on stderr. */
int bench_start(struct bench_cluster *b, const struct bench_common *co, const char *cmd,
                int64_t wait_ns);
/* The end they share: closes the cluster ("kvbench CMD: a node did not stop cleanly" makes rc
 * 1) and returns rc, or 130 after "kvbench CMD: interrupted" when a signal stopped the run. */
int bench_finish(struct bench_cluster *b, const char *cmd, int rc);
/* Closes the fabric and stops the nodes it launched. Returns non-zero if a node did not exit
 * cleanly. */
int bench_cluster_close(struct bench_cluster *b);

/* Set by SIGINT/SIGTERM: measurements end early, launched nodes are still stopped. */
extern volatile int bench_stop;
void bench_install_signals(void);

/* One measured series. Latencies are recorded in nanoseconds. */
struct bench_stats {
    char name[48];
    unsigned depth;
    uint64_t ok, errors;
    double seconds;
    double round_trips_per_op;
    struct hist h;
};

double bench_ops_per_s(const struct bench_stats *s);
/* YCSB text: "[NAME], Metric, value" lines. */
void bench_print_ycsb(FILE *out, const struct bench_stats *s);
/* A JSON object with op/size/depth supplied by the caller already open: adds the metrics. */
void bench_json_metrics(struct json *j, const struct bench_stats *s);
/* Opens --json's file for `kvbench <cmd>` and writes the head every result file shares:
 * {"benchmark": cmd, "config": {"transport", "nodes", "local_nodes", ... -- the config object is
 * left open for the caller's own keys. NULL, with a message, if the file cannot be written. */
FILE *bench_json_begin(struct json *j, const char *path, const char *cmd,
                       const struct bench_cluster *bc, const char *transport, unsigned nodes);

/* A point measured --repeat times: sorts its n runs (each `size` bytes) by ops(run), ascending,
 * and returns the one with the median throughput, which stands for the point. */
void *bench_median_run(void *runs, unsigned n, size_t size, double (*ops)(const void *run));

/* Runs gnuplot on a script, its messages to stderr: 0 plotted, 1 gnuplot is not installed (the
 * script and data stay for later), -1 it failed. */
int bench_gnuplot(const char *script);

void bench_common_init(struct bench_common *c);
/* cmd: the subcommand, for messages ("kvbench ycsb: ..."). */
int bench_common_opt(struct bench_common *c, const char *cmd, int argc, char **argv, int *i);

/* "kvbench CMD: <fmt with arg>" and a pointer to --help on stderr; exits 2. */
_Noreturn void bench_usage_error(const char *cmd, const char *fmt, const char *arg);
/* Whether a command's --help text lists option o (at the start of one of its lines). */
bool bench_help_lists(const char *help, const char *o);
/* Option o came last, with no value: "needs a value" when help lists it, else "unknown
 * option". Exits 2. */
_Noreturn void bench_value_missing(const char *cmd, const char *help, const char *o);

#endif
