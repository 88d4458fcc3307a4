/* io_uring plumbing shared by contexts and the node service: ring setup, provided-buffer rings,
 * framed connections, and blocking socket helpers for handshakes. */
#include "conn.h"
#include "fabric.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/tsan.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#ifdef RDKV_TSAN
char tsan_wire_sync, tsan_ring_sync;
#endif

void uring_exit(struct io_uring *ring)
{
    /* (released before the ring is unmapped: after, another thread could map a new ring at the
     * same address and acquire before this release, and TSan would see this thread's last
     * writes race with its first) */
    TSAN_RING_GONE();
    io_uring_queue_exit(ring);
}

int uring_setup(struct io_uring *ring, unsigned entries, char *err, size_t errcap)
{
    static const unsigned flag_sets[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_CQSIZE,
        IORING_SETUP_COOP_TASKRUN | IORING_SETUP_CQSIZE,
        IORING_SETUP_CQSIZE,
    };
    int rc = -EINVAL;
    for (size_t i = 0; i < sizeof flag_sets / sizeof flag_sets[0]; i++) {
        struct io_uring_params p;
        memset(&p, 0, sizeof p);
        p.flags = flag_sets[i];
        p.cq_entries = entries * 4;
        rc = io_uring_queue_init_params(entries, ring, &p);
        if (rc == 0) {
            TSAN_RING_NEW();
            return 0;
        }
        if (rc != -EINVAL) break;
    }
    snprintf(err, errcap, "io_uring unavailable: %s", strerror(-rc));
    return RDKV_ENOTSUP;
}

struct io_uring_sqe *uring_sqe(struct io_uring *ring)
{
    struct io_uring_sqe *sqe;
    while (!(sqe = io_uring_get_sqe(ring))) io_uring_submit(ring);
    return sqe;
}

int bufring_init(struct io_uring *ring, struct bufring *b, int bgid, unsigned nbufs, unsigned bufsz)
{
    memset(b, 0, sizeof *b);
    size_t ring_bytes = nbufs * sizeof(struct io_uring_buf);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    ring_bytes = (ring_bytes + page - 1) & ~(page - 1);
    size_t total = ring_bytes + (size_t)nbufs * bufsz;
    void *mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return RDKV_ENOMEM;
    b->br = mem;
    b->bufs = (uint8_t *)mem + ring_bytes;
    b->map_size = total;
    b->nbufs = nbufs;
    b->bufsz = bufsz;
    b->bgid = bgid;
    struct io_uring_buf_reg reg = {.ring_addr = (uint64_t)(uintptr_t)mem, .ring_entries = nbufs,
                                   .bgid = (uint16_t)bgid};
    int rc = io_uring_register_buf_ring(ring, &reg, 0);
    if (rc) {
        munmap(mem, total);
        b->br = NULL;
        return RDKV_ENOTSUP;
    }
    io_uring_buf_ring_init(b->br);
    unsigned mask = io_uring_buf_ring_mask(nbufs);
    for (unsigned i = 0; i < nbufs; i++)
        io_uring_buf_ring_add(b->br, bufring_buf(b, i), bufsz, (unsigned short)i, mask, (int)i);
    io_uring_buf_ring_advance(b->br, (int)nbufs);
    return 0;
}

void bufring_fini(struct io_uring *ring, struct bufring *b)
{
    if (!b->br) return;
    io_uring_unregister_buf_ring(ring, b->bgid);
    munmap(b->br, b->map_size);
    b->br = NULL;
}

void bufring_recycle(struct bufring *b, unsigned bid)
{
    io_uring_buf_ring_add(b->br, bufring_buf(b, bid), b->bufsz, (unsigned short)bid,
                          io_uring_buf_ring_mask(b->nbufs), 0);
    io_uring_buf_ring_advance(b->br, 1);
}

void conn_init(struct conn *c, int fd, uint32_t rpc_max)
{
    memset(c, 0, sizeof *c);
    c->fd = fd;
    wire_asm_init(&c->in, rpc_max);
}

void conn_fini(struct conn *c)
{
    free(c->out[0].p);
    free(c->out[1].p);
    wire_asm_free(&c->in);
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
}

uint8_t *conn_reserve(struct conn *c, size_t n)
{
    struct obuf *o = &c->out[c->cur];
    if (o->len + n > o->cap) {
        size_t cap = o->cap ? o->cap : 16384;
        while (cap < o->len + n) cap *= 2;
        uint8_t *p = realloc(o->p, cap);
        if (!p) return NULL;
        o->p = p;
        o->cap = cap;
    }
    uint8_t *p = o->p + o->len;
    o->len += n;
    c->dirty = true;
    return p;
}


void conn_flush(struct io_uring *ring, struct conn *c)
{
    if (c->sending || c->closing || !c->out[c->cur].len) return;
    TSAN_WIRE_SEND();
    struct obuf *o = &c->out[c->cur];
    struct io_uring_sqe *sqe = uring_sqe(ring);
    io_uring_prep_send(sqe, c->fd, o->p, o->len, MSG_NOSIGNAL | MSG_WAITALL);
    io_uring_sqe_set_data64(sqe, ev_tag(c, EV_SEND));
    c->sqes++;
    c->sending = true;
    c->cur ^= 1;
    c->dirty = false;
}

bool conn_on_send(struct conn *c, int res)
{
    c->sqes--;
    c->sending = false;
    struct obuf *o = &c->out[c->cur ^ 1];
    bool ok = res >= 0 && (size_t)res == o->len;
    o->len = 0;
    /* Do not let one huge frame pin a huge buffer forever. */
    if (o->cap > (8u << 20)) {
        free(o->p);
        o->p = NULL;
        o->cap = 0;
    }
    if (c->out[c->cur].len) c->dirty = true;
    return ok;
}

void conn_arm_recv(struct io_uring *ring, struct conn *c, int bgid)
{
    if (c->recv_armed || c->closing) return;
    struct io_uring_sqe *sqe = uring_sqe(ring);
    io_uring_prep_recv_multishot(sqe, c->fd, NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = (uint16_t)bgid;
    io_uring_sqe_set_data64(sqe, ev_tag(c, EV_RECV));
    c->sqes++;
    c->recv_armed = true;
}

void conn_close(struct io_uring *ring, struct conn *c)
{
    if (c->closing) return;
    c->closing = true;
    if (c->fd >= 0) shutdown(c->fd, SHUT_RDWR);
    if (c->recv_armed) {
        struct io_uring_sqe *sqe = uring_sqe(ring);
        io_uring_prep_cancel64(sqe, ev_tag(c, EV_RECV), 0);
        io_uring_sqe_set_data64(sqe, EV_IGNORE);
    }
}

/* ------------------------------------------------------------------------------------------ */

void net_tune(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static int wait_fd(int fd, short events, int64_t deadline_ns)
{
    for (;;) {
        int64_t left = deadline_ns - clock_now_ns();
        if (left <= 0) return RDKV_ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = events};
        int ms = (int)((left + NS_PER_MS - 1) / NS_PER_MS);
        int r = poll(&p, 1, ms);
        if (r > 0) return 0;
        if (r < 0 && errno != EINTR) return RDKV_EIO;
    }
}

int fab_host_check(const char *host, char *err, size_t errcap)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int g = getaddrinfo(host, NULL, &hints, &res);
    if (!g) {
        freeaddrinfo(res);
        return 0;
    }
    snprintf(err, errcap, "cannot resolve host name '%s': %s", host, gai_strerror(g));
    /* no such name (for good) as against a resolver that did not answer (try again later) */
    return g == EAI_NONAME || g == EAI_FAIL
#ifdef EAI_NODATA
                   || g == EAI_NODATA
#endif
               ? RDKV_ENOHOST
               : RDKV_EUNAVAILABLE;
}

int net_connect(const char *host, uint16_t port, int64_t deadline_ns, int *fd_out, char *err,
                size_t errcap)
{
    char ports[8];
    snprintf(ports, sizeof ports, "%u", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int g = getaddrinfo(host, ports, &hints, &res);
    if (g) {
        snprintf(err, errcap, "cannot resolve %s: %s", host, gai_strerror(g));
        return RDKV_EUNAVAILABLE;
    }
    int rc = RDKV_EUNAVAILABLE;
    snprintf(err, errcap, "no address for %s", host);
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            snprintf(err, errcap, "socket: %s", strerror(errno));
            continue;
        }
        int r = connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (r < 0 && errno == EINPROGRESS) {
            int w = wait_fd(fd, POLLOUT, deadline_ns);
            if (w) {
                snprintf(err, errcap, "connect to %s:%u timed out", host, port);
                close(fd);
                rc = RDKV_EUNAVAILABLE;
                continue;
            }
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
            if (soerr) {
                errno = soerr;
                r = -1;
            } else {
                r = 0;
            }
        }
        if (r < 0) {
            snprintf(err, errcap, "connect to %s:%u: %s", host, port, strerror(errno));
            close(fd);
            continue;
        }
        /* Back to blocking: handshakes use poll-bounded calls, and io_uring does not care. */
        int fl = fcntl(fd, F_GETFL);
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        net_tune(fd);
        *fd_out = fd;
        rc = 0;
        break;
    }
    freeaddrinfo(res);
    return rc;
}

int net_listen(const char *host, uint16_t port, int *fd_out, char *err, size_t errcap)
{
    char ports[8];
    snprintf(ports, sizeof ports, "%u", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE},
                    *res = NULL;
    int g = getaddrinfo(host, ports, &hints, &res);
    if (g) {
        snprintf(err, errcap, "cannot resolve %s: %s", host, gai_strerror(g));
        return RDKV_ECONFIG;
    }
    int rc = RDKV_EIO;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            snprintf(err, errcap, "socket: %s", strerror(errno));
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
            snprintf(err, errcap, "cannot listen on %s:%u: %s", host, port, strerror(errno));
            close(fd);
            continue;
        }
        *fd_out = fd;
        rc = 0;
        break;
    }
    freeaddrinfo(res);
    return rc;
}

int net_send_all(int fd, const void *buf, size_t len, int64_t deadline_ns)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            p += w;
            len -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int r = wait_fd(fd, POLLOUT, deadline_ns);
            if (r) return r;
            continue;
        }
        return RDKV_EUNAVAILABLE;
    }
    return 0;
}

int net_recv_all(int fd, void *buf, size_t len, int64_t deadline_ns)
{
    uint8_t *p = buf;
    while (len) {
        ssize_t r = recv(fd, p, len, MSG_DONTWAIT);
        if (r > 0) {
            p += r;
            len -= (size_t)r;
            continue;
        }
        if (r == 0) return RDKV_EUNAVAILABLE;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int w = wait_fd(fd, POLLIN, deadline_ns);
            if (w) return w;
            continue;
        }
        return RDKV_EUNAVAILABLE;
    }
    return 0;
}

int fab_listen(const char *host, uint16_t port, int *fd_out, uint16_t *port_out, char *err,
               size_t errcap)
{
    int fd;
    int rc = net_listen(host, port, &fd, err, errcap);
    if (rc) return rc;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
        snprintf(err, errcap, "getsockname: %s", strerror(errno));
        close(fd);
        return RDKV_EIO;
    }
    uint16_t p = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                          : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    *fd_out = fd;
    if (port_out) *port_out = p;
    return 0;
}
