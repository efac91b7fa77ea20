"""The pytest plugin, used as a database team would: a test file of their own
records a Python workload and checks its crash states with a Python
checker; run by pytest (with JUnit output), the correct workload passes and
the broken one fails naming the states, the explanation and the repro."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support import ROOT

pytestmark = pytest.mark.needs_fuse

TEAM_TEST = """
import os


def _update(mark, dirsync):
    for i in range(1, 5):
        mark(f"txn-begin:{i}")
        fd = os.open("counter.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, str(i).encode())
        os.fsync(fd)
        os.close(fd)
        os.rename("counter.tmp", "counter")
        if dirsync:
            d = os.open(".", os.O_RDONLY)
            os.fsync(d)
            os.close(d)
        mark(f"txn-ack:{i};value={i}")


def safe(mark):
    _update(mark, dirsync=True)


def broken(mark):
    _update(mark, dirsync=False)


def counter_kept(files, state):
    acks = [int(m["payload"]["value"]) for m in state["marks"]["before"]
            if m["name"].startswith("txn-ack:")]
    want = acks[-1] if acks else 0
    p = files / "counter"
    got = int(p.read_text()) if p.exists() else 0
    assert got >= want, f"counter is {got} but {want} was acknowledged"


def test_safe(crashlab):
    result = crashlab.check(crashlab.record(safe), counter_kept)
    assert result["verdicts"]["USER:counter_kept"]["pass"] > 10


def test_broken(crashlab):
    crashlab.check(crashlab.record(broken), counter_kept)
"""


def test_a_teams_pytest_test_catches_the_missing_directory_sync(tmp_path: Path) -> None:
    (tmp_path / "test_team.py").write_text(TEAM_TEST)
    junit = tmp_path / "junit.xml"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={junit}",
            str(tmp_path / "test_team.py"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert p.returncode == 1, p.stdout + p.stderr
    assert "1 failed, 1 passed" in p.stdout, p.stdout
    assert "USER:counter_kept: counter is" in p.stdout
    assert "was acknowledged" in p.stdout and "crashlab repro " in p.stdout
    # the failure names its distinct violations: a group, its lost writes, its repro
    assert "distinct violation" in p.stdout and "  group " in p.stdout, p.stdout
    assert "USER:counter_kept: " in p.stdout.split("distinct violation")[1], p.stdout
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    assert cases["test_safe"].find("failure") is None
    assert "violations in" in cases["test_broken"].find("failure").get("message", "")
    # the same under pytest-xdist: two worker processes record at once
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-n",
            "2",
            str(tmp_path / "test_team.py"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert p.returncode == 1 and "1 failed, 1 passed" in p.stdout, p.stdout + p.stderr


def test_the_plugin_is_registered() -> None:
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "--fixtures", "-q", str(ROOT / "tests" / "test_env.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert (
        "crashlab -- harness/pytest_plugin.py" in p.stdout
        or "crashlab [function scope] -- harness/pytest_plugin.py" in p.stdout
    ), p.stdout[-2000:]
