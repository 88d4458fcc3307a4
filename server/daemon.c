/* The kvserver daemon (server/daemon.h): one rdkv node in its own process. It maps and
 * registers the node's arena, serves its partition, the fabric (the soft NIC or verbs),
 * transactions' RPCs, remote sessions and status, watches its peers, and runs until SIGTERM or
 * SIGINT, then exits cleanly. Bad configs, ports in use and unreachable peers end it with a
 * one-line error and exit 1. */
#include "server/daemon.h"
#include "server/opts.h"
#include "storage/wal.h"

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

/* Stops the extra services, then the node. */
static void stop_all(struct node *n, const struct daemon_services *svc, bool started)
{
    if (started && svc->stop && !svc->stop(10 * NS_PER_S)) {
        /* a service's threads still use the fabric (a peer died under them): leave it to the
         * kernel rather than free memory they are using */
        log_error("%s did not stop; exiting without cleanup", svc->name);
        fflush(NULL);
        _exit(0);
    }
    node_stop(n);
}

int daemon_run(int argc, char **argv, const struct daemon_services *bench)
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

    if (o.bench && !bench) {
        fprintf(stderr, "kvserver: --bench: this program was built without kvbench's services\n");
        return 2;
    }
    struct node *n;
    if (node_start(&o, &n, err, sizeof err)) {
        fprintf(stderr, "kvserver: error: %s\n", err);
        return 1;
    }
    int rc = 0;
    /* kvbench's services (its lock, range and txn benchmarks, the embedded YCSB and TPC-C
     * workers) on a node started for benchmarks only; any other node refuses the whole
     * benchmark block of RPC types */
    if (o.bench && bench->start(n, err, sizeof err)) {
        fprintf(stderr, "kvserver: error: cannot start %s: %s\n", bench->name, err);
        stop_all(n, bench, true);
        return 1;
    }
    if (o.peer_wait_ns > 0) {
        int w = node_wait_peers(n, o.peer_wait_ns, stop_pending, NULL, err, sizeof err);
        if (w == RDKV_ESHUTDOWN) {
            stop_all(n, bench, o.bench);
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
        char repl[512];
        node_describe_replication(n, repl, sizeof repl);
        fprintf(stderr,
                "kvserver: node %ld of %u serving at %s:%u (transport %s, arena %llu MiB, row "
                "lock %s, conflicts %s, range lock %s, %s%s%s; %s)\n",
                o.node, cc->n, me->host, me->port,
                fab_transport_name(fab_transport_of(node_fabric(n))),
                (unsigned long long)(fab_arena_size(node_fabric(n)) >> 20), o.txn.row_lock,
                txn_conflict_name(o.txn.conflict), o.txn.range_lock,
                o.data_dir ? "durable: redo log in " : "in memory: nothing survives a restart",
                o.data_dir ? o.data_dir : "",
                !o.data_dir ? ""
                : o.durability == WAL_DUR_OFF ? ", durability off"
                : o.durability == WAL_DUR_SYNC ? ", durability sync" : ", durability group",
                repl);
        if (node_metrics_address(n))
            fprintf(stderr, "kvserver: node %ld metrics at http://%s/metrics\n", o.node,
                    node_metrics_address(n));
        if (o.ready_fd >= 0) {
            ssize_t wr = write(o.ready_fd, "ready\n", 6);
            (void)wr;
            close(o.ready_fd);
        }
        int sig = 0;
        while (sigwait(&sigs, &sig) != 0) {}
        fprintf(stderr, "kvserver: node %ld stopping (%s)\n", o.node, strsignal(sig));
    }
    stop_all(n, bench, o.bench);
    return rc;
}
