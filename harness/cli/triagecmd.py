"""``crashlab triage RUN|SWEEP [--check TAG] [--per-invariant N] [--jobs N] [--json]``:
the failing states of a check grouped into distinct root causes, each
shrunk to its smallest witness and explained (:mod:`harness.triage.groups`
does the work; this module renders it).  Writes ``triage.json`` into each
check folder triaged.

Exit codes: 0 when no group was found, 1 when there is one, 2 for bad
input (not a run, sweep or check folder; an unknown or ambiguous check;
malformed records).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from harness.cli.checkcmd import checker_options, user_checkers
from harness.cli.params import JOBS
from harness.rundir import CHECK_DIR, RUNS_DIR, STATES_NAME, SUMMARY_NAME, SweepDir
from harness.triage.groups import PER_INVARIANT, Triage, triage


def _checks_of_sweep(sweep: SweepDir, tag: str | None) -> list[Path]:
    """The check folders of a sweep's runs that hold a failing state."""
    out = []
    for run in sorted((sweep.path / RUNS_DIR).glob("*")):
        for folder in sorted((run / CHECK_DIR).glob("*")):
            states = folder / STATES_NAME
            if (tag is None or folder.name == tag) and states.is_file() and _fails(states):
                out.append(folder)
    return out


def _fails(states: Path) -> bool:
    """Whether a states.jsonl holds a failing verdict (a cheap byte test;
    the triage reads it properly)."""
    with open(states, "rb") as f:
        return any(b'"fail"' in line for line in f)


def _table(t: Triage) -> Table:
    """One row per group."""
    run = t.check.run.path
    table = Table(title=f"crashlab triage {run} ({t.check.path.name})")
    for col in ("group", "invariant", "states", "minimal", "lost writes (roles)"):
        table.add_column(col, overflow="fold")
    for g in t.groups:
        w = g.witness
        lost = ", ".join("+".join(x.roles) for x in w.lost) or "none"
        table.add_row(
            g.id, g.invariant, f"{g.count} ({g.minimised} minimised)", w.minimised.minimal, lost
        )
    return table


def _summary(t: Triage) -> str:
    """Per invariant: failing states, groups, those not minimised."""
    parts = []
    for inv, c in t.counts.items():
        groups = sum(1 for g in t.groups if g.invariant == inv)
        parts.append(
            f"{inv}: {c['failing']} failing, {groups} group{'s' if groups != 1 else ''}, "
            f"{c['not_minimised']} not minimised"
        )
    return "; ".join(parts) or "no failing state"


@click.command("triage")
@click.argument("target", type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--check", "tag", help="the check folder's tag (RUN/check/TAG) when there are several"
)
@click.option(
    "--per-invariant",
    type=int,
    default=PER_INVARIANT,
    show_default=True,
    help="failing states minimised per invariant (evenly sampled; the rest assigned to groups)",
)
@click.option(
    "--jobs",
    "-j",
    type=JOBS,
    default=0,
    show_default=True,
    help="worker processes minimising (0: every core); the groups do not depend on it",
)
@click.option("--json", "as_json", is_flag=True, help="print triage.json's content instead")
@checker_options
def triage_cmd(
    target: Path,
    tag: str | None,
    per_invariant: int,
    jobs: int,
    as_json: bool,
    checker_specs: tuple[str, ...],
    checker_timeout: float,
    checker_recover: str,
) -> int:
    """Group the failing crash states of a checked RUN (or of each failing
    run of SWEEP) into distinct violations, each shrunk to its smallest
    failing state, its lost writes named, with its repro command.  A
    user checker's violations (USER:NAME) are triaged when it is given
    again with --checker."""
    checkers = user_checkers(checker_specs, checker_timeout, checker_recover)
    if (target / SUMMARY_NAME).is_file() and (target / RUNS_DIR).is_dir():
        folders = _checks_of_sweep(SweepDir(target), tag)
        results = [
            triage(f, per_invariant=per_invariant, checkers=checkers, jobs=jobs) for f in folders
        ]
    else:
        results = [triage(target, tag, per_invariant=per_invariant, checkers=checkers, jobs=jobs)]
    if not results:
        click.echo(f"{target}: no check with a failing state")
    if as_json:
        doc = [r.to_json() for r in results]
        click.echo(json.dumps(doc if len(doc) != 1 else doc[0], indent=2, sort_keys=True))
    else:
        console = Console(file=sys.stdout)
        for r in results:
            console.print(_table(r))
            click.echo(f"{_summary(r)}; groups in {r.check.path / 'triage.json'}")
            for g in r.groups:
                click.echo(f"{g.id}: {g.explanation}")
                if g.witness.verdict:  # the checker's own words on the minimal state
                    click.echo(f"  {g.invariant} says: {g.witness.verdict}")
                click.echo(f"  repro: {g.repro}")
    return 1 if any(r.groups for r in results) else 0


COMMANDS = [triage_cmd]
