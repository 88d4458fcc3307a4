/* Tasks (task.h): the scheduler, stacks, switches, timers and wakes. */
#include "task.h"

#include "clock.h"
#include "rdkv_status.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define TASK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TASK_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define TASK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TASK_TSAN 1
#endif
#endif
#ifdef TASK_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef TASK_TSAN
#include <sanitizer/tsan_interface.h>
#endif

/* Boost.Context's fcontext (libboost-context-dev): C linkage, declared here because its header
 * is C++. make_fcontext prepares a stack to start fn on; jump_fcontext saves the current context
 * and resumes `to`, passing data; it returns when something jumps back, with that context. */
typedef void *fcontext_t;
typedef struct {
    fcontext_t fctx;
    void *data;
} transfer_t;
extern transfer_t jump_fcontext(fcontext_t const to, void *vp);
extern fcontext_t make_fcontext(void *sp, size_t size, void (*fn)(transfer_t));

enum tstate { T_READY, T_RUNNING, T_PARKED, T_SLEEPING, T_DONE };

struct task {
    struct sched *s;
    fcontext_t ctx;            /* where it is suspended */
    void (*fn)(void *);
    void *arg;
    uint8_t *map;              /* guard page, then the stack */
    size_t map_size;
    struct task *next;         /* ready queue */
    struct task *inbox_next;   /* the scheduler's inbox of other threads' wakes */
    atomic_uint permit;        /* a wake not consumed by a park yet */
    atomic_uint queued;        /* in the inbox */
    int state;
    bool timed_out;
    int64_t wake_at;
    unsigned heap_at;          /* index in the timer heap, UINT_MAX when not there */
    void *keys[TASK_KEYS];     /* task_get/task_set */
#ifdef TASK_ASAN
    void *fake_stack;
#endif
#ifdef TASK_TSAN
    void *fiber;
#endif
};

#define STACK_CACHE 64
#define TIMER_SLACK_NS (100 * NS_PER_US) /* how late a sleeping thread may wake for a timer */

struct sched {
    fcontext_t main_ctx;
    struct task *cur;
    struct task *rq_head, *rq_tail;
    unsigned nready;
    struct task **heap;        /* timers: a min-heap on wake_at */
    unsigned nheap, heapcap;
    _Atomic(struct task *) inbox;
    atomic_int sleeping;       /* the thread may be blocked: wakes must write the eventfd */
    int efd;
    unsigned ntasks;
    struct sched_hooks hooks;
    struct sched_stats st;
    uint8_t *stacks[STACK_CACHE]; /* free default-size stacks */
    unsigned nstacks;
#ifdef TASK_ASAN
    void *main_fake;
    const void *main_bottom;
    size_t main_size;
#endif
#ifdef TASK_TSAN
    void *main_fiber;
#endif
};

static __thread struct sched *tls_sched;
static __thread struct task *tls_task;

struct sched *sched_self(void) { return tls_sched; }
struct task *task_self(void) { return tls_task; }
const struct sched_stats *sched_stats(const struct sched *s) { return &s->st; }
unsigned sched_tasks(const struct sched *s) { return s->ntasks; }
int sched_wake_fd(const struct sched *s) { return s->efd; }

static size_t page_size(void)
{
    static size_t pg; /* (threads may race to set it: to the same value) */
    size_t p = __atomic_load_n(&pg, __ATOMIC_RELAXED);
    if (!p) {
        p = (size_t)sysconf(_SC_PAGESIZE);
        __atomic_store_n(&pg, p, __ATOMIC_RELAXED);
    }
    return p;
}

/* ------------------------------------------------------------------------------------------ */
/* Stacks: [guard page | stack], the guard PROT_NONE so an overflow faults. */

static size_t map_size_for(size_t stack)
{
    size_t pg = page_size();
    if (stack < TASK_STACK_MIN) stack = TASK_STACK_MIN;
    return ((stack + pg - 1) / pg) * pg + pg;
}

static uint8_t *stack_get(struct sched *s, size_t map_size)
{
    if (map_size == map_size_for(TASK_STACK_DEFAULT) && s->nstacks) return s->stacks[--s->nstacks];
    void *m = mmap(NULL, map_size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED) return NULL;
    if (mprotect(m, page_size(), PROT_NONE)) {
        munmap(m, map_size);
        return NULL;
    }
    return m;
}

/* A task's last frames never return (it jumps away when done), so ASan leaves their redzones
 * poisoned. stack_put clears them before the stack is cached or unmapped; otherwise the stale
 * shadow covers whatever the kernel maps there next (an io_uring ring, say) and ASan reports a
 * stack-buffer-underflow in code that never touched a stack. */
static void stack_put(struct sched *s, uint8_t *m, size_t map_size)
{
#ifdef TASK_ASAN
    __asan_unpoison_memory_region(m + page_size(), map_size - page_size());
#endif
    if (map_size == map_size_for(TASK_STACK_DEFAULT) && s->nstacks < STACK_CACHE) {
        s->stacks[s->nstacks++] = m;
        return;
    }
    munmap(m, map_size);
}

/* ------------------------------------------------------------------------------------------ */
/* The scheduler's queues */

static void rq_push(struct sched *s, struct task *t)
{
    t->state = T_READY;
    t->next = NULL;
    if (s->rq_tail) s->rq_tail->next = t;
    else s->rq_head = t;
    s->rq_tail = t;
    s->nready++;
}

static struct task *rq_pop(struct sched *s)
{
    struct task *t = s->rq_head;
    if (!t) return NULL;
    s->rq_head = t->next;
    if (!s->rq_head) s->rq_tail = NULL;
    s->nready--;
    return t;
}

static void heap_swap(struct sched *s, unsigned a, unsigned b)
{
    struct task *x = s->heap[a];
    s->heap[a] = s->heap[b];
    s->heap[b] = x;
    s->heap[a]->heap_at = a;
    s->heap[b]->heap_at = b;
}

static void heap_up(struct sched *s, unsigned i)
{
    while (i > 0) {
        unsigned p = (i - 1) / 2;
        if (s->heap[p]->wake_at <= s->heap[i]->wake_at) break;
        heap_swap(s, i, p);
        i = p;
    }
}

static void heap_down(struct sched *s, unsigned i)
{
    for (;;) {
        unsigned l = 2 * i + 1, r = l + 1, m = i;
        if (l < s->nheap && s->heap[l]->wake_at < s->heap[m]->wake_at) m = l;
        if (r < s->nheap && s->heap[r]->wake_at < s->heap[m]->wake_at) m = r;
        if (m == i) return;
        heap_swap(s, i, m);
        i = m;
    }
}

/* Returns false when out of memory (the caller then waits without a timer: it polls). */
static bool heap_add(struct sched *s, struct task *t, int64_t at)
{
    if (s->nheap == s->heapcap) {
        unsigned ncap = s->heapcap ? 2 * s->heapcap : 16;
        struct task **nh = realloc(s->heap, ncap * sizeof *nh);
        if (!nh) return false;
        s->heap = nh;
        s->heapcap = ncap;
    }
    t->wake_at = at;
    t->heap_at = s->nheap;
    s->heap[s->nheap++] = t;
    heap_up(s, t->heap_at);
    return true;
}

static void heap_remove(struct sched *s, struct task *t)
{
    unsigned i = t->heap_at;
    if (i == UINT_MAX) return;
    t->heap_at = UINT_MAX;
    s->nheap--;
    if (i == s->nheap) return;
    s->heap[i] = s->heap[s->nheap];
    s->heap[i]->heap_at = i;
    heap_up(s, i);
    heap_down(s, s->heap[i]->heap_at);
}

static void fire_timers(struct sched *s, int64_t now)
{
    while (s->nheap && s->heap[0]->wake_at <= now) {
        struct task *t = s->heap[0];
        heap_remove(s, t);
        t->timed_out = true;
        rq_push(s, t);
    }
}

/* Other threads' wakes: ready the parked tasks that got a permit. */
static void drain_inbox(struct sched *s)
{
    struct task *t = atomic_exchange(&s->inbox, NULL);
    while (t) {
        struct task *n = t->inbox_next;
        atomic_store(&t->queued, 0);
        if (t->state == T_DONE) { /* finished while its wake was on the way: free it now */
            free(t);
        } else if (t->state == T_PARKED && atomic_load(&t->permit)) {
            heap_remove(s, t);
            rq_push(s, t);
        }
        t = n;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Switching */

/* A finished task's stack goes back at once; its record too, unless another thread's wake put it
 * in the inbox (the waker was done with it before the task ended: the caller's protocol), in
 * which case drain_inbox frees it when it takes it out. */
static void task_free(struct sched *s, struct task *t)
{
#ifdef TASK_TSAN
    __tsan_destroy_fiber(t->fiber);
#endif
    stack_put(s, t->map, t->map_size);
    s->ntasks--;
    if (!atomic_load(&t->queued)) free(t);
}

/* Scheduler -> task, until it suspends again. */
static void resume(struct sched *s, struct task *t)
{
    s->cur = t;
    t->state = T_RUNNING;
    tls_task = t;
    s->st.switches++;
#ifdef TASK_ASAN
    __sanitizer_start_switch_fiber(&s->main_fake, t->map + page_size(), t->map_size - page_size());
#endif
#ifdef TASK_TSAN
    __tsan_switch_to_fiber(t->fiber, 0);
#endif
    transfer_t r = jump_fcontext(t->ctx, t);
#ifdef TASK_ASAN
    __sanitizer_finish_switch_fiber(s->main_fake, NULL, NULL);
#endif
    t->ctx = r.fctx;
    tls_task = NULL;
    s->cur = NULL;
    if (t->state == T_DONE) task_free(s, t);
}

/* Task -> scheduler; returns when the task is resumed. */
static void suspend(struct task *t)
{
    struct sched *s = t->s;
#ifdef TASK_ASAN
    __sanitizer_start_switch_fiber(t->state == T_DONE ? NULL : &t->fake_stack, s->main_bottom,
                                   s->main_size);
#endif
#ifdef TASK_TSAN
    __tsan_switch_to_fiber(s->main_fiber, 0);
#endif
    transfer_t r = jump_fcontext(s->main_ctx, NULL);
    s->main_ctx = r.fctx;
#ifdef TASK_ASAN
    __sanitizer_finish_switch_fiber(t->fake_stack, NULL, NULL);
#endif
}

static void keys_gone(struct task *t);

static void task_entry(transfer_t tr)
{
    struct task *t = tr.data;
    t->s->main_ctx = tr.fctx;
#ifdef TASK_ASAN
    __sanitizer_finish_switch_fiber(NULL, &t->s->main_bottom, &t->s->main_size);
#endif
    t->fn(t->arg);
    keys_gone(t);
    t->state = T_DONE;
    suspend(t); /* never resumed */
    abort();
}

/* ------------------------------------------------------------------------------------------ */

/* clock_sleep_ns in a task (clock_set_sleeper) */
static bool sleep_task(int64_t ns)
{
    if (!tls_task) return false;
    task_sleep_ns(ns);
    return true;
}

int sched_create(struct sched **out)
{
    clock_set_sleeper(sleep_task); /* (before any task of this scheduler can run) */
    struct sched *s = calloc(1, sizeof *s);
    if (!s) return RDKV_ENOMEM;
    s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->efd < 0) {
        free(s);
        return RDKV_ENOMEM;
    }
    atomic_init(&s->inbox, NULL);
    atomic_init(&s->sleeping, 0);
    *out = s;
    return 0;
}

void sched_destroy(struct sched *s)
{
    if (!s) return;
    drain_inbox(s); /* finished tasks whose last wake is still queued */
    while (s->nstacks) munmap(s->stacks[--s->nstacks], map_size_for(TASK_STACK_DEFAULT));
    free(s->heap);
    close(s->efd);
    free(s);
}

void sched_set_hooks(struct sched *s, const struct sched_hooks *h)
{
    if (h) s->hooks = *h;
    else memset(&s->hooks, 0, sizeof s->hooks);
}

int task_spawn(struct sched *s, void (*fn)(void *), void *arg, size_t stack_size)
{
    struct task *t = calloc(1, sizeof *t);
    if (!t) return RDKV_ENOMEM;
    t->map_size = map_size_for(stack_size ? stack_size : TASK_STACK_DEFAULT);
    t->map = stack_get(s, t->map_size);
    if (!t->map) {
        free(t);
        return RDKV_ENOMEM;
    }
    t->s = s;
    t->fn = fn;
    t->arg = arg;
    t->heap_at = UINT_MAX;
    atomic_init(&t->permit, 0);
    atomic_init(&t->queued, 0);
    t->ctx = make_fcontext(t->map + t->map_size, t->map_size - page_size(), task_entry);
#ifdef TASK_TSAN
    t->fiber = __tsan_create_fiber(0);
#endif
    s->ntasks++;
    rq_push(s, t);
    return 0;
}

/* Blocks the thread until a wake, a timer, or an event of the idle hook. */
static void sched_idle(struct sched *s, int64_t wait_ns)
{
    s->st.idles++;
    if (s->hooks.idle) {
        s->hooks.idle(s->hooks.arg, wait_ns);
        return;
    }
    struct pollfd p = {.fd = s->efd, .events = POLLIN};
    struct timespec ts = clock_ts(wait_ns > 0 ? wait_ns : 0);
    if (ppoll(&p, 1, wait_ns >= 0 ? &ts : NULL, NULL) > 0) {
        uint64_t v;
        while (read(s->efd, &v, sizeof v) < 0 && errno == EINTR) {
        }
    }
}

int sched_run(struct sched *s)
{
    struct sched *outer = tls_sched;
    tls_sched = s;
#ifdef TASK_TSAN
    s->main_fiber = __tsan_get_current_fiber();
#endif
    for (;;) {
        drain_inbox(s);
        if (s->nheap) fire_timers(s, clock_now_ns());
        if (!s->rq_head) {
            if (!s->ntasks) break;
            int64_t wait = -1;
            if (s->nheap) {
                wait = s->heap[0]->wake_at - clock_now_ns();
                if (wait <= 0) continue;
                /* timer slack: the timers due a little later fire in the same round, and what
                 * their tasks post leaves together (lock waiters' naps end at scattered times) */
                wait += TIMER_SLACK_NS;
            }
            atomic_store(&s->sleeping, 1);
            if (atomic_load(&s->inbox)) {
                atomic_store(&s->sleeping, 0);
                continue;
            }
            sched_idle(s, wait);
            atomic_store(&s->sleeping, 0);
            continue;
        }
        /* a round: the tasks ready now run once each; those they ready run next round */
        for (unsigned n = s->nready; n && s->rq_head; n--) resume(s, rq_pop(s));
        s->st.rounds++;
        if (s->hooks.round) s->hooks.round(s->hooks.arg);
        if (s->hooks.idle) s->hooks.idle(s->hooks.arg, 0); /* completions ready their tasks */
    }
    tls_sched = outer;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Per-task values */

static atomic_int nkeys;
static void (*key_dtors[TASK_KEYS])(void *);

int task_key_create(void (*dtor)(void *))
{
    int k = atomic_fetch_add(&nkeys, 1);
    if (k >= TASK_KEYS) return -1;
    key_dtors[k] = dtor; /* (before anyone can use k: its creator publishes it) */
    return k;
}

/* A task is returning: its keys' destructors run (in the task). */
static void keys_gone(struct task *t)
{
    for (int k = 0; k < TASK_KEYS; k++) {
        void *v = t->keys[k];
        t->keys[k] = NULL;
        if (v && key_dtors[k]) key_dtors[k](v);
    }
}

void *task_get(int key)
{
    struct task *t = tls_task;
    return t && key >= 0 && key < TASK_KEYS ? t->keys[key] : NULL;
}

void task_set(int key, void *v)
{
    struct task *t = tls_task;
    if (t && key >= 0 && key < TASK_KEYS) t->keys[key] = v;
}

/* ------------------------------------------------------------------------------------------ */
/* Waiting */

void task_yield(void)
{
    struct task *t = tls_task;
    if (!t) {
        sched_yield();
        return;
    }
    rq_push(t->s, t);
    suspend(t);
}

void task_sleep_until(int64_t at)
{
    struct task *t = tls_task;
    if (!t) {
        clock_sleep_ns(at - clock_now_ns());
        return;
    }
    if (at <= clock_now_ns()) {
        task_yield();
        return;
    }
    if (!heap_add(t->s, t, at)) {
        task_yield();
        return;
    }
    t->state = T_SLEEPING;
    suspend(t);
}

void task_sleep_ns(int64_t ns) { task_sleep_until(clock_now_ns() + (ns > 0 ? ns : 0)); }

int task_park(int64_t deadline)
{
    struct task *t = tls_task;
    if (!t) return RDKV_EINVAL;
    if (atomic_exchange(&t->permit, 0)) return 0;
    t->timed_out = false;
    if (deadline && !heap_add(t->s, t, deadline)) {
        /* no room for a timer: come back next round and report a spurious timeout check */
        task_yield();
        if (atomic_exchange(&t->permit, 0)) return 0;
        return clock_now_ns() >= deadline ? RDKV_ETIMEDOUT : 0;
    }
    t->state = T_PARKED;
    suspend(t);
    if (atomic_exchange(&t->permit, 0)) return 0;
    return t->timed_out ? RDKV_ETIMEDOUT : 0;
}

bool task_take_wake(void)
{
    struct task *t = tls_task;
    return t && atomic_exchange(&t->permit, 0);
}

void task_wake(struct task *t)
{
    if (atomic_exchange(&t->permit, 1)) return; /* a pending wake will ready it */
    struct sched *s = t->s;
    if (tls_sched == s) {
        if (t->state == T_PARKED) {
            heap_remove(s, t);
            rq_push(s, t);
        }
        return;
    }
    __atomic_fetch_add(&s->st.remote_wakes, 1, __ATOMIC_RELAXED); /* (wakers of many threads) */
    if (!atomic_exchange(&t->queued, 1)) {
        struct task *head = atomic_load(&s->inbox);
        do t->inbox_next = head;
        while (!atomic_compare_exchange_weak(&s->inbox, &head, t));
    }
    if (atomic_load(&s->sleeping)) {
        uint64_t one = 1;
        while (write(s->efd, &one, sizeof one) < 0 && errno == EINTR) {
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Waiters: a task parks, a thread sleeps on a futex. */

static long futex(uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}

/* state: 0 waiting, 1 woken, 2 a waker is waking it, 3 the wait gave up. A waker claims the
 * waiter (0 -> 2) before it touches the task and lets go (-> 1) after: the waiter returns only
 * at 1 or after it gave up (0 -> 3, which no waker can claim), so no waker ever touches a task
 * or a waiter that has moved on. */
#define W_WAITING 0
#define W_WOKEN 1
#define W_WAKING 2
#define W_GAVE_UP 3

void waiter_init(struct waiter *w)
{
    w->task = tls_task;
    __atomic_store_n(&w->state, W_WAITING, __ATOMIC_RELEASE);
}

int waiter_wait(struct waiter *w, int64_t deadline)
{
    for (;;) {
        uint32_t st = __atomic_load_n(&w->state, __ATOMIC_ACQUIRE);
        if (st == W_WOKEN) return 0;
        int64_t now = clock_now_ns();
        if (st == W_WAITING && deadline && now >= deadline) {
            uint32_t z = W_WAITING;
            if (__atomic_compare_exchange_n(&w->state, &z, W_GAVE_UP, false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
                return RDKV_ETIMEDOUT;
            continue;
        }
        if (w->task) {
            /* waking (a waker between its claim and its release): a moment */
            task_park(st == W_WAKING ? now + 20 * NS_PER_US : deadline);
            continue;
        }
        struct timespec ts = clock_ts(st == W_WAKING ? 20 * NS_PER_US : deadline - now);
        futex(&w->state, FUTEX_WAIT_PRIVATE, st, (st == W_WAKING || deadline) ? &ts : NULL);
    }
}

void waiter_wake(struct waiter *w)
{
    uint32_t z = W_WAITING;
    if (!__atomic_compare_exchange_n(&w->state, &z, W_WAKING, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return; /* woken already, or the wait gave up */
    if (w->task) {
        task_wake(w->task);
        __atomic_store_n(&w->state, W_WOKEN, __ATOMIC_RELEASE);
        return;
    }
    __atomic_store_n(&w->state, W_WOKEN, __ATOMIC_RELEASE);
    /* (the waiter may have returned already: a wake of an address nobody waits on is harmless) */
    futex(&w->state, FUTEX_WAKE_PRIVATE, 1, NULL);
}
