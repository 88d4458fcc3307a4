/* Static segmentation (RangeThesis §3.1; seeds digest §1.5): a client-side range lock. The space
 * [0, 2^bits) is cut into 2^seg_bits equal segments, coordinate u in segment u >> (bits -
 * seg_bits), and each segment is one DSLR lock line in the space's region on the owner. A range
 * is locked by locking, in the requested mode, every segment that covers it: a superset of the
 * range, which is safe. Everything is one-sided (DSLR's fetch-and-add tickets and READ polls).
 *
 * No deadlock: segments are taken in ascending order, and each ticket is granted before the next
 * one is taken. The digest's hazard -- taking every ticket first, then waiting -- lets A hold the
 * head ticket of s1 while it waits on s2 and B the reverse; FIFO tickets cannot be overtaken, so
 * neither moves. Taken one at a time in a global order, a holder only ever waits for a segment
 * above all those it holds, so no cycle of waits can form.
 *
 * Failures: when a segment's acquire fails (the deadline, a lease reset, a fabric error), the
 * segments already held are released and the status returned; DSLR itself gives back a ticket
 * abandoned at the deadline when its turn comes, so nothing is left behind. Each segment has its
 * own DSLR lease, started at its grant; the first segment's runs while the later ones are waited
 * for, and a hold whose lease ran out may already have been reset by waiters, so an acquire that
 * finds one expired once it holds everything gives it all back and returns RDKV_EABORTED. */
#include "locks/range/range.h"


/* The segment of coordinate u. bits - seg_bits is 0..64 (64: one segment, seg_bits 0). */
static uint64_t seg_of(const struct range_space_cfg *c, uint64_t u)
{
    unsigned shift = c->bits - c->seg_bits;
    return shift >= 64 ? 0 : u >> shift;
}

static int segment_acquire(struct range_handle *h, enum lock_mode mode, int64_t deadline)
{
    int rc = range_words_check(h, mode);
    if (rc) return rc;
    uint64_t first = seg_of(&h->cfg, h->lo), last = seg_of(&h->cfg, h->hi);
    /* A handle keeps at most RANGE_MAX_WORDS segment locks: wider ranges are refused. */
    if (last - first >= RANGE_MAX_WORDS) return RDKV_EINVAL;
    /* Ascending, one grant at a time (see above). */
    rptr lines[RANGE_MAX_WORDS];
    uint8_t modes[RANGE_MAX_WORDS];
    unsigned n = 0;
    for (uint64_t s = first; s <= last; s++, n++) {
        lines[n] = range_seg_line(h, s);
        modes[n] = (uint8_t)mode;
    }
    rc = range_words_acquire(h, lines, modes, n, deadline);
    if (rc == 0) h->mode = (uint8_t)mode;
    return rc;
}

static int segment_release(struct range_handle *h)
{
    if (!h->mode) return RDKV_EINVAL;
    h->mode = 0;
    return range_words_release(h);
}

const struct range_algo range_segment = {
    .name = "segment",
    .server_side = false,
    .modes = 1u << LOCK_SHARED | 1u << LOCK_EXCLUSIVE,
    .acquire = segment_acquire,
    .release = segment_release,
};
