"""The records the check stage writes and the sweep and the reports read:
their shapes, defined once.  They are JSON in files (states.jsonl,
run.jsonl, result.json), so they stay plain dicts; these types say which
keys they have.

Counts of one invariant over a run's states: ``pass`` / ``fail`` / ``skip``
(and ``not_exercised``, the passes whose situation did not arise; and
``error`` where a user checker failed to give a verdict).
"""

from __future__ import annotations

from typing import Any, TypedDict


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
    fail: list[dict[str, Any]]  # Verdict.to_json() of each failure
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
    explanation: str
    expected: Any
    actual: Any
    implicated: list[str]
    dropped: list[int]
    torn: list[int]
    repro: str  # the command that reproduces it


class CheckResult(TypedDict, total=False):
    """result.json: one check (a run × a strategy with its options)."""

    run: str
    sut: str | None
    workload: str | None
    fs: str
    strategy: str
    options: dict[str, Any]
    states: dict[str, int]  # checked, generated, folded
    verdicts: dict[str, dict[str, int]]  # invariant -> counts
    violations: list[Violation]
    skips: dict[str, dict[str, int]]  # invariant -> reason -> states
    errors: dict[str, dict[str, int]]  # invariant -> checker error -> states
    crashsafe: dict[str, int]  # REC-CRASHSAFE: states, recovery_states
    coverage: dict[str, Any]  # harness/states/coverage.py summary
    multicrash: dict[str, Any]  # multicrash / recovery-crash: first crashes, continuations
    timing: dict[str, float]  # not written to result.json
