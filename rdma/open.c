/* A node's life: fab_open picks the backend from the registry, maps the arena, listens, opens the
 * backend's node and starts the service; fab_fence and fab_close. The top of rdma/: it calls down
 * into the core (node.c, conn.c, service.c) and into the backends through their tables, and
 * nothing in rdma/ calls it. */
#include "internal.h"

#include "common/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define DEFAULT_ARENA (256ull << 20)
#define MIN_ARENA (64ull << 10)

/* The registry: every backend, in the order FAB_AUTO tries them (the first that can run here). */
static const struct fab_backend *const backends[] = {&fab_verbs_backend, &fab_soft_backend};

static const struct fab_backend *backend_of(enum fab_transport t)
{
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (backends[i]->transport == t) return backends[i];
    return NULL;
}

static bool backend_runs(const struct fab_backend *be) { return !be->available || be->available(); }

/* The backend that transport t names (FAB_AUTO: the first that can run here), or NULL with the
 * reason in err. */
static const struct fab_backend *backend_pick(enum fab_transport t, char *err, size_t errcap)
{
    for (size_t i = 0; t == FAB_AUTO && i < sizeof backends / sizeof backends[0]; i++)
        if (backend_runs(backends[i])) return backends[i];
    const struct fab_backend *be = backend_of(t);
    if (!be) snprintf(err, errcap, "transport %s: no such backend", fab_transport_name(t));
    else if (!backend_runs(be))
        snprintf(err, errcap, "transport %s: %s", fab_transport_name(t), be->why);
    else return be;
    return NULL;
}

bool fab_verbs_available(void)
{
    const struct fab_backend *be = backend_of(FAB_VERBS);
    return be && backend_runs(be);
}

static void echo_handler(struct fab_rpc_req *req, void *arg)
{
    (void)arg;
    fab_rpc_reply(req, 0, fab_rpc_data(req), fab_rpc_len(req));
}

/* Maps a node's arena and writes its header (its region directory starts empty). */
static int arena_map(struct fabric *f, char *err, size_t errcap)
{
    uint64_t size = f->o.arena_size ? f->o.arena_size : f->cc->arena_size;
    if (!size) size = DEFAULT_ARENA;
    size = (size + 4095) & ~4095ull;
    if (size < MIN_ARENA || size > RPTR_OFF_MASK) {
        snprintf(err, errcap, "arena size %llu is outside %llu..2^48 bytes",
                 (unsigned long long)size, (unsigned long long)MIN_ARENA);
        return RDKV_EINVAL;
    }
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (m == MAP_FAILED) {
        snprintf(err, errcap, "cannot map a %llu-byte arena: %s", (unsigned long long)size,
                 strerror(errno));
        return RDKV_ENOMEM;
    }
    f->arena = m;
    f->arena_size = size;
    struct arena_hdr *h = (struct arena_hdr *)f->arena;
    h->size = size;
    h->next_free = ARENA_HDR_SIZE;
    h->version = 1;
    __atomic_store_n(&h->magic, ARENA_MAGIC, __ATOMIC_RELEASE);
    return 0;
}

/* What fab_open set up after the node record, and the record. */
static void node_teardown(struct fabric *f)
{
    if (f->be && f->be->node_close) f->be->node_close(f);
    if (f->arena) munmap(f->arena, f->arena_size);
    fab_node_free(f);
}

int fab_open(const struct fab_opts *o, struct fabric **out, char *err, size_t errcap)
{
    char dummy[8];
    if (!err) {
        err = dummy;
        errcap = sizeof dummy;
    }
    err[0] = 0;
    *out = NULL;
    struct fabric *f;
    int rc = fab_node_new(o, &f, err, errcap);
    if (rc) return rc;
    int listen_fd = o->listen_fd;
    const struct fab_backend *be = backend_pick(o->transport, err, errcap);
    if (!be) {
        rc = RDKV_ENOTSUP;
        goto fail;
    }
    f->be = be;
    f->transport = be->transport;

    if (f->node != FAB_NODE_CLIENT) {
        rc = arena_map(f, err, errcap);
        if (rc) goto fail;
        if (listen_fd < 0) {
            const struct cluster_node *me = &o->cluster->nodes[f->node];
            rc = net_listen(me->host, me->port, &listen_fd, err, errcap);
            if (rc) goto fail;
        }
    }

    if (f->be->node_open) {
        rc = f->be->node_open(f, err, errcap);
        if (rc) goto fail;
    }

    fab_rpc_register(f, FAB_RPC_ECHO, echo_handler, NULL, FAB_RPC_INLINE);

    if (f->node != FAB_NODE_CLIENT) {
        rc = svc_start(f, listen_fd, err, errcap);
        if (rc) goto fail;
        listen_fd = -1; /* the service owns it now */
    }
    *out = f;
    return 0;

fail:
    if (listen_fd >= 0 && listen_fd != o->listen_fd) close(listen_fd);
    node_teardown(f);
    return rc;
}

void fab_close(struct fabric *f)
{
    if (!f) return;
    svc_stop(f);
    node_teardown(f);
}

int fab_fence(struct fabric *f, uint16_t node, uint64_t upto)
{
    if (node >= f->nnodes || node == f->node || !f->fence_upto) return RDKV_EINVAL;
    if (atomic_exchange(&f->fence_upto[node], upto) == upto) return 0;
    if (upto) log_info("fenced node %u's processes up to incarnation %llu", node,
                       (unsigned long long)upto);
    else log_info("node %u is no longer fenced", node);
    if (f->be->fence) f->be->fence(f, node);
    svc_sync(f);
    return 0;
}
