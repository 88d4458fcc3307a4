/* TPC-C's check (tpcc_int.h): consistency conditions 1-4 of clause 3.3.2, run where each
 * warehouse lives. */
#include "tools/kvbench/tpcc_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * The check: consistency conditions 1-4 (spec 3.3.2.1 - 3.3.2.4), one part per warehouse (part
 * p is warehouse p + 1, which lives on node p mod nodes: kvbench checks it there, reading its
 * rows locally). One transaction reads WAREHOUSE and its DISTRICT rows (condition 1); then
 * each district's DISTRICT row and, page by page, its ORDER, NEW-ORDER and ORDER-LINE rows
 * (conditions 2-4). wl_check's checks are the conditions; its count[] the rows seen of ORDER,
 * NEW-ORDER and ORDER-LINE. */
struct out {
    char *p;
    size_t cap, len;
};

static void outf(struct out *o, const char *fmt, ...)
{
    if (!o->cap || o->len + 1 >= o->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    if (n > 0) o->len += (size_t)n < o->cap - o->len ? (size_t)n : o->cap - o->len - 1;
}

static const char *money(int64_t cents, char buf[32])
{
    uint64_t a = cents < 0 ? (uint64_t)0 - (uint64_t)cents : (uint64_t)cents;
    snprintf(buf, 32, "%s%" PRIu64 ".%02" PRIu64, cents < 0 ? "-" : "", a / 100, a % 100);
    return buf;
}

struct dstate {
    uint32_t next;
    uint64_t orders, no_rows, lines, ol_cnt_sum;
    uint32_t max_o, min_no, max_no;
};

static int on_order(struct dstate *ds, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
                    size_t pfx)
{
    if (kl < pfx + 3 || vl < O_LEN) return RDKV_EPROTO;
    uint32_t o = (uint32_t)be_get(k + pfx, 3);
    if (o > ds->max_o) ds->max_o = o;
    ds->orders++;
    ds->ol_cnt_sum += v[O_OL_CNT];
    return 0;
}

static int on_new_order(struct dstate *ds, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
                        size_t pfx)
{
    (void)v;
    (void)vl;
    if (kl < pfx + 3) return RDKV_EPROTO;
    uint32_t o = (uint32_t)be_get(k + pfx, 3);
    if (!ds->no_rows || o < ds->min_no) ds->min_no = o;
    if (o > ds->max_no) ds->max_no = o;
    ds->no_rows++;
    return 0;
}

static int on_line(struct dstate *ds, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
                   size_t pfx)
{
    (void)k;
    (void)kl;
    (void)v;
    (void)pfx;
    if (vl < OL_LEN) return RDKV_EPROTO;
    ds->lines++;
    return 0;
}

struct dcheck {
    struct tags *tg;
    unsigned w, d;
    unsigned page; /* rows per page that last worked */
    struct dstate ds;
};

/* The check runs after the run, on a quiescent database, so a district's rows may be read in
 * pages, one transaction each: a transaction that locked a whole district (33,000 rows at spec
 * size) would outlive drtm's lease and run out of alock's descriptors. A page starts at
 * CHECK_PAGE_MAX rows and halves, down to CHECK_PAGE_MIN, whenever its transaction has to be
 * run again (a lease that ran out, descriptors used up: both retryable); later pages keep the
 * size that worked. Small pages made the check of a 10 s run take a minute: each page is a
 * transaction with range locks on every partition. */
#define CHECK_PAGE_MAX 1024u
#define CHECK_PAGE_MIN 32u

struct page {
    struct dstate part;                 /* this page's rows (recomputed on a retry) */
    unsigned limit;                     /* rows per page */
    unsigned tries;                     /* runs of this page's transaction */
    const uint8_t *from, *end;
    size_t fl, el, pfx;
    int (*fn)(struct dstate *, const uint8_t *, size_t, const uint8_t *, size_t, size_t);
    uint8_t last[TPCC_KEY_MAX + 1];
    size_t ll;
    unsigned rows;
};

static int page_txn(rdkv_txn *t, void *arg)
{
    struct page *p = arg;
    memset(&p->part, 0, sizeof p->part);
    p->rows = 0;
    if (p->tries++ && p->limit > CHECK_PAGE_MIN) p->limit /= 2; /* run again: a smaller page */
    rdkv_iter *it;
    int rc = rdkv_txn_scan(t, p->from, p->fl, p->end, p->el, p->limit, &it);
    if (rc) return rc;
    const void *k, *v;
    size_t kl, vl;
    while ((rc = rdkv_iter_next(it, &k, &kl, &v, &vl)) == 1) {
        if ((rc = p->fn(&p->part, k, kl, v, vl, p->pfx))) break;
        if (kl > TPCC_KEY_MAX) {
            rc = RDKV_EPROTO;
            break;
        }
        memcpy(p->last, k, kl);
        p->ll = kl;
        p->rows++;
    }
    rdkv_iter_close(it);
    return rc < 0 ? rc : 0;
}

static void dstate_add(struct dstate *d, const struct dstate *s)
{
    if (s->no_rows && (!d->no_rows || s->min_no < d->min_no)) d->min_no = s->min_no;
    if (s->max_no > d->max_no) d->max_no = s->max_no;
    if (s->max_o > d->max_o) d->max_o = s->max_o;
    d->orders += s->orders;
    d->no_rows += s->no_rows;
    d->lines += s->lines;
    d->ol_cnt_sum += s->ol_cnt_sum;
}

static int read_next_o_id(rdkv_txn *t, void *arg)
{
    struct dcheck *a = arg;
    uint8_t k[TPCC_KEY_MAX], v[D_LEN];
    int n = tpcc_rd(t, k, tpcc_k_district(a->tg, k, a->w, a->d), false, v, D_LEN, D_LEN);
    if (n < 0) return tpcc_must(n);
    a->ds.next = (uint32_t)le_get(v, D_NEXT_O_ID, 4);
    return 0;
}

/* A district's figures for conditions 2-4: D_NEXT_O_ID, then its ORDER, NEW-ORDER and
 * ORDER-LINE rows page by page. */
static int check_district_paged(rdkv_session *s, struct dcheck *a)
{
    memset(&a->ds, 0, sizeof a->ds);
    int rc = rdkv_run_txn(s, read_next_o_id, a);
    static const enum table tabs[3] = {T_ORDER, T_NEW_ORDER, T_ORDER_LINE};
    int (*const fns[3])(struct dstate *, const uint8_t *, size_t, const uint8_t *, size_t,
                        size_t) = {on_order, on_new_order, on_line};
    for (int i = 0; i < 3 && !rc; i++) {
        uint8_t b[TPCC_KEY_MAX + 1], e[TPCC_KEY_MAX], k[TPCC_KEY_MAX];
        size_t bl = (size_t)(tpcc_wd(k, tabs[i], a->w, a->d) - k);
        memcpy(b, k, bl);
        memcpy(e, k, bl);
        size_t el = tpcc_key_succ(e, bl);
        struct page p = {.from = b, .fl = bl, .end = e, .el = el, .pfx = bl, .fn = fns[i],
                         .limit = a->page};
        for (;;) {
            p.tries = 0;
            if ((rc = rdkv_run_txn(s, page_txn, &p))) break;
            a->page = p.limit;
            dstate_add(&a->ds, &p.part);
            if (p.rows < p.limit) break;
            /* the next page starts just after the last key read */
            memcpy(b, p.last, p.ll);
            b[p.ll] = 0;
            p.fl = p.ll + 1;
        }
    }
    return rc;
}

struct wcheck {
    struct tags *tg;
    unsigned w;
    int64_t w_ytd, d_ytd;
};

static int check_warehouse(rdkv_txn *t, void *arg)
{
    struct wcheck *a = arg;
    uint8_t k[TPCC_KEY_MAX], v[D_LEN];
    int n = tpcc_rd(t, k, tpcc_k_warehouse(a->tg, k, a->w), false, v, W_LEN, W_LEN);
    if (n < 0) return tpcc_must(n);
    a->w_ytd = (int64_t)le_get(v, W_YTD, 8);
    a->d_ytd = 0;
    for (unsigned d = 1; d <= TPCC_DISTRICTS; d++) {
        n = tpcc_rd(t, k, tpcc_k_district(a->tg, k, a->w, d), false, v, D_LEN, D_LEN);
        if (n < 0) return tpcc_must(n);
        a->d_ytd += (int64_t)le_get(v, D_YTD, 8);
    }
    return 0;
}

enum { COND_1, COND_2, COND_3, COND_4, TPCC_CONDS };
static const char *const cond_what[TPCC_CONDS] = {
    "1 (W_YTD = sum(D_YTD))",
    "2 (D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID))",
    "3 (max(NO_O_ID) - min(NO_O_ID) + 1 = NEW-ORDER rows)",
    "4 (sum(O_OL_CNT) = ORDER-LINE rows)",
};
enum { ROWS_ORDER, ROWS_NEW_ORDER, ROWS_ORDER_LINE };

unsigned tpcc_check_parts(const void *cfgb, size_t len)
{
    struct cfg c;
    char err[160];
    return tpcc_cfg_decode(cfgb, len, &c, err, sizeof err) ? 1 : c.W;
}

/* Warehouse part + 1: condition 1, and 2-4 for each of its districts. */
int tpcc_check(rdkv_session *s, const void *cfgb, size_t len, unsigned part,
                      struct wl_check *acc)
{
    struct cfg c;
    char err[160];
    int rc = tpcc_cfg_decode(cfgb, len, &c, err, sizeof err);
    if (rc) return rc;
    if (part >= c.W) return RDKV_EINVAL;
    struct tags tg;
    if ((rc = tpcc_tags_init(&tg, c.nodes, c.W))) {
        tpcc_tags_free(&tg);
        return rc;
    }
    unsigned w = part + 1;
    struct wcheck wc = {.tg = &tg, .w = w};
    char a[32], b[32];
    if (!(rc = rdkv_run_txn(s, check_warehouse, &wc))) {
        if (wc.w_ytd != wc.d_ytd)
            wl_check_note(acc, COND_1, "warehouse %u: W_YTD=%s, sum(D_YTD)=%s", w,
                          money(wc.w_ytd, a), money(wc.d_ytd, b));
        else
            wl_check_note(acc, COND_1, NULL);
    }
    unsigned page = CHECK_PAGE_MAX;
    for (unsigned d = 1; d <= TPCC_DISTRICTS && !rc; d++) {
        struct dcheck dc = {.tg = &tg, .w = w, .d = d, .page = page};
        if ((rc = check_district_paged(s, &dc))) break;
        page = dc.page;
        const struct dstate *ds = &dc.ds;
        acc->count[ROWS_ORDER] += ds->orders;
        acc->count[ROWS_NEW_ORDER] += ds->no_rows;
        acc->count[ROWS_ORDER_LINE] += ds->lines;
        if (ds->next - 1 != ds->max_o)
            wl_check_note(acc, COND_2,
                          "district %u/%u: D_NEXT_O_ID-1=%" PRIu32 ", max(O_ID)=%" PRIu32, w, d,
                          ds->next - 1, ds->max_o);
        else if (ds->no_rows && ds->max_no != ds->max_o)
            wl_check_note(acc, COND_2,
                          "district %u/%u: max(O_ID)=%" PRIu32 ", max(NO_O_ID)=%" PRIu32, w, d,
                          ds->max_o, ds->max_no);
        else
            wl_check_note(acc, COND_2, NULL);
        if (ds->no_rows && (uint64_t)ds->max_no - ds->min_no + 1 != ds->no_rows)
            wl_check_note(acc, COND_3,
                          "district %u/%u: max(NO_O_ID)-min(NO_O_ID)+1=%" PRIu64
                          ", NEW-ORDER rows=%" PRIu64,
                          w, d, (uint64_t)ds->max_no - ds->min_no + 1, ds->no_rows);
        else
            wl_check_note(acc, COND_3, NULL);
        if (ds->ol_cnt_sum != ds->lines)
            wl_check_note(acc, COND_4,
                          "district %u/%u: sum(O_OL_CNT)=%" PRIu64 ", ORDER-LINE rows=%" PRIu64, w,
                          d, ds->ol_cnt_sum, ds->lines);
        else
            wl_check_note(acc, COND_4, NULL);
    }
    tpcc_tags_free(&tg);
    return rc;
}

int tpcc_check_report(const void *cfgb, size_t len, const struct wl_check *all, char *outp,
                             size_t outcap)
{
    struct out o = {.p = outp, .cap = outcap};
    if (outcap) outp[0] = 0;
    struct cfg c;
    char err[160];
    if (tpcc_cfg_decode(cfgb, len, &c, err, sizeof err)) {
        outf(&o, "%s\n", err);
        return TPCC_CONDS;
    }
    outf(&o, "tpcc check: %u warehouses, %u districts\n", c.W, c.W * TPCC_DISTRICTS);
    for (int i = 0; i < TPCC_CONDS; i++)
        if (all->failed[i]) outf(&o, "  FAILED %s: %s\n", cond_what[i], all->first[i]);
    outf(&o, "rows: ORDER %" PRIu64 ", NEW-ORDER %" PRIu64 ", ORDER-LINE %" PRIu64 "\n",
         all->count[ROWS_ORDER], all->count[ROWS_NEW_ORDER], all->count[ROWS_ORDER_LINE]);
    int failed = 0;
    for (int i = 0; i < TPCC_CONDS; i++) {
        if (all->failed[i]) failed++;
        outf(&o, "condition %s: %s", cond_what[i], all->failed[i] ? "FAILED" : "holds");
        if (all->failed[i])
            outf(&o, " in %" PRIu64 " of %" PRIu64 "\n", all->failed[i], all->checked[i]);
        else
            outf(&o, " (%" PRIu64 " checked)\n", all->checked[i]);
    }
    /* the last line, in full even when the report above ran out of room (whole lines of the
     * report give way to it) */
    char last[1024];
    struct out lo = {.p = last, .cap = sizeof last};
    outf(&lo, "consistency: %d/4 conditions hold", TPCC_CONDS - failed);
    for (int i = 0, n = 0; i < TPCC_CONDS; i++) {
        if (!all->failed[i]) continue;
        outf(&lo, "%s%d (%s", n++ ? ", " : "; failed: ", i + 1, all->first[i]);
        if (all->failed[i] > 1) outf(&lo, "; %" PRIu64 " more", all->failed[i] - 1);
        outf(&lo, ")");
    }
    outf(&lo, "\n");
    if (outcap) {
        size_t room = outcap - 1, n = lo.len <= room ? lo.len : room;
        if (n < lo.len && n) last[n - 1] = '\n'; /* cut, but still a line */
        if (o.len + n > room) {
            o.len = room - n;
            while (o.len && outp[o.len - 1] != '\n') o.len--;
        }
        memcpy(outp + o.len, last, n);
        outp[o.len + n] = 0;
    }
    return failed;
}

