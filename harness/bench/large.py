"""The large matrix: its size, its time, and how it scales
(``crashlab bench --only large``).

1. Size: every cell of ``--matrix large`` recorded here (fuse) and its
   states enumerated (before dedup: the progress bar's total), per cell
   and strategy — exact, and cheap (no state is checked).
2. Time, from a cheap subset: the first ``SUBSET`` states of every cell
   and strategy checked with 2 workers; from the progress callbacks, the
   check's fixed part (its start, the run-level checks) and its steady
   states/s; the whole matrix's time projected as recording + fixed parts
   + states / steady rate.  The time of a whole run measured by hand, when
   one is stored in ``MEASURED`` (JSON), is printed beside it.
3. Scaling: one cell's first ``SCALING_STATES`` reorder states on 1 and 2
   local workers and on a Dask LocalCluster of 2 (harness/bench/scale.py);
   the client's CPU per state while states flow (with the LocalCluster its
   scheduler too): what caps the rate however many workers there are; and
   the matrix's time projected to 16 and 64 workers under the assumptions
   printed with it.
"""

from __future__ import annotations

import json
import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path

from harness.bench.scale import workers
from harness.bench.sweep import JOBS, check_rate
from harness.check.check import count_states, default_window
from harness.env import temporary_folder
from harness.rundir import RunDir
from harness.states import Options

NAME = "large"
SUBSET = 300  # states checked per cell and strategy for the time
SCALING_CELL = ("dhl-cc", "insert:txns=1000,ops=16")  # its reorder states for the scaling
SCALING_STATES = 3000
PROJECT_TO = (16, 64)
MEASURED = Path(__file__).with_name("large_measured.json")


@dataclass
class Part:
    """One cell and strategy of the matrix."""

    cell: str
    strategy: str
    states: int  # enumerated, before dedup
    record_s: float  # the cell's recording (counted once per cell)
    fixed_s: float = 0.0  # the check's start and run-level checks
    rate: float = 0.0  # steady states/s with JOBS workers


def _steady(run: RunDir, out: Path, states: Options, n: int) -> tuple[float, float]:
    """(fixed seconds, steady states/s) of a check of the first ``n``
    states: the rate between the first and the last chunk, the rest of the
    wall time fixed."""
    marks: list[tuple[float, int]] = []

    def note(generated: int, checked: int) -> None:
        marks.append((time.perf_counter(), checked))

    checked, wall, _ = check_rate(run, out, max_states=n, on_progress=note, states=states)
    if len(marks) < 2 or marks[-1][0] == marks[0][0]:
        return wall, checked / wall
    (t0, c0), (t1, c1) = marks[0], marks[-1]
    rate = (c1 - c0) / (t1 - t0)
    return max(0.0, wall - checked / rate), rate


def _client_cpu(run: RunDir, out: Path, executor: str, n: int) -> float:
    """CPU seconds per state of this process (the client; with a
    LocalCluster also its scheduler, which runs in it) while states flow:
    between the first and the last chunk, so neither the start nor the
    run-level checks count."""
    marks: list[tuple[float, int]] = []

    def note(generated: int, checked: int) -> None:
        r = resource.getrusage(resource.RUSAGE_SELF)
        marks.append((r.ru_utime + r.ru_stime, checked))

    check_rate(run, out, jobs=JOBS, executor=executor, max_states=n, on_progress=note)
    (c0, n0), (c1, n1) = marks[0], marks[-1]
    return (c1 - c0) / max(1, n1 - n0)


def _hms(s: float) -> str:
    return f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.0f} min"


def _scaling(run: RunDir, name: str, d: Path, parts: list[Part], serial_s: float) -> None:
    """Print how the matrix scales with workers, measured on the cell
    ``name`` (its run ``run``) and projected over ``parts``; ``serial_s``:
    the recording and the checks' fixed parts, serial on the client."""
    print(f"scaling ({name}, first {SCALING_STATES} reorder states):")
    rates = workers(run, d / "scaling", SCALING_STATES)
    local = _client_cpu(run, d / "cpu-local", "local", SCALING_STATES)
    client = _client_cpu(run, d / "cpu-dask", "dask", SCALING_STATES)
    per_worker = rates["--jobs 1"]
    ceiling = 1 / client
    print(
        f"  client CPU per state while states flow: {local * 1e3:.2f} ms with local "
        f"workers, {client * 1e3:.2f} ms with the LocalCluster (its scheduler included)"
    )
    # each part's rate on one worker: its 2-worker rate over the
    # measured 2-worker speed-up; on N workers, capped by the client
    speedup = rates["--jobs 2"] / rates["--jobs 1"]
    for n in PROJECT_TO:
        t = serial_s + sum(p.states / min(n * p.rate / speedup, ceiling) for p in parts)
        bound = "worker-bound" if n * per_worker < ceiling else "client-bound"
        print(
            f"  {n} workers: {min(n * per_worker, ceiling):,.0f} states/s on this cell "
            f"({bound}); the matrix in {_hms(t)}"
        )
    print(
        "  assumptions: each worker has a core as fast as one here (the 1-worker rate); "
        "the client and scheduler cost what they cost here per state, and their "
        f"CPU caps the rate ({ceiling:,.0f} states/s); recording and each check's fixed "
        "part stay serial on the client; the log and base image come from a shared "
        "folder, read once per worker; the network is no limit (a chunk of 32 states is "
        "a few hundred bytes each way)"
    )


def run() -> None:
    from harness.record.fuse import FuseBackend
    from harness.sweep.matrix import matrix
    from harness.sweep.sweep import record_cell

    ok, why = FuseBackend.available()
    if not ok or os.geteuid() != 0:
        print(f"skipped: recording needs root and the fuse backend ({why})")
        return
    cells = matrix("large")
    with temporary_folder("crashlab-bench-large-") as d:
        parts: list[Part] = []
        runs: dict[str, RunDir] = {}
        for cell in cells:
            t0 = time.perf_counter()
            runs[cell.name] = record_cell(cell, d / cell.name, "fuse", False)
            rec = time.perf_counter() - t0
            for i, strategy in enumerate(cell.strategies):
                opts = cell.state_options(Options(strategy=strategy))
                n = count_states(runs[cell.name], default_window(runs[cell.name], opts))
                parts.append(Part(cell.name, strategy, n, rec if i == 0 else 0.0))
        total = sum(p.states for p in parts)
        record_s = sum(p.record_s for p in parts)
        print(
            f"size: {len(cells)} cells, {len(parts)} cell-strategies, {total:,} states "
            f"(enumerated, before dedup), recorded here in {record_s:.0f} s; largest: "
            + ", ".join(
                f"{p.cell} {p.strategy} {p.states:,}"
                for p in sorted(parts, key=lambda p: -p.states)[:3]
            )
        )

        for p in parts:
            cell = next(c for c in cells if c.name == p.cell)
            opts = cell.state_options(Options(strategy=p.strategy))
            p.fixed_s, p.rate = _steady(runs[p.cell], d / "subset", opts, SUBSET)
        fixed = sum(p.fixed_s for p in parts)
        states_s = sum(p.states / p.rate for p in parts)
        print(
            f"time (projected from the first {SUBSET} states of each, {JOBS} workers): "
            f"{_hms(record_s + fixed + states_s)} = recording {record_s:.0f} s + fixed "
            f"parts of the checks {fixed:.0f} s + states {states_s:.0f} s "
            f"({total / states_s:,.0f} states/s on average)"
        )
        if MEASURED.exists():
            m = json.loads(MEASURED.read_text())
            print(
                f"time (measured, {m['when']}, `{m['command']}`): {m['checked']:,} states "
                f"checked ({m['generated']:,} enumerated, {m['folded']:,} folded) in "
                f"{_hms(m['wall_s'])} wall, {_hms(m['cpu_s'])} CPU; {m['note']}"
            )

        sut, prefix = SCALING_CELL
        name = next(c.name for c in cells if c.sut == sut and c.workload.startswith(prefix))
        _scaling(runs[name], name, d, parts, record_s + fixed)
