/* Internals shared by the queue locks (alock, mcs): the 64-byte descriptor every queue entry
 * uses, and the per-thread descriptor slab. Not for use outside locks/. */
#ifndef RDKV_LOCK_INTERNAL_H
#define RDKV_LOCK_INTERNAL_H

#include "lock.h"

/* A queue descriptor, in its owner's arena. budget is written once per enqueue by the
 * predecessor (a CPU store or a NIC WRITE, never a read-modify-write), next once by the
 * successor; the owner only reads them, with plain loads. */
struct lock_desc {
    int64_t budget;     /* @0: -1 waiting; >= 0 the lock was handed over */
    uint32_t sleeping;  /* @8: the owner sleeps in futex_wait (local wakers check it) */
    uint32_t pad0;
    uint64_t waker;     /* @16: the owner's task while it waits in lock_desc_wait (with
                         * LD_WAKING while a local waker wakes it), else 0 */
    uint64_t pad1;
    uint64_t next;      /* @32: rptr of the successor's descriptor, 0 if none yet */
    uint64_t pad2[3];
};
_Static_assert(sizeof(struct lock_desc) == LOCK_LINE, "a descriptor is one line");

#define DESC_BUDGET 0
#define DESC_NEXT 32

/* Waiting on one's own descriptor for a word (budget or next) that a queue neighbour changes
 * with a fabric WRITE. A neighbour on another node cannot wake anyone, so the owner looks again
 * now and then (as lock_wait_change does); a neighbour on this node calls lock_desc_wake once its
 * WRITE has completed, which wakes the owner's task or thread at once: a hand-over inside a node
 * costs a wake, not the rest of a nap. */
void lock_desc_wait(struct lock_desc *d, uint64_t *w, uint64_t v);
/* word: the rptr of the descriptor word just written (does nothing for another node's). */
void lock_desc_wake(struct lock_thread *t, rptr word);

int desc_get(struct lock_thread *t, unsigned *idx, rptr *r, struct lock_desc **d);
void desc_put(struct lock_thread *t, unsigned idx);
struct lock_desc *desc_at(struct lock_thread *t, unsigned idx);
rptr desc_rptr(const struct lock_thread *t, unsigned idx);

/* An atomic swap of the 64-bit word at w for v, with the old value in *prev: a CAS loop through
 * the fabric (verbs have no swap). */
int lock_swap(struct fab_ctx *c, rptr w, uint64_t v, uint64_t *prev);

static inline uint64_t ld64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void st64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

#endif
