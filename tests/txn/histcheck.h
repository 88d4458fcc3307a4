/* A serializability checker for register (read-modify-write) histories, after Adya as Elle uses it.
 * It finds G1a, G1b, the cycles G0, G1c and G2 (through iterative Tarjan SCCs), and histories that
 * fit no version order, in O((txns + ops) log) time; it returns 0 only for a serializable history.
 *
 * The workload: keys are 0..nkeys-1 and start at value 0 (the virtual initial transaction). Every
 * write in the whole history writes a globally unique nonzero value, and every write of a key is
 * preceded in its transaction by a read of that key (or by an earlier write of it), so the value
 * a transaction read before its first write of a key is the predecessor of the version it installs.
 *
 * How the history is judged:
 *   - A transaction's final write of a key is the version it installs; earlier writes of the same
 *     key in the same transaction are intermediate.
 *   - UNKNOWN transactions whose write a committed (or thus promoted) transaction read count as
 *     committed (transitively); the others are dropped. Only committed ones are checked.
 *   - G1a: a committed read of an aborted write. G1b: a committed read of another transaction's
 *     intermediate write. Each such read counts once.
 *   - incompatible: a read of a value never written (or written to another key, or written later
 *     by the reader itself), a read inside a transaction that disagrees with the transaction's own
 *     earlier read or write of the key, and a lost update: two committed versions that claim the
 *     same predecessor (each extra claimant counts once; the rw edges it implies also make a G2).
 *   - Edges between committed transactions: ww (T1 installed the predecessor of T2's version),
 *     wr (T2 read a value T1 wrote), rw (T1 read v, T2 installed a version whose predecessor is v).
 *     Each nontrivial strongly connected component counts once, as G0 if its ww edges alone form
 *     a cycle, else G1c if its ww and wr edges do, else G2.
 */
#ifndef RDKV_HISTCHECK_H
#define RDKV_HISTCHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum hist_kind { HIST_READ = 1, HIST_WRITE = 2 };

/* READ: the value observed (0 = the initial value). WRITE: the value written (nonzero, unique). */
struct hist_op {
    uint8_t kind;
    uint32_t key;
    uint64_t value;
};

enum hist_status { HIST_COMMITTED = 1, HIST_ABORTED = 2, HIST_UNKNOWN = 3 /* result unknown */ };

struct hist_txn {
    uint64_t id; /* only used to name the transaction in reports */
    uint8_t status;
    uint32_t nops;
    const struct hist_op *ops; /* in the order the transaction issued them */
};

struct histcheck_report {
    uint64_t g0, g1a, g1b, g1c, g2, incompatible; /* anomaly counts */
    uint64_t txns_checked;     /* committed transactions, promoted UNKNOWN ones included */
    uint64_t unknown_promoted; /* UNKNOWN transactions counted as committed */
    uint64_t unknown_dropped;  /* UNKNOWN transactions left out */
    char first[512];           /* the first anomaly found, e.g. "G2: T3 -ww-> T7 -rw-> T3", or "" */
};

/* Checks the history. Returns 0 when it is serializable, 1 when an anomaly was found (out says
 * which), RDKV_EINVAL on bad input (a key >= nkeys, a bad kind or status, a zero or duplicate
 * written value, a write not preceded by a read of its key in its transaction; out->first says
 * what), RDKV_ENOMEM when memory runs out. */
int histcheck_run(const struct hist_txn *txns, size_t n, uint32_t nkeys,
                  struct histcheck_report *out);

/* The text format, one operation a line:
 *     T<id> <C|A|U> r <key> <value>
 *     T<id> <C|A|U> w <key> <value>
 *     T<id> <C|A|U>                   (a transaction with no operations)
 * Numbers are decimal. A transaction is the run of consecutive lines with the same id, which
 * must all carry the same status; an id may not come back after another id. Blank lines and
 * lines starting with '#' are ignored. */
struct hist_log {
    struct hist_txn *txns;
    size_t ntxns;
    struct hist_op *ops; /* every transaction's ops, which txns[i].ops point into */
    size_t nops;
    uint32_t nkeys; /* the largest key seen plus one (0 for no ops) */
};

/* Reads a history. Returns 0, RDKV_EINVAL on a malformed line (err says which line and why),
 * RDKV_EIO on a read error or RDKV_ENOMEM. On failure *log is left empty. */
int histcheck_load(FILE *f, struct hist_log *log, char *err, size_t errlen);

/* Writes a history in the text format. Returns 0 or RDKV_EIO. */
int histcheck_save(FILE *f, const struct hist_txn *txns, size_t n);

/* Frees what histcheck_load allocated and empties the log. */
void histcheck_free(struct hist_log *log);

#endif
