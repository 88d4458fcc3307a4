/* The replica configuration in a real ZooKeeper (server/zcfg.h; the launcher's, started in a
 * directory of the test's own): two nodes racing to create the configuration read the same
 * one; one of two is elected manager; only the manager installs, and only over the version it
 * read; a change reaches the other node's watch; when the manager's session ends the other is
 * elected and installs; a stored configuration that is not one is refused with a reason; and
 * with no ZooKeeper, opening fails within its bound. */
#include "tests/harness.h"
#include "tests/testenv.h"

#include "common/clock.h"
#include "rdkv_status.h"
#include "server/zcfg.h"
#include "tools/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#define THREADED
#include <zookeeper/zookeeper.h>

static char zkdir[256], hosts[64];
static bool zk_up;

/* A port no one listens on now (bound once, then released). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || getsockname(fd, (struct sockaddr *)&a, &l)) {
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

static bool zk_start(void)
{
    if (zk_up) return true;
    if (tenv_mkdtemp(zkdir, sizeof zkdir, "rdkv-zk")) return false;
    char err[256];
    int rc = launch_zk_start(zkdir, hosts, sizeof hosts, err, sizeof err);
    if (rc) fprintf(stderr, "  ZooKeeper: %s\n", err);
    zk_up = rc == 0;
    return zk_up;
}

static void zk_stop(void)
{
    if (!zk_up) return;
    launch_zk_stop(zkdir);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", zkdir);
    if (system(cmd)) fprintf(stderr, "  cannot remove %s\n", zkdir);
    zk_up = false;
}

/* What a node's callbacks saw. */
struct seen {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t epoch; /* the latest configuration's */
    int version;
    int manager;    /* -1 never told, 0 lost, 1 elected */
};

static void on_config(void *arg, const struct rcfg *c, int version)
{
    struct seen *s = arg;
    pthread_mutex_lock(&s->mu);
    s->epoch = c->epoch;
    s->version = version;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void on_manager(void *arg, bool m)
{
    struct seen *s = arg;
    pthread_mutex_lock(&s->mu);
    s->manager = m;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void seen_init(struct seen *s)
{
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->epoch = 0;
    s->version = -1;
    s->manager = -1;
}

/* Waits up to 20 s until the seen state's field reaches want: true when it did. */
static bool wait_for(struct seen *s, const int *field, int want, const uint64_t *efield,
                     uint64_t ewant)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 20;
    pthread_mutex_lock(&s->mu);
    int rc = 0;
    while (rc == 0 && (field ? *field != want : *efield != ewant))
        rc = pthread_cond_timedwait(&s->cv, &s->mu, &until);
    bool ok = field ? *field == want : *efield == ewant;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

static int open_node(uint16_t node, const char *root, struct seen *s, const struct rcfg *init,
                     struct zcfg **z, struct rcfg *cur, int *version, char *err, size_t errcap)
{
    struct zcfg_opts o;
    zcfg_opts_init(&o);
    o.hosts = hosts;
    o.root = root;
    o.node = node;
    o.session_ms = 2000;
    o.connect_ns = 15 * NS_PER_S;
    o.on_config = on_config;
    o.on_manager = on_manager;
    o.arg = s;
    return zcfg_open(&o, init, z, cur, version, err, errcap);
}

struct racer {
    uint16_t node;
    struct rcfg init, cur;
    struct seen seen;
    struct zcfg *z;
    int version, rc;
    char err[256];
};

static void *race(void *arg)
{
    struct racer *r = arg;
    r->rc = open_node(r->node, "/rdkv/test-race", &r->seen, &r->init, &r->z, &r->cur, &r->version,
                      r->err, sizeof r->err);
    return NULL;
}

/* Two nodes create at once (with initial configurations that differ in their epoch, to tell
 * whose won): both read the one that won. */
static void t_create_race(void)
{
    REQUIRE(zk_start());
    struct racer r[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].node = (uint16_t)i;
        seen_init(&r[i].seen);
        REQUIRE(rcfg_initial(&r[i].init, 3, 2) == 0);
        r[i].init.epoch = 10 + (unsigned)i;
        REQUIRE(pthread_create(&th[i], NULL, race, &r[i]) == 0);
    }
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) {
        if (r[i].rc) fprintf(stderr, "  node %d: %s\n", i, r[i].err);
        CHECK_EQ(r[i].rc, 0);
    }
    CHECK_EQ(r[0].cur.epoch, r[1].cur.epoch);
    CHECK(r[0].cur.epoch == 10 || r[0].cur.epoch == 11);
    CHECK_EQ(r[0].version, r[1].version);
    for (int i = 0; i < 2; i++) zcfg_close(r[i].z);
}

/* Two nodes (ids ia, ib) on one configuration under root, from 3 nodes and 2 replicas: 0, or
 * a status (with why printed). */
struct pair {
    struct rcfg init, cur;
    struct seen sa, sb;
    struct zcfg *a, *b;
    int va, vb;
};

static int open_pair(struct pair *p, const char *root, uint16_t ia, uint16_t ib)
{
    memset(p, 0, sizeof *p);
    char err[256] = "";
    int rc = rcfg_initial(&p->init, 3, 2);
    seen_init(&p->sa);
    seen_init(&p->sb);
    if (!rc) rc = open_node(ia, root, &p->sa, &p->init, &p->a, &p->cur, &p->va, err, sizeof err);
    if (!rc) rc = open_node(ib, root, &p->sb, &p->init, &p->b, &p->cur, &p->vb, err, sizeof err);
    if (rc) fprintf(stderr, "  open_pair: %s %s\n", rdkv_strerror(rc), err);
    return rc;
}

static void t_elect_install(void)
{
    REQUIRE(zk_start());
    static struct pair P;
    REQUIRE(open_pair(&P, "/rdkv/test-elect", 0, 1) == 0);
    struct rcfg init = P.init, cur = P.cur, next;
    struct zcfg *a = P.a, *b = P.b;
    int va = P.va, vb = P.vb, nv;
    char err[256];
    CHECK_EQ(cur.epoch, 1);
    CHECK_EQ(zcfg_install(a, va, &init, &nv, err, sizeof err), RDKV_EPERM); /* not running yet */

    CHECK_EQ(zcfg_run_for_manager(a), 0);
    CHECK(wait_for(&P.sa, &P.sa.manager, 1, NULL, 0));
    CHECK_EQ(zcfg_run_for_manager(b), 0);
    CHECK(zcfg_is_manager(a));

    /* The manager installs over the version it read; the other node's watch sees it. */
    REQUIRE(rcfg_without(&cur, 2, &next) == 0);
    CHECK_EQ(zcfg_install(a, va, &next, &nv, err, sizeof err), 0);
    CHECK(nv > va);
    CHECK(wait_for(&P.sb, NULL, 0, &P.sb.epoch, 2));
    CHECK_EQ(P.sb.version, nv);
    /* A second install over the old version fails its check. */
    struct rcfg again = next;
    again.epoch = 3;
    CHECK_EQ(zcfg_install(a, va, &again, &nv, err, sizeof err), RDKV_EABORTED);
    /* The non-manager may not install at all. */
    CHECK(!zcfg_is_manager(b));
    CHECK_EQ(zcfg_install(b, nv, &again, &vb, err, sizeof err), RDKV_EPERM);
    /* An inconsistent configuration is refused before it is sent. */
    struct rcfg broken = again;
    broken.nrep[0] = 0;
    CHECK_EQ(zcfg_install(a, nv, &broken, &vb, err, sizeof err), RDKV_EINVAL);

    /* The manager's session ends: the other node is elected and installs over what it reads. */
    zcfg_close(a);
    CHECK(wait_for(&P.sb, &P.sb.manager, 1, NULL, 0));
    int v;
    REQUIRE(zcfg_read(b, &cur, &v, err, sizeof err) == 0);
    CHECK_EQ(cur.epoch, 2);
    again = cur;
    again.epoch = cur.epoch + 1;
    CHECK_EQ(zcfg_install(b, v, &again, &nv, err, sizeof err), 0);
    REQUIRE(zcfg_read(b, &cur, &v, err, sizeof err) == 0);
    CHECK_EQ(cur.epoch, 3);
    CHECK_EQ(v, nv);
    zcfg_close(b);
}

/* zcfg_live names the nodes that hold a session; a manager that resigns drops the office at
 * once (it may install nothing more), the next node is elected, and the resigned one stays in
 * the election, at its end: elected again once the other's session ends. */
static void t_resign_live(void)
{
    REQUIRE(zk_start());
    static struct pair P;
    REQUIRE(open_pair(&P, "/rdkv/test-resign", 0, 2) == 0);
    struct rcfg cur = P.cur, next;
    struct zcfg *a = P.a, *b = P.b;
    int va = P.va, vb = P.vb, nv;
    char err[256];
    CHECK_EQ(zcfg_run_for_manager(a), 0);
    CHECK(wait_for(&P.sa, &P.sa.manager, 1, NULL, 0));
    CHECK_EQ(zcfg_run_for_manager(b), 0);
    uint64_t live = 0;
    int64_t session_ns = 0;
    /* (b's znode appears once its thread joined: bounded wait) */
    for (int i = 0; i < 200 && live != 0x5; i++) {
        CHECK_EQ(zcfg_live(a, &live, &session_ns), 0);
        if (live != 0x5) clock_sleep_ns(20 * NS_PER_MS);
    }
    CHECK_EQ(live, 0x5ull);
    CHECK(session_ns >= NS_PER_S && session_ns <= 10 * NS_PER_S); /* (asked 2 s; bounded by
                                                                     ZooKeeper's tickTime) */
    zcfg_resign(a);
    CHECK(!zcfg_is_manager(a)); /* at once */
    REQUIRE(rcfg_without(&cur, 1, &next) == 0);
    CHECK_EQ(zcfg_install(a, va, &next, &nv, err, sizeof err), RDKV_EPERM);
    CHECK(wait_for(&P.sa, &P.sa.manager, 0, NULL, 0));
    CHECK(wait_for(&P.sb, &P.sb.manager, 1, NULL, 0));
    CHECK_EQ(zcfg_install(b, vb, &next, &nv, err, sizeof err), 0);
    for (int i = 0; i < 200 && live != 0x5; i++) {
        CHECK_EQ(zcfg_live(b, &live, &session_ns), 0);
        if (live != 0x5) clock_sleep_ns(20 * NS_PER_MS);
    }
    CHECK_EQ(live, 0x5ull); /* a back in the election */
    CHECK(!zcfg_is_manager(a));
    zcfg_close(b);
    CHECK(wait_for(&P.sa, &P.sa.manager, 1, NULL, 0));
    CHECK_EQ(zcfg_live(a, &live, &session_ns), 0);
    CHECK_EQ(live, 0x1ull);
    zcfg_close(a);
}

/* What is stored is not a configuration: refused, with a reason naming the znode. */
static void t_garbage(void)
{
    REQUIRE(zk_start());
    zoo_set_debug_level((ZooLogLevel)0);
    zhandle_t *zh = zookeeper_init(hosts, NULL, 2000, NULL, NULL, 0);
    REQUIRE(zh);
    int zrc = ZCONNECTIONLOSS;
    for (int i = 0; i < 200 && zrc == ZCONNECTIONLOSS; i++) { /* until its session is up */
        zrc = zoo_create(zh, "/rdkv", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
        if (zrc == ZCONNECTIONLOSS) usleep(50000);
    }
    CHECK(zrc == ZOK || zrc == ZNODEEXISTS);
    CHECK_EQ(zoo_create(zh, "/rdkv/test-garbage", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
    const char junk[] = "rdkv-config 1\nepoch 1\nnodes 3\nthis is not it\n";
    CHECK_EQ(zoo_create(zh, "/rdkv/test-garbage/config", junk, (int)sizeof junk - 1,
                        &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
    zookeeper_close(zh);
    struct rcfg init, cur;
    REQUIRE(rcfg_initial(&init, 3, 2) == 0);
    struct seen s;
    seen_init(&s);
    struct zcfg *z = NULL;
    int v;
    char err[256] = "";
    CHECK_EQ(open_node(0, "/rdkv/test-garbage", &s, &init, &z, &cur, &v, err, sizeof err),
             RDKV_EPROTO);
    printf("  refused: %s\n", err);
    CHECK(strstr(err, "/rdkv/test-garbage/config") != NULL);
    CHECK(strstr(err, "line 4") != NULL);
}

/* No ZooKeeper at the address: unavailable once the connect bound has passed (not a hang). */
static void t_no_zookeeper(void)
{
    int port = free_port();
    REQUIRE(port > 0);
    char h[64];
    snprintf(h, sizeof h, "127.0.0.1:%d", port);
    struct zcfg_opts o;
    zcfg_opts_init(&o);
    o.hosts = h;
    o.root = "/rdkv/none";
    o.connect_ns = NS_PER_S;
    struct rcfg init, cur;
    REQUIRE(rcfg_initial(&init, 1, 1) == 0);
    struct zcfg *z = NULL;
    int v;
    char err[256] = "";
    CHECK_EQ(zcfg_open(&o, &init, &z, &cur, &v, err, sizeof err), RDKV_EUNAVAILABLE);
    printf("  refused: %s\n", err);
    CHECK(strstr(err, h) != NULL);
}

int main(int argc, char **argv)
{
    argc = tenv_args(argc, argv);
    if (access("/usr/share/java/zookeeper.jar", R_OK)) {
        printf("SKIPPED: ZooKeeper is not installed (apt-get install zookeeper)\n");
        return 77;
    }
    static const struct test_case cases[] = {
        {"create_race", t_create_race},
        {"elect_install", t_elect_install},
        {"resign_live", t_resign_live},
        {"garbage", t_garbage},
        {"no_zookeeper", t_no_zookeeper},
    };
    int rc = test_main(argc - 1, argv + 1, cases, sizeof cases / sizeof *cases);
    zk_stop();
    return rc;
}
