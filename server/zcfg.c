/* The replica configuration in ZooKeeper (server/zcfg.h). ZooKeeper's own threads only record
 * events and wake zcfg's thread; every synchronous call runs on that thread or the caller's
 * (a synchronous call from a ZooKeeper callback would wait on the thread that must answer it). */
#include "server/zcfg.h"

#include "common/clock.h"
#include "common/log.h"
#include "rdkv_status.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define THREADED /* the synchronous API of the multi-threaded client */
#include <zookeeper/zookeeper.h>

#define PATH_CAP 384

struct zcfg {
    struct zcfg_opts o;
    char hosts[1024];
    char root[200];
    char cfgpath[256], electdir[256], mine[PATH_CAP]; /* mine: "" until joined */
    zhandle_t *zh;
    pthread_rwlock_t hl; /* zh: callers' calls read it, a session's replacement writes it (not mu:
                            ZooKeeper's callbacks take mu while a call waits on their thread) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool connected, expired, stop, running, manager;
    bool resigned; /* zcfg_resign dropped the office: lost_office says so and calls on_manager */
    int64_t office_zxid; /* the election's last change when this node found itself the lowest:
                            a node claimed after it started during this office (zcfg_claimed) */
    unsigned ev_config, ev_elect, ev_resign; /* events not handled yet */
    /* a read of the configuration, or an election step, that failed without ending the session
     * (an operation timeout on a slow server) set no watch: done again at these times (0: none) */
    int64_t retry_config_at, retry_elect_at;
    int64_t said_at; /* when such a failure was last logged (one line per ZCFG_SAY_NS) */
    bool fault_read;  /* test hook (RDKV_TEST_FAULT=zk-read-timeout): every other read fails */
    unsigned reads;
    pthread_t th;
    bool th_started;
};

void zcfg_opts_init(struct zcfg_opts *o)
{
    memset(o, 0, sizeof *o);
    o->session_ms = 4000;
    o->connect_ns = 10 * NS_PER_S;
}


/* ZooKeeper's status as rdkv's: the errors that say "no answer" are unavailability. */
static int zstatus(int zrc)
{
    if (zrc == ZOK) return 0;
    if (zrc == ZCONNECTIONLOSS || zrc == ZOPERATIONTIMEOUT || zrc == ZINVALIDSTATE ||
        zrc == ZSESSIONEXPIRED || zrc == ZCLOSING)
        return RDKV_EUNAVAILABLE;
    return RDKV_EIO;
}

/* ---- ZooKeeper's threads: record and wake ---------------------------------------------- */

static void wake(struct zcfg *z, unsigned *counter)
{
    pthread_mutex_lock(&z->mu);
    if (counter) (*counter)++;
    pthread_cond_broadcast(&z->cv);
    pthread_mutex_unlock(&z->mu);
}

static void session_watch(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh, (void)path;
    struct zcfg *z = ctx;
    if (type != ZOO_SESSION_EVENT) return;
    pthread_mutex_lock(&z->mu);
    if (state == ZOO_CONNECTED_STATE) z->connected = true;
    else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) z->expired = true;
    else z->connected = false;
    pthread_cond_broadcast(&z->cv);
    pthread_mutex_unlock(&z->mu);
}

static void config_watch(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh, (void)state, (void)path;
    struct zcfg *z = ctx;
    if (type == ZOO_CHANGED_EVENT || type == ZOO_CREATED_EVENT || type == ZOO_DELETED_EVENT)
        wake(z, &z->ev_config);
}

static void elect_watch(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh, (void)state, (void)path;
    struct zcfg *z = ctx;
    if (type == ZOO_DELETED_EVENT || type == ZOO_CHANGED_EVENT || type == ZOO_CREATED_EVENT)
        wake(z, &z->ev_elect);
}

/* ---- the session --------------------------------------------------------------------------- */

/* Opens a session and waits up to wait_ns for it: 0 or RDKV_EUNAVAILABLE. */
static int session_open(struct zcfg *z, int64_t wait_ns)
{
    pthread_mutex_lock(&z->mu);
    z->connected = z->expired = false;
    pthread_mutex_unlock(&z->mu);
    z->zh = zookeeper_init(z->hosts, session_watch, z->o.session_ms, NULL, z, 0);
    if (!z->zh) return RDKV_EUNAVAILABLE;
    struct timespec until = clock_ts(clock_now_ns() + wait_ns);
    pthread_mutex_lock(&z->mu);
    int w = 0;
    while (!z->connected && !z->expired && !z->stop && w != ETIMEDOUT)
        w = pthread_cond_timedwait(&z->cv, &z->mu, &until);
    bool ok = z->connected;
    pthread_mutex_unlock(&z->mu);
    if (ok) return 0;
    zookeeper_close(z->zh);
    z->zh = NULL;
    return RDKV_EUNAVAILABLE;
}

/* Creates path with no data unless it exists. */
static int ensure(struct zcfg *z, const char *path)
{
    int zrc = zoo_create(z->zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    return zrc == ZOK || zrc == ZNODEEXISTS ? 0 : zstatus(zrc);
}

static int read_config(struct zcfg *z, struct rcfg *cur, int *version, char *err, size_t errcap)
{
    char *buf = malloc(RCFG_TEXT_MAX + 1);
    if (!buf) return RDKV_ENOMEM;
    int len = RCFG_TEXT_MAX + 1;
    struct Stat st;
    int zrc = zoo_wget(z->zh, z->cfgpath, config_watch, z, buf, &len, &st);
    int rc;
    if (zrc != ZOK)
        rc = log_reason(err, errcap, zstatus(zrc), "ZooKeeper %s: reading %s: %s", z->hosts, z->cfgpath,
                 zerror(zrc));
    else if (len < 0 || st.dataLength > (int)RCFG_TEXT_MAX)
        rc = log_reason(err, errcap, RDKV_EPROTO, "ZooKeeper %s: %s holds %d bytes (limit %u)", z->hosts,
                 z->cfgpath, st.dataLength, RCFG_TEXT_MAX);
    else {
        char why[192];
        rc = rcfg_decode(buf, (size_t)len, cur, why, sizeof why);
        if (rc)
            log_reason(err, errcap, rc, "ZooKeeper %s: %s is not an rdkv configuration: %s", z->hosts,
                z->cfgpath, why);
        else
            *version = st.version;
    }
    free(buf);
    return rc;
}

int zcfg_read(struct zcfg *z, struct rcfg *cur, int *version, char *err, size_t errcap)
{
    pthread_rwlock_rdlock(&z->hl);
    int rc = z->zh ? read_config(z, cur, version, err, errcap)
                   : log_reason(err, errcap, RDKV_EUNAVAILABLE, "ZooKeeper %s: no session", z->hosts);
    pthread_rwlock_unlock(&z->hl);
    return rc;
}

/* The sequence number of an election znode's name "n_0000000042", or -1. */
static long long seqno(const char *name)
{
    if (strncmp(name, "n_", 2) || strlen(name) != 12) return -1;
    char *end;
    long long v = strtoll(name + 2, &end, 10);
    return *end ? -1 : v;
}

/* The node id in election znode `name` (its data): ZOK and *node (-1 when the data is not one),
 * or ZooKeeper's error (ZNONODE: its session ended). hl held by the caller. */
static int elect_node(struct zcfg *z, const char *name, int *node)
{
    char path[PATH_CAP], buf[16];
    snprintf(path, sizeof path, "%s/%.31s", z->electdir, name);
    int len = sizeof buf - 1;
    struct Stat st;
    *node = -1;
    int zrc = zoo_get(z->zh, path, 0, buf, &len, &st);
    if (zrc != ZOK || len <= 0) return zrc;
    buf[len] = 0;
    char *end;
    long v = strtol(buf, &end, 10);
    if (!*end && v >= 0 && v < 65535) *node = (int)v;
    return ZOK;
}

/* The election's step: the manager when this node's znode is the lowest, else a watch on the
 * one just below it (looping when that one went away meanwhile). Runs on zcfg's thread. */
static int elect_step(struct zcfg *z)
{
    for (int tries = 0; tries < 64; tries++) {
        if (!z->mine[0]) return 0;
        const char *me = strrchr(z->mine, '/') + 1;
        long long myseq = seqno(me);
        struct String_vector kids = {0, NULL};
        struct Stat dst;
        int zrc = zoo_get_children2(z->zh, z->electdir, 0, &kids, &dst);
        if (zrc != ZOK) return zrc; /* (done again shortly: zcfg_main) */
        long long best = -1;
        char pred[32] = "";
        bool present = false;
        for (int i = 0; i < kids.count; i++) {
            long long s = seqno(kids.data[i]);
            if (s < 0) continue;
            if (s == myseq) present = true;
            else if (s < myseq && s > best) {
                best = s;
                snprintf(pred, sizeof pred, "%s", kids.data[i]);
            }
        }
        deallocate_String_vector(&kids);
        if (!present) /* our znode is gone: the session ended; expiry handling rejoins */
            return 0;
        if (best < 0) {
            bool was;
            pthread_mutex_lock(&z->mu);
            was = z->manager;
            z->manager = true;
            if (!was) z->office_zxid = dst.pzxid;
            pthread_mutex_unlock(&z->mu);
            if (!was) {
                log_info("node %u is the configuration manager (ZooKeeper %s)", z->o.node,
                         z->hosts);
                if (z->o.on_manager) z->o.on_manager(z->o.arg, true);
            }
            return 0;
        }
        char path[PATH_CAP];
        snprintf(path, sizeof path, "%s/%s", z->electdir, pred);
        struct Stat st;
        zrc = zoo_wexists(z->zh, path, elect_watch, z, &st);
        if (zrc == ZOK) return 0; /* watching the one below */
        if (zrc != ZNONODE) return zrc;
    }
    return 0;
}

/* The election znode's create (ephemeral, sequential, the node's id as data), for join and for
 * zcfg_claim's multi; adopt() then records the name made as z->mine. */
struct candidacy {
    char prefix[PATH_CAP], data[16], made[PATH_CAP];
    int dl;
};

static void candidacy_op(struct zcfg *z, struct candidacy *cd, zoo_op_t *op)
{
    snprintf(cd->prefix, sizeof cd->prefix, "%s/n_", z->electdir);
    cd->dl = snprintf(cd->data, sizeof cd->data, "%u", z->o.node);
    zoo_create_op_init(op, cd->prefix, cd->data, cd->dl, &ZOO_OPEN_ACL_UNSAFE,
                       ZOO_EPHEMERAL_SEQUENTIAL, cd->made, sizeof cd->made);
}

static int adopt(struct zcfg *z, const struct candidacy *cd)
{
    /* The chroot, if any, is not in the name returned: make the path ours again. */
    const char *leaf = strrchr(cd->made, '/');
    leaf = leaf ? leaf + 1 : cd->made;
    if (strlen(leaf) > 31) return RDKV_EPROTO;
    pthread_mutex_lock(&z->mu);
    snprintf(z->mine, sizeof z->mine, "%s/%.31s", z->electdir, leaf);
    pthread_mutex_unlock(&z->mu);
    return 0;
}

static int join(struct zcfg *z)
{
    struct candidacy cd;
    zoo_op_t op;
    zoo_op_result_t res;
    candidacy_op(z, &cd, &op);
    int zrc = zoo_multi(z->zh, 1, &op, &res);
    return zrc == ZOK ? adopt(z, &cd) : zstatus(zrc);
}

static void lost_office(struct zcfg *z, const char *why)
{
    bool was;
    pthread_mutex_lock(&z->mu);
    was = z->manager || z->resigned; /* (zcfg_resign dropped the office already) */
    z->manager = z->resigned = false;
    z->mine[0] = 0;
    pthread_mutex_unlock(&z->mu);
    if (was) {
        log_warn("node %u is no longer the configuration manager: %s", z->o.node, why);
        if (z->o.on_manager) z->o.on_manager(z->o.arg, false);
    }
}

/* zcfg_resign, on zcfg's thread: the office is given up (no grant, no install from here on)
 * before the election znode goes, so that no successor is elected while this node still acts;
 * then the node joins the election again, at its end. */
static void resign(struct zcfg *z)
{
    char mine[PATH_CAP];
    snprintf(mine, sizeof mine, "%s", z->mine);
    lost_office(z, "it stepped down");
    if (mine[0]) {
        pthread_rwlock_rdlock(&z->hl);
        int zrc = z->zh ? zoo_delete(z->zh, mine, -1) : ZINVALIDSTATE;
        pthread_rwlock_unlock(&z->hl);
        if (zrc != ZOK && zrc != ZNONODE)
            log_warn("ZooKeeper %s: cannot leave the election (%s): its session's end will do it",
                     z->hosts, zerror(zrc));
    }
}

#define ZCFG_RETRY_NS (200 * NS_PER_MS) /* a failed read or election step, done again after */
#define ZCFG_SAY_NS (5 * NS_PER_S)      /* such failures logged at most once per this */

/* A read or election step that failed and set no watch (mu held): done again after
 * ZCFG_RETRY_NS -- nothing else would bring this node's configuration or office up to date
 * until its session ended -- and said, at most once per ZCFG_SAY_NS. */
static void retry_later(struct zcfg *z, int64_t *at, const char *why)
{
    int64_t now = clock_now_ns();
    *at = now + ZCFG_RETRY_NS;
    if (!z->said_at || now - z->said_at >= ZCFG_SAY_NS) {
        z->said_at = now;
        log_warn("%s (asked again every %lld ms)", why, (long long)(ZCFG_RETRY_NS / NS_PER_MS));
    }
}

/* zcfg's thread: handles events; after an expired session, opens a new one (retrying every
 * second), reads the configuration again and rejoins the election. */
static void *zcfg_main(void *arg)
{
    struct zcfg *z = arg;
    pthread_mutex_lock(&z->mu);
    while (!z->stop) {
        if (z->expired) {
            z->expired = false;
            pthread_mutex_unlock(&z->mu);
            lost_office(z, "its ZooKeeper session ended");
            log_warn("ZooKeeper %s: session expired; opening a new one", z->hosts);
            pthread_rwlock_wrlock(&z->hl);
            zookeeper_close(z->zh);
            z->zh = NULL;
            pthread_mutex_lock(&z->mu);
            z->mine[0] = 0; /* (a candidacy zcfg_claim made in the old session went with it) */
            pthread_mutex_unlock(&z->mu);
            int orc;
            while ((orc = session_open(z, NS_PER_S))) {
                pthread_mutex_lock(&z->mu);
                bool stop = z->stop;
                pthread_mutex_unlock(&z->mu);
                if (stop) break;
            }
            pthread_rwlock_unlock(&z->hl);
            if (orc) return NULL;
            pthread_mutex_lock(&z->mu);
            z->ev_config++;
            if (z->running) z->ev_elect++;
            continue;
        }
        if (z->ev_config) {
            z->ev_config = 0;
            pthread_mutex_unlock(&z->mu);
            struct rcfg c;
            int v;
            char err[256];
            int rc = z->fault_read && z->reads++ % 2 == 0
                         ? log_reason(err, sizeof err, RDKV_EUNAVAILABLE, "test hook: a read of "
                                      "the configuration timed out, no watch set")
                         : read_config(z, &c, &v, err, sizeof err);
            if (!rc && z->o.on_config) z->o.on_config(z->o.arg, &c, v);
            pthread_mutex_lock(&z->mu);
            if (rc) retry_later(z, &z->retry_config_at, err);
            continue;
        }
        if (z->ev_resign) {
            z->ev_resign = 0;
            pthread_mutex_unlock(&z->mu);
            resign(z);
            pthread_mutex_lock(&z->mu);
            if (z->running) z->ev_elect++;
            continue;
        }
        if (z->ev_elect) {
            z->ev_elect = 0;
            bool running = z->running;
            pthread_mutex_unlock(&z->mu);
            int jrc = running && !z->mine[0] ? join(z) : 0;
            int erc = running && !jrc ? elect_step(z) : 0;
            pthread_mutex_lock(&z->mu);
            if (jrc || erc) {
                char err[256];
                snprintf(err, sizeof err, "ZooKeeper %.150s: election: %.60s", z->hosts,
                         jrc ? "cannot join" : zerror(erc));
                retry_later(z, &z->retry_elect_at, err);
            }
            continue;
        }
        /* a failed read or election step again once its time has come, else wait for events */
        int64_t now = clock_now_ns(), next = 0;
        if (z->retry_config_at && z->retry_config_at <= now) {
            z->retry_config_at = 0;
            z->ev_config++;
            continue;
        }
        if (z->retry_elect_at && z->retry_elect_at <= now) {
            z->retry_elect_at = 0;
            if (z->running) z->ev_elect++;
            continue;
        }
        if (z->retry_config_at) next = z->retry_config_at;
        if (z->retry_elect_at && (!next || z->retry_elect_at < next)) next = z->retry_elect_at;
        if (!next) {
            pthread_cond_wait(&z->cv, &z->mu);
        } else {
            struct timespec ts = clock_ts(next);
            pthread_cond_timedwait(&z->cv, &z->mu, &ts);
        }
    }
    pthread_mutex_unlock(&z->mu);
    return NULL;
}

int zcfg_open(const struct zcfg_opts *o, const struct rcfg *initial, struct zcfg **out,
              struct rcfg *cur, int *version, char *err, size_t errcap)
{
    if (!o->hosts || !*o->hosts || strlen(o->hosts) >= sizeof(((struct zcfg *)0)->hosts) ||
        !o->root || o->root[0] != '/' || strlen(o->root) >= sizeof(((struct zcfg *)0)->root))
        return log_reason(err, errcap, RDKV_EINVAL, "bad ZooKeeper hosts or root");
    struct zcfg *z = calloc(1, sizeof *z);
    if (!z) return RDKV_ENOMEM;
    z->o = *o;
    const char *hook = getenv("RDKV_TEST_FAULT");
    z->fault_read = hook && !strcmp(hook, "zk-read-timeout");
    snprintf(z->hosts, sizeof z->hosts, "%s", o->hosts);
    snprintf(z->root, sizeof z->root, "%s", o->root);
    z->o.hosts = z->hosts;
    z->o.root = z->root;
    snprintf(z->cfgpath, sizeof z->cfgpath, "%s/config", z->root);
    snprintf(z->electdir, sizeof z->electdir, "%s/manager", z->root);
    pthread_mutex_init(&z->mu, NULL);
    clock_cond_init(&z->cv);
    pthread_rwlock_init(&z->hl, NULL);
    zoo_set_debug_level((ZooLogLevel)0); /* quiet: zcfg says what matters itself */
    int rc = session_open(z, o->connect_ns);
    if (rc) {
        log_reason(err, errcap, rc, "ZooKeeper %s: no session within %lld ms", z->hosts,
            (long long)(o->connect_ns / 1000000));
        goto fail;
    }
    /* The root's path, one component at a time. */
    char part[PATH_CAP];
    for (const char *s = z->root + 1;; s++) {
        if (*s == '/' || !*s) {
            snprintf(part, sizeof part, "%.*s", (int)(s - z->root), z->root);
            if ((rc = ensure(z, part))) break;
            if (!*s) break;
        }
    }
    if (!rc) rc = ensure(z, z->electdir);
    if (rc) {
        log_reason(err, errcap, rc, "ZooKeeper %s: cannot create %s", z->hosts, z->root);
        goto fail;
    }
    char text[RCFG_TEXT_MAX];
    int len = rcfg_encode(initial, text, sizeof text);
    if (len < 0) {
        rc = log_reason(err, errcap, len, "the initial configuration does not encode");
        goto fail;
    }
    int zrc = zoo_create(z->zh, z->cfgpath, text, len, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    if (zrc == ZOK)
        log_info("ZooKeeper %s: created the configuration %s (epoch %llu)", z->hosts, z->cfgpath,
                 (unsigned long long)initial->epoch);
    else if (zrc != ZNODEEXISTS) {
        rc = log_reason(err, errcap, zstatus(zrc), "ZooKeeper %s: creating %s: %s", z->hosts,
                 z->cfgpath, zerror(zrc));
        goto fail;
    }
    if ((rc = read_config(z, cur, version, err, errcap))) goto fail;
    if (pthread_create(&z->th, NULL, zcfg_main, z)) {
        rc = log_reason(err, errcap, RDKV_ENOMEM, "cannot start zcfg's thread");
        goto fail;
    }
    z->th_started = true;
    *out = z;
    return 0;
fail:
    if (z->zh) zookeeper_close(z->zh);
    pthread_rwlock_destroy(&z->hl);
    pthread_cond_destroy(&z->cv);
    pthread_mutex_destroy(&z->mu);
    free(z);
    return rc;
}

int zcfg_run_for_manager(struct zcfg *z)
{
    pthread_mutex_lock(&z->mu);
    bool already = z->running;
    z->running = true;
    if (!already) z->ev_elect++;
    pthread_cond_broadcast(&z->cv);
    pthread_mutex_unlock(&z->mu);
    return 0;
}

bool zcfg_is_manager(struct zcfg *z)
{
    pthread_mutex_lock(&z->mu);
    bool m = z->manager;
    pthread_mutex_unlock(&z->mu);
    return m;
}

void zcfg_poke(struct zcfg *z) { wake(z, &z->ev_config); }

void zcfg_resign(struct zcfg *z)
{
    pthread_mutex_lock(&z->mu);
    z->resigned = z->manager; /* (no grant and no install from this moment) */
    z->manager = false;
    z->ev_resign++;
    pthread_cond_broadcast(&z->cv);
    pthread_mutex_unlock(&z->mu);
}

int zcfg_live(struct zcfg *z, uint64_t *live, int64_t *session_ns)
{
    pthread_rwlock_rdlock(&z->hl);
    int rc = RDKV_EUNAVAILABLE;
    struct String_vector kids = {0, NULL};
    *live = 0;
    if (z->zh && (rc = zstatus(zoo_get_children(z->zh, z->electdir, 0, &kids))) == 0) {
        for (int i = 0; i < kids.count && !rc; i++) {
            if (seqno(kids.data[i]) < 0) continue;
            int v, zrc = elect_node(z, kids.data[i], &v);
            if (zrc == ZNONODE) continue; /* (its session ended meanwhile) */
            if ((rc = zstatus(zrc))) break;
            if (v >= 0 && v < 64) *live |= 1ull << v;
        }
        deallocate_String_vector(&kids);
        *session_ns = (int64_t)zoo_recv_timeout(z->zh) * NS_PER_MS;
    }
    pthread_rwlock_unlock(&z->hl);
    return rc;
}

int zcfg_elders(struct zcfg *z, uint64_t *mark, uint64_t *elders, int64_t *session_ns)
{
    pthread_rwlock_rdlock(&z->hl);
    int rc = z->zh ? 0 : RDKV_EUNAVAILABLE;
    *elders = 0;
    if (!rc && !*mark) {
        /* the mark: an ephemeral znode beside the candidacies (not one: no "n_" name), whose
         * creation orders every candidacy made before it */
        char prefix[PATH_CAP], made[PATH_CAP];
        snprintf(prefix, sizeof prefix, "%s/r_", z->electdir);
        struct Stat st;
        rc = zstatus(zoo_create(z->zh, prefix, NULL, -1, &ZOO_OPEN_ACL_UNSAFE,
                                ZOO_EPHEMERAL_SEQUENTIAL, made, sizeof made));
        if (!rc) rc = zstatus(zoo_exists(z->zh, made, 0, &st));
        if (!rc) *mark = (uint64_t)st.czxid;
    }
    struct String_vector kids = {0, NULL};
    if (!rc && (rc = zstatus(zoo_get_children(z->zh, z->electdir, 0, &kids))) == 0) {
        for (int i = 0; i < kids.count && !rc; i++) {
            if (seqno(kids.data[i]) < 0) continue;
            char path[PATH_CAP];
            snprintf(path, sizeof path, "%s/%.31s", z->electdir, kids.data[i]);
            struct Stat st;
            int v, zrc = zoo_exists(z->zh, path, 0, &st);
            if (zrc == ZNONODE) continue; /* (its session ended meanwhile) */
            if ((rc = zstatus(zrc))) break;
            if ((uint64_t)st.czxid > *mark) continue; /* (made after the mark) */
            zrc = elect_node(z, kids.data[i], &v);
            if (zrc == ZNONODE) continue;
            if ((rc = zstatus(zrc))) break;
            if (v >= 0 && v < 64 && v != z->o.node) *elders |= 1ull << v;
        }
        deallocate_String_vector(&kids);
        *session_ns = (int64_t)zoo_recv_timeout(z->zh) * NS_PER_MS;
    }
    pthread_rwlock_unlock(&z->hl);
    return rc;
}

bool zcfg_connected(struct zcfg *z)
{
    pthread_mutex_lock(&z->mu);
    bool c = z->connected && !z->expired;
    pthread_mutex_unlock(&z->mu);
    return c;
}

int zcfg_manager_node(struct zcfg *z)
{
    pthread_rwlock_rdlock(&z->hl);
    int node = -1;
    struct String_vector kids = {0, NULL};
    if (z->zh && zoo_get_children(z->zh, z->electdir, 0, &kids) == ZOK) {
        long long best = -1;
        const char *name = NULL;
        for (int i = 0; i < kids.count; i++) {
            long long s = seqno(kids.data[i]);
            if (s >= 0 && (best < 0 || s < best)) {
                best = s;
                name = kids.data[i];
            }
        }
        if (name && elect_node(z, name, &node)) node = -1;
        deallocate_String_vector(&kids);
    }
    pthread_rwlock_unlock(&z->hl);
    return node;
}

int zcfg_install(struct zcfg *z, int version, const struct rcfg *next, int *new_version,
                 char *err, size_t errcap)
{
    char mine[PATH_CAP];
    pthread_mutex_lock(&z->mu);
    bool m = z->manager;
    snprintf(mine, sizeof mine, "%s", z->mine);
    pthread_mutex_unlock(&z->mu);
    if (!m || !mine[0]) return log_reason(err, errcap, RDKV_EPERM, "node %u is not the manager", z->o.node);
    char why[192];
    if (!rcfg_check(next, why, sizeof why))
        return log_reason(err, errcap, RDKV_EINVAL, "refusing an inconsistent configuration: %s", why);
    char *text = malloc(RCFG_TEXT_MAX);
    if (!text) return RDKV_ENOMEM;
    int len = rcfg_encode(next, text, RCFG_TEXT_MAX);
    if (len < 0) {
        free(text);
        return log_reason(err, errcap, len, "the configuration does not encode");
    }
    zoo_op_t ops[3];
    zoo_op_result_t res[3];
    struct Stat st;
    memset(&st, 0, sizeof st);
    zoo_check_op_init(&ops[0], z->cfgpath, version);
    zoo_check_op_init(&ops[1], mine, -1); /* still the manager: our ephemeral znode exists */
    zoo_set_op_init(&ops[2], z->cfgpath, text, len, version, &st);
    pthread_rwlock_rdlock(&z->hl);
    int zrc = z->zh ? zoo_multi(z->zh, 3, ops, res) : ZINVALIDSTATE;
    pthread_rwlock_unlock(&z->hl);
    free(text);
    if (zrc == ZOK) {
        *new_version = st.version;
        log_info("installed configuration epoch %llu (ZooKeeper version %d)",
                 (unsigned long long)next->epoch, st.version);
        return 0;
    }
    if (zrc == ZBADVERSION || zrc == ZNONODE)
        return log_reason(err, errcap, RDKV_EABORTED,
                   "configuration not installed: %s (another change won, or the office was lost)",
                   zerror(zrc));
    if (zrc == ZCONNECTIONLOSS || zrc == ZOPERATIONTIMEOUT)
        return log_reason(err, errcap, RDKV_EUNKNOWN,
                   "ZooKeeper %s: %s: the change may or may not be installed (read it again)",
                   z->hosts, zerror(zrc));
    return log_reason(err, errcap, zstatus(zrc), "ZooKeeper %s: %s", z->hosts, zerror(zrc));
}

int zcfg_claim(struct zcfg *z, uint16_t node)
{
    char dir[PATH_CAP], path[PATH_CAP];
    snprintf(dir, sizeof dir, "%s/joined", z->root);
    snprintf(path, sizeof path, "%s/joined/%u", z->root, node);
    pthread_rwlock_rdlock(&z->hl); /* (held across adopt: a new session clears mine after it) */
    int rc = RDKV_EUNAVAILABLE;
    if (z->zh) {
        rc = ensure(z, dir);
        if (!rc) {
            /* the claim and the candidacy in one multi: a node ZooKeeper calls started is live
             * from that moment (the manager's grace at a cluster's start, lease.c) */
            zoo_op_t ops[2];
            zoo_op_result_t res[2];
            struct candidacy cd;
            zoo_create_op_init(&ops[0], path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
            candidacy_op(z, &cd, &ops[1]);
            int zrc = zoo_multi(z->zh, 2, ops, res);
            if (zrc == ZOK) rc = adopt(z, &cd);
            else rc = zrc == ZNODEEXISTS || res[0].err == ZNODEEXISTS ? RDKV_EEXIST : zstatus(zrc);
        }
    }
    pthread_rwlock_unlock(&z->hl);
    return rc;
}

int zcfg_claimed(struct zcfg *z, uint64_t *mask, uint64_t *fresh)
{
    char dir[PATH_CAP], path[PATH_CAP];
    snprintf(dir, sizeof dir, "%s/joined", z->root);
    *mask = *fresh = 0;
    pthread_mutex_lock(&z->mu);
    int64_t office = z->manager ? z->office_zxid : INT64_MAX;
    pthread_mutex_unlock(&z->mu);
    pthread_rwlock_rdlock(&z->hl);
    int rc = RDKV_EUNAVAILABLE;
    struct String_vector kids = {0, NULL};
    int zrc = z->zh ? zoo_get_children(z->zh, dir, 0, &kids) : ZINVALIDSTATE;
    if (zrc == ZNONODE) rc = 0; /* (nobody has started yet) */
    else if (!(rc = zstatus(zrc))) {
        for (int i = 0; i < kids.count && !rc; i++) {
            char *end = NULL;
            unsigned long v = strtoul(kids.data[i], &end, 10);
            if (end == kids.data[i] || *end || v >= 64) continue;
            *mask |= 1ull << v;
            /* (zxids order ZooKeeper's changes: no clock is compared) */
            struct Stat st;
            snprintf(path, sizeof path, "%s/joined/%lu", z->root, v);
            zrc = zoo_exists(z->zh, path, 0, &st);
            if (zrc == ZOK && st.czxid > office) *fresh |= 1ull << v;
            else if (zrc != ZOK) rc = zstatus(zrc);
        }
        deallocate_String_vector(&kids);
    }
    pthread_rwlock_unlock(&z->hl);
    return rc;
}

void zcfg_halt(struct zcfg *z)
{
    if (!z) return;
    pthread_mutex_lock(&z->mu);
    z->stop = true;
    pthread_cond_broadcast(&z->cv);
    pthread_mutex_unlock(&z->mu);
}

void zcfg_close(struct zcfg *z)
{
    if (!z) return;
    zcfg_halt(z);
    if (z->th_started) pthread_join(z->th, NULL);
    if (z->zh) zookeeper_close(z->zh);
    pthread_rwlock_destroy(&z->hl);
    pthread_cond_destroy(&z->cv);
    pthread_mutex_destroy(&z->mu);
    free(z);
}
