/* librdkv: the public API of include/rdkv.h. This file checks arguments, keeps a transaction's
 * state, runs the retry loops (rdkv_txn_on_error, rdkv_run_txn and the one-shot operations) and
 * calls the session's kind through its table of operations (client/session.h): embedded
 * sessions in client/embedded.c, remote ones in client/remote.c. */
#include "client/embed.h"
#include "client/session.h"

#include "rdma/auth.h"
#include "storage/store.h"

#include "common/clock.h"
#include "common/rng.h"

#include <stdlib.h>
#include <string.h>

void rdkv_options_init(rdkv_options *o)
{
    memset(o, 0, sizeof *o);
    o->connect_timeout_ms = 2000;
    o->op_timeout_ms = 10000;
    o->max_retries = 10;
    o->conflict = RDKV_CONFLICT_NODE;
}

int rdkv_secret_file_check(const char *path, char *err, size_t errcap)
{
    if (!path) path = getenv("RDKV_SECRET_FILE");
    if (!path || !*path) return 0;
    struct auth_keys k;
    int rc = auth_load(path, &k, err, errcap);
    auth_wipe(&k);
    return rc;
}

static void opts_fill(rdkv_options *dst, const rdkv_options *src)
{
    rdkv_options_init(dst);
    if (!src) return;
    if (src->connect_timeout_ms > 0) dst->connect_timeout_ms = src->connect_timeout_ms;
    if (src->op_timeout_ms > 0) dst->op_timeout_ms = src->op_timeout_ms;
    if (src->lock_timeout_ms > 0) dst->lock_timeout_ms = src->lock_timeout_ms;
    dst->max_retries = src->max_retries;
    dst->read_only = src->read_only;
    dst->secret_file = src->secret_file; /* read once, by rdkv_connect */
    if (src->conflict >= RDKV_CONFLICT_NODE && src->conflict <= RDKV_CONFLICT_NO_WAIT)
        dst->conflict = src->conflict;
}

bool rdkv_status_retryable(int status)
{
    return status == RDKV_EABORTED || status == RDKV_EBUSY || status == RDKV_ESESSION;
}

unsigned rdkv_key_partition(const void *key, size_t klen, unsigned nodes)
{
    if (!nodes || klen > UINT32_MAX) return 0;
    return (unsigned)(store_place_hash(key, (uint32_t)klen) % nodes);
}

struct rdkv_session *ses_new(const struct ses_ops *ops, const rdkv_options *o)
{
    rdkv_session *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->ops = ops;
    opts_fill(&s->o, o);
    s->rng = ((uint64_t)clock_now_ns() * 0x9E3779B97F4A7C15ull) | 1;
    s->txn.s = s;
    s->txn.iter.t = &s->txn;
    return s;
}

void ses_free(struct rdkv_session *s)
{
    fab_buf_free(&s->txn.val);
    fab_buf_free(&s->txn.many);
    fab_buf_free(&s->txn.iter.batch);
    free(s);
}

int ses_batch_row(struct rdkv_iter *it, const void **key, size_t *klen, const void **val,
                  size_t *vlen)
{
    uint32_t kl = unpack_u32(&it->r);
    const uint8_t *k = pack_r_take(&it->r, kl);
    uint32_t vl = unpack_u32(&it->r);
    const uint8_t *v = pack_r_take(&it->r, vl);
    if (it->r.err) return RDKV_EPROTO;
    it->left--;
    *key = k ? k : (const uint8_t *)"";
    *klen = kl;
    *val = v ? v : (const uint8_t *)"";
    *vlen = vl;
    return 1;
}

const struct fab_counters *rdkv_session_fab_counters(rdkv_session *s)
{
    return s->ops->counters(s);
}

int rdkv_cluster_status(rdkv_session *s, char **json)
{
    if (!s || !json) return RDKV_EINVAL;
    return s->ops->status(s, json);
}

/* ------------------------------------------------------------------------------------------ */
/* The transaction's state. */

static void iter_reset(struct rdkv_iter *it)
{
    if (it->open) it->t->s->ops->iter_close(it);
    it->open = false;
    it->oneshot = false;
}

/* Ends the transaction if it is open, aborting it. */
static void txn_finish(rdkv_txn *t)
{
    iter_reset(&t->iter);
    if (!t->active) return;
    t->active = false;
    t->s->ops->abort(t);
}

static int txn_start(rdkv_txn *t)
{
    int rc = t->s->ops->begin(t);
    if (!rc) t->active = true;
    return rc;
}

/* The randomised exponential back-off before a retry: [b/2, b], b from 1 ms doubling to 128 ms.
 * In a task it sleeps the task only. */
static void backoff(rdkv_txn *t)
{
    t->backoff_ns = t->backoff_ns ? t->backoff_ns * 2 : NS_PER_MS;
    if (t->backoff_ns > 128 * NS_PER_MS) t->backoff_ns = 128 * NS_PER_MS;
    int64_t b = t->backoff_ns / 2 + (int64_t)rng_below(&t->s->rng, (uint64_t)t->backoff_ns / 2 + 1);
    clock_sleep_ns(b);
}

/* A fresh transaction (not a retry of the last one). */
static void txn_fresh(rdkv_txn *t)
{
    t->retries = 0;
    t->backoff_ns = 0;
    t->retry = false;
    t->ts = 0;
}

void rdkv_session_close(rdkv_session *s)
{
    if (!s) return;
    txn_finish(&s->txn);
    s->ops->close(s);
    ses_free(s);
}

int rdkv_txn_begin(rdkv_session *s, rdkv_txn **out)
{
    if (!s || !out) return RDKV_EINVAL;
    rdkv_txn *t = &s->txn;
    if (t->in_use) return RDKV_EBUSY;
    txn_fresh(t);
    int rc = txn_start(t);
    if (rc) return rc;
    t->in_use = true;
    *out = t;
    return 0;
}

static int get_common(rdkv_txn *t, const void *key, size_t klen, bool upd, const void **val,
                      size_t *vlen)
{
    if (!t || !t->active || (!key && klen) || !val || !vlen) return RDKV_EINVAL;
    if (klen > UINT32_MAX) return RDKV_ETOOBIG;
    return t->s->ops->get(t, key, klen, upd, val, vlen, false);
}

int rdkv_txn_get(rdkv_txn *t, const void *key, size_t klen, const void **val, size_t *vlen)
{
    return get_common(t, key, klen, false, val, vlen);
}

int rdkv_txn_get_for_update(rdkv_txn *t, const void *key, size_t klen, const void **val,
                            size_t *vlen)
{
    return get_common(t, key, klen, true, val, vlen);
}

/* get for each key in turn, each value copied into t->many (a get's value lasts only until the
 * next call); the pointers are set once every value is in. */
static int get_each(rdkv_txn *t, size_t n, const void *const *keys, const size_t *klens,
                    bool upd, const void **vals, size_t *vlens, int *status)
{
    struct fab_buf *b = &t->many;
    b->len = 0;
    for (size_t i = 0; i < n; i++) {
        const void *v;
        size_t vl;
        int rc = t->s->ops->get(t, keys[i], klens[i], upd, &v, &vl, false);
        if (rc && rc != RDKV_ENOTFOUND) return rc;
        status[i] = rc;
        vlens[i] = rc ? 0 : vl;
        if (rc || !vl) continue;
        if (b->len + vl > b->cap) {
            size_t cap = b->cap ? b->cap : 256;
            while (cap < b->len + vl) cap *= 2;
            void *p = realloc(b->data, cap);
            if (!p) return RDKV_ENOMEM; /* (the transaction goes on: the caller aborts it) */
            b->data = p;
            b->cap = cap;
        }
        memcpy((uint8_t *)b->data + b->len, v, vl);
        b->len += vl;
    }
    size_t at = 0; /* the values lie in b in key order */
    for (size_t i = 0; i < n; i++) {
        vals[i] = vlens[i] ? (const uint8_t *)b->data + at : (const void *)"";
        at += vlens[i];
    }
    return 0;
}

int rdkv_txn_get_many(rdkv_txn *t, size_t n, const void *const *keys, const size_t *klens,
                      bool for_update, const void **vals, size_t *vlens, int *status)
{
    if (!t || !t->active || n > RDKV_GET_MANY_MAX || (n && (!keys || !klens || !vals || !vlens ||
                                                             !status)))
        return RDKV_EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (!keys[i] && klens[i]) return RDKV_EINVAL;
        if (klens[i] > UINT32_MAX) return RDKV_ETOOBIG;
    }
    if (!n) return 0;
    if (t->s->ops->get_many)
        return t->s->ops->get_many(t, n, keys, klens, for_update, vals, vlens, status);
    return get_each(t, n, keys, klens, for_update, vals, vlens, status);
}

static int put_check(rdkv_session *s, const void *key, size_t klen, const void *val, size_t vlen)
{
    if ((!key && klen) || (!val && vlen)) return RDKV_EINVAL;
    if (klen > UINT32_MAX || vlen > UINT32_MAX) return RDKV_ETOOBIG;
    return s->o.read_only ? RDKV_EINVAL : 0;
}

int rdkv_txn_put(rdkv_txn *t, const void *key, size_t klen, const void *val, size_t vlen)
{
    if (!t || !t->active) return RDKV_EINVAL;
    int rc = put_check(t->s, key, klen, val, vlen);
    return rc ? rc : t->s->ops->put(t, key, klen, val, vlen, false);
}

int rdkv_txn_delete(rdkv_txn *t, const void *key, size_t klen)
{
    if (!t || !t->active) return RDKV_EINVAL;
    int rc = put_check(t->s, key, klen, NULL, 0);
    return rc ? rc : t->s->ops->del(t, key, klen, false);
}

static int scan_check(const void *begin, size_t blen, size_t elen, rdkv_iter **out)
{
    if ((!begin && blen) || !out) return RDKV_EINVAL;
    return blen > UINT32_MAX || elen > UINT32_MAX ? RDKV_ETOOBIG : 0;
}

int rdkv_txn_scan(rdkv_txn *t, const void *begin, size_t blen, const void *end, size_t elen,
                  size_t limit, rdkv_iter **out)
{
    if (!t || !t->active) return RDKV_EINVAL;
    int rc = scan_check(begin, blen, elen, out);
    if (rc) return rc;
    struct rdkv_iter *it = &t->iter;
    iter_reset(it);
    if ((rc = t->s->ops->scan(t, begin, blen, end, elen, limit, it, false))) return rc;
    it->open = true;
    *out = it;
    return 0;
}

int rdkv_iter_next(rdkv_iter *it, const void **key, size_t *klen, const void **val,
                   size_t *vlen)
{
    if (!it || !it->open || !key || !klen || !val || !vlen) return RDKV_EINVAL;
    rdkv_txn *t = it->t;
    int rc = t->s->ops->iter_next(it, key, klen, val, vlen);
    if (it->oneshot && rc <= 0 && t->active) {
        /* a one-shot scan's transaction ends with it (a remote one has ended on the node) */
        t->active = false;
        if (rc == 0) rc = t->s->ops->commit(t);
        else t->s->ops->abort(t);
    }
    return rc;
}

void rdkv_iter_close(rdkv_iter *it)
{
    if (!it) return;
    bool oneshot = it->oneshot;
    iter_reset(it);
    if (oneshot) txn_finish(it->t); /* stopped early: let go of its locks */
}

int rdkv_txn_commit(rdkv_txn *t)
{
    if (!t || !t->active) return RDKV_EINVAL;
    iter_reset(&t->iter);
    t->active = false;
    return t->s->ops->commit(t);
}

void rdkv_txn_abort(rdkv_txn *t)
{
    if (t) txn_finish(t);
}

int rdkv_txn_on_error(rdkv_txn *t, int status)
{
    if (!t) return RDKV_EINVAL;
    if (!rdkv_status_retryable(status) || t->retries >= t->s->o.max_retries) return status;
    txn_finish(t);
    t->retries++;
    backoff(t);
    t->retry = true; /* keeps the first attempt's start timestamp: it ages towards winning */
    return txn_start(t);
}

void rdkv_txn_free(rdkv_txn *t)
{
    if (!t) return;
    txn_finish(t);
    t->in_use = false;
}

int rdkv_run_txn(rdkv_session *s, rdkv_txn_fn fn, void *arg)
{
    rdkv_txn *t;
    int rc = rdkv_txn_begin(s, &t);
    if (rc) return rc;
    for (;;) {
        rc = fn(t, arg);
        if (rc == 0) rc = rdkv_txn_commit(t);
        if (rc == 0) break;
        rc = rdkv_txn_on_error(t, rc);
        if (rc) break;
    }
    rdkv_txn_free(t);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* One-shot operations: one transaction each, retried like rdkv_run_txn. */

struct oneshot {
    int kind; /* 0 get, 1 put, 2 delete, 3 scan, 4 patch (limit: the offset) */
    const void *key, *val, *end;
    size_t klen, vlen, elen, limit;
    const void **out_val;
    size_t *out_vlen;
};

static int oneshot_op(rdkv_txn *t, struct oneshot *a)
{
    const struct ses_ops *ops = t->s->ops;
    switch (a->kind) {
    case 0: return ops->get(t, a->key, a->klen, false, a->out_val, a->out_vlen, true);
    case 1: return ops->put(t, a->key, a->klen, a->val, a->vlen, true);
    case 2: return ops->del(t, a->key, a->klen, true);
    case 4:
        return ops->patch(t, a->key, a->klen, (uint32_t)a->limit, a->val, a->vlen, a->out_val,
                          a->out_vlen, true);
    default: {
        struct rdkv_iter *it = &t->iter;
        int rc = ops->scan(t, a->key, a->klen, a->end, a->elen, a->limit, it, true);
        if (!rc) {
            it->open = true;
            it->oneshot = true;
        }
        return rc;
    }
    }
}

static int oneshot_run(rdkv_session *s, struct oneshot *a)
{
    rdkv_txn *t = &s->txn;
    if (t->in_use) return RDKV_EBUSY; /* an interactive transaction is open */
    iter_reset(&t->iter);
    txn_finish(t);
    txn_fresh(t);
    for (;;) {
        int rc = txn_start(t);
        if (!rc) rc = oneshot_op(t, a);
        if (!(a->kind == 3 && rc == 0)) t->active = false; /* (a scan's lives on) */
        if (!rdkv_status_retryable(rc) || t->retries >= s->o.max_retries) return rc;
        t->retries++;
        backoff(t);
        t->retry = true;
    }
}

int rdkv_get(rdkv_session *s, const void *key, size_t klen, const void **val, size_t *vlen)
{
    if (!s || (!key && klen) || !val || !vlen) return RDKV_EINVAL;
    if (klen > UINT32_MAX) return RDKV_ETOOBIG;
    struct oneshot a = {.kind = 0, .key = key, .klen = klen, .out_val = val, .out_vlen = vlen};
    return oneshot_run(s, &a);
}

int rdkv_put(rdkv_session *s, const void *key, size_t klen, const void *val, size_t vlen)
{
    if (!s) return RDKV_EINVAL;
    int rc = put_check(s, key, klen, val, vlen);
    struct oneshot a = {.kind = 1, .key = key, .klen = klen, .val = val, .vlen = vlen};
    return rc ? rc : oneshot_run(s, &a);
}

int rdkv_delete(rdkv_session *s, const void *key, size_t klen)
{
    if (!s) return RDKV_EINVAL;
    int rc = put_check(s, key, klen, NULL, 0);
    struct oneshot a = {.kind = 2, .key = key, .klen = klen};
    return rc ? rc : oneshot_run(s, &a);
}

int rdkv_patch(rdkv_session *s, const void *key, size_t klen, size_t off, const void *bytes,
               size_t len, const void **old, size_t *oldlen)
{
    if (!s || (old && !oldlen)) return RDKV_EINVAL;
    int rc = put_check(s, key, klen, bytes, len);
    if (!rc && off > UINT32_MAX) rc = RDKV_ETOOBIG;
    struct oneshot a = {.kind = 4, .key = key, .klen = klen, .val = bytes, .vlen = len,
                        .limit = off, .out_val = old, .out_vlen = oldlen};
    return rc ? rc : oneshot_run(s, &a);
}

int rdkv_scan(rdkv_session *s, const void *begin, size_t blen, const void *end, size_t elen,
              size_t limit, rdkv_iter **out)
{
    if (!s) return RDKV_EINVAL;
    int rc = scan_check(begin, blen, elen, out);
    if (rc) return rc;
    struct oneshot a = {.kind = 3, .key = begin, .klen = blen, .end = end, .elen = elen,
                        .limit = limit};
    if ((rc = oneshot_run(s, &a))) return rc;
    *out = &s->txn.iter;
    return 0;
}
