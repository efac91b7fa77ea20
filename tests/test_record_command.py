"""The recorded command and the caller's folder (harness/record/command.py):
the program given as a relative path and an interpreter's script are taken
from the caller's folder, other relative arguments are left to the
recorded file system with a note; a Python workload is refused by the qemu
backend in one line naming the backends that run it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support import CRASHLAB

from harness.record.command import python_in_guest, resolve_command


def test_program_and_script_resolved_other_arguments_noted(tmp_path: Path) -> None:
    (tmp_path / "w.sh").write_text("true\n")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "w").write_text("true\n")
    (tmp_path / "data.txt").write_text("")
    got, notes = resolve_command(["sh", "w.sh", "data.txt", "out.db", "-x"], tmp_path)
    assert got == ["sh", str(tmp_path / "w.sh"), "data.txt", "out.db", "-x"]
    assert len(notes) == 1 and "'data.txt' is relative" in notes[0]
    assert str(tmp_path / "data.txt") in notes[0]
    assert resolve_command(["bin/w", "a"], tmp_path)[0] == [str(tmp_path / "bin" / "w"), "a"]
    assert resolve_command(["./w.sh"], tmp_path)[0] == [str(tmp_path / "w.sh")]
    # a program found on PATH, an option, a script not here, an absolute path: as given
    for cmd in (["w.sh"], ["python3", "-c", "x"], ["sh", "nowhere.sh"], ["/bin/true"]):
        assert resolve_command(cmd, tmp_path) == (cmd, [])


def test_python_workloads_are_named_for_the_guest(tmp_path: Path) -> None:
    script = tmp_path / "w"
    script.write_text("#!/usr/bin/env python3\nprint(1)\n")
    shell = tmp_path / "s"
    shell.write_text("#!/bin/sh\necho\n")
    for cmd in (["python3", "w.py"], ["/usr/bin/python3.11", "w.py"], ["env", "python3", "w"]):
        why = python_in_guest(cmd)
        assert why is not None and "--backend fuse or dm" in why, cmd
    assert python_in_guest([str(script)]) is not None
    for cmd in (["sh", "w.sh"], [str(shell)], ["/bin/busybox", "true"], []):
        assert python_in_guest(cmd) is None, cmd


@pytest.mark.needs_fuse
def test_record_takes_the_script_from_the_callers_folder(tmp_path: Path) -> None:
    """``crashlab record -- sh w.sh data.txt`` from the script's folder: the
    script runs (before: 'sh: can't open w.sh', exit 2), meta.json records
    its absolute path, and a note names the relative argument."""
    (tmp_path / "w.sh").write_text('echo "$1" > written\n')
    (tmp_path / "data.txt").write_text("")
    p = subprocess.run(
        [str(CRASHLAB), "record", "--backend", "fuse", "--out", "run", "--",
         "sh", "w.sh", "data.txt"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["command"] == ["sh", str(tmp_path / "w.sh"), "data.txt"]
    assert meta["exit_status"] == 0
    assert "note: argument 'data.txt' is relative" in p.stderr


def test_record_refuses_python_in_the_guest_in_one_line(tmp_path: Path) -> None:
    """Before any boot: exit 2, one line naming the backends that run it,
    no run folder."""
    (tmp_path / "w.py").write_text("print(1)\n")
    env = {**os.environ}
    p = subprocess.run(
        [str(CRASHLAB), "record", "--backend", "qemu", "--fs", "f2fs", "--out", "run", "--",
         "python3", "w.py"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120, env=env,
    )  # fmt: skip
    if "backend qemu" not in p.stderr:
        pytest.skip(f"no qemu backend here: {p.stderr.strip()[:200]}")
    assert p.returncode == 2, p.stderr
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("crashlab: error:")]
    assert len(errors) == 1 and "--backend fuse or dm" in errors[0], p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "run" / "meta.json").exists()
