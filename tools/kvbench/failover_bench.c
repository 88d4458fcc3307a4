/* kvbench failover: how long a replicated cluster's keys are out of service when a primary is
 * killed for good (docs/replication.md; issue 29's target). Each round starts a fresh local
 * cluster with --replicas, runs one client moving 1 between two keys of a non-manager node's
 * partition (the client names every node, so it follows the configuration on its own), checks
 * that no member was removed while all were alive (a false suspicion, which short leases on a
 * loaded machine cause), kills that node with SIGKILL, and measures the time from the kill to
 * the first commit begun after it. After the round the two keys must still sum to what they
 * held, with every acknowledged move there. */
#include "tools/kvbench/bench.h"

#include "common/clock.h"
#include "common/parse.h"
#include "rdkv.h"
#include "rdma/rpc_types.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: kvbench failover [options]\n"
    "\n"
    "Kills a primary of a fresh local replicated cluster, once per round, and reports the time\n"
    "from the kill to the first commit on its keys (p50 and max), the false suspicions seen\n"
    "before the kill, and whether every acknowledged commit survived.\n"
    "\n"
    "  --kills N            rounds, one kill each (default 10)\n"
    "  --nodes N            nodes per cluster (default 3)\n"
    "  --replicas R         copies of each partition (default 3; at least 2)\n"
    "  --replica-lease DUR  the members' lease (kvserver --replica-lease; default its own, 1s)\n"
    "  --warm DUR           load before each kill, during which no member may be removed\n"
    "                       (default 2s)\n"
    "\n"
    "Each round's line, then YCSB-style '[FAILOVER], Metric, value' lines. Exit status 1 when a\n"
    "round lost an acknowledged commit, could not read its keys, or found no commit within 60 s.\n";

#define FO_START 1000000 /* each key's balance at the start */
#define FO_BOUND_NS (60 * NS_PER_S)

struct fo_opts {
    unsigned kills, nodes, replicas;
    const char *lease;
    int64_t warm_ns;
};

struct fo_mover {
    rdkv_session *s; /* (a session belongs to the thread that opened it: the mover opens its
                        own, from ep) */
    const char *ep;
    char a[24], b[24];
    _Atomic unsigned acked, unknown;
    _Atomic int64_t killed, first_after;
    _Atomic bool stop;
};

static int get_int(rdkv_txn *t, const char *k, long *out)
{
    const void *v;
    size_t vl;
    int rc = rdkv_txn_get(t, k, strlen(k), &v, &vl);
    char buf[32];
    if (!rc && (vl == 0 || vl >= sizeof buf)) rc = RDKV_EPROTO;
    if (!rc) {
        memcpy(buf, v, vl);
        buf[vl] = 0;
        *out = strtol(buf, NULL, 10);
    }
    return rc;
}

static int put_int(rdkv_txn *t, const char *k, long v)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld", v);
    return rdkv_txn_put(t, k, strlen(k), buf, (size_t)n);
}

/* One move of 1 from a to b: the commit's status. With out set, only reads both into out[]. */
static int fo_move(struct fo_mover *m, long *out)
{
    rdkv_txn *t = NULL;
    int rc = rdkv_txn_begin(m->s, &t);
    long x = 0, y = 0;
    if (!rc) rc = get_int(t, m->a, &x);
    if (!rc) rc = get_int(t, m->b, &y);
    if (!rc && out) {
        out[0] = x;
        out[1] = y;
    }
    if (!rc && !out) rc = put_int(t, m->a, x - 1);
    if (!rc && !out) rc = put_int(t, m->b, y + 1);
    if (!rc && !out)
        rc = rdkv_txn_commit(t);
    else if (t)
        rdkv_txn_abort(t);
    rdkv_txn_free(t);
    return rc;
}

static void *fo_mover_main(void *arg)
{
    struct fo_mover *m = arg;
    struct fo_mover mine = {0};
    memcpy(mine.a, m->a, sizeof mine.a);
    memcpy(mine.b, m->b, sizeof mine.b);
    if (rdkv_connect(m->ep, NULL, &mine.s)) return NULL;
    while (!atomic_load(&m->stop)) {
        int64_t began = clock_now_ns();
        int rc = fo_move(&mine, NULL);
        if (rc == 0) {
            atomic_fetch_add(&m->acked, 1);
            int64_t k = atomic_load(&m->killed), none = 0;
            if (k && began > k)
                atomic_compare_exchange_strong(&m->first_after, &none, clock_now_ns());
        } else if (rc == RDKV_EUNKNOWN) {
            atomic_fetch_add(&m->unknown, 1);
        } else if (!rdkv_status_retryable(rc) && rc != RDKV_EUNAVAILABLE) {

            rdkv_sleep_us(10000); /* (reported by the round's check if it mattered) */
        }
    }
    rdkv_session_close(mine.s);
    return NULL;
}

/* Whether node's status (KV_RPC_STATUS, on the operator's fabric f) has `what` in it. */
static bool fo_status_says(struct fabric *f, unsigned node, const char *what)
{
    struct fab_ctx *c = NULL;
    struct fab_buf resp = {0};
    bool says = false;
    if (fab_ctx_create(f, &c) == 0 &&
        fab_rpc_call(c, (uint16_t)node, KV_RPC_STATUS, NULL, 0, &resp, 5 * NS_PER_S) == 0) {
        char *js = strndup((const char *)resp.data, resp.len);
        says = js && strstr(js, what);
        free(js);
    }
    fab_buf_free(&resp);
    if (c) fab_ctx_destroy(c);
    return says;
}

/* The nth key (from "fo0") whose partition is p of n. */
static void fo_key(unsigned p, unsigned n, unsigned nth, char *k, size_t cap)
{
    for (unsigned i = 0;; i++) {
        snprintf(k, cap, "fo%u", i);
        if (rdkv_key_partition(k, strlen(k), n) == p && nth-- == 0) return;
    }
}

struct fo_round {
    double failover_ms;  /* < 0: no commit within the bound */
    unsigned suspicions; /* members removed before the kill */
    unsigned acked, unknown;
    unsigned victim;
    bool lost;       /* the keys' check failed: a commit acknowledged is not there */
    bool unreadable; /* the check could not read the keys (or the round did not start) */
};

/* The client: every node's endpoint, a survivor's first (it coordinates), into ep. */
static int fo_connect(struct launch *L, unsigned victim, char *ep, size_t cap, rdkv_session **s)
{
    size_t at = 0;
    ep[0] = 0;
    for (unsigned k = 1; k <= L->n; k++) {
        unsigned n = (victim + k) % L->n;
        at += (size_t)snprintf(ep + at, cap - at, "%s%s:%u", at ? "," : "", L->cc.nodes[n].host,
                               L->cc.nodes[n].port);
    }
    char secret[PATH_MAX + 40];
    snprintf(secret, sizeof secret, "%s/%s", L->dir, LAUNCH_CLIENT_SECRET);
    setenv("RDKV_SECRET_FILE", secret, 1);
    return rdkv_connect(ep, NULL, s);
}

/* The load, the false-suspicion check, the kill, and the wait for the first commit after it. */
static void fo_measure(const struct fo_opts *o, struct launch *L, struct fabric *f, unsigned victim,
                       struct fo_mover *m, struct fo_round *out)
{
    pthread_t th;
    if (pthread_create(&th, NULL, fo_mover_main, m)) {
        out->unreadable = true;
        return;
    }
    int64_t until = clock_now_ns() + o->warm_ns;
    while (clock_now_ns() < until) rdkv_sleep_us(20000);
    for (unsigned n = 0; n < L->n; n++)
        if (!fo_status_says(f, n, "\"epoch\":1,")) out->suspicions++;
    int64_t killed = clock_now_ns();
    atomic_store(&m->killed, killed);
    launch_kill(L, victim);
    while (!atomic_load(&m->first_after) && clock_now_ns() < killed + FO_BOUND_NS)
        rdkv_sleep_us(2000);
    int64_t first = atomic_load(&m->first_after);
    out->failover_ms = first ? (double)(first - killed) / 1e6 : -1;
    atomic_store(&m->stop, true);
    pthread_join(th, NULL);
    long v[2] = {0, 0};
    int rc = RDKV_EUNAVAILABLE;
    for (int tries = 0; tries < 100 && rc; tries++)
        if ((rc = fo_move(m, v))) rdkv_sleep_us(50000);
    out->acked = atomic_load(&m->acked);
    out->unknown = atomic_load(&m->unknown);
    long moved = v[1] - FO_START;
    out->unreadable = rc != 0;
    out->lost = !rc && (v[0] + v[1] != 2 * FO_START || moved < (long)out->acked ||
                        moved > (long)(out->acked + out->unknown));
}

static void fo_round(const struct fo_opts *o, unsigned round, struct fo_round *out)
{
    memset(out, 0, sizeof *out);
    out->failover_ms = -1;
    struct launch_opts lo;
    launch_opts_init(&lo);
    lo.nodes = o->nodes;
    lo.replicas = o->replicas;
    lo.arena_size = 128ull << 20;
    if (o->lease) {
        lo.extra[0] = "--replica-lease";
        lo.extra[1] = o->lease;
    }
    struct launch L;
    char err[512] = "";
    if (launch_start(&L, &lo, err, sizeof err)) {
        fprintf(stderr, "kvbench failover: round %u: %s\n", round, err);
        out->unreadable = true;
        return;
    }
    struct fab_opts fo;
    fab_opts_init(&fo);
    fo.cluster = &L.cc;
    fo.node = FAB_NODE_CLIENT;
    fo.transport = FAB_SOFT;
    struct fabric *f = NULL;
    err[0] = 0;
    int rc = fab_open(&fo, &f, err, sizeof err);
    unsigned mgr = o->nodes;
    int64_t until = clock_now_ns() + 10 * NS_PER_S; /* (the election may still be on) */
    while (!rc && mgr == o->nodes && clock_now_ns() < until) {
        for (unsigned n = 0; n < o->nodes && mgr == o->nodes; n++)
            if (fo_status_says(f, n, "\"manager\":true")) mgr = n;
        if (mgr == o->nodes) rdkv_sleep_us(50000);
    }
    /* a node that is not the manager (whose death waits for ZooKeeper's session timeout too) */
    unsigned victim = (mgr + 1 + round % (o->nodes - 1)) % o->nodes;
    out->victim = victim;
    struct fo_mover m = {0};
    fo_key(victim, o->nodes, 0, m.a, sizeof m.a);
    fo_key(victim, o->nodes, 1, m.b, sizeof m.b);
    char v[16];
    int vl = snprintf(v, sizeof v, "%d", FO_START);
    char ep[LAUNCH_MAX * 24];
    m.ep = ep;
    if (!rc) rc = fo_connect(&L, victim, ep, sizeof ep, &m.s);
    if (!rc) rc = rdkv_put(m.s, m.a, strlen(m.a), v, (size_t)vl);
    if (!rc) rc = rdkv_put(m.s, m.b, strlen(m.b), v, (size_t)vl);
    if (rc) {
        fprintf(stderr, "kvbench failover: round %u: %s%s%s\n", round, rdkv_strerror(rc),
                err[0] ? ": " : "", err);
        out->unreadable = true;
    } else {
        fo_measure(o, &L, f, victim, &m, out);
    }
    if (m.s) rdkv_session_close(m.s);
    if (f) fab_close(f);
    launch_stop(&L, 10 * NS_PER_S);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void fo_parse(int argc, char **argv, struct fo_opts *o)
{
    *o = (struct fo_opts){.kills = 10, .nodes = 3, .replicas = 3, .warm_ns = 2 * NS_PER_S};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            exit(0);
        }
        if (!v) bench_value_missing("failover", usage, a);
        uint64_t n = 0;
        if (!strcmp(a, "--kills") || !strcmp(a, "--nodes") || !strcmp(a, "--replicas")) {
            if (parse_u64(v, &n) || n < 1 || n > LAUNCH_MAX)
                bench_usage_error("failover",
                                  "--kills, --nodes and --replicas take 1..64 (got "
                                  "'%s')",
                                  v);
            *(!strcmp(a, "--kills")   ? &o->kills
              : !strcmp(a, "--nodes") ? &o->nodes
                                      : &o->replicas) = (unsigned)n;
        } else if (!strcmp(a, "--replica-lease")) {
            o->lease = v;
        } else if (!strcmp(a, "--warm")) {
            if (parse_duration_ns(v, &o->warm_ns) || o->warm_ns < 0)
                bench_usage_error("failover", "bad --warm '%s'", v);
        } else {
            bench_usage_error("failover", "unknown option '%s'", a);
        }
        i++;
    }
    if (o->nodes < 2 || o->replicas < 2 || o->replicas > o->nodes)
        bench_usage_error("failover", "needs --nodes >= 2 and 2 <= --replicas <= --nodes%s", "");
}

int cmd_failover(int argc, char **argv)
{
    struct fo_opts o;
    fo_parse(argc, argv, &o);
    bench_install_signals();
    double ms[LAUNCH_MAX];
    unsigned got = 0, suspicions = 0, lost = 0, unreadable = 0, none = 0;
    for (unsigned r = 0; r < o.kills && !bench_stop; r++) {
        struct fo_round x;
        fo_round(&o, r, &x);
        printf("round %u: node %u killed; first commit on its keys %.0f ms after the kill; %u "
               "members removed before it; %u moves acknowledged, %u unknown; %s\n",
               r + 1, x.victim, x.failover_ms, x.suspicions, x.acked, x.unknown,
               x.lost         ? "A COMMIT LOST"
               : x.unreadable ? "keys unreadable"
                              : "all there");
        fflush(stdout);
        suspicions += x.suspicions;
        lost += x.lost;
        unreadable += x.unreadable;
        if (x.failover_ms >= 0)
            ms[got++] = x.failover_ms;
        else
            none++;
    }
    qsort(ms, got, sizeof *ms, cmp_double);
    printf("[FAILOVER], Rounds, %u\n", got + none);
    printf("[FAILOVER], p50(ms), %.0f\n", got ? ms[(got - 1) / 2] : -1.0);
    printf("[FAILOVER], max(ms), %.0f\n", got ? ms[got - 1] : -1.0);
    printf("[FAILOVER], FalseSuspicions, %u\n", suspicions);
    printf("[FAILOVER], RoundsWithoutCommit, %u\n", none);
    printf("[FAILOVER], RoundsUnreadable, %u\n", unreadable);
    printf("[FAILOVER], RoundsLosingCommits, %u\n", lost);
    return lost || unreadable || none ? 1 : 0;
}
