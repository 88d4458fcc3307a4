/* The participant's side of commit: a coordinator that holds the exclusive locks of some rows of
 * this node sends their new contents; this node stages them (PREPARE: every allocation is made
 * now, so a later COMMIT cannot fail), then installs them (COMMIT) or gives the memory back
 * (ABORT). APPLY does both at once for a transaction with a single participant. Also the scan
 * pages that coordinators on other nodes ask for. Every request is decoded defensively: bad
 * bytes get RDKV_EPROTO and change nothing.
 *
 * The fence: a row's bytes change only while the row's exclusive lock is held by the changing
 * transaction. Each write carries the name of the coordinator's hold (lock_token, and the range
 * token of an inserted or deleted key's point), and this node checks on its own lock words
 * (and its own range server) that the hold is still there, at prepare and again right before
 * the install; a request that arrives after its coordinator gave up waiting for it (and asked
 * TXN_RPC_RESOLVE) is refused outright. docs/transactions.md, "Fencing". */
#include "txn/internal.h"

#include "storage/wal.h"

#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static int begin_locked(struct txn_env *e, uint64_t txid, struct inprog *ip);

/* The row the coordinator names must be a live row of this node holding that key. */
static int check_row(struct txn_env *e, const struct wop *o, struct row_view *v)
{
    if (rptr_node(o->row) != e->me) return RDKV_EPROTO;
    int rc = store_row_view(o->st, o->row, v);
    if (rc) return rc;
    if (!(v->flags & ROW_LIVE) || v->klen != o->klen || memcmp(v->key, o->key, o->klen))
        return RDKV_EABORTED; /* the row changed under a lock the coordinator no longer has */
    /* ... and the very row the index holds for that key: bytes that only look like a row (a
     * value imitating a row header, at a pointer that is no row) are refused, never written */
    rptr cur;
    if (store_lookup(o->st, o->key, o->klen, &cur) || cur != o->row) return RDKV_EABORTED;
    return 0;
}

/* The fence, for op o of a transaction coordinated by node coord: its row is still locked
 * exclusively by the coordinator's hold, and so is its key's point {k} when it inserts or
 * deletes the key. An algorithm that cannot tell its holders apart (RDKV_ENOTSUP) passes. */
static int fence_ok(struct txn_env *e, uint16_t coord, const struct wop *o)
{
    if (o->kind != WOP_INSERT && lock_holds_x(e->row, e->f, o->row, coord, o->lock_tok) == 0)
        return 0;
    if (o->kind != WOP_UPDATE) {
        if (!range_server_holds_key_x(e->rs, TXN_RANGE_SPACE, o->key, o->klen, o->range_tok))
            return 0;
    }
    return 1;
}

static int fence_all(struct txn_env *e, uint16_t coord, const struct wop *ops, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (!fence_ok(e, coord, &ops[i])) {
            __atomic_add_fetch(&e->fst.refused, 1, __ATOMIC_RELAXED);
            return RDKV_EABORTED;
        }
    return 0;
}

static void unstage(struct wop *ops, struct store_staged *st, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (ops[i].kind == WOP_UPDATE) store_value_unstage(ops[i].st, &st[i]);
        else if (ops[i].kind == WOP_INSERT && st[i].row) store_row_discard(ops[i].st, st[i].row);
    }
}

int part_prepare(struct txn_env *e, uint64_t txid, uint16_t coord, struct wop *ops, uint32_t n,
                 void *bytes, struct prepared **out)
{
    struct prepared *p = calloc(1, sizeof *p);
    struct store_staged *st = calloc(n, sizeof *st);
    if (!p || !st) {
        free(st);
        free(p);
        free(ops);
        free(bytes);
        return RDKV_ENOMEM;
    }
    int rc = 0;
    /* a row named twice (or a key inserted twice) would stage twice: not from a coordinator */
    for (uint32_t a = 0; a < n && !rc; a++)
        for (uint32_t b = a + 1; b < n && !rc; b++)
            if ((ops[a].kind != WOP_INSERT && ops[a].row == ops[b].row) ||
                (ops[a].klen == ops[b].klen && !memcmp(ops[a].key, ops[b].key, ops[a].klen)))
                rc = RDKV_EPROTO;
    /* each key's partition must be served here (a coordinator on an old route is refused as
     * by a conflict: it retries, on the new route) */
    for (uint32_t a = 0; a < n && !rc; a++)
        if (!(ops[a].st = txn_pstore(e, txn_partition(e, ops[a].key, ops[a].klen))))
            rc = RDKV_EABORTED;
    if (rc) {
        free(st);
        free(p);
        free(ops);
        free(bytes);
        return rc;
    }
    uint32_t i = 0;
    for (; i < n && !rc; i++) {
        struct wop *o = &ops[i];
        struct row_view v;
        switch (o->kind) {
        case WOP_UPDATE:
            rc = check_row(e, o, &v);
            if (!rc) rc = fence_all(e, coord, o, 1);
            if (!rc) rc = store_value_stage(o->st, o->row, o->val, o->vlen, &st[i]);
            break;
        case WOP_INSERT:
            rc = fence_all(e, coord, o, 1);
            if (!rc) rc = store_row_alloc(o->st, o->key, o->klen, o->val, o->vlen, &st[i].row);
            break;
        case WOP_DELETE:
            rc = check_row(e, o, &v);
            if (!rc) rc = fence_all(e, coord, o, 1);
            break;
        }
    }
    if (rc) {
        unstage(ops, st, i - 1); /* op i-1 failed and staged nothing */
        free(st);
        free(p);
        free(ops);
        free(bytes);
        return rc;
    }
    p->txid = txid;
    p->coord = coord;
    p->n = n;
    p->ops = ops;
    p->staged = st;
    p->bytes = bytes;
    *out = p;
    return 0;
}

/* Gives back a kept PREPARE's share of the caps. */
static void uncharge(struct txn_env *e, struct prepared *p)
{
    if (!p->charge) return;
    pthread_mutex_lock(&e->pmu);
    e->prep_bytes -= p->charge;
    e->prep_by_coord[p->coord] -= p->charge;
    e->prep_kept--;
    pthread_mutex_unlock(&e->pmu);
    p->charge = 0;
}

static void prepared_free(struct txn_env *e, struct prepared *p)
{
    uncharge(e, p);
    free(p->ops);
    free(p->staged);
    free(p->bytes);
    free(p);
}

/* p's writes as a redo-log payload (storage/wal.h), after `pre` bytes of prefix: malloc'd, its
 * length in *len; NULL for no memory or a payload past the format. */
static uint8_t *pack_writes(const struct prepared *p, size_t pre, size_t *len)
{
    struct wal_write *ws = malloc((p->n ? p->n : 1) * sizeof *ws);
    if (!ws) return NULL;
    for (uint32_t i = 0; i < p->n; i++) {
        const struct wop *o = &p->ops[i];
        bool del = o->kind == WOP_DELETE;
        ws[i] = (struct wal_write){del ? WAL_OP_DEL : WAL_OP_PUT, o->klen, del ? 0 : o->vlen,
                                   o->key, o->val};
    }
    size_t n = wal_writes_size(ws, p->n);
    uint8_t *buf = pre + n <= UINT32_MAX ? malloc(pre + n) : NULL;
    if (buf) wal_writes_pack(ws, p->n, buf + pre, n);
    free(ws);
    *len = pre + n;
    return buf;
}

/* Appends a record of p's writes (a COMMIT, or a PREPARE with its coordinator in front): 0 and
 * its LSN, or the log's refusal (nothing was written: RDKV_ETOOBIG, RDKV_ENOMEM, the log's
 * failure, RDKV_ESHUTDOWN). */
static int log_writes(struct txn_env *e, struct prepared *p, uint8_t type, uint64_t *lsn)
{
    size_t pre = type == WAL_PREPARE ? 2 : 0, len;
    uint8_t *buf = pack_writes(p, pre, &len);
    if (!buf) return RDKV_ETOOBIG;
    if (pre) pack_put_u16le(buf, p->coord);
    int rc = wal_append(e->wal, type, p->txid, buf, (uint32_t)len, lsn);
    free(buf);
    return rc;
}

/* The log failed a record this node's memory depends on: the node stops (the log's fail-stop
 * hook), and its restart decides from the log. */
static _Noreturn void log_lost(struct txn_env *e, uint64_t txid, const char *what)
{
    char why[160];
    snprintf(why, sizeof why, "txn %llx: its %s record is not known durable",
             (unsigned long long)txid, what);
    wal_fail_stop(e->wal, why);
}

int part_log_prepare(struct txn_env *e, struct prepared *p, bool wait)
{
    uint64_t lsn;
    int rc = log_writes(e, p, WAL_PREPARE, &lsn);
    if (rc) return rc; /* (nothing written: a clean no) */
    p->logged = true;  /* (an abort says END) */
    if (wait && wal_wait(e->wal, lsn)) log_lost(e, p->txid, "PREPARE");
    return 0;
}

/* Unlinks p from the prepared list (pmu held). */
static void unlink_locked(struct txn_env *e, struct prepared *p)
{
    for (struct prepared **pp = &e->prep; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    p->listed = p->committing = false;
}

void part_settle_locked(struct txn_env *e, struct prepared *p, bool committed)
{
    unlink_locked(e, p);
    if (committed && e->wal) outc_add_locked(e, p->txid, clock_now_ns() + OUTC_ASK_NS);
}

uint8_t *part_prepare_payload(const struct prepared *p, size_t *len)
{
    uint8_t *buf = pack_writes(p, 2, len);
    if (buf) pack_put_u16le(buf, p->coord);
    return buf;
}

static void install(struct txn_env *e, struct prepared *p)
{
    if (txn_fault_is(e, TXN_FAULT_INSTALL_SLOW)) clock_sleep_ns(50 * NS_PER_MS);
    for (uint32_t i = 0; i < p->n; i++) {
        struct wop *o = &p->ops[i];
        switch (o->kind) {
        case WOP_UPDATE: store_value_install(o->st, &p->staged[i]); break;
        case WOP_INSERT: {
            int rc = store_row_publish(o->st, p->staged[i].row);
            if (rc) {
                /* the coordinator held [key, key] exclusively: nobody can have inserted it */
                log_error("txn %llx: insert of a %u-byte key failed at commit: %s",
                          (unsigned long long)p->txid, o->klen, rdkv_strerror(rc));
                store_row_discard(o->st, p->staged[i].row);
            }
            break;
        }
        case WOP_DELETE: store_row_delete(o->st, o->row); break;
        }
    }
}

/* A ship that gave up (the node stopping, no memory): nothing is installed, and the commit's
 * outcome is unknown (the writes may be on a backup). A listed transaction stays prepared. */
static int ship_failed(struct txn_env *e, struct prepared *p, int rc)
{
    /* (RDKV_EBUSY: its partition is being handed back, docs/replication.md section 8 -- refused
     * before anything was sent, and its client retries) */
    if (rc != RDKV_EBUSY)
        log_error("txn %llx: its writes did not reach every backup: %s; not installed",
                  (unsigned long long)p->txid, rdkv_strerror(rc));
    if (!p->listed) {
        part_abort(e, p);
        /* (too big for one REPL, or its partition being handed back: refused before anything
         * was sent) */
        return rc == RDKV_ETOOBIG || rc == RDKV_EBUSY ? rc : RDKV_EUNKNOWN;
    }
    pthread_mutex_lock(&e->pmu);
    p->committing = false;
    pthread_mutex_unlock(&e->pmu);
    return rc == RDKV_ENOMEM ? RDKV_EBUSY : RDKV_EUNKNOWN;
}

int part_commit(struct txn_env *e, struct prepared *p)
{
    /* the locks were there at prepare; time has passed since (a 2PC round, a slow network) */
    if (fence_all(e, p->coord, p->ops, p->n)) {
        part_abort(e, p);
        return RDKV_EABORTED;
    }
    /* Durable before it is installed, under a hold until it is (and, for a transaction of the
     * prepared list, until it has left the list for the outcome memory): a checkpoint's replay
     * LSN passes the record only once memory shows it (docs/storage.md, "Holds"). */
    struct wal_hold hold;
    if (e->wal) {
        uint64_t lsn;
        wal_hold(e->wal, &hold);
        int rc = log_writes(e, p, WAL_COMMIT, &lsn);
        if (rc) {
            wal_unhold(e->wal, &hold);
            /* nothing was written: a listed transaction stays prepared (its commit is tried
             * again); any other aborts, its writes undone */
            if (!p->listed) part_abort(e, p);
            else {
                pthread_mutex_lock(&e->pmu);
                p->committing = false;
                pthread_mutex_unlock(&e->pmu);
            }
            return rc;
        }
        if (wal_wait(e->wal, lsn)) log_lost(e, p->txid, "COMMIT");
    }
    if (e->cfg.ship) {
        /* every backup holds the writes before this partition shows them (docs/replication.md,
         * "Replicated commit") */
        size_t len;
        uint8_t *buf = pack_writes(p, 0, &len);
        /* (no memory now: tried again, a commit past its decision must not fail for it) */
        for (int tries = 0; !buf && len <= UINT32_MAX && tries < 10000; tries++) {
            clock_sleep_ns(NS_PER_MS);
            buf = pack_writes(p, 0, &len);
        }
        int rc = !buf                                                   ? RDKV_ENOMEM
                 : p->listed && txn_fault_take(e, TXN_FAULT_SHIP_BUSY) ? RDKV_EUNAVAILABLE
                 : e->cfg.ship(e->cfg.ship_arg, p->txid, buf, len);
        free(buf);
        if (rc) {
            if (e->wal) wal_unhold(e->wal, &hold);
            return ship_failed(e, p, rc);
        }
    }
    install(e, p);
    if (e->cfg.ship && e->cfg.installed) e->cfg.installed(e->cfg.ship_arg, p->txid);
    if (p->listed) {
        /* a participant's share of a two-phase commit: remembered as committed here until its
         * coordinator has forgotten it (the COMMIT it may send again is answered 0) */
        pthread_mutex_lock(&e->pmu);
        part_settle_locked(e, p, true);
        pthread_mutex_unlock(&e->pmu);
    }
    if (e->wal) wal_unhold(e->wal, &hold);
    prepared_free(e, p);
    return 0;
}

int part_ship_prepare(struct txn_env *e, struct prepared *p, int kind)
{
    size_t len;
    uint8_t *buf = part_prepare_payload(p, &len);
    if (!buf) return RDKV_ENOMEM;
    p->shipped = true;
    int rc = e->cfg.ship_rec(e->cfg.ship_arg, kind, p->txid, buf, len);
    free(buf);
    if (rc == RDKV_EBUSY) p->shipped = false; /* (refused before anything was sent) */
    return rc;
}

void part_abort(struct txn_env *e, struct prepared *p)
{
    if (p->shipped && e->cfg.ship_rec) {
        /* the backups forget its PREPARE (not waited for: one left behind is asked about by a
         * promotion, and its coordinator answers "unknown") */
        size_t len;
        uint8_t *buf = pack_writes(p, 0, &len);
        /* (no memory now: tried again for a while -- until its FORGET is queued the PREPARE
         * counts as open, and a new copy's fill or a hand-back waits for it) */
        for (int tries = 0; !buf && len <= UINT32_MAX && tries < 1000; tries++) {
            clock_sleep_ns(NS_PER_MS);
            buf = pack_writes(p, 0, &len);
        }
        if (buf) e->cfg.ship_rec(e->cfg.ship_arg, TXN_SHIP_FORGET, p->txid, buf, len);
        else
            log_error("txn %llx: no memory for the FORGET of its PREPARE: the backups keep it "
                      "(a promotion asks its coordinator about it)",
                      (unsigned long long)p->txid);
        free(buf);
    }
    if (p->listed) {
        pthread_mutex_lock(&e->pmu);
        unlink_locked(e, p);
        pthread_mutex_unlock(&e->pmu);
    }
    /* presumed abort: the END is not waited for (lost, the PREPARE is asked about again and
     * its coordinator answers "unknown": abort) */
    if (p->logged && e->wal) txn_log_end(e, p->txid);
    unstage(p->ops, p->staged, p->n);
    prepared_free(e, p);
}

void part_record(struct txn_env *e, struct prepared *p)
{
    pthread_mutex_lock(&e->pmu);
    p->next = e->prep;
    e->prep = p;
    p->listed = true;
    int64_t keep = p->next_keep, ask = p->next_ask;
    bool watched = p->charge || p->rt;
    pthread_mutex_unlock(&e->pmu);
    /* (after pmu: neither lock is taken inside the other) */
    if (watched) txn_indoubt_due(e, keep, ask);
}

/* The first listed transaction with that txid (by_coord: coordinated by node `key`) not being
 * committed, taken out of the list; rec: also one re-established from the log. pmu held. */
static struct prepared *take_locked(struct txn_env *e, bool by_coord, uint64_t key, bool rec)
{
    for (struct prepared *p = e->prep; p; p = p->next)
        if ((rec || !p->rt) && !p->committing && (by_coord ? p->coord == key : p->txid == key)) {
            unlink_locked(e, p);
            return p;
        }
    return NULL;
}

bool part_recovered_locked(struct txn_env *e, uint64_t txid)
{
    for (const struct prepared *p = e->prep; p; p = p->next)
        if (p->rt && p->txid == txid) return true;
    return false;
}

static bool recovered(struct txn_env *e, uint64_t txid)
{
    pthread_mutex_lock(&e->pmu);
    bool r = part_recovered_locked(e, txid);
    if (r) /* its coordinator is talking to us again: ask it now */
        for (struct prepared *p = e->prep; p; p = p->next)
            if (p->rt && p->txid == txid) p->next_ask = 0;
    pthread_mutex_unlock(&e->pmu);
    if (r) txn_indoubt_kick(e);
    return r;
}

static struct prepared *take_first(struct txn_env *e, bool by_coord, uint64_t key)
{
    pthread_mutex_lock(&e->pmu);
    struct prepared *found = take_locked(e, by_coord, key, false);
    pthread_mutex_unlock(&e->pmu);
    return found;
}

struct prepared *part_take_locked(struct txn_env *e, uint64_t txid, bool rec)
{
    return take_locked(e, false, txid, rec);
}

/* Claims the listed transaction txid (not one re-established from the log) for its outcome, as
 * a request in progress (ip; pmu held): it stays in the list, marked committing, so that a
 * checkpoint still finds it and a COMMIT meanwhile is answered "busy"; NULL when it is not
 * prepared here, *busy when someone is settling it already. */
static struct prepared *claim_locked(struct txn_env *e, uint64_t txid, struct inprog *ip,
                                     bool *busy)
{
    *busy = false;
    for (struct prepared *p = e->prep; p; p = p->next)
        if (!p->rt && p->txid == txid) {
            if (p->committing) {
                *busy = true;
                return NULL;
            }
            p->committing = true;
            begin_locked(e, txid, ip); /* (no tombstone: it was still prepared) */
            return p;
        }
    return NULL;
}

struct prepared *part_take_begin(struct txn_env *e, uint64_t txid, struct inprog *ip)
{
    bool busy;
    pthread_mutex_lock(&e->pmu);
    struct prepared *p = claim_locked(e, txid, ip, &busy);
    pthread_mutex_unlock(&e->pmu);
    return p;
}


/* ------------------------------------------------------------------------------------------ */
/* A prepared transaction's rows stay locked by its coordinator's holds until its outcome is
 * installed here, however long that takes and whether or not the coordinator lives: the
 * in-doubt thread keeps the holds alive for it (lock_keep_x, range_server_keep) from an eighth of
 * a lease after the PREPARE on, every quarter lease, so no lease recovery ever takes them; and
 * once the outcome is settled by a later incarnation of the coordinator (its restarted process
 * delivered the COMMIT, or answered the in-doubt query) -- so the process that took the holds is
 * gone and will never release them -- this node releases them for it. docs/transactions.md,
 * "How an in-doubt transaction's rows stay locked". */

/* p's coordinator's holds here (malloc'd; NULL for no memory). */
struct held *part_held_of(const struct prepared *p)
{
    struct held *h = malloc(sizeof *h + (p->n ? p->n : 1) * sizeof h->ops[0]);
    if (!h) return NULL;
    h->next = NULL;
    h->txid = p->txid;
    h->coord = p->coord;
    h->n = p->n;
    for (uint32_t i = 0; i < p->n; i++)
        h->ops[i] = (struct held_op){p->ops[i].kind, p->ops[i].row, p->ops[i].lock_tok,
                                     p->ops[i].range_tok};
    return h;
}

/* Keeps (or, release, releases) h's holds, on the in-doubt thread (e->ilt). A hold no longer
 * there is left alone: its coordinator released it (it settled the transaction itself). */
void part_holds_do(struct txn_env *e, const struct held *h, bool release)
{
    for (uint32_t i = 0; i < h->n; i++) {
        const struct held_op *o = &h->ops[i];
        int rc = RDKV_ENOTSUP;
        if (o->kind != WOP_INSERT && e->ilt)
            rc = release ? lock_release_x(e->row, e->ilt, o->row, h->coord, o->lock_tok)
                         : lock_keep_x(e->row, e->ilt, o->row, h->coord, o->lock_tok);
        if (o->kind != WOP_UPDATE) {
            int r2 = release ? range_server_release(e->rs, TXN_RANGE_SPACE, o->range_tok)
                             : range_server_keep(e->rs, TXN_RANGE_SPACE, o->range_tok);
            if (rc == RDKV_ENOTSUP) rc = r2;
        }
        if (rc == 0) __atomic_add_fetch(release ? &e->fst.freed_for : &e->fst.kept_for, 1,
                                        __ATOMIC_RELAXED);
    }
}

/* After p was settled on the word of node p->coord's incarnation `by` (0: unknown): when that is
 * not the process that took p's holds, that one is gone -- hand the holds to the in-doubt thread,
 * which releases them (h: part_held_of(p), taken before p was freed; consumed). */
void part_release_if_gone(struct txn_env *e, struct held *h, uint64_t coord_inc, uint64_t by)
{
    if (!h) return;
    if (by <= coord_inc) {
        free(h); /* (its coordinator lives, and releases them itself once answered) */
        return;
    }
    log_warn("txn %llx: settled by a later process of its coordinator, node %u: releasing the "
             "locks its earlier one held here", (unsigned long long)h->txid, h->coord);
    pthread_mutex_lock(&e->pmu);
    h->next = e->releases;
    e->releases = h;
    pthread_mutex_unlock(&e->pmu);
    txn_indoubt_kick(e);
}

/* ------------------------------------------------------------------------------------------ */
/* Late requests. A request of a transaction counts as in progress from the moment the handler
 * knows its txid until it is done; a coordinator that got no answer asks TXN_RPC_RESOLVE, which
 * is answered only when none of the transaction's requests is in progress, and leaves a
 * tombstone: a request of it that arrives later is refused. (pmu held for all of these.) */

static bool tomb_has(const struct txn_env *e, uint64_t txid)
{
    for (unsigned i = 0; i < e->tomb_n; i++)
        if (e->tombs[i] == txid) return true;
    return false;
}

static void tomb_add(struct txn_env *e, uint64_t txid)
{
    if (tomb_has(e, txid)) return;
    if (!e->tombs && !(e->tombs = malloc(TXN_TOMBS * sizeof *e->tombs))) {
        log_error("txn %llx: no memory for its tombstone; a late request of it is refused "
                  "only by the lock check", (unsigned long long)txid);
        return;
    }
    e->tombs[e->tomb_at] = txid; /* the oldest goes when the ring is full */
    e->tomb_at = (e->tomb_at + 1) % TXN_TOMBS;
    if (e->tomb_n < TXN_TOMBS) e->tomb_n++;
}

static bool in_progress(const struct txn_env *e, uint64_t txid)
{
    for (const struct inprog *ip = e->inprog; ip; ip = ip->next)
        if (ip->txid == txid) return true;
    return false;
}

/* Starts handling a request of txid: RDKV_EABORTED if its coordinator gave it up. */
static int begin_locked(struct txn_env *e, uint64_t txid, struct inprog *ip)
{
    if (tomb_has(e, txid)) {
        __atomic_add_fetch(&e->fst.late, 1, __ATOMIC_RELAXED);
        return RDKV_EABORTED;
    }
    ip->txid = txid;
    ip->next = e->inprog;
    ip->on = true;
    e->inprog = ip;
    return 0;
}

/* Starts handling a PREPARE or APPLY of txid: RDKV_EABORTED also when txid is prepared here
 * already, or committed here already (the outcome memory): a late duplicate of its PREPARE,
 * which must not stage it a second time (the commit model found it: docs/commit-model.md). */
static int part_begin(struct txn_env *e, uint64_t txid, struct inprog *ip)
{
    pthread_mutex_lock(&e->pmu);
    bool again = outc_known_locked(e, txid);
    for (const struct prepared *p = e->prep; p && !again; p = p->next) again = p->txid == txid;
    int rc = again ? RDKV_EABORTED : begin_locked(e, txid, ip);
    pthread_mutex_unlock(&e->pmu);
    if (again) __atomic_add_fetch(&e->fst.late, 1, __ATOMIC_RELAXED);
    return rc;
}

static void part_end(struct txn_env *e, struct inprog *ip)
{
    if (!ip->on) return;
    ip->on = false;
    pthread_mutex_lock(&e->pmu);
    for (struct inprog **pp = &e->inprog; *pp; pp = &(*pp)->next)
        if (*pp == ip) {
            *pp = ip->next;
            break;
        }
    pthread_mutex_unlock(&e->pmu);
}

void txn_env_fence_stats(struct txn_env *e, struct txn_fence_stats *out)
{
    out->refused = __atomic_load_n(&e->fst.refused, __ATOMIC_RELAXED);
    out->late = __atomic_load_n(&e->fst.late, __ATOMIC_RELAXED);
    out->kept = __atomic_load_n(&e->fst.kept, __ATOMIC_RELAXED);
    out->resolved = __atomic_load_n(&e->fst.resolved, __ATOMIC_RELAXED);
    out->dropped = __atomic_load_n(&e->fst.dropped, __ATOMIC_RELAXED);
    out->pending = __atomic_load_n(&e->fst.pending, __ATOMIC_RELAXED);
    out->stale = __atomic_load_n(&e->fst.stale, __ATOMIC_RELAXED);
    out->kept_for = __atomic_load_n(&e->fst.kept_for, __ATOMIC_RELAXED);
    out->freed_for = __atomic_load_n(&e->fst.freed_for, __ATOMIC_RELAXED);
    pthread_mutex_lock(&e->pmu);
    out->prepared = e->prep_kept;
    out->prepared_bytes = e->prep_bytes;
    pthread_mutex_unlock(&e->pmu);
    out->prepared_refused = __atomic_load_n(&e->prep_refused, __ATOMIC_RELAXED);
    out->indoubt_committed = __atomic_load_n(&e->indoubt_committed, __ATOMIC_RELAXED);
    out->indoubt_dropped = __atomic_load_n(&e->indoubt_dropped, __ATOMIC_RELAXED);
    out->decisions_pending = coord_undelivered(e);
}

void txn_env_peer_lost(struct txn_env *e, uint16_t node)
{
    /* With a redo log, its decision is durable at the coordinator before any COMMIT leaves:
     * a prepared transaction is kept and asked about until the coordinator is back
     * (docs/transactions.md, "The logged commit"). With replicas, its decision is on its
     * partition's backups before any COMMIT leaves: the node promoted for that partition
     * answers for it (docs/replication.md, section 6). */
    if (e->wal || e->cfg.ship_rec) return;
    for (;;) {
        struct prepared *found = take_first(e, true, node);
        if (!found) return;
        log_warn("aborting prepared transaction %llx: its coordinator, node %u, is down",
                 (unsigned long long)found->txid, node);
        part_abort(e, found);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* RPC handlers (on the node's RPC threads). */

bool txn_env_enter(struct txn_env *e)
{
    __atomic_add_fetch(&e->inflight, 1, __ATOMIC_SEQ_CST);
    if (!__atomic_load_n(&e->closing, __ATOMIC_SEQ_CST)) return true;
    __atomic_sub_fetch(&e->inflight, 1, __ATOMIC_SEQ_CST);
    return false;
}

void txn_env_leave(struct txn_env *e) { __atomic_sub_fetch(&e->inflight, 1, __ATOMIC_SEQ_CST); }

/* Every handler runs through this guard, which turns requests away once the layer quiesces. */
static void guarded(struct fab_rpc_req *req, void *arg)
{
    struct txn_guard *g = arg;
    if (!txn_env_enter(g->e)) {
        fab_rpc_reply(req, RDKV_ESHUTDOWN, NULL, 0);
        return;
    }
    g->fn(req, g->e);
    txn_env_leave(g->e);
}


/* A request of the two-phase commit that did not come from the coordinator its txid names:
 * refused with RDKV_EPERM, and said in the log at most once a second (a flood of them must not
 * flood the log). */
static int not_coordinator(const char *what, uint16_t src, uint64_t txid)
{
    static int64_t last_ns;
    static unsigned quiet;
    int64_t now = clock_now_ns(), last = __atomic_load_n(&last_ns, __ATOMIC_RELAXED);
    if (now - last >= NS_PER_S &&
        __atomic_compare_exchange_n(&last_ns, &last, now, false, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED)) {
        unsigned q = __atomic_exchange_n(&quiet, 0, __ATOMIC_RELAXED);
        char from[16];
        if (src == FAB_NODE_CLIENT) snprintf(from, sizeof from, "a client");
        else snprintf(from, sizeof from, "node %u", src);
        log_warn("refused a %s of txn %llx from %s: only its coordinator, node %u, may send it "
                 "(%u more refused in the last second)", what, (unsigned long long)txid, from,
                 txn_txid_node(txid), q);
    } else {
        __atomic_add_fetch(&quiet, 1, __ATOMIC_RELAXED);
    }
    return RDKV_EPERM;
}

/* Whether src is the coordinator txid names: a node of the cluster (the fabric authenticates
 * nodes), never a client connection. */
static bool from_coordinator(const struct txn_env *e, uint16_t src, uint64_t txid)
{
    return src != FAB_NODE_CLIENT && src < e->n && src == txn_txid_node(txid);
}

/* A PREPARE or APPLY whose coordinator's locks were taken from another incarnation of this node
 * (docs/transactions.md, "Incarnations"): refused with RDKV_EABORTED (nothing was staged: the
 * coordinator aborts, and its client may retry), counted, and said in the log at most once a
 * second. */
static int stale_request(struct txn_env *e, const char *what, uint64_t txid, uint64_t inc)
{
    static int64_t last_ns;
    static unsigned quiet;
    __atomic_add_fetch(&e->fst.stale, 1, __ATOMIC_RELAXED);
    int64_t now = clock_now_ns(), last = __atomic_load_n(&last_ns, __ATOMIC_RELAXED);
    if (now - last >= NS_PER_S &&
        __atomic_compare_exchange_n(&last_ns, &last, now, false, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED)) {
        unsigned q = __atomic_exchange_n(&quiet, 0, __ATOMIC_RELAXED);
        log_warn("refused the %s of txn %llx: its locks here were taken from incarnation %llu of "
                 "this node, which is %llu (%u more refused in the last second)", what,
                 (unsigned long long)txid, (unsigned long long)inc,
                 (unsigned long long)fab_incarnation(e->f), q);
    } else {
        __atomic_add_fetch(&quiet, 1, __ATOMIC_RELAXED);
    }
    return RDKV_EABORTED;
}

/* Counts a PREPARE of `len` request bytes from coord against the caps: 0 or RDKV_EBUSY. */
static int charge(struct txn_env *e, uint16_t coord, size_t len)
{
    pthread_mutex_lock(&e->pmu);
    /* (and the outcome memory, whose entries a coordinator that never answers leaves: full, it
     * would have no room for this one's commit) */
    bool over = e->prep_bytes + len > e->cfg.prepared_max_bytes ||
                e->prep_by_coord[coord] + len > e->cfg.prepared_max_per_coord ||
                e->outc_n + e->prep_kept >= OUTC_MAX / 2;
    if (!over) {
        e->prep_bytes += len;
        e->prep_by_coord[coord] += len;
        e->prep_kept++;
    }
    uint64_t total = e->prep_bytes, mine = e->prep_by_coord[coord];
    pthread_mutex_unlock(&e->pmu);
    if (!over) return 0;
    if (__atomic_fetch_add(&e->prep_refused, 1, __ATOMIC_RELAXED) % 1000 == 0)
        log_warn("refused a PREPARE of %zu bytes from node %u: %llu bytes kept from it, %llu in "
                 "all (caps %llu and %llu: --prepared-max)", len, coord,
                 (unsigned long long)mine, (unsigned long long)total,
                 (unsigned long long)e->cfg.prepared_max_per_coord,
                 (unsigned long long)e->cfg.prepared_max_bytes);
    return RDKV_EBUSY;
}

/* Decodes a PREPARE / APPLY, then (unless its transaction was given up: RDKV_EABORTED) prepares
 * it as a request in progress (ip); the caller ends ip. A PREPARE (keep) is counted against the
 * caps of what a participant keeps. */
static int decode_and_prepare(struct txn_env *e, struct fab_rpc_req *req, struct inprog *ip,
                              bool keep, struct prepared **out)
{
    size_t len = fab_rpc_len(req);
    void *bytes = malloc(len ? len : 1);
    if (!bytes) return RDKV_ENOMEM;
    memcpy(bytes, fab_rpc_data(req), len);
    uint64_t txid, inc;
    uint16_t coord;
    struct wop *ops;
    uint32_t n;
    int rc = txn_wops_unpack(bytes, len, store_key_max(e->st), store_value_max(e->st), &txid,
                             &coord, &inc, &ops, &n);
    /* Only the coordinator that the txid names sends its writes, and it names itself: the
     * fabric authenticates nodes, so nobody else can install anything here. */
    uint16_t src = fab_rpc_src(req);
    if (!rc && (coord != txn_txid_node(txid) || !from_coordinator(e, src, txid))) {
        free(ops);
        rc = not_coordinator(keep ? "PREPARE" : "APPLY", src, txid);
    }
    /* Its locks and reads reached this node's process (inc), not an earlier one: the lock words
     * of an earlier process are gone with it, and this one's started afresh, where a hold of the
     * same name can be someone else's. Refused before anything is staged or voted. */
    if (!rc && inc != fab_incarnation(e->f)) {
        free(ops);
        rc = stale_request(e, keep ? "PREPARE" : "APPLY", txid, inc);
    }
    if (!rc && keep && (rc = charge(e, coord, len))) free(ops);
    if (!rc && (rc = part_begin(e, txid, ip))) {
        free(ops);
        if (keep) {
            struct prepared tmp = {.coord = coord, .charge = len};
            uncharge(e, &tmp);
        }
    }
    if (rc) {
        free(bytes);
        return rc;
    }
    rc = part_prepare(e, txid, coord, ops, n, bytes, out);
    if (keep) {
        if (rc) {
            struct prepared tmp = {.coord = coord, .charge = len};
            uncharge(e, &tmp);
        } else {
            (*out)->charge = len;
            (*out)->next_ask = clock_now_ns() + e->cfg.indoubt_ns;
            /* before its coordinator's leases could run out (part_indoubt_step) */
            (*out)->next_keep = clock_now_ns() + e->cfg.lease_ns / 8;
        }
    }
    if (!rc) (*out)->coord_inc = fab_rpc_src_incarnation(req);
    return rc;
}

static void on_prepare(struct fab_rpc_req *req, void *arg)
{
    struct txn_env *e = arg;
    struct prepared *p;
    struct inprog ip = {0};
    int rc = decode_and_prepare(e, req, &ip, true, &p);
    /* the vote is yes only once the PREPARE record is durable (the log failing it stops the
     * node); held against a checkpoint's replay LSN until p is in the list it copies */
    struct wal_hold hold;
    if (!rc && e->wal) {
        wal_hold(e->wal, &hold);
        if (txn_fault_take(e, TXN_FAULT_FAIL_PREPARE))
            wal_fault_inject(e->wal, WAL_FAULT_WRITE, ENOSPC);
        if ((rc = part_log_prepare(e, p, true))) {
            log_error("txn %llx: its PREPARE record was refused by the log (%s): voting no",
                      (unsigned long long)p->txid, rdkv_strerror(rc));
            part_abort(e, p);
            wal_unhold(e->wal, &hold);
        }
    }
    /* replicated: the vote is yes only once every backup holds the PREPARE, so that a promoted
     * copy finishes the transaction (docs/replication.md, "Promotion") */
    if (!rc && e->cfg.ship_rec && (rc = part_ship_prepare(e, p, TXN_SHIP_PREPARE))) {
        if (rc != RDKV_EBUSY) /* (its partition being handed back: nothing sent) */
            log_warn("txn %llx: its PREPARE did not reach every backup (%s): voting no",
                     (unsigned long long)p->txid, rdkv_strerror(rc));
        part_abort(e, p);
    }
    if (!rc && txn_fault_is(e, TXN_FAULT_EXIT_AFTER_PREPARE)) {
        log_warn("test hook: exiting after the PREPARE of txn %llx", (unsigned long long)p->txid);
        _exit(9);
    }
    if (!rc) part_record(e, p);
    if (!rc && e->wal) wal_unhold(e->wal, &hold);
    part_end(e, &ip);
    fab_rpc_reply(req, rc, NULL, 0);
}

/* An APPLY whose writes travel to the backups while the service thread goes on serving: its
 * rows stay locked, it stays counted in flight (txn_env_quiesce waits for it), and the ship's
 * completion installs and answers (on the shipper's thread). */
struct apply_wait {
    struct txn_env *e;
    struct prepared *p;
    struct fab_rpc_req *req;
    uint8_t *buf;
    struct inprog ip;
};

static void apply_shipped(void *ctx, int rc)
{
    struct apply_wait *aw = ctx;
    struct txn_env *e = aw->e;
    free(aw->buf);
    if (rc) rc = ship_failed(e, aw->p, rc);
    else {
        install(e, aw->p);
        prepared_free(e, aw->p);
    }
    part_end(e, &aw->ip);
    fab_rpc_reply(aw->req, rc, NULL, 0);
    free(aw);
    txn_env_leave(e);
}

static void on_apply(struct fab_rpc_req *req, void *arg)
{
    struct txn_env *e = arg;
    struct prepared *p;
    if (e->cfg.ship_async && !e->wal) {
        struct apply_wait *aw = calloc(1, sizeof *aw);
        if (!aw) {
            fab_rpc_reply(req, RDKV_ENOMEM, NULL, 0);
            return;
        }
        int rc = decode_and_prepare(e, req, &aw->ip, false, &p);
        if (!rc && fence_all(e, p->coord, p->ops, p->n)) {
            part_abort(e, p);
            rc = RDKV_EABORTED;
        }
        size_t len = 0;
        if (!rc && !(aw->buf = pack_writes(p, 0, &len))) {
            part_abort(e, p);
            rc = RDKV_ENOMEM;
        }
        if (!rc) {
            aw->e = e;
            aw->p = p;
            aw->req = req;
            __atomic_add_fetch(&e->inflight, 1, __ATOMIC_SEQ_CST); /* (apply_shipped leaves) */
            rc = e->cfg.ship_async(e->cfg.ship_arg, p->txid, aw->buf, len, apply_shipped, aw);
            if (!rc) return;
            txn_env_leave(e);
            free(aw->buf);
            rc = ship_failed(e, p, rc);
        }
        part_end(e, &aw->ip);
        free(aw);
        fab_rpc_reply(req, rc, NULL, 0);
        return;
    }
    struct inprog ip = {0};
    int rc = decode_and_prepare(e, req, &ip, false, &p);
    if (!rc) rc = part_commit(e, p);
    part_end(e, &ip);
    fab_rpc_reply(req, rc, NULL, 0);
}


/* Commits (the fence allowing) or aborts a prepared transaction claimed with part_take_begin. A
 * commit the log refused (nothing written) leaves it prepared: RDKV_EBUSY, to be tried again. */
int part_finish(struct txn_env *e, struct prepared *p, bool commit, struct inprog *ip)
{
    int rc = 0;
    if (commit) rc = part_commit(e, p);
    else part_abort(e, p);
    part_end(e, ip);
    return rc && rc != RDKV_EABORTED ? RDKV_EBUSY : rc;
}


/* COMMIT and ABORT: the decision for a prepared transaction, named by its txid. A commit is
 * answered 0 only when it is installed here: now, or before (the outcome memory). Busy
 * (RDKV_EBUSY: the coordinator sends it again) while the transaction is being settled by
 * another path or was re-established from the log, or when the log refused its COMMIT record.
 * Not found for a commit this node never prepared or forgot: never counted as confirmation by
 * the coordinator. A commit the fence refuses is RDKV_EABORTED (the outcome is partial: a
 * bug). An abort of a transaction not here is nothing (never prepared, or gone already). */
static void decide(struct fab_rpc_req *req, struct txn_env *e, bool commit)
{
    struct pack_r r;
    pack_r_init(&r, fab_rpc_data(req), fab_rpc_len(req));
    uint64_t txid = unpack_u64(&r);
    if (!unpack_done(&r)) {
        fab_rpc_reply(req, RDKV_EPROTO, NULL, 0);
        return;
    }
    if (!from_coordinator(e, fab_rpc_src(req), txid)) {
        fab_rpc_reply(req, not_coordinator(commit ? "COMMIT" : "ABORT", fab_rpc_src(req), txid),
                      NULL, 0);
        return;
    }
    /* re-established from the log at start: the in-doubt thread asks and settles it (busy:
     * the coordinator tries again) */
    if (recovered(e, txid)) {
        fab_rpc_reply(req, RDKV_EBUSY, NULL, 0);
        return;
    }
    struct inprog ip = {0};
    bool busy;
    pthread_mutex_lock(&e->pmu);
    struct prepared *p = claim_locked(e, txid, &ip, &busy);
    pthread_mutex_unlock(&e->pmu);
    if (busy) {
        fab_rpc_reply(req, RDKV_EBUSY, NULL, 0);
        return;
    }
    if (p && commit && txn_fault_take(e, TXN_FAULT_FAIL_COMMIT))
        wal_fault_inject(e->wal, WAL_FAULT_WRITE, ENOSPC);
    if (p && commit && txn_fault_is(e, TXN_FAULT_EXIT_AT_COMMIT)) {
        log_warn("test hook: exiting at the COMMIT of txn %llx", (unsigned long long)txid);
        _exit(9);
    }
    struct held *h = p && p->charge ? part_held_of(p) : NULL;
    uint64_t coord_inc = p ? p->coord_inc : 0;
    int rc = p                                         ? part_finish(e, p, commit, &ip)
             : commit && !part_outcome_known(e, txid) ? RDKV_ENOTFOUND
                                                       : 0;
    if (rc == RDKV_EABORTED && commit)
        log_error("txn %llx: its COMMIT was refused here: a lock of its coordinator was gone "
                  "(the outcome is partial)", (unsigned long long)txid);
    if (rc != RDKV_EBUSY) part_release_if_gone(e, h, coord_inc, fab_rpc_src_incarnation(req));
    else free(h);
    fab_rpc_reply(req, rc, NULL, 0);
}

static void on_commit(struct fab_rpc_req *req, void *arg) { decide(req, arg, true); }
static void on_abort(struct fab_rpc_req *req, void *arg) { decide(req, arg, false); }

/* RESOLVE: a coordinator got no answer to a request of txid and asks to make it final here.
 * Busy while one of its requests is in progress; then, for a commit decision, commits it if it
 * is still prepared; for an abort, aborts it; and in every case leaves a tombstone, so that a
 * request of it still on its way is refused. Answered 0 when nothing of txid will be installed
 * here any more -- whether or not something was before (the coordinator reported the outcome
 * unknown already; what it needs is that its locks can go). */
static void on_resolve(struct fab_rpc_req *req, void *arg)
{
    struct txn_env *e = arg;
    struct pack_r r;
    pack_r_init(&r, fab_rpc_data(req), fab_rpc_len(req));
    uint64_t txid = unpack_u64(&r);
    uint8_t decision = unpack_u8(&r);
    if (!unpack_done(&r) || decision < TXN_RESOLVE_APPLY || decision > TXN_RESOLVE_ABORT) {
        fab_rpc_reply(req, RDKV_EPROTO, NULL, 0);
        return;
    }
    if (!from_coordinator(e, fab_rpc_src(req), txid)) {
        fab_rpc_reply(req, not_coordinator("RESOLVE", fab_rpc_src(req), txid), NULL, 0);
        return;
    }
    /* prepared on a backup copy here whose promotion has not taken it over yet: busy */
    if (e->cfg.held && e->cfg.held(e->cfg.ship_arg, txid)) {
        fab_rpc_reply(req, RDKV_EBUSY, NULL, 0);
        return;
    }
    pthread_mutex_lock(&e->pmu);
    if (in_progress(e, txid) || part_recovered_locked(e, txid)) {
        pthread_mutex_unlock(&e->pmu);
        fab_rpc_reply(req, RDKV_EBUSY, NULL, 0);
        return;
    }
    /* (a transaction being committed is a request in progress: busy above) */
    struct inprog ip = {0};
    bool busy;
    struct prepared *p = claim_locked(e, txid, &ip, &busy);
    pthread_mutex_unlock(&e->pmu);
    int rc = 0;
    if (p) {
        struct held *h = p->charge ? part_held_of(p) : NULL;
        uint64_t coord_inc = p->coord_inc;
        rc = part_finish(e, p, decision == TXN_RESOLVE_COMMIT, &ip);
        if (rc == RDKV_EABORTED)
            log_error("txn %llx: its commit here was refused: the coordinator's locks were gone "
                      "(the outcome is partial)", (unsigned long long)txid);
        if (rc != RDKV_EBUSY) part_release_if_gone(e, h, coord_inc, fab_rpc_src_incarnation(req));
        else free(h);
    }
    /* settled (or never prepared here): a request of it still on its way is refused from now
     * on; still prepared (the log refused its COMMIT record): asked again */
    if (rc != RDKV_EBUSY) {
        pthread_mutex_lock(&e->pmu);
        tomb_add(e, txid);
        pthread_mutex_unlock(&e->pmu);
        rc = 0;
    }
    fab_rpc_reply(req, rc, NULL, 0);
}

/* QUERY: a participant asks this node, the coordinator the txids name, what became of them: the
 * request is one or more txids (8 bytes each, at most TXN_QUERY_MAX), the answer one state
 * (enum txn_state) per txid, from memory (coord_state). Only nodes ask (a participant). */
static void on_query(struct fab_rpc_req *req, void *arg)
{
    struct txn_env *e = arg;
    size_t len = fab_rpc_len(req), n = len / 8;
    const uint8_t *p = fab_rpc_data(req);
    uint16_t src = fab_rpc_src(req);
    bool ok = len % 8 == 0 && n >= 1 && n <= TXN_QUERY_MAX && src != FAB_NODE_CLIENT && src < e->n;
    /* (its own txids, or those of a removed coordinator whose partition is served here) */
    for (size_t i = 0; ok && i < n; i++)
        ok = txn_coord_node(e, pack_get_u64le(p + 8 * i)) == e->me;
    if (!ok) {
        fab_rpc_reply(req, RDKV_EPROTO, NULL, 0);
        return;
    }
    if (txn_fault_is(e, TXN_FAULT_QUERY_SLOW)) clock_sleep_ns(600 * NS_PER_MS); /* (an RPC thread) */
    uint8_t st[TXN_QUERY_MAX];
    for (size_t i = 0; i < n; i++) st[i] = coord_answer(e, pack_get_u64le(p + 8 * i));
    fab_rpc_reply(req, 0, st, n);
}

int txn_call_txid(struct fab_ctx *c, uint16_t node, uint16_t type, uint64_t txid,
                  struct fab_buf *resp)
{
    uint8_t req[8];
    for (int b = 0; b < 8; b++) req[b] = (uint8_t)(txid >> (8 * b));
    return fab_rpc_call(c, node, type, req, sizeof req, resp, RESOLVE_RPC_TIMEOUT_NS);
}


struct scan_out {
    struct pack_w w;
    uint32_t n, limit;
    bool more;
};

static bool scan_emit(void *arg, rptr row, const struct row_view *v)
{
    struct scan_out *o = arg;
    if (o->n >= o->limit || o->w.len + v->klen + 16 > TXN_SCAN_PAGE_BYTES) {
        o->more = true;
        return false;
    }
    pack_u64(&o->w, row);
    pack_u32(&o->w, v->klen);
    uint8_t *p = pack_w_room(&o->w, v->klen);
    if (p && v->klen) memcpy(p, v->key, v->klen);
    o->n++;
    return true;
}

static void on_scan(struct fab_rpc_req *req, void *arg)
{
    struct txn_env *e = arg;
    struct pack_r r;
    pack_r_init(&r, fab_rpc_data(req), fab_rpc_len(req));
    uint32_t blen = unpack_u32(&r);
    const uint8_t *b = pack_r_take(&r, blen);
    uint8_t has_end = unpack_u8(&r);
    uint32_t elen = unpack_u32(&r);
    const uint8_t *en = pack_r_take(&r, elen);
    uint32_t alen = unpack_u32(&r);
    const uint8_t *after = pack_r_take(&r, alen);
    uint8_t has_after = unpack_u8(&r);
    uint32_t limit = unpack_u32(&r);
    uint16_t pid = unpack_u16(&r);
    uint32_t kmax = store_key_max(e->st);
    if (!unpack_done(&r) || pid >= e->n || has_end > 1 || has_after > 1 || blen > kmax || elen > kmax ||
        alen > kmax || (!has_end && elen) || (!has_after && alen)) {
        fab_rpc_reply(req, RDKV_EPROTO, NULL, 0);
        return;
    }
    struct store *st = txn_pstore(e, pid);
    if (!st) {
        /* not served here (any more, or yet): retried, on the coordinator's new route */
        fab_rpc_reply(req, RDKV_EABORTED, NULL, 0);
        return;
    }
    struct scan_out o = {.limit = limit && limit < TXN_SCAN_PAGE ? limit : TXN_SCAN_PAGE};
    pack_w_init(&o.w);
    pack_u8(&o.w, 0);  /* more, filled in below */
    pack_u32(&o.w, 0); /* n */
    long rc = store_scan(st, b, blen, has_end ? en : NULL, elen, has_after ? after : NULL,
                         alen, (uint64_t)o.limit + 1, scan_emit, &o);
    if (rc < 0 || o.w.err) {
        fab_rpc_reply(req, rc < 0 ? (int)rc : RDKV_ENOMEM, NULL, 0);
        pack_w_free(&o.w);
        return;
    }
    o.w.p[0] = o.more;
    pack_put_u32le(o.w.p + 1, o.n);
    fab_rpc_reply(req, 0, o.w.p, o.w.len);
    pack_w_free(&o.w);
}

int part_register(struct txn_env *e)
{
    /* Every participant handler does its work at once -- it stages, installs, checks holds with
     * plain loads, or answers "busy" -- and never waits for the fabric: they run on the service
     * thread (FAB_RPC_FAST), without a thread hand-off per request. A scan of many rows is the
     * longest of them (one page, TXN_SCAN_PAGE rows). */
    static const struct {
        uint16_t type;
        fab_rpc_handler fn;
    } hs[TXN_GUARDS] = {
        {TXN_RPC_PREPARE, on_prepare}, {TXN_RPC_COMMIT, on_commit}, {TXN_RPC_ABORT, on_abort},
        {TXN_RPC_APPLY, on_apply},     {TXN_RPC_SCAN, on_scan},     {TXN_RPC_RESOLVE, on_resolve},
        {TXN_RPC_QUERY, on_query},
    };
    for (unsigned i = 0; i < TXN_GUARDS; i++) {
        e->guards[i] = (struct txn_guard){e, hs[i].fn};
        /* ... except, with a redo log, those that wait for its fdatasync: on the RPC threads,
         * where the waits of concurrent requests share one sync and the service thread goes on
         * serving */
        uint16_t t = hs[i].type;
        bool waits = (e->wal && (t == TXN_RPC_PREPARE || t == TXN_RPC_COMMIT ||
                                 t == TXN_RPC_APPLY || t == TXN_RPC_RESOLVE)) ||
                     (e->cfg.ship && (t == TXN_RPC_COMMIT || t == TXN_RPC_RESOLVE ||
                                      (t == TXN_RPC_APPLY && !e->cfg.ship_async))) ||
                     (e->cfg.ship_rec && t == TXN_RPC_PREPARE) ||
                     (t == TXN_RPC_QUERY && txn_fault_is(e, TXN_FAULT_QUERY_SLOW));
        int rc = fab_rpc_register(e->f, t, guarded, &e->guards[i], waits ? 0 : FAB_RPC_FAST);
        if (rc) return rc;
    }
    return 0;
}

