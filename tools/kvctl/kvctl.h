/* kvctl's private header: what its files share. kvctl is the command-line client of rdkv; it
 * uses only the public API (rdkv.h). main.c holds the command table (one row per command) and
 * the global flags; each cmd_*.c runs commands of one concern, shell.c the interactive shell,
 * exec.c operations inside transactions, tokens.c the txn/shell input, output.c the printing,
 * status.c (status.h) the node's status reply. A command is one `int cmd_NAME(struct inv *)`
 * (declared below, with the others) plus one row of `commands` in main.c; it returns kvctl's
 * exit status. */
#ifndef RDKV_KVCTL_H
#define RDKV_KVCTL_H

#include "rdkv.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum {
    EXIT_OK = 0,
    EXIT_ERROR = 1,
    EXIT_USAGE = 2,
    EXIT_NOTFOUND = 3,
    EXIT_ABORTED = 4,
    EXIT_UNAVAILABLE = 5,
    EXIT_UNKNOWN = 6,
};

/* A transaction body's own status (outside rdkv's range, never retryable): a txn guard failed. */
#define KVCTL_EXPECT_FAILED (-1001)

#define DEFAULT_ENDPOINTS "127.0.0.1:7400"
#define DEFAULT_LIMIT 1000
#define STDIN_VALUE_MAX ((size_t)64 << 20)
#define KEY_LIMIT_DEFAULT 4096
#define VALUE_LIMIT_DEFAULT (1 << 20)

/* ---------------------------------------------------------------------------------------------
 * util.c: memory, a growable byte buffer, numbers, durations, endpoints, errors. */

_Noreturn void die_oom(void);
void *xmalloc(size_t n);
void *xrealloc(void *p, size_t n);

struct buf {
    char *p;
    size_t len, cap;
};

void buf_reserve(struct buf *b, size_t more);
void buf_put(struct buf *b, const void *d, size_t n);
void buf_putc(struct buf *b, char c);
void buf_puts(struct buf *b, const char *s);
void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_free(struct buf *b);

/* Bytes: keys and values may hold any byte, NUL included. */
struct bytes {
    const char *p;
    size_t n;
};

struct bytes bytes_str(const char *s);

bool parse_uint(const char *s, uint64_t max, uint64_t *out);
bool parse_duration_ms(const char *s, int64_t *ms);
bool endpoints_valid(const char *eps, char *bad, size_t badcap);

int exit_code(int st);
int usage_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void status_err(int st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void toobig_err(const char *what, size_t klen, size_t vlen, bool has_value);
int read_all(FILE *f, const char *name, struct buf *b);

/* ---------------------------------------------------------------------------------------------
 * main.c: global settings (flags and environment), the command line, the command table. */

enum out_fmt { OUT_TEXT, OUT_JSON };

struct globals {
    const char *endpoints;
    const char *endpoints_from; /* "--endpoints", "KVCTL_ENDPOINTS" or "the default" */
    enum out_fmt out;
    bool hex;
    int64_t connect_ms, timeout_ms, lock_ms;
    unsigned retries;
    const char *secret_file; /* NULL: rdkv_connect reads RDKV_SECRET_FILE */
};

extern struct globals G;
extern const char *cur_cmd; /* for the "Run 'kvctl CMD --help'" hint; NULL: kvctl itself */
extern rdkv_session *S;     /* the session, once connect_session made it */

enum flag_id {
    F_ENDPOINTS, F_WRITE_OUT, F_HEX, F_CONNECT_TIMEOUT, F_TIMEOUT, F_LOCK_TIMEOUT, F_RETRIES,
    F_SECRET_FILE, F_HELP, F_VERSION, /* global */
    F_RAW, F_LIMIT, F_KEYS_ONLY, F_COUNT, F_TO_END, F_PREFIX, F_FILE, F_EXEC,
    F_NFLAGS
};

/* One invocation: the command, its arguments and its own flags. */
struct inv {
    const struct command *cmd;
    char **args;
    int nargs;
    const char *val[F_NFLAGS]; /* command flags' values ("" for booleans), NULL when absent */
};

struct command {
    const char *name;
    unsigned flags; /* command flags it takes */
    const char *usage, *summary, *body;
    int (*run)(struct inv *);
};

/* Checks the number of arguments: 0, or the exit status after a usage error. */
int want_args(const struct inv *iv, int min, int max, const char *names);

/* The commands (cmd_data.c, cmd_txn.c, cmd_cluster.c, shell.c, main.c). */
int cmd_get(struct inv *);
int cmd_put(struct inv *);
int cmd_del(struct inv *);
int cmd_scan(struct inv *);
int cmd_txn(struct inv *);
int cmd_shell(struct inv *);
int cmd_status(struct inv *);
int cmd_stats(struct inv *);
int cmd_help(struct inv *);
int cmd_version(struct inv *);

/* ---------------------------------------------------------------------------------------------
 * tokens.c: the tokenizer of txn input and shell commands, and parsing one operation. */

struct tok {
    char *p;
    size_t n;
};

struct toks {
    struct tok *v;
    size_t n, cap;
    bool glued_semi; /* the command ended at a ';' right after its last token ("scan a b;") */
};

enum op_kind { OP_GET, OP_PUT, OP_DEL, OP_SCAN, OP_EXPECT_EQ, OP_EXPECT_ABSENT, OP_EXPECT_EXISTS };

/* What one get/put/del/scan/expect does inside a transaction. */
struct op {
    enum op_kind kind;
    struct bytes key, val; /* scan: key is the begin */
    struct bytes end;
    bool end_open;   /* scan: to the end of the key space */
    size_t limit;    /* scan: 0 = all */
    bool keys_only, count, raw;
    bool for_update; /* a get or expect of a key this transaction writes */
    unsigned line;
    char *text; /* txn: the line as written, for messages */
};

int tokenize(const char *src, size_t len, size_t *pos, bool semi, char *dst, size_t *dpos,
             struct toks *t, char *err, size_t errcap);
bool tok_is(const struct tok *t, const char *s);
bool range_empty(struct bytes b, struct bytes e);
void range_empty_msg(struct bytes b, struct bytes e, char *err, size_t errcap);
int parse_op(const struct tok *v, size_t n, bool allow_expect, struct op *op, char *err,
             size_t errcap);
bool is_expect(enum op_kind k);

/* ---------------------------------------------------------------------------------------------
 * output.c: printing bytes (text escapes, hex, JSON strings) and results. */

enum ctx { CTX_ONESHOT, CTX_TXN, CTX_SHELL };

/* The output of one command or transaction, printed when it is over. */
struct out {
    enum ctx ctx;
    struct buf b;
    bool first; /* JSON array: no comma yet */
    bool more;  /* a scan hit its limit */
    size_t more_limit;
};

bool utf8_valid(struct bytes b);
void put_hex(struct buf *o, struct bytes b);
void put_escaped(struct buf *o, struct bytes b, bool no_space);
void put_key_text(struct buf *o, struct bytes k);
void put_value_text(struct buf *o, struct bytes v);
void put_json_string(struct buf *o, struct bytes b);
void put_json_bytes(struct buf *o, const char *name, struct bytes b);
void out_sep(struct out *o);
void print_get_found(struct out *o, const struct op *op, struct bytes v);
void print_not_found(struct out *o, const char *opname, const struct op *op);
void print_ok(struct out *o);
void print_more_hint(const struct out *o);
int flush_stdout(void);

struct st_cluster;
/* The status table into o, and a line per node that is down into errs; returns how many are. */
int print_status_table(const struct st_cluster *c, struct buf *o, struct buf *errs);

/* ---------------------------------------------------------------------------------------------
 * exec.c: the session, and running operations in transactions. */

/* A batch of operations run as one transaction by rdkv_run_txn (retried on conflict): the
 * output of the last try is the one that counts. */
struct job {
    struct op *ops;
    size_t nops;
    struct out o;
    size_t failed;      /* the expect that failed */
    bool found_present; /* what it found */
    struct buf found;
    unsigned tries;
};

int connect_session(void);
int exec_op(rdkv_txn *t, const struct op *op, struct out *o);
int job_fn(rdkv_txn *t, void *arg);
int run_txn(rdkv_txn_fn fn, void *arg);
void mark_for_update(struct op *ops, size_t n);
int run_oneshot(struct op *op, const char *what);

/* cmd_cluster.c: fetch the status and print it, or the nodes' counters from it; return the
 * exit status. */
int do_status(void);
int do_stats(void);

/* output.c: a byte count as "1.5 MiB" and a duration in ns as "250us", "2.5ms", "1s". */
void fmt_bytes(char *out, size_t cap, double v);
void fmt_ns(char *out, size_t cap, int64_t ns);

#endif
