/* The soft transport's NIC: on a node's service thread, it executes the one-sided requests that
 * arrive on the service's connections against the arena -- one thread, in arrival order, atomics
 * as load-compute-store serialized among themselves but not atomic with CPU atomics, aligned
 * words moved whole -- and appends each response to the connection it came on. */
#include "nic.h"

#include "common/clock.h"
#include "common/fence.h"

#include <string.h>

/* The NIC's word accesses: release/acquire, so a CPU thread that sees a value the NIC stored also
 * sees what happened before it on the wire (as with a real RNIC, whose DMA write is visible
 * before its completion is), and plain movs on x86. */
static inline uint64_t load64(const uint8_t *p)
{
    return __atomic_load_n((const uint64_t *)(const void *)p, __ATOMIC_ACQUIRE);
}
static inline void store64(uint8_t *p, uint64_t v)
{
    __atomic_store_n((uint64_t *)(void *)p, v, __ATOMIC_RELEASE);
}

/* Copies between the arena and a private buffer so that every 8-byte-aligned arena word moves
 * in one 8-byte access (RDMA's one promise for READ/WRITE atomicity), and bytes of partial words
 * move one by one. CPU threads on the node read and write arena words concurrently with the NIC
 * by design; word-sized atomic accesses keep that well defined. */
static void arena_copy(uint8_t *dst, const uint8_t *src, size_t n, bool dst_is_arena)
{
    uint8_t *arena = dst_is_arena ? dst : (uint8_t *)(uintptr_t)src;
    size_t i = 0;
    while (i < n && ((uintptr_t)(arena + i) & 7)) {
        if (dst_is_arena) __atomic_store_n(&dst[i], src[i], __ATOMIC_RELEASE);
        else dst[i] = __atomic_load_n(&src[i], __ATOMIC_ACQUIRE);
        i++;
    }
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        if (dst_is_arena) {
            memcpy(&v, src + i, 8);
            store64(dst + i, v);
        } else {
            v = load64(src + i);
            memcpy(dst + i, &v, 8);
        }
    }
    for (; i < n; i++) {
        if (dst_is_arena) __atomic_store_n(&dst[i], src[i], __ATOMIC_RELEASE);
        else dst[i] = __atomic_load_n(&src[i], __ATOMIC_ACQUIRE);
    }
}

static void nic_respond(struct io_uring *ring, struct conn *cn, int status, uint64_t value,
                        const uint8_t *data, uint32_t len)
{
    uint8_t *p = conn_reserve(cn, WIRE_HDR_SIZE + WIRE_OP_RESP_SIZE + len);
    if (!p) {
        conn_close(ring, cn);
        return;
    }
    struct wire_op_resp r = {.status = status, .len = len, .value = value};
    wire_put_op_resp(p, &r);
    if (len) arena_copy(p + WIRE_HDR_SIZE + WIRE_OP_RESP_SIZE, data, len, false);
}

void soft_nic_exec(struct fabric *f, struct io_uring *ring, struct conn *cn, bool *qp_error,
                   int refuse, const struct wire_hdr *h, const uint8_t *body)
{
    struct wire_op_req rq;
    const uint8_t *payload;
    if (wire_get_op_req(h, body, &rq, &payload)) {
        conn_close(ring, cn);
        return;
    }
    if (!f->arena) {
        nic_respond(ring, cn, RDKV_ENOTSUP, 0, NULL, 0);
        return;
    }
    if (refuse) {
        nic_respond(ring, cn, refuse, 0, NULL, 0);
        return;
    }
    if (*qp_error) {
        nic_respond(ring, cn, RDKV_EFLUSHED, 0, NULL, 0);
        return;
    }
    uint64_t size = f->arena_size;
    bool atomic = rq.op == FAB_OP_CAS || rq.op == FAB_OP_FAA;
    uint64_t len = atomic ? 8 : rq.len;
    bool ok = (rq.op >= FAB_OP_READ && rq.op <= FAB_OP_FAA) && len > 0 && rq.off < size &&
              len <= size - rq.off && (!atomic || (rq.off & 7) == 0);
    if (!ok) {
        *qp_error = true;
        nic_respond(ring, cn, RDKV_EACCESS, 0, NULL, 0);
        return;
    }
    uint8_t *addr = f->arena + rq.off;
    switch (rq.op) {
    case FAB_OP_READ:
        nic_respond(ring, cn, 0, 0, addr, rq.len);
        return;
    case FAB_OP_WRITE:
        arena_copy(addr, payload, rq.len, true);
        /* A NIC's DMA write is visible before any later access it makes (PCIe reads do not pass
         * posted writes); without this fence x86 could let the next READ's loads pass the store
         * (Peterson's store->load order depends on it). */
        full_fence();
        nic_respond(ring, cn, 0, 0, NULL, 0);
        return;
    default: {
        /* A NIC atomic: load, compute, store -- serialized with every other NIC atomic on this
         * node because this one thread runs them all, but NOT atomic with CPU atomics. */
        uint64_t old = load64(addr);
        fab_atomic_hook hook = atomic_load_explicit(&f->hook_fn, memory_order_acquire);
        if (hook) hook(atomic_load_explicit(&f->hook_arg, memory_order_acquire),
                       rptr_make(f->node, rq.off), old);
        if (f->o.soft_atomic_pause_ns > 0) clock_sleep_ns(f->o.soft_atomic_pause_ns);
        uint64_t nv = rq.op == FAB_OP_FAA ? old + rq.arg : (old == rq.arg ? rq.swap : old);
        if (rq.op == FAB_OP_FAA || old == rq.arg) store64(addr, nv);
        full_fence(); /* as for WRITE */
        nic_respond(ring, cn, 0, old, NULL, 0);
        return;
    }
    }
}
