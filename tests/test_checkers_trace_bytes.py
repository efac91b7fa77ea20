"""DHL-T2 sees the bytes: a page write that changes what a committed slot
owns (its header, offset array, records) fails, even when every TID looks
right.  The edit of the issue: in one page write of a TC run, swap two
offsets of the committed slot and zero its free-space field."""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest
from support import Recordings

from checkers.dhl_format import footprint, slot
from harness.check.runlevel import trace_verdicts
from harness.logformat import LogReader
from harness.rundir import RunDir
from harness.sweep.matrix import DHL_INSERT

PS = 4096


def _page(records: list[bytes]) -> bytes:
    """A data page whose slot 0 (TID 5) holds ``records``."""
    page = bytearray(PS)
    top = PS
    for i, r in enumerate(records):
        top -= len(r)
        page[top : top + len(r)] = r
        struct.pack_into("<H", page, 24 + 4 * i, top)
    struct.pack_into("<IHHHBB", page, 0, 5, len(records), top, 0, 1, 0)
    return bytes(page)


def test_footprint_is_header_offsets_and_records() -> None:
    rec = struct.pack("<qH", 7, 3) + b"abc"
    page = _page([rec, struct.pack("<qH", 9, 1) + b"z"])
    fp = footprint(page, 0, 1, 1)
    assert fp[0] == (0, 12, "slot header 0")
    assert (24, 26, "offset 0 of slot 0") in fp and (28, 30, "offset 1 of slot 0") in fp
    assert (PS - len(rec), PS, f"record 0 of slot 0 (offset {PS - len(rec)})") in fp
    assert slot(page, 0).nrec == 2 and slot(page, 1).tid == 0


def _edit_committed_slot(run: RunDir) -> int:
    """Edit the first log write of a data page whose committed slot has two
    or more records; return its entry index."""
    with LogReader(run.log) as r:
        for e in r.entries():
            if not e.has_payload or e.sector * r.sectorsize < PS or e.nr_sectors * 512 != PS:
                continue
            page = bytearray(r.payload(e))
            t = [slot(page, s).tid for s in range(2)]
            if not all(t):
                continue
            s = t.index(min(t))  # the older slot: the committed one the write must keep
            if slot(page, s).nrec < 2:
                continue
            a, b = 24 + 2 * s, 28 + 2 * s
            page[a : a + 2], page[b : b + 2] = page[b : b + 2], page[a : a + 2]
            struct.pack_into("<H", page, s * 12 + 6, 0)
            fd = os.open(run.log, os.O_RDWR)
            os.pwrite(fd, bytes(page), e.offset + r.sectorsize)
            os.close(fd)
            return e.index
    raise AssertionError("no write of a page with a committed slot of 2+ records")


@pytest.mark.needs_fuse
def test_editing_the_committed_slot_fails_dhl_t2(recorded: Recordings, tmp_path: Path) -> None:
    run = recorded("dhl-tc-raw", DHL_INSERT, "raw")
    clean = {v.invariant: v for v in trace_verdicts(run)}
    assert all(v.status == "pass" for v in clean.values())
    edited = RunDir(tmp_path / "edited")
    shutil.copytree(run.path, edited.path)
    entry = _edit_committed_slot(edited)
    got = {v.invariant: v for v in trace_verdicts(edited)}
    t2 = got["DHL-T2"]
    assert t2.status == "fail", t2.explanation
    assert f"entry {entry} " in " ".join(t2.implicated), t2.implicated
    assert "committed slot" in t2.explanation and "offset" in t2.explanation
