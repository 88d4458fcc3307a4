/* Embedded sessions (client/session.h): the calling thread -- or task -- runs the transaction as
 * a worker of a node in this process (txn/txn.h), taking the rows' locks itself. Also the nodes
 * in this process (rdkv_node_*) and the many sessions of one thread (rdkv_run_tasks), whose
 * tasks share one fabric context. */
#include "client/embed.h"
#include "client/session.h"

#include "server/node.h"
#include "server/opts.h"
#include "server/proto.h"

#include "common/clock.h"
#include "common/task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rdkv_node {
    struct node *n;
};

/* rdkv_options.conflict is the transaction layer's policy + 1 (0: the node's) */
_Static_assert(RDKV_CONFLICT_TIMEOUT - 1 == TXN_CONFLICT_TIMEOUT &&
                   RDKV_CONFLICT_WAIT_DIE - 1 == TXN_CONFLICT_WAIT_DIE &&
                   RDKV_CONFLICT_NO_WAIT - 1 == TXN_CONFLICT_NO_WAIT,
               "rdkv_conflict and txn_conflict disagree");

struct emb {
    struct rdkv_node *node;
    struct txn_worker *w;
};

static struct txn_worker *worker_of(struct rdkv_session *s) { return ((struct emb *)s->impl)->w; }

/* ------------------------------------------------------------------------------------------ */
/* Nodes in this process. */

int rdkv_node_start(const char *config_path, unsigned node_id, const char *const *extra_args,
                    int64_t peer_wait_ms, rdkv_node **out, char *err, size_t errcap)
{
    char idbuf[16];
    snprintf(idbuf, sizeof idbuf, "%u", node_id);
    const char *argv[64] = {"rdkv", "--config", config_path, "--node", idbuf};
    int argc = 5;
    for (unsigned i = 0; extra_args && extra_args[i]; i++) {
        if (argc >= 63) {
            snprintf(err, errcap, "too many extra arguments");
            return RDKV_EINVAL;
        }
        argv[argc++] = extra_args[i];
    }
    argv[argc] = NULL;
    struct node_opts o;
    node_opts_init(&o);
    if (node_opts_parse(argc, (char **)argv, &o, err, errcap)) return RDKV_EINVAL;
    if (o.bench) { /* kvbench's services live in kvserver only (tools/kvserver.c) */
        snprintf(err, errcap, "--bench is kvserver's: librdkv does not carry kvbench's services");
        return RDKV_EINVAL;
    }
    rdkv_node *rn = calloc(1, sizeof *rn);
    if (!rn) return RDKV_ENOMEM;
    int rc = node_start(&o, &rn->n, err, errcap);
    if (!rc && peer_wait_ms > 0)
        rc = node_wait_peers(rn->n, peer_wait_ms * NS_PER_MS, NULL, NULL, err, errcap);
    if (rc) {
        if (rn->n) node_stop(rn->n);
        free(rn);
        return rc;
    }
    *out = rn;
    return 0;
}

void rdkv_node_stop(rdkv_node *n)
{
    if (!n) return;
    node_stop(n->n);
    free(n);
}

unsigned rdkv_node_id(const rdkv_node *n) { return node_id(n->n); }

rdkv_node *rdkv_node_adopt(struct node *n)
{
    rdkv_node *rn = calloc(1, sizeof *rn);
    if (rn) rn->n = n;
    return rn;
}

struct node *rdkv_node_server(rdkv_node *n) { return n->n; }

/* ------------------------------------------------------------------------------------------ */
/* Many sessions on one thread. */

/* rdkv_run_tasks: the calling thread's scheduler, and the fabric context its tasks' embedded
 * sessions share (created with the first of them, on the thread's behalf). */
struct task_run {
    struct sched *s;
    struct fab_ctx *c;
    rdkv_node *node;
};
static __thread struct task_run *tls_run;

/* A worker for an embedded session: of its own thread, or sharing the task run's context. */
static int worker_for(rdkv_node *n, struct txn_worker **w)
{
    struct txn_env *e = node_txn(n->n);
    struct task_run *r = tls_run;
    if (!r || !task_running()) return txn_worker_create(e, w);
    if (!r->c) {
        int rc = fab_ctx_create(txn_env_fabric(e), &r->c);
        if (rc) return rc;
        fab_ctx_attach(r->c, r->s);
        r->node = n;
    } else if (r->node != n) {
        return RDKV_EINVAL; /* the tasks of one thread share one node's connections */
    }
    return txn_worker_create_on(e, r->c, w);
}

struct task_arg {
    rdkv_task_fn fn;
    unsigned i;
    void *arg;
};

static void run_task(void *p)
{
    struct task_arg *a = p;
    if (a->fn) a->fn(a->i, a->arg);
}

int rdkv_run_tasks(unsigned n, rdkv_task_fn fn, void *arg, size_t stack_kb)
{
    if (!fn) return RDKV_EINVAL;
    if (task_running()) return RDKV_EBUSY;
    if (n == 0) return 0;
    struct task_run r = {0};
    struct task_arg *a = calloc(n, sizeof *a);
    if (!a || sched_create(&r.s)) {
        free(a);
        return RDKV_ENOMEM;
    }
    int rc = 0;
    for (unsigned i = 0; i < n; i++) {
        a[i] = (struct task_arg){fn, i, arg};
        if (task_spawn(r.s, run_task, &a[i], stack_kb * 1024)) {
            rc = RDKV_ENOMEM;
            break;
        }
    }
    if (rc) /* not every task could start: those that did end at once */
        for (unsigned i = 0; i < n; i++) a[i].fn = NULL;
    struct task_run *outer = tls_run;
    tls_run = &r;
    sched_run(r.s);
    tls_run = outer;
    if (r.c) {
        fab_ctx_attach(r.c, NULL);
        fab_ctx_destroy(r.c);
    }
    sched_destroy(r.s);
    free(a);
    return rc;
}

void rdkv_sleep_us(int64_t us) { clock_sleep_ns(us * NS_PER_US); }

/* ------------------------------------------------------------------------------------------ */
/* The session operations. */

int rdkv_session_open(rdkv_node *n, const rdkv_options *o, rdkv_session **out)
{
    if (!n || !out) return RDKV_EINVAL;
    struct emb *e = calloc(1, sizeof *e);
    rdkv_session *s = e ? ses_new(&ses_embedded_ops, o) : NULL;
    if (!s) {
        free(e);
        return RDKV_ENOMEM;
    }
    s->impl = e;
    e->node = n;
    int rc = worker_for(n, &e->w);
    if (rc) {
        free(e);
        ses_free(s);
        return rc;
    }
    if (s->o.lock_timeout_ms > 0) txn_worker_set_lock_timeout(e->w, s->o.lock_timeout_ms * NS_PER_MS);
    txn_worker_set_conflict(e->w, (int)s->o.conflict - 1); /* RDKV_CONFLICT_NODE: -1, the node's */
    *out = s;
    return 0;
}

/* A retry keeps its first attempt's start timestamp (the wait-die order). */
static int emb_begin(struct rdkv_txn *t)
{
    int rc = txn_begin(worker_of(t->s), &t->t);
    if (rc) return rc;
    if (t->retry && t->ts) txn_keep_ts(t->t, t->ts);
    t->ts = txn_start_ts(t->t);
    return 0;
}

/* After a one-shot operation: commit it when it succeeded (or found nothing: an answer too),
 * abort it otherwise. */
static int emb_oneshot_end(struct rdkv_txn *t, int rc)
{
    t->active = false;
    struct txn *x = t->t;
    t->t = NULL;
    if (rc == 0 || rc == RDKV_ENOTFOUND) {
        int crc = txn_commit(x);
        return crc ? crc : rc;
    }
    txn_abort(x);
    return rc;
}

static int emb_get(struct rdkv_txn *t, const void *key, size_t klen, bool upd, const void **val,
                   size_t *vlen, bool commit)
{
    const void *v;
    uint32_t vl;
    /* a one-shot read may read another node's row without its lock (txn_get_once) */
    int rc = commit && !upd ? txn_get_once(t->t, key, (uint32_t)klen, &v, &vl)
                            : txn_get(t->t, key, (uint32_t)klen, upd, &v, &vl);
    if (!rc && commit) { /* the row's bytes end with the transaction: keep a copy */
        if (fab_buf_set(&t->val, v, vl)) rc = RDKV_ENOMEM;
        else v = vl ? t->val.data : (const void *)"";
    }
    if (commit) rc = emb_oneshot_end(t, rc);
    if (!rc) {
        *val = v;
        *vlen = vl;
    }
    return rc;
}

static int emb_put(struct rdkv_txn *t, const void *key, size_t klen, const void *val, size_t vlen,
                   bool commit)
{
    int rc = txn_put(t->t, key, (uint32_t)klen, val, (uint32_t)vlen);
    return commit ? emb_oneshot_end(t, rc) : rc;
}

static int emb_patch(struct rdkv_txn *t, const void *key, size_t klen, uint32_t off,
                     const void *bytes, size_t n, const void **old, size_t *oldlen, bool commit)
{
    const void *v = NULL;
    uint32_t vl = 0;
    int rc = txn_patch(t->t, key, (uint32_t)klen, off, bytes, (uint32_t)n, old ? &v : NULL, &vl);
    if (!rc && old && commit) { /* the row's bytes end with the transaction: keep a copy */
        if (fab_buf_set(&t->val, v, vl)) rc = RDKV_ENOMEM;
        else v = vl ? t->val.data : (const void *)"";
    }
    if (commit) rc = emb_oneshot_end(t, rc);
    if (!rc && old) {
        *old = v;
        *oldlen = vl;
    }
    return rc;
}

static int emb_del(struct rdkv_txn *t, const void *key, size_t klen, bool commit)
{
    int rc = txn_del(t->t, key, (uint32_t)klen);
    return commit ? emb_oneshot_end(t, rc) : rc;
}

static void emb_iter_close(struct rdkv_iter *it);

/* A one-shot scan's first rows, read now (up to SES_BATCH_ROWS rows or SES_BATCH_BYTES, as a
 * remote session's first batch): a failure among them is a failure of the call, which the
 * caller retries with its start timestamp kept, and only the rows after them are read as the
 * iterator goes. */
static int emb_first_batch(struct rdkv_iter *it)
{
    struct pack_w w;
    pack_w_init(&w);
    uint32_t n = 0;
    int rc = 0;
    it->more = false;
    for (;;) {
        if (n >= SES_BATCH_ROWS || w.len >= SES_BATCH_BYTES) {
            it->more = true;
            break;
        }
        const void *k, *v;
        uint32_t kl, vl;
        int r = txn_iter_next(it->it, &k, &kl, &v, &vl);
        if (r <= 0) {
            rc = r;
            break;
        }
        pack_u32(&w, kl);
        uint8_t *d = pack_w_room(&w, kl);
        if (d && kl) memcpy(d, k, kl);
        pack_u32(&w, vl);
        d = pack_w_room(&w, vl);
        if (d && vl) memcpy(d, v, vl);
        n++;
    }
    if (!rc && w.err) rc = RDKV_ENOMEM;
    if (!rc && fab_buf_set(&it->batch, w.p, w.len)) rc = RDKV_ENOMEM;
    pack_w_free(&w);
    if (rc) return rc;
    pack_r_init(&it->r, it->batch.data, it->batch.len);
    it->left = n;
    return 0;
}

static int emb_scan(struct rdkv_txn *t, const void *begin, size_t blen, const void *end,
                    size_t elen, size_t limit, struct rdkv_iter *it, bool commit)
{
    it->left = 0;
    it->more = true;
    int rc = txn_scan(t->t, begin, (uint32_t)blen, end, (uint32_t)elen, limit, &it->it);
    if (!rc && commit) rc = emb_first_batch(it);
    if (rc && commit) {
        emb_iter_close(it);
        return emb_oneshot_end(t, rc);
    }
    return rc;
}

static int emb_iter_next(struct rdkv_iter *it, const void **key, size_t *klen, const void **val,
                         size_t *vlen)
{
    if (it->left) return ses_batch_row(it, key, klen, val, vlen);
    if (!it->more) return 0;
    const void *k, *v;
    uint32_t kl, vl;
    int rc = txn_iter_next(it->it, &k, &kl, &v, &vl);
    if (rc == 1) {
        *key = k;
        *klen = kl;
        *val = v;
        *vlen = vl;
    }
    return rc;
}

static void emb_iter_close(struct rdkv_iter *it)
{
    if (it->it) txn_iter_close(it->it);
    it->it = NULL;
    it->left = 0;
    it->more = false;
}

static int emb_commit(struct rdkv_txn *t)
{
    int rc = txn_commit(t->t);
    t->t = NULL;
    return rc;
}

static void emb_abort(struct rdkv_txn *t)
{
    txn_abort(t->t);
    t->t = NULL;
}

static int emb_status(struct rdkv_session *s, char **json)
{
    struct emb *e = s->impl;
    *json = node_cluster_status_json(e->node->n, txn_worker_ctx(e->w));
    return *json ? 0 : RDKV_ENOMEM;
}

static void emb_close(struct rdkv_session *s)
{
    struct emb *e = s->impl;
    if (!e) return;
    txn_worker_destroy(e->w);
    free(e);
    s->impl = NULL;
}

static const struct fab_counters *emb_counters(struct rdkv_session *s)
{
    struct fab_ctx *c = txn_worker_ctx(worker_of(s));
    return c ? fab_counters(c) : NULL;
}

const struct ses_ops ses_embedded_ops = {
    .begin = emb_begin,
    .get = emb_get,
    .put = emb_put,
    .del = emb_del,
    .patch = emb_patch,
    .scan = emb_scan,
    .iter_next = emb_iter_next,
    .iter_close = emb_iter_close,
    .commit = emb_commit,
    .abort = emb_abort,
    .status = emb_status,
    .close = emb_close,
    .counters = emb_counters,
};
