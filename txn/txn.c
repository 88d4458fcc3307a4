/* The coordinator's side of a transaction: strict 2PL over the row and range locks, reads
 * locally with loads or remotely with one-sided READs, writes buffered until commit, and commit
 * by one APPLY (one partition) or two-phase commit (several). docs/transactions.md argues why
 * the result is serializable and phantom-free.
 *
 * How a key is found and locked (locate): the candidate row comes from the owner's hash index
 * (a plain lookup on this node, one-sided READs of the peer's index otherwise, or the worker's
 * location cache). The row lock is taken first and the row read after, so what is read is what
 * the lock protects; a row whose key or state is not the one looked for (deleted, recycled for
 * another key) is let go and the key looked up again. A key with no row is locked by its point
 * {k} in the owner's key space (the whole key: the owner compares keys as bytes), in the same
 * mode, and looked up once more under that lock: inserts and deletes need {k} exclusively, so the
 * absence stays true until this transaction ends. Scans lock the keys [begin, end) there. */
#include "txn/txn_internal.h"

#include "storage/wal.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/rng.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#define LOC_SETS 131072u       /* remote row locations per node: 2-way sets (6 MiB, touched */
#define LOC_WAYS 2u            /* only as used) */
#define LOCATE_TRIES 8
#define CHUNK_MIN (16u << 10)
#define COMMIT_RPC_TIMEOUT_NS (5 * NS_PER_S) /* txn_cfg.commit_timeout_ns's default */
#define FANOUT_TAG 0x7C0000000000ull
#define NOWAIT_GRACE_NS NS_PER_US            /* no-wait: a row lock's one try */
#define RANGE_NOWAIT_NS (50 * NS_PER_US)      /* no-wait: a range lock granted on arrival */
#define RANGE_WAITDIE_NS NS_PER_MS            /* wait-die: a range lock's bounded wait */

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

/* ------------------------------------------------------------------------------------------ */

/* The location cache: where rows of other nodes were found, shared by every thread of the node
 * (with one per worker, 16 tasks per thread each missed most uniform reads and paid the index
 * probe; with one per thread, each workload run started cold). Entries are hints -- a row is
 * always checked (its key, under its lock or by a quiet read) before it is used -- and count only
 * for the incarnation of the node they were found in (a restarted node's rows sit elsewhere).
 * Threads read and write them without a lock, as a seqlock: a writer makes seq odd, writes the
 * fields, makes it even again (a writer finding it odd skips its store: it is a cache); a reader
 * keeps what it read only if seq was even and the same before and after, so it never mixes two
 * stores' fields (a row of one incarnation with another's number). */
struct loc {
    uint64_t seq;
    uint64_t hash;
    rptr row;
    uint64_t readlen;
    uint64_t inc;
};

struct tent {
    const uint8_t *key;
    uint32_t klen;
    uint16_t part;
    bool exists;     /* a live row was found under the lock */
    bool known;      /* exists has been settled under this transaction's locks */
    bool have_val;
    uint8_t wop;     /* 0, W_PUT or W_DEL */
    uint64_t hash;
    rptr row;
    uint64_t version;
    struct lock_handle lk;     /* the row lock (lk.mode != 0 while held) */
    struct range_handle *rh;   /* the point {key} in the owner's key space, when taken */
    const uint8_t *val;        /* what the row held when read */
    uint32_t vlen;
    const uint8_t *nval;       /* W_PUT: the new value */
    uint32_t nvlen;
};
enum { W_PUT = 1, W_DEL = 2 };

struct chunk {
    struct chunk *next;
    size_t used, cap;
    uint8_t data[];
};

struct pcur {
    uint16_t part;
    bool done;        /* no page after the current one */
    bool started;
    const uint8_t *after;
    uint32_t alen;
    struct prow {
        const uint8_t *key;
        uint32_t klen;
        rptr row;
    } *rows;
    uint32_t nrows, pos, cap;
};

struct txn_iter {
    struct txn *t;
    const uint8_t *b, *e;
    uint32_t blen, elen;
    bool has_end;
    uint64_t limit, emitted;
    struct pcur *cur;
    uint32_t ncur;
    uint32_t *ws; /* the transaction's writes in the range, by key */
    uint32_t nws, wpos;
    int err;
};

struct txn {
    struct txn_worker *w;
    uint64_t txid;
    uint64_t log_txid; /* the txid its COMMIT record names (0: txid): a recovered in-doubt one's */
    uint64_t ts;      /* start timestamp (wait-die's age), kept across retries by txn_keep_ts */
    bool active;
    int failed;
    uint32_t nops;    /* operations so far, and the bytes of their keys and values (the caps) */
    uint64_t nbytes;
    struct tent *ents;
    uint32_t nents, cap;
    uint32_t *idx; /* open addressing over ents: index + 1 */
    uint32_t idxcap;
    struct range_handle **scans;
    uint32_t nscans, scancap;
    struct chunk *mem;
    /* per node, the incarnation this transaction's operations there reach (0: none yet): its
     * posts are pinned to it (rdma/fabric.h fab_pin), its locks there were taken in it, and a
     * PREPARE or APPLY names it (docs/transactions.md, "Incarnations") */
    uint64_t *pinc;
};

struct txn_worker {
    struct txn_env *e;
    struct fab_ctx *c;
    bool own_ctx;           /* c was created for the worker (not a task's shared one) */
    struct lock_thread lt;
    struct store_remote *rem;
    uint8_t *rem_ok;
    uint64_t *cinc; /* per node, the incarnation rem belongs to */
    struct txn tx;
    uint32_t wid, seq;
    int64_t lock_timeout;
    int conflict;           /* enum txn_conflict */
    struct txn_stats stats;
    struct range_handle **rfree;
    uint32_t nrfree, rfreecap;
    uint64_t rng;
};

/* ------------------------------------------------------------------------------------------ */
/* Small helpers. */

uint16_t txn_partition(const struct txn_env *e, const void *key, uint32_t klen)
{
    return (uint16_t)(store_place_hash(key, klen) % e->n);
}

static int key_cmp(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl)
{
    uint32_t m = al < bl ? al : bl;
    int c = m ? memcmp(a, b, m) : 0;
    if (c) return c;
    return al < bl ? -1 : (al > bl ? 1 : 0);
}

bool txn_env_is_down(struct txn_env *e, uint16_t node)
{
    return node < e->n && __atomic_load_n(&e->down[node], __ATOMIC_ACQUIRE);
}

void txn_env_set_down(struct txn_env *e, uint16_t node, bool down)
{
    if (node < e->n) __atomic_store_n(&e->down[node], down ? 1 : 0, __ATOMIC_RELEASE);
}

struct fabric *txn_env_fabric(struct txn_env *e) { return e->f; }
struct store *txn_env_store(struct txn_env *e) { return e->st; }
const struct txn_cfg *txn_env_cfg(struct txn_env *e) { return &e->cfg; }
struct fab_ctx *txn_worker_ctx(struct txn_worker *w) { return w->c; }
const struct txn_stats *txn_worker_stats(const struct txn_worker *w) { return &w->stats; }
void txn_worker_set_lock_timeout(struct txn_worker *w, int64_t ns)
{
    w->lock_timeout = ns > 0 ? ns : w->e->cfg.lock_timeout_ns;
}
void txn_worker_set_conflict(struct txn_worker *w, int policy)
{
    w->conflict = policy >= 0 && policy <= TXN_CONFLICT_NO_WAIT ? policy : w->e->cfg.conflict;
}

static void *tmem(struct txn *t, size_t n)
{
    n = (n + 7) & ~(size_t)7;
    struct chunk *c = t->mem;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > CHUNK_MIN ? n : CHUNK_MIN;
        struct chunk *nc = malloc(sizeof *nc + cap);
        if (!nc) return NULL;
        nc->cap = cap;
        nc->used = 0;
        nc->next = c;
        t->mem = c = nc;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

static const uint8_t *tcopy(struct txn *t, const void *p, uint32_t n)
{
    uint8_t *d = tmem(t, n ? n : 1);
    if (d && n) memcpy(d, p, n);
    return d;
}

static void release_all(struct txn *t);

/* The first failure sticks: every later call returns it, and commit aborts. The transaction is
 * doomed, so it gives back every lock at once rather than when its owner gets round to ending
 * it: a failed transaction leaves no lock behind. */
static int fail(struct txn *t, int rc)
{
    if (!t->failed) {
        t->failed = rc;
        release_all(t);
    }
    return rc;
}

/* What a lock or fabric failure means for the transaction. */
static int classify(struct txn *t, int rc, uint16_t node)
{
    struct txn_env *e = t->w->e;
    if (txn_env_is_down(e, node)) return RDKV_EUNAVAILABLE;
    switch (rc) {
    case RDKV_ETIMEDOUT:
    case RDKV_EABORTED:
        t->w->stats.conflicts++;
        return RDKV_EABORTED;
    case RDKV_EFLUSHED:
    case RDKV_EUNAVAILABLE:
    case RDKV_ESHUTDOWN: return RDKV_EUNAVAILABLE;
    default: return rc;
    }
}

static int64_t lock_deadline(struct txn *t) { return clock_now_ns() + t->w->lock_timeout; }

/* Wait-die's age for a row lock request: the transaction's timestamp where the row lock can
 * tell ages apart (algo->wait_die), else 0. */
static bool row_wait_die(const struct txn *t)
{
    return t->w->conflict == TXN_CONFLICT_WAIT_DIE && t->w->e->row->wait_die;
}

/* A row lock wait's end: the lock timeout, or at once under no-wait -- and under wait-die with a
 * row lock that cannot tell ages, which runs as no-wait (docs/transactions.md). */
static int64_t row_deadline(struct txn *t)
{
    int p = t->w->conflict;
    if (p == TXN_CONFLICT_NO_WAIT || (p == TXN_CONFLICT_WAIT_DIE && !row_wait_die(t)))
        return clock_now_ns() + NOWAIT_GRACE_NS;
    return lock_deadline(t);
}

/* A range lock wait's end: the range server knows no ages, so wait-die bounds range waits to a
 * millisecond, no-wait to the request's arrival (with the RPC's handling to spare). */
static int64_t range_deadline(struct txn *t)
{
    int64_t bound = t->w->lock_timeout;
    if (t->w->conflict == TXN_CONFLICT_NO_WAIT && bound > RANGE_NOWAIT_NS) bound = RANGE_NOWAIT_NS;
    if (t->w->conflict == TXN_CONFLICT_WAIT_DIE && bound > RANGE_WAITDIE_NS)
        bound = RANGE_WAITDIE_NS;
    return clock_now_ns() + bound;
}

/* ------------------------------------------------------------------------------------------ */
/* The environment. */

/* ------------------------------------------------------------------------------------------ */
/* Fences: the locks of a transaction whose outcome at a participant is unknown (txn_internal.h,
 * struct txn_fence). They are kept -- refreshed every quarter lease where the lock allows it --
 * until the participant answers TXN_RPC_RESOLVE (nothing of the transaction will be installed
 * there any more) or is declared down. docs/transactions.md, "Fencing". */

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

/* ------------------------------------------------------------------------------------------ */
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

static int coord_begin(struct txn_env *e, uint64_t txid)
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
static void coord_update(struct txn_env *e, uint64_t txid, uint8_t state, int refs)
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

/* The in-doubt thread: asks coordinators about the PREPAREs kept here (part_indoubt_step). A
 * thread of its own with a fabric context of its own, because an ask waits for an answer (up to
 * RESOLVE_RPC_TIMEOUT_NS from a paused coordinator): the janitor, which passes given-up lock
 * tickets on, must never wait behind it. */
static void *indoubt_main(void *arg)
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
            int rc = ok ? txn_recover_lock(e, c, r) : RDKV_ENOMEM;
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
            next = part_indoubt_step(e, c, now);
            int64_t d = coord_deliver_step(e, c, now);
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

void txn_indoubt_kick(struct txn_env *e)
{
    pthread_mutex_lock(&e->imu);
    e->ikick = true;
    pthread_cond_signal(&e->icv);
    pthread_mutex_unlock(&e->imu);
}

static void indoubt_stop(struct txn_env *e)
{
    if (!e->ind_started) return;
    pthread_mutex_lock(&e->imu);
    e->istop = true;
    pthread_cond_broadcast(&e->icv);
    pthread_mutex_unlock(&e->imu);
    pthread_join(e->ind, NULL);
    e->ind_started = false;
}

/* Lets the fence's locks go (released, or dropped when the participant is down) and frees it. */
static void fence_end(struct txn_env *e, struct txn_fence *f, bool down)
{
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
    free(f->lk);
    free(f->rh);
    free(f->pinc);
    free(f);
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

/* One step of a fence, on the thread that holds its locks: refresh them when due, ask when due.
 * Returns true when the fence is over (and freed). */
static bool fence_step(struct txn_env *e, struct fab_ctx *c, struct txn_fence *f, int64_t now)
{
    if (txn_env_is_down(e, f->node) || fence_node_restarted(c, f)) {
        log_warn("txn %llx: node %u is %s: letting go of the locks kept there",
                 (unsigned long long)f->txid, f->node,
                 txn_env_is_down(e, f->node) ? "down" : "another process now");
        fence_end(e, f, true);
        return true;
    }
    /* every post of the fence reaches the process its locks are in, or none */
    uint64_t *was = fab_pin(c, f->pinc);
    bool over = false;
    if (now >= f->next_refresh) {
        for (unsigned i = 0; i < f->nlk; i++)
            if (f->lk[i].mode) lock_refresh(&f->lk[i]); /* (a lock that cannot: the fence check) */
        f->next_refresh = now + e->cfg.lease_ns / 4;
    }
    if (now >= f->next_ask) {
        int rc = fence_ask(c, f);
        if (rc == 0) {
            fence_end(e, f, false);
            over = true;
        } else {
            f->next_ask = clock_now_ns() + (rc == RDKV_EBUSY ? NS_PER_MS : 50 * NS_PER_MS);
        }
    }
    fab_pin(c, was);
    return over;
}

/* The next time a fence in the list needs a step. */
static int64_t fences_next(const struct txn_fence *l)
{
    int64_t next = INT64_MAX;
    for (; l; l = l->next) {
        if (l->next_ask < next) next = l->next_ask;
        if (l->next_refresh < next) next = l->next_refresh;
    }
    return next;
}

static void *janitor_main(void *arg)
{
    struct txn_env *e = arg;
    struct fab_ctx *c = NULL;
    struct lock_thread lt;
    bool ok = fab_ctx_create(e->f, &c) == 0;
    if (ok && lock_thread_init(&lt, c, &e->lcfg)) ok = false;
    pthread_mutex_lock(&e->jmu);
    if (ok) e->jlt = &lt;
    pthread_cond_broadcast(&e->jcv);
    unsigned round = 0;
    struct txn_fence *mine = NULL; /* fences taken over: their handles point at lt */
    while (ok && !e->jstop) {
        while (e->fences) {
            struct txn_fence *f = e->fences;
            e->fences = f->next;
            for (unsigned i = 0; i < f->nlk; i++) f->lk[i].t = &lt;
            for (unsigned i = 0; i < f->nrh; i++) f->rh[i]->t = &lt;
            f->next = mine;
            mine = f;
        }
        if (lock_thread_owes(&lt)) lock_thread_poll(&lt); /* under jmu: workers hand over only
                                                              between polls */
        bool owes = lock_thread_owes(&lt);
        if (!owes && !mine) {
            round = 0;
            pthread_cond_wait(&e->jcv, &e->jmu);
            continue;
        }
        pthread_mutex_unlock(&e->jmu);
        int64_t now = clock_now_ns();
        for (struct txn_fence **pp = &mine; *pp;) {
            struct txn_fence *f = *pp;
            if (now >= f->next_ask || now >= f->next_refresh) {
                struct txn_fence *next = f->next;
                if (fence_step(e, c, f, now)) {
                    *pp = next;
                    continue;
                }
            }
            pp = &f->next;
        }
        if (owes) lock_backoff(round < 12 ? round++ : 12); /* up to ~128 us between looks */
        pthread_mutex_lock(&e->jmu);
        if (!owes && !e->fences && !e->jstop && mine) {
            struct timespec until = clock_ts(fences_next(mine));
            pthread_cond_timedwait(&e->jcv, &e->jmu, &until);
        }
    }
    e->jlt = NULL;
    struct txn_fence *left = e->fences;
    e->fences = NULL;
    pthread_mutex_unlock(&e->jmu);
    while (left || mine) {
        struct txn_fence *f = mine ? mine : left;
        if (f == mine) mine = f->next;
        else left = f->next;
        /* the node stops: the locks are left to the leases, the handles freed */
        for (unsigned i = 0; i < f->nlk; i++) f->lk[i].mode = 0;
        for (unsigned i = 0; i < f->nrh; i++) f->rh[i]->mode = 0;
        log_warn("txn %llx: stopping with its outcome at node %u unknown; its locks there are "
                 "left to their leases", (unsigned long long)f->txid, f->node);
        fence_end(e, f, true);
    }
    if (ok) {
        lock_thread_drop_abandoned(&lt); /* the node stops: leases recover them */
        lock_thread_fini(&lt);
    } else {
        log_error("transaction janitor: cannot attach to the lock layer; given-up lock tickets "
                  "wait for lease resets");
    }
    if (c) fab_ctx_destroy(c);
    return NULL;
}

/* A worker between transactions hands its given-up tickets to the janitor. */
static void janitor_take(struct txn_env *e, struct lock_thread *from)
{
    pthread_mutex_lock(&e->jmu);
    if (e->jlt) {
        lock_thread_hand_over(from, e->jlt);
        pthread_cond_signal(&e->jcv);
    }
    pthread_mutex_unlock(&e->jmu);
}

static void txn_janitor_stop(struct txn_env *e)
{
    if (!e->jan_started) return;
    pthread_mutex_lock(&e->jmu);
    e->jstop = true;
    pthread_cond_broadcast(&e->jcv);
    pthread_mutex_unlock(&e->jmu);
    pthread_join(e->jan, NULL);
    e->jan_started = false;
}

int txn_env_open(struct fabric *f, struct store *st, struct range_server *rs,
                 const struct txn_cfg *cfg, struct txn_env **out, char *err, size_t errcap)
{
    struct txn_env *e = calloc(1, sizeof *e);
    if (!e) return RDKV_ENOMEM;
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
    } else if (e->row->uses_descriptors && strcmp(e->row->name, "alock")) {
        /* alock gives up at a deadline by never queueing behind anyone (locks/alock.c) */
        snprintf(err, errcap,
                 "row lock '%s' is a queue lock: a waiter cannot give up, so transactions that "
                 "wait for each other would hang instead of aborting (use rwlock, dslr, dslr-u, "
                 "drtm, rof, fompi-rw, trad, alock or spin)", e->cfg.row_lock);
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
    e->prep_by_coord = calloc(e->n, sizeof *e->prep_by_coord);
    e->loc = calloc((size_t)LOC_SETS * LOC_WAYS, sizeof *e->loc);
    pthread_mutex_init(&e->pmu, NULL);
    pthread_mutex_init(&e->cmu, NULL);
    if (!e->down || !e->prep_by_coord || !e->loc) rc = RDKV_ENOMEM;
    if (!rc && (rc = range_space_create(rs, TXN_RANGE_SPACE, NULL)))
        snprintf(err, errcap, "cannot create the key range space: %s", rdkv_strerror(rc));
    pthread_mutex_init(&e->jmu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the janitor waits for fence deadlines */
    pthread_cond_init(&e->jcv, &ca);
    pthread_mutex_init(&e->imu, NULL);
    pthread_cond_init(&e->icv, &ca);
    pthread_cond_init(&e->rcv, &ca);
    pthread_condattr_destroy(&ca);
    if (!rc && pthread_create(&e->jan, NULL, janitor_main, e)) {
        snprintf(err, errcap, "cannot start the transaction janitor thread");
        rc = RDKV_ENOMEM;
    }
    if (!rc) e->jan_started = true;
    if (!rc && pthread_create(&e->ind, NULL, indoubt_main, e)) {
        snprintf(err, errcap, "cannot start the transaction in-doubt thread");
        rc = RDKV_ENOMEM;
    }
    if (!rc) e->ind_started = true;
    if (!rc && e->cfg.wal) txn_env_set_wal(e, e->cfg.wal);
    if (!rc && (rc = part_register(e)))
        snprintf(err, errcap, "cannot register the transaction RPCs: %s", rdkv_strerror(rc));
    if (rc) {
        txn_janitor_stop(e);
        indoubt_stop(e);
        pthread_mutex_destroy(&e->imu);
        pthread_cond_destroy(&e->icv);
        pthread_cond_destroy(&e->rcv);
        pthread_mutex_destroy(&e->jmu);
        pthread_cond_destroy(&e->jcv);
        free(e->down);
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
    txn_janitor_stop(e); /* it uses the fabric */
    indoubt_stop(e);     /* so does it */
}

void txn_env_set_wal(struct txn_env *e, struct wal *w)
{
    e->wal = w;
    uint64_t us = clock_wall_us() & ((1ull << 48) - 1);
    __atomic_store_n(&e->txseq, w ? (us ? us : 1) : 0, __ATOMIC_RELAXED);
    /* test hooks (durable_2pc): RDKV_TEST_FAULT=decision-exit@N, prepare-exit@N or
     * commit-exit@N makes node N _exit right after its next DECISION (as coordinator) or
     * PREPARE (as participant) record is durable, or when a COMMIT reaches it (as participant)
     * before its COMMIT record is written */
    const char *f = getenv("RDKV_TEST_FAULT");
    const char *at = f ? strchr(f, '@') : NULL;
    if (w && at && strtol(at + 1, NULL, 10) == e->me) {
        if (!strncmp(f, "decision-exit@", 14)) e->fault = TXN_FAULT_EXIT_AFTER_DECISION;
        else if (!strncmp(f, "prepare-exit@", 13)) e->fault = TXN_FAULT_EXIT_AFTER_PREPARE;
        else if (!strncmp(f, "commit-exit@", 12)) e->fault = TXN_FAULT_EXIT_AT_COMMIT;
    }
}

void txn_env_close(struct txn_env *e)
{
    if (!e) return;
    txn_janitor_stop(e);
    indoubt_stop(e);
    pthread_mutex_destroy(&e->imu);
    pthread_cond_destroy(&e->icv);
    pthread_mutex_destroy(&e->jmu);
    pthread_cond_destroy(&e->jcv);
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
    while (e->crecs) {
        struct coord_rec *r = e->crecs;
        e->crecs = r->next;
        free(r->pend);
        free(r);
    }
    txn_recovery_free(e->recov);
    pthread_cond_destroy(&e->rcv);
    pthread_mutex_destroy(&e->cmu);
    free(e->tombs);
    free(e->down);
    free(e->prep_by_coord);
    free(e->loc);
    free(e);
}

/* ------------------------------------------------------------------------------------------ */
/* Workers. */

static int worker_create(struct txn_env *e, struct fab_ctx *shared, struct txn_worker **out)
{
    struct txn_worker *w = calloc(1, sizeof *w);
    if (!w) return RDKV_ENOMEM;
    w->e = e;
    w->rem = calloc(e->n, sizeof *w->rem);
    w->rem_ok = calloc(e->n, 1);
    w->cinc = calloc(e->n, sizeof *w->cinc);
    w->tx.pinc = calloc(e->n, sizeof *w->tx.pinc);
    int rc = w->rem && w->rem_ok && w->cinc && w->tx.pinc ? 0 : RDKV_ENOMEM;
    w->own_ctx = !shared;
    if (!rc && shared) w->c = shared;
    else if (!rc) rc = fab_ctx_create(e->f, &w->c);
    if (!rc) {
        rc = lock_thread_init(&w->lt, w->c, &e->lcfg);
        if (rc) {
            if (w->own_ctx) fab_ctx_destroy(w->c);
            w->c = NULL;
        }
    }
    if (rc) {
        free(w->rem);
        free(w->rem_ok);
        free(w->cinc);
        free(w->tx.pinc);
        free(w);
        return rc;
    }
    w->wid = (__atomic_add_fetch(&e->next_worker, 1, __ATOMIC_RELAXED) % 0xFFFFu) + 1;
    w->lock_timeout = e->cfg.lock_timeout_ns;
    w->conflict = e->cfg.conflict;
    w->rng = ((uint64_t)clock_now_ns() ^ ((uint64_t)w->wid << 32) ^ e->me) | 1;
    w->tx.w = w;
    *out = w;
    return 0;
}

int txn_worker_create(struct txn_env *e, struct txn_worker **out) { return worker_create(e, NULL, out); }

int txn_worker_create_on(struct txn_env *e, struct fab_ctx *c, struct txn_worker **out)
{
    if (!c || fab_ctx_fabric(c) != e->f) return RDKV_EINVAL;
    return worker_create(e, c, out);
}

static void txn_end(struct txn *t);

static uint64_t *pin_on(struct txn *t);
static void pin_off(struct txn *t, uint64_t *was);

void txn_worker_destroy(struct txn_worker *w)
{
    if (!w) return;
    if (w->tx.active) {
        uint64_t *was = pin_on(&w->tx);
        txn_end(&w->tx);
        pin_off(&w->tx, was);
    }
    struct txn *t = &w->tx;
    while (t->mem) {
        struct chunk *c = t->mem;
        t->mem = c->next;
        free(c);
    }
    free(t->ents);
    free(t->idx);
    free(t->scans);
    for (uint32_t i = 0; i < w->nrfree; i++) free(w->rfree[i]);
    free(w->rfree);
    lock_thread_fini(&w->lt);
    if (w->own_ctx) fab_ctx_destroy(w->c);
    free(w->rem);
    free(w->rem_ok);
    free(w->cinc);
    free(t->pinc);
    free(w);
}

static struct range_handle *rh_get(struct txn_worker *w)
{
    if (w->nrfree) return w->rfree[--w->nrfree];
    return malloc(sizeof(struct range_handle));
}

static void rh_put(struct txn_worker *w, struct range_handle *h)
{
    if (w->nrfree == w->rfreecap) {
        uint32_t cap = w->rfreecap ? w->rfreecap * 2 : 16;
        if (cap > 256) {
            free(h);
            return;
        }
        struct range_handle **n = realloc(w->rfree, cap * sizeof *n);
        if (!n) {
            free(h);
            return;
        }
        w->rfree = n;
        w->rfreecap = cap;
    }
    w->rfree[w->nrfree++] = h;
}

/* ------------------------------------------------------------------------------------------ */
/* The transaction's entries: one per key touched, found by hash. */

static uint32_t idx_slot(const struct txn *t, uint64_t hash) { return (uint32_t)hash & (t->idxcap - 1); }

static int ent_find(struct txn *t, const void *key, uint32_t klen, uint64_t hash)
{
    if (!t->idxcap) return -1;
    for (uint32_t s = idx_slot(t, hash);; s = (s + 1) & (t->idxcap - 1)) {
        uint32_t v = t->idx[s];
        if (!v) return -1;
        struct tent *en = &t->ents[v - 1];
        if (en->hash == hash && en->klen == klen && !memcmp(en->key, key, klen)) return (int)v - 1;
    }
}

static int idx_grow(struct txn *t)
{
    uint32_t cap = t->idxcap ? t->idxcap * 2 : 64;
    uint32_t *n = calloc(cap, sizeof *n);
    if (!n) return RDKV_ENOMEM;
    free(t->idx);
    t->idx = n;
    t->idxcap = cap;
    for (uint32_t i = 0; i < t->nents; i++) {
        uint32_t s = idx_slot(t, t->ents[i].hash);
        while (t->idx[s]) s = (s + 1) & (cap - 1);
        t->idx[s] = i + 1;
    }
    return 0;
}

static int ent_add(struct txn *t, const void *key, uint32_t klen, uint64_t hash)
{
    if ((t->nents + 1) * 2 > t->idxcap && idx_grow(t)) return RDKV_ENOMEM;
    if (t->nents == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 16;
        struct tent *n = realloc(t->ents, cap * sizeof *n);
        if (!n) return RDKV_ENOMEM;
        t->ents = n;
        t->cap = cap;
    }
    const uint8_t *k = tcopy(t, key, klen);
    if (!k) return RDKV_ENOMEM;
    struct txn_env *e = t->w->e;
    struct tent *en = &t->ents[t->nents];
    memset(en, 0, sizeof *en);
    en->key = k;
    en->klen = klen;
    en->hash = hash;
    en->part = txn_partition(e, k, klen);
    uint32_t s = idx_slot(t, hash);
    while (t->idx[s]) s = (s + 1) & (t->idxcap - 1);
    t->idx[s] = t->nents + 1;
    return (int)t->nents++;
}

static int ent_get(struct txn *t, const void *key, uint32_t klen)
{
    uint64_t hash = store_hash(key, klen);
    int i = ent_find(t, key, klen, hash);
    return i >= 0 ? i : ent_add(t, key, klen, hash);
}

/* ------------------------------------------------------------------------------------------ */
/* Finding, locking and reading rows. */

static int remote_of(struct txn *t, uint16_t node, const struct store_remote **out)
{
    struct txn_worker *w = t->w;
    if (!w->rem_ok[node]) {
        int rc = store_remote_open(w->c, node, &w->rem[node]);
        if (rc) return classify(t, rc, node);
        w->rem_ok[node] = 1;
    }
    *out = &w->rem[node];
    return 0;
}

/* The transaction's first operation on another node: which incarnation of it the transaction
 * works with, from now on the only one its posts there reach (t->pinc). A worker's knowledge of
 * an earlier incarnation -- the index's layout -- is dropped, and cached row locations count only
 * for the incarnation they were found in (struct loc's inc): a restarted node replays its log
 * into a fresh arena, and a row's old address may be anything there now. */
static int touch(struct txn *t, uint16_t node)
{
    struct txn_worker *w = t->w;
    if (node == w->e->me || t->pinc[node]) return 0;
    uint64_t inc;
    int rc = fab_peer_incarnation(w->c, node, true, &inc);
    if (rc) return classify(t, rc, node);
    t->pinc[node] = inc;
    if (w->cinc[node] != inc) {
        w->rem_ok[node] = 0;
        w->cinc[node] = inc;
    }
    return 0;
}

static struct loc *loc_set(const struct txn_env *e, uint64_t hash)
{
    return &e->loc[(hash & (LOC_SETS - 1)) * LOC_WAYS];
}

/* One entry as one store left it: true and *out, or false (being written, or changed while read). */
static bool loc_read(struct loc *l, struct loc *out)
{
    uint64_t seq = __atomic_load_n(&l->seq, __ATOMIC_ACQUIRE);
    if (seq & 1) return false;
    out->hash = __atomic_load_n(&l->hash, __ATOMIC_RELAXED);
    out->row = __atomic_load_n(&l->row, __ATOMIC_RELAXED);
    out->readlen = __atomic_load_n(&l->readlen, __ATOMIC_RELAXED);
    out->inc = __atomic_load_n(&l->inc, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&l->seq, __ATOMIC_RELAXED) == seq;
}

static void loc_store(struct loc *l, uint64_t hash, rptr row, uint64_t readlen, uint64_t inc)
{
    uint64_t seq = __atomic_load_n(&l->seq, __ATOMIC_RELAXED);
    if ((seq & 1) || !__atomic_compare_exchange_n(&l->seq, &seq, seq + 1, false,
                                                  __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return; /* another thread is writing it */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&l->hash, hash, __ATOMIC_RELAXED);
    __atomic_store_n(&l->row, row, __ATOMIC_RELAXED);
    __atomic_store_n(&l->readlen, readlen, __ATOMIC_RELAXED);
    __atomic_store_n(&l->inc, inc, __ATOMIC_RELAXED);
    __atomic_store_n(&l->seq, seq + 2, __ATOMIC_RELEASE);
}

/* The cached location of the key with this hash in incarnation inc of its node: true and *out
 * (a row, never RPTR_NULL). */
static bool cache_get(const struct txn_env *e, uint64_t hash, uint64_t inc, struct loc *out)
{
    struct loc *set = loc_set(e, hash);
    for (unsigned i = 0; i < LOC_WAYS; i++)
        if (loc_read(&set[i], out) && out->hash == hash)
            return out->row && out->inc == inc;
    return false;
}

/* Candidate rows for en's key: at most max, or a status. from_cache tells the caller that the
 * one candidate came from the location cache (a miss there is not an absence). */
static int candidates(struct txn *t, struct tent *en, rptr *c, unsigned max, bool use_cache,
                      bool *from_cache)
{
    struct txn_worker *w = t->w;
    struct txn_env *e = w->e;
    *from_cache = false;
    if (en->part == e->me) {
        int rc = store_lookup(e->st, en->key, en->klen, &c[0]);
        if (rc == RDKV_ENOTFOUND) return 0;
        return rc ? rc : 1;
    }
    if (txn_env_is_down(e, en->part)) return RDKV_EUNAVAILABLE;
    int rc = touch(t, en->part);
    if (rc) return rc;
    struct loc l;
    if (use_cache && cache_get(e, en->hash, t->pinc[en->part], &l)) {
        w->stats.cache_hits++;
        c[0] = l.row;
        *from_cache = true;
        return 1;
    }
    w->stats.cache_misses++;
    const struct store_remote *r = NULL;
    rc = remote_of(t, en->part, &r);
    if (rc) return rc;
    rc = store_remote_probe(w->c, r, en->hash, c, max);
    return rc < 0 ? classify(t, rc, en->part) : rc;
}

static void cache_put(struct txn *t, const struct tent *en, rptr row, uint32_t readlen)
{
    /* the newest location goes to way 0; the one it displaces moves to way 1 */
    struct loc *set = loc_set(t->w->e, en->hash);
    struct loc old;
    if (loc_read(&set[0], &old) && old.hash != en->hash && old.hash && old.row)
        loc_store(&set[1], old.hash, old.row, old.readlen, old.inc); /* (an older entry of the
                                                                          key there goes) */
    loc_store(&set[0], en->hash, row, readlen, t->pinc[en->part]);
}

static void cache_drop(struct txn_worker *w, uint64_t hash)
{
    struct loc *set = loc_set(w->e, hash);
    struct loc l;
    for (unsigned i = 0; i < LOC_WAYS; i++)
        if (loc_read(&set[i], &l) && l.hash == hash) loc_store(&set[i], hash, RPTR_NULL, 0, 0);
}

/* The first READ of en's (remote) row at `row`, with the length the cache last saw. */
static struct row_read first_read(struct txn *t, const struct tent *en, rptr row, bool want_val)
{
    struct loc l;
    bool hit = cache_get(t->w->e, en->hash, t->pinc[rptr_node(row)], &l) && l.row == row;
    return store_row_first_read(row, en->klen, hit ? (uint32_t)l.readlen : 0, want_val);
}

static void *tmem_of(void *t, size_t n) { return tmem(t, n); }

/* Reads the row en holds locked at `row`: 1 when it is en's key and live (en->val, vlen and
 * version filled when want_val), 0 when it is not, or a status. pre: the bytes of a remote
 * row's first read fr, already read under the lock (NULL: read them now, fr ignored). fr must
 * be the very read that filled pre: the location cache it came from is shared by the node's
 * threads, and a first_read now may say another length. */
static int read_row_from(struct txn *t, struct tent *en, rptr row, bool want_val,
                         const uint8_t *pre, const struct row_read *fr)
{
    struct txn_worker *w = t->w;
    struct txn_env *e = w->e;
    struct row_view v;
    if (rptr_node(row) == e->me) {
        int rc = store_row_view(e->st, row, &v);
        if (rc) return 0;
        if (!(v.flags & ROW_LIVE) || v.klen != en->klen || memcmp(v.key, en->key, en->klen))
            return 0;
        en->val = v.val;
        en->vlen = v.vlen;
        en->version = v.version;
        en->have_val = true;
        return 1;
    }
    const struct store_remote *r;
    int rc = remote_of(t, rptr_node(row), &r);
    if (rc) return rc;
    uint32_t readlen;
    rc = store_remote_read_row(w->c, r, en->key, en->klen, want_val,
                               pre ? *fr : first_read(t, en, row, want_val), pre, tmem_of, t,
                               &v, &readlen);
    if (rc != 1) return rc < 0 && rc != RDKV_ENOMEM ? classify(t, rc, rptr_node(row)) : rc;
    en->version = v.version;
    if (want_val) {
        en->val = v.val;
        en->vlen = v.vlen;
        en->have_val = true;
        cache_put(t, en, row, readlen);
    }
    return 1;
}

static int read_row(struct txn *t, struct tent *en, rptr row, bool want_val)
{
    return read_row_from(t, en, row, want_val, NULL, NULL);
}

/* Locks en's row at `row` in `mode`. pre (NULL: none): a buffer of fr->len bytes that the lock
 * may fill from the row (the first read fr) in its own chain; en->lk.rd_ok then says whether it
 * did, under the lock. */
static int lock_row_reading(struct txn *t, struct tent *en, rptr row, enum lock_mode mode,
                            uint8_t *pre, const struct row_read *fr)
{
    /* an exclusive-only row lock (alock) takes reads exclusively too */
    if (!(t->w->e->row->modes & (1u << mode))) mode = LOCK_EXCLUSIVE;
    lock_handle_init(&en->lk, &t->w->lt, t->w->e->row, row);
    if (pre) {
        en->lk.rd_at = fr->at;
        en->lk.rd_buf = pre;
        en->lk.rd_len = (uint32_t)fr->len;
    }
    if (row_wait_die(t)) en->lk.age = t->ts;
    int rc = lock_acquire(&en->lk, mode, row_deadline(t));
    if (rc) {
        en->lk.mode = 0;
        return fail(t, classify(t, rc, rptr_node(row)));
    }
    return 0;
}

static int lock_row(struct txn *t, struct tent *en, rptr row, enum lock_mode mode)
{
    return lock_row_reading(t, en, row, mode, NULL, NULL);
}

/* lock_row, then read_row (*got: its answer) -- a remote row read in the lock's own chain where
 * the lock can: one round trip instead of two when the lock is granted at once. */
static int lock_read_row(struct txn *t, struct tent *en, rptr row, enum lock_mode mode,
                         bool want_val, int *got)
{
    uint8_t *pre = NULL;
    struct row_read fr = {0};
    if (rptr_node(row) != t->w->e->me && t->w->e->row->read_in_chain) {
        fr = first_read(t, en, row, want_val);
        pre = fr.len <= UINT32_MAX ? tmem(t, fr.len) : NULL;
    }
    int rc = lock_row_reading(t, en, row, mode, pre, &fr);
    if (rc) return rc;
    *got = read_row_from(t, en, row, want_val, en->lk.rd_ok ? pre : NULL, &fr);
    return 0;
}

/* en's row lock when it is held and must be released; NULL when it is not held, or when its
 * node is down (then it is dropped here: its lease frees it). */
static struct lock_handle *row_to_release(struct txn *t, struct tent *en)
{
    if (!en->lk.mode) return NULL;
    if (!txn_env_is_down(t->w->e, rptr_node(en->lk.line))) return &en->lk;
    en->lk.mode = 0;
    return NULL;
}

static void unlock_row(struct txn *t, struct tent *en)
{
    struct lock_handle *h = row_to_release(t, en);
    if (!h) return;
    lock_release(h);
    h->mode = 0;
}

/* Locks the keys [b, e) (kflags: enum range_key_flags; see range_handle_keys) in node's part of
 * the key space: whole keys, compared as bytes by the owner. */
static int range_take(struct txn *t, struct range_handle **hp, uint16_t node, const uint8_t *b,
                      uint32_t bl, const uint8_t *e, uint32_t el, unsigned kflags,
                      enum lock_mode mode)
{
    struct txn_worker *w = t->w;
    struct range_handle *h = *hp;
    int rc = touch(t, node);
    if (rc) return fail(t, rc);
    if (!h && !(h = *hp = rh_get(w))) return fail(t, RDKV_ENOMEM);
    range_handle_init(h, &w->lt, w->e->range, node, TXN_RANGE_SPACE, 0, 0);
    range_handle_keys(h, b, bl, e, el, kflags);
    h->owner = t->txid;
    rc = range_acquire(h, mode, range_deadline(t));
    if (rc) {
        h->mode = 0;
        return fail(t, classify(t, rc, node));
    }
    return 0;
}

/* Locks en's key as a point {k} of the key space. */
static int point_take(struct txn *t, struct tent *en, enum lock_mode mode)
{
    return range_take(t, &en->rh, en->part, en->key, en->klen, en->key, en->klen,
                      RANGE_K_END | RANGE_K_INCL, mode);
}

static void range_drop(struct txn *t, struct range_handle **hp)
{
    struct range_handle *h = *hp;
    if (!h) return;
    if (h->mode && !txn_env_is_down(t->w->e, h->node)) range_release(h);
    h->mode = 0;
    rh_put(t->w, h);
    *hp = NULL;
}

/* Whether the range lock still protects its holder: the owner evicts a hold kept two leases
 * while someone waits; the client's clock judges it conservatively from the grant's bounds. */
static bool range_hold_ok(const struct range_handle *h)
{
    if (!h->mode) return false;
    if (!h->lease_ns) return true;
    return clock_now_ns() - h->granted_min < 2 * h->lease_ns - h->lease_ns / 2;
}

/* Whether another entry of the transaction holds the lock of `row`: then row is that entry's
 * key's row (a row changes key only when deleted, which needs its exclusive lock), so it is not
 * the row of en's key -- and locking it again would wait for ourselves. */
static bool row_held_by_other(const struct txn *t, const struct tent *en, rptr row)
{
    for (uint32_t i = 0; i < t->nents; i++) {
        const struct tent *o = &t->ents[i];
        if (o != en && o->lk.mode && o->row == row) return true;
    }
    return false;
}

/* Makes en's key locked in at least `mode`, its row (if any) read. */
static int locate(struct txn *t, struct tent *en, enum lock_mode mode, bool want_val)
{
    if (en->lk.mode) {
        if (en->lk.mode == LOCK_EXCLUSIVE || mode == LOCK_SHARED) {
            if (want_val && !en->have_val) {
                int r = read_row(t, en, en->row, true);
                if (r != 1) return fail(t, r < 0 ? r : RDKV_EABORTED);
            }
            return 0;
        }
        /* shared -> exclusive: no upgrade in the row lock, so let go and take it again; if the
         * row changed in between, what this transaction read is stale: abort */
        uint64_t ver = en->version;
        rptr row = en->row;
        unlock_row(t, en);
        int r;
        int rc = lock_read_row(t, en, row, LOCK_EXCLUSIVE, want_val || en->have_val, &r);
        if (rc) return rc;
        if (r != 1 || en->version != ver) {
            t->w->stats.conflicts++;
            return fail(t, r < 0 ? r : RDKV_EABORTED);
        }
        return 0;
    }
    if (en->known && !en->exists && en->rh && en->rh->mode) {
        if (en->rh->mode == LOCK_EXCLUSIVE || mode == LOCK_SHARED) return 0;
        range_drop(t, &en->rh);
        int rc = point_take(t, en, LOCK_EXCLUSIVE);
        if (rc) return rc;
        rptr cand[4];
        bool fc;
        int n = candidates(t, en, cand, 4, false, &fc);
        if (n < 0) return fail(t, n);
        if (n > 0) {
            /* maybe inserted while the point was not locked: is it really there? */
            for (int i = 0; i < n; i++) {
                if (row_held_by_other(t, en, cand[i])) continue;
                if ((rc = lock_row(t, en, cand[i], LOCK_EXCLUSIVE))) return rc;
                int r = read_row(t, en, cand[i], false);
                unlock_row(t, en);
                if (r < 0) return fail(t, r);
                if (r == 1) {
                    t->w->stats.conflicts++;
                    return fail(t, RDKV_EABORTED);
                }
            }
        }
        return 0;
    }
    bool use_cache = true;
    for (int attempt = 0; attempt < LOCATE_TRIES; attempt++) {
        rptr cand[4];
        bool from_cache;
        int n = candidates(t, en, cand, 4, use_cache, &from_cache);
        if (n < 0) return fail(t, n);
        for (int i = 0; i < n; i++) {
            if (row_held_by_other(t, en, cand[i])) { /* a stale candidate: recycled for a key */
                if (from_cache) cache_drop(t->w, en->hash);
                continue;
            }
            int r;
            int rc = lock_read_row(t, en, cand[i], mode, want_val, &r);
            if (rc) return rc;
            if (r < 0) return fail(t, r);
            if (r == 1) {
                en->row = cand[i];
                en->exists = en->known = true;
                return 0;
            }
            unlock_row(t, en);
            if (from_cache) cache_drop(t->w, en->hash);
        }
        if (from_cache) {
            use_cache = false;
            continue;
        }
        if (!en->rh || !en->rh->mode) {
            int rc = point_take(t, en, mode);
            if (rc) return rc;
        }
        n = candidates(t, en, cand, 4, false, &from_cache);
        if (n < 0) return fail(t, n);
        if (n == 0) {
            en->exists = false;
            en->known = true;
            en->have_val = false;
            return 0;
        }
        use_cache = false; /* present after all (inserted meanwhile): lock its row */
    }
    t->w->stats.conflicts++;
    return fail(t, RDKV_EABORTED);
}

/* ------------------------------------------------------------------------------------------ */
/* The operations. */

/* A fresh start timestamp: the real-time clock (nodes compare them) in 8-microsecond units
 * since 2026-01-01, made strictly increasing per node (a node beginning more than one
 * transaction per unit runs ahead of the clock meanwhile), with the node id (< CLUSTER_MAX_NODES
 * = 1024) in the low 10 bits: unique in the cluster, nonzero, and under 2^56 (the row locks'
 * LOCK_AGE_MAX) until 2043. */
#define TS_EPOCH_S 1767225600ll /* 2026-01-01T00:00:00Z */
_Static_assert(CLUSTER_MAX_NODES <= 1024, "start timestamps keep the node id in 10 bits");
static uint64_t ts_fresh(struct txn_env *e)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t us = ((int64_t)now.tv_sec - TS_EPOCH_S) * 1000000 + now.tv_nsec / 1000;
    uint64_t units = us > 0 ? (uint64_t)us / 8 : 0;
    uint64_t last = __atomic_load_n(&e->ts_last, __ATOMIC_RELAXED), next;
    do
        next = units > last ? units : last + 1;
    while (!__atomic_compare_exchange_n(&e->ts_last, &last, next, true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED));
    return (next << 10 | e->me) & LOCK_AGE_MAX;
}

int txn_begin(struct txn_worker *w, struct txn **out)
{
    struct txn *t = &w->tx;
    if (t->active) return RDKV_EBUSY;
    t->active = true;
    t->failed = 0;
    t->nops = 0;
    t->nbytes = 0;
    w->seq++;
    t->txid = (uint64_t)w->e->me << 48 | (uint64_t)w->wid << 32 | w->seq;
    if (__atomic_load_n(&w->e->txseq, __ATOMIC_RELAXED))
        t->txid = (uint64_t)w->e->me << 48 |
                  (__atomic_add_fetch(&w->e->txseq, 1, __ATOMIC_RELAXED) & ((1ull << 48) - 1));
    t->log_txid = 0;
    t->ts = ts_fresh(w->e);
    memset(t->pinc, 0, w->e->n * sizeof *t->pinc);
    *out = t;
    return 0;
}

uint64_t txn_start_ts(const struct txn *t) { return t->ts; }

void txn_keep_ts(struct txn *t, uint64_t ts)
{
    if (t->active && ts && !t->nents && !t->nscans) t->ts = ts;
}

int txn_failed(const struct txn *t) { return t->failed; }

static int check_key(struct txn *t, uint32_t klen)
{
    return klen > store_key_max(t->w->e->st) ? RDKV_ETOOBIG : 0;
}

/* Counts an operation of `bytes` key and value bytes against the transaction's caps
 * (txn_cfg.max_ops, max_bytes). Beyond them the transaction fails with RDKV_ETOOBIG before the
 * operation takes a lock, and gives back every lock it holds at once. */
static int charge_op(struct txn *t, uint64_t bytes)
{
    const struct txn_cfg *cfg = &t->w->e->cfg;
    t->nops++;
    t->nbytes += bytes;
    if (t->nops <= cfg->max_ops && t->nbytes <= cfg->max_bytes) return 0;
    return fail(t, RDKV_ETOOBIG);
}

static int get_in(struct txn *t, const void *key, uint32_t klen, bool for_update,
                  const void **val, uint32_t *vlen)
{
    if (!t->active) return RDKV_EINVAL;
    if (t->failed) return t->failed;
    int rc = check_key(t, klen);
    if (!rc) rc = charge_op(t, klen);
    if (rc) return rc;
    int i = ent_get(t, key, klen);
    if (i < 0) return fail(t, i);
    struct tent *en = &t->ents[i];
    if (en->wop == W_PUT) {
        *val = en->nval;
        *vlen = en->nvlen;
        return 0;
    }
    if (en->wop == W_DEL) return RDKV_ENOTFOUND;
    rc = locate(t, en, for_update ? LOCK_EXCLUSIVE : LOCK_SHARED, true);
    if (rc) return rc;
    if (!en->exists) return RDKV_ENOTFOUND;
    *val = en->val;
    *vlen = en->vlen;
    return 0;
}

/* A read without the row's lock (txn_get_once): 1 and the value when the row's location is
 * cached and one chain -- the lock line's first words, the row, the lock line's words again --
 * found no writer in the line (lock_algo.quiet) and the row whole in its bytes; 0 when it cannot
 * say (the caller reads under the lock). */
static int snapshot_read(struct txn *t, const void *key, uint32_t klen, const void **val,
                         uint32_t *vlen)
{
    struct txn_worker *w = t->w;
    struct txn_env *e = w->e;
    const struct lock_algo *a = e->row;
    if (!a->quiet || a->peek > LOCK_LINE || t->nents || check_key(t, klen)) return 0;
    uint16_t part = txn_partition(e, key, klen);
    if (part == e->me || txn_env_is_down(e, part) || touch(t, part)) return 0;
    struct loc l;
    if (!cache_get(e, store_hash(key, klen), t->pinc[part], &l) || !l.readlen) return 0;
    if (!w->rem_ok[part]) return 0; /* (the locked read opens it) */
    const struct store_remote *r = &w->rem[part];
    struct row_read first = store_row_first_read(l.row, klen, (uint32_t)l.readlen, true);
    uint8_t *buf = tmem(t, first.len);
    uint8_t before[LOCK_LINE], after[LOCK_LINE];
    if (!buf) return 0;
    struct fab_op ops[3] = {fab_op_read(l.row, before, a->peek),
                            fab_op_read(first.at, buf, first.len),
                            fab_op_read(l.row, after, a->peek)};
    if (fab_exec(w->c, ops, 3) || !a->quiet(before, after)) return 0;
    struct row_view v;
    if (store_remote_decode_row(r, key, klen, buf, first.len, &v) != 1) return 0;
    *val = v.val;
    *vlen = v.vlen;
    w->stats.snapshots++;
    return 1;
}

int txn_get_once(struct txn *t, const void *key, uint32_t klen, const void **val,
                 uint32_t *vlen)
{
    if (!t->active) return RDKV_EINVAL;
    if (t->failed) return t->failed;
    uint64_t *was = pin_on(t);
    int rc = snapshot_read(t, key, klen, val, vlen) == 1 ? charge_op(t, klen)
                                                         : get_in(t, key, klen, false, val, vlen);
    pin_off(t, was);
    return rc;
}

static int put_in(struct txn *t, const void *key, uint32_t klen, const void *val, uint32_t vlen)
{
    if (!t->active) return RDKV_EINVAL;
    if (t->failed) return t->failed;
    int rc = check_key(t, klen);
    if (rc) return rc;
    if (vlen > store_value_max(t->w->e->st)) return RDKV_ETOOBIG;
    if ((rc = charge_op(t, (uint64_t)klen + vlen))) return rc;
    int i = ent_get(t, key, klen);
    if (i < 0) return fail(t, i);
    struct tent *en = &t->ents[i];
    if ((rc = locate(t, en, LOCK_EXCLUSIVE, false))) return rc;
    const uint8_t *v = tcopy(t, val, vlen);
    if (!v) return fail(t, RDKV_ENOMEM);
    en->wop = W_PUT;
    en->nval = v;
    en->nvlen = vlen;
    return 0;
}

int txn_patch(struct txn *t, const void *key, uint32_t klen, uint32_t off, const void *bytes,
              uint32_t n, const void **old, uint32_t *oldlen)
{
    const void *v;
    uint32_t vl;
    int rc = txn_get(t, key, klen, true, &v, &vl);
    if (rc) return rc;
    if (off > vl) return RDKV_EINVAL;
    uint64_t nl = (uint64_t)off + n > vl ? (uint64_t)off + n : vl;
    if (nl > store_value_max(t->w->e->st)) return RDKV_ETOOBIG;
    uint8_t *nv = tmem(t, nl ? nl : 1);
    if (!nv) return fail(t, RDKV_ENOMEM);
    memcpy(nv, v, vl);
    if (n) memcpy(nv + off, bytes, n);
    if ((rc = txn_put(t, key, klen, nv, (uint32_t)nl))) return rc;
    if (old) {
        *old = v; /* (a put stages its value: the row, or its copy in tmem, is as it was) */
        *oldlen = vl;
    }
    return 0;
}

static int del_in(struct txn *t, const void *key, uint32_t klen)
{
    if (!t->active) return RDKV_EINVAL;
    if (t->failed) return t->failed;
    int rc = check_key(t, klen);
    if (!rc) rc = charge_op(t, klen);
    if (rc) return rc;
    int i = ent_get(t, key, klen);
    if (i < 0) return fail(t, i);
    struct tent *en = &t->ents[i];
    if (en->wop == W_DEL) return RDKV_ENOTFOUND;
    /* Like an insert, a delete locks its point {k} before the row, in the order scans take
     * range then rows (row first would deadlock with a scan until a lock wait ran out). A row
     * already locked by this transaction (read for update) cannot keep that order. */
    if (!en->lk.mode && !en->known && (!en->rh || en->rh->mode != LOCK_EXCLUSIVE)) {
        range_drop(t, &en->rh);
        if ((rc = point_take(t, en, LOCK_EXCLUSIVE))) return rc;
    }
    if ((rc = locate(t, en, LOCK_EXCLUSIVE, false))) return rc;
    if (!en->exists) {
        if (en->wop == W_PUT) { /* inserted by this transaction: just forget it */
            en->wop = W_DEL;
            return 0;
        }
        return RDKV_ENOTFOUND;
    }
    /* a delete also locks its point exclusively, against scans and absent-key readers */
    if (!en->rh || en->rh->mode != LOCK_EXCLUSIVE) {
        range_drop(t, &en->rh);
        if ((rc = point_take(t, en, LOCK_EXCLUSIVE))) return rc;
    }
    en->wop = W_DEL;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Ending. */

/* Whether every lock the transaction holds is still its own: within its lease (a quarter to
 * spare), and in the process that granted it -- every node the transaction worked with still
 * answers as the incarnation it did (a restart took its locks there with the old process's
 * memory, shared ones too). The participants of its writes check the latter themselves
 * (TXN_RPC_PREPARE, APPLY); for the nodes it only read, this is the check, as of the context's
 * connection now (docs/transactions.md, "Incarnations"). */
static bool leases_ok(struct txn *t)
{
    struct txn_env *e = t->w->e;
    for (uint16_t n = 0; n < e->n; n++) {
        uint64_t inc;
        if (n != e->me && t->pinc[n] &&
            (fab_peer_incarnation(t->w->c, n, false, &inc) || inc != t->pinc[n]))
            return false;
    }
    for (uint32_t i = 0; i < t->nents; i++) {
        struct tent *en = &t->ents[i];
        if (en->lk.mode && !lock_lease_ok(&en->lk)) return false;
        if (en->rh && en->rh->mode && !range_hold_ok(en->rh)) return false;
    }
    for (uint32_t i = 0; i < t->nscans; i++)
        if (t->scans[i]->mode && !range_hold_ok(t->scans[i])) return false;
    return true;
}

/* Every lock of the transaction. The row locks' releases travel together (lock_release_many:
 * about one round trip for all of another node's rows, not one each), and each has landed
 * before this returns. */
static void release_all(struct txn *t)
{
    struct lock_handle *rows[64];
    unsigned n = 0;
    for (uint32_t i = 0; i < t->nents; i++) {
        struct tent *en = &t->ents[i];
        if ((rows[n] = row_to_release(t, en)) && ++n == sizeof rows / sizeof rows[0]) {
            lock_release_many(rows, n);
            n = 0;
        }
        range_drop(t, &en->rh);
    }
    lock_release_many(rows, n);
    for (uint32_t i = 0; i < t->nscans; i++) range_drop(t, &t->scans[i]);
    t->nscans = 0;
}

static void txn_end(struct txn *t)
{
    release_all(t);
    if (t->idxcap > 1024 && t->nents * 8 < t->idxcap) {
        free(t->idx);
        t->idx = NULL;
        t->idxcap = 0;
    } else if (t->idxcap) {
        memset(t->idx, 0, t->idxcap * sizeof *t->idx);
    }
    t->nents = 0;
    /* keep one chunk for the next transaction */
    while (t->mem && t->mem->next) {
        struct chunk *c = t->mem;
        t->mem = c->next;
        free(c);
    }
    if (t->mem) {
        if (t->mem->cap > 4 * CHUNK_MIN) {
            free(t->mem);
            t->mem = NULL;
        } else {
            t->mem->used = 0;
        }
    }
    lock_thread_poll(&t->w->lt);
    if (lock_thread_owes(&t->w->lt)) janitor_take(t->w->e, &t->w->lt);
    t->active = false;
}

static void abort_in(struct txn *t)
{
    if (!t || !t->active) return;
    t->w->stats.aborts++;
    txn_end(t);
}

/* A request to a participant got no answer (the RPC failed in the transport: it may or may not
 * have been handled, and may still be on its way). RDKV_ESHUTDOWN is counted in: a participant
 * that is stopping answers it without doing anything, but a link closing under the request
 * reports it too, and keeping the locks until a RESOLVE is answered costs one round trip. */
static bool no_answer(int st)
{
    return st == RDKV_ETIMEDOUT || st == RDKV_EUNAVAILABLE || st == RDKV_EFLUSHED ||
           st == RDKV_ESHUTDOWN;
}

/* The participant `node` did not answer a request of t: the exclusive locks t holds there (its
 * rows and its keys' points) must outlive t until the participant answers TXN_RPC_RESOLVE or
 * is declared down, or a late install could land under the next holder. They go to the janitor
 * (the caller reports RDKV_EUNKNOWN at once); locks that cannot change threads (queue locks)
 * are kept by this worker, which resolves before it returns. */
static void fence_keep(struct txn *t, uint16_t node, uint8_t decision)
{
    struct txn_worker *w = t->w;
    struct txn_env *e = w->e;
    if (txn_env_is_down(e, node)) return;
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
    struct txn_fence *f = calloc(1, sizeof *f);
    if (f) {
        f->lk = calloc(nlk ? nlk : 1, sizeof *f->lk);
        f->rh = calloc(nrh ? nrh : 1, sizeof *f->rh);
        if ((f->pinc = malloc(e->n * sizeof *f->pinc)))
            memcpy(f->pinc, t->pinc, e->n * sizeof *f->pinc);
    }
    pthread_mutex_lock(&e->jmu);
    bool handover = f && f->lk && f->rh && f->pinc && e->jlt && e->row->movable;
    if (handover) {
        f->txid = t->txid;
        f->node = node;
        f->decision = decision;
        /* the coordinator remembers the commit while the participant may still hold it */
        if (decision == TXN_RESOLVE_COMMIT) coord_update(e, t->txid, 0, +1);
        for (uint32_t i = 0; i < t->nents; i++) {
            struct tent *en = &t->ents[i];
            if (en->lk.mode == LOCK_EXCLUSIVE && rptr_node(en->lk.line) == node) {
                f->lk[f->nlk++] = en->lk; /* the janitor points it at its own lock thread */
                en->lk.mode = 0;
            }
            if (en->rh && en->rh->mode == LOCK_EXCLUSIVE && en->rh->node == node) {
                f->rh[f->nrh++] = en->rh;
                en->rh = NULL;
            }
        }
        f->next = e->fences;
        e->fences = f;
        pthread_cond_signal(&e->jcv);
    }
    pthread_mutex_unlock(&e->jmu);
    if (handover) return;
    if (f) {
        free(f->lk);
        free(f->rh);
        free(f->pinc);
        free(f);
    }
    /* Here, then: this worker keeps the locks alive and asks until answered (its posts pinned
     * by the transaction's call). */
    struct txn_fence me = {.txid = t->txid, .node = node, .decision = decision, .pinc = t->pinc};
    for (;;) {
        if (txn_env_is_down(e, node) || fence_node_restarted(w->c, &me)) {
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

/* ------------------------------------------------------------------------------------------ */
/* The logged commit's coordinator (docs/transactions.md, "The logged commit"). */

/* Makes the commit decision durable: this node's own writes as a PREPARE (mine), then the
 * DECISION naming the other participants, one wait for both (the log is a prefix). */
static int log_decision(struct txn_env *e, uint64_t txid, struct prepared *mine,
                        const uint16_t *nodes, unsigned nr)
{
    int rc = mine ? part_log_prepare(e, mine, false) : 0;
    if (rc) return rc;
    uint8_t buf[3 + 2 * (nr ? nr : 1)];
    buf[0] = WAL_DECIDE_COMMIT;
    pack_put_u16le(buf + 1, (uint16_t)nr);
    for (unsigned i = 0; i < nr; i++) pack_put_u16le(buf + 3 + 2 * i, nodes[i]);
    uint64_t lsn;
    rc = wal_commit(e->wal, WAL_DECISION, txid, buf, 3 + 2 * nr, &lsn);
    if (rc) return rc;
    if (e->fault == TXN_FAULT_EXIT_AFTER_DECISION) {
        log_warn("test hook: exiting after the DECISION of txn %llx", (unsigned long long)txid);
        _exit(9);
    }
    return 0;
}

/* Every participant confirmed txid's commit: END, not waited for (lost, the restarted node
 * delivers the decision again and the participants answer "done"). */
static void log_end(struct txn_env *e, uint64_t txid)
{
    uint64_t lsn;
    if (wal_append(e->wal, WAL_END, txid, NULL, 0, &lsn))
        log_warn("txn %llx: its END record was not logged", (unsigned long long)txid);
}

/* After the COMMITs of a logged decision: END if every participant confirmed, else the
 * unconfirmed ones are kept with the record and the in-doubt thread delivers again. */
static void coord_pending(struct txn_env *e, uint64_t txid, const uint16_t *nodes,
                          const int *st, unsigned nr)
{
    unsigned np = 0;
    for (unsigned i = 0; i < nr; i++)
        if (st[i]) np++;
    uint16_t *pend = np ? calloc(np, sizeof *pend) : NULL;
    if (!np || !pend) {
        if (np) log_error("txn %llx: no memory to deliver its commit again: its participants "
                          "ask for it", (unsigned long long)txid);
        else log_end(e, txid);
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

#define DELIVER_BATCH 32

/* One participant confirmed (0, or "not prepared here": it voted yes with a durable PREPARE,
 * so it forgets it only after an outcome record, and the only outcome is this commit). */
static void coord_delivered(struct txn_env *e, uint64_t txid, uint16_t node)
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
    log_end(e, txid);
    coord_update(e, txid, 0, -1);
}

int64_t coord_deliver_step(struct txn_env *e, struct fab_ctx *c, int64_t now)
{
    uint64_t tx[DELIVER_BATCH];
    uint16_t nd[DELIVER_BATCH];
    unsigned n = 0;
    int64_t next = INT64_MAX;
    pthread_mutex_lock(&e->cmu);
    for (struct coord_rec *r = e->crecs; r; r = r->next) {
        if (!r->npend) continue;
        if (r->next_try <= now) {
            for (unsigned i = 0; i < r->npend && n < DELIVER_BATCH; i++)
                if (!txn_env_is_down(e, r->pend[i])) {
                    tx[n] = r->txid;
                    nd[n++] = r->pend[i];
                }
            r->next_try = now + DELIVER_AGAIN_NS;
        }
        if (r->next_try < next) next = r->next_try;
    }
    pthread_mutex_unlock(&e->cmu);
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

int txn_recover_lock(struct txn_env *e, struct fab_ctx *c, struct txn_recovery *r)
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
            txn_recovery_free(r);
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

int txn_recovered_finish(struct txn_env *e, struct prepared *p, bool commit)
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
        if (e->wal) log_end(e, p->txid);
    }
    txn_worker_destroy(p->rw);
    free(p->bytes);
    free(p);
    return rc;
}

void txn_recovered_refresh(struct prepared *p)
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

/* Sends one RPC to each of n nodes at once and waits for all: one round. `meanwhile` (may be
 * NULL) runs once they are posted, before the wait. */
static void fanout_and(struct txn_worker *w, unsigned n, const uint16_t *nodes, uint16_t type,
                       const void *const *reqs, const size_t *lens, int *status,
                       void (*meanwhile)(void *arg), void *arg)
{
    struct fab_buf resp[n ? n : 1];
    unsigned pending = 0;
    for (unsigned i = 0; i < n; i++) {
        resp[i] = (struct fab_buf){0};
        status[i] = fab_rpc_post(w->c, nodes[i], type, reqs[i], lens[i], &resp[i],
                                 w->e->cfg.commit_timeout_ns, FANOUT_TAG | i);
        if (status[i] == 0) {
            status[i] = 1; /* pending */
            pending++;
        }
    }
    if (meanwhile) meanwhile(arg);
    while (pending) {
        struct fab_cqe cq[16];
        int k = fab_wait(w->c, cq, 16, -1);
        for (int j = 0; j < k; j++) {
            uint64_t i = cq[j].tag & ~FANOUT_TAG;
            if ((cq[j].tag & FANOUT_TAG) != FANOUT_TAG || i >= n || status[i] != 1) continue;
            status[i] = cq[j].status;
            pending--;
        }
    }
    for (unsigned i = 0; i < n; i++) fab_buf_free(&resp[i]);
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
    if (o->mine) o->rc = part_commit(o->e, o->mine);
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
    if (!rc && !leases_ok(t)) {
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
    else if (!leases_ok(t)) rc = RDKV_EABORTED;
    else {
        struct fab_buf resp = {0};
        rc = fab_rpc_call(w->c, part, TXN_RPC_APPLY, pw.p, pw.len, &resp,
                          e->cfg.commit_timeout_ns);
        fab_buf_free(&resp);
        w->stats.rounds++;
        if (no_answer(rc)) {
            /* it may have been applied, or may be yet: keep its locks there until the
             * participant says it never will be */
            fence_keep(t, part, TXN_RESOLVE_APPLY);
            rc = RDKV_EUNKNOWN;
        }
    }
    pack_w_free(&pw);
    return rc;
}

/* Two-phase commit over np partitions (presumed abort; with a log, the logged commit). */
static int commit_2pc(struct txn *t, uint32_t np, const uint16_t *parts, const uint32_t *start,
                      struct wop *ops)
{
    struct txn_worker *w = t->w;
    struct txn_env *e = w->e;
    int rc = 0;
    struct pack_w pw[np];
    const void *reqs[np];
    size_t lens[np];
    uint16_t rnodes[np];
    int st[np];
    memset(rnodes, 0, sizeof rnodes);
    memset(st, 0, sizeof st);
    unsigned nr = 0;
    struct prepared *mine = NULL;
    for (uint32_t p = 0; p < np; p++) {
        pack_w_init(&pw[p]);
        if (parts[p] == e->me) continue;
        txn_wops_pack(&pw[p], t->txid, e->me, t->pinc[parts[p]], ops + start[p],
                      start[p + 1] - start[p]);
        if (pw[p].err) rc = RDKV_ENOMEM;
        reqs[nr] = pw[p].p;
        lens[nr] = pw[p].len;
        rnodes[nr++] = parts[p];
    }
    /* from here until every participant has answered, a participant that holds it
     * prepared and asks is told it is active (coord_state) */
    bool rec = !rc && !(rc = coord_begin(e, t->txid));
    if (!rc) fanout(w, nr, rnodes, TXN_RPC_PREPARE, reqs, lens, st);
    else
        for (unsigned i = 0; i < nr; i++) st[i] = RDKV_ENOMEM;
    for (uint32_t p = 0; p < np && !rc; p++) {
        if (parts[p] != e->me) continue;
        uint32_t cnt = start[p + 1] - start[p];
        struct wop *lo = malloc(cnt * sizeof *lo);
        if (!lo) rc = RDKV_ENOMEM;
        else {
            memcpy(lo, ops + start[p], cnt * sizeof *lo);
            rc = part_prepare(e, t->txid, e->me, lo, cnt, NULL, &mine);
        }
    }
    for (unsigned i = 0; i < nr && !rc; i++)
        if (st[i]) rc = st[i] == RDKV_ETIMEDOUT || st[i] == RDKV_EFLUSHED ||
                                st[i] == RDKV_ESHUTDOWN
                            ? RDKV_EUNAVAILABLE
                            : st[i];
    if (!rc && !leases_ok(t)) rc = RDKV_EABORTED;
    uint64_t txid = t->txid;
    const void *idr[np];
    size_t idl[np];
    memset(idr, 0, sizeof idr);
    memset(idl, 0, sizeof idl);
    uint8_t idb[8];
    pack_put_u64le(idb, txid);
    for (unsigned i = 0; i < nr; i++) {
        idr[i] = idb;
        idl[i] = 8;
    }
    /* the decision is durable before the first COMMIT leaves (the logged commit) */
    bool undecided = false;
    if (!rc && e->wal && (rc = log_decision(e, txid, mine, rnodes, nr))) {
        log_error("txn %llx: its commit decision was not made durable (%s): the outcome "
                  "stays unknown until this node restarts and reads its log",
                  (unsigned long long)txid, rdkv_strerror(rc));
        undecided = true;
    }
    if (undecided) {
        /* the record may be on disk or not: nobody is told anything, and the participants
         * are told "active" (the record stays) until a restart reads the log */
        if (mine) {
            mine->logged = false;
            part_abort(e, mine);
        }
        rec = false;
        rc = RDKV_EUNKNOWN;
    } else if (rc) {
        /* Abort everywhere it was prepared. A participant that did not answer (its PREPARE
         * may still arrive, or its ABORT was lost) keeps our locks there until it has
         * resolved the abort (a late PREPARE is then refused). */
        unsigned na = 0;
        uint16_t anodes[np];
        int ast[np];
        for (unsigned i = 0; i < nr; i++) {
            if (st[i] == 0) anodes[na++] = rnodes[i];
            else if (no_answer(st[i])) fence_keep(t, rnodes[i], TXN_RESOLVE_ABORT);
        }
        if (na) fanout(w, na, anodes, TXN_RPC_ABORT, idr, idl, ast);
        for (unsigned i = 0; i < na; i++)
            if (no_answer(ast[i])) fence_keep(t, anodes[i], TXN_RESOLVE_ABORT);
        if (mine) part_abort(e, mine);
    } else {
        coord_update(e, txid, TXN_STATE_COMMITTED, 0); /* the decision, before any COMMIT */
        /* Our own share goes in while the COMMITs travel: under our own locks, which have no
         * lease (row locks of this node) or one checked a quarter before its end a moment ago
         * (our points), so the check cannot fail -- and with a log, the decision is durable
         * already. */
        struct own_share own = {e, mine, 0};
        fanout_and(w, nr, rnodes, TXN_RPC_COMMIT, idr, idl, st, install_own, &own);
        if (own.rc) {
            log_error("txn %llx: its commit here was refused (a lock of ours was gone) "
                      "after the decision: the outcome is partial", (unsigned long long)txid);
            rc = RDKV_EUNKNOWN;
        }
        for (unsigned i = 0; i < nr; i++)
            if (st[i]) {
                /* With a log the decision is durable, and every participant voted yes with a
                 * durable PREPARE, in the process our locks there are in (PREPARE names it): it
                 * keeps the transaction prepared (its holds kept alive, or, after a restart,
                 * its rows locked again by the recovery) until the commit is delivered, which
                 * coord_pending makes sure of. So the transaction has committed, and only a
                 * refusal by the fence -- which nothing can cause but a bug -- is news. */
                bool refused = st[i] == RDKV_EABORTED;
                if (refused || !e->wal) {
                    log_warn("txn %llx: node %u did not confirm the commit: %s",
                             (unsigned long long)txid, rnodes[i], rdkv_strerror(st[i]));
                    rc = RDKV_EUNKNOWN;
                }
                if (refused && e->wal)
                    log_error("txn %llx: node %u refused its COMMIT after the decision was "
                              "durable: the outcome is partial", (unsigned long long)txid,
                              rnodes[i]);
                /* no answer: the COMMIT may land later; keep our locks there till it can't */
                if (no_answer(st[i])) fence_keep(t, rnodes[i], TXN_RESOLVE_COMMIT);
            }
        if (e->wal) coord_pending(e, txid, rnodes, st, nr);
    }
    if (rec) coord_update(e, txid, 0, -1);
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
        if (txn_env_is_down(e, parts[p])) rc = RDKV_EUNAVAILABLE;
    if (!rc && np == 0) rc = leases_ok(t) ? 0 : RDKV_EABORTED;
    else if (!rc && np == 1 && parts[0] == e->me) rc = commit_local(t, ops, k);
    else if (!rc && np == 1) rc = commit_apply(t, parts[0], ops, k);
    else if (!rc) rc = commit_2pc(t, np, parts, start, ops);
    free(ops);
    free(parts);
    free(start);
    return rc;
}

static int commit_in(struct txn *t)
{
    if (!t->active) return RDKV_EINVAL;
    struct txn_worker *w = t->w;
    int rc = t->failed;
    if (!rc) {
        uint32_t nw = 0;
        for (uint32_t i = 0; i < t->nents; i++)
            if (t->ents[i].wop) nw++;
        rc = nw ? commit_writes(t, nw) : (leases_ok(t) ? 0 : RDKV_EABORTED);
    }
    if (rc == 0 || rc == RDKV_EUNKNOWN) w->stats.commits++;
    else w->stats.aborts++;
    txn_end(t);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Scans. */

struct local_page {
    struct txn *t;
    struct pcur *cur;
    int err;
};

static bool page_add(struct pcur *cur, struct txn *t, const uint8_t *key, uint32_t klen, rptr row,
                     int *err)
{
    if (cur->nrows == cur->cap) {
        uint32_t cap = cur->cap ? cur->cap * 2 : 64;
        struct prow *n = realloc(cur->rows, cap * sizeof *n);
        if (!n) {
            *err = RDKV_ENOMEM;
            return false;
        }
        cur->rows = n;
        cur->cap = cap;
    }
    const uint8_t *k = tcopy(t, key, klen);
    if (!k) {
        *err = RDKV_ENOMEM;
        return false;
    }
    cur->rows[cur->nrows++] = (struct prow){k, klen, row};
    return true;
}

static bool local_emit(void *arg, rptr row, const struct row_view *v)
{
    struct local_page *lp = arg;
    return page_add(lp->cur, lp->t, v->key, v->klen, row, &lp->err);
}

/* Fetches the next page of a partition's keys. */
static int page_fill(struct txn_iter *it, struct pcur *cur)
{
    struct txn *t = it->t;
    struct txn_worker *w = t->w;
    struct txn_env *e = w->e;
    cur->nrows = cur->pos = 0;
    uint32_t want = TXN_SCAN_PAGE;
    if (it->limit && it->limit - it->emitted < want) want = (uint32_t)(it->limit - it->emitted) + 1;
    if (cur->part == e->me) {
        struct local_page lp = {t, cur, 0};
        long n = store_scan(e->st, it->b, it->blen, it->has_end ? it->e : NULL, it->elen,
                            cur->started ? cur->after : NULL, cur->alen, want, local_emit, &lp);
        if (n < 0) return (int)n;
        if (lp.err) return lp.err;
        cur->done = (uint32_t)n < want;
    } else {
        if (txn_env_is_down(e, cur->part)) return RDKV_EUNAVAILABLE;
        int trc = touch(t, cur->part);
        if (trc) return trc;
        struct pack_w pw;
        pack_w_init(&pw);
        pack_u32(&pw, it->blen);
        uint8_t *p = pack_w_room(&pw, it->blen);
        if (p && it->blen) memcpy(p, it->b, it->blen);
        pack_u8(&pw, it->has_end);
        pack_u32(&pw, it->has_end ? it->elen : 0);
        p = pack_w_room(&pw, it->has_end ? it->elen : 0);
        if (p && it->has_end && it->elen) memcpy(p, it->e, it->elen);
        uint32_t alen = cur->started ? cur->alen : 0;
        pack_u32(&pw, alen);
        p = pack_w_room(&pw, alen);
        if (p && alen) memcpy(p, cur->after, alen);
        pack_u8(&pw, cur->started);
        pack_u32(&pw, want);
        if (pw.err) {
            pack_w_free(&pw);
            return RDKV_ENOMEM;
        }
        struct fab_buf resp = {0};
        int rc = fab_rpc_call(w->c, cur->part, TXN_RPC_SCAN, pw.p, pw.len, &resp, 0);
        pack_w_free(&pw);
        if (rc) {
            fab_buf_free(&resp);
            return classify(t, rc, cur->part);
        }
        struct pack_r r;
        pack_r_init(&r, resp.data, resp.len);
        uint8_t more = unpack_u8(&r);
        uint32_t n = unpack_u32(&r);
        const uint8_t *prev = cur->started ? cur->after : NULL;
        uint32_t prevlen = cur->alen;
        for (uint32_t i = 0; i < n && !r.err && !rc; i++) {
            rptr row = unpack_u64(&r);
            uint32_t kl = unpack_u32(&r);
            const uint8_t *k = pack_r_take(&r, kl);
            if (r.err) break;
            /* a peer's answer is checked like any input: in order, in range, its partition */
            if ((prev && key_cmp(k, kl, prev, prevlen) <= 0) ||
                key_cmp(k, kl, it->b, it->blen) < 0 ||
                (it->has_end && key_cmp(k, kl, it->e, it->elen) >= 0) ||
                rptr_node(row) != cur->part || txn_partition(e, k, kl) != cur->part) {
                rc = RDKV_EPROTO;
                break;
            }
            if (!page_add(cur, t, k, kl, row, &rc)) break;
            prev = cur->rows[cur->nrows - 1].key;
            prevlen = kl;
        }
        if (!rc && (!unpack_done(&r) || more > 1)) rc = RDKV_EPROTO;
        fab_buf_free(&resp);
        if (rc) return rc;
        cur->done = !more;
    }
    cur->started = true;
    if (cur->nrows) {
        cur->after = cur->rows[cur->nrows - 1].key;
        cur->alen = cur->rows[cur->nrows - 1].klen;
    }
    return 0;
}

static int ws_cmp(const void *a, const void *b, void *arg)
{
    const struct txn *t = arg;
    const struct tent *x = &t->ents[*(const uint32_t *)a];
    const struct tent *y = &t->ents[*(const uint32_t *)b];
    return key_cmp(x->key, x->klen, y->key, y->klen);
}

static int scan_in(struct txn *t, const void *begin, uint32_t blen, const void *end,
                   uint32_t elen, uint64_t limit, struct txn_iter **out)
{
    if (!t->active) return RDKV_EINVAL;
    if (t->failed) return t->failed;
    struct txn_env *e = t->w->e;
    if (check_key(t, blen) || (end && check_key(t, elen))) return RDKV_ETOOBIG;
    int crc = charge_op(t, (uint64_t)blen + (end ? elen : 0));
    if (crc) return crc;
    struct txn_iter *it = calloc(1, sizeof *it);
    if (!it) return RDKV_ENOMEM;
    it->t = t;
    it->b = tcopy(t, begin, blen);
    it->blen = blen;
    it->has_end = end != NULL;
    it->e = end ? tcopy(t, end, elen) : NULL;
    it->elen = end ? elen : 0;
    it->limit = limit;
    if (!it->b || (end && !it->e)) {
        free(it);
        return fail(t, RDKV_ENOMEM);
    }
    if (end && key_cmp(it->b, blen, it->e, elen) >= 0) return *out = it, 0; /* empty */
    /* shared range locks on every partition: the keys [begin, end) */
    int rc = 0;
    for (uint16_t p = 0; p < e->n && !rc; p++) {
        if (t->nscans == t->scancap) {
            uint32_t cap = t->scancap ? t->scancap * 2 : 8;
            struct range_handle **n = realloc(t->scans, cap * sizeof *n);
            if (!n) {
                rc = fail(t, RDKV_ENOMEM);
                break;
            }
            t->scans = n;
            t->scancap = cap;
        }
        if (txn_env_is_down(e, p)) {
            rc = fail(t, RDKV_EUNAVAILABLE);
            break;
        }
        struct range_handle *h = NULL;
        rc = range_take(t, &h, p, it->b, blen, it->e, elen, end ? RANGE_K_END : 0,
                        LOCK_SHARED); /* (a failure releases the others) */
        if (h && h->mode) t->scans[t->nscans++] = h;
        else if (h) rh_put(t->w, h);
    }
    it->cur = calloc(e->n, sizeof *it->cur);
    it->ws = calloc(t->nents ? t->nents : 1, sizeof *it->ws);
    if (!rc && (!it->cur || !it->ws)) rc = fail(t, RDKV_ENOMEM);
    if (rc) {
        txn_iter_close(it);
        return rc;
    }
    it->ncur = e->n;
    for (uint16_t p = 0; p < e->n; p++) it->cur[p].part = p;
    for (uint32_t i = 0; i < t->nents; i++) {
        struct tent *en = &t->ents[i];
        if (!en->wop || key_cmp(en->key, en->klen, it->b, blen) < 0 ||
            (end && key_cmp(en->key, en->klen, it->e, elen) >= 0))
            continue;
        it->ws[it->nws++] = i;
    }
    qsort_r(it->ws, it->nws, sizeof *it->ws, ws_cmp, t);
    *out = it;
    return 0;
}

static int iter_next_in(struct txn_iter *it, const void **key, uint32_t *klen,
                        const void **val, uint32_t *vlen)
{
    struct txn *t = it->t;
    if (it->err) return it->err;
    if (t->failed) return it->err = t->failed;
    for (;;) {
        if (it->limit && it->emitted >= it->limit) return 0;
        struct pcur *best = NULL;
        for (uint32_t i = 0; i < it->ncur; i++) {
            struct pcur *c = &it->cur[i];
            if (c->pos == c->nrows && !c->done) {
                int rc = page_fill(it, c);
                if (rc) return it->err = fail(t, rc);
            }
            if (c->pos == c->nrows) continue;
            struct prow *r = &c->rows[c->pos];
            if (!best || key_cmp(r->key, r->klen, best->rows[best->pos].key,
                                 best->rows[best->pos].klen) < 0)
                best = c;
        }
        struct tent *wsn = it->wpos < it->nws ? &t->ents[it->ws[it->wpos]] : NULL;
        if (!best && !wsn) return 0;
        int cmp = !best ? 1 : (!wsn ? -1 : 0);
        if (best && wsn)
            cmp = key_cmp(best->rows[best->pos].key, best->rows[best->pos].klen, wsn->key,
                          wsn->klen);
        if (cmp >= 0) {
            /* this transaction's own write comes first (or replaces the stored row) */
            it->wpos++;
            if (cmp == 0) best->pos++;
            if (wsn->wop != W_PUT) continue;
            *key = wsn->key;
            *klen = wsn->klen;
            *val = wsn->nval;
            *vlen = wsn->nvlen;
            it->emitted++;
            return 1;
        }
        struct prow *r = &best->rows[best->pos++];
        int i = ent_get(t, r->key, r->klen);
        if (i < 0) return it->err = fail(t, i);
        struct tent *en = &t->ents[i];
        if (!en->lk.mode) {
            /* the range lock keeps the row from going away; its row lock keeps it still (and
             * a remote row is read in the lock's own chain where the lock can) */
            int ok;
            int rc = lock_read_row(t, en, r->row, LOCK_SHARED, true, &ok);
            if (rc) return it->err = rc;
            if (ok < 0) return it->err = fail(t, ok);
            if (ok == 0) {
                unlock_row(t, en);
                continue;
            }
            en->row = r->row;
            en->exists = en->known = true;
        } else if (!en->have_val) {
            int ok = read_row(t, en, en->row, true);
            if (ok < 0) return it->err = fail(t, ok);
            if (ok == 0) continue;
        }
        if (!en->exists) continue;
        *key = en->key;
        *klen = en->klen;
        *val = en->val;
        *vlen = en->vlen;
        it->emitted++;
        return 1;
    }
}

void txn_iter_close(struct txn_iter *it)
{
    if (!it) return;
    if (it->cur)
        for (uint32_t i = 0; i < it->ncur; i++) free(it->cur[i].rows);
    free(it->cur);
    free(it->ws);
    free(it);
}

/* ------------------------------------------------------------------------------------------ */
/* Every call of a transaction runs pinned to the incarnations it works with (t->pinc; 0 entries
 * are filled by its first post there), and restores whatever pin its task had: a post of the
 * transaction never reaches a later process of a node its locks are in, and nothing else the task
 * or thread does (an in-doubt thread's queries) is pinned by it (docs/transactions.md,
 * "Incarnations"). */

static uint64_t *pin_on(struct txn *t) { return fab_pin(t->w->c, t->pinc); }
static void pin_off(struct txn *t, uint64_t *was) { fab_pin(t->w->c, was); }

int txn_get(struct txn *t, const void *key, uint32_t klen, bool for_update, const void **val,
            uint32_t *vlen)
{
    uint64_t *was = pin_on(t);
    int rc = get_in(t, key, klen, for_update, val, vlen);
    pin_off(t, was);
    return rc;
}

int txn_put(struct txn *t, const void *key, uint32_t klen, const void *val, uint32_t vlen)
{
    uint64_t *was = pin_on(t);
    int rc = put_in(t, key, klen, val, vlen);
    pin_off(t, was);
    return rc;
}

int txn_del(struct txn *t, const void *key, uint32_t klen)
{
    uint64_t *was = pin_on(t);
    int rc = del_in(t, key, klen);
    pin_off(t, was);
    return rc;
}

int txn_scan(struct txn *t, const void *begin, uint32_t blen, const void *end, uint32_t elen,
             uint64_t limit, struct txn_iter **out)
{
    uint64_t *was = pin_on(t);
    int rc = scan_in(t, begin, blen, end, elen, limit, out);
    pin_off(t, was);
    return rc;
}

int txn_iter_next(struct txn_iter *it, const void **key, uint32_t *klen, const void **val,
                  uint32_t *vlen)
{
    uint64_t *was = pin_on(it->t);
    int rc = iter_next_in(it, key, klen, val, vlen);
    pin_off(it->t, was);
    return rc;
}

int txn_commit(struct txn *t)
{
    uint64_t *was = pin_on(t);
    int rc = commit_in(t);
    pin_off(t, was);
    return rc;
}

void txn_abort(struct txn *t)
{
    if (!t) return;
    uint64_t *was = pin_on(t);
    abort_in(t);
    pin_off(t, was);
}
