/* Unit tests of the replica configuration (server/rcfg.h): the first configuration, the one after
 * a failure, and the text encoding, whose decoder refuses every malformed input with a reason
 * (the bytes come from ZooKeeper, which anyone with access may write). */
#include "tests/harness.h"

#include "rdkv_status.h"
#include "server/rcfg.h"

#include <string.h>

static void t_initial(void)
{
    struct rcfg c;
    CHECK_EQ(rcfg_initial(&c, 3, 3), 0);
    CHECK_EQ(c.epoch, 1);
    CHECK_EQ(c.partitions, 3);
    CHECK_EQ(c.members, 7);
    for (unsigned p = 0; p < 3; p++) {
        CHECK_EQ(c.nrep[p], 3);
        CHECK_EQ(rcfg_primary(&c, p), p);
        for (unsigned n = 0; n < 3; n++) CHECK(rcfg_holds(&c, p, (uint16_t)n));
    }
    CHECK_EQ(rcfg_initial(&c, 5, 2), 0);
    CHECK_EQ(c.rep[4][0], 4);
    CHECK_EQ(c.rep[4][1], 0);
    CHECK(!rcfg_holds(&c, 4, 2));
    char err[128];
    CHECK(rcfg_check(&c, err, sizeof err));
    CHECK_EQ(rcfg_initial(&c, 2, 3), RDKV_EINVAL);
    CHECK_EQ(rcfg_initial(&c, 0, 1), RDKV_EINVAL);
    CHECK_EQ(rcfg_initial(&c, RCFG_MAX_NODES + 1, 1), RDKV_EINVAL);
    CHECK_EQ(rcfg_initial(&c, 8, RCFG_MAX_REPLICAS + 1), RDKV_EINVAL);
    CHECK_EQ(rcfg_initial(&c, 64, 3), 0);
    CHECK_EQ(c.members, ~0ull);
}

static void t_without(void)
{
    struct rcfg c, n, m;
    CHECK_EQ(rcfg_initial(&c, 3, 2), 0); /* p0: 0 1, p1: 1 2, p2: 2 0 */
    CHECK_EQ(rcfg_without(&c, 1, &n), 0);
    CHECK_EQ(n.epoch, 2);
    CHECK_EQ(n.members, 5);
    CHECK_EQ(n.nrep[0], 1);
    CHECK_EQ(rcfg_primary(&n, 0), 0);
    CHECK_EQ(n.nrep[1], 1);
    CHECK_EQ(rcfg_primary(&n, 1), 2); /* the backup took over */
    CHECK_EQ(n.nrep[2], 2);
    char err[128];
    CHECK(rcfg_check(&n, err, sizeof err));
    /* node 2 is now partition 1's last replica: it cannot leave too */
    CHECK_EQ(rcfg_without(&n, 2, &m), RDKV_EUNAVAILABLE);
    CHECK_EQ(rcfg_without(&n, 1, &m), RDKV_EINVAL); /* no member any more */
    /* R = 1 loses a partition with any node */
    CHECK_EQ(rcfg_initial(&c, 3, 1), 0);
    CHECK_EQ(rcfg_without(&c, 0, &n), RDKV_EUNAVAILABLE);
}

/* A node back with an empty memory: a copy being filled of every partition short of R, never
 * promoted while it is one, and full once filled. */
static void t_join(void)
{
    struct rcfg c, n, j, f, w;
    char err[160], buf[4096];
    CHECK_EQ(rcfg_initial(&c, 3, 3), 0);
    CHECK_EQ(rcfg_join(&c, 1, 77, &j), RDKV_EEXIST);  /* a member */
    CHECK_EQ(rcfg_join(&c, 3, 77, &j), RDKV_EINVAL);  /* no such node */
    CHECK_EQ(rcfg_without(&c, 0, &n), 0);             /* p0: 1 2 */
    CHECK_EQ(n.fenced[0], UINT64_MAX);                /* every process of the one removed */
    CHECK_EQ(n.fenced[1], 0u);
    CHECK(rcfg_check(&n, err, sizeof err));
    CHECK_EQ(rcfg_join(&n, 0, 0, &j), RDKV_EINVAL);   /* no incarnation */
    CHECK_EQ(rcfg_join(&n, 0, 77, &j), 0);
    CHECK_EQ(j.fenced[0], 76u);                       /* its processes before this one */
    CHECK_EQ(j.epoch, 3);
    CHECK_EQ(j.members, 7);
    for (unsigned p = 0; p < 3; p++) {
        CHECK_EQ(j.nrep[p], 3);
        CHECK_EQ(j.nlearn[p], 1);
        CHECK(rcfg_learning(&j, p, 0));
        CHECK(!rcfg_learning(&j, p, rcfg_primary(&j, p)));
        CHECK_EQ(rcfg_full(&j, p), 2);
    }
    CHECK(rcfg_check(&j, err, sizeof err));
    /* the encoding marks it, and reads back the same */
    int len = rcfg_encode(&j, buf, sizeof buf);
    REQUIRE(len > 0);
    CHECK(strstr(buf, "part 0 1 2 0+\n") != NULL);
    CHECK(strstr(buf, "fenced 0 76\n") != NULL);
    struct rcfg d;
    CHECK_EQ(rcfg_decode(buf, (size_t)len, &d, err, sizeof err), 0);
    CHECK(!memcmp(&d, &j, sizeof d));
    len = rcfg_encode(&n, buf, sizeof buf);
    REQUIRE(len > 0);
    CHECK(strstr(buf, "fenced 0 18446744073709551615\n") != NULL);
    CHECK_EQ(rcfg_decode(buf, (size_t)len, &d, err, sizeof err), 0);
    CHECK(!memcmp(&d, &n, sizeof d));
    /* a copy being filled is never promoted: p0's primary and its full backup leave, and the
     * last is refused (only node 0's unfilled copy would be left) */
    CHECK_EQ(rcfg_without(&j, 1, &w), 0);
    CHECK_EQ(rcfg_primary(&w, 0), 2);
    CHECK_EQ(w.nlearn[0], 1);
    CHECK_EQ(rcfg_without(&w, 2, &f), RDKV_EUNAVAILABLE);
    /* filled: full, after the full ones, and then promotable */
    CHECK_EQ(rcfg_filled(&j, 0, 1, &f), RDKV_EINVAL); /* not one being filled */
    CHECK_EQ(rcfg_filled(&j, 0, 0, &f), 0);
    CHECK_EQ(f.epoch, 4);
    CHECK_EQ(f.nlearn[0], 0);
    CHECK(!rcfg_learning(&f, 0, 0));
    CHECK(rcfg_holds(&f, 0, 0));
    CHECK_EQ(f.nlearn[1], 1);
    CHECK(rcfg_check(&f, err, sizeof err));
    CHECK_EQ(rcfg_without(&f, 1, &w), 0);
    CHECK_EQ(rcfg_without(&w, 2, &n), RDKV_EUNAVAILABLE); /* p1, p2: unfilled copies only */
    CHECK_EQ(rcfg_filled(&w, 1, 0, &n), 0);
    CHECK_EQ(rcfg_filled(&n, 2, 0, &w), 0);
    CHECK_EQ(rcfg_without(&w, 2, &n), 0);
    for (unsigned p = 0; p < 3; p++) CHECK_EQ(rcfg_primary(&n, p), 0); /* the filled copies */
    /* a copy dropped (full or being filled): out of its set only, the node still a member; never
     * the primary, never one it does not hold */
    CHECK_EQ(rcfg_drop(&j, 0, 1, &n), RDKV_EINVAL); /* p0's primary */
    CHECK_EQ(rcfg_drop(&j, 0, 3, &n), RDKV_EINVAL);
    CHECK_EQ(rcfg_drop(&j, 9, 2, &n), RDKV_EINVAL);
    CHECK_EQ(rcfg_drop(&j, 0, 0, &n), 0); /* being filled */
    CHECK_EQ(n.epoch, j.epoch + 1);
    CHECK_EQ(n.nlearn[0], 0);
    CHECK_EQ(n.nrep[0], j.nrep[0] - 1);
    CHECK(!rcfg_holds(&n, 0, 0) && rcfg_holds(&n, 1, 0) && (n.members & 1));
    CHECK(rcfg_check(&n, err, sizeof err));
    CHECK_EQ(rcfg_drop(&j, 0, 2, &n), 0); /* full */
    CHECK_EQ(n.nlearn[0], 1);
    CHECK(!rcfg_holds(&n, 0, 2) && rcfg_learning(&n, 0, 0) && rcfg_primary(&n, 0) == 1);
    CHECK(rcfg_check(&n, err, sizeof err));
    /* handed back: only to a full copy that is not the primary; the old primary first backup,
     * the copy being filled still last */
    CHECK_EQ(rcfg_handback(&j, 0, 0, &n), RDKV_EINVAL); /* being filled */
    CHECK_EQ(rcfg_handback(&j, 0, 1, &n), RDKV_EINVAL); /* the primary */
    CHECK_EQ(rcfg_handback(&j, 0, 3, &n), RDKV_EINVAL); /* no copy */
    CHECK_EQ(rcfg_handback(&j, 9, 2, &n), RDKV_EINVAL);
    CHECK_EQ(rcfg_handback(&j, 0, 2, &n), 0);
    CHECK_EQ(n.epoch, j.epoch + 1);
    CHECK_EQ(n.nrep[0], j.nrep[0]);
    CHECK_EQ(n.nlearn[0], j.nlearn[0]);
    CHECK(n.rep[0][0] == 2 && n.rep[0][1] == 1 && n.rep[0][2] == 0);
    CHECK(!memcmp(n.rep[1], j.rep[1], sizeof n.rep[1]));
    CHECK(rcfg_check(&n, err, sizeof err));
    /* nothing short of R: nothing to hold */
    CHECK_EQ(rcfg_initial(&c, 3, 2), 0);
    c.members &= ~1ull;
    for (unsigned p = 0; p < 3; p++) {
        unsigned k = 0;
        for (unsigned r = 0; r < c.nrep[p]; r++)
            if (c.rep[p][r]) c.rep[p][k++] = c.rep[p][r];
        if (!k) c.rep[p][k++] = 1;
        c.nrep[p] = (uint8_t)k;
    }
    c.rep[0][1] = 2, c.nrep[0] = 2; /* p0 on 1 2, p1 on 1 2, p2 on 2 1 */
    c.rep[2][1] = 1, c.nrep[2] = 2;
    CHECK(rcfg_check(&c, err, sizeof err));
    CHECK_EQ(rcfg_join(&c, 0, 5, &j), RDKV_ENOTFOUND);
    /* decoding refuses a full replica after one being filled, and a partition without a full
     * one */
    const char *bad1 = "rdkv-config 1\nepoch 1\nnodes 2\npartitions 2\nreplicas 2\n"
                       "members 0 1\npart 0 0 1+\npart 1 1+ 0\n";
    const char *bad2 = "rdkv-config 1\nepoch 1\nnodes 2\npartitions 2\nreplicas 2\n"
                       "members 0 1\npart 0 0 1+\npart 1 1+\n";
    CHECK_EQ(rcfg_decode(bad1, strlen(bad1), &d, err, sizeof err), RDKV_EPROTO);
    CHECK_EQ(rcfg_decode(bad2, strlen(bad2), &d, err, sizeof err), RDKV_EPROTO);
    /* fencing lines: a node in range, once, an incarnation above 0, and never every process of
     * a member */
    const char *head = "rdkv-config 1\nepoch 2\nnodes 2\npartitions 2\nreplicas 1\n"
                       "members 0 1\npart 0 0\npart 1 1\n";
    const char *tails[] = {"fenced 2 5\n", "fenced 1 0\n", "fenced 1 5\nfenced 1 6\n",
                           "fenced 1 18446744073709551615\n", "fenced 1\n", "fenced 1 5 6\n",
                           "fenced x 5\n"};
    for (unsigned i = 0; i < sizeof tails / sizeof *tails; i++) {
        snprintf(buf, sizeof buf, "%s%s", head, tails[i]);
        CHECK_EQ(rcfg_decode(buf, strlen(buf), &d, err, sizeof err), RDKV_EPROTO);
    }
    snprintf(buf, sizeof buf, "%sfenced 1 5\n", head);
    CHECK_EQ(rcfg_decode(buf, strlen(buf), &d, err, sizeof err), 0);
    CHECK_EQ(d.fenced[1], 5u);
}

static void t_roundtrip(void)
{
    struct rcfg c, d, n;
    char buf[4096], err[160];
    CHECK_EQ(rcfg_initial(&c, 5, 3), 0);
    CHECK_EQ(rcfg_without(&c, 3, &n), 0);
    int len = rcfg_encode(&n, buf, sizeof buf);
    REQUIRE(len > 0);
    CHECK_EQ(rcfg_decode(buf, (size_t)len, &d, err, sizeof err), 0);
    CHECK(!memcmp(&d, &n, sizeof d));
    CHECK_EQ(rcfg_encode(&n, buf, 20), RDKV_ETOOBIG);
}

static void t_decode_bad(void)
{
    static const char *const bad[] = {
        "",
        "epoch 1\n",
        "rdkv-config 2\nepoch 1\nnodes 1\npartitions 1\nreplicas 1\nmembers 0\npart 0 0\n",
        "rdkv-config 1\nepoch 0\nnodes 1\npartitions 1\nreplicas 1\nmembers 0\npart 0 0\n",
        "rdkv-config 1\nepoch 1\nnodes 1\npartitions 1\nreplicas 1\nmembers 0\n", /* no part */
        "rdkv-config 1\nepoch 1\nnodes 2\npartitions 2\nreplicas 1\nmembers 0 1\npart 0 0\n",
        "rdkv-config 1\nepoch 1\nnodes 1\npartitions 1\nreplicas 1\nmembers 0\npart 0 0 0\n",
        "rdkv-config 1\nepoch 1\nnodes 2\npartitions 2\nreplicas 2\nmembers 0\npart 0 0 1\npart 1 0\n",
        "rdkv-config 1\nepoch 1\nnodes 1\npartitions 1\nreplicas 1\nmembers 0 5\npart 0 0\n",
        "rdkv-config 1\nepoch 1\nnodes 1\npartitions 1\nreplicas 1\nmembers 0\npart 0 0\nx 1\n",
        "rdkv-config 1\nepoch 1\nnodes 1\npartitions 1\nreplicas 1\nmembers 0\npart 0 0\npart 0 0\n",
        "rdkv-config 1\nepoch 1 2\nnodes 1\npartitions 1\nreplicas 1\nmembers 0\npart 0 0\n",
        "rdkv-config 1\nepoch 1\nepoch 2\nnodes 1\npartitions 1\nreplicas 1\nmembers 0\npart 0 0\n",
        "rdkv-config 1\nepoch -1\nnodes 1\npartitions 1\nreplicas 1\nmembers 0\npart 0 0\n",
        "rdkv-config 1\nepoch 1\nnodes 99\npartitions 1\nreplicas 1\nmembers 0\npart 0 0\n",
        "rdkv-config 1\nepoch 1\nnodes 1\npartitions 1\nreplicas 1\nmembers 0\npart 0 00000000000000000000000000000\n",
        "rdkv-config 1\nepoch 1\nnodes 1\npartitions 1\nreplicas 1\nmembers 0\npart 0 0 1 2 3 4 5 6 7\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct rcfg d;
        char err[160] = "";
        int rc = rcfg_decode(bad[i], strlen(bad[i]), &d, err, sizeof err);
        if (rc != RDKV_EPROTO || !err[0])
            fprintf(stderr, "  case %zu: rc %d, err '%s'\n", i, rc, err);
        CHECK_EQ(rc, RDKV_EPROTO);
        CHECK(err[0] != 0);
    }
    /* the good one those are made from, with blank lines, tabs and CRs */
    const char *good = "rdkv-config 1\r\n\nepoch\t7\nnodes 2\npartitions 2\nreplicas 2\n"
                       "members 0 1\npart 1 1 0\npart 0 0 1\n";
    struct rcfg d;
    char err[160];
    CHECK_EQ(rcfg_decode(good, strlen(good), &d, err, sizeof err), 0);
    CHECK_EQ(d.epoch, 7);
    CHECK_EQ(rcfg_primary(&d, 1), 1);
}

/* Random changes of a good encoding: each decodes to a consistent configuration or fails with a
 * reason; never a crash (run under ASan in the sanitizer job). */
static void t_decode_mutations(void)
{
    struct rcfg c;
    char buf[1024], m[1024], err[160];
    CHECK_EQ(rcfg_initial(&c, 4, 3), 0);
    int len = rcfg_encode(&c, buf, sizeof buf);
    REQUIRE(len > 0);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    unsigned ok = 0, refused = 0;
    for (int i = 0; i < 20000; i++) {
        memcpy(m, buf, (size_t)len);
        int ml = len;
        for (int k = 0; k < 3; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            unsigned at = (unsigned)(x % (uint64_t)ml);
            const char pool[] = "0123456789 \n\t-x";
            if (x >> 40 & 7) m[at] = pool[(x >> 20) % (sizeof pool - 1)];
            else ml = (int)at + 1; /* cut */
        }
        struct rcfg d;
        err[0] = 0;
        int rc = rcfg_decode(m, (size_t)ml, &d, err, sizeof err);
        if (rc == 0) {
            ok++;
            CHECK(rcfg_check(&d, err, sizeof err));
        } else {
            refused++;
            CHECK_EQ(rc, RDKV_EPROTO);
            CHECK(err[0] != 0);
        }
    }
    CHECK(refused > 0);
    printf("  %u mutations decoded, %u refused\n", ok, refused);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"initial", t_initial},           {"without", t_without},         {"join", t_join},
        {"roundtrip", t_roundtrip},       {"decode_bad", t_decode_bad},
        {"decode_mutations", t_decode_mutations},
    };
    return test_main(argc - 1, argv + 1, cases, sizeof cases / sizeof *cases);
}
