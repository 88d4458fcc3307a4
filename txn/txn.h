/* Transactions: strict two-phase locking over the row locks and range locks of locks/, with
 * two-phase commit across partitions. A worker (one per thread) runs one transaction at a time;
 * reads lock (shared, or exclusive when the row will be written) and then read, locally with
 * loads or remotely with one-sided READs; writes lock exclusively and are buffered; scans take a
 * shared range lock on the keys [begin, end) on every partition; inserts and deletes also lock
 * the point {key} exclusively in the key's range space (whole keys, compared as bytes). Every
 * lock wait is bounded: when it runs out the transaction aborts with RDKV_EABORTED and leaves no
 * lock behind. The result is serializable and phantom-free
 * (docs/transactions.md). */
#ifndef RDKV_TXN_H
#define RDKV_TXN_H

#include "locks/lock.h"
#include "locks/range/range.h"
#include "storage/store.h"

#include <stdbool.h>
#include <stdint.h>

/* The key space's range-lock space on every node (the last id: benchmarks and tests use the
 * low ones). */
#define TXN_RANGE_SPACE RANGE_MAX_SPACES

/* The transaction layer's RPC message types (TXN_RPC_*) are in rdma/rpc_types.h. */

/* A coordinator's answer to TXN_RPC_QUERY, from its memory: a participant that has held a
 * PREPARE for txn_cfg.indoubt_ns asks (docs/transactions.md, "In-doubt transactions"). */
enum txn_state {
    TXN_STATE_ACTIVE = 1,    /* still deciding (or telling the participants): keep waiting */
    TXN_STATE_COMMITTED = 2, /* decided commit: commit it */
    TXN_STATE_UNKNOWN = 3,   /* not a transaction it runs now: presumed abort */
};

/* What a coordinator that got no answer asks a participant to make final (TXN_RPC_RESOLVE). The
 * answer 0 means: nothing of the transaction will be installed here from now on (a late request
 * of it is refused); RDKV_EBUSY: one of its requests is being handled right now, ask again. */
enum txn_resolve {
    TXN_RESOLVE_APPLY = 1,  /* an APPLY went unanswered: fence it (it may have been applied) */
    TXN_RESOLVE_COMMIT = 2, /* the decision is commit: commit it if still prepared here */
    TXN_RESOLVE_ABORT = 3,  /* the decision is abort: abort it if prepared, refuse it if late */
};

/* What a transaction does when a lock it asks for is not free (docs/transactions.md, "Conflict
 * policies"). Under every policy a lock wait also ends at the lock timeout (the backstop). */
enum txn_conflict {
    TXN_CONFLICT_TIMEOUT,  /* wait for anyone until the lock timeout */
    TXN_CONFLICT_WAIT_DIE, /* wait only for younger transactions (by txn_start_ts); a younger
                              one that would wait for an older one aborts at once */
    TXN_CONFLICT_NO_WAIT,  /* a lock not granted at once aborts the transaction at once */
};
/* "timeout", "wait-die", "no-wait" -> the policy, or -1. */
int txn_conflict_parse(const char *name);
const char *txn_conflict_name(int policy);

struct wal;
/* A node's transaction layer: its store, the algorithms, the prepared transactions it takes
 * part in, and what it knows of its peers. */
struct txn_cfg {
    const char *row_lock;    /* default LOCK_ROW_DEFAULT */
    const char *range_lock;  /* default RANGE_LOCK_DEFAULT */
    int64_t lock_timeout_ns; /* one lock wait (default 100 ms) */
    int64_t lease_ns;        /* row locks' lease (default 10 s; see docs/transactions.md) */
    int64_t drtm_lease_ns;   /* drtm's shared lease (default 10 ms: a transaction's length) */
    int64_t indoubt_ns;      /* a participant asks the coordinator about a transaction prepared
                                this long (then again every quarter of it; default: twice the
                                commit timeout, 10 s) */
    uint64_t prepared_max_bytes; /* PREPAREs a participant keeps staged, in request bytes, in all
                                    (default: a quarter of the row heap) ... */
    uint64_t prepared_max_per_coord; /* ... and from one coordinator (default: half of that);
                                        beyond either a PREPARE is refused with RDKV_EBUSY */
    uint32_t max_ops;        /* a transaction's reads, writes and scans (default 10,000) ... */
    uint64_t max_bytes;      /* ... and the bytes of its keys and written values (default 64 MiB):
                                beyond either it fails with RDKV_ETOOBIG, its locks released */
    int64_t commit_timeout_ns; /* how long a commit waits for a participant's answer before it
                                  reports RDKV_EUNKNOWN (default 5 s) */
    int conflict;            /* enum txn_conflict (default TXN_CONFLICT_DEFAULT) */
    struct wal *wal;         /* the node's redo log (NULL: none, the default): as
                                txn_env_set_wal, and the handlers that wait for it (PREPARE,
                                COMMIT, APPLY, RESOLVE) run on the RPC threads, not inline */
    /* Replication (server/replica.h; NULL: none). A participant calls ship with a commit's
     * writes (a redo-log payload, storage/wal.h) after its log and before it installs them:
     * 0 once every backup of the partition holds them; any other answer and nothing is
     * installed (the commit's outcome is unknown: the writes may be on a backup). The handlers
     * that commit then run on the RPC threads. */
    int (*ship)(void *arg, uint64_t txid, const void *writes, size_t len);
    /* Called after the writes that ship answered 0 for are installed (NULL: not told): a
     * primary filling a new copy waits for the commits shipped before it named the copy
     * (docs/replication.md, section 8). ship_async's done installs before it returns. */
    void (*installed)(void *arg, uint64_t txid);
    /* The same, not waiting: 0 and done(ctx, status) later, on another thread, with the
     * status ship would have answered (writes stay the caller's until then); or a status now
     * and no call. NULL: APPLY waits on an RPC thread too. */
    int (*ship_async)(void *arg, uint64_t txid, const void *writes, size_t len,
                      void (*done)(void *ctx, int rc), void *ctx);
    /* A two-phase commit's records on the backups (enum txn_ship_kind; docs/replication.md,
     * "Promotion"): a participant's PREPARE before it votes yes (u16 coordinator, the writes),
     * its FORGET when it aborts (the writes), the coordinator's DECIDE before its first COMMIT
     * (with its own share's PREPARE payload, or nothing: both ship at once) and its FORGET
     * (nothing) when it forgets the decision. PREPARE and DECIDE wait (0: every backup holds
     * it); FORGET does not. NULL: none. */
    int (*ship_rec)(void *arg, int kind, uint64_t txid, const void *payload, size_t len);
    /* Whether txid is prepared on a backup copy held here and not taken over yet: a RESOLVE of
     * it is answered "busy" until the promotion takes it over (NULL: never). */
    bool (*held)(void *arg, uint64_t txid);
    /* Whether this node may serve now (replicas: while it holds its lease; NULL: always). A
     * transaction's operations and its commit fail with RDKV_EUNAVAILABLE when not: a node cut
     * off from the configuration manager stops before its partitions may move (the zombie's
     * reads; docs/replication.md, section 4). */
    bool (*serving)(void *arg);
    void *ship_arg;
};
/* What ship_rec carries (the replication layer's KV_RPC_REPL item kinds, server/replica.h). */
/* (TXN_SHIP_KEEP is no record: the coordinator keeps a DECIDE for as long as it runs -- a
 * participant never confirmed the commit -- so no FORGET will end it; the replication layer
 * stops waiting for one and gives the decision to every copy filled later.) */
enum txn_ship_kind {
    TXN_SHIP_PREPARE = 1,
    TXN_SHIP_FORGET = 2,
    TXN_SHIP_DECIDE = 3,
    TXN_SHIP_KEEP = 4,
};
/* The node that coordinates txid (a txid is node:16 | sequence:48): its DECIDE goes to the
 * backups of that node's partition. */
static inline uint16_t txn_txid_node(uint64_t txid) { return (uint16_t)(txid >> 48); }
/* timeout: wait-die and no-wait commit more (up to 14-15x on hot keys), but as the default
 * each failed the suite -- under wait-die clients that retry with a fresh transaction (the
 * youngest every time) starved, and under no-wait a long reader among writers never committed
 * (docs/benchmarks.md, "Conflict policies: the default") */
#define TXN_CONFLICT_DEFAULT TXN_CONFLICT_TIMEOUT
#define TXN_MAX_OPS_DEFAULT 10000u
#define TXN_MAX_BYTES_DEFAULT (64ull << 20)
void txn_cfg_init(struct txn_cfg *c);

struct txn_env;

/* Registers the layer's RPC handlers and creates the key range space. rs is the node's range
 * service. On failure a reason is written to err. */
int txn_env_open(struct fabric *f, struct store *st, struct range_server *rs,
                 const struct txn_cfg *cfg, struct txn_env **out, char *err, size_t errcap);
/* Turns the layer's RPC handlers away from now on (RDKV_ESHUTDOWN) and waits for those running:
 * after it, only the node's own threads use the store. Call before closing the store. */
void txn_env_quiesce(struct txn_env *e);
/* Other RPC handlers of the node that use the store bracket their work with these: enter
 * returns false once the layer is quiescing (answer RDKV_ESHUTDOWN then). */
bool txn_env_enter(struct txn_env *e);
void txn_env_leave(struct txn_env *e);
/* Aborts every prepared transaction still waiting for a decision and frees the layer. */
void txn_env_close(struct txn_env *e);
/* Gives the layer the node's redo log (prefer txn_cfg.wal, which also takes the handlers that
 * wait for the log off the service thread) (storage/wal.h; NULL: none, the default): from then on
 * every commit applied here makes a COMMIT record of its writes durable first (part_commit),
 * a participant's PREPARE record is durable before it votes yes, and a coordinator's commit
 * DECISION before its first COMMIT leaves (docs/transactions.md, "The logged commit"). Set
 * before the node serves; the log outlives the layer. */
void txn_env_set_wal(struct txn_env *e, struct wal *w);
/* Restart with a redo log (docs/transactions.md, "The logged commit"). The replay feeds each
 * record, in LSN order, to txn_recovery_rec (COMMIT, PREPARE, DECISION, END: RDKV_EPROTO for a
 * payload that does not decode). Then txn_recovery_own calls fn for each transaction this node
 * coordinated whose commit DECISION is logged but whose own writes have no COMMIT record: fn
 * installs the writes and logs them as a COMMIT (before the node serves). txn_env_recover,
 * after txn_env_open and before the node serves, takes r: the commit decisions without an END
 * are delivered again to their participants (and answered to their queries), and PREPAREs of
 * other coordinators without an outcome become in-doubt transactions again, their rows locked
 * exclusively by local transactions until their coordinator's answer. */
/* Transaction ids that never repeat across the node's processes (with a data directory): the
 * counter part of each id handed out lies in [first, limit), and once the counter reaches limit,
 * reserve(arg, new_limit) must make new_limit durable before it returns 0 (the node keeps it in
 * the data directory's file "txids", and starts each process at the limit the last one
 * reserved). Set once, before the node serves; without it (no data directory) ids are drawn from
 * the worker and its sequence, unique within the process. TXID_BLOCK ids are reserved at a
 * time. */
#define TXID_BLOCK (1ull << 24)
void txn_env_set_txids(struct txn_env *e, uint64_t first, uint64_t limit,
                       int (*reserve)(void *arg, uint64_t limit), void *arg);
struct wal_rec;
struct txn_recovery;
int txn_recovery_create(uint16_t me, struct txn_recovery **out);
int txn_recovery_rec(struct txn_recovery *r, const struct wal_rec *rec);
int txn_recovery_own(struct txn_recovery *r,
                     int (*fn)(void *arg, uint64_t txid, const void *writes, uint32_t len),
                     void *arg);
void txn_recovery_counts(const struct txn_recovery *r, unsigned *indoubt, unsigned *decisions);
void txn_recovery_free(struct txn_recovery *r);
int txn_env_recover(struct txn_env *e, struct txn_recovery *r, char *err, size_t errcap);
/* The state a checkpoint carries for the layer so that the log below its replay LSN can go
 * (docs/transactions.md, "The logged commit"): the transactions prepared here, the logged commit
 * decisions not yet closed by a durable END, the commits this node took part in whose
 * coordinators may still ask. Taken after wal_checkpoint_lsn answered replay_lsn and every
 * record below it is durable; *out is malloc'd. 0 or RDKV_ENOMEM. txn_recovery_state feeds it to
 * a restart's recovery before the log's records from replay_lsn on (RDKV_EPROTO for bytes that
 * are not such a state). */
int txn_env_state(struct txn_env *e, uint64_t replay_lsn, uint8_t **out, size_t *len);
int txn_recovery_state(struct txn_recovery *r, const uint8_t *buf, size_t len);
struct fabric *txn_env_fabric(struct txn_env *e);
struct store *txn_env_store(struct txn_env *e);
const struct txn_cfg *txn_env_cfg(struct txn_env *e);
/* The lock layer's configuration of the node's transactions (their lease above all): any other
 * thread of the node that takes row locks must use it too -- a waiter with a shorter lease judges
 * a live holder dead and recovers its lock (lease rules, docs/locks.md). */
struct lock_cfg;
const struct lock_cfg *txn_env_lock_cfg(struct txn_env *e);
/* The peer watcher marks nodes down (operations that need them fail with RDKV_EUNAVAILABLE at
 * once) and up again. */
void txn_env_set_down(struct txn_env *e, uint16_t node, bool down);
bool txn_env_is_down(struct txn_env *e, uint16_t node);
/* A peer declared down: abort the transactions it coordinated that are prepared here -- only
 * without a redo log; with one they are kept and asked about until it is back. */
void txn_env_peer_lost(struct txn_env *e, uint16_t node);

/* What the layer's fencing did (docs/transactions.md, "Fencing"), for status and tests. */
struct txn_fence_stats {
    uint64_t refused;   /* participant: installs refused because the coordinator's lock was gone */
    uint64_t late;      /* participant: requests refused because their coordinator gave them up */
    uint64_t stale;     /* participant: PREPAREs and APPLYs refused because their locks were taken
                           from an earlier incarnation of this node */
    uint64_t kept_for;  /* participant: coordinators' holds on prepared rows kept alive here */
    uint64_t freed_for; /* participant: ... released here, their coordinator's process gone */
    uint64_t kept;      /* coordinator: transactions whose locks were kept after no answer */
    uint64_t resolved;  /* coordinator: of those, released after the participant's answer */
    uint64_t dropped;   /* coordinator: of those, dropped because the participant went down */
    uint64_t pending;   /* coordinator: still kept now */
    /* participant: PREPAREs kept now (and their request bytes), refused by the caps, and
     * in-doubt ones settled by asking their coordinator (docs/transactions.md, "In-doubt
     * transactions") */
    uint64_t prepared, prepared_bytes, prepared_refused, indoubt_committed, indoubt_dropped;
    uint64_t decisions_pending; /* coordinator: logged commit decisions some participant has not
                                   confirmed yet (delivered again until it does) */
};
void txn_env_fence_stats(struct txn_env *e, struct txn_fence_stats *out);

/* The partition of a key: XXH3(key) mod nodes, or XXH3(tag) mod nodes for a key that ends in
 * "{tag}" (store_key_tag). Fixed when the cluster is made; which node serves it may change. */
uint16_t txn_partition(const struct txn_env *e, const void *key, uint32_t klen);
/* Partition p is served by `node` from now on (the replication layer's configuration): from st
 * when node is this one (st stays open while it serves p), and peers find it as the store
 * `name` there (NULL or "store": the node's own partition). At first each partition p is served
 * by node p from its own store. Transactions that began on the old route fail at their commit
 * (the old node refuses, or is gone; one that only read there finds the route moved) and are
 * retried on the new one. */
void txn_env_route(struct txn_env *e, unsigned p, uint16_t node, struct store *st,
                   const char *name, bool gate);
/* A promotion's take-over of partition p's two-phase commits in flight, while p is routed here
 * gated (gate: only this call's workers may use it): each PREPARE found on the copy has its
 * rows locked exclusively by a local transaction and is asked about at once (its coordinator,
 * or the node now serving the coordinator's own partition, answers), and each commit DECIDE of
 * p's coordinator is answered to its participants' QUERYs from now on. 0, or why not. */
struct txn_adopt_prep {
    uint64_t txid;
    uint16_t coord;
    const uint8_t *writes; /* storage/wal.h's payload */
    uint32_t len;
};
int txn_env_adopt(struct txn_env *e, unsigned p, const struct txn_adopt_prep *preps, unsigned n,
                  const uint64_t *decided, unsigned nd);
/* The node that serves partition p now. */
uint16_t txn_env_owner(struct txn_env *e, unsigned p);

/* Counters of a worker (benchmarks and tests read them). */
struct txn_stats {
    uint64_t commits, aborts, conflicts; /* conflicts: lock waits that ran out */
    uint64_t rounds;  /* sequential network waits of commits (a fan-out to several nodes is one) */
    uint64_t cache_hits, cache_misses; /* remote row locations */
    uint64_t snapshots; /* txn_get_once reads taken without the lock */
};

struct txn_worker;
/* One per thread: the thread's fabric context and lock state (created and used by it). */
int txn_worker_create(struct txn_env *e, struct txn_worker **out);
/* One per task (common/task.h): the worker uses c, the context its thread's tasks share (not
 * destroyed with the worker), and has lock state of its own. */
int txn_worker_create_on(struct txn_env *e, struct fab_ctx *c, struct txn_worker **out);
void txn_worker_destroy(struct txn_worker *w);
struct fab_ctx *txn_worker_ctx(struct txn_worker *w);
const struct txn_stats *txn_worker_stats(const struct txn_worker *w);
/* Per-transaction lock-wait bound (0: the env's). */
void txn_worker_set_lock_timeout(struct txn_worker *w, int64_t ns);
/* The worker's conflict policy (enum txn_conflict) from its next transaction on; negative or
 * unknown: the node's (txn_cfg.conflict). */
void txn_worker_set_conflict(struct txn_worker *w, int policy);

/* A transaction of a worker (one at a time). Values returned by get and the iterator are owned
 * by the transaction and valid until its next call or its end. */
struct txn;
int txn_begin(struct txn_worker *w, struct txn **out);
/* The transaction's start timestamp: cluster-unique, nonzero, smaller = older (wait-die's
 * order). txn_begin takes a fresh one; a retry calls txn_keep_ts right after txn_begin, before
 * any operation, with its first attempt's, so that it ages and cannot starve (ignored once the
 * transaction has taken a lock, and for ts 0). */
uint64_t txn_start_ts(const struct txn *t);
void txn_keep_ts(struct txn *t, uint64_t ts);
int txn_get(struct txn *t, const void *key, uint32_t klen, bool for_update, const void **val,
            uint32_t *vlen);
/* txn_get (shared) as a read-only transaction's one and only operation, which may then read
 * another node's row without its lock: when the row's location is cached and the row lock can
 * tell (lock_algo.quiet) that no writer was in the row while one chain READ it -- one round
 * trip, no release -- and under the lock otherwise. After it the caller commits (or aborts)
 * and does nothing else in the transaction: a read taken so holds no lock, and is serializable
 * only as the whole of its transaction (docs/transactions.md, "Reads without the lock"). */
int txn_get_once(struct txn *t, const void *key, uint32_t klen, const void **val,
                 uint32_t *vlen);
int txn_put(struct txn *t, const void *key, uint32_t klen, const void *val, uint32_t vlen);
int txn_del(struct txn *t, const void *key, uint32_t klen);
/* A read-modify-write of one key: locks it exclusively, writes n bytes at offset off of its
 * value (the value grows when off + n passes its end) and, when old is not NULL, gives the value
 * as it was (valid until the transaction ends). RDKV_ENOTFOUND when the key is absent,
 * RDKV_EINVAL when off passes the value's end (nothing written either way). */
int txn_patch(struct txn *t, const void *key, uint32_t klen, uint32_t off, const void *bytes,
              uint32_t n, const void **old, uint32_t *oldlen);

/* Scans [begin, end) (end NULL: unbounded), at most limit rows (0: all). */
struct txn_iter;
int txn_scan(struct txn *t, const void *begin, uint32_t blen, const void *end, uint32_t elen,
             uint64_t limit, struct txn_iter **out);
/* 1 and a row, 0 at the end, or a status. */
int txn_iter_next(struct txn_iter *it, const void **key, uint32_t *klen, const void **val,
                  uint32_t *vlen);
void txn_iter_close(struct txn_iter *it);

/* Commit: 0, or a status with the transaction ended (RDKV_EABORTED retryable; RDKV_EUNKNOWN:
 * outcome unknown). Abort: releases everything. After either, t is gone. */
int txn_commit(struct txn *t);
void txn_abort(struct txn *t);
/* True once the transaction hit an error that forces it to abort (a lock wait ran out, a peer
 * went away): every later operation returns that status. */
int txn_failed(const struct txn *t);

#endif
