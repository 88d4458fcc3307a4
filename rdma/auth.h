/* Credentials of the fabric's handshake (docs/security.md): the secret files, the two keys, and
 * the proofs that HELLO, AUTH_CHALLENGE and AUTH carry. Keyed BLAKE2b from libsodium; proofs are
 * compared in constant time. A client key is derived from the node key one way, so holding the
 * client key proves nothing about the node key.
 *
 * Secret file format (text; '#' starts a comment; exactly one key line):
 *     node-key <64 hex digits>     the cluster's node secret K: nodes and operator tools only
 *     client-key <64 hex digits>   the client secret BLAKE2b(key K, "rdkv client key")
 * A node file yields both keys (the client key is derived); a client file only the client key.
 * The file must not be readable or writable by group or others (chmod 600). */
#ifndef RDKV_AUTH_H
#define RDKV_AUTH_H

#include "wire.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AUTH_KEY_SIZE 32
#define AUTH_FILE_MAX 4096

struct auth_keys {
    bool have_node, have_client;
    uint8_t node[AUTH_KEY_SIZE];
    uint8_t client[AUTH_KEY_SIZE];
};

/* Parses a secret file's text (name is for messages). 0 or RDKV_ECONFIG with a reason in err. */
int auth_parse(const char *text, size_t len, const char *name, struct auth_keys *k, char *err,
               size_t errcap);
/* Loads and parses path, refusing a file that group or others may read or write. */
int auth_load(const char *path, struct auth_keys *k, char *err, size_t errcap);
/* Creates a fresh node secret file at node_path and its client secret file at client_path (both
 * mode 0600, neither may exist yet). 0, RDKV_EEXIST or RDKV_EIO with a reason in err. */
int auth_generate(const char *node_path, const char *client_path, char *err, size_t errcap);
/* The key a role proves with (NULL when k lacks it). */
const uint8_t *auth_key(const struct auth_keys *k, uint8_t role);
/* A fresh random nonce. */
void auth_nonce(uint8_t out[WIRE_NONCE_SIZE]);
/* The proof of one side of the handshake: keyed BLAKE2b over a domain label, the side ('S' the
 * node, 'C' the caller), both nonces, and the hello's claims (src, dst, role, kind, cluster
 * fingerprint). */
void auth_mac(const uint8_t key[AUTH_KEY_SIZE], char side, const struct wire_hello *h,
              const uint8_t node_nonce[WIRE_NONCE_SIZE], uint8_t out[WIRE_MAC_SIZE]);
/* Constant-time comparison of two proofs. */
bool auth_mac_equal(const uint8_t a[WIRE_MAC_SIZE], const uint8_t b[WIRE_MAC_SIZE]);
/* Erases the keys. */
void auth_wipe(struct auth_keys *k);

#endif
