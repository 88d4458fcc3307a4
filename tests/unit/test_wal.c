/* Unit tests of the redo log (storage/wal.h): group commit from several threads read back in
 * order after reopening, the durability modes, commits from tasks of one thread (a wait parks
 * the task), torn tails (cuts at random offsets, junk after
 * them, random bit flips) that recover exactly a prefix and say what they dropped, corruption in
 * the middle reported as an error, injected ENOSPC and EIO on writes and syncs (waiters fail,
 * nothing failed is reported durable, later appends fail), an io_uring submit answering EAGAIN
 * (every completion matched to its operation), the fail-stop hook (called once, before any
 * waiter learns of the failure), slow syncs, holds (a checkpoint's replay LSN never passes a
 * record that is appended but not applied), recovery syncing the tail before it reads it, a log
 * of another node or cluster refused, truncation behind a checkpoint, limits, and the writes
 * payload. Each test works in a fresh directory under $TMPDIR and removes it. */
#include "tests/harness.h"

#include "common/clock.h"
#include "common/pack.h"
#include "common/rng.h"
#include "common/task.h"
#include "rdkv_status.h"
#include "storage/wal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

#define NODE 3
#define FP 0x1234abcd5678ef00ull

static char dir[512];

static void dir_make(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/rdkv-wal-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
}

static void dir_remove(void)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                char p[1024];
                snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
                unlink(p);
            }
        closedir(d);
    }
    rmdir(dir);
}

static void opts(struct wal_opts *o, enum wal_durability d)
{
    wal_opts_init(o);
    o->dir = dir;
    o->node = NODE;
    o->cluster_fp = FP;
    o->durability = d;
}

/* A record's payload in these tests: "thread:seq" packed as writes, so the decoder is used. */
static uint32_t payload(uint8_t *buf, size_t cap, unsigned thread, unsigned seq)
{
    char key[32], val[64];
    int kl = snprintf(key, sizeof key, "k%u:%u", thread, seq);
    int vl = snprintf(val, sizeof val, "value of %u:%u", thread, seq);
    struct wal_write w[2] = {{WAL_OP_PUT, (uint32_t)kl, (uint32_t)vl, key, val},
                             {WAL_OP_DEL, (uint32_t)kl, 0, key, NULL}};
    return (uint32_t)wal_writes_pack(w, (seq & 1) ? 2 : 1, buf, cap);
}

struct seen {
    unsigned thread, seq;
};
static int first_key(void *arg, const struct wal_write *w)
{
    struct seen *s = arg;
    char k[32];
    if (w->klen >= sizeof k) return RDKV_EPROTO;
    memcpy(k, w->key, w->klen);
    k[w->klen] = 0;
    if (sscanf(k, "k%u:%u", &s->thread, &s->seq) != 2) return RDKV_EPROTO;
    return 1; /* the first write is enough */
}

/* Collected records of a scan. */
struct coll {
    size_t n, cap;
    uint64_t *lsn;
    uint8_t *flags;
    struct seen *who;
};
static int collect(void *arg, const struct wal_rec *r)
{
    struct coll *c = arg;
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 256;
        c->lsn = realloc(c->lsn, c->cap * sizeof *c->lsn);
        c->flags = realloc(c->flags, c->cap);
        c->who = realloc(c->who, c->cap * sizeof *c->who);
        if (!c->lsn || !c->flags || !c->who) return RDKV_ENOMEM;
    }
    struct seen s = {~0u, ~0u};
    if (r->type == WAL_COMMIT && wal_writes_unpack(r->payload, r->len, first_key, &s) != 1)
        return RDKV_EPROTO;
    c->lsn[c->n] = r->lsn;
    c->flags[c->n] = r->flags;
    c->who[c->n] = s;
    c->n++;
    return 0;
}
static void coll_free(struct coll *c)
{
    free(c->lsn);
    free(c->flags);
    free(c->who);
    memset(c, 0, sizeof *c);
}

static int scan(struct coll *c, struct wal_scan_result *res, char *err, size_t cap)
{
    coll_free(c);
    return wal_scan(dir, NODE, FP, 0, collect, c, res, err, cap);
}

/* Opens the log in dir with o and commits n records (thread 0, seq 0..n-1), one by one: NULL
 * if anything failed. */
static struct wal *open_filled(const struct wal_opts *o, unsigned n)
{
    struct wal *w;
    char err[256];
    if (wal_open(o, NULL, NULL, NULL, &w, err, sizeof err)) return NULL;
    uint8_t buf[256];
    for (unsigned i = 0; i < n; i++)
        if (wal_commit(w, WAL_COMMIT, i, buf, payload(buf, sizeof buf, 0, i), NULL)) {
            wal_close(w);
            return NULL;
        }
    return w;
}

/* ---- group commit from several threads ------------------------------------------------------ */

#define THREADS 4
struct appender {
    struct wal *w;
    unsigned id, count;
    uint64_t *lsns; /* the LSN of each acknowledged commit */
    int rc;
};
static void *appender_main(void *arg)
{
    struct appender *a = arg;
    uint8_t buf[256];
    for (unsigned i = 0; i < a->count; i++) {
        uint32_t n = payload(buf, sizeof buf, a->id, i);
        int rc = wal_commit(a->w, WAL_COMMIT, (uint64_t)a->id << 32 | i, buf, n, &a->lsns[i]);
        if (rc) {
            a->rc = rc;
            a->count = i;
            break;
        }
    }
    return NULL;
}

/* Starts THREADS threads running fn on a[i] = {w, i, per, an LSN array of per (when lsns)}. */
static void start_appenders(struct appender *a, pthread_t *t, struct wal *w, unsigned per,
                            bool lsns, void *(*fn)(void *))
{
    for (unsigned i = 0; i < THREADS; i++) {
        a[i] = (struct appender){w, i, per, lsns ? calloc(per, sizeof(uint64_t)) : NULL, 0};
        if (lsns && !a[i].lsns) exit(1);
        pthread_create(&t[i], NULL, fn, &a[i]);
    }
}

static void run_threads(enum wal_durability d, unsigned per, uint64_t segment_bytes)
{
    dir_make();
    struct wal_opts o;
    opts(&o, d);
    o.segment_bytes = segment_bytes;
    struct wal *w;
    char err[256] = "";
    int rc = wal_open(&o, NULL, NULL, NULL, &w, err, sizeof err);
    REQUIRE(rc == 0);
    struct appender a[THREADS];
    pthread_t t[THREADS];
    start_appenders(a, t, w, per, true, appender_main);
    for (unsigned i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    struct wal_stats st;
    wal_stats(w, &st);
    if (d != WAL_DUR_OFF) CHECK_EQ(st.records, THREADS * per); /* off: perhaps not written yet */
    if (d == WAL_DUR_SYNC) CHECK(st.syncs >= st.records);
    if (d != WAL_DUR_OFF) CHECK_EQ(wal_durable_lsn(w), THREADS * per);
    CHECK_EQ(wal_close(w), 0);

    struct coll c = {0};
    struct wal_scan_result res;
    rc = scan(&c, &res, err, sizeof err);
    if (rc) fprintf(stderr, "  scan: %s\n", err);
    CHECK_EQ(rc, 0);
    CHECK(!res.torn);
    CHECK_EQ(c.n, THREADS * per);
    CHECK_EQ(res.next_lsn, THREADS * per + 1);
    /* a group is never split, so only groups smaller than a segment guarantee several */
    if (segment_bytes && d == WAL_DUR_GROUP) CHECK(res.segments > 1);
    /* LSNs 1..N in order; each thread's commits in its own order, each at its waited LSN */
    unsigned next[THREADS] = {0};
    for (size_t i = 0; i < c.n; i++) {
        CHECK_EQ(c.lsn[i], i + 1);
        unsigned th = c.who[i].thread;
        REQUIRE(th < THREADS);
        CHECK_EQ(c.who[i].seq, next[th]);
        CHECK_EQ(a[th].lsns[c.who[i].seq], c.lsn[i]);
        next[th]++;
    }
    for (unsigned i = 0; i < THREADS; i++) {
        CHECK_EQ(a[i].rc, 0);
        CHECK_EQ(next[i], per);
        free(a[i].lsns);
    }

    /* reopened, the log continues after its last record */
    rc = wal_open(&o, NULL, NULL, NULL, &w, err, sizeof err);
    REQUIRE(rc == 0);
    uint8_t buf[256];
    uint64_t lsn = 0;
    CHECK_EQ(wal_commit(w, WAL_COMMIT, 1, buf, payload(buf, sizeof buf, 0, per), &lsn), 0);
    CHECK_EQ(lsn, THREADS * per + 1);
    CHECK_EQ(wal_close(w), 0);
    CHECK_EQ(scan(&c, &res, err, sizeof err), 0);
    CHECK_EQ(c.n, THREADS * per + 1);
    coll_free(&c);
    dir_remove();
}

static void test_group_threads(void) { run_threads(WAL_DUR_GROUP, 400, 32 << 10); }
static void test_sync_threads(void) { run_threads(WAL_DUR_SYNC, 40, 0); }
static void test_off_threads(void) { run_threads(WAL_DUR_OFF, 400, 32 << 10); }

/* ---- commits from tasks: a waiting commit parks its task, the thread runs the others -------- */

struct task_run {
    struct wal *w;
    unsigned id, inside, max_inside;
    int rc;
    uint64_t lsns[8][50];
};
static struct task_run *trun;
static void task_main(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    uint8_t buf[256];
    for (unsigned i = 0; i < 50 && !trun->rc; i++) {
        uint32_t n = payload(buf, sizeof buf, id, i);
        trun->inside++;
        if (trun->inside > trun->max_inside) trun->max_inside = trun->inside;
        int rc = wal_commit(trun->w, WAL_COMMIT, i, buf, n, &trun->lsns[id][i]);
        trun->inside--;
        if (rc) trun->rc = rc;
    }
}

static void test_tasks(void)
{
    dir_make();
    struct wal_opts o;
    opts(&o, WAL_DUR_GROUP);
    struct task_run *r = calloc(1, sizeof *r);
    REQUIRE(r);
    trun = r;
    char err[256];
    REQUIRE(wal_open(&o, NULL, NULL, NULL, &r->w, err, sizeof err) == 0);
    struct sched *s;
    REQUIRE(sched_create(&s) == 0);
    for (uintptr_t i = 0; i < 8; i++) REQUIRE(task_spawn(s, task_main, (void *)i, 0) == 0);
    CHECK_EQ(sched_run(s), 0);
    sched_destroy(s);
    CHECK_EQ(r->rc, 0);
    /* one thread had several commits waiting at once: a wait parks the task, not the thread */
    CHECK(r->max_inside > 1);
    CHECK_EQ(wal_close(r->w), 0);
    struct coll c = {0};
    struct wal_scan_result res;
    CHECK_EQ(scan(&c, &res, err, sizeof err), 0);
    CHECK_EQ(c.n, 400);
    for (unsigned t = 0; t < 8; t++)
        for (unsigned i = 0; i < 50; i++) {
            uint64_t l = r->lsns[t][i];
            REQUIRE(l >= 1 && l <= c.n);
            CHECK_EQ(c.who[l - 1].thread, t);
            CHECK_EQ(c.who[l - 1].seq, i);
        }
    coll_free(&c);
    free(r);
    dir_remove();
}

/* ---- torn tails and corruption -------------------------------------------------------------- */

static char seg0[600];

/* Writes a one-segment log: `single` commits waited one by one (each its own group), then
 * `batch` appended together and waited at the end (one or more groups). Returns the segment's
 * bytes (malloc'd) and the records' offsets. */
static uint8_t *write_log(unsigned single, unsigned batch, size_t *len, size_t *offs)
{
    struct wal_opts o;
    opts(&o, WAL_DUR_GROUP);
    struct wal *w;
    char err[256];
    if (wal_open(&o, NULL, NULL, NULL, &w, err, sizeof err)) return NULL;
    uint8_t buf[256];
    uint64_t lsn = 0;
    for (unsigned i = 0; i < single + batch; i++) {
        int rc = wal_append(w, WAL_COMMIT, i, buf, payload(buf, sizeof buf, 0, i), &lsn);
        if (!rc && i < single) rc = wal_wait(w, lsn);
        if (rc) return NULL;
    }
    if (wal_wait(w, lsn) || wal_close(w)) return NULL;
    snprintf(seg0, sizeof seg0, "%s/wal-%016llx.log", dir, 1ull);
    int fd = open(seg0, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st)) return NULL;
    uint8_t *b = malloc((size_t)st.st_size);
    if (!b || read(fd, b, (size_t)st.st_size) != st.st_size) return NULL;
    close(fd);
    *len = (size_t)st.st_size;
    size_t off = WAL_SEG_HDR;
    for (unsigned i = 0; i < single + batch; i++) {
        offs[i] = off;
        off += WAL_REC_HDR + (pack_get_u32le(b + off) & WAL_REC_LIMIT);
    }
    offs[single + batch] = off;
    return b;
}

static void put_file(const uint8_t *b, size_t len)
{
    int fd = open(seg0, O_WRONLY | O_TRUNC);
    if (fd < 0 || write(fd, b, len) != (ssize_t)len) {
        perror("put_file");
        exit(1);
    }
    close(fd);
}

#define NREC 80
static void test_torn_cuts(void)
{
    dir_make();
    size_t len, offs[NREC + 1];
    uint8_t *b = write_log(NREC, 0, &len, offs);
    REQUIRE(b);
    REQUIRE(offs[NREC] == len);
    uint64_t s = 0x5eed1;
    uint8_t *junk = malloc(len + 4096);
    REQUIRE(junk);
    for (unsigned trial = 0; trial < 300; trial++) {
        /* cut anywhere in the records (the header stays), sometimes with junk after the cut */
        size_t cut = WAL_SEG_HDR + rng_below(&s, len - WAL_SEG_HDR);
        size_t jl = (trial & 1) ? rng_below(&s, 4096) : 0;
        memcpy(junk, b, cut);
        for (size_t i = 0; i < jl; i++) junk[cut + i] = (trial & 2) ? 0 : (uint8_t)rng_next(&s);
        put_file(junk, cut + jl);
        unsigned whole = 0;
        while (whole < NREC && offs[whole + 1] <= cut) whole++;
        struct coll c = {0};
        struct wal_scan_result res;
        char err[256] = "";
        int rc = scan(&c, &res, err, sizeof err);
        if (rc) fprintf(stderr, "  cut %zu junk %zu: %s\n", cut, jl, err);
        REQUIRE(rc == 0);
        CHECK_EQ(c.n, whole);
        for (size_t i = 0; i < c.n; i++) CHECK_EQ(c.who[i].seq, i);
        bool torn = cut + jl > offs[whole];
        CHECK_EQ(res.torn, torn);
        if (torn) {
            CHECK_EQ(res.tail_offset, offs[whole]);
            CHECK_EQ(res.dropped, cut + jl - offs[whole]);
            CHECK(res.why[0] != 0);
        }
        coll_free(&c);
    }
    /* wal_open cuts the tail, and the log goes on from the prefix */
    size_t cut = offs[NREC / 2] + 7;
    put_file(b, cut);
    struct wal_opts o;
    opts(&o, WAL_DUR_GROUP);
    struct wal *w;
    struct wal_scan_result res;
    char err[256];
    REQUIRE(wal_open(&o, NULL, NULL, &res, &w, err, sizeof err) == 0);
    CHECK(res.torn);
    CHECK_EQ(res.dropped, 7);
    struct stat st;
    CHECK(stat(seg0, &st) == 0 && (size_t)st.st_size == offs[NREC / 2]);
    uint8_t buf[256];
    uint64_t lsn;
    CHECK_EQ(wal_commit(w, WAL_COMMIT, 9, buf, payload(buf, sizeof buf, 0, NREC / 2), &lsn), 0);
    CHECK_EQ(lsn, NREC / 2 + 1);
    CHECK_EQ(wal_close(w), 0);
    struct coll c = {0};
    CHECK_EQ(scan(&c, &res, err, sizeof err), 0);
    CHECK(!res.torn);
    CHECK_EQ(c.n, NREC / 2 + 1);
    for (size_t i = 0; i < c.n; i++) CHECK_EQ(c.who[i].seq, i);
    coll_free(&c);
    free(junk);
    free(b);
    dir_remove();
}

/* Random bit flips: a flip in the last group is a torn tail (exactly the records before it
 * survive); a flip in a group that a later group follows is corruption in the middle. */
static void test_bit_flips(void)
{
    dir_make();
    size_t len, offs[NREC + 1];
    uint8_t *b = write_log(NREC / 2, NREC / 2, &len, offs);
    REQUIRE(b);
    struct coll c = {0};
    struct wal_scan_result res;
    char err[256];
    REQUIRE(scan(&c, &res, err, sizeof err) == 0);
    REQUIRE(c.n == NREC);
    bool group[NREC];
    unsigned last_group = 0;
    for (unsigned i = 0; i < NREC; i++) {
        group[i] = c.flags[i] & WAL_F_GROUP;
        if (group[i]) last_group = i;
    }
    for (unsigned i = 0; i < NREC / 2; i++) CHECK(group[i]); /* each waited commit: a group */
    CHECK(group[0]);
    uint8_t *m = malloc(len);
    REQUIRE(m);
    uint64_t s = 0xf1195;
    unsigned tails = 0, middles = 0;
    for (unsigned trial = 0; trial < 400; trial++) {
        memcpy(m, b, len);
        /* half the flips in the last group, half anywhere in the records */
        size_t from = (trial & 1) ? offs[last_group] : WAL_SEG_HDR;
        size_t at = from + rng_below(&s, len - from);
        m[at] ^= (uint8_t)(1u << rng_below(&s, 8));
        put_file(m, len);
        unsigned r = 0;
        while (offs[r + 1] <= at) r++;
        bool middle = r < last_group;
        err[0] = 0;
        int rc = scan(&c, &res, err, sizeof err);
        if (middle) {
            CHECK_EQ(rc, RDKV_EPROTO);
            CHECK(strstr(err, "middle") != NULL);
            middles++;
        } else {
            CHECK_EQ(rc, 0);
            CHECK(res.torn);
            CHECK_EQ(c.n, r);
            CHECK_EQ(res.tail_offset, offs[r]);
            CHECK_EQ(res.dropped, len - offs[r]);
            for (size_t i = 0; i < c.n; i++) CHECK_EQ(c.who[i].seq, i);
            tails++;
        }
    }
    CHECK(tails > 0 && middles > 0);
    /* a bad segment header is an error, not an empty log */
    memcpy(m, b, len);
    m[20] ^= 1;
    put_file(m, len);
    CHECK_EQ(scan(&c, &res, err, sizeof err), RDKV_EPROTO);
    coll_free(&c);
    free(m);
    free(b);
    dir_remove();
}

/* Corruption in an earlier segment, and a missing segment, are errors; a torn header of the
 * last segment is a torn tail. */
static void test_middle_segments(void)
{
    dir_make();
    struct wal_opts o;
    opts(&o, WAL_DUR_GROUP);
    o.segment_bytes = 4096;
    struct wal *w;
    char err[256];
    REQUIRE((w = open_filled(&o, 200)) != NULL);
    uint8_t buf[256];
    uint64_t lsn;
    CHECK_EQ(wal_close(w), 0);
    struct coll c = {0};
    struct wal_scan_result res;
    REQUIRE(scan(&c, &res, err, sizeof err) == 0);
    REQUIRE(res.segments >= 4);
    REQUIRE(c.n == 200);
    /* the second segment's first LSN: the first record whose predecessor filled segment 1 */
    char name[700];
    DIR *d = opendir(dir);
    uint64_t segs[64];
    unsigned ns = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, "wal-", 4) && ns < 64)
            segs[ns++] = strtoull(e->d_name + 4, NULL, 16);
    if (d) closedir(d);
    REQUIRE(ns == res.segments);
    for (unsigned i = 0; i < ns; i++) /* sort */
        for (unsigned j = i + 1; j < ns; j++)
            if (segs[j] < segs[i]) {
                uint64_t t = segs[i];
                segs[i] = segs[j];
                segs[j] = t;
            }
    /* flip a byte in the last record of segment 0 */
    snprintf(name, sizeof name, "%s/wal-%016llx.log", dir, (unsigned long long)segs[0]);
    int fd = open(name, O_RDWR);
    struct stat st;
    REQUIRE(fd >= 0 && fstat(fd, &st) == 0);
    uint8_t x;
    REQUIRE(pread(fd, &x, 1, st.st_size - 3) == 1);
    x ^= 0x40;
    REQUIRE(pwrite(fd, &x, 1, st.st_size - 3) == 1);
    CHECK_EQ(scan(&c, &res, err, sizeof err), RDKV_EPROTO);
    CHECK(strstr(err, "middle") != NULL);
    x ^= 0x40;
    REQUIRE(pwrite(fd, &x, 1, st.st_size - 3) == 1);
    close(fd);
    CHECK_EQ(scan(&c, &res, err, sizeof err), 0);
    CHECK_EQ(c.n, 200);
    /* wal_open refuses it too, and leaves it as it was */
    /* a missing segment */
    snprintf(name, sizeof name, "%s/wal-%016llx.log", dir, (unsigned long long)segs[1]);
    char moved[720];
    snprintf(moved, sizeof moved, "%s.away", name);
    REQUIRE(rename(name, moved) == 0);
    CHECK_EQ(scan(&c, &res, err, sizeof err), RDKV_EPROTO);
    CHECK(strstr(err, "missing") != NULL);
    CHECK_EQ(wal_open(&o, NULL, NULL, NULL, &w, err, sizeof err), RDKV_EPROTO);
    REQUIRE(rename(moved, name) == 0);
    /* a last segment cut inside its header (created, not yet synced): a torn tail */
    snprintf(name, sizeof name, "%s/wal-%016llx.log", dir, (unsigned long long)segs[ns - 1]);
    REQUIRE(truncate(name, 10) == 0);
    CHECK_EQ(scan(&c, &res, err, sizeof err), 0);
    CHECK(res.torn);
    CHECK_EQ(res.tail_segment, segs[ns - 1]);
    CHECK_EQ(c.n, segs[ns - 1] - 1);
    REQUIRE(wal_open(&o, NULL, NULL, &res, &w, err, sizeof err) == 0);
    CHECK(access(name, F_OK) != 0); /* removed */
    CHECK_EQ(wal_commit(w, WAL_COMMIT, 1, buf, payload(buf, sizeof buf, 0, 999), &lsn), 0);
    CHECK_EQ(lsn, segs[ns - 1]);
    CHECK_EQ(wal_close(w), 0);
    CHECK_EQ(scan(&c, &res, err, sizeof err), 0);
    CHECK_EQ(c.n, segs[ns - 1]);
    coll_free(&c);
    dir_remove();
}

/* ---- disk faults ---------------------------------------------------------------------------- */

static void fault_case(enum wal_fault what, int eno, int want)
{
    dir_make();
    struct wal_opts o;
    opts(&o, WAL_DUR_GROUP);
    struct wal *w;
    char err[256];
    REQUIRE((w = open_filled(&o, 10)) != NULL);
    uint8_t buf[256];
    uint64_t lsn;
    CHECK_EQ(wal_error(w, NULL, 0), 0);
    wal_fault_inject(w, what, eno);
    CHECK_EQ(wal_commit(w, WAL_COMMIT, 10, buf, payload(buf, sizeof buf, 0, 10), &lsn), want);
    CHECK_EQ(lsn, 11);
    char msg[200];
    CHECK_EQ(wal_error(w, msg, sizeof msg), want);
    CHECK(strstr(msg, what == WAL_FAULT_WRITE ? "write" : "fdatasync") != NULL);
    CHECK(strstr(msg, strerror(eno)) != NULL);
    CHECK_EQ(wal_durable_lsn(w), 10);
    CHECK_EQ(wal_wait(w, 10), 0);   /* what was durable stays durable */
    CHECK_EQ(wal_wait(w, 11), want); /* what failed is never reported durable */
    CHECK_EQ(wal_append(w, WAL_COMMIT, 11, buf, 10, &lsn), want); /* later appends fail */
    CHECK_EQ(wal_commit(w, WAL_END, 11, NULL, 0, &lsn), want);
    CHECK_EQ(wal_close(w), want);
    /* the durable records are all there; the failed one may be (its write may have landed) */
    struct coll c = {0};
    struct wal_scan_result res;
    CHECK_EQ(scan(&c, &res, err, sizeof err), 0);
    CHECK(c.n == 10 || (what == WAL_FAULT_SYNC && c.n == 11));
    if (what == WAL_FAULT_WRITE) CHECK_EQ(c.n, 10);
    for (size_t i = 0; i < c.n; i++) CHECK_EQ(c.who[i].seq, i);
    coll_free(&c);
    dir_remove();
}

static void test_faults(void)
{
    fault_case(WAL_FAULT_WRITE, ENOSPC, RDKV_ENOSPC);
    fault_case(WAL_FAULT_WRITE, EIO, RDKV_EIO);
    fault_case(WAL_FAULT_SYNC, ENOSPC, RDKV_ENOSPC);
    fault_case(WAL_FAULT_SYNC, EIO, RDKV_EIO);
}

/* Several threads committing while a sync fails: every commit acknowledged is in the log, every
 * one after the failure fails. */
static void test_fault_threads(void)
{
    dir_make();
    struct wal_opts o;
    opts(&o, WAL_DUR_GROUP);
    struct wal *w;
    char err[256];
    REQUIRE(wal_open(&o, NULL, NULL, NULL, &w, err, sizeof err) == 0);
    struct appender a[THREADS];
    pthread_t t[THREADS];
    const unsigned per = 50000; /* a cap: each thread commits until the failure stops it */
    start_appenders(a, t, w, per, true, appender_main);
    /* fail a sync once the log is under way (bounded poll: the threads make progress) */
    struct wal_stats st;
    for (int spins = 0; spins < 100000; spins++) {
        wal_stats(w, &st);
        if (st.records >= 100) break;
        usleep(100);
    }
    wal_fault_inject(w, WAL_FAULT_SYNC, EIO);
    for (unsigned i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    uint64_t durable = wal_durable_lsn(w);
    CHECK_EQ(wal_close(w), RDKV_EIO);
    struct coll c = {0};
    struct wal_scan_result res;
    CHECK_EQ(scan(&c, &res, err, sizeof err), 0);
    CHECK(c.n >= durable);
    for (unsigned i = 0; i < THREADS; i++) {
        CHECK_EQ(a[i].rc, RDKV_EIO); /* every thread saw the failure */
        for (unsigned k = 0; k < a[i].count; k++) {
            /* acknowledged: durable, and in the log at its LSN with its content */
            CHECK(a[i].lsns[k] <= durable);
            REQUIRE(a[i].lsns[k] >= 1 && a[i].lsns[k] <= c.n);
            CHECK_EQ(c.who[a[i].lsns[k] - 1].thread, i);
            CHECK_EQ(c.who[a[i].lsns[k] - 1].seq, k);
        }
        free(a[i].lsns);
    }
    coll_free(&c);
    dir_remove();
}

/* io_uring_submit_and_wait answering EAGAIN with the operation still queued (the kernel could
 * not take it now): the log must submit again, never prepare the operation a second time, and
 * take only its own operation's completion. Armed for each commit in turn on the group's first
 * submit (its write) and its second (its fdatasync). Every commit succeeds after a sync of its
 * own, and the log read back holds each record at its LSN. */
static void test_submit_again(void)
{
    dir_make();
    struct wal_opts o;
    opts(&o, WAL_DUR_GROUP);
    struct wal *w;
    char err[256];
    REQUIRE(wal_open(&o, NULL, NULL, NULL, &w, err, sizeof err) == 0);
    struct wal_stats st0, st;
    wal_stats(w, &st0);
    uint8_t buf[256];
    const unsigned n = 20;
    for (unsigned i = 0; i < n; i++) {
        wal_fault_inject(w, WAL_FAULT_SUBMIT_AGAIN, 1 + (int)(i & 1));
        uint64_t lsn = 0;
        CHECK_EQ(wal_commit(w, WAL_COMMIT, i, buf, payload(buf, sizeof buf, 0, i), &lsn), 0);
        CHECK_EQ(lsn, i + 1);
        CHECK_EQ(wal_error(w, NULL, 0), 0);
    }
    wal_stats(w, &st);
    CHECK(st.syncs >= st0.syncs + n);
    CHECK_EQ(st.stray, 0);
    CHECK_EQ(wal_close(w), 0);
    struct coll c = {0};
    struct wal_scan_result res;
    REQUIRE(wal_open(&o, collect, &c, &res, &w, err, sizeof err) == 0);
    CHECK_EQ(wal_close(w), 0);
    CHECK(!res.torn);
    CHECK_EQ(c.n, n);
    for (size_t i = 0; i < c.n; i++) {
        CHECK_EQ(c.lsn[i], i + 1);
        CHECK_EQ(c.who[i].seq, i);
    }
    coll_free(&c);
    dir_remove();
}

/* ---- the fail-stop hook --------------------------------------------------------------------- */

struct hook_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct wal *w;
    int calls, status, err_seen;
    unsigned failed_seen; /* waiters that had returned with an error when the hook ran */
    char msg[256];
    bool entered, release;
};
static atomic_uint failed_returns;

/* Records what it saw, then blocks until the test releases it, as a node's hook that stops the
 * process never returns. */
static void hook_block(void *arg, int status, const char *msg)
{
    struct hook_state *h = arg;
    unsigned failed = atomic_load(&failed_returns);
    int seen = wal_error(h->w, NULL, 0);
    pthread_mutex_lock(&h->mu);
    h->calls++;
    h->status = status;
    snprintf(h->msg, sizeof h->msg, "%s", msg);
    h->failed_seen = failed;
    h->err_seen = seen;
    h->entered = true;
    pthread_cond_broadcast(&h->cv);
    while (!h->release) pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
}

static void *committer_counted(void *arg)
{
    appender_main(arg);
    struct appender *a = arg;
    if (a->rc) atomic_fetch_add(&failed_returns, 1);
    return NULL;
}

/* A sync fails while threads commit: the hook runs once, while every waiter of the failed group
 * is still parked and the error is not yet visible; after it returns every waiter gets the
 * error. */
static void test_fail_hook(void)
{
    dir_make();
    static struct hook_state h;
    memset(&h, 0, sizeof h);
    pthread_mutex_init(&h.mu, NULL);
    pthread_cond_init(&h.cv, NULL);
    atomic_store(&failed_returns, 0);
    struct wal_opts o;
    opts(&o, WAL_DUR_GROUP);
    o.on_fail = hook_block;
    o.on_fail_arg = &h;
    struct wal *w;
    char err[256];
    REQUIRE(wal_open(&o, NULL, NULL, NULL, &w, err, sizeof err) == 0);
    h.w = w; /* before the failure is injected: the hook reads it under the log's own ordering */
    struct appender a[THREADS];
    pthread_t t[THREADS];
    start_appenders(a, t, w, 50000, true, committer_counted);
    struct wal_stats st;
    for (int spins = 0; spins < 100000; spins++) { /* bounded: the threads make progress */
        wal_stats(w, &st);
        if (st.records >= 50) break;
        usleep(100);
    }
    wal_fault_inject(w, WAL_FAULT_SYNC_DELAY, 2000); /* waiters park behind a slow sync */
    wal_fault_inject(w, WAL_FAULT_SYNC, EIO);
    pthread_mutex_lock(&h.mu);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    while (!h.entered && pthread_cond_timedwait(&h.cv, &h.mu, &until) == 0) {}
    bool entered = h.entered;
    pthread_mutex_unlock(&h.mu);
    CHECK(entered);
    if (entered) {
        /* a waiter wrongly woken before the hook would have had time to return */
        usleep(20000);
        CHECK_EQ(atomic_load(&failed_returns), 0);
        CHECK_EQ(wal_error(w, NULL, 0), 0);
        CHECK(wal_durable_lsn(w) < wal_next_lsn(w) - 1); /* records are waiting */
    }
    pthread_mutex_lock(&h.mu);
    h.release = true;
    pthread_cond_broadcast(&h.cv);
    pthread_mutex_unlock(&h.mu);
    for (unsigned i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ(a[i].rc, RDKV_EIO);
        free(a[i].lsns);
    }
    CHECK_EQ(h.calls, 1);
    CHECK_EQ(h.status, RDKV_EIO);
    CHECK_EQ(h.failed_seen, 0);
    CHECK_EQ(h.err_seen, 0);
    CHECK(strstr(h.msg, "fdatasync") != NULL);
    char msg[200];
    CHECK_EQ(wal_error(w, msg, sizeof msg), RDKV_EIO);
    CHECK(strcmp(msg, h.msg) == 0);
    uint8_t buf[16] = {0};
    CHECK_EQ(wal_append(w, WAL_COMMIT, 1, buf, sizeof buf, NULL), RDKV_EIO);
    CHECK_EQ(wal_close(w), RDKV_EIO);
    CHECK_EQ(h.calls, 1); /* once */
    pthread_cond_destroy(&h.cv);
    pthread_mutex_destroy(&h.mu);
    dir_remove();
}

/* WAL_FAULT_SYNC_DELAY: every group's fdatasync waits, until it is set to 0. A commit covers at
 * least one delayed sync, so it lasts at least the delay (a lower bound the sleep guarantees,
 * not a measurement). */
static void test_sync_delay(void)
{
    dir_make();
    struct wal_opts o;
    opts(&o, WAL_DUR_GROUP);
    struct wal *w;
    char err[256];
    REQUIRE(wal_open(&o, NULL, NULL, NULL, &w, err, sizeof err) == 0);
    uint8_t buf[256];
    wal_fault_inject(w, WAL_FAULT_SYNC_DELAY, 20000);
    for (unsigned i = 0; i < 3; i++) {
        int64_t t0 = clock_now_ns();
        CHECK_EQ(wal_commit(w, WAL_COMMIT, i, buf, payload(buf, sizeof buf, 0, i), NULL), 0);
        CHECK(clock_now_ns() - t0 >= 20 * NS_PER_MS);
    }
    wal_fault_inject(w, WAL_FAULT_SYNC_DELAY, 0);
    for (unsigned i = 3; i < 10; i++)
        CHECK_EQ(wal_commit(w, WAL_COMMIT, i, buf, payload(buf, sizeof buf, 0, i), NULL), 0);
    CHECK_EQ(wal_close(w), 0);
    struct coll c = {0};
    struct wal_scan_result res;
    CHECK_EQ(scan(&c, &res, err, sizeof err), 0);
    CHECK_EQ(c.n, 10);
    coll_free(&c);
    dir_remove();
}

/* ---- holds ---------------------------------------------------------------------------------- */

#define HOLD_LSNS 100000
static atomic_uchar held[HOLD_LSNS], applied[HOLD_LSNS], unheld[HOLD_LSNS];
static atomic_uint holders_done;

struct holder {
    struct wal *w;
    unsigned id, count;
    int rc;
};

/* {hold; append (two records for id 1); wait; apply; unhold}. Id 0 sleeps a few milliseconds
 * between its wait and its apply every few rounds, so a checkpoint that did not wait for its
 * hold would see its record unapplied. Id 3 appends without a hold. */
static void *holder_main(void *arg)
{
    struct holder *x = arg;
    uint8_t buf[256];
    for (unsigned i = 0; i < x->count && !x->rc; i++) {
        uint32_t n = payload(buf, sizeof buf, x->id, i);
        struct wal_hold h;
        bool hold = x->id != 3;
        if (hold) wal_hold(x->w, &h);
        uint64_t lsn[2];
        unsigned k = x->id == 1 ? 2 : 1;
        for (unsigned j = 0; j < k && !x->rc; j++) {
            x->rc = wal_append(x->w, WAL_COMMIT, i, buf, n, &lsn[j]);
            if (!x->rc && lsn[j] >= HOLD_LSNS) x->rc = RDKV_ETOOBIG;
            if (!x->rc) atomic_store(hold ? &held[lsn[j]] : &unheld[lsn[j]], 1);
        }
        if (!x->rc) x->rc = wal_wait(x->w, lsn[k - 1]);
        if (!x->rc && x->id == 0 && i % 4 == 0) usleep(3000);
        for (unsigned j = 0; j < k && !x->rc; j++) atomic_store(&applied[lsn[j]], 1);
        if (hold) wal_unhold(x->w, &h);
    }
    atomic_fetch_add(&holders_done, 1);
    return NULL;
}

struct ckpt_call {
    struct wal *w;
    uint64_t lsn;
    atomic_bool done;
};
static void *ckpt_main(void *arg)
{
    struct ckpt_call *c = arg;
    c->lsn = wal_checkpoint_lsn(c->w);
    atomic_store(&c->done, true);
    return NULL;
}

static void test_holds(void)
{
    dir_make();
    memset(held, 0, sizeof held);
    memset(applied, 0, sizeof applied);
    memset(unheld, 0, sizeof unheld);
    struct wal_opts o;
    opts(&o, WAL_DUR_GROUP);
    struct wal *w;
    char err[256];
    REQUIRE(wal_open(&o, NULL, NULL, NULL, &w, err, sizeof err) == 0);
    uint8_t buf[256];
    uint32_t n = payload(buf, sizeof buf, 9, 0);

    /* nothing held: the next LSN, at once */
    CHECK_EQ(wal_checkpoint_lsn(w), 1);

    /* a holder that applies late: the checkpoint waits for it */
    struct holder slow = {w, 0, 1, 0};
    pthread_t st;
    atomic_store(&holders_done, 0);
    pthread_create(&st, NULL, holder_main, &slow);
    for (int k = 0; k < 100000 && !atomic_load(&held[1]); k++) usleep(50);
    REQUIRE(atomic_load(&held[1]));
    uint64_t l = wal_checkpoint_lsn(w);
    CHECK_EQ(l, 2);
    CHECK_EQ(atomic_load(&applied[1]), 1);
    pthread_join(st, NULL);
    CHECK_EQ(slow.rc, 0);

    /* a hold taken while a checkpoint waits does not delay it; its records come at or after the
     * checkpoint's LSN */
    struct wal_hold a, b;
    wal_hold(w, &a);
    uint64_t la;
    CHECK_EQ(wal_append(w, WAL_COMMIT, 1, buf, n, &la), 0);
    static struct ckpt_call cc;
    cc.w = w;
    atomic_store(&cc.done, false);
    pthread_t ct;
    pthread_create(&ct, NULL, ckpt_main, &cc);
    bool flipped = false; /* b lands in the other epoch once the checkpoint has begun */
    for (int k = 0; k < 100000 && !flipped; k++) {
        wal_hold(w, &b);
        flipped = b.epoch != a.epoch;
        if (!flipped) {
            wal_unhold(w, &b);
            usleep(50);
        }
    }
    REQUIRE(flipped);
    CHECK(!atomic_load(&cc.done)); /* it waits for a, which nothing has released */
    uint64_t lb;
    CHECK_EQ(wal_append(w, WAL_COMMIT, 2, buf, n, &lb), 0);
    CHECK_EQ(wal_wait(w, lb), 0);
    wal_unhold(w, &a);
    pthread_join(ct, NULL); /* returns while b is held */
    CHECK(cc.lsn > la);
    CHECK(cc.lsn <= lb);
    wal_unhold(w, &b);

    /* holders, a slow one, one holding two records, one without holds, and a checkpointer:
     * below each checkpoint's LSN every record appended under a hold is applied */
    uint64_t base = wal_next_lsn(w);
    struct holder x[4];
    pthread_t t[4];
    atomic_store(&holders_done, 0);
    for (unsigned i = 0; i < 4; i++) {
        x[i] = (struct holder){w, i, 150, 0};
        pthread_create(&t[i], NULL, holder_main, &x[i]);
    }
    uint64_t prev = base;
    unsigned checkpoints = 0, bad = 0;
    while (atomic_load(&holders_done) < 4) {
        uint64_t c = wal_checkpoint_lsn(w);
        CHECK(c >= prev);
        for (uint64_t i = prev; i < c && i < HOLD_LSNS; i++)
            if (atomic_load(&held[i]) && !atomic_load(&applied[i])) {
                if (!bad++) fprintf(stderr, "  LSN %llu below checkpoint LSN %llu not applied\n",
                                    (unsigned long long)i, (unsigned long long)c);
            }
        prev = c > prev ? c : prev;
        checkpoints++;
        usleep(200);
    }
    for (unsigned i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ(x[i].rc, 0);
    }
    CHECK_EQ(bad, 0);
    CHECK(checkpoints > 0);
    uint64_t end = wal_next_lsn(w);
    CHECK_EQ(end - base, 150 * 5);
    for (uint64_t i = base; i < end; i++)
        CHECK(atomic_load(&held[i]) + atomic_load(&unheld[i]) == 1);
    CHECK_EQ(wal_checkpoint_lsn(w), end);
    CHECK_EQ(wal_close(w), 0);
    dir_remove();
}

/* ---- recovery reads what the device holds --------------------------------------------------- */

struct replay_peek {
    struct wal_scan_result *res;
    uint64_t synced_at_first;
    size_t n;
};
static int replay_peek(void *arg, const struct wal_rec *r)
{
    struct replay_peek *p = arg;
    (void)r;
    if (p->n++ == 0) p->synced_at_first = p->res->tail_synced;
    return 0;
}

static uint64_t last_segment(void)
{
    uint64_t last = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, "wal-", 4)) {
            uint64_t v = strtoull(e->d_name + 4, NULL, 16);
            if (v > last) last = v;
        }
    if (d) closedir(d);
    return last;
}

/* wal_open syncs the last segment and drops its cached pages before the scan reads a record:
 * the replay callback already sees it done. */
static void test_recovery_sync(void)
{
    dir_make();
    struct wal_opts o;
    opts(&o, WAL_DUR_GROUP);
    o.segment_bytes = 4096;
    struct wal *w;
    char err[256];
    struct wal_scan_result res;
    REQUIRE(wal_open(&o, NULL, NULL, &res, &w, err, sizeof err) == 0);
    CHECK_EQ(res.tail_synced, 0); /* a new log: nothing to read */
    CHECK_EQ(wal_close(w), 0);
    REQUIRE((w = open_filled(&o, 200)) != NULL);
    CHECK_EQ(wal_close(w), 0);
    uint64_t last = last_segment();
    REQUIRE(last > 1);
    struct replay_peek p = {&res, 0, 0};
    REQUIRE(wal_open(&o, replay_peek, &p, &res, &w, err, sizeof err) == 0);
    CHECK_EQ(p.n, 200);
    CHECK_EQ(p.synced_at_first, last);
    CHECK_EQ(res.tail_synced, last);
    CHECK_EQ(res.records, 200);
    uint8_t buf[256];
    uint64_t lsn;
    CHECK_EQ(wal_commit(w, WAL_COMMIT, 1, buf, payload(buf, sizeof buf, 0, 200), &lsn), 0);
    CHECK_EQ(lsn, 201);
    CHECK_EQ(wal_close(w), 0);
    CHECK_EQ(wal_scan(dir, NODE, FP, 0, NULL, NULL, &res, err, sizeof err), 0);
    CHECK_EQ(res.tail_synced, 0); /* wal_scan changes nothing */
    CHECK_EQ(res.records, 201);
    dir_remove();
}

/* ---- identity, truncation, limits, payloads ------------------------------------------------- */

static void test_other_node(void)
{
    dir_make();
    struct wal_opts o;
    opts(&o, WAL_DUR_GROUP);
    struct wal *w;
    char err[256];
    REQUIRE(wal_open(&o, NULL, NULL, NULL, &w, err, sizeof err) == 0);
    CHECK_EQ(wal_commit(w, WAL_END, 1, NULL, 0, NULL), 0);
    CHECK_EQ(wal_close(w), 0);
    o.node = NODE + 1;
    err[0] = 0;
    CHECK_EQ(wal_open(&o, NULL, NULL, NULL, &w, err, sizeof err), RDKV_ECONFIG);
    CHECK(strstr(err, "another node or cluster") != NULL);
    o.node = NODE;
    o.cluster_fp = FP + 1;
    CHECK_EQ(wal_open(&o, NULL, NULL, NULL, &w, err, sizeof err), RDKV_ECONFIG);
    struct wal_scan_result res;
    CHECK_EQ(wal_scan(dir, NODE, FP + 1, 0, NULL, NULL, &res, err, sizeof err), RDKV_ECONFIG);
    CHECK_EQ(wal_scan(dir, NODE, FP, 0, NULL, NULL, &res, err, sizeof err), 0);
    CHECK_EQ(res.records, 1);
    dir_remove();
}

static void test_truncate(void)
{
    dir_make();
    struct wal_opts o;
    opts(&o, WAL_DUR_GROUP);
    o.segment_bytes = 4096;
    struct wal *w;
    char err[256];
    REQUIRE((w = open_filled(&o, 300)) != NULL);
    uint8_t buf[256];
    uint64_t lsn;
    struct coll c = {0};
    struct wal_scan_result before, res;
    REQUIRE(scan(&c, &before, err, sizeof err) == 0);
    CHECK_EQ(wal_truncate_before(w, 1), 0);
    int removed = wal_truncate_before(w, 150);
    CHECK(removed > 0);
    CHECK_EQ(scan(&c, &res, err, sizeof err), 0);
    CHECK_EQ(res.segments, before.segments - (unsigned)removed);
    REQUIRE(c.n > 0);
    CHECK(c.lsn[0] <= 150);       /* nothing at or after 150 went */
    CHECK(c.lsn[0] > 1);
    CHECK_EQ(c.lsn[c.n - 1], 300);
    /* everything: all but the segment being written */
    CHECK(wal_truncate_before(w, UINT64_MAX) >= 0);
    CHECK_EQ(scan(&c, &res, err, sizeof err), 0);
    CHECK_EQ(res.segments, 1);
    CHECK_EQ(wal_commit(w, WAL_COMMIT, 1, buf, payload(buf, sizeof buf, 0, 300), &lsn), 0);
    CHECK_EQ(lsn, 301);
    CHECK_EQ(wal_close(w), 0);
    REQUIRE(wal_open(&o, NULL, NULL, &res, &w, err, sizeof err) == 0);
    CHECK_EQ(res.next_lsn, 302);
    CHECK_EQ(wal_close(w), 0);
    coll_free(&c);
    dir_remove();
}

static atomic_uint appenders_done;
static void *appender_counted(void *arg)
{
    appender_main(arg);
    atomic_fetch_add(&appenders_done, 1);
    return NULL;
}

/* Truncation while threads commit: what remains is a contiguous run ending at the last commit. */
static void test_truncate_concurrent(void)
{
    dir_make();
    struct wal_opts o;
    opts(&o, WAL_DUR_GROUP);
    o.segment_bytes = 4096;
    struct wal *w;
    char err[256];
    REQUIRE(wal_open(&o, NULL, NULL, NULL, &w, err, sizeof err) == 0);
    struct appender a[THREADS];
    pthread_t t[THREADS];
    const unsigned per = 200;
    atomic_store(&appenders_done, 0);
    start_appenders(a, t, w, per, true, appender_counted);
    int removed = 0;
    /* bounded: the appenders finish (each commit waits at most for a group) */
    for (unsigned k = 0; k < 200000 && atomic_load(&appenders_done) < THREADS; k++) {
        int r = wal_truncate_before(w, wal_durable_lsn(w) / 2);
        CHECK(r >= 0);
        if (r > 0) removed += r;
        usleep(200);
    }
    for (unsigned i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ(a[i].rc, 0);
        free(a[i].lsns);
    }
    CHECK_EQ(wal_close(w), 0);
    struct coll c = {0};
    struct wal_scan_result res;
    CHECK_EQ(scan(&c, &res, err, sizeof err), 0);
    REQUIRE(c.n > 0);
    CHECK_EQ(c.lsn[c.n - 1], THREADS * per);
    for (size_t i = 1; i < c.n; i++) CHECK_EQ(c.lsn[i], c.lsn[i - 1] + 1);
    CHECK(removed > 0 || c.lsn[0] == 1);
    coll_free(&c);
    dir_remove();
}

static void *small_appender(void *arg)
{
    struct appender *a = arg;
    uint8_t buf[900];
    memset(buf, (int)a->id, sizeof buf);
    for (unsigned i = 0; i < a->count && !a->rc; i++)
        a->rc = wal_append(a->w, WAL_DECISION, i, buf, sizeof buf, NULL);
    return NULL;
}

static void test_limits(void)
{
    dir_make();
    struct wal_opts o;
    opts(&o, WAL_DUR_GROUP);
    o.record_max = 1000;
    o.queue_max = 1; /* raised to one largest record: appenders block behind the writer */
    struct wal *w;
    char err[256];
    REQUIRE(wal_open(&o, NULL, NULL, NULL, &w, err, sizeof err) == 0);
    static uint8_t big[2000];
    CHECK_EQ(wal_append(w, WAL_COMMIT, 1, big, 1001, NULL), RDKV_ETOOBIG);
    CHECK_EQ(wal_append(w, 0, 1, big, 10, NULL), RDKV_EINVAL);
    CHECK_EQ(wal_append(w, WAL_TYPE_MAX + 1, 1, big, 10, NULL), RDKV_EINVAL);
    CHECK_EQ(wal_append(w, WAL_COMMIT, 1, NULL, 10, NULL), RDKV_EINVAL);
    uint64_t lsn = 0;
    CHECK_EQ(wal_commit(w, WAL_PREPARE, 1, big, 1000, &lsn), 0);
    CHECK_EQ(lsn, 1);
    CHECK_EQ(wal_wait(w, 2), RDKV_EINVAL); /* never appended */
    /* a queue of one record: threads block, none fails, all arrive */
    struct appender a[THREADS];
    pthread_t t[THREADS];
    start_appenders(a, t, w, 50, false, small_appender);
    for (unsigned i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ(a[i].rc, 0);
    }
    CHECK_EQ(wal_close(w), 0);
    struct wal_scan_result res;
    CHECK_EQ(wal_scan(dir, NODE, FP, 0, NULL, NULL, &res, err, sizeof err), 0);
    CHECK_EQ(res.records, 1 + THREADS * 50);
    /* a reader with a smaller limit than the writer's refuses the long record (a tail here) */
    CHECK_EQ(wal_scan(dir, NODE, FP, 999, NULL, NULL, &res, err, sizeof err), RDKV_EPROTO);
    enum wal_durability d;
    CHECK_EQ(wal_durability_parse("group", &d), 0);
    CHECK_EQ(d, WAL_DUR_GROUP);
    CHECK_EQ(wal_durability_parse("fast", &d), RDKV_EINVAL);
    dir_remove();
}

static int count_writes(void *arg, const struct wal_write *w)
{
    (void)w;
    ++*(unsigned *)arg;
    return 0;
}

static void test_writes_payload(void)
{
    uint8_t key[300], val[5000];
    for (unsigned i = 0; i < sizeof key; i++) key[i] = (uint8_t)i;
    for (unsigned i = 0; i < sizeof val; i++) val[i] = (uint8_t)(i * 7);
    struct wal_write w[3] = {{WAL_OP_PUT, 300, 5000, key, val},
                             {WAL_OP_DEL, 0, 0, key, NULL},
                             {WAL_OP_PUT, 1, 0, key, val}};
    size_t n = wal_writes_size(w, 3);
    uint8_t *buf = malloc(n);
    REQUIRE(buf);
    CHECK_EQ(wal_writes_pack(w, 3, buf, n - 1), 0);
    CHECK_EQ(wal_writes_pack(w, 3, buf, n), n);
    unsigned k = 0;
    CHECK_EQ(wal_writes_unpack(buf, n, count_writes, &k), 0);
    CHECK_EQ(k, 3);
    for (size_t cut = 0; cut < n; cut += (cut < 400 ? 1 : 97))
        CHECK_EQ(wal_writes_unpack(buf, cut, NULL, NULL), RDKV_EPROTO);
    buf[4] = 9; /* bad op */
    CHECK_EQ(wal_writes_unpack(buf, n, NULL, NULL), RDKV_EPROTO);
    free(buf);
}

static const struct test_case cases[] = {
    {"group_threads", test_group_threads},
    {"sync_threads", test_sync_threads},
    {"off_threads", test_off_threads},
    {"tasks", test_tasks},
    {"torn_cuts", test_torn_cuts},
    {"bit_flips", test_bit_flips},
    {"middle_segments", test_middle_segments},
    {"faults", test_faults},
    {"fault_threads", test_fault_threads},
    {"submit_again", test_submit_again},
    {"fail_hook", test_fail_hook},
    {"sync_delay", test_sync_delay},
    {"holds", test_holds},
    {"recovery_sync", test_recovery_sync},
    {"other_node", test_other_node},
    {"truncate", test_truncate},
    {"truncate_concurrent", test_truncate_concurrent},
    {"limits", test_limits},
    {"writes_payload", test_writes_payload},
};

int main(int argc, char **argv)
{
    return test_main(argc - 1, argv + 1, cases, sizeof cases / sizeof cases[0]);
}
