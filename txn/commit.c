/* Commit (txn.h): three paths, by where the writes go -- this node's partition alone
 * (commit_local), one other partition (commit_apply: one APPLY), several (commit_2pc: two-phase
 * commit, presumed abort; with a redo log, the logged commit of docs/transactions.md). */
#include "txn/coord.h"

#include "storage/wal.h"

#include "common/log.h"

#include <errno.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

/* A request to a participant got no answer (the RPC failed in the transport: it may or may not
 * have been handled, and may still be on its way). RDKV_ESHUTDOWN is counted in: a participant
 * that is stopping answers it without doing anything, but a link closing under the request
 * reports it too, and keeping the locks until a RESOLVE is answered costs one round trip. */
static bool no_answer(int st)
{
    return st == RDKV_ETIMEDOUT || st == RDKV_EUNAVAILABLE || st == RDKV_EFLUSHED ||
           st == RDKV_ESHUTDOWN;
}

/* Sends one RPC to each of n nodes at once and waits for all: one round. `meanwhile` (may be
 * NULL) runs once they are posted, before the wait. */
static void fanout_and(struct txn_worker *w, unsigned n, const uint16_t *nodes, uint16_t type,
                       const void *const *reqs, const size_t *lens, int *status,
                       void (*meanwhile)(void *arg), void *arg)
{
    txn_call_all(w->c, n, nodes, type, reqs, lens, NULL, status, w->e->cfg.commit_timeout_ns,
                 meanwhile, arg);
    w->stats.rounds++;
}

static void fanout(struct txn_worker *w, unsigned n, const uint16_t *nodes, uint16_t type,
                   const void *const *reqs, const size_t *lens, int *status)
{
    fanout_and(w, n, nodes, type, reqs, lens, status, NULL, NULL);
}

/* The coordinator's own share of a decided commit, installed while the COMMITs travel. */
struct own_share {
    struct txn_env *e;
    struct prepared *mine;
    int rc;
};
static void install_own(void *arg)
{
    struct own_share *o = arg;
    if (o->mine && txn_fault_take(o->e, TXN_FAULT_FAIL_OWN_COMMIT))
        wal_fault_inject(o->e->wal, WAL_FAULT_WRITE, ENOSPC);
    if (!o->mine) return;
    uint64_t txid = o->mine->txid;
    o->rc = part_commit(o->e, o->mine);
    if (o->rc && o->rc != RDKV_EABORTED && o->e->wal) {
        /* the decision is durable and this node's share cannot be logged: the node stops, and
         * its restart installs the share from its PREPARE and DECISION records */
        char why[96];
        snprintf(why, sizeof why, "txn %llx: its own share's COMMIT record was refused after a "
                 "durable DECISION", (unsigned long long)txid);
        wal_fail_stop(o->e->wal, why);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Commit: three paths, by where the writes go -- this node's partition alone (commit_local), one
 * other partition (commit_apply: one APPLY), several (commit_2pc). Each answers by one rule:
 *   0              committed;
 *   RDKV_EABORTED  nothing was installed anywhere (a lease ran out, a fence found a lock gone,
 *                  a participant voted no or restarted since the locks were taken): retry;
 *   RDKV_EUNAVAILABLE  nothing was installed anywhere, because a participant was down or did
 *                  not answer *before* anything could be installed (a PREPARE unanswered: the
 *                  transaction is aborted): retry when it is back;
 *   RDKV_EUNKNOWN  something may have been installed: a request that installs (APPLY, COMMIT)
 *                  or the decision itself went unanswered or unlogged -- the locks it needs stay
 *                  kept (fence_keep) until the outcome is settled, and the caller must not
 *                  retry blindly. (With a log, a durable commit decision is the commit: a
 *                  COMMIT unanswered is a delivery still to make, and the answer is 0.)
 *   other          as the failing step said (RDKV_ENOMEM, a log's RDKV_EIO / RDKV_ENOSPC
 *                  before anything was durable).
 * `ops` holds the writes, grouped by partition: [start[p], start[p + 1]) go to parts[p]. */

/* The writes staged and installed here, under this node's own locks. */
static int commit_local(struct txn *t, struct wop *ops, uint32_t k)
{
    struct txn_env *e = t->w->e;
    int rc = 0;
    struct wop *mine = malloc(k * sizeof *mine);
    struct prepared *p = NULL;
    if (!mine) rc = RDKV_ENOMEM;
    else {
        memcpy(mine, ops, k * sizeof *mine);
        rc = part_prepare(e, t->log_txid ? t->log_txid : t->txid, e->me, mine, k, NULL, &p);
    }
    if (!rc && !txn_leases_ok(t)) {
        part_abort(e, p);
        rc = RDKV_EABORTED;
    } else if (!rc) {
        rc = part_commit(e, p); /* (RDKV_EABORTED: the fence found a lock gone) */
    }
    return rc;
}

/* One APPLY to the one partition the writes go to: prepared and committed there at once. */
static int commit_apply(struct txn *t, uint16_t part, struct wop *ops, uint32_t k)
{
    struct txn_worker *w = t->w;
    struct txn_env *e = w->e;
    int rc = 0;
    struct pack_w pw;
    pack_w_init(&pw);
    txn_wops_pack(&pw, t->txid, e->me, t->pinc[part], ops, k);
    if (pw.err) rc = RDKV_ENOMEM;
    else if (!txn_leases_ok(t)) rc = RDKV_EABORTED;
    else {
        struct fab_buf resp = {0};
        rc = fab_rpc_call(w->c, part, TXN_RPC_APPLY, pw.p, pw.len, &resp,
                          e->cfg.commit_timeout_ns);
        fab_buf_free(&resp);
        w->stats.rounds++;
        if (no_answer(rc)) {
            /* it may have been applied, or may be yet: keep its locks there until the
             * participant says it never will be */
            txn_fence_keep(t, part, TXN_RESOLVE_APPLY);
            rc = RDKV_EUNKNOWN;
        }
    }
    pack_w_free(&pw);
    return rc;
}

/* A two-phase commit in progress: the writes grouped by partition ([start[p], start[p + 1]) of
 * ops go to parts[p]), the requests to the nr other participants, their answers, and this
 * node's own share (mine). */
struct twopc {
    struct txn *t;
    uint32_t np;
    const uint16_t *parts;
    const uint32_t *start;
    struct wop *ops;
    struct pack_w *pw;  /* per partition: its PREPARE */
    const void **reqs;  /* per other participant: its PREPARE, then the txid */
    size_t *lens;
    uint16_t *rnodes;   /* the other participants */
    int *st;            /* their answers */
    unsigned nr;
    struct prepared *mine;
    uint8_t idb[8];     /* the txid, the whole of a COMMIT or ABORT */
};

/* Phase one: the PREPAREs to every other participant in one round and the local share staged.
 * 0 when all voted yes, else the first failure (RDKV_EUNAVAILABLE for a participant that gave no
 * answer). */
static int prepare_all(struct twopc *c)
{
    struct txn *t = c->t;
    struct txn_env *e = t->w->e;
    int rc = 0;
    for (uint32_t p = 0; p < c->np; p++) {
        pack_w_init(&c->pw[p]);
        if (c->parts[p] == e->me) continue;
        txn_wops_pack(&c->pw[p], t->txid, e->me, t->pinc[c->parts[p]], c->ops + c->start[p],
                      c->start[p + 1] - c->start[p]);
        if (c->pw[p].err) rc = RDKV_ENOMEM;
        c->reqs[c->nr] = c->pw[p].p;
        c->lens[c->nr] = c->pw[p].len;
        c->rnodes[c->nr++] = c->parts[p];
    }
    if (!rc) fanout(t->w, c->nr, c->rnodes, TXN_RPC_PREPARE, c->reqs, c->lens, c->st);
    else
        for (unsigned i = 0; i < c->nr; i++) c->st[i] = RDKV_ENOMEM;
    for (uint32_t p = 0; p < c->np && !rc; p++) {
        if (c->parts[p] != e->me) continue;
        uint32_t cnt = c->start[p + 1] - c->start[p];
        struct wop *lo = malloc(cnt * sizeof *lo);
        if (!lo) rc = RDKV_ENOMEM;
        else {
            memcpy(lo, c->ops + c->start[p], cnt * sizeof *lo);
            rc = part_prepare(e, t->txid, e->me, lo, cnt, NULL, &c->mine);
        }
    }
    for (unsigned i = 0; i < c->nr && !rc; i++)
        if (c->st[i])
            rc = c->st[i] == RDKV_ETIMEDOUT || c->st[i] == RDKV_EFLUSHED ||
                         c->st[i] == RDKV_ESHUTDOWN
                     ? RDKV_EUNAVAILABLE
                     : c->st[i];
    /* (from here on a request is the txid alone) */
    for (unsigned i = 0; i < c->nr; i++) {
        c->reqs[i] = c->idb;
        c->lens[i] = 8;
    }
    return rc;
}

/* Abort everywhere it was prepared. A participant that did not answer (its PREPARE may still
 * arrive, or its ABORT was lost) keeps our locks there until it has resolved the abort (a late
 * PREPARE is then refused). */
static void abort_all(struct twopc *c)
{
    struct txn *t = c->t;
    unsigned na = 0;
    uint16_t anodes[c->nr ? c->nr : 1];
    int ast[c->nr ? c->nr : 1];
    for (unsigned i = 0; i < c->nr; i++) {
        if (c->st[i] == 0) anodes[na++] = c->rnodes[i];
        else if (no_answer(c->st[i])) txn_fence_keep(t, c->rnodes[i], TXN_RESOLVE_ABORT);
    }
    if (na) fanout(t->w, na, anodes, TXN_RPC_ABORT, c->reqs, c->lens, ast);
    for (unsigned i = 0; i < na; i++)
        if (no_answer(ast[i])) txn_fence_keep(t, anodes[i], TXN_RESOLVE_ABORT);
    if (c->mine) part_abort(t->w->e, c->mine);
}

/* With a log, the commit decision made durable before the first COMMIT leaves: the memory to
 * deliver it taken first (so that nothing can fail after it), then this node's own writes as a
 * PREPARE and the DECISION naming the other participants, one wait for both (the log is a
 * prefix). 0, or a clean no (nothing that commits was written). A DECISION that cannot be made
 * durable stops the node (coord_log_decision). */
static int log_decision(struct twopc *c)
{
    struct txn_env *e = c->t->w->e;
    uint64_t txid = c->t->txid;
    int rc = coord_decide(e, txid, c->rnodes, c->nr);
    if (!rc && c->mine) rc = part_log_prepare(e, c->mine, false);
    if (!rc) rc = coord_log_decision(e, txid, c->rnodes, c->nr);
    if (rc)
        log_warn("txn %llx: its commit decision could not be logged (%s): aborted",
                 (unsigned long long)txid, rdkv_strerror(rc));
    return rc;
}

/* Replicated, without a log: the commit decision on the backups of this node's partition before
 * the first COMMIT leaves -- this node's own share as a PREPARE and a DECIDE, in one ship -- so
 * that a promoted copy finishes the transaction if this node dies (docs/replication.md,
 * "Promotion").
 * 0; RDKV_EUNKNOWN when some backup may hold the DECIDE and not all do (the node is stopping or
 * no longer its partition's primary): the decision is then the promoted copy's, and nothing is
 * sent; or a failure before anything was sent (a clean abort). */
static int ship_decision(struct twopc *c)
{
    struct txn_env *e = c->t->w->e;
    uint64_t txid = c->t->txid;
    int rc = c->mine ? part_ship_prepare(e, c->mine, TXN_SHIP_DECIDE)
                     : e->cfg.ship_rec(e->cfg.ship_arg, TXN_SHIP_DECIDE, txid, NULL, 0);
    if (!rc && txn_fault_take(e, TXN_FAULT_DECIDE_UNKNOWN)) rc = RDKV_EUNAVAILABLE;
    if (!rc) {
        coord_shipped(e, txid);
        if (txn_fault_is(e, TXN_FAULT_EXIT_AFTER_DECISION)) {
            log_warn("test hook: exiting after the DECIDE of txn %llx", (unsigned long long)txid);
            _exit(9);
        }
        return 0;
    }
    /* (RDKV_EBUSY: its own share writes a partition being handed back; nothing sent) */
    if (rc == RDKV_ENOMEM || rc == RDKV_ETOOBIG || rc == RDKV_EPROTO || rc == RDKV_EBUSY)
        return rc;
    log_error("txn %llx: its commit decision did not reach every backup (%s): its participants "
              "stay prepared until the node serving this partition answers for it",
              (unsigned long long)txid, rdkv_strerror(rc));
    return RDKV_EUNKNOWN;
}

#define DELIVER_MOVED_NS (30 * NS_PER_S) /* how long deliver_moved tries */

/* A DECIDE that some backups may hold and not all (ship_decision's RDKV_EUNKNOWN) is shipped
 * again -- a PREPARE or DECIDE asked again replaces itself at a backup -- every 10 ms, for as
 * long as this node still serves its partition and at most DELIVER_MOVED_NS: once the
 * configuration drops the backup that did not answer (a dead or stopped node, removed after a
 * lease), the ship reaches every backup of the new one and the decision is made, so the
 * participants are told. Without this, nothing ever settled such a transaction while its
 * coordinator stayed its partition's primary: the participants kept it prepared (their rows
 * locked) and a new copy's fill of their partition waited for it for ever (found by the
 * nemesis: a DECIDE that met a node just SIGSTOPped). A refusal now (busy, no memory) is no
 * clean abort any more: the first ship may have reached a backup. 0, or still RDKV_EUNKNOWN
 * (this node no longer serves its partition: the promoted copy owns the decision). */
static int ship_decision_again(struct twopc *c)
{
    struct txn_env *e = c->t->w->e;
    int64_t until = clock_now_ns() + DELIVER_MOVED_NS;
    int rc = RDKV_EUNKNOWN;
    while (rc && clock_now_ns() < until && txn_serving(e) && txn_owner(e, e->me) == e->me) {
        clock_sleep_ns(10 * NS_PER_MS);
        rc = c->mine ? part_ship_prepare(e, c->mine, TXN_SHIP_DECIDE)
                     : e->cfg.ship_rec(e->cfg.ship_arg, TXN_SHIP_DECIDE, c->t->txid, NULL, 0);
    }
    if (c->mine) c->mine->shipped = true; /* (the first ship may have reached a backup) */
    if (rc) return RDKV_EUNKNOWN;
    coord_shipped(e, c->t->txid);
    log_warn("txn %llx: its commit decision reached every backup when shipped again: committing",
             (unsigned long long)c->t->txid);
    return 0;
}

/* Replicated: a participant that did not confirm its COMMIT may have died. Its partitions are
 * then promoted, and each promoted copy holds the transaction prepared -- its PREPARE was on
 * every backup before the participant voted yes -- and takes it over (txn_env_adopt). The
 * decision is delivered to whoever serves each of t's partitions at `node` now: RESOLVE_COMMIT
 * until it answers 0 (busy while the copy is taken over, or while its commit is being
 * installed; 0 also when the participant had installed it, and its APPLY reached the copy).
 * Meanwhile t's locks at `node` are kept alive, for a participant that is only slow. 0 once
 * every partition has it; RDKV_EUNKNOWN after DELIVER_MOVED_NS. */
static int deliver_moved(struct txn *t, uint16_t node)
{
    struct txn_worker *w = t->w;
    struct txn_env *e = w->e;
    uint64_t pids = 0; /* (a replicated cluster has at most 64 partitions: rcfg) */
    for (uint32_t i = 0; i < t->nents; i++)
        if (t->ents[i].part == node && t->ents[i].wop && t->ents[i].pid < 64)
            pids |= 1ull << t->ents[i].pid;
    uint8_t req[9];
    pack_put_u64le(req, t->txid);
    req[8] = TXN_RESOLVE_COMMIT;
    int64_t until = clock_now_ns() + DELIVER_MOVED_NS, refresh = 0;
    bool said = false;
    while (pids && clock_now_ns() < until) {
        int64_t now = clock_now_ns();
        if (now >= refresh && !txn_down(e, node)) {
            for (uint32_t i = 0; i < t->nents; i++)
                if (t->ents[i].lk.mode && rptr_node(t->ents[i].lk.line) == node)
                    lock_refresh(&t->ents[i].lk);
            refresh = now + e->cfg.lease_ns / 4;
        }
        unsigned p = (unsigned)__builtin_ctzll(pids);
        uint16_t to = txn_owner(e, p);
        if (to == node && txn_down(e, node)) { /* (not promoted yet) */
            clock_sleep_ns(10 * NS_PER_MS);
            continue;
        }
        if (to != node && !said) {
            log_warn("txn %llx: node %u did not confirm its commit; delivering it to node %u, "
                     "which serves partition %u now", (unsigned long long)t->txid, node, to, p);
            said = true;
        }
        struct fab_buf resp = {0};
        int rc = fab_rpc_call(w->c, to, TXN_RPC_RESOLVE, req, sizeof req, &resp,
                              RESOLVE_RPC_TIMEOUT_NS);
        fab_buf_free(&resp);
        if (rc == 0) {
            /* every partition served there has it now */
            for (unsigned q = 0; q < 64; q++)
                if ((pids >> q & 1) && txn_owner(e, q) == to) pids &= ~(1ull << q);
            continue;
        }
        clock_sleep_ns(rc == RDKV_EBUSY ? NS_PER_MS : 10 * NS_PER_MS);
    }
    return pids ? RDKV_EUNKNOWN : 0;
}

/* Phase two, the decision being commit: COMMIT to every other participant in one round, this
 * node's own share installed while they travel. */
static int commit_all(struct twopc *c)
{
    struct txn *t = c->t;
    struct txn_env *e = t->w->e;
    uint64_t txid = t->txid;
    int rc = 0;
    if (e->wal) coord_decided(e, txid);
    else coord_update(e, txid, TXN_STATE_COMMITTED, 0); /* the decision, before any COMMIT */
    /* Our own share goes in while the COMMITs travel: under our own locks, which have no lease
     * (row locks of this node) or one checked a quarter before its end a moment ago (our
     * points), so the check cannot fail -- and with a log, the decision is durable already. */
    struct own_share own = {e, c->mine, 0};
    fanout_and(t->w, c->nr, c->rnodes, TXN_RPC_COMMIT, c->reqs, c->lens, c->st, install_own,
               &own);
    if (own.rc) {
        log_error("txn %llx: its commit here was refused (a lock of ours was gone) after the "
                  "decision: the outcome is partial", (unsigned long long)txid);
        rc = RDKV_EUNKNOWN;
    }
    for (unsigned i = 0; i < c->nr; i++) {
        if (!c->st[i]) {
            if (e->wal) coord_delivered(e, txid, c->rnodes[i]);
            continue;
        }
        /* With a log the decision is durable, and every participant voted yes with a durable
         * PREPARE, in the process our locks there are in (PREPARE names it): it keeps the
         * transaction prepared (its holds kept alive, or, after a restart, its rows locked
         * again by the recovery) until the commit is installed there and answered 0, which
         * the delivery of the decision sees to. So the transaction has committed, and only a
         * refusal by the fence -- which nothing can cause but a bug -- is news. */
        bool refused = c->st[i] == RDKV_EABORTED;
        /* Busy is no answer either: the participant holds the transaction prepared and has not
         * installed it (another path is settling it, or its ship to its backups failed: a
         * zombie primary). The decision must outlive that: delivered again, and until then the
         * record kept by a fence -- forgotten, it would answer "unknown" to the participant's
         * (or its promoted copy's) question, an abort of a committed transaction (found by
         * replicas_partitions: a member cut from its peers answered its COMMIT busy, the
         * promoted copy asked, and a transfer was left half-applied). */
        bool again = no_answer(c->st[i]) || c->st[i] == RDKV_EBUSY;
        bool redeliver = !refused && !e->wal && e->cfg.ship_rec && again;
        if (redeliver && deliver_moved(t, c->rnodes[i]) == 0)
            continue; /* (delivered: to the participant, or to its partitions' new primaries) */
        if (refused || !e->wal) {
            log_warn("txn %llx: node %u did not confirm the commit: %s", (unsigned long long)txid,
                     c->rnodes[i], rdkv_strerror(c->st[i]));
            rc = RDKV_EUNKNOWN;
        }
        if (redeliver) {
            /* not delivered within DELIVER_MOVED_NS: whoever holds it prepared asks us (or the
             * node serving our partition, whose copy holds the DECIDE) -- the answer must stay
             * "committed" for as long as this process runs, as a decision taken over is kept */
            coord_update(e, txid, 0, 1);
            e->cfg.ship_rec(e->cfg.ship_arg, TXN_SHIP_KEEP, txid, NULL, 0);
            log_warn("txn %llx: its commit decision is kept here for node %u's question",
                     (unsigned long long)txid, c->rnodes[i]);
        }
        if (refused && e->wal)
            log_error("txn %llx: node %u refused its COMMIT after the decision was durable: the "
                      "outcome is partial", (unsigned long long)txid, c->rnodes[i]);
        /* Not installed there yet (no answer, busy, the log refused its record): our locks
         * there stay until it says nothing of the transaction will be installed any more (with
         * a log, RESOLVE commits it first), or a late install could land under the next
         * holder, or a reader see the row from before a transaction acknowledged. */
        if (e->wal || again) txn_fence_keep(t, c->rnodes[i], TXN_RESOLVE_COMMIT);
    }
    return rc;
}

/* Two-phase commit over np partitions (presumed abort; with a log, the logged commit). */
static int commit_2pc(struct txn *t, uint32_t np, const uint16_t *parts, const uint32_t *start,
                      struct wop *ops)
{
    struct txn_env *e = t->w->e;
    struct pack_w pw[np];
    const void *reqs[np];
    size_t lens[np];
    uint16_t rnodes[np];
    int st[np];
    memset(rnodes, 0, sizeof rnodes);
    memset(st, 0, sizeof st);
    struct twopc c = {t, np, parts, start, ops, pw, reqs, lens, rnodes, st, 0, NULL, {0}};
    pack_put_u64le(c.idb, t->txid);
    /* from before the PREPAREs until every participant has answered, a participant that holds
     * it prepared and asks is told it is active (coord_state) */
    /* Replicated, without a log, the decision goes to the copies of this node's own partition,
     * and only their primary ships to them: a node that came back empty serves its partition
     * as a copy, so it coordinates no two-phase commit (a clean, retryable refusal) until it
     * is that partition's primary again (docs/replication.md, section 8) */
    int rc = !e->wal && e->cfg.ship_rec && txn_owner(e, e->me) != e->me ? RDKV_EUNAVAILABLE
                                                                        : coord_begin(e, t->txid);
    bool rec = !rc;
    if (rc) {
        for (uint32_t p = 0; p < np; p++) pack_w_init(&pw[p]);
    } else {
        rc = prepare_all(&c);
    }
    if (!rc && !txn_leases_ok(t)) rc = RDKV_EABORTED;
    /* the decision, durable first with a log: held against a checkpoint's replay LSN until this
     * node's own share is installed and the record says committed (docs/storage.md, "Holds") */
    struct wal_hold hold;
    if (!rc && e->wal) {
        wal_hold(e->wal, &hold);
        rc = log_decision(&c);
        if (rc) wal_unhold(e->wal, &hold);
    }
    if (!rc && !e->wal && e->cfg.ship_rec) {
        rc = ship_decision(&c);
        if (rc == RDKV_EUNKNOWN) rc = ship_decision_again(&c);
    }
    if (rc == RDKV_EUNKNOWN) {
        /* neither commit nor abort may be told: the record stays "active" for the
         * participants' questions (one reference kept), this node's share stays staged, and
         * the locks are the participants' to keep until the decision's owner answers */
        coord_update(e, t->txid, 0, 1);
    } else if (rc) {
        abort_all(&c);
    } else {
        rc = commit_all(&c);
        if (e->wal) wal_unhold(e->wal, &hold);
    }
    if (rec) coord_update(e, t->txid, 0, -1);
    for (uint32_t p = 0; p < np; p++) pack_w_free(&pw[p]);
    return rc;
}

static int commit_writes(struct txn *t, uint32_t nw)
{
    struct txn_worker *w = t->w;
    struct txn_env *e = w->e;
    /* the writes grouped by partition */
    struct wop *ops = malloc(nw * sizeof *ops);
    uint16_t *parts = malloc(nw * sizeof *parts);
    uint32_t *start = malloc((nw + 1) * sizeof *start);
    if (!ops || !parts || !start) {
        free(ops);
        free(parts);
        free(start);
        return RDKV_ENOMEM;
    }
    uint32_t np = 0, k = 0;
    for (uint32_t pass = 0; pass < e->n; pass++) {
        uint32_t first = k;
        for (uint32_t i = 0; i < t->nents; i++) {
            struct tent *en = &t->ents[i];
            if (en->part != pass || !en->wop) continue;
            if (en->wop == W_DEL && !en->exists) continue;
            struct wop *o = &ops[k++];
            o->key = en->key;
            o->klen = en->klen;
            o->row = en->exists ? en->row : RPTR_NULL;
            /* the names of our holds, for the participant's fence check */
            o->lock_tok = en->lk.mode == LOCK_EXCLUSIVE ? lock_token(&en->lk) : 0;
            o->range_tok = en->rh && en->rh->mode == LOCK_EXCLUSIVE ? en->rh->token : 0;
            o->val = en->nval;
            o->vlen = en->nvlen;
            o->kind = en->wop == W_DEL ? WOP_DELETE : (en->exists ? WOP_UPDATE : WOP_INSERT);
        }
        if (k > first) {
            parts[np] = (uint16_t)pass;
            start[np++] = first;
        }
    }
    start[np] = k;
    int rc = 0;
    for (uint32_t p = 0; p < np && !rc; p++)
        if (txn_down(e, parts[p])) rc = RDKV_EUNAVAILABLE;
    if (!rc && np == 0) rc = txn_leases_ok(t) ? 0 : RDKV_EABORTED;
    else if (!rc && np == 1 && parts[0] == e->me) rc = commit_local(t, ops, k);
    else if (!rc && np == 1) rc = commit_apply(t, parts[0], ops, k);
    else if (!rc) rc = commit_2pc(t, np, parts, start, ops);
    free(ops);
    free(parts);
    free(start);
    return rc;
}

/* The end of a transaction in the process's metrics (common/metrics.h): committed, or aborted
 * with status rc (0 from the client's abort). */
static void count_end(const struct txn *t, int rc, bool commit, int64_t commit_from)
{
    if (!t->began_ns) return; /* (counting was off when it began) */
    int64_t now = clock_now_ns();
    enum metric_counter k = MC_TXN_ABORT_OTHER;
    if (commit && (rc == 0 || rc == RDKV_EUNKNOWN)) k = MC_TXN_COMMITS;
    else if (rc == 0) k = MC_TXN_ABORT_CLIENT;
    else if (rc == RDKV_EABORTED) k = MC_TXN_ABORT_CONFLICT;
    else if (rc == RDKV_EUNAVAILABLE) k = MC_TXN_ABORT_UNAVAILABLE;
    metrics_add(k, 1);
    if (rc == RDKV_EUNKNOWN) metrics_add(MC_TXN_COMMITS_UNKNOWN, 1);
    metrics_time(MH_TXN, now - t->began_ns);
    if (commit) metrics_time(MH_COMMIT, now - commit_from);
}

static int commit_in(struct txn *t)
{
    if (!t->active) return RDKV_EINVAL;
    struct txn_worker *w = t->w;
    int64_t from = t->began_ns ? clock_now_ns() : 0;
    int rc = t->failed;
    if (!rc && !txn_serving(w->e)) rc = RDKV_EUNAVAILABLE; /* (its reads may be stale now) */
    if (!rc) {
        uint32_t nw = 0;
        for (uint32_t i = 0; i < t->nents; i++)
            if (t->ents[i].wop) nw++;
        rc = nw ? commit_writes(t, nw) : (txn_leases_ok(t) ? 0 : RDKV_EABORTED);
    }
    if (rc == 0 || rc == RDKV_EUNKNOWN) w->stats.commits++;
    else w->stats.aborts++;
    count_end(t, rc, true, from);
    txn_end(t);
    return rc;
}

static void abort_in(struct txn *t)
{
    if (!t || !t->active) return;
    t->w->stats.aborts++;
    count_end(t, t->failed, false, 0);
    txn_end(t);
}

int txn_commit(struct txn *t)
{
    uint64_t *was = txn_pin_on(t);
    int rc = commit_in(t);
    txn_pin_off(t, was);
    return rc;
}

void txn_abort(struct txn *t)
{
    if (!t) return;
    uint64_t *was = txn_pin_on(t);
    abort_in(t);
    txn_pin_off(t, was);
}
