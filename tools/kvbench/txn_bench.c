/* kvbench txn: the store's single-transaction costs, as the store issue states its targets:
 * a read-only transaction on one local key, on one remote key (uncontended, location cached),
 * and a read-write transaction on two partitions. Workers run inside node 0 (embedded
 * sessions); the output gives latency percentiles and the fabric round trips each transaction
 * took, split into locks + reads and the commit's own messages. */
#include "tools/kvbench/bench.h"
#include "tools/kvbench/opts.h"

#include "tools/kvbench/node/bench.h"

#include "common/clock.h"
#include "common/parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char txn_head[] =
    "usage: kvbench txn [--nodes N | --config FILE] [options]\n"
    "\n"
    "Measures single transactions run by worker threads inside node 0:\n"
    "  ro-local   read-only, one key of node 0 (CPU atomics and loads only)\n"
    "  ro-remote  read-only, one key of node 1 (row lock, one-sided READ, release)\n"
    "  rw-2part   reads for update and writes one key of node 0 and one of node 1, then\n"
    "             two-phase commit (node 0 coordinates and takes part)\n"
    "  insert-prefix  each transaction inserts the run's next fresh key and reads a random key\n"
    "             of its round (--keys keys: some present, some not yet); the keys share their\n"
    "             first 8 bytes: \"session:\" <i> <run>, in hex\n"
    "  insert-spread  the same with the same bytes reordered, <i> \"session:\" <run>, so that\n"
    "             the keys differ in their first 8 bytes (both kinds together print the ratio)\n"
    "Also the fabric's READ round trip of a node-1 row in the same run, for comparison.\n"
    "\n";

/* kvbench txn's options (txn_opts). */
struct txn_cli {
    struct bench_common co;
    bool kinds[BENCH_TXN_KINDS];
    unsigned rounds;
    double warmup;
    struct bench_txn_req q;
};

static const char *const kind_names[BENCH_TXN_KINDS] = {"ro-local", "ro-remote", "rw-2part",
                                                        "insert-prefix", "insert-spread"};

static int opt_kind(void *o, const char *v)
{
    struct txn_cli *c = o;
    memset(c->kinds, 0, sizeof c->kinds);
    char *dup = strdup(v), *save = NULL;
    int bad = !dup;
    for (char *t = dup ? strtok_r(dup, ",", &save) : NULL; t && !bad; t = strtok_r(NULL, ",", &save)) {
        bool ok = false;
        for (int k = 0; k < BENCH_TXN_KINDS; k++)
            if (!strcmp(t, kind_names[k]) ||
                !strcmp(t, k < BENCH_TXN_INSERT_PREFIX ? "all" : "insert"))
                c->kinds[k] = ok = true;
        bad = !ok;
    }
    free(dup);
    return bad;
}

#define T struct txn_cli
static const struct bench_opt txn_opts[] = {
    {"--kind", BOPT_FN,
     "  --kind K[,K...]   ro-local, ro-remote, rw-2part, all (those three; the default),\n"
     "                    insert-prefix, insert-spread, or insert (those two)\n",
     0, 0, 0, 0,
     "--kind must be ro-local, ro-remote, rw-2part, all, insert-prefix, insert-spread or insert "
     "(got '%s')", opt_kind, NULL},
    {"--threads", BOPT_UINT, "  --threads N       worker threads in node 0 (default 1)\n",
     offsetof(T, q.threads), 0, 1, BENCH_MAX_THREADS, "--threads must be 1..64 (got '%s')", NULL, NULL},
    {"--tasks", BOPT_UINT,
     "  --tasks K         workers per thread, each a task sharing its thread's fabric context\n"
     "                    (default 1: the thread is the worker)\n",
     offsetof(T, q.tasks), 0, 1, BENCH_MAX_TASKS, "--tasks must be 1..256 (got '%s')", NULL, NULL},
    {"--keys", BOPT_UINT, "  --keys N          keys per node (default 1000)\n",
     offsetof(T, q.keys_per_node), 0, 1, 1000000, "--keys must be 1..1000000 (got '%s')", NULL, NULL},
    {"--value-size", BOPT_UINT, "  --value-size B    bytes per value (default 100)\n",
     offsetof(T, q.value_size), 0, 0, 65536, "--value-size must be 0..65536 (got '%s')", NULL, NULL},
    {"--seconds", BOPT_COMMON, "  --seconds S       measured time per kind (default 3)\n", 0, 0,
     0, 0, NULL, NULL, NULL},
    {"--rounds", BOPT_UINT,
     "  --rounds R        the insert kinds run in R rounds of S/R seconds, alternating\n"
     "                    prefix, spread, spread, prefix, ... (default 4)\n",
     offsetof(T, rounds), 0, 1, 100, "--rounds must be 1..100 (got '%s')", NULL, NULL},
    {"--warmup", BOPT_DOUBLE, "  --warmup S        unmeasured time first (default 0.5)\n",
     offsetof(T, warmup), 0, 0, 600, "bad --warmup '%s'", NULL, NULL},
    {"--nodes", BOPT_COMMON, "  --nodes N         launch N local nodes (default 2; at least 2)\n",
     0, 0, 0, 0, NULL, NULL, NULL},
    {"--config", BOPT_COMMON, "  --config FILE     use a running cluster instead\n", 0, 0, 0, 0,
     NULL, NULL, NULL},
    {"--transport", BOPT_COMMON,
     "  --transport T     soft or verbs, for launched nodes (default soft)\n", 0, 0, 0, 0, NULL,
     NULL, NULL},
    {"--json", BOPT_COMMON, "  --json FILE       also write the results as JSON\n", 0, 0, 0, 0,
     NULL, NULL, NULL},
    BOPT_ROW_HELP("  -h, --help        this text\n"),
};
#undef T
static const struct bench_cmd txn_cmd =
    BENCH_CMD("txn", txn_head, txn_opts, NULL, struct txn_cli);

static void print_res(const char *name, const struct bench_txn_res *r)
{
    double secs = (double)r->elapsed_ns / 1e9;
    double ops = r->ops ? (double)r->ops : 1.0;
    printf("[%s], Operations, %llu\n", name, (unsigned long long)r->ops);
    printf("[%s], Throughput(ops/sec), %.0f\n", name, secs > 0 ? (double)r->ops / secs : 0.0);
    printf("[%s], AverageLatency(us), %.3f\n", name, hist_mean(&r->h) / 1e3);
    printf("[%s], 50thPercentileLatency(us), %.3f\n", name, (double)hist_percentile(&r->h, 50) / 1e3);
    printf("[%s], 99thPercentileLatency(us), %.3f\n", name, (double)hist_percentile(&r->h, 99) / 1e3);
    printf("[%s], 99.9thPercentileLatency(us), %.3f\n", name, (double)hist_percentile(&r->h, 99.9) / 1e3);
    printf("[%s], RoundTripsPerTxn, %.3f\n", name, (double)(r->rt_before_commit + r->rt_commit) / ops);
    printf("[%s], LockAndReadRoundTripsPerTxn, %.3f\n", name, (double)r->rt_before_commit / ops);
    printf("[%s], CommitRoundTripsPerTxn, %.3f\n", name, (double)r->rt_commit / ops);
    printf("[%s], CommitRpcsPerTxn, %.3f\n", name, (double)r->rpc_commit / ops);
    printf("[%s], Aborts, %llu\n", name, (unsigned long long)r->aborts);
    printf("[%s], Errors, %llu\n", name, (unsigned long long)r->errors);
    if (r->read_h.count) {
        printf("[%s], FabricRead50thPercentileLatency(us), %.3f\n", name,
               (double)hist_percentile(&r->read_h, 50) / 1e3);
        printf("[%s], MedianOverFabricRead, %.2f\n", name,
               (double)hist_percentile(&r->h, 50) / (double)hist_percentile(&r->read_h, 50));
    }
}

/* Runs one kind in node 0: 0 and its result, or 1 after saying why. */
static int run_kind(struct fab_ctx *c, struct bench_txn_req *q, int k, struct fab_buf *resp,
                    struct bench_txn_res *res)
{
    q->kind = (uint8_t)k;
    struct pack_w w;
    pack_w_init(&w);
    bench_txn_req_pack(q, &w);
    int r = w.err ? RDKV_ENOMEM
                  : fab_rpc_call(c, 0, KV_RPC_BENCH_TXN_RUN, w.p, w.len, resp,
                                 q->warmup_ns + q->run_ns + 120 * NS_PER_S);
    pack_w_free(&w);
    if (!r) r = bench_txn_res_unpack(res, resp->data, resp->len);
    if (r) fprintf(stderr, "kvbench txn: error: %s: %s\n", kind_names[k], bench_strerror(r));
    return r ? 1 : 0;
}

/* Prints a kind's result, and adds it to the JSON results when j is not NULL. */
static void report(const char *name, const struct bench_txn_res *res, struct json *j)
{
    print_res(name, res);
    fflush(stdout);
    if (!j) return;
    json_obj_begin(j);
    json_kv_str(j, "kind", name);
    json_kv_u64(j, "ops", res->ops);
    json_kv_double(j, "seconds", (double)res->elapsed_ns / 1e9);
    json_kv_double(j, "p50_us", (double)hist_percentile(&res->h, 50) / 1e3);
    json_kv_double(j, "p99_us", (double)hist_percentile(&res->h, 99) / 1e3);
    json_kv_double(j, "p999_us", (double)hist_percentile(&res->h, 99.9) / 1e3);
    double ops = res->ops ? (double)res->ops : 1.0;
    json_kv_double(j, "round_trips_per_txn", (double)(res->rt_before_commit + res->rt_commit) / ops);
    json_kv_double(j, "lock_read_round_trips_per_txn", (double)res->rt_before_commit / ops);
    json_kv_double(j, "commit_round_trips_per_txn", (double)res->rt_commit / ops);
    json_kv_double(j, "read_p50_us", (double)hist_percentile(&res->read_h, 50) / 1e3);
    json_kv_u64(j, "aborts", res->aborts);
    json_kv_u64(j, "errors", res->errors);
    json_obj_end(j);
}

/* Loads every node's keys: 0, or 1 after a message. */
static int load_nodes(struct fab_ctx *c, const struct bench_txn_req *q, unsigned nn,
                      struct fab_buf *resp)
{
    uint8_t lb[8];
    pack_put_u32le(lb, q->keys_per_node);
    pack_put_u32le(lb + 4, q->value_size);
    for (unsigned n = 0; n < nn; n++) {
        int r = fab_rpc_call(c, (uint16_t)n, KV_RPC_BENCH_TXN_LOAD, lb, 8, resp, 600 * NS_PER_S);
        if (r) {
            fprintf(stderr, "kvbench txn: error: loading node %u: %s\n", n, bench_strerror(r));
            return 1;
        }
    }
    return 0;
}

/* The insert kinds run in --rounds rounds of --seconds / rounds each, alternating ABBA when both
 * are asked for (prefix, spread, spread, prefix, ...), so that a shared machine's load changes
 * hit both alike; each one's result is the sum of its rounds. */
static int run_inserts(struct fab_ctx *c, const struct txn_cli *cli, struct fab_buf *resp,
                       struct json *j)
{
    struct bench_txn_req q = cli->q;
    struct bench_txn_res acc[2];
    int64_t acc_ns[2] = {0, 0};
    bool ran[2] = {false, false};
    int rc = 0;
    q.run_ns = cli->q.run_ns / cli->rounds > 0 ? cli->q.run_ns / cli->rounds : 1;
    for (unsigned r = 0; r < cli->rounds && !rc && !bench_stop; r++)
        for (int x = 0; x < 2 && !rc && !bench_stop; x++) {
            int i = r % 2 ? 1 - x : x; /* ABBA */
            int k = BENCH_TXN_INSERT_PREFIX + i;
            if (!cli->kinds[k]) continue;
            struct bench_txn_res res;
            if (run_kind(c, &q, k, resp, &res)) {
                rc = 1;
                break;
            }
            if (!ran[i]) acc[i] = res;
            else bench_txn_res_add(&acc[i], &res);
            acc_ns[i] += res.elapsed_ns;
            ran[i] = true;
            if (res.errors) rc = 1;
        }
    for (int i = 0; i < 2; i++)
        if (ran[i]) {
            acc[i].elapsed_ns = acc_ns[i];
            report(kind_names[BENCH_TXN_INSERT_PREFIX + i], &acc[i], j);
        }
    if (ran[0] && ran[1] && acc[0].elapsed_ns > 0 && acc[1].elapsed_ns > 0 && acc[1].ops) {
        double ratio = ((double)acc[0].ops / (double)acc[0].elapsed_ns) /
                       ((double)acc[1].ops / (double)acc[1].elapsed_ns);
        printf("[insert-prefix/insert-spread], ThroughputRatio, %.3f\n", ratio);
        if (j) {
            json_obj_begin(j);
            json_kv_str(j, "kind", "insert-prefix/insert-spread");
            json_kv_double(j, "throughput_ratio", ratio);
            json_obj_end(j);
        }
    }
    return rc;
}

/* Every kind asked for, the ordinary ones once each, then the insert kinds. */
static int run_kinds(struct fab_ctx *c, const struct txn_cli *cli, struct fab_buf *resp,
                     struct json *j)
{
    struct bench_txn_req q = cli->q;
    int rc = 0;
    for (int k = 0; k < BENCH_TXN_INSERT_PREFIX && !rc && !bench_stop; k++) {
        if (!cli->kinds[k]) continue;
        struct bench_txn_res res;
        if (run_kind(c, &q, k, resp, &res)) return 1;
        report(kind_names[k], &res, j);
        if (res.errors) rc = 1;
    }
    if (!rc && run_inserts(c, cli, resp, j)) rc = 1;
    return rc;
}

/* The JSON file's head, its results array left open: the file, or NULL after a message. */
static FILE *json_begin(struct json *j, const struct txn_cli *cli, const struct bench_cluster *bc,
                        unsigned nn)
{
    FILE *jf = bench_json_begin(j, cli->co.json, "txn", bc, fab_transport_name(bc->transport), nn);
    if (!jf) return NULL;
    json_kv_u64(j, "threads", cli->q.threads);
    json_kv_u64(j, "tasks_per_thread", cli->q.tasks);
    json_kv_u64(j, "keys_per_node", cli->q.keys_per_node);
    json_kv_u64(j, "value_size", cli->q.value_size);
    json_obj_end(j);
    json_key(j, "results");
    json_arr_begin(j);
    return jf;
}

/* Loads, measures and reports on the open cluster. */
static int run_all(struct fab_ctx *c, const struct txn_cli *cli, const struct bench_cluster *bc,
                   unsigned nn)
{
    const struct bench_txn_req *q = &cli->q;
    struct fab_buf resp = {0};
    printf("# kvbench txn: transport %s, %u nodes%s, %u worker thread%s x %u tasks in node 0, %u keys per node, "
           "%u-byte values, %.1f s per kind after %.1f s warm-up\n",
           fab_transport_name(bc->transport), nn, bc->launched ? " (local processes)" : "",
           q->threads, q->threads == 1 ? "" : "s", q->tasks, q->keys_per_node, q->value_size,
           cli->co.seconds, (double)q->warmup_ns / 1e9);
    int rc = load_nodes(c, q, nn, &resp);
    FILE *jf = NULL;
    struct json j;
    if (!rc && cli->co.json && !(jf = json_begin(&j, cli, bc, nn))) rc = 1;
    if (!rc) rc = run_kinds(c, cli, &resp, jf ? &j : NULL);
    if (jf) {
        json_arr_end(&j);
        json_obj_end(&j);
        fputc('\n', jf);
        fclose(jf);
    }
    fab_buf_free(&resp);
    return rc;
}

int cmd_txn(int argc, char **argv)
{
    struct txn_cli cli = {.kinds = {true, true, true, false, false},
                          .rounds = 4,
                          .warmup = 0.5,
                          .q = {.threads = 1, .tasks = 1, .keys_per_node = 1000,
                                .value_size = 100, .seed = 42}};
    bench_common_init(&cli.co);
    cli.co.nodes = 2;
    cli.co.seconds = 3;
    if (bench_opts_parse(&txn_cmd, &cli, argc, argv)) return 0;
    if (cli.co.nodes < 2 && !cli.co.config) bench_usage_error("txn", "--nodes must be at least 2 (got '%s')", "1");
    cli.q.warmup_ns = (int64_t)(cli.warmup * 1e9);
    cli.q.run_ns = (int64_t)(cli.co.seconds * 1e9);
    struct bench_cluster bc;
    if (bench_start(&bc, &cli.co, "txn", 30 * NS_PER_S)) return 1;
    unsigned nn = fab_num_nodes(bc.f);
    int rc = 0;
    struct fab_ctx *c = NULL;
    if (nn < 2) {
        fprintf(stderr, "kvbench txn: error: the cluster has %u node; at least 2 are needed\n", nn);
        rc = 2;
    } else if (fab_ctx_create(bc.f, &c)) {
        fprintf(stderr, "kvbench txn: error: cannot create a fabric context\n");
        rc = 1;
    }
    if (!rc) rc = run_all(c, &cli, &bc, nn);
    if (c) fab_ctx_destroy(c);
    if (bench_cluster_close(&bc) && !rc) rc = 1;
    return rc;
}
