/* Shared lock machinery: the algorithm registry, per-thread descriptor slabs and the lock table
 * (bounded waiting is in wait.c). */
#include "lock.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/fence.h"
#include "locks/lock_internal.h"
#include "locks/ticket.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static const struct lock_algo *const algos[] = {
    &lock_alock, &lock_spin, &lock_mcs,   &lock_dslr,     &lock_dslr_u,  &lock_drtm,  &lock_rof,
    &lock_trad,  &lock_rwlock, &lock_dmcs, &lock_fompi_rw, &lock_rma_mcs, &lock_rma_rw};

const struct lock_algo *lock_algo_find(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof algos / sizeof algos[0]; i++)
        if (!strcmp(algos[i]->name, name)) return algos[i];
    return NULL;
}

const struct lock_algo *lock_algo_by_id(unsigned id)
{
    for (size_t i = 0; i < sizeof algos / sizeof algos[0]; i++)
        if (algos[i]->id == id) return algos[i];
    return NULL;
}

_Static_assert(LOCK_ID__COUNT <= METRICS_ALGOS, "per-algorithm counters");

int lock_acquire(struct lock_handle *h, enum lock_mode m, int64_t deadline)
{
    if (!metrics_me()) return h->algo->acquire(h, m, deadline);
    unsigned id = h->algo->id;
    uint64_t resets = h->t ? h->t->stats.resets : 0;
    unsigned waits = lock_waits_seen();
    int64_t from = clock_now_ns();
    int rc = h->algo->acquire(h, m, deadline);
    metrics_algo_add(id, MA_ACQUIRES, 1);
    if (lock_waits_seen() != waits) {
        metrics_algo_add(id, MA_WAITS, 1);
        metrics_time(MH_LOCK_WAIT, clock_now_ns() - from);
    }
    if (rc == RDKV_ETIMEDOUT) metrics_algo_add(id, MA_TIMEOUTS, 1);
    else if (rc == RDKV_EABORTED) metrics_algo_add(id, MA_ABORTS, 1);
    if (h->t && h->t->stats.resets != resets)
        metrics_algo_add(id, MA_RESETS, h->t->stats.resets - resets);
    return rc;
}

static char all_names[256], txn_names[256];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void names_init(void)
{
    size_t a = 0, t = 0;
    for (size_t i = 0; i < sizeof algos / sizeof algos[0]; i++) {
        a += (size_t)snprintf(all_names + a, sizeof all_names - a, "%s%s", a ? ", " : "",
                              algos[i]->name);
        if (!algos[i]->queue_wait)
            t += (size_t)snprintf(txn_names + t, sizeof txn_names - t, "%s%s", t ? ", " : "",
                                  algos[i]->name);
    }
}

const char *lock_algo_names(void)
{
    pthread_once(&names_once, names_init);
    return all_names;
}

const char *lock_algo_txn_names(void)
{
    pthread_once(&names_once, names_init);
    return txn_names;
}

void lock_cfg_init(struct lock_cfg *cfg)
{
    cfg->alock_local_budget = 5;
    cfg->alock_remote_budget = 20;
    cfg->spin_backoff_min_ns = 1 * NS_PER_US;
    cfg->spin_backoff_max_ns = 64 * NS_PER_US;
    cfg->lease_ns = 10 * NS_PER_MS;
    cfg->dslr_omega_ns = 0;
    cfg->dslr_backoff_r_ns = 10 * NS_PER_US;
    cfg->dslr_backoff_max_ns = 10 * NS_PER_MS;
    cfg->drtm_lease_ns = 1 * NS_PER_MS;
    cfg->rwlock_local_budget = 5;
    cfg->rwlock_remote_budget = 20;
    cfg->dslr_max_slots = LOCK_DSLR_MAX_SLOTS;
    cfg->rma_tl2 = 50;
    cfg->rma_tl1 = 20;
    cfg->rma_tr = 1000;
    cfg->rma_dc_nodes = 1;
    cfg->rma_dc_per_node = 1;
}

bool lock_lease_ok(const struct lock_handle *h)
{
    if (!h->mode) return false;
    if (!h->lease_ns) return true; /* no lease */
    return clock_now_ns() - h->granted_at < h->lease_ns - h->lease_ns / 4;
}

int lock_refresh(struct lock_handle *h)
{
    if (!h->mode) return RDKV_EINVAL;
    if (!h->lease_ns) return 0;
    return h->algo->refresh ? h->algo->refresh(h) : RDKV_ENOTSUP;
}

/* lock_release_many: chains in flight at once (a batch waits for its chains before the next
 * one posts), and the tag of a batch's i-th chain. */
#define RELEASE_BATCH 32u
#define RELEASE_TAG 0x7D0000000000ull

/* The first failure, but a run-out lease before any other. */
static void release_note(int *ret, int rc)
{
    if (rc == RDKV_ETIMEDOUT || (rc && !*ret)) *ret = rc;
}

int lock_release_many(struct lock_handle *const *hs, unsigned n)
{
    int ret = 0;
    struct fab_op ops[RELEASE_BATCH][LOCK_RELEASE_OPS];
    unsigned nops[RELEASE_BATCH];
    bool inflight[RELEASE_BATCH];
    for (unsigned base = 0; base < n; base += RELEASE_BATCH) {
        unsigned m = n - base < RELEASE_BATCH ? n - base : RELEASE_BATCH, chains = 0, pending = 0;
        struct lock_handle *const *h = hs + base;
        struct fab_ctx *c = h[0]->t->c;
        /* every release up to its chain (or whole) */
        for (unsigned i = 0; i < m; i++) {
            nops[i] = 0;
            inflight[i] = false;
            if (!h[i]->algo->release_post || h[i]->t->c != c) {
                release_note(&ret, lock_release(h[i]));
                h[i]->mode = 0;
                continue;
            }
            release_note(&ret, h[i]->algo->release_post(h[i], ops[i], &nops[i]));
            if (nops[i]) chains++;
        }
        /* the chains: all in flight at once (one alone, or one the context has no room for,
         * waits as release would) */
        for (unsigned i = 0; i < m; i++) {
            if (!nops[i]) continue;
            if (chains > 1 && fab_post(c, ops[i], nops[i], RELEASE_TAG | i) == 0) {
                inflight[i] = true;
                pending++;
            } else {
                release_note(&ret, h[i]->algo->release_done(h[i], fab_exec(c, ops[i], nops[i])));
            }
        }
        while (pending) {
            struct fab_cqe cq[16];
            int got = fab_wait(c, cq, 16, -1);
            for (int j = 0; j < got; j++) {
                uint64_t i = cq[j].tag & ~RELEASE_TAG;
                if ((cq[j].tag & RELEASE_TAG) != RELEASE_TAG || i >= m || !inflight[i]) continue;
                inflight[i] = false;
                pending--;
                release_note(&ret, h[i]->algo->release_done(h[i], cq[j].status));
            }
        }
    }
    return ret;
}

int lock_holds_x(const struct lock_algo *a, struct fabric *f, rptr line, uint16_t holder,
                 uint64_t token)
{
    if (!fab_local(f, line)) return RDKV_EINVAL; /* the owner's check only */
    return a->holds_x ? a->holds_x(f, line, holder, token) : RDKV_ENOTSUP;
}

int lock_keep_x(const struct lock_algo *a, struct lock_thread *t, rptr line, uint16_t holder,
                uint64_t token)
{
    if (!fab_local(t->f, line)) return RDKV_EINVAL;
    return a->keep_x ? a->keep_x(t, line, holder, token) : RDKV_ENOTSUP;
}

int lock_release_x(const struct lock_algo *a, struct lock_thread *t, rptr line, uint16_t holder,
                   uint64_t token)
{
    if (!fab_local(t->f, line)) return RDKV_EINVAL;
    return a->release_x ? a->release_x(t, line, holder, token) : RDKV_ENOTSUP;
}

/* ---------------------------------------------------------------------------------------------
 * Descriptor slabs. The node's "lockdesc" region starts with a 64-byte bitmap header (256 bits:
 * which slabs are taken), changed only by this node's threads with CPU atomics, then
 * LOCK_MAX_THREADS slabs of LOCK_DESCS descriptors. */
#define DESC_REGION "lockdesc"
#define SLAB_BYTES ((uint64_t)LOCK_DESCS * LOCK_LINE)
#define DESC_REGION_BYTES (LOCK_LINE + (uint64_t)LOCK_MAX_THREADS * SLAB_BYTES)

/* Takes a free slab of the region for t (zeroed). */
static int slab_take(struct lock_thread *t, rptr region, unsigned *out)
{
    uint64_t *bits = fab_local(t->f, region);
    for (unsigned s = 0; s < LOCK_MAX_THREADS; s++) {
        uint64_t *w = &bits[s / 64], m = 1ull << (s % 64);
        if (__atomic_fetch_or(w, m, __ATOMIC_ACQ_REL) & m) continue;
        rptr at = rptr_add(region, LOCK_LINE + s * SLAB_BYTES);
        memset(fab_local(t->f, at), 0, SLAB_BYTES);
        t->slab_ids[t->nslabs] = (uint16_t)s;
        t->slab_at[t->nslabs] = at;
        t->free_mask[t->nslabs] = ~0ull;
        t->nslabs++;
        *out = s;
        return 0;
    }
    return RDKV_EBUSY;
}

int lock_thread_init(struct lock_thread *t, struct fab_ctx *c, const struct lock_cfg *cfg)
{
    memset(t, 0, sizeof *t);
    t->c = c;
    t->f = fab_ctx_fabric(c);
    t->node = fab_node_id(t->f);
    /* Lock waits sleep for tens of microseconds; the default 50 us timer slack would double
     * them. This thread's sleeps get 1 us of slack. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    if (cfg) t->cfg = *cfg;
    else lock_cfg_init(&t->cfg);
    if (t->cfg.dslr_max_slots < 1 || t->cfg.dslr_max_slots > LOCK_DSLR_MAX_SLOTS)
        t->cfg.dslr_max_slots = LOCK_DSLR_MAX_SLOTS;
    if (!fab_arena_base(t->f)) return RDKV_EINVAL; /* descriptors need this node's arena */
    rptr region;
    int rc = fab_region(t->f, DESC_REGION, DESC_REGION_BYTES, LOCK_LINE, &region);
    if (rc) return rc;
    unsigned s;
    if ((rc = slab_take(t, region, &s))) return rc;
    t->slab = s;
    t->descs = t->slab_at[0];
    t->id = ((uint32_t)t->node << 16 | s) + 1;
    return 0;
}

void lock_thread_fini(struct lock_thread *t)
{
    if (!t->id) return;
    /* Tickets given up at a deadline still sit in their words: pass each on when its turn comes
     * (lock_thread_poll forgets one after eight leases, when a reset has recovered it), so a
     * thread that goes away leaves no word waiting for a reset. A ticket of a word without
     * resets whose turn has not come in eight leases either (its holders are stopping too) is
     * dropped with a word in the log. */
    int64_t give_up = clock_now_ns() + 8 * t->cfg.lease_ns;
    for (unsigned round = 0; clock_now_ns() < give_up; round++) {
        lock_thread_poll(t);
        if (!t->abandoned) break;
        lock_backoff(round < 12 ? round : 12);
    }
    if (t->abandoned) log_warn("lock thread %u goes with given-up tickets whose turn never came",
                               t->id);
    lock_thread_drop_abandoned(t);
    free(t->pin);
    t->pin = NULL;
    rptr region;
    if (fab_region(t->f, DESC_REGION, DESC_REGION_BYTES, LOCK_LINE, &region) == 0) {
        uint64_t *bits = fab_local(t->f, region);
        for (unsigned k = 0; k < t->nslabs; k++) {
            unsigned s = t->slab_ids[k];
            __atomic_fetch_and(&bits[s / 64], ~(1ull << (s % 64)), __ATOMIC_ACQ_REL);
        }
    }
    t->nslabs = 0;
    t->id = 0;
}

int desc_get(struct lock_thread *t, unsigned *idx, rptr *r, struct lock_desc **d)
{
    unsigned k = 0;
    while (k < t->nslabs && !t->free_mask[k]) k++;
    if (k == t->nslabs) {
        /* every descriptor in use: take one more slab of the node's, if any is left */
        rptr region;
        unsigned s;
        if (k == LOCK_THREAD_SLABS ||
            fab_region(t->f, DESC_REGION, DESC_REGION_BYTES, LOCK_LINE, &region) ||
            slab_take(t, region, &s))
            return RDKV_EBUSY;
    }
    unsigned i = k * 64 + (unsigned)__builtin_ctzll(t->free_mask[k]);
    t->free_mask[k] &= ~(1ull << (i % 64));
    *idx = i;
    *r = desc_rptr(t, i);
    *d = fab_local(t->f, *r);
    return 0;
}

int lock_swap(struct fab_ctx *c, rptr w, uint64_t v, uint64_t *prev)
{
    uint64_t expect = 0;
    for (;;) {
        uint64_t old;
        int rc = fab_cas(c, w, expect, v, &old);
        if (rc) return rc;
        if (old == expect) {
            *prev = old;
            return 0;
        }
        expect = old;
    }
}

void desc_put(struct lock_thread *t, unsigned idx) { t->free_mask[idx / 64] |= 1ull << (idx % 64); }

rptr desc_rptr(const struct lock_thread *t, unsigned idx)
{
    return rptr_add(t->slab_at[idx / LOCK_DESCS], (uint64_t)(idx % LOCK_DESCS) * LOCK_LINE);
}

struct lock_desc *desc_at(struct lock_thread *t, unsigned idx)
{
    return fab_local(t->f, desc_rptr(t, idx));
}

/* ---------------------------------------------------------------------------------------------
 * The lock table */
#define TABLE_REGION "locktable"
#define RMA_REGION "lockrma"
#define RMA_REGION_BYTES ((uint64_t)LOCK_RMA_MAX * LOCK_LINE)

static void share(uint32_t total, unsigned nodes, uint16_t node, uint32_t *first, uint32_t *count)
{
    uint32_t base = total / nodes, extra = total % nodes;
    *count = base + (node < extra ? 1 : 0);
    *first = node * base + (node < extra ? node : extra);
}

uint32_t locktable_count(const struct locktable *lt, uint16_t node)
{
    uint32_t first, count;
    share(lt->total, lt->nodes, node, &first, &count);
    return count;
}

int locktable_reset(struct fabric *f, uint32_t total)
{
    uint32_t first, count;
    unsigned n = fab_num_nodes(f);
    if (total == 0 || total / n + 1 > LOCKTABLE_MAX_PER_NODE) return RDKV_EINVAL;
    share(total, n, fab_node_id(f), &first, &count);
    rptr base;
    int rc = fab_region(f, TABLE_REGION, (uint64_t)LOCKTABLE_MAX_PER_NODE * LOCKTABLE_ENTRY,
                        LOCK_LINE, &base);
    if (rc) return rc;
    uint64_t *p = fab_local(f, base);
    size_t words = (size_t)count * LOCKTABLE_ENTRY / 8;
    for (size_t i = 0; i < words; i++) __atomic_store_n(&p[i], 0, __ATOMIC_RELAXED);
    /* the RMA locks' sites of this node, one per lock of the whole table */
    if ((rc = fab_region(f, RMA_REGION, RMA_REGION_BYTES, LOCK_LINE, &base))) return rc;
    p = fab_local(f, base);
    words = (size_t)(total < LOCK_RMA_MAX ? total : LOCK_RMA_MAX) * LOCK_LINE / 8;
    for (size_t i = 0; i < words; i++) __atomic_store_n(&p[i], 0, __ATOMIC_RELAXED);
    full_fence();
    return 0;
}

uint32_t locktable_index(const struct locktable *lt, rptr line)
{
    uint16_t n = rptr_node(line);
    if (n >= lt->nodes || rptr_off(line) < rptr_off(lt->base[n])) return UINT32_MAX;
    uint64_t d = rptr_off(line) - rptr_off(lt->base[n]);
    uint32_t first, count;
    share(lt->total, lt->nodes, n, &first, &count);
    if (d % LOCKTABLE_ENTRY || d / LOCKTABLE_ENTRY >= count) return UINT32_MAX;
    return first + (uint32_t)(d / LOCKTABLE_ENTRY);
}

int locktable_open(struct locktable *lt, struct fab_ctx *c, uint32_t total)
{
    struct fabric *f = fab_ctx_fabric(c);
    memset(lt, 0, sizeof *lt);
    lt->nodes = fab_num_nodes(f);
    lt->total = total;
    if (total == 0 || total / lt->nodes + 1 > LOCKTABLE_MAX_PER_NODE) return RDKV_EINVAL;
    unsigned up = 0;
    for (unsigned n = 0; n < lt->nodes; n++) {
        uint64_t size;
        int rc = fab_region_lookup(c, (uint16_t)n, TABLE_REGION, &lt->base[n], &size);
        if (rc == RDKV_EUNAVAILABLE) {
            lt->unreachable |= 1ull << n;
            lt->base[n] = rptr_make((uint16_t)n, 0); /* any access reaches the dead peer: fails */
            lt->rma[n] = lt->base[n];
            continue;
        }
        if (rc) return rc;
        rc = fab_region_lookup(c, (uint16_t)n, RMA_REGION, &lt->rma[n], &size);
        if (rc == RDKV_ENOTFOUND) lt->rma[n] = RPTR_NULL; /* a node that never reset the table */
        else if (rc) return rc;
        up++;
    }
    return up ? 0 : RDKV_EUNAVAILABLE;
}
