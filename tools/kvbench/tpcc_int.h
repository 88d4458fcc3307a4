/* TPC-C's pieces shared by its files (internal to the workload): the tables, the record layout,
 * the decoded config (tpcc_cfg.c), and what the check (tpcc_check.c) needs of the keys and the
 * rows. tpcc.c has the whole design: placement, keys, records, scaling and lock order. */
#ifndef RDKV_KVBENCH_TPCC_INT_H
#define RDKV_KVBENCH_TPCC_INT_H

#include "tools/kvbench/tpcc.h"
#include "tools/kvbench/workload.h"

#include "common/pack.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CFG_MAGIC "TPCC"
#define O_ID_MAX 0xFFFFFEu /* O_ID is 3 bytes in the keys */
#define MAX_OL 15
#define LOAD_BATCH_ROWS 256 /* rows per loading transaction */
#define LOAD_BATCH_BYTES (128u << 10)
#define TAG_SALT_MAX (1u << 24)
#define ROLLBACK 1      /* a transaction body's "roll back" (positive: not a status) */
#define BUSY_RETRIES 16 /* RDKV_EBUSY retries of one transaction before it counts as an error */

#define C_LAST_LOAD 157u
#define C_LAST_RUN 223u
#define C_ID_C 259u
#define OL_I_ID_C 7911u

enum table {
    T_WAREHOUSE = 1,
    T_DISTRICT,
    T_CUSTOMER,
    T_CUST_NAME,
    T_HISTORY,
    T_ORDER,
    T_CUST_ORDER,
    T_NEW_ORDER,
    T_ORDER_LINE,
    T_ITEM,
    T_STOCK,
    T_DELIVERY
};

/* ---------------------------------------------------------------------------------------------
 * Records: byte offsets of each field, and the fixed part's length. */
enum {
    W_YTD = 0,
    W_TAX = 8,
    W_NAME = 12,
    W_STREET_1 = 22,
    W_STREET_2 = 42,
    W_CITY = 62,
    W_STATE = 82,
    W_ZIP = 84,
    W_LEN = 93
};
enum {
    D_YTD = 0,
    D_TAX = 8,
    D_NEXT_O_ID = 12,
    D_NAME = 16,
    D_STREET_1 = 26,
    D_STREET_2 = 46,
    D_CITY = 66,
    D_STATE = 86,
    D_ZIP = 88,
    D_LEN = 97
};
enum {
    C_BALANCE = 0,
    C_YTD_PAYMENT = 8,
    C_CREDIT_LIM = 16,
    C_DISCOUNT = 24,
    C_PAYMENT_CNT = 28,
    C_DELIVERY_CNT = 32,
    C_SINCE = 36,
    C_FIRST = 44,
    C_MIDDLE = 60,
    C_LAST = 62,
    C_STREET_1 = 78,
    C_STREET_2 = 98,
    C_CITY = 118,
    C_STATE = 138,
    C_ZIP = 140,
    C_PHONE = 149,
    C_CREDIT = 165,
    C_DATA = 167,
    C_DATA_MAX = 500,
    C_MAX = C_DATA + C_DATA_MAX
};
enum {
    H_C_ID = 0,
    H_C_D_ID = 4,
    H_C_W_ID = 5,
    H_D_ID = 7,
    H_W_ID = 8,
    H_DATE = 10,
    H_AMOUNT = 18,
    H_DATA = 26,
    H_MAX = H_DATA + 24
};
enum { O_C_ID = 0, O_ENTRY_D = 4, O_CARRIER_ID = 12, O_OL_CNT = 13, O_ALL_LOCAL = 14, O_LEN = 15 };
enum {
    OL_I_ID = 0,
    OL_SUPPLY_W_ID = 4,
    OL_DELIVERY_D = 6,
    OL_QUANTITY = 14,
    OL_AMOUNT = 15,
    OL_DIST_INFO = 23,
    OL_LEN = 47
};
enum { I_IM_ID = 0, I_PRICE = 4, I_NAME = 12, I_DATA = 36, I_MAX = I_DATA + 50 };
enum {
    S_QUANTITY = 0,
    S_YTD = 4,
    S_ORDER_CNT = 8,
    S_REMOTE_CNT = 12,
    S_DIST = 16,
    S_DATA = 256,
    S_MAX = S_DATA + 50
};
#define NAME_LEN 16 /* C_FIRST and C_LAST in records and in CUST_NAME keys */

/* A record's field: n bytes at off, little-endian. */
static inline uint64_t le_get(const void *v, unsigned off, unsigned n)
{
    return pack_get_le((const uint8_t *)v + off, n);
}

static inline void le_put(void *v, unsigned off, uint64_t x, unsigned n)
{
    pack_put_le((uint8_t *)v + off, x, n);
}

static inline uint64_t be_get(const uint8_t *p, unsigned n)
{
    uint64_t x = 0;
    for (unsigned i = 0; i < n; i++) x = x << 8 | p[i];
    return x;
}

static inline uint8_t *be_put(uint8_t *p, uint64_t x, unsigned n)
{
    for (unsigned i = n; i--;) *p++ = (uint8_t)(x >> (8 * i));
    return p;
}

/* ---------------------------------------------------------------------------------------------
 * The config: packed bytes (TPCC_CFG_LEN, little-endian)
 *   0 "TPCC"  4 u16 version  6 u16 nodes  8 u16 warehouses_per_node  10 u32 items
 *   14 u32 customers_per_district  18 u8 mix[5]  23 u8 remote_item_pct  24 u8 remote_payment_pct
 *   25 u8 by_name_pct  26 u8 rollback_pct  27 u8 reserved (0)
 * and their decoded form with what follows from them. */
struct cfg {
    unsigned nodes, wpn, W, items, ncust;
    unsigned mix[TPCC_NOPS];
    unsigned remote_item_pct, remote_payment_pct, by_name_pct, rollback_pct;
    uint32_t first_undelivered; /* O_ID >= this: undelivered at load (NEW-ORDER rows) */
    unsigned names;             /* C_LAST numbers in use: min(1000, ncust) */
    uint32_t a_cid, c_cid, a_iid, c_iid;
};

/* Placement tags of the warehouses and the item copies (tpcc.c). */
struct tags {
    unsigned nodes, W;
    char (*w)[16]; /* [W + 1]; "" until computed */
    char (*i)[16]; /* [nodes] */
};
int tpcc_tags_init(struct tags *t, unsigned nodes, unsigned W);
void tpcc_tags_free(struct tags *t);
/* Keys (tpcc.c): the table, warehouse and district head of a key; whole keys of a warehouse and
 * a district row; the smallest key above every key that starts with k[0..n). */
uint8_t *tpcc_wd(uint8_t *k, enum table t, unsigned w, unsigned d);
size_t tpcc_k_warehouse(struct tags *tg, uint8_t *k, unsigned w);
size_t tpcc_k_district(struct tags *tg, uint8_t *k, unsigned w, unsigned d);
size_t tpcc_key_succ(uint8_t *k, size_t n);
/* Reads key into buf (tpcc.c): its length, or a status. A row that must exist: absent is a
 * broken database (tpcc_must turns RDKV_ENOTFOUND into RDKV_EPROTO). */
int tpcc_rd(rdkv_txn *t, const uint8_t *k, size_t kl, bool upd, void *buf, size_t min, size_t cap);
int tpcc_must(int rc);
/* err gets the message (printf-style); returns RDKV_EINVAL. */
int tpcc_bad(char *err, size_t errcap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* wl_class's cfg_check: the config bytes decode and are in range. */
int tpcc_cfg_check(const void *cfg, size_t len, char *err, size_t errcap);
/* Decodes and checks config bytes into c (NULL: only checks). */
int tpcc_cfg_decode(const void *buf, size_t len, struct cfg *c, char *err, size_t errcap);

/* The check (tpcc_check.c): wl_class's check_parts, check and check_report. */
unsigned tpcc_check_parts(const void *cfgb, size_t len);
int tpcc_check(rdkv_session *s, const void *cfgb, size_t len, unsigned part, struct wl_check *out);
int tpcc_check_report(const void *cfgb, size_t len, const struct wl_check *all, char *outp,
                      size_t cap);

#endif
