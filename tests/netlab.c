/* The network lab (tests/netlab.h). */
#include "tests/netlab.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Runs `ip ARGS...` (NULL-terminated), its output to /dev/null unless loud: its exit status, or
 * -1 when it could not run. */
static int ip(bool loud, ...)
{
    const char *argv[24];
    int a = 0;
    argv[a++] = "ip";
    va_list ap;
    va_start(ap, loud);
    const char *s;
    while ((s = va_arg(ap, const char *)) && a < 23) argv[a++] = s;
    va_end(ap);
    argv[a] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", 0, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", 1, 0);
    if (!loud) posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", 1, 0);
    pid_t pid;
    int rc = posix_spawnp(&pid, "ip", &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc) return -1;
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Namespaces "rdkvPIDn<i>" of runs whose process is gone (killed mid-test): their bridges
 * "rkPIDd"/"rkPIDz" go with them. */
static void sweep_stale(void)
{
    DIR *d = opendir("/run/netns");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        unsigned pid, i;
        char tail;
        if (sscanf(e->d_name, "rdkv%un%u%c", &pid, &i, &tail) != 2) continue;
        if (pid == (unsigned)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char br[16];
        ip(false, "netns", "del", e->d_name, (char *)NULL);
        snprintf(br, sizeof br, "rk%ud", pid);
        ip(false, "link", "del", br, (char *)NULL);
        snprintf(br, sizeof br, "rk%uz", pid);
        ip(false, "link", "del", br, (char *)NULL);
    }
    closedir(d);
}

int netlab_up(struct netlab *nl, unsigned n, char *err, size_t cap)
{
    memset(nl, 0, sizeof *nl);
    if (n == 0 || n > NETLAB_MAX) {
        snprintf(err, cap, "netlab: 1..%d nodes", NETLAB_MAX);
        return -1;
    }
    if (geteuid() != 0) {
        snprintf(err, cap, "network namespaces need root");
        return -1;
    }
    if (ip(false, "-V", (char *)NULL) != 0) {
        snprintf(err, cap, "no `ip` command (apt-get install iproute2)");
        return -1;
    }
    sweep_stale();
    unsigned pid = (unsigned)getpid() % 10000000u;
    /* subnets from the pid: 10.A.B.0/24 (data) and 10.A+64.B.0/24 (zk), A in 64..127 */
    unsigned a = 64 + (pid >> 8) % 64, b = pid & 255;
    nl->n = n;
    const char *tag[2] = {"d", "z"};
    for (int net = 0; net < 2; net++) {
        snprintf(nl->br[net], sizeof nl->br[net], "rk%u%s", pid, tag[net]);
        snprintf(nl->gw[net], sizeof nl->gw[net], "10.%u.%u.254", a + 64 * (unsigned)net, b);
        for (unsigned i = 0; i < n; i++) {
            snprintf(nl->veth[net][i], sizeof nl->veth[net][i], "rk%u%s%u", pid, tag[net], i);
            snprintf(nl->host[net][i], sizeof nl->host[net][i], "10.%u.%u.%u",
                     a + 64 * (unsigned)net, b, i + 1);
        }
    }
    for (unsigned i = 0; i < n; i++) snprintf(nl->ns[i], sizeof nl->ns[i], "rdkv%un%u", pid, i);
    nl->up = true; /* (from here netlab_down removes what was made) */
    char cidr[32];
    int bad = 0;
    for (int net = 0; net < 2 && !bad; net++) {
        snprintf(cidr, sizeof cidr, "%s/24", nl->gw[net]);
        bad = ip(true, "link", "add", nl->br[net], "type", "bridge", (char *)NULL) ||
              ip(true, "addr", "add", cidr, "dev", nl->br[net], (char *)NULL) ||
              ip(true, "link", "set", nl->br[net], "up", (char *)NULL);
    }
    const char *inner[2] = {"data", "zk"};
    for (unsigned i = 0; i < n && !bad; i++) {
        bad = ip(true, "netns", "add", nl->ns[i], (char *)NULL) ||
              ip(true, "-n", nl->ns[i], "link", "set", "lo", "up", (char *)NULL);
        for (int net = 0; net < 2 && !bad; net++) {
            snprintf(cidr, sizeof cidr, "%s/24", nl->host[net][i]);
            bad = ip(true, "link", "add", nl->veth[net][i], "type", "veth", "peer", "name",
                     inner[net], "netns", nl->ns[i], (char *)NULL) ||
                  ip(true, "link", "set", nl->veth[net][i], "master", nl->br[net], "up",
                     (char *)NULL) ||
                  ip(true, "-n", nl->ns[i], "addr", "add", cidr, "dev", inner[net],
                     (char *)NULL) ||
                  ip(true, "-n", nl->ns[i], "link", "set", inner[net], "up", (char *)NULL);
        }
    }
    if (bad) {
        snprintf(err, cap, "could not build the network lab with `ip` (its message is above)");
        netlab_down(nl);
        return -1;
    }
    return 0;
}

int netlab_link(struct netlab *nl, unsigned node, enum netlab_net net, bool up)
{
    if (!nl->up || node >= nl->n) return -1;
    return ip(true, "link", "set", nl->veth[net][node], up ? "up" : "down", (char *)NULL) ? -1 : 0;
}

void netlab_down(struct netlab *nl)
{
    if (!nl->up) return;
    for (unsigned i = 0; i < nl->n; i++) ip(false, "netns", "del", nl->ns[i], (char *)NULL);
    for (int net = 0; net < 2; net++) ip(false, "link", "del", nl->br[net], (char *)NULL);
    nl->up = false;
}
