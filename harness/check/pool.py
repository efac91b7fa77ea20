"""The worker side of ``crashlab check``: the processes that check chunks
of states, for :mod:`harness.check.check` (local worker processes) and
:mod:`harness.check.cluster` (the workers of a Dask cluster).

A chunk travels as its epoch's number and its states' keys (:data:`Task`):
each worker reads the log's epochs itself (in order, one in memory,
:class:`_EpochCursor`), so a state of a 20,000-write epoch costs a few
bytes of IPC, not a pickled copy of its epoch.  A worker process holds one
state checker (:class:`harness.check.worker.StateChecker`), made by
:func:`init_worker` and closed by :func:`close_worker`; what it returns for
a chunk are the chunk's states.jsonl lines, made in the worker: the parent
only writes them.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.util
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.pool import Pool
from pathlib import Path
from typing import Any

from checkers.protocol import RunFacts
from harness.check.usercheck import PyChecker, UserChecker
from harness.check.worker import StateChecker
from harness.env import work_folder
from harness.errors import CrashlabError, located
from harness.logformat import LogReader
from harness.rundir import RunDir
from harness.states import State
from harness.states.epochs import Epoch, iter_epochs, merge_epochs
from harness.states.inject import Spans
from harness.states.stateid import StateKey
from harness.sysops import signals_blocked, signals_deferred, worker_signals

SHARED = "shared"  # the folder of the work root the workers share (StateChecker)

# A chunk as sent to a worker: its epoch's number (and the last epoch merged
# into it by a lost flush, or None) and, per state, its key's fields (a plain
# tuple: a dataclass pickles several times slower) and ordinal (what
# rebuilds the State there).
KeyFields = tuple[
    int,
    int,
    tuple[tuple[int, int], ...],
    int | None,
    tuple[int, int] | None,
    tuple[int, int] | None,
]
Task = tuple[int, int | None, list[tuple[KeyFields, int | None]]]


class _EpochCursor:
    """The log's epochs in order, for a worker: chunks arrive in log order,
    so the cursor only moves forward (an earlier epoch restarts it).  It
    keeps the epochs it read since the one asked for last, so that a merged
    epoch (lost flushes: epochs a..b) is built from them."""

    def __init__(self, log: Path, log_order: str) -> None:
        self.reader = LogReader(log)
        self.log_order = log_order
        self._restart()

    def _restart(self) -> None:
        self._it = iter_epochs(self.reader, self.log_order)
        self._held: list[Epoch] = []
        self._merged: Epoch | None = None

    def get(self, index: int, last: int | None = None) -> Epoch:
        last = index if last is None else last
        if self._held and self._held[0].index > index:
            self._restart()
        while not self._held or self._held[-1].index < last:
            epoch = next(self._it, None)
            if epoch is None:
                raise CrashlabError(f"{self.reader.path}: no epoch {last}")
            self._held.append(epoch)
        self._held = [e for e in self._held if e.index >= index]
        if last == index:
            return self._held[0]
        m = self._merged
        if m is None or (m.index, m.last) != (index, last):
            m = self._merged = merge_epochs([e for e in self._held if e.index <= last])
        return m

    def close(self) -> None:
        self.reader.close()


# This process's worker: set by init_worker, cleared by close_worker.
_checker: StateChecker | None = None
_epochs: _EpochCursor | None = None
_init_error: BaseException | None = None


def init_worker(
    run_path: str,
    workroot: str,
    fsck: bool,
    facts: RunFacts | None,
    checkers: tuple[UserChecker | PyChecker, ...],
    spans: Spans | None = None,
) -> None:
    """Make this process's state checker, in a folder of its own under
    ``workroot`` (the arguments: what :func:`harness.check.check.check_run`
    hands every worker)."""
    # An exception escaping a Pool initializer makes the Pool respawn the
    # worker forever: keep it and raise it with the first task instead.
    global _checker, _epochs, _init_error
    try:
        workdir = Path(tempfile.mkdtemp(prefix="w", dir=workroot))
        run = RunDir(Path(run_path))
        with located(workdir):  # a full working folder: named in the error
            _checker = StateChecker(
                run,
                workdir,
                fsck=fsck,
                run_facts=facts,
                checkers=checkers,
                db_spans=spans,
                shared=Path(workroot) / SHARED,
            )
        _epochs = _EpochCursor(run.log, run.log_order)
    except BaseException as e:  # noqa: BLE001
        _init_error = e


def _init_pool_worker(
    run_path: str,
    workroot: str,
    fsck: bool,
    facts: RunFacts | None,
    checkers: tuple[UserChecker | PyChecker, ...],
    spans: Spans | None = None,
) -> None:
    worker_signals()
    init_worker(run_path, workroot, fsck, facts, checkers, spans)
    # An orderly pool exit (close + join) ends the checker's helper
    # processes; on terminate they die with the worker (PDEATHSIG).
    multiprocessing.util.Finalize(None, close_worker, exitpriority=10)


def close_worker() -> None:
    """Close this process's state checker (its helper processes) and epoch
    cursor, if it has them."""
    global _checker, _epochs
    if _checker is not None:
        _checker.close()
        _checker = None
    if _epochs is not None:
        _epochs.close()
        _epochs = None


def check_chunk(states: list[State]) -> bytes:
    """The states.jsonl lines of ``states``, made by this process's checker."""
    if _init_error is not None:
        raise _init_error
    assert _checker is not None
    with located(_checker.workdir):  # a full working folder: named in the error
        return _checker.lines(states)


def task_of(chunk: list[State]) -> Task:
    """``chunk`` as it travels to a worker (its states share one epoch)."""
    ep = chunk[0].epoch
    return ep.index, ep.last, [(_fields(s.key), s.ordinal) for s in chunk]


def _fields(k: StateKey) -> KeyFields:
    return k.epoch, k.kept, k.torn, k.last, k.misdirect, k.corrupt


def check_task(task: Task) -> bytes:
    """The states.jsonl lines of the chunk ``task`` stands for."""
    if _init_error is not None:
        raise _init_error
    assert _epochs is not None
    index, last, items = task
    epoch = _epochs.get(index, last)
    return check_chunk([State(StateKey(*key), epoch, ordinal) for key, ordinal in items])


# --- local worker processes ----------------------------------------------------


@contextlib.contextmanager
def local_imap(
    chunks: Iterable[list[State]], init_args: tuple[Any, ...], jobs: int
) -> Iterator[Iterator[bytes]]:
    """The states.jsonl lines of each chunk, in order, checked by ``jobs``
    forked worker processes (one: in this process); the workers are closed
    on the way out (:func:`worker_pool`)."""
    if jobs == 1:
        init_worker(*init_args)
        try:
            yield (check_chunk(chunk) for chunk in chunks)
        finally:
            with signals_deferred():
                close_worker()
        return
    with worker_pool(jobs, init_args) as pool:
        yield pool.imap(check_task, map(task_of, chunks))


@contextlib.contextmanager
def worker_pool(
    jobs: int,
    init_args: tuple[Any, ...],
    initializer: Callable[..., None] = _init_pool_worker,
) -> Iterator[Pool]:
    """``jobs`` forked workers, each set up by ``initializer(*init_args)``
    (default: a state checker, :func:`init_worker`); on the way out they are
    closed and joined when the body finished, terminated when it raised.
    A SIGINT or SIGTERM while the pool starts or stops is raised once it
    has: escaping ``Pool()`` it would leave a half-built pool whose thread
    forks new workers while the interpreter exits (a hang, or orphaned
    workers), and inside ``join`` or ``terminate`` workers behind.  The
    workers (and the pool's threads, which fork replacements) start with
    both signals blocked: ``terminate``'s SIGTERM to a worker that has not
    yet set its handlers would otherwise be taken by the parent's
    deferring one, and the worker joined forever."""
    pool: Pool | None = None
    finished = False
    try:
        with signals_deferred(), signals_blocked():
            pool = multiprocessing.get_context("fork").Pool(jobs, initializer, init_args)
        yield pool
        finished = True
    finally:
        if pool is not None:
            with signals_deferred():
                if finished:
                    pool.close()
                    pool.join()
                pool.terminate()


# --- the workers of a Dask cluster (harness/check/cluster.py) ------------------

_remote_args: tuple[Any, ...] | None = None  # what this Dask worker's checker is for
_remote_root: Path | None = None  # this Dask worker's own work folder, on another machine


def remote_tasks(init_args: tuple[Any, ...], tasks: list[Task]) -> list[bytes]:
    """A Dask worker's task: the states.jsonl lines of each chunk of a
    batch.  The worker's state checker is made on its first task of a run,
    in a folder of its own under the client's work folder (or, on another
    machine, under one work folder of this worker process's, reaped once
    the process is gone)."""
    global _remote_args, _remote_root
    if _remote_args != init_args:
        remote_close()
        run_path, workroot, *rest = init_args
        if not Path(workroot).is_dir():
            if _remote_root is None or not _remote_root.is_dir():
                _remote_root = work_folder("crashlab-dask-")
            workroot = str(_remote_root)
        init_worker(run_path, workroot, *rest)
        _remote_args = init_args
    return [check_task(task) for task in tasks]


def remote_close() -> None:
    """Close this Dask worker's state checker (its helper processes) and
    remove its folder."""
    global _remote_args
    workdir = _checker.workdir if _checker is not None else None
    close_worker()
    if workdir is not None:
        shutil.rmtree(workdir, ignore_errors=True)
    _remote_args = None
