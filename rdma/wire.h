/* The fabric's TCP wire format: length-prefixed frames for the connection handshake, soft
 * one-sided requests and responses, and RPC. Everything here decodes bytes from the network, so
 * every decoder checks every length and never trusts a field; fuzzed in tests/fuzz. All integers
 * are little-endian. */
#ifndef RDKV_WIRE_H
#define RDKV_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define WIRE_MAGIC 0x564b4452u /* "RDKV" */
#define WIRE_VERSION 3 /* 2: HELLO carries a role and a nonce; AUTH_CHALLENGE and AUTH frames;
                          3: HELLO and HELLO_ACK carry their side's incarnation */

/* Every frame a connection sends before it is authenticated (HELLO and whatever the handshake
 * adds) has a body of at most this many bytes: until then the receiver refuses any longer frame
 * on its header alone, so that a stranger can make a node hold no more than this per
 * connection. */
#define WIRE_PREAUTH_MAX 256u

/* A soft one-sided READ or WRITE moves at most this many bytes per frame; longer operations are
 * split by the initiator into several requests on the same endpoint. */
#define WIRE_OP_MAX (1u << 20)

enum wire_type {
    WIRE_HELLO = 1,     /* first frame from the connecting side */
    WIRE_HELLO_ACK = 2, /* the answer */
    WIRE_OP_REQ = 3,    /* soft one-sided request */
    WIRE_OP_RESP = 4,
    WIRE_OP_RESET = 5,  /* leave the endpoint's error state (like moving a QP back to RTS) */
    WIRE_RPC_REQ = 6,
    WIRE_RPC_RESP = 7,
    WIRE_AUTH_CHALLENGE = 8, /* the node's answer to a HELLO that offers a proof */
    WIRE_AUTH = 9,           /* the caller's proof; the node then answers with HELLO_ACK */
};

enum wire_hello_kind {
    WIRE_KIND_FABRIC = 1, /* a fab_ctx endpoint: one-sided (soft) and RPC */
    WIRE_KIND_ECHO = 2,   /* raw TCP ping-pong baseline: 8-byte messages echoed by a plain thread */
};

#define WIRE_HDR_SIZE 8
struct wire_hdr {
    uint32_t len;  /* bytes of body after the header */
    uint8_t type;
    uint8_t flags;
    uint16_t aux;
};

/* The handshake (docs/security.md): HELLO, then -- when the HELLO offers a proof (WIRE_HELLO_F_AUTH)
 * and the node is not --insecure -- AUTH_CHALLENGE (the node's nonce and its own proof) and AUTH
 * (the caller's proof), then HELLO_ACK. A refusal is a HELLO_ACK whose status is set and whose
 * other fields are all zero. */
#define WIRE_NONCE_SIZE 32
#define WIRE_MAC_SIZE 32
#define WIRE_HELLO_F_AUTH 1u  /* nonce is set: the caller will prove its role's key */

enum wire_role {
    WIRE_ROLE_NODE = 1,   /* proves the node key: a cluster member, or an operator tool */
    WIRE_ROLE_CLIENT = 2, /* proves the client key: the session protocol only */
};

#define WIRE_HELLO_SIZE 64
struct wire_hello {
    uint32_t magic;
    uint16_t version;
    uint16_t kind;
    uint16_t src_node;
    uint16_t dst_node;     /* the node the caller believes it dialled */
    uint8_t role;          /* enum wire_role */
    uint8_t flags;         /* WIRE_HELLO_F_* */
    uint64_t cluster_fp;   /* 0: do not check */
    uint8_t nonce[WIRE_NONCE_SIZE]; /* the caller's fresh random nonce (with WIRE_HELLO_F_AUTH) */
    uint64_t incarnation;  /* the caller's process (fab_incarnation; a client's too) */
};

#define WIRE_HELLO_ACK_SIZE 32
struct wire_hello_ack {
    int32_t status;
    uint16_t node;
    uint16_t transport;
    uint64_t arena_size;
    uint64_t cluster_fp;
    uint64_t incarnation; /* the node's process (fab_incarnation): which life of the node answers */
};

#define WIRE_CHALLENGE_SIZE 64
struct wire_challenge {
    uint8_t nonce[WIRE_NONCE_SIZE]; /* the node's fresh random nonce */
    uint8_t mac[WIRE_MAC_SIZE];     /* the node's proof (rdma/auth.h) */
};

#define WIRE_AUTH_SIZE 32
struct wire_auth {
    uint8_t mac[WIRE_MAC_SIZE]; /* the caller's proof */
};

#define WIRE_OP_REQ_SIZE 32
struct wire_op_req {
    uint8_t op;        /* enum fab_opcode */
    uint32_t len;      /* READ/WRITE bytes (<= WIRE_OP_MAX) */
    uint64_t off;      /* arena offset */
    uint64_t arg;
    uint64_t swap;
};

#define WIRE_OP_RESP_SIZE 16
struct wire_op_resp {
    int32_t status;
    uint32_t len;      /* READ payload bytes that follow */
    uint64_t value;    /* CAS/FAA: the old value */
};

#define WIRE_RPC_SIZE 16
struct wire_rpc {
    uint64_t id;
    uint16_t type;     /* requests */
    int32_t status;    /* responses */
};

/* Encoders write exactly WIRE_HDR_SIZE + body bytes (payloads are appended by the caller). */
void wire_put_hdr(uint8_t *p, uint8_t type, uint32_t body_len);
void wire_put_hello(uint8_t *p, const struct wire_hello *h);         /* header + body */
void wire_put_hello_ack(uint8_t *p, const struct wire_hello_ack *a); /* header + body */
void wire_put_challenge(uint8_t *p, const struct wire_challenge *c); /* header + body */
void wire_put_auth(uint8_t *p, const struct wire_auth *a);           /* header + body */
void wire_put_op_req(uint8_t *p, const struct wire_op_req *r, uint32_t payload);
void wire_put_op_resp(uint8_t *p, const struct wire_op_resp *r);
void wire_put_rpc_req(uint8_t *p, uint64_t id, uint16_t type, uint32_t payload);
void wire_put_rpc_resp(uint8_t *p, uint64_t id, int32_t status, uint32_t payload);

/* Decoders: 0, or RDKV_EPROTO when the body does not have the shape its type requires. */
int wire_get_hdr(const uint8_t *p, struct wire_hdr *h);
int wire_get_hello(const struct wire_hdr *h, const uint8_t *body, struct wire_hello *out);
int wire_get_hello_ack(const struct wire_hdr *h, const uint8_t *body, struct wire_hello_ack *out);
int wire_get_challenge(const struct wire_hdr *h, const uint8_t *body, struct wire_challenge *out);
int wire_get_auth(const struct wire_hdr *h, const uint8_t *body, struct wire_auth *out);
/* For WRITE the payload is the rest of the body and must be exactly r->len bytes. */
int wire_get_op_req(const struct wire_hdr *h, const uint8_t *body, struct wire_op_req *out,
                    const uint8_t **payload);
int wire_get_op_resp(const struct wire_hdr *h, const uint8_t *body, struct wire_op_resp *out,
                     const uint8_t **payload);
int wire_get_rpc(const struct wire_hdr *h, const uint8_t *body, struct wire_rpc *out,
                 const uint8_t **payload, size_t *payload_len);

/* The largest body a receiver accepts for a frame type (0: unknown type). */
uint32_t wire_max_body(uint8_t type, uint32_t rpc_max);

/* Frame reassembly from a byte stream. Frames wholly inside one fed chunk are handed out in
 * place; others are gathered in buf, which grows with the bytes that actually arrived (never
 * to a header's announced length alone). */
struct wire_asm {
    uint8_t *buf;
    size_t len, cap;
    uint32_t rpc_max;
    uint32_t limit;    /* when not 0: no frame body may be longer (the connection's state) */
};

typedef int (*wire_frame_fn)(void *arg, const struct wire_hdr *h, const uint8_t *body);

void wire_asm_init(struct wire_asm *a, uint32_t rpc_max);
void wire_asm_free(struct wire_asm *a);
/* Feeds n bytes; calls fn for each complete frame, in order. Returns 0, RDKV_EPROTO for a frame
 * header of unknown type or excessive length, RDKV_ENOMEM, or the first negative value fn
 * returned (processing stops there). */
int wire_asm_feed(struct wire_asm *a, const uint8_t *data, size_t n, wire_frame_fn fn, void *arg);
/* Like wire_asm_feed, but fn may return WIRE_ASM_STOP to stop after its frame: the call then
 * returns WIRE_ASM_STOP and *used says how many of the n bytes were consumed (the caller keeps
 * the rest and feeds it later). *used is n after a return of 0. */
#define WIRE_ASM_STOP 1
int wire_asm_feed_part(struct wire_asm *a, const uint8_t *data, size_t n, wire_frame_fn fn,
                       void *arg, size_t *used);
/* Caps every frame body from now on at limit bytes (0: only the per-type limits), checked on
 * each header as it arrives: WIRE_PREAUTH_MAX until a connection is authenticated. */
void wire_asm_set_limit(struct wire_asm *a, uint32_t limit);

#endif
