/* The workloads the transaction tests share: registers whose every attempt is recorded for the
 * serializability checker (tests/txn/histcheck.h), and a bank whose total never changes.
 *
 * Only the transactions' bodies and the history's bookkeeping live here: each test keeps its own
 * loops, its handling of outcomes and its checks, which differ (txn_serial, txn_bank, txn_pause).
 * Nothing here calls the checker itself, so a test that runs only the bank needs no
 * rdkv_histcheck. Every function works inside a transaction the caller began and frees, except
 * the one-shot ones (*_oneshot), which are transactions of their own. */
#ifndef RDKV_TEST_TXNWORK_H
#define RDKV_TEST_TXNWORK_H

#include "rdkv.h"
#include "tests/txn/histcheck.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------------------------ */
/* Registers: TW_NREG keys "reg:%02u", each an 8-byte value that starts at 0 (the checker's
 * initial value). Every write writes a value unique in the whole run (tw_uid), and follows a read
 * of its register in the same transaction, as histcheck requires. */

#define TW_NREG 24
#define TW_MAXOPS (4 * TW_NREG) /* one attempt's ops: at most 4, each at most a scan */

/* A value unique in the run, also used as an attempt's id: thread id + 1 above bit 40, then n
 * (its own counter, from 1). */
static inline uint64_t tw_uid(int id, uint64_t n)
{
    return (uint64_t)(id + 1) << 40 | n;
}

/* Register r's key (at most 15 characters and the NUL). */
void tw_reg_key(char buf[16], unsigned r);
/* Reads register r (for update: an exclusive lock); RDKV_EPROTO if it is not 8 bytes. */
int tw_reg_read(rdkv_txn *t, unsigned r, bool upd, uint64_t *val);
int tw_reg_write(rdkv_txn *t, unsigned r, uint64_t val);
/* A scan of every register, recorded in ops[*nops...] as TW_NREG reads in key order;
 * RDKV_EPROTO if a row is missing, extra, out of order or malformed. */
int tw_reg_scan(rdkv_txn *t, struct hist_op *ops, uint32_t *nops);
/* A one-shot transaction of the session instead: a read of a random register (rdkv_get) or,
 * one time in four, a scan of every register (rdkv_scan), recorded in ops as above. */
int tw_reg_oneshot(rdkv_session *s, uint64_t *seed, struct hist_op *ops, uint32_t *nops);
/* Reads every register into fin: the history's closing transaction, once committed. Every entry
 * is set, to 0 after a failure. */
int tw_reg_read_all(rdkv_txn *t, struct hist_op fin[TW_NREG]);

/* What one attempt did, for the caller's counters. */
struct tw_reg_did {
    /* bit r: register r was accessed (also by the op that failed); a scan sets every bit */
    uint64_t touched;
    unsigned scans; /* scans that completed */
};

/* One attempt of 1 to 4 random operations drawn from *seed: reads, read-modify-writes (writing
 * tw_uid(id, ++*counter)), and now and then a scan of every register; a quarter of the attempts
 * are read-only. The ops are recorded in ops[*nops...] (room for TW_MAXOPS) as they happen, so
 * an attempt that fails midway is recorded with what it did. Returns the first failure, or the
 * commit's status. */
int tw_reg_attempt(rdkv_txn *t, int id, uint64_t *seed, uint64_t *counter, struct hist_op *ops,
                   uint32_t *nops, struct tw_reg_did *did);

/* One thread's history: its attempts and their ops, grown as needed. The attempts hold offsets
 * into ops (which moves as it grows) until tw_hist_append makes them pointers. */
struct tw_hist {
    struct hist_txn *txns;
    size_t n, cap;
    struct hist_op *ops;
    size_t nops, opcap;
};

/* Records an attempt; false when out of memory. */
bool tw_hist_add(struct tw_hist *h, uint64_t id, uint8_t status, const struct hist_op *ops,
                 uint32_t n);
void tw_hist_free(struct tw_hist *h);
/* Copies h's attempts to all[0..h->n), their ops pointing into h (which must outlive all);
 * returns h->n. */
size_t tw_hist_append(struct hist_txn *all, const struct tw_hist *h);
/* How many of h[0..n) have the status; writes (may be NULL) gets how many writes they made. */
uint64_t tw_hist_count(const struct hist_txn *h, size_t n, uint8_t status, uint64_t *writes);
/* A copy of src[0..n) in dst whose ops are copied to ops (room for all of them), for a negative
 * control to alter. */
void tw_hist_copy(struct hist_txn *dst, struct hist_op *ops, const struct hist_txn *src, size_t n);
/* Plants a lost update in h: a committed read-modify-write of a register that read v (written by
 * a committed W, which had read p) now reads p, so two committed versions claim p. Says what it
 * changed, after label; false when the history has no such pair. */
bool tw_hist_plant_lost_update(struct hist_txn *h, size_t n, const char *label);

/* Every anomaly a report counts. */
uint64_t tw_report_anomalies(const struct histcheck_report *r);
/* A report on one line of stderr, after what. */
void tw_report_print(const char *what, int rc, const struct histcheck_report *r);

/* ------------------------------------------------------------------------------------------ */
/* The bank: accounts "acct:%04u", each a signed 8-byte balance. Some accounts may be closed: a
 * transfer that drains one deletes its row, and a later transfer into it inserts the row again,
 * so the audits' scans also meet inserts and deletes. */

#define TW_OPENING 1000               /* every account's opening balance */
#define TW_CLOSABLE(i) ((i) % 6 == 5) /* a sixth of the accounts may be closed when drained */
#define TW_MAXACCT 64                 /* the most accounts an audit can check */

void tw_acct_key(char buf[16], int i);
/* Account i's balance; a closed (absent) account reads 0 with *exists false. */
int tw_acct_read(rdkv_txn *t, int i, bool upd, int64_t *bal, bool *exists);
int tw_acct_write(rdkv_txn *t, int i, int64_t bal);

/* What a transfer did, should it commit. */
struct tw_moved {
    int64_t amount;
    bool closed;   /* it deleted the source's row */
    bool reopened; /* it inserted the destination's row */
};

/* One transfer attempt a -> b: reads both for update, then moves an amount drawn from *seed (an
 * eighth of the time the whole balance, else 1 to all of it), closing a drained closable source;
 * with nothing to move it only closes such a source, or only reads. RDKV_EPROTO if a balance is
 * negative. */
int tw_transfer(rdkv_txn *t, uint64_t *seed, int a, int b, struct tw_moved *m);

/* One audit attempt of accounts 0..nacct-1 (at most TW_MAXACCT): how = 0 by gets, 1 by one scan
 * of the "acct:" range, 2 both, which must then agree row by row. *sum gets the total, *minbal
 * the lowest balance (closed accounts hold 0), and *mismatch whether the gets and the scan
 * disagree or the scan met a stray, out-of-order or malformed row. */
int tw_audit(rdkv_txn *t, int nacct, int how, int64_t *sum, int64_t *minbal, bool *mismatch);
/* how's name in reports: "gets", "scan" or "gets+scan". */
const char *tw_audit_name(int how);
/* The audit by scan as a one-shot transaction of the session (rdkv_scan). */
int tw_audit_oneshot(rdkv_session *s, int nacct, int64_t *sum, int64_t *minbal, bool *mismatch);

/* ------------------------------------------------------------------------------------------ */
/* Runs body(t, arg) in one transaction and commits it, again and again until it commits or the
 * clock passes deadline (clock_now_ns). A retry goes through rdkv_txn_on_error, so it keeps its
 * first attempt's start time: under wait-die a big read among writers grows older with each
 * retry until nothing it meets is older, where a fresh transaction per attempt would be the
 * youngest every time and could die for ever. A status on_error will not retry (a node down
 * during a failover, the retries used up) begins a fresh transaction after 50 ms. Returns the
 * last status (0: committed). */
int tw_run_until(rdkv_session *s, int64_t deadline, int (*body)(rdkv_txn *t, void *arg),
                 void *arg);

#endif
