/* The durable bank of the crash tests (durable_2pc, commit_faults): BANK_ACCTS accounts of
 * BANK_START each, transfers that also write a marker key of their own, and a client-side
 * ledger of each transfer's outcome. After a crash the markers say which transfers committed;
 * bank_check then holds the cluster to it: every acknowledged transfer is there, no cleanly
 * failed one is, every balance is exactly what the committed transfers make it (no transfer
 * partly applied) and the total holds. Also small helpers over a launcher cluster (one kvserver
 * process per node, tools/launcher.h). */
#ifndef RDKV_TEST_BANK_H
#define RDKV_TEST_BANK_H

#include "rdkv.h"
#include "tools/launcher.h"

#include <stdbool.h>
#include <stddef.h>

#define BANK_ACCTS 12
#define BANK_START 1000

enum bank_state {
    BANK_NOT_RUN = 0,
    BANK_ACKED = 1,   /* committed: acknowledged */
    BANK_UNKNOWN = 2, /* RDKV_EUNKNOWN, or no answer: either way, whole */
    BANK_FAILED = 3,  /* failed cleanly: nothing of it happened */
};

struct bank_xfer {
    unsigned from, to, amt;
    int state; /* enum bank_state */
};

/* The accounts' nodes in a cluster of nparts partitions (rdkv_key_partition). */
struct bank {
    unsigned nparts;
    unsigned where[BANK_ACCTS];
};
void bank_init(struct bank *b, unsigned nparts);
/* An account on node n other than skip, or BANK_ACCTS. */
unsigned bank_acct_on(const struct bank *b, unsigned n, unsigned skip);
/* Every account set to BANK_START (one-shot puts). */
int bank_load(rdkv_session *s);

void bank_acct_key(unsigned a, char *k, size_t cap);
void bank_mark_key(unsigned i, char *k, size_t cap);
/* An account's balance, read for update; and written. */
int bank_read_int(rdkv_txn *t, const char *k, long *out);
int bank_put_int(rdkv_txn *t, const char *k, long v);

/* Transfer x->amt from x->from to x->to, writing marker i, from session s; retried (bounded) on
 * conflicts and on a peer not back yet. x->state gets the outcome; the commit's status is
 * returned. */
int bank_transfer(rdkv_session *s, unsigned i, struct bank_xfer *x);

/* Reads every account and marker of ledger lx[0..ln) from s (retrying lock conflicts, bounded)
 * and checks the invariants with CHECK. Returns how many transfers are committed; *unknown_in
 * (may be NULL) gets how many of unknown outcome turned out committed. */
unsigned bank_check(const struct bank *b, rdkv_session *s, const struct bank_xfer *lx,
                    unsigned ln, unsigned *unknown_in);

/* A launcher cluster: a remote session on node (its client secret set in the environment). */
int bank_connect(struct launch *L, unsigned node, rdkv_session **s);
/* Whether node's log (all its starts) has a line containing what. */
bool bank_log_says(struct launch *L, unsigned node, const char *what);
/* A number in node's status (KV_RPC_STATUS, as kvctl status shows it): the digits right after
 * `field` (e.g. "\"decisions\":{\"pending\":"), or -1 (unreachable, or no such field). */
long bank_status_num(struct launch *L, unsigned node, const char *field);
/* Starts node again on its port and directory (REQUIREs success). */
void bank_restart(struct launch *L, const struct launch_opts *lo, unsigned node);

#endif
