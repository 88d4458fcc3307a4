/* Internals shared by the fabric's parts: the node (struct fabric), the per-thread context
 * (struct fab_ctx), the io_uring connection machinery both sides use, the node service (RPC front
 * end), and the seam to the two transports: the backend table (struct fab_backend) and the soft
 * transport's frame handlers. Not for use outside rdma/. */
#ifndef RDKV_RDMA_INTERNAL_H
#define RDKV_RDMA_INTERNAL_H

#include "auth.h"
#include "fabric.h"
#include "wire.h"

#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>

/* ---------------------------------------------------------------------------------------------
 * io_uring plumbing. user_data = pointer | event kind (pointers are 8-byte aligned). */
enum ev_kind {
    EV_RECV = 1,   /* multishot recv on a conn */
    EV_SEND = 2,   /* send of a conn's output buffer */
    EV_ACCEPT = 3, /* multishot accept on the listening socket */
    EV_WAKE = 4,   /* read on the service's eventfd */
    EV_POLL = 5,   /* poll on a verbs completion channel */
    EV_IGNORE = 6, /* cancel requests and the like */
    EV_TIMER = 7,  /* a timeout of the node service (its tick, the accept back-off) */
};
#define EV_MASK 7ull
static inline uint64_t ev_tag(void *p, enum ev_kind k) { return (uint64_t)(uintptr_t)p | k; }
static inline enum ev_kind ev_kind_of(uint64_t ud) { return (enum ev_kind)(ud & EV_MASK); }
static inline void *ev_ptr(uint64_t ud) { return (void *)(uintptr_t)(ud & ~EV_MASK); }

/* Sets up a ring with SINGLE_ISSUER|DEFER_TASKRUN, falling back to COOP_TASKRUN and then to no
 * flags on kernels without them. Must run on the thread that will use the ring. */
int uring_setup(struct io_uring *ring, unsigned entries, char *err, size_t errcap);
void uring_exit(struct io_uring *ring);
/* An SQE, submitting first if the queue is full. Never NULL. */
struct io_uring_sqe *uring_sqe(struct io_uring *ring);

/* A ring of provided buffers for multishot recv. */
struct bufring {
    struct io_uring_buf_ring *br;
    uint8_t *bufs;
    size_t map_size;
    unsigned nbufs, bufsz;
    int bgid;
};
int bufring_init(struct io_uring *ring, struct bufring *b, int bgid, unsigned nbufs, unsigned bufsz);
void bufring_fini(struct io_uring *ring, struct bufring *b);
static inline uint8_t *bufring_buf(struct bufring *b, unsigned bid) { return b->bufs + (size_t)bid * b->bufsz; }
void bufring_recycle(struct bufring *b, unsigned bid);

/* A framed TCP connection driven by one ring: multishot recv into the ring's provided buffers,
 * reassembly, and an output buffer with at most one send in flight (later frames gather in the
 * other buffer and leave together: doorbell batching). */
struct obuf {
    uint8_t *p;
    size_t len, cap;
};

struct conn {
    int fd;
    int sqes;           /* SQEs in flight that name this conn */
    bool recv_armed;
    bool sending;
    bool closing;       /* no new I/O; freed by the owner when sqes == 0 */
    bool dirty;         /* output waiting in out[cur] */
    int cur;            /* out[cur] gathers; out[cur ^ 1] is being sent */
    struct obuf out[2];
    struct wire_asm in;
};

void conn_init(struct conn *c, int fd, uint32_t rpc_max);
/* Output bytes queued: gathering plus being sent. */
static inline size_t conn_queued(const struct conn *c) { return c->out[0].len + c->out[1].len; }
/* Frees buffers and closes the fd (sqes must be 0). */
void conn_fini(struct conn *c);
/* Space for n more output bytes (NULL when out of memory). The caller fills it completely. */
uint8_t *conn_reserve(struct conn *c, size_t n);
/* Starts a send of the gathered output if none is in flight. */
void conn_flush(struct io_uring *ring, struct conn *c);
/* Handles a send completion; returns false when the connection failed. */
bool conn_on_send(struct conn *c, int res);
void conn_arm_recv(struct io_uring *ring, struct conn *c, int bgid);
/* Stops I/O: shuts the socket down so in-flight operations finish, and cancels the recv. */
void conn_close(struct io_uring *ring, struct conn *c);

/* Blocking helpers used before a socket joins a ring (handshakes) and by the echo baseline. */
int net_connect(const char *host, uint16_t port, int64_t deadline_ns, int *fd_out, char *err,
                size_t errcap);
int net_listen(const char *host, uint16_t port, int *fd_out, char *err, size_t errcap);
int net_send_all(int fd, const void *buf, size_t len, int64_t deadline_ns);
int net_recv_all(int fd, void *buf, size_t len, int64_t deadline_ns);
void net_tune(int fd);

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

struct rpc_entry {
    _Atomic(fab_rpc_handler) fn;
    void *arg;
    unsigned flags;
};

struct svc;
struct verbs_node;
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
    struct svc *svc;
    struct verbs_node *vn;        /* verbs backend: the node's device state */
    int64_t start_ns;
    uint64_t incarnation;         /* this process's (fab_incarnation) */
    _Atomic uint64_t *fence_upto; /* fab_fence: per node, the highest incarnation fenced (0) */
    /* authentication */
    struct auth_keys keys;        /* what the secret file held (none: insecure, or a client
                                     without a credential) */
    uint8_t role;                 /* the role this fabric proves when it connects */
    struct peer_addrs *addrs;     /* nodes: each node's configured addresses (fab_peer_addr_ok) */
};

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
 * The per-thread context. */
enum ep_state { EP_DOWN = 0, EP_UP = 1 };

/* One part of a soft one-sided op in flight: ops longer than WIRE_OP_MAX travel as several. */
struct piece {
    uint16_t slot;
    uint8_t op;
    uint32_t len;
    uint64_t at; /* byte offset inside the op */
};

/* An endpoint. The backends' per-peer state stays in it (the soft transport's needs_reset and
 * fifo of pieces, the verbs queue pair behind vqp): a side array per backend would only repeat
 * the endpoints' allocation and lifetime. Only its backend (rdma/soft, rdma/verbs) writes it. */
struct peer_ep {
    enum ep_state state;
    struct conn *conn;
    uint64_t arena_size;
    uint64_t inc;          /* the peer's incarnation, from the connection's HELLO_ACK */
    int64_t retry_after;   /* after a failure, new posts fail at once until then */
    unsigned fail_streak;
    bool needs_reset;      /* soft: send WIRE_OP_RESET before the next request */
    struct piece *fifo;    /* soft one-sided pieces in flight, in order */
    unsigned head, count, cap;
    unsigned rpcs;         /* RPCs in flight to this peer */
    unsigned chains;       /* chains in flight to this peer */
    void *vqp;             /* verbs: the queue pair to this peer */
    bool vconnecting;      /* verbs: a task of this context is connecting it (the others wait) */
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
    void *vctx;            /* verbs backend: per-thread state */
    int64_t spin_ns; /* how long a wait polls before it blocks (fab_ctx_set_spin) */
    /* tasks (fab_ctx_attach) */
    struct sched *sched;   /* the scheduler whose tasks share this context, or NULL */
    uint64_t wake_buf;     /* the read of the scheduler's eventfd lands here */
    bool wake_armed;
    bool flush_pending;    /* tasks posted this round: flush at its end */
    struct ctx_waiter *waiters; /* tasks waiting for any progress */
    struct fab_owner self; /* the posts of the context's thread outside its tasks */
};

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
 * The node service: accepts connections, hands soft one-sided requests to the soft NIC (which
 * runs on the service thread), and feeds RPCs to the RPC threads. */
int svc_start(struct fabric *f, int listen_fd, char *err, size_t errcap);
void svc_stop(struct fabric *f);
/* Returns once the service thread has passed the start of a new batch of events: a frame it
 * handles after that sees every store made before the call (fab_fence). */
void svc_sync(struct fabric *f);
/* ---------------------------------------------------------------------------------------------
 * Backends: how one-sided operations reach the target. The shared code (fabric.c, ctx.c,
 * service.c) owns everything else on both transports -- the TCP connection to each peer, RPC,
 * slots, deadlines, waiting, tasks -- and reaches a backend only through this table, chosen once
 * by fab_open (f->be). A NULL hook means the backend has nothing to do there. */
struct fab_backend {
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

extern const struct fab_backend fab_soft_backend;  /* rdma/soft/initiator.c */
extern const struct fab_backend fab_verbs_backend; /* rdma/verbs/data.c */

/* True when libibverbs lists at least one device (rdma/verbs/control.c). */
bool verbs_available(void);

/* The soft transport's two frames that arrive on the shared receive paths:
 * - soft_on_op_resp (rdma/soft/initiator.c), on the context's thread: a WIRE_OP_RESP from node.
 *   Returns 0, or RDKV_EPROTO when it does not match what is in flight (the caller fails the
 *   connection).
 * - soft_nic_exec (rdma/soft/nic.c), on the service thread: the soft NIC executes one WIRE_OP_REQ
 *   that arrived on cn and appends its response to cn's output. *qp_error is the connection's
 *   error state (set by an access error, cleared by WIRE_OP_RESET); refuse, when not 0, is the
 *   status it answers without executing (a fenced process's: fab_fence); cn is closed (through
 *   ring) when the frame is malformed or memory runs out. */
int soft_on_op_resp(struct fab_ctx *c, uint16_t node, const struct wire_hdr *h,
                    const uint8_t *body);
void soft_nic_exec(struct fabric *f, struct io_uring *ring, struct conn *cn, bool *qp_error,
                   int refuse, const struct wire_hdr *h, const uint8_t *body);

#endif
