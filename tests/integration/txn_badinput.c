/* Bad input to a running node: a 2-node cluster in this process, keys loaded through rdkv.h,
 * then a client fabric sends thousands of random, truncated and mutated frames, and crafted
 * ones, to every request type of the transaction and session layers (KV_RPC_SESSION,
 * TXN_RPC_PREPARE / COMMIT / ABORT / APPLY / SCAN, KV_RPC_STATUS). Every request must be
 * answered with a status before its deadline (no crash, no hang); PREPARE / APPLY naming a row
 * that is not a live row of the named key must be refused and change nothing. Afterwards every
 * loaded key still has its value, new transactions commit on both nodes, and both nodes are up.
 * Cases: crafted_frames (exact answers: the arena header, heap edges, another node's rows, real
 * rows with another key, sessions misused, limits), random_frames (random, truncated and
 * mutated frames from one thread, then two; RDKV_BADINPUT_SEED / RDKV_BADINPUT_ROUNDS vary it),
 * forged_row (a value whose bytes imitate rows: naming them as rows is refused).
 *
 * 2PC frames are taken only from the node that coordinates them: the crafted cases send theirs
 * as the other node (its own fabric), the random ones from the client fabric (all refused with
 * RDKV_EPROTO after decoding).
 *
 * A participant installs a PREPARE / APPLY only while the locks its fence tokens name are held
 * (docs/transactions.md, "Fencing"); the frames sent here hold no lock, so their writes are all
 * refused. Still, no frame sent here names a loaded key in an UPDATE or DELETE, nor writes a
 * loaded key through a session: every frame is checked against that before it is sent. Nothing
 * sent can change a loaded key, so any change is a bug. */
#include "tests/harness.h"
#include "tests/testenv.h"

#include "common/clock.h"
#include "common/config.h"
#include "common/pack.h"
#include "common/rng.h"
#include "rdkv.h"
#include "rdma/fabric.h"
#include "client/embed.h"
#include "server/node.h"
#include "server/proto.h"
#include "storage/store.h"
#include "txn/txn.h"
#include "txn/internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NNODES 2
#define NKEYS 150
#define RPC_DEADLINE_NS (5 * NS_PER_S)
#define FAKE_TXID_TOP 0xFA00000000000000ull /* real txids have the coordinator's id on top */
/* A PREPARE, APPLY, COMMIT or ABORT is taken only from the node that coordinates its
 * transaction (docs/transactions.md, "Who may send what"): from this test's client fabric every
 * well-formed one is refused so, before any row is looked at. (The participant's row and lock
 * checks behind that are driven from a node's connection by tests/integration/abuse.) */
#define NOT_COORD RDKV_EPERM
/* So the crafted cases send their 2PC frames as the other node (a real node's fabric), with
 * txids and a coordinator field that name it: those reach the participant's row and lock checks
 * (state.as_coord). */

/* ------------------------------------------------------------------------------------------ */
/* The cluster and the client fabric. */

struct cl {
    char dir[256], conf[300];
    uint16_t ports[NNODES];
    rdkv_node *node[NNODES];
    struct cluster_config cc;
    struct fabric *cf; /* the client's fabric: FAB_NODE_CLIENT */
    struct fab_ctx *c;
    bool have_cc;
};

static void cl_stop(struct cl *k)
{
    if (k->c) fab_ctx_destroy(k->c);
    if (k->cf) fab_close(k->cf);
    if (k->have_cc) cluster_config_free(&k->cc);
    for (unsigned i = 0; i < NNODES; i++)
        if (k->node[i]) rdkv_node_stop(k->node[i]);
    if (k->conf[0]) unlink(k->conf);
    if (k->dir[0]) rmdir(k->dir);
    memset(k, 0, sizeof *k);
}

/* The nodes' --max-sessions, small enough to reach here. */
#define TEST_MAX_SESSIONS "128"

static int cl_start(struct cl *k)
{
    memset(k, 0, sizeof *k);
    char err[256];
    int fds[NNODES];
    for (unsigned i = 0; i < NNODES; i++) {
        int rc = fab_listen("127.0.0.1", 0, &fds[i], &k->ports[i], err, sizeof err);
        if (rc) {
            fprintf(stderr, "  listen: %s\n", err);
            while (i--) close(fds[i]);
            return rc;
        }
    }
    if (tenv_mkdtemp(k->dir, sizeof k->dir, "rdkv-badinput")) {
        perror("  mkdtemp");
        k->dir[0] = 0;
        for (unsigned i = 0; i < NNODES; i++) close(fds[i]);
        return RDKV_EIO;
    }
    snprintf(k->conf, sizeof k->conf, "%s/cluster.conf", k->dir);
    FILE *f = fopen(k->conf, "w");
    if (!f) {
        perror("  config");
        for (unsigned i = 0; i < NNODES; i++) close(fds[i]);
        k->conf[0] = 0;
        cl_stop(k);
        return RDKV_EIO;
    }
    fprintf(f, "transport %s\n", fab_transport_name(tenv_transport));
    for (unsigned i = 0; i < NNODES; i++) fprintf(f, "node %u 127.0.0.1:%u\n", i, k->ports[i]);
    const char *secret = tenv_secret_file(); /* and RDKV_SECRET_FILE for rdkv_connect */
    if (secret) fprintf(f, "secret_file %s\n", secret);
    fclose(f);
    for (unsigned i = 0; i < NNODES; i++) {
        char fdstr[16];
        snprintf(fdstr, sizeof fdstr, "%d", fds[i]);
        const char *args[] = {"--listen-fd", fdstr, "--arena", "64M", "--max-sessions",
                              TEST_MAX_SESSIONS, NULL};
        /* the last node waits for its peers, which are all serving by then */
        int rc = rdkv_node_start(k->conf, i, args, i + 1 == NNODES ? 20000 : 0, &k->node[i], err,
                                 sizeof err);
        if (rc) {
            fprintf(stderr, "  node %u: %s (%s)\n", i, err, rdkv_strerror(rc));
            for (unsigned j = i + 1; j < NNODES; j++) close(fds[j]);
            cl_stop(k);
            return rc;
        }
    }
    int rc = cluster_config_load(k->conf, &k->cc, err, sizeof err);
    if (rc) {
        fprintf(stderr, "  %s\n", err);
        cl_stop(k);
        return rc;
    }
    k->have_cc = true;
    struct fab_opts o;
    fab_opts_init(&o);
    o.cluster = &k->cc;
    o.node = FAB_NODE_CLIENT;
    o.transport = tenv_transport;
    o.rpc_timeout_ns = RPC_DEADLINE_NS;
    if ((rc = fab_open(&o, &k->cf, err, sizeof err)) || (rc = fab_ctx_create(k->cf, &k->c))) {
        fprintf(stderr, "  client fabric: %s (%s)\n", err, rdkv_strerror(rc));
        cl_stop(k);
        return rc;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* The loaded keys: "ld/NNN" with values of three shapes (short, inline, out of line). */

static void key_of(unsigned i, char out[16]) { snprintf(out, 16, "ld/%03u", i); }

static size_t vlen_of(unsigned i)
{
    return i % 5 == 0 ? 6000 : i % 3 == 0 ? 1500 : 8 + i % 40;
}

static void val_of(unsigned i, uint8_t *out)
{
    size_t n = vlen_of(i);
    for (size_t j = 0; j < n; j++) out[j] = (uint8_t)(i * 31u + j * 7u + (j >> 8));
}

static bool is_loaded_key(const void *key, uint32_t klen)
{
    if (klen != 6 || memcmp(key, "ld/", 3)) return false;
    const uint8_t *p = key;
    for (int i = 3; i < 6; i++)
        if (p[i] < '0' || p[i] > '9') return false;
    return (unsigned)((p[3] - '0') * 100 + (p[4] - '0') * 10 + (p[5] - '0')) < NKEYS;
}

struct load_arg {
    unsigned from, to;
};

static int load_fn(rdkv_txn *t, void *arg)
{
    struct load_arg *a = arg;
    static uint8_t v[8192];
    for (unsigned i = a->from; i < a->to; i++) {
        char key[16];
        key_of(i, key);
        val_of(i, v);
        int rc = rdkv_txn_put(t, key, strlen(key), v, vlen_of(i));
        if (rc) return rc;
    }
    return 0;
}

struct verify_arg {
    unsigned bad, missing;
};

static int verify_fn(rdkv_txn *t, void *arg)
{
    struct verify_arg *a = arg;
    a->bad = a->missing = 0;
    static uint8_t want[8192];
    for (unsigned i = 0; i < NKEYS; i++) {
        char key[16];
        key_of(i, key);
        const void *v;
        size_t vl;
        int rc = rdkv_txn_get(t, key, strlen(key), &v, &vl);
        if (rc == RDKV_ENOTFOUND) {
            if (a->missing++ < 3) fprintf(stderr, "  %s: missing\n", key);
            continue;
        }
        if (rc) return rc;
        val_of(i, want);
        if (vl != vlen_of(i) || memcmp(v, want, vl)) {
            if (a->bad++ < 3)
                fprintf(stderr, "  %s: value changed (%zu bytes, expected %zu)\n", key, vl,
                        vlen_of(i));
        }
    }
    return 0;
}

static void load_keys(struct cl *k)
{
    rdkv_session *s;
    REQUIRE(rdkv_session_open(k->node[0], NULL, &s) == 0);
    for (unsigned i = 0; i < NKEYS; i += 10) {
        struct load_arg a = {i, i + 10 < NKEYS ? i + 10 : NKEYS};
        CHECK_EQ(rdkv_run_txn(s, load_fn, &a), 0);
    }
    rdkv_session_close(s);
}

/* Every loaded key has its value, read from an embedded session on each node and a remote one. */
static void verify_keys(struct cl *k)
{
    for (unsigned i = 0; i <= NNODES; i++) {
        rdkv_session *s;
        int rc;
        if (i < NNODES) {
            rc = rdkv_session_open(k->node[i], NULL, &s);
        } else {
            char ep[64];
            snprintf(ep, sizeof ep, "127.0.0.1:%u", k->ports[1]);
            rc = rdkv_connect(ep, NULL, &s);
        }
        CHECK_EQ(rc, 0);
        if (rc) continue;
        struct verify_arg a = {0, 0};
        CHECK_EQ(rdkv_run_txn(s, verify_fn, &a), 0);
        CHECK_EQ(a.bad, 0);
        CHECK_EQ(a.missing, 0);
        rdkv_session_close(s);
    }
}

struct newtxn_arg {
    const char *key;
    const char *val;
};

static int newtxn_put(rdkv_txn *t, void *arg)
{
    struct newtxn_arg *a = arg;
    return rdkv_txn_put(t, a->key, strlen(a->key), a->val, strlen(a->val));
}

static int newtxn_get(rdkv_txn *t, void *arg)
{
    struct newtxn_arg *a = arg;
    const void *v;
    size_t vl;
    int rc = rdkv_txn_get(t, a->key, strlen(a->key), &v, &vl);
    if (rc) return rc;
    return vl == strlen(a->val) && !memcmp(v, a->val, vl) ? 0 : RDKV_EPROTO;
}

/* Afterwards: the data, new transactions coordinated by each node (writing keys of both
 * partitions), and both nodes up as each sees the cluster. */
static void after_checks(struct cl *k)
{
    verify_keys(k);
    for (unsigned i = 0; i < NNODES; i++) {
        rdkv_session *s;
        REQUIRE(rdkv_session_open(k->node[i], NULL, &s) == 0);
        for (unsigned j = 0; j < 8; j++) {
            char key[32], val[32];
            snprintf(key, sizeof key, "after/%u/%u", i, j);
            snprintf(val, sizeof val, "v%u.%u", i, j);
            struct newtxn_arg a = {key, val};
            CHECK_EQ(rdkv_run_txn(s, newtxn_put, &a), 0);
            CHECK_EQ(rdkv_run_txn(s, newtxn_get, &a), 0);
        }
        char *js = NULL;
        CHECK_EQ(rdkv_cluster_status(s, &js), 0);
        if (js) {
            unsigned up = 0;
            /* the nodes' entries (each with its own status, peers included, nested) */
            for (const char *p = js; (p = strstr(p, "\"state\":\"up\",\"rows\":")); p++) up++;
            CHECK_EQ(up, NNODES);
            CHECK(!strstr(js, "\"state\":\"down\""));
            if (up != NNODES) fprintf(stderr, "  status: %s\n", js);
            free(js);
        }
        rdkv_session_close(s);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Sending: every frame gets a status before its deadline. */

struct tally {
    uint64_t sent, by_status[1 - RDKV_STATUS_MIN];
};

static struct tally tallies[FAB_RPC_USER_BASE + 32]; /* under tally_mu */
static pthread_mutex_t tally_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned failures_shown; /* under tally_mu */

static const char *type_name(uint16_t t)
{
    switch (t) {
    case KV_RPC_SESSION: return "SESSION";
    case KV_RPC_STATUS: return "STATUS";
    case TXN_RPC_PREPARE: return "PREPARE";
    case TXN_RPC_COMMIT: return "COMMIT";
    case TXN_RPC_ABORT: return "ABORT";
    case TXN_RPC_APPLY: return "APPLY";
    case TXN_RPC_SCAN: return "SCAN";
    default: return "?";
    }
}

static void show_frame(const char *why, uint16_t node, uint16_t type, const uint8_t *p, size_t len,
                       int rc)
{
    pthread_mutex_lock(&tally_mu);
    bool show = failures_shown++ < 10;
    pthread_mutex_unlock(&tally_mu);
    if (!show) return;
    fprintf(stderr, "  %s: %s to node %u, %zu bytes, status %s:", why, type_name(type), node, len,
            rdkv_status_name(rc));
    for (size_t i = 0; i < len && i < 96; i++) fprintf(stderr, " %02x", p[i]);
    fprintf(stderr, "%s\n", len > 96 ? " ..." : "");
}

/* A KV_RPC_SESSION request: the RPC's status is 0 and the answer starts with the session's
 * status (u32), which this returns, leaving the op's bytes in resp. An answer too short for the
 * status returns 1 (no status at all: a failure). */
static int ses_rpc(struct fab_ctx *c, uint16_t node, const void *p, size_t len,
                   struct fab_buf *resp)
{
    int rc = fab_rpc_call(c, node, KV_RPC_SESSION, p, len, resp, RPC_DEADLINE_NS);
    if (rc) return rc; /* the link, not the session */
    if (resp->len < 4) return 1;
    const uint8_t *d = resp->data;
    uint32_t st = (uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16 | (uint32_t)d[3] << 24;
    memmove(resp->data, d + 4, resp->len - 4);
    resp->len -= 4;
    return (int)(int32_t)st;
}

/* The statuses a request type may answer with; anything else (a transport error above all:
 * the node died or never answered) fails the test. */
static bool status_ok(uint16_t type, int rc)
{
    if (rc > 0 || rc < RDKV_STATUS_MIN) return false;
    switch (rc) {
    case RDKV_ETIMEDOUT:
    case RDKV_EUNAVAILABLE:
    case RDKV_EFLUSHED:
    case RDKV_ESHUTDOWN:
    case RDKV_ENOHANDLER:
    case RDKV_EUNKNOWN:
        return false;
    default: break;
    }
    /* a 2PC frame whose txid names another coordinator than its sender */
    if (rc == RDKV_EPERM && type != KV_RPC_STATUS && type != TXN_RPC_SCAN) return true;
    switch (type) {
    case KV_RPC_STATUS: return rc == 0;
    case TXN_RPC_COMMIT: return rc == 0 || rc == RDKV_ENOTFOUND || rc == RDKV_EPROTO;
    case TXN_RPC_ABORT: return rc == 0 || rc == RDKV_EPROTO;
    case TXN_RPC_SCAN: return rc == 0 || rc == RDKV_EPROTO || rc == RDKV_EABORTED;
    case TXN_RPC_PREPARE:
    case TXN_RPC_APPLY:
        return rc == 0 || rc == RDKV_EPROTO || rc == RDKV_ETOOBIG || rc == RDKV_EABORTED ||
               rc == RDKV_ENOSPC || rc == RDKV_ENOMEM;
    default: return true; /* sessions: whatever the transaction answers */
    }
}

/* The sessions this test opened (to close them before checking), and prepared transactions to
 * abort. */
struct state {
    struct cl *k;
    struct fab_ctx *c; /* this thread's */
    unsigned fails;    /* added to the harness's count by the test's thread */
    uint64_t rng;
    struct ses_id sids[NNODES][64];
    unsigned nsids[NNODES];
    uint64_t skipped; /* generated frames that could have changed a loaded key: not sent */
    bool allow_loaded; /* crafted frames that name loaded keys with rows that are not theirs */
    /* 2PC frames to node i go as node i ^ 1, through as_node[i] (a context of that node's
     * fabric), their txids rewritten to name it; coord_lie: the frame names node i instead */
    bool as_coord, coord_lie;
    struct fab_ctx *as_node[NNODES];
    /* rows seen in scans, per node, with their keys (up to 16 bytes) */
    rptr rows[NNODES][512];
    uint8_t rkeys[NNODES][512][16];
    uint32_t rklen[NNODES][512];
    unsigned nrows[NNODES];
    rptr heap[NNODES];
    uint64_t heap_size[NNODES];
    uint8_t scratch[6][2][400]; /* keys and values of PREPARE / APPLY frames being made */
};

/* node's incarnation, as PREPARE and APPLY frames name it (0 if it cannot be reached) */
static uint64_t node_inc(struct state *st, uint16_t node)
{
    uint64_t inc = 0;
    return fab_peer_incarnation(st->c, node, true, &inc) ? 0 : inc;
}

/* Whether a frame could change a loaded key if sent: an UPDATE or DELETE op with a loaded key
 * (PREPARE / APPLY), a session PUT or DEL of one. */
static bool dangerous(uint16_t type, const uint8_t *p, size_t len)
{
    if (type == TXN_RPC_PREPARE || type == TXN_RPC_APPLY) {
        uint64_t txid, inc;
        uint16_t coord;
        struct wop *ops;
        uint32_t n;
        if (txn_wops_unpack(p, len, UINT32_MAX, UINT32_MAX, &txid, &coord, &inc, &ops, &n))
            return false;
        bool bad = false;
        for (uint32_t i = 0; i < n; i++)
            if (ops[i].kind != WOP_INSERT && is_loaded_key(ops[i].key, ops[i].klen)) bad = true;
        free(ops);
        return bad;
    }
    if (type == KV_RPC_SESSION) {
        struct pack_r r;
        pack_r_init(&r, p, len);
        pack_r_take(&r, SES_ID_LEN);
        uint8_t op = unpack_u8(&r);
        if (op != SES_PUT && op != SES_DEL) return false;
        uint32_t kl = unpack_u32(&r);
        const uint8_t *key = pack_r_take(&r, kl);
        return key && is_loaded_key(key, kl);
    }
    return false;
}

/* After an answer: remember sessions opened, abort transactions prepared. */
static int call(struct state *st, uint16_t node, uint16_t type, const uint8_t *p, size_t len,
                struct fab_buf *resp);

static void after_answer(struct state *st, uint16_t node, uint16_t type, const uint8_t *p,
                         size_t len, int rc, const struct fab_buf *resp)
{
    if (rc) return;
    if (type == KV_RPC_SESSION && len == SES_OPEN_LEN && p[SES_ID_LEN] == SES_OPEN) {
        struct ses_id sid;
        bool ok = resp->len >= SES_ID_LEN + 4; /* the id, this node's id and the node count */
        if (!ok) {
            show_frame("SES_OPEN answered without a session id", node, type, p, len, rc);
            st->fails++;
        }
        if (ok) memcpy(sid.b, resp->data, SES_ID_LEN);
        if (ok && st->nsids[node] < 64) st->sids[node][st->nsids[node]++] = sid;
    }
    if (type == TXN_RPC_PREPARE && len >= 8) {
        /* a PREPARE that stuck (inserts only): abort it at once */
        struct fab_buf r2 = {0};
        int a = call(st, node, TXN_RPC_ABORT, p, 8, &r2);
        if (a) {
            show_frame("ABORT of a prepared transaction failed", node, TXN_RPC_ABORT, p, 8, a);
            st->fails++;
        }
        fab_buf_free(&r2);
    }
}

static void close_sessions(struct state *st)
{
    for (uint16_t n = 0; n < NNODES; n++) {
        for (unsigned i = 0; i < st->nsids[n]; i++) {
            uint8_t b[SES_ID_LEN + 1];
            memcpy(b, st->sids[n][i].b, SES_ID_LEN);
            b[SES_ID_LEN] = SES_CLOSE;
            struct fab_buf r = {0};
            int rc = ses_rpc(st->c, n, b, sizeof b, &r);
            if (rc != 0 && rc != RDKV_ESESSION) {
                show_frame("SES_CLOSE failed", n, KV_RPC_SESSION, b, sizeof b, rc);
                st->fails++;
            }
            fab_buf_free(&r);
        }
        st->nsids[n] = 0;
    }
}

/* One request, answered or failed. Returns its status. */
static int call(struct state *st, uint16_t node, uint16_t type, const uint8_t *p, size_t len,
                struct fab_buf *resp)
{
    if (!st->allow_loaded && dangerous(type, p, len)) {
        st->skipped++;
        return RDKV_EINVAL;
    }
    struct fab_ctx *c = st->as_coord && type != KV_RPC_STATUS && type != TXN_RPC_SCAN &&
                                st->as_node[node]
                            ? st->as_node[node]
                            : st->c;
    int rc = type == KV_RPC_SESSION ? ses_rpc(st->c, node, p, len, resp)
                                    : fab_rpc_call(c, node, type, p, len, resp, RPC_DEADLINE_NS);
    pthread_mutex_lock(&tally_mu);
    struct tally *t = &tallies[type - FAB_RPC_USER_BASE];
    t->sent++;
    if (rc <= 0 && rc >= RDKV_STATUS_MIN) t->by_status[-rc]++;
    pthread_mutex_unlock(&tally_mu);
    if (!status_ok(type, rc)) {
        show_frame(rc == RDKV_ETIMEDOUT ? "no answer (hang?)" : "unexpected status", node, type,
                   p, len, rc);
        st->fails++;
    }
    after_answer(st, node, type, p, len, rc, resp);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Frame makers. */

struct frame {
    uint8_t b[70000];
    size_t len;
};

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void f_bytes(struct frame *f, const void *p, size_t n)
{
    if (f->len + n > sizeof f->b) return;
    memcpy(f->b + f->len, p, n);
    f->len += n;
}
static void f_u8(struct frame *f, uint8_t v) { f_bytes(f, &v, 1); }
static void f_u16(struct frame *f, uint16_t v)
{
    uint8_t b[2];
    put_le(b, v, 2);
    f_bytes(f, b, 2);
}
static void f_u32(struct frame *f, uint32_t v)
{
    uint8_t b[4];
    put_le(b, v, 4);
    f_bytes(f, b, 4);
}
static void f_u64(struct frame *f, uint64_t v);
/* A session id on the wire. */
static void f_sid(struct frame *f, const struct ses_id *sid)
{
    memcpy(f->b + f->len, sid->b, SES_ID_LEN);
    f->len += SES_ID_LEN;
}
/* An id that names no session: v in its first 8 bytes, zeros after. */
static struct ses_id sid_fake(uint64_t v)
{
    struct ses_id sid = {{0}};
    memcpy(sid.b, &v, sizeof v);
    return sid;
}

static void f_u64(struct frame *f, uint64_t v)
{
    uint8_t b[8];
    put_le(b, v, 8);
    f_bytes(f, b, 8);
}
static void f_str(struct frame *f, const void *p, uint32_t n)
{
    f_u32(f, n);
    f_bytes(f, p, n);
}

/* A key that is never a loaded one: "fz/" and random bytes, or a loaded key spoiled. */
static uint32_t fuzz_key(struct state *st, uint8_t *out, uint32_t cap)
{
    uint64_t *r = &st->rng;
    switch (rng_below(r, 5)) {
    case 0: { /* a loaded key with its last byte changed, or one byte longer / shorter */
        char k[16];
        key_of((unsigned)rng_below(r, NKEYS), k);
        uint32_t n = 6;
        memcpy(out, k, 6);
        switch (rng_below(r, 3)) {
        case 0: out[5] = (uint8_t)('a' + rng_below(r, 26)); break;
        case 1: out[6] = (uint8_t)rng_next(r), n = 7; break;
        default: n = 5; break;
        }
        return n;
    }
    case 1: return 0;
    default: {
        uint32_t n = 3 + (uint32_t)rng_below(r, cap < 40 ? cap - 3 : 37);
        memcpy(out, "fz/", 3);
        for (uint32_t i = 3; i < n; i++) out[i] = (uint8_t)rng_next(r);
        return n;
    }
    }
}

static uint64_t fake_txid(struct state *st) { return FAKE_TXID_TOP | (rng_next(&st->rng) >> 8); }

/* A row pointer that names no live row of the key sent with it. */
static rptr bogus_row(struct state *st, uint16_t node)
{
    uint64_t *r = &st->rng;
    uint64_t arena = 64ull << 20;
    uint16_t other = (uint16_t)(node ^ 1);
    rptr real = st->nrows[node] ? st->rows[node][rng_below(r, st->nrows[node])]
                                : rptr_make(node, 1 << 20);
    uint64_t hoff = rptr_off(st->heap[node]), hsz = st->heap_size[node];
    switch (rng_below(r, 12)) {
    case 0: return rptr_make(node, 64); /* the arena header */
    case 1: return rptr_make(node, rng_below(r, arena) & ~63ull);
    case 2: return rptr_make(node, rng_below(r, arena));
    case 3: return rptr_make(other, rptr_off(real));
    case 4: return rptr_add(real, (uint64_t)(int64_t)(64 * ((int)rng_below(r, 9) - 4)));
    case 5: return rptr_add(real, 1 + rng_below(r, 63));
    case 6: return real; /* sent with another key */
    case 7: return rptr_make(node, hoff + hsz - 64 * rng_below(r, 4));
    case 8: return rptr_make(node, hoff + 64 * rng_below(r, 4) - 64);
    case 9: return rptr_make(node, RPTR_OFF_MASK & ~63ull);
    case 10: return rptr_make((uint16_t)rng_next(r), rng_next(r));
    default: return rng_next(r);
    }
}

/* A PREPARE / APPLY frame: ops with bogus rows and non-loaded keys, and sometimes bad kinds or
 * lengths. */
static void make_wops(struct state *st, uint16_t node, struct frame *f)
{
    uint64_t *r = &st->rng;
    uint32_t n = 1 + (uint32_t)rng_below(r, 4);
    struct wop ops[6];
    for (uint32_t i = 0; i < n; i++) {
        struct wop *o = &ops[i];
        o->kind = (uint8_t)(WOP_UPDATE + rng_below(r, 3));
        o->row = bogus_row(st, node);
        uint8_t *kb = st->scratch[i][0], *vb = st->scratch[i][1];
        o->klen = fuzz_key(st, kb, 64);
        if (o->kind == WOP_INSERT && rng_below(r, 4) == 0) { /* a loaded key: it exists */
            char k[16];
            key_of((unsigned)rng_below(r, NKEYS), k);
            memcpy(kb, k, 6);
            o->klen = 6;
        }
        o->key = kb;
        o->vlen = o->kind == WOP_DELETE ? 0 : (uint32_t)rng_below(r, 300);
        for (uint32_t j = 0; j < o->vlen; j++) vb[j] = (uint8_t)rng_next(r);
        o->val = vb;
    }
    struct pack_w w;
    pack_w_init(&w);
    /* (the node's incarnation, mostly: the frames go on to the checks behind that one) */
    uint64_t inc = rng_below(r, 8) ? node_inc(st, node) : rng_next(r);
    txn_wops_pack(&w, fake_txid(st), (uint16_t)rng_below(r, 4), inc, ops, n);
    f->len = 0;
    if (!w.err) f_bytes(f, w.p, w.len);
    pack_w_free(&w);
    if (rng_below(r, 4) == 0 && f->len > 22) { /* a bad kind */
        f->b[22] = (uint8_t)(rng_below(r, 2) ? 0 : 4 + rng_below(r, 252));
    }
}

static void session_fields(struct state *st, struct frame *f, uint8_t op);

static void make_session(struct state *st, uint16_t node, struct frame *f)
{
    uint64_t *r = &st->rng;
    struct ses_id sid;
    switch (rng_below(r, 10)) {
    case 0: sid = sid_fake(0); break;
    case 1: sid = sid_fake(rng_next(r)); break;
    case 2: sid = sid_fake((uint64_t)node << 48 | rng_below(r, 100)); break; /* unknown */
    default:
        sid = st->nsids[node] ? st->sids[node][rng_below(r, st->nsids[node])]
                              : sid_fake(rng_next(r));
        break;
    }
    uint8_t op = (uint8_t)(rng_below(r, 10) == 0 ? rng_next(r) : 1 + rng_below(r, SES_MULTI));
    /* open sessions only while there are few */
    if (op == SES_OPEN && st->nsids[node] >= 6) op = SES_BEGIN;
    /* the BEGIN, COMMIT and RETRY flags, now and then (some of them on ops they do not fit) */
    uint8_t flags = rng_below(r, 3) ? 0 : (uint8_t)(rng_below(r, 8) << 5);
    if (op & ~SES_OP_MASK) flags = 0;
    f->len = 0;
    struct ses_id none = sid_fake(0);
    f_sid(f, op == SES_OPEN && rng_below(r, 4) ? &none : &sid);
    f_u8(f, op | flags);
    if (op == SES_MULTI) {
        /* a count (now and then absurd), then items of key operations (now and then not) */
        uint16_t n = rng_below(r, 4) ? (uint16_t)(1 + rng_below(r, 4)) : (uint16_t)rng_next(r);
        f_u16(f, n);
        static const uint8_t kops[] = {SES_GET, SES_PUT, SES_DEL, SES_PATCH};
        for (unsigned i = 0; i < n && i < 6; i++) {
            uint8_t iop = rng_below(r, 12) ? kops[rng_below(r, 4)] : (uint8_t)rng_next(r);
            f_u8(f, iop);
            session_fields(st, f, iop);
        }
        return;
    }
    session_fields(st, f, op);
}

/* The fields of session op `op` (none for ops without any). */
static void session_fields(struct state *st, struct frame *f, uint8_t op)
{
    uint64_t *r = &st->rng;
    uint8_t key[64], val[400];
    switch (op) {
    case SES_OPEN:
        f_u64(f, rng_below(r, 2) ? 0 : rng_next(r));
        f_u8(f, rng_below(r, 2) ? SES_CONFLICT_NODE : (uint8_t)rng_next(r));
        break;
    case SES_GET:
        f_u8(f, (uint8_t)rng_below(r, 3));
        f_str(f, key, fuzz_key(st, key, sizeof key));
        break;
    case SES_PUT: {
        uint32_t kl = fuzz_key(st, key, sizeof key), vl = (uint32_t)rng_below(r, sizeof val);
        for (uint32_t i = 0; i < vl; i++) val[i] = (uint8_t)rng_next(r);
        f_str(f, key, kl);
        f_str(f, val, vl);
        break;
    }
    case SES_DEL: f_str(f, key, fuzz_key(st, key, sizeof key)); break;
    case SES_PATCH: {
        f_u8(f, (uint8_t)rng_below(r, 3));
        f_str(f, key, fuzz_key(st, key, sizeof key));
        uint32_t vl = (uint32_t)rng_below(r, sizeof val);
        f_u32(f, rng_below(r, 2) ? (uint32_t)rng_below(r, 64) : (uint32_t)rng_next(r));
        for (uint32_t i = 0; i < vl; i++) val[i] = (uint8_t)rng_next(r);
        f_str(f, val, vl);
        break;
    }
    case SES_SCAN: {
        uint32_t bl = fuzz_key(st, key, sizeof key);
        f_str(f, key, bl);
        uint8_t he = (uint8_t)rng_below(r, 3);
        f_u8(f, he);
        bl = he ? fuzz_key(st, key, sizeof key) : 0;
        f_str(f, key, bl);
        f_u64(f, rng_below(r, 2) ? rng_below(r, 10) : rng_next(r));
        break;
    }
    default: break;
    }
}

static void make_scan(struct state *st, uint16_t node, struct frame *f)
{
    uint64_t *r = &st->rng;
    uint8_t key[64];
    f->len = 0;
    f_str(f, key, rng_below(r, 3) ? 0 : fuzz_key(st, key, sizeof key));
    uint8_t he = (uint8_t)rng_below(r, 3);
    f_u8(f, he);
    f_str(f, key, he && rng_below(r, 2) ? fuzz_key(st, key, sizeof key) : 0);
    uint8_t ha = (uint8_t)rng_below(r, 3);
    f_str(f, key, ha && rng_below(r, 2) ? fuzz_key(st, key, sizeof key) : 0);
    f_u8(f, ha);
    f_u32(f, rng_below(r, 2) ? (uint32_t)rng_below(r, 300) : (uint32_t)rng_next(r));
    f_u16(f, rng_below(r, 4) ? node : (uint16_t)rng_next(r)); /* the partition */
}

/* A well-formed-looking frame of the type. */
static void make_valid(struct state *st, uint16_t node, uint16_t type, struct frame *f)
{
    uint64_t *r = &st->rng;
    f->len = 0;
    switch (type) {
    case KV_RPC_SESSION: make_session(st, node, f); break;
    case TXN_RPC_PREPARE:
    case TXN_RPC_APPLY: make_wops(st, node, f); break;
    case TXN_RPC_COMMIT:
    case TXN_RPC_ABORT:
        /* unknown txids: fake ones, and plausible real ones of no prepared transaction */
        f_u64(f, rng_below(r, 2) ? fake_txid(st)
                                 : (uint64_t)rng_below(r, NNODES) << 48 | rng_below(r, 1 << 20));
        break;
    case TXN_RPC_SCAN: make_scan(st, node, f); break;
    case KV_RPC_STATUS: break;
    }
}

/* Corrupts a frame: bit flips, byte stores, truncation, a random tail, a u32 set huge. */
static void mutate(struct state *st, struct frame *f)
{
    uint64_t *r = &st->rng;
    unsigned muts = 1 + (unsigned)rng_below(r, 4);
    for (unsigned m = 0; m < muts; m++) {
        size_t at = f->len ? rng_below(r, f->len) : 0;
        switch (rng_below(r, 7)) {
        case 0:
            if (f->len) f->b[at] ^= (uint8_t)(1u << rng_below(r, 8));
            break;
        case 1:
            if (f->len) f->b[at] = (uint8_t)rng_next(r);
            break;
        case 2: f->len = f->len ? rng_below(r, f->len) : 0; break; /* truncate */
        case 3: {
            size_t n = rng_below(r, 64);
            for (size_t i = 0; i < n && f->len < sizeof f->b; i++) f->b[f->len++] = (uint8_t)rng_next(r);
            break;
        }
        case 4: /* a length field set huge, or just past the end */
        case 5:
            if (at + 4 <= f->len) {
                static const uint32_t huge[] = {0xFFFFFFFFu, 0x7FFFFFFFu, 0x80000000u, 0x10000u,
                                                1u << 20, 0xFFFFFFF0u};
                uint32_t v = rng_below(r, 2) ? huge[rng_below(r, 6)]
                                             : (uint32_t)(f->len - at) + (uint32_t)rng_below(r, 9) - 4;
                put_le(f->b + at, v, 4);
            }
            break;
        case 6:
            if (f->len) f->b[at] = (uint8_t[]){0, 0xff, 1, 2, 3, 4, 0x80}[rng_below(r, 7)];
            break;
        }
    }
}

static const uint16_t all_types[] = {KV_RPC_SESSION, TXN_RPC_PREPARE, TXN_RPC_COMMIT,
                                     TXN_RPC_ABORT,  TXN_RPC_APPLY,   TXN_RPC_SCAN,
                                     KV_RPC_STATUS};
#define NTYPES (sizeof all_types / sizeof all_types[0])

/* One frame of the type: random bytes, a valid-looking one, or a corrupted one. */
static void make_frame(struct state *st, uint16_t node, uint16_t type, struct frame *f)
{
    uint64_t *r = &st->rng;
    switch (rng_below(r, 4)) {
    case 0: /* random bytes, 0..300 */
        f->len = rng_below(r, 301);
        for (size_t i = 0; i < f->len; i++) f->b[i] = (uint8_t)rng_next(r);
        if (type == KV_RPC_SESSION && f->len >= SES_ID_LEN + 1 && rng_below(r, 2)) {
            /* get past the router: a known op with an unknown or a real session */
            f->b[SES_ID_LEN] = (uint8_t)(1 + rng_below(r, SES_STATUS));
            if (st->nsids[node] && rng_below(r, 4))
                memcpy(f->b, st->sids[node][rng_below(r, st->nsids[node])].b, SES_ID_LEN);
        }
        break;
    case 1: make_valid(st, node, type, f); break;
    default:
        make_valid(st, node, type, f);
        mutate(st, f);
        break;
    }
    /* A session may ask for lock waits of up to an hour (longer means the node's default): a
     * session opened here waits at most 1 s, so that two of this test's sessions contending for
     * a key never outwait the RPC deadline (that would be the test's deadlock, not the node's). */
    if (type == KV_RPC_SESSION && f->len == SES_OPEN_LEN && f->b[SES_ID_LEN] == SES_OPEN) {
        uint64_t lto = 0;
        for (int i = 7; i >= 0; i--) lto = lto << 8 | f->b[SES_ID_LEN + 1 + i];
        if (lto > (uint64_t)NS_PER_S && lto <= 3600ull * (uint64_t)NS_PER_S)
            put_le(f->b + SES_ID_LEN + 1, (uint64_t)NS_PER_S, 8);
    }
}

/* Scans a node's rows through TXN_RPC_SCAN (pages of up to 256) and finds its heap region. */
static void learn_rows(struct state *st)
{
    for (uint16_t n = 0; n < NNODES; n++) {
        st->nrows[n] = 0;
        uint64_t size = 0;
        CHECK_EQ(fab_region_lookup(st->c, n, "store.heap", &st->heap[n], &size), 0);
        st->heap_size[n] = size;
        struct frame f;
        f.len = 0;
        f_str(&f, "", 0);
        f_u8(&f, 0);
        f_str(&f, "", 0);
        f_str(&f, "", 0);
        f_u8(&f, 0);
        f_u32(&f, 256);
        f_u16(&f, n);
        struct fab_buf resp = {0};
        int rc = fab_rpc_call(st->c, n, TXN_RPC_SCAN, f.b, f.len, &resp, RPC_DEADLINE_NS);
        CHECK_EQ(rc, 0);
        if (!rc) {
            struct pack_r r;
            pack_r_init(&r, resp.data, resp.len);
            unpack_u8(&r);
            uint32_t cnt = unpack_u32(&r);
            for (uint32_t i = 0; i < cnt && !r.err; i++) {
                rptr row = unpack_u64(&r);
                uint32_t kl = unpack_u32(&r);
                const uint8_t *key = pack_r_take(&r, kl);
                CHECK_EQ(rptr_node(row), n);
                if (st->nrows[n] < 512 && key && kl <= 16) {
                    st->rows[n][st->nrows[n]] = row;
                    memcpy(st->rkeys[n][st->nrows[n]], key, kl);
                    st->rklen[n][st->nrows[n]++] = kl;
                }
            }
            CHECK(!r.err);
        }
        fab_buf_free(&resp);
        CHECK(st->nrows[n] > 0);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Tests. */

static void print_tallies(void)
{
    for (size_t i = 0; i < NTYPES; i++) {
        struct tally *t = &tallies[all_types[i] - FAB_RPC_USER_BASE];
        fprintf(stderr, "  %-8s %6llu sent:", type_name(all_types[i]), (unsigned long long)t->sent);
        for (int s = 0; s <= -RDKV_STATUS_MIN; s++)
            if (t->by_status[s])
                fprintf(stderr, " %s %llu", s ? rdkv_status_name(-s) + 5 : "OK",
                        (unsigned long long)t->by_status[s]);
        fputc('\n', stderr);
    }
    memset(tallies, 0, sizeof tallies);
}

/* Opens a few sessions on each node with well-formed SES_OPEN frames, so that random frames
 * reach real sessions too. */
static void open_sessions(struct state *st)
{
    for (uint16_t n = 0; n < NNODES; n++)
        for (int i = 0; i < 3; i++) {
            struct frame f;
            f.len = 0;
            struct ses_id none = sid_fake(0);
            f_sid(&f, &none);
            f_u8(&f, SES_OPEN);
            f_u64(&f, 0);
            f_u8(&f, SES_CONFLICT_NODE);
            struct fab_buf resp = {0};
            call(st, n, KV_RPC_SESSION, f.b, f.len, &resp);
            fab_buf_free(&resp);
        }
}

struct sender {
    struct state st;
    struct frame f;
    unsigned rounds;
    pthread_t th;
};

/* Sends rounds of one frame of each type to a random node; a failure ends it early. */
static void *sender_main(void *arg)
{
    struct sender *x = arg;
    struct state *st = &x->st;
    if (fab_ctx_create(st->k->cf, &st->c)) {
        st->fails++;
        return NULL;
    }
    open_sessions(st);
    for (unsigned i = 0; i < x->rounds && st->fails < 10; i++) {
        for (size_t t = 0; t < NTYPES; t++) {
            uint16_t node = (uint16_t)rng_below(&st->rng, NNODES);
            make_frame(st, node, all_types[t], &x->f);
            struct fab_buf resp = {0};
            call(st, node, all_types[t], x->f.b, x->f.len, &resp);
            fab_buf_free(&resp);
        }
        if (i % 250 == 249) {
            close_sessions(st); /* stay under the session limit; start afresh */
            open_sessions(st);
        }
    }
    close_sessions(st);
    fab_ctx_destroy(st->c);
    st->c = NULL;
    return NULL;
}

/* Thousands of random and corrupted frames to every request type of both nodes: first from one
 * thread, then from two at once. */
static void random_frames(void)
{
    static struct cl k;
    REQUIRE(cl_start(&k) == 0);
    load_keys(&k);
    static struct sender xs[2];
    memset(xs, 0, sizeof xs);
    /* the rows and heaps, learnt once: the senders only read them */
    struct state base;
    memset(&base, 0, sizeof base);
    base.k = &k;
    base.c = k.c;
    learn_rows(&base);
    unsigned rounds = tenv_quick ? 1000 : 4000;
    /* RDKV_BADINPUT_SEED=N: other frames (the default run is always the same) */
    const char *seed_env = getenv("RDKV_BADINPUT_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) : 0;
    const char *rounds_env = getenv("RDKV_BADINPUT_ROUNDS");
    if (rounds_env && strtoul(rounds_env, NULL, 10) > 0) rounds = (unsigned)strtoul(rounds_env, NULL, 10);
    if (seed) fprintf(stderr, "  seed %llu\n", (unsigned long long)seed);
    for (int phase = 0; phase < 2; phase++) {
        int nth = phase + 1;
        int64_t t0 = clock_now_ns();
        uint64_t skipped = 0;
        for (int i = 0; i < nth; i++) {
            xs[i].st = base;
            xs[i].st.c = NULL;
            xs[i].st.rng = (0x5eed0fba6d1ull ^ seed * 0x9E3779B97F4A7C15ull) +
                           7919ull * (uint64_t)(2 * phase + i);
            if (!xs[i].st.rng) xs[i].st.rng = 1;
            xs[i].rounds = rounds / (unsigned)nth;
            REQUIRE(pthread_create(&xs[i].th, NULL, sender_main, &xs[i]) == 0);
        }
        for (int i = 0; i < nth; i++) {
            pthread_join(xs[i].th, NULL);
            harness_failures += (int)xs[i].st.fails;
            skipped += xs[i].st.skipped;
        }
        fprintf(stderr,
                "  %u rounds of %zu frames from %d thread(s) in %.1f s (%llu frames not sent: "
                "could change a loaded key)\n",
                rounds, NTYPES, nth, (double)(clock_now_ns() - t0) / 1e9,
                (unsigned long long)skipped);
        print_tallies();
    }
    after_checks(&k);
    cl_stop(&k);
}

/* Crafted frames with exact answers: rows that are not live rows of the key, the arena header,
 * heap edges, another node's rows; a refused PREPARE / APPLY stages nothing; an INSERT of a key
 * that exists changes nothing; COMMIT / ABORT of unknown transactions; sessions misused. */
/* A txid as the frame's sender names it: as node ^ 1 (st->as_coord), or as it is. */
static uint64_t as_txid(const struct state *st, uint16_t node, uint64_t txid)
{
    if (!st->as_coord) return txid;
    return (txid & 0xFFFFFFFFFFFFull) | (uint64_t)(node ^ 1) << 48;
}

static int wops_call(struct state *st, uint16_t node, uint16_t type, const struct wop *ops,
                     uint32_t n, uint64_t txid)
{
    struct pack_w w;
    pack_w_init(&w);
    uint16_t coord = st->as_coord && !st->coord_lie ? (uint16_t)(node ^ 1) : (uint16_t)node;
    if (!st->as_coord) coord = 1;
    txn_wops_pack(&w, as_txid(st, node, txid), coord, node_inc(st, node), ops, n);
    struct fab_buf resp = {0};
    int rc = w.err ? RDKV_ENOMEM : call(st, node, type, w.p, w.len, &resp);
    fab_buf_free(&resp);
    pack_w_free(&w);
    return rc;
}

static int txid_call(struct state *st, uint16_t node, uint16_t type, uint64_t txid)
{
    uint8_t b[8];
    put_le(b, as_txid(st, node, txid), 8);
    struct fab_buf resp = {0};
    int rc = call(st, node, type, b, 8, &resp);
    fab_buf_free(&resp);
    return rc;
}

/* Whether key exists, by a TXN_RPC_SCAN of [key, key + "\0"). */
static bool key_exists(struct state *st, uint16_t node, const void *key, uint32_t klen)
{
    struct frame f;
    uint8_t end[80];
    memcpy(end, key, klen);
    end[klen] = 0;
    f.len = 0;
    f_str(&f, key, klen);
    f_u8(&f, 1);
    f_str(&f, end, klen + 1);
    f_str(&f, "", 0);
    f_u8(&f, 0);
    f_u32(&f, 4);
    f_u16(&f, node); /* (node's own partition) */
    struct fab_buf resp = {0};
    int rc = fab_rpc_call(st->c, node, TXN_RPC_SCAN, f.b, f.len, &resp, RPC_DEADLINE_NS);
    CHECK_EQ(rc, 0);
    bool found = !rc && resp.len >= 5 && ((const uint8_t *)resp.data)[1] != 0;
    fab_buf_free(&resp);
    return found;
}

static uint16_t owner_of(const void *key, uint32_t klen)
{
    return (uint16_t)(store_place_hash(key, klen) % NNODES);
}

/* Contexts of each node's own fabric, to send 2PC frames to the other as a node. */
static void as_nodes(struct state *st, struct cl *k)
{
    for (unsigned i = 0; i < NNODES; i++)
        REQUIRE(fab_ctx_create(node_fabric(rdkv_node_server(k->node[i ^ 1])), &st->as_node[i]) ==
                0);
    st->as_coord = true;
}

static void as_nodes_free(struct state *st)
{
    for (unsigned i = 0; i < NNODES; i++)
        if (st->as_node[i]) fab_ctx_destroy(st->as_node[i]);
    memset(st->as_node, 0, sizeof st->as_node);
    st->as_coord = false;
}

static void crafted_frames(void)
{
    static struct cl k;
    REQUIRE(cl_start(&k) == 0);
    load_keys(&k);
    static struct state st;
    memset(&st, 0, sizeof st);
    st.k = &k;
    st.c = k.c;
    st.rng = 0xc4af7ed;
    as_nodes(&st, &k);
    learn_rows(&st);
    static const uint16_t wtypes[] = {TXN_RPC_PREPARE, TXN_RPC_APPLY};
    unsigned refused = 0;
    uint64_t txid = FAKE_TXID_TOP | 1;

    for (uint16_t node = 0; node < NNODES; node++) {
        rptr hp = st.heap[node];
        uint64_t hsz = st.heap_size[node];
        /* row pointers that are not rows, or not of this node */
        rptr bad[] = {
            rptr_make(node, 64), /* the arena header */
            rptr_make(node, 4096),
            rptr_add(hp, (uint64_t)-64),
            hp,
            rptr_add(hp, 8),
            rptr_add(hp, hsz - 128), /* the last place a row could start */
            rptr_add(hp, hsz - 64),
            rptr_add(hp, hsz),
            rptr_make(node, (64ull << 20) - 64),
            rptr_make(node, 1ull << 40),
            rptr_make(node, RPTR_OFF_MASK & ~63ull),
            rptr_make((uint16_t)(node ^ 1), rptr_off(st.rows[node][0])),
            rptr_make(7, rptr_off(st.rows[node][0])),
            rptr_make(FAB_NODE_CLIENT, rptr_off(st.rows[node][0])),
            rptr_add(st.rows[node][0], 8),
            rptr_add(st.rows[node][0], 64),
            rptr_add(st.rows[node][0], 128),
            rptr_add(st.rows[node][0], (uint64_t)-64),
        };
        static const char *const keys[] = {"fz/none", "", "ld/000x"};
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++)
            for (size_t t = 0; t < 2; t++)
                for (uint8_t kind = WOP_UPDATE; kind <= WOP_DELETE; kind += 2)
                    for (size_t ki = 0; ki < 3; ki++) {
                        struct wop o = {.kind = kind, .row = bad[b], .key = (const uint8_t *)keys[ki],
                                        .klen = (uint32_t)strlen(keys[ki]),
                                        .val = (const uint8_t *)"new", .vlen = kind == WOP_DELETE ? 0 : 3};
                        int rc = wops_call(&st, node, wtypes[t], &o, 1, txid++);
                        if (rc != RDKV_EPROTO && rc != RDKV_EABORTED) {
                            fprintf(stderr, "  node %u: %s %s of row %llx (bad[%zu]): %s\n",
                                    node, type_name(wtypes[t]), kind == WOP_UPDATE ? "UPDATE" : "DELETE",
                                    (unsigned long long)bad[b], b, rdkv_status_name(rc));
                            harness_failures++;
                        } else {
                            refused++;
                        }
                    }
        /* every real row of this node, named with a key that is not its own */
        for (unsigned i = 0; i < st.nrows[node]; i++) {
            uint8_t key[16];
            uint32_t kl = fuzz_key(&st, key, sizeof key);
            for (size_t t = 0; t < 2; t++) {
                struct wop o = {.kind = (uint8_t)(i % 2 ? WOP_UPDATE : WOP_DELETE),
                                .row = st.rows[node][i], .key = key, .klen = kl,
                                .val = (const uint8_t *)"xyz", .vlen = i % 2 ? 3 : 0};
                int rc = wops_call(&st, node, wtypes[t], &o, 1, txid++);
                CHECK_EQ(rc, RDKV_EABORTED);
            }
        }
        /* loaded keys, named with rows that are certainly not theirs: not a row at all, another
         * node's, and the row of another loaded key */
        st.allow_loaded = true;
        rptr r0 = st.rows[node][0];
        rptr nonrow[] = {rptr_make(node, 64), rptr_make((uint16_t)(node ^ 1), rptr_off(r0)),
                         rptr_add(r0, 8), rptr_add(r0, 64), rptr_make(node, 1ull << 40)};
        for (size_t b = 0; b < sizeof nonrow / sizeof nonrow[0]; b++)
            for (unsigned i = 0; i < 4 && i < st.nrows[node]; i++)
                for (size_t t = 0; t < 2; t++) {
                    struct wop o = {.kind = (uint8_t)(i % 2 ? WOP_UPDATE : WOP_DELETE),
                                    .row = nonrow[b], .key = st.rkeys[node][i],
                                    .klen = st.rklen[node][i], .val = (const uint8_t *)"xyz",
                                    .vlen = i % 2 ? 3 : 0};
                    CHECK_EQ(wops_call(&st, node, wtypes[t], &o, 1, txid++), RDKV_EPROTO);
                }
        for (unsigned i = 0; i < st.nrows[node] && st.nrows[node] > 1; i++) {
            unsigned other = (i + 1) % st.nrows[node];
            for (size_t t = 0; t < 2; t++) {
                struct wop o = {.kind = (uint8_t)(i % 2 ? WOP_UPDATE : WOP_DELETE),
                                .row = st.rows[node][i], .key = st.rkeys[node][other],
                                .klen = st.rklen[node][other], .val = (const uint8_t *)"xyz",
                                .vlen = i % 2 ? 3 : 0};
                CHECK_EQ(wops_call(&st, node, wtypes[t], &o, 1, txid++), RDKV_EABORTED);
            }
        }
        st.allow_loaded = false;
        /* a refused frame stages nothing: an INSERT before a bogus UPDATE does not happen, and
         * a PREPARE refused is not recorded (the INSERT holds no lock of its point: the fence
         * refuses it first) */
        char ins[32];
        unsigned j = 0;
        do snprintf(ins, sizeof ins, "fz/mixed/%u", j++);
        while (owner_of(ins, (uint32_t)strlen(ins)) != node);
        for (size_t t = 0; t < 2; t++) {
            struct wop o[2] = {
                {.kind = WOP_INSERT, .key = (const uint8_t *)ins, .klen = (uint32_t)strlen(ins),
                 .val = (const uint8_t *)"v", .vlen = 1},
                {.kind = WOP_UPDATE, .row = rptr_make(node, 64), .key = (const uint8_t *)"fz/x",
                 .klen = 4, .val = (const uint8_t *)"w", .vlen = 1},
            };
            uint64_t id = txid++;
            CHECK_EQ(wops_call(&st, node, wtypes[t], o, 2, id), RDKV_EABORTED);
            CHECK_EQ(txid_call(&st, node, TXN_RPC_COMMIT, id), RDKV_ENOTFOUND);
            CHECK(!key_exists(&st, node, ins, (uint32_t)strlen(ins)));
        }
        /* an INSERT of a loaded key (applied, or prepared then committed) holds no lock of
         * its point, forged tokens included: refused, nothing changes */
        for (unsigned i = 0, done = 0; i < NKEYS && done < 4; i++) {
            char key[16];
            key_of(i, key);
            if (owner_of(key, 6) != node) continue;
            struct wop o = {.kind = WOP_INSERT, .key = (const uint8_t *)key, .klen = 6,
                            .val = (const uint8_t *)"clobbered", .vlen = 9,
                            .range_tok = done * 7 + 1};
            if (done++ % 2) {
                CHECK_EQ(wops_call(&st, node, TXN_RPC_APPLY, &o, 1, txid++), RDKV_EABORTED);
            } else {
                uint64_t id = txid++;
                /* (sent directly: call() would abort what it prepared) */
                struct pack_w w;
                pack_w_init(&w);
                txn_wops_pack(&w, as_txid(&st, node, id), (uint16_t)(node ^ 1), node_inc(&st, node),
                              &o, 1);
                struct fab_buf resp = {0};
                CHECK_EQ(fab_rpc_call(st.as_node[node], node, TXN_RPC_PREPARE, w.p, w.len, &resp,
                                      RPC_DEADLINE_NS), RDKV_EABORTED);
                fab_buf_free(&resp);
                pack_w_free(&w);
                CHECK_EQ(txid_call(&st, node, TXN_RPC_COMMIT, id), RDKV_ENOTFOUND);
                CHECK_EQ(txid_call(&st, node, TXN_RPC_ABORT, id), 0);
            }
        }
        /* COMMIT / ABORT: unknown transactions, bad lengths */
        CHECK_EQ(txid_call(&st, node, TXN_RPC_COMMIT, FAKE_TXID_TOP | 0xdead), RDKV_ENOTFOUND);
        CHECK_EQ(txid_call(&st, node, TXN_RPC_ABORT, FAKE_TXID_TOP | 0xdead), 0);
        /* the same frames from the client fabric, or naming another coordinator: refused
         * before anything is looked at */
        {
            struct wop o = {.kind = WOP_UPDATE, .row = st.rows[node][0], .key = st.rkeys[node][0],
                            .klen = st.rklen[node][0], .val = (const uint8_t *)"xyz", .vlen = 3};
            st.allow_loaded = true;
            for (size_t t = 0; t < 2; t++) {
                st.as_coord = false;
                CHECK_EQ(wops_call(&st, node, wtypes[t], &o, 1, txid++), NOT_COORD);
                st.as_coord = true;
                st.coord_lie = true; /* the txid names node ^ 1, the frame another */
                CHECK_EQ(wops_call(&st, node, wtypes[t], &o, 1, txid++), NOT_COORD);
                st.coord_lie = false;
            }
            st.allow_loaded = false;
            st.as_coord = false;
            CHECK_EQ(txid_call(&st, node, TXN_RPC_COMMIT, FAKE_TXID_TOP | 0xdead), NOT_COORD);
            CHECK_EQ(txid_call(&st, node, TXN_RPC_ABORT, FAKE_TXID_TOP | 0xdead), NOT_COORD);
            st.as_coord = true;
        }
        for (size_t len = 0; len < 12; len++) {
            if (len == 8) continue;
            uint8_t b[12] = {0};
            struct fab_buf resp = {0};
            CHECK_EQ(call(&st, node, TXN_RPC_COMMIT, b, len, &resp), RDKV_EPROTO);
            CHECK_EQ(call(&st, node, TXN_RPC_ABORT, b, len, &resp), RDKV_EPROTO);
            CHECK_EQ(call(&st, node, TXN_RPC_PREPARE, b, len, &resp), RDKV_EPROTO);
            CHECK_EQ(call(&st, node, TXN_RPC_APPLY, b, len, &resp), RDKV_EPROTO);
            CHECK_EQ(call(&st, node, TXN_RPC_SCAN, b, len, &resp), RDKV_EPROTO);
            fab_buf_free(&resp);
        }
        /* frames that claim huge counts and lengths */
        {
            struct frame f;
            f.len = 0;
            f_u64(&f, txid++);
            f_bytes(&f, "\x01\x00", 2);
            f_u64(&f, node_inc(&st, node)); /* incarnation */
            f_u32(&f, 0xFFFFFFFFu); /* ops */
            f_u8(&f, WOP_INSERT);
            f_u64(&f, 0);
            f_u32(&f, 3);
            f_bytes(&f, "fz/", 3);
            f_u32(&f, 0);
            struct fab_buf resp = {0};
            CHECK_EQ(call(&st, node, TXN_RPC_APPLY, f.b, f.len, &resp), RDKV_EPROTO);
            put_le(f.b + 18, 1, 4);
            put_le(f.b + 22 + 9, 0xFFFFFFF0u, 4); /* klen */
            CHECK_EQ(call(&st, node, TXN_RPC_APPLY, f.b, f.len, &resp), RDKV_EPROTO);
            put_le(f.b + 22 + 9, 3, 4);
            put_le(f.b + f.len - 4, 0x7FFFFFFFu, 4); /* vlen */
            CHECK_EQ(call(&st, node, TXN_RPC_PREPARE, f.b, f.len, &resp), RDKV_EPROTO);
            put_le(f.b + f.len - 4, 0, 4);
            f.b[22] = 0; /* kind */
            CHECK_EQ(call(&st, node, TXN_RPC_PREPARE, f.b, f.len, &resp), RDKV_EPROTO);
            f.b[22] = WOP_DELETE; /* with a NULL row */
            CHECK_EQ(call(&st, node, TXN_RPC_PREPARE, f.b, f.len, &resp), RDKV_EPROTO);
            fab_buf_free(&resp);
            /* a key over the node's key_max */
            static uint8_t big[5000];
            memset(big, 'z', sizeof big);
            struct wop o = {.kind = WOP_INSERT, .key = big, .klen = sizeof big,
                            .val = (const uint8_t *)"v", .vlen = 1};
            CHECK_EQ(wops_call(&st, node, TXN_RPC_APPLY, &o, 1, txid++), RDKV_ETOOBIG);
        }
        /* scans: inverted and odd bounds answer (a page, maybe empty); bad flags are refused */
        {
            struct frame f;
            f.len = 0;
            f_str(&f, "zz", 2);
            f_u8(&f, 1);
            f_str(&f, "aa", 2);
            f_str(&f, "", 0);
            f_u8(&f, 0);
            f_u32(&f, 0);
            f_u16(&f, node);
            struct fab_buf resp = {0};
            CHECK_EQ(call(&st, node, TXN_RPC_SCAN, f.b, f.len, &resp), 0);
            f.b[6] = 2; /* has_end */
            CHECK_EQ(call(&st, node, TXN_RPC_SCAN, f.b, f.len, &resp), RDKV_EPROTO);
            f.b[6] = 0; /* no end, but an end key */
            CHECK_EQ(call(&st, node, TXN_RPC_SCAN, f.b, f.len, &resp), RDKV_EPROTO);
            fab_buf_free(&resp);
        }
    }

    /* sessions misused */
    for (uint16_t node = 0; node < NNODES; node++) {
        struct frame f;
        struct fab_buf resp = {0};
#define SES(sid_, op_)                                                                             \
    do {                                                                                           \
        f.len = 0;                                                                                 \
        struct ses_id sid__ = (sid_);                                                              \
        f_sid(&f, &sid__);                                                                         \
        f_u8(&f, (op_));                                                                           \
    } while (0)
        SES(sid_fake((uint64_t)node << 48 | 12345), SES_GET);
        f_u8(&f, 0);
        f_str(&f, "fz/a", 4);
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), RDKV_ESESSION);
        SES(sid_fake(0), SES_BEGIN);
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), RDKV_ESESSION);
        for (unsigned op = 0; op < 256; op += op < 16 ? 1 : 37) {
            if (op >= SES_OPEN && op <= SES_MULTI) continue;
            SES(sid_fake(0), (uint8_t)op);
            CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), RDKV_EPROTO);
        }
        SES(sid_fake(5), SES_OPEN); /* OPEN names no session */
        f_u64(&f, 0);
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), RDKV_EPROTO);
        SES(sid_fake(0), SES_OPEN);
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), RDKV_EPROTO); /* no field */
        f_u64(&f, 0);
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), RDKV_EPROTO); /* one short */
        f_u8(&f, SES_CONFLICT_NODE);
        f_u8(&f, 0);
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), RDKV_EPROTO); /* one more */
        f.len--;
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), 0);
        REQUIRE(st.nsids[node] == 1);
        struct ses_id sid = st.sids[node][0];
        /* without BEGIN */
        SES(sid, SES_GET);
        f_u8(&f, 0);
        f_str(&f, "fz/a", 4);
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), RDKV_EINVAL);
        SES(sid, SES_PUT);
        f_str(&f, "fz/a", 4);
        f_str(&f, "v", 1);
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), RDKV_EINVAL);
        static const uint8_t no_txn[] = {SES_COMMIT, SES_SCAN_NEXT};
        for (size_t i = 0; i < sizeof no_txn; i++) {
            SES(sid, no_txn[i]);
            CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), RDKV_EINVAL);
        }
        SES(sid, SES_ABORT);
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), 0);
        /* flags where they do not fit: refused before anything runs */
        static const uint8_t bad_flags[] = {
            SES_COMMIT | SES_F_BEGIN, SES_SCAN_NEXT | SES_F_COMMIT, SES_BEGIN | SES_F_BEGIN,
            SES_GET | SES_F_RETRY, SES_ABORT | SES_F_RETRY | SES_F_BEGIN, SES_OPEN | SES_F_COMMIT,
        };
        for (size_t i = 0; i < sizeof bad_flags; i++) {
            SES(sid, bad_flags[i]);
            f_u8(&f, 0);
            f_str(&f, "fz/a", 4);
            CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), RDKV_EPROTO);
        }
        /* a one-shot read of an absent key: one request, the answer, and no transaction left */
        SES(sid, SES_GET | SES_F_BEGIN | SES_F_COMMIT);
        f_u8(&f, 0);
        f_str(&f, "fz/absent", 9);
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), RDKV_ENOTFOUND);
        SES(sid, SES_COMMIT);
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), RDKV_EINVAL);
        /* inside a transaction: malformed operations are refused, the transaction goes on */
        SES(sid, SES_BEGIN);
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), 0);
        SES(sid, SES_PUT);
        f_str(&f, "fz/a", 4);
        f_u32(&f, 100); /* value cut short */
        f_bytes(&f, "v", 1);
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), RDKV_EPROTO);
        SES(sid, SES_GET);
        f_u8(&f, 0);
        f_u32(&f, 0xFFFFFFFFu);
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), RDKV_EPROTO);
        SES(sid, SES_SCAN);
        f_str(&f, "a", 1);
        f_u8(&f, 2);
        f_str(&f, "b", 1);
        f_u64(&f, 0);
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), RDKV_EPROTO);
        SES(sid, SES_BEGIN);
        f_u8(&f, 0); /* a trailing byte */
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), RDKV_EPROTO);
        static uint8_t bigkey[5000];
        memset(bigkey, 'z', sizeof bigkey);
        SES(sid, SES_GET);
        f_u8(&f, 0);
        f_str(&f, bigkey, sizeof bigkey);
        CHECK(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp) != 0);
        SES(sid, SES_ABORT);
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), 0);
        /* a whole transaction through the raw frames still works */
        SES(sid, SES_BEGIN);
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), 0);
        SES(sid, SES_PUT);
        f_str(&f, "fz/raw", 6);
        f_str(&f, "ok", 2);
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), 0);
        SES(sid, SES_COMMIT);
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), 0);
        CHECK(key_exists(&st, owner_of("fz/raw", 6), "fz/raw", 6));
        SES(sid, SES_CLOSE);
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), 0);
        SES(sid, SES_BEGIN);
        CHECK_EQ(call(&st, node, KV_RPC_SESSION, f.b, f.len, &resp), RDKV_ESESSION);
        st.nsids[node] = 0;
        fab_buf_free(&resp);
#undef SES
    }
    /* more sessions than a node serves: RDKV_EBUSY, and a session again once they are closed */
    {
        static struct ses_id sids[256];
        unsigned n = 0, busy = 0;
        for (unsigned i = 0; i < 200 && !busy; i++) {
            uint8_t b[SES_OPEN_LEN];
            ses_open_request(b);
            struct fab_buf resp = {0};
            int rc = ses_rpc(k.c, 0, b, sizeof b, &resp);
            if (rc == 0 && resp.len >= SES_ID_LEN + 4) {
                memcpy(sids[n++].b, resp.data, SES_ID_LEN);
            } else {
                CHECK_EQ(rc, RDKV_EBUSY);
                busy++;
            }
            fab_buf_free(&resp);
        }
        CHECK_EQ(busy, 1);
        CHECK_EQ(n, (unsigned)atoi(TEST_MAX_SESSIONS));
        for (unsigned i = 0; i < n; i++) {
            uint8_t b[SES_ID_LEN + 1];
            memcpy(b, sids[i].b, SES_ID_LEN);
            b[SES_ID_LEN] = SES_CLOSE;
            struct fab_buf resp = {0};
            CHECK_EQ(ses_rpc(k.c, 0, b, sizeof b, &resp), 0);
            fab_buf_free(&resp);
        }
    }
    /* values at and over the node's value_max */
    {
        static uint8_t big[(1u << 20) + 1];
        memset(big, 'v', sizeof big);
        const char *key = "fz/bigvalue";
        uint16_t node = owner_of(key, (uint32_t)strlen(key));
        struct wop o = {.kind = WOP_INSERT, .key = (const uint8_t *)key,
                        .klen = (uint32_t)strlen(key), .val = big, .vlen = sizeof big};
        CHECK_EQ(wops_call(&st, node, TXN_RPC_APPLY, &o, 1, txid++), RDKV_ETOOBIG);
        o.vlen = sizeof big - 1;
        /* within the limit: decoded, then refused by the fence (no lock held) */
        CHECK_EQ(wops_call(&st, node, TXN_RPC_PREPARE, &o, 1, txid++), RDKV_EABORTED);
        CHECK(!key_exists(&st, node, key, (uint32_t)strlen(key)));
    }
    harness_failures += (int)st.fails;
    fprintf(stderr, "  %u PREPARE/APPLY naming bogus rows refused\n", refused);
    print_tallies();
    as_nodes_free(&st);
    after_checks(&k);
    cl_stop(&k);
}

/* Non-row memory that looks like a row: a value stored out of line whose bytes imitate a row
 * header (LIVE, magic, a key) at a 64-byte aligned place. PREPARE / APPLY naming that place as a
 * row, with the imitated key, must be refused: it is no row of the node (the index does not
 * hold it), and staging into it would write into another key's value. */
static int put_forge(rdkv_txn *t, void *arg)
{
    const uint8_t *v = arg;
    return rdkv_txn_put(t, "fz/forge", 8, v, 8192);
}

static void forged_row(void)
{
    static struct cl k;
    REQUIRE(cl_start(&k) == 0);
    load_keys(&k);
    static struct state st;
    memset(&st, 0, sizeof st);
    st.k = &k;
    st.c = k.c;
    st.rng = 0xf0e6;
    as_nodes(&st, &k);
    /* the value: forged rows at every 64-byte line, each "row" with key "fk" */
    static uint8_t val[8192], back[8192];
    memset(val, 0, sizeof val);
    for (size_t at = 0; at + 192 <= sizeof val; at += 64) {
        struct row_hdr h = {.version = 7, .klen = 2, .vlen = 2, .cap = 64, .flags = ROW_LIVE,
                            .magic = ROW_MAGIC, .vext = RPTR_NULL, .khash = store_hash("fk", 2)};
        /* every line is both a header (for the "row" 64 bytes before it) and data */
        if ((at / 64) % 2 == 0) memcpy(val + at + 64, &h, sizeof h);
        else memcpy(val + at + 64, "fkfk", 4);
    }
    rdkv_session *s;
    REQUIRE(rdkv_session_open(k.node[0], NULL, &s) == 0);
    CHECK_EQ(rdkv_run_txn(s, put_forge, val), 0);
    rdkv_session_close(s);
    learn_rows(&st);
    uint16_t node = owner_of("fz/forge", 8);
    rptr row = RPTR_NULL;
    for (unsigned i = 0; i < st.nrows[node]; i++)
        if (st.rklen[node][i] == 8 && !memcmp(st.rkeys[node][i], "fz/forge", 8)) row = st.rows[node][i];
    REQUIRE(row != RPTR_NULL);
    struct row_hdr h;
    REQUIRE(fab_read(k.c, rptr_add(row, ROW_HDR_OFF), &h, sizeof h) == 0);
    REQUIRE(h.vext != RPTR_NULL); /* out of line */
    unsigned accepted = 0, tried = 0;
    uint64_t txid = FAKE_TXID_TOP | 0xf0e60000;
    for (uint64_t off = 0; off + 192 <= sizeof val; off += 64) {
        rptr fake = rptr_add(h.vext, off);
        if (rptr_off(fake) & 63) continue;
        for (size_t t = 0; t < 4; t++) {
            bool del = t >= 2;
            struct wop o = {.kind = del ? WOP_DELETE : WOP_UPDATE, .row = fake,
                            .key = (const uint8_t *)"fk", .klen = 2,
                            .val = (const uint8_t *)"XY", .vlen = del ? 0 : 2};
            uint16_t type = t % 2 ? TXN_RPC_APPLY : TXN_RPC_PREPARE;
            int rc = wops_call(&st, node, type, &o, 1, txid++);
            tried++;
            if (rc == 0) {
                if (accepted++ < 3)
                    fprintf(stderr, "  %s %s of the value's bytes at +%llu taken as a row\n",
                            type_name(type), del ? "DELETE" : "UPDATE", (unsigned long long)off);
            } else if (rc != RDKV_EPROTO && rc != RDKV_EABORTED) {
                CHECK_EQ(rc, RDKV_EABORTED);
            }
        }
    }
    CHECK_EQ(accepted, 0);
    /* the value is as written */
    REQUIRE(fab_read(k.c, h.vext, back, sizeof back) == 0);
    CHECK(!memcmp(back, val, sizeof val));
    fprintf(stderr, "  %u frames naming a value's bytes as a row: %u accepted\n", tried, accepted);
    harness_failures += (int)st.fails;
    as_nodes_free(&st);
    after_checks(&k);
    cl_stop(&k);
}

static const struct test_case cases[] = {
    {"crafted_frames", crafted_frames},
    {"random_frames", random_frames},
    {"forged_row", forged_row},
};

int main(int argc, char **argv)
{
    return tenv_main(argc, argv, "transaction layer bad input", cases,
                     sizeof cases / sizeof cases[0]);
}
