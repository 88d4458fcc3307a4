/* librdkv inside: one table of session operations, implemented twice -- embedded sessions
 * (client/embedded.c: a transaction worker of a node in this process, txn/txn.h) and remote
 * sessions (client/remote.c: requests to a coordinating node, server/proto.h). client/client.c
 * checks the public API's arguments, keeps the transaction's state and the retry loop, and calls
 * through the table; nothing else tells the two kinds apart. */
#ifndef RDKV_CLIENT_SESSION_H
#define RDKV_CLIENT_SESSION_H

#include "rdkv.h"

#include "common/pack.h"
#include "rdma/fabric.h"

#include <stdbool.h>
#include <stdint.h>

struct rdkv_iter {
    struct rdkv_txn *t;
    bool open;
    bool oneshot;        /* a one-shot scan's: the transaction ends with it */
    struct txn_iter *it; /* embedded */
    /* remote: the current batch */
    struct fab_buf batch;
    struct pack_r r;
    uint32_t left;
    bool more;
};

struct rdkv_txn {
    struct rdkv_session *s;
    bool in_use;          /* handed out by rdkv_txn_begin and not freed */
    bool active;          /* begun and not ended */
    bool retry;           /* this attempt retries the last one: keep its start timestamp */
    unsigned retries;
    int64_t backoff_ns;
    uint64_t ts;          /* the first attempt's start timestamp (0: none yet) */
    struct txn *t;        /* embedded */
    bool begin_pending;   /* remote: the BEGIN rides on the first operation */
    bool doomed;          /* remote: the node failed the transaction (it holds no lock) */
    struct fab_buf val;   /* the last value read (a one-shot read's, embedded too) */
    struct fab_buf many;  /* rdkv_txn_get_many's values, where the kind keeps none */
    struct rdkv_iter iter;
};

/* What a kind of session does. The operations get a begun transaction (active); `commit` true
 * makes the operation a one-shot one: the transaction commits after it (on RDKV_ENOTFOUND too,
 * answering it) or aborts when it fails, and is no longer active after the call. */
struct ses_ops {
    int (*begin)(struct rdkv_txn *t);
    int (*get)(struct rdkv_txn *t, const void *key, size_t klen, bool for_update,
               const void **val, size_t *vlen, bool commit);
    int (*put)(struct rdkv_txn *t, const void *key, size_t klen, const void *val, size_t vlen,
               bool commit);
    int (*del)(struct rdkv_txn *t, const void *key, size_t klen, bool commit);
    /* rdkv_txn_get_many in one go (NULL: client.c calls get for each key) */
    int (*get_many)(struct rdkv_txn *t, size_t n, const void *const *keys, const size_t *klens,
                    bool for_update, const void **vals, size_t *vlens, int *status);
    /* txn_patch; *old (when old) as get's value */
    int (*patch)(struct rdkv_txn *t, const void *key, size_t klen, uint32_t off,
                 const void *bytes, size_t n, const void **old, size_t *oldlen, bool commit);
    /* A one-shot scan's transaction commits when its iterator reaches the end. */
    int (*scan)(struct rdkv_txn *t, const void *begin, size_t blen, const void *end, size_t elen,
                size_t limit, struct rdkv_iter *it, bool commit);
    int (*iter_next)(struct rdkv_iter *it, const void **key, size_t *klen, const void **val,
                     size_t *vlen);
    void (*iter_close)(struct rdkv_iter *it);
    int (*commit)(struct rdkv_txn *t);
    void (*abort)(struct rdkv_txn *t);
    int (*status)(struct rdkv_session *s, char **json);
    void (*close)(struct rdkv_session *s);
    const struct fab_counters *(*counters)(struct rdkv_session *s);
};

struct rdkv_session {
    const struct ses_ops *ops;
    rdkv_options o;
    uint64_t rng;
    struct rdkv_txn txn;
    void *impl; /* the kind's own state */
};

extern const struct ses_ops ses_embedded_ops, ses_remote_ops;

/* The next row of the iterator's current batch (it->r, it->left: u32 key length, key, u32 value
 * length, value, as server/proto.h's batches): 1, or RDKV_EPROTO. */
int ses_batch_row(struct rdkv_iter *it, const void **key, size_t *klen, const void **val,
                  size_t *vlen);

/* A session of either kind before its own set-up (client.c); NULL when out of memory. */
struct rdkv_session *ses_new(const struct ses_ops *ops, const rdkv_options *o);
/* Frees what ses_new made (the kind's close has run). */
void ses_free(struct rdkv_session *s);

#endif
