/* kvserver: one rdkv node. It maps and registers the node's arena, serves its partition, the
 * fabric (the soft NIC or verbs), transactions' RPCs, remote sessions and status, watches its
 * peers, and runs until SIGTERM or SIGINT, then exits cleanly. Bad configs, ports in use and
 * unreachable peers end it with a one-line error and exit 1. */
#include "server/node.h"
#include "storage/wal.h"
#include "tools/kvbench/runner.h"

#include "common/clock.h"
#include "common/log.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage_head[] =
    "usage: kvserver --config FILE --node N [options]\n"
    "\n"
    "Runs one rdkv node: holds its partition of the keys in its registered arena, serves\n"
    "one-sided operations, transactions and remote sessions (kvctl, rdkv_connect), and stops\n"
    "cleanly on SIGTERM or SIGINT.\n"
    "\n";
static const char usage_tail[] = "\nExit status: 0 after a clean stop, 1 on an error, 2 on bad usage.\n";

static sigset_t sigs;

static bool stop_pending(void *arg)
{
    (void)arg;
    struct timespec zero = {0, 0};
    return sigtimedwait(&sigs, NULL, &zero) > 0;
}

int main(int argc, char **argv)
{
    struct node_opts o;
    node_opts_init(&o);
    char err[512];
    int pr = node_opts_parse(argc, argv, &o, err, sizeof err);
    if (pr == 1) {
        if (!strcmp(err, "version")) printf("kvserver %s\n", NODE_VERSION);
        else printf("%s%s%s", usage_head, node_usage, usage_tail);
        return 0;
    }
    if (pr) {
        fprintf(stderr, "kvserver: %s\nTry 'kvserver --help'.\n", err);
        return 2;
    }
    char tag[32];
    snprintf(tag, sizeof tag, "kvserver[%ld]", o.node);
    log_set_tag(tag);
    signal(SIGPIPE, SIG_IGN);

    /* Signals are taken synchronously by the main thread; every other thread has them blocked. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    struct node *n;
    if (node_start(&o, &n, err, sizeof err)) {
        fprintf(stderr, "kvserver: error: %s\n", err);
        return 1;
    }
    int rc = 0;
    /* kvbench's drivers (YCSB, TPC-C) run their embedded workers here, on a node started for
     * benchmarks only (any other node refuses the whole benchmark block of RPC types) */
    if (o.bench && wl_serve(n)) {
        fprintf(stderr, "kvserver: error: cannot start the workload service\n");
        node_stop(n);
        return 1;
    }
    if (o.peer_wait_ns > 0) {
        int w = node_wait_peers(n, o.peer_wait_ns, stop_pending, NULL, err, sizeof err);
        if (w == RDKV_ESHUTDOWN) {
            wl_serve_stop();
            node_stop(n);
            return 0;
        }
        if (w) {
            fprintf(stderr, "kvserver: error: %s\n", err);
            rc = 1;
        }
    }
    if (rc == 0) {
        const struct cluster_config *cc = fab_cluster(node_fabric(n));
        const struct cluster_node *me = &cc->nodes[o.node];
        fprintf(stderr,
                "kvserver: node %ld of %u serving at %s:%u (transport %s, arena %llu MiB, row "
                "lock %s, range lock %s, %s%s%s)\n",
                o.node, cc->n, me->host, me->port,
                fab_transport_name(fab_transport_of(node_fabric(n))),
                (unsigned long long)(fab_arena_size(node_fabric(n)) >> 20), o.txn.row_lock,
                o.txn.range_lock,
                o.data_dir ? "durable: redo log in " : "in memory: nothing survives a restart",
                o.data_dir ? o.data_dir : "",
                !o.data_dir ? ""
                : o.durability == WAL_DUR_OFF ? ", durability off"
                : o.durability == WAL_DUR_SYNC ? ", durability sync" : ", durability group");
        if (o.ready_fd >= 0) {
            ssize_t wr = write(o.ready_fd, "ready\n", 6);
            (void)wr;
            close(o.ready_fd);
        }
        int sig = 0;
        while (sigwait(&sigs, &sig) != 0) {}
        fprintf(stderr, "kvserver: node %ld stopping (%s)\n", o.node, strsignal(sig));
    }
    wl_serve_stop();
    node_stop(n);
    return rc;
}
