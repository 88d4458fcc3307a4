/* The replica configuration: the epoch, the members, and each partition's replica set (primary
 * first), as the configuration manager installs it in ZooKeeper (server/zcfg.h). This module is
 * pure: it builds, checks, encodes and decodes configurations, and computes the one that follows
 * a member's failure. Decoding never trusts its bytes. docs/replication.md */
#ifndef RDKV_SERVER_RCFG_H
#define RDKV_SERVER_RCFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RCFG_MAX_NODES 64     /* a replicated cluster's members (kvcluster's limit too) */
#define RCFG_MAX_REPLICAS 7   /* R */
#define RCFG_TEXT_MAX 65536u  /* the largest encoding accepted (ZooKeeper's own limit is 1 MB) */

struct rcfg {
    uint64_t epoch;                   /* >= 1; every installed change adds one */
    unsigned nodes;                   /* the cluster config's node count (ids 0..nodes-1) */
    unsigned partitions;              /* P, fixed at creation */
    unsigned replicas;                /* R, the copies wanted of each partition */
    uint64_t members;                 /* bit i: node i is a member (serves, holds a lease) */
    uint8_t nrep[RCFG_MAX_NODES];     /* partition p's live replicas: rep[p][0..nrep[p]) */
    uint16_t rep[RCFG_MAX_NODES][RCFG_MAX_REPLICAS]; /* [0] is the primary */
    /* the last nlearn[p] of partition p's replicas are new copies still being filled (section
     * 8, "Re-replication"): they take every commit but are never promoted until made full */
    uint8_t nlearn[RCFG_MAX_NODES];
    /* fencing (section 6, step 4): node i's processes with incarnations up to fenced[i] are
     * refused by every member (rdma/fabric.h, fab_fence); 0: none. A removal fences every
     * process of the node (UINT64_MAX); the join of a new process lowers it to just below that
     * process's incarnation, so the old one -- a zombie -- stays out for good. */
    uint64_t fenced[RCFG_MAX_NODES];
};

/* The first configuration of a cluster of `nodes` nodes with R replicas: epoch 1, every node a
 * member, P = nodes, partition p on nodes p, p+1, ..., p+R-1 (mod nodes), p the primary.
 * RDKV_EINVAL when nodes is 0 or over RCFG_MAX_NODES, or R is 0, over RCFG_MAX_REPLICAS or over
 * nodes. */
int rcfg_initial(struct rcfg *c, unsigned nodes, unsigned replicas);
/* Whether c is consistent: replicas are members, none twice in a set, every set non-empty.
 * false with the reason in err. */
bool rcfg_check(const struct rcfg *c, char *err, size_t errcap);
/* The primary of partition p. */
static inline uint16_t rcfg_primary(const struct rcfg *c, unsigned p) { return c->rep[p][0]; }
/* Whether node holds a replica of partition p (a full one or one being filled). */
bool rcfg_holds(const struct rcfg *c, unsigned p, uint16_t node);
/* Whether node's replica of partition p is still being filled. */
bool rcfg_learning(const struct rcfg *c, unsigned p, uint16_t node);
/* Partition p's full replicas: rep[p][0..rcfg_full(c, p)). */
static inline unsigned rcfg_full(const struct rcfg *c, unsigned p)
{
    return (unsigned)c->nrep[p] - c->nlearn[p];
}

/* The configuration after `node` left: epoch + 1, node no member and every process of it fenced,
 * dropped from every set; a partition whose primary it was gets its first backup as primary.
 * RDKV_EUNAVAILABLE (out left
 * unchanged) when a partition would have no full replica left, RDKV_EINVAL when node is no
 * member. */
int rcfg_without(const struct rcfg *c, uint16_t node, struct rcfg *out);

/* The configuration after `node` (no member) joined with an empty memory, as its process of
 * incarnation inc: epoch + 1, node a member, its processes before inc fenced, and a replica
 * being filled of every partition short of R copies. RDKV_EEXIST when it is a member,
 * RDKV_EINVAL when node is out of range or inc is 0, RDKV_ENOTFOUND when no partition lacks a
 * copy (it would hold nothing). */
int rcfg_join(const struct rcfg *c, uint16_t node, uint64_t inc, struct rcfg *out);
/* The configuration after node's replica of partition p was filled: epoch + 1, that replica
 * full. RDKV_EINVAL when it is not one being filled. */
int rcfg_filled(const struct rcfg *c, unsigned p, uint16_t node, struct rcfg *out);

/* The configuration after node's copy of partition p was dropped (it could not take commits for a
 * lasting reason, section 7): epoch + 1, node out of p's set, a member still. RDKV_EINVAL when
 * node holds no copy of p or is its primary. */
int rcfg_drop(const struct rcfg *c, unsigned p, uint16_t node, struct rcfg *out);

/* The configuration after partition p was handed to node, a full replica of it (its home, back
 * and filled: section 8, "Handing a partition back"): epoch + 1, node its primary, the old
 * primary its first backup, the others in their order. RDKV_EINVAL when node is no member,
 * holds no full replica of p, or is its primary already. */
int rcfg_handback(const struct rcfg *c, unsigned p, uint16_t node, struct rcfg *out);
/* Encodes c as text lines (docs/replication.md, section 3); returns the length (< cap) or
 * RDKV_ETOOBIG. */
int rcfg_encode(const struct rcfg *c, char *buf, size_t cap);
/* Decodes and checks len bytes: 0, or RDKV_EPROTO with a one-line reason in err. */
int rcfg_decode(const char *text, size_t len, struct rcfg *out, char *err, size_t errcap);

#endif
