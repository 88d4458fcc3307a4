/* The janitor (locks/janitor.h): one thread that passes given-up tickets on and steps jobs. */
#include "locks/janitor.h"

#include "common/clock.h"
#include "common/log.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define JANITOR_ANSWER_NAP_NS (10 * NS_PER_MS)

struct lock_janitor {
    struct fabric *f;
    struct lock_cfg cfg;
    pthread_t thr;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    struct lock_thread *lt; /* the thread's, while it runs (tickets are handed to it under mu) */
    struct lock_job *added; /* jobs given and not yet adopted, under mu */
};

/* The next time a job of the list wants a step. */
static int64_t jobs_next(const struct lock_job *l)
{
    int64_t next = INT64_MAX;
    for (; l; l = l->next)
        if (l->due < next) next = l->due;
    return next;
}

/* Hands the completions of the jobs' RPCs to them; a job whose done() says it is over leaves
 * the list. Polls only (wait_ns 0) or waits up to wait_ns for the first. */
static void reap_answers(struct fab_ctx *rc, struct lock_job **mine, int64_t wait_ns)
{
    struct fab_cqe cq[16];
    int k = wait_ns > 0 ? fab_wait(rc, cq, 16, wait_ns) : fab_poll(rc, cq, 16);
    for (int i = 0; i < k; i++) {
        struct lock_job *job = (struct lock_job *)(uintptr_t)cq[i].tag;
        struct lock_job **pp = mine;
        while (*pp && *pp != job) pp = &(*pp)->next;
        if (!*pp) continue; /* (not a job of ours: cannot happen) */
        job->posted--;
        struct lock_job *next = job->next; /* (done may free the job) */
        if (!job->done(job, cq[i].status)) *pp = next;
    }
}

static bool any_posted(const struct lock_job *l)
{
    for (; l; l = l->next)
        if (l->posted) return true;
    return false;
}

static void *janitor_main(void *arg)
{
    struct lock_janitor *j = arg;
    struct fab_ctx *c = NULL, *rc = NULL; /* the lock thread's, and the jobs' RPCs' */
    struct lock_thread lt;
    bool ok = fab_ctx_create(j->f, &c) == 0 && fab_ctx_create(j->f, &rc) == 0;
    if (ok && lock_thread_init(&lt, c, &j->cfg)) ok = false;
    pthread_mutex_lock(&j->mu);
    if (ok) j->lt = &lt;
    pthread_cond_broadcast(&j->cv);
    unsigned round = 0;
    struct lock_job *mine = NULL; /* adopted: their handles point at lt */
    while (ok && !j->stop) {
        while (j->added) {
            struct lock_job *job = j->added;
            j->added = job->next;
            if (job->adopt) job->adopt(job, &lt);
            job->next = mine;
            mine = job;
        }
        if (lock_thread_owes(&lt)) lock_thread_poll(&lt); /* under mu: threads hand over only
                                                              between polls */
        bool owes = lock_thread_owes(&lt);
        if (!owes && !mine) {
            round = 0;
            pthread_cond_wait(&j->cv, &j->mu);
            continue;
        }
        pthread_mutex_unlock(&j->mu);
        reap_answers(rc, &mine, 0);
        int64_t now = clock_now_ns();
        for (struct lock_job **pp = &mine; *pp;) {
            struct lock_job *job = *pp;
            if (now >= job->due) {
                struct lock_job *next = job->next;
                if (!job->step(job, rc, now)) {
                    *pp = next;
                    continue;
                }
            }
            pp = &job->next;
        }
        if (owes) lock_backoff(round < 12 ? round++ : 12); /* up to ~128 us between looks */
        else if (any_posted(mine)) {
            /* an answer is awaited: sleep in its context, up to the next step (and 10 ms, so
             * that new jobs and tickets are seen) */
            int64_t wait = jobs_next(mine) - clock_now_ns();
            if (wait > JANITOR_ANSWER_NAP_NS) wait = JANITOR_ANSWER_NAP_NS;
            if (wait > 0) reap_answers(rc, &mine, wait);
        }
        pthread_mutex_lock(&j->mu);
        if (!owes && !j->added && !j->stop && mine && !any_posted(mine)) {
            struct timespec until = clock_ts(jobs_next(mine));
            pthread_cond_timedwait(&j->cv, &j->mu, &until);
        }
    }
    j->lt = NULL;
    struct lock_job *left = j->added;
    j->added = NULL;
    pthread_mutex_unlock(&j->mu);
    /* the answers still on their way (each bounded by its RPC's timeout) */
    while (ok && any_posted(mine)) reap_answers(rc, &mine, NS_PER_S);
    while (left || mine) {
        struct lock_job *job = mine ? mine : left;
        if (job == mine) mine = job->next;
        else left = job->next;
        job->drop(job);
    }
    if (ok) {
        lock_thread_drop_abandoned(&lt); /* the node stops: leases recover them */
        lock_thread_fini(&lt);
    } else {
        log_error("lock janitor: cannot attach to the lock layer; given-up lock tickets wait for "
                  "lease resets");
    }
    if (rc) fab_ctx_destroy(rc);
    if (c) fab_ctx_destroy(c);
    return NULL;
}

int lock_janitor_start(struct fabric *f, const struct lock_cfg *cfg, struct lock_janitor **out)
{
    struct lock_janitor *j = calloc(1, sizeof *j);
    if (!j) return RDKV_ENOMEM;
    j->f = f;
    j->cfg = *cfg;
    pthread_mutex_init(&j->mu, NULL);
    clock_cond_init(&j->cv);
    if (pthread_create(&j->thr, NULL, janitor_main, j)) {
        pthread_cond_destroy(&j->cv);
        pthread_mutex_destroy(&j->mu);
        free(j);
        return RDKV_ENOMEM;
    }
    *out = j;
    return 0;
}

void lock_janitor_stop(struct lock_janitor *j)
{
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    j->stop = true;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    pthread_join(j->thr, NULL);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

void lock_janitor_take(struct lock_janitor *j, struct lock_thread *from)
{
    pthread_mutex_lock(&j->mu);
    if (j->lt) {
        lock_thread_hand_over(from, j->lt);
        pthread_cond_signal(&j->cv);
    }
    pthread_mutex_unlock(&j->mu);
}

bool lock_janitor_add(struct lock_janitor *j, struct lock_job *job)
{
    pthread_mutex_lock(&j->mu);
    bool ok = j->lt && !j->stop;
    if (ok) {
        job->next = j->added;
        j->added = job;
        pthread_cond_signal(&j->cv);
    }
    pthread_mutex_unlock(&j->mu);
    return ok;
}
