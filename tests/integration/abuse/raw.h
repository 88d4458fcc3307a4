/* A raw fabric connection for the abuse suite: it speaks rdma/wire.h frames over a blocking TCP
 * socket to one node, as an attacker on the same host would, with none of the fabric's rules
 * applied on the sending side. Every call is bounded by the timeout given to raw_dial. */
#ifndef RDKV_ABUSE_RAW_H
#define RDKV_ABUSE_RAW_H

#include <stddef.h>
#include <stdint.h>

#include "rdma/wire.h"

struct raw_opts {
    uint16_t src_node;       /* the node id claimed in HELLO (FAB_NODE_CLIENT for a client) */
    uint16_t dst_node;       /* the node the caller believes it dialled (FAB_NODE_ANY allowed) */
    uint64_t cluster_fp;     /* 0: do not check */
    uint16_t kind;           /* enum wire_hello_kind; 0 means WIRE_KIND_FABRIC */
    const char *secret_file; /* the credential to prove (rdma/auth.h), or NULL: a HELLO that
                                offers no proof */
    uint8_t role;            /* enum wire_role claimed in HELLO; 0: WIRE_ROLE_NODE when the file
                                holds the node key, else WIRE_ROLE_CLIENT. A role whose key the
                                file lacks is "proven" with the key it has (an attacker's try) */
    int timeout_ms;          /* per call; 0 means 5000 */
    const char *bind_addr;   /* a local IPv4 address to connect from (NULL: the kernel's pick),
                                to claim a node id from an address that is not the node's */
    int no_hello;            /* connect only: send no HELLO */
};

struct raw {
    int fd;
    int timeout_ms;
    struct wire_hello_ack ack; /* the node's answer to HELLO (to AUTH, after a challenge) */
    int challenged;            /* the node answered HELLO with AUTH_CHALLENGE */
    int node_proved;           /* ... and its proof checked out against the credential */
    char why[256];             /* the last refusal or error, in words */
};

/* Connects to host:port and, unless o->no_hello, says HELLO -- with o->secret_file, the whole
 * challenge-response (the node's challenge, the proof in AUTH). Returns 0 when the node accepted,
 * the node's refusal status (negative rdkv status, ack.status) when it refused, or
 * RDKV_EUNAVAILABLE when the connection failed or closed first. r->fd stays open on a refusal
 * (the node closes its end) and must be closed with raw_close. */
int raw_dial(struct raw *r, const char *host, uint16_t port, const struct raw_opts *o);

/* Sends n bytes as they are. 0 or RDKV_EUNAVAILABLE. */
int raw_send(struct raw *r, const void *buf, size_t n);
/* Sends one RPC request frame (type, id) with its payload. */
int raw_send_rpc(struct raw *r, uint64_t id, uint16_t type, const void *payload, uint32_t len);
/* Sends one soft one-sided request; payload is a WRITE's bytes (NULL otherwise). */
int raw_send_op(struct raw *r, const struct wire_op_req *op, const void *payload);

/* Receives one frame: *body is malloc'd (free it). 0, RDKV_ETIMEDOUT, RDKV_EUNAVAILABLE (closed)
 * or RDKV_EPROTO (a header this side cannot accept). */
int raw_recv_frame(struct raw *r, struct wire_hdr *h, uint8_t **body);
/* Receives until the RPC response with this id: its status, payload copied into out (up to cap,
 * *len the payload's full length). Other frames are skipped. */
int raw_rpc_reply(struct raw *r, uint64_t id, int32_t *status, void *out, size_t cap, size_t *len);

/* 1 when the node has closed the connection (reads EOF within the timeout), else 0. */
int raw_closed_by_peer(struct raw *r);

void raw_close(struct raw *r);

/* The resident set of process pid in KiB, or -1. */
long raw_rss_kib(int pid);

#endif
