"""Helpers shared by the test modules: what a run left behind on the machine
(loop devices, mounts, processes), the installed ``crashlab`` command, C
builds, and the recordings a test module shares."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.rundir import RunDir
from harness.sweep.matrix import Cell
from harness.sweep.sweep import record_cell

ROOT = Path(__file__).resolve().parent.parent
CRASHLAB = Path(sys.executable).with_name("crashlab")


def loops() -> set[str]:
    """Every attached loop device, one ``losetup -a`` line each."""
    out = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    return set(out.splitlines())


def mounts() -> set[str]:
    return set(Path("/proc/mounts").read_text().splitlines())


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def procs_mentioning(text: str) -> list[int]:
    """Live processes (not this one) whose command line holds ``text``."""
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and p.name != str(os.getpid()):
            try:
                if text.encode() in (p / "cmdline").read_bytes() and alive(int(p.name)):
                    pids.append(int(p.name))
            except OSError:
                continue
    return pids


def tagged(token: str) -> list[int]:
    """Live processes whose environment holds ``token`` (a test sets a unique
    variable in the environment of what it starts; every descendant inherits
    it, so this finds workers and helpers by what they are, not by name)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = (d / "environ").read_bytes()
        except OSError:
            continue
        if token.encode() in env and alive(int(d.name)):
            found.append(int(d.name))
    return found


def interrupt_group(p: subprocess.Popen[str], what: str, timeout: float = 60) -> tuple[str, str]:
    """SIGINT to the process group of ``p`` (started in a new session), as a
    terminal's Ctrl-C; its stdout and stderr once it has ended.  The test
    fails (the group SIGKILLed) when it does not end within ``timeout`` s."""
    os.killpg(p.pid, signal.SIGINT)
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        pytest.fail(f"{what} did not stop on SIGINT")


def crashlab(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the installed ``crashlab`` command from the repository root."""
    return subprocess.run(
        [str(CRASHLAB), *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def build(*targets: str) -> None:
    """``make`` these targets (tests that run a C program rebuild it first)."""
    subprocess.run(["make", "-s", *targets], cwd=ROOT, check=True)


def record_runs(root: Path, workloads: dict[str, str], fs: str = "ext4") -> dict[str, RunDir]:
    """One fuse recording on ``fs`` per SUT (``{sut: workload spec}``), each
    in ``root/<sut>``: the runs a test module shares."""
    return {
        sut: record_cell(Cell(sut, wl, fs), root / sut, "fuse", False)
        for sut, wl in workloads.items()
    }


def resummarize(run: Path) -> None:
    """Rewrite meta.json's log summary and marks to those of the run's log
    as it is now: a test that makes a new log on purpose keeps its folder
    consistent (``harness.validate.validate`` refuses a log that disagrees)."""
    import dataclasses
    import json

    from harness.logformat import LogReader

    meta = json.loads((run / "meta.json").read_text())
    with LogReader(run / "writes.log", salvage=True) as reader:
        meta["log"] = dataclasses.asdict(reader.summary())
    meta["marks"] = meta["log"]["marks"]
    (run / "meta.json").write_text(json.dumps(meta))
