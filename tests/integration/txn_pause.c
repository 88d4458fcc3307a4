/* A node process paused past its leases and past its peers' down verdict, under load: nothing a
 * transaction wrote may land under another transaction's lock, and every commit stays
 * all-or-nothing and serializable.
 *
 * The cluster: node 0 runs inside this process (rdkv_node_start), so that embedded sessions can
 * run on it; nodes 1 and 2 are kvserver processes forked from here (--bindir), each on a
 * listening socket bound here and handed down (--listen-fd), ready once it says so (--ready-fd),
 * its stderr in a log file. Every node runs with --lease 500ms (two leases: 1 s), --lock-timeout
 * 100ms and --commit-timeout 1s. The peer watcher (server/node.c) declares a peer down after 4
 * missed heartbeats of 250 ms, each allowed 1 s: about 4 to 5 s.
 *
 * Two workloads run together, from embedded sessions on node 0 and from remote sessions whose
 * coordinator is node 0, 1 or 2 (each remote session names only its coordinator's endpoint, so
 * it never moves to another node; those of node 2 freeze with it, one with a client timeout
 * longer than the pause, which rides it out, one with a shorter one, which loses its session and
 * opens a new one once node 2 answers again):
 *   - a bank (as txn_bank): NACCT accounts, transfers that read both accounts for update and move
 *     an amount (a drained closable account is deleted, and inserted again by a later transfer
 *     into it), and read-only audits by gets, by a scan, or both compared;
 *   - registers (as txn_serial): transactions of 1 to 4 reads, read-modify-writes of values
 *     unique in the run, and scans, every attempt recorded for histcheck.
 * Keys spread over the three partitions by hash, so node 2 owns about a third of each.
 *
 * The run, every step a bounded wait for an event (the pause itself is the only sleep):
 *   1. before: the workers commit until enough did (every worker some);
 *   2. pause: SIGSTOP node 2; wait until nodes 0 and 1 both declare it down (their status), and
 *      at least PAUSE_NS in all (well over two leases and the verdict); SIGCONT;
 *   3. after: wait until commits touching node 2's partition succeed again, every worker
 *      (those coordinated by node 2 included) committed again, and enough did; stop.
 * Outcomes of commits during and right after the pause -- RDKV_EABORTED, RDKV_EUNAVAILABLE
 * (also a client timeout inside a transaction), RDKV_EUNKNOWN (a client or coordinator timeout
 * after the decision) -- are expected and counted per phase; any other status fails the test.
 *
 * What is checked:
 *   - the bank: every committed audit, during the run and at the end, sees the total unchanged
 *     and no balance below zero (and its gets and its scan agree). An RDKV_EUNKNOWN transfer may
 *     or may not have happened, so there are no per-account ledgers: the total holds only if
 *     every transfer was all-or-nothing, and a balance stays sane only if no write landed under
 *     another transfer's lock;
 *   - the registers: the history (unknown outcomes as HIST_UNKNOWN), closed by a final committed
 *     read of every register, has no G0, G1a, G1b, G1c, G2 or incompatible read; a negative
 *     control plants a lost update in a copy and histcheck must flag it;
 *   - afterwards every node is up, no coordinator still keeps locks for an unanswered
 *     participant (the "fence" counter "pending" is 0 everywhere), and nodes 1 and 2 exit
 *     cleanly on SIGTERM. Every node's fence counters (status JSON) are printed, with the per-
 *     phase counts and the notable lines of the node logs.
 * When the workers are not back to work within AFTER_WAIT plus twice the time the commits
 * before the pause took (half as many are wanted after it; the second term scales the wait to a
 * loaded machine, where a lock lost for good still never comes back), the test says what is
 * missing and which rows cannot be locked through each node, with their lock lines (rwlock's
 * words decoded), then tries those rows again with lock waits of three leases and once more with
 * the short ones: that tells a lock whose recovery the short waits of transactions never let run
 * from one that is lost for good. (The first runs of this test found both: rwlock's stale remote
 * marks, which only rule 4's two quiet leases within one wait could clear, and given-up tickets
 * dropped while their node was paused; docs/locks.md, rules 6 and 7.) The final checks run either
 * way. The child processes are always continued (SIGCONT), terminated and reaped, also on failure
 * paths; PR_SET_PDEATHSIG kills them should this process die. */
#include "tests/harness.h"
#include "tests/testenv.h"
#include "tests/txn/histcheck.h"
#include "tests/txncluster.h"
#include "tests/txnwork.h"
#include "tools/launcher.h"

#include "common/clock.h"
#include "common/rng.h"

#include "client/embed.h"
#include "rdma/fabric.h"
#include "server/node.h"
#include "storage/store.h"
#include "txn/txn.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define NODES 3
#define PAUSED 2 /* the node that is paused */
#define NACCT 30
#define TOTAL ((int64_t)NACCT * TW_OPENING)
#define MAXTH 16
#define PAUSE_NS (6 * NS_PER_S)      /* the least the pause lasts */
#define VERDICT_WAIT (15 * NS_PER_S) /* the longest wait for the down verdict */
#define BEFORE_WAIT (30 * NS_PER_S)  /* the longest wait for the commits before the pause */
#define AFTER_WAIT (45 * NS_PER_S)   /* and after it (at least): recovery takes a few leases,
                                       and on hot rows whose stale marks only a long wait
                                       clears, longer (6-16 s in five idle runs, one of which
                                       had 77 of its 100 transfers at 17 s) */
#define PROBE_TIME (30 * NS_PER_S)   /* the longest the diagnosis of a failure may take */
#define LONG_OP_MS 20000             /* a client timeout that outlasts the pause */
#define SHORT_OP_MS 1500             /* one that does not */

_Static_assert(NACCT <= TW_MAXACCT, "tw_audit checks at most TW_MAXACCT accounts");

static const char *const node_opts[] = {
    "--lease", "500ms", "--lock-timeout", "100ms", "--commit-timeout", "1s", NULL};

/* ------------------------------------------------------------------------------------------ */
/* The cluster: node 0 here, nodes 1 and 2 child processes. */

struct pcluster {
    char dir[256]; /* config and logs */
    char conf[300];
    char log[NODES][320];
    uint16_t ports[NODES];
    rdkv_node *node0;
    pid_t pid[NODES]; /* children (1 and 2); 0: none, or reaped */
};

/* Appends the options every node takes (the transport's, the test's, and the lock algorithms
 * of RDKV_TEST_ROW_LOCK / RDKV_TEST_RANGE_LOCK as tests/txncluster.c does). */
static unsigned common_args(const char **args, unsigned na, unsigned cap)
{
    static const char *const fixed[] = {"--transport", NULL, "--arena", "64M"};
    for (unsigned k = 0; k < 4 && na < cap; k++)
        args[na++] = k == 1 ? fab_transport_name(tenv_transport) : fixed[k];
    for (unsigned k = 0; node_opts[k] && na < cap; k++) args[na++] = node_opts[k];
    const char *rl = getenv("RDKV_TEST_ROW_LOCK"), *gl = getenv("RDKV_TEST_RANGE_LOCK");
    if (rl && *rl && na + 2 <= cap) {
        args[na++] = "--row-lock";
        args[na++] = rl;
    }
    if (gl && *gl && na + 2 <= cap) {
        args[na++] = "--range-lock";
        args[na++] = gl;
    }
    return na;
}

/* Forks kvserver for node i: fd 3 the listening socket, fd 4 the ready pipe's write end, stdout
 * and stderr the log (info level: the peer watcher's verdicts). Returns the pid or -1. */
static pid_t spawn(struct pcluster *c, unsigned i, const char *kvserver, int lfd, int wfd)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0) return pid;
    /* the child: never outlive the test, even stopped (SIGKILL ends a stopped process too) */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(1);
    int log = open(c->log[i], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int devnull = open("/dev/null", O_RDONLY);
    int l = fcntl(lfd, F_DUPFD, 10), w = fcntl(wfd, F_DUPFD, 10);
    if (log < 0 || devnull < 0 || l < 0 || w < 0) _exit(127);
    dup2(devnull, 0);
    dup2(log, 1);
    dup2(log, 2);
    dup2(l, 3);
    dup2(w, 4);
    for (int fd = 5; fd < 1024; fd++) close(fd);
    setenv("RDKV_LOG", "info", 1);
    char node[16];
    snprintf(node, sizeof node, "%u", i);
    const char *argv[40] = {kvserver,      "--config", c->conf,      "--node", node,
                            "--listen-fd", "3",        "--ready-fd", "4"};
    unsigned na = common_args(argv, 9, 39);
    argv[na] = NULL;
    execv(kvserver, (char *const *)argv);
    _exit(127);
}

static int cluster_start(struct pcluster *c)
{
    memset(c, 0, sizeof *c);
    char kvserver[PATH_MAX], err[256];
    if (launch_kvserver_path(tenv_bindir, kvserver, sizeof kvserver)) {
        fprintf(stderr, "  no executable kvserver in %s\n", tenv_bindir);
        return RDKV_ENOTFOUND;
    }
    int fds[NODES] = {-1, -1, -1};
    int rc = 0;
    for (unsigned i = 0; i < NODES && !rc; i++)
        if ((rc = fab_listen("127.0.0.1", 0, &fds[i], &c->ports[i], err, sizeof err)))
            fprintf(stderr, "  listen: %s\n", err);
    if (!rc && tenv_mkdtemp(c->dir, sizeof c->dir, "rdkv-pause")) {
        perror("  mkdtemp");
        c->dir[0] = 0;
        rc = RDKV_EIO;
    }
    FILE *f = NULL;
    if (!rc) {
        snprintf(c->conf, sizeof c->conf, "%s/cluster.conf", c->dir);
        for (unsigned i = 1; i < NODES; i++)
            snprintf(c->log[i], sizeof c->log[i], "%s/node-%u.log", c->dir, i);
        f = fopen(c->conf, "w");
        if (!f) {
            perror("  config");
            rc = RDKV_EIO;
        }
    }
    if (f) {
        fprintf(f, "# written by tests/integration/txn_pause.c\ntransport %s\n",
                fab_transport_name(tenv_transport));
        for (unsigned i = 0; i < NODES; i++) fprintf(f, "node %u 127.0.0.1:%u\n", i, c->ports[i]);
        const char *secret = tenv_secret_file(); /* and RDKV_SECRET_FILE for rdkv_connect */
        if (secret) fprintf(f, "secret_file %s\n", secret);
        if (fclose(f)) rc = RDKV_EIO;
    }
    /* the children first (this process has no other threads yet); they wait for their peers */
    int ready[NODES] = {-1, -1, -1};
    for (unsigned i = 1; i < NODES && !rc; i++) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0) {
            perror("  pipe");
            rc = RDKV_EIO;
            break;
        }
        c->pid[i] = spawn(c, i, kvserver, fds[i], p[1]);
        close(p[1]);
        ready[i] = p[0];
        if (c->pid[i] < 0) {
            perror("  fork");
            c->pid[i] = 0;
            rc = RDKV_EIO;
        }
    }
    for (unsigned i = 1; i < NODES; i++)
        if (fds[i] >= 0) close(fds[i]);
    /* node 0 here, waiting for both peers */
    if (!rc) {
        char fdstr[16];
        snprintf(fdstr, sizeof fdstr, "%d", fds[0]);
        const char *args[40] = {"--listen-fd", fdstr};
        unsigned na = common_args(args, 2, 39);
        args[na] = NULL;
        rc = rdkv_node_start(c->conf, 0, args, 20000, &c->node0, err, sizeof err);
        if (rc)
            fprintf(stderr, "  node 0: %s (%s)\n", err, rdkv_strerror(rc));
        else
            fds[0] = -1; /* the node's now */
    }
    if (fds[0] >= 0) close(fds[0]);
    /* every child's "ready" (or its exit, which closes the pipe) */
    int64_t deadline = clock_now_ns() + 30 * NS_PER_S;
    for (unsigned i = 1; i < NODES; i++) {
        if (ready[i] < 0) continue;
        char buf[64];
        size_t got = 0;
        while (!rc) {
            int64_t left = deadline - clock_now_ns();
            if (left <= 0) {
                fprintf(stderr, "  node %u was not ready in time\n", i);
                rc = RDKV_ETIMEDOUT;
                break;
            }
            struct pollfd p = {.fd = ready[i], .events = POLLIN};
            int r = poll(&p, 1, (int)(left / NS_PER_MS) + 1);
            if (r <= 0) continue;
            ssize_t n = read(ready[i], buf + got, sizeof buf - 1 - got);
            if (n > 0) {
                got += (size_t)n;
                buf[got] = 0;
                if (strstr(buf, "ready")) break;
                if (got >= sizeof buf - 1) got = 0;
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            char line[400];
            launch_last_line(c->log[i], line, sizeof line);
            fprintf(stderr, "  node %u failed to start: %s\n", i, line[0] ? line : "no message");
            rc = RDKV_EUNAVAILABLE;
        }
        close(ready[i]);
    }
    return rc;
}

/* SIGSTOP (pause) or SIGCONT PAUSED, and wait until the kernel says it took effect. */
static int pause_node(struct pcluster *c, bool pause)
{
    pid_t pid = c->pid[PAUSED];
    if (pid <= 0 || kill(pid, pause ? SIGSTOP : SIGCONT) != 0) return RDKV_EIO;
    int st;
    pid_t r;
    do r = waitpid(pid, &st, pause ? WUNTRACED : WCONTINUED);
    while (r < 0 && errno == EINTR);
    if (r != pid || (pause ? !WIFSTOPPED(st) : !WIFCONTINUED(st))) return RDKV_EIO;
    return 0;
}

/* Whether child i still runs (reaping it, and saying how it ended, if not). */
static bool child_alive(struct pcluster *c, unsigned i)
{
    if (c->pid[i] <= 0) return false;
    int st;
    if (waitpid(c->pid[i], &st, WNOHANG) != c->pid[i]) return true;
    fprintf(stderr, "  node %u's process ended: %s %d\n", i,
            WIFEXITED(st) ? "exit status" : "signal",
            WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    c->pid[i] = 0;
    return false;
}

/* Continues the paused node, stops node 0 (no session may be open), then SIGTERMs the children
 * and reaps them (SIGKILL after 10 s). Returns how many did not exit cleanly. Removes the logs
 * and the directory unless keep. */
static unsigned cluster_stop(struct pcluster *c, bool keep)
{
    for (unsigned i = 1; i < NODES; i++)
        if (c->pid[i] > 0) kill(c->pid[i], SIGCONT); /* never leave a stopped process behind */
    if (c->node0) rdkv_node_stop(c->node0);
    c->node0 = NULL;
    unsigned bad = 0;
    for (unsigned i = 1; i < NODES; i++)
        if (c->pid[i] > 0) kill(c->pid[i], SIGTERM);
    int64_t deadline = clock_now_ns() + 10 * NS_PER_S;
    for (unsigned i = 1; i < NODES; i++) {
        if (c->pid[i] <= 0) continue;
        int st = 0;
        pid_t r;
        while ((r = waitpid(c->pid[i], &st, WNOHANG)) == 0 && clock_now_ns() < deadline)
            clock_sleep_ns(10 * NS_PER_MS);
        if (r == 0) {
            fprintf(stderr, "  node %u did not stop on SIGTERM: killed\n", i);
            kill(c->pid[i], SIGKILL);
            do r = waitpid(c->pid[i], &st, 0);
            while (r < 0 && errno == EINTR);
            bad++;
        } else if (r == c->pid[i] && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
            fprintf(stderr, "  node %u ended with %s %d\n", i,
                    WIFEXITED(st) ? "exit status" : "signal",
                    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            bad++;
        }
        c->pid[i] = 0;
    }
    if (keep && c->dir[0]) {
        fprintf(stderr, "  logs kept in %s\n", c->dir);
    } else if (c->dir[0]) {
        for (unsigned i = 1; i < NODES; i++)
            if (c->log[i][0]) unlink(c->log[i]);
        unlink(c->conf);
        rmdir(c->dir);
    }
    c->dir[0] = 0;
    return bad;
}

/* The notable lines of child i's log: everything but the sessions' idle notes (counted). */
static void print_log(const struct pcluster *c, unsigned i)
{
    FILE *f = fopen(c->log[i], "r");
    if (!f) return;
    char line[1024];
    unsigned shown = 0, more = 0, idle = 0;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, ": info: session ")) {
            idle++;
            continue;
        }
        if (shown < 12) {
            fprintf(stderr, "    node %u log: %s", i, line);
            if (!strchr(line, '\n')) fputc('\n', stderr);
            shown++;
        } else {
            more++;
        }
    }
    fclose(f);
    if (more || idle)
        fprintf(stderr, "    node %u log: (%u more lines; %u session idle notes)\n", i, more, idle);
}

/* ------------------------------------------------------------------------------------------ */
/* The cluster status JSON (rdkv_cluster_status): each node's own status object, and in it its
 * view of its peers and its fence counters. */

/* One past the end of the object or array that starts at p, or NULL. */
static const char *json_end(const char *p, const char *end)
{
    int depth = 0;
    bool str = false;
    for (; p < end && *p; p++) {
        if (str) {
            if (*p == '\\' && p + 1 < end)
                p++;
            else if (*p == '"')
                str = false;
        } else if (*p == '"') {
            str = true;
        } else if (*p == '{' || *p == '[') {
            depth++;
        } else if ((*p == '}' || *p == ']') && --depth == 0) {
            return p + 1;
        }
    }
    return NULL;
}

/* The object or array following pat (which ends with its opening character) in [b, e). */
static bool json_find(const char *b, const char *e, const char *pat, const char **sb,
                      const char **se)
{
    const char *p = memmem(b, (size_t)(e - b), pat, strlen(pat));
    if (!p) return false;
    *sb = p + strlen(pat) - 1;
    *se = json_end(*sb, e);
    return *se != NULL;
}

/* Node i's own status object in a cluster status document (absent: it did not answer). */
static bool node_status(const char *js, unsigned i, const char **b, const char **e)
{
    char pat[48];
    snprintf(pat, sizeof pat, "\"status\":{\"node\":%u,", i);
    const char *p = strstr(js, pat);
    if (!p) return false;
    p += strlen("\"status\":");
    *b = p;
    *e = json_end(p, p + strlen(p));
    return *e != NULL;
}

static uint64_t json_u64(const char *b, const char *e, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = memmem(b, (size_t)(e - b), pat, strlen(pat));
    return p ? strtoull(p + strlen(pat), NULL, 10) : UINT64_MAX;
}

/* How node `obs` sees node `peer`: "up", "down", or "" (obs did not answer). */
static void peer_state(const char *js, unsigned obs, unsigned peer, char *out, size_t cap)
{
    out[0] = 0;
    const char *b, *e, *pb, *pe;
    if (!node_status(js, obs, &b, &e) || !json_find(b, e, "\"peers\":[", &pb, &pe)) return;
    char pat[32];
    snprintf(pat, sizeof pat, "{\"node\":%u,", peer);
    const char *p = memmem(pb, (size_t)(pe - pb), pat, strlen(pat));
    const char *s = p ? memmem(p, (size_t)(pe - p), "\"state\":\"", 9) : NULL;
    if (!s) return;
    s += 9;
    size_t n = 0;
    while (s + n < pe && s[n] != '"' && n + 1 < cap) n++;
    memcpy(out, s, n);
    out[n] = 0;
}

struct fence {
    uint64_t refused, late, kept, resolved, dropped, pending;
};

/* Node i's fence counters; false if it did not answer. */
static bool node_fence(const char *js, unsigned i, struct fence *f, char *text, size_t cap)
{
    const char *b, *e, *fb, *fe;
    if (!node_status(js, i, &b, &e) || !json_find(b, e, "\"fence\":{", &fb, &fe)) return false;
    *f = (struct fence){json_u64(fb, fe, "refused"), json_u64(fb, fe, "late"),
                        json_u64(fb, fe, "kept"),    json_u64(fb, fe, "resolved"),
                        json_u64(fb, fe, "dropped"), json_u64(fb, fe, "pending")};
    if (text) snprintf(text, cap, "%.*s", (int)(fe - fb), fb);
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* The workloads. */

enum kind { W_BANK, W_AUDIT, W_REG };
enum outcome { O_COMMIT, O_ABORT, O_UNKNOWN, O_UNAVAIL, O_ERROR };
static const char *const phase_name[3] = {"before", "paused", "after"};

/* What one kind of transaction did in one phase (the phase in which its outcome came). */
struct tally {
    _Atomic uint64_t commits, p2, aborts, unknown, unavail;
};

struct worker {
    int id;
    enum kind kind;
    bool remote;
    unsigned node; /* remote: the coordinator (embedded sessions are node 0's) */
    int64_t op_ms; /* remote: the client's timeout of one request */
    uint64_t seed;
    struct tw_hist h;
    _Atomic uint64_t commits[3]; /* per phase */
};

static struct run {
    struct pcluster c;
    _Atomic bool stop;
    _Atomic int phase; /* 0 before, 1 paused, 2 after */
    struct tally bank[3], audit[3], reg[3];
    _Atomic uint64_t bad_audits, errors, scans;
    struct worker w[MAXTH];
    pthread_t th[MAXTH];
    unsigned nw, started;
    unsigned part_acct[NACCT], part_reg[TW_NREG];
} R;

static void error(const char *what, int rc)
{
    if (atomic_fetch_add(&R.errors, 1) < 8)
        fprintf(stderr, "  %s: %s\n", what, rdkv_status_name(rc));
}

static enum outcome classify(int rc)
{
    if (rc == 0) return O_COMMIT;
    if (rc == RDKV_EUNKNOWN) return O_UNKNOWN;
    if (rdkv_status_retryable(rc)) return O_ABORT;
    /* a node that is down or does not answer (a client timeout inside a transaction is
     * RDKV_EUNAVAILABLE too): nothing happened */
    if (rc == RDKV_EUNAVAILABLE || rc == RDKV_ETIMEDOUT || rc == RDKV_EFLUSHED) return O_UNAVAIL;
    return O_ERROR;
}

/* Counts an outcome in the current phase; false for a status that is an error. */
static bool note(struct worker *w, struct tally *t, int rc, bool p2, const char *what)
{
    int ph = atomic_load(&R.phase);
    switch (classify(rc)) {
    case O_COMMIT:
        atomic_fetch_add(&t[ph].commits, 1);
        if (p2) atomic_fetch_add(&t[ph].p2, 1);
        atomic_fetch_add(&w->commits[ph], 1);
        return true;
    case O_ABORT:
        atomic_fetch_add(&t[ph].aborts, 1);
        return true;
    case O_UNKNOWN:
        atomic_fetch_add(&t[ph].unknown, 1);
        return true;
    case O_UNAVAIL:
        atomic_fetch_add(&t[ph].unavail, 1);
        return true;
    case O_ERROR:
        break;
    }
    error(what, rc);
    return false;
}

/* After a node was unavailable: a pause before the next try (operations on a node declared down
 * fail at once). */
static void backoff(void)
{
    clock_sleep_ns(20 * NS_PER_MS);
}

static void bank_loop(struct worker *w, rdkv_session *s)
{
    while (!atomic_load(&R.stop)) {
        int a = (int)rng_below(&w->seed, NACCT);
        int b = (int)rng_below(&w->seed, NACCT - 1);
        if (b >= a) b++;
        bool p2 = R.part_acct[a] == PAUSED || R.part_acct[b] == PAUSED;
        rdkv_txn *t;
        int rc = rdkv_txn_begin(s, &t);
        if (rc) {
            if (!note(w, R.bank, rc, p2, "transfer begin")) return;
            backoff();
            continue;
        }
        struct tw_moved m; /* no ledgers here: an unknown outcome may or may not have moved it */
        for (;;) {
            rc = tw_transfer(t, &w->seed, a, b, &m);
            if (!rc) rc = rdkv_txn_commit(t);
            if (!rc || !rdkv_status_retryable(rc) || atomic_load(&R.stop)) break;
            note(w, R.bank, rc, p2, "transfer");
            if ((rc = rdkv_txn_on_error(t, rc))) break; /* backs off and begins again */
        }
        rdkv_txn_free(t);
        if (!note(w, R.bank, rc, p2, "transfer")) return;
        if (classify(rc) == O_UNAVAIL) backoff();
    }
}

static bool audit_bad(const char *who, int how, int64_t sum, int64_t minbal, bool mismatch)
{
    if (sum == TOTAL && minbal >= 0 && !mismatch) return false;
    if (atomic_fetch_add(&R.bad_audits, 1) < 8)
        fprintf(stderr,
                "  BAD audit (%s, %s, phase %s): total %" PRId64 " (want %" PRId64
                "), lowest balance %" PRId64 "%s\n",
                who, tw_audit_name(how), phase_name[atomic_load(&R.phase)], sum, TOTAL, minbal,
                mismatch ? ", gets and scan disagree" : "");
    return true;
}

static void audit_loop(struct worker *w, rdkv_session *s)
{
    unsigned round = 0;
    while (!atomic_load(&R.stop)) {
        /* pace: let some transfers commit between two audits (at most 200 ms) */
        uint64_t seen = 0, now = 0;
        for (int p = 0; p < 3; p++) seen += atomic_load(&R.bank[p].commits);
        int64_t until = clock_now_ns() + 200 * NS_PER_MS;
        do {
            clock_sleep_ns(2 * NS_PER_MS);
            now = 0;
            for (int p = 0; p < 3; p++) now += atomic_load(&R.bank[p].commits);
        } while (now < seen + 50 && clock_now_ns() < until && !atomic_load(&R.stop));
        int how = (int)(round++ % 3);
        rdkv_txn *t;
        int rc = rdkv_txn_begin(s, &t);
        if (rc) {
            if (!note(w, R.audit, rc, true, "audit begin")) return;
            backoff();
            continue;
        }
        int64_t sum = 0, minbal = 0;
        bool mismatch = false;
        for (;;) {
            rc = tw_audit(t, NACCT, how, &sum, &minbal, &mismatch);
            if (!rc) rc = rdkv_txn_commit(t);
            if (!rc || !rdkv_status_retryable(rc) || atomic_load(&R.stop)) break;
            note(w, R.audit, rc, true, "audit");
            if ((rc = rdkv_txn_on_error(t, rc))) break;
        }
        rdkv_txn_free(t);
        /* only a committed audit's reads were all held under their locks to the end */
        if (!rc) audit_bad(w->remote ? "remote" : "embedded", how, sum, minbal, mismatch);
        if (!note(w, R.audit, rc, true, "audit")) return;
        if (classify(rc) == O_UNAVAIL) backoff();
    }
}

/* Whether an attempt that accessed the registers in touched (tw_reg_did) involved the paused
 * node's partition. */
static bool reg_touches_paused(uint64_t touched)
{
    for (unsigned r = 0; r < TW_NREG; r++)
        if ((touched >> r & 1) && R.part_reg[r] == PAUSED) return true;
    return false;
}

static void reg_loop(struct worker *w, rdkv_session *s)
{
    static _Thread_local struct hist_op ops[TW_MAXOPS];
    uint64_t counter = 0, attempts = 0;
    rdkv_txn *t = NULL;
    while (!atomic_load(&R.stop)) {
        int rc;
        if (!t && (rc = rdkv_txn_begin(s, &t))) {
            t = NULL;
            if (!note(w, R.reg, rc, false, "register begin")) return;
            backoff();
            continue;
        }
        uint32_t nops = 0;
        struct tw_reg_did did;
        rc = tw_reg_attempt(t, w->id, &w->seed, &counter, ops, &nops, &did);
        atomic_fetch_add(&R.scans, did.scans);
        bool p2 = reg_touches_paused(did.touched);
        /* committed, unknown (it may have happened), or else nothing of it happened: also when
         * it failed midway, and when a remote session lost its node before the commit */
        uint8_t status = rc == 0               ? HIST_COMMITTED
                         : rc == RDKV_EUNKNOWN ? HIST_UNKNOWN
                                               : HIST_ABORTED;
        if (!tw_hist_add(&w->h, tw_uid(w->id, ++attempts), status, ops, nops)) {
            error("history", RDKV_ENOMEM);
            break;
        }
        if (!note(w, R.reg, rc, p2, "register transaction")) break;
        if (rdkv_status_retryable(rc)) {
            if (!(rc = rdkv_txn_on_error(t, rc))) continue; /* backed off, began again */
            if (!note(w, R.reg, rc, false, "register begin")) break;
        }
        rdkv_txn_free(t); /* the next attempt on a fresh handle */
        t = NULL;
        if (classify(rc) == O_UNAVAIL) backoff();
    }
    if (t) rdkv_txn_free(t);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    rdkv_options o;
    rdkv_options_init(&o);
    o.max_retries = 1000000; /* conflicts are retried until the run stops */
    /* Registers are read-modify-written in random order: deadlocks are common and each lasts
     * until a lock wait runs out, so a short bound keeps the run brisk (as txn_serial). An
     * audit holds NACCT shared locks at once and waits longer (as txn_bank), still well inside
     * the 375 ms a remote lock may be held (three quarters of a lease). */
    o.lock_timeout_ms = w->kind == W_REG ? 20 : w->kind == W_AUDIT ? 200 : 0;
    o.read_only = w->kind == W_AUDIT;
    rdkv_session *s;
    int rc;
    if (w->remote) {
        o.op_timeout_ms = w->op_ms;
        o.connect_timeout_ms = 1000;
        char ep[32];
        snprintf(ep, sizeof ep, "127.0.0.1:%u", R.c.ports[w->node]); /* this node only */
        rc = rdkv_connect(ep, &o, &s);
    } else {
        rc = rdkv_session_open(R.c.node0, &o, &s);
    }
    if (rc) {
        error("open session", rc);
        return NULL;
    }
    if (w->kind == W_BANK)
        bank_loop(w, s);
    else if (w->kind == W_AUDIT)
        audit_loop(w, s);
    else
        reg_loop(w, s);
    rdkv_session_close(s);
    return NULL;
}

static const char *worker_name(const struct worker *w, char *buf, size_t cap)
{
    static const char *const kinds[] = {"transfers", "audits", "registers"};
    if (w->remote)
        snprintf(buf, cap, "%s, remote via node %u%s", kinds[w->kind], w->node,
                 w->node == PAUSED
                     ? (w->op_ms == LONG_OP_MS ? " (long timeout)" : " (short timeout)")
                     : "");
    else
        snprintf(buf, cap, "%s, embedded on node 0", kinds[w->kind]);
    return buf;
}

/* ------------------------------------------------------------------------------------------ */
/* The run. */

static uint64_t sum_commits(const struct tally *t, int ph, bool p2)
{
    return atomic_load(p2 ? &t[ph].p2 : &t[ph].commits);
}

/* Whether the workers work in phase ph: every worker committed at least 3 times in it, and
 * enough transfers and register transactions did (a quarter of them touching the paused node's
 * partition), and some audits. With why, says what is missing. */
static bool working(int ph, uint64_t want_bank, uint64_t want_reg, bool why)
{
    bool ok = true;
    for (unsigned i = 0; i < R.nw; i++)
        if (atomic_load(&R.w[i].commits[ph]) < 3) {
            ok = false;
            if (why) {
                char name[96];
                fprintf(stderr, "  worker %u (%s) committed %llu times %s the pause\n", i,
                        worker_name(&R.w[i], name, sizeof name),
                        (unsigned long long)atomic_load(&R.w[i].commits[ph]),
                        ph ? "since" : "before");
            }
        }
    const struct {
        const char *what;
        uint64_t have, want;
    } need[] = {
        {"transfers", sum_commits(R.bank, ph, false), want_bank},
        {"transfers touching node 2", sum_commits(R.bank, ph, true), want_bank / 4},
        {"register transactions", sum_commits(R.reg, ph, false), want_reg},
        {"register transactions touching node 2", sum_commits(R.reg, ph, true), want_reg / 4},
        {"audits", sum_commits(R.audit, ph, false), 3},
    };
    for (unsigned k = 0; k < sizeof need / sizeof need[0]; k++)
        if (need[k].have < need[k].want) {
            ok = false;
            if (why)
                fprintf(stderr, "  %llu %s committed %s the pause, %llu wanted\n",
                        (unsigned long long)need[k].have, need[k].what, ph ? "since" : "before",
                        (unsigned long long)need[k].want);
        }
    return ok;
}

/* Polls the cluster status (from node 0) until every observer in obs sees `peer` in `state`, or
 * the deadline; ms[k] gets the time from t0 at which observer k was first seen so (-1: never).
 * Returns whether all were. */
static bool wait_state(rdkv_session *s, const unsigned *obs, unsigned nobs, unsigned peer,
                       const char *state, int64_t t0, int64_t deadline, double *ms)
{
    unsigned seen = 0;
    for (unsigned k = 0; k < nobs; k++) ms[k] = -1;
    while (seen < nobs && clock_now_ns() < deadline) {
        char *js = NULL;
        if (rdkv_cluster_status(s, &js) == 0 && js) {
            for (unsigned k = 0; k < nobs; k++) {
                char st[16];
                peer_state(js, obs[k], peer, st, sizeof st);
                if (ms[k] < 0 && !strcmp(st, state)) {
                    ms[k] = (double)(clock_now_ns() - t0) / 1e6;
                    seen++;
                }
            }
        }
        free(js);
        if (seen < nobs) clock_sleep_ns(50 * NS_PER_MS);
    }
    return seen == nobs;
}

/* One final transaction, retried while the cluster settles (bounded). */
static int final_audit(rdkv_session *s, int64_t *sum, int64_t *minbal, bool *mismatch)
{
    int64_t until = clock_now_ns() + 10 * NS_PER_S;
    int rc;
    do {
        rdkv_txn *t;
        if ((rc = rdkv_txn_begin(s, &t)) == 0) {
            rc = tw_audit(t, NACCT, 2, sum, minbal, mismatch);
            if (!rc) rc = rdkv_txn_commit(t);
            rdkv_txn_free(t);
        }
        if (rc && classify(rc) != O_ERROR) clock_sleep_ns(20 * NS_PER_MS);
    } while (rc && classify(rc) != O_ERROR && clock_now_ns() < until);
    return rc;
}

static int final_regs(rdkv_session *s, struct hist_op *fin)
{
    int64_t until = clock_now_ns() + 10 * NS_PER_S;
    int rc;
    do {
        rdkv_txn *t;
        if ((rc = rdkv_txn_begin(s, &t)) == 0) {
            rc = tw_reg_read_all(t, fin);
            if (!rc) rc = rdkv_txn_commit(t);
            rdkv_txn_free(t);
        }
        if (rc && classify(rc) != O_ERROR) clock_sleep_ns(20 * NS_PER_MS);
    } while (rc && classify(rc) != O_ERROR && clock_now_ns() < until);
    return rc;
}

/* Checks the register history (closed by fin) and runs the negative control on a copy. */
static void check_history(const struct hist_op *fin)
{
    size_t n = fin ? 1 : 0, nops = fin ? TW_NREG : 0;
    for (unsigned i = 0; i < R.nw; i++) {
        n += R.w[i].h.n;
        nops += R.w[i].h.nops;
    }
    struct hist_txn *all = calloc(n, sizeof *all), *all2 = calloc(n, sizeof *all2);
    struct hist_op *copy = calloc(nops, sizeof *copy);
    if (!all || !all2 || !copy) {
        free(all);
        free(all2);
        free(copy);
        REQUIRE(!"memory for the history");
    }
    size_t k = 0;
    for (unsigned i = 0; i < R.nw; i++) k += tw_hist_append(all + k, &R.w[i].h);
    uint64_t writes = 0, committed = tw_hist_count(all, k, HIST_COMMITTED, &writes),
             unknown = tw_hist_count(all, k, HIST_UNKNOWN, NULL);
    if (fin) all[k++] = (struct hist_txn){UINT64_MAX, HIST_COMMITTED, TW_NREG, fin};
    struct histcheck_report rep;
    memset(&rep, 0, sizeof rep);
    int rc = histcheck_run(all, n, TW_NREG, &rep);
    fprintf(stderr,
            "  register history: %zu attempts (%llu committed, %llu unknown), %zu ops, %llu "
            "committed writes, %llu scans\n",
            n, (unsigned long long)committed, (unsigned long long)unknown, nops,
            (unsigned long long)writes, (unsigned long long)atomic_load(&R.scans));
    tw_report_print("history", rc, &rep);
    CHECK_EQ(rc, 0);
    CHECK_EQ(tw_report_anomalies(&rep), 0);
    CHECK(writes >= 200);
    if (getenv("RDKV_HISTORY_OUT")) { /* for a look with other tools */
        FILE *f = fopen(getenv("RDKV_HISTORY_OUT"), "w");
        if (f) {
            histcheck_save(f, all, n);
            fclose(f);
        }
    }

    /* Negative control: a committed read-modify-write of a register that read v (written by
     * W, which had read p) now reads p instead: two committed versions claim p, a lost update. */
    tw_hist_copy(all2, copy, all, n);
    bool planted = tw_hist_plant_lost_update(all2, n, "control");
    CHECK(planted);
    memset(&rep, 0, sizeof rep);
    rc = histcheck_run(all2, n, TW_NREG, &rep);
    tw_report_print("control (lost update)", rc, &rep);
    CHECK_EQ(rc, 1);
    CHECK(tw_report_anomalies(&rep) > 0);
    free(copy);
    free(all2);
    free(all);
}

static void print_tallies(void)
{
    static const char *const what[3] = {"transfers", "audits", "registers"};
    struct tally *t[3] = {R.bank, R.audit, R.reg};
    for (int k = 0; k < 3; k++)
        for (int ph = 0; ph < 3; ph++)
            fprintf(stderr,
                    "  %-9s %-6s: %6llu committed (%llu touching node %u), %llu aborted, "
                    "%llu unknown, %llu unavailable\n",
                    what[k], phase_name[ph], (unsigned long long)atomic_load(&t[k][ph].commits),
                    (unsigned long long)atomic_load(&t[k][ph].p2), PAUSED,
                    (unsigned long long)atomic_load(&t[k][ph].aborts),
                    (unsigned long long)atomic_load(&t[k][ph].unknown),
                    (unsigned long long)atomic_load(&t[k][ph].unavail));
}

/* After a failure: the lock line of key's row as node 0 sees it (plain loads for its own rows,
 * one READ for a peer's: every candidate row of the key's index probe), decoded as rwlock's words
 * (docs/locks.md, "Layout": n = served, m = next ticket; the cross words' activity counters
 * actO/actR/actW and counts eW/eX/eS), or raw under another row lock. */
static void print_lock_line(const char *key)
{
    struct node *n = rdkv_node_server(R.c.node0);
    struct fabric *f = node_fabric(n);
    struct fab_ctx *ctx;
    if (fab_ctx_create(f, &ctx)) return;
    uint32_t klen = (uint32_t)strlen(key);
    unsigned part = rdkv_key_partition(key, klen, NODES);
    rptr cand[4];
    int nc = 0;
    if (part == 0) {
        nc = store_lookup(txn_env_store(node_txn(n)), key, klen, &cand[0]) ? 0 : 1;
    } else {
        struct store_remote rem;
        if (store_remote_open(ctx, (uint16_t)part, NULL, &rem) == 0)
            nc = store_remote_probe(ctx, &rem, store_hash(key, klen), cand, 4);
    }
    const char *rl = getenv("RDKV_TEST_ROW_LOCK");
    bool rw = !rl || !*rl || !strcmp(rl, "rwlock");
    for (int i = 0; i < nc; i++) {
        uint64_t l[8] = {0}, *lp = fab_local(f, cand[i]);
        if (lp)
            for (int j = 0; j < 8; j++) l[j] = __atomic_load_n(&lp[j], __ATOMIC_SEQ_CST);
        else if (fab_read(ctx, cand[i], l, sizeof l))
            continue;
#define F16(w, sh) (unsigned)((w) >> (sh)&0xFFFF)
#define CW(w)                                                                                      \
    (unsigned)((w) >> 56), (unsigned)((w) >> 48 & 0xFF), (unsigned)((w) >> 40 & 0xFF),             \
        (unsigned)((w) >> 27 & 0x1FFF), (unsigned)((w) >> 14 & 0x1FFF), (unsigned)((w)&0x3FFF)
        if (rw)
            fprintf(stderr,
                    "    %s lock line: RT nX %u nS %u mX %u mS %u | RC act %02x/%02x/%02x eW %u "
                    "eX %u eS %u | LT nX %u nS %u mX %u mS %u | LC act %02x/%02x/%02x eW %u eX %u "
                    "eS %u | TURN %s\n",
                    key, F16(l[0], 48), F16(l[0], 32), F16(l[0], 16), F16(l[0], 0), CW(l[1]),
                    F16(l[2], 48), F16(l[2], 32), F16(l[2], 16), F16(l[2], 0), CW(l[3]),
                    l[4] ? "remote" : "local");
        else
            fprintf(stderr, "    %s lock line: %016llx %016llx %016llx %016llx %016llx\n", key,
                    (unsigned long long)l[0], (unsigned long long)l[1], (unsigned long long)l[2],
                    (unsigned long long)l[3], (unsigned long long)l[4]);
#undef F16
#undef CW
    }
    fab_ctx_destroy(ctx);
}

/* After a failure: which rows cannot be locked now, shared or exclusively, through session s
 * (one read-only transaction per row and mode; the session's lock timeout bounds each wait).
 * With all, every row in both modes; else only the rows marked in stuck, exclusively. A row
 * that fails is marked. Gives up at the deadline. */
static void probe_rows(rdkv_session *s, const char *via, bool all, bool lines, bool *stuck,
                       int64_t deadline)
{
    unsigned bad = 0, tried = 0;
    for (unsigned k = 0; k < NACCT + TW_NREG && clock_now_ns() < deadline; k++) {
        if (!all && !stuck[k]) continue;
        char key[16];
        if (k < NACCT)
            tw_acct_key(key, (int)k);
        else
            tw_reg_key(key, k - NACCT);
        int rc[2] = {0, 0};
        for (int upd = all ? 0 : 1; upd < 2; upd++) { /* a second look: exclusive only */
            rdkv_txn *t;
            if ((rc[upd] = rdkv_txn_begin(s, &t))) continue;
            const void *v;
            size_t vl;
            rc[upd] = upd ? rdkv_txn_get_for_update(t, key, strlen(key), &v, &vl)
                          : rdkv_txn_get(t, key, strlen(key), &v, &vl);
            if (rc[upd] == RDKV_ENOTFOUND) rc[upd] = 0; /* a closed account */
            if (!rc[upd]) rc[upd] = rdkv_txn_commit(t);
            rdkv_txn_free(t);
        }
        tried++;
        if (!rc[0] && !rc[1]) continue;
        stuck[k] = true;
        if (bad++ < 12) {
            fprintf(stderr, "    via %s: %s (node %u's): shared %s, exclusive %s\n", via, key,
                    rdkv_key_partition(key, strlen(key), NODES),
                    all ? rdkv_status_name(rc[0]) : "-", rdkv_status_name(rc[1]));
            if (lines) print_lock_line(key);
        }
    }
    fprintf(stderr, "    via %s: %u of %u rows tried cannot be locked%s\n", via, bad, tried,
            clock_now_ns() < deadline ? "" : " (out of time)");
}

/* Prints every node's fence counters; returns the sum of "pending" (UINT64_MAX if a node did
 * not answer). */
static uint64_t fences(rdkv_session *s, bool print)
{
    char *js = NULL;
    if (rdkv_cluster_status(s, &js) || !js) return UINT64_MAX;
    uint64_t pending = 0;
    for (unsigned i = 0; i < NODES; i++) {
        struct fence f;
        char text[256];
        if (!node_fence(js, i, &f, text, sizeof text)) {
            if (print) fprintf(stderr, "  node %u: no status\n", i);
            pending = UINT64_MAX;
            continue;
        }
        if (print) {
            char st[3][16];
            for (unsigned p = 0; p < NODES; p++) peer_state(js, i, p, st[p], sizeof st[p]);
            fprintf(stderr, "  node %u: fence %s; sees nodes 0..2 %s/%s/%s\n", i, text, st[0],
                    st[1], st[2]);
        }
        if (pending != UINT64_MAX) pending += f.pending;
    }
    free(js);
    return pending;
}

/* Stops and joins the workers, then prints what they did. */
static void stop_workers(void)
{
    atomic_store(&R.stop, true);
    for (unsigned i = 0; i < R.started; i++) pthread_join(R.th[i], NULL);
    R.started = 0;
    print_tallies();
    for (unsigned i = 0; i < R.nw; i++) {
        char name[96];
        worker_name(&R.w[i], name, sizeof name);
        fprintf(stderr, "  worker %2u (%s): %llu / %llu / %llu committed\n", i, name,
                (unsigned long long)R.w[i].commits[0], (unsigned long long)R.w[i].commits[1],
                (unsigned long long)R.w[i].commits[2]);
    }
}

/* The workers did not get their work done (they are stopped): which rows cannot be locked,
 * through every node, with their lock lines; then whether waits of three leases free them
 * (rule 3's and rule 4's two quiet leases, docs/locks.md, then fit in one wait), and the short
 * waits again. The probes only read; bounded by PROBE_TIME in all. */
static void probe_stuck(void)
{
    static const int64_t wait_ms[3] = {0, 1500, 0};
    static const char *const title[3] = {"", ", waiting up to 1500 ms", ", again"};
    static bool stuck[NACCT + TW_NREG];
    memset(stuck, 0, sizeof stuck);
    int64_t deadline = clock_now_ns() + PROBE_TIME;
    for (int pass = 0; pass < 3; pass++) {
        rdkv_options po;
        rdkv_options_init(&po);
        po.lock_timeout_ms = wait_ms[pass];
        fprintf(stderr, "  rows that cannot be locked%s:\n", title[pass]);
        for (unsigned n = 0; n < NODES; n++) {
            rdkv_session *r;
            char ep[32], via[16];
            snprintf(ep, sizeof ep, "127.0.0.1:%u", R.c.ports[n]);
            snprintf(via, sizeof via, "node %u", n);
            if ((n ? rdkv_connect(ep, &po, &r) : rdkv_session_open(R.c.node0, &po, &r)) == 0) {
                probe_rows(r, via, pass == 0, pass != 1, stuck, deadline);
                rdkv_session_close(r);
            }
        }
    }
}

/* The scenario; returns early (REQUIRE) on a failure, the caller cleans up. */
static void scenario(rdkv_session **s0)
{
    struct pcluster *c = &R.c;
    REQUIRE(rdkv_session_open(c->node0, NULL, s0) == 0);
    /* the data: NACCT accounts of TW_OPENING, TW_NREG registers of 0 */
    unsigned acct_parts[NODES] = {0}, reg_parts[NODES] = {0};
    rdkv_txn *t;
    REQUIRE(rdkv_txn_begin(*s0, &t) == 0);
    for (int i = 0; i < NACCT; i++) {
        char k[16];
        tw_acct_key(k, i);
        R.part_acct[i] = rdkv_key_partition(k, strlen(k), NODES);
        acct_parts[R.part_acct[i]]++;
        CHECK_EQ(tw_acct_write(t, i, TW_OPENING), 0);
    }
    for (unsigned r = 0; r < TW_NREG; r++) {
        char k[16];
        tw_reg_key(k, r);
        R.part_reg[r] = rdkv_key_partition(k, strlen(k), NODES);
        reg_parts[R.part_reg[r]]++;
        CHECK_EQ(tw_reg_write(t, r, 0), 0);
    }
    CHECK_EQ(rdkv_txn_commit(t), 0);
    rdkv_txn_free(t);
    fprintf(stderr, "  accounts on nodes 0/1/2: %u/%u/%u; registers: %u/%u/%u\n", acct_parts[0],
            acct_parts[1], acct_parts[2], reg_parts[0], reg_parts[1], reg_parts[2]);
    for (unsigned i = 0; i < NODES; i++) REQUIRE(acct_parts[i] > 0 && reg_parts[i] > 0);

    /* the workers */
    static const struct worker plan[] = {
        {.kind = W_BANK},
        {.kind = W_BANK, .remote = true, .node = 0, .op_ms = SHORT_OP_MS},
        {.kind = W_BANK, .remote = true, .node = 1, .op_ms = SHORT_OP_MS},
        {.kind = W_BANK, .remote = true, .node = 2, .op_ms = LONG_OP_MS},
        {.kind = W_BANK, .remote = true, .node = 2, .op_ms = SHORT_OP_MS},
        {.kind = W_AUDIT},
        {.kind = W_AUDIT, .remote = true, .node = 1, .op_ms = SHORT_OP_MS},
        {.kind = W_REG},
        {.kind = W_REG},
        {.kind = W_REG, .remote = true, .node = 0, .op_ms = SHORT_OP_MS},
        {.kind = W_REG, .remote = true, .node = 1, .op_ms = SHORT_OP_MS},
        {.kind = W_REG, .remote = true, .node = 2, .op_ms = LONG_OP_MS},
        {.kind = W_REG, .remote = true, .node = 2, .op_ms = SHORT_OP_MS},
    };
    R.nw = sizeof plan / sizeof plan[0];
    for (unsigned i = 0; i < R.nw; i++) {
        R.w[i] = plan[i];
        R.w[i].id = (int)i;
        R.w[i].seed = 0x9E3779B97F4A7C15ull * (i + 1) ^ (uint64_t)clock_now_ns();
        if (!R.w[i].seed) R.w[i].seed = 1;
        REQUIRE(pthread_create(&R.th[i], NULL, worker_main, &R.w[i]) == 0);
        R.started++;
    }

    /* 1. before: enough commits of each kind, every worker some */
    uint64_t want_bank = tenv_quick ? 100 : 200, want_reg = tenv_quick ? 200 : 400;
    int64_t t0 = clock_now_ns(), until = t0 + BEFORE_WAIT;
    bool ok;
    while (!(ok = working(0, want_bank, want_reg, false)) && !atomic_load(&R.errors) &&
           clock_now_ns() < until)
        clock_sleep_ns(5 * NS_PER_MS);
    int64_t before_ns = clock_now_ns() - t0;
    fprintf(stderr, "  before the pause: %.1f s\n", (double)before_ns / 1e9);
    if (!ok || atomic_load(&R.errors)) {
        fprintf(stderr, "  NOT WORKING before the pause, after %.0f s:\n",
                (double)BEFORE_WAIT / 1e9);
        working(0, want_bank, want_reg, true);
        stop_workers();
        if (!ok) probe_stuck();
    }
    REQUIRE(ok && !atomic_load(&R.errors) && child_alive(c, 1) && child_alive(c, 2));

    /* 2. the pause: past both peers' down verdicts and past PAUSE_NS */
    atomic_store(&R.phase, 1);
    int64_t tp = clock_now_ns();
    REQUIRE(pause_node(c, true) == 0);
    static const unsigned obs[2] = {0, 1};
    double down_ms[2], up_ms[1];
    bool verdict = wait_state(*s0, obs, 2, PAUSED, "down", tp, tp + VERDICT_WAIT, down_ms);
    fprintf(stderr,
            "  node %u stopped; declared down by node 0 after %.0f ms, by node 1 after "
            "%.0f ms\n",
            PAUSED, down_ms[0], down_ms[1]);
    CHECK(verdict);
    int64_t hold = tp + PAUSE_NS - clock_now_ns();
    if (hold > 0) clock_sleep_ns(hold); /* the pause itself */
    int64_t tc = clock_now_ns();
    REQUIRE(pause_node(c, false) == 0);
    atomic_store(&R.phase, 2);
    fprintf(stderr, "  node %u continued after a pause of %.2f s (two leases: 1 s)\n", PAUSED,
            (double)(tc - tp) / 1e9);

    /* 3. after: node 2 up again, then commits on its partition and through it, every worker
     * again, and enough of each kind */
    bool up = wait_state(*s0, obs, 1, PAUSED, "up", tc, tc + VERDICT_WAIT, up_ms);
    fprintf(stderr, "  node %u up again for node 0 after %.0f ms\n", PAUSED, up_ms[0]);
    CHECK(up);
    int64_t after_wait = AFTER_WAIT + 2 * before_ns;
    until = clock_now_ns() + after_wait;
    while (!(ok = working(2, want_bank / 2, want_reg / 2, false)) && !atomic_load(&R.errors) &&
           clock_now_ns() < until)
        clock_sleep_ns(5 * NS_PER_MS);
    fprintf(stderr, "  after the pause: %.1f s\n", (double)(clock_now_ns() - tc) / 1e9);
    if (!ok) {
        fprintf(stderr, "  NOT BACK TO WORK after %.0f s:\n", (double)after_wait / 1e9);
        working(2, want_bank / 2, want_reg / 2, true);
    }
    CHECK(ok);
    stop_workers();
    if (!ok) probe_stuck(); /* the final checks below run either way */

    /* no coordinator still keeps locks for a participant that did not answer */
    int64_t tq = clock_now_ns();
    uint64_t pending;
    while ((pending = fences(*s0, false)) != 0 && clock_now_ns() < tq + 10 * NS_PER_S)
        clock_sleep_ns(20 * NS_PER_MS);
    fences(*s0, true);
    CHECK_EQ(pending, 0);

    /* the final state: total and signs, from node 0 and through node 2 */
    rdkv_session *r2;
    char ep[32];
    snprintf(ep, sizeof ep, "127.0.0.1:%u", c->ports[PAUSED]);
    REQUIRE(rdkv_connect(ep, NULL, &r2) == 0);
    rdkv_session *both[2] = {*s0, r2};
    for (int k = 0; k < 2; k++) {
        int64_t sum = 0, minbal = 0;
        bool mismatch = false;
        int rc = final_audit(both[k], &sum, &minbal, &mismatch);
        fprintf(stderr, "  final audit via node %u: %s, total %" PRId64 ", lowest %" PRId64 "%s\n",
                k ? PAUSED : 0, rdkv_strerror(rc), sum, minbal, mismatch ? ", MISMATCH" : "");
        CHECK_EQ(rc, 0);
        if (!rc) CHECK(!audit_bad("final", 2, sum, minbal, mismatch));
    }
    /* the registers: a final committed read closes the history (checked without it if that
     * read cannot commit: the committed transactions are still judged) */
    static struct hist_op fin[TW_NREG];
    int rc = final_regs(r2, fin);
    rdkv_session_close(r2);
    CHECK_EQ(rc, 0);
    check_history(rc ? NULL : fin);
}

static void pause_run(void)
{
    if (!tenv_bindir) SKIP("needs --bindir to find kvserver");
    memset(&R, 0, sizeof R);
    int64_t t0 = clock_now_ns();
    rdkv_session *s0 = NULL;
    if (cluster_start(&R.c) == 0)
        scenario(&s0);
    else
        CHECK(!"the cluster starts");
    /* whatever happened: node 2 continued, the workers stopped, the nodes stopped and reaped */
    for (unsigned i = 1; i < NODES; i++)
        if (R.c.pid[i] > 0) kill(R.c.pid[i], SIGCONT);
    atomic_store(&R.stop, true);
    for (unsigned i = 0; i < R.started; i++) pthread_join(R.th[i], NULL);
    R.started = 0;
    if (s0) rdkv_session_close(s0);
    /* no status other than the expected outcomes, no committed audit that saw a broken bank */
    CHECK_EQ(atomic_load(&R.errors), 0);
    CHECK_EQ(atomic_load(&R.bad_audits), 0);
    for (unsigned i = 1; i < NODES; i++)
        if (R.c.pid[i] > 0) CHECK(child_alive(&R.c, i));
    for (unsigned i = 1; i < NODES; i++)
        if (R.c.log[i][0]) print_log(&R.c, i);
    CHECK_EQ(cluster_stop(&R.c, harness_failures > 0), 0);
    for (unsigned i = 0; i < R.nw; i++) tw_hist_free(&R.w[i].h);
    fprintf(stderr, "  %.1f s in all\n", (double)(clock_now_ns() - t0) / 1e9);
}

static const struct test_case cases[] = {
    {"pause", pause_run},
};

int main(int argc, char **argv)
{
    return tenv_main(argc, argv, "a node paused past its leases", cases,
                     sizeof cases / sizeof cases[0]);
}
