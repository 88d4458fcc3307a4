/* kvbench wal: the redo log (storage/wal.h) on this machine's disk, without a cluster. It times
 * the disk's own 4 KiB write + fdatasync first (what one group costs at the least), then runs
 * appending threads that each commit records (append, then wait until durable) under each
 * durability mode and thread count, and reports commits/s, commit latency, and how many records
 * one fdatasync covered (the group commit's batching). */
#include "tools/kvbench/bench.h"

#include "common/clock.h"
#include "common/parse.h"
#include "storage/wal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: kvbench wal [options]\n"
    "\n"
    "Measures the redo log on the disk under --dir: first the disk's 4 KiB write + fdatasync\n"
    "latency, then threads committing records (append, then wait until durable) for each\n"
    "durability mode and thread count. A fresh log directory is made under --dir for every\n"
    "run and removed after it.\n"
    "\n"
    "  --dir DIR          where the logs go (default $TMPDIR, else /tmp)\n"
    "  --seconds S        length of each run (default 2)\n"
    "  --threads LIST     appending thread counts, comma-separated (default 1,4,16)\n"
    "  --durability LIST  modes among off,group,sync (default off,group,sync)\n"
    "  --size BYTES       payload bytes of each record (default 128)\n"
    "  --syncs N          4 KiB write + fdatasync samples (default 1000)\n"
    "  -h, --help         this text\n";

static char base[512];

static int mkrun(char *out, size_t cap)
{
    snprintf(out, cap, "%s/kvbench-wal-XXXXXX", base);
    return mkdtemp(out) ? 0 : -1;
}

static void rmrun(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (e->d_name[0] != '.') {
                char p[1024];
                snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
                unlink(p);
            }
        closedir(d);
    }
    rmdir(dir);
}

/* The disk's floor: n appends of 4 KiB, each followed by fdatasync. */
static int bench_fdatasync(uint64_t n, struct bench_stats *st)
{
    char dir[600];
    if (mkrun(dir, sizeof dir)) return -1;
    char path[700];
    snprintf(path, sizeof path, "%s/sync.dat", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        rmrun(dir);
        return -1;
    }
    static char page[4096];
    memset(page, 0x5a, sizeof page);
    snprintf(st->name, sizeof st->name, "FDATASYNC-4K");
    hist_init(&st->h);
    int64_t t0 = clock_now_ns();
    for (uint64_t i = 0; i < n && !bench_stop; i++) {
        int64_t a = clock_now_ns();
        if (pwrite(fd, page, sizeof page, (off_t)(i * sizeof page)) != (ssize_t)sizeof page ||
            fdatasync(fd)) {
            st->errors++;
            break;
        }
        hist_record(&st->h, (uint64_t)(clock_now_ns() - a));
        st->ok++;
    }
    st->seconds = (double)(clock_now_ns() - t0) / 1e9;
    close(fd);
    rmrun(dir);
    return st->errors ? -1 : 0;
}

struct worker {
    struct wal *w;
    const uint8_t *payload;
    uint32_t size;
    atomic_bool *stop;
    uint64_t ok, errors;
    int first_error;
    struct hist h;
};

static void *worker_main(void *arg)
{
    struct worker *k = arg;
    hist_init(&k->h);
    for (uint64_t i = 0; !atomic_load_explicit(k->stop, memory_order_relaxed); i++) {
        int64_t a = clock_now_ns();
        int rc = wal_commit(k->w, WAL_COMMIT, i, k->payload, k->size, NULL);
        if (rc) {
            k->errors++;
            if (!k->first_error) k->first_error = rc;
            break;
        }
        hist_record(&k->h, (uint64_t)(clock_now_ns() - a));
        k->ok++;
    }
    return NULL;
}

/* One run: threads committing for `seconds` under durability d. */
static int bench_run(enum wal_durability d, unsigned threads, double seconds, uint32_t size,
                     struct bench_stats *st, struct wal_stats *ws)
{
    char dir[600], err[256];
    if (mkrun(dir, sizeof dir)) return -1;
    struct wal_opts o;
    wal_opts_init(&o);
    o.dir = dir;
    o.node = 0;
    o.cluster_fp = 1;
    o.durability = d;
    struct wal *w;
    int rc = wal_open(&o, NULL, NULL, NULL, &w, err, sizeof err);
    if (rc) {
        fprintf(stderr, "kvbench wal: error: %s\n", err);
        rmrun(dir);
        return -1;
    }
    uint8_t *payload = calloc(1, size ? size : 1);
    struct worker *k = calloc(threads, sizeof *k);
    pthread_t *t = calloc(threads, sizeof *t);
    atomic_bool stop = false;
    if (!payload || !k || !t) {
        free(payload);
        free(k);
        free(t);
        wal_close(w);
        rmrun(dir);
        return -1;
    }
    int64_t t0 = clock_now_ns();
    unsigned started = 0;
    for (; started < threads; started++) {
        k[started] = (struct worker){.w = w, .payload = payload, .size = size, .stop = &stop};
        if (pthread_create(&t[started], NULL, worker_main, &k[started])) break;
    }
    int64_t end = t0 + (int64_t)(seconds * 1e9);
    while (!bench_stop && clock_now_ns() < end) clock_sleep_ns(20 * NS_PER_MS);
    atomic_store(&stop, true);
    snprintf(st->name, sizeof st->name, "%s-%u", wal_durability_name(d), threads);
    hist_init(&st->h);
    int first_error = 0;
    for (unsigned i = 0; i < started; i++) {
        pthread_join(t[i], NULL);
        st->ok += k[i].ok;
        st->errors += k[i].errors;
        if (!first_error) first_error = k[i].first_error;
        hist_merge(&st->h, &k[i].h);
    }
    st->seconds = (double)(clock_now_ns() - t0) / 1e9;
    wal_stats(w, ws);
    if (wal_close(w) && !first_error) first_error = RDKV_EIO;
    if (first_error) fprintf(stderr, "kvbench wal: %s: %s\n", st->name, rdkv_strerror(first_error));
    free(payload);
    free(k);
    free(t);
    rmrun(dir);
    return started == threads && !first_error ? 0 : -1;
}

int cmd_wal(int argc, char **argv)
{
    const char *t = getenv("TMPDIR");
    snprintf(base, sizeof base, "%s", t && *t ? t : "/tmp");
    double seconds = 2;
    char threads_s[128] = "1,4,16", modes_s[64] = "off,group,sync";
    uint64_t size = 128, nsyncs = 1000;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        if (!v) bench_value_missing("wal", usage, o);
        if (!strcmp(o, "--dir")) {
            snprintf(base, sizeof base, "%s", v);
        } else if (!strcmp(o, "--seconds")) {
            if (parse_double(v, &seconds) || seconds <= 0 || seconds > 3600)
                bench_usage_error("wal", "--seconds must be in (0, 3600] (got '%s')", v);
        } else if (!strcmp(o, "--threads")) {
            snprintf(threads_s, sizeof threads_s, "%s", v);
        } else if (!strcmp(o, "--durability")) {
            snprintf(modes_s, sizeof modes_s, "%s", v);
        } else if (!strcmp(o, "--size")) {
            if (parse_uint_range(v, 0, 1u << 20, &size))
                bench_usage_error("wal", "--size must be 0..1048576 (got '%s')", v);
        } else if (!strcmp(o, "--syncs")) {
            if (parse_uint_range(v, 1, 1000000, &nsyncs))
                bench_usage_error("wal", "--syncs must be 1..1000000 (got '%s')", v);
        } else {
            bench_usage_error("wal", "unknown option '%s'", o);
        }
        i++;
    }
    unsigned thr[16], nthr = 0;
    enum wal_durability modes[3];
    unsigned nmodes = 0;
    for (char *save = NULL, *tok = strtok_r(threads_s, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        uint64_t n;
        if (nthr == 16 || parse_uint_range(tok, 1, 256, &n))
            bench_usage_error("wal", "--threads takes up to 16 counts of 1..256 (got '%s')", tok);
        thr[nthr++] = (unsigned)n;
    }
    for (char *save = NULL, *tok = strtok_r(modes_s, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (nmodes == 3 || wal_durability_parse(tok, &modes[nmodes]))
            bench_usage_error("wal", "--durability takes off, group and sync (got '%s')", tok);
        nmodes++;
    }
    bench_install_signals();

    printf("# wal: logs under %s, %llu-byte payloads (%u-byte records), %.1f s per run\n", base,
           (unsigned long long)size, (unsigned)(size + WAL_REC_HDR), seconds);
    struct bench_stats fs = {0};
    if (bench_fdatasync(nsyncs, &fs)) {
        fprintf(stderr, "kvbench wal: error: cannot write and fdatasync a file under %s: %s\n",
                base, strerror(errno));
        return 1;
    }
    bench_print_ycsb(stdout, &fs);

    struct row {
        char name[48];
        double ops, p50, p99, per_sync;
    } rows[48];
    unsigned nrows = 0;
    int ret = 0;
    for (unsigned m = 0; m < nmodes && !bench_stop; m++)
        for (unsigned i = 0; i < nthr && !bench_stop; i++) {
            struct bench_stats st = {0};
            struct wal_stats ws = {0};
            if (bench_run(modes[m], thr[i], seconds, (uint32_t)size, &st, &ws)) ret = 1;
            bench_print_ycsb(stdout, &st);
            printf("[%s], Syncs, %llu\n", st.name, (unsigned long long)ws.syncs);
            printf("[%s], Writes, %llu\n", st.name, (unsigned long long)ws.writes);
            struct row *r = &rows[nrows++];
            snprintf(r->name, sizeof r->name, "%s", st.name);
            r->ops = bench_ops_per_s(&st);
            r->p50 = (double)hist_percentile(&st.h, 50) / 1000.0;
            r->p99 = (double)hist_percentile(&st.h, 99) / 1000.0;
            r->per_sync = ws.syncs ? (double)ws.records / (double)ws.syncs : 0;
        }
    printf("\n# 4 KiB write + fdatasync: p50 %.1f us, p99 %.1f us (%llu samples)\n",
           (double)hist_percentile(&fs.h, 50) / 1000.0, (double)hist_percentile(&fs.h, 99) / 1000.0,
           (unsigned long long)fs.ok);
    printf("# %-10s %12s %12s %12s %14s\n", "run", "commits/s", "p50 (us)", "p99 (us)",
           "records/sync");
    for (unsigned i = 0; i < nrows; i++)
        printf("# %-10s %12.0f %12.1f %12.1f %14.1f\n", rows[i].name, rows[i].ops, rows[i].p50,
               rows[i].p99, rows[i].per_sync);
    return ret;
}
