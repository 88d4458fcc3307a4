/* Sleeping and CPU-time helpers. */
#include "clock.h"

#include "task.h"

#include <errno.h>

void clock_sleep_ns(int64_t ns)
{
    if (ns <= 0) return;
    if (task_running()) { /* a task sleeps; its thread runs the others */
        task_sleep_ns(ns);
        return;
    }
    struct timespec ts = clock_ts(ns), rem;
    while (nanosleep(&ts, &rem) != 0 && errno == EINTR) ts = rem;
}

int64_t clock_process_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}
