/* TPC-C as a kvbench workload (wl_tpcc, tools/kvbench/workload.h): the options kvbench's command
 * line fills, the config bytes they pack into, and a few internals the tests reach (NURand, the
 * C_LAST names, the key layout, one record offset). tpcc.c describes the tables, the keys and
 * where each warehouse lives. */
#ifndef RDKV_KVBENCH_TPCC_H
#define RDKV_KVBENCH_TPCC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TPCC_CFG_VERSION 1
#define TPCC_CFG_LEN 28           /* packed config bytes (fixed) */
#define TPCC_DISTRICTS 10         /* per warehouse (spec 4.3.3.1; not configurable) */
#define TPCC_MAX_WAREHOUSES 65535 /* W = nodes * warehouses_per_node: a u16 in every key */
#define TPCC_MAX_NODES 1024
#define TPCC_MAX_ITEMS 1000000   /* I_ID is 3 bytes in the keys; the spec has 100000 */
#define TPCC_MAX_CUSTOMERS 65535 /* per district (C_ID is 2 bytes in the keys; spec 3000) */
#define TPCC_KEY_MAX 64          /* every key fits */

/* The five transactions, in wl_tpcc.op_names order. */
enum tpcc_op {
    TPCC_NEW_ORDER,
    TPCC_PAYMENT,
    TPCC_ORDER_STATUS,
    TPCC_DELIVERY,
    TPCC_STOCK_LEVEL,
    TPCC_NOPS
};

/* What a run is. Warehouse w (1-based) lives on node (w - 1) % nodes; W = nodes *
 * warehouses_per_node. Everything but the percentages is the spec's unless scaled down for
 * tests or small machines (the output should say so: items and customers_per_district). */
struct tpcc_opts {
    unsigned nodes;                  /* nodes in the cluster */
    unsigned warehouses_per_node;    /* >= 1 */
    unsigned items;                  /* ITEM rows (one copy per node), STOCK rows per
                                        warehouse: spec 100000 */
    unsigned customers_per_district; /* spec 3000; also the initial orders per district (the last
                                        30% of them undelivered: NEW-ORDER rows) */
    unsigned mix[TPCC_NOPS];         /* percent of each transaction, sum 100: 45/43/4/4/4 */
    unsigned remote_item_pct;        /* New-Order: a line's supply warehouse is another one (1) */
    unsigned remote_payment_pct;     /* Payment: the customer is another warehouse's (15) */
    unsigned by_name_pct;            /* Payment, Order-Status: customer chosen by last name (60) */
    unsigned rollback_pct;           /* New-Order: with an unused item, rolled back (1; 0 drops
                                        the rollback as Silo does) */
};

/* The spec's defaults (nodes 1, one warehouse per node). */
void tpcc_opts_init(struct tpcc_opts *o);
/* Packs o into buf (TPCC_CFG_LEN bytes): 0, or RDKV_EINVAL (o out of range: the reason in err,
 * which may be NULL) / RDKV_ETOOBIG (cap too small). */
int tpcc_cfg_pack(const struct tpcc_opts *o, void *buf, size_t cap, size_t *len, char *err,
                  size_t errcap);
/* Rows loaded per warehouse, ORDER-LINE at its expected 10 per order (the count is random);
 * ITEM, one copy per node, is not included. */
uint64_t tpcc_rows_per_warehouse(const struct tpcc_opts *o);

/* ---------------------------------------------------------------------------------------------
 * Internals, for the tests. */

/* NURand(A, x, y) with run-time constant c (spec 2.1.6). rng: common/rng.h state. */
uint32_t tpcc_nurand(uint64_t *rng, uint32_t a, uint32_t x, uint32_t y, uint32_t c);
/* The C_LAST of number num (0..999, spec 4.3.2.3) into buf (at least 16 bytes, NUL-terminated);
 * returns its length. */
size_t tpcc_c_last(unsigned num, char *buf);
/* The node warehouse w's rows live on, and its placement tag ("w<w>.<salt>", NUL-terminated,
 * at most 16 bytes with the NUL) into tag. */
unsigned tpcc_wh_tag(unsigned w, unsigned nodes, char tag[16]);
/* Keys (into k, TPCC_KEY_MAX bytes; the length returned) of a cluster of `nodes` nodes. */
size_t tpcc_key_district(uint8_t *k, unsigned nodes, unsigned w, unsigned d);
size_t tpcc_key_order(uint8_t *k, unsigned nodes, unsigned w, unsigned d, uint32_t o_id);
size_t tpcc_key_order_line(uint8_t *k, unsigned nodes, unsigned w, unsigned d, uint32_t o_id,
                           unsigned ol);
/* DISTRICT's value starts with D_YTD: an int64, cents, little-endian. */
#define TPCC_D_YTD_OFF 0

#endif
