"""DHL on a real block device (a loop device): the crash sequences that once
made recovery commit a partial transaction, run against the engine on the
device itself, and against the old engine (the ``dhl-bounded-scan`` and
``dhl-format-no-wipe`` mutants of tests/mutants/) to show that these tests
catch it.

1. Rolled back, then reused: keys 0..7 committed; transaction T inserts
   100..103 (a split: pages 0-3) and only pages 2 and 3 persist; recovery;
   the next transaction inserts 200..203 and every page but 2 persists;
   recovery.  The old engine scanned only the pages below the page count on
   a block device and reused T's TID, so T's stale headers on pages 2-3
   completed the count of the next transaction.
2. Formatting a used device must leave no slot header of the old database.
3. The checkers' in-memory recovery (``MemIO(blockdev=True)``) gives, for
   every crash state of a recorded raw run, the bytes the engine writes when
   it recovers the same crash image on a loop device.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import ROOT, Recordings, build

from dhl import Database
from dhl.binding import CaptureIO, recovered_in_memory, recovered_on_device
from harness.images import verified_base_for_run
from harness.logformat import LogReader
from harness.materialize import sparse_copy, write_state_image
from harness.mutants import build as build_mutant
from harness.mutants import catalogue
from harness.states import Enumeration, Options
from harness.sweep.matrix import DHL_INSERT
from harness.sysops import loop_attach, loop_detach

PAGE = 4096
VALUE = b"v" * 400  # 9 records fill a 4 KiB leaf: the next ones split it
pytestmark = pytest.mark.needs_root


@contextlib.contextmanager
def loop_device(path: Path) -> Iterator[str]:
    """``path`` attached to a loop device (buffered, so the device and the
    file agree); detached by name afterwards."""
    dev = loop_attach(path, direct_io=False)
    try:
        yield dev
    finally:
        loop_detach(dev)


def _device_bytes(dev: str) -> bytes:
    with open(dev, "rb", buffering=0) as f:
        return f.read()


def _capture(
    dev: str, scratch: Path, mode: str, keys: range, value: bytes
) -> list[tuple[int, bytes]]:
    """The page writes of one transaction inserting ``keys``, made on a copy
    of the device (a block device's, so the engine behaves as on ``dev``)."""
    copy = scratch / "copy.img"
    copy.write_bytes(_device_bytes(dev))
    with CaptureIO(copy, blockdev=True) as io, Database(copy, mode, io=io) as db:
        db.begin()
        for k in keys:
            db.insert(0, k, value)
        db.commit()
        return [(op.offset, op.data) for op in io.ops if op.kind == "write"]


def _persist(dev: str, writes: list[tuple[int, bytes]], pages: set[int]) -> None:
    """A crash that left only the writes to ``pages`` on the device."""
    fd = os.open(dev, os.O_WRONLY)
    try:
        for off, data in writes:
            if off // PAGE in pages:
                os.pwrite(fd, data, off)
        os.fsync(fd)
    finally:
        os.close(fd)


def issue_sequence(scratch: Path, mode: str = "cc") -> dict[str, object]:
    """Run the rolled-back-then-reused sequence on a loop device; return what
    the last recovery left (keys, structure check, recovery facts)."""
    img = scratch / "dev.img"
    with open(img, "wb") as f:
        f.truncate(1 << 20)
    with loop_device(img) as dev:
        with Database(dev, mode, create=True, truncate=True) as db:
            for k in range(8):  # FCC 9: creation + 8 transactions, 2 pages
                db.begin()
                db.insert(0, k, VALUE)
                db.commit()
        t1 = _capture(dev, scratch, mode, range(100, 104), VALUE)
        pages1 = sorted({off // PAGE for off, _ in t1})
        _persist(dev, t1, {2, 3})
        with Database(dev, mode) as db:
            first = db.recovery()
        t2 = _capture(dev, scratch, mode, range(200, 204), VALUE)
        pages2 = sorted({off // PAGE for off, _ in t2})
        _persist(dev, t2, set(pages2) - {2})
        with Database(dev, mode) as db:
            second = db.recovery()
            keys = [k for k, _ in db.scan(0)]
            try:
                db.check()
                check = "ok"
            except Exception as e:  # noqa: BLE001 - the message is the result
                check = str(e)
    return {
        "pages1": pages1,
        "pages2": pages2,
        "keys": keys,
        "check": check,
        "first_invalid": first.invalid_headers,
        "first_scanned": first.scanned_pages,
        "second_rolled_back": second.rolled_back,
        "next_tid_after_first": first.next_tid,
        "fcc_after_first": first.fcc,
    }


def format_used_device(scratch: Path) -> list[int]:
    """Fill a device with a database, zero its first sector (as a wiped
    header), format it anew: the pages past page 0 that still hold bytes."""
    img = scratch / "used.img"
    with open(img, "wb") as f:
        f.truncate(1 << 20)
    with loop_device(img) as dev:
        with Database(dev, "cc", create=True, truncate=True) as db:
            for k in range(60):
                db.begin()
                db.insert(0, k, VALUE)
                db.commit()
        fd = os.open(dev, os.O_WRONLY)
        os.pwrite(fd, bytes(512), 0)
        os.fsync(fd)
        os.close(fd)
        Database(dev, "cc", create=True, truncate=True).close()
        data = _device_bytes(dev)
    return [p for p in range(1, len(data) // PAGE) if any(data[p * PAGE : (p + 1) * PAGE])]


def _with_mutant(name: str, func: str, scratch: Path) -> str:
    """Run ``func(scratch)`` of this module in a child process whose libdhl
    is mutant ``name``'s; its repr."""
    lib = build_mutant(next(m for m in catalogue() if m.name == name)) / "dhl/build/libdhl.so"
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT / 'tests')!r}); "
        f"import test_dhl_blockdev as t; from pathlib import Path; "
        f"print(repr(t.{func}(Path({str(scratch)!r}))))"
    )
    p = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "DHL_LIB": str(lib)},
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


@pytest.fixture(scope="module", autouse=True)
def _built() -> None:
    build("dhl/build/libdhl.so")


def test_rolled_back_then_reused_recovers_atomically(tmp_path: Path) -> None:
    got = issue_sequence(tmp_path)
    assert got["pages1"] == [0, 1, 2, 3] and got["pages2"] == [0, 1, 2, 3]
    assert got["first_invalid"] == 2  # T's headers on pages 2 and 3
    assert got["first_scanned"] == 256  # every page of the 1 MiB device
    assert got["next_tid_after_first"] == got["fcc_after_first"] + 2  # T's TID is not reused
    assert got["second_rolled_back"] == 1
    assert got["keys"] == list(range(8)) and got["check"] == "ok"


def test_the_old_engine_fails_the_sequence(tmp_path: Path) -> None:
    got = eval(_with_mutant("dhl-bounded-scan", "issue_sequence", tmp_path))  # noqa: S307
    assert got["first_invalid"] == 0  # the stale headers past the page count stayed
    assert got["keys"] != list(range(8)) or got["check"] != "ok"
    assert got["check"] != "ok"  # "key 101 outside its parent's range"


def test_format_on_a_used_device_leaves_no_old_headers(tmp_path: Path) -> None:
    assert format_used_device(tmp_path) == []


def test_the_old_format_leaves_old_pages(tmp_path: Path) -> None:
    assert _with_mutant("dhl-format-no-wipe", "format_used_device", tmp_path) != "[]"


@pytest.mark.needs_fuse
def test_checker_recovery_equals_recovery_on_a_loop_device(
    recorded: Recordings, tmp_path: Path
) -> None:
    """Every prefix state of a recorded dhl-cc-raw run and a budget's
    stratified sample of its reorder states (every epoch's kept sets; all
    of them are ~10,000): the checkers' in-memory, block-device recovery
    writes the same bytes as the engine recovering the crash image on a
    loop device."""
    run = recorded("dhl-cc-raw", DHL_INSERT, "raw")
    base = verified_base_for_run(run)
    img = tmp_path / "dev.img"
    sparse_copy(base, img)
    seen = compared = 0
    with loop_device(img) as dev, LogReader(run.log) as reader:
        for strategy in ("prefix", "reorder"):
            for state in Enumeration(reader, Options(strategy=strategy, budget=500)):
                seen += 1
                crash = tmp_path / "crash.img"
                sparse_copy(base, crash)
                fd = os.open(crash, os.O_RDWR)
                try:
                    write_state_image(fd, reader, state)
                finally:
                    os.close(fd)
                data = crash.read_bytes()
                # the same bytes, or the same error code
                assert recovered_in_memory(data, "cc", blockdev=True) == recovered_on_device(
                    dev, data, "cc"
                ), state.id
                compared += 1
    assert compared == seen > 500
