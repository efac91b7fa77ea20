"""Expectations decide a sweep's exit code.

Each matrix cell (SUT × workload × fs × strategy) carries:

* ``guaranteed``: invariant IDs the SUT promises (from the SUT registry).
  One failing state breaks the expectation: a safe SUT was violated.
* ``must_violate_any``: for a known-unsafe SUT, IDs of which at least one
  must fail somewhere in the cell; a clean cell breaks the expectation (an
  unsafe SUT unexpectedly clean: the sweep lost its power to find bugs).

Everything else may fail without breaking anything (it is still reported).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Expectation:
    guaranteed: tuple[str, ...]
    must_violate_any: tuple[str, ...] = ()


@dataclass
class ExpectationResult:
    ok: bool
    broken: list[str] = field(default_factory=list)  # one sentence each


def evaluate(exp: Expectation, failures: Mapping[str, int], checked: int) -> ExpectationResult:
    """``failures[ID]`` = number of states failing ID in the cell."""
    broken = [
        f"{inv} is guaranteed but failed in {failures[inv]} of {checked} states"
        for inv in exp.guaranteed
        if failures.get(inv, 0) > 0
    ]
    if exp.must_violate_any and checked and not any(
        failures.get(inv, 0) for inv in exp.must_violate_any
    ):
        broken.append(
            f"expected a violation of {' or '.join(exp.must_violate_any)} in {checked} states, "
            "found none"
        )
    return ExpectationResult(not broken, broken)


def exit_code(results: Iterable[ExpectationResult]) -> int:
    """0 when every expectation holds, 1 when one breaks."""
    return 0 if all(r.ok for r in results) else 1
