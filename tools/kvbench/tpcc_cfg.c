/* TPC-C's config (tpcc_int.h): the options' defaults and ranges, their packed bytes and the
 * decoded form the loader, the workers and the check share. */
#include "tools/kvbench/tpcc_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void tpcc_opts_init(struct tpcc_opts *o)
{
    memset(o, 0, sizeof *o);
    o->nodes = 1;
    o->warehouses_per_node = 1;
    o->items = 100000;
    o->customers_per_district = 3000;
    static const unsigned mix[TPCC_NOPS] = {45, 43, 4, 4, 4};
    memcpy(o->mix, mix, sizeof mix);
    o->remote_item_pct = 1;
    o->remote_payment_pct = 15;
    o->by_name_pct = 60;
    o->rollback_pct = 1;
}

int tpcc_bad(char *err, size_t errcap, const char *fmt, ...)
{
    if (err && errcap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errcap, fmt, ap);
        va_end(ap);
    }
    return RDKV_EINVAL;
}

/* Every range check in one place, for packing and for bytes from the network alike. */
static int opts_valid(const struct tpcc_opts *o, char *err, size_t errcap)
{
    if (o->nodes < 1 || o->nodes > TPCC_MAX_NODES)
        return tpcc_bad(err, errcap, "tpcc: nodes %u not in 1..%u", o->nodes, TPCC_MAX_NODES);
    if (o->warehouses_per_node < 1 ||
        (uint64_t)o->nodes * o->warehouses_per_node > TPCC_MAX_WAREHOUSES)
        return tpcc_bad(err, errcap, "tpcc: %u warehouses per node on %u nodes (1..%u in all)",
                   o->warehouses_per_node, o->nodes, TPCC_MAX_WAREHOUSES);
    if (o->items < 1 || o->items > TPCC_MAX_ITEMS)
        return tpcc_bad(err, errcap, "tpcc: items %u not in 1..%u", o->items, TPCC_MAX_ITEMS);
    if (o->customers_per_district < 1 || o->customers_per_district > TPCC_MAX_CUSTOMERS)
        return tpcc_bad(err, errcap, "tpcc: customers per district %u not in 1..%u",
                   o->customers_per_district, TPCC_MAX_CUSTOMERS);
    unsigned sum = 0;
    for (int i = 0; i < TPCC_NOPS; i++) {
        if (o->mix[i] > 100) return tpcc_bad(err, errcap, "tpcc: mix share %u over 100", o->mix[i]);
        sum += o->mix[i];
    }
    if (sum != 100) return tpcc_bad(err, errcap, "tpcc: the mix adds up to %u, not 100", sum);
    if (o->remote_item_pct > 100 || o->remote_payment_pct > 100 || o->by_name_pct > 100 ||
        o->rollback_pct > 100)
        return tpcc_bad(err, errcap, "tpcc: a percentage over 100");
    return 0;
}

int tpcc_cfg_pack(const struct tpcc_opts *o, void *buf, size_t cap, size_t *len, char *err,
                  size_t errcap)
{
    int rc = opts_valid(o, err, errcap);
    if (rc) return rc;
    if (cap < TPCC_CFG_LEN) return RDKV_ETOOBIG;
    uint8_t *b = buf;
    memset(b, 0, TPCC_CFG_LEN);
    memcpy(b, CFG_MAGIC, 4);
    le_put(b, 4, TPCC_CFG_VERSION, 2);
    le_put(b, 6, o->nodes, 2);
    le_put(b, 8, o->warehouses_per_node, 2);
    le_put(b, 10, o->items, 4);
    le_put(b, 14, o->customers_per_district, 4);
    for (int i = 0; i < TPCC_NOPS; i++) b[18 + i] = (uint8_t)o->mix[i];
    b[23] = (uint8_t)o->remote_item_pct;
    b[24] = (uint8_t)o->remote_payment_pct;
    b[25] = (uint8_t)o->by_name_pct;
    b[26] = (uint8_t)o->rollback_pct;
    *len = TPCC_CFG_LEN;
    return 0;
}

/* A's value over a range of `span` values where the spec has spec_a over spec_span (see the
 * file's header). */
static uint32_t nurand_a(uint32_t spec_a, uint32_t spec_span, uint32_t span)
{
    if (span >= spec_span) return spec_a;
    uint64_t lim = ((uint64_t)spec_a + 1) * span / spec_span;
    uint32_t a = 1;
    while (((uint64_t)a + 1) * 2 <= lim) a = a * 2 + 1;
    return a;
}

int tpcc_cfg_decode(const void *buf, size_t len, struct cfg *c, char *err, size_t errcap)
{
    const uint8_t *b = buf;
    if (!buf || len != TPCC_CFG_LEN)
        return tpcc_bad(err, errcap, "tpcc: config of %zu bytes, want %u", len, TPCC_CFG_LEN);
    if (memcmp(b, CFG_MAGIC, 4)) return tpcc_bad(err, errcap, "tpcc: not a TPC-C config");
    if (le_get(b, 4, 2) != TPCC_CFG_VERSION)
        return tpcc_bad(err, errcap, "tpcc: config version %u, want %u", (unsigned)le_get(b, 4, 2),
                   TPCC_CFG_VERSION);
    if (b[27]) return tpcc_bad(err, errcap, "tpcc: reserved config byte set");
    struct tpcc_opts o;
    o.nodes = (unsigned)le_get(b, 6, 2);
    o.warehouses_per_node = (unsigned)le_get(b, 8, 2);
    o.items = (unsigned)le_get(b, 10, 4);
    o.customers_per_district = (unsigned)le_get(b, 14, 4);
    for (int i = 0; i < TPCC_NOPS; i++) o.mix[i] = b[18 + i];
    o.remote_item_pct = b[23];
    o.remote_payment_pct = b[24];
    o.by_name_pct = b[25];
    o.rollback_pct = b[26];
    int rc = opts_valid(&o, err, errcap);
    if (rc || !c) return rc;
    memset(c, 0, sizeof *c);
    c->nodes = o.nodes;
    c->wpn = o.warehouses_per_node;
    c->W = o.nodes * o.warehouses_per_node;
    c->items = o.items;
    c->ncust = o.customers_per_district;
    memcpy(c->mix, o.mix, sizeof c->mix);
    c->remote_item_pct = o.remote_item_pct;
    c->remote_payment_pct = o.remote_payment_pct;
    c->by_name_pct = o.by_name_pct;
    c->rollback_pct = o.rollback_pct;
    /* spec: 900 of 3000 undelivered; scaled, rounded up (at least one) */
    uint32_t undelivered = (c->ncust * 3u + 9u) / 10u;
    c->first_undelivered = c->ncust - undelivered + 1;
    c->names = c->ncust < 1000 ? c->ncust : 1000;
    c->a_cid = nurand_a(1023, 3000, c->ncust);
    c->c_cid = C_ID_C % (c->a_cid + 1);
    c->a_iid = nurand_a(8191, 100000, c->items);
    c->c_iid = OL_I_ID_C % (c->a_iid + 1);
    return 0;
}

int tpcc_cfg_check(const void *cfg, size_t len, char *err, size_t errcap)
{
    return tpcc_cfg_decode(cfg, len, NULL, err, errcap);
}

uint64_t tpcc_rows_per_warehouse(const struct tpcc_opts *o)
{
    uint64_t n = o->customers_per_district;
    uint64_t undelivered = (n * 3 + 9) / 10;
    /* WAREHOUSE, DELIVERY, STOCK; per district: DISTRICT, CUSTOMER, CUST_NAME, HISTORY, ORDER,
     * CUST_ORDER, NEW-ORDER and ORDER-LINE (10 per order expected) */
    return 2 + (uint64_t)o->items + TPCC_DISTRICTS * (1 + 6 * n + undelivered + 10 * n);
}

