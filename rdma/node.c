/* The node's state: options, transport names, the node record (struct fabric) with its
 * credential and peers' addresses, fencing's bounds, accessors, hooks and RPC registration. It
 * calls nothing above it: bringing a node up and down is open.c's, its regions region.c's. */
#include "internal.h"

#include "common/clock.h"
#include "common/log.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_ARENA (256ull << 20)
#define MIN_ARENA (64ull << 10)

void fab_opts_init(struct fab_opts *o)
{
    memset(o, 0, sizeof *o);
    o->transport = FAB_AUTO;
    o->listen_fd = -1;
    o->rpc_threads = 2;
    o->op_timeout_ns = 5 * NS_PER_S;
    o->rpc_timeout_ns = 10 * NS_PER_S;
    o->connect_timeout_ns = 2 * NS_PER_S;
    o->spin_ns = 20 * NS_PER_US;
    o->rpc_max_bytes = 16u << 20;
    o->verbs_port = 1;
    o->verbs_gid_index = -1;
    o->verbs_cm = FAB_CM_AUTO;
}

int fab_transport_parse(const char *s, enum fab_transport *out)
{
    if (!s) return RDKV_EINVAL;
    if (!strcmp(s, "soft")) *out = FAB_SOFT;
    else if (!strcmp(s, "verbs")) *out = FAB_VERBS;
    else if (!strcmp(s, "auto")) *out = FAB_AUTO;
    else return RDKV_EINVAL;
    return 0;
}

const char *fab_transport_name(enum fab_transport t)
{
    switch (t) {
    case FAB_SOFT: return "soft";
    case FAB_VERBS: return "verbs";
    case FAB_AUTO: return "auto";
    }
    return "?";
}

/* ------------------------------------------------------------------------------------------ */
/* Credentials and peers' addresses */

#define PEER_ADDRS_MAX 4

struct peer_addrs {
    unsigned n;
    bool any;      /* unknown or wildcard: no address check */
    bool loopback; /* a loopback host: any loopback source matches */
    struct sockaddr_storage a[PEER_ADDRS_MAX];
};

/* The source's address in a comparable form: an IPv4-mapped IPv6 address becomes IPv4. */
static int addr_bytes(const struct sockaddr_storage *s, uint8_t out[16], bool *loop)
{
    if (s->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)s;
        memcpy(out, &in->sin_addr, 4);
        *loop = out[0] == 127;
        return 4;
    }
    if (s->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)s;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            memcpy(out, in6->sin6_addr.s6_addr + 12, 4);
            *loop = out[0] == 127;
            return 4;
        }
        memcpy(out, in6->sin6_addr.s6_addr, 16);
        *loop = IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
        return 16;
    }
    return 0;
}

static void resolve_peers(struct fabric *f)
{
    for (unsigned i = 0; i < f->nnodes; i++) {
        struct peer_addrs *p = &f->addrs[i];
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
        if (getaddrinfo(f->cc->nodes[i].host, NULL, &hints, &ai) || !ai) {
            p->any = true;
            continue;
        }
        for (struct addrinfo *a = ai; a && p->n < PEER_ADDRS_MAX; a = a->ai_next) {
            if (a->ai_addrlen > sizeof p->a[0]) continue;
            struct sockaddr_storage ss;
            memset(&ss, 0, sizeof ss);
            memcpy(&ss, a->ai_addr, a->ai_addrlen);
            uint8_t b[16];
            bool loop = false;
            int len = addr_bytes(&ss, b, &loop);
            if (!len) continue;
            static const uint8_t zero[16];
            if (!memcmp(b, zero, (size_t)len)) p->any = true; /* 0.0.0.0 or :: */
            if (loop) p->loopback = true;
            p->a[p->n++] = ss;
        }
        if (p->n == 0) p->any = true;
        freeaddrinfo(ai);
    }
}

bool fab_peer_addr_ok(const struct fabric *f, uint16_t node, const struct sockaddr_storage *src)
{
    if (!f->addrs || node >= f->nnodes) return false;
    const struct peer_addrs *p = &f->addrs[node];
    if (p->any) return true;
    uint8_t b[16];
    bool loop = false;
    int len = addr_bytes(src, b, &loop);
    if (!len) return false;
    if (loop && p->loopback) return true;
    for (unsigned i = 0; i < p->n; i++) {
        uint8_t c[16];
        bool cl;
        if (addr_bytes(&p->a[i], c, &cl) == len && !memcmp(b, c, (size_t)len)) return true;
    }
    return false;
}

/* Loads the credential and decides this fabric's role; refuses a node without one. */
static int open_credential(struct fabric *f, char *err, size_t errcap)
{
    const char *path = f->o.secret_file;
    if (!path && f->cc->secret_file[0]) path = f->cc->secret_file;
    if (!path && f->node == FAB_NODE_CLIENT && getenv("RDKV_SECRET_FILE") &&
        *getenv("RDKV_SECRET_FILE"))
        path = getenv("RDKV_SECRET_FILE");
    if (path) {
        int rc = auth_load(path, &f->keys, err, errcap);
        if (rc) return rc;
    }
    bool node = f->node != FAB_NODE_CLIENT;
    if (node && f->keys.have_client && !f->keys.have_node) {
        snprintf(err, errcap,
                 "%s holds a client secret; node %u needs the cluster's node secret (the file "
                 "whose key line says node-key)", path, f->node);
        auth_wipe(&f->keys);
        return RDKV_ECONFIG;
    }
    if (node && !f->keys.have_node && !f->o.insecure) {
        snprintf(err, errcap,
                 "node %u has no cluster secret: give --secret-file FILE or a 'secret_file' line "
                 "in the cluster config (kvcluster and tools/cluster.sh generate one), or "
                 "--insecure for benchmarks on a trusted host only", f->node);
        return RDKV_ECONFIG;
    }
    /* An operator tool proves the node key; towards --insecure nodes it only claims the role. */
    bool operator = (f->keys.have_node || f->o.insecure) && !f->o.client_role;
    f->role = node || operator ? WIRE_ROLE_NODE : WIRE_ROLE_CLIENT;
    if (node && f->o.insecure)
        log_warn("node %u runs --insecure: it accepts every connection without a credential, "
                 "and anyone who reaches its port can read and write its memory (benchmarks "
                 "only)", f->node);
    if (node) {
        f->addrs = calloc(f->nnodes, sizeof *f->addrs);
        if (!f->addrs) return RDKV_ENOMEM;
        resolve_peers(f);
    }
    return 0;
}

int fab_node_new(const struct fab_opts *o, struct fabric **out, char *err, size_t errcap)
{
    *out = NULL;
    if (!o->cluster || o->cluster->n == 0) {
        snprintf(err, errcap, "no cluster configuration");
        return RDKV_EINVAL;
    }
    if (o->node != FAB_NODE_CLIENT && o->node >= o->cluster->n) {
        snprintf(err, errcap, "node %u is not in the cluster configuration (nodes 0..%u)", o->node,
                 o->cluster->n - 1);
        return RDKV_ECONFIG;
    }
    struct fabric *f = calloc(1, sizeof *f);
    if (!f) return RDKV_ENOMEM;
    f->o = *o;
    if (!f->o.rpc_threads) f->o.rpc_threads = 1;
    if (f->o.op_timeout_ns <= 0) f->o.op_timeout_ns = 5 * NS_PER_S;
    if (f->o.rpc_timeout_ns <= 0) f->o.rpc_timeout_ns = 10 * NS_PER_S;
    if (f->o.connect_timeout_ns <= 0) f->o.connect_timeout_ns = 2 * NS_PER_S;
    if (f->o.rpc_max_bytes < (1u << 20)) f->o.rpc_max_bytes = 1u << 20;
    f->cc = o->cluster;
    f->node = o->node;
    f->nnodes = o->cluster->n;
    f->start_ns = clock_now_ns();
    /* (0: the wall clock's microseconds -- later than any earlier process of this node had, as
     * long as the clock does not go back; a node with a data directory passes its own) */
    f->incarnation = o->incarnation ? o->incarnation : clock_wall_us();
    pthread_mutex_init(&f->region_lock, NULL);
    int rc = open_credential(f, err, errcap);
    if (!rc && !(f->fence_upto = calloc(f->nnodes, sizeof *f->fence_upto))) rc = RDKV_ENOMEM;
    if (rc) {
        fab_node_free(f);
        return rc;
    }
    *out = f;
    return 0;
}

void fab_node_free(struct fabric *f)
{
    pthread_mutex_destroy(&f->region_lock);
    auth_wipe(&f->keys);
    free(f->addrs);
    free((void *)f->fence_upto);
    free(f);
}

bool fab_fenced(const struct fabric *f, uint16_t node, uint64_t inc)
{
    if (node >= f->nnodes || !f->fence_upto) return false;
    uint64_t upto = atomic_load(&f->fence_upto[node]);
    return upto && inc <= upto;
}

uint16_t fab_node_id(const struct fabric *f) { return f->node; }
uint64_t fab_incarnation(const struct fabric *f) { return f->incarnation; }
unsigned fab_num_nodes(const struct fabric *f) { return f->nnodes; }
enum fab_transport fab_transport_of(const struct fabric *f) { return f->transport; }
const struct cluster_config *fab_cluster(const struct fabric *f) { return f->cc; }
void *fab_arena_base(const struct fabric *f) { return f->arena; }
uint64_t fab_arena_size(const struct fabric *f) { return f->arena_size; }

void *fab_local(const struct fabric *f, rptr p)
{
    if (rptr_node(p) != f->node || !f->arena) return NULL;
    uint64_t off = rptr_off(p);
    return off < f->arena_size ? f->arena + off : NULL;
}

rptr fab_rptr_of(const struct fabric *f, const void *p)
{
    const uint8_t *b = p;
    if (!f->arena || b < f->arena || b >= f->arena + f->arena_size) return RPTR_NULL;
    return rptr_make(f->node, (uint64_t)(b - f->arena));
}

void fab_soft_set_atomic_hook(struct fabric *f, fab_atomic_hook fn, void *arg)
{
    atomic_store_explicit(&f->hook_arg, arg, memory_order_release);
    atomic_store_explicit(&f->hook_fn, fn, memory_order_release);
}

void fab_set_rpc_hook(struct fabric *f, fab_rpc_hook fn, void *arg)
{
    atomic_store_explicit(&f->rpc_hook_arg, arg, memory_order_release);
    atomic_store_explicit(&f->rpc_hook_fn, fn, memory_order_release);
}

int fab_rpc_register(struct fabric *f, uint16_t type, fab_rpc_handler fn, void *arg, unsigned flags)
{
    if (type >= FAB_RPC_MAX_TYPES || !fn) return RDKV_EINVAL;
    struct rpc_entry *e = &f->rpc[type];
    if (atomic_load(&e->fn)) return RDKV_EEXIST;
    e->arg = arg;
    e->flags = flags;
    atomic_store_explicit(&e->fn, fn, memory_order_release);
    return 0;
}

