"""A verdict: one checker's judgement of one invariant on one crash state."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, TypedDict, cast

from checkers.invariants import invariant

# "error": the checker itself failed (a user checker that crashed or hung):
# no verdict on the SUT, reported apart from failures.
Status = Literal["pass", "fail", "skip", "error"]


class VerdictJson(TypedDict, total=False):
    """:meth:`Verdict.to_json`: the fields that say something (how states.jsonl
    keeps a failure)."""

    invariant: str
    status: Status
    explanation: str
    expected: Any
    actual: Any
    implicated: list[str]
    exercised: bool  # only when False


@dataclass
class Verdict:
    """``skip`` means the invariant could not be judged on this state (e.g.
    DB-DURABLE when the content matches no oracle state at all: DB-ATOMIC
    already failed) and says why in ``explanation``."""

    invariant: str
    status: Status
    explanation: str = ""
    expected: Any = None  # e.g. oracle transaction index range
    actual: Any = None  # e.g. recovered transaction index
    implicated: list[str] = field(default_factory=list)  # writes, pages, files
    # a pass whose situation did not arise (CC-ROLLBACK with nothing to roll
    # back): counted apart as "not exercised", so a pass means a real check
    exercised: bool = True

    def __post_init__(self) -> None:
        try:
            invariant(self.invariant)
        except KeyError:
            raise ValueError(f"unknown invariant ID {self.invariant!r}") from None

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    def to_json(self) -> VerdictJson:
        # asdict's keys are the fields, which VerdictJson names
        out = cast(VerdictJson, {k: v for k, v in asdict(self).items() if v not in (None, [], "")})
        if self.exercised:
            del out["exercised"]
        return out


def passed(inv: str, explanation: str = "", **kw: Any) -> Verdict:  # noqa: ANN401
    return Verdict(inv, "pass", explanation, **kw)


def failed(inv: str, explanation: str, **kw: Any) -> Verdict:  # noqa: ANN401
    return Verdict(inv, "fail", explanation, **kw)


def skipped(inv: str, explanation: str) -> Verdict:
    return Verdict(inv, "skip", explanation)


def errored(inv: str, explanation: str) -> Verdict:
    return Verdict(inv, "error", explanation)
