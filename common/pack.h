/* Little-endian packing, the byte order of every rdkv format (RPC payloads, the wire, log and
 * checkpoint records, workload rows): fixed-place stores and loads of 16, 32 and 64 bits (and of
 * 1..8 bytes), a writer that grows a buffer, and a reader that checks every length. A reader that
 * runs past the end (or a writer that runs out of memory) sets its error flag and returns zeros
 * from then on, so a decoder checks once at the end. Encode and decode bytes with these, not with
 * shifts or a memcpy of a host integer. */
#ifndef RDKV_PACK_H
#define RDKV_PACK_H

#include <endian.h>
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

/* Fixed-place little-endian stores and loads (any alignment; one move each on x86). */
static inline void pack_put_u16le(void *p, uint16_t v)
{
    v = htole16(v);
    memcpy(p, &v, 2);
}
static inline void pack_put_u32le(void *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, 4);
}
static inline void pack_put_u64le(void *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, 8);
}
static inline uint16_t pack_get_u16le(const void *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return le16toh(v);
}
static inline uint32_t pack_get_u32le(const void *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return le32toh(v);
}
static inline uint64_t pack_get_u64le(const void *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return le64toh(v);
}
/* The low n bytes of v (n = 1..8), little-endian, and back: fields of odd widths. */
static inline void pack_put_le(void *p, uint64_t v, unsigned n)
{
    uint8_t *b = p;
    for (unsigned i = 0; i < n; i++) b[i] = (uint8_t)(v >> (8 * i));
}
static inline uint64_t pack_get_le(const void *p, unsigned n)
{
    const uint8_t *b = p;
    uint64_t v = 0;
    for (unsigned i = n; i--;) v = v << 8 | b[i];
    return v;
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
    if (p) pack_put_u16le(p, v);
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
/* Bytes: u32 length, then the bytes (the sessions' keys and values). */
static inline void pack_bytes(struct pack_w *w, const void *p, size_t n)
{
    if (n > UINT32_MAX) {
        w->err = true;
        return;
    }
    pack_u32(w, (uint32_t)n);
    uint8_t *d = pack_w_room(w, n);
    if (d && n) memcpy(d, p, n);
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
    return p ? pack_get_u64le(p) : 0;
}
static inline uint32_t unpack_u32(struct pack_r *r)
{
    const uint8_t *p = pack_r_take(r, 4);
    return p ? pack_get_u32le(p) : 0;
}
static inline uint16_t unpack_u16(struct pack_r *r)
{
    const uint8_t *p = pack_r_take(r, 2);
    return p ? pack_get_u16le(p) : 0;
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
/* Bytes as pack_bytes wrote them: where they are in the input (NULL on error), *n long. */
static inline const uint8_t *unpack_bytes(struct pack_r *r, uint32_t *n)
{
    *n = unpack_u32(r);
    return pack_r_take(r, *n);
}
/* True when the whole input was consumed without error. */
static inline bool unpack_done(const struct pack_r *r) { return !r->err && r->at == r->len; }

#endif
