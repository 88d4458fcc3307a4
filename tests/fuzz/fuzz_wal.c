/* Fuzz target: the redo log's decoders (storage/wal.h) -- a segment image as recovery reads it
 * from disk (header, records, checksums, LSNs, the search for a good group after a bad record)
 * and the writes payload of COMMIT and PREPARE records. The first byte picks how the rest is
 * framed: raw (the header itself fuzzed), after a valid header, or as the payload of one valid
 * record followed by the rest as a tail. Built for libFuzzer with clang, and for the bounded smoke
 * run in the test suite with the driver in driver.c. */
#include "storage/wal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define NODE 7
#define FP 0x0123456789abcdefull

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static int on_write(void *arg, const struct wal_write *w)
{
    volatile uint64_t *sink = arg;
    /* the decoder's pointers lie inside the buffer */
    if (w->klen) *sink += ((const uint8_t *)w->key)[w->klen - 1];
    if (w->vlen) *sink += ((const uint8_t *)w->val)[w->vlen - 1];
    return 0;
}

static int on_rec(void *arg, const struct wal_rec *r)
{
    volatile uint64_t *sink = arg;
    *sink += r->lsn + r->type;
    if (r->len) *sink += r->payload[r->len - 1];
    if (r->type == WAL_COMMIT) (void)wal_writes_unpack(r->payload, r->len, on_write, arg);
    if (r->type == WAL_PREPARE && r->len >= 2)
        (void)wal_writes_unpack(r->payload + 2, r->len - 2, on_write, arg);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (1u << 20)) return 0;
    unsigned mode = data[0] % 3;
    data++;
    size--;
    volatile uint64_t sink = 0;
    (void)wal_writes_unpack(data, size, on_write, (void *)&sink);

    size_t cap = WAL_SEG_HDR + WAL_REC_HDR + 2 * size;
    uint8_t *buf = malloc(cap ? cap : 1);
    if (!buf) return 0;
    size_t len = 0;
    if (mode == 0) {
        memcpy(buf, data, size);
        len = size;
    } else {
        /* a valid header for node NODE, cluster FP, first LSN 1 */
        memset(buf, 0, WAL_SEG_HDR);
        memcpy(buf, WAL_SEG_MAGIC, 8);
        put32(buf + 8, WAL_VERSION);
        put32(buf + 12, WAL_SEG_HDR);
        buf[16] = NODE;
        put64(buf + 24, FP);
        put64(buf + 32, 1);
        put32(buf + 60, (uint32_t)XXH3_64bits(buf, 60));
        len = WAL_SEG_HDR;
        if (mode == 2) {
            /* one valid record (LSN 1, a group start) whose payload is the input */
            uint8_t *p = buf + len;
            put32(p, WAL_REC_MAGIC << 24 | (uint32_t)size);
            put64(p + 8, 1);
            put64(p + 16, 42);
            memset(p + 24, 0, 8);
            p[24] = WAL_COMMIT;
            p[25] = WAL_F_GROUP;
            memcpy(p + WAL_REC_HDR, data, size);
            put32(p + 4, (uint32_t)XXH3_64bits_withSeed(p + 8, WAL_REC_HDR - 8 + size,
                                                         WAL_REC_MAGIC << 24 | (uint32_t)size));
            len += WAL_REC_HDR + size;
        }
        memcpy(buf + len, data, size);
        len += size;
    }
    /* an exact-size copy, so a sanitizer sees any read past the end */
    uint8_t *img = malloc(len ? len : 1);
    if (img) {
        memcpy(img, buf, len);
        struct wal_seg_scan ss;
        int rc = wal_seg_decode(img, len, NODE, FP, 0, 0, on_rec, (void *)&sink, &ss);
        if (rc == 0 && (ss.end > len || ss.end < WAL_SEG_HDR)) abort();
        if (mode == 2 && rc == 0 && ss.records < 1) abort(); /* the valid record is found */
        (void)wal_seg_decode(img, len, NODE, FP, 0, 300, on_rec, (void *)&sink, &ss);
        free(img);
    }
    free(buf);
    return 0;
}
