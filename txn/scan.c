/* Scans (txn.h): a shared range lock on the keys [begin, end) on every partition, then the rows
 * in key order, merged from every partition's pages (this node's from its ordered index, the
 * others' by TXN_RPC_SCAN) with the transaction's own writes in the range; each row is locked
 * shared before it is read (a remote one in the lock's own chain where the lock can). */
#include "txn/coord.h"

#include "common/key.h"

#include <stdlib.h>
#include <string.h>

struct pcur {
    uint16_t part;    /* the node serving partition pid, as the scan began */
    uint16_t pid;
    bool done;        /* no page after the current one */
    bool started;
    const uint8_t *after;
    uint32_t alen;
    struct prow {
        const uint8_t *key;
        uint32_t klen;
        rptr row;
    } *rows;
    uint32_t nrows, pos, cap;
};

struct txn_iter {
    struct txn *t;
    const uint8_t *b, *e;
    uint32_t blen, elen;
    bool has_end;
    uint64_t limit, emitted;
    struct pcur *cur;
    uint32_t ncur;
    uint32_t *ws; /* the transaction's writes in the range, by key */
    uint32_t nws, wpos;
    int err;
};


struct local_page {
    struct txn *t;
    struct pcur *cur;
    int err;
};

static bool page_add(struct pcur *cur, struct txn *t, const uint8_t *key, uint32_t klen, rptr row,
                     int *err)
{
    if (cur->nrows == cur->cap) {
        uint32_t cap = cur->cap ? cur->cap * 2 : 64;
        struct prow *n = realloc(cur->rows, cap * sizeof *n);
        if (!n) {
            *err = RDKV_ENOMEM;
            return false;
        }
        cur->rows = n;
        cur->cap = cap;
    }
    const uint8_t *k = txn_copy(t, key, klen);
    if (!k) {
        *err = RDKV_ENOMEM;
        return false;
    }
    cur->rows[cur->nrows++] = (struct prow){k, klen, row};
    return true;
}

static bool local_emit(void *arg, rptr row, const struct row_view *v)
{
    struct local_page *lp = arg;
    return page_add(lp->cur, lp->t, v->key, v->klen, row, &lp->err);
}

/* Fetches the next page of a partition's keys. */
static int page_fill(struct txn_iter *it, struct pcur *cur)
{
    struct txn *t = it->t;
    struct txn_worker *w = t->w;
    struct txn_env *e = w->e;
    cur->nrows = cur->pos = 0;
    uint32_t want = TXN_SCAN_PAGE;
    if (it->limit && it->limit - it->emitted < want) want = (uint32_t)(it->limit - it->emitted) + 1;
    if (cur->part == e->me) {
        struct local_page lp = {t, cur, 0};
        struct store *st = txn_pstore_as(e, cur->pid, w->adopting);
        if (!st) return RDKV_EUNAVAILABLE; /* (served elsewhere now) */
        long n = store_scan(st, it->b, it->blen, it->has_end ? it->e : NULL, it->elen,
                            cur->started ? cur->after : NULL, cur->alen, want, local_emit, &lp);
        if (n < 0) return (int)n;
        if (lp.err) return lp.err;
        cur->done = (uint32_t)n < want;
    } else {
        if (txn_down(e, cur->part)) return RDKV_EUNAVAILABLE;
        int trc = txn_touch(t, cur->part);
        if (trc) return trc;
        struct pack_w pw;
        pack_w_init(&pw);
        pack_u32(&pw, it->blen);
        uint8_t *p = pack_w_room(&pw, it->blen);
        if (p && it->blen) memcpy(p, it->b, it->blen);
        pack_u8(&pw, it->has_end);
        pack_u32(&pw, it->has_end ? it->elen : 0);
        p = pack_w_room(&pw, it->has_end ? it->elen : 0);
        if (p && it->has_end && it->elen) memcpy(p, it->e, it->elen);
        uint32_t alen = cur->started ? cur->alen : 0;
        pack_u32(&pw, alen);
        p = pack_w_room(&pw, alen);
        if (p && alen) memcpy(p, cur->after, alen);
        pack_u8(&pw, cur->started);
        pack_u32(&pw, want);
        pack_u16(&pw, cur->pid);
        if (pw.err) {
            pack_w_free(&pw);
            return RDKV_ENOMEM;
        }
        struct fab_buf resp = {0};
        int rc = fab_rpc_call(w->c, cur->part, TXN_RPC_SCAN, pw.p, pw.len, &resp, 0);
        pack_w_free(&pw);
        if (rc) {
            fab_buf_free(&resp);
            return txn_classify(t, rc, cur->part);
        }
        struct pack_r r;
        pack_r_init(&r, resp.data, resp.len);
        uint8_t more = unpack_u8(&r);
        uint32_t n = unpack_u32(&r);
        const uint8_t *prev = cur->started ? cur->after : NULL;
        uint32_t prevlen = cur->alen;
        for (uint32_t i = 0; i < n && !r.err && !rc; i++) {
            rptr row = unpack_u64(&r);
            uint32_t kl = unpack_u32(&r);
            const uint8_t *k = pack_r_take(&r, kl);
            if (r.err) break;
            /* a peer's answer is checked like any input: in order, in range, its partition */
            if ((prev && key_cmp(k, kl, prev, prevlen) <= 0) ||
                key_cmp(k, kl, it->b, it->blen) < 0 ||
                (it->has_end && key_cmp(k, kl, it->e, it->elen) >= 0) ||
                rptr_node(row) != cur->part || txn_partition(e, k, kl) != cur->pid) {
                rc = RDKV_EPROTO;
                break;
            }
            if (!page_add(cur, t, k, kl, row, &rc)) break;
            prev = cur->rows[cur->nrows - 1].key;
            prevlen = kl;
        }
        if (!rc && (!unpack_done(&r) || more > 1)) rc = RDKV_EPROTO;
        fab_buf_free(&resp);
        if (rc) return rc;
        cur->done = !more;
    }
    cur->started = true;
    if (cur->nrows) {
        cur->after = cur->rows[cur->nrows - 1].key;
        cur->alen = cur->rows[cur->nrows - 1].klen;
    }
    return 0;
}

static int ws_cmp(const void *a, const void *b, void *arg)
{
    const struct txn *t = arg;
    const struct tent *x = &t->ents[*(const uint32_t *)a];
    const struct tent *y = &t->ents[*(const uint32_t *)b];
    return key_cmp(x->key, x->klen, y->key, y->klen);
}

static int scan_in(struct txn *t, const void *begin, uint32_t blen, const void *end,
                   uint32_t elen, uint64_t limit, struct txn_iter **out)
{
    if (!t->active) return RDKV_EINVAL;
    if (t->failed) return t->failed;
    struct txn_env *e = t->w->e;
    if (txn_check_key(t, blen) || (end && txn_check_key(t, elen))) return RDKV_ETOOBIG;
    int crc = txn_charge_op(t, (uint64_t)blen + (end ? elen : 0));
    if (crc) return crc;
    struct txn_iter *it = calloc(1, sizeof *it);
    if (!it) return RDKV_ENOMEM;
    it->t = t;
    it->b = txn_copy(t, begin, blen);
    it->blen = blen;
    it->has_end = end != NULL;
    it->e = end ? txn_copy(t, end, elen) : NULL;
    it->elen = end ? elen : 0;
    it->limit = limit;
    if (!it->b || (end && !it->e)) {
        free(it);
        return txn_fail(t, RDKV_ENOMEM);
    }
    if (end && key_cmp(it->b, blen, it->e, elen) >= 0) return *out = it, 0; /* empty */
    /* shared range locks on every partition's node (one key space per node, whatever
     * partitions it serves): the keys [begin, end) */
    int rc = 0;
    it->cur = calloc(e->n, sizeof *it->cur);
    if (!it->cur) rc = txn_fail(t, RDKV_ENOMEM);
    for (uint16_t q = 0; q < e->n && !rc; q++) {
        uint32_t moves = txn_route_moves(e, q);
        uint16_t p = it->cur[q].part = txn_owner(e, q);
        it->cur[q].pid = q;
        if (!t->sroute[q]) t->sroute[q] = moves + 1;
        bool seen = false;
        for (uint16_t q2 = 0; q2 < q; q2++) seen |= it->cur[q2].part == p;
        if (seen) continue;
        if (t->nscans == t->scancap) {
            uint32_t cap = t->scancap ? t->scancap * 2 : 8;
            struct range_handle **n = realloc(t->scans, cap * sizeof *n);
            if (!n) {
                rc = txn_fail(t, RDKV_ENOMEM);
                break;
            }
            t->scans = n;
            t->scancap = cap;
        }
        if (txn_down(e, p)) {
            rc = txn_fail(t, RDKV_EUNAVAILABLE);
            break;
        }
        struct range_handle *h = NULL;
        rc = txn_range_take(t, &h, p, it->b, blen, it->e, elen, end ? RANGE_K_END : 0,
                        LOCK_SHARED); /* (a failure releases the others) */
        if (h && h->mode) t->scans[t->nscans++] = h;
        else if (h) txn_rh_put(t->w, h);
    }
    it->ws = calloc(t->nents ? t->nents : 1, sizeof *it->ws);
    if (!rc && (!it->cur || !it->ws)) rc = txn_fail(t, RDKV_ENOMEM);
    if (rc) {
        txn_iter_close(it);
        return rc;
    }
    it->ncur = e->n;
    for (uint32_t i = 0; i < t->nents; i++) {
        struct tent *en = &t->ents[i];
        if (!en->wop || key_cmp(en->key, en->klen, it->b, blen) < 0 ||
            (end && key_cmp(en->key, en->klen, it->e, elen) >= 0))
            continue;
        it->ws[it->nws++] = i;
    }
    qsort_r(it->ws, it->nws, sizeof *it->ws, ws_cmp, t);
    *out = it;
    return 0;
}

static int iter_next_in(struct txn_iter *it, const void **key, uint32_t *klen,
                        const void **val, uint32_t *vlen)
{
    struct txn *t = it->t;
    if (it->err) return it->err;
    if (t->failed) return it->err = t->failed;
    for (;;) {
        if (it->limit && it->emitted >= it->limit) return 0;
        struct pcur *best = NULL;
        for (uint32_t i = 0; i < it->ncur; i++) {
            struct pcur *c = &it->cur[i];
            if (c->pos == c->nrows && !c->done) {
                int rc = page_fill(it, c);
                if (rc) return it->err = txn_fail(t, rc);
            }
            if (c->pos == c->nrows) continue;
            struct prow *r = &c->rows[c->pos];
            if (!best || key_cmp(r->key, r->klen, best->rows[best->pos].key,
                                 best->rows[best->pos].klen) < 0)
                best = c;
        }
        struct tent *wsn = it->wpos < it->nws ? &t->ents[it->ws[it->wpos]] : NULL;
        if (!best && !wsn) return 0;
        int cmp = !best ? 1 : (!wsn ? -1 : 0);
        if (best && wsn)
            cmp = key_cmp(best->rows[best->pos].key, best->rows[best->pos].klen, wsn->key,
                          wsn->klen);
        if (cmp >= 0) {
            /* this transaction's own write comes first (or replaces the stored row) */
            it->wpos++;
            if (cmp == 0) best->pos++;
            if (wsn->wop != W_PUT) continue;
            *key = wsn->key;
            *klen = wsn->klen;
            *val = wsn->nval;
            *vlen = wsn->nvlen;
            it->emitted++;
            return 1;
        }
        struct prow *r = &best->rows[best->pos++];
        int i = txn_ent_get(t, r->key, r->klen);
        if (i < 0) return it->err = txn_fail(t, i);
        struct tent *en = &t->ents[i];
        if (!en->lk.mode) {
            /* the range lock keeps the row from going away; its row lock keeps it still (and
             * a remote row is read in the lock's own chain where the lock can) */
            int ok;
            int rc = txn_lock_read_row(t, en, r->row, LOCK_SHARED, true, &ok);
            if (rc) return it->err = rc;
            if (ok < 0) return it->err = txn_fail(t, ok);
            if (ok == 0) {
                txn_unlock_row(t, en);
                continue;
            }
            en->row = r->row;
            en->exists = en->known = true;
        } else if (!en->have_val) {
            int ok = txn_read_row(t, en, en->row, true);
            if (ok < 0) return it->err = txn_fail(t, ok);
            if (ok == 0) continue;
        }
        if (!en->exists) continue;
        *key = en->key;
        *klen = en->klen;
        *val = en->val;
        *vlen = en->vlen;
        it->emitted++;
        return 1;
    }
}

void txn_iter_close(struct txn_iter *it)
{
    if (!it) return;
    if (it->cur)
        for (uint32_t i = 0; i < it->ncur; i++) free(it->cur[i].rows);
    free(it->cur);
    free(it->ws);
    free(it);
}

int txn_scan(struct txn *t, const void *begin, uint32_t blen, const void *end, uint32_t elen,
             uint64_t limit, struct txn_iter **out)
{
    uint64_t *was = txn_pin_on(t);
    int rc = scan_in(t, begin, blen, end, elen, limit, out);
    txn_pin_off(t, was);
    return rc;
}

int txn_iter_next(struct txn_iter *it, const void **key, uint32_t *klen, const void **val,
                  uint32_t *vlen)
{
    uint64_t *was = txn_pin_on(it->t);
    int rc = iter_next_in(it, key, klen, val, vlen);
    txn_pin_off(it->t, was);
    return rc;
}
