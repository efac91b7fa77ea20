"""Cross-validation of two recording backends: the same SUT and workload
recorded by each, their per-transaction shapes (harness/record/shape.py)
side by side, and the verdicts per invariant of the same check strategies.

:func:`compare` reads recorded and checked runs (``RUN/check/*/result.json``)
and :func:`markdown` prints the two tables; ``crashlab bench --only
crossval`` records, checks and prints them (harness/bench/crossval.py), and
tests/test_crossval.py holds what must agree."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from harness.record.shape import REGIONS, mean_shape, txn_shapes
from harness.rundir import RunDir

SHAPE_KEYS = ("writes", "flushes", "fua", "bytes", *REGIONS)


@dataclass(frozen=True)
class Side:
    """One backend's recording of one SUT: mean shape and verdict counts."""

    backend: str
    kernel: str
    txns: int
    shape: dict[str, float | None]
    # strategy -> invariant -> {"pass": n, "fail": n, "skip": n}; and states checked
    verdicts: dict[str, dict[str, dict[str, int]]]
    states: dict[str, int]


def side(run: RunDir) -> Side:
    meta = run.meta()
    shapes = txn_shapes(run)
    verdicts: dict[str, dict[str, dict[str, int]]] = {}
    states: dict[str, int] = {}
    for res in run.check_results():
        r: dict[str, Any] = json.loads(res.read_text())
        verdicts[r["strategy"]] = r["verdicts"]
        states[r["strategy"]] = r["states"]["checked"]
    return Side(meta.backend, meta.kernel, len(shapes), mean_shape(shapes), verdicts, states)


def compare(runs: dict[str, dict[str, RunDir]]) -> dict[str, dict[str, Side]]:
    """``{sut: {backend: run}}`` -> ``{sut: {backend: Side}}``."""
    return {sut: {be: side(run) for be, run in by_be.items()} for sut, by_be in runs.items()}


def _num(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.0f}" if v >= 100 or v == int(v) else f"{v:.1f}"


def markdown(cmp: dict[str, dict[str, Side]]) -> str:
    """The shape table (means per acknowledged transaction, bytes) and the
    verdict table (failing / checked states per invariant and strategy)."""
    lines = [
        "| SUT | backend | " + " | ".join(SHAPE_KEYS) + " |",
        "|---|---|" + "---|" * len(SHAPE_KEYS),
    ]
    for sut, sides in cmp.items():
        for be, s in sides.items():
            lines.append(
                f"| {sut} | {be} | " + " | ".join(_num(s.shape[k]) for k in SHAPE_KEYS) + " |"
            )
    strategies = sorted({st for sides in cmp.values() for s in sides.values() for st in s.verdicts})
    invariants = sorted(
        {
            inv
            for sides in cmp.values()
            for s in sides.values()
            for v in s.verdicts.values()
            for inv in v
        }
    )
    lines += [
        "",
        "| SUT | backend | strategy | states | " + " | ".join(invariants) + " |",
        "|---|---|---|---|" + "---|" * len(invariants),
    ]
    for sut, sides in cmp.items():
        for st in strategies:
            for be, s in sides.items():
                v = s.verdicts.get(st)
                if v is None:
                    continue
                cells = [
                    f"{v[i]['fail']} fail"
                    if v.get(i, {}).get("fail")
                    else ("pass" if i in v else "—")
                    for i in invariants
                ]
                lines.append(
                    f"| {sut} | {be} | {st} | {s.states.get(st, 0)} | " + " | ".join(cells) + " |"
                )
    return "\n".join(lines) + "\n"
