/* DSLR's leases and the stuck reset of a dead holder's tickets (locks/dslr.c, locks/ticket.c;
 * docs/locks.md "DSLR"), for the spin model checker.
 *
 * NT threads (1..NT, 3 by default) lock one DSLR word {nX, nS, mX, mS} through the NIC: every
 * attempt picks shared (S) or exclusive (X) mode, takes a ticket with one FAA, is granted at
 * once if the FAA's own result says so, else polls with READs, and may reset the word when the
 * holders it waits for look dead. Every access is a NIC atomic or an 8-byte READ of the one
 * word, so each is one step. What the model is about: a thread DECIDES on a reply in a step of
 * its own, after the operation executed, and anything may happen in between (a delayed reply,
 * a paused process) -- including the clock making it late and a reset passing its ticket.
 *
 * Time. A lease is abstracted by one "late" flag per thread: the thread is late when more than
 * a lease has passed since its last sign of life that the others can see. The clock (the Clock
 * process) may set a thread's flag at ANY moment; only the thread clears it, by POSTING an
 * operation the others will see as a sign of life (the code takes its timestamp before
 * posting):
 *   - the ticket FAA (it starts every request: the flag is clear);
 *   - a READ or a reset CAS posted while its ticket is NOT yet granted: the grant (the serving
 *     counters moving, which every waiter behind sees) comes after it, so the evidence of the
 *     grant is as fresh as that post. A READ posted when the ticket is already granted clears
 *     nothing: its reply does not tell when the grant came.
 * The flag stands for every judge's view at once, and for the most aggressive judge (a waiter
 * that has watched the serving counters stand still for its whole patience).
 * What remains assumed, encoded and not checked: an operation posted while its thread is not
 * late takes effect before a judge can pass that thread's ticket. Here every operation is
 * posted and executed in one step, so this holds by construction. A reply that has come back
 * but that the thread has not acted on yet is what the model leaves open.
 *
 * The protocol (the fixed one; -D names the bad variants):
 *   - a request takes a ticket (FAA +1 in max_M; the word before the add). S is granted when
 *     every earlier X ticket is served, X when every earlier ticket is. The DECISION on a reply
 *     that shows "granted" (the FAA's, a READ's, a successful shared reset's) checks the flag:
 *     late -> abandon (touch nothing ever again: the ticket stays in the word, dead, for a
 *     reset to pass; back to idle), else enter;
 *   - a waiter polls with READs until one shows it granted or passed by a reset (fix 3's and
 *     4b's skip test: it fails, RDKV_EABORTED, holding nothing); polling is a wait here (the
 *     READs that show nothing new are left out), but every READ posted while not granted
 *     clears the flag;
 *   - the stuck reset (two still leases): a waiter may reset the word when every granted, live
 *     ticket it waits for belongs to a late thread (a dead ticket counts as late). Shared waiter
 *     (fix 4a): n_X := its own m_X, and it is granted with its ticket (then decides as above).
 *     Exclusive waiter (fix 6): n_X := its m_X + 1, n_S := its m_S: every earlier ticket and
 *     its own are passed, and it fails without releasing anything;
 *   - a holder may become late at any moment (the clock): it has lost its lease, and what it
 *     does from then on is void. The ghost counts of the critical section drop it at that
 *     moment, and it must never release with a FAA (its ticket may have been passed already:
 *     the FAA would serve someone else's). A holder that is not late releases with FAA(+1 in
 *     n_M);
 *   - a ticket abandoned (a stale grant, a lost lease) is passed on by its thread with a CAS
 *     from a word value that shows it granted and unserved (tk_pass_on, docs/locks.md rule 7):
 *     a step of its own, at any later time or never, that serves the ticket if it is still
 *     live and granted, and does nothing otherwise (the CAS fails);
 *   - GIVE_UP (on by default; -DNO_GIVE_UP leaves it out): a waiter may give up at its deadline
 *     (tk_abandon). Its ticket is passed on when its turn comes (lock_thread_poll): READs, and
 *     on a reply that shows it granted, the same CAS, without entering. A given-up ticket still
 *     waiting may also be forgotten (lock_thread_poll drops it after 64 leases): dead.
 * Bad variants (check.sh: each must be caught):
 *   -DNO_ENTRY_CHECK    the old code: the decision on a granted reply enters without checking
 *                       the flag (granted_at is stamped at the decision, after the evidence);
 *   -DLATE_RELEASE      reset_from's exception: a holder that became late still releases;
 *   -DUNCHECKED_PASS_ON lock_thread_poll as it was: a given-up ticket is released with a FAA
 *                       on a READ that shows it granted, late or not.
 *
 * Checked (safety): among holders whose lease is valid, an X holder overlaps nobody and S
 * overlaps only S (nrd, nwr); the word stays well formed (a release serves a ticket that
 * exists: n_M <= max_M); no invalid end state (a waiter is never stuck: a dead ticket is always
 * reset eventually).
 *
 * Failures: one at a time, any number per run. The clock makes a thread late only when no
 * failure is outstanding: no thread is late or void, and no dead ticket is left in the word
 * (slot D of the ticket arrays; dw its thread). Without a bound, dead shared tickets pile up
 * without end under a stream of readers (only an exclusive waiter's reset passes them). Only a
 * thread that holds or has a granted ticket is made late: elsewhere the flag changes nothing
 * anyone sees before the thread's next READ clears it.
 *
 * Abstractions, each exact for what is checked:
 *   - counters are relative to the serving counters: the word is (mX, mS), the tickets taken
 *     and not served (n_X = n_S = 0 always); a waiting ticket keeps tx (X tickets ahead of it,
 *     unserved) and, if X, ts (S tickets ahead, unserved); granted is tx == 0 (and ts == 0).
 *     Releases and resets subtract. The code only compares serving counters with tickets for
 *     equality and sets them to tickets' values, so this is exact. S tickets that a shared reset
 *     skips stay counted in max_S for good: they are one bit, lost (see reset). Left out:
 *     COUNT_MAX (the overflow reset), multi-slot tickets, fix 12's shared patience;
 *   - ghosts computed from the word: gr[t] (t's ticket is granted; it stays so until served),
 *     bef[t] (the tickets taken before t's: which tickets a reset passes), gone[t] (a reset or
 *     an extra release passed t's ticket: what t's next READ shows);
 *   - the judge: the reset is one step, taken when its condition holds. The code's judge
 *     watches the counters for the patience and CASes from the value it read; a late thread
 *     cannot stop being late (only a post clears the flag, and it posts nothing but READs
 *     after its grant), so a judgement made before the CAS holds when it executes.
 */

#define S 0
#define X 1
#ifndef NT
#define NT 3
#endif
#define D (NT + 1)                  /* the slot of a dead ticket (its thread abandoned it) */
#ifndef NO_GIVE_UP
#define GIVE_UP
#endif

/* the word: tickets taken and not served (relative to the serving counters: see the header) */
byte mX, mS;

/* per ticket: threads 1..NT, and D */
byte tk[NT + 2];            /* a live ticket: 0 none, 1 S, 2 X */
byte tx[NT + 2], ts[NT + 2];/* a waiting ticket: X (and for X, S) tickets ahead, unserved */
/* ghosts computed from the word */
bit gr[NT + 2];             /* the ticket is granted (it stays so until served) */
byte bef[NT + 2];           /* bit t: ticket t was taken before this one */
byte dw;                    /* the thread whose ticket is dead in D */
bit lost;                   /* n_S lags for good: S tickets skipped by a reset (see reset) */
/* per thread (1..NT) */
bit late[NT + 1];           /* more than a lease since its last sign of life, by its own clock */
/* What each judge sees: only what happened while it watched (its first look is a sign of life).
 * Judges are the waiting threads (wt), from their ticket to the reply that ends the wait. */
bit wt[NT + 1];
bit jl[16];                 /* judge j sees thread t late: jl[JL(j, t)] */
#define JL(j, t) ((j) * 4 + (t))
bit vd[NT + 1];             /* its lease ran out in the critical section: void */
bit gone[NT + 1];           /* ghost: its waiting ticket was passed (its next READ shows it) */
byte hold[NT + 1];          /* ghost: in the critical section with a valid lease: 1 S, 2 X */
bit trying[NT + 1];         /* ghost: has a request (from the ticket to the critical section) */
byte nrd, nwr;              /* ghost: S and X holders with a valid lease */

#define GRANTED(t) (tx[t] == 0 && (tk[t] == 1 || (ts[t] == 0 && !lost)))
#define BEFORE(w, t) ((bef[w] & (1 << (t))) != 0)
#define WAITS(w, t) (BEFORE(w, t) && (tk[w] == 2 || tk[t] == 2))

/* ---------------------------------------------------------------------------------------- */
/* The word's bookkeeping, each used inside one atomic step. */

/* ticket t stops being live: served, or passed by a reset */
inline drop(t) {
    tk[t] = 0; gr[t] = 0; tx[t] = 0; ts[t] = 0; bef[t] = 0;
    for (c : 1 .. D) { bef[c] = bef[c] & ~(1 << (t)) };
    c = 0;
    if :: (t) == D -> dw = 0 :: else -> skip fi
}

/* thread t abandons its ticket (or loses its lease inside): the ticket, if still live, stays in
 * the word, dead: it moves to D */
inline kill(t) {
    if
    :: tk[t] != 0 ->
        assert(tk[D] == 0);
        tk[D] = tk[t]; tx[D] = tx[t]; ts[D] = ts[t]; gr[D] = gr[t]; bef[D] = bef[t]; dw = t;
        for (c : 1 .. NT) {
            if :: BEFORE(c, t) -> bef[c] = bef[c] - (1 << (t)) + (1 << D) :: else -> skip fi
        };
        c = 0;
        tk[t] = 0; gr[t] = 0; tx[t] = 0; ts[t] = 0; bef[t] = 0
    :: else -> skip
    fi
}

/* the grants a change of the word made (a granted ticket's numbers are not read again) */
inline regrant() {
    for (e : 1 .. D) {
        if
        :: tk[e] != 0 && !gr[e] && GRANTED(e) -> gr[e] = 1
        :: else -> skip
        fi
    };
    e = 0
}

/* FAA(+1 in max_M): the old word is the ticket */
inline take(d) {
    for (e : 1 .. D) {
        if :: tk[e] != 0 -> bef[d] = bef[d] | (1 << e) :: else -> skip fi
    };
    e = 0;
    tx[d] = mX;
    if
    :: mode == X -> ts[d] = mS; mX++; tk[d] = 2
    :: else -> mS++; tk[d] = 1
    fi;
    regrant()
}

/* FAA(+1 in n_M) by thread d. In the protocol the ticket served is d's own, one that every
 * waiting ticket of the other class counts. A thread that lost its lease and releases all the
 * same (-DLATE_RELEASE) serves its dead ticket if no reset passed it yet; else it moves the
 * counter one too far: a waiting ticket whose own number it passes sees itself skipped, the
 * others are served one ticket early, and the word may be left ill-formed (n > max). */
inline serve(d) {
    if
    :: mode == X ->
        assert(mX > 0);                              /* n_X <= max_X */
        mX--;
        for (e : 1 .. D) {
            if
            :: tk[e] != 0 && !gr[e] && tx[e] == 0 ->
                if :: e != D -> gone[e] = 1 :: else -> skip fi; drop(e)
            :: tk[e] != 0 && !gr[e] && tx[e] > 0 -> tx[e]--
            :: else -> skip
            fi
        }
    :: else ->
        assert(mS > 0);                              /* n_S <= max_S */
        mS--;
        for (e : 1 .. D) {
            if
            :: tk[e] == 2 && !gr[e] && ts[e] == 0 ->
                if :: e != D -> gone[e] = 1 :: else -> skip fi; drop(e)
            :: tk[e] == 2 && !gr[e] && ts[e] > 0 -> ts[e]--
            :: else -> skip
            fi
        }
    fi;
    e = 0;
    if
    :: tk[d] != 0 -> drop(d)
    :: tk[d] == 0 && tk[D] != 0 && dw == d -> drop(D)
    :: else -> skip
    fi;
    regrant()
}

/* The stuck reset may succeed: d waits, and every granted live ticket it waits for is a late
 * thread's (a dead ticket has no thread). */
#define BLOCKS(d, t) ((t) != (d) && tk[t] != 0 && gr[t] && WAITS(d, t) && !jl[JL(d, t)])
#if NT == 2
#define RESET_OK(d) (tk[d] != 0 && !gr[d] && !gone[d] && !BLOCKS(d, 1) && !BLOCKS(d, 2))
#elif NT == 3
#define RESET_OK(d) (tk[d] != 0 && !gr[d] && !gone[d] && !BLOCKS(d, 1) && !BLOCKS(d, 2) && \
                     !BLOCKS(d, 3))
#else
#error "NT is 2 or 3"
#endif

/* ticket f (not d) is passed by d's reset: it came before d's, and d is X, or f is X, or f is an
 * S ticket still waiting for an X ticket that is passed (it sees n_X beyond its m_X: skipped,
 * fix 4b) */
#define PASSED(d, f) (tk[f] != 0 && BEFORE(d, f) && \
    (tk[d] == 2 || tk[f] == 2 || (!gr[f] && tx[f] < tx[d])))

/* The stuck reset (ticket.c reset_value): S (fix 4a) n_X := my m_X, granted with my ticket;
 * X (fix 6) n_X := my m_X + 1, n_S := my m_S, my ticket consumed. k and j: how far n_X and n_S
 * move. A shared reset does not move n_S: an S ticket it skips (its thread fails, RDKV_EABORTED,
 * and never releases) stays counted in max_S for good, and every X ticket taken after it waits
 * for it until an exclusive reset. Those counts are kept as one bit, lost (they come before every
 * waiting X ticket: the reset passed the X tickets before it), and out of mS and ts: the number
 * of them does not matter, and it has no bound. */
inline reset(d) {
    k = tx[d] + (tk[d] == 2 -> 1 : 0);
    j = (tk[d] == 2 -> ts[d] : 0);
    mX = mX - k; mS = mS - j;
    for (f : 1 .. D) {
        if
        :: f != d && PASSED(d, f) ->
            if
            :: tk[d] == 1 && tk[f] == 1 -> mS--; lost = 1;      /* skipped, counted for good */
                for (e : 1 .. D) {
                    if :: tk[e] == 2 && !gr[e] && !PASSED(d, e) -> ts[e]-- :: else -> skip fi
                };
                e = 0
            :: else -> skip
            fi;
            if :: f != D -> gone[f] = 1 :: else -> skip fi; drop(f)
        :: f != d && tk[f] != 0 && !gr[f] && !PASSED(d, f) ->
            assert(tx[f] >= k); tx[f] = tx[f] - k;   /* later, or S with my m_X */
            if :: tk[f] == 2 -> assert(ts[f] >= j); ts[f] = ts[f] - j :: else -> skip fi
        :: else -> skip                              /* me; a granted S ticket I do not wait for */
        fi
    };
    f = 0;
    if
    :: tk[d] == 2 -> drop(d); lost = 0
    :: else -> tx[d] = 0
    fi;
    k = 0; j = 0;
    regrant()
}

/* ---------------------------------------------------------------------------------------- */

inline enter_cs(d) {
    trying[d] = 0; hold[d] = mode + 1;
    if
    :: mode == X -> assert(nrd == 0 && nwr == 0); nwr++
    :: else -> assert(nwr == 0); nrd++
    fi
}

/* d posts a sign of life (a READ or a CAS while not granted): for everyone */
inline fresh(d) {
    late[d] = 0;
    for (c : 1 .. NT) { jl[JL(c, d)] = 0 };
    c = 0
}
/* d stops waiting: it judges nobody */
inline unwatch(d) {
    wt[d] = 0;
    for (c : 1 .. NT) { jl[JL(d, c)] = 0 };
    c = 0
}
/* back to idle with nothing held; failed: its ticket is left behind, dead */
inline to_idle(d, failed) {
    if :: failed -> kill(d) :: else -> skip fi;
    fresh(d); unwatch(d); gone[d] = 0; trying[d] = 0; g = 0; mode = 0
}

#ifdef NO_ENTRY_CHECK
#define ENTRY_LATE(d) 0
#else
#define ENTRY_LATE(d) late[d]
#endif
/* A failure is outstanding: a thread is late or void, or a dead ticket is still in the word.
 * The clock makes a thread late only when none is (see the header). */
#if NT == 2
#define OUTSTANDING (tk[D] != 0 || late[1] || late[2] || vd[1] || vd[2])
#else
#define OUTSTANDING (tk[D] != 0 || late[1] || late[2] || late[3] || vd[1] || vd[2] || vd[3])
#endif

proctype Thread(byte d) {
    bit mode, g;
    byte c, e, f, k, j;
idle:
    if                                                 /* FAA(+1 in max_M), and its reply */
    :: atomic { trying[d] = 1; mode = S; take(d); g = gr[d]; wt[d] = !g }
    :: atomic { trying[d] = 1; mode = X; take(d); g = gr[d]; wt[d] = !g }
    /* The ticket it left behind when it abandoned or lost its lease is passed on with a CAS
     * (tk_pass_on), which serves it only if it is still granted and unserved -- or never (its
     * reads fail). The step happens only while it is: a CAS that fails changes nothing. */
    :: atomic { tk[D] != 0 && dw == d && gr[D] -> mode = tk[D] - 1; serve(d); mode = 0 }; goto idle
    :: goto end_idle                                   /* a thread may stop for ever */
    fi;
decide: /* the decision on the last reply (g: it shows the ticket granted), or the wait */
    if
    :: atomic { g && !ENTRY_LATE(d) -> g = 0; enter_cs(d) }; goto cs
    :: atomic { g && ENTRY_LATE(d) -> to_idle(d, 1) }; goto idle      /* abandon */
    /* waiting: READ until a reply shows the ticket granted or passed */
    :: atomic { !g && late[d] && !gr[d] && !gone[d] -> fresh(d) }; goto decide  /* READ posted */
    :: atomic { !g && gr[d] -> g = 1; unwatch(d) }; goto decide   /* a READ shows it granted */
    :: atomic { !g && gone[d] -> to_idle(d, 0) }; goto idle  /* ... or skipped: it failed */
    /* the stuck reset (CAS): it is posted while not granted (a sign of life) */
    :: atomic { !g && mode == S && RESET_OK(d) -> fresh(d); reset(d); g = 1; unwatch(d) };
        goto decide                                    /* granted by its own reset */
    :: atomic { !g && mode == X && RESET_OK(d) -> reset(d); to_idle(d, 0) };
        goto idle                                      /* its ticket consumed: it failed */
#ifdef GIVE_UP
    :: atomic { !g -> unwatch(d) }; goto end_pass      /* its deadline: give the ticket up */
#endif
    fi;
cs:
    if
    :: atomic { hold[d] != 0 -> hold[d] = 0;           /* release: FAA(+1 in n_M) */
        if :: mode == X -> nwr-- :: else -> nrd-- fi;
        serve(d); to_idle(d, 0) }
    :: atomic { vd[d] -> vd[d] = 0; to_idle(d, 0) }    /* lease lost: touch nothing */
#ifdef LATE_RELEASE
    :: atomic { vd[d] -> vd[d] = 0; serve(d); to_idle(d, 0) }   /* ... but release all the same */
#endif
    fi;
    goto idle;
#ifdef GIVE_UP
end_pass: /* A given-up ticket: READ until its turn comes, then pass it on. (In the code its
           * thread goes on with other requests meanwhile: waiting here for ever is no deadlock.) */
    if
    :: atomic { late[d] && !gr[d] && !gone[d] -> fresh(d) }; goto end_pass   /* READ posted */
    :: atomic { gone[d] -> to_idle(d, 0) }             /* a READ shows it skipped */
#ifdef UNCHECKED_PASS_ON
    :: atomic { gr[d] -> g = 1 };                      /* a READ shows it granted; then: */
        atomic { serve(d); to_idle(d, 0) }             /* FAA(+1 in n_M), late or not */
#else
    :: atomic { gr[d] -> serve(d); to_idle(d, 0) }     /* a CAS from a value showing it granted */
#endif
    :: atomic { !OUTSTANDING && !gr[d] && !gone[d] -> to_idle(d, 1) }   /* forgotten: dead */
    fi;
    goto idle;
#endif
end_idle:
    false
}

/* Time passes for thread t (a pause, a slow fabric, a delayed reply): it is late, and so it is
 * for every judge watching now. A holder loses its lease there: its ticket is dead from now on
 * (nobody may serve it). */
inline tick(t) {
    late[t] = 1;
    for (c : 1 .. NT) { if :: wt[c] && c != (t) -> jl[JL(c, t)] = 1 :: else -> skip fi };
    c = 0;
    if
    :: hold[t] == 2 -> nwr--; hold[t] = 0; vd[t] = 1; kill(t)
    :: hold[t] == 1 -> nrd--; hold[t] = 0; vd[t] = 1; kill(t)
    :: else -> skip
    fi
}
/* Who may be made late: a thread that holds or has a granted ticket (elsewhere the flag changes
 * nothing anyone sees before the thread's next READ, which clears it); only while no other
 * thread is late or void and no dead ticket is in the word (one failure at a time); again while
 * late, for a judge that started watching since (more time passes). */
#define NEWS(t) (!late[t] || (wt[1] && !jl[JL(1, t)]) || (wt[2] && !jl[JL(2, t)]) || \
    (wt[NT] && !jl[JL(NT, t)]))
#define OTHERS_OK(t) (((t) == 1 || !(late[1] || vd[1])) && ((t) == 2 || !(late[2] || vd[2])) && \
    ((t) == NT || !(late[NT] || vd[NT])))
#define TICK(t) (tk[D] == 0 && OTHERS_OK(t) && (hold[t] != 0 || (tk[t] != 0 && gr[t] && NEWS(t))))

proctype Clock() {
    byte c;
end_clock:
    do
    :: atomic { TICK(1) -> tick(1) }
    :: atomic { TICK(2) -> tick(2) }
#if NT >= 3
    :: atomic { TICK(3) -> tick(3) }
#endif
    od
}

init {
    byte c;
    atomic {
        run Clock();
        for (c : 1 .. NT) { run Thread(c) };
        c = 0
    }
}
