/* A node's partition: rows in the node's registered arena, allocated through a jemalloc arena
 * whose extent hooks carve from one region of it (no row ever lies outside), a hash index
 * (XXH3) in the arena that peers probe with one-sided READs and only the owner changes, and an
 * ordered index on the owner for scans. A row's first 64 bytes are its lock line; once a piece
 * of memory has been a row it stays a row for ever (rows are recycled, never handed back to the
 * allocator), so a peer's stale lock operation can only ever land on a lock line. docs/storage.md */
#ifndef RDKV_STORE_H
#define RDKV_STORE_H

#include "rdma/fabric.h"

#include <stdbool.h>
#include <stdint.h>

#define STORE_KEY_MAX_DEFAULT 4096u
#define STORE_VALUE_MAX_DEFAULT (1u << 20)
#define STORE_KEY_MAX_LIMIT 65535u       /* the most --key-max may say */
#define STORE_VALUE_MAX_LIMIT (64u << 20) /* the most --value-max may say */

/* ---------------------------------------------------------------------------------------------
 * The row, at a 64-byte aligned rptr:
 *   [0, 64)          the lock line (whatever row-lock algorithm the cluster uses)
 *   [64, 128)        struct row_hdr
 *   [128, 128 + cap) inline bytes: the key, then the value when it fits (vext == RPTR_NULL)
 * A value that does not fit lives in a separate allocation at vext (same node), vlen bytes.
 * The owner changes a row's header and bytes only while the writer holds the row's exclusive
 * lock, so a reader holding the row lock (shared or exclusive) reads a stable row. */
#define ROW_HDR_OFF 64u
#define ROW_DATA_OFF 128u
#define ROW_LIVE 1u /* flags: the row holds the key's current value */
#define ROW_DEAD 2u /* flags: deleted (unindexed; the row waits to be recycled) */
#define ROW_MAGIC 0x5257u

struct row_hdr {
    uint64_t version; /* bumped by every committed change; never 0 for a live row */
    uint32_t klen;
    uint32_t vlen;
    uint32_t cap;     /* inline bytes after the header */
    uint16_t flags;   /* ROW_LIVE / ROW_DEAD */
    uint16_t magic;   /* ROW_MAGIC */
    rptr vext;        /* the value's separate allocation, or RPTR_NULL: inline after the key */
    uint64_t khash;   /* XXH3-64 of the key */
    uint64_t reserved[3];
};
_Static_assert(sizeof(struct row_hdr) == 64, "row header is one line");

/* A decoded row: pointers into the buffer it was decoded from. */
struct row_view {
    uint64_t version;
    uint16_t flags;
    uint32_t klen, vlen;
    const uint8_t *key;
    const uint8_t *val;  /* NULL when the value is out of line (vext) and not in the buffer */
    rptr vext;
    uint32_t cap;
};

/* Decodes bytes read from a row starting at ROW_HDR_OFF (the header, then `len - 64` inline
 * bytes). The bytes may come from a peer or a racing owner, so everything is checked and nothing
 * past len is read: 0, or RDKV_EPROTO (not a row header, or lengths over the limits), or
 * RDKV_ETOOBIG when the buffer is too short for the inline key and value: then out's klen, vlen
 * and vext are filled (all 0 when len < 64), and the caller READs again
 * row_read_len(out.klen, out.vlen, out.vext == RPTR_NULL) bytes. RDKV_EINVAL: buf or out NULL. */
int row_decode(const void *buf, size_t len, uint32_t key_max, uint32_t value_max,
               struct row_view *out);
/* Bytes to READ from ROW_HDR_OFF to get header, key and inline value of a row with these sizes. */
static inline uint64_t row_read_len(uint32_t klen, uint32_t vlen, bool inline_value)
{
    return 64u + klen + (inline_value ? vlen : 0u);
}

/* ---------------------------------------------------------------------------------------------
 * The hash index, region "store.index": a 64-byte header (struct store_index_hdr), then
 * nbuckets buckets of 8 slots of 8 bytes (one cache line each). A slot is 0 (empty),
 * STORE_SLOT_TOMB (deleted), or (tag << 48) | row offset, tag = the hash's top 16 bits with 0 and
 * 0xFFFF avoided. A key's probe starts at bucket hash & (nbuckets - 1) and moves to the next
 * bucket (wrapping) while the bucket has no empty slot. The owner changes slots with single
 * 8-byte stores, so a peer's READ of a bucket sees each slot either old or new. */
#define STORE_SLOTS_PER_BUCKET 8u
#define STORE_SLOT_TOMB 1ull
#define STORE_INDEX_MAGIC 0x5844494b56444Bull
/* The magic of a copy's index that is not served yet (store_opts.hidden): a peer's open of it is
 * refused with RDKV_EUNAVAILABLE until store_publish. */
#define STORE_INDEX_MAGIC_HIDDEN 0x4e4449484b56444Bull

struct store_index_hdr {
    uint64_t magic;
    uint64_t nbuckets; /* a power of two */
    uint32_t key_max, value_max;
    uint64_t reserved[5];
};
_Static_assert(sizeof(struct store_index_hdr) == 64, "index header is one line");

static inline uint16_t store_slot_tag(uint64_t hash)
{
    uint16_t t = (uint16_t)(hash >> 48);
    return t == 0 ? 1 : (t == 0xFFFF ? 0xFFFE : t);
}
uint64_t store_hash(const void *key, uint32_t klen); /* XXH3-64 */
/* The tag of a key that ends in "{tag}" (the bytes after its last '{', up to the final '}',
 * not empty), or the whole key. Keys with the same tag are placed on the same partition (the
 * idea of Redis Cluster's hash tags; the tag comes last here, so that a key's leading bytes,
 * which the range locks use, stay its own). */
void store_key_tag(const void *key, uint32_t klen, const void **tag, uint32_t *tlen);
/* The hash that places a key on a partition: store_hash of its tag. */
uint64_t store_place_hash(const void *key, uint32_t klen);

/* ---------------------------------------------------------------------------------------------
 * The owner's side. */
struct store_opts {
    uint64_t heap_bytes;    /* the row heap's region; 0: half of what the arena has left (locks,
                               range spaces and benchmarks take their regions from the rest) */
    uint64_t index_buckets; /* 0: one bucket per 1 KiB of heap; rounded up to a power of two.
                               No resizing: past 85% of the slots, publish gives RDKV_ENOSPC */
    uint32_t key_max;       /* 0: STORE_KEY_MAX_DEFAULT */
    uint32_t value_max;     /* 0: STORE_VALUE_MAX_DEFAULT */
    const char *name;       /* its regions' prefix: NULL is "store" (the node's primary
                               partition); a backup copy's is "store.b<partition>" (at most
                               STORE_NAME_MAX bytes) */
    bool hidden;            /* peers cannot open it (store_remote_open: RDKV_EUNAVAILABLE) until
                               store_publish: a backup copy, until it is promoted */
};
#define STORE_NAME_MAX 16
void store_opts_init(struct store_opts *o);

struct store;

/* Reserves the regions, creates the jemalloc arena over the heap and an empty index. One store
 * per name per fabric. Fails with a reason in err (RDKV_ENOSPC when the arena is too small). */
int store_open(struct fabric *f, const struct store_opts *o, struct store **out, char *err,
               size_t errcap);
void store_close(struct store *s);
/* Lets peers open a store opened hidden (nothing for one already published). */
void store_publish(struct store *s);
/* Hides a published store again (a primary handing its partition back becomes a backup): peers
 * that open it from now on are refused; those that opened it before keep their handles (their
 * transactions fail at commit: their routes moved). */
void store_hide(struct store *s);
uint32_t store_key_max(const struct store *s);
uint32_t store_value_max(const struct store *s);

/* Every function below is thread-safe (index and allocator changes take the store's mutex;
 * lookups and scans run concurrently with each other, and wait only for a publish or a delete,
 * which are preferred over new readers). Keys of length 0 are allowed. */

/* The live row of key, or RDKV_ENOTFOUND. */
int store_lookup(struct store *s, const void *key, uint32_t klen, rptr *row);

/* Allocates a row for key with value (flags 0: not yet LIVE, not indexed), with inline room for
 * the value when it fits in a reasonable row. RDKV_ETOOBIG past key_max / value_max, RDKV_ENOSPC
 * when the heap is full. The row's lock line is preserved if the row is a recycled one. Used at
 * 2PC prepare so that the commit cannot run out of memory. */
int store_row_alloc(struct store *s, const void *key, uint32_t klen, const void *val,
                    uint32_t vlen, rptr *row);
/* Makes an allocated row LIVE and indexes it (the key must be absent: RDKV_EEXIST otherwise, and
 * the row is left as it was). */
int store_row_publish(struct store *s, rptr row);
/* Gives back a row that store_row_alloc returned and that was never published (it is recycled
 * like a deleted row; anything else is left alone). */
void store_row_discard(struct store *s, rptr row);

/* Prepares a new value for a live row: returns an opaque staged value (inline when it fits the
 * row's capacity, else a separate allocation) so that store_value_install cannot fail.
 * RDKV_ETOOBIG past value_max, RDKV_ENOSPC when the heap is full, RDKV_EINVAL for a dead row. */
struct store_staged {
    rptr row;
    rptr vext; /* RPTR_NULL: the value goes inline */
    const void *val;
    uint32_t vlen;
};
int store_value_stage(struct store *s, rptr row, const void *val, uint32_t vlen,
                      struct store_staged *out);
/* Installs a staged value (the caller holds the row's exclusive lock): copies it, frees the old
 * separate allocation if any, bumps the version. `val` must still be valid. */
void store_value_install(struct store *s, const struct store_staged *st);
void store_value_unstage(struct store *s, struct store_staged *st);

/* Deletes a live row (the caller holds its exclusive lock): unindexes it, marks it DEAD, frees
 * its separate value, and queues it for recycling; its lock line stays a lock line. RDKV_EINVAL
 * when row is not a live, indexed row. */
int store_row_delete(struct store *s, rptr row);
/* Applies one committed write by key, as a redo log's replay and a backup copy do: a put
 * inserts the key or overwrites its value; a delete removes it (absent: 0). The caller holds
 * whatever orders writes to the same key. 0, or the store's refusal (RDKV_ENOSPC, RDKV_ETOOBIG,
 * RDKV_ENOMEM). */
int store_apply(struct store *s, bool del, const void *key, uint32_t klen, const void *val,
                uint32_t vlen);

/* Reads a local row: a view straight into the arena (valid while the caller holds the row's
 * lock); an out-of-line value is resolved too (val points at it). RDKV_EPROTO if row is not a
 * row. */
int store_row_view(struct store *s, rptr row, struct row_view *out);

/* Scans live rows with lo <= key < hi in key order (bytewise, shorter first on a common
 * prefix), hi == NULL: no upper bound; after, when not NULL, starts strictly after that key
 * instead of at lo (when after < lo, lo still applies). Calls fn for each, up to limit rows
 * (0: no limit); fn returns false to stop. The views are valid only during the call: their keys
 * are stable, their values only if the caller holds the rows' locks. fn runs under the index's
 * read lock: it may call store_row_view, but nothing else of the store (a lookup could deadlock
 * behind a waiting writer). Returns the number of rows visited or a status. */
typedef bool (*store_scan_fn)(void *arg, rptr row, const struct row_view *v);
long store_scan(struct store *s, const void *lo, uint32_t lolen, const void *hi, uint32_t hilen,
                const void *after, uint32_t afterlen, uint64_t limit, store_scan_fn fn,
                void *arg);

struct store_stats {
    uint64_t rows;            /* live rows */
    uint64_t heap_bytes;      /* the heap region */
    uint64_t heap_used;       /* bytes jemalloc has taken from it (extents in use) */
    uint64_t index_buckets, index_used_slots, index_tombs;
    uint64_t alloc_failures;  /* allocations refused for lack of memory */
};
void store_stats(struct store *s, struct store_stats *out);

/* ---------------------------------------------------------------------------------------------
 * A peer's side: finding rows with one-sided READs. */
struct store_remote {
    uint16_t node;
    rptr index;        /* the region "store.index" */
    uint64_t nbuckets;
    uint32_t key_max, value_max;
};

/* Reads the index header of node's store `name` (NULL: "store"; fab_region_lookup + one READ).
 * RDKV_ENOTFOUND: node has no such store; RDKV_EUNAVAILABLE: it is hidden (not served yet). */
int store_remote_open(struct fab_ctx *c, uint16_t node, const char *name,
                      struct store_remote *out);
/* Probes the index with one-sided READs (one per bucket visited) and returns up to max row
 * candidates whose tag matches, in probe order (the caller locks a candidate, then checks its
 * key). 0 candidates: the key was absent when its probe ran. Returns the count or a status:
 * RDKV_ETOOBIG when more than max slots match (ask again with more room), RDKV_EPROTO for a
 * slot that names no row, or the READ's error. */
int store_remote_probe(struct fab_ctx *c, const struct store_remote *r, uint64_t hash,
                       rptr *cands, unsigned max);

/* ---------------------------------------------------------------------------------------------
 * Reading another node's row under its lock (the transaction layer's reads): one READ of the
 * header, the key and the inline value; a second when the first was too short (the header says
 * how much there is); one more for a value out of line. The caller owns the memory (alloc). */

/* The first READ of key's row at `row`: where it starts, and its length -- the header and the
 * key, and with want_val the whole row as a former read found it (hint: its readlen; 0: none)
 * or a guess at a short inline value. A lock may carry this READ in its own chain (rd_at). */
struct row_read {
    rptr at;
    uint64_t len;
};
struct row_read store_row_first_read(rptr row, uint32_t klen, uint32_t hint, bool want_val);

/* Reads key's row at first.at on r's node with c (r: that node's limits), first.len bytes of it
 * already in pre (read under the lock; NULL: read them now). 1: it is key's live row -- v->version, and with want_val v->val/vlen in
 * memory from alloc(arg, n) (NULL there: RDKV_ENOMEM) -- and *readlen what a first read of it
 * should take next time; 0: it is not (recycled, dead, another key): look again; or a status
 * (a READ's error, RDKV_ENOMEM). */
int store_remote_read_row(struct fab_ctx *c, const struct store_remote *r, const void *key,
                          uint32_t klen, bool want_val, struct row_read first, const uint8_t *pre,
                          void *(*alloc)(void *arg, size_t n), void *arg, struct row_view *v,
                          uint32_t *readlen);
/* Reads key's row at `row` without its lock (the transaction layer's reads without the lock,
 * docs/transactions.md): one chain of three READs -- the first `peek` bytes of the row's lock
 * line, the row's first read (hint: a former read's length, as store_row_first_read), the lock
 * line's bytes again. 1, with v->version and the value in v (memory from alloc(arg, n)), only
 * when quiet(before, after) says no writer was in the line at the row's READ and the bytes hold
 * key's live row with its whole value inline; 0 when it cannot say so (the caller reads under
 * the lock); or a status (a READ's error, RDKV_ENOMEM). peek is at most 64 bytes. */
int store_remote_read_quiet(struct fab_ctx *c, const struct store_remote *r, const void *key,
                            uint32_t klen, rptr row, uint32_t hint, uint32_t peek,
                            bool (*quiet)(const void *before, const void *after),
                            void *(*alloc)(void *arg, size_t n), void *arg, struct row_view *v);

#endif
