"""A sweep cell's check triaged (issue 25, item 3): its groups as
summary.json holds them, and the group of each violation.

A group record is path-free (summary.json is byte-identical for the same
recordings wherever the sweep folder is, harness/sweep/merge.py): its
repro command names the run relative to the sweep folder.  Its
``writes`` are the picture of its minimal witness: the writes of the
last crash's epoch around the ones that mattered, each persisted, lost,
torn or unwritten, by role.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.check.usercheck import PyChecker, UserChecker, repro_flags
from harness.triage.groups import Group, triage
from harness.triage.witness import RoledWrite, Witness

PICTURE_WRITES = 40  # writes of a witness's epoch in its picture, at most
CONTEXT = 2  # writes either side of one that mattered


def triage_groups(
    check_dir: Path,
    run_rel: str,
    per_invariant: int,
    checkers: Sequence[UserChecker | PyChecker] = (),
    jobs: int = 1,
) -> tuple[list[dict[str, Any]], dict[tuple[str, str], str]]:
    """The group records of the check in ``check_dir`` (of the run
    ``run_rel``, as the sweep names it; with the user's ``checkers`` it
    ran; minimised by ``jobs`` workers, 0: every core) and (state,
    invariant) -> group ID; triage.json is written into ``check_dir``."""
    t = triage(check_dir, per_invariant=per_invariant, checkers=checkers, jobs=jobs)
    records = [group_record(g, run_rel, repro_flags(checkers, g.invariant)) for g in t.groups]
    return records, t.group_of()


def group_record(g: Group, run_rel: str, flags: str = "") -> dict[str, Any]:
    """One group as summary.json holds it (``flags``: its repro command's
    options, the user checker that judges its invariant)."""
    w = g.witness
    return {
        "id": g.id,
        "invariant": g.invariant,
        "count": g.count,
        "minimised": g.minimised,
        "minimal": w.minimised.minimal,
        "kind": w.minimised.kind,
        "lost": ["+".join(x.roles) for x in w.lost],
        "explanation": g.explanation,
        "repro": f"crashlab repro {run_rel} {w.minimised.minimal}{flags}",
        "writes": [_picture_write(x) for x in picture(w)],
    }


def picture(w: Witness) -> list[RoledWrite]:
    """The writes of ``w``'s epoch that mattered (lost, torn, the last
    persisted, the first unwritten) and ``CONTEXT`` either side of each,
    in log order, at most ``PICTURE_WRITES``."""
    epoch = list(w.epoch)
    key = {x.entry for x in w.lost} | {x.entry for x in (w.last, w.next) if x is not None}
    hot = [i for i, x in enumerate(epoch) if x.entry in key]
    keep = sorted({j for i in hot for j in range(i - CONTEXT, i + CONTEXT + 1)})
    return [epoch[j] for j in keep if 0 <= j < len(epoch)][:PICTURE_WRITES]


def _picture_write(x: RoledWrite) -> dict[str, Any]:
    return {"entry": x.entry, "status": x.status, "roles": list(x.roles), "phase": x.phase}
