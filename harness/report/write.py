"""``write_reports(SWEEP)``: regenerate plots/, report.html and report.md of
a sweep folder from its files alone (``crashlab report`` and the last step
of ``crashlab sweep``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.report.html import write_html
from harness.report.load import load_sweep
from harness.report.md import write_md
from harness.report.model import DEFAULT_PER_GROUP, build_report
from harness.report.plots import write_plots


@dataclass(frozen=True)
class Written:
    html: Path
    md: Path
    plots: tuple[Path, ...]
    ok: bool  # every expectation of the sweep held


def write_reports(sweep: Path | str, *, per_group: int = DEFAULT_PER_GROUP) -> Written:
    """Plots first (both reports reference them); every file is written
    atomically.  Raises CrashlabError (one line) on a folder that is not a
    sweep."""
    report = build_report(load_sweep(sweep), per_group=per_group)
    plots = write_plots(report)
    html = write_html(report)
    md = write_md(report)
    return Written(html, md, tuple(report.path / p for p in plots.values()), report.ok)
