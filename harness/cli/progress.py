"""The progress of ``crashlab check`` and ``crashlab sweep`` on stderr, one
implementation for both: a rich bar on a terminal; elsewhere (CI, a pipe, a
log file) whole plain lines, one when a cell or check starts and ends and
one every ``--progress-interval`` seconds saying where the run is (states
done, rate, ETA), so that a run outside a terminal is never silent.  Both
are a :class:`harness.sweep.sweep.Watch`."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from harness.check.records import CheckResult
from harness.cli.params import SECONDS
from harness.sweep.sweep import CheckHook, Watch

console = Console(stderr=True)

INTERVAL = 10.0  # seconds between two progress lines outside a terminal
INTERVAL_ENV = "CRASHLAB_PROGRESS_INTERVAL"

PROGRESS_OPTIONS = [  # of check and sweep: what :func:`watching` is given
    click.option(
        "--progress/--no-progress",
        default=None,
        help="progress on stderr (default: on): a bar on a terminal, else a "
        "line at each start and end and every --progress-interval seconds",
    ),
    click.option(
        "--progress-interval",
        type=SECONDS,
        default=INTERVAL,
        show_default=True,
        envvar=INTERVAL_ENV,
        show_envvar=True,
        help="seconds between two progress lines outside a terminal",
    ),
]


@contextmanager
def watching(enabled: bool | None, kind: str, interval: float) -> Iterator[Watch | None]:
    """Within: the progress of a ``kind`` ("check" or "sweep") command, or
    None when ``enabled`` is False (--no-progress): a bar when stderr is a
    terminal, else :class:`Lines` every ``interval`` seconds."""
    if enabled is False:
        yield None
    elif console.is_terminal:
        with _bar() as bar:
            yield Bar(bar)
    else:
        lines = Lines(kind, interval)
        with lines.ticking():
            yield lines


@contextmanager
def _bar() -> Iterator[Progress]:
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]:>7.1f} states/s"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    ) as p:
        yield p


class Bar:
    """A :class:`Watch` that draws a bar per check on a terminal."""

    def __init__(self, bar: Progress) -> None:
        self.bar = bar

    def cell(self, index: int, count: int, name: str) -> None:
        console.log(f"record {name}")

    def check(self, label: str, total: int | None) -> CheckHook:
        task = self.bar.add_task(label, total=total, rate=0.0)
        return _bar_hook(self.bar, task)

    def checked(self, label: str, result: CheckResult, status: str) -> None:
        pass

    def step(self, what: str) -> None:
        console.log(what)

    def finished(self, ok: bool) -> None:
        pass


def _bar_hook(bar: Progress, task: Any) -> CheckHook:  # noqa: ANN401
    """A check's progress on ``task``.  Its clock starts at the first chunk,
    where a resumed check already counts the states of before: the rate
    and the ETA are of this run's states alone."""
    base: list[int] = []

    def on_progress(done: int, checked: int) -> None:
        if not base:
            base.append(checked)
            bar.reset(task, completed=done, rate=0.0)
            return
        elapsed = bar.tasks[task].elapsed or 1e-9
        bar.update(task, completed=done, rate=(checked - base[0]) / elapsed)

    return on_progress


@dataclass
class _Tally:
    """Where a running check is.  As the bar: ``done`` of ``total`` states
    (harness.check.check.check_run's hook), the rate of checked states and
    the ETA measured from the first chunk on (a resumed check's earlier
    states left out)."""

    label: str
    total: int | None
    started: float
    done: int = 0
    checked: int = 0
    first: tuple[float, int, int] | None = None  # (time, done, checked) at the first chunk

    def update(self, done: int, checked: int) -> None:
        if self.first is None:
            self.first = (time.monotonic(), done, checked)
        self.done, self.checked = done, checked

    def line(self, now: float) -> str:
        """``label: D/T states, R states/s, ETA M:SS`` ("?" where not known
        yet); ``label: M:SS elapsed`` while it has neither total nor count
        (multicrash, recovery-crash)."""
        if self.total is None and self.first is None:
            return f"{self.label}: {clock(now - self.started)} elapsed"
        total = "?" if self.total is None else f"{self.total:,}"
        rate = eta = "?"
        if self.first is not None and now > self.first[0]:
            t0, d0, c0 = self.first
            if self.checked > c0:
                rate = f"{(self.checked - c0) / (now - t0):,.1f}"
            if self.total is not None and self.done > d0:
                left = max(self.total - self.done, 0)
                eta = clock(left * (now - t0) / (self.done - d0))
        return f"{self.label}: {self.done:,}/{total} states, {rate} states/s, ETA {eta}"


class Lines:
    """A :class:`Watch` that writes whole lines to stderr: at each start
    and end, and from a thread every ``interval`` seconds.  Each line is
    written, with the change of state it reports, under one lock (a tick
    never lands after the end it preceded) in one ``write`` of the file
    descriptor (no buffer whose lock a forked worker could inherit held);
    a failing stderr silences it, never the run."""

    def __init__(self, kind: str, interval: float) -> None:
        self.kind = kind
        self.interval = interval
        self.fd = sys.stderr.fileno()
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.cells = (0, 0)  # (this cell, of how many): (0, 0) in a check
        self.doing: str | None = "starting"  # None: done, no more ticks
        self.since = self.started
        self.tally: _Tally | None = None
        self.open_cell: tuple[str, float] | None = None  # (name, since) of the cell running

    @property
    def where(self) -> str:
        """The start of a line about a step: ``check `` or ``sweep 2/3 cells, ``."""
        index, count = self.cells
        return f"{self.kind} {index}/{count} cells, " if count else f"{self.kind} "

    @contextmanager
    def ticking(self) -> Iterator[None]:
        """Within: a line every ``interval`` seconds."""
        stop = threading.Event()

        def tick() -> None:
            while not stop.wait(self.interval):
                with self.lock:
                    if self.doing is not None:
                        self._say(self._status())

        t = threading.Thread(target=tick, name="crashlab-progress", daemon=True)
        t.start()
        try:
            yield
        finally:
            stop.set()
            t.join()

    def _say(self, line: str) -> None:
        """Write ``line`` (the lock held)."""
        data = f"crashlab: {line}\n".encode()
        if self.fd < 0:
            return
        try:
            while data:
                data = data[os.write(self.fd, data) :]
        except OSError:
            self.fd = -1

    def _status(self) -> str:
        """Where the run is now (the lock held)."""
        now = time.monotonic()
        if self.tally is not None:
            return self.where + self.tally.line(now)
        return f"{self.where}{self.doing}: {clock(now - self.since)} elapsed"

    def _do(self, doing: str | None, tally: _Tally | None = None) -> None:
        """From now on the run is at ``doing`` (the lock held; None: it is
        over, the end is the last line)."""
        self.tally, self.doing, self.since = tally, doing, time.monotonic()

    def _end_cell(self) -> None:
        """The line that the cell running (if any) ended (the lock held)."""
        if self.open_cell is not None:
            name, since = self.open_cell
            index, count = self.cells
            took = clock(time.monotonic() - since)
            self._say(f"{self.kind} {index}/{count} cells: {name} done in {took}")
            self.open_cell = None

    def cell(self, index: int, count: int, name: str) -> None:
        with self.lock:
            self._end_cell()
            self.cells = (index, count)
            self.open_cell = (name, time.monotonic())
            self._say(f"{self.kind} {index}/{count} cells: {name} started")
            self._do(f"record {name}")

    def check(self, label: str, total: int | None) -> CheckHook:
        tally = _Tally(label, total, time.monotonic())
        with self.lock:
            self._say(
                f"{self.where}{label}: started" + ("" if total is None else f", {total:,} states")
            )
            self._do(label, tally)

        def on_progress(done: int, checked: int) -> None:
            with self.lock:
                tally.update(done, checked)

        return on_progress

    def checked(self, label: str, result: CheckResult, status: str) -> None:
        n = result["states"]["checked"]
        timing = result.get("timing")
        if timing is None or not isinstance(n, int):  # read back from an earlier check
            line = f"{label}: finished earlier, {n} states, expectation {status}"
        else:
            s = float(timing["seconds"])
            rate = (n - int(timing["resumed_from"])) / max(s, 1e-9)
            line = (
                f"{label}: finished, {n:,} states in {clock(s)}, "
                f"{rate:,.1f} states/s, expectation {status}"
            )
        with self.lock:
            self._say(self.where + line)
            self._do(f"after {label}" if self.kind == "sweep" else None)

    def step(self, what: str) -> None:
        with self.lock:
            self._end_cell()
            self._say(self.where + what)
            self._do(what)

    def finished(self, ok: bool) -> None:
        verdict = "every expectation held" if ok else "an expectation was not met"
        with self.lock:
            self._end_cell()
            took = clock(time.monotonic() - self.started)
            self._say(f"{self.kind} finished: {self.cells[1]} cells in {took}, {verdict}")
            self._do(None)


def clock(seconds: float) -> str:
    """``M:SS``, or ``H:MM:SS`` from an hour on."""
    m, s = divmod(round(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02}:{s:02}" if h else f"{m}:{s:02}"
