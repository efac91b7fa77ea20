"""The raw tier's fast path (a crash state's image from the durable image to
the engine's checks in memory, no file: harness/check/worker.py) gives
byte-identical states.jsonl and result.json to the file path it replaced
(CRASHLAB_RECOVERY=reference), on real recordings: a correct engine's
reorder and torn states, and an unsafe one's (NOLOG) torn states, many of
which do not open or do not decode."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import record_runs

from harness.check.check import CheckOptions, check_run
from harness.check.worker import StateChecker
from harness.env import recovery_path
from harness.record.fuse import FuseBackend
from harness.rundir import RESULT_NAME, STATES_NAME, RunDir
from harness.states import Options
from harness.sweep.matrix import DHL_INSERT, MULTI

OK, WHY = FuseBackend.available()
pytestmark = [pytest.mark.root, pytest.mark.skipif(not OK, reason=f"fuse backend: {WHY}")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunDir]:
    return record_runs(tmp_path_factory.mktemp("rawfast"),
                       {"dhl-cc-raw": DHL_INSERT, "dhl-nolog-raw": MULTI}, fs="raw")


def _files(out: Path) -> tuple[bytes, bytes]:
    return (out / STATES_NAME).read_bytes(), (out / RESULT_NAME).read_bytes()


@pytest.mark.parametrize("sut, strategy", [("dhl-cc-raw", "reorder"), ("dhl-nolog-raw", "torn")])
def test_the_fast_raw_path_gives_the_file_paths_verdicts(runs: dict[str, RunDir], tmp_path: Path,
                                                         sut: str, strategy: str) -> None:
    run = runs[sut]
    assert StateChecker(run, tmp_path / "w").in_memory  # the fast path is the default
    opts = CheckOptions(states=Options(strategy=strategy), jobs=2)
    fast = check_run(run, opts, tmp_path / "fast")
    with recovery_path("reference"):
        assert not StateChecker(run, tmp_path / "w2").in_memory
        check_run(run, opts, tmp_path / "reference")
    assert fast["states"]["checked"] > 200
    assert _files(tmp_path / "fast") == _files(tmp_path / "reference")
