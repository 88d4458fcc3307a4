/* A small rdkv client: opens a remote session, creates two accounts, moves money between them
 * in serializable transactions (rdkv_run_txn retries on conflicts), and prints the balances.
 *
 *     tools/cluster.sh start 3 /tmp/rdkv && eval "$(tools/cluster.sh endpoints /tmp/rdkv)"
 *     build/bin/example_bank                  # endpoints from KVCTL_ENDPOINTS
 *     build/bin/example_bank 127.0.0.1:7400   # or given
 */
#include "rdkv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct transfer {
    const char *from, *to;
    long amount;
};

/* Reads a balance (an ASCII decimal); a missing account reads as 0. */
static int balance(rdkv_txn *t, const char *acct, bool for_update, long *out)
{
    const void *v;
    size_t n;
    int rc = for_update ? rdkv_txn_get_for_update(t, acct, strlen(acct), &v, &n)
                        : rdkv_txn_get(t, acct, strlen(acct), &v, &n);
    if (rc == RDKV_ENOTFOUND) {
        *out = 0;
        return 0;
    }
    if (rc) return rc;
    char buf[32];
    if (n >= sizeof buf) return RDKV_EINVAL;
    memcpy(buf, v, n); /* the bytes belong to the transaction: copy before the next call */
    buf[n] = 0;
    *out = strtol(buf, NULL, 10);
    return 0;
}

static int set_balance(rdkv_txn *t, const char *acct, long v)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld", v);
    return rdkv_txn_put(t, acct, strlen(acct), buf, (size_t)n);
}

/* The transaction's body: run again from the start if it is retried. */
static int do_transfer(rdkv_txn *t, void *arg)
{
    const struct transfer *x = arg;
    long a, b;
    int rc;
    if ((rc = balance(t, x->from, true, &a)) || (rc = balance(t, x->to, true, &b))) return rc;
    if (a < x->amount) return RDKV_EINVAL; /* not enough money: abort, write nothing */
    if ((rc = set_balance(t, x->from, a - x->amount)) || (rc = set_balance(t, x->to, b + x->amount)))
        return rc;
    return 0; /* rdkv_run_txn commits */
}

static int open_accounts(rdkv_txn *t, void *arg)
{
    (void)arg;
    int rc = set_balance(t, "example:alice", 100);
    return rc ? rc : set_balance(t, "example:bob", 50);
}

static int print_all(rdkv_txn *t, void *arg)
{
    (void)arg;
    rdkv_iter *it;
    int rc = rdkv_txn_scan(t, "example:", 8, "example;", 8, 0, &it);
    if (rc) return rc;
    const void *k, *v;
    size_t kl, vl;
    while ((rc = rdkv_iter_next(it, &k, &kl, &v, &vl)) == 1)
        printf("  %.*s = %.*s\n", (int)kl, (const char *)k, (int)vl, (const char *)v);
    rdkv_iter_close(it);
    return rc;
}

int main(int argc, char **argv)
{
    const char *eps = argc > 1 ? argv[1] : getenv("KVCTL_ENDPOINTS");
    if (!eps) {
        fprintf(stderr, "usage: example_bank HOST:PORT[,HOST:PORT...] (or set KVCTL_ENDPOINTS; the\n"
                        "       cluster's client secret file comes from RDKV_SECRET_FILE)\n");
        return 2;
    }
    rdkv_options o;
    rdkv_options_init(&o);
    rdkv_session *s;
    int rc = rdkv_connect(eps, &o, &s);
    if (rc) {
        fprintf(stderr, "example_bank: cannot connect to %s: %s\n", eps, rdkv_strerror(rc));
        return 1;
    }
    struct transfer x = {"example:alice", "example:bob", 30};
    if ((rc = rdkv_run_txn(s, open_accounts, NULL)) == 0 && (rc = rdkv_run_txn(s, do_transfer, &x)) == 0) {
        printf("moved %ld from %s to %s; balances:\n", x.amount, x.from, x.to);
        rc = rdkv_run_txn(s, print_all, NULL);
    }
    if (rc) fprintf(stderr, "example_bank: %s (%s)\n", rdkv_strerror(rc), rdkv_status_name(rc));
    rdkv_session_close(s);
    return rc ? 1 : 0;
}
