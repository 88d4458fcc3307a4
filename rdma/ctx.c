/* Per-thread contexts: endpoints to peers, posting chains and RPCs, the completion queue, progress
 * (spin briefly, then block in io_uring), deadlines, and failure handling, on both transports. A
 * chain reaches its target through the fabric's backend (f->be: rdma/soft, rdma/verbs). */
#include "internal.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/task.h"
#include "common/tsan.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define CTX_RING_ENTRIES 256
#define CTX_BUFS 16
#define CTX_BUFSZ (64u << 10)
#define CTX_BGID 0
#define SLOT_NONE 0xFFFFu
#define BACKOFF_MIN_NS (50 * NS_PER_MS)
#define BACKOFF_MAX_NS (1 * NS_PER_S)

/* A context's connection to one peer. */
struct cconn {
    struct conn c; /* first: user_data points at it */
    struct fab_ctx *ctx;
    struct cconn *prev, *next;
    uint16_t node;
};

static int ctx_progress(struct fab_ctx *c, int64_t wait_ns);
static bool wait_until(struct fab_ctx *c, bool (*cond)(struct fab_ctx *, void *), void *arg,
                       int64_t deadline);

int fab_ctx_create(struct fabric *f, struct fab_ctx **out)
{
    *out = NULL;
    struct fab_ctx *c = calloc(1, sizeof *c);
    if (!c) return RDKV_ENOMEM;
    c->f = f;
    c->spin_ns = f->o.spin_ns;
    char err[128];
    int rc = uring_setup(&c->ring, CTX_RING_ENTRIES, err, sizeof err);
    if (rc) {
        log_error("%s", err);
        free(c);
        return rc;
    }
    rc = bufring_init(&c->ring, &c->br, CTX_BGID, CTX_BUFS, CTX_BUFSZ);
    if (rc) {
        log_error("io_uring provided-buffer rings unavailable (kernel 5.19+ needed)");
        uring_exit(&c->ring);
        free(c);
        return rc;
    }
    c->eps = calloc(f->nnodes, sizeof *c->eps);
    if (!c->eps) {
        bufring_fini(&c->ring, &c->br);
        uring_exit(&c->ring);
        free(c);
        return RDKV_ENOMEM;
    }
    for (unsigned i = 0; i < FAB_MAX_INFLIGHT; i++)
        c->slots[i].next_free = (uint16_t)(i + 1 < FAB_MAX_INFLIGHT ? i + 1 : SLOT_NONE);
    c->free_head = 0;
    if (f->be->ctx_init) {
        rc = f->be->ctx_init(c);
        if (rc) {
            free(c->eps);
            bufring_fini(&c->ring, &c->br);
            uring_exit(&c->ring);
            free(c);
            return rc;
        }
    }
    *out = c;
    return 0;
}

/* Frees the connections that are closed and have no operation in flight. */
static void ctx_sweep(struct fab_ctx *c)
{
    for (struct cconn *cc = c->conns, *next; cc && c->closing_conns; cc = next) {
        next = cc->next;
        if (!cc->c.closing || cc->c.sqes > 0) continue;
        if (cc->prev) cc->prev->next = cc->next;
        else c->conns = cc->next;
        if (cc->next) cc->next->prev = cc->prev;
        conn_fini(&cc->c);
        free(cc);
        c->closing_conns--;
    }
}

void fab_ctx_destroy(struct fab_ctx *c)
{
    if (!c) return;
    struct fabric *f = c->f;
    /* One-way messages (fab_rpc_send) must not die with the context: give their answers, which
     * say they were delivered, a moment to come (each is bounded by the RPC timeout anyway). */
    int64_t until = clock_now_ns() + NS_PER_S;
    while (c->discards && clock_now_ns() < until) ctx_progress(c, 20 * NS_PER_MS);
    for (unsigned i = 0; i < f->nnodes; i++)
        if (c->eps[i].conn || c->eps[i].be_peer) ctx_fail_peer(c, (uint16_t)i, RDKV_ESHUTDOWN);
    if (f->be->ctx_fini) f->be->ctx_fini(c);
    /* Let the closed connections' operations finish (briefly), then the ring's exit cancels
     * whatever is left before any buffer is freed. */
    int64_t deadline = clock_now_ns() + NS_PER_S;
    while (c->closing_conns && clock_now_ns() < deadline) ctx_progress(c, 20 * NS_PER_MS);
    uring_exit(&c->ring);
    munmap(c->br.br, c->br.map_size);
    for (struct cconn *cc = c->conns, *next; cc; cc = next) {
        next = cc->next;
        conn_fini(&cc->c);
        free(cc);
    }
    free(c->eps);
    free(c);
}

struct fabric *fab_ctx_fabric(const struct fab_ctx *c) { return c->f; }
const struct fab_counters *fab_counters(const struct fab_ctx *c) { return &c->k; }
void fab_counters_reset(struct fab_ctx *c) { memset(&c->k, 0, sizeof c->k); }

/* True when the caller is a task of the scheduler c is attached to. */
static bool in_task(const struct fab_ctx *c)
{
    return c->sched && sched_self() == c->sched && task_running();
}

/* A task's owner record lives under this task key; when the task returns, slots it left in
 * flight are orphaned (freed when they complete) and the record is freed. */
static int owner_key = -1;
static pthread_once_t owner_once = PTHREAD_ONCE_INIT;
static void orphan_slots(struct fab_ctx *c, struct fab_owner *o);
static void owner_gone(void *p)
{
    struct fab_owner *o = p;
    if (o->c && o->inflight) orphan_slots(o->c, o);
    free(o);
}
static void owner_key_init(void) { owner_key = task_key_create(owner_gone); }

/* The calling task's record (created when `make`), or NULL outside tasks. */
static struct fab_owner *task_owner(bool make)
{
    if (!task_running()) return NULL;
    pthread_once(&owner_once, owner_key_init);
    struct fab_owner *o = task_get(owner_key);
    if (!o && make && owner_key >= 0 && (o = calloc(1, sizeof *o))) task_set(owner_key, o);
    return o;
}

/* Who the caller is on c: a task of its scheduler, or c's thread. NULL only for a task that
 * has posted nothing (make false) or when out of memory (make true). */
static struct fab_owner *owner_of(struct fab_ctx *c, bool make)
{
    return in_task(c) ? task_owner(make) : &c->self;
}

void fab_task_counters(struct fab_counters *k)
{
    struct fab_owner *o = task_owner(k != NULL);
    if (o) o->k = k;
}

/* Counts into the context's counters and the poster's own (o may be NULL). */
#define COUNT(c, o, field, n)                                                                      \
    do {                                                                                           \
        (c)->k.field += (n);                                                                       \
        if ((o) && (o)->k) (o)->k->field += (n);                                                   \
    } while (0)
unsigned fab_inflight(const struct fab_ctx *c) { return c->inflight; }

/* ------------------------------------------------------------------------------------------ */
/* Slots and the completion queue */

static int slot_alloc(struct fab_ctx *c)
{
    if (c->free_head == SLOT_NONE) return -1;
    unsigned i = c->free_head;
    struct slot *s = &c->slots[i];
    c->free_head = s->next_free;
    uint32_t gen = s->gen + 1;
    memset(s, 0, sizeof *s);
    s->gen = gen;
    c->inflight++;
    return (int)i;
}

static void slot_free(struct fab_ctx *c, unsigned i)
{
    struct slot *s = &c->slots[i];
    s->kind = SLOT_FREE;
    s->next_free = c->free_head;
    c->free_head = (uint16_t)i;
    c->inflight--;
}

void ctx_complete(struct fab_ctx *c, unsigned i, int status)
{
    struct slot *s = &c->slots[i];
    if (s->kind == SLOT_FREE || s->done) return;
    if (status < 0 && s->status == 0) s->status = status;
    s->done = true;
    struct peer_ep *ep = &c->eps[s->node];
    if (s->kind == SLOT_CHAIN) ep->chains--;
    else ep->rpcs--;
    if (s->status < 0) {
        COUNT(c, s->owner, errors, 1);
        metrics_peer_add(s->node, MP_ERRORS, 1);
    }
    if (s->waiter) task_wake(s->waiter);
    if (s->discard) {
        c->discards--;
        slot_free(c, i);
        return;
    }
    if (!s->sync) {
        c->cq[(c->cq_head + c->cq_count) % FAB_MAX_INFLIGHT] = (uint16_t)i;
        c->cq_count++;
        s->owner->queued++;
    }
}

static void reply_hook(struct fab_ctx *c, const struct slot *s)
{
    if (c->reply_hook && s->kind == SLOT_CHAIN) c->reply_hook(c->reply_hook_arg, s->ops, s->n, s->status);
}

void fab_ctx_set_reply_hook(struct fab_ctx *c, fab_reply_hook fn, void *arg)
{
    c->reply_hook = fn;
    c->reply_hook_arg = arg;
}

/* Takes up to max of o's completions from the queue, in order; the others stay, in order. */
static int cq_take(struct fab_ctx *c, struct fab_owner *o, struct fab_cqe *out, int max)
{
    int n = 0;
    if (!o || !o->queued) return 0;
    unsigned keep = 0, count = c->cq_count;
    for (unsigned k = 0; k < count; k++) {
        unsigned i = c->cq[(c->cq_head + k) % FAB_MAX_INFLIGHT];
        struct slot *s = &c->slots[i];
        if (n < max && s->owner == o) {
            reply_hook(c, s);
            out[n].tag = s->tag;
            out[n].status = s->status;
            o->queued--;
            o->inflight--;
            slot_free(c, i);
            n++;
        } else {
            c->cq[(c->cq_head + keep++) % FAB_MAX_INFLIGHT] = (uint16_t)i;
        }
    }
    c->cq_count = keep;
    return n;
}

/* A task returned with slots of its own in flight or unreaped: those in flight complete into
 * nothing (discarded), those queued are freed now. */
static void orphan_slots(struct fab_ctx *c, struct fab_owner *o)
{
    unsigned keep = 0, count = c->cq_count;
    for (unsigned k = 0; k < count; k++) {
        unsigned i = c->cq[(c->cq_head + k) % FAB_MAX_INFLIGHT];
        if (c->slots[i].owner == o) slot_free(c, i);
        else c->cq[(c->cq_head + keep++) % FAB_MAX_INFLIGHT] = (uint16_t)i;
    }
    c->cq_count = keep;
    for (unsigned i = 0; i < FAB_MAX_INFLIGHT; i++) {
        struct slot *s = &c->slots[i];
        if (s->kind == SLOT_FREE || s->owner != o) continue;
        s->owner = &c->self;
        if (!s->sync && !s->discard) {
            s->discard = true;
            c->discards++;
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Endpoints */

static void ep_backoff(struct fabric *f, struct peer_ep *ep)
{
    int64_t b = BACKOFF_MIN_NS << (ep->fail_streak < 5 ? ep->fail_streak : 5);
    if (b > BACKOFF_MAX_NS) b = BACKOFF_MAX_NS;
    (void)f;
    ep->retry_after = clock_now_ns() + b;
    ep->fail_streak++;
}

/* Receives one handshake frame of the expected types into body (at most cap bytes). */
static int recv_hs_frame(int fd, struct wire_hdr *h, uint8_t *body, size_t cap, int64_t deadline)
{
    uint8_t hb[WIRE_HDR_SIZE];
    int rc = net_recv_all(fd, hb, sizeof hb, deadline);
    if (rc) return rc;
    wire_get_hdr(hb, h);
    if ((h->type != WIRE_HELLO_ACK && h->type != WIRE_AUTH_CHALLENGE) || h->len > cap)
        return RDKV_EPROTO;
    return net_recv_all(fd, body, h->len, deadline);
}

int fab_handshake(struct fabric *f, int fd, uint16_t node, uint16_t kind, int64_t deadline,
                  struct wire_hello_ack *ack, char *err, size_t errcap)
{
    struct wire_hello hello = {.magic = WIRE_MAGIC, .version = WIRE_VERSION, .kind = kind,
                               .src_node = f->node, .dst_node = node, .role = f->role,
                               .cluster_fp = f->cc->fingerprint, .incarnation = f->incarnation};
    if (f->o.endpoints_only) {
        hello.dst_node = FAB_NODE_ANY;
        hello.cluster_fp = 0;
    }
    /* An --insecure fabric proves nothing and asks for no proof. */
    const uint8_t *key = f->o.insecure ? NULL : auth_key(&f->keys, f->role);
    if (key) {
        hello.flags = WIRE_HELLO_F_AUTH;
        auth_nonce(hello.nonce);
    }
    uint8_t hb[WIRE_HDR_SIZE + WIRE_HELLO_SIZE];
    wire_put_hello(hb, &hello);
    int rc = net_send_all(fd, hb, sizeof hb, deadline);
    struct wire_hdr h;
    uint8_t body[WIRE_CHALLENGE_SIZE];
    if (!rc) rc = recv_hs_frame(fd, &h, body, sizeof body, deadline);
    bool challenged = !rc && h.type == WIRE_AUTH_CHALLENGE;
    if (challenged) {
        struct wire_challenge ch;
        uint8_t want[WIRE_MAC_SIZE];
        if (!key || wire_get_challenge(&h, body, &ch)) {
            snprintf(err, errcap, "malformed handshake from the node");
            return RDKV_EPROTO;
        }
        /* Mutual: the node proves the same key before we prove ours. */
        auth_mac(key, 'S', &hello, ch.nonce, want);
        if (!auth_mac_equal(want, ch.mac)) {
            snprintf(err, errcap, "the node could not prove it holds the cluster secret (is the "
                                  "secret file the cluster's?); not connecting");
            return RDKV_EPERM;
        }
        struct wire_auth a;
        auth_mac(key, 'C', &hello, ch.nonce, a.mac);
        uint8_t ab[WIRE_HDR_SIZE + WIRE_AUTH_SIZE];
        wire_put_auth(ab, &a);
        rc = net_send_all(fd, ab, sizeof ab, deadline);
        if (!rc) rc = recv_hs_frame(fd, &h, body, sizeof body, deadline);
        if (!rc && h.type != WIRE_HELLO_ACK) rc = RDKV_EPROTO;
    }
    if (rc) {
        snprintf(err, errcap, "handshake failed: %s", rdkv_strerror(rc));
        return rc;
    }
    if (wire_get_hello_ack(&h, body, ack)) {
        snprintf(err, errcap, "malformed handshake from the node");
        return RDKV_EPROTO;
    }
    if (ack->status == RDKV_EPERM) {
        snprintf(err, errcap, "refused us: %s (%s)", rdkv_strerror(ack->status),
                 key ? "is this the cluster's secret file, and the right one for this role?"
                     : "give the cluster's secret file: --secret-file or RDKV_SECRET_FILE");
        return RDKV_EPERM;
    }
    if (ack->status) {
        snprintf(err, errcap, "refused us: %s (do both sides use the same cluster config?)",
                 rdkv_strerror(ack->status));
        return ack->status;
    }
    if (key && !challenged) {
        /* An accepting HELLO_ACK without a challenge: a node that proves nothing (--insecure). */
        snprintf(err, errcap, "the node skipped the handshake's proof (an --insecure node?); "
                              "not connecting with a credential");
        return RDKV_EPERM;
    }
    if (ack->node != node && !f->o.endpoints_only) {
        snprintf(err, errcap, "answered as node %u (do both sides use the same cluster config?)",
                 ack->node);
        return RDKV_ECONFIG;
    }
    return 0;
}

int fab_echo_connect(struct fabric *f, uint16_t node, int64_t timeout_ns, int *fd_out, char *err,
                     size_t errcap)
{
    if (node >= f->nnodes) return RDKV_EINVAL;
    const struct cluster_node *nd = &f->cc->nodes[node];
    int64_t deadline = clock_now_ns() + timeout_ns;
    int fd = -1;
    int rc = net_connect(nd->host, nd->port, deadline, &fd, err, errcap);
    if (rc) return rc;
    struct wire_hello_ack ack;
    char why[256];
    rc = fab_handshake(f, fd, node, WIRE_KIND_ECHO, deadline, &ack, why, sizeof why);
    if (rc) {
        snprintf(err, errcap, "node %u: %s", node, why);
        close(fd);
        return rc;
    }
    *fd_out = fd;
    return 0;
}

int ctx_ep_up(struct fab_ctx *c, uint16_t node)
{
    struct fabric *f = c->f;
    struct peer_ep *ep = &c->eps[node];
    if (ep->state == EP_UP) return 0;
    if (clock_now_ns() < ep->retry_after) return RDKV_EUNAVAILABLE;
    const struct cluster_node *nd = &f->cc->nodes[node];
    char err[256];
    int fd = -1;
    int64_t deadline = clock_now_ns() + f->o.connect_timeout_ns;
    int rc = net_connect(nd->host, nd->port, deadline, &fd, err, sizeof err);
    if (rc) {
        log_debug("node %u: %s", node, err);
        ep_backoff(f, ep);
        return RDKV_EUNAVAILABLE;
    }
    struct wire_hello_ack ack;
    rc = fab_handshake(f, fd, node, WIRE_KIND_FABRIC, deadline, &ack, err, sizeof err);
    if (rc) {
        if (rc == RDKV_ECONFIG || rc == RDKV_EPROTO || rc == RDKV_EPERM)
            log_error("node %u at %s:%u: %s", node, nd->host, nd->port, err);
        else log_debug("node %u at %s:%u: %s", node, nd->host, nd->port, err);
        close(fd);
        ep_backoff(f, ep);
        return RDKV_EUNAVAILABLE;
    }
    struct cconn *cc = calloc(1, sizeof *cc);
    if (!cc) {
        close(fd);
        return RDKV_ENOMEM;
    }
    conn_init(&cc->c, fd, f->o.rpc_max_bytes);
    cc->ctx = c;
    cc->node = node;
    cc->next = c->conns;
    if (c->conns) c->conns->prev = cc;
    c->conns = cc;
    conn_arm_recv(&c->ring, &cc->c, CTX_BGID);
    c->pending_submit = true;
    ep->conn = &cc->c;
    ep->arena_size = ack.arena_size;
    ep->inc = ack.incarnation;
    ep->state = EP_UP;
    ep->fail_streak = 0;
    return 0;
}

int fab_peer_arena_size(struct fab_ctx *c, uint16_t node, uint64_t *size)
{
    if (node >= c->f->nnodes) return RDKV_EINVAL;
    int rc = ctx_ep_up(c, node);
    if (rc) return rc;
    *size = c->eps[node].arena_size;
    return 0;
}

int fab_peer_incarnation(struct fab_ctx *c, uint16_t node, bool connect, uint64_t *inc)
{
    if (node >= c->f->nnodes) return RDKV_EINVAL;
    if (c->eps[node].state != EP_UP && !connect) return RDKV_EUNAVAILABLE;
    int rc = ctx_ep_up(c, node);
    if (rc) return rc;
    *inc = c->eps[node].inc;
    return 0;
}

uint64_t *fab_pin(struct fab_ctx *c, uint64_t *incs)
{
    struct fab_owner *o = owner_of(c, incs != NULL);
    if (!o) return NULL;
    uint64_t *was = o->pin;
    o->pin = incs;
    return was;
}

uint64_t fab_pinned(struct fab_ctx *c, uint16_t node)
{
    struct fab_owner *o = owner_of(c, false);
    return o && o->pin && node < c->f->nnodes ? o->pin[node] : 0;
}

/* A post of owner o to node, whose endpoint is up: 0 when it may go (filling an empty pin), or
 * RDKV_EUNAVAILABLE when o is pinned to another incarnation of node. */
static int pin_check(struct fab_ctx *c, struct fab_owner *o, uint16_t node)
{
    if (!o->pin) return 0;
    uint64_t inc = c->eps[node].inc;
    if (!o->pin[node]) o->pin[node] = inc;
    return o->pin[node] == inc ? 0 : RDKV_EUNAVAILABLE;
}

void ctx_fail_peer(struct fab_ctx *c, uint16_t node, int status)
{
    struct peer_ep *ep = &c->eps[node];
    if (ep->conn) {
        conn_close(&c->ring, ep->conn);
        c->pending_submit = true;
        c->closing_conns++;
        ep->conn = NULL;
    }
    /* The backend drops what it holds for this peer (the soft transport fails its pieces in
     * flight); then every chain and RPC still open to this node fails. */
    if (c->f->be->peer_down) c->f->be->peer_down(c, node, status);
    if (ep->state == EP_UP && status != RDKV_ESHUTDOWN) ep_backoff(c->f, ep);
    ep->state = EP_DOWN;
    for (unsigned i = 0; i < FAB_MAX_INFLIGHT && (ep->chains || ep->rpcs); i++) {
        struct slot *s = &c->slots[i];
        if (s->kind != SLOT_FREE && !s->done && s->node == node) {
            if (s->kind == SLOT_CHAIN)
                for (unsigned k = 0; k < s->n; k++)
                    if (s->ops[k].status == 0 && s->status == 0) s->ops[k].status = status;
            ctx_complete(c, i, status);
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Posting */

static int validate_chain(struct fab_ctx *c, struct fab_op *ops, unsigned n)
{
    if (!ops || n == 0 || n > FAB_MAX_CHAIN) return RDKV_EINVAL;
    uint16_t node = rptr_node(ops[0].remote);
    if (node >= c->f->nnodes) return RDKV_EINVAL;
    for (unsigned i = 0; i < n; i++) {
        struct fab_op *o = &ops[i];
        if (rptr_node(o->remote) != node) return RDKV_EINVAL;
        switch (o->opcode) {
        case FAB_OP_READ:
        case FAB_OP_WRITE:
            if (o->len == 0 || !o->local || o->len > RPTR_OFF_MASK ||
                rptr_off(o->remote) > RPTR_OFF_MASK - o->len)
                return RDKV_EINVAL;
            break;
        case FAB_OP_CAS:
        case FAB_OP_FAA: break;
        default: return RDKV_EINVAL;
        }
    }
    return 0;
}

/* Starts a send of cn's gathered output (if none is in flight), counting the doorbell: true
 * when it prepared one. */
static bool ctx_flush(struct fab_ctx *c, struct conn *cn)
{
    bool was = cn->sending;
    conn_flush(&c->ring, cn);
    if (was || !cn->sending) return false;
    c->k.doorbells++;
    return true;
}

/* Sends what was appended to cn's output: now, or -- when a task of the attached scheduler posted
 * it -- at the end of the scheduler's round, together with what the other tasks post meanwhile
 * (ctx_round). */
void ctx_kick(struct fab_ctx *c, struct conn *cn, bool defer)
{
    if (defer) {
        c->flush_pending = true;
        return;
    }
    ctx_flush(c, cn);
    io_uring_submit(&c->ring);
    c->pending_submit = false;
}

static int post_chain(struct fab_ctx *c, struct fab_op *ops, unsigned n, uint64_t tag, bool sync,
                      int *slot_out)
{
    int rc = validate_chain(c, ops, n);
    if (rc) return rc;
    struct fab_owner *me = owner_of(c, true);
    if (!me) return RDKV_ENOMEM;
    int si = slot_alloc(c);
    if (si < 0) return RDKV_EBUSY;
    struct slot *s = &c->slots[si];
    s->kind = SLOT_CHAIN;
    s->sync = sync;
    s->tag = tag;
    s->ops = ops;
    s->n = n;
    s->node = rptr_node(ops[0].remote);
    s->deadline = clock_now_ns() + c->f->o.op_timeout_ns;
    s->owner = me;
    me->c = c;
    if (!sync) me->inflight++;
    uint64_t bytes = 0; /* READ and WRITE bytes of the chain */
    for (unsigned i = 0; i < n; i++) {
        ops[i].status = 0;
        ops[i].result = 0;
        switch (ops[i].opcode) {
        case FAB_OP_READ: COUNT(c, me, reads, 1); COUNT(c, me, bytes_read, ops[i].len); break;
        case FAB_OP_WRITE: COUNT(c, me, writes, 1); COUNT(c, me, bytes_written, ops[i].len); break;
        case FAB_OP_CAS: COUNT(c, me, cas, 1); break;
        case FAB_OP_FAA: COUNT(c, me, faa, 1); break;
        }
        if (ops[i].opcode == FAB_OP_READ || ops[i].opcode == FAB_OP_WRITE) bytes += ops[i].len;
    }
    COUNT(c, me, round_trips, 1);
    metrics_peer_add(s->node, MP_OPS, n);
    metrics_peer_add(s->node, MP_BYTES, bytes);
    c->eps[s->node].chains++;
    *slot_out = si;
    rc = ctx_ep_up(c, s->node);
    if (rc == 0) rc = pin_check(c, me, s->node);
    if (rc == 0) {
        bool defer = in_task(c);
        rc = c->f->be->post(c, (unsigned)si, defer);
        if (defer) c->flush_pending = true;
    }
    if (rc) {
        for (unsigned i = 0; i < n; i++)
            if (ops[i].status == 0) ops[i].status = rc;
        if (rc == RDKV_ENOMEM) ctx_fail_peer(c, s->node, rc);
        ctx_complete(c, (unsigned)si, rc);
    }
    return 0;
}

int fab_post(struct fab_ctx *c, struct fab_op *ops, unsigned n, uint64_t tag)
{
    int si;
    return post_chain(c, ops, n, tag, false, &si);
}

static int post_rpc(struct fab_ctx *c, uint16_t node, uint16_t type, const void *req, size_t len,
                    struct fab_buf *resp, int64_t timeout_ns, uint64_t tag, bool sync, bool discard,
                    int *slot_out)
{
    struct fabric *f = c->f;
    if (node >= f->nnodes || len > f->o.rpc_max_bytes || (len && !req)) return RDKV_EINVAL;
    struct fab_owner *me = owner_of(c, true);
    if (!me) return RDKV_ENOMEM;
    int si = slot_alloc(c);
    if (si < 0) return RDKV_EBUSY;
    struct slot *s = &c->slots[si];
    s->kind = SLOT_RPC;
    s->sync = sync;
    s->discard = discard;
    if (discard) c->discards++;
    s->tag = tag;
    s->node = node;
    s->resp = resp;
    if (resp) resp->len = 0;
    s->deadline = clock_now_ns() + (timeout_ns > 0 ? timeout_ns : f->o.rpc_timeout_ns);
    /* (a one-way message's answer may come after the task that sent it ended, and its record
     * with it: the slot is the context's own) */
    s->owner = discard ? &c->self : me;
    me->c = c;
    if (!sync && !discard) me->inflight++;
    /* a round trip: one chain or one RPC waited for (the verbs transport's own connection
     * set-up -- its ticket and its out-of-band exchange -- is not the caller's: neither an RPC
     * nor a round trip of its) */
    bool setup = type == FAB_RPC_VERBS_CONNECT || type == FAB_RPC_VERBS_TICKET;
    if (!setup) COUNT(c, me, rpcs, 1);
    if (!setup) metrics_peer_add(node, MP_RPCS, 1);
    if (!discard && !setup) COUNT(c, me, round_trips, 1);
    c->eps[node].rpcs++;
    *slot_out = si;
    int rc = ctx_ep_up(c, node);
    if (rc == 0) rc = pin_check(c, me, node);
    if (rc == 0) {
        uint8_t *p = conn_reserve(c->eps[node].conn, WIRE_HDR_SIZE + WIRE_RPC_SIZE + len);
        if (!p) {
            rc = RDKV_ENOMEM;
        } else {
            uint64_t id = ((uint64_t)s->gen << 16) | (unsigned)si;
            wire_put_rpc_req(p, id, type, (uint32_t)len);
            if (len) memcpy(p + WIRE_HDR_SIZE + WIRE_RPC_SIZE, req, len);
            if (sync && !discard && !in_task(c)) {
                /* a blocking call: its wait submits the send, in the system call that waits
                 * for the answer (one io_uring_enter per call, not two) */
                c->send_waits = ctx_flush(c, c->eps[node].conn);
                c->pending_submit = true;
            } else {
                ctx_kick(c, c->eps[node].conn, in_task(c));
            }
        }
    }
    if (rc) {
        if (rc == RDKV_ENOMEM) ctx_fail_peer(c, node, rc);
        ctx_complete(c, (unsigned)si, rc);
    }
    return 0;
}

int fab_rpc_post(struct fab_ctx *c, uint16_t node, uint16_t type, const void *req, size_t len,
                 struct fab_buf *resp, int64_t timeout_ns, uint64_t tag)
{
    int si;
    return post_rpc(c, node, type, req, len, resp, timeout_ns, tag, false, false, &si);
}

static bool out_drained(struct fab_ctx *c, void *arg)
{
    struct peer_ep *ep = &c->eps[(uint16_t)(uintptr_t)arg];
    if (ep->state != EP_UP || !ep->conn) return true;
    struct conn *cn = ep->conn;
    return cn->closing || (!cn->sending && !cn->out[cn->cur].len);
}

int fab_rpc_send(struct fab_ctx *c, uint16_t node, uint16_t type, const void *req, size_t len)
{
    int si;
    int rc = post_rpc(c, node, type, req, len, NULL, 0, 0, false, true, &si);
    /* A connection sends one buffer at a time: a message queued behind another send would
     * leave only when this thread next progresses its context, which may be much later (a
     * release sent by a thread that then goes idle). Push it into the socket now; the send
     * before it normally completed inline, so this costs one look at the completion queue. */
    if (rc == 0 && node < c->f->nnodes)
        wait_until(c, out_drained, (void *)(uintptr_t)node,
                   clock_now_ns() + c->f->o.op_timeout_ns);
    return rc;
}

int fab_buf_set(struct fab_buf *b, const void *p, size_t n)
{
    if (b->cap < n) {
        void *nd = realloc(b->data, n);
        if (!nd) return RDKV_ENOMEM;
        b->data = nd;
        b->cap = n;
    }
    if (n) memcpy(b->data, p, n);
    b->len = n;
    return 0;
}

void fab_buf_free(struct fab_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Receiving */

static int on_rpc_resp(struct fab_ctx *c, struct cconn *cc, const struct wire_hdr *h,
                       const uint8_t *body)
{
    struct wire_rpc r;
    const uint8_t *payload;
    size_t plen;
    if (wire_get_rpc(h, body, &r, &payload, &plen) || h->type != WIRE_RPC_RESP) return RDKV_EPROTO;
    unsigned si = (unsigned)(r.id & 0xFFFF);
    uint32_t gen = (uint32_t)(r.id >> 16);
    if (si >= FAB_MAX_INFLIGHT) return RDKV_EPROTO;
    struct slot *s = &c->slots[si];
    if (s->kind != SLOT_RPC || s->gen != gen || s->done || s->node != cc->node)
        return 0; /* a late answer to an RPC that already timed out */
    int status = r.status;
    if (s->resp && plen && fab_buf_set(s->resp, payload, plen)) {
        ctx_complete(c, si, RDKV_ENOMEM);
        return 0;
    }
    ctx_complete(c, si, status);
    return 0;
}

static int on_ctx_frame(void *arg, const struct wire_hdr *h, const uint8_t *body)
{
    struct cconn *cc = arg;
    if (cc->c.closing) return RDKV_ESHUTDOWN;
    if (h->type == WIRE_RPC_RESP) return on_rpc_resp(cc->ctx, cc, h, body);
    const struct fab_backend *be = cc->ctx->f->be;
    return be->on_frame ? be->on_frame(cc->ctx, cc->node, h, body) : RDKV_EPROTO;
}

static void ctx_on_recv(struct fab_ctx *c, struct cconn *cc, struct io_uring_cqe *cqe)
{
    if (!(cqe->flags & IORING_CQE_F_MORE)) {
        cc->c.recv_armed = false;
        cc->c.sqes--;
    }
    bool failed = false;
    int why = RDKV_EUNAVAILABLE;
    if (cqe->res > 0 && (cqe->flags & IORING_CQE_F_BUFFER)) {
        unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
        TSAN_WIRE_RECV();
        if (!cc->c.closing) {
            int rc = wire_asm_feed(&cc->c.in, bufring_buf(&c->br, bid), (size_t)cqe->res,
                                   on_ctx_frame, cc);
            if (rc && rc != RDKV_ESHUTDOWN) {
                failed = true;
                why = rc == RDKV_EPROTO ? RDKV_EPROTO : RDKV_EUNAVAILABLE;
                log_warn("node %u sent a malformed frame; dropping the connection", cc->node);
            }
        }
        bufring_recycle(&c->br, bid);
    } else if (cqe->res != -ENOBUFS) {
        failed = true; /* EOF or error: the peer is gone */
    }
    if (failed && !cc->c.closing) {
        ctx_fail_peer(c, cc->node, why);
    } else if (!cc->c.recv_armed && !cc->c.closing) {
        conn_arm_recv(&c->ring, &cc->c, CTX_BGID);
        c->pending_submit = true;
    }
}

/* Tasks: the read of the attached scheduler's eventfd, through which other threads' wakes end
 * the ring's wait. */
static void arm_wake(struct fab_ctx *c)
{
    if (!c->sched || c->wake_armed) return;
    struct io_uring_sqe *sqe = uring_sqe(&c->ring);
    io_uring_prep_read(sqe, sched_wake_fd(c->sched), &c->wake_buf, sizeof c->wake_buf, 0);
    io_uring_sqe_set_data64(sqe, ev_tag(&c->wake_buf, EV_WAKE));
    c->wake_armed = true;
    c->pending_submit = true;
}

/* Wakes the tasks waiting for any progress (they look again). */
static void wake_waiters(struct fab_ctx *c)
{
    struct ctx_waiter *w = c->waiters;
    c->waiters = NULL;
    for (; w; w = w->next) task_wake(w->t);
}

static void ctx_handle_cqe(struct fab_ctx *c, struct io_uring_cqe *cqe)
{
    uint64_t ud = io_uring_cqe_get_data64(cqe);
    switch (ev_kind_of(ud)) {
    case EV_RECV: ctx_on_recv(c, ev_ptr(ud), cqe); break;
    case EV_SEND: {
        struct cconn *cc = ev_ptr(ud);
        if (!conn_on_send(&cc->c, cqe->res)) {
            if (!cc->c.closing) ctx_fail_peer(c, cc->node, RDKV_EUNAVAILABLE);
        } else if (cc->c.dirty && !cc->c.closing) {
            ctx_flush(c, &cc->c);
            c->pending_submit = true;
        }
        break;
    }
    case EV_POLL:
        if (c->f->be->on_channel) c->f->be->on_channel(c, cqe->res);
        break;
    case EV_WAKE:
        c->wake_armed = false;
        arm_wake(c);
        break;
    default: break;
    }
}

/* Fails what ran past its deadline: a stuck one-sided chain resets its whole endpoint (as an RC
 * queue pair does after its retries), an RPC fails alone. */
static void check_deadlines(struct fab_ctx *c, int64_t now)
{
    int64_t next = now + 100 * NS_PER_MS;
    for (unsigned i = 0; i < FAB_MAX_INFLIGHT; i++) {
        struct slot *s = &c->slots[i];
        if (s->kind == SLOT_FREE || s->done) continue;
        if (s->deadline <= now) {
            if (s->kind == SLOT_CHAIN) ctx_fail_peer(c, s->node, RDKV_ETIMEDOUT);
            else ctx_complete(c, i, RDKV_ETIMEDOUT);
        } else if (s->deadline < next) {
            next = s->deadline;
        }
    }
    c->next_check = next;
}

#define SEND_WAIT_NS (20 * NS_PER_MS)

static int ctx_progress(struct fab_ctx *c, int64_t wait_ns)
{
    int r;
    if (wait_ns == 0) {
        if (c->pending_submit || io_uring_sq_ready(&c->ring)) io_uring_submit(&c->ring);
        r = io_uring_get_events(&c->ring);
    } else {
        struct io_uring_cqe *cqe;
        struct __kernel_timespec ts;
        /* A blocking RPC's send completes at once, inside this call: waiting for one completion
         * would return on it, and the answer would take a second call. So wait for two (the
         * send's and the answer's first), for at most SEND_WAIT_NS before looking again.
         * (send_waits: this request's own send was prepared, not one queued behind another,
         * which would leave only once this call returned with the earlier one's completion.) */
        unsigned nr = 1;
        if (c->send_waits && io_uring_sq_ready(&c->ring)) {
            nr = 2;
            if (wait_ns < 0 || wait_ns > SEND_WAIT_NS) wait_ns = SEND_WAIT_NS;
        }
        if (wait_ns > 0) {
            ts.tv_sec = wait_ns / NS_PER_S;
            ts.tv_nsec = wait_ns % NS_PER_S;
        }
        r = io_uring_submit_and_wait_timeout(&c->ring, &cqe, nr, wait_ns > 0 ? &ts : NULL, NULL);
    }
    (void)r;
    c->pending_submit = false;
    c->send_waits = false;
    struct io_uring_cqe *cqe;
    unsigned head, n = 0;
    io_uring_for_each_cqe(&c->ring, head, cqe)
    {
        ctx_handle_cqe(c, cqe);
        n++;
    }
    io_uring_cq_advance(&c->ring, n);
    if (c->f->be->poll) n += (unsigned)c->f->be->poll(c);
    if (n && c->waiters) wake_waiters(c);
    int64_t now = clock_now_ns();
    if (c->inflight && now >= c->next_check) check_deadlines(c, now);
    if (c->closing_conns) ctx_sweep(c);
    if (c->pending_submit) {
        io_uring_submit(&c->ring);
        c->pending_submit = false;
    }
    return (int)n;
}

static inline void cpu_relax(void) { __builtin_ia32_pause(); }

/* ------------------------------------------------------------------------------------------ */
/* The scheduler's hooks */

/* End of a round: everything the tasks appended leaves now, one send per peer. */
static void ctx_round(void *arg)
{
    struct fab_ctx *c = arg;
    if (!c->flush_pending) return;
    c->flush_pending = false;
    if (c->f->be->flush) c->f->be->flush(c);
    for (unsigned i = 0; i < c->f->nnodes; i++) {
        struct conn *cn = c->eps[i].conn;
        if (cn && cn->dirty) ctx_flush(c, cn);
    }
    io_uring_submit(&c->ring);
    c->pending_submit = false;
}

/* No task can run: progress, polling for spin_ns when something is in flight, then blocking in
 * the ring until a completion, another thread's wake, the next deadline check or wait_ns. */
static void ctx_idle(void *arg, int64_t wait_ns)
{
    struct fab_ctx *c = arg;
    if (wait_ns == 0) {
        ctx_progress(c, 0);
        return;
    }
    int64_t now = clock_now_ns();
    if (c->inflight) {
        int64_t spin_end = now + c->spin_ns;
        while (now < spin_end && (wait_ns < 0 || now < spin_end)) {
            if (ctx_progress(c, 0) > 0) return;
            cpu_relax();
            now = clock_now_ns();
        }
    }
    int64_t w = c->inflight ? c->next_check - now : -1;
    if (wait_ns > 0 && (w < 0 || wait_ns < w)) w = wait_ns;
    if (w >= 0 && w < 1000) w = 1000;
    if (c->f->be->arm) {
        c->f->be->arm(c);
        if (c->f->be->poll(c) > 0) return;
    }
    ctx_progress(c, w);
}

void fab_ctx_set_spin(struct fab_ctx *c, int64_t spin_ns) { c->spin_ns = spin_ns > 0 ? spin_ns : 0; }

void fab_ctx_attach(struct fab_ctx *c, struct sched *s)
{
    c->sched = s;
    if (!s) return;
    struct sched_hooks h = {.idle = ctx_idle, .round = ctx_round, .arg = c};
    sched_set_hooks(s, &h);
    arm_wake(c);
    io_uring_submit(&c->ring);
    c->pending_submit = false;
}

/* A task's wait: it parks until the context made progress (or the deadline), and looks again;
 * the scheduler's idle hook (ctx_idle) makes the progress. */
static bool task_wait_until(struct fab_ctx *c, bool (*cond)(struct fab_ctx *, void *), void *arg,
                            int64_t deadline)
{
    for (;;) {
        if (cond(c, arg)) return true;
        if (deadline >= 0 && clock_now_ns() >= deadline) return false;
        struct ctx_waiter w = {task_self(), c->waiters};
        c->waiters = &w;
        task_park(deadline >= 0 ? deadline : 0);
        for (struct ctx_waiter **pp = &c->waiters; *pp; pp = &(*pp)->next)
            if (*pp == &w) {
                *pp = w.next;
                break;
            }
    }
}

/* Waits until cond(c, arg) holds or the deadline passes: polls for spin_ns, then blocks. */
static bool wait_until(struct fab_ctx *c, bool (*cond)(struct fab_ctx *, void *), void *arg,
                       int64_t deadline)
{
    if (cond(c, arg)) return true;
    if (in_task(c)) return task_wait_until(c, cond, arg, deadline);
    int64_t start = clock_now_ns();
    int64_t spin_end = start + c->spin_ns;
    /* (no spin: straight to the blocking wait, which submits what is pending in the same
     * system call -- a polling pass first would cost two more) */
    bool spin = c->spin_ns > 0;
    for (;;) {
        if (spin) {
            ctx_progress(c, 0);
            if (cond(c, arg)) return true;
        }
        int64_t now = clock_now_ns();
        if (deadline >= 0 && now >= deadline) return false;
        if (spin && now < spin_end) {
            cpu_relax();
            continue;
        }
        /* Block, but wake for the next deadline check. */
        int64_t w = c->inflight ? c->next_check - now : 100 * NS_PER_MS;
        if (deadline >= 0 && deadline - now < w) w = deadline - now;
        if (w < 1000) w = 1000;
        if (c->f->be->arm) {
            c->f->be->arm(c);
            if (c->f->be->poll(c) > 0 && cond(c, arg)) return true;
        }
        ctx_progress(c, w);
        if (cond(c, arg)) return true;
    }
}

/* The caller (arg: its owner record) has a completion to take, or nothing in flight. */
static bool cq_nonempty(struct fab_ctx *c, void *arg)
{
    (void)c;
    const struct fab_owner *o = arg;
    return o->queued > 0 || o->inflight == 0;
}

int fab_poll(struct fab_ctx *c, struct fab_cqe *out, int max)
{
    if (max <= 0) return 0;
    struct fab_owner *me = owner_of(c, false);
    if (!me || !me->inflight) return 0;
    if (me->queued < (unsigned)max) ctx_progress(c, 0);
    return cq_take(c, me, out, max);
}

int fab_wait(struct fab_ctx *c, struct fab_cqe *out, int max, int64_t timeout_ns)
{
    if (max <= 0) return 0;
    struct fab_owner *me = owner_of(c, false);
    if (!me || !me->inflight) return 0;
    if (!me->queued) {
        int64_t deadline = timeout_ns < 0 ? -1 : clock_now_ns() + timeout_ns;
        wait_until(c, cq_nonempty, me, deadline);
    }
    return cq_take(c, me, out, max);
}

static bool slot_done(struct fab_ctx *c, void *arg)
{
    return c->slots[(unsigned)(uintptr_t)arg].done;
}

static int finish_sync(struct fab_ctx *c, int si)
{
    /* Every slot has a deadline, and deadlines fail it, so this returns. A task parks until
     * ctx_complete wakes it. */
    if (in_task(c)) {
        c->slots[si].waiter = task_self();
        while (!c->slots[si].done) task_park(0);
        c->slots[si].waiter = NULL;
    } else {
        wait_until(c, slot_done, (void *)(uintptr_t)si, -1);
    }
    reply_hook(c, &c->slots[si]);
    int st = c->slots[si].status;
    slot_free(c, (unsigned)si);
    return st;
}

int fab_exec(struct fab_ctx *c, struct fab_op *ops, unsigned n)
{
    int si;
    int rc = post_chain(c, ops, n, 0, true, &si);
    if (rc) return rc;
    return finish_sync(c, si);
}

int fab_read(struct fab_ctx *c, rptr src, void *dst, uint64_t len)
{
    struct fab_op o = fab_op_read(src, dst, len);
    return fab_exec(c, &o, 1);
}

int fab_write(struct fab_ctx *c, rptr dst, const void *src, uint64_t len)
{
    struct fab_op o = fab_op_write(dst, src, len);
    return fab_exec(c, &o, 1);
}

int fab_cas(struct fab_ctx *c, rptr dst, uint64_t expect, uint64_t desired, uint64_t *old)
{
    struct fab_op o = fab_op_cas(dst, expect, desired);
    int rc = fab_exec(c, &o, 1);
    if (old) *old = o.result;
    return rc;
}

int fab_faa(struct fab_ctx *c, rptr dst, uint64_t add, uint64_t *old)
{
    struct fab_op o = fab_op_faa(dst, add);
    int rc = fab_exec(c, &o, 1);
    if (old) *old = o.result;
    return rc;
}

int fab_rpc_call(struct fab_ctx *c, uint16_t node, uint16_t type, const void *req, size_t len,
                 struct fab_buf *resp, int64_t timeout_ns)
{
    int si;
    int rc = post_rpc(c, node, type, req, len, resp, timeout_ns, 0, true, false, &si);
    if (rc) return rc;
    return finish_sync(c, si);
}
