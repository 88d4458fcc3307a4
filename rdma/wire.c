/* Wire format encoders, decoders and the frame reassembler. */
#include "wire.h"

#include "common/pack.h"
#include "rdkv_status.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>


void wire_put_hdr(uint8_t *p, uint8_t type, uint32_t body_len)
{
    pack_put_u32le(p, body_len);
    p[4] = type;
    p[5] = 0;
    pack_put_u16le(p + 6, 0);
}

int wire_get_hdr(const uint8_t *p, struct wire_hdr *h)
{
    h->len = pack_get_u32le(p);
    h->type = p[4];
    h->flags = p[5];
    h->aux = pack_get_u16le(p + 6);
    return 0;
}

void wire_put_hello(uint8_t *p, const struct wire_hello *h)
{
    wire_put_hdr(p, WIRE_HELLO, WIRE_HELLO_SIZE);
    p += WIRE_HDR_SIZE;
    pack_put_u32le(p, h->magic);
    pack_put_u16le(p + 4, h->version);
    pack_put_u16le(p + 6, h->kind);
    pack_put_u16le(p + 8, h->src_node);
    pack_put_u16le(p + 10, h->dst_node);
    p[12] = h->role;
    p[13] = h->flags;
    pack_put_u16le(p + 14, 0);
    pack_put_u64le(p + 16, h->cluster_fp);
    memcpy(p + 24, h->nonce, WIRE_NONCE_SIZE);
    pack_put_u64le(p + 24 + WIRE_NONCE_SIZE, h->incarnation);
}

int wire_get_hello(const struct wire_hdr *h, const uint8_t *b, struct wire_hello *o)
{
    if (h->type != WIRE_HELLO || h->len != WIRE_HELLO_SIZE) return RDKV_EPROTO;
    o->magic = pack_get_u32le(b);
    o->version = pack_get_u16le(b + 4);
    o->kind = pack_get_u16le(b + 6);
    o->src_node = pack_get_u16le(b + 8);
    o->dst_node = pack_get_u16le(b + 10);
    o->role = b[12];
    o->flags = b[13];
    o->cluster_fp = pack_get_u64le(b + 16);
    memcpy(o->nonce, b + 24, WIRE_NONCE_SIZE);
    o->incarnation = pack_get_u64le(b + 24 + WIRE_NONCE_SIZE);
    if (o->magic != WIRE_MAGIC) return RDKV_EPROTO;
    if (o->role != WIRE_ROLE_NODE && o->role != WIRE_ROLE_CLIENT) return RDKV_EPROTO;
    if (o->flags & ~WIRE_HELLO_F_AUTH) return RDKV_EPROTO;
    return 0;
}

void wire_put_challenge(uint8_t *p, const struct wire_challenge *c)
{
    wire_put_hdr(p, WIRE_AUTH_CHALLENGE, WIRE_CHALLENGE_SIZE);
    memcpy(p + WIRE_HDR_SIZE, c->nonce, WIRE_NONCE_SIZE);
    memcpy(p + WIRE_HDR_SIZE + WIRE_NONCE_SIZE, c->mac, WIRE_MAC_SIZE);
}

int wire_get_challenge(const struct wire_hdr *h, const uint8_t *b, struct wire_challenge *o)
{
    if (h->type != WIRE_AUTH_CHALLENGE || h->len != WIRE_CHALLENGE_SIZE) return RDKV_EPROTO;
    memcpy(o->nonce, b, WIRE_NONCE_SIZE);
    memcpy(o->mac, b + WIRE_NONCE_SIZE, WIRE_MAC_SIZE);
    return 0;
}

void wire_put_auth(uint8_t *p, const struct wire_auth *a)
{
    wire_put_hdr(p, WIRE_AUTH, WIRE_AUTH_SIZE);
    memcpy(p + WIRE_HDR_SIZE, a->mac, WIRE_MAC_SIZE);
}

int wire_get_auth(const struct wire_hdr *h, const uint8_t *b, struct wire_auth *o)
{
    if (h->type != WIRE_AUTH || h->len != WIRE_AUTH_SIZE) return RDKV_EPROTO;
    memcpy(o->mac, b, WIRE_MAC_SIZE);
    return 0;
}

void wire_put_hello_ack(uint8_t *p, const struct wire_hello_ack *a)
{
    wire_put_hdr(p, WIRE_HELLO_ACK, WIRE_HELLO_ACK_SIZE);
    p += WIRE_HDR_SIZE;
    pack_put_u32le(p, (uint32_t)a->status);
    pack_put_u16le(p + 4, a->node);
    pack_put_u16le(p + 6, a->transport);
    pack_put_u64le(p + 8, a->arena_size);
    pack_put_u64le(p + 16, a->cluster_fp);
    pack_put_u64le(p + 24, a->incarnation);
}

int wire_get_hello_ack(const struct wire_hdr *h, const uint8_t *b, struct wire_hello_ack *o)
{
    if (h->type != WIRE_HELLO_ACK || h->len != WIRE_HELLO_ACK_SIZE) return RDKV_EPROTO;
    o->status = (int32_t)pack_get_u32le(b);
    o->node = pack_get_u16le(b + 4);
    o->transport = pack_get_u16le(b + 6);
    o->arena_size = pack_get_u64le(b + 8);
    o->cluster_fp = pack_get_u64le(b + 16);
    o->incarnation = pack_get_u64le(b + 24);
    return 0;
}

void wire_put_op_req(uint8_t *p, const struct wire_op_req *r, uint32_t payload)
{
    wire_put_hdr(p, WIRE_OP_REQ, WIRE_OP_REQ_SIZE + payload);
    p += WIRE_HDR_SIZE;
    p[0] = r->op;
    p[1] = p[2] = p[3] = 0;
    pack_put_u32le(p + 4, r->len);
    pack_put_u64le(p + 8, r->off);
    pack_put_u64le(p + 16, r->arg);
    pack_put_u64le(p + 24, r->swap);
}

int wire_get_op_req(const struct wire_hdr *h, const uint8_t *b, struct wire_op_req *o,
                    const uint8_t **payload)
{
    if (h->type != WIRE_OP_REQ || h->len < WIRE_OP_REQ_SIZE) return RDKV_EPROTO;
    o->op = b[0];
    o->len = pack_get_u32le(b + 4);
    o->off = pack_get_u64le(b + 8);
    o->arg = pack_get_u64le(b + 16);
    o->swap = pack_get_u64le(b + 24);
    uint32_t extra = h->len - WIRE_OP_REQ_SIZE;
    if (o->len > WIRE_OP_MAX) return RDKV_EPROTO;
    if (o->op == 2 /* WRITE */) {
        if (extra != o->len) return RDKV_EPROTO;
    } else if (extra != 0) {
        return RDKV_EPROTO;
    }
    *payload = b + WIRE_OP_REQ_SIZE;
    return 0;
}

void wire_put_op_resp(uint8_t *p, const struct wire_op_resp *r)
{
    wire_put_hdr(p, WIRE_OP_RESP, WIRE_OP_RESP_SIZE + r->len);
    p += WIRE_HDR_SIZE;
    pack_put_u32le(p, (uint32_t)r->status);
    pack_put_u32le(p + 4, r->len);
    pack_put_u64le(p + 8, r->value);
}

int wire_get_op_resp(const struct wire_hdr *h, const uint8_t *b, struct wire_op_resp *o,
                     const uint8_t **payload)
{
    if (h->type != WIRE_OP_RESP || h->len < WIRE_OP_RESP_SIZE) return RDKV_EPROTO;
    o->status = (int32_t)pack_get_u32le(b);
    o->len = pack_get_u32le(b + 4);
    o->value = pack_get_u64le(b + 8);
    if (o->len != h->len - WIRE_OP_RESP_SIZE) return RDKV_EPROTO;
    *payload = b + WIRE_OP_RESP_SIZE;
    return 0;
}

void wire_put_rpc_req(uint8_t *p, uint64_t id, uint16_t type, uint32_t payload)
{
    wire_put_hdr(p, WIRE_RPC_REQ, WIRE_RPC_SIZE + payload);
    p += WIRE_HDR_SIZE;
    pack_put_u64le(p, id);
    pack_put_u16le(p + 8, type);
    pack_put_u16le(p + 10, 0);
    pack_put_u32le(p + 12, 0);
}

void wire_put_rpc_resp(uint8_t *p, uint64_t id, int32_t status, uint32_t payload)
{
    wire_put_hdr(p, WIRE_RPC_RESP, WIRE_RPC_SIZE + payload);
    p += WIRE_HDR_SIZE;
    pack_put_u64le(p, id);
    pack_put_u32le(p + 8, (uint32_t)status);
    pack_put_u32le(p + 12, 0);
}

int wire_get_rpc(const struct wire_hdr *h, const uint8_t *b, struct wire_rpc *o,
                 const uint8_t **payload, size_t *payload_len)
{
    if ((h->type != WIRE_RPC_REQ && h->type != WIRE_RPC_RESP) || h->len < WIRE_RPC_SIZE)
        return RDKV_EPROTO;
    o->id = pack_get_u64le(b);
    if (h->type == WIRE_RPC_REQ) {
        o->type = pack_get_u16le(b + 8);
        o->status = 0;
    } else {
        o->type = 0;
        o->status = (int32_t)pack_get_u32le(b + 8);
        if (o->status > 0 || o->status < -1000) return RDKV_EPROTO;
    }
    *payload = b + WIRE_RPC_SIZE;
    *payload_len = h->len - WIRE_RPC_SIZE;
    return 0;
}

uint32_t wire_max_body(uint8_t type, uint32_t rpc_max)
{
    switch (type) {
    case WIRE_HELLO: return WIRE_HELLO_SIZE;
    case WIRE_HELLO_ACK: return WIRE_HELLO_ACK_SIZE;
    case WIRE_AUTH_CHALLENGE: return WIRE_CHALLENGE_SIZE;
    case WIRE_AUTH: return WIRE_AUTH_SIZE;
    case WIRE_OP_REQ: return WIRE_OP_REQ_SIZE + WIRE_OP_MAX;
    case WIRE_OP_RESP: return WIRE_OP_RESP_SIZE + WIRE_OP_MAX;
    case WIRE_OP_RESET: return 0;
    case WIRE_RPC_REQ:
    case WIRE_RPC_RESP: return WIRE_RPC_SIZE + rpc_max;
    }
    return 0;
}

void wire_asm_init(struct wire_asm *a, uint32_t rpc_max)
{
    memset(a, 0, sizeof *a);
    a->rpc_max = rpc_max;
}

void wire_asm_free(struct wire_asm *a)
{
    free(a->buf);
    a->buf = NULL;
    a->len = a->cap = 0;
}

void wire_asm_set_limit(struct wire_asm *a, uint32_t limit) { a->limit = limit; }

/* Validates a header: known type, body within the type's limit and the connection's. */
static int check_hdr(const struct wire_asm *a, const struct wire_hdr *h)
{
    uint32_t max = wire_max_body(h->type, a->rpc_max);
    if (max == 0 && h->type != WIRE_OP_RESET) return RDKV_EPROTO;
    if (h->len > max) return RDKV_EPROTO;
    if (a->limit && h->len > a->limit) return RDKV_ETOOBIG;
    return 0;
}

/* Room for need bytes in buf. It doubles from 4 KiB, and callers ask only for bytes that have
 * arrived, so a header announcing a long body costs nothing until the body comes. */
static int reserve(struct wire_asm *a, size_t need)
{
    if (need <= a->cap) return 0;
    size_t cap = a->cap ? a->cap : 4096;
    while (cap < need) cap *= 2;
    uint8_t *nb = realloc(a->buf, cap);
    if (!nb) return RDKV_ENOMEM;
    a->buf = nb;
    a->cap = cap;
    return 0;
}

/* fn's answer: a negative status ends the feed; WIRE_ASM_STOP ends it when the caller can keep
 * the rest (stoppable), and is ignored otherwise. */
static int feed(struct wire_asm *a, const uint8_t *data, size_t n, wire_frame_fn fn, void *arg,
                bool stoppable, size_t *used)
{
    int rc;
    struct wire_hdr h;
    const uint8_t *start = data;
    *used = 0;
    /* First complete a frame already started in buf. */
    while (a->len > 0 && n > 0) {
        if (a->len < WIRE_HDR_SIZE) {
            size_t take = WIRE_HDR_SIZE - a->len;
            if (take > n) take = n;
            if ((rc = reserve(a, WIRE_HDR_SIZE))) return rc;
            memcpy(a->buf + a->len, data, take);
            a->len += take;
            data += take;
            n -= take;
            if (a->len < WIRE_HDR_SIZE) break;
            wire_get_hdr(a->buf, &h);
            if ((rc = check_hdr(a, &h))) return rc;
        }
        wire_get_hdr(a->buf, &h);
        size_t total = WIRE_HDR_SIZE + (size_t)h.len;
        size_t take = total - a->len;
        if (take > n) take = n;
        if ((rc = reserve(a, a->len + take))) return rc;
        memcpy(a->buf + a->len, data, take);
        a->len += take;
        data += take;
        n -= take;
        if (a->len < total) break;
        a->len = 0;
        rc = fn(arg, &h, a->buf + WIRE_HDR_SIZE);
        if (rc < 0) return rc;
        if (rc == WIRE_ASM_STOP && stoppable) {
            *used = (size_t)(data - start);
            return WIRE_ASM_STOP;
        }
    }
    if (a->len > 0) { /* everything went into the partial frame */
        *used = (size_t)(data - start);
        return 0;
    }
    /* Then frames wholly inside this chunk, in place. */
    while (n >= WIRE_HDR_SIZE) {
        wire_get_hdr(data, &h);
        if ((rc = check_hdr(a, &h))) return rc;
        size_t total = WIRE_HDR_SIZE + (size_t)h.len;
        if (total > n) break;
        rc = fn(arg, &h, data + WIRE_HDR_SIZE);
        data += total;
        n -= total;
        if (rc < 0) return rc;
        if (rc == WIRE_ASM_STOP && stoppable) {
            *used = (size_t)(data - start);
            return WIRE_ASM_STOP;
        }
    }
    /* Keep the tail (its header, when complete, was checked above). */
    if (n > 0) {
        if ((rc = reserve(a, n < WIRE_HDR_SIZE ? WIRE_HDR_SIZE : n))) return rc;
        memcpy(a->buf, data, n);
        a->len = n;
    }
    *used = (size_t)(data - start) + n;
    return 0;
}

int wire_asm_feed(struct wire_asm *a, const uint8_t *data, size_t n, wire_frame_fn fn, void *arg)
{
    size_t used;
    return feed(a, data, n, fn, arg, false, &used);
}

int wire_asm_feed_part(struct wire_asm *a, const uint8_t *data, size_t n, wire_frame_fn fn,
                       void *arg, size_t *used)
{
    return feed(a, data, n, fn, arg, true, used);
}
