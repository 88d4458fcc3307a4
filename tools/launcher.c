/* The cluster launcher. */
#include "launcher.h"

#include "common/clock.h"
#include "common/log.h"
#include "rdma/auth.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <sched.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

void launch_opts_init(struct launch_opts *o)
{
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->transport = FAB_SOFT;
    o->ready_timeout_ns = 60 * NS_PER_S;
}

int launch_kvserver_path(const char *bindir, char *out, size_t cap)
{
    char self[PATH_MAX];
    if (!bindir) {
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n < 0) return RDKV_EIO;
        self[n] = 0;
        bindir = dirname(self);
    }
    if ((size_t)snprintf(out, cap, "%s/kvserver", bindir) >= cap) return RDKV_EINVAL;
    if (access(out, X_OK) != 0) return RDKV_ENOTFOUND;
    return 0;
}

const char *launch_extra_arg(const char *x, unsigned node, char *buf, size_t cap)
{
    const char *at = strstr(x, "%N");
    if (at && (size_t)snprintf(buf, cap, "%.*s%u%s", (int)(at - x), x, node, at + 2) < cap)
        return buf;
    return x;
}

static int pidfd_open_(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

void launch_last_line(const char *path, char *out, size_t cap)
{
    out[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (n) snprintf(out, cap, "%s", line);
    }
    fclose(f);
}

static void last_log_line(const char *dir, unsigned node, char *out, size_t cap)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/node-%u.log", dir, node);
    launch_last_line(path, out, cap);
}

static void rm_tree(const char *dir)
{
    char path[PATH_MAX + 64];
    static const char *names[] = {"cluster.conf", LAUNCH_SECRET, LAUNCH_CLIENT_SECRET, NULL};
    for (const char **n = names; *n; n++) {
        snprintf(path, sizeof path, "%s/%s", dir, *n);
        unlink(path);
    }
    for (unsigned i = 0; i < LAUNCH_MAX; i++) {
        snprintf(path, sizeof path, "%s/node-%u.log", dir, i);
        unlink(path);
        snprintf(path, sizeof path, "%s/node-%u.pid", dir, i);
        unlink(path);
    }
    rmdir(dir);
}

/* Waits for node's process to exit, up to deadline. Returns its exit status (-1 unknown) or -2
 * on timeout. */
static int wait_exit(struct launch *L, unsigned i, int64_t deadline)
{
    pid_t pid = L->pids[i];
    int fd = pidfd_open_(pid);
    if (fd >= 0) {
        int64_t left = deadline - clock_now_ns();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ms = left > 0 ? (int)(left / NS_PER_MS) : 0;
        int r;
        do r = poll(&p, 1, ms); while (r < 0 && errno == EINTR);
        close(fd);
        if (r == 0) return -2;
    } else {
        /* no pidfd (old kernel): poll for the exit */
        while (kill(pid, 0) == 0) {
            int st;
            if (L->children && waitpid(pid, &st, WNOHANG) == pid)
                return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
            if (clock_now_ns() > deadline) return -2;
            clock_sleep_ns(10 * NS_PER_MS);
        }
    }
    if (!L->children) {
        /* Exited; its parent (init) reaps it. Wait, briefly, until it is gone from the process
         * table too, so that "no process left behind" holds when we return. */
        int64_t gone_by = clock_now_ns() + 2 * NS_PER_S;
        while (kill(pid, 0) == 0 && clock_now_ns() < gone_by) clock_sleep_ns(5 * NS_PER_MS);
        return 0;
    }
    int st;
    if (waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* Binds a listening socket on host (port 0: the kernel's pick) inside network namespace ns
 * ("" : this thread's own), for a node that will run there; the calling thread comes back to
 * its own namespace before it returns. */
static int listen_in(const char *ns, const char *host, uint16_t port, int *fd, uint16_t *got,
                     char *err, size_t errcap)
{
    if (!ns[0]) return fab_listen(host, port, fd, got, err, errcap);
    char path[128];
    snprintf(path, sizeof path, "/run/netns/%s", ns);
    int back = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    int to = open(path, O_RDONLY | O_CLOEXEC);
    if (back < 0 || to < 0 || setns(to, CLONE_NEWNET)) {
        snprintf(err, errcap, "cannot enter network namespace %s: %s", ns, strerror(errno));
        if (back >= 0) close(back);
        if (to >= 0) close(to);
        return RDKV_EIO;
    }
    close(to);
    int rc = fab_listen(host, port, fd, got, err, errcap);
    if (setns(back, CLONE_NEWNET)) {
        /* (cannot happen: our own namespace; but never go on in the wrong one) */
        fprintf(stderr, "launcher: cannot return to this thread's network namespace: %s\n",
                strerror(errno));
        abort();
    }
    close(back);
    return rc;
}

/* The kvserver to run (launch_kvserver_path), or 1 with the reason in err. */
static int find_kvserver(const struct launch_opts *o, char out[PATH_MAX], char *err, size_t errcap)
{
    if (!launch_kvserver_path(o->bindir, out, PATH_MAX)) return 0;
    snprintf(err, errcap, "cannot find an executable kvserver (%s)", out);
    return 1;
}

/* Forks and execs node i of L on the listening socket lfd; *ready_out gets the read end of its
 * ready pipe. append_log: add to its log instead of starting it afresh (a restart). */
static int spawn_node(struct launch *L, const struct launch_opts *o, const char *kvserver,
                      unsigned i, int lfd_in, bool append_log, int *ready_out, char *err,
                      size_t errcap)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        snprintf(err, errcap, "pipe: %s", strerror(errno));
        return RDKV_EIO;
    }
    char logp[PATH_MAX + 32], nodes[16], datap[PATH_MAX + 32];
    snprintf(logp, sizeof logp, "%s/node-%u.log", L->dir, i);
    snprintf(nodes, sizeof nodes, "%u", i);
    snprintf(datap, sizeof datap, "%s/node-%u.data", L->dir, i);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errcap, "fork: %s", strerror(errno));
        close(pfd[0]);
        close(pfd[1]);
        return RDKV_EIO;
    }
    if (pid == 0) {
        if (o->detach) setsid();
        else if (prctl(PR_SET_PDEATHSIG, SIGTERM) == 0 && getppid() != parent)
            _exit(1); /* never outlive the launcher by accident */
        int log = open(logp, O_WRONLY | O_CREAT | (append_log ? O_APPEND : O_TRUNC), 0644);
        int devnull = open("/dev/null", O_RDONLY);
        /* fds 3 and 4 become the listening socket and the ready pipe */
        int lfd = fcntl(lfd_in, F_DUPFD, 10), rfd = fcntl(pfd[1], F_DUPFD, 10);
        if (log < 0 || devnull < 0 || lfd < 0 || rfd < 0) _exit(127);
        if (L->netns[i][0]) {
            char nsp[128];
            snprintf(nsp, sizeof nsp, "/run/netns/%s", L->netns[i]);
            int nfd = open(nsp, O_RDONLY);
            if (nfd < 0 || setns(nfd, CLONE_NEWNET)) {
                dprintf(log, "launcher: cannot enter network namespace %s: %s\n", L->netns[i],
                        strerror(errno));
                _exit(127);
            }
            close(nfd);
        }
        dup2(devnull, 0);
        dup2(log, 1);
        dup2(log, 2);
        dup2(lfd, 3);
        dup2(rfd, 4);
        for (int fd = 5; fd < 1024; fd++) close(fd);
        const char *argv[20 + LAUNCH_EXTRA_MAX]; /* 18 at most before the extras */
        int a = 0;
        argv[a++] = kvserver;
        argv[a++] = "--config";
        argv[a++] = L->conf;
        argv[a++] = "--node";
        argv[a++] = nodes;
        argv[a++] = "--listen-fd";
        argv[a++] = "3";
        argv[a++] = "--ready-fd";
        argv[a++] = "4";
        if (o->bench) argv[a++] = "--bench";
        if (o->insecure) argv[a++] = "--insecure";
        if (o->durable) {
            argv[a++] = "--data-dir";
            argv[a++] = datap;
            /* a first start creates the partition; a restart must find its data */
            if (!append_log || o->init) argv[a++] = "--init";
            if (o->durability) {
                argv[a++] = "--durability";
                argv[a++] = o->durability;
            }
            if (o->checkpoint_every) {
                argv[a++] = "--checkpoint-every";
                argv[a++] = o->checkpoint_every;
            }
        }
        static char exp[LAUNCH_EXTRA_MAX][PATH_MAX];
        for (int k = 0; k < LAUNCH_EXTRA_MAX && o->extra[k]; k++)
            argv[a++] = launch_extra_arg(o->extra[k], i, exp[k], sizeof exp[k]);
        argv[a] = NULL;
        execv(kvserver, (char *const *)argv);
        _exit(127);
    }
    close(pfd[1]);
    *ready_out = pfd[0];
    L->pids[i] = pid;
    if (o->detach) {
        char pp[PATH_MAX + 32];
        snprintf(pp, sizeof pp, "%s/node-%u.pid", L->dir, i);
        FILE *pf = fopen(pp, "w");
        if (pf) {
            fprintf(pf, "%d\n", (int)pid);
            fclose(pf);
        }
    }
    return 0;
}

/* Waits for node i's "ready" line on rfd (or its exit, which closes the pipe) until deadline. */
static int wait_ready(struct launch *L, unsigned i, int rfd, int64_t deadline, char *err,
                      size_t errcap)
{
    char buf[64];
    size_t got = 0;
    for (;;) {
        int64_t left = deadline - clock_now_ns();
        if (left <= 0) {
            snprintf(err, errcap, "node %u was not ready in time (log: %s/node-%u.log)", i,
                     L->dir, i);
            return RDKV_ETIMEDOUT;
        }
        struct pollfd p = {.fd = rfd, .events = POLLIN};
        int r = poll(&p, 1, (int)(left / NS_PER_MS) + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) continue;
        ssize_t n = read(rfd, buf + got, sizeof buf - 1 - got);
        if (n > 0) {
            got += (size_t)n;
            buf[got] = 0;
            if (strstr(buf, "ready")) return 0;
            if (got >= sizeof buf - 1) got = 0;
            continue;
        }
        char line[400];
        last_log_line(L->dir, i, line, sizeof line);
        snprintf(err, errcap, "node %u failed to start: %s", i,
                 line[0] ? line : "exited without a message");
        return RDKV_EUNAVAILABLE;
    }
}

int launch_start(struct launch *L, const struct launch_opts *o, char *err, size_t errcap)
{
    memset(L, 0, sizeof *L);
    if (o->nodes == 0 || o->nodes + o->external > LAUNCH_MAX) {
        snprintf(err, errcap, "node count must be 1..%d", LAUNCH_MAX);
        return RDKV_EINVAL;
    }
    char kvserver[PATH_MAX];
    if (find_kvserver(o, kvserver, err, errcap)) return RDKV_ENOTFOUND;
    if (o->dir) {
        if (mkdir(o->dir, 0755) < 0 && errno != EEXIST) {
            snprintf(err, errcap, "cannot create %s: %s", o->dir, strerror(errno));
            return RDKV_EIO;
        }
        snprintf(L->dir, sizeof L->dir, "%s", o->dir);
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(L->dir, sizeof L->dir, "%s/rdkv-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(L->dir)) {
            snprintf(err, errcap, "mkdtemp: %s", strerror(errno));
            return RDKV_EIO;
        }
        L->own_dir = true;
    }
    L->n = o->nodes;
    L->children = !o->detach;
    unsigned all = o->nodes + o->external; /* (the external ones' ports are bound here too) */
    int fds[LAUNCH_MAX];
    uint16_t ports[LAUNCH_MAX];
    const char *hosts[LAUNCH_MAX];
    for (unsigned i = 0; i < all; i++) {
        hosts[i] = o->node_host[i] ? o->node_host[i] : o->host;
        snprintf(L->netns[i], sizeof L->netns[i], "%s", o->node_netns[i] ? o->node_netns[i] : "");
        int rc = listen_in(L->netns[i], hosts[i], 0, &fds[i], &ports[i], err, errcap);
        if (rc) {
            while (i--) close(fds[i]);
            return rc;
        }
    }
    cluster_config_make(&L->cc, all, hosts, ports);
    snprintf(L->cc.transport, sizeof L->cc.transport, "%s", fab_transport_name(o->transport));
    L->cc.arena_size = o->arena_size;
    L->cc.replicas = o->replicas > 1 ? o->replicas : 1;
    if (o->zookeeper) {
        snprintf(L->cc.zookeeper, sizeof L->cc.zookeeper, "%s", o->zookeeper);
    } else if (L->cc.replicas > 1) {
        int rc = launch_zk_start_at(L->dir, o->zk_host, L->cc.zookeeper, sizeof L->cc.zookeeper,
                                    err, errcap);
        if (rc) {
            for (unsigned i = 0; i < all; i++) close(fds[i]);
            return rc;
        }
        L->own_zk = !o->detach;
    }
    snprintf(L->conf, sizeof L->conf, "%s/cluster.conf", L->dir);
    /* The cluster's secret, beside the config (kept when the folder already has one): the config
     * names it relative to its own folder; this process uses the path from here. */
    char secret[PATH_MAX + 32], client_secret[PATH_MAX + 32];
    snprintf(secret, sizeof secret, "%s/%s", L->dir, LAUNCH_SECRET);
    snprintf(client_secret, sizeof client_secret, "%s/%s", L->dir, LAUNCH_CLIENT_SECRET);
    if (!o->insecure && strlen(secret) >= sizeof L->cc.secret_file) {
        snprintf(err, errcap, "%s: path too long for the secret file", L->dir);
        for (unsigned i = 0; i < all; i++) close(fds[i]);
        return RDKV_EINVAL;
    }
    if (!o->insecure && access(secret, F_OK) != 0) {
        int rc = auth_generate(secret, client_secret, err, errcap);
        if (rc) {
            for (unsigned i = 0; i < all; i++) close(fds[i]);
            return rc;
        }
    }
    if (!o->insecure) snprintf(L->cc.secret_file, sizeof L->cc.secret_file, "%s", LAUNCH_SECRET);
    FILE *cf = fopen(L->conf, "w");
    if (!cf || cluster_config_write(&L->cc, cf) || fclose(cf)) {
        snprintf(err, errcap, "cannot write %s", L->conf);
        for (unsigned i = 0; i < all; i++) close(fds[i]);
        return RDKV_EIO;
    }
    if (!o->insecure) memcpy(L->cc.secret_file, secret, strlen(secret) + 1);
    int ready[LAUNCH_MAX];
    int rc = 0;
    unsigned started = 0;
    for (unsigned i = 0; i < L->n; i++) {
        if ((rc = spawn_node(L, o, kvserver, i, fds[i], false, &ready[i], err, errcap))) break;
        started++;
    }
    for (unsigned i = 0; i < L->n; i++) close(fds[i]);
    for (unsigned k = 0; k < o->external; k++) L->ext_fd[k] = fds[L->n + k];
    if (!rc && o->start_external) rc = o->start_external(L, o->external_arg, err, errcap);
    for (unsigned k = 0; k < o->external; k++) {
        if (L->ext_fd[k] >= 0) close(L->ext_fd[k]);
        L->ext_fd[k] = -1;
    }
    /* Wait for every node's "ready" line (or its exit, which closes the pipe). */
    int64_t deadline = clock_now_ns() + (o->ready_timeout_ns > 0 ? o->ready_timeout_ns : 60 * NS_PER_S);
    for (unsigned i = 0; i < started && rc == 0; i++)
        rc = wait_ready(L, i, ready[i], deadline, err, errcap);
    for (unsigned i = 0; i < started; i++) close(ready[i]);
    if (rc) {
        L->n = started;
        bool own = L->own_dir;
        L->own_dir = false; /* keep the logs for the user to read */
        launch_stop(L, 5 * NS_PER_S);
        if (own) fprintf(stderr, "logs kept in %s\n", L->dir);
        return rc;
    }
    return 0;
}

int launch_attach(struct launch *L, const char *dir, char *err, size_t errcap)
{
    memset(L, 0, sizeof *L);
    snprintf(L->dir, sizeof L->dir, "%s", dir);
    snprintf(L->conf, sizeof L->conf, "%s/cluster.conf", dir);
    int rc = cluster_config_load(L->conf, &L->cc, err, errcap);
    if (rc) return rc;
    L->n = L->cc.n > LAUNCH_MAX ? LAUNCH_MAX : L->cc.n;
    for (unsigned i = 0; i < L->n; i++) {
        char pp[PATH_MAX + 32];
        snprintf(pp, sizeof pp, "%s/node-%u.pid", dir, i);
        FILE *pf = fopen(pp, "r");
        int pid = 0;
        if (pf) {
            if (fscanf(pf, "%d", &pid) != 1) pid = 0;
            fclose(pf);
        }
        /* Only a kvserver that runs this very config is ours to signal. */
        char cmd[PATH_MAX + 64], line[4096];
        snprintf(cmd, sizeof cmd, "/proc/%d/cmdline", pid);
        FILE *cl = pid > 0 ? fopen(cmd, "r") : NULL;
        bool ours = false;
        if (cl) {
            size_t n = fread(line, 1, sizeof line - 1, cl);
            fclose(cl);
            for (size_t k = 0; k < n; k++)
                if (!line[k]) line[k] = ' ';
            line[n] = 0;
            ours = strstr(line, "kvserver") && strstr(line, L->conf);
        }
        L->pids[i] = ours ? pid : 0;
    }
    return 0;
}

int launch_signal(struct launch *L, unsigned node, int sig)
{
    if (node >= L->n || L->pids[node] <= 0) return RDKV_EINVAL;
    return kill(L->pids[node], sig) == 0 ? 0 : RDKV_EIO;
}

int launch_kill(struct launch *L, unsigned node)
{
    if (node >= L->n || L->pids[node] <= 0 || !L->children) return RDKV_EINVAL;
    pid_t pid = L->pids[node];
    if (kill(pid, SIGKILL) != 0) return RDKV_EIO;
    int st;
    pid_t r;
    do r = waitpid(pid, &st, 0);
    while (r < 0 && errno == EINTR);
    L->pids[node] = 0; /* reaped: launch_stop leaves it alone */
    return r == pid ? 0 : RDKV_EIO;
}

int launch_restart(struct launch *L, const struct launch_opts *o, unsigned node, char *err,
                   size_t errcap)
{
    if (node >= L->n || (L->children ? L->pids[node] > 0 : launch_alive(L, node))) {
        snprintf(err, errcap, "node %u is %s", node,
                 node >= L->n ? "not in the cluster" : "still running (stop or kill it first)");
        return RDKV_EINVAL;
    }
    char kvserver[PATH_MAX];
    if (find_kvserver(o, kvserver, err, errcap)) return RDKV_ENOTFOUND;
    int lfd, ready;
    uint16_t port;
    /* The dead node's listening socket can outlive it for a moment: its io_uring's requests are
     * torn down by the kernel after the process is gone. So the port is tried again, bounded. */
    int64_t until = clock_now_ns() + 10 * NS_PER_S;
    int rc;
    while ((rc = listen_in(L->netns[node], L->cc.nodes[node].host, L->cc.nodes[node].port, &lfd,
                           &port, err, errcap)) &&
           clock_now_ns() < until)
        clock_sleep_ns(20 * NS_PER_MS);
    if (rc) return rc;
    rc = spawn_node(L, o, kvserver, node, lfd, true, &ready, err, errcap);
    close(lfd);
    if (rc) return rc;
    rc = wait_ready(L, node, ready,
                    clock_now_ns() + (o->ready_timeout_ns > 0 ? o->ready_timeout_ns : 60 * NS_PER_S),
                    err, errcap);
    close(ready);
    return rc;
}

int launch_restart_all(struct launch *L, const struct launch_opts *o, char *err, size_t errcap)
{
    char kvserver[PATH_MAX];
    if (find_kvserver(o, kvserver, err, errcap)) return RDKV_ENOTFOUND;
    int ready[LAUNCH_MAX];
    for (unsigned i = 0; i < L->n; i++) ready[i] = -1;
    int rc = 0;
    for (unsigned i = 0; i < L->n && !rc; i++) {
        if (L->children ? L->pids[i] > 0 : launch_alive(L, i)) continue; /* (running) */
        int lfd;
        uint16_t port;
        int64_t until = clock_now_ns() + 10 * NS_PER_S; /* (as launch_restart) */
        while ((rc = listen_in(L->netns[i], L->cc.nodes[i].host, L->cc.nodes[i].port, &lfd,
                               &port, err, errcap)) &&
               clock_now_ns() < until)
            clock_sleep_ns(20 * NS_PER_MS);
        if (rc) break;
        rc = spawn_node(L, o, kvserver, i, lfd, true, &ready[i], err, errcap);
        close(lfd);

    }
    int64_t deadline = clock_now_ns() + (o->ready_timeout_ns > 0 ? o->ready_timeout_ns
                                                                  : 60 * NS_PER_S);
    for (unsigned i = 0; i < L->n; i++) {
        if (ready[i] < 0) continue;
        if (!rc) rc = wait_ready(L, i, ready[i], deadline, err, errcap);
        close(ready[i]);
    }

    return rc;
}

int launch_pause(struct launch *L, unsigned node, bool pause)
{
    if (node >= L->n || L->pids[node] <= 0 || !L->children) return RDKV_EINVAL;
    pid_t pid = L->pids[node];
    if (kill(pid, pause ? SIGSTOP : SIGCONT) != 0) return RDKV_EIO;
    int st;
    pid_t r;
    do r = waitpid(pid, &st, pause ? WUNTRACED : WCONTINUED);
    while (r < 0 && errno == EINTR);
    if (r != pid) return RDKV_EIO;
    if (pause ? !WIFSTOPPED(st) : !WIFCONTINUED(st)) return RDKV_EIO; /* it exited instead */
    return 0;
}

bool launch_alive(struct launch *L, unsigned node)
{
    if (node >= L->n || L->pids[node] <= 0) return false;
    if (L->children) {
        int st;
        if (waitpid(L->pids[node], &st, WNOHANG) == L->pids[node]) {
            L->pids[node] = -L->pids[node];
            return false;
        }
    }
    return kill(L->pids[node], 0) == 0;
}

int launch_stop(struct launch *L, int64_t timeout_ns)
{
    int rc = 0;
    for (unsigned i = 0; i < L->n; i++)
        if (L->pids[i] > 0) {
            kill(L->pids[i], SIGCONT);
            kill(L->pids[i], SIGTERM);
        }
    int64_t deadline = clock_now_ns() + timeout_ns;
    for (unsigned i = 0; i < L->n; i++) {
        if (L->pids[i] > 0) {
            int st = wait_exit(L, i, deadline);
            if (st == -2) {
                kill(L->pids[i], SIGKILL);
                st = wait_exit(L, i, clock_now_ns() + 5 * NS_PER_S);
                fprintf(stderr, "node %u did not stop on SIGTERM; killed\n", i);
                rc = RDKV_ETIMEDOUT;
            } else if (st != 0 && rc == 0) {
                rc = RDKV_EIO;
            }
        }
        L->pids[i] = 0;
        /* every node's, a dead one's too (it had left its file behind) */
        char pp[PATH_MAX + 32];
        snprintf(pp, sizeof pp, "%s/node-%u.pid", L->dir, i);
        unlink(pp);
    }
    if (L->own_zk) launch_zk_stop(L->dir);
    L->own_zk = false;
    if (L->own_dir) rm_tree(L->dir);
    cluster_config_free(&L->cc);
    L->n = 0;
    return rc;
}

/* ---- a local ZooKeeper -------------------------------------------------------------------- */

#define ZK_JAR "/usr/share/java/zookeeper.jar"

/* Whether a ZooKeeper answers "imok" on addr:port (one try, up to a second). */
static bool zk_ruok(const char *addr, uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    char buf[8] = {0};
    bool ok = false;
    if (inet_pton(AF_INET, addr, &a.sin_addr) == 1 && !connect(fd, (struct sockaddr *)&a, sizeof a) && write(fd, "ruok", 4) == 4) {
        ssize_t got = 0, k;
        while (got < 4 && (k = read(fd, buf + got, (size_t)(4 - got))) > 0) got += k;
        ok = got == 4 && !memcmp(buf, "imok", 4);
    }
    close(fd);
    return ok;
}

static int zk_pid(const char *dir)
{
    char pp[PATH_MAX + 32];
    snprintf(pp, sizeof pp, "%s/zk/zk.pid", dir);
    FILE *f = fopen(pp, "r");
    int pid = 0;
    if (f) {
        if (fscanf(f, "%d", &pid) != 1) pid = 0;
        fclose(f);
    }
    return pid > 0 && kill(pid, 0) == 0 ? pid : 0;
}

/* The port and address that DIR's ZooKeeper config names (0 and "" when it has none). */
static uint16_t zk_port_of(const char *dir, char addr[64])
{
    char cp[PATH_MAX + 32], line[256];
    snprintf(cp, sizeof cp, "%s/zk/zoo.cfg", dir);
    FILE *f = fopen(cp, "r");
    unsigned port = 0;
    addr[0] = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "clientPort=%u", &port) == 1) continue;
        if (sscanf(line, "clientPortAddress=%63s", addr) == 1) continue;
    }
    if (f) fclose(f);
    return port <= 65535 ? (uint16_t)port : 0;
}

int launch_zk_start(const char *dir, char *hosts, size_t cap, char *err, size_t errcap)
{
    return launch_zk_start_at(dir, NULL, hosts, cap, err, errcap);
}

int launch_zk_start_at(const char *dir, const char *want, char *hosts, size_t cap, char *err,
                       size_t errcap)
{
    if (access(ZK_JAR, R_OK))
        return log_reason(err, errcap, RDKV_ENOTSUP, "ZooKeeper is not installed (%s missing: "
                          "apt-get install zookeeper)", ZK_JAR);
    char zdir[PATH_MAX + 8], ddir[PATH_MAX + 16], cfg[PATH_MAX + 16], logp[PATH_MAX + 16],
        pidp[PATH_MAX + 16];
    snprintf(zdir, sizeof zdir, "%s/zk", dir);
    snprintf(ddir, sizeof ddir, "%s/zk/data", dir);
    snprintf(cfg, sizeof cfg, "%s/zk/zoo.cfg", dir);
    snprintf(logp, sizeof logp, "%s/zk/zk.log", dir);
    snprintf(pidp, sizeof pidp, "%s/zk/zk.pid", dir);
    char addr[64];
    uint16_t port = zk_port_of(dir, addr);
    if (want) {
        if (addr[0] && strcmp(addr, want)) port = 0; /* (another address: a new port there) */
        snprintf(addr, sizeof addr, "%s", want);
    } else if (!addr[0]) {
        snprintf(addr, sizeof addr, "127.0.0.1");
    }
    if (zk_pid(dir) && port && zk_ruok(addr, port)) {
        snprintf(hosts, cap, "%s:%u", addr, port);
        return 0;
    }
    if ((mkdir(zdir, 0700) && errno != EEXIST) || (mkdir(ddir, 0700) && errno != EEXIST))
        return log_reason(err, errcap, RDKV_EIO, "cannot create %s: %s", ddir, strerror(errno));
    /* its port: the one DIR's ZooKeeper had (a config names it: a restart keeps it), else the
     * kernel's pick, bound and let go (ZooKeeper binds it itself) */
    if (!port) {
        int fd;
        if (fab_listen(addr, 0, &fd, &port, err, errcap)) return RDKV_EIO;
        close(fd);
    }
    FILE *f = fopen(cfg, "w");
    if (!f) return log_reason(err, errcap, RDKV_EIO, "cannot write %s", cfg);
    /* tickTime 500 ms: sessions of 1-10 s (rdkv asks for 4) */
    fprintf(f, "tickTime=500\ndataDir=%s\nclientPort=%u\nclientPortAddress=%s\n"
               "maxClientCnxns=200\nadmin.enableServer=false\n4lw.commands.whitelist=ruok,srvr\n",
            ddir, port, addr);
    if (fclose(f)) return log_reason(err, errcap, RDKV_EIO, "cannot write %s", cfg);
    pid_t pid = fork();
    if (pid < 0) return log_reason(err, errcap, RDKV_EIO, "fork: %s", strerror(errno));
    if (pid == 0) {
        setsid();
        int lf = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        int nf = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (lf >= 0) dup2(lf, 1), dup2(lf, 2);
        if (nf >= 0) dup2(nf, 0);
        char logdir[PATH_MAX + 32];
        snprintf(logdir, sizeof logdir, "-Dzookeeper.log.dir=%s", zdir);
        execlp("java", "java", "-Xmx256m", "-cp", "/etc/zookeeper/conf:" ZK_JAR, logdir,
               "-Dzookeeper.root.logger=WARN,CONSOLE",
               "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg, (char *)NULL);
        _exit(127);
    }
    f = fopen(pidp, "w");
    if (f) {
        fprintf(f, "%d\n", (int)pid);
        fclose(f);
    }
    int64_t deadline = clock_now_ns() + 60 * NS_PER_S; /* a JVM's start on a loaded machine */
    for (;;) {
        if (zk_ruok(addr, port)) break;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            return log_reason(err, errcap, RDKV_EIO, "ZooKeeper exited at start (%s has its log)",
                              logp);
        if (clock_now_ns() > deadline) {
            kill(pid, SIGKILL);
            return log_reason(err, errcap, RDKV_ETIMEDOUT, "ZooKeeper did not answer on port %u "
                              "within 60 s (%s has its log)", port, logp);
        }
        clock_sleep_ns(100 * NS_PER_MS); /* (polling another process's readiness) */
    }
    snprintf(hosts, cap, "%s:%u", addr, port);
    return 0;
}

void launch_zk_stop(const char *dir)
{
    int pid = zk_pid(dir);
    if (!pid) return;
    kill(pid, SIGTERM);
    for (int i = 0; i < 100 && kill(pid, 0) == 0; i++) {
        waitpid(pid, NULL, WNOHANG);
        clock_sleep_ns(100 * NS_PER_MS);
    }
    if (kill(pid, 0) == 0) kill(pid, SIGKILL);
    waitpid(pid, NULL, WNOHANG);
}
