"""Triage's time against the check's own (issue 25, item 5): DHL NOLOG on
the bare device, its reorder states (about 2,000, nearly all failing)
checked, then triaged with the default sample per invariant; the figure
is triage time / check time, measured in the same run (goal: <= 2x).

Minimisation judges its candidates one at a time in this process (one
StateChecker per run, one memo per invariant); README.md of
harness/triage says why not on the check's worker pool.
"""

from __future__ import annotations

import time
from pathlib import Path

from harness.check.check import CheckOptions, check_run
from harness.env import temporary_folder
from harness.states import Options
from harness.sweep.cell import Cell
from harness.sweep.sweep import record_cell
from harness.triage.groups import triage

NAME = "triage"
SUT = "dhl-nolog-raw"
WORKLOAD = "insert:txns=10,ops=6,tables=3,size=400,warmup=20,seed=1"
JOBS = 2


def run() -> None:
    with temporary_folder("crashlab-triage-bench-") as d:
        rec = record_cell(Cell(SUT, WORKLOAD, "raw"), Path(d) / "run", "fuse", False)
        out = Path(d) / "check"
        t0 = time.perf_counter()
        check_run(rec, CheckOptions(states=Options(strategy="reorder"), jobs=JOBS), out)
        checked = time.perf_counter() - t0
        t0 = time.perf_counter()
        t = triage(out)
        took = time.perf_counter() - t0
        failing = len({s.id for states in t.check.failing.values() for s in states})
        witnesses = [w for g in t.groups for w in g.witnesses]
        judged = sum(w.minimised.judged for w in witnesses)
        print(
            f"triage: {SUT} {WORKLOAD} reorder, {failing} failing states, "
            f"{len(t.groups)} groups ({len(witnesses)} witnesses minimised, "
            f"{judged} candidate states judged)"
        )
        print(
            f"check {checked:.1f} s (--jobs {JOBS}), triage {took:.1f} s: "
            f"{took / checked:.2f}x the check (goal <= 2x)"
        )
