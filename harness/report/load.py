"""Reading a sweep folder back: summary.json (required), violations.jsonl,
timing.json, and each cell's run meta.json and check result.json (optional:
what is missing is reported as missing, never invented).

The report is generated from these files alone, so ``crashlab report`` works
on a sweep folder copied off the machine that ran it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.confine import open_regular, read_json
from harness.errors import CrashlabError
from harness.rundir import RunDir, RunMeta, SweepDir, check_cell, check_group_ref

JSON_LIMIT = 256 << 20  # bytes of a summary, timing or result file at most
# Where a sweep's report looks for the paper page: ``crashlab paper --out SWEEP/paper``.
SWEEP_PAGE = "paper/paper.html"


@dataclass
class Sweep:
    path: Path
    summary: dict[str, Any]
    timing: dict[str, Any]
    metas: dict[str, RunMeta | None] = field(default_factory=dict)  # run → meta.json
    results: dict[int, dict[str, Any] | None] = field(default_factory=dict)  # cell → result.json

    @property
    def name(self) -> str:
        return str(self.summary.get("sweep", self.path.name))

    @property
    def cells(self) -> list[dict[str, Any]]:
        return self.summary["cells"]

    def run_dir(self, cell: dict[str, Any]) -> Path:
        """The cell's run folder, confined to the sweep folder."""
        return SweepDir(self.path).cell_run(cell["run"], f"{SweepDir(self.path).summary}: cell")

    def violations(self) -> Iterator[dict[str, Any]]:
        """Stream violations.jsonl (it can be large); a missing file means
        the sweep recorded none (older sweeps) only if no cell failed."""
        path = SweepDir(self.path).violations
        if not path.exists():
            if any(v.get("fail", 0) for c in self.cells for v in c["verdicts"].values()):
                raise CrashlabError(f"{path}: missing, but summary.json counts failures")
            return
        with open(open_regular(path), "rb") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except (ValueError, RecursionError) as e:
                    raise CrashlabError(f"{path}: line {n}: corrupt JSON ({e})") from None
                if not isinstance(rec, dict) or "invariant" not in rec or "sut" not in rec:
                    raise CrashlabError(f"{path}: line {n}: not a violation record")
                check_group_ref(rec.get("group"), f"{path}: line {n}")
                yield rec


def _read_json(path: Path) -> Any:  # noqa: ANN401
    """The parsed regular file ``path``; CrashlabError when it is not JSON."""
    return read_json(path, JSON_LIMIT, str(path))


def _optional_json(path: Path) -> Any:  # noqa: ANN401
    """The parsed file, or None when it is absent or unreadable (the report
    then says the figure is unavailable)."""
    try:
        return _read_json(path)
    except (OSError, CrashlabError):
        return None


def page_in(sweep: Path) -> str | None:
    """The paper page's path relative to the sweep folder, if it has one."""
    return SWEEP_PAGE if (sweep / SWEEP_PAGE).is_file() else None


def strategy_label(rec: dict[str, Any]) -> str:
    """A cell's or violation's strategy as the report names it: with the
    state faults injected on top, if any (``reorder + corrupt``)."""
    return " + ".join([str(rec.get("strategy")), *rec.get("faults", [])])


def _check_result(run: Path, cell: dict[str, Any]) -> dict[str, Any] | None:
    """The result.json under RUN/check/ that this summary cell came from:
    same strategy and the same state counts (a run can hold checks made with
    other options)."""
    candidates = []
    for path in RunDir(run).check_results():
        res = _optional_json(path)
        if isinstance(res, dict) and res.get("strategy") == cell["strategy"]:
            candidates.append(res)
    for res in candidates:
        if res.get("states") == cell["states"]:
            return res
    return candidates[0] if len(candidates) == 1 else None


def load_sweep(path: Path | str) -> Sweep:
    """Read a sweep folder; raise :class:`CrashlabError` (one line) when it is
    not one."""
    root = Path(path)
    if not root.is_dir():
        raise CrashlabError(f"{root}: no such sweep folder")
    spath = SweepDir(root).summary
    if not spath.exists():
        raise CrashlabError(f"{root}: not a sweep folder (no {spath.name})")
    summary = _read_json(spath)
    if not isinstance(summary, dict) or not isinstance(summary.get("cells"), list):
        raise CrashlabError(f"{spath}: not a sweep summary (no cells list)")
    for i, cell in enumerate(summary["cells"]):
        check_cell(cell, f"{spath}: cell {i}")
        SweepDir(root).cell_run(cell["run"], f"{spath}: cell {i}")
    timing = _optional_json(SweepDir(root).timing)
    sweep = Sweep(root, summary, timing if isinstance(timing, dict) else {})
    for i, cell in enumerate(sweep.cells):
        run = sweep.run_dir(cell)
        if cell["run"] not in sweep.metas:
            try:
                sweep.metas[cell["run"]] = RunDir(run).meta()
            except CrashlabError:  # missing or not a crashlab meta.json: incomplete
                sweep.metas[cell["run"]] = None
        sweep.results[i] = _check_result(run, cell)
    return sweep
