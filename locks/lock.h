/* Locks over the fabric. Every algorithm has the same shape -- acquire(handle, mode, deadline)
 * and release(handle) on a 64-byte lock line named by an rptr -- so the transaction layer and the
 * benchmarks can switch algorithms by name. Also here: per-thread lock state (a pool of queue
 * descriptors in the thread's own arena), the lock table used by benchmarks and tests, and the
 * bounded wait (spin briefly, then sleep) every algorithm uses. docs/locks.md. */
#ifndef RDKV_LOCK_H
#define RDKV_LOCK_H

#include "rdma/fabric.h"

#include <stdbool.h>
#include <stdint.h>

#define LOCK_LINE 64

enum lock_mode { LOCK_SHARED = 1, LOCK_EXCLUSIVE = 2 };

struct lock_handle;

struct lock_algo {
    const char *name;
    unsigned modes;        /* bitmask of (1 << enum lock_mode) it supports */
    bool uses_descriptors; /* queue locks take one descriptor per held lock */
    /* Returns 0 (held), RDKV_ETIMEDOUT (deadline passed, not held), RDKV_ENOTSUP (mode), or a
     * fabric error (the lock is not held and the lock line is unchanged by this call's failure
     * only where the algorithm says so; see docs/locks.md). deadline: clock_now_ns() value, or
     * 0 for none. */
    int (*acquire)(struct lock_handle *h, enum lock_mode mode, int64_t deadline);
    int (*release)(struct lock_handle *h);
};

extern const struct lock_algo lock_alock; /* ALock: local CPU atomics, remote one-sided verbs */
extern const struct lock_algo lock_spin;  /* RDMA CAS spinlock, loopback for local locks */
extern const struct lock_algo lock_mcs;   /* RDMA MCS queue lock, loopback for local locks */

/* "alock", "spin", "mcs" (and later algorithms), or NULL. */
const struct lock_algo *lock_algo_find(const char *name);
/* Comma-separated names, for --help texts. */
const char *lock_algo_names(void);

/* Tunables; lock_cfg_init gives the defaults. */
struct lock_cfg {
    int64_t alock_local_budget;  /* default 5: local handovers before yielding to remote */
    int64_t alock_remote_budget; /* default 20 */
    int64_t spin_backoff_min_ns; /* spinlock: first back-off after a failed CAS (default 1 us) */
    int64_t spin_backoff_max_ns; /* default 64 us */
};
void lock_cfg_init(struct lock_cfg *cfg);

/* ---------------------------------------------------------------------------------------------
 * Per-thread lock state. A queue lock needs one descriptor per lock a thread holds or waits for;
 * descriptors are 64-byte lines in the thread's own node arena (so peers can write into them),
 * taken from a per-thread slab of LOCK_DESCS. */
#define LOCK_DESCS 64
#define LOCK_MAX_THREADS 256 /* per node */

struct lock_thread {
    struct fabric *f;
    struct fab_ctx *c;
    uint16_t node;
    uint32_t id;          /* cluster-unique, nonzero: (node << 16 | slab) + 1 */
    unsigned slab;
    rptr descs;           /* this thread's LOCK_DESCS descriptors */
    uint64_t free_mask;   /* bit i set: descriptor i is free */
    struct lock_cfg cfg;
};

/* Attaches the calling thread (which owns c) to the locks of its node. cfg may be NULL. It also
 * sets the thread's timer slack to 1 us, so that lock waits sleep as long as they ask. */
int lock_thread_init(struct lock_thread *t, struct fab_ctx *c, const struct lock_cfg *cfg);
void lock_thread_fini(struct lock_thread *t);

struct lock_handle {
    rptr line;                    /* the 64-byte lock line */
    const struct lock_algo *algo;
    struct lock_thread *t;
    uint8_t mode;                 /* the mode held, 0 when not held */
    uint8_t desc;                 /* queue locks: the descriptor in use */
    uint64_t aux;                 /* algorithm-private */
};

static inline void lock_handle_init(struct lock_handle *h, struct lock_thread *t,
                                    const struct lock_algo *a, rptr line)
{
    h->line = line;
    h->algo = a;
    h->t = t;
    h->mode = 0;
    h->desc = 0;
    h->aux = 0;
}
static inline int lock_acquire(struct lock_handle *h, enum lock_mode m, int64_t deadline)
{
    return h->algo->acquire(h, m, deadline);
}
static inline int lock_release(struct lock_handle *h) { return h->algo->release(h); }

/* ---------------------------------------------------------------------------------------------
 * The lock table: `total` locks partitioned equally across the nodes (node n owns locks
 * [first(n), first(n+1))). Each entry is 128 bytes: the 64-byte lock line, then a 64-byte data
 * line that tests and benchmarks use as the critical section's data. All-zero lines are free
 * locks for every algorithm. */
#define LOCKTABLE_ENTRY 128
#define LOCKTABLE_MAX_PER_NODE 16384

struct locktable {
    unsigned nodes;
    uint32_t total;
    rptr base[CLUSTER_MAX_NODES];
};

/* Reserves (once) and zeroes this node's part of the table; no lock of it may be in use. */
int locktable_reset(struct fabric *f, uint32_t total);
/* Finds every node's part (one-sided READs of their arena headers). */
int locktable_open(struct locktable *lt, struct fab_ctx *c, uint32_t total);
uint32_t locktable_count(const struct locktable *lt, uint16_t node);
static inline rptr locktable_line(const struct locktable *lt, uint16_t node, uint32_t i)
{
    return rptr_add(lt->base[node], (uint64_t)i * LOCKTABLE_ENTRY);
}
static inline rptr locktable_data(const struct locktable *lt, uint16_t node, uint32_t i)
{
    return rptr_add(locktable_line(lt, node, i), LOCK_LINE);
}

/* ---------------------------------------------------------------------------------------------
 * Waiting. lock_wait_change waits until the 64-bit word at w no longer holds v: it spins for a
 * microsecond or two, then sleeps in futex_wait with timeouts growing from 20 us to 128 us, so
 * that a local writer who calls lock_wake wakes it at once and a NIC writer (who cannot wake
 * anyone) is seen within the timeout. *sleeping (may be NULL) is set while it sleeps, so
 * writers can skip the wake-up syscall when nobody sleeps. Returns 0 or RDKV_ETIMEDOUT. */
int lock_wait_change(uint64_t *w, uint64_t v, uint32_t *sleeping, int64_t deadline);
void lock_wake(uint64_t *w, uint32_t *sleeping);
/* A short pause between polls that cannot be woken: spins first, then yields, then sleeps
 * 1 us .. 128 us (for pollers of words only a NIC writes). round counts up from 0. */
void lock_backoff(unsigned round);

#endif
