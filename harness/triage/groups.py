"""Failing states grouped into distinct root causes (issue 25, item 2):
``triage(run or check folder) -> Triage``.

Per invariant, up to ``per_invariant`` failing states (sampled evenly
over states.jsonl, deterministic) are minimised with one shared memo
(:class:`~harness.triage.minimise.Minimiser`); each minimal witness's
writes are named (:mod:`harness.triage.witness`) and witnesses with the
same signature form a group.  The other failing states join the group
whose witness they contain (every lost or torn write of it lost in the
state too, its last persisted write persisted), else count as not
minimised.  README.md, "Groups".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.invariants import INVARIANTS
from harness.atomic import write_json_atomic
from harness.check.repro import ReproOptions
from harness.check.usercheck import PyChecker, UserChecker, repro_flags
from harness.errors import CrashlabError
from harness.states.stateid import parse_id
from harness.triage.checkdir import CheckDir, Failing, find_check, read_check
from harness.triage.context import says_context
from harness.triage.minimise import split_id
from harness.triage.parallel import witnesses
from harness.triage.roles import phase_says, says
from harness.triage.search import dropped
from harness.triage.witness import RoledWrite, Witness, group_id
from harness.validate import validate

TRIAGE_NAME = "triage.json"
PER_INVARIANT = 8  # failing states minimised per invariant by default


@dataclass
class Group:
    """One root cause: its signature and ID, the failing states in it
    (``minimised`` of them shrunk, the rest assigned), its smallest
    witness, an explanation built from the roles, its repro command."""

    signature: dict[str, Any]
    witness: Witness
    repro: str
    count: int = 0
    minimised: int = 0
    witnesses: list[Witness] = field(default_factory=list)
    members: list[str] = field(default_factory=list)  # its failing states' IDs

    @property
    def id(self) -> str:
        return group_id(self.signature)

    @property
    def invariant(self) -> str:
        return str(self.signature["invariant"])

    @property
    def explanation(self) -> str:
        return explain(self.witness, self.count)

    def to_json(self) -> dict[str, Any]:
        m = self.witness.minimised
        return {
            "id": self.id,
            "invariant": self.invariant,
            "signature": self.signature,
            "count": self.count,
            "minimised": self.minimised,
            "minimal": m.minimal,
            "kind": m.kind,
            "lost": [w.to_json() for w in self.witness.lost],
            "after": self.witness.last.to_json() if self.witness.last else None,
            "before": self.witness.next.to_json() if self.witness.next else None,
            "explanation": self.explanation,
            "verdict": self.witness.verdict,
            "repro": self.repro,
        }


@dataclass
class Triage:
    """The groups of one check, and per invariant how many failing states
    it had, minimised and left unassigned (``not_minimised``)."""

    check: CheckDir
    groups: list[Group]
    counts: dict[str, dict[str, int]]

    def group_of(self) -> dict[tuple[str, str], str]:
        """(state ID, invariant) -> the ID of the group the state is in."""
        return {(s, g.invariant): g.id for g in self.groups for s in g.members}

    def to_json(self) -> dict[str, Any]:
        return {
            "run": str(self.check.run.path),
            "check": self.check.path.name,
            "groups": [g.to_json() for g in self.groups],
            "invariants": self.counts,
        }


def sample(items: list[Failing], k: int) -> list[Failing]:
    """``k`` of ``items`` evenly spaced (all of them when there are no more)."""
    if len(items) <= k:
        return list(items)
    return [items[i * len(items) // k] for i in range(k)]


def smallness(w: Witness) -> tuple[int, ...]:
    """The order of README.md's "What smallest means" on a witness's last
    crash: crash point, drops, missing units (then fewer crashes)."""
    parts, _ = split_id(w.minimised.minimal)
    key = parse_id(parts[-1])
    members = key.kept | key.torn_mask
    missing = sum(x.missing for x in w.lost if x.status == "torn")
    return (key.epoch, members.bit_length(), dropped(key).bit_count(), missing, len(parts))


def contains(state: Failing, w: Witness) -> bool:
    """Whether ``state`` holds witness ``w``'s loss: the same continuation,
    each write ``w`` lost or tore lost or torn in it too, and ``w``'s last
    persisted write persisted (issued before its cut, not dropped)."""
    if split_id(state.id)[0][:-1] != split_id(w.minimised.minimal)[0][:-1]:
        return False
    gone = state.dropped | state.torn
    if any(x.entry not in gone for x in w.lost):
        return False
    last = w.last
    return last is None or (last.entry < state.cut_lo and last.entry not in gone)


def explain(w: Witness, count: int) -> str:
    """One paragraph from the roles of a witness (no SUT's own words)."""
    m = w.minimised
    inv = INVARIANTS.get(m.invariant)
    head = f"{m.invariant} ({inv.holds_when})" if inv else m.invariant
    text = f"{head} fails in {count} state{'s' if count != 1 else ''}; the smallest, {m.minimal}"
    after = (
        f"the write of {_write(w.last)} persisted"
        if w.last
        else "a FLUSH, nothing of the next epoch persisted"
    )
    before = f", before the write of {_write(w.next)}" if w.next else ""
    more = f" {says_context(w.context)}" if w.context else ""
    if not w.lost:
        return (
            f"{text}, loses no write: the crash comes right after {after}{before}, "
            f"and the state on disk at that point already breaks it.{more}".rstrip()
        )
    n = len(w.lost)
    head = f"{text} ({m.kind}), loses {n} write{'s' if n != 1 else ''}: {_lost(w)}"
    return f"{head}; {_why(w, after)}.{more}".rstrip()


def _lost(w: Witness) -> str:
    """The lost and torn writes of ``w`` in words."""
    return "; ".join(
        _write(x)
        + (
            f" (torn: {x.missing} of its {x.length // 512} 512-byte units missing)"
            if x.status == "torn"
            else ""
        )
        for x in w.lost
    )


def _why(w: Witness, after: str) -> str:
    """Why the writes were lost: a later write persisted first (and a FLUSH
    between them was lost), or, with nothing later persisted, the power
    failed while they were being written (a tear)."""
    m = w.minimised
    if all(lw.overtaken_by is None for lw in m.lost):
        return (
            "the power failed while it was being written: part of it reached the disk "
            "and the rest did not, and that part alone breaks it"
        )
    flush = next((lw.flush for lw in m.lost if lw.flush is not None), None)
    why = (
        f" although a FLUSH (entry {flush}) lay between them: the device lost it"
        if flush is not None
        else ": nothing forced the earlier write(s) to disk first"
    )
    return f"while {after}{why}"


def _write(x: RoledWrite) -> str:
    return f"{says(x.roles)} ({phase_says(x.phase)})"


def triage(
    path: Path,
    tag: str | None = None,
    *,
    per_invariant: int = PER_INVARIANT,
    on_progress: Callable[[str], None] | None = None,
    write: bool = True,
    checkers: Sequence[UserChecker | PyChecker] = (),
    jobs: int = 1,
) -> Triage:
    """The groups of the failing states of a check (``path``: its folder,
    or a run folder with ``tag`` choosing among its checks); writes
    ``triage.json`` into the check folder, atomically (``write``).  A user
    checker's invariant (USER:NAME) is minimised when ``checkers`` holds
    it: a command the user gives again, never one read from the folder.
    ``jobs``: worker processes minimising (0: every core); the result is
    the same whatever their number (:mod:`harness.triage.parallel`)."""
    if per_invariant < 1:
        raise CrashlabError(f"--per-invariant must be >= 1, not {per_invariant}")
    if jobs < 0:
        raise CrashlabError(f"--jobs must be >= 0, not {jobs}")
    run, folder = find_check(path, tag)
    validate(run)
    check = read_check(run, folder)
    options = ReproOptions(fsck=check.fsck, checkers=tuple(checkers))
    samples = {inv: sample(check.failing[inv], per_invariant) for inv in sorted(check.failing)}
    found = witnesses(check, samples, options, jobs or os.cpu_count() or 1, on_progress)
    groups: dict[str, Group] = {}
    counts: dict[str, dict[str, int]] = {}
    for inv in sorted(check.failing):
        states, done = check.failing[inv], found[inv]
        mine = _group(done, groups, run.path, repro_flags(checkers, inv))
        tried = {s.id for s in samples[inv]}
        unassigned = _assign([s for s in states if s.id not in tried], mine)
        counts[inv] = {
            "failing": len(states),
            "minimised": len(done),
            "not_minimised": unassigned + len(samples[inv]) - len(done),
        }
    out = Triage(
        check, sorted(groups.values(), key=lambda g: (-g.count, g.invariant, g.id)), counts
    )
    if write:
        write_json_atomic(folder / TRIAGE_NAME, out.to_json())
    return out


def _group(done: list[Witness], groups: dict[str, Group], run: Path, flags: str) -> list[Group]:
    """Witnesses into ``groups`` by signature; the groups they made or
    joined, each with its smallest witness (``flags``: its repro
    command's options, a user checker's)."""
    mine: dict[str, Group] = {}
    for w in done:
        sig = w.signature()
        gid = group_id(sig)
        g = groups.get(gid)
        if g is None:
            g = groups[gid] = Group(sig, w, "")
        g.witnesses.append(w)
        g.members.append(w.minimised.original)
        g.count += 1
        g.minimised += 1
        if smallness(w) < smallness(g.witness):
            g.witness = w
        mine[gid] = g
    for g in mine.values():
        g.repro = f"crashlab repro {run} {g.witness.minimised.minimal}{flags}"
    return list(mine.values())


def _assign(rest: list[Failing], groups: list[Group]) -> int:
    """Each state of ``rest`` counted in the most specific group whose
    witness it contains; returns how many contain none."""
    left = 0
    for s in rest:
        fits = [(len(w.lost), g.id, g) for g in groups for w in g.witnesses if contains(s, w)]
        if not fits:
            left += 1
            continue
        best = max(fits, key=lambda f: (f[0], f[1]))[2]
        best.count += 1
        best.members.append(s.id)
    return left
