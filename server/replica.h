/* A node's part in replication: with a `zookeeper` line in the cluster config, it reads (or
 * creates) the replica configuration in ZooKeeper at start, follows its changes and runs for
 * configuration manager; without one, the cluster keeps one copy of each partition on its node
 * (replicas 1), as before replicas, and says so. docs/replication.md */
#ifndef RDKV_SERVER_REPLICA_H
#define RDKV_SERVER_REPLICA_H

#include "common/config.h"
#include "txn/txn.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct replica;

/* Starts the node's part: *out is NULL for a cluster without ZooKeeper. lease_ns: the members'
 * leases (server/lease.h; 0: 1 s). Fails (the reason in err) when ZooKeeper does not answer
 * within connect_ns, when the configuration stored there does not fit this cluster config
 * (another node count or replica count), or when it no longer counts this node a member. */
struct wal_opts;
/* log: with a data directory (log->dir), the copies keep a log in log->dir/repl (log's other
 * options as the node's redo log: durability, segments, the fail-stop hook), a commit is
 * acknowledged only once it is durable in every copy's, and a process that held copies before
 * and is still a member comes back as it was when its log holds each copy's whole history
 * (docs/replication.md, section 7); NULL or no dir: in memory. */
int replica_start(const struct cluster_config *cc, uint16_t me, int64_t connect_ns,
                  int64_t lease_ns, const struct wal_opts *log, struct replica **out, char *err,
                  size_t errcap);
struct fabric;
struct store;
struct store_opts;

/* Once the fabric and the primary store are open: opens a backup copy (a store named
 * "store.b<p>", with the primary's options) of every partition this node backs up, and serves
 * KV_RPC_REPL, by which primaries ship commits to them. Nothing for a NULL r or replicas 1. */
int replica_attach(struct replica *r, struct fabric *f, struct store *primary,
                   const struct store_opts *so, char *err, size_t errcap);
struct lock_algo;
struct lock_cfg;
/* The cluster's row lock and its tunables (the transaction layer's), with which a primary reads
 * its rows to fill a new copy (docs/replication.md, section 8). Before replica_set_route. */
void replica_set_rows(struct replica *r, const struct lock_algo *row, const struct lock_cfg *lcfg);
/* With a log: a checkpoint of the copies once the log grew by this many bytes (0: none; the
 * log then grows with every commit). Before replica_serve. */
void replica_set_checkpoint_every(struct replica *r, uint64_t bytes);
/* Whether node is a member of the configuration held here (true without replicas). */
bool replica_is_member(struct replica *r, uint16_t node);
/* Once the node serves: a node that started as no member of the configuration (its memory
 * empty) asks the manager, from a thread of its own, to take it back to fill copies. */
void replica_serve(struct replica *r);
/* The transaction layer's ship hook (txn_cfg.ship) for this node's partition, or NULL when it
 * has no backups: sends the writes to every backup of the current configuration and waits until
 * each holds them, asking again (they are whole values, idempotent) while one does not answer,
 * until the node stops (RDKV_ESHUTDOWN). */
int (*replica_ship_fn(struct replica *r))(void *arg, uint64_t txid, const void *writes,
                                          size_t len);
/* The hook told that a ship's writes are installed (txn_cfg.installed), or NULL. */
void (*replica_installed_fn(struct replica *r))(void *arg, uint64_t txid);
/* The same, not waiting (txn_cfg.ship_async): the callback runs on the shipper's thread. */
int (*replica_ship_async_fn(struct replica *r))(void *arg, uint64_t txid, const void *writes,
                                                size_t len, void (*done)(void *ctx, int rc),
                                                void *ctx);
/* What a ship carries to a partition's backups (KV_RPC_REPL's items). */
enum replica_kind {
    REPLICA_APPLY = 0,                /* a commit's writes: applied to the copy */
    REPLICA_PREPARE = TXN_SHIP_PREPARE, /* a two-phase commit's writes prepared at the primary
                                         (u16 coordinator, the writes): kept, not applied, until
                                         its APPLY or FORGET */
    REPLICA_FORGET = TXN_SHIP_FORGET, /* a PREPARE aborted (its writes, for their partitions),
                                         or a DECIDE forgotten (nothing) */
    REPLICA_DECIDE = TXN_SHIP_DECIDE, /* a coordinator's commit decision (nothing; to the backups
                                         of the coordinator's own partition) */
};

/* Where the node's transactions find partition p from now on: node, and there the store `name`
 * (st: this node's store of it when node is this one, else NULL); gate: served here, but only
 * to the adoption (below) until it is routed again ungated. */
typedef void (*replica_route_fn)(void *arg, unsigned p, uint16_t node, struct store *st,
                                 const char *name, bool gate);
/* A PREPARE a promoted copy found: its rows are to be locked and its coordinator asked. */
struct replica_prep {
    uint64_t txid;
    uint16_t coord;
    const void *writes;
    uint32_t len;
};
/* The promotion's adoption of partition p's two-phase commits in flight (while p is gated):
 * its PREPAREs and the commit DECIDEs of p's coordinator. 0, or the promotion is abandoned (the
 * partition stays gated: unavailable) and logged. */
typedef int (*replica_adopt_fn)(void *arg, unsigned p, const struct replica_prep *preps,
                                unsigned n, const uint64_t *decided, unsigned nd);
/* Once the transaction layer is open: routes each partition to its primary now and after every
 * configuration change. A partition whose primary this node becomes (a promotion) is routed
 * here to its copy gated, its two-phase commits in flight adopted, then routed ungated, and only
 * then is the copy published to peers (store_publish). Nothing for a NULL r. */
void replica_set_route(struct replica *r, replica_route_fn fn, replica_adopt_fn adopt,
                       void *arg);
/* The transaction layer's ship of a two-phase commit's record (txn_cfg.ship_rec): PREPARE and
 * DECIDE wait until every backup holds it (0) or fail; FORGET is queued and returns at once.
 * NULL when the cluster has one copy. */
int (*replica_ship_rec_fn(struct replica *r))(void *arg, int kind, uint64_t txid,
                                              const void *payload, size_t len);
/* Whether a PREPARE of txid is held here as a backup (not adopted): a RESOLVE of it must wait
 * for the promotion that adopts it (txn_cfg.held). */
bool replica_holds_prepared(struct replica *r, uint64_t txid);
/* Whether this node may serve now: always with one copy (NULL r or replicas 1); with replicas,
 * only while it is a member of the configuration it holds and its lease is valid -- so that a
 * node cut off (a zombie) stops before the manager, which waits a lease and a tenth, may move
 * its partitions (docs/replication.md, section 4). */
bool replica_serving(struct replica *r);
/* Rows and a checksum of a copy of partition p held here (the primary's or a backup's): equal
 * copies give equal sums. Meant for a quiescent cluster (tests, an operator's check): values
 * are read without their row locks. RDKV_ENOTFOUND when this node holds none. */
int replica_digest(struct replica *r, unsigned p, uint64_t *rows, uint64_t *sum);
/* Stops serving KV_RPC_REPL's effects, makes ships give up, and closes the backup copies: the
 * first step of a node's stop. */
void replica_detach(struct replica *r);
/* Frees the ships' fabric contexts: once no ship runs any more (the transaction layer
 * quiesced), before the fabric closes. */
void replica_release(struct replica *r);
/* The configuration's epoch now (1 without ZooKeeper). */
uint64_t replica_epoch(struct replica *r);
/* One line's clause for the node's start line: "one copy of each partition (no ZooKeeper)" or
 * "replicas R, configuration epoch E in ZooKeeper HOSTS". */
void replica_describe(struct replica *r, const struct cluster_config *cc, char *buf, size_t cap);
/* Writes the key "replication" and its object into the JSON object j is writing. */
struct json;
void replica_status_json(struct replica *r, const struct cluster_config *cc, struct json *j);
void replica_stop(struct replica *r);

#endif
