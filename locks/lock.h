/* Locks over the fabric. Every algorithm has the same shape -- acquire(handle, mode, deadline)
 * and release(handle) on a 64-byte lock line named by an rptr -- so the transaction layer and the
 * benchmarks can switch algorithms by name. Also here: per-thread lock state (a pool of queue
 * descriptors in the thread's own arena), the lock table used by benchmarks and tests, and the
 * bounded wait (spin briefly, then sleep) every algorithm uses. docs/locks.md. */
#ifndef RDKV_LOCK_H
#define RDKV_LOCK_H

#include "rdma/fabric.h"

#include <stdbool.h>
#include <stdint.h>

#define LOCK_LINE 64
#define LOCK_DSLR_MAX_SLOTS 8 /* multi-slot leasing: the most leases one request may take */

/* Shared and exclusive, plus DSLR's update mode: granted alongside shared holders (it reads),
 * excludes other update and exclusive holders, and becomes exclusive with lock_upgrade once the
 * shared holders before it have left. */
enum lock_mode { LOCK_SHARED = 1, LOCK_EXCLUSIVE = 2, LOCK_UPDATE = 3 };

struct lock_handle;
struct lock_thread;

/* Every algorithm's place in the registry (lock_algo.id): per-algorithm counters
 * (common/metrics.h) are kept by it. */
enum lock_algo_id {
    LOCK_ID_ALOCK, LOCK_ID_SPIN, LOCK_ID_MCS, LOCK_ID_DSLR, LOCK_ID_DSLR_U, LOCK_ID_DRTM,
    LOCK_ID_ROF, LOCK_ID_TRAD, LOCK_ID_RWLOCK, LOCK_ID_DMCS, LOCK_ID_FOMPI_RW, LOCK_ID_RMA_MCS,
    LOCK_ID_RMA_RW, LOCK_ID__COUNT
};

struct lock_algo {
    const char *name;
    enum lock_algo_id id;
    unsigned modes;        /* bitmask of (1 << enum lock_mode) it supports */
    bool uses_descriptors; /* queue locks take one descriptor per held lock */
    /* A waiter queued behind others cannot give up at its deadline (MCS and its kin; alock
     * queues too, but never behind a holder it would have to outwait). Transactions, whose
     * waits must end so that a deadlock aborts, refuse such a row lock (txn_env). */
    bool queue_wait;
    bool recovers;         /* a holder that dies never wedges the lock (leases) */
    /* 0: held. RDKV_ETIMEDOUT: the deadline passed first; not held, nothing left behind (a
     * ticket already taken is released on the holder's behalf when its turn comes).
     * RDKV_EABORTED: a lease-expiry reset skipped or consumed this request (DSLR's FAILURE):
     * not held; the caller should release its other locks and retry. RDKV_ENOTSUP: mode.
     * Other negative values are fabric errors. deadline: a clock_now_ns() value, 0 = none. */
    int (*acquire)(struct lock_handle *h, enum lock_mode mode, int64_t deadline);
    /* 0, or RDKV_ETIMEDOUT when the holder's lease had expired: others may have reset the lock,
     * so the holder must treat what it did under the lock as unprotected (abort, not commit). */
    int (*release)(struct lock_handle *h);
    /* The same release in two halves, so that many locks' releases can be in flight at once
     * (lock_release_many; NULL: one after another). release_post does what release does up to
     * its last chain, which it puts in ops (at most LOCK_RELEASE_OPS, all to the line's node)
     * with *n its length; release_done, once that chain completed with status st, finishes and
     * returns what release would have. *n = 0: nothing to post, and the return value is the
     * release's result. */
    int (*release_post)(struct lock_handle *h, struct fab_op *ops, unsigned *n);
    int (*release_done)(struct lock_handle *h, int st);
    /* LOCK_UPDATE -> LOCK_EXCLUSIVE (NULL where the mode is unsupported). */
    int (*upgrade)(struct lock_handle *h, int64_t deadline);
    /* Shows waiters that the holder lives, so that its lease runs from now (NULL: a lease that
     * cannot be extended). 0, or RDKV_ETIMEDOUT when the lease had run out (nothing done). */
    int (*refresh)(struct lock_handle *h);
    /* The owner's side of fencing: with plain loads of its own arena (or its own lock manager),
     * whether the lock at `line` is still held exclusively by the hold named `token`
     * (lock_token of the holder's handle), taken by a thread of node `holder`. 1 held, 0 not,
     * RDKV_ENOTSUP when the lock cannot tell its holders apart (NULL: the same). */
    int (*holds_x)(struct fabric *f, rptr line, uint16_t holder, uint64_t token);
    /* The owner taking care of such a hold for a holder that may be gone (the transaction
     * layer's prepared writes: docs/transactions.md, "How an in-doubt transaction's rows stay
     * locked"), with a thread t of the owner's node, while the hold is still there: keep_x shows
     * the waiters that it lives, as its holder's lock_refresh would (so no lease recovery takes
     * it); release_x releases it as its holder would -- only once the holder can never act on
     * it again (its process is gone). 0; RDKV_ETIMEDOUT: the hold is not there (nothing done);
     * RDKV_ENOTSUP (NULL: the same): the algorithm cannot. */
    int (*keep_x)(struct lock_thread *t, rptr line, uint16_t holder, uint64_t token);
    int (*release_x)(struct lock_thread *t, rptr line, uint16_t holder, uint64_t token);
    /* A held lock may be released by another thread of the same node (handle copied, h->t
     * pointed at that thread): no per-thread state (descriptors) is tied to the hold. */
    bool movable;
    /* Wait-die: a request with h->age set waits only for younger requests (larger ages) and
     * otherwise gives up at once with RDKV_EABORTED, leaving nothing behind (docs/locks.md,
     * "Wait-die"). Algorithms without it ignore h->age. */
    bool wait_die;
    /* The acquire can READ the bytes a handle names (rd_len) in its own chain, and says in rd_ok
     * whether they were read under the lock (see struct lock_handle). Others ignore rd_len. */
    bool read_in_chain;
    /* Reading without the lock (NULL: the algorithm cannot tell): the first `peek` bytes of the
     * line, READ before and after other bytes in one chain (ops of a chain execute in order),
     * show with quiet(before, after) that no exclusive holder was in the line at the first READ
     * and none took it before the second -- so no writer changed what the lock protects between
     * them (docs/locks.md, "Reading without the lock"). */
    uint32_t peek;
    bool (*quiet)(const void *before, const void *after);
};

extern const struct lock_algo lock_alock;  /* ALock: local CPU atomics, remote one-sided verbs */
extern const struct lock_algo lock_spin;   /* RDMA CAS spinlock, loopback for local locks */
extern const struct lock_algo lock_mcs;    /* RDMA MCS queue lock, loopback for local locks */
extern const struct lock_algo lock_dslr;   /* DSLR: FA tickets {nX,nS,maxX,maxS}, leases */
extern const struct lock_algo lock_dslr_u; /* DSLR with update locks (six 10-bit counters) */
extern const struct lock_algo lock_drtm;   /* DrTM: CAS for both modes, leases for shared */
extern const struct lock_algo lock_rof;    /* retry-on-fail: CAS exclusive, FA shared */
extern const struct lock_algo lock_trad;   /* an RPC lock manager on the owner, FIFO queues */
extern const struct lock_algo lock_rwlock; /* rdkv's row lock: DSLR tickets with locality */
extern const struct lock_algo lock_dmcs;   /* D-MCS: the HPDC'16 paper's name for mcs */
extern const struct lock_algo lock_fompi_rw; /* foMPI's RW lock: rof's word, polled before retry */
extern const struct lock_algo lock_rma_mcs; /* RMA-MCS: per-node MCS queues under a cluster one */
extern const struct lock_algo lock_rma_rw;  /* RMA-RW: RMA-MCS for writers, counters for readers */

#define LOCK_RELEASE_OPS 4

/* Releases n held locks of one lock thread together: the chains of those whose algorithm
 * splits its release (release_post) are all in flight before it waits, so locks on other nodes
 * cost about one round trip in all rather than one each; the others are released one by one.
 * 0, RDKV_ETIMEDOUT if some lease had run out, or the first other error; every handle is left
 * not held. */
int lock_release_many(struct lock_handle *const *hs, unsigned n);

/* Releases n held dslr locks with one round trip per node for the plain releases (the range
 * locks built of DSLR words use it). 0, RDKV_ETIMEDOUT if some lease had run out, or the first
 * fabric error; every handle is left not held. */
int lock_dslr_release_all(struct lock_handle *hs, unsigned n);

/* The transaction layer's default row lock. rwlock earned it (docs/benchmarks.md, "DSLR, its
 * baselines and rwlock"): its spin model passes and it meets its targets against dslr (3x at 95%
 * locality, within 20% at 0%). dslr is the fallback should either stop holding. */
#define LOCK_ROW_DEFAULT "rwlock"

/* The lock layer's RPC message types (LOCK_RPC_*, RANGE_RPC_*) are in rdma/rpc_types.h. */

/* The trad lock manager of a node: serve it (registers its RPC handlers and starts its sweeper
 * thread; lease as for DSLR), stop it before fab_close (waiters get RDKV_ESHUTDOWN), free it
 * after. A node that does not serve it answers trad requests RDKV_ENOHANDLER. */
struct trad_mgr;
struct trad_mgr *lock_trad_serve(struct fabric *f, int64_t lease_ns);
void lock_trad_stop(struct trad_mgr *m);
void lock_trad_free(struct trad_mgr *m);

/* By name ("alock", "dslr", ...), or NULL. */
const struct lock_algo *lock_algo_find(const char *name);
/* The algorithm whose lock_algo.id is id (NULL: none). */
const struct lock_algo *lock_algo_by_id(unsigned id);
/* Comma-separated names, for --help texts: every algorithm's, or (lock_algo_txn_names) those
 * that can serve transactions (no queue_wait). */
const char *lock_algo_names(void);
const char *lock_algo_txn_names(void);

/* Tunables; lock_cfg_init gives the defaults. */
struct lock_cfg {
    int64_t alock_local_budget;   /* default 5: local handovers before yielding to remote */
    int64_t alock_remote_budget;  /* default 20 */
    int64_t spin_backoff_min_ns;  /* spin, drtm, rof: first back-off after a failed try (1 us) */
    int64_t spin_backoff_max_ns;  /* default 64 us */
    int64_t lease_ns;             /* dslr, rwlock: a holder's lease (default 10 ms); waiters
                                     reset a lock whose counters did not move for 2 leases */
    int64_t dslr_omega_ns;        /* dslr poll unit per ticket ahead; 0: the measured round trip */
    int64_t dslr_backoff_r_ns;    /* truncated exponential back-off unit (10 us) ... */
    int64_t dslr_backoff_max_ns;  /* ... and cap (10 ms) */
    int64_t drtm_lease_ns;        /* drtm: a shared holder's lease (default 1 ms) */
    int64_t rwlock_local_budget;  /* rwlock: grants before a cohort yields priority (5) */
    int64_t rwlock_remote_budget; /* default 20 */
    int64_t dslr_max_slots;       /* dslr: the most tickets one request may take, 1..8 (default
                                     LOCK_DSLR_MAX_SLOTS); waiters' patience grows with the tickets
                                     ahead up to this many leases, so 1 (no multi-slot leasing, as
                                     transactions use it) lets a dead holder go after two leases */
    /* rma-mcs, rma-rw (docs/rma-locks.md) */
    int64_t rma_tl2;          /* T_L,2: consecutive writer entries within a node (default 50) */
    int64_t rma_tl1;          /* T_L,1: consecutive passes of the cluster queue between nodes
                                 before the readers' turn (rma-rw; default 20) */
    int64_t rma_tr;           /* T_R: readers per counter per READ phase (default 1000) */
    int64_t rma_dc_nodes;     /* a counter host every k-th node (default 1) ... */
    int64_t rma_dc_per_node;  /* ... with this many counters, 1..4 (default 1) */
};
void lock_cfg_init(struct lock_cfg *cfg);

/* What a thread's locks went through (benchmarks report them). */
struct lock_stats {
    uint64_t resets;        /* lease-expiry resets this thread performed */
    uint64_t aborts;        /* acquires that returned RDKV_EABORTED */
    uint64_t timeouts;      /* acquires that returned RDKV_ETIMEDOUT */
    uint64_t lease_expired; /* releases after the lease had run out */
    uint64_t overflow_resets; /* counter resets at COUNT_MAX this thread completed */
    uint64_t stale_grants;  /* grants given up: what showed them was older than the lease allows */
    uint64_t dies;          /* wait-die: requests that gave up because an older one was there */
};

/* ---------------------------------------------------------------------------------------------
 * Per-thread lock state. A queue lock needs one descriptor per lock a thread holds or waits for;
 * descriptors are 64-byte lines in the thread's own node arena (so peers can write into them),
 * taken from a per-thread slab of LOCK_DESCS. A thread that holds more takes further slabs of
 * the node's (a transaction may hold up to LOCK_THREAD_SLABS * LOCK_DESCS queue locks), so the
 * region stays small while a few threads hold many. */
#define LOCK_DESCS 64
#define LOCK_THREAD_SLABS 8
#define LOCK_MAX_THREADS 256 /* slabs per node */

struct lock_abandoned; /* tickets given up at a deadline, released when their turn comes */

struct lock_thread {
    struct fabric *f;
    struct fab_ctx *c;
    uint16_t node;
    uint32_t id;          /* cluster-unique, nonzero: (node << 16 | slab) + 1 */
    unsigned slab;
    rptr descs;           /* this thread's first LOCK_DESCS descriptors */
    unsigned nslabs;      /* slabs taken: slab_ids[0] = slab */
    uint16_t slab_ids[LOCK_THREAD_SLABS];
    rptr slab_at[LOCK_THREAD_SLABS];
    uint64_t free_mask[LOCK_THREAD_SLABS]; /* bit i of word k set: descriptor 64k + i is free */
    struct lock_cfg cfg;
    struct lock_stats stats;
    int64_t omega_ns;     /* dslr's poll unit once calibrated */
    struct lock_abandoned *abandoned;
    uint64_t *pin;        /* a pin (rdma/fabric.h fab_pin) for passing a given-up ticket on at
                             the incarnation it was taken in; allocated at the first use */
    uint64_t rng;
    const struct locktable *table; /* rma-mcs, rma-rw: where the locks' sites are */
};

/* dslr: where a waiter last gave up on a word that did not move, so that the next wait on the
 * word (by any thread of the process) resumes the patience clock instead of starting it again:
 * waiters whose deadlines are shorter than the patience could otherwise never reset a dead
 * ticket (locks/ticket.c keeps a table of these). */
struct lock_stuck {
    rptr word;
    uint64_t inc;  /* the incarnation of the word's node it was seen in (0: this node's own) */
    uint64_t n;    /* the serving counters (with liveness bits) it saw */
    int64_t since; /* when they were first seen so */
    int64_t left;  /* when it gave up */
};

/* Attaches the calling thread (which owns c) to the locks of its node. cfg may be NULL. It also
 * sets the thread's timer slack to 1 us, so that lock waits sleep as long as they ask. */
int lock_thread_init(struct lock_thread *t, struct fab_ctx *c, const struct lock_cfg *cfg);
void lock_thread_fini(struct lock_thread *t);

struct lock_handle {
    rptr line;                    /* the 64-byte lock line */
    const struct lock_algo *algo;
    struct lock_thread *t;
    uint8_t mode;                 /* the mode held, 0 when not held */
    uint16_t desc;                /* queue locks: the descriptor in use (desc_rptr) */
    uint16_t slots;               /* dslr: multi-slot leasing, tickets (and leases) held:
                                     1..LOCK_DSLR_MAX_SLOTS */
    uint64_t aux, aux2;           /* algorithm-private (tickets, reset targets) */
    int64_t granted_at;           /* when the lock was granted */
    int64_t lease_ns;             /* the hold's lease, 0 = none (set by the algorithm) */
    uint64_t age;                 /* wait-die (algo->wait_die): the requester's timestamp, smaller
                                     = older, at most LOCK_AGE_MAX; 0 = wait for anyone until the
                                     deadline */
    uint64_t age_word;            /* wait-die: algorithm-private */
    /* algo->read_in_chain: rd_len bytes at rd_at to READ into rd_buf in the acquire's own chain
     * (0: none), as DrTM and FORD read a row with its lock's atomic. After a 0 return, rd_ok
     * says whether the lock's grant was known from that same chain -- the READ executed after
     * the atomics that made the lock ours, so the bytes are what the lock protects. Otherwise
     * (the lock was taken, or became ours only later) they are stale: read again. */
    rptr rd_at;
    void *rd_buf;
    uint32_t rd_len;
    bool rd_ok;
};
#define LOCK_AGE_MAX ((1ull << 56) - 1)

static inline void lock_handle_init(struct lock_handle *h, struct lock_thread *t,
                                    const struct lock_algo *a, rptr line)
{
    h->line = line;
    h->algo = a;
    h->t = t;
    h->mode = 0;
    h->desc = 0;
    h->slots = 1;
    h->aux = h->aux2 = 0;
    h->granted_at = 0;
    h->lease_ns = 0;
    h->age = 0;
    h->age_word = 0;
    h->rd_len = 0;
    h->rd_ok = false;
}
/* Takes the lock in mode m by the deadline (lock_algo.acquire), counted in the process's
 * metrics by algorithm: acquires, waits, timeouts, aborts, resets (common/metrics.h). */
int lock_acquire(struct lock_handle *h, enum lock_mode m, int64_t deadline);
static inline int lock_release(struct lock_handle *h) { return h->algo->release(h); }
static inline int lock_upgrade(struct lock_handle *h, int64_t deadline)
{
    return h->algo->upgrade ? h->algo->upgrade(h, deadline) : RDKV_ENOTSUP;
}
/* True while a held lock's lease still covers the holder, with a quarter lease to spare (a
 * transaction checks this before it commits). Algorithms without leases always hold. */
bool lock_lease_ok(const struct lock_handle *h);
/* Extends a held lock's lease (algo->refresh): 0 (also for a hold without a lease),
 * RDKV_ENOTSUP (its lease cannot be extended), RDKV_ETIMEDOUT (it had run out), or a fabric
 * error. */
int lock_refresh(struct lock_handle *h);
/* The name of a hold, for the owner's holds_x check: what the algorithm knows the hold by
 * (a ticket lock's ticket word, spin's holder id, the trad manager's token). */
static inline uint64_t lock_token(const struct lock_handle *h) { return h->aux; }
/* algo->keep_x and algo->release_x, or RDKV_ENOTSUP where there are none (the owner's only). */
int lock_keep_x(const struct lock_algo *a, struct lock_thread *t, rptr line, uint16_t holder,
                uint64_t token);
int lock_release_x(const struct lock_algo *a, struct lock_thread *t, rptr line, uint16_t holder,
                   uint64_t token);
/* algo->holds_x, or RDKV_ENOTSUP where there is none. */
int lock_holds_x(const struct lock_algo *a, struct fabric *f, rptr line, uint16_t holder,
                 uint64_t token);
/* Releases, on the thread's behalf, tickets it gave up at a deadline once their turn has come.
 * Every acquire calls it; a thread that stops taking locks should call it now and then. */
void lock_thread_poll(struct lock_thread *t);
/* True while the thread has given-up tickets that lock_thread_poll has yet to pass on. */
static inline bool lock_thread_owes(const struct lock_thread *t) { return t->abandoned != NULL; }
/* Hands the tickets `from` gave up over to `to` (a thread of the same node), whose
 * lock_thread_poll then passes them on: for threads that may go idle while a given-up ticket
 * still waits for its turn (everyone behind it would wait for a lease reset). The caller keeps
 * both threads out of their lock calls meanwhile. */
void lock_thread_hand_over(struct lock_thread *from, struct lock_thread *to);
/* Forgets the given-up tickets without passing them on (the node is stopping: leases recover
 * them). */
void lock_thread_drop_abandoned(struct lock_thread *t);

/* ---------------------------------------------------------------------------------------------
 * The lock table: `total` locks partitioned equally across the nodes (node n owns locks
 * [first(n), first(n+1))). Each entry is 128 bytes: the 64-byte lock line, then a 64-byte data
 * line that tests and benchmarks use as the critical section's data. All-zero lines are free
 * locks for every algorithm. */
#define LOCKTABLE_ENTRY 128
#define LOCKTABLE_MAX_PER_NODE 16384

struct locktable {
    unsigned nodes;
    uint32_t total;
    rptr base[CLUSTER_MAX_NODES];
    rptr rma[CLUSTER_MAX_NODES]; /* each node's "lockrma" region: the RMA locks' sites */
    uint64_t unreachable; /* bit n: node n did not answer at open; its locks fail RDKV_EUNAVAILABLE */
};

/* Reserves (once) and zeroes this node's part of the table; no lock of it may be in use. */
int locktable_reset(struct fabric *f, uint32_t total);
/* Finds every node's part (one-sided READs of their arena headers). A node that is down is noted
 * in lt->unreachable rather than failing the open, so that locks homed elsewhere stay usable;
 * operations on its locks then fail with RDKV_EUNAVAILABLE from the fabric. Fails only when no
 * node answers or on another error. */
int locktable_open(struct locktable *lt, struct fab_ctx *c, uint32_t total);
uint32_t locktable_count(const struct locktable *lt, uint16_t node);
/* The global index of the lock whose line is `line` (node n's locks follow those of nodes < n),
 * or UINT32_MAX when line is not a lock line of the table. */
uint32_t locktable_index(const struct locktable *lt, rptr line);
/* The RMA locks (rma-mcs, rma-rw) keep a 64-byte site per lock on every node for the table's
 * first LOCK_RMA_MAX locks; a thread that takes them names the table first. */
#define LOCK_RMA_MAX 4096
static inline void lock_thread_use_table(struct lock_thread *t, const struct locktable *lt)
{
    t->table = lt;
}
static inline rptr locktable_line(const struct locktable *lt, uint16_t node, uint32_t i)
{
    return rptr_add(lt->base[node], (uint64_t)i * LOCKTABLE_ENTRY);
}
static inline rptr locktable_data(const struct locktable *lt, uint16_t node, uint32_t i)
{
    return rptr_add(locktable_line(lt, node, i), LOCK_LINE);
}

/* ---------------------------------------------------------------------------------------------
 * Waiting. lock_wait_change waits until the 64-bit word at w no longer holds v: it spins for a
 * microsecond or two, then sleeps in futex_wait with timeouts growing from 20 us to 128 us, so
 * that a local writer who calls lock_wake wakes it at once and a NIC writer (who cannot wake
 * anyone) is seen within the timeout. *sleeping (may be NULL) is set while it sleeps, so
 * writers can skip the wake-up syscall when nobody sleeps. Returns 0 or RDKV_ETIMEDOUT. */
int lock_wait_change(uint64_t *w, uint64_t v, uint32_t *sleeping, int64_t deadline);
void lock_wake(uint64_t *w, uint32_t *sleeping);
/* The same for a 32-bit word that several threads wait on: lock_nap counts itself in *sleepers
 * and sleeps (at most ns) while *w == seen; lock_wake_all wakes every sleeper, and costs no
 * system call when none sleeps. Both are full fences, so a change made before lock_wake_all is
 * either seen by the sleeper's re-check or followed by its wake-up. */
void lock_nap(uint32_t *w, uint32_t seen, uint32_t *sleepers, int64_t ns);
void lock_wake_all(uint32_t *w, uint32_t *sleepers);
/* The retrying baselines' back-off (spin, drtm, rof): sleeps (or, under 20 us, spins) a random
 * time in [b/2, b], then doubles b up to cfg.spin_backoff_max_ns. Start with
 * b = cfg.spin_backoff_min_ns and any nonzero seed. */
void lock_retry_backoff(struct lock_thread *t, int64_t *b, uint64_t *seed);
/* A short pause between polls that cannot be woken: spins first, then yields, then sleeps
 * 1 us .. 128 us (for pollers of words only a NIC writes). round counts up from 0. */
void lock_backoff(unsigned round);
/* Waits (of those above) the calling thread or task has begun: a count that changes across a
 * call tells that the call waited. */
unsigned lock_waits_seen(void);

#endif
