/* Table-driven encoding, merging and reporting of kvbench's structs (fields.h). */
#include "tools/kvbench/fields.h"

#include "rdkv.h"

#include "common/hist.h"

#include <inttypes.h>
#include <string.h>

static size_t bf_size(uint8_t type)
{
    switch (type) {
    case BF_U8: return 1;
    case BF_U16: return 2;
    case BF_U32:
    case BF_I32: return 4;
    case BF_HIST: return sizeof(struct hist);
    default: return 8;
    }
}

static void *at(void *s, const struct bench_field *f, unsigned i)
{
    return (char *)s + f->off + (size_t)i * bf_size(f->type);
}

static const void *cat(const void *s, const struct bench_field *f, unsigned i)
{
    return (const char *)s + f->off + (size_t)i * bf_size(f->type);
}

/* The element's value widened to 64 bits (signed types sign-extended). */
static uint64_t get(const void *p, uint8_t type)
{
    uint64_t v = 0;
    switch (type) {
    case BF_U8: v = *(const uint8_t *)p; break;
    case BF_U16: v = *(const uint16_t *)p; break;
    case BF_U32: v = *(const uint32_t *)p; break;
    case BF_I32: v = (uint64_t)(int64_t) * (const int32_t *)p; break;
    default: memcpy(&v, p, 8); break;
    }
    return v;
}

static void put(void *p, uint8_t type, uint64_t v)
{
    switch (type) {
    case BF_U8: *(uint8_t *)p = (uint8_t)v; break;
    case BF_U16: *(uint16_t *)p = (uint16_t)v; break;
    case BF_U32: *(uint32_t *)p = (uint32_t)v; break;
    case BF_I32: *(int32_t *)p = (int32_t)(uint32_t)v; break;
    default: memcpy(p, &v, 8); break;
    }
}

void bf_pack(const struct bench_field *t, size_t n, const void *s, struct pack_w *w)
{
    for (size_t k = 0; k < n; k++) {
        const struct bench_field *f = &t[k];
        if (f->type == BF_STR) {
            pack_str(w, cat(s, f, 0));
            continue;
        }
        for (unsigned i = 0; i < f->n; i++) {
            const void *p = cat(s, f, i);
            if (f->type == BF_HIST) hist_pack(p, w);
            else if (f->type == BF_U8) pack_u8(w, (uint8_t)get(p, f->type));
            else if (f->type == BF_U16) pack_u16(w, (uint16_t)get(p, f->type));
            else if (f->type == BF_U32 || f->type == BF_I32) pack_u32(w, (uint32_t)get(p, f->type));
            else pack_u64(w, get(p, f->type));
        }
    }
}

bool bf_unpack(const struct bench_field *t, size_t n, void *s, struct pack_r *r)
{
    for (size_t k = 0; k < n; k++) {
        const struct bench_field *f = &t[k];
        if (f->type == BF_STR) {
            unpack_str(r, at(s, f, 0), f->n);
            continue;
        }
        for (unsigned i = 0; i < f->n; i++) {
            void *p = at(s, f, i);
            if (f->type == BF_HIST) {
                if (!hist_unpack(p, r)) return false;
            } else if (f->type == BF_U8) put(p, f->type, unpack_u8(r));
            else if (f->type == BF_U16) put(p, f->type, unpack_u16(r));
            else if (f->type == BF_U32 || f->type == BF_I32) put(p, f->type, unpack_u32(r));
            else put(p, f->type, unpack_u64(r));
        }
    }
    return !r->err;
}

int bf_unpack_all(const struct bench_field *t, size_t n, void *s, const void *p, size_t len)
{
    struct pack_r r;
    pack_r_init(&r, p, len);
    return bf_unpack(t, n, s, &r) && unpack_done(&r) ? 0 : RDKV_EPROTO;
}

static void merge_one(const struct bench_field *f, void *d, const void *s)
{
    if (f->type == BF_HIST) {
        hist_merge(d, s);
        return;
    }
    if (f->type == BF_F64) {
        double a, b;
        memcpy(&a, d, 8);
        memcpy(&b, s, 8);
        if (f->merge == BF_SUM) a += b;
        else if (f->merge == BF_MAX && b > a) a = b;
        else if (f->merge == BF_FIRST && a == 0) a = b;
        memcpy(d, &a, 8);
        return;
    }
    uint64_t a = get(d, f->type), b = get(s, f->type);
    bool is_signed = f->type == BF_I32 || f->type == BF_I64;
    if (f->merge == BF_SUM) a += b;
    else if (f->merge == BF_MAX && (is_signed ? (int64_t)b > (int64_t)a : b > a)) a = b;
    else if (f->merge == BF_FIRST && !a) a = b;
    put(d, f->type, a);
}

void bf_merge(const struct bench_field *t, size_t n, void *dst, const void *src)
{
    for (size_t k = 0; k < n; k++) {
        const struct bench_field *f = &t[k];
        if (f->merge == BF_KEEP || f->type == BF_STR) continue;
        for (unsigned i = 0; i < f->n; i++) merge_one(f, at(dst, f, i), cat(src, f, i));
    }
}

void bf_init(const struct bench_field *t, size_t n, void *s, size_t size)
{
    memset(s, 0, size);
    for (size_t k = 0; k < n; k++)
        if (t[k].type == BF_HIST)
            for (unsigned i = 0; i < t[k].n; i++) hist_init(at(s, &t[k], i));
}

uint64_t bf_u64(const struct bench_field *f, const void *s) { return get(cat(s, f, 0), f->type); }

void bf_print_ycsb(FILE *out, const char *series, const struct bench_field *t, size_t n,
                   const void *s)
{
    for (size_t k = 0; k < n; k++)
        if (t[k].label)
            fprintf(out, "[%s], %s, %" PRIu64 "\n", series, t[k].label, bf_u64(&t[k], s));
}

void bf_json(struct json *j, const struct bench_field *t, size_t n, const void *s)
{
    for (size_t k = 0; k < n; k++)
        if (t[k].name) {
            if (t[k].type == BF_I32 || t[k].type == BF_I64)
                json_kv_i64(j, t[k].name, (int64_t)bf_u64(&t[k], s));
            else json_kv_u64(j, t[k].name, bf_u64(&t[k], s));
        }
}
