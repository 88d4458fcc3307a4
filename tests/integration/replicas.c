/* Replicated commit (docs/replication.md, section 5): three kvserver processes whose replica
 * configuration lives in a ZooKeeper the launcher starts, bank transfers from a session on every
 * node at once, then every copy of every partition compared by the nodes' own checksum
 * (KV_RPC_REPL_DIGEST): a backup holds exactly what its primary holds, and a node that is no
 * replica of a partition holds none of it. */
#include "tests/bank.h"
#include "tests/harness.h"
#include "tests/testenv.h"

#include "common/clock.h"
#include "common/pack.h"
#include "rdkv_status.h"
#include "rdma/fabric.h"
#include "rdma/rpc_types.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 3
#define XFERS 150 /* per thread */

static struct launch L;
static struct bank bank;
static struct bank_xfer ledger[THREADS][XFERS];

static void start(unsigned nodes, unsigned replicas)
{
    struct launch_opts lo;
    launch_opts_init(&lo);
    lo.nodes = nodes;
    lo.transport = tenv_transport;
    lo.arena_size = 128ull << 20;
    lo.replicas = replicas; /* the launcher starts a ZooKeeper in its directory */
    static char dir[256];
    REQUIRE(tenv_mkdtemp(dir, sizeof dir, "rdkv-replicas") == 0);
    lo.dir = dir; /* (kept when a check fails: the nodes' logs) */
    char err[512] = "";
    int rc = launch_start(&L, &lo, err, sizeof err);
    if (rc) fprintf(stderr, "  launch: %s\n", err);
    REQUIRE(rc == 0);
}

struct worker {
    unsigned id;
    unsigned done;
};

static void *xfer_thread(void *arg)
{
    struct worker *w = arg;
    rdkv_session *s = NULL;
    if (bank_connect(&L, w->id % L.n, &s)) return NULL;
    uint64_t x = 0x9e3779b97f4a7c15ull * (w->id + 1);
    for (unsigned i = 0; i < XFERS; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        struct bank_xfer *t = &ledger[w->id][i];
        t->from = (unsigned)(x % BANK_ACCTS);
        t->to = (unsigned)((x >> 20) % BANK_ACCTS);
        if (t->to == t->from) t->to = (t->to + 1) % BANK_ACCTS;
        t->amt = 1 + (unsigned)((x >> 40) % 50);
        bank_transfer(s, w->id * XFERS + i, t);
        w->done = i + 1;
    }
    rdkv_session_close(s);
    return NULL;
}

/* Node's copy of partition p: 0 and its rows and checksum, or the node's status. */
static int digest(unsigned node, unsigned p, uint64_t *rows, uint64_t *sum)
{
    struct fab_opts o;
    fab_opts_init(&o);
    o.cluster = &L.cc;
    o.node = FAB_NODE_CLIENT;
    o.transport = tenv_transport;
    o.connect_timeout_ns = 2 * NS_PER_S;
    struct fabric *f = NULL;
    struct fab_ctx *c = NULL;
    char err[256];
    int rc = fab_open(&o, &f, err, sizeof err);
    if (!rc) rc = fab_ctx_create(f, &c);
    if (!rc) {
        uint8_t req[2];
        pack_put_u16le(req, (uint16_t)p);
        struct fab_buf resp = {0};
        rc = fab_rpc_call(c, (uint16_t)node, KV_RPC_REPL_DIGEST, req, sizeof req, &resp,
                          10 * NS_PER_S);
        if (!rc && resp.len != 16) rc = RDKV_EPROTO;
        if (!rc) {
            *rows = pack_get_u64le(resp.data);
            *sum = pack_get_u64le((const uint8_t *)resp.data + 8);
        }
        fab_buf_free(&resp);
    }
    if (c) fab_ctx_destroy(c);
    if (f) fab_close(f);
    return rc;
}

static void run_bank(void)
{
    bank_init(&bank, L.n);
    rdkv_session *s = NULL;
    REQUIRE(bank_connect(&L, 0, &s) == 0);
    REQUIRE(bank_load(s) == 0);
    pthread_t th[THREADS];
    struct worker w[THREADS];
    memset(ledger, 0, sizeof ledger);
    for (unsigned i = 0; i < THREADS; i++) {
        w[i] = (struct worker){i, 0};
        REQUIRE(pthread_create(&th[i], NULL, xfer_thread, &w[i]) == 0);
    }
    for (unsigned i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    unsigned acked = 0;
    for (unsigned i = 0; i < THREADS; i++)
        for (unsigned k = 0; k < XFERS; k++) acked += ledger[i][k].state == BANK_ACKED;
    printf("  %u of %u transfers acknowledged\n", acked, THREADS * XFERS);
    CHECK(acked > THREADS * XFERS / 2);
    unsigned committed = bank_check(&bank, s, &ledger[0][0], THREADS * XFERS, NULL);
    CHECK(committed >= acked);
    rdkv_session_close(s);
}

/* Every node's copy of every partition: equal where the configuration puts one, none elsewhere
 * (holds(p, n): node n is a replica of partition p). */
static void compare_copies(unsigned replicas)
{
    for (unsigned p = 0; p < L.n; p++) {
        uint64_t rows0 = 0, sum0 = 0;
        REQUIRE(digest(p, p, &rows0, &sum0) == 0); /* the primary's (node p, epoch 1) */
        CHECK(rows0 > 0);
        printf("  partition %u: %llu rows, checksum %016llx\n", p, (unsigned long long)rows0,
               (unsigned long long)sum0);
        for (unsigned k = 1; k < L.n; k++) {
            unsigned n = (p + k) % L.n;
            uint64_t rows = 0, sum = 0;
            int rc = digest(n, p, &rows, &sum);
            if (k < replicas) {
                CHECK_EQ(rc, 0);
                CHECK_EQ(rows, rows0);
                CHECK(sum == sum0);
            } else {
                CHECK_EQ(rc, RDKV_ENOTFOUND);
            }
        }
    }
}

static void stop(void)
{
    CHECK_EQ(launch_stop(&L, 10 * NS_PER_S), 0);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", L.dir);
    if (harness_failures) fprintf(stderr, "  kept %s\n", L.dir);
    else CHECK(system(cmd) == 0);
}

static void t_three_copies(void)
{
    start(3, 3);
    run_bank();
    compare_copies(3);
    stop();
}

static void t_two_of_three(void)
{
    start(3, 2);
    run_bank();
    compare_copies(2);
    stop();
}

int main(int argc, char **argv)
{
    if (access("/usr/share/java/zookeeper.jar", R_OK)) {
        printf("SKIPPED: ZooKeeper is not installed (apt-get install zookeeper)\n");
        return 77;
    }
    static const struct test_case cases[] = {
        {"three_copies", t_three_copies},
        {"two_of_three", t_two_of_three},
    };
    return tenv_main(argc, argv, "replicas", cases, sizeof cases / sizeof *cases);
}
