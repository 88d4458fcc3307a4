/* ALock as implemented in locks/alock.c, for the spin model checker.
 *
 * Two local threads (descriptors 1, 2) use CPU atomics on the lock's node; two remote threads
 * (descriptors 3, 4) use one-sided operations only. What the model keeps from RDMA's semantics:
 *   - a NIC CAS or FAA is a load and then a store, executed by the NIC process one request at a
 *     time in arrival order, but NOT atomic with CPU operations: local steps interleave
 *     between the load and the store;
 *   - tail_r is one word holding the remote tail and the count of pending enqueuers (tail_r,
 *     pend here): a remote thread's enqueue is an optimistic CAS from empty, then FAA(pending)
 *     and a CAS loop that clears its pending mark when it succeeds; a release may empty the
 *     tail only while nobody is pending;
 *   - a NIC WRITE or READ of one 8-byte word is one step; the 64-byte READ of the lock line in
 *     Peterson's loop reads tail_l and victim as two separate steps, in either order;
 *   - the remote leader's {WRITE victim, READ line} chain executes in order;
 *   - CPU atomics (xchg, CAS, seq_cst stores) are single steps.
 * Steps that touch only a thread's own state (its descriptor before it is enqueued, its
 * temporaries) are merged into neighbouring steps to keep the state space small; nobody else
 * can observe the difference. Budgets are small (local 2, remote 2): the protocol does not
 * depend on their size.
 *
 * Checked by tests/models/check.sh:
 *   safety     mutual exclusion (the assert) and no deadlock (invalid end states);
 *   liveness   starvation freedom, [] (trying[i] -> <> (owner == i)), under weak fairness
 *              (pan -a -f), for one local and one remote thread (the others are symmetric);
 *              threads are free to stop competing forever;
 *   -DOR_BUG   the printed pseudocode's "other locked OR victim is us" wait must fail;
 *   -DPAPER_ENQUEUE  the paper's plain CAS-loop enqueue (no pending count) must fail too: a remote
 *              thread can retry forever while the other remote thread acquires and releases.
 */

#define NULL 0
#define LOCAL 1
#define REMOTE 2
#define LB 2
#define RB 2

byte tail_l = NULL;   /* CPU atomics only */
byte tail_r = NULL;   /* NIC atomics only; one 64-bit word with pend */
byte pend = 0;        /* remote threads registered as enqueueing (the word's high bits) */
byte victim = 0;      /* written by both, never RMW'd */
short budget[5];      /* per descriptor; -1 waiting */
byte next[5];
byte in_cs = 0;
byte owner = 0;       /* who is in the critical section */
bit trying[5];

/* The lock node's NIC: it executes the remote threads' atomics on the tail_r word one at a
 * time, in arrival order (a FIFO channel, so no request waits forever), each as a load and then
 * a store in separate steps -- CPU steps of the local threads interleave between the two. */
#define OP_CAS 1
#define OP_FAA 2
chan nicq = [2] of { byte, byte, byte, byte, byte, byte };  /* who, op, et, ep, dt, dp */
chan reply[5] = [1] of { byte, byte };                       /* old tail, old pend */

proctype NIC() {
    byte who, kind, et, ep, dt, dp, ot, op;
end_nic:
    do
    :: nicq ? who, kind, et, ep, dt, dp ->
        ot = tail_r; op = pend;                                /* load */
        atomic {
            if                                                 /* store */
            :: kind == OP_CAS && ot == et && op == ep -> tail_r = dt; pend = dp
            :: kind == OP_FAA -> pend = op + 1
            :: else -> skip
            fi;
            reply[who] ! ot, op;
            who = 0; kind = 0; et = 0; ep = 0; dt = 0; dp = 0; ot = 0; op = 0
        }
    od
}

inline nic_cas(et, ep, dt, dp, ot, op) {
    nicq ! d, OP_CAS, et, ep, dt, dp;
    reply[d] ? ot, op
}

inline nic_faa_pending(ot, op) {
    nicq ! d, OP_FAA, 0, 0, 0, 0;
    reply[d] ? ot, op
}

/* Entering and leaving the critical section are separate steps, so two threads inside at once
 * would be seen by the assert. */
inline enter_cs(d) {
    atomic { trying[d] = 0; in_cs++; owner = d; assert(in_cs == 1); a = 0; b = 0; prev = 0 }
}
inline leave_cs(d) {
    atomic { in_cs--; owner = 0 }
}

/* ------------------------------------------------------------------------------------------ */

inline peterson_local(d) {
    victim = LOCAL;           /* seq_cst store */
#ifdef OR_BUG
    /* printed pseudocode: wait while (other locked OR victim is us) */
    do
    :: a = tail_r; b = victim;
       if
       :: (a == NULL && b != LOCAL) -> break
       :: else -> skip
       fi
    od
#else
    do
    :: tail_r == NULL -> break
    :: victim != LOCAL -> break
    od
#endif
}

proctype Local(byte d) {
    byte prev, a, b;
ncs:
    if
    :: skip
    :: goto end_idle          /* a thread may stop competing forever */
    fi;
    atomic { trying[d] = 1; budget[d] = -1; next[d] = NULL };
    atomic { prev = tail_l; tail_l = d };          /* xchg */
    if
    :: prev == NULL ->
        budget[d] = LB;
        peterson_local(d)
    :: else ->
        next[prev] = d;
        budget[d] != -1;                           /* wait for the hand-over */
        if
        :: budget[d] == 0 -> peterson_local(d); budget[d] = LB
        :: else -> skip
        fi
    fi;
    enter_cs(d);
    leave_cs(d);
    /* release */
    if
    :: next[d] == NULL ->
        if                                         /* CPU CAS(tail_l, d, NULL) */
        :: atomic { tail_l == d -> tail_l = NULL }; goto ncs
        :: atomic { tail_l != d -> skip }; next[d] != NULL   /* a successor is linking in */
        fi
    :: else -> skip
    fi;
    budget[next[d]] = budget[d] - 1;               /* pass the lock */
    goto ncs;
end_idle:
    false
}

/* ------------------------------------------------------------------------------------------ */

inline peterson_remote(d) {
    victim = REMOTE;                               /* WRITE victim, then in the same chain: */
#ifdef OR_BUG
    do
    :: if                                          /* READ line: two words, either order */
       :: a = tail_l; b = victim
       :: b = victim; a = tail_l
       fi;
       if
       :: (a == NULL && b != REMOTE) -> break
       :: else -> skip
       fi
    od
#else
    do
    :: if
       :: a = tail_l; b = victim
       :: b = victim; a = tail_l
       fi;
       if
       :: (a == NULL || b != REMOTE) -> break
       :: else -> skip                             /* READ the line again */
       fi
    od
#endif
}

proctype Remote(byte d) {
    byte prev, et, ep, ot, op, a, b;
ncs:
    if
    :: skip
    :: goto end_idle
    fi;
    atomic { trying[d] = 1; budget[d] = -1; next[d] = NULL };
#ifdef PAPER_ENQUEUE
    /* the paper's enqueue: a plain CAS loop on the tail, retried with the value learned */
    et = NULL;
    do
    :: nic_cas(et, 0, d, 0, ot, op);
       if
       :: ot == et -> break
       :: else -> et = ot
       fi
    od;
    atomic { prev = et; et = 0; ot = 0; op = 0 };
#else
    /* swap(tail_r, d): optimistically from empty ... */
    nic_cas(NULL, 0, d, 0, ot, op);
    if
    :: (ot == NULL && op == 0) -> atomic { prev = NULL; ot = 0; op = 0 }
    :: else ->
        /* ... else register as pending and CAS with what we learned, unregistering in the
         * same CAS */
        nic_faa_pending(ot, op);
        atomic { et = ot; ep = op + 1 };
        do
        :: nic_cas(et, ep, d, ep - 1, ot, op);
           if
           :: (ot == et && op == ep) -> break
           :: else -> atomic { et = ot; ep = op }
           fi
        od;
        atomic { prev = et; et = 0; ep = 0; ot = 0; op = 0 }
    fi;
#endif
    if
    :: prev == NULL ->
        budget[d] = RB;
        peterson_remote(d)
    :: else ->
        next[prev] = d;                            /* WRITE into the predecessor's descriptor */
        budget[d] != -1;
        if
        :: budget[d] == 0 -> peterson_remote(d); budget[d] = RB
        :: else -> skip
        fi
    fi;
    enter_cs(d);
    leave_cs(d);
    /* release */
    if
    :: next[d] == NULL ->
        nic_cas(d, 0, NULL, 0, ot, op);            /* CAS({d, 0} -> {NULL, 0}) */
        if
        :: atomic { (ot == d && op == 0) -> ot = 0; op = 0 }; goto ncs
        :: atomic { else -> ot = 0; op = 0 }; next[d] != NULL
        fi
    :: else -> skip
    fi;
    budget[next[d]] = budget[d] - 1;               /* WRITE the successor's budget */
    goto ncs;
end_idle:
    false
}

init {
    atomic {
        budget[1] = -1; budget[2] = -1; budget[3] = -1; budget[4] = -1;
        run NIC(); run Local(1); run Local(2); run Remote(3); run Remote(4)
    }
}

#ifdef LIVENESS
ltl starve_local { [] (trying[1] -> <> (owner == 1)) }
ltl starve_remote { [] (trying[3] -> <> (owner == 3)) }
#endif
