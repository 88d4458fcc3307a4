/* --db redis (peer.h), with hiredis. A YCSB record is a hash of fieldcount fields, as YCSB's
 * own Redis binding stores it: READ is HGETALL, UPDATE an HSET of one field (or of all with
 * writeallfields=true). Every key is also a member of the sorted set INDEX_KEY (score 0, so its
 * members are in byte order): INSERT is MULTI, the HSET of every field, ZADD, EXEC -- one round
 * trip -- and SCAN one Lua script, run atomically by the server: ZRANGEBYLEX from the start key
 * for scanlength members, and HGETALL of each. READ-MODIFY-WRITE is optimistic:
 * WATCH key, HGETALL, MULTI, HSET, EXEC, again while EXEC answers nil (each retry counts as
 * an abort).
 * An account is a string holding its balance; a transfer is WATCH both, MGET, MULTI, two SETs,
 * EXEC, retried the same way. Loads are pipelined. */
#include "tools/kvbench/peer.h"
#include "tools/kvbench/transfer.h"
#include "tools/kvbench/ycsb_gen.h"

#include "common/clock.h"

#include <hiredis/hiredis.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PIPELINE 512               /* commands in flight while loading */
#define INDEX_KEY "_indices"       /* the records' keys in byte order (YCSB's binding's name) */

/* SCAN: KEYS[1] the index, ARGV[1] "[" and the start key, ARGV[2] the most records. */
static const char scan_lua[] =
    "local ks = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], '+', 'LIMIT', 0, tonumber(ARGV[2]))\n"
    "local out = {}\n"
    "for i, k in ipairs(ks) do out[i] = redis.call('HGETALL', k) end\n"
    "return out\n";
#define MAX_FIELDS PEER_MAX_FIELDS /* HSET of every field: argv on the stack */

struct rconn {
    redisContext *c;
    char names[MAX_FIELDS][12]; /* "field0".. */
};

static int r_connect(const char *target, void **out, char *err, size_t errcap)
{
    char host[256];
    const char *colon = strrchr(target, ':');
    int port = colon ? atoi(colon + 1) : 0;
    if (!colon || port <= 0 || port > 65535 || (size_t)(colon - target) >= sizeof host) {
        snprintf(err, errcap, "--redis needs HOST:PORT (got '%s')", target);
        return RDKV_EINVAL;
    }
    memcpy(host, target, (size_t)(colon - target));
    host[colon - target] = 0;
    struct rconn *r = calloc(1, sizeof *r);
    if (!r) return RDKV_ENOMEM;
    r->c = redisConnectWithTimeout(host, port, (struct timeval){.tv_sec = 10});
    if (!r->c || r->c->err) {
        snprintf(err, errcap, "cannot connect to redis at %s: %s", target,
                 r->c ? r->c->errstr : "out of memory");
        if (r->c) redisFree(r->c);
        free(r);
        return RDKV_EUNAVAILABLE;
    }
    for (unsigned i = 0; i < MAX_FIELDS; i++)
        snprintf(r->names[i], sizeof r->names[i], "field%u", i);
    *out = r;
    return 0;
}

static void r_close(void *p)
{
    struct rconn *r = p;
    redisFree(r->c);
    free(r);
}

/* A command's reply, or NULL when the connection failed (r->c->errstr says why). */
static redisReply *cmd(struct rconn *r, int argc, const char **argv, const size_t *len)
{
    return redisCommandArgv(r->c, argc, argv, len);
}

/* HSET key field0 v0 field1 v1 ... of a whole record into argv (2 + 2 x fieldcount). */
static int hset_all(struct rconn *r, const struct ycsb_props *p, const char *key, size_t klen,
                    const uint8_t *rec, const char **argv, size_t *len)
{
    argv[0] = "HSET", len[0] = 4;
    argv[1] = key, len[1] = klen;
    for (uint32_t f = 0; f < p->fieldcount; f++) {
        argv[2 + 2 * f] = r->names[f], len[2 + 2 * f] = strlen(r->names[f]);
        argv[3 + 2 * f] = (const char *)rec + (size_t)f * p->fieldlength;
        len[3 + 2 * f] = p->fieldlength;
    }
    return 2 + 2 * (int)p->fieldcount;
}

/* Sends n pipelined commands' replies back: 0, or the first error. */
static int drain(struct rconn *r, unsigned n, char *err, size_t errcap)
{
    int rc = 0;
    for (unsigned i = 0; i < n; i++) {
        void *rep = NULL;
        if (redisGetReply(r->c, &rep) != REDIS_OK) {
            snprintf(err, errcap, "redis: %s", r->c->errstr);
            return RDKV_EIO;
        }
        redisReply *x = rep;
        if (x->type == REDIS_REPLY_ERROR && !rc) {
            snprintf(err, errcap, "redis: %s", x->str);
            rc = RDKV_EIO;
        }
        freeReplyObject(x);
    }
    return rc;
}

/* After appending a command (ok: what redisAppendCommand* returned): every PIPELINE commands,
 * their replies. */
static int appended(struct rconn *r, int ok, unsigned *pending, char *err, size_t errcap)
{
    if (ok != REDIS_OK) {
        snprintf(err, errcap, "redis: %s", r->c->errstr);
        return RDKV_EIO;
    }
    if (++*pending < PIPELINE) return 0;
    *pending = 0;
    return drain(r, PIPELINE, err, errcap);
}

static int r_ycsb_load(void *p_, const struct ycsb_props *p, void *gen, char *err, size_t errcap)
{
    struct rconn *r = p_;
    const char *argv[2 + 2 * MAX_FIELDS];
    size_t len[2 + 2 * MAX_FIELDS];
    unsigned pending = 0;
    int rc = 0;
    for (uint64_t i = 0; i < p->recordcount && !rc; i++) {
        char key[32];
        int kl = ycsb_key_name(i, p->ordered, p->zeropadding, key, sizeof key);
        size_t vl;
        const uint8_t *rec = ycsb_record(gen, &vl);
        int argc = hset_all(r, p, key, (size_t)kl, rec, argv, len);
        rc = appended(r, redisAppendCommandArgv(r->c, argc, argv, len), &pending, err, errcap);
        if (!rc)
            rc = appended(r, redisAppendCommand(r->c, "ZADD " INDEX_KEY " 0 %b", key, (size_t)kl),
                          &pending, err, errcap);
    }
    if (!rc) rc = drain(r, pending, err, errcap);
    return rc;
}

/* The replies of MULTI, `queued` commands and EXEC: 1 when EXEC answered nil (a watched key
 * changed), 0 with st->status set otherwise, or RDKV_EIO when the connection failed. */
static int exec_replies(struct rconn *r, unsigned queued, struct wl_step *st)
{
    bool nil = false;
    for (unsigned i = 0; i < queued + 2; i++) {
        void *rep;
        if (redisGetReply(r->c, &rep) != REDIS_OK) return RDKV_EIO;
        redisReply *x = rep;
        if (i == queued + 1) {
            nil = x->type == REDIS_REPLY_NIL;
            st->status = x->type == REDIS_REPLY_ARRAY ? 0 : RDKV_EIO;
        }
        freeReplyObject(x);
    }
    return nil;
}

/* The outcome of a reply: 0, or an error status (the reply is freed). */
static int outcome(redisReply *x)
{
    int st = x->type == REDIS_REPLY_ERROR ? RDKV_EIO : 0;
    freeReplyObject(x);
    return st;
}

static int r_ycsb_op(void *p_, const struct ycsb_props *p, void *gen, const struct ycsb_draw *d,
                     struct wl_step *st)
{
    struct rconn *r = p_;
    const char *argv[2 + 2 * MAX_FIELDS];
    size_t len[2 + 2 * MAX_FIELDS];
    redisReply *x;
    switch (d->op) {
    case YCSB_READ:
        x = redisCommand(r->c, "HGETALL %b", d->key, d->klen);
        if (!x) return RDKV_EIO;
        st->status = x->type == REDIS_REPLY_ARRAY && !x->elements ? RDKV_ENOTFOUND : 0;
        if (x->type != REDIS_REPLY_ARRAY) st->status = RDKV_EIO;
        freeReplyObject(x);
        return 0;
    case YCSB_INSERT: {
        /* the hash and its index entry together */
        size_t vl;
        const uint8_t *rec = ycsb_record(gen, &vl);
        int argc = hset_all(r, p, d->key, d->klen, rec, argv, len);
        redisAppendCommand(r->c, "MULTI");
        redisAppendCommandArgv(r->c, argc, argv, len);
        redisAppendCommand(r->c, "ZADD " INDEX_KEY " 0 %b", d->key, d->klen);
        redisAppendCommand(r->c, "EXEC");
        int e = exec_replies(r, 2, st);
        return e < 0 ? e : 0; /* (no WATCH: EXEC cannot answer nil) */
    }
    case YCSB_SCAN: {
        char start[64], lim[16]; /* (keys are "user" and at most 20 digits) */
        if (d->klen >= sizeof start) {
            st->status = RDKV_EINVAL;
            return 0;
        }
        start[0] = '[';
        memcpy(start + 1, d->key, d->klen);
        snprintf(lim, sizeof lim, "%u", d->scanlen);
        x = redisCommand(r->c, "EVAL %s 1 " INDEX_KEY " %b %s", scan_lua, start,
                         (size_t)d->klen + 1, lim);
        if (!x) return RDKV_EIO;
        st->status = x->type == REDIS_REPLY_ARRAY ? 0 : RDKV_EIO;
        freeReplyObject(x);
        return 0;
    }
    case YCSB_UPDATE:
        if (p->writeallfields) {
            size_t vl;
            const uint8_t *rec = ycsb_record(gen, &vl);
            int argc = hset_all(r, p, d->key, d->klen, rec, argv, len);
            x = cmd(r, argc, argv, len);
        } else {
            uint32_t f;
            const uint8_t *v = ycsb_field(gen, &f);
            x = redisCommand(r->c, "HSET %b %s %b", d->key, d->klen, r->names[f], v,
                             (size_t)p->fieldlength);
        }
        if (!x) return RDKV_EIO;
        st->status = outcome(x);
        return 0;
    case YCSB_RMW:
        for (;;) {
            if (!(x = redisCommand(r->c, "WATCH %b", d->key, d->klen))) return RDKV_EIO;
            freeReplyObject(x);
            if (!(x = redisCommand(r->c, "HGETALL %b", d->key, d->klen))) return RDKV_EIO;
            bool absent = x->type == REDIS_REPLY_ARRAY && !x->elements;
            freeReplyObject(x);
            if (absent) {
                if (!(x = redisCommand(r->c, "UNWATCH"))) return RDKV_EIO;
                freeReplyObject(x);
                st->status = RDKV_ENOTFOUND;
                return 0;
            }
            uint32_t f;
            const uint8_t *v = ycsb_field(gen, &f);
            redisAppendCommand(r->c, "MULTI");
            redisAppendCommand(r->c, "HSET %b %s %b", d->key, d->klen, r->names[f], v,
                               (size_t)p->fieldlength);
            redisAppendCommand(r->c, "EXEC");
            int e = exec_replies(r, 1, st);
            if (e < 0) return e;
            if (!e || !peer_retry(st)) return 0;
        }
    default:
        st->status = RDKV_EINVAL;
        return 0;
    }
}

static int r_xfer_load(void *p_, uint64_t n, char *err, size_t errcap)
{
    struct rconn *r = p_;
    unsigned pending = 0;
    int rc = 0;
    for (uint64_t i = 0; i < n && !rc; i++) {
        char key[XFER_KEY_MAX];
        xfer_key(i, key, sizeof key);
        rc = appended(r, redisAppendCommand(r->c, "SET %s %d", key, XFER_INITIAL), &pending, err,
                      errcap);
    }
    if (!rc) rc = drain(r, pending, err, errcap);
    return rc;
}

static int64_t balance(const redisReply *x)
{
    return x->type == REDIS_REPLY_STRING ? strtoll(x->str, NULL, 10) : 0;
}

static int r_xfer_op(void *p_, uint64_t from, uint64_t to, int64_t amount, struct wl_step *st)
{
    struct rconn *r = p_;
    char kf[XFER_KEY_MAX], kt[XFER_KEY_MAX];
    xfer_key(from, kf, sizeof kf);
    xfer_key(to, kt, sizeof kt);
    for (;;) {
        redisReply *x;
        if (!(x = redisCommand(r->c, "WATCH %s %s", kf, kt))) return RDKV_EIO;
        freeReplyObject(x);
        if (!(x = redisCommand(r->c, "MGET %s %s", kf, kt))) return RDKV_EIO;
        if (x->type != REDIS_REPLY_ARRAY || x->elements != 2 ||
            x->element[0]->type != REDIS_REPLY_STRING ||
            x->element[1]->type != REDIS_REPLY_STRING) {
            freeReplyObject(x);
            if ((x = redisCommand(r->c, "UNWATCH"))) freeReplyObject(x);
            st->status = RDKV_ENOTFOUND; /* not loaded */
            return x ? 0 : RDKV_EIO;
        }
        int64_t bf = balance(x->element[0]), bt = balance(x->element[1]);
        freeReplyObject(x);
        int64_t m = amount < bf ? amount : bf;
        redisAppendCommand(r->c, "MULTI");
        redisAppendCommand(r->c, "SET %s %lld", kf, (long long)(bf - m));
        redisAppendCommand(r->c, "SET %s %lld", kt, (long long)(bt + m));
        redisAppendCommand(r->c, "EXEC");
        int e = exec_replies(r, 2, st);
        if (e < 0) return e;
        if (!e || !peer_retry(st)) return 0;
    }
}

static int r_xfer_sum(void *p_, uint64_t n, uint64_t *found, int64_t *total, char *err,
                      size_t errcap)
{
    struct rconn *r = p_;
    *found = 0, *total = 0;
    for (uint64_t i = 0; i < n; i++) {
        char key[XFER_KEY_MAX];
        xfer_key(i, key, sizeof key);
        redisAppendCommand(r->c, "GET %s", key);
        if ((i + 1) % PIPELINE && i + 1 < n) continue;
        for (uint64_t j = i - i % PIPELINE; j <= i; j++) {
            void *rep;
            if (redisGetReply(r->c, &rep) != REDIS_OK) {
                snprintf(err, errcap, "redis: %s", r->c->errstr);
                return RDKV_EIO;
            }
            redisReply *x = rep;
            if (x->type == REDIS_REPLY_STRING) (*found)++, *total += balance(x);
            freeReplyObject(x);
        }
    }
    return 0;
}

const struct peer_ops peer_redis = {
    .name = "redis",
    .semantics = "a record is a hash (HGETALL, HSET); single commands are atomic; "
                 "INSERT is MULTI, HSET, ZADD to a sorted-set index, EXEC; SCAN a Lua script "
                 "(ZRANGEBYLEX on the index, HGETALL of each key), run atomically; "
                 "READ-MODIFY-WRITE and TRANSFER are WATCH/MULTI/EXEC, retried on a nil EXEC "
                 "(counted as aborts)",
    .connect = r_connect,
    .close = r_close,
    .ycsb_load = r_ycsb_load,
    .ycsb_op = r_ycsb_op,
    .xfer_load = r_xfer_load,
    .xfer_op = r_xfer_op,
    .xfer_sum = r_xfer_sum,
};
