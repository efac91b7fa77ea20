"""Crash states checked per second, where the time goes, and memory
(``crashlab bench --only sweep``).

1. ext4 + SQLite tier: real fuse recordings of sqlite-wal-full and
   sqlite-delete-extra (the default matrix's workload), every reorder state
   checked by ``check_run`` with 1 and 2 workers on the fast path (journal
   replay and extraction in process) and on the debugfs path
   (``CRASHLAB_RECOVERY=debugfs``), the reference path (a full image copy
   and fresh e2fsck/debugfs processes per state) on the first states of the
   same run.  Printed: wall states/s and CPU ms per state (parent, workers
   and their e2fsprogs processes): this machine is shared, so ``2 cores /
   CPU per state`` is what two idle cores would do.
2. DHL raw tier: a dhl-cc-raw recording (no file system), every reorder
   state by the three paths, with 1 and 2 workers: fast (the facts of a
   chunk's states in one C call, checkers/dhl_native.py), python (in memory, the
   Python checker's facts) and the reference (through files); CPU per
   state and the ratios within the one run.
3. A per-stage profile of one worker (one process, wall ms per state).

Workers (local and Dask) and memory are ``crashlab bench --only scale``.
"""

from __future__ import annotations

import os
import resource
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

from harness.check.check import CheckOptions, _chunks, check_run, default_window
from harness.check.rawpath import MemoryPath, NativePath
from harness.check.worker import StateChecker
from harness.env import recovery_path, temporary_folder
from harness.logformat import LogReader
from harness.rundir import RunDir
from harness.states import Enumeration, Options

NAME = "sweep"
JOBS = 2
MULTI = "insert:txns=10,ops=3,tables=3,warmup=100,seed=1"
PROFILE_STATES = 1000
REFERENCE_STATES = 300
T = TypeVar("T")


def _cpu() -> float:
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def tree_rss_kb(pid: int) -> int:
    """The resident memory of ``pid`` and all its descendants, in KiB: the
    sum of their PSS (/proc/PID/smaps_rollup), each shared page counted
    once in all (VmRSS would count a page a forked worker shares with its
    parent once per process)."""
    total = 0
    stack = [pid]
    while stack:
        p = stack.pop()
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
            for task in Path(f"/proc/{p}/task").iterdir():
                stack.extend(int(c) for c in (task / "children").read_text().split())
        except (OSError, ValueError):
            continue
    return total


def check_rate(
    run: RunDir,
    out: Path,
    *,
    mode: str = "fast",
    max_states: int | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    jobs: int = JOBS,
    executor: str = "local",
    states: Options | None = None,
) -> tuple[int, float, float]:
    """(states checked, wall s, CPU s) of one check (reorder unless
    ``states`` says otherwise), whole: start-up and run-level checks
    included; ``executor="dask"``: on a LocalCluster of ``jobs`` workers,
    its start included.  CPU: this process and its children, Dask's worker
    processes included once the cluster is closed."""
    with recovery_path(mode):
        shutil.rmtree(out, ignore_errors=True)
        c0, t0 = _cpu(), time.perf_counter()
        r = check_run(
            run,
            CheckOptions(
                states=states or Options(strategy="reorder"),
                jobs=jobs,
                max_states=max_states,
                executor=executor,
            ),
            out,
            on_progress=on_progress,
        )
        return r["states"]["checked"], time.perf_counter() - t0, _cpu() - c0


EXT4_MODES = (
    ("fast", "in process, debugfs and the reference as fallbacks"),
    ("debugfs", "one debugfs per worker"),
    ("reference", f"fresh e2fsprogs per state, first {REFERENCE_STATES} states"),
)


def _paths(
    run: RunDir,
    d: Path,
    tag: str,
    modes: tuple[tuple[str, str], ...],
    indent: str,
    max_states: dict[str, int],
) -> dict[tuple[str, int], float]:
    """Check ``run``'s reorder states by each path of ``modes`` with 1 and
    ``JOBS`` workers (at most ``max_states[mode]`` states); print each
    one's CPU per state (parent, workers and their helper processes) and
    what ``JOBS`` idle cores would do; return the CPU seconds per state."""
    cpu: dict[tuple[str, int], float] = {}
    for jobs in (1, JOBS):
        for mode, what in modes:
            n, wall, c = check_rate(
                run,
                d / f"{tag}.{mode}.{jobs}",
                mode=mode,
                jobs=jobs,
                max_states=max_states.get(mode),
            )
            cpu[mode, jobs] = c / n
            print(
                f"{indent}{mode} ({what}), {jobs} worker{'s' * (jobs > 1)}: {n} states, "
                f"CPU {c / n * 1000:.3f} ms/state -> {JOBS * n / c:,.0f} states/s on {JOBS} "
                f"idle cores ({n / wall:,.0f} states/s wall here)"
            )
    return cpu


def _ratios(cpu: dict[tuple[str, int], float], indent: str, others: tuple[str, ...]) -> None:
    """fast / each of ``others``, in CPU per state, with 1 and JOBS workers."""
    for jobs in (1, JOBS):
        parts = ", ".join(f"fast / {o} = {cpu[o, jobs] / cpu['fast', jobs]:.2f}x" for o in others)
        print(f"{indent}{jobs} worker{'s' * (jobs > 1)}: {parts} (CPU per state)")


def _ext4_tier(run: RunDir, sut: str, d: Path) -> None:
    """The three ext4 paths on the reorder states of ``run`` (the
    reference on the first states), with 1 and 2 workers; the ratios are
    of CPU per state within this one run."""
    print(f"  {sut} (reorder; load {os.getloadavg()[0]:.1f}):")
    cpu = _paths(run, d, sut, EXT4_MODES, "    ", {"reference": REFERENCE_STATES})
    _ratios(cpu, "    ", ("debugfs", "reference"))


RAW_MODES = (
    ("fast", "native facts, one C call per chunk"),
    ("python", "in memory, the Python checker's facts"),
    ("reference", "through files"),
)


def _raw_tier(raw: RunDir, d: Path) -> None:
    """The raw tier's three paths on every reorder state of ``raw``, with 1
    and 2 workers; the ratios are of CPU per state within this one run."""
    print(f"DHL raw tier (dhl-cc-raw, no file system, reorder; load {os.getloadavg()[0]:.1f}):")
    cpu = _paths(raw, d, "raw", RAW_MODES, "  ", {})
    _ratios(cpu, "  ", ("reference", "python"))


def _timed(stages: dict[str, float], name: str, fn: Callable[..., T]) -> Callable[..., T]:
    def wrapper(*a: Any, **k: Any) -> T:  # noqa: ANN401
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            stages[name] = stages.get(name, 0.0) + time.perf_counter() - t

    return wrapper


# the ext4 in-process path's content key, timed inside the extraction
_MEM_KEY = "db: content key from memory (inside the in-process extraction)"


def _print_profile(
    stages: dict[str, float], count: int, wall: float, extra: dict[str, Any], files: Any
) -> None:  # noqa: ANN401
    """Print _profile's stages per state, each stage's time net of the
    stages it contains; ``files``: the state checker's file path."""
    check = stages.pop("fs: check total", 0.0)
    if "fs: fast path total" in stages:  # debugfs path: _check runs inside _fast
        inner = sum(v for k, v in stages.items() if k in ("fs: debugfs open/jr/rdump/blocks/close"))
        stages["fs: debugfs path: undo parse + file walk"] = (
            stages.pop("fs: fast path total") - inner - check
        )
    if check:
        stages["fs: e2fsck -fn runs (amortised)"] = check - stages.get("fs: e2fsck cache key", 0)
    inproc = "fs: journal replay + extraction in process"
    if _MEM_KEY in stages and inproc in stages:  # it runs inside the extraction
        stages[inproc] -= stages[_MEM_KEY]
    loading = "materialise: load state into memory (raw fast path)"
    if loading in stages:  # it runs inside examine_image
        stages["db: examine in memory (recovery + checks)"] -= stages[loading]
    accounted = sum(stages.values())
    stages["enumeration, state_record, rest"] = wall - accounted
    print(f"  profile, one process, {count} states, {count / wall:,.0f} states/s wall:")
    for k, v in sorted(stages.items(), key=lambda kv: -kv[1]):
        print(f"    {v / count * 1000:6.3f} ms/state {100 * v / wall:5.1f}%  {k}")
    if extra:
        print(
            f"    fast path: {extra['fast']} states ({extra['inproc']} in process, "
            f"{extra['inproc_declined']} passed to debugfs), {extra['fallback']} fell back to "
            f"the reference; e2fsck -fn run {extra['fsck_run']}, reused "
            f"{extra['fsck_cached']}; DB facts reused {files.cache_hits}, files not "
            f"written {files.files_unwritten}"
        )


def _time_image(stages: dict[str, float], img: Any) -> None:  # noqa: ANN401
    """Time the durable image's materialising methods into ``stages``."""
    img.advance = _timed(stages, "materialise: advance durable image", img.advance)
    img.scratch = _timed(stages, "materialise: scratch (restore + overlay)", img.scratch)
    img.load_state = _timed(
        stages, "materialise: load state into memory (raw fast path)", img.load_state
    )


def _time_engine(stages: dict[str, float], ctx: Any) -> None:  # noqa: ANN401
    """Put a stand-in for the engine's checker in ``ctx`` that times its
    key, examination and judging into ``stages``."""
    ck = ctx.engine
    assert ck is not None
    ctx.engine = SimpleNamespace(
        IDS=ck.IDS,
        refused=ck.refused,
        run_checks=ck.run_checks,
        native_examiner=ck.native_examiner,
        examine_image=ck.examine_image,
        content_key=_timed(stages, "db: content key (hash extracted files)", ck.content_key),
        examine=_timed(stages, "db: examine (SUT recovery + checks, cache misses)", ck.examine),
        judge=_timed(stages, "db: judge verdicts", ck.judge),
        # the ext4 in-process path's key, counted apart below
        content_key_of=None
        if ck.content_key_of is None
        else _timed(stages, _MEM_KEY, ck.content_key_of),
    )


def _time_raw_paths(stages: dict[str, float], sc: StateChecker) -> Any:  # noqa: ANN401
    """Time the raw tier's native and in-memory paths of ``sc`` into
    ``stages``; the native examiner (None: not that path)."""
    native = sc.path.native if isinstance(sc.path, NativePath) else None
    if native is not None:  # as a check takes them: a chunk's states in one call
        native.examine_chunk = _timed(  # type: ignore[method-assign]  # the bench wraps a method in a timer
            stages,
            "db: native facts (one C call per chunk: images, engine, own reader)",
            native.examine_chunk,
        )
        native.facts = _timed(  # type: ignore[method-assign]  # the bench wraps a method in a timer
            stages, "db: parse native facts (new facts only)", native.facts
        )
    memory = sc.path.memory if isinstance(sc.path, NativePath) else sc.path
    if isinstance(memory, MemoryPath):  # it calls the loading, counted apart below
        memory.examine_image = _timed(
            stages, "db: examine in memory (recovery + checks)", memory.examine_image
        )
    return native


def _time_fast(stages: dict[str, float], fast: Any) -> None:  # noqa: ANN401
    """Time the ext4 fast path's stages (its debugfs session's requests
    too) into ``stages``."""
    fast._fsck_key = _timed(stages, "fs: e2fsck cache key", fast._fsck_key)
    fast._check = _timed(stages, "fs: check total", fast._check)
    fast._fast = _timed(stages, "fs: fast path total", fast._fast)
    real_debugfs = fast._debugfs

    def debugfs() -> Any:  # noqa: ANN401
        s = real_debugfs()
        if not hasattr(s, "_timed"):
            s.request = _timed(stages, "fs: debugfs open/jr/rdump/blocks/close", s.request)
            s._timed = True
        return s

    fast._debugfs = debugfs


def _feed(sc: StateChecker, run: RunDir, n: int, native: object) -> int:
    """Check the first ``n`` reorder states of ``run`` with ``sc`` (in
    chunks on the native path, as a worker does): how many were checked."""
    count = 0
    with LogReader(run.log) as r:
        states = Enumeration(r, default_window(run, Options(strategy="reorder")))
        if native is not None:  # the states.jsonl lines, as a worker makes them
            for chunk in _chunks(iter(states), 0, n):
                sc.lines(chunk)
                count += len(chunk)
        else:
            for state in states:
                sc.record(state)
                count += 1
                if count >= n:
                    break
    return count


def _profile(run: RunDir, work: Path, n: int) -> None:
    """Wall ms per state of each stage in one worker (sequential, so the
    helper processes' time is inside the stage that waits for them)."""
    import harness.fs.ext4.fast as ext4fast

    stages: dict[str, float] = {}
    sc = StateChecker(run, work / "profile", fast=True)
    _time_image(stages, sc.image)
    _time_engine(stages, sc.ctx)
    native = _time_raw_paths(stages, sc)
    saved = ext4fast.recover_ext4
    ext4fast.recover_ext4 = _timed(
        stages, "fs: reference fallback (full copy + e2fsprogs)", ext4fast.recover_ext4
    )
    sc.ctx.fsobj = SimpleNamespace(  # type: ignore[assignment]  # the bench swaps in a timed stand-in
        recover=_timed(stages, "fs: recover (raw: move the image)", sc.ctx.fsobj.recover)
    )
    saved_inproc = ext4fast.replay_and_extract
    ext4fast.replay_and_extract = _timed(
        stages, "fs: journal replay + extraction in process", ext4fast.replay_and_extract
    )
    fast = sc.files.fast
    if fast is not None:
        _time_fast(stages, fast)
    count = 0
    t0 = time.perf_counter()
    try:
        count = _feed(sc, run, n, native)
    finally:
        ext4fast.recover_ext4 = saved
        ext4fast.replay_and_extract = saved_inproc
        wall = time.perf_counter() - t0
        extra = dict(fast.stats) if fast is not None else {}
        sc.close()
    _print_profile(stages, count, wall, extra, sc.files)


def run() -> None:
    from harness.record.fuse import FuseBackend
    from harness.sweep.matrix import Cell
    from harness.sweep.sweep import record_cell

    ok, why = FuseBackend.available()
    if not ok or os.geteuid() != 0:
        print(f"skipped: recording needs root and the fuse backend ({why})")
        return
    with temporary_folder("crashlab-bench-sweep-") as d:
        print("ext4 + SQLite tier (fuse recording, reorder, every state):")
        for sut in ("sqlite-wal-full", "sqlite-delete-extra"):
            _ext4_tier(record_cell(Cell(sut, MULTI), d / sut, "fuse", False), sut, d)
        _profile(RunDir(d / "sqlite-wal-full"), d, PROFILE_STATES)
        raw = record_cell(Cell("dhl-cc-raw", MULTI, fs="raw"), d / "dhl-cc-raw", "fuse", False)
        _raw_tier(raw, d)
        _profile(raw, d, PROFILE_STATES)
