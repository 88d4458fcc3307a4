/* A node's transaction layer (txn.h): its configuration, its environment (struct txn_env) and
 * the threads that serve it -- the janitor (locks/janitor.h), the keeper (recover.c) and the
 * asker (indoubt.c) -- its RPC handlers registered (part.c), and what it knows of its peers. */
#include "txn/coord.h"

#include "locks/janitor.h"

#include "common/clock.h"
#include "common/log.h"

#include <stdlib.h>
#include <string.h>

void txn_cfg_init(struct txn_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->row_lock = LOCK_ROW_DEFAULT;
    c->range_lock = RANGE_LOCK_DEFAULT;
    c->lock_timeout_ns = 100 * NS_PER_MS;
    c->lease_ns = 10 * NS_PER_S;
    c->commit_timeout_ns = COMMIT_RPC_TIMEOUT_NS;
    c->conflict = TXN_CONFLICT_DEFAULT;
    c->max_ops = TXN_MAX_OPS_DEFAULT;
    c->max_bytes = TXN_MAX_BYTES_DEFAULT;
}

static const char *const conflict_names[] = {"timeout", "wait-die", "no-wait"};

int txn_conflict_parse(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (name && !strcmp(name, conflict_names[i])) return i;
    return -1;
}

const char *txn_conflict_name(int policy)
{
    return policy >= 0 && policy < 3 ? conflict_names[policy] : "?";
}
/* Test hooks (RDKV_TEST_FAULT=NAME@N: node N only, once; tests/integration/durable_2pc.c and
 * commit_faults.c). With a redo log: decision-exit, prepare-exit and commit-exit make the node
 * _exit right after its next DECISION (as coordinator) or PREPARE (as participant) record is
 * durable, or when a COMMIT reaches it (as participant) before its COMMIT record is written;
 * prepare-fail, commit-fail, decision-fail and own-commit-fail make the log fail at that record
 * (the next participant PREPARE or COMMIT record: its write fails with ENOSPC; the next DECISION:
 * its sync fails with EIO, so the record may be in the file; the coordinator's own share's
 * COMMIT record: its write fails); coord-oom makes the coordinator's memory for a logged decision still to deliver run
 * out; install-slow makes every commit install its writes 50 ms after its COMMIT record is
 * durable (a slow disk's window, widened). In any cluster: query-slow makes the node answer
 * TXN_RPC_QUERY 600 ms late (past the asker's timeout), from its RPC threads. Replicated:
 * ship-busy makes the next COMMIT of a transaction prepared here fail its ship to the backups
 * once (nothing installed, still prepared, answered busy), as a zombie primary's does;
 * decide-unknown makes the coordinator's next DECIDE, shipped, count as failed (a backup that
 * did not answer), so that it is shipped again. */
static void fault_parse(struct txn_env *e)
{
    static const struct {
        const char *name;
        int fault;
        bool logged;
    } hooks[] = {
        {"decision-exit@", TXN_FAULT_EXIT_AFTER_DECISION, true},
        {"prepare-exit@", TXN_FAULT_EXIT_AFTER_PREPARE, true},
        {"commit-exit@", TXN_FAULT_EXIT_AT_COMMIT, true},
        {"commit-fail@", TXN_FAULT_FAIL_COMMIT, true},
        {"prepare-fail@", TXN_FAULT_FAIL_PREPARE, true},
        {"decision-fail@", TXN_FAULT_FAIL_DECISION, true},
        {"own-commit-fail@", TXN_FAULT_FAIL_OWN_COMMIT, true},
        {"coord-oom@", TXN_FAULT_COORD_OOM, true},
        {"query-slow@", TXN_FAULT_QUERY_SLOW, false},
        {"install-slow@", TXN_FAULT_INSTALL_SLOW, true},
        {"ship-busy@", TXN_FAULT_SHIP_BUSY, false},
        {"decide-unknown@", TXN_FAULT_DECIDE_UNKNOWN, false},
    };
    const char *f = getenv("RDKV_TEST_FAULT");
    const char *at = f ? strchr(f, '@') : NULL;
    if (!at || strtol(at + 1, NULL, 10) != e->me) return;
    for (unsigned i = 0; i < sizeof hooks / sizeof hooks[0]; i++) {
        /* (the exits also in a replicated cluster: the backups hold what the log would) */
        bool exit_hook = hooks[i].fault == TXN_FAULT_EXIT_AFTER_DECISION ||
                         hooks[i].fault == TXN_FAULT_EXIT_AFTER_PREPARE ||
                         hooks[i].fault == TXN_FAULT_EXIT_AT_COMMIT;
        if (!strncmp(f, hooks[i].name, strlen(hooks[i].name)) &&
            (e->wal || !hooks[i].logged || (exit_hook && e->cfg.ship_rec)))
            __atomic_store_n(&e->fault, hooks[i].fault, __ATOMIC_RELAXED);
    }
}

static void indoubt_stop(struct txn_env *e)
{
    pthread_mutex_lock(&e->imu);
    e->istop = true;
    pthread_cond_broadcast(&e->kcv);
    pthread_cond_broadcast(&e->acv);
    pthread_mutex_unlock(&e->imu);
    if (e->astarted) pthread_join(e->athr, NULL);
    if (e->kstarted) pthread_join(e->kthr, NULL);
    e->astarted = e->kstarted = false;
}

static void janitor_stop(struct txn_env *e)
{
    lock_janitor_stop(e->jan);
    e->jan = NULL;
}

/* The configuration with its defaults filled in, and the algorithms it names found and fit for
 * transactions: 0, or RDKV_EINVAL with the reason in err. */
static int cfg_settle(struct txn_env *e, const struct txn_cfg *cfg, struct store *st, char *err,
                      size_t errcap)
{
    if (cfg) e->cfg = *cfg;
    else txn_cfg_init(&e->cfg);
    if (!e->cfg.row_lock) e->cfg.row_lock = LOCK_ROW_DEFAULT;
    if (!e->cfg.range_lock) e->cfg.range_lock = RANGE_LOCK_DEFAULT;
    if (e->cfg.lock_timeout_ns <= 0) e->cfg.lock_timeout_ns = 100 * NS_PER_MS;
    if (e->cfg.lease_ns <= 0) e->cfg.lease_ns = 10 * NS_PER_S;
    if (e->cfg.commit_timeout_ns <= 0) e->cfg.commit_timeout_ns = COMMIT_RPC_TIMEOUT_NS;
    /* two commit timeouts: by then a live coordinator has decided, and one whose COMMIT went
     * unanswered keeps a fence and resolves (the query then rarely races a slow COMMIT) */
    if (e->cfg.indoubt_ns <= 0) e->cfg.indoubt_ns = 2 * e->cfg.commit_timeout_ns;
    if (!e->cfg.max_ops) e->cfg.max_ops = TXN_MAX_OPS_DEFAULT;
    if (!e->cfg.max_bytes) e->cfg.max_bytes = TXN_MAX_BYTES_DEFAULT;
    if (!e->cfg.prepared_max_bytes) {
        struct store_stats ss;
        store_stats(st, &ss);
        e->cfg.prepared_max_bytes = ss.heap_bytes / 4;
    }
    if (!e->cfg.prepared_max_per_coord) e->cfg.prepared_max_per_coord = e->cfg.prepared_max_bytes / 2;
    e->row = lock_algo_find(e->cfg.row_lock);
    e->range = range_algo_find(e->cfg.range_lock);
    int rc = 0;
    if (!e->row) {
        snprintf(err, errcap, "unknown row lock '%s' (one of %s)", e->cfg.row_lock,
                 lock_algo_names());
        rc = RDKV_EINVAL;
    } else if (!(e->row->modes & (1u << LOCK_EXCLUSIVE))) {
        snprintf(err, errcap, "row lock '%s' has no exclusive mode", e->cfg.row_lock);
        rc = RDKV_EINVAL;
    } else if (e->row->queue_wait) {
        snprintf(err, errcap,
                 "row lock '%s' is a queue lock: a waiter cannot give up, so transactions that "
                 "wait for each other would hang instead of aborting (use one of %s)",
                 e->cfg.row_lock, lock_algo_txn_names());
        rc = RDKV_EINVAL;
    } else if (!e->range) {
        snprintf(err, errcap, "unknown range lock '%s' (one of %s)", e->cfg.range_lock,
                 range_algo_names());
        rc = RDKV_EINVAL;
    } else if (!e->range->server_side) {
        snprintf(err, errcap,
                 "range lock '%s' cannot serve transactions: a transaction may hold a shared "
                 "scan range and an exclusive key inside it, which only the server-side designs "
                 "(combiner-rpc, combiner-rdma, itree) allow", e->cfg.range_lock);
        rc = RDKV_EINVAL;
    }
    return rc;
}

int txn_env_open(struct fabric *f, struct store *st, struct range_server *rs,
                 const struct txn_cfg *cfg, struct txn_env **out, char *err, size_t errcap)
{
    struct txn_env *e = calloc(1, sizeof *e);
    if (!e) return RDKV_ENOMEM;
    int rc = cfg_settle(e, cfg, st, err, errcap);
    if (rc) {
        free(e);
        return rc;
    }
    e->f = f;
    e->st = st;
    e->rs = rs;
    e->me = fab_node_id(f);
    e->n = fab_num_nodes(f);
    lock_cfg_init(&e->lcfg);
    e->lcfg.lease_ns = e->cfg.lease_ns;
    /* one ticket per request: a dead holder's DSLR ticket is reset after two leases, however
     * many tickets given up by others wait behind it */
    e->lcfg.dslr_max_slots = 1;
    /* drtm's readers never release: a writer waits out their lease, and a reader that outlives
     * it aborts at commit; the lock layer's 1 ms (a lock benchmark's critical section) would
     * abort most transactions that read many rows */
    e->lcfg.drtm_lease_ns = e->cfg.drtm_lease_ns > 0 ? e->cfg.drtm_lease_ns : 10 * NS_PER_MS;
    e->down = calloc(e->n, 1);
    e->route = calloc(e->n, sizeof *e->route);
    for (unsigned p = 0; e->route && p < e->n; p++) e->route[p].node = (uint16_t)p;
    if (e->route) e->route[e->me].st = st;
    e->prep_by_coord = calloc(e->n, sizeof *e->prep_by_coord);
    e->loc = txn_locs_create();
    pthread_mutex_init(&e->pmu, NULL);
    pthread_mutex_init(&e->cmu, NULL);
    pthread_mutex_init(&e->txmu, NULL);
    if (!e->down || !e->route || !e->prep_by_coord || !e->loc) rc = RDKV_ENOMEM;
    if (!rc && (rc = range_space_create(rs, TXN_RANGE_SPACE, NULL)))
        snprintf(err, errcap, "cannot create the key range space: %s", rdkv_strerror(rc));
    e->kwake = e->awake = INT64_MAX; /* (until they sleep, any PREPARE kept kicks them) */
    pthread_mutex_init(&e->imu, NULL);
    clock_cond_init(&e->kcv);
    clock_cond_init(&e->acv);
    clock_cond_init(&e->rcv);
    if (!rc && lock_janitor_start(f, &e->lcfg, &e->jan)) {
        snprintf(err, errcap, "cannot start the transaction janitor thread");
        rc = RDKV_ENOMEM;
    }
    if (!rc && pthread_create(&e->kthr, NULL, txn_keeper_main, e)) {
        snprintf(err, errcap, "cannot start the transaction keeper thread");
        rc = RDKV_ENOMEM;
    }
    if (!rc) e->kstarted = true;
    if (!rc && pthread_create(&e->athr, NULL, txn_asker_main, e)) {
        snprintf(err, errcap, "cannot start the transaction asker thread");
        rc = RDKV_ENOMEM;
    }
    if (!rc) e->astarted = true;
    if (!rc && e->cfg.wal) txn_env_set_wal(e, e->cfg.wal);
    else if (!rc) fault_parse(e);
    if (!rc && (rc = part_register(e)))
        snprintf(err, errcap, "cannot register the transaction RPCs: %s", rdkv_strerror(rc));
    if (rc) {
        janitor_stop(e);
        indoubt_stop(e);
        pthread_mutex_destroy(&e->imu);
        pthread_cond_destroy(&e->kcv);
        pthread_cond_destroy(&e->acv);
        pthread_cond_destroy(&e->rcv);
        free(e->down);
        free(e->route);
        free(e->prep_by_coord);
        free(e->loc);
        pthread_mutex_destroy(&e->pmu);
        pthread_mutex_destroy(&e->cmu);
        free(e);
        return rc;
    }
    *out = e;
    return 0;
}

void txn_env_quiesce(struct txn_env *e)
{
    if (!e) return;
    __atomic_store_n(&e->closing, true, __ATOMIC_SEQ_CST);
    /* handlers never block for long (no lock waits): this ends within one handler's run */
    for (unsigned round = 0; __atomic_load_n(&e->inflight, __ATOMIC_SEQ_CST); round++)
        clock_sleep_ns(round < 10 ? 100 * NS_PER_US : NS_PER_MS);
    janitor_stop(e); /* it uses the fabric */
    indoubt_stop(e);     /* so does it */
}

void txn_env_set_wal(struct txn_env *e, struct wal *w)
{
    e->wal = w;
    fault_parse(e);
}

void txn_env_set_txids(struct txn_env *e, uint64_t first, uint64_t limit,
                       int (*reserve)(void *arg, uint64_t limit), void *arg)
{
    e->txseq = first & TXID_MASK;
    e->txlimit = limit & TXID_MASK;
    e->txarg = arg;
    __atomic_store_n(&e->txreserve, reserve, __ATOMIC_RELEASE);
}

void txn_env_close(struct txn_env *e)
{
    if (!e) return;
    janitor_stop(e);
    indoubt_stop(e);
    pthread_mutex_destroy(&e->imu);
    pthread_cond_destroy(&e->kcv);
    pthread_cond_destroy(&e->acv);
    for (;;) {
        pthread_mutex_lock(&e->pmu);
        struct prepared *p = e->prep;
        if (p) e->prep = p->next;
        pthread_mutex_unlock(&e->pmu);
        if (!p) break;
        /* (shutting down is no decision: no END, the log keeps it in doubt) */
        p->logged = false;
        if (p->rt) {
            txn_worker_destroy(p->rw);
            free(p->bytes);
            free(p);
        } else {
            part_abort(e, p);
        }
    }
    pthread_mutex_destroy(&e->pmu);
    coord_free_all(e);
    txn_recovery_free(e->recov);
    pthread_cond_destroy(&e->rcv);
    pthread_mutex_destroy(&e->cmu);
    free(e->tombs);
    free(e->outc);
    free(e->down);
    free(e->route);
    free(e->prep_by_coord);
    free(e->loc);
    free(e);
}

void txn_env_route(struct txn_env *e, unsigned p, uint16_t node, struct store *st,
                   const char *name, bool gate)
{
    if (p >= e->n || node >= e->n) return;
    struct txn_route *r = &e->route[p];
    bool moved = __atomic_load_n(&r->node, __ATOMIC_RELAXED) != node;
    if (name && strlen(name) <= STORE_NAME_MAX && strcmp(r->name, name)) {
        /* (a partition's store on other nodes has one name: set before it is first used) */
        memset(r->name, 0, sizeof r->name);
        memcpy(r->name, name, strlen(name));
    }
    __atomic_store_n(&r->gate, node == e->me && gate, __ATOMIC_RELEASE);
    __atomic_store_n(&r->st, node == e->me ? st : NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&r->node, node, __ATOMIC_RELEASE);
    /* (after node: readers read the count first, so a count they see is never newer than the
     * node they read after it) */
    if (moved) __atomic_add_fetch(&r->moves, 1, __ATOMIC_RELEASE);
    /* (the asker asks at once about PREPAREs whose coordinator's partition moved: its new
     * primary answers for it) */
    if (moved) txn_indoubt_kick(e);
}

int txn_env_adopt(struct txn_env *e, unsigned p, const struct txn_adopt_prep *preps, unsigned n,
                  const uint64_t *decided, unsigned nd)
{
    for (unsigned i = 0; i < nd; i++) {
        int rc = coord_adopt(e, decided[i]);
        if (rc) return rc;
    }
    if (!n) return 0;
    struct txn_recovery *r = NULL;
    int rc = txn_recovery_create(e->me, &r);
    if (rc) return rc;
    r->adopt = true;
    for (unsigned i = 0; i < n && !rc; i++) {
        rc = txn_recovery_add_prep(r, preps[i].txid, preps[i].coord, preps[i].writes,
                                   preps[i].len);
        if (!rc)
            log_warn("txn %llx: prepared at partition %u's old primary for node %u: its rows "
                     "locked here until its coordinator answers", (unsigned long long)preps[i].txid,
                     p, preps[i].coord);
    }
    if (rc) {
        txn_recovery_free(r);
        return rc;
    }
    return txn_recovery_hand(e, r);
}

uint16_t txn_env_owner(struct txn_env *e, unsigned p) { return p < e->n ? txn_owner(e, p) : 0; }

bool txn_env_is_down(struct txn_env *e, uint16_t node)
{
    return txn_down(e, node);
}

void txn_env_set_down(struct txn_env *e, uint16_t node, bool down)
{
    if (node < e->n) __atomic_store_n(&e->down[node], down ? 1 : 0, __ATOMIC_RELEASE);
}

struct fabric *txn_env_fabric(struct txn_env *e) { return e->f; }
struct store *txn_env_store(struct txn_env *e) { return e->st; }
const struct txn_cfg *txn_env_cfg(struct txn_env *e) { return &e->cfg; }
const struct lock_cfg *txn_env_lock_cfg(struct txn_env *e) { return &e->lcfg; }
