/* The cluster config file: which nodes exist and where they listen, plus cluster-wide defaults.
 *
 *     # comments and blank lines are ignored
 *     transport soft            # soft | verbs | auto (optional; default auto)
 *     arena 256M                # per-node arena size (optional)
 *     secret_file cluster.secret  # the node secret (rdma/auth.h; optional, a relative path is
 *                               # relative to this file's directory); kvserver --secret-file wins
 *     zookeeper 127.0.0.1:2181  # ZooKeeper's hosts (host:port,...[/chroot]) keeping the replica
 *                               # configuration (optional; docs/replication.md)
 *     replicas 3                # copies of each partition (optional; default 1; over 1 needs
 *                               # zookeeper)
 *     node 0 127.0.0.1:7100     # one line per node; ids are 0..N-1, each exactly once
 *     node 1 127.0.0.1:7101
 *
 * Parsing never aborts: every problem is reported as "FILE:LINE: message" in err. */
#ifndef RDKV_CONFIG_H
#define RDKV_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CLUSTER_MAX_NODES 1024
#define CLUSTER_HOST_MAX 256
#define CLUSTER_PATH_MAX 1024
#define CLUSTER_MAX_REPLICAS 7      /* server/rcfg.h's RCFG_MAX_REPLICAS */
#define CLUSTER_MAX_REPLICATED 64   /* nodes of a cluster with ZooKeeper (RCFG_MAX_NODES) */

struct cluster_node {
    uint16_t id;
    uint16_t port;
    char host[CLUSTER_HOST_MAX];
};

struct cluster_config {
    unsigned n;                  /* number of nodes; nodes[i].id == i */
    struct cluster_node *nodes;
    char transport[8];           /* "" when the file does not say */
    uint64_t arena_size;         /* 0 when the file does not say */
    uint64_t fingerprint;        /* XXH3 of the node list: peers with different lists refuse each other */
    char secret_file[CLUSTER_PATH_MAX]; /* "" when the file does not say; cluster_config_load
                                           makes a relative path relative to the file's folder */
    char zookeeper[CLUSTER_PATH_MAX];   /* "" when the file does not say */
    unsigned replicas;                  /* 1 when the file does not say */
};

int cluster_config_parse(const char *text, size_t len, const char *name, struct cluster_config *out,
                         char *err, size_t errcap);
int cluster_config_load(const char *path, struct cluster_config *out, char *err, size_t errcap);
void cluster_config_free(struct cluster_config *c);
/* Writes c in the file format above. Returns 0 or RDKV_EIO. */
int cluster_config_write(const struct cluster_config *c, FILE *f);
/* Builds a config from n host:port pairs (used by launchers and tests). */
int cluster_config_make(struct cluster_config *c, unsigned n, const char *const *hosts,
                        const uint16_t *ports);

#endif
