"""Checking on a Dask cluster (``--executor dask``): a real LocalCluster
(scheduler and two worker processes on 127.0.0.1) gives byte-identical
states.jsonl and result.json to local worker processes, also when one of
its workers is killed in the middle of the check."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest
from support import Recordings

from harness.check.check import CheckOptions, check_run
from harness.rundir import RESULT_NAME, STATES_NAME, RunDir
from harness.states import Options
from harness.sweep.matrix import DHL_INSERT

distributed = pytest.importorskip("distributed", reason="the distributed package (make setup)")
pytestmark = pytest.mark.needs_fuse


@pytest.fixture(scope="module")
def run(recorded: Recordings) -> RunDir:
    return recorded("dhl-cc-raw", DHL_INSERT, "raw")


def _files(out: Path) -> tuple[bytes, bytes]:
    return (out / STATES_NAME).read_bytes(), (out / RESULT_NAME).read_bytes()


def test_a_local_cluster_checks_as_local_workers_do(run: RunDir, tmp_path: Path) -> None:
    opts = CheckOptions(states=Options(strategy="reorder"), jobs=2)
    check_run(run, opts, tmp_path / "local")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster:
        dask = CheckOptions(
            states=Options(strategy="reorder"),
            jobs=2,
            executor="dask",
            scheduler=cluster.scheduler_address,
        )
        check_run(run, dask, tmp_path / "dask")
        assert _files(tmp_path / "dask") == _files(tmp_path / "local")

        # kill one worker process once some states are checked: same result
        with distributed.Client(cluster) as client:
            pids = list(client.run(os.getpid).values())
        killed = threading.Event()

        def kill_one(generated: int, checked: int) -> None:
            if checked >= 200 and not killed.is_set():
                killed.set()
                os.kill(pids[0], signal.SIGKILL)

        check_run(run, dask, tmp_path / "killed", on_progress=kill_one)
        assert killed.is_set()
        assert _files(tmp_path / "killed") == _files(tmp_path / "local")
