/* The outcome memory (internal.h): the two-phase commits this node committed as a participant
 * (with a log), until their coordinator has forgotten them. A coordinator counts a participant's
 * commit as confirmed only on its answer 0, which this node gives for a transaction it holds
 * prepared once the commit is installed, and for one it committed already by this memory; so a
 * COMMIT sent again after the answer was lost is answered 0, and "not prepared here" never
 * stands for "committed" (docs/transactions.md, "The logged commit"). The asker asks the
 * coordinators about the entries (TXN_RPC_QUERY, many txids at once) and forgets those they
 * answer "unknown" for: they answer so only once their END is durable. An open-addressed table
 * of txids under pmu, with when each is next asked about. */
#include "txn/internal.h"

#include "common/log.h"

#include <stdlib.h>

static size_t outc_slot(const struct txn_env *e, uint64_t txid)
{
    return (size_t)((txid * 0x9e3779b97f4a7c15ull) >> 20) & (e->outc_cap - 1);
}

static bool outc_find_locked(const struct txn_env *e, uint64_t txid, size_t *at)
{
    if (!e->outc_cap) return false;
    for (size_t i = outc_slot(e, txid);; i = (i + 1) & (e->outc_cap - 1)) {
        if (!e->outc[i].txid) return false;
        if (e->outc[i].txid == txid) {
            *at = i;
            return true;
        }
    }
}

static bool outc_grow_locked(struct txn_env *e)
{
    size_t cap = e->outc_cap ? e->outc_cap * 2 : 1024;
    if (cap > OUTC_MAX * 2) return false;
    struct outcome *n = calloc(cap, sizeof *n);
    if (!n) return false;
    struct outcome *old = e->outc;
    size_t ocap = e->outc_cap;
    e->outc = n;
    e->outc_cap = cap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].txid) {
            size_t j = outc_slot(e, old[i].txid);
            while (n[j].txid) j = (j + 1) & (cap - 1);
            n[j] = old[i];
        }
    free(old);
    return true;
}

void outc_add_locked(struct txn_env *e, uint64_t txid, int64_t due)
{
    size_t at;
    if (!txid || outc_find_locked(e, txid, &at)) return;
    if ((e->outc_n + 1) * 2 > e->outc_cap && !outc_grow_locked(e)) {
        /* (bounded: charge() refuses PREPAREs long before; without memory the COMMIT sent again
         * meets "not found" and its coordinator keeps delivering, saying so) */
        log_error("txn %llx: no room to remember its commit here", (unsigned long long)txid);
        return;
    }
    size_t i = outc_slot(e, txid);
    while (e->outc[i].txid) i = (i + 1) & (e->outc_cap - 1);
    e->outc[i] = (struct outcome){txid, due};
    e->outc_n++;
}

bool outc_known_locked(const struct txn_env *e, uint64_t txid)
{
    size_t at;
    return outc_find_locked(e, txid, &at);
}

bool part_outcome_known(struct txn_env *e, uint64_t txid)
{
    pthread_mutex_lock(&e->pmu);
    bool found = outc_known_locked(e, txid);
    pthread_mutex_unlock(&e->pmu);
    return found;
}

/* Removes entry i (pmu held), moving back the entries after it that hash at or before it. */
static void outc_del_at(struct txn_env *e, size_t i)
{
    size_t mask = e->outc_cap - 1;
    e->outc[i].txid = 0;
    e->outc_n--;
    for (size_t j = (i + 1) & mask; e->outc[j].txid; j = (j + 1) & mask) {
        size_t h = outc_slot(e, e->outc[j].txid);
        /* j's entry moves to the hole at i unless its home h lies in (i, j] (cyclically) */
        bool stays = i <= j ? (h > i && h <= j) : (h > i || h <= j);
        if (!stays) {
            e->outc[i] = e->outc[j];
            e->outc[j].txid = 0;
            i = j;
        }
    }
}

unsigned part_outcomes_due(struct txn_env *e, int64_t now, uint64_t *tx, unsigned max,
                           int64_t *next)
{
    unsigned n = 0;
    pthread_mutex_lock(&e->pmu);
    for (size_t i = 0; i < e->outc_cap && n < max; i++) {
        struct outcome *o = &e->outc[i];
        if (!o->txid) continue;
        if (o->due <= now) {
            tx[n++] = o->txid;
            o->due = now + OUTC_AGAIN_NS;
        }
        if (o->due < *next) *next = o->due;
    }
    pthread_mutex_unlock(&e->pmu);
    return n;
}

void part_outcome_forget(struct txn_env *e, uint64_t txid)
{
    size_t at;
    pthread_mutex_lock(&e->pmu);
    if (outc_find_locked(e, txid, &at)) outc_del_at(e, at);
    pthread_mutex_unlock(&e->pmu);
}
