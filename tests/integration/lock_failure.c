/* Dead holders do not wedge rows. A kvserver process takes shared and exclusive DSLR and rwlock
 * locks on two other nodes, local and remote to those nodes' threads, and is killed with
 * SIGKILL while it holds them. Threads on the surviving nodes must get every one of those locks
 * before a deadline of three leases (through the lease-expiry resets; ten in the slow runs:
 * verbs in the guest, sanitizers), and afterwards the counters must be intact: nothing
 * outstanding, no stray marks, and the locks keep working. */
#include "tests/harness.h"
#include "tests/testenv.h"
#include "tools/launcher.h"

#include "common/clock.h"
#include "common/pack.h"
#include "locks/lock.h"
#include "server/proto.h"


#define LEASE (200 * NS_PER_MS) /* long enough that a loaded CI machine keeps its leases */
#define LOCKS 12               /* 4 per node */

struct cluster {
    struct launch L;
    struct fabric *f;
    struct fab_ctx *c;
};

static int start(struct cluster *cl)
{
    struct launch_opts lo;
    launch_opts_init(&lo);
    lo.nodes = 3;
    lo.bindir = tenv_bindir;
    lo.transport = tenv_transport;
    lo.arena_size = 16u << 20;
    lo.bench = true; /* the lock-holding RPCs are kvbench's (tools/kvbench/node/bench_lock.c) */
    char err[256];
    int rc = launch_start(&cl->L, &lo, err, sizeof err);
    if (rc) {
        fprintf(stderr, "  launch: %s\n", err);
        return rc;
    }
    struct fab_opts o;
    fab_opts_init(&o);
    o.cluster = &cl->L.cc;
    o.node = FAB_NODE_CLIENT;
    o.transport = tenv_transport;
    rc = fab_open(&o, &cl->f, err, sizeof err);
    if (!rc) rc = fab_ctx_create(cl->f, &cl->c);
    if (rc) {
        fprintf(stderr, "  open: %s\n", err);
        launch_stop(&cl->L, 5 * NS_PER_S);
    }
    return rc;
}

static void stop(struct cluster *cl)
{
    fab_ctx_destroy(cl->c);
    fab_close(cl->f);
    launch_stop(&cl->L, 10 * NS_PER_S);
}

struct item {
    uint16_t node;
    uint32_t idx;
    uint8_t mode;
};

/* One run of dead_holder: the algorithm and the locks' first index; for wait-die (0: not) the
 * holder's age and the requesters' (older = smaller), and the bound of each of a requester's
 * attempts, which repeat until the try's timeout as a transaction's retries would; and whether
 * the lock's own node asks first (rwlock: rule 4's recovery). */
struct variant {
    const char *algo;
    uint32_t base;
    uint64_t holder_age, try_age;
    int64_t try_each_ns;
    bool home_first;
};

static int hold(struct cluster *cl, uint16_t on, const struct variant *v, const struct item *it,
                unsigned n)
{
    struct pack_w w;
    pack_w_init(&w);
    pack_str(&w, v->algo);
    pack_u64(&w, LEASE);
    pack_u32(&w, LOCKS);
    pack_u32(&w, n);
    for (unsigned i = 0; i < n; i++) {
        pack_u16(&w, it[i].node);
        pack_u32(&w, it[i].idx);
        pack_u8(&w, it[i].mode);
    }
    if (v->holder_age) pack_u64(&w, v->holder_age);
    struct fab_buf resp = {0};
    int rc = fab_rpc_call(cl->c, on, KV_RPC_BENCH_LOCK_HOLD, w.p, w.len, &resp, 30 * NS_PER_S);
    pack_w_free(&w);
    fab_buf_free(&resp);
    return rc;
}

static int try_lock(struct cluster *cl, uint16_t on, const struct variant *v, struct item it,
                    int64_t timeout, uint64_t line[8], int64_t *elapsed)
{
    struct pack_w w;
    pack_w_init(&w);
    pack_str(&w, v->algo);
    pack_u64(&w, LEASE);
    pack_u32(&w, LOCKS);
    pack_u16(&w, it.node);
    pack_u32(&w, it.idx);
    pack_u8(&w, it.mode);
    pack_u64(&w, (uint64_t)timeout);
    if (v->try_age) {
        pack_u64(&w, v->try_age);
        pack_u64(&w, (uint64_t)v->try_each_ns);
    }
    struct fab_buf resp = {0};
    int rc = fab_rpc_call(cl->c, on, KV_RPC_BENCH_LOCK_TRY, w.p, w.len, &resp, timeout + 30 * NS_PER_S);
    pack_w_free(&w);
    if (rc == 0) {
        struct pack_r r;
        pack_r_init(&r, resp.data, resp.len);
        *elapsed = (int64_t)unpack_u64(&r);
        for (int i = 0; i < 8; i++) line[i] = unpack_u64(&r);
        if (!unpack_done(&r)) rc = RDKV_EPROTO;
    }
    fab_buf_free(&resp);
    return rc;
}

static bool dslr_quiet(uint64_t w)
{
    return (w >> 48 & 0xFFFF) == (w >> 16 & 0xFFFF) && (w >> 32 & 0xFFFF) == (w & 0xFFFF);
}

/* rwlock: both ticket words served up to their last ticket, both cross words without marks --
 * raised X and S members and waiters, the low 40 bits; above them are refresh counters, which
 * only ever tick (a wait-die request that backs off behind older readers ticks ACTW) -- else
 * the words are printed. */
static bool rwlock_quiet(const uint64_t l[8])
{
    uint64_t marks = (1ull << 40) - 1;
    bool q = dslr_quiet(l[0]) && dslr_quiet(l[2]) && !(l[1] & marks) && !(l[3] & marks);
    if (!q)
        fprintf(stderr, "  not quiet: RT %016llx RC %016llx LT %016llx LC %016llx\n",
                (unsigned long long)l[0], (unsigned long long)l[1], (unsigned long long)l[2],
                (unsigned long long)l[3]);
    return q;
}

static void dead_holder(const struct variant *v)
{
    const char *algo = v->algo;
    uint32_t base = v->base;
    if (!tenv_bindir) SKIP("needs --bindir to find kvserver");
    struct cluster cl;
    REQUIRE(start(&cl) == 0);
    struct pack_w w;
    pack_w_init(&w);
    pack_u32(&w, LOCKS);
    struct fab_buf resp = {0};
    for (uint16_t n = 0; n < 3; n++)
        CHECK_EQ(fab_rpc_call(cl.c, n, KV_RPC_BENCH_LOCK_PREPARE, w.p, w.len, &resp, 0), 0);
    pack_w_free(&w);
    fab_buf_free(&resp);
    /* node 2 holds X and S locks on nodes 0 and 1 */
    struct item held[4] = {{0, base, LOCK_EXCLUSIVE}, {0, base + 1, LOCK_SHARED},
                           {1, base, LOCK_EXCLUSIVE}, {1, base + 1, LOCK_SHARED}};
    CHECK_EQ(hold(&cl, 2, v, held, 4), 0);
    CHECK_EQ(launch_kill(&cl.L, 2), 0);
    /* Every held lock, exclusively, first from a thread on the other surviving node (remote:
     * it must get past the dead holder's ticket), then from a thread on the lock's own node
     * (local: for rwlock, the CPU side recovering the dead member's mark in the remote cohort's
     * cross word). Each within five leases -- ten where everything runs slower (verbs in the
     * emulated guest, sanitizers) -- since the recovery itself takes two leases of a waiter's
     * polls, and a 2-core machine running other tests beside this one stretched one past the
     * third (600 ms, once in a full ctest -j2). */
    int64_t patience = (tenv_slow() ? 10 : 5) * LEASE;
    for (unsigned i = 0; i < 4; i++) {
        uint16_t home = held[i].node, other = (uint16_t)(1 - home);
        uint16_t order[2] = {v->home_first ? home : other, v->home_first ? other : home};
        uint64_t line[8] = {0};
        int64_t elapsed = 0;
        bool ok = true;
        for (unsigned k = 0; k < 2; k++) {
            struct item want = held[i];
            want.mode = LOCK_EXCLUSIVE;
            int rc = try_lock(&cl, order[k], v, want, patience, line, &elapsed);
            fprintf(stderr, "  %s: lock %u on node %u (held %s by the dead node) from node %u: %s"
                            " after %.0f ms\n", algo, want.idx, want.node,
                    held[i].mode == LOCK_SHARED ? "shared" : "exclusively", order[k],
                    rdkv_strerror(rc), (double)(rc ? patience : elapsed) / 1e6);
            CHECK_EQ(rc, 0);
            ok = ok && rc == 0;
        }
        if (!ok) continue;
        /* the counters are intact: nothing outstanding, no stray marks */
        if (!strcmp(algo, "rwlock")) CHECK(rwlock_quiet(line));
        else CHECK(dslr_quiet(line[0]));
        /* and the lock keeps working in both modes from both sides, without waiting for leases */
        static const uint8_t modes[2] = {LOCK_SHARED, LOCK_EXCLUSIVE};
        for (unsigned k = 0; k < 4; k++) {
            struct item want = held[i];
            want.mode = modes[k % 2];
            CHECK_EQ(try_lock(&cl, order[k / 2], v, want, LEASE, line, &elapsed), 0);
        }
        if (!strcmp(algo, "rwlock")) CHECK(rwlock_quiet(line));
        else CHECK(dslr_quiet(line[0]));
    }
    stop(&cl);
}

static void t_dead_holder_dslr(void) { dead_holder(&(struct variant){.algo = "dslr", .base = 0}); }
static void t_dead_holder_rwlock(void)
{
    dead_holder(&(struct variant){.algo = "rwlock", .base = 2});
}

/* Wait-die: the dead holder is older than every request after it, so each would die before it
 * waits, and nobody would ever wait out the lease (locks/rwlock.c, dead_line). Requests of
 * transactions' shape -- younger, each attempt bounded by a lock timeout far under a lease,
 * retried -- must still get the locks within the same bound. */
static void t_dead_holder_rwlock_waitdie(void)
{
    struct variant v = {.algo = "rwlock", .base = 2, .holder_age = 1000, .try_age = 2000,
                        .try_each_ns = 20 * NS_PER_MS};
    dead_holder(&v);
    v.home_first = true; /* again, the lock's own node first: rule 4's recovery */
    dead_holder(&v);
}

static const struct test_case cases[] = {
    {"dead_holder_dslr", t_dead_holder_dslr},
    {"dead_holder_rwlock", t_dead_holder_rwlock},
    {"dead_holder_rwlock_waitdie", t_dead_holder_rwlock_waitdie},
};

int main(int argc, char **argv)
{
    return tenv_main(argc, argv, "lock failure tests", cases, sizeof cases / sizeof cases[0]);
}
