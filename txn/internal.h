/* The transaction layer's inside, shared by its files: the node's environment (struct txn_env),
 * the commit messages' encoding (wops.c), and the interfaces of the participant (part.c, its
 * outcome memory in outcome.c), the coordinator's decision records (decision.c), the asker
 * (indoubt.c) and recovery with the keeper (recover.c). The coordinator's own state -- a
 * transaction, its entries, a worker -- is in coord.h, which only the coordinator's files use.
 * The files call each other downwards only (no two both ways):
 *     env -> indoubt, recover -> ops, commit, part, decision, core
 *     commit -> fence, part, decision, core;  fence -> decision, core
 *     part -> outcome, decision, wops;  ops, scan -> locate -> core */
#ifndef RDKV_TXN_INTERNAL_H
#define RDKV_TXN_INTERNAL_H

#include "txn/txn.h"

#include "common/clock.h"
#include "common/pack.h"

#include <pthread.h>

#define RESOLVE_RPC_TIMEOUT_NS (500 * NS_PER_MS) /* RESOLVE and QUERY, one ask */
#define DELIVER_AGAIN_NS (250 * NS_PER_MS)      /* a logged decision's COMMIT, sent again */
#define COMMIT_RPC_TIMEOUT_NS (5 * NS_PER_S)    /* txn_cfg.commit_timeout_ns's default */
#define TXID_MASK ((1ull << 48) - 1)            /* a txid: node:16 | TXID_MASK */

/* Test hooks (RDKV_TEST_FAULT, env.c fault_parse says what each does). */
enum txn_fault {
    TXN_FAULT_NONE,
    TXN_FAULT_EXIT_AFTER_DECISION, /* decision-exit@N: the coordinator, after its DECISION */
    TXN_FAULT_EXIT_AFTER_PREPARE,  /* prepare-exit@N: a participant, after its PREPARE */
    TXN_FAULT_EXIT_AT_COMMIT,      /* commit-exit@N: a participant, on a COMMIT, before its
                                      COMMIT record */
    TXN_FAULT_FAIL_COMMIT,         /* commit-fail@N: a participant's COMMIT record */
    TXN_FAULT_FAIL_PREPARE,        /* prepare-fail@N: a participant's PREPARE record */
    TXN_FAULT_FAIL_DECISION,       /* decision-fail@N: the coordinator's DECISION (its sync) */
    TXN_FAULT_FAIL_OWN_COMMIT,     /* own-commit-fail@N: the coordinator's own share's COMMIT */
    TXN_FAULT_COORD_OOM,           /* coord-oom@N: a logged decision's delivery memory */
    TXN_FAULT_QUERY_SLOW,          /* query-slow@N: TXN_RPC_QUERY answered 600 ms late */
    TXN_FAULT_INSTALL_SLOW,        /* install-slow@N: every commit installs 50 ms after its
                                      COMMIT record is durable */
    TXN_FAULT_SHIP_BUSY,           /* ship-busy@N: replicated, a participant's next COMMIT of
                                      a prepared transaction finds its ship failed once, as a
                                      zombie primary's does (it stays prepared, answers busy) */
    TXN_FAULT_DECIDE_UNKNOWN,      /* decide-unknown@N: replicated, the coordinator's next
                                      DECIDE reaches its backups but is taken for failed, as
                                      one a backup did not answer is */
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
    struct store *st;   /* the participant's: the store of the key's partition (part_prepare) */
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
    bool shipped;     /* its PREPARE was sent to the backups: an abort sends FORGET */
    bool listed;      /* in the prepared list (part_record), under pmu */
    bool committing;  /* claimed for its outcome (part_take_begin): still listed, so that a
                         checkpoint finds it until its COMMIT is installed, and "busy" to a
                         COMMIT meanwhile (under pmu) */
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

/* The outcome memory (outcome.c): a two-phase commit committed here as a participant, until its
 * coordinator has forgotten it. At most OUTC_MAX (PREPAREs are refused as busy before that);
 * first asked about OUTC_ASK_NS after the commit, then every OUTC_AGAIN_NS. */
struct outcome {
    uint64_t txid; /* 0: a free slot */
    int64_t due;
};
#define OUTC_MAX (1u << 18)
#define OUTC_ASK_NS (250 * NS_PER_MS)
#define OUTC_AGAIN_NS NS_PER_S

/* Where a partition is served (txn_env_route): its primary's node, and on that node the store
 * holding it -- this node's st when the partition is served here (NULL otherwise), and the
 * store's name for peers (empty: "store", the node's own partition). Written by the replication
 * layer on a configuration change, read by every worker (node and st atomic: st is set before
 * node names this node, and a partition is never moved to this node's other store). */
struct txn_route {
    uint16_t node;
    uint32_t moves; /* (atomic) how often node changed: a transaction that saw another count
                       locked or scanned at a route since moved (txn_leases_ok), even if it
                       moved back since */
    struct store *st;
    bool gate; /* (atomic) served here, but only to the adoption's workers (txn_env_adopt) */
    char name[STORE_NAME_MAX + 1];
};

struct lock_janitor;
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
    /* With a data directory, a txid's low 48 bits come from this counter (atomic), below a limit
     * reserved durably (txreserve, txn_env_set_txids), so that no process of the node ever hands
     * out an id an earlier one did, whatever its clock says; without, from the worker and its
     * sequence (txreserve NULL) */
    uint64_t txseq, txlimit;
    int (*txreserve)(void *arg, uint64_t limit);
    void *txarg;
    pthread_mutex_t txmu; /* (one reservation at a time) */
    int fault; /* enum txn_fault: a test hook (RDKV_TEST_FAULT, read by txn_env_set_wal) */
    uint8_t *down; /* per node, atomic loads/stores */
    struct txn_route *route; /* per partition (n of them) */
    uint32_t next_worker;
    struct loc *loc; /* the location cache of rows of other nodes (locate.c), shared lock-free */
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
    /* the outcome memory (outcome.c), under pmu */
    struct outcome *outc;
    size_t outc_cap, outc_n;
    uint64_t prep_refused, indoubt_dropped, indoubt_committed; /* atomics */
    /* The coordinator's memory for TXN_RPC_QUERY: its transactions in two-phase commit (from
     * before their PREPAREs until every participant answered or was resolved), under cmu. */
    pthread_mutex_t cmu;
    struct coord_rec *crecs;
    /* shutting down: RPC handlers in flight, and whether new ones are turned away */
    int inflight;
    bool closing;
    struct txn_guard guards[TXN_GUARDS];
    /* the janitor (locks/janitor.h): passes on the tickets workers gave up, and keeps the
     * locks of fences (fence.c) */
    struct lock_janitor *jan;
    /* The keeper (recover.c) and the asker (indoubt.c), each woken by its kick flag (imu) when
     * a PREPARE is kept while they have none to look at, a delivery or release is due, or an
     * outcome was learned */
    pthread_t kthr, athr;
    bool kstarted, astarted, istop, kkick, akick;
    int64_t kwake, awake; /* when each next looks by itself (INT64_MAX: not before a kick) */
    pthread_mutex_t imu;
    pthread_cond_t kcv, acv;
    /* outcomes of transactions re-established from the log, learned by the asker, for the
     * keeper to settle (under pmu) */
    struct rdone *rdone;
    /* txn_env_recover hands the in-doubt transactions found in the log to the keeper, which
     * locks their rows; rcv says it is done (under imu) */
    struct txn_recovery *recov;
    int recov_rc;
    pthread_cond_t rcv;
};

/* An outcome the asker learned for a transaction re-established from the log. */
struct rdone {
    struct rdone *next;
    uint64_t txid;
    bool commit;
};

/* Wakes those of the keeper and the asker whose next look comes after `keep` (the keeper) or
 * `ask` (the asker): a PREPARE kept, due to be kept alive and asked about at those times. */
static inline void txn_indoubt_due(struct txn_env *e, int64_t keep, int64_t ask)
{
    pthread_mutex_lock(&e->imu);
    if (keep < e->kwake) {
        e->kkick = true;
        pthread_cond_signal(&e->kcv);
    }
    if (ask < e->awake) {
        e->akick = true;
        pthread_cond_signal(&e->acv);
    }
    pthread_mutex_unlock(&e->imu);
}

/* Wakes both: a delivery is pending, a hold is to be released, an outcome was learned, or a
 * coordinator is talking to us again. */
static inline void txn_indoubt_kick(struct txn_env *e)
{
    pthread_mutex_lock(&e->imu);
    e->kkick = e->akick = true;
    pthread_cond_signal(&e->kcv);
    pthread_cond_signal(&e->acv);
    pthread_mutex_unlock(&e->imu);
}

/* The keeper's or the asker's sleep, e->imu held: until `next` (INT64_MAX: until woken), with
 * *wake saying until when while it sleeps (INT64_MAX while it runs: whatever comes due
 * meanwhile wakes it, txn_indoubt_due). */
static inline void txn_indoubt_sleep(struct txn_env *e, pthread_cond_t *cv, int64_t *wake,
                                     int64_t next)
{
    *wake = next;
    if (next == INT64_MAX) {
        pthread_cond_wait(cv, &e->imu);
    } else {
        struct timespec until = clock_ts(next);
        pthread_cond_timedwait(cv, &e->imu, &until);
    }
    *wake = INT64_MAX;
}

/* Whether the test hook `fault` is armed here (txn_fault_take: and disarms a one-shot one). */
static inline bool txn_fault_is(const struct txn_env *e, int fault)
{
    return __atomic_load_n(&e->fault, __ATOMIC_RELAXED) == fault;
}

static inline bool txn_fault_take(struct txn_env *e, int fault)
{
    int want = fault;
    return __atomic_compare_exchange_n(&e->fault, &want, TXN_FAULT_NONE, false,
                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/* Whether node is marked down (txn_env_set_down; txn_env_is_down for the layers above). */
static inline bool txn_down(const struct txn_env *e, uint16_t node)
{
    return node < e->n && __atomic_load_n(&e->down[node], __ATOMIC_ACQUIRE);
}

/* The node that serves partition p now, and the store holding it when that is this node (NULL
 * when it is not, or no more). */
static inline uint16_t txn_owner(const struct txn_env *e, unsigned p)
{
    return __atomic_load_n(&e->route[p].node, __ATOMIC_ACQUIRE);
}
/* Partition p's route's move count (struct txn_route.moves). Read before txn_owner, it is
 * never newer than the node read after it. */
static inline uint32_t txn_route_moves(const struct txn_env *e, unsigned p)
{
    return __atomic_load_n(&e->route[p].moves, __ATOMIC_ACQUIRE);
}
static inline struct store *txn_pstore(const struct txn_env *e, unsigned p)
{
    if (p >= e->n || __atomic_load_n(&e->route[p].gate, __ATOMIC_ACQUIRE)) return NULL;
    return __atomic_load_n(&e->route[p].st, __ATOMIC_ACQUIRE);
}
/* Whether some partition is gated now (a promotion is taking it over). */
static inline bool txn_any_gated(const struct txn_env *e)
{
    for (unsigned p = 0; p < e->n; p++)
        if (__atomic_load_n(&e->route[p].gate, __ATOMIC_ACQUIRE)) return true;
    return false;
}
/* The same for a worker of the adoption (adopting: it may use a gated partition). */
static inline struct store *txn_pstore_as(const struct txn_env *e, unsigned p, bool adopting)
{
    if (p >= e->n) return NULL;
    if (!adopting) return txn_pstore(e, p);
    return __atomic_load_n(&e->route[p].st, __ATOMIC_ACQUIRE);
}
/* The node that answers for txid's coordinator: the coordinator itself, or the node serving its
 * own partition once it was removed (the promoted copy holds its replicated decisions). */
static inline uint16_t txn_coord_node(const struct txn_env *e, uint64_t txid)
{
    uint16_t c = (uint16_t)(txid >> 48);
    return c < e->n ? txn_owner(e, c) : c;
}

/* ------------------------------------------------------------------------------------------ */
/* The participant (part.c). */

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
/* The logged two-phase commit (docs/transactions.md, "The logged commit"). A PREPARE record:
 * u16 coordinator, then the writes (storage/wal.h's payload). part_log_prepare appends it (and
 * waits when wait) and marks p logged. */
int part_log_prepare(struct txn_env *e, struct prepared *p, bool wait);
/* Sends p's PREPARE to its partitions' backups (txn_cfg.ship_rec, as `kind`: TXN_SHIP_PREPARE,
 * or TXN_SHIP_DECIDE for a coordinator's own share with its decision) and waits: 0, or why not
 * (p is marked shipped either way: its abort sends FORGET). */
int part_ship_prepare(struct txn_env *e, struct prepared *p, int kind);
/* Records p as prepared here (the list the in-doubt thread and the decisions look at). */
void part_record(struct txn_env *e, struct prepared *p);
/* Takes the listed transaction txid (not one being committed) out of the list (NULL if
 * unknown); with rec, also one re-established from the log. pmu held. */
struct prepared *part_take_locked(struct txn_env *e, uint64_t txid, bool rec);
/* Claims the listed transaction txid for its outcome, as a request in progress (ip; ended by
 * part_finish): it stays listed, marked committing. NULL, with nothing begun, if it is not
 * prepared here or is being settled already. */
struct prepared *part_take_begin(struct txn_env *e, uint64_t txid, struct inprog *ip);
/* Commits (the fence allowing) or aborts a transaction claimed with part_take_begin: 0, or
 * RDKV_EABORTED (the fence refused the commit), or RDKV_EBUSY (the log refused its COMMIT
 * record: it stays prepared). */
int part_finish(struct txn_env *e, struct prepared *p, bool commit, struct inprog *ip);
/* Whether txid is a recovered in-doubt transaction here (pmu held). */
bool part_recovered_locked(struct txn_env *e, uint64_t txid);
/* p's coordinator's holds here (malloc'd; NULL for no memory). */
struct held *part_held_of(const struct prepared *p);
/* p, listed, leaves the list: settled (committed: into the outcome memory). pmu held. */
void part_settle_locked(struct txn_env *e, struct prepared *p, bool committed);
/* p's writes as a PREPARE record's payload (u16 coordinator, the writes): malloc'd, its length
 * in *len; NULL for no memory. */
uint8_t *part_prepare_payload(const struct prepared *p, size_t *len);
/* Keeps (or, release, releases) h's holds, on the keeper (e->ilt). */
void part_holds_do(struct txn_env *e, const struct held *h, bool release);
/* After p was settled on the word of its coordinator's incarnation `by`: when that is not the
 * process that took p's holds (coord_inc), hand them to the in-doubt thread to release. */
void part_release_if_gone(struct txn_env *e, struct held *h, uint64_t coord_inc, uint64_t by);
/* The outcome memory: txid committed here as a participant (add: pmu held; due: when to ask
 * its coordinator first); whether it is known; the entries due to be asked about (their due
 * moved on; *next lowered to the next one's); forgetting one its coordinator forgot. */
void outc_add_locked(struct txn_env *e, uint64_t txid, int64_t due);
bool outc_known_locked(const struct txn_env *e, uint64_t txid);
bool part_outcome_known(struct txn_env *e, uint64_t txid);
unsigned part_outcomes_due(struct txn_env *e, int64_t now, uint64_t *tx, unsigned max,
                           int64_t *next);
void part_outcome_forget(struct txn_env *e, uint64_t txid);
int part_register(struct txn_env *e);

/* SCAN request: u32 blen, begin, u8 has_end, u32 elen, end, u32 alen, after, u8 has_after,
 * u32 limit (rows in this page; at most TXN_SCAN_PAGE). Reply: u8 more, u32 n, then n times
 * {u64 row, u32 klen, key}. */
#define TXN_SCAN_PAGE 256u
#define TXN_SCAN_PAGE_BYTES (1u << 20)

/* A QUERY asks about at most this many txids of one coordinator. */
#define TXN_QUERY_MAX 1024u

/* One RPC whose request is a txid (QUERY, COMMIT) from a background thread: one ask, bounded
 * by RESOLVE_RPC_TIMEOUT_NS. */
int txn_call_txid(struct fab_ctx *c, uint16_t node, uint16_t type, uint64_t txid,
                  struct fab_buf *resp);

/* ------------------------------------------------------------------------------------------ */
/* The coordinator's records of its transactions in two-phase commit (decision.c). */

/* A coordinator's record of a transaction in two-phase commit. */
struct coord_rec {
    struct coord_rec *next;
    uint64_t txid;
    uint8_t state;  /* enum txn_state */
    unsigned refs;  /* the commit running, each fence kept with a commit decision, and the
                       delivery of a logged commit decision (until its END is durable) */
    /* a logged commit decision's participants that have not confirmed it yet (allocated, with
     * all of them, before the DECISION is logged: coord_decide): the in-doubt thread sends them
     * COMMIT again; at 0 the END record is logged (end_lsn), and the record goes once the END
     * is durable (UINT64_MAX: the END could not be logged; the record stays) */
    uint16_t *pend;
    unsigned npend;
    int64_t next_try;
    uint64_t end_lsn;
    bool shipped; /* its commit decision is on the backups of this node's partition (DECIDE) */
};
/* A record, from before the PREPAREs go out: 0 or RDKV_ENOMEM. */
int coord_begin(struct txn_env *e, uint64_t txid);
/* state: TXN_STATE_COMMITTED once decided so (before the first COMMIT); refs: +1 for a fence
 * kept with the commit decision, -1 when it or the commit ends (the record goes at 0). */
void coord_update(struct txn_env *e, uint64_t txid, uint8_t state, int refs);
/* What the coordinator knows of txid (enum txn_state): unknown once its END is durable. */
uint8_t coord_state(struct txn_env *e, uint64_t txid);
/* coord_state as TXN_RPC_QUERY answers it: "active" for a removed coordinator's transaction
 * while its partition's promotion here is still taking its decisions over. */
uint8_t coord_answer(struct txn_env *e, uint64_t txid);
/* A promotion took over txid's commit decision from its removed coordinator (txn_env_adopt):
 * answered committed from now on. */
int coord_adopt(struct txn_env *e, uint64_t txid);
/* txid's commit decision is on the backups (a DECIDE): forgotten there when the record goes. */
void coord_shipped(struct txn_env *e, uint64_t txid);
/* Before a logged commit decision: the memory it needs until every participant has it, taken
 * now, so that nothing can fail after the DECISION is durable. 0 or RDKV_ENOMEM (abort). */
int coord_decide(struct txn_env *e, uint64_t txid, const uint16_t *nodes, unsigned nr);
/* Makes the commit DECISION naming the participants durable (the coordinator's own share's
 * PREPARE appended just before is covered by the same wait): 0, or the log's refusal (nothing
 * written: abort cleanly). A DECISION appended but not made durable stops the node. */
int coord_log_decision(struct txn_env *e, uint64_t txid, const uint16_t *nodes, unsigned nr);
/* Appends an END for txid (coordinator or participant), not waited for: its LSN, 0 if the log
 * refused it. */
uint64_t txn_log_end(struct txn_env *e, uint64_t txid);
/* The decision is commit (durable first, with a log): what a query is told from now on. */
void coord_decided(struct txn_env *e, uint64_t txid);
/* One participant confirmed a logged decision's commit (it answered 0). */
void coord_delivered(struct txn_env *e, uint64_t txid, uint16_t node);
/* The deliveries due at now (up to max, into tx and nd): how many; *next gets when the next
 * ones are due (INT64_MAX: none). */
unsigned coord_due(struct txn_env *e, int64_t now, uint64_t *tx, uint16_t *nd, unsigned max,
                   int64_t *next);
/* The commit decisions found in the log (txn_env_recover): records to deliver again. */
int coord_recovered(struct txn_env *e, struct txn_recovery *r, char *err, size_t errcap);
/* How many logged commit decisions wait for a participant's confirmation. */
unsigned coord_undelivered(struct txn_env *e);
/* Frees every record (the layer closes). */
void coord_free_all(struct txn_env *e);

/* ------------------------------------------------------------------------------------------ */
/* Recovery (recover.c): the in-doubt thread and the transactions re-established from the log. */

/* What the replay of the redo log found of two-phase commits (txn_recovery_rec builds it record
 * by record; txn_env_recover installs it). */
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
    bool adopt; /* a promotion's (txn_env_adopt): this node's own PREPAREs are locked too, and
                   its workers may use the gated partition */
    struct rprep *preps; /* PREPAREs with no COMMIT or END after them */
    struct rdec *decs;   /* commit DECISIONs with no END after them */
    uint64_t *outs;      /* commits this node took part in (for the outcome memory) */
    size_t nouts, capouts;
};

/* Records a PREPARE (its writes copied) in r, replacing one of the same txid. */
int txn_recovery_add_prep(struct txn_recovery *r, uint64_t txid, uint16_t coord,
                          const uint8_t *writes, uint32_t len);
/* Hands r's in-doubt PREPAREs to the keeper, which locks their rows, and waits (r is freed). */
int txn_recovery_hand(struct txn_env *e, struct txn_recovery *r);

/* The keeper's and the asker's bodies (env.c starts them). */
void *txn_keeper_main(void *arg);
void *txn_asker_main(void *arg);

#endif
