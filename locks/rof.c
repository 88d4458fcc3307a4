/* Retry-on-fail (Chung and Zamanian, as the DSLR paper describes it): one 64-bit word, bit 63 =
 * exclusive, bits 0..31 = the number of shared holders. Exclusive is a CAS from 0, shared a
 * fetch-and-add that is undone if the exclusive bit was set; a failed attempt backs off and
 * retries until the deadline. Exclusive release subtracts its bit (readers' transient increments
 * survive it), shared release subtracts one. Every access goes through the fabric. */
#include "lock.h"

#include "common/clock.h"

#define ROF_X (1ull << 63)

/* foMPI's RW lock (fompi-rw) is the same word and the same atomics; as good as that design
 * gets, it reads the word until it looks free before it retries an atomic (test and
 * test-and-set), so waiters poll with READs instead of flooding the word with atomics that a
 * holder's release then queues behind. */
static bool looks_free(struct lock_thread *t, rptr line, enum lock_mode mode, int64_t deadline,
                       int64_t *b, uint64_t *seed, int *rc)
{
    for (;;) {
        uint64_t w;
        if ((*rc = fab_read(t->c, line, &w, 8))) return false;
        if (mode == LOCK_EXCLUSIVE ? w == 0 : !(w & ROF_X)) return true;
        if (deadline && clock_now_ns() >= deadline) return false;
        lock_retry_backoff(t, b, seed);
    }
}

static int rw_acquire(struct lock_handle *h, enum lock_mode mode, int64_t deadline, bool ttas)
{
    struct lock_thread *t = h->t;
    if (mode != LOCK_SHARED && mode != LOCK_EXCLUSIVE) return RDKV_ENOTSUP;
    int64_t b = t->cfg.spin_backoff_min_ns;
    uint64_t seed = (uint64_t)t->id * 0xD1B54A32D192ED03ull ^ (uint64_t)clock_now_ns();
    for (;;) {
        uint64_t old;
        int rc;
        if (mode == LOCK_EXCLUSIVE) {
            rc = fab_cas(t->c, h->line, 0, ROF_X, &old);
            if (rc) return rc;
            if (old == 0) break;
        } else {
            rc = fab_faa(t->c, h->line, 1, &old);
            if (rc) return rc;
            if (!(old & ROF_X)) break;
            rc = fab_faa(t->c, h->line, (uint64_t)-1, NULL); /* a writer holds it: undo */
            if (rc) return rc;
        }
        if (deadline && clock_now_ns() >= deadline) {
            t->stats.timeouts++;
            return RDKV_ETIMEDOUT;
        }
        lock_retry_backoff(t, &b, &seed);
        if (ttas && !looks_free(t, h->line, mode, deadline, &b, &seed, &rc)) {
            if (rc) return rc;
            t->stats.timeouts++;
            return RDKV_ETIMEDOUT;
        }
    }
    h->mode = (uint8_t)mode;
    h->granted_at = clock_now_ns();
    return 0;
}

static int rof_acquire(struct lock_handle *h, enum lock_mode mode, int64_t deadline)
{
    return rw_acquire(h, mode, deadline, false);
}

static int fompi_acquire(struct lock_handle *h, enum lock_mode mode, int64_t deadline)
{
    return rw_acquire(h, mode, deadline, true);
}

static int rof_release(struct lock_handle *h)
{
    if (!h->mode) return RDKV_EINVAL;
    uint64_t sub = h->mode == LOCK_EXCLUSIVE ? ROF_X : 1;
    h->mode = 0;
    return fab_faa(h->t->c, h->line, (uint64_t)0 - sub, NULL);
}

/* Someone holds it exclusively; the word cannot say who. */
static int rof_holds_x(struct fabric *f, rptr line, uint16_t holder, uint64_t token)
{
    (void)holder;
    (void)token;
    return (__atomic_load_n((uint64_t *)fab_local(f, line), __ATOMIC_SEQ_CST) & ROF_X) != 0;
}

const struct lock_algo lock_rof = {
    .id = LOCK_ID_ROF,
    .name = "rof",
    .holds_x = rof_holds_x,
    .movable = true,
    .modes = 1u << LOCK_SHARED | 1u << LOCK_EXCLUSIVE,
    .acquire = rof_acquire,
    .release = rof_release,
};

const struct lock_algo lock_fompi_rw = {
    .id = LOCK_ID_FOMPI_RW,
    .name = "fompi-rw",
    .holds_x = rof_holds_x,
    .movable = true,
    .modes = 1u << LOCK_SHARED | 1u << LOCK_EXCLUSIVE,
    .acquire = fompi_acquire,
    .release = rof_release,
};
