/* kvcluster: starts, inspects and stops a local rdkv cluster whose nodes run in the background.
 * Everything about the cluster (config, logs, pids) lives in one directory. */
#include "server/proto.h"
#include "tools/launcher.h"

#include "common/clock.h"
#include "common/parse.h"
#include "rdma/auth.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage[] =
    "usage: kvcluster start --nodes N --dir DIR [--transport T] [--arena SIZE] [--host H]\n"
    "                       [--bench]\n"
    "       kvcluster status --dir DIR\n"
    "       kvcluster stop --dir DIR\n"
    "       kvcluster secret --dir DIR\n"
    "\n"
    "start   launches N kvserver nodes in the background on ports the kernel picks, writes\n"
    "        DIR/cluster.conf (give it to kvbench --config or kvctl), DIR/node-I.log and\n"
    "        DIR/node-I.pid, and returns once every node is ready.\n"
    "status  shows each node's process and what it answers to a status request.\n"
    "stop    stops every node of the cluster in DIR (SIGTERM, then SIGKILL after 10 s).\n"
    "secret  writes a fresh DIR/cluster.secret (the node secret: name it in a config with\n"
    "        'secret_file', or give it to kvserver --secret-file) and DIR/cluster.client.secret\n"
    "        (for clients: kvctl --secret-file, RDKV_SECRET_FILE), mode 600; start makes them\n"
    "        itself when DIR has none (docs/security.md).\n"
    "\n"
    "  --nodes N       number of nodes (1..64)\n"
    "  --dir DIR       the cluster's directory (created if missing)\n"
    "  --transport T   soft, verbs or auto (default soft)\n"
    "  --arena SIZE    arena per node, e.g. 256M (default: kvserver's)\n"
    "  --host H        address the nodes listen on (default 127.0.0.1)\n"
    "  --bench         start the nodes for benchmarking (kvserver --bench): kvbench's\n"
    "                  workload and benchmark RPCs are served (not on production nodes)\n"
    "\n"
    "Exit status: 0 ok, 1 error, 2 bad usage.\n";

static _Noreturn void usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "kvcluster: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'kvcluster --help'.\n");
    exit(2);
}

static int cmd_secret(const char *dir)
{
    char node[4096], client[4096], err[512];
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "kvcluster: error: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    snprintf(node, sizeof node, "%s/%s", dir, LAUNCH_SECRET);
    snprintf(client, sizeof client, "%s/%s", dir, LAUNCH_CLIENT_SECRET);
    if (auth_generate(node, client, err, sizeof err)) {
        fprintf(stderr, "kvcluster: error: %s\n", err);
        return 1;
    }
    printf("node secret %s, client secret %s\n", node, client);
    return 0;
}

static int cmd_start(unsigned nodes, const char *dir, enum fab_transport t, uint64_t arena,
                     const char *host, bool bench)
{
    char conf[4096];
    snprintf(conf, sizeof conf, "%s/cluster.conf", dir);
    struct launch old;
    char err[512];
    if (access(conf, F_OK) == 0 && launch_attach(&old, dir, err, sizeof err) == 0) {
        for (unsigned i = 0; i < old.n; i++)
            if (launch_alive(&old, i)) {
                fprintf(stderr, "kvcluster: error: a cluster is already running in %s "
                                "(node %u, pid %d); stop it first\n", dir, i, (int)old.pids[i]);
                cluster_config_free(&old.cc);
                return 1;
            }
        cluster_config_free(&old.cc);
    }
    struct launch_opts lo;
    launch_opts_init(&lo);
    lo.nodes = nodes;
    lo.dir = dir;
    lo.transport = t;
    lo.arena_size = arena;
    lo.host = host;
    lo.detach = true;
    lo.bench = bench;
    struct launch L;
    if (launch_start(&L, &lo, err, sizeof err)) {
        fprintf(stderr, "kvcluster: error: %s\n", err);
        return 1;
    }
    printf("started %u node%s (transport %s) in %s\n", nodes, nodes == 1 ? "" : "s",
           fab_transport_name(t), dir);
    for (unsigned i = 0; i < L.n; i++)
        printf("  node %u  %s:%u  pid %d  log %s/node-%u.log\n", i, L.cc.nodes[i].host,
               L.cc.nodes[i].port, (int)L.pids[i], dir, i);
    printf("config: %s\n", L.conf);
    cluster_config_free(&L.cc);
    return 0;
}

static int cmd_status(const char *dir)
{
    struct launch L;
    char err[512];
    if (launch_attach(&L, dir, err, sizeof err)) {
        fprintf(stderr, "kvcluster: error: %s\n", err);
        return 1;
    }
    struct fab_opts o;
    fab_opts_init(&o);
    o.cluster = &L.cc;
    o.node = FAB_NODE_CLIENT;
    o.transport = FAB_SOFT;
    if (L.cc.transport[0]) fab_transport_parse(L.cc.transport, &o.transport);
    o.connect_timeout_ns = NS_PER_S;
    struct fabric *f = NULL;
    struct fab_ctx *c = NULL;
    if (fab_open(&o, &f, err, sizeof err) || fab_ctx_create(f, &c)) {
        fprintf(stderr, "kvcluster: error: %s\n", err[0] ? err : "cannot open the fabric");
        if (f) fab_close(f);
        cluster_config_free(&L.cc);
        return 1;
    }
    int down = 0;
    struct fab_buf resp = {0};
    for (unsigned i = 0; i < L.n; i++) {
        bool alive = launch_alive(&L, i);
        int rc = fab_rpc_call(c, (uint16_t)i, KV_RPC_STATUS, NULL, 0, &resp, 2 * NS_PER_S);
        printf("node %u  %s:%u  process %s  ", i, L.cc.nodes[i].host, L.cc.nodes[i].port,
               alive ? "running" : "not running");
        if (rc == 0) printf("%.*s\n", (int)resp.len, (const char *)resp.data);
        else printf("unreachable (%s)\n", rdkv_strerror(rc));
        if (rc || !alive) down++;
    }
    fab_buf_free(&resp);
    fab_ctx_destroy(c);
    fab_close(f);
    cluster_config_free(&L.cc);
    return down ? 1 : 0;
}

static int cmd_stop(const char *dir)
{
    struct launch L;
    char err[512];
    if (launch_attach(&L, dir, err, sizeof err)) {
        fprintf(stderr, "kvcluster: error: %s\n", err);
        return 1;
    }
    unsigned running = 0;
    for (unsigned i = 0; i < L.n; i++) running += launch_alive(&L, i);
    int rc = launch_stop(&L, 10 * NS_PER_S);
    printf("stopped %u node%s in %s\n", running, running == 1 ? "" : "s", dir);
    return rc == RDKV_ETIMEDOUT ? 1 : 0;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
        fputs(usage, stdout);
        return 0;
    }
    unsigned nodes = 0;
    const char *dir = NULL, *host = "127.0.0.1";
    enum fab_transport t = FAB_SOFT;
    uint64_t arena = 0, u;
    bool bench = false;
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        if (!strcmp(o, "--bench")) {
            bench = true;
            continue;
        }
        if (!v) usage_error("option '%s' needs a value", o);
        if (!strcmp(o, "--nodes")) {
            if (parse_uint_range(v, 1, LAUNCH_MAX, &u)) usage_error("--nodes must be 1..64 (got '%s')", v);
            nodes = (unsigned)u;
        } else if (!strcmp(o, "--dir")) {
            dir = v;
        } else if (!strcmp(o, "--transport")) {
            if (fab_transport_parse(v, &t)) usage_error("--transport must be soft, verbs or auto (got '%s')", v);
            if (t == FAB_AUTO) t = fab_verbs_available() ? FAB_VERBS : FAB_SOFT;
        } else if (!strcmp(o, "--arena")) {
            if (parse_size(v, &arena) || !arena) usage_error("--arena needs a size such as 256M (got '%s')", v);
        } else if (!strcmp(o, "--host")) {
            host = v;
        } else {
            usage_error("unknown option '%s'", o);
        }
        i++;
    }
    if (!dir) usage_error("%s", "--dir DIR is required");
    if (!strcmp(cmd, "start")) {
        if (!nodes) usage_error("%s", "start needs --nodes N");
        return cmd_start(nodes, dir, t, arena, host, bench);
    }
    if (!strcmp(cmd, "status")) return cmd_status(dir);
    if (!strcmp(cmd, "secret")) return cmd_secret(dir);
    if (!strcmp(cmd, "stop")) return cmd_stop(dir);
    usage_error("unknown command '%s' (start, status, stop or secret)", cmd);
}
