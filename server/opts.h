/* kvserver's command line: the options of one node (struct node_opts, server/node.h), parsed
 * the same way by the daemon (kvserver), an embedded node (rdkv_node_start's arguments) and
 * kvcluster, which passes kvserver's options through to its nodes. */
#ifndef RDKV_SERVER_OPTS_H
#define RDKV_SERVER_OPTS_H

#include "server/node.h"

#include <stddef.h>

void node_opts_init(struct node_opts *o);
/* The option text of kvserver --help. */
extern const char node_usage[];
/* Parses kvserver-style arguments (argv[0] is skipped). 0: parsed; 1: --help or --version was
 * asked for (the text is in err); 2: bad usage (the reason is in err). */
int node_opts_parse(int argc, char **argv, struct node_opts *o, char *err, size_t errcap);
/* Whether kvserver's option --name takes a value (1) or not (0); -1 when it has none such
 * (kvcluster passes kvserver's options through). */
int node_opt_arity(const char *name);

#endif
