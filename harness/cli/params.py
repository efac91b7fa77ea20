"""The command line's value types: every option whose value has a range
says it here, so that click refuses a value outside it with its usage
error (exit 2) before any work; a ``--fault`` value is parsed here, once
(a bad one is a one-line CrashlabError, exit 2)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import click

from harness.faults import Fault, parse_faults, unique_faults

JOBS = click.IntRange(0, 1024)  # worker processes; 0: every core
COUNT = click.IntRange(min=1)  # "at most N", "this many"
NONNEG = click.IntRange(min=0)  # a bound or sample that may be 0
SEED = click.IntRange(0, 2**64 - 1)
DEPTH = click.IntRange(2, 16)  # multicrash: crashes in a row


class Seconds(click.ParamType):
    """A positive, finite number of seconds (at most a day)."""

    name = "seconds"

    def convert(
        self,
        value: Any,
        param: click.Parameter | None,  # noqa: ANN401
        ctx: click.Context | None,
    ) -> float:
        try:
            v = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(v) or not 0 < v <= 86400:
            self.fail(f"{value!r} is not in 0 < seconds <= 86400", param, ctx)
        return v


SECONDS = Seconds()


class Faults(click.ParamType):
    """One ``--fault`` value: fault specs joined with ``+``, parsed
    (harness/faults.py); a bad one raises the parser's one-line
    CrashlabError, which the command line reports as every bad input."""

    name = "fault"

    def convert(
        self,
        value: Any,
        param: click.Parameter | None,  # noqa: ANN401
        ctx: click.Context | None,
    ) -> tuple[Fault, ...]:
        if isinstance(value, tuple):  # already converted (a default)
            return value
        return parse_faults(str(value))


FAULTS = Faults()


def all_faults(values: Iterable[tuple[Fault, ...]]) -> tuple[Fault, ...]:
    """The faults of a repeated ``--fault`` option, in order, each once."""
    return unique_faults(f for faults in values for f in faults)
