/* Credentials and proofs of the handshake: see auth.h. */
#include "auth.h"

#include "common/pack.h"
#include "rdkv_status.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CLIENT_KEY_LABEL "rdkv client key"
#define MAC_LABEL "rdkv-auth-v2"

static void sodium_once(void)
{
    /* Idempotent and thread-safe; -1 only when the library cannot initialise, after which its
     * functions still work (randombytes falls back to the kernel's getrandom). */
    if (sodium_init() < 0) return;
}

static void derive_client(const uint8_t node[AUTH_KEY_SIZE], uint8_t out[AUTH_KEY_SIZE])
{
    crypto_generichash(out, AUTH_KEY_SIZE, (const unsigned char *)CLIENT_KEY_LABEL,
                       sizeof CLIENT_KEY_LABEL - 1, node, AUTH_KEY_SIZE);
}

int auth_parse(const char *text, size_t len, const char *name, struct auth_keys *k, char *err,
               size_t errcap)
{
    sodium_once();
    memset(k, 0, sizeof *k);
    if (len > AUTH_FILE_MAX) {
        snprintf(err, errcap, "%s: too large for a secret file (limit %u bytes)", name,
                 AUTH_FILE_MAX);
        return RDKV_ECONFIG;
    }
    char buf[AUTH_FILE_MAX + 1];
    memcpy(buf, text, len);
    buf[len] = 0;
    if (memchr(buf, 0, len)) {
        snprintf(err, errcap, "%s: not a secret file (contains a NUL byte)", name);
        return RDKV_ECONFIG;
    }
    unsigned lineno = 0, keys = 0;
    int rc = 0;
    for (char *p = buf, *next; p && !rc; p = next) {
        lineno++;
        char *nl = strchr(p, '\n');
        next = nl ? nl + 1 : NULL;
        if (nl) *nl = 0;
        char *hash = strchr(p, '#');
        if (hash) *hash = 0;
        char kw[16], hex[80], extra[2];
        int nw = sscanf(p, "%15s %79s %1s", kw, hex, extra);
        if (nw <= 0) continue;
        bool node = !strcmp(kw, "node-key"), client = !strcmp(kw, "client-key");
        uint8_t key[AUTH_KEY_SIZE];
        size_t got = 0;
        if (nw != 2 || (!node && !client)) {
            snprintf(err, errcap, "%s:%u: expected 'node-key HEX' or 'client-key HEX'", name,
                     lineno);
            rc = RDKV_ECONFIG;
        } else if (strlen(hex) != 2 * AUTH_KEY_SIZE ||
                   sodium_hex2bin(key, sizeof key, hex, strlen(hex), NULL, &got, NULL) ||
                   got != AUTH_KEY_SIZE) {
            snprintf(err, errcap, "%s:%u: the key must be %u hex digits", name, lineno,
                     2 * AUTH_KEY_SIZE);
            rc = RDKV_ECONFIG;
        } else if (++keys > 1) {
            snprintf(err, errcap, "%s:%u: more than one key line", name, lineno);
            rc = RDKV_ECONFIG;
        } else if (node) {
            memcpy(k->node, key, AUTH_KEY_SIZE);
            derive_client(k->node, k->client);
            k->have_node = k->have_client = true;
        } else {
            memcpy(k->client, key, AUTH_KEY_SIZE);
            k->have_client = true;
        }
        sodium_memzero(key, sizeof key);
        sodium_memzero(hex, sizeof hex);
    }
    sodium_memzero(buf, sizeof buf);
    if (!rc && keys == 0) {
        snprintf(err, errcap, "%s: no 'node-key HEX' or 'client-key HEX' line", name);
        rc = RDKV_ECONFIG;
    }
    if (rc) auth_wipe(k);
    return rc;
}

int auth_load(const char *path, struct auth_keys *k, char *err, size_t errcap)
{
    memset(k, 0, sizeof *k);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        snprintf(err, errcap, "secret file %s: cannot open: %s", path, strerror(errno));
        return RDKV_ECONFIG;
    }
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        snprintf(err, errcap, "secret file %s: not a regular file", path);
        close(fd);
        return RDKV_ECONFIG;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        snprintf(err, errcap,
                 "secret file %s is accessible to group or others (mode %03o); make it the "
                 "owner's only with: chmod 600 %s",
                 path, (unsigned)(st.st_mode & 0777), path);
        close(fd);
        return RDKV_ECONFIG;
    }
    char buf[AUTH_FILE_MAX + 1];
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, sizeof buf - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            snprintf(err, errcap, "secret file %s: read: %s", path, strerror(errno));
            close(fd);
            return RDKV_ECONFIG;
        }
        if (r == 0 || (n += (size_t)r) == sizeof buf) break;
    }
    close(fd);
    int rc = auth_parse(buf, n, path, k, err, errcap);
    sodium_memzero(buf, sizeof buf);
    return rc;
}

static int write_key_file(const char *path, const char *kw, const uint8_t key[AUTH_KEY_SIZE],
                          const char *comment, char *err, size_t errcap)
{
    char hex[2 * AUTH_KEY_SIZE + 1];
    sodium_bin2hex(hex, sizeof hex, key, AUTH_KEY_SIZE);
    char text[512];
    int len = snprintf(text, sizeof text, "# %s\n%s %s\n", comment, kw, hex);
    sodium_memzero(hex, sizeof hex);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errcap, "cannot create secret file %s: %s", path, strerror(e));
        sodium_memzero(text, sizeof text);
        return e == EEXIST ? RDKV_EEXIST : RDKV_EIO;
    }
    bool ok = write(fd, text, (size_t)len) == len;
    sodium_memzero(text, sizeof text);
    if (close(fd) || !ok) {
        snprintf(err, errcap, "cannot write secret file %s", path);
        unlink(path);
        return RDKV_EIO;
    }
    return 0;
}

int auth_generate(const char *node_path, const char *client_path, char *err, size_t errcap)
{
    sodium_once();
    struct auth_keys k = {0};
    randombytes_buf(k.node, sizeof k.node);
    derive_client(k.node, k.client);
    int rc = write_key_file(node_path, "node-key", k.node,
                            "rdkv node secret: for the cluster's nodes and operator tools only. "
                            "Never give it to clients.",
                            err, errcap);
    if (!rc) {
        rc = write_key_file(client_path, "client-key", k.client,
                            "rdkv client secret: give this file to kvctl and rdkv_connect "
                            "(--secret-file or RDKV_SECRET_FILE).",
                            err, errcap);
        if (rc) unlink(node_path);
    }
    auth_wipe(&k);
    return rc;
}

const uint8_t *auth_key(const struct auth_keys *k, uint8_t role)
{
    if (role == WIRE_ROLE_NODE) return k->have_node ? k->node : NULL;
    if (role == WIRE_ROLE_CLIENT) return k->have_client ? k->client : NULL;
    return NULL;
}

void auth_nonce(uint8_t out[WIRE_NONCE_SIZE])
{
    sodium_once();
    randombytes_buf(out, WIRE_NONCE_SIZE);
}

void auth_mac(const uint8_t key[AUTH_KEY_SIZE], char side, const struct wire_hello *h,
              const uint8_t node_nonce[WIRE_NONCE_SIZE], uint8_t out[WIRE_MAC_SIZE])
{
    uint8_t m[sizeof MAC_LABEL - 1 + 1 + 2 * WIRE_NONCE_SIZE + 2 + 2 + 1 + 2 + 8];
    size_t at = 0;
    memcpy(m, MAC_LABEL, sizeof MAC_LABEL - 1);
    at += sizeof MAC_LABEL - 1;
    m[at++] = (uint8_t)side;
    memcpy(m + at, h->nonce, WIRE_NONCE_SIZE);
    at += WIRE_NONCE_SIZE;
    memcpy(m + at, node_nonce, WIRE_NONCE_SIZE);
    at += WIRE_NONCE_SIZE;
    pack_put_u16le(m + at, h->src_node);
    at += 2;
    pack_put_u16le(m + at, h->dst_node);
    at += 2;
    m[at++] = h->role;
    pack_put_u16le(m + at, h->kind);
    at += 2;
    pack_put_u64le(m + at, h->cluster_fp);
    at += 8;
    crypto_generichash(out, WIRE_MAC_SIZE, m, at, key, AUTH_KEY_SIZE);
}

bool auth_mac_equal(const uint8_t a[WIRE_MAC_SIZE], const uint8_t b[WIRE_MAC_SIZE])
{
    return crypto_verify_32(a, b) == 0;
}

void auth_wipe(struct auth_keys *k) { sodium_memzero(k, sizeof *k); }
