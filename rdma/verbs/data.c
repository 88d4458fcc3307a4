/* The verbs backend's data path: a chain becomes one linked work-request list and one doorbell
 * (only its last request signaled), staged through a registered ring; completions, the backlog
 * of chains waiting for room, and the stall kick. It fills in fab_verbs_backend. */
#include "verbs_internal.h"

#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

/* Queue pairs. */
#define VQ_CTX_WR_BUDGET 4096u   /* work requests in flight per context (bounds the CQ) */
#define VQ_STALL_NS (50 * NS_PER_MS) /* no completion for this long with work queued: kick */
#define VQ_WATCH_NS (10 * NS_PER_MS)
#define KICK_SLOT 0xFFFFu        /* wr_id slot of a kick */

/* Staging: a per-context registered ring for local buffers outside the arena. */
#define STAGE_SIZE (1u << 20)
#define STAGE_ALIGN 64u
#define STAGE_OP_MAX (16u << 10)     /* longer READs into caller memory register it instead */
#define STAGE_CHAIN_MAX (256u << 10) /* longer needs get a block of their own */

#define LOC_ARENA 0xFFFFFFFFu  /* the op's local buffer lies in the arena */
#define LOC_INLINE 0xFFFFFFFEu /* a WRITE sent inline straight from the caller's buffer */
#define LOC_UMR 0x80000000u    /* | k: the caller's buffer, registered as umrs[k] */

/* ---------------------------------------------------------------------------------------------
 * Little helpers */

static inline uint64_t wrid_make(unsigned si, unsigned op, uint32_t gen)
{
    return ((uint64_t)gen << 32) | ((uint64_t)op << 16) | si;
}
static inline unsigned wrid_slot(uint64_t w) { return (unsigned)(w & 0xFFFF); }
static inline unsigned wrid_op(uint64_t w) { return (unsigned)((w >> 16) & 0xFFFF); }
static inline uint32_t wrid_gen(uint64_t w) { return (uint32_t)(w >> 32); }

static inline bool op_is_atomic(const struct fab_op *o)
{
    return o->opcode == FAB_OP_CAS || o->opcode == FAB_OP_FAA;
}

static void vqp_destroy(struct fab_ctx *c, struct vqp *q);

static bool arena_contains(const struct fabric *f, const void *p, uint64_t len)
{
    const uint8_t *b = p;
    if (!f->arena || b < f->arena) return false;
    uint64_t off = (uint64_t)(b - f->arena);
    return off <= f->arena_size && len <= f->arena_size - off;
}

static bool slot_is_live(struct fab_ctx *c, unsigned si, uint32_t gen)
{
    const struct slot *s = &c->slots[si];
    return s->kind == SLOT_CHAIN && s->gen == gen && !s->done;
}

static int wc_status_map(enum ibv_wc_status st)
{
    switch (st) {
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_REM_INV_REQ_ERR: return RDKV_EACCESS;
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR: return RDKV_EUNAVAILABLE;
    case IBV_WC_WR_FLUSH_ERR: return RDKV_EFLUSHED;
    default: return RDKV_EIO;
    }
}

/* ---------------------------------------------------------------------------------------------
 * The staging ring: allocations are freed in any order and reclaimed oldest first. */

static int stage_alloc(struct vctx *vc, uint32_t need, uint32_t *off_out)
{
    need = (need + STAGE_ALIGN - 1) & ~(STAGE_ALIGN - 1);
    if (need > STAGE_SIZE || vc->rcount == FAB_MAX_INFLIGHT) return -1;
    uint32_t off;
    if (vc->rcount == 0) {
        off = 0;
    } else {
        const struct stage_rec *h = &vc->recs[vc->rhead];
        const struct stage_rec *t = &vc->recs[(vc->rhead + vc->rcount - 1) % FAB_MAX_INFLIGHT];
        uint32_t head = h->off, tail = t->off + t->len;
        if (tail > head) {
            if (STAGE_SIZE - tail >= need) off = tail;
            else if (head >= need) off = 0;
            else return -1;
        } else {
            if (head - tail >= need) off = tail;
            else return -1;
        }
    }
    unsigned idx = (vc->rhead + vc->rcount) % FAB_MAX_INFLIGHT;
    vc->recs[idx] = (struct stage_rec){.off = off, .len = need, .live = true};
    vc->rcount++;
    *off_out = off;
    return (int)idx;
}

static void stage_free(struct vctx *vc, int idx)
{
    vc->recs[idx].live = false;
    while (vc->rcount && !vc->recs[vc->rhead].live) {
        vc->rhead = (vc->rhead + 1) % FAB_MAX_INFLIGHT;
        vc->rcount--;
    }
}

/* Releases a chain's local resources. Only once the hardware is done with them. */
static void vs_release(struct vctx *vc, struct vslot *vs)
{
    if (vs->ring_rec >= 0) stage_free(vc, vs->ring_rec);
    vs->ring_rec = -1;
    if (vs->own_mr) ibv_dereg_mr(vs->own_mr);
    free(vs->own_buf);
    vs->own_mr = NULL;
    vs->own_buf = NULL;
    for (unsigned k = 0; k < vs->numrs; k++) ibv_dereg_mr(vs->umrs[k]);
    free(vs->umrs);
    vs->umrs = NULL;
    vs->numrs = 0;
    vs->sbase = NULL;
    vs->state = VS_IDLE;
}

/* ---------------------------------------------------------------------------------------------
 * Per-thread contexts */

static int verbs_ctx_init(struct fab_ctx *c)
{
    struct verbs_node *vn = c->f->be_node;
    if (!vn) return RDKV_ENOTSUP;
    struct vctx *vc = calloc(1, sizeof *vc);
    if (!vc) return RDKV_ENOMEM;
    for (unsigned i = 0; i < FAB_MAX_INFLIGHT; i++) vc->vs[i].ring_rec = -1;
    vc->connecting = calloc(c->f->nnodes, sizeof *vc->connecting);
    if (!vc->connecting) {
        free(vc);
        return RDKV_ENOMEM;
    }
    vc->ch = ibv_create_comp_channel(vn->ctx);
    if (!vc->ch) goto fail;
    int fl = fcntl(vc->ch->fd, F_GETFL);
    if (fl < 0 || fcntl(vc->ch->fd, F_SETFL, fl | O_NONBLOCK) < 0) goto fail;
    vc->cq = ibv_create_cq(vn->ctx, vn->cq_depth, vc, vc->ch, 0);
    if (!vc->cq) goto fail;
    if (posix_memalign((void **)&vc->stage, 4096, STAGE_SIZE)) {
        vc->stage = NULL;
        goto fail;
    }
    vc->stage_mr = ibv_reg_mr(vn->pd, vc->stage, STAGE_SIZE, IBV_ACCESS_LOCAL_WRITE);
    if (!vc->stage_mr) goto fail;
    c->be_ctx = vc;
    return 0;
fail:
    log_error("verbs: cannot set up a thread's completion queue: %s", strerror(errno));
    if (vc->stage_mr) ibv_dereg_mr(vc->stage_mr);
    free(vc->stage);
    if (vc->cq) ibv_destroy_cq(vc->cq);
    if (vc->ch) ibv_destroy_comp_channel(vc->ch);
    free(vc->connecting);
    free(vc);
    return RDKV_EIO;
}

static void verbs_ctx_fini(struct fab_ctx *c)
{
    struct vctx *vc = c->be_ctx;
    if (!vc) return;
    for (unsigned i = 0; i < c->f->nnodes; i++) {
        struct vqp *q = c->eps[i].be_peer;
        if (q) {
            c->eps[i].be_peer = NULL;
            vqp_destroy(c, q);
        }
    }
    if (vc->poll_armed) {
        struct io_uring_sqe *sqe = uring_sqe(&c->ring);
        io_uring_prep_poll_remove(sqe, ev_tag(vc, EV_POLL));
        io_uring_sqe_set_data64(sqe, EV_IGNORE);
        c->pending_submit = true;
    }
    /* Leftover events must be acknowledged before the CQ goes. */
    void *cq_ctx;
    struct ibv_cq *evq;
    unsigned nev = 0;
    while (nev < 1024 && ibv_get_cq_event(vc->ch, &evq, &cq_ctx) == 0) nev++;
    if (nev) ibv_ack_cq_events(vc->cq, nev);
    ibv_destroy_cq(vc->cq);
    ibv_destroy_comp_channel(vc->ch);
    ibv_dereg_mr(vc->stage_mr);
    free(vc->stage);
    free(vc->connecting);
    free(vc);
    c->be_ctx = NULL;
}

static void verbs_arm(struct fab_ctx *c)
{
    struct vctx *vc = c->be_ctx;
    if (!vc) return;
    ibv_req_notify_cq(vc->cq, 0);
    if (!vc->poll_armed) {
        struct io_uring_sqe *sqe = uring_sqe(&c->ring);
        io_uring_prep_poll_add(sqe, vc->ch->fd, POLLIN);
        io_uring_sqe_set_data64(sqe, ev_tag(vc, EV_POLL));
        vc->poll_armed = true;
        c->pending_submit = true;
    }
}

static void verbs_on_channel(struct fab_ctx *c, int res)
{
    (void)res;
    struct vctx *vc = c->be_ctx;
    if (!vc) return; /* the cancelled poll of a finished context */
    vc->poll_armed = false;
    void *cq_ctx;
    struct ibv_cq *evq;
    unsigned nev = 0;
    /* The channel is non-blocking; each event wakes once, so this ends. */
    while (nev < 4096 && ibv_get_cq_event(vc->ch, &evq, &cq_ctx) == 0) nev++;
    if (nev) ibv_ack_cq_events(vc->cq, nev);
}

/* ---------------------------------------------------------------------------------------------
 * Chains */

static void list_push(struct vctx *vc, uint16_t *head, uint16_t *tail, unsigned si)
{
    vc->vs[si].next = IDX_NONE;
    if (*tail == IDX_NONE) *head = (uint16_t)si;
    else vc->vs[*tail].next = (uint16_t)si;
    *tail = (uint16_t)si;
}

static unsigned list_pop(struct vctx *vc, uint16_t *head, uint16_t *tail)
{
    unsigned si = *head;
    *head = vc->vs[si].next;
    if (*head == IDX_NONE) *tail = IDX_NONE;
    vc->vs[si].next = IDX_NONE;
    return si;
}

static unsigned op_wrs(const struct verbs_node *vn, const struct fab_op *o)
{
    if (op_is_atomic(o)) return 1;
    uint64_t n = (o->len + vn->chunk - 1) / vn->chunk;
    return n > CHAIN_WR_MAX ? CHAIN_WR_MAX + 1 : (unsigned)n;
}

/* Completes a chain that left this queue pair (or never reached it). Ops before fail_op (all
 * posted ops when fail_op < 0) succeeded: their READ data and atomic results are copied out. */
static void chain_finish(struct fab_ctx *c, struct vqp *q, unsigned si, int fail_op, int status)
{
    struct vctx *vc = c->be_ctx;
    struct vslot *vs = &vc->vs[si];
    if (q && vs->state == VS_POSTED) {
        q->sq_used -= vs->nwr;
        vc->wr_inflight -= vs->nwr;
        if (vs->rd) q->rd_chains--;
    }
    if (!slot_is_live(c, si, vs->gen)) {
        vs_release(vc, vs);
        return;
    }
    struct slot *s = &c->slots[si];
    unsigned ok = fail_op >= 0 ? (unsigned)fail_op : vs->nprep;
    if (ok > vs->nprep) ok = vs->nprep;
    for (unsigned i = 0; i < ok; i++) {
        struct fab_op *o = &s->ops[i];
        uint32_t loc = vs->loc[i];
        if (loc == LOC_ARENA || loc == LOC_INLINE || (loc & LOC_UMR)) continue;
        if (o->opcode == FAB_OP_READ) memcpy(o->local, vs->sbase + loc, o->len);
        else if (op_is_atomic(o)) memcpy(&o->result, vs->sbase + loc, 8);
    }
    int first = 0;
    unsigned from = s->n;
    if (fail_op >= 0 && (unsigned)fail_op < s->n) {
        first = status;
        from = (unsigned)fail_op;
    } else if (vs->bad >= 0) {
        first = RDKV_EACCESS;
        from = (unsigned)vs->bad;
    }
    for (unsigned i = from; i < s->n; i++)
        if (s->ops[i].status == 0) s->ops[i].status = i == from ? first : RDKV_EFLUSHED;
    vs_release(vc, vs);
    ctx_complete(c, si, first);
}

/* Decides where each op's local buffer is, stages WRITE data, registers large caller buffers.
 * `now`: the chain is posted at once, so small WRITEs may go inline from the caller's buffer. */
static int chain_stage(struct fab_ctx *c, struct vqp *q, unsigned si, bool now)
{
    struct fabric *f = c->f;
    struct verbs_node *vn = f->be_node;
    struct vctx *vc = c->be_ctx;
    struct slot *s = &c->slots[si];
    struct vslot *vs = &vc->vs[si];
    uint64_t need = 0;
    unsigned nreg = 0;
    for (unsigned i = 0; i < vs->nprep; i++) {
        const struct fab_op *o = &s->ops[i];
        if (o->opcode != FAB_OP_WRITE) vs->rd = true;
        if (op_is_atomic(o)) {
            vs->loc[i] = (uint32_t)need;
            need += 8;
        } else if (arena_contains(f, o->local, o->len)) {
            vs->loc[i] = LOC_ARENA;
        } else if (o->opcode == FAB_OP_WRITE && now && o->len <= q->max_inline) {
            vs->loc[i] = LOC_INLINE;
        } else if (o->opcode == FAB_OP_READ && o->len > STAGE_OP_MAX) {
            vs->loc[i] = LOC_UMR | nreg++;
        } else {
            if (need + o->len >= LOC_UMR) return RDKV_ETOOBIG;
            vs->loc[i] = (uint32_t)need;
            need = (need + o->len + 7) & ~7ull;
        }
    }
    if (need) {
        uint32_t off;
        int rec = need <= STAGE_CHAIN_MAX ? stage_alloc(vc, (uint32_t)need, &off) : -1;
        if (rec >= 0) {
            vs->ring_rec = rec;
            vs->sbase = vc->stage + off;
            vs->slkey = vc->stage_mr->lkey;
        } else {
            size_t sz = (need + 4095) & ~4095ull;
            if (posix_memalign(&vs->own_buf, 4096, sz)) {
                vs->own_buf = NULL;
                return RDKV_ENOMEM;
            }
            vs->own_mr = ibv_reg_mr(vn->pd, vs->own_buf, sz, IBV_ACCESS_LOCAL_WRITE);
            if (!vs->own_mr) {
                log_warn("verbs: cannot register a %zu-byte staging block: %s", sz, strerror(errno));
                return RDKV_EIO;
            }
            vs->sbase = vs->own_buf;
            vs->slkey = vs->own_mr->lkey;
        }
    }
    if (nreg) {
        vs->umrs = calloc(nreg, sizeof *vs->umrs);
        if (!vs->umrs) return RDKV_ENOMEM;
    }
    for (unsigned i = 0; i < vs->nprep; i++) {
        const struct fab_op *o = &s->ops[i];
        uint32_t loc = vs->loc[i];
        if (loc == LOC_ARENA || loc == LOC_INLINE) continue;
        if (loc & LOC_UMR) {
            struct ibv_mr *mr = ibv_reg_mr(vn->pd, o->local, o->len, IBV_ACCESS_LOCAL_WRITE);
            if (!mr) {
                log_warn("verbs: cannot register a %llu-byte buffer: %s",
                         (unsigned long long)o->len, strerror(errno));
                return RDKV_EIO;
            }
            vs->umrs[vs->numrs++] = mr;
        } else if (o->opcode == FAB_OP_WRITE) {
            memcpy(vs->sbase + loc, o->local, o->len); /* the caller may reuse its buffer now */
        }
    }
    return 0;
}

static void vqp_fail(struct fab_ctx *c, struct vqp *q, int fail_si, unsigned fail_op, int status,
                     int rest);

/* Appends the chain's work requests to vc->wr from *wp on (the caller made room: at most
 * CHAIN_WR_MAX in all) and books the chain as posted; wrs_post rings the doorbell for everything
 * appended, so chains built one after the other leave together. */
static void chain_build(struct fab_ctx *c, struct vqp *q, unsigned si, unsigned *wp)
{
    struct verbs_node *vn = c->f->be_node;
    struct vctx *vc = c->be_ctx;
    struct slot *s = &c->slots[si];
    struct vslot *vs = &vc->vs[si];
    bool rd_before = q->rd_chains > 0;
    unsigned w = *wp;
    for (unsigned i = 0; i < vs->nprep; i++) {
        const struct fab_op *o = &s->ops[i];
        bool atomic = op_is_atomic(o);
        uint64_t len = atomic ? 8 : o->len;
        uint64_t remote = q->rbase + rptr_off(o->remote);
        uint32_t loc = vs->loc[i];
        uint64_t laddr;
        uint32_t lkey;
        if (loc == LOC_ARENA) {
            laddr = (uint64_t)(uintptr_t)o->local;
            lkey = vn->mr->lkey;
        } else if (loc == LOC_INLINE) {
            laddr = (uint64_t)(uintptr_t)o->local;
            lkey = 0;
        } else if (loc & LOC_UMR) {
            laddr = (uint64_t)(uintptr_t)o->local;
            lkey = vs->umrs[loc & ~LOC_UMR]->lkey;
        } else {
            laddr = (uint64_t)(uintptr_t)(vs->sbase + loc);
            lkey = vs->slkey;
        }
        for (uint64_t at = 0; at < len; at += vn->chunk) {
            uint64_t piece = len - at < vn->chunk ? len - at : vn->chunk;
            struct ibv_send_wr *wr = &vc->wr[w];
            struct ibv_sge *sg = &vc->sge[w];
            memset(wr, 0, sizeof *wr);
            sg->addr = laddr + at;
            sg->length = (uint32_t)piece;
            sg->lkey = lkey;
            wr->wr_id = wrid_make(si, i, vs->gen);
            wr->sg_list = sg;
            wr->num_sge = 1;
            switch (o->opcode) {
            case FAB_OP_READ: wr->opcode = IBV_WR_RDMA_READ; break;
            case FAB_OP_WRITE:
                wr->opcode = IBV_WR_RDMA_WRITE;
                if (piece <= q->max_inline) wr->send_flags |= IBV_SEND_INLINE;
                break;
            case FAB_OP_CAS: wr->opcode = IBV_WR_ATOMIC_CMP_AND_SWP; break;
            default: wr->opcode = IBV_WR_ATOMIC_FETCH_AND_ADD; break;
            }
            if (atomic) {
                wr->wr.atomic.remote_addr = remote;
                wr->wr.atomic.compare_add = o->arg;
                wr->wr.atomic.swap = o->opcode == FAB_OP_CAS ? o->swap : 0;
                wr->wr.atomic.rkey = q->rkey;
            } else {
                wr->wr.rdma.remote_addr = remote + at;
                wr->wr.rdma.rkey = q->rkey;
            }
            /* In order per endpoint: a WRITE or atomic waits for the READs and atomics before
             * it (see fence_atomics for the one exception). */
            if (at == 0 && rd_before &&
                (o->opcode == FAB_OP_WRITE || (atomic && vn->fence_atomics)))
                wr->send_flags |= IBV_SEND_FENCE;
            wr->next = &vc->wr[w + 1];
            w++;
        }
        if (o->opcode != FAB_OP_WRITE) rd_before = true;
    }
    vc->wr[w - 1].send_flags |= IBV_SEND_SIGNALED;
    if (q->sq_used == 0) q->last_progress = clock_now_ns();
    vs->state = VS_POSTED;
    list_push(vc, &q->post_head, &q->post_tail, si);
    q->sq_used += vs->nwr;
    vc->wr_inflight += vs->nwr;
    if (vs->rd) q->rd_chains++;
    *wp = w;
}

/* Rings q's doorbell once for the w work requests built. Returns false when the post failed and
 * the queue pair is gone (every chain on it completed). */
static bool wrs_post(struct fab_ctx *c, struct vqp *q, unsigned w)
{
    struct vctx *vc = c->be_ctx;
    vc->wr[w - 1].next = NULL;
    struct ibv_send_wr *bad = NULL;
    int err = ibv_post_send(q->qp, vc->wr, &bad);
    c->k.doorbells++;
    if (err) {
        log_warn("verbs: ibv_post_send to node %u: %s", q->node, strerror(err));
        /* Part of the list may be on the wire: nothing on this queue pair is known to be done. */
        vqp_fail(c, q, -1, 0, RDKV_EIO, RDKV_EIO);
        return false;
    }
    return true;
}

static bool vqp_room(const struct vctx *vc, const struct verbs_node *vn, const struct vqp *q,
                     unsigned nwr)
{
    return q->sq_used + nwr < vn->sq_depth && vc->wr_inflight + nwr <= VQ_CTX_WR_BUDGET;
}

/* Completes the chains at the head of the posted list that posted nothing (a misaligned first
 * op): they finish in order, once everything before them has. */
static void vqp_finish_empty(struct fab_ctx *c, struct vqp *q)
{
    struct vctx *vc = c->be_ctx;
    while (q->post_head != IDX_NONE && vc->vs[q->post_head].nwr == 0) {
        unsigned si = list_pop(vc, &q->post_head, &q->post_tail);
        chain_finish(c, q, si, -1, 0);
    }
}

/* Posts backlogged chains while there is room, as few doorbells as the work-request list
 * allows. Returns false when q failed and is gone. */
static bool vqp_drain(struct fab_ctx *c, struct vqp *q)
{
    struct verbs_node *vn = c->f->be_node;
    struct vctx *vc = c->be_ctx;
    unsigned w = 0;
    while (q->back_head != IDX_NONE) {
        unsigned si = q->back_head;
        struct vslot *vs = &vc->vs[si];
        if (vs->nwr && !vqp_room(vc, vn, q, vs->nwr)) break;
        if (w + vs->nwr > CHAIN_WR_MAX) {
            if (!wrs_post(c, q, w)) return false;
            w = 0;
        }
        list_pop(vc, &q->back_head, &q->back_tail);
        vc->backlogged--;
        if (vs->nwr == 0) {
            vs->state = VS_POSTED;
            list_push(vc, &q->post_head, &q->post_tail, si);
            vqp_finish_empty(c, q);
            continue;
        }
        chain_build(c, q, si, &w);
    }
    return w == 0 || wrs_post(c, q, w);
}

static void vctx_drain(struct fab_ctx *c)
{
    struct vctx *vc = c->be_ctx;
    for (unsigned n = 0; n < c->f->nnodes && vc->backlogged; n++) {
        struct vqp *q = c->eps[n].be_peer;
        if (q && q->back_head != IDX_NONE) vqp_drain(c, q);
    }
}

/* Drops a queue pair: destroys it first (the hardware is then done with every buffer), then
 * releases the chains on it without completing them (the caller does). */
static void vqp_destroy(struct fab_ctx *c, struct vqp *q)
{
    struct vctx *vc = c->be_ctx;
    vqp_close(q);
    while (q->post_head != IDX_NONE) {
        unsigned si = list_pop(vc, &q->post_head, &q->post_tail);
        vs_release(vc, &vc->vs[si]);
    }
    while (q->back_head != IDX_NONE) {
        unsigned si = list_pop(vc, &q->back_head, &q->back_tail);
        vc->backlogged--;
        vs_release(vc, &vc->vs[si]);
    }
    vc->wr_inflight -= q->sq_used;
    free(q);
}

/* The queue pair is in its error state: the chain that failed (fail_si) gets `status` on fail_op
 * (ops before it succeeded, as did the chains before it) and every later chain `rest`; with no
 * known failing chain, the oldest gets `status`. Then the queue pair goes: the next post to the
 * node connects a fresh one, and the TCP endpoint stays (an access error is not a dead peer). */
static void vqp_fail(struct fab_ctx *c, struct vqp *q, int fail_si, unsigned fail_op, int status,
                     int rest)
{
    struct vctx *vc = c->be_ctx;
    uint16_t node = q->node;
    if (fail_si >= 0) {
        /* Chains before it finished (RC completes in order): only empty ones can be left. */
        while (q->post_head != IDX_NONE && q->post_head != (unsigned)fail_si) {
            unsigned si = list_pop(vc, &q->post_head, &q->post_tail);
            chain_finish(c, q, si, -1, 0);
        }
        if (q->post_head == (unsigned)fail_si) {
            list_pop(vc, &q->post_head, &q->post_tail);
            chain_finish(c, q, (unsigned)fail_si, (int)fail_op, status);
        }
    }
    vqp_close(q); /* before touching the buffers of the chains still on it */
    c->eps[node].be_peer = NULL;
    int st = fail_si >= 0 ? rest : status;
    while (q->post_head != IDX_NONE) {
        unsigned si = list_pop(vc, &q->post_head, &q->post_tail);
        chain_finish(c, q, si, 0, st);
        st = rest;
    }
    while (q->back_head != IDX_NONE) {
        unsigned si = list_pop(vc, &q->back_head, &q->back_tail);
        vc->backlogged--;
        chain_finish(c, NULL, si, 0, st);
        st = rest;
    }
    vc->wr_inflight -= q->sq_used;
    free(q);
    if (status == RDKV_EUNAVAILABLE) ctx_fail_peer(c, node, RDKV_EUNAVAILABLE); /* the peer is gone */
}

static int chain_misaligned_op(const struct slot *s)
{
    for (unsigned i = 0; i < s->n; i++)
        if (op_is_atomic(&s->ops[i]) && (rptr_off(s->ops[i].remote) & 7)) return (int)i;
    return -1;
}

/* A chain that posts nothing completes here: its misaligned atomic never reaches the device
 * (rxe rejects it at post time), so it fails like a remote access error would. */
static void chain_fail_local(struct fab_ctx *c, unsigned si, int bad)
{
    struct slot *s = &c->slots[si];
    for (unsigned i = (unsigned)bad; i < s->n; i++)
        s->ops[i].status = i == (unsigned)bad ? RDKV_EACCESS : RDKV_EFLUSHED;
    ctx_complete(c, si, RDKV_EACCESS);
}

static int verbs_post(struct fab_ctx *c, unsigned si, bool defer)
{
    struct fabric *f = c->f;
    struct verbs_node *vn = f->be_node;
    struct vctx *vc = c->be_ctx;
    struct slot *s = &c->slots[si];
    uint16_t node = s->node;
    uint32_t gen = s->gen;
    int bad = chain_misaligned_op(s);
    unsigned nprep = bad >= 0 ? (unsigned)bad : s->n;
    if (nprep == 0 && !c->eps[node].be_peer) {
        chain_fail_local(c, si, bad); /* nothing in flight to keep order with */
        return 0;
    }
    unsigned nwr = 0;
    for (unsigned i = 0; i < nprep; i++) nwr += op_wrs(vn, &s->ops[i]);
    if (nwr > CHAIN_WR_MAX || nwr >= vn->sq_depth) return RDKV_ETOOBIG;
    if (!c->eps[node].be_peer) {
        int rc = vqp_connect(c, node); /* may run the context meanwhile */
        if (!slot_is_live(c, si, gen)) return 0; /* a deadline or a dead peer finished it */
        if (rc) return rc;
    }
    struct vqp *q = c->eps[node].be_peer;
    struct vslot *vs = &vc->vs[si];
    vs_release(vc, vs);
    vs->gen = gen;
    vs->node = node;
    vs->bad = (int16_t)bad;
    vs->nprep = (uint16_t)nprep;
    vs->nwr = (uint16_t)nwr;
    vs->rd = false;
    vs->next = IDX_NONE;
    if (nprep == 0) { /* in order behind what is in flight */
        if (q->back_head != IDX_NONE) {
            vs->state = VS_BACKLOG;
            list_push(vc, &q->back_head, &q->back_tail, si);
            vc->backlogged++;
        } else if (q->post_head != IDX_NONE) {
            vs->state = VS_POSTED;
            list_push(vc, &q->post_head, &q->post_tail, si);
        } else {
            chain_fail_local(c, si, bad);
        }
        return 0;
    }
    bool now = !defer && q->back_head == IDX_NONE && vqp_room(vc, vn, q, nwr);
    int rc = chain_stage(c, q, si, now);
    if (rc) {
        vs_release(vc, vs);
        return rc;
    }
    if (now) {
        unsigned w = 0;
        chain_build(c, q, si, &w);
        wrs_post(c, q, w);
        return 0;
    }
    /* the send queue is full (posted as completions free room), or a task posted it (posted
     * with the rest of its scheduler's round: verbs_flush) */
    vs->state = VS_BACKLOG;
    list_push(vc, &q->back_head, &q->back_tail, si);
    vc->backlogged++;
    return 0;
}

static void verbs_flush(struct fab_ctx *c)
{
    if (c->be_ctx) vctx_drain(c);
}

/* ---------------------------------------------------------------------------------------------
 * Completions */

static struct vqp *vqp_by_qpn(struct fab_ctx *c, uint32_t qpn);

/* Rings a stalled queue pair's doorbell again with a zero-length WRITE. Soft-RoCE can lose the
 * wake-up of a fenced request (its requester and completer race on the fence flag) and then
 * sits forever with work queued; a new post makes the requester look again. Harmless on
 * hardware, where it never fires unless the peer stalls anyway. */
static void vqp_kick(struct fab_ctx *c, struct vqp *q, int64_t now)
{
    struct vctx *vc = c->be_ctx;
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = wrid_make(KICK_SLOT, 0, 0);
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = q->rbase;
    wr.wr.rdma.rkey = q->rkey;
    q->last_progress = now;
    if (ibv_post_send(q->qp, &wr, &bad)) return;
    log_debug("verbs: node %u: no completion for %lld ms with %u requests queued; kicked",
              q->node, (long long)(VQ_STALL_NS / NS_PER_MS), q->sq_used);
    q->kick_pending = true;
    q->sq_used++;
    vc->wr_inflight++;
}

static void vctx_watch(struct fab_ctx *c)
{
    struct vctx *vc = c->be_ctx;
    int64_t now = clock_now_ns();
    if (now < vc->next_watch) return;
    vc->next_watch = now + VQ_WATCH_NS;
    for (unsigned n = 0; n < c->f->nnodes; n++) {
        struct vqp *q = c->eps[n].be_peer;
        if (q && q->qp && q->sq_used && !q->kick_pending && now - q->last_progress > VQ_STALL_NS)
            vqp_kick(c, q, now);
    }
}

static struct vqp *vqp_by_qpn(struct fab_ctx *c, uint32_t qpn)
{
    for (unsigned n = 0; n < c->f->nnodes; n++) {
        struct vqp *q = c->eps[n].be_peer;
        if (q && q->qp && q->qp->qp_num == qpn) return q;
    }
    return NULL;
}

static void on_wc(struct fab_ctx *c, const struct ibv_wc *wc)
{
    struct vctx *vc = c->be_ctx;
    unsigned si = wrid_slot(wc->wr_id), op = wrid_op(wc->wr_id);
    uint32_t gen = wrid_gen(wc->wr_id);
    struct vqp *q = NULL;
    bool match = false;
    if (si == KICK_SLOT) {
        q = vqp_by_qpn(c, wc->qp_num);
        if (!q || !q->kick_pending) return;
        q->last_progress = clock_now_ns();
        if (wc->status == IBV_WC_SUCCESS) {
            q->kick_pending = false;
            q->sq_used--;
            vc->wr_inflight--;
        } else {
            vqp_fail(c, q, -1, 0, wc_status_map(wc->status), RDKV_EFLUSHED);
        }
        return;
    }
    if (si < FAB_MAX_INFLIGHT) {
        struct vslot *vs = &vc->vs[si];
        if (vs->state == VS_POSTED && vs->gen == gen && slot_is_live(c, si, gen)) {
            struct vqp *cand = c->eps[vs->node].be_peer;
            if (cand && cand->qp && cand->qp->qp_num == wc->qp_num) {
                q = cand;
                match = op < vs->nprep;
            }
        }
    }
    if (wc->status == IBV_WC_SUCCESS) {
        if (!match) return; /* a queue pair that is gone, or a chain that finished */
        q->last_progress = clock_now_ns();
        while (q->post_head != IDX_NONE) {
            unsigned h = list_pop(vc, &q->post_head, &q->post_tail);
            chain_finish(c, q, h, -1, 0); /* earlier chains are done: RC completes in order */
            if (h == si) break;
        }
        vqp_finish_empty(c, q);
        return;
    }
    if (!q) q = vqp_by_qpn(c, wc->qp_num);
    if (!q) return; /* flushes of a queue pair already dropped */
    int status = wc_status_map(wc->status);
    log_debug("verbs: node %u: %s (op %u)", q->node, ibv_wc_status_str(wc->status), op);
    vqp_fail(c, q, match ? (int)si : -1, op, status, RDKV_EFLUSHED);
}

static int verbs_poll(struct fab_ctx *c)
{
    struct vctx *vc = c->be_ctx;
    if (!vc) return 0;
    struct ibv_wc wc[32];
    int total = 0;
    for (;;) {
        int n = ibv_poll_cq(vc->cq, 32, wc);
        if (n < 0) {
            log_error("verbs: ibv_poll_cq failed");
            break;
        }
        for (int i = 0; i < n; i++) on_wc(c, &wc[i]);
        total += n;
        if (n < 32) break;
    }
    if (vc->backlogged) vctx_drain(c);
    if (total == 0 && vc->wr_inflight) vctx_watch(c);
    return total;
}

static void verbs_peer_down(struct fab_ctx *c, uint16_t node, int status)
{
    (void)status; /* its work requests are failed by the caller */
    struct vqp *q = c->eps[node].be_peer;
    if (!q || !c->be_ctx) return;
    c->eps[node].be_peer = NULL;
    vqp_destroy(c, q);
}

/* ---------------------------------------------------------------------------------------------
 * The backend */

const struct fab_backend fab_verbs_backend = {
    .transport = FAB_VERBS,
    .available = verbs_available,
    .why = "no RDMA device found",
    .node_open = verbs_node_open,
    .node_close = verbs_node_close,
    .ctx_init = verbs_ctx_init,
    .ctx_fini = verbs_ctx_fini,
    .post = verbs_post,
    .flush = verbs_flush,
    .poll = verbs_poll,
    .arm = verbs_arm,
    .on_channel = verbs_on_channel,
    .peer_down = verbs_peer_down,
    .conn_gone = verbs_conn_gone,
    .fence = verbs_fence,
};
