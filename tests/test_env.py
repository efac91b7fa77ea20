"""One module reads crashlab's environment variables (harness/env.py), and
every working folder follows its one rule (CRASHLAB_TMPDIR)."""

from __future__ import annotations

import ast
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from support import ROOT

from harness import env

PACKAGES = ("harness", "checkers", "workloads")
EXAMPLES = ROOT / "workloads" / "examples"


def _environment_reads(tree: ast.AST) -> list[int]:
    """Lines that read the environment: ``os.environ.get``, ``os.getenv``,
    ``os.environ[...]`` loads (copying the whole environment for a child
    process is not a read of a setting)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            if f.attr == "getenv" or (f.attr == "get" and ast.unparse(f.value) == "os.environ"):
                lines.append(node.lineno)
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and ast.unparse(node.value) == "os.environ"
        ):
            lines.append(node.lineno)
    return lines


def test_only_harness_env_reads_the_environment() -> None:
    readers = {}
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*.py"):
            # the worked examples are a user's programs: they read the
            # public contract's variables (CRASHLAB_MARK, ...) themselves
            if f == ROOT / "harness" / "env.py" or EXAMPLES in f.parents:
                continue
            found = _environment_reads(ast.parse(f.read_text()))
            if found:
                readers[str(f.relative_to(ROOT))] = found
    assert readers == {}, "read the environment through harness/env.py"


def test_the_scan_finds_a_read() -> None:
    assert _environment_reads(
        ast.parse("import os\nx = os.environ.get('A')\ny = os.getenv('B')\nz = os.environ['C']\n")
    ) == [2, 3, 4]


def test_work_folders_follow_crashlab_tmpdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(env.TMPDIR, str(tmp_path))
    made = env.work_folder("crashlab-x-")
    assert made.parent == tmp_path and made.name.startswith("crashlab-x-")
    with env.temporary_folder("crashlab-y-") as d:
        assert d.parent == tmp_path
    assert not d.exists()
    monkeypatch.delenv(env.TMPDIR)
    shm = Path("/dev/shm")
    assert env.tmp_parent() == (shm if shm.is_dir() else Path(tempfile.gettempdir()))


def test_reaping_takes_only_a_dead_owners_working_folders(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(env.TMPDIR, str(tmp_path))
    mine = env.work_folder("crashlab-check-")
    # a child makes one and dies without removing it (as SIGKILL would)
    code = "from harness import env; print(env.work_folder('crashlab-check-'))"
    dead = Path(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    other = tmp_path / "crashlab-check-abc123"  # not of work_folder's shape: never touched
    other.mkdir()
    (dead / "w").mkdir()
    assert dead.parent == tmp_path and dead.exists()
    # (the other places working folders may be, /dev/shm and /tmp, may hold
    # other dead owners' folders: those are reaped too)
    assert dead in env.reap_work_folders()
    assert not dead.exists() and mine.exists() and other.exists()
