/* A small network lab for partition tests: each node in a network namespace of its own, with two
 * links into this host's namespace -- one on a "data" bridge (the other nodes and the clients)
 * and one on a "zk" bridge (ZooKeeper) -- so that a test can cut a node off from its peers, from
 * ZooKeeper, or from both, and heal it again (`ip link set DEV down|up` on this host's end).
 * Built with iproute2's `ip`; needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN). Names carry this
 * process's id, so that two runs never share one; a lab left by a run that died is removed by
 * the next netlab_up. */
#ifndef RDKV_TEST_NETLAB_H
#define RDKV_TEST_NETLAB_H

#include <stdbool.h>
#include <stddef.h>

#define NETLAB_MAX 8

enum netlab_net { NETLAB_DATA = 0, NETLAB_ZK = 1 };

struct netlab {
    unsigned n;
    char ns[NETLAB_MAX][32];        /* node i's namespace (for launch_opts.node_netns) */
    char host[2][NETLAB_MAX][20];   /* node i's address on each net */
    char gw[2][20];                 /* this host's address on each net (ZooKeeper: gw[ZK]) */
    char br[2][16];
    char veth[2][NETLAB_MAX][16];   /* this host's end of node i's link to each net */
    bool up;
};

/* Builds the lab for n nodes: 0, or -1 with why in err (no root, no `ip`, a kernel without
 * namespaces: the caller skips). */
int netlab_up(struct netlab *nl, unsigned n, char *err, size_t cap);
/* Cuts (up false) or heals node i's link to a net: 0, or -1. */
int netlab_link(struct netlab *nl, unsigned node, enum netlab_net net, bool up);
/* Removes every namespace, link and bridge of the lab (also after a failed netlab_up). */
void netlab_down(struct netlab *nl);

#endif
