/* rdkv's re-replication, for the spin model checker: a new copy of a partition filled by the
 * primary's stream of rows while commits go on (docs/replication.md, section 8), with the two
 * rules the model showed it needs (marked "added" below). docs/refill-model.md explains the
 * model, what it leaves out and the trace that catches each bad variant.
 *
 * One partition of NK keys, each holding 1 at first at its primary P; the copy being filled,
 * L (the learner), empty at first. The old backups are left out: they take every commit and
 * play no part in the fill. A value is a byte, 0 meaning absent; every commit writes a value
 * of its own (or deletes), so a value names the commit that wrote it.
 *
 * Epochs. P holds E1 (L no replica) at first, and adopts E2 (L a copy being filled) at any
 * moment (Config). The manager's E3, the copy full, is the ghost `filled`.
 *
 * Steps. Every step is one atomic transition; the real code holds a mutex (L's mu) or a row
 * lock over each. Messages: REPL (a commit) P -> L, answered by a flag; COPY (a batch of the
 * stream) P -> L and its answer. Each is a FIFO channel of its own, so a batch and a REPL
 * reach L in either order, as two RPCs do.
 *   - W, the writers (NW of them): NC commits each, one after another, each a put of a fresh
 *     value or a delete of a key it chooses. A commit takes the key's exclusive lock; ships
 *     (ship_task reads the configuration when it sends: under E2 a REPL to L, and the commit
 *     waits for L's answer; under E1 nothing to L); installs at P and releases the lock in
 *     one step.
 *   - C, the copier (copier_main / fill_partition / ckpt_stream): starts once P holds E2 and
 *     (added) no commit shipped under E1 is still to install at P. It first sends an empty
 *     batch that begins the stream, and waits for its answer (added). Then, key by key in
 *     order: the index pass sees the key present or not (no lock: store_scan); a present key
 *     is read under its shared row lock (waits while a commit holds the key; the lock, the
 *     read and the release are one step: nothing else changes the row meanwhile) and, if still
 *     live, its row joins the batch. After any row it may send the batch (fill_sink: it waits
 *     for the answer). At the end, the rest of the batch, then an empty one (the end); once
 *     that is answered, the manager marks the copy full (KV_RPC_REPL_FILLED, rcfg_filled).
 *   - L: a REPL is applied always (a put or a delete) and a delete remembered in the deleted
 *     set while L is a learner (apply_learn); a batch's row is applied only where the key is
 *     absent at L and not in the deleted set (copy_row); the batch that begins the stream
 *     empties the set (on_copy).
 *
 * Checked (safety):
 *   - full: once the copy is marked full, L holds P's value of every key that no commit in
 *     flight writes (shipped to L and not yet installed at P) -- in every state;
 *   - the end: once W and C are done, L equals P;
 *   - not stuck (pan's invalid end states): W and C always finish.
 *
 * Bad variants (check.sh: each must be caught):
 *   -DSTREAM_OVERWRITES  L applies a streamed row even when the key is present;
 *   -DNO_DELSET          L does not remember deletes;
 *   -DCOPY_BEFORE_EPOCH  C starts without waiting for P to hold E2;
 *   -DFULL_EARLY         the copy is marked full when its last batch is sent, before L
 *                        answered it;
 *   -DNO_ROW_LOCK        C reads a row without its shared lock;
 *   -DLATE_RESET         (the code today) no empty batch begins the stream: the first batch of
 *                        rows empties the deleted set, and its rows were read before it, so a
 *                        delete committed in between is forgotten and its row comes back;
 *   -DNO_DRAIN           (the code today) C does not wait for commits shipped under E1: an
 *                        insert still in flight is absent at the index pass, and never
 *                        reaches L.
 * -DUPDATES_ONLY (a configuration, not a variant): a commit never inserts (a put of an absent
 * key becomes a delete), so that section 8's argument, which covers only those commits, can
 * be checked on its own: -DUPDATES_ONLY -DNO_DRAIN finds no error.
 */

#ifndef NK
#define NK 2            /* keys (at most 3) */
#endif
#ifndef NC
#define NC 2            /* commits of each writer */
#endif
#ifndef NW
#define NW 2            /* writers */
#endif

/* batches of the stream */
#define BEGIN 0
#define ROWS 1
#define END 2

bit e2;                 /* P holds E2: L is a copy being filled */
bit filled;             /* the manager marked L full (E3) */
byte pv[NK] = 1;        /* P's store: 0 absent; every key holds 1 at first */
byte lv[NK];            /* L's store */
bit ds[NK];             /* L's deleted set */
byte bv[NK];            /* the batch in flight: the rows' values (0: no row of the key) */
/* the commits */
bit xl[NK];             /* a commit holds the key's exclusive lock */
bit fly[NK];            /* ... its REPL went to L, and it is not installed at P yet */
bit ak[NK];             /* ... and L answered it */
byte old;               /* commits shipped under E1 and not installed at P yet */
byte wdone;             /* writers done */
bit cdone;              /* the copier done */
#ifdef LATE_RESET
bit begun;              /* L saw the stream begin */
#endif

chan repl = [NW] of { byte, byte };     /* P -> L: key, value (0: a delete) */
chan copy = [1] of { byte };            /* P -> L: a batch (its rows in bv) */
chan cack = [1] of { bit };

/* W: NC commits one after another; NW writers, so commits of different keys are in flight at
 * once. pids 0..NW-1 (declared first): writer w's n-th commit writes 2 + n * NW + w. */
active [NW] proctype W() {
    byte n, k, v;
    do
    :: n < NC ->
        /* takes a key's exclusive lock (the copier's shared hold is one step of its own) */
        atomic {
            if
            :: !xl[0] -> k = 0
            :: NK > 1 && !xl[1] -> k = 1
            :: NK > 2 && !xl[2] -> k = 2
            fi;
            if
            :: v = 2 + n * NW + _pid
            :: v = 0
            fi;
#ifdef UPDATES_ONLY
            if
            :: pv[k] == 0 -> v = 0      /* no insert: a delete of an absent key at most */
            :: else
            fi;
#endif
            xl[k] = 1
        }
        /* ships: ship_task reads the configuration when it sends */
        atomic {
            if
            :: e2 -> repl ! k, v; fly[k] = 1
            :: else -> old++
            fi
        }
        /* once L answered (under E2): installs at P and releases the lock */
        atomic {
            !fly[k] || ak[k] ->
            if
            :: fly[k] -> fly[k] = 0; ak[k] = 0
            :: else -> old--
            fi;
            pv[k] = v; xl[k] = 0; k = 0; v = 0; n++
        }
    :: else -> break
    od;
    wdone++
}

active proctype Config() {
    e2 = 1
}

/* the shared lock of key k is free */
#ifdef NO_ROW_LOCK
#define SHARED_OK(k) true
#else
#define SHARED_OK(k) (!xl[k])
#endif

active proctype C() {
    byte k;
    bit nb;             /* the batch holds a row */
#ifdef COPY_BEFORE_EPOCH
    old == 0;
#elif defined(NO_DRAIN)
    e2;
#else
    e2 && old == 0;     /* (added) E1's commits installed first */
#endif
#ifndef LATE_RESET
    copy ! BEGIN;       /* (added) the stream begins before any row is read */
    cack ? _;
#endif
    do
    :: k < NK ->
        if
        /* the index pass sees the key; then (a step of its own if it must wait) the read
         * under the shared lock: a row only if the key is still live */
        :: atomic { pv[k] != 0 ->
            SHARED_OK(k) -> bv[k] = pv[k]; nb = nb | (bv[k] != 0) }
        :: atomic { pv[k] == 0 -> skip }   /* absent at the index pass: never visited */
        fi;
        if
        :: nb -> copy ! ROWS; cack ? _; nb = 0
        :: true
        fi;
        k++
    :: else -> break
    od;
    if
    :: nb -> copy ! ROWS;
#ifdef FULL_EARLY
        filled = 1;
#endif
        cack ? _; nb = 0
    :: else
    fi;
    copy ! END;
    cack ? _;
    filled = 1;
    cdone = 1
}

inline reset() {
    k = 0;
    do
    :: k < NK -> ds[k] = 0; k++
    :: else -> break
    od;
    k = 0
}

active proctype L() {
    byte k, v, b;
end_l:
    do
    /* a commit: applied always, a delete remembered while L is a learner */
    :: atomic { repl ? k, v -> lv[k] = v; ak[k] = 1;
#ifndef NO_DELSET
        if
        :: v == 0 && !filled -> ds[k] = 1
        :: else
        fi;
#endif
        k = 0; v = 0 }
    /* a batch of the stream */
    :: atomic { copy ? b ->
#ifdef LATE_RESET
        if
        :: !begun -> begun = 1; reset()
        :: else
        fi;
#else
        if
        :: b == BEGIN -> reset()
        :: else
        fi;
#endif
        k = 0;
        do
        :: k < NK ->
            if
#ifdef STREAM_OVERWRITES
            :: bv[k] != 0 && !ds[k] -> lv[k] = bv[k]
#else
            :: bv[k] != 0 && lv[k] == 0 && !ds[k] -> lv[k] = bv[k]
#endif
            :: else
            fi;
            bv[k] = 0; k++
        :: else -> break
        od;
        k = 0; b = 0; cack ! 1 }
    od
}

/* L holds P's value of key k, or a commit of k is in flight */
#define HOLDS(k) (lv[k] == pv[k] || fly[k])
#define ALL_HOLD (HOLDS(0) && (NK < 2 || HOLDS(1)) && (NK < 3 || HOLDS(2)))
#define EQUAL (lv[0] == pv[0] && (NK < 2 || lv[1] == pv[1]) && (NK < 3 || lv[2] == pv[2]))

active proctype Safety() {
end_s:
    do
    :: atomic { filled && !ALL_HOLD -> assert(ALL_HOLD) }     /* full */
    :: atomic { wdone == NW && cdone -> assert(EQUAL); break }    /* the end */
    od
}
