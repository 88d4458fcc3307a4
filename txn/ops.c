/* A transaction's operations on keys (txn.h): get (under the lock, or once without it), put,
 * patch and delete. Reads lock shared (exclusive for an update) and then read; writes lock
 * exclusively and are buffered in the transaction's entry until commit. */
#include "txn/coord.h"

#include <string.h>

static void *mem_of(void *t, size_t n) { return txn_mem(t, n); }

static int get_in(struct txn *t, const void *key, uint32_t klen, bool for_update,
                  const void **val, uint32_t *vlen)
{
    if (!t->active) return RDKV_EINVAL;
    if (t->failed) return t->failed;
    int rc = txn_check_key(t, klen);
    if (!rc) rc = txn_charge_op(t, klen);
    if (rc) return rc;
    int i = txn_ent_get(t, key, klen);
    if (i < 0) return txn_fail(t, i);
    struct tent *en = &t->ents[i];
    if (en->wop == W_PUT) {
        *val = en->nval;
        *vlen = en->nvlen;
        return 0;
    }
    if (en->wop == W_DEL) return RDKV_ENOTFOUND;
    rc = txn_locate(t, en, for_update ? LOCK_EXCLUSIVE : LOCK_SHARED, true);
    if (rc) return rc;
    /* (again after the read: a lock wait may have outlasted the lease) */
    if (!txn_serving(t->w->e)) return txn_fail(t, RDKV_EUNAVAILABLE);
    if (!en->exists) return RDKV_ENOTFOUND;
    *val = en->val;
    *vlen = en->vlen;
    return 0;
}

/* A read without the row's lock (txn_get_once): 1 and the value when the row's location is
 * cached and storage's quiet read -- the lock line's first words, the row, the lock line's words
 * again, in one chain -- found no writer in the line (lock_algo.quiet) and the row whole in its
 * bytes; 0 when it cannot say (the caller reads under the lock). */
static int snapshot_read(struct txn *t, const void *key, uint32_t klen, const void **val,
                         uint32_t *vlen)
{
    struct txn_worker *w = t->w;
    struct txn_env *e = w->e;
    const struct lock_algo *a = e->row;
    if (!a->quiet || t->nents || txn_check_key(t, klen)) return 0;
    uint16_t pid = txn_partition(e, key, klen), part = txn_owner(e, pid);
    if (part == e->me || txn_down(e, part) || txn_touch(t, part)) return 0;
    rptr row;
    uint32_t readlen;
    if (!txn_cache_get(e, store_hash(key, klen), t->pinc[part], &row, &readlen) || !readlen)
        return 0;
    if (!w->rem_ok[pid] || w->rnode[pid] != part || w->cinc[pid] != t->pinc[part])
        return 0; /* (the locked read opens it) */
    struct row_view v;
    if (store_remote_read_quiet(w->c, &w->rem[pid], key, klen, row, readlen, a->peek, a->quiet,
                                mem_of, t, &v) != 1)
        return 0;
    *val = v.val;
    *vlen = v.vlen;
    w->stats.snapshots++;
    return 1;
}

int txn_get_once(struct txn *t, const void *key, uint32_t klen, const void **val,
                 uint32_t *vlen)
{
    if (!t->active) return RDKV_EINVAL;
    if (t->failed) return t->failed;
    uint64_t *was = txn_pin_on(t);
    int rc = snapshot_read(t, key, klen, val, vlen) == 1 ? txn_charge_op(t, klen)
                                                         : get_in(t, key, klen, false, val, vlen);
    txn_pin_off(t, was);
    return rc;
}

static int put_in(struct txn *t, const void *key, uint32_t klen, const void *val, uint32_t vlen)
{
    if (!t->active) return RDKV_EINVAL;
    if (t->failed) return t->failed;
    int rc = txn_check_key(t, klen);
    if (rc) return rc;
    if (vlen > store_value_max(t->w->e->st)) return RDKV_ETOOBIG;
    if ((rc = txn_charge_op(t, (uint64_t)klen + vlen))) return rc;
    int i = txn_ent_get(t, key, klen);
    if (i < 0) return txn_fail(t, i);
    struct tent *en = &t->ents[i];
    if ((rc = txn_locate(t, en, LOCK_EXCLUSIVE, false))) return rc;
    const uint8_t *v = txn_copy(t, val, vlen);
    if (!v) return txn_fail(t, RDKV_ENOMEM);
    en->wop = W_PUT;
    en->nval = v;
    en->nvlen = vlen;
    return 0;
}

int txn_patch(struct txn *t, const void *key, uint32_t klen, uint32_t off, const void *bytes,
              uint32_t n, const void **old, uint32_t *oldlen)
{
    const void *v;
    uint32_t vl;
    int rc = txn_get(t, key, klen, true, &v, &vl);
    if (rc) return rc;
    if (off > vl) return RDKV_EINVAL;
    uint64_t nl = (uint64_t)off + n > vl ? (uint64_t)off + n : vl;
    if (nl > store_value_max(t->w->e->st)) return RDKV_ETOOBIG;
    uint8_t *nv = txn_mem(t, nl ? nl : 1);
    if (!nv) return txn_fail(t, RDKV_ENOMEM);
    memcpy(nv, v, vl);
    if (n) memcpy(nv + off, bytes, n);
    if ((rc = txn_put(t, key, klen, nv, (uint32_t)nl))) return rc;
    if (old) {
        *old = v; /* (a put stages its value: the row, or its copy in tmem, is as it was) */
        *oldlen = vl;
    }
    return 0;
}

static int del_in(struct txn *t, const void *key, uint32_t klen)
{
    if (!t->active) return RDKV_EINVAL;
    if (t->failed) return t->failed;
    int rc = txn_check_key(t, klen);
    if (!rc) rc = txn_charge_op(t, klen);
    if (rc) return rc;
    int i = txn_ent_get(t, key, klen);
    if (i < 0) return txn_fail(t, i);
    struct tent *en = &t->ents[i];
    if (en->wop == W_DEL) return RDKV_ENOTFOUND;
    /* Like an insert, a delete locks its point {k} before the row, in the order scans take
     * range then rows (row first would deadlock with a scan until a lock wait ran out). A row
     * already locked by this transaction (read for update) cannot keep that order. */
    if (!en->lk.mode && !en->known && (!en->rh || en->rh->mode != LOCK_EXCLUSIVE)) {
        txn_range_drop(t, &en->rh);
        if ((rc = txn_point_take(t, en, LOCK_EXCLUSIVE))) return rc;
    }
    if ((rc = txn_locate(t, en, LOCK_EXCLUSIVE, false))) return rc;
    if (!en->exists) {
        if (en->wop == W_PUT) { /* inserted by this transaction: just forget it */
            en->wop = W_DEL;
            return 0;
        }
        return RDKV_ENOTFOUND;
    }
    /* a delete also locks its point exclusively, against scans and absent-key readers */
    if (!en->rh || en->rh->mode != LOCK_EXCLUSIVE) {
        txn_range_drop(t, &en->rh);
        if ((rc = txn_point_take(t, en, LOCK_EXCLUSIVE))) return rc;
    }
    en->wop = W_DEL;
    return 0;
}
int txn_get(struct txn *t, const void *key, uint32_t klen, bool for_update, const void **val,
            uint32_t *vlen)
{
    uint64_t *was = txn_pin_on(t);
    int rc = get_in(t, key, klen, for_update, val, vlen);
    txn_pin_off(t, was);
    return rc;
}

int txn_put(struct txn *t, const void *key, uint32_t klen, const void *val, uint32_t vlen)
{
    uint64_t *was = txn_pin_on(t);
    int rc = put_in(t, key, klen, val, vlen);
    txn_pin_off(t, was);
    return rc;
}

int txn_del(struct txn *t, const void *key, uint32_t klen)
{
    uint64_t *was = txn_pin_on(t);
    int rc = del_in(t, key, klen);
    txn_pin_off(t, was);
    return rc;
}
