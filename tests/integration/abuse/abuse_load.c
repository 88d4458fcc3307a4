/* abuse_load: keeps abuse rows 6-8 of issue 17 running against one node for a while, for the
 * measurement in docs/benchmarks.md ("Under abuse"; tools/abuse_bench.sh): a well-behaved
 * client's latency is taken with and without it. 127.0.0.1-style endpoints only; every loop is
 * bounded by the duration given.
 *
 *   abuse_load HOST PORT NODE SECONDS [SECRET_FILE]
 *
 * row 6: 4 connections (claiming node NODE+1's identity) each pipeline 1,000 READs of 1 MiB and
 *        never read;
 * row 7: connections announce a 16 MiB frame before HELLO, over and over;
 * row 8: up to 200 connections that never say HELLO are held open (the node's handshake timeout
 *        closes them; they are opened again). */
#include "tests/integration/abuse/raw.h"

#include "common/clock.h"
#include "rdma/fabric.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOW_READERS 4
#define HOLDERS 200

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: abuse_load HOST PORT NODE SECONDS [SECRET_FILE]\n");
        return 2;
    }
    const char *host = argv[1];
    uint16_t port = (uint16_t)atoi(argv[2]);
    uint16_t node = (uint16_t)atoi(argv[3]);
    double secs = atof(argv[4]);
    const char *secret = argc > 5 ? argv[5] : NULL;
    if (secs <= 0 || secs > 3600) {
        fprintf(stderr, "abuse_load: SECONDS must be in (0, 3600]\n");
        return 2;
    }
    int64_t end = clock_now_ns() + (int64_t)(secs * 1e9);
    static struct raw slow[SLOW_READERS], hold[HOLDERS];
    unsigned reads = 0, big = 0, held = 0;
    for (unsigned i = 0; i < SLOW_READERS; i++) {
        struct raw_opts o = {.src_node = (uint16_t)(node + 1), .dst_node = node,
                             .secret_file = secret, .timeout_ms = 1000};
        if (raw_dial(&slow[i], host, port, &o)) {
            fprintf(stderr, "abuse_load: slow reader %u: %s\n", i, slow[i].why);
            continue;
        }
        for (unsigned k = 0; k < 1000; k++) {
            struct wire_op_req op = {.op = FAB_OP_READ, .len = WIRE_OP_MAX, .off = 0};
            if (raw_send_op(&slow[i], &op, NULL)) break;
            reads++;
        }
    }
    for (unsigned i = 0; i < HOLDERS; i++) hold[i].fd = -1;
    unsigned rounds = 0;
    while (clock_now_ns() < end && rounds < 1000000) {
        rounds++;
        /* row 7 */
        struct raw b;
        struct raw_opts nh = {.no_hello = 1, .timeout_ms = 200};
        if (raw_dial(&b, host, port, &nh) == 0) {
            uint8_t hdr[WIRE_HDR_SIZE];
            wire_put_hdr(hdr, WIRE_RPC_REQ, 16u << 20);
            raw_send(&b, hdr, sizeof hdr);
            big++;
        }
        raw_close(&b);
        /* row 8: refill the held connections the node closed */
        for (unsigned i = 0; i < HOLDERS; i++) {
            if (hold[i].fd >= 0) continue;
            if (raw_dial(&hold[i], host, port, &nh) == 0) held++;
            else raw_close(&hold[i]);
        }
        for (unsigned i = 0; i < HOLDERS; i += 10) /* notice some the node closed */
            if (hold[i].fd >= 0 && raw_closed_by_peer(&(struct raw){.fd = hold[i].fd, .timeout_ms = 0}))
                raw_close(&hold[i]);
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    for (unsigned i = 0; i < SLOW_READERS; i++) raw_close(&slow[i]);
    for (unsigned i = 0; i < HOLDERS; i++) raw_close(&hold[i]);
    printf("abuse_load: %u READs of 1 MiB unread on %u connections, %u 16 MiB pre-HELLO frames, "
           "%u connections held without HELLO\n",
           reads, SLOW_READERS, big, held);
    return 0;
}
