/* kvcluster: starts, inspects and stops a local rdkv cluster whose nodes run in the background.
 * Everything about the cluster (config, logs, pids) lives in one directory. */
#include "server/opts.h"
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
    "                       [--bench] [--durable [--durability MODE] [--checkpoint-every SIZE]]\n"
    "                       [--replicas R [--zookeeper HOST:PORT,...]] [kvserver options]\n"
    "       kvcluster restart --dir DIR --node I|all [--init]\n"
    "       kvcluster status --dir DIR\n"
    "       kvcluster stop --dir DIR\n"
    "       kvcluster secret --dir DIR\n"
    "\n"
    "start   launches N kvserver nodes in the background on ports the kernel picks, writes\n"
    "        DIR/cluster.conf (give it to kvbench --config or kvctl), DIR/node-I.log and\n"
    "        DIR/node-I.pid, and returns once every node is ready. Any other kvserver option\n"
    "        (kvserver --help), such as --conflict no-wait or --row-lock dslr, goes to every\n"
    "        node, and restart gives it again; kvcluster sets --config, --node, --data-dir,\n"
    "        --secret-file and the descriptors itself.\n"
    "restart starts node I of the cluster in DIR again, after it stopped or was killed, with\n"
    "        the options it was started with, on its old port (a --durable node comes back\n"
    "        with its data: it replays its redo log), and returns once its peers see it up.\n"
    "        --node all starts every node that is not running, together: a whole replicated\n"
    "        --durable cluster killed or stopped comes back as it was only so (docs/replication.md\n"
    "        section 7: a node that starts a lease after the manager is removed and refilled).\n"
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
    "  --durable       each node keeps a redo log in DIR/node-I.data (kvserver --data-dir)\n"
    "                  and survives a crash and restart with its data (docs/storage.md)\n"
    "  --durability M  with --durable: group (default), sync or off (kvserver --durability)\n"
    "  --checkpoint-every SIZE  with --durable: checkpoint once the log grew this much\n"
    "                  (kvserver --checkpoint-every; 0: never, the whole log is replayed)\n"
    "  --replicas R    keep R copies of each partition (default 1; docs/replication.md): the\n"
    "                  configuration lives in ZooKeeper, a standalone one started in DIR/zk\n"
    "                  (Debian's zookeeper package) unless --zookeeper names one; stop stops it\n"
    "  --zookeeper H   ZooKeeper's hosts (host:port,...) instead of a local one\n"
    "  --node I        restart: the node to start again\n"
    "  --init          restart of a --durable node whose data directory is empty or gone:\n"
    "                  start its partition empty (without it such a node refuses to start,\n"
    "                  rather than answer \"not found\" for keys it held)\n"
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

/* The options a cluster was started with, kept in DIR/kvcluster.opts for restart. */
#define OPTS_FILE "kvcluster.opts"

static void opts_save(const char *dir, const struct launch_opts *lo)
{
    /* (each kvserver argument passed through on a line "arg TEXT": a value may hold spaces, and
     * main refused one with a line end) */
    char p[4096];
    snprintf(p, sizeof p, "%s/" OPTS_FILE, dir);
    FILE *f = fopen(p, "w");
    if (!f) return;
    fprintf(f, "transport %s\narena %llu\nbench %d\ndurable %d\ndurability %s\n"
               "checkpoint_every %s\n",
            fab_transport_name(lo->transport), (unsigned long long)lo->arena_size, lo->bench,
            lo->durable, lo->durability ? lo->durability : "-",
            lo->checkpoint_every ? lo->checkpoint_every : "-");
    for (unsigned k = 0; lo->extra[k]; k++) fprintf(f, "arg %s\n", lo->extra[k]);
    fclose(f);
}

/* Where opts_load keeps the option values lo points to. */
struct opts_text {
    char durability[128], checkpoint_every[128];
    char extra[LAUNCH_EXTRA_MAX - 1][256]; /* the kvserver arguments passed through */
};

/* A "-" in the file is an option not given: NULL. */
static const char *opts_text(char *dst, size_t cap, const char *val)
{
    if (!strcmp(val, "-")) return NULL;
    snprintf(dst, cap, "%s", val);
    return dst;
}

/* Reads them back into lo (its strings kept in txt). 0, or 1 with a message. */
static int opts_load(const char *dir, struct launch_opts *lo, struct opts_text *txt)
{
    char p[4096], line[256], word[32], val[128];
    snprintf(p, sizeof p, "%s/" OPTS_FILE, dir);
    FILE *f = fopen(p, "r");
    if (!f) {
        fprintf(stderr, "kvcluster: error: %s: %s (was the cluster started by kvcluster start?)\n",
                p, strerror(errno));
        return 1;
    }
    int bad = 0;
    unsigned nx = 0;
    while (!bad && fgets(line, sizeof line, f)) {
        size_t ll = strlen(line);
        if (!strncmp(line, "arg ", 4) && ll > 5 && line[ll - 1] == '\n') {
            if (nx == LAUNCH_EXTRA_MAX - 1 || ll - 5 >= sizeof txt->extra[nx]) bad = 1;
            else {
                memcpy(txt->extra[nx], line + 4, ll - 5);
                txt->extra[nx][ll - 5] = 0;
                lo->extra[nx] = txt->extra[nx];
                lo->extra[++nx] = NULL;
            }
        } else if (sscanf(line, "%31s %127s", word, val) != 2) bad = 1;
        else if (!strcmp(word, "transport")) bad = fab_transport_parse(val, &lo->transport) != 0;
        else if (!strcmp(word, "arena")) bad = parse_u64(val, &lo->arena_size) != 0;
        else if (!strcmp(word, "bench")) lo->bench = !strcmp(val, "1");
        else if (!strcmp(word, "durable")) lo->durable = !strcmp(val, "1");
        else if (!strcmp(word, "durability"))
            lo->durability = opts_text(txt->durability, sizeof txt->durability, val);
        else if (!strcmp(word, "checkpoint_every"))
            lo->checkpoint_every = opts_text(txt->checkpoint_every, sizeof txt->checkpoint_every, val);
    }
    fclose(f);
    if (bad) fprintf(stderr, "kvcluster: error: %s is damaged: %s", p, line);
    return bad;
}

/* Waits (bounded) until every other running node of L sees `node` up again: a restarted node
 * serves its partition only once its peers stopped treating it as down. 0, or 1 with a line. */
static int wait_seen_up(struct launch *L, unsigned node)
{
    struct fab_opts o;
    fab_opts_init(&o);
    o.cluster = &L->cc;
    o.node = FAB_NODE_CLIENT;
    o.transport = FAB_SOFT;
    if (L->cc.transport[0]) fab_transport_parse(L->cc.transport, &o.transport);
    o.connect_timeout_ns = NS_PER_S;
    struct fabric *f = NULL;
    struct fab_ctx *c = NULL;
    char err[512] = "", want[64];
    if (fab_open(&o, &f, err, sizeof err) || fab_ctx_create(f, &c)) {
        fprintf(stderr, "kvcluster: error: %s\n", err[0] ? err : "cannot open the fabric");
        if (f) fab_close(f);
        return 1;
    }
    snprintf(want, sizeof want, "{\"node\":%u,", node);
    struct fab_buf resp = {0};
    int64_t until = clock_now_ns() + 60 * NS_PER_S;
    unsigned waiting = 0;
    for (;;) {
        waiting = 0;
        for (unsigned j = 0; j < L->n; j++) {
            if (j == node || !launch_alive(L, j)) continue;
            bool up = false;
            if (fab_rpc_call(c, (uint16_t)j, KV_RPC_STATUS, NULL, 0, &resp, 2 * NS_PER_S) == 0) {
                /* the peers array's entry for node: ... "state":"up"} */
                char *js = strndup((const char *)resp.data, resp.len);
                const char *at = js ? strstr(js, "\"peers\"") : NULL;
                if (at) at = strstr(at, want);
                const char *end = at ? strchr(at, '}') : NULL;
                const char *st = at ? strstr(at, "\"state\":\"up\"") : NULL;
                up = st && end && st < end;
                free(js);
            }
            if (!up) waiting++;
        }
        if (!waiting || clock_now_ns() >= until) break;
        clock_sleep_ns(100 * NS_PER_MS); /* (bounded: the peers' next heartbeat) */
    }
    fab_buf_free(&resp);
    fab_ctx_destroy(c);
    fab_close(f);
    if (waiting)
        fprintf(stderr, "kvcluster: error: node %u runs, but %u peer(s) still see it down after "
                        "60 s (see their logs)\n", node, waiting);
    return waiting ? 1 : 0;
}

static int cmd_restart(const char *dir, unsigned node, bool init)
{
    struct launch L;
    char err[512];
    struct opts_text txt;
    if (launch_attach(&L, dir, err, sizeof err)) {
        fprintf(stderr, "kvcluster: error: %s\n", err);
        return 1;
    }
    struct launch_opts lo;
    launch_opts_init(&lo);
    lo.nodes = L.n;
    lo.dir = dir;
    lo.detach = true;
    lo.init = init;
    int rc = opts_load(dir, &lo, &txt);
    bool down[LAUNCH_MAX] = {false};
    for (unsigned i = 0; i < L.n; i++)
        down[i] = node == i || (node == LAUNCH_MAX && !launch_alive(&L, i));
    if (!rc && (node == LAUNCH_MAX ? launch_restart_all(&L, &lo, err, sizeof err)
                                   : launch_restart(&L, &lo, node, err, sizeof err))) {
        fprintf(stderr, "kvcluster: error: %s\n", err);
        rc = 1;
    }
    for (unsigned i = 0; i < L.n && !rc; i++) {
        if (!down[i]) continue;
        rc = wait_seen_up(&L, i);
        if (!rc)
            printf("restarted node %u  %s:%u  pid %d  log %s/node-%u.log%s\n", i,
                   L.cc.nodes[i].host, L.cc.nodes[i].port, (int)L.pids[i], dir, i,
                   lo.durable ? " (its data replayed from its redo log)" : " (in memory: empty)");
    }
    cluster_config_free(&L.cc);
    return rc;
}

/* lo: the options from the command line (nodes, dir and the rest); detach is set here. */
static int cmd_start(struct launch_opts *lo)
{
    const char *dir = lo->dir;
    unsigned nodes = lo->nodes;
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
    lo->detach = true;
    struct launch L;
    if (launch_start(&L, lo, err, sizeof err)) {
        fprintf(stderr, "kvcluster: error: %s\n", err);
        if (!lo->zookeeper) launch_zk_stop(dir); /* (one it started for this cluster) */
        return 1;
    }
    opts_save(dir, lo);
    printf("started %u node%s (transport %s) in %s\n", nodes, nodes == 1 ? "" : "s",
           fab_transport_name(lo->transport), dir);
    if (L.cc.zookeeper[0])
        printf("replicas %u, configuration in ZooKeeper %s%s%s%s\n", L.cc.replicas,
               L.cc.zookeeper, lo->zookeeper ? "" : " (started in ", lo->zookeeper ? "" : dir,
               lo->zookeeper ? "" : "/zk; stopped with the cluster)");
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
    launch_zk_stop(dir); /* (the ZooKeeper start made in DIR/zk, if any) */
    printf("stopped %u node%s in %s\n", running, running == 1 ? "" : "s", dir);
    return rc == RDKV_ETIMEDOUT ? 1 : 0;
}

/* The kvserver options kvcluster sets itself, per node or from its own options. */
static const char *const own_opts[] = {"config", "listen-fd", "ready-fd", "data-dir",
                                       "secret-file", "insecure", "help", "version", NULL};
/* kvcluster's own options that take a value (the rest of its own take none) */
static const char *const value_opts[] = {"--nodes", "--dir", "--transport", "--arena", "--host",
                                         "--durability", "--checkpoint-every", "--replicas",
                                         "--zookeeper", "--node", NULL};

/* An option kvcluster does not know, o (v: the argument after it, or NULL): a kvserver option
 * goes to every node (lo->extra, *nx of them so far). Returns how many arguments it took. */
static int pass_through(struct launch_opts *lo, unsigned *nx, const char *o, const char *v)
{
    char name[64];
    const char *eq = strchr(o, '=');
    size_t nl = eq ? (size_t)(eq - o) : strlen(o);
    if (strncmp(o, "--", 2) || nl - 2 >= sizeof name) usage_error("unknown option '%s'", o);
    memcpy(name, o + 2, nl - 2);
    name[nl - 2] = 0;
    int arity = node_opt_arity(name);
    if (arity < 0) usage_error("unknown option '%s' (neither kvcluster's nor kvserver's)", o);
    for (unsigned k = 0; own_opts[k]; k++)
        if (!strcmp(name, own_opts[k]))
            usage_error("kvcluster sets kvserver's '%s' itself (see kvcluster --help)", o);
    if (arity && !eq && !v) usage_error("option '%s' needs a value", o);
    if (!arity && eq) usage_error("option '%s' takes no value", o);
    int took = arity && !eq ? 2 : 1;
    if (*nx + (unsigned)took > LAUNCH_EXTRA_MAX - 1)
        usage_error("too many kvserver options (at most %s arguments)", "23");
    for (int k = 0; k < took; k++) {
        const char *a = k ? v : o;
        if (strchr(a, '\n') || strlen(a) >= 255) usage_error("bad kvserver argument '%s'", a);
        lo->extra[(*nx)++] = a;
    }
    lo->extra[*nx] = NULL;
    return took;
}

/* The kvserver options passed through, checked as kvserver would before any node starts: a bad
 * value is said once, here, not in every node's log. */
static void check_passed(const struct launch_opts *lo)
{
    if (!lo->extra[0]) return;
    char *args[LAUNCH_EXTRA_MAX + 8];
    int n = 0;
    args[n++] = "kvserver";
    args[n++] = "--config";
    args[n++] = "cluster.conf";
    args[n++] = "--node";
    args[n++] = "0";
    if (lo->durable) {
        args[n++] = "--data-dir";
        args[n++] = "node.data";
    }
    for (unsigned k = 0; lo->extra[k]; k++) args[n++] = (char *)lo->extra[k];
    args[n] = NULL;
    struct node_opts no;
    node_opts_init(&no);
    char err[512] = "";
    if (node_opts_parse(n, args, &no, err, sizeof err) == 2) {
        /* (kvcluster's --durable is what gives the nodes a --data-dir) */
        char *dd = strstr(err, "needs --data-dir");
        if (dd) snprintf(dd, sizeof err - (size_t)(dd - err), "needs --durable");
        fprintf(stderr, "kvcluster: kvserver option: %s\nTry 'kvserver --help'.\n", err);
        exit(2);
    }
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
    struct launch_opts lo;
    launch_opts_init(&lo);
    lo.host = "127.0.0.1";
    lo.transport = FAB_SOFT;
    uint64_t u;
    bool init = false;
    long node = -1;
    unsigned nx = 0; /* kvserver arguments passed through, in lo.extra */
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        if (!strcmp(o, "--bench")) {
            lo.bench = true;
            continue;
        }
        if (!strcmp(o, "--durable")) {
            lo.durable = true;
            continue;
        }
        if (!strcmp(o, "--init")) {
            init = true;
            continue;
        }
        bool mine = false;
        for (unsigned k = 0; value_opts[k]; k++) mine |= !strcmp(o, value_opts[k]);
        if (!mine) {
            i += pass_through(&lo, &nx, o, v) - 1;
            continue;
        }
        if (!v) usage_error("option '%s' needs a value", o);
        if (!strcmp(o, "--nodes")) {
            if (parse_uint_range(v, 1, LAUNCH_MAX, &u)) usage_error("--nodes must be 1..64 (got '%s')", v);
            lo.nodes = (unsigned)u;
        } else if (!strcmp(o, "--dir")) {
            lo.dir = v;
        } else if (!strcmp(o, "--transport")) {
            if (fab_transport_parse(v, &lo.transport)) usage_error("--transport must be soft, verbs or auto (got '%s')", v);
            if (lo.transport == FAB_AUTO) lo.transport = fab_verbs_available() ? FAB_VERBS : FAB_SOFT;
        } else if (!strcmp(o, "--arena")) {
            if (parse_size(v, &lo.arena_size) || !lo.arena_size) usage_error("--arena needs a size such as 256M (got '%s')", v);
        } else if (!strcmp(o, "--host")) {
            lo.host = v;
        } else if (!strcmp(o, "--durability")) {
            if (strcmp(v, "group") && strcmp(v, "sync") && strcmp(v, "off"))
                usage_error("--durability must be group, sync or off (got '%s')", v);
            lo.durability = v;
        } else if (!strcmp(o, "--checkpoint-every")) {
            if (parse_size(v, &u)) usage_error("--checkpoint-every needs a size such as 256M, or 0 (got '%s')", v);
            lo.checkpoint_every = v;
        } else if (!strcmp(o, "--replicas")) {
            if (parse_uint_range(v, 1, CLUSTER_MAX_REPLICAS, &u)) usage_error("--replicas must be 1..7 (got '%s')", v);
            lo.replicas = (unsigned)u;
        } else if (!strcmp(o, "--zookeeper")) {
            lo.zookeeper = v;
        } else if (!strcmp(o, "--node")) {
            if (!strcmp(v, "all")) node = LAUNCH_MAX;
            else if (parse_uint_range(v, 0, LAUNCH_MAX - 1, &u))
                usage_error("--node must be 0..63 or all (got '%s')", v);
            else node = (long)u;
        } else {
            usage_error("unknown option '%s'", o);
        }
        i++;
    }
    const char *dir = lo.dir;
    if (!dir) usage_error("%s", "--dir DIR is required");
    if (!strcmp(cmd, "start")) {
        if (!lo.nodes) usage_error("%s", "start needs --nodes N");
        if (lo.durability && !lo.durable) usage_error("%s", "--durability needs --durable");
        if (lo.checkpoint_every && !lo.durable) usage_error("%s", "--checkpoint-every needs --durable");
        if (lo.replicas > lo.nodes) usage_error("%s", "--replicas must be at most --nodes");
        check_passed(&lo);
        return cmd_start(&lo);
    }
    if (nx) usage_error("kvserver options such as '%s' go with start only (restart gives the "
                        "ones the cluster was started with)", lo.extra[0]);
    if (!strcmp(cmd, "restart")) {
        if (node < 0) usage_error("%s", "restart needs --node I");
        return cmd_restart(dir, (unsigned)node, init);
    }
    if (!strcmp(cmd, "status")) return cmd_status(dir);
    if (!strcmp(cmd, "secret")) return cmd_secret(dir);
    if (!strcmp(cmd, "stop")) return cmd_stop(dir);
    usage_error("unknown command '%s' (start, restart, status, stop or secret)", cmd);
}
