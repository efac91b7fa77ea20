"""Fixtures shared by the test modules."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import loops, mounts, procs_mentioning


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private parent for working directories (CRASHLAB_TMPDIR); afterwards
    nothing may refer to it: no loop device, no mount, no process, no
    leftover file."""
    parent = Path("/dev/shm") / f"crashlab-test-{os.getpid()}-{tmp_path.name}"
    parent.mkdir()
    monkeypatch.setenv("CRASHLAB_TMPDIR", str(parent))
    loops0, mounts0 = loops(), mounts()
    yield parent
    new_loops = {line for line in loops() - loops0 if str(parent) in line}
    new_mounts = {line for line in mounts() - mounts0 if str(parent) in line}
    assert not new_loops and not new_mounts
    assert not any(str(parent) in line for line in loops() | mounts())
    assert procs_mentioning(str(parent)) == []
    assert list(parent.iterdir()) == []
    parent.rmdir()
