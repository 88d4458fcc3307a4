/* YCSB's CoreWorkload over rdkv transactions (ycsb.h). A record is one value: fieldcount fields
 * of fieldlength bytes, back to back (YCSB's 10 x 100 B by default); a key is CoreWorkload's
 * "user" + fnvhash64(keynum) (or keynum, insertorder=ordered).
 *
 * Inserts in the run phase. Each process running workers (a node in embedded mode, kvbench in
 * remote mode) hands out its own key numbers, recordcount + proc + nprocs * j, so processes
 * never insert the same key; its workers share the counter and its acknowledgement (YCSB's
 * AcknowledgedCounterGenerator): "latest" and the redraw rule only see keys whose insert has
 * finished. The generators draw a logical index L in [0, recordcount + acked): L < recordcount
 * is that key number, otherwise the process's (L - recordcount)-th insert. So every process sees
 * the loaded records and its own inserts, and reads never look for keys not yet written.
 *
 * Scans. A scan of n records from key k under strict 2PL must lock the key range it reads. Core
 * YCSB names no end key; an open-ended range lock would cover the rest of the table and block
 * every insert behind it. So a scan reads in chunks: the keys sharing k's first digits (chosen so
 * that a chunk holds about n records), then the next such prefix, until it has n records or the
 * table ends, each chunk under its own shared range locks, all in one transaction. */
#include "tools/kvbench/ycsb.h"
#include "tools/kvbench/workload.h"
#include "tools/kvbench/ycsb_gen.h"

#include "common/clock.h"
#include "common/pack.h"
#include "common/parse.h"
#include "common/rng.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CFG_VERSION 1
#define KEY_MAX 32

static const char *const dist_names[YCSB_D_NDIST] = {"uniform", "zipfian", "latest", "hotspot"};
const char *ycsb_dist_name(enum ycsb_dist d) { return d < YCSB_D_NDIST ? dist_names[d] : "?"; }

void ycsb_props_init(struct ycsb_props *p, char w)
{
    memset(p, 0, sizeof *p);
    p->recordcount = 1000;
    p->operationcount = 1000;
    p->fieldcount = 10;
    p->fieldlength = 100;
    p->read = 0.95;
    p->update = 0.05;
    p->dist = YCSB_D_UNIFORM;
    p->minscanlength = 1;
    p->maxscanlength = 1000;
    p->zeropadding = 1;
    p->hotspotdatafraction = 0.2;
    p->hotspotopnfraction = 0.8;
    p->keyspertxn = 1;
    p->workload = (char)tolower((unsigned char)w);
    switch (p->workload) {
    case 'a': p->read = 0.5, p->update = 0.5, p->dist = YCSB_D_ZIPFIAN; break;
    case 'b': p->read = 0.95, p->update = 0.05, p->dist = YCSB_D_ZIPFIAN; break;
    case 'c': p->read = 1, p->update = 0, p->dist = YCSB_D_ZIPFIAN; break;
    case 'd': p->read = 0.95, p->update = 0, p->insert = 0.05, p->dist = YCSB_D_LATEST; break;
    case 'e':
        p->read = 0, p->update = 0, p->scan = 0.95, p->insert = 0.05, p->dist = YCSB_D_ZIPFIAN;
        p->maxscanlength = 100;
        break;
    case 'f': p->read = 0.5, p->update = 0, p->rmw = 0.5, p->dist = YCSB_D_ZIPFIAN; break;
    default: p->workload = 0;
    }
}

static int bad(char *err, size_t cap, const char *name, const char *value, const char *want)
{
    snprintf(err, cap, "property %s=%s: %s", name, value, want);
    return RDKV_EINVAL;
}

int ycsb_prop_set(struct ycsb_props *p, const char *name, const char *value, char *err,
                  size_t errcap)
{
    uint64_t u;
    double d;
    struct {
        const char *name;
        double *v;
    } props[] = {{"readproportion", &p->read},
                 {"updateproportion", &p->update},
                 {"insertproportion", &p->insert},
                 {"scanproportion", &p->scan},
                 {"readmodifywriteproportion", &p->rmw},
                 {"hotspotdatafraction", &p->hotspotdatafraction},
                 {"hotspotopnfraction", &p->hotspotopnfraction}};
    for (unsigned i = 0; i < sizeof props / sizeof *props; i++) {
        if (strcmp(name, props[i].name)) continue;
        if (parse_double(value, &d) || !(d >= 0 && d <= 1))
            return bad(err, errcap, name, value, "must be a number in [0, 1]");
        *props[i].v = d;
        p->workload = 0;
        return 0;
    }
    if (!strcmp(name, "recordcount") || !strcmp(name, "operationcount")) {
        if (parse_uint_range(value, 1, 1000000000000ull, &u))
            return bad(err, errcap, name, value, "must be a count from 1");
        *(name[0] == 'r' ? &p->recordcount : &p->operationcount) = u;
    } else if (!strcmp(name, "fieldcount") || !strcmp(name, "fieldlength")) {
        if (parse_uint_range(value, 1, 100000, &u))
            return bad(err, errcap, name, value, "must be 1..100000");
        *(name[5] == 'c' ? &p->fieldcount : &p->fieldlength) = (uint32_t)u;
    } else if (!strcmp(name, "minscanlength") || !strcmp(name, "maxscanlength")) {
        if (parse_uint_range(value, 1, 100000, &u))
            return bad(err, errcap, name, value, "must be 1..100000");
        *(name[1] == 'i' ? &p->minscanlength : &p->maxscanlength) = (uint32_t)u;
    } else if (!strcmp(name, "keyspertxn")) {
        if (parse_uint_range(value, 1, YCSB_KEYS_PER_TXN_MAX, &u))
            return bad(err, errcap, name, value, "must be 1..16");
        p->keyspertxn = (uint32_t)u;
    } else if (!strcmp(name, "zipfianscrambled")) {
        bool t = !strcasecmp(value, "true"), f = !strcasecmp(value, "false");
        if (!t && !f) return bad(err, errcap, name, value, "must be true or false");
        p->zipf_plain = f;
    } else if (!strcmp(name, "zeropadding")) {
        if (parse_uint_range(value, 1, 20, &u)) return bad(err, errcap, name, value, "must be 1..20");
        p->zeropadding = (uint32_t)u;
    } else if (!strcmp(name, "requestdistribution")) {
        unsigned i = 0;
        while (i < YCSB_D_NDIST && strcasecmp(value, dist_names[i])) i++;
        if (i == YCSB_D_NDIST)
            return bad(err, errcap, name, value,
                       "rdkv supports uniform, zipfian, latest and hotspot");
        p->dist = (enum ycsb_dist)i;
        p->workload = 0;
    } else if (!strcmp(name, "scanlengthdistribution")) {
        if (strcasecmp(value, "uniform") && strcasecmp(value, "zipfian"))
            return bad(err, errcap, name, value, "must be uniform or zipfian");
        p->scan_zipfian = !strcasecmp(value, "zipfian");
    } else if (!strcmp(name, "insertorder")) {
        if (strcasecmp(value, "hashed") && strcasecmp(value, "ordered"))
            return bad(err, errcap, name, value, "must be hashed or ordered");
        p->ordered = !strcasecmp(value, "ordered");
    } else if (!strcmp(name, "writeallfields") || !strcmp(name, "readallfields")) {
        bool t = !strcasecmp(value, "true"), f = !strcasecmp(value, "false");
        if (!t && !f) return bad(err, errcap, name, value, "must be true or false");
        if (name[0] == 'w') p->writeallfields = t;
        /* readallfields: a record is one value here, always read whole */
    } else if (!strcmp(name, "workload") || !strcmp(name, "table") ||
               !strcmp(name, "fieldlengthdistribution") || !strcmp(name, "dataintegrity")) {
        if (!strcmp(name, "fieldlengthdistribution") && strcasecmp(value, "constant"))
            return bad(err, errcap, name, value, "only constant field lengths are supported");
        if (!strcmp(name, "dataintegrity") && strcasecmp(value, "false"))
            return bad(err, errcap, name, value, "dataintegrity is not supported");
        /* workload=site.ycsb.workloads.CoreWorkload, table=usertable: nothing to do */
    } else {
        return 1;
    }
    return 0;
}

int ycsb_props_file(struct ycsb_props *p, const char *path, char *err, size_t errcap)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errcap, "cannot read %s: %s", path, strerror(errno));
        return RDKV_EIO;
    }
    char line[1024];
    unsigned no = 0;
    int rc = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        no++;
        char *s = line;
        while (isspace((unsigned char)*s)) s++;
        size_t n = strlen(s);
        while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
        if (!*s || *s == '#') continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err, errcap, "%s:%u: expected name=value, got '%.60s'", path, no, s);
            rc = RDKV_EINVAL;
            break;
        }
        *eq = 0;
        char *name = s, *val = eq + 1;
        n = strlen(name);
        while (n && isspace((unsigned char)name[n - 1])) name[--n] = 0;
        while (isspace((unsigned char)*val)) val++;
        char e2[200];
        int r = ycsb_prop_set(p, name, val, e2, sizeof e2);
        if (r == 1) fprintf(stderr, "kvbench ycsb: %s:%u: ignoring property '%s'\n", path, no, name);
        else if (r) {
            snprintf(err, errcap, "%s:%u: %s", path, no, e2);
            rc = r;
        }
    }
    fclose(f);
    return rc;
}

int ycsb_props_check(const struct ycsb_props *p, char *err, size_t errcap)
{
    double sum = p->read + p->update + p->insert + p->scan + p->rmw;
    if (!(sum > 0)) {
        snprintf(err, errcap, "every operation proportion is 0");
        return RDKV_EINVAL;
    }
    if (p->minscanlength > p->maxscanlength) {
        snprintf(err, errcap, "minscanlength %u > maxscanlength %u", p->minscanlength,
                 p->maxscanlength);
        return RDKV_EINVAL;
    }
    if ((uint64_t)p->fieldcount * p->fieldlength > 1024 * 1024) {
        snprintf(err, errcap, "a record of %u x %u bytes exceeds the store's 1 MiB value limit",
                 p->fieldcount, p->fieldlength);
        return RDKV_EINVAL;
    }
    if (p->dist == YCSB_D_LATEST && p->recordcount < 1) {
        snprintf(err, errcap, "the latest distribution needs records");
        return RDKV_EINVAL;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Config bytes */

struct cfg {
    struct ycsb_props p;
    uint32_t nodes;
};

int ycsb_cfg_pack(const struct ycsb_props *p, uint32_t nodes, uint8_t out[YCSB_CFG_LEN])
{
    struct pack_w w;
    pack_w_init(&w);
    pack_u32(&w, CFG_VERSION);
    pack_u32(&w, nodes);
    pack_u64(&w, p->recordcount);
    pack_u64(&w, p->operationcount);
    pack_u32(&w, p->fieldcount);
    pack_u32(&w, p->fieldlength);
    double ds[] = {p->read, p->update, p->insert, p->scan, p->rmw, p->hotspotdatafraction,
                   p->hotspotopnfraction};
    for (unsigned i = 0; i < 7; i++) {
        uint64_t u;
        memcpy(&u, &ds[i], 8);
        pack_u64(&w, u);
    }
    pack_u8(&w, (uint8_t)p->dist);
    pack_u32(&w, p->minscanlength);
    pack_u32(&w, p->maxscanlength);
    pack_u8(&w, p->scan_zipfian);
    pack_u8(&w, p->ordered);
    pack_u32(&w, p->zeropadding);
    pack_u8(&w, p->writeallfields);
    pack_u8(&w, (uint8_t)p->workload);
    pack_u8(&w, (uint8_t)p->keyspertxn);
    pack_u8(&w, p->zipf_plain);
    int rc = w.err || w.len > YCSB_CFG_LEN ? RDKV_ENOMEM : 0;
    if (!rc) {
        memset(out, 0, YCSB_CFG_LEN);
        memcpy(out, w.p, w.len);
    }
    pack_w_free(&w);
    return rc;
}

static int cfg_unpack(struct cfg *c, const void *b, size_t len, char *err, size_t errcap)
{
    if (len != YCSB_CFG_LEN) {
        snprintf(err, errcap, "ycsb config: %zu bytes, expected %d", len, YCSB_CFG_LEN);
        return RDKV_EINVAL;
    }
    struct pack_r r;
    pack_r_init(&r, b, len);
    memset(c, 0, sizeof *c);
    struct ycsb_props *p = &c->p;
    uint32_t ver = unpack_u32(&r);
    c->nodes = unpack_u32(&r);
    p->recordcount = unpack_u64(&r);
    p->operationcount = unpack_u64(&r);
    p->fieldcount = unpack_u32(&r);
    p->fieldlength = unpack_u32(&r);
    double *ds[] = {&p->read, &p->update, &p->insert, &p->scan, &p->rmw,
                    &p->hotspotdatafraction, &p->hotspotopnfraction};
    bool ok = true;
    for (unsigned i = 0; i < 7; i++) {
        uint64_t u = unpack_u64(&r);
        memcpy(ds[i], &u, 8);
        ok = ok && *ds[i] >= 0 && *ds[i] <= 1; /* also false for NaN */
    }
    uint8_t dist = unpack_u8(&r);
    p->minscanlength = unpack_u32(&r);
    p->maxscanlength = unpack_u32(&r);
    uint8_t sz = unpack_u8(&r), ord = unpack_u8(&r);
    p->zeropadding = unpack_u32(&r);
    uint8_t waf = unpack_u8(&r);
    p->workload = (char)unpack_u8(&r);
    p->keyspertxn = unpack_u8(&r);
    uint8_t zp = unpack_u8(&r);
    p->zipf_plain = zp;
    p->dist = (enum ycsb_dist)dist;
    p->scan_zipfian = sz;
    p->ordered = ord;
    p->writeallfields = waf;
    char why[160];
    if (r.err || ver != CFG_VERSION || !ok || !c->nodes || c->nodes > 1024 ||
        dist >= YCSB_D_NDIST || sz > 1 || ord > 1 || waf > 1 || !p->recordcount ||
        p->recordcount > 1000000000000ull || !p->fieldcount || !p->fieldlength ||
        p->fieldcount > 100000 || p->fieldlength > 100000 || !p->minscanlength ||
        p->maxscanlength > 100000 || !p->zeropadding || p->zeropadding > 20 ||
        !p->keyspertxn || p->keyspertxn > YCSB_KEYS_PER_TXN_MAX || zp > 1 ||
        ycsb_props_check(p, why, sizeof why)) {
        snprintf(err, errcap, "ycsb config: malformed or unsupported (version %u)", ver);
        return RDKV_EINVAL;
    }
    return 0;
}

static int cfg_check(const void *cfg, size_t len, char *err, size_t errcap)
{
    struct cfg c;
    return cfg_unpack(&c, cfg, len, err, errcap);
}

/* ------------------------------------------------------------------------------------------ */
/* The inserts of one process in one run: handed out in order, acknowledged in any order; acked
 * is the count of the longest finished prefix. */

#define ACK_WINDOW 4096 /* more than the workers of a process can have in flight */
struct inserts {
    uint64_t run;
    unsigned proc;
    bool used;
    pthread_mutex_t mu;
    uint64_t next, acked;
    bool done[ACK_WINDOW];
};
static pthread_mutex_t ins_mu = PTHREAD_MUTEX_INITIALIZER;
static struct inserts ins_table[64];

static struct inserts *inserts_of(uint64_t run, unsigned proc)
{
    pthread_mutex_lock(&ins_mu);
    struct inserts *found = NULL, *oldest = &ins_table[0];
    for (unsigned i = 0; i < 64 && !found; i++) {
        struct inserts *x = &ins_table[i];
        if (x->used && x->run == run && x->proc == proc) found = x;
        else if (!x->used) oldest = x;
    }
    if (!found) { /* a new run: take a free entry (or reuse one: old runs have ended) */
        found = oldest;
        if (found->used) pthread_mutex_destroy(&found->mu);
        memset(found, 0, sizeof *found);
        found->used = true;
        found->run = run;
        found->proc = proc;
        pthread_mutex_init(&found->mu, NULL);
    }
    pthread_mutex_unlock(&ins_mu);
    return found;
}

static uint64_t insert_begin(struct inserts *x)
{
    pthread_mutex_lock(&x->mu);
    uint64_t j = x->next++;
    pthread_mutex_unlock(&x->mu);
    return j;
}

static void insert_end(struct inserts *x, uint64_t j)
{
    pthread_mutex_lock(&x->mu);
    x->done[j % ACK_WINDOW] = true;
    while (x->acked < x->next && x->done[x->acked % ACK_WINDOW]) x->done[x->acked++ % ACK_WINDOW] = false;
    pthread_mutex_unlock(&x->mu);
}

static uint64_t insert_acked(struct inserts *x)
{
    pthread_mutex_lock(&x->mu);
    uint64_t a = x->acked;
    pthread_mutex_unlock(&x->mu);
    return a;
}

/* ------------------------------------------------------------------------------------------ */
/* Workers */

struct worker {
    struct cfg c;
    struct wl_place pl;
    uint64_t rng;
    struct ycsb_opchooser ops;
    struct ycsb_scrambled zipf;
    struct ycsb_zipf zipf_plain; /* zipfianscrambled=false */
    struct ycsb_hotspot hot;
    struct ycsb_counter latest_basis;
    struct ycsb_latest latest;
    bool latest_ok;
    struct ycsb_zipf scanlen_gen;
    struct inserts *ins;
    uint64_t expected_new;
    unsigned chunk_digits;
    size_t vlen;
    uint8_t *val;     /* a record being written */
    uint8_t *noise;   /* random printable bytes to copy fields from */
    size_t noise_len;
    /* the current operation */
    char key[KEY_MAX];
    size_t klen;
    /* keyspertxn > 1: the transaction's keys, and which of them it updates */
    char keys[YCSB_KEYS_PER_TXN_MAX][KEY_MAX];
    size_t klens[YCSB_KEYS_PER_TXN_MAX];
    bool upd[YCSB_KEYS_PER_TXN_MAX];
    uint32_t scanlen;
};

static uint64_t keynum_of(const struct worker *w, uint64_t logical)
{
    uint64_t n = w->c.p.recordcount;
    if (logical < n) return logical;
    return n + w->pl.proc + (uint64_t)w->pl.nprocs * (logical - n);
}

static int key_of(const struct worker *w, uint64_t keynum, char *buf)
{
    return ycsb_key_name(keynum, w->c.p.ordered, w->c.p.zeropadding, buf, KEY_MAX);
}

/* The next key to read, update or scan from (CoreWorkload.nextKeynum). */
static uint64_t next_logical(struct worker *w)
{
    uint64_t have = w->c.p.recordcount + insert_acked(w->ins);
    uint64_t v;
    switch (w->c.p.dist) {
    case YCSB_D_UNIFORM: return rng_below(&w->rng, have);
    case YCSB_D_HOTSPOT: return ycsb_hotspot_next(&w->hot, &w->rng);
    case YCSB_D_LATEST:
        w->latest_basis.next = have; /* the newest acknowledged is have - 1 */
        v = ycsb_latest_next(&w->latest, &w->rng);
        return v < have ? v : have - 1;
    default:
        /* scrambled Zipfian over the expected key space; redraw past the acknowledged end */
        for (int i = 0; i < 1000; i++)
            if ((v = w->c.p.zipf_plain ? ycsb_zipf_next(&w->zipf_plain, &w->rng)
                                       : ycsb_scrambled_next(&w->zipf, &w->rng)) < have)
                return v;
        return rng_below(&w->rng, have);
    }
}

static void fill_field(struct worker *w, uint8_t *dst)
{
    size_t fl = w->c.p.fieldlength;
    size_t off = rng_below(&w->rng, w->noise_len - fl + 1);
    memcpy(dst, w->noise + off, fl);
}

static void fill_record(struct worker *w)
{
    for (uint32_t f = 0; f < w->c.p.fieldcount; f++) fill_field(w, w->val + (size_t)f * w->c.p.fieldlength);
}

static int worker_new(const void *cfg, size_t len, const struct wl_place *pl, uint64_t seed,
                      void **out)
{
    struct worker *w = calloc(1, sizeof *w);
    char err[160];
    if (!w) return RDKV_ENOMEM;
    int rc = cfg_unpack(&w->c, cfg, len, err, sizeof err);
    if (rc) {
        free(w);
        return rc;
    }
    const struct ycsb_props *p = &w->c.p;
    w->pl = *pl;
    w->rng = seed ? seed : 88172645463325252ull;
    for (int i = 0; i < 4; i++) rng_next(&w->rng);
    w->ins = inserts_of(pl->run, pl->proc);
    w->vlen = (size_t)p->fieldcount * p->fieldlength;
    w->noise_len = p->fieldlength * 4 + 256;
    w->val = malloc(w->vlen);
    w->noise = malloc(w->noise_len);
    if (!w->val || !w->noise) rc = RDKV_ENOMEM;
    for (size_t i = 0; !rc && i < w->noise_len; i++) w->noise[i] = (uint8_t)(' ' + rng_below(&w->rng, 95));
    if (!rc) rc = ycsb_opchooser_init(&w->ops, p->read, p->update, p->insert, p->scan, p->rmw);
    /* CoreWorkload: the key chooser's space includes the inserts expected in the run */
    w->expected_new = (uint64_t)((double)p->operationcount * p->insert * 2.0);
    if (!rc && p->dist == YCSB_D_ZIPFIAN && p->zipf_plain)
        rc = ycsb_zipf_init(&w->zipf_plain, 0, p->recordcount + w->expected_new - 1,
                            YCSB_ZIPFIAN_CONSTANT);
    else if (!rc && p->dist == YCSB_D_ZIPFIAN)
        rc = ycsb_scrambled_init(&w->zipf, 0, p->recordcount + w->expected_new - 1);
    if (!rc && p->dist == YCSB_D_HOTSPOT)
        rc = ycsb_hotspot_init(&w->hot, 0, p->recordcount - 1, p->hotspotdatafraction,
                               p->hotspotopnfraction);
    if (!rc && p->dist == YCSB_D_LATEST) {
        ycsb_counter_init(&w->latest_basis, p->recordcount);
        rc = ycsb_latest_init(&w->latest, &w->latest_basis);
    }
    if (!rc && p->scan_zipfian)
        rc = ycsb_zipf_init(&w->scanlen_gen, p->minscanlength, p->maxscanlength, YCSB_ZIPFIAN_CONSTANT);
    /* scan chunks: prefixes of k digits hold about recordcount / (9 * 10^(k-1)) keys each
     * (hashed key numbers' leading digits are close to uniform); pick the finest k whose chunk
     * still holds an average scan */
    double avg = (p->minscanlength + p->maxscanlength) / 2.0;
    double k = 1 + floor(log10((double)p->recordcount / (9.0 * avg)));
    w->chunk_digits = k < 1 ? 1 : (k > 18 ? 18 : (unsigned)k);
    if (rc) {
        free(w->val);
        free(w->noise);
        free(w);
        return rc;
    }
    *out = w;
    return 0;
}

static void worker_free(void *p)
{
    struct worker *w = p;
    free(w->val);
    free(w->noise);
    free(w);
}

/* The first key past every key that starts with key's first `digits` digits after "user":
 * the digit prefix plus one, carrying by dropping 9s. 0 and no end when nothing is past it. */
static size_t chunk_end(const char *key, size_t klen, unsigned digits, char *out)
{
    size_t n = 4 + digits < klen ? 4 + digits : klen;
    memcpy(out, key, n);
    while (n > 4) {
        if (out[n - 1] < '9') {
            out[n - 1]++;
            return n;
        }
        n--; /* ...9 -> carry into the digit before */
    }
    return 0;
}

/* Runs body in a transaction and commits, retrying conflicts; the final status. RDKV_ENOTFOUND
 * from body is an outcome (a read of an absent key): the transaction still commits. */
static int in_txn(rdkv_session *s, struct wl_step *st, int (*body)(struct worker *, rdkv_txn *),
                  struct worker *w)
{
    rdkv_txn *t;
    int rc = rdkv_txn_begin(s, &t);
    if (rc) return rc;
    for (;;) {
        int b = body(w, t);
        rc = b == 0 || b == RDKV_ENOTFOUND ? rdkv_txn_commit(t) : b;
        if (rc == 0) {
            rc = b;
            break;
        }
        if (!rdkv_status_retryable(rc) || clock_now_ns() >= st->give_up_at) break;
        st->aborts++;
        if ((rc = rdkv_txn_on_error(t, rc))) break;
    }
    rdkv_txn_free(t);
    return rc;
}

static int do_read(struct worker *w, rdkv_txn *t)
{
    (void)w;
    const void *v;
    size_t vl;
    return rdkv_txn_get(t, w->key, w->klen, &v, &vl);
}

static int do_update(struct worker *w, rdkv_txn *t)
{
    if (w->c.p.writeallfields) {
        fill_record(w);
        return rdkv_txn_put(t, w->key, w->klen, w->val, w->vlen);
    }
    /* one field: read the record for update, change the field, write it back */
    const void *v;
    size_t vl;
    int rc = rdkv_txn_get_for_update(t, w->key, w->klen, &v, &vl);
    if (rc) return rc;
    if (vl != w->vlen) return RDKV_EPROTO; /* not a record of this workload */
    memcpy(w->val, v, vl);
    fill_field(w, w->val + rng_below(&w->rng, w->c.p.fieldcount) * w->c.p.fieldlength);
    return rdkv_txn_put(t, w->key, w->klen, w->val, w->vlen);
}

static int do_scan(struct worker *w, rdkv_txn *t)
{
    char from[KEY_MAX], to[KEY_MAX];
    size_t flen = w->klen;
    memcpy(from, w->key, flen);
    uint32_t got = 0;
    while (got < w->scanlen) {
        size_t tlen = w->c.p.ordered ? 0 : chunk_end(from, flen, w->chunk_digits, to);
        rdkv_iter *it;
        int rc = rdkv_txn_scan(t, from, flen, tlen ? to : NULL, tlen, w->scanlen - got, &it);
        if (rc) return rc;
        const void *k, *v;
        size_t kl, vl;
        while ((rc = rdkv_iter_next(it, &k, &kl, &v, &vl)) == 1) got++;
        rdkv_iter_close(it);
        if (rc < 0) return rc;
        if (!tlen) break; /* scanned to the end of the table */
        memcpy(from, to, tlen);
        flen = tlen;
    }
    return 0;
}

/* keyspertxn > 1: reads and updates the drawn keys in the order drawn. */
static int do_keys(struct worker *w, rdkv_txn *t)
{
    for (uint32_t i = 0; i < w->c.p.keyspertxn; i++) {
        memcpy(w->key, w->keys[i], w->klens[i]);
        w->klen = w->klens[i];
        int rc = w->upd[i] ? do_update(w, t) : do_read(w, t);
        if (rc && rc != RDKV_ENOTFOUND) return rc;
    }
    return 0;
}

/* Draws a transaction of keyspertxn distinct keys (each from the request distribution, in the
 * order drawn, so transactions lock in random orders), each updated with the mix's odds of an
 * update against a read; it counts as an UPDATE if it updates any. */
static int step_keys(struct worker *w, rdkv_session *s, struct wl_step *st)
{
    const struct ycsb_props *p = &w->c.p;
    double pu = p->update + p->rmw, pr = p->read;
    bool any = false;
    for (uint32_t i = 0; i < p->keyspertxn; i++) {
        int kl = 0;
        for (int tries = 0; tries < 1000; tries++) {
            if ((kl = key_of(w, keynum_of(w, next_logical(w)), w->keys[i])) < 0) return kl;
            uint32_t j = 0;
            while (j < i && (w->klens[j] != (size_t)kl || memcmp(w->keys[j], w->keys[i], (size_t)kl))) j++;
            if (j == i) break;
        }
        w->klens[i] = (size_t)kl;
        w->upd[i] = pu + pr > 0 && (double)rng_below(&w->rng, 1u << 30) / (1u << 30) < pu / (pu + pr);
        any = any || w->upd[i];
    }
    st->op = any ? YCSB_UPDATE : YCSB_READ;
    st->status = in_txn(s, st, do_keys, w);
    return 0;
}

/* The key (and scan length) of an operation op drawn by the caller. */
static int draw_for(struct worker *w, enum ycsb_op op, struct ycsb_draw *d)
{
    uint64_t keynum, j = 0;
    if (op == YCSB_INSERT) {
        j = insert_begin(w->ins);
        keynum = w->c.p.recordcount + w->pl.proc + (uint64_t)w->pl.nprocs * j;
    } else {
        keynum = keynum_of(w, next_logical(w));
    }
    int kl = key_of(w, keynum, w->key);
    if (kl < 0) return kl;
    w->klen = (size_t)kl;
    if (op == YCSB_SCAN)
        w->scanlen = w->c.p.scan_zipfian
                         ? (uint32_t)ycsb_zipf_next(&w->scanlen_gen, &w->rng)
                         : (uint32_t)(w->c.p.minscanlength +
                                      rng_below(&w->rng, w->c.p.maxscanlength - w->c.p.minscanlength + 1));
    *d = (struct ycsb_draw){.op = op, .key = w->key, .klen = w->klen, .scanlen = w->scanlen,
                            .insert_j = j};
    return 0;
}

int ycsb_draw(void *p, struct ycsb_draw *d)
{
    struct worker *w = p;
    return draw_for(w, ycsb_opchooser_next(&w->ops, &w->rng), d);
}

void ycsb_draw_done(void *p, const struct ycsb_draw *d)
{
    struct worker *w = p;
    if (d->op == YCSB_INSERT) insert_end(w->ins, d->insert_j);
}

const uint8_t *ycsb_record(void *p, size_t *len)
{
    struct worker *w = p;
    fill_record(w);
    *len = w->vlen;
    return w->val;
}

const uint8_t *ycsb_field(void *p, uint32_t *field)
{
    struct worker *w = p;
    *field = (uint32_t)rng_below(&w->rng, w->c.p.fieldcount);
    fill_field(w, w->val);
    return w->val;
}

static int step(void *p, rdkv_session *s, struct wl_step *st)
{
    struct worker *w = p;
    enum ycsb_op op = ycsb_opchooser_next(&w->ops, &w->rng);
    if (w->c.p.keyspertxn > 1 && (op == YCSB_READ || op == YCSB_UPDATE || op == YCSB_RMW))
        return step_keys(w, s, st);
    struct ycsb_draw d;
    int rc = draw_for(w, op, &d);
    if (rc) return rc;
    st->op = (unsigned)d.op;
    if (d.op == YCSB_READ) { /* one-shot: one transaction, one request on a remote session */
        const void *v;
        size_t vl;
        st->status = rdkv_get(s, w->key, w->klen, &v, &vl);
    } else if (d.op == YCSB_INSERT || (d.op == YCSB_UPDATE && w->c.p.writeallfields)) {
        fill_record(w);
        st->status = rdkv_put(s, w->key, w->klen, w->val, w->vlen);
    } else if (d.op == YCSB_UPDATE || d.op == YCSB_RMW) {
        /* one field, written in place by the key's owner (rdkv_patch: one transaction, one
         * request); a read-modify-write also gets the record as it was */
        size_t fl = w->c.p.fieldlength;
        fill_field(w, w->val);
        const void *old;
        size_t oldlen;
        bool rmw = d.op == YCSB_RMW;
        st->status = rdkv_patch(s, w->key, w->klen, rng_below(&w->rng, w->c.p.fieldcount) * fl,
                                w->val, fl, rmw ? &old : NULL, &oldlen);
        if (!st->status && rmw && oldlen != w->vlen) st->status = RDKV_EPROTO; /* not ours */
    } else {
        st->status = in_txn(s, st, do_scan, w); /* a scan of several chunks: one transaction */
    }
    ycsb_draw_done(w, &d);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Load: part p inserts the records that live on node p (so its inserts are local). */

static int load_key(void *p, uint64_t i, char *buf, size_t cap)
{
    const struct worker *w = p;
    return ycsb_key_name(i, w->c.p.ordered, w->c.p.zeropadding, buf, cap);
}

static void load_value(void *p, uint64_t i, const void **v, size_t *vlen)
{
    struct worker *w = p;
    (void)i;
    fill_record(w);
    *v = w->val;
    *vlen = w->vlen;
}

static int load(rdkv_session *s, const void *cfg, size_t len, unsigned part, unsigned nparts,
                char *err, size_t errcap)
{
    struct cfg c;
    int rc = cfg_unpack(&c, cfg, len, err, errcap);
    if (rc) return rc;
    struct wl_place pl = {.nodes = c.nodes, .node = -1, .nprocs = 1, .nworkers = 1};
    struct worker *w;
    if ((rc = worker_new(cfg, len, &pl, 0x9E3779B97F4A7C15ull + part, (void **)&w))) {
        snprintf(err, errcap, "cannot start the loader: %s", rdkv_strerror(rc));
        return rc;
    }
    rc = wl_load_rows(s, c.p.recordcount, part, nparts, c.nodes, load_key, load_value, w);
    worker_free(w);
    if (rc) snprintf(err, errcap, "loading part %u: %s", part, rdkv_strerror(rc));
    return rc;
}

static int probe_key(void *arg, uint64_t i, char *buf, size_t cap)
{
    const struct cfg *c = arg;
    return ycsb_key_name(i, c->p.ordered, c->p.zeropadding, buf, cap);
}

static int probe(rdkv_session *s, const void *cfg, size_t len, unsigned want, unsigned *found)
{
    struct cfg c;
    char err[160];
    int rc = cfg_unpack(&c, cfg, len, err, sizeof err);
    return rc ? rc : wl_probe_rows(s, c.p.recordcount, want, found, probe_key, &c);
}

const struct wl_class wl_ycsb = {
    .name = "ycsb",
    .nops = YCSB_NOPS,
    .op_names = {"READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE"},
    .cfg_check = cfg_check,
    .load = load,
    .probe = probe,
    .worker_new = worker_new,
    .step = step,
    .worker_free = worker_free,
};
