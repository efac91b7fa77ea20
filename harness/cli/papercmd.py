"""``crashlab paper --out DIR``: the seed papers' evaluation (DHL thesis
Fig. 8 and 10, syncs per transaction, WALDIO Table 1, MAW Table I)
measured on this machine in one run (harness/paper/)."""

from __future__ import annotations

from pathlib import Path

import click

from harness.paper import QUICK_REPEATS, REPEATS


@click.command("paper")
@click.option(
    "--out",
    "out",
    type=click.Path(path_type=Path),
    required=True,
    help="the folder to write paper.html, paper.md, paper.json and plots/ into "
    "(SWEEP/paper: the sweep's report links it)",
)
@click.option("--quick", is_flag=True, help="a small, fast run (shape only; used by tests)")
@click.option(
    "--systems",
    default=None,
    metavar="A,B",
    help="only these systems (harness/report/systems.py keys, e.g. WAL,DHL_CC)",
)
@click.option(
    "--device",
    type=click.Choice(["loop", "tmpfs"]),
    default="loop",
    show_default=True,
    help="throughput runs: ext4 on a direct-I/O loop device over a file on disk, "
    "or over tmpfs (no device latency)",
)
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    default=None,
    help=f"throughput repeats (default {REPEATS}; --quick {QUICK_REPEATS})",
)
def paper(out: Path, quick: bool, systems: str | None, device: str, repeats: int | None) -> None:
    """Measure every paper system on this machine and write the page."""
    from harness.outlock import locked_output
    from harness.paper import build, render
    from harness.report.systems import select

    chosen = select(systems)
    opts = build.Options.make(chosen, quick=quick, device=device, repeats=repeats)
    with locked_output(out):  # one writer (harness/outlock.py)
        content = build.build(opts, progress=lambda m: click.echo(f"paper: {m}", err=True))
        written = render.write(content, out)
    for path in (written.html, written.md, written.json, *written.plots):
        click.echo(str(path))


COMMANDS = [paper]
