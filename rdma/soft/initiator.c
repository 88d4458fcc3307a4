/* The soft transport's initiator side: a chain becomes request frames on the endpoint's TCP
 * stream (ops longer than WIRE_OP_MAX as several pieces), and responses complete the pieces in
 * order from the endpoint's fifo; a mismatch fails the endpoint, never mis-completes an op. */
#include "nic.h"

#include "rdma/core.h"

#include <stdlib.h>
#include <string.h>

/* One part of a one-sided op in flight: ops longer than WIRE_OP_MAX travel as several. */
struct piece {
    uint16_t slot;
    uint8_t op;
    uint32_t len;
    uint64_t at; /* byte offset inside the op */
};

/* The backend's state for one peer of a context (c->be_ctx holds one per node). */
struct soft_ep {
    bool needs_reset;   /* send WIRE_OP_RESET before the next request */
    struct piece *fifo; /* pieces in flight, in order */
    unsigned head, count, cap;
};

static inline struct soft_ep *soft_ep(struct fab_ctx *c, uint16_t node)
{
    return &((struct soft_ep *)c->be_ctx)[node];
}

static bool fifo_push(struct soft_ep *ep, struct piece p)
{
    if (ep->count == ep->cap) {
        unsigned ncap = ep->cap ? ep->cap * 2 : 64;
        struct piece *nf = malloc(ncap * sizeof *nf);
        if (!nf) return false;
        for (unsigned k = 0; k < ep->count; k++) nf[k] = ep->fifo[(ep->head + k) % ep->cap];
        free(ep->fifo);
        ep->fifo = nf;
        ep->cap = ncap;
        ep->head = 0;
    }
    ep->fifo[(ep->head + ep->count) % ep->cap] = p;
    ep->count++;
    return true;
}

/* The soft transport's doorbell: the chain becomes request frames appended to the endpoint's
 * output; one send carries them (and whatever else gathered meanwhile), now or, with defer, at
 * the end of the scheduler's round (ctx_kick). */
static int soft_post(struct fab_ctx *c, unsigned si, bool defer)
{
    struct slot *s = &c->slots[si];
    struct soft_ep *ep = soft_ep(c, s->node);
    struct conn *cn = c->eps[s->node].conn;
    if (ep->needs_reset) {
        uint8_t *p = conn_reserve(cn, WIRE_HDR_SIZE);
        if (!p) return RDKV_ENOMEM;
        wire_put_hdr(p, WIRE_OP_RESET, 0);
        ep->needs_reset = false;
    }
    for (unsigned i = 0; i < s->n; i++) {
        struct fab_op *o = &s->ops[i];
        bool atomic = o->opcode == FAB_OP_CAS || o->opcode == FAB_OP_FAA;
        uint64_t len = atomic ? 8 : o->len;
        for (uint64_t at = 0; at < len; at += WIRE_OP_MAX) {
            uint32_t chunk = (uint32_t)(len - at < WIRE_OP_MAX ? len - at : WIRE_OP_MAX);
            uint32_t payload = o->opcode == FAB_OP_WRITE ? chunk : 0;
            uint8_t *p = conn_reserve(cn, WIRE_HDR_SIZE + WIRE_OP_REQ_SIZE + payload);
            if (!p || !fifo_push(ep, (struct piece){.slot = (uint16_t)si, .op = (uint8_t)i,
                                                    .len = chunk, .at = at}))
                return RDKV_ENOMEM;
            struct wire_op_req rq = {.op = o->opcode, .len = atomic ? 0 : chunk,
                                     .off = rptr_off(o->remote) + at, .arg = o->arg,
                                     .swap = o->swap};
            wire_put_op_req(p, &rq, payload);
            if (payload)
                memcpy(p + WIRE_HDR_SIZE + WIRE_OP_REQ_SIZE, (const uint8_t *)o->local + at, payload);
            s->pending++;
        }
    }
    ctx_kick(c, cn, defer);
    return 0;
}

/* The backend's on_frame: a response completes the oldest piece in flight on the endpoint. */
static int soft_on_op_resp(struct fab_ctx *c, uint16_t node, const struct wire_hdr *h,
                           const uint8_t *body)
{
    if (h->type != WIRE_OP_RESP) return RDKV_EPROTO;
    struct soft_ep *ep = soft_ep(c, node);
    struct wire_op_resp r;
    const uint8_t *payload;
    if (wire_get_op_resp(h, body, &r, &payload) || ep->count == 0) return RDKV_EPROTO;
    struct piece p = ep->fifo[ep->head];
    ep->head = (ep->head + 1) % ep->cap;
    ep->count--;
    struct slot *s = &c->slots[p.slot];
    if (s->kind != SLOT_CHAIN || s->done) return 0; /* its chain already failed */
    struct fab_op *o = &s->ops[p.op];
    if (r.status == 0) {
        if (o->opcode == FAB_OP_READ) {
            if (r.len != p.len) return RDKV_EPROTO;
            memcpy((uint8_t *)o->local + p.at, payload, p.len);
        } else if (r.len != 0) {
            return RDKV_EPROTO;
        }
        if (o->opcode == FAB_OP_CAS || o->opcode == FAB_OP_FAA) o->result = r.value;
    } else {
        if (r.status > 0 || r.status < RDKV_STATUS_MIN) r.status = RDKV_EPROTO;
        if (o->status == 0) o->status = r.status;
        if (s->status == 0) s->status = r.status;
        /* The target's endpoint is in its error state until we reset it. */
        ep->needs_reset = true;
    }
    if (--s->pending == 0) ctx_complete(c, p.slot, s->status);
    return 0;
}

/* The endpoint to node failed: every piece in flight fails with status, and the fifo is left
 * empty with no reset owed, as the next connection (a fresh target endpoint) needs: an endpoint
 * goes down only through ctx_fail_peer, so ctx_ep_up always finds it so. */
static void soft_peer_down(struct fab_ctx *c, uint16_t node, int status)
{
    if (!c->be_ctx) return;
    struct soft_ep *ep = soft_ep(c, node);
    ep->needs_reset = false;
    for (unsigned k = 0; k < ep->count; k++) {
        struct piece *p = &ep->fifo[(ep->head + k) % ep->cap];
        struct slot *s = &c->slots[p->slot];
        if (s->kind == SLOT_CHAIN && !s->done && s->ops[p->op].status == 0)
            s->ops[p->op].status = status;
    }
    ep->head = ep->count = 0;
}

static int soft_ctx_init(struct fab_ctx *c)
{
    c->be_ctx = calloc(c->f->nnodes, sizeof(struct soft_ep));
    return c->be_ctx ? 0 : RDKV_ENOMEM;
}

static void soft_ctx_fini(struct fab_ctx *c)
{
    for (unsigned i = 0; i < c->f->nnodes; i++) free(soft_ep(c, (uint16_t)i)->fifo);
    free(c->be_ctx);
    c->be_ctx = NULL;
}

/* Everything else -- the connection, its output and flushes, RPC -- is the core's. */
const struct fab_backend fab_soft_backend = {
    .transport = FAB_SOFT,
    .ctx_init = soft_ctx_init,
    .ctx_fini = soft_ctx_fini,
    .post = soft_post,
    .on_frame = soft_on_op_resp,
    .exec = soft_nic_exec,
    .peer_down = soft_peer_down,
};
