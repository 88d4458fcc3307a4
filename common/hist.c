/* Log-linear histogram: values below HIST_SUB are exact; above, each power of two [2^k, 2^(k+1))
 * is split into HIST_SUB/2 equal buckets, so a bucket's width is at most 1/64 of its values. */
#include "hist.h"

#include <string.h>

void hist_init(struct hist *h)
{
    memset(h, 0, sizeof *h);
    h->min = UINT64_MAX;
}

unsigned hist_index(uint64_t v)
{
    if (v < HIST_SUB) return (unsigned)v;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);        /* >= HIST_SUB_BITS */
    unsigned shift = msb - (HIST_SUB_BITS - 1);                /* >= 1 */
    unsigned sub = (unsigned)(v >> shift);                     /* in [HIST_SUB/2, HIST_SUB) */
    return HIST_SUB + (shift - 1) * (HIST_SUB / 2) + (sub - HIST_SUB / 2);
}

void hist_bucket_range(unsigned idx, uint64_t *lo, uint64_t *hi)
{
    if (idx < HIST_SUB) {
        *lo = *hi = idx;
        return;
    }
    unsigned k = idx - HIST_SUB;
    unsigned shift = k / (HIST_SUB / 2) + 1;
    uint64_t sub = k % (HIST_SUB / 2) + HIST_SUB / 2;
    *lo = sub << shift;
    *hi = *lo + ((1ull << shift) - 1);
}

void hist_record(struct hist *h, uint64_t v)
{
    h->b[hist_index(v)]++;
    h->count++;
    h->sum += (long double)v;
    if (v < h->min) h->min = v;
    if (v > h->max) h->max = v;
}

void hist_merge(struct hist *dst, const struct hist *src)
{
    if (!src->count) return;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) dst->b[i] += src->b[i];
    dst->count += src->count;
    dst->sum += src->sum;
    if (src->min < dst->min) dst->min = src->min;
    if (src->max > dst->max) dst->max = src->max;
}

double hist_mean(const struct hist *h)
{
    return h->count ? (double)(h->sum / (long double)h->count) : 0.0;
}

static uint64_t bucket_mid(unsigned idx, const struct hist *h)
{
    uint64_t lo, hi;
    hist_bucket_range(idx, &lo, &hi);
    uint64_t mid = lo + (hi - lo) / 2;
    if (mid < h->min) mid = h->min;
    if (mid > h->max) mid = h->max;
    return mid;
}

uint64_t hist_percentile(const struct hist *h, double p)
{
    if (!h->count) return 0;
    if (p <= 0) return h->min;
    if (p >= 100) return h->max;
    /* rank = ceil(p/100 * count), at least 1 */
    long double r = (long double)p / 100.0L * (long double)h->count;
    uint64_t rank = (uint64_t)r;
    if ((long double)rank < r) rank++;
    if (rank == 0) rank = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        seen += h->b[i];
        if (seen >= rank) return bucket_mid(i, h);
    }
    return h->max;
}

void hist_cdf(const struct hist *h, bool (*fn)(void *arg, uint64_t value, double cum), void *arg)
{
    if (!h->count) return;
    uint64_t seen = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        if (!h->b[i]) continue;
        seen += h->b[i];
        if (!fn(arg, bucket_mid(i, h), (double)seen / (double)h->count)) return;
    }
}
