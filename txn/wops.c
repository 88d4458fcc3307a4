/* The commit messages' encoding (internal.h): a PREPARE's or APPLY's writes, as the coordinator
 * sends them and the participant decodes them, every length checked (bad bytes: RDKV_EPROTO,
 * nothing else happens). */
#include "txn/internal.h"

#include <stdlib.h>
#include <string.h>

void txn_wops_pack(struct pack_w *w, uint64_t txid, uint16_t coord, uint64_t inc,
                   const struct wop *ops, uint32_t n)
{
    pack_u64(w, txid);
    pack_u16(w, coord);
    pack_u64(w, inc);
    pack_u32(w, n);
    for (uint32_t i = 0; i < n; i++) {
        pack_u8(w, ops[i].kind);
        pack_u64(w, ops[i].row);
        pack_u64(w, ops[i].lock_tok);
        pack_u64(w, ops[i].range_tok);
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
                    uint64_t *txid, uint16_t *coord, uint64_t *inc, struct wop **out,
                    uint32_t *nout)
{
    struct pack_r r;
    pack_r_init(&r, p, len);
    *txid = unpack_u64(&r);
    *coord = unpack_u16(&r);
    *inc = unpack_u64(&r);
    uint32_t n = unpack_u32(&r);
    /* every op takes at least TXN_WOP_MIN bytes: a count beyond that is a lie */
    if (r.err || n == 0 || n > (len - r.at) / TXN_WOP_MIN) return RDKV_EPROTO;
    struct wop *ops = calloc(n, sizeof *ops);
    if (!ops) return RDKV_ENOMEM;
    int rc = 0;
    for (uint32_t i = 0; i < n && !rc; i++) {
        struct wop *o = &ops[i];
        o->kind = unpack_u8(&r);
        o->row = unpack_u64(&r);
        o->lock_tok = unpack_u64(&r);
        o->range_tok = unpack_u64(&r);
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
