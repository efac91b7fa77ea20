"""Explain one crash state: its epoch and cut, the marks around the cut,
and every write of the epoch (kept, dropped, torn, after the cut) with what
it hit on the device, by file system."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from harness.explain.dhl import DhlExplainer
from harness.explain.ext4 import Ext4Explainer, journal_map, journal_superblock, read_layout
from harness.explain.xfs import XfsExplainer
from harness.logformat import Entry, LogReader
from harness.materialize import DurableImage, sparse_copy
from harness.recover.fs import recover_ext4
from harness.states import State
from harness.states.model import item_extents

DB_PAGE_SIZE = 4096


class Explainer(Protocol):
    def explain(self, writes: Sequence[tuple[int, bytes]]) -> list[list[str]]: ...


@dataclass
class WriteInfo:
    """One write of the state's epoch."""

    write: int  # epoch-relative number (as in state IDs)
    entry: int  # log entry index
    status: str  # "kept", "dropped", "torn", "after cut"
    offset: int  # device byte offset
    length: int
    flags: str  # "FUA", "DISCARD", "PREFLUSH" ...
    persisted: tuple[tuple[int, int], ...] = ()  # torn: byte ranges kept, relative
    what: list[str] = field(default_factory=list)


@dataclass
class Explanation:
    state_id: str
    epoch: int
    epoch_start: int
    epoch_end: int
    closed: bool
    cut_lo: int
    cut_hi: int
    acked: int
    begun: int
    in_flight: int | None
    marks: list[tuple[int, str]]  # (entry index, label) around the cut
    writes: list[WriteInfo]
    notes: list[str] = field(default_factory=list)


def _flags(e: Entry) -> str:
    out = []
    if e.is_flush:
        out.append("PREFLUSH")
    if e.is_fua:
        out.append("FUA")
    if e.is_discard:
        out.append("DISCARD")
    return "+".join(out)


def marks_around(reader: LogReader, lo: int, hi: int, context: int = 2
                 ) -> tuple[list[tuple[int, str]], list[int]]:
    """The marks between entries ``lo`` and ``hi`` plus ``context`` on each
    side, and every FLUSH entry index of the log (one pass, no payloads)."""
    before: list[tuple[int, str]] = []
    inside: list[tuple[int, str]] = []
    after: list[tuple[int, str]] = []
    flushes: list[int] = []
    for e in reader.entries():
        if e.is_flush:
            flushes.append(e.index)
        if not e.is_mark:
            continue
        m = (e.index, e.label or "")
        if e.index < lo:
            before = (before + [m])[-context:]
        elif e.index <= hi:
            inside.append(m)
        elif len(after) < context:
            after.append(m)
    return before + inside + after, flushes


def classify(state: State) -> list[WriteInfo]:
    """Every write of the state's epoch with its status."""
    kept = set(state.kept_entries)
    dropped = set(state.dropped_entries)
    torn = dict(state.torn_entries)
    s = state.epoch.sectorsize
    out = []
    for w, e in enumerate(state.epoch.writes):
        if e.index in kept:
            status = "kept"
        elif e.index in torn:
            status = "torn"
        elif e.index in dropped:
            status = "dropped"
        else:
            status = "after cut"
        out.append(WriteInfo(w, e.index, status, e.sector * s, e.nr_sectors * s, _flags(e),
                             torn.get(e.index, ())))
    return out


def _write_data(reader: LogReader, e: Entry) -> bytes:
    return next(item_extents(reader, e, -1))[1]


def ext4_explainer(reader: LogReader, base: Path, recovered: Path | None, state: State,
                   flushes: list[int], db_name: str, workdir: Path) -> Ext4Explainer:
    """Views: the state's recovered image, the run two flushes after the
    state's epoch, and the end of the run (each journal-replayed)."""
    layout = read_layout(base)
    views: list[tuple[str, Path]] = []
    if recovered is not None and recovered.exists():
        views.append(("this state", recovered))
    later = [f for f in flushes if f > state.epoch.end]
    positions = [(later[1] + 1 if len(later) > 1 else reader.nr_entries, "a later flush"),
                 (reader.nr_entries, "the end of the run")]
    (workdir / "views").mkdir(parents=True, exist_ok=True)
    img = DurableImage(base, reader.path, workdir / "views")
    try:
        for pos, what in positions:
            if any(label.endswith(f"entry {pos}") for label, _ in views):
                continue
            img.advance(pos)
            path = workdir / f"view-{pos}.img"
            sparse_copy(img.path, path)
            recover_ext4(path, workdir / f"view-{pos}-files", check=False)
            shutil.rmtree(workdir / f"view-{pos}-files", ignore_errors=True)
            views.append((f"{what}, entry {pos}", path))
    finally:
        img.close()
    jsb = None
    for _, v in views:
        jsb = journal_superblock(layout, v)
        if jsb is not None:
            break
    bs = layout.block_size
    jwrites = (
        (e.sector * reader.sectorsize, _write_data(reader, e))
        for e in reader.entries()
        if e.index <= state.epoch.end and e.is_write and e.has_payload
        and layout.journal_block(e.sector * reader.sectorsize // bs) is not None
    )
    jmap = journal_map(layout, jsb, jwrites)
    return Ext4Explainer(layout, views, db_name, DB_PAGE_SIZE, jsb, jmap)


class RangeExplainer:
    """File systems crashlab cannot yet map (xfs, btrfs): byte ranges only."""

    def __init__(self, fs: str) -> None:
        self.fs = fs

    def explain(self, writes: Sequence[tuple[int, bytes]]) -> list[list[str]]:
        return [[f"{self.fs} bytes {o}..{o + len(d)} (4 KiB block {o // 4096})"]
                for o, d in writes]


def explain_state(reader: LogReader, state: State, *, fs: str, base: Path,
                  crash_image: Path, recovered: Path | None, db_name: str, workdir: Path,
                  dhl_mode: str = "tc") -> Explanation:
    """Explain ``state`` of the log in ``reader``; ``crash_image`` is its
    image before recovery, ``recovered`` after file-system recovery."""
    workdir.mkdir(parents=True, exist_ok=True)
    marks, flushes = marks_around(reader, state.cut.lo, state.cut.hi)
    writes = classify(state)
    notes: list[str] = []
    explainer: Explainer
    if fs == "ext4":
        explainer = ext4_explainer(reader, base, recovered, state, flushes, db_name, workdir)
        if explainer.jsb is None:
            notes.append("jbd2 superblock unreadable: journal blocks not decoded")
    elif fs == "raw":
        dx = DhlExplainer(crash_image, workdir, dhl_mode)
        notes.append(dx.header())
        explainer = dx
    elif fs == "xfs" and recovered is not None and recovered.exists():
        explainer = XfsExplainer(recovered, db_name, DB_PAGE_SIZE)
        notes.append("xfs: blocks as xfs_db sees them in this state's recovered image")
    else:
        explainer = RangeExplainer(fs)
        notes.append(f"{fs}: writes are shown as byte ranges only (no block map for {fs})")
    entries = state.epoch.writes
    data = [(w.offset, _write_data(reader, entries[w.write])) for w in writes]
    for w, what in zip(writes, explainer.explain(data), strict=True):
        w.what = what
    c = state.cut
    return Explanation(state.id, state.epoch.index, state.epoch.start, state.epoch.end,
                       state.epoch.closed, c.lo, c.hi, c.acked, c.begun, c.in_flight, marks,
                       writes, notes)
