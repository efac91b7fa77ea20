"""Triage on worker processes (harness/triage/parallel.py, issue 25 item
5): the work cut into slices per invariant; the same triage.json whatever
--jobs; Ctrl-C during a parallel triage leaves no process, folder, loop
device or mount behind."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from support import CRASHLAB, ROOT, interrupt_group, tagged

from harness.check.check import CheckOptions, check_run
from harness.check.repro import ReproOptions
from harness.states import Options
from harness.triage.checkdir import Failing
from harness.triage.groups import triage
from harness.triage.parallel import units

DHL_INSERT = "insert:txns=10,ops=6,tables=3,size=400,warmup=20,seed=1"


def _failing(*ids: str) -> list[Failing]:
    return [Failing(i, frozenset(), frozenset(), 0) for i in ids]


def test_units_slice_each_invariant_in_order() -> None:
    samples = {"DB-DURABLE": _failing("a", "b", "c", "d", "e"), "DB-ATOMIC": _failing("x")}
    opts = ReproOptions()
    assert units(samples, opts, 1) == [
        ("DB-ATOMIC", ("x",)),
        ("DB-DURABLE", ("a", "b", "c", "d", "e")),
    ]
    assert units(samples, opts, 2) == [
        ("DB-ATOMIC", ("x",)),
        ("DB-DURABLE", ("a", "b")),
        ("DB-DURABLE", ("c", "d", "e")),
    ]
    # a user checker's invariant not given again is not minimised
    assert units({"USER:mine": _failing("a")}, opts, 2) == []


def _reorder_check(recorded: Any, out: Path) -> Path:  # noqa: ANN401
    run = recorded("dhl-nolog-raw", DHL_INSERT, fs="raw")
    check_run(run, CheckOptions(states=Options(strategy="reorder"), jobs=2), out)
    return out


def test_the_same_triage_whatever_the_jobs(recorded: Any, tmp_path: Path) -> None:  # noqa: ANN401
    folder = _reorder_check(recorded, tmp_path / "check")
    docs = []
    for jobs in (1, 2, 3):
        t = triage(folder, per_invariant=6, jobs=jobs)
        assert len(t.groups) >= 2
        docs.append((folder / "triage.json").read_bytes())
    assert docs[0] == docs[1] == docs[2]


def test_ctrl_c_during_a_parallel_triage(
    recorded: Any,  # noqa: ANN401
    tmp_path: Path,
    private_tmp: Path,
) -> None:
    folder = _reorder_check(recorded, tmp_path / "check")
    token = uuid.uuid4().hex
    env = {**os.environ, "CRASHLAB_TMPDIR": str(private_tmp), "CRASHLAB_TEST_TOKEN": token}
    p = subprocess.Popen(
        ["env", "--default-signal=INT", str(CRASHLAB), "triage", str(folder)]
        + ["--jobs", "2", "--per-invariant", "400"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    # SIGINT once the two workers have judged for a while (the parent and
    # its two forked workers, each with its state checker's scratch)
    deadline = time.monotonic() + 120
    while len(tagged(token)) < 3 and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1)
    assert p.poll() is None, "the triage ended before the interrupt: make it longer"
    _, err = interrupt_group(p, "crashlab triage --jobs 2")
    assert p.returncode in (128 + signal.SIGINT, -signal.SIGINT), (p.returncode, err)
    assert "Traceback" not in err
    deadline = time.monotonic() + 5
    while tagged(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert tagged(token) == []
    # private_tmp asserts that no loop device, mount or process refers to
    # the working folders, and that every one of them is gone
