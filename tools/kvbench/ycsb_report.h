/* A YCSB run's description and its load's report, the same for rdkv (ycsb_bench.c) and the
 * peers (peer.c): what drive_report prints above the figures. */
#ifndef RDKV_KVBENCH_YCSB_REPORT_H
#define RDKV_KVBENCH_YCSB_REPORT_H

#include "tools/kvbench/ycsb.h"

#include <stdbool.h>
#include <stdint.h>

struct drive_opts;
/* The run's description for drive_report:
 * where_key/where say what ran it ("cluster", "db"). */
struct ycsb_kv {
    char wl[16], rec[32], opsn[32], fl[48], thr[16], tgt[32], dist[64], mix[160], warn[320];
    const char *kv[32];
};
/* A load's report: YCSB's [OVERALL] and [INSERT] lines on stdout, or one line on stderr when a
 * run follows. */
void ycsb_load_report(uint64_t n, bool accounts, double secs, bool run, const char *where);
void ycsb_kv_fill(struct ycsb_kv *k, const struct ycsb_props *p, const struct drive_opts *o,
                  uint64_t accounts, const char *where_key, const char *where,
                  const char *conflict, const char *transactions);
/* After a run whose operations found no record (Return=NOT_FOUND: the data holds fewer records
 * than the run expects, so its figures are not the workload's): a warning on stderr and in the
 * report's description (k, after ycsb_kv_fill), and true -- kvbench then exits 1. */
struct wl_stats;
bool ycsb_kv_not_found(struct ycsb_kv *k, const struct wl_stats *t, const struct ycsb_props *p,
                       uint64_t accounts);

#endif
