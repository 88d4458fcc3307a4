/* kvctl: the command-line client of rdkv. One-shot commands (get, put, del, scan, status), a
 * guarded batch transaction read from a file or stdin (txn), and an fdbcli-like shell with
 * autocommit and begin/commit/rollback. It uses only the public API (rdkv.h); each command runs
 * as one serializable transaction, retried on conflict. Exit codes tell apart not found (3),
 * aborted (4), unavailable (5) and commit result unknown (6): `kvctl help exit-codes`.
 * This file: the global flags, the command table (a new command is one cmd_NAME function and
 * one row of `commands`), help, and main. */
#include "tools/kvctl/kvctl.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * Global settings (flags and environment). */

struct globals G = {
    .endpoints = DEFAULT_ENDPOINTS,
    .endpoints_from = "the default",
    .out = OUT_TEXT,
    .connect_ms = 2000,
    .timeout_ms = 10000,
    .lock_ms = 0,
    .retries = 10,
};

const char *cur_cmd;
rdkv_session *S;

/* ---------------------------------------------------------------------------------------------
 * The command line: flags, commands, help. */

struct flag {
    enum flag_id id;
    const char *lng;
    char shrt, shrt2;
    bool value;
};

static const struct flag flags[] = {
    {F_ENDPOINTS, "endpoints", 'e', 0, true},
    {F_WRITE_OUT, "write-out", 'w', 'o', true},
    {F_WRITE_OUT, "output", 0, 0, true},
    {F_HEX, "hex", 0, 0, false},
    {F_CONNECT_TIMEOUT, "connect-timeout", 0, 0, true},
    {F_TIMEOUT, "timeout", 0, 0, true},
    {F_LOCK_TIMEOUT, "lock-timeout", 0, 0, true},
    {F_RETRIES, "retries", 0, 0, true},
    {F_SECRET_FILE, "secret-file", 0, 0, true},
    {F_HELP, "help", 'h', 0, false},
    {F_VERSION, "version", 0, 0, false},
    {F_RAW, "raw", 0, 0, false},
    {F_LIMIT, "limit", 'l', 0, true},
    {F_KEYS_ONLY, "keys-only", 0, 0, false},
    {F_COUNT, "count", 0, 0, false},
    {F_TO_END, "to-end", 0, 0, false},
    {F_PREFIX, "prefix", 0, 0, true},
    {F_FILE, "file", 'f', 0, true},
    {F_EXEC, "exec", 0, 0, true},
};

#define GLOBAL_FLAGS ((1u << F_RAW) - 1)
#define FL(x) (1u << (x))

static const char global_flags_help[] =
    "Global flags (before or after the command; environment variable in brackets):\n"
    "  -e, --endpoints H:P[,H:P...]  nodes to connect to; the first that answers coordinates\n"
    "                                the transactions [KVCTL_ENDPOINTS] (default " DEFAULT_ENDPOINTS
    ")\n"
    "  -w, -o, --write-out FORMAT    text or json [KVCTL_WRITE_OUT] (default text)\n"
    "      --hex                     print keys and values as hex (text and json)\n"
    "      --connect-timeout DUR     connecting to an endpoint [KVCTL_CONNECT_TIMEOUT]\n"
    "                                (default 2s)\n"
    "      --timeout DUR             one request to the coordinating node [KVCTL_TIMEOUT]\n"
    "                                (default 10s)\n"
    "      --lock-timeout DUR        the longest lock wait before the transaction aborts and\n"
    "                                is retried [KVCTL_LOCK_TIMEOUT] (default: the node's)\n"
    "      --retries N               retries of a transaction that conflicts; 0: none\n"
    "                                [KVCTL_RETRIES] (default 10)\n"
    "      --secret-file FILE        the cluster's client secret file, mode 600 (kvcluster\n"
    "                                writes DIR/cluster.client.secret) [RDKV_SECRET_FILE]\n"
    "  -h, --help                    help for kvctl or for the command\n"
    "      --version                 print kvctl's version\n"
    "DUR is a number with a unit: 500ms, 2s, 1m (a bare number is seconds).\n";
static const struct command commands[] = {
    {"get", FL(F_RAW), "kvctl get [flags] KEY", "print the value of a key",
     "Prints the value of KEY. A value that is printable text (UTF-8 without control bytes\n"
     "other than tab and newline) is printed as is, followed by a newline; any other value is\n"
     "printed with fdbcli-style escapes (\\xNN, \\\\; see 'kvctl help escaping'). --hex prints\n"
     "hex, --raw the exact bytes. With -w json: {\"key\":\"...\",\"value\":\"...\"}, where\n"
     "a key or value that is not UTF-8 comes as \"key_hex\"/\"value_hex\" instead.\n"
     "A missing key prints 'kvctl: KEY: not found' on stderr and exits 3.\n"
     "\n"
     "Examples:\n"
     "  kvctl get user/42\n"
     "  kvctl get --hex blob/1\n"
     "  kvctl get --raw photo/7 > photo.jpg\n"
     "  kvctl -w json get user/42\n"
     "\n"
     "Flags:\n"
     "      --raw   write the value's exact bytes: no escaping, no newline\n",
     cmd_get},
    {"put", 0, "kvctl put [flags] KEY [VALUE|-]", "write a key",
     "Writes VALUE under KEY (inserting or overwriting) and prints OK. Without VALUE, or with\n"
     "'-', the value is read from stdin up to end of file, byte for byte. Put '--' before a\n"
     "key or value that starts with '-'. Arguments are taken literally (no escapes).\n"
     "Keys may have up to 4096 bytes and values 1 MiB unless the nodes say otherwise; a\n"
     "larger one fails with RDKV_ETOOBIG (exit 1).\n"
     "\n"
     "Examples:\n"
     "  kvctl put user/42 alice\n"
     "  kvctl put photo/7 < photo.jpg\n"
     "  printf 'a\\0b' | kvctl put blob/1 -\n"
     "  kvctl put -- -dash- value\n",
     cmd_put},
    {"del", 0, "kvctl del [flags] KEY", "delete a key",
     "Deletes KEY and prints OK; a key that is not there exits 3 ('not found').\n"
     "\n"
     "Examples:\n"
     "  kvctl del user/42\n",
     cmd_del},
    {"scan", FL(F_LIMIT) | FL(F_KEYS_ONLY) | FL(F_COUNT) | FL(F_TO_END) | FL(F_PREFIX),
     "kvctl scan [flags] BEGIN END\n"
     "  kvctl scan [flags] BEGIN --to-end\n"
     "  kvctl scan [flags] --prefix PREFIX",
     "list the keys in a range",
     "Lists the rows with BEGIN <= key < END in key order (bytes compared unsigned), one\n"
     "'KEY VALUE' line each: the key escaped with no spaces (\\x20), then the value escaped\n"
     "(see 'kvctl help escaping'). END '' or --to-end reads to the end of the key space;\n"
     "BEGIN '' starts at the first key. An END that is not after BEGIN ('scan z a') is an\n"
     "empty range: kvctl says so and exits 2. At most --limit rows are printed; when there\n"
     "are more, a hint says so on stderr. The scan runs in one transaction under range locks.\n"
     "With -w json: {\"rows\":[{\"key\":...,\"value\":...}],\"more\":false}.\n"
     "\n"
     "Examples:\n"
     "  kvctl scan user/ user0\n"
     "  kvctl scan --prefix user/ --keys-only\n"
     "  kvctl scan '' --to-end --count\n"
     "\n"
     "Flags:\n"
     "  -l, --limit N       rows at most; 0: no limit (default 1000; with --count: none)\n"
     "      --keys-only     print only the keys\n"
     "      --count         print only the number of rows\n"
     "      --to-end        no END: scan to the end of the key space\n"
     "      --prefix P      the keys that start with P (instead of BEGIN and END)\n",
     cmd_scan},
    {"txn", FL(F_FILE), "kvctl txn [flags] [-f FILE]",
     "run a guarded batch as one transaction",
     "Reads a guarded batch from stdin (or FILE) and runs it as ONE serializable transaction,\n"
     "retried on conflict up to --retries times. First come the guards, then a line '---'\n"
     "(or an empty line), then the operations:\n"
     "\n"
     "  expect KEY = VALUE      the key holds exactly VALUE\n"
     "  expect KEY absent       the key is not there\n"
     "  expect KEY exists       the key is there\n"
     "  ---\n"
     "  get KEY\n"
     "  put KEY VALUE\n"
     "  del KEY                 (a missing key is no error)\n"
     "  scan BEGIN END [LIMIT]  (END \"\": to the end; LIMIT default 1000)\n"
     "\n"
     "Tokens split on whitespace; \"double quotes\" group and allow \\xNN, \\\\ and \\\" escapes,\n"
     "'single quotes' group literally, and lines that start with '#' are comments (see\n"
     "'kvctl help escaping'). If every guard holds, kvctl prints SUCCESS and then, in order,\n"
     "each get ('KEY VALUE', or 'KEY: not found') and each scan ('KEY VALUE' lines), and exits\n"
     "0. If a guard fails, nothing is written: kvctl prints 'FAILED: expect ...' with what it\n"
     "found and exits 4 (like a conflict: the guarded write did not happen). Malformed input\n"
     "exits 2 and names the line. With -w json: {\"result\":\"SUCCESS\",\"results\":[...]} or\n"
     "{\"result\":\"FAILED\",\"line\":N,\"expect\":\"...\"}.\n"
     "\n"
     "Examples:\n"
     "  printf 'expect acct/a exists\\n---\\nput acct/a 90\\nput acct/b 110\\n' | kvctl txn\n"
     "  kvctl txn -f transfer.txn\n"
     "\n"
     "Flags:\n"
     "  -f, --file FILE   read the batch from FILE instead of stdin\n",
     cmd_txn},
    {"shell", FL(F_EXEC), "kvctl shell [flags] [--exec \"CMD; CMD; ...\"]",
     "an interactive shell with transactions",
     "Reads commands from stdin (prompt 'kvctl> ' on a terminal) or from --exec, where ';'\n"
     "separates them (a ';' in a key is written \\; or quoted: scan user: \"user;\"), and a\n"
     "scan of an empty range (END not after BEGIN) is an error. Each command is its own\n"
     "transaction (autocommit, retried on conflict) until 'begin'; then every command runs in\n"
     "one transaction until 'commit' or 'rollback'. Any error inside a transaction (a typo\n"
     "too) prints 'Rolling back current transaction' and aborts it; the commands after it\n"
     "are then refused, so that they cannot commit half a transaction, until 'rollback' or\n"
     "'commit' ends it. Tokens are split as in txn ('kvctl help escaping'). 'get' and 'del'\n"
     "of a missing key print 'KEY: not found' and are no error in the shell.\n"
     "\n"
     "Commands:\n"
     "  get KEY                 print the value (or 'KEY: not found')\n"
     "  put KEY VALUE           write a key\n"
     "  del KEY                 delete a key\n"
     "  scan BEGIN END [LIMIT]  'KEY VALUE' lines; END \"\": to the end (LIMIT default 1000)\n"
     "  begin                   start a transaction\n"
     "  commit                  commit it\n"
     "  rollback                abort it (nothing it wrote happens)\n"
     "  status                  the cluster's nodes\n"
     "  stats                   the nodes' counters\n"
     "  help                    this list\n"
     "  exit, quit              leave (an open transaction is rolled back)\n"
     "\n"
     "A transaction must not pause long: its node aborts one idle for half the lock lease\n"
     "(5 s by default, kvserver --lease) and its next command gets RDKV_EABORTED; run it\n"
     "again.\n"
     "Exit status: 0 when every command succeeded, 1 when any failed (as fdbcli does; the\n"
     "messages name the status), 5 when no endpoint answers, 2 on bad flags.\n"
     "\n"
     "Examples:\n"
     "  kvctl shell\n"
     "  kvctl shell --exec \"begin; get acct/a; put acct/a 90; put acct/b 110; commit\"\n"
     "  kvctl shell < script.kv\n"
     "\n"
     "Flags:\n"
     "      --exec CMDS   run these ';'-separated commands instead of reading stdin\n",
     cmd_shell},
    {"status", 0, "kvctl status [flags]", "show the cluster's nodes",
     "Asks the coordinating node for the cluster's status and prints one line per node:\n"
     "id, address, state (up or down), rows and memory. -w json prints the status document\n"
     "as the node sends it. Exits 5 when a node is down (and says which on stderr).\n"
     "\n"
     "Examples:\n"
     "  kvctl status\n"
     "  kvctl --endpoints 10.0.0.1:7400 -w json status\n",
     cmd_status},
    {"stats", 0, "kvctl stats [flags]", "show the nodes' counters",
     "Asks the coordinating node for the cluster's status and prints every node's counters\n"
     "as a table, one row per counter, one column per node and the total: commits, aborts by\n"
     "reason, transaction and commit latencies, lock acquires, waits and resets, fabric\n"
     "operations, the redo log's bytes and syncs, and heap memory (docs/metrics.md). The same\n"
     "counters are served in Prometheus's format by kvserver --metrics. -w json prints each\n"
     "node's metrics object. Exits 5 when a node is down (its column shows '-').\n"
     "\n"
     "Examples:\n"
     "  kvctl stats\n"
     "  kvctl -w json stats\n",
     cmd_stats},
    {"help", 0, "kvctl help [COMMAND|exit-codes|escaping]", "help for a command or topic",
     "Prints help for kvctl, for a command, or for a topic: exit-codes, escaping.\n", cmd_help},
    {"version", 0, "kvctl version", "print the version", "Prints kvctl's version.\n",
     cmd_version},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static const char exit_codes_help[] =
    "Exit codes of kvctl:\n"
    "  0  success\n"
    "  1  error: the server refused the input (a key over 4 KiB or a value over 1 MiB:\n"
    "     RDKV_ETOOBIG; RDKV_EINVAL), a file could not be read, or anything unclassified\n"
    "  2  usage: unknown command or flag, missing or extra arguments, a bad duration, number\n"
    "     or endpoint, a scan of an empty range, malformed txn input (checked before\n"
    "     connecting)\n"
    "  3  not found: get or del of a key that is not there\n"
    "  4  aborted: the transaction conflicted (or a lock wait ran out) on every one of its\n"
    "     --retries retries (RDKV_EABORTED), or a txn guard ('expect') failed; nothing was\n"
    "     written\n"
    "  5  unavailable: no endpoint answered (or no endpoint's host name resolves:\n"
    "     RDKV_ENOHOST), a node the operation needed is down or did not answer in time\n"
    "     (RDKV_EUNAVAILABLE, RDKV_ETIMEDOUT); status: a node is down\n"
    "  6  commit result unknown (RDKV_EUNKNOWN): a participant did not answer after the\n"
    "     commit decision, so the transaction may or may not have taken effect; check before\n"
    "     retrying anything that is not idempotent\n"
    "shell (with --exec or a script) exits 1 when any command failed, else 0, as fdbcli\n"
    "does; its error messages name the status.\n"
    "Errors print on stderr as 'kvctl: error: <text> (RDKV_E...)'.\n";

static const char escaping_help[] =
    "Escaping in kvctl:\n"
    "Output (text): keys and values are printed as is when they are printable ASCII or valid\n"
    "UTF-8; a backslash prints as \\\\ and any other byte as \\xNN (fdbcli style). In scan and\n"
    "txn lines the key also escapes spaces (\\x20), so the first space ends the key. 'get'\n"
    "prints a printable value (tabs and newlines allowed) exactly as stored. --hex prints\n"
    "hex instead; 'get --raw' prints the exact bytes.\n"
    "Output (json): strings are JSON strings (control bytes as \\u00XX); a key or value that\n"
    "is not valid UTF-8, or any with --hex, comes as \"key_hex\"/\"value_hex\" with hex digits.\n"
    "Input: command-line arguments of get/put/del/scan are taken literally. In txn input and\n"
    "shell commands, tokens split on whitespace; \"double quotes\" group words and allow\n"
    "escapes; 'single quotes' group literally; escapes are \\xNN (any byte), \\\\, \\\", \\',\n"
    "\\ (space), \\; (a literal ';' in the shell), \\n and \\t. \"\" is the empty string.\n"
    "Example: put \"user 1\" \"caf\\xc3\\xa9\\x00\"\n";

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(commands[i].name, name)) return &commands[i];
    return NULL;
}

static void print_main_help(FILE *f)
{
    fprintf(f,
            "kvctl: the command-line client of rdkv, a transactional key-value store.\n"
            "\n"
            "Usage:\n"
            "  kvctl [flags] COMMAND [args]\n"
            "\n"
            "Commands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n%s\n", global_flags_help);
    fprintf(f, "Run 'kvctl COMMAND --help' (or 'kvctl help COMMAND') for a command's help,\n"
               "'kvctl help exit-codes' and 'kvctl help escaping' for those topics.\n");
}

static void print_command_help(const struct command *c)
{
    printf("Usage:\n  %s\n\n%s\n%s\nExit codes: see 'kvctl help exit-codes'.\n", c->usage, c->body,
           global_flags_help);
}

int cmd_help(struct inv *iv)
{
    if (iv->nargs == 0) {
        print_main_help(stdout);
        return flush_stdout();
    }
    if (iv->nargs > 1) return usage_err("help takes one topic, got %d", iv->nargs);
    const char *t = iv->args[0];
    const struct command *c = find_command(t);
    if (c) print_command_help(c);
    else if (!strcmp(t, "exit-codes") || !strcmp(t, "exit-code") || !strcmp(t, "exitcodes"))
        fputs(exit_codes_help, stdout);
    else if (!strcmp(t, "escaping")) fputs(escaping_help, stdout);
    else return usage_err("no help topic '%s' (commands, exit-codes, escaping)", t);
    return flush_stdout();
}

int cmd_version(struct inv *iv)
{
    (void)iv;
    printf("kvctl %s (rdkv %s)\n", RDKV_VERSION, RDKV_VERSION);
    return flush_stdout();
}

/* ---------------------------------------------------------------------------------------------
 * Flags and main. */

static int set_global(enum flag_id id, const char *v, const char *src)
{
    uint64_t u;
    int64_t ms;
    switch (id) {
    case F_ENDPOINTS:
        G.endpoints = v;
        G.endpoints_from = src[0] == '-' ? "--endpoints" : src; /* src: a flag on the stack */
        return 0;
    case F_WRITE_OUT:
        if (!strcmp(v, "text") || !strcmp(v, "simple")) G.out = OUT_TEXT;
        else if (!strcmp(v, "json")) G.out = OUT_JSON;
        else return usage_err("%s must be text or json, got '%s'", src, v);
        return 0;
    case F_HEX: G.hex = true; return 0;
    case F_CONNECT_TIMEOUT:
    case F_TIMEOUT:
    case F_LOCK_TIMEOUT:
        if (!parse_duration_ms(v, &ms))
            return usage_err("%s needs a duration such as 500ms, 2s or 1m, got '%s'", src, v);
        if (id == F_CONNECT_TIMEOUT) G.connect_ms = ms;
        else if (id == F_TIMEOUT) G.timeout_ms = ms;
        else G.lock_ms = ms;
        return 0;
    case F_RETRIES:
        if (!parse_uint(v, 1000000, &u))
            return usage_err("%s needs a number of retries (0..1000000), got '%s'", src, v);
        G.retries = (unsigned)u;
        return 0;
    case F_SECRET_FILE: G.secret_file = v; return 0;
    default: return 0;
    }
}

static int read_env(void)
{
    static const struct {
        const char *env;
        enum flag_id id;
    } envs[] = {
        {"KVCTL_ENDPOINTS", F_ENDPOINTS},         {"KVCTL_WRITE_OUT", F_WRITE_OUT},
        {"KVCTL_CONNECT_TIMEOUT", F_CONNECT_TIMEOUT}, {"KVCTL_TIMEOUT", F_TIMEOUT},
        {"KVCTL_LOCK_TIMEOUT", F_LOCK_TIMEOUT},   {"KVCTL_RETRIES", F_RETRIES},
    };
    for (size_t i = 0; i < sizeof envs / sizeof envs[0]; i++) {
        const char *v = getenv(envs[i].env);
        if (v && *v) {
            int rc = set_global(envs[i].id, v, envs[i].env);
            if (rc) return rc;
        }
    }
    return 0;
}

static const struct flag *find_long(const char *name, size_t n)
{
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (strlen(flags[i].lng) == n && !strncmp(flags[i].lng, name, n)) return &flags[i];
    return NULL;
}

static const struct flag *find_short(char c)
{
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (flags[i].shrt == c || (flags[i].shrt2 && flags[i].shrt2 == c)) return &flags[i];
    return NULL;
}

/* Finds the command named in argv for --help (the first argument that names one). */
static const struct command *help_target(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--")) break;
        const struct command *c = find_command(argv[i]);
        if (c) return c;
    }
    return NULL;
}

/* Sorts argv into the command, its arguments and flags (iv->args has room for argc). Returns 0,
 * or the exit status after a usage error. */
static int parse_cmdline(int argc, char **argv, struct inv *iv)
{
    int rc;
    bool dashdash = false;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (dashdash || a[0] != '-' || !a[1]) {
            if (!iv->cmd) {
                iv->cmd = find_command(a);
                if (!iv->cmd) return usage_err("unknown command '%s'", a);
                cur_cmd = iv->cmd->name;
                continue;
            }
            iv->args[iv->nargs++] = a;
            continue;
        }
        if (!strcmp(a, "--")) {
            dashdash = true;
            continue;
        }
        const struct flag *fl;
        const char *val = NULL;
        char shown[64];
        if (a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            size_t n = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
            fl = find_long(a + 2, n);
            snprintf(shown, sizeof shown, "--%.*s", (int)(n < 40 ? n : 40), a + 2);
            if (eq) val = eq + 1;
        } else {
            fl = find_short(a[1]);
            snprintf(shown, sizeof shown, "-%c", a[1]);
            if (a[2]) val = a + 2;
        }
        if (!fl) return usage_err("unknown flag '%s'", a);
        unsigned bit = 1u << fl->id;
        if (!(bit & GLOBAL_FLAGS) && !(iv->cmd && (iv->cmd->flags & bit))) {
            if (iv->cmd) return usage_err("%s does not take the flag %s", iv->cmd->name, shown);
            return usage_err("the flag %s goes after its command", shown);
        }
        if (fl->value && !val) {
            if (i + 1 >= argc) return usage_err("flag %s needs a value", shown);
            val = argv[++i];
        } else if (!fl->value && val) {
            return usage_err("flag %s takes no value", shown);
        }
        if (fl->id == F_VERSION) {
            iv->cmd = find_command("version");
            continue;
        }
        if (bit & GLOBAL_FLAGS) {
            if ((rc = set_global(fl->id, val ? val : "", shown))) return rc;
        } else {
            iv->val[fl->id] = val ? val : "";
        }
    }
    if (!iv->cmd) {
        print_main_help(stderr);
        return EXIT_USAGE;
    }
    return 0;
}

int main(int argc, char **argv)
{
    /* --help wins over everything else on the line, as with cobra. */
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            const struct command *c = help_target(argc, argv);
            if (c && strcmp(c->name, "help")) print_command_help(c);
            else print_main_help(stdout);
            return flush_stdout();
        }
    int rc = read_env();
    if (rc) return rc;
    struct inv iv = {0};
    iv.args = xmalloc(sizeof(char *) * (size_t)argc);
    rc = parse_cmdline(argc, argv, &iv);
    if (!rc) rc = iv.cmd->run(&iv);
    if (S) rdkv_session_close(S);
    free(iv.args);
    return rc;
}
