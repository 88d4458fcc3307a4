/* kvctl's data commands: get, put, del and scan, each one serializable transaction in one
 * request to the node (exec.c's run_oneshot). */
#include "tools/kvctl/kvctl.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cmd_get(struct inv *iv)
{
    int rc = want_args(iv, 1, 1, "exactly one argument: KEY");
    if (rc) return rc;
    struct op op = {.kind = OP_GET, .key = bytes_str(iv->args[0]), .raw = iv->val[F_RAW] != NULL};
    return run_oneshot(&op, "get");
}

int cmd_put(struct inv *iv)
{
    int rc = want_args(iv, 1, 2, "KEY and VALUE (or '-' or nothing for stdin)");
    if (rc) return rc;
    struct buf in = {0};
    struct op op = {.kind = OP_PUT, .key = bytes_str(iv->args[0])};
    if (iv->nargs == 2 && strcmp(iv->args[1], "-")) {
        op.val = bytes_str(iv->args[1]);
    } else {
        if (isatty(STDIN_FILENO))
            fputs("kvctl: reading the value from stdin (end it with Ctrl-D)\n", stderr);
        rc = read_all(stdin, "stdin", &in);
        if (rc) {
            buf_free(&in);
            return rc;
        }
        op.val = (struct bytes){in.p ? in.p : "", in.len};
    }
    rc = run_oneshot(&op, "put");
    buf_free(&in);
    return rc;
}

int cmd_del(struct inv *iv)
{
    int rc = want_args(iv, 1, 1, "exactly one argument: KEY");
    if (rc) return rc;
    struct op op = {.kind = OP_DEL, .key = bytes_str(iv->args[0])};
    return run_oneshot(&op, "del");
}

/* The smallest key above every key that starts with p: NULL length when there is none. */
static char *prefix_end(struct bytes p, size_t *n)
{
    size_t len = p.n;
    while (len && (unsigned char)p.p[len - 1] == 0xff) len--;
    *n = len;
    if (!len) return NULL;
    char *e = xmalloc(len);
    memcpy(e, p.p, len);
    e[len - 1] = (char)((unsigned char)e[len - 1] + 1);
    return e;
}

int cmd_scan(struct inv *iv)
{
    struct op op = {.kind = OP_SCAN, .limit = DEFAULT_LIMIT};
    op.keys_only = iv->val[F_KEYS_ONLY] != NULL;
    op.count = iv->val[F_COUNT] != NULL;
    if (op.count && op.keys_only) return usage_err("--count and --keys-only do not go together");
    if (op.count) op.limit = 0;
    if (iv->val[F_LIMIT]) {
        uint64_t v;
        if (!parse_uint(iv->val[F_LIMIT], SIZE_MAX / 2, &v))
            return usage_err("--limit needs a number of rows (0: no limit), got '%s'",
                             iv->val[F_LIMIT]);
        op.limit = (size_t)v;
    }
    char *pend = NULL;
    int rc;
    if (iv->val[F_PREFIX]) {
        if (iv->val[F_TO_END]) return usage_err("--prefix and --to-end do not go together");
        if ((rc = want_args(iv, 0, 0, "no BEGIN or END with --prefix"))) return rc;
        op.key = bytes_str(iv->val[F_PREFIX]);
        size_t n;
        pend = prefix_end(op.key, &n);
        op.end = (struct bytes){pend, n};
        op.end_open = pend == NULL;
    } else if (iv->val[F_TO_END]) {
        if ((rc = want_args(iv, 1, 1, "exactly BEGIN with --to-end"))) return rc;
        op.key = bytes_str(iv->args[0]);
        op.end_open = true;
    } else {
        if (iv->nargs == 1)
            return usage_err("scan needs BEGIN and END (END '' or --to-end: to the end)");
        if ((rc = want_args(iv, 2, 2, "BEGIN and END"))) return rc;
        op.key = bytes_str(iv->args[0]);
        op.end = bytes_str(iv->args[1]);
        op.end_open = op.end.n == 0;
        if (!op.end_open && range_empty(op.key, op.end)) {
            char m[600];
            range_empty_msg(op.key, op.end, m, sizeof m);
            return usage_err("%s", m);
        }
    }
    rc = run_oneshot(&op, "scan");
    free(pend);
    return rc;
}
