/* kvctl's cluster commands: status, the cluster's nodes as the coordinating node sees them
 * (its reply's format: docs/architecture.md, "Status"; read by status.c). */
#include "tools/kvctl/kvctl.h"
#include "tools/kvctl/status.h"

#include <stdlib.h>
#include <string.h>

int do_status(void)
{
    char *js = NULL;
    int rc = rdkv_cluster_status(S, &js);
    if (rc) {
        status_err(rc, "status");
        return exit_code(rc);
    }
    struct buf o = {0}, errs = {0};
    struct st_cluster c;
    char why[512];
    int down = 0;
    bool parsed = status_parse(js, &c, why, sizeof why) == 0;
    if (parsed) {
        down = print_status_table(&c, &o, &errs);
        status_free(&c);
    }
    if (G.out == OUT_JSON || !parsed) {
        fputs(js, stdout);
        if (!*js || js[strlen(js) - 1] != '\n') putchar('\n');
    } else {
        fwrite(o.p, 1, o.len, stdout);
    }
    int ex = flush_stdout();
    if (!parsed) {
        fprintf(stderr,
                "kvctl: error: status: the node's reply is not the status kvctl reads "
                "(docs/architecture.md, \"Status\"): %s\n",
                why);
        ex = EXIT_ERROR;
    }
    if (errs.len) fputs(errs.p, stderr);
    if (!ex && down) {
        fprintf(stderr, "kvctl: %d node%s down\n", down, down == 1 ? " is" : "s are");
        ex = EXIT_UNAVAILABLE;
    }
    free(js);
    buf_free(&o);
    buf_free(&errs);
    return ex;
}

int cmd_status(struct inv *iv)
{
    int rc = want_args(iv, 0, 0, "no arguments");
    if (rc) return rc;
    if ((rc = connect_session())) return rc;
    return do_status();
}
