/* kvbench ycsb: YCSB's core workloads on rdkv (tools/kvbench/ycsb.h), in YCSB's own output
 * format. */
#include "tools/kvbench/drive.h"
#include "tools/kvbench/ycsb.h"

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
    "  --workload W          start from workload W's properties (default a)\n"
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
    "Exit status: 0 when every operation succeeded, 1 when one failed or the run could not be\n"
    "done, 2 on bad usage.\n";

int cmd_ycsb(int argc, char **argv)
{
    struct drive_cli c;
    drive_cli_init(&c);
    struct ycsb_props p;
    char w = 'a';
    const char *phase = NULL;
    /* the workload letter first: properties apply on top of it, in command-line order */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--workload") && i + 1 < argc) {
            const char *v = argv[i + 1];
            if (strlen(v) != 1 || !strchr("abcdefABCDEF", v[0]))
                bench_usage_error("ycsb", "--workload must be one of a-f (got '%s')", v);
            w = v[0];
        }
    ycsb_props_init(&p, w);
    char err[512];
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            fputs(usage, stdout);
            fputs(drive_cli_help, stdout);
            fputs(usage_tail, stdout);
            return 0;
        }
        if (!strcmp(o, "load") || !strcmp(o, "run")) {
            if (phase) bench_usage_error("ycsb", "give load or run once (got '%s' again)", o);
            phase = o;
            continue;
        }
        if (drive_cli_opt(&c, "ycsb", argc, argv, &i)) continue;
        if (!v) bench_usage_error("ycsb", "option '%s' needs a value (or is unknown)", o);
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
    if (!c.seconds_given) c.o.ops = p.operationcount;
    bench_install_signals();

    struct bench_cluster bc;
    if (bench_cluster_open(&bc, &c.co, 60 * NS_PER_S, err, sizeof err)) {
        fprintf(stderr, "kvbench ycsb: error: %s\n", err);
        return 1;
    }
    unsigned nn = bc.cfg->n;
    uint8_t cfg[YCSB_CFG_LEN];
    ycsb_cfg_pack(&p, nn, cfg);
    c.o.cls = &wl_ycsb;
    c.o.cfg = cfg;
    c.o.cfg_len = YCSB_CFG_LEN;
    struct drive d;
    int rc = drive_open(&d, &bc, err, sizeof err);
    char cfgline[256];
    snprintf(cfgline, sizeof cfgline, "%s%s: %s, %u nodes%s, %s mode, %u %s x %u tasks",
             p.workload ? "workload " : "custom mix", p.workload ? (char[2]){p.workload, 0} : "",
             fab_transport_name(bc.transport), nn, bc.launched ? " (started here)" : "",
             c.o.remote ? "remote" : "embedded", c.o.threads,
             c.o.remote ? "client threads" : "threads per node", c.o.tasks);
    if (!rc) fprintf(stderr, "kvbench ycsb: %s\n", cfgline);
    if (!rc && load) {
        int64_t t0 = clock_now_ns();
        rc = drive_load(&d, &c.o, err, sizeof err);
        double s = (double)(clock_now_ns() - t0) / 1e9;
        if (rc) fprintf(stderr, "kvbench ycsb: error: loading: %s\n", err);
        else if (!run) {
            printf("[OVERALL], RunTime(ms), %.0f\n", s * 1e3);
            printf("[OVERALL], Throughput(ops/sec), %.2f\n", s > 0 ? (double)p.recordcount / s : 0);
            printf("[INSERT], Operations, %llu\n", (unsigned long long)p.recordcount);
            printf("[INSERT], Return=OK, %llu\n", (unsigned long long)p.recordcount);
        } else {
            fprintf(stderr, "kvbench ycsb: loaded %llu records in %.1f s\n",
                    (unsigned long long)p.recordcount, s);
        }
    }
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
        char rec[32], opsn[32], fl[48], thr[16], tgt[32], dist[64];
        snprintf(rec, sizeof rec, "%llu", (unsigned long long)p.recordcount);
        snprintf(opsn, sizeof opsn, "%llu", (unsigned long long)c.o.ops);
        snprintf(fl, sizeof fl, "%u x %u bytes", p.fieldcount, p.fieldlength);
        snprintf(thr, sizeof thr, "%u", c.o.threads);
        snprintf(tgt, sizeof tgt, "%.0f", c.o.target);
        snprintf(dist, sizeof dist, "%s%s", ycsb_dist_name(p.dist),
                 p.dist != YCSB_D_ZIPFIAN ? ""
                 : p.zipf_plain          ? " (not scrambled, theta 0.99)"
                                         : " (scrambled, theta 0.99)");
        char mix[160];
        snprintf(mix, sizeof mix, "read %.2f update %.2f insert %.2f scan %.2f rmw %.2f%s", p.read,
                 p.update, p.insert, p.scan, p.rmw, p.keyspertxn > 1 ? ", keys per transaction" : "");
        if (p.keyspertxn > 1)
            snprintf(mix + strlen(mix), sizeof mix - strlen(mix), " %u", p.keyspertxn);
        const char *kv[] = {"benchmark", "ycsb",
                            "workload", p.workload ? (char[2]){p.workload, 0} : "custom",
                            "cluster", cfgline,
                            "recordcount", rec,
                            "operationcount", c.o.ops ? opsn : "(timed)",
                            "record", fl,
                            "mix", mix,
                            "requestdistribution", dist,
                            "threads", thr,
                            "conflict", c.conflict ? c.conflict : "the nodes' (timeout unless set)",
                            "target_ops", c.o.target > 0 ? tgt : "closed loop",
                            "transactions", "every operation is one serializable transaction; "
                                            "READ-MODIFY-WRITE is one transaction",
                            NULL};
        if (!rc || wl_stats_ops(total)) drive_report(stdout, &c.o, total, kv, NULL);
        if (!rc && drive_errors(total)) rc = RDKV_EIO;
        if (!rc) drive_sweep_add(&sweep, &c.o, total);
    }
    if (c.o.fmt == DRIVE_TEXT) drive_sweep_print(stdout, &sweep, &c.o);
    free(total);
    drive_close(&d);
    if (bench_cluster_close(&bc) && !rc) rc = 1;
    return rc ? 1 : 0;
}
