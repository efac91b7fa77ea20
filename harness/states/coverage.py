"""How much of the crash-state space an enumeration covered.

Per epoch of n writes, the space of reorderings is the set of *kept sets*
the device's volatile cache allows: every subset of the n writes that does
not lose a FUA write completed before its last kept write (2^n without FUA
writes).  Coverage says how many distinct kept sets a strategy visited out
of those: ``prefix`` visits n+1, ``reorder`` all of them up to
``max_exhaustive`` writes and far fewer beyond.  Torn states add tearing on
top of a kept set and are counted separately (their space has no useful
size: every sector subset of every write).  Counts of large epochs exceed
any float: they are kept exact as Python ints and reported with their log2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from harness.states.epochs import Epoch


@dataclass(slots=True)
class EpochCoverage:
    """One epoch's coverage (inside the window)."""

    epoch: int
    writes: int
    kept_checked: int  # distinct kept sets among the states generated
    kept_possible: int  # kept sets the FUA rule allows
    states: int  # states generated (torn ones included), before dedup


def possible_kept_sets(epoch: Epoch) -> int:
    """The number of valid kept sets of ``epoch``.  Completion order: the
    empty set, plus for each last kept write l every choice of the earlier
    non-FUA writes (earlier FUA writes must be kept).  dm-log-writes order:
    any subset of the non-FUA writes times a prefix of the FUA writes."""
    if epoch.log_order == "dm-log-writes":
        fua = epoch.fua_mask.bit_count()
        return (fua + 1) << (epoch.nr_writes - fua)
    total = 1
    fua_below = 0
    for last in range(epoch.nr_writes):
        total += 1 << (last - fua_below)
        fua_below += epoch.fua_mask >> last & 1
    return total


def _log2(x: int) -> float:
    return round(math.log2(x), 2) if x > 0 else 0.0


def _exact(x: int) -> int | None:
    """``x`` when a JSON reader holds it exactly (< 2^53), else None."""
    return x if x < 1 << 53 else None


def summary(epochs: list[EpochCoverage], budget: int | None = None) -> dict[str, Any]:
    """The coverage record of result.json: totals and every epoch; with
    the ``budget`` a check planned its kept sets by, that too and whether
    it sampled (it did not when it checked every kept set)."""
    checked = sum(e.kept_checked for e in epochs)
    possible = sum(e.kept_possible for e in epochs)
    planned = {} if budget is None else {"budget": budget, "sampled": checked < possible}
    return {
        **planned,
        "kept_sets_checked": checked,
        "kept_sets_possible": _exact(possible),
        "kept_sets_possible_log2": _log2(possible),
        "fraction": checked / possible if possible else 1.0,
        "epochs_complete": sum(e.kept_checked == e.kept_possible for e in epochs),
        "epochs": [
            {
                "epoch": e.epoch,
                "writes": e.writes,
                "kept_checked": e.kept_checked,
                "kept_possible": _exact(e.kept_possible),
                "kept_possible_log2": _log2(e.kept_possible),
                "states": e.states,
            }
            for e in epochs
        ],
    }


def describe(cov: dict[str, Any]) -> str:
    """One line for a table: ``exhaustive (1168)``, ``151/2^16.0 (0.23%)``
    (a strategy that visits some kept sets by its nature, or the per-epoch
    rule), ``sampled 5000 of 2^20.0 (0.48%)`` (beyond the budget)."""
    checked = cov["kept_sets_checked"]
    possible = cov["kept_sets_possible"]
    if cov["fraction"] >= 1:
        return f"exhaustive ({checked})"
    if possible is not None and possible < 10**6:
        text = f"{checked}/{possible}"
    else:
        text = f"{checked}/2^{cov['kept_sets_possible_log2']}"
    if cov.get("sampled"):
        text = "sampled " + text.replace("/", " of ", 1)
    return text + f" ({100 * cov['fraction']:.3g}%)"
