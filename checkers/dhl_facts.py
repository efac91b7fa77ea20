"""The DHL facts: what the checkers learn of a crash image and of a run's
write trace, and how both read an image's stored slot headers.

* :class:`DhlFacts` (:class:`Before` and :class:`After` DHL recovery): what
  ``checkers/dhl_examine.py`` examines of one image, in Python, and what
  ``checkers/dhl_native.py`` takes of it in one C call;
  ``checkers/dhl_judge.py`` judges them;
* :class:`RunFacts`: what the write trace says of a run
  (``checkers/dhl_trace.py`` finds them, ``checkers/dhl_judge.py`` judges
  with them);
* :func:`open_image` and the commit-record reading of stored slot headers
  (:func:`committed_fcc`, :func:`newest_commit`, ...), shared by the
  per-state examination and the trace walk.

Below the modules that use it: it imports none of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dhl.binding import Database, Headers, MemIO, valid_slot

NOLOG_FLAG = 1  # dhl.h DHL_FLAG_NOLOG: the header flag of a NOLOG database


@dataclass(frozen=True)
class Before:
    """The crash image as stored, read without recovery."""

    error: str | None = None  # the read-only open failed (no committed state found)
    fcc: int = 0  # the committed FCC the read rule uses
    newest: int = 0  # TID of the newest commit record
    newest_size: int = 0  # its recorded transaction size
    newest_count: int = 0  # slot headers carrying that TID
    newest_pages: tuple[int, ...] = ()  # every page carrying that TID, whatever the page count
    previous: int = 0  # TID of the newest commit record below it (what a rollback returns to)
    # slot headers with a TID above the newest commit record's: pages of a
    # transaction whose commit record did not persist (thesis Fig. 5(b))
    above_newest: int = 0
    # reachable pages with no committed slot header: (page, parent, tid0, tid1)
    t1_missing: tuple[tuple[int, int, int, int], ...] = ()
    reached: int = 0
    digest: str | None = None  # content read through the read rule
    read_error: str | None = None  # reading the content failed
    # the same, read by the independent decoder (checkers/dhl_format.py)
    indep_fcc: int = 0
    indep_digest: str | None = None
    indep_error: str | None = None
    indep_no_committed: tuple[int, ...] = ()

    @property
    def short(self) -> bool:
        """The newest commit record does not match its count of slot
        headers (fewer, or more: recovery rolls back on any mismatch)."""
        return self.newest_size > 0 and self.newest_count != self.newest_size


@dataclass(frozen=True)
class After:
    """The copy after DHL recovery, and what recovery reported."""

    error: str | None = None  # open (= recovery) failed
    fcc: int = 0  # the newest commit record left in the image
    txn_size: int = 0  # the transaction size recorded there
    engine_fcc: int = 0  # the FCC the engine reads at
    rolled_back: bool = False
    integrity: str | None = None  # "ok" or dhl_check's complaint
    digest: str | None = None
    scan_error: str | None = None
    above_fcc: tuple[tuple[int, int, int], ...] = ()  # (page, slot, tid) with tid > fcc
    count_fcc: tuple[int, ...] = ()  # pages holding a slot header with TID == fcc
    fcc_pages: tuple[int, ...] = ()  # every page carrying TID fcc, whatever the page count
    count_newest: tuple[int, ...] = ()  # pages still holding the pre-recovery newest TID
    idempotent_changed: tuple[int, ...] | None = None  # pages a second recovery changed
    idempotent_error: str | None = None


@dataclass(frozen=True)
class DhlFacts:
    exists: bool
    nolog: bool = False
    before: Before = field(default_factory=Before)
    after: After = field(default_factory=After)


@dataclass(frozen=True)
class RunFacts:
    """What the write trace says of a run, for judging its crash states
    without the engine's own counting: the pages each transaction stamped
    with its TID (``txn_pages``; a transaction older than the log is not
    there: the trace cannot say which pages it wrote), and the TID written
    just before each ``txn-ack:K`` (``ack_writer``)."""

    txn_pages: dict[int, frozenset[int]]
    ack_writer: dict[int, int]

    def writer_at(self, acked: int) -> int | None:
        """The TID behind the newest acknowledgement at or below
        transaction ``acked`` that this log holds (None: none)."""
        ks = [k for k in self.ack_writer if k <= acked]
        return self.ack_writer[max(ks)] if ks else None


# --- reading images ------------------------------------------------------------


def open_image(path: Path, **kw: object) -> tuple[Database, bool]:
    """Open a DHL image in the mode it was created for (``auto``; the mode
    only matters for writing transactions, recovery is the format's):
    ``(db, nolog)``."""
    db = Database(path, "auto", **kw)  # type: ignore[arg-type]  # **kw passes Database's options through
    return db, bool(db.info().flags & NOLOG_FLAG)


def stored_headers(db: Database, image: MemIO) -> list[Headers]:
    """The slot headers of ``image`` (opened as ``db``) as stored, in page
    order, all-zero pages left out (see the module docstring)."""
    i = db.info()
    return image.headers(i.page_size, i.ntrees, nonzero=True)


def pagecount_at(hs: Sequence[Headers], tid: int) -> int:
    """The page count transaction ``tid`` saw: the meta slot with the
    greatest TID <= tid (the read rule applied to page 0)."""
    if not hs or hs[0].pgno != 0:
        return 0  # page 0 all zero: no meta slot
    s = valid_slot(hs[0].tid[0], hs[0].tid[1], tid)
    return hs[0].aux[s] if s >= 0 else 0


def pages_with(hs: Sequence[Headers], tid: int, limit: int) -> tuple[int, ...]:
    """One entry per slot header carrying ``tid`` (not INV) in pages below
    ``limit``; ``hs`` in page order, pages may be left out."""
    return tuple(h.pgno for h in hs if h.pgno < limit for t in h.tid if t == tid)


def inplace(hs: Sequence[Headers]) -> tuple[int, int] | None:
    """The one commit record ``(FCC, size)`` of a database in the thesis's
    format (dhl/FORMAT.md, "The thesis's format"), None for the engine's."""
    return hs[0].inplace if hs and hs[0].pgno == 0 else None


def _count(hs: Sequence[Headers], tid: int) -> int:
    """Slot headers carrying ``tid`` below the page count it saw."""
    return len(pages_with(hs, tid, pagecount_at(hs, tid)))


def newest_commit(hs: Sequence[Headers]) -> tuple[int, int, int]:
    """``(tid, size, count)`` of the newest commit record — a slot header with
    a non-zero commit field in a page below the page count its transaction
    saw; the thesis's format: its one in-place record, size 0 when not
    counted — and how many slot headers carry its TID (below that page
    count)."""
    one = inplace(hs)
    if one is not None:
        return (one[0], one[1], _count(hs, one[0])) if one[0] else (0, 0, 0)
    best = (0, 0)
    for h in hs:
        for s in range(2):
            t, c = h.tid[s], h.commit[s]
            if t and c and t > best[0] and h.pgno < pagecount_at(hs, t):
                best = (t, c)
    if not best[0]:
        return 0, 0, 0
    return best[0], best[1], _count(hs, best[0])


def previous_commit(hs: Sequence[Headers], below: int) -> int:
    """The TID of the newest commit record older than ``below`` (0: none).
    TIDs need not be consecutive: after a rollback the next transaction
    takes a TID above the rolled-back one.  In the thesis's format they
    are (the next TID is FCC + 1), and the one in-place record that a
    rollback restores is ``below - 1``'s."""
    if inplace(hs) is not None:
        return max(0, below - 1)
    return max(
        (
            h.tid[s]
            for h in hs
            for s in range(2)
            if 0 < h.tid[s] < below and h.commit[s] and h.pgno < pagecount_at(hs, h.tid[s])
        ),
        default=0,
    )


def committed_fcc(hs: Sequence[Headers]) -> int:
    """The FCC recovery would choose from these stored headers: the newest
    commit record whose count of slot headers is complete (0: none); in the
    thesis's format its one record when complete or not counted, else the
    TID before it (a short count rolls back by one)."""
    one = inplace(hs)
    if one is not None:
        fcc, size = one
        count = _count(hs, fcc) if fcc else 0
        return fcc if not size or count == size else fcc - 1 if count < size else 0
    cands = sorted(
        {
            (h.tid[s], h.commit[s])
            for h in hs
            for s in range(2)
            if h.tid[s] and h.commit[s] and h.pgno < pagecount_at(hs, h.tid[s])
        },
        reverse=True,
    )
    for tid, size in cands:
        if _count(hs, tid) == size:
            return tid
    return 0
