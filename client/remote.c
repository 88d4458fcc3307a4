/* Remote sessions (client/session.h): a client fabric (TCP, RPC only) to the cluster's nodes,
 * one of which coordinates the session's transactions (server/session.c; the protocol is in
 * server/proto.h). Round trips: a transaction's BEGIN rides on its first operation, so n
 * operations and a commit cost n + 1 requests; a one-shot operation costs one, and goes straight
 * to its key's owner when the endpoints name it (the node it would coordinate a transaction on
 * then reads and writes its own partition: no round trip between nodes). */
#include "client/embed.h"
#include "client/session.h"

#include "server/proto.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Writes deferred to the next request: at most this many, of at most this many bytes in all
 * (past either, a put is sent at once, with those before it). */
#define PEND_MAX 16u
#define PEND_BYTES (64u << 10)
/* Keys the open transaction is known to hold exclusively: at most this many are remembered. */
#define HELD_MAX 32u

struct heldkey {
    uint8_t *key;
    uint32_t len;
};

struct rem {
    struct cluster_config cc; /* the endpoints */
    struct fabric *f;
    struct fab_ctx *c;
    uint16_t ep;      /* the endpoint whose node coordinates by default */
    uint16_t txn_ep;  /* the endpoint of the open transaction (chosen by its first operation) */
    struct ses_id *sids; /* per endpoint: our session there (zeros: none yet, or any more) */
    unsigned nodes;   /* the cluster's size, as its nodes said (0: not known) */
    int route[CLUSTER_MAX_NODES]; /* node id -> endpoint, or -1: through the coordinator */
    struct fab_buf resp;
    /* The open transaction's puts of rows it already holds exclusively: they cannot wait for a
     * lock or conflict, so they go ahead of its next request as SES_MULTI items rather than
     * as requests of their own (rdkv.h, rdkv_txn_put). */
    struct pack_w pend;
    unsigned npend;
    struct heldkey held[HELD_MAX];
    unsigned nheld;
};

static struct rem *rem_of(struct rdkv_session *s) { return s->impl; }

static int held_find(const struct rem *r, const void *key, size_t klen)
{
    for (unsigned i = 0; i < r->nheld; i++)
        if (r->held[i].len == klen && (!klen || !memcmp(r->held[i].key, key, klen))) return (int)i;
    return -1;
}

/* The transaction holds key exclusively (a read for update, a write found it so). */
static void held_add(struct rem *r, const void *key, size_t klen)
{
    if (r->nheld >= HELD_MAX || held_find(r, key, klen) >= 0) return;
    uint8_t *k = malloc(klen ? klen : 1);
    if (!k) return; /* (only an optimisation is lost) */
    if (klen) memcpy(k, key, klen);
    r->held[r->nheld++] = (struct heldkey){k, (uint32_t)klen};
}

/* A delete: a later put of key is an insert again, sent at once. */
static void held_drop(struct rem *r, const void *key, size_t klen)
{
    int i = held_find(r, key, klen);
    if (i < 0) return;
    free(r->held[i].key);
    r->held[i] = r->held[--r->nheld];
}

/* The transaction ended or began: nothing is held, nothing deferred. */
static void txn_state_clear(struct rem *r)
{
    for (unsigned i = 0; i < r->nheld; i++) free(r->held[i].key);
    r->nheld = 0;
    pack_w_free(&r->pend);
    r->npend = 0;
}

static void sid_clear(struct rem *r, uint16_t ep) { memset(&r->sids[ep], 0, sizeof r->sids[ep]); }
/* Whether we hold a session at endpoint ep. */
static bool sid_has(const struct rem *r, uint16_t ep)
{
    static const struct ses_id none;
    return memcmp(&r->sids[ep], &none, sizeof none) != 0;
}

/* A session request to endpoint ep and its answer (server/proto.h): the node's status, with the
 * op's bytes at *data, *len (inside buf). A failure of the link itself (no answer) is reported
 * as RDKV_ELINK_: the session's state on the node is then unknown, and it is dropped. */
#define RDKV_ELINK_ 1
static int ses_rpc(struct rdkv_session *s, uint16_t ep, struct pack_w *w, struct fab_buf *buf,
                   const uint8_t **data, size_t *len)
{
    struct rem *r = rem_of(s);
    if (w->err) return RDKV_ENOMEM;
    int rc = fab_rpc_call(r->c, ep, KV_RPC_SESSION, w->p, w->len, buf,
                          s->o.op_timeout_ms * NS_PER_MS);
    if (rc) {
        sid_clear(r, ep);
        return RDKV_ELINK_;
    }
    if (buf->len < 4) return RDKV_EPROTO;
    const uint8_t *p = buf->data;
    int32_t st = (int32_t)pack_get_u32le(p);
    if (st > 0 || st < RDKV_STATUS_MIN) return RDKV_EPROTO;
    if (st == RDKV_ESESSION) sid_clear(r, ep);
    if (data) *data = p + 4;
    if (len) *len = buf->len - 4;
    return st;
}

/* Sends w to ep (then frees it) and returns the answer's status. */
static int ses_call(struct rdkv_session *s, uint16_t ep, struct pack_w *w, struct fab_buf *buf,
                    const uint8_t **data, size_t *len)
{
    int rc = ses_rpc(s, ep, w, buf ? buf : &rem_of(s)->resp, data, len);
    pack_w_free(w);
    return rc;
}

static void ses_head(struct rdkv_session *s, uint16_t ep, struct pack_w *w, uint8_t op)
{
    pack_w_init(w);
    uint8_t *d = pack_w_room(w, SES_ID_LEN);
    if (d) memcpy(d, rem_of(s)->sids[ep].b, SES_ID_LEN);
    pack_u8(w, op);
}

/* The cluster's nodes, from an open's answer: which endpoint reaches each node (matched by host
 * and port as the config writes them; a node the endpoints do not name is reached through the
 * coordinator). An answer without the list (or with a list that does not parse) leaves the
 * routes as they were. */
static void learn_routes(struct rem *r, struct pack_r *pr)
{
    unsigned n = unpack_u16(pr);
    if (pr->err || n == 0 || n > CLUSTER_MAX_NODES) return;
    int route[CLUSTER_MAX_NODES];
    for (unsigned i = 0; i < n; i++) {
        char host[CLUSTER_HOST_MAX];
        unpack_str(pr, host, sizeof host);
        uint16_t port = unpack_u16(pr);
        if (pr->err) return;
        route[i] = -1;
        for (unsigned e = 0; e < r->cc.n; e++)
            if (r->cc.nodes[e].port == port && !strcmp(r->cc.nodes[e].host, host)) route[i] = (int)e;
    }
    if (!unpack_done(pr)) return;
    memcpy(r->route, route, n * sizeof *route);
    r->nodes = n;
}

int ses_raw_open(struct fab_ctx *c, uint16_t node, struct fab_buf *resp, struct ses_id *sid)
{
    uint8_t b[SES_OPEN_LEN];
    int rc = fab_rpc_call(c, node, KV_RPC_SESSION, b, ses_open_request(b), resp, 10 * NS_PER_S);
    return rc ? rc : ses_open_answer(resp->data, resp->len, sid);
}

int ses_raw_close(struct fab_ctx *c, uint16_t node, struct fab_buf *resp,
                  const struct ses_id *sid)
{
    uint8_t b[SES_ID_LEN + 1];
    memcpy(b, sid->b, SES_ID_LEN);
    b[SES_ID_LEN] = SES_CLOSE;
    int rc = fab_rpc_call(c, node, KV_RPC_SESSION, b, sizeof b, resp, 10 * NS_PER_S);
    if (rc) return rc;
    return resp->len >= 4 ? (int32_t)pack_get_u32le(resp->data) : RDKV_EPROTO;
}

/* Opens a session at endpoint ep. */
static int ses_open_at(struct rdkv_session *s, uint16_t ep)
{
    struct rem *r = rem_of(s);
    struct pack_w w;
    pack_w_init(&w);
    uint8_t *z = pack_w_room(&w, SES_ID_LEN);
    if (z) memset(z, 0, SES_ID_LEN);
    pack_u8(&w, SES_OPEN);
    pack_u64(&w, (uint64_t)(s->o.lock_timeout_ms > 0 ? s->o.lock_timeout_ms : 0) * NS_PER_MS);
    pack_u8(&w, s->o.conflict == RDKV_CONFLICT_NODE ? SES_CONFLICT_NODE
                                                    : (uint8_t)(s->o.conflict - 1));
    const uint8_t *d;
    size_t dl;
    int rc = ses_call(s, ep, &w, NULL, &d, &dl);
    if (rc) return rc;
    struct pack_r pr;
    pack_r_init(&pr, d, dl);
    const uint8_t *sid = pack_r_take(&pr, SES_ID_LEN);
    unpack_u16(&pr); /* its node id */
    if (pr.err || !sid) return RDKV_EPROTO;
    memcpy(r->sids[ep].b, sid, SES_ID_LEN);
    if (!sid_has(r, ep)) return RDKV_EPROTO;
    learn_routes(r, &pr);
    return 0;
}

/* Opens the coordinator's session on the first endpoint that answers, starting with the
 * current one. */
static int ses_open(struct rdkv_session *s)
{
    struct rem *r = rem_of(s);
    for (unsigned k = 0; k < r->cc.n; k++) {
        uint16_t ep = (uint16_t)((r->ep + k) % r->cc.n);
        int rc = ses_open_at(s, ep);
        if (rc == 0) {
            r->ep = ep;
            return 0;
        }
        if (rc != RDKV_ELINK_) return rc; /* it answered (full, shutting down): say so */
    }
    return RDKV_EUNAVAILABLE;
}

/* The endpoint an operation goes to, with a session open there. A transaction's first
 * operation (its BEGIN rides on it) picks the node of its key when an endpoint reaches it: a
 * one-shot operation then runs where its key lives, and an interactive transaction is
 * coordinated there (its first key's locks and reads, and a commit of that key alone, are
 * local to it). Later operations go where the first went; a scan, which spans partitions, and
 * a key whose owner no endpoint names go to the default coordinator. */
static int endpoint_for(struct rdkv_txn *t, const void *key, size_t klen, uint16_t *ep)
{
    struct rdkv_session *s = t->s;
    struct rem *r = rem_of(s);
    if (!t->begin_pending && sid_has(r, r->txn_ep)) {
        *ep = r->txn_ep;
        return 0;
    }
    if (t->begin_pending && key && r->nodes) {
        int e = r->route[rdkv_key_partition(key, klen, r->nodes)];
        if (e >= 0 && (sid_has(r, (uint16_t)e) || ses_open_at(s, (uint16_t)e) == 0)) {
            *ep = r->txn_ep = (uint16_t)e;
            return 0;
        }
    }
    if (!t->begin_pending) return RDKV_ESESSION; /* its session is gone, and the transaction */
    if (!sid_has(r, r->ep)) {
        int rc = ses_open(s);
        if (rc) return rc == RDKV_ELINK_ ? RDKV_EUNAVAILABLE : rc;
    }
    *ep = r->txn_ep = r->ep;
    return 0;
}

int rdkv_connect(const char *endpoints, const rdkv_options *o, rdkv_session **out)
{
    if (!endpoints || !*endpoints || !out) return RDKV_EINVAL;
    struct rem *r = calloc(1, sizeof *r);
    rdkv_session *s = r ? ses_new(&ses_remote_ops, o) : NULL;
    if (!s) {
        free(r);
        return RDKV_ENOMEM;
    }
    s->impl = r;
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
    /* names that exist nowhere are no unavailable peers: say so when no endpoint has one */
    unsigned nohost = 0;
    for (unsigned i = 0; i < n && !rc; i++) {
        char why[CLUSTER_HOST_MAX + 80];
        if (fab_host_check(hosts[i], why, sizeof why) == RDKV_ENOHOST) {
            log_debug("rdkv_connect: %s", why);
            nohost++;
        }
    }
    if (!rc && nohost == n) rc = RDKV_ENOHOST;
    if (!rc) rc = cluster_config_make(&r->cc, n, hosts, ports);
    if (!rc && !(r->sids = calloc(n, sizeof *r->sids))) rc = RDKV_ENOMEM;
    if (!rc) {
        struct fab_opts fo;
        fab_opts_init(&fo);
        fo.cluster = &r->cc;
        fo.node = FAB_NODE_CLIENT;
        fo.transport = FAB_SOFT;
        fo.endpoints_only = true;
        fo.connect_timeout_ns = s->o.connect_timeout_ms * NS_PER_MS;
        fo.rpc_timeout_ns = s->o.op_timeout_ms * NS_PER_MS;
        fo.rpc_threads = 1;
        /* A remote session waits for its answer blocked, not spinning: the answer crosses TCP
         * and a node's threads (tens of microseconds, past any useful spin), and on a machine
         * with few cores a spinning client takes the CPU that node needs to answer it
         * (docs/benchmarks.md, "Remote sessions": +20% one-shot reads on 2 cores). */
        fo.spin_ns = 0;
        fo.secret_file = s->o.secret_file; /* NULL: $RDKV_SECRET_FILE */
        fo.client_role = true;             /* sessions need no more, whatever the file holds */
        char err[512];
        rc = fab_open(&fo, &r->f, err, sizeof err);
        if (rc) log_error("rdkv_connect: %s", err);
        if (!rc) rc = fab_ctx_create(r->f, &r->c);
    }
    if (!rc) rc = ses_open(s);
    if (rc) {
        rdkv_session_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Transactions. */

/* No request: the BEGIN goes with the first operation, to the node it is sent to. */
static int rem_begin(struct rdkv_txn *t)
{
    txn_state_clear(rem_of(t->s));
    t->begin_pending = true;
    t->doomed = false;
    return 0;
}

/* The op byte of a transaction's operation: its BEGIN rides along on the first, and a one-shot
 * operation commits too. */
static uint8_t op_byte(struct rdkv_txn *t, uint8_t op, bool commit)
{
    uint8_t b = op;
    if (t->begin_pending) b |= SES_F_BEGIN | (t->retry ? SES_F_RETRY : 0);
    if (commit) b |= SES_F_COMMIT;
    return b;
}

/* The status of a transaction's operation. A lost session (the node closed it, or the link
 * broke) means the transaction is gone on the node; a retryable answer means the node failed
 * it (it holds no lock there any more, and the next BEGIN ends it); a one-shot operation has
 * ended its transaction either way. */
static int op_status(struct rdkv_txn *t, int rc, bool commit)
{
    t->begin_pending = false;
    if (rc == RDKV_ESESSION) {
        t->active = false;
        return RDKV_EABORTED; /* nothing it did happened: retryable */
    }
    if (rc == RDKV_ELINK_) {
        t->active = false;
        return commit ? RDKV_EUNKNOWN : RDKV_EUNAVAILABLE;
    }
    if (commit) t->active = false;
    else if (rdkv_status_retryable(rc)) t->doomed = true;
    return rc;
}

/* Whether to send an operation once more after RDKV_ESESSION (the node had closed or reaped the
 * session): only when nothing can have happened -- a BEGIN was in it, so no earlier operation of
 * this transaction is lost with the session -- and a new session opened at the same node. */
static bool may_resend(struct rdkv_txn *t, uint16_t ep, int rc)
{
    if (rc != RDKV_ESESSION || !t->begin_pending) return false;
    return ses_open_at(t->s, ep) == 0;
}

/* A GET, PUT or DEL of key: sent where endpoint_for says, once more after a lost session when
 * nothing can have happened; the answer's bytes at *d, *dl (in buf). */
/* SES_GET (upd: for update), SES_PUT, SES_DEL or SES_PATCH (upd: want the old value; off) on
 * key's owner: the answer's bytes in *d (in buf). */
/* The fields of a GET, PUT, DEL or PATCH of key (after its op byte). */
static void key_fields(struct pack_w *w, uint8_t op, const void *key, size_t klen, int upd,
                       uint32_t off, const void *val, size_t vlen)
{
    if (op == SES_GET || op == SES_PATCH) pack_u8(w, (uint8_t)upd);
    pack_bytes(w, key, klen);
    if (op == SES_PATCH) pack_u32(w, off);
    if (op == SES_PUT || op == SES_PATCH) pack_bytes(w, val, vlen);
}

/* A SES_MULTI request: the deferred writes, then n more items that the caller appends. */
static void multi_head(struct rdkv_txn *t, uint16_t ep, struct pack_w *w, unsigned n, bool commit)
{
    struct rem *r = rem_of(t->s);
    ses_head(t->s, ep, w, op_byte(t, SES_MULTI, commit));
    pack_u16(w, (uint16_t)(r->npend + n));
    uint8_t *d = pack_w_room(w, r->pend.len);
    if (d && r->pend.len) memcpy(d, r->pend.p, r->pend.len);
    if (r->pend.err) w->err = true;
    pack_w_free(&r->pend); /* sent (or, on an error, failed with the transaction) */
    r->npend = 0;
}

/* Past a SES_MULTI answer's first skip items (deferred writes: status 0, no bytes): r is left at
 * the next item. */
static int multi_skip(struct pack_r *r, const uint8_t *d, size_t dl, unsigned skip)
{
    pack_r_init(r, d, dl);
    unpack_u16(r);
    for (unsigned i = 0; i < skip; i++)
        if (unpack_u32(r) != 0) r->err = true;
    return r->err ? RDKV_EPROTO : 0;
}

static int key_op(struct rdkv_txn *t, uint8_t op, const void *key, size_t klen, int upd,
                  uint32_t off, const void *val, size_t vlen, bool commit, struct fab_buf *buf,
                  const uint8_t **d, size_t *dl)
{
    struct rem *r = rem_of(t->s);
    uint16_t ep;
    int rc = endpoint_for(t, key, klen, &ep);
    if (rc) return op_status(t, rc, commit);
    if (r->npend) {
        /* the deferred writes first, this operation as the last item */
        unsigned skip = r->npend;
        struct pack_w w;
        multi_head(t, ep, &w, 1, commit);
        pack_u8(&w, op);
        key_fields(&w, op, key, klen, upd, off, val, vlen);
        const uint8_t *md = NULL;
        size_t mdl = 0;
        rc = op_status(t, ses_call(t->s, ep, &w, buf, &md, &mdl), commit);
        if (rc) return rc;
        struct pack_r pr;
        if (multi_skip(&pr, md, mdl, skip)) return RDKV_EPROTO;
        rc = (int32_t)unpack_u32(&pr);
        if (pr.err || (rc && rc != RDKV_ENOTFOUND)) return RDKV_EPROTO;
        if (d) *d = md + pr.at;
        if (dl) *dl = mdl - pr.at;
        return rc;
    }
    do {
        struct pack_w w;
        ses_head(t->s, ep, &w, op_byte(t, op, commit));
        key_fields(&w, op, key, klen, upd, off, val, vlen);
        rc = ses_call(t->s, ep, &w, buf, d, dl);
    } while (may_resend(t, ep, rc));
    return op_status(t, rc, commit);
}

/* A value answered in d: *val and *vlen. */
static int value_of(const uint8_t *d, size_t dl, const void **val, size_t *vlen)
{
    struct pack_r r;
    pack_r_init(&r, d, dl);
    uint32_t n = unpack_u32(&r);
    const uint8_t *p = pack_r_take(&r, n);
    if (!unpack_done(&r)) return RDKV_EPROTO;
    *val = p ? p : (const void *)"";
    *vlen = n;
    return 0;
}

static int rem_get(struct rdkv_txn *t, const void *key, size_t klen, bool upd, const void **val,
                   size_t *vlen, bool commit)
{
    const uint8_t *d = NULL;
    size_t dl = 0;
    int rc = key_op(t, SES_GET, key, klen, upd, 0, NULL, 0, commit, &t->val, &d, &dl);
    if (rc == RDKV_EUNKNOWN) rc = RDKV_EUNAVAILABLE; /* a read: nothing to be unsure of */
    if (!rc) rc = value_of(d, dl, val, vlen);
    if (!rc && upd && !commit) held_add(rem_of(t->s), key, klen);
    return rc;
}

/* Every key in one SES_MULTI (after the deferred writes); the values stay in t->val. */
static int rem_get_many(struct rdkv_txn *t, size_t n, const void *const *keys,
                        const size_t *klens, bool upd, const void **vals, size_t *vlens,
                        int *status)
{
    struct rem *r = rem_of(t->s);
    uint16_t ep;
    int rc = endpoint_for(t, keys[0], klens[0], &ep);
    if (rc) return op_status(t, rc, false);
    if (r->npend + n > SES_MULTI_MAX) {
        /* (only past RDKV_GET_MANY_MAX + PEND_MAX: cannot happen) */
        return RDKV_EINVAL;
    }
    unsigned skip = r->npend;
    bool begin = t->begin_pending;
    const uint8_t *d = NULL;
    size_t dl = 0;
    do {
        struct pack_w w;
        multi_head(t, ep, &w, (unsigned)n, false);
        for (size_t i = 0; i < n; i++) {
            pack_u8(&w, SES_GET);
            key_fields(&w, SES_GET, keys[i], klens[i], upd, 0, NULL, 0);
        }
        rc = ses_call(t->s, ep, &w, &t->val, &d, &dl);
    } while (begin && may_resend(t, ep, rc));
    rc = op_status(t, rc, false);
    if (rc == RDKV_EUNKNOWN) rc = RDKV_EUNAVAILABLE;
    if (rc) return rc;
    struct pack_r pr;
    if (multi_skip(&pr, d, dl, skip)) return RDKV_EPROTO;
    for (size_t i = 0; i < n; i++) {
        status[i] = (int32_t)unpack_u32(&pr);
        vals[i] = "";
        vlens[i] = 0;
        if (pr.err || (status[i] && status[i] != RDKV_ENOTFOUND)) return RDKV_EPROTO;
        if (status[i]) continue;
        uint32_t vl = unpack_u32(&pr);
        const uint8_t *p = pack_r_take(&pr, vl);
        if (pr.err) return RDKV_EPROTO;
        if (vl) vals[i] = p;
        vlens[i] = vl;
        if (upd) held_add(r, keys[i], klens[i]);
    }
    return unpack_done(&pr) ? 0 : RDKV_EPROTO;
}

static int rem_patch(struct rdkv_txn *t, const void *key, size_t klen, uint32_t off,
                     const void *bytes, size_t n, const void **old, size_t *oldlen, bool commit)
{
    const uint8_t *d = NULL;
    size_t dl = 0;
    int rc = key_op(t, SES_PATCH, key, klen, old != NULL, off, bytes, n, commit, &t->val, &d, &dl);
    if (!rc && !commit) held_add(rem_of(t->s), key, klen);
    if (rc || !old) return rc;
    /* (written, but an answer we cannot read: as if lost) */
    return value_of(d, dl, old, oldlen) ? RDKV_EUNKNOWN : 0;
}

/* A put of a row the transaction holds exclusively waits for the next request, unless the
 * transaction failed on the node (its next answer says so anyway), a scan of it is open (its
 * later batches must see the write), or too much waits already. */
static bool may_defer(struct rdkv_txn *t, const void *key, size_t klen, size_t vlen)
{
    struct rem *r = rem_of(t->s);
    return !t->begin_pending && !t->doomed && !t->iter.open && r->npend < PEND_MAX &&
           r->pend.len + klen + vlen + 9 <= PEND_BYTES && held_find(r, key, klen) >= 0;
}

static int rem_put(struct rdkv_txn *t, const void *key, size_t klen, const void *val, size_t vlen,
                   bool commit)
{
    struct rem *r = rem_of(t->s);
    if (!commit && may_defer(t, key, klen, vlen)) {
        pack_u8(&r->pend, SES_PUT);
        key_fields(&r->pend, SES_PUT, key, klen, 0, 0, val, vlen);
        r->npend++;
        return r->pend.err ? RDKV_ENOMEM : 0;
    }
    int rc = key_op(t, SES_PUT, key, klen, 0, 0, val, vlen, commit, NULL, NULL, NULL);
    if (!rc && !commit) held_add(r, key, klen);
    return rc;
}

static int rem_del(struct rdkv_txn *t, const void *key, size_t klen, bool commit)
{
    held_drop(rem_of(t->s), key, klen);
    return key_op(t, SES_DEL, key, klen, 0, 0, NULL, 0, commit, NULL, NULL, NULL);
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

/* A scan spans partitions: its node coordinates it. */
static int rem_scan(struct rdkv_txn *t, const void *begin, size_t blen, const void *end,
                    size_t elen, size_t limit, struct rdkv_iter *it, bool commit)
{
    uint16_t ep;
    int rc = endpoint_for(t, NULL, 0, &ep);
    if (rc) return op_status(t, rc, commit);
    if (rem_of(t->s)->npend) {
        /* the deferred writes first: the scan must see them */
        struct pack_w w;
        multi_head(t, ep, &w, 0, false);
        if ((rc = op_status(t, ses_call(t->s, ep, &w, NULL, NULL, NULL), false))) return rc;
    }
    const uint8_t *d = NULL;
    size_t dl = 0;
    do {
        struct pack_w w;
        ses_head(t->s, ep, &w, op_byte(t, SES_SCAN, commit));
        pack_bytes(&w, begin, blen);
        pack_u8(&w, end != NULL);
        pack_bytes(&w, end, end ? elen : 0);
        pack_u64(&w, limit);
        rc = ses_call(t->s, ep, &w, &it->batch, &d, &dl);
    } while (may_resend(t, ep, rc));
    /* a one-shot scan's transaction stays open until its last batch */
    bool ended = commit && (rc != 0 || (dl > 0 && d[0] == 0));
    rc = op_status(t, rc, ended);
    if (rc == RDKV_EUNKNOWN) rc = RDKV_EUNAVAILABLE;
    if (rc) return rc;
    return batch_take(it, d, dl);
}

static int rem_iter_next(struct rdkv_iter *it, const void **key, size_t *klen, const void **val,
                         size_t *vlen)
{
    struct rdkv_txn *t = it->t;
    uint16_t ep = rem_of(t->s)->txn_ep;
    while (!it->left) {
        if (!it->more) return 0;
        struct pack_w w;
        ses_head(t->s, ep, &w, SES_SCAN_NEXT);
        const uint8_t *d;
        size_t dl;
        int rc = ses_call(t->s, ep, &w, &it->batch, &d, &dl);
        if (rc == RDKV_ELINK_ || rc == RDKV_ESESSION) {
            t->active = false;
            return rc == RDKV_ESESSION ? RDKV_EABORTED : RDKV_EUNAVAILABLE;
        }
        if (rc && it->oneshot) t->active = false; /* the node ended it */
        if (!rc) rc = batch_take(it, d, dl);
        if (rc) return rc;
        if (it->oneshot && !it->more) t->active = false; /* committed with its last batch */
    }
    return ses_batch_row(it, key, klen, val, vlen);
}

static void rem_iter_close(struct rdkv_iter *it)
{
    it->left = 0;
    it->more = false;
}

static int rem_commit(struct rdkv_txn *t)
{
    if (t->begin_pending) return 0; /* nothing was done: nothing to commit */
    struct rem *r = rem_of(t->s);
    uint16_t ep = r->txn_ep;
    struct pack_w w;
    if (r->npend) multi_head(t, ep, &w, 0, true); /* the deferred writes, then the commit */
    else ses_head(t->s, ep, &w, SES_COMMIT);
    txn_state_clear(r);
    int rc = ses_call(t->s, ep, &w, NULL, NULL, NULL);
    if (rc == RDKV_ESESSION) return RDKV_EABORTED; /* the node had closed the session first */
    if (rc == RDKV_ELINK_) return RDKV_EUNKNOWN;   /* the request may have arrived */
    return rc;
}

/* A transaction the node failed holds no lock there: its end rides on the next BEGIN. */
static void rem_abort(struct rdkv_txn *t)
{
    struct rem *r = rem_of(t->s);
    txn_state_clear(r);
    if (t->begin_pending || t->doomed || !sid_has(r, r->txn_ep)) return;
    struct pack_w w;
    ses_head(t->s, r->txn_ep, &w, SES_ABORT);
    int rc = ses_call(t->s, r->txn_ep, &w, NULL, NULL, NULL);
    (void)rc; /* a lost session took its transaction with it */
}

static int rem_status(struct rdkv_session *s, char **json)
{
    struct rem *r = rem_of(s);
    if (!sid_has(r, r->ep)) {
        int rc = ses_open(s);
        if (rc) return rc == RDKV_ELINK_ ? RDKV_EUNAVAILABLE : rc;
    }
    uint16_t ep = r->ep;
    struct pack_w w;
    ses_head(s, ep, &w, SES_STATUS);
    const uint8_t *d;
    size_t dl;
    int rc = ses_call(s, ep, &w, NULL, &d, &dl);
    if (rc) return rc == RDKV_ELINK_ ? RDKV_EUNAVAILABLE : rc;
    char *js = malloc(dl + 1);
    if (!js) return RDKV_ENOMEM;
    memcpy(js, d, dl);
    js[dl] = 0;
    *json = js;
    return 0;
}

static void rem_close(struct rdkv_session *s)
{
    struct rem *r = rem_of(s);
    if (!r) return;
    for (unsigned e = 0; r->sids && r->c && e < r->cc.n; e++) {
        if (!sid_has(r, (uint16_t)e)) continue;
        struct pack_w w;
        ses_head(s, (uint16_t)e, &w, SES_CLOSE);
        int rc = ses_call(s, (uint16_t)e, &w, NULL, NULL, NULL);
        (void)rc;
    }
    fab_buf_free(&r->resp);
    txn_state_clear(r);
    if (r->c) fab_ctx_destroy(r->c);
    if (r->f) fab_close(r->f);
    if (r->cc.nodes) cluster_config_free(&r->cc);
    free(r->sids);
    free(r);
    s->impl = NULL;
}

static const struct fab_counters *rem_counters(struct rdkv_session *s)
{
    struct rem *r = rem_of(s);
    return r->c ? fab_counters(r->c) : NULL;
}

const struct ses_ops ses_remote_ops = {
    .begin = rem_begin,
    .get = rem_get,
    .put = rem_put,
    .del = rem_del,
    .get_many = rem_get_many,
    .patch = rem_patch,
    .scan = rem_scan,
    .iter_next = rem_iter_next,
    .iter_close = rem_iter_close,
    .commit = rem_commit,
    .abort = rem_abort,
    .status = rem_status,
    .close = rem_close,
    .counters = rem_counters,
};
