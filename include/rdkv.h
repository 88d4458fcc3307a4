/* rdkv: the public C API of the rdkv transactional key-value store. Sessions run serializable
 * transactions (strict two-phase locking, two-phase commit across partitions) either embedded
 * (the calling thread runs inside a node process and reaches its own partition directly) or
 * remote (over TCP to any node, which coordinates the transaction). Every call returns 0 or a
 * negative rdkv_status (rdkv_status.h); rdkv_strerror() names it.
 *
 * Thread-safety: an rdkv_node may be shared by all threads. A session (rdkv_session) and the
 * transactions, iterators and bytes it hands out belong to one thread at a time: open one session
 * per thread -- or one per task, to keep many transactions in flight on one thread
 * (rdkv_run_tasks, below). A session runs one transaction at a time.
 *
 * Ownership: bytes returned by rdkv_txn_get and rdkv_iter_next belong to the transaction; they
 * stay valid until the next call on that transaction (or iterator) or its end, whichever comes
 * first. Bytes returned by rdkv_get belong to the session until its next call. Copy them to keep
 * them. Keys and values passed in are copied before the call returns.
 *
 * Retrying: a status for which rdkv_status_retryable() is true (RDKV_EABORTED: a conflict or a
 * lock wait that ran out; RDKV_EBUSY) means the transaction did nothing and may be run again.
 * rdkv_txn_on_error() follows FoundationDB's idiom: it backs off, resets the transaction and
 * returns 0 when the caller should run its code again, or returns the status when it should
 * not. RDKV_EUNKNOWN from commit means the commit may or may not have taken effect.
 *
 * Limits: a transaction runs at most the node's --txn-max-ops operations (default 10,000)
 * carrying at most --txn-max-bytes of keys and values (default 64 MiB). The operation that
 * crosses either answers RDKV_ETOOBIG (not retryable): the transaction has failed and holds no
 * lock any more; its commit answers RDKV_ETOOBIG too. A remote session belongs to its
 * connection: it ends (its transaction aborted) when the connection closes, and a node answers
 * RDKV_ESESSION for a session of another connection. */
#ifndef RDKV_H
#define RDKV_H

#include "rdkv_status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RDKV_VERSION "0.1.0"

typedef struct rdkv_node rdkv_node;
typedef struct rdkv_session rdkv_session;
typedef struct rdkv_txn rdkv_txn;
typedef struct rdkv_iter rdkv_iter;

/* ---------------------------------------------------------------------------------------------
 * Options. Initialise with rdkv_options_init() and change what you need; 0 fields mean the
 * default. */

/* How a transaction meets a lock another transaction holds (docs/transactions.md, "Conflicts").
 * Every policy keeps the lock timeout as its backstop. */
typedef enum rdkv_conflict {
    RDKV_CONFLICT_NODE = 0,     /* the coordinating node's --conflict */
    RDKV_CONFLICT_TIMEOUT = 1,  /* wait until the lock timeout, then abort */
    RDKV_CONFLICT_WAIT_DIE = 2, /* an older transaction waits, a younger one aborts at once; a
                                   retry keeps its first start time, so it cannot starve */
    RDKV_CONFLICT_NO_WAIT = 3,  /* abort at once whenever a lock is not free */
} rdkv_conflict;

typedef struct rdkv_options {
    int64_t connect_timeout_ms; /* remote: connecting to an endpoint (default 2000) */
    int64_t op_timeout_ms;      /* remote: one request to the coordinator (default 10000) */
    int64_t lock_timeout_ms;    /* the longest one lock wait may take before the transaction
                                   aborts with RDKV_EABORTED (default: the node's, 100) */
    unsigned max_retries;       /* rdkv_txn_on_error / rdkv_run_txn: retries before giving up
                                   with the last status (default 10) */
    bool read_only;             /* transactions of this session only read (no 2PC ever) */
    rdkv_conflict conflict;     /* default RDKV_CONFLICT_NODE */
    const char *secret_file;    /* remote: the cluster's client secret file (mode 600), proven
                                   to each node at connection set-up (docs/security.md); NULL:
                                   $RDKV_SECRET_FILE. Without one a node refuses the connection
                                   (RDKV_EUNAVAILABLE after a logged "not permitted"), unless
                                   it runs --insecure */
} rdkv_options;

void rdkv_options_init(rdkv_options *o);
/* Reads a secret file as rdkv_connect would (path NULL: $RDKV_SECRET_FILE; none at all is fine):
 * 0, or RDKV_ECONFIG with a one-line reason in err -- unreadable, malformed, or open to group or
 * others (the fix is chmod 600). */
int rdkv_secret_file_check(const char *path, char *err, size_t errcap);

/* ---------------------------------------------------------------------------------------------
 * Nodes inside this process (embedded mode). rdkv_node_start runs node `node_id` of the cluster
 * described by the config file (the same file kvserver --config reads) in this process: it maps
 * and registers the node's arena, serves its partition and its peers, and waits up to
 * peer_wait_ms for every peer to answer (0: do not wait). argv-style extra options are those of
 * kvserver (NULL-terminated, may be NULL), e.g. {"--row-lock", "dslr", NULL}. On failure a
 * one-line reason is written to err. A node with --data-dir whose redo log fails to write or
 * sync a record a commit depends on stops the whole process with exit status 74 (a PANIC line
 * on stderr), as kvserver does: a restart recovers from the log (docs/storage.md). */
int rdkv_node_start(const char *config_path, unsigned node_id, const char *const *extra_args,
                    int64_t peer_wait_ms, rdkv_node **out, char *err, size_t errcap);
/* Stops the node: no session of it may be open. */
void rdkv_node_stop(rdkv_node *n);
unsigned rdkv_node_id(const rdkv_node *n);

/* ---------------------------------------------------------------------------------------------
 * Sessions. */

/* Remote: connects to the first reachable of the comma-separated host:port endpoints; that node
 * coordinates this session's transactions. RDKV_EUNAVAILABLE when none answers; RDKV_ENOHOST
 * when no endpoint's host name resolves (a typo, or a name this machine's resolver does not
 * know); RDKV_EINVAL when endpoints is not host:port[,host:port...]. */
int rdkv_connect(const char *endpoints, const rdkv_options *o, rdkv_session **out);
/* Embedded: a session run by the calling thread inside node n (it takes and releases the rows'
 * locks itself, reading its own partition with plain loads and others with one-sided READs). */
int rdkv_session_open(rdkv_node *n, const rdkv_options *o, rdkv_session **out);
/* Aborts an open transaction, if any, and closes the session. */
void rdkv_session_close(rdkv_session *s);

/* ---------------------------------------------------------------------------------------------
 * One-shot operations: each is one serializable transaction, and on a remote session one
 * request to the node. A retryable status is retried as rdkv_run_txn does (up to max_retries,
 * with back-off). RDKV_EBUSY while the session has a transaction of rdkv_txn_begin in use. */

/* Reads key: 0 and its value, or RDKV_ENOTFOUND. The value is the session's until its next
 * call. */
int rdkv_get(rdkv_session *s, const void *key, size_t klen, const void **val, size_t *vlen);
/* Writes key (insert or overwrite). RDKV_EUNKNOWN: the answer was lost, it may have happened. */
int rdkv_put(rdkv_session *s, const void *key, size_t klen, const void *val, size_t vlen);
/* Deletes key; RDKV_ENOTFOUND (and nothing changes) when it is absent. */
int rdkv_delete(rdkv_session *s, const void *key, size_t klen);
/* A read-modify-write in one request, like Redis's SETRANGE (and GETRANGE before it): writes
 * len bytes at offset off of key's value, which grows when off + len passes its end, and, when
 * old is not NULL, returns the value as it was before (the session's until its next call).
 * RDKV_ENOTFOUND when key is absent, RDKV_EINVAL when off passes the end of its value (nothing
 * changes either way), RDKV_ETOOBIG past the value limit. */
int rdkv_patch(rdkv_session *s, const void *key, size_t klen, size_t off, const void *bytes,
               size_t len, const void **old, size_t *oldlen);
/* Scans [begin, end) as rdkv_txn_scan does, in a transaction of its own that commits when the
 * iterator reaches the end (rdkv_iter_next returns 0, or the commit's status); rdkv_iter_close
 * before the end aborts it. Its first rows (up to 256, or 1 MiB) are read within the call, and
 * retried like the other one-shot operations; a failure after them is reported by
 * rdkv_iter_next, and running the scan again is a new transaction (under wait-die, with a new
 * start time: a long scan that must not starve belongs in rdkv_run_txn). The iterator is the
 * session's. */
int rdkv_scan(rdkv_session *s, const void *begin, size_t blen, const void *end, size_t elen,
              size_t limit, rdkv_iter **out);

/* ---------------------------------------------------------------------------------------------
 * Transactions. A remote transaction's BEGIN goes with its first operation: n operations and
 * the commit cost n + 1 requests. */

/* Begins a transaction (one at a time per session: RDKV_EBUSY if one is open). Sends nothing
 * by itself on a remote session. */
int rdkv_txn_begin(rdkv_session *s, rdkv_txn **out);
/* Reads key under a shared lock held until the end. RDKV_ENOTFOUND when absent (the absence is
 * locked too: no other transaction can insert the key before this one ends). */
int rdkv_txn_get(rdkv_txn *t, const void *key, size_t klen, const void **val, size_t *vlen);
/* The same under an exclusive lock, for a row this transaction will write. */
int rdkv_txn_get_for_update(rdkv_txn *t, const void *key, size_t klen, const void **val,
                            size_t *vlen);
/* Reads n keys (at most RDKV_GET_MANY_MAX) as n calls of rdkv_txn_get (for_update:
 * rdkv_txn_get_for_update) in this order would, locking them in this order -- so that
 * transactions reading the same keys never wait on each other in a cycle, pass them sorted --
 * but on a remote session in one request. For each key: status[i] is 0 with its value in vals[i],
 * vlens[i], or RDKV_ENOTFOUND. The values belong to the transaction as rdkv_txn_get's do. Returns
 * 0, or the status of the first key that could not be read (the transaction has then failed:
 * abort it or pass the status to rdkv_txn_on_error). */
#define RDKV_GET_MANY_MAX 1000u
int rdkv_txn_get_many(rdkv_txn *t, size_t n, const void *const *keys, const size_t *klens,
                      bool for_update, const void **vals, size_t *vlens, int *status);
/* Writes key (insert or overwrite); buffered until commit, seen by this transaction's reads.
 * On a remote session, a put of a key this transaction already holds for update (read with
 * rdkv_txn_get_for_update, or written) sends nothing: it goes with the transaction's next
 * request (its commit, for the usual read-for-update, write, commit), and what could still go
 * wrong with it -- RDKV_ETOOBIG past the transaction's size limit, RDKV_ENOMEM on the node -- is
 * answered by that next call. */
int rdkv_txn_put(rdkv_txn *t, const void *key, size_t klen, const void *val, size_t vlen);
/* Deletes key; RDKV_ENOTFOUND (and nothing changes) when it is absent. */
int rdkv_txn_delete(rdkv_txn *t, const void *key, size_t klen);
/* Scans keys in [begin, end) in key order (bytewise; end == NULL: to the end), at most limit
 * rows (0: all), under shared range locks on every partition: a repeated scan in the same
 * transaction sees the same rows (no phantoms). The transaction's own writes are included. */
int rdkv_txn_scan(rdkv_txn *t, const void *begin, size_t blen, const void *end, size_t elen,
                  size_t limit, rdkv_iter **out);
/* The next row: 1 and the row, 0 at the end, or a negative status (the transaction should then
 * be aborted). */
int rdkv_iter_next(rdkv_iter *it, const void **key, size_t *klen, const void **val,
                   size_t *vlen);
void rdkv_iter_close(rdkv_iter *it);

/* Commits: 0, RDKV_EABORTED (nothing happened; retryable), RDKV_EUNKNOWN (a participant did not
 * answer after the decision: the outcome is unknown), or another status (nothing happened). The
 * transaction has ended either way; free it or pass it to rdkv_txn_on_error. */
int rdkv_txn_commit(rdkv_txn *t);
/* Aborts: releases every lock; nothing it wrote happens. Safe on an ended transaction. */
void rdkv_txn_abort(rdkv_txn *t);
/* FoundationDB-style retry: for a retryable status (and while the session's max_retries is not
 * used up) it aborts the transaction if needed, sleeps a randomised, growing back-off, begins
 * the transaction again (same handle) and returns 0: run the transaction's code again. For any
 * other status it returns that status. */
int rdkv_txn_on_error(rdkv_txn *t, int status);
/* Ends (aborting if needed) and frees the transaction. */
void rdkv_txn_free(rdkv_txn *t);

/* Runs fn in a transaction and commits it, retrying with rdkv_txn_on_error while the status is
 * retryable. fn returns 0 to commit, or a status to abort with (returned as is; not retried
 * unless retryable). Returns 0 once committed. */
typedef int (*rdkv_txn_fn)(rdkv_txn *t, void *arg);
int rdkv_run_txn(rdkv_session *s, rdkv_txn_fn fn, void *arg);

/* True for statuses after which running the whole transaction again may succeed. */
bool rdkv_status_retryable(int status);

/* ---------------------------------------------------------------------------------------------
 * Many sessions on one thread. rdkv_run_tasks runs fn(i, arg) for i = 0 .. n-1 as tasks
 * (stackful coroutines) of the calling thread, and returns when every one has returned. Inside a
 * task, write ordinary blocking code with the calls of this header, one session per task:
 * whenever a call waits -- for the network, a lock, a back-off -- the thread runs another task,
 * so one thread keeps up to n transactions in flight, and what the tasks send in the meantime
 * leaves together. Embedded sessions opened in the tasks share the thread's connections; they
 * must all be of one node (RDKV_EINVAL otherwise). A task must never block the thread itself:
 * no sleep(), no waiting on a mutex or condition variable held across an rdkv call, no blocking
 * I/O; rdkv_sleep_us sleeps the task only. A session opened in a task is closed by that task
 * before it returns. (Remote sessions work in tasks, but still wait the blocking way.) stack_kb: each task's stack (0: 256 KiB; a guard page below it turns an
 * overflow into a crash, never into corruption). Returns 0; RDKV_ENOMEM (no task ran) when the
 * tasks could not all be started; RDKV_EBUSY when called from inside a task. */
typedef void (*rdkv_task_fn)(unsigned i, void *arg);
int rdkv_run_tasks(unsigned n, rdkv_task_fn fn, void *arg, size_t stack_kb);
/* Sleeps us microseconds: only the calling task when in one, else the thread. */
void rdkv_sleep_us(int64_t us);

/* ---------------------------------------------------------------------------------------------
 * Placement. A key lives on partition (node) XXH3(key) mod nodes; a key that ends in "{tag}" (a
 * non-empty tag after its last '{') is placed by XXH3(tag) alone, so keys sharing a tag live on
 * one node and a transaction over them needs no two-phase commit. The tag comes last so that a
 * key's leading bytes, which order scans and coordinate range locks, stay the key's own. This is
 * the node rdkv_key_partition names, for a cluster of `nodes` nodes. */
unsigned rdkv_key_partition(const void *key, size_t klen, unsigned nodes);

/* ---------------------------------------------------------------------------------------------
 * Cluster status: a JSON document describing every node as seen from the session's node
 * (id, address, up or down, rows, memory), malloc'd; the caller frees it with free(). */
int rdkv_cluster_status(rdkv_session *s, char **json);

#ifdef __cplusplus
}
#endif
#endif
