/* In-process test clusters. */
#include "testenv.h"
#include "harness.h"

#include "rdma/auth.h"

#include <errno.h>
#include <limits.h>
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

static char secret_dir[PATH_MAX], secret_node[PATH_MAX + 32], secret_client[PATH_MAX + 32];

static pid_t secret_owner;

static void secret_cleanup(void)
{
    if (getpid() != secret_owner) return; /* a forked child leaves them to its parent */
    unlink(secret_node);
    unlink(secret_client);
    rmdir(secret_dir);
}

static bool secret_make(void)
{
    if (secret_node[0]) return true;
    char err[512];
    if (tenv_mkdtemp(secret_dir, sizeof secret_dir, "rdkv-secret")) {
        perror("tenv: mkdtemp for the test secret");
        return false;
    }
    snprintf(secret_node, sizeof secret_node, "%s/cluster.secret", secret_dir);
    snprintf(secret_client, sizeof secret_client, "%s/cluster.client.secret", secret_dir);
    if (auth_generate(secret_node, secret_client, err, sizeof err)) {
        fprintf(stderr, "tenv: %s\n", err);
        rmdir(secret_dir);
        secret_node[0] = 0;
        return false;
    }
    secret_owner = getpid();
    atexit(secret_cleanup);
    setenv("RDKV_SECRET_FILE", secret_client, 1);
    return true;
}

const char *tenv_secret_file(void) { return secret_make() ? secret_node : NULL; }
const char *tenv_client_secret_file(void) { return secret_make() ? secret_client : NULL; }

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
    const char *secret = tenv_secret_file();
    if (secret && strlen(secret) < sizeof e->cc.secret_file)
        memcpy(e->cc.secret_file, secret, strlen(secret) + 1);
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
