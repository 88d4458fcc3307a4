/* rwlock, rdkv's row lock (locks/rwlock.c; protocol in docs/locks.md), for the spin
 * model checker.
 *
 * Two local threads (1, 2; -DNLOCAL=1: thread 1 only) use CPU atomics on the lock's node; two
 * remote threads (3, 4) use one-sided operations only. Every attempt picks shared (S) or
 * exclusive (X) mode. With -DLEASES the remote members may be paused, delayed or dead, and the
 * lease rules recover what they leave behind ("Leases", at the end of this header).
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
 * per group; -DANY_BUDGET lets every release end a budget or not (all budgets at once).
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
 *              can wait for each other forever;
 *   leases     a second run (ctest model_rwlock_leases): safety with -DLEASES -DNLOCAL=1
 *              -DANY_BUDGET -DDEADLINES, and its bad variants (see "Leases" below).
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
 *
 * Leases (-DLEASES: safety only; docs/locks.md "Leases and dead holders", rules 1-7). Remote
 * members may be paused, delayed or dead; local members never are (they live in the lock's own
 * process). Checked in the configuration of check.sh's lease run: one local thread (-DNLOCAL=1),
 * the two remote members, any budget (-DANY_BUDGET, below), deadlines (-DDEADLINES, below).
 * Time is abstracted by "late" flags: member d is late for a judge when more than a lease has
 * passed since d's last sign of life that this judge can see. Two kinds of judges:
 *   rule 3: a remote ticket waiter. It sees RT's serving counters and RC's refresh bits (actR,
 *           actW), not actO: l3[d];
 *   rule 4: a local waiter. It sees RT, and RC's actO, actR, eX, eS: l4[d].
 * The clock (the Clock process) may make a member late at ANY moment (a pause, a slow fabric, a
 * delayed reply): time passing sets all of its flags together. Only the member clears a flag, by
 * POSTING an operation that this judge sees (the code takes its timestamp before posting): the
 * fast path's chain, every raise (+actR) and the back-off (-eM +eW +actW) clear both; the fast
 * path's lower and a give-up's lower (actO) clear l4; a READ of RT posted while the ticket is
 * not yet granted clears l3 (the grant, a move of the serving counters, comes after it; a READ
 * posted after the grant proves nothing about when the grant came). A refresh (+actR or +actW
 * every half lease) needs no step of its own: it is the clock NOT making the member late.
 * What remains assumed, encoded and not checked: an operation posted while its member is not
 * late takes effect before recovery of that member can happen (docs/locks.md, assumption (A)).
 * So a judge may recover d's ticket or marks only while d is late for it AND has nothing in
 * flight (fl[d]: a chain posted and not all executed); and a reset, which may also pass the
 * waiting tickets before it, happens only while the members of those have nothing in flight and
 * none is about to lower after its fast path without being late (see RESET_OK). A READ that has
 * executed but whose reply d has not acted on is not in flight: every READ is executed in steps
 * of its own and DECIDED on in a later step, with any other step (the clock's, a judge's) in
 * between.
 * The protocol (the fixed one):
 *   - a member acts as "late" when it is late for a judge that can recover something of it:
 *     LATE = l3 || l4 (l4 is set only while it is raised or counted in eX/eS). Every FAA is
 *     posted only if it is not late; else the member ABANDONS: it touches nothing ever again
 *     (its ticket and marks stay in RT and RC, dead, for recovery) and returns to idle;
 *   - the decisions on a reply that shows the ticket granted (A2's READ, the S reset's CAS) and
 *     on an A4 READ that shows no conflict (entry) check it too: late -> abandon. An A4 READ
 *     that shows no conflict may also lead to a refresh (+actR) and a new look instead (the
 *     code's evidence between three quarters of a lease and a lease old);
 *   - a holder may become late at any moment: it has lost its lease, and what it does is void.
 *     The ghost counts drop it there (the asserts are about holders with a valid lease), and it
 *     never releases with a FAA: its ticket and marks are dead. A holder that is not late
 *     releases;
 *   - rule 7: a member that abandoned or lost its lease passes its dead ticket on with a CAS
 *     (tk_pass_on, at once or from lock_thread_poll), a step of its own at any later time (or
 *     never), which serves it if it is still live and granted and does nothing otherwise: the
 *     code's CAS from a word value that shows it granted and unserved. Its marks stay, dead;
 *   - rule 3: a remote ticket waiter w may reset RT when every granted, live ticket it waits for
 *     is a member's that is late for it with nothing in flight (a dead ticket counts as late).
 *     S waiter (DSLR fix 4a): n_X := w's m_X, w granted; X waiter (fix 6): n_X := w's m_X + 1,
 *     n_S := w's m_S, w's ticket consumed and w fails. Then it may clear eW if every marked
 *     member is late for it with nothing in flight. Each is one step when its condition holds
 *     (the code's CAS succeeds only if nothing moved since its judgement, and a member that is
 *     late with nothing in flight stays late);
 *   - rule 4: a local waiter (in A4 or backed off) may clear eX and eS (keeping eW) when every
 *     member counted there is late for it with nothing in flight. Rule 5: a local waiter that
 *     backed off may store TURN := LOCAL at any time;
 *   - rule 6 (clear_orphans), per class: a local waiter whose look showed marks in RC reads RT
 *     (no remote ticket of class X outstanding, or of S, or both), RC, RT again (those classes'
 *     counters unchanged), and CASes RC from the value it read to no marks of those classes
 *     (eX for X, eS for S, and eW too when both): four steps, with anything in between; r6[]
 *     follows RT and RC changing under them, which makes the CAS fail. No time condition;
 *   - DEADLINES: a member waiting in A2 may give its ticket up (tk_abandon); it then READs RT
 *     until the ticket is granted and passes it on with the CAS of rule 7 (lock_thread_poll),
 *     or drops it (kept 64 leases), leaving it dead. A member waiting in A4 may give up: one FAA
 *     lowers it and unmarks it, then it passes its granted ticket on: with a FAA (tk_release) if
 *     it is not late for rule 3, else it abandons and rule 7's CAS follows.
 * Bad variants, each must be caught (with -DLEASES):
 *   -DNO_ENTRY_CHECK  the old code: the A2 decision raises and the A4 decision enters on a
 *                     reply without checking the flags (granted_at stamped after the evidence);
 *   -DLATE_RELEASE    reset_from's exception: a holder that lost its lease still releases;
 *   -DSILENT_BACKOFF  the old back-off FAA carries actO but no actW: it refreshes the member's
 *                     own clock (b3: the old code's `touched`) and rule 4's view, not rule 3's.
 *                     After it, rule 3's view of the member is older than its own clock, so the
 *                     clock may make it late for rule 3 alone (stale3: the one place the flags of
 *                     one member age apart);
 *   -DUNCHECKED_PASS_ON (with -DDEADLINES) the code before rule 7 and the deadline fix: a ticket
 *                     given up is passed on with a FAA, late or not (lock_thread_poll, and the
 *                     A4 deadline's tk_release; lock_delay rwlock_deadline_release);
 *   -DRULE6_ANY_CLASS rule 6 clears every mark once one class has no ticket out (a live
 *                     holder's mark of the other class goes with them).
 * Also asserted with -DLEASES: no count of RC goes below 0, RC counts exactly the marks the
 * members believe they have plus the dead ones (MARKS_OK: nobody lowers a mark that is not its
 * own), and a release serves a ticket that exists (n_M <= max_M).
 * Failures: one at a time, any number per run. The clock makes a member late only when no
 * failure is outstanding: no member is late or void and a dead member's leftovers (its ticket:
 * slot 5 of the ticket arrays, dw its member; its marks: dX, dS, dW) are all recovered. (Without
 * a bound, dead shared tickets and marks pile up without end under a stream of remote readers.)
 * Only a member that holds, has a granted ticket or has a mark counted is made late: elsewhere
 * the flags change nothing anyone sees before the member's next post clears them.
 * Budgets (-DANY_BUDGET): a budget only decides which releases may hand TURN over, and TURN only
 * breaks ties. With -DANY_BUDGET every release may or may not end a budget (tickets relative to
 * budget 1): the behaviours of every budget, 2 and 2 included, at about the states of budget 1
 * (concrete -DRB=2 alone exceeded 73 million states).
 * Ghosts kept from RT and RC: gr (the ticket is granted; a granted ticket's numbers are kept mod
 * the budget: only its index is read again), bef (which tickets came before: what a reset
 * passes), gone (a reset passed the waiting ticket: what its next READ shows), cnt and mk
 * (counted in eX/eS, in eW). The lease model runs the NIC's FAAs in one step (NIC_ONE_STEP: the
 * recovery CASes are NIC atomics too, serialized with them).
 */

/* The fix is the protocol: -DNO_WAITER_MARK checks the protocol without it (starvation). */
#ifndef NO_WAITER_MARK
#define WAITER_MARK
#endif

#define S 0
#define X 1
#define LOCAL 0
#define REMOTE 1
#ifdef ANY_BUDGET
#if defined(LB) || defined(RB)
#error "-DANY_BUDGET stands for every budget: leave LB and RB out"
#endif
#endif
#ifndef LB
#define LB 1
#endif
#ifndef RB
#define RB 1
#endif
#ifndef NLOCAL
#define NLOCAL 2                    /* local threads: 1 and 2 (-DNLOCAL=1: thread 1 only) */
#endif
#ifdef LEASES
#if defined(LIVENESS) || defined(VICTIM_TRAP) || defined(NO_BACKOFF) || defined(NO_WAITER_MARK)
#error "-DLEASES checks safety of the protocol with waiter marks, back-off and no victim"
#endif
/* The recovery CASes are NIC atomics too, serialized with the FAAs: an FAA is one step. */
#define NIC_ONE_STEP
#define NSLOT 6                     /* tickets of members 1..4, and slot 5: a dead remote ticket */
#else
#define NSLOT 5
#endif

byte rnX, rnS, rmX, rmS;    /* RT */
byte reX, reS, reW;         /* RC (reW: -DWAITER_MARK only) */
byte lnX, lnS, lmX, lmS;    /* LT */
byte leX, leS, leW;         /* LC */
bit turn = LOCAL;           /* TURN */

/* per thread (1..4) */
byte tx[NSLOT], ts[NSLOT];  /* the ticket: mX and mS of the ticket word before the add */
byte tk[NSLOT];             /* holds a ticket (A1 to R3): 0 no, 1 S, 2 X */
bit ung[5];                 /* remote fast path: the ticket FAA's result was not granted */
byte nic[5];                /* remote: 0 nothing posted, 1 in flight, 2 executed, unread */

/* ghost */
byte nrd, nwr;              /* S and X holders inside (-DLEASES: with a valid lease) */
bit trying[5], incs[5];

#ifdef LEASES
/* Leases, for the remote members 3 and 4 (see "Leases" in the header) */
bit l3[5];                  /* late by its own clock, for the signs the rule-3 judges see */
bit l4[5];                  /* ... the rule-4 judges see (only while raised or counted) */
/* What each judge sees: only what happened while it watched (its first look is a sign of life).
 * The rule-3 judge of member t is the other remote member, watching while it waits in A2
 * (wt3); the rule-4 judges are the local threads J, watching from their first A4 look until
 * they enter (wt4[J]). */
bit wt3[5], wt4[3];
bit j3[5];                  /* the waiting other remote member sees t late */
bit j4[10];                 /* local J sees t late: j4[J4(J, t)] */
#define J4(j, t) (((j) - 1) * 5 + (t))
#ifdef SILENT_BACKOFF
bit b3[5];                  /* what the member believes of l3 (its own clock) */
bit stale3[5];              /* its last sign of life for rule 3 is older than its own clock */
#define B3(t) b3[t]
#else
#define B3(t) l3[t]         /* the fixed member knows which of its operations each judge sees */
#endif
bit fl[5];                  /* in flight: a chain posted and not all executed */
byte r6[3];                 /* local J's rule-6 reads (see clear_orphans below): 0 none, 1 RT
                               showed no remote ticket of the classes in r6c, 2 then RC read,
                               3 then RT unchanged in those classes */
byte r6c[3];                /* ... the classes it clears: bit 0 X (eX), bit 1 S (eS); both: eW
                               too */
bit vd[5];                  /* its lease ran out in the critical section: what it does is void */
/* ghosts computed from RT and RC */
bit gr[NSLOT];              /* its live ticket is granted (and stays so until served) */
byte bef[NSLOT];            /* bit t: ticket t (3, 4, or the dead one, 5) was taken before */
bit gone[5];                /* its waiting ticket was passed (its next READ of RT shows it) */
byte cnt[5];                /* its mark counted in RC: 0 none, 1 in eS, 2 in eX */
bit mk[5];                  /* ... in eW */
bit rs[5];                  /* raised (or its raise posted): counted in eX/eS by its own account */
byte hold[5];               /* in the critical section with a valid lease: 1 S, 2 X */
/* A dead member's leftovers: its ticket (slot 5, whose member was dw) and its marks */
byte dw, dX, dS, dW;
#endif

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

/* Rule 6, per class: RT shows no remote X ticket outstanding (bit 0), no S ticket (bit 1); the
 * marks it may then clear are there (eX, eS, and eW when both) */
#ifdef RULE6_ANY_CLASS
#define R6_CLASSES ((rnX == rmX || rnS == rmS) -> 3 : 0) /* bad: one idle class clears all */
#else
#define R6_CLASSES ((rnX == rmX -> 1 : 0) | (rnS == rmS -> 2 : 0))
#endif
#define R6_MARKS(c) ((((c) & 1) && reX > 0) || (((c) & 2) && reS > 0) || ((c) == 3 && reW > 0))
#define RULE6_START R6_MARKS(R6_CLASSES)
/* DSLR grant: S after the earlier X; X after everybody earlier */
#define GRANTED_L (lnX == tx[d] && (mode == S || lnS == ts[d]))
#define GRANTED_R (rnX == tx[d] && (mode == S || rnS == ts[d]))
/* a conflict with the other group's cross word */
#define CONFLICT_R (reX > 0 || (mode == X && reS > 0))
#define CONFLICT_L (leX > 0 || (mode == X && leS > 0))
#ifdef ANY_BUDGET
#define BOUNDARY(B) 1               /* any release may end a budget (see the header) */
#define MIDBUDGET(B) 1              /* ... or not */
#else
#define BOUNDARY(B) ((tx[d] + ts[d]) % B == B - 1)
#define MIDBUDGET(B) (!BOUNDARY(B))
#endif

#ifdef LEASES
/* ---------------------------------------------------------------------------------------- */
/* RT and RC's ghosts, and the judges' conditions (each used inside one atomic step) */
#define OTHER(t) (7 - (t))          /* the other remote member: 3 <-> 4 */
#define GRANTED_T(t) (rnX == tx[t] && (tk[t] == 1 || rnS == ts[t]))
#define BEFORE(w, t) ((bef[w] & (1 << (t))) != 0)
#define WAITS(w, t) (BEFORE(w, t) && (tk[w] == 2 || tk[t] == 2))
#define RAISED(t) (rs[t] || cnt[t] != 0)
/* Rule 3: remote ticket waiter w may reset RT when every granted, live ticket it waits for is a
 * member's that is late for it and has nothing in flight (the dead ticket has no member); and
 * no member whose ticket came before w's has anything in flight, or is about to lower after its
 * fast path (ung) without being late. A reset also passes waiting tickets, and rule 6 may then
 * clear their marks, so a lowering must not come after it. It does not: a reset comes two leases
 * after the judge's first look, which is after every earlier ticket was taken; a member whose
 * ticket is not granted posts only its fast path's chain and the lowering, and the lowering
 * only within a lease of the chain (else it abandons), so by the assumption both have landed,
 * or the member is late and abandons. */
#define RESET_OK(w) (tk[w] != 0 && !gr[w] && !gone[w] && \
    !(tk[OTHER(w)] != 0 && gr[OTHER(w)] && WAITS(w, OTHER(w)) && \
      !(j3[OTHER(w)] && !fl[OTHER(w)])) && \
    !(tk[OTHER(w)] != 0 && BEFORE(w, OTHER(w)) && \
      (fl[OTHER(w)] || (ung[OTHER(w)] && !(B3(OTHER(w)) || l4[OTHER(w)])))))
/* ... and then clear eW when every marked member is late for it, nothing in flight */
#define EW_OK(w) (reW > 0 && !mk[w] && (!mk[OTHER(w)] || (j3[OTHER(w)] && !fl[OTHER(w)])))
/* Rule 4: a local waiter may clear eX and eS when every member counted there is late for it,
 * nothing in flight (dead marks have no member) */
#define R4_OK(j) (reX + reS > 0 && (!cnt[3] || (j4[J4(j, 3)] && !fl[3])) && \
    (!cnt[4] || (j4[J4(j, 4)] && !fl[4])))
/* A failure is outstanding: a member is late or void, or a dead member's leftovers are not all
 * recovered yet. The clock makes a member late only when none is (see "Leases" in the header). */
#ifdef SILENT_BACKOFF
#define LATE_ANY(t) (l3[t] || l4[t] || b3[t] || vd[t])
#else
#define LATE_ANY(t) (l3[t] || l4[t] || vd[t])
#endif
#define OUTSTANDING (tk[5] != 0 || dX + dS + dW > 0 || LATE_ANY(3) || LATE_ANY(4))

/* Rule 6's reads see RT change between its two reads of it (1, 2) and RC change between its
 * read and its CAS (2, 3): either makes it fail. */
/* RT's counters of the classes c (bit 0 X, bit 1 S) moved: a rule-6 read of them is stale */
inline rt_moved_c(c) {
    if :: (r6[1] == 1 || r6[1] == 2) && (r6c[1] & (c)) -> r6[1] = 0 :: else -> skip fi;
    if :: (r6[2] == 1 || r6[2] == 2) && (r6c[2] & (c)) -> r6[2] = 0 :: else -> skip fi
}
inline rt_moved() { rt_moved_c(3) }
inline rc_moved() {
    if :: r6[1] >= 2 -> r6[1] = 0 :: else -> skip fi;
    if :: r6[2] >= 2 -> r6[2] = 0 :: else -> skip fi
}

/* RC counts exactly the members' marks (by their own account, cnt and mk) and the dead ones:
 * nobody lowers a mark that is not its own */
#define MARKS_OK (reX == (cnt[3] == 2) + (cnt[4] == 2) + dX && \
    reS == (cnt[3] == 1) + (cnt[4] == 1) + dS && reW == mk[3] + mk[4] + dW)

/* ticket t stops being live: served, or passed by a reset */
inline drop(t) {
    tk[t] = 0; gr[t] = 0; tx[t] = 0; ts[t] = 0; bef[t] = 0;
    bef[3] = bef[3] & ~(1 << (t)); bef[4] = bef[4] & ~(1 << (t)); bef[5] = bef[5] & ~(1 << (t));
    if :: (t) == 5 -> dw = 0 :: else -> skip fi
}
/* member t abandons, or loses its lease inside: its ticket (if still live) and marks (if still
 * counted) are left behind, dead: the ticket moves to slot 5, the marks to dX, dS, dW */
inline kill(t) {
    if
    :: tk[t] != 0 ->
        assert(tk[5] == 0);
        tk[5] = tk[t]; tx[5] = tx[t]; ts[5] = ts[t]; gr[5] = gr[t]; bef[5] = bef[t]; dw = t;
        if
        :: BEFORE(OTHER(t), t) -> bef[OTHER(t)] = bef[OTHER(t)] - (1 << (t)) + (1 << 5)
        :: else -> skip
        fi;
        tk[t] = 0; gr[t] = 0; tx[t] = 0; ts[t] = 0; bef[t] = 0
    :: else -> skip
    fi;
    if :: cnt[t] == 2 -> dX++ :: cnt[t] == 1 -> dS++ :: else -> skip fi;
    if :: mk[t] -> dW++ :: else -> skip fi;
    cnt[t] = 0; mk[t] = 0
}
/* The grants a change of RT made. A granted ticket's numbers are used only for its index mod
 * RB (BOUNDARY), so they are kept mod RB from then on (the dead one's not at all): a granted S
 * ticket may fall behind n_X for good (a shared reset moves n_X past it). */
inline regrant() {
    if
    :: tk[3] != 0 && !gr[3] && GRANTED_T(3) -> gr[3] = 1; tx[3] = tx[3] % RB; ts[3] = ts[3] % RB
    :: else -> skip
    fi;
    if
    :: tk[4] != 0 && !gr[4] && GRANTED_T(4) -> gr[4] = 1; tx[4] = tx[4] % RB; ts[4] = ts[4] % RB
    :: else -> skip
    fi;
    if :: tk[5] != 0 && !gr[5] && GRANTED_T(5) -> gr[5] = 1; tx[5] = 0; ts[5] = 0 :: else -> skip fi
}
/* a waiting ticket t that n_M went past (the NIC is in the middle of an FAA on RT) */
inline skipped(t) {
    if
    :: tk[t] != 0 && !gr[t] && (tx[t] < rnX || (tk[t] == 2 && ts[t] < rnS)) ->
        if :: (t) != 5 -> gone[t] = 1 :: else -> skip fi;
        drop(t)
    :: else -> skip
    fi
}
/* A release executed (n_M += 1, before the budget shift). In the protocol the ticket served is
 * the releaser's own. A holder that lost its lease and releases all the same (-DLATE_RELEASE)
 * serves its dead ticket if no reset passed it yet; else it moves n_M one too far: the word may
 * be left ill-formed (n > max), a waiting ticket it passes sees itself skipped. */
inline served(who) {
    assert(rnX <= rmX && rnS <= rmS);                  /* a release serves a ticket that exists */
    if
    :: tk[who] != 0 -> drop(who)
    :: tk[who] == 0 && tk[5] != 0 && dw == who -> drop(5)
    :: else -> skipped(OTHER(who)); skipped(5)
    fi
}
/* counters back below the budget after n_M moved (see "Tickets" in the header) */
inline norm() {
    do
    :: rnX >= RB -> rnX = rnX - RB; rmX = rmX - RB;
        if :: tk[3] != 0 && !gr[3] -> tx[3] = tx[3] - RB :: else -> skip fi;
        if :: tk[4] != 0 && !gr[4] -> tx[4] = tx[4] - RB :: else -> skip fi;
        if :: tk[5] != 0 && !gr[5] -> tx[5] = tx[5] - RB :: else -> skip fi
    :: rnS >= RB -> rnS = rnS - RB; rmS = rmS - RB;
        if :: tk[3] == 2 && !gr[3] -> ts[3] = ts[3] - RB :: else -> skip fi;
        if :: tk[4] == 2 && !gr[4] -> ts[4] = ts[4] - RB :: else -> skip fi;
        if :: tk[5] == 2 && !gr[5] -> ts[5] = ts[5] - RB :: else -> skip fi
    :: else -> break
    od
}
/* ticket t (not w) is passed by w's reset: t came before w, and w is X, or t is X, or t is an S
 * ticket still waiting for an X ticket that is passed (fix 4b: it sees itself skipped) */
#define PASSED(w, t) (tk[t] != 0 && BEFORE(w, t) && \
    (tk[w] == 2 || tk[t] == 2 || (!gr[t] && tx[t] < tx[w])))
/* Rule 3's reset of RT by waiter w (DSLR's stuck reset, ticket.c reset_value): S (fix 4a)
 * n_X := w's m_X, w granted with its ticket; X (fix 6) n_X := w's m_X + 1, n_S := w's m_S, w's
 * ticket consumed. Then, maybe, eW := 0 (clear_waiter_marks' CAS on RC). */
inline reset(w) {
    /* (A shared reset that skips a waiting S ticket would leave its count in max_S for good; it
     * needs an X ticket before that ticket and another between it and w: not with two members
     * and one dead ticket. dslr.pml models it.) */
    if
    :: PASSED(w, OTHER(w)) -> assert(tk[w] == 2 || tk[OTHER(w)] == 2);
        gone[OTHER(w)] = 1; drop(OTHER(w))
    :: else -> skip
    fi;
    if :: PASSED(w, 5) -> assert(tk[w] == 2 || tk[5] == 2); drop(5) :: else -> skip fi;
    if
    :: tk[w] == 2 -> rnX = tx[w] + 1; rnS = ts[w]; drop(w)
    :: else -> rnX = tx[w]
    fi;
    norm();
    regrant();
    rt_moved();
    if
    :: EW_OK(w) -> reW = 0; mk[3] = 0; mk[4] = 0; dW = 0; rc_moved()
    :: true -> skip
    fi
}
/* Rule 4 (a loopback CAS on RC): eX := 0, eS := 0, eW kept */
inline rule4() {
    reX = 0; reS = 0; cnt[3] = 0; cnt[4] = 0; dX = 0; dS = 0; rc_moved()
}
/* Rule 6 (clear_orphans, a loopback CAS on RC): the marks of the classes c that had no ticket
 * out -- eX (c bit 0), eS (bit 1), and the waiting ones, eW, when neither had */
inline orphans(c) {
    if
    :: (c) & 1 -> reX = 0; dX = 0;
        if :: cnt[3] == 2 -> cnt[3] = 0 :: else -> skip fi;
        if :: cnt[4] == 2 -> cnt[4] = 0 :: else -> skip fi
    :: else -> skip
    fi;
    if
    :: (c) & 2 -> reS = 0; dS = 0;
        if :: cnt[3] == 1 -> cnt[3] = 0 :: else -> skip fi;
        if :: cnt[4] == 1 -> cnt[4] = 0 :: else -> skip fi
    :: else -> skip
    fi;
    if :: (c) == 3 -> reW = 0; mk[3] = 0; mk[4] = 0; dW = 0 :: else -> skip fi;
    rc_moved()
}
/* Rule 7 (tk_pass_on): ticket t (a member's own, or the dead one) is served by a CAS from a
 * value of RT that shows it granted and unserved: the step happens only while it is (the CAS
 * fails otherwise, and changes nothing). */
inline cas_serve(t) {
    if :: tk[t] == 2 -> rnX++ :: else -> rnS++ fi;
    assert(rnX <= rmX && rnS <= rmS);
    if :: tk[t] == 2 -> rt_moved_c(1) :: else -> rt_moved_c(2) fi;
    drop(t); norm(); regrant()
}
#endif

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
#define OP_W 9    /* FAA(RC, only eW and the activity counters) (-DDEADLINES) */
#define LAST 4    /* in w: the last operation of a chain (-DLEASES: fl[who] := 0) */
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
#ifdef LEASES
        if                                                     /* who's ticket: after the others' */
        :: op <= OP_TX ->
            bef[who] = (tk[OTHER(who)] != 0 -> 1 << OTHER(who) : 0) | (tk[5] != 0 -> 1 << 5 : 0)
        :: else -> skip
        fi;
#endif
        if                                                     /* store, and the reply */
        :: op == OP_TS -> rmS = o4 + 1; tx[who] = o3; ts[who] = o4 % RB; tk[who] = 1;
            ung[who] = (o1 != o3)
        :: op == OP_TX -> rmX = o3 + 1; tx[who] = o3; ts[who] = o4; tk[who] = 2;
            ung[who] = (o1 != o3 || o2 != o4)
#ifdef LEASES
        :: op == OP_NS -> rnS = o2 + 1; served(who); norm()
        :: op == OP_NX -> rnX = o1 + 1; served(who); norm()
#else
        :: op == OP_NS -> rnS = o2 + 1; shift_s(rnS, rmS, 3, 4, RB)
        :: op == OP_NX -> rnX = o1 + 1; shift_x(rnX, rmX, 3, 4, RB)
#endif
        :: op == OP_RS -> reS = o2 + 1
        :: op == OP_RX -> reX = o1 + 1
        :: op == OP_DS -> assert(o2 > 0); reS = o2 - 1         /* no count goes below 0 */
        :: op == OP_DX -> assert(o1 > 0); reX = o1 - 1
        :: op == OP_W -> skip
        fi;
        if
        :: (w & 3) == 1 -> reW = o3 + 1
        :: (w & 3) == 2 -> assert(o3 > 0); reW = o3 - 1
        :: else -> skip
        fi;
#ifdef LEASES
        if
        :: op == OP_TX || op == OP_NX -> rt_moved_c(1)
        :: op == OP_TS || op == OP_NS -> rt_moved_c(2)
        :: else -> rc_moved()
        fi;
        if                                                     /* the ghosts */
        :: op <= OP_NX -> regrant()
        :: op == OP_RS -> cnt[who] = 1
        :: op == OP_RX -> cnt[who] = 2
        :: op == OP_DS && cnt[who] == 0 && dS > 0 -> dS--      /* a void holder's late lower */
        :: op == OP_DX && cnt[who] == 0 && dX > 0 -> dX--
        :: op == OP_W -> skip
        :: else -> cnt[who] = 0
        fi;
        if
        :: (w & 3) == 1 -> mk[who] = 1
        :: (w & 3) == 2 && !mk[who] && dW > 0 -> dW--
        :: (w & 3) == 2 -> mk[who] = 0
        :: else -> skip
        fi;
        if :: w & LAST -> fl[who] = 0 :: else -> skip fi;     /* the chain's last operation */
        assert(MARKS_OK);
#endif
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
#ifdef LEASES
    hold[d] = mode + 1;
    if                                             /* a local judge stops watching */
    :: d <= 2 -> wt4[d] = 0; j4[J4(d, 3)] = 0; j4[J4(d, 4)] = 0
    :: else -> skip
    fi;
#endif
    if
    :: mode == X -> assert(nrd == 0 && nwr == 0); nwr++
    :: else -> assert(nwr == 0); nrd++
    fi
}
inline leave_cs(d) {
    incs[d] = 0;
#ifdef LEASES
    hold[d] = 0;
#endif
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
    bit mode, tu, marked, r6back;
ncs:
    if                                             /* A1: FAA(LT, +1 in mM) */
    :: atomic { trying[d] = 1; mode = S; tx[d] = lmX; ts[d] = lmS % LB; tk[d] = 1; lmS++ }
    :: atomic { trying[d] = 1; mode = X; tx[d] = lmX; ts[d] = lmS; tk[d] = 2; lmX++ }
    :: goto end_idle                               /* a thread may stop competing forever */
    fi;
#ifdef LEASES
    atomic { GRANTED_L -> raise_l(); wt4[d] = 1 }  /* ... and it watches RC (rule 4) */
#else
    atomic { GRANTED_L -> raise_l() };             /* A2 (re-reading LT), then A3 */
#endif
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
#ifdef LEASES
    :: atomic { R4_OK(d) -> rule4() }; goto a4     /* rule 4: the remote marks are the late's */
    :: atomic { RULE6_START -> r6[d] = 1; r6c[d] = R6_CLASSES; r6back = 0 }; goto rule6
#endif
    fi;
cs: /* release */
#ifdef WAITER_MARK
    if
    :: atomic { MIDBUDGET(LB) -> leave_cs(d); lower_l(); leW = leW - marked; marked = 0 }
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
    :: atomic { MIDBUDGET(LB) -> leave_cs(d); lower_l() }
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
#ifdef LEASES
bwait:
    if
    :: (turn == LOCAL || reX + reS == 0)
    :: atomic { R4_OK(d) -> rule4() }; goto bwait  /* rule 4 */
    :: atomic { turn == REMOTE -> turn = LOCAL }; goto bwait   /* rule 5: TURN only breaks ties */
    :: atomic { RULE6_START -> r6[d] = 1; r6c[d] = R6_CLASSES; r6back = 1 }; goto rule6
    fi;
#else
    (turn == LOCAL || reX + reS == 0);
#endif
    atomic { raise_l() };                          /* A3 again */
    goto a4;
#ifdef LEASES
rule6: /* Rule 6 (clear_orphans): the look showed marks in RC; a read of RT showed no remote
        * ticket of the classes r6c outstanding (step 1); then RC is read (2: it counts marks of
        * them), RT again (3: those classes as at step 1), and RC is CASed from the value read to
        * no marks of those classes (4). */
    if
    :: atomic { r6[d] == 1 && R6_MARKS(r6c[d]) -> r6[d] = 2 }
        if
        :: atomic { r6[d] == 2 -> r6[d] = 3 }
            atomic { if :: r6[d] == 3 -> r6[d] = 0; orphans(r6c[d]) :: else -> r6[d] = 0 fi;
                     r6c[d] = 0 }
        :: atomic { r6[d] != 2 -> r6[d] = 0; r6c[d] = 0 }
        fi
    :: atomic { r6[d] != 1 || !R6_MARKS(r6c[d]) -> r6[d] = 0; r6c[d] = 0 }
    fi;
    if :: r6back -> r6back = 0; goto bwait :: else -> goto a4 fi;
#endif
end_idle:
    false
}

/* ---------------------------------------------------------------------------------------- */

#ifdef LEASES
/* A remote member with leases (see "Leases" in the header). Every READ is executed in steps of
 * its own and decided on in a later step; every FAA is posted only by a member that is not late
 * (else it abandons); a post clears the flags of the judges that will see it. */
#define LATE (B3(d) || l4[d])                   /* late for a judge that can recover it */
#ifdef NO_ENTRY_CHECK
#define ENTRY_LATE 0
#else
#define ENTRY_LATE LATE
#endif
#ifdef UNCHECKED_PASS_ON
#define PASS_LATE 0
#else
#define PASS_LATE B3(d)                         /* a ticket's own release: rule 3's view */
#endif
#ifdef LATE_RELEASE
#define MAY_RELEASE 1
#else
#define MAY_RELEASE (!vd[d])
#endif

inline fresh4(d) {                              /* a sign of life for the rule-4 judges */
    l4[d] = 0; j4[J4(1, d)] = 0; j4[J4(2, d)] = 0
}
inline fresh(d) {                               /* a sign of life for every judge */
    l3[d] = 0; j3[d] = 0; fresh4(d);
#ifdef SILENT_BACKOFF
    b3[d] = 0; stale3[d] = 0;
#endif
}
inline fresh3(d) {                              /* ... for the rule-3 judges */
    l3[d] = 0; j3[d] = 0;
#ifdef SILENT_BACKOFF
    b3[d] = 0; stale3[d] = 0;
#endif
}
inline unwatch3(d) {                            /* d stops judging the other member */
    wt3[d] = 0; j3[OTHER(d)] = 0
}
/* back to idle; failed: it abandons, leaving its ticket and marks in RT and RC (dead) */
inline r_idle(failed) {
    if :: failed -> kill(d) :: else -> skip fi;
    fresh(d); unwatch3(d); gone[d] = 0; trying[d] = 0;
    mode = 0; rs[d] = 0; marked = 0; c = 0; tu = 0
}

proctype Remote(byte d) {
    bit mode, tu, c, marked;
ncs:
    if          /* the fast path: one chain {FAA(RT, +1 in mM); FAA(RC, +1 in eM); READ line} */
    :: atomic { READY -> trying[d] = 1; mode = S; fresh(d); fl[d] = 1; POST(OP_TS, 0) }
    :: atomic { READY -> trying[d] = 1; mode = X; fresh(d); fl[d] = 1; POST(OP_TX, 0) }
    /* rule 7: the ticket it left when it abandoned (or lost its lease) is passed on with a CAS
     * (tk_pass_on at once, or lock_thread_poll later), which serves it only if it is still
     * granted and unserved; or never (its node stopped answering) */
    :: atomic { tk[5] != 0 && dw == d && gr[5] -> cas_serve(5) }; goto ncs
    :: goto end_idle
    fi;
    /* the raise; if the FAA's result showed the ticket not granted, the READ's reply is thrown
     * away: for everyone else the chain ends with the raise */
    atomic { READY -> rs[d] = 1; POST(RAISE_OP, (ung[d] -> LAST : 0)) };
a4read: /* the READ of the line after a raise: LC and TURN, in either order; or the fast path's
         * decision when its ticket was not granted */
    if
    :: atomic { READY && ung[d] && !LATE -> ung[d] = 0; rs[d] = 0; fresh4(d); fl[d] = 1;
        POST(LOWER_OP, LAST); wt3[d] = 1 }; goto a2      /* FAA(RC, -1 in eM): lower, then A2 */
    :: atomic { READY && ung[d] && LATE -> ung[d] = 0; r_idle(1) }; goto ncs   /* abandon */
    :: atomic { READY && !ung[d] && !CONFLICT_L -> nic[d] = 0; fl[d] = 0 }     /* LC: no conflict */
    :: atomic { READY && !ung[d] && CONFLICT_L -> nic[d] = 0; c = 1 };         /* LC, then TURN */
        atomic { tu = turn; fl[d] = 0 }
    :: atomic { READY && !ung[d] -> nic[d] = 0; tu = turn };                   /* TURN, then LC */
        atomic { c = CONFLICT_L; fl[d] = 0 }
    fi;
a4dec: /* the decision on the READ's reply (c: LC conflicts; tu: TURN), in a step of its own */
    if
    :: atomic { !c && !ENTRY_LATE -> tu = 0; enter_cs(d) }; goto cs
    :: atomic { !c && ENTRY_LATE -> r_idle(1) }; goto ncs                      /* abandon */
    /* evidence too old to enter on (three quarters of a lease) but younger than a lease: a
     * refresh (FAA(RC, +actR)) and a new look */
    :: atomic { !c && !LATE -> tu = 0; fresh(d); fl[d] = 1; POST(OP_W, LAST) }; goto a4read
    :: atomic { c && tu == REMOTE -> c = 0; tu = 0; fl[d] = 1 }; goto a4read  /* stay raised */
    :: atomic { c && tu == LOCAL && !LATE ->                                   /* back off: */
        c = 0; tu = 0; rs[d] = 0; fl[d] = 1;                         /* FAA(RC, -1 in eM, */
        POST(LOWER_OP, (1 - marked) | LAST); marked = 1;              /* +1 in eW, +actW) */
#ifdef SILENT_BACKOFF
        fresh4(d); b3[d] = 0; stale3[d] = 1 };         /* actO only: not a sign for rule 3 */
#else
        fresh(d) };
#endif
        goto bwait
    :: atomic { c && tu == LOCAL && LATE -> r_idle(1) }; goto ncs              /* abandon */
#ifdef DEADLINES
    /* its deadline: lower and unmark (FAA(RC, -1 in eM, -1 in eW if marked, +actO)), then
     * pass the granted ticket on (FAA(RT, +1 in nM)) */
    :: atomic { c && !LATE -> c = 0; tu = 0; rs[d] = 0; fresh4(d); fl[d] = 1;
        POST(LOWER_OP, (marked * 2) | LAST); marked = 0 }; goto giveup
    :: atomic { c && LATE -> r_idle(1) }; goto ncs
#endif
    fi;
cs: /* release: {READ RC if a budget ends}, then the chain {WRITE TURN; FAA(RC, -1 in eM, -1 in
     * eW if marked); FAA(RT, +1 in nM)}, only if the lease still holds */
    if
    :: atomic { vd[d] -> vd[d] = 0; r_idle(0) }; goto ncs   /* lease lost inside: touch nothing */
    :: atomic { MAY_RELEASE && (MIDBUDGET(RB) || reW != marked) ->
        if :: vd[d] -> vd[d] = 0 :: else -> leave_cs(d) fi;
        fl[d] = 1; POST(LOWER_OP, marked * 2); marked = 0 }
    :: atomic { MAY_RELEASE && BOUNDARY(RB) && reW == marked ->
        if :: vd[d] -> vd[d] = 0 :: else -> leave_cs(d) fi;
        fl[d] = 1 };
        turn = LOCAL;                                        /* WRITE TURN := prio(other) */
        atomic { POST(LOWER_OP, marked * 2); marked = 0 }
    fi;
    atomic { READY -> POST((mode == X -> OP_NX : OP_NS), LAST); r_idle(0) };
    goto ncs;
bwait: /* backed off: READ the line until TURN is ours or LC has nobody raised; raise again */
    if
    :: atomic { READY && (turn == REMOTE || leX + leS == 0) && !LATE ->
        rs[d] = 1; fresh(d); fl[d] = 1; POST(RAISE_OP, 0) }; goto a4read    /* +actR */
    :: atomic { READY && (turn == REMOTE || leX + leS == 0) && LATE -> r_idle(1) }; goto ncs
#ifdef SILENT_BACKOFF
    :: atomic { READY && !LATE && l3[d] -> fresh3(d) }; goto bwait   /* its refresh, FAA(+actW) */
#endif
#ifdef DEADLINES
    :: atomic { READY && !LATE -> fl[d] = 1; POST(OP_W, 2 | LAST); marked = 0 }; goto giveup
    :: atomic { READY && LATE -> r_idle(1) }; goto ncs
#endif
    fi;
a2: /* A2: READ RT until a reply shows the ticket granted or passed, or reset it (rule 3) */
    if
    :: atomic { READY && l3[d] && !gr[d] && !gone[d] -> fresh3(d) }; goto a2  /* a READ posted */
    :: atomic { READY && gr[d] -> unwatch3(d) }          /* a READ shows it granted */
    :: atomic { READY && gone[d] -> r_idle(0) }; goto ncs   /* ... or skipped: it failed */
    :: atomic { READY && mode == S && RESET_OK(d) -> fresh3(d); reset(d); unwatch3(d) }
                                                       /* ... granted by its own reset */
    :: atomic { READY && mode == X && RESET_OK(d) -> reset(d); r_idle(0) }; goto ncs  /* failed */
#ifdef DEADLINES
    :: atomic { READY -> unwatch3(d) }; goto end_pass   /* its deadline: give the ticket up */
#endif
    fi;
    /* the decision on a reply that shows the ticket granted */
    if
    :: atomic { !ENTRY_LATE -> rs[d] = 1; fresh(d); fl[d] = 1; POST(RAISE_OP, 0) }; goto a4read
    :: atomic { ENTRY_LATE -> r_idle(1) }; goto ncs                            /* abandon */
    fi;
#ifdef DEADLINES
end_pass: /* A given-up ticket (tk_abandon): READ RT until its turn comes, then pass it on
           * (lock_thread_poll). In the code the thread goes on with other requests meanwhile:
           * waiting here for ever is no deadlock. */
    if
    :: atomic { READY && l3[d] && !gr[d] && !gone[d] -> fresh3(d) }; goto end_pass   /* READ */
    :: atomic { READY && gone[d] -> r_idle(0) }; goto ncs
#ifdef UNCHECKED_PASS_ON
    :: atomic { READY && gr[d] -> skip }                 /* a READ shows it granted: FAA */
#else
    :: atomic { READY && gr[d] -> cas_serve(d); r_idle(0) }; goto ncs   /* rule 7: a CAS */
#endif
    /* kept 64 leases, then dropped: left dead (one failure at a time) */
    :: atomic { !OUTSTANDING && !gr[d] && !gone[d] -> r_idle(1) }; goto ncs
    fi;
giveup: /* the decision to pass a granted ticket on: FAA(RT, +1 in nM), if not late */
    if
    :: atomic { READY && !PASS_LATE -> fl[d] = 1; POST((mode == X -> OP_NX : OP_NS), LAST);
        r_idle(0) }
    :: atomic { READY && PASS_LATE -> r_idle(1) }      /* late: the ticket is left dead */
    fi;
    goto ncs;
#endif
end_idle:
    false
}

/* Time passes for member t (a pause, a slow fabric, a delayed reply): it is late for every
 * judge. A holder inside loses its lease there: the ghost counts drop it, and its ticket and
 * marks are dead from then on (nobody may serve or lower them). */
inline tick(t) {
    l3[t] = 1; l4[t] = rs[t] | (cnt[t] != 0);
    if :: wt3[OTHER(t)] -> j3[t] = 1 :: else -> skip fi;
    if :: wt4[1] && l4[t] -> j4[J4(1, t)] = 1 :: else -> skip fi;
#if NLOCAL >= 2
    if :: wt4[2] && l4[t] -> j4[J4(2, t)] = 1 :: else -> skip fi;
#endif
#ifdef SILENT_BACKOFF
    b3[t] = 1; stale3[t] = 0;
#endif
    if
    :: hold[t] != 0 ->
        if :: hold[t] == 2 -> nwr-- :: else -> nrd-- fi;
        hold[t] = 0; incs[t] = 0; vd[t] = 1; kill(t)
    :: else -> skip
    fi
}
/* Who may be made late: a member that holds, or has a granted ticket or a counted mark, also
 * while its release is in flight (a tick elsewhere changes nothing anyone sees before the
 * member's next post, which clears it); only while the other member is not late and no dead
 * leftovers are in RT or RC (one failure at a time); again while late, for a judge that started
 * watching since (more time passes). */
#define NEWS(t) (!l3[t] || l4[t] != RAISED(t) || (wt3[OTHER(t)] && !j3[t]) || \
    (wt4[1] && RAISED(t) && !j4[J4(1, t)]) || (wt4[2] && RAISED(t) && !j4[J4(2, t)]))
#define TICK(t) (tk[5] == 0 && dX + dS + dW == 0 && !LATE_ANY(OTHER(t)) && \
    (hold[t] != 0 || ((tk[t] != 0 && gr[t] || cnt[t] != 0) && NEWS(t))))

proctype Clock() {
end_clock:
    do
    :: atomic { TICK(3) -> tick(3) }
    :: atomic { TICK(4) -> tick(4) }
#ifdef SILENT_BACKOFF
    /* after a back-off that rule 3 does not see, rule 3's view of the member ages alone */
    :: atomic { !OUTSTANDING && stale3[3] -> l3[3] = 1; j3[3] = wt3[4]; stale3[3] = 0 }
    :: atomic { !OUTSTANDING && stale3[4] -> l3[4] = 1; j3[4] = wt3[3]; stale3[4] = 0 }
#endif
    od
}

#else /* LEASES */

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
    :: atomic { MIDBUDGET(RB) -> leave_cs(d); POST(LOWER_OP, marked * 2); marked = 0 }
    :: atomic { BOUNDARY(RB) && reW != marked -> leave_cs(d); POST(LOWER_OP, marked * 2); marked = 0 }
    :: atomic { BOUNDARY(RB) && reW == marked -> leave_cs(d) };
        turn = LOCAL;
        atomic { POST(LOWER_OP, marked * 2); marked = 0 }
    fi;
#else
    if
    :: atomic { BOUNDARY(RB) -> leave_cs(d); turn = LOCAL }
        atomic { POST(LOWER_OP, 0) }
    :: atomic { MIDBUDGET(RB) -> leave_cs(d); POST(LOWER_OP, 0) }
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

#endif /* LEASES */

init {
    atomic {
        run NIC(); run Local(1);
#if NLOCAL >= 2
        run Local(2);
#endif
        run Remote(3); run Remote(4);
#ifdef LEASES
        run Clock()
#endif
    }
}

#ifdef LIVENESS
ltl starve_l1 { [] (trying[1] -> <> incs[1]) }
ltl starve_l2 { [] (trying[2] -> <> incs[2]) }
ltl starve_r3 { [] (trying[3] -> <> incs[3]) }
ltl starve_r4 { [] (trying[4] -> <> incs[4]) }
#endif
