/* Unit tests of kvctl's status reader (tools/kvctl/status.h): a reply as the node writes it
 * (docs/architecture.md, "Status") is read field by field; a reply cut short at every byte, with
 * a field of the wrong type or missing, or with random bytes changed, is refused with a message
 * that says where, never a crash. */
#include "tests/harness.h"

#include "tools/kvctl/status.h"

#include <string.h>

/* Three nodes of a replicated cluster, node 2 down; node 0 streams partition 1 to node 2. */
static const char good[] =
    "{\"coordinator\":1,\"nodes\":["
    "{\"node\":0,\"address\":\"127.0.0.1:7400\",\"state\":\"up\",\"rows\":10,"
    "\"heap_bytes\":1048576,\"heap_used\":2048,\"status\":{\"node\":0,\"address\":"
    "\"127.0.0.1:7400\",\"rows\":10,\"fence\":{\"refused\":0},\"replication\":{\"replicas\":2,"
    "\"zookeeper\":\"127.0.0.1:2181\",\"epoch\":7,\"manager\":true,\"member\":true,"
    "\"lease\":true,\"removed\":0,\"partitions\":[{\"partition\":0,\"replicas\":[0,1],"
    "\"filling\":[]},{\"partition\":1,\"replicas\":[0,2],\"filling\":[2],\"fill\":{\"rows\":5,"
    "\"of\":20}}],\"fenced\":[]},\"peers\":[]}},"
    "{\"node\":1,\"address\":\"127.0.0.1:7401\",\"state\":\"up\",\"rows\":0,"
    "\"heap_bytes\":1048576,\"heap_used\":0,\"status\":{\"replication\":{\"replicas\":2,"
    "\"zookeeper\":\"127.0.0.1:2181\",\"epoch\":7,\"manager\":false,\"partitions\":["
    "{\"partition\":0,\"replicas\":[0,1],\"filling\":[]},{\"partition\":1,\"replicas\":[0,2],"
    "\"filling\":[2]}]}}},"
    "{\"node\":2,\"address\":\"127.0.0.1:7402\",\"state\":\"down\",\"error\":\"unavailable\"}]}";

static void t_good(void)
{
    struct st_cluster c;
    char err[256] = "";
    REQUIRE(status_parse(good, &c, err, sizeof err) == 0);
    CHECK_EQ(c.coordinator, 1);
    REQUIRE(c.n == 3);
    CHECK_EQ(c.nodes[0].node, 0);
    CHECK(!strcmp(c.nodes[0].address, "127.0.0.1:7400"));
    CHECK(c.nodes[0].up && c.nodes[0].has_rows && c.nodes[0].has_heap);
    CHECK_EQ(c.nodes[0].heap_used, 2048);
    CHECK_EQ(c.nodes[0].heap_bytes, 1048576);
    const struct st_repl *r = &c.nodes[0].repl;
    CHECK(r->present && r->manager);
    CHECK(r->zookeeper && !strcmp(r->zookeeper, "127.0.0.1:2181"));
    CHECK_EQ(r->replicas, 2);
    CHECK_EQ(r->epoch, 7);
    REQUIRE(r->nparts == 2);
    CHECK(!r->parts[0].has_fill);
    CHECK(r->parts[1].has_fill);
    CHECK_EQ(r->parts[1].fill_rows, 5);
    CHECK_EQ(r->parts[1].fill_of, 20);
    REQUIRE(r->parts[1].nreplicas == 2 && r->parts[1].nfilling == 1);
    CHECK_EQ(r->parts[1].filling[0], 2);
    CHECK(!c.nodes[1].repl.manager);
    CHECK(!c.nodes[2].up && !c.nodes[2].has_rows && !c.nodes[2].has_heap);
    CHECK(!c.nodes[2].repl.present);
    CHECK(c.nodes[2].error && !strcmp(c.nodes[2].error, "unavailable"));
    status_free(&c);
}

/* One copy, no ZooKeeper: zookeeper and manager are null, and there are no partitions. */
static void t_one_copy(void)
{
    static const char js[] =
        "{\"coordinator\":0,\"nodes\":[{\"node\":0,\"address\":\"h:1\",\"state\":\"up\","
        "\"rows\":1,\"heap_bytes\":2,\"heap_used\":1,\"status\":{\"replication\":{\"replicas\":1,"
        "\"zookeeper\":null,\"epoch\":1,\"manager\":null},\"some_new_field\":[1,2]}}]}";
    struct st_cluster c;
    char err[256] = "";
    REQUIRE(status_parse(js, &c, err, sizeof err) == 0);
    CHECK(c.nodes[0].repl.present && !c.nodes[0].repl.zookeeper && !c.nodes[0].repl.manager);
    CHECK_EQ(c.nodes[0].repl.nparts, 0);
    status_free(&c);
}

/* Every proper prefix of the reply is refused, with a message. */
static void t_truncated(void)
{
    size_t n = strlen(good);
    char *buf = malloc(n + 1);
    REQUIRE(buf);
    for (size_t len = 0; len < n; len++) {
        memcpy(buf, good, len);
        buf[len] = 0;
        struct st_cluster c;
        char err[256] = "";
        CHECK(status_parse(buf, &c, err, sizeof err) == -1);
        CHECK(err[0] != 0);
        CHECK(c.nodes == NULL && c.doc == NULL);
    }
    free(buf);
}

/* Wrong types and missing fields: refused, and the message names the place. */
static void t_wrong(void)
{
    static const struct {
        const char *js, *says;
    } cases[] = {
        {"", "not JSON"},
        {"garbage", "not JSON"},
        {"[1,2]", "not an object"},
        {"{\"nodes\":[]}", "no \"coordinator\""},
        {"{\"coordinator\":-1,\"nodes\":[]}", "\"coordinator\" is an integer, not a whole"},
        {"{\"coordinator\":\"0\",\"nodes\":[]}", "\"coordinator\" is a string"},
        {"{\"coordinator\":0}", "no \"nodes\""},
        {"{\"coordinator\":0,\"nodes\":{}}", "\"nodes\" is an object, not an array"},
        {"{\"coordinator\":0,\"nodes\":[7]}", "nodes[0]: is an integer"},
        {"{\"coordinator\":0,\"nodes\":[{\"node\":0,\"state\":\"up\"}]}",
         "nodes[0]: no \"address\""},
        {"{\"coordinator\":0,\"nodes\":[{\"node\":0.5,\"address\":\"a\",\"state\":\"up\"}]}",
         "nodes[0]: \"node\" is a real number"},
        {"{\"coordinator\":0,\"nodes\":[{\"node\":0,\"address\":\"a\",\"state\":\"ok\"}]}",
         "\"state\" is \"ok\", not \"up\" or \"down\""},
        {"{\"coordinator\":0,\"nodes\":[{\"node\":0,\"address\":\"a\",\"state\":true}]}",
         "\"state\" is a boolean, not a string"},
        {"{\"coordinator\":0,\"nodes\":[{\"node\":0,\"address\":\"a\",\"state\":\"up\","
         "\"rows\":\"5\"}]}",
         "nodes[0]: \"rows\" is a string"},
        {"{\"coordinator\":0,\"nodes\":[{\"node\":0,\"address\":\"a\",\"state\":\"down\","
         "\"error\":5}]}",
         "\"error\" is an integer"},
        {"{\"coordinator\":0,\"nodes\":[{\"node\":0,\"address\":\"a\",\"state\":\"up\","
         "\"status\":[]}]}",
         "\"status\" is an array"},
        {"{\"coordinator\":0,\"nodes\":[{\"node\":0,\"address\":\"a\",\"state\":\"up\","
         "\"status\":{}}]}",
         "nodes[0].status: no \"replication\""},
        {"{\"coordinator\":0,\"nodes\":[{\"node\":0,\"address\":\"a\",\"state\":\"up\","
         "\"status\":{\"replication\":{\"replicas\":1,\"epoch\":1,\"zookeeper\":3,"
         "\"manager\":null}}}]}",
         "replication: \"zookeeper\" is an integer, not a string or null"},
        {"{\"coordinator\":0,\"nodes\":[{\"node\":0,\"address\":\"a\",\"state\":\"up\","
         "\"status\":{\"replication\":{\"replicas\":1,\"epoch\":1,\"zookeeper\":\"z\","
         "\"manager\":false}}}]}",
         "nodes[0].status.replication: no \"partitions\""},
        {"{\"coordinator\":0,\"nodes\":[{\"node\":0,\"address\":\"a\",\"state\":\"up\","
         "\"status\":{\"replication\":{\"replicas\":1,\"epoch\":1,\"zookeeper\":\"z\","
         "\"manager\":false,\"partitions\":[{\"partition\":0,\"replicas\":[0,\"x\"],"
         "\"filling\":[]}]}}}]}",
         "partitions[0]: \"replicas\"[1] is a string"},
        {"{\"coordinator\":0,\"nodes\":[{\"node\":0,\"address\":\"a\",\"state\":\"up\","
         "\"status\":{\"replication\":{\"replicas\":1,\"epoch\":1,\"zookeeper\":\"z\","
         "\"manager\":false,\"partitions\":[{\"partition\":0,\"replicas\":[0],"
         "\"filling\":[],\"fill\":{\"rows\":1}}]}}}]}",
         "partitions[0].fill: no \"of\""},
        {"{\"coordinator\":0,\"coordinator\":1,\"nodes\":[]}", "not JSON"},
        {"{\"coordinator\":99999999999999999999999,\"nodes\":[]}", "not JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct st_cluster c;
        char err[256] = "";
        int rc = status_parse(cases[i].js, &c, err, sizeof err);
        CHECK(rc == -1);
        if (rc == -1 && !strstr(err, cases[i].says)) {
            fprintf(stderr, "  case %zu: '%s' does not say '%s'\n", i, err, cases[i].says);
            harness_failures++;
        }
    }
}

/* Random bytes changed or cut: read or refused with a message, never a crash. */
static void t_mutations(void)
{
    size_t n = strlen(good);
    char *m = malloc(n + 1);
    REQUIRE(m);
    uint64_t x = 88172645463325252ull;
    unsigned ok = 0, refused = 0;
    for (int round = 0; round < 20000; round++) {
        memcpy(m, good, n + 1);
        for (int k = 0; k < 3; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t at = (size_t)(x % n);
            static const char pool[] = "0123456789{}[]\",:-. truefalsnul\\";
            if (x >> 40 & 7) m[at] = pool[(x >> 20) % (sizeof pool - 1)];
            else m[at] = 0; /* cut */
        }
        struct st_cluster c;
        char err[256] = "";
        if (status_parse(m, &c, err, sizeof err) == 0) {
            ok++;
            status_free(&c);
        } else {
            refused++;
            CHECK(err[0] != 0);
        }
    }
    CHECK(refused > 0);
    printf("  %u mutations read, %u refused\n", ok, refused);
    free(m);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"good", t_good},           {"one_copy", t_one_copy},   {"truncated", t_truncated},
        {"wrong", t_wrong},         {"mutations", t_mutations},
    };
    return test_main(argc - 1, argv + 1, cases, sizeof cases / sizeof *cases);
}
