/* The logged commit through the faults a review found (issue 28): each case drives one fault to
 * its window with a test hook and holds the cluster to what an acknowledged commit promises.
 *   ckpt_insert: one node, --checkpoint-every 256K, every fdatasync slowed (--fault-wal
 *     sync-delay) and every install 50 ms after its record is durable (install-slow@0), 8
 *     sessions inserting 1 KB values while checkpoints are taken; kill -9 soon after the fourth
 *     (once the inserts in flight at its start are acknowledged) and restart: every acknowledged
 *     insert is there. (A checkpoint whose replay LSN passed an
 *     insert's COMMIT record before the row was installed lost it.)
 *   commit_fail: a participant's COMMIT record fails to write (commit-fail@1); after the
 *     participant is restarted, the acknowledged transfer is there whole. (It forgot the prepared
 *     transaction, answered "not found", the coordinator took that as confirmation, and the
 *     restart presumed abort: half applied.)
 *   decision_fail: the coordinator's DECISION fails to sync (decision-fail@0, the record in the
 *     file), a transfer of another coordinator then wants the same row, the coordinator is
 *     restarted: no transfer is partly applied. (It released its locks with the outcome unknown;
 *     the later transfer wrote the row; the restarted coordinator found its DECISION and the
 *     participant's fence refused the COMMIT.)
 *   own_commit_fail: the coordinator's own share's COMMIT record fails (own-commit-fail@0):
 *     no reader ever sees half of the transfer, and after a restart it is whole.
 *   coord_oom: the coordinator's memory for a decision still to deliver runs out (coord-oom@0)
 *     while a participant dies at the COMMIT (commit-exit@1): after its restart the transfer is
 *     whole. (The coordinator forgot the decision and answered "unknown".)
 *   txid_clock: a node whose wall clock reads the same at two starts (RDKV_TEST_WALL_US) never
 *     gives two transactions one id: its log's COMMIT records all name different txids.
 *   keep_behind_asks: a participant holds 16 PREPAREs of a coordinator that answers its
 *     in-doubt queries too late (query-slow@1); with a 2 s lease, no waiter gets a prepared
 *     row while they are prepared. (The keeps of the prepared rows' locks waited behind the
 *     queries, 500 ms each, and a waiter reset a lock after two leases.)
 * Each waits only for what it can observe (a node's death, a log line, a status counter), with a
 * bound; none asserts on timing. */
#include "tests/bank.h"
#include "tests/harness.h"
#include "tests/testenv.h"
#include "tests/txncluster.h"

#include "client/embed.h"
#include "common/clock.h"
#include "locks/lock.h"
#include "server/node.h"
#include "storage/store.h"
#include "storage/wal.h"
#include "txn/internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char top[256], data[300], cdir[300];
static struct bank bank;

/* A launcher cluster of n kvserver processes, each with its data directory, 2 s leases (a dead
 * holder's lock is recovered 4 s after), and in-doubt queries after 2 s. */
static void opts(struct launch_opts *lo, unsigned n)
{
    launch_opts_init(lo);
    lo->nodes = n;
    lo->bindir = tenv_bindir;
    lo->transport = tenv_transport;
    lo->arena_size = 64ull << 20;
    lo->dir = cdir;
    unsigned k = 0;
    lo->extra[k++] = "--data-dir";
    lo->extra[k++] = data;
    lo->extra[k++] = "--lease";
    lo->extra[k++] = "2s";
    lo->extra[k++] = "--indoubt-after";
    lo->extra[k++] = "2s";
    lo->extra[k++] = "--init"; /* (a restart finds its data: --init changes nothing then) */
    lo->extra[k] = NULL;
}

static void dirs(const char *name)
{
    REQUIRE(tenv_mkdtemp(top, sizeof top, name) == 0);
    snprintf(data, sizeof data, "%s/data-%%N", top);
    snprintf(cdir, sizeof cdir, "%s/cluster", top);
    setenv("RDKV_TEST_FAULT", "", 1);
}

static void cleanup(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
    if (!getenv("RDKV_TEST_KEEP") && !harness_failures) CHECK(system(cmd) == 0);
}

static void start(struct launch *L, struct launch_opts *lo, unsigned n)
{
    opts(lo, n);
    char err[512] = "";
    int rc = launch_start(L, lo, err, sizeof err);
    if (rc) fprintf(stderr, "  launch: %s\n", err);
    REQUIRE(rc == 0);
}

/* Starts node again (after a kill -9, or reaping it when it ended itself) with the test hook
 * `hook` armed (NULL: none); only that start sees it. */
static void restart_with(struct launch *L, const struct launch_opts *lo, unsigned node,
                         const char *hook)
{
    if (launch_alive(L, node)) REQUIRE(launch_kill(L, node) == 0); /* (a dead one is reaped) */
    setenv("RDKV_TEST_FAULT", hook ? hook : "", 1);
    bank_restart(L, lo, node);
    setenv("RDKV_TEST_FAULT", "", 1);
}

/* Waits (bounded) until node's process has ended, or until done() says so. */
static bool wait_dead(struct launch *L, unsigned node, int64_t bound_ns)
{
    int64_t until = clock_now_ns() + bound_ns;
    while (launch_alive(L, node) && clock_now_ns() < until) rdkv_sleep_us(20000);
    return !launch_alive(L, node);
}

/* A 3-node bank: accounts loaded, a0..a2 one account on each node. */
static void bank3(struct launch *L, struct launch_opts *lo, const char *name, unsigned a[3],
                  rdkv_session **s)
{
    dirs(name);
    bank_init(&bank, 3);
    start(L, lo, 3);
    REQUIRE(bank_connect(L, 0, s) == 0);
    REQUIRE(bank_load(*s) == 0);
    for (unsigned n = 0; n < 3; n++) {
        a[n] = bank_acct_on(&bank, n, BANK_ACCTS);
        REQUIRE(a[n] < BANK_ACCTS);
    }
}

static void end3(struct launch *L, rdkv_session **ss, unsigned ns)
{
    for (unsigned i = 0; i < ns; i++)
        if (ss[i]) rdkv_session_close(ss[i]);
    CHECK_EQ(launch_stop(L, 10 * NS_PER_S), 0);
    cleanup();
}

/* ------------------------------------------------------------------------------------------ */
/* ckpt_insert */

#define INS_THREADS 8
#define INS_MAX 4000 /* inserts per thread, at most */
#define INS_VLEN 1024

static struct launch *iL;
static _Atomic bool istop;
static _Atomic unsigned iacked[INS_THREADS];

static void ins_key(unsigned th, unsigned i, char *k, size_t cap) { snprintf(k, cap, "ins%u-%u", th, i); }
static void ins_val(unsigned th, unsigned i, uint8_t *v)
{
    for (unsigned j = 0; j < INS_VLEN; j++) v[j] = (uint8_t)(th * 31 + i * 7 + j);
}

static void *ins_thread(void *arg)
{
    unsigned th = (unsigned)(uintptr_t)arg;
    rdkv_session *s = NULL;
    if (bank_connect(iL, 0, &s)) return NULL;
    uint8_t v[INS_VLEN];
    for (unsigned i = 0; i < INS_MAX && !atomic_load(&istop); i++) {
        char k[32];
        ins_key(th, i, k, sizeof k);
        ins_val(th, i, v);
        if (rdkv_put(s, k, strlen(k), v, sizeof v)) break;
        iacked[th] = i + 1; /* (acknowledged: it must survive) */
    }
    rdkv_session_close(s);
    return NULL;
}

/* How many checkpoints node's log reports written. */
static unsigned ckpts_written(struct launch *L, unsigned node)
{
    char p[PATH_MAX + 32], line[1024];
    snprintf(p, sizeof p, "%s/node-%u.log", L->dir, node);
    FILE *f = fopen(p, "r");
    unsigned n = 0;
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, "kvserver: checkpoint ") && strstr(line, " rows in ")) n++;
    if (f) fclose(f);
    return n;
}

static void test_ckpt_insert(void)
{
    dirs("rdkv-cf-ckpt");
    struct launch L;
    struct launch_opts lo;
    opts(&lo, 1);
    unsigned k = 0;
    while (lo.extra[k]) k++;
    lo.extra[k++] = "--checkpoint-every";
    lo.extra[k++] = "256K";
    lo.extra[k++] = "--fault-wal";
    lo.extra[k++] = "sync-delay:2000"; /* a disk whose syncs take 2 ms */
    lo.extra[k] = NULL;
    /* and commits that install 50 ms after their record is durable: the window, widened */
    setenv("RDKV_TEST_FAULT", "install-slow@0", 1);
    char err[512] = "";
    int rc = launch_start(&L, &lo, err, sizeof err);
    setenv("RDKV_TEST_FAULT", "", 1);
    if (rc) fprintf(stderr, "  launch: %s\n", err);
    REQUIRE(rc == 0);
    iL = &L;
    atomic_store(&istop, false);
    pthread_t th[INS_THREADS];
    for (uintptr_t i = 0; i < INS_THREADS; i++)
        REQUIRE(pthread_create(&th[i], NULL, ins_thread, (void *)i) == 0);
    /* inserts run while the node writes four checkpoints (bounded) */
    int64_t until = clock_now_ns() + 120 * NS_PER_S;
    while (ckpts_written(&L, 0) < 4 && clock_now_ns() < until) rdkv_sleep_us(20000);
    unsigned nck = ckpts_written(&L, 0);
    /* the inserts in flight when that checkpoint began are acknowledged by now (each thread has
     * finished two more), and the next checkpoint is hundreds of inserts away: kill -9 */
    unsigned seen[INS_THREADS];
    for (unsigned t = 0; t < INS_THREADS; t++) seen[t] = iacked[t];
    for (unsigned t = 0; t < INS_THREADS && clock_now_ns() < until; t++)
        while (iacked[t] < seen[t] + 2 && iacked[t] < INS_MAX && clock_now_ns() < until)
            rdkv_sleep_us(5000);
    REQUIRE(launch_kill(&L, 0) == 0); /* while the inserts run */
    atomic_store(&istop, true);
    for (unsigned i = 0; i < INS_THREADS; i++) pthread_join(th[i], NULL);
    CHECK(nck >= 2);
    lo.extra[k - 2] = NULL; /* the restart's disk is a fast one */
    bank_restart(&L, &lo, 0);
    rdkv_session *s = NULL;
    REQUIRE(bank_connect(&L, 0, &s) == 0);
    unsigned acked = 0, lost = 0;
    for (unsigned t = 0; t < INS_THREADS; t++)
        for (unsigned i = 0; i < iacked[t]; i++) {
            char key[32];
            uint8_t want[INS_VLEN];
            ins_key(t, i, key, sizeof key);
            ins_val(t, i, want);
            const void *v = NULL;
            size_t vl = 0;
            rc = rdkv_get(s, key, strlen(key), &v, &vl);
            acked++;
            if (rc || vl != INS_VLEN || memcmp(v, want, vl)) {
                if (lost++ < 5)
                    fprintf(stderr, "  %s: acknowledged, %s after the restart\n", key,
                            rc ? rdkv_strerror(rc) : "another value");
            }
        }
    fprintf(stderr, "  %u inserts acknowledged while %u checkpoints were written; %u lost\n",
            acked, nck, lost);
    CHECK_EQ(lost, 0u);
    rdkv_session_close(s);
    CHECK_EQ(launch_stop(&L, 10 * NS_PER_S), 0);
    cleanup();
}

/* ------------------------------------------------------------------------------------------ */
/* commit_fail, decision_fail, own_commit_fail, coord_oom */

static void test_commit_fail(void)
{
    struct launch L;
    struct launch_opts lo;
    unsigned a[3];
    rdkv_session *s0 = NULL;
    bank3(&L, &lo, "rdkv-cf-commit", a, &s0);
    REQUIRE(s0 != NULL);
    restart_with(&L, &lo, 1, "commit-fail@1");
    struct bank_xfer x = {a[1], a[2], 9, 0};
    int rc = bank_transfer(s0, 0, &x); /* node 0 coordinates; node 1's COMMIT record fails */
    CHECK_EQ(rc, 0);                   /* the decision is durable: the transfer committed */
    /* the coordinator either delivers the commit to node 1 for good, or node 1 stops */
    int64_t until = clock_now_ns() + 20 * NS_PER_S;
    while (launch_alive(&L, 1) && bank_status_num(&L, 0, "\"decisions\":{\"pending\":") != 0 &&
           clock_now_ns() < until)
        rdkv_sleep_us(20000);
    fprintf(stderr, "  node 1 %s; node 0's decisions to deliver: %ld\n",
            launch_alive(&L, 1) ? "runs on" : "stopped",
            bank_status_num(&L, 0, "\"decisions\":{\"pending\":"));
    restart_with(&L, &lo, 1, NULL);
    bank_check(&bank, s0, &x, 1, NULL);
    rdkv_session *ss[] = {s0};
    end3(&L, ss, 1);
}

static void test_decision_fail(void)
{
    struct launch L;
    struct launch_opts lo;
    unsigned a[3];
    rdkv_session *s0 = NULL, *s1 = NULL;
    bank3(&L, &lo, "rdkv-cf-decision", a, &s0);
    REQUIRE(s0 != NULL);
    REQUIRE(bank_connect(&L, 1, &s1) == 0);
    restart_with(&L, &lo, 0, "decision-fail@0");
    rdkv_session_close(s0);
    REQUIRE(bank_connect(&L, 0, &s0) == 0);
    /* ledger entries whose markers live on nodes 1 and 2: node 0's failed log takes no part in
     * the second transfer */
    unsigned m[2], nm = 0;
    for (unsigned i = 0; nm < 2 && i < 64; i++) {
        char k[32];
        bank_mark_key(i, k, sizeof k);
        if (rdkv_key_partition(k, strlen(k), 3) == 1 + nm) m[nm++] = i;
    }
    REQUIRE(nm == 2);
    struct bank_xfer x[64] = {{0}};
    x[m[0]] = (struct bank_xfer){a[0], a[1], 11, 0};
    x[m[1]] = (struct bank_xfer){a[1], a[2], 13, 0};
    int rc = bank_transfer(s0, m[0], &x[m[0]]); /* its DECISION does not sync */
    fprintf(stderr, "  the transfer whose DECISION failed: %s\n", rdkv_strerror(rc));
    CHECK(rc != 0);
    /* another coordinator's transfer wants the row at node 1 meanwhile */
    rc = bank_transfer(s1, m[1], &x[m[1]]);
    fprintf(stderr, "  a transfer of node 1 over the same row: %s\n", rdkv_strerror(rc));
    restart_with(&L, &lo, 0, NULL);
    bank_check(&bank, s1, x, (m[0] > m[1] ? m[0] : m[1]) + 1, NULL);
    rdkv_session *ss[] = {s0, s1};
    end3(&L, ss, 2);
}

/* Reads two accounts in one transaction from s: 0 and their sum in *sum, or a status. */
static int read_pair(rdkv_session *s, unsigned p, unsigned q, long *sum)
{
    rdkv_txn *t = NULL;
    int rc = rdkv_txn_begin(s, &t);
    if (rc) return rc;
    char k[32];
    long u = 0, v = 0;
    bank_acct_key(p, k, sizeof k);
    rc = bank_read_int(t, k, &u);
    bank_acct_key(q, k, sizeof k);
    if (!rc) rc = bank_read_int(t, k, &v);
    if (!rc) rc = rdkv_txn_commit(t);
    else rdkv_txn_abort(t);
    rdkv_txn_free(t);
    *sum = u + v;
    return rc;
}

static void test_own_commit_fail(void)
{
    struct launch L;
    struct launch_opts lo;
    unsigned a[3];
    rdkv_session *s0 = NULL, *s1 = NULL;
    bank3(&L, &lo, "rdkv-cf-own", a, &s0);
    REQUIRE(s0 != NULL);
    REQUIRE(bank_connect(&L, 1, &s1) == 0);
    restart_with(&L, &lo, 0, "own-commit-fail@0");
    rdkv_session_close(s0);
    REQUIRE(bank_connect(&L, 0, &s0) == 0);
    struct bank_xfer x = {a[0], a[1], 7, 0};
    int rc = bank_transfer(s0, 0, &x); /* node 0's own share's COMMIT record fails */
    fprintf(stderr, "  the transfer: %s\n", rdkv_strerror(rc));
    /* whoever reads both accounts sees all of the transfer or none of it; node 0 is restarted
     * if it stopped */
    unsigned reads = 0;
    bool restarted = false;
    for (int i = 0; i < 100 && reads < 5; i++) {
        long sum = 0;
        rc = read_pair(s1, a[0], a[1], &sum);
        if (rc == 0) {
            reads++;
            if (sum != 2 * BANK_START)
                fprintf(stderr, "  acct%u + acct%u read as %ld: half of the transfer\n", a[0],
                        a[1], sum);
            CHECK_EQ(sum, 2L * BANK_START);
        } else if (!restarted && !launch_alive(&L, 0)) {
            restart_with(&L, &lo, 0, NULL);
            restarted = true;
        } else {
            rdkv_sleep_us(50000);
        }
    }
    CHECK(reads > 0);
    if (!restarted) restart_with(&L, &lo, 0, NULL);
    bank_check(&bank, s1, &x, 1, NULL);
    rdkv_session *ss[] = {s0, s1};
    end3(&L, ss, 2);
}

static void test_coord_oom(void)
{
    struct launch L;
    struct launch_opts lo;
    unsigned a[3];
    rdkv_session *s0 = NULL;
    bank3(&L, &lo, "rdkv-cf-oom", a, &s0);
    REQUIRE(s0 != NULL);
    restart_with(&L, &lo, 0, "coord-oom@0");
    restart_with(&L, &lo, 1, "commit-exit@1");
    rdkv_session_close(s0);
    REQUIRE(bank_connect(&L, 0, &s0) == 0);
    struct bank_xfer x = {a[1], a[2], 17, 0};
    int rc = bank_transfer(s0, 0, &x);
    fprintf(stderr, "  the transfer: %s; node 1 %s\n", rdkv_strerror(rc),
            wait_dead(&L, 1, 10 * NS_PER_S) ? "died at its COMMIT" : "lives");
    /* node 1 stays down until node 0 keeps no locks there any more (a fence kept for a COMMIT
     * without an answer ends when node 0 declares node 1 down): from then on only node 0's
     * memory of the decision can tell node 1 that the transfer committed */
    int64_t until = clock_now_ns() + 20 * NS_PER_S;
    while (bank_status_num(&L, 0, "\"pending\":") != 0 && clock_now_ns() < until)
        rdkv_sleep_us(20000);
    CHECK_EQ(bank_status_num(&L, 0, "\"pending\":"), 0);
    restart_with(&L, &lo, 1, NULL); /* it finds the transfer in doubt and asks node 0 */
    bank_check(&bank, s0, &x, 1, NULL);
    rdkv_session *ss[] = {s0};
    end3(&L, ss, 1);
}

/* ------------------------------------------------------------------------------------------ */
/* txid_clock */

struct txids {
    uint64_t v[256];
    unsigned n;
};

static int collect_txid(void *arg, const struct wal_rec *r)
{
    struct txids *t = arg;
    if (r->type == WAL_COMMIT && t->n < 256) t->v[t->n++] = r->txid;
    return 0;
}

static void test_txid_clock(void)
{
    dirs("rdkv-cf-txid");
    setenv("RDKV_TEST_WALL_US", "1800000000000000", 1); /* the clock reads this at both starts */
    struct launch L;
    struct launch_opts lo;
    start(&L, &lo, 1);
    rdkv_session *s = NULL;
    for (unsigned life = 0; life < 2; life++) {
        REQUIRE(bank_connect(&L, 0, &s) == 0);
        for (unsigned i = 0; i < 20; i++) {
            char k[32];
            snprintf(k, sizeof k, "tx%u-%u", life, i);
            CHECK_EQ(rdkv_put(s, k, strlen(k), "v", 1), 0);
        }
        rdkv_session_close(s);
        if (life == 0) {
            REQUIRE(launch_kill(&L, 0) == 0);
            bank_restart(&L, &lo, 0);
        }
    }
    unsetenv("RDKV_TEST_WALL_US");
    uint64_t fp = L.cc.fingerprint;
    CHECK_EQ(launch_stop(&L, 10 * NS_PER_S), 0);
    char dir[400], err[512] = "";
    snprintf(dir, sizeof dir, "%s/data-0", top);
    struct txids t = {.n = 0};
    struct wal_scan_result res;
    CHECK_EQ(wal_scan(dir, 0, fp, 0, collect_txid, &t, &res, err, sizeof err), 0);
    CHECK_EQ(t.n, 40u);
    unsigned dup = 0;
    for (unsigned i = 0; i < t.n; i++)
        for (unsigned j = i + 1; j < t.n; j++)
            if (t.v[i] == t.v[j] && dup++ < 3)
                fprintf(stderr, "  txid %llx names COMMIT records %u and %u\n",
                        (unsigned long long)t.v[i], i, j);
    CHECK_EQ(dup, 0u);
    cleanup();
}

/* ------------------------------------------------------------------------------------------ */
/* keep_behind_asks */

#define KEEP_N 16
/* txids of node 1 that its transaction layer never hands out (worker 0xFFFF) */
#define FORGED_TXID(node, seq) ((uint64_t)(node) << 48 | 0xFFFFull << 32 | (seq))

static void test_keep_behind_asks(void)
{
    static struct tcluster C;
    setenv("RDKV_TEST_FAULT", "query-slow@1", 1); /* node 1 answers queries past the timeout */
    const char *extra[] = {"--lease", "2s", "--indoubt-after", "1s", NULL};
    REQUIRE(tc_start(&C, 3, extra) == 0);
    setenv("RDKV_TEST_FAULT", "", 1);
    rdkv_session *s = NULL;
    REQUIRE(tc_connect(&C, 0, NULL, &s) == 0);
    struct node *n1 = rdkv_node_server(C.node[1]), *n2 = rdkv_node_server(C.node[2]);
    struct store *st2 = txn_env_store(node_txn(n2));
    /* node 1, as a coordinator: holds KEEP_N rows of node 2 exclusively, prepares an update of
     * each there, and decides nothing */
    struct fab_ctx *c1;
    REQUIRE(fab_ctx_create(node_fabric(n1), &c1) == 0);
    struct lock_cfg lc;
    lock_cfg_init(&lc);
    lc.lease_ns = 2 * NS_PER_S;
    struct lock_thread lt;
    REQUIRE(lock_thread_init(&lt, c1, &lc) == 0);
    static struct lock_handle h[KEEP_N];
    char keys[KEEP_N][32];
    unsigned kept = 0;
    for (unsigned i = 0, j = 0; i < KEEP_N; j++) {
        snprintf(keys[i], sizeof keys[i], "keep%u", j);
        if (tc_partition(&C, keys[i], strlen(keys[i])) != 2) continue;
        REQUIRE(tc_put1(s, keys[i], "old", 3) == 0);
        rptr row;
        REQUIRE(store_lookup(st2, keys[i], (uint32_t)strlen(keys[i]), &row) == 0);
        lock_handle_init(&h[i], &lt, lock_algo_find(txn_env_cfg(node_txn(n2))->row_lock), row);
        REQUIRE(lock_acquire(&h[i], LOCK_EXCLUSIVE, clock_now_ns() + 5 * NS_PER_S) == 0);
        struct wop o = {.kind = WOP_UPDATE, .row = row, .lock_tok = lock_token(&h[i]),
                        .key = (const uint8_t *)keys[i], .klen = (uint32_t)strlen(keys[i]),
                        .val = (const uint8_t *)"new", .vlen = 3};
        struct pack_w w;
        pack_w_init(&w);
        txn_wops_pack(&w, FORGED_TXID(1, i + 1), 1, fab_incarnation(node_fabric(n2)), &o, 1);
        REQUIRE(!w.err);
        struct fab_buf resp = {0};
        int rc = fab_rpc_call(c1, 2, TXN_RPC_PREPARE, w.p, w.len, &resp, 5 * NS_PER_S);
        fab_buf_free(&resp);
        pack_w_free(&w);
        CHECK_EQ(rc, 0);
        if (rc == 0) kept++;
        i++;
    }
    fprintf(stderr, "  %u PREPAREs kept at node 2 for node 1, which answers queries late\n", kept);
    /* for 12 s (three leases and more), a waiter on node 0 asks for each row in turn: it must
     * never get one while its transaction is prepared */
    unsigned got = 0, tries = 0;
    int64_t until = clock_now_ns() + 12 * NS_PER_S;
    for (unsigned i = 0; clock_now_ns() < until; i = (i + 1) % KEEP_N) {
        rdkv_txn *t = NULL;
        if (rdkv_txn_begin(s, &t)) continue;
        const void *v;
        size_t vl;
        int rc = rdkv_txn_get_for_update(t, keys[i], strlen(keys[i]), &v, &vl);
        rdkv_txn_abort(t);
        rdkv_txn_free(t);
        tries++;
        if (rc == 0 && got++ < 3)
            fprintf(stderr, "  %s, prepared at node 2, was granted to a waiter %.1f s into the "
                    "wait\n", keys[i], 12.0 - (double)(until - clock_now_ns()) / 1e9);
    }
    fprintf(stderr, "  %u tries; %u granted\n", tries, got);
    CHECK_EQ(got, 0u);
    for (unsigned i = 0; i < KEEP_N; i++)
        if (h[i].mode) lock_release(&h[i]);
    lock_thread_fini(&lt);
    fab_ctx_destroy(c1);
    rdkv_session_close(s);
    tc_stop(&C);
}

/* ------------------------------------------------------------------------------------------ */
/* ckpt_lease: the checkpointer waits for a row lock with the node's lease, not a default one */

/* Waits (bounded) until node's status shows a checkpoint being written (busy 1) or, with
 * busy 0, none being written and more than `after` written in all. */
static bool wait_ckpt(struct launch *L, unsigned node, int busy, long after)
{
    int64_t until = clock_now_ns() + 20 * NS_PER_S;
    while (clock_now_ns() < until) {
        long b = bank_status_num(L, node, "\"checkpoints\":{\"written\":");
        long now = bank_status_num(L, node, "\"busy\":");
        if (now == busy && (busy || b > after)) return true;
        rdkv_sleep_us(5000);
    }
    return false;
}

static void test_ckpt_lease(void)
{
    dirs("rdkv-cf-lease");
    bank_init(&bank, 2);
    struct launch L;
    struct launch_opts lo;
    opts(&lo, 2);
    lo.extra[3] = "10s"; /* --lease: the hold below is far inside it */
    unsigned k = 0;
    while (lo.extra[k]) k++;
    lo.extra[k++] = "--checkpoint-every";
    lo.extra[k++] = "4K";
    lo.extra[k] = NULL;
    char err[512] = "";
    int rc = launch_start(&L, &lo, err, sizeof err);
    if (rc) fprintf(stderr, "  launch: %s\n", err);
    REQUIRE(rc == 0);
    rdkv_session *s0 = NULL, *s1 = NULL;
    REQUIRE(bank_connect(&L, 0, &s0) == 0);
    REQUIRE(bank_connect(&L, 1, &s1) == 0);
    REQUIRE(bank_load(s0) == 0);
    unsigned a = bank_acct_on(&bank, 1, BANK_ACCTS), b = bank_acct_on(&bank, 1, a);
    REQUIRE(a < BANK_ACCTS && b < BANK_ACCTS);
    REQUIRE(wait_ckpt(&L, 1, 0, -1));
    long w0 = bank_status_num(&L, 1, "\"checkpoints\":{\"written\":");
    /* a transaction of node 0 holds account a of node 1 exclusively ... */
    rdkv_txn *t = NULL;
    char ka[32], kb[32];
    bank_acct_key(a, ka, sizeof ka);
    bank_acct_key(b, kb, sizeof kb);
    REQUIRE(rdkv_txn_begin(s0, &t) == 0);
    long va = 0;
    REQUIRE(bank_read_int(t, ka, &va) == 0);
    REQUIRE(bank_put_int(t, ka, va + 1) == 0);
    /* ... while node 1's log grows past --checkpoint-every (updates of account b there), so its
     * checkpointer starts, and waits for account a's lock: far longer than the default lease
     * of 10 ms, far less than the node's */
    unsigned ups = 0;
    int64_t until = clock_now_ns() + 30 * NS_PER_S;
    while (bank_status_num(&L, 1, "\"busy\":") != 1 && clock_now_ns() < until) {
        for (unsigned i = 0; i < 50; i++, ups++) {
            rdkv_txn *u = NULL;
            long vb = 0;
            if (rdkv_txn_begin(s1, &u)) continue;
            if (bank_read_int(u, kb, &vb) || bank_put_int(u, kb, vb) || rdkv_txn_commit(u))
                rdkv_txn_abort(u);
            rdkv_txn_free(u);
        }
    }
    bool waiting = bank_status_num(&L, 1, "\"busy\":") == 1;
    CHECK(waiting);
    rdkv_sleep_us(300000); /* the hold: 300 ms of the checkpointer's wait */
    rc = rdkv_txn_commit(t);
    rdkv_txn_free(t);
    fprintf(stderr, "  node 1's checkpointer waited for a row held by node 0 (after %u updates "
            "there); the holder's commit: %s\n", ups, rdkv_strerror(rc));
    CHECK_EQ(rc, 0);
    CHECK(wait_ckpt(&L, 1, 0, w0)); /* it went on once the lock was free */
    rdkv_txn *r = NULL;
    long got = -1;
    REQUIRE(rdkv_txn_begin(s1, &r) == 0);
    CHECK_EQ(bank_read_int(r, ka, &got), 0);
    rdkv_txn_abort(r);
    rdkv_txn_free(r);
    CHECK_EQ(got, rc == 0 ? va + 1 : va);
    rdkv_session_close(s0);
    rdkv_session_close(s1);
    CHECK_EQ(launch_stop(&L, 10 * NS_PER_S), 0);
    cleanup();
}

static const struct test_case cases[] = {
    {"ckpt_insert", test_ckpt_insert},         {"commit_fail", test_commit_fail},
    {"decision_fail", test_decision_fail},     {"own_commit_fail", test_own_commit_fail},
    {"coord_oom", test_coord_oom},             {"txid_clock", test_txid_clock},
    {"keep_behind_asks", test_keep_behind_asks}, {"ckpt_lease", test_ckpt_lease},
};

int main(int argc, char **argv)
{
    return tenv_main(argc, argv, "commit faults", cases, sizeof cases / sizeof cases[0]);
}
