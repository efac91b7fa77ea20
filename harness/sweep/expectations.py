"""Expectations decide a sweep's exit code.

Each matrix cell (SUT × workload × fs × strategy) carries:

* ``guaranteed``: invariant IDs the SUT promises (from the SUT registry).
  One failing state breaks the expectation: a safe SUT was violated.  A
  promised invariant that was judged (passed or failed) in no state at all
  — skipped everywhere, or never produced — is **unverified**: the cell
  promised something it did not check.  That fails the cell too, with its
  own status, so that "held" always means "checked and held".
* ``must_violate_any``: for a known-unsafe SUT, IDs of which at least one
  must fail somewhere in the cell; a clean cell breaks the expectation (an
  unsafe SUT unexpectedly clean: the sweep lost its power to find bugs).
* ``floor`` (optional, harness/sweep/floors.py): the fewest states the cell
  may check and the smallest fraction of its kept sets it may visit.  A
  change that checks fewer states finds fewer violations and breaks nothing
  else; below its floor the cell breaks, with one sentence saying so.

Everything else may fail without breaking anything (it is still reported).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from checkers.invariants import USER_PREFIX

if TYPE_CHECKING:
    from harness.check.records import CheckResult

HELD, BROKEN, UNVERIFIED, ERROR = "held", "broken", "unverified", "error"
REPORTED_MAX = 200  # characters of a user checker's explanation in a broken promise


@dataclass(frozen=True)
class Floor:
    """A cell's coverage floor under one strategy (harness/sweep/floors.py)."""

    states: int  # states checked, at least
    kept_fraction: float | None = None  # kept sets visited / possible, at least


@dataclass(frozen=True)
class Expectation:
    guaranteed: tuple[str, ...]
    must_violate_any: tuple[str, ...] = ()
    floor: Floor | None = None


def below_floor(floor: Floor, checked: int, kept_fraction: float | None) -> list[str]:
    """One sentence per way the coverage falls below ``floor``."""
    out = []
    if checked < floor.states:
        out.append(f"coverage: {checked} states checked, below the floor of {floor.states}")
    if (
        floor.kept_fraction is not None
        and kept_fraction is not None
        and kept_fraction < floor.kept_fraction
    ):
        out.append(
            f"coverage: {100 * kept_fraction:.3g}% of the kept sets visited, below the floor "
            f"of {100 * floor.kept_fraction:.3g}%"
        )
    return out


@dataclass
class ExpectationResult:
    status: str  # HELD, BROKEN, ERROR or UNVERIFIED (in that order of precedence)
    broken: list[str] = field(default_factory=list)  # one sentence each
    unverified: list[str] = field(default_factory=list)  # one sentence each
    errors: list[str] = field(default_factory=list)  # a checker failed: one sentence each

    @property
    def ok(self) -> bool:
        return self.status == HELD


def evaluate(
    exp: Expectation,
    verdicts: Mapping[str, Mapping[str, int]],
    checked: int,
    skips: Mapping[str, Mapping[str, int]] | None = None,
    errors: Mapping[str, Mapping[str, int]] | None = None,
    first: Mapping[str, tuple[str, str]] | None = None,
    kept_fraction: float | None = None,
) -> ExpectationResult:
    """``verdicts[ID]`` = ``{"pass": n, "fail": n, "skip": n, "error": n}``
    over the cell's states (and run-level records); ``skips[ID]`` and
    ``errors[ID]`` = reason -> count; ``first[ID]`` = (state, explanation)
    of its first failure.  A checker error is no verdict on the SUT but
    leaves the promise unchecked in those states: the cell is not held, and
    says so apart from a broken promise.  ``kept_fraction``: the check's
    coverage of kept sets, held to ``exp.floor`` with ``checked``."""

    def count(inv: str, status: str) -> int:
        return verdicts.get(inv, {}).get(status, 0)

    def among(inv: str) -> str:
        """Out of what: the states, or the run-level checks (REC-AGREE: one
        per continued first crash) when the invariant is judged apart."""
        judged = sum(count(inv, s) for s in ("pass", "fail", "skip", "error"))
        return f"{checked} states" if judged == checked else f"{judged} checks ({checked} states)"

    broken = [
        _broken(inv, f"{count(inv, 'fail')} of {among(inv)}", (first or {}).get(inv))
        for inv in exp.guaranteed
        if count(inv, "fail") > 0
    ]
    if (
        exp.must_violate_any
        and checked
        and not any(count(inv, "fail") for inv in exp.must_violate_any)
    ):
        broken.append(
            f"expected a violation of {' or '.join(exp.must_violate_any)} in {checked} states, "
            "found none"
        )
    if exp.floor is not None:
        broken += below_floor(exp.floor, checked, kept_fraction)
    unverified = []
    for inv in exp.guaranteed:
        if count(inv, "pass") + count(inv, "fail") == 0 and not count(inv, "error"):
            why = "; ".join(
                f"{r} ({n})"
                for r, n in sorted((skips or {}).get(inv, {}).items(), key=lambda x: -x[1])[:3]
            )
            unverified.append(
                f"{inv} is guaranteed but was judged in none of {checked} states"
                + (f": skipped because {why}" if why else ": never produced")
            )
    errs = []
    for inv in exp.guaranteed:
        if count(inv, "error"):
            why = "; ".join(
                f"{r} ({n})"
                for r, n in sorted((errors or {}).get(inv, {}).items(), key=lambda x: -x[1])[:3]
            )
            errs.append(
                f"{inv}: the checker failed in {count(inv, 'error')} of {checked} "
                f"states (no verdict there): {why or 'no reason recorded'}"
            )
    status = BROKEN if broken else ERROR if errs else UNVERIFIED if unverified else HELD
    return ExpectationResult(status, broken, unverified, errs)


def _broken(inv: str, where: str, first: tuple[str, str] | None) -> str:
    """The sentence of a promise broken in ``where``; a user's checker's
    says what it reported (its first failure's explanation)."""
    if not inv.startswith(USER_PREFIX):
        return f"{inv} is guaranteed but failed in {where}"
    name = inv[len(USER_PREFIX) :]
    line = (first[1].splitlines() or [""])[0] if first is not None else ""
    if not line or first is None:
        return f"{inv} failed in {where}: your checker {name!r} reported a violation"
    line = line if len(line) <= REPORTED_MAX else line[:REPORTED_MAX] + " …"
    return f"{inv} failed in {where}: your checker {name!r} reported {line!r} (state {first[0]})"


def evaluate_result(exp: Expectation, result: CheckResult) -> ExpectationResult:
    """:func:`evaluate` on one check's result (result.json)."""
    first: dict[str, tuple[str, str]] = {}
    for v in result.get("violations", []):
        first.setdefault(v["invariant"], (str(v.get("state", "")), str(v.get("explanation", ""))))
    return evaluate(
        exp,
        result["verdicts"],
        result["states"]["checked"],
        result.get("skips"),
        result.get("errors"),
        first,
        result.get("coverage", {}).get("fraction"),
    )


def exit_code(results: Iterable[ExpectationResult]) -> int:
    """0 when every expectation holds, 1 when one is broken, unverified or
    has checker errors."""
    return 0 if all(r.ok for r in results) else 1
