/* The fabric's verbs backend: reliable-connection queue pairs (one per thread per peer) set up
 * through rdma_cm or an out-of-band exchange over the node's TCP channel; a chain leaves as one
 * linked work-request list (one doorbell), only its last request signaled. docs/fabric.md. */
#include "rdma/internal.h"

#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Queue pairs. */
#define VQ_SQ_DEPTH 1024u        /* send queue entries of an active queue pair */
#define VQ_CTX_WR_BUDGET 4096u   /* work requests in flight per context (bounds the CQ) */
#define VQ_CQ_DEPTH 16384        /* a context's CQ; also holds flushes of destroyed QPs */
#define VQ_PASSIVE_CQ_DEPTH 16   /* passive QPs complete nothing */
#define VQ_INLINE_WANT 128u
#define VQ_RD_ATOMIC_MAX 16
#define VQ_TIMEOUT 14            /* 4.096 us * 2^14 = 67 ms per try */
#define VQ_RETRY 7               /* 8 tries: a dead peer fails in about 0.5 s */
#define VQ_RNR_RETRY 7
#define VQ_MIN_RNR_TIMER 12
#define VQ_CHUNK_MAX (1u << 30)  /* longest single work request */
#define CHAIN_WR_MAX 256u        /* work requests one chain may take */
#define VQ_STALL_NS (50 * NS_PER_MS) /* no completion for this long with work queued: kick */
#define VQ_WATCH_NS (10 * NS_PER_MS)
#define KICK_SLOT 0xFFFFu        /* wr_id slot of a kick */

/* Staging: a per-context registered ring for local buffers outside the arena. */
#define STAGE_SIZE (1u << 20)
#define STAGE_ALIGN 64u
#define STAGE_OP_MAX (16u << 10)     /* longer READs into caller memory register it instead */
#define STAGE_CHAIN_MAX (256u << 10) /* longer needs get a block of their own */

#define IDX_NONE 0xFFFFu
#define LOC_ARENA 0xFFFFFFFFu  /* the op's local buffer lies in the arena */
#define LOC_INLINE 0xFFFFFFFEu /* a WRITE sent inline straight from the caller's buffer */
#define LOC_UMR 0x80000000u    /* | k: the caller's buffer, registered as umrs[k] */

#define PASSIVE_CM 0 /* conn_id of queue pairs accepted through rdma_cm (service ids start at 1) */

/* ---------------------------------------------------------------------------------------------
 * State */

/* A queue pair created for a peer that connected to this node. */
struct passive {
    struct passive *next;
    uint64_t conn_id;         /* the service connection that asked (OOB), or PASSIVE_CM */
    struct ibv_qp *qp;        /* OOB */
    struct rdma_cm_id *cm_id; /* rdma_cm */
};

struct verbs_node {
    struct ibv_context *ctx;
    struct ibv_context **cm_devs; /* rdma_get_devices() list when ctx came from it */
    struct ibv_pd *pd;
    struct ibv_mr *mr;            /* the arena; NULL for a client */
    struct ibv_cq *pcq;           /* passive QPs' CQ: nobody polls it */
    uint8_t port;
    bool roce;
    int gid_index;
    union ibv_gid gid;
    uint16_t lid;
    enum ibv_mtu mtu;
    uint32_t sq_depth;
    int cq_depth;
    uint8_t rd_atom;              /* READ/atomic in flight as initiator */
    uint8_t rd_dest;              /* ... as responder */
    uint64_t chunk;               /* longest work request */
    /* Fence atomics, not only WRITEs, behind READs and atomics. Off on Soft-RoCE, which runs
     * every request in order at the responder anyway, and whose fence test (Linux 6.1: wait
     * until every READ/atomic credit is back) stalls a fenced atomic forever once it is
     * retransmitted, because it holds one of those credits itself. */
    bool fence_atomics;
    bool cm_usable;               /* outgoing connections may try rdma_cm */
    _Atomic uint8_t *cm_failed;   /* per peer (auto mode): rdma_cm failed once, use OOB */
    pthread_mutex_t mu;           /* passive */
    struct passive *passive;
    /* rdma_cm listener */
    struct rdma_event_channel *lch;
    struct rdma_cm_id *listen_id;
    int stop_fd;
    pthread_t cm_thr;
    bool cm_thr_running;
};

enum vs_state { VS_IDLE = 0, VS_BACKLOG = 1, VS_POSTED = 2 };

/* Verbs bookkeeping of one chain slot. */
struct vslot {
    uint32_t gen;
    uint16_t next;        /* in its queue pair's posted or backlog list */
    uint16_t node;
    uint8_t state;
    bool rd;              /* posts a READ or an atomic */
    uint16_t nprep;       /* ops that go to the wire: those before a misaligned atomic */
    uint16_t nwr;         /* work requests they take */
    int16_t bad;          /* index of a misaligned atomic, or -1 */
    int32_t ring_rec;     /* staging ring record, or -1 */
    uint8_t *sbase;       /* staging block of this chain */
    uint32_t slkey;
    void *own_buf;        /* a block of its own when the ring had no room */
    struct ibv_mr *own_mr;
    struct ibv_mr **umrs; /* caller buffers registered for this chain */
    unsigned numrs;
    uint32_t loc[FAB_MAX_CHAIN];
};

struct vqp {
    struct ibv_qp *qp;
    struct rdma_cm_id *cm_id;        /* when connected through rdma_cm */
    struct rdma_event_channel *cm_ch;
    uint16_t node;
    uint32_t rkey;
    uint64_t rbase, rsize;
    uint32_t max_inline;
    unsigned sq_used;                /* work requests posted and not known complete */
    unsigned rd_chains;              /* posted chains with a READ or atomic not yet complete */
    int64_t last_progress;           /* last completion, or the post that found it idle */
    bool kick_pending;
    uint16_t post_head, post_tail;   /* posted chains, oldest first */
    uint16_t back_head, back_tail;   /* chains waiting for room, oldest first */
};

struct stage_rec {
    uint32_t off, len;
    bool live;
};

struct vctx {
    struct ibv_comp_channel *ch;
    struct ibv_cq *cq;
    bool poll_armed;
    uint8_t *stage;
    struct ibv_mr *stage_mr;
    struct stage_rec recs[FAB_MAX_INFLIGHT]; /* FIFO of ring allocations */
    unsigned rhead, rcount;
    unsigned wr_inflight;
    unsigned backlogged;
    int64_t next_watch;
    struct ibv_send_wr wr[CHAIN_WR_MAX];
    struct ibv_sge sge[CHAIN_WR_MAX];
    struct vslot vs[FAB_MAX_INFLIGHT];
};

/* ---------------------------------------------------------------------------------------------
 * Little helpers */

static inline void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static inline uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint32_t psn_random(void)
{
    static _Atomic uint64_t seq;
    uint64_t x = (uint64_t)clock_now_ns() ^ ((uint64_t)getpid() << 32) ^
                 atomic_fetch_add(&seq, 0x9E3779B97F4A7C15ull);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)x & 0xFFFFFF;
}

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

static enum ibv_mtu mtu_min(enum ibv_mtu a, enum ibv_mtu b) { return a < b ? a : b; }

/* ---------------------------------------------------------------------------------------------
 * The out-of-band exchange (FAB_RPC_VERBS_CONNECT). Little-endian, fixed sizes.
 *   request:  magic:4 qpn:4 psn:4 lid:2 mtu:1 flags:1 rd_atom:1 pad:3 gid:16            = 36
 *   response: the same fields for the responder, then rkey:4 base:8 size:8              = 56
 * The rdma_cm private data of an accept: magic:4 rkey:4 base:8 size:8                   = 24 */
#define XCH_MAGIC 0x31515652u /* "RVQ1" */
#define XCH_REQ_SIZE 36u
#define XCH_RESP_SIZE 56u
#define XCH_CM_SIZE 24u
#define XCH_FLAG_GRH 1u

struct xch {
    uint32_t qpn, psn;
    uint16_t lid;
    uint8_t mtu, flags, rd_atom;
    union ibv_gid gid;
    uint32_t rkey;
    uint64_t base, size;
};

static void xch_put(uint8_t *p, const struct xch *x, bool resp)
{
    memset(p, 0, resp ? XCH_RESP_SIZE : XCH_REQ_SIZE);
    put32(p, XCH_MAGIC);
    put32(p + 4, x->qpn);
    put32(p + 8, x->psn);
    put16(p + 12, x->lid);
    p[14] = x->mtu;
    p[15] = x->flags;
    p[16] = x->rd_atom;
    memcpy(p + 20, x->gid.raw, 16);
    if (resp) {
        put32(p + 36, x->rkey);
        put64(p + 40, x->base);
        put64(p + 48, x->size);
    }
}

/* Decodes bytes from the network: every field is checked. */
static int xch_get(const uint8_t *p, size_t len, struct xch *x, bool resp)
{
    if (!p || len != (resp ? XCH_RESP_SIZE : XCH_REQ_SIZE) || get32(p) != XCH_MAGIC)
        return RDKV_EPROTO;
    memset(x, 0, sizeof *x);
    x->qpn = get32(p + 4);
    x->psn = get32(p + 8);
    x->lid = get16(p + 12);
    x->mtu = p[14];
    x->flags = p[15];
    x->rd_atom = p[16];
    memcpy(x->gid.raw, p + 20, 16);
    if (x->qpn == 0 || x->qpn > 0xFFFFFF || x->psn > 0xFFFFFF || x->mtu < IBV_MTU_256 ||
        x->mtu > IBV_MTU_4096 || (x->flags & ~XCH_FLAG_GRH) || x->rd_atom == 0)
        return RDKV_EPROTO;
    if (resp) {
        x->rkey = get32(p + 36);
        x->base = get64(p + 40);
        x->size = get64(p + 48);
        if (x->size == 0 || x->base > UINT64_MAX - x->size) return RDKV_EPROTO;
    }
    return 0;
}

static void xch_local(const struct verbs_node *vn, struct xch *x, uint32_t qpn, uint32_t psn,
                      uint8_t rd_atom)
{
    memset(x, 0, sizeof *x);
    x->qpn = qpn;
    x->psn = psn;
    x->lid = vn->lid;
    x->mtu = (uint8_t)vn->mtu;
    x->flags = vn->roce ? XCH_FLAG_GRH : 0;
    x->rd_atom = rd_atom;
    x->gid = vn->gid;
}

/* ---------------------------------------------------------------------------------------------
 * Queue pair set-up */

static struct ibv_qp *qp_create(struct verbs_node *vn, struct ibv_cq *cq, uint32_t send_wr,
                                uint32_t inline_want, uint32_t *inline_got)
{
    struct ibv_qp_init_attr a;
    memset(&a, 0, sizeof a);
    a.send_cq = cq;
    a.recv_cq = cq;
    a.qp_type = IBV_QPT_RC;
    a.sq_sig_all = 0;
    a.cap.max_send_wr = send_wr;
    a.cap.max_recv_wr = 1;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.cap.max_inline_data = inline_want;
    struct ibv_qp *qp = ibv_create_qp(vn->pd, &a);
    if (!qp && inline_want) {
        a.cap.max_inline_data = 0;
        qp = ibv_create_qp(vn->pd, &a);
    }
    if (qp && inline_got) *inline_got = a.cap.max_inline_data;
    return qp;
}

static int qp_to_init(struct verbs_node *vn, struct ibv_qp *qp, bool serve)
{
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = vn->port;
    a.qp_access_flags = serve ? IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
                                    IBV_ACCESS_REMOTE_ATOMIC
                              : 0;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                     IBV_QP_ACCESS_FLAGS);
}

static int qp_to_rtr(struct verbs_node *vn, struct ibv_qp *qp, const struct xch *peer,
                     uint8_t max_dest_rd)
{
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = mtu_min(vn->mtu, (enum ibv_mtu)peer->mtu);
    a.dest_qp_num = peer->qpn;
    a.rq_psn = peer->psn;
    a.max_dest_rd_atomic = max_dest_rd;
    a.min_rnr_timer = VQ_MIN_RNR_TIMER;
    a.ah_attr.port_num = vn->port;
    a.ah_attr.sl = 0;
    a.ah_attr.src_path_bits = 0;
    if (vn->roce || (peer->flags & XCH_FLAG_GRH)) {
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = peer->gid;
        a.ah_attr.grh.sgid_index = (uint8_t)vn->gid_index;
        a.ah_attr.grh.hop_limit = 64;
    }
    if (!vn->roce) a.ah_attr.dlid = peer->lid;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                     IBV_QP_MIN_RNR_TIMER);
}

static int qp_to_rts(struct ibv_qp *qp, uint32_t psn, uint8_t rd_atom)
{
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = VQ_TIMEOUT;
    a.retry_cnt = VQ_RETRY;
    a.rnr_retry = VQ_RNR_RETRY;
    a.sq_psn = psn;
    a.max_rd_atomic = rd_atom;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static void passive_destroy(struct passive *p)
{
    if (p->cm_id) {
        if (p->cm_id->qp) rdma_destroy_qp(p->cm_id);
        rdma_destroy_id(p->cm_id);
    } else if (p->qp) {
        ibv_destroy_qp(p->qp);
    }
    free(p);
}

/* FAB_RPC_VERBS_CONNECT, on an RPC thread: a passive queue pair towards the caller. A new exchange
 * on a connection replaces the queue pair an earlier one made (the caller dropped its end). */
static void vn_on_connect(struct fab_rpc_req *req, void *arg)
{
    struct fabric *f = arg;
    struct verbs_node *vn = f->vn;
    struct xch peer;
    if (!vn || !vn->mr || xch_get(fab_rpc_data(req), fab_rpc_len(req), &peer, false)) {
        fab_rpc_reply(req, RDKV_EPROTO, NULL, 0);
        return;
    }
    if (!!(peer.flags & XCH_FLAG_GRH) != vn->roce) {
        fab_rpc_reply(req, RDKV_ECONFIG, NULL, 0); /* RoCE on one side, InfiniBand on the other */
        return;
    }
    struct passive *p = calloc(1, sizeof *p);
    struct ibv_qp *qp = p ? qp_create(vn, vn->pcq, 1, 0, NULL) : NULL;
    uint32_t psn = psn_random();
    uint8_t dest = vn->rd_dest;
    if (!qp || qp_to_init(vn, qp, true) || qp_to_rtr(vn, qp, &peer, dest) ||
        qp_to_rts(qp, psn, 1)) {
        int st = p ? RDKV_EIO : RDKV_ENOMEM;
        log_warn("verbs: cannot set up a queue pair for node %u: %s", fab_rpc_src(req),
                 strerror(errno));
        if (qp) ibv_destroy_qp(qp);
        free(p);
        fab_rpc_reply(req, st, NULL, 0);
        return;
    }
    p->conn_id = svc_req_conn_id(req);
    p->qp = qp;
    struct passive *old = NULL;
    pthread_mutex_lock(&vn->mu);
    for (struct passive **pp = &vn->passive; *pp;) {
        struct passive *x = *pp;
        if (x->conn_id == p->conn_id && !x->cm_id) {
            *pp = x->next;
            x->next = old;
            old = x;
        } else {
            pp = &x->next;
        }
    }
    p->next = vn->passive;
    vn->passive = p;
    pthread_mutex_unlock(&vn->mu);
    while (old) {
        struct passive *n = old->next;
        passive_destroy(old);
        old = n;
    }
    struct xch me;
    xch_local(vn, &me, qp->qp_num, psn, dest);
    me.rkey = vn->mr->rkey;
    me.base = (uint64_t)(uintptr_t)f->arena;
    me.size = f->arena_size;
    uint8_t out[XCH_RESP_SIZE];
    xch_put(out, &me, true);
    fab_rpc_reply(req, 0, out, sizeof out);
}

void verbs_conn_gone(struct fabric *f, uint64_t conn_id)
{
    struct verbs_node *vn = f->vn;
    if (!vn || conn_id == PASSIVE_CM) return;
    struct passive *gone = NULL;
    pthread_mutex_lock(&vn->mu);
    for (struct passive **pp = &vn->passive; *pp;) {
        struct passive *x = *pp;
        if (x->conn_id == conn_id && !x->cm_id) {
            *pp = x->next;
            x->next = gone;
            gone = x;
        } else {
            pp = &x->next;
        }
    }
    pthread_mutex_unlock(&vn->mu);
    while (gone) {
        struct passive *n = gone->next;
        passive_destroy(gone);
        gone = n;
    }
}

/* ---------------------------------------------------------------------------------------------
 * rdma_cm: the listener (passive side) */

static int cm_addr(const char *host, uint16_t port, struct sockaddr_storage *out)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    char ps[8];
    snprintf(ps, sizeof ps, "%u", port);
    if (getaddrinfo(host, ps, &hints, &res) || !res) return RDKV_ECONFIG;
    memcpy(out, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

/* Answers a connection request. Returns false when the new id must be destroyed (after the
 * event is acknowledged: rdma_destroy_id waits for that). */
static bool cm_on_request(struct verbs_node *vn, struct fabric *f, struct rdma_cm_event *ev)
{
    struct rdma_cm_id *id = ev->id;
    const uint8_t *pd = ev->param.conn.private_data;
    bool ours = pd && ev->param.conn.private_data_len >= 4 && get32(pd) == XCH_MAGIC;
    struct passive *p = ours && id->verbs == vn->ctx ? calloc(1, sizeof *p) : NULL;
    if (!p) {
        rdma_reject(id, NULL, 0);
        return false;
    }
    struct ibv_qp_init_attr a;
    memset(&a, 0, sizeof a);
    a.send_cq = a.recv_cq = vn->pcq;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = 1;
    a.cap.max_recv_wr = 1;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    if (rdma_create_qp(id, vn->pd, &a)) {
        log_warn("verbs: rdma_cm: cannot create a queue pair: %s", strerror(errno));
        free(p);
        rdma_reject(id, NULL, 0);
        return false;
    }
    uint8_t out[XCH_CM_SIZE];
    put32(out, XCH_MAGIC);
    put32(out + 4, vn->mr->rkey);
    put64(out + 8, (uint64_t)(uintptr_t)f->arena);
    put64(out + 16, f->arena_size);
    struct rdma_conn_param cp;
    memset(&cp, 0, sizeof cp);
    uint8_t want = ev->param.conn.initiator_depth;
    cp.responder_resources = want < vn->rd_dest ? want : vn->rd_dest;
    if (!cp.responder_resources) cp.responder_resources = 1;
    cp.initiator_depth = 0;
    cp.rnr_retry_count = VQ_RNR_RETRY;
    cp.private_data = out;
    cp.private_data_len = sizeof out;
    p->conn_id = PASSIVE_CM;
    p->cm_id = id;
    p->qp = id->qp;
    if (rdma_accept(id, &cp)) {
        log_debug("verbs: rdma_accept: %s", strerror(errno));
        rdma_destroy_qp(id);
        free(p);
        return false;
    }
    pthread_mutex_lock(&vn->mu);
    p->next = vn->passive;
    vn->passive = p;
    pthread_mutex_unlock(&vn->mu);
    return true;
}

/* Unlinks the passive entry of a cm id (NULL when there is none). */
static struct passive *cm_unlink(struct verbs_node *vn, struct rdma_cm_id *id)
{
    struct passive *found = NULL;
    pthread_mutex_lock(&vn->mu);
    for (struct passive **pp = &vn->passive; *pp; pp = &(*pp)->next) {
        if ((*pp)->cm_id == id) {
            found = *pp;
            *pp = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&vn->mu);
    return found;
}

static void *cm_main(void *arg)
{
    struct fabric *f = arg;
    struct verbs_node *vn = f->vn;
    struct pollfd pfd[2] = {{.fd = vn->lch->fd, .events = POLLIN},
                            {.fd = vn->stop_fd, .events = POLLIN}};
    for (;;) {
        int r = poll(pfd, 2, -1); /* blocks: no busy loop */
        if (r < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (pfd[1].revents) break;
        if (!(pfd[0].revents & POLLIN)) continue;
        struct rdma_cm_event *ev;
        if (rdma_get_cm_event(vn->lch, &ev)) continue; /* non-blocking: nothing after all */
        struct rdma_cm_id *id = ev->id;
        switch (ev->event) {
        case RDMA_CM_EVENT_CONNECT_REQUEST: {
            bool keep = cm_on_request(vn, f, ev);
            rdma_ack_cm_event(ev);
            if (!keep) rdma_destroy_id(id);
            break;
        }
        case RDMA_CM_EVENT_ESTABLISHED: {
            /* rdma_cm grants atomics only with responder resources; make sure of them. */
            struct ibv_qp_attr a;
            memset(&a, 0, sizeof a);
            a.qp_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
                                IBV_ACCESS_REMOTE_ATOMIC;
            if (id->qp) ibv_modify_qp(id->qp, &a, IBV_QP_ACCESS_FLAGS);
            rdma_ack_cm_event(ev);
            break;
        }
        case RDMA_CM_EVENT_DISCONNECTED:
        case RDMA_CM_EVENT_REJECTED:
        case RDMA_CM_EVENT_UNREACHABLE:
        case RDMA_CM_EVENT_CONNECT_ERROR: {
            bool listener = id == vn->listen_id;
            rdma_ack_cm_event(ev);
            struct passive *p = listener ? NULL : cm_unlink(vn, id);
            if (p) passive_destroy(p);
            break;
        }
        case RDMA_CM_EVENT_DEVICE_REMOVAL:
            log_warn("verbs: rdma_cm reports the device was removed");
            rdma_ack_cm_event(ev);
            break;
        default: rdma_ack_cm_event(ev); break;
        }
    }
    return NULL;
}

static void cm_listener_stop(struct verbs_node *vn)
{
    if (vn->cm_thr_running) {
        uint64_t one = 1;
        ssize_t w = write(vn->stop_fd, &one, sizeof one);
        (void)w;
        pthread_join(vn->cm_thr, NULL);
        vn->cm_thr_running = false;
    }
    /* Accepted queue pairs go before the listener and its channel. */
    struct passive *cm = NULL;
    pthread_mutex_lock(&vn->mu);
    for (struct passive **pp = &vn->passive; *pp;) {
        struct passive *x = *pp;
        if (x->cm_id) {
            *pp = x->next;
            x->next = cm;
            cm = x;
        } else {
            pp = &x->next;
        }
    }
    pthread_mutex_unlock(&vn->mu);
    while (cm) {
        struct passive *n = cm->next;
        passive_destroy(cm);
        cm = n;
    }
    if (vn->listen_id) rdma_destroy_id(vn->listen_id);
    vn->listen_id = NULL;
    if (vn->lch) rdma_destroy_event_channel(vn->lch);
    vn->lch = NULL;
    if (vn->stop_fd >= 0) close(vn->stop_fd);
    vn->stop_fd = -1;
}

static int cm_listener_start(struct fabric *f, char *why, size_t whycap)
{
    struct verbs_node *vn = f->vn;
    const struct cluster_node *me = &f->cc->nodes[f->node];
    struct sockaddr_storage sa;
    if (cm_addr(me->host, me->port, &sa)) {
        snprintf(why, whycap, "cannot resolve %.100s", me->host);
        return RDKV_ECONFIG;
    }
    vn->stop_fd = eventfd(0, EFD_CLOEXEC);
    vn->lch = rdma_create_event_channel();
    if (vn->stop_fd < 0 || !vn->lch) {
        snprintf(why, whycap, "rdma_create_event_channel: %s", strerror(errno));
        goto fail;
    }
    int fl = fcntl(vn->lch->fd, F_GETFL);
    fcntl(vn->lch->fd, F_SETFL, fl | O_NONBLOCK);
    if (rdma_create_id(vn->lch, &vn->listen_id, NULL, RDMA_PS_TCP)) {
        snprintf(why, whycap, "rdma_create_id: %s", strerror(errno));
        goto fail;
    }
    if (rdma_bind_addr(vn->listen_id, (struct sockaddr *)&sa)) {
        snprintf(why, whycap, "rdma_bind_addr %.100s:%u: %s", me->host, me->port,
                 strerror(errno));
        goto fail;
    }
    if (vn->listen_id->verbs && vn->listen_id->verbs != vn->ctx) {
        snprintf(why, whycap, "%.100s is not on RDMA device %s", me->host,
                 ibv_get_device_name(vn->ctx->device));
        goto fail;
    }
    if (rdma_listen(vn->listen_id, 64)) {
        snprintf(why, whycap, "rdma_listen: %s", strerror(errno));
        goto fail;
    }
    if (pthread_create(&vn->cm_thr, NULL, cm_main, f)) {
        snprintf(why, whycap, "cannot start the rdma_cm thread");
        goto fail;
    }
    vn->cm_thr_running = true;
    return 0;
fail:
    cm_listener_stop(vn);
    return RDKV_EIO;
}

/* ---------------------------------------------------------------------------------------------
 * The node */

bool verbs_available(void)
{
    int n = 0;
    struct ibv_device **l = ibv_get_device_list(&n);
    if (!l) return false; /* ENOSYS: no RDMA in this kernel */
    ibv_free_device_list(l);
    return n > 0;
}

static int vn_open_device(struct fabric *f, struct verbs_node *vn, char *err, size_t errcap)
{
    const char *want = f->o.verbs_device;
    if (f->o.verbs_cm != FAB_CM_OOB) {
        /* Queue pairs that rdma_cm creates must live on rdma_cm's own device context. */
        int n = 0;
        struct ibv_context **l = rdma_get_devices(&n);
        for (int i = 0; l && i < n && !vn->ctx; i++)
            if (!want || !strcmp(ibv_get_device_name(l[i]->device), want)) vn->ctx = l[i];
        if (vn->ctx) {
            vn->cm_devs = l;
            vn->cm_usable = true;
            return 0;
        }
        if (l) rdma_free_devices(l);
        if (f->o.verbs_cm == FAB_CM_RDMACM) {
            snprintf(err, errcap, "verbs: rdma_cm lists no device%s%s (is rdma_ucm loaded?)",
                     want ? " named " : "", want ? want : "");
            return RDKV_ENOTSUP;
        }
        log_debug("verbs: rdma_cm has no device; using the out-of-band exchange only");
    }
    int n = 0;
    struct ibv_device **l = ibv_get_device_list(&n);
    if (!l || n == 0) {
        if (l) ibv_free_device_list(l);
        snprintf(err, errcap, "verbs: no RDMA device found");
        return RDKV_ENOTSUP;
    }
    struct ibv_device *dev = NULL;
    for (int i = 0; i < n && !dev; i++)
        if (!want || !strcmp(ibv_get_device_name(l[i]), want)) dev = l[i];
    if (!dev) {
        snprintf(err, errcap, "verbs: no RDMA device named %s", want);
        ibv_free_device_list(l);
        return RDKV_ENOTFOUND;
    }
    vn->ctx = ibv_open_device(dev);
    int e = errno;
    ibv_free_device_list(l);
    if (!vn->ctx) {
        snprintf(err, errcap, "verbs: cannot open %s: %s", want ? want : "the RDMA device",
                 strerror(e));
        return RDKV_EIO;
    }
    return 0;
}

static bool gid_is_v4mapped(const union ibv_gid *g)
{
    static const uint8_t pfx[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return !memcmp(g->raw, pfx, 12);
}

static int vn_choose_gid(struct fabric *f, struct verbs_node *vn, int tbl_len, char *err,
                         size_t errcap)
{
    const char *dn = ibv_get_device_name(vn->ctx->device);
    int idx = f->o.verbs_gid_index;
    if (!vn->roce) idx = idx >= 0 ? idx : 0; /* InfiniBand: the LID routes, GID 0 */
    if (idx < 0) {
        int any_v2 = -1;
        for (int i = 0; i < tbl_len && idx < 0; i++) {
            struct ibv_gid_entry e;
            if (ibv_query_gid_ex(vn->ctx, vn->port, (uint32_t)i, &e, 0)) continue;
            if (e.gid_type != IBV_GID_TYPE_ROCE_V2) continue;
            if (gid_is_v4mapped(&e.gid)) idx = i;
            else if (any_v2 < 0) any_v2 = i;
        }
        if (idx < 0) idx = any_v2;
        if (idx < 0) {
            idx = 0;
            log_info("verbs: %s port %u has no RoCE v2 GID; using GID index 0", dn, vn->port);
        }
    }
    if (idx >= tbl_len || ibv_query_gid(vn->ctx, vn->port, idx, &vn->gid)) {
        snprintf(err, errcap, "verbs: %s port %u has no GID at index %d", dn, vn->port, idx);
        return RDKV_ECONFIG;
    }
    vn->gid_index = idx;
    return 0;
}

static void vn_free(struct verbs_node *vn)
{
    if (vn->mr) ibv_dereg_mr(vn->mr);
    if (vn->pcq) ibv_destroy_cq(vn->pcq);
    if (vn->pd) ibv_dealloc_pd(vn->pd);
    if (vn->cm_devs) rdma_free_devices(vn->cm_devs); /* rdma_cm keeps its contexts open */
    else if (vn->ctx) ibv_close_device(vn->ctx);
    free((void *)vn->cm_failed);
    pthread_mutex_destroy(&vn->mu);
    free(vn);
}

int verbs_node_open(struct fabric *f, char *err, size_t errcap)
{
    struct verbs_node *vn = calloc(1, sizeof *vn);
    if (!vn) return RDKV_ENOMEM;
    pthread_mutex_init(&vn->mu, NULL);
    vn->stop_fd = -1;
    vn->cm_failed = calloc(f->nnodes, sizeof *vn->cm_failed);
    if (!vn->cm_failed) {
        vn_free(vn);
        return RDKV_ENOMEM;
    }
    int rc = vn_open_device(f, vn, err, errcap);
    if (rc) {
        vn_free(vn);
        return rc;
    }
    const char *dn = ibv_get_device_name(vn->ctx->device);
    struct ibv_device_attr da;
    struct ibv_port_attr pa;
    int port = f->o.verbs_port > 0 ? f->o.verbs_port : 1;
    if (ibv_query_device(vn->ctx, &da)) {
        snprintf(err, errcap, "verbs: cannot query %s: %s", dn, strerror(errno));
        vn_free(vn);
        return RDKV_EIO;
    }
    if (port > da.phys_port_cnt || ibv_query_port(vn->ctx, (uint8_t)port, &pa)) {
        snprintf(err, errcap, "verbs: %s has no port %d", dn, port);
        vn_free(vn);
        return RDKV_ECONFIG;
    }
    if (pa.state != IBV_PORT_ACTIVE) {
        snprintf(err, errcap, "verbs: %s port %d is not active (state %s)", dn, port,
                 ibv_port_state_str(pa.state));
        vn_free(vn);
        return RDKV_EUNAVAILABLE;
    }
    if (da.atomic_cap == IBV_ATOMIC_NONE) {
        snprintf(err, errcap, "verbs: %s does not support atomic operations", dn);
        vn_free(vn);
        return RDKV_ENOTSUP;
    }
    vn->port = (uint8_t)port;
    vn->fence_atomics = !(da.vendor_id == 0xFFFFFF || !strncmp(dn, "rxe", 3));
    vn->roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
    vn->lid = pa.lid;
    vn->mtu = pa.active_mtu;
    rc = vn_choose_gid(f, vn, pa.gid_tbl_len, err, errcap);
    if (rc) {
        vn_free(vn);
        return rc;
    }
    vn->sq_depth = da.max_qp_wr > 0 && (uint32_t)da.max_qp_wr < VQ_SQ_DEPTH ? (uint32_t)da.max_qp_wr
                                                                           : VQ_SQ_DEPTH;
    vn->cq_depth = da.max_cqe > 0 && da.max_cqe < VQ_CQ_DEPTH ? da.max_cqe : VQ_CQ_DEPTH;
    int ra = da.max_qp_init_rd_atom, rd = da.max_qp_rd_atom;
    vn->rd_atom = (uint8_t)(ra > 0 ? (ra < VQ_RD_ATOMIC_MAX ? ra : VQ_RD_ATOMIC_MAX) : 1);
    vn->rd_dest = (uint8_t)(rd > 0 ? (rd < VQ_RD_ATOMIC_MAX ? rd : VQ_RD_ATOMIC_MAX) : 1);
    vn->chunk = pa.max_msg_sz && pa.max_msg_sz < VQ_CHUNK_MAX ? pa.max_msg_sz : VQ_CHUNK_MAX;
    vn->pd = ibv_alloc_pd(vn->ctx);
    vn->pcq = vn->pd ? ibv_create_cq(vn->ctx, VQ_PASSIVE_CQ_DEPTH, NULL, NULL, 0) : NULL;
    if (!vn->pd || !vn->pcq) {
        snprintf(err, errcap, "verbs: cannot allocate a protection domain on %s: %s", dn,
                 strerror(errno));
        vn_free(vn);
        return RDKV_EIO;
    }
    if (f->arena) {
        vn->mr = ibv_reg_mr(vn->pd, f->arena, f->arena_size,
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
                                IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
        if (!vn->mr) {
            snprintf(err, errcap, "verbs: cannot register the %llu-byte arena on %s: %s "
                     "(check ulimit -l)", (unsigned long long)f->arena_size, dn, strerror(errno));
            vn_free(vn);
            return RDKV_EIO;
        }
    }
    f->vn = vn;
    if (f->arena) {
        rc = fab_rpc_register(f, FAB_RPC_VERBS_CONNECT, vn_on_connect, f, 0);
        if (rc) {
            snprintf(err, errcap, "verbs: cannot register the connect handler: %s",
                     rdkv_strerror(rc));
            f->vn = NULL;
            vn_free(vn);
            return rc;
        }
    }
    if (f->arena && vn->cm_usable) {
        char why[400];
        rc = cm_listener_start(f, why, sizeof why);
        if (rc && f->o.verbs_cm == FAB_CM_RDMACM) {
            snprintf(err, errcap, "verbs: rdma_cm listener: %s", why);
            f->vn = NULL;
            vn_free(vn);
            return rc;
        }
        if (rc) log_debug("verbs: no rdma_cm listener (%s); peers use the out-of-band exchange", why);
    }
    if (f->o.verbs_cm == FAB_CM_OOB) vn->cm_usable = false;
    log_debug("verbs: %s port %u, %s, GID index %d, MTU %d, rd_atomic %u/%u", dn, vn->port,
              vn->roce ? "RoCE" : "InfiniBand", vn->gid_index, 128 << vn->mtu, vn->rd_atom,
              vn->rd_dest);
    return 0;
}

void verbs_node_close(struct fabric *f)
{
    struct verbs_node *vn = f->vn;
    if (!vn) return;
    cm_listener_stop(vn);
    struct passive *p = vn->passive;
    vn->passive = NULL;
    while (p) {
        struct passive *n = p->next;
        passive_destroy(p);
        p = n;
    }
    f->vn = NULL;
    vn_free(vn);
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

int verbs_ctx_init(struct fab_ctx *c)
{
    struct verbs_node *vn = c->f->vn;
    if (!vn) return RDKV_ENOTSUP;
    struct vctx *vc = calloc(1, sizeof *vc);
    if (!vc) return RDKV_ENOMEM;
    for (unsigned i = 0; i < FAB_MAX_INFLIGHT; i++) vc->vs[i].ring_rec = -1;
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
    c->vctx = vc;
    return 0;
fail:
    log_error("verbs: cannot set up a thread's completion queue: %s", strerror(errno));
    if (vc->stage_mr) ibv_dereg_mr(vc->stage_mr);
    free(vc->stage);
    if (vc->cq) ibv_destroy_cq(vc->cq);
    if (vc->ch) ibv_destroy_comp_channel(vc->ch);
    free(vc);
    return RDKV_EIO;
}

static void vqp_destroy(struct fab_ctx *c, struct vqp *q);

void verbs_ctx_fini(struct fab_ctx *c)
{
    struct vctx *vc = c->vctx;
    if (!vc) return;
    for (unsigned i = 0; i < c->f->nnodes; i++) {
        struct vqp *q = c->eps[i].vqp;
        if (q) {
            c->eps[i].vqp = NULL;
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
    free(vc);
    c->vctx = NULL;
}

void verbs_arm(struct fab_ctx *c)
{
    struct vctx *vc = c->vctx;
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

void verbs_on_channel(struct fab_ctx *c, int res)
{
    (void)res;
    struct vctx *vc = c->vctx;
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
 * Connecting a context's queue pair to a peer */

static struct vqp *vqp_new(uint16_t node)
{
    struct vqp *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->node = node;
    q->post_head = q->post_tail = IDX_NONE;
    q->back_head = q->back_tail = IDX_NONE;
    return q;
}

/* Waits (bounded) for the next event on a connecting id's channel, which must be `want`. On
 * success copies its private data (up to cap bytes) and returns its length. */
static int cm_wait(struct rdma_event_channel *ch, enum rdma_cm_event_type want, int64_t deadline,
                   uint8_t *pdata, size_t cap, size_t *plen)
{
    for (;;) {
        int64_t left = deadline - clock_now_ns();
        if (left <= 0) return RDKV_ETIMEDOUT;
        struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
        int r = poll(&pfd, 1, (int)(left / NS_PER_MS) + 1);
        if (r < 0 && errno != EINTR) return RDKV_EIO;
        if (r <= 0) continue;
        struct rdma_cm_event *ev;
        if (rdma_get_cm_event(ch, &ev)) {
            if (errno == EAGAIN || errno == EINTR) continue;
            return RDKV_EIO;
        }
        int rc = 0;
        if (ev->event != want) {
            log_debug("verbs: rdma_cm: %s (status %d) while waiting for %s",
                      rdma_event_str(ev->event), ev->status, rdma_event_str(want));
            rc = RDKV_EUNAVAILABLE;
        } else if (pdata) {
            size_t n = ev->param.conn.private_data_len;
            if (n > cap) n = cap;
            if (n && ev->param.conn.private_data) memcpy(pdata, ev->param.conn.private_data, n);
            *plen = n;
        }
        rdma_ack_cm_event(ev);
        return rc;
    }
}

static void cm_active_free(struct rdma_cm_id *id, struct rdma_event_channel *ch)
{
    if (id) {
        if (id->qp) rdma_destroy_qp(id);
        rdma_destroy_id(id);
    }
    if (ch) rdma_destroy_event_channel(ch);
}

/* Connects q through rdma_cm. Blocks (bounded by connect_timeout_ns) without touching the
 * context's ring. On failure says why in `why`. */
static int vqp_connect_cm(struct fab_ctx *c, struct vqp *q, char *why, size_t whycap)
{
    struct fabric *f = c->f;
    struct verbs_node *vn = f->vn;
    struct vctx *vc = c->vctx;
    const struct cluster_node *nd = &f->cc->nodes[q->node];
    int64_t deadline = clock_now_ns() + f->o.connect_timeout_ns;
    int tmo_ms = (int)(f->o.connect_timeout_ns / NS_PER_MS);
    if (tmo_ms < 100) tmo_ms = 100;
    struct sockaddr_storage dst;
    if (cm_addr(nd->host, nd->port, &dst)) {
        snprintf(why, whycap, "cannot resolve %.100s", nd->host);
        return RDKV_ECONFIG;
    }
    struct rdma_event_channel *ch = rdma_create_event_channel();
    struct rdma_cm_id *id = NULL;
    if (!ch) {
        snprintf(why, whycap, "rdma_create_event_channel: %s", strerror(errno));
        return RDKV_EIO;
    }
    int fl = fcntl(ch->fd, F_GETFL);
    fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
    int rc = RDKV_EUNAVAILABLE;
    const char *step = "rdma_create_id";
    if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
        id = NULL;
        goto fail;
    }
    uint8_t tmo = VQ_TIMEOUT;
    rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &tmo, sizeof tmo);
    step = "rdma_resolve_addr";
    if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, tmo_ms)) goto fail;
    if ((rc = cm_wait(ch, RDMA_CM_EVENT_ADDR_RESOLVED, deadline, NULL, 0, NULL))) goto fail;
    rc = RDKV_EUNAVAILABLE;
    step = "rdma_resolve_route";
    if (rdma_resolve_route(id, tmo_ms)) goto fail;
    if ((rc = cm_wait(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, NULL, 0, NULL))) goto fail;
    rc = RDKV_EUNAVAILABLE;
    step = "the route's device";
    errno = EXDEV;
    if (id->verbs != vn->ctx) goto fail; /* our PD and MRs live on vn->ctx */
    step = "rdma_create_qp";
    struct ibv_qp_init_attr a;
    memset(&a, 0, sizeof a);
    a.send_cq = a.recv_cq = vc->cq;
    a.qp_type = IBV_QPT_RC;
    a.sq_sig_all = 0;
    a.cap.max_send_wr = vn->sq_depth;
    a.cap.max_recv_wr = 1;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.cap.max_inline_data = VQ_INLINE_WANT;
    if (rdma_create_qp(id, vn->pd, &a)) {
        a.cap.max_inline_data = 0;
        if (rdma_create_qp(id, vn->pd, &a)) {
            rc = RDKV_EIO;
            goto fail;
        }
    }
    step = "rdma_connect";
    uint8_t hello[4];
    put32(hello, XCH_MAGIC);
    struct rdma_conn_param cp;
    memset(&cp, 0, sizeof cp);
    cp.initiator_depth = vn->rd_atom;
    cp.responder_resources = 0;
    cp.retry_count = VQ_RETRY;
    cp.rnr_retry_count = VQ_RNR_RETRY;
    cp.private_data = hello;
    cp.private_data_len = sizeof hello;
    if (rdma_connect(id, &cp)) goto fail;
    uint8_t pd[XCH_CM_SIZE];
    size_t plen = 0;
    if ((rc = cm_wait(ch, RDMA_CM_EVENT_ESTABLISHED, deadline, pd, sizeof pd, &plen))) goto fail;
    step = "the accept's data";
    errno = EPROTO;
    if (plen < XCH_CM_SIZE || get32(pd) != XCH_MAGIC || get64(pd + 16) == 0 ||
        get64(pd + 8) > UINT64_MAX - get64(pd + 16)) {
        log_warn("verbs: node %u accepted with malformed connection data", q->node);
        rdma_disconnect(id);
        errno = EPROTO;
        rc = RDKV_EPROTO;
        goto fail;
    }
    q->rkey = get32(pd + 4);
    q->rbase = get64(pd + 8);
    q->rsize = get64(pd + 16);
    q->qp = id->qp;
    q->cm_id = id;
    q->cm_ch = ch;
    q->max_inline = a.cap.max_inline_data;
    return 0;
fail:
    snprintf(why, whycap, "%.100s:%u: %s: %s", nd->host, nd->port, step, strerror(errno));
    cm_active_free(id, ch);
    return rc;
}

/* Connects q through the out-of-band exchange. Re-enters the context (fab_rpc_call). */
static int vqp_connect_oob(struct fab_ctx *c, struct vqp *q)
{
    struct fabric *f = c->f;
    struct verbs_node *vn = f->vn;
    struct vctx *vc = c->vctx;
    struct peer_ep *ep = &c->eps[q->node];
    struct ibv_qp *qp = qp_create(vn, vc->cq, vn->sq_depth, VQ_INLINE_WANT, &q->max_inline);
    if (!qp) {
        log_warn("verbs: cannot create a queue pair: %s", strerror(errno));
        return RDKV_EIO;
    }
    if (qp_to_init(vn, qp, false)) {
        ibv_destroy_qp(qp);
        return RDKV_EIO;
    }
    uint32_t psn = psn_random();
    struct xch me, peer;
    memset(&peer, 0, sizeof peer);
    xch_local(vn, &me, qp->qp_num, psn, vn->rd_atom);
    uint8_t req[XCH_REQ_SIZE];
    xch_put(req, &me, false);
    struct conn *before = ep->conn;
    struct fab_buf resp = {0};
    int rc = fab_rpc_call(c, q->node, FAB_RPC_VERBS_CONNECT, req, sizeof req, &resp,
                          f->o.connect_timeout_ns);
    if (rc == 0 && (ep->state != EP_UP || ep->conn != before)) rc = RDKV_EUNAVAILABLE;
    if (rc == 0 && xch_get(resp.data, resp.len, &peer, true)) {
        log_warn("verbs: node %u answered the queue-pair exchange with malformed data", q->node);
        rc = RDKV_EPROTO;
    }
    fab_buf_free(&resp);
    if (rc == RDKV_ENOHANDLER)
        log_warn("verbs: node %u does not serve verbs (is it on the soft transport?)", q->node);
    uint8_t rd = peer.rd_atom < vn->rd_atom ? peer.rd_atom : vn->rd_atom;
    if (rc == 0 && (qp_to_rtr(vn, qp, &peer, 1) || qp_to_rts(qp, psn, rd))) {
        log_warn("verbs: cannot connect a queue pair to node %u: %s", q->node, strerror(errno));
        rc = RDKV_EIO;
    }
    if (rc) {
        ibv_destroy_qp(qp);
        return rc;
    }
    q->qp = qp;
    q->rkey = peer.rkey;
    q->rbase = peer.base;
    q->rsize = peer.size;
    return 0;
}

/* Gives node a connected queue pair in c->eps[node].vqp. */
static int vqp_connect(struct fab_ctx *c, uint16_t node)
{
    struct verbs_node *vn = c->f->vn;
    struct vqp *q = vqp_new(node);
    if (!q) return RDKV_ENOMEM;
    int rc = -1;
    bool try_cm = vn->cm_usable && !atomic_load_explicit(&vn->cm_failed[node], memory_order_relaxed);
    if (try_cm) {
        char why[300] = "";
        rc = vqp_connect_cm(c, q, why, sizeof why);
        if (rc && c->f->o.verbs_cm == FAB_CM_RDMACM) {
            log_warn("verbs: rdma_cm cannot connect to node %u (%s)", node, why);
            free(q);
            return rc;
        }
        if (rc) {
            log_debug("verbs: rdma_cm cannot connect to node %u (%s); using the out-of-band "
                      "exchange", node, why);
            atomic_store_explicit(&vn->cm_failed[node], 1, memory_order_relaxed);
        }
    }
    if (rc) rc = vqp_connect_oob(c, q);
    if (rc) {
        free(q);
        return rc;
    }
    if (c->eps[node].vqp) { /* cannot happen: the context is single-threaded */
        vqp_destroy(c, q);
        return 0;
    }
    c->eps[node].vqp = q;
    return 0;
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
    struct vctx *vc = c->vctx;
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
    struct verbs_node *vn = f->vn;
    struct vctx *vc = c->vctx;
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
    struct verbs_node *vn = c->f->vn;
    struct vctx *vc = c->vctx;
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
    struct vctx *vc = c->vctx;
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
    struct vctx *vc = c->vctx;
    while (q->post_head != IDX_NONE && vc->vs[q->post_head].nwr == 0) {
        unsigned si = list_pop(vc, &q->post_head, &q->post_tail);
        chain_finish(c, q, si, -1, 0);
    }
}

/* Posts backlogged chains while there is room, as few doorbells as the work-request list
 * allows. Returns false when q failed and is gone. */
static bool vqp_drain(struct fab_ctx *c, struct vqp *q)
{
    struct verbs_node *vn = c->f->vn;
    struct vctx *vc = c->vctx;
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
    struct vctx *vc = c->vctx;
    for (unsigned n = 0; n < c->f->nnodes && vc->backlogged; n++) {
        struct vqp *q = c->eps[n].vqp;
        if (q && q->back_head != IDX_NONE) vqp_drain(c, q);
    }
}

/* Drops a queue pair: destroys it first (the hardware is then done with every buffer), then
 * releases the chains on it without completing them (the caller does). */
static void vqp_destroy(struct fab_ctx *c, struct vqp *q)
{
    struct vctx *vc = c->vctx;
    if (q->cm_id) {
        rdma_disconnect(q->cm_id);
        cm_active_free(q->cm_id, q->cm_ch);
    } else if (q->qp) {
        ibv_destroy_qp(q->qp);
    }
    q->qp = NULL;
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
    struct vctx *vc = c->vctx;
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
    /* Destroy before touching the buffers of the chains still on it. */
    if (q->cm_id) {
        rdma_disconnect(q->cm_id);
        cm_active_free(q->cm_id, q->cm_ch);
        q->cm_id = NULL;
    } else if (q->qp) {
        ibv_destroy_qp(q->qp);
    }
    q->qp = NULL;
    c->eps[node].vqp = NULL;
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

int verbs_post(struct fab_ctx *c, unsigned si, bool defer)
{
    struct fabric *f = c->f;
    struct verbs_node *vn = f->vn;
    struct vctx *vc = c->vctx;
    struct slot *s = &c->slots[si];
    uint16_t node = s->node;
    uint32_t gen = s->gen;
    int bad = chain_misaligned_op(s);
    unsigned nprep = bad >= 0 ? (unsigned)bad : s->n;
    if (nprep == 0 && !c->eps[node].vqp) {
        chain_fail_local(c, si, bad); /* nothing in flight to keep order with */
        return 0;
    }
    unsigned nwr = 0;
    for (unsigned i = 0; i < nprep; i++) nwr += op_wrs(vn, &s->ops[i]);
    if (nwr > CHAIN_WR_MAX || nwr >= vn->sq_depth) return RDKV_ETOOBIG;
    if (!c->eps[node].vqp) {
        int rc = vqp_connect(c, node); /* may run the context meanwhile */
        if (!slot_is_live(c, si, gen)) return 0; /* a deadline or a dead peer finished it */
        if (rc) return rc;
    }
    struct vqp *q = c->eps[node].vqp;
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

void verbs_flush(struct fab_ctx *c) { vctx_drain(c); }

/* ---------------------------------------------------------------------------------------------
 * Completions */

static struct vqp *vqp_by_qpn(struct fab_ctx *c, uint32_t qpn);

/* Rings a stalled queue pair's doorbell again with a zero-length WRITE. Soft-RoCE can lose the
 * wake-up of a fenced request (its requester and completer race on the fence flag) and then
 * sits forever with work queued; a new post makes the requester look again. Harmless on
 * hardware, where it never fires unless the peer stalls anyway. */
static void vqp_kick(struct fab_ctx *c, struct vqp *q, int64_t now)
{
    struct vctx *vc = c->vctx;
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
    struct vctx *vc = c->vctx;
    int64_t now = clock_now_ns();
    if (now < vc->next_watch) return;
    vc->next_watch = now + VQ_WATCH_NS;
    for (unsigned n = 0; n < c->f->nnodes; n++) {
        struct vqp *q = c->eps[n].vqp;
        if (q && q->qp && q->sq_used && !q->kick_pending && now - q->last_progress > VQ_STALL_NS)
            vqp_kick(c, q, now);
    }
}

static struct vqp *vqp_by_qpn(struct fab_ctx *c, uint32_t qpn)
{
    for (unsigned n = 0; n < c->f->nnodes; n++) {
        struct vqp *q = c->eps[n].vqp;
        if (q && q->qp && q->qp->qp_num == qpn) return q;
    }
    return NULL;
}

static void on_wc(struct fab_ctx *c, const struct ibv_wc *wc)
{
    struct vctx *vc = c->vctx;
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
            struct vqp *cand = c->eps[vs->node].vqp;
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

int verbs_poll(struct fab_ctx *c)
{
    struct vctx *vc = c->vctx;
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

void verbs_peer_down(struct fab_ctx *c, uint16_t node)
{
    struct vqp *q = c->eps[node].vqp;
    if (!q || !c->vctx) return;
    c->eps[node].vqp = NULL;
    vqp_destroy(c, q);
}
