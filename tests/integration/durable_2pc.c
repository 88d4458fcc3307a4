/* Logged two-phase commit through kill -9 (issue 18): a 3-node cluster, each node with its own
 * data directory, runs bank transfers between accounts on different nodes from remote sessions;
 * every transfer also writes a marker key of its own, so that after a crash the test knows which
 * transfers committed, and a client-side ledger knows which were acknowledged. After each crash
 * and restart: every acknowledged transfer's marker is there, every account's balance is exactly
 * what the committed transfers (by their markers) make it -- so no transfer is partly applied --
 * and the bank total holds.
 *   1. kill -9 of a participant between transfers, restart: nothing acknowledged is lost.
 *   2. the coordinator _exits right after its commit DECISION is durable (test hook
 *      RDKV_TEST_FAULT=decision-exit@0): the participants keep the transaction prepared; its rows
 *      cannot be read meanwhile (a read waits and gives up, never the old value); once the
 *      coordinator is restarted it delivers the commit and the transfer is applied everywhere.
 *   3. a participant _exits right after its PREPARE is durable (prepare-exit@2): the coordinator
 *      aborts; the restarted participant finds the PREPARE in doubt, asks, is told "unknown"
 *      (presumed abort) and drops it: the transfer is absent and its rows are free again.
 *   4. a participant _exits when the COMMIT reaches it, before its COMMIT record
 *      (commit-exit@1): restarted, it re-establishes the transaction in doubt with its rows
 *      locked, asks, is told "committed" and commits it; a second restart replays it and finds
 *      nothing in doubt. */
#include "tests/harness.h"
#include "tests/testenv.h"

#include "common/clock.h"
#include "rdkv.h"
#include "tools/launcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACCTS 12
#define XFERS 64
#define START 1000

static char top[256], data[300], cdir[300];

struct xfer {
    unsigned from, to, amt;
    int state; /* 0 not run, 1 acknowledged, 2 unknown (no answer), 3 failed cleanly */
};
static struct xfer xs[XFERS];
static unsigned nx;
static unsigned where[ACCTS]; /* the node of each account */

static void opts(struct launch_opts *lo)
{
    launch_opts_init(lo);
    lo->nodes = 3;
    lo->bindir = tenv_bindir;
    lo->transport = tenv_transport;
    lo->arena_size = 64ull << 20;
    lo->dir = cdir;
    lo->extra[0] = "--data-dir";
    lo->extra[1] = data;
    /* the dead coordinator's row locks are reset by waiters two leases after it died (the
     * default 10 s lease would make that 20 s) */
    lo->extra[2] = "--lease";
    lo->extra[3] = "2s";
    lo->extra[4] = "--init"; /* (a restart finds its data: --init changes nothing then) */
    lo->extra[5] = NULL;
}

static int connect_to(struct launch *L, unsigned node, rdkv_session **s)
{
    char ep[64], secret[PATH_MAX + 40];
    snprintf(ep, sizeof ep, "127.0.0.1:%u", L->cc.nodes[node].port);
    snprintf(secret, sizeof secret, "%s/%s", L->dir, LAUNCH_CLIENT_SECRET);
    setenv("RDKV_SECRET_FILE", secret, 1);
    return rdkv_connect(ep, NULL, s);
}

static void acct_key(unsigned a, char *k, size_t cap) { snprintf(k, cap, "acct%u", a); }
static void mark_key(unsigned i, char *k, size_t cap) { snprintf(k, cap, "xfer%u", i); }

static int read_int(rdkv_txn *t, const char *k, long *out)
{
    const void *v;
    size_t vl;
    int rc = rdkv_txn_get_for_update(t, k, strlen(k), &v, &vl);
    if (rc) return rc;
    char buf[32];
    if (vl >= sizeof buf) return RDKV_EPROTO;
    memcpy(buf, v, vl);
    buf[vl] = 0;
    *out = strtol(buf, NULL, 10);
    return 0;
}

static int put_int(rdkv_txn *t, const char *k, long v)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld", v);
    return rdkv_txn_put(t, k, strlen(k), buf, (size_t)n);
}

/* One transfer from session s; records its outcome. */
static int transfer(rdkv_session *s, unsigned from, unsigned to, unsigned amt)
{
    CHECK(nx < XFERS);
    if (nx >= XFERS) return RDKV_EINVAL;
    struct xfer *x = &xs[nx];
    *x = (struct xfer){from, to, amt, 0};
    char ka[32], kb[32], km[32];
    acct_key(from, ka, sizeof ka);
    acct_key(to, kb, sizeof kb);
    mark_key(nx, km, sizeof km);
    nx++;
    int rc = 0;
    /* conflicts, and a peer not reconnected yet after a restart, are retried (bounded) */
    for (int attempt = 0; attempt < 30; attempt++) {
        if (attempt && rc == RDKV_EUNAVAILABLE) rdkv_sleep_us(100000);
        rdkv_txn *t = NULL;
        rc = rdkv_txn_begin(s, &t);
        if (rc) break;
        long a = 0, b = 0;
        rc = read_int(t, ka, &a);
        if (!rc) rc = read_int(t, kb, &b);
        if (!rc) rc = put_int(t, ka, a - (long)amt);
        if (!rc) rc = put_int(t, kb, b + (long)amt);
        if (!rc) rc = rdkv_txn_put(t, km, strlen(km), "1", 1);
        if (rc) {
            rdkv_txn_abort(t);
            rdkv_txn_free(t);
            if (rc == RDKV_EABORTED || rc == RDKV_EUNAVAILABLE) continue;
            break;
        }
        rc = rdkv_txn_commit(t);
        rdkv_txn_free(t);
        if (rc != RDKV_EABORTED && rc != RDKV_EUNAVAILABLE) break;
    }
    x->state = rc == 0 ? 1 : (rc == RDKV_EABORTED || rc == RDKV_EUNAVAILABLE) ? 3 : 2;
    return rc;
}

/* Reads every account and marker from s (retrying lock conflicts a bounded number of times)
 * and checks the invariants. Returns the number of transfers found committed. */
static unsigned check_bank(rdkv_session *s)
{
    bool present[XFERS] = {false};
    long bal[ACCTS];
    for (int attempt = 0;; attempt++) {
        CHECK(attempt < 100); /* (locked rows are freed within a lease, 10 s) */
        rdkv_txn *t = NULL;
        if (attempt >= 100 || rdkv_txn_begin(s, &t)) return 0;
        int rc = 0;
        char k[32];
        for (unsigned a = 0; a < ACCTS && !rc; a++) {
            acct_key(a, k, sizeof k);
            rc = read_int(t, k, &bal[a]);
            if (rc && rc != RDKV_EABORTED && attempt % 20 == 0)
                fprintf(stderr, "  reading %s (node %u): %s\n", k, where[a], rdkv_strerror(rc));
        }
        for (unsigned i = 0; i < nx && !rc; i++) {
            mark_key(i, k, sizeof k);
            const void *v;
            size_t vl;
            int r = rdkv_txn_get(t, k, strlen(k), &v, &vl);
            if (r == 0) present[i] = true;
            else if (r == RDKV_ENOTFOUND) present[i] = false;
            else rc = r;
        }
        if (!rc) rc = rdkv_txn_commit(t);
        else rdkv_txn_abort(t);
        rdkv_txn_free(t);
        if (rc == 0) break;
        rdkv_sleep_us(50000);
    }
    long want[ACCTS], total = 0;
    unsigned committed = 0;
    for (unsigned a = 0; a < ACCTS; a++) want[a] = START;
    for (unsigned i = 0; i < nx; i++) {
        if (xs[i].state == 1) CHECK(present[i]); /* acknowledged: there */
        if (xs[i].state == 3) CHECK(!present[i]); /* failed cleanly: not there */
        if (!present[i]) continue;
        committed++;
        want[xs[i].from] -= xs[i].amt;
        want[xs[i].to] += xs[i].amt;
    }
    for (unsigned a = 0; a < ACCTS; a++) {
        if (bal[a] != want[a])
            fprintf(stderr, "  acct%u (node %u): %ld, the committed transfers make it %ld\n", a,
                    where[a], bal[a], want[a]);
        CHECK_EQ(bal[a], want[a]); /* no transfer partly applied */
        total += bal[a];
    }
    CHECK_EQ(total, (long)ACCTS * START);
    return committed;
}

/* Whether the replay line of node i's log (its last start) says what we expect. */
static bool log_says(struct launch *L, unsigned node, const char *what)
{
    char p[PATH_MAX + 32], line[1024];
    snprintf(p, sizeof p, "%s/node-%u.log", L->dir, node);
    FILE *f = fopen(p, "r");
    bool found = false;
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, what)) found = true;
    if (f) fclose(f);
    return found;
}

/* An account on node n (other than skip), or ACCTS. */
static unsigned acct_on(unsigned n, unsigned skip)
{
    for (unsigned a = 0; a < ACCTS; a++)
        if (where[a] == n && a != skip) return a;
    return ACCTS;
}

static void restart(struct launch *L, const struct launch_opts *lo, unsigned node)
{
    char err[512] = "";
    int rc = launch_restart(L, lo, node, err, sizeof err);
    if (rc) fprintf(stderr, "  restart of node %u: %s\n", node, err);
    REQUIRE(rc == 0);
}

/* Kills node (kill -9) and starts it again armed with a test hook (RDKV_TEST_FAULT, which
 * only that start sees); then runs one transfer that the hook makes die, and starts the node
 * again clean (launch_kill reaps the process the hook ended). *idx: the transfer's index. */
static void crash_in_transfer(struct launch *L, const struct launch_opts *lo, unsigned node,
                              const char *hook, rdkv_session *s, unsigned from, unsigned to,
                              unsigned amt, unsigned *idx)
{
    REQUIRE(launch_kill(L, node) == 0);
    setenv("RDKV_TEST_FAULT", hook, 1);
    restart(L, lo, node);
    unsetenv("RDKV_TEST_FAULT");
    *idx = nx;
    CHECK(transfer(s, from, to, amt) != 0); /* (no answer from the node the hook ended) */
    REQUIRE(launch_kill(L, node) == 0);
    restart(L, lo, node);
}

static void test_logged_2pc(void)
{
    REQUIRE(tenv_mkdtemp(top, sizeof top, "rdkv-d2pc") == 0);
    snprintf(data, sizeof data, "%s/data-%%N", top);
    snprintf(cdir, sizeof cdir, "%s/cluster", top);
    unsetenv("RDKV_TEST_FAULT");
    for (unsigned a = 0; a < ACCTS; a++) {
        char k[32];
        acct_key(a, k, sizeof k);
        where[a] = rdkv_key_partition(k, strlen(k), 3);
    }
    struct launch L;
    struct launch_opts lo;
    opts(&lo);
    char err[512] = "";
    int rc = launch_start(&L, &lo, err, sizeof err);
    if (rc) fprintf(stderr, "  launch: %s\n", err);
    REQUIRE(rc == 0);
    rdkv_session *s0 = NULL;
    REQUIRE(connect_to(&L, 0, &s0) == 0);
    for (unsigned a = 0; a < ACCTS; a++) {
        char k[32], v[32];
        acct_key(a, k, sizeof k);
        int n = snprintf(v, sizeof v, "%d", START);
        REQUIRE(rdkv_put(s0, k, strlen(k), v, (size_t)n) == 0);
    }
    unsigned a1 = acct_on(1, ACCTS), b1 = acct_on(1, a1), a2 = acct_on(2, ACCTS),
             b2 = acct_on(2, a2), a0 = acct_on(0, ACCTS);
    REQUIRE(a1 < ACCTS && b1 < ACCTS && a2 < ACCTS && b2 < ACCTS && a0 < ACCTS);

    /* 1. transfers across nodes 1 and 2 (and 0), coordinated by node 0; kill -9 of node 1 */
    for (unsigned i = 0; i < 16; i++) {
        unsigned from = i % 2 ? a1 : a2, to = i % 3 ? b2 : (i % 2 ? a0 : b1);
        CHECK_EQ(transfer(s0, from, to, 1 + i), 0);
    }
    REQUIRE(launch_kill(&L, 1) == 0);
    restart(&L, &lo, 1);
    CHECK(log_says(&L, 1, "in-doubt transactions"));
    unsigned c1 = check_bank(s0);
    CHECK_EQ(c1, 16u);

    /* 2. the coordinator dies right after its DECISION is durable */
    rdkv_session_close(s0);
    s0 = NULL;
    REQUIRE(launch_kill(&L, 0) == 0);
    setenv("RDKV_TEST_FAULT", "decision-exit@0", 1);
    restart(&L, &lo, 0);
    unsetenv("RDKV_TEST_FAULT");
    REQUIRE(connect_to(&L, 0, &s0) == 0);
    unsigned doomed = nx;
    rc = transfer(s0, a1, a2, 7); /* node 0 exits after the decision: no answer */
    CHECK(rc != 0);
    rdkv_session_close(s0);
    s0 = NULL;
    /* its rows stay locked on the participants: a read waits and gives up, never the old
     * value (bounded: three tries, each ending at the lock timeout) */
    rdkv_session *s1 = NULL;
    REQUIRE(connect_to(&L, 1, &s1) == 0);
    unsigned blocked = 0;
    for (int i = 0; i < 3; i++) {
        rdkv_txn *t = NULL;
        REQUIRE(rdkv_txn_begin(s1, &t) == 0);
        char k[32];
        acct_key(a1, k, sizeof k);
        long v = 0;
        int r = read_int(t, k, &v);
        rdkv_txn_abort(t);
        rdkv_txn_free(t);
        CHECK(r != 0); /* never a value: the old one would be wrong, the new one is not decided
                          here yet */
        if (r != 0) blocked++;
    }
    CHECK_EQ(blocked, 3u);
    /* the coordinator comes back and delivers its decision */
    /* (it exited on its own; launch_kill reaps it) */
    REQUIRE(launch_kill(&L, 0) == 0);
    restart(&L, &lo, 0);
    CHECK(log_says(&L, 0, "1 commit decisions to deliver"));
    REQUIRE(connect_to(&L, 0, &s0) == 0);
    /* (check_bank retries while the rows are still locked: bounded by its attempts) */
    xs[doomed].state = 1; /* it must be there now: decided commit */
    unsigned c2 = check_bank(s0);
    CHECK_EQ(c2, c1 + 1);

    /* 3. a participant dies right after its PREPARE is durable: presumed abort */
    unsigned lost = 0;
    crash_in_transfer(&L, &lo, 2, "prepare-exit@2", s0, a1, b2, 5, &lost);
    CHECK(log_says(&L, 2, "1 in-doubt transactions"));
    xs[lost].state = 3; /* never decided commit: must be absent */
    unsigned c3 = check_bank(s0);
    CHECK_EQ(c3, c2);
    /* 4. a participant dies when the COMMIT reaches it, before its COMMIT record: the
     * restarted participant finds the transfer in doubt, locks its rows, asks, is told
     * "committed" and commits it; a second restart finds nothing in doubt (its COMMIT record
     * names the transaction) and replays it */
    unsigned late = 0;
    crash_in_transfer(&L, &lo, 1, "commit-exit@1", s0, a1, a2, 9, &late);
    CHECK(log_says(&L, 1, "1 in-doubt transactions"));
    xs[late].state = 1; /* decided commit: it must be there on every node */
    unsigned c4 = check_bank(s0);
    CHECK_EQ(c4, c3 + 1);
    REQUIRE(launch_kill(&L, 1) == 0);
    restart(&L, &lo, 1);
    CHECK(log_says(&L, 1, "0 in-doubt transactions, 0 commit"));
    CHECK_EQ(check_bank(s0), c4);
    c3 = c4;

    /* and the cluster goes on: one more transfer over the three nodes */
    CHECK_EQ(transfer(s0, a2, a0, 3), 0);
    CHECK_EQ(check_bank(s0), c3 + 1);

    rdkv_session_close(s0);
    rdkv_session_close(s1);
    CHECK_EQ(launch_stop(&L, 10 * NS_PER_S), 0);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
    if (!getenv("RDKV_TEST_KEEP")) CHECK(system(cmd) == 0); /* (kept: to read the nodes' logs) */
}

static const struct test_case cases[] = {
    {"logged_2pc", test_logged_2pc},
};

int main(int argc, char **argv)
{
    return tenv_main(argc, argv, "durable 2pc", cases, sizeof cases / sizeof cases[0]);
}
