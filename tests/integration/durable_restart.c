/* A node with a data directory keeps its acknowledged commits through kill -9 (issue 18, the
 * first use of the redo log): a one-node cluster started by the launcher with --data-dir takes
 * one-shot puts, overwrites and deletes and a multi-key transaction, is killed with SIGKILL, is
 * started again on the same port and data directory, and must answer every key as it was last
 * acknowledged (deleted keys absent). Then: the same data directory under another cluster's
 * config is refused with a clear message. (Multi-node clusters: durable_2pc.) checkpoint_restart:
 * the same through checkpoints written while rows change, and the log replayed from the newest
 * one's LSN. disk_faults: a full or failing disk stops the node (docs/storage.md, "Errors"):
 * the commit waiting on the failed record is unknown to its client, and after a restart on a good
 * disk every acknowledged commit is there and the write that failed is not. */
#include "tests/harness.h"
#include "tests/testenv.h"

#include "common/clock.h"
#include "rdkv.h"
#include "tools/launcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEYS 300

static char top[256], data[300], cdir[300], cdir2[300];

static void make_dirs(void)
{
    if (tenv_mkdtemp(top, sizeof top, "rdkv-durable")) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(data, sizeof data, "%s/data", top);
    snprintf(cdir, sizeof cdir, "%s/cluster", top);
    snprintf(cdir2, sizeof cdir2, "%s/cluster2", top);
}

static void opts(struct launch_opts *lo, unsigned nodes, const char *dir)
{
    launch_opts_init(lo);
    lo->nodes = nodes;
    lo->bindir = tenv_bindir;
    lo->transport = tenv_transport;
    lo->arena_size = 64ull << 20;
    lo->dir = dir;
    lo->extra[0] = "--data-dir";
    lo->extra[1] = data;
    lo->extra[2] = "--init"; /* (a restart finds its data: --init changes nothing then) */
    lo->extra[3] = NULL;
}

static int connect_to(struct launch *L, rdkv_session **s)
{
    char ep[64], secret[PATH_MAX + 40];
    snprintf(ep, sizeof ep, "127.0.0.1:%u", L->cc.nodes[0].port);
    snprintf(secret, sizeof secret, "%s/%s", L->dir, LAUNCH_CLIENT_SECRET);
    setenv("RDKV_SECRET_FILE", secret, 1);
    return rdkv_connect(ep, NULL, s);
}

/* What key i should read after the writes below: its value, or absent. */
static bool expect(unsigned i, char *val, size_t cap)
{
    if (i % 7 == 3) return false; /* deleted */
    if (i % 5 == 0) snprintf(val, cap, "second value of %u", i);
    else if (i < 10) snprintf(val, cap, "txn value %u", i);
    else snprintf(val, cap, "value %u", i);
    return true;
}

static void test_kill_restart(void)
{
    make_dirs();
    struct launch L;
    struct launch_opts lo;
    opts(&lo, 1, cdir);
    char err[512] = "";
    int rc = launch_start(&L, &lo, err, sizeof err);
    if (rc) fprintf(stderr, "  launch: %s\n", err);
    REQUIRE(rc == 0);
    rdkv_session *s = NULL;
    REQUIRE(connect_to(&L, &s) == 0);
    char key[32], val[64];
    for (unsigned i = 0; i < KEYS; i++) {
        snprintf(key, sizeof key, "key%u", i);
        snprintf(val, sizeof val, "value %u", i);
        CHECK_EQ(rdkv_put(s, key, strlen(key), val, strlen(val)), 0);
    }
    for (unsigned i = 0; i < KEYS; i += 5) {
        snprintf(key, sizeof key, "key%u", i);
        snprintf(val, sizeof val, "second value of %u", i);
        CHECK_EQ(rdkv_put(s, key, strlen(key), val, strlen(val)), 0);
    }
    for (unsigned i = 3; i < KEYS; i += 7) {
        snprintf(key, sizeof key, "key%u", i);
        CHECK_EQ(rdkv_delete(s, key, strlen(key)), 0);
    }
    /* one transaction writing several keys (those not overwritten or deleted) */
    rdkv_txn *t = NULL;
    REQUIRE(rdkv_txn_begin(s, &t) == 0);
    for (unsigned i = 0; i < 10; i++) {
        if (i % 5 == 0 || i % 7 == 3) continue;
        snprintf(key, sizeof key, "key%u", i);
        snprintf(val, sizeof val, "txn value %u", i);
        CHECK_EQ(rdkv_txn_put(t, key, strlen(key), val, strlen(val)), 0);
    }
    CHECK_EQ(rdkv_txn_commit(t), 0);
    rdkv_session_close(s);
    s = NULL;

    /* every commit above was acknowledged: kill -9, start again on the same data */
    REQUIRE(launch_kill(&L, 0) == 0);
    rc = launch_restart(&L, &lo, 0, err, sizeof err);
    if (rc) fprintf(stderr, "  restart: %s\n", err);
    REQUIRE(rc == 0);
    /* the restarted node said what it replayed: every acknowledged commit (300 puts, 60
     * overwrites, 43 deletes, 1 transaction), nothing else */
    char logp[PATH_MAX + 32], line[512];
    snprintf(logp, sizeof logp, "%s/node-0.log", L.dir);
    FILE *lf = fopen(logp, "r");
    bool said = false;
    while (lf && fgets(line, sizeof line, lf))
        if (strstr(line, "replayed 404 commits")) said = true;
    if (lf) fclose(lf);
    CHECK(said);
    REQUIRE(connect_to(&L, &s) == 0);
    for (unsigned i = 0; i < KEYS; i++) {
        snprintf(key, sizeof key, "key%u", i);
        const void *v = NULL;
        size_t vl = 0;
        rc = rdkv_get(s, key, strlen(key), &v, &vl);
        char want[64];
        if (!expect(i, want, sizeof want)) {
            CHECK_EQ(rc, RDKV_ENOTFOUND);
            continue;
        }
        CHECK_EQ(rc, 0);
        if (rc == 0) {
            CHECK(vl == strlen(want) && memcmp(v, want, vl) == 0);
            if (vl != strlen(want) || memcmp(v, want, vl))
                fprintf(stderr, "  %s: got '%.*s', want '%s'\n", key, (int)vl, (const char *)v, want);
        }
    }
    /* and it goes on logging after the replay */
    CHECK_EQ(rdkv_put(s, "after", 5, "restart", 7), 0);
    rdkv_session_close(s);
    CHECK_EQ(launch_stop(&L, 10 * NS_PER_S), 0);

    /* the same data under another cluster (other ports: another fingerprint) is refused */
    struct launch L2;
    struct launch_opts lo2;
    opts(&lo2, 1, cdir2);
    lo2.ready_timeout_ns = 30 * NS_PER_S;
    err[0] = 0;
    rc = launch_start(&L2, &lo2, err, sizeof err);
    CHECK(rc != 0);
    CHECK(strstr(err, "another node or cluster") != NULL);
    if (!rc) launch_stop(&L2, 10 * NS_PER_S);
    else fprintf(stderr, "  (refused as expected: %s)\n", err);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
    CHECK(system(cmd) == 0);
}

/* Lines of node 0's log in L's directory that contain `what`. */
static unsigned log_lines(const struct launch *L, const char *what)
{
    char logp[PATH_MAX + 32], line[1024];
    snprintf(logp, sizeof logp, "%s/node-0.log", L->dir);
    FILE *lf = fopen(logp, "r");
    unsigned n = 0;
    while (lf && fgets(line, sizeof line, lf))
        if (strstr(line, what)) n++;
    if (lf) fclose(lf);
    return n;
}

#define CK_KEYS 200
#define CK_VAL 1000

static void ck_value(unsigned round, unsigned i, char *val)
{
    memset(val, 'a' + (int)(round % 26), CK_VAL);
    snprintf(val, 32, "round %u key %u", round, i);
}

/* Checkpoints in the node (--checkpoint-every): rounds of 1 KB overwrites from a session keep
 * the log growing while the checkpointer copies rows (so rows change under it), until two
 * checkpoints are reported; then kill -9 and a restart: the node loads the newest checkpoint,
 * replays the log from its LSN, and every key reads the value of its last acknowledged round. */
static void test_checkpoint_restart(void)
{
    make_dirs();
    struct launch L;
    struct launch_opts lo;
    opts(&lo, 1, cdir);
    lo.extra[3] = "--checkpoint-every";
    lo.extra[4] = "256K";
    lo.extra[5] = NULL;
    char err[512] = "";
    int rc = launch_start(&L, &lo, err, sizeof err);
    if (rc) fprintf(stderr, "  launch: %s\n", err);
    REQUIRE(rc == 0);
    rdkv_session *s = NULL;
    REQUIRE(connect_to(&L, &s) == 0);
    static char val[CK_VAL];
    char key[32];
    unsigned round = 0, last_ok = 0;
    int64_t until = clock_now_ns() + 60 * NS_PER_S;
    /* (bounded: 400 rounds of 200 KB, or a minute) */
    for (; round < 400 && clock_now_ns() < until; round++) {
        bool all = true;
        for (unsigned i = 0; i < CK_KEYS; i++) {
            snprintf(key, sizeof key, "ck%u", i);
            ck_value(round, i, val);
            if (rdkv_put(s, key, strlen(key), val, CK_VAL)) all = false;
        }
        CHECK(all);
        last_ok = round;
        if (log_lines(&L, "checkpoint ") >= 2 && round >= 8) break;
    }
    unsigned taken = log_lines(&L, "checkpoint ");
    fprintf(stderr, "  %u rounds of %u KB overwrites, %u checkpoints reported\n", last_ok + 1,
            CK_KEYS * CK_VAL / 1000, taken);
    CHECK(taken >= 2);
    rdkv_session_close(s);
    s = NULL;
    REQUIRE(launch_kill(&L, 0) == 0);
    rc = launch_restart(&L, &lo, 0, err, sizeof err);
    if (rc) fprintf(stderr, "  restart: %s\n", err);
    REQUIRE(rc == 0);
    CHECK(log_lines(&L, "rows loaded") == 1); /* the restart loaded one */
    REQUIRE(connect_to(&L, &s) == 0);
    unsigned good = 0;
    for (unsigned i = 0; i < CK_KEYS; i++) {
        snprintf(key, sizeof key, "ck%u", i);
        const void *v = NULL;
        size_t vl = 0;
        ck_value(last_ok, i, val);
        if (rdkv_get(s, key, strlen(key), &v, &vl) == 0 && vl == CK_VAL && !memcmp(v, val, vl))
            good++;
        else if (good + 3 > i) /* (say the first few) */
            fprintf(stderr, "  %s: not round %u's value after the restart\n", key, last_ok);
    }
    CHECK_EQ(good, CK_KEYS);
    rdkv_session_close(s);
    CHECK_EQ(launch_stop(&L, 10 * NS_PER_S), 0);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
    CHECK(system(cmd) == 0);
}

/* A full or failing disk (kvserver --fault-wal: the log's next write or sync fails): the commit
 * waiting on it answers RDKV_EUNKNOWN (never success), later commits fail with the disk's
 * status at once, reads go on, and after a restart on a good disk every commit acknowledged
 * before the fault is there and the refused ones are not. */
/* Whether node 0's log (all its starts) has a line containing both a and b. */
static bool log_has(const char *dir, const char *a, const char *b)
{
    char p[PATH_MAX + 32], line[1024];
    snprintf(p, sizeof p, "%s/node-0.log", dir);
    FILE *fp = fopen(p, "r");
    bool found = false;
    while (fp && fgets(line, sizeof line, fp))
        if (strstr(line, a) && strstr(line, b)) found = true;
    if (fp) fclose(fp);
    return found;
}

static void test_disk_faults(void)
{
    static const char *const faults[] = {"write:ENOSPC", "sync:EIO"};
    make_dirs();
    struct launch L;
    struct launch_opts lo, lf;
    opts(&lo, 1, cdir);
    char err[512] = "";
    int rc = launch_start(&L, &lo, err, sizeof err);
    if (rc) fprintf(stderr, "  launch: %s\n", err);
    REQUIRE(rc == 0);
    rdkv_session *s = NULL;
    REQUIRE(connect_to(&L, &s) == 0);
    char key[32];
    for (unsigned i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "df%u", i);
        CHECK_EQ(rdkv_put(s, key, strlen(key), "before", 6), 0);
    }
    rdkv_session_close(s);
    for (unsigned f = 0; f < 2; f++) {
        if (launch_alive(&L, 0)) REQUIRE(launch_kill(&L, 0) == 0); /* (a dead one is reaped) */
        lf = lo;
        lf.extra[3] = "--fault-wal";
        lf.extra[4] = faults[f];
        lf.extra[5] = NULL;
        rc = launch_restart(&L, &lf, 0, err, sizeof err);
        if (rc) fprintf(stderr, "  restart: %s\n", err);
        REQUIRE(rc == 0);
        REQUIRE(connect_to(&L, &s) == 0);
        /* the commit whose record failed: the node stops before anyone learns an outcome (the
         * client's link breaks during its commit: unknown), and says why */
        snprintf(key, sizeof key, "fault%u", f);
        CHECK_EQ(rdkv_put(s, key, strlen(key), "x", 1), RDKV_EUNKNOWN);
        rdkv_session_close(s);
        int64_t until = clock_now_ns() + 10 * NS_PER_S;
        while (launch_alive(&L, 0) && clock_now_ns() < until) rdkv_sleep_us(20000);
        CHECK(!launch_alive(&L, 0));
        CHECK(log_has(cdir, "PANIC", "exit status 74"));
        fprintf(stderr, "  --fault-wal %s: the waiting commit unknown, the node stopped (PANIC)\n",
                faults[f]);
    }
    /* a good disk again: what was acknowledged is there, the write that failed is not (the
     * record whose sync failed may be: its outcome was unknown) */
    if (launch_alive(&L, 0)) REQUIRE(launch_kill(&L, 0) == 0);
    rc = launch_restart(&L, &lo, 0, err, sizeof err);
    if (rc) fprintf(stderr, "  restart: %s\n", err);
    REQUIRE(rc == 0);
    REQUIRE(connect_to(&L, &s) == 0);
    const void *v;
    size_t vl;
    for (unsigned i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "df%u", i);
        CHECK(rdkv_get(s, key, strlen(key), &v, &vl) == 0 && vl == 6);
    }
    CHECK_EQ(rdkv_get(s, "fault0", 6, &v, &vl), RDKV_ENOTFOUND); /* its write never happened */
    rc = rdkv_get(s, "fault1", 6, &v, &vl);
    CHECK(rc == 0 || rc == RDKV_ENOTFOUND);
    CHECK_EQ(rdkv_put(s, "after", 5, "z", 1), 0); /* and it commits again */
    rdkv_session_close(s);
    CHECK_EQ(launch_stop(&L, 10 * NS_PER_S), 0);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
    CHECK(system(cmd) == 0);
}

static const struct test_case cases[] = {
    {"kill_restart", test_kill_restart},
    {"checkpoint_restart", test_checkpoint_restart},
    {"disk_faults", test_disk_faults},
};

int main(int argc, char **argv)
{
    return tenv_main(argc, argv, "durable restart", cases, sizeof cases / sizeof cases[0]);
}
