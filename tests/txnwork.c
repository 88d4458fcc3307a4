/* The workloads the transaction tests share (tests/txnwork.h). */
#include "tests/txnwork.h"

#include "tests/txncluster.h"

#include "common/clock.h"
#include "common/rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(TW_NREG < 64, "tw_reg_did.touched has a bit per register");

/* Both workloads keep 8-byte values: key's, read for update (an exclusive lock) or not;
 * RDKV_EPROTO if the value is not 8 bytes. */
static int get_u64(rdkv_txn *t, const char *k, bool upd, uint64_t *val)
{
    const void *v;
    size_t vl;
    int rc = upd ? rdkv_txn_get_for_update(t, k, strlen(k), &v, &vl)
                 : rdkv_txn_get(t, k, strlen(k), &v, &vl);
    if (rc) return rc;
    return tc_u64_get(v, vl, val) ? 0 : RDKV_EPROTO;
}

static int put_u64(rdkv_txn *t, const char *k, uint64_t val)
{
    uint8_t b[8];
    tc_u64_put(b, val);
    return rdkv_txn_put(t, k, strlen(k), b, 8);
}

/* ------------------------------------------------------------------------------------------ */
/* Registers */

void tw_reg_key(char buf[16], unsigned r)
{
    snprintf(buf, 16, "reg:%02u", r);
}

int tw_reg_read(rdkv_txn *t, unsigned r, bool upd, uint64_t *val)
{
    char k[16];
    tw_reg_key(k, r);
    return get_u64(t, k, upd, val);
}

int tw_reg_write(rdkv_txn *t, unsigned r, uint64_t val)
{
    char k[16];
    tw_reg_key(k, r);
    return put_u64(t, k, val);
}

/* The rows of a scan of every register, recorded as reads; closes it. */
static int reg_rows(rdkv_iter *it, struct hist_op *ops, uint32_t *nops)
{
    const void *k, *v;
    size_t kl, vl;
    unsigned next = 0;
    int rc;
    while ((rc = rdkv_iter_next(it, &k, &kl, &v, &vl)) == 1) {
        char want[16];
        tw_reg_key(want, next);
        uint64_t val;
        if (next >= TW_NREG || kl != strlen(want) || memcmp(k, want, kl) ||
            !tc_u64_get(v, vl, &val)) {
            rc = RDKV_EPROTO; /* a row missing, extra, out of order or malformed */
            break;
        }
        ops[(*nops)++] = (struct hist_op){HIST_READ, next, val};
        next++;
    }
    rdkv_iter_close(it);
    if (rc == 0 && next != TW_NREG) rc = RDKV_EPROTO;
    return rc;
}

int tw_reg_scan(rdkv_txn *t, struct hist_op *ops, uint32_t *nops)
{
    rdkv_iter *it;
    int rc = rdkv_txn_scan(t, "reg:", 4, "reg;", 4, 0, &it);
    return rc ? rc : reg_rows(it, ops, nops);
}

int tw_reg_oneshot(rdkv_session *s, uint64_t *seed, struct hist_op *ops, uint32_t *nops)
{
    if (rng_below(seed, 4) == 0) {
        rdkv_iter *it;
        int rc = rdkv_scan(s, "reg:", 4, "reg;", 4, 0, &it);
        return rc ? rc : reg_rows(it, ops, nops);
    }
    unsigned r = (unsigned)rng_below(seed, TW_NREG);
    char k[16];
    tw_reg_key(k, r);
    const void *v;
    size_t vl;
    uint64_t val;
    int rc = rdkv_get(s, k, strlen(k), &v, &vl);
    if (rc) return rc;
    if (!tc_u64_get(v, vl, &val)) return RDKV_EPROTO;
    ops[(*nops)++] = (struct hist_op){HIST_READ, r, val};
    return 0;
}

int tw_reg_read_all(rdkv_txn *t, struct hist_op fin[TW_NREG])
{
    int rc = 0;
    for (unsigned r = 0; r < TW_NREG; r++) {
        uint64_t v = 0;
        if (!rc) rc = tw_reg_read(t, r, false, &v);
        fin[r] = (struct hist_op){HIST_READ, r, v};
    }
    return rc;
}

int tw_reg_attempt(rdkv_txn *t, int id, uint64_t *seed, uint64_t *counter, struct hist_op *ops,
                   uint32_t *nops, struct tw_reg_did *did)
{
    *did = (struct tw_reg_did){0};
    unsigned n = 1 + (unsigned)rng_below(seed, 4);
    bool read_only = rng_below(seed, 4) == 0;
    for (unsigned i = 0; i < n; i++) {
        /* r is drawn for a scan too, which ignores it: a seed replays the attempts it always did */
        unsigned r = (unsigned)rng_below(seed, TW_NREG);
        unsigned what = (unsigned)rng_below(seed, 20);
        int rc;
        if (what == 0) {
            did->touched = (UINT64_C(1) << TW_NREG) - 1;
            if ((rc = tw_reg_scan(t, ops, nops))) return rc;
            did->scans++;
            continue;
        }
        did->touched |= UINT64_C(1) << r;
        bool rmw = !read_only && what >= 8;
        uint64_t v;
        if ((rc = tw_reg_read(t, r, rmw, &v))) return rc;
        ops[(*nops)++] = (struct hist_op){HIST_READ, r, v};
        if (!rmw) continue;
        uint64_t nv = tw_uid(id, ++*counter);
        if ((rc = tw_reg_write(t, r, nv))) return rc;
        ops[(*nops)++] = (struct hist_op){HIST_WRITE, r, nv};
    }
    return rdkv_txn_commit(t);
}

/* Room for one more attempt of `ops` ops. */
static bool hist_reserve(struct tw_hist *h, size_t ops)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 1024;
        struct hist_txn *n = realloc(h->txns, cap * sizeof *n);
        if (!n) return false;
        h->txns = n;
        h->cap = cap;
    }
    if (h->nops + ops > h->opcap) {
        size_t cap = h->opcap ? h->opcap * 2 : 4096;
        while (cap < h->nops + ops) cap *= 2;
        struct hist_op *n = realloc(h->ops, cap * sizeof *n);
        if (!n) return false;
        h->ops = n;
        h->opcap = cap;
    }
    return true;
}

bool tw_hist_add(struct tw_hist *h, uint64_t id, uint8_t status, const struct hist_op *ops,
                 uint32_t n)
{
    if (!hist_reserve(h, n)) return false;
    if (n) memcpy(h->ops + h->nops, ops, n * sizeof *ops);
    h->txns[h->n++] = (struct hist_txn){id, status, n, (const struct hist_op *)(uintptr_t)h->nops};
    h->nops += n;
    return true;
}

void tw_hist_free(struct tw_hist *h)
{
    free(h->txns);
    free(h->ops);
    memset(h, 0, sizeof *h);
}

size_t tw_hist_append(struct hist_txn *all, const struct tw_hist *h)
{
    for (size_t j = 0; j < h->n; j++) {
        all[j] = h->txns[j];
        all[j].ops = h->ops + (uintptr_t)all[j].ops;
    }
    return h->n;
}

uint64_t tw_hist_count(const struct hist_txn *h, size_t n, uint8_t status, uint64_t *writes)
{
    uint64_t count = 0, w = 0;
    for (size_t i = 0; i < n; i++) {
        if (h[i].status != status) continue;
        count++;
        for (uint32_t o = 0; o < h[i].nops; o++) w += h[i].ops[o].kind == HIST_WRITE;
    }
    if (writes) *writes = w;
    return count;
}

void tw_hist_copy(struct hist_txn *dst, struct hist_op *ops, const struct hist_txn *src, size_t n)
{
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(ops + at, src[i].ops, src[i].nops * sizeof *ops);
        dst[i] = src[i];
        dst[i].ops = ops + at;
        at += src[i].nops;
    }
}

bool tw_hist_plant_lost_update(struct hist_txn *h, size_t n, const char *label)
{
    for (size_t i = 0; i < n; i++) {
        if (h[i].status != HIST_COMMITTED) continue;
        struct hist_op *ops = (struct hist_op *)h[i].ops;
        for (uint32_t o = 0; o + 1 < h[i].nops; o++) {
            if (ops[o].kind != HIST_READ || ops[o + 1].kind != HIST_WRITE ||
                ops[o + 1].key != ops[o].key || ops[o].value == 0)
                continue;
            bool first = true; /* T's first access to the register */
            for (uint32_t p = 0; p < o; p++)
                if (ops[p].key == ops[o].key) first = false;
            if (!first) continue;
            /* W, the committed writer of ops[o].value, and the value it read first */
            for (size_t j = 0; j < n; j++) {
                if (h[j].status != HIST_COMMITTED || j == i) continue;
                const struct hist_op *wo = h[j].ops;
                for (uint32_t q = 1; q < h[j].nops; q++)
                    if (wo[q].kind == HIST_WRITE && wo[q].key == ops[o].key &&
                        wo[q].value == ops[o].value && wo[q - 1].kind == HIST_READ &&
                        wo[q - 1].key == ops[o].key) {
                        fprintf(stderr, "  %s: T%llu's read of register %u: %llu -> %llu\n", label,
                                (unsigned long long)h[i].id, ops[o].key,
                                (unsigned long long)ops[o].value,
                                (unsigned long long)wo[q - 1].value);
                        ops[o].value = wo[q - 1].value;
                        return true;
                    }
            }
        }
    }
    return false;
}

uint64_t tw_report_anomalies(const struct histcheck_report *r)
{
    return r->g0 + r->g1a + r->g1b + r->g1c + r->g2 + r->incompatible;
}

void tw_report_print(const char *what, int rc, const struct histcheck_report *r)
{
    fprintf(stderr,
            "  %s: rc %d, %llu txns checked (%llu unknown promoted, %llu dropped); G0 %llu G1a "
            "%llu G1b %llu G1c %llu G2 %llu incompatible %llu%s%s\n",
            what, rc, (unsigned long long)r->txns_checked, (unsigned long long)r->unknown_promoted,
            (unsigned long long)r->unknown_dropped, (unsigned long long)r->g0,
            (unsigned long long)r->g1a, (unsigned long long)r->g1b, (unsigned long long)r->g1c,
            (unsigned long long)r->g2, (unsigned long long)r->incompatible,
            r->first[0] ? "; first: " : "", r->first);
}

/* ------------------------------------------------------------------------------------------ */
/* The bank */

void tw_acct_key(char buf[16], int i)
{
    snprintf(buf, 16, "acct:%04u", (unsigned)i % 10000u);
}

int tw_acct_read(rdkv_txn *t, int i, bool upd, int64_t *bal, bool *exists)
{
    char k[16];
    tw_acct_key(k, i);
    uint64_t u = 0;
    int rc = get_u64(t, k, upd, &u);
    if (rc && rc != RDKV_ENOTFOUND) return rc;
    *bal = (int64_t)u; /* a closed account holds 0 */
    *exists = rc == 0;
    return 0;
}

int tw_acct_write(rdkv_txn *t, int i, int64_t bal)
{
    char k[16];
    tw_acct_key(k, i);
    return put_u64(t, k, (uint64_t)bal);
}

int tw_transfer(rdkv_txn *t, uint64_t *seed, int a, int b, struct tw_moved *m)
{
    int64_t ba, bb;
    bool ea, eb;
    *m = (struct tw_moved){0};
    int rc = tw_acct_read(t, a, true, &ba, &ea);
    if (!rc) rc = tw_acct_read(t, b, true, &bb, &eb);
    if (rc) return rc;
    if (ba < 0 || bb < 0) return RDKV_EPROTO; /* never: the audits report it too */
    char k[16];
    tw_acct_key(k, a);
    if (ba == 0) { /* nothing to move: close a drained closable account, or only read */
        if (!ea || !TW_CLOSABLE(a)) return 0;
        m->closed = true;
        return rdkv_txn_delete(t, k, strlen(k));
    }
    int64_t amt = rng_below(seed, 8) == 0 ? ba : 1 + (int64_t)rng_below(seed, (uint64_t)ba);
    m->amount = amt;
    m->reopened = !eb;
    if (ba - amt == 0 && TW_CLOSABLE(a)) {
        m->closed = true;
        rc = rdkv_txn_delete(t, k, strlen(k));
    } else {
        rc = tw_acct_write(t, a, ba - amt);
    }
    if (!rc) rc = tw_acct_write(t, b, bb + amt); /* an insert when b was closed */
    return rc;
}

/* The accounts' rows of a scan: their sum and least balance; *mismatch on a stray,
 * out-of-order or malformed row, and (byget non-NULL) on a disagreement with what the gets
 * read. Closes it. */
static int audit_rows(rdkv_iter *it, int nacct, const int64_t *byget, const bool *present,
                      int64_t *sum, int64_t *minbal, bool *mismatch)
{
    int64_t ssum = 0, smin = INT64_MAX;
    const void *k, *v;
    size_t kl, vl;
    int seen = 0, last = -1, rc;
    while ((rc = rdkv_iter_next(it, &k, &kl, &v, &vl)) == 1) {
        uint64_t u;
        int idx = -1;
        char kb[16];
        if (kl == 9 && !memcmp(k, "acct:", 5)) {
            memcpy(kb, k, 9);
            kb[9] = 0;
            idx = atoi(kb + 5);
        }
        if (idx < 0 || idx >= nacct || idx <= last || !tc_u64_get(v, vl, &u)) {
            *mismatch = true; /* a stray, out-of-order or malformed row */
            continue;
        }
        if (byget && (!present[idx] || byget[idx] != (int64_t)u)) *mismatch = true;
        for (int j = last + 1; byget && j < idx; j++)
            if (present[j]) *mismatch = true; /* a row the gets saw, the scan did not */
        last = idx;
        seen++;
        ssum += (int64_t)u;
        if ((int64_t)u < smin) smin = (int64_t)u;
    }
    rdkv_iter_close(it);
    if (rc) return rc;
    for (int j = last + 1; byget && j < nacct; j++)
        if (present[j]) *mismatch = true;
    if (seen < nacct && smin > 0) smin = 0; /* closed accounts hold 0 */
    if (byget && ssum != *sum) *mismatch = true;
    *sum = ssum;
    if (smin < *minbal) *minbal = smin;
    return 0;
}

int tw_audit(rdkv_txn *t, int nacct, int how, int64_t *sum, int64_t *minbal, bool *mismatch)
{
    int64_t byget[TW_MAXACCT];
    bool present[TW_MAXACCT];
    *sum = 0;
    *minbal = INT64_MAX;
    *mismatch = false;
    if (nacct < 0 || nacct > TW_MAXACCT) return RDKV_EINVAL;
    if (how != 1) {
        for (int i = 0; i < nacct; i++) {
            int rc = tw_acct_read(t, i, false, &byget[i], &present[i]);
            if (rc) return rc;
            *sum += byget[i];
            if (byget[i] < *minbal) *minbal = byget[i];
        }
    }
    if (how == 0) return 0;
    rdkv_iter *it;
    int rc = rdkv_txn_scan(t, "acct:", 5, "acct;", 5, 0, &it);
    if (rc) return rc;
    return audit_rows(it, nacct, how == 2 ? byget : NULL, present, sum, minbal, mismatch);
}

int tw_audit_oneshot(rdkv_session *s, int nacct, int64_t *sum, int64_t *minbal, bool *mismatch)
{
    *sum = 0;
    *minbal = INT64_MAX;
    *mismatch = false;
    if (nacct < 0 || nacct > TW_MAXACCT) return RDKV_EINVAL;
    rdkv_iter *it;
    int rc = rdkv_scan(s, "acct:", 5, "acct;", 5, 0, &it);
    return rc ? rc : audit_rows(it, nacct, NULL, NULL, sum, minbal, mismatch);
}

const char *tw_audit_name(int how)
{
    return how == 0 ? "gets" : how == 1 ? "scan" : how == 2 ? "gets+scan" : "one-shot scan";
}

int tw_run_until(rdkv_session *s, int64_t deadline, int (*body)(rdkv_txn *t, void *arg),
                 void *arg)
{
    rdkv_txn *t = NULL;
    int rc = RDKV_ETIMEDOUT;
    while (clock_now_ns() < deadline) {
        if (!t && rdkv_txn_begin(s, &t)) {
            t = NULL;
            rdkv_sleep_us(50000);
            continue;
        }
        rc = body(t, arg);
        if (!rc) rc = rdkv_txn_commit(t);
        if (!rc) break;
        if (rdkv_txn_on_error(t, rc)) { /* (it aborted and began t again when it returns 0) */
            rdkv_txn_free(t);
            t = NULL;
            rdkv_sleep_us(50000);
        }
    }
    if (t) rdkv_txn_free(t);
    return rc;
}
