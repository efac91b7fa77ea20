"""The DHL checker's verdicts (checkers/dhl.py): each database and
image-level invariant judged on the facts of one crash image
(checkers/dhl_examine.py) and, where the run has one, its write trace
(checkers/dhl_trace.py).  The facts are independent of the crash point's
marks (cacheable); ``judge`` places the digests in the oracle's
acked..begun window.

The counting invariants are judged in every logging mode: TC and TC_OPT
commit records carry the transaction size too (dhl/FORMAT.md), and recovery
counts in every mode but the thesis's TC, whose commit record has no size:
there the write trace alone says whether the FCC's transaction is complete
(CC-COUNT) and whether the newest one is (CC-ROLLBACK).  NOLOG databases
keep one slot header, record no FCC per transaction and have no recovery:
DHL-T1 and DHL-READ are judged (and NOLOG is expected to fail them); the
recovery and counting invariants are skipped with that reason.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from checkers.content import judge_content, matching_indices
from checkers.dhl_facts import After, Before, DhlFacts, RunFacts
from checkers.verdict import Verdict, failed, passed, skipped
from workloads.oracle import Oracle

MAX_LISTED = 8  # pages named in one explanation


def _pages(pages: Collection[int]) -> str:
    shown = ", ".join(str(p) for p in sorted(set(pages))[:MAX_LISTED])
    more = len(set(pages)) - MAX_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def _tid(t: int) -> str:
    return "0 (INV)" if t == 0 else str(t)


def _window(acked: int, begun: int) -> str:
    return f"{acked}..{begun}" if begun > acked else f"{acked}"


def _readers_disagree(b: Before) -> str | None:
    """How libdhl's reading of the image and the independent decoder's
    differ (None: they agree)."""
    if b.indep_error is not None and b.digest is not None:
        return f"the independent decoder cannot read it ({b.indep_error}) but libdhl can"
    if b.indep_digest is not None and b.digest is not None and b.indep_digest != b.digest:
        return (
            f"libdhl reads content {b.digest[:12]} at FCC {b.fcc}, the independent decoder "
            f"{b.indep_digest[:12]} at FCC {b.indep_fcc}"
        )
    return None


def judge_t1(b: Before) -> Verdict:
    if b.error is not None:
        return skipped("DHL-T1", f"the crash image has no readable committed state: {b.error}")
    mine = sorted(m[0] for m in b.t1_missing)
    if b.indep_error is None and mine != list(b.indep_no_committed):
        return failed(
            "DHL-T1",
            f"the two readers disagree on the reachable pages without a "
            f"committed slot header: libdhl {mine}, the independent decoder "
            f"{list(b.indep_no_committed)}",
            expected=list(b.indep_no_committed),
            actual=mine,
        )
    if not b.t1_missing:
        return passed(
            "DHL-T1",
            f"all {b.reached} reachable pages keep a committed slot header (FCC {b.fcc})",
            actual=b.reached,
        )
    p, parent, t0, t1 = b.t1_missing[0]
    via = "a root pointer of the header page" if parent == 0 else f"interior page {parent}"
    more = len(b.t1_missing) - 1
    return failed(
        "DHL-T1",
        f"page {p} (reached from {via}) has no committed slot header before recovery: "
        f"slot 0 TID {_tid(t0)}, slot 1 TID {_tid(t1)}, FCC {b.fcc}; its committed version "
        f"was overwritten" + (f" ({more} more such pages)" if more > 0 else ""),
        expected="a slot header with TID <= FCC",
        actual=[m[0] for m in b.t1_missing],
        implicated=[f"page {m[0]}" for m in b.t1_missing[:MAX_LISTED]],
    )


def judge_read(b: Before, oracle: Sequence[str], acked: int, begun: int) -> Verdict:
    if b.error is not None:
        return skipped("DHL-READ", f"the crash image has no readable committed state: {b.error}")
    w = _window(acked, begun)
    differ = _readers_disagree(b)
    if differ is not None:
        return failed(
            "DHL-READ", f"before recovery, the two readers disagree: {differ}", expected=w
        )
    if b.digest is None:
        return failed(
            "DHL-READ",
            f"reading the crash image through the read rule at FCC {b.fcc} "
            f"(before recovery) failed: {b.read_error}",
            expected=w,
            actual=None,
        )
    js = matching_indices(b.digest, oracle)
    ok = [j for j in js if acked <= j <= begun]
    if ok:
        return passed(
            "DHL-READ",
            f"before recovery, the read rule at FCC {b.fcc} shows the "
            f"state after transaction {ok[-1]}",
            expected=w,
            actual=ok[-1],
        )
    seen = (
        f"the state after transaction {js[-1]}"
        if js
        else f"content {b.digest[:12]} that matches no oracle state (a mix of transactions)"
    )
    return failed(
        "DHL-READ",
        f"before recovery, the read rule at FCC {b.fcc} shows {seen}; "
        f"the committed state is transaction {w}",
        expected=w,
        actual=js[-1] if js else None,
    )


def judge_inv(b: Before, a: After) -> Verdict:
    """No slot header above the FCC after recovery.  Exercised where the
    crash left slot headers above the newest commit record — pages of a
    transaction whose commit record did not persist, the thesis's Fig. 5(b)
    (Fig. 5(c), a commit record short of its pages, is CC-ROLLBACK's)."""
    if not a.above_fcc:
        if not b.above_newest:
            return passed(
                "DHL-INV",
                f"not exercised: no slot header above FCC {a.fcc} after recovery, and none "
                "above the newest commit record before it (no Fig. 5(b) state)",
                exercised=False,
            )
        return passed(
            "DHL-INV",
            f"{b.above_newest} slot headers above the newest commit record (TID "
            f"{b.newest}) before recovery, pages whose commit record did not persist "
            f"(Fig. 5(b)); none above FCC {a.fcc} after it",
            actual=b.above_newest,
        )
    p, s, t = a.above_fcc[0]
    more = len(a.above_fcc) - 1
    return failed(
        "DHL-INV",
        f"page {p}: slot header {s} TID {t} > FCC {a.fcc} survives recovery"
        + (f" ({more} more)" if more > 0 else ""),
        expected=f"TID <= {a.fcc}",
        actual=[list(x) for x in a.above_fcc[:MAX_LISTED]],
        implicated=[f"page {x[0]}" for x in a.above_fcc[:MAX_LISTED]],
    )


def by_trace(
    rf: RunFacts | None, tid: int, holding: Sequence[int]
) -> tuple[frozenset[int], list[int]] | None:
    """What the write trace says of transaction ``tid`` in an image whose
    pages ``holding`` carry its TID: ``(pages it wrote, those of them that
    lack its TID)`` — complete when the second is empty; None where the
    trace does not know the transaction (no trace, or it precedes the log).
    A fact of the log, independent of the engine's commit record and count."""
    if rf is None or tid not in rf.txn_pages:
        return None
    wrote = rf.txn_pages[tid]
    return wrote, sorted(wrote - set(holding))


def judge_count(a: After, rf: RunFacts | None = None) -> Verdict:
    """The FCC's transaction is complete: by its recorded size and by the
    write trace.  A commit record of size 0 is not counted (the thesis's
    TC: recovery trusts the FCC alone), so only the trace judges it."""
    n = len(a.count_fcc)
    uncounted = a.fcc > 0 and a.txn_size == 0
    if n != a.txn_size and not uncounted:
        return failed(
            "CC-COUNT",
            f"after recovery FCC {a.fcc} records transaction size {a.txn_size} but {n} slot "
            f"headers carry TID {a.fcc} (pages {_pages(a.count_fcc) or 'none'}): the "
            f"committed transaction is {'incomplete' if n < a.txn_size else 'over-counted'}",
            expected=a.txn_size,
            actual=n,
            implicated=[f"page {p}" for p in sorted(set(a.count_fcc))[:MAX_LISTED]],
        )
    trace = by_trace(rf, a.fcc, a.fcc_pages)
    recorded = "its commit record has no size to count against" if uncounted else "as recorded"
    if trace is None:
        return passed(
            "CC-COUNT",
            f"{n} slot headers carry FCC {a.fcc}, {recorded} "
            "(the write trace does not know the transaction)",
            expected=a.txn_size,
            actual=n,
        )
    wrote, missing = trace
    if missing:
        return failed(
            "CC-COUNT",
            f"after recovery transaction {a.fcc} is committed but "
            f"incomplete by the write trace: it wrote pages "
            f"{_pages(wrote)}, and pages {_pages(missing)} no longer carry "
            f"TID {a.fcc}",
            expected=len(wrote),
            actual=n,
            implicated=[f"page {p}" for p in missing[:MAX_LISTED]],
        )
    if len(wrote) != a.txn_size and not uncounted:
        return failed(
            "CC-COUNT",
            f"the commit record of transaction {a.fcc} records size "
            f"{a.txn_size}, but by the write trace it wrote {len(wrote)} "
            f"pages ({_pages(wrote)}): the engine counts wrongly",
            expected=len(wrote),
            actual=a.txn_size,
        )
    return passed(
        "CC-COUNT",
        f"{n} slot headers carry FCC {a.fcc}, {recorded}, and as the "
        "write trace says the transaction wrote",
        expected=a.txn_size,
        actual=n,
    )


def judge_rollback(b: Before, a: After, rf: RunFacts | None = None) -> Verdict:
    """Whether recovery rolled back exactly when the newest transaction is
    incomplete — by the write trace where it knows the transaction (the
    pages it wrote that lack its TID), else by the commit record's count."""
    if b.error is not None:
        return skipped("CC-ROLLBACK", f"no readable committed state before recovery: {b.error}")
    t, prev = b.newest, b.previous
    trace = by_trace(rf, t, b.newest_pages)
    if trace is None:
        short_ = b.short
        why = (
            f"transaction {t}'s count did not match ({b.newest_count} slot headers, "
            f"size {b.newest_size})"
        )
    else:
        wrote, missing = trace
        short_ = bool(missing)
        why = (
            f"transaction {t} is incomplete by the write trace (pages {_pages(missing)} of "
            f"the {len(wrote)} it wrote lack TID {t})"
        )
    if not short_:
        if trace is not None and a.fcc < t:
            return failed(
                "CC-ROLLBACK",
                f"transaction {t} is complete by the write trace (all "
                f"{len(trace[0])} pages it wrote carry TID {t}) but "
                f"recovery rolled it back to FCC {a.fcc}",
                expected=t,
                actual=a.fcc,
            )
        return passed(
            "CC-ROLLBACK",
            f"not exercised: the newest commit record (TID {t}) "
            f"is complete ({b.newest_count} of {b.newest_size}): "
            "nothing to roll back",
            exercised=False,
        )
    problems = []
    if a.fcc != prev:
        problems.append(f"FCC is {a.fcc}, expected {prev} (the commit record before {t})")
    if a.txn_size != len(a.count_fcc):
        problems.append(
            f"transaction size {a.txn_size} but {len(a.count_fcc)} headers carry TID {a.fcc}"
        )
    if a.count_newest:
        problems.append(f"headers of TID {t} remain on pages {_pages(a.count_newest)}")
    if not problems:
        return passed(
            "CC-ROLLBACK",
            f"{why}: recovery rolled back to FCC {a.fcc}",
            expected=prev,
            actual=a.fcc,
        )
    return failed(
        "CC-ROLLBACK",
        f"{why} but recovery did not roll it back: " + "; ".join(problems),
        expected=prev,
        actual=a.fcc,
        implicated=[f"page {p}" for p in sorted(set(a.count_newest))[:MAX_LISTED]],
    )


def judge_mono(a: After, rf: RunFacts | None, acked: int) -> Verdict:
    """CC-MONO on one image: recovery's FCC is not below the TID of the
    last acknowledged transaction, as the write trace saw it written."""
    if rf is None:
        return skipped(
            "CC-MONO",
            "the run has no write trace to name the acknowledged "
            "transactions' TIDs (see the run's trace record)",
        )
    w = rf.writer_at(acked)
    if w is None:
        return passed(
            "CC-MONO",
            f"not exercised: no acknowledgement of this log at or below transaction {acked}",
            exercised=False,
        )
    if a.engine_fcc >= w:
        return passed(
            "CC-MONO",
            f"recovered FCC {a.engine_fcc} is not below TID {w}, the "
            f"last acknowledged transaction's",
            expected=w,
            actual=a.engine_fcc,
        )
    return failed(
        "CC-MONO",
        f"recovery went back to FCC {a.engine_fcc}, below TID {w} that "
        f"the log wrote before the acknowledgement of transaction "
        f"{acked}",
        expected=f">= {w}",
        actual=a.engine_fcc,
    )


def judge_idempotent(a: After) -> Verdict:
    if a.idempotent_error is not None:
        return failed(
            "REC-IDEMPOTENT", f"recovering the recovered image failed: {a.idempotent_error}"
        )
    if a.idempotent_changed is None:
        return skipped("REC-IDEMPOTENT", "not run")
    if not a.idempotent_changed:
        return passed("REC-IDEMPOTENT", "a second recovery changed no byte")
    return failed(
        "REC-IDEMPOTENT",
        f"a second recovery rewrote pages {_pages(a.idempotent_changed)} of the recovered image",
        expected=[],
        actual=list(a.idempotent_changed[:MAX_LISTED]),
        implicated=[f"page {p}" for p in a.idempotent_changed[:MAX_LISTED]],
    )


DB_IDS = ("DB-INTEGRITY", "DB-ATOMIC", "DB-DURABLE", "DB-PREFIX")
AFTER_IDS = ("DHL-INV", "CC-COUNT", "CC-ROLLBACK", "REC-IDEMPOTENT", "CC-MONO")
IDS = ("DB-OPEN", *DB_IDS, "DHL-T1", "DHL-READ", *AFTER_IDS)  # the per-state verdicts


def _content_read_page_by_page(
    b: Before, digests: Sequence[str], acked: int, begun: int
) -> list[Verdict]:
    """DB-ATOMIC, DB-DURABLE and DB-PREFIX of an image the engine cannot
    open: judged on what the pages hold, read by the independent decoder
    through the read rule (what survived on storage, acknowledged records
    included), rather than skipped."""
    if b.indep_digest is None:
        why = f"the database does not open and its pages cannot be read ({b.indep_error})"
        return [skipped(i, why) for i in ("DB-ATOMIC", "DB-DURABLE", "DB-PREFIX")]
    out = []
    for v in judge_content(b.indep_digest, digests, acked, begun):
        v.explanation = (
            f"the database does not open; its pages read through the read rule "
            f"at FCC {b.indep_fcc}: {v.explanation}"
        )
        out.append(v)
    return out


def judge(
    facts: DhlFacts,
    oracle: Oracle | Sequence[str],
    acked: int,
    begun: int,
    *,
    run_facts: RunFacts | None = None,
) -> list[Verdict]:
    """Every database and image-level DHL verdict for one examined state;
    ``run_facts``: what the run's write trace says (checkers.dhl_trace)."""
    digests = oracle.digests if isinstance(oracle, Oracle) else oracle
    if not facts.exists:
        why = "the database file does not exist after recovery"
        return [failed("DB-OPEN", why)] + [
            skipped(i, "database missing (see DB-OPEN)")
            for i in DB_IDS + ("DHL-T1", "DHL-READ") + AFTER_IDS
        ]
    b, a = facts.before, facts.after
    pre = [judge_t1(b), judge_read(b, digests, acked, begun)]
    if a.error is not None or a.digest is None:
        why = a.error if a.error is not None else f"full scan failed: {a.scan_error}"
        return [
            failed("DB-OPEN", f"opening (and recovering) failed: {why}"),
            skipped("DB-INTEGRITY", "the database does not open (see DB-OPEN)"),
            *_content_read_page_by_page(b, digests, acked, begun),
            *pre,
        ] + [
            skipped(i, "recovery failed, there is no recovered image (see DB-OPEN)")
            for i in AFTER_IDS
        ]
    out = [
        passed(
            "DB-OPEN",
            f"recovered to FCC {a.engine_fcc}"
            + (" after rolling back an incomplete transaction" if a.rolled_back else ""),
        )
    ]
    if a.integrity == "ok":
        out.append(passed("DB-INTEGRITY"))
    else:
        out.append(
            failed("DB-INTEGRITY", f"dhl_check: {a.integrity}", expected="ok", actual=a.integrity)
        )
    out += judge_content(a.digest, digests, acked, begun)
    out += pre
    if facts.nolog:
        why = "NOLOG database: one slot header, no FCC per transaction, no recovery"
        return out + [skipped(i, why) for i in AFTER_IDS]
    return out + [
        judge_inv(b, a),
        judge_count(a, run_facts),
        judge_rollback(b, a, run_facts),
        judge_idempotent(a),
        judge_mono(a, run_facts, acked),
    ]
