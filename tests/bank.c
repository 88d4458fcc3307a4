/* The durable bank of the crash tests (tests/bank.h). */
#include "tests/bank.h"

#include "tests/harness.h"
#include "tests/txnwork.h"

#include "common/clock.h"
#include "rdma/fabric.h"
#include "rdma/rpc_types.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bank_init(struct bank *b, unsigned nparts)
{
    b->nparts = nparts;
    for (unsigned a = 0; a < BANK_ACCTS; a++) {
        char k[32];
        bank_acct_key(a, k, sizeof k);
        b->where[a] = rdkv_key_partition(k, strlen(k), nparts);
    }
}

unsigned bank_acct_on(const struct bank *b, unsigned n, unsigned skip)
{
    for (unsigned a = 0; a < BANK_ACCTS; a++)
        if (b->where[a] == n && a != skip) return a;
    return BANK_ACCTS;
}

int bank_load(rdkv_session *s)
{
    for (unsigned a = 0; a < BANK_ACCTS; a++) {
        char k[32], v[32];
        bank_acct_key(a, k, sizeof k);
        int n = snprintf(v, sizeof v, "%d", BANK_START);
        int rc = rdkv_put(s, k, strlen(k), v, (size_t)n);
        if (rc) return rc;
    }
    return 0;
}

void bank_acct_key(unsigned a, char *k, size_t cap) { snprintf(k, cap, "acct%u", a); }
void bank_mark_key(unsigned i, char *k, size_t cap) { snprintf(k, cap, "xfer%u", i); }

int bank_read_int(rdkv_txn *t, const char *k, long *out)
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

int bank_put_int(rdkv_txn *t, const char *k, long v)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld", v);
    return rdkv_txn_put(t, k, strlen(k), buf, (size_t)n);
}

int bank_transfer(rdkv_session *s, unsigned i, struct bank_xfer *x)
{
    char ka[32], kb[32], km[32];
    bank_acct_key(x->from, ka, sizeof ka);
    bank_acct_key(x->to, kb, sizeof kb);
    bank_mark_key(i, km, sizeof km);
    int rc = 0;
    /* conflicts, and a peer not reconnected yet after a restart, are retried (bounded) */
    for (int attempt = 0; attempt < 30; attempt++) {
        if (attempt && rc == RDKV_EUNAVAILABLE) rdkv_sleep_us(100000);
        rdkv_txn *t = NULL;
        rc = rdkv_txn_begin(s, &t);
        if (rc) break;
        long a = 0, b = 0;
        rc = bank_read_int(t, ka, &a);
        if (!rc) rc = bank_read_int(t, kb, &b);
        if (!rc) rc = bank_put_int(t, ka, a - (long)x->amt);
        if (!rc) rc = bank_put_int(t, kb, b + (long)x->amt);
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
    x->state = rc == 0                                                 ? BANK_ACKED
               : (rc == RDKV_EABORTED || rc == RDKV_EUNAVAILABLE) ? BANK_FAILED
                                                                   : BANK_UNKNOWN;
    return rc;
}

/* The ledger check's read: every account and every transfer's mark (tw_run_until's body). */
struct ledger_read {
    const struct bank *bk;
    unsigned ln, attempt;
    long bal[BANK_ACCTS];
    bool *present;
};

static int read_ledger(rdkv_txn *t, void *arg)
{
    struct ledger_read *lr = arg;
    unsigned attempt = lr->attempt++;
    int rc = 0;
    char k[32];
    for (unsigned a = 0; a < BANK_ACCTS && !rc; a++) {
        bank_acct_key(a, k, sizeof k);
        rc = bank_read_int(t, k, &lr->bal[a]);
        if (rc && rc != RDKV_EABORTED && attempt % 20 == 0)
            fprintf(stderr, "  reading %s (node %u): %s\n", k, lr->bk->where[a], rdkv_strerror(rc));
    }
    for (unsigned i = 0; i < lr->ln && !rc; i++) {
        bank_mark_key(i, k, sizeof k);
        const void *v;
        size_t vl;
        int r = rdkv_txn_get(t, k, strlen(k), &v, &vl);
        if (r == 0) lr->present[i] = true;
        else if (r == RDKV_ENOTFOUND) lr->present[i] = false;
        else rc = r;
    }
    return rc;
}

unsigned bank_check(const struct bank *bk, rdkv_session *s, const struct bank_xfer *lx,
                    unsigned ln, unsigned *unknown_in)
{
    struct ledger_read lr = {.bk = bk, .ln = ln};
    bool *present = lr.present = calloc(ln ? ln : 1, sizeof *present);
    CHECK(present != NULL);
    if (!present) return 0;
    long *bal = lr.bal;
    /* (a row locked by a transaction in doubt is freed once its participant has asked its
     * coordinator, 10 s after the PREPARE at most) */
    int rc = tw_run_until(s, clock_now_ns() + 30 * NS_PER_S, read_ledger, &lr);
    CHECK(rc == 0);
    if (rc) {
        free(present);
        return 0;
    }
    long want[BANK_ACCTS], total = 0;
    unsigned committed = 0;
    for (unsigned a = 0; a < BANK_ACCTS; a++) want[a] = BANK_START;
    for (unsigned i = 0; i < ln; i++) {
        if (lx[i].state == BANK_ACKED) CHECK(present[i]);   /* acknowledged: there */
        if (lx[i].state == BANK_FAILED) CHECK(!present[i]); /* failed cleanly: not there */
        if (!present[i]) continue;
        if (lx[i].state == BANK_UNKNOWN && unknown_in) ++*unknown_in;
        committed++;
        want[lx[i].from] -= lx[i].amt;
        want[lx[i].to] += lx[i].amt;
    }
    for (unsigned a = 0; a < BANK_ACCTS; a++) {
        if (bal[a] != want[a])
            fprintf(stderr, "  acct%u (node %u): %ld, the committed transfers make it %ld\n", a,
                    bk->where[a], bal[a], want[a]);
        CHECK_EQ(bal[a], want[a]); /* no transfer partly applied */
        for (unsigned i = 0; i < ln && bal[a] != want[a]; i++) /* the suspects */
            if (!present[i] && ((lx[i].to == a && (long)lx[i].amt == bal[a] - want[a]) ||
                                (lx[i].from == a && (long)lx[i].amt == want[a] - bal[a]))) {
                char k[32];
                bank_mark_key(i, k, sizeof k);
                fprintf(stderr, "    transfer %u: acct%u -> acct%u, %u, outcome %s: its marker "
                        "%s (node %u) is absent\n", i, lx[i].from, lx[i].to, lx[i].amt,
                        lx[i].state == BANK_ACKED     ? "acknowledged"
                        : lx[i].state == BANK_UNKNOWN ? "unknown"
                                                      : "failed",
                        k, rdkv_key_partition(k, strlen(k), bk->nparts));
            }
        total += bal[a];
    }
    CHECK_EQ(total, (long)BANK_ACCTS * BANK_START);
    free(present);
    return committed;
}

int bank_connect(struct launch *L, unsigned node, rdkv_session **s)
{
    char ep[300], secret[PATH_MAX + 40];
    snprintf(ep, sizeof ep, "%s:%u", L->cc.nodes[node].host, L->cc.nodes[node].port);
    snprintf(secret, sizeof secret, "%s/%s", L->dir, LAUNCH_CLIENT_SECRET);
    setenv("RDKV_SECRET_FILE", secret, 1);
    return rdkv_connect(ep, NULL, s);
}

bool bank_log_says(struct launch *L, unsigned node, const char *what)
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

void bank_restart(struct launch *L, const struct launch_opts *lo, unsigned node)
{
    char err[512] = "";
    int rc = launch_restart(L, lo, node, err, sizeof err);
    if (rc) fprintf(stderr, "  restart of node %u: %s\n", node, err);
    REQUIRE(rc == 0);
}

long bank_status_num(struct launch *L, unsigned node, const char *field)
{
    struct fab_opts o;
    fab_opts_init(&o);
    o.cluster = &L->cc;
    o.node = FAB_NODE_CLIENT; /* an operator's connection, with the node secret */
    o.transport = FAB_SOFT;
    if (L->cc.transport[0]) fab_transport_parse(L->cc.transport, &o.transport);
    o.connect_timeout_ns = NS_PER_S;
    struct fabric *f = NULL;
    struct fab_ctx *c = NULL;
    char err[512] = "";
    long v = -1;
    if (fab_open(&o, &f, err, sizeof err) == 0 && fab_ctx_create(f, &c) == 0) {
        struct fab_buf resp = {0};
        if (fab_rpc_call(c, (uint16_t)node, KV_RPC_STATUS, NULL, 0, &resp, 2 * NS_PER_S) == 0) {
            char *js = strndup((const char *)resp.data, resp.len);
            const char *at = js ? strstr(js, field) : NULL;
            if (at) v = strtol(at + strlen(field), NULL, 10);
            free(js);
        }
        fab_buf_free(&resp);
    }
    if (c) fab_ctx_destroy(c);
    if (f) fab_close(f);
    return v;
}
