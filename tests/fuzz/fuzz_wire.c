/* Fuzz target: every decoder of bytes that arrive from the network -- frame reassembly with
 * arbitrary chunking, and the hello, one-sided and RPC body decoders. Built for libFuzzer with
 * clang, and for the bounded smoke run in the test suite with the driver in driver.c. */
#include "rdma/wire.h"

#include <stdint.h>
#include <string.h>

static int on_frame(void *arg, const struct wire_hdr *h, const uint8_t *body)
{
    (void)arg;
    struct wire_hello hello;
    struct wire_hello_ack ack;
    struct wire_op_req rq;
    struct wire_op_resp rs;
    struct wire_rpc rpc;
    const uint8_t *p;
    size_t n;
    volatile uint64_t sink = 0;
    if (!wire_get_hello(h, body, &hello)) sink += hello.cluster_fp;
    if (!wire_get_hello_ack(h, body, &ack)) sink += ack.arena_size;
    if (!wire_get_op_req(h, body, &rq, &p)) {
        /* the payload the decoder hands out lies inside the frame */
        if (rq.op == 2 && rq.len) sink += p[rq.len - 1];
    }
    if (!wire_get_op_resp(h, body, &rs, &p) && rs.len) sink += p[rs.len - 1];
    if (!wire_get_rpc(h, body, &rpc, &p, &n) && n) sink += p[n - 1];
    (void)sink;
    return 0;
}

static int on_frame_stop(void *arg, const struct wire_hdr *h, const uint8_t *body)
{
    unsigned *frames = arg;
    on_frame(NULL, h, body);
    return (++*frames & 1) ? WIRE_ASM_STOP : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    /* the first byte picks the chunk size, so splits land everywhere */
    size_t chunk = (size_t)data[0] % 64 + 1;
    data++;
    size--;
    struct wire_asm a;
    wire_asm_init(&a, 1u << 16);
    for (size_t at = 0; at < size; at += chunk) {
        size_t n = size - at < chunk ? size - at : chunk;
        if (wire_asm_feed(&a, data + at, n, on_frame, NULL)) break;
    }
    wire_asm_free(&a);
    /* as the node service feeds it: the pre-authentication limit until the first frame, and a
     * stop after every other frame, the rest fed again (backpressure) */
    struct wire_asm b;
    wire_asm_init(&b, 1u << 16);
    wire_asm_set_limit(&b, (chunk & 1) ? WIRE_PREAUTH_MAX : 0);
    unsigned frames = 0;
    for (size_t at = 0; at < size;) {
        size_t n = size - at < chunk ? size - at : chunk, used = 0;
        int rc = wire_asm_feed_part(&b, data + at, n, on_frame_stop, &frames, &used);
        if (rc < 0 || used > n) break;
        at += used;
        if (rc == 0 && used != n) break; /* fed without a stop: everything was taken */
        wire_asm_set_limit(&b, 0);
    }
    wire_asm_free(&b);
    return 0;
}
