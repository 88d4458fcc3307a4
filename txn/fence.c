/* Fences (coord.h): the exclusive locks of a transaction at a participant that gave no answer to
 * a request that installs (APPLY, COMMIT) or may have staged (PREPARE, ABORT). The request may
 * still land, so the locks outlive the transaction: they are kept -- refreshed every quarter
 * lease where the lock allows it -- until the participant answers TXN_RPC_RESOLVE (nothing of the
 * transaction will be installed there any more) or is declared down, or answers as a later
 * process. The janitor (locks/janitor.h) keeps them; locks that cannot change threads are kept
 * by the worker itself. docs/transactions.md, "Fencing". */
#include "txn/coord.h"

#include "locks/janitor.h"

#include "common/log.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct txn_fence {
    struct lock_job job;         /* (first: the janitor's handle) */
    struct txn_env *e;
    uint64_t txid;
    uint16_t node;
    uint8_t decision;            /* enum txn_resolve */
    unsigned nlk, nrh;
    struct lock_handle *lk;      /* copies of the row locks' handles */
    struct range_handle **rh;    /* the range handles, taken over */
    uint64_t *pinc;              /* the transaction's incarnations (coord.h, struct txn): its
                                    posts are pinned to node's, where its locks were taken */
    int64_t next_ask, next_refresh;
    /* the janitor's: its lock thread's context (the refreshes), and the RESOLVE in flight */
    struct fab_ctx *lc;
    bool asking;
    uint8_t req[9];
    struct fab_buf resp;
};

/* Asks the participant once: 0 (resolved), RDKV_EBUSY (ask again soon) or a transport error. */
static int fence_ask(struct fab_ctx *c, const struct txn_fence *f)
{
    uint8_t req[9];
    pack_put_u64le(req, f->txid);
    req[8] = f->decision;
    struct fab_buf resp = {0};
    int rc = fab_rpc_call(c, f->node, TXN_RPC_RESOLVE, req, sizeof req, &resp,
                          RESOLVE_RPC_TIMEOUT_NS);
    fab_buf_free(&resp);
    return rc;
}

static void fence_free(struct txn_fence *f)
{
    free(f->lk);
    free(f->rh);
    free(f->pinc);
    free(f);
}

/* Lets the fence's locks go (released, or dropped when the participant is down) and frees it. */
static void fence_end(struct txn_fence *f, bool down)
{
    struct txn_env *e = f->e;
    if (f->decision == TXN_RESOLVE_COMMIT) coord_update(e, f->txid, 0, -1);
    /* (counted before the locks go: whoever takes them next sees the fence over) */
    __atomic_add_fetch(down ? &e->fst.dropped : &e->fst.resolved, 1, __ATOMIC_SEQ_CST);
    __atomic_sub_fetch(&e->fst.pending, 1, __ATOMIC_SEQ_CST);
    for (unsigned i = 0; i < f->nlk; i++)
        if (f->lk[i].mode && !down) lock_release(&f->lk[i]);
    for (unsigned i = 0; i < f->nrh; i++) {
        if (f->rh[i]->mode && !down) range_release(f->rh[i]);
        free(f->rh[i]);
    }
    fence_free(f);
}

/* Whether the participant f keeps locks at answers as another process than the one they were
 * taken in (c's connection now; when c has none, not known: false). That one's memory, locks
 * and requests in progress are gone: nothing of the transaction can land there any more, and
 * the locks need no release (they went with it). */
static bool fence_node_restarted(struct fab_ctx *c, const struct txn_fence *f)
{
    uint64_t inc;
    return f->pinc && f->pinc[f->node] && !fab_peer_incarnation(c, f->node, false, &inc) &&
           inc > f->pinc[f->node];
}

/* The janitor's side (struct lock_job). */

static void fence_adopt(struct lock_job *j, struct lock_thread *lt)
{
    struct txn_fence *f = (struct txn_fence *)j;
    f->lc = lt->c;
    for (unsigned i = 0; i < f->nlk; i++) f->lk[i].t = lt;
    for (unsigned i = 0; i < f->nrh; i++) f->rh[i]->t = lt;
}

static void fence_due(struct txn_fence *f)
{
    f->job.due = !f->asking && f->next_ask < f->next_refresh ? f->next_ask : f->next_refresh;
}

/* One step, on the janitor's thread: refresh the locks when due, post the ask when due. The
 * answer comes to fence_done: a lock refresh never waits behind it. */
static bool fence_step(struct lock_job *j, struct fab_ctx *rpc, int64_t now)
{
    struct txn_fence *f = (struct txn_fence *)j;
    struct txn_env *e = f->e;
    if (txn_down(e, f->node) || fence_node_restarted(f->lc, f)) {
        if (f->asking) { /* (its answer comes first, soon: the request is bounded) */
            f->job.due = now + NS_PER_MS;
            return true;
        }
        log_warn("txn %llx: node %u is %s: letting go of the locks kept there",
                 (unsigned long long)f->txid, f->node,
                 txn_down(e, f->node) ? "down" : "another process now");
        fence_end(f, true);
        return false;
    }
    /* every post of the fence reaches the process its locks are in, or none */
    if (now >= f->next_refresh) {
        uint64_t *was = fab_pin(f->lc, f->pinc);
        for (unsigned i = 0; i < f->nlk; i++)
            if (f->lk[i].mode) lock_refresh(&f->lk[i]); /* (a lock that cannot: the fence check) */
        fab_pin(f->lc, was);
        f->next_refresh = now + e->cfg.lease_ns / 4;
    }
    if (now >= f->next_ask && !f->asking) {
        pack_put_u64le(f->req, f->txid);
        f->req[8] = f->decision;
        f->resp = (struct fab_buf){0};
        uint64_t *was = fab_pin(rpc, f->pinc);
        int rc = fab_rpc_post(rpc, f->node, TXN_RPC_RESOLVE, f->req, sizeof f->req, &f->resp,
                              RESOLVE_RPC_TIMEOUT_NS, (uint64_t)(uintptr_t)j);
        fab_pin(rpc, was);
        if (rc == 0) {
            f->asking = true;
            j->posted++;
        } else {
            f->next_ask = clock_now_ns() + 50 * NS_PER_MS;
        }
    }
    fence_due(f);
    return true;
}

/* The participant's answer to the fence's RESOLVE: 0, it is resolved; RDKV_EBUSY, ask again
 * soon; anything else (no answer), ask again. */
static bool fence_done(struct lock_job *j, int status)
{
    struct txn_fence *f = (struct txn_fence *)j;
    f->asking = false;
    fab_buf_free(&f->resp);
    if (status == 0) {
        fence_end(f, false);
        return false;
    }
    f->next_ask = clock_now_ns() + (status == RDKV_EBUSY ? NS_PER_MS : 50 * NS_PER_MS);
    fence_due(f);
    return true;
}

/* The node stops: the locks are left to their leases, the handles freed. */
static void fence_drop(struct lock_job *j)
{
    struct txn_fence *f = (struct txn_fence *)j;
    for (unsigned i = 0; i < f->nlk; i++) f->lk[i].mode = 0;
    for (unsigned i = 0; i < f->nrh; i++) f->rh[i]->mode = 0;
    log_warn("txn %llx: stopping with its outcome at node %u unknown; its locks there are left to "
             "their leases", (unsigned long long)f->txid, f->node);
    fence_end(f, true);
}

/* Hands t's exclusive locks at node to the janitor as a fence: false when they cannot move (a
 * queue lock, no memory, no janitor), and t keeps them. */
static bool fence_hand_over(struct txn *t, uint16_t node, uint8_t decision, unsigned nlk,
                            unsigned nrh)
{
    struct txn_env *e = t->w->e;
    if (!e->row->movable) return false;
    struct txn_fence *f = calloc(1, sizeof *f);
    if (!f) return false;
    f->lk = calloc(nlk ? nlk : 1, sizeof *f->lk);
    f->rh = calloc(nrh ? nrh : 1, sizeof *f->rh);
    f->pinc = malloc(e->n * sizeof *f->pinc);
    if (!f->lk || !f->rh || !f->pinc) {
        fence_free(f);
        return false;
    }
    memcpy(f->pinc, t->pinc, e->n * sizeof *f->pinc);
    f->job = (struct lock_job){
        .adopt = fence_adopt, .step = fence_step, .done = fence_done, .drop = fence_drop};
    f->e = e;
    f->txid = t->txid;
    f->node = node;
    f->decision = decision;
    for (uint32_t i = 0; i < t->nents; i++) {
        struct tent *en = &t->ents[i];
        if (en->lk.mode == LOCK_EXCLUSIVE && rptr_node(en->lk.line) == node)
            f->lk[f->nlk++] = en->lk; /* (the janitor points it at its own lock thread) */
        if (en->rh && en->rh->mode == LOCK_EXCLUSIVE && en->rh->node == node)
            f->rh[f->nrh++] = en->rh;
    }
    /* the coordinator remembers the commit while the participant may still hold it */
    if (decision == TXN_RESOLVE_COMMIT) coord_update(e, t->txid, 0, +1);
    if (!lock_janitor_add(e->jan, &f->job)) {
        if (decision == TXN_RESOLVE_COMMIT) coord_update(e, t->txid, 0, -1);
        fence_free(f);
        return false;
    }
    /* they are the fence's now */
    for (uint32_t i = 0; i < t->nents; i++) {
        struct tent *en = &t->ents[i];
        if (en->lk.mode == LOCK_EXCLUSIVE && rptr_node(en->lk.line) == node) en->lk.mode = 0;
        if (en->rh && en->rh->mode == LOCK_EXCLUSIVE && en->rh->node == node) en->rh = NULL;
    }
    return true;
}

void txn_fence_keep(struct txn *t, uint16_t node, uint8_t decision)
{
    struct txn_worker *w = t->w;
    struct txn_env *e = w->e;
    if (txn_down(e, node)) return;
    /* (a participant that is another process now: its requests in progress and our locks there
     * went with the old one, and our posts cannot reach the new one: nothing to fence) */
    uint64_t inc;
    if (!fab_peer_incarnation(w->c, node, false, &inc) && inc > t->pinc[node]) return;
    unsigned nlk = 0, nrh = 0;
    for (uint32_t i = 0; i < t->nents; i++) {
        struct tent *en = &t->ents[i];
        if (en->lk.mode == LOCK_EXCLUSIVE && rptr_node(en->lk.line) == node) nlk++;
        if (en->rh && en->rh->mode == LOCK_EXCLUSIVE && en->rh->node == node) nrh++;
    }
    if (!nlk && !nrh) return;
    __atomic_add_fetch(&e->fst.kept, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&e->fst.pending, 1, __ATOMIC_RELAXED);
    if (fence_hand_over(t, node, decision, nlk, nrh)) return;
    /* Here, then: this worker keeps the locks alive and asks until answered (its posts pinned
     * by the transaction's call). */
    struct txn_fence me = {.txid = t->txid, .node = node, .decision = decision, .pinc = t->pinc};
    for (;;) {
        if (txn_down(e, node) || fence_node_restarted(w->c, &me)) {
            __atomic_add_fetch(&e->fst.dropped, 1, __ATOMIC_RELAXED);
            break;
        }
        int64_t now = clock_now_ns();
        if (now >= me.next_refresh) {
            for (uint32_t i = 0; i < t->nents; i++)
                if (t->ents[i].lk.mode && rptr_node(t->ents[i].lk.line) == node)
                    lock_refresh(&t->ents[i].lk);
            me.next_refresh = now + e->cfg.lease_ns / 4;
        }
        int rc = fence_ask(w->c, &me);
        if (rc == 0) {
            __atomic_add_fetch(&e->fst.resolved, 1, __ATOMIC_RELAXED);
            break;
        }
        clock_sleep_ns(rc == RDKV_EBUSY ? NS_PER_MS : 50 * NS_PER_MS);
    }
    __atomic_sub_fetch(&e->fst.pending, 1, __ATOMIC_RELAXED);
}
