/* The server-side range locks: the combiner (the range-lock thesis's design, corrected as
 * docs/range-locks.md says) and the interval-tree baseline, plus the spaces' regions that the
 * client-side designs use.
 *
 * Both server-side designs keep, per space, a table of the requests inserted and not yet gone:
 * an interval tree (itv.h) of granted and waiting requests, each with `blocking`, the number of
 * earlier requests in the table that overlap it and conflict (not both shared). A request is
 * granted when blocking reaches 0; when a request leaves (release, cancel, deadline, eviction),
 * every later overlapping conflicting request loses one. This grants FIFO per conflict: a reader
 * behind a waiting writer waits, so a stream of readers cannot starve a writer.
 *
 *   combiner  RPC handlers (on the service thread) queue requests; one combiner takes the whole
 *             queue at once (a batch) and applies it to the tables under the table mutex, then
 *             answers. The combiner role goes to whoever finds it free: a handler that finds the
 *             tables free and the queue empty applies its own request (try_apply); otherwise the
 *             combiner thread applies the queue. Releases are one-way messages.
 *             A blocked request waits for its grant either in its lock RPC, answered at the grant
 *             (combiner-rpc), or by polling with one-sided READs a ready flag of its own in the
 *             owner's arena, one cache line each, into which the combiner stores the request's
 *             token at the grant (combiner-rdma).
 *   itree     the RPC handler applies the request to the table itself under the table mutex, on
 *             the node's service thread (one server thread, the thesis's best setting); a
 *             blocked request's RPC is answered at its grant.
 * The combiner thread also sweeps both kinds of tables: waiters past their deadline are removed
 * (RDKV_ETIMEDOUT), and a holder that has kept its range for two leases while a conflicting
 * request waits is evicted (its late release gets RDKV_ETIMEDOUT), so a dead client cannot wedge
 * a range for good.
 *
 * A request may carry byte-string key bounds (range.h, range_handle_keys): the tree still finds
 * candidates by coordinates (checked to be the keys' own, so a superset), and conflict() then
 * compares the keys, so keys that share a coordinate do not share a lock. What requests make the
 * owner allocate is bounded: RANGE_MAX_REQS requests and RANGE_MAX_KEY_BYTES of keys in the
 * tables (past them: RDKV_EBUSY), RANGE_MAX_QUEUED in the combiner's queue (past it the handler
 * combines itself). */
#include "locks/range/range.h"

#include "locks/range/itv.h"

#include "common/clock.h"
#include "common/key.h"
#include "common/pack.h"
#include "common/task.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Lock request: u16 space, u8 mode, u8 flags, u64 lo, u64 hi, u64 timeout (ns, 0: none), then
 * optionally u64 owner, then optionally the key bounds: u8 enum range_key_flags (RANGE_K_ON
 * set), u32 begin length, begin, and with RANGE_K_END u32 end length, end.
 * Reply: u64 token, u8 state, u64 flag offset (RANGE_QUEUED only), u64 the owner's lease (ns),
 * u64 how long the request waited at the owner before its grant (ns; 0 when queued). */
#define RANGE_F_RDMA 1u
enum { RANGE_GRANTED = 1, RANGE_QUEUED = 2 };
/* Unlock request: u16 space, u64 token, u8 cancel. Reply: empty (released or cancelled), or for a
 * cancel that came too late, u8 RANGE_GRANTED: the request holds, and the client releases it.
 * The combiner answers a release as soon as it is queued; itree once it is done (RDKV_ETIMEDOUT:
 * the hold had been evicted). */

#define RANGE_FLAG_SLOTS 4096
#define TOKEN_BUCKETS 4096

enum table_kind { KIND_COMBINER = 0, KIND_ITREE = 1 };

struct rreq {
    struct itv_node itv;       /* lo, hi, seq (= token) */
    struct rreq *hnext;        /* token hash chain */
    struct rreq *lnext, *lprev; /* the table's list of requests, in insertion order */
    struct fab_rpc_req *req;   /* lock RPC not answered yet */
    struct lwait *lw;          /* or a requester in this process, not answered yet */
    uint16_t space;
    uint8_t mode;
    uint8_t kind;
    bool granted;
    uint64_t owner;            /* 0: none; requests of one owner never conflict */
    uint8_t kflags;            /* enum range_key_flags; keys in kb, ke (allocated with r) */
    uint32_t kbl, kel;
    const uint8_t *kb, *ke;
    int32_t flag;              /* ready-flag slot, -1: none */
    uint32_t blocking;
    int64_t deadline;          /* waiting: when to give up (0: never) */
    int64_t arrived_at;        /* when the owner inserted it */
    int64_t granted_at;
};

struct rtable {
    struct itv_tree tree;
    struct rreq *head, *tail; /* every request inserted, oldest first */
    unsigned waiting;
};

struct range_space {
    bool used;
    struct range_space_cfg cfg;
    rptr region;
    struct rtable tab[2];
};

/* A queued combiner operation. */
struct qop {
    struct qop *next;
    struct fab_rpc_req *req;
    struct lwait *lw;
    bool lock, cancel, rdma;
    uint16_t space;
    uint8_t mode;
    uint64_t lo, hi, token, owner;
    int64_t deadline;
    uint8_t kflags; /* key bounds: point into the request (or the local requester's handle), */
    uint32_t kbl, kel; /* valid until it is answered; do_lock copies them */
    const uint8_t *kb, *ke;
};

struct range_server {
    struct fabric *f;
    int64_t lease_ns;
    pthread_mutex_t mu; /* the tables, the token hash, the flag slots, the spaces */
    struct range_space spaces[RANGE_MAX_SPACES + 1];
    struct rreq *tokens[TOKEN_BUCKETS];
    uint64_t next_token;
    uint64_t *flags; /* RANGE_FLAG_SLOTS lines in the arena */
    rptr flags_rptr;
    int32_t free_flags[RANGE_FLAG_SLOTS];
    unsigned nfree_flags;
    range_grant_hook hook;
    void *hook_arg;
    struct range_server_stats stats;
    size_t nreqs, key_bytes; /* in the tables: bounded by RANGE_MAX_REQS, RANGE_MAX_KEY_BYTES */
    /* the combiner's queue */
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    struct qop *qhead, *qtail;
    unsigned nqueued;
    bool stop, sleeping, thread_started;
    pthread_t thr;
};

/* ------------------------------------------------------------------------------------------ */
/* The tables (s->mu held). */

static unsigned token_bucket(uint64_t token)
{
    return (unsigned)((token * 0x9E3779B97F4A7C15ull) >> 52) % TOKEN_BUCKETS;
}

static struct rreq *token_find(struct range_server *s, uint64_t token, bool unlink)
{
    for (struct rreq **pp = &s->tokens[token_bucket(token)]; *pp; pp = &(*pp)->hnext)
        if ((*pp)->itv.seq == token) {
            struct rreq *r = *pp;
            if (unlink) *pp = r->hnext;
            return r;
        }
    return NULL;
}

/* Whether key k comes before the end of r's key interval (r carries keys). */
static bool before_end(const uint8_t *k, uint32_t kl, uint8_t kflags, const uint8_t *e,
                       uint32_t el)
{
    if (!(kflags & RANGE_K_END)) return true;
    int c = key_cmp(k, kl, e, el);
    return c < 0 || (c == 0 && (kflags & RANGE_K_INCL));
}

/* Two requests conflict when one is exclusive, unless one owner (a transaction) made both: it
 * may hold a shared scan range and an exclusive point inside it at once. Callers only ask about
 * requests whose coordinates overlap (the tree found them); when both carry keys, their key
 * intervals must overlap too. Both are non-empty (keys_ok), so they overlap exactly when
 * each one's begin comes before the other's end. */
static bool conflict(const struct rreq *a, const struct rreq *b)
{
    if (a->owner && a->owner == b->owner) return false;
    if (a->mode != LOCK_EXCLUSIVE && b->mode != LOCK_EXCLUSIVE) return false;
    if (!(a->kflags & b->kflags & RANGE_K_ON)) return true;
    return before_end(a->kb, a->kbl, b->kflags, b->ke, b->kel) &&
           before_end(b->kb, b->kbl, a->kflags, a->ke, a->kel);
}

static int count_blocker(struct itv_node *n, void *arg)
{
    struct rreq *x = (struct rreq *)n, *r = arg;
    if (conflict(x, r)) r->blocking++;
    return 0;
}

/* A requester in the owner's own process (a transaction worker of this node) does not go through
 * the fabric: it submits its request as the service thread would, and waits here for the same
 * answer an RPC would carry. Whoever answers signals under the mutex and never touches the
 * struct afterwards (it lives on the requester's stack). */
#define LW_MAX 33
/* A requester of this process waits for its answer (a task parks, a thread sleeps). */
struct lwait {
    struct waiter w;
    int status;
    size_t len;
    uint8_t data[LW_MAX];
};

/* Answers a request: by RPC, to a local requester, or not at all (a release nobody waits for). */
static void respond(struct fab_rpc_req *req, struct lwait *lw, int status, const void *data,
                    size_t len)
{
    if (req) {
        fab_rpc_reply(req, status, data, len);
    } else if (lw) {
        lw->status = status;
        lw->len = status == 0 && len <= LW_MAX ? len : 0;
        if (lw->len) memcpy(lw->data, data, lw->len);
        waiter_wake(&lw->w); /* (the requester may return at once: lw is on its stack) */
    }
}

static void reply_lock(struct range_server *s, struct fab_rpc_req *req, struct lwait *lw,
                       int status, uint64_t token, uint8_t state, uint64_t flag_off,
                       int64_t waited)
{
    uint8_t out[33];
    size_t n = 0;
    if (status == 0) {
        pack_put_u64le(out, token);
        out[8] = state;
        pack_put_u64le(out + 9, flag_off);
        pack_put_u64le(out + 17, (uint64_t)s->lease_ns);
        pack_put_u64le(out + 25, (uint64_t)waited);
        n = 33;
    }
    respond(req, lw, status, out, n);
}

static void grant(struct range_server *s, struct rreq *r)
{
    r->granted = true;
    r->granted_at = clock_now_ns();
    r->deadline = 0;
    s->stats.grants++;
    if (s->hook) s->hook(s->hook_arg, r->space, r->itv.lo, r->itv.hi, r->mode, true);
    if (r->req || r->lw) {
        reply_lock(s, r->req, r->lw, 0, r->itv.seq, RANGE_GRANTED, 0,
                   r->granted_at - r->arrived_at);
        r->req = NULL;
        r->lw = NULL;
    } else if (r->flag >= 0) {
        /* the client READs its flag until it holds its token; an 8-byte aligned store is atomic
         * with respect to the NIC's READ */
        __atomic_store_n(&s->flags[(size_t)r->flag * 8], r->itv.seq, __ATOMIC_RELEASE);
    }
}

struct leave_ctx {
    struct range_server *s;
    struct rreq *gone;
};

static int unblock_one(struct itv_node *n, void *arg)
{
    struct leave_ctx *c = arg;
    struct rreq *x = (struct rreq *)n;
    /* only requests inserted after `gone` counted it, and only when the modes conflict */
    if (x->itv.seq > c->gone->itv.seq && !x->granted && conflict(x, c->gone) &&
        --x->blocking == 0) {
        struct rtable *t = &c->s->spaces[x->space].tab[x->kind];
        t->waiting--;
        grant(c->s, x);
    }
    return 0;
}

/* Takes r out of its table and grants what it was the last blocker of; frees r. r must already
 * be out of the token hash. */
static void leave(struct range_server *s, struct rreq *r)
{
    struct rtable *t = &s->spaces[r->space].tab[r->kind];
    itv_remove(&t->tree, &r->itv);
    if (r->lprev) r->lprev->lnext = r->lnext;
    else t->head = r->lnext;
    if (r->lnext) r->lnext->lprev = r->lprev;
    else t->tail = r->lprev;
    respond(r->req, r->lw, RDKV_ETIMEDOUT, NULL, 0); /* a waiter given up */
    if (!r->granted) t->waiting--;
    else if (s->hook) s->hook(s->hook_arg, r->space, r->itv.lo, r->itv.hi, r->mode, false);
    struct leave_ctx c = {s, r};
    itv_overlaps(&t->tree, r->itv.lo, r->itv.hi, unblock_one, &c);
    if (r->flag >= 0) s->free_flags[s->nfree_flags++] = r->flag;
    s->nreqs--;
    s->key_bytes -= (size_t)r->kbl + r->kel;
    free(r);
}

/* Inserts a lock request; answers it now if granted (or if rdma-polling, with its flag), else
 * keeps the RPC for the grant. */
static void do_lock(struct range_server *s, const struct qop *op, enum table_kind kind)
{
    struct fab_rpc_req *req = op->req;
    struct lwait *lw = op->lw;
    uint64_t lo = op->lo, hi = op->hi;
    struct range_space *sp = &s->spaces[op->space];
    if (!sp->used) {
        respond(req, lw, RDKV_ENOTFOUND, NULL, 0);
        return;
    }
    if (sp->cfg.bits < 64 && hi >> sp->cfg.bits) {
        respond(req, lw, RDKV_EINVAL, NULL, 0);
        return;
    }
    size_t kbytes = op->kflags ? (size_t)op->kbl + op->kel : 0;
    if (s->nreqs >= RANGE_MAX_REQS || s->key_bytes + kbytes > RANGE_MAX_KEY_BYTES) {
        s->stats.refused++;
        respond(req, lw, RDKV_EBUSY, NULL, 0);
        return;
    }
    struct rreq *r = calloc(1, sizeof *r + kbytes);
    if (!r) {
        respond(req, lw, RDKV_ENOMEM, NULL, 0);
        return;
    }
    s->nreqs++;
    s->key_bytes += kbytes;
    if (op->kflags) {
        uint8_t *kb = (uint8_t *)(r + 1);
        if (op->kbl) memcpy(kb, op->kb, op->kbl);
        if (op->kel) memcpy(kb + op->kbl, op->ke, op->kel);
        r->kflags = op->kflags;
        r->kb = kb;
        r->kbl = op->kbl;
        r->ke = kb + op->kbl;
        r->kel = op->kel;
    }
    struct rtable *t = &sp->tab[kind];
    r->itv.lo = lo;
    r->itv.hi = hi;
    r->itv.seq = ++s->next_token;
    r->space = op->space;
    r->mode = op->mode;
    r->owner = op->owner;
    r->kind = (uint8_t)kind;
    r->flag = -1;
    r->deadline = op->deadline;
    r->arrived_at = clock_now_ns();
    itv_overlaps(&t->tree, lo, hi, count_blocker, r);
    itv_insert(&t->tree, &r->itv);
    r->lprev = t->tail;
    if (t->tail) t->tail->lnext = r;
    else t->head = r;
    t->tail = r;
    unsigned b = token_bucket(r->itv.seq);
    r->hnext = s->tokens[b];
    s->tokens[b] = r;
    if (r->blocking == 0) {
        r->req = req;
        r->lw = lw;
        grant(s, r);
        return;
    }
    t->waiting++;
    s->stats.waits++;
    if (op->rdma && !lw && s->nfree_flags) {
        r->flag = s->free_flags[--s->nfree_flags];
        __atomic_store_n(&s->flags[(size_t)r->flag * 8], 0, __ATOMIC_RELEASE);
        reply_lock(s, req, NULL, 0, r->itv.seq, RANGE_QUEUED,
                   rptr_off(s->flags_rptr) + (uint64_t)r->flag * 64, 0);
    } else {
        /* answered at the grant (also when rdma mode finds no free flag, and locally) */
        r->req = req;
        r->lw = lw;
    }
}

static void do_unlock(struct range_server *s, struct fab_rpc_req *req, struct lwait *lw,
                      uint16_t space, uint64_t token, bool cancel)
{
    struct rreq *r = token_find(s, token, false);
    if (!r || r->space != space) {
        /* evicted after its lease, or timed out while waiting: not held */
        respond(req, lw, RDKV_ETIMEDOUT, NULL, 0);
        return;
    }
    if (cancel && r->granted) {
        uint8_t st = RANGE_GRANTED;
        respond(req, lw, 0, &st, 1);
        return;
    }
    if (!cancel && !r->granted) { /* a release of a request that does not hold yet */
        respond(req, lw, RDKV_EINVAL, NULL, 0);
        return;
    }
    token_find(s, token, true);
    if (cancel) s->stats.cancels++;
    else s->stats.releases++;
    leave(s, r);
    respond(req, lw, 0, NULL, 0);
}

/* Deadlines of waiters and evictions of holders that outlived two leases while someone waits.
 * Returns when it next needs to run (0: nothing to watch). */
struct evict_ctx {
    struct rreq *holder;
    bool waited_on;
};
static int find_waiter(struct itv_node *n, void *arg)
{
    struct evict_ctx *c = arg;
    struct rreq *x = (struct rreq *)n;
    if (!x->granted && x->itv.seq > c->holder->itv.seq && conflict(x, c->holder)) {
        c->waited_on = true;
        return 1;
    }
    return 0;
}

static int64_t sweep(struct range_server *s, int64_t now)
{
    int64_t next = 0;
#define SOONER(t) (next = (next == 0 || (t) < next) ? (t) : next)
    for (unsigned id = 1; id <= RANGE_MAX_SPACES; id++) {
        struct range_space *sp = &s->spaces[id];
        if (!sp->used) continue;
        for (int k = 0; k < 2; k++) {
            struct rtable *t = &sp->tab[k];
            if (!t->waiting) continue;
            for (struct rreq *r = t->head, *rn; r; r = rn) {
                rn = r->lnext;
                if (!r->granted) {
                    if (r->deadline && r->deadline <= now) {
                        token_find(s, r->itv.seq, true);
                        s->stats.cancels++;
                        /* leave() answers r's RPC, may grant others, and frees only r: rn
                         * stays valid */
                        leave(s, r);
                    } else if (r->deadline) {
                        SOONER(r->deadline);
                    }
                    continue;
                }
                int64_t expiry = r->granted_at + 2 * s->lease_ns;
                struct evict_ctx c = {r, false};
                itv_overlaps(&t->tree, r->itv.lo, r->itv.hi, find_waiter, &c);
                if (!c.waited_on) continue;
                if (expiry <= now) {
                    token_find(s, r->itv.seq, true);
                    leave(s, r);
                } else {
                    SOONER(expiry);
                }
            }
        }
    }
#undef SOONER
    return next;
}

/* ------------------------------------------------------------------------------------------ */
/* RPC handlers. */

/* Whether a request's key bounds are well formed: known flags, lengths within RANGE_KEY_MAX, a
 * non-empty interval, and coordinates that are the keys' own (so that the coordinates cover the
 * keys, and the tree finds every request whose keys overlap). */
static bool keys_ok(const struct qop *op)
{
    if (!op->kflags) return true;
    if (!(op->kflags & RANGE_K_ON) || (op->kflags & ~(RANGE_K_ON | RANGE_K_END | RANGE_K_INCL)) ||
        ((op->kflags & RANGE_K_INCL) && !(op->kflags & RANGE_K_END)) ||
        op->kbl > RANGE_KEY_MAX || op->kel > RANGE_KEY_MAX)
        return false;
    if (op->lo != range_key_coord(op->kb, op->kbl)) return false;
    if (!(op->kflags & RANGE_K_END)) return op->hi == UINT64_MAX;
    return op->hi == range_key_coord(op->ke, op->kel) &&
           before_end(op->kb, op->kbl, op->kflags, op->ke, op->kel);
}

/* Parses a lock request into op (its keys point into the request). */
static bool parse_lock(struct fab_rpc_req *req, struct qop *op)
{
    struct pack_r r;
    pack_r_init(&r, fab_rpc_data(req), fab_rpc_len(req));
    op->space = unpack_u16(&r);
    op->mode = unpack_u8(&r);
    uint8_t flags = unpack_u8(&r);
    op->lo = unpack_u64(&r);
    op->hi = unpack_u64(&r);
    uint64_t timeout = unpack_u64(&r);
    op->owner = r.at < r.len ? unpack_u64(&r) : 0; /* optional: older clients send none */
    op->kflags = 0;
    if (r.at < r.len) { /* optional: key bounds */
        op->kflags = unpack_u8(&r);
        op->kbl = unpack_u32(&r);
        op->kb = pack_r_take(&r, op->kbl);
        if (op->kflags & RANGE_K_END) {
            op->kel = unpack_u32(&r);
            op->ke = pack_r_take(&r, op->kel);
        }
        if (!op->kflags) return false;
    }
    if (!unpack_done(&r) || op->space < 1 || op->space > RANGE_MAX_SPACES ||
        (op->mode != LOCK_SHARED && op->mode != LOCK_EXCLUSIVE) || (flags & ~RANGE_F_RDMA) ||
        op->lo > op->hi || timeout > 3600ull * NS_PER_S || !keys_ok(op))
        return false;
    op->rdma = flags & RANGE_F_RDMA;
    op->deadline = timeout ? clock_now_ns() + (int64_t)timeout : 0;
    return true;
}


static bool parse_unlock(struct fab_rpc_req *req, uint16_t *space, uint64_t *token, bool *cancel)
{
    struct pack_r r;
    pack_r_init(&r, fab_rpc_data(req), fab_rpc_len(req));
    *space = unpack_u16(&r);
    *token = unpack_u64(&r);
    uint8_t c = unpack_u8(&r);
    if (!unpack_done(&r) || *space < 1 || *space > RANGE_MAX_SPACES || c > 1) return false;
    *cancel = c;
    return true;
}

/* A new waiter arrived without the queue: let the combiner thread, which sweeps, know that it
 * has deadlines and holders to watch. */
static void wake_sweeper(struct range_server *s)
{
    pthread_mutex_lock(&s->qmu);
    bool wake = s->sleeping;
    pthread_mutex_unlock(&s->qmu);
    if (wake) pthread_cond_signal(&s->qcv);
}

/* Queues op for the combiner thread; false (nothing queued, op not freed) when the queue is
 * full (RANGE_MAX_QUEUED). */
static bool enqueue(struct range_server *s, struct qop *op)
{
    pthread_mutex_lock(&s->qmu);
    if (s->stop) {
        pthread_mutex_unlock(&s->qmu);
        respond(op->req, op->lw, RDKV_ESHUTDOWN, NULL, 0);
        free(op);
        return true;
    }
    if (s->nqueued >= RANGE_MAX_QUEUED) {
        pthread_mutex_unlock(&s->qmu);
        return false;
    }
    s->nqueued++;
    op->next = NULL;
    if (s->qtail) s->qtail->next = op;
    else s->qhead = op;
    s->qtail = op;
    bool wake = s->sleeping;
    pthread_mutex_unlock(&s->qmu);
    if (wake) pthread_cond_signal(&s->qcv);
    return true;
}

/* Combining without a hand-over: when the tables are free and nothing is queued, the handler
 * applies its request itself, as the combiner would have, in the same order (nothing queued
 * means nothing received earlier is still unapplied). Otherwise it queues the request for the
 * combiner thread. Returns true when applied. On this node the handlers all run on the service
 * thread, so under load the queue, not the lock, is what they meet. */
static bool try_apply(struct range_server *s, struct qop *op)
{
    if (pthread_mutex_trylock(&s->mu)) return false;
    pthread_mutex_lock(&s->qmu);
    bool go = !s->qhead && !s->stop;
    pthread_mutex_unlock(&s->qmu);
    if (go) {
        if (op->lock)
            do_lock(s, op, KIND_COMBINER);
        else
            do_unlock(s, op->req, op->lw, op->space, op->token, op->cancel);
        s->stats.direct++;
    }
    bool watch = go && op->lock && s->spaces[op->space].used &&
                 s->spaces[op->space].tab[KIND_COMBINER].waiting;
    pthread_mutex_unlock(&s->mu);
    if (watch) wake_sweeper(s);
    return go;
}

/* Applies a batch taken from the queue, in order (the tables held). */
static void apply_batch(struct range_server *s, struct qop *batch)
{
    if (batch) s->stats.batches++;
    while (batch) {
        struct qop *op = batch;
        batch = op->next;
        if (op->lock)
            do_lock(s, op, KIND_COMBINER);
        else
            do_unlock(s, op->req, op->lw, op->space, op->token, op->cancel);
        free(op);
    }
}

/* A requester of this process combines: it takes the tables (waiting briefly if the combiner
 * or another requester has them: nobody holds them across a wait), applies whatever is queued
 * in order, then its own request -- so a local lock or release never costs the hand-over to the
 * combiner thread and back, nor its wake-ups. */
static void combine_local(struct range_server *s, const struct qop *op)
{
    pthread_mutex_lock(&s->mu);
    pthread_mutex_lock(&s->qmu);
    struct qop *batch = s->qhead;
    s->qhead = s->qtail = NULL;
    s->nqueued = 0;
    bool stop = s->stop;
    pthread_mutex_unlock(&s->qmu);
    apply_batch(s, batch);
    if (stop) {
        pthread_mutex_unlock(&s->mu);
        respond(op->req, op->lw, RDKV_ESHUTDOWN, NULL, 0);
        return;
    }
    if (op->lock)
        do_lock(s, op, KIND_COMBINER);
    else
        do_unlock(s, op->req, op->lw, op->space, op->token, op->cancel);
    s->stats.direct++;
    bool watch = op->lock && s->spaces[op->space].used &&
                 s->spaces[op->space].tab[KIND_COMBINER].waiting;
    pthread_mutex_unlock(&s->mu);
    if (watch) wake_sweeper(s);
}

/* Applies a parsed request at once when it can (try_apply), else queues a copy for the
 * combiner thread; when the queue is full, the handler combines instead (waits for the tables,
 * applies the queue and its own request), so the queue stays bounded and no request is lost. */
static void submit(struct range_server *s, const struct qop *parsed)
{
    struct qop tmp = *parsed;
    if (try_apply(s, &tmp)) return;
    struct qop *op = malloc(sizeof *op);
    if (!op) {
        respond(parsed->req, parsed->lw, RDKV_ENOMEM, NULL, 0);
        return;
    }
    *op = *parsed;
    if (enqueue(s, op)) return;
    free(op);
    combine_local(s, parsed);
}

/* itree: the requester (a handler, or a local requester) applies its lock itself. */
static void itree_lock(struct range_server *s, const struct qop *op)
{
    pthread_mutex_lock(&s->mu);
    bool stopping = __atomic_load_n(&s->stop, __ATOMIC_ACQUIRE);
    if (!stopping) do_lock(s, op, KIND_ITREE);
    bool watch = !stopping && s->spaces[op->space].used &&
                 s->spaces[op->space].tab[KIND_ITREE].waiting;
    pthread_mutex_unlock(&s->mu);
    if (stopping) respond(op->req, op->lw, RDKV_ESHUTDOWN, NULL, 0);
    if (watch) wake_sweeper(s);
}

static void on_lock(struct fab_rpc_req *req, void *arg)
{
    struct qop op = {.req = req, .lock = true};
    if (!parse_lock(req, &op)) {
        fab_rpc_reply(req, RDKV_EINVAL, NULL, 0);
        return;
    }
    submit(arg, &op);
}

static void on_unlock(struct fab_rpc_req *req, void *arg)
{
    struct qop op = {.req = req};
    if (!parse_unlock(req, &op.space, &op.token, &op.cancel)) {
        fab_rpc_reply(req, RDKV_EINVAL, NULL, 0);
        return;
    }
    if (op.cancel) { /* a cancel's answer says whether the grant came first */
        submit(arg, &op);
        return;
    }
    /* A release is answered as soon as it is queued (as in the thesis): the queue is FIFO, so
     * it takes effect before anything this client sends next, and the client has nothing to
     * wait for (it sends releases one-way). Whether the owner evicted the hold, the client
     * judges from its own clock and the lease the grant carried. */
    op.req = NULL;
    submit(arg, &op);
    fab_rpc_reply(req, 0, NULL, 0);
}

static void on_ilock(struct fab_rpc_req *req, void *arg)
{
    struct qop op = {.req = req, .lock = true};
    if (!parse_lock(req, &op) || op.rdma) {
        fab_rpc_reply(req, RDKV_EINVAL, NULL, 0);
        return;
    }
    itree_lock(arg, &op);
}

static void on_iunlock(struct fab_rpc_req *req, void *arg)
{
    struct range_server *s = arg;
    uint16_t space;
    uint64_t token;
    bool cancel;
    if (!parse_unlock(req, &space, &token, &cancel)) {
        fab_rpc_reply(req, RDKV_EINVAL, NULL, 0);
        return;
    }
    pthread_mutex_lock(&s->mu);
    do_unlock(s, req, NULL, space, token, cancel);
    pthread_mutex_unlock(&s->mu);
}

/* The combiner: takes the whole queue, applies it under the table mutex, sweeps, sleeps. */
static void *combiner_main(void *arg)
{
    struct range_server *s = arg;
    int64_t next_sweep = 0;
    pthread_mutex_lock(&s->qmu);
    for (;;) {
        while (!s->qhead && !s->stop) {
            int64_t now = clock_now_ns();
            if (next_sweep && next_sweep <= now) break;
            /* Re-check for waiters at least every half lease: itree waiters arrive without
             * passing through the queue. */
            int64_t until = now + s->lease_ns / 2;
            if (next_sweep && next_sweep < until) until = next_sweep;
            struct timespec ts = clock_ts(until);
            s->sleeping = true;
            pthread_cond_timedwait(&s->qcv, &s->qmu, &ts);
            s->sleeping = false;
            if (!s->qhead) {
                pthread_mutex_unlock(&s->qmu);
                pthread_mutex_lock(&s->mu);
                next_sweep = sweep(s, clock_now_ns());
                pthread_mutex_unlock(&s->mu);
                pthread_mutex_lock(&s->qmu);
            }
        }
        /* Take the batch while holding the tables (lock order: mu, then qmu), so that a
         * handler that finds the tables free and the queue empty knows no batch is in flight
         * (see try_apply). */
        pthread_mutex_unlock(&s->qmu);
        pthread_mutex_lock(&s->mu);
        pthread_mutex_lock(&s->qmu);
        struct qop *batch = s->qhead;
        s->qhead = s->qtail = NULL;
        s->nqueued = 0;
        bool stop = s->stop;
        pthread_mutex_unlock(&s->qmu);
        apply_batch(s, batch);
        int64_t now = clock_now_ns();
        if (!next_sweep || next_sweep <= now) next_sweep = sweep(s, now);
        pthread_mutex_unlock(&s->mu);
        if (stop) break;
        pthread_mutex_lock(&s->qmu);
    }
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* The service. */

/* The range servers of this process, by fabric, so that a requester on the owner's own node
 * finds its server without the fabric (several nodes may share a process: tests, embedded
 * clusters). */
#define LOCAL_MAX 64
static pthread_mutex_t local_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    struct fabric *f;
    struct range_server *s;
} local_servers[LOCAL_MAX];

static void local_set(struct fabric *f, struct range_server *s)
{
    pthread_mutex_lock(&local_mu);
    for (unsigned i = 0; i < LOCAL_MAX; i++) {
        if (s && !local_servers[i].f) { /* a free entry */
            local_servers[i].f = f;
            local_servers[i].s = s;
            break;
        }
        if (!s && local_servers[i].f == f) {
            local_servers[i].f = NULL;
            local_servers[i].s = NULL;
            break;
        }
    }
    pthread_mutex_unlock(&local_mu);
}

static struct range_server *local_get(struct fabric *f)
{
    struct range_server *s = NULL;
    pthread_mutex_lock(&local_mu);
    for (unsigned i = 0; i < LOCAL_MAX && !s; i++)
        if (local_servers[i].f == f) s = local_servers[i].s;
    pthread_mutex_unlock(&local_mu);
    return s;
}

int range_server_start(struct fabric *f, int64_t lease_ns, struct range_server **out)
{
    struct range_server *s = calloc(1, sizeof *s);
    if (!s) return RDKV_ENOMEM;
    s->f = f;
    s->lease_ns = lease_ns > 0 ? lease_ns : 10 * NS_PER_MS;
    int rc = fab_region(f, "range.flags", (uint64_t)RANGE_FLAG_SLOTS * 64, 64, &s->flags_rptr);
    if (rc) {
        free(s);
        return rc;
    }
    s->flags = fab_local(f, s->flags_rptr);
    for (int i = RANGE_FLAG_SLOTS - 1; i >= 0; i--) s->free_flags[s->nfree_flags++] = i;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->qmu, NULL);
    clock_cond_init(&s->qcv);
    if (pthread_create(&s->thr, NULL, combiner_main, s)) {
        range_server_free(s);
        return RDKV_ENOMEM;
    }
    s->thread_started = true;
    /* The combiner's handlers only enqueue, and run on the RPC threads; itree's run inline on
     * the service thread, its one server thread. */
    if ((rc = fab_rpc_register(f, RANGE_RPC_LOCK, on_lock, s, FAB_RPC_INLINE)) ||
        (rc = fab_rpc_register(f, RANGE_RPC_UNLOCK, on_unlock, s, FAB_RPC_INLINE)) ||
        (rc = fab_rpc_register(f, RANGE_RPC_ILOCK, on_ilock, s, FAB_RPC_INLINE)) ||
        (rc = fab_rpc_register(f, RANGE_RPC_IUNLOCK, on_iunlock, s, FAB_RPC_INLINE))) {
        range_server_stop(s);
        range_server_free(s);
        return rc;
    }
    local_set(f, s);
    *out = s;
    return 0;
}

static uint64_t tree_nodes(unsigned depth)
{
    uint64_t n = 0, level = 1;
    for (unsigned d = 0; d <= depth; d++, level *= 4) n += level;
    return n;
}

int range_space_create(struct range_server *s, uint16_t id, const struct range_space_cfg *cfg)
{
    struct range_space_cfg c;
    if (cfg) c = *cfg;
    else range_space_cfg_init(&c);
    if (id < 1 || id > RANGE_MAX_SPACES || c.bits < 1 || c.bits > 64 || c.seg_bits > 14 ||
        c.seg_bits > c.bits || c.tree_depth < 1 || c.tree_depth > 7 || 2 * c.tree_depth > c.bits)
        return RDKV_EINVAL;
    pthread_mutex_lock(&s->mu);
    struct range_space *sp = &s->spaces[id];
    int rc = 0;
    if (sp->used) {
        rc = memcmp(&sp->cfg, &c, sizeof c) ? RDKV_EEXIST : 0;
        goto out;
    }
    uint64_t nodes = tree_nodes(c.tree_depth);
    uint64_t size = 64 + ((uint64_t)1 << c.seg_bits) * 64 + nodes * 64;
    char name[FAB_REGION_NAME_MAX + 1];
    snprintf(name, sizeof name, "range.%u", (unsigned)id);
    rptr r;
    rc = fab_region(s->f, name, size, 64, &r);
    if (rc) goto out;
    struct range_space_hdr *h = fab_local(s->f, r);
    h->bits = c.bits;
    h->seg_bits = c.seg_bits;
    h->tree_depth = c.tree_depth;
    h->nodes = nodes;
    __atomic_store_n(&h->magic, RANGE_SPACE_MAGIC, __ATOMIC_RELEASE);
    sp->cfg = c;
    sp->region = r;
    for (int k = 0; k < 2; k++) itv_init(&sp->tab[k].tree);
    sp->used = true;
out:
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int range_space_reset(struct range_server *s, uint16_t id)
{
    if (id < 1 || id > RANGE_MAX_SPACES) return RDKV_EINVAL;
    pthread_mutex_lock(&s->mu);
    struct range_space *sp = &s->spaces[id];
    int rc = RDKV_ENOTFOUND;
    if (sp->used) {
        struct range_space_hdr *h = fab_local(s->f, sp->region);
        uint64_t *w = (uint64_t *)(h + 1);
        uint64_t words = (((uint64_t)1 << h->seg_bits) + h->nodes) * 64 / 8;
        for (uint64_t i = 0; i < words; i++) __atomic_store_n(&w[i], 0, __ATOMIC_RELEASE);
        rc = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void range_server_stop(struct range_server *s)
{
    if (!s) return;
    local_set(s->f, NULL);
    pthread_mutex_lock(&s->qmu);
    __atomic_store_n(&s->stop, true, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&s->qmu);
    pthread_cond_signal(&s->qcv);
    if (s->thread_started) pthread_join(s->thr, NULL);
    s->thread_started = false;
    /* Waiters with an unanswered RPC learn that the service is gone. */
    pthread_mutex_lock(&s->mu);
    for (unsigned b = 0; b < TOKEN_BUCKETS; b++)
        for (struct rreq *r = s->tokens[b]; r; r = r->hnext)
            if (r->req || r->lw) {
                respond(r->req, r->lw, RDKV_ESHUTDOWN, NULL, 0);
                r->req = NULL;
                r->lw = NULL;
            }
    pthread_mutex_unlock(&s->mu);
}

void range_server_free(struct range_server *s)
{
    if (!s) return;
    for (unsigned b = 0; b < TOKEN_BUCKETS; b++)
        for (struct rreq *r = s->tokens[b], *n; r; r = n) {
            n = r->hnext;
            free(r);
        }
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->qmu);
    pthread_cond_destroy(&s->qcv);
    free(s);
}

int range_server_holds_key_x(struct range_server *s, uint16_t space, const void *key,
                             uint32_t klen, uint64_t token)
{
    uint64_t c = range_key_coord(key, klen);
    pthread_mutex_lock(&s->mu);
    const struct rreq *r = token_find(s, token, false);
    int held = r && r->granted && r->space == space && r->mode == LOCK_EXCLUSIVE &&
               r->itv.lo <= c && c <= r->itv.hi;
    if (held && r->kflags)
        held = key_cmp(r->kb, r->kbl, key, klen) <= 0 &&
               before_end(key, klen, r->kflags, r->ke, r->kel);
    pthread_mutex_unlock(&s->mu);
    return held;
}

int range_server_keep(struct range_server *s, uint16_t space, uint64_t token)
{
    pthread_mutex_lock(&s->mu);
    struct rreq *r = token_find(s, token, false);
    bool held = r && r->granted && r->space == space;
    if (held) r->granted_at = clock_now_ns();
    pthread_mutex_unlock(&s->mu);
    return held ? 0 : RDKV_ETIMEDOUT;
}

int range_server_release(struct range_server *s, uint16_t space, uint64_t token)
{
    pthread_mutex_lock(&s->mu);
    struct rreq *r = token_find(s, token, false);
    bool held = r && r->granted && r->space == space;
    if (held) do_unlock(s, NULL, NULL, space, token, false); /* (answers nobody) */
    pthread_mutex_unlock(&s->mu);
    return held ? 0 : RDKV_ETIMEDOUT;
}

void range_server_set_hook(struct range_server *s, range_grant_hook fn, void *arg)
{
    pthread_mutex_lock(&s->mu);
    s->hook = fn;
    s->hook_arg = arg;
    pthread_mutex_unlock(&s->mu);
}

void range_server_stats(struct range_server *s, struct range_server_stats *out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->stats;
    out->in_tables = s->nreqs;
    pthread_mutex_unlock(&s->mu);
}

/* ------------------------------------------------------------------------------------------ */
/* The client side. */

/* A lock request of this process's own node (arguments checked by check_args): submitted as
 * the service thread would (never the flag-polling variant: the answer comes at the grant),
 * answered in resp as by RPC. */
static int local_lock(struct range_server *s, uint16_t type, const struct range_handle *h,
                      enum lock_mode mode, int64_t deadline, struct fab_buf *resp)
{
    struct lwait lw;
    waiter_init(&lw.w);
    struct qop op = {.lw = &lw, .lock = true, .space = h->space, .mode = (uint8_t)mode,
                     .lo = h->lo, .hi = h->hi, .owner = h->owner, .deadline = deadline,
                     .kflags = h->kflags, .kb = h->kb, .kbl = h->kbl, .ke = h->ke, .kel = h->kel};
    if (!keys_ok(&op)) return RDKV_EINVAL;
    if (type == RANGE_RPC_ILOCK) itree_lock(s, &op);
    else combine_local(s, &op);
    /* The server answers every request: at the grant, at its deadline (the combiner thread
     * sweeps waiters), or at shutdown. */
    waiter_wait(&lw.w, 0);
    if (lw.status) return lw.status;
    if (resp->cap < lw.len) {
        void *d = realloc(resp->data, lw.len);
        if (!d) return RDKV_ENOMEM;
        resp->data = d;
        resp->cap = lw.len;
    }
    memcpy(resp->data, lw.data, lw.len);
    resp->len = lw.len;
    return 0;
}

/* A lock request to another node's server; it answers within `left` ns (0: no deadline). */
static int rpc_lock(struct range_handle *h, uint16_t type, enum lock_mode mode, bool rdma,
                    int64_t left, struct fab_buf *resp)
{
    struct pack_w w;
    pack_w_init(&w);
    pack_u16(&w, h->space);
    pack_u8(&w, (uint8_t)mode);
    pack_u8(&w, rdma ? RANGE_F_RDMA : 0);
    pack_u64(&w, h->lo);
    pack_u64(&w, h->hi);
    pack_u64(&w, (uint64_t)left);
    if (h->owner || h->kflags) pack_u64(&w, h->owner);
    if (h->kflags) {
        pack_u8(&w, h->kflags);
        pack_u32(&w, h->kbl);
        uint8_t *p = pack_w_room(&w, h->kbl);
        if (p && h->kbl) memcpy(p, h->kb, h->kbl);
        if (h->kflags & RANGE_K_END) {
            pack_u32(&w, h->kel);
            p = pack_w_room(&w, h->kel);
            if (p && h->kel) memcpy(p, h->ke, h->kel);
        }
    }
    /* The owner answers by the deadline; the RPC's own timeout only covers a lost node. */
    int64_t rpc_timeout = left ? left + 2 * NS_PER_S : 3600 * NS_PER_S;
    int rc = w.err ? RDKV_ENOMEM
                   : fab_rpc_call(h->t->c, h->node, type, w.p, w.len, resp, rpc_timeout);
    pack_w_free(&w);
    return rc;
}

static int send_lock(struct range_handle *h, uint16_t type, enum lock_mode mode, bool rdma,
                     int64_t deadline, uint8_t *state, uint64_t *flag_off)
{
    struct lock_thread *t = h->t;
    h->sent_at = clock_now_ns();
    /* A deadline already past (a no-wait bound of microseconds, overtaken by a preemption on a
     * busy machine) still tries once: the owner grants on arrival what nothing blocks, and gives
     * up at once otherwise. Refusing unsent would abort an uncontended transaction. */
    int64_t left = deadline ? deadline - h->sent_at : 0;
    if (deadline && left <= 0) left = 1;
    struct range_server *local = h->node == fab_node_id(t->f) ? local_get(t->f) : NULL;
    struct fab_buf resp = {0};
    int rc = local ? local_lock(local, type, h, mode, deadline, &resp)
                   : rpc_lock(h, type, mode, rdma, left, &resp);
    if (rc == 0) {
        struct pack_r r;
        pack_r_init(&r, resp.data, resp.len);
        h->token = unpack_u64(&r);
        *state = unpack_u8(&r);
        *flag_off = unpack_u64(&r);
        h->lease_ns = (int64_t)unpack_u64(&r);
        /* the grant came at least `waited` after the request arrived, so after this: */
        h->granted_min = h->sent_at + (int64_t)unpack_u64(&r);
        if (!unpack_done(&r) || (*state != RANGE_GRANTED && *state != RANGE_QUEUED)) rc = RDKV_EPROTO;
    }
    fab_buf_free(&resp);
    return rc;
}

/* The unlock message (u16 space, u64 token, u8 cancel, little-endian) into out; its length. */
static size_t unlock_msg(const struct range_handle *h, bool cancel, uint8_t out[11])
{
    pack_put_u16le(out, h->space);
    pack_put_u64le(out + 2, h->token);
    out[10] = cancel ? 1 : 0;
    return 11;
}

/* A release. Nothing in the answer is news (the owner queues or applies the release, or had
 * evicted the hold, which the caller judges), so it is not waited for: one message, no round
 * trip. The handlers run inline, in arrival order, so the release comes before anything this
 * thread asks the owner next. */
static int send_release(struct range_handle *h, uint16_t type)
{
    uint8_t m[11];
    struct range_server *s = h->node == fab_node_id(h->t->f) ? local_get(h->t->f) : NULL;
    if (!s) return fab_rpc_send(h->t->c, h->node, type, m, unlock_msg(h, false, m));
    /* this node's own server: applied now, after what is queued, with nobody to answer */
    struct qop op = {.space = h->space, .token = h->token};
    if (type == RANGE_RPC_IUNLOCK) {
        pthread_mutex_lock(&s->mu);
        do_unlock(s, NULL, NULL, op.space, op.token, false);
        pthread_mutex_unlock(&s->mu);
    } else {
        combine_local(s, &op);
    }
    return 0;
}

/* combiner-rdma: gives up a queued request; *was_granted when the grant came first (then the
 * request holds, and the caller releases it). */
static int send_cancel(struct range_handle *h, bool *was_granted)
{
    uint8_t m[11];
    struct fab_buf resp = {0};
    int rc = fab_rpc_call(h->t->c, h->node, RANGE_RPC_UNLOCK, m, unlock_msg(h, true, m), &resp, 0);
    *was_granted = rc == 0 && resp.len == 1 && ((uint8_t *)resp.data)[0] == RANGE_GRANTED;
    fab_buf_free(&resp);
    return rc;
}

static int check_args(struct range_handle *h, enum lock_mode mode)
{
    if (mode != LOCK_SHARED && mode != LOCK_EXCLUSIVE) return RDKV_ENOTSUP;
    if (h->mode || h->lo > h->hi || h->space < 1 || h->space > RANGE_MAX_SPACES) return RDKV_EINVAL;
    if (h->node >= fab_num_nodes(h->t->f)) return RDKV_EINVAL;
    return 0;
}

static int server_acquire(struct range_handle *h, enum lock_mode mode, int64_t deadline,
                          uint16_t type, bool rdma)
{
    int rc = check_args(h, mode);
    if (rc) return rc;
    uint8_t state;
    uint64_t flag_off;
    rc = send_lock(h, type, mode, rdma, deadline, &state, &flag_off);
    if (rc) {
        if (rc == RDKV_ETIMEDOUT) h->t->stats.timeouts++;
        return rc;
    }
    if (state == RANGE_GRANTED) {
        h->mode = (uint8_t)mode;
        return 0;
    }
    /* combiner-rdma, queued: READ the ready flag until it holds our token. The grant came
     * after the last READ that did not see it executed, so after that READ was sent. */
    rptr flag = rptr_make(h->node, flag_off);
    for (unsigned round = 0;; round++) {
        uint64_t v = 0;
        int64_t sent = clock_now_ns();
        rc = fab_read(h->t->c, flag, &v, sizeof v);
        if (rc) break;
        if (v == h->token) {
            h->mode = (uint8_t)mode;
            return 0;
        }
        h->granted_min = sent;
        if (deadline && clock_now_ns() >= deadline) {
            rc = RDKV_ETIMEDOUT;
            break;
        }
        lock_backoff(round < 5 ? round : 5);
    }
    /* Give the request up; if it was granted meanwhile, release it. */
    bool was_granted = false;
    if (send_cancel(h, &was_granted) == 0 && was_granted) send_release(h, RANGE_RPC_UNLOCK);
    if (rc == RDKV_ETIMEDOUT) h->t->stats.timeouts++;
    return rc;
}

static int server_release(struct range_handle *h, uint16_t type)
{
    if (!h->mode) return RDKV_EINVAL;
    h->mode = 0;
    /* The owner may evict a hold two of its leases after the grant, which came no earlier than
     * granted_min by our clock: past that, the hold may have been evicted. */
    bool outlived = h->lease_ns > 0 && clock_now_ns() - h->granted_min >= 2 * h->lease_ns;
    int rc = send_release(h, type);
    if (rc == 0 && outlived) rc = RDKV_ETIMEDOUT;
    if (rc == RDKV_ETIMEDOUT) h->t->stats.lease_expired++;
    return rc;
}

static int crpc_acquire(struct range_handle *h, enum lock_mode m, int64_t d)
{
    return server_acquire(h, m, d, RANGE_RPC_LOCK, false);
}
static int crdma_acquire(struct range_handle *h, enum lock_mode m, int64_t d)
{
    return server_acquire(h, m, d, RANGE_RPC_LOCK, true);
}
static int comb_release(struct range_handle *h) { return server_release(h, RANGE_RPC_UNLOCK); }
static int itree_acquire(struct range_handle *h, enum lock_mode m, int64_t d)
{
    return server_acquire(h, m, d, RANGE_RPC_ILOCK, false);
}
static int itree_release(struct range_handle *h) { return server_release(h, RANGE_RPC_IUNLOCK); }

#define SX (1u << LOCK_SHARED | 1u << LOCK_EXCLUSIVE)
const struct range_algo range_combiner_rpc = {.name = "combiner-rpc", .server_side = true,
                                              .modes = SX, .acquire = crpc_acquire,
                                              .release = comb_release};
const struct range_algo range_combiner_rdma = {.name = "combiner-rdma", .server_side = true,
                                               .modes = SX, .acquire = crdma_acquire,
                                               .release = comb_release};
const struct range_algo range_itree = {.name = "itree", .server_side = true, .modes = SX,
                                       .acquire = itree_acquire, .release = itree_release};
