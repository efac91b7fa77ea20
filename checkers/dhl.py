"""Database and image-level checkers for DHL SUTs (engine "dhl").

The protocol of :mod:`checkers.engines`: ``content_key``, ``examine``,
``judge``.  ``examine`` looks at the crash image twice:

* **before DHL recovery**, read-only (the image as a reader would see it):
  DHL-T1 (every page reachable in the committed state keeps a committed slot
  header), the read-rule digest for DHL-READ, and the newest commit record
  with its count of slot headers (a short count is what CC-ROLLBACK is
  about);
* **after DHL recovery**, on a copy in memory (recovery writes): DB-OPEN,
  DB-INTEGRITY (``dhl_check``), the content digest for DB-ATOMIC/DURABLE/
  PREFIX, DHL-INV (no slot header above the FCC), CC-COUNT (headers with
  TID == FCC vs the recorded transaction size), CC-ROLLBACK, and
  REC-IDEMPOTENT (recover a copy of the recovered copy: no byte changes).

The image is read once; every open, recovery and re-recovery runs on
in-memory copies through libdhl's ``dhl_mem_io`` (:class:`MemIO`), labelled
with the scratch paths the file-based procedure used, so error messages
name the same files.  Slot headers come from one ``dhl_image_headers`` call
per image; pages whose headers are all zero are left out of the lists below
(they hold no TID, so no count or search changes).

Slot headers are decoded by libdhl (``dhl_image_headers``), the tree walk is
``dhl_reachable``: this module never restates the page layout.  The facts
are independent of the crash point's marks (cacheable); ``judge`` places
the digests in the oracle's acked..begun window.

The counting invariants are judged in every logging mode: TC and TC_OPT
commit records carry the transaction size too (dhl/FORMAT.md), and recovery
counts in every mode.  NOLOG databases keep one slot header, record no FCC
per transaction and have no recovery: DHL-T1 and DHL-READ are judged (and
NOLOG is expected to fail them); the recovery and counting invariants are
skipped with that reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import xxhash

from checkers import dhl_native, dhl_trace
from checkers.content import judge_content, matching_indices
from checkers.dhl_facts import (
    After,
    Before,
    DhlFacts,
    RunFacts,
    newest_commit,
    open_image,
    pagecount_at,
    pages_with,
    previous_commit,
    stored_headers,
)
from checkers.dhl_format import read_committed
from checkers.protocol import EngineChecker, KeyOfPieces, NativeExaminer
from checkers.recovery import crashsafe_verdict
from checkers.verdict import Verdict, failed, passed, skipped
from dhl.binding import Database, DhlError, MemIO
from harness.materialize.durable import Loadable
from workloads.oracle import Oracle, digest_rows

WORK = "dhl-check"  # the (virtual) scratch folder beside the examined file: labels only
MAX_LISTED = 8  # pages named in one explanation

# The image (recovered in place once its unrecovered facts are taken) and
# the re-recovered copy of examine(), reused from state to state: fresh
# megabyte buffers cost more in page faults than all the checking (one
# process examines one image at a time).
_IMAGE, _AGAIN = MemIO(), MemIO()


def refused(why: str) -> DhlFacts:
    """The facts of a database not read, for ``why`` (it is a link of the
    recovered tree): DB-OPEN fails with it, nothing is read before recovery."""
    return DhlFacts(exists=True, before=Before(error=why), after=After(error=why))


def content_key(files: Path, db_name: str) -> bytes:
    """A digest of the extracted database file (DHL has no sidecar files)."""
    p = files / db_name
    if not p.exists():
        h = xxhash.xxh3_128()
        h.update(b"\1")
        return h.digest()
    with _IMAGE.read_file(p).view() as v:
        return image_key(v)


def image_key(image: bytes | memoryview) -> bytes:
    """:func:`content_key` of a database file whose bytes are ``image``."""
    return xxhash.xxh3_128(image).digest()


# --- reading images ------------------------------------------------------------


def _err(e: Exception) -> str:
    return str(e)


def examine_before(image: Path, data: MemIO | None = None) -> tuple[Before, bool]:
    """Read the crash image without recovery (``readonly``: nothing is
    written).  ``data``: the image already read into memory.  Returns the
    facts and whether it is a NOLOG database."""
    if data is None:
        data = MemIO().read_file(image)
    try:
        db, nolog = open_image(image, readonly=True, io=data)
    except DhlError as e:
        return Before(error=_err(e)), False
    with db:
        info = db.info()
        hs = stored_headers(db, data)
        by_page = {h.pgno: h for h in hs}
        newest, size, count = newest_commit(hs) if not nolog else (info.fcc, 0, 0)
        fcc = info.fcc
        missing = []
        reached = db.reachable()
        for r in reached:
            if r.slot == -2:
                continue  # a committed slot exists but is impossible: DB-INTEGRITY's business
            h = by_page.get(r.pgno)
            t = h.tid if h is not None else (0, 0)
            if not any(x and x <= fcc for x in (t if not nolog else t[:1])):
                missing.append((r.pgno, r.parent, t[0], t[1]))
        try:
            digest, read_error = db.digest(), None
        except DhlError as e:
            digest, read_error = None, _err(e)
    with data.view() as v:
        indep = read_committed(v)
    return Before(
        fcc=fcc,
        newest=newest,
        newest_size=size,
        newest_count=count,
        newest_pages=pages_with(hs, newest, data.size) if newest else (),
        indep_fcc=indep.fcc,
        indep_error=indep.error,
        indep_digest=digest_rows(indep.rows) if indep.rows is not None else None,
        indep_no_committed=tuple(sorted(indep.no_committed)),
        previous=previous_commit(hs, newest) if not nolog else 0,
        t1_missing=tuple(missing),
        reached=len(reached),
        digest=digest,
        read_error=read_error,
    ), nolog


def examine_after(
    image: Path,
    recovered: Path,
    before: Before,
    nolog: bool,
    *,
    recover: bool = True,
    idempotence: bool = True,
    data: MemIO | None = None,
    work: tuple[MemIO, MemIO] | None = None,
) -> After:
    """Recover a copy of ``image`` (in memory; ``recovered`` names it, no
    file is written) and look at the result.  ``data``: the image already in
    memory; ``work``: two buffers to reuse for the copies (the first may be
    ``data`` itself, recovered in place when the caller is done with it).  With
    ``recover=False``, the file ``recovered`` is taken as some recovery's
    output as is (tests feed it the output of a deliberately broken
    recovery): it is then opened read-only and the DB-level facts are what a
    reader sees.

    The image-level facts come from the stored slot headers, not from the
    engine's choice: the FCC after recovery is the newest commit record left
    in the image (what the next open will trust), its transaction size is
    the one recorded there."""
    mem, again = work if work is not None else (MemIO(), MemIO())
    if not recover:
        mem.read_file(recovered)
    elif data is None:
        mem.read_file(image)
    elif data is not mem:
        with data.view() as v:
            mem.load(v)
    try:
        db = Database(recovered, "nolog" if nolog else "tc", readonly=not recover, io=mem)
    except DhlError as e:
        return After(error=_err(e))
    with db:
        info, rec = db.info(), db.recovery()
        try:
            db.check()
            integrity = "ok"
        except DhlError as e:
            integrity = _err(e)
        try:
            digest, scan_error = db.digest(), None
        except DhlError as e:
            digest, scan_error = None, _err(e)
        hs = stored_headers(db, mem)
    fcc, size, _ = newest_commit(hs) if not nolog else (info.fcc, 0, 0)
    above = tuple((h.pgno, s, h.tid[s]) for h in hs for s in range(2) if h.tid[s] > fcc)
    count_fcc = pages_with(hs, fcc, pagecount_at(hs, fcc)) if fcc else ()
    fcc_pages = pages_with(hs, fcc, mem.size) if fcc else ()
    count_newest = pages_with(hs, before.newest, mem.size) if before.newest > fcc else ()
    changed: tuple[int, ...] | None = None
    idem_error = None
    if idempotence and not nolog:  # run even when recovery wrote nothing: a check, not a guess
        changed, idem_error = _second_recovery(recovered, mem, again, info.page_size)
    return After(
        fcc=fcc,
        txn_size=size,
        engine_fcc=info.fcc,
        rolled_back=bool(rec.rolled_back),
        integrity=integrity,
        digest=digest,
        scan_error=scan_error,
        above_fcc=above,
        count_fcc=count_fcc,
        fcc_pages=fcc_pages,
        count_newest=count_newest,
        idempotent_changed=changed,
        idempotent_error=idem_error,
    )


def _second_recovery(
    recovered: Path, mem: MemIO, again: MemIO, page_size: int
) -> tuple[tuple[int, ...] | None, str | None]:
    """Recover a copy (``again``, labelled ``<recovered>.again``) of the
    recovered image ``mem``: which pages changed."""
    again.load_copy(mem)
    try:
        Database(recovered.with_name(recovered.name + ".again"), "tc", io=again).close()
    except DhlError as e:
        return None, _err(e)
    if not again.writes or again.same_as(mem):
        return (), None
    return _changed_pages(mem.data, again.data, page_size), None


def _changed_pages(a: bytes, b: bytes, page_size: int) -> tuple[int, ...]:
    """Pages (of ``page_size`` bytes; the last may be partial) that differ."""
    n = -(-max(len(a), len(b)) // page_size)
    return tuple(
        p
        for p in range(n)
        if a[p * page_size : (p + 1) * page_size] != b[p * page_size : (p + 1) * page_size]
    )


def examine(db_path: Path, *, blockdev: bool = False, vfs: str = "") -> DhlFacts:
    """Examine the crash image ``db_path`` before and after DHL recovery.
    ``db_path`` is read once and not modified: recovery runs on in-memory
    copies, labelled as files of a scratch folder beside it (``dhl-check/``)
    that is never created.  ``blockdev``: the image is the block device the
    SUT ran on, and the engine sees it as one (as the SUT's recovery did).
    ``vfs`` plays no part (DHL has no VFS layer)."""
    if not db_path.exists():
        return DhlFacts(exists=False)
    _IMAGE.read_file(db_path)
    return _examine_loaded(db_path, blockdev)


def examine_image(
    image: Callable[[Loadable], object], db_path: Path, *, blockdev: bool = False
) -> DhlFacts:
    """:func:`examine` of a database file that is not written anywhere:
    ``image(buffer)`` loads its bytes into ``buffer`` (``MemIO.load`` and
    ``MemIO.write``), and ``db_path`` only names it in messages (as if it
    were there: the facts are those :func:`examine` gives for such a file).
    The raw tier's fast path (harness/check/rawpath.py): a crash state's
    image goes from the durable image to the checks without a file."""
    image(_IMAGE)
    return _examine_loaded(db_path, blockdev)


def _examine_loaded(db_path: Path, blockdev: bool) -> DhlFacts:
    """:func:`examine` once the image of ``db_path`` is in ``_IMAGE``."""
    _IMAGE.blockdev = _AGAIN.blockdev = blockdev
    before, nolog = examine_before(db_path, _IMAGE)
    after = examine_after(
        db_path,
        db_path.parent / WORK / "recovered.db",
        before,
        nolog,
        data=_IMAGE,
        work=(_IMAGE, _AGAIN),
    )
    return DhlFacts(exists=True, nolog=nolog, before=before, after=after)


def native_examiner(durable: Path) -> NativeExaminer[DhlFacts] | None:
    """The native twin of :func:`examine_image` for a worker whose durable
    image is the file ``durable`` (``checkers/dhl_native.py``), or None when
    it is not built."""
    return dhl_native.NativeExaminer(durable) if dhl_native.available() else None


# --- judging -------------------------------------------------------------------


def _pages(pages: Sequence[int]) -> str:
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


def judge_inv(a: After) -> Verdict:
    if not a.above_fcc:
        return passed("DHL-INV", f"no slot header above FCC {a.fcc} after recovery")
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
    n = len(a.count_fcc)
    if n != a.txn_size:
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
    if trace is None:
        return passed(
            "CC-COUNT",
            f"{n} slot headers carry FCC {a.fcc}, as recorded "
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
    if len(wrote) != a.txn_size:
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
        f"{n} slot headers carry FCC {a.fcc}, as recorded and as the "
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
        judge_inv(a),
        judge_count(a, run_facts),
        judge_rollback(b, a, run_facts),
        judge_idempotent(a),
        judge_mono(a, run_facts, acked),
    ]


class DhlRunChecks:
    """DHL's checks of a whole run: the write trace's DHL-T2, CC-NEXT and
    CC-MONO and its :class:`RunFacts` (``checkers/dhl_trace.py``), and
    REC-CRASHSAFE (``checkers/recovery.py``)."""

    judge_run = staticmethod(dhl_trace.judge_run)

    def crashsafe(self, db: Path, work: Path, *, blockdev: bool) -> Verdict:
        return crashsafe_verdict(db, work, blockdev=blockdev)


class DhlChecker:
    """DHL's checker as the engine protocol (checkers/engines.py) has it:
    the functions above, the in-memory examination and its native twin, and
    the run-level checks."""

    IDS = IDS
    content_key = staticmethod(content_key)
    content_key_of: KeyOfPieces | None = None
    examine = staticmethod(examine)
    examine_image = staticmethod(examine_image)
    refused = staticmethod(refused)
    judge = staticmethod(judge)
    native_examiner = staticmethod(native_examiner)
    run_checks = DhlRunChecks()


CHECKER: EngineChecker[DhlFacts, RunFacts] = DhlChecker()
