/* Abuse rows 6-9 of issue 17 (docs/security.md, "Resource bounds"), each against real kvserver
 * processes on 127.0.0.1 started by the launcher, with attacker connections from raw.h:
 *
 * slow_reader (row 6): a connection pipelines 1,000 one-sided READs of 1 MiB and never reads a
 *   reply. The node's RSS stays within RSS_BOUND_KIB of what it was (it used to grow by 1 GB),
 *   a normal client's puts and gets meanwhile succeed and read back intact, the attacker's
 *   connection is paused, not dropped (its first reply still comes when it reads), and neither
 *   peer declares the node down.
 * big_preauth (row 7): 20 connections announce a 16 MiB frame before any HELLO: each is closed
 *   on the header, and the node's RSS stays within RSS_BOUND_KIB (it used to take 16 MiB each).
 *   A HELLO (the negative control) is still accepted.
 * fd_limit (row 8): a node runs at its fd limit (lowered with prlimit) while 40 connections sit
 *   on it: it keeps serving a client that was connected before, logs at most a few "accept:"
 *   lines (it used to write millions), and takes new clients again once the attackers leave.
 *   conn_cap: with --max-conns, a connection beyond the cap is refused with RDKV_EBUSY, and
 *   served again once connections close.
 * timeouts: a connection that says nothing is closed after --hello-timeout, an idle client
 *   connection after --conn-idle; a node's connection is not, and a client whose connection
 *   was closed for idleness carries on.
 * bench_off (row 9): a node not started with --bench answers the workload and benchmark RPCs
 *   with RDKV_ENOTSUP and a text naming --bench; a node started with it serves them (the
 *   negative control).
 * multi_reply: a client's one SES_MULTI of 1,024 GETs of a 256 KiB value (13 KB asked, 256 MiB
 *   to answer) is answered RDKV_ETOOBIG by the session, the node's peak RSS (VmHWM, reset just
 *   before) staying within MULTI_BOUND_KIB (the reply used to be built whole: +500 MiB); an
 *   interactive transaction doing it has failed (its commit says RDKV_ETOOBIG) and holds no lock;
 *   the session goes on, and a SES_MULTI whose answer fits is served (the negative control).
 * echo_conns: 40 echo connections (the raw TCP baseline of kvbench fabric) asked for with the
 *   client secret are refused RDKV_EPERM and add no node thread (each used to get a thread of
 *   its own, past --max-conns and --conn-idle), and an ordinary client is served meanwhile.
 *   With the node secret (the negative control) they echo; they count against --max-conns and
 *   their own cap (RDKV_EBUSY beyond), the node's threads stay within that cap, and one that
 *   idles for --conn-idle is closed.
 *
 * Bounds are on memory and counts, never on timing; every loop is bounded in count and time. */
#include "tests/harness.h"
#include "tests/testenv.h"
#include "tests/integration/abuse/raw.h"

#include "rdkv.h"
#include "server/node.h"
#include "server/proto.h"
#include "storage/store.h"
#include "tools/kvbench/runner.h"
#include "tools/launcher.h"

#include "common/clock.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

/* How much a node's RSS may grow under one abuse row. The node's own bounds are about 5 MiB per
 * connection (the output cap plus one reply); the rest is slack for the client's work. */
#define RSS_BOUND_KIB (48L * 1024)
#define NODES 3
#define FD_LIMIT 40

struct cl {
    struct launch L;
    char secret[PATH_MAX + 32], client_secret[PATH_MAX + 32]; /* the launcher's, in L.dir */
};

static int cl_start(struct cl *c, unsigned n, bool bench, const char *const *extra)
{
    struct launch_opts lo;
    launch_opts_init(&lo);
    lo.nodes = n;
    lo.bindir = tenv_bindir;
    lo.transport = FAB_SOFT;
    lo.arena_size = 64u << 20;
    lo.bench = bench;
    for (unsigned i = 0; extra && extra[i] && i < 13; i++) lo.extra[i] = extra[i];
    char err[512];
    int rc = launch_start(&c->L, &lo, err, sizeof err);
    if (rc) fprintf(stderr, "  launch: %s\n", err);
    snprintf(c->secret, sizeof c->secret, "%s/" LAUNCH_SECRET, c->L.dir);
    snprintf(c->client_secret, sizeof c->client_secret, "%s/" LAUNCH_CLIENT_SECRET, c->L.dir);
    return rc;
}

/* Stops the nodes: each must exit cleanly (status 0), whatever it went through. */
static void cl_stop(struct cl *c) { CHECK_EQ(launch_stop(&c->L, 10 * NS_PER_S), 0); }

static uint16_t port_of(struct cl *c, unsigned node) { return c->L.cc.nodes[node].port; }

/* The endpoints, node `first` first (it coordinates the session). */
static void endpoints(struct cl *c, unsigned first, char *buf, size_t cap)
{
    size_t at = 0;
    for (unsigned k = 0; k < c->L.n && at < cap; k++) {
        unsigned i = (first + k) % c->L.n;
        at += (size_t)snprintf(buf + at, cap - at, "%s127.0.0.1:%u", k ? "," : "", port_of(c, i));
    }
}

static int connect_to(struct cl *c, unsigned first, rdkv_session **s)
{
    char ep[256];
    endpoints(c, first, ep, sizeof ep);
    rdkv_options o;
    rdkv_options_init(&o);
    o.connect_timeout_ms = 2000;
    o.secret_file = c->client_secret;
    return rdkv_connect(ep, &o, s);
}

/* A key of node `node`'s partition. */
static void key_on(unsigned n, unsigned node, const char *p, unsigned i, char *out, size_t cap)
{
    for (unsigned j = 0; j < 100000; j++) {
        snprintf(out, cap, "%s:%u:%u", p, i, j);
        if (store_place_hash(out, (uint32_t)strlen(out)) % n == node) return;
    }
}

/* Writes key = a value derived from it and i, reads it back: 0 when intact. */
static int put_get(rdkv_session *s, const char *key, unsigned i)
{
    char val[64];
    int vl = snprintf(val, sizeof val, "v%u/%s", i, key);
    int rc = rdkv_put(s, key, strlen(key), val, (size_t)vl);
    if (rc) return rc;
    const void *got;
    size_t gl;
    rc = rdkv_get(s, key, strlen(key), &got, &gl);
    if (rc) return rc;
    return gl == (size_t)vl && !memcmp(got, val, gl) ? 0 : RDKV_EPROTO;
}

static void log_path(struct cl *c, unsigned node, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/node-%u.log", c->L.dir, node);
}

/* Lines of a node's log containing all of the given substrings (b may be NULL). */
static long log_count(struct cl *c, unsigned node, const char *a, const char *b)
{
    char path[PATH_MAX + 32];
    log_path(c, node, path, sizeof path);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[1024];
    long n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, a) && (!b || strstr(line, b))) n++;
    fclose(f);
    return n;
}

/* A number from /proc/<pid>/status ("VmHWM:", "VmRSS:" in KiB; "Threads:"), or -1. */
static long proc_status(int pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long v = -1;
    size_t fl = strlen(field);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, fl)) {
            v = strtol(line + fl, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* Resets the peak RSS (VmHWM) of pid to its current RSS (proc(5), clear_refs "5"): 0 or -1. */
static int hwm_reset(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/clear_refs", pid);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int rc = fputs("5", f) < 0 ? -1 : 0;
    return fclose(f) || rc ? -1 : 0;
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Polls cond until it holds or timeout_ms passes. */
#define WAIT_FOR(cond, timeout_ms)                                                                 \
    ({                                                                                             \
        int64_t dl_ = clock_now_ns() + (int64_t)(timeout_ms) * NS_PER_MS;                          \
        bool ok_;                                                                                  \
        while (!(ok_ = (cond)) && clock_now_ns() < dl_) nap_ms(20);                                \
        ok_;                                                                                       \
    })

/* A raw connection claiming to be node `claim` and proving it with the node secret: the
 * abuse here is what a node's credential can still do (one-sided operations are for nodes). */
static struct raw_opts raw_node_opts(struct cl *c, unsigned claim, unsigned dst)
{
    struct raw_opts o = {.src_node = (uint16_t)claim, .dst_node = (uint16_t)dst,
                         .cluster_fp = c->L.cc.fingerprint, .timeout_ms = 2000,
                         .secret_file = c->secret};
    return o;
}

/* A raw client connection, with the client secret. */
static struct raw_opts raw_client_opts(struct cl *c, int timeout_ms)
{
    struct raw_opts o = {.src_node = FAB_NODE_CLIENT, .dst_node = FAB_NODE_ANY,
                         .timeout_ms = timeout_ms, .secret_file = c->client_secret};
    return o;
}

/* ------------------------------------------------------------------------------------------ */

static void slow_reader(void)
{
    if (!tenv_bindir) SKIP("needs --bindir to find kvserver");
    static struct cl c;
    REQUIRE(cl_start(&c, NODES, false, NULL) == 0);
    rdkv_session *s;
    REQUIRE(connect_to(&c, 0, &s) == 0);
    char key[64];
    for (unsigned i = 0; i < 6; i++) {
        key_on(NODES, i % NODES, "warm", i, key, sizeof key);
        CHECK_EQ(put_get(s, key, i), 0);
    }
    long rss0 = raw_rss_kib(c.L.pids[0]);
    REQUIRE(rss0 > 0);

    /* The attacker: a node's connection (one-sided operations are for nodes) that asks for
     * 1,000 READs of 1 MiB and reads nothing. */
    struct raw a;
    struct raw_opts ro = raw_node_opts(&c, 1, 0);
    REQUIRE(raw_dial(&a, "127.0.0.1", port_of(&c, 0), &ro) == 0);
    unsigned sent = 0;
    for (unsigned i = 0; i < 1000; i++) {
        struct wire_op_req op = {.op = FAB_OP_READ, .len = WIRE_OP_MAX, .off = 0};
        if (raw_send_op(&a, &op, NULL)) break; /* the node stopped reading: backpressure */
        sent++;
    }
    CHECK(sent >= 100);

    /* Meanwhile a normal client on the same node, for longer than the peers take to declare a
     * silent node down (4 heartbeats of 250 ms), so that a stalled service thread would show. */
    long peak = rss0;
    unsigned ok = 0, tries = 0;
    int64_t until = clock_now_ns() + 2 * NS_PER_S;
    while (tries < 60 || (clock_now_ns() < until && tries < 20000)) {
        key_on(NODES, tries % NODES, "during", tries % 60, key, sizeof key);
        if (put_get(s, key, tries % 60) == 0) ok++;
        tries++;
        long r = raw_rss_kib(c.L.pids[0]);
        if (r > peak) peak = r;
    }
    CHECK_EQ(ok, tries);
    fprintf(stderr, "  node 0 RSS %ld KiB -> peak %ld KiB with %u READs of 1 MiB unread\n", rss0,
            peak, sent);
    CHECK(peak - rss0 < RSS_BOUND_KIB);

    /* Paused, not dropped: the first reply is there when the attacker reads. */
    struct wire_hdr h;
    uint8_t *body = NULL;
    CHECK_EQ(raw_recv_frame(&a, &h, &body), 0);
    CHECK_EQ(h.type, WIRE_OP_RESP);
    free(body);
    raw_close(&a);

    /* After: everything still reads back, and no peer ever said node 0 was down. */
    for (unsigned i = 0; i < 60; i += 7) {
        key_on(NODES, i % NODES, "during", i, key, sizeof key);
        char val[64];
        int vl = snprintf(val, sizeof val, "v%u/%s", i, key); /* the last write of key i */
        const void *got;
        size_t gl;
        CHECK_EQ(rdkv_get(s, key, strlen(key), &got, &gl), 0);
        CHECK(gl == (size_t)vl && !memcmp(got, val, gl));
    }
    CHECK_EQ(log_count(&c, 1, "peer node 0 ", "down"), 0);
    CHECK_EQ(log_count(&c, 2, "peer node 0 ", "down"), 0);
    rdkv_session_close(s);
    cl_stop(&c);
}

static void big_preauth(void)
{
    if (!tenv_bindir) SKIP("needs --bindir to find kvserver");
    static struct cl c;
    REQUIRE(cl_start(&c, NODES, false, NULL) == 0);
    long rss0 = raw_rss_kib(c.L.pids[0]);
    REQUIRE(rss0 > 0);
    enum { N = 20 };
    static struct raw a[N];
    unsigned dialled = 0, closed = 0;
    for (unsigned i = 0; i < N; i++) {
        struct raw_opts ro = {.no_hello = 1, .timeout_ms = 5000};
        if (raw_dial(&a[i], "127.0.0.1", port_of(&c, 0), &ro)) continue;
        dialled++;
        uint8_t hdr[WIRE_HDR_SIZE + 1024];
        wire_put_hdr(hdr, WIRE_RPC_REQ, 16u << 20); /* a 16 MiB body announced... */
        memset(hdr + WIRE_HDR_SIZE, 0xab, 1024);    /* ...and the first KiB of it */
        raw_send(&a[i], hdr, sizeof hdr);
    }
    CHECK_EQ(dialled, N);
    for (unsigned i = 0; i < N; i++)
        if (a[i].fd >= 0 && raw_closed_by_peer(&a[i])) closed++;
    CHECK_EQ(closed, N);
    long rss1 = raw_rss_kib(c.L.pids[0]);
    fprintf(stderr, "  node 0 RSS %ld KiB -> %ld KiB after %u announced 16 MiB frames\n", rss0,
            rss1, dialled);
    CHECK(rss1 - rss0 < RSS_BOUND_KIB);
    for (unsigned i = 0; i < N; i++) raw_close(&a[i]);

    /* The negative control: a HELLO fits the limit, and the node serves a client. */
    struct raw h;
    struct raw_opts ro = raw_client_opts(&c, 5000);
    CHECK_EQ(raw_dial(&h, "127.0.0.1", port_of(&c, 0), &ro), 0);
    raw_close(&h);
    rdkv_session *s;
    REQUIRE(connect_to(&c, 0, &s) == 0);
    CHECK_EQ(put_get(s, "preauth:after", 1), 0);
    rdkv_session_close(s);
    cl_stop(&c);
}

static int count_fds(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", pid);
    DIR *d = opendir(path);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 100000;)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static void fd_limit(void)
{
    if (!tenv_bindir) SKIP("needs --bindir to find kvserver");
    static struct cl c;
    static const char *const extra[] = {"--hello-timeout", "1s", NULL};
    /* The nodes inherit a low fd limit (a node takes its limit at start: io_uring reads it when
     * the accept is armed), restored here once they run. */
    struct rlimit rl, low;
    REQUIRE(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    low = rl;
    low.rlim_cur = FD_LIMIT;
    REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
    int started = cl_start(&c, NODES, false, extra);
    setrlimit(RLIMIT_NOFILE, &rl);
    REQUIRE(started == 0);
    const unsigned victim = 2;
    pid_t pid = c.L.pids[victim];
    rdkv_session *s;
    REQUIRE(connect_to(&c, victim, &s) == 0);
    char key[64];
    /* keys of the victim's own partition: served with no new connection of its own */
    for (unsigned i = 0; i < 5; i++) {
        key_on(NODES, victim, "fd", i, key, sizeof key);
        CHECK_EQ(put_get(s, key, i), 0);
    }
    int nfd = count_fds(pid);
    REQUIRE(nfd > 0 && nfd < FD_LIMIT);

    enum { N = 40 };
    static struct raw a[N];
    for (unsigned i = 0; i < N; i++) {
        struct raw_opts ro = {.no_hello = 1, .timeout_ms = 2000};
        raw_dial(&a[i], "127.0.0.1", port_of(&c, victim), &ro);
    }
    CHECK(WAIT_FOR(log_count(&c, victim, "accept:", "Too many open files") > 0, 10000));
    /* The node at its limit keeps serving the client it has. */
    unsigned ok = 0;
    for (unsigned i = 0; i < 100; i++) {
        key_on(NODES, victim, "fdlim", i, key, sizeof key);
        if (put_get(s, key, i) == 0) ok++;
    }
    CHECK_EQ(ok, 100);
    long lines = log_count(&c, victim, "accept:", NULL);
    fprintf(stderr, "  node %u (fd limit %d, %d in use before): %ld accept lines in its log\n",
            victim, FD_LIMIT, nfd, lines);
    CHECK(lines >= 1 && lines <= 3);
    for (unsigned i = 0; i < N; i++) raw_close(&a[i]);
    /* Once the attackers are gone (or timed out), new clients get in again. */
    rdkv_session *s2 = NULL;
    char ep[64];
    snprintf(ep, sizeof ep, "127.0.0.1:%u", port_of(&c, victim));
    rdkv_options o;
    rdkv_options_init(&o);
    o.connect_timeout_ms = 1000;
    o.secret_file = c.client_secret;
    CHECK(WAIT_FOR(rdkv_connect(ep, &o, &s2) == 0, 15000));
    if (s2) {
        key_on(NODES, victim, "fd:after", 0, key, sizeof key);
        CHECK_EQ(put_get(s2, key, 0), 0);
        rdkv_session_close(s2);
    }
    CHECK(log_count(&c, victim, "accept:", NULL) <= 4);
    rdkv_session_close(s);
    cl_stop(&c);
}

static void conn_cap(void)
{
    if (!tenv_bindir) SKIP("needs --bindir to find kvserver");
    static struct cl c;
    static const char *const extra[] = {"--max-conns", "48", NULL};
    REQUIRE(cl_start(&c, NODES, false, extra) == 0);
    enum { N = 64 };
    static struct raw a[N];
    for (unsigned i = 0; i < N; i++) a[i].fd = -1; /* (those never dialled: raw_close skips) */
    unsigned accepted = 0, busy = 0, other = 0;
    for (unsigned i = 0; i < N; i++) {
        struct raw_opts ro = raw_client_opts(&c, 5000);
        int rc = raw_dial(&a[i], "127.0.0.1", port_of(&c, 0), &ro);
        if (rc == 0) accepted++;
        else if (rc == RDKV_EBUSY) busy++;
        else other++;
        if (rc == RDKV_EBUSY) break;
    }
    fprintf(stderr, "  --max-conns 48: %u accepted, then %u refused busy\n", accepted, busy);
    CHECK(accepted >= 1 && accepted < 48);
    CHECK_EQ(busy, 1);
    CHECK_EQ(other, 0);
    CHECK(log_count(&c, 0, "refusing connections", NULL) >= 1);
    for (unsigned i = 0; i < N; i++) raw_close(&a[i]);
    rdkv_session *s = NULL;
    CHECK(WAIT_FOR(connect_to(&c, 0, &s) == 0, 10000));
    if (s) {
        CHECK_EQ(put_get(s, "cap:after", 1), 0);
        rdkv_session_close(s);
    }
    cl_stop(&c);
}

static void timeouts(void)
{
    if (!tenv_bindir) SKIP("needs --bindir to find kvserver");
    static struct cl c;
    static const char *const extra[] = {"--hello-timeout", "1s", "--session-idle", "1s",
                                        "--conn-idle", "2s", NULL};
    REQUIRE(cl_start(&c, NODES, false, extra) == 0);
    rdkv_session *s;
    REQUIRE(connect_to(&c, 0, &s) == 0);
    CHECK_EQ(put_get(s, "idle:k", 1), 0);
    struct raw mute, client, peer;
    struct raw_opts nh = {.no_hello = 1, .timeout_ms = 6000};
    struct raw_opts co = raw_client_opts(&c, 8000);
    struct raw_opts po = raw_node_opts(&c, 1, 0);
    REQUIRE(raw_dial(&mute, "127.0.0.1", port_of(&c, 0), &nh) == 0);
    REQUIRE(raw_dial(&client, "127.0.0.1", port_of(&c, 0), &co) == 0);
    REQUIRE(raw_dial(&peer, "127.0.0.1", port_of(&c, 0), &po) == 0);
    /* no handshake within 1 s: closed; an idle client connection: closed after 2 s */
    CHECK_EQ(raw_closed_by_peer(&mute), 1);
    CHECK_EQ(raw_closed_by_peer(&client), 1);
    /* a node's connection is never idle-closed: still open now that the client's was closed */
    peer.timeout_ms = 0;
    CHECK_EQ(raw_closed_by_peer(&peer), 0);
    int32_t st = -1;
    peer.timeout_ms = 5000;
    CHECK_EQ(raw_send_rpc(&peer, 9, KV_RPC_STATUS, NULL, 0), 0);
    CHECK_EQ(raw_rpc_reply(&peer, 9, &st, NULL, 0, NULL), 0);
    CHECK_EQ(st, 0);
    raw_close(&mute);
    raw_close(&client);
    raw_close(&peer);
    /* A client whose idle connection was closed carries on: it reconnects. Its first request
     * may fail (it went out on the closed connection: RDKV_EUNAVAILABLE for a read,
     * RDKV_EUNKNOWN for a write; docs/security.md, "Idle"); the next ones succeed and the data
     * is intact. */
    const void *got;
    size_t gl = 0;
    int rc = rdkv_get(s, "idle:k", 6, &got, &gl);
    for (unsigned i = 0; (rc == RDKV_EUNAVAILABLE || rc == RDKV_EUNKNOWN) && i < 2; i++)
        rc = rdkv_get(s, "idle:k", 6, &got, &gl);
    CHECK_EQ(rc, 0);
    CHECK(gl == 9 && !memcmp(got, "v1/idle:k", 9));
    rc = put_get(s, "idle:k", 2);
    CHECK_EQ(rc, 0);
    rdkv_session_close(s);
    cl_stop(&c);
}

/* One RPC on a raw connection of an operator tool (kvbench: the node secret, no node id): its
 * status and the start of its payload. */
static int raw_call(struct cl *c, unsigned node, uint16_t type, int32_t *st, char *text, size_t cap)
{
    struct raw r;
    struct raw_opts ro = raw_client_opts(c, 5000);
    ro.secret_file = c->secret;
    int rc = raw_dial(&r, "127.0.0.1", port_of(c, node), &ro);
    size_t len = 0;
    memset(text, 0, cap);
    if (!rc) rc = raw_send_rpc(&r, 7, type, NULL, 0);
    if (!rc) rc = raw_rpc_reply(&r, 7, st, text, cap - 1, &len);
    raw_close(&r);
    return rc;
}

static void bench_off(void)
{
    if (!tenv_bindir) SKIP("needs --bindir to find kvserver");
    static struct cl prod, bench;
    REQUIRE(cl_start(&prod, 1, false, NULL) == 0);
    static const uint16_t types[] = {KV_RPC_WL_POLL, KV_RPC_WL_LOAD, KV_RPC_BENCH_TXN_LOAD,
                                     KV_RPC_BENCH_LOCK_PREPARE, KV_RPC_BENCH_RANGE_STATS};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        int32_t st = 0;
        char text[128];
        CHECK_EQ(raw_call(&prod, 0, types[i], &st, text, sizeof text), 0);
        CHECK_EQ(st, RDKV_ENOTSUP);
        CHECK(strstr(text, "--bench") != NULL);
    }
    cl_stop(&prod);
    /* The negative control: a node started for benchmarks serves them. */
    REQUIRE(cl_start(&bench, 1, true, NULL) == 0);
    int32_t st = -1;
    char text[128];
    CHECK_EQ(raw_call(&bench, 0, KV_RPC_WL_POLL, &st, text, sizeof text), 0);
    CHECK_EQ(st, 0); /* answered by the workload service ("no run": in its body) */
    CHECK_EQ(raw_call(&bench, 0, KV_RPC_BENCH_RANGE_STATS, &st, text, sizeof text), 0);
    CHECK_EQ(st, 0);
    cl_stop(&bench);
}

/* ------------------------------------------------------------------------------------------ */
/* multi_reply: a reply bounded while it is built */

/* The most a node's peak RSS may grow over one SES_MULTI: the largest reply the fabric sends
 * (16 MiB) being built, and slack (measured +22 MiB; +32 MiB under ASan and +50 MiB under TSan,
 * whose allocators keep what realloc left). The unbounded reply took +518 MiB. */
#define MULTI_BOUND_KIB ((TENV_SANITIZED ? 96L : 64L) * 1024)
#define BIG_VALUE (256u << 10)

static uint64_t raw_rpc_id;

/* One session request on a raw client connection: the RPC's status in *rpc_st and, when it is
 * 0, the session's answer status (its u32 first) returned, its bytes after the status into out
 * (up to cap; *len their full length). A link failure: that status, *rpc_st untouched. */
static int raw_ses(struct raw *r, const void *req, size_t len, int32_t *rpc_st, uint8_t *out,
                   size_t cap, size_t *len_out)
{
    uint64_t id = ++raw_rpc_id;
    static uint8_t buf[BIG_VALUE + 64];
    size_t n = 0;
    if (len_out) *len_out = 0;
    int rc = raw_send_rpc(r, id, KV_RPC_SESSION, req, (uint32_t)len);
    if (!rc) rc = raw_rpc_reply(r, id, rpc_st, buf, sizeof buf, &n);
    if (rc) return rc;
    if (*rpc_st) return *rpc_st;
    if (n < 4) return RDKV_EPROTO;
    if (len_out) *len_out = n - 4;
    if (out) memcpy(out, buf + 4, n - 4 < cap ? n - 4 : cap);
    return (int32_t)pack_get_u32le(buf);
}

/* SES_MULTI of n GETs of key (for update when upd) in session sid, with the flags given. */
static int multi_gets(struct raw *r, const struct ses_id *sid, uint8_t flags, unsigned n,
                      const char *key, bool upd, int32_t *rpc_st, size_t *len)
{
    struct pack_w w;
    pack_w_init(&w);
    uint8_t *d = pack_w_room(&w, SES_ID_LEN);
    if (d) memcpy(d, sid->b, SES_ID_LEN);
    pack_u8(&w, SES_MULTI | flags);
    pack_u16(&w, (uint16_t)n);
    for (unsigned i = 0; i < n; i++) {
        pack_u8(&w, SES_GET);
        pack_u8(&w, upd);
        pack_u32(&w, (uint32_t)strlen(key));
        uint8_t *p = pack_w_room(&w, strlen(key));
        if (p) memcpy(p, key, strlen(key));
    }
    int rc = w.err ? RDKV_ENOMEM : raw_ses(r, w.p, w.len, rpc_st, NULL, 0, len);
    pack_w_free(&w);
    return rc;
}

/* A request with no fields but the op (SES_COMMIT, SES_ABORT) in session sid. */
static int ses_bare(struct raw *r, const struct ses_id *sid, uint8_t op, int32_t *rpc_st)
{
    uint8_t req[SES_ID_LEN + 1];
    memcpy(req, sid->b, SES_ID_LEN);
    req[SES_ID_LEN] = op;
    return raw_ses(r, req, sizeof req, rpc_st, NULL, 0, NULL);
}

static void multi_reply(void)
{
    if (!tenv_bindir) SKIP("needs --bindir to find kvserver");
    static struct cl c;
    REQUIRE(cl_start(&c, 1, false, NULL) == 0);
    int pid = c.L.pids[0];
    rdkv_session *s;
    REQUIRE(connect_to(&c, 0, &s) == 0);
    static uint8_t big[BIG_VALUE];
    for (unsigned i = 0; i < BIG_VALUE; i++) big[i] = (uint8_t)(i * 7 + 1);
    const char *key = "multi:big";
    REQUIRE(rdkv_put(s, key, strlen(key), big, sizeof big) == 0);

    struct raw a;
    struct raw_opts ro = raw_client_opts(&c, 60000);
    REQUIRE(raw_dial(&a, "127.0.0.1", port_of(&c, 0), &ro) == 0);
    struct ses_id sid;
    int32_t rst = -1;
    uint8_t open[SES_OPEN_LEN], ans[64];
    size_t alen = 0;
    CHECK_EQ(raw_ses(&a, open, ses_open_request(open), &rst, ans, sizeof ans, &alen), 0);
    REQUIRE(rst == 0 && alen >= SES_ID_LEN);
    memcpy(sid.b, ans, SES_ID_LEN);

    /* The attack: one 13 KB request asking for 1,024 copies of the 256 KiB value (one-shot). */
    /* The peak from now on: VmHWM reset to the current RSS. Where clear_refs cannot be written,
     * the peak so far is the baseline (weaker, but the unbounded reply still shows). */
    bool reset = hwm_reset(pid) == 0;
    if (!reset) fprintf(stderr, "  (cannot reset VmHWM: the baseline is the peak so far)\n");
    long rss0 = proc_status(pid, reset ? "VmRSS:" : "VmHWM:");
    REQUIRE(rss0 > 0);
    size_t len = 0;
    rst = -1;
    int st = multi_gets(&a, &sid, SES_F_BEGIN | SES_F_COMMIT, SES_MULTI_MAX, key, false, &rst,
                        &len);
    long hwm = proc_status(pid, "VmHWM:");
    fprintf(stderr,
            "  node RSS %ld KiB -> peak %ld KiB (+%ld KiB) for one SES_MULTI of %u GETs of a "
            "%u KiB value: RPC status %s, session status %s\n",
            rss0, hwm, hwm - rss0, SES_MULTI_MAX, BIG_VALUE >> 10, rdkv_status_name(rst),
            rdkv_status_name(st));
    CHECK_EQ(rst, 0);                /* the session answered it... */
    CHECK_EQ(st, RDKV_ETOOBIG);      /* ...with the limit it met */
    CHECK(hwm - rss0 < MULTI_BOUND_KIB);

    /* The same in an interactive transaction, reading for update: refused, and the
     * transaction has failed as one past --txn-max-bytes does (its commit says so too; it holds
     * no lock: another client writes the key at once). */
    CHECK_EQ(multi_gets(&a, &sid, SES_F_BEGIN, SES_MULTI_MAX, key, true, &rst, &len),
             RDKV_ETOOBIG);
    CHECK_EQ(rst, 0);
    big[0] ^= 0xff;
    CHECK_EQ(rdkv_put(s, key, strlen(key), big, sizeof big), 0);
    CHECK_EQ(ses_bare(&a, &sid, SES_COMMIT, &rst), RDKV_ETOOBIG);
    CHECK_EQ(rst, 0);

    /* The session goes on: a one-shot SES_MULTI whose answer fits (16 values, 4 MiB) is served
     * whole, with the value intact. */
    CHECK_EQ(multi_gets(&a, &sid, SES_F_BEGIN | SES_F_COMMIT, 16, key, false, &rst, &len), 0);
    CHECK_EQ(rst, 0);
    CHECK_EQ(len, 2 + 16 * (4 + 4 + (size_t)BIG_VALUE));
    static uint8_t one[BIG_VALUE + 16];
    size_t ol = 0;
    CHECK_EQ(multi_gets(&a, &sid, SES_F_BEGIN | SES_F_COMMIT, 1, key, false, &rst, &ol), 0);
    CHECK_EQ(ol, 2 + 4 + 4 + (size_t)BIG_VALUE);
    struct pack_w w;
    pack_w_init(&w);
    uint8_t *d = pack_w_room(&w, SES_ID_LEN);
    if (d) memcpy(d, sid.b, SES_ID_LEN);
    pack_u8(&w, SES_GET | SES_F_BEGIN | SES_F_COMMIT);
    pack_u8(&w, 0);
    pack_u32(&w, (uint32_t)strlen(key));
    uint8_t *kp = pack_w_room(&w, strlen(key));
    if (kp) memcpy(kp, key, strlen(key));
    REQUIRE(!w.err);
    CHECK_EQ(raw_ses(&a, w.p, w.len, &rst, one, sizeof one, &ol), 0);
    pack_w_free(&w);
    CHECK(ol == 4 + BIG_VALUE && pack_get_u32le(one) == BIG_VALUE &&
          !memcmp(one + 4, big, BIG_VALUE));
    raw_close(&a);
    CHECK_EQ(put_get(s, "multi:after", 1), 0);
    rdkv_session_close(s);
    cl_stop(&c);
}

/* ------------------------------------------------------------------------------------------ */
/* echo_conns: the echo baseline is for nodes and operator tools, and bounded */

#define ECHO_TRIES 40
#define ECHO_CAP 16 /* rdma/service.c, SVC_ECHO_MAX */

/* One 8-byte ping on an echo connection: 0 when it came back. */
static int echo_ping(struct raw *r, uint64_t m)
{
    uint64_t back = 0;
    if (raw_send(r, &m, sizeof m)) return -1;
    size_t got = 0;
    while (got < sizeof back) {
        struct pollfd p = {.fd = r->fd, .events = POLLIN};
        if (poll(&p, 1, r->timeout_ms) != 1) return -1;
        ssize_t k = recv(r->fd, (uint8_t *)&back + got, sizeof back - got, MSG_DONTWAIT);
        if (k <= 0) return -1;
        got += (size_t)k;
    }
    return back == m ? 0 : -1;
}

static void echo_conns(void)
{
    if (!tenv_bindir) SKIP("needs --bindir to find kvserver");
    static struct cl c;
    static const char *const extra[] = {"--max-conns", "24", "--session-idle", "1s",
                                        "--conn-idle", "2s", NULL};
    REQUIRE(cl_start(&c, 1, false, extra) == 0);
    int pid = c.L.pids[0];
    rdkv_session *s;
    REQUIRE(connect_to(&c, 0, &s) == 0);
    CHECK_EQ(put_get(s, "echo:before", 1), 0);
    long th0 = proc_status(pid, "Threads:");
    REQUIRE(th0 > 0);

    /* The attack: echo connections with the client secret. */
    static struct raw a[ECHO_TRIES];
    unsigned perm = 0, accepted = 0, other = 0;
    for (unsigned i = 0; i < ECHO_TRIES; i++) {
        struct raw_opts ro = raw_client_opts(&c, 5000);
        ro.kind = WIRE_KIND_ECHO;
        int rc = raw_dial(&a[i], "127.0.0.1", port_of(&c, 0), &ro);
        if (rc == RDKV_EPERM) perm++;
        else if (rc == 0) accepted++;
        else other++;
    }
    long th1 = proc_status(pid, "Threads:");
    fprintf(stderr,
            "  %u client echo connections: %u refused EPERM, %u accepted, %u other; node "
            "threads %ld -> %ld\n",
            ECHO_TRIES, perm, accepted, other, th0, th1);
    CHECK_EQ(perm, ECHO_TRIES);
    CHECK(th1 - th0 <= 2);
    /* An ordinary client is served meanwhile: the one connected, and a new one. */
    CHECK_EQ(put_get(s, "echo:during", 2), 0);
    rdkv_session *s2 = NULL;
    CHECK_EQ(connect_to(&c, 0, &s2), 0);
    if (s2) {
        CHECK_EQ(put_get(s2, "echo:during2", 3), 0);
        rdkv_session_close(s2);
    }
    for (unsigned i = 0; i < ECHO_TRIES; i++) raw_close(&a[i]);

    /* The negative control: with the node secret (kvbench fabric, an operator tool) echo
     * connections are served, up to their own cap (RDKV_EBUSY beyond). */
    static struct raw e[ECHO_TRIES], k[ECHO_TRIES];
    for (unsigned i = 0; i < ECHO_TRIES; i++) e[i].fd = k[i].fd = -1; /* (raw_close skips) */
    unsigned eok = 0, ebusy = 0, eother = 0;
    for (unsigned i = 0; i < ECHO_TRIES; i++) {
        struct raw_opts ro = raw_client_opts(&c, 5000);
        ro.secret_file = c.secret;
        ro.kind = WIRE_KIND_ECHO;
        int rc = raw_dial(&e[i], "127.0.0.1", port_of(&c, 0), &ro);
        if (rc == 0) eok++;
        else if (rc == RDKV_EBUSY) ebusy++;
        else eother++;
        if (rc) break;
    }
    long th2 = proc_status(pid, "Threads:");
    unsigned pings = 0;
    for (unsigned i = 0; i < eok; i++)
        if (echo_ping(&e[i], 0x1234567800ull + i) == 0) pings++;
    /* They count against --max-conns: with them open, ordinary connections find less room. */
    unsigned kok = 0, kbusy = 0;
    for (unsigned i = 0; i < ECHO_TRIES; i++) {
        struct raw_opts ro = raw_client_opts(&c, 5000);
        int rc = raw_dial(&k[i], "127.0.0.1", port_of(&c, 0), &ro);
        if (rc == 0) kok++;
        else if (rc == RDKV_EBUSY) kbusy++;
        if (rc) break;
    }
    fprintf(stderr,
            "  node-secret echo connections: %u served (%u pinged back), then %u busy, %u other; "
            "node threads %ld -> %ld; then %u more connections under --max-conns 24, %u busy\n",
            eok, pings, ebusy, eother, th0, th2, kok, kbusy);
    CHECK_EQ(eok, ECHO_CAP);
    CHECK_EQ(pings, eok);
    CHECK_EQ(ebusy, 1);
    CHECK_EQ(eother, 0);
    CHECK(th2 - th0 <= ECHO_CAP + 2);
    CHECK_EQ(kbusy, 1);
    CHECK(kok + eok + 1 <= 24); /* (+1: the session's connection) */
    for (unsigned i = 0; i < ECHO_TRIES; i++) raw_close(&k[i]);

    /* An echo connection idle for --conn-idle (2 s) is closed, and its thread ends. */
    e[0].timeout_ms = 10000;
    CHECK_EQ(raw_closed_by_peer(&e[0]), 1);
    for (unsigned i = 0; i < ECHO_TRIES; i++) raw_close(&e[i]);
    CHECK(WAIT_FOR(proc_status(pid, "Threads:") <= th0, 10000));
    /* and the client carries on (its connection may have been idle-closed too) */
    int rc = put_get(s, "echo:after", 4);
    for (unsigned i = 0; (rc == RDKV_EUNAVAILABLE || rc == RDKV_EUNKNOWN) && i < 2; i++)
        rc = put_get(s, "echo:after", 4);
    CHECK_EQ(rc, 0);
    rdkv_session_close(s);
    cl_stop(&c);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"slow_reader", slow_reader}, {"big_preauth", big_preauth}, {"fd_limit", fd_limit},
        {"conn_cap", conn_cap},       {"timeouts", timeouts},     {"bench_off", bench_off},
        {"multi_reply", multi_reply}, {"echo_conns", echo_conns},
    };
    return tenv_main(argc, argv, "abuse: resource bounds (rows 6-9)", cases,
                     sizeof cases / sizeof cases[0]);
}
