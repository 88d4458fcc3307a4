/* kvbench ycsb: YCSB's core workloads on rdkv (tools/kvbench/ycsb.h), in YCSB's own output
 * format. */
#include "tools/kvbench/drive.h"
#include "tools/kvbench/peer.h"
#include "tools/kvbench/transfer.h"
#include "tools/kvbench/ycsb.h"
#include "tools/kvbench/ycsb_report.h"

#include "common/clock.h"
#include "common/parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: kvbench ycsb load|run [--workload a|b|c|d|e|f] [-P FILE]... [-p NAME=VALUE]...\n"
    "                             [options]\n"
    "\n"
    "YCSB's core workloads, every operation one serializable transaction:\n"
    "  a  50% read, 50% update, zipfian          d  95% read, 5% insert, latest\n"
    "  b  95% read, 5% update, zipfian           e  95% scan (1-100 records), 5% insert, zipfian\n"
    "  c  100% read, zipfian                     f  50% read, 50% read-modify-write, zipfian\n"
    "Workload F's read-modify-write runs as ONE transaction (read for update, write, commit);\n"
    "core YCSB's is a read then an update with nothing between them, so compare with care.\n"
    "An update writes one field: it reads the record for update and writes it back\n"
    "(-p writeallfields=true: a blind write of the whole record).\n"
    "\n"
    "  load                  insert recordcount records (each node its own keys)\n"
    "  run                   run operationcount operations (or --seconds); with --nodes the\n"
    "                        load comes first by itself\n"
    "  --workload W          start from workload W's properties (default a); transfer: move\n"
    "                        1..100 between two random accounts of -p accounts=N (default\n"
    "                        1000, 1000 each) in one serializable transaction, then check that\n"
    "                        the total is unchanged (exit 1 if not)\n"
    "  -P FILE               a YCSB property file (name=value lines), e.g. workloads/workloada\n"
    "  -p NAME=VALUE         one property: recordcount, operationcount, fieldcount, fieldlength,\n"
    "                        readproportion, updateproportion, insertproportion, scanproportion,\n"
    "                        readmodifywriteproportion, requestdistribution (uniform, zipfian,\n"
    "                        latest, hotspot), minscanlength, maxscanlength,\n"
    "                        scanlengthdistribution, insertorder, zeropadding,\n"
    "                        hotspotdatafraction, hotspotopnfraction, writeallfields;\n"
    "                        rdkv's keyspertxn=K (1..16): each read or update is one\n"
    "                        transaction over K distinct keys in random order, each key read\n"
    "                        or updated per the mix (hot-key contention; see --conflict);\n"
    "                        zipfianscrambled=false: zipfian ranks over the records\n"
    "                        themselves (the first keys hottest), not YCSB's scrambled ones\n"
    "\n";
static const char usage_tail[] =
    "  -h, --help            this text\n"
    "\n"
    "A run on a cluster loaded earlier (--endpoints, --config) first looks for a few of its\n"
    "records: when none is there it stops before measuring and names the load to run.\n"
    "\n"
    "Exit status: 0 when every operation succeeded, 1 when one failed or found no record\n"
    "(Return=NOT_FOUND: the data holds fewer records than the run expects; the report warns)\n"
    "or the run could not be done, 2 on bad usage.\n";

/* Before a run on a cluster loaded earlier: whether the workload's records are there (a sample
 * of PROBE_ROWS, the first and the last among them). None: an error with the load to run first
 * (RDKV_ENOTFOUND); some: a warning. */
#define PROBE_ROWS 16
static int probe_loaded(const struct drive *d, const struct drive_opts *o,
                        const struct bench_common *co, const struct ycsb_props *p,
                        uint64_t accounts)
{
    rdkv_session *s;
    int rc = rdkv_connect(d->endpoints, NULL, &s);
    unsigned found = 0;
    if (!rc) {
        rc = o->cls->probe(s, o->cfg, o->cfg_len, PROBE_ROWS, &found);
        rdkv_session_close(s);
    }
    if (rc) {
        fprintf(stderr, "kvbench ycsb: error: cannot look for the workload's records: %s\n",
                rdkv_strerror(rc));
        return rc;
    }
    uint64_t n = accounts ? accounts : p->recordcount;
    unsigned want = n < PROBE_ROWS ? (unsigned)n : PROBE_ROWS;
    const char *what = accounts ? "accounts" : "records";
    if (!found) {
        char how[160];
        if (accounts)
            snprintf(how, sizeof how, "--workload transfer -p accounts=%llu",
                     (unsigned long long)n);
        else
            snprintf(how, sizeof how, "-p recordcount=%llu", (unsigned long long)n);
        fprintf(stderr,
                "kvbench ycsb: error: the cluster holds none of this run's %llu %s (%u looked for, "
                "none there): it was never loaded, or loaded with other properties. Load it "
                "first: kvbench ycsb load %s %s %s (and this run's other -p/-P)\n",
                (unsigned long long)n, what, want, co->endpoints ? "--endpoints" : "--config",
                co->endpoints ? co->endpoints : co->config, how);
        return RDKV_ENOTFOUND;
    }
    if (found < want)
        fprintf(stderr,
                "kvbench ycsb: warning: only %u of %u %s looked for are on the cluster: it was "
                "loaded with fewer than this run's %llu; reads of the missing ones will count as "
                "NOT_FOUND\n",
                found, want, what, (unsigned long long)n);
    return 0;
}

int cmd_ycsb(int argc, char **argv)
{
    struct drive_cli c;
    drive_cli_init(&c);
    struct ycsb_props p;
    char w = 'a';
    const char *phase = NULL;
    struct peer_cli pc = {0};
    uint64_t accounts = 0; /* the transfer workload's accounts; 0: a YCSB mix */
    /* the workload letter first: properties apply on top of it, in command-line order */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--workload") && i + 1 < argc) {
            const char *v = argv[i + 1];
            if (!strcmp(v, "transfer")) {
                accounts = 1000;
                continue;
            }
            if (strlen(v) != 1 || !strchr("abcdefABCDEF", v[0]))
                bench_usage_error("ycsb", "--workload must be one of a-f or transfer (got '%s')", v);
            w = v[0];
        }
    ycsb_props_init(&p, w);
    char err[512];
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            fputs(usage, stdout);
            fputs(drive_cli_help, stdout);
            printf(peer_cli_help, peer_dbs());
            fputs(usage_tail, stdout);
            return 0;
        }
        if (!strcmp(o, "load") || !strcmp(o, "run")) {
            if (phase) bench_usage_error("ycsb", "give load or run once (got '%s' again)", o);
            phase = o;
            continue;
        }
        if (drive_cli_opt(&c, "ycsb", argc, argv, &i)) continue;
        if (peer_cli_opt(&pc, argc, argv, &i)) continue;
        if (!v) bench_value_missing("ycsb", usage, o);
        if (!strcmp(o, "--workload")) {
        } else if (!strcmp(o, "-P")) {
            if (ycsb_props_file(&p, v, err, sizeof err)) bench_usage_error("ycsb", "%s", err);
        } else if (!strcmp(o, "-p")) {
            char name[128];
            const char *eq = strchr(v, '=');
            if (!eq || eq == v || (size_t)(eq - v) >= sizeof name)
                bench_usage_error("ycsb", "-p needs NAME=VALUE (got '%s')", v);
            memcpy(name, v, (size_t)(eq - v));
            name[eq - v] = 0;
            uint64_t n;
            if (!strcmp(name, "accounts")) {
                if (!accounts || parse_uint_range(eq + 1, 2, 10000000000ull, &n))
                    bench_usage_error("ycsb", "accounts is the transfer workload's: 2.. (got '%s')", v);
                accounts = n;
                i++;
                continue;
            }
            int r = ycsb_prop_set(&p, name, eq + 1, err, sizeof err);
            if (r == 1) fprintf(stderr, "kvbench ycsb: ignoring property '%s'\n", name);
            else if (r) bench_usage_error("ycsb", "%s", err);
        } else {
            bench_usage_error("ycsb", "unknown option '%s'", o);
        }
        i++;
    }
    if (!phase) bench_usage_error("ycsb", "say load or run%s", "");
    if (ycsb_props_check(&p, err, sizeof err)) bench_usage_error("ycsb", "%s", err);
    drive_cli_finish(&c, "ycsb");
    bool load = !strcmp(phase, "load") || !(c.co.config || c.co.endpoints);
    bool run = !strcmp(phase, "run");
    if (pc.db && strcmp(pc.db, "rdkv")) {
        bench_install_signals();
        return peer_ycsb_main(&pc, &c, &p, !strcmp(phase, "load"), run, accounts);
    }
    if (!c.seconds_given) c.o.ops = p.operationcount;
    bench_install_signals();

    struct bench_cluster bc;
    if (bench_cluster_open(&bc, &c.co, 60 * NS_PER_S, err, sizeof err)) {
        fprintf(stderr, "kvbench ycsb: error: %s\n", err);
        return 1;
    }
    unsigned nn = bc.cfg->n;
    uint8_t cfg[YCSB_CFG_LEN], xcfg[XFER_CFG_LEN];
    ycsb_cfg_pack(&p, nn, cfg);
    xfer_cfg_pack(accounts, nn, xcfg);
    c.o.cls = accounts ? &wl_transfer : &wl_ycsb;
    c.o.cfg = accounts ? xcfg : cfg;
    c.o.cfg_len = accounts ? XFER_CFG_LEN : YCSB_CFG_LEN;
    struct drive d;
    int rc = drive_open(&d, &bc, err, sizeof err);
    char cfgline[256];
    snprintf(cfgline, sizeof cfgline, "%s%s: %s, %u nodes%s, %s mode, %u %s x %u tasks",
             accounts || p.workload ? "workload " : "custom mix",
             accounts ? "transfer" : p.workload ? (char[2]){p.workload, 0} : "",
             fab_transport_name(bc.transport), nn, bc.launched ? " (started here)" : "",
             c.o.remote ? "remote" : "embedded", c.o.threads,
             c.o.remote ? "client threads" : "threads per node", c.o.tasks);
    if (!rc) fprintf(stderr, "kvbench ycsb: %s\n", cfgline);
    uint64_t nload = accounts ? accounts : p.recordcount;
    if (!rc && load) {
        int64_t t0 = clock_now_ns();
        rc = drive_load(&d, &c.o, err, sizeof err);
        if (rc) fprintf(stderr, "kvbench ycsb: error: loading: %s\n", err);
        else ycsb_load_report(nload, accounts != 0, (double)(clock_now_ns() - t0) / 1e9, run, "rdkv");
    }
    if (!rc && run && !load) rc = probe_loaded(&d, &c.o, &c.co, &p, accounts);
    struct wl_stats *total = malloc(sizeof *total);
    struct drive_sweep sweep = {0};
    if (!rc && run && !total) rc = RDKV_ENOMEM;
    for (unsigned ki = 0; !rc && run && ki < c.ntasks && !bench_stop; ki++) {
        c.o.tasks = c.tasks_list[ki];
        if (c.ntasks > 1) fprintf(stderr, "kvbench ycsb: run %u of %u: %u tasks per thread\n",
                                  ki + 1, c.ntasks, c.o.tasks);
        if (c.ntasks > 1 && ki) printf("\n");
        rc = drive_run(&d, &c.o, total, err, sizeof err);
        if (rc) fprintf(stderr, "kvbench ycsb: error: %s\n", err);
        char *check = NULL;
        int failed = 0;
        if (!rc && accounts) {
            rc = drive_check(&d, &c.o, "kvbench ycsb", &failed, &check, err, sizeof err);
            if (rc) fprintf(stderr, "kvbench ycsb: error: %s\n", err);
        }
        struct ycsb_kv kv;
        ycsb_kv_fill(&kv, &p, &c.o, accounts, "cluster", cfgline,
                     c.conflict ? c.conflict : "the nodes' (timeout unless set)",
                     "every operation is one serializable transaction; READ-MODIFY-WRITE is one "
                     "transaction");
        bool missing = ycsb_kv_not_found(&kv, total, &p, accounts);
        if (!rc || wl_stats_ops(total)) drive_report(stdout, &c.o, total, kv.kv, check);
        free(check);
        if (!rc && (drive_errors(total) || failed || missing)) rc = RDKV_EIO;
        if (!rc) drive_sweep_add(&sweep, &c.o, total);
    }
    if (c.o.fmt == DRIVE_TEXT) drive_sweep_print(stdout, &sweep, &c.o);
    free(total);
    drive_close(&d);
    if (bench_cluster_close(&bc) && !rc) rc = 1;
    return rc ? 1 : 0;
}
