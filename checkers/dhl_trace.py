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

Mapping log blocks to database pages:

* raw-device runs (meta fs ``raw``): page n is at byte n × page size;
* file-backed runs (ext4): the database file's extents are read with
  ``debugfs stat`` from the run's final image after journal replay, and
  device bytes map to file offsets through them.  Limits: the map is the
  final one — blocks the file held only earlier (none for DHL, which never
  truncates or frees pages) are not seen, and a block written before the
  file owned it would be misread as a page write (the recorded file system
  starts empty, so such writes are zeroing at most).  Other file systems
  (xfs, btrfs) are not mapped: the checker says so (skip).

Discards are ignored (DHL never discards).  The page size and tree count
come from the final database.
"""

from __future__ import annotations

import bisect
import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from checkers.dhl import committed_fcc, open_image
from checkers.dhl_format import changed_bytes
from checkers.invariants import TRACE_LEVEL
from checkers.verdict import Verdict, failed, passed, skipped
from dhl.binding import DhlError, Headers, image_headers
from harness.env import work_folder
from harness.explain.ext4 import _extents, debugfs
from harness.images import verified_base_for_run
from harness.logformat import LogReader
from harness.recover.fs import recover_fs
from harness.replay import replay
from harness.rundir import RunDir

MAX_LISTED = 8
IDS = TRACE_LEVEL


@dataclass(frozen=True)
class PageMap:
    """Device byte ranges that hold database file bytes:
    ``(dev_start, dev_end, file_start)`` sorted by ``dev_start``."""

    spans: tuple[tuple[int, int, int], ...]

    @classmethod
    def identity(cls, size: int) -> PageMap:
        return cls(((0, size, 0),))

    def pieces(self, dev_off: int, length: int) -> Iterator[tuple[int, int, int]]:
        """``(file_off, start_in_data, n)`` for the parts of the device range
        ``[dev_off, dev_off + length)`` that hold database bytes."""
        starts = [s[0] for s in self.spans]
        i = max(0, bisect.bisect_right(starts, dev_off) - 1)
        end = dev_off + length
        while i < len(self.spans) and self.spans[i][0] < end:
            a, b, f = self.spans[i]
            lo, hi = max(a, dev_off), min(b, end)
            if lo < hi:
                yield f + (lo - a), lo - dev_off, hi - lo
            i += 1

    def device_ranges(self, file_off: int, length: int) -> Iterator[tuple[int, int, int]]:
        """``(dev_off, start_in_page, n)`` for a file byte range."""
        end = file_off + length
        for a, b, f in self.spans:
            fa, fb = f, f + (b - a)
            lo, hi = max(fa, file_off), min(fb, end)
            if lo < hi:
                yield a + (lo - fa), lo - file_off, hi - lo


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

    def __init__(self, base: Path, pmap: PageMap, page_size: int, ntrees: int,
                 nolog: bool = False) -> None:
        self.base_fd = os.open(base, os.O_RDONLY)
        self.pmap, self.ps, self.ntrees, self.nolog = pmap, page_size, ntrees, nolog
        self.pages: dict[int, bytearray] = {}
        self.headers: dict[int, Headers] = {}

    def close(self) -> None:
        os.close(self.base_fd)

    def page(self, pgno: int) -> bytearray:
        pg = self.pages.get(pgno)
        if pg is None:
            pg = bytearray(self.ps)
            for dev, at, n in self.pmap.device_ranges(pgno * self.ps, self.ps):
                pg[at:at + n] = os.pread(self.base_fd, n, dev).ljust(n, b"\0")  # past the end: 0
            self.pages[pgno] = pg
            self.headers[pgno] = image_headers(bytes(pg), self.ps, pgno, self.ntrees)[0]
        return pg

    def write(self, dev_off: int, data: bytes) -> list[PageWrite]:
        """Apply one device write; one :class:`PageWrite` for every database
        page it touched."""
        touched: dict[int, tuple[Headers, bytes]] = {}
        for foff, at, n in self.pmap.pieces(dev_off, len(data)):
            pos = 0
            while pos < n:
                pgno, inpage = divmod(foff + pos, self.ps)
                k = min(n - pos, self.ps - inpage)
                pg = self.page(pgno)
                touched.setdefault(pgno, (self.headers[pgno], bytes(pg)))
                pg[inpage:inpage + k] = data[at + pos:at + pos + k]
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


def judge_bytes(entry: int, pw: PageWrite, res: TraceResult, ntrees: int,
                fcc_before: int | None) -> None:
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
                res.t2.append(Finding(entry, pw.pgno, f"page {pw.pgno}: a write zeroed slot "
                                                      f"{s} of TID {o}, committed (FCC "
                                                      f"{fcc_before})"))
            continue
        if w and o >= w:
            continue  # not committed when W wrote: W may replace it
        what = changed_bytes(pw.before, pw.after, s, pw.pgno, ntrees)
        if what:
            by = f"transaction {w}" if w else "a write that set no TID"
            res.t2.append(Finding(entry, pw.pgno, f"page {pw.pgno}: {by} changed bytes of the "
                                                  f"committed slot {s} (TID {o}): "
                                                  + ", ".join(what[:4])))


def judge_write(entry: int, pgno: int, old: Headers, new: Headers, res: TraceResult,
                nolog: bool) -> None:
    """DHL-T2 and CC-NEXT for one page write, at slot-header level."""
    changed = [s for s in range(2) if (old.tid[s], old.commit[s], old.aux[s])
               != (new.tid[s], new.commit[s], new.aux[s])]
    if not changed:
        return
    w = max(new.tid[s] for s in changed)
    if w == 0:
        return  # an invalidation: judged by judge_bytes
    if w > res.current:
        res.predecessor, res.current = res.current, w
    pred = res.predecessor if w == res.current else w - 1
    res.writes += 1
    where = "header page meta slot" if pgno == 0 else "slot header"
    if len(changed) == 2 and any(old.tid):
        # in NOLOG slot 1 is always zero: only slot 0 can change
        res.t2.append(Finding(entry, pgno, f"page {pgno}: transaction {w} rewrote both slot "
                                           f"headers (TIDs {_tid(old.tid[0])}, "
                                           f"{_tid(old.tid[1])} before)"))
    for s in changed:
        o, v = old.tid[s], old.tid[1 - s]
        if new.tid[s] and o and new.tid[s] < o:
            res.t2.append(Finding(entry, pgno, f"page {pgno}: {where} {s} went back from TID {o} "
                                               f"to TID {new.tid[s]} (a stale page image)"))
            continue
        if o and o == pred:
            res.next.append(Finding(entry, pgno, f"page {pgno}: transaction {w} overwrote "
                                                 f"{where} {s} of TID {o} (its predecessor)"))
        if o == 0 or o >= w or len(changed) == 2:
            continue  # nothing committed was there (or already reported above)
        v_committed = v != 0 and v < w
        if not v_committed:
            why = "INV" if v == 0 else f"TID {v}, uncommitted"
            res.t2.append(Finding(entry, pgno, f"page {pgno}: transaction {w} overwrote {where} "
                                               f"{s} (TID {o}), the only committed one — the "
                                               f"other holds {why}"))
        elif o > v:
            res.t2.append(Finding(entry, pgno, f"page {pgno}: transaction {w} overwrote {where} "
                                               f"{s} (TID {o}), the valid one, and kept the "
                                               f"older TID {v}"))


def trace_log(log: Path, base: Path, pmap: PageMap, page_size: int, ntrees: int,
              nolog: bool = False) -> TraceResult:
    """Walk ``log`` over the database pages of ``base`` (through ``pmap``)."""
    res = TraceResult()
    tr = PageTrace(base, pmap, page_size, ntrees, nolog)
    last_fcc: tuple[str, int, int] | None = None  # (mark, entry, fcc)
    try:
        res.current = committed_fcc(tr.base_headers()) if not nolog else 0
        with LogReader(log) as reader:
            ss = reader.sectorsize
            for e in reader.entries():
                if e.is_mark and e.label and e.label.startswith("txn-ack:"):
                    res.acks += 1
                    if nolog:
                        continue
                    fcc = committed_fcc(tr.all_headers())
                    res.fcc_at_ack.append((e.label, fcc))
                    if last_fcc is not None and fcc < last_fcc[2]:
                        res.mono.append(Finding(e.index, 0, (
                            f"at {e.label} (entry {e.index}) the committed FCC is {fcc}, below "
                            f"{last_fcc[2]} at {last_fcc[0]} (entry {last_fcc[1]})")))
                    last_fcc = (e.label, e.index, fcc)
                    continue
                if not e.has_payload:
                    continue
                pws = tr.write(e.sector * ss, reader.payload(e))
                fcc_before = None
                if not nolog and any(pw.new.tid[s] == 0 != pw.old.tid[s]
                                     for pw in pws for s in range(2)):
                    olds = {pw.pgno: pw.old for pw in pws}
                    fcc_before = committed_fcc([olds.get(h.pgno, h) for h in tr.all_headers()])
                for pw in pws:
                    judge_write(e.index, pw.pgno, pw.old, pw.new, res, nolog)
                    if not nolog:
                        judge_bytes(e.index, pw, res, ntrees, fcc_before)
    finally:
        tr.close()
    return res


def _entries(fs: Sequence[Finding]) -> list[str]:
    return [f"entry {f.entry} (page {f.page})" for f in fs[:MAX_LISTED]]


def verdicts(res: TraceResult, nolog: bool = False) -> list[Verdict]:
    """The three trace verdicts of one run."""
    out = []
    for inv, found, ok in (
        ("DHL-T2", res.t2, f"all {res.writes} page writes overwrote only an empty, uncommitted "
                           "or older committed slot header"),
        ("CC-NEXT", res.next, f"no page write of transaction T+1 overwrote a header of T "
                              f"({res.writes} writes)"),
    ):
        if not found:
            out.append(passed(inv, ok, actual=res.writes))
        else:
            more = f" ({len(found) - 1} more such writes)" if len(found) > 1 else ""
            out.append(failed(inv, f"log entry {found[0].entry}: {found[0].text}{more}",
                              actual=len(found), implicated=_entries(found)))
    if nolog:
        out.append(skipped("CC-MONO", "NOLOG database: no FCC per transaction"))
    elif res.mono:
        f = res.mono[0]
        out.append(failed("CC-MONO", f.text, expected="non-decreasing",
                          actual=[x for _, x in res.fcc_at_ack][:64],
                          implicated=[f"entry {m.entry}" for m in res.mono[:MAX_LISTED]]))
    else:
        fccs = [x for _, x in res.fcc_at_ack]
        span = f"{fccs[0]}..{fccs[-1]}" if fccs else "no acknowledged transaction"
        out.append(passed("CC-MONO", f"committed FCC never decreased over {res.acks} "
                                     f"acknowledgements ({span})", actual=len(fccs)))
    return out


# --- a recorded run ------------------------------------------------------------


def ext4_map(image: Path, file_path: str, block_size: int = 4096) -> PageMap:
    """Device ranges of ``file_path`` in the (journal-replayed) ext4 image."""
    ext, _ = _extents(debugfs(image, [f"stat {file_path}"]))
    spans = sorted((p * block_size, (p + n) * block_size, lb * block_size) for lb, p, n in ext)
    return PageMap(tuple(spans))


def _block_size(image: Path) -> int:
    for line in debugfs(image, ["stats"]).splitlines():
        if line.startswith("Block size:"):
            return int(line.split(":")[1])
    return 4096


def trace_verdicts(run: RunDir, workdir: Path | None = None) -> list[Verdict]:
    """DHL-T2, CC-NEXT and CC-MONO for a recorded DHL run (any SUT with
    engine "dhl"); the final image is rebuilt in a scratch folder.  A final
    image the engine cannot open (the workload ran to its end: a correct SUT
    always leaves an openable database) fails all three, with the reason:
    a broken SUT gets verdicts, never an exception."""
    try:
        return _trace_verdicts(run, workdir)
    except DhlError as e:
        why = f"the run's final image cannot be opened, so its pages cannot be traced: {e}"
        return [failed(i, why) for i in IDS]


def _trace_verdicts(run: RunDir, workdir: Path | None) -> list[Verdict]:
    meta = run.meta()
    fs, db_name = meta["fs"], meta["db"]
    if fs not in ("raw", "ext4"):
        why = f"no block-to-page map for {fs} (raw and ext4 only)"
        return [skipped(i, why) for i in IDS]
    base = verified_base_for_run(run)
    own = workdir is None
    work = work_folder("crashlab-trace-") if own else workdir
    try:
        final = work / "final.img"
        replay(base, run.log, final)
        files = work / "files"
        pmap: PageMap | None = None
        if fs == "raw":
            pmap = PageMap.identity(os.path.getsize(final))
        rec = recover_fs(fs, final, files, workdir=work, db_name=db_name, fsck=False)
        if not rec.ok:
            return [skipped(i, f"the final image does not recover: {rec.detail}") for i in IDS]
        if fs == "ext4":
            pmap = ext4_map(final, "/" + db_name, _block_size(final))
        assert pmap is not None
        db, nolog = open_image(files / db_name, readonly=True)
        with db:
            info = db.info()
        res = trace_log(run.log, base, pmap, info.page_size, info.ntrees, nolog)
        return verdicts(res, nolog)
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)
