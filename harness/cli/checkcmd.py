"""``crashlab check RUN`` and ``crashlab sweep``.

Exit codes: 0 when every expectation holds, 1 when one breaks (a safe SUT
violated, or a known-unsafe one unexpectedly clean), 2 for usage errors.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from harness.check.check import CheckOptions, check_run, default_window, options_for
from harness.check.multicrash import COMPOSITE, Composite
from harness.check.records import CheckResult
from harness.check.usercheck import DEFAULT_TIMEOUT, UserChecker, parse_checker, unique
from harness.cli.params import COUNT, DEPTH, JOBS, NONNEG, SECONDS
from harness.cli.progress import PROGRESS_OPTIONS, watching
from harness.cli.statescmd import options_from, state_options
from harness.cli.verdicts import print_broken, print_groups, print_table
from harness.errors import CrashlabError
from harness.outlock import locked_output, refuse_results
from harness.record.backends import CHOICES as BACKEND_CHOICES
from harness.rundir import CHECK_RESULTS, SWEEP_RESULTS, USER_COMMAND_SUT, RunDir, RunMeta
from harness.states import STRATEGIES, Options
from harness.sweep.cell import UserSut
from harness.sweep.expectations import ExpectationResult, evaluate_result
from harness.sweep.matrix import MATRICES, Cell, matrix, parse_shard, shard
from harness.sweep.sweep import SweepOptions, label, run_sweep, total_states
from harness.sweep.triaged import triage_groups
from harness.sysops import FS_PROGRAMS, require_programs
from harness.triage.groups import PER_INVARIANT
from harness.validate import validate
from workloads.suts import get_sut

RESULTS_DIR = Path(__file__).resolve().parents[2] / "results"


def _check_state_options(f: Any) -> Any:  # noqa: ANN401
    """The enumeration options, with the composite strategies as choices."""
    return state_options(f, (*STRATEGIES, *COMPOSITE))


def _run_options(f: Any) -> Any:  # noqa: ANN401
    for d in reversed(
        [
            click.option(
                "--jobs",
                "-j",
                type=JOBS,
                default=0,
                show_default=True,
                help="worker processes (0: every core)",
            ),
            click.option("--max-states", type=COUNT, default=None, help="check at most N states"),
            click.option(
                "--no-fsck",
                is_flag=True,
                help="skip the read-only e2fsck per state (FS-RECOVER then only sees "
                "whether journal replay succeeded)",
            ),
            click.option("--resume", is_flag=True, help="continue an interrupted check/sweep"),
            force_option(True),
            click.option(
                "--crashsafe-sample",
                type=NONNEG,
                default=4,
                show_default=True,
                help="DHL: crash recovery itself on this many sampled states "
                "(REC-CRASHSAFE); 0 to skip",
            ),
            *PROGRESS_OPTIONS,
            click.option(
                "--max-first",
                type=COUNT,
                default=Composite.max_first,
                show_default=True,
                help="multicrash, recovery-crash: first-crash states continued",
            ),
            click.option(
                "--depth",
                type=DEPTH,
                default=Composite.depth,
                show_default=True,
                help="multicrash: crashes in a row",
            ),
            click.option(
                "--then",
                "then",
                type=click.Choice(STRATEGIES),
                default=Composite.then,
                show_default=True,
                help="multicrash, recovery-crash: strategy of the continuations' states",
            ),
            click.option(
                "--executor",
                type=click.Choice(["local", "dask"]),
                default="local",
                show_default=True,
                help="check states in local worker processes, or on a Dask cluster "
                "(the same results; see docs/cluster.md)",
            ),
            click.option(
                "--scheduler",
                default=None,
                metavar="ADDRESS",
                help="--executor dask: the cluster's scheduler (tcp://HOST:8786); "
                "default: a local cluster of --jobs workers",
            ),
        ]
    ):
        f = d(f)
    return f


def _triage_options(f: Any) -> Any:  # noqa: ANN401
    """``--triage-sample N`` and ``--no-triage`` (check and sweep)."""
    f = click.option(
        "--no-triage",
        is_flag=True,
        help="do not group the failing states (crashlab triage can, later)",
    )(f)
    return click.option(
        "--triage-sample",
        type=NONNEG,
        default=PER_INVARIANT,
        show_default=True,
        help="at the end, group the failing states into distinct violations, "
        "minimising this many per invariant (the rest are assigned to groups)",
    )(f)


def force_option(resumable: bool) -> Any:  # noqa: ANN401
    """``--force``: write into an ``--out`` that already holds results."""
    return click.option(
        "--force",
        is_flag=True,
        help="write into an --out that holds earlier results, replacing them "
        "(refused without it" + (" or --resume" if resumable else "") + ")",
    )


@contextmanager
def output(
    out: Path | None, names: tuple[str, ...], what: str, *, resume: bool | None, force: bool
) -> Iterator[None]:
    """Within: ``out`` (when given) is locked and held no results unless
    ``resume`` or ``force`` (harness/outlock.py)."""
    if out is None:
        yield
        return
    with locked_output(out):
        refuse_results(out, names, what, resume=resume, force=force)
        yield


def checker_options(f: Any) -> Any:  # noqa: ANN401
    """``--checker`` and ``--checker-timeout`` (check and repro)."""
    for d in reversed(
        [
            click.option(
                "--checker",
                "checker_specs",
                multiple=True,
                metavar="NAME=COMMAND",
                help="your own checker, run once per crash state on the recovered "
                "files (sh -c COMMAND; exit 0 holds, 1 violated, else a checker "
                "error); its verdicts are invariant USER:NAME. Repeatable",
            ),
            click.option(
                "--checker-timeout",
                type=SECONDS,
                default=DEFAULT_TIMEOUT,
                show_default=True,
                help="seconds a checker may take per state",
            ),
            click.option(
                "--checker-recover",
                default="",
                metavar="COMMAND",
                help="your application's recovery, run (sh -c) on the files before each "
                "checker; if it fails, the checker's invariant fails",
            ),
        ]
    ):
        f = d(f)
    return f


def _scheduler(executor: str, scheduler: str | None) -> str | None:
    """The ``--scheduler`` given, checked: with ``--executor dask``, and
    reachable (before anything is recorded or checked)."""
    if scheduler is not None and executor != "dask":
        raise CrashlabError("--scheduler goes with --executor dask")
    if scheduler is not None:
        from harness.check.cluster import probe_scheduler

        probe_scheduler(scheduler)
    return scheduler


def user_checkers(specs: tuple[str, ...], timeout: float, recover: str) -> tuple[UserChecker, ...]:
    """The --checker options, with the --checker-recover command, named apart."""
    out = tuple(dataclasses.replace(parse_checker(s, timeout), recover=recover) for s in specs)
    unique(out, "--checker")
    return out


@click.command("check")
@click.argument("run", type=click.Path(path_type=Path, exists=True, file_okay=False))
@_check_state_options
@_run_options
@_triage_options
@checker_options
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="output folder (default RUN/check/<strategy>-<options digest>)",
)
def check_cmd(
    run: Path,
    jobs: int,
    max_states: int | None,
    no_fsck: bool,
    resume: bool,
    force: bool,
    crashsafe_sample: int,
    progress: bool | None,
    progress_interval: float,
    out: Path | None,
    max_first: int,
    depth: int,
    then: str,
    checker_specs: tuple[str, ...],
    checker_timeout: float,
    checker_recover: str,
    executor: str,
    scheduler: str | None,
    triage_sample: int,
    no_triage: bool,
    **kw: Any,
) -> int:
    """Check every crash state of one recorded run."""
    rd = RunDir(run.resolve())  # absolute: repro commands and checkers get this path
    meta = validate(rd)
    require_programs(FS_PROGRAMS.get(meta.fs, ()), "check")
    checkers = user_checkers(checker_specs, checker_timeout, checker_recover)
    strategy = kw["strategy"]
    if meta.sut is None and strategy in COMPOSITE:
        raise CrashlabError(
            f"{run}: {strategy} continues a built-in SUT's workload after a "
            "crash; this run is of a command (record -- COMMAND)"
        )
    kw["strategy"] = then if strategy in COMPOSITE else strategy
    states = options_from(kw)
    cell = _run_cell(run, rd, meta, strategy, states, checkers)
    base = CheckOptions(
        states=states,
        max_states=max_states,
        jobs=jobs,
        fsck=not no_fsck,
        crashsafe_sample=crashsafe_sample,
        composite=Composite(then=then, max_first=max_first, depth=depth),
        checkers=checkers,
        executor=executor,
        scheduler=_scheduler(executor, scheduler),
    )
    opts = options_for(strategy, base)
    # --out: refused onto another check's results; the default folder is
    # named after the options, so checking again there redoes the same check
    with (
        output(out, CHECK_RESULTS, "a check", resume=resume, force=force),
        watching(progress, "check", progress_interval) as watch,
    ):
        hook = None
        if watch is not None:
            hook = watch.check(label(cell, strategy), total_states(rd, opts))
        result = check_run(rd, opts, out, resume=resume, on_progress=hook)
        exp = evaluate_result(cell.expectation(strategy), result)
        if watch is not None:
            watch.checked(label(cell, strategy), result, exp.status)
    where = out or rd.check_dir(opts.tag())
    _echo_check(run, where, cell, result, exp)
    if result["violations"] and not no_triage and triage_sample:
        groups = triage_groups(where, str(rd.path), triage_sample, checkers, jobs)[0]
        print_groups([{"sut": cell.sut, "strategy": strategy, **result, "groups": groups}])
    return 0 if exp.ok else 1


def _run_cell(
    run: Path,
    rd: RunDir,
    meta: RunMeta,
    strategy: str,
    states: Options,
    checkers: tuple[UserChecker, ...],
) -> Cell:
    """The one-cell matrix a check of run ``rd`` is (what it promises):
    its built-in SUT's, with the state faults asked for and those its
    meta.json lists; else the user's command with ``checkers`` (a
    CrashlabError when there are none)."""
    if meta.sut is not None:
        return Cell(
            get_sut(meta.sut).name,
            str(meta.workload),
            meta.fs,
            (strategy,),
            checkers=checkers,
            faults=(*meta.faults, *default_window(rd, states).faults),
        )
    if checkers:
        return Cell(
            USER_COMMAND_SUT,
            "",
            meta.fs,
            (strategy,),
            user=UserSut(USER_COMMAND_SUT, meta.command_label(), checkers=checkers),
        )
    raise CrashlabError(
        f"{run}: the run names no SUT (recorded with `crashlab record -- "
        "COMMAND`): check it with --checker NAME=COMMAND"
    )


def _echo_check(
    run: Path, where: Path, cell: Cell, result: CheckResult, exp: ExpectationResult
) -> None:
    """What a check found: the verdict table, the broken promises, where
    the states are, the first violation and its repro command."""
    expectation: dict[str, Any] = {
        "ok": exp.ok,
        "status": exp.status,
        "broken": exp.broken,
        "unverified": exp.unverified,
        "errors": exp.errors,
    }
    row = {**result, "sut": cell.sut, "expectation": expectation}
    print_table(f"crashlab check {run}", [row])
    print_broken("", expectation)
    click.echo(f"{len(result['violations'])} violations; states and verdicts in {where}")
    if result["violations"]:
        v = result["violations"][0]
        first = (v["explanation"].splitlines() or [""])[0]
        click.echo(f"first: {v['state']} {v['invariant']}: {first}\n  repro: {v['repro']}")


@click.command("sweep")
@click.option(
    "--matrix",
    "matrix_name",
    default="default",
    show_default=True,
    metavar="NAME|FILE",
    help=f"which cells to run: {', '.join(sorted(MATRICES))}, or a matrix file "
    "(./crashlab.toml: your SUTs and cells)",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="sweep folder (default results/<matrix>-<UTC time>)",
)
@click.option(
    "--backend",
    type=click.Choice(BACKEND_CHOICES),
    default="auto",
    show_default=True,
    help="how cells are recorded, unless a cell names its own "
    "(auto: per cell, the first backend that can record its file system)",
)
@click.option(
    "--shard",
    "shard_spec",
    default=None,
    metavar="i/N",
    help="run only every N-th cell from the i-th (CI matrices)",
)
@_run_options
@_triage_options
def sweep_cmd(
    matrix_name: str,
    out: Path | None,
    backend: str,
    shard_spec: str | None,
    jobs: int,
    max_states: int | None,
    no_fsck: bool,
    resume: bool,
    force: bool,
    crashsafe_sample: int,
    progress: bool | None,
    progress_interval: float,
    max_first: int,
    depth: int,
    then: str,
    executor: str,
    scheduler: str | None,
    triage_sample: int,
    no_triage: bool,
) -> int:
    """Record and check every cell of a matrix; write summary.json,
    violations.jsonl and junit.xml."""
    which = parse_shard(shard_spec) if shard_spec else None
    cells = shard(matrix(matrix_name), which)
    if out is None:
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
        out = RESULTS_DIR / f"{Path(matrix_name).stem}-{stamp}"
    opts = SweepOptions(
        backend=backend,
        jobs=jobs,
        max_states=max_states,
        fsck=not no_fsck,
        crashsafe_sample=crashsafe_sample,
        composite=Composite(then=then, max_first=max_first, depth=depth, backend=backend),
        executor=executor,
        scheduler=_scheduler(executor, scheduler),
        triage=0 if no_triage else triage_sample,
    )
    with (
        output(out, SWEEP_RESULTS, "a sweep", resume=resume, force=force),
        watching(progress, "sweep", progress_interval) as watch,
    ):
        summary, code = run_sweep(
            Path(matrix_name).stem, cells, out, opts, shard=which, resume=resume, watch=watch
        )
    print_table(f"crashlab sweep {matrix_name}", summary["cells"])
    print_groups(summary["cells"], str(out))
    for c in summary["cells"]:
        print_broken(f"{c['sut']} {c['workload']} {c['strategy']}: ", c["expectation"])
    click.echo(
        f"report: {out / 'report.html'} (also report.md, summary.json, violations.jsonl, junit.xml)"
    )
    return code


@click.command("merge")
@click.argument(
    "shards", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True, file_okay=False)
)
@click.option(
    "--out", type=click.Path(path_type=Path), required=True, help="the merged sweep folder"
)
@force_option(False)
def merge_cmd(shards: tuple[Path, ...], out: Path, force: bool) -> int:
    """Merge the sweep folders of `sweep --shard 1/N` .. `N/N` into one
    (summary.json, violations.jsonl, junit.xml, report, the runs linked);
    exit as the unsharded sweep would."""
    from harness.sweep.merge import merge_shards

    with output(out, SWEEP_RESULTS, "a sweep", resume=None, force=force):
        summary, code = merge_shards(list(shards), out)
    print_table(f"crashlab merge {summary['sweep']} ({len(shards)} shards)", summary["cells"])
    print_groups(summary["cells"], str(out))
    for c in summary["cells"]:
        print_broken(f"{c['sut']} {c['workload']} {c['strategy']}: ", c["expectation"])
    click.echo(
        f"report: {out / 'report.html'} (also report.md, summary.json, violations.jsonl, junit.xml)"
    )
    return code


COMMANDS = [check_cmd, sweep_cmd, merge_cmd]
