/* The range-lock combiner (locks/range/server.c; protocol in docs/range-locks.md, "The
 * combiner"), its request/grant/wake protocol, for the spin model checker.
 *
 * Three clients (1, 2, 3) lock ranges of a space of three units (0..2): each attempt picks
 * lo <= hi and a mode, shared (S) or exclusive (X). What the model keeps:
 *   - one FIFO queue of lock and release messages, in arrival order (the handlers append to the
 *     combiner's queue; try_apply applies a request itself only when nothing is queued, which
 *     is the same order), and one combiner that applies them one at a time to the table; a
 *     message's whole application is one step (it runs under the table mutex, and nobody but
 *     the combiner reads the table);
 *   - combiner-rpc's answer: the lock RPC is answered at the grant (ans[c]); the release is a
 *     one-way message into the same queue, so a client may send its next lock before its
 *     release is applied (the queue keeps them in order);
 *   - the table: one entry per client (a client has at most one request here), with its range,
 *     mode, insertion order, granted flag and blocking count; lock and release as do_lock and
 *     leave/unblock_one do them.
 * Abstracted: the interval tree (a scan of the three entries), tokens (the entry is the
 * client's), the batching (a batch is its messages applied in order), deadlines, cancels and
 * evictions (the sweep), combiner-rdma's ready flag (a grant stored in a flag is the same event
 * as an answered RPC here), try_apply's hand-over (it applies in the same order).
 * seq: only the order of live entries matters (seq is compared, never used as a number), so
 * seq[c] is the entry's rank among the live entries (1 oldest), renumbered at each removal:
 * exact, and finite.
 * The pick is deferred to where it is first read: the lock message carries only the client's
 * id, and the combiner's step that applies it chooses the range and mode (pick(), 12 choices)
 * into the entry. Nobody can observe a pick earlier (the client does not use it before its
 * grant, and the message is opaque in the queue), so the behaviours are the same as picking at
 * the send -- but a queued lock is one state instead of twelve (picking at the send, the safety
 * run did not end within 10 minutes and 17 GB; deferred, it has 1.5 million states). The client
 * uses its entry's range in the critical section (the entry lives until its release is applied,
 * which is after the client has left). The critical section is checked on per-unit counts of
 * readers and writers inside (rd, wr); receiving the answer and entering is one step, leaving
 * and sending the release another.
 * Whole check (safety, starve_c1..3, the three variants) on a 2-core machine: about 1 minute,
 * under 1.5 GB (most of it pan's DFS stack for -m20000000).
 *
 * Checked by tests/models/check.sh:
 *   safety     no X holder overlaps any other holder and S overlaps only S (the asserts, on the
 *              per-unit counts), a release is of a granted entry, no count goes below 0, and
 *              no deadlock (invalid end states: a client waiting for a grant that never comes,
 *              with everybody else stopped);
 *   liveness   starvation freedom, [] (trying[c] -> <> incs[c]), under weak fairness, for every
 *              client (starve_c1 starve_c2 starve_c3); clients may stop competing forever;
 *   -DDECREMENT_ALL  the thesis's decrement (digest bug 3): a release decrements every waiting
 *              overlapping entry, also the earlier ones and read-read pairs: the count reaches
 *              0 too early (S/X violated) or goes below 0;
 *   -DNO_WAKE  the thesis's missing wake-up (digest bug 2): a count reaching 0 at a release
 *              marks the entry granted but answers nobody: the waiter waits forever;
 *   -DREADERS_JUMP  readers do not queue behind waiting writers: a reader is placed in the order
 *              just after the last granted entry that conflicts with it (a granted writer it
 *              overlaps), so it counts only what it must wait for, and the waiting writers it
 *              passes count it. Still safe (the counts stay exact), but two readers taking
 *              turns can hold a range shared forever: a writer starves.
 */

#define S 0
#define X 1
#define LOCK 0
#define REL 1
#define NC 3                   /* clients 1..NC */

bit ans[NC + 1];               /* the lock RPC's answer: granted */

/* the combiner's table, one entry per client */
byte seq[NC + 1];              /* rank among the live entries, 1 oldest; 0: no entry */
byte tlo[NC + 1], thi[NC + 1];
bit tm[NC + 1];
bit tgr[NC + 1];               /* granted */
byte blk[NC + 1];              /* blocking */

/* a client has at most two messages queued: a release and its next lock */
chan q = [2 * NC] of { byte, bit };   /* client, LOCK or REL */

/* ghost */
byte rd[3], wr[3];             /* per unit: S and X holders in the critical section */
bit trying[NC + 1], incs[NC + 1];

#define OVL(a, b) (tlo[a] <= thi[b] && tlo[b] <= thi[a])
#define CONFL(a, b) (tm[a] == X || tm[b] == X)

/* ------------------------------------------------------------------------------------------ */

inline grant(c) {
    tgr[c] = 1; ans[c] = 1
}

/* a grant at a release (unblock_one) */
inline wake(c) {
#ifdef NO_WAKE
    tgr[c] = 1                 /* the count reached 0, but nothing tells the client */
#else
    grant(c)
#endif
}

/* The client's pick: made here, where it is first read (see the header). */
inline pick(c) {
    if
    :: tlo[c] = 0; thi[c] = 0
    :: tlo[c] = 0; thi[c] = 1
    :: tlo[c] = 0; thi[c] = 2
    :: tlo[c] = 1; thi[c] = 1
    :: tlo[c] = 1; thi[c] = 2
    :: tlo[c] = 2; thi[c] = 2
    fi;
    if
    :: tm[c] = S
    :: tm[c] = X
    fi
}

inline do_lock(c) {
    pick(c);
    /* n: live entries; p: where the new entry goes in the order */
    n = 0; p = 0; j = 1;
    do
    :: j <= NC ->
        if :: seq[j] != 0 -> n++ :: else -> skip fi;
#ifdef READERS_JUMP
        if
        :: tm[c] == S && seq[j] != 0 && tgr[j] && OVL(c, j) && CONFL(c, j) && seq[j] > p ->
            p = seq[j]
        :: else -> skip
        fi;
#endif
        j++
    :: else -> break
    od;
#ifdef READERS_JUMP
    if
    :: tm[c] == S -> p = p + 1
    :: else -> p = n + 1
    fi;
#else
    p = n + 1;                 /* seq := ++counter: after every live entry */
#endif
    j = 1;
    do
    :: j <= NC ->
        if :: seq[j] >= p -> seq[j]++ :: else -> skip fi;
        j++
    :: else -> break
    od;
    seq[c] = p; blk[c] = 0;
    /* blocking := the earlier entries that overlap and conflict; the later ones (only with
     * READERS_JUMP) count the new one */
    j = 1;
    do
    :: j <= NC ->
        if
        :: j != c && seq[j] != 0 && OVL(c, j) && CONFL(c, j) ->
            if
            :: seq[j] < p -> blk[c]++
            :: else -> assert(!tgr[j]); blk[j]++
            fi
        :: else -> skip
        fi;
        j++
    :: else -> break
    od;
    if
    :: blk[c] == 0 -> grant(c)
    :: else -> skip
    fi
}

inline do_unlock(c) {
    assert(seq[c] != 0 && tgr[c]);     /* a release of a request that holds */
    p = seq[c];
    j = 1;
    do
    :: j <= NC ->
        if
#ifdef DECREMENT_ALL
        :: j != c && seq[j] != 0 && !tgr[j] && OVL(c, j) ->
#else
        :: j != c && seq[j] > p && !tgr[j] && OVL(c, j) && CONFL(c, j) ->
#endif
            assert(blk[j] > 0);
            blk[j]--;
            if
            :: blk[j] == 0 -> wake(j)
            :: else -> skip
            fi
        :: else -> skip
        fi;
        j++
    :: else -> break
    od;
    /* remove it: the later entries move up one */
    j = 1;
    do
    :: j <= NC ->
        if :: seq[j] > p -> seq[j]-- :: else -> skip fi;
        j++
    :: else -> break
    od;
    seq[c] = 0; tgr[c] = 0; blk[c] = 0; tlo[c] = 0; thi[c] = 0; tm[c] = 0
}

proctype Combiner() {
    byte c, n, p, j;
    bit kind;
end_comb:
    do
    :: atomic {
        q ? c, kind;
        if
        :: kind == LOCK -> do_lock(c)
        :: else -> do_unlock(c)
        fi;
        c = 0; kind = 0; n = 0; p = 0; j = 0
       }
    od
}

/* ------------------------------------------------------------------------------------------ */

inline enter_cs(c) {
    trying[c] = 0; incs[c] = 1;
    u = tlo[c];
    do
    :: u <= thi[c] ->
        if
        :: tm[c] == X -> assert(rd[u] == 0 && wr[u] == 0); wr[u]++
        :: else -> assert(wr[u] == 0); rd[u]++
        fi;
        u++
    :: else -> break
    od;
    u = 0
}

inline leave_cs(c) {
    incs[c] = 0;
    u = tlo[c];
    do
    :: u <= thi[c] ->
        if
        :: tm[c] == X -> wr[u]--
        :: else -> rd[u]--
        fi;
        u++
    :: else -> break
    od;
    u = 0
}

proctype Client(byte c) {
    byte u;
ncs:
    if
    :: atomic { trying[c] = 1; q ! c, LOCK }       /* send the lock */
    :: goto end_idle                               /* a client may stop competing forever */
    fi;
    atomic { ans[c] -> ans[c] = 0; enter_cs(c) }   /* the lock RPC's answer: granted */
    atomic {                                       /* leave; send the release, one-way */
        leave_cs(c);
        q ! c, REL
    };
    goto ncs;
end_idle:
    false
}

init {
    atomic {
        run Combiner(); run Client(1); run Client(2); run Client(3)
    }
}

#ifdef LIVENESS
ltl starve_c1 { [] (trying[1] -> <> incs[1]) }
ltl starve_c2 { [] (trying[2] -> <> incs[2]) }
ltl starve_c3 { [] (trying[3] -> <> incs[3]) }
#endif
