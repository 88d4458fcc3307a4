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
 * prepared and a commit may still be on its way there -- and, for a logged commit decision,
 * until every participant has confirmed it and the END saying so is durable. Without a record
 * the answer is TXN_STATE_UNKNOWN: presumed abort (docs/transactions.md, "In-doubt
 * transactions"). */

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
        /* a replicated commit decision is forgotten on the backups too (queued, not waited) */
        if (r->state == TXN_STATE_COMMITTED && r->shipped && e->cfg.ship_rec)
            e->cfg.ship_rec(e->cfg.ship_arg, TXN_SHIP_FORGET, txid, NULL, 0);
        free(r->pend); /* (emptied by coord_delivered, not freed: the record owns it) */
        free(r);
    }
}

int coord_adopt(struct txn_env *e, uint64_t txid)
{
    pthread_mutex_lock(&e->cmu);
    struct coord_rec *r = *crec_find(e, txid);
    if (!r && (r = calloc(1, sizeof *r))) {
        r->txid = txid;
        r->refs = 1; /* (kept: its participants may ask at any time) */
        r->next = e->crecs;
        e->crecs = r;
    }
    if (r) r->state = TXN_STATE_COMMITTED;
    pthread_mutex_unlock(&e->cmu);
    return r ? 0 : RDKV_ENOMEM;
}

void coord_shipped(struct txn_env *e, uint64_t txid)
{
    pthread_mutex_lock(&e->cmu);
    struct coord_rec *r = *crec_find(e, txid);
    if (r) r->shipped = true;
    pthread_mutex_unlock(&e->cmu);
}

/* Whether r's END is durable (so every participant has confirmed, and the record is forgotten
 * at the next sweep): cmu held, durable read before. */
static bool ended(const struct coord_rec *r, uint64_t durable)
{
    return r->end_lsn && r->end_lsn <= durable;
}

uint8_t coord_answer(struct txn_env *e, uint64_t txid)
{
    /* a transaction of a partition whose takeover here has not taken its decisions over yet
     * -- a removed coordinator's, or this node's own after it came back from its log: not
     * "unknown" (that would be an abort), but "wait" */
    uint16_t c = txn_txid_node(txid);
    if (c < e->n && __atomic_load_n(&e->route[c].gate, __ATOMIC_ACQUIRE))
        return TXN_STATE_ACTIVE;
    return coord_state(e, txid);
}

uint8_t coord_state(struct txn_env *e, uint64_t txid)
{
    uint64_t durable = e->wal ? wal_durable_lsn(e->wal) : 0;
    pthread_mutex_lock(&e->cmu);
    struct coord_rec *r = *crec_find(e, txid);
    /* forgotten only once its END is durable: until then a restart would find the DECISION and
     * deliver it again, and the participants must still know the commit */
    uint8_t st = r && !ended(r, durable) ? r->state : TXN_STATE_UNKNOWN;
    pthread_mutex_unlock(&e->cmu);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* The logged commit's coordinator (docs/transactions.md, "The logged commit"). */

int coord_decide(struct txn_env *e, uint64_t txid, const uint16_t *nodes, unsigned nr)
{
    uint16_t *pend =
        txn_fault_take(e, TXN_FAULT_COORD_OOM) ? NULL : malloc((nr ? nr : 1) * sizeof *pend);
    if (!pend) {
        log_error("txn %llx: no memory to remember its commit decision until every participant "
                  "has it: aborting it", (unsigned long long)txid);
        return RDKV_ENOMEM;
    }
    for (unsigned i = 0; i < nr; i++) pend[i] = nodes[i];
    pthread_mutex_lock(&e->cmu);
    struct coord_rec *r = *crec_find(e, txid);
    if (r) {
        free(r->pend);
        r->pend = pend;
        r->npend = nr;
        pend = NULL;
    }
    pthread_mutex_unlock(&e->cmu);
    free(pend);
    return r ? 0 : RDKV_EINVAL;
}

int coord_log_decision(struct txn_env *e, uint64_t txid, const uint16_t *nodes, unsigned nr)
{
    uint8_t buf[3 + 2 * (nr ? nr : 1)];
    buf[0] = WAL_DECIDE_COMMIT;
    pack_put_u16le(buf + 1, (uint16_t)nr);
    for (unsigned i = 0; i < nr; i++) pack_put_u16le(buf + 3 + 2 * i, nodes[i]);
    uint64_t lsn;
    if (txn_fault_take(e, TXN_FAULT_FAIL_DECISION)) wal_fault_inject(e->wal, WAL_FAULT_SYNC, EIO);
    int rc = wal_append(e->wal, WAL_DECISION, txid, buf, 3 + 2 * nr, &lsn);
    if (rc) return rc; /* nothing written: nobody was told to commit, a clean abort */
    if (wal_wait(e->wal, lsn)) {
        /* it may be on disk or not, and the participants hold their PREPAREs under our locks:
         * releasing them now could let a later transaction write a row a restart then commits
         * over. The node stops instead, its locks kept alive by the participants, and its
         * restart decides from the log (docs/storage.md, "Errors"). */
        char why[96];
        snprintf(why, sizeof why, "txn %llx: its commit DECISION is not known durable",
                 (unsigned long long)txid);
        wal_fail_stop(e->wal, why);
    }
    if (txn_fault_is(e, TXN_FAULT_EXIT_AFTER_DECISION)) {
        log_warn("test hook: exiting after the DECISION of txn %llx", (unsigned long long)txid);
        _exit(9);
    }
    return 0;
}

uint64_t txn_log_end(struct txn_env *e, uint64_t txid)
{
    uint64_t lsn = 0;
    if (wal_append(e->wal, WAL_END, txid, NULL, 0, &lsn)) {
        log_warn("txn %llx: its END record was not logged", (unsigned long long)txid);
        return 0;
    }
    return lsn;
}

void coord_decided(struct txn_env *e, uint64_t txid)
{
    pthread_mutex_lock(&e->cmu);
    struct coord_rec *r = *crec_find(e, txid);
    if (r) {
        r->state = TXN_STATE_COMMITTED;
        if (r->pend) {
            r->refs++; /* the delivery's, until its END is durable */
            r->next_try = clock_now_ns() + DELIVER_AGAIN_NS;
        }
    }
    pthread_mutex_unlock(&e->cmu);
}

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
    /* every participant has it: END, not waited for; the record stays until the END is durable
     * (a restart before then finds the DECISION open and delivers it again, which the
     * participants' outcome memories answer) */
    uint64_t lsn = txn_log_end(e, txid);
    pthread_mutex_lock(&e->cmu);
    if ((r = *crec_find(e, txid))) r->end_lsn = lsn ? lsn : UINT64_MAX;
    pthread_mutex_unlock(&e->cmu);
    txn_indoubt_kick(e); /* (its sweep lets the record go once the END is durable) */
}

unsigned coord_due(struct txn_env *e, int64_t now, uint64_t *tx, uint16_t *nd, unsigned max,
                   int64_t *next_out)
{
    unsigned n = 0;
    int64_t next = INT64_MAX;
    uint64_t durable = e->wal ? wal_durable_lsn(e->wal) : 0;
    struct coord_rec *gone = NULL;
    pthread_mutex_lock(&e->cmu);
    for (struct coord_rec **pp = &e->crecs; *pp;) {
        struct coord_rec *r = *pp;
        if (r->pend && ended(r, durable)) {
            /* its END is durable: the delivery lets it go */
            free(r->pend);
            r->pend = NULL;
            if (--r->refs == 0) {
                *pp = r->next;
                r->next = gone;
                gone = r;
                continue;
            }
        }
        if (r->pend && r->end_lsn && r->end_lsn != UINT64_MAX) {
            /* (an END on its way to the disk: looked at again soon) */
            int64_t soon = now + DELIVER_AGAIN_NS;
            if (soon < next) next = soon;
        }
        /* (a record gets its participants before its DECISION is durable: nothing is delivered
         * before it is decided) */
        if (r->npend && r->state == TXN_STATE_COMMITTED) {
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
        pp = &r->next;
    }
    pthread_mutex_unlock(&e->cmu);
    while (gone) {
        struct coord_rec *r = gone;
        gone = r->next;
        free(r);
    }
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
        c->refs = 1; /* the delivery's, until its END is durable */
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
        if (r->npend && r->state == TXN_STATE_COMMITTED) n++;
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
