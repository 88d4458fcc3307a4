/* The asker (internal.h): the thread that talks to other nodes about transactions whose outcome
 * one side does not know yet.
 *   - As a participant, it asks the coordinators of the PREPAREs kept here longer than
 *     txn_cfg.indoubt_ns (and at once those re-established from the log) what became of them
 *     (TXN_RPC_QUERY), and settles them by the answer: committed -> commit, unknown -> presumed
 *     abort, active or no answer -> ask again later.
 *   - As a participant, it asks about the commits in its outcome memory, and forgets those whose
 *     coordinator has forgotten them.
 *   - As a coordinator, it delivers its logged commit decisions again (TXN_RPC_COMMIT) to the
 *     participants that have not confirmed them.
 * Each round's requests travel together, at most one per node and kind, and are waited for at
 * most RESOLVE_RPC_TIMEOUT_NS: a round takes one slow answer's time, not one per transaction.
 * It keeps no lock alive itself -- the keeper does (recover.c) -- so no lock waits behind an
 * answer. docs/transactions.md, "In-doubt transactions" and "The logged commit". */
#include "txn/coord.h"

#include "common/log.h"

#include <stdlib.h>
#include <string.h>

#define ASK_BATCH 32       /* in-doubt PREPAREs asked about in one round */
#define DELIVER_BATCH 32   /* COMMITs delivered in one round */
#define FORGET_BATCH 1024  /* outcome memory entries asked about in one round */

/* The answers of one round of QUERYs, grouped by coordinator: for each txid tx[i] (of
 * coordinator txn_txid_node, or of the node serving its partition once it was removed:
 * txn_coord_node -- this node itself answers from memory), its state st[i] (0: no answer). */
static void query_round(struct txn_env *e, struct fab_ctx *c, const uint64_t *tx, unsigned n,
                        uint8_t *st)
{
    uint16_t nodes[n ? n : 1];
    uint8_t *reqs[n ? n : 1];
    const void *creq[n ? n : 1];
    size_t lens[n ? n : 1];
    unsigned nn = 0;
    memset(st, 0, n);
    memset(nodes, 0, sizeof nodes);
    memset(creq, 0, sizeof creq);
    memset(lens, 0, sizeof lens);
    /* one request per coordinator, its txids in order */
    for (unsigned i = 0; i < n; i++) {
        uint16_t node = txn_coord_node(e, tx[i]);
        if (node == e->me) {
            st[i] = coord_answer(e, tx[i]); /* (a removed coordinator's, taken over here) */
            continue;
        }
        unsigned k = 0;
        while (k < nn && nodes[k] != node) k++;
        if (k < nn) continue;
        nodes[nn] = node;
        reqs[nn] = malloc(8 * (size_t)n);
        lens[nn] = 0;
        if (!reqs[nn]) continue;
        for (unsigned j = i; j < n; j++)
            if (txn_coord_node(e, tx[j]) == node) {
                pack_put_u64le(reqs[nn] + lens[nn], tx[j]);
                lens[nn] += 8;
            }
        creq[nn] = reqs[nn];
        nn++;
    }
    struct fab_buf resp[nn ? nn : 1];
    int rs[nn ? nn : 1];
    memset(resp, 0, sizeof resp);
    memset(rs, 0, sizeof rs);
    txn_call_all(c, nn, nodes, TXN_RPC_QUERY, creq, lens, resp, rs, RESOLVE_RPC_TIMEOUT_NS, NULL,
                 NULL);
    for (unsigned k = 0; k < nn; k++) {
        /* an answer of another length is no answer */
        if (!rs[k] && resp[k].len == lens[k] / 8)
            for (unsigned j = 0, m = 0; j < n; j++)
                if (txn_coord_node(e, tx[j]) == nodes[k])
                    st[j] = ((const uint8_t *)resp[k].data)[m++];
        fab_buf_free(&resp[k]);
        free(reqs[k]);
    }
}

/* txid's coordinator answered commit or unknown: settle it here. */
static void settle(struct txn_env *e, struct fab_ctx *c, uint64_t txid, uint16_t coord,
                   bool commit)
{
    /* re-established from the log: the keeper holds its locks and settles it */
    pthread_mutex_lock(&e->pmu);
    struct prepared *r = e->prep;
    while (r && !(r->rt && r->txid == txid)) r = r->next;
    struct rdone *d = r && !r->committing ? malloc(sizeof *d) : NULL;
    if (d) {
        r->committing = true;
        *d = (struct rdone){e->rdone, txid, commit};
        e->rdone = d;
    }
    pthread_mutex_unlock(&e->pmu);
    if (r) {
        if (d) {
            __atomic_add_fetch(commit ? &e->indoubt_committed : &e->indoubt_dropped, 1,
                               __ATOMIC_RELAXED);
            log_warn("txn %llx: in doubt since the restart or a promotion; its coordinator "
                     "(node %u, or the node serving its partition now) says %s",
                     (unsigned long long)txid, coord, commit ? "committed" : "unknown");
            txn_indoubt_kick(e);
        }
        return;
    }
    uint64_t by = 0; /* which process of the coordinator answered */
    if (fab_peer_incarnation(c, coord, false, &by)) by = 0;
    struct inprog ip = {0};
    struct prepared *p = part_take_begin(e, txid, &ip);
    if (!p) return; /* its decision came meanwhile, or is being installed */
    struct held *h = part_held_of(p);
    uint64_t coord_inc = p->coord_inc;
    __atomic_add_fetch(commit ? &e->indoubt_committed : &e->indoubt_dropped, 1, __ATOMIC_RELAXED);
    log_warn("txn %llx: prepared here for %.1f s; its coordinator, node %u, says %s: %s",
             (unsigned long long)txid, (double)e->cfg.indoubt_ns / 1e9, coord,
             commit ? "committed" : "unknown", commit ? "committing" : "dropped");
    int rc = part_finish(e, p, commit, &ip);
    if (rc == RDKV_EABORTED)
        log_error("txn %llx: its commit here was refused: the coordinator's locks were gone (the "
                  "outcome is partial)", (unsigned long long)txid);
    if (rc != RDKV_EBUSY) part_release_if_gone(e, h, coord_inc, by); /* (to the keeper) */
    else free(h); /* (still prepared: asked again) */
}

/* The in-doubt PREPAREs due to be asked about (each one kept indoubt_ns, then every quarter of
 * that; one re-established from the log at once, then as often as its locks' leases are kept).
 * A coordinator declared down is not asked: txn_env_peer_lost aborts its PREPAREs, or it answers
 * once it is up again. One whose partition moved to another node (replicas: promotion) is asked
 * there at once, then every quarter of a lease. */
static int64_t ask_step(struct txn_env *e, struct fab_ctx *c, int64_t now)
{
    uint64_t ask[ASK_BATCH] = {0};
    unsigned n = 0;
    int64_t next = INT64_MAX, again = e->cfg.indoubt_ns / 4 > NS_PER_MS ? e->cfg.indoubt_ns / 4
                                                                        : NS_PER_MS;
    int64_t rec_again = e->cfg.lease_ns / 4 < again ? e->cfg.lease_ns / 4 : again;
    bool gated = txn_any_gated(e);
    pthread_mutex_lock(&e->pmu);
    for (struct prepared *p = e->prep; p; p = p->next) {
        if ((!p->charge && !p->rt) || p->committing) continue; /* (being settled right now) */
        /* a transaction taken over is settled only once the takeover is done: its commit goes
         * through the partition's ordinary paths, which a gated partition refuses */
        if (p->rt && gated) {
            if (now + NS_PER_MS < next) next = now + NS_PER_MS;
            continue;
        }
        /* (due, or its coordinator was removed: the node serving its partition answers now) */
        bool moved = txn_coord_node(e, p->txid) != txn_txid_node(p->txid);
        if (moved && p->next_ask > now + rec_again) p->next_ask = now;
        if (p->next_ask <= now && n < ASK_BATCH) {
            if (!txn_down(e, txn_coord_node(e, p->txid))) ask[n++] = p->txid;
            p->next_ask = now + (p->rt || moved ? rec_again : again);
        }
        if (p->next_ask < next) next = p->next_ask;
    }
    pthread_mutex_unlock(&e->pmu);
    uint8_t st[ASK_BATCH];
    query_round(e, c, ask, n, st);
    for (unsigned i = 0; i < n; i++)
        if (st[i] == TXN_STATE_COMMITTED || st[i] == TXN_STATE_UNKNOWN)
            settle(e, c, ask[i], txn_txid_node(ask[i]), st[i] == TXN_STATE_COMMITTED);
    return n == ASK_BATCH ? now : next;
}

/* The outcome memory's entries due: forgotten once their coordinator has forgotten them. */
static int64_t forget_step(struct txn_env *e, struct fab_ctx *c, int64_t now)
{
    static uint64_t tx[FORGET_BATCH]; /* (the asker's own: one thread) */
    static uint8_t st[FORGET_BATCH];
    int64_t next = INT64_MAX;
    unsigned n = part_outcomes_due(e, now, tx, FORGET_BATCH, &next);
    /* (a coordinator declared down is asked once it is up again) */
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++)
        if (!txn_down(e, txn_coord_node(e, tx[i]))) tx[k++] = tx[i];
    query_round(e, c, tx, k, st);
    for (unsigned i = 0; i < k; i++)
        if (st[i] == TXN_STATE_UNKNOWN) part_outcome_forget(e, tx[i]);
    return n == FORGET_BATCH ? now : next;
}

/* The delivery of logged decisions: COMMIT again to every participant that has not confirmed;
 * only its answer 0 (installed there, now or before) confirms. */
static int64_t deliver_step(struct txn_env *e, struct fab_ctx *c, int64_t now)
{
    uint64_t tx[DELIVER_BATCH];
    uint16_t nd[DELIVER_BATCH];
    uint8_t req[DELIVER_BATCH][8];
    const void *reqs[DELIVER_BATCH];
    size_t lens[DELIVER_BATCH];
    int st[DELIVER_BATCH];
    int64_t next;
    unsigned n = coord_due(e, now, tx, nd, DELIVER_BATCH, &next);
    for (unsigned i = 0; i < n; i++) {
        pack_put_u64le(req[i], tx[i]);
        reqs[i] = req[i];
        lens[i] = 8;
    }
    txn_call_all(c, n, nd, TXN_RPC_COMMIT, reqs, lens, NULL, st, RESOLVE_RPC_TIMEOUT_NS, NULL,
                 NULL);
    for (unsigned i = 0; i < n; i++) {
        if (st[i] == 0) coord_delivered(e, tx[i], nd[i]);
        else if (st[i] == RDKV_ENOTFOUND || st[i] == RDKV_EABORTED)
            log_error("txn %llx: node %u %s its COMMIT, though it voted yes and the decision is "
                      "durable: the outcome there is not known; delivering again",
                      (unsigned long long)tx[i], nd[i],
                      st[i] == RDKV_EABORTED ? "refused" : "does not know");
    }
    return n == DELIVER_BATCH ? now : next;
}

void *txn_asker_main(void *arg)
{
    struct txn_env *e = arg;
    struct fab_ctx *c = NULL;
    bool ok = fab_ctx_create(e->f, &c) == 0;
    if (!ok) log_error("transaction asker: no fabric context; kept PREPAREs wait for their "
                       "decision or their coordinator's down verdict");
    int64_t next = 0;
    pthread_mutex_lock(&e->imu);
    while (!e->istop) {
        if (e->akick) {
            e->akick = false;
            next = 0;
        }
        int64_t now = clock_now_ns();
        if (ok && now >= next) {
            pthread_mutex_unlock(&e->imu);
            next = ask_step(e, c, now);
            int64_t d = deliver_step(e, c, now);
            if (d < next) next = d;
            d = forget_step(e, c, now);
            if (d < next) next = d;
            pthread_mutex_lock(&e->imu);
            continue;
        }
        txn_indoubt_sleep(e, &e->acv, &e->awake, ok ? next : INT64_MAX);
    }
    pthread_mutex_unlock(&e->imu);
    if (c) fab_ctx_destroy(c);
    return NULL;
}
