"""The report's "Distinct violations" section: one entry per group of
failing states (summary.json's cell ``groups``, harness/sweep/triaged.py)
with its explanation, minimal state, repro command and a picture of its
minimal witness -- an inline SVG, one row per write of the epoch around
the crash, coloured persisted / lost / torn / unwritten, named by role.

The group records were checked when the sweep was loaded
(:func:`harness.rundir.check_group`); every string is escaped here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

from markupsafe import Markup

from harness.report.load import strategy_label

COLOURS = {"persisted": "#2e7d32", "lost": "#c62828", "torn": "#ef6c00", "unwritten": "#9e9e9e"}
ROW = 16  # pixels per write
WIDTH = 640


@dataclass(frozen=True)
class Distinct:
    """One group as the report shows it: the cell it is of, the group
    record, its picture."""

    cell: str
    group: dict[str, Any]
    svg: Markup
    anchor: str  # its HTML id: a group ID recurs across cells (the same signature)


def distinct_groups(cells: list[dict[str, Any]]) -> list[Distinct]:
    """Every group of every cell, in summary.json's order."""
    return [
        Distinct(
            " ".join((c["sut"], c["workload"] or "-", c["fs"], strategy_label(c))),
            g,
            witness_svg(f"{i}-{g['id']}", g["writes"]),
            f"group-{i}-{g['id']}",
        )
        for i, c in enumerate(cells)
        for g in c.get("groups", [])
    ]


def witness_svg(key: str, writes: list[dict[str, Any]]) -> Markup:
    """The picture of a minimal witness: its writes in log order (``key``:
    cell index and group ID, unique in the page)."""
    legend_y = ROW * len(writes) + 6
    rows = [_row(i, w) for i, w in enumerate(writes)]
    legend = [
        f'<rect x="{i * 110}" y="{legend_y}" width="12" height="12" fill="{colour}"/>'
        f'<text x="{i * 110 + 16}" y="{legend_y + 11}">{status}</text>'
        for i, (status, colour) in enumerate(COLOURS.items())
    ]
    height = legend_y + 18
    body = "".join(rows + legend)
    return Markup(
        f'<svg class="witness" id="witness-{escape(key)}" xmlns="http://www.w3.org/2000/svg" '
        f'width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        f'font-family="monospace" font-size="11" role="img">'
        f"<title>minimal witness of group {escape(key.split('-')[-1])}</title>{body}</svg>"
    )


def _row(i: int, w: dict[str, Any]) -> str:
    """One write: a coloured box (its status), entry, status, roles @ phase."""
    y = i * ROW
    status = str(w["status"])
    roles = "+".join(w["roles"]) or "unknown"
    text = escape(f"#{w['entry']:<6} {status:<9} {roles} @ {w['phase']}")
    return (
        f'<g class="write {escape(status)}"><rect x="0" y="{y + 2}" width="12" height="12" '
        f'fill="{COLOURS.get(status, "#000")}"/><text x="18" y="{y + 12}">{text}</text></g>'
    )
