"""Fixtures shared by the test modules, and the one place that decides what
this machine can run.

Markers (pyproject.toml registers them): ``needs_root`` (root, loop devices,
mounts), ``needs_fuse`` (the fuse recording backend: root, /dev/fuse, loop
devices, logfuse built), ``needs_qemu`` (the qemu backend; ``needs_qemu("f2fs")``
also asks that the guest kernel can mount that file system).  A test so
marked is skipped, with the reason, where the facility is absent; never
silently.  Every test with none of them (and not ``slow``) is in the unit
tier, marked ``unit`` here: ``pytest -m unit`` (``make check``) runs what
needs no root, loop device, FUSE, qemu or recording."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import Recordings, loops, mounts, procs_mentioning

# `root` is the older name of needs_root: a test written with it still skips.
FACILITY_MARKS = ("needs_root", "needs_fuse", "needs_qemu", "root")
# Fixtures that bring a facility with them: a test using one needs it too.
FIXTURE_NEEDS = {"recorded": "needs_fuse", "qemu_runs": "needs_qemu", "private_tmp": "needs_root"}


@functools.cache
def root_missing() -> str | None:
    """Why root's facilities (loop devices, mounts) are absent, or None."""
    if os.geteuid() != 0:
        return "needs root (loop devices and mounts)"
    if not Path("/dev/loop-control").exists():
        return "needs loop devices (/dev/loop-control)"
    return None


@functools.cache
def fuse_missing() -> str | None:
    """Why the fuse recording backend is unavailable here, or None."""
    from harness.record.fuse import FuseBackend

    ok, why = FuseBackend.available()
    return None if ok else f"fuse backend: {why}"


@functools.cache
def qemu_missing(fs: str | None = None) -> str | None:
    """Why the qemu backend (recording file system ``fs``, if given) is
    unavailable here, or None."""
    from harness.record.qemu import QemuBackend

    ok, why = QemuBackend.available()
    if ok and fs is not None:
        ok, why = QemuBackend.supports(fs)
    if ok:
        return None
    return f"qemu backend cannot record {fs}: {why}" if fs else f"qemu backend: {why}"


def missing(item: pytest.Item) -> str | None:
    """Why ``item`` cannot run on this machine (its first absent facility), or None."""
    for mark in item.iter_markers():
        if mark.name in ("needs_root", "root"):
            why = root_missing()
        elif mark.name == "needs_fuse":
            why = fuse_missing()
        elif mark.name == "needs_qemu":
            why = qemu_missing(*mark.args)
        else:
            continue
        if why:
            return why
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give each test the facility marks of its fixtures, and the ``unit``
    mark to each that needs no facility and is not slow."""
    for item in items:
        for fixture, mark in FIXTURE_NEEDS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(mark)
        if not any(item.get_closest_marker(name) for name in (*FACILITY_MARKS, "slow")):
            item.add_marker("unit")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip, with the reason, a test whose facility is absent, before any of
    its fixtures (which may record) is set up."""
    why = missing(item)
    if why:
        pytest.skip(why)


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
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recordings:
    """The session's shared recordings (see Recordings); needs the fuse backend."""
    return Recordings(tmp_path_factory.mktemp("recorded"))


@pytest.fixture(autouse=True)
def _shared_runs_untouched(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test that used the shared recordings, verify that it left
    them as recorded: the failure names the test that wrote, not a later one."""
    yield
    if "recorded" in request.fixturenames:
        request.getfixturevalue("recorded").verify()


@pytest.fixture(scope="session")
def qemu_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Recordings through the qemu backend (the guest kernel's dm-log-writes),
    made once per test session and shared: ``{sut: run folder}`` for
    sqlite-wal-full (with ``--blktrace``) and sqlite-delete-extra on MULTI
    (ext4), each with the guest's final image beside it (``<run>.final.img``).
    The needs_qemu mark (given to every test using it) skips where qemu or
    the guest kernel is missing."""
    from harness.sweep.matrix import MULTI
    from workloads.run import record_workload

    root = tmp_path_factory.mktemp("qemu-runs")
    runs = {}
    for sut in ("sqlite-wal-full", "sqlite-delete-extra"):
        run = root / sut
        record_workload(
            sut,
            MULTI,
            run,
            backend="qemu",
            final_image=root / f"{sut}.final.img",
            blktrace=sut == "sqlite-wal-full",
        )
        runs[sut] = run
    return runs
