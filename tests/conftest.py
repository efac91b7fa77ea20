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


@pytest.fixture(scope="session")
def qemu_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Recordings through the qemu backend (the guest kernel's dm-log-writes),
    made once per test session and shared: ``{sut: run folder}`` for
    sqlite-wal-full (with ``--blktrace``) and sqlite-delete-extra on MULTI
    (ext4), each with the guest's final image beside it (``<run>.final.img``).  Skipped, with the
    reason, where qemu or the guest kernel is missing."""
    from harness.record.qemu import QemuBackend
    from harness.sweep.matrix import MULTI
    from workloads.run import record_workload

    ok, why = QemuBackend.available()
    if not ok:
        pytest.skip(f"qemu backend unavailable: {why}")
    root = tmp_path_factory.mktemp("qemu-runs")
    runs = {}
    for sut in ("sqlite-wal-full", "sqlite-delete-extra"):
        run = root / sut
        record_workload(sut, MULTI, run, backend="qemu",
                        final_image=root / f"{sut}.final.img",
                        blktrace=sut == "sqlite-wal-full")
        runs[sut] = run
    return runs
