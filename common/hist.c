/* Log-linear histogram: values below HIST_SUB are exact; above, each power of two [2^k, 2^(k+1))
 * is split into HIST_SUB/2 equal buckets, so a bucket's width is at most 1/64 of its values. */
#include "hist.h"

#include "pack.h"

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

void hist_pack(const struct hist *h, struct pack_w *w)
{
    uint32_t nonempty = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) nonempty += h->b[i] != 0;
    pack_u64(w, h->count);
    pack_u64(w, h->min);
    pack_u64(w, h->max);
    pack_u64(w, (uint64_t)h->sum); /* whole nanoseconds are plenty */
    pack_u32(w, nonempty);
    for (unsigned i = 0; i < HIST_BUCKETS; i++)
        if (h->b[i]) {
            pack_u16(w, (uint16_t)i);
            pack_u64(w, h->b[i]);
        }
}

bool hist_unpack(struct hist *h, struct pack_r *r)
{
    hist_init(h);
    h->count = unpack_u64(r);
    h->min = unpack_u64(r);
    h->max = unpack_u64(r);
    h->sum = (long double)unpack_u64(r);
    uint32_t n = unpack_u32(r);
    if (n > HIST_BUCKETS) return false;
    uint64_t total = 0;
    for (uint32_t k = 0; k < n && !r->err; k++) {
        uint16_t i = unpack_u16(r);
        uint64_t c = unpack_u64(r);
        if (i >= HIST_BUCKETS) return false;
        h->b[i] += c;
        total += c;
    }
    if (r->err || total != h->count) return false;
    if (!h->count) h->min = UINT64_MAX;
    return true;
}
