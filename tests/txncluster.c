/* In-process rdkv clusters for the transaction tests (tests/txncluster.h). */
#include "tests/txncluster.h"

#include "tests/testenv.h"

#include "rdma/fabric.h"
#include "storage/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tc_start(struct tcluster *c, unsigned n, const char *const *extra)
{
    memset(c, 0, sizeof *c);
    if (n == 0 || n > TC_MAX) return RDKV_EINVAL;
    char err[256];
    int fds[TC_MAX];
    for (unsigned i = 0; i < n; i++) {
        int rc = fab_listen("127.0.0.1", 0, &fds[i], &c->ports[i], err, sizeof err);
        if (rc) {
            fprintf(stderr, "  tc_start: listen: %s\n", err);
            while (i--) close(fds[i]);
            return rc;
        }
    }
    if (tenv_mkdtemp(c->dir, sizeof c->dir, "rdkv-txntest")) {
        perror("  tc_start: mkdtemp");
        for (unsigned i = 0; i < n; i++) close(fds[i]);
        c->dir[0] = 0;
        return RDKV_EIO;
    }
    snprintf(c->conf, sizeof c->conf, "%s/cluster.conf", c->dir);
    FILE *f = fopen(c->conf, "w");
    if (!f) {
        perror("  tc_start: config");
        for (unsigned i = 0; i < n; i++) close(fds[i]);
        rmdir(c->dir);
        return RDKV_EIO;
    }
    const char *tname = fab_transport_name(tenv_transport);
    fprintf(f, "# written by tests/txncluster.c\ntransport %s\n", tname);
    const char *secret = tenv_secret_file(); /* and RDKV_SECRET_FILE for rdkv_connect */
    if (secret) fprintf(f, "secret_file %s\n", secret);
    for (unsigned i = 0; i < n; i++) fprintf(f, "node %u 127.0.0.1:%u\n", i, c->ports[i]);
    fclose(f);
    c->n = n;
    int rc = 0;
    unsigned started = 0;
    for (unsigned i = 0; i < n; i++) {
        char fdstr[16];
        snprintf(fdstr, sizeof fdstr, "%d", fds[i]);
        const char *args[48] = {"--listen-fd", fdstr, "--transport", tname, "--arena", "64M"};
        unsigned na = 6;
        for (unsigned k = 0; extra && extra[k] && na < 43; k++) args[na++] = extra[k];
        /* RDKV_TEST_ROW_LOCK / RDKV_TEST_RANGE_LOCK run a test with other locks */
        const char *rl = getenv("RDKV_TEST_ROW_LOCK"), *gl = getenv("RDKV_TEST_RANGE_LOCK");
        if (rl && *rl) {
            args[na++] = "--row-lock";
            args[na++] = rl;
        }
        if (gl && *gl) {
            args[na++] = "--range-lock";
            args[na++] = gl;
        }
        /* RDKV_TEST_CONFLICT runs it under another conflict policy (node --conflict) */
        const char *cp = getenv("RDKV_TEST_CONFLICT");
        if (cp && *cp) {
            args[na++] = "--conflict";
            args[na++] = cp;
        }
        args[na] = NULL;
        /* the last node waits for all its peers: they are all serving by then */
        rc =
            rdkv_node_start(c->conf, i, args, i + 1 == n ? 20000 : 0, &c->node[i], err, sizeof err);
        if (rc) {
            fprintf(stderr, "  tc_start: node %u: %s (%s)\n", i, err, rdkv_strerror(rc));
            break;
        }
        started++;
    }
    if (rc) {
        for (unsigned i = started + 1; i < n; i++) close(fds[i]); /* never handed over */
        tc_stop(c);
        return rc;
    }
    return 0;
}

void tc_stop(struct tcluster *c)
{
    for (unsigned i = 0; i < c->n; i++) {
        if (c->node[i]) rdkv_node_stop(c->node[i]);
        c->node[i] = NULL;
    }
    if (c->conf[0]) unlink(c->conf);
    if (c->dir[0]) rmdir(c->dir);
    c->conf[0] = c->dir[0] = 0;
    c->n = 0;
}

void tc_endpoints(const struct tcluster *c, unsigned first, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = 0;
    for (unsigned k = 0; k < c->n && len < cap; k++) {
        unsigned i = (first + k) % c->n;
        int w = snprintf(buf + len, cap - len, "%s127.0.0.1:%u", k ? "," : "", c->ports[i]);
        if (w < 0) break;
        len += (size_t)w;
    }
}

int tc_connect(struct tcluster *c, unsigned coord, const rdkv_options *o, rdkv_session **out)
{
    char ep[256];
    tc_endpoints(c, coord, ep, sizeof ep);
    return rdkv_connect(ep, o, out);
}

unsigned tc_partition(const struct tcluster *c, const void *key, size_t klen)
{
    return (unsigned)(store_place_hash(key, (uint32_t)klen) % c->n);
}

void tc_u64_put(uint8_t out[8], uint64_t v)
{
    for (int i = 0; i < 8; i++) out[i] = (uint8_t)(v >> (8 * i));
}

bool tc_u64_get(const void *val, size_t vlen, uint64_t *out)
{
    if (vlen != 8) return false;
    const uint8_t *p = val;
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    *out = v;
    return true;
}

struct put1 {
    const char *key;
    const void *val;
    size_t vlen;
};

static int put1_fn(rdkv_txn *t, void *arg)
{
    struct put1 *p = arg;
    return rdkv_txn_put(t, p->key, strlen(p->key), p->val, p->vlen);
}

int tc_put1(rdkv_session *s, const char *key, const void *val, size_t vlen)
{
    struct put1 p = {key, val, vlen};
    return rdkv_run_txn(s, put1_fn, &p);
}

struct get1 {
    const char *key;
    void *buf;
    size_t cap, *vlen;
};

static int get1_fn(rdkv_txn *t, void *arg)
{
    struct get1 *g = arg;
    const void *v;
    size_t vl;
    int rc = rdkv_txn_get(t, g->key, strlen(g->key), &v, &vl);
    if (rc) return rc;
    *g->vlen = vl;
    memcpy(g->buf, v, vl < g->cap ? vl : g->cap);
    return 0;
}

int tc_get1(rdkv_session *s, const char *key, void *buf, size_t cap, size_t *vlen)
{
    struct get1 g = {key, buf, cap, vlen};
    return rdkv_run_txn(s, get1_fn, &g);
}
