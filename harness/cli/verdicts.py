"""The verdict table of ``crashlab check``, ``sweep`` and ``merge``, the
lines of their broken promises, and the groups of their failing states
(issue 25: each group with its minimal state and repro command)."""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console
from rich.table import Table

from harness.states.coverage import describe


def print_table(title: str, rows: list[dict[str, Any]]) -> None:
    """The verdict table on stdout (wide when stdout is not a terminal)."""
    out = Console()
    if not out.is_terminal:
        out = Console(width=200)
    out.print(_verdict_table(title, rows))


STATUS_STYLE = {
    "held": "[green]held[/]",
    "broken": "[red]BROKEN[/]",
    "unverified": "[red]UNVERIFIED[/]",
    "error": "[red]CHECKER ERROR[/]",
}


def print_broken(where: str, exp: dict[str, Any]) -> None:
    """One stderr line per broken or unverified promise of a cell."""
    for line in exp.get("broken", []):
        click.echo(f"expectation broken: {where}{line}", err=True)
    for line in exp.get("unverified", []):
        click.echo(f"expectation unverified: {where}{line}", err=True)
    for line in exp.get("errors", []):
        click.echo(f"checker error: {where}{line}", err=True)


def _verdict_table(title: str, rows: list[dict[str, Any]]) -> Table:
    """One row per cell and strategy; the failures column names only the
    invariants that failed, with the number of failing states (the full
    matrix is in report.html)."""
    t = Table(title=title)
    for col in (
        "SUT",
        "workload",
        "fs",
        "strategy (+ faults)",
        "states",
        "folded",
        "kept sets",
        "failures",
        "expectation",
    ):
        t.add_column(col, overflow="fold")
    for r in rows:
        fails = [f"{inv} {c['fail']}" for inv, c in sorted(r["verdicts"].items()) if c["fail"]]
        exp = r["expectation"]
        status = STATUS_STYLE[exp.get("status", "held" if exp["ok"] else "broken")]
        t.add_row(
            r["sut"],
            r["workload"] or "-",
            r["fs"],
            " + ".join([r["strategy"], *r.get("faults", [])]),
            _states(r["states"]),
            str(r["states"].get("folded", 0)),
            describe(r["coverage"]) if r.get("coverage") else "-",
            ", ".join(fails) or "none",
            status,
        )
    return t


def _states(states: dict[str, int]) -> str:
    """The states column: those checked, and of them those of the creation
    window (before setup-done) when there are any."""
    creation = states.get("creation")
    return f"{states['checked']}" + (f" ({creation} creation)" if creation else "")


def print_groups(rows: list[dict[str, Any]], where: str = "") -> None:
    """Under the table: per cell and strategy with groups, one line per
    group (ID, invariant, states, minimal state) and its repro command;
    a repro's relative run folder is under ``where``."""
    for r in rows:
        groups = r.get("groups") or []
        cell = f"{r['sut']} {r.get('workload') or '-'} {r['strategy']}"
        if r.get("triage_error"):  # that cell's triage failed; the others went on
            click.echo(f"{cell}: triage failed: {' '.join(str(r['triage_error']).split())}")
        if not groups:
            continue
        click.echo(f"{cell}: {len(groups)} distinct violation{'s' if len(groups) != 1 else ''}")
        for g in groups:
            click.echo(
                f"  group {g['id']} {g['invariant']}: {g['count']} states, "
                f"minimal {g['minimal']} (lost: {', '.join(g['lost']) or 'none'})"
            )
            click.echo(f"    repro: {g['repro']}" + (f"  (in {where})" if where else ""))
