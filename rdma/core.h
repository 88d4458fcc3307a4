/* The fabric's core as its backends see it: the node (struct fabric), the per-thread context
 * (struct fab_ctx) with its endpoints and slots, the calls a backend makes into the core, and the
 * backend interface (struct fab_backend). Backends (rdma/soft, rdma/verbs) include this header
 * and call down into the core; the core reaches a backend only through its table, and never by
 * name. Not for use outside rdma/. */
#ifndef RDKV_RDMA_CORE_H
#define RDKV_RDMA_CORE_H

#include "auth.h"
#include "conn.h"
#include "fabric.h"
#include "wire.h"

#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>

/* ---------------------------------------------------------------------------------------------
 * The node. */
struct rpc_entry {
    _Atomic(fab_rpc_handler) fn;
    void *arg;
    unsigned flags;
};

struct svc;
struct peer_addrs;
struct fab_backend;

struct fabric {
    struct fab_opts o;
    const struct cluster_config *cc;
    uint16_t node;
    unsigned nnodes;
    enum fab_transport transport;
    uint8_t *arena;
    uint64_t arena_size;
    pthread_mutex_t region_lock;
    struct rpc_entry rpc[FAB_RPC_MAX_TYPES];
    _Atomic(fab_atomic_hook) hook_fn; /* soft NIC test hook; set while no atomic is running */
    _Atomic(fab_conn_gone_fn) conn_gone_fn; /* fab_on_conn_gone */
    void *_Atomic conn_gone_arg;
    void *_Atomic hook_arg;
    _Atomic(fab_rpc_hook) rpc_hook_fn; /* test hook around non-inline RPC handlers */
    void *_Atomic rpc_hook_arg;
    const struct fab_backend *be; /* the transport's backend, chosen once by fab_open */
    void *be_node;                /* the backend's own state for the node (its node_open's) */
    struct svc *svc;
    int64_t start_ns;
    uint64_t incarnation;         /* this process's (fab_incarnation) */
    _Atomic uint64_t *fence_upto; /* fab_fence: per node, the highest incarnation fenced (0) */
    /* authentication */
    struct auth_keys keys;        /* what the secret file held (none: insecure, or a client
                                     without a credential) */
    uint8_t role;                 /* the role this fabric proves when it connects */
    struct peer_addrs *addrs;     /* nodes: each node's configured addresses (fab_peer_addr_ok) */
};

/* ---------------------------------------------------------------------------------------------
 * The per-thread context. */
enum ep_state { EP_DOWN = 0, EP_UP = 1 };

/* An endpoint: the TCP connection to one peer (both transports' RPCs, the soft transport's
 * one-sided frames), its failure state, and be_peer, the backend's own state for the peer (the
 * verbs queue pair), which only the backend reads or writes. */
struct peer_ep {
    enum ep_state state;
    struct conn *conn;
    uint64_t arena_size;
    uint64_t inc;          /* the peer's incarnation, from the connection's HELLO_ACK */
    int64_t retry_after;   /* after a failure, new posts fail at once until then */
    unsigned fail_streak;
    unsigned rpcs;         /* RPCs in flight to this peer */
    unsigned chains;       /* chains in flight to this peer */
    void *be_peer;         /* the backend's, or NULL; while set, shutting the context down fails
                              the peer (peer_down) as an open connection does */
};

enum slot_kind { SLOT_FREE = 0, SLOT_CHAIN = 1, SLOT_RPC = 2 };

struct slot {
    uint8_t kind;
    bool sync;          /* fab_exec/fab_rpc_call waits for it; not queued as a completion */
    bool discard;       /* fab_rpc_send: nobody waits; freed, not queued, when it completes */
    bool done;
    uint16_t node;
    uint32_t gen;
    int status;
    uint64_t tag;
    int64_t deadline;
    struct fab_op *ops;
    unsigned n;
    unsigned pending;   /* pieces (soft) or work requests (verbs) still outstanding */
    struct fab_buf *resp;
    uint16_t next_free;
    struct task *waiter; /* a sync slot's waiting task (woken at completion), or NULL */
    struct fab_owner *owner; /* who posted it: a task, or the context's own thread */
};

/* Who posted a slot: a task of the attached scheduler (its record lives under a task key) or
 * the context's thread (fab_ctx.self). fab_poll and fab_wait return only the caller's own
 * completions, so tasks sharing a context never take each other's. */
struct fab_owner {
    struct fab_ctx *c;       /* the context it last posted on */
    struct fab_counters *k;  /* its own counters (fab_task_counters), or NULL */
    unsigned inflight;       /* fab_post/fab_rpc_post slots not yet returned by poll/wait */
    unsigned queued;         /* of those, completed and in the completion queue */
    uint64_t *pin;           /* fab_pin: the incarnation each node's posts must reach, or NULL */
};

/* A task waiting for some progress of its context (ctx.c, wait_until). */
struct ctx_waiter {
    struct task *t;
    struct ctx_waiter *next;
};

struct cconn;

struct fab_ctx {
    struct fabric *f;
    struct io_uring ring;
    struct bufring br;
    struct peer_ep *eps;
    struct slot slots[FAB_MAX_INFLIGHT];
    uint16_t free_head;
    unsigned inflight;     /* slots in use */
    unsigned discards;     /* fab_rpc_send messages not answered yet */
    uint16_t cq[FAB_MAX_INFLIGHT];
    unsigned cq_head, cq_count;
    int64_t next_check;    /* next deadline scan */
    bool pending_submit;   /* SQEs prepared and not yet submitted */
    bool send_waits;       /* a blocking RPC's send is among them: the wait that submits it
                            * waits for two completions (the send's and the answer's) */
    struct cconn *conns;   /* every connection, open or closing */
    unsigned closing_conns;
    struct fab_counters k;
    fab_reply_hook reply_hook; /* test hook: runs before a chain's completion is delivered */
    void *reply_hook_arg;
    void *be_ctx;          /* the backend's own state for the context (its ctx_init's) */
    int64_t spin_ns; /* how long a wait polls before it blocks (fab_ctx_set_spin) */
    /* tasks (fab_ctx_attach) */
    struct sched *sched;   /* the scheduler whose tasks share this context, or NULL */
    uint64_t wake_buf;     /* the read of the scheduler's eventfd lands here */
    bool wake_armed;
    bool flush_pending;    /* tasks posted this round: flush at its end */
    struct ctx_waiter *waiters; /* tasks waiting for any progress */
    struct fab_owner self; /* the posts of the context's thread outside its tasks */
};

/* ---------------------------------------------------------------------------------------------
 * The core's calls that backends make (ctx.c). */

/* Completes a slot (status < 0 on failure): queues its completion or marks the sync waiter. */
void ctx_complete(struct fab_ctx *c, unsigned slot, int status);
/* Fails every chain and RPC to node with status and tears the endpoint down (backoff). */
void ctx_fail_peer(struct fab_ctx *c, uint16_t node, int status);
/* Makes sure the TCP endpoint to node is up (connecting synchronously if needed). */
int ctx_ep_up(struct fab_ctx *c, uint16_t node);
/* Sends what was appended to cn's output: now, or with defer (a task of the attached scheduler
 * posted it) at the end of the scheduler's round, together with what its other tasks post
 * meanwhile. */
void ctx_kick(struct fab_ctx *c, struct conn *cn, bool defer);

/* ---------------------------------------------------------------------------------------------
 * Backends: how one-sided operations reach the target. The core (the files directly in rdma/)
 * owns everything else on both transports -- the TCP connection to each peer, RPC, slots,
 * deadlines, waiting, tasks -- and reaches a backend only through this table,
 * chosen once by fab_open (f->be) from the registry (open.c). A backend keeps its state behind
 * its own pointers (f->be_node, c->be_ctx, c->eps[node].be_peer), calls down into the core
 * through this header, and is never called by name. A NULL hook means the backend has nothing to
 * do there. */
struct fab_backend {
    enum fab_transport transport; /* what fab_opts.transport names it by */
    /* Whether it can run on this machine (NULL: always); when not, why says why. FAB_AUTO takes
     * the first backend of the registry that can. */
    bool (*available)(void);
    const char *why;
    /* The node, after its arena is mapped and before the service starts (returns 0 or RDKV_E*,
     * with a reason in err). node_close also runs after a failed or a skipped node_open. */
    int (*node_open)(struct fabric *f, char *err, size_t errcap);
    void (*node_close)(struct fabric *f);
    /* A context, once its ring and endpoints exist (returns 0 or RDKV_E*); ctx_fini runs after
     * every endpoint was failed with RDKV_ESHUTDOWN, before the ring goes. */
    int (*ctx_init)(struct fab_ctx *c);
    void (*ctx_fini)(struct fab_ctx *c);
    /* Required. Posts slot's chain (already validated, counted, its TCP endpoint up) to its node:
     * now, or with defer (a task posted it) at the round's end -- the caller then schedules the
     * round's flush, and every chain deferred meanwhile leaves with it (one send or one doorbell
     * per peer). Failures after posting arrive through ctx_complete; a status returned fails the
     * whole chain (RDKV_ENOMEM also fails the peer). */
    int (*post)(struct fab_ctx *c, unsigned slot, bool defer);
    /* The round's end: posts what was deferred. (The TCP connections' output is flushed by the
     * caller on both transports.) */
    void (*flush)(struct fab_ctx *c);
    /* Reaps completions that do not arrive through the ring; returns how many it handled. */
    int (*poll)(struct fab_ctx *c);
    /* Before the context blocks in its ring: arms a completion channel so that an EV_POLL event
     * ends the wait (the caller then polls once, for completions that beat the arming). Needs
     * poll. */
    void (*arm)(struct fab_ctx *c);
    /* The EV_POLL event came (res: its result). */
    void (*on_channel)(struct fab_ctx *c, int res);
    /* On the context's thread: a frame from node's connection that is not an RPC response (the
     * soft transport's WIRE_OP_RESP). Returns 0, or RDKV_EPROTO when it is no frame of the
     * backend's or does not match what is in flight (the caller fails the connection). NULL:
     * every such frame is a protocol error. */
    int (*on_frame)(struct fab_ctx *c, uint16_t node, const struct wire_hdr *h,
                    const uint8_t *body);
    /* On the service thread: executes one WIRE_OP_REQ that arrived on cn, as the target's NIC,
     * and appends its response to cn's output. *qp_error is the connection's error state (set by
     * an access error, cleared by WIRE_OP_RESET); refuse, when not 0, is the status it answers
     * without executing (a fenced process's: fab_fence); cn is closed (through ring) when the
     * frame is malformed or memory runs out. NULL: the service answers RDKV_ENOTSUP (the
     * backend's one-sided operations do not travel on the TCP stream). */
    void (*exec)(struct fabric *f, struct io_uring *ring, struct conn *cn, bool *qp_error,
                 int refuse, const struct wire_hdr *h, const uint8_t *body);
    /* The endpoint to node failed with status: the backend drops what it holds for that peer
     * (ops it tracks get status); the caller then fails every chain and RPC still open to it. */
    void (*peer_down)(struct fab_ctx *c, uint16_t node, int status);
    /* On the service thread: service connection conn_id is gone (fab_rpc_conn); drop what
     * was created for it. */
    void (*conn_gone)(struct fabric *f, uint64_t conn_id);
    /* fab_fence took a new bound for node (in f->fence_upto): the backend drops what serves a
     * fenced process (its queue pairs) and refuses to make more. */
    void (*fence)(struct fabric *f, uint16_t node);
};

/* The registry's entries, each defined in its backend's folder; only fab_open (open.c) looks
 * them up. */
extern const struct fab_backend fab_soft_backend;  /* rdma/soft/initiator.c */
extern const struct fab_backend fab_verbs_backend; /* rdma/verbs/data.c */

#endif
