"""``crashlab mutants``: build every mutant of tests/mutants/, run the cells
that should kill it, print the kill table (see harness/mutants.py).

Exit codes: 0 when every mutant is killed or explained harmless, 1 when one
survives unexplained or cannot be built or swept, 2 for usage errors."""

from __future__ import annotations

import datetime
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.atomic import write_json_atomic
from harness.cli.params import JOBS
from harness.errors import CrashlabError
from harness.mutants import Mutant, Outcome, catalogue, run_mutant
from harness.outlock import locked_output

RESULTS_DIR = Path(__file__).resolve().parents[2] / "results"
STYLE = {"killed": "green", "harmless": "yellow", "survived": "red", "error": "red"}


def _row(o: Outcome) -> dict[str, object]:
    return {
        "mutant": o.mutant.name,
        "what": o.mutant.what,
        "status": o.status,
        "killers": o.killers,
        "cells": o.cells,
        "detail": o.detail,
        "ran": [f"{c.sut} {c.workload} {c.fs} {'+'.join(c.strategies)}" for c in o.mutant.cells]
        + list(o.mutant.tests),
    }


@click.command("mutants")
@click.option("--only", multiple=True, metavar="NAME", help="run only these mutants")
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="folder for the mutants' sweeps (default results/mutants-<UTC time>)",
)
@click.option("--jobs", "-j", type=JOBS, default=0, help="check workers (0: every core)")
@click.option(
    "--parallel",
    "-p",
    type=JOBS,
    default=0,
    help="mutants run at once (0: one per core)",
)
def mutants_cmd(only: tuple[str, ...], out: Path | None, jobs: int, parallel: int) -> int:
    """Run every mutant's cells and print which invariants killed it."""
    mutants = catalogue()
    unknown = set(only) - {m.name for m in mutants}
    if unknown:
        raise CrashlabError(
            f"unknown mutant {sorted(unknown)[0]!r} "
            f"(choose from {', '.join(m.name for m in mutants)})"
        )
    if only:
        mutants = [m for m in mutants if m.name in only]
    if out is None:
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
        out = RESULTS_DIR / f"mutants-{stamp}"
    with locked_output(out):  # one writer (harness/outlock.py)
        err = Console(stderr=True)

        def one(m: Mutant) -> Outcome:
            err.log(f"mutant {m.name}")
            return run_mutant(m, out, jobs)

        # Each mutant's build, sweep or tests run in child processes with
        # their own folders, so threads only wait: a recording leaves a core
        # mostly idle, and two mutants at once fill it.
        # On Ctrl-C the mutants not yet started are dropped, not run.
        pool = ThreadPoolExecutor(parallel or os.cpu_count() or 1)
        try:
            outcomes = list(pool.map(one, mutants))  # in catalogue order
        finally:
            pool.shutdown(cancel_futures=True)
        table = Table(title="crashlab mutants")
        for col in ("mutant", "status", "killed by (failing states)", "cells run"):
            table.add_column(col, overflow="fold")
        for o in outcomes:
            killers = ", ".join(f"{k} {n}" for k, n in sorted(o.killers.items())) or o.detail or "—"
            if o.killers and o.detail and o.mutant.tests:  # what the killing test said
                killers += f": {o.detail[:300]}"
            table.add_row(
                escape(o.mutant.name),
                f"[{STYLE[o.status]}]{o.status}[/]",
                escape(killers),  # test IDs hold brackets
                escape("; ".join(_row(o)["ran"])),  # type: ignore[arg-type]  # _row's dict is untyped
            )
        Console(width=160).print(table)
        write_json_atomic(out / "mutants.json", {"mutants": [_row(o) for o in outcomes]})
        bad = [o for o in outcomes if o.status in ("survived", "error")]
        for o in bad:
            click.echo(f"mutant {o.status}: {o.mutant.name}: {o.detail or o.mutant.what}", err=True)
        click.echo(
            f"{len(outcomes) - len(bad)} of {len(outcomes)} mutants killed or explained; "
            f"details in {out / 'mutants.json'}"
        )
        return 1 if bad else 0


COMMANDS = [mutants_cmd]
