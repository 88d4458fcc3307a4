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
 * every account must equal its opening balance plus the ledgers' net movements. */
#include "tests/harness.h"
#include "tests/testenv.h"
#include "tests/txncluster.h"

#include "common/clock.h"
#include "common/rng.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>

#define NACCT 60
#define OPENING 1000
#define TOTAL ((int64_t)NACCT * OPENING)
#define CLOSABLE(i) ((i) % 6 == 5) /* a sixth of the accounts may be closed when drained */
#define MAXTH 16

struct bank {
    struct tcluster c;
    _Atomic bool stop;
    _Atomic uint64_t transfers, closes, reopens, aborts, audits, audit_scans, audit_gets,
        audit_both, audit_aborts, bad_audits, errors;
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

static void acct_key(char *buf, int i)
{
    snprintf(buf, 16, "acct:%04u", (unsigned)i % 10000u);
}

static void error(struct bank *b, const char *what, int rc)
{
    if (atomic_fetch_add(&b->errors, 1) < 5)
        fprintf(stderr, "  %s: %s\n", what, rdkv_status_name(rc));
}

/* A balance: 8 bytes, signed. absent -> 0 with *exists false. */
static int read_acct(rdkv_txn *t, int i, bool upd, int64_t *bal, bool *exists)
{
    char k[16];
    acct_key(k, i);
    const void *v;
    size_t vl;
    int rc = upd ? rdkv_txn_get_for_update(t, k, strlen(k), &v, &vl)
                 : rdkv_txn_get(t, k, strlen(k), &v, &vl);
    if (rc == RDKV_ENOTFOUND) {
        *bal = 0;
        *exists = false;
        return 0;
    }
    if (rc) return rc;
    uint64_t u;
    if (!tc_u64_get(v, vl, &u)) return RDKV_EPROTO;
    *bal = (int64_t)u;
    *exists = true;
    return 0;
}

static int write_acct(rdkv_txn *t, int i, int64_t bal)
{
    char k[16];
    acct_key(k, i);
    uint8_t v[8];
    tc_u64_put(v, (uint64_t)bal);
    return rdkv_txn_put(t, k, strlen(k), v, 8);
}

static int open_session(struct worker *w, const rdkv_options *o, rdkv_session **s)
{
    if (w->remote) return tc_connect(&w->b->c, w->node, o, s);
    return rdkv_session_open(w->b->c.node[w->node], o, s);
}

/* One transfer attempt: a -> b. *moved and *closed say what it did (when it commits). */
static int transfer(rdkv_txn *t, struct worker *w, int a, int b, int64_t *moved, bool *closed,
                    bool *reopened)
{
    int64_t ba, bb;
    bool ea, eb;
    *moved = 0;
    *closed = *reopened = false;
    int rc = read_acct(t, a, true, &ba, &ea);
    if (!rc) rc = read_acct(t, b, true, &bb, &eb);
    if (rc) return rc;
    if (ba < 0 || bb < 0) return RDKV_EPROTO; /* never: the audits report it too */
    if (ba == 0) {
        if (ea && CLOSABLE(a)) {
            char k[16];
            acct_key(k, a);
            *closed = true;
            return rdkv_txn_delete(t, k, strlen(k));
        }
        return 0; /* nothing to move: a read-only transfer */
    }
    uint64_t r = rng_next(&w->seed);
    int64_t amt = r % 8 == 0 ? ba : 1 + (int64_t)(rng_next(&w->seed) % (uint64_t)ba);
    *moved = amt;
    *reopened = !eb;
    if (ba - amt == 0 && CLOSABLE(a)) {
        char k[16];
        acct_key(k, a);
        *closed = true;
        rc = rdkv_txn_delete(t, k, strlen(k));
    } else {
        rc = write_acct(t, a, ba - amt);
    }
    if (!rc) rc = write_acct(t, b, bb + amt);
    return rc;
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
        int64_t moved = 0;
        bool closed = false, reopened = false;
        for (;;) {
            rc = transfer(t, w, a, c, &moved, &closed, &reopened);
            if (!rc) rc = rdkv_txn_commit(t);
            if (!rc) break;
            if (rdkv_status_retryable(rc)) atomic_fetch_add(&b->aborts, 1);
            if (atomic_load(&b->stop) && rdkv_status_retryable(rc)) break;
            rc = rdkv_txn_on_error(t, rc);
            if (rc) break;
        }
        rdkv_txn_free(t);
        if (rc == 0) {
            w->ledger[a] -= moved;
            w->ledger[c] += moved;
            w->commits++;
            atomic_fetch_add(&b->transfers, 1);
            if (closed) atomic_fetch_add(&b->closes, 1);
            if (reopened) atomic_fetch_add(&b->reopens, 1);
        } else if (!(rdkv_status_retryable(rc) && atomic_load(&b->stop))) {
            error(b, "transfer", rc); /* EUNKNOWN included: no failures are injected here */
        }
    }
}

/* One audit attempt: how = 0 gets, 1 scan, 2 both (compared). */
static int audit(rdkv_txn *t, int how, int64_t *sum, int64_t *minbal, bool *mismatch)
{
    int64_t byget[NACCT];
    bool present[NACCT];
    *sum = 0;
    *minbal = INT64_MAX;
    *mismatch = false;
    if (how != 1) {
        for (int i = 0; i < NACCT; i++) {
            int rc = read_acct(t, i, false, &byget[i], &present[i]);
            if (rc) return rc;
            *sum += byget[i];
            if (byget[i] < *minbal) *minbal = byget[i];
        }
    }
    if (how != 0) {
        rdkv_iter *it;
        int rc = rdkv_txn_scan(t, "acct:", 5, "acct;", 5, 0, &it);
        if (rc) return rc;
        int64_t ssum = 0, smin = INT64_MAX;
        const void *k, *v;
        size_t kl, vl;
        int seen = 0, last = -1;
        while ((rc = rdkv_iter_next(it, &k, &kl, &v, &vl)) == 1) {
            uint64_t u;
            int idx = -1;
            char kb[16];
            if (kl == 9 && !memcmp(k, "acct:", 5)) {
                memcpy(kb, k, 9);
                kb[9] = 0;
                idx = atoi(kb + 5);
            }
            if (idx < 0 || idx >= NACCT || idx <= last || !tc_u64_get(v, vl, &u)) {
                *mismatch = true; /* a stray, out-of-order or malformed row */
                continue;
            }
            if (how == 2 && (!present[idx] || byget[idx] != (int64_t)u)) *mismatch = true;
            for (int j = last + 1; how == 2 && j < idx; j++)
                if (present[j]) *mismatch = true; /* a row the gets saw, the scan did not */
            last = idx;
            seen++;
            ssum += (int64_t)u;
            if ((int64_t)u < smin) smin = (int64_t)u;
        }
        rdkv_iter_close(it);
        if (rc) return rc;
        for (int j = last + 1; how == 2 && j < NACCT; j++)
            if (present[j]) *mismatch = true;
        if (seen < NACCT && smin > 0) smin = 0; /* closed accounts hold 0 */
        if (how == 2 && (ssum != *sum)) *mismatch = true;
        *sum = ssum;
        if (smin < *minbal) *minbal = smin;
    }
    return 0;
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
        int how = (int)(round++ % 3);
        rdkv_txn *t;
        int rc = rdkv_txn_begin(s, &t);
        if (rc) {
            error(b, "audit begin", rc);
            return;
        }
        int64_t sum = 0, minbal = 0;
        bool mismatch = false;
        for (;;) {
            rc = audit(t, how, &sum, &minbal, &mismatch);
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
        if (sum != TOTAL || minbal < 0 || mismatch) {
            if (atomic_fetch_add(&b->bad_audits, 1) < 5)
                fprintf(stderr,
                        "  BAD audit (%s, %s): total %" PRId64 " (want %" PRId64
                        "), lowest balance %" PRId64 "%s\n",
                        w->remote ? "remote" : "embedded",
                        how == 0   ? "gets"
                        : how == 1 ? "scan"
                                   : "gets+scan",
                        sum, TOTAL, minbal, mismatch ? ", gets and scan disagree" : "");
        }
        atomic_fetch_add(&b->audits, 1);
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

static void bank(void)
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
            CHECK_EQ(write_acct(t, j, OPENING), 0);
            char k[16];
            acct_key(k, j);
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
    unsigned emb_per_node = tenv_quick ? 1 : 2, remotes = tenv_quick ? 2 : 3;
    for (unsigned n = 0; n < 3; n++)
        for (unsigned k = 0; k < emb_per_node; k++) w[nw++] = (struct worker){.node = n};
    for (unsigned k = 0; k < remotes; k++) w[nw++] = (struct worker){.remote = true, .node = k % 3};
    w[nw++] = (struct worker){.audit = true, .node = 2};
    w[nw++] = (struct worker){.audit = true, .remote = true, .node = 1};
    pthread_t th[MAXTH];
    for (unsigned i = 0; i < nw; i++) {
        w[i].b = &b;
        w[i].id = (int)i;
        w[i].seed = 0x9E3779B97F4A7C15ull * (i + 1) ^ (uint64_t)clock_now_ns();
        REQUIRE(pthread_create(&th[i], NULL, worker_main, &w[i]) == 0);
    }
    /* run until enough happened (every thread took part), or give up */
    uint64_t want_transfers = tenv_quick ? 500 : 3000, want_audits = tenv_quick ? 9 : 30;
    int64_t t0 = clock_now_ns(), give_up = t0 + (tenv_quick ? 15 : 50) * NS_PER_S;
    for (;;) {
        bool all = true;
        for (unsigned i = 0; i < nw; i++)
            if (w[i].commits < (w[i].audit ? 2u : 5u)) all = false; /* racy reads: a hint only */
        if ((all && atomic_load(&b.transfers) >= want_transfers &&
             atomic_load(&b.audit_gets) >= want_audits / 3 &&
             atomic_load(&b.audit_scans) >= want_audits / 3 &&
             atomic_load(&b.audit_both) >= want_audits / 3) ||
            atomic_load(&b.errors) || clock_now_ns() > give_up)
            break;
        clock_sleep_ns(5 * NS_PER_MS);
    }
    atomic_store(&b.stop, true);
    for (unsigned i = 0; i < nw; i++) pthread_join(th[i], NULL);
    double secs = (double)(clock_now_ns() - t0) / 1e9;

    /* the end: the total, the signs, and each account against the ledgers */
    int64_t expect[NACCT];
    for (int i = 0; i < NACCT; i++) {
        expect[i] = OPENING;
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
        CHECK_EQ(audit(t, 2, &sum, &minbal, &mismatch), 0);
        CHECK_EQ(sum, TOTAL);
        CHECK(minbal >= 0);
        CHECK(!mismatch);
        unsigned wrong = 0;
        for (int i = 0; i < NACCT; i++) {
            int64_t bal;
            bool ex;
            CHECK_EQ(read_acct(t, i, false, &bal, &ex), 0);
            if (bal != expect[i] && wrong++ < 5)
                fprintf(stderr, "  account %d holds %" PRId64 ", the ledgers say %" PRId64 "\n", i,
                        bal, expect[i]);
            if (!ex && !CLOSABLE(i) && wrong++ < 5)
                fprintf(stderr, "  account %d is gone but was never closable\n", i);
        }
        CHECK_EQ(wrong, 0);
        CHECK_EQ(rdkv_txn_commit(t), 0);
        rdkv_txn_free(t);
    }
    rdkv_session_close(r);
    rdkv_session_close(s);
    fprintf(stderr,
            "  %.1f s: %llu transfers (%llu closed an account, %llu reopened one), %llu "
            "conflict retries; %llu audits (%llu by gets, %llu by scan, %llu both), %llu audit "
            "retries; %llu bad audits, %llu errors\n",
            secs, (unsigned long long)b.transfers, (unsigned long long)b.closes,
            (unsigned long long)b.reopens, (unsigned long long)b.aborts,
            (unsigned long long)b.audits, (unsigned long long)b.audit_gets,
            (unsigned long long)b.audit_scans, (unsigned long long)b.audit_both,
            (unsigned long long)b.audit_aborts, (unsigned long long)b.bad_audits,
            (unsigned long long)b.errors);
    CHECK_EQ(b.bad_audits, 0);
    CHECK_EQ(b.errors, 0);
    CHECK(b.transfers >= want_transfers);
    CHECK(b.audit_gets >= want_audits / 3);
    CHECK(b.audit_scans >= want_audits / 3);
    CHECK(b.audit_both >= want_audits / 3);
    for (unsigned i = 0; i < nw; i++) {
        if (!w[i].commits)
            fprintf(stderr, "  thread %u (%s %s) committed nothing\n", i,
                    w[i].remote ? "remote" : "embedded", w[i].audit ? "audit" : "transfer");
        CHECK(w[i].commits > 0);
    }
    tc_stop(&b.c);
}

static const struct test_case cases[] = {
    {"bank", bank},
};

int main(int argc, char **argv)
{
    return tenv_main(argc, argv, "bank transfers", cases, sizeof cases / sizeof cases[0]);
}
