/* Fuzz target: the checkpoint decoder (ckpt_decode, storage/ckpt.c), which reads files that a
 * crash may have torn or a disk may have damaged. Each input is decoded as is, then used as the
 * seed of a well-formed image (rows made from its bytes, in key order) that must decode to
 * exactly those rows, and which is then cut and bit-flipped where the input says: every damaged
 * image must be refused whole, with no row handed out. Images are exact-size allocations so that
 * ASan sees any read past the end. Built for libFuzzer with clang, and for the bounded smoke run
 * in the test suite with the driver in driver.c. */
#include "rdkv_status.h"
#include "common/key.h"
#include "storage/ckpt.h"
#include "storage/oindex.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "fuzz_ckpt: " __VA_ARGS__);                                                \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

struct seen {
    const uint8_t *base;
    size_t len;
    uint32_t kmax, vmax;
    const struct ckpt_row *want;
    size_t nwant, n;
};

static int on_row(void *arg, const void *key, uint32_t klen, const void *val, uint32_t vlen)
{
    struct seen *s = arg;
    const uint8_t *k = key, *v = val;
    if (klen > s->kmax || vlen > s->vmax) FAIL("row past the limits");
    if (k < s->base || k + klen > s->base + s->len || v < s->base || v + vlen > s->base + s->len)
        FAIL("row outside the image");
    if (s->want) {
        if (s->n >= s->nwant) FAIL("more rows than written");
        const struct ckpt_row *w = &s->want[s->n];
        if (w->klen != klen || w->vlen != vlen || (klen && memcmp(w->key, key, klen)) ||
            (vlen && memcmp(w->val, val, vlen)))
            FAIL("row %zu differs", s->n);
    }
    s->n++;
    return 0;
}

static uint8_t *exact(const uint8_t *p, size_t n)
{
    uint8_t *b = malloc(n ? n : 1);
    if (b && n) memcpy(b, p, n);
    return b;
}

static int by_key(const void *a, const void *b)
{
    const struct ckpt_row *x = a, *y = b;
    return key_cmp(x->key, x->klen, y->key, y->klen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    /* as is, under a few limits; node and fingerprint from the input so the header can match */
    uint8_t *b = exact(data, size);
    if (!b) return 0;
    uint16_t node = size >= 18 ? (uint16_t)(data[16] | data[17] << 8) : 0;
    uint64_t fp = 0;
    for (int i = 0; i < 8 && 24 + i < (int)size; i++) fp |= (uint64_t)data[24 + i] << (8 * i);
    static const uint32_t kmaxes[] = {0, 16, 4096, 65535}, vmaxes[] = {0, 64, 1u << 20, 64u << 20};
    for (int l = 0; l < 4; l++) {
        struct seen s = {b, size, kmaxes[l], vmaxes[l], NULL, 0, 0};
        int rc = ckpt_decode(b, size, node, fp, kmaxes[l], vmaxes[l], on_row, &s, NULL, err,
                             sizeof err);
        if (rc && s.n) FAIL("refused after handing out %zu rows", s.n);
    }
    free(b);

    /* a well-formed image from the input: rows of up to 31-byte keys and 63-byte values */
    if (size < 4) return 0;
    struct ckpt_row rows[64];
    size_t n = 0, at = 3;
    while (n < 64 && at < size) {
        uint32_t kl = data[at] % 32, vl = (uint32_t)(data[at] >> 5) * 9;
        at++;
        if (kl + vl > size - at) break;
        rows[n++] = (struct ckpt_row){data + at, data + at + kl, kl, vl};
        at += kl + vl;
    }
    qsort(rows, n, sizeof rows[0], by_key);
    size_t m = 0; /* distinct keys only */
    for (size_t i = 0; i < n; i++)
        if (!m || key_cmp(rows[m - 1].key, rows[m - 1].klen, rows[i].key, rows[i].klen))
            rows[m++] = rows[i];
    uint8_t *img;
    size_t len;
    unsigned per = data[0] % 5 + 1;
    if (ckpt_image(7, 0xfeedull, data[1], rows, m, per, &img, &len)) return 0;
    struct seen s = {img, len, 31, 63 * 9, rows, m, 0};
    int rc = ckpt_decode(img, len, 7, 0xfeedull, 31, 63 * 9, on_row, &s, NULL, err, sizeof err);
    if (rc || s.n != m) FAIL("a good image was refused (%d: %s) or short (%zu of %zu)", rc, err,
                             s.n, m);
    if (ckpt_decode(img, len, 8, 0xfeedull, 31, 63 * 9, NULL, NULL, NULL, err, sizeof err) !=
        RDKV_ECONFIG)
        FAIL("another node's image was not refused");

    /* cut where the input says: refused whole */
    size_t cut = ((size_t)data[2] << 8 | data[size - 1]) % len;
    uint8_t *c = exact(img, cut);
    struct seen sc = {c, cut, 31, 63 * 9, NULL, 0, 0};
    if (c && ckpt_decode(c, cut, 7, 0xfeedull, 31, 63 * 9, on_row, &sc, NULL, err, sizeof err) ==
                 0)
        FAIL("an image cut at %zu of %zu was accepted", cut, len);
    if (sc.n) FAIL("a cut image handed out rows");
    free(c);
    /* one bit flipped where the input says: refused whole */
    size_t at2 = ((size_t)data[size - 1] << 8 | data[2]) % len;
    img[at2] ^= (uint8_t)(1u << (data[0] % 8));
    struct seen sf = {img, len, 31, 63 * 9, NULL, 0, 0};
    if (ckpt_decode(img, len, 7, 0xfeedull, 31, 63 * 9, on_row, &sf, NULL, err, sizeof err) == 0)
        FAIL("an image with byte %zu flipped was accepted", at2);
    if (sf.n) FAIL("a flipped image handed out rows");
    free(img);
    return 0;
}
