/* The redo log (storage/wal.h): segment files, the record format, the recovery scan, one
 * writer thread that owns an io_uring and turns everything queued into one write and one
 * fdatasync, and the holds that give a checkpoint its replay LSN. docs/storage.md, "The redo
 * log". */
#include "storage/wal.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/task.h"
#include "common/pack.h"
#include "rdkv_status.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define WAL_SEGMENT_DEFAULT (64ull << 20)
#define WAL_RECORD_DEFAULT (4u << 20)
#define WAL_QUEUE_DEFAULT (16ull << 20)
#define WAL_NAME_LEN 24 /* "wal-" 16 hex ".log" */
/* The writer naps this long when the kernel cannot take an operation now (EAGAIN, EBUSY), and
 * gives up (the log fails) after this many naps in a row: about ten seconds. */
#define RING_NAP_NS (100 * NS_PER_US)
#define RING_NAPS 100000u
/* wal_checkpoint_lsn's naps while the holds it waits for drain: short at first (a holder is
 * usually one fdatasync from done), then longer. */
#define HOLD_NAP_MIN_NS (50 * NS_PER_US)
#define HOLD_NAP_MAX_NS (200 * NS_PER_US)



/* ---- the writes payload ------------------------------------------------------------------- */

size_t wal_writes_size(const struct wal_write *w, unsigned n)
{
    size_t sz = 4;
    for (unsigned i = 0; i < n; i++)
        sz += 9 + (size_t)w[i].klen + (w[i].op == WAL_OP_PUT ? (size_t)w[i].vlen : 0);
    return sz;
}

size_t wal_writes_pack(const struct wal_write *w, unsigned n, void *buf, size_t cap)
{
    size_t need = wal_writes_size(w, n);
    if (need > cap) return 0;
    uint8_t *p = buf;
    pack_put_u32le(p, n);
    p += 4;
    for (unsigned i = 0; i < n; i++) {
        uint32_t vlen = w[i].op == WAL_OP_PUT ? w[i].vlen : 0;
        *p++ = w[i].op;
        pack_put_u32le(p, w[i].klen);
        pack_put_u32le(p + 4, vlen);
        p += 8;
        if (w[i].klen) memcpy(p, w[i].key, w[i].klen);
        p += w[i].klen;
        if (vlen) memcpy(p, w[i].val, vlen);
        p += vlen;
    }
    return need;
}

int wal_writes_unpack(const void *buf, size_t len, int (*fn)(void *arg, const struct wal_write *w),
                      void *arg)
{
    struct pack_r r;
    pack_r_init(&r, buf, len);
    uint32_t n = unpack_u32(&r);
    if (r.err || n > len / 9) return RDKV_EPROTO; /* each write takes at least 9 bytes */
    for (uint32_t i = 0; i < n; i++) {
        struct wal_write w;
        w.op = unpack_u8(&r);
        w.klen = unpack_u32(&r);
        w.vlen = unpack_u32(&r);
        if (r.err || (w.op != WAL_OP_PUT && w.op != WAL_OP_DEL)) return RDKV_EPROTO;
        if (w.op == WAL_OP_DEL && w.vlen) return RDKV_EPROTO;
        w.key = pack_r_take(&r, w.klen);
        w.val = pack_r_take(&r, w.vlen);
        if (r.err) return RDKV_EPROTO;
        if (fn) {
            int rc = fn(arg, &w);
            if (rc) return rc;
        }
    }
    return unpack_done(&r) ? 0 : RDKV_EPROTO;
}

/* ---- records and segment headers ---------------------------------------------------------- */

static uint32_t rec_check(const uint8_t *p, uint32_t len)
{
    return (uint32_t)XXH3_64bits_withSeed(p + 8, WAL_REC_HDR - 8 + (size_t)len,
                                          pack_get_u32le(p));
}

static void rec_encode(uint8_t *p, uint64_t lsn, uint64_t txid, uint8_t type, uint8_t flags,
                       const void *payload, uint32_t len)
{
    pack_put_u32le(p, WAL_REC_MAGIC << 24 | len);
    pack_put_u64le(p + 8, lsn);
    pack_put_u64le(p + 16, txid);
    p[24] = type;
    p[25] = flags;
    memset(p + 26, 0, 6);
    if (len) memcpy(p + WAL_REC_HDR, payload, len);
    pack_put_u32le(p + 4, rec_check(p, len));
}

/* Checks the record at p (n bytes available): its size, or 0 with *why. expect_lsn 0: any. */
static size_t rec_parse(const uint8_t *p, size_t n, uint64_t expect_lsn, uint32_t record_max,
                        struct wal_rec *out, const char **why)
{
    if (n < WAL_REC_HDR) return *why = "short record", 0;
    uint32_t ml = pack_get_u32le(p), len = ml & WAL_REC_LIMIT;
    if (ml >> 24 != WAL_REC_MAGIC) return *why = "bad magic", 0;
    if (len > record_max) return *why = "record longer than the limit", 0;
    if (WAL_REC_HDR + (size_t)len > n) return *why = "short record", 0;
    if (pack_get_u32le(p + 4) != rec_check(p, len)) return *why = "bad checksum", 0;
    uint8_t type = p[24], flags = p[25];
    if (type < WAL_COMMIT || type > WAL_TYPE_MAX) return *why = "unknown record type", 0;
    if ((flags & ~WAL_F_GROUP) || !pack_is_zero(p + 26, 6)) return *why = "reserved bits set", 0;
    uint64_t lsn = pack_get_u64le(p + 8);
    if (expect_lsn && lsn != expect_lsn) return *why = "LSN gap", 0;
    out->lsn = lsn;
    out->txid = pack_get_u64le(p + 16);
    out->type = type;
    out->flags = flags;
    out->len = len;
    out->payload = p + WAL_REC_HDR;
    return WAL_REC_HDR + (size_t)len;
}

static void seg_hdr_encode(uint8_t *h, uint16_t node, uint64_t fp, uint64_t first_lsn)
{
    memset(h, 0, WAL_SEG_HDR);
    memcpy(h, WAL_SEG_MAGIC, 8);
    pack_put_u32le(h + 8, WAL_VERSION);
    pack_put_u32le(h + 12, WAL_SEG_HDR);
    pack_put_u16le(h + 16, node);
    pack_put_u64le(h + 24, fp);
    pack_put_u64le(h + 32, first_lsn);
    pack_put_u32le(h + 60, (uint32_t)XXH3_64bits(h, 60));
}

/* Is there a valid group start (with an LSN of at least min_lsn) at or after byte from? Such a
 * record was written only after everything before it had been synced. */
static bool group_after(const uint8_t *buf, size_t len, size_t from, uint64_t min_lsn,
                        uint32_t record_max)
{
    for (size_t off = from; off + WAL_REC_HDR <= len; off++) {
        const uint8_t *p = buf + off;
        if (p[3] != WAL_REC_MAGIC || p[25] != WAL_F_GROUP || p[24] < WAL_COMMIT ||
            p[24] > WAL_TYPE_MAX || !pack_is_zero(p + 26, 6))
            continue;
        /* a later record's LSN is at most one per header's worth of bytes on: checked before
         * the checksum, so garbage that looks like headers costs little */
        uint64_t lsn = pack_get_u64le(p + 8);
        if (lsn < min_lsn || lsn - min_lsn > (len - from) / WAL_REC_HDR + 1) continue;
        struct wal_rec r;
        const char *why;
        if (rec_parse(p, len - off, 0, record_max, &r, &why) && r.lsn >= min_lsn) return true;
    }
    return false;
}

int wal_seg_decode(const uint8_t *buf, size_t len, uint16_t node, uint64_t fp, uint64_t first_lsn,
                   uint32_t record_max, wal_rec_fn fn, void *arg, struct wal_seg_scan *out)
{
    memset(out, 0, sizeof *out);
    out->why = "";
    if (record_max == 0 || record_max > WAL_REC_LIMIT) record_max = WAL_REC_LIMIT;
    if (len < WAL_SEG_HDR) return out->why = "short segment header", RDKV_EPROTO;
    if (memcmp(buf, WAL_SEG_MAGIC, 8) || pack_get_u32le(buf + 8) != WAL_VERSION ||
        pack_get_u32le(buf + 12) != WAL_SEG_HDR || !pack_is_zero(buf + 18, 6) ||
        !pack_is_zero(buf + 40, 20) || pack_get_u32le(buf + 60) != (uint32_t)XXH3_64bits(buf, 60))
        return out->why = "bad segment header", RDKV_EPROTO;
    if (pack_get_u16le(buf + 16) != node || pack_get_u64le(buf + 24) != fp)
        return out->why = "segment of another node or cluster", RDKV_ECONFIG;
    uint64_t hfirst = pack_get_u64le(buf + 32);
    if (hfirst == 0 || (first_lsn && hfirst != first_lsn))
        return out->why = "first LSN differs from the file name", RDKV_EPROTO;
    out->first_lsn = hfirst;
    uint64_t lsn = hfirst;
    size_t off = WAL_SEG_HDR;
    while (off < len) {
        struct wal_rec r;
        const char *why = "";
        size_t sz = rec_parse(buf + off, len - off, lsn, record_max, &r, &why);
        if (!sz) {
            out->why = why;
            out->more = group_after(buf, len, off + 1, lsn, record_max);
            break;
        }
        if (fn) {
            int rc = fn(arg, &r);
            if (rc) {
                out->end = off;
                out->next_lsn = lsn;
                return rc;
            }
        }
        off += sz;
        lsn++;
        out->records++;
    }
    out->end = off;
    out->next_lsn = lsn;
    return 0;
}

/* ---- the directory scan ------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void seg_name(char *out, size_t cap, uint64_t lsn)
{
    snprintf(out, cap, "wal-%016llx.log", (unsigned long long)lsn);
}

/* The segments' first LSNs in order (*segs malloc'd). A missing dir is an empty list. */
static int list_segments(const char *dir, uint64_t **segs, size_t *n, char *err, size_t errcap)
{
    *segs = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return 0;
        snprintf(err, errcap, "cannot read the log directory %s: %s", dir, strerror(errno));
        return RDKV_ECONFIG;
    }
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *s = e->d_name;
        if (strlen(s) != WAL_NAME_LEN || strncmp(s, "wal-", 4) || strcmp(s + 20, ".log")) continue;
        uint64_t v = 0;
        bool ok = true;
        for (int i = 4; i < 20; i++) {
            char c = s[i];
            int dg = c >= '0' && c <= '9' ? c - '0' : (c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1);
            if (dg < 0) ok = false;
            v = v << 4 | (uint64_t)(dg < 0 ? 0 : dg);
        }
        if (!ok) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            uint64_t *ns = realloc(*segs, cap * sizeof *ns);
            if (!ns) {
                closedir(d);
                free(*segs);
                *segs = NULL;
                return RDKV_ENOMEM;
            }
            *segs = ns;
        }
        (*segs)[(*n)++] = v;
    }
    closedir(d);
    if (*n) qsort(*segs, *n, sizeof **segs, cmp_u64);
    return 0;
}

static int read_file(int dirfd, const char *name, uint8_t **buf, size_t *len, char *err,
                     size_t errcap)
{
    *buf = NULL;
    *len = 0;
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st)) {
        snprintf(err, errcap, "cannot read %s: %s", name, strerror(errno));
        if (fd >= 0) close(fd);
        return RDKV_EIO;
    }
    size_t n = (size_t)st.st_size;
    uint8_t *b = malloc(n ? n : 1);
    if (!b) {
        close(fd);
        snprintf(err, errcap, "no memory to read %s (%zu bytes)", name, n);
        return RDKV_ENOMEM;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, b + got, n - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            snprintf(err, errcap, "cannot read %s: %s", name, r ? strerror(errno) : "file shrank");
            free(b);
            close(fd);
            return RDKV_EIO;
        }
        got += (size_t)r;
    }
    close(fd);
    *buf = b;
    *len = n;
    return 0;
}

/* The scan proper; *segs_out (when not NULL) keeps the list of segments. */
static int scan_dir(const char *dir, uint16_t node, uint64_t fp, uint32_t record_max,
                    wal_rec_fn fn, void *arg, struct wal_scan_result *res, uint64_t **segs_out,
                    size_t *nsegs_out, char *err, size_t errcap)
{
    uint64_t synced = res->tail_synced; /* wal_open's, set before the scan */
    memset(res, 0, sizeof *res);
    res->tail_synced = synced;
    res->next_lsn = 1;
    uint64_t *segs;
    size_t n;
    int rc = list_segments(dir, &segs, &n, err, errcap);
    if (rc) return rc;
    int dirfd = n ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (n && dirfd < 0) {
        snprintf(err, errcap, "cannot open the log directory %s: %s", dir, strerror(errno));
        free(segs);
        return RDKV_ECONFIG;
    }
    uint64_t expect = n ? segs[0] : 1;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char name[32];
        seg_name(name, sizeof name, segs[i]);
        bool last = i + 1 == n;
        if (segs[i] != expect) {
            snprintf(err, errcap, "%s/%s starts at LSN %llu but the log before it ends at %llu: "
                     "a segment is missing", dir, name, (unsigned long long)segs[i],
                     (unsigned long long)expect - 1);
            rc = RDKV_EPROTO;
            break;
        }
        uint8_t *buf;
        size_t len;
        rc = read_file(dirfd, name, &buf, &len, err, errcap);
        if (rc) break;
        res->segments++;
        struct wal_seg_scan ss;
        rc = wal_seg_decode(buf, len, node, fp, segs[i], record_max, fn, arg, &ss);
        free(buf);
        res->records += ss.records;
        if (ss.records) res->last_lsn = ss.next_lsn - 1;
        if (rc == RDKV_ECONFIG) {
            snprintf(err, errcap, "%s/%s was written by another node or cluster (this is node %u,"
                     " cluster %016llx): refusing it", dir, name, node, (unsigned long long)fp);
            break;
        }
        if (rc == RDKV_EPROTO && last && len < WAL_SEG_HDR) {
            /* created, then cut before its header was synced: a torn tail */
            rc = 0;
            res->torn = true;
            res->tail_segment = segs[i];
            res->tail_offset = 0;
            res->dropped = len;
            snprintf(res->why, sizeof res->why, "%s", ss.why);
            break;
        }
        if (rc == RDKV_EPROTO) {
            snprintf(err, errcap, "%s/%s: %s", dir, name, ss.why);
            break;
        }
        if (rc) break; /* fn's answer */
        expect = ss.next_lsn;
        if (ss.end < len) {
            if (!last || ss.more) {
                snprintf(err, errcap, "%s/%s: corruption in the middle of the log: %s at byte %llu "
                         "(LSN %llu), and %s follows", dir, name, ss.why,
                         (unsigned long long)ss.end, (unsigned long long)ss.next_lsn,
                         last ? "a good record written after a sync" : "another segment");
                rc = RDKV_EPROTO;
                break;
            }
            res->torn = true;
            res->tail_segment = segs[i];
            res->tail_offset = ss.end;
            res->dropped = len - ss.end;
            snprintf(res->why, sizeof res->why, "%s", ss.why);
        }
    }
    if (dirfd >= 0) close(dirfd);
    res->next_lsn = expect;
    if (rc == 0 && segs_out) {
        *segs_out = segs;
        *nsegs_out = n;
    } else {
        free(segs);
    }
    return rc;
}

int wal_scan(const char *dir, uint16_t node, uint64_t fp, uint32_t record_max, wal_rec_fn fn,
             void *arg, struct wal_scan_result *res, char *err, size_t errcap)
{
    struct wal_scan_result tmp;
    if (!res) res = &tmp;
    res->tail_synced = 0;
    if (record_max == 0 || record_max > WAL_REC_LIMIT) record_max = WAL_REC_LIMIT;
    return scan_dir(dir, node, fp, record_max, fn, arg, res, NULL, NULL, err, errcap);
}

/* ---- the writer ---------------------------------------------------------------------------- */

int wal_durability_parse(const char *s, enum wal_durability *out)
{
    if (!strcmp(s, "off")) *out = WAL_DUR_OFF;
    else if (!strcmp(s, "group")) *out = WAL_DUR_GROUP;
    else if (!strcmp(s, "sync")) *out = WAL_DUR_SYNC;
    else return RDKV_EINVAL;
    return 0;
}

const char *wal_durability_name(enum wal_durability d)
{
    return d == WAL_DUR_OFF ? "off" : d == WAL_DUR_SYNC ? "sync" : "group";
}

void wal_opts_init(struct wal_opts *o)
{
    memset(o, 0, sizeof *o);
    o->durability = WAL_DUR_GROUP;
}

struct wal {
    struct wal_opts o;
    char dir[PATH_MAX];
    int dirfd;

    pthread_mutex_t mu;
    pthread_cond_t work_cv;    /* the writer waits for records */
    struct wal_waiter *room;   /* appenders waiting for queue room */
    struct wal_waiter *dwait;  /* wal_wait callers waiting for durable_lsn */
    uint8_t *q;                /* records queued since the writer last took them */
    size_t qlen, qcap;
    uint64_t q_first;          /* LSN of q's first record */
    uint64_t next_lsn;         /* the next append's */
    uint64_t inflight;         /* bytes the writer is writing */
    uint64_t durable_lsn;
    int err;                   /* sticky: RDKV_EIO / RDKV_ENOSPC */
    char errmsg[192];
    bool closing;
    uint64_t *segs;            /* first LSNs of the segments on disk, in order */
    size_t nsegs, segcap;
    int fault_write, fault_sync;
    int fault_again;           /* WAL_FAULT_SUBMIT_AGAIN: submits until the one that fails */
    int64_t sync_delay_ns;     /* WAL_FAULT_SYNC_DELAY */
    struct wal_stats st;

    /* holds: the low bit of hold_epoch picks the counter a new hold goes to; wal_checkpoint_lsn
     * flips it under mu and waits for the other counter to drain (ckpt_mu: one at a time) */
    atomic_uint hold_epoch;
    atomic_ulong holds[2];
    pthread_mutex_t ckpt_mu;

    /* the writer's own */
    pthread_t thr;
    struct io_uring ring;
    uint64_t ring_tag;         /* user_data of the last operation submitted */
    int fd;                    /* the segment being written */
    uint64_t cur_seg;          /* its first LSN (segs[] is shared with wal_truncate_before) */
    uint64_t seg_off;          /* its size */
    bool dirty;                /* written since its last sync */
    uint8_t *wb;               /* the group being written (swapped with q) */
    size_t wcap;
};

/* A party waiting for the log: a task parks, a plain thread waits on a futex (common/task.h), so
 * a commit running in a task never blocks its thread's other tasks. It lives on the waiter's
 * stack and is on a list (under mu) until a waker takes it off and wakes it. */
struct wal_waiter {
    struct waiter wt;
    uint64_t lsn;
    struct wal_waiter *next;
};

/* Takes off and wakes every waiter of *list with lsn <= upto. Called with mu held; nothing
 * touches a waiter after its wake. */
static void wake_list(struct wal_waiter **list, uint64_t upto)
{
    struct wal_waiter **pp = list;
    while (*pp) {
        struct wal_waiter *x = *pp;
        if (x->lsn <= upto) {
            *pp = x->next;
            waiter_wake(&x->wt);
        } else {
            pp = &x->next;
        }
    }
}

/* Waits on *list until woken. Called with mu held, which is released during the wait (never held
 * across it) and held again on return. */
static void park(struct wal *w, struct wal_waiter **list, uint64_t lsn)
{
    struct wal_waiter me = {.lsn = lsn, .next = *list};
    waiter_init(&me.wt);
    *list = &me;
    pthread_mutex_unlock(&w->mu);
    (void)waiter_wait(&me.wt, 0);
    pthread_mutex_lock(&w->mu);
}

static int errno_status(int e) { return e == ENOSPC || e == EDQUOT ? RDKV_ENOSPC : RDKV_EIO; }

/* WAL_FAULT_SUBMIT_AGAIN: is this the submit that must fail? */
static bool submit_fault(struct wal *w)
{
    pthread_mutex_lock(&w->mu);
    bool fire = w->fault_again > 0 && --w->fault_again == 0;
    pthread_mutex_unlock(&w->mu);
    return fire;
}

/* A completion that is not the operation being waited for. One operation is in flight at a time,
 * so this is a bug; its result belongs to nobody and is never taken. */
static void ring_stray(struct wal *w, uint64_t tag, uint64_t want, int res)
{
    pthread_mutex_lock(&w->mu);
    w->st.stray++;
    pthread_mutex_unlock(&w->mu);
    log_error("redo log %s: io_uring completion of operation %llu (result %d) while waiting for "
              "operation %llu: ignored", w->dir, (unsigned long long)tag, res,
              (unsigned long long)want);
}

/* Submits the operation prepared in sqe and waits for its own completion. Returns 0 with the
 * operation's result in *res (bytes, or a negative errno), or a negative errno from the ring
 * itself, when the operation's fate is unknown (it may still be queued or running).
 *
 * The operation is prepared once. liburing publishes the sqe to the kernel's SQ ring before it
 * enters the kernel, so when io_uring_submit_and_wait fails with EAGAIN or EBUSY (the kernel could
 * not take it now) or EINTR, the sqe may still be queued: preparing the operation again would
 * queue a second copy whose completion, arriving later, would be taken as the next operation's
 * result (a write's as an fdatasync's, acknowledging a group before its sync). So the submit is
 * retried (after a nap for EAGAIN and EBUSY), and every operation carries a tag of its own in
 * user_data: completions are reaped until the one with our tag arrives. */
static int ring_op(struct wal *w, struct io_uring_sqe *sqe, int *res)
{
    uint64_t tag = ++w->ring_tag;
    io_uring_sqe_set_data64(sqe, tag);
    unsigned naps = 0;
    for (;;) {
        int rc = submit_fault(w) ? -EAGAIN : io_uring_submit_and_wait(&w->ring, 1);
        if (rc >= 0) break;
        if (rc == -EINTR) continue;
        if ((rc != -EAGAIN && rc != -EBUSY) || ++naps > RING_NAPS) return rc;
        clock_sleep_ns(RING_NAP_NS);
    }
    for (;;) {
        struct io_uring_cqe *cqe;
        int rc = io_uring_wait_cqe(&w->ring, &cqe);
        if (rc == -EINTR) continue;
        if (rc == -EAGAIN || rc == -EBUSY) {
            if (++naps > RING_NAPS) return rc;
            clock_sleep_ns(RING_NAP_NS);
            continue;
        }
        if (rc < 0) return rc;
        uint64_t got = io_uring_cqe_get_data64(cqe);
        int r = cqe->res;
        io_uring_cqe_seen(&w->ring, cqe);
        if (got == tag) {
            *res = r;
            return 0;
        }
        ring_stray(w, got, tag, r);
    }
}

static int take_fault(struct wal *w, int *slot)
{
    pthread_mutex_lock(&w->mu);
    int e = *slot;
    *slot = 0;
    pthread_mutex_unlock(&w->mu);
    return e;
}

/* Writes len bytes at off (short writes continued): 0 or an errno. A write that completed
 * without writing (EINTR, EAGAIN) is done, so it is issued again as a new operation. */
static int do_write(struct wal *w, int fd, const uint8_t *p, size_t len, uint64_t off)
{
    int e = take_fault(w, &w->fault_write);
    if (e) return e;
    unsigned naps = 0;
    while (len) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
        if (!sqe) return EBUSY; /* cannot happen: one operation at a time */
        unsigned n = len > (1u << 30) ? (1u << 30) : (unsigned)len;
        io_uring_prep_write(sqe, fd, p, n, off);
        int rc, ring = ring_op(w, sqe, &rc);
        if (ring) return -ring;
        if (rc == -EINTR) continue;
        if (rc == -EAGAIN && ++naps <= RING_NAPS) {
            clock_sleep_ns(RING_NAP_NS);
            continue;
        }
        if (rc < 0) return -rc;
        if (rc == 0) return EIO;
        p += rc;
        len -= (size_t)rc;
        off += (uint64_t)rc;
    }
    pthread_mutex_lock(&w->mu);
    w->st.writes++;
    pthread_mutex_unlock(&w->mu);
    return 0;
}

/* fdatasync (datasync) or fsync of fd through the ring: 0 or an errno. One that completed with
 * EINTR or EAGAIN did not sync, so it is issued again; any other failure is final (the log never
 * retries a failed sync: "Errors" in docs/storage.md). */
static int do_sync(struct wal *w, int fd, bool datasync)
{
    int e = take_fault(w, &w->fault_sync);
    if (e) return e;
    int64_t from = clock_now_ns();
    unsigned naps = 0;
    for (;;) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
        if (!sqe) return EBUSY; /* cannot happen: one operation at a time */
        io_uring_prep_fsync(sqe, fd, datasync ? IORING_FSYNC_DATASYNC : 0);
        int rc, ring = ring_op(w, sqe, &rc);
        if (ring) return -ring;
        if (rc == -EINTR) continue;
        if (rc == -EAGAIN && ++naps <= RING_NAPS) {
            clock_sleep_ns(RING_NAP_NS);
            continue;
        }
        if (rc < 0) return -rc;
        break;
    }
    metrics_add(MC_LOG_SYNCS, 1);
    metrics_time(MH_LOG_SYNC, clock_now_ns() - from);
    pthread_mutex_lock(&w->mu);
    w->st.syncs++;
    pthread_mutex_unlock(&w->mu);
    return 0;
}

/* A failed write or sync: the first one is logged and handed to the fail-stop hook, and only
 * when the hook returns does the error become sticky and wake everyone, so no waiter returns and
 * no append is refused before the hook ran (a node whose hook stops the process never acts on
 * the failure). Only the writer calls it (wal_open reports its own failures as its answer), so
 * "first" needs no lock held across the hook. Called without mu. */
static void fail(struct wal *w, int e, const char *what)
{
    pthread_mutex_lock(&w->mu);
    bool first = !w->err;
    pthread_mutex_unlock(&w->mu);
    int status = errno_status(e);
    char msg[sizeof w->errmsg];
    snprintf(msg, sizeof msg, "%s: %s", what, strerror(e));
    metrics_add(MC_LOG_ERRORS, 1);
    if (first) {
        log_error("redo log %s failed: %s (every later commit fails until a restart)", w->dir,
                  msg);
        if (w->o.on_fail) w->o.on_fail(w->o.on_fail_arg, status, msg);
    }
    pthread_mutex_lock(&w->mu);
    if (!w->err) {
        w->err = status;
        memcpy(w->errmsg, msg, sizeof msg);
    }
    wake_list(&w->dwait, UINT64_MAX);
    wake_list(&w->room, UINT64_MAX);
    pthread_mutex_unlock(&w->mu);
}

/* WAL_FAULT_SYNC_DELAY: sleeps before a group's fdatasync. */
static void sync_delay(struct wal *w)
{
    pthread_mutex_lock(&w->mu);
    int64_t ns = w->sync_delay_ns;
    pthread_mutex_unlock(&w->mu);
    clock_sleep_ns(ns);
}

/* Creates the segment whose first record will be lsn, syncs it and the directory. */
static int seg_create(struct wal *w, uint64_t lsn, char *what, size_t wcap)
{
    char name[32];
    seg_name(name, sizeof name, lsn);
    snprintf(what, wcap, "creating %s", name);
    int fd = openat(w->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return errno;
    uint8_t h[WAL_SEG_HDR];
    seg_hdr_encode(h, w->o.node, w->o.cluster_fp, lsn);
    int e = do_write(w, fd, h, sizeof h, 0);
    if (!e) e = do_sync(w, fd, true);
    if (!e) e = do_sync(w, w->dirfd, false);
    if (e) {
        close(fd);
        return e;
    }
    pthread_mutex_lock(&w->mu);
    if (w->nsegs == w->segcap) {
        size_t cap = w->segcap ? w->segcap * 2 : 16;
        uint64_t *ns = realloc(w->segs, cap * sizeof *ns);
        if (!ns) {
            pthread_mutex_unlock(&w->mu);
            close(fd);
            return ENOMEM;
        }
        w->segs = ns;
        w->segcap = cap;
    }
    w->segs[w->nsegs++] = lsn;
    pthread_mutex_unlock(&w->mu);
    if (w->fd >= 0) close(w->fd);
    w->fd = fd;
    w->cur_seg = lsn;
    w->seg_off = WAL_SEG_HDR;
    w->dirty = false;
    return 0;
}

/* Before n more bytes starting with record lsn: a new segment when this one is full. The old
 * one is synced first in every mode, so a later segment proves the earlier ones were synced. */
static int seg_roll(struct wal *w, size_t n, uint64_t lsn, char *what, size_t wcap)
{
    if (w->seg_off <= WAL_SEG_HDR || w->seg_off + n <= w->o.segment_bytes) return 0;
    if (w->dirty) {
        snprintf(what, wcap, "fdatasync before a new segment");
        int e = do_sync(w, w->fd, true);
        if (e) return e;
        w->dirty = false;
    }
    return seg_create(w, lsn, what, wcap);
}

/* Writes one group of records (bytes p[0, n), LSNs first..last): one write, then one fdatasync
 * unless the log is off. 0 or an errno, with what failed in `what`. */
static int write_group(struct wal *w, uint8_t *p, size_t n, uint64_t first, char *what,
                       size_t wcap)
{
    int e = seg_roll(w, n, first, what, wcap);
    if (e) return e;
    if (w->o.durability == WAL_DUR_GROUP) {
        /* mark the group's start: it is written only after the previous group was synced */
        p[25] |= WAL_F_GROUP;
        pack_put_u32le(p + 4, rec_check(p, pack_get_u32le(p) & WAL_REC_LIMIT));
    }
    snprintf(what, wcap, "write of %zu bytes to wal-%016llx.log", n,
             (unsigned long long)w->cur_seg);
    e = do_write(w, w->fd, p, n, w->seg_off);
    if (e) return e;
    w->seg_off += n;
    w->dirty = true;
    if (w->o.durability == WAL_DUR_OFF) return 0;
    sync_delay(w);
    snprintf(what, wcap, "fdatasync of wal-%016llx.log", (unsigned long long)w->cur_seg);
    e = do_sync(w, w->fd, true);
    if (!e) w->dirty = false;
    return e;
}

static void *writer_main(void *arg)
{
    struct wal *w = arg;
    char what[96];
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->qlen && !w->closing) pthread_cond_wait(&w->work_cv, &w->mu);
        if (!w->qlen) break;
        /* take the whole queue: appenders fill the other buffer meanwhile */
        uint8_t *p = w->q;
        size_t n = w->qlen, cap = w->qcap;
        uint64_t first = w->q_first, last = w->next_lsn - 1;
        w->q = w->wb;
        w->qcap = w->wcap;
        w->wb = p;
        w->wcap = cap;
        w->qlen = 0;
        w->q_first = w->next_lsn;
        w->inflight = n;
        bool failed = w->err != 0;
        pthread_mutex_unlock(&w->mu);
        int e = 0;
        if (failed) {
            /* the log has failed: queued records are never written */
        } else if (w->o.durability != WAL_DUR_SYNC) {
            e = write_group(w, p, n, first, what, sizeof what);
        } else {
            /* one write and one fdatasync per record, each its own group */
            size_t off = 0;
            for (uint64_t lsn = first; lsn <= last && !e; lsn++) {
                size_t sz = WAL_REC_HDR + (pack_get_u32le(p + off) & WAL_REC_LIMIT);
                e = write_group(w, p + off, sz, lsn, what, sizeof what);
                off += sz;
                if (!e) {
                    pthread_mutex_lock(&w->mu);
                    w->durable_lsn = lsn;
                    w->st.records++;
                    w->st.bytes += sz;
                    metrics_add(MC_LOG_RECORDS, 1);
                    metrics_add(MC_LOG_BYTES, sz);
                    wake_list(&w->dwait, lsn);
                    pthread_mutex_unlock(&w->mu);
                }
            }
        }
        if (e) fail(w, e, what);
        pthread_mutex_lock(&w->mu);
        if (!e && !failed && w->o.durability != WAL_DUR_SYNC) {
            /* stats first: a waiter that returns sees its record counted */
            w->st.records += last - first + 1;
            w->st.bytes += n;
            metrics_add(MC_LOG_RECORDS, last - first + 1);
            metrics_add(MC_LOG_BYTES, n);
            if (w->o.durability != WAL_DUR_OFF) w->durable_lsn = last;
            wake_list(&w->dwait, w->durable_lsn);
        }
        w->inflight = 0;
        wake_list(&w->room, UINT64_MAX);
    }
    bool sync = !w->err && w->dirty;
    pthread_mutex_unlock(&w->mu);
    if (sync) {
        /* wal_close syncs whatever the log wrote without syncing (durability off) */
        int e = do_sync(w, w->fd, true);
        if (e) {
            fail(w, e, "fdatasync at close");
        } else {
            pthread_mutex_lock(&w->mu);
            w->durable_lsn = w->next_lsn - 1;
            pthread_mutex_unlock(&w->mu);
        }
    }
    return NULL;
}

/* Before recovery reads the log: makes the last segment's bytes durable and drops its cached
 * pages, so that the scan reads what the device holds. After a crash whose writeback failed,
 * Linux may have marked the tail's pages clean though they never reached the disk; read from the
 * page cache, they would replay a group whose waiter was told its outcome was unknown, and a
 * later power cut would take it away again. Only the last segment can hold bytes never synced:
 * the writer syncs a segment before it creates the next. *synced gets the segment's first LSN
 * (0 when there is none). 0, or an error with the file named in err. */
static int tail_settle(const char *dir, uint64_t *synced, char *err, size_t errcap)
{
    uint64_t *segs;
    size_t n;
    *synced = 0;
    int rc = list_segments(dir, &segs, &n, err, errcap);
    if (rc || !n) return rc;
    uint64_t first = segs[n - 1];
    free(segs);
    char name[32], path[PATH_MAX + 40];
    seg_name(name, sizeof name, first);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int e = fd < 0 || fdatasync(fd) ? errno : 0;
    /* a page that something has mapped, or dirtied since, stays: best effort (docs/storage.md,
     * "Recovery reads what the device holds") */
    if (!e) (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    if (fd >= 0) close(fd);
    if (e) {
        snprintf(err, errcap, "redo log %s: fdatasync of %s before reading it: %s (refusing to "
                 "open: the log's tail may not be on disk)", dir, name, strerror(e));
        return errno_status(e);
    }
    *synced = first;
    return 0;
}

int wal_open(const struct wal_opts *o, wal_rec_fn fn, void *arg, struct wal_scan_result *res,
             struct wal **out, char *err, size_t errcap)
{
    *out = NULL;
    if (!o->dir || !*o->dir || strlen(o->dir) >= PATH_MAX) {
        snprintf(err, errcap, "no log directory given");
        return RDKV_EINVAL;
    }
    struct wal *w = calloc(1, sizeof *w);
    if (!w) return RDKV_ENOMEM;
    w->o = *o;
    snprintf(w->dir, sizeof w->dir, "%s", o->dir);
    w->o.dir = w->dir;
    if (!w->o.segment_bytes) w->o.segment_bytes = WAL_SEGMENT_DEFAULT;
    if (!w->o.record_max || w->o.record_max > WAL_REC_LIMIT)
        w->o.record_max = w->o.record_max ? WAL_REC_LIMIT : WAL_RECORD_DEFAULT;
    if (!w->o.queue_max) w->o.queue_max = WAL_QUEUE_DEFAULT;
    if (w->o.queue_max < WAL_REC_HDR + (uint64_t)w->o.record_max)
        w->o.queue_max = WAL_REC_HDR + (uint64_t)w->o.record_max;
    w->fd = -1;
    w->dirfd = -1;

    if (mkdir(w->dir, 0700) && errno != EEXIST) {
        snprintf(err, errcap, "cannot create the log directory %s: %s", w->dir, strerror(errno));
        free(w);
        return RDKV_ECONFIG;
    }
    struct wal_scan_result tmp;
    if (!res) res = &tmp;
    int rc = tail_settle(w->dir, &res->tail_synced, err, errcap);
    /* read with the format's limit: a log written with a larger record_max stays readable */
    if (!rc)
        rc = scan_dir(w->dir, o->node, o->cluster_fp, WAL_REC_LIMIT, fn, arg, res, &w->segs,
                      &w->nsegs, err, errcap);
    if (rc) {
        free(w);
        return rc;
    }
    w->segcap = w->nsegs;
    w->dirfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (w->dirfd < 0) {
        snprintf(err, errcap, "cannot open the log directory %s: %s", w->dir, strerror(errno));
        free(w->segs);
        free(w);
        return RDKV_ECONFIG;
    }
    rc = io_uring_queue_init(8, &w->ring, 0);
    if (rc < 0) {
        snprintf(err, errcap, "io_uring_queue_init: %s", strerror(-rc));
        close(w->dirfd);
        free(w->segs);
        free(w);
        return RDKV_EIO;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_init(&w->ckpt_mu, NULL);
    pthread_cond_init(&w->work_cv, NULL);
    atomic_init(&w->hold_epoch, 0);
    atomic_init(&w->holds[0], 0);
    atomic_init(&w->holds[1], 0);
    w->next_lsn = w->q_first = res->next_lsn;
    w->durable_lsn = res->next_lsn - 1;

    char what[96] = "opening";
    int e = 0;
    if (res->torn) {
        char name[32];
        seg_name(name, sizeof name, res->tail_segment);
        log_warn("redo log %s: torn tail cut at byte %llu of %s (%s; %llu bytes dropped)", w->dir,
                 (unsigned long long)res->tail_offset, name, res->why,
                 (unsigned long long)res->dropped);
        if (res->tail_offset < WAL_SEG_HDR) {
            snprintf(what, sizeof what, "removing %s", name);
            if (unlinkat(w->dirfd, name, 0)) e = errno;
            else w->nsegs--;
        } else {
            snprintf(what, sizeof what, "truncating %s", name);
            int fd = openat(w->dirfd, name, O_WRONLY | O_CLOEXEC);
            if (fd < 0 || ftruncate(fd, (off_t)res->tail_offset) || fdatasync(fd)) e = errno;
            if (fd >= 0) close(fd);
        }
        if (!e && fsync(w->dirfd)) e = errno;
    }
    if (!e && w->nsegs) {
        char name[32];
        w->cur_seg = w->segs[w->nsegs - 1];
        seg_name(name, sizeof name, w->cur_seg);
        snprintf(what, sizeof what, "opening %s", name);
        w->fd = openat(w->dirfd, name, O_WRONLY | O_CLOEXEC);
        struct stat st;
        /* its bytes are durable: tail_settle synced it before the scan counted anything (a
         * torn tail was cut and synced since; a removed torn segment's predecessor was synced
         * before that segment was created) */
        if (w->fd < 0 || fstat(w->fd, &st)) e = errno;
        else w->seg_off = (uint64_t)st.st_size;
    } else if (!e) {
        e = seg_create(w, w->next_lsn, what, sizeof what);
    }
    if (!e) {
        e = pthread_create(&w->thr, NULL, writer_main, w);
        snprintf(what, sizeof what, "starting the log writer");
    }
    if (e) {
        snprintf(err, errcap, "redo log %s: %s: %s", w->dir, what, strerror(e));
        if (w->fd >= 0) close(w->fd);
        io_uring_queue_exit(&w->ring);
        close(w->dirfd);
        pthread_cond_destroy(&w->work_cv);
        pthread_mutex_destroy(&w->ckpt_mu);
        pthread_mutex_destroy(&w->mu);
        free(w->segs);
        free(w);
        return errno_status(e);
    }
    *out = w;
    return 0;
}

int wal_append(struct wal *w, uint8_t type, uint64_t txid, const void *payload, uint32_t len,
               uint64_t *lsn)
{
    if (type < WAL_COMMIT || type > WAL_TYPE_MAX || (len && !payload)) return RDKV_EINVAL;
    if (len > w->o.record_max) return RDKV_ETOOBIG;
    size_t sz = WAL_REC_HDR + (size_t)len;
    pthread_mutex_lock(&w->mu);
    while (!w->err && !w->closing && w->qlen + w->inflight > 0 &&
           w->qlen + w->inflight + sz > w->o.queue_max)
        park(w, &w->room, 0);
    int rc = w->err ? w->err : w->closing ? RDKV_ESHUTDOWN : 0;
    if (!rc && w->qlen + sz > w->qcap) {
        size_t cap = w->qcap ? w->qcap : 64 << 10;
        while (cap < w->qlen + sz) cap *= 2;
        uint8_t *nq = realloc(w->q, cap);
        if (!nq) rc = RDKV_ENOMEM;
        else {
            w->q = nq;
            w->qcap = cap;
        }
    }
    if (rc) {
        pthread_mutex_unlock(&w->mu);
        return rc;
    }
    uint64_t l = w->next_lsn++;
    rec_encode(w->q + w->qlen, l, txid, type,
               w->o.durability == WAL_DUR_SYNC ? WAL_F_GROUP : 0, payload, len);
    w->qlen += sz;
    pthread_cond_signal(&w->work_cv);
    pthread_mutex_unlock(&w->mu);
    if (lsn) *lsn = l;
    return 0;
}

int wal_wait(struct wal *w, uint64_t lsn)
{
    pthread_mutex_lock(&w->mu);
    int rc = 0;
    if (lsn >= w->next_lsn) rc = RDKV_EINVAL;
    else if (w->o.durability == WAL_DUR_OFF) rc = w->err;
    else {
        while (w->durable_lsn < lsn && !w->err) park(w, &w->dwait, lsn);
        rc = w->durable_lsn >= lsn ? 0 : w->err;
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int wal_commit(struct wal *w, uint8_t type, uint64_t txid, const void *payload, uint32_t len,
               uint64_t *lsn)
{
    uint64_t l;
    int rc = wal_append(w, type, txid, payload, len, &l);
    if (rc) return rc;
    if (lsn) *lsn = l;
    return wal_wait(w, l);
}

int wal_error(struct wal *w, char *msg, size_t cap)
{
    pthread_mutex_lock(&w->mu);
    int rc = w->err;
    if (msg && cap) snprintf(msg, cap, "%s", rc ? w->errmsg : "");
    pthread_mutex_unlock(&w->mu);
    return rc;
}

void wal_fail_stop(struct wal *w, const char *why)
{
    char msg[sizeof w->errmsg + 160];
    pthread_mutex_lock(&w->mu);
    int status = w->err ? w->err : RDKV_EIO;
    snprintf(msg, sizeof msg, "%s%s%s", why, w->err ? " (the log failed: " : "",
             w->err ? w->errmsg : "");
    if (w->err) strncat(msg, ")", sizeof msg - strlen(msg) - 1);
    pthread_mutex_unlock(&w->mu);
    log_error("redo log %s: %s", w->dir, msg);
    if (w->o.on_fail) w->o.on_fail(w->o.on_fail_arg, status, msg);
    abort();
}

uint64_t wal_next_lsn(struct wal *w)
{
    pthread_mutex_lock(&w->mu);
    uint64_t v = w->next_lsn;
    pthread_mutex_unlock(&w->mu);
    return v;
}

/* Holds. A hold counts itself in holds[e] for the epoch bit e it read, and checks that the bit
 * did not change meanwhile (else it moves on to the new one). wal_checkpoint_lsn flips the bit
 * and reads next_lsn in one critical section of mu, which every append takes too. Then a hold
 * either registered in the old epoch (the checker's flip came after its increment, all these
 * operations being sequentially consistent, so the drain below sees it) or saw the new bit, and
 * then its appends took mu after the flip and got LSNs of at least L. The drain waits for the old
 * epoch's count to reach 0: every hold registered there has been released, and its unhold (a
 * release) happens before the checker's load (an acquire) that saw 0, so what the holder applied
 * is visible to the checkpoint that copies memory next. Only one checkpointer at a time
 * (ckpt_mu): a second flip before the first drain ended would mix the epochs. */
void wal_hold(struct wal *w, struct wal_hold *h)
{
    for (;;) {
        unsigned e = atomic_load(&w->hold_epoch) & 1u;
        atomic_fetch_add(&w->holds[e], 1);
        if ((atomic_load(&w->hold_epoch) & 1u) == e) {
            h->epoch = e;
            return;
        }
        /* a checkpoint flipped the epoch meanwhile: at most once per checkpoint */
        atomic_fetch_sub(&w->holds[e], 1);
    }
}

void wal_unhold(struct wal *w, struct wal_hold *h)
{
    atomic_fetch_sub(&w->holds[h->epoch & 1u], 1);
}

uint64_t wal_checkpoint_lsn(struct wal *w)
{
    pthread_mutex_lock(&w->ckpt_mu);
    pthread_mutex_lock(&w->mu);
    unsigned old = atomic_fetch_xor(&w->hold_epoch, 1u) & 1u;
    uint64_t l = w->next_lsn;
    pthread_mutex_unlock(&w->mu);
    /* bounded by the holders' progress: each is one append, one wait and its apply from done */
    int64_t nap = HOLD_NAP_MIN_NS;
    while (atomic_load(&w->holds[old])) {
        clock_sleep_ns(nap);
        if (nap < HOLD_NAP_MAX_NS) nap *= 2;
    }
    pthread_mutex_unlock(&w->ckpt_mu);
    return l;
}

uint64_t wal_durable_lsn(struct wal *w)
{
    pthread_mutex_lock(&w->mu);
    uint64_t v = w->durable_lsn;
    pthread_mutex_unlock(&w->mu);
    return v;
}

void wal_stats(struct wal *w, struct wal_stats *out)
{
    pthread_mutex_lock(&w->mu);
    *out = w->st;
    pthread_mutex_unlock(&w->mu);
}

void wal_fault_inject(struct wal *w, enum wal_fault what, int value)
{
    pthread_mutex_lock(&w->mu);
    if (what == WAL_FAULT_WRITE) w->fault_write = value;
    else if (what == WAL_FAULT_SYNC) w->fault_sync = value;
    else if (what == WAL_FAULT_SUBMIT_AGAIN) w->fault_again = value > 0 ? value : 0;
    else if (what == WAL_FAULT_SYNC_DELAY)
        w->sync_delay_ns = value > 0 ? (int64_t)value * NS_PER_US : 0;
    pthread_mutex_unlock(&w->mu);
}

int wal_truncate_before(struct wal *w, uint64_t lsn)
{
    int removed = 0, rc = 0;
    pthread_mutex_lock(&w->mu);
    /* segment i holds LSNs [segs[i], segs[i+1]): all below lsn when segs[i+1] <= lsn */
    while (w->nsegs >= 2 && w->segs[1] <= lsn) {
        char name[32];
        seg_name(name, sizeof name, w->segs[0]);
        if (unlinkat(w->dirfd, name, 0) && errno != ENOENT) {
            log_error("redo log %s: cannot remove %s: %s", w->dir, name, strerror(errno));
            rc = RDKV_EIO;
            break;
        }
        memmove(w->segs, w->segs + 1, (w->nsegs - 1) * sizeof *w->segs);
        w->nsegs--;
        removed++;
    }
    pthread_mutex_unlock(&w->mu);
    if (removed && fsync(w->dirfd)) rc = RDKV_EIO;
    return rc ? rc : removed;
}

int wal_close(struct wal *w)
{
    if (!w) return 0;
    pthread_mutex_lock(&w->mu);
    w->closing = true;
    pthread_cond_broadcast(&w->work_cv);
    wake_list(&w->room, UINT64_MAX);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thr, NULL);
    int rc = w->err;
    if (w->fd >= 0) close(w->fd);
    io_uring_queue_exit(&w->ring);
    close(w->dirfd);
    pthread_cond_destroy(&w->work_cv);
    pthread_mutex_destroy(&w->ckpt_mu);
    pthread_mutex_destroy(&w->mu);
    free(w->q);
    free(w->wb);
    free(w->segs);
    free(w);
    return rc;
}
