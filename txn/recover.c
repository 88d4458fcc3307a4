/* Recovery (internal.h): the keeper thread and the restart.
 *
 * The keeper keeps the locks of the transactions prepared here alive -- its coordinators' holds
 * on this node's rows (lock_keep_x, range_server_keep) and the locks of the transactions
 * re-established from the log -- releases the holds of coordinators gone, and settles those
 * re-established transactions once the asker (indoubt.c) has learned their outcome. It never
 * sends a request and waits for an answer: a lock kept alive must never wait behind a
 * coordinator that answers slowly (docs/transactions.md, "How an in-doubt transaction's rows
 * stay locked").
 *
 * The restart: what the redo log (and the checkpoint it replays from) says of two-phase
 * commits, record by record (txn_recovery_*); the in-doubt transactions re-established from it
 * with their rows locked by local transactions of this node until their coordinator answers;
 * and the state a checkpoint carries so that the log behind it can go (txn_env_state).
 * docs/transactions.md, "The logged commit". */
#include "txn/coord.h"

#include "storage/wal.h"

#include "common/log.h"

#include <stdlib.h>
#include <string.h>

#define KEEP_BATCH 32

/* Lock a recovered in-doubt transaction's writes (wal_writes_unpack's callback). */
static int lock_write(void *arg, const struct wal_write *w)
{
    struct txn *t = arg;
    if (w->op == WAL_OP_PUT) return txn_put(t, w->key, w->klen, w->val, w->vlen);
    int rc = txn_del(t, w->key, w->klen);
    return rc == RDKV_ENOTFOUND ? 0 : rc;
}

/* The in-doubt transactions of r: their rows locked by local transactions of the keeper's
 * context c, each recorded as prepared here (to be asked about at once). */
static int recover_lock(struct txn_env *e, struct fab_ctx *c, struct txn_recovery *r)
{
    for (struct rprep *rp = r->preps; rp; rp = rp->next) {
        if (rp->coord == e->me && !r->adopt) continue; /* (own ones: txn_recovery_own) */
        if (rp->coord >= e->n) {
            log_error("txn %llx: in doubt, but its coordinator, node %u, is not in this cluster "
                      "(%u nodes): its PREPARE is left in the log", (unsigned long long)rp->txid,
                      rp->coord, e->n);
            continue;
        }
        struct txn_worker *w = NULL;
        struct txn *t = NULL;
        struct prepared *p = calloc(1, sizeof *p);
        int rc = p ? txn_worker_create_on(e, c, &w) : RDKV_ENOMEM;
        if (!rc) txn_worker_set_lock_timeout(w, 5 * NS_PER_S); /* (nobody else runs yet) */
        if (!rc) w->adopting = r->adopt;
        if (!rc) rc = txn_begin(w, &t);
        if (!rc) rc = wal_writes_unpack(rp->w, rp->len, lock_write, t);
        if (rc) {
            log_error("txn %llx: in doubt, but its rows could not be locked: %s",
                      (unsigned long long)rp->txid, rdkv_strerror(rc));
            txn_worker_destroy(w);
            free(p);
            return rc;
        }
        p->txid = rp->txid;
        p->coord = rp->coord;
        p->rw = w;
        p->rt = t;
        p->bytes = rp->w; /* (kept: a commit that must be tried again, and the checkpoints') */
        p->wlen = rp->len;
        rp->w = NULL;
        p->next_ask = 0; /* ask at once */
        part_record(e, p);
    }
    return 0;
}

/* A recovered in-doubt transaction's outcome, on the keeper (p is listed, marked committing by
 * the asker): commits its writes under the locks it holds, logging COMMIT under its own txid, or
 * aborts and logs END; then p leaves the list (for the outcome memory when committed) and is
 * freed -- all under a hold, so a checkpoint sees either p or its outcome record applied. */
static void recovered_finish(struct txn_env *e, struct prepared *p, bool commit)
{
    struct txn *t = p->rt;
    struct wal_hold hold;
    if (e->wal) wal_hold(e->wal, &hold);
    int rc = 0;
    if (commit) {
        t->log_txid = p->txid; /* its COMMIT record settles the PREPARE at the next replay */
        rc = txn_commit(t);
        /* Its locks are kept (row locks of this node's cohort have no lease; its points are kept
         * from eviction by the keeper), so this cannot fail for them. Should it all the same, the
         * decision is commit: the locks are taken again and the writes committed -- full values,
         * which would overwrite a write made in between: said as an error. */
        if (rc == RDKV_EABORTED)
            log_error("txn %llx: in doubt, decided commit, and its locks here were lost: taking "
                      "them again to commit", (unsigned long long)p->txid);
        for (int again = 0; rc == RDKV_EABORTED && again < 10; again++) {
            rc = txn_begin(p->rw, &t);
            if (!rc) rc = wal_writes_unpack(p->bytes, p->wlen, lock_write, t);
            if (!rc) {
                t->log_txid = p->txid;
                rc = txn_commit(t);
            } else if (t) {
                txn_abort(t);
            }
        }
        if (rc) {
            /* the log refused the COMMIT record, or the locks stayed lost: the node's memory
             * cannot say the transaction committed; its restart will (the PREPARE is open) */
            char why[96];
            snprintf(why, sizeof why, "txn %llx: decided commit, and its commit here failed (%s)",
                     (unsigned long long)p->txid, rdkv_strerror(rc));
            if (e->wal) wal_fail_stop(e->wal, why);
            log_error("%s", why);
        }
    } else {
        txn_abort(t);
        if (e->wal) txn_log_end(e, p->txid);
        /* taken over by a promotion: the other backups forget its PREPARE too */
        if (e->cfg.ship_rec)
            e->cfg.ship_rec(e->cfg.ship_arg, TXN_SHIP_FORGET, p->txid, p->bytes, p->wlen);
    }
    pthread_mutex_lock(&e->pmu);
    part_settle_locked(e, p, commit && !rc);
    pthread_mutex_unlock(&e->pmu);
    if (e->wal) wal_unhold(e->wal, &hold);
    txn_worker_destroy(p->rw);
    free(p->bytes);
    free(p);
}

/* Refreshes the leases of a recovered transaction's locks (its own node's: row locks of this
 * node's cohort, and the points of its inserted and deleted keys in this node's range server). */
static void recovered_refresh(struct txn_env *e, struct prepared *p)
{
    struct txn *t = p->rt;
    for (uint32_t i = 0; i < t->nents; i++) {
        struct tent *en = &t->ents[i];
        if (en->lk.mode) lock_refresh(&en->lk);
        /* kept from eviction, and their lease (as this transaction sees it) runs from now */
        int64_t t0 = clock_now_ns();
        if (en->rh && en->rh->mode && en->rh->node == e->me &&
            range_server_keep(e->rs, TXN_RANGE_SPACE, en->rh->token) == 0)
            en->rh->granted_min = t0;
    }
}

/* One round of the keeper: the holds due to be kept alive, the releases asked for, the
 * recovered transactions' locks refreshed, and their outcomes the asker learned. Returns when it
 * wants to run again (INT64_MAX: nothing kept). */
static int64_t keep_step(struct txn_env *e, int64_t now)
{
    int64_t next = INT64_MAX, every = e->cfg.lease_ns / 4;
    struct held *keep = NULL;
    struct prepared *refresh[KEEP_BATCH];
    unsigned nkeep = 0, nref = 0;
    pthread_mutex_lock(&e->pmu);
    struct held *rel = e->releases;
    e->releases = NULL;
    struct rdone *done = e->rdone;
    e->rdone = NULL;
    for (struct prepared *p = e->prep; p; p = p->next) {
        if (p->charge && p->coord != e->me && p->next_keep <= now && nkeep < KEEP_BATCH) {
            struct held *h = part_held_of(p); /* (copied: a COMMIT may settle p meanwhile) */
            if (h) {
                h->next = keep;
                keep = h;
                nkeep++;
            }
            p->next_keep = now + every;
        }
        /* (only the keeper takes a recovered one out of the list: it stays valid after pmu) */
        if (p->rt && p->next_keep <= now && nref < KEEP_BATCH) {
            refresh[nref++] = p;
            p->next_keep = now + every;
        }
        if ((p->charge || p->rt) && p->next_keep < next) next = p->next_keep;
    }
    pthread_mutex_unlock(&e->pmu);
    for (unsigned i = 0; i < nref; i++) recovered_refresh(e, refresh[i]);
    while (keep) {
        struct held *h = keep;
        keep = h->next;
        part_holds_do(e, h, false);
        free(h);
    }
    while (rel) {
        struct held *h = rel;
        rel = h->next;
        part_holds_do(e, h, true);
        free(h);
    }
    while (done) {
        struct rdone *d = done;
        done = d->next;
        pthread_mutex_lock(&e->pmu);
        struct prepared *p = e->prep;
        while (p && !(p->rt && p->txid == d->txid)) p = p->next;
        pthread_mutex_unlock(&e->pmu);
        if (p) recovered_finish(e, p, d->commit);
        free(d);
    }
    return nkeep == KEEP_BATCH || nref == KEEP_BATCH ? now : next;
}

/* The keeper's thread: a fabric context and lock thread of its own (e->ilt, its lock_keep_x and
 * lock_release_x), so that nothing else it does waits on another thread's posts. */
void *txn_keeper_main(void *arg)
{
    struct txn_env *e = arg;
    struct fab_ctx *c = NULL;
    struct lock_thread lt;
    bool ok = fab_ctx_create(e->f, &c) == 0;
    if (!ok) log_error("transaction keeper: no fabric context; prepared rows are left to their "
                       "coordinators' leases");
    if (ok && lock_thread_init(&lt, c, &e->lcfg) == 0) e->ilt = &lt;
    else if (ok) log_error("transaction keeper: cannot attach to the lock layer; prepared rows "
                           "are left to their coordinators' leases");
    int64_t next = 0;
    pthread_mutex_lock(&e->imu);
    while (!e->istop) {
        if (e->kkick) {
            e->kkick = false;
            next = 0;
        }
        if (e->recov) { /* txn_env_recover: lock the rows of the in-doubt ones, record them */
            struct txn_recovery *r = e->recov;
            pthread_mutex_unlock(&e->imu);
            int rc = ok ? recover_lock(e, c, r) : RDKV_ENOMEM;
            pthread_mutex_lock(&e->imu);
            e->recov = NULL;
            e->recov_rc = rc ? rc : 1;
            pthread_cond_broadcast(&e->rcv);
            txn_recovery_free(r);
            e->akick = true; /* (the asker asks about them at once) */
            pthread_cond_signal(&e->acv);
            next = 0;
            continue;
        }
        int64_t now = clock_now_ns();
        if (ok && now >= next) {
            pthread_mutex_unlock(&e->imu);
            next = keep_step(e, now);
            pthread_mutex_lock(&e->imu);
            continue;
        }
        txn_indoubt_sleep(e, &e->kcv, &e->kwake, ok ? next : INT64_MAX);
    }
    pthread_mutex_unlock(&e->imu);
    /* the recovered in-doubt transactions' locks are this thread's: given up here, with no
     * END (stopping decides nothing; the log keeps them in doubt) */
    for (;;) {
        pthread_mutex_lock(&e->pmu);
        struct prepared *p = e->prep;
        while (p && !p->rt) p = p->next;
        if (p) part_settle_locked(e, p, false);
        pthread_mutex_unlock(&e->pmu);
        if (!p) break;
        txn_worker_destroy(p->rw);
        free(p->bytes);
        free(p);
    }
    pthread_mutex_lock(&e->pmu);
    struct held *rel = e->releases; /* (the node stops: leases recover them) */
    e->releases = NULL;
    struct rdone *done = e->rdone;
    e->rdone = NULL;
    pthread_mutex_unlock(&e->pmu);
    while (rel) {
        struct held *h = rel;
        rel = h->next;
        free(h);
    }
    while (done) {
        struct rdone *d = done;
        done = d->next;
        free(d);
    }
    if (e->ilt) {
        e->ilt = NULL;
        lock_thread_drop_abandoned(&lt);
        lock_thread_fini(&lt);
    }
    if (c) fab_ctx_destroy(c);
    return NULL;
}

int txn_env_recover(struct txn_env *e, struct txn_recovery *r, char *err, size_t errcap)
{
    /* the commit decisions not known to have reached every participant: delivered again, and
     * what a participant that asks is told */
    int drc = coord_recovered(e, r, err, errcap);
    if (drc) {
        txn_recovery_free(r);
        return drc;
    }
    /* the commits this node took part in whose coordinators may still ask */
    int64_t due = clock_now_ns() + OUTC_ASK_NS;
    pthread_mutex_lock(&e->pmu);
    for (size_t i = 0; i < r->nouts; i++) outc_add_locked(e, r->outs[i], due);
    pthread_mutex_unlock(&e->pmu);
    /* the in-doubt ones: their rows locked by the keeper, then asked about by the asker */
    int rc = txn_recovery_hand(e, r);
    if (rc) snprintf(err, errcap, "cannot lock the rows of the in-doubt transactions found in the "
                     "log: %s", rdkv_strerror(rc));
    return rc;
}

int txn_recovery_hand(struct txn_env *e, struct txn_recovery *r)
{
    pthread_mutex_lock(&e->imu);
    e->recov = r;
    e->recov_rc = 0;
    e->kkick = true;
    pthread_cond_signal(&e->kcv);
    int64_t until_ns = clock_now_ns() + 60 * NS_PER_S;
    while (!e->recov_rc && clock_now_ns() < until_ns) {
        struct timespec until = clock_ts(until_ns);
        pthread_cond_timedwait(&e->rcv, &e->imu, &until);
    }
    int rc = e->recov_rc == 1 ? 0 : e->recov_rc ? e->recov_rc : RDKV_ETIMEDOUT;
    pthread_mutex_unlock(&e->imu);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Restart: what the redo log says of two-phase commits (docs/transactions.md, "The logged
 * commit"). A PREPARE stays open until a COMMIT (its writes, installed here) or an END (abort,
 * or its coordinator's forgetting) of the same txid; a commit DECISION until its END. A COMMIT
 * that closes the PREPARE of another coordinator is a commit this node took part in: it goes to
 * the outcome memory. Few are open at any LSN (those in flight), so plain lists do. */

int txn_recovery_create(uint16_t me, struct txn_recovery **out)
{
    struct txn_recovery *r = calloc(1, sizeof *r);
    if (!r) return RDKV_ENOMEM;
    r->me = me;
    *out = r;
    return 0;
}

static int ignore_write(void *arg, const struct wal_write *w)
{
    (void)arg;
    (void)w;
    return 0;
}

static void rprep_free(struct rprep *p)
{
    free(p->w);
    free(p);
}

int txn_recovery_add_prep(struct txn_recovery *r, uint64_t txid, uint16_t coord,
                          const uint8_t *writes, uint32_t len)
{
    int rc = wal_writes_unpack(writes, len, ignore_write, NULL);
    if (rc) return rc;
    struct rprep *p = calloc(1, sizeof *p);
    if (!p || !(p->w = malloc(len ? len : 1))) {
        free(p);
        return RDKV_ENOMEM;
    }
    p->txid = txid;
    p->coord = coord;
    p->len = len;
    memcpy(p->w, writes, len);
    /* (a txid is prepared once: the same PREPARE in a checkpoint and the log after it) */
    for (struct rprep **pp = &r->preps; *pp; pp = &(*pp)->next)
        if ((*pp)->txid == txid) {
            struct rprep *old = *pp;
            *pp = old->next;
            rprep_free(old);
            break;
        }
    p->next = r->preps;
    r->preps = p;
    return 0;
}

static void rdec_free(struct rdec *d)
{
    free(d->nodes);
    free(d);
}

static int outs_add(struct txn_recovery *r, uint64_t txid)
{
    if (r->nouts == r->capouts) {
        size_t cap = r->capouts ? r->capouts * 2 : 64;
        uint64_t *n = realloc(r->outs, cap * sizeof *n);
        if (!n) return RDKV_ENOMEM;
        r->outs = n;
        r->capouts = cap;
    }
    r->outs[r->nouts++] = txid;
    return 0;
}

/* Drops the open PREPARE (and, for an END, DECISION) of txid; a COMMIT that closes another
 * coordinator's PREPARE goes to the outcome memory. */
static int recovery_close(struct txn_recovery *r, uint64_t txid, uint8_t type)
{
    int rc = 0;
    for (struct rprep **pp = &r->preps; *pp; pp = &(*pp)->next)
        if ((*pp)->txid == txid) {
            struct rprep *p = *pp;
            *pp = p->next;
            if (type == WAL_COMMIT && p->coord != r->me) rc = outs_add(r, txid);
            rprep_free(p);
            break;
        }
    if (type != WAL_END) return rc;
    for (struct rdec **dp = &r->decs; *dp; dp = &(*dp)->next)
        if ((*dp)->txid == txid) {
            struct rdec *d = *dp;
            *dp = d->next;
            rdec_free(d);
            break;
        }
    return rc;
}

static bool decided(const struct txn_recovery *r, uint64_t txid)
{
    for (const struct rdec *d = r->decs; d; d = d->next)
        if (d->txid == txid) return true;
    return false;
}

int txn_recovery_rec(struct txn_recovery *r, const struct wal_rec *rec)
{
    switch (rec->type) {
    case WAL_COMMIT:
    case WAL_END: return recovery_close(r, rec->txid, rec->type);
    case WAL_PREPARE:
        if (rec->len < 2 || !rec->txid) return RDKV_EPROTO;
        return txn_recovery_add_prep(r, rec->txid, pack_get_u16le(rec->payload),
                                     rec->payload + 2, rec->len - 2);
    case WAL_DECISION: {
        /* u8 decision, u16 count, u16 nodes[count]: only commits are logged */
        if (rec->len < 3 || !rec->txid) return RDKV_EPROTO;
        uint8_t how = rec->payload[0];
        uint16_t n = pack_get_u16le(rec->payload + 1);
        if ((how != WAL_DECIDE_COMMIT && how != WAL_DECIDE_ABORT) || rec->len != 3u + 2u * n)
            return RDKV_EPROTO;
        /* (a checkpoint's names the participants still to confirm: it comes first, and wins
         * over the same DECISION in the log after it) */
        if (how == WAL_DECIDE_ABORT || decided(r, rec->txid)) return 0;
        struct rdec *d = calloc(1, sizeof *d);
        if (!d || !(d->nodes = calloc(n ? n : 1, sizeof *d->nodes))) {
            free(d);
            return RDKV_ENOMEM;
        }
        d->txid = rec->txid;
        d->n = n;
        for (uint16_t i = 0; i < n; i++)
            d->nodes[i] = pack_get_u16le(rec->payload + 3 + 2 * i);
        d->next = r->decs;
        r->decs = d;
        return 0;
    }
    /* (a replicated node's records: never in the transaction layer's own log) */
    default: return RDKV_EPROTO;
    }
}

int txn_recovery_own(struct txn_recovery *r,
                     int (*fn)(void *arg, uint64_t txid, const void *writes, uint32_t len),
                     void *arg)
{
    /* this node's own share of a 2PC it coordinated: logged as a PREPARE right before the
     * DECISION; decided commit -> installed now; no decision -> presumed abort, dropped */
    for (struct rprep **pp = &r->preps; *pp;) {
        struct rprep *p = *pp;
        if (p->coord != r->me) {
            pp = &p->next;
            continue;
        }
        *pp = p->next;
        int rc = decided(r, p->txid) ? fn(arg, p->txid, p->w, p->len) : 0;
        rprep_free(p);
        if (rc) return rc;
    }
    return 0;
}

void txn_recovery_counts(const struct txn_recovery *r, unsigned *indoubt, unsigned *decisions)
{
    *indoubt = *decisions = 0;
    for (const struct rprep *p = r->preps; p; p = p->next) (*indoubt)++;
    for (const struct rdec *d = r->decs; d; d = d->next) (*decisions)++;
}

void txn_recovery_free(struct txn_recovery *r)
{
    if (!r) return;
    while (r->preps) {
        struct rprep *p = r->preps;
        r->preps = p->next;
        rprep_free(p);
    }
    while (r->decs) {
        struct rdec *d = r->decs;
        r->decs = d->next;
        rdec_free(d);
    }
    free(r->outs);
    free(r);
}

/* ------------------------------------------------------------------------------------------ */
/* The checkpoint's part of the layer: what a restart needs that the log behind the checkpoint's
 * replay LSN L held -- every transaction prepared here (a PREPARE record, whatever its LSN), the
 * logged commit decisions not yet closed by a durable END (a DECISION naming the participants
 * still to confirm), and the outcome memory -- as records in the log's own payloads:
 *     u8 type, u64 txid, u32 payload bytes, payload
 * type WAL_PREPARE (u16 coordinator, the writes), WAL_DECISION (u8 commit, u16 n, u16 nodes[n]),
 * STATE_OUTCOME (no payload). A restart loads it before it replays the log from L (which may
 * repeat some of it: the records are idempotent there), so the log below L may go. Taken after
 * L, every record below which is applied in memory (wal_checkpoint_lsn) and durable. */

#define STATE_OUTCOME 0x81u

static int state_put(struct pack_w *w, uint8_t type, uint64_t txid, const void *p, uint32_t len)
{
    pack_u8(w, type);
    pack_u64(w, txid);
    pack_u32(w, len);
    uint8_t *d = pack_w_room(w, len);
    if (d && len) memcpy(d, p, len);
    return w->err ? RDKV_ENOMEM : 0;
}

int txn_env_state(struct txn_env *e, uint64_t replay_lsn, uint8_t **out, size_t *len)
{
    struct pack_w w;
    pack_w_init(&w);
    int rc = 0;
    pthread_mutex_lock(&e->pmu);
    for (struct prepared *p = e->prep; p && !rc; p = p->next) {
        size_t n;
        uint8_t *pl = p->rt ? NULL : part_prepare_payload(p, &n);
        if (p->rt) {
            pl = malloc(2 + (size_t)p->wlen);
            n = 2 + (size_t)p->wlen;
            if (pl) {
                pack_put_u16le(pl, p->coord);
                memcpy(pl + 2, p->bytes, p->wlen);
            }
        }
        rc = pl ? state_put(&w, WAL_PREPARE, p->txid, pl, (uint32_t)n) : RDKV_ENOMEM;
        free(pl);
    }
    for (size_t i = 0; i < e->outc_cap && !rc; i++)
        if (e->outc[i].txid) rc = state_put(&w, STATE_OUTCOME, e->outc[i].txid, NULL, 0);
    pthread_mutex_unlock(&e->pmu);
    pthread_mutex_lock(&e->cmu);
    for (struct coord_rec *r = e->crecs; r && !rc; r = r->next) {
        /* (an END below L is durable: every record below L is) */
        /* (one not decided yet has its DECISION at L or later, if at all: the log says) */
        if (!r->pend || r->state != TXN_STATE_COMMITTED || (r->end_lsn && r->end_lsn < replay_lsn))
            continue;
        uint8_t d[3 + 2 * r->npend];
        d[0] = WAL_DECIDE_COMMIT;
        pack_put_u16le(d + 1, (uint16_t)r->npend);
        for (unsigned i = 0; i < r->npend; i++) pack_put_u16le(d + 3 + 2 * i, r->pend[i]);
        rc = state_put(&w, WAL_DECISION, r->txid, d, 3 + 2 * r->npend);
    }
    pthread_mutex_unlock(&e->cmu);
    if (rc) {
        pack_w_free(&w);
        return rc;
    }
    *out = w.p;
    *len = w.len;
    return 0;
}

int txn_recovery_state(struct txn_recovery *r, const uint8_t *buf, size_t len)
{
    struct pack_r rd;
    pack_r_init(&rd, buf, len);
    while (rd.at < len) {
        struct wal_rec rec = {0};
        rec.type = unpack_u8(&rd);
        rec.txid = unpack_u64(&rd);
        rec.len = unpack_u32(&rd);
        rec.payload = pack_r_take(&rd, rec.len);
        if (rd.err || !rec.txid) return RDKV_EPROTO;
        int rc = 0;
        if (rec.type == STATE_OUTCOME) rc = rec.len ? RDKV_EPROTO : outs_add(r, rec.txid);
        else if (rec.type == WAL_PREPARE || rec.type == WAL_DECISION) rc = txn_recovery_rec(r, &rec);
        else rc = RDKV_EPROTO;
        if (rc) return rc;
    }
    return 0;
}
