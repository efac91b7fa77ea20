"""Triage's time against the check's own (issue 25, item 5): DHL NOLOG on
the bare device, its reorder states (about 2,000, nearly all failing)
checked with ``--jobs 2``, then triaged with the default sample per
invariant at ``--jobs 1`` and ``--jobs 2`` (harness/triage/parallel.py:
the same groups either way, checked here); the figures are each triage's
time / the check's time, measured in the same run (goal: <= 2x).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from harness.check.check import CheckOptions, check_run
from harness.env import temporary_folder
from harness.errors import CrashlabError
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
        took: dict[int, float] = {}
        docs = []
        for jobs in (1, JOBS):
            t0 = time.perf_counter()
            t = triage(out, jobs=jobs)
            took[jobs] = time.perf_counter() - t0
            docs.append(json.dumps(t.to_json(), sort_keys=True))
        if docs[0] != docs[1]:
            raise CrashlabError(f"triage at --jobs 1 and --jobs {JOBS} disagree")
        failing = len({s.id for states in t.check.failing.values() for s in states})
        witnesses = [w for g in t.groups for w in g.witnesses]
        print(
            f"triage: {SUT} {WORKLOAD} reorder, {failing} failing states, "
            f"{len(t.groups)} groups ({len(witnesses)} witnesses minimised; "
            f"the same at --jobs 1 and {JOBS})"
        )
        print(
            f"check {checked:.1f} s (--jobs {JOBS}); triage --jobs 1 {took[1]:.1f} s "
            f"({took[1] / checked:.2f}x the check), --jobs {JOBS} {took[JOBS]:.1f} s "
            f"({took[JOBS] / checked:.2f}x; goal <= 2x)"
        )
