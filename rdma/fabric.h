/* The fabric: how every rdkv thread reaches memory on any node. It offers RDMA's one-sided
 * operations (READ of any length, WRITE, CAS64, FAA64) on one registered arena per node, and
 * two-sided RPC, over real verbs or the soft transport, with the same promises on both:
 * in-order execution per endpoint, completion = effect at the target, NIC atomics atomic only
 * among NIC atomics, aligned 8-byte READ/WRITE atomic with CPU loads/stores, and error
 * completions (never crashes, never hangs) for bad addresses and dead peers. docs/fabric.md. */
#ifndef RDKV_FABRIC_H
#define RDKV_FABRIC_H

#include "common/config.h"
#include "rdma/rpc_types.h"
#include "rdkv_status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------------------------------------
 * Remote pointers: node:16 | offset:48 into that node's arena. Offset 0 is the arena header, so
 * RPTR_NULL never names an object. */
typedef uint64_t rptr;

#define RPTR_NULL ((rptr)0)
#define RPTR_OFF_BITS 48
#define RPTR_OFF_MASK ((1ull << RPTR_OFF_BITS) - 1)

static inline rptr rptr_make(uint16_t node, uint64_t off)
{
    return ((uint64_t)node << RPTR_OFF_BITS) | (off & RPTR_OFF_MASK);
}
static inline uint16_t rptr_node(rptr p) { return (uint16_t)(p >> RPTR_OFF_BITS); }
static inline uint64_t rptr_off(rptr p) { return p & RPTR_OFF_MASK; }
static inline rptr rptr_add(rptr p, uint64_t delta) { return rptr_make(rptr_node(p), rptr_off(p) + delta); }

/* ---------------------------------------------------------------------------------------------
 * Opening a node (or a client that owns no arena). */
enum fab_transport { FAB_SOFT = 0, FAB_VERBS = 1, FAB_AUTO = 2 };

/* "soft", "verbs" or "auto". */
int fab_transport_parse(const char *s, enum fab_transport *out);
const char *fab_transport_name(enum fab_transport t);
/* True when libibverbs lists at least one device here. */
bool fab_verbs_available(void);

#define FAB_NODE_CLIENT 0xFFFFu /* a fabric that owns no arena and serves nothing */
#define FAB_NODE_ANY 0xFFFEu    /* in a client's hello: "whichever node answers here" */

enum fab_verbs_cm { FAB_CM_AUTO = 0, FAB_CM_RDMACM = 1, FAB_CM_OOB = 2 };

struct fab_opts {
    const struct cluster_config *cluster; /* required; not copied, must outlive the fabric */
    uint16_t node;                        /* this node's id, or FAB_NODE_CLIENT */
    enum fab_transport transport;         /* default FAB_AUTO: verbs when a device exists */
    uint64_t arena_size;                  /* default: the config's, else 256 MiB */
    int listen_fd;                        /* -1: bind the configured address; else an inherited,
                                             already listening socket (launchers use this) */
    unsigned rpc_threads;                 /* threads running RPC handlers; default 2 */
    int64_t op_timeout_ns;                /* a one-sided op not completed by then fails with
                                             RDKV_ETIMEDOUT and resets its endpoint; default 2 s */
    int64_t rpc_timeout_ns;               /* default deadline of an RPC; default 10 s */
    int64_t connect_timeout_ns;           /* default 2 s */
    int64_t spin_ns;                      /* a waiting thread polls this long, then blocks; 20 us */
    uint32_t rpc_max_bytes;               /* largest RPC request or response; default 16 MiB */
    /* Bounds of the node service on what one connection can make it hold (docs/security.md,
     * "Resource bounds"). 0 means the default. */
    uint32_t conn_out_max;                /* a connection's queued replies (and requests still
                                             running) beyond which its further requests wait
                                             unread until they drain; default 4 MiB */
    unsigned conn_max;                    /* connections open at once; more are refused with
                                             RDKV_EBUSY; default 1024 */
    int64_t hello_timeout_ns;             /* a connection must finish its handshake within this;
                                             default 5 s */
    int64_t conn_idle_ns;                 /* a client connection that sent nothing and is owed
                                             nothing this long is closed; default 10 min,
                                             negative: never. Node connections never are */
    /* soft transport: a NIC atomic sleeps this long between its load and its store (tests) */
    int64_t soft_atomic_pause_ns;
    /* verbs transport */
    const char *verbs_device;             /* NULL: the first device */
    int verbs_port;                       /* default 1 */
    int verbs_gid_index;                  /* -1: the first RoCE v2 IPv4 GID, else index 0 */
    enum fab_verbs_cm verbs_cm;           /* auto: rdma_cm, and the out-of-band exchange where
                                             rdma_cm cannot resolve a route */
    /* clients only (node FAB_NODE_CLIENT): the config's entries are endpoints whose node ids
     * the client does not know (entry i is just the i-th address to dial). Connections then
     * skip the id and cluster checks, and only RPCs are possible (remote sessions of rdkv.h). */
    bool endpoints_only;
    /* Authentication (rdma/auth.h, docs/security.md). A node proves the node key; a client
     * fabric proves the node key when its file holds it (an operator tool: kvbench, tests), else
     * the client key. */
    const char *secret_file; /* NULL: the cluster config's secret_file, if any; for a client
                                fabric then $RDKV_SECRET_FILE, if set */
    bool insecure;           /* benchmarks only: a node accepts HELLOs without proof (and says
                                so loudly in its log); without a secret and without this, a node
                                refuses to open */
    bool client_role;        /* a client fabric proves the client key even when it holds the
                                node key (remote sessions need no more) */
    /* This process's incarnation: which life of the node it is, told to every peer in the
     * handshake (fab_peer_incarnation). It must be greater than that of every earlier process of
     * the same node (a node with a data directory persists it); 0: the wall clock's microseconds
     * at fab_open, which is, as long as the clock does not go back. */
    uint64_t incarnation;
    /* A node that must make its memory what it claims before anyone may touch it (a restart
     * replays its log, then locks the rows of its in-doubt transactions): no connection is
     * accepted until fab_serve -- peers find it unreachable meanwhile. */
    bool serve_later;
};

/* conn_idle_ns's default: 10 minutes */
#define FAB_CONN_IDLE_DEFAULT_NS (600LL * 1000000000LL)

void fab_opts_init(struct fab_opts *o);

struct fabric;
struct fab_ctx;

/* Opens the node: maps and registers the arena, starts the node's service thread (the soft NIC)
 * and its RPC threads, and listens. On failure returns a status and writes a one-line reason
 * into err. */
int fab_open(const struct fab_opts *o, struct fabric **out, char *err, size_t errcap);
/* Opens a listening TCP socket on host:port (port 0: the kernel picks one) and reports the port
 * it got. Launchers bind nodes' sockets this way and hand them over with fab_opts.listen_fd. */
int fab_listen(const char *host, uint16_t port, int *fd_out, uint16_t *port_out, char *err,
               size_t errcap);
/* With fab_opts.serve_later: from now on the node accepts connections (once; no-op otherwise). */
void fab_serve(struct fabric *f);
/* Stops the service and RPC threads and frees everything. No fab_ctx may be in use, and RPC
 * handlers must have replied to every request they deferred. */
void fab_close(struct fabric *f);

uint16_t fab_node_id(const struct fabric *f);
/* This process's incarnation (fab_opts.incarnation, or the one fab_open chose). */
uint64_t fab_incarnation(const struct fabric *f);
unsigned fab_num_nodes(const struct fabric *f);
enum fab_transport fab_transport_of(const struct fabric *f);
const struct cluster_config *fab_cluster(const struct fabric *f);
void *fab_arena_base(const struct fabric *f);
uint64_t fab_arena_size(const struct fabric *f);
/* The local fast path: a plain pointer when p lies in this node's arena, else NULL. */
void *fab_local(const struct fabric *f, rptr p);
/* The rptr of a pointer into this node's arena (RPTR_NULL if it is not in the arena). */
rptr fab_rptr_of(const struct fabric *f, const void *p);

/* Named regions of the arena, for structures that other nodes must find (lock tables, indexes).
 * The directory lives in the arena header, so a peer finds a region with one-sided READs.
 * fab_region reserves size bytes (zeroed, aligned to `align`, a power of two <= 4096) under name,
 * or returns the existing one when the name is taken with the same size. */
#define FAB_REGION_NAME_MAX 23
int fab_region(struct fabric *f, const char *name, uint64_t size, uint64_t align, rptr *out);
int fab_region_lookup(struct fab_ctx *c, uint16_t node, const char *name, rptr *out,
                      uint64_t *size);

/* Soft transport test hook: called on the NIC thread between a remote atomic's load and its
 * store, with the target and the loaded value. NULL removes it. */
typedef void (*fab_atomic_hook)(void *arg, rptr target, uint64_t loaded);
void fab_soft_set_atomic_hook(struct fabric *f, fab_atomic_hook fn, void *arg);

/* Test hook (both transports): called on an RPC thread around the handler of every request that
 * does not run inline (FAB_RPC_FAST ones included), before it (after = false) and once the
 * handler returned (after = true).
 * The hook may block before the handler: that delivers the request late, as a slow network
 * would, while the node's other RPC threads and its NIC go on. NULL removes it. */
typedef void (*fab_rpc_hook)(void *arg, uint16_t type, uint16_t src, bool after);
void fab_set_rpc_hook(struct fabric *f, fab_rpc_hook fn, void *arg);

/* ---------------------------------------------------------------------------------------------
 * Per-thread contexts. A context holds the thread's endpoints (one per peer, created on first
 * use) and its completion queue. It must be created, used and destroyed by one thread. */
int fab_ctx_create(struct fabric *f, struct fab_ctx **out);
void fab_ctx_destroy(struct fab_ctx *c);
struct fabric *fab_ctx_fabric(const struct fab_ctx *c);

/* One-sided operations. */
enum fab_opcode { FAB_OP_READ = 1, FAB_OP_WRITE = 2, FAB_OP_CAS = 3, FAB_OP_FAA = 4 };

struct fab_op {
    uint8_t opcode;     /* enum fab_opcode */
    int32_t status;     /* out: 0 or RDKV_E* */
    uint64_t len;       /* READ/WRITE length in bytes (>= 1); atomics ignore it */
    rptr remote;        /* target; atomics need 8-byte alignment */
    void *local;        /* READ: destination; WRITE: source. Both must stay valid and, for a
                           WRITE, unchanged until the completion (verbs may read it when the
                           op executes; the soft transport happens to copy it at post) */
    uint64_t arg;       /* CAS: the expected value; FAA: the addend */
    uint64_t swap;      /* CAS: the new value */
    uint64_t result;    /* out, CAS/FAA: the value the word held before the operation */
};

static inline struct fab_op fab_op_read(rptr src, void *dst, uint64_t len)
{
    struct fab_op o = {.opcode = FAB_OP_READ, .len = len, .remote = src, .local = dst};
    return o;
}
static inline struct fab_op fab_op_write(rptr dst, const void *src, uint64_t len)
{
    struct fab_op o = {.opcode = FAB_OP_WRITE, .len = len, .remote = dst, .local = (void *)src};
    return o;
}
static inline struct fab_op fab_op_cas(rptr dst, uint64_t expect, uint64_t desired)
{
    struct fab_op o = {.opcode = FAB_OP_CAS, .len = 8, .remote = dst, .arg = expect, .swap = desired};
    return o;
}
static inline struct fab_op fab_op_faa(rptr dst, uint64_t add)
{
    struct fab_op o = {.opcode = FAB_OP_FAA, .len = 8, .remote = dst, .arg = add};
    return o;
}

/* Most chains and RPCs one context may have in flight; more gives RDKV_EBUSY. */
#define FAB_MAX_INFLIGHT 1024
/* Most operations in one chain. */
#define FAB_MAX_CHAIN 64

/* Posts ops[0..n) as one chain to the node of ops[0].remote (every op must target that node):
 * the chain leaves as one doorbell (verbs) or one send (soft), the ops execute in order, and the
 * chain produces exactly one completion carrying `tag`, with the first failure (if any) as its
 * status. An op after a failed one in the same endpoint completes with RDKV_EFLUSHED. The ops
 * array must stay valid until the completion, which also fills status/result and READ data.
 * Returns 0, RDKV_EINVAL (bad arguments: nothing posted) or RDKV_EBUSY (too many in flight). */
int fab_post(struct fab_ctx *c, struct fab_op *ops, unsigned n, uint64_t tag);

struct fab_cqe {
    uint64_t tag;
    int status;
};

/* Progresses I/O and returns up to max completions without blocking. */
int fab_poll(struct fab_ctx *c, struct fab_cqe *out, int max);
/* Like fab_poll, but when none is ready it polls for spin_ns and then blocks until one is, or
 * timeout_ns passes (< 0: no timeout). Returns the number of completions (0 on timeout). */
int fab_wait(struct fab_ctx *c, struct fab_cqe *out, int max, int64_t timeout_ns);
/* Chains and RPCs posted and not yet returned by fab_poll/fab_wait. */
unsigned fab_inflight(const struct fab_ctx *c);

/* Synchronous helpers: post one chain and wait for it. Completions of other chains that arrive
 * meanwhile are kept for fab_poll. They return the chain's status. */
int fab_exec(struct fab_ctx *c, struct fab_op *ops, unsigned n);
int fab_read(struct fab_ctx *c, rptr src, void *dst, uint64_t len);
int fab_write(struct fab_ctx *c, rptr dst, const void *src, uint64_t len);
int fab_cas(struct fab_ctx *c, rptr dst, uint64_t expect, uint64_t desired, uint64_t *old);
int fab_faa(struct fab_ctx *c, rptr dst, uint64_t add, uint64_t *old);

/* ---------------------------------------------------------------------------------------------
 * Tasks (common/task.h): the tasks of one thread share its context. fab_ctx_attach, on c's
 * thread, makes c the context of scheduler s: a wait of one of s's tasks on c (a synchronous
 * helper, an RPC call, fab_wait) parks that task instead of blocking the thread; what s's tasks
 * post during one round leaves at the round's end, one send (soft) or one doorbell (verbs) per
 * peer; and s's thread blocks in c's io_uring wait when no task can run. NULL detaches; detach
 * before destroying either. Outside s's tasks, c behaves as without it. */
struct sched;
struct fab_counters;
void fab_ctx_attach(struct fab_ctx *c, struct sched *s);
/* How long c's waits poll before they block (default: fab_opts.spin_ns; 0: block at once). A
 * poll is a system call on the soft transport, and on a machine with no idle core it takes the
 * time the peer needs to answer: threads that wait for other nodes while serving many clients
 * (a node's session threads) block at once. */
void fab_ctx_set_spin(struct fab_ctx *c, int64_t spin_ns);
/* The calling task's own counters: its operations are counted in *k as well as in its context's
 * (NULL: no longer). For round trips per operation when several tasks share a context. */
void fab_task_counters(struct fab_counters *k);

/* ---------------------------------------------------------------------------------------------
 * Two-sided RPC. A handler runs on one of the node's RPC threads (or, when registered with
 * FAB_RPC_INLINE, on the service thread itself, where it must not block), and must call
 * fab_rpc_reply exactly once, from any thread, now or later. */
struct fab_rpc_req;
typedef void (*fab_rpc_handler)(struct fab_rpc_req *req, void *arg);

#define FAB_RPC_INLINE 1u
/* A handler that never waits for long (a mutex held briefly, no I/O, no fabric wait): it runs on
 * the service thread as an inline one would -- no thread hand-off, so no context switch per
 * request -- but promises no order among requests. While a test hook is set (fab_set_rpc_hook)
 * it runs on the RPC threads, so the hook can delay it. */
#define FAB_RPC_FAST 2u
/* Clients may call it: a connection authenticated with the client key reaches only handlers
 * registered with this flag (the session protocol); every other type answers RDKV_EPERM there. */
#define FAB_RPC_CLIENT 4u
/* A fenced process (fab_fence) reaches it too: the way back in for a node that was removed (its
 * new process asks to join). Every other type answers RDKV_EPERM there. */
#define FAB_RPC_FENCED 8u
/* Whether host (a name or an address) resolves: 0; RDKV_ENOHOST when the name does not exist;
 * RDKV_EUNAVAILABLE when the resolver did not answer. The reason goes into err. */
int fab_host_check(const char *host, char *err, size_t errcap);

/* Message types: every one of rdkv's is in rdma/rpc_types.h (FAB_RPC_USER_BASE and up are the
 * modules' above the fabric). */
#define FAB_RPC_MAX_TYPES 1024

int fab_rpc_register(struct fabric *f, uint16_t type, fab_rpc_handler fn, void *arg,
                     unsigned flags);
const void *fab_rpc_data(const struct fab_rpc_req *req);
size_t fab_rpc_len(const struct fab_rpc_req *req);
/* The caller's node id -- proven by the handshake: the node key, and for a cluster member the
 * configured address -- or FAB_NODE_CLIENT (a client, or an operator tool that is no member). On
 * an --insecure node the id is only claimed. */
uint16_t fab_rpc_src(const struct fab_rpc_req *req);
/* True when the caller proved the client key only (a client connection). */
bool fab_rpc_from_client(const struct fab_rpc_req *req);
/* The connection the request arrived on: an id unique for the fabric's lifetime (state a
 * handler keeps for a caller -- a remote session -- is tied to it). */
uint64_t fab_rpc_conn(const struct fab_rpc_req *req);
/* fn(arg, conn) runs on the service thread once connection `conn` is gone and every request
 * that arrived on it has been answered (one hook per fabric; set it before serving). */
typedef void (*fab_conn_gone_fn)(void *arg, uint64_t conn);
void fab_on_conn_gone(struct fabric *f, fab_conn_gone_fn fn, void *arg);
/* Sends the response (status and bytes, copied) and frees req. Bytes longer than
 * fab_rpc_reply_max are not sent: the response is then RDKV_ETOOBIG with none. */
void fab_rpc_reply(struct fab_rpc_req *req, int status, const void *data, size_t len);
/* The most bytes a response to req may carry (fab_opts.rpc_max_bytes, the frame limit the
 * caller's side enforces too). A handler whose answer grows with what it reads checks it while
 * building the answer, so that a small request cannot make it build a huge one. */
size_t fab_rpc_reply_max(const struct fab_rpc_req *req);
/* The largest RPC request this fabric sends or accepts (fab_opts.rpc_max_bytes). */
size_t fab_rpc_max(const struct fabric *f);

/* A growable byte buffer for RPC responses, reused across calls. */
struct fab_buf {
    void *data;
    size_t len, cap;
};
/* Makes b hold a copy of p[0..n) (0, or RDKV_ENOMEM with b unchanged). */
int fab_buf_set(struct fab_buf *b, const void *p, size_t n);
void fab_buf_free(struct fab_buf *b);

/* Sends an RPC; its completion (status = the handler's status or a transport error) carries tag,
 * and the response bytes land in resp, which must stay valid until then. timeout_ns 0 means the
 * fabric's rpc_timeout_ns. */
int fab_rpc_post(struct fab_ctx *c, uint16_t node, uint16_t type, const void *req, size_t len,
                 struct fab_buf *resp, int64_t timeout_ns, uint64_t tag);
int fab_rpc_call(struct fab_ctx *c, uint16_t node, uint16_t type, const void *req, size_t len,
                 struct fab_buf *resp, int64_t timeout_ns);
/* Sends an RPC whose answer nobody waits for (a one-way message in RPC framing): the handler runs
 * as for any RPC, its answer is dropped when it arrives, no completion is queued, and a failure
 * is not reported. A thread's requests to one node arrive in the order sent; handlers registered
 * FAB_RPC_INLINE run in that order too, so such a handler sees this request before any later one
 * from the same thread. Counts as an RPC, not a round trip. */
int fab_rpc_send(struct fab_ctx *c, uint16_t node, uint16_t type, const void *req, size_t len);

/* ---------------------------------------------------------------------------------------------
 * Per-context counters: what this thread issued. A round trip is one chain or one RPC waited
 * for (fab_rpc_send's are counted in rpcs only). */
struct fab_counters {
    uint64_t reads, writes, cas, faa;
    uint64_t bytes_read, bytes_written;
    uint64_t round_trips;
    uint64_t rpcs;
    uint64_t errors; /* chains and RPCs that completed with an error */
    uint64_t doorbells; /* sends (soft) or ibv_post_send calls (verbs) that carried them: with
                           several tasks posting in one round, fewer than the chains and RPCs
                           (counted for the context only, not per task) */
};

const struct fab_counters *fab_counters(const struct fab_ctx *c);
void fab_counters_reset(struct fab_ctx *c);
static inline uint64_t fab_counters_ops(const struct fab_counters *k)
{
    return k->reads + k->writes + k->cas + k->faa;
}

/* Test hook (both transports): called on the context's own thread when one of its chains has
 * completed, before the caller learns of it (fab_exec returns, fab_poll or fab_wait reports it).
 * The ops have taken effect at the target and READ data and atomic results are in place; the
 * hook may read them and may block, which delivers the reply late -- as a slow network, a
 * retransmission or a descheduled thread would -- while every other thread and the NICs go on.
 * NULL removes it. */
typedef void (*fab_reply_hook)(void *arg, const struct fab_op *ops, unsigned n, int status);
void fab_ctx_set_reply_hook(struct fab_ctx *c, fab_reply_hook fn, void *arg);

/* The raw TCP ping-pong baseline (kvbench fabric): a blocking socket to node, past the
 * handshake (with this fabric's credential), that the node's echo thread answers: every 8 bytes
 * sent come back. 0 or a status, with a one-line reason in err. */
int fab_echo_connect(struct fabric *f, uint16_t node, int64_t timeout_ns, int *fd_out, char *err,
                     size_t errcap);

/* Information about the peer as learned at connection time (for tools and tests). */
int fab_peer_arena_size(struct fab_ctx *c, uint16_t node, uint64_t *size);

/* ---------------------------------------------------------------------------------------------
 * Incarnations. A node that restarts is a new process whose memory knows nothing of the old
 * one's: lock words start afresh, rows may sit elsewhere. A context reconnects to a restarted
 * peer by itself (on the next post), so state built on operations that reached the old process
 * -- held locks, tickets, cached row locations -- must not be acted on through the new one.
 * Every connection learns its peer's incarnation in the handshake (fab_opts.incarnation;
 * strictly greater for every later process of a node), and posts can be pinned to one.
 *
 * The incarnation of the peer process c's connection to node reaches: with connect, connecting
 * first if there is no connection (RDKV_EUNAVAILABLE if that fails); without, RDKV_EUNAVAILABLE
 * when c has no connection to node up now. A later post of c reaches this incarnation or a later
 * one, never an earlier one. */
int fab_peer_incarnation(struct fab_ctx *c, uint16_t node, bool connect, uint64_t *inc);
/* Pins the calling task's posts on c (or, outside c's scheduler's tasks, c's thread's) to
 * incarnations: incs[node] (an array of fab_num_nodes entries, owned by the caller, which must
 * unpin before freeing it) names the incarnation every chain and RPC to node must reach; a post
 * whose connection reaches another one completes with RDKV_EUNAVAILABLE without being sent. An
 * entry 0 is filled with the incarnation the first post to that node reaches. NULL unpins.
 * Returns the pin it replaces (NULL: none), so a nested use can restore it. */
uint64_t *fab_pin(struct fab_ctx *c, uint64_t *incs);
/* The incarnation the calling task's (or c's thread's) pin names for node: 0 when unpinned or
 * not pinned yet. */
uint64_t fab_pinned(struct fab_ctx *c, uint16_t node);
/* In an RPC handler: the caller's incarnation, from its handshake. */
uint64_t fab_rpc_src_incarnation(const struct fab_rpc_req *req);

/* Fencing (docs/fabric.md, "Fencing"): from now on, node's processes whose incarnation is at
 * most upto are fenced here (upto 0: none; a later call replaces the bound, lower or higher).
 * A fenced process's connections reach only FAB_RPC_FENCED handlers (every other RPC answers
 * RDKV_EPERM) and its one-sided operations fail with RDKV_EPERM: on the soft transport each is
 * refused as it arrives; on verbs its queue pairs here are destroyed and no new one is set up.
 * Returns once the service thread has taken the bound: no operation of a fenced process that
 * arrives after that begins here (an RPC handler already running finishes). Not on the service
 * thread (an inline handler). RDKV_EINVAL for a node out of range or this node's own id. */
int fab_fence(struct fabric *f, uint16_t node, uint64_t upto);
/* Whether node's process `inc` is fenced here now. */
bool fab_fenced(const struct fabric *f, uint16_t node, uint64_t inc);

#endif
