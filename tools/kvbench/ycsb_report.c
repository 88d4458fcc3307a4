/* A YCSB run's description and its load's report (ycsb_report.h). */
#include "tools/kvbench/ycsb_report.h"

#include "tools/kvbench/drive.h"

#include <stdio.h>
#include <string.h>

void ycsb_load_report(uint64_t n, bool accounts, double secs, bool run, const char *where)
{
    if (run) {
        fprintf(stderr, "kvbench ycsb: loaded %llu %s into %s in %.1f s\n", (unsigned long long)n,
                accounts ? "accounts" : "records", where, secs);
        return;
    }
    printf("[OVERALL], RunTime(ms), %.0f\n", secs * 1e3);
    printf("[OVERALL], Throughput(ops/sec), %.2f\n", secs > 0 ? (double)n / secs : 0);
    printf("[INSERT], Operations, %llu\n", (unsigned long long)n);
    printf("[INSERT], Return=OK, %llu\n", (unsigned long long)n);
}

void ycsb_kv_fill(struct ycsb_kv *k, const struct ycsb_props *p, const struct drive_opts *o,
                  uint64_t accounts, const char *where_key, const char *where,
                  const char *conflict, const char *transactions)
{
    unsigned n = 0;
#define KV(name, value) (k->kv[n++] = (name), k->kv[n++] = (value))
    snprintf(k->wl, sizeof k->wl, "%s", accounts ? "transfer" : p->workload ? (char[2]){p->workload, 0} : "custom");
    snprintf(k->rec, sizeof k->rec, "%llu", (unsigned long long)(accounts ? accounts : p->recordcount));
    snprintf(k->opsn, sizeof k->opsn, "%llu", (unsigned long long)o->ops);
    snprintf(k->fl, sizeof k->fl, "%u x %u bytes", p->fieldcount, p->fieldlength);
    snprintf(k->thr, sizeof k->thr, "%u", o->threads);
    snprintf(k->tgt, sizeof k->tgt, "%.0f", o->target);
    snprintf(k->dist, sizeof k->dist, "%s%s", ycsb_dist_name(p->dist),
             p->dist != YCSB_D_ZIPFIAN ? ""
             : p->zipf_plain          ? " (not scrambled, theta 0.99)"
                                      : " (scrambled, theta 0.99)");
    snprintf(k->mix, sizeof k->mix, "read %.2f update %.2f insert %.2f scan %.2f rmw %.2f",
             p->read, p->update, p->insert, p->scan, p->rmw);
    if (p->keyspertxn > 1)
        snprintf(k->mix + strlen(k->mix), sizeof k->mix - strlen(k->mix),
                 ", %u keys per transaction", p->keyspertxn);
    KV("benchmark", "ycsb");
    KV("workload", k->wl);
    KV(where_key, where);
    KV(accounts ? "accounts" : "recordcount", k->rec);
    KV("operationcount", o->ops ? k->opsn : "(timed)");
    if (accounts) {
        KV("transfer", "a uniform pair, amount 1..100 (at most the source's balance)");
    } else {
        KV("record", k->fl);
        KV("mix", k->mix);
        KV("requestdistribution", k->dist);
    }
    KV("threads", k->thr);
    if (conflict) KV("conflict", conflict);
    KV("target_ops", o->target > 0 ? k->tgt : "closed loop");
    KV("transactions", transactions);
#undef KV
    k->kv[n] = NULL;
}

bool ycsb_kv_not_found(struct ycsb_kv *k, const struct wl_stats *t, const struct ycsb_props *p,
                       uint64_t accounts)
{
    uint64_t nf = drive_not_found(t);
    if (!nf) return false;
    snprintf(k->warn, sizeof k->warn,
             "%llu of %llu operations found no record: the data holds fewer %s than the run's "
             "%s=%llu (load them: kvbench ycsb load with the same -p/-P), so these figures are "
             "not the workload's",
             (unsigned long long)nf, (unsigned long long)wl_stats_ops(t),
             accounts ? "accounts" : "records", accounts ? "accounts" : "recordcount",
             (unsigned long long)(accounts ? accounts : p->recordcount));
    fprintf(stderr, "kvbench ycsb: warning: %s\n", k->warn);
    unsigned n = 0;
    while (k->kv[n]) n += 2;
    k->kv[n] = "warning";
    k->kv[n + 1] = k->warn;
    k->kv[n + 2] = NULL;
    return true;
}
