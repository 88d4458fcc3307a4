/* kvserver: one rdkv node. It maps and registers the node's arena, serves the fabric (the soft
 * NIC or verbs) and RPCs, answers status, and runs until SIGTERM or SIGINT, then exits cleanly.
 * Bad configs, ports in use and unreachable peers end it with a one-line error and exit 1. */
#include "locks/lock.h"
#include "locks/range/range.h"
#include "server/bench.h"
#include "server/proto.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/parse.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KVSERVER_VERSION "0.1.0"

static const char usage[] =
    "usage: kvserver --config FILE --node N [options]\n"
    "\n"
    "Runs one rdkv node: maps and registers its arena, serves one-sided operations and RPCs,\n"
    "and stops cleanly on SIGTERM or SIGINT.\n"
    "\n"
    "  --config FILE         cluster config: 'node ID HOST:PORT' lines (see docs/fabric.md)\n"
    "  --node N              this node's id in the config\n"
    "  --transport T         soft, verbs or auto (default: the config's, else auto:\n"
    "                        verbs when an RDMA device exists)\n"
    "  --arena SIZE          arena size, e.g. 512M (default: the config's, else 256M)\n"
    "  --rpc-threads N       threads that run RPC handlers (default 2)\n"
    "  --peer-wait SECONDS   at start-up, wait up to this long for every peer to answer, and\n"
    "                        exit with an error if one does not (default 30; 0: do not wait)\n"
    "  --listen-fd FD        serve on this inherited listening socket (used by launchers)\n"
    "  --ready-fd FD         write \"ready\" to FD once serving and all peers answered\n"
    "  --verbs-device NAME   RDMA device (default: the first)\n"
    "  --verbs-cm MODE       auto, rdmacm or oob: how queue pairs are connected (default auto)\n"
    "  --spin-us U           a thread waiting for a completion polls U us before it blocks\n"
    "                        (default 20)\n"
    "  --soft-atomic-pause-us N  testing: each soft NIC atomic pauses N us between load and store\n"
    "  -h, --help            this text\n"
    "  --version             print the version\n"
    "\n"
    "Exit status: 0 after a clean stop, 1 on an error, 2 on bad usage.\n";

static void die_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "kvserver: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'kvserver --help'.\n");
    exit(2);
}

struct server {
    struct fabric *f;
    int64_t start_ns;
};

static void status_handler(struct fab_rpc_req *req, void *arg)
{
    struct server *s = arg;
    struct fabric *f = s->f;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) {
        fab_rpc_reply(req, RDKV_ENOMEM, NULL, 0);
        return;
    }
    const struct cluster_node *me = &fab_cluster(f)->nodes[fab_node_id(f)];
    fprintf(m,
            "{\"node\":%u,\"address\":\"%s:%u\",\"nodes\":%u,\"transport\":\"%s\","
            "\"arena_bytes\":%llu,\"uptime_ns\":%lld,\"cpu_ns\":%lld,\"pid\":%d,"
            "\"version\":\"%s\"}",
            fab_node_id(f), me->host, me->port, fab_num_nodes(f),
            fab_transport_name(fab_transport_of(f)), (unsigned long long)fab_arena_size(f),
            (long long)(clock_now_ns() - s->start_ns), (long long)clock_process_cpu_ns(),
            (int)getpid(), KVSERVER_VERSION);
    fclose(m);
    fab_rpc_reply(req, 0, buf, len);
    free(buf);
}

static bool stop_pending(const sigset_t *set)
{
    struct timespec zero = {0, 0};
    return sigtimedwait(set, NULL, &zero) > 0;
}

/* Every peer must answer an echo within wait_ns; returns 0, or 1 after printing why not. */
static int wait_for_peers(struct fabric *f, int64_t wait_ns, const sigset_t *sigs, bool *stopped)
{
    struct fab_ctx *c;
    if (fab_ctx_create(f, &c)) {
        log_error("cannot create a fabric context");
        return 1;
    }
    int64_t deadline = clock_now_ns() + wait_ns;
    const struct cluster_config *cc = fab_cluster(f);
    struct fab_buf resp = {0};
    int rc = 0;
    for (unsigned n = 0; n < cc->n && rc == 0; n++) {
        if (n == fab_node_id(f)) continue;
        for (;;) {
            int64_t left = deadline - clock_now_ns();
            int r = fab_rpc_call(c, (uint16_t)n, FAB_RPC_ECHO, "hi", 2, &resp,
                                 left > NS_PER_S ? NS_PER_S : (left > 0 ? left : 1));
            if (r == 0) break;
            if (stop_pending(sigs)) {
                *stopped = true;
                rc = 1;
                break;
            }
            if (clock_now_ns() >= deadline) {
                fprintf(stderr,
                        "kvserver: error: peer node %u at %s:%u is unreachable (%s; waited %.0f s)\n",
                        n, cc->nodes[n].host, cc->nodes[n].port, rdkv_strerror(r),
                        (double)wait_ns / 1e9);
                rc = 1;
                break;
            }
            clock_sleep_ns(100 * NS_PER_MS); /* the peer may still be starting */
        }
    }
    fab_buf_free(&resp);
    fab_ctx_destroy(c);
    return rc;
}

int main(int argc, char **argv)
{
    const char *config = NULL, *transport_s = NULL;
    long node = -1;
    struct fab_opts o;
    fab_opts_init(&o);
    int64_t peer_wait = 30 * NS_PER_S;
    int ready_fd = -1;
    uint64_t v;
    enum {
        O_CONFIG = 256, O_NODE, O_TRANSPORT, O_ARENA, O_RPC_THREADS, O_PEER_WAIT, O_LISTEN_FD,
        O_READY_FD, O_VDEV, O_VCM, O_PAUSE, O_SPIN, O_VERSION
    };
    static const struct option longopts[] = {
        {"config", required_argument, 0, O_CONFIG},
        {"node", required_argument, 0, O_NODE},
        {"transport", required_argument, 0, O_TRANSPORT},
        {"arena", required_argument, 0, O_ARENA},
        {"rpc-threads", required_argument, 0, O_RPC_THREADS},
        {"peer-wait", required_argument, 0, O_PEER_WAIT},
        {"listen-fd", required_argument, 0, O_LISTEN_FD},
        {"ready-fd", required_argument, 0, O_READY_FD},
        {"verbs-device", required_argument, 0, O_VDEV},
        {"verbs-cm", required_argument, 0, O_VCM},
        {"soft-atomic-pause-us", required_argument, 0, O_PAUSE},
        {"spin-us", required_argument, 0, O_SPIN},
        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, O_VERSION},
        {0, 0, 0, 0},
    };
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case O_CONFIG: config = optarg; break;
        case O_NODE:
            if (parse_uint_range(optarg, 0, 65534, &v)) die_usage("bad --node '%s'", optarg);
            node = (long)v;
            break;
        case O_TRANSPORT: transport_s = optarg; break;
        case O_ARENA:
            if (parse_size(optarg, &o.arena_size) || !o.arena_size)
                die_usage("bad --arena '%s' (expected a size such as 256M)", optarg);
            break;
        case O_RPC_THREADS:
            if (parse_uint_range(optarg, 1, 64, &v)) die_usage("bad --rpc-threads '%s' (1..64)", optarg);
            o.rpc_threads = (unsigned)v;
            break;
        case O_PEER_WAIT:
            if (parse_duration_ns(optarg, &peer_wait)) die_usage("bad --peer-wait '%s'", optarg);
            break;
        case O_LISTEN_FD:
            if (parse_uint_range(optarg, 0, 65535, &v)) die_usage("bad --listen-fd '%s'", optarg);
            o.listen_fd = (int)v;
            break;
        case O_READY_FD:
            if (parse_uint_range(optarg, 0, 65535, &v)) die_usage("bad --ready-fd '%s'", optarg);
            ready_fd = (int)v;
            break;
        case O_VDEV: o.verbs_device = optarg; break;
        case O_VCM:
            if (!strcmp(optarg, "auto")) o.verbs_cm = FAB_CM_AUTO;
            else if (!strcmp(optarg, "rdmacm")) o.verbs_cm = FAB_CM_RDMACM;
            else if (!strcmp(optarg, "oob")) o.verbs_cm = FAB_CM_OOB;
            else die_usage("bad --verbs-cm '%s' (auto, rdmacm or oob)", optarg);
            break;
        case O_PAUSE:
            if (parse_uint_range(optarg, 0, 10000000, &v)) die_usage("bad --soft-atomic-pause-us '%s'", optarg);
            o.soft_atomic_pause_ns = (int64_t)v * NS_PER_US;
            break;
        case O_SPIN:
            if (parse_uint_range(optarg, 0, 1000000, &v)) die_usage("bad --spin-us '%s'", optarg);
            o.spin_ns = (int64_t)v * NS_PER_US;
            break;
        case 'h': fputs(usage, stdout); return 0;
        case O_VERSION: printf("kvserver %s\n", KVSERVER_VERSION); return 0;
        default: die_usage("unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) die_usage("unexpected argument '%s'", argv[optind]);
    enum fab_transport t = FAB_AUTO;
    if (transport_s && fab_transport_parse(transport_s, &t))
        die_usage("bad --transport '%s' (soft, verbs or auto)", transport_s);
    if (!config) die_usage("%s", "--config FILE is required");
    if (node < 0) die_usage("%s", "--node N is required");
    if (o.listen_fd >= 0 && fcntl(o.listen_fd, F_GETFD) < 0)
        die_usage("%s", "--listen-fd does not name an open descriptor");
    if (ready_fd >= 0 && fcntl(ready_fd, F_GETFD) < 0)
        die_usage("%s", "--ready-fd does not name an open descriptor");

    char tag[32];
    snprintf(tag, sizeof tag, "kvserver[%ld]", node);
    log_set_tag(tag);
    signal(SIGPIPE, SIG_IGN);

    struct cluster_config cc;
    char err[512];
    if (cluster_config_load(config, &cc, err, sizeof err)) {
        fprintf(stderr, "kvserver: error: %s\n", err);
        return 1;
    }
    if ((unsigned long)node >= cc.n) {
        fprintf(stderr, "kvserver: error: node %ld is not in %s (it lists nodes 0..%u)\n", node,
                config, cc.n - 1);
        cluster_config_free(&cc);
        return 1;
    }
    /* The command line wins over the config (whose value the parser already checked). */
    if (!transport_s && cc.transport[0]) fab_transport_parse(cc.transport, &t);
    o.cluster = &cc;
    o.node = (uint16_t)node;
    o.transport = t;
    if (o.listen_fd >= 0) fcntl(o.listen_fd, F_SETFD, FD_CLOEXEC);

    /* Signals are taken synchronously by the main thread; every other thread has them blocked. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    struct server srv = {.start_ns = clock_now_ns()};
    if (fab_open(&o, &srv.f, err, sizeof err)) {
        fprintf(stderr, "kvserver: error: %s\n", err);
        cluster_config_free(&cc);
        return 1;
    }
    fab_rpc_register(srv.f, KV_RPC_STATUS, status_handler, &srv, FAB_RPC_INLINE);
    struct range_server *ranges = NULL; /* range locks: the combiner, itree, client-side spaces */
    if (range_server_start(srv.f, 0, &ranges)) {
        fprintf(stderr, "kvserver: error: cannot start the range-lock service\n");
        fab_close(srv.f);
        cluster_config_free(&cc);
        return 1;
    }
    bench_register(srv.f, ranges);
    struct trad_mgr *trad = lock_trad_serve(srv.f, 0); /* the RPC lock manager baseline */
    bool stopped = false;
    int rc = 0;
    if (peer_wait > 0) rc = wait_for_peers(srv.f, peer_wait, &sigs, &stopped);
    if (rc == 0) {
        const struct cluster_node *me = &cc.nodes[node];
        fprintf(stderr, "kvserver: node %ld of %u serving at %s:%u (transport %s, arena %llu MiB)\n",
                node, cc.n, me->host, me->port, fab_transport_name(fab_transport_of(srv.f)),
                (unsigned long long)(fab_arena_size(srv.f) >> 20));
        if (ready_fd >= 0) {
            ssize_t w = write(ready_fd, "ready\n", 6);
            (void)w;
            close(ready_fd);
        }
        int sig = 0;
        while (sigwait(&sigs, &sig) != 0) {}
        fprintf(stderr, "kvserver: node %ld stopping (%s)\n", node, strsignal(sig));
    } else if (stopped) {
        rc = 0;
    }
    if (!bench_shutdown(10 * NS_PER_S)) {
        /* a benchmark's threads still use the fabric (a peer died under them): leave it to
         * the kernel rather than free memory they are using */
        fprintf(stderr, "kvserver: node %ld: a benchmark did not stop; exiting without cleanup\n",
                node);
        fflush(NULL);
        _exit(rc);
    }
    lock_trad_stop(trad);
    range_server_stop(ranges);
    fab_close(srv.f);
    lock_trad_free(trad);
    range_server_free(ranges);
    cluster_config_free(&cc);
    return rc;
}
