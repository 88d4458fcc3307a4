/* --db postgres (peer.h), with libpq and prepared statements. A YCSB record is one row of
 * usertable(ycsb_key text primary key, field0 .. fieldN-1 text), as YCSB's JDBC binding has it:
 * READ is a SELECT by key, UPDATE an UPDATE of one field (of all with writeallfields=true),
 * INSERT an INSERT (an upsert, as rdkv's put), SCAN a SELECT of the next scanlength keys in key
 * order; each is one statement in autocommit (READ COMMITTED: a one-statement transaction on
 * one row). READ-MODIFY-WRITE is BEGIN, SELECT ... FOR UPDATE, UPDATE, COMMIT: the row lock
 * makes it serializable without SERIALIZABLE's predicate locks. TRANSFER runs at SERIALIZABLE:
 * both accounts in one SELECT ... FOR UPDATE (locked in id order), then two UPDATEs; a
 * serialization failure or a deadlock (SQLSTATE 40001, 40P01) rolls back and retries, counted
 * as an abort. Loads use COPY. */
#include "tools/kvbench/peer.h"
#include "tools/kvbench/transfer.h"
#include "tools/kvbench/ycsb_gen.h"

#include "common/clock.h"

#include <libpq-fe.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELDS PEER_MAX_FIELDS
#define COPY_BUF (1 << 20)

struct pconn {
    PGconn *c;
    bool ycsb_ready, xfer_ready; /* statements prepared */
};

static void quiet(void *arg, const char *msg)
{
    (void)arg, (void)msg;
}

static int p_connect(const char *target, void **out, char *err, size_t errcap)
{
    struct pconn *p = calloc(1, sizeof *p);
    if (!p) return RDKV_ENOMEM;
    p->c = PQconnectdb(target);
    if (!p->c || PQstatus(p->c) != CONNECTION_OK) {
        snprintf(err, errcap, "cannot connect to postgres: %s",
                 p->c ? PQerrorMessage(p->c) : "out of memory");
        size_t n = strlen(err);
        while (n && err[n - 1] == '\n') err[--n] = 0;
        PQfinish(p->c);
        free(p);
        return RDKV_EUNAVAILABLE;
    }
    PQsetNoticeProcessor(p->c, quiet, NULL); /* "table ... does not exist, skipping" */
    *out = p;
    return 0;
}

static void p_close(void *p_)
{
    struct pconn *p = p_;
    PQfinish(p->c);
    free(p);
}

/* 0 when the result has the wanted status; else an error (its message in err when given). */
static int result(struct pconn *p, PGresult *res, ExecStatusType want, char *err, size_t errcap)
{
    int rc = 0;
    if (!res || PQresultStatus(res) != want) {
        if (err)
            snprintf(err, errcap, "postgres: %s",
                     res ? PQresultErrorMessage(res) : PQerrorMessage(p->c));
        rc = RDKV_EIO;
    }
    PQclear(res);
    return rc;
}

static int exec(struct pconn *p, const char *sql, char *err, size_t errcap)
{
    PGresult *res = PQexec(p->c, sql);
    ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    return result(p, res, st == PGRES_TUPLES_OK ? PGRES_TUPLES_OK : PGRES_COMMAND_OK, err, errcap);
}

static int prepare(struct pconn *p, const char *name, const char *sql, char *err, size_t errcap)
{
    return result(p, PQprepare(p->c, name, sql, 0, NULL), PGRES_COMMAND_OK, err, errcap);
}

/* The comma-separated list of fieldcount items of one kind. */
enum flist { F_NAMES, F_TYPED, F_SETS, F_PARAMS, F_EXCLUDED };
static void fields(char *out, size_t cap, uint32_t n, enum flist k)
{
    size_t at = 0;
    out[0] = 0;
    for (uint32_t f = 0; f < n && at < cap; f++) {
        const char *sep = f ? ", " : "";
        switch (k) {
        case F_NAMES:
            at += (size_t)snprintf(out + at, cap - at, "%sfield%u", sep, f);
            break;
        case F_TYPED:
            at += (size_t)snprintf(out + at, cap - at, "%sfield%u text", sep, f);
            break;
        case F_SETS:
            at += (size_t)snprintf(out + at, cap - at, "%sfield%u = $%u", sep, f, f + 2);
            break;
        case F_PARAMS:
            at += (size_t)snprintf(out + at, cap - at, "%s$%u", sep, f + 2);
            break;
        case F_EXCLUDED:
            at += (size_t)snprintf(out + at, cap - at, "%sfield%u = EXCLUDED.field%u", sep, f, f);
            break;
        }
    }
}

/* Prepares statement `name` from a format; a no-op once rc is set (so calls chain). */
__attribute__((format(printf, 6, 7))) static int
prepf(struct pconn *p, int rc, char *err, size_t errcap, const char *name, const char *fmt, ...)
{
    if (rc) return rc;
    va_list ap;
    va_start(ap, fmt);
    char *sql = NULL;
    int n = vasprintf(&sql, fmt, ap);
    va_end(ap);
    if (n < 0) return RDKV_ENOMEM;
    rc = prepare(p, name, sql, err, errcap);
    free(sql);
    return rc;
}

static int prepare_ycsb(struct pconn *p, const struct ycsb_props *yp, char *err, size_t errcap)
{
    size_t cap = 64 * (size_t)yp->fieldcount + 256;
    char *list = malloc(cap), *sets = malloc(cap), *vals = malloc(cap), *ex = malloc(cap);
    int rc = list && sets && vals && ex ? 0 : RDKV_ENOMEM;
    if (!rc) {
        fields(list, cap, yp->fieldcount, F_NAMES);
        fields(sets, cap, yp->fieldcount, F_SETS);
        fields(vals, cap, yp->fieldcount, F_PARAMS);
        fields(ex, cap, yp->fieldcount, F_EXCLUDED);
    }
    rc = prepf(p, rc, err, errcap, "r", "SELECT %s FROM usertable WHERE ycsb_key = $1", list);
    rc = prepf(p, rc, err, errcap, "rf", "SELECT %s FROM usertable WHERE ycsb_key = $1 FOR UPDATE",
               list);
    rc = prepf(p, rc, err, errcap, "s",
               "SELECT ycsb_key, %s FROM usertable WHERE ycsb_key >= $1 "
               "ORDER BY ycsb_key LIMIT $2",
               list);
    rc = prepf(p, rc, err, errcap, "ua", "UPDATE usertable SET %s WHERE ycsb_key = $1", sets);
    rc = prepf(p, rc, err, errcap, "i",
               "INSERT INTO usertable VALUES ($1, %s) ON CONFLICT "
               "(ycsb_key) DO UPDATE SET %s",
               vals, ex);
    for (uint32_t f = 0; !rc && f < yp->fieldcount; f++) {
        char name[16];
        snprintf(name, sizeof name, "u%u", f);
        rc = prepf(p, rc, err, errcap, name,
                   "UPDATE usertable SET field%u = $2 WHERE ycsb_key = $1", f);
    }
    free(list), free(sets), free(vals), free(ex);
    if (!rc) p->ycsb_ready = true;
    return rc;
}

/* COPY's text format: backslash is its escape (the records' bytes are printable ASCII). */
static size_t copy_field(char *dst, const uint8_t *src, size_t n)
{
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\\' || src[i] < ' ' || src[i] == 127) {
            at += (size_t)sprintf(dst + at, "\\%03o", src[i]);
        } else {
            dst[at++] = (char)src[i];
        }
    }
    return at;
}

static int copy_end(struct pconn *p, const char *why, char *err, size_t errcap)
{
    int rc = PQputCopyEnd(p->c, why) == 1 ? 0 : RDKV_EIO;
    PGresult *res;
    while ((res = PQgetResult(p->c))) {
        if (PQresultStatus(res) != PGRES_COMMAND_OK && !rc) {
            snprintf(err, errcap, "postgres: COPY: %s", PQresultErrorMessage(res));
            rc = RDKV_EIO;
        }
        PQclear(res);
    }
    return rc;
}

static int p_ycsb_load(void *p_, const struct ycsb_props *yp, void *gen, char *err, size_t errcap)
{
    struct pconn *p = p_;
    size_t cap = 40 * (size_t)yp->fieldcount + 128;
    char *ddl = malloc(cap), *cols = malloc(cap);
    char *buf = malloc(COPY_BUF + 4 * (size_t)yp->fieldcount * yp->fieldlength + 64);
    int rc = ddl && cols && buf ? 0 : RDKV_ENOMEM;
    if (!rc) {
        fields(cols, cap, yp->fieldcount, F_TYPED);
        snprintf(ddl, cap,
                 "DROP TABLE IF EXISTS usertable; "
                 "CREATE TABLE usertable (ycsb_key text PRIMARY KEY, %s)",
                 cols);
        rc = exec(p, ddl, err, errcap);
    }
    if (!rc) rc = result(p, PQexec(p->c, "COPY usertable FROM STDIN"), PGRES_COPY_IN, err, errcap);
    bool copying = !rc;
    size_t at = 0;
    for (uint64_t i = 0; !rc && i < yp->recordcount; i++) {
        at += (size_t)ycsb_key_name(i, yp->ordered, yp->zeropadding, buf + at, 32);
        size_t vl;
        const uint8_t *rec = ycsb_record(gen, &vl);
        for (uint32_t f = 0; f < yp->fieldcount; f++) {
            buf[at++] = '\t';
            at += copy_field(buf + at, rec + (size_t)f * yp->fieldlength, yp->fieldlength);
        }
        buf[at++] = '\n';
        if (at >= COPY_BUF || i + 1 == yp->recordcount) {
            if (PQputCopyData(p->c, buf, (int)at) != 1) {
                snprintf(err, errcap, "postgres: COPY: %s", PQerrorMessage(p->c));
                rc = RDKV_EIO;
            }
            at = 0;
        }
    }
    if (copying) {
        char e2[256];
        int r2 = copy_end(p, rc ? "loading failed" : NULL, e2, sizeof e2);
        if (r2 && !rc) rc = r2, snprintf(err, errcap, "%s", e2);
    }
    if (!rc) rc = exec(p, "ANALYZE usertable", err, errcap);
    free(ddl), free(cols), free(buf);
    return rc;
}

/* A statement's SQLSTATE class: a conflict to retry (serialization failure, deadlock)? */
static bool conflict(const PGresult *res)
{
    const char *s = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    return s && (!strcmp(s, "40001") || !strcmp(s, "40P01"));
}

/* Runs prepared statement name; *rows gets the row count of a query. The outcome: 0, an error,
 * or RDKV_EABORTED for a conflict; RDKV_EUNAVAILABLE when the connection is gone. */
static int run(struct pconn *p, const char *name, int n, const char *const *vals, const int *lens,
               const int *fmts, int *rows)
{
    PGresult *res = PQexecPrepared(p->c, name, n, vals, lens, fmts, 0);
    ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    int rc = 0;
    if (st == PGRES_TUPLES_OK) {
        if (rows) *rows = PQntuples(res);
    } else if (st == PGRES_COMMAND_OK) {
        if (rows) *rows = atoi(PQcmdTuples(res));
    } else {
        rc = conflict(res)                      ? RDKV_EABORTED
             : PQstatus(p->c) == CONNECTION_BAD ? RDKV_EUNAVAILABLE
                                                : RDKV_EIO;
    }
    PQclear(res);
    return rc;
}

static int simple(struct pconn *p, const char *sql)
{
    PGresult *res = PQexec(p->c, sql);
    int rc = res && PQresultStatus(res) == PGRES_COMMAND_OK ? 0
             : conflict(res)                                ? RDKV_EABORTED
             : PQstatus(p->c) == CONNECTION_BAD             ? RDKV_EUNAVAILABLE
                                                            : RDKV_EIO;
    PQclear(res);
    return rc;
}

/* The status of a step, and whether the connection is gone. */
static int finish(struct wl_step *st, int rc)
{
    st->status = rc;
    return rc == RDKV_EUNAVAILABLE ? rc : 0;
}

static int p_ycsb_op(void *p_, const struct ycsb_props *yp, void *gen, const struct ycsb_draw *d,
                     struct wl_step *st)
{
    struct pconn *p = p_;
    char err[256];
    if (!p->ycsb_ready && prepare_ycsb(p, yp, err, sizeof err)) {
        fprintf(stderr, "kvbench ycsb: %s", err);
        return RDKV_EIO;
    }
    const char *vals[MAX_FIELDS + 1];
    int lens[MAX_FIELDS + 1], fmts[MAX_FIELDS + 1];
    vals[0] = d->key, lens[0] = (int)d->klen, fmts[0] = 1; /* binary text: the bytes */
    int rows = 0, rc;
    if (d->op == YCSB_READ) {
        rc = run(p, "r", 1, vals, lens, fmts, &rows);
        return finish(st, rc ? rc : rows ? 0 : RDKV_ENOTFOUND);
    }
    if (d->op == YCSB_SCAN) {
        char lim[16];
        snprintf(lim, sizeof lim, "%u", d->scanlen);
        vals[1] = lim, lens[1] = 0, fmts[1] = 0;
        return finish(st, run(p, "s", 2, vals, lens, fmts, &rows));
    }
    if (d->op == YCSB_INSERT || (d->op == YCSB_UPDATE && yp->writeallfields)) {
        size_t vl;
        const uint8_t *rec = ycsb_record(gen, &vl);
        for (uint32_t f = 0; f < yp->fieldcount; f++)
            vals[1 + f] = (const char *)rec + (size_t)f * yp->fieldlength,
                     lens[1 + f] = (int)yp->fieldlength, fmts[1 + f] = 1;
        rc = run(p, d->op == YCSB_INSERT ? "i" : "ua", 1 + (int)yp->fieldcount, vals, lens, fmts,
                 &rows);
        return finish(st, rc ? rc : rows ? 0 : RDKV_ENOTFOUND);
    }
    uint32_t f;
    const uint8_t *v = ycsb_field(gen, &f);
    char uname[16];
    snprintf(uname, sizeof uname, "u%u", f);
    vals[1] = (const char *)v, lens[1] = (int)yp->fieldlength, fmts[1] = 1;
    if (d->op == YCSB_UPDATE) {
        rc = run(p, uname, 2, vals, lens, fmts, &rows);
        return finish(st, rc ? rc : rows ? 0 : RDKV_ENOTFOUND);
    }
    /* READ-MODIFY-WRITE: one transaction, the row locked by the read */
    for (;;) {
        rc = simple(p, "BEGIN");
        if (!rc) rc = run(p, "rf", 1, vals, lens, fmts, &rows);
        if (!rc && !rows) rc = RDKV_ENOTFOUND;
        if (!rc) rc = run(p, uname, 2, vals, lens, fmts, &rows);
        if (!rc)
            rc = simple(p, "COMMIT");
        else if (rc != RDKV_EUNAVAILABLE)
            simple(p, "ROLLBACK");
        if (rc != RDKV_EABORTED || !peer_retry(st)) return finish(st, rc);
    }
}

static int p_xfer_load(void *p_, uint64_t n, char *err, size_t errcap)
{
    struct pconn *p = p_;
    char sql[256];
    snprintf(sql, sizeof sql,
             "DROP TABLE IF EXISTS accounts; "
             "CREATE TABLE accounts (id bigint PRIMARY KEY, balance bigint NOT NULL); "
             "INSERT INTO accounts SELECT g, %d FROM generate_series(0, %" PRIu64 ") g; "
             "ANALYZE accounts",
             XFER_INITIAL, n - 1);
    return exec(p, sql, err, errcap);
}

static int p_xfer_op(void *p_, uint64_t from, uint64_t to, int64_t amount, struct wl_step *st)
{
    struct pconn *p = p_;
    char err[256];
    if (!p->xfer_ready) {
        int rc = prepf(p, 0, err, sizeof err, "xr", "%s",
                       "SELECT id, balance FROM accounts WHERE id IN ($1, $2) ORDER BY id "
                       "FOR UPDATE");
        if (prepf(p, rc, err, sizeof err, "xu", "%s",
                  "UPDATE accounts SET balance = $2 WHERE id = $1")) {
            fprintf(stderr, "kvbench ycsb: %s", err);
            return RDKV_EIO;
        }
        p->xfer_ready = true;
    }
    uint64_t id[2] = {from < to ? from : to, from < to ? to : from};
    int src = from == id[0] ? 0 : 1;
    char ids[2][24], bals[2][24];
    for (int i = 0; i < 2; i++) snprintf(ids[i], sizeof ids[i], "%" PRIu64, id[i]);
    for (;;) {
        int64_t b[2] = {0, 0};
        int rc = simple(p, "BEGIN ISOLATION LEVEL SERIALIZABLE");
        if (!rc) {
            /* both rows in one statement, locked in id order (as rdkv_txn_get_many and
             * Redis's MGET read both in one request) */
            const char *v[2] = {ids[0], ids[1]};
            PGresult *res = PQexecPrepared(p->c, "xr", 2, v, NULL, NULL, 0);
            if (res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 2) {
                for (int i = 0; i < 2; i++) {
                    int row = strtoull(PQgetvalue(res, i, 0), NULL, 10) == id[0] ? 0 : 1;
                    b[row] = strtoll(PQgetvalue(res, i, 1), NULL, 10);
                }
            } else if (res && PQresultStatus(res) == PGRES_TUPLES_OK) {
                rc = RDKV_ENOTFOUND;
            } else {
                rc = conflict(res)                      ? RDKV_EABORTED
                     : PQstatus(p->c) == CONNECTION_BAD ? RDKV_EUNAVAILABLE
                                                        : RDKV_EIO;
            }
            PQclear(res);
        }
        int64_t m = amount < b[src] ? amount : b[src];
        b[src] -= m;
        b[1 - src] += m;
        for (int i = 0; i < 2 && !rc; i++) {
            snprintf(bals[i], sizeof bals[i], "%" PRId64, b[i]);
            const char *v[2] = {ids[i], bals[i]};
            rc = run(p, "xu", 2, v, NULL, NULL, NULL);
        }
        if (!rc)
            rc = simple(p, "COMMIT");
        else if (rc != RDKV_EUNAVAILABLE)
            simple(p, "ROLLBACK");
        if (rc != RDKV_EABORTED || !peer_retry(st)) return finish(st, rc);
    }
}

static int p_xfer_sum(void *p_, uint64_t n, uint64_t *found, int64_t *total, char *err,
                      size_t errcap)
{
    struct pconn *p = p_;
    char sql[160];
    snprintf(sql, sizeof sql,
             "SELECT count(*), coalesce(sum(balance), 0) FROM accounts WHERE id < %" PRIu64, n);
    PGresult *res = PQexec(p->c, sql);
    if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
        return result(p, res, PGRES_TUPLES_OK, err, errcap) ? RDKV_EIO : RDKV_EPROTO;
    *found = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
    *total = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    PQclear(res);
    return 0;
}

const struct peer_ops peer_pg = {
    .name = "postgres",
    .semantics = "one row per record (field0..N text columns); READ, UPDATE, INSERT (an "
                 "upsert) and SCAN are single statements in autocommit (READ COMMITTED); "
                 "READ-MODIFY-WRITE is SELECT FOR UPDATE + UPDATE in one transaction; TRANSFER "
                 "is a SERIALIZABLE transaction retried on serialization failure (counted as "
                 "aborts)",
    .connect = p_connect,
    .close = p_close,
    .ycsb_load = p_ycsb_load,
    .ycsb_op = p_ycsb_op,
    .xfer_load = p_xfer_load,
    .xfer_op = p_xfer_op,
    .xfer_sum = p_xfer_sum,
};
