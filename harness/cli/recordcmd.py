"""``crashlab record``: run a command on a recorded file system."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from harness.images import FILESYSTEMS
from harness.record.backends import CHOICES, select_backend
from harness.record.recorder import record


@click.command("record")
@click.option("--backend", type=click.Choice(CHOICES), default="auto", show_default=True,
              help="how writes are recorded (auto: dm, else fuse)")
@click.option("--fs", type=click.Choice(FILESYSTEMS), default="ext4", show_default=True,
              help="file system of the base image")
@click.option("--out", required=True, type=click.Path(path_type=Path),
              help="run directory to create (writes.log, meta.json)")
@click.argument("command", nargs=-1, required=True)
def record_cmd(backend: str, fs: str, out: Path, command: tuple[str, ...]) -> None:
    """Run COMMAND (after --) in the mounted file system of a fresh base
    image, logging every block write.  COMMAND gets CRASHLAB_MNT (the mount
    point) and CRASHLAB_MARK (fuse: write `label\\n` lines to it to log a
    mark) or CRASHLAB_MARK_DM (dm: `dmsetup message $CRASHLAB_MARK_DM 0 mark
    LABEL`).  Exits 1 if COMMAND fails (the run is still written)."""
    _, choice = select_backend(backend)
    click.echo(f"crashlab: recording with {choice}", err=True)
    run = record(list(command), out, fs=fs, backend=backend)
    meta = run.meta()
    log = meta["log"]
    click.echo(
        f"{run.path}: {log.get('entries')} entries, {log.get('writes')} writes, "
        f"{log.get('flushes')} flushes, {len(meta['marks'])} marks, "
        f"{meta['wall_time_s']:.2f} s"
    )
    if meta["exit_status"] != 0:
        click.echo(f"crashlab: record: the command exited with status {meta['exit_status']}",
                   err=True)
        sys.exit(1)


COMMANDS = [record_cmd]
