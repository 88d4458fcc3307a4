/* TPC-C as a kvbench workload (placeholder until the driver lands). */
#include "tools/kvbench/workload.h"

const struct wl_class wl_tpcc = {.name = "tpcc"};
