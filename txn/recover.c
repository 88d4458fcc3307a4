/* Recovery (internal.h): the in-doubt thread -- it asks the coordinators of the PREPAREs kept
 * here what became of them, keeps their coordinators' holds alive meanwhile, releases the holds
 * of coordinators gone, and delivers this node's logged commit decisions again -- and the
 * restart: what the redo log says of two-phase commits (txn_recovery_*), and the in-doubt
 * transactions re-established from it with their rows locked by local transactions of this node
 * until their coordinator answers. docs/transactions.md, "In-doubt transactions" and "The
 * logged commit". */
#include "txn/coord.h"

#include "storage/wal.h"

#include "common/log.h"

#include <stdlib.h>
#include <string.h>

static int64_t indoubt_step(struct txn_env *e, struct fab_ctx *c, int64_t now);
static int64_t deliver_step(struct txn_env *e, struct fab_ctx *c, int64_t now);
static int recover_lock(struct txn_env *e, struct fab_ctx *c, struct txn_recovery *r);

/* The in-doubt thread: asks coordinators about the PREPAREs kept here (indoubt_step) and
 * delivers logged decisions (deliver_step). A thread of its own with a fabric context of its
 * own, because an ask waits for an answer (up to RESOLVE_RPC_TIMEOUT_NS from a paused
 * coordinator): the janitor, which passes given-up lock tickets on, must never wait behind it. */
void *txn_indoubt_main(void *arg)
{
    struct txn_env *e = arg;
    struct fab_ctx *c = NULL;
    struct lock_thread lt;
    bool ok = fab_ctx_create(e->f, &c) == 0;
    if (!ok) log_error("transaction in-doubt thread: no fabric context; kept PREPAREs wait for "
                       "their decision or their coordinator's down verdict");
    /* (its lock thread keeps prepared transactions' holds alive for their coordinators) */
    if (ok && lock_thread_init(&lt, c, &e->lcfg) == 0) e->ilt = &lt;
    else if (ok) log_error("transaction in-doubt thread: cannot attach to the lock layer; "
                           "prepared rows are left to their coordinators' leases");
    int64_t next = 0;
    pthread_mutex_lock(&e->imu);
    while (!e->istop) {
        if (e->ikick) {
            e->ikick = false;
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
            next = 0;
            continue;
        }
        int64_t now = clock_now_ns();
        if (ok && now >= next) {
            pthread_mutex_unlock(&e->imu);
            next = indoubt_step(e, c, now);
            int64_t d = deliver_step(e, c, now);
            if (d < next) next = d;
            pthread_mutex_lock(&e->imu);
            continue;
        }
        if (!ok || next == INT64_MAX) {
            pthread_cond_wait(&e->icv, &e->imu); /* (a kept PREPARE sets ikick) */
        } else {
            struct timespec until = clock_ts(next);
            pthread_cond_timedwait(&e->icv, &e->imu, &until);
        }
    }
    pthread_mutex_unlock(&e->imu);
    /* the recovered in-doubt transactions' locks are this thread's: given up here, with no
     * END (stopping decides nothing; the log keeps them in doubt) */
    for (;;) {
        pthread_mutex_lock(&e->pmu);
        struct prepared **pp = &e->prep;
        while (*pp && !(*pp)->rt) pp = &(*pp)->next;
        struct prepared *p = *pp;
        if (p) *pp = p->next;
        pthread_mutex_unlock(&e->pmu);
        if (!p) break;
        txn_worker_destroy(p->rw);
        free(p->bytes);
        free(p);
    }
    pthread_mutex_lock(&e->pmu);
    struct held *rel = e->releases; /* (the node stops: leases recover them) */
    e->releases = NULL;
    pthread_mutex_unlock(&e->pmu);
    while (rel) {
        struct held *h = rel;
        rel = h->next;
        free(h);
    }
    if (e->ilt) {
        e->ilt = NULL;
        lock_thread_drop_abandoned(&lt);
        lock_thread_fini(&lt);
    }
    if (c) fab_ctx_destroy(c);
    return NULL;
}

#define DELIVER_BATCH 32

/* The delivery of logged decisions: COMMIT again to every participant that has not confirmed.
 * Returns when it wants to run again (INT64_MAX: nothing pending). */
static int64_t deliver_step(struct txn_env *e, struct fab_ctx *c, int64_t now)
{
    uint64_t tx[DELIVER_BATCH];
    uint16_t nd[DELIVER_BATCH];
    int64_t next;
    unsigned n = coord_due(e, now, tx, nd, DELIVER_BATCH, &next);
    for (unsigned i = 0; i < n; i++) {
        struct fab_buf resp = {0};
        int rc = txn_call_txid(c, nd[i], TXN_RPC_COMMIT, tx[i], &resp);
        fab_buf_free(&resp);
        if (rc == 0 || rc == RDKV_ENOTFOUND) coord_delivered(e, tx[i], nd[i]);
    }
    return n == DELIVER_BATCH ? now : next;
}

/* Lock a recovered in-doubt transaction's writes (wal_writes_unpack's callback). */
static int lock_write(void *arg, const struct wal_write *w)
{
    struct txn *t = arg;
    if (w->op == WAL_OP_PUT) return txn_put(t, w->key, w->klen, w->val, w->vlen);
    int rc = txn_del(t, w->key, w->klen);
    return rc == RDKV_ENOTFOUND ? 0 : rc;
}

static int recover_lock(struct txn_env *e, struct fab_ctx *c, struct txn_recovery *r)
{
    for (struct rprep *rp = r->preps; rp; rp = rp->next) {
        if (rp->coord == e->me) continue; /* (own ones: txn_recovery_own) */
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
        p->bytes = rp->w; /* (kept: a commit that must be tried again) */
        p->wlen = rp->len;
        rp->w = NULL;
        p->next_ask = 0; /* ask at once */
        part_record(e, p);
        pthread_mutex_lock(&e->pmu);
        e->indoubt_armed = true;
        pthread_mutex_unlock(&e->pmu);
    }
    return 0;
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
    /* the in-doubt ones: their rows locked by the in-doubt thread, which then asks */
    pthread_mutex_lock(&e->imu);
    e->recov = r;
    e->recov_rc = 0;
    e->ikick = true;
    pthread_cond_signal(&e->icv);
    int64_t until_ns = clock_now_ns() + 60 * NS_PER_S;
    while (!e->recov_rc && clock_now_ns() < until_ns) {
        struct timespec until = clock_ts(until_ns);
        pthread_cond_timedwait(&e->rcv, &e->imu, &until);
    }
    int rc = e->recov_rc == 1 ? 0 : e->recov_rc ? e->recov_rc : RDKV_ETIMEDOUT;
    pthread_mutex_unlock(&e->imu);
    if (rc) snprintf(err, errcap, "cannot lock the rows of the in-doubt transactions found in the "
                     "log: %s", rdkv_strerror(rc));
    return rc;
}

/* A recovered in-doubt transaction's outcome: commits its writes under the locks it holds,
 * logging COMMIT under its own txid, or aborts and logs END; frees p. */
static int txn_recovered_finish(struct txn_env *e, struct prepared *p, bool commit)
{
    struct txn *t = p->rt;
    int rc = 0;
    if (commit) {
        t->log_txid = p->txid; /* its COMMIT record settles the PREPARE at the next replay */
        rc = txn_commit(t);
        /* Its locks are kept (row locks of this node's cohort have no lease; its points are kept
         * from eviction on every ask), so this cannot fail for them. Should it all the same, the
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
        if (rc)
            log_error("txn %llx: decided commit, but its commit here failed: %s",
                      (unsigned long long)p->txid, rdkv_strerror(rc));
    } else {
        txn_abort(t);
        if (e->wal) txn_log_end(e, p->txid);
    }
    txn_worker_destroy(p->rw);
    free(p->bytes);
    free(p);
    return rc;
}

static void recovered_refresh(struct prepared *p)
{
    struct txn *t = p->rt;
    struct txn_env *e = t->w->e;
    for (uint32_t i = 0; i < t->nents; i++) {
        struct tent *en = &t->ents[i];
        if (en->lk.mode) lock_refresh(&en->lk);
        /* the points of its inserted and deleted keys, in this node's own range server: kept
         * from eviction, and their lease (as this transaction sees it) runs from now */
        int64_t t0 = clock_now_ns();
        if (en->rh && en->rh->mode && en->rh->node == e->me &&
            range_server_keep(e->rs, TXN_RANGE_SPACE, en->rh->token) == 0)
            en->rh->granted_min = t0;
    }
}

#define INDOUBT_BATCH 32

/* The in-doubt PREPAREs: each one kept txn_cfg.indoubt_ns is asked about (again every quarter
 * of that). Committed: it commits here (the lock check allowing). Unknown: its coordinator is
 * not deciding it and did not decide commit -- it aborted it, or never got our vote, or
 * restarted (presumed abort; the durability issue makes the last exact) -- so it is dropped.
 * Still active, or no answer (a slow or unreachable coordinator): it stays. */
static int64_t indoubt_step(struct txn_env *e, struct fab_ctx *c, int64_t now)
{
    uint64_t ask[INDOUBT_BATCH];
    uint16_t coord[INDOUBT_BATCH];
    unsigned n = 0;
    int64_t next = INT64_MAX, again = e->cfg.indoubt_ns / 4 > NS_PER_MS ? e->cfg.indoubt_ns / 4
                                                                        : NS_PER_MS;
    pthread_mutex_lock(&e->pmu);
    struct held *rel = e->releases, *keep = NULL;
    e->releases = NULL;
    struct prepared *refresh[INDOUBT_BATCH];
    unsigned nref = 0, nkeep = 0;
    for (struct prepared *p = e->prep; p; p = p->next) {
        if (!p->charge && !p->rt) continue; /* (this node's own, being committed right now) */
        if (p->charge && p->coord != e->me && p->next_keep <= now && nkeep < INDOUBT_BATCH) {
            struct held *h = part_held_of(p); /* (copied: a COMMIT may take p meanwhile) */
            if (h) {
                h->next = keep;
                keep = h;
                nkeep++;
            }
            p->next_keep = now + e->cfg.lease_ns / 4;
        }
        if (p->charge && p->next_keep < next) next = p->next_keep;
        if (p->next_ask <= now && n < INDOUBT_BATCH) {
            /* (a coordinator declared down is not asked: txn_env_peer_lost aborts its
             * PREPAREs, or it answers once it is up again) */
            if (!txn_down(e, p->coord)) {
                ask[n] = p->txid;
                coord[n++] = p->coord;
            }
            /* (a recovered one: often enough to keep its locks' leases) */
            p->next_ask = now + (p->rt && e->cfg.lease_ns / 4 < again ? e->cfg.lease_ns / 4 : again);
            /* a recovered one's locks are this thread's: their leases are kept alive here
             * (only this thread takes it out of the list, so it stays valid after pmu) */
            if (p->rt && nref < INDOUBT_BATCH) refresh[nref++] = p;
        }
        if (p->next_ask < next) next = p->next_ask;
    }
    e->indoubt_armed = next != INT64_MAX; /* else the next PREPARE kept wakes the thread */
    pthread_mutex_unlock(&e->pmu);
    for (unsigned i = 0; i < nref; i++) recovered_refresh(refresh[i]);
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
    for (unsigned i = 0; i < n; i++) {
        struct fab_buf resp = {0};
        int rc = txn_call_txid(c, coord[i], TXN_RPC_QUERY, ask[i], &resp);
        uint8_t st = !rc && resp.len == 1 ? ((const uint8_t *)resp.data)[0] : 0;
        fab_buf_free(&resp);
        if (st != TXN_STATE_COMMITTED && st != TXN_STATE_UNKNOWN) continue;
        bool commit = st == TXN_STATE_COMMITTED;
        pthread_mutex_lock(&e->pmu);
        struct prepared *r = part_recovered_locked(e, ask[i]) ? part_take_locked(e, ask[i], true)
                                                              : NULL;
        pthread_mutex_unlock(&e->pmu);
        if (r) {
            __atomic_add_fetch(commit ? &e->indoubt_committed : &e->indoubt_dropped, 1,
                               __ATOMIC_RELAXED);
            log_warn("txn %llx: in doubt since the restart; its coordinator, node %u, says %s",
                     (unsigned long long)ask[i], coord[i], commit ? "committed" : "unknown");
            if (txn_recovered_finish(e, r, commit) == 0 && commit)
                part_indoubt_committed(e, ask[i]);
            continue;
        }
        uint64_t by = 0; /* which process of the coordinator answered */
        if (fab_peer_incarnation(c, coord[i], false, &by)) by = 0;
        struct inprog ip = {0};
        struct prepared *p = part_take_begin(e, ask[i], &ip);
        if (!p) continue; /* its decision came meanwhile */
        struct held *h = part_held_of(p);
        uint64_t coord_inc = p->coord_inc;
        __atomic_add_fetch(commit ? &e->indoubt_committed : &e->indoubt_dropped, 1,
                           __ATOMIC_RELAXED);
        log_warn("txn %llx: prepared here for %.1f s; its coordinator, node %u, says %s: %s",
                 (unsigned long long)ask[i], (double)e->cfg.indoubt_ns / 1e9, coord[i],
                 commit ? "committed" : "unknown", commit ? "committing" : "dropped");
        if (part_finish(e, p, commit, &ip)) {
            log_error("txn %llx: its commit here was refused: the coordinator's locks were gone "
                      "(the outcome is partial)", (unsigned long long)ask[i]);
        } else if (commit) {
            part_indoubt_committed(e, ask[i]);
        }
        part_release_if_gone(e, h, coord_inc, by); /* (to this thread's next step) */
    }
    return n == INDOUBT_BATCH || nkeep == INDOUBT_BATCH ? now : next;
}

/* ------------------------------------------------------------------------------------------ */
/* Restart: what the redo log says of two-phase commits (docs/transactions.md, "The logged
 * commit"). A PREPARE stays open until a COMMIT (its writes, installed here) or an END (abort,
 * or its coordinator's forgetting) of the same txid; a commit DECISION until its END. Few are
 * open at any LSN (those in flight), so plain lists do. */

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

static void rdec_free(struct rdec *d)
{
    free(d->nodes);
    free(d);
}

/* Drops the open PREPARE (and, for an END, DECISION) of txid. */
static void recovery_close(struct txn_recovery *r, uint64_t txid, bool decision)
{
    for (struct rprep **pp = &r->preps; *pp; pp = &(*pp)->next)
        if ((*pp)->txid == txid) {
            struct rprep *p = *pp;
            *pp = p->next;
            rprep_free(p);
            break;
        }
    if (!decision) return;
    for (struct rdec **dp = &r->decs; *dp; dp = &(*dp)->next)
        if ((*dp)->txid == txid) {
            struct rdec *d = *dp;
            *dp = d->next;
            rdec_free(d);
            break;
        }
}

int txn_recovery_rec(struct txn_recovery *r, const struct wal_rec *rec)
{
    switch (rec->type) {
    case WAL_COMMIT: recovery_close(r, rec->txid, false); return 0;
    case WAL_END: recovery_close(r, rec->txid, true); return 0;
    case WAL_PREPARE: {
        if (rec->len < 2 || !rec->txid) return RDKV_EPROTO;
        int rc = wal_writes_unpack(rec->payload + 2, rec->len - 2, ignore_write, NULL);
        if (rc) return rc;
        struct rprep *p = calloc(1, sizeof *p);
        if (!p || !(p->w = malloc(rec->len - 2 ? rec->len - 2 : 1))) {
            free(p);
            return RDKV_ENOMEM;
        }
        p->txid = rec->txid;
        p->coord = pack_get_u16le(rec->payload);
        p->len = rec->len - 2;
        memcpy(p->w, rec->payload + 2, p->len);
        recovery_close(r, rec->txid, false); /* (a txid is prepared once) */
        p->next = r->preps;
        r->preps = p;
        return 0;
    }
    case WAL_DECISION: {
        /* u8 decision, u16 count, u16 nodes[count]: only commits are logged */
        if (rec->len < 3 || !rec->txid) return RDKV_EPROTO;
        uint8_t how = rec->payload[0];
        uint16_t n = pack_get_u16le(rec->payload + 1);
        if ((how != WAL_DECIDE_COMMIT && how != WAL_DECIDE_ABORT) || rec->len != 3u + 2u * n)
            return RDKV_EPROTO;
        if (how == WAL_DECIDE_ABORT) return 0;
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
    default: return 0;
    }
}

static bool decided(const struct txn_recovery *r, uint64_t txid)
{
    for (const struct rdec *d = r->decs; d; d = d->next)
        if (d->txid == txid) return true;
    return false;
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
    free(r);
}
