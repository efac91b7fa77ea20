"""A client killed outright (SIGKILL: no teardown, no message) mid-check,
with local workers (a check) or a Dask LocalCluster (a sweep): the same command with
``--resume`` continues from the states already written and gives
byte-identical states.jsonl and result.json (and, for a sweep,
summary.json) to an uninterrupted run; the dead client's workers are gone
and its working folder is reaped by the resumed run; a resume into a
folder of another check is refused."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from support import CRASHLAB, Recordings, tagged

from harness.rundir import RESULT_NAME, STATES_NAME, RunDir
from harness.sweep.matrix import DHL_INSERT

pytest.importorskip("distributed", reason="the distributed package (make setup)")
pytestmark = pytest.mark.needs_fuse


@pytest.fixture(scope="module")
def run(recorded: Recordings) -> RunDir:
    return recorded("dhl-cc-raw", DHL_INSERT, "raw")


def _crashlab(args: list[str], private_tmp: Path, token: str = "") -> subprocess.Popen[str]:
    env = {**os.environ, "CRASHLAB_TMPDIR": str(private_tmp), "CRASHLAB_TEST_TOKEN": token}
    return subprocess.Popen(
        [str(CRASHLAB), *args, "--no-progress"],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _finish(proc: subprocess.Popen[str]) -> None:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err


def _kill_when_checking(proc: subprocess.Popen[str], states: Path, token: str) -> int:
    """SIGKILL ``proc`` once ``states`` has 300 lines; return the lines
    complete at that point, after its workers are gone."""
    deadline = time.monotonic() + 120
    while not (states.exists() and states.read_bytes().count(b"\n") >= 300):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "never got to checking"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    deadline = time.monotonic() + 30
    while tagged(token):  # pool workers end at EOF on their pipe, Dask's with their nanny
        assert time.monotonic() < deadline, f"workers outlived their client: {tagged(token)}"
        time.sleep(0.1)
    return states.read_bytes().count(b"\n")


def test_killed_check_resumes_identically(run: RunDir, tmp_path: Path, private_tmp: Path) -> None:
    args = ["check", str(run.path), "--strategy", "reorder", "--jobs", "2"]
    _finish(_crashlab([*args, "--out", str(tmp_path / "ref")], private_tmp))
    ref = tmp_path / "ref"
    total = (ref / STATES_NAME).read_bytes().count(b"\n")

    out = tmp_path / "killed"
    token = uuid.uuid4().hex
    kept = _kill_when_checking(
        _crashlab([*args, "--out", str(out)], private_tmp, token), out / STATES_NAME, token
    )
    assert 300 <= kept < total
    assert not (out / RESULT_NAME).exists()
    assert [p.name for p in private_tmp.iterdir()]  # the dead client's folder is still there

    _finish(_crashlab([*args, "--out", str(out), "--resume"], private_tmp))
    assert (out / STATES_NAME).read_bytes() == (ref / STATES_NAME).read_bytes()
    assert (out / RESULT_NAME).read_bytes() == (ref / RESULT_NAME).read_bytes()
    # private_tmp's teardown asserts it is empty: the resume reaped the folder


def test_resume_refuses_another_checks_folder(
    run: RunDir, tmp_path: Path, private_tmp: Path
) -> None:
    out = tmp_path / "c"
    _finish(
        _crashlab(["check", str(run.path), "--strategy", "prefix", "--out", str(out)], private_tmp)
    )
    (out / RESULT_NAME).unlink()  # as if interrupted
    p = _crashlab(
        ["check", str(run.path), "--strategy", "reorder", "--out", str(out), "--resume"],
        private_tmp,
    )
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2
    assert err.startswith("crashlab: error: ") and err.count("\n") == 1, err
    assert "--resume continues only the same check" in err


def test_killed_dask_sweep_resumes_identically(tmp_path: Path, private_tmp: Path) -> None:
    matrix = tmp_path / "m.toml"
    matrix.write_text(
        '[[cell]]\nsut = "dhl-cc-raw"\nworkload = "DHL_INSERT"\nfs = "raw"\n'
        'strategies = ["prefix", "reorder"]\n'
    )
    out = tmp_path / "sweep"
    args = ["sweep", "--matrix", str(matrix), "--jobs", "2", "--executor", "dask"]
    token = uuid.uuid4().hex
    proc = _crashlab([*args, "--out", str(out), "--resume"], private_tmp, token)
    deadline = time.monotonic() + 120
    while not (reorder := list(out.glob("runs/*/check/reorder-*"))):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    _kill_when_checking(proc, reorder[0] / STATES_NAME, token)
    assert not (out / "summary.json").exists()

    _finish(_crashlab([*args, "--out", str(out), "--resume"], private_tmp))
    # the reference: the same recording swept without an interruption
    ref = tmp_path / "ref"
    shutil.copytree(out / "runs", ref / "runs")
    for check_dir in (ref / "runs").glob("*/check"):
        shutil.rmtree(check_dir)
    _finish(_crashlab([*args[:-2], "--out", str(ref), "--resume"], private_tmp))  # local
    assert (ref / "summary.json").read_bytes() == (out / "summary.json").read_bytes()
    for got in (out / "runs").rglob(RESULT_NAME):
        want = ref / got.relative_to(out)
        assert got.read_bytes().replace(str(out).encode(), str(ref).encode()) == want.read_bytes()
