/* The replica configuration kept in ZooKeeper (the Debian C client, libzookeeper-mt): creating
 * or reading it, installing a change with one zoo_multi that checks the version read and that
 * the writer still holds the manager's office, and electing one manager with ZooKeeper's recipe
 * (ephemeral sequential znodes, each watching the one below it). Off the data path: a node calls
 * it at start, and the manager once per change. Callbacks run on zcfg's own thread, never on
 * ZooKeeper's. docs/replication.md, section 3 */
#ifndef RDKV_SERVER_ZCFG_H
#define RDKV_SERVER_ZCFG_H

#include "server/rcfg.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct zcfg_opts {
    const char *hosts;   /* ZooKeeper's "host:port,host:port[/chroot]" */
    const char *root;    /* this cluster's znode, e.g. "/rdkv/<config fingerprint>" */
    uint16_t node;       /* this node's id (written into its election znode) */
    int session_ms;      /* the session timeout asked for (ZooKeeper bounds it by its tickTime) */
    int64_t connect_ns;  /* how long zcfg_open waits for the first connection */
    /* A new configuration was read (a change by any manager, or the first read). */
    void (*on_config)(void *arg, const struct rcfg *c, int version);
    /* This node became the manager (true) or lost the office (false: its session ended). */
    void (*on_manager)(void *arg, bool manager);
    void *arg;
};
void zcfg_opts_init(struct zcfg_opts *o);

struct zcfg;

/* Connects (waiting up to connect_ns for the session), creates the root's path, then creates
 * the configuration `initial` unless one exists, reads the one that is there into *cur and
 * watches it. RDKV_EUNAVAILABLE when ZooKeeper does not answer in time, RDKV_EPROTO when the
 * stored configuration is not one (the reason in err). */
int zcfg_open(const struct zcfg_opts *o, const struct rcfg *initial, struct zcfg **out,
              struct rcfg *cur, int *version, char *err, size_t errcap);
/* Joins the election (once): on_manager(true) when this node's znode is the lowest. */
int zcfg_run_for_manager(struct zcfg *z);
bool zcfg_is_manager(struct zcfg *z);
/* Has the configuration read again and handed to on_config (from zcfg's thread). */
void zcfg_poke(struct zcfg *z);
/* Gives up the manager's office (zcfg's thread, soon): the office is dropped before the election
 * znode is deleted, and the node then joins the election again at its end. For a manager that
 * finds itself cut off from the members (docs/replication.md, section 4). */
void zcfg_resign(struct zcfg *z);
/* The nodes that hold a ZooKeeper session now (an election znode: bit i for node i < 64), and
 * the session timeout ZooKeeper granted this node: 0, or RDKV_EUNAVAILABLE when ZooKeeper did
 * not answer. A few reads: for the manager's judgement of a silent member, not the data path. */
int zcfg_live(struct zcfg *z, uint64_t *live, int64_t *session_ns);
/* The other nodes whose election znodes were made before *mark (bit i for node i < 64): with
 * *mark 0, a mark is made first (an ephemeral znode beside them) and *mark set to its creation
 * zxid. Asked again while they last, it tells a process that survived (its znode stays) from
 * one that died (its session ends within the timeout, also given) -- whatever started after
 * the mark is not counted. 0, or RDKV_EUNAVAILABLE. */
int zcfg_elders(struct zcfg *z, uint64_t *mark, uint64_t *elders, int64_t *session_ns);
/* Whether the session is connected now (a manager grants leases only then). */
bool zcfg_connected(struct zcfg *z);
/* The manager's node id as ZooKeeper says now (the lowest election znode's data), or < 0 when
 * none is elected or ZooKeeper does not answer. One read: for when the manager changed. */
int zcfg_manager_node(struct zcfg *z);
/* Installs next if the stored configuration still has `version` and this node still holds the
 * manager's office (one zoo_multi: two checks and the write). 0 and the new version;
 * RDKV_EABORTED when either check failed (re-read: another change won, or the office is lost);
 * RDKV_EPERM when this node is not the manager; RDKV_EUNAVAILABLE when ZooKeeper did not
 * answer. */
int zcfg_install(struct zcfg *z, int version, const struct rcfg *next, int *new_version,
                 char *err, size_t errcap);
/* Creates the persistent znode ROOT/joined/<node> that says this node has held copies: 0; or
 * RDKV_EEXIST when an earlier process of the node made it (its in-memory copies are gone). */
int zcfg_claim(struct zcfg *z, uint16_t node);
/* The nodes that ever started in this cluster: those with a ROOT/joined znode (bit i for node
 * i < 64; none yet: 0), and in *fresh those of them that first started after this node became
 * the manager (their znode is younger than the office, by ZooKeeper's order). 0, or
 * RDKV_EUNAVAILABLE / RDKV_EIO when ZooKeeper did not answer. For the manager's judgement of a
 * silent member at the cluster's start, not the data path. */
int zcfg_claimed(struct zcfg *z, uint64_t *mask, uint64_t *fresh);
/* The first step of a stop: zcfg's thread gives up reconnecting, so nobody waits on it. */
void zcfg_halt(struct zcfg *z);
/* Reads the stored configuration now. */
int zcfg_read(struct zcfg *z, struct rcfg *cur, int *version, char *err, size_t errcap);
/* Ends the session (the election znode goes with it) and the thread. */
void zcfg_close(struct zcfg *z);

#endif
