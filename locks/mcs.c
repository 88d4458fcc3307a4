/* The RDMA MCS lock (ALock paper's baseline), which is also D-MCS (the HPDC'16 paper's
 * topology-oblivious distributed MCS, registered a second time as "dmcs"): an MCS queue whose
 * tail is one 64-bit word in the lock line. It already has the digest's two fixes to D-MCS's
 * listings (its own descriptor is initialised and fenced before the enqueue; the hand-off goes
 * to the successor it read). Every access to shared state -- the tail and other threads' descriptors -- goes
 * through the fabric, local locks included (loopback); the tail sees only NIC atomics. Like any
 * MCS lock it waits on its own descriptor (in its own arena, written by its predecessor's NIC
 * WRITE), so waiters never spin across the network. The enqueue is a CAS loop (no swap in
 * verbs); the release first looks at its own descriptor and skips the CAS when a successor has
 * already linked in. */
#include "lock_internal.h"

#include "common/fence.h"

static int mcs_acquire(struct lock_handle *h, enum lock_mode mode, int64_t deadline)
{
    (void)deadline; /* a queue lock has no abort path: see docs/locks.md */
    if (mode != LOCK_EXCLUSIVE) return RDKV_ENOTSUP;
    struct lock_thread *t = h->t;
    unsigned idx;
    rptr me;
    struct lock_desc *d;
    int rc = desc_get(t, &idx, &me, &d);
    if (rc) return rc;
    __atomic_store_n(&d->budget, -1, __ATOMIC_RELAXED);
    __atomic_store_n(&d->next, 0, __ATOMIC_RELAXED);
    full_fence();
    uint64_t prev;
    if ((rc = lock_swap(t->c, h->line, me, &prev))) goto fail;
    if (prev) {
        uint64_t mine = me;
        rc = fab_write(t->c, rptr_add(prev, DESC_NEXT), &mine, 8);
        if (rc) goto fail;
        lock_desc_wake(t, rptr_add(prev, DESC_NEXT)); /* a releaser may wait for the link */
        lock_desc_wait(d, (uint64_t *)&d->budget, (uint64_t)-1);
    }
    h->desc = (uint16_t)idx;
    h->mode = LOCK_EXCLUSIVE;
    return 0;
fail:
    desc_put(t, idx);
    return rc;
}

static int mcs_release(struct lock_handle *h)
{
    if (h->mode != LOCK_EXCLUSIVE) return RDKV_EINVAL;
    struct lock_thread *t = h->t;
    struct lock_desc *d = desc_at(t, h->desc);
    rptr me = desc_rptr(t, h->desc);
    int rc = 0;
    uint64_t next = ld64(&d->next);
    if (!next) {
        uint64_t cur;
        rc = fab_cas(t->c, h->line, me, 0, &cur);
        if (rc || cur == me) goto out;
        lock_desc_wait(d, &d->next, 0);
        next = ld64(&d->next);
    }
    int64_t granted = 1;
    rc = fab_write(t->c, rptr_add(next, DESC_BUDGET), &granted, 8);
    if (!rc) lock_desc_wake(t, rptr_add(next, DESC_BUDGET));
out:
    desc_put(t, h->desc);
    h->mode = 0;
    return rc;
}

const struct lock_algo lock_mcs = {
    .id = LOCK_ID_MCS,
    .name = "mcs",
    .modes = 1u << LOCK_EXCLUSIVE,
    .uses_descriptors = true,
    .queue_wait = true,
    .acquire = mcs_acquire,
    .release = mcs_release,
};

/* D-MCS under the name its paper gives it (docs/rma-locks.md). */
const struct lock_algo lock_dmcs = {
    .id = LOCK_ID_DMCS,
    .name = "dmcs",
    .modes = 1u << LOCK_EXCLUSIVE,
    .uses_descriptors = true,
    .queue_wait = true,
    .acquire = mcs_acquire,
    .release = mcs_release,
};
