"""Materialise a disk image from a base image and a log, up to an entry
number or a mark: the semantics of xfstests' ``replay-log --limit N``
(replay entries 0..N-1) and ``--end-mark NAME`` (replay up to and including
the first mark NAME)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from harness.errors import CrashlabError
from harness.logformat import Entry, LogReader


def apply_entry(fd: int, reader: LogReader, entry: Entry) -> None:
    """Apply one entry to an image open at ``fd``: a write puts its payload,
    a discard zeroes its range (what a replay onto a file does); marks and
    bare flushes change nothing."""
    s = reader.sectorsize
    if entry.is_discard:
        length = entry.nr_sectors * s
        os.pwrite(fd, bytes(length), entry.sector * s)
    elif entry.has_payload:
        os.pwrite(fd, reader.payload(entry), entry.sector * s)


def apply_flips(fd: int, flips: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """XOR each ``(byte offset, mask)`` into the image open (read-write) at
    ``fd`` (a corrupt fault's flipped bits); return the ``(offset, 1)``
    ranges changed."""
    changed = []
    for off, mask in flips:
        old = os.pread(fd, 1, off).ljust(1, b"\0")
        os.pwrite(fd, bytes([old[0] ^ mask]), off)
        changed.append((off, 1))
    return changed


def replay(
    base: Path,
    log: Path,
    out: Path,
    *,
    limit: int | None = None,
    end_mark: str | None = None,
    salvage: bool = False,
) -> int:
    """Copy ``base`` to ``out`` and apply the log to it; return the number of
    entries applied.  ``out`` is written under a temporary name and renamed
    when complete."""
    if limit is not None and end_mark is not None:
        raise CrashlabError("give --limit or --end-mark, not both")
    if limit is not None and limit < 0:
        raise CrashlabError(f"--limit must be >= 0, not {limit}")
    if not base.is_file():
        raise CrashlabError(f"{base}: no such base image")
    tmp = out.with_name(f".{out.name}.partial")
    applied = 0
    found_mark = end_mark is None
    try:
        shutil.copyfile(base, tmp)
        with LogReader(log, salvage=salvage) as reader:
            fd = os.open(tmp, os.O_WRONLY)
            try:
                for entry in reader.entries():
                    if limit is not None and applied >= limit:
                        break
                    apply_entry(fd, reader, entry)
                    applied += 1
                    if end_mark is not None and entry.is_mark and entry.label == end_mark:
                        found_mark = True
                        break
            finally:
                os.close(fd)
        if not found_mark:
            raise CrashlabError(f"{log}: no mark named {end_mark!r}")
        if limit is not None and applied < limit:
            raise CrashlabError(f"{log}: --limit {limit} but the log has {applied} entries")
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return applied
