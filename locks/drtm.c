/* DrTM's lock (Wei et al., SOSP'15), as the DSLR paper uses it as a baseline: one 64-bit word,
 * bit 63 = exclusive, bits 0..62 = the end of the latest shared lease (microseconds of real
 * time). Both modes take the lock with a CAS: shared extends the lease (and is never released:
 * the lease simply runs out), exclusive sets the bit once no lease is left, and is released with
 * one WRITE. Waiting is retry with back-off until the deadline. Leases compare real-time clocks
 * across nodes, so DrTM needs loosely synchronized clocks (DSLR does not). Every access goes
 * through the fabric, local locks included. */
#include "lock.h"

#include "common/clock.h"

#include <time.h>

#define DRTM_X (1ull << 63)

static uint64_t realtime_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000ull;
}

static int drtm_acquire(struct lock_handle *h, enum lock_mode mode, int64_t deadline)
{
    struct lock_thread *t = h->t;
    if (mode != LOCK_SHARED && mode != LOCK_EXCLUSIVE) return RDKV_ENOTSUP;
    uint64_t lease_us = (uint64_t)(t->cfg.drtm_lease_ns / NS_PER_US);
    int64_t b = t->cfg.spin_backoff_min_ns;
    uint64_t seed = (uint64_t)t->id * 0x9E3779B97F4A7C15ull ^ (uint64_t)clock_now_ns();
    uint64_t expect = 0; /* optimistic: a free word */
    for (;;) {
        uint64_t now = realtime_us(), want, got;
        if (mode == LOCK_EXCLUSIVE) {
            want = expect | DRTM_X;
        } else {
            uint64_t end = now + lease_us, cur = expect & ~DRTM_X;
            want = end > cur ? end : cur;
        }
        bool possible = !(expect & DRTM_X) &&
                        (mode == LOCK_SHARED || (expect & ~DRTM_X) < now); /* leases over */
        if (possible) {
            int rc = fab_cas(t->c, h->line, expect, want, &got);
            if (rc) return rc;
            if (got == expect) {
                h->mode = (uint8_t)mode;
                h->aux = expect; /* exclusive: the word to restore */
                h->granted_at = clock_now_ns();
                /* a shared holder owns the lock until its lease ends, and then not at all */
                h->lease_ns = mode == LOCK_SHARED ? t->cfg.drtm_lease_ns : 0;
                return 0;
            }
            expect = got;
            /* retry at once with what we learned -- within the deadline: under a stream of
             * readers each CAS may meet a lease extended by another */
            if (!(got & DRTM_X) && (mode == LOCK_SHARED || (got & ~DRTM_X) < realtime_us()) &&
                !(deadline && clock_now_ns() >= deadline))
                continue;
        } else {
            uint64_t v;
            int rc = fab_read(t->c, h->line, &v, 8);
            if (rc) return rc;
            expect = v;
        }
        if (deadline && clock_now_ns() >= deadline) {
            t->stats.timeouts++;
            return RDKV_ETIMEDOUT;
        }
        lock_retry_backoff(t, &b, &seed);
    }
}

static int drtm_release(struct lock_handle *h)
{
    if (!h->mode) return RDKV_EINVAL;
    struct lock_thread *t = h->t;
    int mode = h->mode;
    h->mode = 0;
    if (mode == LOCK_SHARED) {
        /* nothing to do: the lease ends by itself */
        if (clock_now_ns() - h->granted_at >= h->lease_ns) {
            t->stats.lease_expired++;
            return RDKV_ETIMEDOUT;
        }
        return 0;
    }
    uint64_t restore = h->aux & ~DRTM_X;
    return fab_write(t->c, h->line, &restore, 8);
}

/* Someone holds it exclusively; the word cannot say who. */
static int drtm_holds_x(struct fabric *f, rptr line, uint16_t holder, uint64_t token)
{
    (void)holder;
    (void)token;
    return (__atomic_load_n((uint64_t *)fab_local(f, line), __ATOMIC_SEQ_CST) & DRTM_X) != 0;
}

const struct lock_algo lock_drtm = {
    .id = LOCK_ID_DRTM,
    .name = "drtm",
    .holds_x = drtm_holds_x,
    .movable = true,
    .modes = 1u << LOCK_SHARED | 1u << LOCK_EXCLUSIVE,
    .acquire = drtm_acquire,
    .release = drtm_release,
};
