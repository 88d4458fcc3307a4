/* The transaction layer's inside, shared by the coordinator (txn.c) and the participant
 * (part.c): the node's environment and the commit messages' encoding. */
#ifndef RDKV_TXN_INTERNAL_H
#define RDKV_TXN_INTERNAL_H

#include "txn/txn.h"

#include "common/clock.h"
#include "common/pack.h"

#include <pthread.h>

#define RESOLVE_RPC_TIMEOUT_NS (500 * NS_PER_MS) /* RESOLVE and QUERY, one ask */
#define DELIVER_AGAIN_NS (250 * NS_PER_MS)      /* a logged decision's COMMIT, sent again */

/* Test hooks of the logged commit: the node _exits right after the record is durable. */
enum txn_fault {
    TXN_FAULT_NONE,
    TXN_FAULT_EXIT_AFTER_DECISION, /* decision-exit@N: the coordinator, after its DECISION */
    TXN_FAULT_EXIT_AFTER_PREPARE,  /* prepare-exit@N: a participant, after its PREPARE */
    TXN_FAULT_EXIT_AT_COMMIT,      /* commit-exit@N: a participant, on a COMMIT, before its
                                      COMMIT record */
};

/* One write of a commit, as the coordinator sends it to the key's owner. */
enum wop_kind { WOP_UPDATE = 1, WOP_INSERT = 2, WOP_DELETE = 3 };

struct wop {
    uint8_t kind;
    rptr row;          /* UPDATE / DELETE: the row the coordinator holds exclusively */
    uint64_t lock_tok; /* UPDATE / DELETE: lock_token of the coordinator's hold of the row */
    uint64_t range_tok; /* INSERT / DELETE: the token of its exclusive point {key} */
    const uint8_t *key;
    uint32_t klen;
    const uint8_t *val; /* UPDATE / INSERT */
    uint32_t vlen;
};

/* A transaction prepared at this node: its writes staged (memory taken) so that the commit
 * cannot fail. It owns a copy of the request bytes the wops point into. */
struct prepared {
    struct prepared *next;
    uint64_t txid;
    uint16_t coord;
    uint32_t n;
    struct wop *ops;
    struct store_staged *staged; /* per op: UPDATE's staged value, INSERT's row in .row */
    void *bytes;
    size_t charge;    /* a PREPARE's request bytes, counted against the caps (0: not counted) */
    int64_t next_ask; /* when to ask its coordinator about it (a PREPARE kept: in doubt) */
    int64_t next_keep; /* when to keep its coordinator's holds alive next (a PREPARE kept) */
    uint64_t coord_inc; /* the coordinator's incarnation that sent the PREPARE (fab_rpc_src_
                           incarnation): the process whose locks hold its rows here */
    bool logged;      /* its PREPARE record is in the redo log: an abort logs END */
    /* re-established from the log at start (txn_env_recover): no staged ops; its rows are
     * locked by a local transaction of this node (rt on worker rw) holding its writes */
    struct txn_worker *rw;
    struct txn *rt;
    uint32_t wlen; /* ... and its writes (the PREPARE record's payload) in bytes, wlen long */
};

/* A coordinator's hold on a row or key of this node that the participant releases for it, once
 * the coordinator's process that took it is gone (part.c, docs/transactions.md, "How an in-doubt
 * transaction's rows stay locked"). */
struct held {
    struct held *next;
    uint64_t txid;
    uint16_t coord;
    uint32_t n;
    struct held_op {
        uint8_t kind;       /* enum wop_kind: UPDATE, DELETE hold the row; INSERT, DELETE the key */
        rptr row;
        uint64_t lock_tok, range_tok;
    } ops[];
};

/* An RPC handler of the layer and the environment it serves (part.c guards every one). */
struct txn_guard {
    struct txn_env *e;
    fab_rpc_handler fn;
};
#define TXN_GUARDS 7

/* A request being handled by the participant right now (on its handler's stack). */
struct inprog {
    struct inprog *next;
    uint64_t txid;
    bool on; /* in the list */
};
/* The transactions coordinators gave up waiting for, whose late requests are refused: the last
 * TXN_TOMBS of them (a ring). */
#define TXN_TOMBS 4096
#define TXN_IDC 64

/* A transaction whose outcome at one participant is unknown to its coordinator: the locks it
 * holds there are kept (and kept alive) until the participant answers TXN_RPC_RESOLVE or is
 * declared down (txn.c). */
struct txn_fence {
    struct txn_fence *next;
    uint64_t txid;
    uint16_t node;
    uint8_t decision;            /* enum txn_resolve */
    unsigned nlk, nrh;
    struct lock_handle *lk;      /* copies of the row locks' handles */
    struct range_handle **rh;    /* the range handles, taken over */
    uint64_t *pinc;              /* the transaction's incarnations (txn.c t->pinc): its posts
                                    are pinned to node's, where its locks were taken */
    int64_t next_ask, next_refresh;
};
struct txn_env {
    struct fabric *f;
    struct store *st;
    struct range_server *rs;
    struct txn_cfg cfg;
    const struct lock_algo *row;
    const struct range_algo *range;
    struct lock_cfg lcfg;
    uint16_t me;
    unsigned n;
    struct wal *wal; /* the redo log, or NULL (txn_env_set_wal) */
    /* with a redo log, txids are this counter's values (atomic), started at the wall clock's
     * microseconds, so that a restarted coordinator never reuses one its log still names */
    uint64_t txseq;
    int fault; /* enum txn_fault: a test hook (RDKV_TEST_FAULT, read by txn_env_set_wal) */
    uint8_t *down; /* per node, atomic loads/stores */
    uint32_t next_worker;
    struct loc *loc; /* the location cache of rows of other nodes (txn.c), shared lock-free */
    uint64_t ts_last;  /* the last start timestamp's clock part (8 us units, atomic) */
    pthread_mutex_t pmu; /* the prepared list, requests in progress, tombstones */
    struct prepared *prep;
    struct inprog *inprog;
    uint64_t *tombs;     /* TXN_TOMBS txids (allocated at the first), tomb_n used, next at tomb_at */
    unsigned tomb_n, tomb_at;
    struct txn_fence_stats fst; /* atomics */
    struct held *releases; /* holds of coordinators gone, for the in-doubt thread (under pmu) */
    struct lock_thread *ilt; /* the in-doubt thread's, while it runs (its lock_keep_x, release_x) */
    /* PREPAREs kept (under pmu): their request bytes in all and per coordinator (the caps of
     * txn_cfg), and how many */
    uint64_t prep_bytes, *prep_by_coord;
    unsigned prep_kept;
    bool indoubt_armed; /* the in-doubt thread will look at the kept PREPAREs again (pmu) */
    /* the last TXN_IDC transactions committed here on their coordinator's answer to a query: a
     * COMMIT of one that arrives after is answered 0, not "not found" (under pmu) */
    uint64_t idc[TXN_IDC];
    unsigned idc_at;
    uint64_t prep_refused, indoubt_dropped, indoubt_committed; /* atomics */
    /* The coordinator's memory for TXN_RPC_QUERY: its transactions in two-phase commit (from
     * before their PREPAREs until every participant answered or was resolved), under cmu. */
    pthread_mutex_t cmu;
    struct coord_rec *crecs;
    /* shutting down: RPC handlers in flight, and whether new ones are turned away */
    int inflight;
    bool closing;
    struct txn_guard guards[TXN_GUARDS];
    /* The janitor: a thread that takes over the lock tickets a worker gave up at a deadline and
     * passes them on when their turn comes, so that a worker that goes idle after an abort
     * leaves nobody waiting behind its ticket (locks/lock.h, lock_thread_hand_over). */
    pthread_t jan;
    bool jan_started, jstop;
    pthread_mutex_t jmu;
    pthread_cond_t jcv;
    struct lock_thread *jlt; /* the janitor's, while it runs */
    struct txn_fence *fences; /* given to the janitor, under jmu */
    /* The in-doubt thread (part_indoubt_step), woken by ikick when a PREPARE is kept while it
     * has none to look at */
    pthread_t ind;
    bool ind_started, istop, ikick;
    pthread_mutex_t imu;
    pthread_cond_t icv;
    /* txn_env_recover hands the in-doubt transactions found in the log to the in-doubt thread,
     * which locks their rows; rcv says it is done (under imu) */
    struct txn_recovery *recov;
    int recov_rc;
    pthread_cond_t rcv;
};

/* What the replay of the redo log found of two-phase commits (part.c builds it record by
 * record; txn_env_recover installs it). */
struct rprep {
    struct rprep *next;
    uint64_t txid;
    uint16_t coord;
    uint8_t *w; /* the writes (storage/wal.h's payload) */
    uint32_t len;
};
struct rdec {
    struct rdec *next;
    uint64_t txid;
    uint16_t n;
    uint16_t *nodes;
};
struct txn_recovery {
    uint16_t me;
    struct rprep *preps; /* PREPAREs with no COMMIT or END after them */
    struct rdec *decs;   /* commit DECISIONs with no END after them */
};
/* The in-doubt thread's part of txn_env_recover: locks the rows of r's in-doubt transactions
 * with local transactions of c and records them. */
int txn_recover_lock(struct txn_env *e, struct fab_ctx *c, struct txn_recovery *r);

/* Encoding of PREPARE / APPLY: u64 txid, u16 coordinator, u64 incarnation (the participant's
 * that the coordinator's locks and reads there reached: rdma/fabric.h), u32 n, then n times
 * {u8 kind, u64 row, u64 lock token, u64 range token, u32 klen, key, u32 vlen, val}. */
#define TXN_WOP_MIN 33 /* the fewest bytes an op takes */
void txn_wops_pack(struct pack_w *w, uint64_t txid, uint16_t coord, uint64_t inc,
                   const struct wop *ops, uint32_t n);
/* Decodes into ops (malloc'd, pointing into p): 0 or RDKV_EPROTO / RDKV_ETOOBIG / RDKV_ENOMEM. */
int txn_wops_unpack(const void *p, size_t len, uint32_t key_max, uint32_t value_max,
                    uint64_t *txid, uint16_t *coord, uint64_t *inc, struct wop **ops,
                    uint32_t *n);

/* The participant's steps, for a local partition and for the RPC handlers alike. prepare
 * checks the writes -- each names a live row of its key, or a key to insert, and the
 * coordinator still holds its locks (the fence) -- and stages them (taking ownership of ops and
 * bytes, both malloc'd); it returns 0 or a status (nothing staged then). commit checks the fence
 * again and installs (0), or gives everything back (RDKV_EABORTED: a lock was gone); either way
 * p is freed. */
int part_prepare(struct txn_env *e, uint64_t txid, uint16_t coord, struct wop *ops, uint32_t n,
                 void *bytes, struct prepared **out);
int part_commit(struct txn_env *e, struct prepared *p);
void part_abort(struct txn_env *e, struct prepared *p);
/* Takes a recorded transaction out of the list (NULL if unknown). */
struct prepared *part_take(struct txn_env *e, uint64_t txid);

/* A coordinator's record of a transaction in two-phase commit (txn.c). */
struct coord_rec {
    struct coord_rec *next;
    uint64_t txid;
    uint8_t state;  /* enum txn_state */
    unsigned refs;  /* the commit running, each fence kept with a commit decision, and the
                       delivery of a logged commit decision (while npend) */
    /* a logged commit decision not yet confirmed by these participants: the in-doubt thread
     * sends them COMMIT again (coord_deliver_step); at 0 the END record is logged */
    uint16_t *pend;
    unsigned npend;
    int64_t next_try;
};
/* One RPC whose request is a txid (QUERY, COMMIT) from a background thread: one ask, bounded
 * by RESOLVE_RPC_TIMEOUT_NS. */
int txn_call_txid(struct fab_ctx *c, uint16_t node, uint16_t type, uint64_t txid,
                  struct fab_buf *resp);
/* The delivery of logged decisions, on the in-doubt thread: returns when it wants to run
 * again (INT64_MAX: nothing pending). */
int64_t coord_deliver_step(struct txn_env *e, struct fab_ctx *c, int64_t now);

/* The logged two-phase commit (docs/transactions.md, "The logged commit"). A PREPARE record:
 * u16 coordinator, then the writes (storage/wal.h's payload). part_log_prepare appends it (and
 * waits when wait) and marks p logged. */
int part_log_prepare(struct txn_env *e, struct prepared *p, bool wait);
/* A recovered in-doubt transaction's outcome (txn.c): commits its writes under the locks it
 * holds, logging COMMIT under its own txid, or aborts and logs END; frees p. */
int txn_recovered_finish(struct txn_env *e, struct prepared *p, bool commit);
/* Refreshes the row locks' leases of a recovered transaction. */
void txn_recovered_refresh(struct prepared *p);
/* Whether txid is a recovered in-doubt transaction here (pmu held). */
bool part_recovered_locked(struct txn_env *e, uint64_t txid);
/* What the coordinator knows of txid (enum txn_state). */
uint8_t coord_state(struct txn_env *e, uint64_t txid);

/* In-doubt transactions, on the in-doubt thread (part.c): asks the coordinators of the PREPAREs kept
 * longer than txn_cfg.indoubt_ns (TXN_RPC_QUERY) and commits or drops them by the answer.
 * Returns when it wants to run again (INT64_MAX: nothing kept). */
int64_t part_indoubt_step(struct txn_env *e, struct fab_ctx *c, int64_t now);
/* The in-doubt thread's wake-up after a PREPARE was kept with none before (txn.c). */
void txn_indoubt_kick(struct txn_env *e);
/* The node that coordinates txid (its top 16 bits). */
static inline uint16_t txn_txid_node(uint64_t txid) { return (uint16_t)(txid >> 48); }
void part_record(struct txn_env *e, struct prepared *p);
int part_register(struct txn_env *e);

/* SCAN request: u32 blen, begin, u8 has_end, u32 elen, end, u32 alen, after, u8 has_after,
 * u32 limit (rows in this page; at most TXN_SCAN_PAGE). Reply: u8 more, u32 n, then n times {u64 row, u32 klen, key}. */
#define TXN_SCAN_PAGE 256u
#define TXN_SCAN_PAGE_BYTES (1u << 20)

#endif
