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
 * lock over each. Messages: REPL (an APPLY, a PREPARE or a FORGET) P -> L, answered by a flag
 * (a FORGET is not waited for); COPY (a batch of the stream) P -> L and its answer. Each is a
 * FIFO channel of its own, so a batch and a REPL reach L in either order, as two RPCs do.
 *   - W, the writers (NW of them): NC commits each, one after another, each a put of a fresh
 *     value or a delete of a key it chooses. A commit takes the key's exclusive lock; ships
 *     (ship_task reads the configuration when it sends: under E2 a REPL to L, and the commit
 *     waits for L's answer; under E1 nothing to L); installs at P and releases the lock in
 *     one step.
 *   - X, a participant of a two-phase commit (NX of them, 0 or 1): one transaction of one key.
 *     It takes the key's exclusive lock (held until the decision is carried out, as a
 *     prepared transaction's locks are); ships a PREPARE of its write (under E2 to L too, and
 *     waits for L's answer; under E1 not to L), after which it is prepared at P; then the
 *     decision, either way: COMMIT ships an APPLY of the same write (under E2 to L too, and
 *     waits for L's answer), then installs at P and releases the lock; ABORT ships a FORGET
 *     (under E2 to L too, not waited for) and releases the lock.
 *   - C, the copier (copier_main / drain_old / fill_partition / ckpt_stream): starts once P
 *     holds E2, (added) no commit shipped under E1 is still to install at P, and (added) no
 *     PREPARE shipped under E1 is still to settle at P (its COMMIT installed, or its FORGET
 *     sent). It first sends an empty batch that begins the stream, and waits for its answer
 *     (added). Then, key by key in order: the index pass sees the key present or not (no
 *     lock: store_scan); a present key is read under its shared row lock (waits while a commit
 *     or X holds the key; the lock, the read and the release are one step: nothing else
 *     changes the row meanwhile) and, if still live, its row joins the batch. After any row
 *     it may send the batch (fill_sink: it waits for the answer). At the end, the rest of the
 *     batch, then an empty one (the end); once that is answered, the manager marks the copy
 *     full (KV_RPC_REPL_FILLED, rcfg_filled).
 *   - L: an APPLY is applied always (a put or a delete) and a delete remembered in the deleted
 *     set while L is a learner (apply_learn); a PREPARE is kept as a pending record, not
 *     applied, and X's APPLY or FORGET drops it (recs_drop_locked; a plain commit's APPLY is
 *     another transaction's, and the stream leaves the records alone); a batch's row is
 *     applied only where the key is absent at L and not in the deleted set (copy_row); the
 *     batch that begins the stream empties the set (on_copy).
 *
 * Checked (safety):
 *   - full: once the copy is marked full, L holds P's value of every key that no commit in
 *     flight writes (shipped to L and not yet installed at P) -- in every state;
 *   - prepared: once the copy is marked full, a PREPARE prepared at P and not yet decided is
 *     pending at L too (promoted, L would lock its rows and finish the transaction);
 *   - the end: once W, X and C are done, L equals P; once the last REPL is taken too, L holds
 *     no pending record;
 *   - not stuck (pan's invalid end states): W, X and C always finish.
 *
 * Bad variants (check.sh: each must be caught):
 *   -DSTREAM_OVERWRITES  L applies a streamed row even when the key is present;
 *   -DNO_DELSET          L does not remember deletes;
 *   -DCOPY_BEFORE_EPOCH  C starts without waiting for P to hold E2;
 *   -DFULL_EARLY         the copy is marked full when its last batch is sent, before L
 *                        answered it;
 *   -DNO_ROW_LOCK        C reads a row without its shared lock;
 *   -DLATE_RESET         (the first code) no empty batch begins the stream: the first batch of
 *                        rows empties the deleted set, and its rows were read before it, so a
 *                        delete committed in between is forgotten and its row comes back;
 *   -DNO_DRAIN           (the first code) C waits neither for commits nor for PREPAREs
 *                        shipped under E1: an insert still in flight is absent at the index
 *                        pass, and never reaches L;
 *   -DNO_PREP_DRAIN      (drain_old before it counted PREPAREs) C waits for E1's commits,
 *                        not for E1's PREPAREs: a PREPARE shipped under E1 (not to L) of a key
 *                        absent at the index pass, which C therefore never waits for, is
 *                        still undecided at P when the copy is marked full.
 * -DUPDATES_ONLY (a configuration, not a variant): a commit never inserts (a put of an absent
 * key becomes a delete) and X prepares only a present key, so that section 8's argument,
 * which covers only those, can be checked on its own: -DUPDATES_ONLY -DNO_DRAIN finds no error.
 * -DNX=0 leaves X out: the model as it was before two-phase commits (with NW 2).
 */

#ifndef NK
#define NK 2            /* keys (at most 3) */
#endif
#ifndef NC
#define NC 2            /* commits of each writer */
#endif
#ifndef NX
#define NX 1            /* two-phase commit participants (0 or 1) */
#endif
#ifndef NW
#if NX > 0
#define NW 1            /* writers: X is a second one (with NW 2 too, 16.7 million states) */
#else
#define NW 2
#endif
#endif
#define XV (2 + NC * NW)   /* X's value: no writer's */

/* REPL's kinds */
#define APPLY 0         /* a plain commit */
#define PREP 1          /* X's PREPARE */
#define XAPPLY 2        /* X's COMMIT: the APPLY of its PREPARE's writes */
#define FORGET 3        /* X's ABORT */

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
/* the two-phase commit */
bit pold;               /* X's PREPARE went under E1 and is not settled at P yet */
bit pp;                 /* X is prepared at P and not decided yet */
bit pl;                 /* L holds X's PREPARE as a pending record */
byte wdone;             /* writers done */
bit xdone = (NX == 0);  /* X done (or none) */
bit cdone;              /* the copier done */
#ifdef LATE_RESET
bit begun;              /* L saw the stream begin */
#endif

chan repl = [NW + NX] of { byte, byte, byte };  /* P -> L: kind, key, value (0: a delete) */
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
            :: e2 -> repl ! APPLY, k, v; fly[k] = 1
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

/* X: one transaction of one key, which it holds locked from before its PREPARE until its
 * decision is carried out. Declared after W, so that W's pids are 0..NW-1. */
#ifdef UPDATES_ONLY
/* a present key only (no insert, no PREPARE of an absent key); none if every key is absent */
#define X_MAY(k) (!xl[k] && pv[k] != 0)
#define X_NONE (pv[0] == 0 && (NK < 2 || pv[1] == 0) && (NK < 3 || pv[2] == 0))
#else
#define X_MAY(k) (!xl[k])
#define X_NONE false
#endif
active [NX] proctype X() {
    byte k, v;
    bit sent;           /* its PREPARE went to L */
    atomic {
        if
        :: X_MAY(0) -> k = 0
        :: NK > 1 && X_MAY(1) -> k = 1
        :: NK > 2 && X_MAY(2) -> k = 2
        :: X_NONE -> goto xend      /* (-DUPDATES_ONLY: no key to update) */
        fi;
        if
        :: v = XV
        :: v = 0
        fi;
        xl[k] = 1
    }
    /* the PREPARE: under E2 to L too (a pending record there), under E1 counted until it is
     * settled at P (drain_old); prepared at P once every backup answered */
    atomic {
        if
        :: e2 -> repl ! PREP, k, v; sent = 1
        :: else -> pold = 1
        fi
    }
    atomic { !sent || ak[k] -> ak[k] = 0; sent = 0; pp = 1 }
    /* the decision */
    if
    :: atomic {     /* COMMIT: ships an APPLY of the same write, as a commit does */
        pp = 0;
        if
        :: e2 -> repl ! XAPPLY, k, v; fly[k] = 1
        :: else -> old++
        fi }
        /* once L answered (under E2): installs at P, which settles the PREPARE */
        atomic {
            !fly[k] || ak[k] ->
            if
            :: fly[k] -> fly[k] = 0; ak[k] = 0
            :: else -> old--
            fi;
            pv[k] = v; xl[k] = 0; pold = 0 }
    :: atomic {     /* ABORT: ships a FORGET (not waited for), which settles the PREPARE */
        pp = 0;
        if
        :: e2 -> repl ! FORGET, k, 0
        :: else
        fi;
        xl[k] = 0; pold = 0 }
    fi;
xend:
    atomic { k = 0; v = 0; xdone = 1 }
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
    old == 0 && !pold;
#elif defined(NO_DRAIN)
    e2;
#elif defined(NO_PREP_DRAIN)
    e2 && old == 0;
#else
    e2 && old == 0 && !pold;    /* (added) E1's commits installed, E1's PREPAREs settled */
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
    /* a REPL */
    :: atomic { repl ? b, k, v ->
        if
        :: b == PREP -> pl = 1; ak[k] = 1    /* a pending record, not applied */
        :: b == FORGET -> pl = 0
        :: else ->
            /* a commit: applied always, a delete remembered while L is a learner; X's drops
             * its PREPARE */
            lv[k] = v; ak[k] = 1;
#ifndef NO_DELSET
            if
            :: v == 0 && !filled -> ds[k] = 1
            :: else
            fi;
#endif
            if
            :: b == XAPPLY -> pl = 0
            :: else
            fi
        fi;
        b = 0; k = 0; v = 0 }
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
    :: atomic { filled && pp && !pl -> assert(!pp || pl) }    /* prepared */
    :: atomic { wdone == NW && xdone && cdone -> assert(EQUAL); break }  /* the end */
    od;
#if NX > 0
end_s2:
    atomic { empty(repl) -> assert(!pl) }   /* the end: no pending record left */
#endif
}
