/* The abuse suite's raw connection: see raw.h. */
#include "raw.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdkv_status.h"
#include "rdma/auth.h"

static int wait_fd(struct raw *r, short ev)
{
    struct pollfd p = {.fd = r->fd, .events = ev};
    int n;
    do n = poll(&p, 1, r->timeout_ms);
    while (n < 0 && errno == EINTR);
    if (n == 0) return RDKV_ETIMEDOUT;
    return n < 0 ? RDKV_EUNAVAILABLE : 0;
}

int raw_send(struct raw *r, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n) {
        int rc = wait_fd(r, POLLOUT);
        if (rc) return rc;
        ssize_t k = send(r->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (k <= 0) return RDKV_EUNAVAILABLE;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int recv_all(struct raw *r, void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n) {
        int rc = wait_fd(r, POLLIN);
        if (rc) return rc;
        ssize_t k = recv(r->fd, p, n, MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (k <= 0) return RDKV_EUNAVAILABLE;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

int raw_recv_frame(struct raw *r, struct wire_hdr *h, uint8_t **body)
{
    uint8_t hb[WIRE_HDR_SIZE];
    *body = NULL;
    int rc = recv_all(r, hb, sizeof hb);
    if (rc) return rc;
    if (wire_get_hdr(hb, h) || h->len > (64u << 20)) return RDKV_EPROTO;
    *body = malloc(h->len ? h->len : 1);
    if (!*body) return RDKV_ENOMEM;
    if ((rc = recv_all(r, *body, h->len))) {
        free(*body);
        *body = NULL;
    }
    return rc;
}

int raw_dial(struct raw *r, const char *host, uint16_t port, const struct raw_opts *o)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
    r->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 5000;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    char ps[8];
    snprintf(ps, sizeof ps, "%u", port);
    if (getaddrinfo(host, ps, &hints, &ai) || !ai) {
        snprintf(r->why, sizeof r->why, "cannot resolve %s", host);
        return RDKV_EUNAVAILABLE;
    }
    r->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in src = {.sin_family = AF_INET};
    if (r->fd >= 0 && o->bind_addr &&
        (inet_pton(AF_INET, o->bind_addr, &src.sin_addr) != 1 ||
         bind(r->fd, (struct sockaddr *)&src, sizeof src))) {
        snprintf(r->why, sizeof r->why, "cannot bind to %s: %s", o->bind_addr, strerror(errno));
        freeaddrinfo(ai);
        return RDKV_EUNAVAILABLE;
    }
    int rc = r->fd < 0 || connect(r->fd, ai->ai_addr, ai->ai_addrlen) ? RDKV_EUNAVAILABLE : 0;
    freeaddrinfo(ai);
    if (rc) {
        snprintf(r->why, sizeof r->why, "connect %s:%u: %s", host, port, strerror(errno));
        return rc;
    }
    if (o->no_hello) return 0;
    struct auth_keys keys = {0};
    if (o->secret_file && (rc = auth_load(o->secret_file, &keys, r->why, sizeof r->why)))
        return rc;
    uint8_t role = o->role ? o->role : keys.have_node ? WIRE_ROLE_NODE : WIRE_ROLE_CLIENT;
    const uint8_t *key = auth_key(&keys, role);
    if (!key && keys.have_client) key = keys.client;
    struct wire_hello hello = {.magic = WIRE_MAGIC, .version = WIRE_VERSION,
                               .kind = o->kind ? o->kind : WIRE_KIND_FABRIC,
                               .src_node = o->src_node, .dst_node = o->dst_node, .role = role,
                               .cluster_fp = o->cluster_fp};
    if (key) {
        hello.flags = WIRE_HELLO_F_AUTH;
        auth_nonce(hello.nonce);
    }
    uint8_t f[WIRE_HDR_SIZE + WIRE_HELLO_SIZE];
    wire_put_hello(f, &hello);
    if ((rc = raw_send(r, f, sizeof f))) goto out;
    struct wire_hdr h;
    uint8_t *body;
    if ((rc = raw_recv_frame(r, &h, &body))) {
        snprintf(r->why, sizeof r->why, "no answer to HELLO: %s", rdkv_status_name(rc));
        rc = rc == RDKV_ETIMEDOUT ? rc : RDKV_EUNAVAILABLE;
        goto out;
    }
    if (h.type == WIRE_AUTH_CHALLENGE) {
        struct wire_challenge ch;
        rc = key ? wire_get_challenge(&h, body, &ch) : RDKV_EPROTO;
        free(body);
        if (rc) {
            snprintf(r->why, sizeof r->why, "unexpected challenge");
            goto out;
        }
        r->challenged = 1;
        uint8_t want[WIRE_MAC_SIZE];
        auth_mac(key, 'S', &hello, ch.nonce, want);
        r->node_proved = auth_mac_equal(want, ch.mac);
        struct wire_auth a;
        auth_mac(key, 'C', &hello, ch.nonce, a.mac);
        uint8_t af[WIRE_HDR_SIZE + WIRE_AUTH_SIZE];
        wire_put_auth(af, &a);
        if ((rc = raw_send(r, af, sizeof af))) goto out;
        if ((rc = raw_recv_frame(r, &h, &body))) {
            snprintf(r->why, sizeof r->why, "no answer to AUTH: %s", rdkv_status_name(rc));
            rc = rc == RDKV_ETIMEDOUT ? rc : RDKV_EUNAVAILABLE;
            goto out;
        }
    }
    rc = h.type == WIRE_HELLO_ACK ? wire_get_hello_ack(&h, body, &r->ack) : RDKV_EPROTO;
    free(body);
    if (rc) goto out;
    if (r->ack.status) snprintf(r->why, sizeof r->why, "refused: %s", rdkv_strerror(r->ack.status));
    rc = r->ack.status;
out:
    auth_wipe(&keys);
    return rc;
}

int raw_send_rpc(struct raw *r, uint64_t id, uint16_t type, const void *payload, uint32_t len)
{
    uint8_t f[WIRE_HDR_SIZE + WIRE_RPC_SIZE];
    wire_put_rpc_req(f, id, type, len);
    int rc = raw_send(r, f, sizeof f);
    return rc || !len ? rc : raw_send(r, payload, len);
}

int raw_send_op(struct raw *r, const struct wire_op_req *op, const void *payload)
{
    uint32_t plen = payload ? op->len : 0;
    uint8_t f[WIRE_HDR_SIZE + WIRE_OP_REQ_SIZE];
    wire_put_op_req(f, op, plen);
    int rc = raw_send(r, f, sizeof f);
    return rc || !plen ? rc : raw_send(r, payload, plen);
}

int raw_rpc_reply(struct raw *r, uint64_t id, int32_t *status, void *out, size_t cap, size_t *len)
{
    for (;;) {
        struct wire_hdr h;
        uint8_t *body;
        int rc = raw_recv_frame(r, &h, &body);
        if (rc) return rc;
        if (h.type == WIRE_RPC_RESP) {
            struct wire_rpc m;
            const uint8_t *pl;
            size_t pn;
            if (wire_get_rpc(&h, body, &m, &pl, &pn) == 0 && m.id == id) {
                *status = m.status;
                if (out) memcpy(out, pl, pn < cap ? pn : cap);
                if (len) *len = pn;
                free(body);
                return 0;
            }
        }
        free(body);
    }
}

int raw_closed_by_peer(struct raw *r)
{
    uint8_t b[4096];
    for (;;) {
        if (wait_fd(r, POLLIN)) return 0;
        ssize_t k = recv(r->fd, b, sizeof b, MSG_DONTWAIT);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) return 1;
    }
}

void raw_close(struct raw *r)
{
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
}

long raw_rss_kib(int pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
    fclose(f);
    return kib;
}
