/* Range locks over the fabric, for scans: acquire(space, [lo, hi], mode, deadline) and release,
 * beside the row locks of locks/lock.h. A range space lives on one node (its owner) and is named
 * by (node, id); coordinates are 64-bit, bounds inclusive. A thread may hold many ranges at once,
 * in any spaces, each through its own handle. Five designs share this interface:
 *   combiner-rpc   server-side: RPC handlers enqueue, one combiner thread owns the interval tree,
 *                  grants FIFO per conflict; a blocked request's RPC is answered at its grant
 *   combiner-rdma  the same, but a blocked request polls its own ready flag (one cache line in
 *                  the owner's arena) with one-sided READs
 *   itree          server-side baseline: the RPC handler itself updates the interval tree under a
 *                  mutex, on one thread
 *   segment        client-side: one DSLR word per segment, segments taken in ascending order
 *   citron         client-side: a 4-ary segment tree of DSLR words over the space
 * The server-side designs lock exact ranges, or exact byte-string key intervals when a request
 * carries keys (range_handle_keys: the transaction layer locks whole keys). The client-side ones
 * lock every unit covering the range at their granularity, a superset, which is safe.
 * docs/range-locks.md. */
#ifndef RDKV_RANGE_H
#define RDKV_RANGE_H

#include "locks/lock.h"

#include <stdint.h>

/* The server-side designs' RPC message types (RANGE_RPC_*) are in rdma/rpc_types.h, in the lock
 * layer's block; locks/range/server.c has the payloads. */

/* Largest id of a range space (ids are 1..RANGE_MAX_SPACES on each node). */
#define RANGE_MAX_SPACES 64

/* How a space is laid out for the client-side designs. The space's coordinates are
 * [0, 2^bits); the client-side designs split it into 2^seg_bits segments (segment) and a 4-ary
 * tree of depth tree_depth (citron: 4^tree_depth leaves). Coordinates at or above 2^bits are
 * an error (RDKV_EINVAL). */
struct range_space_cfg {
    unsigned bits;       /* 1..64; default 64 */
    unsigned seg_bits;   /* segments = 2^seg_bits, 0..14; default 8 (256 segments) */
    unsigned tree_depth; /* citron: 1..7; default 5 (1024 leaves) */
};
void range_space_cfg_init(struct range_space_cfg *c);

/* A node's range-lock service: the combiner thread and its RPC handlers, the itree handlers, and
 * the spaces' regions in the arena (segment words, citron tree, ready flags). kvserver starts it
 * on every node; range_space_create makes a space (on the owner) before clients use it. */
struct range_server;
int range_server_start(struct fabric *f, int64_t lease_ns, struct range_server **out);
/* Creates space `id` (1..RANGE_MAX_SPACES) on this node, or finds it if it exists with the same
 * cfg (RDKV_EEXIST if with another). cfg NULL: defaults. */
int range_space_create(struct range_server *s, uint16_t id, const struct range_space_cfg *cfg);
/* Clears the lock words of space `id` (segment's and citron's): every range they lock becomes
 * free. Only when no client uses the space (benchmarks, between runs). */
int range_space_reset(struct range_server *s, uint16_t id);
/* Stops the combiner: waiters get RDKV_ESHUTDOWN; later requests too. */
void range_server_stop(struct range_server *s);
void range_server_free(struct range_server *s);

/* Test hook: called by the owner (combiner or itree) as it grants and as it processes a release,
 * in the order it does so. NULL removes it. */
typedef void (*range_grant_hook)(void *arg, uint16_t space, uint64_t lo, uint64_t hi,
                                 enum lock_mode mode, bool granted);
void range_server_set_hook(struct range_server *s, range_grant_hook fn, void *arg);

/* The owner's side of fencing: whether the request named `token` (a server-side handle's token)
 * still holds space `space` exclusively over at least the key `key` -- granted, not released,
 * not evicted, and its key bounds (or, without keys, its coordinates) cover the key. 1 held,
 * 0 not. */
int range_server_holds_key_x(struct range_server *s, uint16_t space, const void *key,
                             uint32_t klen, uint64_t token);

/* The owner taking care of a hold whose holder may be gone (the transaction layer's prepared
 * writes: docs/transactions.md, "How an in-doubt transaction's rows stay locked"): while the
 * request named `token` still holds space `space`, keep restarts its lease (it is not evicted
 * for two leases from now), release releases it as its holder would. 0, or RDKV_ETIMEDOUT when
 * it does not hold (released, evicted, never granted). A late release of the holder's own is then
 * refused, as after an eviction: tokens are never reused. */
int range_server_keep(struct range_server *s, uint16_t space, uint64_t token);
int range_server_release(struct range_server *s, uint16_t space, uint64_t token);

/* Counters of the owner's work (benchmarks report them). */
struct range_server_stats {
    uint64_t grants, waits, releases, cancels;
    uint64_t batches; /* combiner: batches its thread applied */
    uint64_t direct;  /* combiner: requests applied by their handler (tables free, queue empty) */
    uint64_t refused; /* lock requests turned away with RDKV_EBUSY: the owner's bounds were full */
    uint64_t in_tables; /* now, not a count: requests holding or waiting (releases applied) */
};

/* Byte-string bounds (the server-side designs). A request may carry, besides its coordinates,
 * the byte strings it really locks: from `begin` (inclusive) to `end` (exclusive, or inclusive
 * with RANGE_K_INCL; no end without RANGE_K_END), compared as bytes (memcmp, then length). Two
 * requests that both carry keys conflict only when their key intervals overlap, so keys that
 * share a coordinate (the transaction layer's coordinate is a key's first 8 bytes) no longer
 * share a lock. The owner checks that the coordinates are the keys' (range_key_coord: lo of
 * begin, hi of end or the top of the space), so coordinates stay a superset of the keys and the
 * interval tree finds every overlap. A request without keys conflicts by coordinates. */
enum range_key_flags {
    RANGE_K_ON = 1,   /* the request carries keys */
    RANGE_K_END = 2,  /* it has an end */
    RANGE_K_INCL = 4, /* the end is inclusive (a point: begin == end) */
};
#define RANGE_KEY_MAX 65535u /* longest key bound (STORE_KEY_MAX_LIMIT) */
/* The owner's bounds on what requests make it allocate: requests in its tables, and their key
 * bytes. Past either, a lock request is answered RDKV_EBUSY (retryable) and nothing is kept. */
#define RANGE_MAX_REQS (1u << 18)
#define RANGE_MAX_KEY_BYTES (64u << 20)
/* Requests queued for the combiner thread: past this, a handler applies the queue itself. */
#define RANGE_MAX_QUEUED 4096u

/* A key's coordinate: its first 8 bytes, big-endian, zero-padded. Order-preserving: if a <= b as
 * byte strings, then coord(a) <= coord(b). */
static inline uint64_t range_key_coord(const void *key, uint32_t klen)
{
    const uint8_t *k = key;
    uint64_t c = 0;
    for (unsigned i = 0; i < 8; i++) c = c << 8 | (i < klen ? k[i] : 0);
    return c;
}
void range_server_stats(struct range_server *s, struct range_server_stats *out);

struct range_algo;

/* A held or wanted range. Client-side designs keep the words they hold in `held`. */
#define RANGE_MAX_WORDS 256 /* a whole space of 256 segments */
struct range_handle {
    const struct range_algo *algo;
    struct lock_thread *t;
    uint16_t node, space;
    uint64_t lo, hi;
    uint8_t mode;        /* held mode, 0 when not held */
    uint64_t owner;      /* server-side designs: requests of one nonzero owner (a transaction)
                            never conflict with each other; 0: none */
    uint64_t token;      /* server-side designs: the owner's name for this request */
    const uint8_t *kb, *ke; /* server-side designs: key bounds (range_handle_keys), read only */
    uint32_t kbl, kel;      /* by acquire */
    uint8_t kflags;         /* enum range_key_flags; 0: coordinates only */
    int64_t sent_at;     /* server-side designs: when the lock request was sent, */
    int64_t granted_min; /* the earliest the grant can have come, by our clock, */
    int64_t lease_ns;    /* and the owner's lease, from its answer */
    unsigned nheld;      /* client-side designs: lock handles held, in acquisition order */
    struct lock_handle held[RANGE_MAX_WORDS];
    struct range_space_cfg cfg; /* client-side designs: the space's layout, read at first use */
    rptr base;                  /* client-side designs: the space's words */
};

struct range_algo {
    const char *name;
    bool server_side;
    unsigned modes; /* bitmask of (1 << enum lock_mode); citron has exclusive only and takes
                       shared requests as exclusive */
    /* 0: held. RDKV_ETIMEDOUT: deadline passed first, nothing held or left behind. RDKV_EINVAL:
     * bad range or space. RDKV_ENOTFOUND: no such space. RDKV_EABORTED: a lease reset consumed
     * the request (client-side designs); nothing held, retry. Other negatives: fabric errors. */
    int (*acquire)(struct range_handle *h, enum lock_mode mode, int64_t deadline);
    /* 0, or RDKV_ETIMEDOUT when a lease ran out while held (treat the hold as unprotected). */
    int (*release)(struct range_handle *h);
};

extern const struct range_algo range_combiner_rpc;
extern const struct range_algo range_combiner_rdma;
extern const struct range_algo range_itree;
extern const struct range_algo range_segment;
extern const struct range_algo range_citron;

/* The default range lock of the transaction layer. */
#define RANGE_LOCK_DEFAULT "combiner-rpc"

const struct range_algo *range_algo_find(const char *name);
const char *range_algo_names(void); /* comma-separated, for --help */

static inline void range_handle_init(struct range_handle *h, struct lock_thread *t,
                                     const struct range_algo *a, uint16_t node, uint16_t space,
                                     uint64_t lo, uint64_t hi)
{
    h->algo = a;
    h->t = t;
    h->node = node;
    h->space = space;
    h->lo = lo;
    h->hi = hi;
    h->mode = 0;
    h->owner = 0;
    h->token = 0;
    h->kflags = 0;
    h->kb = h->ke = NULL;
    h->kbl = h->kel = 0;
    h->nheld = 0;
    h->cfg.bits = 0; /* unknown yet */
    h->base = RPTR_NULL;
}
/* Points a handle that is not held at another range of the same space and design, keeping what
 * it learned of the space (the client-side designs read the space's layout once per handle, two
 * round trips): threads that lock range after range should reuse one handle this way. */
static inline void range_handle_retarget(struct range_handle *h, uint64_t lo, uint64_t hi)
{
    h->lo = lo;
    h->hi = hi;
    h->token = 0;
    h->kflags = 0;
    h->nheld = 0;
}
/* Makes a handle that is not held lock the key interval [b, e) (flags RANGE_K_END, plus
 * RANGE_K_INCL for [b, e]; without RANGE_K_END, [b, oo)) of a server-side design's space, and
 * sets its coordinates to match. The bytes are read by acquire only, not kept. */
static inline void range_handle_keys(struct range_handle *h, const void *b, uint32_t bl,
                                     const void *e, uint32_t el, unsigned flags)
{
    h->kb = b;
    h->kbl = bl;
    h->ke = flags & RANGE_K_END ? e : NULL;
    h->kel = flags & RANGE_K_END ? el : 0;
    h->kflags = (uint8_t)(RANGE_K_ON | (flags & (RANGE_K_END | RANGE_K_INCL)));
    h->lo = range_key_coord(b, bl);
    h->hi = flags & RANGE_K_END ? range_key_coord(e, el) : UINT64_MAX;
}
static inline int range_acquire(struct range_handle *h, enum lock_mode m, int64_t deadline)
{
    return h->algo->acquire(h, m, deadline);
}
static inline int range_release(struct range_handle *h) { return h->algo->release(h); }

/* ---------------------------------------------------------------------------------------------
 * For the designs' implementations (locks/range/): the space's directory entry, readable by
 * peers. Region "range.<id>" on the owner holds: struct range_space_hdr (64 bytes), then the
 * 2^seg_bits segment lock lines (64 bytes each), then the citron tree's lock lines (64 bytes
 * each, breadth-first: node 0 is the root, the children of i are 4i+1 .. 4i+4). */
struct range_space_hdr {
    uint64_t magic; /* RANGE_SPACE_MAGIC once initialised */
    uint32_t bits, seg_bits, tree_depth, pad;
    uint64_t nodes;  /* citron tree nodes: (4^(depth+1) - 1) / 3 */
    uint64_t reserved[4];
};
#define RANGE_SPACE_MAGIC 0x52444B5652414E47ull /* "RDKVRANG" */
/* Reads (once per handle) the space's header and fills h->cfg and h->base. */
int range_space_open(struct range_handle *h);
/* The client-side designs' common steps. range_words_check validates a request (mode, not held
 * yet, the space opened, lo <= hi < 2^bits): 0 or a status. range_words_acquire takes the n DSLR
 * lock lines in the order given (the caller's global order), each granted before the next is
 * taken; on a failure it releases what it took and returns the status; if some word's lease ran
 * out while later ones were waited for, it gives everything back and returns RDKV_EABORTED.
 * range_words_release releases them all, in one chain (one round trip): 0, RDKV_ETIMEDOUT when a lease had
 * run out (waiters may have reset that word), or the first fabric error. */
int range_words_check(struct range_handle *h, enum lock_mode mode);
int range_words_acquire(struct range_handle *h, const rptr *lines, const uint8_t *modes,
                        unsigned n, int64_t deadline);
int range_words_release(struct range_handle *h);

static inline rptr range_seg_line(const struct range_handle *h, uint64_t seg)
{
    return rptr_add(h->base, 64 + seg * 64);
}
static inline rptr range_tree_line(const struct range_handle *h, uint64_t node)
{
    return rptr_add(h->base, 64 + ((uint64_t)1 << h->cfg.seg_bits) * 64 + node * 64);
}

#endif
