/* rwlock, rdkv's row lock (locks/rwlock.c; protocol in docs/locks.md), for the spin
 * model checker.
 *
 * Two local threads (1, 2) use CPU atomics on the lock's node; two remote threads (3, 4) use
 * one-sided operations only. Every attempt picks shared (S) or exclusive (X) mode.
 *   RT    remote tickets {nX, nS, mX, mS}    NIC atomics only
 *   RC    remote cross word {eX, eS}         NIC atomics only
 *   LT    local tickets                      CPU atomics only
 *   LC    local cross word                   CPU atomics only
 *   TURN  LOCAL (0) or REMOTE (1)            stores / WRITEs only
 * What the model keeps from RDMA's semantics (as alock.pml does):
 *   - remote FAAs are executed by the NIC process one request at a time in arrival order (a
 *     FIFO channel), each as a load and then a store in separate steps, so CPU steps interleave
 *     between them (-DNIC_ONE_STEP merges the two: nobody else writes RT or RC, so a CPU step
 *     in between can only read the old value; same verdicts, 0.6 times the states);
 *   - chains execute in order: a remote thread posts the next operation of a chain once the
 *     previous one has executed (nic[d]: 0 nothing posted, 1 in flight, 2 executed, unread);
 *   - a READ of the line reads LC and TURN as two separate steps, in either order;
 *   - CPU atomics (FAA, seq_cst loads and stores) are single steps; a local thread's loads of RC
 *     and TURN are also taken in either order (the spec does not fix it);
 *   - the remote fast path {FAA RT; FAA RC; READ line} decides "granted at once" on the FAA's
 *     own result (as rwlock.c does); when not granted, the chain's READ is discarded (left out).
 * Merged steps, each invisible to the other threads:
 *   - a thread's own bookkeeping (mode, ticket, temporaries) and the ghost variables ride along
 *     with a neighbouring step; entering the critical section is merged with the read that
 *     decides to enter and leaving it with the first release step (this only widens the
 *     critical section, so it cannot hide an overlap);
 *   - collecting a NIC reply is merged with the thread's next step (nobody else reads it);
 *     posting a NIC request is merged with the preceding read or bookkeeping step (a post
 *     commutes with everything but other posts, and no post is merged with a write);
 *   - a wait for a ticket's grant (which stays true once true) is merged with the raise after;
 *   - a wait for "TURN == prio(G) or the other cross word empty" is one step: for a
 *     disjunction, reading the two words one after the other exits exactly when one atomic read
 *     could.
 * Tickets: only equality tests and ticket indices mod B are used, so counters are kept
 * relative: when a group's nM reaches its budget B, B is subtracted from its nM, mM and the mM
 * of its outstanding X tickets (an S ticket's mS is only used mod B, so it is stored mod B).
 * This is exact and stands for counters modulo any multiple of B. Budgets LB and RB are 1 by
 * default (every release ends a budget); -DLB=2 and/or -DRB=2 work too, at 7 times the states
 * per group.
 *
 * Checked by tests/models/check.sh:
 *   safety     no X holder overlaps any other holder and S overlaps only S (the asserts, on the
 *              counts of readers and writers in the critical section), no deadlock;
 *   liveness   starvation freedom, [] (trying[i] -> <> incs[i]), under weak fairness, for every
 *              thread (starve_l1 starve_l2 starve_r3 starve_r4); threads may stop competing;
 *   -DVICTIM_TRAP  Peterson's handshake with several writers per group instead of the back-off:
 *              each member raises, writes TURN := prio(other) and waits while the other group
 *              conflicts and TURN == prio(other): S/X is violated;
 *   -DNO_BACKOFF   a member never backs off when the other group has priority: the two groups
 *              can wait for each other forever.
 *
 * Without waiter marks (-DNO_WAITER_MARK, the first design) the protocol is NOT starvation-free
 * under weak fairness: every starve_* fails
 * (one thread of the other group and one peer of the waiter suffice). A member M of group G that
 * waits (raised and looking again, or backed off) gets in only by seeing TURN == prio(G) and H
 * not raised against it at once. Such a window opens when H backs off or hands TURN over, and a
 * PEER of M can close it before M looks: the peer takes a ticket, enters on the empty H word and
 * its release, ending a budget, writes TURN := prio(H); H raises again. Weak fairness makes M
 * take steps, not take them inside a window. Counterexample (L local X, R3 and R4 remote S):
 * R3 raised with TURN == REMOTE makes L back off; R3's READ fetches TURN; R4 enters (fast
 * path) and its release writes TURN := LOCAL; L raises; R3's READ fetches LC (X): it looks
 * again, sees TURN == LOCAL and backs off; L enters, hands TURN to REMOTE, takes a new ticket
 * and raises; R3 raises; L sees it and backs off -- and so on forever.
 * The fix, WAITER_MARK (the default): a member that backs off marks itself in its group's cross
 * word (eW, in the back-off FAA) until it releases (in the release FAA); a release that ends a
 * budget first reads its cross word and hands TURN over only if no other member of its group is
 * marked. A peer can then close a window only on a waiter that has never backed off; that waiter
 * backs off, is marked, and the next window of G stays open until it is in.
 */

/* The fix is the protocol: -DNO_WAITER_MARK checks the protocol without it (starvation). */
#ifndef NO_WAITER_MARK
#define WAITER_MARK
#endif

#define S 0
#define X 1
#define LOCAL 0
#define REMOTE 1
#ifndef LB
#define LB 1
#endif
#ifndef RB
#define RB 1
#endif

byte rnX, rnS, rmX, rmS;    /* RT */
byte reX, reS, reW;         /* RC (reW: -DWAITER_MARK only) */
byte lnX, lnS, lmX, lmS;    /* LT */
byte leX, leS, leW;         /* LC */
bit turn = LOCAL;           /* TURN */

/* per thread (1..4) */
byte tx[5], ts[5];          /* the ticket: mX and mS of the ticket word before the add */
byte tk[5];                 /* holds a ticket (A1 to R3): 0 no, 1 S, 2 X */
bit ung[5];                 /* remote fast path: the ticket FAA's result was not granted */
byte nic[5];                /* remote: 0 nothing posted, 1 in flight, 2 executed, unread */

/* ghost */
byte nrd, nwr;              /* S and X holders in the critical section */
bit trying[5], incs[5];

inline shift_x(n, m, a, b, B) {
    if
    :: n == B -> n = 0; m = m - B;
        if :: tk[a] != 0 -> tx[a] = tx[a] - B :: else -> skip fi;
        if :: tk[b] != 0 -> tx[b] = tx[b] - B :: else -> skip fi
    :: else -> skip
    fi
}
inline shift_s(n, m, a, b, B) {
    if
    :: n == B -> n = 0; m = m - B;
        if :: tk[a] == 2 -> ts[a] = ts[a] - B :: else -> skip fi;
        if :: tk[b] == 2 -> ts[b] = ts[b] - B :: else -> skip fi
    :: else -> skip
    fi
}

/* DSLR grant: S after the earlier X; X after everybody earlier */
#define GRANTED_L (lnX == tx[d] && (mode == S || lnS == ts[d]))
#define GRANTED_R (rnX == tx[d] && (mode == S || rnS == ts[d]))
/* a conflict with the other group's cross word */
#define CONFLICT_R (reX > 0 || (mode == X && reS > 0))
#define CONFLICT_L (leX > 0 || (mode == X && leS > 0))
#define BOUNDARY(B) ((tx[d] + ts[d]) % B == B - 1)

/* ---------------------------------------------------------------------------------------- */
/* The lock node's NIC: remote FAAs on RT and RC, one at a time in arrival order, each a load
 * and then a store. w: the eW part of an RC FAA (0 none, 1 +1, 2 -1). */
#define OP_TS 1   /* FAA(RT, +1 in mS): take a ticket */
#define OP_TX 2   /* FAA(RT, +1 in mX) */
#define OP_NS 3   /* FAA(RT, +1 in nS): release it */
#define OP_NX 4
#define OP_RS 5   /* FAA(RC, +1 in eS): raise */
#define OP_RX 6
#define OP_DS 7   /* FAA(RC, -1 in eS): lower */
#define OP_DX 8
chan nicq = [2] of { byte, byte, byte };   /* who, op, w */

proctype NIC() {
    byte who, op, w, o1, o2, o3, o4;
end_nic:
    do
    :: atomic {
        nicq ? who, op, w;
        if                                                     /* load */
        :: op <= OP_NX -> o1 = rnX; o2 = rnS; o3 = rmX; o4 = rmS
        :: else -> o1 = reX; o2 = reS; o3 = reW
        fi
#ifndef NIC_ONE_STEP
       };
       atomic {
#endif
        if                                                     /* store, and the reply */
        :: op == OP_TS -> rmS = o4 + 1; tx[who] = o3; ts[who] = o4 % RB; tk[who] = 1;
            ung[who] = (o1 != o3)
        :: op == OP_TX -> rmX = o3 + 1; tx[who] = o3; ts[who] = o4; tk[who] = 2;
            ung[who] = (o1 != o3 || o2 != o4)
        :: op == OP_NS -> rnS = o2 + 1; shift_s(rnS, rmS, 3, 4, RB)
        :: op == OP_NX -> rnX = o1 + 1; shift_x(rnX, rmX, 3, 4, RB)
        :: op == OP_RS -> reS = o2 + 1
        :: op == OP_RX -> reX = o1 + 1
        :: op == OP_DS -> reS = o2 - 1
        :: op == OP_DX -> reX = o1 - 1
        fi;
        if
        :: w == 1 -> reW = o3 + 1
        :: w == 2 -> reW = o3 - 1
        :: else -> skip
        fi;
        nic[who] = 2;
        who = 0; op = 0; w = 0; o1 = 0; o2 = 0; o3 = 0; o4 = 0
       }
    od
}

/* post a request; the thread's previous one has executed */
#define POST(o, w) nic[d] = 1; nicq ! d, o, w
#define READY (nic[d] != 1)
#define RAISE_OP (mode == X -> OP_RX : OP_RS)
#define LOWER_OP (mode == X -> OP_DX : OP_DS)

inline enter_cs(d) {
    trying[d] = 0; incs[d] = 1;
    if
    :: mode == X -> assert(nrd == 0 && nwr == 0); nwr++
    :: else -> assert(nwr == 0); nrd++
    fi
}
inline leave_cs(d) {
    incs[d] = 0;
    if
    :: mode == X -> nwr--
    :: else -> nrd--
    fi
}

/* ---------------------------------------------------------------------------------------- */

inline raise_l() {
    if :: mode == X -> leX++ :: else -> leS++ fi
}
inline lower_l() {
    if :: mode == X -> leX-- :: else -> leS-- fi
}

proctype Local(byte d) {
    bit mode, tu, marked;
ncs:
    if                                             /* A1: FAA(LT, +1 in mM) */
    :: atomic { trying[d] = 1; mode = S; tx[d] = lmX; ts[d] = lmS % LB; tk[d] = 1; lmS++ }
    :: atomic { trying[d] = 1; mode = X; tx[d] = lmX; ts[d] = lmS; tk[d] = 2; lmX++ }
    :: goto end_idle                               /* a thread may stop competing forever */
    fi;
    atomic { GRANTED_L -> raise_l() };             /* A2 (re-reading LT), then A3 */
#ifdef VICTIM_TRAP
    turn = REMOTE;                                 /* the trap: TURN := prio(other) */
    atomic { (!CONFLICT_R || turn != REMOTE) -> enter_cs(d) };
    goto cs;
#endif
a4: /* A4: load RC and TURN, in either order */
    if
    :: atomic { !CONFLICT_R -> enter_cs(d) }      /* RC first: no conflict, enter */
    :: CONFLICT_R ->                               /* RC first: conflict; then TURN */
        if
        :: turn == LOCAL -> goto a4                /* keep raised, look again */
        :: turn == REMOTE -> goto backoff
        fi
    :: tu = turn;                                  /* TURN first, then RC */
        if
        :: atomic { !CONFLICT_R -> tu = 0; enter_cs(d) }
        :: atomic { CONFLICT_R && tu == LOCAL -> tu = 0 }; goto a4
        :: atomic { CONFLICT_R && tu == REMOTE -> tu = 0 }; goto backoff
        fi
    fi;
cs: /* release */
#ifdef WAITER_MARK
    if
    :: atomic { !BOUNDARY(LB) -> leave_cs(d); lower_l(); leW = leW - marked; marked = 0 }
    :: atomic { BOUNDARY(LB) && leW != marked -> leave_cs(d) }  /* R1: load LC: a peer waits */
        atomic { lower_l(); leW = leW - marked; marked = 0 }
    :: atomic { BOUNDARY(LB) && leW == marked -> leave_cs(d) }  /* R1: load LC, */
        turn = REMOTE;                                           /* store TURN */
        atomic { lower_l(); leW = leW - marked; marked = 0 }     /* R2 */
    fi;
#else
    if
    :: atomic { BOUNDARY(LB) -> leave_cs(d); turn = REMOTE }     /* R1 */
        atomic { lower_l() }                                     /* R2 */
    :: atomic { !BOUNDARY(LB) -> leave_cs(d); lower_l() }
    fi;
#endif
    atomic {                                                     /* R3 */
        tk[d] = 0;
        if
        :: mode == X -> lnX++; shift_x(lnX, lmX, 1, 2, LB)
        :: else -> lnS++; shift_s(lnS, lmS, 1, 2, LB)
        fi;
        mode = 0; tx[d] = 0; ts[d] = 0
    };
    goto ncs;
backoff:
#ifdef NO_BACKOFF
    goto a4;
#endif
#ifdef WAITER_MARK
    atomic { lower_l(); leW = leW + 1 - marked; marked = 1 };
#else
    atomic { lower_l() };
#endif
    (turn == LOCAL || reX + reS == 0);
    atomic { raise_l() };                          /* A3 again */
    goto a4;
end_idle:
    false
}

/* ---------------------------------------------------------------------------------------- */

proctype Remote(byte d) {
    bit mode, tu, marked;
ncs:
    if
    :: atomic { READY -> trying[d] = 1; mode = S; POST(OP_TS, 0) }   /* FAA(RT, +1 in mM) */
    :: atomic { READY -> trying[d] = 1; mode = X; POST(OP_TX, 0) }
    :: goto end_idle
    fi;
#ifdef VICTIM_TRAP
    atomic { READY && GRANTED_R -> ung[d] = 0; POST(RAISE_OP, 0) }
    atomic { READY -> nic[d] = 0; turn = LOCAL };  /* WRITE TURN := prio(other) */
    atomic { (!CONFLICT_L || turn != LOCAL) -> enter_cs(d) };
    goto cs;
#endif
    atomic { READY -> POST(RAISE_OP, 0) };         /* the fast path: optimistic FAA(RC, +1 in eM) */
a4: /* A4: READ the line after the raise: LC and TURN in either order */
    if
    :: atomic { READY && ung[d] -> ung[d] = 0; POST(LOWER_OP, 0) };  /* fast path, not granted: */
        atomic { READY && GRANTED_R -> POST(RAISE_OP, 0) };           /* undo, A2 (READ), A3 */
        goto a4
    :: atomic { READY && !ung[d] && !CONFLICT_L -> nic[d] = 0; enter_cs(d) }
    :: atomic { READY && !ung[d] && CONFLICT_L -> nic[d] = 0 };
        if
        :: turn == REMOTE -> goto a4
        :: turn == LOCAL -> goto backoff
        fi
    :: atomic { READY && !ung[d] -> nic[d] = 0; tu = turn };
        if
        :: atomic { !CONFLICT_L -> tu = 0; enter_cs(d) }
        :: atomic { CONFLICT_L && tu == REMOTE -> tu = 0 }; goto a4
        :: atomic { CONFLICT_L && tu == LOCAL -> tu = 0 }; goto backoff
        fi
    fi;
cs: /* release: one chain {WRITE TURN (if boundary); FAA(RC, -1 in eM); FAA(RT, +1 in nM)} */
#ifdef WAITER_MARK
    /* with the fix: READ RC first (boundary only), then the chain */
    if
    :: atomic { !BOUNDARY(RB) -> leave_cs(d); POST(LOWER_OP, marked * 2); marked = 0 }
    :: atomic { BOUNDARY(RB) && reW != marked -> leave_cs(d); POST(LOWER_OP, marked * 2); marked = 0 }
    :: atomic { BOUNDARY(RB) && reW == marked -> leave_cs(d) };
        turn = LOCAL;
        atomic { POST(LOWER_OP, marked * 2); marked = 0 }
    fi;
#else
    if
    :: atomic { BOUNDARY(RB) -> leave_cs(d); turn = LOCAL }
        atomic { POST(LOWER_OP, 0) }
    :: atomic { !BOUNDARY(RB) -> leave_cs(d); POST(LOWER_OP, 0) }
    fi;
#endif
    atomic { READY -> POST((mode == X -> OP_NX : OP_NS), 0); mode = 0; tk[d] = 0; tx[d] = 0; ts[d] = 0 };
    goto ncs;
backoff:
#ifdef NO_BACKOFF
    goto a4;
#endif
#ifdef WAITER_MARK
    atomic { POST(LOWER_OP, 1 - marked); marked = 1 };          /* FAA(RC, -1 in eM, +1 in eW) */
#else
    atomic { POST(LOWER_OP, 0) };                               /* FAA(RC, -1 in eM) */
#endif
    /* READ until TURN == REMOTE or LC empty, then FAA(RC, +1 in eM) */
    atomic { READY && (turn == REMOTE || leX + leS == 0) -> POST(RAISE_OP, 0) };
    goto a4;
end_idle:
    false
}

init {
    atomic {
        run NIC(); run Local(1); run Local(2); run Remote(3); run Remote(4)
    }
}

#ifdef LIVENESS
ltl starve_l1 { [] (trying[1] -> <> incs[1]) }
ltl starve_l2 { [] (trying[2] -> <> incs[2]) }
ltl starve_r3 { [] (trying[3] -> <> incs[3]) }
ltl starve_r4 { [] (trying[4] -> <> incs[4]) }
#endif
