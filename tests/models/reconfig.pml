/* rdkv's reconfiguration after a primary's failure, for the spin model checker: leases, the
 * epoch fence on REPL and the NEW-CONFIG / NEW-CONFIG-ACK / NEW-CONFIG-COMMIT round of
 * docs/replication.md (sections 4-6), with the rules the model showed it needs (marked
 * "added" below). docs/reconfig-model.md explains the model, what it leaves out and the trace
 * that catches each bad variant.
 *
 * One partition, R = 3: the old primary P and the backups B and C in epoch e; epoch e+1
 * removes P, makes B the primary and keeps C as its backup. A fourth member N holds no replica
 * of the partition: its coordinator reads the partition's row with one-sided READs (lock and
 * read are one step) at the node it believes is the primary. Nodes: 0 P, 1 B, 2 C, 3 N. The
 * row is a version and a value at each replica, (0, 0) at first. The CM grants P's lease and
 * installs e+1 (the zoo_multi is part of that step); CM2 may replace it (below).
 *
 * Time is a global tick (Clock), 0..TMAX; every clock is exact (the CM's guard of L/10 for
 * drift is left out). P's lease runs from the send time of the request that was granted, by
 * P's clock; the CM's record of it runs from the CM's receive time. P's first lease was asked
 * for and granted at tick 0; P sends NREN renewal requests at any ticks.
 *
 * Steps. Every step is one atomic transition. A message stays in flight until its receiver
 * takes it: it may be delayed past any number of other steps, and two messages arrive in
 * either order. A pause (SIGSTOP) is a process that takes no step: any process may stop for as
 * long as it likes while Clock ticks, and resume at any time or never. A one-sided READ of a
 * paused node's memory still completes (the NIC serves it), so N's reads of P's row need no
 * step of P. An answer to the CM (NEW-CONFIG-ACK) reaches it inside the step that sends it:
 * a late ACK only delays NEW-CONFIG-COMMIT, which the CM's own slowness gives.
 *
 * The protocol:
 *   - P's writes (NWP of them, values 1..NWP; clients of epoch e send them to P) are taken
 *     one at a time (the row lock). P accepts one only while its lease is valid by its clock:
 *     the row's next version, REPL(e) to B and to C. Once both answered: both acknowledged ->
 *     P installs and acknowledges to the client; a refusal -> P answers UNKNOWN (added: the
 *     write may be at the other backup). A zombie P still installs and acknowledges a write
 *     both backups took in epoch e.
 *   - A backup applies a REPL whose epoch is its own and acknowledges; it refuses any other.
 *   - The CM installs e+1 once P's lease has ended by its record and sends NEW-CONFIG to B, C
 *     and N; once all three acknowledged, NEW-CONFIG-COMMIT to B. A renewal that reaches the
 *     CM after it installed e+1 is not granted. NEW-CONFIG raises a member's epoch and closes
 *     its connections to P: N reads B's row from then on.
 *   - B, promoted by NEW-CONFIG, keeps its row locked until it serves (the doc's rebuilt
 *     locks, extended to the rows of the last epoch's REPLs: added). On NEW-CONFIG-COMMIT it
 *     copies its row to C (REPL(e+1) of what it holds; added: a REPL of epoch e may have
 *     reached one backup and not the other) and serves once C acknowledged: its writes
 *     (NWB, values NWP+1..; clients of epoch e+1 send them to B) get B's next version,
 *     REPL(e+1) to C, and B installs and acknowledges once C did.
 *   - P's coordinator reads its own row only while P's lease is valid. The check and the
 *     read are one step; a read that checks and then pauses before it reads is linearized
 *     at the check: P's row then holds every version seen so far, and it only grows.
 *   - CM2 (added): elected at any time while e holds, once CM's ZooKeeper session expired
 *     (CM's zoo_multi fails from then on). CM grants a renewal only while its session is
 *     surely alive by its own clock, judged after the request arrived. CM2 knows nothing of
 *     CM's grants: it counts P's lease as running until its own election + L. A request
 *     reaches either CM.
 *
 * Checked (safety; check.sh's run with no LTL). Ghosts: mx, the highest version a client has
 * seen (acknowledged to a writer or returned to a reader), and ov[v], the value seen at v.
 *   - no fork: every version a client sees has one value;
 *   - linearizable: a read returns a version >= mx; a write is acknowledged at a version
 *     above the mx of when it was accepted;
 *   - (a) no seen write lost: B and C, once in e+1 (they refuse P's REPLs from then on), hold
 *     mx with the value seen, or a later version;
 *   - (b) one primary at a time: B never serves while P's lease is valid by P's clock;
 *   - (-DREFUSE_ABORTS) a write whose client was told it failed is never seen;
 *   - not stuck: Safety may end the run at any moment (fin: the clock stops, no more reads);
 *     once no step is possible, either the CM in office still counts P's lease as running,
 *     or e+1 is committed, B serves and no write waits for an answer.
 *
 * Bad variants (check.sh: each must be caught):
 *   -DEARLY_PROMOTE       the CM installs e+1 without waiting for P's lease to end;
 *   -DLEASE_FROM_GRANT    P counts its lease from the grant's arrival, not from its request;
 *   -DGRANT_AFTER_REMOVE  the CM still grants a renewal after it installed e+1;
 *   -DACK_BEFORE_BACKUPS  P installs and acknowledges a write when it sends the REPLs;
 *   -DNO_EPOCH_CHECK      a backup applies a REPL of any epoch;
 *   -DSTALE_READ          P's coordinator reads without checking its lease;
 *   -DNO_CLOSE            N keeps reading P's row after NEW-CONFIG;
 *   -DSERVE_EARLY         B serves on NEW-CONFIG, without waiting for NEW-CONFIG-COMMIT;
 *   -DOPEN_ROW            N reads B's row from NEW-CONFIG on (B does not lock it);
 *   -DNO_RESYNC           B serves on NEW-CONFIG-COMMIT without copying its row to C;
 *   -DREFUSE_ABORTS       P tells the client a write failed when a backup refused it;
 *   -DZOMBIE_CM_GRANTS    CM grants renewals after CM2 was elected;
 *   -DNEW_CM_NO_WAIT      CM2 counts P's lease as already over when it takes office.
 */

#ifndef L
#define L 2             /* lease length, in ticks */
#endif
#ifndef TMAX
#define TMAX 5          /* the clock stops here */
#endif
#ifndef NREN
#define NREN 2          /* renewal requests P sends */
#endif
#ifndef NWP
#define NWP 2           /* writes sent to P (values 1..NWP), one at a time */
#endif
#ifndef NWB
#define NWB 2           /* writes sent to B (values NWP+1..), one at a time */
#endif
#define NV (NWP + NWB + 1)   /* versions 0..NWP+NWB */

#define NP 0
#define NB 1
#define NC 2
#define NN 3
#define MB 1            /* bits of the members NEW-CONFIG goes to */
#define MC 2
#define MN 4
#define ALL 7
/* answers to a REPL */
#define NONE 0
#define OK 1
#define REFUSED 2
/* B's states */
#define B_BACKUP 0
#define B_PROMOTED 1    /* NEW-CONFIG in: epoch e+1, row locked */
#define B_RESYNC 2      /* NEW-CONFIG-COMMIT in: its row copied to C, waiting for C */
#define B_SERVING 3
/* the CM's states */
#define CM_GRANT 0      /* configuration e: grants leases */
#define CM_NEW 1        /* e+1 installed, NEW-CONFIG out */
#define CM_COMMIT 2     /* all acknowledged, NEW-CONFIG-COMMIT out */

byte now;
/* leases */
byte pexp = L;          /* P's lease ends here, by P's clock */
byte cmexp = L;         /* ... and here by the CM's record */
bit rq; byte rqs;       /* a renewal request in flight, its send time */
byte nren = NREN;       /* renewals left to send */
bit gr; byte grs;       /* a grant in flight, the send time of the request it grants */
bit cm2;                /* CM2 took office */
byte cm2exp;            /* CM2's record of P's lease */
/* configuration */
byte cst;               /* the CM */
byte ncf;               /* NEW-CONFIG in flight (MB, MC, MN) */
byte cak;               /* NEW-CONFIG-ACKs in */
bit cmt;                /* NEW-CONFIG-COMMIT in flight to B */
bit ep[4];              /* a member's epoch: 0 e, 1 e+1 (P's stays e) */
/* the row at each replica */
byte ver[3], val[3];
/* P's writes */
byte pn;                /* writes P accepted */
bit pw;                 /* the last one's REPLs are out */
byte pwv, pwx;          /* its version and value (the REPLs carry them) */
bit p2b, p2c;           /* REPL(e) in flight to B, to C */
byte b2p, c2p;          /* their answers */
/* B as the new primary */
byte bst;
byte bn;                /* writes B accepted */
bit bw;                 /* the last one's REPL is out */
byte bwv;
bit b2c; byte b2cv, b2cx;   /* REPL(e+1) in flight to C: version, value */
byte c2b;               /* its answer */
/* ghosts */
byte mx;                /* the highest version a client has seen */
byte ov[NV];            /* the value seen at each version (1..NV-1) */
bit fin;                /* the end: the clock stops, no more reads */
byte pws, bws;          /* mx when P's, B's last write was accepted */
byte failed;            /* (REFUSE_ABORTS) P's writes reported failed (bit value-1) */

#define MAX(a, b) ((a) > (b) -> (a) : (b))

/* replica r, once in e+1, holds what clients saw */
#define HELD(r) (ep[r] == 0 || ver[r] > mx || ver[r] == mx && (mx == 0 || val[r] == ov[mx]))

/* a client sees version v with value x */
inline seen(v, x) {
    if
    :: v > 0 -> assert(ov[v] == 0 || ov[v] == x); ov[v] = x   /* no fork */
    :: else -> skip
    fi;
    assert(x == 0 || x > NWP || !(failed & (1 << (x - 1))));   /* a failed write unseen */
    mx = MAX(mx, v)
}

/* a read of replica r's row */
inline read(r) {
    assert(ver[r] >= mx);                   /* not older than what was seen before */
    seen(ver[r], val[r])
}

/* a write acknowledged at version v with value x, accepted when mx was s */
inline acked(v, x, s) {
    assert(v > s);
    seen(v, x)
}

/* ------------------------------------------------------------------------------------------ */

active proctype Clock() {
end_t:
    do
    :: atomic { !fin && now < TMAX -> now++ }
    od
}

/* The configuration managers: CM, in office at first, and CM2 (see the top) */
#ifdef GRANT_AFTER_REMOVE
#define GRANTING true
#else
#define GRANTING (cst == CM_GRANT)
#endif
#ifdef ZOMBIE_CM_GRANTS
#define CM_ALIVE true
#else
#define CM_ALIVE (!cm2)
#endif

active proctype CM() {
end_cm:
    do
    /* a renewal: granted while P is a member, counted from the CM's receive time */
    :: atomic { rq -> rq = 0;
        if
        :: GRANTING && CM_ALIVE -> cmexp = MAX(cmexp, now + L); gr = 1;
            grs = MAX(grs, rqs)
        :: else -> skip
        fi }
    /* P's lease ended by the CM's record: install e+1 (zoo_multi), NEW-CONFIG to all */
#ifdef EARLY_PROMOTE
    :: atomic { cst == CM_GRANT && !cm2 -> cst = CM_NEW; ncf = ALL }
#else
    :: atomic { cst == CM_GRANT && !cm2 && now >= cmexp -> cst = CM_NEW; ncf = ALL }
#endif
    /* every member acknowledged: NEW-CONFIG-COMMIT (by whichever CM is in office) */
    :: atomic { cst == CM_NEW && cak == ALL -> cst = CM_COMMIT; cmt = 1 }
    od
}

active proctype CM2() {
end_cm2:
    do
    :: atomic { !cm2 && cst == CM_GRANT -> cm2 = 1;
#ifdef NEW_CM_NO_WAIT
        cm2exp = 0
#else
        cm2exp = now + L
#endif
        }
    :: atomic { cm2 && rq -> rq = 0;
        if
        :: cst == CM_GRANT -> cm2exp = MAX(cm2exp, now + L); gr = 1; grs = MAX(grs, rqs)
        :: else -> skip
        fi }
    :: atomic { cm2 && cst == CM_GRANT && now >= cm2exp -> cst = CM_NEW; ncf = ALL }
    od
}

/* The old primary, a zombie once e+1 is installed */
active proctype P() {
end_p:
    do
    /* a renewal request, sent at any time (NREN in all); its lease counts from now. One
     * request in flight at a time: a later one supersedes it (its lease ends later) */
    :: atomic { nren > 0 -> nren--; rq = 1; rqs = now }
#ifdef LEASE_FROM_GRANT
    :: atomic { gr -> gr = 0; grs = 0; pexp = MAX(pexp, now + L) }
#else
    :: atomic { gr -> gr = 0; pexp = MAX(pexp, grs + L); grs = 0 }
#endif
    /* a write arrives: accepted under a valid lease, REPL(e) to both backups */
    :: atomic { !pw && pn < NWP && now < pexp -> pn++; pw = 1; pwv = ver[NP] + 1; pwx = pn;
        pws = mx; p2b = 1; p2c = 1;
#ifdef ACK_BEFORE_BACKUPS
        ver[NP] = pwv; val[NP] = pwx; acked(pwv, pwx, pws)
#endif
        }
    /* both answers in: install and acknowledge, or UNKNOWN */
    :: atomic { pw && b2p != NONE && c2p != NONE -> pw = 0;
        if
        :: b2p == OK && c2p == OK ->
#ifndef ACK_BEFORE_BACKUPS
            ver[NP] = pwv; val[NP] = pwx; acked(pwv, pwx, pws)
#else
            skip
#endif
#ifdef REFUSE_ABORTS
        :: else -> failed = failed | (1 << (pwx - 1))
#else
        :: else -> skip                     /* UNKNOWN */
#endif
        fi;
        b2p = NONE; c2p = NONE }
    /* P's coordinator reads its own row: only under a valid lease */
#ifdef STALE_READ
    :: atomic { !fin -> read(NP) }
#else
    :: atomic { !fin && now < pexp -> read(NP) }
#endif
    od
}

/* A backup applies a REPL of its own epoch */
#ifdef NO_EPOCH_CHECK
#define EPOCH_OK(r, e) true
#else
#define EPOCH_OK(r, e) (ep[r] == (e))
#endif

active proctype B() {
end_b:
    do
    :: atomic { p2b -> p2b = 0;
        if
        :: EPOCH_OK(NB, 0) -> ver[NB] = pwv; val[NB] = pwx; b2p = OK
        :: else -> b2p = REFUSED
        fi }
    :: atomic { ncf & MB -> ncf = ncf & ~MB; ep[NB] = 1; cak = cak | MB;
#ifdef SERVE_EARLY
        bst = B_RESYNC; b2c = 1; b2cv = ver[NB]; b2cx = val[NB]
#else
        bst = B_PROMOTED
#endif
        }
    /* NEW-CONFIG-COMMIT: copy the row to C, serve once C has it */
    :: atomic { cmt -> cmt = 0;
#ifdef NO_RESYNC
        bst = B_SERVING
#elif defined(SERVE_EARLY)
        skip
#else
        bst = B_RESYNC; b2c = 1; b2cv = ver[NB]; b2cx = val[NB]
#endif
        }
    :: atomic { bst == B_RESYNC && c2b == OK -> c2b = NONE; bst = B_SERVING }
    :: atomic { bst == B_RESYNC && c2b == REFUSED -> c2b = NONE;    /* C not in e+1 yet */
        b2c = 1; b2cv = ver[NB]; b2cx = val[NB] }
    /* a write arrives at the serving primary: REPL(e+1) to C, install once C acknowledged */
    :: atomic { bst == B_SERVING && !bw && bn < NWB -> bn++; bw = 1; bwv = ver[NB] + 1;
        bws = mx; b2c = 1; b2cv = bwv; b2cx = NWP + bn }
    :: atomic { bw && c2b != NONE -> bw = 0;
        if
        :: c2b == OK -> ver[NB] = bwv; val[NB] = b2cx; acked(bwv, b2cx, bws)
        :: else -> skip
        fi;
        c2b = NONE }
    od
}

active proctype C() {
end_c:
    do
    :: atomic { p2c -> p2c = 0;
        if
        :: EPOCH_OK(NC, 0) -> ver[NC] = pwv; val[NC] = pwx; c2p = OK
        :: else -> c2p = REFUSED
        fi }
    :: atomic { b2c -> b2c = 0;
        if
        :: EPOCH_OK(NC, 1) -> ver[NC] = b2cv; val[NC] = b2cx; c2b = OK
        :: else -> c2b = REFUSED
        fi }
    :: atomic { ncf & MC -> ncf = ncf & ~MC; ep[NC] = 1; cak = cak | MC }
    od
}

/* N's coordinator reads the row with one-sided READs: P's memory in epoch e (paused or not),
 * B's in e+1 once B's lock on the row is gone */
#ifdef OPEN_ROW
#define B_READABLE (bst != B_BACKUP)
#else
#define B_READABLE (bst == B_SERVING)
#endif

active proctype N() {
end_n:
    do
    :: atomic { ncf & MN -> ncf = ncf & ~MN; ep[NN] = 1; cak = cak | MN }
#ifdef NO_CLOSE
    :: atomic { !fin -> read(NP) }
#else
    :: atomic { !fin && ep[NN] == 0 -> read(NP) }
#endif
    :: atomic { !fin && ep[NN] == 1 && B_READABLE -> read(NB) }
    od
}

/* The invariants (a) and (b), checked in every state, and the end: once no step is possible
 * (the clock stopped), either the CM in office still counts P's lease as running, or e+1 is
 * committed, B serves, and no write waits for an answer */
#define DONE (cst == CM_GRANT && (cm2 -> cm2exp : cmexp) > now || \
              cst == CM_COMMIT && bst == B_SERVING && !pw && !bw)

active proctype Safety() {
end_s:
    do
    :: !(HELD(NB) && HELD(NC)) -> assert(HELD(NB) && HELD(NC))      /* (a) no seen write lost */
    :: bst == B_SERVING && now < pexp -> assert(false)              /* (b) one primary */
    :: atomic { !fin -> fin = 1 }                                   /* the end */
    :: timeout -> assert(DONE)                                      /* not stuck */
    od
}
