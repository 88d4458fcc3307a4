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
 *      (commit-exit@1): the coordinator acknowledges the transfer all the same (its decision is
 *      durable, and the participant voted yes with a durable PREPARE); restarted, the
 *      participant re-establishes the transaction in doubt with its rows locked, asks, is told
 *      "committed" and commits it; a second restart replays it and finds nothing in doubt. */
#include "tests/harness.h"
#include "tests/testenv.h"

#include "common/clock.h"
#include "rdkv.h"
#include "common/rng.h"
#include "tests/bank.h"
#include "tests/txncluster.h"
#include "tests/txnwork.h"
#include "tools/launcher.h"

#include <pthread.h>
#include <stdatomic.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACCTS BANK_ACCTS
#define XFERS 64

static char top[256], data[300], cdir[300];

static struct bank_xfer xs[XFERS];
static unsigned nx;
static struct bank bank; /* the accounts' nodes (the torture runs a fourth node, embedded) */

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

/* One transfer from session s, into the ledger xs. */
static int transfer(rdkv_session *s, unsigned from, unsigned to, unsigned amt)
{
    CHECK(nx < XFERS);
    if (nx >= XFERS) return RDKV_EINVAL;
    xs[nx] = (struct bank_xfer){from, to, amt, BANK_NOT_RUN};
    nx++;
    return bank_transfer(s, nx - 1, &xs[nx - 1]);
}

static unsigned check_bank(rdkv_session *s) { return bank_check(&bank, s, xs, nx, NULL); }

/* Kills node (kill -9) and starts it again armed with a test hook (RDKV_TEST_FAULT, which
 * only that start sees); then runs one transfer that the hook makes die, and starts the node
 * again clean (launch_kill reaps the process the hook ended). *idx: the transfer's index;
 * acked: whether the coordinator acknowledges it all the same (its decision was durable before
 * the participant died), else it fails (no vote came). */
static void crash_in_transfer(struct launch *L, const struct launch_opts *lo, unsigned node,
                              const char *hook, rdkv_session *s, unsigned from, unsigned to,
                              unsigned amt, unsigned *idx, bool acked)
{
    REQUIRE(launch_kill(L, node) == 0);
    setenv("RDKV_TEST_FAULT", hook, 1);
    bank_restart(L, lo, node);
    unsetenv("RDKV_TEST_FAULT");
    *idx = nx;
    int rc = transfer(s, from, to, amt);
    if (acked) CHECK_EQ(rc, 0);
    else CHECK(rc != 0);
    REQUIRE(launch_kill(L, node) == 0);
    bank_restart(L, lo, node);
}

static void test_logged_2pc(void)
{
    REQUIRE(tenv_mkdtemp(top, sizeof top, "rdkv-d2pc") == 0);
    snprintf(data, sizeof data, "%s/data-%%N", top);
    snprintf(cdir, sizeof cdir, "%s/cluster", top);
    unsetenv("RDKV_TEST_FAULT");
    bank_init(&bank, 3);
    struct launch L;
    struct launch_opts lo;
    opts(&lo);
    char err[512] = "";
    int rc = launch_start(&L, &lo, err, sizeof err);
    if (rc) fprintf(stderr, "  launch: %s\n", err);
    REQUIRE(rc == 0);
    rdkv_session *s0 = NULL;
    REQUIRE(bank_connect(&L, 0, &s0) == 0);
    REQUIRE(bank_load(s0) == 0);
    unsigned a1 = bank_acct_on(&bank, 1, ACCTS), b1 = bank_acct_on(&bank, 1, a1), a2 = bank_acct_on(&bank, 2, ACCTS),
             b2 = bank_acct_on(&bank, 2, a2), a0 = bank_acct_on(&bank, 0, ACCTS);
    REQUIRE(a1 < ACCTS && b1 < ACCTS && a2 < ACCTS && b2 < ACCTS && a0 < ACCTS);

    /* 1. transfers across nodes 1 and 2 (and 0), coordinated by node 0; kill -9 of node 1 */
    for (unsigned i = 0; i < 16; i++) {
        unsigned from = i % 2 ? a1 : a2, to = i % 3 ? b2 : (i % 2 ? a0 : b1);
        CHECK_EQ(transfer(s0, from, to, 1 + i), 0);
    }
    REQUIRE(launch_kill(&L, 1) == 0);
    bank_restart(&L, &lo, 1);
    CHECK(bank_log_says(&L, 1, "in-doubt transactions"));
    unsigned c1 = check_bank(s0);
    CHECK_EQ(c1, 16u);

    /* 2. the coordinator dies right after its DECISION is durable */
    rdkv_session_close(s0);
    s0 = NULL;
    REQUIRE(launch_kill(&L, 0) == 0);
    setenv("RDKV_TEST_FAULT", "decision-exit@0", 1);
    bank_restart(&L, &lo, 0);
    unsetenv("RDKV_TEST_FAULT");
    REQUIRE(bank_connect(&L, 0, &s0) == 0);
    unsigned doomed = nx;
    rc = transfer(s0, a1, a2, 7); /* node 0 exits after the decision: no answer */
    CHECK(rc != 0);
    rdkv_session_close(s0);
    s0 = NULL;
    /* its rows stay locked on the participants: a read waits and gives up, never the old
     * value (bounded: three tries, each ending at the lock timeout) */
    rdkv_session *s1 = NULL;
    REQUIRE(bank_connect(&L, 1, &s1) == 0);
    unsigned blocked = 0;
    for (int i = 0; i < 3; i++) {
        rdkv_txn *t = NULL;
        REQUIRE(rdkv_txn_begin(s1, &t) == 0);
        char k[32];
        bank_acct_key(a1, k, sizeof k);
        long v = 0;
        int r = bank_read_int(t, k, &v);
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
    bank_restart(&L, &lo, 0);
    CHECK(bank_log_says(&L, 0, "1 commit decisions to deliver"));
    REQUIRE(bank_connect(&L, 0, &s0) == 0);
    /* (check_bank retries while the rows are still locked: bounded by its attempts) */
    xs[doomed].state = 1; /* it must be there now: decided commit */
    unsigned c2 = check_bank(s0);
    CHECK_EQ(c2, c1 + 1);

    /* 3. a participant dies right after its PREPARE is durable: presumed abort */
    unsigned lost = 0;
    crash_in_transfer(&L, &lo, 2, "prepare-exit@2", s0, a1, b2, 5, &lost, false);
    CHECK(bank_log_says(&L, 2, "1 in-doubt transactions"));
    xs[lost].state = 3; /* never decided commit: must be absent */
    unsigned c3 = check_bank(s0);
    CHECK_EQ(c3, c2);
    /* 4. a participant dies when the COMMIT reaches it, before its COMMIT record: the
     * restarted participant finds the transfer in doubt, locks its rows, asks, is told
     * "committed" and commits it; a second restart finds nothing in doubt (its COMMIT record
     * names the transaction) and replays it */
    unsigned late = 0;
    crash_in_transfer(&L, &lo, 1, "commit-exit@1", s0, a1, a2, 9, &late, true);
    CHECK(bank_log_says(&L, 1, "1 in-doubt transactions"));
    xs[late].state = 1; /* decided commit: it must be there on every node */
    unsigned c4 = check_bank(s0);
    CHECK_EQ(c4, c3 + 1);
    REQUIRE(launch_kill(&L, 1) == 0);
    bank_restart(&L, &lo, 1);
    CHECK(bank_log_says(&L, 1, "0 in-doubt transactions, 0 commit"));
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

/* ------------------------------------------------------------------------------------------ */
/* The crash-restart torture: a workload of bank transfers and register transactions (recorded
 * for histcheck) from embedded and remote sessions -- so every node coordinates and every node
 * takes part -- runs without a stop through every round, while the round kills a node. Fifteen
 * rounds, each on a kvserver node drawn from the printed seed (the victim):
 *   - six rounds of kill -9 at a random moment (a delay drawn from the seed, not a
 *     synchronisation), a restart after another random delay, the workload going on through
 *     both;
 *   - three rounds that restart the victim armed with an exit hook, so that it _exits in an
 *     exact window with other transactions running -- prepare-exit (a participant right after its
 *     PREPARE is durable), commit-exit (a participant when a COMMIT reaches it), decision-exit (a
 *     coordinator right after its DECISION is durable) -- and restart it again;
 *   - a slow disk: the victim restarted with --fault-wal sync-delay:2000 (each fdatasync of its
 *     log 2 ms late), the workload running through it until 20 acknowledged transfers wrote on
 *     it (bounded), then kill -9 in the middle of the workload and a normal restart;
 *   - four rounds of log failures: the victim restarted armed with prepare-fail (its next
 *     PREPARE record as a participant fails to write, ENOSPC), commit-fail (its next participant
 *     COMMIT record), decision-fail (its next DECISION as a coordinator fails to sync, EIO, the
 *     record in the file) and own-commit-fail (as a coordinator, its own share's COMMIT record
 *     after a durable DECISION): the workload reaches the record, the node stops by the
 *     log-failure rule (its log says PANIC, exit status 74; checked) and is restarted clean, to
 *     decide from its log;
 *   - checkpoints while inserts run: the victim restarted checkpointing every 2K of log, on the
 *     slow disk, with install-slow (each commit installs 50 ms after its COMMIT record is
 *     durable: the window of a checkpoint whose replay LSN passes an insert not yet installed,
 *     widened); the transfers' markers (each a new key: an insert) run on until it wrote two
 *     checkpoints (bounded, by its log's lines), then until 8 more acknowledged transfers wrote
 *     on it (those in flight when the second began), then kill -9 with the workload running and
 *     a normal restart, which must load a checkpoint (checked).
 * Every node -- node 3 too -- checkpoints each time its log grew T_CKPT_EVERY (a round writes
 * several times that to each log): so, once a node has written its first (within the first
 * rounds), each of its restarts loads a checkpoint and replays the log behind it, the two-phase
 * commits in doubt carried by the checkpoint's state (the round's line says whether it did),
 * and in every round checkpoints run while prepared transactions hold rows. Log segments are
 * T_LOG_SEGMENT, so each node drops the log behind its older checkpoint as it goes, and its
 * restarts read a log that begins long after LSN 1 (the round's line counts the segments
 * dropped). Each wait is for an observable event (a node's death, a log line, a counter), with a
 * bound; none asserts on timing.
 *
 * After every round, the workload stopped: every acknowledged transfer's marker is there, no
 * cleanly failed one is, the balances are exactly what the committed markers make them (no
 * transfer partly applied; a transfer of unknown outcome counts either way, as a whole), the
 * total holds, every row can be locked again (the dead holders' locks are recovered) and
 * histcheck finds the register history so far serializable, counting RDKV_EUNKNOWN transactions
 * as either outcome. Each transfer attempt is its own ledger entry with its own marker: nothing
 * is retried after a commit failed.
 *
 * The cluster has four nodes: kvserver processes 0..2 (launcher), which the rounds kill, and
 * node 3, which runs in this process (rdkv_node_start, with the kvservers' arguments and a data
 * directory of its own; launch_opts.external) and is never killed: it is the test. One bank and
 * one register thread run on each node -- node 3's on embedded sessions, which take and release
 * its rows' locks with CPU atomics and the others' over the fabric, and coordinate their 2PC in
 * this process -- into the same ledger and history, and the after-round checks read through the
 * victim's remote session and node 3's embedded one in turn. Accounts and registers hash over
 * all four nodes, node 3 included: so node 3's embedded transactions have participants that the
 * rounds kill (at random, and in the participant hooks' windows, which fire at the victim's
 * first PREPARE or COMMIT from whichever coordinator, node 3 too: the round's line says which
 * for the exit hooks; a PANIC of the log's writer names the write or sync that failed, not the
 * transaction), and node 3 is also a participant that outlives the coordinators killed
 * (decision-exit and decision-fail stop a kvserver coordinator: node 3 keeps its share prepared
 * until the restarted one delivers the decision or answers its question), and its rows' locks,
 * held by a killed holder, are recovered for local (embedded) waiters as well as remote ones --
 * which rows on 0..2 only would leave out. docs/transactions.md, "Crash tests". */

#define T_KILLS 6      /* rounds of kill -9 at a random moment */
#define T_HOOKS 3      /* then one round per exit hook */
#define T_SLOWS 1      /* then a round on a slow disk (--fault-wal sync-delay), ended by kill -9 */
#define T_FAILS 4      /* then one round per log-failure hook (the victim PANICs) */
#define T_CKPTS 1      /* then a round of checkpoints while inserts run, ended by kill -9 */
#define T_ROUNDS (T_KILLS + T_HOOKS + T_SLOWS + T_FAILS + T_CKPTS)
#define T_NODES 3      /* kvserver processes 0..2: the rounds' victims */
#define T_EMB 3        /* node 3: embedded in this process, never killed */
#define T_PARTS 4      /* the cluster's nodes, each a partition */
#define T_BANKW 4      /* bank threads, one on each node (node 3's on embedded sessions) */
#define T_REGW 4       /* register threads, one on each node (likewise) */
#define T_PER_ROUND 400 /* transfers one bank thread may start in a round */
#define T_XFERS (T_BANKW * T_PER_ROUND * T_ROUNDS)
/* Every node checkpoints each time its log grew this much (a round's workload writes several
 * times as much to each log), so that every round's restart loads a checkpoint and replays the
 * log behind it; the checkpoint round's victim checkpoints more often still. */
#define T_CKPT_EVERY "8K"
#define T_CKPT_EVERY_VICTIM "2K"
#define T_LOG_SEGMENT "64K"
#define T_SYNC_DELAY "sync-delay:2000" /* a disk whose fdatasyncs take 2 ms */
#define T_SEED_DEFAULT 0x18c4a5b1u

static struct bank_xfer txs[T_XFERS];
static _Atomic unsigned tnx; /* ledger entries reserved */
static unsigned t_round;
static uint64_t t_seed;
static _Atomic bool tstop;
static struct launch *tL;
static struct {
    uint64_t seed, counter, attempts;
    struct tw_hist h;
} regw[T_REGW];
static _Atomic unsigned t_ack, t_unknown, t_failed, t_reg_commits, t_reg_unknown, t_reconnects;
static _Atomic unsigned t_emb_ack, t_emb_unknown, t_emb_failed, t_emb_reg_commits; /* node 3's */
static _Atomic unsigned t_ack_on[T_PARTS]; /* acknowledged transfers that wrote on each node */
static rdkv_node *t_node; /* node 3 */

/* A session on node: remote (to a kvserver), or embedded on node 3. */
static int t_connect(unsigned node, rdkv_session **s)
{
    if (node == T_EMB) return rdkv_session_open(t_node, NULL, s);
    char ep[64];
    snprintf(ep, sizeof ep, "127.0.0.1:%u", tL->cc.nodes[node].port);
    return rdkv_connect(ep, NULL, s); /* (RDKV_SECRET_FILE: set once, before any thread) */
}

/* launch_opts.start_external: node 3 in this process, on the socket the launcher bound for it,
 * with the kvservers' arguments (its own data directory: "%N" is 3), while they wait for it. */
static int t_start_node(struct launch *L, void *arg, char *err, size_t errcap)
{
    const struct launch_opts *lo = arg;
    static char fd[16], exp[LAUNCH_EXTRA_MAX][PATH_MAX];
    const char *args[LAUNCH_EXTRA_MAX + 2] = {"--listen-fd", fd};
    unsigned na = 2;
    snprintf(fd, sizeof fd, "%d", L->ext_fd[0]);
    for (unsigned k = 0; k < LAUNCH_EXTRA_MAX && lo->extra[k]; k++)
        args[na++] = launch_extra_arg(lo->extra[k], T_EMB, exp[k], sizeof exp[k]);
    args[na] = NULL;
    int rc = rdkv_node_start(L->conf, T_EMB, args, 60000, &t_node, err, errcap);
    if (!rc) L->ext_fd[0] = -1; /* the node's now */
    return rc;
}

/* A session on node, retried (with a pause) while the node is down; NULL once stopped. */
static rdkv_session *t_session(unsigned node, bool stoppable)
{
    for (int i = 0; i < 600; i++) {
        rdkv_session *s = NULL;
        if (t_connect(node, &s) == 0) return s;
        if (stoppable && atomic_load(&tstop)) return NULL;
        rdkv_sleep_us(50000);
    }
    return NULL;
}

/* After a failure: pause briefly; after a few in a row the session's node may have been
 * restarted, so the session is replaced. */
static void t_failed_once(rdkv_session **s, unsigned node, unsigned *fails)
{
    rdkv_sleep_us(20000);
    if (++*fails < 3 || node == T_EMB) return; /* (node 3 is never restarted) */
    *fails = 0;
    rdkv_session_close(*s);
    *s = t_session(node, true);
    atomic_fetch_add(&t_reconnects, 1);
}

static void *t_bank(void *arg)
{
    unsigned node = (unsigned)(uintptr_t)arg % T_PARTS; /* (the thread's number: its seed too) */
    uint64_t seed = t_seed ^ ((uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ull) ^
                    ((uint64_t)t_round << 32);
    rdkv_session *s = t_session(node, true);
    unsigned fails = 0;
    for (unsigned k = 0; k < T_PER_ROUND && s && !atomic_load(&tstop); k++) {
        unsigned i = atomic_fetch_add(&tnx, 1);
        if (i >= T_XFERS) break;
        unsigned from = (unsigned)rng_below(&seed, ACCTS);
        unsigned to = (from + 1 + (unsigned)rng_below(&seed, ACCTS - 1)) % ACCTS;
        struct bank_xfer *x = &txs[i];
        *x = (struct bank_xfer){from, to, 1 + (unsigned)rng_below(&seed, 9), BANK_FAILED};
        char ka[32], kb[32], km[32];
        bank_acct_key(from, ka, sizeof ka);
        bank_acct_key(to, kb, sizeof kb);
        bank_mark_key(i, km, sizeof km);
        rdkv_txn *t = NULL;
        int rc = rdkv_txn_begin(s, &t);
        if (rc) {
            t_failed_once(&s, node, &fails);
            continue; /* (state 3: nothing was written) */
        }
        long a = 0, b = 0;
        rc = bank_read_int(t, ka, &a);
        if (!rc) rc = bank_read_int(t, kb, &b);
        if (!rc) rc = bank_put_int(t, ka, a - (long)x->amt);
        if (!rc) rc = bank_put_int(t, kb, b + (long)x->amt);
        if (!rc) rc = rdkv_txn_put(t, km, strlen(km), "1", 1);
        bool committing = !rc;
        if (committing) rc = rdkv_txn_commit(t);
        else rdkv_txn_abort(t);
        rdkv_txn_free(t);
        /* rdkv.h: 0 committed, RDKV_EUNKNOWN either, any other status nothing happened */
        x->state = rc == 0 ? 1 : (committing && rc == RDKV_EUNKNOWN) ? 2 : 3;
        atomic_fetch_add(rc == 0 ? &t_ack : x->state == 2 ? &t_unknown : &t_failed, 1);
        if (rc == 0) {
            unsigned pa = rdkv_key_partition(ka, strlen(ka), T_PARTS),
                     pb = rdkv_key_partition(kb, strlen(kb), T_PARTS),
                     pm = rdkv_key_partition(km, strlen(km), T_PARTS);
            atomic_fetch_add(&t_ack_on[pa], 1);
            if (pb != pa) atomic_fetch_add(&t_ack_on[pb], 1);
            if (pm != pa && pm != pb) atomic_fetch_add(&t_ack_on[pm], 1);
        }
        if (node == T_EMB)
            atomic_fetch_add(rc == 0 ? &t_emb_ack : x->state == 2 ? &t_emb_unknown : &t_emb_failed, 1);
        if (rc == 0) fails = 0;
        else if (rc != RDKV_EABORTED) t_failed_once(&s, node, &fails);
    }
    if (s) rdkv_session_close(s);
    return NULL;
}

static void *t_reg(void *arg)
{
    unsigned w = (unsigned)(uintptr_t)arg, node = w % T_PARTS;
    rdkv_session *s = t_session(node, true);
    unsigned fails = 0;
    for (unsigned k = 0; k < T_PER_ROUND && s && !atomic_load(&tstop); k++) {
        rdkv_txn *t = NULL;
        if (rdkv_txn_begin(s, &t)) {
            t_failed_once(&s, node, &fails);
            continue;
        }
        struct hist_op ops[TW_MAXOPS];
        uint32_t nops = 0;
        struct tw_reg_did did;
        int rc = tw_reg_attempt(t, (int)w, &regw[w].seed, &regw[w].counter, ops, &nops, &did);
        rdkv_txn_abort(t); /* (after a failure before the commit; nothing on an ended one) */
        rdkv_txn_free(t);
        uint8_t st = rc == 0 ? HIST_COMMITTED : rc == RDKV_EUNKNOWN ? HIST_UNKNOWN : HIST_ABORTED;
        if (!tw_hist_add(&regw[w].h, tw_uid((int)w, ++regw[w].attempts), st, ops, nops)) break;
        if (rc == 0) atomic_fetch_add(&t_reg_commits, 1);
        if (rc == 0 && node == T_EMB) atomic_fetch_add(&t_emb_reg_commits, 1);
        if (rc == RDKV_EUNKNOWN) atomic_fetch_add(&t_reg_unknown, 1);
        if (rc == 0) fails = 0;
        else if (rc != RDKV_EABORTED) t_failed_once(&s, node, &fails);
    }
    if (s) rdkv_session_close(s);
    return NULL;
}

static pthread_t t_threads[T_BANKW + T_REGW];

static void t_start(void)
{
    atomic_store(&tstop, false);
    for (uintptr_t i = 0; i < T_BANKW; i++)
        REQUIRE(pthread_create(&t_threads[i], NULL, t_bank, (void *)i) == 0);
    for (uintptr_t i = 0; i < T_REGW; i++)
        REQUIRE(pthread_create(&t_threads[T_BANKW + i], NULL, t_reg, (void *)i) == 0);
}

static void t_join(void)
{
    atomic_store(&tstop, true);
    for (unsigned i = 0; i < T_BANKW + T_REGW; i++) pthread_join(t_threads[i], NULL);
}


/* Waits (bounded) until every account and register can be locked exclusively from a session on
 * its own node and from one on another node: the locks that dead holders (a killed
 * coordinator's, a transaction of a killed participant's old life) left are recovered, for local
 * and remote waiters alike. Each row has its own thread: a dead lock is recovered by its waiters
 * two leases after they began to wait (locks/rwlock.c), so rows waited for one after the other
 * would take two leases each. Returns how long it took, or a negative value when a row stayed
 * locked. */
#define T_ROWS (ACCTS + TW_NREG)
struct t_row {
    pthread_t thr;
    unsigned i;
    int64_t deadline;
    int rc;
    unsigned via;
    int64_t took; /* the longer pass */
    unsigned took_via;
    int waited; /* the status that pass met last before the lock was free (0: none) */
};

static void *t_settle_row(void *arg)
{
    struct t_row *r = arg;
    char k[32];
    if (r->i < ACCTS) bank_acct_key(r->i, k, sizeof k);
    else tw_reg_key(k, r->i - ACCTS);
    unsigned n = rdkv_key_partition(k, strlen(k), T_PARTS);
    r->rc = 0;
    for (unsigned pass = 0; pass < 2 && !r->rc; pass++) {
        r->via = pass == 0 ? n : (n + 1) % T_PARTS; /* (node 2's rows: from node 3, embedded) */
        int64_t p0 = clock_now_ns();
        int waited = 0;
        rdkv_session *s = t_session(r->via, false);
        r->rc = s ? -1 : RDKV_EUNAVAILABLE;
        while (s && r->rc && clock_now_ns() < r->deadline) {
            if (r->rc != -1) waited = r->rc;
            rdkv_txn *t = NULL;
            r->rc = rdkv_txn_begin(s, &t);
            long v;
            uint64_t u;
            if (!r->rc) r->rc = r->i < ACCTS ? bank_read_int(t, k, &v) : tw_reg_read(t, r->i - ACCTS, true, &u);
            if (t) {
                if (!r->rc) r->rc = rdkv_txn_commit(t);
                else rdkv_txn_abort(t);
                rdkv_txn_free(t);
            }
            if (r->rc) rdkv_sleep_us(20000);
        }
        if (s) rdkv_session_close(s);
        if (clock_now_ns() - p0 >= r->took) {
            r->took = clock_now_ns() - p0;
            r->took_via = r->via;
            r->waited = waited;
        }
    }
    return NULL;
}

static double t_settle(void)
{
    static struct t_row rows[T_ROWS];
    int64_t t0 = clock_now_ns();
    for (unsigned i = 0; i < T_ROWS; i++) {
        rows[i] = (struct t_row){.i = i, .deadline = t0 + 60 * NS_PER_S};
        if (pthread_create(&rows[i].thr, NULL, t_settle_row, &rows[i])) {
            rows[i].rc = RDKV_ENOMEM;
            t_settle_row(&rows[i]); /* (in line, then) */
            rows[i].thr = 0;
        }
    }
    bool ok = true;
    unsigned slow = 0;
    for (unsigned i = 0; i < T_ROWS; i++) {
        if (rows[i].thr) pthread_join(rows[i].thr, NULL);
        if (rows[i].took > rows[slow].took) slow = i;
        if (!rows[i].rc) continue;
        char k[32];
        if (i < ACCTS) bank_acct_key(i, k, sizeof k);
        else tw_reg_key(k, i - ACCTS);
        fprintf(stderr, "  %s (node %u) stays locked to a session on node %u: %s\n", k,
                rdkv_key_partition(k, strlen(k), T_PARTS), rows[i].via, rdkv_strerror(rows[i].rc));
        ok = false;
    }
    char k[32]; /* (what the slowest row waited for: a diagnosis, never a verdict) */
    if (slow < ACCTS) bank_acct_key(slow, k, sizeof k);
    else tw_reg_key(k, slow - ACCTS);
    fprintf(stderr, "  the slowest row: %s (node %u), free to a session on node %u after %.1f s "
            "(it met %s)\n", k, rdkv_key_partition(k, strlen(k), T_PARTS), rows[slow].took_via,
            (double)rows[slow].took / 1e9, rows[slow].waited ? rdkv_strerror(rows[slow].waited) : "nothing");
    return ok ? (double)(clock_now_ns() - t0) / 1e9 : -1;
}

/* histcheck over every register attempt so far and a final committed read of every register. */
/* The final read of every register, for the checker (tw_run_until's body; arg: the ops). */
static int read_all_regs(rdkv_txn *t, void *arg)
{
    struct hist_op *fin = arg;
    int rc = 0;
    for (unsigned r = 0; r < TW_NREG && !rc; r++) {
        fin[r] = (struct hist_op){HIST_READ, r, 0};
        rc = tw_reg_read(t, r, true, &fin[r].value);
    }
    return rc;
}

static void t_histcheck(rdkv_session *s, unsigned round)
{
    size_t n = 1;
    for (unsigned i = 0; i < T_REGW; i++) n += regw[i].h.n;
    struct hist_txn *all = calloc(n, sizeof *all);
    struct hist_op fin[TW_NREG];
    REQUIRE(all);
    size_t k = 0;
    for (unsigned i = 0; i < T_REGW; i++) k += tw_hist_append(all + k, &regw[i].h);
    int rc = tw_run_until(s, clock_now_ns() + 30 * NS_PER_S, read_all_regs, fin);
    CHECK_EQ(rc, 0);
    if (rc) {
        free(all);
        return;
    }
    all[k++] = (struct hist_txn){UINT64_MAX, HIST_COMMITTED, TW_NREG, fin};
    struct histcheck_report rep;
    memset(&rep, 0, sizeof rep);
    rc = histcheck_run(all, k, TW_NREG, &rep);
    char what[64];
    snprintf(what, sizeof what, "  round %u histcheck", round);
    if (rc) tw_report_print(what, rc, &rep);
    CHECK_EQ(rc, 0);
    CHECK_EQ(tw_report_anomalies(&rep), 0u);
    if (!rc) fprintf(stderr, "  round %u: histcheck over %zu register txns (%llu checked, %llu unknown "
            "counted committed, %llu dropped): serializable\n", round, k,
            (unsigned long long)rep.txns_checked, (unsigned long long)rep.unknown_promoted,
            (unsigned long long)rep.unknown_dropped);
    free(all);
}

/* The last line of node's log (all its starts) that contains what, into line (false: none). */
static bool t_log_last(struct launch *L, unsigned node, const char *what, char *line, size_t cap)
{
    char p[PATH_MAX + 32], buf[1024];
    snprintf(p, sizeof p, "%s/node-%u.log", L->dir, node);
    FILE *f = fopen(p, "r");
    bool found = false;
    while (f && fgets(buf, sizeof buf, f))
        if (strstr(buf, what)) {
            snprintf(line, cap, "%s", buf);
            line[strcspn(line, "\n")] = 0;
            found = true;
        }
    if (f) fclose(f);
    return found;
}

/* How many lines of node's log (all its starts) contain what, and also (if not NULL) and_what. */
static unsigned t_log_count(struct launch *L, unsigned node, const char *what, const char *and_what)
{
    char p[PATH_MAX + 32], line[1024];
    snprintf(p, sizeof p, "%s/node-%u.log", L->dir, node);
    FILE *f = fopen(p, "r");
    unsigned n = 0;
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, what) && (!and_what || strstr(line, and_what))) n++;
    if (f) fclose(f);
    return n;
}

/* The checkpoints node wrote, by its log ("kvserver: checkpoint PATH: N rows in S s ..."; a
 * start that loads one says "rows loaded in"). */
static unsigned t_ckpts(struct launch *L, unsigned node)
{
    return t_log_count(L, node, "kvserver: checkpoint ", " rows in ");
}

/* The log segments node dropped behind its checkpoints, by its log ("...; K log segment(s)
 * dropped"). */
static unsigned t_dropped(struct launch *L, unsigned node)
{
    char p[PATH_MAX + 32], line[1024];
    snprintf(p, sizeof p, "%s/node-%u.log", L->dir, node);
    FILE *f = fopen(p, "r");
    unsigned n = 0;
    while (f && fgets(line, sizeof line, f)) {
        const char *at = strstr(line, " log segment(s) dropped");
        if (!strstr(line, "kvserver: checkpoint ") || !at) continue;
        while (at > line && at[-1] >= '0' && at[-1] <= '9') at--;
        n += (unsigned)strtoul(at, NULL, 10);
    }
    if (f) fclose(f);
    return n;
}

/* The coordinator of the transaction whose hook made node die, from its log's last "test hook:
 * exiting ... txn X" line, or from its last PANIC line when that names the transaction (a
 * transaction id names its coordinator in its top 16 bits, txn/txn.c); -1: not known (a PANIC of
 * the log's writer names the write or sync that failed, not a transaction). */
static int t_hook_coordinator(struct launch *L, unsigned node, bool panic)
{
    char line[1024];
    if (!t_log_last(L, node, panic ? "kvserver: PANIC:" : "test hook: exiting", line, sizeof line))
        return -1;
    const char *t = strstr(line, " txn ");
    return t ? (int)(strtoull(t + 5, NULL, 16) >> 48) : -1;
}

/* Kills node (kill -9; or reaps it, when it ended itself) and starts it again with lo, armed with
 * the test hook fault (RDKV_TEST_FAULT=fault@node; NULL: none), which only this start sees.
 * A hook may make it die before it is reported ready (the workload runs on): that is no
 * failure here, when the log's last line says so. */
static void t_restart_armed(struct launch *L, const struct launch_opts *lo, unsigned node,
                            const char *fault)
{
    if (launch_alive(L, node)) REQUIRE(launch_kill(L, node) == 0); /* (a dead one is reaped) */
    char f[64], err[512] = "";
    snprintf(f, sizeof f, "%s@%u", fault ? fault : "", node);
    setenv("RDKV_TEST_FAULT", fault ? f : "", 1);
    int rc = launch_restart(L, lo, node, err, sizeof err);
    setenv("RDKV_TEST_FAULT", "", 1); /* (no hook; see test_torture) */
    bool died = rc && fault && (strstr(err, "test hook") || strstr(err, "PANIC"));
    if (rc && !died) fprintf(stderr, "  restart of node %u: %s\n", node, err);
    REQUIRE(rc == 0 || died);
}

/* lo with more kvserver arguments after its own (NULL-terminated), into *out. */
static void t_opts_plus(const struct launch_opts *lo, struct launch_opts *out, const char *const *more)
{
    *out = *lo;
    unsigned k = 0;
    while (out->extra[k]) k++;
    for (; *more; more++) {
        REQUIRE(k + 1 < sizeof out->extra / sizeof out->extra[0]);
        out->extra[k++] = *more;
    }
    out->extra[k] = NULL;
}

/* Waits (bounded) until n more acknowledged transfers wrote on node than *since says; true
 * when they did. (An observation: how long it takes says nothing.) */
static bool t_wait_acked_on(unsigned node, unsigned since, unsigned n, int64_t bound_ns)
{
    int64_t until = clock_now_ns() + bound_ns;
    while (atomic_load(&t_ack_on[node]) - since < n && clock_now_ns() < until) rdkv_sleep_us(10000);
    return atomic_load(&t_ack_on[node]) - since >= n;
}

/* The hook round's victim: a participant for prepare-exit, commit-exit, prepare-fail and
 * commit-fail (any node takes part, and the hook takes the first transaction that reaches it, of
 * whichever coordinator), a coordinator for decision-exit, decision-fail and own-commit-fail
 * (every node coordinates its bank thread's transfers, and most have a write of its own). The
 * -exit hooks _exit(9) in their window; the -fail hooks make the victim's redo log fail a record
 * there, and the node stops itself by the log-failure rule (a PANIC line in its log, exit status
 * 74). *coord: the coordinator of the transaction it fired in (-1: not known); why: for a -fail
 * hook, what its PANIC line says failed. */
static void t_hook_round(struct launch *L, const struct launch_opts *lo, unsigned victim,
                         const char *hook, bool *fired, int *coord, char *why, size_t whycap)
{
    bool fail = strstr(hook, "-fail") != NULL;
    unsigned panics0 = t_log_count(L, victim, "kvserver: PANIC:", "exit status 74");
    t_restart_armed(L, lo, victim, hook);
    /* the workload (running all along) makes it die in the hook's window */
    int64_t deadline = clock_now_ns() + 30 * NS_PER_S;
    while (launch_alive(L, victim) && clock_now_ns() < deadline) rdkv_sleep_us(20000);
    *fired = !launch_alive(L, victim); /* (which reaps it) */
    CHECK(*fired); /* the hook's window was reached */
    if (!*fired) REQUIRE(launch_kill(L, victim) == 0);
    *coord = *fired ? t_hook_coordinator(L, victim, fail) : -1;
    if (why && whycap) why[0] = 0;
    if (fail && *fired) {
        /* it stopped by the log-failure rule, not by some other death */
        CHECK_EQ(t_log_count(L, victim, "kvserver: PANIC:", "exit status 74"), panics0 + 1);
        char line[1024];
        if (why && t_log_last(L, victim, "kvserver: PANIC:", line, sizeof line)) {
            /* "... redo log DIR: WHAT (STATUS); stopping ...": WHAT */
            const char *w = strstr(line, "redo log ");
            w = w ? strstr(w, ": ") : NULL;
            const char *e = w ? strstr(w, "; stopping") : NULL;
            if (w && e) snprintf(why, whycap, "%.*s", (int)(e - w - 2), w + 2);
        }
    }
}

enum t_kind { T_KILL, T_HOOK, T_SLOW, T_CKPT };
static const struct {
    enum t_kind kind;
    const char *hook; /* T_HOOK: the hook the victim is armed with; T_CKPT: install-slow */
} t_plan[T_ROUNDS] = {
    {T_KILL, NULL}, {T_KILL, NULL}, {T_KILL, NULL}, {T_KILL, NULL}, {T_KILL, NULL}, {T_KILL, NULL},
    {T_HOOK, "prepare-exit"}, {T_HOOK, "commit-exit"}, {T_HOOK, "decision-exit"},
    {T_SLOW, NULL},
    {T_HOOK, "prepare-fail"}, {T_HOOK, "commit-fail"}, {T_HOOK, "decision-fail"},
    {T_HOOK, "own-commit-fail"},
    {T_CKPT, "install-slow"},
};

static void test_torture(void)
{
    REQUIRE(tenv_mkdtemp(top, sizeof top, "rdkv-dtort") == 0);
    snprintf(data, sizeof data, "%s/data-%%N", top);
    snprintf(cdir, sizeof cdir, "%s/cluster", top);
    /* Other threads read the environment while the hook rounds set RDKV_TEST_FAULT (rdkv_connect
     * its RDKV_SECRET_FILE): so the variable is there from now on, empty when no hook is armed,
     * and setenv only swaps its value -- adding or removing it would move the environment array
     * under their getenv. */
    setenv("RDKV_TEST_FAULT", "", 1);
    /* RDKV_TEST_SEED replays a run (the seed is printed) */
    const char *es = getenv("RDKV_TEST_SEED");
    t_seed = es ? strtoull(es, NULL, 0) : T_SEED_DEFAULT;
    uint64_t seed = t_seed;
    fprintf(stderr, "  torture: seed %#llx (RDKV_TEST_SEED), %u kill rounds, %u exit-hook rounds, "
            "%u slow-disk round, %u log-failure rounds, %u checkpoint round; every node "
            "checkpoints every %s of log\n", (unsigned long long)seed, T_KILLS, T_HOOKS, T_SLOWS,
            T_FAILS, T_CKPTS, T_CKPT_EVERY);
    bank_init(&bank, T_PARTS);
    static struct launch L;
    struct launch_opts lo;
    opts(&lo);
    /* a participant asks about a transaction prepared 2 s ago (not 10): rounds stay short */
    lo.extra[5] = "--indoubt-after";
    lo.extra[6] = "2s";
    /* every node, node 3 too (t_start_node passes these on): each round's restart loads a
     * checkpoint and replays the log behind it, the transactions in doubt included */
    lo.extra[7] = "--checkpoint-every";
    lo.extra[8] = T_CKPT_EVERY;
    /* and small log segments, so that the log behind the older checkpoint kept is dropped
     * (whole segments only) and restarts read logs that begin far after LSN 1 */
    lo.extra[9] = "--log-segment";
    lo.extra[10] = T_LOG_SEGMENT;
    lo.extra[11] = NULL;
    lo.external = 1; /* node 3: this process (t_start_node) */
    lo.start_external = t_start_node;
    lo.external_arg = &lo;
    tL = &L;
    /* the slow-disk round's victim; the checkpoint round's (which checkpoints more often) */
    struct launch_opts slow, ckpt;
    t_opts_plus(&lo, &slow, (const char *const[]){"--fault-wal", T_SYNC_DELAY, NULL});
    t_opts_plus(&lo, &ckpt, (const char *const[]){"--checkpoint-every", T_CKPT_EVERY_VICTIM,
                                                    "--fault-wal", T_SYNC_DELAY, NULL});
    char err[512] = "";
    int rc = launch_start(&L, &lo, err, sizeof err);
    if (rc) fprintf(stderr, "  launch: %s\n", err);
    if (rc && t_node) rdkv_node_stop(t_node);
    REQUIRE(rc == 0);
    rdkv_session *s0 = NULL;
    REQUIRE(bank_connect(&L, 0, &s0) == 0); /* (sets RDKV_SECRET_FILE for the threads) */
    REQUIRE(bank_load(s0) == 0);
    for (unsigned r = 0; r < TW_NREG; r++) {
        char k[16];
        uint8_t z[8];
        tw_reg_key(k, r);
        tc_u64_put(z, 0);
        REQUIRE(rdkv_put(s0, k, strlen(k), z, 8) == 0);
    }
    rdkv_session_close(s0);
    for (unsigned n = 0; n < T_PARTS; n++) REQUIRE(bank_acct_on(&bank, n, ACCTS) < ACCTS);
    for (unsigned i = 0; i < T_REGW; i++) {
        memset(&regw[i], 0, sizeof regw[i]);
        regw[i].seed = t_seed + 17 * (i + 1);
    }
    atomic_store(&tnx, 0);
    for (unsigned round = 0; round < T_ROUNDS; round++) {
        unsigned victim = (unsigned)rng_below(&seed, T_NODES);
        unsigned delay_ms = 100 + (unsigned)rng_below(&seed, 600);  /* workload, then the kill */
        unsigned down_ms = (unsigned)rng_below(&seed, 400);         /* kill -9, then the restart */
        unsigned after_ms = 300 + (unsigned)rng_below(&seed, 500);  /* workload after it */
        enum t_kind kind = t_plan[round].kind;
        const char *hook = t_plan[round].hook;
        t_round = round;
        int64_t r0 = clock_now_ns();
        unsigned x0 = atomic_load(&tnx), ack0 = t_ack, unk0 = t_unknown, fail0 = t_failed,
                 eack0 = t_emb_ack, eunk0 = t_emb_unknown, efail0 = t_emb_failed;
        t_start();
        /* not a synchronisation: the kill lands wherever the workload happens to be */
        rdkv_sleep_us(delay_ms * 1000ull);
        char hooked[384] = "";
        if (kind == T_HOOK) {
            bool fired = true;
            int coord = -1;
            char why[256] = "";
            t_hook_round(&L, &lo, victim, hook, &fired, &coord, why, sizeof why);
            if (!fired) snprintf(hooked, sizeof hooked, ", then %s (NOT fired)", hook);
            else if (why[0])
                snprintf(hooked, sizeof hooked, ", then %s (fired: PANIC, %s)", hook, why);
            else
                snprintf(hooked, sizeof hooked, ", then %s (fired, in a transaction of node %d)",
                         hook, coord);
        } else if (kind == T_SLOW) {
            /* restarted on a slow disk: every fdatasync of its log takes 2 ms more; the workload
             * runs through it (bounded: 20 acknowledged transfers that wrote there), then kill -9
             * in the middle of it */
            t_restart_armed(&L, &slow, victim, NULL);
            unsigned on0 = atomic_load(&t_ack_on[victim]);
            int64_t w0 = clock_now_ns();
            bool ran = t_wait_acked_on(victim, on0, 20, 30 * NS_PER_S);
            CHECK(ran); /* the slow node commits */
            REQUIRE(launch_kill(&L, victim) == 0);
            snprintf(hooked, sizeof hooked, ", then restarted with --fault-wal %s: %u acked "
                     "transfers wrote there in %.1f s, then kill -9 again", T_SYNC_DELAY,
                     atomic_load(&t_ack_on[victim]) - on0, (double)(clock_now_ns() - w0) / 1e9);
            rdkv_sleep_us(down_ms * 1000ull);
        } else if (kind == T_CKPT) {
            /* restarted checkpointing every 2K of log, on a slow disk, each commit installing
             * 50 ms after its record is durable (install-slow: the window of a checkpoint
             * racing an insert, widened); the inserts (markers) run on while it writes two
             * checkpoints (bounded), then a few more transfers that wrote there are
             * acknowledged -- those in flight when the second began -- and kill -9 */
            t_restart_armed(&L, &ckpt, victim, hook);
            unsigned c0 = t_ckpts(&L, victim);
            int64_t until = clock_now_ns() + 60 * NS_PER_S;
            while (t_ckpts(&L, victim) < c0 + 2 && launch_alive(&L, victim) &&
                   clock_now_ns() < until)
                rdkv_sleep_us(20000);
            unsigned nck = t_ckpts(&L, victim) - c0;
            CHECK(nck >= 2);
            unsigned on0 = atomic_load(&t_ack_on[victim]);
            bool more = t_wait_acked_on(victim, on0, 8, 20 * NS_PER_S);
            bool alive = launch_alive(&L, victim); /* (which reaps it, should it have died) */
            CHECK(alive); /* (nothing here stops it but the kill) */
            if (alive) REQUIRE(launch_kill(&L, victim) == 0); /* while the inserts run */
            snprintf(hooked, sizeof hooked, ", then restarted checkpointing every %s with "
                     "--fault-wal %s and %s: %u checkpoints, then %u%s acked transfers that wrote "
                     "there, then kill -9 again", T_CKPT_EVERY_VICTIM, T_SYNC_DELAY, hook, nck,
                     atomic_load(&t_ack_on[victim]) - on0, more ? "" : " (too few)");
            rdkv_sleep_us(down_ms * 1000ull);
        } else {
            REQUIRE(launch_kill(&L, victim) == 0);
            rdkv_sleep_us(down_ms * 1000ull);
        }
        unsigned loads0 = t_log_count(&L, victim, "kvserver: checkpoint ", " rows loaded in ");
        bank_restart(&L, &lo, victim);
        bool loaded = t_log_count(&L, victim, "kvserver: checkpoint ", " rows loaded in ") > loads0;
        if (kind == T_CKPT) CHECK(loaded); /* the restart starts from a checkpoint */
        int64_t r1 = clock_now_ns();
        rdkv_sleep_us(after_ms * 1000ull); /* (the workload goes on through the restart) */
        t_join();
        int64_t r2 = clock_now_ns();
        double settle = t_settle();
        CHECK(settle >= 0);
        int64_t r3 = clock_now_ns();
        unsigned nxs = atomic_load(&tnx);
        if (nxs > T_XFERS) nxs = T_XFERS;
        /* (the checks' reads: from the victim's remote session or from node 3's embedded one) */
        rdkv_session *s = t_session(round % 2 ? T_EMB : victim, false);
        REQUIRE(s != NULL);
        unsigned unknown_in = 0;
        unsigned committed = bank_check(&bank, s, txs, nxs, &unknown_in);
        int64_t r4 = clock_now_ns();
        t_histcheck(s, round);
        rdkv_session_close(s);
        fprintf(stderr, "  round %u: restarted at %.1f s, workers joined %.1f s later, rows free "
                "%.1f s later, ledger checked in %.1f s, histcheck in %.1f s\n", round,
                (double)(r1 - r0) / 1e9, (double)(r2 - r1) / 1e9, (double)(r3 - r2) / 1e9,
                (double)(r4 - r3) / 1e9, (double)(clock_now_ns() - r4) / 1e9);
        fprintf(stderr,
                "  round %u (%.1f s): kill -9 node %u after %u ms%s; transfers %u..%u: %u acked, %u "
                "unknown (%u unknown ones so far committed), %u failed (embedded: %u, %u, %u); %u "
                "committed in all; %u register commits (%u embedded), %u unknown so far; %u "
                "reconnects; checkpoints written so far by nodes 0..2: %u, %u, %u, log "
                "segments dropped %u, %u, %u (the victim's restart loaded %s)\n",
                round, (double)(clock_now_ns() - r0) / 1e9, victim, delay_ms, hooked, x0, nxs,
                t_ack - ack0, t_unknown - unk0, unknown_in, t_failed - fail0,
                t_emb_ack - eack0, t_emb_unknown - eunk0, t_emb_failed - efail0, committed,
                (unsigned)t_reg_commits, (unsigned)t_emb_reg_commits, (unsigned)t_reg_unknown,
                (unsigned)t_reconnects, t_ckpts(&L, 0), t_ckpts(&L, 1), t_ckpts(&L, 2),
                t_dropped(&L, 0), t_dropped(&L, 1), t_dropped(&L, 2), loaded ? "one" : "none");
        if (harness_failures) break; /* (the first failing round says the most) */
    }
    CHECK(t_ack > 0);
    CHECK(t_emb_ack > 0);
    /* the log was cut behind checkpoints, in this four-node cluster */
    CHECK(t_dropped(&L, 0) + t_dropped(&L, 1) + t_dropped(&L, 2) > 0);
    CHECK(t_reg_commits > 0);
    CHECK(t_emb_reg_commits > 0);
    for (unsigned i = 0; i < T_REGW; i++) tw_hist_free(&regw[i].h);
    rdkv_node_stop(t_node); /* (every session of it is closed) */
    t_node = NULL;
    CHECK_EQ(launch_stop(&L, 10 * NS_PER_S), 0);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
    if (!getenv("RDKV_TEST_KEEP") && !harness_failures) CHECK(system(cmd) == 0);
}

static const struct test_case cases[] = {
    {"logged_2pc", test_logged_2pc},
    {"torture", test_torture},
};

int main(int argc, char **argv)
{
    return tenv_main(argc, argv, "durable 2pc", cases, sizeof cases / sizeof cases[0]);
}
