/* The node service. One thread owns an io_uring and every accepted connection: it answers
 * handshakes, hands soft one-sided requests to the soft NIC (rdma/soft/nic.c), which executes them
 * against the arena on this thread (no application thread takes part), and hands RPCs to the RPC
 * threads, whose replies come back through a queue and an eventfd. It blocks in io_uring_enter
 * when there is nothing to do. */
#include "internal.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/tsan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define SVC_RING_ENTRIES 512
#define SVC_BUFS 64
#define SVC_BUFSZ (64u << 10)
#define SVC_BGID 1

struct sconn {
    struct conn c; /* first: user_data points at it */
    struct svc *svc;
    struct sconn *prev, *next;
    uint16_t peer;
    bool hello_done;
    bool qp_error;    /* the soft NIC's error state: flush everything until WIRE_OP_RESET */
    bool echo;        /* hand the socket to an echo thread once the recv is cancelled */
    int reqs;         /* RPC requests that still owe a reply on this connection */
    uint64_t id;
};

struct fab_rpc_req {
    struct fab_rpc_req *next;
    struct sconn *conn;
    struct fabric *f;
    uint64_t id;
    uint16_t type;
    uint16_t src;
    size_t len;
    uint8_t *data;
    /* reply, filled by fab_rpc_reply from another thread */
    uint8_t *frame;
    size_t frame_len;
};

struct echo_thread {
    struct echo_thread *next;
    pthread_t thr;
    int fd;
    struct wire_hello_ack ack;
    _Atomic bool done;
};

struct svc {
    struct fabric *f;
    pthread_t thr;
    struct io_uring ring;
    struct bufring br;
    int listen_fd;
    int wake_fd;
    uint64_t wake_buf;
    _Atomic bool stop;
    struct sconn *conns;
    uint64_t next_conn_id;
    bool accept_armed;
    /* start-up handshake */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int start_rc;
    bool started;
    char start_err[256];
    /* replies from RPC threads */
    pthread_mutex_t reply_mu;
    struct fab_rpc_req *replies, **replies_tail;
    /* RPC threads */
    pthread_t *workers;
    unsigned nworkers;
    pthread_mutex_t q_mu;
    pthread_cond_t q_cv;
    struct fab_rpc_req *q_head, **q_tail;
    bool q_stop;
    /* echo threads */
    struct echo_thread *echoes;
};

static __thread struct svc *tls_svc; /* set on the service thread */

/* ------------------------------------------------------------------------------------------ */
/* Replies */

static void req_free(struct fab_rpc_req *r)
{
    free(r->frame);
    free(r);
}

/* Appends a finished reply to its connection (service thread only). */
static void deliver_reply(struct svc *s, struct fab_rpc_req *r)
{
    struct sconn *sc = r->conn;
    sc->reqs--;
    if (!sc->c.closing && r->frame_len) {
        uint8_t *p = conn_reserve(&sc->c, r->frame_len);
        if (p) memcpy(p, r->frame, r->frame_len);
        else conn_close(&s->ring, &sc->c);
    }
    req_free(r);
}

const void *fab_rpc_data(const struct fab_rpc_req *req) { return req->data; }
size_t fab_rpc_len(const struct fab_rpc_req *req) { return req->len; }
uint16_t fab_rpc_src(const struct fab_rpc_req *req) { return req->src; }
uint64_t svc_req_conn_id(const struct fab_rpc_req *req) { return req->conn->id; }
uint64_t fab_rpc_conn(const struct fab_rpc_req *req) { return req->conn->id; }

void fab_on_conn_gone(struct fabric *f, fab_conn_gone_fn fn, void *arg)
{
    atomic_store(&f->conn_gone_arg, arg);
    atomic_store(&f->conn_gone_fn, fn);
}

/* Connection id is gone: the backend's and the upper layers' state for it goes. */
static void conn_gone(struct fabric *f, uint64_t id)
{
    if (f->be->conn_gone) f->be->conn_gone(f, id);
    fab_conn_gone_fn fn = atomic_load(&f->conn_gone_fn);
    if (fn) fn(atomic_load(&f->conn_gone_arg), id);
}

void fab_rpc_reply(struct fab_rpc_req *req, int status, const void *data, size_t len)
{
    struct svc *s = req->conn->svc;
    if (status > 0) status = RDKV_EINVAL;
    if (len > req->f->o.rpc_max_bytes) {
        status = RDKV_ETOOBIG;
        len = 0;
    }
    if (!data) len = 0;
    req->frame = malloc(WIRE_HDR_SIZE + WIRE_RPC_SIZE + len);
    if (!req->frame) {
        status = RDKV_ENOMEM;
        len = 0;
        req->frame = malloc(WIRE_HDR_SIZE + WIRE_RPC_SIZE);
    }
    if (req->frame) {
        wire_put_rpc_resp(req->frame, req->id, status, (uint32_t)len);
        if (len) memcpy(req->frame + WIRE_HDR_SIZE + WIRE_RPC_SIZE, data, len);
        req->frame_len = WIRE_HDR_SIZE + WIRE_RPC_SIZE + len;
    } else {
        req->frame_len = 0; /* out of memory: the caller will time out */
    }
    if (tls_svc == s) {
        deliver_reply(s, req);
        return;
    }
    pthread_mutex_lock(&s->reply_mu);
    req->next = NULL;
    *s->replies_tail = req;
    s->replies_tail = &req->next;
    pthread_mutex_unlock(&s->reply_mu);
    uint64_t one = 1;
    ssize_t w = write(s->wake_fd, &one, sizeof one);
    (void)w;
}

static void drain_replies(struct svc *s)
{
    pthread_mutex_lock(&s->reply_mu);
    struct fab_rpc_req *r = s->replies;
    s->replies = NULL;
    s->replies_tail = &s->replies;
    pthread_mutex_unlock(&s->reply_mu);
    while (r) {
        struct fab_rpc_req *next = r->next;
        deliver_reply(s, r);
        r = next;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* RPC threads */

static void *worker_main(void *arg)
{
    struct svc *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->q_mu);
        while (!s->q_head && !s->q_stop) pthread_cond_wait(&s->q_cv, &s->q_mu);
        if (s->q_stop) {
            pthread_mutex_unlock(&s->q_mu);
            return NULL;
        }
        struct fab_rpc_req *r = s->q_head;
        s->q_head = r->next;
        if (!s->q_head) s->q_tail = &s->q_head;
        pthread_mutex_unlock(&s->q_mu);
        struct rpc_entry *e = &s->f->rpc[r->type];
        fab_rpc_handler fn = atomic_load_explicit(&e->fn, memory_order_acquire);
        fab_rpc_hook hook = atomic_load_explicit(&s->f->rpc_hook_fn, memory_order_acquire);
        if (!hook) {
            fn(r, e->arg);
            continue;
        }
        void *harg = atomic_load_explicit(&s->f->rpc_hook_arg, memory_order_acquire);
        uint16_t type = r->type, src = r->src; /* r is gone once the handler replied */
        hook(harg, type, src, false);
        fn(r, e->arg);
        hook(harg, type, src, true);
    }
}

static void dispatch_rpc(struct svc *s, struct sconn *sc, const struct wire_hdr *h,
                         const uint8_t *body)
{
    struct wire_rpc w;
    const uint8_t *payload;
    size_t plen;
    if (wire_get_rpc(h, body, &w, &payload, &plen) || h->type != WIRE_RPC_REQ) {
        conn_close(&s->ring, &sc->c);
        return;
    }
    struct fab_rpc_req *r = calloc(1, sizeof *r + plen + 1);
    if (!r) {
        conn_close(&s->ring, &sc->c);
        return;
    }
    r->conn = sc;
    r->f = s->f;
    r->id = w.id;
    r->type = w.type;
    r->src = sc->peer;
    r->len = plen;
    r->data = (uint8_t *)(r + 1);
    memcpy(r->data, payload, plen);
    sc->reqs++;
    fab_rpc_handler fn = NULL;
    unsigned flags = 0;
    if (w.type < FAB_RPC_MAX_TYPES) {
        struct rpc_entry *e = &s->f->rpc[w.type];
        fn = atomic_load_explicit(&e->fn, memory_order_acquire);
        flags = e->flags;
    }
    if (!fn) {
        fab_rpc_reply(r, RDKV_ENOHANDLER, NULL, 0);
        return;
    }
    if ((flags & FAB_RPC_INLINE) ||
        ((flags & FAB_RPC_FAST) &&
         !atomic_load_explicit(&s->f->rpc_hook_fn, memory_order_acquire))) {
        fn(r, s->f->rpc[w.type].arg);
        return;
    }
    pthread_mutex_lock(&s->q_mu);
    r->next = NULL;
    *s->q_tail = r;
    s->q_tail = &r->next;
    pthread_cond_signal(&s->q_cv);
    pthread_mutex_unlock(&s->q_mu);
}

/* ------------------------------------------------------------------------------------------ */
/* Echo baseline: a plain blocking thread, no io_uring, no fabric framing. */

static void *echo_main(void *arg)
{
    struct echo_thread *e = arg;
    uint8_t ack[WIRE_HDR_SIZE + WIRE_HELLO_ACK_SIZE];
    wire_put_hello_ack(ack, &e->ack);
    if (send(e->fd, ack, sizeof ack, MSG_NOSIGNAL) == (ssize_t)sizeof ack) {
        uint8_t m[8];
        for (;;) {
            ssize_t r = recv(e->fd, m, sizeof m, MSG_WAITALL);
            if (r != (ssize_t)sizeof m) break;
            if (send(e->fd, m, sizeof m, MSG_NOSIGNAL) != (ssize_t)sizeof m) break;
        }
    }
    atomic_store(&e->done, true);
    return NULL;
}

static void start_echo(struct svc *s, struct sconn *sc)
{
    struct echo_thread *e = calloc(1, sizeof *e);
    if (!e) return;
    e->fd = dup(sc->c.fd);
    if (e->fd < 0) {
        free(e);
        return;
    }
    e->ack.status = 0;
    e->ack.node = s->f->node;
    e->ack.transport = (uint16_t)s->f->transport;
    e->ack.arena_size = s->f->arena_size;
    e->ack.cluster_fp = s->f->cc->fingerprint;
    /* Reap finished echo threads first. */
    for (struct echo_thread **pp = &s->echoes; *pp;) {
        struct echo_thread *x = *pp;
        if (atomic_load(&x->done)) {
            pthread_join(x->thr, NULL);
            close(x->fd);
            *pp = x->next;
            free(x);
        } else {
            pp = &x->next;
        }
    }
    if (pthread_create(&e->thr, NULL, echo_main, e)) {
        close(e->fd);
        free(e);
        return;
    }
    e->next = s->echoes;
    s->echoes = e;
}

/* ------------------------------------------------------------------------------------------ */
/* Connections */

static void sconn_new(struct svc *s, int fd)
{
    struct sconn *sc = calloc(1, sizeof *sc);
    if (!sc) {
        close(fd);
        return;
    }
    net_tune(fd);
    conn_init(&sc->c, fd, s->f->o.rpc_max_bytes);
    sc->svc = s;
    sc->peer = FAB_NODE_CLIENT;
    sc->id = ++s->next_conn_id;
    sc->next = s->conns;
    if (s->conns) s->conns->prev = sc;
    s->conns = sc;
    conn_arm_recv(&s->ring, &sc->c, SVC_BGID);
}

static void sconn_maybe_free(struct svc *s, struct sconn *sc)
{
    if (!sc->c.closing || sc->c.sqes > 0 || sc->reqs > 0) return;
    if (sc->prev) sc->prev->next = sc->next;
    else s->conns = sc->next;
    if (sc->next) sc->next->prev = sc->prev;
    conn_gone(s->f, sc->id);
    conn_fini(&sc->c);
    free(sc);
}

static void handle_hello(struct svc *s, struct sconn *sc, const struct wire_hdr *h,
                         const uint8_t *body)
{
    struct fabric *f = s->f;
    struct wire_hello hello;
    struct wire_hello_ack ack = {.status = 0, .node = f->node, .transport = (uint16_t)f->transport,
                                 .arena_size = f->arena_size, .cluster_fp = f->cc->fingerprint};
    if (wire_get_hello(h, body, &hello) || hello.version != WIRE_VERSION) {
        ack.status = RDKV_EPROTO;
    } else if (hello.dst_node != f->node &&
               !(hello.dst_node == FAB_NODE_ANY && hello.src_node == FAB_NODE_CLIENT)) {
        ack.status = RDKV_ECONFIG; /* the caller dialled another node's address */
    } else if (hello.cluster_fp && hello.cluster_fp != f->cc->fingerprint) {
        ack.status = RDKV_ECONFIG; /* different cluster configs */
    } else if (hello.kind != WIRE_KIND_FABRIC && hello.kind != WIRE_KIND_ECHO) {
        ack.status = RDKV_EPROTO;
    }
    if (ack.status == 0 && hello.kind == WIRE_KIND_ECHO) {
        sc->echo = true;
        sc->hello_done = true;
        /* The echo thread sends the ack once the recv is cancelled and it owns the socket. */
        struct io_uring_sqe *sqe = uring_sqe(&s->ring);
        io_uring_prep_cancel64(sqe, ev_tag(&sc->c, EV_RECV), 0);
        io_uring_sqe_set_data64(sqe, EV_IGNORE);
        return;
    }
    uint8_t *p = conn_reserve(&sc->c, WIRE_HDR_SIZE + WIRE_HELLO_ACK_SIZE);
    if (!p) {
        conn_close(&s->ring, &sc->c);
        return;
    }
    wire_put_hello_ack(p, &ack);
    if (ack.status) {
        /* Flush the refusal, then close: the caller reads a clear reason. */
        conn_flush(&s->ring, &sc->c);
        sc->c.closing = true;
        shutdown(sc->c.fd, SHUT_RD);
        return;
    }
    sc->hello_done = true;
    sc->peer = hello.src_node;
}

static int on_frame(void *arg, const struct wire_hdr *h, const uint8_t *body)
{
    struct sconn *sc = arg;
    struct svc *s = sc->svc;
    if (sc->c.closing || sc->echo) return RDKV_ESHUTDOWN;
    if (!sc->hello_done) {
        if (h->type != WIRE_HELLO) return RDKV_EPROTO;
        handle_hello(s, sc, h, body);
        return 0;
    }
    switch (h->type) {
    case WIRE_OP_REQ: soft_nic_exec(s->f, &s->ring, &sc->c, &sc->qp_error, h, body); break;
    case WIRE_OP_RESET: sc->qp_error = false; break;
    case WIRE_RPC_REQ: dispatch_rpc(s, sc, h, body); break;
    default: return RDKV_EPROTO;
    }
    return sc->c.closing ? RDKV_ESHUTDOWN : 0;
}

static void on_recv(struct svc *s, struct sconn *sc, struct io_uring_cqe *cqe)
{
    bool more = cqe->flags & IORING_CQE_F_MORE;
    if (!more) {
        sc->c.recv_armed = false;
        sc->c.sqes--;
    }
    if (cqe->res > 0 && (cqe->flags & IORING_CQE_F_BUFFER)) {
        unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
        TSAN_WIRE_RECV();
        if (!sc->c.closing && !sc->echo) {
            int rc = wire_asm_feed(&sc->c.in, bufring_buf(&s->br, bid), (size_t)cqe->res,
                                   on_frame, sc);
            if (rc && rc != RDKV_ESHUTDOWN) {
                log_debug("connection from node %u: %s; closing it", sc->peer, rdkv_strerror(rc));
                conn_close(&s->ring, &sc->c);
            }
        }
        bufring_recycle(&s->br, bid);
    } else if (cqe->res == -ENOBUFS) {
        /* all buffers busy for a moment: re-arm below */
    } else if (!sc->echo || cqe->res != -ECANCELED) {
        if (!sc->c.closing) conn_close(&s->ring, &sc->c); /* EOF or error */
    }
    if (!sc->c.recv_armed) {
        if (sc->echo && !sc->c.closing) {
            start_echo(s, sc);
            sc->c.closing = true; /* our copy of the fd closes when it is freed */
        } else if (!sc->c.closing) {
            conn_arm_recv(&s->ring, &sc->c, SVC_BGID);
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The loop */

static void arm_accept(struct svc *s)
{
    struct io_uring_sqe *sqe = uring_sqe(&s->ring);
    io_uring_prep_multishot_accept(sqe, s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, ev_tag(s, EV_ACCEPT));
    s->accept_armed = true;
}

static void arm_wake(struct svc *s)
{
    struct io_uring_sqe *sqe = uring_sqe(&s->ring);
    io_uring_prep_read(sqe, s->wake_fd, &s->wake_buf, sizeof s->wake_buf, 0);
    io_uring_sqe_set_data64(sqe, ev_tag(&s->wake_buf, EV_WAKE));
}

static void handle_cqe(struct svc *s, struct io_uring_cqe *cqe)
{
    uint64_t ud = io_uring_cqe_get_data64(cqe);
    switch (ev_kind_of(ud)) {
    case EV_ACCEPT:
        if (cqe->res >= 0) sconn_new(s, cqe->res);
        else if (cqe->res != -ECANCELED) log_warn("accept: %s", strerror(-cqe->res));
        if (!(cqe->flags & IORING_CQE_F_MORE)) s->accept_armed = false;
        break;
    case EV_RECV: on_recv(s, ev_ptr(ud), cqe); break;
    case EV_SEND: {
        struct sconn *sc = ev_ptr(ud);
        if (!conn_on_send(&sc->c, cqe->res) && !sc->c.closing) conn_close(&s->ring, &sc->c);
        break;
    }
    case EV_WAKE:
        drain_replies(s);
        if (!atomic_load(&s->stop)) arm_wake(s);
        break;
    default: break;
    }
}

static void *svc_main(void *arg)
{
    struct svc *s = arg;
    tls_svc = s;
    int rc = uring_setup(&s->ring, SVC_RING_ENTRIES, s->start_err, sizeof s->start_err);
    if (!rc) {
        rc = bufring_init(&s->ring, &s->br, SVC_BGID, SVC_BUFS, SVC_BUFSZ);
        if (rc) {
            snprintf(s->start_err, sizeof s->start_err,
                     "io_uring provided-buffer rings unavailable (kernel 5.19+ needed)");
            uring_exit(&s->ring);
        }
    }
    pthread_mutex_lock(&s->mu);
    s->start_rc = rc;
    s->started = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (rc) return NULL;

    arm_accept(s);
    arm_wake(s);
    while (!atomic_load(&s->stop)) {
        if (!s->accept_armed) arm_accept(s);
        int r = io_uring_submit_and_wait(&s->ring, 1);
        if (r < 0 && r != -EINTR && r != -ETIME && r != -EBUSY) {
            log_error("service loop: io_uring_submit_and_wait: %s", strerror(-r));
            break;
        }
        struct io_uring_cqe *cqe;
        unsigned head, n = 0;
        io_uring_for_each_cqe(&s->ring, head, cqe)
        {
            handle_cqe(s, cqe);
            n++;
        }
        io_uring_cq_advance(&s->ring, n);
        /* Send what the batch produced, and free finished connections. */
        for (struct sconn *sc = s->conns, *next; sc; sc = next) {
            next = sc->next;
            if (sc->c.dirty) conn_flush(&s->ring, &sc->c);
            sconn_maybe_free(s, sc);
        }
    }
    /* Shut down: close every connection and wait for their operations to finish. */
    for (struct sconn *sc = s->conns; sc; sc = sc->next) conn_close(&s->ring, &sc->c);
    if (s->accept_armed) {
        struct io_uring_sqe *sqe = uring_sqe(&s->ring);
        io_uring_prep_cancel64(sqe, ev_tag(s, EV_ACCEPT), 0);
        io_uring_sqe_set_data64(sqe, EV_IGNORE);
    }
    int64_t deadline = clock_now_ns() + 2 * NS_PER_S;
    for (;;) {
        bool busy = false;
        for (struct sconn *sc = s->conns; sc; sc = sc->next)
            if (sc->c.sqes > 0) busy = true;
        if (!busy || clock_now_ns() > deadline) break;
        struct __kernel_timespec ts = {.tv_sec = 0, .tv_nsec = 50 * NS_PER_MS};
        struct io_uring_cqe *cqe;
        io_uring_submit_and_wait_timeout(&s->ring, &cqe, 1, &ts, NULL);
        unsigned head, n = 0;
        io_uring_for_each_cqe(&s->ring, head, cqe)
        {
            uint64_t ud = io_uring_cqe_get_data64(cqe);
            enum ev_kind k = ev_kind_of(ud);
            if (k == EV_RECV || k == EV_SEND) {
                struct sconn *sc = ev_ptr(ud);
                if (k == EV_SEND) conn_on_send(&sc->c, cqe->res);
                else if (!(cqe->flags & IORING_CQE_F_MORE)) {
                    sc->c.recv_armed = false;
                    sc->c.sqes--;
                }
                if (k == EV_RECV && (cqe->flags & IORING_CQE_F_BUFFER))
                    bufring_recycle(&s->br, cqe->flags >> IORING_CQE_BUFFER_SHIFT);
            }
            n++;
        }
        io_uring_cq_advance(&s->ring, n);
    }
    /* Whatever is still in flight is cancelled by the ring's exit, before any buffer goes. */
    uring_exit(&s->ring);
    for (struct sconn *sc = s->conns, *n; sc; sc = n) {
        n = sc->next;
        conn_gone(s->f, sc->id);
        conn_fini(&sc->c);
        free(sc);
    }
    s->conns = NULL;
    munmap(s->br.br, s->br.map_size);
    return NULL;
}

int svc_start(struct fabric *f, int listen_fd, char *err, size_t errcap)
{
    struct svc *s = calloc(1, sizeof *s);
    if (!s) return RDKV_ENOMEM;
    s->f = f;
    s->listen_fd = listen_fd;
    s->wake_fd = eventfd(0, EFD_CLOEXEC);
    s->replies_tail = &s->replies;
    s->q_tail = &s->q_head;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_mutex_init(&s->reply_mu, NULL);
    pthread_mutex_init(&s->q_mu, NULL);
    pthread_cond_init(&s->q_cv, NULL);
    if (s->wake_fd < 0) {
        snprintf(err, errcap, "eventfd: %s", strerror(errno));
        free(s);
        return RDKV_EIO;
    }
    if (pthread_create(&s->thr, NULL, svc_main, s)) {
        snprintf(err, errcap, "cannot start the service thread");
        close(s->wake_fd);
        free(s);
        return RDKV_ENOMEM;
    }
    pthread_mutex_lock(&s->mu);
    while (!s->started) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    if (s->start_rc) {
        pthread_join(s->thr, NULL);
        snprintf(err, errcap, "%s", s->start_err);
        close(s->wake_fd);
        int rc = s->start_rc;
        free(s);
        return rc;
    }
    s->nworkers = f->o.rpc_threads;
    s->workers = calloc(s->nworkers, sizeof *s->workers);
    for (unsigned i = 0; s->workers && i < s->nworkers; i++) {
        if (pthread_create(&s->workers[i], NULL, worker_main, s)) {
            s->nworkers = i;
            break;
        }
    }
    f->svc = s;
    return 0;
}

void svc_stop(struct fabric *f)
{
    struct svc *s = f->svc;
    if (!s) return;
    /* RPC threads first: they finish the handler they are running. */
    pthread_mutex_lock(&s->q_mu);
    s->q_stop = true;
    pthread_cond_broadcast(&s->q_cv);
    pthread_mutex_unlock(&s->q_mu);
    for (unsigned i = 0; i < s->nworkers; i++) pthread_join(s->workers[i], NULL);
    free(s->workers);
    atomic_store(&s->stop, true);
    uint64_t one = 1;
    ssize_t w = write(s->wake_fd, &one, sizeof one);
    (void)w;
    pthread_join(s->thr, NULL);
    /* Requests never run and replies never delivered. */
    for (struct fab_rpc_req *r = s->q_head, *n; r; r = n) {
        n = r->next;
        req_free(r);
    }
    for (struct fab_rpc_req *r = s->replies, *n; r; r = n) {
        n = r->next;
        req_free(r);
    }
    for (struct echo_thread *e = s->echoes, *n; e; e = n) {
        n = e->next;
        shutdown(e->fd, SHUT_RDWR);
        pthread_join(e->thr, NULL);
        close(e->fd);
        free(e);
    }
    close(s->wake_fd);
    close(s->listen_fd);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->reply_mu);
    pthread_mutex_destroy(&s->q_mu);
    pthread_cond_destroy(&s->q_cv);
    free(s);
    f->svc = NULL;
}
