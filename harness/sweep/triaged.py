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

from harness.atomic import write_json_atomic
from harness.check.usercheck import PyChecker, UserChecker, repro_flags
from harness.confine import read_json
from harness.errors import CrashlabError
from harness.rundir import check_group, check_group_ref
from harness.triage.groups import Group, triage
from harness.triage.witness import RoledWrite, Witness

PICTURE_WRITES = 40  # writes of a witness's epoch in its picture, at most
# a check folder's record of the sweep's triage of it, read back on --resume
TRIAGED_NAME = "sweep-triage.json"
TRIAGED_LIMIT = 256 << 20  # group_of lists every failing state (harness/triage/checkdir.py)
GroupOf = dict[tuple[str, str], str]
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


def _options(per_invariant: int, checkers: Sequence[UserChecker | PyChecker]) -> dict[str, Any]:
    """What a triage's groups depend on besides the check: its sample and
    the user checkers it ran (their invariants are minimised only then)."""
    return {"per_invariant": per_invariant, "checkers": sorted(c.spec for c in checkers)}


def save_triaged(
    check_dir: Path,
    per_invariant: int,
    checkers: Sequence[UserChecker | PyChecker],
    records: list[dict[str, Any]],
    group_of: GroupOf,
) -> None:
    """Record a triage's group records and group of each violation in
    ``check_dir`` (atomically), for a resumed sweep (:func:`load_triaged`)."""
    doc = {
        "options": _options(per_invariant, checkers),
        "groups": records,
        "group_of": sorted([s, inv, g] for (s, inv), g in group_of.items()),
    }
    write_json_atomic(check_dir / TRIAGED_NAME, doc)


def load_triaged(
    check_dir: Path, per_invariant: int, checkers: Sequence[UserChecker | PyChecker]
) -> tuple[list[dict[str, Any]], GroupOf] | None:
    """What :func:`save_triaged` recorded in ``check_dir`` for a triage
    with these options (None: none, or one with other options), read as
    hostile input: anything malformed is a one-line CrashlabError."""
    path = check_dir / TRIAGED_NAME
    if not path.is_file():
        return None
    where = str(path)
    doc = read_json(path, TRIAGED_LIMIT, where)
    if not isinstance(doc, dict) or not isinstance(doc.get("groups"), list):
        raise CrashlabError(f"{where}: not a sweep's triage record")
    if doc.get("options") != _options(per_invariant, checkers):
        return None  # triaged otherwise: triage again
    for i, g in enumerate(doc["groups"]):
        check_group(g, f"{where}: group {i}")
    ids = {g["id"] for g in doc["groups"]}
    group_of: GroupOf = {}
    rows = doc.get("group_of")
    if not isinstance(rows, list):
        raise CrashlabError(f"{where}: group_of is not a list")
    for row in rows:
        if not (isinstance(row, list) and len(row) == 3 and all(isinstance(x, str) for x in row)):
            raise CrashlabError(
                f"{where}: group_of holds a row that is not [state, invariant, group]"
            )
        check_group_ref(row[2], where)
        if row[2] not in ids:
            raise CrashlabError(f"{where}: group_of names group {row[2]}, not one of its groups")
        group_of[(row[0], row[1])] = row[2]
    return doc["groups"], group_of
