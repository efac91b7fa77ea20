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

Everything else may fail without breaking anything (it is still reported).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

HELD, BROKEN, UNVERIFIED = "held", "broken", "unverified"


@dataclass(frozen=True)
class Expectation:
    guaranteed: tuple[str, ...]
    must_violate_any: tuple[str, ...] = ()


@dataclass
class ExpectationResult:
    status: str  # HELD, BROKEN or UNVERIFIED (broken wins when both)
    broken: list[str] = field(default_factory=list)  # one sentence each
    unverified: list[str] = field(default_factory=list)  # one sentence each

    @property
    def ok(self) -> bool:
        return self.status == HELD


def evaluate(exp: Expectation, verdicts: Mapping[str, Mapping[str, int]], checked: int,
             skips: Mapping[str, Mapping[str, int]] | None = None) -> ExpectationResult:
    """``verdicts[ID]`` = ``{"pass": n, "fail": n, "skip": n}`` over the
    cell's states (and run-level records); ``skips[ID]`` = reason -> count."""
    def count(inv: str, status: str) -> int:
        return verdicts.get(inv, {}).get(status, 0)

    broken = [f"{inv} is guaranteed but failed in {count(inv, 'fail')} of {checked} states"
              for inv in exp.guaranteed if count(inv, "fail") > 0]
    if exp.must_violate_any and checked and not any(
        count(inv, "fail") for inv in exp.must_violate_any
    ):
        broken.append(
            f"expected a violation of {' or '.join(exp.must_violate_any)} in {checked} states, "
            "found none"
        )
    unverified = []
    for inv in exp.guaranteed:
        if count(inv, "pass") + count(inv, "fail") == 0:
            why = "; ".join(f"{r} ({n})" for r, n in sorted(
                (skips or {}).get(inv, {}).items(), key=lambda x: -x[1])[:3])
            unverified.append(f"{inv} is guaranteed but was judged in none of {checked} states"
                              + (f": skipped because {why}" if why else ": never produced"))
    status = BROKEN if broken else UNVERIFIED if unverified else HELD
    return ExpectationResult(status, broken, unverified)


def exit_code(results: Iterable[ExpectationResult]) -> int:
    """0 when every expectation holds, 1 when one is broken or unverified."""
    return 0 if all(r.ok for r in results) else 1
