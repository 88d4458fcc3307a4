/* The kvserver daemon: one node in its own process, from kvserver's command line to a clean stop
 * on SIGTERM or SIGINT. A program's main hands it the services the node runs when started with
 * --bench (kvserver's are kvbench's, tools/kvserver.c); the daemon knows them only by this
 * interface, so the server library carries no benchmark code. */
#ifndef RDKV_SERVER_DAEMON_H
#define RDKV_SERVER_DAEMON_H

#include "server/node.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct daemon_services {
    const char *name; /* for messages: "kvbench's services" */
    /* Registers the services on node n: after the node started, before it waits for its peers
     * and says it is ready. 0, or a status with a one-line reason in err. */
    int (*start)(struct node *n, char *err, size_t errcap);
    /* Before the node stops: ends what runs and waits up to wait_ns for it. false if something
     * still runs on the node's fabric: the daemon then exits without freeing the node. */
    bool (*stop)(int64_t wait_ns);
};

/* kvserver's main: parses argv, runs the node until a signal, and returns the exit status (0
 * after a clean stop, 1 on an error, 2 on bad usage). bench may be NULL: --bench is then refused
 * as bad usage. */
int daemon_run(int argc, char **argv, const struct daemon_services *bench);

#endif
