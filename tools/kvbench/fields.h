/* Result and request structs of kvbench, declared once as a table of fields (name, offset, type,
 * how two results merge, and the labels a report prints them under). One table drives the wire
 * encoding (common/pack.h, little-endian, in table order), the merge of per-node or per-thread
 * results, and the counters a report lists; a struct's encoding is the order of its table. */
#ifndef RDKV_KVBENCH_FIELDS_H
#define RDKV_KVBENCH_FIELDS_H

#include "common/json.h"
#include "common/pack.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* How a field is encoded: U8..U64 and I32/I64 as that many little-endian bytes (the signed ones
 * as their two's complement), F64 as its IEEE bits in a u64, STR as pack_str (cap bytes in the
 * struct), HIST as hist_pack. */
enum bf_type { BF_U8, BF_U16, BF_U32, BF_I32, BF_U64, BF_I64, BF_F64, BF_STR, BF_HIST };
/* How bf_merge combines a field: KEEP leaves dst alone (the caller merges it), SUM adds, MAX
 * keeps the larger, FIRST keeps dst's unless it is zero, HIST merges histograms. */
enum bf_merge { BF_KEEP, BF_SUM, BF_MAX, BF_FIRST };

struct bench_field {
    const char *name;  /* JSON key in reports (NULL: not a reported counter) */
    const char *label; /* YCSB text metric ("Timeouts"; NULL: not in the text report) */
    size_t off;
    uint8_t type, merge;
    uint16_t n; /* elements (arrays of the type); BF_STR: the buffer's size */
};

/* A field of struct S: BFIELD(S, f, BF_U64, BF_SUM) and a reported one with its labels. */
#define BFIELD(S, f, t, m) {NULL, NULL, offsetof(S, f), (t), (m), 1}
#define BFIELD_N(S, f, t, m, cnt) {NULL, NULL, offsetof(S, f), (t), (m), (cnt)}
#define BFIELD_STR(S, f) {NULL, NULL, offsetof(S, f), BF_STR, BF_KEEP, sizeof(((S *)0)->f)}
#define BFIELD_R(S, f, t, m, json, text) {(json), (text), offsetof(S, f), (t), (m), 1}
#define BFIELDS(t) (t), (sizeof(t) / sizeof *(t))

void bf_pack(const struct bench_field *t, size_t n, const void *s, struct pack_w *w);
/* Fills s from r (histograms are initialized first); false when a histogram does not decode
 * (r->err tells a short read). */
bool bf_unpack(const struct bench_field *t, size_t n, void *s, struct pack_r *r);
/* Decodes exactly len bytes: 0, or RDKV_EPROTO when they are short, long or malformed. */
int bf_unpack_all(const struct bench_field *t, size_t n, void *s, const void *p, size_t len);
void bf_merge(const struct bench_field *t, size_t n, void *dst, const void *src);
/* Zeroes s and initializes its histograms. */
void bf_init(const struct bench_field *t, size_t n, void *s, size_t size);

/* A reported counter's value as a u64 (the caller's table says which fields are counters). */
uint64_t bf_u64(const struct bench_field *f, const void *s);
/* Every field with a label, in table order: "[series], Label, value" lines. */
void bf_print_ycsb(FILE *out, const char *series, const struct bench_field *t, size_t n,
                   const void *s);
/* Every field with a JSON name: "name": value. */
void bf_json(struct json *j, const struct bench_field *t, size_t n, const void *s);

#endif
