"""Checking a run's states on the workers of a Dask cluster
(``crashlab check --executor dask [--scheduler ADDRESS]``; ``dask.distributed``).

The unit of work is the same as for local worker processes: a chunk of one
epoch's states, sent as the epoch's number and the states' keys
(:data:`harness.check.pool.Task`).  A worker needs the run's folder (its log
and meta.json) and the base image the run names, at the same paths (a
cluster of this machine's processes, or machines that share the results
folder and built the images with the same recipe: the image's digest is
verified before any state is checked).  Each worker process keeps one state
checker per run, made on its first task of that run.

A Dask task is a batch of consecutive chunks (up to ``BATCH`` states): a
task costs the client and the scheduler about the same whatever its size,
and many epochs have only a few states.  The worker's arguments (the run,
the run-level facts, the checkers: a few hundred bytes) go with every
task; they are not scattered, because scattered data lives on the workers
that hold it, and a killed worker takes it along, failing the tasks that
need it ("lost scattered data, which can't be recovered").

Results are taken back in submission order, so states.jsonl and result.json
are byte-identical to a local check; at most ``WINDOW`` batches per worker are
in flight, so memory stays flat.  A worker that dies loses only its tasks in
flight: the scheduler runs them again on another worker (up to
``RETRIES`` times), and because a state's verdicts depend on nothing but the
run, the results are the same.  Without ``--scheduler`` a LocalCluster of
``--jobs`` worker processes on 127.0.0.1 is started and stopped here.
"""

from __future__ import annotations

import collections
import socket
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

from harness.check.pool import Task, remote_close, remote_tasks
from harness.errors import CrashlabError, cause

WINDOW = 4  # batches in flight per worker
RETRIES = 3  # times a batch is tried again after its worker died
# states per task at most: measured on 3,000 reorder states of a large-matrix
# cell, the client and the scheduler spent 0.57 ms per state with a task per
# chunk (0.04 ms with local workers)
BATCH = 256
PROBE_S = 10.0  # seconds to reach a --scheduler's port before giving up on it


def probe_scheduler(address: str) -> None:
    """Refuse at once a ``--scheduler`` that nothing answers at (a Dask
    client would retry for 30 s, then fail with a traceback): one TCP
    connection to its host and port.  Addresses of other schemes, or
    without a port, are left to Dask."""
    try:
        parts = urlsplit(address if "://" in address else f"tcp://{address}")
        host, port = parts.hostname, parts.port
    except ValueError:
        raise CrashlabError(f"--scheduler {address}: not an address (tcp://HOST:PORT)") from None
    if parts.scheme not in ("tcp", "tls") or not host or port is None:
        return
    try:
        socket.create_connection((host, port), timeout=PROBE_S).close()
    except OSError as e:
        raise CrashlabError(
            f"--scheduler {address}: no Dask scheduler answers there ({cause(e)})"
        ) from None


def _batches(tasks: Iterable[Task]) -> Iterator[list[Task]]:
    """Consecutive tasks grouped until a group holds ``BATCH`` states."""
    batch: list[Task] = []
    size = 0
    for task in tasks:
        batch.append(task)
        size += len(task[-1])  # a task ends with its states
        if size >= BATCH:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def dask_imap(
    tasks: Iterable[Task], init_args: tuple[Any, ...], scheduler: str | None, jobs: int
) -> Iterator[bytes]:
    """The states.jsonl lines of each task, in order, checked on a Dask
    cluster (the worker side: :func:`harness.check.pool.remote_tasks`)."""
    try:  # here, not at the top: distributed is optional, and slow to import
        from distributed import Client, LocalCluster
    except ImportError:
        raise CrashlabError(
            "--executor dask needs the `distributed` package (installed by make setup)"
        ) from None
    cluster = None
    if scheduler is None:
        cluster = LocalCluster(
            n_workers=jobs,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        )
    try:
        try:
            client = Client(scheduler or cluster)
        except OSError as e:  # distributed's "Timed out trying to connect to ..."
            raise CrashlabError(
                f"--scheduler {scheduler}: cannot reach the Dask scheduler ({e})"
            ) from None
        with client:
            width = max(1, len(client.scheduler_info()["workers"])) * WINDOW
            pending: collections.deque[Any] = collections.deque()
            try:
                for batch in _batches(tasks):
                    pending.append(
                        client.submit(remote_tasks, init_args, batch, pure=False, retries=RETRIES)
                    )
                    if len(pending) >= width:
                        yield from pending.popleft().result()
                while pending:
                    yield from pending.popleft().result()
            finally:
                for f in pending:
                    f.cancel()
                client.run(remote_close)
    finally:
        if cluster is not None:
            cluster.close()
