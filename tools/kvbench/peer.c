/* kvbench ycsb --db redis|postgres (peer.h): the peers' workloads on kvbench's runner. A peer
 * worker is a YCSB worker (or a transfer draw) plus its own connection; the runner gives it no
 * rdkv session. The peer classes live in kvbench only (the nodes never run them), so their
 * config bytes are this process's struct peer_cfg, never sent anywhere. */
#include "tools/kvbench/peer.h"
#include "tools/kvbench/ycsb_report.h"
#include "tools/kvbench/drive.h"
#include "tools/kvbench/transfer.h"
#include "tools/kvbench/ycsb_gen.h"

#include "common/clock.h"
#include "common/rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct peer_ops *const peers[] = {
#ifdef KVBENCH_HAVE_REDIS
    &peer_redis,
#endif
#ifdef KVBENCH_HAVE_PG
    &peer_pg,
#endif
    NULL};

const char *peer_dbs(void)
{
    static char buf[64];
    if (!buf[0]) {
        size_t at = (size_t)snprintf(buf, sizeof buf, "rdkv");
        for (unsigned i = 0; peers[i]; i++)
            at += (size_t)snprintf(buf + at, sizeof buf - at, ", %s", peers[i]->name);
    }
    return buf;
}

const char peer_cli_help[] =
    "Peers (the same generators and report against another store):\n"
    "  --db NAME             rdkv (default), redis or postgres; this kvbench has: %s\n"
    "  --redis HOST:PORT     the Redis server for --db redis (default 127.0.0.1:6379)\n"
    "  --pg CONNINFO         the PostgreSQL server for --db postgres, a libpq conninfo such as\n"
    "                        \"host=127.0.0.1 port=5433 dbname=postgres user=me\" (default: "
    "libpq's\n"
    "                        PG* environment)\n"
    "                        With --db redis or postgres, --threads is the number of client\n"
    "                        connections (one thread each); the cluster options, --mode and\n"
    "                        --tasks do not apply, and the [COST] lines (rdkv's fabric) read 0.\n";

int peer_cli_opt(struct peer_cli *pc, int argc, char **argv, int *i)
{
    const char *o = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    const char **dst = !strcmp(o, "--db")      ? &pc->db
                       : !strcmp(o, "--redis") ? &pc->redis
                       : !strcmp(o, "--pg")    ? &pc->pg
                                               : NULL;
    if (!dst) return 0;
    if (!v) bench_usage_error("ycsb", "%s needs a value", o);
    if (dst == &pc->db && strcmp(v, "rdkv") && strcmp(v, "redis") && strcmp(v, "postgres"))
        bench_usage_error("ycsb", "--db must be rdkv, redis or postgres (got '%s')", v);
    *dst = v;
    (*i)++;
    return 1;
}

bool peer_retry(struct wl_step *st)
{
    st->status = RDKV_EABORTED;
    if (clock_now_ns() >= st->give_up_at) return false;
    st->aborts++;
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* The peer workloads */

struct peer_cfg {
    const struct peer_ops *ops;
    const char *target;
    struct ycsb_props p;
    uint8_t ycsb[YCSB_CFG_LEN];
    uint64_t accounts; /* transfer: the accounts; 0: YCSB */
};

struct pworker {
    const struct peer_cfg *c;
    void *conn;
    void *gen; /* the YCSB worker */
    uint64_t rng;
};

static int pcfg_check(const void *cfg, size_t len, char *err, size_t errcap)
{
    if (len == sizeof(struct peer_cfg) && cfg) return 0;
    snprintf(err, errcap, "peer config: wrong size");
    return RDKV_EINVAL;
}

static int pworker_new(const void *cfg, size_t len, const struct wl_place *pl, uint64_t seed,
                       void **out)
{
    (void)len;
    const struct peer_cfg *c = cfg;
    struct pworker *w = calloc(1, sizeof *w);
    if (!w) return RDKV_ENOMEM;
    w->c = c;
    w->rng = seed ? seed : 88172645463325252ull;
    for (int i = 0; i < 4; i++) rng_next(&w->rng);
    char err[256];
    int rc = c->ops->connect(c->target, &w->conn, err, sizeof err);
    if (rc) fprintf(stderr, "kvbench ycsb: worker %u: %s\n", pl->worker, err);
    if (!rc && !c->accounts) rc = wl_ycsb.worker_new(c->ycsb, YCSB_CFG_LEN, pl, seed, &w->gen);
    if (rc) {
        if (w->conn) c->ops->close(w->conn);
        free(w);
        return rc;
    }
    *out = w;
    return 0;
}

static void pworker_free(void *p)
{
    struct pworker *w = p;
    if (w->gen) wl_ycsb.worker_free(w->gen);
    if (w->conn) w->c->ops->close(w->conn);
    free(w);
}

static int pycsb_step(void *p, rdkv_session *s, struct wl_step *st)
{
    (void)s;
    struct pworker *w = p;
    struct ycsb_draw d;
    int rc = ycsb_draw(w->gen, &d);
    if (rc) return rc;
    st->op = d.op;
    rc = w->c->ops->ycsb_op(w->conn, &w->c->p, w->gen, &d, st);
    ycsb_draw_done(w->gen, &d);
    return rc;
}

static int pxfer_step(void *p, rdkv_session *s, struct wl_step *st)
{
    (void)s;
    struct pworker *w = p;
    uint64_t from, to;
    int64_t amount;
    xfer_draw(&w->rng, w->c->accounts, &from, &to, &amount);
    st->op = 0;
    return w->c->ops->xfer_op(w->conn, from, to, amount, st);
}

static const struct wl_class peer_ycsb_cls = {
    .name = "peer-ycsb",
    .nops = YCSB_NOPS,
    .op_names = {"READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE"},
    .cfg_check = pcfg_check,
    .worker_new = pworker_new,
    .step = pycsb_step,
    .worker_free = pworker_free,
};

static const struct wl_class peer_xfer_cls = {
    .name = "peer-transfer",
    .nops = 1,
    .op_names = {"TRANSFER"},
    .cfg_check = pcfg_check,
    .worker_new = pworker_new,
    .step = pxfer_step,
    .worker_free = pworker_free,
};

/* Workers open their own connections. */
static int no_session(void *arg, const struct wl_place *pl, const rdkv_options *o,
                      rdkv_session **out)
{
    (void)arg, (void)pl, (void)o;
    *out = NULL;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */

static int load_peer(const struct peer_cfg *pc, char *err, size_t errcap)
{
    void *conn;
    int rc = pc->ops->connect(pc->target, &conn, err, errcap);
    if (rc) return rc;
    if (pc->accounts) {
        rc = pc->ops->xfer_load(conn, pc->accounts, err, errcap);
    } else {
        struct wl_place pl = {.nodes = 1, .node = -1, .nprocs = 1, .nworkers = 1};
        void *gen;
        rc = wl_ycsb.worker_new(pc->ycsb, YCSB_CFG_LEN, &pl, 0x9E3779B97F4A7C15ull, &gen);
        if (rc)
            snprintf(err, errcap, "cannot start the loader: %s", rdkv_strerror(rc));
        else {
            rc = pc->ops->ycsb_load(conn, &pc->p, gen, err, errcap);
            wl_ycsb.worker_free(gen);
        }
    }
    pc->ops->close(conn);
    return rc;
}

/* The transfer check's report (malloc'd) and whether it held. */
static int check_peer(const struct peer_cfg *pc, char **report, char *err, size_t errcap)
{
    void *conn;
    int rc = pc->ops->connect(pc->target, &conn, err, errcap);
    if (rc) return rc;
    uint64_t found = 0;
    int64_t total = 0;
    rc = pc->ops->xfer_sum(conn, pc->accounts, &found, &total, err, errcap);
    pc->ops->close(conn);
    if (rc) return rc;
    *report = malloc(256);
    if (!*report) return RDKV_ENOMEM;
    return xfer_report(pc->accounts, found, total, *report, 256) ? RDKV_EIO : 0;
}

int peer_ycsb_main(const struct peer_cli *cli, struct drive_cli *c, const struct ycsb_props *p,
                   bool load, bool run, uint64_t accounts)
{
    const struct peer_ops *ops = NULL;
    for (unsigned i = 0; peers[i]; i++)
        if (!strcmp(peers[i]->name, cli->db)) ops = peers[i];
    if (!ops) {
        fprintf(stderr,
                "kvbench ycsb: --db %s: this kvbench was built without %s support "
                "(it has: %s); install %s and rebuild\n",
                cli->db, cli->db, peer_dbs(),
                !strcmp(cli->db, "redis") ? "libhiredis-dev" : "libpq-dev");
        return 2;
    }
    if (p->fieldcount > PEER_MAX_FIELDS) {
        fprintf(stderr, "kvbench ycsb: --db %s: at most %d fields\n", ops->name, PEER_MAX_FIELDS);
        return 2;
    }
    if (c->co.config || c->co.endpoints) {
        fprintf(stderr, "kvbench ycsb: --config and --endpoints are rdkv's; --db %s takes %s\n",
                ops->name, !strcmp(ops->name, "redis") ? "--redis" : "--pg");
        return 2;
    }
    static struct peer_cfg pc; /* the workers read it until the run ends */
    pc.ops = ops;
    pc.target = !strcmp(ops->name, "redis") ? (cli->redis ? cli->redis : "127.0.0.1:6379")
                                            : (cli->pg ? cli->pg : "");
    pc.p = *p;
    pc.accounts = accounts;
    ycsb_cfg_pack(p, 1, pc.ycsb);
    wl_class_register(&peer_ycsb_cls);
    wl_class_register(&peer_xfer_cls);
    char err[512] = "";
    int rc = 0;
    if (load) {
        int64_t t0 = clock_now_ns();
        rc = load_peer(&pc, err, sizeof err);
        if (rc)
            fprintf(stderr, "kvbench ycsb: error: loading %s: %s\n", ops->name, err);
        else
            ycsb_load_report(accounts ? accounts : p->recordcount, accounts != 0,
                             (double)(clock_now_ns() - t0) / 1e9, run, ops->name);
    }
    if (rc || !run) return rc ? 1 : 0;

    struct drive_opts o = c->o;
    o.remote = true;
    o.tasks = 1;
    o.cls = accounts ? &peer_xfer_cls : &peer_ycsb_cls;
    o.cfg = (const uint8_t *)&pc;
    o.cfg_len = sizeof pc;
    o.open = no_session;
    if (!c->seconds_given) o.ops = p->operationcount;
    struct drive d = {0};
    struct wl_stats *total = malloc(sizeof *total);
    if (!total) return 1;
    /* the server, not its password */
    char who[600];
    snprintf(who, sizeof who, "%s at %s", ops->name, pc.target[0] ? pc.target : "(libpq defaults)");
    for (char *pw = strstr(who, "password="); pw; pw = strstr(pw, "password=")) {
        pw += strlen("password=");
        memset(pw, '*', strcspn(pw, " "));
    }
    fprintf(stderr, "kvbench ycsb: %s, %u client connections\n", who, o.threads);
    rc = drive_run(&d, &o, total, err, sizeof err);
    if (rc) fprintf(stderr, "kvbench ycsb: error: %s\n", err);
    char *check = NULL;
    int crc = 0;
    if (accounts && (!rc || wl_stats_ops(total))) {
        crc = check_peer(&pc, &check, err, sizeof err);
        if (crc && !check) fprintf(stderr, "kvbench ycsb: error: checking: %s\n", err);
    }
    struct ycsb_kv kv;
    ycsb_kv_fill(&kv, p, &o, accounts, "db", who, NULL, ops->semantics);
    bool missing = ycsb_kv_not_found(&kv, total, p, accounts);
    if (!rc || wl_stats_ops(total)) drive_report(stdout, &o, total, kv.kv, check);
    if (!rc && (drive_errors(total) || missing)) rc = RDKV_EIO;
    free(check);
    free(total);
    return rc || crc ? 1 : 0;
}
