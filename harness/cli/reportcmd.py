"""``crashlab report SWEEP``: regenerate a sweep's report.html, report.md and
plots/ from the sweep folder's files (summary.json, violations.jsonl,
timing.json, runs/*/meta.json, result.json and writes.log)."""

from __future__ import annotations

from pathlib import Path

import click

from harness.errors import CrashlabError


@click.command("report")
@click.argument("sweep", type=click.Path(path_type=Path))
@click.option(
    "--per-group",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="violations listed per invariant × SUT group (the rest are counted)",
)
def report(sweep: Path, per_group: int) -> None:
    """Write SWEEP/report.html, SWEEP/report.md and SWEEP/plots/*.png."""
    from harness.outlock import locked_output
    from harness.report.write import write_reports  # matplotlib: only when asked

    if not sweep.is_dir():
        raise CrashlabError(f"{sweep}: no such sweep folder")
    with locked_output(sweep):  # not while a sweep still writes there
        out = write_reports(sweep, per_group=per_group)
    for path in (out.html, out.md, *out.plots):
        click.echo(str(path))
    if not out.ok:
        click.echo("note: this sweep broke an expectation (see the report's headline)", err=True)


COMMANDS = [report]
