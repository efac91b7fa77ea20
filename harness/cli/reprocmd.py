"""``crashlab repro RUN STATE [--out DIR] [--shell] [--json]``: materialise
one crash state exactly as the sweep checks it, explain every write of its
epoch, and run every checker verbosely.  The work is the library's
(:mod:`harness.check.repro`); this module renders its :class:`Repro`.

Exit codes: 0 when every verdict of the state passes (or is skipped), 1 when
one fails, 2 for bad input (unknown run, malformed or impossible state ID).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click

from checkers.verdict import Verdict
from harness.check.repro import REPRO_NAME, Repro, ReproOptions, locate, reproduce
from harness.cli.checkcmd import checker_options, force_option, output, user_checkers
from harness.env import temporary_folder
from harness.errors import CrashlabError
from harness.explain.state import Explanation, WriteInfo
from harness.faults import FAULT_MARK_PREFIX, fault_specs
from harness.marks import parse_label

DEFAULT_SHOWN = 40  # writes listed unless --all-writes
STYLE = {"kept": "green", "dropped": "red", "torn": "yellow", "unwritten": "bright_black"}


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
        what = m.name[len(FAULT_MARK_PREFIX) :].replace("eio-", "")
        where = (
            f" of sectors {m.payload['sector']}+{m.payload['sectors']}"
            if "sector" in m.payload
            else ""
        )
        return f"the device failed a {what}{where} with EIO: it was neither applied nor logged"
    k = m.name.partition(":")[2]
    return (
        f"transaction {k} failed (attempt {m.payload.get('attempt', '?')}, "
        f"{m.payload.get('op', '?')}: {m.payload.get('why', '?')}) and was rolled back: "
        "in doubt, it may be wholly present or wholly absent"
    )


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


def _report(r: Repro, out: Path | None, shown: int | None) -> None:
    """The text report of ``r`` on stdout (``out``: the --out folder)."""
    echo = click.echo
    x, meta = r.explanation, r.target.meta
    echo(click.style(f"crashlab repro: state {x.state_id} of {r.target.run.path}", bold=True))
    what = f"{meta.sut_label()}  {meta.workload_label()}"
    echo(f"  run    {what}  {meta.fs} ({meta.backend} backend)")
    counts = {
        s: sum(1 for w in x.writes if w.status == s)
        for s in ("kept", "dropped", "torn", "after cut")
    }
    end = f"FLUSH #{x.epoch_end}" if x.closed else f"log end (#{x.epoch_end}, no flush)"
    echo(
        f"  epoch  {x.epoch}: entries #{x.epoch_start}..#{x.epoch_end - 1}, ends at {end}; "
        f"{len(x.writes)} writes: {counts['kept']} kept, {counts['dropped']} dropped, "
        f"{counts['torn']} torn, {counts['after cut']} unwritten"
    )
    flight = f"txn {x.in_flight} in flight" if x.in_flight else "no txn in flight"
    echo(
        f"  cut    crash between entries #{x.cut_lo} and #{x.cut_hi}: acknowledged up to txn "
        f"{x.acked}, begun up to {x.begun}, {flight}"
    )
    echo(f"  marks  {_marks_line(x)}")
    if meta.faults:
        echo(f"  faults {' + '.join(fault_specs(meta.faults))} (recorded with them)")
    for idx, label in x.errors:
        echo(f"  error  #{idx} {_error_line(label)}")
    for note in x.notes:
        echo(f"  note   {note}")
    echo(
        click.style(
            f"writes of epoch {x.epoch} (w = write in the ID, # = log entry, "
            "@ = device byte offset):",
            bold=True,
        )
    )
    order = [w for w in x.writes if w.status != "after cut"] + [
        w for w in x.writes if w.status == "after cut"
    ]
    limit = len(order) if shown is None else shown
    for w in sorted(order[:limit], key=lambda w: w.write):
        echo(_write_line(w))
    if len(order) > limit:
        echo(f"  ... {len(order) - limit} more writes (--all-writes lists them)")
    echo(click.style("recovery:", bold=True) + " " + "; ".join(r.recovery.steps))
    for line in r.files:
        echo(f"  file   {line}")
    echo(click.style("verdicts:", bold=True))
    for v in r.verdicts:
        echo(_verdict_line(v))
        for item in v.implicated:
            echo(f"{'':20}implicates {item}")
    if out is not None:
        echo(
            f"kept in {out}: crash.img (before recovery), recovered.img, files/ (as the file "
            "system recovered them, before the database's own recovery), repro.json"
        )


def _shell(r: Repro, out: Path | None, shell: bool) -> None:
    """The --shell line (and, on a terminal, the shell itself); with --out,
    the command that opens the kept files."""
    if r.linked is not None and (shell or out is not None):  # its tool would follow it
        click.echo(f"shell: none: {r.linked}")
    elif shell and sys.stdin.isatty() and (r.folder / "files").exists():
        click.echo(
            f"shell: {' '.join(r.shell_command(r.folder))}  (its own recovery runs on these files)"
        )
        subprocess.run(r.shell_command(r.folder))
    elif shell or out is not None:
        where = r.folder if out is not None else Path("DIR")
        click.echo(
            f"shell: {' '.join(r.shell_command(where))}"
            + ("" if out is not None else "  (with --out DIR)")
        )


@click.command("repro")
@click.argument("run", type=click.Path(path_type=Path))
@click.argument("state_id", metavar="STATE")
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="keep crash.img, recovered.img, files/ and repro.json here "
    "(default: a temporary folder, removed)",
)
@click.option(
    "--shell", is_flag=True, help="then open sqlite3 (or dhl dump) on the recovered database"
)
@force_option(False)
@click.option(
    "--all-writes",
    is_flag=True,
    help=f"list every write of the epoch (default: at most {DEFAULT_SHOWN})",
)
@click.option("--no-fsck", is_flag=True, help="as in check: skip the read-only e2fsck")
@click.option(
    "--json", "as_json", is_flag=True, help="print repro.json's content instead of the report"
)
@checker_options
def repro_cmd(
    run: Path,
    state_id: str,
    out: Path | None,
    shell: bool,
    force: bool,
    all_writes: bool,
    no_fsck: bool,
    as_json: bool,
    checker_specs: tuple[str, ...],
    checker_timeout: float,
    checker_recover: str,
) -> int:
    """Materialise crash state STATE of run RUN, explain it, check it (with
    your own checkers too: --checker, as in check)."""
    if as_json and shell:
        raise CrashlabError("--json prints a document: it goes without --shell")
    target = locate(run, state_id)  # bad input fails here, before any work
    options = ReproOptions(
        fsck=not no_fsck, checkers=user_checkers(checker_specs, checker_timeout, checker_recover)
    )
    with _folder(out, keep_tmp=False, force=force) as folder:
        r = reproduce(target, folder, options)
        if as_json:
            click.echo(json.dumps(r.to_json(), indent=2, sort_keys=True))
        else:
            _report(r, out, None if all_writes else DEFAULT_SHOWN)
            _shell(r, out, shell)
    return 1 if r.failed else 0


COMMANDS = [repro_cmd]
