/* YCSB's CoreWorkload as a kvbench workload (workload.h): the properties users already write
 * (-P workloads/workloada, -p name=value), the core workloads A-F, and the config bytes the
 * runner ships to the nodes. Every operation is one serializable transaction; workload F's
 * read-modify-write is one transaction too (read for update, write, commit), which core YCSB's
 * read-then-update against a non-transactional store is not. */
#ifndef RDKV_KVBENCH_YCSB_H
#define RDKV_KVBENCH_YCSB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ycsb_dist { YCSB_D_UNIFORM, YCSB_D_ZIPFIAN, YCSB_D_LATEST, YCSB_D_HOTSPOT, YCSB_D_NDIST };

struct ycsb_props {
    char workload; /* 'a'..'f', or 0 for a custom mix */
    uint64_t recordcount, operationcount;
    uint32_t fieldcount, fieldlength;
    double read, update, insert, scan, rmw; /* proportions */
    enum ycsb_dist dist;
    uint32_t minscanlength, maxscanlength;
    bool scan_zipfian;   /* scanlengthdistribution=zipfian (else uniform) */
    bool ordered;        /* insertorder=ordered (else hashed) */
    uint32_t zeropadding;
    double hotspotdatafraction, hotspotopnfraction;
    bool writeallfields;
    uint32_t keyspertxn; /* rdkv's: a read or update is one transaction over this many distinct
                            keys (1..16, default 1), each read or updated per the mix */
    bool zipf_plain;     /* rdkv's zipfianscrambled=false: requestdistribution=zipfian draws
                            ZipfianGenerator's ranks over the records themselves (rank 0, the
                            first key number, hottest), not YCSB's scrambled 10^10 ranks hashed
                            onto them, which spread the heat of a small table */
};
#define YCSB_KEYS_PER_TXN_MAX 16

/* CoreWorkload's defaults with workload w's file applied ('a'..'f'; 0: none). */
void ycsb_props_init(struct ycsb_props *p, char workload);
/* Sets one property (YCSB's names). 0; 1 if the name is not one of CoreWorkload's (ignored, as
 * YCSB ignores a binding's properties it does not know); or RDKV_EINVAL with the reason in err. */
int ycsb_prop_set(struct ycsb_props *p, const char *name, const char *value, char *err,
                  size_t errcap);
/* Reads a YCSB property file (name=value lines, # comments). Unknown names are reported on
 * stderr and ignored. */
int ycsb_props_file(struct ycsb_props *p, const char *path, char *err, size_t errcap);
/* Checks the whole set (proportions, lengths, sizes). */
int ycsb_props_check(const struct ycsb_props *p, char *err, size_t errcap);
const char *ycsb_dist_name(enum ycsb_dist d);

/* The config bytes for the runner: the properties plus the cluster's node count. */
#define YCSB_CFG_LEN 120
int ycsb_cfg_pack(const struct ycsb_props *p, uint32_t nodes, uint8_t out[YCSB_CFG_LEN]);

/* A worker's operations without rdkv, for drivers of other stores (peer.h). The worker is one
 * of wl_ycsb.worker_new; ycsb_draw picks the next operation as the rdkv worker does (same op
 * mix, key choosers, scan lengths); ycsb_draw_done acknowledges it (an insert becomes visible
 * to the key choosers). ycsb_record is a fresh record, ycsb_field a fresh field value and a
 * random field index; both stay valid until the worker's next call. */
struct ycsb_draw {
    unsigned op; /* enum ycsb_op (ycsb_gen.h) */
    const char *key;
    size_t klen;
    uint32_t scanlen;
    uint64_t insert_j;
};
int ycsb_draw(void *worker, struct ycsb_draw *d);
void ycsb_draw_done(void *worker, const struct ycsb_draw *d);
const uint8_t *ycsb_record(void *worker, size_t *len);
const uint8_t *ycsb_field(void *worker, uint32_t *field);

#endif
