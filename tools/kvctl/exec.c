/* kvctl's execution of operations: the session (connect_session), one operation inside a
 * transaction, a batch run as one transaction retried on conflict (job_fn, run_txn), and the
 * one-shot commands, each one request to the node (run_oneshot). */
#include "tools/kvctl/kvctl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int op_read(rdkv_txn *t, const struct op *op, const void **v, size_t *vl)
{
    return op->for_update ? rdkv_txn_get_for_update(t, op->key.p, op->key.n, v, vl)
                          : rdkv_txn_get(t, op->key.p, op->key.n, v, vl);
}

static int exec_scan(rdkv_txn *t, const struct op *op, struct out *o)
{
    struct buf *b = &o->b;
    size_t ask = op->limit ? op->limit + 1 : 0; /* one more row tells whether there are more */
    rdkv_iter *it;
    const void *end = op->end_open ? NULL : op->end.p;
    size_t elen = op->end_open ? 0 : op->end.n;
    int rc = t ? rdkv_txn_scan(t, op->key.p, op->key.n, end, elen, ask, &it)
               : rdkv_scan(S, op->key.p, op->key.n, end, elen, ask, &it);
    if (rc) return rc;
    bool json = G.out == OUT_JSON, more = false;
    size_t rows = 0;
    if (json && !op->count) {
        if (o->ctx == CTX_TXN) {
            out_sep(o);
            buf_puts(b, "{\"op\":\"scan\",\"rows\":[");
        } else {
            buf_puts(b, "{\"rows\":[");
        }
    }
    const void *k, *v;
    size_t kl, vl;
    int r;
    while ((r = rdkv_iter_next(it, &k, &kl, &v, &vl)) == 1) {
        if (op->limit && rows == op->limit) {
            more = true;
            break;
        }
        rows++;
        if (op->count) continue;
        struct bytes key = {k, kl}, val = {v, vl};
        if (json) {
            if (rows > 1) buf_putc(b, ',');
            buf_putc(b, '{');
            put_json_bytes(b, "key", key);
            if (!op->keys_only) {
                buf_putc(b, ',');
                put_json_bytes(b, "value", val);
            }
            buf_putc(b, '}');
        } else {
            put_key_text(b, key);
            if (!op->keys_only) {
                buf_putc(b, ' ');
                put_value_text(b, val);
            }
            buf_putc(b, '\n');
        }
    }
    rdkv_iter_close(it);
    if (r < 0) return r;
    if (op->count) {
        if (json) buf_printf(b, "{\"count\":%zu,\"more\":%s}\n", rows, more ? "true" : "false");
        else buf_printf(b, "%zu\n", rows);
    } else if (json) {
        buf_printf(b, "],\"more\":%s}%s", more ? "true" : "false", o->ctx == CTX_TXN ? "" : "\n");
    }
    if (more) {
        o->more = true;
        o->more_limit = op->limit;
    }
    return 0;
}

/* Runs one non-expect operation in t, printing into o. Not found: RDKV_ENOTFOUND (one-shot
 * commands fail with it; txn and shell print it and go on). */
int exec_op(rdkv_txn *t, const struct op *op, struct out *o)
{
    const void *v;
    size_t vl;
    int rc;
    switch (op->kind) {
    case OP_GET:
        rc = op_read(t, op, &v, &vl);
        if (rc == RDKV_ENOTFOUND) print_not_found(o, "get", op);
        else if (rc == 0) print_get_found(o, op, (struct bytes){v, vl});
        return rc;
    case OP_PUT:
        rc = rdkv_txn_put(t, op->key.p, op->key.n, op->val.p, op->val.n);
        if (rc == 0) print_ok(o);
        return rc;
    case OP_DEL:
        rc = rdkv_txn_delete(t, op->key.p, op->key.n);
        if (rc == 0) print_ok(o);
        else if (rc == RDKV_ENOTFOUND && o->ctx == CTX_SHELL) print_not_found(o, "del", op);
        return rc;
    case OP_SCAN: return exec_scan(t, op, o);
    default: return RDKV_EINVAL;
    }
}

/* The body of a job's transaction (struct job): its guards, then its operations. */
int job_fn(rdkv_txn *t, void *arg)
{
    struct job *j = arg;
    j->tries++;
    j->o.b.len = 0;
    j->o.first = true;
    j->o.more = false;
    for (size_t i = 0; i < j->nops; i++) {
        const struct op *op = &j->ops[i];
        if (is_expect(op->kind)) {
            const void *v;
            size_t vl;
            int rc = op_read(t, op, &v, &vl);
            if (rc && rc != RDKV_ENOTFOUND) return rc;
            bool present = rc == 0;
            bool ok = op->kind == OP_EXPECT_ABSENT   ? !present
                      : op->kind == OP_EXPECT_EXISTS ? present
                                                     : present && vl == op->val.n &&
                                                           (!vl || !memcmp(v, op->val.p, vl));
            if (!ok) {
                j->failed = i;
                j->found_present = present;
                j->found.len = 0;
                if (present) buf_put(&j->found, v, vl);
                return KVCTL_EXPECT_FAILED;
            }
            continue;
        }
        int rc = exec_op(t, op, &j->o);
        if (rc == RDKV_ENOTFOUND && j->o.ctx != CTX_ONESHOT) continue;
        if (rc) return rc;
    }
    return 0;
}

/* Runs fn as one transaction: with retries through rdkv_run_txn, or exactly once. */
int run_txn(rdkv_txn_fn fn, void *arg)
{
    if (G.retries > 0) return rdkv_run_txn(S, fn, arg);
    rdkv_txn *t;
    int rc = rdkv_txn_begin(S, &t);
    if (rc) return rc;
    rc = fn(t, arg);
    if (rc == 0) rc = rdkv_txn_commit(t);
    rdkv_txn_free(t);
    return rc;
}

/* Marks the gets and expects of keys that a later or earlier put/del writes, so that they take
 * the exclusive lock at once instead of upgrading a shared one. */
void mark_for_update(struct op *ops, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (ops[i].kind != OP_GET && !is_expect(ops[i].kind)) continue;
        for (size_t j = 0; j < n; j++)
            if ((ops[j].kind == OP_PUT || ops[j].kind == OP_DEL) &&
                ops[j].key.n == ops[i].key.n && !memcmp(ops[j].key.p, ops[i].key.p, ops[i].key.n))
                ops[i].for_update = true;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Connecting. */

int connect_session(void)
{
    char bad[256];
    if (!endpoints_valid(G.endpoints, bad, sizeof bad))
        return usage_err("bad endpoint '%s' in %s (want host:port[,host:port...])", bad,
                         G.endpoints_from);
    rdkv_options o;
    rdkv_options_init(&o);
    o.connect_timeout_ms = G.connect_ms;
    o.op_timeout_ms = G.timeout_ms;
    o.lock_timeout_ms = G.lock_ms;
    o.max_retries = G.retries;
    o.secret_file = G.secret_file;
    char why[512];
    int rc = rdkv_secret_file_check(G.secret_file, why, sizeof why);
    if (rc) {
        fprintf(stderr, "kvctl: error: %s\n", why);
        return exit_code(rc);
    }
    rc = rdkv_connect(G.endpoints, &o, &S);
    if (rc) {
        S = NULL;
        fprintf(stderr, "kvctl: error: cannot connect to %s (endpoints from %s): %s (%s)\n",
                G.endpoints, G.endpoints_from, rdkv_strerror(rc), rdkv_status_name(rc));
        return exit_code(rc == RDKV_ETIMEDOUT ? RDKV_EUNAVAILABLE : rc);
    }
    return 0;
}

/* Reports the failure of a one-shot operation on key and returns the exit status. */
static int op_failure(int rc, const char *what, const struct op *op)
{
    if (rc == RDKV_ENOTFOUND) {
        struct buf k = {0};
        put_key_text(&k, op->key);
        fprintf(stderr, "kvctl: %s: not found\n", k.p ? k.p : "");
        buf_free(&k);
    } else if (rc == RDKV_ETOOBIG) {
        toobig_err(what, op->key.n, op->val.n, op->kind == OP_PUT);
    } else if (rc == RDKV_EINVAL) {
        status_err(rc, "%s: the server refused the key or value", what);
    } else {
        status_err(rc, "%s", what);
    }
    return exit_code(rc);
}

/* One command as the session's one-shot operation: one transaction, one request to the node
 * (rdkv_get ...), retried by the library up to --retries times. A scan that fails after its
 * first request (its rows were coming) is run again here, as many times. */
static int exec_oneshot(const struct op *op, struct out *o)
{
    const void *v;
    size_t vl;
    int rc;
    switch (op->kind) {
    case OP_GET:
        rc = rdkv_get(S, op->key.p, op->key.n, &v, &vl);
        if (rc == 0) print_get_found(o, op, (struct bytes){v, vl});
        return rc;
    case OP_PUT:
        rc = rdkv_put(S, op->key.p, op->key.n, op->val.p, op->val.n);
        if (rc == 0) print_ok(o);
        return rc;
    case OP_DEL:
        rc = rdkv_delete(S, op->key.p, op->key.n);
        if (rc == 0) print_ok(o);
        return rc;
    case OP_SCAN:
        for (unsigned tries = 0;; tries++) {
            o->b.len = 0;
            o->more = false;
            rc = exec_scan(NULL, op, o);
            if (!rdkv_status_retryable(rc) || tries >= G.retries) return rc;
        }
    default: return RDKV_EINVAL;
    }
}

int run_oneshot(struct op *op, const char *what)
{
    int rc = connect_session();
    if (rc) return rc;
    struct out o = {.ctx = CTX_ONESHOT, .first = true};
    rc = exec_oneshot(op, &o);
    int ex;
    if (rc) {
        ex = op_failure(rc, what, op);
    } else {
        fwrite(o.b.p ? o.b.p : "", 1, o.b.len, stdout);
        print_more_hint(&o);
        ex = flush_stdout();
    }
    buf_free(&o.b);
    return ex;
}
