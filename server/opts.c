/* kvserver's options (server/opts.h): its --help text, the defaults, and the parser that the
 * daemon, an embedded node (rdkv_node_start) and kvcluster's pass-through share. */
#include "server/opts.h"

#include "locks/range/range.h"
#include "storage/wal.h"
#include "server/metrics.h"

#include "common/clock.h"
#include "common/parse.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

const char node_usage[] =
    "  --config FILE         cluster config: 'node ID HOST:PORT' lines (see docs/fabric.md)\n"
    "  --node N              this node's id in the config\n"
    "  --transport T         soft, verbs or auto (default: the config's, else auto:\n"
    "                        verbs when an RDMA device exists)\n"
    "  --arena SIZE          arena size, e.g. 512M (default: the config's, else 256M)\n"
    "  --heap SIZE           of which the row heap (default: half the arena)\n"
    "  --key-max BYTES       longest key (default 4096)\n"
    "  --value-max BYTES     longest value (default 1M)\n"
    "  --row-lock NAME       row lock of transactions: rwlock (default), dslr, dslr-u, drtm,\n"
    "                        rof, trad, alock or spin (alock and spin are exclusive only: reads\n"
    "                        lock exclusively; alock never queues behind a waiter, so that it\n"
    "                        can give up); not mcs, whose waits cannot be given up\n"
    "  --range-lock NAME     range lock of scans: combiner-rpc (default), combiner-rdma, itree\n"
    "  --lock-timeout DUR    longest lock wait before a transaction aborts (default 100ms)\n"
    "  --conflict POLICY     what a transaction does when a lock is taken: timeout (default:\n"
    "                        wait until --lock-timeout), wait-die (wait only for younger\n"
    "                        transactions, else abort at once) or no-wait (abort at once);\n"
    "                        wait-die and no-wait commit more on hot keys\n"
    "  --lease DUR           lease of a remote lock (default 10s): a remote session's transaction\n"
    "                        idle half a lease is aborted, one that holds a lock longer aborts\n"
    "                        at commit, and a dead holder's locks free after two leases\n"
    "  --replica-lease DUR   a replicated cluster's member lease at the configuration manager\n"
    "                        (default 1s): a member not heard from for the lease and a tenth\n"
    "                        is removed from the configuration (docs/replication.md)\n"
    "  --drtm-lease DUR      --row-lock drtm: how long a shared holder's lease lasts; a writer\n"
    "                        waits it out, a reader that outlives it aborts at commit (default\n"
    "                        10ms, about a transaction's length)\n"
    "  --commit-timeout DUR  how long a commit waits for a participant before it reports the\n"
    "                        outcome unknown (default 5s); the locks held there are kept until\n"
    "                        the participant answers or is declared down\n"
    "  --txn-max-ops N       operations one transaction may run (default 10000) ...\n"
    "  --txn-max-bytes SIZE  ... and bytes of keys and values it may carry (default 64M); beyond\n"
    "                        either it fails with \"too big\" and its locks are released at once\n"
    "  --prepared-max SIZE   PREPAREs a participant keeps waiting for their decision, in bytes\n"
    "                        (default: a quarter of the heap; from one coordinator: half of it);\n"
    "                        beyond it a PREPARE is refused with \"busy\"\n"
    "  --indoubt-after DUR   a participant asks the coordinator about a transaction prepared this\n"
    "                        long (default: twice --commit-timeout); unknown to it: dropped\n"
    "  --session-idle DUR    close a remote session idle this long (default 60s)\n"
    "  --max-sessions N      remote sessions open at once (default 16384; beyond it a client is\n"
    "                        refused with \"busy\"); an idle session costs a few hundred bytes\n"
    "  --sessions-per-conn N remote sessions one client connection may hold open (default 1024)\n"
    "  --session-threads N   threads that run the remote sessions' transactions, each as a task\n"
    "                        (default 2)\n"
    "  --rpc-threads N       threads that run RPC handlers (default 2; 64 with --data-dir,\n"
    "                        where each commit RPC waits on its thread for its fdatasync)\n"
    "  --max-conns N         connections open at once, nodes' and clients' (default 1024);\n"
    "                        beyond it a connection is refused with \"busy\"\n"
    "  --conn-out-max SIZE   replies a connection may have queued (and requests running)\n"
    "                        before its further requests wait unread until they drain\n"
    "                        (default 4M)\n"
    "  --hello-timeout DUR   a connection that has not finished its handshake by then is\n"
    "                        closed (default 5s)\n"
    "  --conn-idle DUR       a client connection that sent nothing and is owed nothing this\n"
    "                        long is closed (default 10m or --session-idle if longer; at\n"
    "                        least --session-idle; 0: never);\n"
    "                        node connections never are\n"
    "  --bench               serve kvbench's workload and benchmark RPCs (kvbench ycsb, tpcc,\n"
    "                        lock, range, txn on nodes); off by default: a production node\n"
    "                        answers them \"not enabled on this node\"\n"
    "  --data-dir DIR        keep a redo log in DIR (created if missing) and replay it at start:\n"
    "                        every commit is durable before it is acknowledged (two-phase\n"
    "                        commits too: every node needs a directory of its own). Without\n"
    "                        it the node is in memory: nothing survives a restart\n"
    "  --durability MODE     with --data-dir: group (default: many commits share one fdatasync),\n"
    "                        sync (one fdatasync per commit) or off (written, never waited for:\n"
    "                        a crash of the machine loses recent commits; docs/storage.md)\n"
    "  --init                with --data-dir: start this partition empty when the directory\n"
    "                        holds no log or checkpoint (a new cluster). Without it such a\n"
    "                        node refuses to start: its data is missing, and it must never\n"
    "                        answer \"not found\" for keys it held\n"
    "  --checkpoint-every SIZE  with --data-dir: write a checkpoint of the partition (replicated:\n"
    "                        of every copy held) into the data dir once the log grew this much,\n"
    "                        and drop the log behind the older of the two checkpoints kept\n"
    "                        (default 256M; 0: never)\n"
    "  --log-segment SIZE    with --data-dir: the redo log's segment files (default 64M, at least\n"
    "                        64K); the log is dropped behind a checkpoint in whole segments\n"
    "  --metrics HOST:PORT   serve the node's counters in Prometheus's text format at\n"
    "                        http://HOST:PORT/metrics (\":PORT\" is 127.0.0.1:PORT; port 0: any\n"
    "                        free one, named in the start line and the status); \"off\": count\n"
    "                        nothing. The node always counts otherwise (kvctl stats, docs/metrics.md)\n"
    "  --peer-wait DUR       at start-up, wait up to this long for every peer to answer, and\n"
    "                        exit with an error if one does not (default 30s; 0: do not wait)\n"
    "  --secret-file FILE    the cluster's node secret (default: the config's secret_file);\n"
    "                        mode 600, written by kvcluster and tools/cluster.sh (docs/security.md)\n"
    "  --insecure            benchmarks on a trusted host only: accept every connection without\n"
    "                        a credential (warned about in the log); never the default\n"
    "  --listen-fd FD        serve on this inherited listening socket (used by launchers)\n"
    "  --ready-fd FD         write \"ready\" to FD once serving and all peers answered\n"
    "  --verbs-device NAME   RDMA device (default: the first)\n"
    "  --verbs-cm MODE       auto, rdmacm or oob: how queue pairs are connected (default auto)\n"
    "  --spin-us U           a thread waiting for a completion polls U us before it blocks\n"
    "                        (default 20)\n"
    "  --soft-atomic-pause-us N  testing: each soft NIC atomic pauses N us between load and store\n"
    "  --fault-wal WHAT:ERR  testing: the redo log's first write or sync (WHAT: write, sync)\n"
    "                        fails with ERR (ENOSPC or EIO), as a full or failing disk would;\n"
    "                        sync-delay:USEC: every fdatasync of the log waits USEC first\n"
    "  -h, --help            this text\n"
    "  --version             print the version\n";

void node_opts_init(struct node_opts *o)
{
    memset(o, 0, sizeof *o);
    o->node = -1;
    fab_opts_init(&o->fab);
    o->peer_wait_ns = 30 * NS_PER_S;
    o->ready_fd = -1;
    txn_cfg_init(&o->txn);
    store_opts_init(&o->store);
    o->sessions.idle_ns = 60 * NS_PER_S;
    o->sessions.max_sessions = SESSION_MAX_DEFAULT;
    o->sessions.threads = 2;
    o->heartbeat_ns = 250 * NS_PER_MS;
    o->heartbeat_misses = 4;
    o->durability = WAL_DUR_GROUP;
    o->checkpoint_every = 256ull << 20;
}

/* kvserver's options (node_opts_parse, node_opt_arity) */
enum {
    O_CONFIG = 256, O_NODE, O_TRANSPORT, O_ARENA, O_RPC_THREADS, O_PEER_WAIT, O_LISTEN_FD,
    O_READY_FD, O_VDEV, O_VCM, O_PAUSE, O_SPIN, O_VERSION, O_HEAP, O_KEYMAX, O_VALMAX,
    O_ROWLOCK, O_RANGELOCK, O_LOCKTO, O_LEASE, O_DRTM_LEASE, O_IDLE, O_MAXSESS, O_SESS_THREADS, O_COMMITTO,
    O_CONFLICT, O_MAXCONNS, O_OUTMAX, O_HELLOTO, O_CONNIDLE, O_BENCH, O_SECRET, O_INSECURE,
    O_TXN_OPS, O_TXN_BYTES, O_PREP_MAX, O_INDOUBT, O_SESS_CONN, O_DATADIR, O_DURABILITY, O_CKPT_EVERY, O_LOG_SEGMENT, O_INIT, O_FAULT_WAL,
    O_REPLICA_LEASE, O_METRICS
};
static const struct option node_longopts[] = {
    {"config", required_argument, 0, O_CONFIG},
    {"node", required_argument, 0, O_NODE},
    {"transport", required_argument, 0, O_TRANSPORT},
    {"arena", required_argument, 0, O_ARENA},
    {"heap", required_argument, 0, O_HEAP},
    {"key-max", required_argument, 0, O_KEYMAX},
    {"value-max", required_argument, 0, O_VALMAX},
    {"row-lock", required_argument, 0, O_ROWLOCK},
    {"range-lock", required_argument, 0, O_RANGELOCK},
    {"lock-timeout", required_argument, 0, O_LOCKTO},
    {"conflict", required_argument, 0, O_CONFLICT},
    {"lease", required_argument, 0, O_LEASE},
    {"replica-lease", required_argument, 0, O_REPLICA_LEASE},
    {"drtm-lease", required_argument, 0, O_DRTM_LEASE},
    {"commit-timeout", required_argument, 0, O_COMMITTO},
    {"txn-max-ops", required_argument, 0, O_TXN_OPS},
    {"txn-max-bytes", required_argument, 0, O_TXN_BYTES},
    {"prepared-max", required_argument, 0, O_PREP_MAX},
    {"indoubt-after", required_argument, 0, O_INDOUBT},
    {"sessions-per-conn", required_argument, 0, O_SESS_CONN},
    {"session-idle", required_argument, 0, O_IDLE},
    {"max-sessions", required_argument, 0, O_MAXSESS},
    {"session-threads", required_argument, 0, O_SESS_THREADS},
    {"rpc-threads", required_argument, 0, O_RPC_THREADS},
    {"max-conns", required_argument, 0, O_MAXCONNS},
    {"conn-out-max", required_argument, 0, O_OUTMAX},
    {"hello-timeout", required_argument, 0, O_HELLOTO},
    {"conn-idle", required_argument, 0, O_CONNIDLE},
    {"bench", no_argument, 0, O_BENCH},
    {"data-dir", required_argument, 0, O_DATADIR},
    {"durability", required_argument, 0, O_DURABILITY},
    {"checkpoint-every", required_argument, 0, O_CKPT_EVERY},
    {"log-segment", required_argument, 0, O_LOG_SEGMENT},
    {"init", no_argument, 0, O_INIT},
    {"fault-wal", required_argument, 0, O_FAULT_WAL},
    {"peer-wait", required_argument, 0, O_PEER_WAIT},
    {"metrics", required_argument, 0, O_METRICS},
    {"listen-fd", required_argument, 0, O_LISTEN_FD},
    {"ready-fd", required_argument, 0, O_READY_FD},
    {"verbs-device", required_argument, 0, O_VDEV},
    {"verbs-cm", required_argument, 0, O_VCM},
    {"soft-atomic-pause-us", required_argument, 0, O_PAUSE},
    {"spin-us", required_argument, 0, O_SPIN},
    {"secret-file", required_argument, 0, O_SECRET},
    {"insecure", no_argument, 0, O_INSECURE},
    {"help", no_argument, 0, 'h'},
    {"version", no_argument, 0, O_VERSION},
    {0, 0, 0, 0},
};

int node_opt_arity(const char *name)
{
    for (const struct option *x = node_longopts; x->name; x++)
        if (!strcmp(x->name, name)) return x->has_arg == no_argument ? 0 : 1;
    return -1;
}

int node_opts_parse(int argc, char **argv, struct node_opts *o, char *err, size_t errcap)
{
#define BAD(...)                                                                                   \
    do {                                                                                           \
        snprintf(err, errcap, __VA_ARGS__);                                                        \
        return 2;                                                                                  \
    } while (0)
    opterr = 0;
    optind = 1;
    int ch;
    bool durability_given = false, ckpt_given = false, rpc_threads_given = false;
    bool seg_given = false;
    uint64_t v;
    int64_t d;
    while ((ch = getopt_long(argc, argv, "h", node_longopts, NULL)) != -1) {
        switch (ch) {
        case O_CONFIG: o->config = optarg; break;
        case O_NODE:
            if (parse_uint_range(optarg, 0, 65533, &v)) BAD("bad --node '%s'", optarg);
            o->node = (long)v;
            break;
        case O_TRANSPORT: {
            enum fab_transport t;
            if (fab_transport_parse(optarg, &t))
                BAD("bad --transport '%s' (soft, verbs or auto)", optarg);
            o->transport = optarg;
            break;
        }
        case O_ARENA:
            if (parse_size(optarg, &o->fab.arena_size) || !o->fab.arena_size)
                BAD("bad --arena '%s' (expected a size such as 256M)", optarg);
            break;
        case O_HEAP:
            if (parse_size(optarg, &o->store.heap_bytes) || !o->store.heap_bytes)
                BAD("bad --heap '%s' (expected a size such as 128M)", optarg);
            break;
        case O_KEYMAX:
            if (parse_size(optarg, &v) || v < 1 || v > STORE_KEY_MAX_LIMIT)
                BAD("bad --key-max '%s' (1..%u)", optarg, STORE_KEY_MAX_LIMIT);
            o->store.key_max = (uint32_t)v;
            break;
        case O_VALMAX:
            if (parse_size(optarg, &v) || v < 1 || v > STORE_VALUE_MAX_LIMIT)
                BAD("bad --value-max '%s' (1..%u)", optarg, STORE_VALUE_MAX_LIMIT);
            o->store.value_max = (uint32_t)v;
            break;
        case O_ROWLOCK:
            if (!lock_algo_find(optarg))
                BAD("unknown --row-lock '%s' (one of %s)", optarg, lock_algo_names());
            if (lock_algo_find(optarg)->queue_wait)
                BAD("--row-lock %s cannot serve transactions: a queue lock's waiter cannot give "
                    "up, so waits could not be bounded (use one of %s)", optarg,
                    lock_algo_txn_names());
            o->txn.row_lock = optarg;
            break;
        case O_RANGELOCK:
            if (!range_algo_find(optarg))
                BAD("unknown --range-lock '%s' (one of %s)", optarg, range_algo_names());
            o->txn.range_lock = optarg;
            break;
        case O_LOCKTO:
            if (parse_duration_ns(optarg, &d) || d <= 0) BAD("bad --lock-timeout '%s'", optarg);
            o->txn.lock_timeout_ns = d;
            break;
        case O_CONFLICT:
            if ((o->txn.conflict = txn_conflict_parse(optarg)) < 0)
                BAD("unknown --conflict '%s' (wait-die, no-wait or timeout)", optarg);
            break;
        case O_REPLICA_LEASE:
            if (parse_duration_ns(optarg, &d) || d < 10 * NS_PER_MS || d > 60 * NS_PER_S)
                BAD("bad --replica-lease '%s' (10ms..60s)", optarg);
            o->replica_lease_ns = d;
            break;
        case O_LEASE:
            if (parse_duration_ns(optarg, &d) || d < NS_PER_MS) BAD("bad --lease '%s' (>= 1ms)", optarg);
            o->txn.lease_ns = d;
            break;
        case O_DRTM_LEASE:
            if (parse_duration_ns(optarg, &d) || d < NS_PER_US || d > 60 * NS_PER_S)
                BAD("bad --drtm-lease '%s' (1us..60s)", optarg);
            o->txn.drtm_lease_ns = d;
            break;
        case O_COMMITTO:
            if (parse_duration_ns(optarg, &d) || d < NS_PER_MS || d > 3600 * NS_PER_S)
                BAD("bad --commit-timeout '%s' (1ms..1h)", optarg);
            o->txn.commit_timeout_ns = d;
            break;
        case O_TXN_OPS:
            if (parse_uint_range(optarg, 1, UINT32_MAX, &v)) BAD("bad --txn-max-ops '%s'", optarg);
            o->txn.max_ops = (uint32_t)v;
            break;
        case O_TXN_BYTES:
            if (parse_size(optarg, &v) || !v) BAD("bad --txn-max-bytes '%s'", optarg);
            o->txn.max_bytes = v;
            break;
        case O_PREP_MAX:
            if (parse_size(optarg, &v) || !v) BAD("bad --prepared-max '%s'", optarg);
            o->txn.prepared_max_bytes = v;
            o->txn.prepared_max_per_coord = v / 2 ? v / 2 : 1;
            break;
        case O_INDOUBT:
            if (parse_duration_ns(optarg, &d) || d < NS_PER_MS || d > 3600 * NS_PER_S)
                BAD("bad --indoubt-after '%s' (1ms..1h)", optarg);
            o->txn.indoubt_ns = d;
            break;
        case O_SESS_CONN:
            if (parse_uint_range(optarg, 1, SESSION_MAX_LIMIT, &v))
                BAD("bad --sessions-per-conn '%s' (1..%u)", optarg, SESSION_MAX_LIMIT);
            o->sessions.per_conn = (unsigned)v;
            break;
        case O_IDLE:
            if (parse_duration_ns(optarg, &d) || d < NS_PER_S) BAD("bad --session-idle '%s' (>= 1s)", optarg);
            o->sessions.idle_ns = d;
            break;
        case O_MAXSESS:
            if (parse_uint_range(optarg, 1, SESSION_MAX_LIMIT, &v))
                BAD("bad --max-sessions '%s' (1..%u)", optarg, SESSION_MAX_LIMIT);
            o->sessions.max_sessions = (unsigned)v;
            break;
        case O_SESS_THREADS:
            if (parse_uint_range(optarg, 1, 64, &v)) BAD("bad --session-threads '%s' (1..64)", optarg);
            o->sessions.threads = (unsigned)v;
            break;
        case O_RPC_THREADS:
            if (parse_uint_range(optarg, 1, 64, &v)) BAD("bad --rpc-threads '%s' (1..64)", optarg);
            o->fab.rpc_threads = (unsigned)v;
            rpc_threads_given = true;
            break;
        case O_MAXCONNS:
            if (parse_uint_range(optarg, 4, 1000000, &v)) BAD("bad --max-conns '%s' (4..1000000)", optarg);
            o->fab.conn_max = (unsigned)v;
            break;
        case O_OUTMAX:
            if (parse_size(optarg, &v) || v < (64u << 10) || v > (1u << 30))
                BAD("bad --conn-out-max '%s' (64K..1G)", optarg);
            o->fab.conn_out_max = (uint32_t)v;
            break;
        case O_HELLOTO:
            if (parse_duration_ns(optarg, &d) || d < 100 * NS_PER_MS || d > 3600 * NS_PER_S)
                BAD("bad --hello-timeout '%s' (100ms..1h)", optarg);
            o->fab.hello_timeout_ns = d;
            break;
        case O_CONNIDLE:
            if (parse_duration_ns(optarg, &d) || d < 0) BAD("bad --conn-idle '%s'", optarg);
            o->fab.conn_idle_ns = d ? d : -1;
            break;
        case O_BENCH: o->bench = true; break;
        case O_INIT: o->init = true; break;
        case O_FAULT_WAL: {
            char what[16] = "", e[16] = "";
            unsigned long us = 0;
            if (sscanf(optarg, "sync-delay:%lu", &us) == 1 && us > 0 && us <= 10000000) {
                o->fault_wal = 3;
                o->fault_errno = (int)us;
                break;
            }
            if (sscanf(optarg, "%15[a-z]:%15[A-Z]", what, e) != 2 ||
                (strcmp(what, "write") && strcmp(what, "sync")) ||
                (strcmp(e, "ENOSPC") && strcmp(e, "EIO")))
                BAD("bad --fault-wal '%s' (write:ENOSPC, write:EIO, sync:ENOSPC, sync:EIO or "
                    "sync-delay:USEC)", optarg);
            o->fault_wal = !strcmp(what, "write") ? 1 : 2;
            o->fault_errno = !strcmp(e, "EIO") ? EIO : ENOSPC;
            break;
        }
        case O_DATADIR:
            if (!*optarg) BAD("bad --data-dir '' (a directory)");
            o->data_dir = optarg;
            break;
        case O_DURABILITY: {
            enum wal_durability dm;
            if (wal_durability_parse(optarg, &dm))
                BAD("bad --durability '%s' (off, group or sync)", optarg);
            o->durability = (int)dm;
            durability_given = true;
            break;
        }
        case O_CKPT_EVERY:
            if (parse_size(optarg, &o->checkpoint_every))
                BAD("bad --checkpoint-every '%s' (a size such as 256M, or 0)", optarg);
            ckpt_given = true;
            break;
        case O_LOG_SEGMENT:
            if (parse_size(optarg, &o->log_segment) || o->log_segment < (64u << 10))
                BAD("bad --log-segment '%s' (a size of at least 64K, such as 64M)", optarg);
            seg_given = true;
            break;
        case O_METRICS: {
            char host[256];
            uint16_t port;
            o->metrics_off = !strcmp(optarg, "off");
            o->metrics = o->metrics_off ? NULL : optarg;
            if (!o->metrics_off && metrics_addr_parse(optarg, host, sizeof host, &port))
                BAD("bad --metrics '%s' (HOST:PORT, [IPV6]:PORT, :PORT or off)", optarg);
            break;
        }
        case O_PEER_WAIT:
            if (parse_duration_ns(optarg, &o->peer_wait_ns)) BAD("bad --peer-wait '%s'", optarg);
            break;
        case O_LISTEN_FD:
            if (parse_uint_range(optarg, 0, 65535, &v)) BAD("bad --listen-fd '%s'", optarg);
            o->fab.listen_fd = (int)v;
            break;
        case O_READY_FD:
            if (parse_uint_range(optarg, 0, 65535, &v)) BAD("bad --ready-fd '%s'", optarg);
            o->ready_fd = (int)v;
            break;
        case O_VDEV: o->fab.verbs_device = optarg; break;
        case O_VCM:
            if (!strcmp(optarg, "auto")) o->fab.verbs_cm = FAB_CM_AUTO;
            else if (!strcmp(optarg, "rdmacm")) o->fab.verbs_cm = FAB_CM_RDMACM;
            else if (!strcmp(optarg, "oob")) o->fab.verbs_cm = FAB_CM_OOB;
            else BAD("bad --verbs-cm '%s' (auto, rdmacm or oob)", optarg);
            break;
        case O_PAUSE:
            if (parse_uint_range(optarg, 0, 10000000, &v)) BAD("bad --soft-atomic-pause-us '%s'", optarg);
            o->fab.soft_atomic_pause_ns = (int64_t)v * NS_PER_US;
            break;
        case O_SPIN:
            if (parse_uint_range(optarg, 0, 1000000, &v)) BAD("bad --spin-us '%s'", optarg);
            o->fab.spin_ns = (int64_t)v * NS_PER_US;
            break;
        case O_SECRET: o->fab.secret_file = optarg; break;
        case O_INSECURE: o->fab.insecure = true; break;
        case 'h': snprintf(err, errcap, "help"); return 1;
        case O_VERSION: snprintf(err, errcap, "version"); return 1;
        default: BAD("unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) BAD("unexpected argument '%s'", argv[optind]);
    /* closing an idle connection ends its sessions: never before the sessions would expire */
    if (o->fab.conn_idle_ns > 0 && o->fab.conn_idle_ns < o->sessions.idle_ns)
        BAD("--conn-idle must be at least --session-idle (%lld s)",
            (long long)(o->sessions.idle_ns / NS_PER_S));
    if (o->fab.conn_idle_ns == 0 && o->sessions.idle_ns > FAB_CONN_IDLE_DEFAULT_NS)
        o->fab.conn_idle_ns = o->sessions.idle_ns; /* the default follows a longer session idle */
    if (!o->config) BAD("--config FILE is required");
    if (o->node < 0) BAD("--node N is required");
    if (durability_given && !o->data_dir) BAD("--durability needs --data-dir");
    if (ckpt_given && !o->data_dir) BAD("--checkpoint-every needs --data-dir");
    if (seg_given && !o->data_dir) BAD("--log-segment needs --data-dir");
    if (o->init && !o->data_dir) BAD("--init needs --data-dir");
    /* A durable node's commit RPCs (APPLY, PREPARE, COMMIT) each wait on an RPC thread for the
     * fdatasync that covers their record: with 2 threads, a group could never hold more than 2
     * of them. The waits sleep (futex), so more threads cost little. */
    if (o->data_dir && !rpc_threads_given) o->fab.rpc_threads = NODE_DURABLE_RPC_THREADS;
    if (o->fault_wal && !o->data_dir) BAD("--fault-wal needs --data-dir");
    if (o->fab.listen_fd >= 0 && fcntl(o->fab.listen_fd, F_GETFD) < 0)
        BAD("--listen-fd does not name an open descriptor");
    if (o->ready_fd >= 0 && fcntl(o->ready_fd, F_GETFD) < 0)
        BAD("--ready-fd does not name an open descriptor");
    /* the combiner must know a transaction's own ranges: only server-side designs serve it */
    const struct range_algo *ra = range_algo_find(o->txn.range_lock);
    if (ra && !ra->server_side)
        BAD("--range-lock %s cannot serve transactions (use combiner-rpc, combiner-rdma or "
            "itree)", o->txn.range_lock);
#undef BAD
    return 0;
}
