"""The records the check stage writes and the sweep and the reports read:
their shapes, defined once.  They are JSON in files (states.jsonl,
run.jsonl, result.json), so they stay plain dicts; these types say which
keys they have.

Counts of one invariant over a run's states: ``pass`` / ``fail`` / ``skip``
(and ``not_exercised``, the passes whose situation did not arise; and
``error`` where a user checker failed to give a verdict).
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from checkers.verdict import Status, Verdict, VerdictJson
    from harness.states import State


class StateRecord(TypedDict, total=False):
    """One line of states.jsonl (one crash state) or run.jsonl (a run-level
    check: ``id`` is ``trace``, ``crashsafe`` or a sampled state's ID)."""

    id: str
    acked: int  # the acknowledged and begun transactions it was judged against
    begun: int
    v: dict[str, str]  # invariant -> "pass" | "fail" | "skip"
    skip: dict[str, str]  # invariant -> why it was skipped
    error: dict[str, str]  # invariant -> how its (user) checker failed
    ne: list[str]  # passed, but the situation did not arise
    fail: list[VerdictJson]  # each failure
    dropped: list[int]  # with a failure: the state's dropped and torn log entries, its cut
    torn: list[int]
    cut: list[int]
    recovery_states: int  # REC-CRASHSAFE: crash states of recovery recovered


class Violation(TypedDict, total=False):
    """One failing verdict of a state, in result.json and violations.jsonl."""

    state: str
    acked: int | None
    begun: int | None
    category: str
    invariant: str
    status: Status  # "fail"
    explanation: str
    expected: Any
    actual: Any
    implicated: list[str]
    exercised: bool  # only when False
    dropped: list[int]
    torn: list[int]
    repro: str  # the command that reproduces it


class Continuation(TypedDict, total=False):
    """One continuation of a composite check (its first crash ``state``):
    ``error`` alone when it failed, else the other keys."""

    state: str
    error: str
    from_txn: int | None  # the transaction the SUT resumed at
    recovered_txn: int  # the oracle index the first crash recovered to
    states: int  # its states checked, generated and folded
    generated: int
    folded: int
    log_entries: int | None


class CompositeResult(TypedDict):
    """What a multicrash / recovery-crash check adds to result.json."""

    kind: str
    first: dict[str, int]  # how the first crashes were chosen: states, violating, duplicates
    continuations: list[Continuation]


class CheckResult(TypedDict, total=False):
    """result.json: one check (a run × a strategy with its options)."""

    run: str
    sut: str | None
    workload: str | None
    fs: str
    strategy: str
    options: dict[str, Any]
    faults: list[str]  # the state faults injected on top of every state
    states: dict[str, int]  # checked, generated, folded
    verdicts: dict[str, dict[str, int]]  # invariant -> counts
    violations: list[Violation]
    skips: dict[str, dict[str, int]]  # invariant -> reason -> states
    errors: dict[str, dict[str, int]]  # invariant -> checker error -> states
    crashsafe: dict[str, int]  # REC-CRASHSAFE: states, recovery_states
    coverage: dict[str, Any]  # harness/states/coverage.py summary
    multicrash: CompositeResult
    timing: dict[str, float]  # not written to result.json


def verdict_record(rec_id: str, verdicts: list[Verdict], **head: int) -> StateRecord:
    """A states.jsonl / run.jsonl line: ``id`` (then ``head``), each
    invariant's status, and the skip and error reasons, the passes whose
    situation did not arise, the failures — each key only when it has any."""
    rec: StateRecord = {
        "id": rec_id,
        **head,  # type: ignore[typeddict-item]  # head is the rest of a StateRecord
        "v": {v.invariant: v.status for v in verdicts},
    }
    skips = {v.invariant: v.explanation for v in verdicts if v.status == "skip"}
    if skips:
        rec["skip"] = skips
    errors = {v.invariant: v.explanation for v in verdicts if v.status == "error"}
    if errors:
        rec["error"] = errors
    idle = [v.invariant for v in verdicts if v.status == "pass" and not v.exercised]
    if idle:
        rec["ne"] = idle  # passed, but the situation did not arise
    fails = [v.to_json() for v in verdicts if v.failed]
    if fails:
        rec["fail"] = fails
    return rec


def dump_line(rec: StateRecord) -> bytes:
    """A record's states.jsonl line: sorted keys, ``json.dumps``'s
    separators and ASCII escapes, a newline."""
    return json.dumps(rec, sort_keys=True).encode() + b"\n"


_MARK = "\x00id\x00"  # an ID no state has: where the ID goes in a cut line
_MARK_JSON = encode_basestring_ascii(_MARK).encode()


def cut_at_id(part: StateRecord) -> tuple[bytes, bytes] | None:
    """The line of a record with the fields ``part`` and any ID, as the
    bytes before and after the ID's JSON string (None: the mark is not
    found exactly once, so the line must be made whole)."""
    pieces = dump_line({"id": _MARK, **part}).split(_MARK_JSON)
    return (pieces[0], pieces[1]) if len(pieces) == 2 else None


def state_record(state: State, verdicts: list[Verdict], marks: tuple[int, int]) -> StateRecord:
    """The line a state leaves in states.jsonl (``marks``: the acknowledged
    and begun transactions it was judged against); with a failure, what
    the state dropped and tore, and its cut."""
    rec = verdict_record(state.id, verdicts, acked=marks[0], begun=marks[1])
    if "fail" in rec:
        rec["dropped"] = list(state.dropped_entries)
        rec["torn"] = [e for e, _ in state.torn_entries]
        rec["cut"] = [state.cut.lo, state.cut.hi]
    return rec
