/* The verbs backend's control path: opening the device and choosing its GID, the rdma_cm
 * listener and active connect, the out-of-band queue-pair exchange over RPC, queue-pair creation
 * and state transitions, and the passive queue pairs owned by service connections. */
#include "verbs_internal.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/pack.h"
#include "common/task.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Queue pairs. */
#define VQ_SQ_DEPTH 1024u        /* send queue entries of an active queue pair */
#define VQ_CQ_DEPTH 16384        /* a context's CQ; also holds flushes of destroyed QPs */
#define VQ_PASSIVE_CQ_DEPTH 16   /* passive QPs complete nothing */
#define VQ_INLINE_WANT 128u
#define VQ_RD_ATOMIC_MAX 16
#define VQ_TIMEOUT 14            /* 4.096 us * 2^14 = 67 ms per try */
#define VQ_RETRY 7               /* 8 tries: a dead peer fails in about 0.5 s */
#define VQ_RNR_RETRY 7
#define VQ_MIN_RNR_TIMER 12
#define VQ_CHUNK_MAX (1u << 30)  /* longest single work request */

#define PASSIVE_CM 0 /* conn_id of queue pairs accepted through rdma_cm (service ids start at 1) */

/* ---------------------------------------------------------------------------------------------
 * State */

/* A queue pair created for a peer that connected to this node. */
struct passive {
    struct passive *next;
    uint64_t conn_id;         /* the service connection that asked (OOB), or PASSIVE_CM */
    struct ibv_qp *qp;        /* OOB */
    struct rdma_cm_id *cm_id; /* rdma_cm */
    uint16_t node;            /* the process it serves (FAB_NODE_CLIENT: unknown, an
                                 --insecure node's rdma_cm connect), for fab_fence */
    uint64_t inc;
};

/* ---------------------------------------------------------------------------------------------
 * Little helpers (byte order: common/pack.h) */

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

static enum ibv_mtu mtu_min(enum ibv_mtu a, enum ibv_mtu b) { return a < b ? a : b; }

/* ---------------------------------------------------------------------------------------------
 * The out-of-band exchange (FAB_RPC_VERBS_CONNECT). Little-endian, fixed sizes.
 *   request:  magic:4 qpn:4 psn:4 lid:2 mtu:1 flags:1 rd_atom:1 pad:3 gid:16            = 36
 *   response: the same fields for the responder, then rkey:4 base:8 size:8              = 56
 * The rdma_cm private data of an accept: magic:4 rkey:4 base:8 size:8                   = 24
 * The rdma_cm private data of a connect: magic:4 ticket:32 (FAB_RPC_VERBS_TICKET)      = 36
 * An --insecure node takes a connect without a ticket. */
#define XCH_MAGIC 0x31515652u /* "RVQ1" */
#define XCH_REQ_SIZE 36u
#define XCH_RESP_SIZE 56u
#define XCH_CM_SIZE 24u
#define XCH_CM_REQ_SIZE (4u + WIRE_NONCE_SIZE)
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
    pack_put_u32le(p, XCH_MAGIC);
    pack_put_u32le(p + 4, x->qpn);
    pack_put_u32le(p + 8, x->psn);
    pack_put_u16le(p + 12, x->lid);
    p[14] = x->mtu;
    p[15] = x->flags;
    p[16] = x->rd_atom;
    memcpy(p + 20, x->gid.raw, 16);
    if (resp) {
        pack_put_u32le(p + 36, x->rkey);
        pack_put_u64le(p + 40, x->base);
        pack_put_u64le(p + 48, x->size);
    }
}

/* Decodes bytes from the network: every field is checked. */
static int xch_get(const uint8_t *p, size_t len, struct xch *x, bool resp)
{
    if (!p || len != (resp ? XCH_RESP_SIZE : XCH_REQ_SIZE) || pack_get_u32le(p) != XCH_MAGIC)
        return RDKV_EPROTO;
    memset(x, 0, sizeof *x);
    x->qpn = pack_get_u32le(p + 4);
    x->psn = pack_get_u32le(p + 8);
    x->lid = pack_get_u16le(p + 12);
    x->mtu = p[14];
    x->flags = p[15];
    x->rd_atom = p[16];
    memcpy(x->gid.raw, p + 20, 16);
    if (x->qpn == 0 || x->qpn > 0xFFFFFF || x->psn > 0xFFFFFF || x->mtu < IBV_MTU_256 ||
        x->mtu > IBV_MTU_4096 || (x->flags & ~XCH_FLAG_GRH) || x->rd_atom == 0)
        return RDKV_EPROTO;
    if (resp) {
        x->rkey = pack_get_u32le(p + 36);
        x->base = pack_get_u64le(p + 40);
        x->size = pack_get_u64le(p + 48);
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
    struct verbs_node *vn = f->be_node;
    struct xch peer;
    if (fab_rpc_from_client(req)) { /* the dispatcher refuses it already: the rkey is no client's */
        fab_rpc_reply(req, RDKV_EPERM, NULL, 0);
        return;
    }
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
    p->conn_id = fab_rpc_conn(req);
    p->qp = qp;
    p->node = fab_rpc_src(req);
    p->inc = fab_rpc_src_incarnation(req);
    uint32_t qpn = qp->qp_num; /* (p may be reaped once it is linked and vn->mu let go) */
    struct passive *old = NULL;
    pthread_mutex_lock(&vn->mu);
    /* fenced meanwhile: not linked (fab_fence stores its bound before its reap takes vn->mu, so
     * either this sees the bound or the reap sees p) */
    if (fab_fenced(f, p->node, p->inc)) {
        pthread_mutex_unlock(&vn->mu);
        passive_destroy(p);
        fab_rpc_reply(req, RDKV_EPERM, NULL, 0);
        return;
    }
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
    xch_local(vn, &me, qpn, psn, dest);
    me.rkey = vn->mr->rkey;
    me.base = (uint64_t)(uintptr_t)f->arena;
    me.size = f->arena_size;
    uint8_t out[XCH_RESP_SIZE];
    xch_put(out, &me, true);
    fab_rpc_reply(req, 0, out, sizeof out);
}

/* FAB_RPC_VERBS_TICKET, on an RPC thread: a fresh one-time ticket for one rdma_cm connect. Only
 * authenticated node connections reach it (it is not FAB_RPC_CLIENT), so only they can connect a
 * queue pair through rdma_cm and learn the arena's rkey from its accept. */
static void vn_on_ticket(struct fab_rpc_req *req, void *arg)
{
    struct fabric *f = arg;
    struct verbs_node *vn = f->be_node;
    if (fab_rpc_from_client(req) || !vn) {
        fab_rpc_reply(req, RDKV_EPERM, NULL, 0);
        return;
    }
    uint8_t t[WIRE_NONCE_SIZE];
    auth_nonce(t);
    pthread_mutex_lock(&vn->mu);
    struct cm_ticket *k = &vn->tickets[vn->ticket_next++ % VN_TICKETS];
    memcpy(k->t, t, sizeof t);
    k->node = fab_rpc_src(req);
    k->inc = fab_rpc_src_incarnation(req);
    k->expires = clock_now_ns() + VN_TICKET_NS;
    pthread_mutex_unlock(&vn->mu);
    fab_rpc_reply(req, 0, t, sizeof t);
}

/* Whether a connect request's private data carries a live ticket; uses it up, and says whose it
 * was in *node and *inc. */
static bool ticket_take(struct verbs_node *vn, const uint8_t *pd, size_t len, uint16_t *node,
                        uint64_t *inc)
{
    if (len < XCH_CM_REQ_SIZE) return false;
    bool ok = false;
    int64_t now = clock_now_ns();
    pthread_mutex_lock(&vn->mu);
    for (unsigned i = 0; i < VN_TICKETS; i++) {
        struct cm_ticket *k = &vn->tickets[i];
        if (k->expires > now && auth_mac_equal(k->t, pd + 4)) {
            k->expires = 0;
            *node = k->node;
            *inc = k->inc;
            ok = true;
        }
    }
    pthread_mutex_unlock(&vn->mu);
    return ok;
}

/* Destroys the passive queue pairs of one service connection (conn_id), or with PASSIVE_CM those
 * accepted through rdma_cm: unlinked under vn->mu, destroyed after it. */
static void passive_reap(struct verbs_node *vn, uint64_t conn_id)
{
    struct passive *gone = NULL;
    pthread_mutex_lock(&vn->mu);
    for (struct passive **pp = &vn->passive; *pp;) {
        struct passive *x = *pp;
        if (conn_id == PASSIVE_CM ? x->cm_id != NULL : x->conn_id == conn_id && !x->cm_id) {
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

void verbs_fence(struct fabric *f, uint16_t node)
{
    struct verbs_node *vn = f->be_node;
    if (!vn) return;
    struct passive *gone = NULL;
    pthread_mutex_lock(&vn->mu);
    for (struct passive **pp = &vn->passive; *pp;) {
        struct passive *x = *pp;
        if (x->node == node && fab_fenced(f, x->node, x->inc)) {
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

void verbs_conn_gone(struct fabric *f, uint64_t conn_id)
{
    struct verbs_node *vn = f->be_node;
    if (!vn || conn_id == PASSIVE_CM) return;
    passive_reap(vn, conn_id);
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
    bool ours = pd && ev->param.conn.private_data_len >= 4 && pack_get_u32le(pd) == XCH_MAGIC;
    /* Authentication: the accept hands out the rkey, so only a ticket holder gets one. */
    uint16_t node = FAB_NODE_CLIENT;
    uint64_t inc = 0;
    if (ours && !f->o.insecure &&
        !ticket_take(vn, pd, ev->param.conn.private_data_len, &node, &inc)) {
        log_warn("verbs: refused an rdma_cm connect request without a valid ticket");
        ours = false;
    }
    if (ours && fab_fenced(f, node, inc)) {
        log_warn("verbs: refused an rdma_cm connect request of node %u's fenced process", node);
        ours = false;
    }
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
    pack_put_u32le(out, XCH_MAGIC);
    pack_put_u32le(out + 4, vn->mr->rkey);
    pack_put_u64le(out + 8, (uint64_t)(uintptr_t)f->arena);
    pack_put_u64le(out + 16, f->arena_size);
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
    p->node = node;
    p->inc = inc;
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
    struct verbs_node *vn = f->be_node;
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
    passive_reap(vn, PASSIVE_CM);
    if (vn->listen_id) rdma_destroy_id(vn->listen_id);
    vn->listen_id = NULL;
    if (vn->lch) rdma_destroy_event_channel(vn->lch);
    vn->lch = NULL;
    if (vn->stop_fd >= 0) close(vn->stop_fd);
    vn->stop_fd = -1;
}

static int cm_listener_start(struct fabric *f, char *why, size_t whycap)
{
    struct verbs_node *vn = f->be_node;
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
    f->be_node = vn;
    if (f->arena) {
        rc = fab_rpc_register(f, FAB_RPC_VERBS_CONNECT, vn_on_connect, f, 0);
        if (!rc) rc = fab_rpc_register(f, FAB_RPC_VERBS_TICKET, vn_on_ticket, f, 0);
        if (rc) {
            snprintf(err, errcap, "verbs: cannot register the connect handler: %s",
                     rdkv_strerror(rc));
            f->be_node = NULL;
            vn_free(vn);
            return rc;
        }
    }
    if (f->arena && vn->cm_usable) {
        char why[400];
        rc = cm_listener_start(f, why, sizeof why);
        if (rc && f->o.verbs_cm == FAB_CM_RDMACM) {
            snprintf(err, errcap, "verbs: rdma_cm listener: %s", why);
            f->be_node = NULL;
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
    struct verbs_node *vn = f->be_node;
    if (!vn) return;
    cm_listener_stop(vn);
    struct passive *p = vn->passive;
    vn->passive = NULL;
    while (p) {
        struct passive *n = p->next;
        passive_destroy(p);
        p = n;
    }
    f->be_node = NULL;
    vn_free(vn);
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

/* Destroys an active rdma_cm id (and its queue pair) and its event channel. */
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
static int vqp_connect_cm(struct fab_ctx *c, struct vqp *q, const uint8_t *ticket, char *why,
                          size_t whycap)
{
    struct fabric *f = c->f;
    struct verbs_node *vn = f->be_node;
    struct vctx *vc = c->be_ctx;
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
    uint8_t hello[XCH_CM_REQ_SIZE];
    pack_put_u32le(hello, XCH_MAGIC);
    memcpy(hello + 4, ticket, WIRE_NONCE_SIZE);
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
    if (plen < XCH_CM_SIZE || pack_get_u32le(pd) != XCH_MAGIC || pack_get_u64le(pd + 16) == 0 ||
        pack_get_u64le(pd + 8) > UINT64_MAX - pack_get_u64le(pd + 16)) {
        log_warn("verbs: node %u accepted with malformed connection data", q->node);
        rdma_disconnect(id);
        errno = EPROTO;
        rc = RDKV_EPROTO;
        goto fail;
    }
    q->rkey = pack_get_u32le(pd + 4);
    q->rbase = pack_get_u64le(pd + 8);
    q->rsize = pack_get_u64le(pd + 16);
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
    struct verbs_node *vn = f->be_node;
    struct vctx *vc = c->be_ctx;
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

void vqp_close(struct vqp *q)
{
    if (q->cm_id) {
        rdma_disconnect(q->cm_id);
        cm_active_free(q->cm_id, q->cm_ch);
        q->cm_id = NULL;
        q->cm_ch = NULL;
    } else if (q->qp) {
        ibv_destroy_qp(q->qp);
    }
    q->qp = NULL;
}

/* Gives node a connected queue pair in c->eps[node].be_peer. */
static int vqp_connect_one(struct fab_ctx *c, uint16_t node);

/* Tasks sharing the context: while one of them connects a peer (its exchange waits, so the
 * others run), the others wait for that connect instead of starting their own -- a second
 * exchange would replace the first's passive queue pair on the target, leaving the installed
 * one without a responder. (A plain thread never finds a connect in progress.) */
int vqp_connect(struct fab_ctx *c, uint16_t node)
{
    struct vctx *vc = c->be_ctx;
    if (vc->connecting[node]) {
        while (vc->connecting[node]) task_sleep_ns(50 * NS_PER_US);
        return c->eps[node].be_peer ? 0 : RDKV_EUNAVAILABLE;
    }
    vc->connecting[node] = true;
    int rc = vqp_connect_one(c, node);
    vc->connecting[node] = false;
    return rc;
}

static int vqp_connect_one(struct fab_ctx *c, uint16_t node)
{
    struct verbs_node *vn = c->f->be_node;
    struct vqp *q = vqp_new(node);
    if (!q) return RDKV_ENOMEM;
    int rc = -1;
    bool try_cm = vn->cm_usable && !atomic_load_explicit(&vn->cm_failed[node], memory_order_relaxed);
    if (try_cm) {
        char why[300] = "";
        /* A ticket first, over the authenticated TCP connection (re-enters the context). */
        uint8_t ticket[WIRE_NONCE_SIZE] = {0};
        struct fab_buf tb = {0};
        rc = c->f->o.insecure ? 0
                              : fab_rpc_call(c, node, FAB_RPC_VERBS_TICKET, NULL, 0, &tb,
                                             c->f->o.connect_timeout_ns);
        if (!rc && !c->f->o.insecure && tb.len != sizeof ticket) rc = RDKV_EPROTO;
        if (!rc && tb.len == sizeof ticket) memcpy(ticket, tb.data, sizeof ticket);
        fab_buf_free(&tb);
        if (rc) snprintf(why, sizeof why, "no rdma_cm ticket: %s", rdkv_strerror(rc));
        else rc = vqp_connect_cm(c, q, ticket, why, sizeof why);
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
    if (c->eps[node].be_peer) { /* cannot happen: one connect per peer at a time */
        vqp_close(q); /* fresh: no chain on it */
        free(q);
        return 0;
    }
    c->eps[node].be_peer = q;
    return 0;
}
