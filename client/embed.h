/* librdkv's embedded handle for a node that something else started (kvserver runs kvbench's
 * embedded workloads through it). Not part of the public API: programs and tests of this build
 * link librdkv's objects directly; librdkv.so and librdkv.a do not export these (hidden). */
#ifndef RDKV_CLIENT_EMBED_H
#define RDKV_CLIENT_EMBED_H

#include "rdkv.h"

#include <stdint.h>

#define RDKV_INTERNAL __attribute__((visibility("hidden")))

struct node;
/* An rdkv_node for sessions in node n, which the caller keeps running (rdkv_node_stop must not
 * be called on it; free() it after n stops). NULL when out of memory. */
RDKV_INTERNAL rdkv_node *rdkv_node_adopt(struct node *n);
/* The node inside an rdkv_node (tests reach the node's fabric and transaction layer so). */
RDKV_INTERNAL struct node *rdkv_node_server(rdkv_node *n);
/* The fabric counters of the context a session waits on: its own (a session of a thread, or a
 * remote session) or, for a session in a task, the context the thread's tasks share (kvbench
 * reads a task's own with fab_task_counters instead). */
struct fab_counters;
RDKV_INTERNAL const struct fab_counters *rdkv_session_fab_counters(rdkv_session *s);

/* Sessions opened and closed by hand over a fabric context (kvbench sessions and the sessions
 * test open thousands over one connection): SES_OPEN at node with the node's defaults (the id
 * into *sid), and SES_CLOSE. 0, the node's status, or the transport's. */
struct fab_ctx;
struct fab_buf;
struct ses_id; /* server/proto.h */
int ses_raw_open(struct fab_ctx *c, uint16_t node, struct fab_buf *resp, struct ses_id *sid);
int ses_raw_close(struct fab_ctx *c, uint16_t node, struct fab_buf *resp,
                  const struct ses_id *sid);

#endif
