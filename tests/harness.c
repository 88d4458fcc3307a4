/* Test harness runner. */
#include "harness.h"

#include "common/clock.h"

int harness_failures;
const char *harness_skip;

int test_main(int argc, char **argv, const struct test_case *cases, size_t n)
{
    int passed = 0, failed = 0, skipped = 0;
    for (size_t i = 0; i < n; i++) {
        bool selected = argc <= 0;
        for (int a = 0; a < argc; a++)
            if (!strcmp(argv[a], cases[i].name)) selected = true;
        if (!selected) continue;
        harness_failures = 0;
        harness_skip = NULL;
        int64_t t0 = clock_now_ns();
        fprintf(stderr, "RUN  %s\n", cases[i].name);
        cases[i].fn();
        double ms = (double)(clock_now_ns() - t0) / 1e6;
        if (harness_skip && !harness_failures) {
            skipped++;
            fprintf(stderr, "SKIP %s (%s)\n", cases[i].name, harness_skip);
        } else if (harness_failures) {
            failed++;
            fprintf(stderr, "FAIL %s (%d checks failed, %.0f ms)\n", cases[i].name,
                    harness_failures, ms);
        } else {
            passed++;
            fprintf(stderr, "PASS %s (%.0f ms)\n", cases[i].name, ms);
        }
    }
    if (skipped) printf("%d passed, %d failed (%d skipped)\n", passed, failed, skipped);
    else printf("%d passed, %d failed\n", passed, failed);
    fflush(stdout);
    if (passed + failed + skipped == 0) {
        fprintf(stderr, "no test matched\n");
        return 1;
    }
    return failed ? 1 : 0;
}
