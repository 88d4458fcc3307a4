/* A small streaming JSON writer (objects, arrays, strings with full escaping, numbers) for
 * benchmark output and status replies. It tracks commas itself; the caller only nests. */
#ifndef RDKV_JSON_H
#define RDKV_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 32

struct json {
    FILE *f;
    int depth;
    bool need_comma[JSON_MAX_DEPTH];
    bool after_key;
    bool pretty;
};

void json_init(struct json *j, FILE *f, bool pretty);
void json_obj_begin(struct json *j);
void json_obj_end(struct json *j);
void json_arr_begin(struct json *j);
void json_arr_end(struct json *j);
void json_key(struct json *j, const char *key);
void json_str(struct json *j, const char *s);
void json_strn(struct json *j, const char *s, size_t n);
void json_i64(struct json *j, int64_t v);
void json_u64(struct json *j, uint64_t v);
void json_double(struct json *j, double v); /* non-finite values are written as null */
void json_bool(struct json *j, bool v);
void json_null(struct json *j);
/* A value already written as JSON (n bytes of text, e.g. a peer's status reply), as it is: the
 * caller vouches that it is one whole, valid value. */
void json_raw(struct json *j, const char *text, size_t n);

/* key + value shorthands */
void json_kv_str(struct json *j, const char *key, const char *v);
void json_kv_i64(struct json *j, const char *key, int64_t v);
void json_kv_u64(struct json *j, const char *key, uint64_t v);
void json_kv_double(struct json *j, const char *key, double v);
void json_kv_bool(struct json *j, const char *key, bool v);

#endif
