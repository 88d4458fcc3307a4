/* YCSB's request generators (site.ycsb.generator) in plain C: uniform, Zipfian, scrambled Zipfian,
 * latest, hotspot, the operation chooser and CoreWorkload's key names. Pure and single-threaded:
 * each generator is a small struct, every draw takes the caller's xorshift state (common/rng.h). */
#ifndef RDKV_YCSB_GEN_H
#define RDKV_YCSB_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define YCSB_ZIPFIAN_CONSTANT 0.99 /* ZipfianGenerator.ZIPFIAN_CONSTANT (theta) */
/* ScrambledZipfianGenerator: ranks over ITEM_COUNT items; ZETAN is their zeta at theta 0.99. */
#define YCSB_SCRAMBLED_ITEM_COUNT 10000000000ull
#define YCSB_SCRAMBLED_ZETAN 26.46902820178302
#define YCSB_HOTSET_FRACTION 0.2 /* CoreWorkload hotspotdatafraction */
#define YCSB_HOTOPN_FRACTION 0.8 /* CoreWorkload hotspotopnfraction */

/* Utils.fnvhash64: FNV-1a over the 8 bytes of v, low byte first, then Math.abs. (Java leaves
 * Long.MIN_VALUE negative; here that one hash is 2^63.) */
uint64_t ycsb_fnvhash64(uint64_t v);

/* CoreWorkload.buildKeyName: "user" + (ordered ? keynum : fnvhash64(keynum)) in decimal,
 * left-padded with zeros to zeropad digits (YCSB's default zeropadding is 1). Returns the length
 * written (without the NUL) or RDKV_ETOOBIG if buf (cap bytes) cannot hold it. */
int ycsb_key_name(uint64_t keynum, bool ordered, unsigned zeropad, char *buf, size_t cap);

/* UniformLongGenerator: uniform over [lo, hi]. */
struct ycsb_uniform {
    uint64_t lo, n; /* n = hi - lo + 1; 0 means the whole 2^64 range */
};
int ycsb_uniform_init(struct ycsb_uniform *g, uint64_t lo,
                      uint64_t hi); /* RDKV_EINVAL if hi < lo */
uint64_t ycsb_uniform_next(const struct ycsb_uniform *g, uint64_t *rng);

/* ZipfianGenerator over [min, max] (Gray et al., SIGMOD 1994): rank 0 (= min) is the most popular.
 */
struct ycsb_zipf {
    uint64_t base, items;  /* items = max - min + 1, fixed at init */
    uint64_t countforzeta; /* the item count zetan covers */
    double theta, alpha, zeta2theta, zetan, eta;
};
/* Computes zeta(items, theta) with a loop over the items (O(items), as YCSB does). theta in (0, 1).
 */
int ycsb_zipf_init(struct ycsb_zipf *g, uint64_t min, uint64_t max, double theta);
/* The same with a known zetan for [min, max] (skips the O(items) sum). */
int ycsb_zipf_init_zetan(struct ycsb_zipf *g, uint64_t min, uint64_t max, double theta,
                         double zetan);
/* nextValue(): a draw over the init-time item count. */
uint64_t ycsb_zipf_next(struct ycsb_zipf *g, uint64_t *rng);
/* nextLong(itemcount): a draw over base + [0, itemcount). A larger count than before extends zetan
 * incrementally (like YCSB, eta keeps the init-time item count in its 2/items term); a smaller one
 * keeps the current zetan (YCSB's allowitemcountdecrease=false). */
uint64_t ycsb_zipf_next_n(struct ycsb_zipf *g, uint64_t itemcount, uint64_t *rng);

/* ScrambledZipfianGenerator over [min, max]: a Zipfian rank over YCSB_SCRAMBLED_ITEM_COUNT items,
 * returned as min + fnvhash64(rank) % (max - min + 1), so the hot keys are scattered. */
struct ycsb_scrambled {
    struct ycsb_zipf z;
    uint64_t min, itemcount;
};
int ycsb_scrambled_init(struct ycsb_scrambled *g, uint64_t min, uint64_t max);
uint64_t ycsb_scrambled_next(struct ycsb_scrambled *g, uint64_t *rng);

/* A plain insert counter (CounterGenerator without acknowledgement): next() hands out start,
 * start+1,
 * ...; last() is the highest value handed out (start - 1 before the first). */
struct ycsb_counter {
    uint64_t next;
};
void ycsb_counter_init(struct ycsb_counter *c, uint64_t start);
uint64_t ycsb_counter_next(struct ycsb_counter *c);
uint64_t ycsb_counter_last(const struct ycsb_counter *c);

/* SkewedLatestGenerator: max - zipfian.nextLong(max), where max is the counter's last value read at
 * each draw, so the newest keys are the hottest. Draws lie in [1, max] (YCSB never returns 0 here).
 * RDKV_EINVAL at init unless the counter's last value is >= 1. */
struct ycsb_latest {
    const struct ycsb_counter *basis;
    struct ycsb_zipf z;
};
int ycsb_latest_init(struct ycsb_latest *g, const struct ycsb_counter *basis);
uint64_t ycsb_latest_next(struct ycsb_latest *g, uint64_t *rng);

/* HotspotIntegerGenerator over [lo, hi]: the first (int)(n * hotset_fraction) items get
 * hotopn_fraction of the draws, uniformly; the rest get the others. Fractions in [0, 1]. */
struct ycsb_hotspot {
    uint64_t lo, hot, cold; /* hot + cold = hi - lo + 1 */
    double hotopn_fraction;
};
int ycsb_hotspot_init(struct ycsb_hotspot *g, uint64_t lo, uint64_t hi, double hotset_fraction,
                      double hotopn_fraction);
uint64_t ycsb_hotspot_next(const struct ycsb_hotspot *g, uint64_t *rng);

/* CoreWorkload's operation chooser (DiscreteGenerator): proportions are normalised by their sum,
 * as YCSB does; RDKV_EINVAL if one is negative or not finite, or all are 0. */
enum ycsb_op { YCSB_READ, YCSB_UPDATE, YCSB_INSERT, YCSB_SCAN, YCSB_RMW, YCSB_NOPS };
struct ycsb_opchooser {
    double weight[YCSB_NOPS]; /* normalised */
    enum ycsb_op last_nonzero;
};
int ycsb_opchooser_init(struct ycsb_opchooser *c, double read, double update, double insert,
                        double scan, double rmw);
enum ycsb_op ycsb_opchooser_next(const struct ycsb_opchooser *c, uint64_t *rng);
const char *
ycsb_op_name(enum ycsb_op op); /* "READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE" */

#endif
