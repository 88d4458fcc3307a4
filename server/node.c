/* One rdkv node: opens the fabric, the store, the range-lock service and the transaction layer,
 * serves status and remote sessions, and watches its peers with heartbeats so that operations
 * needing a dead peer fail fast with RDKV_EUNAVAILABLE instead of hanging. */
#include "server/node.h"
#include "server/metrics.h"
#include "server/replica.h"

#include "locks/range/range.h"
#include "server/proto.h"
#include "server/session.h"
#include "storage/ckpt.h"
#include "storage/wal.h"

#include "common/clock.h"
#include "common/json.h"
#include "common/log.h"
#include "common/metrics.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct node {
    struct node_opts o;
    struct cluster_config cc;
    struct fabric *f;
    struct store *st;
    struct range_server *rs;
    struct trad_mgr *trad;
    struct txn_env *txn;
    struct session_svc *sessions;
    struct wal *wal;     /* the redo log (--data-dir), or NULL: in memory */
    struct replica *repl; /* the replica configuration (ZooKeeper), or NULL: replicas 1 */
    /* the checkpointer (--data-dir with --checkpoint-every) */
    pthread_t ckpt_thr;
    bool ckpt_running;
    pthread_mutex_t ckpt_mu;
    pthread_cond_t ckpt_cv;
    bool ckpt_stop;
    unsigned ckpt_written;      /* checkpoints this process wrote (each carries the layer's
                                   state), ... */
    uint32_t ckpt_loaded;       /* ... and the format of the one it started from (0: none) */
    bool ckpt_busy;             /* one is being written (status; atomic) */
    struct txn_recovery *recov; /* what the replay found of 2PCs, until txn_env_recover */
    int64_t start_ns;
    struct metrics_http *metrics; /* --metrics HOST:PORT, or NULL */
    /* the peer watcher */
    pthread_t watcher;
    bool watching;
    pthread_mutex_t wmu;
    pthread_cond_t wcv;
    bool wstop;
    uint32_t *misses;
    int64_t *last_seen;
};

/* ------------------------------------------------------------------------------------------ */
/* Benchmark services a node was not started for (--bench) */

static void bench_off_handler(struct fab_rpc_req *req, void *arg)
{
    (void)arg;
    fab_rpc_reply(req, RDKV_ENOTSUP, NODE_BENCH_OFF, sizeof NODE_BENCH_OFF - 1);
}

static void node_refuse_rpc(struct node *n, uint16_t type)
{
    fab_rpc_register(n->f, type, bench_off_handler, NULL, FAB_RPC_INLINE);
}

/* ------------------------------------------------------------------------------------------ */
/* Status. */

/* What the metrics add to the process's counters (server/metrics.h). */
static void node_gauges(void *arg, struct metrics_gauges *g)
{
    struct node *n = arg;
    struct store_stats ss;
    store_stats(n->st, &ss);
    const struct txn_cfg *tc = txn_env_cfg(n->txn);
    g->node = fab_node_id(n->f);
    g->version = NODE_VERSION;
    g->row_lock = tc->row_lock;
    g->range_lock = tc->range_lock;
    g->conflict = txn_conflict_name(tc->conflict);
    g->transport = fab_transport_name(fab_transport_of(n->f));
    g->uptime_ns = clock_now_ns() - n->start_ns;
    g->rows = ss.rows;
    g->sessions = session_count(n->sessions);
    g->arena_bytes = fab_arena_size(n->f);
    g->heap_bytes = ss.heap_bytes;
    g->heap_used = ss.heap_used;
}

const char *node_metrics_address(const struct node *n)
{
    return n->metrics ? metrics_http_address(n->metrics) : NULL;
}

/* The status reply (KV_RPC_STATUS; its fields: docs/architecture.md, "Status"). */
char *node_status_json(struct node *n)
{
    struct fabric *f = n->f;
    struct store_stats ss;
    store_stats(n->st, &ss);
    struct txn_fence_stats fs;
    txn_env_fence_stats(n->txn, &fs);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return NULL;
    const struct cluster_node *me = &n->cc.nodes[fab_node_id(f)];
    char addr[300];
    snprintf(addr, sizeof addr, "%s:%u", me->host, me->port);
    struct json j;
    json_init(&j, m, false);
    json_obj_begin(&j);
    json_kv_u64(&j, "node", fab_node_id(f));
    json_kv_str(&j, "address", addr);
    json_kv_u64(&j, "nodes", fab_num_nodes(f));
    json_kv_str(&j, "transport", fab_transport_name(fab_transport_of(f)));
    json_kv_u64(&j, "arena_bytes", fab_arena_size(f));
    json_kv_i64(&j, "uptime_ns", clock_now_ns() - n->start_ns);
    json_kv_i64(&j, "cpu_ns", clock_process_cpu_ns());
    json_kv_i64(&j, "pid", getpid());
    json_kv_str(&j, "version", NODE_VERSION);
    json_kv_u64(&j, "rows", ss.rows);
    json_kv_u64(&j, "heap_bytes", ss.heap_bytes);
    json_kv_u64(&j, "heap_used", ss.heap_used);
    json_kv_str(&j, "row_lock", txn_env_cfg(n->txn)->row_lock);
    json_kv_str(&j, "range_lock", txn_env_cfg(n->txn)->range_lock);
    json_kv_u64(&j, "sessions", session_count(n->sessions));
    if (n->metrics) json_kv_str(&j, "metrics_address", metrics_http_address(n->metrics));
    json_key(&j, "metrics");
    json_obj_begin(&j);
    metrics_write_json(&j);
    json_obj_end(&j);
    json_key(&j, "fence");
    json_obj_begin(&j);
    json_kv_u64(&j, "refused", fs.refused);
    json_kv_u64(&j, "late", fs.late);
    json_kv_u64(&j, "kept", fs.kept);
    json_kv_u64(&j, "resolved", fs.resolved);
    json_kv_u64(&j, "dropped", fs.dropped);
    json_kv_u64(&j, "pending", fs.pending);
    json_kv_u64(&j, "stale", fs.stale);
    json_obj_end(&j);
    json_key(&j, "prepared");
    json_obj_begin(&j);
    json_kv_u64(&j, "kept", fs.prepared);
    json_kv_u64(&j, "bytes", fs.prepared_bytes);
    json_kv_u64(&j, "refused", fs.prepared_refused);
    json_kv_u64(&j, "indoubt_committed", fs.indoubt_committed);
    json_kv_u64(&j, "indoubt_dropped", fs.indoubt_dropped);
    json_kv_u64(&j, "holds_kept", fs.kept_for);
    json_kv_u64(&j, "holds_freed", fs.freed_for);
    json_obj_end(&j);
    json_key(&j, "decisions");
    json_obj_begin(&j);
    json_kv_u64(&j, "pending", fs.decisions_pending);
    json_obj_end(&j);
    json_key(&j, "checkpoints");
    json_obj_begin(&j);
    json_kv_u64(&j, "written", __atomic_load_n(&n->ckpt_written, __ATOMIC_RELAXED));
    json_kv_i64(&j, "busy", (int)__atomic_load_n(&n->ckpt_busy, __ATOMIC_RELAXED));
    json_obj_end(&j);
    replica_status_json(n->repl, &n->cc, &j);
    json_key(&j, "peers");
    json_arr_begin(&j);
    for (unsigned i = 0; i < n->cc.n; i++) {
        const char *state = i == fab_node_id(f) ? "self"
                            : txn_env_is_down(n->txn, (uint16_t)i) ? "down"
                                                                   : "up";
        snprintf(addr, sizeof addr, "%s:%u", n->cc.nodes[i].host, n->cc.nodes[i].port);
        json_obj_begin(&j);
        json_kv_u64(&j, "node", i);
        json_kv_str(&j, "address", addr);
        json_kv_str(&j, "state", state);
        json_obj_end(&j);
    }
    json_arr_end(&j);
    json_obj_end(&j);
    if (fclose(m)) {
        free(buf);
        return NULL;
    }
    return buf;
}

static uint64_t json_find_u64(const char *js, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(js, pat);
    return p ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

/* The cluster's status, gathered by this node: each node's status reply (docs/architecture.md,
 * "Status"), or its error. */
char *node_cluster_status_json(struct node *n, struct fab_ctx *c)
{
    struct fabric *f = node_fabric(n);
    const struct cluster_config *cc = fab_cluster(f);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return NULL;
    struct json j;
    json_init(&j, m, false);
    json_obj_begin(&j);
    json_kv_u64(&j, "coordinator", node_id(n));
    json_key(&j, "nodes");
    json_arr_begin(&j);
    struct fab_buf resp = {0};
    for (unsigned i = 0; i < cc->n; i++) {
        char *js = NULL;
        int rc = 0;
        if (i == node_id(n)) {
            js = node_status_json(n);
            if (!js) rc = RDKV_ENOMEM;
        } else if (txn_env_is_down(node_txn(n), (uint16_t)i)) {
            rc = RDKV_EUNAVAILABLE;
        } else {
            rc = fab_rpc_call(c, (uint16_t)i, KV_RPC_STATUS, NULL, 0, &resp,
                              NS_PER_S);
            if (!rc && (js = malloc(resp.len + 1))) {
                memcpy(js, resp.data, resp.len);
                js[resp.len] = 0;
                if (resp.len < 2 || js[0] != '{' || js[resp.len - 1] != '}' ||
                    memchr(js, 0, resp.len)) {
                    free(js);
                    js = NULL;
                    rc = RDKV_EPROTO;
                }
            } else if (!rc) {
                rc = RDKV_ENOMEM;
            }
        }
        char addr[300];
        snprintf(addr, sizeof addr, "%s:%u", cc->nodes[i].host, cc->nodes[i].port);
        json_obj_begin(&j);
        json_kv_u64(&j, "node", i);
        json_kv_str(&j, "address", addr);
        json_kv_str(&j, "state", rc ? "down" : "up");
        if (rc) {
            json_kv_str(&j, "error", rdkv_strerror(rc));
        } else {
            json_kv_u64(&j, "rows", json_find_u64(js, "rows"));
            json_kv_u64(&j, "heap_bytes", json_find_u64(js, "heap_bytes"));
            json_kv_u64(&j, "heap_used", json_find_u64(js, "heap_used"));
            json_key(&j, "status");
            json_raw(&j, js, strlen(js)); /* (a peer's reply: an object, checked above) */
        }
        json_obj_end(&j);
        free(js);
    }
    fab_buf_free(&resp);
    json_arr_end(&j);
    json_obj_end(&j);
    if (fclose(m)) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* The sessions' view of it (struct session_host). */
static char *status_of(void *arg, struct fab_ctx *c) { return node_cluster_status_json(arg, c); }

static void status_handler(struct fab_rpc_req *req, void *arg)
{
    struct node *n = arg;
    if (!txn_env_enter(n->txn)) {
        fab_rpc_reply(req, RDKV_ESHUTDOWN, NULL, 0);
        return;
    }
    char *js = node_status_json(n);
    txn_env_leave(n->txn);
    if (!js) {
        fab_rpc_reply(req, RDKV_ENOMEM, NULL, 0);
        return;
    }
    fab_rpc_reply(req, 0, js, strlen(js));
    free(js);
}

/* ------------------------------------------------------------------------------------------ */
/* The peer watcher: an echo to every peer each period; a peer that misses heartbeat_misses in a
 * row is down (operations needing it fail at once) until it answers again. */

static void *watch_main(void *arg)
{
    struct node *n = arg;
    struct fab_ctx *c;
    if (fab_ctx_create(n->f, &c)) {
        log_error("peer watcher: cannot create a fabric context; peers are not watched");
        return NULL;
    }
    struct fab_buf resp = {0};
    uint16_t me = fab_node_id(n->f);
    for (;;) {
        int64_t round = clock_now_ns();
        for (unsigned p = 0; p < n->cc.n; p++) {
            if (p == me) continue;
            int rc = fab_rpc_call(c, (uint16_t)p, FAB_RPC_ECHO, "hb", 2, &resp,
                                  4 * n->o.heartbeat_ns);
            if (rc == 0) {
                n->last_seen[p] = clock_now_ns();
                if (n->misses[p] >= n->o.heartbeat_misses)
                    log_info("peer node %u answers again: up", p);
                n->misses[p] = 0;
                txn_env_set_down(n->txn, (uint16_t)p, false);
            } else if (++n->misses[p] == n->o.heartbeat_misses) {
                /* (a peer never seen is still starting: node_wait_peers speaks for it) */
                if (n->last_seen[p])
                    log_warn("peer node %u at %s:%u missed %u heartbeats (%s): down", p,
                             n->cc.nodes[p].host, n->cc.nodes[p].port, n->misses[p],
                             rdkv_strerror(rc));
                txn_env_set_down(n->txn, (uint16_t)p, true);
                txn_env_peer_lost(n->txn, (uint16_t)p);
            }
        }
        pthread_mutex_lock(&n->wmu);
        int64_t until = round + n->o.heartbeat_ns;
        while (!n->wstop && clock_now_ns() < until) {
            struct timespec ts = clock_ts(until);
            pthread_cond_timedwait(&n->wcv, &n->wmu, &ts);
        }
        bool stop = n->wstop;
        pthread_mutex_unlock(&n->wmu);
        if (stop) break;
    }
    fab_buf_free(&resp);
    fab_ctx_destroy(c);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* The redo log's replay: each COMMIT's writes, in LSN order, into the empty store. */

struct replay {
    struct store *st;
    uint64_t commits, writes, lsn;
    uint64_t from;  /* the loaded checkpoint's replay LSN: older records are in it (0: none) */
    uint64_t txn_from; /* ... and for two-phase commits' records: its state holds what the older
                          ones said (0: a checkpoint without one, or none: every record) */
    uint64_t first; /* the first record's LSN (0: none yet) */
    struct txn_recovery *tr; /* the two-phase commits' records (txn.h) */
};

static int replay_write(void *arg, const struct wal_write *w)
{
    struct replay *r = arg;
    r->writes++;
    return store_apply(r->st, w->op == WAL_OP_DEL, w->key, w->klen, w->val, w->vlen);
}

static int replay_rec(void *arg, const struct wal_rec *rec)
{
    struct replay *r = arg;
    r->lsn = rec->lsn;
    if (!r->first) r->first = rec->lsn;
    /* the two-phase commits' records from where the checkpoint's state leaves off (every one
     * without it: a PREPARE older than the checkpoint may still be in doubt); a COMMIT's writes
     * only from the checkpoint's replay LSN on */
    int rc = rec->lsn >= r->txn_from ? txn_recovery_rec(r->tr, rec) : 0;
    if (rc || rec->type != WAL_COMMIT || rec->lsn < r->from) return rc;
    r->commits++;
    return wal_writes_unpack(rec->payload, rec->len, replay_write, r);
}

/* ---------------------------------------------------------------------------------------------
 * Checkpoints (docs/storage.md, "Checkpoints"): loaded before the log is replayed, written by a
 * thread of their own once the log grew --checkpoint-every bytes, and the log cut behind the
 * older of the two kept (a damaged newest one falls back to it, which then needs its log). */

/* Loads the newest valid checkpoint of the data dir into the empty store: its info (replay LSN,
 * format, the state it carries: the caller frees info->state); info->replay_lsn is 0 when there
 * is none. */
static int ckpt_restore(struct node *n, struct ckpt_info *info, char *err, size_t errcap)
{
    char why[1024] = "";
    int64_t t0 = clock_now_ns();
    memset(info, 0, sizeof *info);
    int rc = ckpt_load(n->st, n->o.data_dir, (uint16_t)n->o.node, n->cc.fingerprint, info, why,
                       sizeof why);
    if (rc == RDKV_ENOTFOUND) {
        memset(info, 0, sizeof *info);
        return 0;
    }
    if (rc) {
        snprintf(err, errcap, "cannot load a checkpoint from %s: %s", n->o.data_dir, why);
        return rc;
    }
    if (info->skipped) log_warn("checkpoint: the newest was refused (%s); loaded the older", why);
    fprintf(stderr, "kvserver: checkpoint %s: %llu rows loaded in %.2f s (replay from LSN %llu)\n",
            info->path, (unsigned long long)info->rows, (double)(clock_now_ns() - t0) / 1e9,
            (unsigned long long)info->replay_lsn);
    n->ckpt_loaded = info->version;
    return 0;
}

/* One checkpoint (docs/storage.md, "In the node"): its replay LSN L first -- once every record
 * below it is applied in memory (wal_checkpoint_lsn) and durable -- then the transaction layer's
 * state and the rows, then the log behind the older checkpoint kept. */
static int ckpt_take(struct node *n, struct lock_thread *lt, const struct lock_algo *row)
{
    struct ckpt_write_opts co;
    ckpt_write_opts_init(&co);
    co.row_lock = row;
    co.lt = lt;
    struct ckpt_info info;
    char why[512] = "";
    int64_t t0 = clock_now_ns();
    uint64_t lsn = wal_checkpoint_lsn(n->wal);
    /* (the file will say it holds every record below L: they must all be on disk first, or a
     * crash could leave a log that ends before L, whose next records a restart from this
     * checkpoint would skip) */
    int rc = lsn > 1 ? wal_wait(n->wal, lsn - 1) : 0;
    uint8_t *state = NULL;
    size_t slen = 0;
    if (!rc) rc = txn_env_state(n->txn, lsn, &state, &slen);
    co.state = state;
    co.state_len = slen;
    if (!rc)
        rc = ckpt_write(n->st, n->o.data_dir, (uint16_t)n->o.node, n->cc.fingerprint, lsn, &co,
                        &info, why, sizeof why);
    free(state);
    if (rc) {
        log_warn("checkpoint failed (the log is kept whole): %s", why[0] ? why : rdkv_strerror(rc));
        return rc;
    }
    __atomic_add_fetch(&n->ckpt_written, 1, __ATOMIC_RELAXED); /* (status reads it) */
    /* The log is cut behind the older of the two checkpoints kept (so that a damaged newest one
     * can fall back to it): each carries the state of the two-phase commits its log held, in
     * every cluster -- but a checkpoint of the old format carries none, and falling back to one
     * would need the whole log, so while one is kept, only a one-node cluster cuts. */
    bool carried = n->cc.n == 1 || n->ckpt_written >= CKPT_KEEP ||
                   (n->ckpt_written == CKPT_KEEP - 1 && n->ckpt_loaded >= 2);
    uint64_t kept[CKPT_KEEP];
    int k = ckpt_list(n->o.data_dir, kept, CKPT_KEEP);
    int cut = k == CKPT_KEEP && carried ? wal_truncate_before(n->wal, kept[CKPT_KEEP - 1]) : 0;
    fprintf(stderr, "kvserver: checkpoint %s: %llu rows in %.2f s (longest row-lock hold %lld "
            "us, %zu bytes of transaction state); %d log segment(s) dropped\n", info.path,
            (unsigned long long)info.rows, (double)(clock_now_ns() - t0) / 1e9,
            (long long)(info.max_hold_ns / 1000), slen, cut > 0 ? cut : 0);
    return 0;
}

static void *ckpt_main(void *arg)
{
    struct node *n = arg;
    struct fab_ctx *c = NULL;
    struct lock_thread lt;
    const struct lock_algo *row = lock_algo_find(txn_env_cfg(n->txn)->row_lock);
    if (!row || fab_ctx_create(n->f, &c) || lock_thread_init(&lt, c, txn_env_lock_cfg(n->txn))) {
        log_error("checkpointer: cannot start (no fabric context or row lock); the log grows");
        if (c) fab_ctx_destroy(c);
        return NULL;
    }
    struct wal_stats ws;
    wal_stats(n->wal, &ws);
    uint64_t since = ws.bytes;
    pthread_mutex_lock(&n->ckpt_mu);
    while (!n->ckpt_stop) {
        struct timespec until = clock_ts(clock_now_ns() + NS_PER_S);
        pthread_cond_timedwait(&n->ckpt_cv, &n->ckpt_mu, &until);
        if (n->ckpt_stop) break;
        wal_stats(n->wal, &ws);
        if (ws.bytes - since < n->o.checkpoint_every) continue;
        pthread_mutex_unlock(&n->ckpt_mu);
        __atomic_store_n(&n->ckpt_busy, true, __ATOMIC_RELAXED);
        if (ckpt_take(n, &lt, row) == 0) since = ws.bytes;
        __atomic_store_n(&n->ckpt_busy, false, __ATOMIC_RELAXED);
        pthread_mutex_lock(&n->ckpt_mu);
    }
    pthread_mutex_unlock(&n->ckpt_mu);
    lock_thread_fini(&lt);
    fab_ctx_destroy(c);
    return NULL;
}

static void ckpt_start(struct node *n)
{
    pthread_mutex_init(&n->ckpt_mu, NULL);
    clock_cond_init(&n->ckpt_cv);
    n->ckpt_running = pthread_create(&n->ckpt_thr, NULL, ckpt_main, n) == 0;
    if (!n->ckpt_running) log_error("checkpointer: no thread; the log grows without bound");
}

static void ckpt_stop(struct node *n)
{
    if (!n->ckpt_running) return;
    pthread_mutex_lock(&n->ckpt_mu);
    n->ckpt_stop = true;
    pthread_cond_signal(&n->ckpt_cv);
    pthread_mutex_unlock(&n->ckpt_mu);
    pthread_join(n->ckpt_thr, NULL);
    n->ckpt_running = false;
}

/* A number kept in a file of the data directory ("incarnation", "txids"): 0 and *v, or
 * RDKV_ENOTFOUND when there is no such file (or it holds no number). */
static int file_u64_read(const char *dir, const char *name, uint64_t *v)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    unsigned long long x;
    int rc = f && fscanf(f, "%llu", &x) == 1 ? 0 : RDKV_ENOTFOUND;
    if (f) fclose(f);
    if (!rc) *v = x;
    return rc;
}

/* ... made durable: written to a temporary file, synced, renamed over the old one, the
 * directory synced. 0, or an errno. */
static int file_u64_write(const char *dir, const char *name, uint64_t v)
{
    char path[PATH_MAX], tmp[PATH_MAX + 8], buf[32];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int len = snprintf(buf, sizeof buf, "%llu\n", (unsigned long long)v);
    int e = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, buf, (size_t)len) != len || fdatasync(fd)) e = errno ? errno : EIO;
    if (fd >= 0 && close(fd) && !e) e = errno;
    if (!e && rename(tmp, path)) e = errno;
    int dfd = e ? -1 : open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (!e && (dfd < 0 || fsync(dfd))) e = errno ? errno : EIO;
    if (dfd >= 0) close(dfd);
    return e;
}

/* This process's incarnation (fab_opts.incarnation), with a data directory: greater than the
 * one of every earlier start from that directory -- the last is kept in its file "incarnation",
 * made durable before the node talks to anyone -- and than the wall clock's microseconds, so
 * that it also grows when the file is lost with the rest of the data (docs/transactions.md,
 * "Incarnations"). */
static int node_incarnation(const char *dir, uint64_t *out, char *err, size_t errcap)
{
    if (mkdir(dir, 0700) && errno != EEXIST) {
        snprintf(err, errcap, "cannot create %s: %s", dir, strerror(errno));
        return RDKV_EIO;
    }
    uint64_t last = 0, now = clock_wall_us();
    (void)file_u64_read(dir, "incarnation", &last);
    uint64_t inc = now > last ? now : last + 1;
    int e = file_u64_write(dir, "incarnation", inc);
    if (e) {
        snprintf(err, errcap, "cannot record this start's incarnation in %s/incarnation: %s", dir,
                 strerror(e));
        return RDKV_EIO;
    }
    *out = inc;
    return 0;
}

/* Transaction ids (txn_env_set_txids): each process starts at the limit the last one reserved,
 * kept in the data directory's file "txids", and reserves TXID_BLOCK more there (durably)
 * before it hands any out; a directory without the file (new, or its data lost) starts at the
 * wall clock's microseconds. So no two processes of the node hand out one id, whatever the
 * clock says (docs/transactions.md, "The logged commit"). */
static int txids_reserve(void *arg, uint64_t limit)
{
    struct node *n = arg;
    int e = file_u64_write(n->o.data_dir, "txids", limit);
    if (e) log_error("cannot reserve transaction ids in %s/txids: %s", n->o.data_dir, strerror(e));
    return e ? (e == ENOSPC || e == EDQUOT ? RDKV_ENOSPC : RDKV_EIO) : 0;
}

/* replica_set_route's hooks: the transaction layer's route of partition p, and a promotion's
 * take-over of its two-phase commits in flight. */
static void route_txn(void *arg, unsigned p, uint16_t node, struct store *st, const char *name,
                      bool gate)
{
    txn_env_route(arg, p, node, st, name, gate);
}

static int adopt_txn(void *arg, unsigned p, const struct replica_prep *preps, unsigned n,
                     const uint64_t *decided, unsigned nd)
{
    struct txn_adopt_prep *tp = calloc(n ? n : 1, sizeof *tp);
    if (!tp) return RDKV_ENOMEM;
    for (unsigned i = 0; i < n; i++)
        tp[i] = (struct txn_adopt_prep){preps[i].txid, preps[i].coord, preps[i].writes,
                                        preps[i].len};
    int rc = txn_env_adopt(arg, p, tp, n, decided, nd);
    free(tp);
    return rc;
}

static bool held_txn(void *arg, uint64_t txid) { return replica_holds_prepared(arg, txid); }
static bool serving_txn(void *arg) { return replica_serving(arg); }

static int txids_start(struct node *n, char *err, size_t errcap)
{
    uint64_t first;
    if (file_u64_read(n->o.data_dir, "txids", &first)) first = clock_wall_us() & ((1ull << 48) - 1);
    uint64_t limit = first + TXID_BLOCK;
    int rc = txids_reserve(n, limit);
    if (rc) {
        snprintf(err, errcap, "cannot reserve transaction ids in %s/txids: %s", n->o.data_dir,
                 rdkv_strerror(rc));
        return rc;
    }
    txn_env_set_txids(n->txn, first, limit, txids_reserve, n);
    return 0;
}

/* Whether dir holds a redo log segment or a checkpoint: the partition's data. */
static bool holds_data(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return false;
    bool found = false;
    for (struct dirent *e; !found && (e = readdir(d));)
        found = !strncmp(e->d_name, "wal-", 4) || !strncmp(e->d_name, "ckpt-", 5);
    closedir(d);
    return found;
}

/* This node's own writes of a 2PC it decided to commit before it died: installed, and logged
 * as the COMMIT it did not get to write, so that the next replay puts them in their place. */
static int replay_own(void *arg, uint64_t txid, const void *writes, uint32_t len)
{
    struct node *n = arg;
    struct replay r = {.st = n->st};
    int rc = wal_writes_unpack(writes, len, replay_write, &r);
    uint64_t lsn;
    if (!rc) rc = wal_commit(n->wal, WAL_COMMIT, txid, writes, len, &lsn);
    return rc;
}

/* The redo log failed a record the node's memory now disagrees with (or may): the node stops
 * at once, as PostgreSQL's PANIC does, and its restart recovers from the log (docs/storage.md,
 * "Errors"). _exit: nothing of this process's memory is written anywhere on the way out. */
static void log_failed(void *arg, int status, const char *msg)
{
    struct node *n = arg;
    fprintf(stderr, "kvserver: PANIC: node %ld: redo log %s: %s (%s); stopping (exit status %d): a "
            "restart recovers from the log\n", n->o.node, n->o.data_dir, msg,
            rdkv_strerror(status), NODE_EXIT_LOG_FAILED);
    _exit(NODE_EXIT_LOG_FAILED);
}

static int wal_start(struct node *n, char *err, size_t errcap)
{
    struct wal_opts wo;
    wal_opts_init(&wo);
    wo.dir = n->o.data_dir;
    wo.node = (uint16_t)n->o.node;
    wo.cluster_fp = n->cc.fingerprint;
    wo.durability = (enum wal_durability)n->o.durability;
    wo.record_max = WAL_REC_LIMIT; /* a transaction's writes up to the format's limit */
    wo.segment_bytes = n->o.log_segment; /* (0: the log's default) */
    wo.on_fail = log_failed;
    wo.on_fail_arg = n;
    struct replay r = {.st = n->st};
    struct wal_scan_result res;
    char why[512] = "";
    int64_t t0 = clock_now_ns();
    struct ckpt_info ci;
    int rc = ckpt_restore(n, &ci, err, errcap);
    if (rc) return rc;
    r.from = ci.replay_lsn;
    rc = txn_recovery_create((uint16_t)n->o.node, &r.tr);
    if (rc) {
        free(ci.state);
        snprintf(err, errcap, "out of memory");
        return rc;
    }
    if (ci.version >= 2) {
        /* the checkpoint's state of two-phase commits, then the log's records from its LSN */
        r.txn_from = r.from;
        rc = txn_recovery_state(r.tr, ci.state, ci.state_len);
        if (rc) snprintf(err, errcap, "the checkpoint %s carries a transaction state that does "
                         "not decode: %s", ci.path, rdkv_strerror(rc));
    }
    free(ci.state);
    if (rc) {
        txn_recovery_free(r.tr);
        return rc;
    }
    rc = wal_open(&wo, replay_rec, &r, &res, &n->wal, why, sizeof why);
    if (!rc && r.from && res.next_lsn < r.from) {
        /* the checkpoint holds records the log does not: a log cut or damaged after it was
         * written; going on would give new records LSNs the checkpoint says it covers */
        wal_close(n->wal);
        snprintf(why, sizeof why,
                 "the log ends at LSN %llu, but the checkpoint loaded holds every record up to "
                 "LSN %llu: the log's tail is missing (restore the files of %s)",
                 (unsigned long long)res.next_lsn - 1, (unsigned long long)r.from - 1,
                 n->o.data_dir);
        rc = RDKV_EPROTO;
    }
    if (!rc && r.first > (r.from ? r.from : 1)) {
        /* the log was cut behind a checkpoint that is not here: what came before is gone */
        wal_close(n->wal);
        snprintf(why, sizeof why,
                 "the log starts at LSN %llu but %s; the records before it are lost (restore "
                 "the checkpoint files of %s)", (unsigned long long)r.first,
                 r.from ? "the checkpoint loaded replays from an earlier one"
                        : "there is no checkpoint",
                 n->o.data_dir);
        rc = RDKV_EPROTO;
    }
    if (!rc && (rc = txn_recovery_own(r.tr, replay_own, n))) {
        snprintf(why, sizeof why, "installing this node's share of a decided commit: %s",
                 rdkv_strerror(rc));
        wal_close(n->wal);
    }
    if (rc) {
        txn_recovery_free(r.tr);
        /* the scan's errors say where; a replay's (a write that does not decode or fit) not */
        if (!why[0])
            snprintf(why, sizeof why, "replaying the record of LSN %llu: %s",
                     (unsigned long long)r.lsn, rdkv_strerror(rc));
        snprintf(err, errcap, "cannot open the redo log in %s: %s", n->o.data_dir, why);
        n->wal = NULL;
        return rc;
    }
    unsigned indoubt, decisions;
    txn_recovery_counts(r.tr, &indoubt, &decisions);
    fprintf(stderr, "kvserver: redo log %s (durability %s): replayed %llu commits (%llu writes, "
            "LSNs up to %llu) in %.2f s%s; %u in-doubt transactions, %u commit decisions to "
            "deliver\n", n->o.data_dir,
            wal_durability_name((enum wal_durability)n->o.durability),
            (unsigned long long)r.commits, (unsigned long long)r.writes,
            (unsigned long long)res.last_lsn, (double)(clock_now_ns() - t0) / 1e9,
            res.torn ? " after cutting a torn tail" : "", indoubt, decisions);
    n->recov = r.tr; /* installed once the transaction layer runs (txn_env_recover) */
    return 0;
}

int node_start(const struct node_opts *o, struct node **out, char *err, size_t errcap)
{
    struct node *n = calloc(1, sizeof *n);
    if (!n) {
        snprintf(err, errcap, "out of memory");
        return RDKV_ENOMEM;
    }
    n->o = *o;
    n->start_ns = clock_now_ns();
    pthread_mutex_init(&n->wmu, NULL);
    clock_cond_init(&n->wcv);
    char why[512];
    int rc = cluster_config_load(o->config, &n->cc, why, sizeof why);
    if (rc) {
        snprintf(err, errcap, "%s", why);
        free(n);
        return rc;
    }
    if ((unsigned long)o->node >= n->cc.n) {
        snprintf(err, errcap, "node %ld is not in %s (it lists nodes 0..%u)", o->node, o->config,
                 n->cc.n - 1);
        cluster_config_free(&n->cc);
        free(n);
        return RDKV_ECONFIG;
    }
    /* The replica configuration before anything serves: a node that cannot learn it stays
     * down rather than serve a partition it may no longer own. */
    /* replicated with a data directory: the copies keep the log (the transaction layer none) */
    struct wal_opts lo;
    wal_opts_init(&lo);
    lo.dir = o->data_dir;
    lo.durability = (enum wal_durability)o->durability;
    lo.segment_bytes = o->log_segment;
    lo.on_fail = log_failed;
    lo.on_fail_arg = n;
    rc = replica_start(&n->cc, (uint16_t)o->node, o->peer_wait_ns, o->replica_lease_ns,
                       o->data_dir && n->cc.replicas > 1 ? &lo : NULL, &n->repl, why,
                       sizeof why);
    if (!rc && o->data_dir && n->cc.replicas > 1 && !o->checkpoint_every)
        log_warn("node %ld: --checkpoint-every 0: the copies' log in %s/repl is never cut: it "
                 "grows with every commit (docs/replication.md, section 7)", o->node, o->data_dir);
    if (rc) {
        snprintf(err, errcap, "%s", why);
        cluster_config_free(&n->cc);
        free(n);
        return rc;
    }
    enum fab_transport t = FAB_AUTO;
    if (o->transport) fab_transport_parse(o->transport, &t);
    else if (n->cc.transport[0]) fab_transport_parse(n->cc.transport, &t);
    n->o.fab.cluster = &n->cc;
    n->o.fab.node = (uint16_t)o->node;
    n->o.fab.transport = t;
    if (n->o.fab.listen_fd >= 0) fcntl(n->o.fab.listen_fd, F_SETFD, FD_CLOEXEC);
    n->misses = calloc(n->cc.n, sizeof *n->misses);
    n->last_seen = calloc(n->cc.n, sizeof *n->last_seen);
    if (!n->misses || !n->last_seen) {
        snprintf(err, errcap, "out of memory");
        rc = RDKV_ENOMEM;
        goto fail;
    }
    /* (replicated, a node whose data is not there joins empty and is filled from the others) */
    if (o->data_dir && n->cc.replicas == 1 && !o->init && !holds_data(o->data_dir)) {
        /* A partition's data missing must never read as its keys being absent. */
        snprintf(err, errcap,
                 "--data-dir %s holds no redo log or checkpoint: node %ld's data is not there. "
                 "Restore the directory; or, if this node never held data (a new cluster) or its "
                 "data is lost for good, start it once with --init (its keys then read as absent)",
                 o->data_dir, o->node);
        rc = RDKV_ENOTFOUND;
        goto fail;
    }
    if (o->data_dir && (rc = node_incarnation(o->data_dir, &n->o.fab.incarnation, err, errcap)))
        goto fail;
    /* Nobody touches this node's memory before it is what it claims: its log replayed, the rows
     * of its in-doubt transactions locked, its handlers registered (fab_serve, at the end). A
     * peer's one-sided lock or read would otherwise reach rows that are still being replayed or
     * that a recovered transaction is about to lock, and commit over them (durable_torture). */
    n->o.fab.serve_later = true;
    if (n->cc.replicas > 1) {
        /* a commit waits for its backups: on RPC threads, as for a log's sync */
        if (n->o.fab.rpc_threads < NODE_DURABLE_RPC_THREADS)
            n->o.fab.rpc_threads = NODE_DURABLE_RPC_THREADS;
    }
    if ((rc = fab_open(&n->o.fab, &n->f, why, sizeof why))) {
        snprintf(err, errcap, "%s", why);
        goto fail;
    }
    if (n->cc.replicas > 1 && !n->o.store.heap_bytes) {
        /* R copies share the arena: each gets the R-th part of what one store would take */
        n->o.store.heap_bytes = (fab_arena_size(n->f) / 2 / n->cc.replicas) & ~4095ull;
    }
    if ((rc = store_open(n->f, &n->o.store, &n->st, why, sizeof why))) {
        snprintf(err, errcap, "cannot open the store: %s", why);
        goto fail;
    }
    if (o->data_dir && n->cc.replicas == 1 && (rc = wal_start(n, err, errcap))) goto fail;
    if (o->fault_wal && n->wal)
        wal_fault_inject(n->wal,
                         o->fault_wal == 1   ? WAL_FAULT_WRITE
                         : o->fault_wal == 2 ? WAL_FAULT_SYNC
                                             : WAL_FAULT_SYNC_DELAY,
                         o->fault_errno);
    if ((rc = range_server_start(n->f, n->o.txn.lease_ns, &n->rs))) {
        snprintf(err, errcap, "cannot start the range-lock service: %s", rdkv_strerror(rc));
        goto fail;
    }
    if ((rc = replica_attach(n->repl, n->f, n->st, &n->o.store, why, sizeof why))) {
        snprintf(err, errcap, "%s", why);
        goto fail;
    }
    n->o.txn.ship = replica_ship_fn(n->repl); /* (NULL: no backups) */
    n->o.txn.ship_async = replica_ship_async_fn(n->repl);
    n->o.txn.installed = replica_installed_fn(n->repl);
    n->o.txn.ship_rec = replica_ship_rec_fn(n->repl);
    n->o.txn.held = n->repl && n->o.txn.ship_rec ? held_txn : NULL;
    n->o.txn.serving = n->repl && n->o.txn.ship_rec ? serving_txn : NULL;
    n->o.txn.ship_arg = n->repl;
    n->o.txn.wal = n->wal; /* (NULL without --data-dir) */
    if ((rc = txn_env_open(n->f, n->st, n->rs, &n->o.txn, &n->txn, why, sizeof why))) {
        snprintf(err, errcap, "%s", why);
        goto fail;
    }
    /* (partitions follow the configuration) */
    replica_set_rows(n->repl, lock_algo_find(txn_env_cfg(n->txn)->row_lock),
                     txn_env_lock_cfg(n->txn));
    replica_set_route(n->repl, route_txn, adopt_txn, n->txn);
    replica_set_checkpoint_every(n->repl, n->o.checkpoint_every);
    if (o->data_dir && (rc = txids_start(n, err, errcap))) goto fail;
    if (n->recov) {
        struct txn_recovery *tr = n->recov;
        n->recov = NULL;
        if ((rc = txn_env_recover(n->txn, tr, why, sizeof why))) {
            snprintf(err, errcap, "recovering from the redo log: %s", why);
            goto fail;
        }
    }
    if (n->wal && n->o.checkpoint_every) ckpt_start(n);
    struct session_host host = {n->f, n->txn, (uint16_t)n->o.node, status_of, n};
    if ((rc = session_svc_start(&host, &n->o.sessions, &n->sessions))) {
        snprintf(err, errcap, "cannot start the session service: %s", rdkv_strerror(rc));
        goto fail;
    }
    fab_rpc_register(n->f, KV_RPC_STATUS, status_handler, n, 0);
    /* kvbench's services are not the node's: with --bench the program that started it registers
     * them (kvserver, daemon_run); without, the whole block is refused with a reason */
    if (!o->bench)
        for (unsigned type = KV_RPC_BENCH_FIRST; type <= KV_RPC_BENCH_LAST; type++)
            node_refuse_rpc(n, (uint16_t)type);
    n->trad = lock_trad_serve(n->f, n->o.txn.lease_ns); /* the RPC lock manager baseline */
    if (n->cc.n > 1) {
        if (pthread_create(&n->watcher, NULL, watch_main, n)) {
            snprintf(err, errcap, "cannot start the peer watcher");
            rc = RDKV_ENOMEM;
            goto fail;
        }
        n->watching = true;
    }
    if (o->metrics_off) metrics_enable(false);
    if (o->metrics && (rc = metrics_http_start(o->metrics, node_gauges, n, &n->metrics, err,
                                               errcap)))
        goto fail;
    fab_serve(n->f);
    replica_serve(n->repl); /* (a node back with an empty memory asks to join) */
    *out = n;
    return 0;
fail:
    node_stop(n);
    return rc;
}

int node_wait_peers(struct node *n, int64_t wait_ns, bool (*stop)(void *), void *arg, char *err,
                    size_t errcap)
{
    struct fab_ctx *c;
    if (fab_ctx_create(n->f, &c)) {
        snprintf(err, errcap, "cannot create a fabric context");
        return RDKV_ENOMEM;
    }
    int64_t deadline = clock_now_ns() + wait_ns;
    struct fab_buf resp = {0};
    int rc = 0;
    for (unsigned p = 0; p < n->cc.n && rc == 0; p++) {
        if (p == fab_node_id(n->f)) continue;
        /* a replicated cluster serves without its removed members: one dead for good must not
         * keep another from starting (docs/replication.md, section 8) */
        if (n->repl && !replica_is_member(n->repl, (uint16_t)p)) continue;
        /* a host name that exists nowhere will not start answering: say so now */
        char why[CLUSTER_HOST_MAX + 80];
        if (fab_host_check(n->cc.nodes[p].host, why, sizeof why) == RDKV_ENOHOST) {
            snprintf(err, errcap, "peer node %u in %s: %s", p, n->o.config, why);
            rc = RDKV_ENOHOST;
            break;
        }
        for (;;) {
            int64_t left = deadline - clock_now_ns();
            int r = fab_rpc_call(c, (uint16_t)p, FAB_RPC_ECHO, "hi", 2, &resp,
                                 left > NS_PER_S ? NS_PER_S : (left > 0 ? left : 1));
            if (r == 0) break;
            if (stop && stop(arg)) {
                rc = RDKV_ESHUTDOWN;
                break;
            }
            if (clock_now_ns() >= deadline) {
                snprintf(err, errcap, "peer node %u at %s:%u is unreachable (%s; waited %.0f s)",
                         p, n->cc.nodes[p].host, n->cc.nodes[p].port, rdkv_strerror(r),
                         (double)wait_ns / 1e9);
                rc = RDKV_EUNAVAILABLE;
                break;
            }
            clock_sleep_ns(100 * NS_PER_MS); /* the peer may still be starting */
        }
    }
    fab_buf_free(&resp);
    fab_ctx_destroy(c);
    return rc;
}

void node_stop(struct node *n)
{
    if (!n) return;
    metrics_http_stop(n->metrics); /* (it reads the store and the sessions) */
    replica_detach(n->repl); /* ships give up, backups' copies close */
    if (n->watching) {
        pthread_mutex_lock(&n->wmu);
        n->wstop = true;
        pthread_cond_signal(&n->wcv);
        pthread_mutex_unlock(&n->wmu);
        pthread_join(n->watcher, NULL);
    }
    if (n->sessions) session_svc_stop(n->sessions);
    ckpt_stop(n);
    /* Nothing of this node may touch the store once it is closed, and the store must close
     * while the arena is still mapped (fab_close unmaps it): first the RPC handlers that use
     * it are turned away, then the store closes, then the fabric. */
    txn_env_quiesce(n->txn);
    if (n->trad) lock_trad_stop(n->trad);
    if (n->rs) range_server_stop(n->rs);
    if (n->st) store_close(n->st);
    n->st = NULL;
    replica_release(n->repl); /* (its ships' contexts, before the fabric goes) */
    if (n->f) fab_close(n->f);
    if (n->trad) lock_trad_free(n->trad);
    if (n->sessions) session_svc_free(n->sessions);
    txn_env_close(n->txn);
    txn_recovery_free(n->recov);
    if (n->wal && wal_close(n->wal)) log_error("the redo log had failed: see above");
    if (n->rs) range_server_free(n->rs);
    free(n->misses);
    free(n->last_seen);
    replica_stop(n->repl);
    cluster_config_free(&n->cc);
    pthread_mutex_destroy(&n->wmu);
    pthread_cond_destroy(&n->wcv);
    free(n);
}

struct fabric *node_fabric(struct node *n) { return n->f; }
struct txn_env *node_txn(struct node *n) { return n->txn; }
struct range_server *node_range_server(struct node *n) { return n->rs; }
uint16_t node_id(const struct node *n) { return (uint16_t)n->o.node; }
void node_describe_replication(struct node *n, char *buf, size_t cap)
{
    replica_describe(n->repl, &n->cc, buf, cap);
}
