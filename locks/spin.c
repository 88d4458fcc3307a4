/* The RDMA spinlock (ALock paper's baseline): one 64-bit word, taken with a NIC CAS from 0 to the
 * holder's id and released with a NIC WRITE of 0. Every access goes through the fabric, local
 * locks included (loopback), so NIC atomics are the only RMWs on the word. Between failed CASes it
 * backs off exponentially with jitter (1 us .. 64 us by default): without that, waiters would
 * flood the lock's NIC with atomics and slow the holder's release. */
#include "lock.h"

#include "common/clock.h"

#include <stdlib.h>

static int spin_acquire(struct lock_handle *h, enum lock_mode mode, int64_t deadline)
{
    if (mode != LOCK_EXCLUSIVE) return RDKV_ENOTSUP;
    struct lock_thread *t = h->t;
    int64_t backoff = t->cfg.spin_backoff_min_ns;
    uint64_t seed = (uint64_t)t->id * 0x9E3779B97F4A7C15ull ^ (uint64_t)clock_now_ns();
    for (;;) {
        uint64_t old;
        int rc = fab_cas(t->c, h->line, 0, t->id, &old);
        if (rc) return rc;
        if (old == 0) {
            h->mode = LOCK_EXCLUSIVE;
            h->aux = t->id; /* the hold's name: what the word holds */
            return 0;
        }
        int64_t now = clock_now_ns();
        if (deadline && now >= deadline) return RDKV_ETIMEDOUT;
        lock_retry_backoff(t, &backoff, &seed);
    }
}

static int spin_release(struct lock_handle *h)
{
    if (h->mode != LOCK_EXCLUSIVE) return RDKV_EINVAL;
    uint64_t zero = 0;
    h->mode = 0;
    return fab_write(h->t->c, h->line, &zero, 8);
}

static int spin_holds_x(struct fabric *f, rptr line, uint16_t holder, uint64_t token)
{
    (void)holder;
    return __atomic_load_n((uint64_t *)fab_local(f, line), __ATOMIC_SEQ_CST) == token;
}

const struct lock_algo lock_spin = {
    .id = LOCK_ID_SPIN,
    .name = "spin",
    .holds_x = spin_holds_x,
    .movable = true,
    .modes = 1u << LOCK_EXCLUSIVE,
    .uses_descriptors = false,
    .acquire = spin_acquire,
    .release = spin_release,
};
