"""``crashlab record``: run a command on a recorded file system."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from harness.cli.params import FAULTS, all_faults
from harness.errors import CrashlabError
from harness.faults import FAULT_MARK_PREFIX, PROCESS, Fault, by_stage
from harness.fs import FILESYSTEMS
from harness.record.backends import CHOICES, select_backend
from harness.record.command import resolve_command
from harness.record.recorder import RecordRequest, record
from harness.sysops import FS_PROGRAMS, RECORD_PROGRAMS, require_programs
from workloads.run import check_sut_fs, check_workload, record_workload
from workloads.suts import get_sut


@click.command("record")
@click.option(
    "--backend",
    type=click.Choice(CHOICES),
    default="auto",
    show_default=True,
    help="how writes are recorded (auto: dm, else fuse, else qemu; qemu: the "
    "kernel's dm-log-writes in a guest, no root)",
)
@click.option(
    "--fs",
    type=click.Choice(FILESYSTEMS),
    default="ext4",
    show_default=True,
    help="file system of the base image (raw: none; the command gets the device in CRASHLAB_DEV)",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path),
    help="run directory to create (writes.log, meta.json)",
)
@click.option(
    "--sut",
    help="with --workload: run crashlab-runner for this SUT (workloads/suts.py) instead of COMMAND",
)
@click.option("--workload", help="workload spec, e.g. insert:txns=100,seed=1 (workloads/spec.py)")
@click.option(
    "--fault",
    "fault_values",
    type=FAULTS,
    multiple=True,
    metavar="FAULT",
    help="a fault beyond power loss (repeatable, or joined with +): "
    "eio:write|flush|read[,after=MARK][,nth=N][,range=A-B][,sticky], "
    "enospc,left=BYTES, process-crash,at=MARK (--sut only), and the state faults "
    "lost-flush, misdirect, corrupt (kept in meta.json, applied when checking)",
)
@click.option(
    "--blktrace",
    is_flag=True,
    help="qemu: also trace the recorded device (RUN/blktrace.txt, blkparse output)",
)
@click.argument("command", nargs=-1)
def record_cmd(
    backend: str,
    fs: str,
    out: Path,
    sut: str | None,
    workload: str | None,
    fault_values: tuple[tuple[Fault, ...], ...],
    blktrace: bool,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND (after --) in the mounted file system of a fresh base
    image, logging every block write.  COMMAND gets CRASHLAB_MNT (the mount
    point) and CRASHLAB_MARK (fuse: write `label\\n` lines to it to log a
    mark) or CRASHLAB_MARK_DM (dm: `dmsetup message $CRASHLAB_MARK_DM 0 mark
    LABEL`; also qemu, where COMMAND runs in the guest: busybox tools or a
    host program named by absolute path, not Python).  COMMAND's program, if
    a relative path with a '/', and the script an interpreter runs
    (`sh w.sh`) are taken from the current folder; other relative arguments
    name files in the recorded file system (a note says when one also names
    a file here).  Exits 1 if COMMAND fails (the run is still written).

    A device fault (--fault eio:...) fails requests as a disk does and logs a
    `fault:eio-OP` mark where it did; a workload arms a fault at run time by
    writing the mark its `after=` names."""
    faults = all_faults(fault_values)
    if sut is None and workload is None and not command:
        raise CrashlabError("nothing to record: give COMMAND (after --) or --sut and --workload")
    if by_stage(faults, PROCESS) and sut is None:
        raise CrashlabError(
            "process-crash needs --sut and --workload: the workload runner kills itself at the mark"
        )
    if sut is not None or workload is not None:
        if command or not sut or not workload:
            raise CrashlabError("give --sut and --workload together, and no COMMAND with them")
        check_sut_fs(get_sut(sut), fs)  # bad input fails before any setup
        check_workload(get_sut(sut), workload)
    chosen, choice = select_backend(backend, fs)
    if chosen.name in RECORD_PROGRAMS:
        require_programs((*RECORD_PROGRAMS[chosen.name], *FS_PROGRAMS.get(fs, ())), "record")
    click.echo(f"crashlab: recording with {choice}", err=True)
    if sut is None or workload is None:
        resolved, notes = resolve_command(command, Path.cwd())
        for note in notes:
            click.echo(f"crashlab: record: note: {note}", err=True)
        run = record(
            RecordRequest(resolved, out, fs=fs, backend=backend, faults=faults, blktrace=blktrace)
        )
    else:
        run = record_workload(
            sut, workload, out, fs=fs, backend=backend, faults=faults, blktrace=blktrace
        )
    meta = run.meta()
    log = meta.log or {}
    click.echo(
        f"{run.path}: {log.get('entries')} entries, {log.get('writes')} writes, "
        f"{log.get('flushes')} flushes, {len(meta.marks)} marks, "
        f"{meta.wall_time_s:.2f} s"
    )
    if any(f.kind == "eio" for f in faults) and not any(
        m.startswith(FAULT_MARK_PREFIX) for m in meta.marks
    ):
        click.echo(
            "crashlab: record: warning: no eio fault fired (no request matched its rule "
            "after it was armed)",
            err=True,
        )
    if meta.exit_status != 0:
        click.echo(f"crashlab: record: the command exited with status {meta.exit_status}", err=True)
        sys.exit(1)


COMMANDS = [record_cmd]
