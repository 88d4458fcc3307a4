/* Clocks: monotonic nanoseconds for deadlines and latency, and sleeping helpers.
 * Every deadline in rdkv is an absolute clock_now_ns() value; 0 means "none". */
#ifndef RDKV_CLOCK_H
#define RDKV_CLOCK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define NS_PER_US 1000LL
#define NS_PER_MS 1000000LL
#define NS_PER_S 1000000000LL

static inline int64_t clock_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

/* The wall clock (CLOCK_REALTIME) in microseconds since 1970: for values that should grow across
 * restarts of a process (incarnations), never for deadlines, and never trusted alone: a clock
 * can be set back. Test hook: with RDKV_TEST_WALL_US=V in the environment it reads V, as a clock
 * set back to the same value at every start would. */
uint64_t clock_wall_us(void);

static inline struct timespec clock_ts(int64_t ns)
{
    struct timespec ts = {.tv_sec = ns / NS_PER_S, .tv_nsec = ns % NS_PER_S};
    return ts;
}

/* Sleeps for ns nanoseconds (restarting after signals); in a task, only the task sleeps. */
void clock_sleep_ns(int64_t ns);
/* How a layer above sleeps its own kind of waiter instead of the thread: fn sleeps ns and
 * returns true, or returns false when the caller is not one of its waiters. The task scheduler
 * sets it (common/task.c), so that a task's clock_sleep_ns parks the task alone. */
void clock_set_sleeper(bool (*fn)(int64_t ns));

/* Initialises cv for waits on the monotonic clock: pthread_cond_timedwait(cv, mu,
 * &(struct timespec){clock_ts(deadline)}) with a clock_now_ns() deadline. 0 or an errno. */
int clock_cond_init(pthread_cond_t *cv);

/* CPU time (user + system) consumed so far by the whole process, in nanoseconds. */
int64_t clock_process_cpu_ns(void);

#endif
