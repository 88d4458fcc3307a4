/* Cluster config parser. */
#include "config.h"

#include "parse.h"
#include "rdkv_status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define CONFIG_MAX_BYTES (1u << 20)

static int fail(char *err, size_t cap, const char *name, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int fail(char *err, size_t cap, const char *name, unsigned line, const char *fmt, ...)
{
    if (err && cap) {
        int n = line ? snprintf(err, cap, "%s:%u: ", name, line) : snprintf(err, cap, "%s: ", name);
        if (n < 0) n = 0;
        if ((size_t)n < cap) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(err + n, cap - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return RDKV_ECONFIG;
}

static void fingerprint(struct cluster_config *c)
{
    XXH3_state_t *st = XXH3_createState();
    if (!st) {
        c->fingerprint = 0;
        return;
    }
    XXH3_64bits_reset(st);
    char line[CLUSTER_HOST_MAX + 32];
    for (unsigned i = 0; i < c->n; i++) {
        int n = snprintf(line, sizeof line, "%u %s %u\n", c->nodes[i].id, c->nodes[i].host,
                         c->nodes[i].port);
        XXH3_64bits_update(st, line, (size_t)n);
    }
    c->fingerprint = XXH3_64bits_digest(st);
    if (c->fingerprint == 0) c->fingerprint = 1; /* 0 means "unchecked" on the wire */
    XXH3_freeState(st);
}

/* Splits a line into at most 4 whitespace-separated words (in place). Returns the count, or 5
 * when there are more. */
static int split(char *s, char **w)
{
    int n = 0;
    while (*s) {
        while (*s == ' ' || *s == '\t' || *s == '\r') s++;
        if (!*s) break;
        if (n == 4) return 5;
        w[n++] = s;
        while (*s && *s != ' ' && *s != '\t' && *s != '\r') s++;
        if (*s) *s++ = 0;
    }
    return n;
}

int cluster_config_parse(const char *text, size_t len, const char *name, struct cluster_config *out,
                         char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    if (len > CONFIG_MAX_BYTES)
        return fail(err, errcap, name, 0, "file too large (limit %u bytes)", CONFIG_MAX_BYTES);
    if (memchr(text, 0, len)) return fail(err, errcap, name, 0, "file contains a NUL byte");

    struct cluster_node *nodes = calloc(CLUSTER_MAX_NODES, sizeof *nodes);
    bool *seen = calloc(CLUSTER_MAX_NODES, sizeof *seen);
    unsigned *seen_line = calloc(CLUSTER_MAX_NODES, sizeof *seen_line);
    char *buf = malloc(len + 1);
    int rc = 0;
    if (!nodes || !seen || !seen_line || !buf) {
        rc = RDKV_ENOMEM;
        goto out;
    }
    memcpy(buf, text, len);
    buf[len] = 0;

    unsigned lineno = 0, maxid = 0, count = 0;
    bool have_transport = false, have_arena = false, have_secret = false, have_zk = false;
    unsigned replicas_line = 0;
    out->replicas = 1;
    char *save = NULL;
    for (char *p = buf; p; p = save) {
        lineno++;
        char *nl = strchr(p, '\n');
        save = nl ? nl + 1 : NULL;
        if (nl) *nl = 0;
        char *hash = strchr(p, '#');
        if (hash) *hash = 0;
        char *w[4];
        int nw = split(p, w);
        if (nw == 0) continue;
        if (!strcmp(w[0], "node")) {
            if (nw != 3) {
                rc = fail(err, errcap, name, lineno, "expected 'node ID HOST:PORT'");
                goto out;
            }
            uint64_t id;
            if (parse_uint_range(w[1], 0, CLUSTER_MAX_NODES - 1, &id)) {
                rc = fail(err, errcap, name, lineno, "node id '%s' is not a number in 0..%u", w[1],
                          CLUSTER_MAX_NODES - 1);
                goto out;
            }
            if (seen[id]) {
                rc = fail(err, errcap, name, lineno, "node %u is already defined on line %u",
                          (unsigned)id, seen_line[id]);
                goto out;
            }
            struct cluster_node *nd = &nodes[id];
            if (parse_hostport(w[2], nd->host, sizeof nd->host, &nd->port, 0)) {
                rc = fail(err, errcap, name, lineno,
                          "bad address '%s' (expected HOST:PORT with port 1..65535)", w[2]);
                goto out;
            }
            nd->id = (uint16_t)id;
            seen[id] = true;
            seen_line[id] = lineno;
            count++;
            if (id > maxid) maxid = (unsigned)id;
        } else if (!strcmp(w[0], "transport")) {
            if (nw != 2 || (strcmp(w[1], "soft") && strcmp(w[1], "verbs") && strcmp(w[1], "auto"))) {
                rc = fail(err, errcap, name, lineno, "expected 'transport soft|verbs|auto'");
                goto out;
            }
            if (have_transport) {
                rc = fail(err, errcap, name, lineno, "transport is set twice");
                goto out;
            }
            have_transport = true;
            snprintf(out->transport, sizeof out->transport, "%s", w[1]);
        } else if (!strcmp(w[0], "arena")) {
            uint64_t sz;
            if (nw != 2 || parse_size(w[1], &sz) || sz == 0) {
                rc = fail(err, errcap, name, lineno, "expected 'arena SIZE' (for example 256M)");
                goto out;
            }
            if (have_arena) {
                rc = fail(err, errcap, name, lineno, "arena is set twice");
                goto out;
            }
            have_arena = true;
            out->arena_size = sz;
        } else if (!strcmp(w[0], "secret_file")) {
            if (nw != 2 || strlen(w[1]) >= sizeof out->secret_file) {
                rc = fail(err, errcap, name, lineno, "expected 'secret_file PATH' (a path shorter "
                          "than %u bytes, without spaces)", CLUSTER_PATH_MAX);
                goto out;
            }
            if (have_secret) {
                rc = fail(err, errcap, name, lineno, "secret_file is set twice");
                goto out;
            }
            have_secret = true;
            snprintf(out->secret_file, sizeof out->secret_file, "%s", w[1]);
        } else if (!strcmp(w[0], "zookeeper")) {
            if (nw != 2 || strlen(w[1]) >= sizeof out->zookeeper) {
                rc = fail(err, errcap, name, lineno, "expected 'zookeeper HOST:PORT[,HOST:PORT...]'");
                goto out;
            }
            if (have_zk) {
                rc = fail(err, errcap, name, lineno, "zookeeper is set twice");
                goto out;
            }
            /* Each host:port before an optional /chroot must parse. */
            char hs[CLUSTER_PATH_MAX];
            snprintf(hs, sizeof hs, "%s", w[1]);
            char *chroot = strchr(hs, '/');
            if (chroot) {
                if (strspn(chroot, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/_.-") !=
                    strlen(chroot)) {
                    rc = fail(err, errcap, name, lineno, "bad ZooKeeper chroot '%s' (letters, digits "
                              "and / _ . - only)", chroot);
                    goto out;
                }
                *chroot = 0;
            }
            for (char *tok = hs, *next; tok; tok = next) {
                next = strchr(tok, ',');
                if (next) *next++ = 0;
                char host[CLUSTER_HOST_MAX];
                uint16_t port;
                if (parse_hostport(tok, host, sizeof host, &port, 0)) {
                    rc = fail(err, errcap, name, lineno,
                              "bad ZooKeeper address '%s' (expected HOST:PORT[,HOST:PORT...])", tok);
                    goto out;
                }
            }
            have_zk = true;
            snprintf(out->zookeeper, sizeof out->zookeeper, "%s", w[1]);
        } else if (!strcmp(w[0], "replicas")) {
            uint64_t r;
            if (nw != 2 || parse_uint_range(w[1], 1, CLUSTER_MAX_REPLICAS, &r)) {
                rc = fail(err, errcap, name, lineno, "expected 'replicas R' with R in 1..%u",
                          CLUSTER_MAX_REPLICAS);
                goto out;
            }
            if (replicas_line) {
                rc = fail(err, errcap, name, lineno, "replicas is set twice");
                goto out;
            }
            replicas_line = lineno;
            out->replicas = (unsigned)r;
        } else {
            rc = fail(err, errcap, name, lineno,
                      "unknown keyword '%s' (expected node, transport, arena, secret_file, "
                      "zookeeper or replicas)", w[0]);
            goto out;
        }
    }
    if (count == 0) {
        rc = fail(err, errcap, name, 0, "no 'node ID HOST:PORT' lines");
        goto out;
    }
    for (unsigned i = 0; i <= maxid; i++) {
        if (!seen[i]) {
            rc = fail(err, errcap, name, 0, "node ids must be 0..%u without gaps; node %u is missing",
                      maxid, i);
            goto out;
        }
    }
    for (unsigned i = 0; i <= maxid; i++)
        for (unsigned k = i + 1; k <= maxid; k++)
            if (nodes[i].port == nodes[k].port && !strcmp(nodes[i].host, nodes[k].host)) {
                rc = fail(err, errcap, name, seen_line[k], "node %u has the same address as node %u",
                          k, i);
                goto out;
            }
    if (out->replicas > 1 && !have_zk) {
        rc = fail(err, errcap, name, replicas_line,
                  "replicas %u needs a 'zookeeper HOST:PORT' line: the replica configuration "
                  "lives in ZooKeeper", out->replicas);
        goto out;
    }
    if (out->replicas > count) {
        rc = fail(err, errcap, name, replicas_line, "replicas %u, but only %u node(s)",
                  out->replicas, count);
        goto out;
    }
    if (have_zk && count > CLUSTER_MAX_REPLICATED) {
        rc = fail(err, errcap, name, 0, "a cluster with ZooKeeper has at most %u nodes",
                  CLUSTER_MAX_REPLICATED);
        goto out;
    }
    out->n = count;
    out->nodes = realloc(nodes, count * sizeof *nodes);
    if (!out->nodes) out->nodes = nodes;
    nodes = NULL;
    fingerprint(out);
out:
    free(nodes);
    free(seen);
    free(seen_line);
    free(buf);
    if (rc) {
        out->n = 0;
        out->nodes = NULL;
    }
    return rc;
}

int cluster_config_load(const char *path, struct cluster_config *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, errcap, path, 0, "cannot open: %s", strerror(errno));
    char *text = malloc(CONFIG_MAX_BYTES + 1);
    if (!text) {
        fclose(f);
        return RDKV_ENOMEM;
    }
    size_t n = fread(text, 1, CONFIG_MAX_BYTES + 1, f);
    int rerr = ferror(f);
    fclose(f);
    int rc;
    if (rerr) rc = fail(err, errcap, path, 0, "read error");
    else rc = cluster_config_parse(text, n, path, out, err, errcap);
    free(text);
    const char *slash = strrchr(path, '/');
    if (!rc && out->secret_file[0] && out->secret_file[0] != '/' && slash) {
        char full[CLUSTER_PATH_MAX];
        int w = snprintf(full, sizeof full, "%.*s/%s", (int)(slash - path), path,
                         out->secret_file);
        if (w < 0 || (size_t)w >= sizeof full) {
            cluster_config_free(out);
            return fail(err, errcap, path, 0, "secret_file path too long");
        }
        memcpy(out->secret_file, full, sizeof full);
    }
    return rc;
}

void cluster_config_free(struct cluster_config *c)
{
    free(c->nodes);
    c->nodes = NULL;
    c->n = 0;
}

int cluster_config_write(const struct cluster_config *c, FILE *f)
{
    fprintf(f, "# rdkv cluster configuration\n");
    if (c->transport[0]) fprintf(f, "transport %s\n", c->transport);
    if (c->arena_size) fprintf(f, "arena %llu\n", (unsigned long long)c->arena_size);
    if (c->secret_file[0]) fprintf(f, "secret_file %s\n", c->secret_file);
    if (c->zookeeper[0]) fprintf(f, "zookeeper %s\n", c->zookeeper);
    if (c->replicas > 1) fprintf(f, "replicas %u\n", c->replicas);
    for (unsigned i = 0; i < c->n; i++) {
        const char *h = c->nodes[i].host;
        if (strchr(h, ':')) fprintf(f, "node %u [%s]:%u\n", c->nodes[i].id, h, c->nodes[i].port);
        else fprintf(f, "node %u %s:%u\n", c->nodes[i].id, h, c->nodes[i].port);
    }
    return ferror(f) ? RDKV_EIO : 0;
}

int cluster_config_make(struct cluster_config *c, unsigned n, const char *const *hosts,
                        const uint16_t *ports)
{
    memset(c, 0, sizeof *c);
    if (n == 0 || n > CLUSTER_MAX_NODES) return RDKV_EINVAL;
    c->nodes = calloc(n, sizeof *c->nodes);
    if (!c->nodes) return RDKV_ENOMEM;
    for (unsigned i = 0; i < n; i++) {
        c->nodes[i].id = (uint16_t)i;
        c->nodes[i].port = ports[i];
        if (strlen(hosts[i]) >= CLUSTER_HOST_MAX) {
            cluster_config_free(c);
            return RDKV_EINVAL;
        }
        snprintf(c->nodes[i].host, CLUSTER_HOST_MAX, "%s", hosts[i]);
    }
    c->n = n;
    c->replicas = 1;
    fingerprint(c);
    return 0;
}
