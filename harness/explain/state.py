"""Explain one crash state: its epoch and cut, the marks around the cut,
and every write of the epoch (kept, dropped, torn, after the cut) with what
it hit on the device, by file system."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.explain.context import ExplainContext, Explainer, ExplainsWrites, write_data
from harness.faults import FAULT_MARK_PREFIX
from harness.logformat import Entry, LogReader
from harness.marks import TXN_ERROR
from harness.states import State
from harness.states.stateid import UNIT


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
    # the errors before the crash: the device's failed requests (fault:...)
    # and the transactions that failed (txn-error:K), each with its entry
    errors: list[tuple[int, str]] = field(default_factory=list)


def _flags(e: Entry) -> str:
    out = []
    if e.is_flush:
        out.append("PREFLUSH")
    if e.is_fua:
        out.append("FUA")
    if e.is_discard:
        out.append("DISCARD")
    return "+".join(out)


def marks_around(
    reader: LogReader, lo: int, hi: int, context: int = 2
) -> tuple[list[tuple[int, str]], list[int], list[tuple[int, str]]]:
    """The marks between entries ``lo`` and ``hi`` plus ``context`` on each
    side, every FLUSH entry index of the log, and the error marks before
    ``hi`` (a device's ``fault:...``, a runner's ``txn-error:K``) — one pass,
    no payloads."""
    before: list[tuple[int, str]] = []
    inside: list[tuple[int, str]] = []
    after: list[tuple[int, str]] = []
    flushes: list[int] = []
    errors: list[tuple[int, str]] = []
    for e in reader.entries():
        if e.is_flush:
            flushes.append(e.index)
        if not e.is_mark:
            continue
        m = (e.index, e.label or "")
        if e.index < hi and m[1].startswith((FAULT_MARK_PREFIX, TXN_ERROR + ":")):
            errors.append(m)
        if e.index < lo:
            before = (before + [m])[-context:]
        elif e.index <= hi:
            inside.append(m)
        elif len(after) < context:
            after.append(m)
    return before + inside + after, flushes, errors


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
        out.append(
            WriteInfo(
                w, e.index, status, e.sector * s, e.nr_sectors * s, _flags(e), torn.get(e.index, ())
            )
        )
    return out


def _fault_notes(
    state: State, reader: LogReader, crash_image: Path, explainer: Explainer
) -> list[str]:
    """The state's faults in words (:meth:`State.fault_notes`), each
    misdirect and corrupt one with what its bytes hit on the device."""
    victim = state.victim(reader)
    notes = state.fault_notes(victim)
    key = state.key
    out = [n for n in notes if n.startswith("lost flush")]
    if key.misdirect is not None and victim is not None:
        sector = key.misdirect[1]
        data = write_data(reader, victim)
        own = victim.sector * reader.sectorsize
        hit, was = explainer.explain([(sector * UNIT, data), (own, data)])
        out.append(
            next(n for n in notes if n.startswith("misdirect"))
            + f"; it landed on: {'; '.join(hit) or '?'}; it was meant for: "
            + ("; ".join(was) or "?")
        )
    if key.corrupt is not None:
        sector = key.corrupt[0]
        with open(crash_image, "rb") as f:
            f.seek(sector * UNIT)
            data = f.read(UNIT)
        (hit,) = explainer.explain([(sector * UNIT, data)])
        out.append(
            next(n for n in notes if n.startswith("corrupt"))
            + f"; the sector belongs to: {'; '.join(hit) or '?'}"
        )
    return out


def explain_state(
    reader: LogReader,
    state: State,
    *,
    fs: ExplainsWrites,
    base: Path,
    crash_image: Path,
    recovered: Path | None,
    db_name: str,
    workdir: Path,
    mode: str = "tc",
    nvram_at: int | None = None,
) -> Explanation:
    """Explain ``state`` of the log in ``reader`` on file system ``fs`` (the
    object, ``harness.fs.get_fs``'s); ``crash_image`` is its image before
    recovery, ``recovered`` after file-system recovery; ``nvram_at``: the
    first byte of a SUT's emulated NVRAM, past the disk
    (harness/states/README.md, "NVRAM"), whose writes are named so."""
    workdir.mkdir(parents=True, exist_ok=True)
    marks, flushes, errors = marks_around(reader, state.cut.lo, state.cut.hi)
    writes = classify(state)
    explainer, notes = fs.explainer(
        ExplainContext(reader, state, base, crash_image, recovered, db_name, workdir, flushes, mode)
    )
    entries = state.epoch.writes
    data = [(w.offset, write_data(reader, entries[w.write])) for w in writes]
    for w, what in zip(writes, explainer.explain(data), strict=True):
        w.what = what
        if nvram_at is not None and w.offset >= nvram_at:
            w.what = [
                f"NVRAM bytes {w.offset - nvram_at}-{w.offset - nvram_at + w.length - 1} "
                "(the emulated battery-backed RAM)"
            ]
    notes = _fault_notes(state, reader, crash_image, explainer) + notes
    c = state.cut
    return Explanation(
        state.id,
        state.epoch.index,
        state.epoch.start,
        state.epoch.end,
        state.epoch.closed,
        c.lo,
        c.hi,
        c.acked,
        c.begun,
        c.in_flight,
        marks,
        writes,
        notes,
        errors,
    )
