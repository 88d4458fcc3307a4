/* The janitor: a thread of a node's own (its own fabric context and lock_thread) that passes on
 * the lock tickets other threads gave up at a deadline, so that a thread that goes idle after an
 * abort leaves nobody waiting behind its ticket (lock_thread_hand_over), and that runs jobs:
 * locks kept for a while on someone's behalf (the transaction layer's fences), each stepped when
 * it asks to be. A job's step runs between ticket passes and other jobs' lock refreshes, so it
 * never waits for an answer: it posts its RPC on a context of its own (tagged with the job) and
 * hears the answer in done() at a later look. */
#ifndef RDKV_LOCK_JANITOR_H
#define RDKV_LOCK_JANITOR_H

#include "locks/lock.h"

#include <stdbool.h>
#include <stdint.h>

struct lock_job {
    struct lock_job *next; /* (the janitor's) */
    int64_t due;           /* when the next step is wanted (clock_now_ns); 0: at once */
    /* On the janitor's thread, once, before the first step: point the job's handles at lt. */
    void (*adopt)(struct lock_job *j, struct lock_thread *lt);
    /* A step, when due, on the janitor's thread: false when the job is over (it has freed
     * itself), else true with j->due set to when it wants the next one. It may post RPCs on rpc
     * with the tag (uintptr_t)j, counting them in j->posted. */
    bool (*step)(struct lock_job *j, struct fab_ctx *rpc, int64_t now);
    /* One of its RPCs completed (status): false when the job is over (it has freed itself). */
    bool (*done)(struct lock_job *j, int status);
    unsigned posted; /* its RPCs in flight */
    /* The janitor stops with the job pending (none of its RPCs in flight): let its locks go
     * unreleased (their leases recover them) and free it. */
    void (*drop)(struct lock_job *j);
};

struct lock_janitor;
/* Starts the thread (cfg: the lock layer's configuration its lock_thread uses). */
int lock_janitor_start(struct fabric *f, const struct lock_cfg *cfg, struct lock_janitor **out);
/* Stops it: jobs still pending are dropped; tickets still owed are left to the leases. */
void lock_janitor_stop(struct lock_janitor *j);
/* A thread between its lock operations hands its given-up tickets over. */
void lock_janitor_take(struct lock_janitor *j, struct lock_thread *from);
/* Gives the janitor a job: false when it does not run (could not attach to the lock layer, or
 * is stopping); the caller keeps the job then. */
bool lock_janitor_add(struct lock_janitor *j, struct lock_job *job);

#endif
