"""``crashlab log show|stat`` and ``crashlab replay``: read a recorded log."""

from __future__ import annotations

import json
from pathlib import Path

import click

from harness.cli.params import NONNEG
from harness.logformat import LogReader, flag_names
from harness.materialize import replay
from harness.rundir import RunDir
from harness.validate import resolve_log

SALVAGE_HELP = "read entries past a stale nr_entries (a log whose writer was killed)"


@click.group("log")
def log_group() -> None:
    """Inspect a recorded log (RUN is a run directory or a log file)."""


@log_group.command("show")
@click.argument("run")
@click.option("--salvage", is_flag=True, help=SALVAGE_HELP)
@click.option("--marks-only", is_flag=True, help="print only the mark entries")
def log_show(run: str, salvage: bool, marks_only: bool) -> None:
    """Print one line per entry: number, byte offset, flags, sector range."""
    with LogReader(resolve_log(run), salvage=salvage) as reader:
        s = reader.sectorsize
        for e in reader.entries():
            if marks_only and not e.is_mark:
                continue
            if e.is_mark:
                detail = f"mark {e.label}"
            elif e.nr_sectors:
                detail = f"sectors {e.sector}+{e.nr_sectors} ({e.nr_sectors * s} bytes)"
            else:
                detail = ""
            click.echo(f"{e.index:8d} @{e.offset:<12d} {flag_names(e.flags):<14s} {detail}")
        if reader.salvaged:
            click.echo(f"# salvaged {reader.salvaged} entries past nr_entries={reader.nr_entries}")


@log_group.command("stat")
@click.argument("run")
@click.option("--salvage", is_flag=True, help=SALVAGE_HELP)
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def log_stat(run: str, salvage: bool, as_json: bool) -> None:
    """Counts: entries, epochs, writes, bytes, flushes, FUA, discards, marks."""
    with LogReader(resolve_log(run), salvage=salvage) as reader:
        s = reader.summary()
    if as_json:
        click.echo(json.dumps(_asdict(s), indent=2))
        return
    d = _asdict(s)
    marks = d.pop("marks")
    for k, v in d.items():
        click.echo(f"{k:18s} {v}")
    click.echo(f"{'marks':18s} {len(marks)}" + (f" ({marks[0]} .. {marks[-1]})" if marks else ""))


def _asdict(s: object) -> dict:
    return {f: getattr(s, f) for f in s.__slots__}  # type: ignore[attr-defined]  # s is a slotted summary class of logformat


@click.command("replay")
@click.argument("run")
@click.option("--out", "-o", type=click.Path(path_type=Path), required=True, help="image to write")
@click.option("--base", type=click.Path(path_type=Path), help="base image (default: the run's)")
@click.option("--limit", type=NONNEG, help="replay entries 0..N-1 (replay-log --limit)")
@click.option("--end-mark", help="replay up to and including the first mark NAME")
@click.option("--salvage", is_flag=True, help=SALVAGE_HELP)
def replay_cmd(
    run: str, out: Path, base: Path | None, limit: int | None, end_mark: str | None, salvage: bool
) -> None:
    """Materialise an image from the base image and the log of RUN."""
    log = resolve_log(run)
    if base is None:
        from harness.images import verified_base_for_run

        base = verified_base_for_run(RunDir(Path(run)))
    n = replay(base, log, out, limit=limit, end_mark=end_mark, salvage=salvage)
    click.echo(f"replayed {n} entries into {out}")


COMMANDS = [log_group, replay_cmd]
