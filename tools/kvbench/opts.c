/* kvbench's table-driven option parsing (opts.h). */
#include "tools/kvbench/opts.h"

#include "common/parse.h"

#include <string.h>

void bench_opts_help(const struct bench_cmd *c, FILE *out)
{
    fputs(c->head, out);
    for (size_t i = 0; i < c->nopts; i++) fputs(c->opts[i].help, out);
    if (c->tail) fputs(c->tail, out);
}

static const struct bench_opt *find(const struct bench_cmd *c, const char *o)
{
    for (size_t i = 0; i < c->nopts; i++) {
        const struct bench_opt *d = &c->opts[i];
        if (d->name && !strcmp(d->name, o)) return d;
        if (d->kind == BOPT_HELP && !strcmp(o, "-h")) return d;
    }
    return NULL;
}

/* One option's value into opts: exits 2 when it is bad. */
static void set(const struct bench_cmd *c, const struct bench_opt *d, void *opts, const char *v)
{
    char *at = (char *)opts + d->off;
    uint64_t u;
    double x;
    switch (d->kind) {
    case BOPT_UINT:
        if (parse_uint_range(v, (uint64_t)d->lo, (uint64_t)d->hi, &u))
            bench_usage_error(c->name, d->err, v);
        *(unsigned *)at = (unsigned)u;
        break;
    case BOPT_DOUBLE:
        if (parse_double(v, &x) || !(x >= d->lo) || x > d->hi)
            bench_usage_error(c->name, d->err, v);
        *(double *)at = x;
        break;
    case BOPT_STR: *(const char **)at = v; break;
    case BOPT_FN:
        if (d->fn(opts, v)) bench_usage_error(c->name, d->err, v);
        break;
    default: break;
    }
}

int bench_opts_parse(const struct bench_cmd *c, void *opts, int argc, char **argv)
{
    struct bench_common *co = (struct bench_common *)((char *)opts + c->common);
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const struct bench_opt *d = find(c, o);
        if (d && d->kind == BOPT_HELP) {
            bench_opts_help(c, stdout);
            return 1;
        }
        if (d && d->given) *(bool *)((char *)opts + d->given - 1) = true;
        if (d && d->kind == BOPT_FLAG) {
            *(bool *)((char *)opts + d->off) = true;
            continue;
        }
        if (bench_common_opt(co, c->name, argc, argv, &i)) continue;
        if (!d) bench_usage_error(c->name, "unknown option '%s'", o);
        if (i + 1 >= argc)
            bench_usage_error(c->name, d->missing ? d->missing : "option '%s' needs a value", o);
        set(c, d, opts, argv[++i]);
    }
    return 0;
}
