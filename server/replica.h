/* A node's part in replication: with a `zookeeper` line in the cluster config, it reads (or
 * creates) the replica configuration in ZooKeeper at start, follows its changes and runs for
 * configuration manager; without one, the cluster keeps one copy of each partition on its node
 * (replicas 1), as before replicas, and says so. docs/replication.md */
#ifndef RDKV_SERVER_REPLICA_H
#define RDKV_SERVER_REPLICA_H

#include "common/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct replica;

/* Starts the node's part: *out is NULL for a cluster without ZooKeeper. Fails (the reason in err)
 * when ZooKeeper does not answer within connect_ns, when the configuration stored there does not
 * fit this cluster config (another node count or replica count), or when the config asks for
 * more replicas than this build serves. */
int replica_start(const struct cluster_config *cc, uint16_t me, int64_t connect_ns,
                  struct replica **out, char *err, size_t errcap);
/* The configuration's epoch now (1 without ZooKeeper). */
uint64_t replica_epoch(struct replica *r);
/* One line's clause for the node's start line: "one copy of each partition (no ZooKeeper)" or
 * "replicas R, configuration epoch E in ZooKeeper HOSTS". */
void replica_describe(struct replica *r, const struct cluster_config *cc, char *buf, size_t cap);
/* Writes `"replication":{...}` (no separator) into a JSON object being written. */
void replica_status_json(struct replica *r, const struct cluster_config *cc, FILE *m);
void replica_stop(struct replica *r);

#endif
