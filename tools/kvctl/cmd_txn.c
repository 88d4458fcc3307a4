/* kvctl txn: a guarded batch (expect lines, '---', operations) read from stdin or a file and run
 * as ONE serializable transaction, retried on conflict; a failed guard writes nothing (exit 4). */
#include "tools/kvctl/kvctl.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The batch as read: its operations (guards first), and what they point into. */
struct batch {
    struct op *ops;
    size_t nops, cap;
    char *dec; /* the decoded tokens */
    struct toks t;
};

static void batch_free(struct batch *b)
{
    for (size_t i = 0; i < b->nops; i++) free(b->ops[i].text);
    free(b->ops);
    free(b->t.v);
    free(b->dec);
}

/* Parses in (from name) into b: 0, or the exit status after a usage error naming the line. */
static int batch_parse(const struct buf *in, const char *name, struct batch *b)
{
    b->dec = xmalloc(in->len + 1);
    size_t dpos = 0;
    bool in_ops = false;
    unsigned line = 0;
    char err[256];
    for (size_t pos = 0; pos < in->len;) {
        const char *nl = memchr(in->p + pos, '\n', in->len - pos);
        size_t ll = nl ? (size_t)(nl - (in->p + pos)) : in->len - pos;
        const char *l = in->p + pos;
        pos += ll + (nl ? 1 : 0);
        line++;
        size_t a = 0, e = ll;
        while (a < e && isspace((unsigned char)l[a])) a++;
        while (e > a && isspace((unsigned char)l[e - 1])) e--;
        if (a == e) { /* an empty line after guards ends them */
            if (b->nops) in_ops = true;
            continue;
        }
        if (e - a == 3 && !memcmp(l + a, "---", 3)) {
            if (in_ops && b->nops && !is_expect(b->ops[b->nops - 1].kind))
                return usage_err("%s:%u: a second '---' line", name, line);
            in_ops = true;
            continue;
        }
        size_t lp = 0;
        if (tokenize(l, ll, &lp, false, b->dec, &dpos, &b->t, err, sizeof err))
            return usage_err("%s:%u: %s", name, line, err);
        if (b->t.n == 0) continue; /* a comment */
        if (b->nops == b->cap) {
            b->cap = b->cap ? 2 * b->cap : 16;
            b->ops = xrealloc(b->ops, b->cap * sizeof *b->ops);
        }
        struct op *op = &b->ops[b->nops];
        if (parse_op(b->t.v, b->t.n, !in_ops, op, err, sizeof err))
            return usage_err("%s:%u: %s", name, line, err);
        if (!is_expect(op->kind)) in_ops = true; /* operations without guards need no '---' */
        op->line = line;
        op->text = strndup(l + a, e - a);
        if (!op->text) die_oom();
        b->nops++;
    }
    if (b->nops == 0) return usage_err("%s: no operations in the transaction", name);
    return 0;
}

static void json_txn_failed(struct buf *b, const struct job *j)
{
    const struct op *op = &j->ops[j->failed];
    buf_printf(b, "{\"result\":\"FAILED\",\"line\":%u,\"expect\":", op->line);
    put_json_string(b, bytes_str(op->text));
    buf_puts(b, ",\"found\":");
    if (!j->found_present) {
        buf_puts(b, "null");
    } else {
        buf_putc(b, '{');
        put_json_bytes(b, "value", (struct bytes){j->found.p, j->found.len});
        buf_putc(b, '}');
    }
    buf_puts(b, "}\n");
}

/* Prints what a finished job did (rc: how its transaction ended); returns the exit status. */
static int txn_report(int rc, const struct job *j)
{
    struct buf o = {0};
    int ex;
    if (rc == 0) {
        if (G.out == OUT_JSON) {
            buf_puts(&o, "{\"result\":\"SUCCESS\",\"results\":[");
            buf_put(&o, j->o.b.p, j->o.b.len);
            buf_puts(&o, "]}\n");
        } else {
            buf_puts(&o, "SUCCESS\n");
            buf_put(&o, j->o.b.p, j->o.b.len);
        }
        fwrite(o.p, 1, o.len, stdout);
        print_more_hint(&j->o);
        ex = flush_stdout();
    } else if (rc == KVCTL_EXPECT_FAILED) {
        const struct op *op = &j->ops[j->failed];
        if (G.out == OUT_JSON) {
            json_txn_failed(&o, j);
        } else {
            buf_printf(&o, "FAILED: %s (line %u; found ", op->text, op->line);
            if (!j->found_present) {
                buf_puts(&o, "absent");
            } else {
                buf_puts(&o, "\"");
                put_value_text(&o, (struct bytes){j->found.p, j->found.len});
                buf_puts(&o, "\"");
            }
            buf_puts(&o, ")\n");
        }
        fwrite(o.p, 1, o.len, stdout);
        flush_stdout();
        fputs("kvctl: a guard failed: the transaction was aborted and wrote nothing\n", stderr);
        ex = EXIT_ABORTED;
    } else if (rc == RDKV_ETOOBIG) {
        fprintf(stderr,
                "kvctl: error: txn: a key or value is over the cluster's limit (by default "
                "keys may have at most %d bytes and values %d bytes (1 MiB)) (%s)\n",
                KEY_LIMIT_DEFAULT, VALUE_LIMIT_DEFAULT, rdkv_status_name(rc));
        ex = EXIT_ERROR;
    } else {
        status_err(rc, "txn");
        ex = exit_code(rc);
    }
    buf_free(&o);
    return ex;
}

int cmd_txn(struct inv *iv)
{
    int rc = want_args(iv, 0, 0, "no arguments (the batch comes from stdin or -f FILE)");
    if (rc) return rc;
    const char *file = iv->val[F_FILE];
    struct buf in = {0};
    FILE *f = stdin;
    if (file && strcmp(file, "-")) {
        f = fopen(file, "rb");
        if (!f) {
            fprintf(stderr, "kvctl: error: cannot open %s: %s\n", file, strerror(errno));
            return EXIT_ERROR;
        }
    } else if (isatty(STDIN_FILENO)) {
        fputs("kvctl: reading the transaction from stdin (guards, '---', operations; end it "
              "with Ctrl-D)\n",
              stderr);
    }
    rc = read_all(f, file ? file : "stdin", &in);
    if (f != stdin) fclose(f);
    if (rc) {
        buf_free(&in);
        return rc;
    }
    struct batch b = {0};
    int ex = batch_parse(&in, file ? file : "stdin", &b);
    if (!ex) {
        mark_for_update(b.ops, b.nops);
        ex = connect_session();
    }
    if (!ex) {
        struct job j = {.ops = b.ops, .nops = b.nops, .o = {.ctx = CTX_TXN}};
        ex = txn_report(run_txn(job_fn, &j), &j);
        buf_free(&j.o.b);
        buf_free(&j.found);
    }
    batch_free(&b);
    buf_free(&in);
    return ex;
}
