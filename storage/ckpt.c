/* Checkpoints of a store's partition: the format and its decoder, the writer (rows copied one at
 * a time under their shared locks), and the loader. docs/storage.md, "Checkpoints". */
#include "storage/ckpt.h"

#include "common/clock.h"
#include "common/key.h"
#include "common/log.h"
#include "common/pack.h"
#include "rdkv_status.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>



/* A block's checksum seed: its header's first 24 bytes and the file's seed (the XXH3-64 of the
 * file header's first 40 bytes: all but the row count, which the writer knows only at the end). */
static uint64_t block_seed(const uint8_t *bh, uint64_t fseed)
{
    return XXH3_64bits(bh, 24) ^ fseed;
}

/* ---------------------------------------------------------------------------------------------
 * Decoding. */

#define ANY_LSN UINT64_MAX

/* The nrows rows of a block's payload (or a stream's batch), keys rising from *prev on: checks
 * each (and, with fn, calls it). RDKV_EPROTO with err empty when they do not fill plen. */
static int walk_rows(const uint8_t *p, size_t plen, uint32_t nrows, uint32_t key_max,
                     uint32_t value_max, uint64_t first, const uint8_t **prev, uint32_t *prevlen,
                     ckpt_row_fn fn, void *arg, char *err, size_t errcap)
{
    if (errcap) err[0] = 0;
    struct pack_r r;
    pack_r_init(&r, p, plen);
    for (uint32_t i = 0; i < nrows; i++) {
        uint32_t klen = unpack_u32(&r), vlen = unpack_u32(&r);
        if (r.err) break;
        if (klen > key_max || vlen > value_max)
            return log_reason(err, errcap, RDKV_ETOOBIG, "row %" PRIu64 ": key of %u or value of "
                        "%u bytes past the store's limits (%u, %u)", first + i, klen, vlen,
                        key_max, value_max);
        const uint8_t *k = pack_r_take(&r, klen), *v = pack_r_take(&r, vlen);
        if (r.err) break;
        if (*prev && key_cmp(*prev, *prevlen, k, klen) >= 0)
            return log_reason(err, errcap, RDKV_EPROTO, "row %" PRIu64 ": keys out of order",
                        first + i);
        *prev = k;
        *prevlen = klen;
        if (fn) {
            int rc = fn(arg, k, klen, v, vlen);
            if (rc) return rc;
        }
    }
    return r.err || r.at != plen ? RDKV_EPROTO : 0;
}

int ckpt_rows_decode(const uint8_t *buf, size_t len, uint32_t nrows, uint32_t key_max,
                     uint32_t value_max, ckpt_row_fn fn, void *arg, char *err, size_t errcap)
{
    const uint8_t *prev = NULL;
    uint32_t prevlen = 0;
    int rc = walk_rows(buf, len, nrows, key_max, value_max, 0, &prev, &prevlen, fn, arg, err,
                       errcap);
    if (rc == RDKV_EPROTO && !err[0])
        return log_reason(err, errcap, RDKV_EPROTO, "%u rows do not fill %zu bytes", nrows, len);
    return rc;
}

/* Walks the blocks from off: checks each (and, with fn, calls it for each row). */
static int walk_blocks(const uint8_t *buf, size_t len, uint64_t fseed, uint32_t key_max,
                       uint32_t value_max, ckpt_row_fn fn, void *arg, size_t *end,
                       uint64_t *rows_out, uint64_t *blocks_out, uint64_t *payload_out,
                       char *err, size_t errcap)
{
    size_t off = CKPT_HDR;
    uint64_t blocks = 0, rows = 0, payload = 0;
    const uint8_t *prev = NULL;
    uint32_t prevlen = 0;
    /* every block is at least CKPT_BLOCK_HDR bytes, so this loop runs at most len / 32 times */
    while (off < len) {
        if (len - off >= 8 && !memcmp(buf + off, CKPT_END_MAGIC, 8)) break;
        if (len - off >= 4 && pack_get_u32le(buf + off) == CKPT_STATE_MAGIC) break;
        if (len - off < CKPT_BLOCK_HDR)
            return log_reason(err, errcap, RDKV_EPROTO, "torn block header at byte %zu", off);
        const uint8_t *bh = buf + off;
        uint32_t nrows = pack_get_u32le(bh + 4), plen = pack_get_u32le(bh + 8);
        if (pack_get_u32le(bh) != CKPT_BLOCK_MAGIC || !pack_is_zero(bh + 12, 4))
            return log_reason(err, errcap, RDKV_EPROTO, "no block header at byte %zu", off);
        if (pack_get_u64le(bh + 16) != blocks)
            return log_reason(err, errcap, RDKV_EPROTO, "block %" PRIu64 " at byte %zu says %" PRIu64,
                        blocks, off, pack_get_u64le(bh + 16));
        if (plen > len - off - CKPT_BLOCK_HDR)
            return log_reason(err, errcap, RDKV_EPROTO, "block %" PRIu64 " torn (%u payload bytes, %zu "
                        "left)", blocks, plen, len - off - CKPT_BLOCK_HDR);
        const uint8_t *p = bh + CKPT_BLOCK_HDR;
        if (XXH3_64bits_withSeed(p, plen, block_seed(bh, fseed)) != pack_get_u64le(bh + 24))
            return log_reason(err, errcap, RDKV_EPROTO, "block %" PRIu64 " at byte %zu: bad checksum",
                        blocks, off);
        if (nrows == 0)
            return log_reason(err, errcap, RDKV_EPROTO, "block %" PRIu64 " holds no rows", blocks);
        int rc = walk_rows(p, plen, nrows, key_max, value_max, rows, &prev, &prevlen, fn, arg,
                           err, errcap);
        if (rc == RDKV_EPROTO && !err[0])
            return log_reason(err, errcap, RDKV_EPROTO, "block %" PRIu64 ": rows do not fill its "
                        "payload", blocks);
        if (rc) return rc;
        blocks++;
        rows += nrows;
        payload += plen;
        off += CKPT_BLOCK_HDR + plen;
    }
    *end = off;
    *rows_out = rows;
    *blocks_out = blocks;
    *payload_out = payload;
    return 0;
}

static int decode(const uint8_t *buf, size_t len, uint16_t node, uint64_t fp, uint64_t want_lsn,
                  uint32_t key_max, uint32_t value_max, ckpt_row_fn fn, void *arg,
                  struct ckpt_info *info, char *err, size_t errcap)
{
    if (!buf && len) return log_reason(err, errcap, RDKV_EINVAL, "no buffer");
    if (len < CKPT_HDR + CKPT_TRAILER)
        return log_reason(err, errcap, RDKV_EPROTO, "%zu bytes: shorter than a header and a trailer",
                    len);
    if (memcmp(buf, CKPT_MAGIC, 8))
        return log_reason(err, errcap, RDKV_EPROTO, "not a checkpoint (bad magic)");
    uint64_t hcheck = XXH3_64bits(buf, 56), fseed = XXH3_64bits(buf, 40);
    if (hcheck != pack_get_u64le(buf + 56))
        return log_reason(err, errcap, RDKV_EPROTO, "bad header checksum");
    uint32_t version = pack_get_u32le(buf + 8);
    if ((version != CKPT_VERSION && version != 1) || pack_get_u32le(buf + 12) != CKPT_HDR ||
        !pack_is_zero(buf + 18, 6) || !pack_is_zero(buf + 48, 8))
        return log_reason(err, errcap, RDKV_EPROTO, "unknown checkpoint version %u",
                    pack_get_u32le(buf + 8));
    uint16_t hnode = pack_get_u16le(buf + 16);
    uint64_t hfp = pack_get_u64le(buf + 24), lsn = pack_get_u64le(buf + 32), hrows = pack_get_u64le(buf + 40);
    if (hnode != node || hfp != fp)
        return log_reason(err, errcap, RDKV_ECONFIG, "checkpoint of node %u, cluster %016" PRIx64
                    " (this is node %u, cluster %016" PRIx64 ")", hnode, hfp, node, fp);
    if (want_lsn != ANY_LSN && lsn != want_lsn)
        return log_reason(err, errcap, RDKV_EPROTO, "header's replay LSN %" PRIu64 " is not the "
                    "file name's %" PRIu64, lsn, want_lsn);
    size_t end;
    uint64_t rows, blocks, payload;
    int rc = walk_blocks(buf, len, fseed, key_max, value_max, NULL, NULL, &end, &rows, &blocks,
                         &payload, err, errcap);
    if (rc) return rc;
    /* version 2: the state block, then the trailer */
    const uint8_t *state = NULL;
    uint64_t slen = 0;
    if (len - end >= 4 && pack_get_u32le(buf + end) == CKPT_STATE_MAGIC) {
        const uint8_t *sh = buf + end;
        if (version < 2 || len - end < CKPT_BLOCK_HDR || !pack_is_zero(sh + 4, 4) ||
            !pack_is_zero(sh + 12, 4) || pack_get_u64le(sh + 16) != blocks)
            return log_reason(err, errcap, RDKV_EPROTO, "bad state block header at byte %zu", end);
        slen = pack_get_u32le(sh + 8);
        if (slen > len - end - CKPT_BLOCK_HDR)
            return log_reason(err, errcap, RDKV_EPROTO, "state block torn (%" PRIu64 " bytes, %zu "
                        "left)", slen, len - end - CKPT_BLOCK_HDR);
        state = sh + CKPT_BLOCK_HDR;
        if (XXH3_64bits_withSeed(state, slen, block_seed(sh, fseed)) != pack_get_u64le(sh + 24))
            return log_reason(err, errcap, RDKV_EPROTO, "state block at byte %zu: bad checksum", end);
        end += CKPT_BLOCK_HDR + slen;
    }
    if (len - end != CKPT_TRAILER)
        return log_reason(err, errcap, RDKV_EPROTO, "%s at byte %zu",
                    len - end < CKPT_TRAILER ? "torn trailer" : "bytes after the trailer", end);
    const uint8_t *t = buf + end;
    if (XXH3_64bits_withSeed(t, 56, fseed) != pack_get_u64le(t + 56))
        return log_reason(err, errcap, RDKV_EPROTO, "bad trailer checksum");
    if (pack_get_u64le(t + 8) != rows || pack_get_u64le(t + 16) != blocks || pack_get_u64le(t + 24) != payload ||
        pack_get_u64le(t + 32) != lsn || hrows != rows || pack_get_u64le(t + 40) != slen ||
        !pack_is_zero(t + 48, 8))
        return log_reason(err, errcap, RDKV_EPROTO, "trailer's totals disagree with the file (%" PRIu64
                    " rows in %" PRIu64 " blocks found)", rows, blocks);
    if (info) {
        memset(info, 0, sizeof *info);
        info->node = hnode;
        info->fp = hfp;
        info->replay_lsn = lsn;
        info->rows = rows;
        info->blocks = blocks;
        info->bytes = len;
        info->version = version;
        info->state = (uint8_t *)state;
        info->state_len = (size_t)slen;
    }
    if (!fn) return 0;
    /* the whole file is good: only now do rows go out */
    return walk_blocks(buf, len, fseed, key_max, value_max, fn, arg, &end, &rows, &blocks,
                       &payload, err, errcap);
}

int ckpt_decode(const uint8_t *buf, size_t len, uint16_t node, uint64_t fp, uint32_t key_max,
                uint32_t value_max, ckpt_row_fn fn, void *arg, struct ckpt_info *info, char *err,
                size_t errcap)
{
    return decode(buf, len, node, fp, ANY_LSN, key_max, value_max, fn, arg, info, err, errcap);
}

/* ---------------------------------------------------------------------------------------------
 * Encoding (the writer and ckpt_image share it). */

/* The header without its row count and check; returns the file's seed. */
static uint64_t hdr_start(uint8_t *hdr, uint16_t node, uint64_t fp, uint64_t lsn)
{
    memset(hdr, 0, CKPT_HDR);
    memcpy(hdr, CKPT_MAGIC, 8);
    pack_put_u32le(hdr + 8, CKPT_VERSION);
    pack_put_u32le(hdr + 12, CKPT_HDR);
    pack_put_u16le(hdr + 16, node);
    pack_put_u64le(hdr + 24, fp);
    pack_put_u64le(hdr + 32, lsn);
    return XXH3_64bits(hdr, 40);
}
static void hdr_finish(uint8_t *hdr, uint64_t rows)
{
    pack_put_u64le(hdr + 40, rows);
    pack_put_u64le(hdr + 56, XXH3_64bits(hdr, 56));
}
/* bh: a block header followed by its plen payload bytes. */
static void block_seal(uint8_t *bh, uint32_t rows, uint32_t plen, uint64_t bno, uint64_t fseed)
{
    pack_put_u32le(bh, CKPT_BLOCK_MAGIC);
    pack_put_u32le(bh + 4, rows);
    pack_put_u32le(bh + 8, plen);
    memset(bh + 12, 0, 4);
    pack_put_u64le(bh + 16, bno);
    pack_put_u64le(bh + 24,
                   XXH3_64bits_withSeed(bh + CKPT_BLOCK_HDR, plen, block_seed(bh, fseed)));
}
static void trailer_fill(uint8_t *tr, uint64_t rows, uint64_t blocks, uint64_t payload,
                         uint64_t lsn, uint64_t slen, uint64_t fseed)
{
    memset(tr, 0, CKPT_TRAILER);
    memcpy(tr, CKPT_END_MAGIC, 8);
    pack_put_u64le(tr + 8, rows);
    pack_put_u64le(tr + 16, blocks);
    pack_put_u64le(tr + 24, payload);
    pack_put_u64le(tr + 32, lsn);
    pack_put_u64le(tr + 40, slen);
    pack_put_u64le(tr + 56, XXH3_64bits_withSeed(tr, 56, fseed));
}
static size_t put_row(uint8_t *p, const void *key, uint32_t klen, const void *val, uint32_t vlen)
{
    pack_put_u32le(p, klen);
    pack_put_u32le(p + 4, vlen);
    if (klen) memcpy(p + 8, key, klen);
    if (vlen) memcpy(p + 8 + klen, val, vlen);
    return 8 + (size_t)klen + vlen;
}

int ckpt_image(uint16_t node, uint64_t fp, uint64_t lsn, const struct ckpt_row *rows, size_t n,
               unsigned rows_per_block, uint8_t **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    if (!rows_per_block || (n && !rows)) return RDKV_EINVAL;
    size_t total = CKPT_HDR + CKPT_TRAILER + (n / rows_per_block + 1) * CKPT_BLOCK_HDR;
    for (size_t i = 0; i < n; i++) total += 8 + (size_t)rows[i].klen + rows[i].vlen;
    uint8_t *b = malloc(total);
    if (!b) return RDKV_ENOMEM;
    uint64_t fseed = hdr_start(b, node, fp, lsn), blocks = 0, payload = 0;
    size_t at = CKPT_HDR;
    for (size_t i = 0; i < n;) {
        size_t bh = at, k = 0;
        at += CKPT_BLOCK_HDR;
        for (; k < rows_per_block && i < n; k++, i++)
            at += put_row(b + at, rows[i].key, rows[i].klen, rows[i].val, rows[i].vlen);
        uint32_t plen = (uint32_t)(at - bh - CKPT_BLOCK_HDR);
        block_seal(b + bh, (uint32_t)k, plen, blocks++, fseed);
        payload += plen;
    }
    trailer_fill(b + at, n, blocks, payload, lsn, 0, fseed);
    at += CKPT_TRAILER;
    hdr_finish(b, n);
    *out = b;
    *len = at;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Files. */

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return w < 0 ? -errno : -EIO;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* "ckpt-<16 hex>.ckpt": its LSN. */
static bool parse_name(const char *name, uint64_t *lsn)
{
    if (strlen(name) != 5 + 16 + 5 || strncmp(name, "ckpt-", 5) || strcmp(name + 21, ".ckpt"))
        return false;
    uint64_t v = 0;
    for (int i = 5; i < 21; i++) {
        char c = name[i];
        unsigned d;
        if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
        else return false;
        v = v << 4 | d;
    }
    *lsn = v;
    return true;
}

static int cmp_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : (x > y ? -1 : 0);
}

/* Every checkpoint LSN in dir, newest first, in *out (malloc'd). The count or RDKV_EIO/ENOMEM;
 * with rm_tmp, leftover temporary files are removed on the way. */
static long list_all(const char *dir, uint64_t **out, bool rm_tmp)
{
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? 0 : RDKV_EIO;
    size_t n = 0, cap = 0;
    uint64_t *v = NULL;
    struct dirent *de;
    while ((de = readdir(d))) {
        uint64_t lsn;
        size_t nl = strlen(de->d_name);
        if (rm_tmp && nl > 9 && !strncmp(de->d_name, "ckpt-", 5) &&
            !strcmp(de->d_name + nl - 4, ".tmp")) {
            (void)unlinkat(dirfd(d), de->d_name, 0);
            continue;
        }
        if (!parse_name(de->d_name, &lsn)) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            uint64_t *nv = realloc(v, cap * sizeof *v);
            if (!nv) {
                free(v);
                closedir(d);
                return RDKV_ENOMEM;
            }
            v = nv;
        }
        v[n++] = lsn;
    }
    closedir(d);
    if (n) qsort(v, n, sizeof *v, cmp_desc);
    *out = v;
    return (long)n;
}

int ckpt_list(const char *dir, uint64_t *lsns, unsigned max)
{
    uint64_t *v;
    long n = list_all(dir, &v, false);
    if (n < 0) return (int)n;
    unsigned k = (unsigned)n < max ? (unsigned)n : max;
    if (k) memcpy(lsns, v, k * sizeof *v);
    free(v);
    return (int)k;
}

/* ---------------------------------------------------------------------------------------------
 * Writing. */

void ckpt_write_opts_init(struct ckpt_write_opts *o)
{
    memset(o, 0, sizeof *o);
    o->row_wait_ns = 1000000;
    o->row_give_up_ns = 30000000000ll;
    o->batch = 256;
}

struct wctx {
    struct store *s;
    const struct ckpt_write_opts *o;
    enum lock_mode mode;
    int fd;
    uint64_t fseed;
    uint8_t *blk; /* CKPT_BLOCK_HDR bytes of header, then the payload */
    size_t blen, bcap;
    uint32_t brows;
    uint64_t blocks, rows, payload, bytes, retries;
    int64_t max_hold, hold_total;
    uint64_t holds;
    /* the current batch of rows from the index: rows and their keys (keys stay stable while a
     * row is indexed, but the row may be deleted and recycled once the index lock is gone, so
     * each key is copied and checked again under the row's lock) */
    rptr *cand;
    uint32_t *koff, *klen;
    uint32_t ncand;
    uint8_t *keys;
    size_t klenall, kcap;
    bool nomem;
    int io_errno; /* a failed write's errno */
    ckpt_sink_fn sink; /* ckpt_stream's: takes each batch instead of the file */
    void *sink_arg;
    size_t target;     /* a block (batch) is flushed once its payload passes this */
};

static bool grow(uint8_t **p, size_t *cap, size_t need)
{
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 4096;
    while (c < need) c *= 2;
    uint8_t *np = realloc(*p, c);
    if (!np) return false;
    *p = np;
    *cap = c;
    return true;
}

/* 0, or RDKV_ENOMEM (w is then still safe to wctx_free). */
static int wctx_init(struct wctx *w, struct store *s, const struct ckpt_write_opts *o,
                     size_t target)
{
    memset(w, 0, sizeof *w);
    w->s = s;
    w->o = o;
    w->fd = -1;
    w->blen = CKPT_BLOCK_HDR;
    w->target = target;
    w->mode = (o->row_lock->modes & (1u << LOCK_SHARED)) ? LOCK_SHARED : LOCK_EXCLUSIVE;
    w->cand = malloc(o->batch * sizeof *w->cand);
    w->koff = malloc(o->batch * sizeof *w->koff);
    w->klen = malloc(o->batch * sizeof *w->klen);
    if (!w->cand || !w->koff || !w->klen || !grow(&w->blk, &w->bcap, target + 4096))
        return RDKV_ENOMEM;
    /* touched once now, so that copies under row locks take no page faults on it */
    memset(w->blk, 0, w->bcap);
    return 0;
}

/* What the writer did, for ckpt_info (bytes: the file's, or a stream's rows'). */
static void wctx_info(const struct wctx *w, uint64_t bytes, struct ckpt_info *info)
{
    memset(info, 0, sizeof *info);
    info->rows = w->rows;
    info->blocks = w->blocks;
    info->bytes = bytes;
    info->lock_retries = w->retries;
    info->max_hold_ns = w->max_hold;
    info->hold_ns = w->hold_total;
    info->holds = w->holds;
}

static void wctx_free(struct wctx *w)
{
    free(w->cand);
    free(w->koff);
    free(w->klen);
    free(w->keys);
    free(w->blk);
}

static bool collect_fn(void *arg, rptr row, const struct row_view *v)
{
    struct wctx *w = arg;
    if (!grow(&w->keys, &w->kcap, w->klenall + v->klen)) {
        w->nomem = true;
        return false;
    }
    if (v->klen) memcpy(w->keys + w->klenall, v->key, v->klen);
    w->cand[w->ncand] = row;
    w->koff[w->ncand] = (uint32_t)w->klenall;
    w->klen[w->ncand] = v->klen;
    w->ncand++;
    w->klenall += v->klen;
    return true;
}

static int flush_block(struct wctx *w)
{
    if (!w->brows) return 0;
    uint32_t plen = (uint32_t)(w->blen - CKPT_BLOCK_HDR);
    if (w->sink) {
        int rc = w->sink(w->sink_arg, w->blk + CKPT_BLOCK_HDR, plen, w->brows);
        if (rc) return rc;
    } else {
        block_seal(w->blk, w->brows, plen, w->blocks, w->fseed);
        int rc = write_all(w->fd, w->blk, w->blen);
        if (rc) {
            w->io_errno = -rc;
            return RDKV_EIO;
        }
    }
    w->blocks++;
    w->rows += w->brows;
    w->payload += plen;
    w->bytes += w->blen;
    w->blen = CKPT_BLOCK_HDR;
    w->brows = 0;
    return 0;
}

/* Copies candidate i into the block under its row lock. 0 (copied, or gone: deleted since the
 * index pass), RDKV_ETIMEDOUT (locked past row_give_up_ns), RDKV_ENOMEM, a lock's error. */
static int copy_row(struct wctx *w, uint32_t i)
{
    const struct ckpt_write_opts *o = w->o;
    const uint8_t *key = w->keys + w->koff[i];
    uint32_t klen = w->klen[i];
    int64_t give_up = clock_now_ns() + o->row_give_up_ns;
    /* bounded by give_up: every round either returns or waits at least row_wait_ns or a pause */
    for (unsigned round = 0;; round++) {
        struct lock_handle h;
        lock_handle_init(&h, o->lt, o->row_lock, w->cand[i]);
        int rc = lock_acquire(&h, w->mode, clock_now_ns() + o->row_wait_ns);
        if (rc == RDKV_ETIMEDOUT || rc == RDKV_EABORTED) {
            w->retries++;
            if (clock_now_ns() >= give_up) return RDKV_ETIMEDOUT;
            lock_backoff(round < 16 ? round : 16);
            continue;
        }
        if (rc) return rc;
        int64_t held = clock_now_ns();
        size_t mark = w->blen;
        uint32_t mrows = w->brows;
        struct row_view v;
        if (o->guard) o->guard(o->guard_arg, true);
        rc = store_row_view(w->s, w->cand[i], &v);
        if (rc == 0 && (v.flags & ROW_LIVE) && v.klen == klen &&
            (!klen || !memcmp(v.key, key, klen))) {
            if (grow(&w->blk, &w->bcap, w->blen + 8 + (size_t)klen + v.vlen)) {
                w->blen += put_row(w->blk + w->blen, key, klen, v.val, v.vlen);
                w->brows++;
            } else {
                rc = RDKV_ENOMEM;
            }
        }
        /* else: the row was deleted (perhaps recycled for another key) after the index pass:
         * the key was absent at that moment, and its delete is in the log after the replay LSN */
        if (o->guard) o->guard(o->guard_arg, false);
        int rel = lock_release(&h);
        held = clock_now_ns() - held;
        if (held > w->max_hold) w->max_hold = held;
        w->hold_total += held;
        w->holds++;
        if (rc == RDKV_ENOMEM) return rc;
        if (rel == RDKV_ETIMEDOUT) {
            /* the lease ran out while we copied: others may have reset the lock, so the copy is
             * unprotected. Drop it and copy again. */
            w->blen = mark;
            w->brows = mrows;
            w->retries++;
            if (clock_now_ns() >= give_up) return RDKV_ETIMEDOUT;
            continue;
        }
        return 0;
    }
}

static int write_rows(struct wctx *w)
{
    const struct ckpt_write_opts *o = w->o;
    uint8_t *after = NULL;
    size_t acap = 0;
    uint32_t alen = 0;
    bool first = true;
    int rc = 0;
    /* each pass moves strictly forward in key order, so the loop ends after at most
     * (rows ever indexed during the checkpoint) / batch + 1 passes */
    for (;;) {
        w->ncand = 0;
        w->klenall = 0;
        long n = store_scan(w->s, NULL, 0, NULL, 0, first ? NULL : (after ? after : (uint8_t *)""),
                            alen, o->batch, collect_fn, w);
        if (w->nomem) {
            rc = RDKV_ENOMEM;
            break;
        }
        if (n < 0) {
            rc = (int)n;
            break;
        }
        if (w->ncand == 0) break;
        first = false;
        uint32_t last = w->ncand - 1;
        if (!grow(&after, &acap, w->klen[last] + 1)) {
            rc = RDKV_ENOMEM;
            break;
        }
        if (w->klen[last]) memcpy(after, w->keys + w->koff[last], w->klen[last]);
        alen = w->klen[last];
        for (uint32_t i = 0; i < w->ncand && !rc; i++) {
            rc = copy_row(w, i);
            if (!rc && w->blen - CKPT_BLOCK_HDR >= w->target) rc = flush_block(w);
        }
        if (rc) break;
    }
    free(after);
    if (!rc) rc = flush_block(w);
    /* tickets this thread gave up at a deadline are passed on by lock_thread_poll once their
     * turn comes; wait for that (bounded), so that no writer queued behind one waits for a lease
     * reset after the checkpoint is done */
    int64_t until = clock_now_ns() + 1000000000ll;
    for (unsigned round = 0; lock_thread_owes(o->lt) && clock_now_ns() < until; round++) {
        lock_thread_poll(o->lt);
        if (lock_thread_owes(o->lt)) lock_backoff(round < 16 ? round : 16);
    }
    return rc;
}

static int io_fail(char *err, size_t errcap, const char *what, const char *path, int e)
{
    return log_reason(err, errcap, RDKV_EIO, "%s %s: %s", what, path, strerror(e));
}

/* The caller's state (the transaction layer's, for a restart), after the rows: one block of its
 * own, if any. 0 or -errno. */
static int write_state(struct wctx *w)
{
    const struct ckpt_write_opts *o = w->o;
    if (!o->state_len) return 0;
    uint8_t sh[CKPT_BLOCK_HDR];
    memset(sh, 0, sizeof sh);
    pack_put_u32le(sh, CKPT_STATE_MAGIC);
    pack_put_u32le(sh + 8, (uint32_t)o->state_len);
    pack_put_u64le(sh + 16, w->blocks);
    pack_put_u64le(sh + 24,
                   XXH3_64bits_withSeed(o->state, o->state_len, block_seed(sh, w->fseed)));
    int rc = write_all(w->fd, sh, sizeof sh);
    if (!rc) rc = write_all(w->fd, o->state, o->state_len);
    if (!rc) w->bytes += sizeof sh + o->state_len;
    return rc;
}

/* Keeps the newest CKPT_KEEP checkpoints of dir; a crash before this leaves extra files, which
 * is harmless. */
static void prune(const char *dir)
{
    uint64_t *lsns;
    long n = list_all(dir, &lsns, true);
    for (long k = CKPT_KEEP; k < n; k++) {
        char old[512];
        snprintf(old, sizeof old, "%s/ckpt-%016" PRIx64 ".ckpt", dir, lsns[k]);
        (void)unlink(old);
    }
    free(lsns);
}

int ckpt_write(struct store *s, const char *dir, uint16_t node, uint64_t fp, uint64_t replay_lsn,
               const struct ckpt_write_opts *o, struct ckpt_info *info, char *err, size_t errcap)
{
    if (!s || !dir || !o || !o->row_lock || !o->lt || !o->batch || o->row_wait_ns <= 0 ||
        (o->state_len && !o->state) || o->state_len > UINT32_MAX)
        return log_reason(err, errcap, RDKV_EINVAL, "missing store, directory or row lock");
    char path[512], tmp[520];
    if ((size_t)snprintf(path, sizeof path, "%s/ckpt-%016" PRIx64 ".ckpt", dir, replay_lsn) >=
        sizeof path - 4)
        return log_reason(err, errcap, RDKV_EINVAL, "directory name too long");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);

    struct wctx w;
    int rc = 0;
    bool renamed = false;
    if (wctx_init(&w, s, o, CKPT_BLOCK_TARGET)) {
        rc = log_reason(err, errcap, RDKV_ENOMEM, "no memory for the checkpoint's buffers");
        goto out;
    }
    w.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (w.fd < 0) {
        rc = io_fail(err, errcap, "open", tmp, errno);
        goto out;
    }
    /* the header; its row count and check are filled in at the end */
    uint8_t hdr[CKPT_HDR];
    w.fseed = hdr_start(hdr, node, fp, replay_lsn);
    rc = write_all(w.fd, hdr, CKPT_HDR);
    if (rc) {
        rc = io_fail(err, errcap, "write", tmp, -rc);
        goto out;
    }
    w.bytes = CKPT_HDR;
    rc = write_rows(&w);
    if (rc == RDKV_ENOMEM) {
        rc = log_reason(err, errcap, rc, "no memory while copying rows");
        goto out;
    }
    if (rc == RDKV_ETIMEDOUT) {
        rc = log_reason(err, errcap, rc, "a row stayed locked for %" PRId64 " ms",
                  o->row_give_up_ns / 1000000);
        goto out;
    }
    if (rc == RDKV_EIO && w.io_errno) {
        rc = io_fail(err, errcap, "write", tmp, w.io_errno);
        goto out;
    }
    if (rc) {
        rc = log_reason(err, errcap, rc, "a row lock failed (status %d)", rc);
        goto out;
    }
    hdr_finish(hdr, w.rows);
    if ((rc = write_state(&w))) {
        rc = io_fail(err, errcap, "write", tmp, -rc);
        goto out;
    }
    uint8_t tr[CKPT_TRAILER];
    trailer_fill(tr, w.rows, w.blocks, w.payload, replay_lsn, o->state_len, w.fseed);
    rc = write_all(w.fd, tr, CKPT_TRAILER);
    if (!rc) {
        ssize_t pw = pwrite(w.fd, hdr, CKPT_HDR, 0);
        if (pw != CKPT_HDR) rc = pw < 0 ? -errno : -EIO;
    }
    if (rc) {
        rc = io_fail(err, errcap, "write", tmp, -rc);
        goto out;
    }
    w.bytes += CKPT_TRAILER;
    if (fdatasync(w.fd)) {
        rc = io_fail(err, errcap, "fdatasync", tmp, errno);
        goto out;
    }
    int fd = w.fd;
    w.fd = -1;
    if (close(fd)) {
        rc = io_fail(err, errcap, "close", tmp, errno);
        goto out;
    }
    if (rename(tmp, path)) {
        rc = io_fail(err, errcap, "rename", tmp, errno);
        goto out;
    }
    renamed = true;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd)) {
        rc = io_fail(err, errcap, "fsync of the directory", dir, errno);
        if (dfd >= 0) close(dfd);
        goto out;
    }
    close(dfd);
    prune(dir);
    if (info) {
        wctx_info(&w, w.bytes, info);
        info->node = node;
        info->fp = fp;
        info->replay_lsn = replay_lsn;
        snprintf(info->path, sizeof info->path, "%s", path);
    }
out:
    if (w.fd >= 0) close(w.fd);
    if (rc && !renamed) (void)unlink(tmp);
    wctx_free(&w);
    return rc;
}

int ckpt_stream(struct store *s, const struct ckpt_write_opts *o, size_t batch_bytes,
                ckpt_sink_fn sink, void *arg, struct ckpt_info *info)
{
    if (!s || !o || !o->row_lock || !o->lt || !o->batch || o->row_wait_ns <= 0 || !sink ||
        !batch_bytes)
        return RDKV_EINVAL;
    struct wctx w;
    int rc = wctx_init(&w, s, o, batch_bytes);
    if (!rc) {
        w.sink = sink;
        w.sink_arg = arg;
        rc = write_rows(&w);
    }
    if (info) wctx_info(&w, w.payload, info);
    wctx_free(&w);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Loading. */

/* Reads a whole file into memory (malloc'd). 0 or an errno. */
static int read_file(const char *path, uint8_t **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    struct stat st;
    if (fstat(fd, &st)) {
        int e = errno;
        close(fd);
        return e;
    }
    size_t n = (size_t)st.st_size, at = 0;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        close(fd);
        return ENOMEM;
    }
    /* bounded: every round reads at least one byte or ends */
    while (at < n) {
        ssize_t r = pread(fd, buf + at, n - at, (off_t)at);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return e;
        }
        if (r == 0) break; /* shrank meanwhile: decode sees the shorter file */
        at += (size_t)r;
    }
    close(fd);
    *out = buf;
    *len = at;
    return 0;
}

static int load_row(void *arg, const void *key, uint32_t klen, const void *val, uint32_t vlen)
{
    struct store *s = arg;
    rptr row;
    int rc = store_row_alloc(s, key, klen, val, vlen, &row);
    if (rc) return rc;
    rc = store_row_publish(s, row);
    if (rc) store_row_discard(s, row);
    return rc;
}

int ckpt_load(struct store *s, const char *dir, uint16_t node, uint64_t fp,
              struct ckpt_info *info, char *err, size_t errcap)
{
    if (err && errcap) err[0] = 0;
    if (!s || !dir) return log_reason(err, errcap, RDKV_EINVAL, "missing store or directory");
    struct store_stats st;
    store_stats(s, &st);
    if (st.rows) return log_reason(err, errcap, RDKV_EINVAL, "the store is not empty");
    uint64_t *lsns;
    long n = list_all(dir, &lsns, false);
    if (n < 0) return log_reason(err, errcap, (int)n, "cannot list %s", dir);
    if (n == 0) return log_reason(err, errcap, RDKV_ENOTFOUND, "no checkpoint in %s", dir);
    int rc = RDKV_EPROTO;
    size_t used = 0;
    /* newest first; a file is refused as a whole (decode checks everything before the first
     * row goes in), and then the next older one is tried */
    for (long k = 0; k < n; k++) {
        char path[512], why[256] = "";
        snprintf(path, sizeof path, "%s/ckpt-%016" PRIx64 ".ckpt", dir, lsns[k]);
        uint8_t *buf;
        size_t len;
        int e = read_file(path, &buf, &len);
        struct ckpt_info got;
        int r;
        if (e) {
            r = RDKV_EIO;
            snprintf(why, sizeof why, "%s", strerror(e));
        } else {
            r = decode(buf, len, node, fp, lsns[k], store_key_max(s), store_value_max(s),
                       load_row, s, &got, why, sizeof why);
            /* the state is the caller's from here on: a copy of its own */
            uint8_t *state = NULL;
            if (r == 0 && got.state_len && !(state = malloc(got.state_len))) r = RDKV_ENOMEM;
            if (state) memcpy(state, got.state, got.state_len);
            got.state = state;
            if (r || !info) free(state);
            free(buf);
        }
        if (r == 0) {
            if (info) {
                *info = got;
                info->skipped = (unsigned)k;
                snprintf(info->path, sizeof info->path, "%s", path);
            }
            rc = 0;
            break;
        }
        if (r == RDKV_ENOSPC || r == RDKV_EEXIST || r == RDKV_ENOMEM) {
            /* the file was good, the store could not take a row: the store holds part of it */
            rc = r;
            if (err && used < errcap)
                snprintf(err + used, errcap - used, "%s%s: the store refused a row (status %d)",
                         used ? "; " : "", path, r);
            break;
        }
        if (r == RDKV_ETOOBIG) {
            /* refused before any row went in: this store's limits are lower than the writer's */
            rc = r;
            if (err && used < errcap)
                snprintf(err + used, errcap - used, "%s%s: %s", used ? "; " : "", path, why);
            break;
        }
        /* remember why, and try the older one */
        if (err && used < errcap) {
            int w = snprintf(err + used, errcap - used, "%s%s: %s", used ? "; " : "", path, why);
            if (w > 0) used += (size_t)w < errcap - used ? (size_t)w : errcap - used - 1;
        }
        rc = r == RDKV_ECONFIG ? r : (r == RDKV_EIO ? r : RDKV_EPROTO);
    }
    free(lsns);
    return rc;
}
