/* One rdkv node as a library: the fabric, the partition's store, the range-lock service, the
 * transaction layer, the remote-session service and the peer watcher. kvserver runs one per
 * process; rdkv_node_start (embedded mode) runs one inside an application. Options come from a
 * kvserver-style command line, parsed here for both. */
#ifndef RDKV_SERVER_NODE_H
#define RDKV_SERVER_NODE_H

#include "storage/store.h"
#include "server/session.h"
#include "txn/txn.h"

#include <stdbool.h>

/* --rpc-threads' default with --data-dir (docs/storage.md, "In the node"). */
#define NODE_DURABLE_RPC_THREADS 64u
#include <stdint.h>

#define NODE_VERSION "0.1.0"
/* The exit status of a node that stopped because its redo log failed a record its memory depends
 * on (EX_IOERR): a restart on a good disk recovers from the log (docs/storage.md, "Errors"). */
#define NODE_EXIT_LOG_FAILED 74

struct node_opts {
    const char *config;
    long node;                    /* -1 until given */
    const char *transport;        /* NULL: the config's, else auto */
    struct fab_opts fab;          /* arena, rpc threads, listen fd, verbs, spin, pause */
    int64_t peer_wait_ns;         /* default 30 s */
    int ready_fd;                 /* -1: none */
    struct txn_cfg txn;           /* --row-lock, --range-lock, --lock-timeout, --lease */
    struct store_opts store;      /* --key-max, --value-max, --heap */
    struct session_cfg sessions;  /* --max-sessions, --session-idle, --session-threads */
    int64_t heartbeat_ns;         /* peer watcher period (default 200 ms) */
    unsigned heartbeat_misses;    /* missed answers before a peer is down (default 3) */
    bool bench;                   /* --bench: the program registers kvbench's services (kvserver:
                                     daemon_run); else the node refuses them (NODE_BENCH_OFF) */
    const char *data_dir;         /* --data-dir: the redo log's directory; NULL: in memory */
    int durability;               /* --durability (enum wal_durability; default group) */
    uint64_t checkpoint_every;    /* --checkpoint-every: log bytes between checkpoints (0: none) */
    uint64_t log_segment;         /* --log-segment: the redo log's segment size (0: its default) */
    bool init;                    /* --init: the data dir may be empty (a new partition) */
    int64_t replica_lease_ns;     /* --replica-lease: a member's lease at the configuration
                                     manager (replicated clusters; default 1 s) */
    const char *metrics;          /* --metrics HOST:PORT: serve Prometheus's /metrics (NULL: no) */
    bool metrics_off;             /* --metrics off: count nothing (server/metrics.h) */
    int fault_wal, fault_errno;   /* testing, --fault-wal: 1 write, 2 sync (0: none), its errno;
                                     3 sync-delay, its microseconds */
};


struct node;
/* Loads the config and starts the node (not waiting for peers). On failure writes a one-line
 * reason into err. */
int node_start(const struct node_opts *o, struct node **out, char *err, size_t errcap);
/* Waits until every peer answers, up to wait_ns (stop() returning true ends the wait early with
 * RDKV_ESHUTDOWN). RDKV_EUNAVAILABLE with the reason in err when one does not. */
int node_wait_peers(struct node *n, int64_t wait_ns, bool (*stop)(void *), void *arg, char *err,
                    size_t errcap);
/* Stops serving and frees everything. Embedded sessions must be closed first. */
void node_stop(struct node *n);

/* A node not started for benchmarks (--bench) answers every type of the benchmark block
 * (KV_RPC_BENCH_FIRST .. KV_RPC_BENCH_LAST, rdma/rpc_types.h) with RDKV_ENOTSUP and this text. */
#define NODE_BENCH_OFF "not enabled on this node (start it with --bench)"

struct fabric *node_fabric(struct node *n);
struct txn_env *node_txn(struct node *n);
struct range_server *node_range_server(struct node *n);
uint16_t node_id(const struct node *n);
/* How the node's partitions are kept, for its start line (server/replica.h). */
void node_describe_replication(struct node *n, char *buf, size_t cap);

/* Where --metrics serves ("HOST:PORT"), or NULL. */
const char *node_metrics_address(const struct node *n);
/* The node's status as JSON (what KV_RPC_STATUS answers): this node's identity, store and the
 * peer watcher's view of every node. malloc'd. */
char *node_status_json(struct node *n);
/* Every node's status as this node sees it (its own, each peer's answer or why none), as the
 * JSON document rdkv_cluster_status returns; c is the calling thread's context. malloc'd. */
char *node_cluster_status_json(struct node *n, struct fab_ctx *c);

#endif
