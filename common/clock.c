/* Sleeping and CPU-time helpers. */
#include "clock.h"

#include <errno.h>
#include <stdlib.h>

static bool (*sleeper)(int64_t ns);

void clock_set_sleeper(bool (*fn)(int64_t ns)) { __atomic_store_n(&sleeper, fn, __ATOMIC_RELEASE); }

void clock_sleep_ns(int64_t ns)
{
    if (ns <= 0) return;
    bool (*fn)(int64_t) = __atomic_load_n(&sleeper, __ATOMIC_ACQUIRE);
    if (fn && fn(ns)) return; /* a task sleeps; its thread runs the others */
    struct timespec ts = clock_ts(ns), rem;
    while (nanosleep(&ts, &rem) != 0 && errno == EINTR) ts = rem;
}

int64_t clock_process_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

uint64_t clock_wall_us(void)
{
    static int64_t fixed = -1; /* (the test hook, read once) */
    int64_t f = __atomic_load_n(&fixed, __ATOMIC_RELAXED);
    if (f < 0) {
        const char *v = getenv("RDKV_TEST_WALL_US");
        f = v && *v ? (int64_t)strtoull(v, NULL, 10) : 0;
        __atomic_store_n(&fixed, f, __ATOMIC_RELAXED);
    }
    if (f > 0) return (uint64_t)f;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int clock_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    int rc = pthread_condattr_init(&ca);
    if (rc) return rc;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    rc = pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
    return rc;
}
