"""Helpers shared by the test modules: what a run left behind on the machine
(loop devices, mounts, processes), the installed ``crashlab`` command, C
builds, and the recordings the test modules share (Recordings: the
session fixture ``recorded`` of conftest.py)."""

from __future__ import annotations

import os
import shutil
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


def _manifest(run: Path) -> dict[str, tuple[int, int]]:
    """Every entry under ``run``: relative path -> (size, mtime in ns) of a
    file or link, (0, 0) for a folder (a new empty folder is a write too)."""
    out = {}
    for p in sorted(run.rglob("*")):
        st = p.lstat()
        out[str(p.relative_to(run))] = (0, 0) if p.is_dir() else (st.st_size, st.st_mtime_ns)
    return out


class Recordings:
    """The fuse recordings of a test session, each distinct (sut, workload,
    fs, backend) recorded once (per xdist worker) and shared.  A shared run
    is read-only: a test that checks it writes its results elsewhere
    (``--out``), and a test that changes it takes ``copy()``.  Each hand-out,
    and the end of each test that used them, verifies that no run was
    written into; a run written into is dropped (recorded afresh when next
    asked for), so only the test that wrote fails."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.made = 0
        self.runs: dict[tuple[str, str, str, str], tuple[RunDir, dict[str, tuple[int, int]]]] = {}

    def __call__(self, sut: str, workload: str, fs: str = "ext4", backend: str = "fuse") -> RunDir:
        """The shared recording of ``sut`` running ``workload`` on ``fs``."""
        key = (sut, workload, fs, backend)
        if key not in self.runs:
            self.made += 1
            folder = self.root / f"{self.made:03d}-{sut}-{fs}-{backend}"
            run = record_cell(Cell(sut, workload, fs), folder, backend, False)
            self.runs[key] = (run, _manifest(run.path))
        self.verify()
        return self.runs[key][0]

    def verify(self) -> None:
        """Fail, naming them, if shared runs differ from when they were
        recorded; those runs are dropped."""
        dirty = [key for key, (run, made) in self.runs.items() if _manifest(run.path) != made]
        if dirty:
            named = "; ".join(f"{self.runs.pop(k)[0].path} ({', '.join(k[:3])})" for k in dirty)
            pytest.fail(
                f"a test wrote into the shared recording {named}: "
                "check with --out elsewhere, or copy() it"
            )

    def copy(
        self, dest: Path, sut: str, workload: str, fs: str = "ext4", backend: str = "fuse"
    ) -> RunDir:
        """A private copy, at ``dest``, of the shared recording: the test may change it."""
        shutil.copytree(self(sut, workload, fs, backend).path, dest, symlinks=True)
        return RunDir(dest)

    def many(self, workloads: dict[str, str], fs: str = "ext4") -> dict[str, RunDir]:
        """``{sut: shared recording}`` for ``{sut: workload}`` on ``fs``."""
        return {sut: self(sut, wl, fs) for sut, wl in workloads.items()}


# A j-lang program with one answer known both ways: a file created in
# folder A, then A fsynced ({fsync}: "fsync A") or not ("none").
JLANG_DIR_FSYNC = """# run
mkdir A 0777
sync
checkpoint 1
open Afoo O_RDWR|O_CREAT 0777
write Afoo 0 5000
close Afoo
opendir A 0777
{fsync}
checkpoint 2
close A
"""


# A j-lang program for FS-REPLACE (ext4's auto_da_alloc): a new file, never
# fsynced, renamed over a durable one; the root's fsync ({fsync}: "fsync ."
# or "none") makes the rename durable, and auto_da_alloc is documented to
# force the new file's blocks out with it (this kernel does not always:
# docs/findings.md, "ext4's replace by rename").
JLANG_REPLACE = """# run
open foo O_RDWR|O_CREAT 0777
write foo 0 4096
fsync foo
close foo
sync
checkpoint 1
open bar O_RDWR|O_CREAT 0777
write bar 0 9000
close bar
rename bar foo
opendir . 0777
{fsync}
checkpoint 2
close .
"""
