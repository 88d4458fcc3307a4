/* Little-endian packing for RPC payloads: a writer that grows a buffer and a reader that checks
 * every length. A reader that runs past the end (or a writer that runs out of memory) sets its
 * error flag and returns zeros from then on, so a decoder checks once at the end. */
#ifndef RDKV_PACK_H
#define RDKV_PACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct pack_w {
    uint8_t *p;
    size_t len, cap;
    bool err;
};

struct pack_r {
    const uint8_t *p;
    size_t len, at;
    bool err;
};

/* Fixed-place little-endian stores and loads, for headers filled in after their body. */
static inline void pack_put_u32le(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void pack_put_u64le(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void pack_put_u16le(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline uint16_t pack_get_u16le(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t pack_get_u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t pack_get_u64le(const uint8_t *p)
{
    return (uint64_t)pack_get_u32le(p) | (uint64_t)pack_get_u32le(p + 4) << 32;
}
/* Whether n bytes are all zero (a format's reserved fields). */
static inline bool pack_is_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

static inline void pack_w_init(struct pack_w *w) { memset(w, 0, sizeof *w); }
static inline void pack_w_free(struct pack_w *w) { free(w->p); memset(w, 0, sizeof *w); }

static inline uint8_t *pack_w_room(struct pack_w *w, size_t n)
{
    if (w->err) return NULL;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 256;
        while (cap < w->len + n) cap *= 2;
        uint8_t *np = realloc(w->p, cap);
        if (!np) {
            w->err = true;
            return NULL;
        }
        w->p = np;
        w->cap = cap;
    }
    uint8_t *at = w->p + w->len;
    w->len += n;
    return at;
}

static inline void pack_u64(struct pack_w *w, uint64_t v)
{
    uint8_t *p = pack_w_room(w, 8);
    if (p) pack_put_u64le(p, v);
}
static inline void pack_u32(struct pack_w *w, uint32_t v)
{
    uint8_t *p = pack_w_room(w, 4);
    if (p) pack_put_u32le(p, v);
}
static inline void pack_u16(struct pack_w *w, uint16_t v)
{
    uint8_t *p = pack_w_room(w, 2);
    if (p) {
        p[0] = (uint8_t)v;
        p[1] = (uint8_t)(v >> 8);
    }
}
static inline void pack_u8(struct pack_w *w, uint8_t v)
{
    uint8_t *p = pack_w_room(w, 1);
    if (p) p[0] = v;
}
/* A string: u16 length, then the bytes (no terminator). */
static inline void pack_str(struct pack_w *w, const char *s)
{
    size_t n = strlen(s);
    if (n > 0xFFFF) {
        w->err = true;
        return;
    }
    pack_u16(w, (uint16_t)n);
    uint8_t *p = pack_w_room(w, n);
    if (p) memcpy(p, s, n);
}

static inline void pack_r_init(struct pack_r *r, const void *p, size_t len)
{
    r->p = p;
    r->len = len;
    r->at = 0;
    r->err = false;
}
static inline const uint8_t *pack_r_take(struct pack_r *r, size_t n)
{
    if (r->err || n > r->len - r->at) {
        r->err = true;
        return NULL;
    }
    const uint8_t *p = r->p + r->at;
    r->at += n;
    return p;
}
static inline uint64_t unpack_u64(struct pack_r *r)
{
    const uint8_t *p = pack_r_take(r, 8);
    uint64_t v = 0;
    if (p)
        for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
static inline uint32_t unpack_u32(struct pack_r *r)
{
    const uint8_t *p = pack_r_take(r, 4);
    uint32_t v = 0;
    if (p)
        for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static inline uint16_t unpack_u16(struct pack_r *r)
{
    const uint8_t *p = pack_r_take(r, 2);
    return p ? (uint16_t)(p[0] | p[1] << 8) : 0;
}
static inline uint8_t unpack_u8(struct pack_r *r)
{
    const uint8_t *p = pack_r_take(r, 1);
    return p ? p[0] : 0;
}
/* Copies a string into out[cap] (always terminated); too long for out is an error. */
static inline void unpack_str(struct pack_r *r, char *out, size_t cap)
{
    uint16_t n = unpack_u16(r);
    const uint8_t *p = pack_r_take(r, n);
    if (!p || n >= cap || memchr(p, 0, n)) {
        r->err = true;
        if (cap) out[0] = 0;
        return;
    }
    memcpy(out, p, n);
    out[n] = 0;
}
/* True when the whole input was consumed without error. */
static inline bool unpack_done(const struct pack_r *r) { return !r->err && r->at == r->len; }

#endif
