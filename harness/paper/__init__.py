"""``crashlab paper``: the seed papers' evaluation measured on this machine
in one run (``build.py`` measures through ``volume.py`` and
``throughput.py``; ``compare.py`` puts the papers' numbers beside ours;
``render.py`` writes the folder).  The systems are harness/report/systems.py's."""

from __future__ import annotations

from pathlib import Path

# Where a sweep's report looks for the page: ``crashlab paper --out SWEEP/paper``.
SWEEP_PAGE = "paper/paper.html"


def page_in(sweep: Path) -> str | None:
    """The paper page's path relative to the sweep folder, if it has one."""
    return SWEEP_PAGE if (sweep / SWEEP_PAGE).is_file() else None
