"""The states a check of one run asks for: the strategy's options
completed with the run's own facts (:func:`default_window`), shared by the
check (:mod:`harness.check.check`) and the first crashes of a composite
one (:mod:`harness.check.multicrash`)."""

from __future__ import annotations

import dataclasses

from harness.faults import STATE, by_stage, unique_faults
from harness.rundir import RunDir
from harness.states import Options


def default_window(run: RunDir, opts: Options) -> Options:
    """The run's own facts in the options: its log order (which states are
    valid), the state faults its meta.json lists besides those asked for
    (``crashlab record --fault``; the device and process ones were injected
    while recording) and, when the run has a ``setup-done`` mark and no
    window was given, a window from it on (before it the database does not
    exist)."""
    meta = run.meta()
    faults = unique_faults((*opts.faults, *by_stage(meta.faults, STATE)))
    opts = dataclasses.replace(opts, log_order=run.log_order, faults=faults)
    if opts.window_start is None and "setup-done" in meta.marks:
        return dataclasses.replace(opts, window_start="setup-done")
    return opts
