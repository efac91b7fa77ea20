"""Cross-validation of the fuse recorder against the kernel's dm-log-writes
(the qemu backend): the same SUTs and workload recorded by both, checked
with the prefix and reorder strategies, and the two tables of
harness/record/crossval.py printed (Markdown), with each recording's time."""

from __future__ import annotations

from pathlib import Path

from harness.check.check import CheckOptions, check_run, options_for
from harness.env import temporary_folder
from harness.record.backends import BACKENDS
from harness.record.crossval import compare, markdown
from harness.rundir import RunDir
from harness.sweep.matrix import MULTI

NAME = "crossval"
# two correct configurations, and two whose documented weaknesses both must find
SUTS = ("sqlite-wal-full", "sqlite-delete-extra", "sqlite-delete-full", "sqlite-off")
BACKEND_PAIR = ("fuse", "qemu")
STRATEGIES = ("prefix", "reorder")


def record_and_check(
    root: Path, suts: tuple[str, ...] = SUTS, workload: str = MULTI
) -> dict[str, dict[str, RunDir]]:
    """Record each SUT with each backend of BACKEND_PAIR under ``root`` and
    check it with each of STRATEGIES."""
    from workloads.run import record_workload

    runs: dict[str, dict[str, RunDir]] = {}
    for sut in suts:
        for be in BACKEND_PAIR:
            run = record_workload(sut, workload, root / f"{sut}-{be}", backend=be)
            for st in STRATEGIES:
                check_run(run, options_for(st, CheckOptions()))
            runs.setdefault(sut, {})[be] = run
    return runs


def run() -> None:
    for be in BACKEND_PAIR:
        ok, why = BACKENDS[be].available()
        if not ok:
            print(f"skipped: the {be} backend is unavailable ({why})")
            return
    with temporary_folder("crashlab-bench-") as work:
        runs = record_and_check(work)
        for sut, by_be in runs.items():
            for be, r in by_be.items():
                m = r.meta()
                print(f"{sut} {be}: recorded in {m.wall_time_s:.2f} s on {m.kernel}")
        print()
        print(markdown(compare(runs)))
