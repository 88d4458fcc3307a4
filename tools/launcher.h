/* The cluster launcher: starts N kvserver processes on this host, each on a port the kernel
 * picked (bound here and handed down, so there is no race for ports), waits until every node says
 * it is ready, and stops them all again. kvbench --nodes, kvcluster and the tests use it; a test
 * may have it name more nodes in the config, which the test runs itself (embedded). */
#ifndef RDKV_LAUNCHER_H
#define RDKV_LAUNCHER_H

#include "rdma/fabric.h"

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#define LAUNCH_MAX 64

struct launch;

/* launch_opts.extra: at most this many entries, its NULL included */
#define LAUNCH_EXTRA_MAX 24

struct launch_opts {
    unsigned nodes;
    const char *bindir;            /* where kvserver is; NULL: next to the running program */
    const char *host;              /* default 127.0.0.1 */
    enum fab_transport transport;  /* default soft */
    uint64_t arena_size;           /* 0: kvserver's default */
    const char *dir;               /* config, logs, pids; NULL: a new temporary directory */
    bool detach;                   /* nodes outlive the launcher (kvcluster) */
    int64_t ready_timeout_ns;      /* default 60 s */
    bool bench;                    /* nodes serve kvbench's workloads (kvserver --bench) */
    const char *extra[LAUNCH_EXTRA_MAX]; /* more kvserver arguments, NULL-terminated */
    bool durable;                  /* node i keeps its redo log in DIR/node-i.data (kvserver
                                      --data-dir) and restarts with its data */
    const char *durability;        /* with durable: kvserver --durability (NULL: its default) */
    const char *checkpoint_every;  /* with durable: kvserver --checkpoint-every (NULL: its
                                      default) */
    bool init;                     /* with durable: a restart may start the node empty (kvserver
                                      --init; a first start always may) */
    bool insecure;                 /* benchmarks only: nodes run --insecure and no secret is made;
                                      else DIR/cluster.secret (node) and DIR/cluster.client.secret
                                      (for clients) are made unless DIR has them already */
    unsigned external;             /* more nodes, numbered after the first `nodes`, that the
                                      config names but the caller runs itself (rdkv_node_start,
                                      on L->ext_fd[k] for node nodes + k: kvserver --listen-fd) */
    /* with external: called once the spawned nodes are started, before launch_start waits for
     * them to be ready (they wait for every peer, the external ones too); 0 or a status with a
     * reason in err. It takes the sockets it hands to its nodes (setting L->ext_fd[k] to -1);
     * launch_start closes the others. Should launch_start fail after it succeeded, the caller
     * stops what it started. */
    int (*start_external)(struct launch *L, void *arg, char *err, size_t errcap);
    void *external_arg;
    unsigned replicas;             /* copies of each partition (0 or 1: one; over 1 needs a
                                      ZooKeeper: the config's `replicas` line) */
    const char *zookeeper;         /* ZooKeeper's hosts for the config's `zookeeper` line; NULL
                                      with replicas over 1: a standalone one is started in
                                      DIR/zk (launch_zk_start) and stopped with the nodes */
    const char *zk_host;           /* the address that standalone ZooKeeper listens on (NULL:
                                      127.0.0.1) */
    /* Per node (NULL: as above): its address (else host), and the network namespace it runs in
     * (a name of `ip netns`, /run/netns/NAME): its listening socket is bound there and the
     * process enters it before exec, so that a test can cut its links (needs CAP_SYS_ADMIN). */
    const char *node_host[LAUNCH_MAX];
    const char *node_netns[LAUNCH_MAX];
};

#define LAUNCH_SECRET "cluster.secret"
#define LAUNCH_CLIENT_SECRET "cluster.client.secret"

struct launch {
    unsigned n;                    /* the nodes launched: 0..n-1 (the config may name more:
                                      launch_opts.external) */
    struct cluster_config cc;
    char dir[PATH_MAX];
    char conf[PATH_MAX + 32];
    pid_t pids[LAUNCH_MAX];
    bool own_dir;                  /* a temporary directory that launch_stop removes */
    bool children;                 /* pids are our children (waitpid) */
    bool own_zk;                   /* launch_start started DIR/zk's ZooKeeper: stopped with us */
    int ext_fd[LAUNCH_MAX];        /* during start_external: the external nodes' listening
                                      sockets */
    char netns[LAUNCH_MAX][64];    /* launch_opts.node_netns, kept for restarts ("": none) */
};

void launch_opts_init(struct launch_opts *o);
/* A standalone local ZooKeeper (Debian's zookeeper package, on Java) with its config, data and
 * log in DIR/zk, on a port the kernel picked (or, when DIR had one before, on its port and
 * address, with its data): started (detached from this process) and waited for until it answers
 * "imok" (up to 60 s); hosts gets "ADDR:PORT". A ZooKeeper of DIR that already answers is used
 * as it is. launch_zk_start_at listens on addr (an IPv4 address of this host; NULL: the one DIR's
 * config had, else 127.0.0.1); launch_zk_start is it with NULL. */
int launch_zk_start(const char *dir, char *hosts, size_t cap, char *err, size_t errcap);
int launch_zk_start_at(const char *dir, const char *addr, char *hosts, size_t cap, char *err,
                       size_t errcap);
/* Stops DIR's ZooKeeper (SIGTERM, then SIGKILL after 10 s); nothing when there is none. */
void launch_zk_stop(const char *dir);
/* Starts the nodes and waits for all to be ready; on failure stops the ones it started and says
 * why (with the last line of the failing node's log). */
int launch_start(struct launch *L, const struct launch_opts *o, char *err, size_t errcap);
/* Reads a directory written by a detached launch (for kvcluster stop/status). */
int launch_attach(struct launch *L, const char *dir, char *err, size_t errcap);
int launch_signal(struct launch *L, unsigned node, int sig);
/* SIGKILLs a node and returns once it is dead (children only): from then on its sockets are
 * closed and, on verbs, its queue pairs are gone. */
int launch_kill(struct launch *L, unsigned node);
/* Starts a node again after launch_kill, with the options of launch_start (o) and on its old
 * port, and waits until it is ready; its log continues. For a detached cluster (launch_attach:
 * kvcluster restart) the node's process must be gone, however it died. */
int launch_restart(struct launch *L, const struct launch_opts *o, unsigned node, char *err,
                   size_t errcap);
/* The same for every node that is not running, started together -- as a whole cluster starts
 * again after all its nodes stopped -- and then waited for; from the calling thread (a child
 * started from a thread that then ends would get its parent-death signal). */
int launch_restart_all(struct launch *L, const struct launch_opts *o, char *err, size_t errcap);
/* Stops (SIGSTOP) or continues (SIGCONT) a node and returns once it has (children only). */
int launch_pause(struct launch *L, unsigned node, bool pause);
/* True while node's process exists. */
bool launch_alive(struct launch *L, unsigned node);
/* SIGTERM to every node, wait up to timeout for each, SIGKILL the rest. Returns 0 when every
 * node exited with status 0 (or, for detached nodes, exited at all). Frees L's resources. */
int launch_stop(struct launch *L, int64_t timeout_ns);
/* launch_opts.extra[k] as node gets it: its first "%N" replaced by the node's number (a data
 * directory per node), written to buf; x itself when it has none or buf is too small. */
const char *launch_extra_arg(const char *x, unsigned node, char *buf, size_t cap);
/* Path of the kvserver binary next to the running program (or in bindir). */
int launch_kvserver_path(const char *bindir, char *out, size_t cap);
/* The last non-empty line of a file (a node's log, to say why it failed), without its line end
 * and cut to cap (a line over 511 bytes counts as several); "" when there is none or the file
 * cannot be read. */
void launch_last_line(const char *path, char *out, size_t cap);

#endif
