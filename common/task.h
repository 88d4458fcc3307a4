/* Tasks: stackful coroutines, many per thread, so that one thread keeps many operations in
 * flight. A thread runs a scheduler over its tasks (sched_run); a task that waits -- for a
 * fabric completion, a lock's turn, a timer, a wake from another thread -- switches to the next
 * runnable task, and the thread blocks in the kernel only when none can run: in its idle hook
 * (the fabric's io_uring wait) or on the scheduler's eventfd. Outside a task the same waiting
 * helpers (waiter_*, task_sleep_ns) block the calling thread, so code below the scheduler runs
 * unchanged on plain threads. Switches use Boost.Context's fcontext; stacks have a guard page
 * (an overflow is a clean SIGSEGV); ASan and TSan are told of every switch. A task must never
 * block in the kernel nor hold a pthread mutex across a wait. docs/tasks.md. */
#ifndef RDKV_TASK_H
#define RDKV_TASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sched;
struct task;

#define TASK_STACK_DEFAULT (256u << 10) /* bytes; pages are touched only as used */
#define TASK_STACK_MIN (16u << 10)

/* How the thread waits when no task can run, and what ends a round. The fabric installs these
 * for the context the thread's tasks share (rdma/fabric.h, fab_ctx_attach). */
struct sched_hooks {
    /* Makes progress without blocking (wait_ns == 0), or blocks until an event or wait_ns
     * nanoseconds pass (wait_ns > 0), or until an event (wait_ns < 0). It must also return when
     * the scheduler's eventfd (sched_wake_fd) becomes readable: other threads' wakes. */
    void (*idle)(void *arg, int64_t wait_ns);
    /* After every round (each runnable task ran once): send what the tasks posted. */
    void (*round)(void *arg);
    void *arg;
};

/* A scheduler for the calling thread (it runs there only). */
int sched_create(struct sched **out);
/* Frees it; every task must have finished. */
void sched_destroy(struct sched *s);
void sched_set_hooks(struct sched *s, const struct sched_hooks *h);
/* The eventfd other threads' wakes write to, for an idle hook that waits on something else
 * (readable: call sched_wake_fd_drained after reading it). */
int sched_wake_fd(const struct sched *s);

/* Starts fn(arg) as a task of s with a stack of stack_size bytes (0: TASK_STACK_DEFAULT). It runs
 * when s runs. May be called from a task of s, or by s's thread before or between sched_run.
 * Returns 0 or RDKV_ENOMEM. */
int task_spawn(struct sched *s, void (*fn)(void *), void *arg, size_t stack_size);
/* Runs the tasks until every one has finished. Returns 0. */
int sched_run(struct sched *s);
/* Tasks of s not finished yet. */
unsigned sched_tasks(const struct sched *s);

/* The scheduler running on this thread (NULL outside sched_run) and the running task (NULL
 * outside a task). */
struct sched *sched_self(void);
struct task *task_self(void);
static inline bool task_running(void) { return task_self() != NULL; }

/* Lets the thread's other runnable tasks run once, then continues. Outside a task: sched_yield. */
void task_yield(void);
/* Sleeps until the clock_now_ns() value t (a task: the others run meanwhile; a thread:
 * nanosleep). */
void task_sleep_until(int64_t t);
void task_sleep_ns(int64_t ns);

/* Parking a task until another party wakes it. A wake given before the park is kept (one
 * permit), so "check, then park" loses no wake-up. task_park returns 0 when woken, RDKV_ETIMEDOUT
 * at the deadline (a clock_now_ns() value; 0: none). task_wake may be called from any thread, on a
 * task that has not returned yet: the waker must be done with it before the task returns (e.g. both
 * hold the same mutex), after which a queued wake is dropped and the task still freed. */
int task_park(int64_t deadline);
void task_wake(struct task *t);
/* Takes the calling task's pending wake, if any, without waiting: true if there was one. For a
 * wait that ended without the park its waker meant, so that the wake reaches no later park. */
bool task_take_wake(void);

/* A waiter: one party waits, any thread wakes it. It works in a task (the task parks) and on a
 * plain thread (a futex). waiter_init binds it to the caller; waiter_wait returns 0 once woken
 * (also when the wake came first) or RDKV_ETIMEDOUT at the deadline (0: none), after which a
 * wake does nothing. A waker never touches the waiter after waiter_wait returned, so the waiter
 * may live on the waiting party's stack; the waker must only know it has not been freed before
 * the wait began (the caller's protocol: typically it is found under the caller's own lock). */
struct waiter {
    struct task *task;
    uint32_t state;
};
void waiter_init(struct waiter *w);
int waiter_wait(struct waiter *w, int64_t deadline);
void waiter_wake(struct waiter *w);

/* Per-task values, like thread-specific data: a module takes a key once (task_key_create, at
 * most TASK_KEYS per process; -1 when none is left) and keeps one pointer per task under it;
 * dtor (may be NULL) is called with a non-NULL value when its task returns, still in the task.
 * task_get returns NULL outside a task and for a task that set nothing. */
#define TASK_KEYS 8
int task_key_create(void (*dtor)(void *));
void *task_get(int key);
void task_set(int key, void *v);

/* What a scheduler did: for benchmarks (switches per operation) and tests. */
struct sched_stats {
    uint64_t switches; /* task resumptions */
    uint64_t rounds;
    uint64_t idles;    /* idle-hook calls that were allowed to block */
    uint64_t remote_wakes;
};
const struct sched_stats *sched_stats(const struct sched *s);

#endif
