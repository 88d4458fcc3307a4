/* io_uring plumbing that the fabric's contexts, its node service and the soft backend share:
 * ring setup, provided-buffer rings, framed TCP connections with doorbell-batched output, and the
 * blocking socket helpers of handshakes. It knows frames (wire.h), not nodes or transports. */
#ifndef RDKV_RDMA_CONN_H
#define RDKV_RDMA_CONN_H

#include "wire.h"

#include <liburing.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
#endif
