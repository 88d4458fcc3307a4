/* TPC-C (spec rev 5.11) as a kvbench workload: the nine tables as rdkv rows, a loader, the five
 * transactions of clauses 2.4-2.8 with their access patterns, and consistency conditions 1-4 of
 * clause 3.3.2 as the check. Interface: tools/kvbench/workload.h; options: tpcc.h.
 *
 * Placement. Warehouse w (1-based) lives on node (w - 1) % nodes: every key of a warehouse (its
 * rows in all tables and in the secondary indexes) ends in the warehouse's placement tag
 * "{w<w>.<salt>}", salt the smallest for which rdkv places that tag on the wanted node (see
 * rdkv_key_partition). A transaction on one warehouse is therefore local to one node and needs
 * no two-phase commit; only the spec's remote order lines (1%) and remote payments (15%) reach
 * another node. ITEM is read-only and replicated, one copy per node (tag "{i<node>.<salt>}"); a
 * transaction reads the copy on its home warehouse's node.
 *
 * Keys are binary and big-endian: the table byte, the warehouse (u16), the district (u8), then
 * the ids, then the tag. The range locks use a key's first 8 bytes as its coordinate, so the
 * fields that scans and inserts must tell apart come first, e.g. ORDER-LINE is
 * table(1) w(2) d(1) o_id(3) ol_number(1) and a district's orders sort by O_ID:
 *   WAREHOUSE   01 w                    DISTRICT    02 w d
 *   CUSTOMER    03 w d c_id(2)          CUST_NAME   04 w d c_last(16) c_first(16) c_id(2)
 *   HISTORY     05 w d origin(8) seq(4) ORDER       06 w d o_id(3)
 *   CUST_ORDER  07 w d c_id(2) o_id(3)  NEW_ORDER   08 w d o_id(3)
 *   ORDER_LINE  09 w d o_id(3) ol(1)    ITEM        0A i_id(3)          (the node's tag)
 *   STOCK       0B w i_id(3)            DELIVERY    0C w
 * CUST_NAME (customer by last name, for the 60% by-name lookups) and CUST_ORDER (a customer's
 * orders, for Order-Status's latest order) are the secondary indexes. HISTORY has no key in the
 * spec: origin is 0 for loaded rows and a per-worker random id otherwise, seq counts. DELIVERY is
 * one row per warehouse that a Delivery locks first: the spec runs Delivery deferred, from a
 * queue (clause 2.7.2), so one warehouse's deliveries run one at a time anyway; without it two
 * of them would both scan the same oldest NEW-ORDER row shared and then each wait for the other
 * to let go before deleting it, until a lock wait ran out.
 *
 * Values are fixed-layout little-endian records (offsets below): money in cents (int64), tax and
 * discount in 1/10000, dates in seconds since the epoch (0: null). Text fields are fixed-width,
 * zero-padded; the one variable field of a record (C_DATA, S_DATA, I_DATA, H_DATA) comes last and
 * runs to the end of the value, so rows are about their spec size.
 *
 * Scaling. customers_per_district (n) may be below 3000 for tests: then the orders per district
 * are n, the last ceil(0.3 n) undelivered; the C_LAST numbers are 0..L-1 with L = min(1000, n)
 * (the first L customers take them in order, so every name exists) and drawn with NURand(255, 0,
 * L-1). NURand's A keeps its spec value while the range does (C_ID over 3000 customers, OL_I_ID
 * over 100000 items); over a smaller range A is scaled with it, to the largest 2^k - 1 not above
 * (A + 1) * range / spec range (at least 1), and C is the spec's constant mod A + 1, so the skew
 * keeps its shape instead of folding 8191 onto a few hundred items. C_LAST's C is 157 at load and
 * 223 at run time (Silo's pair, 66 apart as clause 2.1.6.1 wants).
 *
 * Lock order. New-Order sorts its lines by (supply warehouse, item) and Stock-Level reads its
 * stock rows in item order, so that two of them never wait for each other's stock rows; New-
 * Order inserts its ORDER and NEW-ORDER rows before reading the customer, and Order-Status reads
 * the customer after the order and its lines: both in the order Delivery takes them (NEW-ORDER,
 * ORDER, ORDER-LINE, CUSTOMER), so that these pairs cannot deadlock either. The reads of a
 * transaction are the spec's; only their order differs. Rows to be written are read with
 * rdkv_txn_get_for_update (no shared-to-exclusive upgrades), except the NEW-ORDER row a Delivery
 * finds by its scan and deletes. */
#include "tools/kvbench/tpcc.h"
#include "tools/kvbench/workload.h"

#include "common/clock.h"
#include "common/pack.h"
#include "common/rng.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/kvbench/tpcc_int.h"

/* ---------------------------------------------------------------------------------------------
 * Placement tags, computed on first use and cached. */
static unsigned tag_find(char kind, unsigned id, unsigned node, unsigned nodes, char tag[16])
{
    char key[24];
    for (uint32_t salt = 0; salt < TAG_SALT_MAX; salt++) {
        int n = snprintf(key, sizeof key, "{%c%u.%" PRIu32 "}", kind, id, salt);
        if (rdkv_key_partition(key, (size_t)n, nodes) == node || salt + 1 == TAG_SALT_MAX) {
            /* (not finding one in 2^24 tries is impossible in practice: the last one stands,
             * on whichever node -- the data stays correct, only its locality suffers) */
            memcpy(tag, key + 1, (size_t)n - 2);
            tag[n - 2] = 0;
            return rdkv_key_partition(key, (size_t)n, nodes);
        }
    }
    return 0;
}

unsigned tpcc_wh_tag(unsigned w, unsigned nodes, char tag[16])
{
    return tag_find('w', w, (w - 1) % nodes, nodes, tag);
}

int tpcc_tags_init(struct tags *t, unsigned nodes, unsigned W)
{
    t->nodes = nodes;
    t->W = W;
    t->w = calloc((size_t)W + 1, sizeof *t->w);
    t->i = calloc(nodes, sizeof *t->i);
    return t->w && t->i ? 0 : RDKV_ENOMEM;
}

void tpcc_tags_free(struct tags *t)
{
    free(t->w);
    free(t->i);
}

static const char *wtag(struct tags *t, unsigned w)
{
    if (!t->w[w][0]) tpcc_wh_tag(w, t->nodes, t->w[w]);
    return t->w[w];
}

static const char *itag(struct tags *t, unsigned node)
{
    if (!t->i[node][0]) tag_find('i', node, node, t->nodes, t->i[node]);
    return t->i[node];
}

/* ---------------------------------------------------------------------------------------------
 * Keys. Each builder writes into k (TPCC_KEY_MAX bytes) and returns the length; with tg NULL it
 * stops before the tag (a scan bound: every key of the table with those fields sorts after it,
 * the tag being the same for all of one warehouse). */
static size_t finish(struct tags *tg, uint8_t *k, uint8_t *p, const char *tag)
{
    if (!tg) return (size_t)(p - k);
    size_t n = strlen(tag);
    *p++ = '{';
    memcpy(p, tag, n);
    p += n;
    *p++ = '}';
    return (size_t)(p - k);
}

/* finish with warehouse w's tag. */
static size_t finish_w(struct tags *tg, uint8_t *k, uint8_t *p, unsigned w)
{
    return finish(tg, k, p, tg ? wtag(tg, w) : NULL);
}

uint8_t *tpcc_wd(uint8_t *k, enum table t, unsigned w, unsigned d)
{
    k[0] = (uint8_t)t;
    uint8_t *p = be_put(k + 1, w, 2);
    if (d) *p++ = (uint8_t)d;
    return p;
}

size_t tpcc_k_warehouse(struct tags *tg, uint8_t *k, unsigned w)
{
    return finish_w(tg, k, tpcc_wd(k, T_WAREHOUSE, w, 0), w);
}

static size_t key_delivery(struct tags *tg, uint8_t *k, unsigned w)
{
    return finish_w(tg, k, tpcc_wd(k, T_DELIVERY, w, 0), w);
}

size_t tpcc_k_district(struct tags *tg, uint8_t *k, unsigned w, unsigned d)
{
    return finish_w(tg, k, tpcc_wd(k, T_DISTRICT, w, d), w);
}

static size_t key_customer(struct tags *tg, uint8_t *k, unsigned w, unsigned d, uint32_t c)
{
    return finish_w(tg, k, be_put(tpcc_wd(k, T_CUSTOMER, w, d), c, 2), w);
}

/* first NULL: the prefix of one last name (a scan bound, tg NULL). */
static size_t key_cust_name(struct tags *tg, uint8_t *k, unsigned w, unsigned d,
                            const uint8_t *last, const uint8_t *first, uint32_t c)
{
    uint8_t *p = tpcc_wd(k, T_CUST_NAME, w, d);
    memcpy(p, last, NAME_LEN);
    p += NAME_LEN;
    if (first) {
        memcpy(p, first, NAME_LEN);
        p = be_put(p + NAME_LEN, c, 2);
    }
    return finish_w(tg, k, p, w);
}

static size_t key_history(struct tags *tg, uint8_t *k, unsigned w, unsigned d, uint64_t origin,
                          uint32_t seq)
{
    uint8_t *p = be_put(tpcc_wd(k, T_HISTORY, w, d), origin, 8);
    return finish_w(tg, k, be_put(p, seq, 4), w);
}

static size_t key_order(struct tags *tg, uint8_t *k, unsigned w, unsigned d, uint32_t o)
{
    return finish_w(tg, k, be_put(tpcc_wd(k, T_ORDER, w, d), o, 3), w);
}

static size_t key_cust_order(struct tags *tg, uint8_t *k, unsigned w, unsigned d, uint32_t c,
                             uint32_t o)
{
    uint8_t *p = be_put(tpcc_wd(k, T_CUST_ORDER, w, d), c, 2);
    return finish_w(tg, k, be_put(p, o, 3), w);
}

static size_t key_new_order(struct tags *tg, uint8_t *k, unsigned w, unsigned d, uint32_t o)
{
    return finish_w(tg, k, be_put(tpcc_wd(k, T_NEW_ORDER, w, d), o, 3), w);
}

/* ol 0: the bound before order o's lines (tg NULL). */
static size_t key_order_line(struct tags *tg, uint8_t *k, unsigned w, unsigned d, uint32_t o,
                             unsigned ol)
{
    uint8_t *p = be_put(tpcc_wd(k, T_ORDER_LINE, w, d), o, 3);
    if (ol) *p++ = (uint8_t)ol;
    return finish_w(tg, k, p, w);
}

static size_t key_item(struct tags *tg, uint8_t *k, unsigned node, uint32_t i)
{
    k[0] = T_ITEM;
    return finish(tg, k, be_put(k + 1, i, 3), tg ? itag(tg, node) : NULL);
}

static size_t key_stock(struct tags *tg, uint8_t *k, unsigned w, uint32_t i)
{
    return finish_w(tg, k, be_put(tpcc_wd(k, T_STOCK, w, 0), i, 3), w);
}

/* The smallest key above every key that starts with k[0..n): k with its last byte incremented
 * (carrying; the prefixes here never are all 0xFF). */
size_t tpcc_key_succ(uint8_t *k, size_t n)
{
    for (size_t i = n; i--;) {
        if (++k[i]) break;
    }
    return n;
}

/* The public builders (for the tests): the tags of warehouses 1..w, computed for the call. */
size_t tpcc_key_district(uint8_t *k, unsigned nodes, unsigned w, unsigned d)
{
    struct tags tg;
    size_t n = tpcc_tags_init(&tg, nodes, w) ? 0 : tpcc_k_district(&tg, k, w, d);
    tpcc_tags_free(&tg);
    return n;
}

size_t tpcc_key_order(uint8_t *k, unsigned nodes, unsigned w, unsigned d, uint32_t o_id)
{
    struct tags tg;
    size_t n = tpcc_tags_init(&tg, nodes, w) ? 0 : key_order(&tg, k, w, d, o_id);
    tpcc_tags_free(&tg);
    return n;
}

size_t tpcc_key_order_line(uint8_t *k, unsigned nodes, unsigned w, unsigned d, uint32_t o_id,
                           unsigned ol)
{
    struct tags tg;
    size_t n = tpcc_tags_init(&tg, nodes, w) ? 0 : key_order_line(&tg, k, w, d, o_id, ol);
    tpcc_tags_free(&tg);
    return n;
}

/* ---------------------------------------------------------------------------------------------
 * Random values (spec 2.1.4 - 2.1.6, 4.3.2). */
static uint32_t rnd(uint64_t *r, uint32_t lo, uint32_t hi)
{
    return lo + (uint32_t)rng_below(r, (uint64_t)hi - lo + 1);
}

uint32_t tpcc_nurand(uint64_t *rng, uint32_t a, uint32_t x, uint32_t y, uint32_t c)
{
    return (((rnd(rng, 0, a) | rnd(rng, x, y)) + c) % (y - x + 1)) + x;
}

static const char *const syllables[10] = {"BAR", "OUGHT", "ABLE",  "PRI",   "PRES",
                                          "ESE", "ANTI",  "CALLY", "ATION", "EING"};

size_t tpcc_c_last(unsigned num, char *buf)
{
    num %= 1000;
    int n = snprintf(buf, 16, "%s%s%s", syllables[num / 100], syllables[num / 10 % 10],
                     syllables[num % 10]);
    return (size_t)n;
}

/* C_LAST number num as a zero-padded field. */
static void last_field(unsigned num, uint8_t out[NAME_LEN])
{
    char s[16];
    memset(out, 0, NAME_LEN);
    memcpy(out, s, tpcc_c_last(num, s));
}

/* A random a-string of lo..hi characters into out, zero-padded to width (>= hi; 0: no padding):
 * its length. */
static unsigned astr(uint64_t *r, uint8_t *out, unsigned lo, unsigned hi, unsigned width)
{
    static const char an[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned n = rnd(r, lo, hi);
    for (unsigned i = 0; i < n; i++) out[i] = (uint8_t)an[rng_below(r, sizeof an - 1)];
    if (width > n) memset(out + n, 0, width - n);
    return n;
}

static void nstr(uint64_t *r, uint8_t *out, unsigned n)
{
    for (unsigned i = 0; i < n; i++) out[i] = (uint8_t)('0' + rng_below(r, 10));
}

/* I_DATA / S_DATA: 26..50 characters, 10% with "ORIGINAL" somewhere. */
static unsigned data_field(uint64_t *r, uint8_t *out)
{
    unsigned n = astr(r, out, 26, 50, 0);
    if (rnd(r, 1, 10) == 1) memcpy(out + rnd(r, 0, n - 8), "ORIGINAL", 8);
    return n;
}

/* The street, city, state and zip of an address (spec 4.3.2.7), at out. */
static void address(uint64_t *r, uint8_t *out)
{
    astr(r, out, 10, 20, 20);
    astr(r, out + 20, 10, 20, 20);
    astr(r, out + 40, 10, 20, 20);
    astr(r, out + 60, 2, 2, 2);
    nstr(r, out + 62, 4);
    memcpy(out + 66, "11111", 5);
}

static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t rng_seed(uint64_t s)
{
    uint64_t x = mix64(s);
    return x ? x : 1;
}

/* ---------------------------------------------------------------------------------------------
 * Loading: rows are gathered into batches of at most LOAD_BATCH_ROWS rows / LOAD_BATCH_BYTES
 * bytes, each written by one transaction (replayed whole if it must be retried). */
struct batch {
    rdkv_session *s;
    uint8_t *buf; /* rows as [u32 klen][u32 vlen][key][value] */
    size_t len;
    unsigned rows;
};

static int batch_flush(struct batch *b)
{
    if (!b->rows) return 0;
    rdkv_txn *t;
    int rc = rdkv_txn_begin(b->s, &t);
    if (rc) return rc;
    for (;;) {
        size_t at = 0;
        for (unsigned i = 0; i < b->rows && !rc; i++) {
            uint32_t kl = (uint32_t)le_get(b->buf, (unsigned)at, 4);
            uint32_t vl = (uint32_t)le_get(b->buf, (unsigned)at + 4, 4);
            rc = rdkv_txn_put(t, b->buf + at + 8, kl, b->buf + at + 8 + kl, vl);
            at += 8u + kl + vl;
        }
        if (!rc) rc = rdkv_txn_commit(t);
        if (!rc) break;
        if ((rc = rdkv_txn_on_error(t, rc))) break;
    }
    rdkv_txn_free(t);
    b->len = 0;
    b->rows = 0;
    return rc;
}

static int batch_add(struct batch *b, const uint8_t *k, size_t kl, const void *v, size_t vl)
{
    if (b->rows >= LOAD_BATCH_ROWS || b->len + 8 + kl + vl > LOAD_BATCH_BYTES) {
        int rc = batch_flush(b);
        if (rc) return rc;
    }
    le_put(b->buf, (unsigned)b->len, kl, 4);
    le_put(b->buf, (unsigned)b->len + 4, vl, 4);
    memcpy(b->buf + b->len + 8, k, kl);
    memcpy(b->buf + b->len + 8 + kl, v, vl);
    b->len += 8 + kl + vl;
    b->rows++;
    return 0;
}

/* One copy of ITEM, identical on every node (the same seed). */
static int load_items(struct batch *b, const struct cfg *c, struct tags *tg, unsigned node)
{
    uint64_t r = rng_seed(0x17E3);
    uint8_t k[TPCC_KEY_MAX], v[I_MAX];
    for (uint32_t i = 1; i <= c->items; i++) {
        le_put(v, I_IM_ID, rnd(&r, 1, 10000), 4);
        le_put(v, I_PRICE, rnd(&r, 100, 10000), 8);
        astr(&r, v + I_NAME, 14, 24, 24);
        unsigned dl = data_field(&r, v + I_DATA);
        int rc = batch_add(b, k, key_item(tg, k, node, i), v, I_DATA + dl);
        if (rc) return rc;
    }
    return 0;
}

static int load_district(struct batch *b, const struct cfg *c, struct tags *tg, uint64_t *r,
                         unsigned w, unsigned d, uint32_t *perm, int64_t now)
{
    uint8_t k[TPCC_KEY_MAX], v[C_MAX];
    int rc = 0;
    memset(v, 0, D_LEN);
    le_put(v, D_YTD, 3000000, 8); /* 30,000.00 */
    le_put(v, D_TAX, rnd(r, 0, 2000), 4);
    le_put(v, D_NEXT_O_ID, c->ncust + 1, 4);
    astr(r, v + D_NAME, 6, 10, 10);
    address(r, v + D_STREET_1);
    if ((rc = batch_add(b, k, tpcc_k_district(tg, k, w, d), v, D_LEN))) return rc;

    for (uint32_t cid = 1; cid <= c->ncust && !rc; cid++) {
        memset(v, 0, C_DATA);
        le_put(v, C_BALANCE, (uint64_t)-1000, 8); /* -10.00 */
        le_put(v, C_YTD_PAYMENT, 1000, 8);
        le_put(v, C_CREDIT_LIM, 5000000, 8);
        le_put(v, C_DISCOUNT, rnd(r, 0, 5000), 4);
        le_put(v, C_PAYMENT_CNT, 1, 4);
        le_put(v, C_SINCE, (uint64_t)now, 8);
        astr(r, v + C_FIRST, 8, 16, NAME_LEN);
        memcpy(v + C_MIDDLE, "OE", 2);
        unsigned num =
            cid <= c->names ? cid - 1 : tpcc_nurand(r, 255, 0, c->names - 1, C_LAST_LOAD);
        last_field(num, v + C_LAST);
        address(r, v + C_STREET_1);
        nstr(r, v + C_PHONE, 16);
        memcpy(v + C_CREDIT, rnd(r, 1, 10) == 1 ? "BC" : "GC", 2);
        unsigned dl = astr(r, v + C_DATA, 300, 500, 0);
        rc = batch_add(b, k, key_customer(tg, k, w, d, cid), v, C_DATA + dl);
        uint8_t one = 0;
        if (!rc)
            rc = batch_add(b, k, key_cust_name(tg, k, w, d, v + C_LAST, v + C_FIRST, cid), &one, 1);
        uint8_t h[H_MAX];
        le_put(h, H_C_ID, cid, 4);
        le_put(h, H_C_D_ID, d, 1);
        le_put(h, H_C_W_ID, w, 2);
        le_put(h, H_D_ID, d, 1);
        le_put(h, H_W_ID, w, 2);
        le_put(h, H_DATE, (uint64_t)now, 8);
        le_put(h, H_AMOUNT, 1000, 8);
        unsigned hl = astr(r, h + H_DATA, 12, 24, 0);
        if (!rc) rc = batch_add(b, k, key_history(tg, k, w, d, 0, cid), h, H_DATA + hl);
    }

    /* O_C_ID: a random permutation of the customers */
    for (uint32_t i = 0; i < c->ncust; i++) perm[i] = i + 1;
    for (uint32_t i = c->ncust; i > 1; i--) {
        uint32_t j = (uint32_t)rng_below(r, i);
        uint32_t x = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = x;
    }
    for (uint32_t o = 1; o <= c->ncust && !rc; o++) {
        bool delivered = o < c->first_undelivered;
        unsigned ol_cnt = rnd(r, 5, 15);
        le_put(v, O_C_ID, perm[o - 1], 4);
        le_put(v, O_ENTRY_D, (uint64_t)now, 8);
        v[O_CARRIER_ID] = delivered ? (uint8_t)rnd(r, 1, 10) : 0;
        v[O_OL_CNT] = (uint8_t)ol_cnt;
        v[O_ALL_LOCAL] = 1;
        rc = batch_add(b, k, key_order(tg, k, w, d, o), v, O_LEN);
        uint8_t one = 0;
        if (!rc) rc = batch_add(b, k, key_cust_order(tg, k, w, d, perm[o - 1], o), &one, 1);
        if (!rc && !delivered) rc = batch_add(b, k, key_new_order(tg, k, w, d, o), &one, 1);
        for (unsigned ol = 1; ol <= ol_cnt && !rc; ol++) {
            uint8_t l[OL_LEN];
            le_put(l, OL_I_ID, rnd(r, 1, c->items), 4);
            le_put(l, OL_SUPPLY_W_ID, w, 2);
            le_put(l, OL_DELIVERY_D, delivered ? (uint64_t)now : 0, 8);
            l[OL_QUANTITY] = 5;
            le_put(l, OL_AMOUNT, delivered ? 0 : rnd(r, 1, 999999), 8);
            astr(r, l + OL_DIST_INFO, 24, 24, 24);
            rc = batch_add(b, k, key_order_line(tg, k, w, d, o, ol), l, OL_LEN);
        }
    }
    return rc;
}

static int load_warehouse(struct batch *b, const struct cfg *c, struct tags *tg, unsigned w,
                          uint32_t *perm)
{
    uint64_t r = rng_seed(0x3A4E0000ull + w);
    int64_t now = (int64_t)time(NULL);
    uint8_t k[TPCC_KEY_MAX], v[S_MAX];
    memset(v, 0, W_LEN);
    le_put(v, W_YTD, 30000000, 8); /* 300,000.00 */
    le_put(v, W_TAX, rnd(&r, 0, 2000), 4);
    astr(&r, v + W_NAME, 6, 10, 10);
    address(&r, v + W_STREET_1);
    int rc = batch_add(b, k, tpcc_k_warehouse(tg, k, w), v, W_LEN);
    uint8_t zero[8] = {0};
    if (!rc) rc = batch_add(b, k, key_delivery(tg, k, w), zero, 8);
    for (uint32_t i = 1; i <= c->items && !rc; i++) {
        memset(v, 0, S_DATA);
        le_put(v, S_QUANTITY, rnd(&r, 10, 100), 4);
        for (unsigned d = 0; d < TPCC_DISTRICTS; d++) astr(&r, v + S_DIST + 24 * d, 24, 24, 24);
        unsigned dl = data_field(&r, v + S_DATA);
        rc = batch_add(b, k, key_stock(tg, k, w, i), v, S_DATA + dl);
    }
    for (unsigned d = 1; d <= TPCC_DISTRICTS && !rc; d++)
        rc = load_district(b, c, tg, &r, w, d, perm, now);
    return rc;
}

static int tpcc_load(rdkv_session *s, const void *cfgb, size_t len, unsigned part, unsigned nparts,
                     char *err, size_t errcap)
{
    struct cfg c;
    int rc = tpcc_cfg_decode(cfgb, len, &c, err, errcap);
    if (rc) return rc;
    if (nparts != c.nodes || part >= nparts)
        return tpcc_bad(err, errcap, "tpcc: load part %u of %u, but the config has %u nodes", part,
                   nparts, c.nodes);
    struct tags tg;
    struct batch b = {.s = s, .buf = malloc(LOAD_BATCH_BYTES + 1024)};
    uint32_t *perm = malloc(sizeof *perm * c.ncust);
    rc = tpcc_tags_init(&tg, c.nodes, c.W);
    if (!rc && (!b.buf || !perm)) rc = RDKV_ENOMEM;
    unsigned at = 0; /* the warehouse being loaded (0: ITEM) */
    if (!rc) rc = load_items(&b, &c, &tg, part);
    for (unsigned w = part + 1; w <= c.W && !rc; w += c.nodes) {
        at = w;
        rc = load_warehouse(&b, &c, &tg, w, perm);
    }
    if (!rc) rc = batch_flush(&b);
    if (rc && at)
        tpcc_bad(err, errcap, "tpcc: loading warehouse %u: %s", at, rdkv_strerror(rc));
    else if (rc)
        tpcc_bad(err, errcap, "tpcc: loading ITEM on node %u: %s", part, rdkv_strerror(rc));
    free(perm);
    free(b.buf);
    tpcc_tags_free(&tg);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Workers. */
struct worker {
    struct cfg c;
    struct tags tg;
    uint64_t rng;
    unsigned home, node;  /* the home warehouse and its node (whose ITEM copy is read) */
    unsigned sl_district; /* Stock-Level's district: fixed per terminal (spec 2.8.1.1) */
    uint64_t origin;      /* HISTORY keys of this worker */
    uint32_t hseq;
    uint32_t *ids; /* scratch: customer ids of one name, items of Stock-Level */
    size_t nids, idcap;
    int64_t sink; /* what the transactions compute and the spec does not store */
};

static int ids_push(struct worker *w, uint32_t id)
{
    if (w->nids == w->idcap) {
        size_t cap = w->idcap ? w->idcap * 2 : 512;
        uint32_t *n = realloc(w->ids, cap * sizeof *n);
        if (!n) return RDKV_ENOMEM;
        w->ids = n;
        w->idcap = cap;
    }
    w->ids[w->nids++] = id;
    return 0;
}

/* Reads key into buf: its length (at least min, at most cap: otherwise it is not a row of
 * ours: RDKV_EPROTO), or a status (RDKV_ENOTFOUND when absent). */
int tpcc_rd(rdkv_txn *t, const uint8_t *k, size_t kl, bool upd, void *buf, size_t min, size_t cap)
{
    const void *v;
    size_t vl;
    int rc = upd ? rdkv_txn_get_for_update(t, k, kl, &v, &vl) : rdkv_txn_get(t, k, kl, &v, &vl);
    if (rc) return rc;
    if (vl < min || vl > cap) return RDKV_EPROTO;
    memcpy(buf, v, vl);
    return (int)vl;
}

/* A row that must exist: absent is a broken database, not a NOT_FOUND outcome. */
int tpcc_must(int rc)
{
    return rc == RDKV_ENOTFOUND ? RDKV_EPROTO : rc;
}

/* The customer with last name number `name` in (w, d): the middle one by C_FIRST (spec
 * 2.5.2.2: position ceil(n / 2) of n), through the CUST_NAME index. */
static int by_name(struct worker *wk, rdkv_txn *t, unsigned w, unsigned d, unsigned name,
                   uint32_t *c_id)
{
    uint8_t last[NAME_LEN], b[TPCC_KEY_MAX], e[TPCC_KEY_MAX];
    last_field(name, last);
    size_t bl = key_cust_name(NULL, b, w, d, last, NULL, 0);
    memcpy(e, b, bl);
    size_t el = tpcc_key_succ(e, bl);
    rdkv_iter *it;
    int rc = rdkv_txn_scan(t, b, bl, e, el, 0, &it);
    if (rc) return rc;
    wk->nids = 0;
    const void *k, *v;
    size_t kl, vl;
    while ((rc = rdkv_iter_next(it, &k, &kl, &v, &vl)) == 1) {
        if (kl < bl + NAME_LEN + 2) {
            rc = RDKV_EPROTO;
            break;
        }
        if ((rc = ids_push(wk, (uint32_t)be_get((const uint8_t *)k + bl + NAME_LEN, 2)))) break;
    }
    rdkv_iter_close(it);
    if (rc < 0) return rc;
    if (!wk->nids) return RDKV_EPROTO; /* every name in use has a customer */
    *c_id = wk->ids[(wk->nids - 1) / 2];
    return 0;
}

struct no_line {
    uint32_t i;
    unsigned sw, qty;
};

struct inputs {
    unsigned w, d, cw, cd; /* home warehouse and district; the customer's (Payment) */
    bool by_name;
    unsigned name;   /* C_LAST number when by_name */
    uint32_t c;      /* C_ID otherwise */
    unsigned ol_cnt; /* New-Order */
    bool rollback, all_local;
    struct no_line l[MAX_OL];
    int64_t amount;     /* Payment, cents */
    unsigned carrier;   /* Delivery */
    unsigned threshold; /* Stock-Level */
};

static int line_cmp(const void *a, const void *b)
{
    const struct no_line *x = a, *y = b;
    if (x->sw != y->sw) return x->sw < y->sw ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static unsigned other_wh(struct worker *wk, unsigned w)
{
    unsigned o = rnd(&wk->rng, 1, wk->c.W - 1);
    return o >= w ? o + 1 : o;
}

/* Draws a transaction's inputs (once: a retry runs the same transaction again). */
static void gen(struct worker *wk, unsigned op, struct inputs *in)
{
    const struct cfg *c = &wk->c;
    uint64_t *r = &wk->rng;
    memset(in, 0, sizeof *in);
    in->w = wk->home;
    in->d = rnd(r, 1, TPCC_DISTRICTS);
    switch (op) {
    case TPCC_NEW_ORDER:
        in->c = tpcc_nurand(r, c->a_cid, 1, c->ncust, c->c_cid);
        in->ol_cnt = rnd(r, 5, MAX_OL);
        in->rollback = rnd(r, 1, 100) <= c->rollback_pct;
        in->all_local = true;
        for (unsigned i = 0; i < in->ol_cnt; i++) {
            struct no_line *l = &in->l[i];
            l->i = tpcc_nurand(r, c->a_iid, 1, c->items, c->c_iid);
            l->sw = in->w;
            if (c->W > 1 && rnd(r, 1, 100) <= c->remote_item_pct) {
                l->sw = other_wh(wk, in->w);
                in->all_local = false;
            }
            l->qty = rnd(r, 1, 10);
        }
        /* the unused item comes last (spec 2.4.1.4), after the sorted others */
        qsort(in->l, in->ol_cnt - (in->rollback ? 1 : 0), sizeof in->l[0], line_cmp);
        if (in->rollback) in->l[in->ol_cnt - 1].i = c->items + 1;
        break;
    case TPCC_PAYMENT:
    case TPCC_ORDER_STATUS:
        in->cw = in->w;
        in->cd = in->d;
        if (op == TPCC_PAYMENT && c->W > 1 && rnd(r, 1, 100) <= c->remote_payment_pct) {
            in->cw = other_wh(wk, in->w);
            in->cd = rnd(r, 1, TPCC_DISTRICTS);
        }
        in->by_name = rnd(r, 1, 100) <= c->by_name_pct;
        if (in->by_name)
            in->name = tpcc_nurand(r, 255, 0, c->names - 1, C_LAST_RUN);
        else
            in->c = tpcc_nurand(r, c->a_cid, 1, c->ncust, c->c_cid);
        in->amount = rnd(r, 100, 500000);
        break;
    case TPCC_DELIVERY:
        in->carrier = rnd(r, 1, 10);
        break;
    case TPCC_STOCK_LEVEL:
        in->d = wk->sl_district;
        in->threshold = rnd(r, 10, 20);
        break;
    }
}

/* Spec 2.4.2.2. */
static int new_order(struct worker *wk, rdkv_txn *t, const struct inputs *in)
{
    struct tags *tg = &wk->tg;
    uint8_t k[TPCC_KEY_MAX], v[C_MAX], dist[D_LEN];
    unsigned w = in->w, d = in->d;
    int n = tpcc_rd(t, k, tpcc_k_warehouse(tg, k, w), false, v, W_LEN, W_LEN);
    if (n < 0) return tpcc_must(n);
    int64_t w_tax = (int64_t)le_get(v, W_TAX, 4);
    if ((n = tpcc_rd(t, k, tpcc_k_district(tg, k, w, d), true, dist, D_LEN, D_LEN)) < 0) return tpcc_must(n);
    int64_t d_tax = (int64_t)le_get(dist, D_TAX, 4);
    uint32_t o = (uint32_t)le_get(dist, D_NEXT_O_ID, 4);
    if (o < 1 || o > O_ID_MAX) return RDKV_ENOSPC; /* out of O_IDs for the keys */
    le_put(dist, D_NEXT_O_ID, o + 1, 4);
    int rc = rdkv_txn_put(t, k, tpcc_k_district(tg, k, w, d), dist, D_LEN);
    if (rc) return rc;

    uint8_t rec[O_LEN], one = 0;
    int64_t now = (int64_t)time(NULL);
    le_put(rec, O_C_ID, in->c, 4);
    le_put(rec, O_ENTRY_D, (uint64_t)now, 8);
    rec[O_CARRIER_ID] = 0;
    rec[O_OL_CNT] = (uint8_t)in->ol_cnt;
    rec[O_ALL_LOCAL] = in->all_local;
    if ((rc = rdkv_txn_put(t, k, key_order(tg, k, w, d, o), rec, O_LEN))) return rc;
    if ((rc = rdkv_txn_put(t, k, key_new_order(tg, k, w, d, o), &one, 1))) return rc;
    if ((rc = rdkv_txn_put(t, k, key_cust_order(tg, k, w, d, in->c, o), &one, 1))) return rc;

    if ((n = tpcc_rd(t, k, key_customer(tg, k, w, d, in->c), false, v, C_DATA, C_MAX)) < 0)
        return tpcc_must(n);
    int64_t discount = (int64_t)le_get(v, C_DISCOUNT, 4);
    bool bad_credit = !memcmp(v + C_CREDIT, "BC", 2);

    int64_t sum = 0;
    unsigned brand = 0;
    for (unsigned i = 0; i < in->ol_cnt; i++) {
        const struct no_line *l = &in->l[i];
        uint8_t item[I_MAX];
        int il = tpcc_rd(t, k, key_item(tg, k, wk->node, l->i), false, item, I_DATA, I_MAX);
        if (il == RDKV_ENOTFOUND && in->rollback && i + 1 == in->ol_cnt) return ROLLBACK;
        if (il < 0) return tpcc_must(il);
        int64_t price = (int64_t)le_get(item, I_PRICE, 8);
        int sl = tpcc_rd(t, k, key_stock(tg, k, l->sw, l->i), true, v, S_DATA, S_MAX);
        if (sl < 0) return tpcc_must(sl);
        int32_t q = (int32_t)le_get(v, S_QUANTITY, 4);
        q = q >= (int32_t)l->qty + 10 ? q - (int32_t)l->qty : q - (int32_t)l->qty + 91;
        le_put(v, S_QUANTITY, (uint32_t)q, 4);
        le_put(v, S_YTD, le_get(v, S_YTD, 4) + l->qty, 4);
        le_put(v, S_ORDER_CNT, le_get(v, S_ORDER_CNT, 4) + 1, 4);
        if (l->sw != w) le_put(v, S_REMOTE_CNT, le_get(v, S_REMOTE_CNT, 4) + 1, 4);
        if (memmem(item + I_DATA, (size_t)il - I_DATA, "ORIGINAL", 8) &&
            memmem(v + S_DATA, (size_t)sl - S_DATA, "ORIGINAL", 8))
            brand++;
        uint8_t line[OL_LEN];
        le_put(line, OL_I_ID, l->i, 4);
        le_put(line, OL_SUPPLY_W_ID, l->sw, 2);
        le_put(line, OL_DELIVERY_D, 0, 8);
        line[OL_QUANTITY] = (uint8_t)l->qty;
        le_put(line, OL_AMOUNT, (uint64_t)(l->qty * price), 8);
        memcpy(line + OL_DIST_INFO, v + S_DIST + 24 * (d - 1), 24);
        sum += l->qty * price;
        if ((rc = rdkv_txn_put(t, k, key_stock(tg, k, l->sw, l->i), v, (size_t)sl))) return rc;
        if ((rc = rdkv_txn_put(t, k, key_order_line(tg, k, w, d, o, i + 1), line, OL_LEN)))
            return rc;
    }
    /* the order's total, as the terminal would show it */
    wk->sink +=
        sum * (10000 - discount) / 10000 * (10000 + w_tax + d_tax) / 10000 + brand + bad_credit;
    return 0;
}

/* Spec 2.5.2.2. */
static int payment(struct worker *wk, rdkv_txn *t, const struct inputs *in)
{
    struct tags *tg = &wk->tg;
    uint8_t k[TPCC_KEY_MAX], wv[W_LEN], dv[D_LEN], cv[C_MAX];
    unsigned w = in->w, d = in->d;
    int n = tpcc_rd(t, k, tpcc_k_warehouse(tg, k, w), true, wv, W_LEN, W_LEN);
    if (n < 0) return tpcc_must(n);
    le_put(wv, W_YTD, le_get(wv, W_YTD, 8) + (uint64_t)in->amount, 8);
    int rc = rdkv_txn_put(t, k, tpcc_k_warehouse(tg, k, w), wv, W_LEN);
    if (rc) return rc;
    if ((n = tpcc_rd(t, k, tpcc_k_district(tg, k, w, d), true, dv, D_LEN, D_LEN)) < 0) return tpcc_must(n);
    le_put(dv, D_YTD, le_get(dv, D_YTD, 8) + (uint64_t)in->amount, 8);
    if ((rc = rdkv_txn_put(t, k, tpcc_k_district(tg, k, w, d), dv, D_LEN))) return rc;

    uint32_t c = in->c;
    if (in->by_name && (rc = by_name(wk, t, in->cw, in->cd, in->name, &c))) return rc;
    int cl = tpcc_rd(t, k, key_customer(tg, k, in->cw, in->cd, c), true, cv, C_DATA, C_MAX);
    if (cl < 0) return tpcc_must(cl);
    le_put(cv, C_BALANCE, le_get(cv, C_BALANCE, 8) - (uint64_t)in->amount, 8);
    le_put(cv, C_YTD_PAYMENT, le_get(cv, C_YTD_PAYMENT, 8) + (uint64_t)in->amount, 8);
    le_put(cv, C_PAYMENT_CNT, le_get(cv, C_PAYMENT_CNT, 4) + 1, 4);
    if (!memcmp(cv + C_CREDIT, "BC", 2)) {
        /* the payment goes in front of C_DATA, which keeps at most 500 characters */
        char pre[80];
        int pl = snprintf(pre, sizeof pre, "%u %u %u %u %u %" PRId64 ".%02" PRId64 " ", c, in->cd,
                          in->cw, d, w, in->amount / 100, in->amount % 100);
        size_t old = (size_t)cl - C_DATA, keep = old;
        if ((size_t)pl + keep > C_DATA_MAX) keep = C_DATA_MAX - (size_t)pl;
        memmove(cv + C_DATA + pl, cv + C_DATA, keep);
        memcpy(cv + C_DATA, pre, (size_t)pl);
        cl = C_DATA + pl + (int)keep;
    }
    if ((rc = rdkv_txn_put(t, k, key_customer(tg, k, in->cw, in->cd, c), cv, (size_t)cl)))
        return rc;

    uint8_t h[H_MAX];
    le_put(h, H_C_ID, c, 4);
    le_put(h, H_C_D_ID, in->cd, 1);
    le_put(h, H_C_W_ID, in->cw, 2);
    le_put(h, H_D_ID, d, 1);
    le_put(h, H_W_ID, w, 2);
    le_put(h, H_DATE, (uint64_t)time(NULL), 8);
    le_put(h, H_AMOUNT, (uint64_t)in->amount, 8);
    /* H_DATA: W_NAME, 4 spaces, D_NAME (each up to 10) */
    size_t wl = strnlen((const char *)wv + W_NAME, 10), dl = strnlen((const char *)dv + D_NAME, 10);
    memcpy(h + H_DATA, wv + W_NAME, wl);
    memcpy(h + H_DATA + wl, "    ", 4);
    memcpy(h + H_DATA + wl + 4, dv + D_NAME, dl);
    return rdkv_txn_put(t, k, key_history(tg, k, w, d, wk->origin, ++wk->hseq), h,
                        H_DATA + wl + 4 + dl);
}

/* Spec 2.6.2.2. */
static int order_status(struct worker *wk, rdkv_txn *t, const struct inputs *in)
{
    struct tags *tg = &wk->tg;
    uint8_t k[TPCC_KEY_MAX], e[TPCC_KEY_MAX], v[C_MAX];
    unsigned w = in->w, d = in->d;
    uint32_t c = in->c;
    int rc;
    if (in->by_name && (rc = by_name(wk, t, w, d, in->name, &c))) return rc;
    /* the customer's latest order: the last of its CUST_ORDER rows */
    size_t bl = key_cust_order(NULL, k, w, d, c, 0) - 3; /* (w, d, c) */
    memcpy(e, k, bl);
    size_t el = tpcc_key_succ(e, bl);
    rdkv_iter *it;
    if ((rc = rdkv_txn_scan(t, k, bl, e, el, 0, &it))) return rc;
    uint32_t o = 0;
    const void *rk, *rv;
    size_t rkl, rvl;
    while ((rc = rdkv_iter_next(it, &rk, &rkl, &rv, &rvl)) == 1) {
        if (rkl < bl + 3) {
            rc = RDKV_EPROTO;
            break;
        }
        o = (uint32_t)be_get((const uint8_t *)rk + bl, 3);
    }
    rdkv_iter_close(it);
    if (rc < 0) return rc;
    if (!o) return RDKV_EPROTO; /* every customer has an order from the load on */
    int n = tpcc_rd(t, k, key_order(tg, k, w, d, o), false, v, O_LEN, O_LEN);
    if (n < 0) return tpcc_must(n);
    unsigned ol_cnt = v[O_OL_CNT];
    int64_t sum = v[O_CARRIER_ID];
    for (unsigned ol = 1; ol <= ol_cnt; ol++) {
        if ((n = tpcc_rd(t, k, key_order_line(tg, k, w, d, o, ol), false, v, OL_LEN, OL_LEN)) < 0)
            return tpcc_must(n);
        sum += (int64_t)le_get(v, OL_AMOUNT, 8) + (int64_t)le_get(v, OL_DELIVERY_D, 8);
    }
    if ((n = tpcc_rd(t, k, key_customer(tg, k, w, d, c), false, v, C_DATA, C_MAX)) < 0) return tpcc_must(n);
    wk->sink += sum + (int64_t)le_get(v, C_BALANCE, 8);
    return 0;
}

/* Spec 2.7.4.2: all ten districts in one transaction. */
static int delivery(struct worker *wk, rdkv_txn *t, const struct inputs *in)
{
    struct tags *tg = &wk->tg;
    uint8_t k[TPCC_KEY_MAX], e[TPCC_KEY_MAX], v[C_MAX];
    unsigned w = in->w;
    int n = tpcc_rd(t, k, key_delivery(tg, k, w), true, v, 8, 8);
    if (n < 0) return tpcc_must(n);
    le_put(v, 0, le_get(v, 0, 8) + 1, 8);
    int rc = rdkv_txn_put(t, k, key_delivery(tg, k, w), v, 8);
    if (rc) return rc;
    int64_t now = (int64_t)time(NULL);
    for (unsigned d = 1; d <= TPCC_DISTRICTS; d++) {
        /* the oldest NEW-ORDER row of the district */
        size_t bl = key_new_order(NULL, k, w, d, 0) - 3;
        memcpy(e, k, bl);
        size_t el = tpcc_key_succ(e, bl);
        rdkv_iter *it;
        if ((rc = rdkv_txn_scan(t, k, bl, e, el, 1, &it))) return rc;
        const void *rk, *rv;
        size_t rkl, rvl;
        uint32_t o = 0;
        rc = rdkv_iter_next(it, &rk, &rkl, &rv, &rvl);
        if (rc == 1 && rkl >= bl + 3)
            o = (uint32_t)be_get((const uint8_t *)rk + bl, 3);
        else if (rc == 1)
            rc = RDKV_EPROTO;
        rdkv_iter_close(it);
        if (rc < 0) return rc;
        if (!o) continue; /* none outstanding: the district is skipped */
        if ((rc = rdkv_txn_delete(t, k, key_new_order(tg, k, w, d, o)))) return tpcc_must(rc);
        if ((n = tpcc_rd(t, k, key_order(tg, k, w, d, o), true, v, O_LEN, O_LEN)) < 0) return tpcc_must(n);
        uint32_t c = (uint32_t)le_get(v, O_C_ID, 4);
        unsigned ol_cnt = v[O_OL_CNT];
        v[O_CARRIER_ID] = (uint8_t)in->carrier;
        if ((rc = rdkv_txn_put(t, k, key_order(tg, k, w, d, o), v, O_LEN))) return rc;
        int64_t sum = 0;
        for (unsigned ol = 1; ol <= ol_cnt; ol++) {
            size_t kl = key_order_line(tg, k, w, d, o, ol);
            if ((n = tpcc_rd(t, k, kl, true, v, OL_LEN, OL_LEN)) < 0) return tpcc_must(n);
            sum += (int64_t)le_get(v, OL_AMOUNT, 8);
            le_put(v, OL_DELIVERY_D, (uint64_t)now, 8);
            if ((rc = rdkv_txn_put(t, k, kl, v, OL_LEN))) return rc;
        }
        size_t kl = key_customer(tg, k, w, d, c);
        int cl = tpcc_rd(t, k, kl, true, v, C_DATA, C_MAX);
        if (cl < 0) return tpcc_must(cl);
        le_put(v, C_BALANCE, le_get(v, C_BALANCE, 8) + (uint64_t)sum, 8);
        le_put(v, C_DELIVERY_CNT, le_get(v, C_DELIVERY_CNT, 4) + 1, 4);
        if ((rc = rdkv_txn_put(t, k, kl, v, (size_t)cl))) return rc;
    }
    return 0;
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Spec 2.8.2.2. */
static int stock_level(struct worker *wk, rdkv_txn *t, const struct inputs *in)
{
    struct tags *tg = &wk->tg;
    uint8_t k[TPCC_KEY_MAX], e[TPCC_KEY_MAX], v[S_MAX];
    unsigned w = in->w, d = in->d;
    int n = tpcc_rd(t, k, tpcc_k_district(tg, k, w, d), false, v, D_LEN, D_LEN);
    if (n < 0) return tpcc_must(n);
    uint32_t next = (uint32_t)le_get(v, D_NEXT_O_ID, 4);
    uint32_t lo = next > 20 ? next - 20 : 1;
    /* the order lines of the last 20 orders */
    size_t bl = key_order_line(NULL, k, w, d, lo, 0);
    size_t el = key_order_line(NULL, e, w, d, next, 0);
    rdkv_iter *it;
    int rc = rdkv_txn_scan(t, k, bl, e, el, 0, &it);
    if (rc) return rc;
    wk->nids = 0;
    const void *rk, *rv;
    size_t rkl, rvl;
    while ((rc = rdkv_iter_next(it, &rk, &rkl, &rv, &rvl)) == 1) {
        if (rvl < OL_LEN) {
            rc = RDKV_EPROTO;
            break;
        }
        if ((rc = ids_push(wk, (uint32_t)le_get(rv, OL_I_ID, 4)))) break;
    }
    rdkv_iter_close(it);
    if (rc < 0) return rc;
    /* distinct items, read in item order */
    qsort(wk->ids, wk->nids, sizeof *wk->ids, u32_cmp);
    unsigned low = 0;
    for (size_t i = 0; i < wk->nids; i++) {
        if (i && wk->ids[i] == wk->ids[i - 1]) continue;
        if ((n = tpcc_rd(t, k, key_stock(tg, k, w, wk->ids[i]), false, v, S_DATA, S_MAX)) < 0)
            return tpcc_must(n);
        if ((int32_t)le_get(v, S_QUANTITY, 4) < (int32_t)in->threshold) low++;
    }
    wk->sink += low;
    return 0;
}

static int tpcc_worker_new(const void *cfgb, size_t len, const struct wl_place *pl, uint64_t seed,
                           void **out)
{
    struct cfg c;
    int rc = tpcc_cfg_decode(cfgb, len, &c, NULL, 0);
    if (rc) return rc;
    if (!pl || pl->nodes != c.nodes || (pl->node >= 0 && (unsigned)pl->node >= c.nodes))
        return RDKV_EINVAL;
    struct worker *wk = calloc(1, sizeof *wk);
    if (!wk) return RDKV_ENOMEM;
    wk->c = c;
    if ((rc = tpcc_tags_init(&wk->tg, c.nodes, c.W))) {
        tpcc_tags_free(&wk->tg);
        free(wk);
        return rc;
    }
    wk->rng = rng_seed(seed);
    unsigned terminal; /* this worker's index among those sharing its home warehouse */
    if (pl->node >= 0) {
        /* the (worker mod k)-th of the node's own warehouses */
        wk->home = (unsigned)pl->node + 1 + (pl->worker % c.wpn) * c.nodes;
        terminal = pl->worker / c.wpn;
    } else {
        uint64_t g = (uint64_t)pl->proc * pl->nworkers + pl->worker;
        wk->home = (unsigned)(g % c.W) + 1;
        terminal = (unsigned)(g / c.W);
    }
    wk->node = (wk->home - 1) % c.nodes;
    wk->sl_district = terminal % TPCC_DISTRICTS + 1;
    wk->origin = mix64(seed ^ 0x4849535400000000ull) | 1; /* never 0, the load's */
    *out = wk;
    return 0;
}

static void tpcc_worker_free(void *p)
{
    struct worker *wk = p;
    if (!wk) return;
    tpcc_tags_free(&wk->tg);
    free(wk->ids);
    free(wk);
}

/* Statuses after which the session cannot go on (the worker stops). */
static bool session_broken(int rc)
{
    return rc == RDKV_EUNAVAILABLE || rc == RDKV_ESESSION || rc == RDKV_ESHUTDOWN ||
           rc == RDKV_EFLUSHED;
}

static int tpcc_step(void *p, rdkv_session *s, struct wl_step *st)
{
    struct worker *wk = p;
    unsigned pick = rnd(&wk->rng, 0, 99), op = 0;
    for (unsigned acc = wk->c.mix[0]; pick >= acc && op + 1 < TPCC_NOPS; acc += wk->c.mix[++op])
        ;
    struct inputs in;
    gen(wk, op, &in);
    st->op = op; /* the runner zeroed the rest and set give_up_at */
    rdkv_txn *t;
    int rc = rdkv_txn_begin(s, &t);
    if (rc) {
        st->status = rc;
        return session_broken(rc) ? rc : 0;
    }
    unsigned busy = 0;
    for (;;) {
        switch (op) {
        case TPCC_NEW_ORDER:
            rc = new_order(wk, t, &in);
            break;
        case TPCC_PAYMENT:
            rc = payment(wk, t, &in);
            break;
        case TPCC_ORDER_STATUS:
            rc = order_status(wk, t, &in);
            break;
        case TPCC_DELIVERY:
            rc = delivery(wk, t, &in);
            break;
        default:
            rc = stock_level(wk, t, &in);
            break;
        }
        if (rc == ROLLBACK) {
            rdkv_txn_abort(t);
            st->rolled_back = true;
            rc = 0;
            break;
        }
        if (!rc) rc = rdkv_txn_commit(t);
        if (!rc) break;
        if (st->give_up_at && clock_now_ns() >= st->give_up_at) break; /* the run is over */
        /* an RDKV_EBUSY that keeps coming back is not a conflict but a limit this transaction
         * meets every time (e.g. more rows than a queue lock can hold at once): an error,
         * rather than backing off until the run ends */
        if (rc == RDKV_EBUSY && ++busy > BUSY_RETRIES) break;
        int again = rdkv_txn_on_error(t, rc);
        if (again) {
            rc = again;
            break;
        }
        st->aborts++;
    }
    rdkv_txn_free(t);
    st->status = rc;
    return session_broken(rc) ? rc : 0;
}

const struct wl_class wl_tpcc = {
    .name = "tpcc",
    .nops = TPCC_NOPS,
    .op_names = {"NEW_ORDER", "PAYMENT", "ORDER_STATUS", "DELIVERY", "STOCK_LEVEL"},
    .cfg_check = tpcc_cfg_check,
    .load = tpcc_load,
    .worker_new = tpcc_worker_new,
    .step = tpcc_step,
    .worker_free = tpcc_worker_free,
    .check = tpcc_check,
    .check_parts = tpcc_check_parts,
    .check_part_name = "warehouse",
    .check_report = tpcc_check_report,
};
