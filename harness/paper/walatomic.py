"""WAL's single-fsync atomicity, answered from crash states (the DHL thesis,
§3.3 and §3.6: "WAL mode with a single fsync()/fdatasync() is potentially
vulnerable ... a commit mark of a transaction must be put only after all
dirty WAL frames are flushed to storage").

For one recorded SQLite WAL run and a check of its states
(``states.jsonl``): every crash state in which a transaction's commit frame
persisted while an earlier frame of the same transaction did not (the
reordering the thesis fears: one fsync orders nothing inside it), what the
real check judged there, and where WAL recovery (:func:`walframes.recover`,
wal.c's rule) stops on the WAL's bytes as that state persisted them: at the
missing frame or before it, so the transaction is dropped whole.

The WAL's blocks are mapped on the image at the end of the workload, before
the runner closes the database (SQLite deletes the WAL at close, so the
run's final image has none; under synchronous=NORMAL the WAL's blocks are
allocated only when written back, after the last acknowledgement).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from harness.check.window import default_window
from harness.errors import CrashlabError
from harness.filetrace import FileTrace, FileWrite, prepare, workload_end
from harness.logformat import LogReader
from harness.paper.walframes import Frame, frames_of, recover, transactions
from harness.rundir import STATES_NAME, RunDir
from harness.states import Options, State, enumerate_states
from harness.states.stateid import iter_bits


@dataclass
class WalAtomicity:
    """The figures of one run (states: those the check judged)."""

    states: int = 0  # crash states enumerated and judged
    frames: int = 0  # WAL frames the run wrote
    multi_frame_txns: int = 0  # transactions of more than one frame
    split: int = 0  # states with a commit frame persisted before an earlier frame
    split_pairs: int = 0  # (state, transaction) such pairs
    passed: int = 0  # split states that passed every invariant judged
    failed: Counter[str] = field(default_factory=Counter)  # invariant -> split states failing
    stopped: Counter[str] = field(default_factory=Counter)  # recovery's reason, at or before
    not_caught: list[str] = field(default_factory=list)  # split states recovery read past
    unjudged: int = 0  # split states without a verdict in states.jsonl


def _verdicts(check_dir: Path) -> dict[str, dict[str, str]]:
    """State ID -> invariant -> verdict, from a check's states.jsonl."""
    out: dict[str, dict[str, str]] = {}
    with (check_dir / STATES_NAME).open(encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            if isinstance(rec, dict) and isinstance(rec.get("id"), str):
                out[rec["id"]] = dict(rec.get("v") or {})
    return out


def _split(state: State, txns: list[list[Frame]]) -> Iterator[Frame]:
    """For each transaction whose commit frame ``state`` persisted while an
    earlier frame of it did not: that earlier frame (the first missing)."""
    ep = state.epoch
    kept = {ep.writes[w].index for w in iter_bits(state.key.kept)}
    mine = {e.index for e in ep.writes}

    def has(entry: int) -> bool:
        return entry < ep.start or entry in kept

    for txn in txns:
        if len(txn) < 2 or not any(e in mine for fr in txn for ws in fr.units.values() for e in ws):
            continue
        if not txn[-1].persisted(has):
            continue
        missing = [fr for fr in txn[:-1] if not fr.persisted(has)]
        if missing:
            yield missing[0]


def _wal_bytes(trace: FileTrace, writes: list[FileWrite], state: State) -> bytearray:
    """The WAL file's bytes as ``state`` persisted them: the base image's,
    then each persisted write up to the state's epoch, in log order."""
    ep = state.epoch
    kept = {ep.writes[w].index for w in iter_bits(state.key.kept)}
    size = max((off + len(d) for w in writes for off, d in w.pieces), default=0)
    buf = bytearray(trace.read_base(0, size))
    for w in writes:
        if w.entry < ep.start or w.entry in kept:
            for off, data in w.pieces:
                buf[off : off + len(data)] = data
    return buf


def analyse(run: RunDir, check_dir: Path, work: Path, strategy: str = "reorder") -> WalAtomicity:
    """The figures for ``run``, whose check of ``strategy`` (default
    window and options) is in ``check_dir``; ``work`` is scratch (the
    caller removes it)."""
    work.mkdir(parents=True, exist_ok=True)
    trace = prepare(run, work, suffix="-wal", end_mark=workload_end(run))
    if isinstance(trace, str):
        raise CrashlabError(f"{run.path}: no map of the WAL: {trace}")
    verdicts = _verdicts(check_dir)
    out = WalAtomicity()
    with trace:
        writes = [w for w in trace.events() if isinstance(w, FileWrite)]
        frames = frames_of(writes)
        txns = transactions(frames)
        out.frames = len(frames)
        out.multi_frame_txns = sum(1 for t in txns if len(t) > 1)
        opts = default_window(run, Options(strategy=strategy))
        with LogReader(run.log) as reader:
            for state in enumerate_states(reader, opts):
                out.states += 1
                missing = list(_split(state, txns))
                if not missing:
                    continue
                out.split += 1
                out.split_pairs += len(missing)
                _judge(out, verdicts.get(state.id))
                rec = recover(_wal_bytes(trace, writes, state))
                if rec.stopped_at <= missing[0].index:
                    out.stopped[rec.why] += 1
                else:
                    out.not_caught.append(state.id)
    return out


def _judge(out: WalAtomicity, v: dict[str, str] | None) -> None:
    """Count the check's verdicts of one split state."""
    if v is None:
        out.unjudged += 1
        return
    bad = [inv for inv, s in v.items() if s == "fail"]
    out.failed.update(bad)
    out.passed += not bad
