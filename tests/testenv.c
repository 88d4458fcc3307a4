/* In-process test clusters. */
#include "testenv.h"
#include "harness.h"

#include <errno.h>
#include <signal.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum fab_transport tenv_transport = FAB_SOFT;
bool tenv_quick;
const char *tenv_bindir;

int tenv_args(int argc, char **argv)
{
    const char *env = getenv("RDKV_TEST_TRANSPORT");
    if (env && fab_transport_parse(env, &tenv_transport)) {
        fprintf(stderr, "RDKV_TEST_TRANSPORT: expected soft or verbs\n");
        exit(2);
    }
    int out = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--transport") && i + 1 < argc) {
            if (fab_transport_parse(argv[++i], &tenv_transport)) {
                fprintf(stderr, "--transport: expected soft or verbs\n");
                exit(2);
            }
            continue;
        }
        if (!strcmp(argv[i], "--quick")) {
            tenv_quick = true;
            continue;
        }
        if (!strcmp(argv[i], "--bindir") && i + 1 < argc) {
            tenv_bindir = argv[++i];
            continue;
        }
        argv[out++] = argv[i];
    }
    return out;
}

int tenv_mkdtemp(char *buf, size_t cap, const char *prefix)
{
    const char *tmp = getenv("TMPDIR");
    int n = snprintf(buf, cap, "%s/%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", prefix);
    if (n < 0 || (size_t)n >= cap) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return mkdtemp(buf) ? 0 : -1;
}

int tenv_main(int argc, char **argv, const char *what, const struct test_case *cases, size_t n)
{
    signal(SIGPIPE, SIG_IGN);
    char **args = argv + 1;
    int nargs = tenv_args(argc - 1, args);
    fprintf(stderr, "%s on the %s transport%s\n", what, fab_transport_name(tenv_transport),
            tenv_quick ? " (quick)" : "");
    return test_main(nargs, args, cases, n);
}

int tenv_start(struct tenv *e, unsigned n, uint64_t arena_size,
               void (*tweak)(struct fab_opts *o, unsigned node))
{
    memset(e, 0, sizeof *e);
    if (n == 0 || n > TENV_MAX) return RDKV_EINVAL;
    int fds[TENV_MAX] = {0};
    uint16_t ports[TENV_MAX] = {0};
    const char *hosts[TENV_MAX] = {0};
    char err[256];
    for (unsigned i = 0; i < n; i++) {
        hosts[i] = "127.0.0.1";
        int rc = fab_listen("127.0.0.1", 0, &fds[i], &ports[i], err, sizeof err);
        if (rc) {
            fprintf(stderr, "tenv: %s\n", err);
            while (i--) close(fds[i]);
            return rc;
        }
    }
    int rc = cluster_config_make(&e->cc, n, hosts, ports);
    if (rc) return rc;
    e->n = n;
    for (unsigned i = 0; i < n; i++) {
        struct fab_opts o;
        fab_opts_init(&o);
        o.cluster = &e->cc;
        o.node = (uint16_t)i;
        o.transport = tenv_transport;
        o.arena_size = arena_size;
        o.listen_fd = fds[i];
        if (tweak) tweak(&o, i);
        rc = fab_open(&o, &e->f[i], err, sizeof err);
        if (rc) {
            fprintf(stderr, "tenv: node %u: %s\n", i, err);
            for (unsigned k = i + 1; k < n; k++) close(fds[k]);
            close(fds[i]);
            tenv_stop(e);
            return rc;
        }
    }
    return 0;
}

void tenv_kill(struct tenv *e, unsigned node)
{
    fab_close(e->f[node]);
    e->f[node] = NULL;
}

void tenv_stop(struct tenv *e)
{
    for (unsigned i = 0; i < e->n; i++) {
        fab_close(e->f[i]);
        e->f[i] = NULL;
    }
    cluster_config_free(&e->cc);
    e->n = 0;
}
