/* The participant's side of commit: a coordinator that holds the exclusive locks of some rows of
 * this node sends their new contents; this node stages them (PREPARE: every allocation is made
 * now, so a later COMMIT cannot fail), then installs them (COMMIT) or gives the memory back
 * (ABORT). APPLY does both at once for a transaction with a single participant. Also the scan
 * pages that coordinators on other nodes ask for. Every request is decoded defensively: bad
 * bytes get RDKV_EPROTO and change nothing. */
#include "txn/txn_internal.h"

#include "common/clock.h"
#include "common/log.h"

#include <stdlib.h>
#include <string.h>

void txn_wops_pack(struct pack_w *w, uint64_t txid, uint16_t coord, const struct wop *ops,
                   uint32_t n)
{
    pack_u64(w, txid);
    pack_u16(w, coord);
    pack_u32(w, n);
    for (uint32_t i = 0; i < n; i++) {
        pack_u8(w, ops[i].kind);
        pack_u64(w, ops[i].row);
        pack_u32(w, ops[i].klen);
        uint8_t *p = pack_w_room(w, ops[i].klen);
        if (p && ops[i].klen) memcpy(p, ops[i].key, ops[i].klen);
        uint32_t vlen = ops[i].kind == WOP_DELETE ? 0 : ops[i].vlen;
        pack_u32(w, vlen);
        p = pack_w_room(w, vlen);
        if (p && vlen) memcpy(p, ops[i].val, vlen);
    }
}

int txn_wops_unpack(const void *p, size_t len, uint32_t key_max, uint32_t value_max,
                    uint64_t *txid, uint16_t *coord, struct wop **out, uint32_t *nout)
{
    struct pack_r r;
    pack_r_init(&r, p, len);
    *txid = unpack_u64(&r);
    *coord = unpack_u16(&r);
    uint32_t n = unpack_u32(&r);
    /* every op takes at least 17 bytes: a count beyond that is a lie */
    if (r.err || n == 0 || n > (len - r.at) / 17) return RDKV_EPROTO;
    struct wop *ops = calloc(n, sizeof *ops);
    if (!ops) return RDKV_ENOMEM;
    int rc = 0;
    for (uint32_t i = 0; i < n && !rc; i++) {
        struct wop *o = &ops[i];
        o->kind = unpack_u8(&r);
        o->row = unpack_u64(&r);
        o->klen = unpack_u32(&r);
        o->key = pack_r_take(&r, o->klen);
        o->vlen = unpack_u32(&r);
        o->val = pack_r_take(&r, o->vlen);
        if (r.err || o->kind < WOP_UPDATE || o->kind > WOP_DELETE) rc = RDKV_EPROTO;
        else if (o->klen > key_max || o->vlen > value_max) rc = RDKV_ETOOBIG;
        else if (o->kind == WOP_DELETE && o->vlen) rc = RDKV_EPROTO;
        else if (o->kind != WOP_INSERT && o->row == RPTR_NULL) rc = RDKV_EPROTO;
    }
    if (!rc && !unpack_done(&r)) rc = RDKV_EPROTO;
    if (rc) {
        free(ops);
        return rc;
    }
    *out = ops;
    *nout = n;
    return 0;
}

/* The row the coordinator names must be a live row of this node holding that key. */
static int check_row(struct txn_env *e, const struct wop *o, struct row_view *v)
{
    if (rptr_node(o->row) != e->me) return RDKV_EPROTO;
    int rc = store_row_view(e->st, o->row, v);
    if (rc) return rc;
    if (!(v->flags & ROW_LIVE) || v->klen != o->klen || memcmp(v->key, o->key, o->klen))
        return RDKV_EABORTED; /* the row changed under a lock the coordinator no longer has */
    /* ... and the very row the index holds for that key: bytes that only look like a row (a
     * value imitating a row header, at a pointer that is no row) are refused, never written */
    rptr cur;
    if (store_lookup(e->st, o->key, o->klen, &cur) || cur != o->row) return RDKV_EABORTED;
    return 0;
}

static void unstage(struct txn_env *e, struct wop *ops, struct store_staged *st, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (ops[i].kind == WOP_UPDATE) store_value_unstage(e->st, &st[i]);
        else if (ops[i].kind == WOP_INSERT && st[i].row) store_row_discard(e->st, st[i].row);
    }
}

int part_prepare(struct txn_env *e, uint64_t txid, uint16_t coord, struct wop *ops, uint32_t n,
                 void *bytes, struct prepared **out)
{
    struct prepared *p = calloc(1, sizeof *p);
    struct store_staged *st = calloc(n, sizeof *st);
    if (!p || !st) {
        free(st);
        free(p);
        free(ops);
        free(bytes);
        return RDKV_ENOMEM;
    }
    int rc = 0;
    /* a row named twice (or a key inserted twice) would stage twice: not from a coordinator */
    for (uint32_t a = 0; a < n && !rc; a++)
        for (uint32_t b = a + 1; b < n && !rc; b++)
            if ((ops[a].kind != WOP_INSERT && ops[a].row == ops[b].row) ||
                (ops[a].klen == ops[b].klen && !memcmp(ops[a].key, ops[b].key, ops[a].klen)))
                rc = RDKV_EPROTO;
    if (rc) {
        free(st);
        free(p);
        free(ops);
        free(bytes);
        return rc;
    }
    uint32_t i = 0;
    for (; i < n && !rc; i++) {
        struct wop *o = &ops[i];
        struct row_view v;
        switch (o->kind) {
        case WOP_UPDATE:
            rc = check_row(e, o, &v);
            if (!rc) rc = store_value_stage(e->st, o->row, o->val, o->vlen, &st[i]);
            break;
        case WOP_INSERT:
            rc = store_row_alloc(e->st, o->key, o->klen, o->val, o->vlen, &st[i].row);
            break;
        case WOP_DELETE:
            rc = check_row(e, o, &v);
            break;
        }
    }
    if (rc) {
        unstage(e, ops, st, i - 1); /* op i-1 failed and staged nothing */
        free(st);
        free(p);
        free(ops);
        free(bytes);
        return rc;
    }
    p->txid = txid;
    p->coord = coord;
    p->n = n;
    p->ops = ops;
    p->staged = st;
    p->bytes = bytes;
    *out = p;
    return 0;
}

static void prepared_free(struct prepared *p)
{
    free(p->ops);
    free(p->staged);
    free(p->bytes);
    free(p);
}

void part_commit(struct txn_env *e, struct prepared *p)
{
    for (uint32_t i = 0; i < p->n; i++) {
        struct wop *o = &p->ops[i];
        switch (o->kind) {
        case WOP_UPDATE: store_value_install(e->st, &p->staged[i]); break;
        case WOP_INSERT: {
            int rc = store_row_publish(e->st, p->staged[i].row);
            if (rc) {
                /* the coordinator held [key, key] exclusively: nobody can have inserted it */
                log_error("txn %llx: insert of a %u-byte key failed at commit: %s",
                          (unsigned long long)p->txid, o->klen, rdkv_strerror(rc));
                store_row_discard(e->st, p->staged[i].row);
            }
            break;
        }
        case WOP_DELETE: store_row_delete(e->st, o->row); break;
        }
    }
    prepared_free(p);
}

void part_abort(struct txn_env *e, struct prepared *p)
{
    unstage(e, p->ops, p->staged, p->n);
    prepared_free(p);
}

void part_record(struct txn_env *e, struct prepared *p)
{
    pthread_mutex_lock(&e->pmu);
    p->next = e->prep;
    e->prep = p;
    pthread_mutex_unlock(&e->pmu);
}

/* Takes the first recorded transaction with that txid (by_coord: coordinated by node `key`). */
static struct prepared *take_first(struct txn_env *e, bool by_coord, uint64_t key)
{
    pthread_mutex_lock(&e->pmu);
    struct prepared *found = NULL;
    for (struct prepared **pp = &e->prep; *pp; pp = &(*pp)->next)
        if (by_coord ? (*pp)->coord == key : (*pp)->txid == key) {
            found = *pp;
            *pp = found->next;
            break;
        }
    pthread_mutex_unlock(&e->pmu);
    return found;
}

struct prepared *part_take(struct txn_env *e, uint64_t txid) { return take_first(e, false, txid); }

void txn_env_peer_lost(struct txn_env *e, uint16_t node)
{
    for (;;) {
        struct prepared *found = take_first(e, true, node);
        if (!found) return;
        log_warn("aborting prepared transaction %llx: its coordinator, node %u, is down",
                 (unsigned long long)found->txid, node);
        part_abort(e, found);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* RPC handlers (on the node's RPC threads). */

bool txn_env_enter(struct txn_env *e)
{
    __atomic_add_fetch(&e->inflight, 1, __ATOMIC_SEQ_CST);
    if (!__atomic_load_n(&e->closing, __ATOMIC_SEQ_CST)) return true;
    __atomic_sub_fetch(&e->inflight, 1, __ATOMIC_SEQ_CST);
    return false;
}

void txn_env_leave(struct txn_env *e) { __atomic_sub_fetch(&e->inflight, 1, __ATOMIC_SEQ_CST); }

/* Every handler runs through this guard, which turns requests away once the layer quiesces. */
static void guarded(struct fab_rpc_req *req, void *arg)
{
    struct txn_guard *g = arg;
    if (!txn_env_enter(g->e)) {
        fab_rpc_reply(req, RDKV_ESHUTDOWN, NULL, 0);
        return;
    }
    g->fn(req, g->e);
    txn_env_leave(g->e);
}


static int decode_and_prepare(struct txn_env *e, struct fab_rpc_req *req, struct prepared **out)
{
    size_t len = fab_rpc_len(req);
    void *bytes = malloc(len ? len : 1);
    if (!bytes) return RDKV_ENOMEM;
    memcpy(bytes, fab_rpc_data(req), len);
    uint64_t txid;
    uint16_t coord;
    struct wop *ops;
    uint32_t n;
    int rc = txn_wops_unpack(bytes, len, store_key_max(e->st), store_value_max(e->st), &txid,
                             &coord, &ops, &n);
    /* The coordinator must be a node of the cluster (its loss aborts what it prepared), and the
     * sender itself when a node sends. (Clients of the fabric are not authenticated: rdkv has
     * no access control yet, and a client can write any key anyway.) */
    uint16_t src = fab_rpc_src(req);
    if (!rc && (coord >= e->n || (src != FAB_NODE_CLIENT && coord != src))) {
        free(ops);
        rc = RDKV_EPROTO;
    }
    if (rc) {
        free(bytes);
        return rc;
    }
    return part_prepare(e, txid, coord, ops, n, bytes, out);
}

static void on_prepare(struct fab_rpc_req *req, void *arg)
{
    struct txn_env *e = arg;
    struct prepared *p;
    int rc = decode_and_prepare(e, req, &p);
    if (!rc) part_record(e, p);
    fab_rpc_reply(req, rc, NULL, 0);
}

static void on_apply(struct fab_rpc_req *req, void *arg)
{
    struct txn_env *e = arg;
    struct prepared *p;
    int rc = decode_and_prepare(e, req, &p);
    if (!rc) part_commit(e, p);
    fab_rpc_reply(req, rc, NULL, 0);
}

/* COMMIT and ABORT: the decision for a prepared transaction, named by its txid. An unknown
 * txid is an error for a commit (the coordinator reports the outcome unknown) and nothing for
 * an abort (it was never prepared here, or is gone already). */
static void decide(struct fab_rpc_req *req, struct txn_env *e, bool commit)
{
    struct pack_r r;
    pack_r_init(&r, fab_rpc_data(req), fab_rpc_len(req));
    uint64_t txid = unpack_u64(&r);
    if (!unpack_done(&r)) {
        fab_rpc_reply(req, RDKV_EPROTO, NULL, 0);
        return;
    }
    struct prepared *p = part_take(e, txid);
    if (p && commit) part_commit(e, p);
    else if (p) part_abort(e, p);
    fab_rpc_reply(req, p || !commit ? 0 : RDKV_ENOTFOUND, NULL, 0);
}

static void on_commit(struct fab_rpc_req *req, void *arg) { decide(req, arg, true); }
static void on_abort(struct fab_rpc_req *req, void *arg) { decide(req, arg, false); }

struct scan_out {
    struct pack_w w;
    uint32_t n, limit;
    bool more;
};

static bool scan_emit(void *arg, rptr row, const struct row_view *v)
{
    struct scan_out *o = arg;
    if (o->n >= o->limit || o->w.len + v->klen + 16 > TXN_SCAN_PAGE_BYTES) {
        o->more = true;
        return false;
    }
    pack_u64(&o->w, row);
    pack_u32(&o->w, v->klen);
    uint8_t *p = pack_w_room(&o->w, v->klen);
    if (p && v->klen) memcpy(p, v->key, v->klen);
    o->n++;
    return true;
}

static void on_scan(struct fab_rpc_req *req, void *arg)
{
    struct txn_env *e = arg;
    struct pack_r r;
    pack_r_init(&r, fab_rpc_data(req), fab_rpc_len(req));
    uint32_t blen = unpack_u32(&r);
    const uint8_t *b = pack_r_take(&r, blen);
    uint8_t has_end = unpack_u8(&r);
    uint32_t elen = unpack_u32(&r);
    const uint8_t *en = pack_r_take(&r, elen);
    uint32_t alen = unpack_u32(&r);
    const uint8_t *after = pack_r_take(&r, alen);
    uint8_t has_after = unpack_u8(&r);
    uint32_t limit = unpack_u32(&r);
    uint32_t kmax = store_key_max(e->st);
    if (!unpack_done(&r) || has_end > 1 || has_after > 1 || blen > kmax || elen > kmax ||
        alen > kmax || (!has_end && elen) || (!has_after && alen)) {
        fab_rpc_reply(req, RDKV_EPROTO, NULL, 0);
        return;
    }
    struct scan_out o = {.limit = limit && limit < TXN_SCAN_PAGE ? limit : TXN_SCAN_PAGE};
    pack_w_init(&o.w);
    pack_u8(&o.w, 0);  /* more, filled in below */
    pack_u32(&o.w, 0); /* n */
    long rc = store_scan(e->st, b, blen, has_end ? en : NULL, elen, has_after ? after : NULL,
                         alen, (uint64_t)o.limit + 1, scan_emit, &o);
    if (rc < 0 || o.w.err) {
        fab_rpc_reply(req, rc < 0 ? (int)rc : RDKV_ENOMEM, NULL, 0);
        pack_w_free(&o.w);
        return;
    }
    o.w.p[0] = o.more;
    for (int i = 0; i < 4; i++) o.w.p[1 + i] = (uint8_t)(o.n >> (8 * i));
    fab_rpc_reply(req, 0, o.w.p, o.w.len);
    pack_w_free(&o.w);
}

int part_register(struct txn_env *e)
{
    static const struct {
        uint16_t type;
        fab_rpc_handler fn;
    } hs[TXN_GUARDS] = {
        {TXN_RPC_PREPARE, on_prepare}, {TXN_RPC_COMMIT, on_commit}, {TXN_RPC_ABORT, on_abort},
        {TXN_RPC_APPLY, on_apply},     {TXN_RPC_SCAN, on_scan},
    };
    for (unsigned i = 0; i < TXN_GUARDS; i++) {
        e->guards[i] = (struct txn_guard){e, hs[i].fn};
        int rc = fab_rpc_register(e->f, hs[i].type, guarded, &e->guards[i], 0);
        if (rc) return rc;
    }
    return 0;
}
