/* The coordinator's side of the transaction layer, shared by its files: a transaction (its
 * entries, one per key, with the locks it holds), a worker (one per thread or task), and the
 * steps every operation is built from. core.c keeps a transaction's memory and locks and ends
 * it; locate.c finds, locks and reads rows; ops.c, scan.c and commit.c are the operations.
 * A transaction's first failure sticks (txn_fail): it gives back every lock at once. */
#ifndef RDKV_TXN_COORD_H
#define RDKV_TXN_COORD_H

#include "txn/internal.h"

#include "common/metrics.h"

struct tent {
    const uint8_t *key;
    uint32_t klen;
    uint16_t part;   /* the node serving the key's partition when the entry was made */
    uint16_t pid;    /* the key's partition */
    uint32_t moves;  /* its route's move count when the entry was made (read before part) */
    bool exists;     /* a live row was found under the lock */
    bool known;      /* exists has been settled under this transaction's locks */
    bool have_val;
    uint8_t wop;     /* 0, W_PUT or W_DEL */
    uint64_t hash;
    rptr row;
    uint64_t version;
    struct lock_handle lk;     /* the row lock (lk.mode != 0 while held) */
    struct range_handle *rh;   /* the point {key} in the owner's key space, when taken */
    const uint8_t *val;        /* what the row held when read */
    uint32_t vlen;
    const uint8_t *nval;       /* W_PUT: the new value */
    uint32_t nvlen;
};
enum { W_PUT = 1, W_DEL = 2 };

struct txn {
    struct txn_worker *w;
    uint64_t txid;
    uint64_t log_txid; /* the txid its COMMIT record names (0: txid): a recovered in-doubt one's */
    uint64_t ts;      /* start timestamp (wait-die's age), kept across retries by txn_keep_ts */
    bool active;
    int failed;
    int64_t began_ns; /* clock_now_ns() at txn_begin while metrics count (else 0) */
    uint32_t nops;    /* operations so far, and the bytes of their keys and values (the caps) */
    uint64_t nbytes;
    struct tent *ents;
    uint32_t nents, cap;
    uint32_t *idx; /* open addressing over ents: index + 1 */
    uint32_t idxcap;
    struct range_handle **scans;
    uint32_t nscans, scancap;
    struct chunk *mem;
    /* per node, the incarnation this transaction's operations there reach (0: none yet): its
     * posts are pinned to it (rdma/fabric.h fab_pin), its locks there were taken in it, and a
     * PREPARE or APPLY names it (docs/transactions.md, "Incarnations") */
    uint64_t *pinc;
    /* per partition, its route's move count + 1 when a scan first took it (0: not scanned):
     * checked at the commit as the entries' are (txn_leases_ok) */
    uint32_t *sroute;
};

struct txn_worker {
    struct txn_env *e;
    struct fab_ctx *c;
    bool own_ctx;           /* c was created for the worker (not a task's shared one) */
    struct lock_thread lt;
    struct store_remote *rem;
    uint8_t *rem_ok;
    uint64_t *cinc; /* per partition, the incarnation of the node rem[p] was opened at ... */
    uint16_t *rnode; /* ... and that node */
    bool adopting;   /* a promotion's worker (txn_env_adopt): may use its gated partition */
    struct txn tx;
    uint32_t wid, seq;
    int64_t lock_timeout;
    int conflict;           /* enum txn_conflict */
    struct txn_stats stats;
    struct range_handle **rfree;
    uint32_t nrfree, rfreecap;
    uint64_t rng;
};

/* A lock wait that ran out: the worker's count and the process's (common/metrics.h). */
static inline void txn_count_conflict(struct txn_worker *w)
{
    w->stats.conflicts++;
    metrics_add(MC_TXN_LOCK_CONFLICTS, 1);
}

/* ------------------------------------------------------------------------------------------ */
/* core.c: a transaction's memory, entries and locks. */

/* Memory for the transaction's life (freed or reused at its end). */
void *txn_mem(struct txn *t, size_t n);
const uint8_t *txn_copy(struct txn *t, const void *p, uint32_t n);
/* The first failure sticks: every later call returns it, and commit aborts; the transaction
 * gives back every lock at once. Returns rc. */
int txn_fail(struct txn *t, int rc);
/* txn_cfg.serving: whether this node may serve now (no hook: always). */
static inline bool txn_serving(const struct txn_env *e)
{
    return !e->cfg.serving || e->cfg.serving(e->cfg.ship_arg);
}
/* What a lock or fabric failure at node means for the transaction. */
int txn_classify(struct txn *t, int rc, uint16_t node);
/* Wait-die's age for a row lock request is usable (the policy, and the row lock tells ages). */
bool txn_row_wait_die(const struct txn *t);
/* When a row lock wait, and a range lock wait, must end under the worker's policy. */
int64_t txn_row_deadline(struct txn *t);
int64_t txn_range_deadline(struct txn *t);
/* A range handle from the worker's pool, and back. */
struct range_handle *txn_rh_get(struct txn_worker *w);
void txn_rh_put(struct txn_worker *w, struct range_handle *h);
/* The entry of a key (added when new): its index, or RDKV_ENOMEM. */
int txn_ent_get(struct txn *t, const void *key, uint32_t klen);
/* The key's length within the store's limit: 0 or RDKV_ETOOBIG. */
int txn_check_key(struct txn *t, uint32_t klen);
/* Counts an operation of `bytes` key and value bytes against the transaction's caps
 * (txn_cfg.max_ops, max_bytes): beyond them the transaction fails with RDKV_ETOOBIG. */
int txn_charge_op(struct txn *t, uint64_t bytes);
/* Releases en's row lock (or drops it when its node is down). */
void txn_unlock_row(struct txn *t, struct tent *en);
/* Releases a range lock (or drops it when its node is down) and gives the handle back. */
void txn_range_drop(struct txn *t, struct range_handle **hp);
/* Whether every lock the transaction holds is still its own (leases, incarnations). */
bool txn_leases_ok(struct txn *t);
/* Releases every lock and readies the worker for its next transaction. */
void txn_end(struct txn *t);
/* Every call of a transaction runs pinned to the incarnations it works with. */
uint64_t *txn_pin_on(struct txn *t);
void txn_pin_off(struct txn *t, uint64_t *was);

/* Posts one RPC to each of n nodes at once on c and waits for all (one round, each bounded by
 * timeout_ns): status[i], and resps[i] when resps is not NULL (the caller frees them).
 * meanwhile (may be NULL) runs once they are posted, before the wait. */
void txn_call_all(struct fab_ctx *c, unsigned n, const uint16_t *nodes, uint16_t type,
                  const void *const *reqs, const size_t *lens, struct fab_buf *resps,
                  int *status, int64_t timeout_ns, void (*meanwhile)(void *arg), void *arg);

/* ------------------------------------------------------------------------------------------ */
/* locate.c: finding, locking and reading rows. */

/* The transaction's first operation on node: the incarnation it works with from now on. */
int txn_touch(struct txn *t, uint16_t node);
/* Makes en's key locked in at least `mode`, its row (if any) read. */
int txn_locate(struct txn *t, struct tent *en, enum lock_mode mode, bool want_val);
/* Reads the row en holds locked at `row`: 1 when it is en's key and live, 0 when it is not, or a
 * status. */
int txn_read_row(struct txn *t, struct tent *en, rptr row, bool want_val);
/* Locks en's row at `row` in mode, then reads it (*got: txn_read_row's answer). */
int txn_lock_read_row(struct txn *t, struct tent *en, rptr row, enum lock_mode mode,
                      bool want_val, int *got);
/* Locks the keys [b, e) (kflags: enum range_key_flags) in node's part of the key space. */
int txn_range_take(struct txn *t, struct range_handle **hp, uint16_t node, const uint8_t *b,
                   uint32_t bl, const uint8_t *e, uint32_t el, unsigned kflags,
                   enum lock_mode mode);
/* Locks en's key as a point {k} of the key space. */
int txn_point_take(struct txn *t, struct tent *en, enum lock_mode mode);
/* The cached location of a key of node (incarnation inc): true and *row, *readlen. */
bool txn_cache_get(const struct txn_env *e, uint64_t hash, uint64_t inc, rptr *row,
                   uint32_t *readlen);
/* The node's location cache of rows of other nodes (struct txn_env's loc; free() it). */
struct loc *txn_locs_create(void);
/* The worker's view of node's index (opened at first use). */
int txn_remote_of(struct txn *t, uint16_t pid, uint16_t node, const struct store_remote **out);

/* ------------------------------------------------------------------------------------------ */
/* commit.c, fence.c */

/* The participant `node` did not answer a request of t: keep t's exclusive locks there until it
 * says nothing of t will be installed any more (decision: enum txn_resolve). */
void txn_fence_keep(struct txn *t, uint16_t node, uint8_t decision);

#endif
