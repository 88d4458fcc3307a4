/* The transfer workload on rdkv (transfer.h). A balance is an 8-byte little-endian signed
 * integer (native order: little-endian on x86). A transfer reads both accounts for update in key
 * order (so two transfers on the same pair never wait on each other in a cycle), moves min(amount,
 * source balance) and commits; a conflict retries the whole transaction and counts as an abort. */
#include "tools/kvbench/transfer.h"
#include "tools/kvbench/workload.h"

#include "common/clock.h"
#include "common/pack.h"
#include "common/rng.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CFG_VERSION 1
#define CHECK_BATCH 200 /* accounts read per transaction by the check */

struct cfg {
    uint64_t accounts;
    uint32_t nodes;
};

int xfer_cfg_pack(uint64_t accounts, uint32_t nodes, uint8_t out[XFER_CFG_LEN])
{
    struct pack_w w;
    pack_w_init(&w);
    pack_u32(&w, CFG_VERSION);
    pack_u32(&w, nodes);
    pack_u64(&w, accounts);
    int rc = w.err || w.len > XFER_CFG_LEN ? RDKV_ENOMEM : 0;
    if (!rc) {
        memset(out, 0, XFER_CFG_LEN);
        memcpy(out, w.p, w.len);
    }
    pack_w_free(&w);
    return rc;
}

static int cfg_unpack(struct cfg *c, const void *b, size_t len, char *err, size_t errcap)
{
    struct pack_r r;
    pack_r_init(&r, b, len);
    uint32_t ver = unpack_u32(&r);
    c->nodes = unpack_u32(&r);
    c->accounts = unpack_u64(&r);
    if (len != XFER_CFG_LEN || r.err || ver != CFG_VERSION || !c->nodes || c->nodes > 1024 ||
        c->accounts < 2 || c->accounts > 10000000000ull) {
        snprintf(err, errcap, "transfer config: malformed or unsupported");
        return RDKV_EINVAL;
    }
    return 0;
}

static int cfg_check(const void *cfg, size_t len, char *err, size_t errcap)
{
    struct cfg c;
    return cfg_unpack(&c, cfg, len, err, errcap);
}

int xfer_key(uint64_t i, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "acct%010" PRIu64, i);
    return n > 0 && (size_t)n < cap ? n : RDKV_EINVAL;
}

void xfer_draw(uint64_t *rng, uint64_t accounts, uint64_t *from, uint64_t *to, int64_t *amount)
{
    *from = rng_below(rng, accounts);
    *to = rng_below(rng, accounts - 1);
    if (*to >= *from) (*to)++;
    *amount = 1 + (int64_t)rng_below(rng, XFER_MAX_AMOUNT);
}

int xfer_report(uint64_t accounts, uint64_t found, int64_t total, char *out, size_t cap)
{
    int64_t want = (int64_t)accounts * XFER_INITIAL;
    bool ok = found == accounts && total == want;
    snprintf(out, cap,
             "transfer check: %" PRIu64 " of %" PRIu64 " accounts, total %" PRId64
             ", expected %" PRId64 ": %s\n",
             found, accounts, total, want, ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}

static void put_balance(uint8_t b[8], int64_t v)
{
    pack_put_u64le(b, (uint64_t)v);
}

/* A balance's bytes: 0, or RDKV_EPROTO for a value that is not an account of this workload. */
static int balance_of(const void *p, size_t len, int64_t *v)
{
    if (len != 8) return RDKV_EPROTO;
    *v = (int64_t)pack_get_u64le(p);
    return 0;
}

static int get_balance(rdkv_txn *t, const char *key, size_t kl, int64_t *v)
{
    const void *p;
    size_t len;
    int rc = rdkv_txn_get(t, key, kl, &p, &len);
    return rc ? rc : balance_of(p, len, v);
}

/* ------------------------------------------------------------------------------------------ */

static int load_key(void *arg, uint64_t i, char *buf, size_t cap)
{
    (void)arg;
    return xfer_key(i, buf, cap);
}

static void load_value(void *arg, uint64_t i, const void **v, size_t *vlen)
{
    static const int64_t initial = XFER_INITIAL; /* the bytes put_balance writes */
    (void)arg, (void)i;
    *v = &initial;
    *vlen = 8;
}

static int load(rdkv_session *s, const void *cfg, size_t len, unsigned part, unsigned nparts,
                char *err, size_t errcap)
{
    struct cfg c;
    int rc = cfg_unpack(&c, cfg, len, err, errcap);
    if (rc) return rc;
    rc = wl_load_rows(s, c.accounts, part, nparts, c.nodes, load_key, load_value, NULL);
    if (rc) snprintf(err, errcap, "loading part %u: %s", part, rdkv_strerror(rc));
    return rc;
}

struct worker {
    struct cfg c;
    uint64_t rng;
};

static int worker_new(const void *cfg, size_t len, const struct wl_place *pl, uint64_t seed,
                      void **out)
{
    (void)pl;
    struct worker *w = calloc(1, sizeof *w);
    char err[120];
    if (!w) return RDKV_ENOMEM;
    int rc = cfg_unpack(&w->c, cfg, len, err, sizeof err);
    if (rc) {
        free(w);
        return rc;
    }
    w->rng = seed ? seed : 88172645463325252ull;
    for (int i = 0; i < 4; i++) rng_next(&w->rng);
    *out = w;
    return 0;
}

static void worker_free(void *w)
{
    free(w);
}

/* One attempt: both accounts read for update in key order in one call (on a remote session one
 * request, its BEGIN included), then both writes, which ride on the commit's request (they
 * write rows the transaction holds exclusively): two requests in all. */
static int transfer_once(rdkv_txn *t, uint64_t from, uint64_t to, int64_t amount)
{
    char k[2][XFER_KEY_MAX];
    size_t kl[2];
    uint64_t lo = from < to ? from : to, hi = from < to ? to : from;
    kl[0] = (size_t)xfer_key(lo, k[0], sizeof k[0]);
    kl[1] = (size_t)xfer_key(hi, k[1], sizeof k[1]);
    const void *keys[2] = {k[0], k[1]}, *vals[2];
    size_t vlens[2];
    int found[2];
    int64_t b[2];
    int rc = rdkv_txn_get_many(t, 2, keys, kl, true, vals, vlens, found);
    for (int i = 0; i < 2 && !rc; i++)
        rc = found[i] ? found[i] : balance_of(vals[i], vlens[i], &b[i]);
    if (rc) return rc;
    int src = from == lo ? 0 : 1;
    if (amount > b[src]) amount = b[src];
    b[src] -= amount;
    b[1 - src] += amount;
    uint8_t v[2][8];
    for (int i = 0; i < 2; i++) {
        put_balance(v[i], b[i]);
        if ((rc = rdkv_txn_put(t, k[i], kl[i], v[i], 8))) return rc;
    }
    return rdkv_txn_commit(t);
}

static int step(void *p, rdkv_session *s, struct wl_step *st)
{
    struct worker *w = p;
    uint64_t from, to;
    int64_t amount;
    xfer_draw(&w->rng, w->c.accounts, &from, &to, &amount);
    st->op = 0;
    rdkv_txn *t;
    int rc = rdkv_txn_begin(s, &t);
    if (rc) return rc;
    while ((rc = transfer_once(t, from, to, amount)) && rdkv_status_retryable(rc) &&
           clock_now_ns() < st->give_up_at) {
        st->aborts++;
        if ((rc = rdkv_txn_on_error(t, rc))) break;
    }
    rdkv_txn_free(t);
    st->status = rc;
    return 0;
}

/* The check: the accounts found and their total (wl_check's count[0] and sum[0]), in one part
 * per node: part p is the accounts rdkv_key_partition places on node p, read CHECK_BATCH to a
 * read-only transaction (the check runs after the run, on quiet data). */
static unsigned check_parts(const void *cfg, size_t len)
{
    struct cfg c;
    char err[120];
    return cfg_unpack(&c, cfg, len, err, sizeof err) ? 1 : c.nodes;
}

static int check(rdkv_session *s, const void *cfg, size_t len, unsigned part,
                 struct wl_check *acc)
{
    struct cfg c;
    char err[120];
    int rc = cfg_unpack(&c, cfg, len, err, sizeof err);
    if (rc) return rc;
    uint64_t i = 0;
    while (i < c.accounts && !rc) {
        rdkv_txn *t;
        if ((rc = rdkv_txn_begin(s, &t))) break;
        int64_t sum = 0;
        uint64_t n = 0;
        for (unsigned batch = 0; i < c.accounts && batch < CHECK_BATCH && !rc; i++) {
            char key[XFER_KEY_MAX];
            int kl = xfer_key(i, key, sizeof key);
            if (rdkv_key_partition(key, (size_t)kl, c.nodes) != part) continue;
            batch++;
            int64_t b;
            rc = get_balance(t, key, (size_t)kl, &b);
            if (rc == RDKV_ENOTFOUND)
                rc = 0;
            else if (!rc)
                sum += b, n++;
        }
        if (!rc) rc = rdkv_txn_commit(t);
        rdkv_txn_free(t);
        acc->sum[0] += sum;
        acc->count[0] += n;
    }
    return rc;
}

static int check_report(const void *cfg, size_t len, const struct wl_check *all, char *out,
                        size_t outcap)
{
    struct cfg c;
    char err[120];
    if (cfg_unpack(&c, cfg, len, err, sizeof err)) {
        snprintf(out, outcap, "%s\n", err);
        return 1;
    }
    return xfer_report(c.accounts, all->count[0], all->sum[0], out, outcap);
}

static int probe_key(void *arg, uint64_t i, char *buf, size_t cap)
{
    (void)arg;
    return xfer_key(i, buf, cap);
}

static int probe(rdkv_session *s, const void *cfg, size_t len, unsigned want, unsigned *found)
{
    struct cfg c;
    char err[120];
    int rc = cfg_unpack(&c, cfg, len, err, sizeof err);
    return rc ? rc : wl_probe_rows(s, c.accounts, want, found, probe_key, NULL);
}

const struct wl_class wl_transfer = {
    .name = "transfer",
    .nops = 1,
    .op_names = {"TRANSFER"},
    .cfg_check = cfg_check,
    .load = load,
    .probe = probe,
    .worker_new = worker_new,
    .step = step,
    .worker_free = worker_free,
    .check = check,
    .check_parts = check_parts,
    .check_part_name = "partition",
    .check_report = check_report,
};
