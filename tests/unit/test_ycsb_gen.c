/* Unit tests of the YCSB request generators (tools/kvbench/ycsb_gen.h): FNV byte order, key names,
 * and statistical checks on 2,000,000 draws with fixed seeds (tolerances hold with margin). */
#include "tests/harness.h"

#include "common/rng.h"
#include "rdkv_status.h"
#include "tools/kvbench/ycsb_gen.h"

#include <math.h>

enum { DRAWS = 2000000 };

static int cmp_u32_desc(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Least-squares slope of ln(count[r-1]) against ln(r) for r in [1, ranks]. */
static double loglog_slope(const uint32_t *count, unsigned ranks)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (unsigned r = 1; r <= ranks; r++) {
        double x = log((double)r), y = log((double)(count[r - 1] ? count[r - 1] : 1));
        sx += x;
        sy += y;
        sxx += x * x;
        sxy += x * y;
    }
    return (ranks * sxy - sx * sy) / (ranks * sxx - sx * sx);
}

static double zeta_sum(uint64_t n, double theta)
{
    double s = 0;
    for (uint64_t i = 1; i <= n; i++) s += 1.0 / pow((double)i, theta);
    return s;
}

static void t_fnvhash64(void)
{
    /* by hand: FNV-1a over the bytes of v, low byte first */
    const uint64_t basis = 0xCBF29CE484222325ull, prime = 1099511628211ull;
    uint64_t h0 = basis, h1 = basis;
    for (int i = 0; i < 8; i++) h0 *= prime; /* every byte of 0 is 0: xor does nothing */
    h1 = (h1 ^ 1) * prime;                   /* byte 0 of 1 is 1, the other seven are 0 */
    for (int i = 1; i < 8; i++) h1 *= prime;
    /* both are negative as Java longs, so Math.abs negates them */
    CHECK(h0 == 0xA8C7F832281A39C5ull && h1 == 0x89CD31291D2AEFA4ull);
    CHECK((h0 >> 63) == 1 && (h1 >> 63) == 1);
    h0 = (uint64_t)0 - h0;
    h1 = (uint64_t)0 - h1;
    CHECK(ycsb_fnvhash64(0) == h0);
    CHECK(ycsb_fnvhash64(1) == h1);
    CHECK(ycsb_fnvhash64(0) == 6284781860667377211ull);
    CHECK(ycsb_fnvhash64(1) == 8517097267634966620ull);
    CHECK(ycsb_fnvhash64(256) == 2056600594528442646ull);
    CHECK(ycsb_fnvhash64(12345) == 1792800413050876852ull);
    /* the byte order matters: 1 in the low byte and 1 in the high byte hash differently */
    CHECK(ycsb_fnvhash64(1) != ycsb_fnvhash64(1ull << 56));
    /* Math.abs: the result is never negative as a long (except Long.MIN_VALUE, not hit here) */
    uint64_t s = 7;
    for (int i = 0; i < 100000; i++) CHECK((ycsb_fnvhash64(rng_next(&s)) >> 63) == 0);
}

static void t_key_name(void)
{
    char buf[64];
    CHECK_EQ(ycsb_key_name(5, true, 1, buf, sizeof buf), 5);
    CHECK(!strcmp(buf, "user5"));
    CHECK_EQ(ycsb_key_name(5, true, 4, buf, sizeof buf), 8);
    CHECK(!strcmp(buf, "user0005"));
    CHECK_EQ(ycsb_key_name(12345, true, 3, buf, sizeof buf), 9); /* longer than the padding */
    CHECK(!strcmp(buf, "user12345"));
    CHECK_EQ(ycsb_key_name(0, false, 1, buf, sizeof buf), 23);
    CHECK(!strcmp(buf, "user6284781860667377211"));
    CHECK_EQ(ycsb_key_name(1, false, 22, buf, sizeof buf), 26);
    CHECK(!strcmp(buf, "user0008517097267634966620"));
    CHECK_EQ(ycsb_key_name(1, false, 1, buf, 23), RDKV_ETOOBIG); /* 23 chars need 24 bytes */
    CHECK_EQ(ycsb_key_name(1, false, 1, buf, 24), 23);
    CHECK_EQ(ycsb_key_name(0, true, 0, buf, 6), 5);
    CHECK(!strcmp(buf, "user0"));
}

static void t_uniform(void)
{
    struct ycsb_uniform g;
    CHECK_EQ(ycsb_uniform_init(&g, 5, 4), RDKV_EINVAL);
    REQUIRE(ycsb_uniform_init(&g, 10, 109) == 0);
    static uint32_t count[100];
    uint64_t s = 0x9E3779B97F4A7C15ull;
    bool in_range = true;
    for (int i = 0; i < DRAWS; i++) {
        uint64_t v = ycsb_uniform_next(&g, &s);
        if (v < 10 || v > 109) {
            in_range = false;
            continue;
        }
        count[v - 10]++;
    }
    CHECK(in_range);
    double expect = DRAWS / 100.0, chi2 = 0;
    for (int i = 0; i < 100; i++) chi2 += (count[i] - expect) * (count[i] - expect) / expect;
    /* 99 degrees of freedom: mean 99, sd 14; [40, 185] is beyond 4 sd on both sides */
    printf("  uniform chi2(99 df) = %.1f\n", chi2);
    CHECK(chi2 > 40 && chi2 < 185);
    /* the whole 64-bit range and a single value */
    CHECK_EQ(ycsb_uniform_init(&g, 0, UINT64_MAX), 0);
    (void)ycsb_uniform_next(&g, &s);
    CHECK_EQ(ycsb_uniform_init(&g, 42, 42), 0);
    CHECK_EQ(ycsb_uniform_next(&g, &s), 42);
}

static void t_zipfian(void)
{
    enum { N = 1000, BASE = 500 };
    struct ycsb_zipf g;
    CHECK_EQ(ycsb_zipf_init(&g, 10, 9, YCSB_ZIPFIAN_CONSTANT), RDKV_EINVAL);
    CHECK_EQ(ycsb_zipf_init(&g, 0, 9, 1.0), RDKV_EINVAL);
    REQUIRE(ycsb_zipf_init(&g, BASE, BASE + N - 1, YCSB_ZIPFIAN_CONSTANT) == 0);
    double zn = zeta_sum(N, 0.99);
    CHECK(fabs(g.zetan - zn) < 1e-9 * zn);
    CHECK(fabs(g.zeta2theta - (1 + pow(0.5, 0.99))) < 1e-12);
    CHECK(fabs(g.alpha - 100.0) < 1e-9);
    static uint32_t count[N];
    uint64_t s = 12345;
    bool in_range = true;
    for (int i = 0; i < DRAWS; i++) {
        uint64_t v = ycsb_zipf_next(&g, &s);
        if (v < BASE || v >= BASE + N) {
            in_range = false;
            continue;
        }
        count[v - BASE]++;
    }
    CHECK(in_range);
    double p0 = (double)count[0] / DRAWS, ratio = (double)count[0] / count[1];
    double slope = loglog_slope(count, 100);
    printf("  zipfian: item0 %.5f (1/zeta %.5f), f1/f2 %.4f (2^0.99 %.4f), slope(1..100) %.4f\n",
           p0, 1 / zn, ratio, pow(2, 0.99), slope);
    CHECK(fabs(p0 * zn - 1) < 0.01);              /* sd ~0.2% */
    CHECK(fabs(ratio / pow(2, 0.99) - 1) < 0.02); /* sd ~0.4% */
    CHECK(fabs(slope + 0.99) < 0.05);
    /* counts fall with the rank: every decade gets less than the one before */
    uint64_t d1 = 0, d2 = 0, d3 = 0;
    for (int i = 0; i < 10; i++) d1 += count[i];
    for (int i = 10; i < 100; i++) d2 += count[i];
    for (int i = 100; i < N; i++) d3 += count[i];
    CHECK(count[0] > count[1] && count[1] > count[2] && count[2] > count[5]);
    CHECK(d1 > 0 && d2 > 0 && d3 > 0 && count[N - 1] > 0);

    /* growing the item count: zetan is extended incrementally and matches a fresh sum */
    struct ycsb_zipf fresh;
    REQUIRE(ycsb_zipf_init(&fresh, BASE, BASE + 2 * N - 1, YCSB_ZIPFIAN_CONSTANT) == 0);
    uint64_t v = ycsb_zipf_next_n(&g, 2 * N, &s);
    CHECK(v >= BASE && v < BASE + 2 * N);
    CHECK_EQ(g.countforzeta, 2 * N);
    CHECK(fabs(g.zetan - fresh.zetan) < 1e-9 * fresh.zetan);
    uint64_t hi = 0;
    for (int i = 0; i < 200000; i++) {
        v = ycsb_zipf_next_n(&g, 2 * N, &s);
        if (v > hi) hi = v;
    }
    CHECK(hi >= BASE + N && hi < BASE + 2 * N); /* the new items are drawn too */
    /* a smaller count keeps the larger zetan (YCSB's allowitemcountdecrease=false) */
    (void)ycsb_zipf_next_n(&g, N, &s);
    CHECK_EQ(g.countforzeta, 2 * N);
}

static void t_scrambled(void)
{
    enum { N = 1000000, MIN = 1000 };
    struct ycsb_scrambled g;
    REQUIRE(ycsb_scrambled_init(&g, MIN, MIN + N - 1) == 0);
    CHECK(g.z.items == YCSB_SCRAMBLED_ITEM_COUNT + 1 && g.z.zetan == YCSB_SCRAMBLED_ZETAN);
    uint32_t *count = calloc(N, sizeof *count);
    REQUIRE(count);
    uint64_t s = 777;
    bool in_range = true;
    for (int i = 0; i < DRAWS; i++) {
        uint64_t v = ycsb_scrambled_next(&g, &s);
        if (v < MIN || v >= MIN + N) {
            in_range = false;
            continue;
        }
        count[v - MIN]++;
    }
    CHECK(in_range);
    /* the two most popular values are the hashes of ranks 0 and 1 */
    uint64_t top0 = ycsb_fnvhash64(0) % N, top1 = ycsb_fnvhash64(1) % N;
    for (unsigned i = 0; i < N; i++) {
        if (i != top0) CHECK(count[i] < count[top0]);
        if (i != top0 && i != top1) CHECK(count[i] < count[top1]);
    }
    /* the hot values are spread, not the low keys: ranks 0..9 land all over [MIN, MIN + N) */
    uint64_t lo = N, hi = 0;
    unsigned low_keys = 0;
    for (uint64_t r = 0; r < 10; r++) {
        uint64_t off = ycsb_fnvhash64(r) % N;
        if (off < lo) lo = off;
        if (off > hi) hi = off;
        if (off < N / 100) low_keys++;
    }
    CHECK(hi - lo > N / 2);
    CHECK(low_keys <= 1);
    unsigned low_draws = 0; /* the lowest 1% of keys get about 1% of draws, not most of them */
    for (unsigned i = 0; i < N / 100; i++) low_draws += count[i];
    CHECK(low_draws < DRAWS / 20);
    /* the popularity profile, sorted, still follows Zipf (rank 0 at 1/ZETAN) */
    qsort(count, N, sizeof *count, cmp_u32_desc);
    double p0 = (double)count[0] / DRAWS, ratio = (double)count[0] / count[1];
    double slope = loglog_slope(count, 50);
    printf("  scrambled: top %.5f (1/ZETAN %.5f), f1/f2 %.4f, sorted slope(1..50) %.4f\n", p0,
           1 / YCSB_SCRAMBLED_ZETAN, ratio, slope);
    CHECK(fabs(p0 * YCSB_SCRAMBLED_ZETAN - 1) < 0.02);
    CHECK(fabs(ratio / pow(2, 0.99) - 1) < 0.03);
    CHECK(fabs(slope + 0.99) < 0.06);
    free(count);
}

static void t_latest(void)
{
    enum { N0 = 100000, GROW = 1000 };
    struct ycsb_counter c;
    struct ycsb_latest g;
    ycsb_counter_init(&c, 0);
    CHECK_EQ(ycsb_latest_init(&g, &c), RDKV_EINVAL); /* nothing inserted */
    for (int i = 0; i < N0; i++) CHECK_EQ(ycsb_counter_next(&c), i);
    CHECK_EQ(ycsb_counter_last(&c), N0 - 1);
    REQUIRE(ycsb_latest_init(&g, &c) == 0);
    static uint32_t count[N0 + GROW];
    uint64_t s = 4242, max = ycsb_counter_last(&c);
    bool in_range = true;
    for (int i = 0; i < DRAWS; i++) {
        uint64_t v = ycsb_latest_next(&g, &s);
        if (v < 1 || v > max) {
            in_range = false;
            continue;
        }
        count[v]++;
    }
    CHECK(in_range);
    uint64_t newest = 0; /* the newest 1% of keys */
    for (uint64_t k = max - N0 / 100 + 1; k <= max; k++) newest += count[k];
    printf("  latest: newest 1%% get %.3f of draws, max gets %.4f\n", (double)newest / DRAWS,
           (double)count[max] / DRAWS);
    CHECK(newest > DRAWS / 4);
    for (uint64_t k = 1; k < max; k++) CHECK(count[k] < count[max]);
    CHECK(count[max] > count[max - 1] && count[max - 1] > count[max - 10]);

    /* inserts arrive: the new maximum becomes the most popular, the old one cools */
    for (int i = 0; i < GROW; i++) (void)ycsb_counter_next(&c);
    uint64_t max2 = ycsb_counter_last(&c);
    CHECK_EQ(max2, N0 + GROW - 1);
    memset(count, 0, sizeof count);
    for (int i = 0; i < DRAWS / 2; i++) {
        uint64_t v = ycsb_latest_next(&g, &s);
        if (v < 1 || v > max2) {
            in_range = false;
            continue;
        }
        count[v]++;
    }
    CHECK(in_range);
    CHECK_EQ(g.z.countforzeta, max2);
    struct ycsb_zipf fresh;
    REQUIRE(ycsb_zipf_init(&fresh, 0, max2 - 1, YCSB_ZIPFIAN_CONSTANT) == 0);
    CHECK(fabs(g.z.zetan - fresh.zetan) < 1e-9 * fresh.zetan);
    for (uint64_t k = 1; k < max2; k++) CHECK(count[k] < count[max2]);
    CHECK(count[max2] > 10 * (count[max] + 1));
}

static void t_hotspot(void)
{
    enum { N = 100000 };
    struct ycsb_hotspot g;
    CHECK_EQ(ycsb_hotspot_init(&g, 0, N - 1, 1.5, 0.8), RDKV_EINVAL);
    CHECK_EQ(ycsb_hotspot_init(&g, 0, N - 1, 0.2, -0.1), RDKV_EINVAL);
    REQUIRE(ycsb_hotspot_init(&g, 0, N - 1, YCSB_HOTSET_FRACTION, YCSB_HOTOPN_FRACTION) == 0);
    CHECK_EQ(g.hot, N / 5);
    uint64_t s = 99, hot = 0, first_half_of_hot = 0;
    bool in_range = true;
    for (int i = 0; i < DRAWS; i++) {
        uint64_t v = ycsb_hotspot_next(&g, &s);
        if (v >= N) in_range = false;
        if (v < N / 5) hot++;
        if (v < N / 10) first_half_of_hot++;
    }
    CHECK(in_range);
    double share = (double)hot / DRAWS;
    printf("  hotspot: hot set share %.4f (want 0.8)\n", share);
    CHECK(fabs(share - 0.8) < 0.01);
    CHECK(fabs((double)first_half_of_hot / hot - 0.5) < 0.01); /* uniform inside the hot set */
    /* an empty hot set sends every draw to the cold one */
    REQUIRE(ycsb_hotspot_init(&g, 10, 19, 0.0, 0.8) == 0);
    for (int i = 0; i < 1000; i++) {
        uint64_t v = ycsb_hotspot_next(&g, &s);
        CHECK(v >= 10 && v <= 19);
    }
}

static void t_opchooser(void)
{
    struct ycsb_opchooser c;
    CHECK_EQ(ycsb_opchooser_init(&c, 0, 0, 0, 0, 0), RDKV_EINVAL);
    CHECK_EQ(ycsb_opchooser_init(&c, 0.5, -0.5, 0, 0, 1), RDKV_EINVAL);
    CHECK_EQ(ycsb_opchooser_init(&c, NAN, 0, 0, 0, 1), RDKV_EINVAL);
    const double mixes[][YCSB_NOPS] = {
        {0.5, 0.5, 0, 0, 0},         /* A */
        {0.95, 0, 0.05, 0, 0},       /* D */
        {0, 0, 0.05, 0.95, 0},       /* E */
        {0.5, 0, 0, 0, 0.5},         /* F */
        {0.3, 0.25, 0.2, 0.15, 0.1}, /* all five */
    };
    uint64_t s = 31337;
    for (size_t m = 0; m < sizeof mixes / sizeof mixes[0]; m++) {
        const double *p = mixes[m];
        REQUIRE(ycsb_opchooser_init(&c, p[0], p[1], p[2], p[3], p[4]) == 0);
        uint64_t n[YCSB_NOPS] = {0};
        for (int i = 0; i < DRAWS / 4; i++) n[ycsb_opchooser_next(&c, &s)]++;
        for (int op = 0; op < YCSB_NOPS; op++) {
            if (p[op] == 0)
                CHECK_EQ(n[op], 0);
            else
                CHECK(fabs((double)n[op] / (DRAWS / 4) - p[op]) < 0.005); /* sd <= 0.0007 */
        }
    }
    /* proportions are normalised, as YCSB's DiscreteGenerator does */
    REQUIRE(ycsb_opchooser_init(&c, 3, 1, 0, 0, 0) == 0);
    CHECK(fabs(c.weight[YCSB_READ] - 0.75) < 1e-12);
    CHECK(!strcmp(ycsb_op_name(YCSB_RMW), "READ-MODIFY-WRITE"));
    CHECK(!strcmp(ycsb_op_name(YCSB_SCAN), "SCAN"));
}

/* One draw from each generator, folded into one value. */
static uint64_t draw_all(struct ycsb_zipf *z, struct ycsb_scrambled *sc, struct ycsb_latest *l,
                         const struct ycsb_uniform *u, const struct ycsb_hotspot *h,
                         const struct ycsb_opchooser *o, uint64_t *s)
{
    uint64_t x = ycsb_zipf_next(z, s);
    x = x * 31 + ycsb_scrambled_next(sc, s);
    x = x * 31 + ycsb_latest_next(l, s);
    x = x * 31 + ycsb_uniform_next(u, s);
    x = x * 31 + ycsb_hotspot_next(h, s);
    return x * 31 + (uint64_t)ycsb_opchooser_next(o, s);
}

static void t_determinism(void)
{
    struct ycsb_zipf z;
    struct ycsb_scrambled sc;
    struct ycsb_counter c;
    struct ycsb_latest l;
    struct ycsb_uniform u;
    struct ycsb_hotspot h;
    struct ycsb_opchooser o;
    REQUIRE(ycsb_zipf_init(&z, 0, 9999, YCSB_ZIPFIAN_CONSTANT) == 0);
    REQUIRE(ycsb_scrambled_init(&sc, 0, 9999) == 0);
    ycsb_counter_init(&c, 10000);
    REQUIRE(ycsb_latest_init(&l, &c) == 0);
    REQUIRE(ycsb_uniform_init(&u, 0, 9999) == 0);
    REQUIRE(ycsb_hotspot_init(&h, 0, 9999, 0.2, 0.8) == 0);
    REQUIRE(ycsb_opchooser_init(&o, 0.5, 0.5, 0, 0, 0) == 0);
    enum { K = 10000 };
    static uint64_t a[K];
    uint64_t s1 = 2024, s2 = 2024, s3 = 2025;
    unsigned same_other_seed = 0;
    for (int i = 0; i < K; i++) a[i] = draw_all(&z, &sc, &l, &u, &h, &o, &s1);
    for (int i = 0; i < K; i++) CHECK(draw_all(&z, &sc, &l, &u, &h, &o, &s2) == a[i]);
    for (int i = 0; i < K; i++) same_other_seed += draw_all(&z, &sc, &l, &u, &h, &o, &s3) == a[i];
    CHECK(same_other_seed < K / 10);
}

static const struct test_case cases[] = {
    {"fnvhash64", t_fnvhash64}, {"key_name", t_key_name},   {"uniform", t_uniform},
    {"zipfian", t_zipfian},     {"scrambled", t_scrambled}, {"latest", t_latest},
    {"hotspot", t_hotspot},     {"opchooser", t_opchooser}, {"determinism", t_determinism},
};

int main(int argc, char **argv)
{
    return test_main(argc - 1, argv + 1, cases, sizeof cases / sizeof cases[0]);
}
