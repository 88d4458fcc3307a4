/* Latency histograms: log-linear buckets (relative error under 1%) over the whole uint64 range,
 * cheap enough to keep one per thread and merge at the end. Never average per-thread percentiles:
 * merge the histograms and read the percentile of the merge. */
#ifndef RDKV_HIST_H
#define RDKV_HIST_H

#include <stdbool.h>
#include <stdint.h>

#define HIST_SUB_BITS 7
#define HIST_SUB (1u << HIST_SUB_BITS)   /* 128 exact values, then 64 buckets per power of two */
#define HIST_BUCKETS ((64 - HIST_SUB_BITS + 1) * (HIST_SUB / 2) + HIST_SUB / 2)

struct hist {
    uint64_t count;
    uint64_t min, max;
    long double sum;
    uint64_t b[HIST_BUCKETS];
};

void hist_init(struct hist *h);
void hist_record(struct hist *h, uint64_t v);
void hist_merge(struct hist *dst, const struct hist *src);
double hist_mean(const struct hist *h);
/* The value at percentile p (0 < p <= 100): the midpoint of the bucket holding that rank,
 * clamped to [min, max]. 0 for an empty histogram. */
uint64_t hist_percentile(const struct hist *h, double p);

/* Walks the non-empty buckets in increasing order: value (bucket midpoint) and the cumulative
 * fraction of samples at or below it. Returns false from fn to stop early. */
void hist_cdf(const struct hist *h, bool (*fn)(void *arg, uint64_t value, double cum), void *arg);

/* Bucket index of v and the range [lo, hi] of values it holds (exposed for tests). */
unsigned hist_index(uint64_t v);
void hist_bucket_range(unsigned idx, uint64_t *lo, uint64_t *hi);


/* Serialization for RPC replies: count, min, max, sum, then the non-empty buckets. */
struct pack_w;
struct pack_r;
void hist_pack(const struct hist *h, struct pack_w *w);
/* Returns false if the bytes do not describe a histogram. */
bool hist_unpack(struct hist *h, struct pack_r *r);

#endif
