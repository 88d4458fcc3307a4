/* A small, fast pseudo-random generator (xorshift64) for back-off jitter, workload generators and
 * tests: not for anything that must be unpredictable. The state must not be 0. */
#ifndef RDKV_RNG_H
#define RDKV_RNG_H

#include <stdint.h>

static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* Uniform in [0, n), n > 0 (the modulo bias is below n / 2^64). */
static inline uint64_t rng_below(uint64_t *s, uint64_t n) { return rng_next(s) % n; }

/* Uniform in [0, 1). */
static inline double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1p-53; }

#endif
