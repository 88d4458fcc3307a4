/* A node's part in replication (server/replica.h). */
#include "server/replica.h"

#include "common/clock.h"
#include "common/json.h"
#include "common/log.h"
#include "common/pack.h"
#include "common/task.h"
#include "rdkv_status.h"
#include "rdma/fabric.h"
#include "rdma/rpc_types.h"
#include "server/lease.h"
#include "server/rcfg.h"
#include "server/zcfg.h"
#include "storage/ckpt.h"
#include "storage/store.h"
#include "storage/wal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

/* KV_RPC_REPL: u64 epoch, u16 partition, u32 count, u64 stable, then count items, each u64
 * txid, u8 kind (enum replica_kind), u32 len, u64 seq and len bytes: a commit's writes
 * (storage/wal.h's payload), a PREPARE's (u16 coordinator, then the writes), a FORGET's (the
 * writes of the PREPARE it forgets, or nothing for a DECIDE), a DECIDE's (nothing). A batch
 * holds the items that queued while the previous one was on its way (REPL_FLYING batches of a
 * partition at a time), up to REPL_BATCH_BYTES (one larger item goes alone).
 * seq numbers a commit (an APPLY; 0 for the other kinds) in its partition's stream, rising, and
 * stable says that every APPLY of the partition up to it is on every backup of the epoch. A
 * backup keeps the APPLYs after stable (its tail): a promoted primary gathers the tails of the
 * partition's copies and re-sends them, so that a commit in flight at a dead primary ends up on
 * every copy or none (docs/replication.md, section 6, step 5). */
#define REPL_HDR 22
#define REPL_ITEM_HDR 21
/* A backup's tails in all (beyond, a REPL that adds to them is refused with RDKV_ENOSPC and
 * asked again: the primary's stable moves on as its commits complete) */
#define REPL_TAIL_MAX 65536u
#define REPL_TAIL_BYTES (256ull << 20)
/* KV_RPC_REPL_TAIL: u64 epoch, u16 partition, u64 after -> u32 count, u8 more, then count
 * items (u64 seq, u64 txid, u32 len, len bytes) in seq order, after `after`, as many as fit one
 * response */
#define REPL_TAIL_REQ 18
/* What a backup keeps besides its copy, in all: PREPAREs and DECIDEs not yet settled (beyond,
 * a REPL that adds one is refused with RDKV_ENOSPC and asked again) */
#define REPL_RECS_MAX 65536u
#define REPL_RECS_BYTES (256ull << 20)
#define REPL_BATCH_BYTES (256u << 10)
#define REPL_FLYING 1 /* batches of one partition on their way at once (more queue meanwhile) */
#define REPL_TIMEOUT_NS NS_PER_S     /* one ship's wait for a backup */
#define REPLICA_LEASE_DEFAULT_NS NS_PER_S
#define REPL_RETRY_NS (10 * NS_PER_MS) /* then asked again after this */
/* KV_RPC_REPL_COPY: u64 epoch, u16 partition, u64 stream, u8 first, u32 rows, then the rows
 * (storage/ckpt.h's batch format), REPL_COPY_BATCH bytes or about */
#define REPL_COPY_HDR 23
#define REPL_COPY_BATCH (256u << 10)
/* What a copy being filled remembers of the keys that commits deleted meanwhile, per partition
 * (beyond, the copy's stream is broken and started again: section 8) */
#define REPL_DEL_MAX (1u << 20)
#define REPL_DEL_BYTES (64ull << 20)
#define REPL_DEL_BUCKETS 65536u
/* KV_RPC_REPL_FILLED: u64 epoch, u16 partition, u8 count, count u16 nodes */
#define REPL_FILLED_HDR 11

/* A two-phase commit's record on a backup (docs/replication.md, "Promotion"): a participant's
 * PREPARE (its writes, not applied: the promoted copy locks their rows and asks the
 * coordinator), or a coordinator's commit DECIDE (the promoted copy answers its participants'
 * QUERYs with it). */
struct rrec {
    struct rrec *next;
    uint64_t txid;
    uint8_t kind;      /* REPLICA_PREPARE or REPLICA_DECIDE */
    uint16_t coord;
    uint32_t len;      /* the writes (PREPARE) */
    uint8_t bytes[];
};

/* An APPLY a backup holds that may not be on every copy yet (its partition's tail). */
struct rtail {
    struct rtail *next;
    uint64_t seq, txid;
    uint32_t len;
    uint8_t bytes[];
};

/* A key that a commit deleted while this node's copy of its partition was being filled. */
struct dkey {
    struct dkey *next;
    uint32_t klen;
    uint8_t k[];
};
struct delset {
    size_t n, bytes;
    struct dkey *b[REPL_DEL_BUCKETS];
};

struct gent {
    struct gent *next;
    uint64_t txid;
    unsigned gen;
    uint8_t kind; /* REPLICA_APPLY (a sync ship until installed), REPLICA_PREPARE or
                     REPLICA_DECIDE (a record until settled) */
};

struct ship_job;

struct replica {
    struct zcfg *z;
    uint16_t me;
    pthread_mutex_t mu; /* cur, version, manager, backups[], stopping, jobs, dw */
    pthread_cond_t cv;  /* shipper_rc */
    struct rcfg cur;    /* the latest configuration read */
    int version;
    bool manager;
    struct fabric *f;
    struct store *primary;                /* this node's own partition (node.c's) */
    struct store *backup[RCFG_MAX_NODES]; /* the copies of other partitions held here */
    bool stopping;      /* replica_detach has begun: ships give up, REPLs are refused */
    struct ship_job *jobs;    /* ships queued for the shipper, oldest first ... */
    struct ship_job **jobs_tail; /* ... and where the next goes (valid while jobs) */
    struct waiter dw;         /* the dispatcher's, while dw_armed */
    bool dw_armed;
    unsigned flying[RCFG_MAX_NODES]; /* each partition's batches on their way (ship tasks) */
    pthread_t shipper;        /* its thread (shipper_rc: 0 not started, 1 running, < 0 failed) */
    int shipper_rc;
    struct fab_ctx *sc;       /* the shipper's context (its thread's) */
    struct lease *lease;      /* replicas > 1: this member's lease, and the manager's side */
    /* the transaction layer's routes (replica_set_route), set under rmu: routed[p] is the node
     * partition p was last routed to */
    pthread_mutex_t rmu;
    pthread_mutex_t fmu; /* apply_fences: the fabric's bounds follow the latest configuration */
    replica_route_fn route;
    void *route_arg;
    uint16_t routed[RCFG_MAX_NODES];
    bool routes_again; /* (atomic) apply_routes was asked while rmu was held: go again */
    unsigned parts;           /* the configuration's partitions (fixed) */
    replica_adopt_fn adopt;
    /* per partition backed up here: its PREPAREs and DECIDEs not settled yet (under mu), and
     * their count and bytes in all */
    struct rrec *recs[RCFG_MAX_NODES];
    unsigned nrecs;
    uint64_t rec_bytes;
    int64_t lease_ns;
    bool elected;             /* the office began before the lease side was there */
    /* a backup's side, per partition (under mu): the tail, and the stable mark heard last */
    struct rtail *tail[RCFG_MAX_NODES];
    uint64_t tstable[RCFG_MAX_NODES];
    unsigned ntail;
    uint64_t tail_bytes;
    /* a primary's side, per partition (under mu): the last seq given, and the APPLYs not yet on
     * every backup, oldest first (their seqs rise along the list) */
    uint64_t pseq[RCFG_MAX_NODES];
    struct ship_job *open[RCFG_MAX_NODES], *open_last[RCFG_MAX_NODES];
    /* a test hook (RDKV_TEST_FAULT=repl-partial@<node>): the third APPLY of this node's own
     * partition goes to its last backup only, and the node exits once that one holds it */
    bool fault_partial;
    unsigned fault_count;
    /* replica_serving's, read without mu: leases are on (replicas > 1 and lease_start done),
     * and this node is a member of the configuration held */
    bool leased, member;
    uint64_t routed_epoch; /* the epoch whose routes are taken here (KV_RPC_REPL_EPOCH) */
    bool fault_lag; /* test hook (RDKV_TEST_FAULT=config-lag): a node neither manager nor
                       promoted takes a new epoch's routes 3 s late */
    /* test hook (RDKV_TEST_FAULT=zombie-probe): a node that learns it is no member any more
     * tries a one-sided READ and an RPC at every other node, and its status counts how many
     * were refused (fencing, section 6) */
    bool fault_probe;
    unsigned probe_refused, probe_of; /* (under mu) */
    /* re-replication (docs/replication.md, section 8) */
    struct store_opts so;           /* the copies' options (replica_attach's) */
    const struct lock_algo *row;    /* the cluster's row lock, and its tunables */
    const struct lock_cfg *lcfg;    /* (replica_set_rows; the copier reads rows under them) */
    bool joining;                   /* started as no member: asks the manager for copies */
    bool joiner_on, copier_on, asker_on;
    pthread_t joiner, copier, asker;
    /* a copy a ship task wants dropped, per partition (under mu): its node + 1 (0: none), why,
     * and for how long it refused; the asker thread asks the manager, so that no ship task
     * blocks the shipper's thread on ZooKeeper or the manager's answer (section 7) */
    uint16_t drop_want[RCFG_MAX_NODES];
    int drop_why[RCFG_MAX_NODES];
    int64_t drop_for[RCFG_MAX_NODES];
    pthread_cond_t ccv;             /* the copier's: a configuration came, or the stop */
    /* a copy being filled here, per partition (under mu): the keys deleted since its stream
     * began, the stream, and whether the set overflowed (the stream then starts again) */
    struct delset *del[RCFG_MAX_NODES];
    uint64_t stream[RCFG_MAX_NODES];
    bool broken[RCFG_MAX_NODES];
    /* commits shipped and not yet installed, and two-phase commit records shipped and not yet
     * settled, by generation (under mu): the copier flips gen and waits until the old one has
     * none, so no commit it cannot see -- an insert not indexed yet, shipped before the copy
     * was named -- is installed behind its scan (docs/refill-model.md, NO_DRAIN), and no
     * PREPARE or DECIDE the new copy never received is still open when it is marked full
     * (NO_PREP_DRAIN: promoted, it would not know the transaction) */
    unsigned gen, live[2];
    struct gent *gmap[64]; /* txid and kind -> generation, until installed or settled */
    /* per partition, the commit decisions a promotion here took over (under mu): the
     * transaction layer answers for them as long as it runs and no FORGET ever ends them, so
     * every copy named later is sent them before it is marked full (fill_partition) */
    uint64_t *kept[RCFG_MAX_NODES];
    unsigned nkept[RCFG_MAX_NODES];
    int64_t apply_said[RCFG_MAX_NODES]; /* when a commit's apply here last failed, said (mu) */
    /* the copies' log, with a data directory (section 7, "Backups' logs"): every REPL and COPY
     * payload applied to a copy here -- this node's own ships included -- and each copy's
     * history marks, in the order applied (under mu) */
    struct wal_opts logo;           /* (logo.dir: DIR/repl; NULL: no log) */
    char logdir[512];
    struct wal *log;
    bool comeback;                  /* this process came back as the member it was, from it */
    uint8_t hist[RCFG_MAX_NODES];   /* each partition's copy history in the log (HIST_*) */
    uint64_t from[RCFG_MAX_NODES];  /* the replay LSN of each copy's checkpoint loaded (0) */
    /* checkpoints of the copies (section 7, "Checkpoints"): every ckpt_every bytes of log */
    uint64_t ckpt_every;
    unsigned ckpts;                 /* written by this process (atomic: status) */
    pthread_t ckpter;
    bool ckpter_on;
    /* a promotion here is taking partition p over (mu): its copies are not filled meanwhile --
     * the drain must count the PREPAREs it takes over, and the fill send the DECIDEs */
    bool taking[RCFG_MAX_NODES];
    /* a partition this primary is handing back to its home node (section 8, "Handing a
     * partition back"; under mu, read by frozen_refuse): its new commits and PREPAREs are
     * refused (RDKV_EBUSY, nothing sent) while the ones begun before drain. nfrozen (atomic):
     * how many, so that a ship pays nothing when none is; next_handback: not tried before.
     * A checkpoint of a primary's copy freezes it too, for its drain (so a count: each freezer
     * takes and gives back one) */
    uint8_t frozen[RCFG_MAX_NODES];
    unsigned nfrozen;
    int64_t next_handback[RCFG_MAX_NODES];
    /* a primary's filling of new copies, per partition (under mu; status shows it) */
    struct fill {
        uint64_t epoch;             /* the configuration it began in (0: none running) */
        uint64_t rows, of;          /* rows sent to the copies, of the rows there were */
        uint64_t done_epoch;        /* the manager was told the copies are filled, in this one */
    } fill[RCFG_MAX_NODES];
};

/* This node's copy of partition p: its own store for its own partition, else the copy opened
 * for it (NULL: none). mu held. */
static struct store *copy_locked(const struct replica *r, unsigned p)
{
    return p == r->me ? r->primary : p < RCFG_MAX_NODES ? r->backup[p] : NULL;
}

/* Whether this node is partition p's primary in the configuration held, and a member. mu
 * held. */
static bool primary_locked(const struct replica *r, unsigned p)
{
    return p < r->cur.partitions && rcfg_primary(&r->cur, p) == r->me &&
           (r->cur.members >> r->me & 1);
}

/* The name of partition p's store at a node: "store" at its home node, "store.b<p>" at any
 * other (a copy). */
_Static_assert(RCFG_MAX_NODES <= 9999, "store.b<p> fits its name");
static void store_name(unsigned p, uint16_t node, char name[STORE_NAME_MAX + 1])
{
    snprintf(name, STORE_NAME_MAX + 1, p == node ? "store" : "store.b%u", p % 10000u);
}

/* ---- the copies' log (docs/replication.md, section 7, "Backups' logs") --------------------- */

/* A copy's history in the log, from its marks. */
enum { HIST_NONE, HIST_LEARNING, HIST_FULL, HIST_GONE, HIST_BAD };
#define MARK_LEN 11 /* u8 WAL_MARK_*, u16 partition, u64 epoch */

/* The history after one mark: a copy begins once (at the cluster's creation, full; or at a
 * join, being filled), is made full once, and is given up once -- a process never takes a
 * partition back, and one that joins begins a new log. */
static uint8_t hist_after(uint8_t h, uint8_t mark)
{
    switch (mark) {
    case WAL_MARK_CREATE: return h == HIST_NONE ? HIST_FULL : HIST_BAD;
    case WAL_MARK_BEGIN: return h == HIST_NONE ? HIST_LEARNING : HIST_BAD;
    case WAL_MARK_FULL: return h == HIST_LEARNING || h == HIST_FULL ? HIST_FULL : HIST_BAD;
    case WAL_MARK_GONE: return h == HIST_BAD ? HIST_BAD : HIST_GONE;
    default: return HIST_BAD;
    }
}

/* A mark's partition and kind, or false for bytes that are not one. */
static bool mark_get(const uint8_t *b, uint32_t len, uint8_t *kind, unsigned *p)
{
    if (len != MARK_LEN || b[0] < WAL_MARK_CREATE || b[0] > WAL_MARK_GONE) return false;
    *kind = b[0];
    *p = pack_get_u16le(b + 1);
    return *p < RCFG_MAX_NODES;
}

/* Appends a record of the copies' log (mu held where its order must be the order applied: a
 * backup's REPLs, COPYs and marks; a primary's own batches go one at a time per partition): 0
 * and *lsn (0 without a log); a record that cannot be appended stops the node (the copy here
 * already shows it: a restart decides from the log). */
static int log_append_locked(struct replica *r, uint8_t type, const void *b, size_t len,
                             uint64_t *lsn)
{
    *lsn = 0;
    if (!r->log) return 0;
    int rc = len > WAL_REC_LIMIT ? RDKV_ETOOBIG
                                 : wal_append(r->log, type, 0, b, (uint32_t)len, lsn);
    if (rc) {
        char why[96];
        snprintf(why, sizeof why, "a record of the copies' log could not be appended: %s",
                 rdkv_strerror(rc));
        wal_fail_stop(r->log, why);
    }
    return 0;
}

/* Waits until the copies' log holds lsn durably; a log that failed stops the node. */
static void log_wait(struct replica *r, uint64_t lsn, const char *what)
{
    if (!wal_wait(r->log, lsn)) return;
    char why[96];
    snprintf(why, sizeof why, "a %s of the copies' log is not known durable", what);
    wal_fail_stop(r->log, why);
}

/* Logs a copy's mark (mu held; not waited for: a REPL or COPY after it is, and durability is in
 * order). */
static void log_mark_locked(struct replica *r, uint8_t kind, unsigned p, uint64_t epoch)
{
    if (!r->log) return;
    uint8_t b[MARK_LEN];
    b[0] = kind;
    pack_put_u16le(b + 1, (uint16_t)p);
    pack_put_u64le(b + 3, epoch);
    uint64_t lsn;
    log_append_locked(r, WAL_MARK, b, sizeof b, &lsn);
    r->hist[p] = hist_after(r->hist[p], kind);
}

/* The marks a new configuration c calls for, against the one held (mu held, before cur
 * changes): a copy being filled begins, one filled is full, one no longer held is gone. */
static void log_marks_locked(struct replica *r, const struct rcfg *c)
{
    for (unsigned p = 0; r->log && p < c->partitions; p++) {
        bool held = rcfg_holds(c, p, r->me), learning = held && rcfg_learning(c, p, r->me);
        uint8_t h = r->hist[p];
        if (held && learning && h == HIST_NONE) log_mark_locked(r, WAL_MARK_BEGIN, p, c->epoch);
        else if (held && !learning && h == HIST_LEARNING)
            log_mark_locked(r, WAL_MARK_FULL, p, c->epoch);
        else if (!held && (h == HIST_LEARNING || h == HIST_FULL))
            log_mark_locked(r, WAL_MARK_GONE, p, c->epoch);
    }
}


static void recs_free_locked(struct replica *r, unsigned p);
static void tail_trim_locked(struct replica *r, unsigned p, uint64_t stable);
static void delset_free_locked(struct replica *r, unsigned p);
static int open_copies(struct replica *r, const struct rcfg *c, char *err, size_t errcap);
static void *copier_main(void *arg);
static int resync(struct replica *r, unsigned p, const struct rcfg *c, unsigned *pulled,
                  unsigned *pushed);

static int gen_enter(struct replica *r, uint64_t txid, uint8_t kind);
static void gen_leave(struct replica *r, uint64_t txid, uint8_t kind);
static uint64_t stable_locked(const struct replica *r, unsigned p);

/* The DECIDEs taken over (txids of dec[0..n)) kept for partition p's later copies: 0 or
 * RDKV_ENOMEM. */
static int keep_decided(struct replica *r, unsigned p, const uint64_t *dec, unsigned n)
{
    if (!n) return 0;
    pthread_mutex_lock(&r->mu);
    uint64_t *k = realloc(r->kept[p], (r->nkept[p] + n) * sizeof *k);
    if (k) {
        memcpy(k + r->nkept[p], dec, n * sizeof *k);
        r->kept[p] = k;
        r->nkept[p] += n;
    }
    pthread_mutex_unlock(&r->mu);
    return k ? 0 : RDKV_ENOMEM;
}

/* A promotion's adoption of partition p's records: handed to the transaction layer (which locks
 * the PREPAREs' rows and answers for the DECIDEs), then dropped here. A copy named later must
 * not miss them (docs/replication.md, section 8): each PREPARE is counted in the drain's
 * generation until the transaction layer settles it (its commit installed, or its FORGET), as
 * the PREPAREs this node ships as a primary are, and the DECIDEs -- never settled -- are kept
 * to be sent to every such copy. */
static int take_over(struct replica *r, unsigned p, const struct rcfg *c, unsigned *np,
                     unsigned *nd, unsigned *pulled, unsigned *pushed)
{
    /* the commits in flight at the dead primary first: on every copy, or on none */
    int src = resync(r, p, c, pulled, pushed);
    if (src) return src;
    /* (a configuration that came meanwhile names another primary: this takeover is abandoned,
     * the partition stays gated here, and the routes go again -- apply_routes) */
    pthread_mutex_lock(&r->mu);
    bool still = primary_locked(r, p);
    pthread_mutex_unlock(&r->mu);
    if (!still) return RDKV_EUNAVAILABLE;
    /* (never a seq given before again, also where no other copy was asked: a copy's tail and
     * stable mark name the highest it holds) */
    pthread_mutex_lock(&r->mu);
    uint64_t top = r->tstable[p];
    for (const struct rtail *x = r->tail[p]; x; x = x->next)
        if (x->seq > top) top = x->seq;
    if (r->pseq[p] < top) r->pseq[p] = top;
    tail_trim_locked(r, p, top); /* (a primary keeps no tail of its own partition) */
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_lock(&r->mu);
    unsigned n = 0, d = 0;
    for (struct rrec *x = r->recs[p]; x; x = x->next) x->kind == REPLICA_PREPARE ? n++ : d++;
    struct replica_prep *preps = calloc(n ? n : 1, sizeof *preps);
    uint64_t *dec = calloc(d ? d : 1, sizeof *dec);
    int rc = preps && dec ? 0 : RDKV_ENOMEM;
    n = d = 0;
    for (struct rrec *x = r->recs[p]; x && !rc; x = x->next) {
        if (x->kind == REPLICA_DECIDE) dec[d++] = x->txid;
        else preps[n++] = (struct replica_prep){x->txid, x->coord, x->bytes, x->len};
    }
    pthread_mutex_unlock(&r->mu);
    /* (the records stay put meanwhile: REPLs of p are refused here now -- this node is its
     * primary -- and only this thread drops them) */
    unsigned counted = 0;
    while (!rc && counted < n)
        if (!(rc = gen_enter(r, preps[counted].txid, REPLICA_PREPARE))) counted++;
    if (!rc && r->adopt) rc = r->adopt(r->route_arg, p, preps, n, dec, d);
    if (rc) /* (not taken over: the partition stays unavailable, nothing is settled) */
        for (unsigned i = 0; i < counted; i++) gen_leave(r, preps[i].txid, REPLICA_PREPARE);
    if (!rc && keep_decided(r, p, dec, d))
        log_error("node %u: no memory to keep partition %u's %u decisions taken over: a copy "
                  "filled later will not hold them", r->me, p, d);
    free(preps);
    free(dec);
    if (rc) return rc;
    pthread_mutex_lock(&r->mu);
    recs_free_locked(r, p);
    pthread_mutex_unlock(&r->mu);
    *np = n;
    *nd = d;
    return 0;
}

static bool hook_is_manager(void *arg);

/* KV_RPC_REPL_EPOCH: the epoch whose routes this node has taken. */
static void on_epoch(struct fab_rpc_req *req, void *arg)
{
    struct replica *r = arg;
    uint8_t b[8];
    pack_put_u64le(b, __atomic_load_n(&r->routed_epoch, __ATOMIC_ACQUIRE));
    fab_rpc_reply(req, 0, b, sizeof b);
}

/* Step 4's acknowledgement, before a promoted primary serves: every other member of c has taken
 * c's routes -- none sends its transactions, one-sided READs included, to the old primary any
 * more. A member that does not say so within two leases is taken for cut off: without the
 * configuration manager it has no lease, and serves nothing (section 4). */
static void await_members(struct replica *r, const struct rcfg *c)
{
    struct fab_ctx *fc = NULL;
    if (fab_ctx_create(r->f, &fc)) return;
    fab_ctx_set_spin(fc, 0);
    int64_t t0 = clock_now_ns(), deadline = t0 + 2 * r->lease_ns;
    struct fab_buf resp = {0};
    for (unsigned m = 0; m < c->nodes; m++) {
        if (m == r->me || !(c->members >> m & 1)) continue;
        for (;;) {
            int rc = fab_rpc_call(fc, (uint16_t)m, KV_RPC_REPL_EPOCH, NULL, 0, &resp,
                                  REPL_TIMEOUT_NS);
            if (!rc && resp.len == 8 && pack_get_u64le(resp.data) >= c->epoch) break;
            if (clock_now_ns() >= deadline) {
                log_warn("node %u: node %u has not taken epoch %llu's routes after %.0f ms: "
                         "taken for cut off", r->me, m, (unsigned long long)c->epoch,
                         (double)(clock_now_ns() - t0) / 1e6);
                break;
            }
            clock_sleep_ns(2 * NS_PER_MS);
        }
    }
    fab_buf_free(&resp);
    fab_ctx_destroy(fc);
}

/* Fences every process the latest configuration fences (section 6, step 4: nothing of a
 * removed node's process acts here any more, not even its one-sided operations; a new process
 * taken back is let in). From on_config at once, and again before the routes' epoch is
 * published, so that a member that says it took an epoch's routes has fenced -- never waiting
 * for a takeover that holds rmu (a process taken back would be refused meanwhile). */
static void apply_fences(struct replica *r)
{
    struct fabric *f = __atomic_load_n(&r->f, __ATOMIC_ACQUIRE);
    if (!f) return;
    pthread_mutex_lock(&r->fmu);
    pthread_mutex_lock(&r->mu);
    struct rcfg c = r->cur;
    pthread_mutex_unlock(&r->mu);
    for (unsigned i = 0; c.replicas > 1 && i < c.nodes; i++)
        if (i != r->me) fab_fence(f, (uint16_t)i, c.fenced[i]);
    pthread_mutex_unlock(&r->fmu);
}

/* Routes every partition to its primary of the latest configuration (those that changed), then
 * takes over the partitions whose primary this node has become: each is served from its copy
 * here, and only then published to peers (docs/replication.md, "Promotion"). Runs on zcfg's
 * thread (on_config), never on the lease threads: a takeover may wait for other nodes. */
static void apply_routes_locked(struct replica *r)
{
    pthread_mutex_lock(&r->mu);
    struct rcfg c = r->cur;
    bool stop = r->stopping;
    pthread_mutex_unlock(&r->mu);
    if (!stop) apply_fences(r);
    unsigned promo[RCFG_MAX_NODES], npromo = 0;
    bool moved = false;
    for (unsigned p = 0; r->route && p < c.partitions; p++)
        if (c.nrep[p] && rcfg_primary(&c, p) != r->routed[p]) {
            moved = true;
            /* (its own partition too, when this node came back and filled its copy of it) */
            if (rcfg_primary(&c, p) == r->me) promo[npromo++] = p;
        }
    /* (before the routes are published: the copier reads routed_epoch, then these) */
    pthread_mutex_lock(&r->mu);
    for (unsigned i = 0; i < npromo; i++) r->taking[promo[i]] = true;
    pthread_mutex_unlock(&r->mu);
    if (r->fault_lag && moved && !npromo && !hook_is_manager(r)) {
        log_warn("test hook: taking epoch %llu's routes 3 s late", (unsigned long long)c.epoch);
        clock_sleep_ns(3 * NS_PER_S);
    }
    for (unsigned p = 0; r->route && !stop && p < c.partitions; p++) {
        if (!c.nrep[p]) continue;
        uint16_t node = rcfg_primary(&c, p);
        if (node == r->routed[p]) continue;
        char name[STORE_NAME_MAX + 1];
        store_name(p, node, name);
        struct store *st = NULL;
        if (node == r->me) {
            pthread_mutex_lock(&r->mu);
            st = copy_locked(r, p);
            stop = r->stopping;
            pthread_mutex_unlock(&r->mu);
            if (stop) break;
            if (!st) {
                log_error("node %u: named primary of partition %u in epoch %llu, but it holds "
                          "no copy of it", r->me, p, (unsigned long long)c.epoch);
                continue;
            }
        }
        bool promote = node == r->me; /* (it was routed elsewhere: a promotion) */
        r->route(r->route_arg, p, node, st, name, promote); /* (gated until taken over) */
        if (r->routed[p] == r->me && node != r->me) {
            /* served here no more (handed back, or this node removed): peers that open the
             * partition from now on go to its new primary */
            pthread_mutex_lock(&r->mu);
            struct store *was = copy_locked(r, p);
            pthread_mutex_unlock(&r->mu);
            if (was) store_hide(was);
        }
        r->routed[p] = node;
    }
    if (r->route && !stop && c.epoch > __atomic_load_n(&r->routed_epoch, __ATOMIC_ACQUIRE))
        __atomic_store_n(&r->routed_epoch, c.epoch, __ATOMIC_RELEASE);
    if (npromo && r->route && !stop) await_members(r, &c);
    for (unsigned i = 0; i < npromo && r->route && !stop; i++) {
        unsigned p = promo[i];
        uint16_t node = r->me;
        pthread_mutex_lock(&r->mu);
        struct store *st = copy_locked(r, p);
        stop = r->stopping;
        pthread_mutex_unlock(&r->mu);
        if (stop || !st || r->routed[p] != r->me) continue;
        char name[STORE_NAME_MAX + 1];
        store_name(p, r->me, name);
        {
            int64_t t0 = clock_now_ns();
            unsigned np = 0, nd = 0, pulled = 0, pushed = 0;
            int rc = take_over(r, p, &c, &np, &nd, &pulled, &pushed);
            if (rc) {
                log_error("node %u: cannot take over partition %u's two-phase commits in flight "
                          "(%s): it stays unavailable", r->me, p, rdkv_strerror(rc));
                continue;
            }
            r->route(r->route_arg, p, node, st, name, false);
            store_publish(st);
            pthread_mutex_lock(&r->mu);
            r->taking[p] = false; /* (left set when the takeover failed: nothing to fill from) */
            pthread_mutex_unlock(&r->mu);
            log_warn("node %u: promoted: serves partition %u from its copy (epoch %llu; %u "
                     "commits in flight taken from the other copies and %u sent to them, %u "
                     "prepared and %u decided two-phase commits taken over, in %.1f ms)", r->me,
                     p, (unsigned long long)c.epoch, pulled, pushed, np, nd,
                     (double)(clock_now_ns() - t0) / 1e6);
        }
    }
}

/* Applies the latest configuration's routes (apply_routes_locked), never waiting for rmu: when
 * a thread holds it -- a takeover, which may wait for other nodes that wait for this node's
 * epoch -- it is asked to go again, and does once it is through. So the configuration watch's
 * thread never waits for a takeover, and this node's epoch moves on meanwhile. */
static void apply_routes(struct replica *r)
{
    __atomic_store_n(&r->routes_again, true, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&r->routes_again, __ATOMIC_SEQ_CST) &&
           pthread_mutex_trylock(&r->rmu) == 0) {
        __atomic_store_n(&r->routes_again, false, __ATOMIC_SEQ_CST);
        apply_routes_locked(r);
        pthread_mutex_unlock(&r->rmu);
    }
}

/* The same, waiting for rmu: the node's start, whose routes must be set before it serves. */
static void apply_routes_wait(struct replica *r)
{
    pthread_mutex_lock(&r->rmu);
    __atomic_store_n(&r->routes_again, false, __ATOMIC_SEQ_CST);
    apply_routes_locked(r);
    pthread_mutex_unlock(&r->rmu);
    if (__atomic_load_n(&r->routes_again, __ATOMIC_SEQ_CST)) apply_routes(r);
}

void replica_set_route(struct replica *r, replica_route_fn fn, replica_adopt_fn afn, void *arg)
{
    if (!r) return;
    pthread_mutex_lock(&r->rmu);
    r->route = fn;
    r->adopt = afn;
    r->route_arg = arg;
    if (r->comeback) {
        /* Back from its log: its partitions are taken over as promotions are, which asks the
         * other copies -- themselves maybe coming back, and serving only once their own start
         * is through. So not here, before this node serves (every node would wait on the
         * others): they stay gated until replica_serve's thread has taken them over. */
        pthread_mutex_lock(&r->mu);
        struct rcfg c = r->cur;
        pthread_mutex_unlock(&r->mu);
        for (unsigned p = 0; p < c.partitions; p++) {
            if (!c.nrep[p] || rcfg_primary(&c, p) != r->me || r->routed[p] == r->me) continue;
            char name[STORE_NAME_MAX + 1];
            store_name(p, r->me, name);
            pthread_mutex_lock(&r->mu);
            struct store *st = copy_locked(r, p);
            pthread_mutex_unlock(&r->mu);
            if (st) fn(arg, p, r->me, st, name, true);
        }
        pthread_mutex_unlock(&r->rmu);
        return;
    }
    pthread_mutex_unlock(&r->rmu);
    apply_routes_wait(r);
}

/* The zombie-probe test hook: what a removed node's process can still do at the other nodes. */
static void zombie_probe(struct replica *r, const struct rcfg *c)
{
    struct fab_ctx *fc = NULL;
    if (fab_ctx_create(r->f, &fc)) return;
    fab_ctx_set_spin(fc, 0);
    unsigned refused = 0, of = 0;
    struct fab_buf resp = {0};
    for (unsigned m = 0; m < c->nodes; m++) {
        if (m == r->me) continue;
        uint64_t word = 0;
        int a = fab_read(fc, rptr_make((uint16_t)m, 0), &word, sizeof word);
        int b = fab_rpc_call(fc, (uint16_t)m, KV_RPC_REPL_EPOCH, NULL, 0, &resp, REPL_TIMEOUT_NS);
        log_warn("test hook: node %u, no member, at node %u: a READ %s, an RPC %s", r->me, m,
                 rdkv_strerror(a), rdkv_strerror(b));
        refused += (a != 0) + (b != 0);
        of += 2;
    }
    fab_buf_free(&resp);
    fab_ctx_destroy(fc);
    pthread_mutex_lock(&r->mu);
    r->probe_refused = refused;
    r->probe_of = of;
    pthread_mutex_unlock(&r->mu);
}

static void on_config(void *arg, const struct rcfg *c, int version)
{
    struct replica *r = arg;
    bool probe = false;
    /* copies this configuration gives this node first: a commit to one that is not open yet is
     * refused, and asked again */
    char why[320];
    if (open_copies(r, c, why, sizeof why)) log_error("node %u: %s", r->me, why);
    pthread_mutex_lock(&r->mu);
    bool newer = c->epoch > r->cur.epoch;
    if (newer || version > r->version) {
        probe = r->fault_probe && (r->cur.members >> r->me & 1) && !(c->members >> r->me & 1) &&
                __atomic_load_n(&r->f, __ATOMIC_ACQUIRE);
        if (newer) log_marks_locked(r, c);
        r->cur = *c;
        r->version = version;
        __atomic_store_n(&r->member, (c->members >> r->me & 1) != 0, __ATOMIC_RELEASE);
        /* a copy filled (or gone) forgets what it remembered while it was being filled; a copy
         * gone (dropped, or this node removed) its records and tail too -- they count against
         * the node's caps, and a PREPARE kept would make a RESOLVE here wait for a promotion
         * that never comes (this process never holds that partition again: only a new one
         * joins) */
        for (unsigned p = 0; p < RCFG_MAX_NODES; p++) {
            if (r->del[p] && (p >= c->partitions || !rcfg_learning(c, p, r->me)))
                delset_free_locked(r, p);
            if ((r->recs[p] || r->tail[p]) && (p >= c->partitions || !rcfg_holds(c, p, r->me))) {
                recs_free_locked(r, p);
                tail_trim_locked(r, p, UINT64_MAX);
            }
        }
        pthread_cond_broadcast(&r->ccv);
    }
    pthread_mutex_unlock(&r->mu);
    if (newer) log_info("node %u: replica configuration epoch %llu", r->me,
                        (unsigned long long)c->epoch);
    if (newer) apply_fences(r);
    /* (also when hook_remove installed it here and poked: its routes are not taken yet) */
    if (newer || c->epoch > __atomic_load_n(&r->routed_epoch, __ATOMIC_ACQUIRE)) apply_routes(r);
    if (probe) zombie_probe(r, c);
}

static void on_manager(void *arg, bool m)
{
    struct replica *r = arg;
    pthread_mutex_lock(&r->mu);
    r->manager = m;
    struct lease *l = r->lease;
    if (m && !l) r->elected = true;
    pthread_mutex_unlock(&r->mu);
    if (m && l) lease_elected(l);
}

/* ---- the lease side's hooks --------------------------------------------------------------- */

static bool hook_is_manager(void *arg)
{
    struct replica *r = arg;
    return zcfg_is_manager(r->z) && zcfg_connected(r->z);
}

static int hook_manager_node(void *arg) { return zcfg_manager_node(((struct replica *)arg)->z); }

static int hook_live(void *arg, uint64_t *mask, int64_t *session_ns)
{
    return zcfg_live(((struct replica *)arg)->z, mask, session_ns);
}

static int hook_started(void *arg, uint64_t *mask, uint64_t *fresh)
{
    return zcfg_claimed(((struct replica *)arg)->z, mask, fresh);
}

static void hook_resign(void *arg) { zcfg_resign(((struct replica *)arg)->z); }

static void hook_config(void *arg, struct rcfg *out)
{
    struct replica *r = arg;
    pthread_mutex_lock(&r->mu);
    *out = r->cur;
    pthread_mutex_unlock(&r->mu);
}

/* The manager's change of the configuration: make() computes the next one from the one stored
 * (RCFG_SAME: nothing to change), installed over the version read -- read again when another
 * change won, up to three times -- and taken here at once. */
#define RCFG_SAME 1
typedef int (*make_fn)(const struct rcfg *cur, const void *ctx, struct rcfg *next);
static int change_config(struct replica *r, make_fn make, const void *ctx, const char *what)
{
    int rc = RDKV_EABORTED;
    for (int tries = 0; tries < 3 && (rc == RDKV_EABORTED || rc == RDKV_EUNKNOWN); tries++) {
        struct rcfg cur, next;
        int version, nv;
        char err[256];
        if ((rc = zcfg_read(r->z, &cur, &version, err, sizeof err))) {
            log_warn("%s", err);
            continue;
        }
        if ((rc = make(&cur, ctx, &next))) return rc == RCFG_SAME ? 0 : rc;
        rc = zcfg_install(r->z, version, &next, &nv, err, sizeof err);
        if (rc) {
            log_warn("%s", err);
            continue;
        }
        log_warn("node %u: configuration epoch %llu installed: %s", r->me,
                 (unsigned long long)next.epoch, what);
        pthread_mutex_lock(&r->mu);
        bool newer = next.epoch > r->cur.epoch;
        if (newer) {
            log_marks_locked(r, &next); /* (on_config will not see it as newer) */
            r->cur = next;
            r->version = nv;
            __atomic_store_n(&r->member, (next.members >> r->me & 1) != 0, __ATOMIC_RELEASE);
            pthread_cond_broadcast(&r->ccv);
        }
        pthread_mutex_unlock(&r->mu);
        /* the routes are taken on zcfg's thread (a takeover may wait for other nodes; callers
         * are the lease monitor and RPC threads) */
        if (newer) zcfg_poke(r->z);
    }
    return rc;
}

static int make_without(const struct rcfg *cur, const void *ctx, struct rcfg *next)
{
    uint64_t nodes = *(const uint64_t *)ctx;
    struct rcfg t = *cur;
    bool changed = false;
    for (unsigned m = 0; m < cur->nodes; m++) {
        if (!(nodes >> m & 1) || !(t.members >> m & 1)) continue; /* (already gone) */
        struct rcfg u;
        int rc = rcfg_without(&t, (uint16_t)m, &u);
        if (rc) return rc;
        t = u;
        changed = true;
    }
    if (!changed) return RCFG_SAME;
    *next = t;
    return 0;
}

/* The manager's removal of members (the lease monitor's hook): one change for all of them. */
static int hook_remove(void *arg, uint64_t nodes)
{
    char what[RCFG_MAX_NODES * 4 + 32];
    size_t o = (size_t)snprintf(what, sizeof what, "without node%s",
                                (nodes & (nodes - 1)) ? "s" : "");
    for (unsigned m = 0; m < RCFG_MAX_NODES && o < sizeof what; m++)
        if (nodes >> m & 1) o += (size_t)snprintf(what + o, sizeof what - o, " %u", m);
    return change_config(arg, make_without, &nodes, what);
}

struct joiner {
    uint16_t node;
    uint64_t inc; /* its process's incarnation */
};

static int make_join(const struct rcfg *cur, const void *ctx, struct rcfg *next)
{
    const struct joiner *j = ctx;
    if (j->node < cur->nodes && (cur->members >> j->node & 1)) {
        /* asked again by the process taken back; any other process of a member is refused (a
         * process older than the one taken back is fenced, and cannot ask) */
        return cur->fenced[j->node] == j->inc - 1 ? RCFG_SAME : RDKV_EEXIST;
    }
    return rcfg_join(cur, j->node, j->inc, next);
}

/* The manager takes node's process inc back as a member that fills a copy of every partition
 * short of R copies (section 8), fencing its earlier processes. Its lease is fresh from now: its
 * old silence is no suspicion. */
static int do_join(struct replica *r, uint16_t node, uint64_t inc)
{
    if (!hook_is_manager(r)) return RDKV_EPERM;
    lease_admit(r->lease, node);
    char what[64];
    snprintf(what, sizeof what, "node %u back, filling copies", node);
    struct joiner j = {node, inc};
    return change_config(r, make_join, &j, what);
}

/* KV_RPC_REPL_JOIN: empty, from the node that joins (FAB_RPC_FENCED: the one way in for a new
 * process of a removed node, which every member fences until it is taken back). */
static void on_join(struct fab_rpc_req *req, void *arg)
{
    struct replica *r = arg;
    int rc = fab_rpc_len(req) ? RDKV_EPROTO
                              : do_join(r, fab_rpc_src(req), fab_rpc_src_incarnation(req));
    fab_rpc_reply(req, rc, NULL, 0);
}

struct filled {
    unsigned p;
    uint16_t src, n, nodes[RCFG_MAX_REPLICAS];
};

static int make_filled(const struct rcfg *cur, const void *ctx, struct rcfg *next)
{
    const struct filled *f = ctx;
    if (f->p >= cur->partitions || rcfg_primary(cur, f->p) != f->src) return RDKV_EPERM;
    struct rcfg t = *cur, u;
    bool changed = false;
    for (unsigned i = 0; i < f->n; i++) {
        if (!rcfg_learning(&t, f->p, f->nodes[i])) {
            if (!rcfg_holds(&t, f->p, f->nodes[i])) return RDKV_EPERM; /* (gone meanwhile) */
            continue;
        }
        if (rcfg_filled(&t, f->p, f->nodes[i], &u)) return RDKV_EINVAL;
        t = u;
        changed = true;
    }
    if (!changed) return RCFG_SAME;
    t.epoch = cur->epoch + 1;
    *next = t;
    return 0;
}

/* The primary of partition f->p says its copies at f->nodes are filled: every row sent in one
 * stream each took, and every commit since the stream began shipped to them too. */
static int do_filled(struct replica *r, const void *ctx)
{
    const struct filled *f = ctx;
    if (!hook_is_manager(r)) return RDKV_EPERM;
    char what[96];
    int o = snprintf(what, sizeof what, "partition %u's copies filled at node", f->p);
    for (unsigned i = 0; i < f->n && o > 0 && (size_t)o < sizeof what; i++)
        o += snprintf(what + o, sizeof what - (size_t)o, " %u", f->nodes[i]);
    return change_config(r, make_filled, f, what);
}

struct drop {
    unsigned p;
    uint16_t src, node;
};

static int make_drop(const struct rcfg *cur, const void *ctx, struct rcfg *next)
{
    const struct drop *d = ctx;
    if (d->p >= cur->partitions || rcfg_primary(cur, d->p) != d->src) return RDKV_EPERM;
    if (!rcfg_holds(cur, d->p, d->node)) return RCFG_SAME; /* (dropped, or gone, meanwhile) */
    return rcfg_drop(cur, d->p, d->node, next);
}

/* The primary of partition d->p says its copy at d->node has refused its commits for a lasting
 * reason (section 7): that copy leaves the partition's set; the node stays a member. */
static int do_drop(struct replica *r, const void *ctx)
{
    const struct drop *d = ctx;
    if (!hook_is_manager(r)) return RDKV_EPERM;
    char what[96];
    snprintf(what, sizeof what, "partition %u's copy at node %u dropped (it refuses commits)",
             d->p, d->node);
    return change_config(r, make_drop, d, what);
}

/* KV_RPC_REPL_DROP: u16 partition, u16 node. */
static void on_drop(struct fab_rpc_req *req, void *arg)
{
    const uint8_t *b = fab_rpc_data(req);
    int rc = RDKV_EPROTO;
    if (fab_rpc_len(req) == 4) {
        struct drop d = {pack_get_u16le(b), fab_rpc_src(req), pack_get_u16le(b + 2)};
        rc = do_drop(arg, &d);
    }
    fab_rpc_reply(req, rc, NULL, 0);
}

struct handback {
    unsigned p;
    uint16_t src;
};

static int make_handback(const struct rcfg *cur, const void *ctx, struct rcfg *next)
{
    const struct handback *h = ctx;
    /* (handed back already: this request again, or a write whose answer was lost) */
    if (h->p < cur->partitions && rcfg_primary(cur, h->p) == h->p) return RCFG_SAME;
    if (h->p >= cur->partitions || rcfg_primary(cur, h->p) != h->src) return RDKV_EPERM;
    return rcfg_handback(cur, h->p, (uint16_t)h->p, next);
}

/* The primary of partition h->p, which serves it since a failover, has drained it and hands it
 * back to its home node, a full copy again (section 8). */
static int do_handback(struct replica *r, const void *ctx)
{
    const struct handback *h = ctx;
    if (!hook_is_manager(r)) return RDKV_EPERM;
    char what[96];
    snprintf(what, sizeof what, "partition %u handed back to node %u by node %u", h->p, h->p,
             h->src);
    return change_config(r, make_handback, h, what);
}

/* KV_RPC_REPL_HANDBACK: u16 partition. */
static void on_handback(struct fab_rpc_req *req, void *arg)
{
    const uint8_t *b = fab_rpc_data(req);
    int rc = RDKV_EPROTO;
    if (fab_rpc_len(req) == 2) {
        struct handback h = {pack_get_u16le(b), fab_rpc_src(req)};
        rc = do_handback(arg, &h);
    }
    fab_rpc_reply(req, rc, NULL, 0);
}

/* KV_RPC_REPL_FILLED: u64 epoch (unused: the stored configuration decides), u16 partition, u8
 * count, count u16 nodes. */
static void on_filled(struct fab_rpc_req *req, void *arg)
{
    const uint8_t *b = fab_rpc_data(req);
    size_t len = fab_rpc_len(req);
    struct filled f = {.src = fab_rpc_src(req)};
    int rc = 0;
    if (len < REPL_FILLED_HDR || b[10] > RCFG_MAX_REPLICAS ||
        len != REPL_FILLED_HDR + 2u * b[10])
        rc = RDKV_EPROTO;
    if (!rc) {
        f.p = pack_get_u16le(b + 8);
        f.n = b[10];
        for (unsigned i = 0; i < f.n; i++) f.nodes[i] = pack_get_u16le(b + REPL_FILLED_HDR + 2 * i);
        rc = do_filled(arg, &f);
    }
    fab_rpc_reply(req, rc, NULL, 0);
}

/* A request to the configuration manager, as ZooKeeper names it: handled here by local(r, ctx)
 * when this node holds the office, else sent to it as the RPC `type` carrying b[0..len) (its
 * answer's status); RDKV_EUNAVAILABLE when none is named. *mgr (may be NULL): the node asked. */
static int ask_manager(struct replica *r, struct fab_ctx *fc, uint16_t type, const void *b,
                       size_t len, int64_t timeout_ns,
                       int (*local)(struct replica *r, const void *ctx), const void *ctx,
                       int *mgr)
{
    int m = zcfg_manager_node(r->z);
    if (mgr) *mgr = m;
    if (m < 0) return RDKV_EUNAVAILABLE;
    if (m == r->me) return local(r, ctx);
    struct fab_buf resp = {0};
    int rc = fab_rpc_call(fc, (uint16_t)m, type, b, len, &resp, timeout_ns);
    fab_buf_free(&resp);
    return rc;
}

/* The joiner's request, when this node is the manager itself. */
static int join_self(struct replica *r, const void *ctx)
{
    (void)ctx;
    return do_join(r, r->me, fab_incarnation(r->f));
}

/* Whether another member's process lives on from before this node's restart: a node comes
 * back as it was only in a whole cluster started again -- the others' memory of its old process
 * (its locks, its rows' places, its commits in flight) is gone with them; with one alive, it
 * joins empty instead, as in memory. Their election znodes made before this check began are
 * waited for until ZooKeeper's session timeout has passed (a dead process's goes then); one
 * still there is a survivor's. */
static bool survivors(struct replica *r, char *why, size_t whycap)
{
    uint64_t mark = 0, elders = 0;
    int64_t session_ns = 0, t0 = clock_now_ns();
    for (;;) {
        int rc = zcfg_elders(r->z, &mark, &elders, &session_ns);
        if (rc) {
            snprintf(why, whycap, "ZooKeeper did not say which nodes live: %s", rdkv_strerror(rc));
            return true;
        }
        if (!elders) return false;
        if (clock_now_ns() - t0 > session_ns + NS_PER_S) break;
        clock_sleep_ns(100 * NS_PER_MS);
    }
    snprintf(why, whycap, "other members live on (mask %#llx): the cluster was not stopped as a "
             "whole", (unsigned long long)elders);
    return true;
}

static void ckpt_dir(const struct replica *r, unsigned p, char *buf, size_t cap);

/* wal_scan's callback for the come-back decision: the marks after each copy's checkpoint, and
 * the log's first LSN. */
struct hist_state {
    uint8_t *hist;
    const uint64_t *from;
    uint64_t first;
};
static int hist_scan(void *arg, const struct wal_rec *rec)
{
    struct hist_state *h = arg;
    uint8_t kind;
    unsigned p;
    if (!h->first) h->first = rec->lsn;
    if (rec->type == WAL_REPL || rec->type == WAL_FILL) return 0;
    if (rec->type != WAL_MARK || !mark_get(rec->payload, rec->len, &kind, &p)) return RDKV_EPROTO;
    if (rec->lsn >= h->from[p]) h->hist[p] = hist_after(h->hist[p], kind);
    return 0;
}

/* Whether this node, a member of c that held copies before, comes back as it was from the
 * copies' log in dir: each copy c gives it has its whole history there (begun, and full where c
 * says full) -- no commit of those partitions was acknowledged without this node since, as it
 * was a member holding them. Why not, in why. */
static bool can_come_back(const struct replica *r, const struct rcfg *c, const char *dir,
                          uint8_t *hist, char *why, size_t whycap)
{
    struct wal_scan_result res;
    char err[256] = "";
    memset(hist, 0, RCFG_MAX_NODES);
    /* a copy with a checkpoint was full at its replay LSN; its marks before are cut */
    uint64_t from[RCFG_MAX_NODES] = {0};
    for (unsigned p = 0; p < c->partitions; p++) {
        char cd[600];
        ckpt_dir(r, p, cd, sizeof cd);
        uint64_t kept[CKPT_KEEP];
        int k = ckpt_list(cd, kept, CKPT_KEEP);
        if (k > 0) {
            from[p] = kept[k - 1]; /* (the oldest kept: the newest may not load) */
            hist[p] = HIST_FULL;
        }
    }
    struct hist_state hs = {hist, from, 0};
    int rc = wal_scan(dir, r->me, r->logo.cluster_fp, 0, hist_scan, &hs, &res, err, sizeof err);
    if (rc) {
        snprintf(why, whycap, "its copies' log in %.120s does not read: %.120s", dir,
                 err[0] ? err : rdkv_strerror(rc));
        return false;
    }
    if (!res.records) {
        snprintf(why, whycap, "%.200s holds no copies' log", dir);
        return false;
    }
    for (unsigned p = 0; p < c->partitions; p++) {
        if (!rcfg_holds(c, p, r->me)) continue;
        uint8_t want = rcfg_learning(c, p, r->me) ? HIST_LEARNING : HIST_FULL;
        /* (a checkpoint's log must reach it: from below its replay LSN on; a copy without one
         * has its whole history in the log when its CREATE or BEGIN mark is there -- hist) */
        if (hist[p] != want || (from[p] && (hs.first > from[p] || res.last_lsn + 1 < from[p]))) {
            snprintf(why, whycap, "its log does not hold partition %u's whole history", p);
            return false;
        }
    }
    return true;
}

int replica_start(const struct cluster_config *cc, uint16_t me, int64_t connect_ns,
                  int64_t lease_ns, const struct wal_opts *log, struct replica **out, char *err,
                  size_t errcap)
{
    *out = NULL;
    if (!cc->zookeeper[0]) {
        log_info("node %u: no ZooKeeper in the cluster config: one copy of each partition, on its "
                 "node (replicas 1; docs/replication.md)", me);
        return 0;
    }
    struct replica *r = calloc(1, sizeof *r);
    if (!r) return RDKV_ENOMEM;
    r->me = me;
    r->lease_ns = lease_ns > 0 ? lease_ns : REPLICA_LEASE_DEFAULT_NS;
    if (log && log->dir) {
        r->logo = *log;
        snprintf(r->logdir, sizeof r->logdir, "%s/repl", log->dir);
        r->logo.dir = r->logdir;
        r->logo.node = me;
        r->logo.cluster_fp = cc->fingerprint;
        r->logo.record_max = WAL_REC_LIMIT;
    }
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->rmu, NULL);
    pthread_mutex_init(&r->fmu, NULL);
    pthread_cond_init(&r->cv, NULL);
    clock_cond_init(&r->ccv);
    for (unsigned p = 0; p < RCFG_MAX_NODES; p++) r->routed[p] = (uint16_t)p;
    struct rcfg init;
    int rc = rcfg_initial(&init, cc->n, cc->replicas);
    if (rc) {
        snprintf(err, errcap, "%u nodes with replicas %u: a replicated cluster has 1..%u nodes",
                 cc->n, cc->replicas, RCFG_MAX_NODES);
        goto fail;
    }
    char root[64];
    snprintf(root, sizeof root, "/rdkv/%016llx", (unsigned long long)cc->fingerprint);
    struct zcfg_opts o;
    zcfg_opts_init(&o);
    o.hosts = cc->zookeeper;
    o.root = root;
    o.node = me;
    if (connect_ns > 0) o.connect_ns = connect_ns;
    o.on_config = on_config;
    o.on_manager = on_manager;
    o.arg = r;
    /* a test hook (RDKV_TEST_FAULT=start-late@<node>[,<node>...]): these nodes reach ZooKeeper
     * two leases and a second late, as a slow machine's at a cluster's start */
    const char *hook = getenv("RDKV_TEST_FAULT");
    bool late = false;
    if (hook && !strncmp(hook, "start-late@", 11))
        for (const char *s = hook + 11; *s && !late;) {
            char *end = NULL;
            unsigned long v = strtoul(s, &end, 10);
            if (end == s) break;
            late = v == me;
            s = *end == ',' ? end + 1 : end;
        }
    if (late) {
        log_warn("test hook: reaching ZooKeeper %.1f s late",
                 (double)(2 * r->lease_ns + NS_PER_S) / 1e9);
        clock_sleep_ns(2 * r->lease_ns + NS_PER_S);
    }
    /* The first callbacks may come before zcfg_open returns: cur starts at epoch 0. */
    rc = zcfg_open(&o, &init, &r->z, &init, &r->version, err, errcap);
    if (rc) goto fail;
    pthread_mutex_lock(&r->mu);
    if (init.epoch >= r->cur.epoch) r->cur = init;
    __atomic_store_n(&r->member, (r->cur.members >> r->me & 1) != 0, __ATOMIC_RELEASE);
    struct rcfg c = r->cur;
    pthread_mutex_unlock(&r->mu);
    if (c.nodes != cc->n || c.replicas != cc->replicas) {
        snprintf(err, errcap,
                 "ZooKeeper %s%s holds a configuration of %u nodes with replicas %u, and the "
                 "cluster config says %u nodes with replicas %u: another cluster's, or this one's "
                 "config was changed",
                 cc->zookeeper, root, c.nodes, c.replicas, cc->n, cc->replicas);
        rc = RDKV_ECONFIG;
        goto fail;
    }
    if (c.replicas == 1 && !(c.members >> me & 1)) {
        snprintf(err, errcap, "node %u is no member of the replica configuration (epoch %llu in "
                 "ZooKeeper %s%s)", me, (unsigned long long)c.epoch, cc->zookeeper, root);
        rc = RDKV_ECONFIG;
        goto fail;
    }
    if (c.replicas > 1 && (rc = zcfg_claim(r->z, me)) && rc != RDKV_EEXIST) {
        snprintf(err, errcap, "ZooKeeper %s: cannot record node %u as joined: %s",
                 cc->zookeeper, me, rdkv_strerror(rc));
        goto fail;
    }
    char whynot[320] = "";
    if (rc == RDKV_EEXIST && (c.members >> me & 1) && r->logo.dir &&
        can_come_back(r, &c, r->logdir, r->hist, whynot, sizeof whynot) &&
        !survivors(r, whynot, sizeof whynot)) {
        /* its copies are in its log, whole: it comes back as the member it was, and takes its
         * partitions over as a promoted copy does (section 7, "Backups' logs") */
        r->comeback = true;
        log_warn("node %u held copies of this replicated cluster before: it comes back as the "
                 "member it was, from its copies' log in %s (epoch %llu)", me, r->logdir,
                 (unsigned long long)c.epoch);
    } else if (rc == RDKV_EEXIST && (c.members >> me & 1)) {
        if (whynot[0]) log_warn("node %u: %s", me, whynot);
        /* An earlier process of this node held copies, and the configuration still counts it:
         * they were in memory and are gone, so this one must neither serve them nor take
         * commits as a copy. Nothing renews its lease now (this process serves nothing yet):
         * the manager removes it within a lease and a tenth -- plus ZooKeeper's session, when
         * it was the manager -- and then it joins as a node with an empty memory. */
        log_warn("node %u held copies of this replicated cluster before (ZooKeeper %s%s/joined/"
                 "%u): waiting for the manager to remove its old membership, then joining "
                 "empty (docs/replication.md, section 8)", me, cc->zookeeper, root, me);
        int64_t t0 = clock_now_ns(), until = t0 + 10 * NS_PER_S + 4 * r->lease_ns;
        pthread_mutex_lock(&r->mu); /* (on_config broadcasts ccv with each configuration) */
        while ((r->cur.members >> me & 1) && clock_now_ns() < until) {
            struct timespec ts = clock_ts(until);
            pthread_cond_timedwait(&r->ccv, &r->mu, &ts);
        }
        c = r->cur;
        pthread_mutex_unlock(&r->mu);
        if (c.members >> me & 1) {
            snprintf(err, errcap,
                     "node %u held copies of this replicated cluster before (ZooKeeper %s%s/"
                     "joined/%u), and after %.1f s the configuration (epoch %llu) still counts "
                     "it a member: is an earlier process of it still running, or is there no "
                     "configuration manager?", me, cc->zookeeper, root, me,
                     (double)(clock_now_ns() - t0) / 1e9, (unsigned long long)c.epoch);
            rc = RDKV_ECONFIG;
            goto fail;
        }
    }
    rc = 0;
    r->joining = !(c.members >> me & 1);
    /* a partition it comes back as the primary of is taken over (routed elsewhere until then) */
    for (unsigned p = 0; r->comeback && p < c.partitions; p++)
        if (rcfg_primary(&c, p) == me) r->routed[p] = UINT16_MAX;
    if (r->joining)
        log_warn("node %u is no member of the replica configuration (epoch %llu): it joins with "
                 "an empty memory and fills a copy of every partition short of %u copies",
                 me, (unsigned long long)c.epoch, c.replicas);
    r->parts = c.partitions;
    log_info("node %u: replica configuration epoch %llu from ZooKeeper %s (%u partitions, "
             "replicas %u)", me, (unsigned long long)c.epoch, cc->zookeeper, c.partitions,
             c.replicas);
    zcfg_run_for_manager(r->z);
    *out = r;
    return 0;
fail:
    zcfg_close(r->z);
    pthread_cond_destroy(&r->ccv);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->rmu);
    pthread_mutex_destroy(&r->mu);
    free(r);
    return rc;
}

static void *shipper_main(void *arg);
static void *asker_main(void *arg);

/* ---- a backup's side ---------------------------------------------------------------------- */

static int check_write(void *arg, const struct wal_write *w)
{
    struct store *st = arg;
    return w->klen > store_key_max(st) || w->vlen > store_value_max(st) ? RDKV_EPROTO : 0;
}

static int apply_write(void *arg, const struct wal_write *w)
{
    return store_apply(arg, w->op == WAL_OP_DEL, w->key, w->klen, w->val, w->vlen);
}

/* ---- a copy being filled (section 8) ------------------------------------------------------ */

static void delset_free_locked(struct replica *r, unsigned p)
{
    struct delset *d = r->del[p];
    if (!d) return;
    for (unsigned i = 0; i < REPL_DEL_BUCKETS; i++)
        for (struct dkey *k = d->b[i], *nx; k; k = nx) {
            nx = k->next;
            free(k);
        }
    free(d);
    r->del[p] = NULL;
}

static bool delset_has(const struct delset *d, const void *key, uint32_t klen)
{
    if (!d) return false;
    for (const struct dkey *k = d->b[XXH3_64bits(key, klen) % REPL_DEL_BUCKETS]; k; k = k->next)
        if (k->klen == klen && !memcmp(k->k, key, klen)) return true;
    return false;
}

/* Records that a commit deleted key from p's copy being filled; past the set's bounds (or
 * without memory) the stream is marked broken instead: its rows may no longer be applied, and
 * the primary starts it again. */
static void delset_add_locked(struct replica *r, unsigned p, const void *key, uint32_t klen)
{
    if (r->broken[p]) return;
    struct delset *d = r->del[p];
    if (!d) d = r->del[p] = calloc(1, sizeof *d);
    if (d && delset_has(d, key, klen)) return;
    struct dkey *k = d && d->n < REPL_DEL_MAX && d->bytes + sizeof *k + klen <= REPL_DEL_BYTES
                         ? malloc(sizeof *k + klen)
                         : NULL;
    if (!k) {
        delset_free_locked(r, p);
        r->broken[p] = true;
        return;
    }
    k->klen = klen;
    if (klen) memcpy(k->k, key, klen);
    unsigned b = (unsigned)(XXH3_64bits(key, klen) % REPL_DEL_BUCKETS);
    k->next = d->b[b];
    d->b[b] = k;
    d->n++;
    d->bytes += sizeof *k + klen;
}

struct learn {
    struct replica *r;
    unsigned p;
    struct store *st;
};

/* A commit's write to a copy being filled: applied, and a delete remembered (mu held). */
static int apply_learn(void *arg, const struct wal_write *w)
{
    struct learn *l = arg;
    if (w->op == WAL_OP_DEL) delset_add_locked(l->r, l->p, w->key, w->klen);
    return apply_write(l->st, w);
}

/* A row of the primary's stream: applied only where no commit has written the key since the
 * stream began -- a key present was put by one (or by this stream, which never repeats a key),
 * a key in the set was deleted by one -- so a row read before a later commit never overwrites
 * it (mu held, as commits are applied). */
static int copy_row(void *arg, const void *key, uint32_t klen, const void *val, uint32_t vlen)
{
    struct learn *l = arg;
    rptr row;
    if (store_lookup(l->st, key, klen, &row) == 0) return 0;
    if (delset_has(l->r->del[l->p], key, klen)) return 0;
    return store_apply(l->st, false, key, klen, val, vlen);
}

/* KV_RPC_REPL_COPY: a batch of the primary's rows for this node's copy being filled; only from
 * the partition's primary of the configuration held here, and only within one stream begun
 * with its first batch. */
/* Applies a KV_RPC_REPL_COPY payload (b, len: at least REPL_COPY_HDR bytes) to partition p's
 * copy st here, being filled, whose sender, epoch and stream the caller has checked (the live
 * path) or that the log replays: rows the copy holds already, or deleted since the stream
 * began, are left as they are. A bad row marks the stream broken (the rows before it are in:
 * it starts again). mu held. */
static int copy_apply_locked(struct replica *r, unsigned p, struct store *st, const uint8_t *b,
                             size_t len, char *why, size_t whycap)
{
    if (b[18]) { /* the stream's first batch */
        delset_free_locked(r, p);
        r->broken[p] = false;
        r->stream[p] = pack_get_u64le(b + 10);
    }
    struct learn lc = {r, p, st};
    int rc = ckpt_rows_decode(b + REPL_COPY_HDR, len - REPL_COPY_HDR, pack_get_u32le(b + 19),
                              store_key_max(st), store_value_max(st), copy_row, &lc, why,
                              whycap);
    if (rc && rc != RDKV_ENOSPC && rc != RDKV_ENOMEM) rc = RDKV_EPROTO;
    if (rc) r->broken[p] = true;
    return rc;
}

static void on_copy(struct fab_rpc_req *req, void *arg)
{
    struct replica *r = arg;
    const uint8_t *b = fab_rpc_data(req);
    size_t len = fab_rpc_len(req);
    if (len < REPL_COPY_HDR) {
        fab_rpc_reply(req, RDKV_EPROTO, NULL, 0);
        return;
    }
    uint64_t epoch = pack_get_u64le(b), stream = pack_get_u64le(b + 10);
    unsigned p = pack_get_u16le(b + 8);
    bool first = b[18] != 0;
    char why[160] = "";
    pthread_mutex_lock(&r->mu);
    int rc = 0;
    struct store *st = p < r->cur.partitions ? copy_locked(r, p) : NULL;
    if (r->stopping) rc = RDKV_ESHUTDOWN;
    else if (epoch > r->cur.epoch) rc = RDKV_EBUSY; /* (its configuration is not here yet) */
    else if (!st || !rcfg_learning(&r->cur, p, r->me) ||
             rcfg_primary(&r->cur, p) != fab_rpc_src(req))
        rc = RDKV_EPERM;
    else if (!first && (r->stream[p] != stream || r->broken[p]))
        rc = RDKV_EABORTED; /* (a stream this process did not see begin, or broken: again) */
    if (!rc) {
        rc = copy_apply_locked(r, p, st, b, len, why, sizeof why);
        if (rc)
            log_warn("node %u: a copy batch of partition %u from node %u refused: %s", r->me, p,
                     fab_rpc_src(req), why[0] ? why : rdkv_strerror(rc));
    }
    uint64_t lsn = 0;
    if (!rc) rc = log_append_locked(r, WAL_FILL, b, len, &lsn);
    pthread_mutex_unlock(&r->mu);
    if (lsn) log_wait(r, lsn, "copy batch");
    fab_rpc_reply(req, rc, NULL, 0);
}


/* Drops partition p's records of txid that an item of `kind` settles (mu held): APPLY and
 * PREPARE a PREPARE, DECIDE a DECIDE, FORGET both. */
static void recs_drop_locked(struct replica *r, unsigned p, uint64_t txid, uint8_t kind)
{
    for (struct rrec **pp = &r->recs[p]; *pp;) {
        struct rrec *x = *pp;
        bool drop = x->txid == txid &&
                    (kind == REPLICA_FORGET ||
                     (x->kind == REPLICA_PREPARE && kind != REPLICA_DECIDE) ||
                     (x->kind == REPLICA_DECIDE && kind == REPLICA_DECIDE));
        if (!drop) {
            pp = &x->next;
            continue;
        }
        *pp = x->next;
        r->nrecs--;
        r->rec_bytes -= sizeof *x + x->len;
        free(x);
    }
}

static void recs_free_locked(struct replica *r, unsigned p)
{
    while (r->recs[p]) {
        struct rrec *x = r->recs[p];
        r->recs[p] = x->next;
        r->nrecs--;
        r->rec_bytes -= sizeof *x + x->len;
        free(x);
    }
}

/* Whether partition p's copy here holds the APPLY numbered seq (mu held): at or below the
 * stable mark, or in the tail. */
static bool tail_has_locked(const struct replica *r, unsigned p, uint64_t seq)
{
    if (seq <= r->tstable[p]) return true;
    for (const struct rtail *x = r->tail[p]; x; x = x->next)
        if (x->seq == seq) return true;
    return false;
}

static int tail_add_locked(struct replica *r, unsigned p, uint64_t seq, uint64_t txid,
                           const void *w, uint32_t len)
{
    struct rtail *x = malloc(sizeof *x + len);
    if (!x) return RDKV_ENOMEM;
    x->seq = seq;
    x->txid = txid;
    x->len = len;
    if (len) memcpy(x->bytes, w, len);
    x->next = r->tail[p];
    r->tail[p] = x;
    r->ntail++;
    r->tail_bytes += sizeof *x + len;
    return 0;
}

/* Raises p's stable mark to `stable` and drops the tail's APPLYs at or below it (mu held);
 * UINT64_MAX drops them all. */
static void tail_trim_locked(struct replica *r, unsigned p, uint64_t stable)
{
    if (stable > r->tstable[p]) r->tstable[p] = stable;
    for (struct rtail **pp = &r->tail[p]; *pp;) {
        struct rtail *x = *pp;
        if (x->seq > r->tstable[p]) {
            pp = &x->next;
            continue;
        }
        *pp = x->next;
        r->ntail--;
        r->tail_bytes -= sizeof *x + x->len;
        free(x);
    }
}

static int seq_cmp(const void *a, const void *b)
{
    uint64_t x = (*(struct rtail *const *)a)->seq, y = (*(struct rtail *const *)b)->seq;
    return x < y ? -1 : x > y;
}

/* p's tail after `after`, in seq order (mu held): a malloc'd array of *n entries (NULL and 0
 * when empty or short of memory: *err says which). */
static struct rtail **tail_sorted_locked(struct replica *r, unsigned p, uint64_t after,
                                         size_t *n, int *err)
{
    size_t k = 0;
    for (struct rtail *x = r->tail[p]; x; x = x->next) k += x->seq > after;
    *n = 0;
    *err = 0;
    if (!k) return NULL;
    struct rtail **v = malloc(k * sizeof *v);
    if (!v) {
        *err = RDKV_ENOMEM;
        return NULL;
    }
    for (struct rtail *x = r->tail[p]; x; x = x->next)
        if (x->seq > after) v[(*n)++] = x;
    qsort(v, *n, sizeof *v, seq_cmp);
    return v;
}

bool replica_serving(struct replica *r)
{
    if (!r || !__atomic_load_n(&r->leased, __ATOMIC_ACQUIRE)) return true;
    return __atomic_load_n(&r->member, __ATOMIC_ACQUIRE) && lease_valid(r->lease);
}

bool replica_holds_prepared(struct replica *r, uint64_t txid)
{
    bool held = false;
    pthread_mutex_lock(&r->mu);
    for (unsigned p = 0; p < RCFG_MAX_NODES && !held; p++)
        for (struct rrec *x = r->recs[p]; x && !held; x = x->next)
            held = x->kind == REPLICA_PREPARE && x->txid == txid;
    pthread_mutex_unlock(&r->mu);
    return held;
}

/* KV_RPC_REPL: a primary's commit, applied to this node's copy of its partition -- only from
 * the partition's primary of the configuration this node holds, and only in that epoch (an old
 * primary, a zombie, is refused by every backup that moved on: docs/replication.md). */
/* Applies a REPL payload (b, len: at least REPL_HDR bytes) of partition p to its copy cp here,
 * whose sender and epoch the caller has checked (the live path) or that the log replays:
 * every item's bounds and every write against the copy's limits first, so that a malformed
 * batch applies nothing; then the items in order; then the stable mark. learning: cp is a copy
 * being filled (a delete is remembered against the fill's rows). mu held. */
static int repl_apply_locked(struct replica *r, unsigned p, struct store *cp, bool learning,
                             const uint8_t *b, size_t len)
{
    int rc = 0;
    uint32_t count = pack_get_u32le(b + 10);
    uint64_t stable = pack_get_u64le(b + 14);
    size_t off = REPL_HDR;
    for (uint32_t i = 0; i < count && !rc; i++) {
        if (len - off < REPL_ITEM_HDR) rc = RDKV_EPROTO;
        else {
            uint8_t kind = b[off + 8];
            uint32_t il = pack_get_u32le(b + off + 9);
            if (len - off - REPL_ITEM_HDR < il || kind > REPLICA_DECIDE ||
                (kind == REPLICA_PREPARE && il < 2) || (kind == REPLICA_DECIDE && il))
                rc = RDKV_EPROTO;
            else off += REPL_ITEM_HDR + il;
        }
    }
    if (!rc && off != len) rc = RDKV_EPROTO;
    /* and every write of every item, with the copy's limits, before any is applied; and room
     * for the records it adds */
    unsigned adds = 0, tadds = 0;
    uint64_t add_bytes = 0, tadd_bytes = 0;
    for (size_t o2 = REPL_HDR, i = 0; !rc && i < count; i++) {
        uint8_t kind = b[o2 + 8];
        uint32_t il = pack_get_u32le(b + o2 + 9);
        uint64_t seq = pack_get_u64le(b + o2 + 13);
        const uint8_t *w = b + o2 + REPL_ITEM_HDR;
        size_t skip = kind == REPLICA_PREPARE ? 2 : 0;
        if (kind != REPLICA_DECIDE && !(kind == REPLICA_FORGET && !il))
            rc = wal_writes_unpack(w + skip, il - skip, check_write, cp);
        if (seq && kind != REPLICA_APPLY) rc = RDKV_EPROTO;
        if (kind == REPLICA_PREPARE || kind == REPLICA_DECIDE) {
            adds++;
            add_bytes += sizeof(struct rrec) + il;
        }
        if (seq && !tail_has_locked(r, p, seq)) {
            tadds++;
            tadd_bytes += sizeof(struct rtail) + il;
        }
        o2 += REPL_ITEM_HDR + il;
    }
    if (!rc && (r->nrecs + adds > REPL_RECS_MAX || r->rec_bytes + add_bytes > REPL_RECS_BYTES))
        rc = RDKV_ENOSPC;
    if (!rc && (r->ntail + tadds > REPL_TAIL_MAX || r->tail_bytes + tadd_bytes > REPL_TAIL_BYTES))
        rc = RDKV_ENOSPC;
    /* (under mu: replica_detach closes the copies only once no apply is running) */
    for (size_t o3 = REPL_HDR, i = 0; !rc && i < count; i++) {
        uint64_t txid = pack_get_u64le(b + o3);
        uint8_t kind = b[o3 + 8];
        uint32_t il = pack_get_u32le(b + o3 + 9);
        uint64_t seq = pack_get_u64le(b + o3 + 13);
        const uint8_t *w = b + o3 + REPL_ITEM_HDR;
        o3 += REPL_ITEM_HDR + il;
        /* (an APPLY held already -- asked again, or re-sent by a promotion -- is not applied
         * again: a later commit of its rows may be here) */
        if (kind == REPLICA_APPLY && !(seq && tail_has_locked(r, p, seq))) {
            struct learn lc = {r, p, cp};
            rc = learning ? wal_writes_unpack(w, il, apply_learn, &lc)
                          : wal_writes_unpack(w, il, apply_write, cp);
            /* (said once a second at most: the primary asks again every few ms) */
            if (rc && clock_now_ns() - r->apply_said[p] > NS_PER_S) {
                r->apply_said[p] = clock_now_ns();
                log_error("node %u: a commit of partition %u could not be applied to its copy "
                          "here: %s", r->me, p, rdkv_strerror(rc));
            }
            if (!rc && seq) rc = tail_add_locked(r, p, seq, txid, w, il);
        }
        /* a commit settles its PREPARE; a FORGET its PREPARE or DECIDE; a PREPARE or DECIDE
         * asked again replaces itself */
        recs_drop_locked(r, p, txid, kind);
        if (kind == REPLICA_PREPARE || kind == REPLICA_DECIDE) {
            struct rrec *x = malloc(sizeof *x + il);
            if (!x) {
                rc = RDKV_ENOMEM;
                break;
            }
            x->txid = txid;
            x->kind = kind;
            x->coord = kind == REPLICA_PREPARE ? pack_get_u16le(w) : txn_txid_node(txid);
            x->len = kind == REPLICA_PREPARE ? il - 2 : 0;
            if (x->len) memcpy(x->bytes, w + 2, x->len);
            x->next = r->recs[p];
            r->recs[p] = x;
            r->nrecs++;
            r->rec_bytes += sizeof *x + x->len;
        }
    }
    /* (after the items: a promotion's re-send raises stable past what it carries) */
    if (!rc) tail_trim_locked(r, p, stable);
    return rc;
}

static void on_repl(struct fab_rpc_req *req, void *arg)
{
    struct replica *r = arg;
    const uint8_t *b = fab_rpc_data(req);
    size_t len = fab_rpc_len(req);
    if (len < REPL_HDR) {
        fab_rpc_reply(req, RDKV_EPROTO, NULL, 0);
        return;
    }
    uint64_t epoch = pack_get_u64le(b);
    unsigned p = pack_get_u16le(b + 8);
    pthread_mutex_lock(&r->mu);
    int rc = 0;
    uint64_t mine = r->cur.epoch;
    if (r->stopping) rc = RDKV_ESHUTDOWN;
    else if (epoch != r->cur.epoch) rc = RDKV_EPERM;
    else if (p >= r->cur.partitions || !copy_locked(r, p))
        rc = RDKV_EPERM; /* (its own partition as a copy: after it came back empty, section 8) */
    else if (!rcfg_holds(&r->cur, p, r->me) || rcfg_primary(&r->cur, p) != fab_rpc_src(req))
        rc = RDKV_EPERM;
    if (!rc)
        rc = repl_apply_locked(r, p, copy_locked(r, p), rcfg_learning(&r->cur, p, r->me), b,
                               len);
    /* in this copy's log, in the order applied, and durable before the answer (section 7,
     * "Backups' logs") */
    uint64_t lsn = 0;
    if (!rc) rc = log_append_locked(r, WAL_REPL, b, len, &lsn);
    pthread_mutex_unlock(&r->mu);
    if (lsn) log_wait(r, lsn, "commit");
    if (rc == RDKV_EPERM)
        log_warn("node %u: refused a commit of partition %u from node %u in epoch %llu (this "
                 "node is in epoch %llu)", r->me, p, fab_rpc_src(req), (unsigned long long)epoch,
                 (unsigned long long)mine);
    fab_rpc_reply(req, rc, NULL, 0);
}

/* KV_RPC_REPL_TAIL: partition p's tail here, for its primary of this node's epoch (a promoted
 * one gathering the copies' tails: resync). */
static void on_tail(struct fab_rpc_req *req, void *arg)
{
    struct replica *r = arg;
    const uint8_t *b = fab_rpc_data(req);
    if (fab_rpc_len(req) != REPL_TAIL_REQ) {
        fab_rpc_reply(req, RDKV_EPROTO, NULL, 0);
        return;
    }
    uint64_t epoch = pack_get_u64le(b), after = pack_get_u64le(b + 10);
    unsigned p = pack_get_u16le(b + 8);
    size_t cap = fab_rpc_reply_max(req); /* (an item fits: the primary ships none larger) */
    pthread_mutex_lock(&r->mu);
    int rc = 0;
    if (r->stopping) rc = RDKV_ESHUTDOWN;
    else if (epoch > r->cur.epoch || p >= r->cur.partitions || !copy_locked(r, p) ||
             !rcfg_holds(&r->cur, p, r->me) || rcfg_primary(&r->cur, p) != fab_rpc_src(req))
        rc = RDKV_EPERM; /* (an earlier epoch's asker that is p's primary in this one: a read) */
    size_t n = 0, k = 0, len = 5;
    struct rtail **v = rc ? NULL : tail_sorted_locked(r, p, after, &n, &rc);
    for (; k < n && len + 20 + v[k]->len <= cap; k++) len += 20 + v[k]->len;
    uint8_t *out = rc ? NULL : malloc(len);
    if (!rc && !out) rc = RDKV_ENOMEM;
    if (!rc && n && !k) rc = RDKV_ETOOBIG; /* (an item over a page: not sent by the primary) */
    if (!rc) {
        pack_put_u32le(out, (uint32_t)k);
        out[4] = k < n;
        size_t off = 5;
        for (size_t i = 0; i < k; i++) {
            pack_put_u64le(out + off, v[i]->seq);
            pack_put_u64le(out + off + 8, v[i]->txid);
            pack_put_u32le(out + off + 16, v[i]->len);
            memcpy(out + off + 20, v[i]->bytes, v[i]->len);
            off += 20 + v[i]->len;
        }
    }
    pthread_mutex_unlock(&r->mu);
    free(v);
    fab_rpc_reply(req, rc, out, rc ? 0 : len);
    free(out);
}

/* ---- a promotion's resync ------------------------------------------------------------------ */

/* How long a promotion waits for another copy's answer: a copy silent that long is dead, and the
 * next configuration drops it. */
static int64_t resync_wait_ns(const struct replica *r) { return 2 * r->lease_ns; }

/* Node's tail of partition p, prepended to *got (the caller frees the list): 0, or why not. */
/* The epoch a promotion of partition p here speaks in to its copy at node `copy` now: the latest
 * configuration's, while this node is still p's primary in it and that node still holds a copy
 * (a removal, a handback or a join may follow the one it began in at once, and the other copies
 * answer only their own epoch); false once either is not. */
static bool primary_epoch(struct replica *r, unsigned p, uint16_t copy, uint64_t *epoch)
{
    pthread_mutex_lock(&r->mu);
    bool still = primary_locked(r, p) && !r->stopping && rcfg_holds(&r->cur, p, copy);
    if (still && r->cur.epoch > *epoch) *epoch = r->cur.epoch;
    pthread_mutex_unlock(&r->mu);
    return still;
}

static int pull_tail(struct replica *r, struct fab_ctx *fc, uint16_t node, unsigned p,
                     const struct rcfg *c, struct rtail **got)
{
    int64_t deadline = clock_now_ns() + resync_wait_ns(r);
    uint64_t after = 0;
    struct fab_buf resp = {0};
    int rc;
    uint64_t ep = c->epoch;
    for (;;) {
        uint8_t q[REPL_TAIL_REQ];
        if (!primary_epoch(r, p, node, &ep)) {
            rc = RDKV_EUNAVAILABLE;
            break;
        }
        pack_put_u64le(q, ep);
        pack_put_u16le(q + 8, (uint16_t)p);
        pack_put_u64le(q + 10, after);
        rc = fab_rpc_call(fc, node, KV_RPC_REPL_TAIL, q, sizeof q, &resp, REPL_TIMEOUT_NS);
        if (rc) {
            /* (not in this epoch yet, or not answering: asked again until the bound) */
            if (clock_now_ns() >= deadline) break;
            clock_sleep_ns(REPL_RETRY_NS);
            continue;
        }
        const uint8_t *d = resp.data;
        size_t len = resp.len, off = 5;
        if (len < 5) {
            rc = RDKV_EPROTO;
            break;
        }
        uint32_t k = pack_get_u32le(d);
        for (uint32_t i = 0; i < k && !rc; i++) {
            uint32_t il = len - off >= 20 ? pack_get_u32le(d + off + 16) : 0;
            if (len - off < 20 || len - off - 20 < il) {
                rc = RDKV_EPROTO;
                break;
            }
            uint64_t seq = pack_get_u64le(d + off);
            struct rtail *x = seq > after ? malloc(sizeof *x + il) : NULL;
            if (!x) {
                rc = seq > after ? RDKV_ENOMEM : RDKV_EPROTO;
                break;
            }
            x->seq = after = seq;
            x->txid = pack_get_u64le(d + off + 8);
            x->len = il;
            memcpy(x->bytes, d + off + 20, il);
            x->next = *got;
            *got = x;
            off += 20 + il;
        }
        if (rc || !d[4]) break;
    }
    fab_buf_free(&resp);
    return rc;
}

/* A REPL payload of partition p in epoch carrying the APPLYs v[0..n) and the stable mark:
 * len bytes (the caller counted them), malloc'd; NULL for no memory. */
static uint8_t *pack_applies(uint64_t epoch, unsigned p, struct rtail *const *v, size_t n,
                             uint64_t stable, size_t len)
{
    uint8_t *b = malloc(len);
    if (!b) return NULL;
    pack_put_u64le(b, epoch);
    pack_put_u16le(b + 8, (uint16_t)p);
    pack_put_u32le(b + 10, (uint32_t)n);
    pack_put_u64le(b + 14, stable);
    size_t off = REPL_HDR;
    for (size_t j = 0; j < n; j++) {
        pack_put_u64le(b + off, v[j]->txid);
        b[off + 8] = REPLICA_APPLY;
        pack_put_u32le(b + off + 9, v[j]->len);
        pack_put_u64le(b + off + 13, v[j]->seq);
        memcpy(b + off + REPL_ITEM_HDR, v[j]->bytes, v[j]->len);
        off += REPL_ITEM_HDR + v[j]->len;
    }
    return b;
}

/* Sends the APPLYs v[0..n) (seq order) to node as REPLs of partition p, the last one raising
 * its stable mark to `stable`: 0, or why not. */
static int push_tail(struct replica *r, struct fab_ctx *fc, uint16_t node, unsigned p,
                     const struct rcfg *c, struct rtail **v, size_t n, uint64_t stable)
{
    int64_t deadline = clock_now_ns() + resync_wait_ns(r);
    size_t cap = fab_rpc_max(r->f);
    if (r->log && cap > WAL_REC_LIMIT) cap = WAL_REC_LIMIT; /* (one record of a copy's log) */
    struct fab_buf resp = {0};
    int rc = 0;
    for (size_t i = 0; i < n && !rc;) {
        size_t k = 0, len = REPL_HDR;
        while (i + k < n && (k == 0 || len + REPL_ITEM_HDR + v[i + k]->len <= cap))
            len += REPL_ITEM_HDR + v[i + k++]->len;
        uint8_t *b = pack_applies(c->epoch, p, v + i, k, i + k == n ? stable : 0, len);
        if (!b) {
            rc = RDKV_ENOMEM;
            break;
        }
        uint64_t ep = c->epoch;
        for (;;) {
            if (!primary_epoch(r, p, node, &ep)) {
                rc = RDKV_EUNAVAILABLE;
                break;
            }
            pack_put_u64le(b, ep);
            rc = fab_rpc_call(fc, node, KV_RPC_REPL, b, len, &resp, REPL_TIMEOUT_NS);
            if (!rc || clock_now_ns() >= deadline) break;
            clock_sleep_ns(REPL_RETRY_NS);
        }
        free(b);
        i += k;
    }
    fab_buf_free(&resp);
    return rc;
}

/* Step 5 of a promotion to primary of partition p in configuration c: the APPLYs that the other
 * copies hold and this one lacks are applied here, and the union of the tails goes to every
 * other copy, which applies those it lacks -- so that each commit in flight at the dead primary
 * (its client told "unknown") ends up on every copy. Rolling forward is right for each: an
 * APPLY is shipped only after its commit was decided. A copy that does not answer within two
 * leases is taken for dead (logged). 0, or RDKV_ENOMEM. */
static int resync(struct replica *r, unsigned p, const struct rcfg *c, unsigned *pulled,
                  unsigned *pushed)
{
    *pulled = *pushed = 0;
    if (c->nrep[p] < 2) return 0;
    struct fab_ctx *fc = NULL;
    if (fab_ctx_create(r->f, &fc)) return RDKV_ENOMEM;
    fab_ctx_set_spin(fc, 0);
    struct rtail *got = NULL;
    int rc = 0;
    for (unsigned i = 0; i < c->nrep[p] && !rc; i++) {
        uint16_t node = c->rep[p][i];
        if (node == r->me) continue;
        int prc = pull_tail(r, fc, node, p, c, &got);
        if (prc == RDKV_ENOMEM) rc = prc;
        else if (prc)
            log_warn("node %u: partition %u's copy at node %u did not give its commits in "
                     "flight (%s): taken for dead", r->me, p, node, rdkv_strerror(prc));
    }
    /* what this copy lacks, applied in seq order (deduplicated: tail_has) */
    pthread_mutex_lock(&r->mu);
    size_t n = 0;
    for (struct rtail *x = got; x; x = x->next) n++;
    struct rtail **v = n ? malloc(n * sizeof *v) : NULL;
    if (n && !v) rc = RDKV_ENOMEM;
    n = 0;
    for (struct rtail *x = got; x && !rc; x = x->next) v[n++] = x;
    if (n) qsort(v, n, sizeof *v, seq_cmp);
    size_t took = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (tail_has_locked(r, p, v[i]->seq)) continue;
        rc = wal_writes_unpack(v[i]->bytes, v[i]->len, check_write, copy_locked(r, p));
        if (!rc) rc = tail_add_locked(r, p, v[i]->seq, v[i]->txid, v[i]->bytes, v[i]->len);
        if (!rc) rc = wal_writes_unpack(v[i]->bytes, v[i]->len, apply_write, copy_locked(r, p));
        if (!rc) {
            ++*pulled;
            v[took++] = v[i]; /* (what this copy took: into its log, below) */
        }
    }
    /* what this copy took, in its log too (as the REPL that carries it to the others), or a
     * whole cluster started again would find it on the other copies only */
    uint64_t lsn = 0;
    if (!rc && took && r->log) {
        size_t len = REPL_HDR;
        for (size_t i = 0; i < took; i++) len += REPL_ITEM_HDR + v[i]->len;
        uint8_t *b = pack_applies(c->epoch, p, v, took, 0, len);
        if (!b) rc = RDKV_ENOMEM;
        else {
            log_append_locked(r, WAL_REPL, b, len, &lsn);
            free(b);
        }
    }
    int err = 0;
    size_t m = 0;
    struct rtail **all = rc ? NULL : tail_sorted_locked(r, p, 0, &m, &err);
    if (!rc) rc = err;
    uint64_t stable = m ? all[m - 1]->seq : r->tstable[p];
    pthread_mutex_unlock(&r->mu);
    if (lsn) log_wait(r, lsn, "commit taken from another copy");
    /* the union to every other copy (the tail's entries stay put: only this thread trims p's
     * tail now -- no REPL of p is taken here, this node being its primary) */
    for (unsigned i = 0; i < c->nrep[p] && !rc && m; i++) {
        uint16_t node = c->rep[p][i];
        if (node == r->me) continue;
        int prc = push_tail(r, fc, node, p, c, all, m, stable);
        if (prc)
            log_warn("node %u: partition %u's copy at node %u did not take the commits in "
                     "flight (%s): taken for dead", r->me, p, node, rdkv_strerror(prc));
        else *pushed = (unsigned)m;
    }
    free(all);
    free(v);
    while (got) {
        struct rtail *x = got;
        got = x->next;
        free(x);
    }
    pthread_mutex_lock(&r->mu);
    tail_trim_locked(r, p, stable); /* (a primary keeps no tail of its own partition) */
    if (r->pseq[p] < stable) r->pseq[p] = stable;
    pthread_mutex_unlock(&r->mu);
    fab_ctx_destroy(fc);
    if (rc)
        log_error("node %u: partition %u's commits in flight could not be made whole: %s", r->me,
                  p, rdkv_strerror(rc));
    return rc;
}

struct digest {
    uint64_t rows, sum;
    struct store *s;
};
static bool digest_row(void *arg, rptr row, const struct row_view *v)
{
    (void)row;
    struct digest *d = arg;
    d->rows++;
    uint64_t kh = XXH3_64bits(v->key, v->klen);
    d->sum += XXH3_64bits_withSeed(v->val, v->vlen, kh) ^ kh;
    return true;
}

int replica_digest(struct replica *r, unsigned p, uint64_t *rows, uint64_t *sum)
{
    struct store *s = NULL;
    pthread_mutex_lock(&r->mu);
    if (p < r->cur.partitions && !r->stopping) s = copy_locked(r, p);
    struct digest d = {0, 0, s};
    long n = s ? store_scan(s, "", 0, NULL, 0, NULL, 0, 0, digest_row, &d) : RDKV_ENOTFOUND;
    pthread_mutex_unlock(&r->mu);
    if (n < 0) return (int)n;
    *rows = d.rows;
    *sum = d.sum;
    return 0;
}

/* KV_RPC_REPL_DIGEST: u16 partition -> u64 rows, u64 checksum of this node's copy, u64 count
 * and u64 checksum of the two-phase commit records it holds as a copy of it (a primary's are
 * its transaction layer's: 0). */
static void on_digest(struct fab_rpc_req *req, void *arg)
{
    struct replica *r = arg;
    if (fab_rpc_len(req) != 2) {
        fab_rpc_reply(req, RDKV_EPROTO, NULL, 0);
        return;
    }
    unsigned p = pack_get_u16le(fab_rpc_data(req));
    uint64_t rows = 0, sum = 0, nrec = 0, rsum = 0;
    int rc = replica_digest(r, p, &rows, &sum);
    pthread_mutex_lock(&r->mu);
    for (struct rrec *x = p < RCFG_MAX_NODES ? r->recs[p] : NULL; x; x = x->next) {
        nrec++;
        rsum += XXH3_64bits_withSeed(x->bytes, x->len, x->txid ^ (uint64_t)x->kind << 56);
    }
    pthread_mutex_unlock(&r->mu);
    uint8_t out[32];
    pack_put_u64le(out, rows);
    pack_put_u64le(out + 8, sum);
    pack_put_u64le(out + 16, nrec);
    pack_put_u64le(out + 24, rsum);
    fab_rpc_reply(req, rc, rc ? NULL : out, rc ? 0 : sizeof out);
}

/* Opens a copy (a hidden store "store.b<p>") of every partition configuration cfg gives this
 * node and it does not hold yet. Runs at attach and on zcfg's thread (before cfg is taken, so
 * that its first commits find the copies open), under rmu. */
static int open_copies(struct replica *r, const struct rcfg *cfg, char *err, size_t errcap)
{
    int rc = 0;
    /* (nothing new to open, as for most configurations: rmu is not waited for -- a takeover
     * may hold it while it waits for other nodes, which may wait for this node's epoch) */
    bool need = false;
    pthread_mutex_lock(&r->mu);
    for (unsigned p = 0; p < cfg->partitions && !need; p++)
        need = p != r->me && rcfg_holds(cfg, p, r->me) && !r->backup[p];
    pthread_mutex_unlock(&r->mu);
    if (!need) return 0;
    pthread_mutex_lock(&r->rmu);
    pthread_mutex_lock(&r->mu);
    struct rcfg c = *cfg;
    struct fabric *f = r->f;
    bool stop = r->stopping;
    pthread_mutex_unlock(&r->mu);
    for (unsigned p = 0; f && !stop && !rc && p < c.partitions; p++) {
        if (p == r->me || !rcfg_holds(&c, p, r->me)) continue;
        pthread_mutex_lock(&r->mu);
        bool have = r->backup[p] != NULL;
        pthread_mutex_unlock(&r->mu);
        if (have) continue;
        struct store_opts o = r->so;
        char name[STORE_NAME_MAX + 1];
        store_name(p, r->me, name); /* (p is not this node's own: a copy) */
        o.name = name;
        o.hidden = true; /* (peers open it only once it is promoted: apply_routes) */
        char why[256];
        struct store *st = NULL;
        rc = store_open(f, &o, &st, why, sizeof why);
        if (rc) {
            log_reason(err, errcap, rc, "the copy of partition %u: %s (a node with replicas R "
                       "needs R stores' room: --arena)", p, why);
            break;
        }
        pthread_mutex_lock(&r->mu);
        if ((stop = r->stopping)) store_close(st);
        else r->backup[p] = st;
        pthread_mutex_unlock(&r->mu);
    }
    pthread_mutex_unlock(&r->rmu);
    return rc;
}

/* ---- filling a new copy: the primary's side (section 8) ----------------------------------- */

struct fillctx {
    struct replica *r;
    struct fab_ctx *fc;
    unsigned p;
    uint64_t epoch, stream;
    bool first;
    uint16_t to[RCFG_MAX_REPLICAS];
    unsigned nto;
    uint8_t *msg;
    size_t cap;
};

/* One batch of the stream to every copy being filled: each must take it (a copy whose
 * configuration is not there yet is asked again, within two leases). */
static int fill_sink(void *arg, const uint8_t *rows, size_t len, uint32_t nrows)
{
    struct fillctx *x = arg;
    struct replica *r = x->r;
    pthread_mutex_lock(&r->mu);
    int rc = r->stopping ? RDKV_ESHUTDOWN : 0;
    if (!rc && (rcfg_primary(&r->cur, x->p) != r->me || !(r->cur.members >> r->me & 1)))
        rc = RDKV_EABORTED; /* (no longer its primary) */
    for (unsigned i = 0; i < x->nto && !rc; i++)
        if (!rcfg_learning(&r->cur, x->p, x->to[i])) rc = RDKV_EABORTED; /* (gone, or filled) */
    pthread_mutex_unlock(&r->mu);
    if (rc) return rc;
    if (x->cap < REPL_COPY_HDR + len) {
        uint8_t *m = realloc(x->msg, REPL_COPY_HDR + len);
        if (!m) return RDKV_ENOMEM;
        x->msg = m;
        x->cap = REPL_COPY_HDR + len;
    }
    pack_put_u64le(x->msg, x->epoch);
    pack_put_u16le(x->msg + 8, (uint16_t)x->p);
    pack_put_u64le(x->msg + 10, x->stream);
    x->msg[18] = x->first;
    pack_put_u32le(x->msg + 19, nrows);
    if (len) memcpy(x->msg + REPL_COPY_HDR, rows, len);
    struct fab_buf resp = {0};
    for (unsigned i = 0; i < x->nto && !rc; i++) {
        int64_t until = clock_now_ns() + 2 * r->lease_ns;
        while ((rc = fab_rpc_call(x->fc, x->to[i], KV_RPC_REPL_COPY, x->msg, REPL_COPY_HDR + len,
                                  &resp, REPL_TIMEOUT_NS)) == RDKV_EBUSY &&
               clock_now_ns() < until)
            clock_sleep_ns(REPL_RETRY_NS);
    }
    fab_buf_free(&resp);
    if (rc) return rc;
    x->first = false;
    pthread_mutex_lock(&r->mu);
    r->fill[x->p].rows += nrows;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

static int ship_kind(struct replica *r, uint8_t kind, uint64_t txid, const void *writes,
                     size_t len);

/* The commit decisions of partition p taken over by a promotion here, to every copy of p (the
 * ones being filled among them; the others hold them already, and a DECIDE asked again
 * replaces itself): 0, or the first ship's failure. */
static int send_kept(struct replica *r, unsigned p)
{
    pthread_mutex_lock(&r->mu);
    unsigned n = r->nkept[p];
    uint64_t *k = n ? malloc(n * sizeof *k) : NULL;
    if (k) memcpy(k, r->kept[p], n * sizeof *k);
    pthread_mutex_unlock(&r->mu);
    if (n && !k) return RDKV_ENOMEM;
    int rc = 0;
    for (unsigned i = 0; i < n && !rc; i++) rc = ship_kind(r, REPLICA_DECIDE, k[i], NULL, 0);
    free(k);
    if (!rc && n)
        log_info("node %u: partition %u's %u decisions taken over sent to its new copies", r->me,
                 p, n);
    return rc;
}

/* Fills partition p's copies being filled in configuration c: every row of this node's copy,
 * each read under its row lock, in one stream (then an empty batch that closes it, so each copy
 * says it took the stream whole); then the manager is told. Commits meanwhile ship to those
 * copies as to every backup (ship_task reads the configuration), so a copy holds every row
 * once the stream ends: rows not written since come from the stream, rows written since from
 * their commits (on_copy never lets a row of the stream overwrite one). */
static int fill_partition(struct replica *r, struct fab_ctx *fc, struct lock_thread *lt,
                          unsigned p, const struct rcfg *c)
{
    struct fillctx x = {.r = r, .fc = fc, .p = p, .epoch = c->epoch, .first = true};
    for (unsigned i = rcfg_full(c, p); i < c->nrep[p]; i++) x.to[x.nto++] = c->rep[p][i];
    x.stream = clock_wall_us() ^ ((uint64_t)r->me << 48) ^ ((uint64_t)p << 32);
    pthread_mutex_lock(&r->mu);
    struct store *st = copy_locked(r, p);
    struct store_stats ss = {0};
    if (st) store_stats(st, &ss);
    r->fill[p] = (struct fill){.epoch = c->epoch, .of = ss.rows};
    pthread_mutex_unlock(&r->mu);
    if (!st) return RDKV_ENOTFOUND;
    log_warn("node %u: filling partition %u's new copies at %u node(s), first node %u: %llu rows "
             "(epoch %llu)", r->me, p, x.nto, x.to[0], (unsigned long long)ss.rows,
             (unsigned long long)c->epoch);
    int64_t t0 = clock_now_ns();
    struct ckpt_write_opts o;
    ckpt_write_opts_init(&o);
    o.row_lock = r->row;
    o.lt = lt;
    o.row_give_up_ns = 5 * NS_PER_S; /* (a copy that cannot read a row tries again later) */
    struct ckpt_info info = {0};
    /* The stream begins with an empty batch, answered before any row is read: the copy forgets
     * the deletes it remembered only then, so no delete committed after a row's read can be
     * forgotten before that row arrives (docs/refill-model.md, LATE_RESET) */
    int rc = fill_sink(&x, NULL, 0, 0);
    if (!rc) rc = ckpt_stream(st, &o, REPL_COPY_BATCH, fill_sink, &x, &info);
    if (!rc) rc = fill_sink(&x, NULL, 0, 0); /* (the end: every copy took the stream whole) */
    free(x.msg);
    if (!rc) rc = send_kept(r, p);
    if (!rc) {
        struct filled f = {.p = p, .src = r->me, .n = (uint16_t)x.nto};
        memcpy(f.nodes, x.to, sizeof x.to);
        uint8_t b[REPL_FILLED_HDR + 2 * RCFG_MAX_REPLICAS];
        pack_put_u64le(b, c->epoch);
        pack_put_u16le(b + 8, (uint16_t)p);
        b[10] = (uint8_t)x.nto;
        for (unsigned i = 0; i < x.nto; i++) pack_put_u16le(b + REPL_FILLED_HDR + 2 * i, x.to[i]);
        rc = ask_manager(r, fc, KV_RPC_REPL_FILLED, b, REPL_FILLED_HDR + 2 * x.nto,
                         10 * NS_PER_S, do_filled, &f, NULL);
    }
    pthread_mutex_lock(&r->mu);
    if (!rc) r->fill[p].done_epoch = c->epoch;
    r->fill[p].epoch = 0;
    /* the manager's configuration with them filled comes by ZooKeeper's watch: waited for
     * (bounded), so that a configuration between the two does not start the copy again */
    int64_t until = clock_now_ns() + 2 * NS_PER_S;
    for (unsigned i = 0; !rc && !r->stopping && i < x.nto && clock_now_ns() < until;) {
        if (!rcfg_learning(&r->cur, p, x.to[i]) || rcfg_primary(&r->cur, p) != r->me) {
            i++;
            continue;
        }
        struct timespec ts = clock_ts(clock_now_ns() + 50 * NS_PER_MS);
        pthread_cond_timedwait(&r->ccv, &r->mu, &ts);
    }
    pthread_mutex_unlock(&r->mu);
    if (rc)
        log_warn("node %u: filling partition %u's new copies stopped after %llu rows: %s (tried "
                 "again)", r->me, p, (unsigned long long)info.rows, rdkv_strerror(rc));
    else
        log_warn("node %u: partition %u's new copies filled: %llu rows, %.1f MB in %.2f s "
                 "(longest row-lock hold %lld us)", r->me, p, (unsigned long long)info.rows,
                 (double)info.bytes / 1e6, (double)(clock_now_ns() - t0) / 1e9,
                 (long long)(info.max_hold_ns / 1000));
    return rc;
}

/* Before a stream: a new generation of commits, and every commit of the old one installed
 * (they may have shipped before this node named the new copy, and an insert among them is not
 * in the index the stream scans until it is), and every PREPARE and DECIDE of the old one
 * settled (the new copy never received them). Before a hand-back the same, once the partition
 * is frozen. 0, or RDKV_ETIMEDOUT after limit_ns (said, for what_for; tried again later),
 * RDKV_ESHUTDOWN. The copier and the checkpointer may drain at once: each waits for all that
 * began before its own flip -- and, when the other flips meanwhile, for some that began after,
 * so either may time out sooner; neither returns early. */
/* Waits (mu held) until generation g has nothing counted: 0, RDKV_ETIMEDOUT at `until`, or
 * RDKV_ESHUTDOWN. */
static int gen_wait_locked(struct replica *r, unsigned g, int64_t until)
{
    while (r->live[g]) {
        if (r->stopping) return RDKV_ESHUTDOWN;
        if (clock_now_ns() > until) return RDKV_ETIMEDOUT;
        struct timespec ts = clock_ts(clock_now_ns() + 10 * NS_PER_MS);
        pthread_cond_timedwait(&r->ccv, &r->mu, &ts);
    }
    return r->stopping ? RDKV_ESHUTDOWN : 0;
}

static int drain_old(struct replica *r, int64_t limit_ns, const char *what_for)
{
    int64_t until = clock_now_ns() + limit_ns;
    pthread_mutex_lock(&r->mu);
    /* What an earlier drain that gave up left in the other generation began before this drain
     * too: it is waited for before the flip, which would otherwise mix it with what begins
     * after (and the drain would not wait for it). */
    unsigned old = r->gen ^ 1;
    int rc = gen_wait_locked(r, old, until);
    if (!rc) {
        old = r->gen;
        r->gen ^= 1;
        rc = gen_wait_locked(r, old, until);
    }
    if (rc == RDKV_ETIMEDOUT) {
        /* say what it waits for: a commit or a two-phase commit still open after limit_ns */
        char what[160] = "";
        size_t o = 0;
        unsigned shown = 0;
        for (unsigned b = 0; b < 64 && shown < 4; b++)
            for (struct gent *x = r->gmap[b]; x && shown < 4; x = x->next)
                if (x->gen == old && o < sizeof what) {
                    o += (size_t)snprintf(what + o, sizeof what - o, " %s of txn %llx",
                                          x->kind == REPLICA_APPLY     ? "commit"
                                          : x->kind == REPLICA_PREPARE ? "PREPARE"
                                                                       : "DECIDE",
                                          (unsigned long long)x->txid);
                    shown++;
                }
        log_warn("node %u: %s waits for %u commits or two-phase records begun before it:%s",
                 r->me, what_for, r->live[old], what);
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

/* A thread's fabric context (the copier's, the asker's), made at its first use: 0, or what
 * creating it said. */
static int ctx_once(struct replica *r, struct fab_ctx **fc)
{
    if (*fc) return 0;
    int rc = fab_ctx_create(r->f, fc);
    if (!rc) fab_ctx_set_spin(*fc, 0);
    else *fc = NULL;
    return rc;
}

/* Whether partition p of configuration c (the latest, its routes taken here) is to be handed
 * back to its home node (section 8, "Handing a partition back"): this node serves it in the
 * home's stead since a failover, and the home is a member again whose copy is full. Fills come
 * first: a partition with a copy being filled waits. mu held. */
static bool handback_due(const struct replica *r, const struct rcfg *c, unsigned p)
{
    return p != r->me && p < c->nodes && rcfg_primary(c, p) == r->me && (c->members >> r->me & 1) &&
           !c->nlearn[p] && !r->taking[p] && rcfg_holds(c, p, (uint16_t)p) &&
           !rcfg_learning(c, p, (uint16_t)p) && clock_now_ns() >= r->next_handback[p];
}

/* Partition p frozen here once more (a hand-back's, a checkpoint's), or thawed once (mu held):
 * frozen_refuse refuses its new commits, PREPAREs and DECIDEs while any freezer holds it. */
static void freeze_locked(struct replica *r, unsigned p, bool on)
{
    if (on) r->frozen[p]++;
    else r->frozen[p]--;
    __atomic_add_fetch(&r->nfrozen, on ? 1u : (unsigned)-1, __ATOMIC_SEQ_CST);
}

/* How long a hand-back waits for the commits and two-phase records begun before it (its
 * partition refuses new ones meanwhile) before it gives up and is tried again later. */
#define HANDBACK_DRAIN_NS (3 * NS_PER_S)

static int do_handback(struct replica *r, const void *ctx);

/* Hands partition p back to its home node: p's new commits and PREPAREs are refused here
 * (retryable, nothing sent) while the ones begun before drain -- installed, settled -- and then
 * the manager installs rcfg_handback: the home node is p's primary, this node its first backup.
 * The home node takes p over as a promotion does (apply_routes), from a copy that holds every
 * commit and record of p, since nothing of p is open here. 0, or why not (p is served here as
 * before, and this is tried again later). */
static int hand_back(struct replica *r, struct fab_ctx *fc, unsigned p)
{
    int64_t t0 = clock_now_ns();
    /* what an earlier drain left behind first, before anything is refused (drain_old would
     * wait for it while the partition is frozen) */
    pthread_mutex_lock(&r->mu);
    bool clear = !gen_wait_locked(r, r->gen ^ 1, t0 + HANDBACK_DRAIN_NS);
    if (clear) {
        freeze_locked(r, p, true);
    }
    pthread_mutex_unlock(&r->mu);
    if (!clear) return RDKV_ETIMEDOUT; /* (a record of an earlier generation still open) */
    int64_t frozen = clock_now_ns();
    char what[64];
    snprintf(what, sizeof what, "handing partition %u back to node %u", p, p);
    int rc = drain_old(r, HANDBACK_DRAIN_NS, what);
    int64_t drained = clock_now_ns();
    bool drained_ok = !rc;
    int mgr = -1;
    if (!rc) {
        struct handback h = {p, r->me};
        uint8_t b[2];
        pack_put_u16le(b, (uint16_t)p);
        rc = ask_manager(r, fc, KV_RPC_REPL_HANDBACK, b, sizeof b, 10 * NS_PER_S, do_handback,
                         &h, &mgr);
    }
    /* p stays refused here until this node holds a configuration that names another primary
     * of p and has taken its routes -- its commits of p are refused by them from then on --
     * or the change is known not to have happened: never asked (the drain gave up, no
     * manager known), refused, or -- read in ZooKeeper every two leases while it waits --
     * the stored configuration names this node p's primary. A change installed (or perhaps
     * installed) keeps the partition frozen however late this node's watch is: unfrozen
     * while still named here, its commits would only be refused by the backups' epoch check
     * and answered "unknown". */
    bool asked = mgr >= 0; /* (the drain ended, and a manager was named) */
    bool maybe = asked && rc != RDKV_EPERM && rc != RDKV_EINVAL && rc != RDKV_EPROTO;
    pthread_mutex_lock(&r->mu);
    int64_t look = clock_now_ns() + 2 * r->lease_ns;
    while (maybe && !r->stopping &&
           (rcfg_primary(&r->cur, p) == r->me ||
            __atomic_load_n(&r->routed_epoch, __ATOMIC_ACQUIRE) < r->cur.epoch)) {
        if (clock_now_ns() >= look && rcfg_primary(&r->cur, p) == r->me) {
            pthread_mutex_unlock(&r->mu);
            struct rcfg stored;
            int version;
            char err[160];
            bool mine = !zcfg_read(r->z, &stored, &version, err, sizeof err) &&
                        p < stored.partitions && rcfg_primary(&stored, p) == r->me;
            pthread_mutex_lock(&r->mu);
            if (mine) break; /* (not handed back, or handed back here again since) */
            look = clock_now_ns() + 2 * r->lease_ns;
        }
        struct timespec ts = clock_ts(clock_now_ns() + 10 * NS_PER_MS);
        pthread_cond_timedwait(&r->ccv, &r->mu, &ts);
    }
    bool moved = rcfg_primary(&r->cur, p) != r->me;
    freeze_locked(r, p, false);
    pthread_mutex_unlock(&r->mu);
    if (moved)
        log_warn("node %u: handed partition %u back to node %u (drained in %.1f ms, frozen "
                 "%.1f ms in all)", r->me, p, p, (double)(drained - frozen) / 1e6,
                 (double)(clock_now_ns() - frozen) / 1e6);
    else
        log_warn("node %u: partition %u not handed back to node %u: %s (tried again later)",
                 r->me, p, p,
                 drained_ok && !asked ? "no configuration manager known"
                 : rc                 ? rdkv_strerror(rc)
                                      : "the configuration did not change");
    return moved ? 0 : rc ? rc : RDKV_EABORTED;
}

/* The copier: fills, one partition at a time, the copies being filled of the partitions whose
 * primary this node is, once their routes are taken here. */
static void *copier_main(void *arg)
{
    struct replica *r = arg;
    struct fab_ctx *fc = NULL;
    struct lock_thread lt;
    bool lt_on = false;
    pthread_mutex_lock(&r->mu);
    while (!r->stopping) {
        struct rcfg c = r->cur;
        int pick = -1;
        bool routed = __atomic_load_n(&r->routed_epoch, __ATOMIC_ACQUIRE) >= c.epoch;
        for (unsigned p = 0; r->row && routed && (c.members >> r->me & 1) && pick < 0 &&
                             p < c.partitions; p++)
            if (c.nlearn[p] && rcfg_primary(&c, p) == r->me && !r->taking[p] &&
                r->fill[p].done_epoch != c.epoch)
                pick = (int)p;
        /* no copy to fill: a partition to hand back to its home node, filled again */
        int back = -1;
        for (unsigned p = 0; routed && pick < 0 && back < 0 && p < c.partitions; p++)
            if (handback_due(r, &c, p)) back = (int)p;
        if (back >= 0) {
            pthread_mutex_unlock(&r->mu);
            int rc = ctx_once(r, &fc);
            if (!rc) rc = hand_back(r, fc, (unsigned)back);
            pthread_mutex_lock(&r->mu);
            /* (tried again later if it did not happen: the home node may be slow to answer) */
            r->next_handback[back] = clock_now_ns() + (rc ? 10 * NS_PER_S : 0);
            continue;
        }
        if (pick < 0) {
            struct timespec ts = clock_ts(clock_now_ns() + 100 * NS_PER_MS);
            pthread_cond_timedwait(&r->ccv, &r->mu, &ts);
            continue;
        }
        pthread_mutex_unlock(&r->mu);
        int rc = ctx_once(r, &fc);
        if (!rc && !lt_on) lt_on = !(rc = lock_thread_init(&lt, fc, r->lcfg));
        if (!rc) rc = drain_old(r, 30 * NS_PER_S, "a new copy's fill");
        if (!rc) rc = fill_partition(r, fc, &lt, (unsigned)pick, &c);
        pthread_mutex_lock(&r->mu);
        if (rc && !r->stopping) {
            struct timespec ts = clock_ts(clock_now_ns() + 500 * NS_PER_MS);
            pthread_cond_timedwait(&r->ccv, &r->mu, &ts);
        }
    }
    pthread_mutex_unlock(&r->mu);
    if (lt_on) lock_thread_fini(&lt);
    if (fc) fab_ctx_destroy(fc);
    return NULL;
}

/* wal_open's callback on a node that comes back: each record applied to its copy as it was
 * when logged (section 7, "Backups' logs"). */
static int replay_rec(void *arg, const struct wal_rec *rec)
{
    struct replica *r = arg;
    uint8_t kind;
    unsigned p;
    int rc = 0;
    pthread_mutex_lock(&r->mu);
    if (rec->type == WAL_MARK) {
        if (!mark_get(rec->payload, rec->len, &kind, &p)) rc = RDKV_EPROTO;
        else if (rec->lsn < r->from[p]) {
            /* (before its checkpoint: in it) */
        } else {
            r->hist[p] = hist_after(r->hist[p], kind);
            if (kind == WAL_MARK_FULL || kind == WAL_MARK_GONE) delset_free_locked(r, p);
            if (kind == WAL_MARK_GONE) {
                recs_free_locked(r, p);
                tail_trim_locked(r, p, UINT64_MAX);
            }
        }
    } else if (rec->type == WAL_REPL || rec->type == WAL_FILL) {
        size_t hdr = rec->type == WAL_REPL ? REPL_HDR : REPL_COPY_HDR;
        p = rec->len >= hdr ? pack_get_u16le(rec->payload + 8) : RCFG_MAX_NODES;
        struct store *cp = p < RCFG_MAX_NODES ? copy_locked(r, p) : NULL;
        uint8_t h = p < RCFG_MAX_NODES ? r->hist[p] : HIST_BAD;
        char why[160] = "";
        if (rec->len < hdr || p >= RCFG_MAX_NODES) rc = RDKV_EPROTO;
        else if (!cp || (h != HIST_LEARNING && h != HIST_FULL) || rec->lsn < r->from[p])
            rc = 0; /* (a copy not held now, or given up: its records mean nothing here; or in
                       its checkpoint) */
        else if (rec->type == WAL_REPL)
            rc = repl_apply_locked(r, p, cp, h == HIST_LEARNING, rec->payload, rec->len);
        else if (h == HIST_LEARNING)
            rc = copy_apply_locked(r, p, cp, rec->payload, rec->len, why, sizeof why);
        if (rc)
            log_error("node %u: the copies' log's record of LSN %llu (partition %u) does not "
                      "apply: %s", r->me, (unsigned long long)rec->lsn, p,
                      why[0] ? why : rdkv_strerror(rc));
    } else {
        rc = RDKV_EPROTO; /* (the transaction layer's records never come here) */
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

/* Removes the copies' log of an earlier process (its segments) before a new one begins. */
static int files_remove(const char *dir, const char *const *prefixes, bool dirs, char *err,
                        size_t errcap);

static int log_remove(const char *dir, char *err, size_t errcap)
{
    /* the copies' checkpoints first: a crash in between must not leave checkpoints without the
     * log they belonged to seeming a copy's history (can_come_back also refuses a checkpoint
     * its log does not reach) */
    static const char *const copies[] = {"copy-", NULL}, *const logs[] = {"wal-", "ckpt-", NULL};
    int rc = files_remove(dir, copies, true, err, errcap);
    int fd = rc ? -1 : open(dir, O_RDONLY | O_DIRECTORY);
    if (!rc && fd < 0 && errno != ENOENT)
        rc = log_reason(err, errcap, RDKV_EIO, "%s: %s", dir, strerror(errno));
    if (fd >= 0) {
        if (fsync(fd)) rc = log_reason(err, errcap, RDKV_EIO, "%s: %s", dir, strerror(errno));
        close(fd);
    }
    return rc ? rc : files_remove(dir, logs, false, err, errcap);
}

/* Removes dir's entries named with one of prefixes -- with dirs, directories of files (each
 * one's files, then itself) -- : 0, or RDKV_EIO. A missing dir has none. */
static int files_remove(const char *dir, const char *const *prefixes, bool dirs, char *err,
                        size_t errcap)
{
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? 0 : log_reason(err, errcap, RDKV_EIO, "%s: %s", dir,
                                                     strerror(errno));
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        bool named = false;
        for (unsigned i = 0; prefixes[i] && !named; i++)
            named = !strncmp(e->d_name, prefixes[i], strlen(prefixes[i]));
        if (!named) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (dirs) {
            static const char *const any[] = {"", NULL};
            rc = files_remove(path, any, false, err, errcap);
            if (!rc && rmdir(path) && errno != ENOENT)
                rc = log_reason(err, errcap, RDKV_EIO, "cannot remove %s: %s", path,
                                strerror(errno));
        } else if (unlink(path) && errno != ENOENT) {
            rc = log_reason(err, errcap, RDKV_EIO, "cannot remove %s: %s", path, strerror(errno));
        }
    }
    closedir(d);
    return rc;
}

/* ---- checkpoints of the copies (docs/replication.md, section 7, "Checkpoints") ------------ */

#define CKPT_STATE_VERSION 1u

/* Copy p's checkpoint directory, DIR/repl/copy-<p>. */
static void ckpt_dir(const struct replica *r, unsigned p, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/copy-%u", r->logdir, p);
}

/* What a checkpoint of copy p carries besides its rows, as it is at its replay LSN (mu held):
 * u8 version, u64 stable mark, then u32 count and the kept PREPAREs and DECIDEs (u64 txid, u8
 * kind, u16 coordinator, u32 bytes, the writes), then u32 count and the tail (u64 seq, u64
 * txid, u32 bytes, the writes), then u32 count and the decisions kept for good (u64 txid). */
static uint8_t *state_pack_locked(const struct replica *r, unsigned p, size_t *len)
{
    size_t n = 1 + 8 + 4 + 4 + 4 + (size_t)r->nkept[p] * 8;
    for (const struct rrec *x = r->recs[p]; x; x = x->next) n += 15 + x->len;
    for (const struct rtail *x = r->tail[p]; x; x = x->next) n += 20 + x->len;
    uint8_t *b = malloc(n), *o = b;
    if (!b) return NULL;
    *o++ = CKPT_STATE_VERSION;
    /* (the primary's: every APPLY up to it is on every copy; a backup's: the mark heard last --
     * the higher of the two, for a primary named whose takeover has not run yet) */
    uint64_t stable = r->tstable[p];
    if (rcfg_primary(&r->cur, p) == r->me && stable_locked(r, p) > stable)
        stable = stable_locked(r, p);
    pack_put_u64le(o, stable);
    o += 8;
    uint32_t k = 0;
    for (const struct rrec *x = r->recs[p]; x; x = x->next) k++;
    pack_put_u32le(o, k);
    o += 4;
    for (const struct rrec *x = r->recs[p]; x; x = x->next) {
        pack_put_u64le(o, x->txid);
        o[8] = x->kind;
        pack_put_u16le(o + 9, x->coord);
        pack_put_u32le(o + 11, x->len);
        memcpy(o + 15, x->bytes, x->len);
        o += 15 + x->len;
    }
    k = 0;
    for (const struct rtail *x = r->tail[p]; x; x = x->next) k++;
    pack_put_u32le(o, k);
    o += 4;
    for (const struct rtail *x = r->tail[p]; x; x = x->next) {
        pack_put_u64le(o, x->seq);
        pack_put_u64le(o + 8, x->txid);
        pack_put_u32le(o + 16, x->len);
        memcpy(o + 20, x->bytes, x->len);
        o += 20 + x->len;
    }
    pack_put_u32le(o, r->nkept[p]);
    o += 4;
    for (unsigned i = 0; i < r->nkept[p]; i++, o += 8) pack_put_u64le(o, r->kept[p][i]);
    *len = (size_t)(o - b);
    return b;
}

/* Restores what state_pack_locked packed (mu held, the copy's records and tail empty): 0, or
 * RDKV_EPROTO for bytes that are not such a state, RDKV_ENOMEM. The decisions kept for good
 * come back as kept DECIDEs, which the takeover keeps again. */
static int state_load_locked(struct replica *r, unsigned p, const uint8_t *b, size_t len)
{
    if (len < 13 || b[0] != CKPT_STATE_VERSION) return RDKV_EPROTO;
    r->tstable[p] = pack_get_u64le(b + 1);
    size_t off = 9;
    uint32_t k = pack_get_u32le(b + off);
    off += 4;
    for (uint32_t i = 0; i < k; i++) {
        if (len - off < 15 || len - off - 15 < pack_get_u32le(b + off + 11)) return RDKV_EPROTO;
        uint32_t il = pack_get_u32le(b + off + 11);
        uint8_t kind = b[off + 8];
        if (kind != REPLICA_PREPARE && kind != REPLICA_DECIDE) return RDKV_EPROTO;
        struct rrec *x = malloc(sizeof *x + il);
        if (!x) return RDKV_ENOMEM;
        x->txid = pack_get_u64le(b + off);
        x->kind = kind;
        x->coord = pack_get_u16le(b + off + 9);
        x->len = il;
        memcpy(x->bytes, b + off + 15, il);
        x->next = r->recs[p];
        r->recs[p] = x;
        r->nrecs++;
        r->rec_bytes += sizeof *x + il;
        off += 15 + il;
    }
    if (len - off < 4) return RDKV_EPROTO;
    k = pack_get_u32le(b + off);
    off += 4;
    for (uint32_t i = 0; i < k; i++) {
        if (len - off < 20 || len - off - 20 < pack_get_u32le(b + off + 16)) return RDKV_EPROTO;
        uint32_t il = pack_get_u32le(b + off + 16);
        int rc = tail_add_locked(r, p, pack_get_u64le(b + off), pack_get_u64le(b + off + 8),
                                 b + off + 20, il);
        if (rc) return rc;
        off += 20 + il;
    }
    if (len - off < 4) return RDKV_EPROTO;
    k = pack_get_u32le(b + off);
    off += 4;
    if ((len - off) / 8 != k || (len - off) % 8) return RDKV_EPROTO;
    if (!k) return 0;
    /* (kept as they were, not as records: a copy's records are its primary's open ones, which
     * a FORGET settles -- these never get one) */
    uint64_t *kept = realloc(r->kept[p], (r->nkept[p] + k) * sizeof *kept);
    if (!kept) return RDKV_ENOMEM;
    for (uint32_t i = 0; i < k; i++, off += 8) kept[r->nkept[p] + i] = pack_get_u64le(b + off);
    r->kept[p] = kept;
    r->nkept[p] += k;
    return 0;
}

/* How long a checkpoint of a primary's copy waits for the commits and two-phase records begun
 * before it: first with the partition open (a record that stays longer -- a transaction in
 * doubt -- makes it give up without refusing anything), then frozen, briefly. */
#define CKPT_DRAIN_NS (2 * NS_PER_S)
#define CKPT_FROZEN_DRAIN_NS (200 * NS_PER_MS)
#define CKPT_RETRY_NS (5 * NS_PER_S) /* after a checkpoint that could not take every copy */

/* Whether copy p here is full -- begun and filled, with its whole history in the log -- so that
 * a checkpoint of it stands for that history (mu held). */
static bool ckpt_full_locked(const struct replica *r, unsigned p)
{
    return !r->stopping && copy_locked(r, p) && p < r->cur.partitions &&
           rcfg_holds(&r->cur, p, r->me) && !rcfg_learning(&r->cur, p, r->me) &&
           r->hist[p] == HIST_FULL && !r->taking[p];
}

/* Copy p's replay LSN and state: 0 and *lsn, *state (mu held on return), or a status (mu held,
 * nothing set; RDKV_ENOTFOUND: no full copy of p here; RDKV_EBUSY: not now). Every record of p below the log's next LSN has been
 * applied to the copy in memory then: a backup appends its REPLs under mu after applying them;
 * a primary appends before it ships and installs after, so its copy is drained first -- frozen
 * (its new commits and PREPAREs refused, retryably) until every commit and record begun before
 * has been installed or settled, the asynchronous APPLYs and the PREPAREs a promotion adopted
 * included (each counts in the drain's generation until then). Records from *lsn on may show
 * in the rows read afterwards: they are whole values and deletes by key, which the replay
 * applies again in order, harmlessly. */
static int ckpt_begin_locked(struct replica *r, unsigned p, uint64_t *lsn, uint8_t **state,
                             size_t *slen)
{
    if (!ckpt_full_locked(r, p)) return RDKV_ENOTFOUND; /* (no full copy to take: none due) */
    bool primary = primary_locked(r, p), frozen = false;
    char what[64];
    snprintf(what, sizeof what, "a checkpoint of partition %u's copy", p);
    if (primary) {
        pthread_mutex_unlock(&r->mu);
        int rc = drain_old(r, CKPT_DRAIN_NS, what); /* (open: nothing refused yet) */
        pthread_mutex_lock(&r->mu);
        if (rc || !ckpt_full_locked(r, p) || !primary_locked(r, p)) return RDKV_EBUSY;
        freeze_locked(r, p, true);
        frozen = true;
        pthread_mutex_unlock(&r->mu);
        rc = drain_old(r, CKPT_FROZEN_DRAIN_NS, what);
        pthread_mutex_lock(&r->mu);
        if (rc || !ckpt_full_locked(r, p) || !primary_locked(r, p)) {
            freeze_locked(r, p, false);
            return RDKV_EBUSY;
        }
    }
    *lsn = wal_next_lsn(r->log);
    *state = state_pack_locked(r, p, slen);
    int rc = *state ? 0 : RDKV_ENOMEM;
    if (frozen) {
        freeze_locked(r, p, false);
    }
    return rc;
}

/* ckpt_write's guard around each row's read: mu, under which a backup's REPLs and a
 * takeover's pulled commits are applied without row locks -- so no apply changes or recycles
 * the row being read (a primary's own installs are kept off by the row's shared lock). */
static void ckpt_guard(void *arg, bool enter)
{
    struct replica *r = arg;
    if (enter) pthread_mutex_lock(&r->mu);
    else pthread_mutex_unlock(&r->mu);
}

/* A checkpoint of every full copy held here (ckpt_begin_locked), then the log cut behind the
 * older of each held copy's two kept checkpoints -- none while a copy held has fewer, or is
 * being filled (it keeps its history from its BEGIN). A copy not checkpointed this time keeps
 * its older checkpoints, and they bound the cut. 0, or the first failure (the log kept). */
static int ckpt_copies(struct replica *r, struct lock_thread *lt)
{
    int64_t t0 = clock_now_ns();
    unsigned written = 0, skipped = 0;
    uint64_t rows = 0;
    int rc = 0;
    for (unsigned p = 0; p < RCFG_MAX_NODES && !rc; p++) {
        uint64_t lsn = 0;
        uint8_t *state = NULL;
        size_t slen = 0;
        pthread_mutex_lock(&r->mu);
        int brc = ckpt_begin_locked(r, p, &lsn, &state, &slen);
        struct store *st = copy_locked(r, p);
        pthread_mutex_unlock(&r->mu);
        if (brc) {
            /* (a copy being filled, or none: nothing due -- it blocks the cut below) */
            skipped += brc == RDKV_EBUSY;
            if (brc != RDKV_EBUSY && brc != RDKV_ENOTFOUND) rc = brc;
            continue;
        }
        char dir[600], why[256] = "";
        ckpt_dir(r, p, dir, sizeof dir);
        if (mkdir(dir, 0700)) {
            if (errno != EEXIST)
                rc = log_reason(why, sizeof why, RDKV_EIO, "%s: %s", dir, strerror(errno));
        } else {
            /* (the new directory's name durable before a checkpoint in it can count) */
            int dfd = open(r->logdir, O_RDONLY | O_DIRECTORY);
            if (dfd < 0 || fsync(dfd))
                rc = log_reason(why, sizeof why, RDKV_EIO, "%s: %s", r->logdir, strerror(errno));
            if (dfd >= 0) close(dfd);
        }
        /* (every record below it on disk first: a crash must not leave a log that ends before
         * the LSN the checkpoint says it holds) */
        if (!rc && lsn > 1 && wal_wait(r->log, lsn - 1)) rc = RDKV_EIO;
        struct ckpt_write_opts co;
        ckpt_write_opts_init(&co);
        co.row_lock = r->row;
        co.lt = lt;
        co.row_give_up_ns = 5 * NS_PER_S; /* (a row held longer ends this try: tried later) */
        co.guard = ckpt_guard;
        co.guard_arg = r;
        co.state = state;
        co.state_len = slen;
        struct ckpt_info info;
        if (!rc)
            rc = ckpt_write(st, dir, r->me, r->logo.cluster_fp, lsn, &co, &info, why, sizeof why);
        free(state);
        if (rc) {
            log_warn("node %u: a checkpoint of partition %u's copy failed (the log is kept "
                     "whole): %s", r->me, p, why[0] ? why : rdkv_strerror(rc));
            break;
        }
        written++;
        rows += info.rows;
    }
    if (rc) return rc;
    /* the cut: behind every held copy's older checkpoint, read back from its directory */
    uint64_t cut_at = UINT64_MAX;
    pthread_mutex_lock(&r->mu);
    struct rcfg c = r->cur;
    bool full[RCFG_MAX_NODES];
    for (unsigned p = 0; p < c.partitions; p++)
        full[p] = r->hist[p] == HIST_FULL && !rcfg_learning(&c, p, r->me);
    pthread_mutex_unlock(&r->mu);
    for (unsigned p = 0; p < c.partitions && cut_at; p++) {
        if (!rcfg_holds(&c, p, r->me)) continue;
        char dir[600];
        ckpt_dir(r, p, dir, sizeof dir);
        uint64_t kept[CKPT_KEEP];
        int k = full[p] ? ckpt_list(dir, kept, CKPT_KEEP) : 0;
        if (k == CKPT_KEEP && kept[CKPT_KEEP - 1] < cut_at) cut_at = kept[CKPT_KEEP - 1];
        else if (k != CKPT_KEEP) cut_at = 0;
    }
    int cut = cut_at && cut_at != UINT64_MAX ? wal_truncate_before(r->log, cut_at) : 0;
    __atomic_add_fetch(&r->ckpts, 1, __ATOMIC_RELAXED);
    log_info("node %u: checkpoint of %u copies (%llu rows; %u not now) in %.2f s; %d log "
             "segment(s) dropped", r->me, written, (unsigned long long)rows, skipped,
             (double)(clock_now_ns() - t0) / 1e9, cut > 0 ? cut : 0);
    return skipped ? RDKV_EBUSY : 0;
}

/* The copies' checkpointer: a checkpoint once the log grew by ckpt_every bytes. */
static void *ckpter_main(void *arg)
{
    struct replica *r = arg;
    struct fab_ctx *fc = NULL;
    struct lock_thread lt;
    if (!r->row || fab_ctx_create(r->f, &fc) || lock_thread_init(&lt, fc, r->lcfg)) {
        log_error("node %u: the copies' checkpointer cannot start (no fabric context or row "
                  "lock): the copies' log grows", r->me);
        if (fc) fab_ctx_destroy(fc);
        return NULL;
    }
    struct wal_stats ws;
    wal_stats(r->log, &ws);
    uint64_t since = ws.bytes;
    int64_t next_try = 0; /* (after a checkpoint that could not take every copy: a pause) */
    pthread_mutex_lock(&r->mu);
    while (!r->stopping) {
        struct timespec until = clock_ts(clock_now_ns() + NS_PER_S / 4);
        pthread_cond_timedwait(&r->ccv, &r->mu, &until);
        if (r->stopping) break;
        wal_stats(r->log, &ws);
        if (ws.bytes - since < r->ckpt_every || clock_now_ns() < next_try) continue;
        pthread_mutex_unlock(&r->mu);
        if (ckpt_copies(r, &lt) == 0) since = ws.bytes;
        else next_try = clock_now_ns() + CKPT_RETRY_NS;
        pthread_mutex_lock(&r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    lock_thread_fini(&lt);
    fab_ctx_destroy(fc);
    return NULL;
}

/* A node that comes back: each full copy's newest valid checkpoint loaded, and the LSN its
 * replay starts from (r->from). */
static int ckpt_load_copies(struct replica *r, char *err, size_t errcap)
{
    pthread_mutex_lock(&r->mu);
    struct rcfg c = r->cur;
    pthread_mutex_unlock(&r->mu);
    for (unsigned p = 0; p < c.partitions; p++) {
        if (!rcfg_holds(&c, p, r->me) || rcfg_learning(&c, p, r->me)) continue;
        pthread_mutex_lock(&r->mu);
        struct store *st = copy_locked(r, p);
        pthread_mutex_unlock(&r->mu);
        char dir[600], why[512] = "";
        ckpt_dir(r, p, dir, sizeof dir);
        struct ckpt_info info;
        memset(&info, 0, sizeof info);
        int rc = st ? ckpt_load(st, dir, r->me, r->logo.cluster_fp, &info, why, sizeof why)
                    : RDKV_ENOTFOUND;
        if (rc == RDKV_ENOTFOUND) continue; /* (none: its whole history is in the log) */
        if (!rc) {
            pthread_mutex_lock(&r->mu);
            rc = state_load_locked(r, p, info.state, info.state_len);
            r->from[p] = info.replay_lsn;
            r->hist[p] = HIST_FULL;
            pthread_mutex_unlock(&r->mu);
            if (rc) snprintf(why, sizeof why, "its state does not decode");
        }
        free(info.state);
        if (rc)
            return log_reason(err, errcap, rc, "partition %u's copy: checkpoint in %s: %s", p, dir,
                              why[0] ? why : rdkv_strerror(rc));
    }
    return 0;
}

/* Opens the copies' log: replayed into the copies when this node comes back, else begun anew
 * with a mark for each copy the configuration gives it now. */
static int log_open(struct replica *r, char *err, size_t errcap)
{
    char why[512] = "";
    int rc = 0;
    if (!r->comeback) {
        rc = log_remove(r->logdir, err, errcap);
        if (rc) return rc;
    }
    memset(r->hist, 0, sizeof r->hist);
    memset(r->from, 0, sizeof r->from);
    int64_t t0 = clock_now_ns();
    if (r->comeback && (rc = ckpt_load_copies(r, err, errcap))) return rc;
    struct wal_scan_result res;
    struct wal *w = NULL;
    rc = wal_open(&r->logo, r->comeback ? replay_rec : NULL, r, &res, &w, why, sizeof why);
    if (rc)
        return log_reason(err, errcap, rc, "the copies' log in %s: %s", r->logdir,
                          why[0] ? why : rdkv_strerror(rc));
    pthread_mutex_lock(&r->mu);
    r->log = w;
    if (!r->comeback) {
        for (unsigned p = 0; p < r->cur.partitions; p++)
            if (rcfg_holds(&r->cur, p, r->me))
                log_mark_locked(r, rcfg_learning(&r->cur, p, r->me) ? WAL_MARK_BEGIN
                                                                    : WAL_MARK_CREATE,
                                p, r->cur.epoch);
    } else {
        log_marks_locked(r, &r->cur); /* (what changed since the start read the configuration) */
    }
    pthread_mutex_unlock(&r->mu);
    if (r->comeback)
        log_warn("node %u: replayed its copies' log %s: %llu records (LSNs up to %llu) in %.2f "
                 "s%s", r->me, r->logdir, (unsigned long long)res.records,
                 (unsigned long long)res.last_lsn, (double)(clock_now_ns() - t0) / 1e9,
                 res.torn ? " after cutting a torn tail" : "");
    return 0;
}

int replica_attach(struct replica *r, struct fabric *f, struct store *primary,
                   const struct store_opts *so, char *err, size_t errcap)
{
    if (!r) return 0;
    __atomic_store_n(&r->f, f, __ATOMIC_RELEASE);
    r->primary = primary;
    const char *hook = getenv("RDKV_TEST_FAULT");
    char mine[32];
    snprintf(mine, sizeof mine, "repl-partial@%u", r->me);
    r->fault_partial = hook && !strcmp(hook, mine);
    r->fault_lag = hook && !strcmp(hook, "config-lag");
    r->fault_probe = hook && !strcmp(hook, "zombie-probe");
    r->so = *so;
    pthread_mutex_lock(&r->mu);
    struct rcfg c = r->cur;
    pthread_mutex_unlock(&r->mu);
    int rc = open_copies(r, &c, err, errcap);
    if (rc) return rc;
    if (r->logo.dir && c.replicas > 1 && (rc = log_open(r, err, errcap))) return rc;
    /* (with a log, a REPL waits for its record durable: on the RPC threads) */
    rc = fab_rpc_register(f, KV_RPC_REPL, on_repl, r, r->log ? 0 : FAB_RPC_FAST);
    if (!rc) rc = fab_rpc_register(f, KV_RPC_REPL_DIGEST, on_digest, r, 0);
    if (!rc) rc = fab_rpc_register(f, KV_RPC_REPL_TAIL, on_tail, r, 0);
    if (!rc) rc = fab_rpc_register(f, KV_RPC_REPL_EPOCH, on_epoch, r, FAB_RPC_FAST);
    if (!rc) rc = fab_rpc_register(f, KV_RPC_REPL_COPY, on_copy, r, 0);
    if (!rc) rc = fab_rpc_register(f, KV_RPC_REPL_JOIN, on_join, r, FAB_RPC_FENCED);
    if (!rc) rc = fab_rpc_register(f, KV_RPC_REPL_FILLED, on_filled, r, 0);
    if (!rc) rc = fab_rpc_register(f, KV_RPC_REPL_DROP, on_drop, r, 0);
    if (!rc) rc = fab_rpc_register(f, KV_RPC_REPL_HANDBACK, on_handback, r, 0);
    if (rc) return log_reason(err, errcap, rc, "cannot serve the replication RPCs");
    apply_fences(r);
    if (c.replicas > 1) {
        struct lease_hooks h = {hook_is_manager, hook_manager_node, hook_config, hook_remove,
                                hook_live,       hook_resign,       hook_started, r};
        struct lease *l = NULL;
        rc = lease_start(f, r->me, r->lease_ns, &h, &l);
        pthread_mutex_lock(&r->mu);
        r->lease = l;
        bool elected = r->elected;
        pthread_mutex_unlock(&r->mu);
        if (rc) return log_reason(err, errcap, rc, "cannot start the leases");
        if (elected) lease_elected(l);
        /* from here on the node serves only while it holds its lease: the first one is waited
         * for (the manager may still be starting), within a bound */
        __atomic_store_n(&r->leased, true, __ATOMIC_RELEASE);
        int64_t until = clock_now_ns() + 10 * NS_PER_S;
        while (!r->joining && !lease_valid(l) && clock_now_ns() < until)
            clock_sleep_ns(5 * NS_PER_MS);
        if (!r->joining && !lease_valid(l))
            log_warn("node %u: no lease from the configuration manager yet: serving nothing "
                     "until one is granted", r->me);
    }
    if (c.replicas > 1) {
        if (pthread_create(&r->shipper, NULL, shipper_main, r))
            return log_reason(err, errcap, RDKV_ENOMEM, "cannot start the shipper thread");
        pthread_mutex_lock(&r->mu);
        while (!r->shipper_rc) pthread_cond_wait(&r->cv, &r->mu);
        rc = r->shipper_rc;
        pthread_mutex_unlock(&r->mu);
        if (rc < 0) {
            pthread_join(r->shipper, NULL);
            r->shipper_rc = 0;
            return log_reason(err, errcap, rc, "cannot start the shipper: %s", rdkv_strerror(rc));
        }
        if (pthread_create(&r->copier, NULL, copier_main, r))
            return log_reason(err, errcap, RDKV_ENOMEM, "cannot start the copier thread");
        r->copier_on = true;
        if (pthread_create(&r->asker, NULL, asker_main, r))
            return log_reason(err, errcap, RDKV_ENOMEM, "cannot start the asker thread");
        r->asker_on = true;
    }
    return 0;
}

void replica_set_rows(struct replica *r, const struct lock_algo *row, const struct lock_cfg *lcfg)
{
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    r->row = row;
    r->lcfg = lcfg;
    pthread_cond_broadcast(&r->ccv);
    pthread_mutex_unlock(&r->mu);
}

/* The joiner: asks the manager, until it is a member again, to take this node back (section
 * 8). A joining node serves nothing of its own meanwhile: it is no member. */
static void *joiner_main(void *arg)
{
    struct replica *r = arg;
    struct fab_ctx *fc = NULL;
    if (fab_ctx_create(r->f, &fc)) {
        log_error("node %u: no fabric context to join with: it stays no member", r->me);
        return NULL;
    }
    fab_ctx_set_spin(fc, 0);
    int64_t said = clock_now_ns();
    for (;;) {
        pthread_mutex_lock(&r->mu);
        bool stop = r->stopping, in = (r->cur.members >> r->me & 1) != 0;
        uint64_t epoch = r->cur.epoch;
        pthread_mutex_unlock(&r->mu);
        if (stop) break;
        if (in) {
            log_warn("node %u: a member again (epoch %llu): filling its copies", r->me,
                     (unsigned long long)epoch);
            break;
        }
        int m;
        int rc = ask_manager(r, fc, KV_RPC_REPL_JOIN, NULL, 0, REPL_TIMEOUT_NS, join_self, NULL,
                             &m);
        if (rc && clock_now_ns() - said > 5 * NS_PER_S) {
            log_warn("node %u: not taken back yet (manager %d): %s", r->me, m, rdkv_strerror(rc));
            said = clock_now_ns();
        }
        clock_sleep_ns(rc ? 100 * NS_PER_MS : 10 * NS_PER_MS); /* (then the watch brings it) */
    }
    fab_ctx_destroy(fc);
    return NULL;
}

/* A node back from its log, once it serves: its routes, and the takeover of its partitions. */
static void *comeback_main(void *arg)
{
    apply_routes_wait(arg);
    return NULL;
}

void replica_set_checkpoint_every(struct replica *r, uint64_t bytes)
{
    if (r) r->ckpt_every = bytes;
}

void replica_serve(struct replica *r)
{
    if (r && r->log && r->ckpt_every && !r->ckpter_on)
        r->ckpter_on = pthread_create(&r->ckpter, NULL, ckpter_main, r) == 0;
    if (r && r->comeback && !r->joiner_on) {
        r->joiner_on = pthread_create(&r->joiner, NULL, comeback_main, r) == 0;
        if (!r->joiner_on) {
            log_error("node %u: no thread to take its partitions over: they stay unavailable "
                      "until the next configuration", r->me);
        }
        return;
    }
    if (!r || !r->joining || r->joiner_on) return;
    r->joiner_on = pthread_create(&r->joiner, NULL, joiner_main, r) == 0;
    if (!r->joiner_on) log_error("node %u: no thread to join with: it stays no member", r->me);
}

/* ---- a primary's side --------------------------------------------------------------------- */

/* Ships run on the shipper thread, which owns one fabric context and runs a task per batch in
 * flight (a context belongs to the thread that made it): a caller -- an RPC thread, or a task
 * of a worker, which then parks instead of blocking its thread -- queues a job and waits on its
 * waiter; the dispatcher task starts a ship task per job; a ship task posts to every backup,
 * waits, asks again after REPL_RETRY_NS those that did not take it, and wakes the callers. */
struct ship_job {
    unsigned part;      /* the partition the writes are of */
    uint8_t kind;       /* enum replica_kind */
    uint64_t txid;
    const void *writes; /* the caller's, until it is woken or called back */
    size_t len;
    struct waiter w;    /* ship: the caller waits on it */
    void (*done)(void *ctx, int rc); /* ship_async: called instead (the job is malloc'd) */
    void *ctx;
    int rc;
    struct ship_job *next;
    uint64_t seq;                     /* an APPLY's (enqueue), in its partition's open list: */
    struct ship_job *oprev, *onext;
};

/* The stable mark of partition p (mu held): every APPLY up to it is on every backup. */
static uint64_t stable_locked(const struct replica *r, unsigned p)
{
    return r->open[p] ? r->open[p]->seq - 1 : r->pseq[p];
}

/* Takes j out of its partition's open list (mu held). */
static void open_unlink_locked(struct replica *r, struct ship_job *j)
{
    if (!j->seq) return;
    unsigned p = j->part;
    if (j->oprev) j->oprev->onext = j->onext;
    else r->open[p] = j->onext;
    if (j->onext) j->onext->oprev = j->oprev;
    else r->open_last[p] = j->oprev;
    j->seq = 0;
}

/* Tells a job's caller its outcome: a waiting one is woken (the job is its, and not touched
 * after); an asynchronous one is called back and its job freed. */
static void job_end(struct ship_job *j, int rc)
{
    if (j->done) {
        j->done(j->ctx, rc);
        free(j);
        return;
    }
    j->rc = rc;
    waiter_wake(&j->w);
}

/* A batch: jobs[] to the partition's backups in one request. */
struct ship_batch {
    struct replica *r;
    unsigned part;
    bool partial; /* (the test hook fires on it) */
    struct ship_job *jobs; /* linked by next */
    uint8_t *req;
    size_t reqlen;
};

/* How long a copy may refuse a primary's commits for want of room before the primary asks for
 * it to be dropped: two leases, at least 2 s (section 7). */
static int64_t drop_after(const struct replica *r)
{
    return 2 * r->lease_ns > 2 * NS_PER_S ? 2 * r->lease_ns : 2 * NS_PER_S;
}

/* Asks the manager to drop node's copy of partition p, which has refused this primary's commits
 * with `why` for `for_ns`: the commits waiting for it then complete on the other copies. Runs on
 * the asker thread (asker_main), with its context fc. */
static void ask_drop(struct replica *r, struct fab_ctx *fc, unsigned p, uint16_t node, int why,
                     int64_t for_ns)
{
    log_warn("node %u: node %u has refused partition %u's commits for %.1f s (%s): asking the "
             "manager to drop that copy", r->me, node, p, (double)for_ns / 1e9,
             rdkv_strerror(why));
    struct drop d = {p, r->me, node};
    uint8_t b[4];
    pack_put_u16le(b, (uint16_t)p);
    pack_put_u16le(b + 2, node);
    int rc = ask_manager(r, fc, KV_RPC_REPL_DROP, b, sizeof b, 10 * NS_PER_S, do_drop, &d, NULL);
    if (rc)
        log_warn("node %u: node %u's copy of partition %u not dropped: %s (asked again)", r->me,
                 node, p, rdkv_strerror(rc));
}

/* The asker: takes the drops that ship tasks want to the manager, one at a time. */
static void *asker_main(void *arg)
{
    struct replica *r = arg;
    struct fab_ctx *fc = NULL;
    pthread_mutex_lock(&r->mu);
    while (!r->stopping) {
        int pick = -1;
        for (unsigned p = 0; p < RCFG_MAX_NODES && pick < 0; p++)
            if (r->drop_want[p]) pick = (int)p;
        if (pick < 0) {
            struct timespec ts = clock_ts(clock_now_ns() + 100 * NS_PER_MS);
            pthread_cond_timedwait(&r->ccv, &r->mu, &ts);
            continue;
        }
        uint16_t node = (uint16_t)(r->drop_want[pick] - 1);
        int why = r->drop_why[pick];
        int64_t for_ns = r->drop_for[pick];
        r->drop_want[pick] = 0;
        pthread_mutex_unlock(&r->mu);
        if (!ctx_once(r, &fc)) {
            ask_drop(r, fc, (unsigned)pick, node, why, for_ns);
        } else {
            log_warn("node %u: no fabric context to ask for a copy's drop (asked again)", r->me);
        }
        pthread_mutex_lock(&r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    if (fc) fab_ctx_destroy(fc);
    return NULL;
}

static void dispatcher_wake_locked(struct replica *r);

static void ship_task(void *arg)
{
    struct ship_batch *sb = arg;
    struct replica *r = sb->r;
    uint64_t done = 0; /* nodes known to hold the writes (in any epoch: they were applied) */
    int64_t short_since[RCFG_MAX_NODES] = {0}; /* a copy refusing for want of room, since */
    uint16_t to[RCFG_MAX_REPLICAS];
    int rc = 0;
    uint64_t lsn = 0; /* the batch in this node's copies' log (its own copy's history) */
    for (;;) {
        pthread_mutex_lock(&r->mu);
        struct rcfg cfg = r->cur;
        bool stop = r->stopping;
        pthread_mutex_unlock(&r->mu);
        if (stop) {
            rc = RDKV_ESHUTDOWN;
            break;
        }
        unsigned p = sb->part;
        if (p >= cfg.partitions || rcfg_primary(&cfg, p) != r->me ||
            !(cfg.members >> r->me & 1)) {
            /* this node is no longer the partition's primary: the writes may be on a backup,
             * and none of them may be installed here (the zombie's fence, from its side) */
            rc = RDKV_EUNAVAILABLE;
            break;
        }
        pack_put_u64le(sb->req, cfg.epoch);
        pthread_mutex_lock(&r->mu);
        pack_put_u64le(sb->req + 14, stable_locked(r, p));
        pthread_mutex_unlock(&r->mu);
        /* (not under mu: an append waits -- parks this task -- while the log's queue is full;
         * the partition's batches go one at a time, so their order in the log is theirs) */
        if (r->log && !lsn) log_append_locked(r, WAL_REPL, sb->req, sb->reqlen, &lsn);
        /* the backups of this epoch not yet known to hold the writes */
        unsigned n = 0;
        for (unsigned i = 1; i < cfg.nrep[p]; i++)
            if (!(done >> cfg.rep[p][i] & 1)) to[n++] = cfg.rep[p][i];
        if (!n) break;
        if (sb->partial && n > 1) {
            to[0] = to[n - 1]; /* (the test hook: the last backup only) */
            n = 1;
        }
        struct fab_buf resp[RCFG_MAX_REPLICAS];
        int st[RCFG_MAX_REPLICAS];
        unsigned pending = 0;
        for (unsigned k = 0; k < n; k++) {
            resp[k] = (struct fab_buf){0};
            st[k] = fab_rpc_post(r->sc, to[k], KV_RPC_REPL, sb->req, sb->reqlen, &resp[k],
                                 REPL_TIMEOUT_NS, (uint64_t)(uintptr_t)&st[k]);
            if (!st[k]) {
                st[k] = 1;
                pending++;
            }
        }
        /* (this task's own completions only: tags are its slots' addresses) */
        while (pending) {
            struct fab_cqe cq[RCFG_MAX_REPLICAS];
            int got = fab_wait(r->sc, cq, RCFG_MAX_REPLICAS, -1);
            for (int q = 0; q < got; q++)
                for (unsigned k = 0; k < n; k++)
                    if (cq[q].tag == (uint64_t)(uintptr_t)&st[k] && st[k] == 1) {
                        st[k] = cq[q].status;
                        pending--;
                    }
        }
        bool all = true;
        int64_t now = clock_now_ns();
        for (unsigned k = 0; k < n; k++) {
            fab_buf_free(&resp[k]);
            if (st[k] == 0) done |= 1ull << to[k];
            else all = false;
            /* A copy out of room (its heap, or its records or tail at their caps) refuses with
             * RDKV_ENOSPC until something frees room, which may be never: asked until
             * drop_after, then dropped, so that the commit -- whose rows stay locked meanwhile
             * -- completes on the others. Any other answer is a failure the lease or the epoch
             * settles (RDKV_ENOMEM too: it may be this node's own transport's). */
            int64_t *since = &short_since[to[k]];
            if (st[k] != RDKV_ENOSPC) *since = 0;
            else if (!*since) *since = now;
            else if (now - *since > drop_after(r)) {
                pthread_mutex_lock(&r->mu); /* (the asker thread asks: section 7) */
                r->drop_want[p] = (uint16_t)(to[k] + 1);
                r->drop_why[p] = st[k];
                r->drop_for[p] = now - *since;
                pthread_cond_broadcast(&r->ccv);
                pthread_mutex_unlock(&r->mu);
                *since = now; /* (asked again after as long, if it still refuses) */
            }
        }
        if (sb->partial && all) {
            log_warn("test hook: exiting after a commit of partition %u reached node %u only",
                     p, to[0]);
            _exit(1);
        }
        if (all) break;
        /* a backup did not take it: ask again shortly (a new configuration may drop it; the
         * loop's top reads the configuration again) */
        task_sleep_ns(REPL_RETRY_NS);
    }
    /* (every copy's log holds it before the commit is acknowledged: this one's too; parks this
     * task, not the shipper's thread) */
    if (!rc && lsn) log_wait(r, lsn, "commit");
    free(sb->req);
    pthread_mutex_lock(&r->mu);
    for (struct ship_job *j = sb->jobs; j; j = j->next) open_unlink_locked(r, j);
    r->flying[sb->part]--;
    if (r->jobs) dispatcher_wake_locked(r); /* (what queued meanwhile: the next batch) */
    pthread_mutex_unlock(&r->mu);
    for (struct ship_job *j = sb->jobs, *nx; j; j = nx) {
        nx = j->next;
        job_end(j, rc);
    }
    free(sb);
}

/* Starts a ship task for the jobs [*jp, ...) that fit one batch and advances *jp past them:
 * true; false (the list untouched) when there is no memory for it. */
static bool start_batch(struct replica *r, struct ship_job **jp)
{
    struct ship_job *first = *jp, *last = first;
    size_t bytes = REPL_HDR + REPL_ITEM_HDR + first->len;
    uint32_t count = 1;
    size_t cap = fab_rpc_max(r->f) < REPL_BATCH_BYTES ? fab_rpc_max(r->f) : REPL_BATCH_BYTES;
    /* (the jobs of one partition in a row: a batch goes to one partition's backups) */
    while (last->next && last->next->part == first->part &&
           bytes + REPL_ITEM_HDR + last->next->len <= cap) {
        last = last->next;
        bytes += REPL_ITEM_HDR + last->len;
        count++;
    }
    *jp = last->next;
    last->next = NULL;
    struct ship_batch *sb = malloc(sizeof *sb);
    uint8_t *req = sb ? malloc(bytes) : NULL;
    if (req) {
        sb->r = r;
        sb->part = first->part;
        sb->jobs = first;
        sb->req = req;
        sb->reqlen = bytes;
        sb->partial = r->fault_partial && first->part == r->me && first->kind == REPLICA_APPLY &&
                      ++r->fault_count == 3;
        pack_put_u16le(req + 8, (uint16_t)first->part);
        pack_put_u32le(req + 10, count);
        size_t off = REPL_HDR;
        for (struct ship_job *j = first; j; j = j->next) {
            pack_put_u64le(req + off, j->txid);
            req[off + 8] = j->kind;
            pack_put_u32le(req + off + 9, (uint32_t)j->len);
            pack_put_u64le(req + off + 13, j->seq);
            memcpy(req + off + REPL_ITEM_HDR, j->writes, j->len);
            off += REPL_ITEM_HDR + j->len;
        }
        /* (counted once spawned: the task runs only when this one yields) */
        if (task_spawn(sched_self(), ship_task, sb, 0) == 0) { /* (a cached stack) */
            pthread_mutex_lock(&r->mu);
            r->flying[sb->part]++;
            pthread_mutex_unlock(&r->mu);
            return true;
        }
        free(req);
    }
    free(sb);
    last->next = *jp; /* (no memory now: the list as it was, for the caller to queue again) */
    *jp = first;
    return false;
}

/* Wakes the dispatcher if it is parked (mu held). */
static void dispatcher_wake_locked(struct replica *r)
{
    if (r->dw_armed) {
        r->dw_armed = false;
        waiter_wake(&r->dw);
    }
}

/* The dispatcher: starts a ship task per batch of queued jobs; parks while there is none. */
static void dispatch_task(void *arg)
{
    struct replica *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        struct ship_job *all = r->jobs, *jobs = NULL, **jt = &jobs, *held = NULL, **ht = &held;
        r->jobs = NULL;
        bool stop = r->stopping;
        /* the jobs of the partitions with fewer than REPL_FLYING batches on their way, gathered
         * by partition (each partition's in the order they queued: its backups apply them so);
         * the others wait, in order, for a batch of theirs to come back */
        while (all) {
            unsigned p = all->part;
            struct ship_job **pp = &all;
            bool go = stop || r->flying[p] < REPL_FLYING;
            while (*pp) {
                struct ship_job *j = *pp;
                if (j->part != p) {
                    pp = &j->next;
                    continue;
                }
                *pp = j->next;
                j->next = NULL;
                if (go) *jt = j, jt = &j->next;
                else *ht = j, ht = &j->next;
            }
        }
        if (held) {
            *ht = r->jobs;
            if (!r->jobs) r->jobs_tail = ht;
            r->jobs = held;
        }
        if (!jobs && !stop) {
            waiter_init(&r->dw);
            r->dw_armed = true;
        }
        pthread_mutex_unlock(&r->mu);
        bool any = jobs != NULL;
        while (jobs && start_batch(r, &jobs)) {}
        if (jobs) {
            /* no memory: the jobs not started go back to the queue's head and are tried again
             * shortly (a commit past its decision must not fail for it) */
            struct ship_job *last = jobs;
            while (last->next) last = last->next;
            pthread_mutex_lock(&r->mu);
            last->next = r->jobs;
            if (!r->jobs) r->jobs_tail = &last->next;
            r->jobs = jobs;
            pthread_mutex_unlock(&r->mu);
            task_sleep_ns(REPL_RETRY_NS);
            continue;
        }
        if (any) {
            task_yield(); /* (let the batch leave; what queues meanwhile makes the next one) */
            continue;
        }
        if (stop) return;
        waiter_wait(&r->dw, 0);
    }
}

static void *shipper_main(void *arg)
{
    struct replica *r = arg;
    struct sched *s = NULL;
    int rc = sched_create(&s);
    if (!rc) rc = fab_ctx_create(r->f, &r->sc);
    if (!rc) {
        fab_ctx_set_spin(r->sc, 0); /* (it waits for other nodes: no polling on 2 cores) */
        fab_ctx_attach(r->sc, s);
        rc = task_spawn(s, dispatch_task, r, 0);
    }
    pthread_mutex_lock(&r->mu);
    r->shipper_rc = rc ? rc : 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (!rc) sched_run(s);
    if (r->sc) {
        fab_ctx_attach(r->sc, NULL);
        fab_ctx_destroy(r->sc);
        r->sc = NULL;
    }
    if (s) sched_destroy(s);
    return NULL;
}

/* Queues j for the shipper: 0, or RDKV_ESHUTDOWN once the node stops. */
static int enqueue(struct replica *r, struct ship_job *j)
{
    pthread_mutex_lock(&r->mu);
    if (r->stopping) {
        pthread_mutex_unlock(&r->mu);
        return RDKV_ESHUTDOWN;
    }
    /* an APPLY takes the next seq of its partition (above every seq of an earlier epoch's
     * primary: the epoch is its high bits) and joins the open list until every backup has it */
    j->seq = 0;
    j->oprev = j->onext = NULL;
    if (j->kind == REPLICA_APPLY && j->part < RCFG_MAX_NODES) {
        uint64_t base = r->cur.epoch << 40;
        j->seq = r->pseq[j->part] + 1 > base ? r->pseq[j->part] + 1 : base;
        r->pseq[j->part] = j->seq;
        j->oprev = r->open_last[j->part];
        if (j->oprev) j->oprev->onext = j;
        else r->open[j->part] = j;
        r->open_last[j->part] = j;
    }
    /* (appended: batches keep the order commits queued in) */
    if (!r->jobs) r->jobs_tail = &r->jobs;
    *r->jobs_tail = j;
    r->jobs_tail = &j->next;
    /* (a partition with a batch on its way: its return wakes the dispatcher, and this job
     * joins the next batch) */
    if (r->flying[j->part] < REPL_FLYING) dispatcher_wake_locked(r);
    pthread_mutex_unlock(&r->mu);
    return 0;
}

/* Whether a commit of len bytes of writes fits one REPL (the fabric's RPC limit). */
static bool fits(struct replica *r, size_t len)
{
    size_t max = fab_rpc_max(r->f);
    if (r->log && max > WAL_REC_LIMIT) max = WAL_REC_LIMIT; /* (and one record of the log) */
    return len <= max - REPL_HDR - REPL_ITEM_HDR && len <= UINT32_MAX;
}

/* A commit's writes by partition (as the transaction layer places keys: store_place_hash mod
 * the partitions): most commits write one; one that writes several at a node serving several
 * (after a promotion) is shipped as one job per partition, each to its own backups. */
struct split {
    unsigned parts, n, p;
    uint64_t mask;          /* the partitions written */
    struct wal_write *ws;   /* pick_part: the writes of partition p */
};

static int mark_part(void *arg, const struct wal_write *w)
{
    struct split *s = arg;
    s->mask |= 1ull << (store_place_hash(w->key, w->klen) % s->parts);
    s->n++;
    return 0;
}

static int pick_part(void *arg, const struct wal_write *w)
{
    struct split *s = arg;
    if (store_place_hash(w->key, w->klen) % s->parts == s->p) s->ws[s->n++] = *w;
    return 0;
}

/* Fills jobs[] (nj of them: one per partition written, payloads pointing into `payload` for a
 * single one, else into bufs[] that the caller frees) and *nj. A PREPARE's payload is its
 * coordinator (2 bytes) then the writes; a DECIDE, or a FORGET of one (no payload), goes to
 * the coordinator's own partition. 0, RDKV_EPROTO, RDKV_ENOMEM. */
static int split_jobs(struct replica *r, uint8_t kind, uint64_t txid, const void *payload,
                      size_t len, struct ship_job *jobs, uint8_t **bufs, unsigned *nj)
{
    struct split s = {.parts = r->parts};
    *nj = 0;
    size_t pre = kind == REPLICA_PREPARE ? 2 : 0;
    const uint8_t *writes = (const uint8_t *)payload + pre;
    if (len < pre || (kind == REPLICA_DECIDE && len)) return RDKV_EPROTO;
    if (kind == REPLICA_DECIDE || (kind == REPLICA_FORGET && !len)) {
        s.mask = 1ull << (txn_txid_node(txid) % s.parts);
    } else if (wal_writes_unpack(writes, len - pre, mark_part, &s)) {
        return RDKV_EPROTO;
    }
    if (__builtin_popcountll(s.mask) <= 1) {
        unsigned p = s.mask ? (unsigned)__builtin_ctzll(s.mask) : r->me;
        jobs[0] = (struct ship_job){.part = p, .kind = kind, .txid = txid, .writes = payload,
                                    .len = len};
        bufs[0] = NULL;
        *nj = 1;
        return 0;
    }
    s.ws = malloc(s.n * sizeof *s.ws);
    if (!s.ws) return RDKV_ENOMEM;
    int rc = 0;
    for (unsigned p = 0; p < s.parts && !rc; p++) {
        if (!(s.mask >> p & 1)) continue;
        s.p = p;
        s.n = 0;
        wal_writes_unpack(writes, len - pre, pick_part, &s);
        size_t bl = wal_writes_size(s.ws, s.n);
        uint8_t *b = malloc(pre + bl);
        if (!b) {
            rc = RDKV_ENOMEM;
            break;
        }
        memcpy(b, payload, pre); /* (a PREPARE's coordinator) */
        wal_writes_pack(s.ws, s.n, b + pre, bl);
        bufs[*nj] = b;
        jobs[*nj] = (struct ship_job){.part = p, .kind = kind, .txid = txid, .writes = b,
                                      .len = pre + bl};
        (*nj)++;
    }
    free(s.ws);
    if (rc)
        for (unsigned i = 0; i < *nj; i++) free(bufs[i]);
    return rc;
}

/* Ships one item (split by partition) and waits. A DECIDE's `writes` are the coordinator's own
 * share as a PREPARE's payload (or nothing): its jobs and the DECIDE's queue together, so that
 * they mostly leave in one batch -- one round trip for both. */
static int ship_kind(struct replica *r, uint8_t kind, uint64_t txid, const void *writes,
                     size_t len)
{
    if (!fits(r, len)) return RDKV_ETOOBIG; /* (nothing sent) */
    struct ship_job *jobs = malloc((RCFG_MAX_NODES + 1) * sizeof *jobs);
    uint8_t **bufs = malloc((RCFG_MAX_NODES + 1) * sizeof *bufs);
    unsigned nj = 0;
    bool decide = kind == REPLICA_DECIDE;
    int rc = !jobs || !bufs ? RDKV_ENOMEM
             : decide && !len ? 0
             : split_jobs(r, decide ? REPLICA_PREPARE : kind, txid, writes, len, jobs, bufs, &nj);
    if (!rc && decide) {
        jobs[nj] = (struct ship_job){.part = txn_txid_node(txid) % r->parts, .kind = REPLICA_DECIDE,
                                     .txid = txid};
        bufs[nj++] = NULL;
    }
    unsigned queued = 0;
    for (unsigned i = 0; i < nj && !rc; i++) {
        waiter_init(&jobs[i].w);
        rc = enqueue(r, &jobs[i]);
        if (!rc) queued++;
    }
    /* (every job queued is waited for: it points into writes) */
    for (unsigned i = 0; i < queued; i++) {
        waiter_wait(&jobs[i].w, 0);
        if (!rc) rc = jobs[i].rc;
    }
    for (unsigned i = 0; i < nj; i++) free(bufs[i]);
    free(jobs);
    free(bufs);
    return rc;
}

/* A commit of generation g installed, or never to be (mu held): the copier may be waiting for
 * g to empty (drain_old). */
static void gen_drop_locked(struct replica *r, unsigned g)
{
    if (!--r->live[g]) pthread_cond_broadcast(&r->ccv);
}

/* A commit (kind REPLICA_APPLY) about to ship, counted in the current generation until it is
 * installed; or a PREPARE or DECIDE record, until it is settled: 0, or RDKV_ENOMEM (nothing
 * counted). */
/* txid's entry of kind `kind` in the generation map, or where it would be linked (mu held). */
static struct gent **gent_find_locked(struct replica *r, uint64_t txid, uint8_t kind)
{
    struct gent **pp = &r->gmap[txid % 64];
    while (*pp && !((*pp)->txid == txid && (*pp)->kind == kind)) pp = &(*pp)->next;
    return pp;
}

static int gen_enter(struct replica *r, uint64_t txid, uint8_t kind)
{
    struct gent *g = malloc(sizeof *g);
    if (!g) return RDKV_ENOMEM;
    pthread_mutex_lock(&r->mu);
    unsigned b = (unsigned)(txid % 64);
    if (*gent_find_locked(r, txid, kind)) {
        /* (counted already: one entry, which one settlement ends) */
        pthread_mutex_unlock(&r->mu);
        free(g);
        return 0;
    }
    g->txid = txid;
    g->kind = kind;
    g->gen = r->gen;
    g->next = r->gmap[b];
    r->gmap[b] = g;
    r->live[g->gen]++;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

/* ... installed or settled, or never to be: it leaves its generation (nothing when it was not
 * counted). */
static void gen_leave(struct replica *r, uint64_t txid, uint8_t kind)
{
    pthread_mutex_lock(&r->mu);
    struct gent **pp = gent_find_locked(r, txid, kind), *g = *pp;
    if (g) {
        *pp = g->next;
        gen_drop_locked(r, g->gen);
        free(g);
    }
    pthread_mutex_unlock(&r->mu);
}

/* Whether a ship of `kind` for txid, with payload[0..len), writes a partition being handed back
 * (hand_back): RDKV_EBUSY (refused, nothing sent: the caller installs nothing and its client
 * may retry) for a commit or a PREPARE that begins now; 0 for the rest -- the commit of a
 * transaction prepared here, a DECIDE without writes, a FORGET -- which the drain waits for.
 * Called after the item was counted in its generation: a ship counted in the generation that
 * the hand-back's drain waits for is let through, and one counted after the flip sees the
 * freeze. */
static int frozen_refuse(struct replica *r, uint8_t kind, uint64_t txid, const void *payload,
                         size_t len)
{
    if (!__atomic_load_n(&r->nfrozen, __ATOMIC_SEQ_CST) || kind == REPLICA_FORGET)
        return 0;
    if (kind == REPLICA_DECIDE) {
        /* (a DECIDE goes to its coordinator's partition: a record the drain must see settled,
         * or in the state of a checkpoint taken after it -- refused while that one is frozen) */
        unsigned p = txn_txid_node(txid) % r->parts;
        pthread_mutex_lock(&r->mu);
        int rc = p < RCFG_MAX_NODES && r->frozen[p] ? RDKV_EBUSY : 0;
        pthread_mutex_unlock(&r->mu);
        return rc;
    }
    if (!len) return 0;
    size_t pre = kind == REPLICA_APPLY ? 0 : 2; /* (a PREPARE's, or a DECIDE's own share) */
    struct split sp = {.parts = r->parts};
    if (len < pre || wal_writes_unpack((const uint8_t *)payload + pre, len - pre, mark_part, &sp))
        return 0; /* (split_jobs refuses it) */
    int rc = 0;
    pthread_mutex_lock(&r->mu);
    for (unsigned p = 0; p < r->parts && p < RCFG_MAX_NODES && !rc; p++)
        if (sp.mask >> p & 1 && r->frozen[p]) rc = RDKV_EBUSY;
    if (rc && kind == REPLICA_APPLY && *gent_find_locked(r, txid, REPLICA_PREPARE))
        rc = 0; /* (a transaction prepared here commits) */
    pthread_mutex_unlock(&r->mu);
    return rc;
}

static int ship(void *arg, uint64_t txid, const void *writes, size_t len)
{
    struct replica *r = arg;
    int rc = gen_enter(r, txid, REPLICA_APPLY);
    if (!rc) rc = frozen_refuse(r, REPLICA_APPLY, txid, writes, len);
    if (!rc) rc = ship_kind(r, REPLICA_APPLY, txid, writes, len);
    if (rc) gen_leave(r, txid, REPLICA_APPLY); /* (nothing will be installed) */
    return rc;
}

/* A commit installed at this primary: its APPLY done, and the PREPARE it settles (if any). */
static void installed(void *arg, uint64_t txid)
{
    gen_leave(arg, txid, REPLICA_APPLY);
    gen_leave(arg, txid, REPLICA_PREPARE);
}

/* ship_async's jobs of one commit: the caller is called back once all have ended. */
struct multi {
    struct replica *r;
    unsigned left, gen; /* gen: the generation of an APPLY, counted until done returned */
    bool counted;
    int rc;
    void (*done)(void *ctx, int rc);
    void *ctx;
    unsigned nb;
    uint8_t *bufs[];
};

static void multi_done(void *ctx, int rc)
{
    struct multi *m = ctx;
    if (rc) {
        int zero = 0;
        __atomic_compare_exchange_n(&m->rc, &zero, rc, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    }
    if (__atomic_sub_fetch(&m->left, 1, __ATOMIC_ACQ_REL)) return;
    m->done(m->ctx, __atomic_load_n(&m->rc, __ATOMIC_RELAXED)); /* (installs) */
    if (m->counted) {
        pthread_mutex_lock(&m->r->mu);
        gen_drop_locked(m->r, m->gen);
        pthread_mutex_unlock(&m->r->mu);
    }
    for (unsigned i = 0; i < m->nb; i++) free(m->bufs[i]);
    free(m);
}

static int ship_kind_async(struct replica *r, uint8_t kind, uint64_t txid, const void *writes,
                           size_t len, void (*done)(void *ctx, int rc), void *ctx)
{
    if (!fits(r, len)) return RDKV_ETOOBIG; /* (nothing sent) */
    struct ship_job *split = malloc(RCFG_MAX_NODES * sizeof *split);
    struct multi *m = calloc(1, sizeof *m + RCFG_MAX_NODES * sizeof(uint8_t *));
    int rc = split && m ? split_jobs(r, kind, txid, writes, len, split, m->bufs, &m->nb)
                        : RDKV_ENOMEM;
    if (rc) {
        free(split);
        free(m);
        return rc;
    }
    m->done = done;
    m->ctx = ctx;
    m->r = r;
    m->left = m->nb + 1; /* (one held until every job is queued) */
    if (kind == REPLICA_APPLY) {
        pthread_mutex_lock(&r->mu);
        m->gen = r->gen;
        r->live[m->gen]++;
        m->counted = true;
        pthread_mutex_unlock(&r->mu);
    }
    int frozen = frozen_refuse(r, kind, txid, writes, len);
    unsigned queued = 0;
    for (unsigned i = 0; i < m->nb && !frozen; i++) {
        struct ship_job *j = malloc(sizeof *j);
        if (j) {
            *j = split[i];
            j->done = multi_done;
            j->ctx = m;
        }
        int jrc = j ? enqueue(r, j) : RDKV_ENOMEM;
        if (!jrc) {
            queued++;
            continue;
        }
        free(j);
        multi_done(m, jrc); /* (never the last: the hold is still there) */
    }
    free(split);
    if (!queued) {
        /* nothing left: the caller hears the refusal, not a callback */
        rc = frozen ? frozen : m->rc;
        if (m->counted) {
            pthread_mutex_lock(&r->mu);
            gen_drop_locked(r, m->gen);
            pthread_mutex_unlock(&r->mu);
        }
        for (unsigned i = 0; i < m->nb; i++) free(m->bufs[i]);
        free(m);
        return rc;
    }
    multi_done(m, 0);
    return 0;
}

static int ship_async(void *arg, uint64_t txid, const void *writes, size_t len,
                      void (*done)(void *ctx, int rc), void *ctx)
{
    return ship_kind_async(arg, REPLICA_APPLY, txid, writes, len, done, ctx);
}

/* A FORGET's end: its copy of the payload goes. */
static void forget_done(void *ctx, int rc)
{
    (void)rc; /* (a FORGET lost leaves a record that the promotion would ask about: harmless) */
    free(ctx);
}

/* A two-phase commit's record to the backups. A PREPARE (or a DECIDE carrying the
 * coordinator's own share, which is one) is counted in its generation until its commit is
 * installed here or a FORGET with its writes drops it; a DECIDE until the FORGET without
 * writes that ends the decision -- so that a copy named meanwhile is not marked full while a
 * record shipped before it was named is still open (drain_old). */
static int ship_rec(void *arg, int kind, uint64_t txid, const void *payload, size_t len)
{
    struct replica *r = arg;
    if (kind == TXN_SHIP_KEEP) {
        /* a decision its coordinator keeps for good: never FORGET, so no drain waits for it,
         * and every copy of its partition filled later is sent it, as a taken-over one */
        /* (kept before it leaves the drain's generation: a checkpoint's state, taken once the
         * drain is through, holds it) */
        uint64_t t = txid;
        int rc = keep_decided(r, txn_txid_node(txid) % r->parts, &t, 1);
        gen_leave(r, txid, REPLICA_DECIDE);
        return rc;
    }
    if (kind != REPLICA_FORGET) {
        bool prep = kind == REPLICA_PREPARE || len, dec = kind == REPLICA_DECIDE;
        int rc = prep ? gen_enter(r, txid, REPLICA_PREPARE) : 0;
        if (!rc && dec) rc = gen_enter(r, txid, REPLICA_DECIDE);
        if (!rc) rc = frozen_refuse(r, (uint8_t)kind, txid, payload, len);
        if (!rc) rc = ship_kind(r, (uint8_t)kind, txid, payload, len);
        if (rc) {
            /* (not sent, or not to every backup: the transaction does not go on, its record
             * is not waited for) */
            if (prep) gen_leave(r, txid, REPLICA_PREPARE);
            if (dec) gen_leave(r, txid, REPLICA_DECIDE);
        }
        return rc;
    }
    gen_leave(r, txid, len ? REPLICA_PREPARE : REPLICA_DECIDE);
    void *copy = malloc(len ? len : 1);
    if (!copy) return RDKV_ENOMEM;
    if (len) memcpy(copy, payload, len);
    int rc = ship_kind_async(r, REPLICA_FORGET, txid, copy, len, forget_done, copy);
    if (rc) free(copy);
    return rc;
}

void (*replica_installed_fn(struct replica *r))(void *, uint64_t)
{
    return r && r->cur.replicas > 1 ? installed : NULL;
}

int (*replica_ship_rec_fn(struct replica *r))(void *, int, uint64_t, const void *, size_t)
{
    return replica_ship_fn(r) ? ship_rec : NULL;
}

int (*replica_ship_fn(struct replica *r))(void *, uint64_t, const void *, size_t)
{
    if (!r) return NULL;
    pthread_mutex_lock(&r->mu);
    bool backups = r->cur.replicas > 1; /* (a node may become primary of another partition) */
    pthread_mutex_unlock(&r->mu);
    return backups ? ship : NULL;
}

int (*replica_ship_async_fn(struct replica *r))(void *, uint64_t, const void *, size_t,
                                                void (*)(void *, int), void *)
{
    return replica_ship_fn(r) ? ship_async : NULL;
}

void replica_detach(struct replica *r)
{
    if (!r) return;
    pthread_mutex_lock(&r->rmu); /* (no route is changed from here on) */
    r->route = NULL;
    pthread_mutex_unlock(&r->rmu);
    zcfg_halt(r->z);      /* (nobody waits on a reconnection from here on) */
    lease_stop(r->lease); /* (its threads; the handler answers "not the manager" from now) */
    pthread_mutex_lock(&r->mu);
    r->stopping = true;
    dispatcher_wake_locked(r);
    pthread_cond_broadcast(&r->ccv);
    pthread_mutex_unlock(&r->mu);
    /* (the copier reads the copies, and both use contexts and the row lock's tunables) */
    if (r->copier_on) pthread_join(r->copier, NULL);
    if (r->joiner_on) pthread_join(r->joiner, NULL);
    if (r->asker_on) pthread_join(r->asker, NULL);
    if (r->ckpter_on) pthread_join(r->ckpter, NULL);
    r->copier_on = r->joiner_on = r->asker_on = r->ckpter_on = false;
    pthread_mutex_lock(&r->mu);
    for (unsigned p = 0; p < RCFG_MAX_NODES; p++) {
        store_close(r->backup[p]);
        r->backup[p] = NULL;
        recs_free_locked(r, p);
        tail_trim_locked(r, p, UINT64_MAX);
        delset_free_locked(r, p);
    }
    pthread_mutex_unlock(&r->mu);
}

bool replica_is_member(struct replica *r, uint16_t node)
{
    if (!r) return true;
    pthread_mutex_lock(&r->mu);
    bool in = node < r->cur.nodes && (r->cur.members >> node & 1);
    pthread_mutex_unlock(&r->mu);
    return in;
}

uint64_t replica_epoch(struct replica *r)
{
    if (!r) return 1;
    pthread_mutex_lock(&r->mu);
    uint64_t e = r->cur.epoch;
    pthread_mutex_unlock(&r->mu);
    return e;
}

void replica_describe(struct replica *r, const struct cluster_config *cc, char *buf, size_t cap)
{
    if (!r) {
        snprintf(buf, cap, "one copy of each partition (no ZooKeeper)");
        return;
    }
    snprintf(buf, cap, "replicas %u, configuration epoch %llu in ZooKeeper %s", cc->replicas,
             (unsigned long long)replica_epoch(r), cc->zookeeper);
}

void replica_status_json(struct replica *r, const struct cluster_config *cc, struct json *j)
{
    json_key(j, "replication");
    json_obj_begin(j);
    if (!r) {
        json_kv_u64(j, "replicas", 1);
        json_key(j, "zookeeper");
        json_null(j);
        json_kv_u64(j, "epoch", 1);
        json_key(j, "manager");
        json_null(j);
        json_obj_end(j);
        return;
    }
    pthread_mutex_lock(&r->mu);
    struct rcfg c = r->cur;
    bool mgr = r->manager;
    struct fill fill[RCFG_MAX_NODES];
    memcpy(fill, r->fill, sizeof fill);
    unsigned probe_refused = r->probe_refused, probe_of = r->probe_of;
    pthread_mutex_unlock(&r->mu);
    json_kv_u64(j, "replicas", c.replicas);
    json_kv_str(j, "zookeeper", cc->zookeeper);
    json_kv_u64(j, "epoch", c.epoch);
    json_kv_bool(j, "manager", mgr);
    json_kv_bool(j, "member", c.members >> r->me & 1);
    json_key(j, "lease");
    if (!r->lease) json_null(j);
    else json_bool(j, lease_valid(r->lease));
    json_kv_u64(j, "removed", r->lease ? lease_removed(r->lease) : 0u);
    json_key(j, "partitions");
    json_arr_begin(j);
    for (unsigned p = 0; p < c.partitions; p++) {
        json_obj_begin(j);
        json_kv_u64(j, "partition", p);
        json_key(j, "replicas");
        json_arr_begin(j);
        for (unsigned i = 0; i < c.nrep[p]; i++) json_u64(j, c.rep[p][i]);
        json_arr_end(j);
        json_key(j, "filling");
        json_arr_begin(j);
        for (unsigned i = rcfg_full(&c, p); i < c.nrep[p]; i++) json_u64(j, c.rep[p][i]);
        json_arr_end(j);
        /* this node's stream to them, when it is the primary filling them */
        if (fill[p].epoch) {
            json_key(j, "fill");
            json_obj_begin(j);
            json_kv_u64(j, "rows", fill[p].rows);
            json_kv_u64(j, "of", fill[p].of);
            json_obj_end(j);
        }
        json_obj_end(j);
    }
    json_arr_end(j);
    /* the nodes whose old processes every member fences (section 6, step 4) */
    json_key(j, "fenced");
    json_arr_begin(j);
    for (unsigned i = 0; i < c.nodes; i++)
        if (c.fenced[i]) json_u64(j, i);
    json_arr_end(j);
    if (r->fault_probe) {
        json_key(j, "probe");
        json_obj_begin(j);
        json_kv_u64(j, "refused", probe_refused);
        json_kv_u64(j, "of", probe_of);
        json_obj_end(j);
    }
    if (r->log) {
        struct wal_stats ws;
        wal_stats(r->log, &ws);
        json_key(j, "log");
        json_obj_begin(j);
        json_kv_u64(j, "bytes", ws.bytes);
        json_kv_u64(j, "checkpoints", __atomic_load_n(&r->ckpts, __ATOMIC_RELAXED));
        json_obj_end(j);
    }
    json_obj_end(j);
}

void replica_release(struct replica *r)
{
    if (!r || r->shipper_rc <= 0) return;
    pthread_mutex_lock(&r->mu);
    r->stopping = true;
    dispatcher_wake_locked(r);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->shipper, NULL); /* (its ship tasks give up: stopping) */
    r->shipper_rc = 0;
}

void replica_stop(struct replica *r)
{
    if (!r) return;
    replica_release(r);
    zcfg_close(r->z); /* (its thread's callbacks use the lease: closed first) */
    lease_free(r->lease);
    /* (no handler or ship runs now, and no configuration comes: nothing appends) */
    if (r->log && wal_close(r->log)) log_error("node %u: the copies' log had failed", r->me);
    r->log = NULL;
    for (unsigned p = 0; p < RCFG_MAX_NODES; p++) free(r->kept[p]);
    pthread_cond_destroy(&r->ccv);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->rmu);
    pthread_mutex_destroy(&r->fmu);
    pthread_mutex_destroy(&r->mu);
    free(r);
}
