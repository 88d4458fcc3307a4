/* kvbench's services inside the nodes: the lock, range and txn benchmarks and the workload
 * service (embedded ycsb and tpcc workers, runner.h's protocol). kvbench asks every node, by RPC
 * (the benchmark block of rdma/rpc_types.h), to run worker threads on its own fabric, so a
 * worker's "local" lock is in its own arena and nodes share nothing but the fabric. This header
 * is the protocol (shared with kvbench) and the node side. Only kvserver links the node side
 * (tools/kvserver.c), and serves it when started with --bench; the server library and librdkv
 * know nothing of it. */
#ifndef RDKV_KVBENCH_NODE_BENCH_H
#define RDKV_KVBENCH_NODE_BENCH_H

#include "common/hist.h"
#include "common/pack.h"
#include "tools/kvbench/fields.h"
#include "rdma/fabric.h"

#define BENCH_MAX_THREADS 64
#define BENCH_MAX_TASKS 256    /* lock clients per thread */
#define BENCH_MAX_CLIENTS 1024 /* threads x tasks on one node */

/* KV_RPC_BENCH_LOCK_PREPARE: u32 total locks. Zeroes this node's part of the lock table. */
/* KV_RPC_BENCH_LOCK_RUN: a bench_lock_req; answered when the run ends with a bench_lock_res. */
enum bench_dist { BENCH_DIST_UNIFORM = 0, BENCH_DIST_POWERLAW = 1 };
#define BENCH_MAX_LOCKS_PER_OP 16

/* The HPDC'16 paper's microbenchmarks (kvbench lock --bench; digest section 2.2). NONE is
 * kvbench's own op: a busy cs_ns inside, a think_ns sleep after. LB and ECSB are the same loop
 * with an empty critical section (LB reports its mean latency, ECSB its throughput). SOB: the
 * critical section is one fabric access to each held lock's data line (a READ under a shared
 * hold, a WRITE under an exclusive one). WCSB: a writer increments the counter in each held
 * lock's data line (a fabric READ, then a WRITE of the value plus one: a lost update shows
 * writers that overlapped), a reader READs it; then the client spins a random 1..4 us. WARB: an
 * empty critical section, and after the release the client waits a random 1..4 us (its thread's
 * other clients run meanwhile) before its next acquire. */
enum bench_lock_kind {
    BENCH_LOCK_NONE = 0,
    BENCH_LOCK_LB = 1,
    BENCH_LOCK_ECSB = 2,
    BENCH_LOCK_SOB = 3,
    BENCH_LOCK_WCSB = 4,
    BENCH_LOCK_WARB = 5,
};
#define BENCH_LOCK_KINDS 6
/* Its name ("lb", ...; "none"), and the kind of a name (-1 when unknown). */
const char *bench_lock_kind_name(uint32_t kind);
int bench_lock_kind_find(const char *name);
/* WCSB's counter: word 0 of a lock's data line; SOB's word: word 1. */
#define BENCH_LOCK_WCSB_WORD 0
#define BENCH_LOCK_SOB_WORD 1

struct bench_lock_req {
    char algo[16];
    uint32_t threads;       /* worker threads on this node */
    uint32_t tasks;         /* lock clients per thread, each a task (1: the thread itself) */
    uint32_t locks;         /* total locks in the table */
    uint32_t locality;      /* percent of locks taken on this node's own part of the table */
    int64_t warmup_ns, run_ns;
    int64_t cs_ns;          /* time spent inside each critical section (busy); bench NONE only */
    int64_t local_budget, remote_budget;
    uint64_t seed;
    uint32_t read_ppm;      /* per million locks taken shared (--read-ratio, or 100% less
                               --writers) */
    uint32_t locks_per_op;  /* K distinct locks per op, taken in ascending order */
    int64_t think_ns;       /* sleep between ops, outside every lock; bench NONE only */
    uint32_t dist;          /* enum bench_dist: the index within a node's part */
    uint32_t alpha_milli;   /* power-law exponent x 1000 (> 1000) */
    uint32_t fail_ppm;      /* per million remote holdings: never released (a dead holder) */
    int64_t lease_ns;       /* 0: the lock layer's default */
    int64_t timeout_ns;     /* per attempt of an op; 0: none */
    int64_t omega_ns;       /* DSLR's poll unit; 0: the measured round trip */
    uint32_t bench;         /* enum bench_lock_kind */
    /* rma-mcs, rma-rw (struct lock_cfg; 0: the lock layer's default) */
    int64_t rma_tl2, rma_tl1, rma_tr;
    uint32_t rma_dc_nodes, rma_dc_per_node;
};

/* The spread of measured acquires (ops) across lock clients: per node as a node reports it,
 * over several nodes once merged. */
struct bench_lock_fair {
    uint64_t clients;
    uint64_t min, max;      /* ops of the client with the fewest and the most */
    uint64_t sum;           /* ops over the clients */
    double sumsq;           /* sum of each client's ops squared */
};
/* Coefficient of variation (population standard deviation / mean; 0 without ops). */
double bench_lock_fair_cv(const struct bench_lock_fair *f);

struct bench_lock_res {
    uint64_t ops, local_ops, errors;
    uint64_t round_trips, fabric_ops; /* over the measured ops */
    int64_t elapsed_ns;               /* measured window */
    uint64_t timeouts, aborts, resets, lease_expired, overflow_resets; /* lock_stats deltas */
    uint64_t retries;                 /* failed attempts of ops (then retried) */
    uint64_t injected;                /* holdings abandoned by failure injection */
    uint64_t increments;              /* WCSB: counter increments, warm-up and all */
    uint64_t write_ops;               /* measured ops that took some lock exclusive */
    struct bench_lock_fair fair;      /* measured ops per client */
    struct hist h;                    /* op latency (all attempts until success), ns */
    struct hist wh;                   /* the same, of the write_ops only */
};

/* KV_RPC_BENCH_LOCK_HOLD (failure tests): take locks and never give them back: str algo,
 * u64 lease_ns, u32 table locks, u32 count, then count x {u16 node, u32 index, u8 mode}. Answered
 * once all are held; the holder thread then waits for the node to die (or to stop).
 * KV_RPC_BENCH_LOCK_TRY: take one lock and give it back: str algo, u64 lease_ns, u32 table locks,
 * u16 node, u32 index, u8 mode, u64 timeout_ns. Answers its status (a lease reset that aborts
 * the request is retried) with u64 elapsed_ns and the 64-byte lock line as read after the
 * release. */

/* The result's fields (fields.h): its encoding, its merge, and the counters kvbench lock
 * reports (JSON names and YCSB labels). */
extern const struct bench_field bench_lock_res_fields[];
extern const size_t bench_lock_res_nfields;

void bench_lock_req_pack(const struct bench_lock_req *q, struct pack_w *w);
int bench_lock_req_unpack(struct bench_lock_req *q, const void *p, size_t len);
void bench_lock_res_pack(const struct bench_lock_res *r, struct pack_w *w);
int bench_lock_res_unpack(struct bench_lock_res *r, const void *p, size_t len);
/* NULL if the request is valid, else what is wrong with it. */
const char *bench_lock_req_check(const struct bench_lock_req *q);
/* Merges r into dst (counts add up, the window is the longest, histograms merge, the spreads
 * of clients' ops merge). */
void bench_lock_res_add(struct bench_lock_res *dst, const struct bench_lock_res *r);
void bench_lock_res_init(struct bench_lock_res *r);

/* Every service on node n (kvserver --bench calls it once, before the node waits for its
 * peers): 0, or a status with a one-line reason in err. */
struct node;
int bench_node_start(struct node *n, char *err, size_t errcap);
/* Before the node stops: ends what runs (a workload run's workers hold sessions of the node) and
 * waits up to wait_ns for the benchmarks' threads. false if one still runs: it uses the fabric
 * (a peer died under it), so the caller must exit without freeing the node. */
bool bench_node_stop(int64_t wait_ns);

/* The lock benchmark's handlers (bench_node_start registers them); rs is the node's range-lock
 * service (kvbench range creates its spaces there). */
struct range_server;
void bench_register(struct fabric *f, struct range_server *rs);
/* Asks a running benchmark to stop and waits up to wait_ns for it. Returns false if it is still
 * running (the caller must not close the fabric under it). */
bool bench_shutdown(int64_t wait_ns);

/* ------------------------------------------------------------------------------------------
 * kvbench range (tools/kvbench/node/bench_range.c): clients of a range-lock space, as threads inside nodes.
 *
 * KV_RPC_BENCH_RANGE_PREPARE (to the space's owner): a bench_range_space. Creates the space on
 *   the node's range_server (or finds it, if it exists with the same layout); answers the status
 *   (RDKV_EEXIST: it exists with another layout).
 * KV_RPC_BENCH_RANGE_STATS (to the owner): empty; answers the owner's range_server_stats as
 *   u64 grants, waits, releases, cancels, batches (kvbench takes the difference over a run).
 * KV_RPC_BENCH_RANGE_RUN: a bench_range_req; answered when the run ends with a
 *   bench_range_res. A design error (anything but a timeout or a lease-reset abort) stops every
 *   client of the node and comes back in the result, not as the RPC's status. */
enum bench_range_workload { BENCH_RANGE_MICRO = 0, BENCH_RANGE_OLTP = 1 };
/* Op classes: micro has shared (READ) and exclusive (WRITE) ops; oltp has its readers (READ),
 * writers (WRITE) and log writer (LOG). */
enum bench_range_class { BENCH_RANGE_READ = 0, BENCH_RANGE_WRITE = 1, BENCH_RANGE_LOG = 2 };
#define BENCH_RANGE_CLASSES 3
/* The oltp layout (the thesis's Filebench-OLTP-like E-R2): the space is cut into 8 data files
 * and 1 log file, 9 equal parts of floor(2^bits / 9) units (the last few units are unused).
 * Readers lock shared 2^6-unit ranges in a random data file; writers exclusive 2^6-unit ranges,
 * data files round-robin; whenever the readers have done 1000 reads, each writer does 100
 * writes, and the log writer locks one exclusive 2^11-unit range of the log per 3200 reads. */
#define BENCH_RANGE_OLTP_FILES 8
#define BENCH_RANGE_OLTP_UNITS 64u
#define BENCH_RANGE_OLTP_LOG_UNITS 2048u
#define BENCH_RANGE_OLTP_READS_PER_BATCH 1000u
#define BENCH_RANGE_OLTP_WRITES_PER_BATCH 100u
#define BENCH_RANGE_OLTP_READS_PER_LOG 3200u

struct bench_range_space {
    uint16_t space;                  /* 1..RANGE_MAX_SPACES */
    uint32_t bits, seg_bits, tree_depth;
};

struct bench_range_req {
    char algo[16];
    uint32_t workload;      /* enum bench_range_workload */
    uint16_t owner, space;  /* the space: its node and id */
    uint32_t bits;          /* the space covers [0, 2^bits) units; 12..32 (oltp: 15..32) */
    uint32_t threads;       /* clients on this node, 1..BENCH_MAX_THREADS */
    uint32_t tasks;         /* clients per thread, each a task (1: every client a thread) */
    uint32_t first_client;  /* the global index of this node's first client (seeds, files) */
    uint32_t write_pct;     /* micro: percent of ops exclusive, 0..100 */
    uint32_t max_units;     /* micro: range sizes are uniform in [1, max_units] */
    /* oltp: this node's clients by role (they sum to threads) and the totals over all nodes;
     * a node's writers are paced by its own readers' count scaled to all readers, so a node
     * with writers or a log writer has readers too */
    uint32_t readers, writers, loggers;
    uint32_t total_readers, total_writers, total_loggers;
    int64_t warmup_ns, run_ns;
    int64_t cs_ns;          /* held this long (busy) between acquire and release */
    int64_t timeout_ns;     /* per attempt of an op; 0: none */
    int64_t lease_ns;       /* the clients' DSLR lease (segment, citron); 0: DSLR's default */
    uint64_t seed;
};

struct bench_range_res {
    uint64_t ops, retries;            /* measured ops; failed attempts (timeouts, aborts) */
    uint64_t errors;                  /* ops that ended in a design error */
    int32_t error;                    /* the first design error, 0 if none */
    uint32_t error_op;                /* 0 acquire, 1 release, 2 client set-up */
    uint64_t round_trips, fabric_ops, rpcs; /* over the measured ops; round trips = chains of
                                               one-sided ops + RPCs */
    int64_t elapsed_ns;               /* measured window */
    int64_t pacing_ns;                /* oltp: time writers spent waiting for reads */
    uint64_t class_ops[BENCH_RANGE_CLASSES];
    struct hist h;                    /* op latency (acquire + hold + release, all attempts), ns */
    struct hist class_h[BENCH_RANGE_CLASSES];
};

void bench_range_space_pack(const struct bench_range_space *s, struct pack_w *w);
int bench_range_space_unpack(struct bench_range_space *s, const void *p, size_t len);
void bench_range_req_pack(const struct bench_range_req *q, struct pack_w *w);
int bench_range_req_unpack(struct bench_range_req *q, const void *p, size_t len);
void bench_range_res_pack(const struct bench_range_res *r, struct pack_w *w);
int bench_range_res_unpack(struct bench_range_res *r, const void *p, size_t len);
/* NULL if the request is valid, else what is wrong with it. */
const char *bench_range_req_check(const struct bench_range_req *q);
const char *bench_range_space_check(const struct bench_range_space *s);
/* Merges r into dst (counts add up, the window is the longest, histograms merge, the first
 * error stays). */
void bench_range_res_add(struct bench_range_res *dst, const struct bench_range_res *r);
/* kvbench range's op classes and roles, for messages. */
const char *bench_range_error_op(uint32_t op);

/* Registers kvbench range's handlers (bench_register calls it). */
void bench_range_register(struct fabric *f, struct range_server *rs);
/* Asks a running range benchmark to stop and waits up to wait_ns for its threads (like
 * bench_shutdown, which should call it). */
bool bench_range_shutdown(int64_t wait_ns);

/* ------------------------------------------------------------------------------------------
 * kvbench txn (tools/kvbench/node/bench_txn.c): transactions by worker threads inside a node.
 * Keys are "bench:%08u"; each node holds its first keys_per_node of them (every node computes
 * the same list).
 * KV_RPC_BENCH_TXN_LOAD: u32 keys_per_node, u32 value_size. Inserts this node's keys.
 * KV_RPC_BENCH_TXN_RUN: a bench_txn_req; answered at the end with a bench_txn_res. */
enum bench_txn_kind {
    BENCH_TXN_RO_LOCAL = 0,  /* read-only, one key of this node */
    BENCH_TXN_RO_REMOTE = 1, /* read-only, one key of the next node (location cached) */
    BENCH_TXN_RW_2PART = 2,  /* read-write: one key here and one on the next node */
    /* Inserts of fresh keys (bench_txn.c, insert_keys): each transaction inserts the next fresh
     * key of the run and reads one key of the same round of keys_per_node keys. PREFIX: the
     * keys share their first 8 bytes ("session:<i><run>"); SPREAD: the same bytes with <i>
     * first, so that they differ in their first 8 bytes. */
    BENCH_TXN_INSERT_PREFIX = 3,
    BENCH_TXN_INSERT_SPREAD = 4,
};
#define BENCH_TXN_KINDS 5

struct bench_txn_req {
    uint8_t kind;
    uint32_t threads, keys_per_node, value_size;
    uint32_t tasks;           /* workers per thread, each a task (1: the thread itself) */
    int64_t warmup_ns, run_ns, lock_timeout_ns;
    uint64_t seed;
};

struct bench_txn_res {
    uint64_t ops, aborts, errors;
    uint64_t round_trips;      /* over the measured window */
    uint64_t rt_before_commit; /* of committed ops: locks and reads */
    uint64_t rt_commit;        /* of committed ops: inside commit (releases + 2PC messages) */
    uint64_t rpc_commit;       /* of committed ops: RPCs sent inside commit */
    int64_t elapsed_ns;
    struct hist h;             /* latency of committed transactions, ns */
    struct hist read_h;        /* the fabric's READ round trip of a remote row, ns */
};

void bench_txn_req_pack(const struct bench_txn_req *q, struct pack_w *w);
int bench_txn_req_unpack(struct bench_txn_req *q, const void *p, size_t len);
void bench_txn_res_pack(const struct bench_txn_res *r, struct pack_w *w);
int bench_txn_res_unpack(struct bench_txn_res *r, const void *p, size_t len);
void bench_txn_res_add(struct bench_txn_res *dst, const struct bench_txn_res *r);
struct txn_env;
void bench_txn_register(struct fabric *f, struct txn_env *e);
bool bench_txn_shutdown(int64_t wait_ns);

/* ------------------------------------------------------------------------------------------
 * The workload service (wl_serve.c): KV_RPC_WL_* (tools/kvbench/runner.h has the protocol). */
int wl_serve(struct node *n);
/* Ends a run in progress (its workers hold sessions of the node) and refuses new ones. */
void wl_serve_stop(void);

#endif
