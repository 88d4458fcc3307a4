/* Bounded waiting (lock.h, "Waiting"): every algorithm's waits spin briefly, then sleep on a
 * futex or, in a task, park the task; the back-offs between retries. */
#include "locks/lock.h"
#include "locks/lock_internal.h"

#include "common/clock.h"
#include "common/fence.h"
#include "common/rng.h"
#include "common/task.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline void cpu_relax(void) { __builtin_ia32_pause(); }

#define SPIN_ROUNDS 512           /* about 1-3 us of pause instructions */
#define NAP_MAX_NS (128 * NS_PER_US) /* longest sleep between looks at a NIC-written word */

/* Waits begun by the calling thread, or task (tasks of one thread interleave, so each counts its
 * own): lock_acquire compares the count before and after to tell an acquire that waited. */
static __thread unsigned thread_waits;
static int waits_key = -1;
static pthread_once_t waits_once = PTHREAD_ONCE_INIT;
static void waits_key_init(void) { waits_key = task_key_create(NULL); }

unsigned lock_waits_seen(void)
{
    if (!task_running()) return thread_waits;
    pthread_once(&waits_once, waits_key_init);
    return (unsigned)(uintptr_t)task_get(waits_key);
}

static void note_wait(void)
{
    if (!task_running()) {
        thread_waits++;
        return;
    }
    pthread_once(&waits_once, waits_key_init);
    task_set(waits_key, (void *)((uintptr_t)task_get(waits_key) + 1));
}

static int futex_wait32(uint32_t *addr, uint32_t val, int64_t ns)
{
    struct timespec ts = clock_ts(ns);
    return (int)syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
}

/* A task's wait for a word to change: it lets the thread's other tasks run (the one it waits
 * for may be among them), then naps as a thread would, without the futex (nobody can wake a
 * task through it: the writers' lock_wake wakes threads). */
static int task_wait_change(uint64_t *w, uint64_t v, int64_t deadline)
{
    int64_t nap = 20 * NS_PER_US;
    for (unsigned round = 0;; round++) {
        if (__atomic_load_n(w, __ATOMIC_ACQUIRE) != v) return 0;
        int64_t now = clock_now_ns();
        if (deadline && now >= deadline) return RDKV_ETIMEDOUT;
        if (round < 16) {
            task_yield();
            continue;
        }
        int64_t t = nap;
        if (deadline && deadline - now < t) t = deadline - now;
        task_sleep_ns(t);
        if (nap < NAP_MAX_NS) nap *= 2;
    }
}

int lock_wait_change(uint64_t *w, uint64_t v, uint32_t *sleeping, int64_t deadline)
{
    if (__atomic_load_n(w, __ATOMIC_ACQUIRE) != v) return 0;
    note_wait();
    if (task_running()) return task_wait_change(w, v, deadline);
    for (unsigned i = 0; i < SPIN_ROUNDS; i++) {
        if (__atomic_load_n(w, __ATOMIC_ACQUIRE) != v) return 0;
        cpu_relax();
    }
    int64_t nap = 20 * NS_PER_US;
    for (;;) {
        if (__atomic_load_n(w, __ATOMIC_ACQUIRE) != v) return 0;
        int64_t now = clock_now_ns();
        if (deadline && now >= deadline) return RDKV_ETIMEDOUT;
        int64_t t = nap;
        if (deadline && deadline - now < t) t = deadline - now;
        if (sleeping) __atomic_store_n(sleeping, 1, __ATOMIC_SEQ_CST);
        /* the low half of the word: it changes whenever the value does, for every use here */
        if (__atomic_load_n(w, __ATOMIC_SEQ_CST) == v)
            futex_wait32((uint32_t *)(void *)w, (uint32_t)v, t);
        if (sleeping) __atomic_store_n(sleeping, 0, __ATOMIC_RELAXED);
        if (nap < NAP_MAX_NS) nap *= 2;
    }
}

/* The owner's task is in d->waker while it waits. A waker claims it by setting the low bit
 * (LD_WAKING: task records are aligned), wakes it, and lets go by clearing the word; only then
 * may the wait end, since task_wake touches the task and its scheduler after the wake is visible,
 * and the task could otherwise finish (its record freed, its thread's scheduler destroyed) under
 * the waker. A wait that sees a claim done takes its wake (the park may have returned before it
 * came) and registers again; at its end it takes back its registration or, if claimed, waits out
 * the waker and takes its wake, so none is left for a later park. The task has nothing of its own
 * in flight while it waits here; a wake from elsewhere (the session service's, on a new request)
 * may be taken with a claim's, which is harmless because that waker's own wait checks its
 * condition again under its mutex before it parks. Task records are calloc'ed, so the low bit of
 * their address is free. */
#define LD_WAKING 1u

/* A claim of this owner is served: waits until its waker lets go (d->waker is mine | LD_WAKING
 * until then; it is between two instructions unless its thread was preempted, so a few yields,
 * then short naps), then takes its wake, which may have come after the owner's park returned. */
static void desc_claim_served(struct lock_desc *d, uint64_t mine)
{
    for (unsigned round = 0; __atomic_load_n(&d->waker, __ATOMIC_ACQUIRE) == (mine | LD_WAKING);
         round++) {
        if (round < 16) task_yield();
        else task_park(clock_now_ns() + 20 * NS_PER_US);
    }
    task_take_wake();
}

void lock_desc_wait(struct lock_desc *d, uint64_t *w, uint64_t v)
{
    struct task *me = task_self();
    if (me && __atomic_load_n(w, __ATOMIC_SEQ_CST) != v) return;
    if (me) note_wait();
    if (!me) {
        lock_wait_change(w, v, &d->sleeping, 0);
        return;
    }
    uint64_t mine = (uint64_t)(uintptr_t)me;
    __atomic_store_n(&d->waker, mine, __ATOMIC_SEQ_CST);
    int64_t nap = 20 * NS_PER_US;
    for (unsigned round = 0; __atomic_load_n(w, __ATOMIC_SEQ_CST) == v; round++) {
        if (round < 16) {
            task_yield();
            continue;
        }
        /* a neighbour on this node wakes it; one on another node cannot, so it looks again */
        bool woken = task_park(clock_now_ns() + nap) == 0;
        if (__atomic_load_n(&d->waker, __ATOMIC_SEQ_CST) != mine) {
            /* claimed: once served, register again (the loop reads *w after that) */
            desc_claim_served(d, mine);
            __atomic_store_n(&d->waker, mine, __ATOMIC_SEQ_CST);
        } else if (!woken && nap < NAP_MAX_NS) {
            nap *= 2;
        }
    }
    uint64_t cur = mine;
    if (!__atomic_compare_exchange_n(&d->waker, &cur, 0, false, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST)) {
        desc_claim_served(d, mine);
    }
}

void lock_desc_wake(struct lock_thread *t, rptr word)
{
    rptr line = rptr_make(rptr_node(word), rptr_off(word) & ~(uint64_t)(LOCK_LINE - 1));
    struct lock_desc *d = fab_local(t->f, line);
    if (!d) return;
    full_fence();
    uint64_t task = __atomic_load_n(&d->waker, __ATOMIC_SEQ_CST);
    do {
        if (!task) { /* no task waits: maybe a thread, on the futex */
            lock_wake((uint64_t *)fab_local(t->f, word), &d->sleeping);
            return;
        }
        if (task & LD_WAKING) return; /* another waker is at it, and the owner looks again after */
    } while (!__atomic_compare_exchange_n(&d->waker, &task, task | LD_WAKING, false,
                                          __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
    task_wake((struct task *)(uintptr_t)task);
    __atomic_store_n(&d->waker, 0, __ATOMIC_RELEASE); /* let go: the owner's wait may end now */
}

void lock_wake(uint64_t *w, uint32_t *sleeping)
{
    full_fence();
    if (!sleeping || __atomic_load_n(sleeping, __ATOMIC_RELAXED))
        syscall(SYS_futex, (uint32_t *)(void *)w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void lock_nap(uint32_t *w, uint32_t seen, uint32_t *sleepers, int64_t ns)
{
    note_wait();
    if (task_running()) { /* (a task cannot be woken through the futex: it naps) */
        if (__atomic_load_n(w, __ATOMIC_SEQ_CST) == seen) task_sleep_ns(ns);
        return;
    }
    __atomic_fetch_add(sleepers, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(w, __ATOMIC_SEQ_CST) == seen) futex_wait32(w, seen, ns);
    __atomic_fetch_sub(sleepers, 1, __ATOMIC_SEQ_CST);
}

void lock_wake_all(uint32_t *w, uint32_t *sleepers)
{
    full_fence();
    if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST))
        syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

void lock_retry_backoff(struct lock_thread *t, int64_t *b, uint64_t *seed)
{
    note_wait();
    int64_t wait = *b / 2 + (int64_t)rng_below(seed, (uint64_t)(*b / 2 + 1));
    if (wait < 20 * NS_PER_US && task_running()) {
        task_yield(); /* a task's short back-off: the thread's other tasks run meanwhile */
    } else if (wait < 20 * NS_PER_US) {
        int64_t until = clock_now_ns() + wait;
        while (clock_now_ns() < until) cpu_relax();
    } else {
        clock_sleep_ns(wait);
    }
    if (*b < t->cfg.spin_backoff_max_ns) *b *= 2;
}

void lock_backoff(unsigned round)
{
    note_wait();
    /* About 2 us of spinning in all, then yields, then sleeps: on a 2-core machine a spinning
     * waiter takes the CPU from the thread it waits for. A task yields to the thread's other
     * tasks instead of spinning. */
    if (round < 8 && task_running()) {
        task_yield();
    } else if (round < 4) {
        for (unsigned i = 0; i < (64u << round); i++) cpu_relax();
    } else if (round < 8) {
        sched_yield();
    } else {
        unsigned r = round - 8;
        clock_sleep_ns((int64_t)NS_PER_US << (r < 7 ? r : 7)); /* 1 us .. 128 us */
    }
}
