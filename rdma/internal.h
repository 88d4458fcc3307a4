/* The core's own internals, beside what its backends see (core.h): the arena's header and
 * region directory, the node record, peers' addresses and the handshake, and the node service.
 * Only the core (the files directly in rdma/) includes it; backends include core.h. Not for use
 * outside rdma/. */
#ifndef RDKV_RDMA_INTERNAL_H
#define RDKV_RDMA_INTERNAL_H

#include "core.h"

/* ---------------------------------------------------------------------------------------------
 * The node. */
#define ARENA_MAGIC 0x414e455241564452ull /* "RDVARENA" */
#define ARENA_HDR_SIZE 4096u
#define ARENA_MAX_REGIONS 64

struct arena_region {
    char name[FAB_REGION_NAME_MAX + 1];
    uint64_t off;
    uint64_t size;
    uint64_t seal; /* hash of the three fields above, written last: a torn READ never matches */
};

struct arena_hdr {
    uint64_t magic;
    uint64_t size;
    uint64_t next_free;
    uint32_t nregions;
    uint32_t version;
    struct arena_region regions[ARENA_MAX_REGIONS];
};
_Static_assert(sizeof(struct arena_hdr) <= ARENA_HDR_SIZE, "arena header fits its page");

/* node.c: a node record for o (checked; defaults filled in; its credential loaded and its
 * peers' addresses resolved), with no arena, backend or service yet. 0 or RDKV_E*, with a reason
 * in err. fab_node_free undoes it (what open.c added must be gone). */
int fab_node_new(const struct fab_opts *o, struct fabric **out, char *err, size_t errcap);
void fab_node_free(struct fabric *f);
/* Whether a connection from src may claim to be node (its address matches the node's configured
 * host; any loopback address matches a loopback host; a host that did not resolve, or a wildcard,
 * matches anything). */
struct sockaddr_storage;
bool fab_peer_addr_ok(const struct fabric *f, uint16_t node, const struct sockaddr_storage *src);
/* The blocking client side of the handshake on a connected socket (docs/security.md): HELLO of
 * kind to node (FAB_NODE_ANY with endpoints_only), the proofs when this fabric holds a key, and
 * the node's HELLO_ACK in *ack. 0, the node's refusal status, RDKV_EPERM when the node could not
 * prove the secret, or a transport error; a one-line reason in err. */
int fab_handshake(struct fabric *f, int fd, uint16_t node, uint16_t kind, int64_t deadline,
                  struct wire_hello_ack *ack, char *err, size_t errcap);

/* ---------------------------------------------------------------------------------------------
 * The node service: accepts connections, hands one-sided requests that arrive on them to the
 * backend's NIC (exec, on the service thread), and feeds RPCs to the RPC threads. */
int svc_start(struct fabric *f, int listen_fd, char *err, size_t errcap);
void svc_stop(struct fabric *f);
/* Returns once the service thread has passed the start of a new batch of events: a frame it
 * handles after that sees every store made before the call (fab_fence). */
void svc_sync(struct fabric *f);
#endif
