/* Remote sessions (server/session.h): the KV_RPC_SESSION handler runs on the node's service
 * thread and only routes a request to its session's queue; the session's thread decodes it,
 * runs the operation as the transaction's coordinator and replies. Every request is decoded
 * defensively: bad bytes get RDKV_EPROTO and change nothing. */
#include "server/session.h"

#include "server/node.h"
#include "server/proto.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/pack.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sreq {
    struct sreq *next;
    struct fab_rpc_req *req;
};

struct session {
    struct session *next;
    struct session_svc *svc;
    uint64_t sid;
    int64_t lock_timeout_ns;
    pthread_cond_t cv;
    struct sreq *qhead, *qtail;
    bool closing;
    /* the session thread's own */
    struct txn_worker *w;
    struct txn *t;
    struct txn_iter *it;
    bool idle_aborted; /* the open transaction was aborted for idling: say so to its next op */
};

struct session_svc {
    struct node *n;
    unsigned max;
    int64_t idle_ns;
    pthread_mutex_t mu;
    pthread_cond_t done_cv;
    struct session *list;
    unsigned count;   /* threads alive */
    uint64_t next_id;
    bool stop;
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
    for (int i = 0; i < 4; i++) buf[i] = (uint8_t)((uint32_t)rc >> (8 * i));
    if (len && !rc) memcpy(buf + 4, data, len);
    fab_rpc_reply(req, 0, buf, rc ? 4 : len + 4);
    if (buf != small) free(buf);
}

static void reply_status(struct fab_rpc_req *req, int rc) { ses_reply(req, rc, NULL, 0); }

static struct session *find(struct session_svc *s, uint64_t sid)
{
    for (struct session *x = s->list; x; x = x->next)
        if (x->sid == sid) return x;
    return NULL;
}

static void unlink_session(struct session_svc *s, struct session *x)
{
    for (struct session **pp = &s->list; *pp; pp = &(*pp)->next)
        if (*pp == x) {
            *pp = x->next;
            return;
        }
}

/* ------------------------------------------------------------------------------------------ */
/* Operations, on the session's thread. */

static void put_bytes(struct pack_w *w, const void *p, uint32_t n)
{
    pack_u32(w, n);
    uint8_t *d = pack_w_room(w, n);
    if (d && n) memcpy(d, p, n);
}

static const uint8_t *get_bytes(struct pack_r *r, uint32_t *n)
{
    *n = unpack_u32(r);
    return pack_r_take(r, *n);
}

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
}

static void send_batch(struct session *x, struct fab_rpc_req *req)
{
    struct pack_w w;
    pack_w_init(&w);
    pack_u8(&w, 0);
    pack_u32(&w, 0);
    uint32_t n = 0;
    int rc = 0;
    bool more = false;
    while (x->it) {
        if (n >= SES_BATCH_ROWS || w.len >= SES_BATCH_BYTES) {
            more = true;
            break;
        }
        const void *k, *v;
        uint32_t kl, vl;
        int r = txn_iter_next(x->it, &k, &kl, &v, &vl);
        if (r < 0) {
            rc = r;
            break;
        }
        if (r == 0) break;
        put_bytes(&w, k, kl);
        put_bytes(&w, v, vl);
        n++;
    }
    if (!more && x->it) {
        txn_iter_close(x->it);
        x->it = NULL;
    }
    if (!rc && w.err) rc = RDKV_ENOMEM;
    if (rc) {
        reply_status(req, rc);
    } else {
        w.p[0] = more;
        for (int i = 0; i < 4; i++) w.p[1 + i] = (uint8_t)(n >> (8 * i));
        ses_reply(req, 0, w.p, w.len);
    }
    pack_w_free(&w);
}

/* Every node's status as this node sees it. */
static void cluster_status(struct session *x, struct fab_rpc_req *req)
{
    char *js = node_cluster_status_json(x->svc->n, txn_worker_ctx(x->w));
    if (!js) {
        reply_status(req, RDKV_ENOMEM);
        return;
    }
    ses_reply(req, 0, js, strlen(js));
    free(js);
}

static void run_op(struct session *x, struct fab_rpc_req *req)
{
    struct pack_r r;
    pack_r_init(&r, fab_rpc_data(req), fab_rpc_len(req));
    unpack_u64(&r); /* the session id, checked by the router */
    uint8_t op = unpack_u8(&r);
    uint32_t kl = 0, vl = 0, el = 0;
    const uint8_t *k = NULL, *v = NULL, *e = NULL;
    uint8_t flag = 0;
    uint64_t limit = 0;
    switch (op) {
    case SES_GET:
        flag = unpack_u8(&r);
        k = get_bytes(&r, &kl);
        break;
    case SES_PUT:
        k = get_bytes(&r, &kl);
        v = get_bytes(&r, &vl);
        break;
    case SES_DEL: k = get_bytes(&r, &kl); break;
    case SES_SCAN:
        k = get_bytes(&r, &kl);
        flag = unpack_u8(&r);
        e = get_bytes(&r, &el);
        limit = unpack_u64(&r);
        if (flag > 1) r.err = true;
        break;
    default: break;
    }
    if (!unpack_done(&r)) {
        reply_status(req, RDKV_EPROTO);
        return;
    }
    const void *val;
    uint32_t vlen;
    int rc;
    switch (op) {
    case SES_CLOSE:
        end_txn(x);
        x->closing = true;
        reply_status(req, 0);
        return;
    case SES_BEGIN:
        end_txn(x); /* a client that lost track of its transaction starts afresh */
        x->idle_aborted = false;
        reply_status(req, txn_begin(x->w, &x->t));
        return;
    case SES_STATUS: cluster_status(x, req); return;
    default: break;
    }
    if (!x->t) {
        /* no transaction open: it was aborted for idling (retryable), or never begun */
        reply_status(req, op == SES_ABORT ? 0 : x->idle_aborted ? RDKV_EABORTED : RDKV_EINVAL);
        return;
    }
    switch (op) {
    case SES_GET:
        rc = txn_get(x->t, k, kl, flag, &val, &vlen);
        if (rc) {
            reply_status(req, rc);
        } else {
            struct pack_w w;
            pack_w_init(&w);
            put_bytes(&w, val, vlen);
            if (w.err) reply_status(req, RDKV_ENOMEM);
            else ses_reply(req, 0, w.p, w.len);
            pack_w_free(&w);
        }
        return;
    case SES_PUT: reply_status(req, txn_put(x->t, k, kl, v, vl)); return;
    case SES_DEL: reply_status(req, txn_del(x->t, k, kl)); return;
    case SES_SCAN:
        if (x->it) txn_iter_close(x->it);
        x->it = NULL;
        rc = txn_scan(x->t, k, kl, flag ? e : NULL, el, limit, &x->it);
        if (rc) reply_status(req, rc);
        else send_batch(x, req);
        return;
    case SES_SCAN_NEXT:
        if (!x->it) reply_status(req, RDKV_EINVAL);
        else send_batch(x, req);
        return;
    case SES_COMMIT:
        if (x->it) txn_iter_close(x->it);
        x->it = NULL;
        rc = txn_commit(x->t);
        x->t = NULL;
        reply_status(req, rc);
        return;
    case SES_ABORT:
        end_txn(x);
        reply_status(req, 0);
        return;
    default: reply_status(req, RDKV_EPROTO); return;
    }
}

static void *session_main(void *arg)
{
    struct session *x = arg;
    struct session_svc *s = x->svc;
    /* the first request is SES_OPEN: answer it once the worker exists */
    pthread_mutex_lock(&s->mu);
    struct sreq *open = x->qhead;
    x->qhead = x->qtail = NULL;
    pthread_mutex_unlock(&s->mu);
    int rc = txn_worker_create(node_txn(s->n), &x->w);
    if (!rc) txn_worker_set_lock_timeout(x->w, x->lock_timeout_ns);
    if (rc) {
        reply_status(open->req, rc);
    } else {
        uint8_t out[8];
        for (int i = 0; i < 8; i++) out[i] = (uint8_t)(x->sid >> (8 * i));
        ses_reply(open->req, 0, out, sizeof out);
    }
    free(open);
    int64_t last = clock_now_ns();
    /* A transaction must not keep remote locks past their lease (its release would then be
     * skipped, and waiters would have to reset them): one left idle half a lease is aborted. */
    int64_t txn_idle = txn_env_cfg(node_txn(s->n))->lease_ns / 2;
    pthread_mutex_lock(&s->mu);
    while (!rc && !x->closing) {
        if (!x->qhead) {
            if (s->stop) break;
            if (x->t && clock_now_ns() >= last + txn_idle) {
                pthread_mutex_unlock(&s->mu);
                log_info("session %llx: transaction idle for %.1f s: aborted",
                         (unsigned long long)x->sid, (double)txn_idle / 1e9);
                end_txn(x);
                x->idle_aborted = true;
                pthread_mutex_lock(&s->mu);
                continue;
            }
            int64_t until = last + (x->t ? txn_idle : s->idle_ns);
            if (clock_now_ns() >= until) {
                log_info("session %llx idle for %.0f s: closed", (unsigned long long)x->sid,
                         (double)s->idle_ns / 1e9);
                break;
            }
            struct timespec ts = clock_ts(until);
            pthread_cond_timedwait(&x->cv, &s->mu, &ts);
            continue;
        }
        struct sreq *q = x->qhead;
        x->qhead = q->next;
        if (!x->qhead) x->qtail = NULL;
        pthread_mutex_unlock(&s->mu);
        run_op(x, q->req);
        free(q);
        last = clock_now_ns();
        pthread_mutex_lock(&s->mu);
    }
    /* leave: nobody can queue for this session once it is unlinked */
    unlink_session(s, x);
    struct sreq *left = x->qhead;
    x->qhead = x->qtail = NULL;
    pthread_mutex_unlock(&s->mu);
    while (left) {
        struct sreq *q = left;
        left = q->next;
        reply_status(q->req, RDKV_ESESSION);
        free(q);
    }
    end_txn(x);
    txn_worker_destroy(x->w);
    pthread_cond_destroy(&x->cv);
    free(x);
    pthread_mutex_lock(&s->mu);
    s->count--;
    pthread_cond_broadcast(&s->done_cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* The router, on the service thread: it must not block. */
static void on_session(struct fab_rpc_req *req, void *arg)
{
    struct session_svc *s = arg;
    struct pack_r r;
    pack_r_init(&r, fab_rpc_data(req), fab_rpc_len(req));
    uint64_t sid = unpack_u64(&r);
    uint8_t op = unpack_u8(&r);
    if (r.err || op < SES_OPEN || op > SES_STATUS) {
        reply_status(req, RDKV_EPROTO);
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
    if (s->stop) {
        pthread_mutex_unlock(&s->mu);
        free(q);
        reply_status(req, RDKV_ESHUTDOWN);
        return;
    }
    if (op == SES_OPEN) {
        uint64_t lto = unpack_u64(&r);
        struct session *x = NULL;
        int rc = !unpack_done(&r) || sid ? RDKV_EPROTO : 0;
        if (!rc && s->count >= s->max) rc = RDKV_EBUSY;
        if (!rc && !(x = calloc(1, sizeof *x))) rc = RDKV_ENOMEM;
        if (!rc) {
            x->svc = s;
            x->sid = (uint64_t)node_id(s->n) << 48 | ++s->next_id;
            x->lock_timeout_ns = lto > 3600ull * NS_PER_S ? 0 : (int64_t)lto;
            pthread_condattr_t ca;
            pthread_condattr_init(&ca);
            pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
            pthread_cond_init(&x->cv, &ca);
            pthread_condattr_destroy(&ca);
            x->qhead = x->qtail = q;
            pthread_attr_t at;
            pthread_attr_init(&at);
            pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
            pthread_t th;
            if (pthread_create(&th, &at, session_main, x)) {
                pthread_cond_destroy(&x->cv);
                free(x);
                rc = RDKV_EBUSY;
            } else {
                x->next = s->list;
                s->list = x;
                s->count++;
            }
            pthread_attr_destroy(&at);
        }
        pthread_mutex_unlock(&s->mu);
        if (rc) {
            free(q);
            reply_status(req, rc);
        }
        return;
    }
    struct session *x = find(s, sid);
    if (!x) {
        pthread_mutex_unlock(&s->mu);
        free(q);
        reply_status(req, RDKV_ESESSION);
        return;
    }
    if (x->qtail) x->qtail->next = q;
    else x->qhead = q;
    x->qtail = q;
    pthread_cond_signal(&x->cv);
    pthread_mutex_unlock(&s->mu);
}

int session_svc_start(struct node *n, unsigned max_sessions, int64_t idle_ns,
                      struct session_svc **out)
{
    struct session_svc *s = calloc(1, sizeof *s);
    if (!s) return RDKV_ENOMEM;
    s->n = n;
    s->max = max_sessions ? max_sessions : 128;
    s->idle_ns = idle_ns > 0 ? idle_ns : 60 * NS_PER_S;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->done_cv, NULL);
    int rc = fab_rpc_register(node_fabric(n), KV_RPC_SESSION, on_session, s, FAB_RPC_INLINE);
    if (rc) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->done_cv);
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void session_svc_stop(struct session_svc *s)
{
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    for (struct session *x = s->list; x; x = x->next) pthread_cond_signal(&x->cv);
    while (s->count) pthread_cond_wait(&s->done_cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

void session_svc_free(struct session_svc *s)
{
    if (!s) return;
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->done_cv);
    free(s);
}

unsigned session_count(struct session_svc *s)
{
    pthread_mutex_lock(&s->mu);
    unsigned n = s->count;
    pthread_mutex_unlock(&s->mu);
    return n;
}
