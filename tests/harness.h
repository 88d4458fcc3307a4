/* A minimal test harness: CHECK records a failure and goes on, REQUIRE ends the test.
 * test_main runs every test (or those named on the command line), prints one line per test and
 * a closing "N passed, N failed (N skipped)" line, and exits non-zero if anything failed. Tests are bounded
 * by ctest's TIMEOUT, never by sleeps. */
#ifndef RDKV_TEST_HARNESS_H
#define RDKV_TEST_HARNESS_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int harness_failures; /* failures in the current test */
extern const char *harness_skip; /* set by SKIP: why the current test did not run */

/* Ends the current test as skipped (it counts neither as passed nor as failed). */
#define SKIP(why)                                                                                  \
    do {                                                                                           \
        harness_skip = (why);                                                                      \
        return;                                                                                    \
    } while (0)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "  %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);             \
            harness_failures++;                                                                    \
        }                                                                                          \
    } while (0)

#define CHECK_EQ(a, b)                                                                             \
    do {                                                                                           \
        long long va_ = (long long)(a), vb_ = (long long)(b);                                      \
        if (va_ != vb_) {                                                                          \
            fprintf(stderr, "  %s:%d: CHECK failed: %s == %s (%lld != %lld)\n", __FILE__,          \
                    __LINE__, #a, #b, va_, vb_);                                                   \
            harness_failures++;                                                                    \
        }                                                                                          \
    } while (0)

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "  %s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond);           \
            harness_failures++;                                                                    \
            return;                                                                                \
        }                                                                                          \
    } while (0)

struct test_case {
    const char *name;
    void (*fn)(void);
};

/* Runs the cases; argv may name cases to run (others are skipped) and may carry options the
 * caller already consumed (pass argc/argv after them). */
int test_main(int argc, char **argv, const struct test_case *cases, size_t n);

#endif
