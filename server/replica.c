/* A node's part in replication (server/replica.h). */
#include "server/replica.h"

#include "common/log.h"
#include "rdkv_status.h"
#include "server/rcfg.h"
#include "server/zcfg.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The replica count this build serves: the configuration, the manager and the status are built;
 * the replicated commit is not yet (docs/replication.md, "What runs today"). */
#define REPLICA_SERVED_MAX 1u

struct replica {
    struct zcfg *z;
    uint16_t me;
    pthread_mutex_t mu;
    struct rcfg cur; /* the latest configuration read */
    int version;
    bool manager;
};

static void on_config(void *arg, const struct rcfg *c, int version)
{
    struct replica *r = arg;
    pthread_mutex_lock(&r->mu);
    bool newer = c->epoch > r->cur.epoch;
    if (newer || version > r->version) {
        r->cur = *c;
        r->version = version;
    }
    pthread_mutex_unlock(&r->mu);
    if (newer) log_info("node %u: replica configuration epoch %llu", r->me,
                        (unsigned long long)c->epoch);
}

static void on_manager(void *arg, bool m)
{
    struct replica *r = arg;
    pthread_mutex_lock(&r->mu);
    r->manager = m;
    pthread_mutex_unlock(&r->mu);
}

int replica_start(const struct cluster_config *cc, uint16_t me, int64_t connect_ns,
                  struct replica **out, char *err, size_t errcap)
{
    *out = NULL;
    if (!cc->zookeeper[0]) {
        log_info("node %u: no ZooKeeper in the cluster config: one copy of each partition, on its "
                 "node (replicas 1; docs/replication.md)", me);
        return 0;
    }
    if (cc->replicas > REPLICA_SERVED_MAX) {
        snprintf(err, errcap,
                 "replicas %u: this build keeps its configuration in ZooKeeper but does not "
                 "replicate commits yet (docs/replication.md, \"What runs today\"); use replicas 1",
                 cc->replicas);
        return RDKV_ENOTSUP;
    }
    struct replica *r = calloc(1, sizeof *r);
    if (!r) return RDKV_ENOMEM;
    r->me = me;
    pthread_mutex_init(&r->mu, NULL);
    struct rcfg init;
    int rc = rcfg_initial(&init, cc->n, cc->replicas);
    if (rc) {
        snprintf(err, errcap, "%u nodes with replicas %u: a replicated cluster has 1..%u nodes",
                 cc->n, cc->replicas, RCFG_MAX_NODES);
        goto fail;
    }
    char root[64];
    snprintf(root, sizeof root, "/rdkv/%016llx", (unsigned long long)cc->fingerprint);
    struct zcfg_opts o;
    zcfg_opts_init(&o);
    o.hosts = cc->zookeeper;
    o.root = root;
    o.node = me;
    if (connect_ns > 0) o.connect_ns = connect_ns;
    o.on_config = on_config;
    o.on_manager = on_manager;
    o.arg = r;
    /* The first callbacks may come before zcfg_open returns: cur starts at epoch 0. */
    rc = zcfg_open(&o, &init, &r->z, &init, &r->version, err, errcap);
    if (rc) goto fail;
    pthread_mutex_lock(&r->mu);
    if (init.epoch >= r->cur.epoch) r->cur = init;
    struct rcfg c = r->cur;
    pthread_mutex_unlock(&r->mu);
    if (c.nodes != cc->n || c.replicas != cc->replicas) {
        snprintf(err, errcap,
                 "ZooKeeper %s%s holds a configuration of %u nodes with replicas %u, and the "
                 "cluster config says %u nodes with replicas %u: another cluster's, or this one's "
                 "config was changed",
                 cc->zookeeper, root, c.nodes, c.replicas, cc->n, cc->replicas);
        rc = RDKV_ECONFIG;
        goto fail;
    }
    log_info("node %u: replica configuration epoch %llu from ZooKeeper %s (%u partitions, "
             "replicas %u)", me, (unsigned long long)c.epoch, cc->zookeeper, c.partitions,
             c.replicas);
    zcfg_run_for_manager(r->z);
    *out = r;
    return 0;
fail:
    zcfg_close(r->z);
    pthread_mutex_destroy(&r->mu);
    free(r);
    return rc;
}

uint64_t replica_epoch(struct replica *r)
{
    if (!r) return 1;
    pthread_mutex_lock(&r->mu);
    uint64_t e = r->cur.epoch;
    pthread_mutex_unlock(&r->mu);
    return e;
}

void replica_describe(struct replica *r, const struct cluster_config *cc, char *buf, size_t cap)
{
    if (!r) {
        snprintf(buf, cap, "one copy of each partition (no ZooKeeper)");
        return;
    }
    snprintf(buf, cap, "replicas %u, configuration epoch %llu in ZooKeeper %s", cc->replicas,
             (unsigned long long)replica_epoch(r), cc->zookeeper);
}

void replica_status_json(struct replica *r, const struct cluster_config *cc, FILE *m)
{
    if (!r) {
        fprintf(m, "\"replication\":{\"replicas\":1,\"zookeeper\":null,\"epoch\":1,"
                   "\"manager\":null}");
        return;
    }
    pthread_mutex_lock(&r->mu);
    struct rcfg c = r->cur;
    bool mgr = r->manager;
    pthread_mutex_unlock(&r->mu);
    /* (the hosts string was checked as host:port[,host:port][/chroot] when the config was read:
     * no character that JSON must escape) */
    fprintf(m, "\"replication\":{\"replicas\":%u,\"zookeeper\":\"%s\",\"epoch\":%llu,"
               "\"manager\":%s,\"partitions\":[",
            c.replicas, cc->zookeeper, (unsigned long long)c.epoch, mgr ? "true" : "false");
    for (unsigned p = 0; p < c.partitions; p++) {
        fprintf(m, "%s{\"partition\":%u,\"replicas\":[", p ? "," : "", p);
        for (unsigned i = 0; i < c.nrep[p]; i++) fprintf(m, "%s%u", i ? "," : "", c.rep[p][i]);
        fprintf(m, "]}");
    }
    fprintf(m, "]}");
}

void replica_stop(struct replica *r)
{
    if (!r) return;
    zcfg_close(r->z);
    pthread_mutex_destroy(&r->mu);
    free(r);
}
