/* Unit tests of the pure modules: histograms, parsers, the cluster config, the JSON writer and
 * the wire format (encoders, decoders, reassembly from arbitrary chunking). */
#include "tests/harness.h"

#include "common/config.h"
#include "common/hist.h"
#include "common/json.h"
#include "common/pack.h"
#include "common/parse.h"
#include "rdkv_status.h"
#include "rdma/auth.h"
#include "rdma/fabric.h"
#include "rdma/wire.h"
#include "tests/testenv.h"

#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void t_hist_buckets(void)
{
    /* every value lands in a bucket whose range holds it; buckets are contiguous and ordered */
    uint64_t prev_hi = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        uint64_t lo, hi;
        hist_bucket_range(i, &lo, &hi);
        if (i > 0) CHECK(lo == prev_hi + 1);
        CHECK(hi >= lo);
        CHECK_EQ(hist_index(lo), i);
        CHECK_EQ(hist_index(hi), i);
        /* relative width under 1/64 beyond the exact range */
        if (lo >= HIST_SUB) CHECK((double)(hi - lo) / (double)lo <= 1.0 / 64 + 1e-12);
        prev_hi = hi;
    }
    CHECK(prev_hi == UINT64_MAX);
    CHECK(hist_index(UINT64_MAX) == HIST_BUCKETS - 1);
}

static void t_hist_percentiles(void)
{
    enum { N = 100000 };
    static uint64_t v[N];
    struct hist a, b, all;
    hist_init(&a);
    hist_init(&b);
    hist_init(&all);
    for (unsigned i = 0; i < N; i++) {
        /* a long-tailed mix: mostly 10-100 us, some ms */
        uint64_t x = 10000 + rng() % 90000;
        if (rng() % 100 == 0) x = 1000000 + rng() % 9000000;
        v[i] = x;
        hist_record(i % 2 ? &a : &b, x);
    }
    hist_merge(&all, &a);
    hist_merge(&all, &b);
    qsort(v, N, sizeof v[0], cmp_u64);
    CHECK_EQ(all.count, N);
    CHECK_EQ(all.min, v[0]);
    CHECK_EQ(all.max, v[N - 1]);
    double ps[] = {1, 50, 90, 99, 99.9, 99.99};
    for (unsigned k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        size_t rank = (size_t)ceil(ps[k] / 100.0 * N);
        uint64_t exact = v[rank - 1];
        uint64_t got = hist_percentile(&all, ps[k]);
        double err = fabs((double)got - (double)exact) / (double)exact;
        if (err > 0.01) fprintf(stderr, "  p%g: exact %" PRIu64 " got %" PRIu64 "\n", ps[k], exact, got);
        CHECK(err <= 0.01);
    }
    long double sum = 0;
    for (unsigned i = 0; i < N; i++) sum += v[i];
    CHECK(fabs(hist_mean(&all) - (double)(sum / N)) < 1e-6 * hist_mean(&all));
    struct hist e;
    hist_init(&e);
    CHECK_EQ(hist_percentile(&e, 50), 0);
    hist_record(&e, 42);
    CHECK_EQ(hist_percentile(&e, 99.9), 42);
}

static void t_parse(void)
{
    uint64_t u;
    int64_t d;
    CHECK(parse_u64("123", &u) == 0 && u == 123);
    CHECK(parse_u64("", &u) != 0);
    CHECK(parse_u64("-1", &u) != 0);
    CHECK(parse_u64("12x", &u) != 0);
    CHECK(parse_u64("99999999999999999999999", &u) != 0);
    CHECK(parse_uint_range("7", 1, 5, &u) != 0);
    CHECK(parse_size("64K", &u) == 0 && u == 65536);
    CHECK(parse_size("256M", &u) == 0 && u == 256ull << 20);
    CHECK(parse_size("1GiB", &u) == 0 && u == 1ull << 30);
    CHECK(parse_size("4096", &u) == 0 && u == 4096);
    CHECK(parse_size("12Q", &u) != 0);
    CHECK(parse_size("1Kx", &u) != 0);
    CHECK(parse_size("99999999999T", &u) != 0);
    CHECK(parse_duration_ns("1.5", &d) == 0 && d == 1500000000);
    CHECK(parse_duration_ns("250ms", &d) == 0 && d == 250000000);
    CHECK(parse_duration_ns("20us", &d) == 0 && d == 20000);
    CHECK(parse_duration_ns("-1", &d) != 0);
    CHECK(parse_duration_ns("5 s", &d) != 0);
    char host[64];
    uint16_t port;
    CHECK(parse_hostport("127.0.0.1:7100", host, sizeof host, &port, 0) == 0);
    CHECK(!strcmp(host, "127.0.0.1") && port == 7100);
    CHECK(parse_hostport("[::1]:80", host, sizeof host, &port, 0) == 0 && !strcmp(host, "::1"));
    CHECK(parse_hostport("node-3.example:1", host, sizeof host, &port, 0) == 0);
    CHECK(parse_hostport("host:0", host, sizeof host, &port, 0) != 0);
    CHECK(parse_hostport("host:0", host, sizeof host, &port, 1) == 0);
    CHECK(parse_hostport("host:65536", host, sizeof host, &port, 0) != 0);
    CHECK(parse_hostport("host", host, sizeof host, &port, 0) != 0);
    CHECK(parse_hostport(":80", host, sizeof host, &port, 0) != 0);
    CHECK(parse_hostport("a:b:80", host, sizeof host, &port, 0) != 0);
    CHECK(parse_hostport("bad host:80", host, sizeof host, &port, 0) != 0);
}

static int parse_cfg(const char *text, struct cluster_config *c, char *err, size_t cap)
{
    return cluster_config_parse(text, strlen(text), "t.conf", c, err, cap);
}

static void t_config(void)
{
    struct cluster_config c;
    char err[256];
    CHECK_EQ(parse_cfg("# cluster\ntransport soft\narena 64M\n\nnode 1 127.0.0.1:7101  # two\n"
                       "node 0 127.0.0.1:7100\n",
                       &c, err, sizeof err),
             0);
    CHECK_EQ(c.n, 2);
    CHECK(c.nodes[0].port == 7100 && c.nodes[1].port == 7101);
    CHECK(!strcmp(c.transport, "soft"));
    CHECK(c.arena_size == 64ull << 20);
    CHECK(c.fingerprint != 0);
    uint64_t fp = c.fingerprint;
    /* writing and reading back gives the same cluster */
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    CHECK_EQ(cluster_config_write(&c, m), 0);
    fclose(m);
    cluster_config_free(&c);
    CHECK_EQ(cluster_config_parse(buf, len, "w", &c, err, sizeof err), 0);
    CHECK(c.fingerprint == fp);
    cluster_config_free(&c);
    free(buf);
    /* a different node list gives a different fingerprint */
    /* ZooKeeper and replicas: parsed, and written back */
    CHECK_EQ(parse_cfg("zookeeper 127.0.0.1:2181,[::1]:2182/apps/rdkv\nreplicas 2\n"
                       "node 0 127.0.0.1:7100\nnode 1 127.0.0.1:7101\n", &c, err, sizeof err), 0);
    CHECK(!strcmp(c.zookeeper, "127.0.0.1:2181,[::1]:2182/apps/rdkv"));
    CHECK_EQ(c.replicas, 2);
    {
        char zb[512];
        FILE *zm = fmemopen(zb, sizeof zb, "w");
        REQUIRE(zm);
        CHECK_EQ(cluster_config_write(&c, zm), 0);
        size_t zl = (size_t)ftell(zm);
        fclose(zm);
        cluster_config_free(&c);
        CHECK_EQ(cluster_config_parse(zb, zl, "w", &c, err, sizeof err), 0);
        CHECK_EQ(c.replicas, 2);
        CHECK(!strcmp(c.zookeeper, "127.0.0.1:2181,[::1]:2182/apps/rdkv"));
        cluster_config_free(&c);
    }
    CHECK_EQ(parse_cfg("node 0 127.0.0.1:7100\n", &c, err, sizeof err), 0);
    CHECK_EQ(c.replicas, 1);
    CHECK(!c.zookeeper[0]);
    cluster_config_free(&c);
    CHECK_EQ(parse_cfg("node 0 127.0.0.1:7100\nnode 1 127.0.0.1:7102\n", &c, err, sizeof err), 0);
    CHECK(c.fingerprint != fp);
    cluster_config_free(&c);

    struct {
        const char *text, *msg;
    } bad[] = {
        {"", "no 'node"},
        {"node 0 127.0.0.1:7100\nnode 0 127.0.0.1:7101\n", "t.conf:2: node 0 is already defined on line 1"},
        {"node 0 127.0.0.1:7100\nnode 2 127.0.0.1:7101\n", "node 1 is missing"},
        {"node x 127.0.0.1:7100\n", "t.conf:1: node id 'x'"},
        {"node 0 127.0.0.1\n", "t.conf:1: bad address"},
        {"node 0 127.0.0.1:99999\n", "bad address"},
        {"node 0\n", "expected 'node ID HOST:PORT'"},
        {"node 0 a:1 extra\n", "expected 'node ID HOST:PORT'"},
        {"transport rdma\nnode 0 a:1\n", "t.conf:1: expected 'transport soft|verbs|auto'"},
        {"arena lots\nnode 0 a:1\n", "expected 'arena SIZE'"},
        {"nodes 0 a:1\n", "unknown keyword 'nodes'"},
        {"node 0 a:1\nnode 1 a:1\n", "node 1 has the same address as node 0"},
        {"node 1024 a:1\n", "not a number in 0..1023"},
        {"replicas 2\nnode 0 a:1\nnode 1 a:2\n", "t.conf:1: replicas 2 needs a 'zookeeper"},
        {"zookeeper z:1\nreplicas 3\nnode 0 a:1\nnode 1 a:2\n", "t.conf:2: replicas 3, but only 2"},
        {"zookeeper z:1\nreplicas 8\nnode 0 a:1\n", "t.conf:2: expected 'replicas R' with R in 1..7"},
        {"zookeeper z\nnode 0 a:1\n", "t.conf:1: bad ZooKeeper address 'z'"},
        {"zookeeper z:1,y\nnode 0 a:1\n", "bad ZooKeeper address 'y'"},
        {"zookeeper z:1\nzookeeper z:2\nnode 0 a:1\n", "t.conf:2: zookeeper is set twice"},
    };
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        int rc = parse_cfg(bad[i].text, &c, err, sizeof err);
        CHECK_EQ(rc, RDKV_ECONFIG);
        if (!strstr(err, bad[i].msg)) fprintf(stderr, "  case %u: message '%s'\n", i, err);
        CHECK(strstr(err, bad[i].msg) != NULL);
        CHECK(c.nodes == NULL && c.n == 0);
    }
    CHECK_EQ(cluster_config_parse("node 0 a:1\0x", 12, "t", &c, err, sizeof err), RDKV_ECONFIG);
    CHECK_EQ(cluster_config_load("/nonexistent/x.conf", &c, err, sizeof err), RDKV_ECONFIG);
    CHECK(strstr(err, "cannot open") != NULL);
}

static void t_json(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    struct json j;
    json_init(&j, m, false);
    json_obj_begin(&j);
    json_kv_str(&j, "s", "a\"b\\c\n\x01");
    json_key(&j, "arr");
    json_arr_begin(&j);
    json_i64(&j, -5);
    json_u64(&j, 18446744073709551615ull);
    json_double(&j, 1.5);
    json_double(&j, NAN);
    json_bool(&j, true);
    json_null(&j);
    json_obj_begin(&j);
    json_obj_end(&j);
    json_arr_end(&j);
    json_kv_double(&j, "big", 123456789.25);
    json_obj_end(&j);
    fclose(m);
    const char *want = "{\"s\":\"a\\\"b\\\\c\\n\\u0001\",\"arr\":[-5,18446744073709551615,1.5,null,"
                       "true,null,{}],\"big\":123456789.25}";
    if (strcmp(buf, want)) fprintf(stderr, "  got  %s\n  want %s\n", buf, want);
    CHECK(!strcmp(buf, want));
    free(buf);
}

/* ------------------------------------------------------------------------------------------ */

struct frames {
    unsigned n;
    uint8_t types[64];
    uint32_t lens[64];
    uint8_t first[64];
};

static int collect_frame(void *arg, const struct wire_hdr *h, const uint8_t *body)
{
    struct frames *f = arg;
    if (f->n < 64) {
        f->types[f->n] = h->type;
        f->lens[f->n] = h->len;
        f->first[f->n] = h->len ? body[0] : 0;
        f->n++;
    }
    return 0;
}

/* Collects the frame and asks the reassembler to stop after it (backpressure). */
static int stop_frame(void *arg, const struct wire_hdr *h, const uint8_t *body)
{
    collect_frame(arg, h, body);
    return WIRE_ASM_STOP;
}

static void t_wire(void)
{
    /* build a stream of varied frames */
    static uint8_t stream[1 << 20];
    size_t at = 0;
    struct wire_hello hello = {.magic = WIRE_MAGIC, .version = WIRE_VERSION, .kind = 1,
                               .src_node = 3, .dst_node = 4, .role = WIRE_ROLE_NODE,
                               .flags = WIRE_HELLO_F_AUTH, .cluster_fp = 99};
    memset(hello.nonce, 0x6E, sizeof hello.nonce);
    wire_put_hello(stream + at, &hello);
    at += WIRE_HDR_SIZE + WIRE_HELLO_SIZE;
    struct wire_op_req rq = {.op = FAB_OP_WRITE, .len = 5000, .off = 4096, .arg = 1, .swap = 2};
    wire_put_op_req(stream + at, &rq, 5000);
    memset(stream + at + WIRE_HDR_SIZE + WIRE_OP_REQ_SIZE, 0x5A, 5000);
    at += WIRE_HDR_SIZE + WIRE_OP_REQ_SIZE + 5000;
    wire_put_hdr(stream + at, WIRE_OP_RESET, 0);
    at += WIRE_HDR_SIZE;
    wire_put_rpc_req(stream + at, 77, 65, 3);
    memcpy(stream + at + WIRE_HDR_SIZE + WIRE_RPC_SIZE, "abc", 3);
    at += WIRE_HDR_SIZE + WIRE_RPC_SIZE + 3;
    struct wire_op_resp rs = {.status = 0, .len = 100000, .value = 7};
    wire_put_op_resp(stream + at, &rs);
    memset(stream + at + WIRE_HDR_SIZE + WIRE_OP_RESP_SIZE, 0x33, 100000);
    at += WIRE_HDR_SIZE + WIRE_OP_RESP_SIZE + 100000;
    /* decoders */
    struct wire_hdr h;
    wire_get_hdr(stream, &h);
    struct wire_hello hb;
    CHECK_EQ(wire_get_hello(&h, stream + WIRE_HDR_SIZE, &hb), 0);
    CHECK(hb.src_node == 3 && hb.dst_node == 4 && hb.cluster_fp == 99);
    CHECK(hb.role == WIRE_ROLE_NODE && hb.flags == WIRE_HELLO_F_AUTH && hb.nonce[31] == 0x6E);
    /* the handshake's other frames round-trip; a HELLO with no role, or unknown flags, does not
     * decode */
    uint8_t hs[WIRE_HDR_SIZE + WIRE_CHALLENGE_SIZE];
    struct wire_challenge ch, chb;
    memset(ch.nonce, 1, sizeof ch.nonce);
    memset(ch.mac, 2, sizeof ch.mac);
    wire_put_challenge(hs, &ch);
    wire_get_hdr(hs, &h);
    CHECK_EQ(wire_get_challenge(&h, hs + WIRE_HDR_SIZE, &chb), 0);
    CHECK(!memcmp(&ch, &chb, sizeof ch));
    struct wire_auth au = {.mac = {9}}, aub;
    wire_put_auth(hs, &au);
    wire_get_hdr(hs, &h);
    CHECK_EQ(wire_get_auth(&h, hs + WIRE_HDR_SIZE, &aub), 0);
    CHECK_EQ(aub.mac[0], 9);
    CHECK_EQ(wire_get_challenge(&h, hs + WIRE_HDR_SIZE, &chb), RDKV_EPROTO);
    uint8_t bad_hello[WIRE_HDR_SIZE + WIRE_HELLO_SIZE];
    struct wire_hello nr = hello;
    nr.role = 0;
    wire_put_hello(bad_hello, &nr);
    wire_get_hdr(bad_hello, &h);
    CHECK_EQ(wire_get_hello(&h, bad_hello + WIRE_HDR_SIZE, &hb), RDKV_EPROTO);
    nr.role = WIRE_ROLE_CLIENT;
    nr.flags = 0x80;
    wire_put_hello(bad_hello, &nr);
    CHECK_EQ(wire_get_hello(&h, bad_hello + WIRE_HDR_SIZE, &hb), RDKV_EPROTO);
    wire_get_hdr(stream, &h);
    /* feed in random chunks many times: always the same 5 frames */
    for (unsigned round = 0; round < 200; round++) {
        struct wire_asm a;
        wire_asm_init(&a, 1 << 20);
        struct frames f = {0};
        size_t pos = 0;
        while (pos < at) {
            size_t chunk = 1 + rng() % (round % 4 == 0 ? 7 : 70000);
            if (chunk > at - pos) chunk = at - pos;
            CHECK_EQ(wire_asm_feed(&a, stream + pos, chunk, collect_frame, &f), 0);
            pos += chunk;
        }
        CHECK_EQ(f.n, 5);
        CHECK(f.types[0] == WIRE_HELLO && f.types[1] == WIRE_OP_REQ && f.types[2] == WIRE_OP_RESET &&
              f.types[3] == WIRE_RPC_REQ && f.types[4] == WIRE_OP_RESP);
        CHECK(f.lens[1] == WIRE_OP_REQ_SIZE + 5000 && f.lens[4] == WIRE_OP_RESP_SIZE + 100000);
        CHECK(f.first[3] == 77);
        wire_asm_free(&a);
    }
    /* stopping after every frame: the caller feeds the rest again, the frames are the same */
    for (unsigned round = 0; round < 50; round++) {
        struct wire_asm a;
        wire_asm_init(&a, 1 << 20);
        struct frames f = {0};
        size_t pos = 0;
        unsigned feeds = 0;
        while (pos < at && feeds < 100000) {
            size_t chunk = 1 + rng() % (round % 2 ? 9 : 150000);
            if (chunk > at - pos) chunk = at - pos;
            size_t used = 0;
            int rc = wire_asm_feed_part(&a, stream + pos, chunk, stop_frame, &f, &used);
            CHECK(rc == 0 || rc == WIRE_ASM_STOP);
            CHECK(used <= chunk && (rc == WIRE_ASM_STOP || used == chunk));
            pos += used;
            feeds++;
        }
        CHECK_EQ(f.n, 5);
        CHECK(f.types[1] == WIRE_OP_REQ && f.types[4] == WIRE_OP_RESP && f.first[3] == 77);
        wire_asm_free(&a);
    }
    /* limits */
    struct wire_asm a;
    wire_asm_init(&a, 1 << 20);
    struct frames f = {0};
    uint8_t hdr[WIRE_HDR_SIZE];
    wire_put_hdr(hdr, WIRE_RPC_REQ, (1u << 20) + WIRE_RPC_SIZE + 1);
    CHECK_EQ(wire_asm_feed(&a, hdr, sizeof hdr, collect_frame, &f), RDKV_EPROTO);
    wire_asm_free(&a);
    wire_asm_init(&a, 1 << 20);
    wire_put_hdr(hdr, 0, 0);
    CHECK_EQ(wire_asm_feed(&a, hdr, sizeof hdr, collect_frame, &f), RDKV_EPROTO);
    wire_asm_free(&a);
    wire_asm_init(&a, 1 << 20);
    wire_put_hdr(hdr, WIRE_HELLO, WIRE_HELLO_SIZE + 1);
    CHECK_EQ(wire_asm_feed(&a, hdr, 5, collect_frame, &f), 0); /* incomplete header: wait */
    CHECK_EQ(wire_asm_feed(&a, hdr + 5, 3, collect_frame, &f), RDKV_EPROTO);
    wire_asm_free(&a);
    /* before authentication: a frame longer than WIRE_PREAUTH_MAX is refused on its header */
    wire_asm_init(&a, 16u << 20);
    wire_asm_set_limit(&a, WIRE_PREAUTH_MAX);
    wire_put_hdr(hdr, WIRE_RPC_REQ, WIRE_PREAUTH_MAX + 1);
    CHECK_EQ(wire_asm_feed(&a, hdr, sizeof hdr, collect_frame, &f), RDKV_ETOOBIG);
    wire_asm_free(&a);
    /* after: a 16 MiB body announced costs only the bytes that came */
    wire_asm_init(&a, 16u << 20);
    uint8_t part[WIRE_HDR_SIZE + 1000];
    memset(part, 1, sizeof part);
    wire_put_hdr(part, WIRE_RPC_REQ, 16u << 20);
    CHECK_EQ(wire_asm_feed(&a, part, sizeof part, collect_frame, &f), 0);
    CHECK(a.cap < (64u << 10));
    wire_asm_free(&a);
    /* body-shape checks */
    struct wire_op_req oq;
    const uint8_t *pl;
    uint8_t b[WIRE_HDR_SIZE + WIRE_OP_REQ_SIZE + 8];
    struct wire_op_req bad = {.op = FAB_OP_READ, .len = 8};
    wire_put_op_req(b, &bad, 8); /* a READ must not carry a payload */
    wire_get_hdr(b, &h);
    CHECK_EQ(wire_get_op_req(&h, b + WIRE_HDR_SIZE, &oq, &pl), RDKV_EPROTO);
    struct wire_op_req big = {.op = FAB_OP_READ, .len = WIRE_OP_MAX + 1};
    wire_put_op_req(b, &big, 0);
    wire_get_hdr(b, &h);
    CHECK_EQ(wire_get_op_req(&h, b + WIRE_HDR_SIZE, &oq, &pl), RDKV_EPROTO);
    struct wire_rpc r;
    size_t plen;
    uint8_t rb[WIRE_HDR_SIZE + WIRE_RPC_SIZE];
    wire_put_rpc_resp(rb, 1, 5, 0); /* positive status: not a status */
    wire_get_hdr(rb, &h);
    CHECK_EQ(wire_get_rpc(&h, rb + WIRE_HDR_SIZE, &r, &pl, &plen), RDKV_EPROTO);
}

static void t_status(void)
{
    for (int s = 0; s >= RDKV_STATUS_MIN; s--) CHECK(strcmp(rdkv_strerror(s), "unknown status") != 0);
    CHECK(!strcmp(rdkv_strerror(-999), "unknown status"));
    CHECK(!strcmp(rdkv_strerror(RDKV_EACCESS), "remote access error (out of bounds or misaligned)"));
    CHECK(!strcmp(rdkv_status_name(RDKV_STATUS_MIN), "RDKV_ENOHOST"));
    /* a name that exists nowhere (.invalid is reserved) against one that does */
    char why[200];
    CHECK_EQ(fab_host_check("nosuchhost.invalid", why, sizeof why), RDKV_ENOHOST);
    CHECK(strstr(why, "cannot resolve host name 'nosuchhost.invalid'") != NULL);
    CHECK_EQ(fab_host_check("127.0.0.1", why, sizeof why), 0);
    CHECK(rptr_node(rptr_make(65535, RPTR_OFF_MASK)) == 65535);
    CHECK(rptr_off(rptr_make(3, RPTR_OFF_MASK)) == RPTR_OFF_MASK);
    CHECK(rptr_off(rptr_add(rptr_make(3, 100), 28)) == 128);
    enum fab_transport t;
    CHECK(fab_transport_parse("soft", &t) == 0 && t == FAB_SOFT);
    CHECK(fab_transport_parse("verbs", &t) == 0 && t == FAB_VERBS);
    CHECK(fab_transport_parse("rdma", &t) != 0);
}

/* Secret files and proofs (rdma/auth.c). */
static void t_auth(void)
{
    char err[512];
    struct auth_keys k, k2;
    static const char node_file[] =
        "# a comment\nnode-key 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n";
    CHECK_EQ(auth_parse(node_file, sizeof node_file - 1, "n", &k, err, sizeof err), 0);
    CHECK(k.have_node && k.have_client && k.node[31] == 0x1f);
    CHECK(memcmp(k.node, k.client, AUTH_KEY_SIZE) != 0); /* the client key is derived */
    char client_file[128] = "client-key ";
    for (int i = 0; i < AUTH_KEY_SIZE; i++)
        snprintf(client_file + strlen(client_file), 3, "%02x", k.client[i]);
    CHECK_EQ(auth_parse(client_file, strlen(client_file), "c", &k2, err, sizeof err), 0);
    CHECK(!k2.have_node && k2.have_client && !memcmp(k2.client, k.client, AUTH_KEY_SIZE));
    CHECK(auth_key(&k2, WIRE_ROLE_NODE) == NULL && auth_key(&k2, WIRE_ROLE_CLIENT) != NULL);
    static const char *const bad[] = {"", "# only a comment\n", "node-key 00\n",
                                      "node-key zz02030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n",
                                      "secret 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n",
                                      "node-key 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f x\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        CHECK_EQ(auth_parse(bad[i], strlen(bad[i]), "bad", &k2, err, sizeof err), RDKV_ECONFIG);
        CHECK(err[0] != 0 && !k2.have_node && !k2.have_client);
    }
    char two[256];
    snprintf(two, sizeof two, "%s%s", node_file, node_file + 12);
    CHECK_EQ(auth_parse(two, strlen(two), "two", &k2, err, sizeof err), RDKV_ECONFIG);
    /* proofs: every claim and the side change the MAC */
    struct wire_hello h = {.src_node = 1, .dst_node = 2, .role = WIRE_ROLE_NODE, .kind = 1,
                           .cluster_fp = 5};
    uint8_t ns[WIRE_NONCE_SIZE] = {3}, m0[WIRE_MAC_SIZE], m1[WIRE_MAC_SIZE];
    auth_mac(k.node, 'C', &h, ns, m0);
    auth_mac(k.node, 'C', &h, ns, m1);
    CHECK(auth_mac_equal(m0, m1));
    auth_mac(k.node, 'S', &h, ns, m1);
    CHECK(!auth_mac_equal(m0, m1));
    struct wire_hello v[5] = {h, h, h, h, h};
    v[0].src_node = 0;
    v[1].dst_node = 0;
    v[2].role = WIRE_ROLE_CLIENT;
    v[3].cluster_fp = 6;
    v[4].nonce[0] = 1;
    for (int i = 0; i < 5; i++) {
        auth_mac(k.node, 'C', &v[i], ns, m1);
        CHECK(!auth_mac_equal(m0, m1));
    }
    auth_mac(k.client, 'C', &h, ns, m1);
    CHECK(!auth_mac_equal(m0, m1));
    /* files: generated 0600 and loadable; refused once others may read them */
    char dir[256], np[300], cp[300];
    REQUIRE(tenv_mkdtemp(dir, sizeof dir, "rdkv-unit-auth") == 0);
    snprintf(np, sizeof np, "%s/n.secret", dir);
    snprintf(cp, sizeof cp, "%s/c.secret", dir);
    CHECK_EQ(auth_generate(np, cp, err, sizeof err), 0);
    CHECK_EQ(auth_generate(np, cp, err, sizeof err), RDKV_EEXIST);
    CHECK_EQ(auth_load(np, &k, err, sizeof err), 0);
    CHECK_EQ(auth_load(cp, &k2, err, sizeof err), 0);
    CHECK(k.have_node && !k2.have_node && !memcmp(k.client, k2.client, AUTH_KEY_SIZE));
    CHECK_EQ(chmod(cp, 0640), 0);
    CHECK_EQ(auth_load(cp, &k2, err, sizeof err), RDKV_ECONFIG);
    CHECK(strstr(err, "chmod 600") != NULL);
    unlink(np);
    unlink(cp);
    rmdir(dir);
    auth_wipe(&k);
    auth_wipe(&k2);
}

/* common/pack.h: every width lands little-endian at any alignment, and reads back. */
static void t_pack(void)
{
    uint8_t b[17];
    memset(b, 0xEE, sizeof b);
    pack_put_u16le(b + 1, 0x0102);
    pack_put_u32le(b + 3, 0x03040506u);
    pack_put_u64le(b + 7, 0x0708090A0B0C0D0Eull);
    static const uint8_t want[17] = {0xEE, 0x02, 0x01, 0x06, 0x05, 0x04, 0x03, 0x0E, 0x0D,
                                     0x0C, 0x0B, 0x0A, 0x09, 0x08, 0x07, 0xEE, 0xEE};
    CHECK(!memcmp(b, want, sizeof b));
    CHECK_EQ(pack_get_u16le(b + 1), 0x0102);
    CHECK_EQ(pack_get_u32le(b + 3), 0x03040506u);
    CHECK_EQ(pack_get_u64le(b + 7), 0x0708090A0B0C0D0Eull);
    for (unsigned n = 1; n <= 8; n++) {
        uint64_t v = rng(), mask = n == 8 ? ~0ull : (1ull << (8 * n)) - 1;
        memset(b, 0xEE, sizeof b);
        pack_put_le(b + 3, v, n);
        CHECK_EQ(pack_get_le(b + 3, n), v & mask);
        CHECK_EQ(b[3], (uint8_t)v);         /* low byte first */
        CHECK_EQ(b[3 + n], 0xEE);           /* nothing past n bytes */
        CHECK_EQ(pack_get_le(b + 3, n), pack_get_le(b + 3, 8) & mask);
    }
    struct pack_w w;
    pack_w_init(&w);
    pack_u16(&w, 0xBEEF);
    pack_u32(&w, 0xDEADBEEFu);
    pack_u64(&w, 0x0123456789ABCDEFull);
    pack_str(&w, "key");
    REQUIRE(!w.err && w.len == 2 + 4 + 8 + 2 + 3);
    CHECK(w.p[0] == 0xEF && w.p[1] == 0xBE && w.p[2] == 0xEF && w.p[13] == 0x01);
    struct pack_r r;
    pack_r_init(&r, w.p, w.len);
    char str[8];
    CHECK_EQ(unpack_u16(&r), 0xBEEF);
    CHECK_EQ(unpack_u32(&r), 0xDEADBEEFu);
    CHECK_EQ(unpack_u64(&r), 0x0123456789ABCDEFull);
    unpack_str(&r, str, sizeof str);
    CHECK(unpack_done(&r) && !strcmp(str, "key"));
    CHECK_EQ(unpack_u32(&r), 0); /* past the end: zero, and the error sticks */
    CHECK(r.err && !unpack_done(&r));
    pack_w_free(&w);
}

static const struct test_case cases[] = {
    {"pack", t_pack},
    {"hist_buckets", t_hist_buckets}, {"hist_percentiles", t_hist_percentiles},
    {"parse", t_parse},               {"config", t_config},
    {"json", t_json},                 {"wire", t_wire},
    {"auth", t_auth},
    {"status", t_status},
};

int main(int argc, char **argv)
{
    return test_main(argc - 1, argv + 1, cases, sizeof cases / sizeof cases[0]);
}
