/* Shared lock machinery: the algorithm registry, per-thread descriptor slabs, the lock table, and
 * bounded waiting. */
#include "lock.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/rng.h"
#include "common/fence.h"
#include "common/task.h"
#include "locks/lock_internal.h"
#include "locks/ticket.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/futex.h>
#include <sched.h>
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

/* ---------------------------------------------------------------------------------------------
 * Waiting */

static inline void cpu_relax(void) { __builtin_ia32_pause(); }

#define SPIN_ROUNDS 512           /* about 1-3 us of pause instructions */
#define NAP_MAX_NS (128 * NS_PER_US) /* longest sleep between looks at a NIC-written word */

static int futex_wait32(uint32_t *addr, uint32_t val, int64_t ns)
{
    struct timespec ts = clock_ts(ns);
    return (int)syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
}

/* A task's wait for a word to change: it lets the thread's other tasks run (the one it waits
 * for may be among them), then naps as a thread would, without the futex (nobody can wake a
 * task through it: the writers' lock_wake wakes threads). */
static int task_wait_change(uint64_t *w, uint64_t v, int64_t deadline)
{
    int64_t nap = 20 * NS_PER_US;
    for (unsigned round = 0;; round++) {
        if (__atomic_load_n(w, __ATOMIC_ACQUIRE) != v) return 0;
        int64_t now = clock_now_ns();
        if (deadline && now >= deadline) return RDKV_ETIMEDOUT;
        if (round < 16) {
            task_yield();
            continue;
        }
        int64_t t = nap;
        if (deadline && deadline - now < t) t = deadline - now;
        task_sleep_ns(t);
        if (nap < NAP_MAX_NS) nap *= 2;
    }
}

int lock_wait_change(uint64_t *w, uint64_t v, uint32_t *sleeping, int64_t deadline)
{
    if (task_running()) return task_wait_change(w, v, deadline);
    for (unsigned i = 0; i < SPIN_ROUNDS; i++) {
        if (__atomic_load_n(w, __ATOMIC_ACQUIRE) != v) return 0;
        cpu_relax();
    }
    int64_t nap = 20 * NS_PER_US;
    for (;;) {
        if (__atomic_load_n(w, __ATOMIC_ACQUIRE) != v) return 0;
        int64_t now = clock_now_ns();
        if (deadline && now >= deadline) return RDKV_ETIMEDOUT;
        int64_t t = nap;
        if (deadline && deadline - now < t) t = deadline - now;
        if (sleeping) __atomic_store_n(sleeping, 1, __ATOMIC_SEQ_CST);
        /* the low half of the word: it changes whenever the value does, for every use here */
        if (__atomic_load_n(w, __ATOMIC_SEQ_CST) == v)
            futex_wait32((uint32_t *)(void *)w, (uint32_t)v, t);
        if (sleeping) __atomic_store_n(sleeping, 0, __ATOMIC_RELAXED);
        if (nap < NAP_MAX_NS) nap *= 2;
    }
}

/* The owner's task is in d->waker while it waits. A waker claims it by setting the low bit
 * (LD_WAKING: task records are aligned), wakes it, and lets go by clearing the word; only then
 * may the wait end, since task_wake touches the task and its scheduler after the wake is visible,
 * and the task could otherwise finish (its record freed, its thread's scheduler destroyed) under
 * the waker. A wait that sees a claim done takes its wake (the park may have returned before it
 * came) and registers again; at its end it takes back its registration or, if claimed, waits out
 * the waker and takes its wake, so none is left for a later park. The task has nothing of its own
 * in flight while it waits here; a wake from elsewhere (the session service's, on a new request)
 * may be taken with a claim's, which is harmless because that waker's own wait checks its
 * condition again under its mutex before it parks. Task records are calloc'ed, so the low bit of
 * their address is free. */
#define LD_WAKING 1u

/* A claim of this owner is served: waits until its waker lets go (d->waker is mine | LD_WAKING
 * until then; it is between two instructions unless its thread was preempted, so a few yields,
 * then short naps), then takes its wake, which may have come after the owner's park returned. */
static void desc_claim_served(struct lock_desc *d, uint64_t mine)
{
    for (unsigned round = 0; __atomic_load_n(&d->waker, __ATOMIC_ACQUIRE) == (mine | LD_WAKING);
         round++) {
        if (round < 16) task_yield();
        else task_park(clock_now_ns() + 20 * NS_PER_US);
    }
    task_take_wake();
}

void lock_desc_wait(struct lock_desc *d, uint64_t *w, uint64_t v)
{
    struct task *me = task_self();
    if (!me) {
        lock_wait_change(w, v, &d->sleeping, 0);
        return;
    }
    uint64_t mine = (uint64_t)(uintptr_t)me;
    __atomic_store_n(&d->waker, mine, __ATOMIC_SEQ_CST);
    int64_t nap = 20 * NS_PER_US;
    for (unsigned round = 0; __atomic_load_n(w, __ATOMIC_SEQ_CST) == v; round++) {
        if (round < 16) {
            task_yield();
            continue;
        }
        /* a neighbour on this node wakes it; one on another node cannot, so it looks again */
        bool woken = task_park(clock_now_ns() + nap) == 0;
        if (__atomic_load_n(&d->waker, __ATOMIC_SEQ_CST) != mine) {
            /* claimed: once served, register again (the loop reads *w after that) */
            desc_claim_served(d, mine);
            __atomic_store_n(&d->waker, mine, __ATOMIC_SEQ_CST);
        } else if (!woken && nap < NAP_MAX_NS) {
            nap *= 2;
        }
    }
    uint64_t cur = mine;
    if (!__atomic_compare_exchange_n(&d->waker, &cur, 0, false, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST)) {
        desc_claim_served(d, mine);
    }
}

void lock_desc_wake(struct lock_thread *t, rptr word)
{
    rptr line = rptr_make(rptr_node(word), rptr_off(word) & ~(uint64_t)(LOCK_LINE - 1));
    struct lock_desc *d = fab_local(t->f, line);
    if (!d) return;
    full_fence();
    uint64_t task = __atomic_load_n(&d->waker, __ATOMIC_SEQ_CST);
    do {
        if (!task) { /* no task waits: maybe a thread, on the futex */
            lock_wake((uint64_t *)fab_local(t->f, word), &d->sleeping);
            return;
        }
        if (task & LD_WAKING) return; /* another waker is at it, and the owner looks again after */
    } while (!__atomic_compare_exchange_n(&d->waker, &task, task | LD_WAKING, false,
                                          __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
    task_wake((struct task *)(uintptr_t)task);
    __atomic_store_n(&d->waker, 0, __ATOMIC_RELEASE); /* let go: the owner's wait may end now */
}

void lock_wake(uint64_t *w, uint32_t *sleeping)
{
    full_fence();
    if (!sleeping || __atomic_load_n(sleeping, __ATOMIC_RELAXED))
        syscall(SYS_futex, (uint32_t *)(void *)w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void lock_nap(uint32_t *w, uint32_t seen, uint32_t *sleepers, int64_t ns)
{
    if (task_running()) { /* (a task cannot be woken through the futex: it naps) */
        if (__atomic_load_n(w, __ATOMIC_SEQ_CST) == seen) task_sleep_ns(ns);
        return;
    }
    __atomic_fetch_add(sleepers, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(w, __ATOMIC_SEQ_CST) == seen) futex_wait32(w, seen, ns);
    __atomic_fetch_sub(sleepers, 1, __ATOMIC_SEQ_CST);
}

void lock_wake_all(uint32_t *w, uint32_t *sleepers)
{
    full_fence();
    if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST))
        syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

void lock_retry_backoff(struct lock_thread *t, int64_t *b, uint64_t *seed)
{
    int64_t wait = *b / 2 + (int64_t)rng_below(seed, (uint64_t)(*b / 2 + 1));
    if (wait < 20 * NS_PER_US && task_running()) {
        task_yield(); /* a task's short back-off: the thread's other tasks run meanwhile */
    } else if (wait < 20 * NS_PER_US) {
        int64_t until = clock_now_ns() + wait;
        while (clock_now_ns() < until) cpu_relax();
    } else {
        clock_sleep_ns(wait);
    }
    if (*b < t->cfg.spin_backoff_max_ns) *b *= 2;
}

void lock_backoff(unsigned round)
{
    /* About 2 us of spinning in all, then yields, then sleeps: on a 2-core machine a spinning
     * waiter takes the CPU from the thread it waits for. A task yields to the thread's other
     * tasks instead of spinning. */
    if (round < 8 && task_running()) {
        task_yield();
    } else if (round < 4) {
        for (unsigned i = 0; i < (64u << round); i++) cpu_relax();
    } else if (round < 8) {
        sched_yield();
    } else {
        unsigned r = round - 8;
        clock_sleep_ns((int64_t)NS_PER_US << (r < 7 ? r : 7)); /* 1 us .. 128 us */
    }
}
