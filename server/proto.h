/* The payloads of the node's RPCs: KV_RPC_SESSION, the remote-session protocol of rdkv.h (its
 * number, like every RPC type's, is in rdma/rpc_types.h). */
#ifndef RDKV_SERVER_PROTO_H
#define RDKV_SERVER_PROTO_H

#include "common/pack.h"
#include "rdma/fabric.h"

#include <string.h>

/* KV_RPC_SESSION request: the session id, SES_ID_LEN bytes (zeros with SES_OPEN), u8 op (an enum ses_op, or'd with
 * flags below), then the op's fields. Every answer (RPC status 0) is u32 status, then, when it is
 * 0, the op's bytes listed below. A session's requests run in order, one at a time, in a task of
 * one of the node's session threads; the node closes a session idle for its --session-idle
 * (later requests get RDKV_ESESSION). A session id is 128 random bits, and the session belongs to
 * the connection that opened it: a request naming it on another connection is answered
 * RDKV_ESESSION as if the id were unknown, and the session ends (its transaction aborted) when
 * its connection closes. One connection holds at most --sessions-per-conn sessions (RDKV_EBUSY
 * beyond). Strings are u32 length + bytes.
 *   SES_OPEN       u64 lock timeout (ns, 0: the node's),
 *                  u8 conflict policy (SES_CONFLICT_NODE: the node's)
 *                      -> session id (SES_ID_LEN bytes), u16 this node's id, u16 nodes n, then n times
 *                         {u16 length + host, u16 port} (the cluster config's nodes, by id)
 *   SES_CLOSE                                                    -> (empty)
 *   SES_BEGIN                                                    -> (empty)
 *   SES_GET        u8 for_update, str key                        -> str value (RDKV_ENOTFOUND)
 *   SES_PUT        str key, str value                            -> (empty)
 *   SES_DEL        str key                                       -> (empty) (RDKV_ENOTFOUND)
 *   SES_PATCH      u8 want_old, str key, u32 offset, str bytes   -> str old value if want_old
 *                  (txn_patch: RDKV_ENOTFOUND, RDKV_EINVAL past the value's end)
 *   SES_SCAN       str begin, u8 has_end, str end, u64 limit     -> a batch
 *   SES_SCAN_NEXT                                                -> the next batch
 *   SES_COMMIT / SES_ABORT                                       -> (empty)
 *   SES_STATUS                                                   -> JSON text: every node's status
 *   SES_MULTI      u16 n (1 .. SES_MULTI_MAX), then n items, each a u8 op (SES_GET, SES_PUT,
 *                  SES_DEL or SES_PATCH, no flags) and that op's fields as above
 *                      -> u16 n, then n times {i32 status (0 or RDKV_ENOTFOUND), and when it is
 *                         0 the item's bytes: GET's str value, PATCH's str old value if
 *                         want_old}
 *                  The items run in order in one transaction, as n requests would, and the
 *                  first whose status is neither 0 nor RDKV_ENOTFOUND ends the run: its status
 *                  is the answer's (then without bytes). A malformed request runs nothing.
 *                  A client sends the writes it deferred (puts of rows its transaction already
 *                  holds exclusively) ahead of its next operation this way, and several reads
 *                  at once (rdkv_txn_get_many).
 * A batch: u8 more, u32 n, then n times {str key, str value}.
 * Flags on SES_GET, SES_PUT, SES_DEL, SES_PATCH, SES_MULTI, SES_SCAN (and SES_F_RETRY on
 * SES_BEGIN):
 *   SES_F_BEGIN    begin a transaction first (aborting one left open): an interactive
 *                  transaction's first operation carries its BEGIN
 *   SES_F_COMMIT   commit after the operation: with SES_F_BEGIN, a one-shot operation (one
 *                  serializable transaction in one request). GET and DEL commit on
 *                  RDKV_ENOTFOUND too (and answer it); a failed operation aborts (a
 *                  SES_MULTI commits when every item ran). A one-shot scan commits once its
 *                  last batch is sent (SES_SCAN_NEXT); SES_ABORT ends it early.
 *   SES_F_RETRY    with SES_F_BEGIN: this transaction retries the session's last one and keeps
 *                  its start timestamp (the wait-die order) */
enum ses_op {
    SES_OPEN = 1, SES_CLOSE = 2, SES_BEGIN = 3, SES_GET = 4, SES_PUT = 5, SES_DEL = 6,
    SES_SCAN = 7, SES_SCAN_NEXT = 8, SES_COMMIT = 9, SES_ABORT = 10, SES_STATUS = 11,
    SES_PATCH = 12, SES_MULTI = 13,
};
#define SES_MULTI_MAX 1024u
/* The operations on one key, which take the SES_F_BEGIN and SES_F_COMMIT flags. */
static inline int ses_op_is_key(uint8_t op)
{
    return op == SES_GET || op == SES_PUT || op == SES_DEL || op == SES_PATCH;
}
#define SES_OP_MASK 0x1fu
#define SES_F_RETRY 0x20u
#define SES_F_BEGIN 0x40u
#define SES_F_COMMIT 0x80u
#define SES_CONFLICT_NODE 0xffu
/* A session id: 128 random bits (all zeros: none). */
#define SES_ID_LEN 16u
struct ses_id {
    uint8_t b[SES_ID_LEN];
};
/* A raw SES_OPEN request (node's lock timeout and conflict policy) into out; its length. For
 * tools and tests that open sessions without librdkv. */
#define SES_OPEN_LEN (SES_ID_LEN + 10u)
static inline size_t ses_open_request(uint8_t out[SES_OPEN_LEN])
{
    memset(out, 0, SES_OPEN_LEN);
    out[SES_ID_LEN] = SES_OPEN;
    out[SES_OPEN_LEN - 1] = SES_CONFLICT_NODE;
    return SES_OPEN_LEN;
}
/* The session id in an answer to SES_OPEN (u32 status first): 0, or the status (RDKV_EPROTO
 * when it is too short). */
static inline int ses_open_answer(const uint8_t *p, size_t len, struct ses_id *sid)
{
    if (len < 4) return RDKV_EPROTO;
    int32_t st = (int32_t)pack_get_u32le(p);
    if (st) return st;
    if (len < 4 + SES_ID_LEN + 4) return RDKV_EPROTO; /* the id, the node's id, the count */
    memcpy(sid->b, p + 4, SES_ID_LEN);
    return 0;
}
#define SES_BATCH_ROWS 256u
#define SES_BATCH_BYTES (1u << 20)

#endif
