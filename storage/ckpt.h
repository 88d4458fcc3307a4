/* Checkpoints of a node's partition: every live row of a store copied into one file, row by row
 * under each row's shared lock (no global pause), written to a temporary name and renamed into
 * place after an fsync of the file and of its directory. Recovery loads the newest valid
 * checkpoint into an empty store, then replays the redo log from the checkpoint's replay LSN.
 * A torn or corrupt file is refused as a whole. docs/storage.md, "Checkpoints". */
#ifndef RDKV_CKPT_H
#define RDKV_CKPT_H

#include "locks/lock.h"
#include "storage/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------------------------------------
 * On disk (all integers little-endian). A file "ckpt-%016llx.ckpt" is named by its replay LSN
 * (hex). It is a 64-byte header, blocks, and a 64-byte trailer. The file's seed is the XXH3-64
 * of the header's bytes [0,40) (all but the row count, which the writer knows only at the end):
 *
 * header   [0,8) magic "RDKVCKP1"   [8,12) version (1)   [12,16) header bytes (64)
 *          [16,18) node id   [18,24) zero   [24,32) cluster fingerprint
 *          [32,40) replay LSN   [40,48) rows   [48,56) zero
 *          [56,64) check: XXH3-64 of [0,56)
 * block    [0,4) CKPT_BLOCK_MAGIC   [4,8) rows in the block   [8,12) payload bytes
 *          [12,16) zero   [16,24) block number (0, 1, ...)
 *          [24,32) check: XXH3-64 of the payload seeded with XXH3-64 of [0,24) xor the file's
 *                  seed (so a block of another file, or moved, fails)
 *          then the payload: rows back to back, each {u32 klen, u32 vlen, key, value}, keys in
 *          strictly ascending order across the whole file (bytewise, shorter first)
 * state    (version 2, optional) one block of the caller's state (the transaction layer's:
 *          txn_env_state), after the row blocks: [0,4) CKPT_STATE_MAGIC   [4,8) zero
 *          [8,12) payload bytes   [12,16) zero   [16,24) the block number after the rows'
 *          [24,32) check as a row block's; then the bytes
 * trailer  [0,8) magic "RDKVCKPE"   [8,16) rows   [16,24) blocks (of rows)   [24,32) payload
 *          bytes (of rows)   [32,40) replay LSN   [40,48) state bytes (0: none)   [48,56) zero
 *          [56,64) check: XXH3-64 of [0,56) seeded with the file's seed
 * The trailer ends the file: bytes after it, a missing trailer, or totals that disagree make the
 * whole file refused. */
#define CKPT_MAGIC "RDKVCKP1"
#define CKPT_END_MAGIC "RDKVCKPE"
#define CKPT_VERSION 2u /* (version 1 files, without a state block, are read too) */
#define CKPT_HDR 64u
#define CKPT_BLOCK_HDR 32u
#define CKPT_TRAILER 64u
#define CKPT_BLOCK_MAGIC 0x4B4C4243u /* "CBLK" */
#define CKPT_STATE_MAGIC 0x41545343u /* "CSTA" */
#define CKPT_BLOCK_TARGET (1u << 20) /* a block is written once its payload passes this */
#define CKPT_KEEP 2                  /* checkpoints kept in a directory */

struct ckpt_info {
    uint16_t node;
    uint64_t fp;
    uint64_t replay_lsn;
    uint64_t rows, blocks;
    uint64_t bytes;         /* the file's size */
    uint64_t lock_retries;  /* row locks that timed out and were tried again (write) */
    int64_t max_hold_ns;    /* the longest the writer held one row's lock (write) ... */
    int64_t hold_ns;        /* ... and all its holds together, */
    uint64_t holds;         /* ... over this many (write) */
    unsigned skipped;       /* newer checkpoints refused before this one was loaded (load) */
    uint32_t version;       /* the file's format (decode, load) */
    /* the caller's state the file carries (none: NULL, 0): decode points into its buffer; load
     * hands out a copy the caller frees */
    uint8_t *state;
    size_t state_len;
    char path[512];         /* the file written or loaded */
};

/* A decoded row: pointers into the decoded buffer. Returns 0 to go on, else stops the decode
 * with that status. */
typedef int (*ckpt_row_fn)(void *arg, const void *key, uint32_t klen, const void *val,
                           uint32_t vlen);

/* Decodes a whole checkpoint image in memory (the fuzz target and the loader share it): checks
 * header, every block and the trailer, then -- only when all of it is good -- calls fn (may be
 * NULL) for each row in order. So fn never sees a row of a file that is refused. Returns 0;
 * RDKV_ECONFIG for a file of another node or cluster (node/fp given); RDKV_EPROTO for anything
 * torn or corrupt, with the reason in err; RDKV_ETOOBIG for a key or value past key_max /
 * value_max; fn's non-zero answer. info (may be NULL) gets the header's fields. */
int ckpt_decode(const uint8_t *buf, size_t len, uint16_t node, uint64_t fp, uint32_t key_max,
                uint32_t value_max, ckpt_row_fn fn, void *arg, struct ckpt_info *info, char *err,
                size_t errcap);

struct ckpt_write_opts {
    const struct lock_algo *row_lock; /* the cluster's row lock (txn's); must not be NULL */
    struct lock_thread *lt;           /* the calling thread's lock state */
    int64_t row_wait_ns;  /* one try at a row's shared lock (default 1 ms) ... */
    int64_t row_give_up_ns; /* ... tried again, with pauses, for at most this long (default 30 s)
                               before the checkpoint fails with RDKV_ETIMEDOUT */
    uint32_t batch;       /* rows collected per index pass (default 256) */
    const void *state;    /* the caller's state to carry (state_len bytes; none: NULL, 0), as
                             it is when the rows are copied: a restart gets it back (ckpt_info) */
    size_t state_len;
    /* Called around each row's read (enter true, then false), its row lock held (none: NULL):
     * a store whose writers take no row locks -- a replica's copy, written by its primary's
     * commits -- is read with their mutex held there, so that no write changes or recycles the
     * row under the reader. */
    void (*guard)(void *arg, bool enter);
    void *guard_arg;
};
void ckpt_write_opts_init(struct ckpt_write_opts *o);

/* Writes a checkpoint of s's live rows into dir as ckpt-<replay_lsn>.ckpt (replay_lsn: the redo
 * log's next LSN when the caller began the checkpoint: docs/storage.md says why that is the LSN
 * recovery must replay from), then removes all but the newest CKPT_KEEP checkpoints and any
 * leftover temporary files. Each row is copied under its shared lock (exclusive where the
 * algorithm has no shared mode) taken with a short deadline; transactions are never paused
 * otherwise. 0, or RDKV_EIO (a file operation failed: errno in err; nothing renamed into place),
 * RDKV_ETIMEDOUT (a row stayed locked past row_give_up_ns), RDKV_ENOMEM, a lock's error. */
int ckpt_write(struct store *s, const char *dir, uint16_t node, uint64_t fp, uint64_t replay_lsn,
               const struct ckpt_write_opts *o, struct ckpt_info *info, char *err, size_t errcap);

/* A batch of rows from ckpt_stream: nrows rows of (u32 klen, u32 vlen, key, value), keys
 * rising, in len bytes (decode with ckpt_rows_decode). 0 to go on, else the stream stops with
 * that status. */
typedef int (*ckpt_sink_fn)(void *arg, const uint8_t *rows, size_t len, uint32_t nrows);
/* The rows of a checkpoint without its file: s's live rows in key order, each read under its
 * shared row lock as ckpt_write reads them, handed to sink in batches of about batch_bytes (a
 * new replica's copy: docs/replication.md, "Re-replication"). info (may be NULL) gets the
 * counts (bytes: the rows' bytes). 0, sink's status, RDKV_ETIMEDOUT, RDKV_ENOMEM, a lock's
 * error; RDKV_EINVAL for missing arguments. */
int ckpt_stream(struct store *s, const struct ckpt_write_opts *o, size_t batch_bytes,
                ckpt_sink_fn sink, void *arg, struct ckpt_info *info);
/* Checks the nrows rows of a batch of len bytes (keys rising, within key_max and value_max)
 * and calls fn (may be NULL) for each as it goes. 0, RDKV_EPROTO or RDKV_ETOOBIG with the
 * reason in err, or fn's status. */
int ckpt_rows_decode(const uint8_t *buf, size_t len, uint32_t nrows, uint32_t key_max,
                     uint32_t value_max, ckpt_row_fn fn, void *arg, char *err, size_t errcap);

/* Loads the newest valid checkpoint of dir into s, which must hold no rows (RDKV_EINVAL
 * otherwise). A damaged newest file is refused whole (why: in err, also after a 0 return; the
 * count in info->skipped) and the older one is tried; a file is verified whole before its first
 * row is inserted. Rows go in through store_row_alloc and store_row_publish. Returns 0 (info
 * says which file and its replay LSN);
 * RDKV_ENOTFOUND: no checkpoint in dir (an empty or missing directory); RDKV_EPROTO or
 * RDKV_ECONFIG: checkpoints exist but none is valid (err says why, for each); RDKV_ETOOBIG:
 * rows past this store's key_max / value_max (nothing loaded); RDKV_ENOSPC: the store ran out
 * of room (it then holds part of the file: close it); RDKV_EIO. */
int ckpt_load(struct store *s, const char *dir, uint16_t node, uint64_t fp,
              struct ckpt_info *info, char *err, size_t errcap);

/* A checkpoint image in memory from rows given in strictly ascending key order (else the image
 * is refused by ckpt_decode), rows_per_block rows to a block: for tests and the fuzz target.
 * *out is malloc'd. 0, RDKV_EINVAL or RDKV_ENOMEM. */
struct ckpt_row {
    const void *key, *val;
    uint32_t klen, vlen;
};
int ckpt_image(uint16_t node, uint64_t fp, uint64_t lsn, const struct ckpt_row *rows, size_t n,
               unsigned rows_per_block, uint8_t **out, size_t *len);

/* The replay LSNs of dir's checkpoint files, newest first (up to max): the count, or RDKV_EIO. */
int ckpt_list(const char *dir, uint64_t *lsns, unsigned max);

#endif
