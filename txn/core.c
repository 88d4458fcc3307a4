/* A transaction's state, from its beginning to its end: its memory, its entries (one per key it
 * touched), the locks it holds and their release, its failure, and the workers that run
 * transactions (coord.h). The operations (ops.c, scan.c, commit.c) build on these. */
#include "txn/coord.h"

#include "locks/janitor.h"

#include "common/clock.h"
#include "common/log.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHUNK_MIN (16u << 10)
#define NOWAIT_GRACE_NS NS_PER_US            /* no-wait: a row lock's one try */
#define RANGE_NOWAIT_NS (50 * NS_PER_US)      /* no-wait: a range lock granted on arrival */
#define RANGE_WAITDIE_NS NS_PER_MS            /* wait-die: a range lock's bounded wait */

struct chunk {
    struct chunk *next;
    size_t used, cap;
    uint8_t data[];
};


/* ------------------------------------------------------------------------------------------ */
/* Small helpers. */

uint16_t txn_partition(const struct txn_env *e, const void *key, uint32_t klen)
{
    return (uint16_t)(store_place_hash(key, klen) % e->n);
}




struct fab_ctx *txn_worker_ctx(struct txn_worker *w) { return w->c; }
const struct txn_stats *txn_worker_stats(const struct txn_worker *w) { return &w->stats; }
void txn_worker_set_lock_timeout(struct txn_worker *w, int64_t ns)
{
    w->lock_timeout = ns > 0 ? ns : w->e->cfg.lock_timeout_ns;
}
void txn_worker_set_conflict(struct txn_worker *w, int policy)
{
    w->conflict = policy >= 0 && policy <= TXN_CONFLICT_NO_WAIT ? policy : w->e->cfg.conflict;
}

void *txn_mem(struct txn *t, size_t n)
{
    n = (n + 7) & ~(size_t)7;
    struct chunk *c = t->mem;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > CHUNK_MIN ? n : CHUNK_MIN;
        struct chunk *nc = malloc(sizeof *nc + cap);
        if (!nc) return NULL;
        nc->cap = cap;
        nc->used = 0;
        nc->next = c;
        t->mem = c = nc;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

const uint8_t *txn_copy(struct txn *t, const void *p, uint32_t n)
{
    uint8_t *d = txn_mem(t, n ? n : 1);
    if (d && n) memcpy(d, p, n);
    return d;
}

static void release_all(struct txn *t);

/* The first failure sticks: every later call returns it, and commit aborts. The transaction is
 * doomed, so it gives back every lock at once rather than when its owner gets round to ending
 * it: a failed transaction leaves no lock behind. */
int txn_fail(struct txn *t, int rc)
{
    if (!t->failed) {
        t->failed = rc;
        release_all(t);
    }
    return rc;
}

/* What a lock or fabric failure means for the transaction. */
int txn_classify(struct txn *t, int rc, uint16_t node)
{
    struct txn_env *e = t->w->e;
    if (txn_down(e, node)) return RDKV_EUNAVAILABLE;
    switch (rc) {
    case RDKV_ETIMEDOUT:
    case RDKV_EABORTED:
        txn_count_conflict(t->w);
        return RDKV_EABORTED;
    case RDKV_EFLUSHED:
    case RDKV_EUNAVAILABLE:
    case RDKV_ESHUTDOWN: return RDKV_EUNAVAILABLE;
    default: return rc;
    }
}

static int64_t lock_deadline(struct txn *t) { return clock_now_ns() + t->w->lock_timeout; }

/* Wait-die's age for a row lock request: the transaction's timestamp where the row lock can
 * tell ages apart (algo->wait_die), else 0. */
bool txn_row_wait_die(const struct txn *t)
{
    return t->w->conflict == TXN_CONFLICT_WAIT_DIE && t->w->e->row->wait_die;
}

/* A row lock wait's end: the lock timeout, or at once under no-wait -- and under wait-die with a
 * row lock that cannot tell ages, which runs as no-wait (docs/transactions.md). */
int64_t txn_row_deadline(struct txn *t)
{
    int p = t->w->conflict;
    if (p == TXN_CONFLICT_NO_WAIT || (p == TXN_CONFLICT_WAIT_DIE && !txn_row_wait_die(t)))
        return clock_now_ns() + NOWAIT_GRACE_NS;
    return lock_deadline(t);
}

/* A range lock wait's end: the range server knows no ages, so wait-die bounds range waits to a
 * millisecond, no-wait to the request's arrival (with the RPC's handling to spare). */
int64_t txn_range_deadline(struct txn *t)
{
    int64_t bound = t->w->lock_timeout;
    if (t->w->conflict == TXN_CONFLICT_NO_WAIT && bound > RANGE_NOWAIT_NS) bound = RANGE_NOWAIT_NS;
    if (t->w->conflict == TXN_CONFLICT_WAIT_DIE && bound > RANGE_WAITDIE_NS)
        bound = RANGE_WAITDIE_NS;
    return clock_now_ns() + bound;
}
/* ------------------------------------------------------------------------------------------ */
/* Workers. */

static int worker_create(struct txn_env *e, struct fab_ctx *shared, struct txn_worker **out)
{
    struct txn_worker *w = calloc(1, sizeof *w);
    if (!w) return RDKV_ENOMEM;
    w->e = e;
    w->rem = calloc(e->n, sizeof *w->rem);
    w->rem_ok = calloc(e->n, 1);
    w->cinc = calloc(e->n, sizeof *w->cinc);
    w->rnode = calloc(e->n, sizeof *w->rnode);
    w->tx.pinc = calloc(e->n, sizeof *w->tx.pinc);
    w->tx.sroute = calloc(e->n, sizeof *w->tx.sroute);
    int rc = w->rem && w->rem_ok && w->cinc && w->rnode && w->tx.pinc && w->tx.sroute
                 ? 0
                 : RDKV_ENOMEM;
    w->own_ctx = !shared;
    if (!rc && shared) w->c = shared;
    else if (!rc) rc = fab_ctx_create(e->f, &w->c);
    if (!rc) {
        rc = lock_thread_init(&w->lt, w->c, &e->lcfg);
        if (rc) {
            if (w->own_ctx) fab_ctx_destroy(w->c);
            w->c = NULL;
        }
    }
    if (rc) {
        free(w->rem);
        free(w->rem_ok);
        free(w->cinc);
        free(w->rnode);
        free(w->tx.pinc);
        free(w->tx.sroute);
        free(w);
        return rc;
    }
    w->wid = (__atomic_add_fetch(&e->next_worker, 1, __ATOMIC_RELAXED) % 0xFFFFu) + 1;
    w->lock_timeout = e->cfg.lock_timeout_ns;
    w->conflict = e->cfg.conflict;
    w->rng = ((uint64_t)clock_now_ns() ^ ((uint64_t)w->wid << 32) ^ e->me) | 1;
    w->tx.w = w;
    *out = w;
    return 0;
}

int txn_worker_create(struct txn_env *e, struct txn_worker **out) { return worker_create(e, NULL, out); }

int txn_worker_create_on(struct txn_env *e, struct fab_ctx *c, struct txn_worker **out)
{
    if (!c || fab_ctx_fabric(c) != e->f) return RDKV_EINVAL;
    return worker_create(e, c, out);
}



void txn_worker_destroy(struct txn_worker *w)
{
    if (!w) return;
    if (w->tx.active) {
        uint64_t *was = txn_pin_on(&w->tx);
        txn_end(&w->tx);
        txn_pin_off(&w->tx, was);
    }
    struct txn *t = &w->tx;
    while (t->mem) {
        struct chunk *c = t->mem;
        t->mem = c->next;
        free(c);
    }
    free(t->ents);
    free(t->idx);
    free(t->scans);
    for (uint32_t i = 0; i < w->nrfree; i++) free(w->rfree[i]);
    free(w->rfree);
    lock_thread_fini(&w->lt);
    if (w->own_ctx) fab_ctx_destroy(w->c);
    free(w->rem);
    free(w->rem_ok);
    free(w->cinc);
    free(w->rnode);
    free(t->pinc);
    free(t->sroute);
    free(w);
}

struct range_handle *txn_rh_get(struct txn_worker *w)
{
    if (w->nrfree) return w->rfree[--w->nrfree];
    return malloc(sizeof(struct range_handle));
}

void txn_rh_put(struct txn_worker *w, struct range_handle *h)
{
    if (w->nrfree == w->rfreecap) {
        uint32_t cap = w->rfreecap ? w->rfreecap * 2 : 16;
        if (cap > 256) {
            free(h);
            return;
        }
        struct range_handle **n = realloc(w->rfree, cap * sizeof *n);
        if (!n) {
            free(h);
            return;
        }
        w->rfree = n;
        w->rfreecap = cap;
    }
    w->rfree[w->nrfree++] = h;
}
/* ------------------------------------------------------------------------------------------ */
/* The transaction's entries: one per key touched, found by hash. */

static uint32_t idx_slot(const struct txn *t, uint64_t hash) { return (uint32_t)hash & (t->idxcap - 1); }

static int ent_find(struct txn *t, const void *key, uint32_t klen, uint64_t hash)
{
    if (!t->idxcap) return -1;
    for (uint32_t s = idx_slot(t, hash);; s = (s + 1) & (t->idxcap - 1)) {
        uint32_t v = t->idx[s];
        if (!v) return -1;
        struct tent *en = &t->ents[v - 1];
        if (en->hash == hash && en->klen == klen && !memcmp(en->key, key, klen)) return (int)v - 1;
    }
}

static int idx_grow(struct txn *t)
{
    uint32_t cap = t->idxcap ? t->idxcap * 2 : 64;
    uint32_t *n = calloc(cap, sizeof *n);
    if (!n) return RDKV_ENOMEM;
    free(t->idx);
    t->idx = n;
    t->idxcap = cap;
    for (uint32_t i = 0; i < t->nents; i++) {
        uint32_t s = idx_slot(t, t->ents[i].hash);
        while (t->idx[s]) s = (s + 1) & (cap - 1);
        t->idx[s] = i + 1;
    }
    return 0;
}

static int ent_add(struct txn *t, const void *key, uint32_t klen, uint64_t hash)
{
    if ((t->nents + 1) * 2 > t->idxcap && idx_grow(t)) return RDKV_ENOMEM;
    if (t->nents == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 16;
        struct tent *n = realloc(t->ents, cap * sizeof *n);
        if (!n) return RDKV_ENOMEM;
        t->ents = n;
        t->cap = cap;
    }
    const uint8_t *k = txn_copy(t, key, klen);
    if (!k) return RDKV_ENOMEM;
    struct txn_env *e = t->w->e;
    struct tent *en = &t->ents[t->nents];
    memset(en, 0, sizeof *en);
    en->key = k;
    en->klen = klen;
    en->hash = hash;
    en->pid = txn_partition(e, k, klen);
    en->moves = txn_route_moves(e, en->pid);
    en->part = txn_owner(e, en->pid);
    uint32_t s = idx_slot(t, hash);
    while (t->idx[s]) s = (s + 1) & (t->idxcap - 1);
    t->idx[s] = t->nents + 1;
    return (int)t->nents++;
}

int txn_ent_get(struct txn *t, const void *key, uint32_t klen)
{
    uint64_t hash = store_hash(key, klen);
    int i = ent_find(t, key, klen, hash);
    return i >= 0 ? i : ent_add(t, key, klen, hash);
}

/* en's row lock when it is held and must be released; NULL when it is not held, or when its
 * node is down (then it is dropped here: its lease frees it). */
static struct lock_handle *row_to_release(struct txn *t, struct tent *en)
{
    if (!en->lk.mode) return NULL;
    if (!txn_down(t->w->e, rptr_node(en->lk.line))) return &en->lk;
    en->lk.mode = 0;
    return NULL;
}

void txn_unlock_row(struct txn *t, struct tent *en)
{
    struct lock_handle *h = row_to_release(t, en);
    if (!h) return;
    lock_release(h);
    h->mode = 0;
}
void txn_range_drop(struct txn *t, struct range_handle **hp)
{
    struct range_handle *h = *hp;
    if (!h) return;
    if (h->mode && !txn_down(t->w->e, h->node)) range_release(h);
    h->mode = 0;
    txn_rh_put(t->w, h);
    *hp = NULL;
}

/* Whether the range lock still protects its holder: the owner evicts a hold kept two leases
 * while someone waits; the client's clock judges it conservatively from the grant's bounds. */
static bool range_hold_ok(const struct range_handle *h)
{
    if (!h->mode) return false;
    if (!h->lease_ns) return true;
    return clock_now_ns() - h->granted_min < 2 * h->lease_ns - h->lease_ns / 2;
}
/* ------------------------------------------------------------------------------------------ */
/* Beginning. */

/* A fresh start timestamp: the real-time clock (nodes compare them) in 8-microsecond units
 * since 2026-01-01, made strictly increasing per node (a node beginning more than one
 * transaction per unit runs ahead of the clock meanwhile), with the node id (< CLUSTER_MAX_NODES
 * = 1024) in the low 10 bits: unique in the cluster, nonzero, and under 2^56 (the row locks'
 * LOCK_AGE_MAX) until 2043. */
#define TS_EPOCH_S 1767225600ll /* 2026-01-01T00:00:00Z */
_Static_assert(CLUSTER_MAX_NODES <= 1024, "start timestamps keep the node id in 10 bits");
static uint64_t ts_fresh(struct txn_env *e)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t us = ((int64_t)now.tv_sec - TS_EPOCH_S) * 1000000 + now.tv_nsec / 1000;
    uint64_t units = us > 0 ? (uint64_t)us / 8 : 0;
    uint64_t last = __atomic_load_n(&e->ts_last, __ATOMIC_RELAXED), next;
    do
        next = units > last ? units : last + 1;
    while (!__atomic_compare_exchange_n(&e->ts_last, &last, next, true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED));
    return (next << 10 | e->me) & LOCK_AGE_MAX;
}

/* The next transaction id's counter part, from the block reserved durably (txn_env_set_txids):
 * 0, or the reservation's failure (no id is handed out that a restart could hand out again). */
static int txid_next(struct txn_env *e, uint64_t *out)
{
    uint64_t v = __atomic_fetch_add(&e->txseq, 1, __ATOMIC_RELAXED);
    if (v >= TXID_MASK) return RDKV_ENOSPC; /* (2^48 ids: never in practice) */
    if (v >= __atomic_load_n(&e->txlimit, __ATOMIC_ACQUIRE)) {
        /* past the block: the next one reserved first (once per TXID_BLOCK transactions: a
         * few milliseconds of a file's write and sync) */
        pthread_mutex_lock(&e->txmu);
        int rc = 0;
        while (!rc && v >= e->txlimit) {
            uint64_t want = e->txlimit + TXID_BLOCK;
            rc = e->txreserve(e->txarg, want);
            if (!rc) __atomic_store_n(&e->txlimit, want, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&e->txmu);
        if (rc) {
            log_error("no transaction id: reserving the next block failed: %s", rdkv_strerror(rc));
            return rc;
        }
    }
    *out = v;
    return 0;
}

int txn_begin(struct txn_worker *w, struct txn **out)
{
    struct txn *t = &w->tx;
    if (t->active) return RDKV_EBUSY;
    t->active = true;
    t->failed = 0;
    t->nops = 0;
    t->nbytes = 0;
    w->seq++;
    t->txid = (uint64_t)w->e->me << 48 | (uint64_t)w->wid << 32 | w->seq;
    if (w->e->txreserve) {
        uint64_t v;
        int rc = txid_next(w->e, &v);
        if (rc) {
            t->active = false;
            return rc;
        }
        t->txid = (uint64_t)w->e->me << 48 | v;
    }
    t->log_txid = 0;
    t->ts = ts_fresh(w->e);
    t->began_ns = metrics_me() ? clock_now_ns() : 0;
    memset(t->pinc, 0, w->e->n * sizeof *t->pinc);
    memset(t->sroute, 0, w->e->n * sizeof *t->sroute);
    *out = t;
    return 0;
}

uint64_t txn_start_ts(const struct txn *t) { return t->ts; }

void txn_keep_ts(struct txn *t, uint64_t ts)
{
    if (t->active && ts && !t->nents && !t->nscans) t->ts = ts;
}

int txn_failed(const struct txn *t) { return t->failed; }
/* The key's length within the store's limit: 0 or RDKV_ETOOBIG. */
int txn_check_key(struct txn *t, uint32_t klen)
{
    return klen > store_key_max(t->w->e->st) ? RDKV_ETOOBIG : 0;
}

/* Counts an operation of `bytes` key and value bytes against the transaction's caps
 * (txn_cfg.max_ops, max_bytes). Beyond them the transaction fails with RDKV_ETOOBIG before the
 * operation takes a lock, and gives back every lock it holds at once. */
int txn_charge_op(struct txn *t, uint64_t bytes)
{
    const struct txn_cfg *cfg = &t->w->e->cfg;
    if (!txn_serving(t->w->e)) return txn_fail(t, RDKV_EUNAVAILABLE);
    t->nops++;
    t->nbytes += bytes;
    if (t->nops <= cfg->max_ops && t->nbytes <= cfg->max_bytes) return 0;
    return txn_fail(t, RDKV_ETOOBIG);
}


/* ------------------------------------------------------------------------------------------ */
/* Ending. */

/* Whether every lock the transaction holds is still its own: within its lease (a quarter to
 * spare), and in the process that granted it -- every node the transaction worked with still
 * answers as the incarnation it did (a restart took its locks there with the old process's
 * memory, shared ones too). The participants of its writes check the latter themselves
 * (TXN_RPC_PREPARE, APPLY); for the nodes it only read, this is the check, as of the context's
 * connection now (docs/transactions.md, "Incarnations"). And no key's or scan's partition has
 * moved since it was locked (docs/replication.md, "Handing a partition back"). */
bool txn_leases_ok(struct txn *t)
{
    struct txn_env *e = t->w->e;
    for (uint16_t n = 0; n < e->n; n++) {
        uint64_t inc;
        if (n != e->me && t->pinc[n] &&
            (fab_peer_incarnation(t->w->c, n, false, &inc) || inc != t->pinc[n]))
            return false;
    }
    for (uint32_t i = 0; i < t->nents; i++) {
        struct tent *en = &t->ents[i];
        /* (its partition moved since -- a promotion, or a hand-back: the new primary may have
         * taken writes that our locks at the old one do not hold off) */
        if (en->moves != txn_route_moves(e, en->pid)) return false; /* (so its node is too) */
        if (en->lk.mode && !lock_lease_ok(&en->lk)) return false;
        if (en->rh && en->rh->mode && !range_hold_ok(en->rh)) return false;
    }
    for (uint32_t i = 0; i < t->nscans; i++)
        if (t->scans[i]->mode && !range_hold_ok(t->scans[i])) return false;
    for (unsigned p = 0; p < e->n; p++)
        if (t->sroute[p] && t->sroute[p] != txn_route_moves(e, p) + 1u) return false;
    return true;
}

/* Every lock of the transaction. The row locks' releases travel together (lock_release_many:
 * about one round trip for all of another node's rows, not one each), and each has landed
 * before this returns. */
static void release_all(struct txn *t)
{
    struct lock_handle *rows[64];
    unsigned n = 0;
    for (uint32_t i = 0; i < t->nents; i++) {
        struct tent *en = &t->ents[i];
        if ((rows[n] = row_to_release(t, en)) && ++n == sizeof rows / sizeof rows[0]) {
            lock_release_many(rows, n);
            n = 0;
        }
        txn_range_drop(t, &en->rh);
    }
    lock_release_many(rows, n);
    for (uint32_t i = 0; i < t->nscans; i++) txn_range_drop(t, &t->scans[i]);
    t->nscans = 0;
}

void txn_end(struct txn *t)
{
    release_all(t);
    if (t->idxcap > 1024 && t->nents * 8 < t->idxcap) {
        free(t->idx);
        t->idx = NULL;
        t->idxcap = 0;
    } else if (t->idxcap) {
        memset(t->idx, 0, t->idxcap * sizeof *t->idx);
    }
    t->nents = 0;
    /* keep one chunk for the next transaction */
    while (t->mem && t->mem->next) {
        struct chunk *c = t->mem;
        t->mem = c->next;
        free(c);
    }
    if (t->mem) {
        if (t->mem->cap > 4 * CHUNK_MIN) {
            free(t->mem);
            t->mem = NULL;
        } else {
            t->mem->used = 0;
        }
    }
    lock_thread_poll(&t->w->lt);
    if (lock_thread_owes(&t->w->lt)) lock_janitor_take(t->w->e->jan, &t->w->lt);
    t->active = false;
}


/* ------------------------------------------------------------------------------------------ */
/* Every call of a transaction runs pinned to the incarnations it works with (t->pinc; 0 entries
 * are filled by its first post there), and restores whatever pin its task had: a post of the
 * transaction never reaches a later process of a node its locks are in, and nothing else the task
 * or thread does (an in-doubt thread's queries) is pinned by it (docs/transactions.md,
 * "Incarnations"). */

uint64_t *txn_pin_on(struct txn *t) { return fab_pin(t->w->c, t->pinc); }
void txn_pin_off(struct txn *t, uint64_t *was) { fab_pin(t->w->c, was); }

/* ------------------------------------------------------------------------------------------ */
/* Requests to several nodes at once. */

#define CALL_TAG 0x7C0000000000ull

void txn_call_all(struct fab_ctx *c, unsigned n, const uint16_t *nodes, uint16_t type,
                  const void *const *reqs, const size_t *lens, struct fab_buf *resps,
                  int *status, int64_t timeout_ns, void (*meanwhile)(void *arg), void *arg)
{
    struct fab_buf own[resps ? 1 : (n ? n : 1)];
    struct fab_buf *resp = resps ? resps : own;
    unsigned pending = 0;
    for (unsigned i = 0; i < n; i++) {
        resp[i] = (struct fab_buf){0};
        status[i] = fab_rpc_post(c, nodes[i], type, reqs[i], lens[i], &resp[i], timeout_ns,
                                 CALL_TAG | i);
        if (status[i] == 0) {
            status[i] = 1; /* pending */
            pending++;
        }
    }
    if (meanwhile) meanwhile(arg);
    while (pending) {
        struct fab_cqe cq[16];
        int k = fab_wait(c, cq, 16, -1);
        for (int j = 0; j < k; j++) {
            uint64_t i = cq[j].tag & ~CALL_TAG;
            if ((cq[j].tag & CALL_TAG) != CALL_TAG || i >= n || status[i] != 1) continue;
            status[i] = cq[j].status;
            pending--;
        }
    }
    if (!resps)
        for (unsigned i = 0; i < n; i++) fab_buf_free(&resp[i]);
}
