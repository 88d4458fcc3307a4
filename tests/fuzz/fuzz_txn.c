/* Fuzz target: the decoders of the transaction layer's outside bytes -- txn_wops_unpack (the
 * PREPARE / APPLY frames a coordinator sends) and row_decode (row bytes READ from a peer) --
 * under key / value limits taken from the input's first bytes. Each input is decoded as is
 * (and, for rows, at several lengths), then used as the seed of well-formed frames and rows that
 * must round-trip exactly, which are then corrupted and decoded again. After every decode the
 * outputs are checked: every op's key and value lie inside the input, lengths within the limits,
 * the ops account for every byte; a decoded row never claims a byte beyond len. Buffers are
 * copied to exact-size allocations so that ASan sees any read past the end. Built for libFuzzer
 * with clang, and for the bounded smoke run in the test suite with the driver in driver.c. */
#include "storage/store.h"
#include "txn/internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "fuzz_txn: " __VA_ARGS__);                                                 \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static bool inside(const uint8_t *base, size_t len, const uint8_t *p, uint64_t n)
{
    return p >= base && (size_t)(p - base) <= len && n <= len - (size_t)(p - base);
}

/* Limits from a selector byte (and the two bytes after it for a free-form value). */
static uint32_t pick_limit(uint8_t sel, const uint8_t *more, bool value)
{
    static const uint32_t keys[] = {0, 1, 2, 7, 16, 255, STORE_KEY_MAX_DEFAULT,
                                    STORE_KEY_MAX_LIMIT, UINT32_MAX};
    static const uint32_t vals[] = {0, 1, 8, 1024, STORE_VALUE_MAX_DEFAULT,
                                    STORE_VALUE_MAX_LIMIT, UINT32_MAX, 63};
    unsigned nk = sizeof keys / sizeof keys[0], nv = sizeof vals / sizeof vals[0];
    unsigned n = value ? nv : nk;
    if (sel % (n + 1) == n) return (uint32_t)get_le(more, 2); /* free form, 0..65535 */
    return value ? vals[sel % (n + 1)] : keys[sel % (n + 1)];
}

/* ---------------------------------------------------------------------------------------------
 * txn_wops_unpack */

/* Decodes p[0..len) (an exact-size copy) and checks the result against the encoding. */
static int check_wops(const uint8_t *src, size_t len, uint32_t key_max, uint32_t value_max)
{
    uint8_t *p = malloc(len ? len : 1);
    if (!p) return RDKV_ENOMEM;
    if (len) memcpy(p, src, len);
    uint64_t txid = 0, inc = 0;
    uint16_t coord = 0;
    struct wop *ops = NULL;
    uint32_t n = 0;
    int rc = txn_wops_unpack(p, len, key_max, value_max, &txid, &coord, &inc, &ops, &n);
    if (rc != 0 && rc != RDKV_EPROTO && rc != RDKV_ETOOBIG && rc != RDKV_ENOMEM)
        FAIL("txn_wops_unpack returned %d", rc);
    if (rc == 0) {
        if (len < 22 || !ops || n == 0) FAIL("accepted a frame of %zu bytes with %u ops", len, n);
        if (txid != get_le(p, 8) || coord != get_le(p + 8, 2)) FAIL("txid / coordinator wrong");
        if (inc != get_le(p + 10, 8)) FAIL("incarnation wrong");
        if (n != get_le(p + 18, 4)) FAIL("op count %u is not the frame's", n);
        /* the ops lie in order, back to back, and account for every byte of the frame */
        size_t at = 22;
        for (uint32_t i = 0; i < n; i++) {
            const struct wop *o = &ops[i];
            if (o->kind < WOP_UPDATE || o->kind > WOP_DELETE) FAIL("op %u: kind %u", i, o->kind);
            if (o->klen > key_max || o->vlen > value_max)
                FAIL("op %u: klen %u vlen %u over the limits %u / %u", i, o->klen, o->vlen,
                     key_max, value_max);
            if (o->kind != WOP_INSERT && o->row == RPTR_NULL) FAIL("op %u: no row", i);
            if (o->kind == WOP_DELETE && o->vlen) FAIL("op %u: delete with a value", i);
            if (at + TXN_WOP_MIN > len || o->kind != p[at] || o->row != get_le(p + at + 1, 8) ||
                o->lock_tok != get_le(p + at + 9, 8) || o->range_tok != get_le(p + at + 17, 8) ||
                o->klen != get_le(p + at + 25, 4))
                FAIL("op %u: header does not match the bytes at %zu", i, at);
            if (!inside(p, len, o->key, o->klen) || o->key != p + at + 29)
                FAIL("op %u: key outside the frame or misplaced", i);
            at += 29 + (size_t)o->klen;
            if (!inside(p, len, p + at, 4) || o->vlen != get_le(p + at, 4))
                FAIL("op %u: vlen does not match the bytes at %zu", i, at);
            if (!inside(p, len, o->val, o->vlen) || o->val != p + at + 4)
                FAIL("op %u: value outside the frame or misplaced", i);
            at += 4 + (size_t)o->vlen;
            volatile uint8_t sink = 0;
            if (o->klen) sink ^= o->key[o->klen - 1];
            if (o->vlen) sink ^= o->val[o->vlen - 1];
            (void)sink;
        }
        if (at != len) FAIL("ops end at %zu of a %zu-byte frame", at, len);
        free(ops);
    }
    free(p);
    return rc;
}

/* A tiny generator seeded from the input, for well-formed frames and rows. */
static uint64_t gen(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static uint32_t gen_len(uint64_t *s, uint32_t max)
{
    uint32_t cap = max < 300 ? max : 300; /* frames stay small; the limits still vary */
    switch (gen(s) % 4) {
    case 0: return 0;
    case 1: return cap;
    default: return (uint32_t)(gen(s) % ((uint64_t)cap + 1));
    }
}

/* Builds a valid frame within the limits, checks it round-trips, then corrupts it. */
static void wops_structured(uint64_t seed, const uint8_t *mut, size_t nmut, uint32_t key_max,
                            uint32_t value_max)
{
    uint64_t s = seed | 1;
    uint32_t n = 1 + (uint32_t)(gen(&s) % 6);
    struct wop ops[6];
    uint8_t bytes[6][2][300];
    for (uint32_t i = 0; i < n; i++) {
        struct wop *o = &ops[i];
        o->kind = (uint8_t)(WOP_UPDATE + gen(&s) % 3);
        o->row = o->kind == WOP_INSERT && gen(&s) % 2 ? RPTR_NULL : (gen(&s) | 1);
        o->lock_tok = gen(&s) % 3 ? gen(&s) : 0;
        o->range_tok = gen(&s) % 3 ? gen(&s) : 0;
        o->klen = gen_len(&s, key_max);
        o->vlen = o->kind == WOP_DELETE ? 0 : gen_len(&s, value_max);
        for (uint32_t k = 0; k < o->klen; k++) bytes[i][0][k] = (uint8_t)gen(&s);
        for (uint32_t k = 0; k < o->vlen; k++) bytes[i][1][k] = (uint8_t)gen(&s);
        o->key = bytes[i][0];
        o->val = bytes[i][1];
    }
    uint64_t txid = gen(&s), inc = gen(&s);
    uint16_t coord = (uint16_t)gen(&s);
    struct pack_w w;
    pack_w_init(&w);
    txn_wops_pack(&w, txid, coord, inc, ops, n);
    if (w.err) {
        pack_w_free(&w);
        return;
    }
    /* the well-formed frame decodes to exactly what was packed */
    uint64_t t2, i2;
    uint16_t c2;
    struct wop *got;
    uint32_t n2;
    int rc = txn_wops_unpack(w.p, w.len, key_max, value_max, &t2, &c2, &i2, &got, &n2);
    if (rc == RDKV_ENOMEM) {
        pack_w_free(&w);
        return;
    }
    if (rc) FAIL("a well-formed frame of %u ops was refused: %d", n, rc);
    if (t2 != txid || c2 != coord || i2 != inc || n2 != n) FAIL("round trip: header differs");
    for (uint32_t i = 0; i < n; i++)
        if (got[i].kind != ops[i].kind || got[i].row != ops[i].row ||
            got[i].lock_tok != ops[i].lock_tok || got[i].range_tok != ops[i].range_tok ||
            got[i].klen != ops[i].klen || got[i].vlen != ops[i].vlen ||
            (ops[i].klen && memcmp(got[i].key, ops[i].key, ops[i].klen)) ||
            (ops[i].vlen && memcmp(got[i].val, ops[i].val, ops[i].vlen)))
            FAIL("round trip: op %u differs", i);
    free(got);
    check_wops(w.p, w.len, key_max, value_max);
    /* a limit one below a length in the frame is refused */
    if (ops[0].klen && check_wops(w.p, w.len, ops[0].klen - 1, value_max) != RDKV_ETOOBIG)
        FAIL("a key over key_max was not refused with RDKV_ETOOBIG");
    /* every truncation is refused */
    for (size_t cut = 0; cut < w.len; cut += 1 + cut / 4)
        if (check_wops(w.p, cut, key_max, value_max) == 0) FAIL("truncated at %zu: accepted", cut);
    /* corruptions driven by the input: byte stores, length and count fields set to extremes */
    for (size_t m = 0; m + 3 <= nmut && m < 3 * 8; m += 3) {
        size_t at = get_le(mut + m, 2) % w.len;
        switch (mut[m + 2] % 5) {
        case 0: w.p[at] = mut[m + 2]; break;
        case 1: w.p[at] ^= (uint8_t)(1u << (mut[m + 2] % 8)); break;
        case 2:
            if (at + 4 <= w.len) memset(w.p + at, 0xff, 4);
            break;
        case 3: /* the op count */
            for (int k = 0; k < 4; k++) w.p[10 + k] = (uint8_t)(mut[m + 2] * (k + 1));
            break;
        case 4:
            if (at + 4 <= w.len) {
                uint32_t v = (uint32_t)(w.len - at) + (mut[m + 2] % 9) - 4; /* near the end */
                for (int k = 0; k < 4; k++) w.p[at + k] = (uint8_t)(v >> (8 * k));
            }
            break;
        }
        check_wops(w.p, w.len, key_max, value_max);
    }
    pack_w_free(&w);
}

/* ---------------------------------------------------------------------------------------------
 * row_decode */

static int check_row(const uint8_t *src, size_t len, uint32_t key_max, uint32_t value_max)
{
    uint8_t *p = malloc(len ? len : 1);
    if (!p) return RDKV_ENOMEM;
    if (len) memcpy(p, src, len);
    struct row_view v;
    memset(&v, 0xA5, sizeof v);
    int rc = row_decode(p, len, key_max, value_max, &v);
    if (rc != 0 && rc != RDKV_EPROTO && rc != RDKV_ETOOBIG) FAIL("row_decode returned %d", rc);
    if (rc == 0 || rc == RDKV_ETOOBIG) {
        if (len >= sizeof(struct row_hdr)) {
            struct row_hdr h;
            memcpy(&h, p, sizeof h);
            if (h.magic != ROW_MAGIC) FAIL("a row without the magic was not refused");
            if (v.klen != h.klen || v.vlen != h.vlen || v.version != h.version ||
                v.flags != h.flags || v.vext != h.vext || v.cap != h.cap)
                FAIL("view fields differ from the header");
            if (v.klen > key_max || v.vlen > value_max)
                FAIL("klen %u vlen %u over the limits %u / %u", v.klen, v.vlen, key_max,
                     value_max);
            if (v.flags & ~(ROW_LIVE | ROW_DEAD) || v.flags == (ROW_LIVE | ROW_DEAD))
                FAIL("flags %x", v.flags);
            if (v.flags == ROW_LIVE && v.version == 0) FAIL("a live row of version 0");
            uint64_t need = (uint64_t)v.klen + (v.vext == RPTR_NULL ? v.vlen : 0);
            if (need > v.cap) FAIL("key and inline value (%llu) over cap %u",
                                   (unsigned long long)need, v.cap);
            uint64_t rl = row_read_len(v.klen, v.vlen, v.vext == RPTR_NULL);
            if (rc == RDKV_ETOOBIG && rl <= len) FAIL("RDKV_ETOOBIG with the row in the buffer");
            if (rc == 0 && rl > len) FAIL("row of %llu bytes accepted from %zu",
                                          (unsigned long long)rl, len);
        } else if (rc == 0) {
            FAIL("accepted %zu bytes: shorter than a header", len);
        }
    }
    if (rc == 0) {
        if (v.key != p + sizeof(struct row_hdr) || !inside(p, len, v.key, v.klen))
            FAIL("key outside the buffer");
        if (v.vext == RPTR_NULL) {
            if (v.val != v.key + v.klen || !inside(p, len, v.val, v.vlen))
                FAIL("inline value outside the buffer");
        } else if (v.val) {
            FAIL("an out-of-line value was handed out as inline");
        }
        volatile uint8_t sink = 0;
        if (v.klen) sink ^= v.key[v.klen - 1];
        if (v.val && v.vlen) sink ^= v.val[v.vlen - 1];
        (void)sink;
    } else if (v.key || v.val) {
        FAIL("a refused row handed out pointers");
    }
    free(p);
    return rc;
}

static void put_hdr(uint8_t *p, const struct row_hdr *h) { memcpy(p, h, sizeof *h); }

static void row_structured(uint64_t seed, const uint8_t *mut, size_t nmut, uint32_t key_max,
                           uint32_t value_max)
{
    uint64_t s = seed | 1;
    struct row_hdr h;
    memset(&h, 0, sizeof h);
    h.klen = gen_len(&s, key_max);
    h.vlen = gen_len(&s, value_max);
    h.vext = gen(&s) % 3 == 0 ? (gen(&s) | 64) : RPTR_NULL;
    uint64_t need = (uint64_t)h.klen + (h.vext ? 0 : h.vlen);
    h.cap = (uint32_t)((need + 63) & ~63ull) + (gen(&s) % 2 ? 64 : 0);
    if ((uint64_t)h.cap > (((uint64_t)key_max + 4096 + 63) & ~63ull)) h.cap = (uint32_t)((need + 63) & ~63ull);
    h.flags = (uint16_t)(gen(&s) % 3); /* 0, LIVE, DEAD */
    h.magic = ROW_MAGIC;
    h.version = gen(&s) | 1;
    h.khash = gen(&s);
    size_t len = sizeof h + h.cap;
    uint8_t *p = calloc(1, len);
    if (!p) return;
    put_hdr(p, &h);
    for (size_t i = sizeof h; i < len; i++) p[i] = (uint8_t)gen(&s);
    int rc = check_row(p, len, key_max, value_max);
    /* a row that fits its limits decodes, and every shorter read asks for more */
    bool fits = ((uint64_t)h.cap <= (((uint64_t)key_max + 4096 + 63) & ~63ull));
    if (fits && rc) FAIL("a well-formed row was refused: %d", rc);
    size_t full = (size_t)row_read_len(h.klen, h.vlen, h.vext == RPTR_NULL);
    for (size_t cut = 0; cut < full; cut += 1 + cut / 3)
        if (check_row(p, cut, key_max, value_max) != RDKV_ETOOBIG && fits)
            FAIL("a read of %zu of %zu bytes was not RDKV_ETOOBIG", cut, full);
    if (fits && check_row(p, full, key_max, value_max) != 0) FAIL("the exact read was refused");
    for (size_t m = 0; m + 3 <= nmut && m < 3 * 8; m += 3) {
        size_t at = get_le(mut + m, 2) % len;
        switch (mut[m + 2] % 4) {
        case 0: p[at % sizeof h] = mut[m + 2]; break;             /* the header */
        case 1: p[at] ^= (uint8_t)(1u << (mut[m + 2] % 8)); break;
        case 2: memset(p + 8 + 4 * (mut[m + 2] % 3), 0xff, 4); break; /* klen / vlen / cap */
        case 3: p[20 + mut[m + 2] % 2] = mut[m + 1]; break;       /* flags */
        }
        size_t l2 = at % 4 == 0 ? len : (size_t)(get_le(mut + m, 2) % (len + 1));
        check_row(p, l2, key_max, value_max);
    }
    free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool once;
    if (!once) {
        once = true;
        struct row_view v;
        if (row_decode(NULL, 64, 16, 16, &v) != RDKV_EINVAL ||
            row_decode("", 0, 16, 16, NULL) != RDKV_EINVAL)
            FAIL("row_decode without a buffer or an output");
    }
    uint8_t hdr[5] = {0};
    memcpy(hdr, data, size < sizeof hdr ? size : sizeof hdr);
    uint32_t key_max = pick_limit(hdr[0], hdr + 1, false);
    uint32_t value_max = pick_limit(hdr[1], hdr + 3, true);
    const uint8_t *body = size > 1 ? data + 1 : data;
    size_t blen = size > 1 ? size - 1 : size;

    /* the input as a frame and as row bytes, at its length and at shorter ones */
    check_wops(body, blen, key_max, value_max);
    check_row(body, blen, key_max, value_max);
    if (blen > 2) {
        size_t l2 = (size_t)get_le(hdr + 2, 2) % blen;
        check_row(body, l2, key_max, value_max);
        check_wops(body, l2, key_max, value_max);
    }
    /* an input that starts like a header gets the magic, so the checks past it are reached */
    if (blen >= sizeof(struct row_hdr)) {
        uint8_t *p = malloc(blen);
        if (p) {
            memcpy(p, body, blen);
            p[22] = (uint8_t)ROW_MAGIC;
            p[23] = (uint8_t)(ROW_MAGIC >> 8);
            p[20] &= 3;
            p[21] = 0;
            check_row(p, blen, key_max, value_max);
            free(p);
        }
    }

    /* well-formed frames and rows seeded by the input, then corrupted by it */
    uint64_t seed = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < size; i++) seed = (seed ^ data[i]) * 0x100000001b3ull;
    wops_structured(seed, body, blen, key_max, value_max);
    row_structured(seed ^ 0x9E3779B97F4A7C15ull, body, blen, key_max, value_max);
    return 0;
}
