/* Fuzz target: the handshake's decoders of outside bytes -- HELLO, AUTH_CHALLENGE and AUTH bodies
 * behind any frame header, and the secret-file parser (rdma/auth.c), whose input a user supplies.
 * Built for libFuzzer with clang, and for the bounded smoke run with the driver in driver.c. */
#include "rdma/auth.h"
#include "rdma/wire.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    volatile uint64_t sink = 0;
    uint8_t mode = data[0];
    data++;
    size--;
    if (mode & 1) {
        /* a secret file's text */
        struct auth_keys k;
        char err[256];
        if (!auth_parse((const char *)data, size, "fuzz", &k, err, sizeof err))
            sink += k.have_node + k.have_client + k.client[0];
        else
            sink += (uint8_t)err[0];
        auth_wipe(&k);
        (void)sink;
        return 0;
    }
    /* a handshake frame: header, then whatever body follows (the reassembler bounds the length
     * by type before a decoder sees it; here the decoders see any length up to what is there) */
    if (size < WIRE_HDR_SIZE) return 0;
    struct wire_hdr h;
    wire_get_hdr(data, &h);
    const uint8_t *body = data + WIRE_HDR_SIZE;
    size_t avail = size - WIRE_HDR_SIZE;
    if (h.len > avail) h.len = (uint32_t)avail;
    uint8_t copy[256];
    if (h.len > sizeof copy) return 0;
    memcpy(copy, body, h.len); /* a decoder must read no byte past h.len (ASan catches it) */
    struct wire_hello hello;
    struct wire_challenge ch;
    struct wire_auth au;
    static const uint8_t key[AUTH_KEY_SIZE] = {1, 2, 3};
    if (!wire_get_hello(&h, copy, &hello)) {
        uint8_t mac[WIRE_MAC_SIZE];
        auth_mac(key, 'C', &hello, hello.nonce, mac);
        sink += mac[0] + hello.role + hello.flags;
    }
    if (!wire_get_challenge(&h, copy, &ch)) sink += auth_mac_equal(ch.mac, ch.nonce);
    if (!wire_get_auth(&h, copy, &au)) sink += au.mac[31];
    (void)sink;
    return 0;
}
