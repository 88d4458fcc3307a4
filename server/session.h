/* Remote sessions: clients of rdkv.h connected over TCP send their transactions' operations as
 * KV_RPC_SESSION requests (server/proto.h); each session gets a thread of its own in the node,
 * which runs the transaction as its coordinator (the thread's own fabric context and locks), so
 * a session waiting for a lock never holds up another. Idle sessions are closed (their open
 * transaction aborted). */
#ifndef RDKV_SERVER_SESSION_H
#define RDKV_SERVER_SESSION_H

#include <stdint.h>

struct node;
struct session_svc;

int session_svc_start(struct node *n, unsigned max_sessions, int64_t idle_ns,
                      struct session_svc **out);
/* Closes every session (aborting their transactions) and waits for their threads. */
void session_svc_stop(struct session_svc *s);
void session_svc_free(struct session_svc *s);
unsigned session_count(struct session_svc *s);

#endif
