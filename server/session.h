/* Remote sessions: clients of rdkv.h connected over TCP send their transactions' operations as
 * KV_RPC_SESSION requests (server/proto.h). A node runs its sessions as tasks on a few session
 * threads (no thread per session): a session with a request to run or a transaction open has a
 * task, which coordinates the transaction on a worker borrowed from its thread, so a session
 * waiting for a lock never holds up another; an idle session is a small record only. Sessions
 * are bounded by --max-sessions, and per connection by --sessions-per-conn (RDKV_EBUSY beyond
 * them); idle ones are closed (an open transaction is aborted after half a lease idle). A session
 * id is 128 random bits and belongs to the connection that opened it; the session ends when that
 * connection closes. */
#ifndef RDKV_SERVER_SESSION_H
#define RDKV_SERVER_SESSION_H

#include <stdint.h>

struct fabric;
struct fab_ctx;
struct txn_env;
struct session_svc;

#define SESSION_MAX_DEFAULT 16384u
#define SESSION_MAX_LIMIT 1000000u
#define SESSION_PER_CONN_DEFAULT 1024u

struct session_cfg {
    unsigned max_sessions; /* 0: SESSION_MAX_DEFAULT */
    unsigned per_conn;     /* sessions one connection may hold; 0: SESSION_PER_CONN_DEFAULT */
    int64_t idle_ns;       /* 0: 60 s */
    unsigned threads;      /* session threads; 0: 2 */
};

/* What the sessions run on, given by the node that starts them. */
struct session_host {
    struct fabric *f;    /* the node's fabric */
    struct txn_env *txn; /* its transaction layer */
    uint16_t me;         /* its node id */
    /* The cluster's status as JSON (malloc'd; NULL when it cannot be made), asked with c, a
     * session thread's fabric context: what a session's STATUS operation answers. */
    char *(*status_json)(void *arg, struct fab_ctx *c);
    void *arg;
};

int session_svc_start(const struct session_host *host, const struct session_cfg *cfg,
                      struct session_svc **out);
/* Closes every session (aborting their transactions) and waits for the session threads. */
void session_svc_stop(struct session_svc *s);
void session_svc_free(struct session_svc *s);
unsigned session_count(struct session_svc *s);

#endif
