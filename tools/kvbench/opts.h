/* kvbench's command lines, declared once per subcommand: a table of options (name, arity, the
 * lines of --help that describe it, where its value goes), parsed by one function that also
 * prints --help from the table. Options every command shares (bench_common: --nodes, --config,
 * --seconds, --json, ...) appear in a table for their help and for "was it given", and are parsed
 * by bench_common_opt. Bad usage prints "kvbench CMD: ..." and exits 2, as it always did. */
#ifndef RDKV_KVBENCH_OPTS_H
#define RDKV_KVBENCH_OPTS_H

#include "tools/kvbench/bench.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum bench_opt_kind {
    BOPT_HELP,   /* -h, --help: prints the help, the command ends with 0 */
    BOPT_COMMON, /* one of bench_common's options (bench_common_opt parses it) */
    BOPT_FLAG,   /* no value: sets a bool */
    BOPT_UINT,   /* an unsigned in [lo, hi] */
    BOPT_DOUBLE, /* a double in [lo, hi] */
    BOPT_STR,    /* a string, kept as given */
    BOPT_FN,     /* fn parses it */
};

struct bench_opt {
    const char *name; /* "--threads" */
    unsigned char kind;
    const char *help; /* its lines of --help, verbatim (may be "": told by another's) */
    size_t off;       /* where the value goes, in the command's options struct */
    size_t given;     /* 1 + offset of a bool set when the option is given (0: none) */
    double lo, hi;
    const char *err;  /* the message for a bad value: one %s, the value */
    /* BOPT_FN: 0, or non-zero for err; may exit itself with a message of its own */
    int (*fn)(void *opts, const char *v);
    /* the message when the value is missing (one %s: the option; NULL: "option '%s' needs a
     * value") */
    const char *missing;
};

/* Table rows: the options struct type is the macro's first argument. */
#define BOPT_GIVEN(T, g) (offsetof(T, g) + 1)

/* Rows and text every command's table shares: -h/--help (its help line as the command aligns
 * it), and how --out's default reads. */
#define BOPT_ROW_HELP(text) {"--help", BOPT_HELP, (text), 0, 0, 0, 0, NULL, NULL, NULL}
#define BOPT_OUT_DEFAULT                                                                        \
    "                    made in the current directory; docs/reports holds the\n"                \
    "                    published ones)\n"

struct bench_cmd {
    const char *name; /* "lock", for messages */
    const char *head; /* usage and description, before the options */
    const struct bench_opt *opts;
    size_t nopts;
    const char *tail; /* after the options (examples) */
    size_t common;    /* offset of the struct bench_common in the options struct */
};

/* A command's declaration: its options struct type T holds a struct bench_common named co. */
#define BENCH_CMD(name, head, opts, tail, T)                                                     \
    {(name), (head), (opts), sizeof(opts) / sizeof *(opts), (tail), offsetof(T, co)}

/* Parses argv[1..]: 0, or 1 after printing --help (the command returns 0). Exits 2 on bad
 * usage. */
int bench_opts_parse(const struct bench_cmd *c, void *opts, int argc, char **argv);
/* The help: head, every option's lines, tail. */
void bench_opts_help(const struct bench_cmd *c, FILE *out);

#endif
