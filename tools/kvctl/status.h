/* kvctl's reader of the cluster's status, as a node answers KV_RPC_STATUS (the format is
 * documented once, in docs/architecture.md, "Status"). status_parse reads it with jansson into
 * plain structs, checking each field kvctl uses for presence and type; fields it does not know
 * are ignored. Bad input (not JSON, cut short, a field missing or of the wrong type) gives a
 * message that says where, never a crash. */
#ifndef RDKV_KVCTL_STATUS_H
#define RDKV_KVCTL_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One partition of a replicated cluster, as a node's `replication.partitions` lists it. */
struct st_part {
    uint64_t partition;
    uint64_t *replicas; /* primary first */
    size_t nreplicas;
    uint64_t *filling; /* the copies still being filled */
    size_t nfilling;
    bool has_fill; /* `fill`: this node streams the partition to its new copies */
    uint64_t fill_rows, fill_of;
};

/* A node's `replication` object. */
struct st_repl {
    bool present;          /* the node's status carried one */
    const char *zookeeper; /* NULL: one copy, no ZooKeeper */
    uint64_t replicas, epoch;
    bool manager; /* this node is the configuration manager */
    struct st_part *parts;
    size_t nparts;
};

/* One entry of the cluster's `nodes`. */
struct st_node {
    uint64_t node;
    const char *address;
    bool up; /* `state`: "up" or "down" */
    bool has_rows, has_heap;
    uint64_t rows, heap_bytes, heap_used;
    const char *error; /* why it is down; NULL: none given */
    struct st_repl repl; /* from its own status object (`status`) */
    struct json_t *metrics; /* its status's `metrics` object (docs/metrics.md), NULL: none */
};

/* The cluster's status as the node that answered gathered it. */
struct st_cluster {
    uint64_t coordinator; /* the node that answered */
    struct st_node *nodes;
    size_t n;
    struct json_t *doc; /* the parsed document: it owns the strings above */
};

/* Reads js into c. Returns 0, or -1 with a message in err (c then holds nothing to free). */
int status_parse(const char *js, struct st_cluster *c, char *err, size_t errcap);
void status_free(struct st_cluster *c);

#endif
