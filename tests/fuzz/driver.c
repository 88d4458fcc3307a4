/* A bounded, deterministic fuzz driver for builds without libFuzzer: it feeds the target seed
 * inputs, then mutations of them (bit flips, byte changes, splices, length-field edits) from a
 * fixed-seed generator, under whatever sanitizers the build has. Prints "N passed, 0 failed"
 * when the target survived every input; a crash fails the test. usage: driver [iterations] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t s = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
}

/* Seeds: well-formed frames and configs, so mutations start from the interesting shapes. */
static const uint8_t seed_wire[] = {
    7,   24, 0, 0, 0, 1, 0, 0, 0, 0x52, 0x44, 0x4b, 0x56, 1, 0, 1, 0, 0xff, 0xff, 1, 0, 0, 0, 0, 0,
    1,   2,  3, 4, 5, 6, 7, 8, 32, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 8, 0, 0, 0, 0, 16, 0, 0, 0, 0,
    0,   0,  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 19, 0, 0, 0, 6, 0, 0, 0, 9, 0,
    0,   0,  0, 0, 0, 0, 65, 0, 0, 0, 0, 0, 0, 0, 'a', 'b', 'c', 0, 0, 0, 0, 5, 0, 0, 0};
static const char seed_cfg[] = "transport soft\narena 64M\nnode 0 127.0.0.1:7100\n"
                               "node 1 [::1]:7101\n# comment\nnode 2 host-2:7102\n";

int main(int argc, char **argv)
{
    unsigned long iters = argc > 1 ? strtoul(argv[1], NULL, 10) : 200000;
    uint8_t buf[4096];
    const uint8_t *seeds[2] = {seed_wire, (const uint8_t *)seed_cfg};
    size_t lens[2] = {sizeof seed_wire, sizeof seed_cfg - 1};
    for (int k = 0; k < 2; k++) LLVMFuzzerTestOneInput(seeds[k], lens[k]);
    for (unsigned long i = 0; i < iters; i++) {
        int k = (int)(rnd() % 2);
        size_t n = lens[k];
        memcpy(buf, seeds[k], n);
        unsigned muts = 1 + (unsigned)(rnd() % 8);
        for (unsigned m = 0; m < muts; m++) {
            size_t at = n ? rnd() % n : 0;
            switch (rnd() % 6) {
            case 0: buf[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
            case 1: buf[at] = (uint8_t)rnd(); break;
            case 2: buf[at] = (uint8_t[]){0, 0xff, 0x7f, 0x80, '\n', ':'}[rnd() % 6]; break;
            case 3: if (n > 1) n = 1 + rnd() % n; break;                           /* truncate */
            case 4: if (n + 64 < sizeof buf) { memset(buf + n, (int)rnd(), 64); n += 64; } break;
            case 5: if (at + 4 <= n) { uint32_t v = (uint32_t)rnd(); memcpy(buf + at, &v, 4); } break;
            }
        }
        LLVMFuzzerTestOneInput(buf, n);
    }
    printf("%lu passed, 0 failed\n", iters + 2);
    return 0;
}
