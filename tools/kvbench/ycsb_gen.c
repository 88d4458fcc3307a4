/* YCSB's request generators; see ycsb_gen.h. Formulas follow site.ycsb.generator line by line. */
#include "tools/kvbench/ycsb_gen.h"

#include "common/rng.h"
#include "rdkv_status.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define FNV_OFFSET_BASIS_64 0xCBF29CE484222325ull
#define FNV_PRIME_64 1099511628211ull

uint64_t ycsb_fnvhash64(uint64_t v)
{
    uint64_t h = FNV_OFFSET_BASIS_64;
    for (int i = 0; i < 8; i++) {
        h ^= v & 0xff;
        v >>= 8;
        h *= FNV_PRIME_64;
    }
    return (h >> 63) ? (uint64_t)0 - h : h; /* Math.abs on the signed value */
}

int ycsb_key_name(uint64_t keynum, bool ordered, unsigned zeropad, char *buf, size_t cap)
{
    char digits[24];
    int nd = snprintf(digits, sizeof digits, "%" PRIu64, ordered ? keynum : ycsb_fnvhash64(keynum));
    size_t fill = zeropad > (unsigned)nd ? zeropad - (unsigned)nd : 0;
    size_t len = 4 + fill + (size_t)nd;
    if (len + 1 > cap || len > (size_t)INT32_MAX) return RDKV_ETOOBIG;
    memcpy(buf, "user", 4);
    memset(buf + 4, '0', fill);
    memcpy(buf + 4 + fill, digits, (size_t)nd + 1);
    return (int)len;
}

int ycsb_uniform_init(struct ycsb_uniform *g, uint64_t lo, uint64_t hi)
{
    if (hi < lo) return RDKV_EINVAL;
    g->lo = lo;
    g->n = hi - lo + 1; /* wraps to 0 for the whole range */
    return 0;
}

uint64_t ycsb_uniform_next(const struct ycsb_uniform *g, uint64_t *rng)
{
    return g->lo + (g->n ? rng_below(rng, g->n) : rng_next(rng));
}

/* zeta(st, n, theta, initialsum): initialsum + sum over i in [st, n) of 1 / (i+1)^theta. */
static double zipf_zeta(uint64_t st, uint64_t n, double theta, double initialsum)
{
    double sum = initialsum;
    for (uint64_t i = st; i < n; i++) sum += 1.0 / pow((double)(i + 1), theta);
    return sum;
}

static double zipf_eta(const struct ycsb_zipf *g)
{
    return (1.0 - pow(2.0 / (double)g->items, 1.0 - g->theta)) / (1.0 - g->zeta2theta / g->zetan);
}

int ycsb_zipf_init_zetan(struct ycsb_zipf *g, uint64_t min, uint64_t max, double theta,
                         double zetan)
{
    if (max < min || max - min == UINT64_MAX) return RDKV_EINVAL;
    if (!(theta > 0.0 && theta < 1.0) || !(zetan >= 1.0) || !isfinite(zetan)) return RDKV_EINVAL;
    g->items = max - min + 1;
    g->base = min;
    g->theta = theta;
    g->zeta2theta = zipf_zeta(0, 2, theta, 0.0);
    g->alpha = 1.0 / (1.0 - theta);
    g->zetan = zetan;
    g->countforzeta = g->items;
    g->eta = zipf_eta(g);
    return 0;
}

int ycsb_zipf_init(struct ycsb_zipf *g, uint64_t min, uint64_t max, double theta)
{
    if (max < min || max - min == UINT64_MAX) return RDKV_EINVAL;
    if (!(theta > 0.0 && theta < 1.0)) return RDKV_EINVAL;
    return ycsb_zipf_init_zetan(g, min, max, theta, zipf_zeta(0, max - min + 1, theta, 0.0));
}

uint64_t ycsb_zipf_next_n(struct ycsb_zipf *g, uint64_t itemcount, uint64_t *rng)
{
    if (itemcount > g->countforzeta) {
        /* more items: extend zetan incrementally; YCSB keeps `items` (the init count) in eta */
        g->zetan = zipf_zeta(g->countforzeta, itemcount, g->theta, g->zetan);
        g->countforzeta = itemcount;
        g->eta = zipf_eta(g);
    }
    double u = rng_unit(rng);
    double uz = u * g->zetan;
    if (uz < 1.0) return g->base;
    if (uz < 1.0 + pow(0.5, g->theta)) return g->base + 1;
    return g->base + (uint64_t)((double)itemcount * pow(g->eta * u - g->eta + 1.0, g->alpha));
}

uint64_t ycsb_zipf_next(struct ycsb_zipf *g, uint64_t *rng)
{
    return ycsb_zipf_next_n(g, g->items, rng);
}

int ycsb_scrambled_init(struct ycsb_scrambled *g, uint64_t min, uint64_t max)
{
    if (max < min || max - min == UINT64_MAX) return RDKV_EINVAL;
    g->min = min;
    g->itemcount = max - min + 1;
    /* new ZipfianGenerator(0, ITEM_COUNT, 0.99, ZETAN) as in YCSB (so ITEM_COUNT + 1 items) */
    return ycsb_zipf_init_zetan(&g->z, 0, YCSB_SCRAMBLED_ITEM_COUNT, YCSB_ZIPFIAN_CONSTANT,
                                YCSB_SCRAMBLED_ZETAN);
}

uint64_t ycsb_scrambled_next(struct ycsb_scrambled *g, uint64_t *rng)
{
    return g->min + ycsb_fnvhash64(ycsb_zipf_next(&g->z, rng)) % g->itemcount;
}

void ycsb_counter_init(struct ycsb_counter *c, uint64_t start)
{
    c->next = start;
}
uint64_t ycsb_counter_next(struct ycsb_counter *c)
{
    return c->next++;
}
uint64_t ycsb_counter_last(const struct ycsb_counter *c)
{
    return c->next - 1;
}

int ycsb_latest_init(struct ycsb_latest *g, const struct ycsb_counter *basis)
{
    uint64_t last = ycsb_counter_last(basis);
    if (basis->next == 0 || last == 0) return RDKV_EINVAL;
    g->basis = basis;
    /* new ZipfianGenerator(basis.lastValue()): items [0, last) */
    return ycsb_zipf_init(&g->z, 0, last - 1, YCSB_ZIPFIAN_CONSTANT);
}

uint64_t ycsb_latest_next(struct ycsb_latest *g, uint64_t *rng)
{
    uint64_t max = ycsb_counter_last(g->basis);
    return max - ycsb_zipf_next_n(&g->z, max, rng);
}

int ycsb_hotspot_init(struct ycsb_hotspot *g, uint64_t lo, uint64_t hi, double hotset_fraction,
                      double hotopn_fraction)
{
    if (hi < lo || hi - lo == UINT64_MAX) return RDKV_EINVAL;
    if (!(hotset_fraction >= 0.0 && hotset_fraction <= 1.0)) return RDKV_EINVAL;
    if (!(hotopn_fraction >= 0.0 && hotopn_fraction <= 1.0)) return RDKV_EINVAL;
    uint64_t n = hi - lo + 1;
    g->lo = lo;
    g->hot = (uint64_t)((double)n * hotset_fraction);
    if (g->hot > n) g->hot = n;
    g->cold = n - g->hot;
    g->hotopn_fraction = hotopn_fraction;
    /* YCSB would divide by zero on an empty set; send every draw to the non-empty one instead */
    if (g->hot == 0) g->hotopn_fraction = 0.0;
    if (g->cold == 0) g->hotopn_fraction = 1.0;
    return 0;
}

uint64_t ycsb_hotspot_next(const struct ycsb_hotspot *g, uint64_t *rng)
{
    if (rng_unit(rng) < g->hotopn_fraction) return g->lo + rng_below(rng, g->hot);
    return g->lo + g->hot + rng_below(rng, g->cold);
}

int ycsb_opchooser_init(struct ycsb_opchooser *c, double read, double update, double insert,
                        double scan, double rmw)
{
    double w[YCSB_NOPS] = {read, update, insert, scan, rmw};
    double sum = 0.0;
    for (int i = 0; i < YCSB_NOPS; i++) {
        if (!(w[i] >= 0.0) || !isfinite(w[i])) return RDKV_EINVAL;
        sum += w[i];
    }
    if (!(sum > 0.0) || !isfinite(sum)) return RDKV_EINVAL;
    for (int i = 0; i < YCSB_NOPS; i++) {
        c->weight[i] = w[i] / sum;
        if (w[i] > 0.0) c->last_nonzero = (enum ycsb_op)i;
    }
    return 0;
}

enum ycsb_op ycsb_opchooser_next(const struct ycsb_opchooser *c, uint64_t *rng)
{
    double val = rng_unit(rng);
    for (int i = 0; i < YCSB_NOPS; i++) {
        if (c->weight[i] <= 0.0) continue; /* CoreWorkload only adds proportions > 0 */
        if (val < c->weight[i]) return (enum ycsb_op)i;
        val -= c->weight[i];
    }
    return c->last_nonzero; /* rounding left val just above the last weight */
}

const char *ycsb_op_name(enum ycsb_op op)
{
    static const char *const names[YCSB_NOPS] = {"READ", "UPDATE", "INSERT", "SCAN",
                                                 "READ-MODIFY-WRITE"};
    return (unsigned)op < YCSB_NOPS ? names[op] : "UNKNOWN";
}
