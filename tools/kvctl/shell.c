/* kvctl shell: an fdbcli-like interactive shell. Each command is its own transaction
 * (autocommit, retried on conflict) until 'begin'; then every command runs in one transaction
 * until 'commit' or 'rollback'. After an error inside a transaction it is rolled back and later
 * commands are refused until 'rollback' (or 'commit') ends it. */
#include "tools/kvctl/kvctl.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct shell {
    rdkv_txn *t;      /* the open transaction after begin */
    bool txn_failed;  /* an error rolled the transaction back: refuse commands until its end */
    bool interactive;
    unsigned failed;
    bool quit;
};

static const char shell_help[] =
    "Commands (';' separates several on one line; quoting as in 'kvctl help escaping'):\n"
    "  get KEY                 print the value (or 'KEY: not found')\n"
    "  put KEY VALUE           write a key\n"
    "  del KEY                 delete a key\n"
    "  scan BEGIN END [LIMIT]  'KEY VALUE' lines; END \"\": to the end (LIMIT default 1000)\n"
    "  begin                   start a transaction: the commands up to commit run in it\n"
    "  commit                  commit the transaction\n"
    "  rollback                abort it: nothing it wrote happens\n"
    "  status                  the cluster's nodes\n"
    "  stats                   the nodes' counters\n"
    "  help                    this list\n"
    "  exit, quit              leave (an open transaction is rolled back)\n"
    "Without begin, every command is its own transaction (autocommit, retried on conflict).\n"
    "After an error inside a transaction it is rolled back and further commands are refused\n"
    "until 'rollback' (or 'commit') ends it.\n"
    "A transaction must not pause long: its node aborts one idle for half the lock lease\n"
    "(5 s by default, kvserver --lease) and its next command gets RDKV_EABORTED; run it\n"
    "again.\n";

static void shell_print(const struct buf *b)
{
    if (b->len) fwrite(b->p, 1, b->len, stdout);
    fflush(stdout);
}

/* A command failed: count it, and roll back the open transaction (as fdbcli does). */
static void shell_fail(struct shell *sh)
{
    sh->failed++;
    if (!sh->t) return;
    fputs("Rolling back current transaction\n", stderr);
    rdkv_txn_abort(sh->t);
    rdkv_txn_free(sh->t);
    sh->t = NULL;
    sh->txn_failed = true;
}

static void shell_status_msg(int rc, const char *what, const struct op *op)
{
    if (rc == RDKV_ETOOBIG && op) toobig_err(what, op->key.n, op->val.n, op->kind == OP_PUT);
    else status_err(rc, "%s", what);
}

static void shell_ctl(struct shell *sh, const char *word)
{
    bool json = G.out == OUT_JSON;
    if (sh->txn_failed) {
        sh->txn_failed = false;
        if (!strcmp(word, "commit")) {
            fputs("kvctl: error: the transaction was rolled back after an error; nothing was "
                  "committed\n",
                  stderr);
            shell_fail(sh);
        } else if (!strcmp(word, "begin")) {
            fputs("kvctl: error: the transaction was rolled back after an error; end it with "
                  "rollback before a new begin\n",
                  stderr);
            sh->txn_failed = true;
            shell_fail(sh);
        } else {
            puts(json ? "{\"ok\":true,\"txn\":\"rollback\"}" : "Transaction rolled back");
            fflush(stdout);
        }
        return;
    }
    if (!strcmp(word, "begin")) {
        if (sh->t) {
            fputs("kvctl: error: a transaction is already open (commit or rollback first)\n",
                  stderr);
            shell_fail(sh);
            return;
        }
        int rc = rdkv_txn_begin(S, &sh->t);
        if (rc) {
            sh->t = NULL;
            status_err(rc, "begin");
            shell_fail(sh);
            return;
        }
        puts(json ? "{\"ok\":true,\"txn\":\"begin\"}" : "Transaction started");
    } else if (!strcmp(word, "commit")) {
        if (!sh->t) {
            fputs("kvctl: error: no transaction is open (begin starts one)\n", stderr);
            shell_fail(sh);
            return;
        }
        int rc = rdkv_txn_commit(sh->t);
        rdkv_txn_free(sh->t);
        sh->t = NULL;
        if (rc) {
            status_err(rc, "commit");
            if (rc != RDKV_EUNKNOWN) fputs("kvctl: the transaction wrote nothing\n", stderr);
            shell_fail(sh);
            return;
        }
        puts(json ? "{\"ok\":true,\"txn\":\"commit\"}" : "Committed");
    } else if (!strcmp(word, "rollback") || !strcmp(word, "abort") || !strcmp(word, "reset")) {
        if (!sh->t) {
            fputs("kvctl: error: no transaction is open\n", stderr);
            shell_fail(sh);
            return;
        }
        rdkv_txn_abort(sh->t);
        rdkv_txn_free(sh->t);
        sh->t = NULL;
        puts(json ? "{\"ok\":true,\"txn\":\"rollback\"}" : "Transaction rolled back");
    }
    fflush(stdout);
}

static void shell_command(struct shell *sh, struct tok *v, size_t n, bool glued_semi)
{
    char err[256];
    if (n == 1 && (tok_is(&v[0], "exit") || tok_is(&v[0], "quit"))) {
        sh->quit = true;
        return;
    }
    if (tok_is(&v[0], "help")) {
        fputs(shell_help, stdout);
        fflush(stdout);
        return;
    }
    static const char *const ctl[] = {"begin", "commit", "rollback", "abort", "reset", NULL};
    for (const char *const *c = ctl; *c; c++)
        if (tok_is(&v[0], *c)) {
            if (n != 1) {
                fprintf(stderr, "kvctl: error: %s takes no arguments\n", *c);
                shell_fail(sh);
                return;
            }
            shell_ctl(sh, *c);
            return;
        }
    if (tok_is(&v[0], "status") || tok_is(&v[0], "stats")) {
        bool stats = tok_is(&v[0], "stats");
        if (n != 1) {
            fprintf(stderr, "kvctl: error: %s takes no arguments\n", stats ? "stats" : "status");
            shell_fail(sh);
            return;
        }
        if (stats ? do_stats() : do_status()) shell_fail(sh);
        return;
    }
    if (sh->txn_failed) {
        fputs("kvctl: error: the current transaction was rolled back after an error; commands "
              "are ignored until 'rollback' (or 'commit') ends it\n",
              stderr);
        shell_fail(sh);
        return;
    }
    struct op op;
    if (parse_op(v, n, false, &op, err, sizeof err)) {
        /* "scan user: user;": the ';' ended the command, and the END the user meant with it */
        if (glued_semi && tok_is(&v[0], "scan"))
            fprintf(stderr, "kvctl: error: %s; a ';' ends a shell command: write \\; or quote "
                            "the word (\"user;\") for a ';' in a key\n",
                    err);
        else
            fprintf(stderr, "kvctl: error: %s (type 'help' for the commands)\n", err);
        shell_fail(sh);
        return;
    }
    char what[16];
    snprintf(what, sizeof what, "%.*s", (int)(v[0].n < 8 ? v[0].n : 8), v[0].p);
    struct out o = {.ctx = CTX_SHELL, .first = true};
    if (sh->t) {
        int rc = exec_op(sh->t, &op, &o);
        shell_print(&o.b);
        print_more_hint(&o);
        if (rc && rc != RDKV_ENOTFOUND) {
            shell_status_msg(rc, what, &op);
            shell_fail(sh);
        }
    } else {
        struct job j = {.ops = &op, .nops = 1, .o = {.ctx = CTX_SHELL}};
        int rc = run_txn(job_fn, &j);
        if (rc == 0) {
            shell_print(&j.o.b);
            print_more_hint(&j.o);
        } else {
            shell_status_msg(rc, what, &op);
            shell_fail(sh);
        }
        buf_free(&j.o.b);
        buf_free(&j.found);
    }
    buf_free(&o.b);
}

/* Runs the ';'-separated commands of one line. */
static void shell_line(struct shell *sh, const char *line, size_t len, unsigned lineno)
{
    char *dec = xmalloc(len + 1);
    struct toks t = {0};
    char err[256];
    for (size_t pos = 0; pos < len && !sh->quit;) {
        size_t dpos = 0;
        if (tokenize(line, len, &pos, true, dec, &dpos, &t, err, sizeof err)) {
            if (sh->interactive || !lineno) fprintf(stderr, "kvctl: error: %s\n", err);
            else fprintf(stderr, "kvctl: error: line %u: %s\n", lineno, err);
            shell_fail(sh);
            break;
        }
        if (t.n) shell_command(sh, t.v, t.n, t.glued_semi);
    }
    free(t.v);
    free(dec);
}

int cmd_shell(struct inv *iv)
{
    int rc = want_args(iv, 0, 0, "no arguments (commands come from stdin or --exec)");
    if (rc) return rc;
    if ((rc = connect_session())) return rc;
    struct shell sh = {.interactive = !iv->val[F_EXEC] && isatty(STDIN_FILENO)};
    if (iv->val[F_EXEC]) {
        shell_line(&sh, iv->val[F_EXEC], strlen(iv->val[F_EXEC]), 0);
    } else {
        if (sh.interactive)
            fprintf(stderr, "kvctl %s connected to %s. Type 'help' for the commands.\n",
                    RDKV_VERSION, G.endpoints);
        char *line = NULL;
        size_t cap = 0;
        unsigned lineno = 0;
        for (;;) {
            if (sh.interactive) {
                fputs(sh.txn_failed ? "kvctl(failed txn)> " : sh.t ? "kvctl(txn)> " : "kvctl> ",
                      stdout);
                fflush(stdout);
            }
            ssize_t n = getline(&line, &cap, stdin);
            if (n < 0) break;
            lineno++;
            shell_line(&sh, line, (size_t)n, lineno);
            if (sh.quit) break;
        }
        if (sh.interactive && !sh.quit) putchar('\n');
        free(line);
    }
    if (sh.t || sh.txn_failed) {
        if (sh.t)
            fputs("kvctl: the transaction left open was rolled back (commit it to keep it)\n",
              stderr);
        if (sh.t) {
            rdkv_txn_abort(sh.t);
            rdkv_txn_free(sh.t);
            if (!sh.interactive) sh.failed++;
        }
        sh.t = NULL;
    }
    fflush(stdout);
    return sh.failed ? EXIT_ERROR : 0;
}
