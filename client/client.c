/* librdkv: the public API of include/rdkv.h over the two kinds of session. An embedded session
 * is a transaction worker of a node in this process (txn/txn.h), run by the calling thread. A
 * remote session is a client fabric (TCP, RPC only) to one node, whose session thread
 * coordinates the transactions (server/session.c, protocol in server/proto.h). */
#include "rdkv.h"
#include "client/embed.h"

#include "server/node.h"
#include "server/proto.h"

#include "common/clock.h"
#include "common/pack.h"
#include "common/parse.h"
#include "common/rng.h"
#include "common/task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rdkv_node {
    struct node *n;
};

struct rdkv_iter {
    struct rdkv_txn *t;
    struct txn_iter *it; /* embedded */
    /* remote: the current batch */
    struct fab_buf batch;
    struct pack_r r;
    uint32_t left;
    bool more;
    bool open;
};

struct rdkv_txn {
    struct rdkv_session *s;
    bool in_use;  /* handed out by rdkv_txn_begin and not freed */
    bool active;  /* begun and not ended */
    struct txn *t; /* embedded */
    unsigned retries;
    int64_t backoff_ns;
    struct fab_buf val; /* remote: the last value read */
    struct rdkv_iter iter;
};

struct rdkv_session {
    bool remote;
    rdkv_options o;
    uint64_t rng;
    struct rdkv_txn txn;
    /* embedded */
    struct rdkv_node *node;
    struct txn_worker *w;
    /* remote */
    struct cluster_config cc;
    struct fabric *f;
    struct fab_ctx *c;
    uint16_t ep;    /* the endpoint whose node coordinates */
    uint64_t sid;   /* 0: no session there (yet, or any more) */
    struct fab_buf resp;
};

void rdkv_options_init(rdkv_options *o)
{
    memset(o, 0, sizeof *o);
    o->connect_timeout_ms = 2000;
    o->op_timeout_ms = 10000;
    o->max_retries = 10;
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
}

bool rdkv_status_retryable(int status)
{
    return status == RDKV_EABORTED || status == RDKV_EBUSY || status == RDKV_ESESSION;
}

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

unsigned rdkv_key_partition(const void *key, size_t klen, unsigned nodes)
{
    if (!nodes || klen > UINT32_MAX) return 0;
    return (unsigned)(store_place_hash(key, (uint32_t)klen) % nodes);
}

/* ------------------------------------------------------------------------------------------ */
/* Remote sessions: requests to the coordinating node. */

/* A session request and its answer (server/proto.h): the node's status, with the op's bytes
 * at *data, *len (inside buf). A failure of the link itself (no answer) is reported as
 * RDKV_ELINK_: the session's state on the node is then unknown, and it is dropped. */
#define RDKV_ELINK_ 1
static int ses_rpc(rdkv_session *s, struct pack_w *w, struct fab_buf *buf, const uint8_t **data,
                   size_t *len)
{
    if (w->err) return RDKV_ENOMEM;
    int rc = fab_rpc_call(s->c, s->ep, KV_RPC_SESSION, w->p, w->len, buf,
                          s->o.op_timeout_ms * NS_PER_MS);
    if (rc) {
        s->sid = 0;
        return RDKV_ELINK_;
    }
    if (buf->len < 4) return RDKV_EPROTO;
    const uint8_t *p = buf->data;
    int32_t st = (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
    if (st > 0 || st < RDKV_STATUS_MIN) return RDKV_EPROTO;
    if (st == RDKV_ESESSION) s->sid = 0;
    if (data) *data = p + 4;
    if (len) *len = buf->len - 4;
    return st;
}

static int ses_call(rdkv_session *s, struct pack_w *w)
{
    return ses_rpc(s, w, &s->resp, NULL, NULL);
}

static void ses_head(rdkv_session *s, struct pack_w *w, uint8_t op)
{
    pack_w_init(w);
    pack_u64(w, s->sid);
    pack_u8(w, op);
}

static void put_bytes(struct pack_w *w, const void *p, size_t n)
{
    if (n > UINT32_MAX) {
        w->err = true;
        return;
    }
    pack_u32(w, (uint32_t)n);
    uint8_t *d = pack_w_room(w, n);
    if (d && n) memcpy(d, p, n);
}

/* Opens a session on the first endpoint that answers, starting with the current one. */
static int ses_open(rdkv_session *s)
{
    int rc = RDKV_EUNAVAILABLE;
    for (unsigned k = 0; k < s->cc.n; k++) {
        uint16_t ep = (uint16_t)((s->ep + k) % s->cc.n);
        struct pack_w w;
        pack_w_init(&w);
        pack_u64(&w, 0);
        pack_u8(&w, SES_OPEN);
        pack_u64(&w, (uint64_t)(s->o.lock_timeout_ms > 0 ? s->o.lock_timeout_ms : 0) * NS_PER_MS);
        if (w.err) {
            pack_w_free(&w);
            return RDKV_ENOMEM;
        }
        uint16_t was = s->ep;
        s->ep = ep;
        const uint8_t *d;
        size_t dl;
        rc = ses_rpc(s, &w, &s->resp, &d, &dl);
        pack_w_free(&w);
        if (rc == 0) {
            struct pack_r r;
            pack_r_init(&r, d, dl);
            uint64_t sid = unpack_u64(&r);
            if (!unpack_done(&r) || !sid) return RDKV_EPROTO;
            s->sid = sid;
            return 0;
        }
        s->ep = was;
        if (rc != RDKV_ELINK_) return rc; /* it answered (full, shutting down): say so */
    }
    return RDKV_EUNAVAILABLE;
}

/* Outside a transaction: a lost link is an unavailable node (the next request opens a new
 * session, on the next endpoint that answers). */
static int link_failed(rdkv_session *s, int rc)
{
    (void)s;
    return rc == RDKV_ELINK_ ? RDKV_EUNAVAILABLE : rc;
}
/* A session of either kind, before its own set-up. */
static rdkv_session *session_new(bool remote, const rdkv_options *o)
{
    rdkv_session *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->remote = remote;
    opts_fill(&s->o, o);
    s->rng = ((uint64_t)clock_now_ns() * 0x9E3779B97F4A7C15ull) | 1;
    s->txn.s = s;
    return s;
}

int rdkv_connect(const char *endpoints, const rdkv_options *o, rdkv_session **out)
{
    if (!endpoints || !*endpoints || !out) return RDKV_EINVAL;
    rdkv_session *s = session_new(true, o);
    if (!s) return RDKV_ENOMEM;
    /* endpoints: host:port[,host:port...] */
    char *copy = strdup(endpoints);
    const char *hosts[CLUSTER_MAX_NODES];
    uint16_t ports[CLUSTER_MAX_NODES];
    char hostbuf[64][CLUSTER_HOST_MAX];
    unsigned n = 0;
    int rc = copy ? 0 : RDKV_ENOMEM;
    for (char *save = NULL, *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok && !rc;
         tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        if (!*tok) continue;
        if (n >= 64 || parse_hostport(tok, hostbuf[n], sizeof hostbuf[n], &ports[n], 0)) {
            rc = RDKV_EINVAL;
            break;
        }
        hosts[n] = hostbuf[n];
        n++;
    }
    free(copy);
    if (!rc && n == 0) rc = RDKV_EINVAL;
    if (!rc) rc = cluster_config_make(&s->cc, n, hosts, ports);
    if (!rc) {
        struct fab_opts fo;
        fab_opts_init(&fo);
        fo.cluster = &s->cc;
        fo.node = FAB_NODE_CLIENT;
        fo.transport = FAB_SOFT;
        fo.endpoints_only = true;
        fo.connect_timeout_ns = s->o.connect_timeout_ms * NS_PER_MS;
        fo.rpc_timeout_ns = s->o.op_timeout_ms * NS_PER_MS;
        fo.rpc_threads = 1;
        char err[256];
        rc = fab_open(&fo, &s->f, err, sizeof err);
        if (!rc) rc = fab_ctx_create(s->f, &s->c);
    }
    if (!rc) rc = ses_open(s);
    if (rc) {
        rdkv_session_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

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

const struct fab_counters *rdkv_session_fab_counters(rdkv_session *s)
{
    struct fab_ctx *c = s->remote ? s->c : txn_worker_ctx(s->w);
    return c ? fab_counters(c) : NULL;
}

int rdkv_session_open(rdkv_node *n, const rdkv_options *o, rdkv_session **out)
{
    if (!n || !out) return RDKV_EINVAL;
    rdkv_session *s = session_new(false, o);
    if (!s) return RDKV_ENOMEM;
    s->node = n;
    int rc = worker_for(n, &s->w);
    if (rc) {
        free(s);
        return rc;
    }
    if (s->o.lock_timeout_ms > 0) txn_worker_set_lock_timeout(s->w, s->o.lock_timeout_ms * NS_PER_MS);
    *out = s;
    return 0;
}

static void iter_reset(struct rdkv_iter *it);

static void txn_finish(rdkv_txn *t)
{
    rdkv_session *s = t->s;
    iter_reset(&t->iter);
    if (!t->active) return;
    t->active = false;
    if (!s->remote) {
        txn_abort(t->t);
        t->t = NULL;
        return;
    }
    if (s->sid) {
        struct pack_w w;
        ses_head(s, &w, SES_ABORT);
        int rc = ses_call(s, &w);
        (void)rc; /* a lost session took its transaction with it */
        pack_w_free(&w);
    }
}

void rdkv_session_close(rdkv_session *s)
{
    if (!s) return;
    txn_finish(&s->txn);
    fab_buf_free(&s->txn.val);
    fab_buf_free(&s->txn.iter.batch);
    if (s->remote) {
        if (s->sid && s->c) {
            struct pack_w w;
            ses_head(s, &w, SES_CLOSE);
            int rc = ses_call(s, &w);
            (void)rc;
            pack_w_free(&w);
        }
        fab_buf_free(&s->resp);
        if (s->c) fab_ctx_destroy(s->c);
        if (s->f) fab_close(s->f);
        if (s->cc.nodes) cluster_config_free(&s->cc);
    } else {
        txn_worker_destroy(s->w);
    }
    free(s);
}

/* ------------------------------------------------------------------------------------------ */
/* Transactions. */

static int txn_start(rdkv_txn *t)
{
    rdkv_session *s = t->s;
    if (!s->remote) {
        int rc = txn_begin(s->w, &t->t);
        if (!rc) t->active = true;
        return rc;
    }
    if (!s->sid) {
        int rc = ses_open(s);
        if (rc) return rc;
    }
    struct pack_w w;
    ses_head(s, &w, SES_BEGIN);
    int rc = ses_call(s, &w);
    pack_w_free(&w);
    if (rc == RDKV_ESESSION) { /* expired meanwhile: one more try on a new session */
        s->sid = 0;
        if (!(rc = ses_open(s))) {
            ses_head(s, &w, SES_BEGIN);
            rc = ses_call(s, &w);
            pack_w_free(&w);
        }
    }
    if (rc == RDKV_ELINK_) { /* the node went away: a new session, on any endpoint */
        if (!(rc = ses_open(s))) {
            ses_head(s, &w, SES_BEGIN);
            rc = ses_call(s, &w);
            pack_w_free(&w);
        }
    }
    rc = link_failed(s, rc);
    if (!rc) t->active = true;
    return rc;
}

int rdkv_txn_begin(rdkv_session *s, rdkv_txn **out)
{
    if (!s || !out) return RDKV_EINVAL;
    rdkv_txn *t = &s->txn;
    if (t->in_use) return RDKV_EBUSY;
    t->retries = 0;
    t->backoff_ns = 0;
    int rc = txn_start(t);
    if (rc) return rc;
    t->in_use = true;
    *out = t;
    return 0;
}

/* Within a remote transaction: a lost session (the node closed it, or the link broke) means
 * the transaction is gone on the node -- nothing to abort there any more. Any other answer
 * leaves it open there, failed or not, until commit or abort. */
static int remote_status(rdkv_txn *t, int rc)
{
    if (rc == RDKV_ESESSION) {
        t->active = false;
        return RDKV_EABORTED; /* nothing it did happened: retryable */
    }
    if (rc == RDKV_ELINK_) {
        t->active = false;
        return RDKV_EUNAVAILABLE;
    }
    return rc;
}

static int get_common(rdkv_txn *t, const void *key, size_t klen, bool upd, const void **val,
                      size_t *vlen)
{
    if (!t || !t->active || (!key && klen) || !val || !vlen) return RDKV_EINVAL;
    if (klen > UINT32_MAX) return RDKV_ETOOBIG;
    rdkv_session *s = t->s;
    if (!s->remote) {
        const void *v;
        uint32_t vl;
        int rc = txn_get(t->t, key, (uint32_t)klen, upd, &v, &vl);
        if (!rc) {
            *val = v;
            *vlen = vl;
        }
        return rc;
    }
    struct pack_w w;
    ses_head(s, &w, SES_GET);
    pack_u8(&w, upd);
    put_bytes(&w, key, klen);
    const uint8_t *d;
    size_t dl;
    int rc = ses_rpc(s, &w, &t->val, &d, &dl);
    pack_w_free(&w);
    if (rc) return remote_status(t, rc);
    struct pack_r r;
    pack_r_init(&r, d, dl);
    uint32_t n = unpack_u32(&r);
    const uint8_t *p = pack_r_take(&r, n);
    if (!unpack_done(&r)) return RDKV_EPROTO;
    *val = p ? p : (const void *)"";
    *vlen = n;
    return 0;
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

int rdkv_txn_put(rdkv_txn *t, const void *key, size_t klen, const void *val, size_t vlen)
{
    if (!t || !t->active || (!key && klen) || (!val && vlen)) return RDKV_EINVAL;
    if (klen > UINT32_MAX || vlen > UINT32_MAX) return RDKV_ETOOBIG;
    if (t->s->o.read_only) return RDKV_EINVAL;
    rdkv_session *s = t->s;
    if (!s->remote) return txn_put(t->t, key, (uint32_t)klen, val, (uint32_t)vlen);
    struct pack_w w;
    ses_head(s, &w, SES_PUT);
    put_bytes(&w, key, klen);
    put_bytes(&w, val, vlen);
    int rc = ses_call(s, &w);
    pack_w_free(&w);
    return rc ? remote_status(t, rc) : 0;
}

int rdkv_txn_delete(rdkv_txn *t, const void *key, size_t klen)
{
    if (!t || !t->active || (!key && klen)) return RDKV_EINVAL;
    if (klen > UINT32_MAX) return RDKV_ETOOBIG;
    if (t->s->o.read_only) return RDKV_EINVAL;
    rdkv_session *s = t->s;
    if (!s->remote) return txn_del(t->t, key, (uint32_t)klen);
    struct pack_w w;
    ses_head(s, &w, SES_DEL);
    put_bytes(&w, key, klen);
    int rc = ses_call(s, &w);
    pack_w_free(&w);
    return rc ? remote_status(t, rc) : 0;
}

static void iter_reset(struct rdkv_iter *it)
{
    if (it->it) txn_iter_close(it->it);
    it->it = NULL;
    it->left = 0;
    it->more = false;
    it->open = false;
}

static int batch_take(struct rdkv_iter *it, const uint8_t *d, size_t dl)
{
    pack_r_init(&it->r, d, dl);
    uint8_t more = unpack_u8(&it->r);
    it->left = unpack_u32(&it->r);
    if (it->r.err || more > 1) return RDKV_EPROTO;
    it->more = more;
    return 0;
}

int rdkv_txn_scan(rdkv_txn *t, const void *begin, size_t blen, const void *end, size_t elen,
                  size_t limit, rdkv_iter **out)
{
    if (!t || !t->active || (!begin && blen) || !out) return RDKV_EINVAL;
    if (blen > UINT32_MAX || elen > UINT32_MAX) return RDKV_ETOOBIG;
    rdkv_session *s = t->s;
    struct rdkv_iter *it = &t->iter;
    iter_reset(it);
    it->t = t;
    if (!s->remote) {
        int rc = txn_scan(t->t, begin, (uint32_t)blen, end, (uint32_t)elen, limit, &it->it);
        if (rc) return rc;
        it->open = true;
        *out = it;
        return 0;
    }
    struct pack_w w;
    ses_head(s, &w, SES_SCAN);
    put_bytes(&w, begin, blen);
    pack_u8(&w, end != NULL);
    put_bytes(&w, end, end ? elen : 0);
    pack_u64(&w, limit);
    const uint8_t *d;
    size_t dl;
    int rc = ses_rpc(s, &w, &it->batch, &d, &dl);
    pack_w_free(&w);
    if (rc) return remote_status(t, rc);
    if ((rc = batch_take(it, d, dl))) return rc;
    it->open = true;
    *out = it;
    return 0;
}

int rdkv_iter_next(rdkv_iter *it, const void **key, size_t *klen, const void **val,
                   size_t *vlen)
{
    if (!it || !it->open || !key || !klen || !val || !vlen) return RDKV_EINVAL;
    rdkv_txn *t = it->t;
    if (!t->s->remote) {
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
    while (!it->left) {
        if (!it->more) return 0;
        rdkv_session *s = t->s;
        struct pack_w w;
        ses_head(s, &w, SES_SCAN_NEXT);
        const uint8_t *d;
        size_t dl;
        int rc = ses_rpc(s, &w, &it->batch, &d, &dl);
        pack_w_free(&w);
        if (rc) return remote_status(t, rc);
        if ((rc = batch_take(it, d, dl))) return rc;
    }
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

void rdkv_iter_close(rdkv_iter *it)
{
    if (it) iter_reset(it);
}

int rdkv_txn_commit(rdkv_txn *t)
{
    if (!t || !t->active) return RDKV_EINVAL;
    rdkv_session *s = t->s;
    iter_reset(&t->iter);
    t->active = false;
    if (!s->remote) {
        int rc = txn_commit(t->t);
        t->t = NULL;
        return rc;
    }
    struct pack_w w;
    ses_head(s, &w, SES_COMMIT);
    int rc = ses_call(s, &w);
    pack_w_free(&w);
    if (rc == RDKV_ESESSION) return RDKV_EABORTED; /* the node had closed the session first */
    if (rc == RDKV_ELINK_) return RDKV_EUNKNOWN;   /* the request may have arrived */
    return rc;
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
    /* randomised exponential back-off: [b/2, b], b from 1 ms doubling to 128 ms */
    t->backoff_ns = t->backoff_ns ? t->backoff_ns * 2 : NS_PER_MS;
    if (t->backoff_ns > 128 * NS_PER_MS) t->backoff_ns = 128 * NS_PER_MS;
    int64_t b = t->backoff_ns / 2 + (int64_t)rng_below(&t->s->rng, (uint64_t)t->backoff_ns / 2 + 1);
    clock_sleep_ns(b);
    int rc = txn_start(t);
    return rc ? rc : 0;
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

int rdkv_cluster_status(rdkv_session *s, char **json)
{
    if (!s || !json) return RDKV_EINVAL;
    if (!s->remote) {
        *json = node_cluster_status_json(s->node->n, txn_worker_ctx(s->w));
        return *json ? 0 : RDKV_ENOMEM;
    }
    if (!s->sid) {
        int rc = ses_open(s);
        if (rc) return rc;
    }
    struct pack_w w;
    ses_head(s, &w, SES_STATUS);
    const uint8_t *d;
    size_t dl;
    int rc = ses_rpc(s, &w, &s->resp, &d, &dl);
    pack_w_free(&w);
    if (rc) return link_failed(s, rc);
    char *js = malloc(dl + 1);
    if (!js) return RDKV_ENOMEM;
    memcpy(js, d, dl);
    js[dl] = 0;
    *json = js;
    return 0;
}
