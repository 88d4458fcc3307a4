/* Unit tests of tasks (common/task.h): round-robin order, timers, parking with and without
 * deadlines, wakes from other threads (also ones that come before the park), waiters on plain
 * threads and in tasks, spawning from a task, the guard page (an overflow is SIGSEGV in a child
 * process), and the cost of a switch (printed, not asserted). */
#include "tests/harness.h"

#include "common/clock.h"
#include "common/task.h"
#include "rdkv_status.h"

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */

struct order {
    int log[64];
    int n;
};
struct order_arg {
    struct order *o;
    int id;
};

static void order_task(void *p)
{
    struct order_arg *a = p;
    for (int i = 0; i < 3; i++) {
        a->o->log[a->o->n++] = a->id;
        task_yield();
    }
}

/* Three tasks that yield run in turns: 1 2 3 1 2 3 1 2 3. */
static void t_round_robin(void)
{
    struct sched *s;
    REQUIRE(sched_create(&s) == 0);
    struct order o = {0};
    struct order_arg a[3];
    for (int i = 0; i < 3; i++) {
        a[i] = (struct order_arg){&o, i + 1};
        REQUIRE(task_spawn(s, order_task, &a[i], 0) == 0);
    }
    CHECK_EQ(sched_tasks(s), 3);
    CHECK(sched_self() == NULL && task_self() == NULL);
    sched_run(s);
    CHECK_EQ(sched_tasks(s), 0);
    CHECK_EQ(o.n, 9);
    for (int i = 0; i < 9 && i < o.n; i++) CHECK_EQ(o.log[i], i % 3 + 1);
    sched_destroy(s);
}

struct sleeper {
    int64_t ns;
    int64_t woke;
    int *rank;
    int my_rank;
    int64_t base; /* the wake time is base + ns: one base for all, so that their order does
                     not depend on when each task first ran (a preempted test thread: a loaded
                     sanitizer run once saw 3 ms sleepers wake before 1 ms ones) */
};

static void sleep_task(void *p)
{
    struct sleeper *z = p;
    task_sleep_until(z->base + z->ns);
    z->woke = clock_now_ns() - z->base;
    z->my_rank = (*z->rank)++;
}

/* Sleepers wake no earlier than asked, in the order of their wake times; the thread sleeps
 * meanwhile (the scheduler blocks: it does not spin). */
static void t_timers(void)
{
    struct sched *s;
    REQUIRE(sched_create(&s) == 0);
    int rank = 0;
    /* (20 ms ahead: a test thread preempted while it starts the four still finds every wake
     * time ahead, so each goes through the timers, not a yield) */
    int64_t base = clock_now_ns() + 20 * NS_PER_MS;
    struct sleeper z[4] = {{3 * NS_PER_MS, 0, &rank, 0, base}, {1 * NS_PER_MS, 0, &rank, 0, base},
                           {4 * NS_PER_MS, 0, &rank, 0, base}, {2 * NS_PER_MS, 0, &rank, 0, base}};
    for (int i = 0; i < 4; i++) REQUIRE(task_spawn(s, sleep_task, &z[i], 0) == 0);
    sched_run(s);
    for (int i = 0; i < 4; i++) CHECK(z[i].woke >= z[i].ns);
    CHECK_EQ(z[1].my_rank, 0);
    CHECK_EQ(z[3].my_rank, 1);
    CHECK_EQ(z[0].my_rank, 2);
    CHECK_EQ(z[2].my_rank, 3);
    CHECK(sched_stats(s)->idles >= 1);
    sched_destroy(s);
}

/* ------------------------------------------------------------------------------------------ */

struct pp {
    struct task *a, *b;
    int turn;
    int rounds;
    int bad;
};

static void ping(void *p)
{
    struct pp *x = p;
    x->a = task_self();
    for (int i = 0; i < x->rounds; i++) {
        while (x->turn != 0) task_park(0);
        x->turn = 1;
        if (x->b) task_wake(x->b);
    }
    while (x->turn != 0) task_park(0); /* pong's last wake is for a live task */
}
static void pong(void *p)
{
    struct pp *x = p;
    x->b = task_self();
    for (int i = 0; i < x->rounds; i++) {
        while (x->turn != 1) task_park(0);
        x->turn = 0;
        task_wake(x->a);
    }
}

/* Two tasks hand a turn back and forth with park/wake on one thread; a wake given before the
 * park is kept. */
static void t_park_wake(void)
{
    struct sched *s;
    REQUIRE(sched_create(&s) == 0);
    struct pp x = {.rounds = 1000};
    REQUIRE(task_spawn(s, ping, &x, 0) == 0);
    REQUIRE(task_spawn(s, pong, &x, 0) == 0);
    sched_run(s);
    CHECK_EQ(x.turn, 0);
    sched_destroy(s);
}

static void park_deadline(void *p)
{
    int *rc = p;
    int64_t t0 = clock_now_ns();
    rc[0] = task_park(t0 + 2 * NS_PER_MS);
    rc[1] = clock_now_ns() - t0 >= 2 * NS_PER_MS;
    task_wake(task_self()); /* a permit kept for the next park */
    rc[2] = task_park(clock_now_ns() + 10 * NS_PER_S);
    /* a wake taken without a park is gone: the next park waits for its deadline */
    task_wake(task_self());
    rc[3] = task_take_wake();
    rc[4] = task_take_wake();
    rc[5] = task_park(clock_now_ns() + 2 * NS_PER_MS);
}

static void t_park_deadline(void)
{
    struct sched *s;
    REQUIRE(sched_create(&s) == 0);
    int rc[6] = {1, 0, 1, 0, 1, 0};
    REQUIRE(task_spawn(s, park_deadline, rc, 0) == 0);
    sched_run(s);
    CHECK_EQ(rc[0], RDKV_ETIMEDOUT);
    CHECK_EQ(rc[1], 1);
    CHECK_EQ(rc[2], 0);
    CHECK_EQ(rc[3], 1);
    CHECK_EQ(rc[4], 0);
    CHECK_EQ(rc[5], RDKV_ETIMEDOUT);
    CHECK(!task_take_wake()); /* (outside a task: nothing to take) */
    sched_destroy(s);
}

/* ------------------------------------------------------------------------------------------ */
/* Wakes from other threads: N tasks each wait for M waiters woken by a helper thread. */

#define XW_TASKS 8
#define XW_ROUNDS 200

struct xw {
    pthread_mutex_t mu;
    struct waiter *slot[XW_TASKS]; /* a waiter posted for the helper to wake */
    int woken[XW_TASKS];
    int done;
};

static void xw_task(void *p)
{
    struct xw *x = ((void **)p)[0];
    int id = (int)(intptr_t)((void **)p)[1];
    for (int r = 0; r < XW_ROUNDS; r++) {
        struct waiter w;
        waiter_init(&w);
        pthread_mutex_lock(&x->mu);
        x->slot[id] = &w;
        pthread_mutex_unlock(&x->mu);
        if (waiter_wait(&w, clock_now_ns() + 20 * NS_PER_S) == 0) x->woken[id]++;
    }
    pthread_mutex_lock(&x->mu);
    x->done++;
    pthread_mutex_unlock(&x->mu);
}

static void *xw_helper(void *p)
{
    struct xw *x = p;
    for (;;) {
        pthread_mutex_lock(&x->mu);
        if (x->done == XW_TASKS) {
            pthread_mutex_unlock(&x->mu);
            return NULL;
        }
        for (int i = 0; i < XW_TASKS; i++)
            if (x->slot[i]) {
                waiter_wake(x->slot[i]);
                x->slot[i] = NULL;
            }
        pthread_mutex_unlock(&x->mu);
        sched_yield();
    }
}

static void t_cross_thread(void)
{
    struct sched *s;
    REQUIRE(sched_create(&s) == 0);
    static struct xw x;
    memset(&x, 0, sizeof x);
    pthread_mutex_init(&x.mu, NULL);
    void *args[XW_TASKS][2];
    for (int i = 0; i < XW_TASKS; i++) {
        args[i][0] = &x;
        args[i][1] = (void *)(intptr_t)i;
        REQUIRE(task_spawn(s, xw_task, args[i], 0) == 0);
    }
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, xw_helper, &x) == 0);
    sched_run(s);
    pthread_join(th, NULL);
    for (int i = 0; i < XW_TASKS; i++) CHECK_EQ(x.woken[i], XW_ROUNDS);
    fprintf(stderr, "  %" PRIu64 " remote wakes, %" PRIu64 " idles\n", sched_stats(s)->remote_wakes,
            sched_stats(s)->idles);
    pthread_mutex_destroy(&x.mu);
    sched_destroy(s);
}

/* A waiter on a plain thread: woken by another thread, and timing out. */
static void *wake_later(void *p)
{
    clock_sleep_ns(2 * NS_PER_MS);
    waiter_wake(p);
    return NULL;
}

static void t_waiter_thread(void)
{
    struct waiter w;
    waiter_init(&w);
    CHECK(w.task == NULL);
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, wake_later, &w) == 0);
    CHECK_EQ(waiter_wait(&w, clock_now_ns() + 20 * NS_PER_S), 0);
    pthread_join(th, NULL);
    struct waiter w2;
    waiter_init(&w2);
    int64_t t0 = clock_now_ns();
    CHECK_EQ(waiter_wait(&w2, t0 + 2 * NS_PER_MS), RDKV_ETIMEDOUT);
    CHECK(clock_now_ns() - t0 >= 2 * NS_PER_MS);
    waiter_wake(&w2); /* after the wait gave up: nothing happens */
    struct waiter w3;
    waiter_init(&w3);
    waiter_wake(&w3); /* before the wait: kept */
    CHECK_EQ(waiter_wait(&w3, 0), 0);
}

/* ------------------------------------------------------------------------------------------ */

static int spawned_ran;
static void child_task(void *p)
{
    (void)p;
    spawned_ran++;
}
static void parent_task(void *p)
{
    struct sched *s = p;
    for (int i = 0; i < 100; i++) task_spawn(s, child_task, NULL, TASK_STACK_MIN);
}

/* A task spawns more (small stacks); all run; stacks are reused. */
static void t_spawn_from_task(void)
{
    struct sched *s;
    REQUIRE(sched_create(&s) == 0);
    spawned_ran = 0;
    REQUIRE(task_spawn(s, parent_task, s, 0) == 0);
    sched_run(s);
    CHECK_EQ(spawned_ran, 100);
    for (int i = 0; i < 200; i++) REQUIRE(task_spawn(s, child_task, NULL, 0) == 0);
    sched_run(s);
    CHECK_EQ(spawned_ran, 300);
    sched_destroy(s);
}

/* ------------------------------------------------------------------------------------------ */

static volatile int sink;
static int recurse(int n)
{
    volatile char pad[1024];
    pad[0] = (char)n;
    sink = pad[0];
    return n ? recurse(n - 1) + pad[0] : 0;
}
static void overflow_task(void *p)
{
    (void)p;
    sink = recurse(1 << 20); /* far more than any stack */
}

/* A stack overflow hits the guard page: the process dies of SIGSEGV (in a child), it does not
 * write over anything. (Under ASan the child reports a stack overflow instead and exits
 * non-zero; either way it does not go on.) */
static void t_guard_page(void)
{
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        alarm(20);
        struct sched *s;
        if (sched_create(&s)) _exit(2);
        if (task_spawn(s, overflow_task, NULL, TASK_STACK_MIN)) _exit(2);
        sched_run(s);
        _exit(0); /* not reached */
    }
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    CHECK((WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV) || (WIFEXITED(st) && WEXITSTATUS(st) != 0 &&
                                                           WEXITSTATUS(st) != 2));
}

/* ------------------------------------------------------------------------------------------ */

static void switcher(void *p)
{
    int n = *(int *)p;
    for (int i = 0; i < n; i++) task_yield();
}

/* The cost of a switch: two tasks yielding to each other (each yield is a switch to the
 * scheduler and one to the next task). Printed for docs/tasks.md, not asserted. */
static void t_switch_cost(void)
{
    struct sched *s;
    REQUIRE(sched_create(&s) == 0);
    int n = 200000;
    REQUIRE(task_spawn(s, switcher, &n, 0) == 0);
    REQUIRE(task_spawn(s, switcher, &n, 0) == 0);
    int64_t t0 = clock_now_ns();
    sched_run(s);
    int64_t dt = clock_now_ns() - t0;
    uint64_t sw = sched_stats(s)->switches;
    CHECK(sw >= 2u * (uint64_t)n);
    fprintf(stderr, "  %" PRIu64 " task resumptions in %.1f ms: %.1f ns per yield-and-resume\n", sw,
            dt / 1e6, (double)dt / (double)sw);
    sched_destroy(s);
}

static const struct test_case cases[] = {
    {"round_robin", t_round_robin},     {"timers", t_timers},
    {"park_wake", t_park_wake},         {"park_deadline", t_park_deadline},
    {"cross_thread", t_cross_thread},   {"waiter_thread", t_waiter_thread},
    {"spawn_from_task", t_spawn_from_task}, {"guard_page", t_guard_page},
    {"switch_cost", t_switch_cost},
};

int main(int argc, char **argv)
{
    return test_main(argc - 1, argv + 1, cases, sizeof cases / sizeof cases[0]);
}
