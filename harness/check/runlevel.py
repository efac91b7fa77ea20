"""Checks that judge a recorded run as a whole, not one crash state at a
time, for the SUTs whose engine has them (its checker's ``run_checks``,
``checkers/engines.py``; DHL's):

* DHL-T2, CC-NEXT, CC-MONO: over the successive images of every database
  page in the log, once per run (DHL: ``checkers.dhl_trace``), from the database
  file's history that this stage prepares (``harness.filetrace``) *before*
  the states are checked: the walk also yields the run's facts (the pages
  each transaction wrote, the transaction behind each acknowledgement) that
  the per-state judges compare recovery against;
* REC-CRASHSAFE and REC-MINIMAL: DHL recovery's own writes crashed at
  many points and recovered again, and each judged against the page it
  overwrote — costly (one enumeration per state), so it runs on a
  deterministic sample of the run's checked states, spread over the run,
  among the states whose recovery writes something (a state whose recovery
  writes nothing cannot be interrupted: it is tried and passed over, and
  counted) (DHL: ``checkers.recovery``).

Their records have the shape of states.jsonl lines (``id`` is ``trace`` for
the trace checks, the state ID for a sampled state) and go to run.jsonl.
"""

from __future__ import annotations

import itertools
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from checkers.engines import engine_of
from checkers.protocol import RunChecks, RunFacts
from checkers.verdict import Verdict, skipped
from harness import filetrace
from harness.check.records import StateRecord, verdict_record
from harness.check.worker import StateChecker
from harness.env import temporary_folder
from harness.fs.confined import links_on_way
from harness.logformat import LogReader
from harness.rundir import RunDir
from harness.states import state_from_id
from workloads.suts import get_sut

TRACE_ID = "trace"
CRASHSAFE_ID = "crashsafe"  # the record when no sampled state needed recovery
# REC-CRASHSAFE: states tried, per sampled state, before giving up on
# finding states whose recovery writes (most states of a CC run need one).
TRIES_PER_SAMPLE = 16


def record(rec_id: str, verdicts: list[Verdict]) -> StateRecord:
    out = verdict_record(rec_id, verdicts)
    for v in verdicts:  # REC-CRASHSAFE: how many crash states of recovery were recovered
        if v.invariant == "REC-CRASHSAFE" and v.status == "pass" and isinstance(v.actual, int):
            out["recovery_states"] = v.actual
    return out


def spread_ids(states_path: Path, limit: int | None = None) -> list[str]:
    """Every state ID of states.jsonl (the first ``limit`` of them), in an
    order that spreads over the run from the start: the middle, then the
    quarters, the eighths... (the bit-reversed order of the positions), so
    that any first k are evenly spread and the first and last states, which
    seldom need recovery, come late.  The file is read twice, streaming (a
    check of 10^6 states has a states.jsonl of hundreds of MB), and only
    the lines taken are parsed."""
    n, last = 0, b"\n"
    with open(states_path, "rb") as f:
        while block := f.read(1 << 20):
            n += block.count(b"\n")
            last = block[-1:]
    n += last != b"\n"  # a last line without its newline is a line too
    bits = max(1, (n - 1).bit_length())
    # positions by increasing bit-reversed value: reverse r = 0, 1, 2, ...
    order = (i for r in range(1 << bits) if (i := int(f"{r:0{bits}b}"[::-1], 2)) < n)
    first = next(order, None)
    picked = list(itertools.islice(order, limit if limit is None else max(0, limit)))
    if first is not None and (limit is None or len(picked) < limit):
        picked.append(first)  # position 0 last
    rank = {pos: k for k, pos in enumerate(picked)}
    ids: list[str] = [""] * len(picked)
    with open(states_path, "rb") as f:
        for i, line in enumerate(f):
            k = rank.get(i)
            if k is not None:
                ids[k] = json.loads(line)["id"]
    return ids


@dataclass(frozen=True)
class RunLevel:
    """The run-level stage's work done before the states are checked: the
    trace verdicts (None: the SUT's engine has no run-level checks), the
    run's facts for the per-state judges (None: no trace), and the
    engine's run-level checks."""

    trace: list[Verdict] | None = None
    facts: RunFacts | None = None
    checks: RunChecks[RunFacts] | None = None


def run_checks(run: RunDir) -> RunChecks[RunFacts] | None:
    """The run-level checks of the engine of ``run``'s SUT (None: none)."""
    sut = run.meta().sut
    return None if sut is None else engine_of(get_sut(sut)).checker.run_checks


def prepare_run_level(run: RunDir, workroot: Path) -> RunLevel:
    """Walk the database file's history of a run once, where its engine has
    run-level checks: the trace verdicts and the run's facts."""
    checks = run_checks(run)
    if checks is None:
        return RunLevel()
    work = _fresh(workroot / "trace")
    history = filetrace.prepare(run, work)
    try:
        verdicts, facts = checks.judge_run(history)
    finally:
        if isinstance(history, filetrace.FileTrace):
            history.close()
        shutil.rmtree(work, ignore_errors=True)
    return RunLevel(verdicts, facts, checks)


def trace_verdicts(run: RunDir) -> list[Verdict]:
    """DHL-T2, CC-NEXT and CC-MONO of a recorded DHL run (in a scratch
    folder of its own)."""
    with temporary_folder("crashlab-trace-") as work:
        return prepare_run_level(run, work).trace or []


def run_level_records(
    run: RunDir, states_path: Path, workroot: Path, crashsafe_sample: int, level: RunLevel
) -> list[StateRecord]:
    """The run-level records of ``run`` (none where its engine has no
    run-level checks)."""
    meta = run.meta()
    if level.trace is None or level.checks is None:
        return []
    out = [record(TRACE_ID, level.trace)]
    if crashsafe_sample <= 0:
        return out
    checker = StateChecker(run, _fresh(workroot / "crashsafe"), fsck=False, run_facts=level.facts)
    found = tried = 0
    try:
        with LogReader(run.log) as reader:
            for sid in spread_ids(states_path, TRIES_PER_SAMPLE * crashsafe_sample):
                tried += 1
                # the state's files only: its verdicts are in states.jsonl
                checker.recover_files(state_from_id(reader, sid, run.log_order), reference=True)
                files = checker.workdir / "files"
                db = files / str(meta.db)
                if links_on_way(files, str(meta.db)) is not None or not db.exists():
                    continue  # lost, or a link of the recovered tree: nothing to recover
                vs = level.checks.recovery_checks(
                    db, _fresh(workroot / "cs"), blockdev=checker.ctx.blockdev
                )
                if vs[0].status == "pass" and vs[0].actual == 0:
                    continue  # recovery wrote nothing: it cannot be interrupted
                out.append(record(sid, vs))
                found += 1
                if found == crashsafe_sample:
                    break
    finally:
        checker.close()
    if not found:
        out.append(
            record(
                CRASHSAFE_ID,
                [
                    skipped(
                        inv,
                        f"no recovery to crash: in none of the {tried} states tried did "
                        "recovery write anything",
                    )
                    for inv in ("REC-CRASHSAFE", "REC-MINIMAL")
                ],
            )
        )
    return out


def _fresh(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
