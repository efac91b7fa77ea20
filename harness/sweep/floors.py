"""Coverage floors: the fewest states a matrix cell may check, per strategy.

A change that makes the crash states weaker (a reorder that checks half the
states, a window that starts later) makes a sweep greener and breaks no
expectation.  So a matrix file may have a floors file beside it, the same
name ending ``.floors.toml`` (``matrices/default.floors.toml``), recorded
from a sweep of it: per cell (its folder name) and strategy, the states
checked and the fraction of kept sets visited, each times ``MARGIN``
(a new recording of a cell is not byte-identical to the last: its state
counts move by a few percent).  The sweep breaks a cell that falls below
its floor, with one sentence (harness/sweep/expectations.py), unless it
was capped with ``--max-states``.

    crashlab floors SWEEP [SWEEP...] [--matrix NAME|FILE]
    make floors SWEEP="results/default-A results/default-B"

writes the floors file of the matrix finished sweeps ran (default: the
default matrix) from their summary.json: the smallest figures any of them
measured, times ``MARGIN`` (two sweeps at least: one cell's states moved by
a third between two recordings).  Regenerate it whenever the cells or
the enumeration change on purpose (then also tests/data/matrix_expectations.json,
which lists every cell's floors), and say why in the commit.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.confine import read_json_object, read_regular
from harness.errors import CrashlabError
from harness.rundir import SweepDir
from harness.sweep.expectations import Floor

SUFFIX = ".floors.toml"
# a floor is this share of what the sweep it was recorded from checked
MARGIN = 0.8
FLOORS_LIMIT = 1 << 20  # bytes: a page per cell at most
SUMMARY_LIMIT = 256 << 20

Floors = dict[str, dict[str, Floor]]  # cell name -> strategy -> floor


def floors_path(matrix_file: Path) -> Path:
    """Where the floors of ``matrix_file`` are kept: beside it."""
    return matrix_file.with_name(matrix_file.name.removesuffix(".toml") + SUFFIX)


def load_floors(path: Path) -> Floors:
    """The floors in ``path`` (none if it does not exist); CrashlabError
    names the file and the first thing wrong in it."""
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(read_regular(path, FLOORS_LIMIT, str(path)).decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as e:
        raise CrashlabError(f"{path}: not a floors file: {e}") from None
    return {
        cell: {s: _floor(f, f"{path}: {cell}.{s}") for s, f in _table(per, f"{path}: {cell}")}
        for cell, per in _table(data, str(path))
    }


def _table(v: object, where: str) -> list[tuple[str, object]]:
    if not isinstance(v, dict):
        raise CrashlabError(f"{where}: expected a table")
    return list(v.items())


def _floor(v: object, where: str) -> Floor:
    """A floor from its TOML table: ``states`` (int >= 0) and optionally
    ``kept_fraction`` (0..1)."""
    if not isinstance(v, dict) or set(v) - {"states", "kept_fraction"} or "states" not in v:
        raise CrashlabError(f"{where}: expected {{ states = N[, kept_fraction = F] }}")
    states, kept = v["states"], v.get("kept_fraction")
    if not isinstance(states, int) or isinstance(states, bool) or states < 0:
        raise CrashlabError(f"{where}: states must be an integer >= 0, not {states!r}")
    if kept is not None and (
        not isinstance(kept, int | float) or isinstance(kept, bool) or not 0 <= kept <= 1
    ):
        raise CrashlabError(f"{where}: kept_fraction must be a number in 0..1, not {kept!r}")
    return Floor(states, None if kept is None else float(kept))


def measured(summary: Mapping[str, Any]) -> dict[tuple[str, str], tuple[int, float | None]]:
    """Per (cell, strategy) of a finished sweep's summary.json: the states it
    checked and the fraction of kept sets it visited (None: not counted, as
    for multicrash)."""
    cells = summary.get("cells")
    if not isinstance(cells, list):
        raise CrashlabError("summary.json: no cells")
    out: dict[tuple[str, str], tuple[int, float | None]] = {}
    for c in cells:
        try:
            name = str(c["run"]).removeprefix("runs/")
            checked = int(c["states"]["checked"])
            fraction = c.get("coverage", {}).get("fraction")
            strategy = str(c["strategy"])
        except (KeyError, TypeError, ValueError, AttributeError):
            raise CrashlabError(f"summary.json: a cell without its states: {c!r:.80}") from None
        ok = isinstance(fraction, int | float) and not isinstance(fraction, bool)
        out[name, strategy] = (checked, float(fraction) if ok else None)
    return out


def floors_of(summaries: Sequence[Mapping[str, Any]]) -> Floors:
    """The floors that finished sweeps of one matrix set: per cell and
    strategy, ``MARGIN`` times the fewest states any of them checked and
    the smallest kept-set fraction any visited (rounded down).  Each sweep
    records every cell afresh, and a recording's state counts vary (measured
    between two default sweeps: -31% for one cell, -13% for another), so
    more sweeps give floors that hold more surely."""
    seen: dict[tuple[str, str], list[tuple[int, float | None]]] = {}
    for summary in summaries:
        for key, m in measured(summary).items():
            seen.setdefault(key, []).append(m)
    out: Floors = {}
    for (name, strategy), ms in seen.items():
        fractions = [f for _, f in ms if f is not None]
        kept = math.floor(min(fractions) * MARGIN * 10**4) / 10**4 if fractions else None
        out.setdefault(name, {})[strategy] = Floor(math.floor(min(n for n, _ in ms) * MARGIN), kept)
    return out


def read_summary(sweep: Path) -> dict[str, Any]:
    """A finished sweep's summary.json (hostile: CrashlabError, one line)."""
    path = SweepDir(sweep).summary
    try:
        return read_json_object(path, SUMMARY_LIMIT, str(path))
    except OSError as e:
        raise CrashlabError(f"{path}: cannot read a summary: {e}") from None


def dump_floors(floors: Floors, source: str) -> str:
    """The floors file's text: a header, then a table per cell."""
    lines = [
        f"# Coverage floors, written by `crashlab floors` from {source}:",
        f"# {MARGIN} x the fewest states each cell checked and kept sets it visited.",
        "# Regenerate, do not edit (harness/sweep/floors.py says when).",
    ]
    for cell in sorted(floors):
        lines.append("")
        lines.append(f"[{json.dumps(cell)}]")
        for strategy, f in sorted(floors[cell].items()):
            kept = "" if f.kept_fraction is None else f", kept_fraction = {f.kept_fraction}"
            lines.append(f"{json.dumps(strategy)} = {{ states = {f.states}{kept} }}")
    return "\n".join(lines) + "\n"
