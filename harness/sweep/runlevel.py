"""Checks that judge a recorded run as a whole, not one crash state at a
time, for DHL SUTs:

* DHL-T2, CC-NEXT, CC-MONO: over the successive images of every database
  page in the log, once per run (``checkers.dhl_trace``);
* REC-CRASHSAFE: DHL recovery's own writes crashed at every point and
  recovered again — costly (one enumeration per state), so it runs on an
  evenly spaced, deterministic sample of the run's checked states
  (``checkers.recovery``).

Their records have the shape of states.jsonl lines (``id`` is ``trace`` for
the trace checks, the state ID for a sampled state) and go to run.jsonl.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from checkers.dhl_trace import trace_verdicts
from checkers.recovery import crashsafe_verdict
from checkers.verdict import Verdict, skipped
from harness.logformat import LogReader
from harness.rundir import RunDir
from harness.states import state_from_id
from harness.sweep.worker import StateChecker
from workloads.suts import get_sut

TRACE_ID = "trace"


def record(rec_id: str, verdicts: list[Verdict]) -> dict[str, Any]:
    out: dict[str, Any] = {"id": rec_id, "v": {v.invariant: v.status for v in verdicts}}
    fails = [v.to_json() for v in verdicts if v.failed]
    if fails:
        out["fail"] = fails
    return out


def sample_ids(states_path: Path, k: int) -> list[str]:
    """``k`` state IDs spread evenly over states.jsonl (first and last
    included), in file order."""
    with open(states_path) as f:
        n = sum(1 for _ in f)
    if k <= 0 or n == 0:
        return []
    k = min(k, n)
    want = sorted({round(i * (n - 1) / (k - 1)) for i in range(k)}) if k > 1 else [0]
    ids: list[str] = []
    with open(states_path) as f:
        for i, line in enumerate(f):
            if ids and len(ids) == len(want):
                break
            if i == want[len(ids)]:
                ids.append(json.loads(line)["id"])
    return ids


def run_level_records(run: RunDir, states_path: Path, workroot: Path,
                      crashsafe_sample: int) -> list[dict[str, Any]]:
    """The run-level records of ``run`` (none for a SUT that is not DHL)."""
    meta = run.meta()
    if get_sut(meta["sut"]).engine != "dhl":
        return []
    out = [record(TRACE_ID, trace_verdicts(run, _fresh(workroot / "trace")))]
    ids = sample_ids(states_path, crashsafe_sample)
    if not ids:
        return out
    keep = _fresh(workroot / "keep")
    checker = StateChecker(run, _fresh(workroot / "crashsafe"), fsck=False)
    checker.keep = keep
    try:
        with LogReader(run.log) as reader:
            for sid in ids:
                checker.check(state_from_id(reader, sid))
                db = keep / "files" / meta["db"]
                if db.exists():
                    v = crashsafe_verdict(db, _fresh(workroot / "cs"), blockdev=checker.blockdev)
                else:
                    v = skipped("REC-CRASHSAFE", "the file system did not recover the database")
                out.append(record(sid, [v]))
    finally:
        checker.close()
    return out


def _fresh(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
