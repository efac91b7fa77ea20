"""``crashlab repro RUN STATE [--out DIR] [--shell]``: materialise one crash
state exactly as the sweep checks it, explain every write of its epoch, and
run every checker verbosely.

Exit codes: 0 when every verdict of the state passes (or is skipped), 1 when
one fails, 2 for bad input (unknown run, malformed or impossible state ID).
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from checkers.engines import engine_of
from checkers.verdict import Verdict
from harness.atomic import write_json_atomic
from harness.check.multicrash import resolve, restart_verdicts
from harness.check.runlevel import prepare_run_level
from harness.check.worker import StateChecker
from harness.cli.checkcmd import checker_options, force_option, output, user_checkers
from harness.env import temporary_folder
from harness.errors import CrashlabError
from harness.explain.sqlitefile import describe_files
from harness.explain.state import Explanation, WriteInfo, explain_state
from harness.faults import FAULT_MARK_PREFIX, Fault, fault_specs
from harness.filetrace import fault_targets
from harness.fs.confined import links_on_way
from harness.images import verified_base_for_run
from harness.logformat import LogReader
from harness.marks import parse_label
from harness.rundir import RunDir
from harness.states import State, parse_id, state_from_id
from harness.validate import validate

DEFAULT_SHOWN = 40  # writes listed unless --all-writes
STYLE = {"kept": "green", "dropped": "red", "torn": "yellow", "unwritten": "bright_black"}


REPRO_NAME = "repro.json"  # what makes a --out folder hold an earlier repro's results


@contextlib.contextmanager
def _folder(out: Path | None, keep_tmp: bool, force: bool = False) -> Iterator[Path]:
    """``out`` (created and locked; refused when it holds an earlier repro,
    unless ``force``), or a temporary folder removed afterwards."""
    if out is not None:
        with output(out, (REPRO_NAME,), "a repro", resume=None, force=force):
            yield out
        return
    with temporary_folder("crashlab-repro-", keep=keep_tmp) as tmp:
        yield tmp


def _size(n: int) -> str:
    return f"{n // 1024} KiB" if n % 1024 == 0 and n >= 1024 else f"{n} B"


def _marks_line(x: Explanation) -> str:
    """Marks around the cut, with where the crash interval starts and ends."""
    parts: list[str] = []
    placed_lo = placed_hi = False
    for idx, label in x.marks:
        if not placed_lo and idx >= x.cut_lo:
            parts.append(click.style(f"[lo #{x.cut_lo}", bold=True))
            placed_lo = True
        if not placed_hi and idx > x.cut_hi:
            parts.append(click.style(f"hi #{x.cut_hi}]", bold=True))
            placed_hi = True
        parts.append(f"#{idx} {label}")
    if not placed_lo:
        parts.append(click.style(f"[lo #{x.cut_lo}", bold=True))
    if not placed_hi:
        parts.append(click.style(f"hi #{x.cut_hi}]", bold=True))
    return "  ".join(parts)


def _error_line(label: str) -> str:
    """What an error mark before the crash says, in words."""
    m = parse_label(label)
    if m.name.startswith(FAULT_MARK_PREFIX):
        what = m.name[len(FAULT_MARK_PREFIX):].replace("eio-", "")
        where = f" of sectors {m.payload['sector']}+{m.payload['sectors']}" \
            if "sector" in m.payload else ""
        return (f"the device failed a {what}{where} with EIO: it was neither applied nor "
                "logged")
    k = m.name.partition(":")[2]
    return (f"transaction {k} failed (attempt {m.payload.get('attempt', '?')}, "
            f"{m.payload.get('op', '?')}: {m.payload.get('why', '?')}) and was rolled back: "
            "in doubt, it may be wholly present or wholly absent")


def _write_line(w: WriteInfo) -> str:
    status = "unwritten" if w.status == "after cut" else w.status
    tag = click.style(f"{status.upper():9}", fg=STYLE[status])
    flags = f" {w.flags}" if w.flags else ""
    head = f"  {tag} w{w.write:<3} #{w.entry:<5} {_size(w.length):>7} @{w.offset}{flags}"
    if w.persisted:
        kept = ", ".join(f"{a}..{b}" for a, b in w.persisted)
        head += f" (persisted bytes {kept} of {w.length})"
    what = w.what or ["?"]
    lines = [f"{head}  {what[0]}"] + [f"{'':>12}{p}" for p in what[1:]]
    return "\n".join(lines)


def _verdict_line(v: Verdict) -> str:
    color = {"pass": "green", "fail": "red", "skip": "yellow", "error": "magenta"}[v.status]
    line = f"  {click.style(v.status.upper(), fg=color, bold=v.failed):4} {v.invariant:13}"
    if v.explanation:
        line += f" {v.explanation}"
    if v.expected is not None:
        line += f"  (expected {v.expected}, actual {v.actual})"
    elif v.actual is not None:
        line += f"  (actual {v.actual})"
    return line


def _report(run: Path, meta: dict[str, Any], x: Explanation, verdicts: list[Verdict],
            steps: list[str], files: list[str], out: Path | None, shown: int | None) -> None:
    echo = click.echo
    echo(click.style(f"crashlab repro: state {x.state_id} of {run}", bold=True))
    echo(f"  run    {meta.sut}  {meta.workload}  {meta.fs} ({meta.backend} backend)")
    counts = {s: sum(1 for w in x.writes if w.status == s)
              for s in ("kept", "dropped", "torn", "after cut")}
    end = f"FLUSH #{x.epoch_end}" if x.closed else f"log end (#{x.epoch_end}, no flush)"
    echo(f"  epoch  {x.epoch}: entries #{x.epoch_start}..#{x.epoch_end - 1}, ends at {end}; "
         f"{len(x.writes)} writes: {counts['kept']} kept, {counts['dropped']} dropped, "
         f"{counts['torn']} torn, {counts['after cut']} unwritten")
    flight = f"txn {x.in_flight} in flight" if x.in_flight else "no txn in flight"
    echo(f"  cut    crash between entries #{x.cut_lo} and #{x.cut_hi}: acknowledged up to txn "
         f"{x.acked}, begun up to {x.begun}, {flight}")
    echo(f"  marks  {_marks_line(x)}")
    if meta.faults:
        echo(f"  faults {' + '.join(fault_specs(meta.faults))} (recorded with them)")
    for idx, label in x.errors:
        echo(f"  error  #{idx} {_error_line(label)}")
    for note in x.notes:
        echo(f"  note   {note}")
    echo(click.style(f"writes of epoch {x.epoch} (w = write in the ID, # = log entry, "
                     "@ = device byte offset):", bold=True))
    order = [w for w in x.writes if w.status != "after cut"] + [
        w for w in x.writes if w.status == "after cut"]
    limit = len(order) if shown is None else shown
    for w in sorted(order[:limit], key=lambda w: w.write):
        echo(_write_line(w))
    if len(order) > limit:
        echo(f"  ... {len(order) - limit} more writes (--all-writes lists them)")
    echo(click.style("recovery:", bold=True) + " " + "; ".join(steps))
    for line in files:
        echo(f"  file   {line}")
    echo(click.style("verdicts:", bold=True))
    for v in verdicts:
        echo(_verdict_line(v))
        for item in v.implicated:
            echo(f"{'':20}implicates {item}")
    if out is not None:
        echo(f"kept in {out}: crash.img (before recovery), recovered.img, files/ (as the file "
             "system recovered them, before the database's own recovery), repro.json")


@click.command("repro")
@click.argument("run", type=click.Path(path_type=Path))
@click.argument("state_id", metavar="STATE")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="keep crash.img, recovered.img, files/ and repro.json here "
                   "(default: a temporary folder, removed)")
@click.option("--shell", is_flag=True,
              help="then open sqlite3 (or dhl dump) on the recovered database")
@force_option(False)
@click.option("--all-writes", is_flag=True,
              help=f"list every write of the epoch (default: at most {DEFAULT_SHOWN})")
@click.option("--no-fsck", is_flag=True, help="as in check: skip the read-only e2fsck")
@checker_options
def repro_cmd(run: Path, state_id: str, out: Path | None, shell: bool, force: bool,
              all_writes: bool,
              no_fsck: bool, checker_specs: tuple[str, ...], checker_timeout: float,
              checker_recover: str) -> int:
    """Materialise crash state STATE of run RUN, explain it, check it (with
    your own checkers too: --checker, as in check)."""
    if not run.is_dir():
        raise CrashlabError(f"{run}: no such run directory")
    rd, state_id = resolve(RunDir(run), state_id)  # a multicrash ID names a continuation
    run = rd.path
    meta = validate(rd)
    with LogReader(rd.log) as reader:
        state_from_id(reader, state_id, rd.log_order)  # bad IDs fail here, before any work
    interactive = shell and sys.stdin.isatty()
    with _folder(out, keep_tmp=False, force=force) as folder, \
            temporary_folder("crashlab-repro-work-") as work:
        # the run's facts from its whole log, as the check had them, and
        # where its database lies (whether a fault touched it)
        level = prepare_run_level(rd, work)
        faults = (Fault("misdirect"), Fault("corrupt")) if parse_id(state_id).faulted else ()
        checker = StateChecker(rd, work / "check", fsck=not no_fsck, run_facts=level.facts,
                               checkers=user_checkers(checker_specs, checker_timeout,
                                                      checker_recover),
                               db_spans=fault_targets(rd, faults, work / "dbmap"))
        try:
            checker.keep = folder
            state: State = state_from_id(checker.image.reader, state_id, rd.log_order)
            # and, where it was continued, whether the SUT's own restart agreed
            verdicts = checker.check(state) + restart_verdicts(rd, state_id)
            rec = checker.last_recovery
        finally:
            checker.close()
        assert rec is not None
        recovered = folder / "recovered.img"
        ctx = checker.ctx
        with LogReader(rd.log) as reader:
            x = explain_state(
                reader, state_from_id(reader, state_id, rd.log_order), fs=ctx.fsobj,
                base=verified_base_for_run(rd), crash_image=folder / "crash.img",
                recovered=recovered if rec.ok and ctx.fsobj.has_files else None,
                db_name=ctx.db_name, workdir=work / "explain",
                mode=ctx.sut.mode if ctx.sut else "",
                nvram_at=ctx.nvram[0] if ctx.nvram else None)
        steps = rec.steps + ([rec.detail] if rec.detail else [])
        engine = engine_of(ctx.sut) if ctx.sut else None  # None: the user's command
        files = describe_files(folder / "files", ctx.db_name) \
            if engine and engine.sidecar_files else []
        write_json_atomic(folder / REPRO_NAME, {
            "run": str(run), "state": state_id,
            "explanation": asdict(x),
            "recovery": {"ok": rec.ok, "journal_replayed": rec.journal_replayed,
                         "needed_repair": rec.needed_repair, "steps": steps},
            "files": files,
            "verdicts": [v.to_json() for v in verdicts],
        })
        _report(run, meta, x, verdicts, steps, files, out,
                None if all_writes else DEFAULT_SHOWN)
        def shell_cmd(where: Path) -> list[str]:
            if engine is None:  # no engine to open it with: a shell among the files
                return ["sh", "-c", f"cd {shlex.quote(str(where / 'files'))} && exec sh"]
            return engine.shell_command(where / "files" / ctx.db_name)

        linked = links_on_way(folder / "files", ctx.db_name) if engine else None
        if linked is not None and (shell or out is not None):  # its tool would follow it
            click.echo(f"shell: none: {linked}")
        elif shell and interactive and (folder / "files").exists():
            click.echo(f"shell: {' '.join(shell_cmd(folder))}  (its own recovery runs on "
                       "these files)")
            subprocess.run(shell_cmd(folder))
        elif shell or out is not None:
            where = folder if out is not None else Path("DIR")
            click.echo(f"shell: {' '.join(shell_cmd(where))}"
                       + ("" if out is not None else "  (with --out DIR)"))
    return 1 if any(v.status in ("fail", "error") for v in verdicts) else 0


COMMANDS = [repro_cmd]
