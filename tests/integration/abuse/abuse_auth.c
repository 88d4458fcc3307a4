/* The abuse suite, rows 1 and 2 of issue 17, against a real 3-node cluster on 127.0.0.1
 * (docs/security.md):
 *
 * refusals (row 1): a HELLO without a secret, with another cluster's secret, with the client
 *   secret claiming a node id (as the node role and as the client role), and with the node
 *   secret claiming node 1 from an address other than node 1's (when the host has one) is
 *   refused with
 *   RDKV_EPERM, the refusal carries nothing but its status (no node id, no fingerprint, no arena
 *   size), and the node closes the connection. Negative controls: the cluster's client secret
 *   connects as a client and the node secret as node 1, and the node proves the secret back.
 * client_role (row 2): on a connection authenticated with the client secret, one-sided READ,
 *   WRITE and CAS lose the connection without an answer, and lock, range-lock and 2PC RPCs are
 *   answered RDKV_EPERM, while the session protocol works there; the arena's first bytes are the
 *   same before and after (read over a node connection). Negative control: the same frames from a
 *   connection authenticated as node 2 are executed (WRITE and CAS of the same bytes, so nothing
 *   changes) and the RPCs reach their handlers. A normal client's put/get reads back intact
 *   before, during and after. */
#include "tests/harness.h"
#include "tests/integration/abuse/raw.h"
#include "tests/testenv.h"
#include "tests/txncluster.h"

#include "locks/lock.h"
#include "locks/range/range.h"
#include "rdma/auth.h"
#include "server/proto.h"
#include "txn/txn.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEY "abuse:auth"
#define VALUE "intact value"
#define SNAP 256 /* bytes of the arena (its header) compared before and after */

/* The normal client's read: the value it wrote, intact. */
static void check_intact(rdkv_session *s, const char *when)
{
    const void *v = NULL;
    size_t vl = 0;
    int rc = rdkv_get(s, KEY, strlen(KEY), &v, &vl);
    if (rc || vl != strlen(VALUE) || memcmp(v, VALUE, vl))
        fprintf(stderr, "  the normal client's read %s: %s\n", when, rdkv_strerror(rc));
    CHECK_EQ(rc, 0);
    CHECK(vl == strlen(VALUE) && !memcmp(v, VALUE, vl));
}

/* A local IPv4 address that is not loopback, as text into out; false when the host has none. */
static bool non_loopback_addr(char *out, size_t cap)
{
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs)) return false;
    bool found = false;
    for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
        const struct sockaddr_in *a = (const struct sockaddr_in *)i->ifa_addr;
        if ((ntohl(a->sin_addr.s_addr) >> 24) == 127) continue;
        found = inet_ntop(AF_INET, &a->sin_addr, out, (socklen_t)cap) != NULL;
    }
    freeifaddrs(ifs);
    return found;
}

/* A refused handshake: RDKV_EPERM, nothing else in the answer, and the node closes. */
static void check_refused(struct tcluster *c, const struct raw_opts *o, const char *what)
{
    struct raw r;
    int rc = raw_dial(&r, "127.0.0.1", c->ports[0], o);
    if (rc != RDKV_EPERM) fprintf(stderr, "  %s: got %s (%s)\n", what, rdkv_status_name(rc), r.why);
    CHECK_EQ(rc, RDKV_EPERM);
    CHECK_EQ(r.ack.node, 0);
    CHECK_EQ(r.ack.cluster_fp, 0);
    CHECK_EQ(r.ack.arena_size, 0);
    CHECK_EQ(r.ack.transport, 0);
    CHECK(raw_closed_by_peer(&r));
    raw_close(&r);
}

static void refusals(void)
{
    static struct tcluster c;
    REQUIRE(tc_start(&c, 3, NULL) == 0);
    rdkv_session *s;
    REQUIRE(tc_connect(&c, 0, NULL, &s) == 0);
    REQUIRE(rdkv_put(s, KEY, strlen(KEY), VALUE, strlen(VALUE)) == 0);
    check_intact(s, "before");
    const char *node_secret = tenv_secret_file(), *client_secret = tenv_client_secret_file();
    REQUIRE(node_secret && client_secret);
    /* another cluster's secrets */
    char dir[256], other[300], other_client[300], err[512];
    REQUIRE(tenv_mkdtemp(dir, sizeof dir, "rdkv-abuse-auth") == 0);
    snprintf(other, sizeof other, "%s/other.secret", dir);
    snprintf(other_client, sizeof other_client, "%s/other.client.secret", dir);
    REQUIRE(auth_generate(other, other_client, err, sizeof err) == 0);

    struct raw_opts anon_client = {.src_node = FAB_NODE_CLIENT, .dst_node = FAB_NODE_ANY,
                                   .role = WIRE_ROLE_CLIENT, .timeout_ms = 5000};
    check_refused(&c, &anon_client, "no secret, as a client");
    struct raw_opts anon_node = {.src_node = 1, .dst_node = 0, .role = WIRE_ROLE_NODE,
                                 .timeout_ms = 5000};
    check_refused(&c, &anon_node, "no secret, as node 1");
    struct raw_opts wrong_node = anon_node;
    wrong_node.secret_file = other;
    check_refused(&c, &wrong_node, "another cluster's node secret, as node 1");
    struct raw_opts wrong_client = anon_client;
    wrong_client.secret_file = other_client;
    check_refused(&c, &wrong_client, "another cluster's client secret, as a client");
    struct raw_opts client_as_node = anon_node;
    client_as_node.secret_file = client_secret; /* proves the client key for the node role */
    check_refused(&c, &client_as_node, "the client secret claiming node 1");
    struct raw_opts node_id_as_client = anon_node;
    node_id_as_client.role = WIRE_ROLE_CLIENT; /* a client credential, a node's id */
    node_id_as_client.secret_file = client_secret;
    check_refused(&c, &node_id_as_client, "node 1's id claimed with a client credential");
    struct raw_opts garbage = anon_node;
    garbage.role = 7; /* not a role */
    struct raw r;
    CHECK_EQ(raw_dial(&r, "127.0.0.1", c.ports[0], &garbage), RDKV_EPROTO);
    CHECK_EQ(r.ack.node, 0);
    CHECK_EQ(r.ack.cluster_fp, 0);
    raw_close(&r);
    /* The node secret itself, claiming node 1 from an address that is not node 1's (127.0.0.1):
     * the proof is right, the address is not. (Still to 127.0.0.1: only the source differs.) */
    char local[64];
    if (non_loopback_addr(local, sizeof local)) {
        struct raw_opts elsewhere = anon_node;
        elsewhere.secret_file = node_secret;
        elsewhere.bind_addr = local;
        check_refused(&c, &elsewhere, "node 1 claimed from a non-loopback address");
        /* control: the same source may connect as an operator tool (no node id claimed) */
        elsewhere.src_node = FAB_NODE_CLIENT;
        CHECK_EQ(raw_dial(&r, "127.0.0.1", c.ports[0], &elsewhere), 0);
        raw_close(&r);
    } else {
        fprintf(stderr, "  (no non-loopback address here: the address check is not exercised)\n");
    }
    check_intact(s, "during");

    /* Negative controls: the cluster's own secrets get in, and the node proves it back. */
    struct raw_opts good_client = anon_client;
    good_client.secret_file = client_secret;
    CHECK_EQ(raw_dial(&r, "127.0.0.1", c.ports[0], &good_client), 0);
    CHECK(r.challenged && r.node_proved);
    CHECK_EQ(r.ack.node, 0);
    CHECK(r.ack.cluster_fp != 0);
    raw_close(&r);
    struct raw_opts good_node = anon_node;
    good_node.secret_file = node_secret;
    CHECK_EQ(raw_dial(&r, "127.0.0.1", c.ports[0], &good_node), 0);
    CHECK(r.challenged && r.node_proved);
    CHECK_EQ(r.ack.node, 0);
    raw_close(&r);
    /* and another cluster's node cannot pass for this one: its proof does not check out */
    wrong_node.secret_file = other;
    raw_dial(&r, "127.0.0.1", c.ports[0], &wrong_node);
    CHECK(r.challenged && !r.node_proved);
    raw_close(&r);

    check_intact(s, "after");
    rdkv_session_close(s);
    unlink(other);
    unlink(other_client);
    rmdir(dir);
    tc_stop(&c);
}

/* One soft one-sided op; the answer's status (and READ bytes into out), or the receive error
 * (RDKV_EUNAVAILABLE: the node closed the connection without answering). */
static int one_op(struct raw *r, const struct wire_op_req *op, const void *payload, void *out,
                  uint64_t *value)
{
    int rc = raw_send_op(r, op, payload);
    if (rc) return rc;
    struct wire_hdr h;
    uint8_t *body;
    if ((rc = raw_recv_frame(r, &h, &body))) return rc;
    struct wire_op_resp resp;
    const uint8_t *data;
    rc = wire_get_op_resp(&h, body, &resp, &data);
    if (!rc) {
        rc = resp.status;
        if (out && resp.len == op->len) memcpy(out, data, resp.len);
        if (value) *value = resp.value;
    }
    free(body);
    return rc;
}

static int one_rpc(struct raw *r, uint64_t id, uint16_t type, const void *payload, uint32_t len,
                   int32_t *status)
{
    int rc = raw_send_rpc(r, id, type, payload, len);
    if (!rc) rc = raw_rpc_reply(r, id, status, NULL, 0, NULL);
    return rc;
}

static void client_role(void)
{
    static struct tcluster c;
    REQUIRE(tc_start(&c, 3, NULL) == 0);
    rdkv_session *s;
    REQUIRE(tc_connect(&c, 0, NULL, &s) == 0);
    REQUIRE(rdkv_put(s, KEY, strlen(KEY), VALUE, strlen(VALUE)) == 0);
    check_intact(s, "before");
    struct raw_opts as_node = {.src_node = 2, .dst_node = 0, .role = WIRE_ROLE_NODE,
                               .secret_file = tenv_secret_file(), .timeout_ms = 5000};
    struct raw_opts as_client = {.src_node = FAB_NODE_CLIENT, .dst_node = FAB_NODE_ANY,
                                 .role = WIRE_ROLE_CLIENT,
                                 .secret_file = tenv_client_secret_file(), .timeout_ms = 5000};
    struct raw n, k;
    REQUIRE(raw_dial(&n, "127.0.0.1", c.ports[0], &as_node) == 0);
    uint8_t before[SNAP], after[SNAP], junk[SNAP];
    memset(junk, 0xAB, sizeof junk);
    struct wire_op_req rd = {.op = FAB_OP_READ, .len = SNAP, .off = 0};
    struct wire_op_req wr = {.op = FAB_OP_WRITE, .len = SNAP, .off = 0};
    struct wire_op_req cas = {.op = FAB_OP_CAS, .len = 8, .off = 0, .arg = 0, .swap = ~0ull};
    REQUIRE(one_op(&n, &rd, NULL, before, NULL) == 0);

    /* one-sided ops on a client connection: the connection goes, nothing is answered */
    const struct wire_op_req *ops[] = {&wr, &rd, &cas};
    for (unsigned i = 0; i < 3; i++) {
        REQUIRE(raw_dial(&k, "127.0.0.1", c.ports[0], &as_client) == 0);
        uint8_t got[SNAP];
        memset(got, 0, sizeof got);
        int rc = one_op(&k, ops[i], ops[i]->op == FAB_OP_WRITE ? junk : NULL, got, NULL);
        CHECK_EQ(rc, RDKV_EUNAVAILABLE);
        if (ops[i]->op == FAB_OP_READ) CHECK(memcmp(got, before, SNAP) != 0);
        raw_close(&k);
        check_intact(s, "during");
    }
    /* RPCs: the session protocol works on the client connection; locks and 2PC do not */
    REQUIRE(raw_dial(&k, "127.0.0.1", c.ports[0], &as_client) == 0);
    int32_t st = 1;
    uint8_t open_req[SES_OPEN_LEN];
    size_t open_len = ses_open_request(open_req);
    CHECK_EQ(one_rpc(&k, 1, KV_RPC_SESSION, open_req, (uint32_t)open_len, &st), 0);
    CHECK_EQ(st, 0);
    static const uint16_t refused[] = {LOCK_RPC_TRAD_LOCK, RANGE_RPC_LOCK, TXN_RPC_PREPARE,
                                       TXN_RPC_APPLY, TXN_RPC_COMMIT, FAB_RPC_VERBS_CONNECT,
                                       KV_RPC_STATUS, 999};
    uint8_t payload[64];
    memset(payload, 0, sizeof payload);
    for (unsigned i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        st = 1;
        CHECK_EQ(one_rpc(&k, 10 + i, refused[i], payload, sizeof payload, &st), 0);
        if (st != RDKV_EPERM) fprintf(stderr, "  client RPC type %u: %d\n", refused[i], st);
        CHECK_EQ(st, RDKV_EPERM);
    }
    raw_close(&k);
    check_intact(s, "during");
    REQUIRE(one_op(&n, &rd, NULL, after, NULL) == 0);
    CHECK(memcmp(before, after, SNAP) == 0);

    /* Negative control: a node connection's same frames are executed. */
    CHECK_EQ(one_op(&n, &wr, before, NULL, NULL), 0); /* the same bytes back */
    uint64_t word, old = 1;
    memcpy(&word, before, 8);
    struct wire_op_req same = {.op = FAB_OP_CAS, .len = 8, .off = 0, .arg = word, .swap = word};
    CHECK_EQ(one_op(&n, &same, NULL, NULL, &old), 0);
    CHECK_EQ(old, word);
    static const uint16_t reach[] = {LOCK_RPC_TRAD_LOCK, RANGE_RPC_LOCK, TXN_RPC_PREPARE,
                                     TXN_RPC_APPLY};
    for (unsigned i = 0; i < sizeof reach / sizeof reach[0]; i++) {
        st = 1;
        CHECK_EQ(one_rpc(&n, 100 + i, reach[i], payload, 3, &st), 0); /* too short: a handler's
                                                                         error, not a refusal */
        if (st == RDKV_EPERM) fprintf(stderr, "  node RPC type %u refused\n", reach[i]);
        CHECK(st != RDKV_EPERM);
    }
    REQUIRE(one_op(&n, &rd, NULL, after, NULL) == 0);
    CHECK(memcmp(before, after, SNAP) == 0);
    raw_close(&n);
    check_intact(s, "after");
    rdkv_session_close(s);
    tc_stop(&c);
}

static const struct test_case cases[] = {
    {"refusals", refusals},
    {"client_role", client_role},
};

int main(int argc, char **argv)
{
    return tenv_main(argc, argv, "abuse: authentication and roles", cases,
                     sizeof cases / sizeof cases[0]);
}
