/* The node's redo log: a directory of segment files written by one writer thread through
 * io_uring, with group commit (every record queued since the last write goes out in one write and
 * one fdatasync). A record is reported durable only after the fdatasync that covered its bytes
 * returned 0; a failed write or sync fails that group and every later append until a restart
 * (after an optional fail-stop hook). Holds give a checkpoint a replay LSN below which every
 * record appended under a hold is applied. Recovery syncs the tail and reads what the device
 * holds, in LSN order, and cuts a torn tail; corruption in the middle is an error, never skipped.
 * docs/storage.md, "The redo log". */
#ifndef RDKV_WAL_H
#define RDKV_WAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------------------------------------
 * On disk (all integers little-endian).
 *
 * A segment file "wal-%016llx.log", named by the LSN of its first record (in hex), starts with a
 * 64-byte header:
 *   [0,8)   magic "RDKVWAL1"          [8,12)  version (1)        [12,16) header bytes (64)
 *   [16,18) node id   [18,24) zero    [24,32) cluster fingerprint (the config's)
 *   [32,40) first LSN                 [40,60) zero               [60,64) check: XXH3-64 of
 *                                                                        [0,60), low 32 bits
 * then records back to back, each a 32-byte header and its payload:
 *   [0,4)   magic and length: WAL_REC_MAGIC << 24 | payload bytes (so at most 16 MiB - 1)
 *   [4,8)   check: XXH3-64 of bytes [0,4) and [8, 32 + length), low 32 bits
 *   [8,16)  LSN: the previous record's plus one (the first record of a log is LSN 1)
 *   [16,24) txid (0 when the record has none)
 *   [24]    type (enum wal_type)       [25] flags (WAL_F_*)    [26,32) zero
 *   [32, 32 + length) payload
 * A record lies wholly inside one segment. */
#define WAL_SEG_MAGIC "RDKVWAL1"
#define WAL_VERSION 1u
#define WAL_SEG_HDR 64u
#define WAL_REC_HDR 32u
#define WAL_REC_MAGIC 0xA7u
#define WAL_REC_LIMIT ((1u << 24) - 1) /* the format's largest payload */

enum wal_type {
    WAL_COMMIT = 1,   /* a local or one-partition transaction's writes (wal_writes payload) */
    WAL_PREPARE = 2,  /* a 2PC participant's staged writes (u16 coordinator, wal_writes) */
    WAL_DECISION = 3, /* a 2PC coordinator's decision (u8 WAL_DECIDE_*, u16 count, u16 nodes[]) */
    WAL_END = 4,      /* a 2PC transaction is finished here: its records are no longer needed */
    /* a replicated node's log (server/replica.c; docs/replication.md, "Backups' logs"): */
    WAL_REPL = 5,     /* a KV_RPC_REPL payload, as applied to the copy of its partition here */
    WAL_FILL = 6,     /* a KV_RPC_REPL_COPY payload: rows of a copy being filled */
    WAL_MARK = 7,     /* a copy's history: u8 WAL_MARK_*, u16 partition, u64 epoch */
    WAL_TYPE_MAX = 7,
    /* 8..15 are reserved for later record types (checkpoint begin and end, operator
     * overrides); a reader refuses them as corruption until it knows them. Other values are
     * corruption. */
    WAL_TYPE_RESERVED_MAX = 15,
};
#define WAL_DECIDE_COMMIT 1u
#define WAL_DECIDE_ABORT 2u
#define WAL_MARK_CREATE 1u /* the copy starts empty and full here (the cluster's creation) */
#define WAL_MARK_BEGIN 2u  /* the copy starts empty, to be filled (a join) */
#define WAL_MARK_FULL 3u   /* the configuration made the copy full */
#define WAL_MARK_GONE 4u   /* the copy is no longer held here */

/* flags: the record is the first of the bytes the writer handed to one write (a group). The
 * writer starts a group only after the previous group's fdatasync returned, so a valid group
 * start after a bad record proves that the bad record had been synced: that is corruption in
 * the middle, not a torn tail. */
#define WAL_F_GROUP 1u

/* ---------------------------------------------------------------------------------------------
 * The COMMIT and PREPARE payload: the writes, enough to redo them without the arena.
 *   u32 count, then count times: u8 op (WAL_OP_PUT / WAL_OP_DEL), u32 key bytes, u32 value
 *   bytes (0 for a delete), key, value. */
#define WAL_OP_PUT 1u
#define WAL_OP_DEL 2u

struct wal_write {
    uint8_t op;
    uint32_t klen, vlen;
    const void *key, *val;
};

/* Bytes wal_writes_pack writes for these writes. */
size_t wal_writes_size(const struct wal_write *w, unsigned n);
/* Writes the payload into buf (cap bytes): the bytes used, or 0 if cap is too small. */
size_t wal_writes_pack(const struct wal_write *w, unsigned n, void *buf, size_t cap);
/* Calls fn for each write of a payload (key and val point into buf); every length is checked
 * and nothing past len is read. 0, fn's non-zero answer, or RDKV_EPROTO for bytes that are not
 * a payload (bad op, lengths past the end, bytes left over). */
int wal_writes_unpack(const void *buf, size_t len, int (*fn)(void *arg, const struct wal_write *w),
                      void *arg);

/* ---------------------------------------------------------------------------------------------
 * Reading the log back. */
struct wal_rec {
    uint64_t lsn, txid;
    uint8_t type, flags;
    uint32_t len;
    const uint8_t *payload; /* valid only during the callback */
};
/* Returns 0 to go on, anything else to stop the scan with that status. */
typedef int (*wal_rec_fn)(void *arg, const struct wal_rec *r);

struct wal_scan_result {
    uint64_t records;      /* good records passed to the callback */
    uint64_t last_lsn;     /* the last good record's LSN, 0 for none */
    uint64_t next_lsn;     /* the LSN the next append gets */
    unsigned segments;     /* segment files read */
    bool torn;             /* a torn tail was found and (by wal_open) cut */
    uint64_t tail_segment; /* its segment (first LSN) */
    uint64_t tail_offset;  /* byte offset in that segment where the good log ends */
    uint64_t dropped;      /* bytes after it (in that segment and any later ones) */
    char why[96];          /* what ended the log: "short record", "bad checksum", ... */
    uint64_t tail_synced;  /* wal_open: the segment (first LSN) it fdatasynced and dropped from
                              the page cache before the scan read anything; 0 for none (and
                              always 0 from wal_scan, which changes nothing) */
};

/* One segment image in memory (the fuzz target and the scan share it). Checks the header
 * (node, fingerprint and first LSN must match the arguments; first_lsn 0 takes the header's),
 * then calls fn for each good record in order. Sets *end to the offset where the good records
 * end, *why to what ended them ("" for the clean end of the bytes), and *more to whether a valid
 * group start lies after a bad record (corruption in the middle). Returns 0; RDKV_ECONFIG for a
 * segment of another node or cluster; RDKV_EPROTO for a bad header; fn's non-zero answer. */
struct wal_seg_scan {
    uint64_t first_lsn, next_lsn, records, end;
    bool more;
    const char *why;
};
int wal_seg_decode(const uint8_t *buf, size_t len, uint16_t node, uint64_t fp, uint64_t first_lsn,
                   uint32_t record_max, wal_rec_fn fn, void *arg, struct wal_seg_scan *out);

/* record_max (here and in wal_seg_decode): the largest payload a reader accepts; 0 is the
 * format's limit, which is what recovery uses (a log written with a larger limit stays
 * readable after the limit is lowered).
 * Reads the log in dir in LSN order without changing it: fn for each good record. A torn tail
 * (short record, bad checksum, bad magic, LSN gap, a last segment with a torn header) ends it and
 * is described in res. Returns 0; RDKV_ECONFIG (a segment of another node or cluster, or a dir
 * that cannot be read); RDKV_EPROTO for corruption in the middle (a bad record with a good group
 * or segment after it, a bad header before the last segment, a missing segment), with the place
 * in err; RDKV_EIO; fn's answer. A missing or empty dir is an empty log. */
int wal_scan(const char *dir, uint16_t node, uint64_t fp, uint32_t record_max, wal_rec_fn fn,
             void *arg, struct wal_scan_result *res, char *err, size_t errcap);

/* ---------------------------------------------------------------------------------------------
 * Writing. */
enum wal_durability {
    WAL_DUR_OFF,   /* records are written, never synced while running: wal_wait does not wait */
    WAL_DUR_GROUP, /* group commit: one write and one fdatasync for every record queued */
    WAL_DUR_SYNC,  /* one write and one fdatasync per record (for comparison) */
};
/* "off", "group", "sync" -> 0 and *out; RDKV_EINVAL otherwise. */
int wal_durability_parse(const char *s, enum wal_durability *out);
const char *wal_durability_name(enum wal_durability d);

struct wal_opts {
    const char *dir;          /* created if missing */
    uint16_t node;
    uint64_t cluster_fp;
    enum wal_durability durability;
    uint64_t segment_bytes;   /* a segment is closed once it passes this; 0: 64 MiB */
    uint32_t record_max;      /* largest payload accepted; 0: 4 MiB (at most WAL_REC_LIMIT) */
    uint64_t queue_max;       /* appenders block while this many bytes wait for the writer;
                                 0: 16 MiB (raised to hold at least one largest record) */
    /* Fail-stop hook (may be NULL): the writer calls it once, at the log's first failed write
     * or sync (segment creation included), with the sticky status (RDKV_EIO / RDKV_ENOSPC) and
     * the message wal_error will give, before it wakes any waiter or refuses any append: until
     * it returns, waiters stay parked, appends queue, and wal_error still answers 0. A node
     * stops its process there, so nothing acts on the failure (docs/storage.md, "Errors").
     * Without it the log fails as described at wal_wait. Failures of wal_open itself are its
     * answer, never the hook's. */
    void (*on_fail)(void *arg, int status, const char *msg);
    void *on_fail_arg;
};
void wal_opts_init(struct wal_opts *o);

struct wal;

/* Opens dir for appending: first fdatasyncs the last segment and drops its pages from the page
 * cache (so the scan reads what the device holds; a failed fdatasync refuses to open, naming the
 * file), then scans it as wal_scan does (fn, when not NULL, sees every good record: the replay),
 * cuts a torn tail (truncates its segment, removes later ones, syncs the dir), and starts the
 * writer thread. The scan's result goes to res when not NULL. Errors as wal_scan's, plus
 * RDKV_EIO / RDKV_ENOSPC / RDKV_ENOMEM for the files, the ring or the thread. */
int wal_open(const struct wal_opts *o, wal_rec_fn fn, void *arg, struct wal_scan_result *res,
             struct wal **out, char *err, size_t errcap);

/* Waiting below (wal_append on a full queue, wal_wait) parks the calling task and lets its
 * thread's other tasks run, or blocks a plain thread on a futex (common/task.h): never a spin.
 *
 * Queues a record (any thread or task); *lsn gets its LSN. Waits while the queue is full. The
 * payload is copied. RDKV_ETOOBIG past record_max, RDKV_EINVAL for a type outside 1..WAL_TYPE_MAX, RDKV_EIO
 * or RDKV_ENOSPC once the log has failed (see wal_error), RDKV_ESHUTDOWN after wal_close began. */
int wal_append(struct wal *w, uint8_t type, uint64_t txid, const void *payload, uint32_t len,
               uint64_t *lsn);
/* Waits until lsn is durable: 0 only after an fdatasync that covered it returned 0. The log's
 * error (RDKV_EIO / RDKV_ENOSPC) when it failed first (only once the fail-stop hook, if any, has
 * returned): the record may or may not be on disk.
 * With WAL_DUR_OFF returns at once: the log's error if it failed, else 0 (nothing is promised). */
int wal_wait(struct wal *w, uint64_t lsn);
/* wal_append then wal_wait. */
int wal_commit(struct wal *w, uint8_t type, uint64_t txid, const void *payload, uint32_t len,
               uint64_t *lsn);
/* The sticky error (0 while healthy) and its message ("fdatasync of wal-...: No space left"). */
int wal_error(struct wal *w, char *msg, size_t cap);
/* The layer above cannot go on with what it holds in memory after this log failed it: a record
 * a protocol step depends on was not written, or is not known durable (a node then stops, and
 * its restart recovers from the log: docs/storage.md, "Errors"). Calls the fail-stop hook with
 * the log's error (RDKV_EIO when it has none) and why; a hook that returns, or none, ends the
 * process with abort(). Never returns. */
_Noreturn void wal_fail_stop(struct wal *w, const char *why);
/* The highest LSN known durable (every record up to it is). */
uint64_t wal_durable_lsn(struct wal *w);
/* The LSN the next append will get. Not a checkpoint's replay LSN by itself: a record below it
 * may be appended and not yet applied in memory (use wal_checkpoint_lsn). */
uint64_t wal_next_lsn(struct wal *w);

/* A hold keeps wal_checkpoint_lsn from answering past a record until the holder has applied it
 * in memory. Take it before the append(s) it covers, release it after applying them (also when
 * an append or a wait failed: a hold never released stalls every later checkpoint). Never
 * blocks; any thread or task; costs two atomic operations (and a load) to take, one to release.
 * The struct is the holder's: it lives wherever the holder likes, until wal_unhold. */
struct wal_hold {
    unsigned epoch;
};
void wal_hold(struct wal *w, struct wal_hold *h);
void wal_unhold(struct wal *w, struct wal_hold *h);
/* The replay LSN for a checkpoint begun now: every record with a smaller LSN was appended under a
 * hold that has since been released (so the holder applied it, and what it applied is visible to
 * the caller), or without a hold. Waits, napping 50-200 us at a time, for the holds taken before
 * the call; holds taken during it do not delay it. Call it from a plain thread, never a task;
 * calls are serialized (a second caller waits for the first). docs/storage.md, "Holds". */
uint64_t wal_checkpoint_lsn(struct wal *w);

/* Removes whole segments every record of which has an LSN below lsn (never the segment being
 * written). Returns the number removed or RDKV_EIO. */
int wal_truncate_before(struct wal *w, uint64_t lsn);

/* Writes and syncs everything queued (in every mode), stops the writer, closes the files.
 * Returns the log's error, if any. No append or wait may be running or start meanwhile. */
int wal_close(struct wal *w);

struct wal_stats {
    uint64_t records, bytes, writes, syncs; /* since open */
    uint64_t stray; /* io_uring completions of no operation waited for: a bug, never taken */
};
void wal_stats(struct wal *w, struct wal_stats *out);

/* Fault injection, for tests (value 0 clears each):
 *   WAL_FAULT_WRITE, WAL_FAULT_SYNC: the writer's next write or sync fails with errno `value`
 *     instead of running.
 *   WAL_FAULT_SUBMIT_AGAIN: the `value`-th io_uring submit from now (1: the next) answers
 *     -EAGAIN once without entering the kernel, leaving its operation queued in the SQ ring, as
 *     the kernel's EAGAIN does. A group's write is its first submit and its fdatasync the second.
 *   WAL_FAULT_SYNC_DELAY: from now on every group's fdatasync waits `value` microseconds before
 *     it is submitted (sticky until set to 0), to widen races in tests. */
enum wal_fault { WAL_FAULT_WRITE, WAL_FAULT_SYNC, WAL_FAULT_SUBMIT_AGAIN, WAL_FAULT_SYNC_DELAY };
void wal_fault_inject(struct wal *w, enum wal_fault what, int value);

#endif
