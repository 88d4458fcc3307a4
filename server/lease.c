/* Leases between members and the configuration manager (server/lease.h). */
#include "server/lease.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/pack.h"
#include "rdkv_status.h"
#include "rdma/fabric.h"
#include "rdma/rpc_types.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The reply to KV_RPC_LEASE: u8 one of these. */
enum { LEASE_GRANTED = 1, LEASE_NOT_MANAGER = 2, LEASE_REFUSED = 3 };

struct lease {
    struct fabric *f;
    uint16_t me;
    int64_t len_ns, guard_ns;
    struct lease_hooks h;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    int64_t until;                     /* the member's lease ends here (0: never granted) */
    /* the manager's side */
    int64_t heard[RCFG_MAX_NODES];     /* when each member's last granted request arrived */
    int64_t seen[RCFG_MAX_NODES];      /* when any request of each node last arrived, granted or
                                          not (a removed node that lives still asks): who this
                                          manager reaches, for its majority */
    bool suspected[RCFG_MAX_NODES];    /* never granted again by this manager */
    int64_t office_since;              /* 0: not the manager (as far as this node knows) */
    int64_t minority_since;            /* the manager has heard from a minority since (0: not) */
    unsigned removed;
    pthread_t renewer, monitor;
    bool renewer_on, monitor_on;
    bool halted; /* lease_stop ran: the handler answers "not the manager" */
};

static int64_t now_ns(void) { return clock_now_ns(); }

/* Waits on l->cv until `until` (monotonic ns) or stop: true when stopping. */
static bool nap_until(struct lease *l, int64_t until)
{
    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        int64_t left = until - now_ns();
        if (left <= 0) break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t ns = ts.tv_nsec + left % NS_PER_S;
        ts.tv_sec += left / NS_PER_S + ns / NS_PER_S;
        ts.tv_nsec = ns % NS_PER_S;
        pthread_cond_timedwait(&l->cv, &l->mu, &ts);
    }
    bool stop = l->stop;
    pthread_mutex_unlock(&l->mu);
    return stop;
}

/* ---- the manager's side ------------------------------------------------------------------- */

/* KV_RPC_LEASE (on the service thread): granted, judged and recorded under one lock with the
 * monitor's suspicion, so no grant slips in after a member was judged gone. */
static void on_lease(struct fab_rpc_req *req, void *arg)
{
    struct lease *l = arg;
    uint16_t src = fab_rpc_src(req);
    uint8_t ans;
    if (__atomic_load_n(&l->halted, __ATOMIC_ACQUIRE) || !l->h.is_manager(l->h.arg))
        ans = LEASE_NOT_MANAGER;
    else {
        pthread_mutex_lock(&l->mu);
        if (src < RCFG_MAX_NODES) l->seen[src] = now_ns();
        if (!l->office_since) ans = LEASE_NOT_MANAGER; /* (elected, not yet told: soon) */
        else if (src >= RCFG_MAX_NODES || l->suspected[src]) ans = LEASE_REFUSED;
        else {
            l->heard[src] = now_ns();
            ans = LEASE_GRANTED;
        }
        pthread_mutex_unlock(&l->mu);
    }
    fab_rpc_reply(req, 0, &ans, 1);
}

void lease_elected(struct lease *l)
{
    pthread_mutex_lock(&l->mu);
    int64_t t = now_ns();
    /* a predecessor may have granted a lease a moment ago: each runs for a full lease from now */
    for (unsigned i = 0; i < RCFG_MAX_NODES; i++) {
        l->heard[i] = l->seen[i] = t;
        l->suspected[i] = false;
    }
    l->office_since = t;
    l->minority_since = 0;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

void lease_admit(struct lease *l, uint16_t node)
{
    if (!l || node >= RCFG_MAX_NODES) return;
    pthread_mutex_lock(&l->mu);
    l->suspected[node] = false;
    l->heard[node] = now_ns();
    pthread_mutex_unlock(&l->mu);
}

/* How long a manager's office waits for members that never started (monitor_main): ten
 * leases, and at least 30 s -- a loaded machine starts a process in seconds. */
static int64_t start_grace(const struct lease *l)
{
    return l->len_ns * 10 > 30 * NS_PER_S ? l->len_ns * 10 : 30 * NS_PER_S;
}

/* The monitor: while this node is the manager, suspects a member not heard from for a lease and
 * the guard, and asks for a configuration without it. */
static void *monitor_main(void *arg)
{
    struct lease *l = arg;
    for (;;) {
        if (nap_until(l, now_ns() + l->len_ns / 10)) return NULL;
        if (!l->h.is_manager(l->h.arg)) {
            pthread_mutex_lock(&l->mu);
            l->office_since = 0; /* (no grants while ZooKeeper is away or the office lost) */
            pthread_mutex_unlock(&l->mu);
            continue;
        }
        pthread_mutex_lock(&l->mu);
        bool back = !l->office_since;
        pthread_mutex_unlock(&l->mu);
        if (back) {
            /* the office again (ZooKeeper back, or an election whose callback is still on its
             * way): every lease counts as fresh from now, as at an election */
            lease_elected(l);
            continue;
        }
        struct rcfg c;
        l->h.config(l->h.arg, &c);
        int64_t t = now_ns();
        /* The nodes of the cluster that reach this manager: seen within 0.7 of a lease (they
         * ask every fifth), members or not -- a removed node that lives still asks. Not the
         * members heard within a lease: a manager cut off from all of them finds them silent
         * one after the other (their last renewals were up to a fifth of a lease apart), and
         * the first, silent for 1.1 leases, would be judged while the others still looked
         * alive; they have been silent for 0.9 of a lease by then, past the window. And the
         * members silent for a lease and the guard, not yet suspected. */
        unsigned total = c.nodes, fresh = 0;
        uint64_t silent = 0, unseen = 0; /* unseen: no request of it since the office began */
        pthread_mutex_lock(&l->mu);
        for (unsigned m = 0; m < c.nodes; m++) {
            /* (lease_elected set seen to office_since: no request since then is unseen) */
            if (l->seen[m] <= l->office_since) unseen |= 1ull << m;
            if (m == l->me || t - l->seen[m] <= l->len_ns / 10 * 7) fresh++;
            if (m != l->me && (c.members >> m & 1) && !l->suspected[m] &&
                t - l->heard[m] > l->len_ns + l->guard_ns)
                silent |= 1ull << m;
        }
        bool majority = 2 * fresh > total;
        if (majority || !silent) l->minority_since = 0;
        else if (!l->minority_since) l->minority_since = t;
        int64_t minority_for = l->minority_since ? t - l->minority_since : 0;
        int64_t office_for = t - l->office_since;
        pthread_mutex_unlock(&l->mu);
        if (!silent) continue;
        /* ZooKeeper's word on who holds a session, read once: the start's grace and the
         * minority's judgement below both need it */
        bool grace = office_for < start_grace(l);
        uint64_t live = 0, started = 0, young = 0;
        int64_t session_ns = 0;
        /* (who started, read before who is live: a node's claim and its candidacy are one
         * multi (zcfg_claim), so one that starts between the two reads is live in the second
         * and not judged; read the other way round, it would be started and not yet live) */
        if (grace && l->h.started(l->h.arg, &started, &young)) continue; /* (no witness: wait) */
        if ((grace || !majority) && l->h.live(l->h.arg, &live, &session_ns))
            continue; /* (no witness: wait) */
        if (grace) {
            /* At a cluster's start its nodes come up when they do: one that has never started
             * (it never connected to ZooKeeper), or that has connected and holds its session
             * but has not asked this manager for a lease yet (it opens its fabric and store in
             * between) and first started during this office, is not judged for the start's
             * grace -- it serves nothing without a lease, so waiting for it is safe; removing
             * it would begin the cluster with a promotion and a refill. One that started and
             * went silent, or whose session is gone, is judged as always; so is one that
             * started before this office, which may have served under the last manager: cut
             * off from this one, it too holds its session and never asks. */
            silent &= started & ~(live & unseen & young);
            if (!silent) {
                /* (nor does it count towards a step-down: the minority's clock starts when a
                 * started member is silent, not at the election -- else the manager of a
                 * cluster whose other nodes came up late would step down as they connect) */
                pthread_mutex_lock(&l->mu);
                l->minority_since = 0;
                pthread_mutex_unlock(&l->mu);
                continue;
            }
        }
        if (!majority) {
            /* Either the silent members are dead, or this manager is the one cut off from
             * them. ZooKeeper tells which: a dead node's session ends within the session
             * timeout; one cut off from this node only keeps its session. */
            if ((silent & live) && minority_for > session_ns + l->guard_ns) {
                log_warn("node %u (configuration manager) has reached %u of the cluster's %u "
                         "nodes for %lld ms while the silent members keep their ZooKeeper "
                         "sessions: this node is the one cut off, and steps down", l->me, fresh,
                         total, (long long)(minority_for / NS_PER_MS));
                pthread_mutex_lock(&l->mu);
                l->office_since = 0;
                l->minority_since = 0;
                pthread_mutex_unlock(&l->mu);
                l->h.resign(l->h.arg);
                continue;
            }
            silent &= ~live; /* (those whose sessions are gone: dead, or cut off from all) */
        }
        /* suspected under the lock that grants, so no grant slips in after the judgement; all
         * removed in one change (two dead at once: no promotion waits on the second) */
        uint64_t gone = 0;
        pthread_mutex_lock(&l->mu);
        t = now_ns();
        for (unsigned m = 0; m < RCFG_MAX_NODES && l->office_since; m++)
            if ((silent >> m & 1) && !l->suspected[m] && t - l->heard[m] > l->len_ns + l->guard_ns) {
                l->suspected[m] = true;
                gone |= 1ull << m;
                log_warn("node %u (configuration manager): node %u not heard from for %lld ms "
                         "(lease %lld ms); removing it from the configuration", l->me, m,
                         (long long)((t - l->heard[m]) / NS_PER_MS),
                         (long long)(l->len_ns / NS_PER_MS));
            }
        pthread_mutex_unlock(&l->mu);
        if (!gone) continue;
        int rc = l->h.remove(l->h.arg, gone);
        if (!rc) {
            __atomic_add_fetch(&l->removed, (unsigned)__builtin_popcountll(gone), __ATOMIC_RELAXED);
            continue;
        }
        /* one at a time, then: one that cannot go (its partition's last copy) keeps no other
         * from going */
        for (unsigned m = 0; m < RCFG_MAX_NODES; m++) {
            if (!(gone >> m & 1)) continue;
            if (gone & (gone - 1)) rc = l->h.remove(l->h.arg, 1ull << m);
            if (!rc) {
                __atomic_add_fetch(&l->removed, 1, __ATOMIC_RELAXED);
                continue;
            }
            log_warn("node %u: node %u stays in the configuration: %s", l->me, m,
                     rdkv_strerror(rc));
            /* (asked again after a lease: it may be back, or the install may work then) */
            pthread_mutex_lock(&l->mu);
            l->suspected[m] = rc == RDKV_EUNAVAILABLE; /* its partition has no other copy */
            l->heard[m] = now_ns();
            pthread_mutex_unlock(&l->mu);
        }
    }
}

/* ---- the member's side -------------------------------------------------------------------- */

static void *renewer_main(void *arg)
{
    struct lease *l = arg;
    struct fab_ctx *c = NULL;
    if (fab_ctx_create(l->f, &c)) {
        log_error("node %u: no fabric context for lease renewals: this node's lease will run out",
                  l->me);
        return NULL;
    }
    fab_ctx_set_spin(c, 0);
    int mgr = -1, last = -1; /* last: the manager that granted the last lease */
    struct fab_buf resp = {0};
    bool warned = false;
    for (;;) {
        int64_t sent = now_ns();
        /* ZooKeeper names the manager; while this node's client cannot ask it (ZooKeeper away,
         * or reconnecting after it came back), the last one that granted is asked: it is
         * likely the manager still, and grants again as soon as its own session is back --
         * else this node would find no manager to ask until its client reconnected, and be
         * removed for a silence that was ZooKeeper's */
        if (mgr < 0 && (mgr = l->h.manager_node(l->h.arg)) < 0) mgr = last;
        int ans = 0;
        if (mgr == l->me) {
            /* the manager's own lease: granted by itself, through the same judgement */
            pthread_mutex_lock(&l->mu);
            if (l->office_since && l->h.is_manager(l->h.arg)) {
                l->heard[l->me] = sent;
                ans = LEASE_GRANTED;
            }
            pthread_mutex_unlock(&l->mu);
            if (!ans) mgr = -1;
        } else if (mgr >= 0) {
            uint8_t req = 0;
            int rc = fab_rpc_call(c, (uint16_t)mgr, KV_RPC_LEASE, &req, 1, &resp, l->len_ns / 5);
            if (!rc && resp.len == 1) ans = ((uint8_t *)resp.data)[0];
            if (ans != LEASE_GRANTED) mgr = -1; /* (ask ZooKeeper who it is, next round) */
        }
        if (ans == LEASE_GRANTED) last = mgr;
        pthread_mutex_lock(&l->mu);
        if (ans == LEASE_GRANTED) __atomic_store_n(&l->until, sent + l->len_ns, __ATOMIC_RELEASE);
        bool valid = l->until > now_ns();
        pthread_mutex_unlock(&l->mu);
        if (ans == LEASE_REFUSED && !warned) {
            log_warn("node %u: the configuration manager refuses this node's lease: it was "
                     "removed from the configuration", l->me);
            warned = true;
        } else if (!valid && l->until && !warned) {
            log_warn("node %u: lease ran out: serving nothing until it is renewed", l->me);
            warned = true;
        }
        if (ans == LEASE_GRANTED) warned = false;
        if (nap_until(l, sent + l->len_ns / 5)) break;
    }
    fab_buf_free(&resp);
    fab_ctx_destroy(c);
    return NULL;
}

bool lease_valid(struct lease *l)
{
    return __atomic_load_n(&l->until, __ATOMIC_ACQUIRE) > now_ns(); /* (every operation asks) */
}

unsigned lease_removed(struct lease *l) { return __atomic_load_n(&l->removed, __ATOMIC_RELAXED); }

int lease_start(struct fabric *f, uint16_t me, int64_t lease_ns, const struct lease_hooks *h,
                struct lease **out)
{
    if (lease_ns < 10 * NS_PER_MS || me >= RCFG_MAX_NODES) return RDKV_EINVAL;
    struct lease *l = calloc(1, sizeof *l);
    if (!l) return RDKV_ENOMEM;
    l->f = f;
    l->me = me;
    l->len_ns = lease_ns;
    l->guard_ns = lease_ns / 10; /* clock rate drift between member and manager */
    l->h = *h;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    int rc = fab_rpc_register(f, KV_RPC_LEASE, on_lease, l, FAB_RPC_FAST);
    if (rc) {
        lease_free(l);
        return rc;
    }
    /* (from here the handler holds l: *out is set even on failure, for lease_free) */
    *out = l;
    if (pthread_create(&l->renewer, NULL, renewer_main, l)) rc = RDKV_ENOMEM;
    if (!rc) l->renewer_on = true;
    if (!rc && pthread_create(&l->monitor, NULL, monitor_main, l)) rc = RDKV_ENOMEM;
    if (!rc) l->monitor_on = true;
    if (rc) lease_stop(l);
    return rc;
}

void lease_stop(struct lease *l)
{
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    if (l->renewer_on) pthread_join(l->renewer, NULL);
    if (l->monitor_on) pthread_join(l->monitor, NULL);
    l->renewer_on = l->monitor_on = false;
    __atomic_store_n(&l->halted, true, __ATOMIC_RELEASE);
}

void lease_free(struct lease *l)
{
    if (!l) return;
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    free(l);
}
