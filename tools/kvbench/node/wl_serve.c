/* The workload service (runner.h's node-side protocol): kvbench ycsb and tpcc load, run and
 * check their workloads through it with workers embedded in the node (tools/kvbench/node/bench.h,
 * wl_serve). */
#include "tools/kvbench/node/bench.h"
#include "tools/kvbench/runner.h"

#include "client/embed.h"
#include "server/node.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct wl_svc {
    struct node *n;
    rdkv_node *rn;
    pthread_mutex_t mu; /* one load, run or check at a time */
    struct wl_run *run;
    bool closed;        /* the node is stopping: no new runs */
};

static void reply_status(struct fab_rpc_req *req, int status, struct pack_w *body)
{
    struct pack_w w;
    pack_w_init(&w);
    pack_u32(&w, (uint32_t)status);
    if (body && body->len) {
        uint8_t *p = pack_w_room(&w, body->len);
        if (p) memcpy(p, body->p, body->len);
    }
    if (w.err) fab_rpc_reply(req, RDKV_ENOMEM, NULL, 0);
    else fab_rpc_reply(req, 0, w.p, w.len);
    pack_w_free(&w);
}

/* A session in this node for a load or a check, which retry their conflicts at length. */
static int service_session(struct wl_svc *v, rdkv_session **out)
{
    rdkv_options o;
    rdkv_options_init(&o);
    o.max_retries = 1000;
    return rdkv_session_open(v->rn, &o, out);
}

static int embedded_session(void *arg, const struct wl_place *pl, const rdkv_options *o,
                            rdkv_session **out)
{
    (void)pl;
    struct wl_svc *v = arg;
    return rdkv_session_open(v->rn, o, out);
}

/* str class, bytes cfg: shared head of LOAD and CHECK. */
static int cls_cfg(struct pack_r *r, const struct wl_class **cls, const uint8_t **cfg,
                   uint32_t *len, char *err, size_t errcap)
{
    char name[16];
    unpack_str(r, name, sizeof name);
    *len = unpack_u32(r);
    *cfg = *len <= WL_MAX_CFG ? pack_r_take(r, *len) : NULL;
    if (!*cfg) {
        snprintf(err, errcap, "malformed request");
        return RDKV_EINVAL;
    }
    if (!(*cls = wl_class_find(name))) {
        snprintf(err, errcap, "no workload named '%s'", name);
        return RDKV_EINVAL;
    }
    return (*cls)->cfg_check(*cfg, *len, err, errcap);
}

static void on_load(struct fab_rpc_req *req, void *arg)
{
    struct wl_svc *v = arg;
    struct pack_r r;
    pack_r_init(&r, fab_rpc_data(req), fab_rpc_len(req));
    char err[256] = "";
    const struct wl_class *cls;
    const uint8_t *cfg;
    uint32_t len;
    int rc = cls_cfg(&r, &cls, &cfg, &len, err, sizeof err);
    uint32_t part = unpack_u32(&r), nparts = unpack_u32(&r);
    if (!rc && (!unpack_done(&r) || !nparts || part >= nparts)) {
        rc = RDKV_EINVAL;
        snprintf(err, sizeof err, "malformed request");
    }
    if (!rc && pthread_mutex_trylock(&v->mu)) {
        rc = RDKV_EBUSY;
        snprintf(err, sizeof err, "this node is already running a workload");
    } else if (!rc) {
        rdkv_session *s;
        rc = v->run ? RDKV_EBUSY : service_session(v, &s);
        if (!rc) {
            rc = cls->load(s, cfg, len, part, nparts, err, sizeof err);
            rdkv_session_close(s);
        } else if (!err[0]) {
            snprintf(err, sizeof err, "%s", v->run ? "a run is in progress" : rdkv_strerror(rc));
        }
        pthread_mutex_unlock(&v->mu);
    }
    struct pack_w w;
    pack_w_init(&w);
    pack_str(&w, err);
    reply_status(req, rc, &w);
    pack_w_free(&w);
}

static void on_start(struct fab_rpc_req *req, void *arg)
{
    struct wl_svc *v = arg;
    struct wl_run_req q;
    char err[256] = "";
    int rc = wl_run_req_unpack(&q, fab_rpc_data(req), fab_rpc_len(req));
    if (rc) snprintf(err, sizeof err, "malformed run request");
    if (!rc && q.node != (int32_t)node_id(v->n)) {
        rc = RDKV_EINVAL;
        snprintf(err, sizeof err, "the run request is for node %d", q.node);
    }
    if (!rc) {
        pthread_mutex_lock(&v->mu);
        if (v->run || v->closed) {
            rc = v->closed ? RDKV_ESHUTDOWN : RDKV_EBUSY;
            snprintf(err, sizeof err, "%s", v->closed ? "the node is stopping"
                                                       : "a run is already in progress on this node");
        } else {
            rc = wl_run_start(&q, embedded_session, v, &v->run, err, sizeof err);
        }
        pthread_mutex_unlock(&v->mu);
    }
    free(q.cfg);
    struct pack_w w;
    pack_w_init(&w);
    pack_str(&w, err);
    reply_status(req, rc, &w);
    pack_w_free(&w);
}

static void on_poll(struct fab_rpc_req *req, void *arg)
{
    struct wl_svc *v = arg;
    pthread_mutex_lock(&v->mu);
    if (!v->run) {
        pthread_mutex_unlock(&v->mu);
        reply_status(req, RDKV_ENOTFOUND, NULL);
        return;
    }
    struct wl_stats *iv = malloc(2 * sizeof *iv);
    if (!iv) {
        pthread_mutex_unlock(&v->mu);
        reply_status(req, RDKV_ENOMEM, NULL);
        return;
    }
    bool done;
    wl_run_poll(v->run, &iv[0], &done);
    char err[160] = "";
    int rc = 0;
    if (done) {
        rc = wl_run_finish(v->run, &iv[1], err, sizeof err);
        v->run = NULL;
    }
    pthread_mutex_unlock(&v->mu);
    struct pack_w w;
    pack_w_init(&w);
    pack_u8(&w, done);
    wl_stats_pack(&iv[0], &w);
    if (done) {
        wl_stats_pack(&iv[1], &w);
        pack_u32(&w, (uint32_t)rc);
        pack_str(&w, err);
    }
    free(iv);
    reply_status(req, 0, &w);
    pack_w_free(&w);
}

static void on_stop(struct fab_rpc_req *req, void *arg)
{
    struct wl_svc *v = arg;
    pthread_mutex_lock(&v->mu);
    if (v->run) wl_run_stop(v->run);
    pthread_mutex_unlock(&v->mu);
    reply_status(req, 0, NULL);
}

static void on_check(struct fab_rpc_req *req, void *arg)
{
    struct wl_svc *v = arg;
    struct pack_r r;
    pack_r_init(&r, fab_rpc_data(req), fab_rpc_len(req));
    char err[256] = "";
    const struct wl_class *cls;
    const uint8_t *cfg;
    uint32_t len;
    int rc = cls_cfg(&r, &cls, &cfg, &len, err, sizeof err);
    uint32_t part = unpack_u32(&r);
    if (!rc && !unpack_done(&r)) rc = RDKV_EINVAL;
    if (!rc && !cls->check) {
        rc = RDKV_ENOTSUP;
        snprintf(err, sizeof err, "workload %s has no checks", cls->name);
    }
    if (!rc && part >= cls->check_parts(cfg, len)) {
        rc = RDKV_EINVAL;
        snprintf(err, sizeof err, "workload %s's check has no part %u", cls->name, part);
    }
    struct wl_check found;
    wl_check_init(&found);
    if (!rc) {
        rdkv_session *s;
        if (!(rc = service_session(v, &s))) {
            rc = cls->check(s, cfg, len, part, &found);
            rdkv_session_close(s);
            if (rc) snprintf(err, sizeof err, "the check could not run: %s", rdkv_strerror(rc));
        }
    }
    struct pack_w w;
    pack_w_init(&w);
    if (rc) pack_str(&w, err);
    else wl_check_pack(&found, &w);
    reply_status(req, rc, &w);
    pack_w_free(&w);
}

static struct wl_svc *the_svc; /* the process's one service (kvserver runs one node) */

void wl_serve_stop(void)
{
    struct wl_svc *v = the_svc;
    if (!v) return;
    pthread_mutex_lock(&v->mu);
    if (v->run) { /* a run still going: its workers hold sessions of the node */
        wl_run_stop(v->run);
        struct wl_stats *st = malloc(sizeof *st);
        char err[64];
        if (st) wl_run_finish(v->run, st, err, sizeof err);
        free(st);
        v->run = NULL;
    }
    v->closed = true;
    pthread_mutex_unlock(&v->mu);
}

int wl_serve(struct node *n)
{
    struct wl_svc *v = calloc(1, sizeof *v);
    if (!v) return RDKV_ENOMEM;
    v->n = n;
    v->rn = rdkv_node_adopt(n);
    if (!v->rn) {
        free(v);
        return RDKV_ENOMEM;
    }
    pthread_mutex_init(&v->mu, NULL);
    the_svc = v; /* lives as long as the process */
    struct fabric *f = node_fabric(n);
    int rc;
    if ((rc = fab_rpc_register(f, KV_RPC_WL_LOAD, on_load, v, 0)) ||
        (rc = fab_rpc_register(f, KV_RPC_WL_START, on_start, v, 0)) ||
        (rc = fab_rpc_register(f, KV_RPC_WL_POLL, on_poll, v, 0)) ||
        (rc = fab_rpc_register(f, KV_RPC_WL_STOP, on_stop, v, 0)) ||
        (rc = fab_rpc_register(f, KV_RPC_WL_CHECK, on_check, v, 0)))
        return rc;
    return 0; /* lives as long as the process */
}
