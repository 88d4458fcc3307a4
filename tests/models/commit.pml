/* rdkv's logged two-phase commit, for the spin model checker: the fixed design of
 * docs/transactions.md ("Fencing", "In-doubt transactions", "The logged commit") and
 * docs/storage.md ("Checkpoints"). docs/commit-model.md explains the model, its bounds, the
 * traces that catch each bad variant, and what it leaves out.
 *
 * One coordinator C, two participants P1 and P2, one transaction T that writes one row at each
 * (value 0 -> 1), and W, another transaction local to P1 (-DWP=2: to P2) that takes P1's row
 * lock whenever it is free and writes the row (value 2) with a logged local commit: it is how
 * lost updates and installs outside the lock show. Every process has a redo log. Each process
 * may crash and restart, messages to the participants may be lost, late (reordered) and
 * duplicated, a participant may take a checkpoint: each within a small budget (below).
 *
 * Steps. Every step is one atomic transition of a process (Coord, P1, P2, Net, Check): a
 * request and its handler's work up to its next wait is one step; a wait for the log is a
 * step of its own, enabled once the record is durable (the log's sync is a step too). Merged:
 *   - a reply to C (vote, COMMITTED, NOT_FOUND, ABORT done) reaches C inside the step that
 *     sends it, or is lost (the loss budget). A late reply counts as lost: a vote after C's
 *     timeout is ignored, and a participant answers a request sent again as it answered the
 *     first. (What a late reply also allows -- C sending again while the answer travels, which
 *     leaves a request in flight after C is done -- is what a duplicate gives.)
 *   - a participant's QUERY and C's answer are one step, taken from C's memory at that moment:
 *     the answer's delay is the query's (a query is sent at any time); ACTIVE (no answer)
 *     changes nothing and is left out;
 *   - a crash and the restart are one step: a participant serves nothing before its recovery
 *     (W is local to it and dies with it), and C's restart only makes steps possible that a
 *     slow process may take later.
 * C took T's locks and sent its PREPAREs before the first step (the initial state).
 *
 * Locks. lock[i], the owner of Pi's row lock: NONE, LT (T: C's hold), LW (W), LR (Pi's
 * recovery transaction, holding the row on T's behalf after a restart). LT is freed only
 *   - by C, once the outcome is settled there (both confirmations, or both abort answers, in);
 *   - by Pi for C, when T is settled at Pi and the process of C that took the hold is gone
 *     (cgone: C crashed, or -DUNK_RELEASE gave the holds up);
 *   - by a lease recovery: nobody keeps the hold alive (cgone) and Pi does not keep it for T.
 *     Pi keeps it from the PREPARE's arrival until T is settled there (the code's first refresh
 *     comes an eighth of a lease after the PREPARE, before any waiter may judge).
 * A crash of Pi loses its lock table; the restart locks the row of an in-doubt T as LR.
 *
 * Logs. Pi's log is lg[] at absolute LSNs 0..nx-1, durable below du; a checkpoint's replay
 * LSN is bs: the records below it are truncated (replay never reads them) but stay in the
 * array as the ghost history the checks compare with. A crash keeps the durable prefix and any
 * prefix of the rest (what reached the file). C's log (DECISION, END) is implied by its phase.
 * The log-failure rule (PANIC): a failed write or sync of a record that a step waits for stops
 * the process, and recovery decides from the log. That is the crash step (a crash whose
 * pending records may or may not have reached the file), so only the bad variants have a
 * log-failure step of their own.
 *
 * Checked (safety; check.sh's run with no LTL):
 *   - no install outside the coordinator's lock: T installs at Pi only while LT holds the row
 *     (LR for a recovered T); and no lost update: T never installs at Pi once W's COMMIT is in
 *     Pi's history;
 *   - recovery is exact: after a restart the row holds the value of the last COMMIT record of
 *     Pi's history (truncated records included), and W's acknowledged commit is there;
 *   - at every quiescent state (C done, T settled and forgotten at both, no message in flight,
 *     locks free, logs synced): atomicity (T's COMMIT is in P1's history iff in P2's),
 *     durability (T acknowledged -> in both), each row holds its history's last commit, and
 *     W's acknowledged value is there;
 *   - nothing gets stuck: Check may declare the faults over at any moment (calm: no crash,
 *     loss, duplicate, log failure, checkpoint start or new W from then on); from then on the
 *     protocol must reach quiescence. C sends a request again at most once (rt) until some
 *     step makes progress, so a retry loop that changes nothing ends in a state where no step
 *     is possible, and Check's timeout asserts that it is quiescent.
 *
 * Budgets (defines): NCRASH 3 crashes in all, at most one per process; NLOSS 1 message lost
 * (a request or a reply); NDUP 2 requests duplicated; NCK 1 checkpoint (at either participant);
 * one W commit; one log failure (bad variants only).
 *
 * Bad variants (check.sh: each must be caught):
 *   -DNF_CONFIRMS     C counts NOT_FOUND (or BUSY) as a confirmation of its COMMIT;
 *   -DCKPT_EARLY      a checkpoint takes its replay LSN without waiting for the holds
 *                     (records appended and not yet applied in memory);
 *   -DUNK_RELEASE     C's DECISION write fails and C does not crash: it releases T's locks,
 *                     answers ACTIVE, and restarts later (finding the DECISION if it had
 *                     reached the file);
 *   -DLATE_KEEPALIVE  Pi keeps C's hold alive only once T is prepared (PREPARE durable), not
 *                     from the PREPARE's arrival;
 *   -DFORGET_ON_FAIL  a participant whose COMMIT record fails forgets T instead of crashing.
 * -DNO_INSTALL_CHECK drops the install assertion (to see what a bad variant does next).
 */

#ifndef NLOSS
#define NLOSS 1         /* messages lost: a request to Pi or a reply to C */
#endif
#ifndef NDUP
#define NDUP 2          /* requests to Pi duplicated */
#endif
#ifndef NCK
#define NCK 1           /* checkpoints (at either participant) */
#endif
#ifndef NCRASH
#define NCRASH 3        /* crashes in all (at most one per process) */
#endif
#ifndef WP
#define WP 1            /* W's participant */
#endif
#define NLF 1           /* log failures (bad variants only) */
#define NL 6            /* log capacity per participant, truncated records included (asserted) */

/* lock owners */
#define NONE 0
#define LT 1
#define LW 2
#define LR 3
/* what Pi knows of T */
#define T_NONE 0        /* nothing (never prepared, or closed and forgotten) */
#define T_STAGE 1       /* PREPARE appended, waiting for it to be durable */
#define T_PREP 2        /* prepared (rec: in doubt after a restart, held by LR) */
#define T_CMTG 3        /* committing: COMMIT appended, waiting for it */
#define T_OUT 4         /* outcome memory: committed */
#define T_ABT 5         /* aborted here (tombstone, memory only) */
/* log records */
#define R_PREP 1
#define R_CMT 2         /* T's COMMIT (also the one LR writes, with T's txid) */
#define R_END 3
#define R_W 4           /* W's COMMIT */
/* C's phases */
#define C_VOTE 0        /* PREPAREs out, collecting votes: ACTIVE */
#define C_DECIDING 1    /* DECISION appended, not durable: ACTIVE */
#define C_CMT 2         /* decided: delivering COMMIT: COMMITTED */
#define C_END 3         /* END appended, not durable: COMMITTED */
#define C_ABT 4         /* aborting: ABORT out, waiting for answers: UNKNOWN */
#define C_DONE 5        /* nothing in memory: UNKNOWN */
#define C_UNK 6         /* (UNK_RELEASE) DECISION failed: ACTIVE until a restart */
/* messages to Pi (mp[i]) */
#define M_PREP 1
#define M_CMT 2
#define M_ABT 4
/* replies to C */
#define V_YES 1
#define V_COK 2         /* COMMITTED */
#define V_CNF 4         /* NOT_FOUND (or BUSY) */
#define V_AOK 8         /* ABORT done */

#define BIT(i) (1 << ((i) - 1))
#define LG(i, k) lg[((i) - 1) * NL + (k)]

/* participants (index 1, 2; 0 unused) */
byte lg[2 * NL];
byte nx[3], du[3], bs[3];   /* next LSN, durable prefix, replay LSN (truncated below) */
byte ckL[3];                /* a checkpoint in progress: its replay LSN + 1 */
byte sr[3], ss[3];          /* the checkpoint: row, and T: T_NONE, T_PREP or T_OUT */
byte row[3], tst[3];
byte lock[3] = LT;          /* C took T's locks (index 0 unused) ... */
bit rec[3];                 /* T in doubt after a restart (lock LR) */
byte tw[3];                 /* the LSN T's step waits for (STAGE, CMTG) */
bit lfail[3];               /* (FORGET_ON_FAIL) the log failed */
bit pcr[3];                 /* crashed once */
byte wst;                   /* W: 0 idle, 1 COMMIT appended (waiting), 2 acknowledged, 3 died */
byte ww;                    /* the LSN W waits for */
/* requests in flight to Pi (M_* bits) */
byte mp[3] = M_PREP;        /* ... and sent its PREPAREs */
/* coordinator */
byte cph;
byte cm;                    /* votes, confirmations or abort answers in (bit per participant) */
bit cgone;                  /* C's holds are nobody's now (C crashed, or UNK_RELEASE gave up) */
bit ccr;                    /* crashed once */
bit acked;                  /* ghost: T acknowledged to the client */
/* faults */
byte nloss = NLOSS, ndup = NDUP, nck = NCK, nlf = NLF;
bit calm;                   /* the faults have stopped */
byte rt;                    /* C sent again to Pi (bit i-1) since the last progress */
byte ncr = NCRASH;
hidden byte k, tv, hv, wv, h1;  /* scratch */

#define PQ(i) ((tst[i] == T_NONE || tst[i] == T_ABT) && lock[i] == NONE && du[i] == nx[i] && \
               ckL[i] == 0 && mp[i] == 0)
#define QUIESCENT (cph == C_DONE && PQ(1) && PQ(2) && wst != 1)

/* Pi's history (the ghost log, truncated records included): tv the value of its last COMMIT
 * record, hv whether T's COMMIT is in it, wv whether W's is */
inline history(i) {
    tv = 0; hv = 0; wv = 0;
    for (k : 0 .. NL - 1) {
        if
        :: k < nx[i] && LG(i, k) == R_CMT -> tv = 1; hv = 1
        :: k < nx[i] && LG(i, k) == R_W -> tv = 2; wv = 1
        :: else -> skip
        fi
    };
    k = 0
}

/* receive: consume the message, or leave a duplicate in flight */
inline take(box, b) {
    if
    :: box = box & ~(b)
    :: ndup > 0 && !calm -> ndup--
    fi
}

inline append(i, r) {
    assert(nx[i] < NL);
    LG(i, nx[i]) = r;
    nx[i]++
}

/* ------------------------------------------------------------------------------------------ */
/* Coordinator */

/* C releases the holds of its process (those of a process that crashed are gone with it) */
inline c_release() {
    if :: !cgone && lock[1] == LT -> lock[1] = NONE :: else -> skip fi;
    if :: !cgone && lock[2] == LT -> lock[2] = NONE :: else -> skip fi
}

/* C crashes and restarts from its log: a DECISION without a durable END -> delivering again;
 * no DECISION (or a durable END) -> nothing (presumed abort). A record not durable may or may
 * not have reached the file. */
inline c_crash() {
    if
    :: cph == C_DECIDING || cph == C_UNK ->
        if :: cph = C_CMT :: cph = C_DONE fi
    :: cph == C_END ->
        if :: cph = C_DONE :: cph = C_CMT fi
    :: cph == C_CMT -> skip
    :: else -> cph = C_DONE
    fi;
    cm = 0; cgone = 1; rt = 0
}

/* C takes in a reply from Pi (inside the step of Pi that sends it) */
inline c_vote(i) {
    if
    :: cph == C_VOTE ->
        cm = cm | BIT(i); rt = 0;
        if :: cm == 3 -> cm = 0; cph = C_DECIDING :: else -> skip fi   /* append DECISION */
    :: else -> skip
    fi
}

inline c_confirm(i) {
    if
    :: cph == C_CMT ->
        cm = cm | BIT(i); rt = 0;
        if :: cm == 3 -> cm = 0; cph = C_END; c_release() :: else -> skip fi  /* END appended */
    :: else -> skip
    fi
}

inline c_aborted(i) {
    if
    :: cph == C_ABT ->
        cm = cm | BIT(i); rt = 0;
        if :: cm == 3 -> cm = 0; cph = C_DONE; c_release() :: else -> skip fi
    :: else -> skip
    fi
}

/* A reply reaches C at once, or is lost (the loss budget). A late reply is a lost one: it
 * stands for nothing that a later one does not -- a vote after the timeout is ignored, and a
 * participant answers a COMMIT or ABORT sent again as it answered the first. */
inline reply(i, v) {
    if
    :: nloss > 0 && !calm -> nloss--; rt = 0
    :: v == V_YES -> c_vote(i)
    :: v == V_COK -> c_confirm(i)
#ifdef NF_CONFIRMS
    :: v == V_CNF -> c_confirm(i)                    /* NOT_FOUND taken for a confirmation */
#else
    :: v == V_CNF -> skip                            /* NOT_FOUND confirms nothing */
#endif
    :: v == V_AOK -> c_aborted(i)
    fi
}

active proctype Coord() {
end_c:
    do
    /* a vote not in by the timeout: abort (nothing logged) */
    :: atomic { cph == C_VOTE -> cph = C_ABT; cm = 0;
        mp[1] = mp[1] | M_ABT; mp[2] = mp[2] | M_ABT; rt = 0 }
    /* the DECISION is durable: decided, acknowledged, COMMIT to both */
    :: atomic { cph == C_DECIDING -> cph = C_CMT; acked = 1;
        mp[1] = mp[1] | M_CMT; mp[2] = mp[2] | M_CMT; rt = 0 }
#ifdef UNK_RELEASE
    /* the DECISION's write fails: outcome unknown; release the locks and carry on */
    :: atomic { cph == C_DECIDING && nlf > 0 && !calm -> nlf--; c_release(); cgone = 1;
        cph = C_UNK; rt = 0 }
    :: atomic { cph == C_UNK -> ccr = 1; c_crash() }   /* ... until a restart reads the log */
#endif
    /* deliver again until COMMITTED; ABORT again until answered */
    :: atomic { cph == C_CMT && !(cm & BIT(1)) && !(mp[1] & M_CMT) && !(rt & 1) ->
        mp[1] = mp[1] | M_CMT; rt = rt | 1 }
    :: atomic { cph == C_CMT && !(cm & BIT(2)) && !(mp[2] & M_CMT) && !(rt & 2) ->
        mp[2] = mp[2] | M_CMT; rt = rt | 2 }
    :: atomic { cph == C_ABT && !(cm & BIT(1)) && !(mp[1] & M_ABT) && !(rt & 1) ->
        mp[1] = mp[1] | M_ABT; rt = rt | 1 }
    :: atomic { cph == C_ABT && !(cm & BIT(2)) && !(mp[2] & M_ABT) && !(rt & 2) ->
        mp[2] = mp[2] | M_ABT; rt = rt | 2 }
    /* END durable: forget */
    :: atomic { cph == C_END -> cph = C_DONE; rt = 0 }
    :: atomic { !ccr && ncr > 0 && !calm -> ccr = 1; ncr--; c_crash() }
    od
}

/* ------------------------------------------------------------------------------------------ */
/* Participants */

/* C's answer to QUERY: COMMITTED while the decision is in memory, UNKNOWN with no record */
#define C_COMMITTED (cph == C_CMT || cph == C_END)
#define C_UNKNOWN (cph == C_ABT || cph == C_DONE)

/* T is settled at Pi: a recovered T's lock (LR) is released; C's hold, if C's process that took
 * it is gone, is released for it */
inline settle(i) {
    if
    :: rec[i] -> rec[i] = 0; assert(lock[i] == LR); lock[i] = NONE
    :: !rec[i] && cgone && lock[i] == LT -> lock[i] = NONE
    :: else -> skip
    fi
}

inline start_commit(i) {
    tw[i] = nx[i]; append(i, R_CMT); tst[i] = T_CMTG; rt = 0
}

/* the COMMIT record is durable: install under the lock */
inline install(i) {
#ifndef NO_INSTALL_CHECK
    assert(rec[i] && lock[i] == LR || !rec[i] && lock[i] == LT);  /* no install outside */
#endif
    history(i);
    assert(!wv);                                /* no lost update: W's commit is not before */
    row[i] = 1; tst[i] = T_OUT; tw[i] = 0;
    settle(i);
    reply(i, V_COK);
    rt = 0
}

inline abort_here(i) {
    append(i, R_END); tst[i] = T_ABT; settle(i); rt = 0
}

/* crash and restart: the durable prefix survives, and any prefix of the rest; load the
 * checkpoint, replay from its replay LSN, lock the in-doubt row (LR), then serve */
inline p_crash(i) {
    do
    :: nx[i] > du[i] -> nx[i]--; LG(i, nx[i]) = 0
    :: break
    od;
    row[i] = sr[i]; tst[i] = ss[i]; rec[i] = 0;
    for (k : 0 .. NL - 1) {
        if
        :: k >= bs[i] && k < nx[i] ->
            if
            :: LG(i, k) == R_PREP -> tst[i] = T_PREP
            :: LG(i, k) == R_CMT -> row[i] = 1; tst[i] = T_OUT
            :: LG(i, k) == R_END -> tst[i] = T_NONE
            :: LG(i, k) == R_W -> row[i] = 2
            fi
        :: else -> skip
        fi
    };
    k = 0;
    if
    :: tst[i] == T_PREP -> rec[i] = 1; lock[i] = LR
    :: else -> lock[i] = NONE
    fi;
    if :: i == WP && wst == 1 -> wst = 3; ww = 0 :: else -> skip fi;
    ckL[i] = 0; tw[i] = 0; lfail[i] = 0;
    history(i);
    assert(row[i] == tv);                       /* recovery is exact */
    assert(i != WP || wst != 2 || row[i] == 2); /* W's acknowledged commit is there */
    rt = 0
}

/* Pi keeps C's hold alive for T from the PREPARE's arrival until T is settled here */
#ifdef LATE_KEEPALIVE
#define KEPT(i) (tst[i] == T_PREP || tst[i] == T_CMTG)
#else
#define KEPT(i) (tst[i] == T_STAGE || tst[i] == T_PREP || tst[i] == T_CMTG)
#endif

/* holds: records appended and not yet applied in memory */
#define HOLDS(i) (tst[i] == T_STAGE || tst[i] == T_CMTG || (i) == WP && wst == 1)
#ifdef CKPT_EARLY
#define CK_OK(i) 1
#else
#define CK_OK(i) (!HOLDS(i))
#endif

inline participant(i) {
end_p:
    do
    /* PREPARE: refused if T's outcome is known here or T's lock is not held by T (the fence) */
    :: atomic { mp[i] & M_PREP -> take(mp[i], M_PREP);
        if
        :: tst[i] == T_NONE && lock[i] == LT -> tw[i] = nx[i]; append(i, R_PREP);
            tst[i] = T_STAGE; rt = 0
        :: else -> skip
        fi }
    /* the PREPARE is durable: prepared, vote yes */
    :: atomic { tst[i] == T_STAGE && tw[i] < du[i] -> tst[i] = T_PREP; tw[i] = 0; rt = 0;
        reply(i, V_YES) }
    /* COMMIT */
    :: atomic { mp[i] & M_CMT -> take(mp[i], M_CMT);
        if
        :: tst[i] == T_PREP && !rec[i] -> start_commit(i)
        :: tst[i] == T_OUT -> reply(i, V_COK)
        :: else -> reply(i, V_CNF)    /* committing, in doubt, unknown: NOT_FOUND (or BUSY) */
        fi }
    :: atomic { tst[i] == T_CMTG && tw[i] < du[i] -> install(i) }
#ifdef FORGET_ON_FAIL
    /* the COMMIT record's write fails: forget T (instead of crashing) */
    :: atomic { tst[i] == T_CMTG && tw[i] >= du[i] && nlf > 0 && !calm -> nlf--;
        lfail[i] = 1; tst[i] = T_NONE; tw[i] = 0; rt = 0 }
#endif
    /* ABORT (BUSY while the PREPARE is being handled: it waits in flight) */
    :: atomic { (mp[i] & M_ABT) && tst[i] != T_STAGE -> take(mp[i], M_ABT);
        assert(tst[i] != T_CMTG && tst[i] != T_OUT);
        if
        :: tst[i] == T_PREP -> abort_here(i)
        :: tst[i] == T_NONE -> tst[i] = T_ABT; rt = 0        /* tombstone */
        :: else -> skip
        fi;
        reply(i, V_AOK) }
    /* QUERY (in doubt, or to forget the outcome memory), sent at any time and answered from
     * C's memory: the query and its answer are one step (a late or lost answer is a later
     * query); ACTIVE (no answer) changes nothing and is left out */
    :: atomic { tst[i] == T_PREP && C_COMMITTED -> start_commit(i) }
    :: atomic { tst[i] == T_PREP && C_UNKNOWN -> abort_here(i) }
    :: atomic { tst[i] == T_OUT && C_UNKNOWN -> tst[i] = T_NONE; rt = 0 }   /* forget */
    /* the log syncs its next record */
    :: atomic { du[i] < nx[i] && !lfail[i] -> du[i]++; rt = 0 }
    /* lease recovery of an orphaned hold that nobody keeps alive */
    :: atomic { lock[i] == LT && cgone && !KEPT(i) -> lock[i] = NONE; rt = 0 }
    /* W: a local transaction on the row */
    :: atomic { i == WP && wst == 0 && lock[i] == NONE && !calm -> lock[i] = LW; ww = nx[i];
        append(i, R_W); wst = 1; rt = 0 }
    :: atomic { i == WP && wst == 1 && ww < du[i] -> assert(lock[i] == LW); row[i] = 2;
        lock[i] = NONE; wst = 2; ww = 0; rt = 0 }
    /* checkpoint: take the replay LSN (the next LSN) once no hold is open ... */
    :: atomic { nck > 0 && ckL[i] == 0 && !calm && CK_OK(i) -> nck--; ckL[i] = nx[i] + 1;
        rt = 0 }
    /* ... and once every record below it is durable: snapshot memory, truncate below it */
    :: atomic { ckL[i] > 0 && du[i] + 1 >= ckL[i] -> sr[i] = row[i];
        ss[i] = (tst[i] == T_PREP || tst[i] == T_CMTG -> T_PREP :
                 (tst[i] == T_OUT -> T_OUT : T_NONE));
        bs[i] = ckL[i] - 1; ckL[i] = 0; rt = 0 }
    :: atomic { !pcr[i] && ncr > 0 && !calm -> pcr[i] = 1; ncr--; p_crash(i) }
    od
}

active proctype P1() { participant(1) }
active proctype P2() { participant(2) }

/* ------------------------------------------------------------------------------------------ */
/* The network loses a message (any one in flight); delays and reordering are the messages
 * staying in flight; duplicates are in take(). */

inline lose(box) {
    if
    :: box & 1 -> box = box & ~1
    :: box & 2 -> box = box & ~2
    :: box & 4 -> box = box & ~4
    fi;
    nloss--; rt = 0
}

active proctype Net() {
end_n:
    do
    :: atomic { nloss > 0 && !calm && mp[1] != 0 -> lose(mp[1]) }
    :: atomic { nloss > 0 && !calm && mp[2] != 0 -> lose(mp[2]) }
    od
}

/* ------------------------------------------------------------------------------------------ */

active proctype Check() {
end_check:
    do
    :: atomic { !calm -> calm = 1 }
    :: atomic { QUIESCENT ->
        history(1); h1 = hv; history(2);
        assert(h1 == hv);                       /* atomicity */
        assert(!acked || hv);                   /* durability */
        assert(row[2] == tv);
        history(1);
        assert(row[1] == tv);                   /* each row: its history's last commit */
        assert(wst != 2 || row[WP] == 2);       /* W's acknowledged commit is there */
        tv = 0; hv = 0; wv = 0; h1 = 0 }
    :: timeout -> assert(QUIESCENT)             /* not stuck */
    od
}
