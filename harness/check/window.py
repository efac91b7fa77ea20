"""The states a check of one run asks for: the strategy's options
completed with the run's own facts (:func:`default_window`), shared by the
check (:mod:`harness.check.check`) and the first crashes of a composite
one (:mod:`harness.check.multicrash`, :func:`workload_window`); and the
run's *creation window* (:func:`setup_entry`): the states whose crash lies
before its ``setup-done`` mark, while the database (or a user's first
file) was being created."""

from __future__ import annotations

import dataclasses

from harness.faults import STATE, by_stage, unique_faults
from harness.logformat import LogReader
from harness.rundir import RunDir
from harness.states import Options, resolve_window
from harness.states.strategies import AUTO_BUDGET

SETUP_MARK = "setup-done"  # the database exists and its set-up is acknowledged

# The budget's time: a check of a run whose kept sets fit
# BUDGET_SECONDS x its tier's declared rate is exhaustive.  The rates are
# the checks' own on 2 shared cores (`crashlab bench`, docs/performance.md):
# the raw tier's native path ~10,000 states/s, a file system's ~500-1,000.
BUDGET_SECONDS = 100
RATE = {"raw": 10_000}  # states/s by file system
FS_RATE = 500  # any other file system


def budget_for(fs: str) -> int:
    """The budget (states) of an auto-budget check of a run on ``fs``."""
    return BUDGET_SECONDS * RATE.get(fs, FS_RATE)


def default_window(run: RunDir, opts: Options) -> Options:
    """The run's own facts in the options: its log order (which states are
    valid) and the state faults its meta.json lists besides those asked
    for (``crashlab record --fault``; the device and process ones were
    injected while recording).  No window unless one was asked for: the
    creation window (before ``setup-done``) is judged too, where an absent
    or empty database is a legal outcome (:meth:`CheckContext.creating`)."""
    meta = run.meta()
    faults = unique_faults((*opts.faults, *by_stage(meta.faults, STATE)))
    opts = dataclasses.replace(opts, log_order=run.log_order, faults=faults)
    if opts.budget == AUTO_BUDGET:
        return dataclasses.replace(opts, budget=budget_for(meta.fs))
    return opts


def workload_window(run: RunDir, opts: Options) -> Options:
    """:func:`default_window` starting at the run's ``setup-done`` mark when
    it has one and no window was asked for: the states after the database
    was created (a multicrash's first crashes: a continuation resumes a
    workload, it does not create the database again)."""
    opts = default_window(run, opts)
    if opts.window_start is None and SETUP_MARK in run.meta().marks:
        return dataclasses.replace(opts, window_start=SETUP_MARK)
    return opts


def setup_entry(run: RunDir) -> int | None:
    """The log entry of the run's first ``setup-done`` mark (None: the run
    has none).  A state whose crash interval ends at or before it
    (``cut.hi <= entry``) lies in the creation window: nothing was
    acknowledged, not even the set-up."""
    if SETUP_MARK not in run.meta().marks:
        return None
    with LogReader(run.log) as reader:
        return resolve_window(reader, Options(window_start=SETUP_MARK))[0]
