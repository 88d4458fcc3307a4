/* The "traditional" lock manager the DSLR paper compares against: every lock request, local or
 * remote, is an RPC to the lock's owner node, whose manager keeps per-lock holders and a FIFO
 * queue of waiters and answers a request when it is granted (a deferred RPC reply). A waiter
 * whose deadline passes gets RDKV_ETIMEDOUT; a holder that keeps a lock for more than two of its
 * leases (sent with the request) while others wait is evicted (the same rule as DSLR), and its
 * late release is answered
 * RDKV_ETIMEDOUT. The manager's handlers run inline on the node's service thread; a sweeper
 * thread handles deadlines and evictions. */
#include "lock.h"

#include "common/clock.h"
#include "common/pack.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define TRAD_BUCKETS 4096

struct trad_waiter {
    struct trad_waiter *next;
    struct fab_rpc_req *req;
    uint8_t mode;
    int64_t deadline; /* 0: none */
    int64_t lease_ns;
};

struct trad_holder {
    struct trad_holder *next;
    uint64_t token;
    int64_t since;
    int64_t lease_ns; /* the requester's lease (0: the manager's default) */
    uint8_t mode;
};

struct trad_lock {
    struct trad_lock *hnext;        /* hash chain */
    struct trad_lock *cnext, *cprev; /* list of locks with waiters */
    bool contended;
    uint64_t off;
    unsigned nS, nX;
    struct trad_holder *holders;
    struct trad_waiter *qhead, *qtail;
};

struct trad_mgr {
    struct fabric *f;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thr;
    bool stop, thread_started;
    int64_t lease_ns;
    uint64_t next_token;
    struct trad_lock *buckets[TRAD_BUCKETS];
    struct trad_lock *contended;
};

static struct trad_lock *find(struct trad_mgr *m, uint64_t off, bool create)
{
    unsigned b = (unsigned)((off >> 6) * 0x9E3779B97F4A7C15ull >> 52) % TRAD_BUCKETS;
    for (struct trad_lock *l = m->buckets[b]; l; l = l->hnext)
        if (l->off == off) return l;
    if (!create) return NULL;
    struct trad_lock *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->off = off;
    l->hnext = m->buckets[b];
    m->buckets[b] = l;
    return l;
}

static void forget_if_idle(struct trad_mgr *m, struct trad_lock *l)
{
    if (l->holders || l->qhead) return;
    if (l->contended) {
        if (l->cprev) l->cprev->cnext = l->cnext;
        else m->contended = l->cnext;
        if (l->cnext) l->cnext->cprev = l->cprev;
    }
    unsigned b = (unsigned)((l->off >> 6) * 0x9E3779B97F4A7C15ull >> 52) % TRAD_BUCKETS;
    for (struct trad_lock **pp = &m->buckets[b]; *pp; pp = &(*pp)->hnext)
        if (*pp == l) {
            *pp = l->hnext;
            break;
        }
    free(l);
}

static void mark_contended(struct trad_mgr *m, struct trad_lock *l, bool on)
{
    if (on == l->contended) return;
    l->contended = on;
    if (on) {
        l->cprev = NULL;
        l->cnext = m->contended;
        if (m->contended) m->contended->cprev = l;
        m->contended = l;
        pthread_cond_signal(&m->cv);
    } else {
        if (l->cprev) l->cprev->cnext = l->cnext;
        else m->contended = l->cnext;
        if (l->cnext) l->cnext->cprev = l->cprev;
        l->cnext = l->cprev = NULL;
    }
}

static bool compatible(const struct trad_lock *l, uint8_t mode)
{
    return mode == LOCK_SHARED ? l->nX == 0 : l->nX == 0 && l->nS == 0;
}

static void grant(struct trad_mgr *m, struct trad_lock *l, struct fab_rpc_req *req, uint8_t mode,
                  int64_t lease_ns)
{
    struct trad_holder *h = malloc(sizeof *h);
    if (!h) {
        fab_rpc_reply(req, RDKV_ENOMEM, NULL, 0);
        return;
    }
    h->token = ++m->next_token;
    h->since = clock_now_ns();
    h->lease_ns = lease_ns > 0 ? lease_ns : m->lease_ns;
    h->mode = mode;
    h->next = l->holders;
    l->holders = h;
    if (mode == LOCK_SHARED) l->nS++;
    else l->nX++;
    uint8_t out[8];
    pack_put_u64le(out, h->token);
    fab_rpc_reply(req, 0, out, sizeof out);
}

/* Grants waiters from the head of the queue for as long as they fit (strict FIFO). */
static void pump(struct trad_mgr *m, struct trad_lock *l)
{
    while (l->qhead && compatible(l, l->qhead->mode)) {
        struct trad_waiter *w = l->qhead;
        l->qhead = w->next;
        if (!l->qhead) l->qtail = NULL;
        grant(m, l, w->req, w->mode, w->lease_ns);
        free(w);
    }
    mark_contended(m, l, l->qhead != NULL);
}

static void drop_holder(struct trad_lock *l, struct trad_holder **pp)
{
    struct trad_holder *h = *pp;
    if (h->mode == LOCK_SHARED) l->nS--;
    else l->nX--;
    *pp = h->next;
    free(h);
}

static void on_lock(struct fab_rpc_req *req, void *arg)
{
    struct trad_mgr *m = arg;
    struct pack_r r;
    pack_r_init(&r, fab_rpc_data(req), fab_rpc_len(req));
    uint64_t off = unpack_u64(&r);
    uint8_t mode = unpack_u8(&r);
    int64_t timeout = (int64_t)unpack_u64(&r);
    int64_t lease = (int64_t)unpack_u64(&r);
    if (!unpack_done(&r) || (mode != LOCK_SHARED && mode != LOCK_EXCLUSIVE) || timeout < 0 ||
        lease < 0 || lease > 3600 * NS_PER_S ||
        off % LOCK_LINE || off >= fab_arena_size(m->f)) {
        fab_rpc_reply(req, RDKV_EINVAL, NULL, 0);
        return;
    }
    pthread_mutex_lock(&m->mu);
    if (m->stop) {
        pthread_mutex_unlock(&m->mu);
        fab_rpc_reply(req, RDKV_ESHUTDOWN, NULL, 0);
        return;
    }
    struct trad_lock *l = find(m, off, true);
    if (!l) {
        pthread_mutex_unlock(&m->mu);
        fab_rpc_reply(req, RDKV_ENOMEM, NULL, 0);
        return;
    }
    if (!l->qhead && compatible(l, mode)) {
        grant(m, l, req, mode, lease);
    } else {
        struct trad_waiter *w = malloc(sizeof *w);
        if (!w) {
            forget_if_idle(m, l);
            pthread_mutex_unlock(&m->mu);
            fab_rpc_reply(req, RDKV_ENOMEM, NULL, 0);
            return;
        }
        w->req = req;
        w->mode = mode;
        w->deadline = timeout ? clock_now_ns() + timeout : 0;
        w->lease_ns = lease;
        w->next = NULL;
        if (l->qtail) l->qtail->next = w;
        else l->qhead = w;
        l->qtail = w;
        mark_contended(m, l, true);
    }
    pthread_mutex_unlock(&m->mu);
}

static void on_unlock(struct fab_rpc_req *req, void *arg)
{
    struct trad_mgr *m = arg;
    struct pack_r r;
    pack_r_init(&r, fab_rpc_data(req), fab_rpc_len(req));
    uint64_t off = unpack_u64(&r), token = unpack_u64(&r);
    if (!unpack_done(&r)) {
        fab_rpc_reply(req, RDKV_EINVAL, NULL, 0);
        return;
    }
    int st = RDKV_ETIMEDOUT; /* not a holder (any more): evicted after its lease */
    pthread_mutex_lock(&m->mu);
    struct trad_lock *l = find(m, off, false);
    if (l) {
        for (struct trad_holder **pp = &l->holders; *pp; pp = &(*pp)->next)
            if ((*pp)->token == token) {
                drop_holder(l, pp);
                st = 0;
                break;
            }
        pump(m, l);
        forget_if_idle(m, l);
    }
    pthread_mutex_unlock(&m->mu);
    fab_rpc_reply(req, st, NULL, 0);
}

/* Deadlines and evictions, for locks that have waiters. */
static void *sweeper(void *arg)
{
    struct trad_mgr *m = arg;
    pthread_mutex_lock(&m->mu);
    while (!m->stop) {
        int64_t now = clock_now_ns(), next = now + 100 * NS_PER_MS;
        for (struct trad_lock *l = m->contended, *ln; l; l = ln) {
            ln = l->cnext;
            for (struct trad_waiter **pp = &l->qhead, *prev = NULL; *pp;) {
                struct trad_waiter *w = *pp;
                if (w->deadline && w->deadline <= now) {
                    *pp = w->next;
                    if (l->qtail == w) l->qtail = prev;
                    fab_rpc_reply(w->req, RDKV_ETIMEDOUT, NULL, 0);
                    free(w);
                    continue;
                }
                if (w->deadline && w->deadline < next) next = w->deadline;
                prev = w;
                pp = &w->next;
            }
            for (struct trad_holder **pp = &l->holders; *pp;) {
                int64_t expiry = (*pp)->since + 2 * (*pp)->lease_ns;
                if (l->qhead && expiry <= now) {
                    drop_holder(l, pp); /* a holder that outlived two leases while others wait */
                    continue;
                }
                if (l->qhead && expiry < next) next = expiry;
                pp = &(*pp)->next;
            }
            pump(m, l);
            forget_if_idle(m, l);
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t wake = (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec + (next - now);
        struct timespec until = clock_ts(wake > 0 ? wake : 0);
        pthread_cond_timedwait(&m->cv, &m->mu, &until);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

/* The managers this process serves, by fabric, for the owner's holds_x check. */
#define TRAD_SERVED 16
static pthread_mutex_t served_mu = PTHREAD_MUTEX_INITIALIZER;
static struct trad_mgr *served[TRAD_SERVED];

static void served_set(struct trad_mgr *m, bool on)
{
    pthread_mutex_lock(&served_mu);
    for (unsigned i = 0; i < TRAD_SERVED; i++)
        if (on ? !served[i] : served[i] == m) {
            served[i] = on ? m : NULL;
            break;
        }
    pthread_mutex_unlock(&served_mu);
}

/* Whether the manager of f lists the hold `token` as an exclusive holder of the lock. */
static int trad_holds_x(struct fabric *f, rptr line, uint16_t holder, uint64_t token)
{
    (void)holder;
    int held = RDKV_ENOTSUP; /* no manager here */
    pthread_mutex_lock(&served_mu);
    for (unsigned i = 0; i < TRAD_SERVED; i++) {
        struct trad_mgr *m = served[i];
        if (!m || m->f != f) continue;
        pthread_mutex_lock(&m->mu);
        struct trad_lock *l = find(m, rptr_off(line), false);
        held = 0;
        for (struct trad_holder *x = l ? l->holders : NULL; x; x = x->next)
            if (x->token == token && x->mode == LOCK_EXCLUSIVE) held = 1;
        pthread_mutex_unlock(&m->mu);
        break;
    }
    pthread_mutex_unlock(&served_mu);
    return held;
}

struct trad_mgr *lock_trad_serve(struct fabric *f, int64_t lease_ns)
{
    struct trad_mgr *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->f = f;
    m->lease_ns = lease_ns > 0 ? lease_ns : 10 * NS_PER_MS;
    pthread_mutex_init(&m->mu, NULL);
    clock_cond_init(&m->cv);
    if (pthread_create(&m->thr, NULL, sweeper, m)) {
        pthread_mutex_destroy(&m->mu);
        pthread_cond_destroy(&m->cv);
        free(m);
        return NULL;
    }
    m->thread_started = true;
    if (fab_rpc_register(f, LOCK_RPC_TRAD_LOCK, on_lock, m, FAB_RPC_INLINE) ||
        fab_rpc_register(f, LOCK_RPC_TRAD_UNLOCK, on_unlock, m, FAB_RPC_INLINE)) {
        lock_trad_stop(m);
        lock_trad_free(m);
        return NULL;
    }
    served_set(m, true);
    return m;
}

void lock_trad_stop(struct trad_mgr *m)
{
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->stop = true;
    pthread_cond_signal(&m->cv);
    pthread_mutex_unlock(&m->mu);
    if (m->thread_started) pthread_join(m->thr, NULL);
    m->thread_started = false;
    pthread_mutex_lock(&m->mu);
    for (unsigned b = 0; b < TRAD_BUCKETS; b++)
        for (struct trad_lock *l = m->buckets[b]; l; l = l->hnext)
            while (l->qhead) {
                struct trad_waiter *w = l->qhead;
                l->qhead = w->next;
                fab_rpc_reply(w->req, RDKV_ESHUTDOWN, NULL, 0);
                free(w);
            }
    pthread_mutex_unlock(&m->mu);
}

void lock_trad_free(struct trad_mgr *m)
{
    if (!m) return;
    served_set(m, false);
    for (unsigned b = 0; b < TRAD_BUCKETS; b++)
        for (struct trad_lock *l = m->buckets[b], *n; l; l = n) {
            n = l->hnext;
            while (l->holders) drop_holder(l, &l->holders);
            free(l);
        }
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->cv);
    free(m);
}

/* ------------------------------------------------------------------------------------------ */
/* The client side */

static int trad_acquire(struct lock_handle *h, enum lock_mode mode, int64_t deadline)
{
    struct lock_thread *t = h->t;
    if (mode != LOCK_SHARED && mode != LOCK_EXCLUSIVE) return RDKV_ENOTSUP;
    int64_t now = clock_now_ns(), left = deadline ? deadline - now : 0;
    if (deadline && left <= 0) {
        t->stats.timeouts++;
        return RDKV_ETIMEDOUT;
    }
    uint8_t req[25];
    struct pack_w w;
    pack_w_init(&w);
    pack_u64(&w, rptr_off(h->line));
    pack_u8(&w, (uint8_t)mode);
    pack_u64(&w, (uint64_t)left);
    pack_u64(&w, (uint64_t)t->cfg.lease_ns);
    if (w.err) return RDKV_ENOMEM;
    memcpy(req, w.p, sizeof req);
    pack_w_free(&w);
    struct fab_buf resp = {0};
    /* The manager answers by the deadline; the RPC's own timeout only covers a lost node. */
    int64_t rpc_timeout = deadline ? left + 2 * NS_PER_S : 3600 * NS_PER_S;
    int64_t sent = clock_now_ns(); /* the grant comes after this: the lease runs from here */
    int rc = fab_rpc_call(t->c, rptr_node(h->line), LOCK_RPC_TRAD_LOCK, req, sizeof req, &resp,
                          rpc_timeout);
    if (rc == 0 && resp.len != 8) rc = RDKV_EPROTO;
    if (rc == 0) {
        struct pack_r r;
        pack_r_init(&r, resp.data, resp.len);
        h->aux = unpack_u64(&r);
        h->mode = (uint8_t)mode;
        h->granted_at = sent;
        h->lease_ns = t->cfg.lease_ns; /* evicted only after two, and only if someone waits */
    } else if (rc == RDKV_ETIMEDOUT) {
        t->stats.timeouts++;
    }
    fab_buf_free(&resp);
    return rc;
}

static int trad_release(struct lock_handle *h)
{
    if (!h->mode) return RDKV_EINVAL;
    struct lock_thread *t = h->t;
    h->mode = 0;
    struct pack_w w;
    pack_w_init(&w);
    pack_u64(&w, rptr_off(h->line));
    pack_u64(&w, h->aux);
    if (w.err) return RDKV_ENOMEM;
    struct fab_buf resp = {0};
    int rc = fab_rpc_call(t->c, rptr_node(h->line), LOCK_RPC_TRAD_UNLOCK, w.p, w.len, &resp, 0);
    pack_w_free(&w);
    fab_buf_free(&resp);
    if (rc == RDKV_ETIMEDOUT) t->stats.lease_expired++;
    return rc;
}

const struct lock_algo lock_trad = {
    .id = LOCK_ID_TRAD,
    .name = "trad",
    .recovers = true,
    .modes = 1u << LOCK_SHARED | 1u << LOCK_EXCLUSIVE,
    .acquire = trad_acquire,
    .release = trad_release,
    .holds_x = trad_holds_x,
    .movable = true,
};
