/* A 3-node bank: concurrent transfers across partitions from embedded and remote sessions, with
 * read-only audit transactions running throughout; the total never changes and no balance goes
 * negative, in every audit and at the end.
 *
 * NACCT accounts "acct:%04d" (spread over the partitions by hash) start at 1000. Transfer threads
 * (embedded sessions on every node, remote sessions coordinated by every node) pick two accounts,
 * read both for update, move a random amount of at most the source's balance and commit,
 * retrying conflicts through rdkv_txn_on_error. Some accounts may be closed: a transfer that
 * drains one of them deletes its row, and a later transfer into it inserts the row again, so the
 * audits' scans also meet inserts and deletes. Every committed transfer is recorded in its
 * thread's ledger. Audit threads (embedded and remote, read-only sessions) read every account by
 * individual gets, by one scan of the "acct:" range, or both in one transaction (which must then
 * agree row by row), and check the total and the signs. The run ends once enough transfers and
 * audits committed (a bounded wait, not a sleep); then the final state must match the total and
 * every account must equal its opening balance plus the ledgers' net movements. The transfers
 * and the audits themselves are tw_transfer and tw_audit (tests/txnwork.h). */
#include "tests/harness.h"
#include "tests/testenv.h"
#include "tests/txncluster.h"
#include "tests/txnwork.h"

#include "common/clock.h"
#include "common/rng.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>

#define NACCT 60
#define TOTAL ((int64_t)NACCT * TW_OPENING)
#define MAXTH 32

_Static_assert(NACCT <= TW_MAXACCT, "tw_audit checks at most TW_MAXACCT accounts");

struct bank {
    struct tcluster c;
    _Atomic bool stop;
    _Atomic uint64_t transfers, closes, reopens, aborts, audits, audit_scans, audit_gets,
        audit_both, audit_oneshots, audit_aborts, bad_audits, errors;
};

struct worker {
    struct bank *b;
    int id;
    bool remote;
    unsigned node; /* embedded: the node; remote: the coordinator */
    bool audit;
    uint64_t seed;
    int64_t ledger[NACCT];    /* transfers: the net amount moved into each account */
    _Atomic uint64_t commits; /* read by the main thread while running */
};

static void error(struct bank *b, const char *what, int rc)
{
    if (atomic_fetch_add(&b->errors, 1) < 5)
        fprintf(stderr, "  %s: %s\n", what, rdkv_status_name(rc));
}

static int open_session(struct worker *w, const rdkv_options *o, rdkv_session **s)
{
    if (w->remote) return tc_connect(&w->b->c, w->node, o, s);
    return rdkv_session_open(w->b->c.node[w->node], o, s);
}

static void transfer_loop(struct worker *w, rdkv_session *s)
{
    struct bank *b = w->b;
    while (!atomic_load(&b->stop)) {
        int a = (int)(rng_next(&w->seed) % NACCT);
        int c = (int)(rng_next(&w->seed) % (NACCT - 1));
        if (c >= a) c++;
        rdkv_txn *t;
        int rc = rdkv_txn_begin(s, &t);
        if (rc) {
            error(b, "begin", rc);
            return;
        }
        struct tw_moved m = {0};
        for (;;) {
            rc = tw_transfer(t, &w->seed, a, c, &m);
            if (!rc) rc = rdkv_txn_commit(t);
            if (!rc) break;
            if (rdkv_status_retryable(rc)) atomic_fetch_add(&b->aborts, 1);
            if (atomic_load(&b->stop) && rdkv_status_retryable(rc)) break;
            rc = rdkv_txn_on_error(t, rc);
            if (rc) break;
        }
        rdkv_txn_free(t);
        if (rc == 0) {
            w->ledger[a] -= m.amount;
            w->ledger[c] += m.amount;
            w->commits++;
            atomic_fetch_add(&b->transfers, 1);
            if (m.closed) atomic_fetch_add(&b->closes, 1);
            if (m.reopened) atomic_fetch_add(&b->reopens, 1);
        } else if (!(rdkv_status_retryable(rc) && atomic_load(&b->stop))) {
            error(b, "transfer", rc); /* EUNKNOWN included: no failures are injected here */
        }
    }
}

static void audit_loop(struct worker *w, rdkv_session *s)
{
    struct bank *b = w->b;
    unsigned round = 0;
    while (!atomic_load(&b->stop)) {
        /* pace: let some transfers commit between two audits (bounded: at most 300 ms), so
         * audits interleave with transfers rather than crowd them out */
        uint64_t seen = atomic_load(&b->transfers);
        int64_t until = clock_now_ns() + 300 * NS_PER_MS;
        while (atomic_load(&b->transfers) < seen + 100 && clock_now_ns() < until &&
               !atomic_load(&b->stop))
            clock_sleep_ns(NS_PER_MS);
        int how = (int)(round++ % 4); /* 3: a one-shot scan (its own transaction) */
        int64_t sum = 0, minbal = 0;
        bool mismatch = false;
        if (how == 3) {
            int rc = tw_audit_oneshot(s, NACCT, &sum, &minbal, &mismatch);
            if (rdkv_status_retryable(rc)) {
                atomic_fetch_add(&b->audit_aborts, 1);
                continue;
            }
            if (rc) {
                error(b, "one-shot audit", rc);
                continue;
            }
            atomic_fetch_add(&b->audit_oneshots, 1);
            goto check;
        }
        rdkv_txn *t;
        int rc = rdkv_txn_begin(s, &t);
        if (rc) {
            error(b, "audit begin", rc);
            return;
        }
        for (;;) {
            rc = tw_audit(t, NACCT, how, &sum, &minbal, &mismatch);
            if (!rc) rc = rdkv_txn_commit(t);
            if (!rc) break;
            if (rdkv_status_retryable(rc)) atomic_fetch_add(&b->audit_aborts, 1);
            if (atomic_load(&b->stop) && rdkv_status_retryable(rc)) break;
            rc = rdkv_txn_on_error(t, rc);
            if (rc) break;
        }
        rdkv_txn_free(t);
        if (rc) {
            if (!(rdkv_status_retryable(rc) && atomic_load(&b->stop))) error(b, "audit", rc);
            continue;
        }
    check:
        if (sum != TOTAL || minbal < 0 || mismatch) {
            if (atomic_fetch_add(&b->bad_audits, 1) < 5)
                fprintf(stderr,
                        "  BAD audit (%s, %s): total %" PRId64 " (want %" PRId64
                        "), lowest balance %" PRId64 "%s\n",
                        w->remote ? "remote" : "embedded", tw_audit_name(how), sum, TOTAL, minbal,
                        mismatch ? ", gets and scan disagree" : "");
        }
        atomic_fetch_add(&b->audits, 1);
        if (how < 3)
            atomic_fetch_add(how == 0   ? &b->audit_gets
                             : how == 1 ? &b->audit_scans
                                        : &b->audit_both,
                             1);
        w->commits++;
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    rdkv_options o;
    rdkv_options_init(&o);
    o.max_retries = 1000000; /* conflicts are retried until the run stops */
    o.read_only = w->audit;
    /* An audit holds 60 shared locks at once: with the default 100 ms bound it would nearly
     * always meet a transfer that holds one row while it waits for its second, and starve. It
     * waits longer instead (well under the 2 s lease); the transfers that queue behind it give
     * up after their 100 ms and retry. */
    if (w->audit) o.lock_timeout_ms = 500;
    /* Under no-wait (the nodes' policy) an audit would nearly never find its 60 rows free at
     * once: no-wait is not starvation-free (transactions.md). The audits wait instead -- a
     * session's own policy, timeout -- and the transfers that meet them give way at once. */
    const char *policy = getenv("RDKV_TEST_CONFLICT");
    if (w->audit && policy && !strcmp(policy, "no-wait")) o.conflict = RDKV_CONFLICT_TIMEOUT;
    rdkv_session *s;
    int rc = open_session(w, &o, &s);
    if (rc) {
        error(w->b, "open session", rc);
        return NULL;
    }
    if (w->audit)
        audit_loop(w, s);
    else
        transfer_loop(w, s);
    rdkv_session_close(s);
    return NULL;
}

/* Embedded transfer workers of one node as tasks of one thread (bank_tasks). */
struct group {
    struct worker *w;
    unsigned n;
};

static void group_task(unsigned i, void *arg)
{
    struct group *g = arg;
    worker_main(&g->w[i]);
}

static void *group_main(void *arg)
{
    struct group *g = arg;
    int rc = rdkv_run_tasks(g->n, group_task, g, 0);
    if (rc) error(g->w[0].b, "run tasks", rc);
    return NULL;
}

/* tasks: 0, every worker a thread; K, each node's embedded transfer workers are K tasks of one
 * thread (sharing its connections), beside the remote and audit threads. */
static void bank_run(unsigned tasks)
{
    static struct bank b;
    memset(&b, 0, sizeof b);
    REQUIRE(tc_start(&b.c, 3, NULL) == 0);
    /* open the accounts in a few transactions */
    rdkv_session *s;
    REQUIRE(rdkv_session_open(b.c.node[0], NULL, &s) == 0);
    unsigned per_part[3] = {0};
    for (int i = 0; i < NACCT; i += 20) {
        rdkv_txn *t;
        REQUIRE(rdkv_txn_begin(s, &t) == 0);
        for (int j = i; j < i + 20 && j < NACCT; j++) {
            CHECK_EQ(tw_acct_write(t, j, TW_OPENING), 0);
            char k[16];
            tw_acct_key(k, j);
            per_part[tc_partition(&b.c, k, strlen(k))]++;
        }
        CHECK_EQ(rdkv_txn_commit(t), 0);
        rdkv_txn_free(t);
    }
    CHECK(per_part[0] && per_part[1] && per_part[2]);
    /* s stays open and idle until the final check: what its loading transactions locked must
     * not stay locked (the audits' scans need those ranges) */
    /* transfers: embedded on every node and remote through every node; audits: one of each */
    static struct worker w[MAXTH];
    unsigned nw = 0;
    unsigned emb_per_node = tasks ? tasks : tenv_quick ? 1 : 2, remotes = tenv_quick ? 2 : 3;
    for (unsigned n = 0; n < 3; n++)
        for (unsigned k = 0; k < emb_per_node; k++) w[nw++] = (struct worker){.node = n};
    unsigned first_thread = tasks ? 3 * emb_per_node : 0; /* workers before it run as tasks */
    for (unsigned k = 0; k < remotes; k++) w[nw++] = (struct worker){.remote = true, .node = k % 3};
    w[nw++] = (struct worker){.audit = true, .node = 2};
    w[nw++] = (struct worker){.audit = true, .remote = true, .node = 1};
    pthread_t th[MAXTH];
    static struct group grp[3];
    unsigned nth = 0;
    for (unsigned i = 0; i < nw; i++) {
        w[i].b = &b;
        w[i].id = (int)i;
        w[i].seed = 0x9E3779B97F4A7C15ull * (i + 1) ^ (uint64_t)clock_now_ns();
        if (i >= first_thread) REQUIRE(pthread_create(&th[nth++], NULL, worker_main, &w[i]) == 0);
    }
    for (unsigned n = 0; tasks && n < 3; n++) {
        grp[n] = (struct group){&w[n * emb_per_node], emb_per_node};
        REQUIRE(pthread_create(&th[nth++], NULL, group_main, &grp[n]) == 0);
    }
    /* run until enough happened (every thread took part), or give up */
    uint64_t want_transfers = tenv_quick ? 500 : 3000, want_audits = tenv_quick ? 9 : 30;
    /* (the run ends once enough happened; the bound is for slow machines: sanitizer builds on a
     * busy CI box, the emulated verbs guest) */
    int64_t t0 = clock_now_ns(), give_up = t0 + (tenv_quick ? 60 : 90) * NS_PER_S;
    for (;;) {
        bool all = true;
        for (unsigned i = 0; i < nw; i++)
            if (w[i].commits < (w[i].audit ? 2u : 5u)) all = false; /* racy reads: a hint only */
        if ((all && atomic_load(&b.transfers) >= want_transfers &&
             atomic_load(&b.audit_gets) >= want_audits / 3 &&
             atomic_load(&b.audit_scans) >= want_audits / 3 &&
             atomic_load(&b.audit_both) >= want_audits / 3 &&
             atomic_load(&b.audit_oneshots) >= want_audits / 3) ||
            atomic_load(&b.errors) || clock_now_ns() > give_up)
            break;
        clock_sleep_ns(5 * NS_PER_MS);
    }
    atomic_store(&b.stop, true);
    for (unsigned i = 0; i < nth; i++) pthread_join(th[i], NULL);
    double secs = (double)(clock_now_ns() - t0) / 1e9;

    /* the end: the total, the signs, and each account against the ledgers */
    int64_t expect[NACCT];
    for (int i = 0; i < NACCT; i++) {
        expect[i] = TW_OPENING;
        for (unsigned k = 0; k < nw; k++) expect[i] += w[k].ledger[i];
    }
    rdkv_session *r;
    REQUIRE(tc_connect(&b.c, 2, NULL, &r) == 0);
    rdkv_session *both[2] = {s, r};
    for (int k = 0; k < 2; k++) {
        rdkv_txn *t;
        REQUIRE(rdkv_txn_begin(both[k], &t) == 0);
        int64_t sum, minbal;
        bool mismatch;
        /* Under --conflict no-wait the check's own locks are not waited for: a ticket a worker
         * gave up may still be on its way to being passed on. Such an abort is retried. */
        int arc, tries = 0;
        while ((arc = tw_audit(t, NACCT, 2, &sum, &minbal, &mismatch)) == RDKV_EABORTED &&
               tries++ < 1000)
            REQUIRE(rdkv_txn_on_error(t, arc) == 0);
        CHECK_EQ(arc, 0);
        CHECK_EQ(sum, TOTAL);
        CHECK(minbal >= 0);
        CHECK(!mismatch);
        unsigned wrong = 0;
        for (int i = 0; i < NACCT; i++) {
            int64_t bal;
            bool ex;
            CHECK_EQ(tw_acct_read(t, i, false, &bal, &ex), 0);
            if (bal != expect[i] && wrong++ < 5)
                fprintf(stderr, "  account %d holds %" PRId64 ", the ledgers say %" PRId64 "\n", i,
                        bal, expect[i]);
            if (!ex && !TW_CLOSABLE(i) && wrong++ < 5)
                fprintf(stderr, "  account %d is gone but was never closable\n", i);
        }
        CHECK_EQ(wrong, 0);
        CHECK_EQ(rdkv_txn_commit(t), 0);
        rdkv_txn_free(t);
    }
    rdkv_session_close(r);
    rdkv_session_close(s);
    fprintf(stderr,
            "  %u tasks per node; %.1f s: %llu transfers (%llu closed an account, %llu reopened one), %llu "
            "conflict retries; %llu audits (%llu by gets, %llu by scan, %llu both, %llu one-shot "
            "scans), %llu audit "
            "retries; %llu bad audits, %llu errors\n",
            tasks, secs, (unsigned long long)b.transfers, (unsigned long long)b.closes,
            (unsigned long long)b.reopens, (unsigned long long)b.aborts,
            (unsigned long long)b.audits, (unsigned long long)b.audit_gets,
            (unsigned long long)b.audit_scans, (unsigned long long)b.audit_both,
            (unsigned long long)b.audit_oneshots, (unsigned long long)b.audit_aborts, (unsigned long long)b.bad_audits,
            (unsigned long long)b.errors);
    CHECK_EQ(b.bad_audits, 0);
    CHECK_EQ(b.errors, 0);
    CHECK(b.transfers >= want_transfers);
    CHECK(b.audit_gets >= want_audits / 3);
    CHECK(b.audit_scans >= want_audits / 3);
    CHECK(b.audit_both >= want_audits / 3);
    CHECK(b.audit_oneshots >= want_audits / 3);
    for (unsigned i = 0; i < nw; i++) {
        if (!w[i].commits)
            fprintf(stderr, "  thread %u (%s %s) committed nothing\n", i,
                    w[i].remote ? "remote" : "embedded", w[i].audit ? "audit" : "transfer");
        CHECK(w[i].commits > 0);
    }
    tc_stop(&b.c);
}

static void bank(void) { bank_run(0); }
static void bank_tasks(void) { bank_run(tenv_quick ? 2 : 3); }

static const struct test_case cases[] = {
    {"bank", bank},
    {"bank_tasks", bank_tasks},
};

int main(int argc, char **argv)
{
    return tenv_main(argc, argv, "bank transfers", cases, sizeof cases / sizeof cases[0]);
}
