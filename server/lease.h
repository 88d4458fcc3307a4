/* Leases between the members of a replicated cluster and the configuration manager, as FaRM
 * keeps them (docs/replication.md, section 4): each member asks the manager for a renewal every
 * fifth of a lease from a thread that does nothing else; its lease runs from the moment it sent
 * the request that was granted. The manager grants only while it holds the office, never to a
 * member it suspects, treats every lease as running for a full lease (plus a guard) after its
 * election, and suspects a member it has not heard from for a lease plus the guard: then it
 * asks for a configuration without it (hooks.remove), which it installs in ZooKeeper -- at once
 * while it hears from a majority of the members, itself included; else only once the silent
 * member's ZooKeeper session is gone too (a dead node's ends within the session timeout). A
 * manager that hears from a minority for longer than that while the silent members keep their
 * sessions is the one cut off: it steps down (hooks.resign), and a member that reaches the
 * others is elected instead. */
#ifndef RDKV_SERVER_LEASE_H
#define RDKV_SERVER_LEASE_H

#include "server/rcfg.h"

#include <stdbool.h>
#include <stdint.h>

struct fabric;

struct lease_hooks {
    bool (*is_manager)(void *arg);
    int (*manager_node)(void *arg);                   /* the manager's node id, or < 0 */
    void (*config)(void *arg, struct rcfg *out);      /* the configuration held now */
    int (*remove)(void *arg, uint64_t nodes);         /* the manager: install one without these
                                                         nodes (bit per node) */
    /* the nodes holding a ZooKeeper session (bit per node) and the session timeout: 0, or a
     * status when ZooKeeper does not answer */
    int (*live)(void *arg, uint64_t *mask, int64_t *session_ns);
    void (*resign)(void *arg);                        /* the manager: give up the office */
    /* the nodes that ever started in this cluster (bit per node), and those of them that
     * first started during this manager's office: 0, or a status when ZooKeeper does not
     * answer */
    int (*started)(void *arg, uint64_t *mask, uint64_t *fresh);
    void *arg;
};

struct lease;

/* Starts the member's renewer and the manager's monitor (idle while this node is no manager),
 * and serves KV_RPC_LEASE. lease_ns: the lease's length (>= 10 ms). Once the handler is
 * registered *out is set, also when a thread then fails to start (lease_free it). */
int lease_start(struct fabric *f, uint16_t me, int64_t lease_ns, const struct lease_hooks *h,
                struct lease **out);
/* Whether this member's lease is valid now (by its own clock; no lock: cheap enough to ask on
 * every operation). */
bool lease_valid(struct lease *l);
/* The manager's office began now: every member's lease counts as renewed now. */
void lease_elected(struct lease *l);
/* The manager admits `node` again (it joins with an empty memory: docs/replication.md,
 * "Re-replication"): no longer suspected, and heard from now. Call before the configuration
 * that makes it a member is installed, so the monitor never judges it by its old silence. */
void lease_admit(struct lease *l, uint16_t node);
/* Members suspected and removed by this node as manager (status). */
unsigned lease_removed(struct lease *l);
/* Stops the threads (before the fabric closes); KV_RPC_LEASE is answered "not the manager"
 * from then on. lease_free after the fabric closed. */
void lease_stop(struct lease *l);
void lease_free(struct lease *l);

#endif
