/* Streaming JSON writer. */
#include "json.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

void json_init(struct json *j, FILE *f, bool pretty)
{
    j->f = f;
    j->depth = 0;
    j->need_comma[0] = false;
    j->after_key = false;
    j->pretty = pretty;
}

static void indent(struct json *j)
{
    if (!j->pretty) return;
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++) fputs("  ", j->f);
}

/* Called before every value or key. */
static void pre_value(struct json *j)
{
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (j->need_comma[j->depth]) fputc(',', j->f);
    if (j->depth > 0) indent(j);
    j->need_comma[j->depth] = true;
}

static void open(struct json *j, char c)
{
    pre_value(j);
    fputc(c, j->f);
    if (j->depth + 1 < JSON_MAX_DEPTH) j->depth++;
    j->need_comma[j->depth] = false;
}

static void close_(struct json *j, char c)
{
    bool had = j->need_comma[j->depth];
    if (j->depth > 0) j->depth--;
    if (had) indent(j);
    fputc(c, j->f);
    if (j->depth == 0 && j->pretty) fputc('\n', j->f);
}

void json_obj_begin(struct json *j) { open(j, '{'); }
void json_obj_end(struct json *j) { close_(j, '}'); }
void json_arr_begin(struct json *j) { open(j, '['); }
void json_arr_end(struct json *j) { close_(j, ']'); }

static void write_escaped(struct json *j, const char *s, size_t n)
{
    fputc('"', j->f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': fputs("\\\"", j->f); break;
        case '\\': fputs("\\\\", j->f); break;
        case '\n': fputs("\\n", j->f); break;
        case '\r': fputs("\\r", j->f); break;
        case '\t': fputs("\\t", j->f); break;
        case '\b': fputs("\\b", j->f); break;
        case '\f': fputs("\\f", j->f); break;
        default:
            if (c < 0x20 || c == 0x7f) fprintf(j->f, "\\u%04x", c);
            else fputc(c, j->f);
        }
    }
    fputc('"', j->f);
}

void json_key(struct json *j, const char *key)
{
    pre_value(j);
    write_escaped(j, key, strlen(key));
    fputs(j->pretty ? ": " : ":", j->f);
    j->after_key = true;
}

void json_strn(struct json *j, const char *s, size_t n)
{
    pre_value(j);
    write_escaped(j, s, n);
}

void json_str(struct json *j, const char *s)
{
    if (!s) {
        json_null(j);
        return;
    }
    json_strn(j, s, strlen(s));
}

void json_i64(struct json *j, int64_t v)
{
    pre_value(j);
    fprintf(j->f, "%" PRId64, v);
}

void json_u64(struct json *j, uint64_t v)
{
    pre_value(j);
    fprintf(j->f, "%" PRIu64, v);
}

void json_double(struct json *j, double v)
{
    pre_value(j);
    if (!isfinite(v)) fputs("null", j->f);
    else fprintf(j->f, "%.15g", v);
}

void json_bool(struct json *j, bool v)
{
    pre_value(j);
    fputs(v ? "true" : "false", j->f);
}

void json_null(struct json *j)
{
    pre_value(j);
    fputs("null", j->f);
}

void json_kv_str(struct json *j, const char *key, const char *v) { json_key(j, key); json_str(j, v); }
void json_kv_i64(struct json *j, const char *key, int64_t v) { json_key(j, key); json_i64(j, v); }
void json_kv_u64(struct json *j, const char *key, uint64_t v) { json_key(j, key); json_u64(j, v); }
void json_kv_double(struct json *j, const char *key, double v) { json_key(j, key); json_double(j, v); }
void json_kv_bool(struct json *j, const char *key, bool v) { json_key(j, key); json_bool(j, v); }

void json_raw(struct json *j, const char *text, size_t n)
{
    pre_value(j);
    fwrite(text, 1, n, j->f);
}
