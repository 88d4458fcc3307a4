/* The node service. One thread owns an io_uring and every accepted connection: it answers
 * handshakes, hands soft one-sided requests to the soft NIC (rdma/soft/nic.c), which executes them
 * against the arena on this thread (no application thread takes part), and hands RPCs to the RPC
 * threads, whose replies come back through a queue and an eventfd. It blocks in io_uring_enter
 * when there is nothing to do. */
#include "internal.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/tsan.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
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

/* Resource bounds (fab_opts; docs/security.md, "Resource bounds"). */
#define SVC_OUT_MAX_DEFAULT (4u << 20)
#define SVC_CONN_MAX_DEFAULT 1024u
#define SVC_HELLO_TIMEOUT_DEFAULT (5 * NS_PER_S)
/* RPC requests of one connection running at once (a peer's context has at most
 * FAB_MAX_INFLIGHT in flight, so a well-behaved one never waits here). */
#define SVC_CONN_MAX_REQS FAB_MAX_INFLIGHT
/* Input received after a connection was paused, before its recv's cancel took effect: at most
 * what one pass of the loop can receive (the buffer ring); more means something is wrong. */
#define SVC_PEND_MAX ((size_t)SVC_BUFS * SVC_BUFSZ * 2)
#define SVC_TICK_NS (500 * NS_PER_MS)
/* A paused connection whose peer has taken none of its replies for this long is closed: the
 * output it pins is released (a live peer reads continuously). */
#define SVC_STALL_NS (60 * NS_PER_S)
#define SVC_ACCEPT_BACKOFF_MIN (50 * NS_PER_MS)
#define SVC_ACCEPT_BACKOFF_MAX (2 * NS_PER_S)
#define SVC_ACCEPT_LOG_EVERY (10 * NS_PER_S)
/* Echo connections (the raw TCP baseline of kvbench fabric) open at once: each is a thread of
 * its own, so they have a small cap besides counting against conn_max. Only nodes and operator
 * tools (the node key) may open one; kvbench opens one at a time. */
#define SVC_ECHO_MAX 16u
#define SVC_ECHO_STACK (64u << 10) /* an echo thread's stack: it needs a few KiB (a log line) */

struct sconn {
    struct conn c; /* first: user_data points at it */
    struct svc *svc;
    struct sconn *prev, *next;
    uint16_t peer;
    uint64_t peer_inc; /* the caller's incarnation (its HELLO) */
    bool hello_done;
    uint8_t role;     /* WIRE_ROLE_*: what the handshake proved (claimed, on an --insecure node) */
    bool auth_wait;   /* HELLO answered with a challenge: the next frame must be AUTH */
    struct wire_hello hello;              /* while auth_wait: the claims being proven */
    uint8_t nonce[WIRE_NONCE_SIZE];       /* while auth_wait: our challenge */
    bool qp_error;    /* the backend NIC's error state (exec): flush all until WIRE_OP_RESET */
    bool fence_said;  /* the log said that this connection's process is fenced */
    bool echo;        /* hand the socket to an echo thread once the recv is cancelled */
    bool echo_pending; /* counted in svc.echo_pending until its thread starts or it goes */
    _Atomic int reqs; /* RPC requests that still owe a reply on this connection */
    uint64_t id;
    /* backpressure: while the connection's queued output and running requests are over the
     * cap, its recv is cancelled and what arrived meanwhile waits, unparsed, in pend */
    bool paused;
    bool authed;      /* the pre-authentication frame limit was lifted */
    int refuse;       /* over the connection cap: answer the first frame with this, then close */
    _Atomic size_t req_bytes; /* payload bytes of the requests that owe a reply */
    /* Direct replies (client connections): a reply made on another thread is sent on the socket
     * by that thread, sparing the service thread a wake-up, while `direct` says that nothing of
     * the connection's output is in the service thread's hands -- nothing gathered or being
     * sent, no reply queued for it (`queued`), not paused. The service thread clears `direct`
     * (under out_mu) before it touches the output and sets it again once all of it is out;
     * `given` is its own copy, so that the steady state takes no lock. */
    pthread_mutex_t out_mu;
    bool direct;      /* out_mu */
    unsigned queued;  /* out_mu: replies in svc.replies for this connection */
    bool given;       /* service thread: direct is (or may be) true */
    struct obuf pend;
    size_t pend_off;
    int64_t born_ns, last_rx_ns;
    int64_t progress_ns; /* when it was paused, or last sent something while paused */
};

struct fab_rpc_req {
    struct fab_rpc_req *next;
    struct sconn *conn;
    struct fabric *f;
    uint64_t id;
    uint16_t type;
    uint16_t src;
    uint64_t src_inc; /* the caller's incarnation, from its HELLO */
    bool client;  /* arrived on a client-role connection */
    size_t len;
    uint8_t *data;
    /* reply, filled by fab_rpc_reply from another thread */
    uint8_t *frame;
    size_t frame_len;
    size_t frame_off; /* bytes of it already sent by a direct reply */
};

struct echo_thread {
    struct echo_thread *next;
    pthread_t thr;
    int fd;
    uint64_t conn;     /* the connection's id, for the log */
    int64_t idle_ns;   /* closed after this long with nothing received (<= 0: never) */
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
    _Atomic bool held; /* fab_opts.serve_later: no accept until fab_serve */
    struct sconn *conns;
    uint64_t next_conn_id;
    bool accept_armed;
    /* start-up handshake; and svc_sync's (sync_req asked, sync_seen passed) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t sync_req, sync_seen;
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
    /* echo threads (service thread): running or finished and not yet joined, and echo
     * connections accepted whose thread is not started yet; both count against conn_max and
     * SVC_ECHO_MAX */
    struct echo_thread *echoes;
    unsigned nechoes, echo_pending;
    /* bounds and timers */
    unsigned nconns;          /* connections in the list, closing ones too (they hold an fd) */
    size_t out_max;
    unsigned conn_max;
    int64_t hello_timeout_ns, idle_ns;
    struct __kernel_timespec tick_ts, accept_ts;
    bool accept_paused;       /* backing off after EMFILE and the like: the timer re-arms it */
    int64_t accept_backoff_ns;
    int64_t accept_log_ns;    /* when the last accept error was logged */
    unsigned accept_quiet;    /* accept errors not logged since */
};

static __thread struct svc *tls_svc; /* set on the service thread */

/* Log lines a flood could repeat come out at most once per SVC_ACCEPT_LOG_EVERY, with the count
 * of those left out. True when this one may be printed; *quiet is then that count. */
static bool rl_take(int64_t *last_ns, unsigned *count, unsigned *quiet)
{
    int64_t now = clock_now_ns();
    if (*last_ns && now - *last_ns < SVC_ACCEPT_LOG_EVERY) {
        (*count)++;
        return false;
    }
    *quiet = *count;
    *count = 0;
    *last_ns = now;
    return true;
}

static void log_rl_conn_cap(struct svc *s)
{
    static __thread int64_t last;
    static __thread unsigned count;
    unsigned quiet;
    if (rl_take(&last, &count, &quiet))
        log_warn("refusing connections: %u open, the most allowed (fab_opts.conn_max, kvserver "
                 "--max-conns); %u more refused since the last such line",
                 s->nconns, quiet);
}

/* ------------------------------------------------------------------------------------------ */
/* Replies */

static void req_free(struct fab_rpc_req *r)
{
    free(r->frame);
    free(r);
}

/* Service thread: the connection's output is its own again (no direct reply from now on). */
static void sconn_take_out(struct sconn *sc)
{
    if (!sc->given) return;
    pthread_mutex_lock(&sc->out_mu);
    sc->direct = false;
    pthread_mutex_unlock(&sc->out_mu);
    sc->given = false;
}

/* Service thread: a client connection with all its output sent lets other threads reply on it
 * directly (unless a reply of theirs is queued here meanwhile). */
static void sconn_give_out(struct sconn *sc)
{
    if (sc->given || sc->role != WIRE_ROLE_CLIENT || !sc->hello_done || sc->echo ||
        sc->paused || sc->c.closing || sc->c.sending || sc->c.dirty || conn_queued(&sc->c))
        return;
    pthread_mutex_lock(&sc->out_mu);
    if (!sc->queued) sc->direct = sc->given = true;
    pthread_mutex_unlock(&sc->out_mu);
}

/* Appends a finished reply to its connection (service thread only). */
static void deliver_reply(struct svc *s, struct fab_rpc_req *r, bool was_queued)
{
    struct sconn *sc = r->conn;
    if (sc->role == WIRE_ROLE_CLIENT) {
        sconn_take_out(sc);
        if (was_queued) {
            pthread_mutex_lock(&sc->out_mu);
            sc->queued--;
            pthread_mutex_unlock(&sc->out_mu);
        }
    }
    sc->reqs--;
    sc->req_bytes -= r->len;
    size_t n = r->frame_len - r->frame_off;
    if (!sc->c.closing && n) {
        uint8_t *p = conn_reserve(&sc->c, n);
        if (p) memcpy(p, r->frame + r->frame_off, n);
        else conn_close(&s->ring, &sc->c);
    }
    req_free(r);
}

/* Another thread's reply on a client connection, sent on the socket at once when the service
 * thread has none of the connection's output: true when it was all sent (r is freed). A short
 * send leaves the rest to the service thread (r->frame_off), ahead of any later reply. */
static bool reply_direct(struct sconn *sc, struct fab_rpc_req *r)
{
    if (!sc->direct) return false;
    ssize_t n = send(sc->c.fd, r->frame, r->frame_len, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n == (ssize_t)r->frame_len) {
        sc->reqs--;
        sc->req_bytes -= r->len;
        return true;
    }
    sc->direct = false; /* (an error: the service thread's send meets it too, and closes) */
    if (n > 0) r->frame_off = (size_t)n;
    return false;
}

const void *fab_rpc_data(const struct fab_rpc_req *req) { return req->data; }
size_t fab_rpc_len(const struct fab_rpc_req *req) { return req->len; }
uint16_t fab_rpc_src(const struct fab_rpc_req *req) { return req->src; }
uint64_t fab_rpc_src_incarnation(const struct fab_rpc_req *req) { return req->src_inc; }
bool fab_rpc_from_client(const struct fab_rpc_req *req) { return req->client; }
uint64_t fab_rpc_conn(const struct fab_rpc_req *req) { return req->conn->id; }
size_t fab_rpc_reply_max(const struct fab_rpc_req *req) { return req->f->o.rpc_max_bytes; }
size_t fab_rpc_max(const struct fabric *f) { return f->o.rpc_max_bytes; }

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
        deliver_reply(s, req, false);
        return;
    }
    struct sconn *sc = req->conn;
    bool client = sc->role == WIRE_ROLE_CLIENT;
    if (client) {
        pthread_mutex_lock(&sc->out_mu);
        if (req->frame_len && reply_direct(sc, req)) {
            pthread_mutex_unlock(&sc->out_mu); /* (the service thread frees sc only after
                                                  taking out_mu once more) */
            req_free(req);
            return;
        }
        sc->queued++;
    }
    pthread_mutex_lock(&s->reply_mu);
    req->next = NULL;
    *s->replies_tail = req;
    s->replies_tail = &req->next;
    pthread_mutex_unlock(&s->reply_mu);
    if (client) pthread_mutex_unlock(&sc->out_mu);
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
        deliver_reply(s, r, true);
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

/* Whether the connection's process is fenced here (fab_fence); says so once per connection. */
static bool sconn_fenced(struct svc *s, struct sconn *sc)
{
    if (sc->role == WIRE_ROLE_CLIENT || !fab_fenced(s->f, sc->peer, sc->peer_inc)) return false;
    if (!sc->fence_said) {
        sc->fence_said = true;
        log_warn("connection %llu: node %u's process (incarnation %llu) is fenced: it reaches "
                 "only the way back in", (unsigned long long)sc->id, sc->peer,
                 (unsigned long long)sc->peer_inc);
    }
    return true;
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
    r->src_inc = sc->peer_inc;
    r->client = sc->role == WIRE_ROLE_CLIENT;
    r->len = plen;
    r->data = (uint8_t *)(r + 1);
    memcpy(r->data, payload, plen);
    sc->reqs++;
    sc->req_bytes += plen;
    fab_rpc_handler fn = NULL;
    unsigned flags = 0;
    if (w.type < FAB_RPC_MAX_TYPES) {
        struct rpc_entry *e = &s->f->rpc[w.type];
        fn = atomic_load_explicit(&e->fn, memory_order_acquire);
        flags = e->flags;
    }
    if (r->client && !(fn && (flags & FAB_RPC_CLIENT))) {
        /* Roles: a client connection reaches only the handlers registered for clients. */
        fab_rpc_reply(r, RDKV_EPERM, NULL, 0);
        return;
    }
    if (!(flags & FAB_RPC_FENCED) && sconn_fenced(s, sc)) {
        fab_rpc_reply(r, RDKV_EPERM, NULL, 0);
        return;
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

/* The connection is bounded like any other: idle for the node's conn_idle (nothing received),
 * or unable to send for SVC_STALL_NS (its peer reads nothing), it is closed. */
static void *echo_main(void *arg)
{
    struct echo_thread *e = arg;
    struct timeval snd = {.tv_sec = SVC_STALL_NS / NS_PER_S};
    setsockopt(e->fd, SOL_SOCKET, SO_SNDTIMEO, &snd, sizeof snd);
    if (e->idle_ns > 0) {
        struct timeval rcv = {.tv_sec = e->idle_ns / NS_PER_S,
                              .tv_usec = (e->idle_ns % NS_PER_S) / 1000};
        if (!rcv.tv_sec && !rcv.tv_usec) rcv.tv_usec = 1;
        setsockopt(e->fd, SOL_SOCKET, SO_RCVTIMEO, &rcv, sizeof rcv);
    }
    uint8_t ack[WIRE_HDR_SIZE + WIRE_HELLO_ACK_SIZE];
    wire_put_hello_ack(ack, &e->ack);
    if (send(e->fd, ack, sizeof ack, MSG_NOSIGNAL) == (ssize_t)sizeof ack) {
        uint8_t m[8];
        for (;;) {
            ssize_t r = recv(e->fd, m, sizeof m, MSG_WAITALL);
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                log_info("echo connection %llu: idle for %lld s; closing it",
                         (unsigned long long)e->conn, (long long)(e->idle_ns / NS_PER_S));
            if (r != (ssize_t)sizeof m) break;
            if (send(e->fd, m, sizeof m, MSG_NOSIGNAL) != (ssize_t)sizeof m) break;
        }
    }
    shutdown(e->fd, SHUT_RDWR); /* the peer sees the end now; the fd closes when joined */
    atomic_store(&e->done, true);
    return NULL;
}

/* Joins the echo threads that have finished (service thread; they are past their last touch of
 * anything but e). */
static void echo_reap(struct svc *s)
{
    for (struct echo_thread **pp = &s->echoes; *pp;) {
        struct echo_thread *x = *pp;
        if (atomic_load(&x->done)) {
            pthread_join(x->thr, NULL);
            close(x->fd);
            *pp = x->next;
            free(x);
            s->nechoes--;
        } else {
            pp = &x->next;
        }
    }
}

static void start_echo(struct svc *s, struct sconn *sc)
{
    sc->echo_pending = false;
    s->echo_pending--;
    struct echo_thread *e = calloc(1, sizeof *e);
    if (!e) return;
    e->fd = dup(sc->c.fd);
    if (e->fd < 0) {
        free(e);
        return;
    }
    e->conn = sc->id;
    e->idle_ns = s->idle_ns;
    e->ack.status = 0;
    e->ack.node = s->f->node;
    e->ack.transport = (uint16_t)s->f->transport;
    e->ack.arena_size = s->f->arena_size;
    e->ack.cluster_fp = s->f->cc->fingerprint;
    e->ack.incarnation = s->f->incarnation;
    echo_reap(s);
    pthread_attr_t at;
    int rc = pthread_attr_init(&at);
    if (!rc) {
        pthread_attr_setstacksize(&at, SVC_ECHO_STACK);
        rc = pthread_create(&e->thr, &at, echo_main, e);
        pthread_attr_destroy(&at);
    }
    if (rc) {
        close(e->fd);
        free(e);
        return;
    }
    e->next = s->echoes;
    s->echoes = e;
    s->nechoes++;
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
    pthread_mutex_init(&sc->out_mu, NULL);
    /* Until it is authenticated a connection sends only small handshake frames. */
    wire_asm_set_limit(&sc->c.in, WIRE_PREAUTH_MAX);
    sc->svc = s;
    sc->peer = FAB_NODE_CLIENT;
    sc->id = ++s->next_conn_id;
    sc->born_ns = sc->last_rx_ns = clock_now_ns();
    if (s->nechoes) echo_reap(s);
    /* (an echo connection counts as a connection: handed to its thread, it has left conns) */
    if (s->nconns + s->nechoes >= s->conn_max) {
        sc->refuse = RDKV_EBUSY;
        log_rl_conn_cap(s);
    }
    sc->next = s->conns;
    if (s->conns) s->conns->prev = sc;
    s->conns = sc;
    s->nconns++;
    conn_arm_recv(&s->ring, &sc->c, SVC_BGID);
}

/* Frees a connection's memory and fd; a thread that sent a direct reply on it has left out_mu
 * (its last touch) once this takes it. */
static void sconn_free(struct svc *s, struct sconn *sc)
{
    if (sc->echo_pending) s->echo_pending--; /* (closed before its thread started) */
    conn_gone(s->f, sc->id);
    pthread_mutex_lock(&sc->out_mu);
    pthread_mutex_unlock(&sc->out_mu);
    pthread_mutex_destroy(&sc->out_mu);
    conn_fini(&sc->c);
    free(sc->pend.p);
    free(sc);
}

static void sconn_maybe_free(struct svc *s, struct sconn *sc)
{
    if (!sc->c.closing || sc->c.sqes > 0 || sc->reqs > 0) return;
    if (sc->prev) sc->prev->next = sc->next;
    else s->conns = sc->next;
    if (sc->next) sc->next->prev = sc->prev;
    s->nconns--;
    sconn_free(s, sc);
}

/* The peer's address, for the log and the node-address check. */
static void peer_name(struct sconn *sc, struct sockaddr_storage *ss, char *out, size_t cap)
{
    socklen_t len = sizeof *ss;
    memset(ss, 0, sizeof *ss);
    char host[INET6_ADDRSTRLEN] = "?", port[8] = "?";
    if (!getpeername(sc->c.fd, (struct sockaddr *)ss, &len))
        getnameinfo((struct sockaddr *)ss, len, host, sizeof host, port, sizeof port,
                    NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf(out, cap, "%s:%s", host, port);
}

/* Sends the handshake's answer: a refusal carries the status only (every other field zero) and
 * closes the connection once it is out; the node logs why in one line. */
static void hello_answer(struct svc *s, struct sconn *sc, const struct wire_hello_ack *ack,
                         const char *why)
{
    if (ack->status) {
        /* (rate-limited: a flood of strangers must not flood the log) */
        static __thread int64_t last;
        static __thread unsigned count;
        unsigned quiet;
        if (rl_take(&last, &count, &quiet)) {
            struct sockaddr_storage ss;
            char from[INET6_ADDRSTRLEN + 16];
            peer_name(sc, &ss, from, sizeof from);
            log_warn("refused a connection from %s: %s (%u more refused since the last such "
                     "line)", from, why, quiet);
        }
    }
    uint8_t *p = conn_reserve(&sc->c, WIRE_HDR_SIZE + WIRE_HELLO_ACK_SIZE);
    if (!p) {
        conn_close(&s->ring, &sc->c);
        return;
    }
    wire_put_hello_ack(p, ack);
    if (ack->status) {
        /* Flush the refusal, then close: the caller reads a clear reason. */
        conn_flush(&s->ring, &sc->c);
        sc->c.closing = true;
        shutdown(sc->c.fd, SHUT_RD);
    }
}

static void hello_refuse(struct svc *s, struct sconn *sc, int status, const char *why)
{
    struct wire_hello_ack ack = {.status = status};
    sc->auth_wait = false;
    hello_answer(s, sc, &ack, why);
}

/* The claims of a HELLO, checked once it is proven (or at once on an --insecure node). */
static void hello_accept(struct svc *s, struct sconn *sc, const struct wire_hello *hello)
{
    struct fabric *f = s->f;
    char why[160];
    struct sockaddr_storage ss;
    char from[INET6_ADDRSTRLEN + 16];
    sc->auth_wait = false;
    if (hello->dst_node != f->node &&
        !(hello->dst_node == FAB_NODE_ANY && hello->src_node == FAB_NODE_CLIENT)) {
        snprintf(why, sizeof why, "it dialled node %u's address but asked for node %u", f->node,
                 hello->dst_node);
        hello_refuse(s, sc, RDKV_ECONFIG, why);
        return;
    }
    if (hello->cluster_fp && hello->cluster_fp != f->cc->fingerprint) {
        hello_refuse(s, sc, RDKV_ECONFIG, "its cluster config lists other nodes");
        return;
    }
    if (hello->src_node != FAB_NODE_CLIENT) {
        peer_name(sc, &ss, from, sizeof from);
        if (!fab_peer_addr_ok(f, hello->src_node, &ss)) {
            snprintf(why, sizeof why, "it claims node %u, whose configured address is %.64s",
                     hello->src_node, f->cc->nodes[hello->src_node].host);
            hello_refuse(s, sc, RDKV_EPERM, why);
            return;
        }
    }
    sc->hello_done = true;
    sc->peer = hello->src_node;
    sc->peer_inc = hello->incarnation;
    sc->role = hello->role;
    if (hello->kind == WIRE_KIND_ECHO) {
        if (s->nechoes) echo_reap(s);
        if (s->nechoes + s->echo_pending >= SVC_ECHO_MAX) {
            snprintf(why, sizeof why, "%u echo connections are open, the most allowed",
                     SVC_ECHO_MAX);
            hello_refuse(s, sc, RDKV_EBUSY, why);
            return;
        }
        sc->echo = sc->echo_pending = true;
        s->echo_pending++;
        /* The echo thread sends the ack once the recv is cancelled and it owns the socket. */
        struct io_uring_sqe *sqe = uring_sqe(&s->ring);
        io_uring_prep_cancel64(sqe, ev_tag(&sc->c, EV_RECV), 0);
        io_uring_sqe_set_data64(sqe, EV_IGNORE);
        return;
    }
    struct wire_hello_ack ack = {.status = 0, .node = f->node, .transport = (uint16_t)f->transport,
                                 .arena_size = f->arena_size, .cluster_fp = f->cc->fingerprint,
                                 .incarnation = f->incarnation};
    hello_answer(s, sc, &ack, NULL);
}

static void handle_hello(struct svc *s, struct sconn *sc, const struct wire_hdr *h,
                         const uint8_t *body)
{
    struct fabric *f = s->f;
    struct wire_hello hello;
    char why[160];
    int rc = wire_get_hello(h, body, &hello);
    if (rc || hello.version != WIRE_VERSION) {
        snprintf(why, sizeof why, "malformed HELLO or another protocol version (%u; ours is %u)",
                 rc ? 0u : hello.version, WIRE_VERSION);
        hello_refuse(s, sc, RDKV_EPROTO, why);
        return;
    }
    if (hello.kind != WIRE_KIND_FABRIC && hello.kind != WIRE_KIND_ECHO) {
        hello_refuse(s, sc, RDKV_EPROTO, "unknown connection kind");
        return;
    }
    /* Roles: the echo baseline (a plain thread per connection) is for nodes and operator tools
     * (kvbench fabric); clients use the session protocol only. */
    if (hello.kind == WIRE_KIND_ECHO && hello.role == WIRE_ROLE_CLIENT) {
        hello_refuse(s, sc, RDKV_EPERM,
                     "a client connection cannot open an echo connection (the TCP baseline is "
                     "for nodes and operator tools, with the node key)");
        return;
    }
    /* Roles: the client key proves a client and nothing else; the node key proves a member of
     * the cluster (a configured node id) or an operator tool (FAB_NODE_CLIENT). */
    if (hello.role == WIRE_ROLE_CLIENT ? hello.src_node != FAB_NODE_CLIENT
                                       : hello.src_node != FAB_NODE_CLIENT &&
                                             hello.src_node >= f->nnodes) {
        snprintf(why, sizeof why, "a %s connection cannot claim node id %u",
                 hello.role == WIRE_ROLE_CLIENT ? "client" : "node", hello.src_node);
        hello_refuse(s, sc, RDKV_EPERM, why);
        return;
    }
    if (f->o.insecure) {
        hello_accept(s, sc, &hello); /* claims are taken on trust: loud in the log at start */
        return;
    }
    const uint8_t *key = auth_key(&f->keys, hello.role);
    if (!(hello.flags & WIRE_HELLO_F_AUTH) || !key) {
        hello_refuse(s, sc, RDKV_EPERM, "no credential offered (the caller has no secret file)");
        return;
    }
    /* Challenge: our fresh nonce and our own proof (the caller checks we hold the key too). */
    struct wire_challenge ch;
    auth_nonce(ch.nonce);
    auth_mac(key, 'S', &hello, ch.nonce, ch.mac);
    uint8_t *p = conn_reserve(&sc->c, WIRE_HDR_SIZE + WIRE_CHALLENGE_SIZE);
    if (!p) {
        conn_close(&s->ring, &sc->c);
        return;
    }
    wire_put_challenge(p, &ch);
    sc->hello = hello;
    memcpy(sc->nonce, ch.nonce, WIRE_NONCE_SIZE);
    sc->auth_wait = true;
}

static void handle_auth(struct svc *s, struct sconn *sc, const struct wire_hdr *h,
                        const uint8_t *body)
{
    struct wire_auth a;
    if (wire_get_auth(h, body, &a)) {
        hello_refuse(s, sc, RDKV_EPROTO, "malformed AUTH");
        return;
    }
    uint8_t want[WIRE_MAC_SIZE];
    auth_mac(auth_key(&s->f->keys, sc->hello.role), 'C', &sc->hello, sc->nonce, want);
    if (!auth_mac_equal(want, a.mac)) {
        char why[160];
        if (sc->hello.src_node == FAB_NODE_CLIENT)
            snprintf(why, sizeof why, "bad proof for the %s key",
                     sc->hello.role == WIRE_ROLE_CLIENT ? "client" : "node");
        else
            snprintf(why, sizeof why, "bad proof for the node key (it claims node %u)",
                     sc->hello.src_node);
        hello_refuse(s, sc, RDKV_EPERM, why);
        return;
    }
    hello_accept(s, sc, &sc->hello);
}

/* A one-sided request to a node whose backend's operations do not travel on the TCP stream: it
 * answers RDKV_ENOTSUP (a malformed one closes the connection, as the soft NIC does). */
static void op_unserved(struct svc *s, struct sconn *sc, const struct wire_hdr *h,
                        const uint8_t *body)
{
    struct wire_op_req rq;
    const uint8_t *payload;
    uint8_t *p = wire_get_op_req(h, body, &rq, &payload)
                     ? NULL
                     : conn_reserve(&sc->c, WIRE_HDR_SIZE + WIRE_OP_RESP_SIZE);
    if (!p) {
        conn_close(&s->ring, &sc->c);
        return;
    }
    struct wire_op_resp r = {.status = RDKV_ENOTSUP};
    wire_put_op_resp(p, &r);
}

static int on_frame(void *arg, const struct wire_hdr *h, const uint8_t *body)
{
    struct sconn *sc = arg;
    struct svc *s = sc->svc;
    if (sc->c.closing || sc->echo) return RDKV_ESHUTDOWN;
    if (!sc->hello_done) {
        if (h->type != (sc->auth_wait ? WIRE_AUTH : WIRE_HELLO)) return RDKV_EPROTO;
        if (sc->auth_wait) handle_auth(s, sc, h, body);
        else handle_hello(s, sc, h, body);
        return sc->c.closing ? RDKV_ESHUTDOWN : 0;
    }
    if (sc->role == WIRE_ROLE_CLIENT && (h->type == WIRE_OP_REQ || h->type == WIRE_OP_RESET)) {
        /* Roles: one-sided operations come from nodes only; a client that sends one loses its
         * connection (docs/security.md). */
        log_warn("closed client connection %llu: it sent a one-sided operation",
                 (unsigned long long)sc->id);
        return RDKV_EPERM;
    }
    switch (h->type) {
    case WIRE_OP_REQ:
        if (s->f->be->exec)
            s->f->be->exec(s->f, &s->ring, &sc->c, &sc->qp_error,
                           sconn_fenced(s, sc) ? RDKV_EPERM : 0, h, body);
        else op_unserved(s, sc, h, body);
        break;
    case WIRE_OP_RESET: sc->qp_error = false; break;
    case WIRE_RPC_REQ: dispatch_rpc(s, sc, h, body); break;
    default: return RDKV_EPROTO;
    }
    return sc->c.closing ? RDKV_ESHUTDOWN : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Bounds: backpressure, frame limits by state, the connection cap */

/* Over its cap: the connection's replies wait to be sent (its peer does not read them fast
 * enough) or its requests are still running. */
static bool sconn_over(const struct svc *s, const struct sconn *sc)
{
    return conn_queued(&sc->c) + sc->req_bytes > s->out_max || sc->reqs >= SVC_CONN_MAX_REQS;
}

/* Answers the first frame of a connection over the cap with a refusal, then closes it. */
static void sconn_refuse(struct svc *s, struct sconn *sc)
{
    struct wire_hello_ack ack = {.status = sc->refuse};
    uint8_t *p = conn_reserve(&sc->c, WIRE_HDR_SIZE + WIRE_HELLO_ACK_SIZE);
    if (!p) {
        conn_close(&s->ring, &sc->c);
        return;
    }
    wire_put_hello_ack(p, &ack);
    conn_flush(&s->ring, &sc->c);
    sc->c.closing = true;
    shutdown(sc->c.fd, SHUT_RD);
}

/* Every frame passes here on its way to on_frame: the connection's state decides how long the
 * next frame may be, and a connection over its cap stops being read after this frame. */
static int on_frame_bounded(void *arg, const struct wire_hdr *h, const uint8_t *body)
{
    struct sconn *sc = arg;
    struct svc *s = sc->svc;
    if (sc->refuse && !sc->c.closing) {
        sconn_refuse(s, sc);
        return RDKV_ESHUTDOWN;
    }
    int rc = on_frame(arg, h, body);
    if (rc) return rc;
    if (!sc->authed && sc->hello_done) {
        sc->authed = true;
        wire_asm_set_limit(&sc->c.in, 0);
    }
    return sconn_over(s, sc) ? WIRE_ASM_STOP : 0;
}

static void sconn_pause(struct svc *s, struct sconn *sc)
{
    sconn_take_out(sc); /* its replies come back here, to be counted against the cap */
    sc->paused = true;
    sc->progress_ns = clock_now_ns();
    if (sc->c.recv_armed) {
        struct io_uring_sqe *sqe = uring_sqe(&s->ring);
        io_uring_prep_cancel64(sqe, ev_tag(&sc->c, EV_RECV), 0);
        io_uring_sqe_set_data64(sqe, EV_IGNORE);
    }
}

/* Keeps bytes that arrived while the connection was paused (or were left by a stop). */
static bool pend_add(struct sconn *sc, const uint8_t *p, size_t n)
{
    struct obuf *o = &sc->pend;
    if (n == 0) return true;
    if (sc->pend_off && sc->pend_off == o->len) o->len = sc->pend_off = 0;
    if (o->len - sc->pend_off + n > SVC_PEND_MAX) return false;
    if (o->len + n > o->cap) {
        if (sc->pend_off) { /* slide the unfed part down first */
            memmove(o->p, o->p + sc->pend_off, o->len - sc->pend_off);
            o->len -= sc->pend_off;
            sc->pend_off = 0;
        }
        size_t cap = o->cap ? o->cap : SVC_BUFSZ;
        while (cap < o->len + n) cap *= 2;
        uint8_t *q = realloc(o->p, cap);
        if (!q) return false;
        o->p = q;
        o->cap = cap;
    }
    memcpy(o->p + o->len, p, n);
    o->len += n;
    return true;
}

/* Feeds received bytes to the frame handlers until the connection goes over its cap; the rest
 * waits in pend. */
static void sconn_feed(struct svc *s, struct sconn *sc, const uint8_t *p, size_t n)
{
    sc->last_rx_ns = clock_now_ns();
    if (sc->paused || sc->pend_off < sc->pend.len) {
        if (!pend_add(sc, p, n)) {
            log_warn("connection from node %u: input kept while paused is over %zu bytes; "
                     "closing it", sc->peer, (size_t)SVC_PEND_MAX);
            conn_close(&s->ring, &sc->c);
        }
        return;
    }
    size_t used = 0;
    int rc = wire_asm_feed_part(&sc->c.in, p, n, on_frame_bounded, sc, &used);
    if (rc == WIRE_ASM_STOP) {
        if (!pend_add(sc, p + used, n - used)) conn_close(&s->ring, &sc->c);
        else sconn_pause(s, sc);
    } else if (rc && rc != RDKV_ESHUTDOWN) {
        log_debug("connection from node %u: %s; closing it", sc->peer, rdkv_strerror(rc));
        conn_close(&s->ring, &sc->c);
    }
}

/* A paused connection under its cap again: feeds what waited (until it goes over again), then
 * reads again. */
static void sconn_resume(struct svc *s, struct sconn *sc)
{
    if (!sc->paused || sc->c.closing || sconn_over(s, sc)) return;
    sc->paused = false;
    if (sc->pend_off < sc->pend.len) {
        size_t used = 0;
        int rc = wire_asm_feed_part(&sc->c.in, sc->pend.p + sc->pend_off,
                                    sc->pend.len - sc->pend_off, on_frame_bounded, sc, &used);
        sc->pend_off += used;
        if (rc == WIRE_ASM_STOP) {
            sc->paused = true; /* the recv is already off */
            return;
        }
        if (rc && rc != RDKV_ESHUTDOWN) {
            log_debug("connection from node %u: %s; closing it", sc->peer, rdkv_strerror(rc));
            conn_close(&s->ring, &sc->c);
            return;
        }
    }
    sc->pend.len = sc->pend_off = 0;
    if (sc->pend.cap > SVC_BUFSZ) { /* do not keep a burst's buffer for ever */
        free(sc->pend.p);
        sc->pend.p = NULL;
        sc->pend.cap = 0;
    }
    if (!sc->c.closing) conn_arm_recv(&s->ring, &sc->c, SVC_BGID);
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
        if (!sc->c.closing && !sc->echo)
            sconn_feed(s, sc, bufring_buf(&s->br, bid), (size_t)cqe->res);
        bufring_recycle(&s->br, bid);
    } else if (cqe->res == -ENOBUFS) {
        /* all buffers busy for a moment: re-arm below */
    } else if (cqe->res == -ECANCELED && (sc->echo || !sc->c.closing)) {
        /* the echo hand-over, or a pause: nothing to close */
    } else if (!sc->c.closing) {
        conn_close(&s->ring, &sc->c); /* EOF or error */
    }
    if (!sc->c.recv_armed) {
        if (sc->echo && !sc->c.closing) {
            start_echo(s, sc);
            sc->c.closing = true; /* our copy of the fd closes when it is freed */
        } else if (!sc->c.closing && !sc->paused) {
            conn_arm_recv(&s->ring, &sc->c, SVC_BGID);
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Timers: the tick (handshake and idle timeouts) and the accept back-off */

static void arm_timer(struct svc *s, struct __kernel_timespec *ts, int64_t ns)
{
    ts->tv_sec = ns / NS_PER_S;
    ts->tv_nsec = ns % NS_PER_S;
    struct io_uring_sqe *sqe = uring_sqe(&s->ring);
    io_uring_prep_timeout(sqe, ts, 0, 0);
    io_uring_sqe_set_data64(sqe, ev_tag(ts, EV_TIMER));
}

/* Closes connections that did not finish their handshake in time, and client connections idle
 * too long: nothing received and nothing owed (no request running, no reply unsent). Node
 * connections are never idle-closed (the peer watcher's heartbeats cross them anyway). */
static void on_tick(struct svc *s)
{
    int64_t now = clock_now_ns();
    if (s->nechoes) echo_reap(s);
    for (struct sconn *sc = s->conns; sc; sc = sc->next) {
        if (sc->c.closing || sc->echo) continue;
        if (sc->paused && now - sc->progress_ns > SVC_STALL_NS) {
            log_info("connection %llu from node %u: none of its replies taken for %lld s; "
                     "closing it", (unsigned long long)sc->id, sc->peer,
                     (long long)(SVC_STALL_NS / NS_PER_S));
            conn_close(&s->ring, &sc->c);
        } else if (!sc->hello_done) {
            if (now - sc->born_ns > s->hello_timeout_ns) {
                log_debug("connection %llu: no handshake within %lld ms; closing it",
                          (unsigned long long)sc->id,
                          (long long)(s->hello_timeout_ns / NS_PER_MS));
                conn_close(&s->ring, &sc->c);
            }
        } else if (s->idle_ns > 0 && sc->peer == FAB_NODE_CLIENT && sc->reqs == 0 &&
                   !sc->paused && conn_queued(&sc->c) == 0 && now - sc->last_rx_ns > s->idle_ns) {
            log_info("client connection %llu: idle for %lld s; closing it",
                     (unsigned long long)sc->id, (long long)(s->idle_ns / NS_PER_S));
            conn_close(&s->ring, &sc->c);
        }
    }
}

/* The accept failed: out of descriptors or memory backs off on a timer (doubling up to
 * SVC_ACCEPT_BACKOFF_MAX) instead of retrying at once, which would spin the service thread. */
static void on_accept_error(struct svc *s, int err, bool more)
{
    unsigned quiet;
    bool starved = err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
    if (starved) {
        s->accept_backoff_ns = s->accept_backoff_ns ? s->accept_backoff_ns * 2
                                                    : SVC_ACCEPT_BACKOFF_MIN;
        if (s->accept_backoff_ns > SVC_ACCEPT_BACKOFF_MAX)
            s->accept_backoff_ns = SVC_ACCEPT_BACKOFF_MAX;
    }
    if (rl_take(&s->accept_log_ns, &s->accept_quiet, &quiet))
        log_warn("accept: %s%s (%u more accept errors since the last such line)", strerror(err),
                 starved ? "; new connections wait" : "", quiet);
    if (!starved) return;
    if (more) { /* still armed: stop it, the timer arms a new one */
        struct io_uring_sqe *sqe = uring_sqe(&s->ring);
        io_uring_prep_cancel64(sqe, ev_tag(s, EV_ACCEPT), 0);
        io_uring_sqe_set_data64(sqe, EV_IGNORE);
    }
    s->accept_paused = true;
    arm_timer(s, &s->accept_ts, s->accept_backoff_ns);
}

static void on_timer(struct svc *s, void *which)
{
    if (atomic_load(&s->stop)) return;
    if (which == &s->tick_ts) {
        on_tick(s);
        arm_timer(s, &s->tick_ts, SVC_TICK_NS);
    } else if (which == &s->accept_ts) {
        s->accept_paused = false; /* the loop arms the accept again */
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
        if (!(cqe->flags & IORING_CQE_F_MORE)) s->accept_armed = false;
        if (cqe->res >= 0) {
            sconn_new(s, cqe->res);
            s->accept_backoff_ns = 0;
        } else if (cqe->res != -ECANCELED) {
            on_accept_error(s, -cqe->res, s->accept_armed);
        }
        break;
    case EV_TIMER: on_timer(s, ev_ptr(ud)); break;
    case EV_RECV: on_recv(s, ev_ptr(ud), cqe); break;
    case EV_SEND: {
        struct sconn *sc = ev_ptr(ud);
        if (cqe->res > 0) sc->progress_ns = clock_now_ns();
        if (!conn_on_send(&sc->c, cqe->res) && !sc->c.closing) conn_close(&s->ring, &sc->c);
        break;
    }
    case EV_WAKE:
        pthread_mutex_lock(&s->mu);
        if (s->sync_seen != s->sync_req) {
            s->sync_seen = s->sync_req;
            pthread_cond_broadcast(&s->cv);
        }
        pthread_mutex_unlock(&s->mu);
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

    if (!atomic_load(&s->held)) arm_accept(s);
    arm_wake(s);
    arm_timer(s, &s->tick_ts, SVC_TICK_NS);
    while (!atomic_load(&s->stop)) {
        if (!s->accept_armed && !s->accept_paused && !atomic_load(&s->held)) arm_accept(s);
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
        /* Send what the batch produced, go on with paused connections that drained, and
         * free finished ones. */
        for (struct sconn *sc = s->conns, *next; sc; sc = next) {
            next = sc->next;
            if (sc->paused) sconn_resume(s, sc);
            if (sc->c.dirty) conn_flush(&s->ring, &sc->c);
            sconn_give_out(sc);
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
        sconn_free(s, sc);
    }
    s->conns = NULL;
    munmap(s->br.br, s->br.map_size);
    return NULL;
}

void svc_sync(struct fabric *f)
{
    struct svc *s = f->svc;
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    uint64_t want = ++s->sync_req;
    pthread_mutex_unlock(&s->mu);
    uint64_t one = 1;
    ssize_t w = write(s->wake_fd, &one, sizeof one);
    (void)w;
    pthread_mutex_lock(&s->mu);
    /* (bounded: a loop that stopped answers nothing more anyway) */
    while (s->sync_seen < want && !atomic_load(&s->stop)) {
        struct timespec ts = clock_ts(clock_now_ns() + 50 * NS_PER_MS);
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    pthread_mutex_unlock(&s->mu);
}

void fab_serve(struct fabric *f)
{
    struct svc *s = f->svc;
    if (!s || !atomic_exchange(&s->held, false)) return;
    uint64_t one = 1; /* (the loop wakes up and arms the accept) */
    ssize_t w = write(s->wake_fd, &one, sizeof one);
    (void)w;
}

int svc_start(struct fabric *f, int listen_fd, char *err, size_t errcap)
{
    struct svc *s = calloc(1, sizeof *s);
    if (!s) return RDKV_ENOMEM;
    s->f = f;
    s->listen_fd = listen_fd;
    s->out_max = f->o.conn_out_max ? f->o.conn_out_max : SVC_OUT_MAX_DEFAULT;
    s->conn_max = f->o.conn_max ? f->o.conn_max : SVC_CONN_MAX_DEFAULT;
    s->hello_timeout_ns = f->o.hello_timeout_ns > 0 ? f->o.hello_timeout_ns
                                                    : SVC_HELLO_TIMEOUT_DEFAULT;
    s->idle_ns = f->o.conn_idle_ns ? f->o.conn_idle_ns : FAB_CONN_IDLE_DEFAULT_NS;
    s->wake_fd = eventfd(0, EFD_CLOEXEC);
    atomic_store(&s->held, f->o.serve_later);
    s->replies_tail = &s->replies;
    s->q_tail = &s->q_head;
    pthread_mutex_init(&s->mu, NULL);
    clock_cond_init(&s->cv);
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
