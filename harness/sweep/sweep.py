"""``crashlab sweep``: record and check every cell of a matrix, then write
the sweep's outputs.

    SWEEP/runs/<cell>/            the recorded run (writes.log, meta.json)
    SWEEP/runs/<cell>/check/<tag> its states.jsonl and result.json per strategy
    SWEEP/summary.json            per cell: states, verdict counts, expectation
                                  (a shard's also names its matrix and i/N:
                                  harness/sweep/merge.py puts shards together)
    SWEEP/violations.jsonl        every failing (state, invariant), repro command
    SWEEP/junit.xml               one test case per cell
    SWEEP/timing.json             wall times (kept out of summary.json, which
                                  is identical for identical sweeps)

``resume`` skips what is complete (a run with a meta.json whose command
succeeded, a check with a result.json) and resumes interrupted checks.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from harness.atomic import write_json_atomic, write_text_atomic
from harness.check.check import CheckOptions, check_run, count_states, options_for
from harness.check.multicrash import Composite
from harness.check.records import CheckResult
from harness.check.window import default_window
from harness.errors import CrashlabError
from harness.faults import DEVICE, PROCESS, by_stage, fault_specs
from harness.outlock import locked_output
from harness.record.recorder import RecordRequest, record
from harness.report.junit import write_junit
from harness.rundir import RESULT_NAME, RUNS_DIR, RunDir, SweepDir
from harness.states import Options
from harness.sweep.expectations import ExpectationResult, evaluate_result, exit_code
from harness.sweep.matrix import Cell, Shard
from harness.sweep.triaged import (
    TRIAGED_NAME,
    GroupOf,
    load_triaged,
    save_triaged,
    triage_groups,
)
from harness.triage.groups import PER_INVARIANT

CheckHook = Callable[[int, int], None]  # a check's progress: (done, checked), check_run's hook


class Watch(Protocol):
    """Whoever watches a sweep or a check (the command line's progress),
    told of each step as it starts and ends."""

    def cell(self, index: int, count: int, name: str) -> None:
        """Cell ``index`` (from 1) of ``count`` starts: it is recorded."""

    def check(self, label: str, total: int | None) -> CheckHook:
        """A check of ``total`` states (None: not known ahead) starts;
        returns its progress hook."""

    def checked(self, label: str, result: CheckResult, status: str) -> None:
        """That check ended with ``result``; its expectation's ``status``."""

    def step(self, what: str) -> None:
        """Another step starts (the sweep's outputs are written)."""

    def finished(self, ok: bool) -> None:
        """The sweep ended; ``ok``: every expectation held."""


@dataclass
class SweepOptions:
    backend: str = "auto"
    jobs: int = 0
    max_states: int | None = None
    fsck: bool = True
    crashsafe_sample: int = 4
    base_states: Options = Options()
    composite: Composite = Composite()  # options of multicrash / recovery-crash cells
    executor: str = "local"  # where states are checked (CheckOptions.executor)
    scheduler: str | None = None
    triage: int = PER_INVARIANT  # failing states minimised per invariant; 0: no triage


def floors_apply(opts: SweepOptions) -> bool:
    """Whether the matrix's coverage floors hold this sweep's checks: they
    were measured with the default enumeration, so a sweep that narrows it
    on purpose (``--max-states``, ``--max-first``, ``--depth``, ``--then``)
    is not held to them."""
    narrowing = ("then", "max_first", "depth")
    comp, default = opts.composite, Composite()
    return (
        opts.max_states is None
        and opts.base_states == Options()
        and all(getattr(comp, k) == getattr(default, k) for k in narrowing)
    )


def expected_exit(cell: Cell) -> tuple[int, ...] | None:
    """The exit statuses of a successful recording of ``cell``: 0; with a
    device fault also 3 (the runner stopped after a failed transaction); with
    a process crash also 137 (killed by SIGKILL at its mark).  None: any (a
    user's command under a device fault may fail as it likes: the recording
    is still whole)."""
    if cell.user is not None and by_stage(cell.faults, DEVICE):
        return None
    return (
        0,
        *((3,) if by_stage(cell.faults, DEVICE) else ()),
        *((128 + 9,) if by_stage(cell.faults, PROCESS) else ()),
    )


def record_cell(cell: Cell, run_dir: Path, backend: str, resume: bool) -> RunDir:
    """Record the cell's workload unless a complete recording is there."""
    run = RunDir(run_dir)
    ok = expected_exit(cell)
    if resume and run.meta_path.exists():
        meta = run.meta()
        if (ok is None or meta.exit_status in ok) and run.log.exists():
            return run
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    if cell.user is not None:
        run = record(
            RecordRequest(
                ["sh", "-c", cell.user.run],
                run_dir,
                fs=cell.fs,
                backend=backend,
                extra_meta={"user_sut": cell.user.name},
                faults=cell.faults,
                blktrace=cell.blktrace,
            )
        )
    else:
        from workloads.run import record_workload

        run = record_workload(
            cell.sut,
            cell.workload,
            run_dir,
            fs=cell.fs,
            backend=backend,
            faults=cell.faults,
            blktrace=cell.blktrace,
        )
    if ok is not None and run.meta().exit_status not in ok:
        raise CrashlabError(f"{run_dir}: the workload failed while recording (see meta.json)")
    return run


def build_user_suts(cells: list[Cell]) -> None:
    """Run each user SUT's build command once, in its file's folder."""
    for user in {c.user.name: c.user for c in cells if c.user and c.user.build}.values():
        p = subprocess.run(
            ["sh", "-c", user.build], cwd=user.folder, capture_output=True, text=True
        )
        if p.returncode != 0:
            tail = (p.stderr.strip() or p.stdout.strip()).splitlines()[-1:] or ["no output"]
            raise CrashlabError(
                f"building SUT {user.name}: `{user.build}` exited {p.returncode}: {tail[0]}"
            )


def cell_record(
    cell: Cell, strategy: str, result: CheckResult, exp: ExpectationResult
) -> dict[str, Any]:
    """One summary.json cell: what was checked and whether it met its
    expectation."""
    return {
        "sut": cell.sut,
        "workload": cell.workload_label,
        "fs": cell.fs,
        "strategy": strategy,
        **({"faults": fault_specs(cell.faults)} if cell.faults else {}),
        "run": f"runs/{cell.name}",
        "states": result["states"],
        # totals only: the per-epoch figures stay in the run's result.json
        "coverage": {k: v for k, v in result.get("coverage", {}).items() if k != "epochs"},
        "verdicts": result["verdicts"],
        "expectation": {
            "guaranteed": list(cell.expectation(strategy).guaranteed),
            "must_violate_any": list(cell.must_violate_any),
            "status": exp.status,
            "ok": exp.ok,
            "broken": exp.broken,
            "unverified": exp.unverified,
            **({"errors": exp.errors} if exp.errors else {}),
        },
        # why promised invariants were skipped, by reason (the report groups them)
        "skips": {
            inv: result.get("skips", {}).get(inv, {})
            for inv in cell.expectation(strategy).guaranteed
            if result.get("skips", {}).get(inv)
        },
    }


def _check_options(cell: Cell, strategy: str, opts: SweepOptions) -> CheckOptions:
    """The options of the check of ``cell`` under ``strategy``: the
    sweep's, with the cell's own state options and faults."""
    return options_for(
        strategy,
        CheckOptions(
            states=dataclasses.replace(
                cell.state_options(opts.base_states), faults=cell.state_faults
            ),
            max_states=opts.max_states,
            jobs=opts.jobs,
            fsck=opts.fsck,
            crashsafe_sample=opts.crashsafe_sample,
            composite=dataclasses.replace(opts.composite, backend=opts.backend),
            checkers=cell.all_checkers,
            executor=opts.executor,
            scheduler=opts.scheduler,
        ),
    )


def _check_strategy(
    run: RunDir,
    cell: Cell,
    strategy: str,
    opts: SweepOptions,
    resume: bool,
    watch: Watch | None,
) -> tuple[CheckResult, Path, bool]:
    """Check the recorded ``run`` of ``cell`` under ``strategy``; with
    ``resume``, a check with a result.json is read back, not redone.
    Returns the result, the check's folder and whether it was read back."""
    copts = _check_options(cell, strategy, opts)
    check_dir = run.check_dir(copts.tag())
    done = check_dir / RESULT_NAME
    if resume and done.exists():
        result: CheckResult = json.loads(done.read_text())
        return result, check_dir, True
    (check_dir / TRIAGED_NAME).unlink(missing_ok=True)  # of an earlier check: triaged again
    hook = None
    if watch is not None:
        hook = watch.check(label(cell, strategy), total_states(run, copts))
    return check_run(run, copts, check_dir, resume=resume, on_progress=hook), check_dir, False


def label(cell: Cell, strategy: str) -> str:
    """A check's name in the progress: ``SUT strategy``."""
    return f"{cell.sut} {strategy}"


def total_states(run: RunDir, opts: CheckOptions) -> int | None:
    """The states a check of ``run`` goes through (before dedup), or None
    for multicrash and recovery-crash, which find theirs as they go."""
    if opts.composite is not None:
        return None
    return count_states(run, default_window(run, opts.states))


def _violation_rows(
    cell: Cell, strategy: str, result: CheckResult, group_of: dict[tuple[str, str], str]
) -> list[dict[str, Any]]:
    """violations.jsonl lines of one check: each violation with its cell
    and its group (None: not minimised nor assigned, or not triaged)."""
    return [
        {
            "sut": cell.sut,
            "workload": cell.workload_label,
            "fs": cell.fs,
            "strategy": strategy,
            **({"faults": fault_specs(cell.faults)} if cell.faults else {}),
            **v,
            "group": group_of.get((v.get("state", ""), v.get("invariant", ""))),
        }
        for v in result["violations"]
    ]


def _triage(
    cell: Cell, check_dir: Path, result: CheckResult, opts: SweepOptions, reused: bool
) -> tuple[list[dict[str, Any]] | None, GroupOf, str | None]:
    """The groups of a cell's check (None: --no-triage, or the triage
    failed), the group of each violation, and why the triage failed (one
    line; None: it did not).  A check without violations is not triaged;
    a check read back on --resume is not triaged again when its triage
    with the same options was recorded (:func:`load_triaged`).  A triage
    that fails is that cell's error: the sweep goes on."""
    if not opts.triage:
        return None, {}, None
    if not result["violations"]:
        return [], {}, None
    checkers = cell.all_checkers
    if reused:
        done = load_triaged(check_dir, opts.triage, checkers)
        if done is not None:
            return done[0], done[1], None
    try:
        records, group_of = triage_groups(
            check_dir, f"{RUNS_DIR}/{cell.name}", opts.triage, checkers, opts.jobs
        )
    except Exception as e:  # noqa: BLE001 (any failure of one cell's triage is reported there)
        return None, {}, one_line(e)
    save_triaged(check_dir, opts.triage, checkers, records, group_of)
    return records, group_of, None


def one_line(e: Exception) -> str:
    """An exception as one line: a CrashlabError's own, else its type and
    the first line of its message."""
    text = str(e).strip().splitlines()
    head = text[0] if text else ""
    return head if isinstance(e, CrashlabError) else f"{type(e).__name__}: {head}".rstrip(": ")


def run_sweep(
    name: str,
    cells: list[Cell],
    out: Path,
    opts: SweepOptions,
    *,
    shard: Shard | None = None,
    resume: bool = False,
    watch: Watch | None = None,
) -> tuple[dict[str, Any], int]:
    """Run the sweep of matrix ``name`` (``cells``: shard ``shard`` of it,
    when given); return summary.json's content and the exit code.  ``out``
    is locked throughout (harness/outlock.py): a second sweep into it is
    refused.  ``watch`` is told of every step."""
    with locked_output(out):
        return _sweep_into(
            SweepDir(out),
            name,
            cells,
            opts,
            shard=shard,
            resume=resume,
            watch=watch,
        )


def _sweep_into(
    sweep: SweepDir,
    name: str,
    cells: list[Cell],
    opts: SweepOptions,
    *,
    shard: Shard | None,
    resume: bool,
    watch: Watch | None,
) -> tuple[dict[str, Any], int]:
    """:func:`run_sweep` into the locked folder ``sweep``."""
    cell_records: list[dict[str, Any]] = []
    violations: list[dict[str, Any]] = []
    timing: dict[str, Any] = {}
    results: list[ExpectationResult] = []
    build_user_suts(cells)
    for index, cell in enumerate(cells, 1):
        t0 = time.monotonic()
        if watch is not None:
            watch.cell(index, len(cells), cell.name)
        run = record_cell(cell, sweep.run(cell.name).path, cell.backend or opts.backend, resume)
        timing[cell.name] = {"record_s": round(time.monotonic() - t0, 3)}
        for strategy in cell.strategies:
            t1 = time.monotonic()
            result, check_dir, reused = _check_strategy(run, cell, strategy, opts, resume, watch)
            expect = cell.expectation(strategy)
            if not floors_apply(opts):
                expect = dataclasses.replace(expect, floor=None)
            exp = evaluate_result(expect, result)
            if watch is not None:
                watch.checked(label(cell, strategy), result, exp.status)
            results.append(exp)
            t2 = time.monotonic()
            if result["violations"] and opts.triage and watch is not None:
                watch.step(f"triage {cell.name} {strategy}")
            groups, group_of, failed = _triage(cell, check_dir, result, opts, reused)
            record = cell_record(cell, strategy, result, exp)
            if groups is not None:
                record["groups"] = groups
            if failed is not None:
                record["triage_error"] = failed
                if watch is not None:
                    watch.step(f"triage {cell.name} {strategy} failed: {failed}")
            cell_records.append(record)
            violations.extend(_violation_rows(cell, strategy, result, group_of))
            timing[cell.name][strategy] = round(t2 - t1, 3)
            timing[cell.name][f"{strategy}_triage"] = round(time.monotonic() - t2, 3)
    code = exit_code(results)
    summary: dict[str, Any] = {"sweep": name, "ok": code == 0, "cells": cell_records}
    if shard is not None:  # what `crashlab merge` needs to put the shards together
        summary["sweep"] = f"{name}-{shard[0]}of{shard[1]}"
        summary["shard"] = {"matrix": name, "index": shard[0], "of": shard[1]}
    if watch is not None:
        watch.step("write summary.json, violations.jsonl, junit.xml and the reports")
    write_outputs(sweep, summary, violations, timing)
    if watch is not None:
        watch.finished(code == 0)
    return summary, code


def write_outputs(
    sweep: SweepDir,
    summary: dict[str, Any],
    violations: list[dict[str, Any]],
    timing: dict[str, Any],
) -> None:
    """A sweep folder's files beside its runs: summary.json,
    violations.jsonl, junit.xml, timing.json, then the reports."""
    write_json_atomic(sweep.summary, summary)
    write_text_atomic(
        sweep.violations, "".join(json.dumps(v, sort_keys=True) + "\n" for v in violations)
    )
    write_junit(sweep.junit, summary["sweep"], summary["cells"])
    write_json_atomic(sweep.timing, timing)
    from harness.report.write import write_reports  # matplotlib is loaded only here

    write_reports(sweep.path)  # report.html, report.md, plots/ from the files just written
