"""Triage's searches on worker processes (issue 25, item 5: "in parallel
like every check").

The unit of work (:data:`Unit`) is a slice of one invariant's sample of
failing states.  A worker minimises it with its own
:class:`~harness.triage.minimise.Minimiser` for that invariant (made on
its first slice of it and kept: its memo and state checkers serve its next
slice) and names the witnesses with its own
:class:`~harness.triage.witness.Namer`.

Why the result does not depend on the number of workers: the verdicts
are deterministic and a memo only caches them and finished searches
(:func:`harness.triage.search.shrink_with`: a search that reaches a known
state takes the result it would have computed), so a failing state
shrinks to the same witness whichever worker, after whichever other
search, minimises it; the witnesses are merged in sample order, and the
groups, their IDs and counts are built from them in the parent.  Only
the count of candidates judged differs (not in triage.json).

The workers are the check's (:func:`harness.check.pool.worker_pool`):
forked, SIGINT left to the parent, terminated when the parent stops; their
scratch folders lie in one folder of the parent's, removed on the way out.
"""

from __future__ import annotations

import dataclasses
import multiprocessing.util
from collections.abc import Callable
from pathlib import Path

from harness.check.pool import worker_pool
from harness.check.repro import ReproOptions
from harness.env import temporary_folder
from harness.states import Options
from harness.sysops import signals_deferred, worker_signals
from harness.triage.checkdir import CheckDir, Failing
from harness.triage.minimise import Minimiser, judges
from harness.triage.search import NotFailing
from harness.triage.witness import Namer, Witness

Unit = tuple[str, tuple[str, ...]]  # an invariant, and failing states' IDs to minimise on it
Found = list[Witness | None]  # per state of a unit: its witness (None: it passes, judged afresh)


class Searches:
    """The searches of one check: per invariant a :class:`Minimiser`
    (within the check's window and continuations, made on first use) and
    one :class:`Namer`; ``work``: where their scratch folders go."""

    def __init__(self, check: CheckDir, options: ReproOptions, work: Path | None = None) -> None:
        self.check, self.options, self.work = check, options, work
        self.namer = Namer(check.run.path, options, work)
        self.minimisers: dict[str, Minimiser] = {}

    def minimiser(self, inv: str) -> Minimiser:
        """The minimiser of ``inv``; only the user checker judging ``inv``
        runs on its candidates (a user's is a process per state)."""
        if inv not in self.minimisers:
            mine = tuple(c for c in self.options.checkers if c.invariant == inv)
            options = dataclasses.replace(self.options, checkers=mine)
            check = self.check
            composite = check.continued is not None
            self.minimisers[inv] = Minimiser(
                check.run.path,
                inv,
                options,
                # a composite check's first crash: the run's default window
                states=Options() if composite else check.window,
                work=self.work,
                then=check.window if composite else None,
                continued=check.continued,
            )
        return self.minimisers[inv]

    def minimise(self, unit: Unit) -> Found:
        """The named witness of each state of ``unit``."""
        inv, ids = unit
        minimiser = self.minimiser(inv)
        out: Found = []
        for state_id in ids:
            try:
                out.append(self.namer.witness(minimiser.minimise(state_id)))
            except NotFailing:
                out.append(None)
        return out

    def close(self) -> None:
        """Close every minimiser (its checkers, its scratch folder)."""
        for m in self.minimisers.values():
            m.close()
        self.minimisers.clear()


def units(samples: dict[str, list[Failing]], options: ReproOptions, jobs: int) -> list[Unit]:
    """The work: per invariant the checks judge (in sorted order), its
    sample in ``jobs`` contiguous slices (one when ``jobs`` is 1)."""
    out: list[Unit] = []
    for inv in sorted(samples):
        ids = [s.id for s in samples[inv]]
        if not ids or not judges(options, inv):
            continue
        k = min(jobs, len(ids))
        out += [(inv, tuple(ids[len(ids) * i // k : len(ids) * (i + 1) // k])) for i in range(k)]
    return out


def witnesses(
    check: CheckDir,
    samples: dict[str, list[Failing]],
    options: ReproOptions,
    jobs: int = 1,
    on_progress: Callable[[str], None] | None = None,
) -> dict[str, list[Witness]]:
    """Per invariant, the named witnesses of its ``samples`` (those that
    still fail), in sample order; minimised by ``jobs`` forked workers
    (1: in this process).  ``on_progress`` hears of each slice done."""
    work = units(samples, options, jobs)
    out: dict[str, list[Witness]] = {inv: [] for inv in samples}
    for unit, found in zip(work, _found(check, work, options, jobs), strict=True):
        out[unit[0]] += [w for w in found if w is not None]
        if on_progress:
            on_progress(f"{unit[0]}: {len(unit[1])} state(s) minimised")
    return out


def _found(check: CheckDir, work: list[Unit], options: ReproOptions, jobs: int) -> list[Found]:
    """What each unit of ``work`` found, in order."""
    if jobs <= 1 or len(work) <= 1:
        searches = Searches(check, options)
        try:
            return [searches.minimise(u) for u in work]
        finally:
            with signals_deferred():
                searches.close()
    with (
        temporary_folder("crashlab-triage-pool-") as root,
        worker_pool(min(jobs, len(work)), (check, options, str(root)), _init_worker) as pool,
    ):
        return list(pool.imap(_minimise_unit, work))


# This worker process's searches: set by _init_worker, closed at its exit.
_searches: Searches | None = None
_init_error: BaseException | None = None


def _init_worker(check: CheckDir, options: ReproOptions, root: str) -> None:
    """A pool worker's set-up (fork: its arguments are not pickled)."""
    global _searches, _init_error
    worker_signals()
    try:
        _searches = Searches(check, options, Path(root))
    except BaseException as e:  # noqa: BLE001 (raised with the first unit: harness/check/pool.py)
        _init_error = e
    multiprocessing.util.Finalize(None, _close_worker, exitpriority=10)


def _close_worker() -> None:
    global _searches
    if _searches is not None:
        _searches.close()
        _searches = None


def _minimise_unit(unit: Unit) -> Found:
    if _init_error is not None:
        raise _init_error
    assert _searches is not None
    return _searches.minimise(unit)
