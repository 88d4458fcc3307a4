/* The coordinator's records of its transactions in two-phase commit (internal.h): what it
 * answers a participant's TXN_RPC_QUERY, and, with a redo log, its commit DECISIONs -- made
 * durable before the first COMMIT leaves, delivered again to every participant that has not
 * confirmed, and closed by an END once all have. docs/transactions.md, "The logged commit". */
#include "txn/internal.h"

#include "storage/wal.h"

#include "common/log.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

/* The coordinator's memory of its transactions in two-phase commit, for TXN_RPC_QUERY: a record
 * lives from before the PREPAREs go out until the commit returns and every fence kept with a
 * commit decision has ended -- that is, for as long as a participant can hold the transaction
 * prepared and a commit may still be on its way there. Without a record the answer is
 * TXN_STATE_UNKNOWN: presumed abort (docs/transactions.md, "In-doubt transactions"). */

static struct coord_rec **crec_find(struct txn_env *e, uint64_t txid)
{
    struct coord_rec **pp = &e->crecs;
    while (*pp && (*pp)->txid != txid) pp = &(*pp)->next;
    return pp;
}

int coord_begin(struct txn_env *e, uint64_t txid)
{
    struct coord_rec *r = calloc(1, sizeof *r);
    if (!r) return RDKV_ENOMEM;
    r->txid = txid;
    r->state = TXN_STATE_ACTIVE;
    r->refs = 1;
    pthread_mutex_lock(&e->cmu);
    r->next = e->crecs;
    e->crecs = r;
    pthread_mutex_unlock(&e->cmu);
    return 0;
}

/* state: TXN_STATE_COMMITTED once decided so (before the first COMMIT); refs: +1 for a fence
 * kept with the commit decision, -1 when it or the commit ends (the record goes at 0). */
void coord_update(struct txn_env *e, uint64_t txid, uint8_t state, int refs)
{
    pthread_mutex_lock(&e->cmu);
    struct coord_rec **pp = crec_find(e, txid), *r = *pp;
    if (r) {
        if (state) r->state = state;
        r->refs += (unsigned)refs;
        if (!r->refs) *pp = r->next;
        else r = NULL;
    }
    pthread_mutex_unlock(&e->cmu);
    if (r && !r->refs) {
        free(r->pend); /* (emptied by coord_delivered, not freed: the record owns it) */
        free(r);
    }
}

uint8_t coord_state(struct txn_env *e, uint64_t txid)
{
    pthread_mutex_lock(&e->cmu);
    struct coord_rec *r = *crec_find(e, txid);
    uint8_t st = r ? r->state : TXN_STATE_UNKNOWN;
    pthread_mutex_unlock(&e->cmu);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* The logged commit's coordinator (docs/transactions.md, "The logged commit"). */

int coord_log_decision(struct txn_env *e, uint64_t txid, const uint16_t *nodes, unsigned nr)
{
    uint8_t buf[3 + 2 * (nr ? nr : 1)];
    buf[0] = WAL_DECIDE_COMMIT;
    pack_put_u16le(buf + 1, (uint16_t)nr);
    for (unsigned i = 0; i < nr; i++) pack_put_u16le(buf + 3 + 2 * i, nodes[i]);
    uint64_t lsn;
    if (txn_fault_take(e, TXN_FAULT_FAIL_DECISION)) wal_fault_inject(e->wal, WAL_FAULT_SYNC, EIO);
    int rc = wal_commit(e->wal, WAL_DECISION, txid, buf, 3 + 2 * nr, &lsn);
    if (rc) return rc;
    if (e->fault == TXN_FAULT_EXIT_AFTER_DECISION) {
        log_warn("test hook: exiting after the DECISION of txn %llx", (unsigned long long)txid);
        _exit(9);
    }
    return 0;
}

void txn_log_end(struct txn_env *e, uint64_t txid)
{
    uint64_t lsn;
    if (wal_append(e->wal, WAL_END, txid, NULL, 0, &lsn))
        log_warn("txn %llx: its END record was not logged", (unsigned long long)txid);
}

/* After the COMMITs of a logged decision: END if every participant confirmed, else the
 * unconfirmed ones are kept with the record and the in-doubt thread delivers again. */
void coord_pending(struct txn_env *e, uint64_t txid, const uint16_t *nodes, const int *st,
                   unsigned nr)
{
    unsigned np = 0;
    for (unsigned i = 0; i < nr; i++)
        if (st[i]) np++;
    uint16_t *pend =
        np && !txn_fault_take(e, TXN_FAULT_COORD_OOM) ? calloc(np, sizeof *pend) : NULL;
    if (!np || !pend) {
        if (np) log_error("txn %llx: no memory to deliver its commit again: its participants "
                          "ask for it", (unsigned long long)txid);
        else txn_log_end(e, txid);
        return;
    }
    np = 0;
    for (unsigned i = 0; i < nr; i++)
        if (st[i]) pend[np++] = nodes[i];
    pthread_mutex_lock(&e->cmu);
    struct coord_rec *r = *crec_find(e, txid);
    if (r) {
        r->refs++;
        r->pend = pend;
        r->npend = np;
        r->next_try = clock_now_ns() + DELIVER_AGAIN_NS;
        pend = NULL;
    }
    pthread_mutex_unlock(&e->cmu);
    free(pend);
    txn_indoubt_kick(e);
}

/* One participant confirmed (0, or "not prepared here": it voted yes with a durable PREPARE,
 * so it forgets it only after an outcome record, and the only outcome is this commit). */
void coord_delivered(struct txn_env *e, uint64_t txid, uint16_t node)
{
    bool done = false;
    pthread_mutex_lock(&e->cmu);
    struct coord_rec *r = *crec_find(e, txid);
    for (unsigned i = 0; r && i < r->npend; i++)
        if (r->pend[i] == node) {
            r->pend[i] = r->pend[--r->npend];
            done = r->npend == 0;
            break;
        }
    pthread_mutex_unlock(&e->cmu);
    if (!done) return;
    txn_log_end(e, txid);
    coord_update(e, txid, 0, -1);
}

unsigned coord_due(struct txn_env *e, int64_t now, uint64_t *tx, uint16_t *nd, unsigned max,
                   int64_t *next_out)
{
    unsigned n = 0;
    int64_t next = INT64_MAX;
    pthread_mutex_lock(&e->cmu);
    for (struct coord_rec *r = e->crecs; r; r = r->next) {
        if (!r->npend) continue;
        if (r->next_try <= now) {
            for (unsigned i = 0; i < r->npend && n < max; i++)
                if (!txn_down(e, r->pend[i])) {
                    tx[n] = r->txid;
                    nd[n++] = r->pend[i];
                }
            r->next_try = now + DELIVER_AGAIN_NS;
        }
        if (r->next_try < next) next = r->next_try;
    }
    pthread_mutex_unlock(&e->cmu);
    *next_out = next;
    return n;
}

int coord_recovered(struct txn_env *e, struct txn_recovery *r, char *err, size_t errcap)
{
    while (r->decs) {
        struct rdec *d = r->decs;
        r->decs = d->next;
        struct coord_rec *c = calloc(1, sizeof *c);
        bool ok = c != NULL;
        for (unsigned i = 0; ok && i < d->n; i++) ok = d->nodes[i] < e->n && d->nodes[i] != e->me;
        if (!ok) {
            snprintf(err, errcap, "the commit decision of txn %llx in the log %s",
                     (unsigned long long)d->txid,
                     c ? "names a node outside this cluster" : "cannot be kept: no memory");
            free(c);
            free(d->nodes);
            free(d);
            return c ? RDKV_EPROTO : RDKV_ENOMEM;
        }
        c->txid = d->txid;
        c->state = TXN_STATE_COMMITTED;
        c->pend = d->nodes;
        c->npend = d->n;
        c->refs = 1;
        free(d);
        pthread_mutex_lock(&e->cmu);
        c->next = e->crecs;
        e->crecs = c;
        pthread_mutex_unlock(&e->cmu);
    }
    return 0;
}

unsigned coord_undelivered(struct txn_env *e)
{
    unsigned n = 0;
    pthread_mutex_lock(&e->cmu);
    for (struct coord_rec *r = e->crecs; r; r = r->next)
        if (r->npend) n++;
    pthread_mutex_unlock(&e->cmu);
    return n;
}

void coord_free_all(struct txn_env *e)
{
    while (e->crecs) {
        struct coord_rec *r = e->crecs;
        e->crecs = r->next;
        free(r->pend);
        free(r);
    }
}
