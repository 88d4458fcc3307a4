/* The verbs backend's private header: the node, per-context, queue-pair and chain state that
 * control.c (device, rdma_cm, queue-pair set-up and teardown) and data.c (posting, completions,
 * the backend's table) share, and data.c's calls down into control.c (never the reverse). Only
 * rdma/verbs includes it; the core sees fab_verbs_backend. */
#ifndef RDKV_RDMA_VERBS_INTERNAL_H
#define RDKV_RDMA_VERBS_INTERNAL_H

#include "rdma/core.h"

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define CHAIN_WR_MAX 256u        /* work requests one chain may take */
#define IDX_NONE 0xFFFFu         /* the end of a queue pair's list of chain slots */

/* ---------------------------------------------------------------------------------------------
 * State */

#define VN_TICKETS 64
#define VN_TICKET_NS (10 * NS_PER_S)

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
    pthread_mutex_t mu;           /* passive, tickets */
    struct passive *passive;
    /* One-time tickets for rdma_cm connects (FAB_RPC_VERBS_TICKET): handed out over an
     * authenticated node connection, each admits one connect request within its lifetime. */
    struct cm_ticket {
        uint8_t t[WIRE_NONCE_SIZE];
        int64_t expires; /* 0: free or used */
        uint16_t node;   /* who asked for it (fab_fence reaps its queue pair) */
        uint64_t inc;
    } tickets[VN_TICKETS];
    unsigned ticket_next;
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
    bool *connecting;     /* per node: a task of this context is connecting it (vqp_connect) */
};

/* ---------------------------------------------------------------------------------------------
 * control.c's calls, which data.c makes */

/* control.c: gives node a connected queue pair in c->eps[node].be_peer (through rdma_cm, or the
 * out-of-band exchange, which re-enters the context). */
int vqp_connect(struct fab_ctx *c, uint16_t node);
/* control.c: destroys q's queue pair (through rdma_cm when it came from there); q and the chains
 * on it stay for the caller. */
void vqp_close(struct vqp *q);
/* True when libibverbs lists at least one device. */
bool verbs_available(void);

/* control.c: the node hooks of fab_verbs_backend (data.c holds the table). Every function returns
 * 0 or RDKV_E*. */
int verbs_node_open(struct fabric *f, char *err, size_t errcap);
void verbs_node_close(struct fabric *f);
/* The service closed connection conn_id: drop the passive queue pairs created for it. Called on
 * the service thread. */
void verbs_conn_gone(struct fabric *f, uint64_t conn_id);
/* fab_fence's hook: destroys the passive queue pairs of node's fenced processes. */
void verbs_fence(struct fabric *f, uint16_t node);

#endif
