"""A minimal witness with roles: each lost or torn write of a minimised
state, and the write the crash came right after, named by the
explainers (``crashlab repro``'s own explanation of the state) and
placed in the workload by the last mark before it; its signature, the
key triage groups by (README.md, "Groups")."""

from __future__ import annotations

import bisect
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.check.multicrash import resolve
from harness.check.repro import ReproOptions, locate, reproduce
from harness.env import temporary_folder
from harness.explain.state import Explanation, WriteInfo
from harness.logformat import LogReader
from harness.rundir import RunDir
from harness.triage.context import ACK, BEGIN, Context, begin_of, marks_between
from harness.triage.minimise import Minimised
from harness.triage.roles import phase_of, roles_of


@dataclass(frozen=True)
class RoledWrite:
    """One write of a witness: its log ``entry``, where it went on the
    device (byte ``offset``, ``length``), ``status`` (``lost``, ``torn``:
    missing ``missing`` of its 512-byte units, or ``persisted``: the write
    the crash came right after), its ``roles`` and ``phase``
    (:mod:`harness.triage.roles`), and the explainer's own words."""

    entry: int
    offset: int
    length: int
    status: str
    roles: tuple[str, ...]
    phase: str
    what: tuple[str, ...]
    missing: int = 0

    @property
    def token(self) -> str:
        """The write in a signature: status, roles, phase; no number."""
        return f"{self.status}:{'+'.join(self.roles)}@{self.phase}"

    def to_json(self) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "offset": self.offset,
            "length": self.length,
            "status": self.status,
            "roles": list(self.roles),
            "phase": self.phase,
            "what": list(self.what),
            **({"missing_units": self.missing} if self.status == "torn" else {}),
        }


@dataclass(frozen=True)
class Witness:
    """A minimised state with its writes named: the lost and torn ones in
    log order, the last persisted one (None: the state persisted nothing
    of its epoch) and the first of its epoch not written before the crash
    (``unwritten``; None: the crash came at the epoch's end)."""

    minimised: Minimised
    lost: tuple[RoledWrite, ...]
    last: RoledWrite | None
    next: RoledWrite | None = None
    context: Context | None = None
    # every write of the last crash's epoch, in log order (its picture)
    epoch: tuple[RoledWrite, ...] = ()
    # what the invariant's checker said of the minimal state (its failing
    # verdict's explanation: a user checker names its own files there)
    verdict: str = ""

    def signature(self) -> dict[str, Any]:
        """What groups witnesses: the invariant, the kind of the state,
        the sorted multiset of its lost and torn writes' roles and phases,
        and the last persisted write's."""
        return {
            "invariant": self.minimised.invariant,
            "kind": self.minimised.kind,
            "lost": sorted(w.token for w in self.lost),
            "after": self.last.token if self.last else None,
            "before": self.next.token if self.next else None,
        }


def group_id(signature: dict[str, Any]) -> str:
    """A short stable hash of a signature."""
    text = json.dumps(signature, sort_keys=True).encode()
    return hashlib.sha256(text).hexdigest()[:10]


VERDICT_CHARS = 400  # of a checker's explanation kept with a witness

# the explainer's status of a write (harness/explain/state.py) as a witness names it
EPOCH_STATUS = {"kept": "persisted", "dropped": "lost", "torn": "torn", "after cut": "unwritten"}


class Namer:
    """Names the writes of minimal states of one run: each state
    reproduced once (``crashlab repro``'s check and explanation, in a
    scratch folder, in ``work``; None: the temporary folders' own), each
    log's marks read once."""

    def __init__(self, run: Path, options: ReproOptions, work: Path | None = None) -> None:
        self.run, self.options, self.work = run, options, work
        self._marks: dict[Path, tuple[list[int], list[str]]] = {}
        self._done: dict[str, Witness] = {}
        self._says: dict[str, dict[str, str]] = {}  # state -> invariant -> its failing verdict

    def marks(self, rd: RunDir) -> tuple[list[int], list[str]]:
        """The entry indices and labels of ``rd``'s marks, in log order."""
        if rd.path not in self._marks:
            idx: list[int] = []
            labels: list[str] = []
            with LogReader(rd.log) as reader:
                for e in reader.entries():
                    if e.is_mark:
                        idx.append(e.index)
                        labels.append(e.label or "")
            self._marks[rd.path] = (idx, labels)
        return self._marks[rd.path]

    def phase(self, rd: RunDir, entry: int) -> str:
        """The kind of the last mark before log entry ``entry``."""
        idx, labels = self.marks(rd)
        i = bisect.bisect_left(idx, entry)
        return phase_of(labels[i - 1] if i else None)

    def witness(self, m: Minimised) -> Witness:
        """``m``'s writes named (memoised by minimal state ID)."""
        if m.minimal not in self._done:
            self._done[m.minimal] = self._name(m)
        w = self._done[m.minimal]
        says = self._says[m.minimal].get(m.invariant, "")
        return Witness(m, w.lost, w.last, w.next, w.context, w.epoch, says)

    def _name(self, m: Minimised) -> Witness:
        rd = resolve(RunDir(self.run), m.minimal)[0]
        with temporary_folder("crashlab-triage-repro-", self.work) as folder:
            r = reproduce(locate(self.run, m.minimal), folder, self.options, self.work)
        self._says[m.minimal] = {
            v.invariant: " ".join(v.explanation.split())[:VERDICT_CHARS]
            for v in r.verdicts
            if v.failed
        }
        by_entry = {w.entry: w for w in r.explanation.writes}
        lost = []
        for lw in m.lost:
            status = "torn" if lw.torn else "lost"
            lost.append(self._roled(rd, by_entry[lw.entry], status, lw.missing.bit_count()))
        persisted = [w for w in r.explanation.writes if w.status == "kept"]
        last = self._roled(rd, persisted[-1], "persisted") if persisted else None
        later = [w for w in r.explanation.writes if w.status == "after cut"]
        nxt = self._roled(rd, later[0], "unwritten") if later else None
        epoch = tuple(
            self._roled(rd, w, EPOCH_STATUS.get(w.status, w.status)) for w in r.explanation.writes
        )
        return Witness(m, tuple(lost), last, nxt, self._context(rd, r.explanation), epoch)

    def _context(self, rd: RunDir, x: Explanation) -> Context:
        """The marks and writes around the crash of explanation ``x``."""
        marks = list(zip(*self.marks(rd), strict=True))
        begin = begin_of(marks, x.in_flight)
        since = begin[0] if begin else x.epoch_start
        return Context(
            x.epoch_start,
            x.cut_lo,
            x.cut_hi,
            marks_between(marks, x.epoch_start, x.cut_hi, ACK),
            marks_between(marks, x.epoch_start, x.cut_hi, BEGIN),
            begin,
            tuple(roles_of(w.what) for w in x.writes if w.status == "kept" and w.entry > since),
            tuple(roles_of(w.what) for w in x.writes if w.status == "after cut"),
            tuple(x.errors),
        )

    def _roled(self, rd: RunDir, w: WriteInfo, status: str, missing: int = 0) -> RoledWrite:
        return RoledWrite(
            w.entry,
            w.offset,
            w.length,
            status,
            roles_of(w.what),
            self.phase(rd, w.entry),
            tuple(w.what),
            missing,
        )
