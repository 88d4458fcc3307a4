/* RMA-RW as implemented (locks/rma.c; protocol in docs/rma-locks.md, "Protocol (as
 * implemented)"), for the spin model checker, with three fixes that the model checker showed
 * are needed (below). docs/rma-model.md says what the model covers, why its abstractions are
 * sound, and what each bad variant's counterexample is.
 *
 * Two elements (nodes 0 and 1) with two lock clients each: clients 0, 1 on node 0, clients 2, 3
 * on node 1. Roles (bit i of WMASK / RMASK: client i may be a writer / a reader): clients 0 and
 * 1 pick reader or writer on every attempt, client 2 is a writer, client 3 a reader. So there
 * are readers and writers on both nodes, two writers on node 0 (intra-node hand-offs), writers
 * of both nodes in DQ1, and two readers on counter 0. (-DWMASK=15 -DRMASK=15, every client
 * picks every time, passes too but is too big for ctest: docs/rma-model.md.) Node e's readers
 * use counter e (rma_dc_per_node = 1, a counter host per node); writers use both counters.
 *   TAIL2[e]              node e's DQ2 tail (client + 1), tickets, served  NIC atomics only
 *   TAIL1                 DQ1's tail (site + 1), tickets, served            NIC atomics only
 *   STATUS[i], NEXT[i]    client i's descriptor          its own loads/stores, others' WRITEs
 *   STATUS1[q], NEXT1[q]  level-1 queue node q: node q's site (-DBUG4: client q's own)
 *   counter e             MODE, EPOCH, WAITERS x2, ARRIVE, DEPART: one word  NIC atomics only
 * What the model keeps from rdkv's fabric (DESIGN §3):
 *   - a NIC atomic (CAS, FAA; a read of a tail or a counter is FAA 0) is executed by the word's
 *     NIC, atomically with respect to every other NIC atomic on the word, and every access to
 *     these words is a NIC atomic (loopback included): no step of anybody falls between its
 *     load and its store, so it is one step;
 *   - a queue-node field is one 8-byte word, written by others with a NIC WRITE (one step) and
 *     read or initialised by its owner with plain loads and stores (one step each);
 *   - a CAS loop is a loop of CASes: a failed CAS is a step of its own that only learns the
 *     word (the swaps). Two loops are one step each: reset_counters() and reader_reset() (FAA 0,
 *     then CAS from the value read): the successful CAS is their only step with an effect, and
 *     their retries are bounded (docs/rma-model.md, "Abstractions"; -DRESET_LOOPS checks the
 *     readers' loops step by step);
 *   - an FAA's returned value is the word at that instant: what the wait loop's next look would
 *     decide is decided on it (wait_next).
 * Merged steps: a step is merged with a neighbour of the same client only when every step of
 * the others that could fall between them commutes with one of the two, and no client takes a
 * step that commutes only with the first and then one that commutes only with the second (so
 * an execution with steps in between reorders into one without); docs/rma-model.md lists each:
 *   - a client's bookkeeping and its own queue node before it is enqueued ride along;
 *   - entering the critical section is merged with the read that decides to enter, leaving it
 *     with the first release step (this only widens the critical section);
 *   - a WRITE of a waiting successor's STATUS/STATUS1 rides with the step before it (only that
 *     successor reads the word, and it is blocked until the write);
 *   - the two counters' FAAs in set_write(), their reads in admit() and drain() and their CASes
 *     in reset_counters(): one step each (only the DQ1 holder touches two counters; a reader
 *     touches one);
 *   - a release's reads of NEXT, STATUS1 and (T_L,1 reached) the reset; the level-1 hand-off
 *     or CAS with the level-2 hand-off or CAS that follows it;
 *   - a read that stays true once true (ACQUIRE_PARENT, MODE_CHANGE, our turn) with the next
 *     step;
 *   - a spin-wait ("repeat read until ...") is a guard.
 * Dead fields are cleared and EPOCH is kept 0 while nothing depends on it (DEAD, CANON: exact).
 * Ghosts: nr, nw (readers and writers inside), trying[i], incs[i].
 *
 * THE FIXES. docs/rma-locks.md as first written failed starvation freedom in three ways; the
 * model found each, and the text now has the fixes. Each fix is the default here; its define
 * restores the first text and is a bad variant that must be caught.
 *   1. The swap (-DSWAP_CAS_LOOP). SWAP(tail, self) was lock_swap(), a plain CAS loop: a
 *      writer's loop can learn a stale tail every time while its peer enqueues and empties the
 *      queue, forever. The fix, ENQUEUE with a ticket line in the tail word: CAS {0, 0, 0} ->
 *      {self, 0, 0}, then up to PLAIN - 1 more CASes (PLAIN = 4 tries in all, locks/rma.c's
 *      TQ_TRIES) from the word learned while it shows no ticket out (w2plain/w1plain); if those
 *      fail, FAA +1 on the word's ticket field (my ticket: the field before), FAA 0 until
 *      served = my ticket, then CAS {tail, tickets, served} as learned -> {self, tickets,
 *      served + 1} until it succeeds (the last ticket out sets both fields back to 0); a
 *      release empties a tail only with no ticket out (CAS {self, 0, 0} -> 0). (ALock's
 *      pending count is not enough with three enqueuers per tail: docs/rma-model.md.)
 *   2. The registration gap (-DWAITER_GAP). A registered reader's arrival FAA(+ARRIVE -
 *      WAITER) unregistered it, and if it saw WRITE it registered again with a second FAA: a
 *      writer's admit() can pass in between, every time. The fix: a registered reader arrives
 *      with +ARRIVE only, stays registered, and unregisters when it departs: FAA(+DEPART -
 *      WAITER).
 *   3. The T_R back-off (-DTR_GAP). A reader turned away because T_R readers came since the
 *      reset waited unregistered for ARRIVE < T_R, and a second reader of its counter can take
 *      every such window (no writer needed); registering it at once in the one WAITERS field
 *      instead lets readers keep admit() waiting. The fix, epochs: the counter word holds an
 *      EPOCH bit and two WAITERS fields, one per epoch parity. A reader that backs off (WRITE
 *      seen, or ARRIVE >= T_R) registers, with the same FAA, in the field of the epoch it saw,
 *      and may enter at a READ arrival, whatever ARRIVE says, once EPOCH differs (it is
 *      "entitled"); a reset (a writer's or a reader's) flips EPOCH only when the previous
 *      epoch's field is 0; admit() waits until the previous epoch's field is 0; a registered
 *      reader that is not entitled and sees READ, ARRIVE >= T_R and DQ1 empty resets: repeat
 *      FAA 0, stop if WRITE, entitled or ARRIVE < T_R, until the CAS. (A reset tried before
 *      registering can fail forever while a peer arrives, resets and enters: -DRESET_LOOPS
 *      shows the loops step by step.)
 *
 * Checked by tests/models/check.sh (ctest model_rma_rw):
 *   safety     a writer inside excludes everybody else, readers overlap only readers (asserts on
 *              nr, nw), counters and ticket fields stay in their bounds (asserts), no deadlock;
 *   liveness   starvation freedom, [] (trying[i] -> <> incs[i]), under weak fairness, for every
 *              client (starve_c0 .. starve_c3); clients may stop competing forever;
 *   -DBUG1     digest defect 1: the writer does not drain() the readers: S/X violated;
 *   -DBUG3     digest defect 3: reader_reset is the printed reset_counter, a read and then a
 *              separate subtract that also clears MODE when the read saw it set: S/X violated;
 *   -DBUG4     digest defect 4: the level-1 queue node is the client's own (as printed): a
 *              client that got its node's lock by an intra-node hand-off releases level 1 with a
 *              node that was never enqueued: it waits forever, and DQ1 with it;
 *   -DBUG_TR   waiting readers never look at TAIL1 again and reset (the printed listing's one
 *              look at ARRIVE = T_R): a reader waits forever;
 *   -DBUG_STARVE  no WAITERS registration and no admit(): a reader starves;
 *   -DSWAP_CAS_LOOP, -DWAITER_GAP, -DTR_GAP  the first text, fixes 1, 2, 3 left out:
 *              starvation.
 * Parameters: -DTL2= (default 2, the smallest with intra-node hand-offs), -DTL1= (default 2:
 * level-1 hand-offs in WRITE mode), -DTR= (default 1), -DPLAIN= (default 4), -DRESET_LOOPS
 * (the readers' reset loops as a read and a CAS each, retried while the word changed in
 * between, instead of one step: passes too, at 1.3 times the states).
 */

#define NC 4                /* clients 0..3; client i is on node E(i) */
#define NE 2                /* nodes, sites, counters */
#define E(i) ((i) / 2)
#ifdef BUG4
#define NQ NC               /* level-1 queue node per client (the printed listing) */
#define QN(i) (i)
#else
#define NQ NE               /* level-1 queue node per node: the site */
#define QN(i) E(i)
#endif

#ifndef TL2
#define TL2 2
#endif
#ifndef TL1
#define TL1 2
#endif
#ifndef TR
#define TR 1
#endif
#ifndef WMASK
#define WMASK 7             /* bit i: client i may be a writer (0, 1, 2) */
#endif
#ifndef RMASK
#define RMASK 11            /* bit i: client i may be a reader (0, 1, 3) */
#endif
#define MAXA (TR + 4)       /* ARRIVE: T_R + the counter's 2 clients per phase + 2 transient */
#define MAXP 2              /* tickets out per tail: the 2 climbers that can compete */
#define TKMOD 4             /* the ticket fields count mod TKMOD (> MAXP) */

#define WAIT (-1)
#define ACQUIRE_PARENT (-2)
#define MODE_CHANGE (-3)

byte tail2[NE], tk2[NE], sv2[NE];  /* TAIL2 words: tail, tickets taken, tickets served */
byte tail1, tk1, sv1;              /* the TAIL1 word */
short status[NC];           /* descriptors */
byte next[NC];
short status1[NQ];          /* sites (-DBUG4: per client) */
byte next1[NQ];
bit mode[NE];               /* counters */
byte waiters[2 * NE];       /* WAITERS: two fields per counter, by epoch parity */
bit epoch[NE];              /* EPOCH */
byte rre[NC];               /* a reader's registration: 0 none, else 1 + the epoch parity */
bit fresh[NC];              /* a reader's reset loop: the counter unchanged since its read */
short arrive[NE], depart[NE];

/* ghost */
byte nr, nw;                /* readers and writers inside */
bit trying[NC], incs[NC];

inline enter_w() {
    nw++; assert(nw == 1 && nr == 0); trying[i] = 0; incs[i] = 1
}
inline enter_r() {
    nr++; assert(nw == 0); trying[i] = 0; incs[i] = 1
}
/* every step that writes counter c calls this: the bounds, and (EPOCHS) the word has changed
 * for a reader of c between the read and the CAS of its reset loop (fresh) */
inline check_counter(c) {
#ifdef RESET_LOOPS
    fresh[2 * (c)] = 0; fresh[2 * (c) + 1] = 0;
#endif
    assert(arrive[c] >= depart[c] && depart[c] >= 0 && arrive[c] <= MAXA &&
           waiters[2 * (c)] + waiters[2 * (c) + 1] <= 2)
}

/* SWAP(T:K:S, self) -> pred: the first CAS, from empty (in the caller's step, with the
 * initialisation of its own queue node, which nobody else touches before the swap), then the
 * retries (the caller's w2cas, w1cas) */
#ifdef SWAP_CAS_LOOP
/* lock_swap(), the text: expect = 0; CAS(expect -> self) until it succeeds, learning expect */
#define SWAP_EMPTY(T, K, S) (T == 0)
#define SWAP_FIRST_FAIL(T, K, S) et = T
#define SWAP_OK(T, K, S) (T == et)
#define SWAP_TAKE(T, K, S, self) T = self; pred = et; et = 0
#define SWAP_LEARN(T, K, S) et = T
#define SWAP_NOBODY(K, S) true
#else
/* THE FIX, a ticketed swap: CAS {0, 0, 0} -> {self, 0, 0}; if it fails, take a ticket (FAA +1
 * on the tickets field: my = tickets before), wait (FAA 0) until served = my, then CAS
 * {tail, tk, sv} learned -> {self, tk, sv + 1} until it succeeds; the last ticket served resets
 * both counters ({self, 0, 0}), so tickets = served means both are 0. A release may empty a
 * tail only while no ticket is out: its CAS expects {self, 0, 0}. Counters are mod TKMOD. */
#define SWAP_EMPTY(T, K, S) (T == 0 && K == 0 && S == 0)
#define SWAP_FIRST_FAIL(T, K, S) et = T; etk = K; esv = S; pt = PLAIN - 1
#define SWAP_OK(T, K, S) (T == et && K == etk && S == esv)
#define SWAP_TAKE(T, K, S, self) \
    T = self; pred = et; \
    if \
    :: (S + 1) % TKMOD == K -> K = 0; S = 0 \
    :: else -> S = (S + 1) % TKMOD \
    fi; \
    et = 0; etk = 0; esv = 0; my = 0
#define SWAP_LEARN(T, K, S) et = T; etk = K; esv = S
#define SWAP_NOBODY(K, S) (K == 0 && S == 0)
#endif
/* The plain tries of tq_enqueue (locks/rma.c, TQ_TRIES = PLAIN): after the CAS from empty
 * failed, up to PLAIN - 1 more CASes from the word it learned, each only while that word shows no
 * ticket out (tickets = served, which means both 0); failing those, the ticket line. The guard
 * on the learned word is the client's own bookkeeping, merged with the CAS. */
#ifndef PLAIN
#define PLAIN 4
#endif

/* take a ticket (FAA +1 tickets), then wait for our turn (FAA 0 until served = my), learning
 * the word for the CAS */
#define TICKET(T, K, S, CAS) \
    atomic { \
        my = K; K = (K + 1) % TKMOD; assert((K + TKMOD - S) % TKMOD <= MAXP); \
        if \
        :: S == my -> SWAP_LEARN(T, K, S); goto CAS    /* our turn already: the FAA's value */ \
        :: else -> skip \
        fi }; \
    atomic { S == my -> SWAP_LEARN(T, K, S) }

/* Dead fields are cleared (so that stale values do not multiply states): a client's STATUS once
 * it has read it for the last time, its NEXT and its site's NEXT1 once its release is past them,
 * its site's STATUS1 once release_1 has read it. Nobody reads them before their owner writes them
 * again (not with -DBUG4, where a level-1 node can still be in DQ1: nothing is cleared there). */
#ifndef BUG4
#define DEAD(x) x = 0
#else
#define DEAD(x) skip
#endif

#define TAIL1_EMPTY (tail1 == 0 && tk1 == 0 && sv1 == 0)  /* FAA(home.TAIL1, 0) = 0 */

/* THE FIX 3, epochs (-DTR_GAP: the text, one WAITERS field, no EPOCH; -DBUG_STARVE: no
 * registration at all): a reader registers in the WAITERS field of the epoch it saw (rre) and
 * is entitled to enter at a READ arrival, whatever ARRIVE says, once EPOCH differs; a reset
 * flips EPOCH only when nobody is registered in the other field (OLDW: registered before the
 * current epoch, so entitled now); admit() waits for OLDW == 0 on every counter. */
#if !defined(TR_GAP) && !defined(BUG_STARVE)
#define EPOCHS
/* EPOCH is only seen relative to the WAITERS fields and the parities readers registered (or
 * are about to register) with: with both fields 0 and no such reader on the counter (clients
 * 2c and 2c + 1), both values of EPOCH behave alike, and it is kept 0 (exact) */
#define CANON(c) \
    if \
    :: waiters[2 * (c)] == 0 && waiters[2 * (c) + 1] == 0 && \
       rre[2 * (c)] == 0 && rre[2 * (c) + 1] == 0 -> epoch[c] = 0 \
    :: else -> skip \
    fi
#define WP(c) (2 * (c) + rre[i] - 1)
#define OLDW(c) waiters[2 * (c) + 1 - epoch[c]]
#define FLIP(c) if :: OLDW(c) == 0 -> epoch[c] = 1 - epoch[c] :: else -> skip fi; CANON(c)
#define ENTITLED(c) (reg && epoch[c] != rre[i] - 1)
#else
#define WP(c) (2 * (c))
#define OLDW(c) waiters[2 * (c)]
#define FLIP(c) skip
#define CANON(c) skip
#define ENTITLED(c) reg
#endif

/* admit(): read every counter until its old WAITERS field is 0 (one look: see the header) */
#ifndef BUG_STARVE
#define ADMIT (OLDW(0) == 0 && OLDW(1) == 0)
#else
#define ADMIT true
#endif

/* reset_counters(), writer: for each counter, repeat FAA 0 until CAS to {READ, a - d, 0,
 * WAITERS kept, EPOCH flipped if OLDW = 0}; one step for both (see the header) */
inline writer_reset() {
    atomic {
        check_counter(0); check_counter(1);
        mode[0] = 0; arrive[0] = arrive[0] - depart[0]; depart[0] = 0; FLIP(0);
        mode[1] = 0; arrive[1] = arrive[1] - depart[1]; depart[1] = 0; FLIP(1) }
}

/* reader_reset(c) */
inline reader_reset(c) {
#ifdef BUG3
    /* the printed reset_counter: read the word, then subtract DEPART from both fields and MODE
     * if the read saw it (a 64-bit add: MODE is bit 63, a carry out of it is lost) */
    atomic { rd = depart[c]; rm = mode[c] };
    atomic { arrive[c] = arrive[c] - rd; depart[c] = depart[c] - rd; mode[c] = mode[c] ^ rm;
             rd = 0; rm = 0; check_counter(c) }
#else
    /* the text's reader_reset: repeat FAA 0; stop if WRITE; until CAS to {READ, a - d, 0,
     * WAITERS and MODE kept}: one step */
    atomic {
        if
        :: mode[c] == 0 -> arrive[c] = arrive[c] - depart[c]; depart[c] = 0; FLIP(c);
            check_counter(c)
        :: else -> skip
        fi }
#endif
}

/* The reader's arrival, w = FAA(c, +ARRIVE), and what it decides (act, for the next step):
 * 1 registered, not entering: back off; 2 WRITE, or (epochs) READ and a(w) >= T_R: back off
 * and register (rre: the epoch seen); the text: 3 READ and a(w) = T_R: look at TAIL1, reset if
 * empty, back off without registering; 0 READ and a(w) > T_R: back off.
 * THE FIX 2: a registered reader stays registered until it departs (-DWAITER_GAP, the text:
 * FAA(c, +ARRIVE - WAITER), and back with -ARRIVE + WAITER). */
inline reader_arrive() {
    k = arrive[E(i)];                                         /* a(w) */
    arrive[E(i)]++;
#ifdef WAITER_GAP
    if
    :: reg -> assert(waiters[WP(E(i))] > 0); waiters[WP(E(i))]--
    :: else -> skip
    fi;
#endif
    check_counter(E(i));
    if
    :: mode[E(i)] == 0 && (ENTITLED(E(i)) || k < TR) -> k = 0;
#ifdef WAITER_GAP
        reg = 0; rre[i] = 0; CANON(E(i));
#endif
        enter_r(); goto rcs
    :: else -> skip
    fi;
    if
    :: reg -> act = 1
#ifdef EPOCHS
    :: !reg -> act = 2; rre[i] = epoch[E(i)] + 1          /* WRITE, or READ and k >= T_R */
#else
    :: !reg && mode[E(i)] == 1 -> act = 2
    :: !reg && mode[E(i)] == 0 && k == TR -> act = 3
    :: !reg && mode[E(i)] == 0 && k > TR -> act = 0
#endif
    fi;
    k = 0;
    goto rback
}

/* what a writer does after CAS(TAIL1, site -> 0) succeeded or WRITE(succ1.STATUS1, next):
 * level 2, in the same step: WRITE(succ.STATUS, ACQUIRE_PARENT) to the successor read at the
 * start of the release, or with none CAS(TAIL2, self -> 0); if that fails, wait for NEXT */
inline release_2() {
    nxt = 0; reset = 0;
    if
    :: succ != 0 -> status[succ - 1] = ACQUIRE_PARENT; succ = 0; DEAD(next1[QN(i)]); DEAD(next[i]); goto idle
    :: else -> skip
    fi;
    DEAD(next1[QN(i)]);
    if
    :: tail2[E(i)] == i + 1 && SWAP_NOBODY(tk2[E(i)], sv2[E(i)]) -> tail2[E(i)] = 0; goto idle
    :: else -> goto wait2
    fi
}

/* The wait loop's look, taken with the FAA just done (its value is the word before our own
 * change): where the loop goes next (rwait: wait there) */
inline wait_next() {
    if
#if !defined(EPOCHS) && !defined(BUG_STARVE)
    :: mode[E(i)] == 1 && !reg -> goto rsaw
#endif
#ifndef BUG_TR
    :: mode[E(i)] == 0 && arrive[E(i)] >= TR && !ENTITLED(E(i)) -> goto rchk
#endif
    :: mode[E(i)] == 0 && (ENTITLED(E(i)) || arrive[E(i)] < TR) -> goto rtop
    :: else -> goto rwait
    fi
}

proctype Client(byte i) {
    byte pred, et, etk, esv, my, succ, succ1, act, pt;
    short k, nxt;
    bit reset, reg;
#ifdef BUG3
    short rd; bit rm;
#endif
idle:
    if
    :: atomic { ((WMASK >> i) & 1) ->                        /* writer */
            trying[i] = 1; status[i] = WAIT; next[i] = 0;
            if                                                /* SWAP(TAIL2, self) */
            :: SWAP_EMPTY(tail2[E(i)], tk2[E(i)], sv2[E(i)]) ->
                /* no predecessor: mark our own STATUS as if told to climb (nobody else reads
                 * or writes it now), so that both ways up share the next step */
                tail2[E(i)] = i + 1; status[i] = ACQUIRE_PARENT; goto w2wait
            :: else -> SWAP_FIRST_FAIL(tail2[E(i)], tk2[E(i)], sv2[E(i)])
            fi }
    :: atomic { ((RMASK >> i) & 1) -> trying[i] = 1; reader_arrive() }   /* reader */
    :: goto end_idle                    /* a client may stop competing forever */
    fi;

    /* ---------------------------------- writer ---------------------------------------- */
#ifndef SWAP_CAS_LOOP
w2plain: /* the plain tries, then the ticket line */
    atomic {
        if
        :: pt > 0 && etk == 0 && esv == 0 && tail2[E(i)] == et && tk2[E(i)] == 0 && sv2[E(i)] == 0 ->
            tail2[E(i)] = i + 1; pred = et; et = 0; pt = 0;
            if
            :: pred == 0 -> status[i] = ACQUIRE_PARENT; goto w2wait
            :: else -> goto w2link
            fi
        :: pt > 0 && etk == 0 && esv == 0 && !(tail2[E(i)] == et && tk2[E(i)] == 0 && sv2[E(i)] == 0) ->
            et = tail2[E(i)]; etk = tk2[E(i)]; esv = sv2[E(i)]; pt--; goto w2plain
        :: else -> et = 0; etk = 0; esv = 0; pt = 0
        fi };
    TICKET(tail2[E(i)], tk2[E(i)], sv2[E(i)], w2cas);
#endif
w2cas:
    atomic {
        if
        :: SWAP_OK(tail2[E(i)], tk2[E(i)], sv2[E(i)]) -> SWAP_TAKE(tail2[E(i)], tk2[E(i)], sv2[E(i)], i + 1);
            if
            :: pred == 0 -> status[i] = ACQUIRE_PARENT; goto w2wait
            :: else -> skip
            fi
        :: else -> SWAP_LEARN(tail2[E(i)], tk2[E(i)], sv2[E(i)]); goto w2cas
        fi };
w2link:
    atomic { next[pred - 1] = i + 1; pred = 0 };              /* WRITE(pred.NEXT, self) */
w2wait: /* wait self.STATUS != WAIT: a count: enter (passed inside the node); ACQUIRE_PARENT:
         * acquire_1 with the node's level-1 queue node, its first CAS in the same step (the
         * read of ACQUIRE_PARENT stays true: nobody writes STATUS again) */
    if
    :: atomic { status[i] >= 1 -> succ = status[i]; DEAD(status[i]); enter_w(); goto wcs }
    :: atomic { status[i] == ACQUIRE_PARENT ->
            succ = 1; DEAD(status[i]); next1[QN(i)] = 0; status1[QN(i)] = WAIT;
            if                                                /* SWAP(TAIL1, site) */
            :: SWAP_EMPTY(tail1, tk1, sv1) ->
                tail1 = QN(i) + 1; status1[QN(i)] = MODE_CHANGE; goto w1wait    /* as above */
            :: else -> SWAP_FIRST_FAIL(tail1, tk1, sv1)
            fi }
    fi;
#ifndef SWAP_CAS_LOOP
w1plain: /* the plain tries, then the ticket line */
    atomic {
        if
        :: pt > 0 && etk == 0 && esv == 0 && tail1 == et && tk1 == 0 && sv1 == 0 ->
            tail1 = QN(i) + 1; pred = et; et = 0; pt = 0;
            if
            :: pred == 0 -> status1[QN(i)] = MODE_CHANGE; goto w1wait
            :: else -> goto w1link
            fi
        :: pt > 0 && etk == 0 && esv == 0 && !(tail1 == et && tk1 == 0 && sv1 == 0) ->
            et = tail1; etk = tk1; esv = sv1; pt--; goto w1plain
        :: else -> et = 0; etk = 0; esv = 0; pt = 0
        fi };
    TICKET(tail1, tk1, sv1, w1cas);
#endif
w1cas:
    atomic {
        if
        :: SWAP_OK(tail1, tk1, sv1) -> SWAP_TAKE(tail1, tk1, sv1, QN(i) + 1);
            if
            :: pred == 0 -> status1[QN(i)] = MODE_CHANGE; goto w1wait
            :: else -> skip
            fi
        :: else -> SWAP_LEARN(tail1, tk1, sv1); goto w1cas
        fi };
w1link:
    atomic { next1[pred - 1] = QN(i) + 1; pred = 0 };         /* WRITE(pred1.NEXT1, site) */
w1wait: /* wait site.STATUS1 != WAIT: a count: enter (WRITE mode already); MODE_CHANGE: admit(),
         * whose look is merged with this read (which stays true) */
    if
    :: atomic { status1[QN(i)] >= 1 -> enter_w(); goto wcs }
    :: atomic { status1[QN(i)] == MODE_CHANGE && ADMIT -> skip }
    fi;
    atomic {                                                  /* set_write(): one batch */
        assert(mode[0] == 0 && mode[1] == 0); mode[0] = 1; mode[1] = 1; check_counter(0); check_counter(1)
#ifdef BUG1
        ; status1[QN(i)] = 1; enter_w()                       /* no drain() */
#endif
    };
#ifndef BUG1
    atomic {                                                  /* drain() */
        arrive[0] == depart[0] && arrive[1] == depart[1] -> status1[QN(i)] = 1; enter_w() };
#endif

wcs: /* the critical section; succ holds count2 here */
    /* writer_release: leave, succ = self.NEXT; the node keeps level 1 (WRITE succ.STATUS) or
     * release_1: k = site.STATUS1, reset_counters() if k >= T_L1 */
    atomic {
        nw--; incs[i] = 0;
        k = succ;                                             /* count2 */
        succ = next[i];
        if
        :: succ != 0 && k < TL2 -> status[succ - 1] = k + 1; succ = 0; k = 0; DEAD(next[i]); goto idle
        :: else -> skip
        fi;
        k = status1[QN(i)]; DEAD(status1[QN(i)]);
        if
        :: k >= TL1 -> writer_reset(); nxt = MODE_CHANGE; reset = 1
        :: else -> nxt = k + 1
        fi;
        k = 0 };
    /* succ1 = site.NEXT1: a successor: WRITE(succ1.STATUS1, next); none: reset_counters() if
     * not yet done, then CAS(TAIL1, site -> 0) (in the same step if the reset was done) */
    atomic {
        succ1 = next1[QN(i)];
        if
        :: succ1 != 0 -> status1[succ1 - 1] = nxt; succ1 = 0; release_2()
        :: else -> skip
        fi;
        if
        :: !reset -> writer_reset(); nxt = MODE_CHANGE; reset = 1; goto cas1
        :: else -> skip
        fi;
        if
        :: tail1 == QN(i) + 1 && SWAP_NOBODY(tk1, sv1) -> tail1 = 0; release_2()
        :: else -> goto wait1
        fi };
cas1:
    atomic {
        if
        :: tail1 == QN(i) + 1 && SWAP_NOBODY(tk1, sv1) -> tail1 = 0; release_2()
        :: else -> goto wait1
        fi };
wait1:
    atomic { next1[QN(i)] != 0 -> status1[next1[QN(i)] - 1] = nxt; release_2() };
wait2:
    atomic { next[i] != 0 -> status[next[i] - 1] = ACQUIRE_PARENT; DEAD(next[i]); goto idle };

    /* ---------------------------------- reader ---------------------------------------- */
rback: /* after the arrival: back off (and register), or look at TAIL1 first */
    if
    :: atomic { act == 1 -> act = 0; arrive[E(i)]--;          /* not entering: wait once more */
#ifdef WAITER_GAP
            waiters[WP(E(i))]++;
#endif
            check_counter(E(i)); wait_next() }
    /* WRITE (with epochs also READ and T_R reached: the wait loop looks at TAIL1 and resets;
     * a reset CAS before registering could fail forever while a peer of the counter arrives,
     * resets and enters, again and again): FAA(c, -ARRIVE + WAITER) */
    :: atomic { act == 2 -> act = 0; arrive[E(i)]--;
#ifndef BUG_STARVE
            reg = 1; waiters[WP(E(i))]++;
#endif
            check_counter(E(i)); wait_next() }
#ifndef EPOCHS
    :: atomic { act == 3 && TAIL1_EMPTY -> act = 0 }; reader_reset(E(i)); goto rdec
    :: atomic { act == 3 && !TAIL1_EMPTY -> act = 0; goto rdec }
    :: atomic { act == 0 -> arrive[E(i)]--; check_counter(E(i)); wait_next() }
#endif
    fi;
#ifndef EPOCHS
rdec:
    atomic { arrive[E(i)]--; check_counter(E(i)); wait_next() };   /* FAA(c, -ARRIVE) */
#endif
rwait: /* repeat w = FAA(c, 0) ... until MODE(w) = READ and (entitled or a(w) < T_R) */
    if
#if !defined(EPOCHS) && !defined(BUG_STARVE)
    :: atomic { mode[E(i)] == 1 && !reg -> goto rsaw }     /* saw WRITE: FAA(c, +WAITER) */
#endif
#ifndef BUG_TR
    /* READ, ARRIVE >= T_R, not entitled: look at TAIL1, reset if empty (the text: only if
     * not registered; with epochs every waiting reader is registered) */
#ifdef EPOCHS
    :: atomic { mode[E(i)] == 0 && arrive[E(i)] >= TR && !ENTITLED(E(i)) -> goto rchk }
#else
    :: atomic { mode[E(i)] == 0 && arrive[E(i)] >= TR && !reg -> goto rchk }
#endif
#endif
    :: atomic { mode[E(i)] == 0 && (ENTITLED(E(i)) || arrive[E(i)] < TR) -> goto rtop }
    fi;
#if !defined(EPOCHS) && !defined(BUG_STARVE)
rsaw:
    atomic { reg = 1; waiters[WP(E(i))]++; check_counter(E(i)); wait_next() };
#endif
rchk: /* FAA(home.TAIL1, 0) = 0 ? reader_reset */
    if
#if defined(EPOCHS) && !defined(BUG3)
    /* repeat w = FAA(c, 0); stop if WRITE, entitled or a(w) < T_R; until CAS(w -> {a - d, 0,
     * EPOCH flipped if OLDW = 0}) */
    :: atomic { TAIL1_EMPTY };
#ifdef RESET_LOOPS
rl2:    atomic {
            if
            :: mode[E(i)] == 1 || ENTITLED(E(i)) || arrive[E(i)] < TR -> goto rwait
            :: else -> fresh[i] = 1
            fi };
        atomic {
            if
            :: fresh[i] ->
                arrive[E(i)] = arrive[E(i)] - depart[E(i)]; depart[E(i)] = 0; FLIP(E(i));
                check_counter(E(i)); wait_next()
            :: else -> goto rl2
            fi }
#else
        atomic {                                  /* the loop as one step (the header) */
            if
            :: mode[E(i)] == 0 && !ENTITLED(E(i)) && arrive[E(i)] >= TR ->
                arrive[E(i)] = arrive[E(i)] - depart[E(i)]; depart[E(i)] = 0; FLIP(E(i));
                check_counter(E(i))
            :: else -> skip
            fi;
            wait_next() }
#endif
#else
    :: atomic { TAIL1_EMPTY }; reader_reset(E(i)); goto rwait
#endif
    :: atomic { !TAIL1_EMPTY -> goto rwait }
    fi;
rtop:
    atomic { reader_arrive() };

rcs: /* the critical section; reader_release: FAA(c, +DEPART), and (THE FIX) -WAITER if
      * registered */
    atomic {
        nr--; incs[i] = 0; depart[E(i)]++;
        if
        :: reg -> assert(waiters[WP(E(i))] > 0); waiters[WP(E(i))]--; reg = 0; rre[i] = 0; CANON(E(i))
        :: else -> skip
        fi;
        check_counter(E(i)); goto idle };

end_idle:
    false
}

init {
    atomic {
        run Client(0); run Client(1); run Client(2); run Client(3)
    }
}

#ifdef LIVENESS
ltl starve_c0 { [] (trying[0] -> <> incs[0]) }
ltl starve_c1 { [] (trying[1] -> <> incs[1]) }
ltl starve_c2 { [] (trying[2] -> <> incs[2]) }
ltl starve_c3 { [] (trying[3] -> <> incs[3]) }
#endif
