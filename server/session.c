/* Remote sessions (server/session.h). The KV_RPC_SESSION handler runs on the node's service
 * thread: it opens sessions and routes every other request to its session, never blocking. A
 * session belongs to one of a few session threads; while it has requests to run or a
 * transaction open, a task of that thread runs it (as the transaction's coordinator, on a worker
 * borrowed from the thread's pool and the thread's shared fabric context), and otherwise it is a
 * small record and nothing else. Every request is decoded defensively: bad bytes get RDKV_EPROTO
 * and change nothing. */
#include "server/session.h"

#include "server/proto.h"
#include "txn/txn.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/pack.h"
#include "common/task.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/random.h>
#include <stdlib.h>
#include <string.h>

#define SES_STACK (128u << 10) /* a session task's stack (pages are touched only as used) */
#define SES_WORKERS_KEPT 64u   /* idle workers a session thread keeps for the next transaction */
#define SES_REAP_NS (NS_PER_S / 2)

struct sreq {
    struct sreq *next;
    struct fab_rpc_req *req;
};

struct sthread;
struct connrec;

/* A session. The fields above `w` are guarded by the service's mutex; those from `w` on belong
 * to the task running the session (there is at most one). */
struct session {
    struct session *hnext;        /* the service's hash chain */
    struct session *prev, *next;  /* its thread's sessions (for the idle reaper) */
    struct session *inext;        /* its thread's inbox: sessions waiting for a task */
    struct sthread *th;
    struct session *cprev, *cnext; /* its connection's sessions */
    struct connrec *cr;           /* its connection */
    struct ses_id sid;            /* 128 random bits */
    int64_t lock_timeout_ns;
    uint8_t conflict;             /* SES_CONFLICT_NODE: the node's */
    struct sreq *qhead, *qtail;
    struct task *task;            /* the task running it, or NULL */
    bool scheduled;               /* in the inbox, or its task is starting */
    bool closing;                 /* closed or reaped: requests get RDKV_ESESSION */
    bool unlinked;                /* out of the tables already: closed by its own SES_CLOSE */
    int64_t last;                 /* last request (clock_now_ns) */
    /* the running task's own */
    struct txn_worker *w;         /* while the session runs */
    struct txn *t;                /* the open transaction */
    struct txn_iter *it;          /* its open scan */
    bool oneshot;                 /* the open transaction is a one-shot scan's: commit at its end */
    uint64_t ts;                  /* the start timestamp of its last transaction */
    int ended;                    /* the open transaction was ended by the node: for idling
                                     (RDKV_EABORTED), or because it failed (its status): the
                                     answer to its later operations and its commit */
};

/* A session thread: a scheduler, the fabric context its tasks share, the dispatcher task that
 * starts a task for each session in the inbox, and the workers its tasks borrow. */
struct sthread {
    struct session_svc *svc;
    unsigned idx;
    pthread_t th;
    struct sched *s;
    struct fab_ctx *c;
    struct task *disp;
    struct session *inbox, *inbox_tail;
    struct session *sessions;     /* its sessions (list through prev/next) */
    unsigned tasks;               /* session tasks alive */
    int start_rc;                 /* 1 while starting */
    struct txn_worker **pool;     /* idle workers (the thread's tasks only) */
    unsigned npool;
};

/* A connection that opened sessions: they are its own, and end when it closes. */
struct connrec {
    struct connrec *next; /* the service's hash chain */
    uint64_t conn;        /* fab_rpc_conn */
    unsigned count;
    struct session *head;
};
#define CONN_BUCKETS 256u

struct session_svc {
    struct session_host h;
    unsigned max, per_conn;
    struct connrec *conns[CONN_BUCKETS];
    int64_t idle_ns;
    int64_t txn_idle_ns;
    pthread_mutex_t mu;
    pthread_cond_t cv;            /* thread start-up */
    struct session **buckets;
    unsigned nbuckets;            /* a power of two */
    unsigned count;               /* sessions open */
    unsigned nthreads;
    unsigned next_thread;
    struct sthread *threads;
    bool stop;
    /* the service thread's own (one-shot operations on this node's keys) */
    struct fab_ctx *inline_c;
    struct txn_worker *inline_w;
    uint64_t inline_ops;
    bool inline_busy;
};

/* Every answer is u32 status, then the op's bytes; the RPC's own status stays 0, so that the
 * client tells the node's answers (a participant is down: RDKV_EUNAVAILABLE) from a failure of
 * its link to this node. */
static void ses_reply(struct fab_rpc_req *req, int rc, const void *data, size_t len)
{
    uint8_t small[64];
    uint8_t *buf = len + 4 <= sizeof small ? small : malloc(len + 4);
    if (!buf) {
        rc = RDKV_ENOMEM;
        buf = small;
        len = 0;
    }
    pack_put_u32le(buf, (uint32_t)rc);
    if (len && !rc) memcpy(buf + 4, data, len);
    fab_rpc_reply(req, 0, buf, rc ? 4 : len + 4);
    if (buf != small) free(buf);
}

static void reply_status(struct fab_rpc_req *req, int rc) { ses_reply(req, rc, NULL, 0); }

/* Answers that grow with what an operation reads -- a value, a scan's batch, a SES_MULTI's
 * values -- are built in a writer whose first 4 bytes are the status's (w_open), checked
 * against the largest response the fabric sends (fab_rpc_reply_max) before each value goes in,
 * and handed to the fabric as they are (reply_w, no copy). So one request never makes the node
 * build more than that: a small SES_MULTI of GETs of a large value used to build its whole
 * answer (hundreds of MiB) only to have it refused by fab_rpc_reply. */
static void w_open(struct pack_w *w)
{
    pack_w_init(w);
    pack_u32(w, 0); /* the status, set by reply_w */
}

static void reply_w(struct fab_rpc_req *req, int rc, struct pack_w *w)
{
    if (!rc && w->err) rc = RDKV_ENOMEM;
    if (rc) {
        reply_status(req, rc);
        return;
    }
    pack_put_u32le(w->p, 0);
    fab_rpc_reply(req, 0, w->p, w->len);
}

/* Puts n bytes (u32 length, bytes) into the answer w when they keep it within max: 0, or
 * RDKV_ETOOBIG with *capped set and nothing put (RDKV_ENOMEM when the writer failed). */
static int put_capped(struct pack_w *w, const void *p, uint32_t n, size_t max, bool *capped)
{
    if (w->len + 4 + (size_t)n > max) {
        *capped = true;
        return RDKV_ETOOBIG;
    }
    pack_u32(w, n);
    uint8_t *d = pack_w_room(w, n);
    if (d && n) memcpy(d, p, n);
    return w->err ? RDKV_ENOMEM : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* The table of sessions (under the service's mutex). */

/* The first 8 bytes of an id (random: they spread the buckets, and name it in the log). */
static uint64_t sid_head(const struct ses_id *sid)
{
    uint64_t v;
    memcpy(&v, sid->b, sizeof v);
    return v;
}

static unsigned bucket_of(const struct session_svc *s, const struct ses_id *sid)
{
    return (unsigned)(sid_head(sid) >> 32) & (s->nbuckets - 1);
}

static struct session *find(struct session_svc *s, const struct ses_id *sid)
{
    for (struct session *x = s->buckets[bucket_of(s, sid)]; x; x = x->hnext)
        if (!memcmp(x->sid.b, sid->b, SES_ID_LEN)) return x;
    return NULL;
}

static struct connrec **conn_find(struct session_svc *s, uint64_t conn)
{
    struct connrec **pp = &s->conns[(conn * 0x9E3779B97F4A7C15ull) >> 56];
    while (*pp && (*pp)->conn != conn) pp = &(*pp)->next;
    return pp;
}

/* Links x into the tables, as a session of connection cr. */
static void link_session(struct session_svc *s, struct session *x, struct connrec *cr)
{
    unsigned b = bucket_of(s, &x->sid);
    x->hnext = s->buckets[b];
    s->buckets[b] = x;
    x->cr = cr;
    x->cprev = NULL;
    x->cnext = cr->head;
    if (cr->head) cr->head->cprev = x;
    cr->head = x;
    cr->count++;
    struct sthread *th = x->th;
    x->prev = NULL;
    x->next = th->sessions;
    if (th->sessions) th->sessions->prev = x;
    th->sessions = x;
    s->count++;
    metrics_add(MC_SESSIONS_OPENED, 1);
}

static void unlink_session(struct session_svc *s, struct session *x)
{
    for (struct session **pp = &s->buckets[bucket_of(s, &x->sid)]; *pp; pp = &(*pp)->hnext)
        if (*pp == x) {
            *pp = x->hnext;
            break;
        }
    struct connrec *cr = x->cr;
    if (x->cprev) x->cprev->cnext = x->cnext;
    else cr->head = x->cnext;
    if (x->cnext) x->cnext->cprev = x->cprev;
    if (!--cr->count) {
        struct connrec **pp = conn_find(s, cr->conn);
        *pp = cr->next;
        free(cr);
    }
    struct sthread *th = x->th;
    if (x->prev) x->prev->next = x->next;
    else th->sessions = x->next;
    if (x->next) x->next->prev = x->prev;
    s->count--;
    metrics_add(MC_SESSIONS_CLOSED, 1);
}

/* Takes the queued requests of x (to answer them after unlocking). */
static struct sreq *take_queue(struct session *x)
{
    struct sreq *q = x->qhead;
    x->qhead = x->qtail = NULL;
    return q;
}

static void refuse_all(struct sreq *q, int rc)
{
    while (q) {
        struct sreq *n = q->next;
        reply_status(q->req, rc);
        free(q);
        q = n;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Workers, borrowed from the session thread's pool by the task running a session. */

static int worker_get(struct session *x)
{
    struct sthread *th = x->th;
    if (!x->w) {
        if (th->npool) {
            x->w = th->pool[--th->npool];
        } else {
            int rc = txn_worker_create_on(th->svc->h.txn, th->c, &x->w);
            if (rc) return rc;
        }
    }
    txn_worker_set_lock_timeout(x->w, x->lock_timeout_ns);
    txn_worker_set_conflict(x->w, x->conflict == SES_CONFLICT_NODE ? -1 : x->conflict);
    return 0;
}

static void worker_put(struct session *x)
{
    struct sthread *th = x->th;
    if (!x->w) return;
    if (th->npool < SES_WORKERS_KEPT) th->pool[th->npool++] = x->w;
    else txn_worker_destroy(x->w);
    x->w = NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Operations, in the session's task. */

static void end_txn(struct session *x)
{
    if (x->it) {
        txn_iter_close(x->it);
        x->it = NULL;
    }
    if (x->t) {
        txn_abort(x->t);
        x->t = NULL;
    }
    x->oneshot = false;
}

static int commit_txn(struct session *x)
{
    if (x->it) {
        txn_iter_close(x->it);
        x->it = NULL;
    }
    int rc = txn_commit(x->t);
    x->t = NULL;
    x->oneshot = false;
    return rc;
}

/* A retry keeps the start timestamp of the session's last transaction (the wait-die order). */
static int begin_txn(struct session *x, bool retry)
{
    end_txn(x); /* a client that lost track of its transaction starts afresh */
    x->ended = 0;
    int rc = worker_get(x);
    if (!rc) rc = txn_begin(x->w, &x->t);
    if (rc) {
        x->t = NULL;
        return rc;
    }
    if (retry && x->ts) txn_keep_ts(x->t, x->ts);
    x->ts = txn_start_ts(x->t);
    return 0;
}

/* An operation whose answer would pass the largest response (put_capped) failed with
 * RDKV_ETOOBIG, and so has its transaction, as one past --txn-max-bytes does (rdkv.h): it is
 * aborted now, its locks released before the answer goes, and its later operations and its
 * commit answer RDKV_ETOOBIG; the session goes on (its next BEGIN starts afresh). */
static void fail_toobig(struct session *x)
{
    end_txn(x);
    x->ended = RDKV_ETOOBIG;
}

/* The next batch of the open scan, into w (u8 more, u32 n, rows), at most max bytes in all (a
 * batch stops at SES_BATCH_BYTES anyway; a row that alone would pass max is RDKV_ETOOBIG, with
 * *capped set). *done: the scan ended. */
static int fill_batch(struct session *x, struct pack_w *w, size_t max, bool *capped, bool *done)
{
    size_t at = w->len;
    pack_u8(w, 0);
    pack_u32(w, 0);
    uint32_t n = 0;
    bool more = false;
    while (x->it) {
        if (n >= SES_BATCH_ROWS || w->len - at >= SES_BATCH_BYTES) {
            more = true;
            break;
        }
        const void *k, *v;
        uint32_t kl, vl;
        int r = txn_iter_next(x->it, &k, &kl, &v, &vl);
        if (r < 0) return r;
        if (r == 0) break;
        if (w->len + 4 + (size_t)kl > max) {
            *capped = true;
            return RDKV_ETOOBIG;
        }
        pack_bytes(w, k, kl);
        if ((r = put_capped(w, v, vl, max, capped))) return r;
        n++;
    }
    if (w->err) return RDKV_ENOMEM;
    w->p[at] = more;
    pack_put_u32le(w->p + at + 1, n);
    *done = !more;
    return 0;
}

/* Answers with the scan's next batch; a one-shot scan's transaction commits after its last. */
static void send_batch(struct session *x, struct fab_rpc_req *req)
{
    struct pack_w w;
    w_open(&w);
    bool done = false, capped = false;
    int rc = fill_batch(x, &w, fab_rpc_reply_max(req), &capped, &done);
    if (!rc && done) {
        txn_iter_close(x->it);
        x->it = NULL;
        if (x->oneshot) rc = commit_txn(x);
    }
    if (rc && x->oneshot) end_txn(x);
    else if (capped) fail_toobig(x);
    reply_w(req, rc, &w);
    pack_w_free(&w);
}

/* Every node's status as this node sees it. */
static void cluster_status(struct session *x, struct fab_rpc_req *req)
{
    char *js = x->th->svc->h.status_json(x->th->svc->h.arg, x->th->c);
    if (!js) {
        reply_status(req, RDKV_ENOMEM);
        return;
    }
    ses_reply(req, 0, js, strlen(js));
    free(js);
}

/* The one-shot ending of a GET/PUT/DEL: commit when the operation succeeded (or found the key
 * absent, which is an answer), abort otherwise. Returns the status to answer. */
static int oneshot_end(struct session *x, int rc)
{
    if (rc == 0 || rc == RDKV_ENOTFOUND) {
        int crc = commit_txn(x);
        return crc ? crc : rc;
    }
    end_txn(x);
    return rc;
}

/* A request, decoded (its bytes stay in the request). */
struct sop {
    uint8_t op, flags;
    uint8_t flag; /* GET: for update; SCAN: has an end; PATCH: want the old value */
    const uint8_t *k, *v, *e;
    uint32_t kl, vl, el;
    uint64_t limit; /* SCAN: rows; PATCH: the offset */
};

/* The fields of o->op from r (errors: r->err). */
static void sop_fields(struct pack_r *r, struct sop *o)
{
    switch (o->op) {
    case SES_GET:
        o->flag = unpack_u8(r);
        o->k = unpack_bytes(r, &o->kl);
        if (o->flag > 1) r->err = true;
        break;
    case SES_PUT:
        o->k = unpack_bytes(r, &o->kl);
        o->v = unpack_bytes(r, &o->vl);
        break;
    case SES_DEL: o->k = unpack_bytes(r, &o->kl); break;
    case SES_PATCH:
        o->flag = unpack_u8(r);
        o->k = unpack_bytes(r, &o->kl);
        o->limit = unpack_u32(r);
        o->v = unpack_bytes(r, &o->vl);
        if (o->flag > 1) r->err = true;
        break;
    case SES_SCAN:
        o->k = unpack_bytes(r, &o->kl);
        o->flag = unpack_u8(r);
        o->e = unpack_bytes(r, &o->el);
        o->limit = unpack_u64(r);
        if (o->flag > 1) r->err = true;
        break;
    default: break;
    }
}

/* false: malformed. A SES_MULTI's items are left in the reader (o->limit: their count). */
static bool sop_decode(struct fab_rpc_req *req, struct sop *o, struct pack_r *r)
{
    pack_r_init(r, fab_rpc_data(req), fab_rpc_len(req));
    pack_r_take(r, SES_ID_LEN); /* the session id, checked by the router */
    uint8_t opb = unpack_u8(r);
    *o = (struct sop){.op = opb & SES_OP_MASK, .flags = opb & ~SES_OP_MASK};
    if (o->op == SES_MULTI) {
        o->limit = unpack_u16(r);
        return !r->err && o->limit >= 1 && o->limit <= SES_MULTI_MAX;
    }
    sop_fields(r, o);
    return unpack_done(r);
}

/* A SES_MULTI's n items, decoded whole before any runs (malloc'd; NULL: malformed, *rc says
 * whether for lack of memory). */
static struct sop *multi_decode(struct pack_r *r, unsigned n, int *rc)
{
    struct sop *items = calloc(n, sizeof *items);
    if (!items) {
        *rc = RDKV_ENOMEM;
        return NULL;
    }
    for (unsigned i = 0; i < n && !r->err; i++) {
        items[i].op = unpack_u8(r);
        if (!ses_op_is_key(items[i].op)) r->err = true;
        else sop_fields(r, &items[i]);
    }
    if (!unpack_done(r)) {
        free(items);
        *rc = RDKV_EPROTO;
        return NULL;
    }
    return items;
}

static void run_txn_op(struct session *x, struct fab_rpc_req *req, uint8_t op, bool one,
                       uint8_t flag, const uint8_t *k, uint32_t kl, const uint8_t *v, uint32_t vl,
                       const uint8_t *e, uint32_t el, uint64_t limit);

/* SES_PATCH in t: the answer's bytes (the old value when want_old) go to w, within max (else
 * RDKV_ETOOBIG, *capped), copied before a commit ends what they point into. */
static int patch_op(struct txn *t, uint8_t want_old, const uint8_t *k, uint32_t kl, uint32_t off,
                    const uint8_t *v, uint32_t vl, struct pack_w *w, size_t max, bool *capped)
{
    const void *old;
    uint32_t oldlen;
    int rc = txn_patch(t, k, kl, off, v, vl, want_old ? &old : NULL, &oldlen);
    if (!rc && want_old) rc = put_capped(w, old, oldlen, max, capped);
    return rc;
}

/* One item of a SES_MULTI in t: its status (0 or RDKV_ENOTFOUND go on), its bytes into w, the
 * answer staying within max (else RDKV_ETOOBIG, *capped). */
static int multi_item(struct txn *t, const struct sop *o, struct pack_w *w, size_t max,
                      bool *capped)
{
    const void *val;
    uint32_t vlen;
    if (w->len + 4 > max) {
        *capped = true;
        return RDKV_ETOOBIG;
    }
    size_t at = w->len;
    pack_u32(w, 0); /* the item's status, filled in below */
    int rc;
    switch (o->op) {
    case SES_GET:
        rc = txn_get(t, o->k, o->kl, o->flag, &val, &vlen);
        if (!rc) rc = put_capped(w, val, vlen, max, capped);
        break;
    case SES_PUT: rc = txn_put(t, o->k, o->kl, o->v, o->vl); break;
    case SES_DEL: rc = txn_del(t, o->k, o->kl); break;
    default:
        rc = patch_op(t, o->flag, o->k, o->kl, (uint32_t)o->limit, o->v, o->vl, w, max, capped);
        break;
    }
    if (!rc && w->err) rc = RDKV_ENOMEM;
    if (!w->err) pack_put_u32le(w->p + at, (uint32_t)rc);
    return rc;
}

/* SES_MULTI (server/proto.h): the items in order; the first failure ends the run. The answer is
 * bounded while it is built: the item whose bytes would take it past the largest response ends
 * the run with RDKV_ETOOBIG, and the transaction has then failed (fail_toobig). */
static void run_multi(struct session *x, struct fab_rpc_req *req, struct sop *items, unsigned n,
                      bool one)
{
    size_t max = fab_rpc_reply_max(req);
    struct pack_w w;
    w_open(&w);
    pack_u16(&w, (uint16_t)n);
    int rc = 0;
    bool capped = false;
    for (unsigned i = 0; i < n && (rc == 0 || rc == RDKV_ENOTFOUND); i++)
        rc = multi_item(x->t, &items[i], &w, max, &capped);
    if (rc == RDKV_ENOTFOUND) rc = 0;
    if (one) rc = oneshot_end(x, rc);
    else if (capped) fail_toobig(x);
    reply_w(req, rc, &w);
    pack_w_free(&w);
}

static void run_op(struct session *x, struct fab_rpc_req *req)
{
    struct sop o;
    struct pack_r pr;
    if (!sop_decode(req, &o, &pr)) {
        reply_status(req, RDKV_EPROTO);
        return;
    }
    struct sop *items = NULL;
    if (o.op == SES_MULTI) {
        int mrc = 0;
        if (!(items = multi_decode(&pr, (unsigned)o.limit, &mrc))) {
            reply_status(req, mrc);
            return;
        }
    }
    uint8_t op = o.op, flags = o.flags, flag = o.flag;
    const uint8_t *k = o.k, *v = o.v, *e = o.e;
    uint32_t kl = o.kl, vl = o.vl, el = o.el;
    uint64_t limit = o.limit;
    switch (op) {
    case SES_CLOSE: {
        end_txn(x);
        /* Its place is free before the answer says it is closed: a client that opens another
         * session on hearing it must find room (--max-sessions), even when this task is slow
         * to finish. Its task frees it when done. */
        struct session_svc *svc = x->th->svc;
        pthread_mutex_lock(&svc->mu);
        if (!x->unlinked) unlink_session(svc, x);
        x->unlinked = true;
        pthread_mutex_unlock(&svc->mu);
        reply_status(req, 0);
        return;
    }
    case SES_BEGIN: reply_status(req, begin_txn(x, flags & SES_F_RETRY)); return;
    case SES_STATUS: cluster_status(x, req); return;
    default: break;
    }
    int rc = 0;
    if (flags & SES_F_BEGIN) rc = begin_txn(x, flags & SES_F_RETRY);
    else if (!x->t)
        /* no transaction open: it was aborted for idling (retryable), or never begun */
        rc = op == SES_ABORT ? 0 : x->ended ? x->ended : RDKV_EINVAL;
    if (rc || !x->t) {
        free(items);
        reply_status(req, rc);
        return;
    }
    bool one = flags & SES_F_COMMIT;
    if (items) {
        run_multi(x, req, items, (unsigned)limit, one);
        free(items);
    } else {
        run_txn_op(x, req, op, one, flag, k, kl, v, vl, e, el, limit);
    }
    /* A transaction that failed (a lock wait ran out, a conflict) holds no lock any more, but
     * tickets it gave up wait in its worker until handed on: end it now rather than at the
     * client's next BEGIN, after its back-off. Its later operations get its status. */
    if (x->t && txn_failed(x->t)) {
        int f = txn_failed(x->t);
        end_txn(x);
        x->ended = f;
    }
}

static void run_txn_op(struct session *x, struct fab_rpc_req *req, uint8_t op, bool one,
                       uint8_t flag, const uint8_t *k, uint32_t kl, const uint8_t *v, uint32_t vl,
                       const uint8_t *e, uint32_t el, uint64_t limit)
{
    const void *val;
    uint32_t vlen;
    int rc;
    switch (op) {
    case SES_GET: {
        rc = one && !flag ? txn_get_once(x->t, k, kl, &val, &vlen)
                          : txn_get(x->t, k, kl, flag, &val, &vlen);
        struct pack_w w;
        w_open(&w);
        bool capped = false;
        /* (copied before a commit ends what val points into) */
        if (!rc) rc = put_capped(&w, val, vlen, fab_rpc_reply_max(req), &capped);
        if (one) rc = oneshot_end(x, rc);
        else if (capped) fail_toobig(x);
        reply_w(req, rc, &w);
        pack_w_free(&w);
        return;
    }
    case SES_PUT:
        rc = txn_put(x->t, k, kl, v, vl);
        reply_status(req, one ? oneshot_end(x, rc) : rc);
        return;
    case SES_PATCH: {
        struct pack_w w;
        w_open(&w);
        bool capped = false;
        rc = patch_op(x->t, flag, k, kl, (uint32_t)limit, v, vl, &w, fab_rpc_reply_max(req),
                      &capped);
        if (one) rc = oneshot_end(x, rc);
        else if (capped) fail_toobig(x);
        reply_w(req, rc, &w);
        pack_w_free(&w);
        return;
    }
    case SES_DEL:
        rc = txn_del(x->t, k, kl);
        reply_status(req, one ? oneshot_end(x, rc) : rc);
        return;
    case SES_SCAN:
        if (x->it) txn_iter_close(x->it);
        x->it = NULL;
        x->oneshot = one;
        rc = txn_scan(x->t, k, kl, flag ? e : NULL, el, limit, &x->it);
        if (rc) {
            if (one) end_txn(x);
            reply_status(req, rc);
        } else {
            send_batch(x, req);
        }
        return;
    case SES_SCAN_NEXT:
        if (!x->it) reply_status(req, RDKV_EINVAL);
        else send_batch(x, req);
        return;
    case SES_COMMIT: reply_status(req, commit_txn(x)); return;
    case SES_ABORT:
        end_txn(x);
        reply_status(req, 0);
        return;
    default: reply_status(req, RDKV_EPROTO); return;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* One-shot operations on this node's own keys, on the service thread. */

/* A one-shot GET, PUT, PATCH or DELETE of a key this node owns, for a session with nothing queued or
 * running, is tried at once on the service thread, sparing the hops to a session thread and
 * back: every lock it needs is this node's (CPU atomics, the local range server), its row is
 * read with loads and its commit is local, so it issues no fabric operation. Its lock waits are
 * bounded by INLINE_LOCK_NS (a row lock only tries, taking no ticket it cannot use at once); one
 * that does not get its locks in time aborts (nothing happened)
 * and the request goes to the session's task as any other. */
#define INLINE_LOCK_NS (10 * NS_PER_US) /* rwlock then only tries (rwlock.c, TRY_ONLY_NS) */

static bool inline_fits(struct session_svc *s, const struct sop *o)
{
    if (o->flags != (SES_F_BEGIN | SES_F_COMMIT) || !s->inline_w) return false;
    if (!ses_op_is_key(o->op)) return false;
    struct txn_env *e = s->h.txn;
    return txn_env_owner(e, txn_partition(e, o->k, o->kl)) == s->h.me;
}

/* Runs o inline and answers: true. false: it met a lock it could not take in time (nothing
 * happened, nothing was answered). */
static bool inline_run(struct session_svc *s, const struct sop *o, struct fab_rpc_req *req)
{
    struct txn *t;
    if (txn_begin(s->inline_w, &t)) return false;
    struct pack_w w;
    w_open(&w);
    size_t max = fab_rpc_reply_max(req);
    bool capped = false; /* (a one-shot: aborted below like any failure) */
    int rc;
    if (o->op == SES_GET) {
        const void *val;
        uint32_t vlen;
        rc = txn_get(t, o->k, o->kl, o->flag, &val, &vlen);
        if (!rc) rc = put_capped(&w, val, vlen, max, &capped);
    } else if (o->op == SES_PUT) {
        rc = txn_put(t, o->k, o->kl, o->v, o->vl);
    } else if (o->op == SES_PATCH) {
        rc = patch_op(t, o->flag, o->k, o->kl, (uint32_t)o->limit, o->v, o->vl, &w, max,
                      &capped);
    } else {
        rc = txn_del(t, o->k, o->kl);
    }
    if (rc == 0 || rc == RDKV_ENOTFOUND) {
        int crc = txn_commit(t);
        if (crc) rc = crc;
    } else {
        txn_abort(t);
    }
    bool done = rc != RDKV_EABORTED;
    if (done) {
        s->inline_ops++;
        reply_w(req, rc, &w);
    }
    pack_w_free(&w);
    return done;
}

/* ------------------------------------------------------------------------------------------ */
/* The tasks of a session thread. */

/* Runs one session while it has requests or an open transaction. A transaction left idle half a
 * lease is aborted: its remote locks must not outlive their lease (the release would then be
 * skipped, and waiters would have to reset them). */
static void session_task(void *arg)
{
    struct session *x = arg;
    struct sthread *th = x->th;
    struct session_svc *s = th->svc;
    pthread_mutex_lock(&s->mu);
    x->task = task_self();
    x->scheduled = false;
    for (;;) {
        struct sreq *q = x->qhead;
        if (q) {
            x->qhead = q->next;
            if (!x->qhead) x->qtail = NULL;
            pthread_mutex_unlock(&s->mu);
            run_op(x, q->req);
            free(q);
            pthread_mutex_lock(&s->mu);
            continue;
        }
        if (!x->t || s->stop || x->closing) {
            if (!x->t && !x->it && !x->w) break;
            /* let go of the transaction and the worker (may wait), then look again */
            pthread_mutex_unlock(&s->mu);
            end_txn(x);
            worker_put(x);
            pthread_mutex_lock(&s->mu);
            continue;
        }
        int64_t until = x->last + s->txn_idle_ns;
        pthread_mutex_unlock(&s->mu);
        if (clock_now_ns() >= until) {
            log_info("session %llx...: transaction idle for %.1f s: aborted",
                     (unsigned long long)sid_head(&x->sid), (double)s->txn_idle_ns / 1e9);
            end_txn(x);
            x->ended = RDKV_EABORTED;
        } else {
            task_park(until);
        }
        pthread_mutex_lock(&s->mu);
    }
    /* nothing queued, no transaction, no worker: the session is a record again (or gone) */
    bool closed = x->closing;
    if (closed && !x->unlinked) unlink_session(s, x);
    x->task = NULL;
    th->tasks--;
    if (s->stop && !th->tasks) task_wake(th->disp);
    pthread_mutex_unlock(&s->mu);
    if (closed) free(x);
}

/* Starts a task for every session in the thread's inbox, closes sessions idle too long, and at
 * the node's stop waits for the session tasks and frees what is left. */
static void dispatch_task(void *arg)
{
    struct sthread *th = arg;
    struct session_svc *s = th->svc;
    int64_t next_reap = clock_now_ns() + SES_REAP_NS;
    pthread_mutex_lock(&s->mu);
    th->disp = task_self();
    pthread_cond_broadcast(&s->cv); /* session_svc_start waits for it */
    for (;;) {
        struct session *x = th->inbox;
        th->inbox = th->inbox_tail = NULL;
        while (x) {
            struct session *n = x->inext;
            x->inext = NULL;
            th->tasks++;
            if (task_spawn(th->s, session_task, x, SES_STACK)) {
                th->tasks--;
                x->scheduled = false;
                struct sreq *q = take_queue(x);
                pthread_mutex_unlock(&s->mu);
                refuse_all(q, RDKV_ENOMEM);
                pthread_mutex_lock(&s->mu);
            }
            x = n;
        }
        if (s->stop) {
            if (!th->tasks && !th->inbox) break;
            pthread_mutex_unlock(&s->mu);
            task_park(clock_now_ns() + 10 * NS_PER_MS);
            pthread_mutex_lock(&s->mu);
            continue;
        }
        int64_t now = clock_now_ns();
        if (now >= next_reap) {
            for (struct session *y = th->sessions, *n; y; y = n) {
                n = y->next;
                if (y->task || y->scheduled || now - y->last < s->idle_ns) continue;
                log_info("session %llx... idle for %.0f s: closed",
                         (unsigned long long)sid_head(&y->sid), (double)s->idle_ns / 1e9);
                unlink_session(s, y);
                free(y);
            }
            next_reap = now + SES_REAP_NS;
        }
        if (th->inbox) continue;
        pthread_mutex_unlock(&s->mu);
        task_park(next_reap);
        pthread_mutex_lock(&s->mu);
    }
    /* stopping, and no session task left: free the sessions (their queues were answered) */
    struct session *x = th->sessions;
    th->sessions = NULL;
    struct sreq *left = NULL;
    for (struct session *y = x; y; y = y->next) {
        struct sreq *q = take_queue(y);
        while (q) {
            struct sreq *n = q->next;
            q->next = left;
            left = q;
            q = n;
        }
    }
    pthread_mutex_unlock(&s->mu);
    refuse_all(left, RDKV_ESHUTDOWN);
    while (x) {
        struct session *n = x->next;
        free(x);
        x = n;
    }
}

static void *sthread_main(void *arg)
{
    struct sthread *th = arg;
    struct session_svc *s = th->svc;
    int rc = sched_create(&th->s);
    if (!rc) rc = fab_ctx_create(s->h.f, &th->c);
    if (!rc) {
        /* a session thread's tasks wait for other nodes' answers: polling for them takes the
         * CPU those nodes need to answer (remote transfers: +30-50% blocking at once, 3 nodes
         * on 2 cores); its clients' requests are a network hop away anyway */
        fab_ctx_set_spin(th->c, 0);
        fab_ctx_attach(th->c, th->s);
        rc = task_spawn(th->s, dispatch_task, th, 0);
    }
    pthread_mutex_lock(&s->mu);
    th->start_rc = rc;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (!rc) sched_run(th->s);
    while (th->npool) txn_worker_destroy(th->pool[--th->npool]);
    if (th->c) {
        fab_ctx_attach(th->c, NULL);
        fab_ctx_destroy(th->c);
    }
    if (th->s) sched_destroy(th->s);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* The router, on the service thread: it must not block. */

static void on_session(struct fab_rpc_req *req, void *arg)
{
    struct session_svc *s = arg;
    struct pack_r r;
    pack_r_init(&r, fab_rpc_data(req), fab_rpc_len(req));
    struct ses_id sid = {{0}};
    const uint8_t *sidp = pack_r_take(&r, SES_ID_LEN);
    if (sidp) memcpy(sid.b, sidp, SES_ID_LEN);
    uint8_t opb = unpack_u8(&r);
    uint64_t conn = fab_rpc_conn(req);
    uint8_t op = opb & SES_OP_MASK, flags = opb & ~SES_OP_MASK;
    bool flags_ok = !flags || ((ses_op_is_key(op) || op == SES_SCAN || op == SES_MULTI) &&
                               (!(flags & SES_F_RETRY) || (flags & SES_F_BEGIN))) ||
                    (op == SES_BEGIN && flags == SES_F_RETRY);
    if (r.err || op < SES_OPEN || op > SES_MULTI || !flags_ok) {
        reply_status(req, RDKV_EPROTO);
        return;
    }
    if (op == SES_OPEN) {
        uint64_t lto = unpack_u64(&r);
        uint8_t conflict = unpack_u8(&r);
        static const struct ses_id none;
        if (!unpack_done(&r) || memcmp(sid.b, none.b, SES_ID_LEN) ||
            (conflict != SES_CONFLICT_NODE && conflict > TXN_CONFLICT_NO_WAIT)) {
            reply_status(req, RDKV_EPROTO);
            return;
        }
        struct session *x = calloc(1, sizeof *x);
        int rc = x ? 0 : RDKV_ENOMEM;
        /* 128 random bits from the kernel's CSPRNG (16 bytes never block once it is seeded,
         * nor return short) */
        if (!rc && getrandom(x->sid.b, SES_ID_LEN, 0) != (ssize_t)SES_ID_LEN) {
            log_error("session refused: getrandom: %s", strerror(errno));
            rc = RDKV_EIO;
        }
        pthread_mutex_lock(&s->mu);
        struct connrec **crp = conn_find(s, conn), *cr = *crp;
        bool per_conn = false;
        if (!rc && s->stop) rc = RDKV_ESHUTDOWN;
        if (!rc && s->count >= s->max) rc = RDKV_EBUSY;
        if (!rc && cr && cr->count >= s->per_conn) {
            rc = RDKV_EBUSY;
            per_conn = true;
        }
        if (!rc && (find(s, &x->sid) || !memcmp(x->sid.b, none.b, SES_ID_LEN)))
            rc = RDKV_EBUSY; /* (2^-128: never) */
        if (!rc && !cr) {
            if (!(cr = calloc(1, sizeof *cr))) rc = RDKV_ENOMEM;
            else {
                cr->conn = conn;
                *crp = cr;
            }
        }
        if (!rc) {
            x->th = &s->threads[s->next_thread++ % s->nthreads];
            x->lock_timeout_ns = lto > 3600ull * NS_PER_S ? 0 : (int64_t)lto;
            x->conflict = conflict;
            x->last = clock_now_ns();
            link_session(s, x, cr);
            sid = x->sid;
        }
        pthread_mutex_unlock(&s->mu);
        if (rc) {
            free(x);
            if (rc == RDKV_EBUSY && per_conn)
                log_info("session refused: the connection holds %u sessions "
                         "(--sessions-per-conn)", s->per_conn);
            else if (rc == RDKV_EBUSY)
                log_info("session refused: %u sessions open (--max-sessions)", s->max);
            reply_status(req, rc);
            return;
        }
        /* the session id, and the cluster's nodes: a client sends a one-shot operation
         * straight to its key's owner */
        const struct cluster_config *cc = fab_cluster(s->h.f);
        struct pack_w w;
        pack_w_init(&w);
        uint8_t *d = pack_w_room(&w, SES_ID_LEN);
        if (d) memcpy(d, sid.b, SES_ID_LEN);
        pack_u16(&w, s->h.me);
        pack_u16(&w, (uint16_t)cc->n);
        for (unsigned i = 0; i < cc->n; i++) {
            pack_str(&w, cc->nodes[i].host);
            pack_u16(&w, cc->nodes[i].port);
        }
        if (w.err) reply_status(req, RDKV_ENOMEM); /* (the session is reaped when idle) */
        else ses_reply(req, 0, w.p, w.len);
        pack_w_free(&w);
        return;
    }
    struct sreq *q = malloc(sizeof *q);
    if (!q) {
        reply_status(req, RDKV_ENOMEM);
        return;
    }
    q->req = req;
    q->next = NULL;
    pthread_mutex_lock(&s->mu);
    struct session *x = s->stop ? NULL : find(s, &sid);
    /* another connection's session is, to this one, no session at all */
    if (!x || x->closing || x->cr->conn != conn) {
        bool stop = s->stop;
        pthread_mutex_unlock(&s->mu);
        free(q);
        reply_status(req, stop ? RDKV_ESHUTDOWN : RDKV_ESESSION);
        return;
    }
    if (op == SES_CLOSE) x->closing = true; /* later requests are refused; this one runs */
    struct sop o;
    struct pack_r orr;
    if (!x->task && !x->scheduled && !x->qhead && !x->closing && sop_decode(req, &o, &orr) &&
        inline_fits(s, &o)) {
        x->scheduled = true; /* (keeps the reaper off it meanwhile) */
        x->last = clock_now_ns();
        s->inline_busy = true; /* (session_svc_stop waits for it) */
        pthread_mutex_unlock(&s->mu);
        bool done = inline_run(s, &o, req);
        pthread_mutex_lock(&s->mu);
        x->scheduled = false;
        s->inline_busy = false;
        if (s->stop) pthread_cond_broadcast(&s->cv);
        if (done) {
            pthread_mutex_unlock(&s->mu);
            free(q);
            return;
        }
    }
    if (x->qtail) x->qtail->next = q;
    else x->qhead = q;
    x->qtail = q;
    x->last = clock_now_ns();
    if (x->task) {
        task_wake(x->task);
    } else if (!x->scheduled) {
        struct sthread *th = x->th;
        x->scheduled = true;
        if (th->inbox_tail) th->inbox_tail->inext = x;
        else th->inbox = x;
        th->inbox_tail = x;
        task_wake(th->disp);
    }
    pthread_mutex_unlock(&s->mu);
}

/* On the service thread: connection conn is gone (every request of it answered). Its sessions
 * end: an idle one is freed now; one with a task (its transaction open) is told to close, and
 * its task aborts the transaction and frees it. */
static void on_conn_gone(void *arg, uint64_t conn)
{
    struct session_svc *s = arg;
    pthread_mutex_lock(&s->mu);
    struct connrec *cr = s->stop ? NULL : *conn_find(s, conn);
    unsigned ended = 0;
    for (struct session *x = cr ? cr->head : NULL, *n; x; x = n) {
        n = x->cnext; /* (x may go, and with the last session the record) */
        if (!x->closing) ended++;
        x->closing = true;
        if (x->task) task_wake(x->task);
        else if (!x->scheduled && !x->qhead) {
            unlink_session(s, x);
            free(x);
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (ended) log_debug("connection %llu closed: %u sessions ended", (unsigned long long)conn,
                         ended);
}

/* ------------------------------------------------------------------------------------------ */

int session_svc_start(const struct session_host *host, const struct session_cfg *cfg,
                      struct session_svc **out)
{
    struct session_svc *s = calloc(1, sizeof *s);
    if (!s) return RDKV_ENOMEM;
    s->h = *host;
    s->max = cfg->max_sessions ? cfg->max_sessions : SESSION_MAX_DEFAULT;
    s->per_conn = cfg->per_conn ? cfg->per_conn : SESSION_PER_CONN_DEFAULT;
    s->idle_ns = cfg->idle_ns > 0 ? cfg->idle_ns : 60 * NS_PER_S;
    s->txn_idle_ns = txn_env_cfg(s->h.txn)->lease_ns / 2;
    s->nthreads = cfg->threads ? cfg->threads : 2;
    s->nbuckets = 64;
    while (s->nbuckets < s->max && s->nbuckets < (1u << 16)) s->nbuckets <<= 1;
    s->buckets = calloc(s->nbuckets, sizeof *s->buckets);
    s->threads = calloc(s->nthreads, sizeof *s->threads);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    int rc = s->buckets && s->threads ? 0 : RDKV_ENOMEM;
    unsigned started = 0;
    for (unsigned i = 0; !rc && i < s->nthreads; i++) {
        struct sthread *th = &s->threads[i];
        th->svc = s;
        th->idx = i;
        th->start_rc = 1;
        th->pool = calloc(SES_WORKERS_KEPT, sizeof *th->pool);
        if (!th->pool || pthread_create(&th->th, NULL, sthread_main, th)) {
            rc = RDKV_ENOMEM;
            break;
        }
        started++;
        pthread_mutex_lock(&s->mu);
        while (th->start_rc == 1) pthread_cond_wait(&s->cv, &s->mu);
        rc = th->start_rc;
        pthread_mutex_unlock(&s->mu);
    }
    /* the router wakes the dispatchers: wait until each has said where it is */
    for (unsigned i = 0; !rc && i < s->nthreads; i++) {
        pthread_mutex_lock(&s->mu);
        while (!s->threads[i].disp) pthread_cond_wait(&s->cv, &s->mu);
        pthread_mutex_unlock(&s->mu);
    }
    /* the inline worker: made here, used only by the service thread (for local work only: it
     * never posts on its context). Not where commits ship to backups (replicas > 1): a commit
     * then waits for the backups' answers, which this very thread receives -- inline, it would
     * stop the node's fabric until the ship gave up, and the ship is asked again for ever */
    if (!rc && !txn_env_cfg(s->h.txn)->ship &&
        !(rc = fab_ctx_create(s->h.f, &s->inline_c))) {
        rc = txn_worker_create_on(s->h.txn, s->inline_c, &s->inline_w);
        if (!rc) txn_worker_set_lock_timeout(s->inline_w, INLINE_LOCK_NS);
    }
    if (!rc) {
        fab_on_conn_gone(s->h.f, on_conn_gone, s);
        rc = fab_rpc_register(s->h.f, KV_RPC_SESSION, on_session, s,
                              FAB_RPC_INLINE | FAB_RPC_CLIENT);
    }
    if (rc) {
        pthread_mutex_lock(&s->mu);
        s->stop = true;
        for (unsigned i = 0; i < started; i++)
            if (s->threads[i].disp) task_wake(s->threads[i].disp);
        pthread_mutex_unlock(&s->mu);
        for (unsigned i = 0; i < started; i++) pthread_join(s->threads[i].th, NULL);
        if (s->inline_w) txn_worker_destroy(s->inline_w);
        if (s->inline_c) fab_ctx_destroy(s->inline_c);
        fab_on_conn_gone(s->h.f, NULL, NULL);
        session_svc_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void session_svc_stop(struct session_svc *s)
{
    pthread_mutex_lock(&s->mu);
    bool was = s->stop;
    s->stop = true;
    while (s->inline_busy) pthread_cond_wait(&s->cv, &s->mu);
    for (unsigned i = 0; !was && i < s->nthreads; i++) {
        struct sthread *th = &s->threads[i];
        for (struct session *x = th->sessions; x; x = x->next)
            if (x->task) task_wake(x->task);
        task_wake(th->disp);
    }
    pthread_mutex_unlock(&s->mu);
    if (was) return;
    for (unsigned i = 0; i < s->nthreads; i++) pthread_join(s->threads[i].th, NULL);
    /* no inline operation runs any more, nor starts (the router sees stop) */
    if (s->inline_w) txn_worker_destroy(s->inline_w);
    if (s->inline_c) fab_ctx_destroy(s->inline_c);
    s->inline_w = NULL;
    s->inline_c = NULL;
}

void session_svc_free(struct session_svc *s)
{
    if (!s) return;
    for (unsigned i = 0; s->threads && i < s->nthreads; i++) free(s->threads[i].pool);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    for (unsigned i = 0; i < CONN_BUCKETS; i++)
        while (s->conns[i]) {
            struct connrec *cr = s->conns[i];
            s->conns[i] = cr->next;
            free(cr);
        }
    free(s->buckets);
    free(s->threads);
    free(s);
}

unsigned session_count(struct session_svc *s)
{
    pthread_mutex_lock(&s->mu);
    unsigned n = s->count;
    pthread_mutex_unlock(&s->mu);
    return n;
}
