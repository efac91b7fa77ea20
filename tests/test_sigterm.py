"""SIGTERM (what ``timeout`` and CI runners send) stops ``crashlab check``
and ``crashlab sweep`` as Ctrl-C does: an orderly teardown, one line on
stderr, exit 143 (128 + SIGTERM), nothing left behind (no loop device,
mount, FUSE daemon, worker, debugfs helper or work folder), and
``--resume`` finishes with the result an uninterrupted run gives."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from support import CRASHLAB, Recordings, tagged

from harness.rundir import RunDir
from harness.sweep.matrix import MULTI

pytestmark = pytest.mark.needs_fuse


@pytest.fixture(scope="module")
def run(recorded: Recordings) -> RunDir:
    return recorded("sqlite-delete-extra", MULTI)


def _start(args: list[str], private_tmp: Path, token: str) -> subprocess.Popen[str]:
    env = {**os.environ, "CRASHLAB_TMPDIR": str(private_tmp), "CRASHLAB_TEST_TOKEN": token}
    return subprocess.Popen(
        [str(CRASHLAB), *args, "--no-progress"],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _terminate_when(proc: subprocess.Popen[str], ready: Callable[[], bool]) -> str:
    """SIGTERM ``proc`` (to it alone, as ``kill -TERM PID`` does) once
    ``ready()``; return its stderr after it exits."""
    deadline = time.monotonic() + 120
    while not ready():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "never reached the point to interrupt"
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("did not stop on SIGTERM")
    return err


def _assert_stopped_cleanly(proc: subprocess.Popen[str], err: str, token: str) -> None:
    assert proc.returncode == 143, err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("crashlab: interrupted (SIGTERM)"), err
    assert "Traceback" not in err and "Error" not in err, err
    deadline = time.monotonic() + 5
    while tagged(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert tagged(token) == []  # workers, debugfs helpers, FUSE daemons


def _has_states(folder: Path) -> Callable[[], bool]:
    def ready() -> bool:
        return any(p.stat().st_size > 0 for p in folder.rglob("states.jsonl"))

    return ready


def test_sigterm_stops_check_and_resume_completes(
    run: RunDir, tmp_path: Path, private_tmp: Path
) -> None:
    token = uuid.uuid4().hex
    args = ["check", str(run.path), "--strategy", "reorder", "--jobs", "2"]
    ref = subprocess.run(
        [str(CRASHLAB), *args, "--out", str(tmp_path / "ref"), "--no-progress"],
        capture_output=True,
        text=True,
    )
    assert ref.returncode == 0, ref.stderr
    out = tmp_path / "int"
    proc = _start([*args, "--out", str(out)], private_tmp, token)
    err = _terminate_when(proc, _has_states(out))
    _assert_stopped_cleanly(proc, err, token)
    assert not (out / "result.json").exists()
    resumed = subprocess.run(
        [str(CRASHLAB), *args, "--out", str(out), "--resume", "--no-progress"],
        capture_output=True,
        text=True,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert (out / "result.json").read_bytes() == (tmp_path / "ref" / "result.json").read_bytes()
    assert (out / "states.jsonl").read_bytes() == (tmp_path / "ref" / "states.jsonl").read_bytes()


# The default matrix's cell of sqlite-delete-extra (its four strategies, the
# multicrash ones among them) on a smaller workload: what is interrupted and
# resumed is the sweep's bookkeeping, not the size of the run.
CELL = """
[[cell]]
sut = "sqlite-delete-extra"
workload = "insert:txns=4,ops=2,tables=2,warmup=20,seed=1"
strategies = ["prefix", "reorder", "multicrash", "recovery-crash"]
"""


def _recording(private_tmp: Path) -> Callable[[], bool]:
    def ready() -> bool:  # a recorder's working folder exists: daemon, loop, mount up
        return any(p.name.startswith("crashlab-rec-") for p in private_tmp.iterdir())

    return ready


@pytest.mark.parametrize("phase", ["record", "check"])
def test_sigterm_stops_sweep_and_resume_completes(
    tmp_path: Path, private_tmp: Path, phase: str
) -> None:
    token = uuid.uuid4().hex
    out = tmp_path / "sweep"
    # the cell's multicrash strategies kept small: one first crash, prefix states
    (tmp_path / "cell.toml").write_text(CELL)
    args = [
        "sweep",
        "--matrix",
        str(tmp_path / "cell.toml"),
        "--jobs",
        "2",
        "--max-first",
        "1",
        "--then",
        "prefix",
        "--out",
        str(out),
    ]
    proc = _start(args, private_tmp, token)
    ready = _recording(private_tmp) if phase == "record" else _has_states(out)
    err = _terminate_when(proc, ready)
    _assert_stopped_cleanly(proc, err, token)
    assert not (out / "summary.json").exists()

    resumed = subprocess.run(
        [str(CRASHLAB), *args, "--resume", "--no-progress"], capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr
    summary = (out / "summary.json").read_bytes()
    # The reference: the same recording checked from scratch.
    ref = tmp_path / "ref"
    shutil.copytree(out / "runs", ref / "runs")
    for check_dir in (ref / "runs").glob("*/check"):
        shutil.rmtree(check_dir)
    again = subprocess.run(
        [str(CRASHLAB), *args[:-1], str(ref), "--resume", "--no-progress"],
        capture_output=True,
        text=True,
    )
    assert again.returncode == 0, again.stderr
    assert (ref / "summary.json").read_bytes().replace(
        str(ref).encode(), str(out).encode()
    ) == summary
