/* The transaction layer's inside, shared by the coordinator (txn.c) and the participant
 * (part.c): the node's environment and the commit messages' encoding. */
#ifndef RDKV_TXN_INTERNAL_H
#define RDKV_TXN_INTERNAL_H

#include "txn/txn.h"

#include "common/pack.h"

#include <pthread.h>

/* One write of a commit, as the coordinator sends it to the key's owner. */
enum wop_kind { WOP_UPDATE = 1, WOP_INSERT = 2, WOP_DELETE = 3 };

struct wop {
    uint8_t kind;
    rptr row;          /* UPDATE / DELETE: the row the coordinator holds exclusively */
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
};

/* An RPC handler of the layer and the environment it serves (part.c guards every one). */
struct txn_guard {
    struct txn_env *e;
    fab_rpc_handler fn;
};
#define TXN_GUARDS 5

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
    uint8_t *down; /* per node, atomic loads/stores */
    uint32_t next_worker;
    pthread_mutex_t pmu; /* the prepared list */
    struct prepared *prep;
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
};

/* Encoding of PREPARE / APPLY: u64 txid, u16 coordinator, u32 n, then n times {u8 kind, u64 row,
 * u32 klen, key, u32 vlen, val}. */
void txn_wops_pack(struct pack_w *w, uint64_t txid, uint16_t coord, const struct wop *ops,
                   uint32_t n);
/* Decodes into ops (malloc'd, pointing into p): 0 or RDKV_EPROTO / RDKV_ETOOBIG / RDKV_ENOMEM. */
int txn_wops_unpack(const void *p, size_t len, uint32_t key_max, uint32_t value_max,
                    uint64_t *txid, uint16_t *coord, struct wop **ops, uint32_t *n);

/* The participant's steps, for a local partition and for the RPC handlers alike. prepare
 * checks and stages the writes (taking ownership of ops and bytes, both malloc'd) and, unless
 * keep is false, records the transaction for a later commit or abort; it returns 0 or a status
 * (nothing staged then). */
int part_prepare(struct txn_env *e, uint64_t txid, uint16_t coord, struct wop *ops, uint32_t n,
                 void *bytes, struct prepared **out);
void part_commit(struct txn_env *e, struct prepared *p);
void part_abort(struct txn_env *e, struct prepared *p);
/* Takes a recorded transaction out of the list (NULL if unknown). */
struct prepared *part_take(struct txn_env *e, uint64_t txid);
void part_record(struct txn_env *e, struct prepared *p);
int part_register(struct txn_env *e);

/* SCAN request: u32 blen, begin, u8 has_end, u32 elen, end, u32 alen, after, u8 has_after,
 * u32 limit (rows in this page; at most TXN_SCAN_PAGE). Reply: u8 more, u32 n, then n times {u64 row, u32 klen, key}. */
#define TXN_SCAN_PAGE 256u
#define TXN_SCAN_PAGE_BYTES (1u << 20)

#endif
