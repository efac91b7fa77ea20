"""Trace-level DHL checkers: DHL-T2, CC-NEXT and CC-MONO, run once per
recorded run over the successive images of each database page in the log.

Every write entry of the log is mapped onto database pages; the slot headers
of each touched page before and after the write are decoded by libdhl
(``dhl_image_headers``).  The writing transaction W is the greatest new TID
the write puts into a slot header (transactions are serial: when W writes,
exactly the TIDs below W are committed).  Then:

* DHL-T2: a write may overwrite (change) only one slot header, and only one
  that holds nothing (INV), or an uncommitted one (TID >= W), or a committed
  one that is older than the page's other slot header, itself committed —
  never the only committed header, never the newer one.  And it may not
  change a byte a committed slot owns — its header, its offset-array
  entries, its records — as read by the independent decoder
  (``checkers.dhl_format``, from FORMAT.md): swapping two offsets of the
  committed slot, or writing a new record over one of its records, fails
  even when every TID looks right.  A write that only zeroes TIDs (an
  invalidation: recovery's, in a continuation's log) may zero only headers
  above the FCC the pages held before it;
* CC-NEXT: the overwritten header never has the TID of W's predecessor,
  the transaction that wrote before W (W - 1 unless a rollback made the
  engine skip TIDs; the first transaction's predecessor is the base
  image's FCC);
* CC-MONO: at every ``txn-ack`` mark, the FCC that recovery would choose
  from the pages as written so far (newest complete commit record) is not
  below the one at the previous ``txn-ack``.

Besides the three verdicts, the walk leaves per-run facts for the
per-state judges of ``checkers/dhl_judge.py`` (:class:`RunFacts`): the pages each
transaction stamped with its TID, and the transaction whose writes preceded
each ``txn-ack`` — facts of the log, not of the engine's counting.

The harness prepares the history of the database file (``harness/filetrace.py``:
replay, file-system recovery, block map); this module only decodes pages and
judges.  Discards are ignored (DHL never discards).  The page size and tree
count come from the final database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from checkers.dhl_facts import RunFacts, committed_fcc, open_image
from checkers.dhl_format import changed_bytes
from checkers.invariants import TRACE_LEVEL
from checkers.verdict import Verdict, failed, passed, skipped
from dhl.binding import DhlError, Headers, image_headers
from harness.filetrace import FileTrace, FileWrite

MAX_LISTED = 8
IDS = TRACE_LEVEL


@dataclass
class Finding:
    entry: int
    page: int
    text: str


@dataclass
class TraceResult:
    writes: int = 0  # page writes examined
    acks: int = 0
    t2: list[Finding] = field(default_factory=list)
    next: list[Finding] = field(default_factory=list)
    mono: list[Finding] = field(default_factory=list)
    fcc_at_ack: list[tuple[str, int]] = field(default_factory=list)
    current: int = 0  # the transaction writing now
    predecessor: int = 0  # the transaction that wrote before it
    # pages on which a write put TID T into a slot header, per T
    txn_pages: dict[int, set[int]] = field(default_factory=dict)
    # txn-ack:K -> the transaction writing when the mark came (its TID)
    ack_writer: dict[int, int] = field(default_factory=dict)


def _tid(t: int) -> str:
    return "0 (INV)" if t == 0 else str(t)


@dataclass(frozen=True)
class PageWrite:
    """One page as a log entry changed it: slot headers and bytes before
    and after."""

    pgno: int
    old: Headers
    new: Headers
    before: bytes
    after: bytes


class PageTrace:
    """The successive images of every database page, starting from the base
    image, advanced write by write."""

    def __init__(self, history: FileTrace, page_size: int, ntrees: int) -> None:
        self.history, self.ps, self.ntrees = history, page_size, ntrees
        self.pages: dict[int, bytearray] = {}
        self.headers: dict[int, Headers] = {}

    def page(self, pgno: int) -> bytearray:
        pg = self.pages.get(pgno)
        if pg is None:
            pg = bytearray(self.history.read_base(pgno * self.ps, self.ps))
            self.pages[pgno] = pg
            self.headers[pgno] = image_headers(bytes(pg), self.ps, pgno, self.ntrees)[0]
        return pg

    def write(self, w: FileWrite) -> list[PageWrite]:
        """Apply one log entry's write; one :class:`PageWrite` for every
        database page it touched."""
        touched: dict[int, tuple[Headers, bytes]] = {}
        for foff, data in w.pieces:
            pos, n = 0, len(data)
            while pos < n:
                pgno, inpage = divmod(foff + pos, self.ps)
                k = min(n - pos, self.ps - inpage)
                pg = self.page(pgno)
                touched.setdefault(pgno, (self.headers[pgno], bytes(pg)))
                pg[inpage : inpage + k] = data[pos : pos + k]
                pos += k
        out = []
        for pgno, (old, before) in touched.items():
            after = bytes(self.pages[pgno])
            new = image_headers(after, self.ps, pgno, self.ntrees)[0]
            self.headers[pgno] = new
            out.append(PageWrite(pgno, old, new, before, after))
        return out

    def base_headers(self) -> list[Headers]:
        """Headers of every page of the database in the base image (its
        header page's larger page count)."""
        self.page(0)
        for p in range(max(self.headers[0].aux)):
            self.page(p)
        return self.all_headers()

    def all_headers(self) -> list[Headers]:
        """Headers of pages 0..max known page, dense (unknown pages: read
        from the base image)."""
        top = max(self.pages, default=0)
        for p in range(top + 1):
            self.page(p)
        return [self.headers[p] for p in range(top + 1)]


def judge_bytes(
    entry: int, pw: PageWrite, res: TraceResult, ntrees: int, fcc_before: int | None
) -> None:
    """DHL-T2 at byte level: the committed slot(s) of the page keep every
    byte they own.  The slot the write gives a new non-zero TID is the one
    being written; ``fcc_before`` (zeroing writes only) is the FCC before
    the write."""
    old, new = pw.old, pw.new
    written = {s for s in range(2) if new.tid[s] and new.tid[s] != old.tid[s]}
    w = max((new.tid[s] for s in written), default=0)
    for s in range(2):
        o = old.tid[s]
        if not o or s in written:
            continue
        if new.tid[s] == 0 and o != 0:  # zeroed: an invalidation
            if fcc_before is not None and o <= fcc_before:
                res.t2.append(
                    Finding(
                        entry,
                        pw.pgno,
                        f"page {pw.pgno}: a write zeroed slot "
                        f"{s} of TID {o}, committed (FCC "
                        f"{fcc_before})",
                    )
                )
            continue
        if w and o >= w:
            continue  # not committed when W wrote: W may replace it
        what = changed_bytes(pw.before, pw.after, s, pw.pgno, ntrees)
        if what:
            by = f"transaction {w}" if w else "a write that set no TID"
            res.t2.append(
                Finding(
                    entry,
                    pw.pgno,
                    f"page {pw.pgno}: {by} changed bytes of the "
                    f"committed slot {s} (TID {o}): " + ", ".join(what[:4]),
                )
            )


def judge_write(
    entry: int, pgno: int, old: Headers, new: Headers, res: TraceResult, nolog: bool
) -> None:
    """DHL-T2 and CC-NEXT for one page write, at slot-header level."""
    changed = [
        s
        for s in range(2)
        if (old.tid[s], old.commit[s], old.aux[s]) != (new.tid[s], new.commit[s], new.aux[s])
    ]
    if not changed:
        return
    w = max(new.tid[s] for s in changed)
    if w == 0:
        return  # an invalidation: judged by judge_bytes
    if w > res.current:
        res.predecessor, res.current = res.current, w
    for s in changed:
        if new.tid[s]:
            res.txn_pages.setdefault(new.tid[s], set()).add(pgno)
    pred = res.predecessor if w == res.current else w - 1
    res.writes += 1
    where = "header page meta slot" if pgno == 0 else "slot header"
    if len(changed) == 2 and any(old.tid):
        # in NOLOG slot 1 is always zero: only slot 0 can change
        res.t2.append(
            Finding(
                entry,
                pgno,
                f"page {pgno}: transaction {w} rewrote both slot "
                f"headers (TIDs {_tid(old.tid[0])}, "
                f"{_tid(old.tid[1])} before)",
            )
        )
    for s in changed:
        o, v = old.tid[s], old.tid[1 - s]
        if new.tid[s] and o and new.tid[s] < o:
            res.t2.append(
                Finding(
                    entry,
                    pgno,
                    f"page {pgno}: {where} {s} went back from TID {o} "
                    f"to TID {new.tid[s]} (a stale page image)",
                )
            )
            continue
        if o and o == pred:
            res.next.append(
                Finding(
                    entry,
                    pgno,
                    f"page {pgno}: transaction {w} overwrote "
                    f"{where} {s} of TID {o} (its predecessor)",
                )
            )
        if o == 0 or o >= w or len(changed) == 2:
            continue  # nothing committed was there (or already reported above)
        v_committed = v != 0 and v < w
        if not v_committed:
            why = "INV" if v == 0 else f"TID {v}, uncommitted"
            res.t2.append(
                Finding(
                    entry,
                    pgno,
                    f"page {pgno}: transaction {w} overwrote {where} "
                    f"{s} (TID {o}), the only committed one — the "
                    f"other holds {why}",
                )
            )
        elif o > v:
            res.t2.append(
                Finding(
                    entry,
                    pgno,
                    f"page {pgno}: transaction {w} overwrote {where} "
                    f"{s} (TID {o}), the valid one, and kept the "
                    f"older TID {v}",
                )
            )


def trace_pages(
    history: FileTrace, page_size: int, ntrees: int, nolog: bool = False
) -> TraceResult:
    """Walk the file's history page by page and judge every page write."""
    res = TraceResult()
    tr = PageTrace(history, page_size, ntrees)
    last_fcc: tuple[str, int, int] | None = None  # (mark, entry, fcc)
    res.current = committed_fcc(tr.base_headers()) if not nolog else 0
    for e in history.events():
        if not isinstance(e, FileWrite):
            if not e.label.startswith("txn-ack:"):
                continue
            res.acks += 1
            if nolog:
                continue
            res.ack_writer[int(e.label.split(":", 1)[1])] = res.current
            fcc = committed_fcc(tr.all_headers())
            res.fcc_at_ack.append((e.label, fcc))
            if last_fcc is not None and fcc < last_fcc[2]:
                res.mono.append(
                    Finding(
                        e.entry,
                        0,
                        (
                            f"at {e.label} (entry {e.entry}) the committed FCC is {fcc}, below "
                            f"{last_fcc[2]} at {last_fcc[0]} (entry {last_fcc[1]})"
                        ),
                    )
                )
            last_fcc = (e.label, e.entry, fcc)
            continue
        pws = tr.write(e)
        fcc_before = None
        if not nolog and any(pw.new.tid[s] == 0 != pw.old.tid[s] for pw in pws for s in range(2)):
            olds = {pw.pgno: pw.old for pw in pws}
            fcc_before = committed_fcc([olds.get(h.pgno, h) for h in tr.all_headers()])
        for pw in pws:
            judge_write(e.entry, pw.pgno, pw.old, pw.new, res, nolog)
            if not nolog:
                judge_bytes(e.entry, pw, res, ntrees, fcc_before)
    return res


def run_facts(res: TraceResult) -> RunFacts:
    return RunFacts({t: frozenset(p) for t, p in res.txn_pages.items()}, dict(res.ack_writer))


def _entries(fs: Sequence[Finding]) -> list[str]:
    return [f"entry {f.entry} (page {f.page})" for f in fs[:MAX_LISTED]]


def verdicts(res: TraceResult, nolog: bool = False) -> list[Verdict]:
    """The three trace verdicts of one run."""
    out = []
    for inv, found, ok in (
        (
            "DHL-T2",
            res.t2,
            f"all {res.writes} page writes overwrote only an empty, uncommitted "
            "or older committed slot header",
        ),
        (
            "CC-NEXT",
            res.next,
            f"no page write of transaction T+1 overwrote a header of T ({res.writes} writes)",
        ),
    ):
        if not found:
            out.append(passed(inv, ok, actual=res.writes))
        else:
            more = f" ({len(found) - 1} more such writes)" if len(found) > 1 else ""
            out.append(
                failed(
                    inv,
                    f"log entry {found[0].entry}: {found[0].text}{more}",
                    actual=len(found),
                    implicated=_entries(found),
                )
            )
    if nolog:
        out.append(skipped("CC-MONO", "NOLOG database: no FCC per transaction"))
    elif res.mono:
        f = res.mono[0]
        out.append(
            failed(
                "CC-MONO",
                f.text,
                expected="non-decreasing",
                actual=[x for _, x in res.fcc_at_ack][:64],
                implicated=[f"entry {m.entry}" for m in res.mono[:MAX_LISTED]],
            )
        )
    else:
        fccs = [x for _, x in res.fcc_at_ack]
        span = f"{fccs[0]}..{fccs[-1]}" if fccs else "no acknowledged transaction"
        out.append(
            passed(
                "CC-MONO",
                f"committed FCC never decreased over {res.acks} acknowledgements ({span})",
                actual=len(fccs),
            )
        )
    return out


# --- a recorded run ------------------------------------------------------------


def judge_run(history: FileTrace | str) -> tuple[list[Verdict], RunFacts | None]:
    """DHL-T2, CC-NEXT and CC-MONO for a recorded DHL run, from its database
    file's history (or the reason the harness could not prepare one), and
    the run's :class:`RunFacts` (None where there is no trace, and for
    NOLOG, which has no FCC).  A final database the engine cannot open (the
    workload ran to its end: a correct SUT always leaves an openable
    database) fails all three, with the reason: a broken SUT gets verdicts,
    never an exception."""
    if isinstance(history, str):
        return [skipped(i, history) for i in IDS], None
    try:
        db, nolog = open_image(history.final, readonly=True)
        with db:
            info = db.info()
        res = trace_pages(history, info.page_size, info.ntrees, nolog)
    except DhlError as e:
        why = f"the run's final image cannot be opened, so its pages cannot be traced: {e}"
        return [failed(i, why) for i in IDS], None
    return verdicts(res, nolog), None if nolog else run_facts(res)
