"""Workers and memory (``crashlab bench --only scale``).

1. Workers: every reorder state of one DHL raw recording (dhl-cc-raw, 200
   update transactions, about 20,000 states) checked with 1 and with 2
   local worker processes and on a Dask LocalCluster of 2 worker processes
   (scheduler and workers on 127.0.0.1, its start included): states/s and
   the ratios, measured in one run.
2. Memory: peak RSS of one ``crashlab check`` process, its workers and
   their helper processes together (their PSS summed: a page a forked
   worker shares with its parent counts once; sampled from /proc) after
   10^4, 10^5 and 10^6 states of one long DHL raw check (an update workload: the database
   keeps its size, so the raw device holds it): flat means equal; 10^6
   must stay within ``RSS_BUDGET_MIB``.  ``CRASHLAB_BENCH_SWEEP_STATES``
   lowers the big count on a slow machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from harness.bench.sweep import JOBS, check_rate, tree_rss_kb
from harness.env import bench_sweep_states, temporary_folder
from harness.errors import CrashlabError
from harness.rundir import STATES_NAME, RunDir

NAME = "scale"
SCALING_WORKLOAD = "update:txns=200,ops=6,tables=3,size=400,order=rand,warmup=30,seed=1"
RSS_BUDGET_MIB = 300  # peak RSS of a check at 10^6 states
SAMPLE_S = 0.2  # how often the memory part samples the check's process tree
STATES_PER_TXN = 80  # reorder states per transaction of the memory workload, after dedup


def workers(run: RunDir, d: Path, max_states: int | None = None) -> dict[str, float]:
    """States/s of the same check on 1 and 2 local workers and on a Dask
    LocalCluster of 2; prints each and the ratios; returns the rates."""
    rates = {}
    for label, jobs, executor in (
        ("--jobs 1", 1, "local"),
        ("--jobs 2", 2, "local"),
        ("LocalCluster, 2 workers", 2, "dask"),
    ):
        n, wall, cpu = check_rate(
            run, d / f"scale-{jobs}-{executor}", jobs=jobs, executor=executor, max_states=max_states
        )
        rates[label] = n / wall
        print(
            f"  {label}: {n} states in {wall:.1f} s = {n / wall:,.0f} states/s "
            f"(CPU {cpu / n * 1000:.2f} ms/state)"
        )
    print(
        f"  --jobs 2 / --jobs 1 = {rates['--jobs 2'] / rates['--jobs 1']:.2f}x; "
        f"LocalCluster / --jobs 2 = "
        f"{rates['LocalCluster, 2 workers'] / rates['--jobs 2']:.2f}x"
    )
    return rates


def _crashlab() -> str:
    """The ``crashlab`` command of this environment (the virtualenv's)."""
    beside = Path(sys.executable).with_name("crashlab")
    found = str(beside) if beside.exists() else shutil.which("crashlab")
    if found is None:
        raise CrashlabError("crashlab: command not found beside this Python or on PATH")
    return found


def memory(run: RunDir, out: Path, marks: tuple[int, ...]) -> None:
    """Peak PSS of one ``crashlab check`` of ``marks[-1]`` reorder states
    by JOBS workers, at each number of states in ``marks``.  The check is
    a process of its own, as a user runs it (this bench's process holds the
    earlier parts' imports and Dask cluster); its tree is sampled every
    SAMPLE_S, its states counted from the lines of its states.jsonl."""
    cmd = [
        _crashlab(),
        "check",
        str(run.path),
        "--strategy",
        "reorder",
        "--jobs",
        str(JOBS),
        "--max-states",
        str(marks[-1]),
        "--out",
        str(out),
        "--no-progress",
    ]
    states = out / STATES_NAME
    peak, checked, read = 0, 0, 0
    at: dict[int, int] = {}
    t0 = time.perf_counter()
    errors = out.with_name(out.name + ".stderr")  # a file: a full pipe would stall the check
    with open(errors, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
    try:
        while True:
            running = proc.poll() is None
            if running:
                peak = max(peak, tree_rss_kb(proc.pid))
            if states.exists():
                with open(states, "rb") as f:
                    f.seek(read)
                    new = f.read()
                read += len(new)
                checked += new.count(b"\n")
            at.update({m: peak for m in marks if m not in at and checked >= m})
            if not running:
                break
            time.sleep(SAMPLE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = errors.read_text(errors="replace").strip().splitlines()[-1:]
        raise CrashlabError(f"{' '.join(cmd)}: exit {proc.returncode}: {' '.join(tail)}")
    shown = ", ".join(f"{m:,} states {at[m] / 1024:.1f} MiB" for m in marks if m in at)
    verdict = "within" if peak / 1024 <= RSS_BUDGET_MIB else "OVER"
    print(
        f"  peak PSS of `crashlab check --jobs {JOBS}` (parent, workers, helpers): {shown}; "
        f"the whole check (its run-level stage and summary after the states) "
        f"{peak / 1024:.1f} MiB ({checked:,} states checked, {checked / wall:,.0f} states/s; "
        f"{verdict} the {RSS_BUDGET_MIB} MiB budget)"
    )


def run() -> None:
    from harness.record.fuse import FuseBackend
    from harness.sweep.matrix import Cell
    from harness.sweep.sweep import record_cell

    ok, why = FuseBackend.available()
    if not ok or os.geteuid() != 0:
        print(f"skipped: recording needs root and the fuse backend ({why})")
        return
    big = bench_sweep_states()
    marks = tuple(m for m in (10_000, 100_000) if m < big) + (big,)
    with temporary_folder("crashlab-bench-scale-") as d:
        print(f"workers (dhl-cc-raw, {SCALING_WORKLOAD}, reorder, every state):")
        scale = record_cell(
            Cell("dhl-cc-raw", SCALING_WORKLOAD, fs="raw"), d / "scale", "fuse", False
        )
        workers(scale, d)
        txns = big // STATES_PER_TXN + 10
        wl = f"update:txns={txns},ops=6,tables=3,size=400,order=rand,warmup=30,seed=1"
        print(f"memory (dhl-cc-raw, {wl}, reorder, {JOBS} workers):")
        huge = record_cell(Cell("dhl-cc-raw", wl, fs="raw"), d / "huge", "fuse", False)
        memory(huge, d / "huge.check", marks)
